//! AVX2 + FMA path of [`super::matmul`]: operands widened to f32 with DAZ while packing, then a
//! register-blocked `vfmadd231ps` kernel of [`MR`] rows of `m` × up to [`NR`] ymm vectors (8
//! columns each) of `n`.
//!
//! Packed layouts (in the scratch buffers, 64-byte aligned), the same scheme as the AVX-512 f32
//! path's (`super::avx512`) with narrower register blocks and moving panels:
//! - stationary block `sb` of [`SB`] columns (the stationary block every layout shares, so
//!   that threads can split a packing's rows at multiples of it) is
//!   `a[sb · block_stride(K, SB) + k · SB + r]`; the kernel runs on each half of a block (`MR`
//!   rows), broadcasting `a[k · SB + r]`;
//! - moving panel `p` of [`NC`] columns is `b[p · block_stride(K, NC) + k · NC + c]`.
//!
//! Blocks are padded by one cache line ([`block_stride`]): a packer writes the same row of
//! every block in turn, and unpadded those rows would be a multiple of 4 KiB apart and all fall
//! in one L1 set. Each packer reads every source row once, front to back, with vector loads and
//! aligned vector stores. Results are stored with plain stores, masked (`vmaskmovps`) only for
//! the last partial vector of a row and for lanes the exact fallback recomputed.
//!
//! Why `4 × 24`: blocks of 4 rows tile the 8-row stationary blocks that the threads' row splits
//! and the AVX-512 layouts use, and 12 accumulators keep two FMA pipes of latency 4 busy with
//! slack (3 moving loads and 4 broadcasts per 12 FMAs). A `4 × 16` block's 8 accumulators are
//! exactly latency × pipes, and ran at 85 % of the FMA rate from L1 (`fma_bound`; the seed tile
//! 145 µs against 128 µs on a Zen 5 forced to this path). The full block's loop is written with
//! its registers assigned by hand ([`fma_loop_full`]): all 16 ymm registers are live, and the
//! compiler's allocator spills an accumulator on every step (252 µs; 268 µs against 203 µs on
//! the Intel Xeon of `docs/performance.md`, when this was first tried).

use core::arch::x86_64::*;
use core::mem::transmute;
use core::ops::Range;

use nki_lang::DType;

use super::{
    CANONICAL_NAN, CopyAt, CopyOut, Link, MatmulScratch, Operand, Output, block_stride,
    exact_block, packed_key, products_on_grid,
};
use crate::cpu::convert::f16_to_f32;
use crate::cpu::convert::x86::f32_to_bf16_x8;

/// Rows of `m` per register block.
const MR: usize = 4;
/// Columns of the stationary operand per packed block.
const SB: usize = super::STATIONARY_BLOCK;
const _: () = assert!(SB.is_multiple_of(MR) && SB == 8);
/// Most ymm vectors of `n` per register block (`MR * NR` accumulators; with the `NR` moving
/// vectors and a broadcast that is all 16 ymm registers).
const NR: usize = 3;
/// Columns per moving panel.
const NC: usize = NR * 8;
/// Columns per panel of the packed moving operand.
pub(super) const PANEL: usize = NC;

/// Operand rows ahead of the one being packed that the packers prefetch (operand rows are a
/// partition apart: short runs the hardware prefetchers barely start on).
const PREFETCH_ROWS: usize = 4;

/// bf16 element type code for the const-generic packers.
const BF16: u8 = 1;
/// f16 element type code (F16C conversion).
const F16: u8 = 2;
/// f16 element type code (scalar conversion, for CPUs without F16C).
const F16_SOFT: u8 = 3;
/// f32 element type code.
const F32: u8 = 4;

/// The words the packing of columns `[0, col)` of a moving operand of `k` rows takes: where
/// column `col` (a multiple of [`NC`], or the last column) starts.
pub(super) const fn packed_moving_offset(k: usize, col: usize) -> usize {
    col.div_ceil(NC) * block_stride(k, NC)
}

/// The words between two packed blocks of [`SB`] stationary columns, for `k` rows.
pub(super) const fn packed_stationary_block(k: usize) -> usize {
    block_stride(k, SB)
}

/// Lane mask (all ones in the first `n` lanes) for `vmaskmovps`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn lanes(n: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n.min(8) as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// Prefetches row `k` (if it exists) of `op`'s columns `c0 .. c0 + width` (elements of `size`
/// bytes).
#[inline]
fn prefetch_row(op: &Operand, k: usize, c0: usize, width: usize, size: usize) {
    if k < op.rows {
        let at = op.offset + k * op.row_stride + c0 * size;
        if let Some(row) = op.data.get(at..at + width * size) {
            crate::cpu::prefetch(row);
        }
    }
}

/// Widens to f32 with DAZ and multiplies with FMA: packs the moving operand's columns `cols`
/// and the stationary operand, then [`matmul_f32_prepacked`].
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
    let MatmulScratch { a, b } = scratch;
    // SAFETY: forwarded caller contract.
    unsafe {
        let key_b = pack_moving_f32(b.as_mut_slice(), mv, cols.clone());
        let key_a = pack_stationary_f32(a.as_mut_slice(), st);
        let ops_ok = products_on_grid(key_a, st.dtype, key_b, mv.dtype);
        let (a, b) = (a.as_slice(), b.as_slice());
        let link = Link { a, b, k: st.rows };
        matmul_f32_prepacked(&[link], ops_ok, st.cols, out, None, accumulate, cols);
    }
}

/// Widens the moving operand's columns `cols` into `b` by panels of [`NC`] columns (panel `p`
/// at word `p · block_stride(K, NC)`), as [`matmul_f32_prepacked`] reads them, and returns their
/// exponent key (`super::matmul::exp_key` of the smallest nonzero magnitude, after DAZ).
/// Panels are independent: packing columns `[0, h)` and `[h, n)` into the two parts of a
/// buffer split at `h`'s panel (`h` a multiple of `NC`) gives the packing of `[0, n)`, whose
/// key is the minimum of the parts' keys.
///
/// # Safety
/// As for [`matmul_f32`] (for the moving operand and `cols`).
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn pack_moving_f32(b: &mut [u32], mv: &Operand, cols: Range<usize>) -> u32 {
    assert!(packed_moving_offset(mv.rows, cols.len()) <= b.len());
    // SAFETY: validated operand; the packed size fits the buffer (asserted above).
    unsafe { pack_any::<NC>(mv, cols.start, cols.len(), b.as_mut_ptr()) }
}

/// Widens the stationary operand into `a` for [`matmul_f32_prepacked`] and returns its
/// exponent key (as [`pack_moving_f32`] does), after a prefetch of every row (its rows are a
/// partition apart, and the packer's rows-ahead prefetch barely leads its reads: causal
/// attention ran 4 % faster on this path, timed with `tutorials --isa avx2` on a Zen 5).
///
/// # Safety
/// As for [`matmul_f32`] (for the stationary operand).
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn pack_stationary_f32(a: &mut [u32], st: &Operand) -> u32 {
    assert!(st.cols.div_ceil(SB) * block_stride(st.rows, SB) <= a.len());
    for k in 0..st.rows {
        prefetch_row(st, k, 0, st.cols, st.dtype.size() as usize);
    }
    // SAFETY: validated operand; the packed size fits the buffer (asserted above).
    unsafe { pack_any::<SB>(st, 0, st.cols, a.as_mut_ptr()) }
}

/// The FMA kernel on `links`, matmuls of `m` stationary columns that accumulate one after
/// another into `out` (the first as `accumulate` says), each a `k × m` stationary operand
/// widened by [`pack_stationary_f32`] and the moving operand's columns `cols` widened by
/// [`pack_moving_f32`]; `ops_ok`: the operands' keys prove that no product of any link can be
/// tiny (`super::matmul::products_on_grid`). Block by block, each block's results stored into
/// `out` after the last link, then converted into `copy` when there is one. While no result
/// can be tiny (no product, and initial values on the grid of `2^-126`, so that every sum is
/// on it too), a block's accumulators stay in registers from one link to the next: the bits of
/// the matmuls one after the other, whose flushes and DAZ of initial values then change
/// nothing; else each link of the block runs on its own, stored before the next.
///
/// # Safety
/// The CPU must support AVX2 and FMA; the output (and `copy`) must have been validated by
/// `super::matmul` for `m` rows and columns `cols` (whatever the buffers hold, every read stays
/// inside them: their sizes are asserted).
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn matmul_f32_prepacked(
    links: &[Link],
    ops_ok: bool,
    m: usize,
    out: &mut Output,
    copy: Option<&mut CopyOut>,
    accumulate: bool,
    cols: Range<usize>,
) {
    let w = cols.len();
    for l in links {
        assert!(
            m.div_ceil(SB) * block_stride(l.k, SB) <= l.a.len()
                && packed_moving_offset(l.k, w) <= l.b.len()
        );
    }
    let Some((first, rest)) = links.split_first() else {
        return;
    };
    let k = first.k;
    let (a, b) = (
        first.a.as_ptr().cast::<f32>(),
        first.b.as_ptr().cast::<f32>(),
    );
    let base = out.data.as_mut_ptr();
    let s = out.row_stride;
    let copy = copy.map(|c| CopyAt::new(c, cols.start));
    for p in 0..w.div_ceil(NC) {
        let width = (w - p * NC).min(NC);
        let last = width - (width - 1) / 8 * 8;
        for mb in 0..m.div_ceil(MR) {
            let r0 = mb * MR;
            let rows = (m - r0).min(MR);
            // SAFETY: each link's packed data lies in its buffers (asserted above); the output
            // block starts at a validated element and `rows`/`last` keep every access inside
            // the output (and the copy).
            unsafe {
                let o = base.add(out.offset + r0 * s + cols.start + p * NC);
                let ap = a.add(r0 / SB * block_stride(k, SB) + r0 % SB);
                let bp = b.add(p * block_stride(k, NC));
                let (at, more) = ((o, s, rows, last), (rest, p, r0));
                // A lone matmul's kernel has no loop over links.
                let chained = match (width.div_ceil(8), rest.is_empty()) {
                    (1, true) => kernel::<1, false>(k, ap, bp, at, accumulate, ops_ok, more),
                    (2, true) => kernel::<2, false>(k, ap, bp, at, accumulate, ops_ok, more),
                    (_, true) => kernel::<NR, false>(k, ap, bp, at, accumulate, ops_ok, more),
                    (1, false) => kernel::<1, true>(k, ap, bp, at, accumulate, ops_ok, more),
                    (2, false) => kernel::<2, true>(k, ap, bp, at, accumulate, ops_ok, more),
                    (_, false) => kernel::<NR, true>(k, ap, bp, at, accumulate, ops_ok, more),
                };
                if !chained {
                    // The other links one by one on the stored block, flushing each step
                    // (exact whatever the products).
                    for l in rest {
                        let (a, b) = link_block(l, p, r0);
                        let none = (&[][..], p, r0);
                        match width.div_ceil(8) {
                            1 => kernel::<1, false>(l.k, a, b, at, true, false, none),
                            2 => kernel::<2, false>(l.k, a, b, at, true, false, none),
                            _ => kernel::<NR, false>(l.k, a, b, at, true, false, none),
                        };
                    }
                }
                if let Some(c) = &copy {
                    let at = c.block(r0, p * NC);
                    copy_block(o, s, rows, width, at, c.row_stride, c.bf16);
                }
            }
        }
    }
}

/// Where link `l`'s block of rows `r0..` and panel `p` of packed data start.
#[inline]
fn link_block(l: &Link, p: usize, r0: usize) -> (*const f32, *const f32) {
    let (a, b) = (l.a.as_ptr().cast::<f32>(), l.b.as_ptr().cast::<f32>());
    let at = r0 / SB * block_stride(l.k, SB) + r0 % SB;
    (
        a.wrapping_add(at),
        b.wrapping_add(p * block_stride(l.k, NC)),
    )
}

/// Converts the results a kernel just stored (`rows` rows of `width` columns at `src`, rows
/// `stride` f32s apart, still in L1) into the copy at `dst` (rows `dst_stride` bytes apart):
/// bf16 with the model's rounding, or f32 as they are. The results are read back rather than
/// taken from the accumulators because the kernel fixes some lanes up after its loop.
///
/// # Safety
/// The caller's CPU has AVX2 and FMA; both regions are in bounds for `rows` × `width`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn copy_block(
    src: *const f32,
    stride: usize,
    rows: usize,
    width: usize,
    dst: *mut u8,
    dst_stride: usize,
    bf16: bool,
) {
    for r in 0..rows {
        for c in (0..width).step_by(8) {
            let n = (width - c).min(8);
            // SAFETY: in bounds by the caller's contract: full vectors lie within the row, a
            // partial one is accessed through a mask (masked lanes are not accessed) or through
            // a stack buffer of which only `n` elements are copied.
            unsafe {
                let from = src.add(r * stride + c);
                let v = if n == 8 {
                    _mm256_loadu_ps(from)
                } else {
                    _mm256_maskload_ps(from, lanes(n))
                };
                let row = dst.add(r * dst_stride);
                if bf16 {
                    let h = f32_to_bf16_x8(v);
                    if n == 8 {
                        _mm_storeu_si128(row.add(c * 2).cast(), h);
                    } else {
                        let h: [u8; 16] = transmute::<__m128i, [u8; 16]>(h);
                        core::ptr::copy_nonoverlapping(h.as_ptr(), row.add(c * 2), n * 2);
                    }
                } else if n == 8 {
                    _mm256_storeu_ps(row.add(c * 4).cast(), v);
                } else {
                    _mm256_maskstore_ps(row.add(c * 4).cast(), lanes(n), v);
                }
            }
        }
    }
}

/// Dispatches [`pack`] on the operand's dtype (once per call).
///
/// # Safety
/// As for [`pack`].
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_any<const BW: usize>(op: &Operand, c0: usize, width: usize, dst: *mut u32) -> u32 {
    // SAFETY: forwarded caller contract; F16C is only used when detected.
    unsafe {
        match op.dtype {
            DType::Bf16 => pack::<BF16, BW>(op, c0, width, dst),
            DType::F16 if std::is_x86_feature_detected!("f16c") => {
                pack_f16c::<BW>(op, c0, width, dst)
            }
            DType::F16 => pack::<F16_SOFT, BW>(op, c0, width, dst),
            DType::F32 => pack::<F32, BW>(op, c0, width, dst),
            DType::Tf32
            | DType::F8E4M3
            | DType::F8E5M2
            | DType::F8E4M3Fn
            | DType::F4E2M1Fn
            | DType::F8E8M0Fnu
            | DType::F8E5M2X4
            | DType::F8E4M3FnX4
            | DType::F4E2M1FnX4
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

/// Widens `op[k][c0 .. c0 + width]` to f32 into blocks of `BW` columns (a multiple of 8):
/// element `(k, i)` goes to `dst[i / BW · block_stride(K, BW) + k · BW + i % BW]`, row after
/// row (each source row read once, front to back); returns the minimum exponent key (see
/// `super::matmul::exp_key`). Columns past `width` up to the next multiple of 8 are zero. DAZ
/// is a second pass (`super::flush_packed`), only taken when a subnormal is present: the common
/// case pays one `min` per vector for the check.
///
/// # Safety
/// Validated operand of element type `D` with `c0 + width <= op.cols`; `dst` must hold
/// `ceil(width / BW)` blocks; `D == F16` needs F16C.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack<const D: u8, const BW: usize>(
    op: &Operand,
    c0: usize,
    width: usize,
    dst: *mut u32,
) -> u32 {
    const { assert!(BW.is_multiple_of(8)) };
    let size = if D == F32 { 4 } else { 2 };
    let src = op.data.as_ptr();
    let abs = _mm256_set1_epi32(0x7fff_ffff);
    let one = _mm256_set1_epi32(1);
    let stride = block_stride(op.rows, BW);
    let mut keys = _mm256_set1_epi32(-1);
    for k in 0..op.rows {
        prefetch_row(op, k + PREFETCH_ROWS, c0, width, size);
        for i in (0..width).step_by(8) {
            let n = (width - i).min(8);
            // SAFETY: the row is in bounds for `n` elements from `c0 + i`: a full chunk is
            // loaded directly, a partial f32 one through a mask (masked lanes are neither read
            // nor faulted), a partial 2-byte one from a zeroed stack copy.
            let x = unsafe {
                let at = src.add(op.offset + k * op.row_stride + (c0 + i) * size);
                if n == 8 {
                    load8::<D>(at)
                } else if D == F32 {
                    _mm256_castps_si256(_mm256_maskload_ps(at.cast(), lanes(n)))
                } else {
                    let mut tmp = [0u8; 16];
                    core::ptr::copy_nonoverlapping(at, tmp.as_mut_ptr(), n * size);
                    load8::<D>(tmp.as_ptr())
                }
            };
            // min(|x| − 1): the smallest nonzero magnitude, and below 0x007f_ffff if a
            // subnormal is present (zeros wrap to u32::MAX).
            keys = _mm256_min_epu32(keys, _mm256_sub_epi32(_mm256_and_si256(x, abs), one));
            // SAFETY: the caller sized `dst` for these blocks; `BW`, `i` and the blocks'
            // padding are multiples of 8 words, so the store is 32-byte aligned in the 64-byte
            // aligned buffer.
            unsafe {
                let at = dst.add(i / BW * stride + k * BW + i % BW);
                _mm256_store_si256(at.cast(), x);
            }
        }
    }
    // SAFETY: `__m256i` and `[u32; 8]` have the same size; every bit pattern is valid.
    let keys: [u32; 8] = unsafe { transmute::<__m256i, [u32; 8]>(keys) };
    let min = keys.into_iter().min().unwrap_or(u32::MAX);
    // SAFETY: the region written above, in chunks of 8 columns.
    unsafe { packed_key::<BW>(min, dst, op.rows, width, 8) }
}

/// One `MR × N·8` block over all `k` with `vfmadd231ps`, following the definition: without
/// per-step FTZ when the data provably never produces a tiny intermediate, else flushing each
/// step and recomputing exactly the columns where a step gave `±2^-126`. With `CHAIN`, the
/// links `rest` (at panel `p`, rows `r0..`: `more`) follow in registers when no intermediate
/// can be tiny (`ops_ok` is then for every link); without, `rest` is empty. Returns whether
/// they did (else the caller runs them on the stored block).
///
/// # Safety
/// `a` holds `k` rows of [`SB`] packed floats (the first `rows` read), `b` `k` rows of `NC`
/// (the first `N * 8` read), and each link of `rest` the same at its block; rows `< rows` of
/// the output block at `out` (`at`: rows `stride` apart, `rows`, the first `last` lanes of
/// its last vector) are in bounds.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel<const N: usize, const CHAIN: bool>(
    k: usize,
    a: *const f32,
    b: *const f32,
    (out, stride, rows, last): (*mut f32, usize, usize, usize),
    accumulate: bool,
    ops_ok: bool,
    (rest, p, r0): (&[Link], usize, usize),
) -> bool {
    let exp = _mm256_set1_epi32(0x7f80_0000);
    let sign = _mm256_set1_epi32(i32::MIN);
    let all = _mm256_set1_epi32(-1);
    let last_mask = lanes(last);
    // Only the last vector of a row can be partial.
    let partial = |c: usize| c == N - 1 && last < 8;
    let mut acc = [[_mm256_set1_ps(-0.0); N]; MR];
    let mut grid = ops_ok;
    if accumulate {
        let mut bad = _mm256_setzero_si256();
        for (r, row) in acc.iter_mut().enumerate().take(rows) {
            for (c, v) in row.iter_mut().enumerate() {
                // SAFETY: in bounds by the caller's contract (masked lanes are not accessed).
                let x = unsafe {
                    let at = out.add(r * stride + c * 8);
                    if partial(c) {
                        _mm256_maskload_ps(at, last_mask)
                    } else {
                        _mm256_loadu_ps(at)
                    }
                };
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
        if grid && N == NR {
            // SAFETY: `N == NR`, so `acc` is a `[[__m256; NR]; MR]`.
            let full = &mut *acc.as_mut_ptr().cast::<[[__m256; NR]; MR]>();
            *full = fma_loop_full(k, a, b, *full);
            for l in rest.iter().filter(|_| CHAIN) {
                let (a, b) = link_block(l, p, r0);
                *full = fma_loop_full(l.k, a, b, *full);
            }
        } else if grid {
            acc = fma_loop::<N, MR, false>(k, a, b, acc).0;
            for l in rest.iter().filter(|_| CHAIN) {
                let (a, b) = link_block(l, p, r0);
                acc = fma_loop::<N, MR, false>(l.k, a, b, acc).0;
            }
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
                        exact_block(k, a.add(r), SB, b.add(col), NC, o, stride, 1, 1, accumulate);
                    }
                }
            }
        }
    }
    let nan = _mm256_castsi256_ps(_mm256_set1_epi32(CANONICAL_NAN as i32));
    for (r, row) in acc.iter().enumerate().take(rows) {
        for (c, &v) in row.iter().enumerate() {
            let v = _mm256_blendv_ps(v, nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            // SAFETY: in bounds by the caller's contract: a full vector lies within the row;
            // otherwise masked lanes are not accessed.
            unsafe {
                let at = out.add(r * stride + c * 8);
                if exact[r][c] == 0 && !partial(c) {
                    _mm256_storeu_ps(at, v);
                } else {
                    // Lanes recomputed exactly are left alone.
                    let mask = if partial(c) { last_mask } else { all };
                    let keep = _mm256_andnot_si256(lanes_of(exact[r][c]), mask);
                    _mm256_maskstore_ps(at, keep, v);
                }
            }
        }
    }
    grid
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

/// The FMA chain over `k` for `R` rows (row `r` of step `kk` broadcasts `a[kk * SB + r]`).
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
        // aligned (`NC` and the panels' padding are multiples of 8 words).
        unsafe {
            let bp = b.add(kk * NC);
            let bv: [__m256; N] = core::array::from_fn(|c| _mm256_load_ps(bp.add(c * 8)));
            let ap = a.add(kk * SB);
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

/// The FMA chain over `k` of a full [`MR`] × [`NC`] block without flushing: what
/// [`fma_loop`]`::<NR, MR, false>` computes (the same `vfmadd231ps`, in the same order for each
/// accumulator), with the registers assigned by hand. Its 12 accumulators, 3 moving vectors and
/// broadcast take all 16 ymm registers, which the compiler's allocator does not manage without
/// spilling (see the module docs).
///
/// # Safety
/// As for [`kernel`], with all [`NC`] columns of `k` rows of `b` readable and 32-byte aligned.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loop_full(
    k: usize,
    a: *const f32,
    b: *const f32,
    acc: [[__m256; NR]; MR],
) -> [[__m256; NR]; MR] {
    const _: () = assert!(MR == 4 && NR == 3 && SB == 8 && NC == 24);
    if k == 0 {
        return acc;
    }
    let [
        [mut c00, mut c01, mut c02],
        [mut c10, mut c11, mut c12],
        [mut c20, mut c21, mut c22],
        [mut c30, mut c31, mut c32],
    ] = acc;
    // SAFETY: `k` rows of `SB` stationary and `NC` moving floats are readable from `a` and `b`
    // (aligned for the moving loads) by the caller's contract; the loop reads nothing else and
    // writes only the registers named here.
    unsafe {
        core::arch::asm!(
            // The loop's start at a 64-byte boundary, wherever the compiler places the block:
            // its timing then does not move with the code around it.
            ".p2align 6",
            "2:",
            "vmovaps ymm12, [{b}]",
            "vmovaps ymm13, [{b} + 32]",
            "vmovaps ymm14, [{b} + 64]",
            "vbroadcastss ymm15, dword ptr [{a}]",
            "vfmadd231ps {c00}, ymm15, ymm12",
            "vfmadd231ps {c01}, ymm15, ymm13",
            "vfmadd231ps {c02}, ymm15, ymm14",
            "vbroadcastss ymm15, dword ptr [{a} + 4]",
            "vfmadd231ps {c10}, ymm15, ymm12",
            "vfmadd231ps {c11}, ymm15, ymm13",
            "vfmadd231ps {c12}, ymm15, ymm14",
            "vbroadcastss ymm15, dword ptr [{a} + 8]",
            "vfmadd231ps {c20}, ymm15, ymm12",
            "vfmadd231ps {c21}, ymm15, ymm13",
            "vfmadd231ps {c22}, ymm15, ymm14",
            "vbroadcastss ymm15, dword ptr [{a} + 12]",
            "vfmadd231ps {c30}, ymm15, ymm12",
            "vfmadd231ps {c31}, ymm15, ymm13",
            "vfmadd231ps {c32}, ymm15, ymm14",
            "add {a}, 32",
            "add {b}, 96",
            "dec {k}",
            "jnz 2b",
            a = inout(reg) a => _,
            b = inout(reg) b => _,
            k = inout(reg) k => _,
            c00 = inout(ymm_reg) c00,
            c01 = inout(ymm_reg) c01,
            c02 = inout(ymm_reg) c02,
            c10 = inout(ymm_reg) c10,
            c11 = inout(ymm_reg) c11,
            c12 = inout(ymm_reg) c12,
            c20 = inout(ymm_reg) c20,
            c21 = inout(ymm_reg) c21,
            c22 = inout(ymm_reg) c22,
            c30 = inout(ymm_reg) c30,
            c31 = inout(ymm_reg) c31,
            c32 = inout(ymm_reg) c32,
            out("ymm12") _,
            out("ymm13") _,
            out("ymm14") _,
            out("ymm15") _,
            options(nostack, readonly, pure),
        );
    }
    [
        [c00, c01, c02],
        [c10, c11, c12],
        [c20, c21, c22],
        [c30, c31, c32],
    ]
}
