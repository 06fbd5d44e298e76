//! AVX2 + FMA path of [`super::matmul`]: operands widened to f32 with DAZ, then a
//! register-blocked `vfmadd231ps` kernel of `MR` rows of `m` × `NR` ymm vectors (8 columns
//! each) of `n`. Packed layouts as on the AVX-512 path: stationary block `mb` is
//! `a[(mb * K + k) * MR + r]`, moving panel `p` is `b[(p * K + k) * NC + c]`.

use core::arch::x86_64::*;
use core::mem::transmute;
use core::ops::Range;

use nki_lang::DType;

use super::{CANONICAL_NAN, MatmulScratch, Operand, Output, exact_block, products_on_grid};
use crate::cpu::convert::f16_to_f32;

/// Rows of `m` per register block.
const MR: usize = 6;
/// Most ymm vectors of `n` per register block (`MR * NR` accumulators; with the `NR` moving
/// vectors and a broadcast that is 15 of the 16 ymm registers).
const NR: usize = 2;
/// Columns per moving panel.
const NC: usize = NR * 8;

/// Operand rows to prefetch ahead while packing (SBUF rows are far apart).
const PREFETCH: usize = 4;

/// bf16 element type code for the const-generic packers.
const BF16: u8 = 1;
/// f16 element type code (F16C conversion).
const F16: u8 = 2;
/// f16 element type code (scalar conversion, for CPUs without F16C).
const F16_SOFT: u8 = 3;
/// f32 element type code.
const F32: u8 = 4;

/// Lane mask (all ones in the first `n` lanes) for `vmaskmovps`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn lanes(n: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n.min(8) as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// Widens to f32 with DAZ and multiplies with FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA; the operands and the output must have been validated by
/// `super::matmul::validate`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn matmul_f32(
    scratch: &mut MatmulScratch,
    st: &Operand,
    mv: &Operand,
    out: &mut Output,
    accumulate: bool,
    cols: Range<usize>,
) {
    let (k, m, w) = (st.rows, st.cols, cols.len());
    let a = scratch.a.as_mut_slice();
    let b = scratch.b.as_mut_slice();
    let blocks = m.div_ceil(MR);
    assert!(blocks * MR * k <= a.len() && w.div_ceil(NC) * NC * k <= b.len());
    let f16c = std::is_x86_feature_detected!("f16c");
    // SAFETY: validated operands; the packed sizes fit the buffers (asserted above); F16C is
    // only used when detected.
    let (key_a, key_b) = unsafe {
        (
            pack_any::<MR>(st, 0, m, a.as_mut_ptr(), f16c),
            pack_any::<NC>(mv, cols.start, w, b.as_mut_ptr(), f16c),
        )
    };
    let ops_ok = products_on_grid(key_a, st.dtype, key_b, mv.dtype);
    let (a, b) = (a.as_ptr().cast::<f32>(), b.as_ptr().cast::<f32>());
    let base = out.data.as_mut_ptr();
    for p in 0..w.div_ceil(NC) {
        let width = (w - p * NC).min(NC);
        let last = width - (width - 1) / 8 * 8;
        for mb in 0..blocks {
            let rows = (m - mb * MR).min(MR);
            // SAFETY: the block's packed data lies in the buffers; the output block starts at
            // a validated element and `rows`/`last` keep every access inside the output.
            unsafe {
                let o = base.add(out.offset + mb * MR * out.row_stride + cols.start + p * NC);
                let ap = a.add(mb * k * MR);
                let bp = b.add(p * k * NC);
                let s = out.row_stride;
                match width.div_ceil(8) {
                    1 => kernel::<1>(k, ap, bp, o, s, rows, last, accumulate, ops_ok),
                    _ => kernel::<2>(k, ap, bp, o, s, rows, last, accumulate, ops_ok),
                }
            }
        }
    }
}

/// Dispatches [`pack`] on the operand's dtype (once per call).
///
/// # Safety
/// As for [`pack`]; `f16c` only if the CPU has F16C.
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_any<const BW: usize>(
    op: &Operand,
    c0: usize,
    width: usize,
    dst: *mut u32,
    f16c: bool,
) -> u32 {
    // SAFETY: forwarded caller contract.
    unsafe {
        match op.dtype {
            DType::Bf16 => pack::<BF16, BW>(op, c0, width, dst),
            DType::F16 if f16c => pack_f16c::<BW>(op, c0, width, dst),
            DType::F16 => pack::<F16_SOFT, BW>(op, c0, width, dst),
            DType::F32 => pack::<F32, BW>(op, c0, width, dst),
            DType::Tf32
            | DType::F8E4M3
            | DType::F8E5M2
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::Bool => {
                unreachable!(
                    "validate_operand admits f32, bf16 and f16, not {:?}",
                    op.dtype
                )
            }
        }
    }
}

/// [`pack`] for f16 with F16C enabled.
///
/// # Safety
/// As for [`pack`]; the CPU must have F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_f16c<const BW: usize>(op: &Operand, c0: usize, width: usize, dst: *mut u32) -> u32 {
    // SAFETY: forwarded caller contract.
    unsafe { pack::<F16, BW>(op, c0, width, dst) }
}

/// Loads 8 elements of type `D` at `p` and widens them to f32 bits (no DAZ yet).
///
/// # Safety
/// 8 elements readable at `p`; `D == F16` needs F16C.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load8<const D: u8>(p: *const u8) -> __m256i {
    // SAFETY: the caller's contract; loads are unaligned.
    unsafe {
        match D {
            F32 => _mm256_loadu_si256(p.cast()),
            BF16 => _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()))),
            F16 => _mm256_castps_si256(cvtph(_mm_loadu_si128(p.cast()))),
            _ => {
                let h: [u16; 8] = core::ptr::read_unaligned(p.cast());
                let f: [f32; 8] = h.map(f16_to_f32);
                _mm256_loadu_si256(f.as_ptr().cast())
            }
        }
    }
}

/// `vcvtph2ps` (only reached from [`pack_f16c`], where F16C is enabled).
///
/// # Safety
/// The CPU must have F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn cvtph(h: __m128i) -> __m256 {
    _mm256_cvtph_ps(h)
}

/// Widens `op[k][c0 .. c0 + width]` to f32 with DAZ into blocks of `BW` columns: element
/// `(k, i)` goes to `dst[(i / BW * K + k) * BW + i % BW]`; returns the minimum exponent key (see
/// `super::matmul::exp_key`). Columns past `width` up to the next multiple of `BW` are zero.
///
/// # Safety
/// Validated operand of element type `D` with `c0 + width <= op.cols`; `dst` must hold
/// `ceil(width / BW) * BW` columns of every row (and, if `BW` is a multiple of 8, the multiple
/// of 8 above `width`).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack<const D: u8, const BW: usize>(
    op: &Operand,
    c0: usize,
    width: usize,
    dst: *mut u32,
) -> u32 {
    let size = if D == F32 { 4 } else { 2 };
    let src = op.data.as_ptr();
    let exp = _mm256_set1_epi32(0x7f80_0000);
    let one = _mm256_set1_epi32(1);
    let mut keys = _mm256_set1_epi32(-1);
    for k in 0..op.rows {
        let ahead = src.wrapping_add(op.offset + (k + PREFETCH) * op.row_stride + c0 * size);
        for i in (0..width).step_by(8) {
            let n = (width - i).min(8);
            if k + PREFETCH < op.rows {
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(i * size).cast());
            }
            // SAFETY: the row is in bounds for `n` elements; a partial chunk is copied to a
            // zeroed stack buffer first.
            let x = unsafe {
                let at = src.add(op.offset + k * op.row_stride + (c0 + i) * size);
                if n == 8 {
                    load8::<D>(at)
                } else {
                    let mut tmp = [0u8; 32];
                    core::ptr::copy_nonoverlapping(at, tmp.as_mut_ptr(), n * size);
                    load8::<D>(tmp.as_ptr())
                }
            };
            let x = if D == F16 || D == F16_SOFT {
                x // f16 values widen to normal f32 values or zeros
            } else {
                let sub = _mm256_cmpeq_epi32(_mm256_and_si256(x, exp), _mm256_setzero_si256());
                let zero = _mm256_and_si256(x, _mm256_set1_epi32(i32::MIN));
                _mm256_blendv_epi8(x, zero, sub)
            };
            let key = _mm256_sub_epi32(_mm256_srli_epi32::<23>(_mm256_and_si256(x, exp)), one);
            keys = _mm256_min_epu32(keys, key);
            // SAFETY: the caller sized `dst` for these blocks; with `BW` a multiple of 8 the
            // stores are 32-byte aligned in a 64-byte aligned buffer.
            unsafe {
                if BW.is_multiple_of(8) {
                    let p = dst.add((i / BW * op.rows + k) * BW + i % BW);
                    _mm256_store_si256(p.cast(), x);
                } else {
                    // Narrow blocks (the stationary operand): element by element, padding the
                    // last block's missing rows with zeros.
                    let x: [u32; 8] = transmute::<__m256i, [u32; 8]>(x);
                    let end = if i + 8 >= width {
                        width.div_ceil(BW) * BW
                    } else {
                        i + 8
                    };
                    for c in i..end {
                        let v = if c - i < 8 { x[c - i] } else { 0 };
                        *dst.add((c / BW * op.rows + k) * BW + c % BW) = v;
                    }
                }
            }
        }
    }
    // SAFETY: `__m256i` and `[u32; 8]` have the same size; every bit pattern is valid.
    let keys: [u32; 8] = unsafe { transmute::<__m256i, [u32; 8]>(keys) };
    keys.into_iter().min().unwrap_or(u32::MAX)
}

/// One `MR × N·8` block over all `k` (see the AVX-512 `kernel_f32`).
///
/// # Safety
/// `a` holds `k * MR` packed floats, `b` `k` rows of `NC` (the first `N * 8` read); rows
/// `< rows` of the output block, the first `last` lanes of its last vector, are in bounds.
#[inline]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel<const N: usize>(
    k: usize,
    a: *const f32,
    b: *const f32,
    out: *mut f32,
    stride: usize,
    rows: usize,
    last: usize,
    accumulate: bool,
    ops_ok: bool,
) {
    let exp = _mm256_set1_epi32(0x7f80_0000);
    let sign = _mm256_set1_epi32(i32::MIN);
    let last_mask = lanes(last);
    let mask = |c: usize| {
        if c == N - 1 {
            last_mask
        } else {
            _mm256_set1_epi32(-1)
        }
    };
    let mut acc = [[_mm256_set1_ps(-0.0); N]; MR];
    let mut grid = ops_ok;
    if accumulate {
        let mut bad = _mm256_setzero_si256();
        for (r, row) in acc.iter_mut().enumerate().take(rows) {
            for (c, v) in row.iter_mut().enumerate() {
                // SAFETY: in bounds by the caller's contract (masked lanes are not accessed).
                let x = unsafe { _mm256_maskload_ps(out.add(r * stride + c * 8), mask(c)) };
                let bits = _mm256_castps_si256(x);
                let e = _mm256_and_si256(bits, exp);
                let sub = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
                let x = _mm256_blendv_epi8(bits, _mm256_and_si256(bits, sign), sub);
                // Off the 2^-126 grid: exponent field in 1..=23, i.e. (e >> 23) - 1 < 23.
                let e1 = _mm256_add_epi32(_mm256_srli_epi32::<23>(e), _mm256_set1_epi32(i32::MAX));
                bad = _mm256_or_si256(
                    bad,
                    _mm256_cmpgt_epi32(_mm256_set1_epi32(i32::MIN + 23), e1),
                );
                *v = _mm256_castsi256_ps(x);
            }
        }
        grid &= _mm256_testz_si256(bad, bad) == 1;
    }
    let mut exact = [[0u8; N]; MR];
    // SAFETY: forwarded caller contract.
    unsafe {
        if grid {
            acc = fma_loop::<N, MR, false>(k, a, b, acc).0;
        } else {
            // The flushing loop needs more registers: passes of `FTZ_ROWS` rows.
            for pass in 0..MR / FTZ_ROWS {
                let r0 = pass * FTZ_ROWS;
                let part: [[__m256; N]; FTZ_ROWS] = core::array::from_fn(|r| acc[r0 + r]);
                let (part, edges) = fma_loop::<N, FTZ_ROWS, true>(k, a.add(r0), b, part);
                for r in 0..FTZ_ROWS {
                    acc[r0 + r] = part[r];
                    exact[r0 + r] = edges;
                }
            }
            // Lanes where some step gave exactly ±2^-126: the exact scalar definition (before
            // the stores below overwrite the initial accumulators).
            let last_bits = ((1u32 << last) - 1) as u8;
            for (r, row) in exact.iter().enumerate().take(rows) {
                for (c, &e) in row.iter().enumerate() {
                    let e = e & if c == N - 1 { last_bits } else { 0xff };
                    for l in (0..8).filter(|l| e >> l & 1 == 1) {
                        let col = c * 8 + l;
                        let o = out.add(r * stride + col);
                        exact_block(k, a.add(r), MR, b.add(col), NC, o, stride, 1, 1, accumulate);
                    }
                }
            }
        }
    }
    let nan = _mm256_castsi256_ps(_mm256_set1_epi32(CANONICAL_NAN as i32));
    for (r, row) in acc.iter().enumerate().take(rows) {
        for (c, &v) in row.iter().enumerate() {
            let v = _mm256_blendv_ps(v, nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            // Lanes recomputed exactly are left alone.
            let keep = _mm256_andnot_si256(lanes_of(exact[r][c]), mask(c));
            // SAFETY: in bounds by the caller's contract (masked lanes are not accessed).
            unsafe { _mm256_maskstore_ps(out.add(r * stride + c * 8), keep, v) };
        }
    }
}

/// Rows per pass of the flushing FMA loop (2 × 2 accumulators plus its constants fit the 16
/// ymm registers).
const FTZ_ROWS: usize = 2;

/// The all-ones lanes of a bit mask.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn lanes_of(bits: u8) -> __m256i {
    let bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(bits as i32), bit), bit)
}

/// The FMA chain over `k` for `R` rows (row `r` of step `kk` broadcasts `a[kk * MR + r]`).
/// With `FTZ`, each step flushes subnormal results to signed zero, and the second result marks
/// per column (lane of each vector) whether some step of some row produced exactly `±2^-126`,
/// where the flush decision needs the exact sum (the caller recomputes those columns).
///
/// # Safety
/// As for [`kernel`].
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loop<const N: usize, const R: usize, const FTZ: bool>(
    k: usize,
    a: *const f32,
    b: *const f32,
    mut acc: [[__m256; N]; R],
) -> ([[__m256; N]; R], [u8; N]) {
    let exp = _mm256_set1_epi32(0x7f80_0000);
    let sign = _mm256_set1_epi32(i32::MIN);
    let abs = _mm256_set1_epi32(0x7fff_ffff);
    let min_pos = _mm256_set1_epi32(0x0080_0000);
    // Per column, the min over steps of (|r| XOR 2^-126): zero iff some |r| was 2^-126.
    let mut edge = [_mm256_set1_epi32(-1); N];
    for kk in 0..k {
        // SAFETY: within the packed buffers by the caller's contract; `b` rows are 32-byte
        // aligned.
        unsafe {
            let bp = b.add(kk * NC);
            let bv: [__m256; N] = core::array::from_fn(|c| _mm256_load_ps(bp.add(c * 8)));
            let ap = a.add(kk * MR);
            for (r, row) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*ap.add(r));
                for ((v, &bc), e) in row.iter_mut().zip(&bv).zip(edge.iter_mut()) {
                    let new = _mm256_fmadd_ps(av, bc, *v);
                    *v = if FTZ {
                        let bits = _mm256_castps_si256(new);
                        let off = _mm256_xor_si256(_mm256_and_si256(bits, abs), min_pos);
                        *e = _mm256_min_epu32(*e, off);
                        let sub =
                            _mm256_cmpeq_epi32(_mm256_and_si256(bits, exp), _mm256_setzero_si256());
                        let flushed = _mm256_and_si256(bits, sign);
                        _mm256_castsi256_ps(_mm256_blendv_epi8(bits, flushed, sub))
                    } else {
                        new
                    };
                }
            }
        }
    }
    let zero = _mm256_setzero_si256();
    let hit = |e: __m256i| _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(e, zero)));
    (acc, edge.map(|e| if FTZ { hit(e) as u8 } else { 0 }))
}
