//! AVX-512 paths of [`super::matmul`]: a `vdpbf16ps` kernel for bf16 × bf16 and a
//! `vfmadd231ps` kernel for everything else, both register-blocked as `MR` rows of `m` ×
//! `NR` zmm vectors (16 columns each) of `n`.
//!
//! Packed layouts (in the scratch buffers, 64-byte aligned):
//! - bf16: a K-pair dword holds element `k` in its high half and `k + 1` in its low half
//!   (swapped, so that `vdpbf16ps` adds in ascending `k`); stationary block `mb` is
//!   `a[(mb * pairs + j) * MR + r]` (broadcast per row), moving panel `p` is
//!   `b[p * panel_words(pairs) + j * NC + c]` (panels padded by one cache line, see
//!   [`panel_words`]).
//! - f32: the same with single widened (DAZ'd) elements instead of pairs.

use core::arch::x86_64::*;
use core::mem::transmute;
use core::ops::Range;

use nki_lang::DType;

use super::{
    CANONICAL_NAN, CopyAt, CopyOut, Link, MatmulScratch, Operand, Output, acc_on_grid,
    block_stride, exact_block, packed_key, products_on_grid,
};
use crate::cpu::convert::x86::{f32_to_bf16_hw_x16, f32_to_bf16_x16};

/// Rows of `m` per register block.
const MR: usize = 8;
const _: () = assert!(MR == super::STATIONARY_BLOCK);
/// Most zmm vectors of `n` per register block (`MR * NR` accumulators).
const NR: usize = 3;
/// Columns per moving panel.
const NC: usize = NR * 16;
/// Columns per panel of the packed moving operand (see [`pack_moving_bf16`]).
pub(super) const PANEL: usize = NC;

/// bf16 element type code for the const-generic packers.
const BF16: u8 = 1;
/// f16 element type code.
const F16: u8 = 2;
/// f32 element type code.
const F32: u8 = 4;

/// K-pairs ahead of the one being packed whose two rows the packers prefetch (the f32 packer:
/// twice as many rows): an operand's
/// rows are a partition apart, separate short runs that the hardware prefetchers barely start
/// on, and operands of large kernels are often out of cache. The matmul tutorial's shape ran
/// about 5 % faster on the `vdpbf16ps` kernel (median of six alternating runs, 724 against
/// 763 ms) and 6 % faster on the f32 FMA kernel (seven runs, 1340 against 1426 ms); a packing
/// of operands already in L2 costs 0.3 µs more (2.0 → 2.3 µs for a 128 × 512 moving operand).
const PREFETCH_PAIRS: usize = 2;

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

/// Mask of the first `n` (≤ 16) lanes.
#[inline]
fn lanes(n: usize) -> u16 {
    if n >= 16 { 0xffff } else { (1u16 << n) - 1 }
}

/// bf16 × bf16 with `vdpbf16ps`: packs the moving operand's columns `cols` and the stationary
/// operand, then [`matmul_bf16_prepacked`].
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL and AVX512_BF16; the operands and the output must have
/// been validated by `super::matmul::validate`; both operands are bf16.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(super) unsafe fn matmul_bf16(
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
        pack_moving_bf16(b.as_mut_slice(), mv, cols.clone());
        pack_stationary_bf16(a.as_mut_slice(), st);
        let (a, b) = (a.as_slice(), b.as_slice());
        let link = Link { a, b, k: st.rows };
        matmul_bf16_prepacked(&[link], st.cols, out, None, accumulate, cols);
    }
}

/// Packs the moving operand's columns `cols` into `b` by panels of [`NC`] columns (panel `p` at
/// word `p · panel_words(pairs)`), as [`matmul_bf16_prepacked`] reads them. Panels are independent:
/// packing columns `[0, h)` and `[h, n)` into the two parts of a buffer split at `h`'s panel
/// (`h` a multiple of `NC`) gives the packing of `[0, n)`.
///
/// # Safety
/// As for [`matmul_bf16`] (for the moving operand and `cols`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(super) unsafe fn pack_moving_bf16(b: &mut [u32], mv: &Operand, cols: Range<usize>) {
    let pairs = mv.rows.div_ceil(2);
    assert!(cols.len().div_ceil(NC) * panel_words(pairs) <= b.len());
    // SAFETY: validated operand; the packed size fits the buffer (asserted above).
    unsafe { pack_panels(mv, cols.start, cols.len(), b.as_mut_ptr()) };
}

/// [`block_stride`] of the bf16 moving panels.
const fn panel_words(pairs: usize) -> usize {
    block_stride(pairs, NC)
}

/// The words the packing of columns `[0, col)` of `k` rows takes: where column `col` (a
/// multiple of [`NC`], or the last column) starts.
pub(super) const fn packed_moving_offset(k: usize, col: usize) -> usize {
    col.div_ceil(NC) * panel_words(k.div_ceil(2))
}

/// Columns `c .. c + 16` (lanes in `mask`) of K-pair `j` of a 2-byte operand as dwords: row
/// `2j` in the high half, row `2j + 1` (or `pad` past the last row) in the low half, so that
/// `vdpbf16ps` adds in ascending `k`; lanes outside `mask` are zero.
///
/// # Safety
/// Validated operand of 2-byte elements whose rows `2j` and `2j + 1` (when it exists) hold the
/// columns of `mask` from `c`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn pair_dwords(op: &Operand, j: usize, c: usize, mask: u16, pad: i16) -> __m512i {
    let (k_hi, k_lo) = (2 * j, 2 * j + 1);
    let at = |k: usize| {
        op.data
            .as_ptr()
            .wrapping_add(op.offset + k * op.row_stride + c * 2)
    };
    // SAFETY: the rows are in bounds by the caller's contract; masked lanes are neither read
    // nor faulted.
    let (hi, lo) = unsafe {
        let hi = _mm256_maskz_loadu_epi16(mask, at(k_hi).cast());
        let lo = if k_lo < op.rows {
            _mm256_maskz_loadu_epi16(mask, at(k_lo).cast())
        } else {
            _mm256_maskz_mov_epi16(mask, _mm256_set1_epi16(pad))
        };
        (hi, lo)
    };
    _mm512_or_si512(
        _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(hi)),
        _mm512_cvtepu16_epi32(lo),
    )
}

/// Packs the moving operand's `op[k][c0 .. c0 + width]` into K-pair dwords (`k` high, `k + 1`
/// low; a missing last `k + 1` is bf16 `-0.0`), panel after panel of [`NC`] columns: element
/// `(j, i)` goes to `dst[i / NC * panel_words(pairs) + j * NC + i % NC]`. Columns past `width`
/// up to the next multiple of 16 are zero.
///
/// Pair by pair over every column: each source row is read once, front to back, which the
/// hardware prefetchers follow (operand rows are a partition apart, a multiple of 4 KiB, so
/// reading a few columns of every row in turn would keep all of them in one L1 set).
///
/// # Safety
/// Validated operand of 2-byte elements with `c0 + width <= op.cols`; `dst` must hold
/// `ceil(width / NC)` panels.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn pack_panels(op: &Operand, c0: usize, width: usize, dst: *mut u32) {
    let pairs = op.rows.div_ceil(2);
    let stride = panel_words(pairs);
    for j in 0..pairs {
        let ahead = 2 * (j + PREFETCH_PAIRS);
        prefetch_row(op, ahead, c0, width, 2);
        prefetch_row(op, ahead + 1, c0, width, 2);
        for i in (0..width).step_by(16) {
            // SAFETY: columns `c0 + i ..` of pair `j` are in bounds up to `width`.
            let v = unsafe { pair_dwords(op, j, c0 + i, lanes(width - i), i16::MIN) };
            // SAFETY: the caller sized `dst` for these panels; rows of a panel are 64-byte
            // aligned (`NC` and the padding are multiples of 16 words).
            unsafe { _mm512_store_si512(dst.add(i / NC * stride + j * NC + i % NC).cast(), v) };
        }
    }
}

/// Packs the stationary operand into `a` for [`matmul_bf16_prepacked`].
///
/// # Safety
/// As for [`matmul_bf16`] (for the stationary operand).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(super) unsafe fn pack_stationary_bf16(a: &mut [u32], st: &Operand) {
    let blocks = st.cols.div_ceil(MR);
    assert!(blocks.div_ceil(2) * 2 * block_words(st.rows.div_ceil(2)) <= a.len());
    // SAFETY: validated operand; the packed size fits the buffer (asserted above).
    unsafe { pack_stationary(st, a.as_mut_ptr()) };
}

/// bf16 × bf16 with `vdpbf16ps` on `links`, matmuls of `m` stationary columns that accumulate
/// one after another into `out` (the first as `accumulate` says): block by block, each block's
/// accumulators kept in registers from one link to the next, its results stored into `out`
/// after the last, then converted into `copy` when there is one. The bits of the matmuls one
/// after the other: between two of them the accumulators would be stored with NaNs made
/// canonical and loaded with subnormals flushed, and `vdpbf16ps` itself flushes subnormal
/// accumulators and results and keeps a NaN a NaN, so neither changes a later result.
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL and AVX512_BF16; the output (and `copy`) must have
/// been validated by `super::matmul` for `m` rows and columns `cols` (whatever the buffers
/// hold, every read stays inside them: their sizes are asserted).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(super) unsafe fn matmul_bf16_prepacked(
    links: &[Link],
    m: usize,
    out: &mut Output,
    copy: Option<&mut CopyOut>,
    accumulate: bool,
    cols: Range<usize>,
) {
    let w = cols.len();
    let blocks = m.div_ceil(MR);
    for l in links {
        let pairs = l.k.div_ceil(2);
        assert!(
            blocks.div_ceil(2) * 2 * block_words(pairs) <= l.a.len()
                && w.div_ceil(NC) * panel_words(pairs) <= l.b.len()
        );
    }
    let Some((first, rest)) = links.split_first() else {
        return;
    };
    let (pairs, a, b) = (first.k.div_ceil(2), first.a.as_ptr(), first.b.as_ptr());
    let base = out.data.as_mut_ptr();
    let copy = copy.map(|c| CopyAt::new(c, cols.start));
    for p in 0..w.div_ceil(NC) {
        let width = (w - p * NC).min(NC);
        let last = lanes(width - (width - 1) / 16 * 16);
        for mb in 0..blocks {
            let rows = (m - mb * MR).min(MR);
            // SAFETY: each link's block of packed data lies in its buffers; the output block
            // starts at a validated element and `rows`/`last` keep every access inside the
            // output (and the copy).
            unsafe {
                let o = base.add(out.offset + mb * MR * out.row_stride + cols.start + p * NC);
                let first = (
                    pairs,
                    a.add(mb * block_words(pairs)),
                    b.add(p * panel_words(pairs)),
                );
                let (rs, more) = (out.row_stride, (rest, p, mb));
                // A lone matmul's kernel has no loop over links (a few cycles a block).
                match (width.div_ceil(16), rest.is_empty()) {
                    (1, true) => {
                        kernel_bf16::<1, false>(first, more, o, rs, rows, last, accumulate)
                    }
                    (2, true) => {
                        kernel_bf16::<2, false>(first, more, o, rs, rows, last, accumulate)
                    }
                    (_, true) => {
                        kernel_bf16::<3, false>(first, more, o, rs, rows, last, accumulate)
                    }
                    (1, false) => {
                        kernel_bf16::<1, true>(first, more, o, rs, rows, last, accumulate)
                    }
                    (2, false) => {
                        kernel_bf16::<2, true>(first, more, o, rs, rows, last, accumulate)
                    }
                    (_, false) => {
                        kernel_bf16::<3, true>(first, more, o, rs, rows, last, accumulate)
                    }
                }
                if let Some(c) = &copy {
                    let (rs, at) = (out.row_stride, c.block(mb * MR, p * NC));
                    copy_block::<true>(o, rs, rows, width, at, c.row_stride, c.bf16);
                }
            }
        }
    }
}

/// Converts the results a kernel just stored (`rows` rows of `width` columns at `src`, rows
/// `stride` f32s apart, still in L1) into the copy at `dst` (rows `dst_stride` bytes apart):
/// bf16 with the model's rounding (`vcvtneps2bf16` when `HW`), or f32 as they are. The
/// results are read back rather than taken from the accumulators because the f32 kernel fixes
/// some lanes up after its block loop.
///
/// # Safety
/// The caller's CPU has AVX-512 F/BW/VL (and AVX512_BF16 when `HW`); both regions are in
/// bounds for `rows` × `width`.
#[inline(always)]
unsafe fn copy_block<const HW: bool>(
    src: *const f32,
    stride: usize,
    rows: usize,
    width: usize,
    dst: *mut u8,
    dst_stride: usize,
    bf16: bool,
) {
    for r in 0..rows {
        for c in (0..width).step_by(16) {
            let mask = lanes(width - c);
            // SAFETY: in bounds by the caller's contract (masked lanes are not accessed); the
            // caller has the features the conversions need.
            unsafe {
                let v = _mm512_maskz_loadu_ps(mask, src.add(r * stride + c));
                let row = dst.add(r * dst_stride);
                if bf16 {
                    let h = if HW {
                        f32_to_bf16_hw_x16(v)
                    } else {
                        f32_to_bf16_x16(v)
                    };
                    _mm256_mask_storeu_epi16(row.add(c * 2).cast(), mask, h);
                } else {
                    _mm512_mask_storeu_ps(row.add(c * 4).cast(), mask, v);
                }
            }
        }
    }
}

/// The words between two blocks of [`MR`] packed stationary columns of a contraction of `k`
/// rows: `vdpbf16ps` K-pairs (`dot`), or widened f32.
pub(super) const fn packed_stationary_block(dot: bool, k: usize) -> usize {
    if dot {
        block_words(k.div_ceil(2))
    } else {
        block_stride(k, MR)
    }
}

/// [`block_stride`] of the bf16 stationary blocks.
const fn block_words(pairs: usize) -> usize {
    block_stride(pairs, MR)
}

/// Packs the stationary operand `op[k][0 .. m]` into K-pair dwords (`k` high, `k + 1` low; a
/// missing last `k + 1` is bf16 `+0.0`), in blocks of [`MR`] columns: element `(j, i)` goes to
/// `dst[i / MR * block_words(pairs) + j * MR + i % MR]`. Columns past `m` up to the next
/// multiple of 16 are zero. Pair by pair over every column, as [`pack_panels`], after a
/// prefetch of every row: a stationary operand is small (at most 128 rows of 256 bytes, one
/// L1's worth) and its rows are a partition apart, so the packer's own rows-ahead prefetch
/// barely leads its reads; the matmul tutorial's stationary tiles, each read twice 128
/// matmuls apart, are out of L2 by then (its shape ran 2–4 % faster; attention 4 %).
///
/// # Safety
/// Validated operand of 2-byte elements; `dst` must hold `ceil(m / 16) * 2` blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn pack_stationary(op: &Operand, dst: *mut u32) {
    let (pairs, m) = (op.rows.div_ceil(2), op.cols);
    let stride = block_words(pairs);
    for k in 0..op.rows {
        prefetch_row(op, k, 0, m, 2);
    }
    for j in 0..pairs {
        let ahead = 2 * (j + PREFETCH_PAIRS);
        prefetch_row(op, ahead, 0, m, 2);
        prefetch_row(op, ahead + 1, 0, m, 2);
        for i in (0..m).step_by(16) {
            // SAFETY: columns `i ..` of pair `j` are in bounds up to `m`.
            let v = unsafe { pair_dwords(op, j, i, lanes(m - i), 0) };
            // SAFETY: the caller sized `dst` for blocks `i / MR` and `i / MR + 1`, which are
            // 32-byte aligned in a 64-byte aligned buffer (`MR` and the padding are multiples
            // of 8 words).
            unsafe {
                let at = dst.add(i / MR * stride + j * MR);
                _mm256_store_si256(at.cast(), _mm512_castsi512_si256(v));
                _mm256_store_si256(at.add(stride).cast(), _mm512_extracti64x4_epi64::<1>(v));
            }
        }
    }
}

/// Stores 16 packed columns starting at column `i` (a multiple of 16) of pair/row `j` into the
/// blocked layout with block width `BW` (8 or a multiple of 16) and `rows` rows per block
/// (blocks [`block_stride`] apart).
///
/// # Safety
/// `dst` must hold the addressed blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn store_blocked<const BW: usize>(
    dst: *mut u32,
    rows: usize,
    j: usize,
    i: usize,
    v: __m512i,
) {
    let stride = block_stride(rows, BW);
    // SAFETY: in bounds by the caller's contract; blocks are 32-byte aligned in a 64-byte
    // aligned buffer (`BW` 8) or 64-byte aligned (`BW` a multiple of 16; the padding is 16
    // words).
    unsafe {
        let at = dst.add(i / BW * stride + j * BW + i % BW);
        if BW == 8 {
            _mm256_store_si256(at.cast(), _mm512_castsi512_si256(v));
            _mm256_store_si256(at.add(stride).cast(), _mm512_extracti64x4_epi64::<1>(v));
        } else {
            _mm512_store_si512(at.cast(), v);
        }
    }
}

/// Loads the initial accumulators of a block: `DAZ(out)` when accumulating, else `-0.0`.
///
/// # Safety
/// Rows `< rows` of the block, lanes within `last` of the last vector, are in bounds.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn load_init<const N: usize>(
    out: *const f32,
    stride: usize,
    rows: usize,
    last: u16,
    accumulate: bool,
) -> [[__m512; N]; MR] {
    let mut acc = [[_mm512_set1_ps(-0.0); N]; MR];
    if accumulate {
        for (r, row) in acc.iter_mut().enumerate().take(rows) {
            for (c, v) in row.iter_mut().enumerate() {
                let mask = if c == N - 1 { last } else { 0xffff };
                // SAFETY: in bounds by the caller's contract (masked lanes are not accessed).
                let x = unsafe { _mm512_maskz_loadu_ps(mask, out.add(r * stride + c * 16)) };
                let bits = _mm512_castps_si512(x);
                let sub = _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7f80_0000));
                let flushed = _mm512_mask_and_epi32(bits, sub, bits, _mm512_set1_epi32(i32::MIN));
                *v = _mm512_castsi512_ps(flushed);
            }
        }
    }
    acc
}

/// Stores a block's accumulators (NaN → canonical NaN), except the lanes in `skip`.
///
/// # Safety
/// As for [`load_init`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn store_block<const N: usize>(
    out: *mut f32,
    stride: usize,
    rows: usize,
    last: u16,
    acc: &[[__m512; N]; MR],
    skip: &[[u16; N]; MR],
) {
    let nan = _mm512_castsi512_ps(_mm512_set1_epi32(CANONICAL_NAN as i32));
    for (r, row) in acc.iter().enumerate().take(rows) {
        for (c, &v) in row.iter().enumerate() {
            let mask = if c == N - 1 { last } else { 0xffff } & !skip[r][c];
            let v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v), nan);
            // SAFETY: in bounds by the caller's contract (masked lanes are not accessed).
            unsafe { _mm512_mask_storeu_ps(out.add(r * stride + c * 16), mask, v) };
        }
    }
}

/// One `MR × N·16` block over all K-pairs of a first link (`first`: its K-pairs, its block of
/// the packed stationary operand and its panel of the packed moving one) and then of the links
/// `rest`, at their panel `p` and row block `mb` (`more`), with `vdpbf16ps`; without `CHAIN`,
/// `rest` is empty.
///
/// # Safety
/// `first`'s pointers hold `pairs * MR` packed dwords and `pairs` rows of `NC` (the first
/// `N * 16` read), and every link of `rest` holds block `mb` of its packed stationary operand
/// and panel `p` of its packed moving one; output as for [`load_init`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn kernel_bf16<const N: usize, const CHAIN: bool>(
    (pairs, a, b): (usize, *const u32, *const u32),
    (rest, p, mb): (&[Link], usize, usize),
    out: *mut f32,
    stride: usize,
    rows: usize,
    last: u16,
    accumulate: bool,
) {
    // SAFETY: forwarded caller contract (for each link).
    unsafe {
        let mut acc = load_init::<N>(out, stride, rows, last, accumulate);
        acc = dot_steps(pairs, a, b, acc);
        for l in rest.iter().filter(|_| CHAIN) {
            let pairs = l.k.div_ceil(2);
            let a = l.a.as_ptr().add(mb * block_words(pairs));
            let b = l.b.as_ptr().add(p * panel_words(pairs));
            acc = dot_steps(pairs, a, b, acc);
        }
        store_block::<N>(out, stride, rows, last, &acc, &[[0; N]; MR]);
    }
}

/// The `vdpbf16ps` steps over `pairs` K-pairs of a block of a packed stationary operand at
/// `a` and a panel of a packed moving one at `b`, from the accumulators `acc`.
///
/// # Safety
/// `a` holds `pairs * MR` packed dwords, `b` `pairs` rows of `NC` (the first `N * 16` read).
#[inline(always)]
unsafe fn dot_steps<const N: usize>(
    pairs: usize,
    a: *const u32,
    b: *const u32,
    mut acc: [[__m512; N]; MR],
) -> [[__m512; N]; MR] {
    for j in 0..pairs {
        // SAFETY: within the packed buffers by the caller's contract; `b` rows are 64-byte
        // aligned (NC is a multiple of 16 dwords, the buffer is 64-byte aligned).
        unsafe {
            let bp = b.add(j * NC);
            let bv: [__m512bh; N] = core::array::from_fn(|c| {
                transmute::<__m512i, __m512bh>(_mm512_load_si512(bp.add(c * 16).cast()))
            });
            let ap = a.add(j * MR);
            for (r, row) in acc.iter_mut().enumerate() {
                let av = transmute::<__m512i, __m512bh>(_mm512_set1_epi32(*ap.add(r) as i32));
                for (v, &bc) in row.iter_mut().zip(&bv) {
                    *v = _mm512_dpbf16_ps(*v, av, bc);
                }
            }
        }
    }
    acc
}

// ---- f32 FMA path ----

/// Everything but bf16 × bf16: widen to f32 with DAZ, then `vfmadd231ps`: packs the moving
/// operand's columns `cols` and the stationary operand, then [`matmul_f32_prepacked`].
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL (with FMA and F16C); the operands and the output must
/// have been validated by `super::matmul::validate`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
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
        matmul_f32_prepacked(a, b, ops_ok, st.rows, st.cols, out, None, accumulate, cols);
    }
}

/// Widens the moving operand's columns `cols` into `b` by panels of [`NC`] columns (panel `p`
/// at word `p · block_stride(K, NC)`), as [`matmul_f32_prepacked`] reads them, and returns their
/// exponent key (`super::matmul::exp_key` of the smallest nonzero magnitude, after DAZ).
/// Panels are independent, as for [`pack_moving_bf16`]; the key of all columns is the minimum
/// of the parts' keys.
///
/// # Safety
/// As for [`matmul_f32`] (for the moving operand and `cols`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn pack_moving_f32(b: &mut [u32], mv: &Operand, cols: Range<usize>) -> u32 {
    assert!(cols.len().div_ceil(NC) * block_stride(mv.rows, NC) <= b.len());
    // SAFETY: validated operand; the packed size fits the buffer (asserted above).
    unsafe { pack_f32_any::<NC>(mv, cols.start, cols.len(), b.as_mut_ptr()) }
}

/// The words the widened packing of columns `[0, col)` of `k` rows takes: where column `col`
/// (a multiple of [`NC`], or the last column) starts.
pub(super) const fn packed_moving_offset_f32(k: usize, col: usize) -> usize {
    col.div_ceil(NC) * block_stride(k, NC)
}

/// Widens the stationary operand into `a` for [`matmul_f32_prepacked`] and returns its
/// exponent key (as [`pack_moving_f32`] does).
///
/// # Safety
/// As for [`matmul_f32`] (for the stationary operand).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn pack_stationary_f32(a: &mut [u32], st: &Operand) -> u32 {
    assert!(st.cols.div_ceil(MR).div_ceil(2) * 2 * block_stride(st.rows, MR) <= a.len());
    // SAFETY: validated operand; the packed size fits the buffer (asserted above).
    unsafe { pack_f32_any::<MR>(st, 0, st.cols, a.as_mut_ptr()) }
}

/// The f32 FMA kernel on a `k × m` stationary operand widened into `a` by
/// [`pack_stationary_f32`] and the moving operand's columns `cols` widened into `b` by
/// [`pack_moving_f32`]; `ops_ok`: the operands' keys prove that no product can be tiny
/// (`super::matmul::products_on_grid`). Block by block, each block's results stored into
/// `out`, then converted into `copy` when there is one.
///
/// # Safety
/// As for [`matmul_bf16_prepacked`], without AVX512_BF16.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn matmul_f32_prepacked(
    a: &[u32],
    b: &[u32],
    ops_ok: bool,
    k: usize,
    m: usize,
    out: &mut Output,
    copy: Option<&mut CopyOut>,
    accumulate: bool,
    cols: Range<usize>,
) {
    let w = cols.len();
    let blocks = m.div_ceil(MR);
    assert!(
        blocks.div_ceil(2) * 2 * block_stride(k, MR) <= a.len()
            && w.div_ceil(NC) * block_stride(k, NC) <= b.len()
    );
    let (a, b) = (a.as_ptr().cast::<f32>(), b.as_ptr().cast::<f32>());
    let base = out.data.as_mut_ptr();
    let copy = copy.map(|c| CopyAt::new(c, cols.start));
    for p in 0..w.div_ceil(NC) {
        let width = (w - p * NC).min(NC);
        let last = lanes(width - (width - 1) / 16 * 16);
        for mb in 0..blocks {
            let rows = (m - mb * MR).min(MR);
            // SAFETY: as in `matmul_bf16_prepacked`.
            unsafe {
                let o = base.add(out.offset + mb * MR * out.row_stride + cols.start + p * NC);
                let ap = a.add(mb * block_stride(k, MR));
                let bp = b.add(p * block_stride(k, NC));
                let s = out.row_stride;
                match width.div_ceil(16) {
                    1 => kernel_f32::<1>(k, ap, bp, o, s, rows, last, accumulate, ops_ok),
                    2 => kernel_f32::<2>(k, ap, bp, o, s, rows, last, accumulate, ops_ok),
                    _ => kernel_f32::<3>(k, ap, bp, o, s, rows, last, accumulate, ops_ok),
                }
                if let Some(c) = &copy {
                    let at = c.block(mb * MR, p * NC);
                    copy_block::<false>(o, s, rows, width, at, c.row_stride, c.bf16);
                }
            }
        }
    }
}

/// Dispatches [`pack_f32`] on the operand's dtype (once per call).
///
/// # Safety
/// As for [`pack_f32`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn pack_f32_any<const BW: usize>(
    op: &Operand,
    c0: usize,
    width: usize,
    dst: *mut u32,
) -> u32 {
    // SAFETY: forwarded caller contract.
    unsafe {
        match op.dtype {
            DType::Bf16 => pack_f32::<BF16, BW>(op, c0, width, dst),
            DType::F16 => pack_f32::<F16, BW>(op, c0, width, dst),
            DType::F32 => pack_f32::<F32, BW>(op, c0, width, dst),
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

/// Widens `op[k][c0 .. c0 + width]` to f32 with DAZ into blocks of `BW` columns (8 or a
/// multiple of 16): element `(k, i)` goes to `dst[i / BW * block_stride(K, BW) + k * BW + i %
/// BW]`, row after row as [`pack_panels`] does; returns the
/// minimum exponent key (see `super::matmul::exp_key`). Columns past `width` up to the next
/// multiple of 16 are zero. DAZ is a second pass (`super::flush_packed`), only taken when a
/// subnormal is present: the common case pays one `min` per vector for the check.
///
/// # Safety
/// Validated operand of element type `D` with `c0 + width <= op.cols`; `dst` must hold
/// `ceil(width / 16) * 16` columns of every row.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn pack_f32<const D: u8, const BW: usize>(
    op: &Operand,
    c0: usize,
    width: usize,
    dst: *mut u32,
) -> u32 {
    let src = op.data.as_ptr();
    let abs = _mm512_set1_epi32(0x7fff_ffff);
    let one = _mm512_set1_epi32(1);
    let size = if D == F32 { 4 } else { 2 };
    let mut keys = _mm512_set1_epi32(-1);
    for k in 0..op.rows {
        prefetch_row(op, k + 2 * PREFETCH_PAIRS, c0, width, size);
        for i in (0..width).step_by(16) {
            let mask = lanes(width - i);
            // SAFETY: the addressed row is in bounds; masked lanes are neither read nor
            // faulted.
            let x = unsafe {
                let at = src.add(op.offset + k * op.row_stride + (c0 + i) * size);
                match D {
                    F32 => _mm512_castps_si512(_mm512_maskz_loadu_ps(mask, at.cast())),
                    BF16 => _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(
                        _mm256_maskz_loadu_epi16(mask, at.cast()),
                    )),
                    _ => _mm512_castps_si512(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                        mask,
                        at.cast(),
                    ))),
                }
            };
            // min(|x| − 1): the smallest nonzero magnitude, and below 0x007f_ffff if a
            // subnormal is present (zeros wrap to u32::MAX).
            keys = _mm512_min_epu32(keys, _mm512_sub_epi32(_mm512_and_si512(x, abs), one));
            // SAFETY: the caller sized `dst` for these blocks.
            unsafe { store_blocked::<BW>(dst, op.rows, k, i, x) };
        }
    }
    // SAFETY: the region written above, in chunks of 16 columns.
    unsafe { packed_key::<BW>(_mm512_reduce_min_epu32(keys), dst, op.rows, width, 16) }
}

/// One `MR × N·16` block over all `k` with `vfmadd231ps`, following the definition: without
/// per-step FTZ when the data provably never produces a tiny intermediate, else flushing each
/// step and recomputing exactly the columns where a step gave `±2^-126`.
///
/// # Safety
/// `a` holds `k * MR` packed floats, `b` `k` rows of `NC` (the first `N * 16` read); output as
/// for [`load_init`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_f32<const N: usize>(
    k: usize,
    a: *const f32,
    b: *const f32,
    out: *mut f32,
    stride: usize,
    rows: usize,
    last: u16,
    accumulate: bool,
    ops_ok: bool,
) {
    // SAFETY: forwarded caller contract.
    let acc = unsafe { load_init::<N>(out, stride, rows, last, accumulate) };
    let mut grid = ops_ok;
    if grid && accumulate {
        // Initial accumulators must be zero or have an exponent field ≥ 24.
        let exp = _mm512_set1_epi32(0x7f80_0000);
        let mut bad = 0u16;
        for v in acc.iter().flatten() {
            let bits = _mm512_castps_si512(*v);
            let e = _mm512_and_si512(bits, exp);
            bad |= _mm512_mask_cmplt_epu32_mask(
                _mm512_test_epi32_mask(bits, exp),
                e,
                _mm512_set1_epi32(24 << 23),
            );
        }
        grid = bad == 0;
        debug_assert!(!grid || acc.iter().flatten().all(|v| all_lanes(*v, acc_on_grid)));
    }
    // SAFETY: forwarded caller contract.
    unsafe {
        if grid {
            let (acc, _) = fma_loop::<N, MR, false>(k, a, b, acc);
            store_block::<N>(out, stride, rows, last, &acc, &[[0; N]; MR]);
            return;
        }
        // The flushing loop needs more registers: passes of `FTZ_ROWS` rows.
        let mut acc = acc;
        let mut exact = [[0u16; N]; MR];
        for pass in 0..MR / FTZ_ROWS {
            let r0 = pass * FTZ_ROWS;
            let part: [[__m512; N]; FTZ_ROWS] = core::array::from_fn(|r| acc[r0 + r]);
            let (part, edges) = fma_loop::<N, FTZ_ROWS, true>(k, a.add(r0), b, part);
            for r in 0..FTZ_ROWS {
                acc[r0 + r] = part[r];
                exact[r0 + r] = edges;
            }
        }
        // Lanes where some step gave exactly ±2^-126: the exact scalar definition (reading
        // the initial accumulators before `store_block` overwrites them), then the rest.
        for (r, row) in exact.iter().enumerate().take(rows) {
            for (c, &e) in row.iter().enumerate() {
                let e = e & if c == N - 1 { last } else { 0xffff };
                for l in (0..16).filter(|l| e >> l & 1 == 1) {
                    let col = c * 16 + l;
                    let o = out.add(r * stride + col);
                    exact_block(k, a.add(r), MR, b.add(col), NC, o, stride, 1, 1, accumulate);
                }
            }
        }
        store_block::<N>(out, stride, rows, last, &acc, &exact);
    }
}

/// Rows per pass of the flushing FMA loop (4 × 3 accumulators plus its constants fit the
/// 32 zmm registers).
const FTZ_ROWS: usize = 4;

/// Whether `f` holds for every lane.
fn all_lanes(v: __m512, f: impl Fn(f32) -> bool) -> bool {
    // SAFETY: `__m512` and `[f32; 16]` have the same size and every bit pattern is valid.
    let x: [f32; 16] = unsafe { transmute::<__m512, [f32; 16]>(v) };
    x.into_iter().all(f)
}

/// The FMA chain over `k` for `R` rows (row `r` of step `kk` broadcasts `a[kk * MR + r]`).
/// With `FTZ`, each step flushes subnormal results to signed zero, and the second result marks
/// per column (lane of each vector) whether some step of some row produced exactly `±2^-126`,
/// where the flush decision needs the exact sum (the caller recomputes those columns).
///
/// # Safety
/// As for [`kernel_f32`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn fma_loop<const N: usize, const R: usize, const FTZ: bool>(
    k: usize,
    a: *const f32,
    b: *const f32,
    mut acc: [[__m512; N]; R],
) -> ([[__m512; N]; R], [u16; N]) {
    let exp = _mm512_set1_epi32(0x7f80_0000);
    let sign = _mm512_set1_epi32(i32::MIN);
    let abs = _mm512_set1_epi32(0x7fff_ffff);
    let min_pos = _mm512_set1_epi32(0x0080_0000);
    // Per column, the min over steps of (|r| XOR 2^-126): zero iff some |r| was 2^-126.
    let mut edge = [_mm512_set1_epi32(-1); N];
    for kk in 0..k {
        // SAFETY: within the packed buffers by the caller's contract; `b` rows are 64-byte
        // aligned.
        unsafe {
            let bp = b.add(kk * NC);
            let bv: [__m512; N] = core::array::from_fn(|c| _mm512_load_ps(bp.add(c * 16)));
            let ap = a.add(kk * MR);
            for (r, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(r));
                for ((v, &bc), e) in row.iter_mut().zip(&bv).zip(edge.iter_mut()) {
                    let new = _mm512_fmadd_ps(av, bc, *v);
                    *v = if FTZ {
                        let bits = _mm512_castps_si512(new);
                        let sub = _mm512_testn_epi32_mask(bits, exp);
                        // (bits & abs) ^ min_pos in one ternary-logic instruction.
                        let off = _mm512_ternarylogic_epi32::<0x6a>(bits, abs, min_pos);
                        *e = _mm512_min_epu32(*e, off);
                        _mm512_castsi512_ps(_mm512_mask_and_epi32(bits, sub, bits, sign))
                    } else {
                        new
                    };
                }
            }
        }
    }
    let zero = _mm512_setzero_si512();
    (
        acc,
        edge.map(|e| {
            if FTZ {
                _mm512_cmpeq_epi32_mask(e, zero)
            } else {
                0
            }
        }),
    )
}
