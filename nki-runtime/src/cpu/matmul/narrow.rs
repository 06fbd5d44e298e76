//! AVX-512 `nc_matmul` for a narrow moving operand (at most [`MAX_COLUMNS`] columns: decode
//! attention's scores `kᵀq` and its `vᵀp`, a column sum against a ones vector).
//!
//! The panel kernels put the output's columns in the zmm lanes, so five columns fill five of
//! sixteen lanes, and they pack the stationary operand first, each of its `K × M` elements
//! once per matmul for `N` uses. Here the output's **rows** are in the lanes: the stationary
//! operand is read as it lies in SBUF (row `k` holds the `M` values of one partition,
//! contiguous), each moving element `mv[k][n]` is broadcast, and every column's accumulators
//! stay in registers (`V` vectors of 16 rows by `N` columns). The accumulation order is the
//! definition's (each output element its own FMA chain over ascending `k`), so the results are
//! [`super::matmul`]'s bit for bit, under two conditions checked before anything is written,
//! else the caller takes the packed path:
//!
//! - no stationary element is an f32 subnormal once widened (the kernel does not flush them;
//!   [`super::daz`]), and
//! - the exponent proof of [`super`] holds (the operands' smallest nonzero magnitudes and the
//!   initial accumulators put every intermediate sum on the grid `2^-126 · ℤ`), so the plain
//!   FMA chain needs no FTZ.
//!
//! The moving operand is widened with DAZ into a small buffer; a NaN result is stored as the
//! canonical NaN.

use core::arch::x86_64::*;

use nki_lang::DType;

use super::{CANONICAL_NAN, Operand, Output, products_on_grid};

/// Most moving columns this kernel takes.
pub(super) const MAX_COLUMNS: usize = 8;

/// Most zmm registers a block holds: `N · V` accumulators, `V` stationary vectors, one
/// broadcast and the least magnitude (of 32).
const MAX_REGISTERS: usize = 30;

/// A mask of the first `n` (≤ 16) lanes.
#[inline]
fn lanes16(n: usize) -> u16 {
    if n >= 16 { u16::MAX } else { (1u16 << n) - 1 }
}

/// Stationary rows ahead of the one being multiplied that are fetched into the cache (each
/// row is a partition of its own, a page or more apart: the hardware prefetchers do not follow
/// them).
const PREFETCH_ROWS: usize = 12;

/// Widens the moving operand with DAZ into `buf[k * MAX_COLUMNS + j]` (columns from `n` on
/// zero); returns the smallest [`super::exp_key`].
///
/// # Safety
/// AVX-512 F/BW/VL; every element of `mv` lies in its slice; `mv.cols ≤ MAX_COLUMNS`,
/// `buf` holds `mv.rows · MAX_COLUMNS` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn widen_moving(mv: &Operand, buf: &mut [f32]) -> u32 {
    let base = mv.data.as_ptr();
    let mask = lanes16(mv.cols) as u8;
    let (exp, sign, one) = (
        _mm256_set1_epi32(0x7f80_0000),
        _mm256_set1_epi32(i32::MIN),
        _mm256_set1_epi32(1),
    );
    let mut key = _mm256_set1_epi32(-1);
    for (k, dst) in buf.chunks_exact_mut(MAX_COLUMNS).take(mv.rows).enumerate() {
        let row = mv.offset + k * mv.row_stride;
        // SAFETY: the masked lanes are elements of the operand.
        let v = unsafe {
            if mv.dtype == DType::Bf16 {
                let h = _mm_maskz_loadu_epi16(mask, base.add(row).cast());
                _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h))
            } else {
                _mm256_maskz_loadu_epi32(mask, base.add(row).cast())
            }
        };
        // DAZ: a zero exponent field keeps the sign alone.
        let zero_exp = _mm256_testn_epi32_mask(v, exp);
        let v = _mm256_mask_and_epi32(v, zero_exp, v, sign);
        let field = _mm256_srli_epi32::<23>(_mm256_and_si256(v, exp));
        key = _mm256_min_epu32(key, _mm256_sub_epi32(field, one));
        // SAFETY: 8 values into a chunk of 8.
        unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast(), v) };
    }
    let mut lanes = [0u32; 8];
    // SAFETY: 32 bytes into a 32-byte array.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), key) };
    lanes.iter().copied().min().unwrap_or(u32::MAX)
}

/// How the stationary operand's columns lie along a partition: column `q` at element
/// `(q / run) · stride + q % run` of its row (runs of `run` adjacent columns, `stride` elements
/// apart), `run` a multiple of 16 or at least the columns (one run: all adjacent), so that each
/// vector of 16 columns from a multiple of 16 is adjacent elements.
#[derive(Copy, Clone, Debug)]
pub(super) struct Runs {
    /// Adjacent columns per run.
    pub run: usize,
    /// Elements from one run to the next.
    pub stride: usize,
}

impl Runs {
    /// Every column adjacent to the next.
    pub(super) fn adjacent(cols: usize) -> Runs {
        Runs {
            run: cols.max(1),
            stride: 0,
        }
    }

    /// Whether vectors of 16 columns are adjacent elements for an operand of `cols` columns.
    pub(super) fn vectors_adjacent(&self, cols: usize) -> bool {
        self.run > 0 && (self.run >= cols || self.run.is_multiple_of(16))
    }

    /// The element (along a partition) of column `q`.
    #[inline]
    pub(super) fn element(&self, q: usize) -> usize {
        (q / self.run) * self.stride + q % self.run
    }
}

/// The widened stationary elements of row `row` (a byte offset) from element `at`, in the lanes
/// of `mask` (the others zero).
///
/// # Safety
/// AVX-512 F/BW/VL; the masked elements lie in the slice.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
unsafe fn stationary16(base: *const u8, bf16: bool, row: usize, at: usize, mask: u16) -> __m512 {
    // SAFETY: by the caller's contract.
    unsafe {
        if bf16 {
            let h = _mm256_maskz_loadu_epi16(mask, base.add(row + 2 * at).cast());
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
        } else {
            _mm512_maskz_loadu_ps(mask, base.add(row + 4 * at).cast())
        }
    }
}

/// One matmul of a chain that accumulates into one output (or the one matmul): its stationary
/// operand, where that operand's columns lie, and its moving operand.
#[derive(Copy, Clone)]
pub(super) struct Link<'a> {
    /// The stationary operand (its `cols` the output's rows).
    pub st: &'a Operand<'a>,
    /// Where its columns lie along a partition.
    pub runs: Runs,
    /// The moving operand.
    pub mv: &'a Operand<'a>,
}

/// Values of the widened moving operand of one link.
pub(super) const WIDENED: usize = super::MAX_K * MAX_COLUMNS;

/// Rows `m0 .. m0 + 16·V` of the result, `N` columns: `acc[j · pitch + m]` (transposed)
/// holds the initial accumulators and receives the results of every link in turn (link `l`'s
/// moving operand widened at `widened[l · WIDENED..]`); `magnitudes` takes the least of
/// `2·|x| − 1` (as bits, wrapping) over the stationary elements `x` read.
///
/// # Safety
/// AVX-512 F/BW/VL; each link's stationary columns (laid out as its runs say, vectors
/// adjacent) in its slice, every link with the first one's columns and dtype, its rows at most
/// `MAX_K`; `widened` holds `links.len() · WIDENED` values; `acc` holds `N · pitch` values and
/// `m0 + 16·V ≤ pitch`, `m0` a multiple of 16.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn block<const N: usize, const V: usize>(
    (links, widened): (&[Link<'_>], &[f32]),
    (acc, pitch): (&mut [f32], usize),
    m0: usize,
    magnitudes: &mut __m512i,
) {
    let mut least = *magnitudes;
    let mut c = [[_mm512_setzero_ps(); V]; N];
    for (j, cj) in c.iter_mut().enumerate() {
        for (v, x) in cj.iter_mut().enumerate() {
            // SAFETY: `acc` holds `pitch` values per column and `m0 + 16·V ≤ pitch`.
            *x = unsafe { _mm512_loadu_ps(acc.as_ptr().add(j * pitch + m0 + 16 * v)) };
        }
    }
    for (link, mv) in links.iter().zip(widened.chunks_exact(WIDENED)) {
        let st = link.st;
        let base = st.data.as_ptr();
        let bf16 = st.dtype == DType::Bf16;
        let size = if bf16 { 2 } else { 4 };
        // Each vector's first element and lanes (its 16 columns adjacent).
        let mut at = [0usize; V];
        let mut lanes = [0u16; V];
        for (v, (a, l)) in at.iter_mut().zip(&mut lanes).enumerate() {
            let q = m0 + 16 * v;
            *a = link.runs.element(q);
            *l = lanes16(st.cols.saturating_sub(q));
        }
        // SAFETY: as this function's, for this link.
        unsafe {
            link_rows::<N, V>(
                (st, mv),
                (&at, &lanes),
                (&mut c, &mut least),
                (base, bf16, size),
            )
        };
    }
    for (j, cj) in c.iter().enumerate() {
        for (v, &x) in cj.iter().enumerate() {
            // SAFETY: as the loads above.
            unsafe { _mm512_storeu_ps(acc.as_mut_ptr().add(j * pitch + m0 + 16 * v), x) };
        }
    }
    *magnitudes = least;
}

/// One link's rows `k` into the accumulators `c` of a block whose vectors start at elements
/// `at` with lanes `lanes`; `least` takes the least of `2·|x| − 1` over the elements read.
///
/// # Safety
/// As [`block`]'s for the link: `mv` its widened moving operand.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
unsafe fn link_rows<const N: usize, const V: usize>(
    (st, mv): (&Operand, &[f32]),
    (at, lanes): (&[usize; V], &[u16; V]),
    (c, least): (&mut [[__m512; V]; N], &mut __m512i),
    (base, bf16, size): (*const u8, bool, usize),
) {
    let one = _mm512_set1_epi32(1);
    for (k, b) in mv.chunks_exact(MAX_COLUMNS).take(st.rows).enumerate() {
        let row = st.offset + k * st.row_stride;
        if k + PREFETCH_ROWS < st.rows {
            let ahead = base.wrapping_add(row + PREFETCH_ROWS * st.row_stride);
            for &a in at {
                // A prefetch never faults; the addresses are the vectors' ends in the row ahead.
                let first = ahead.wrapping_add(a * size);
                _mm_prefetch::<_MM_HINT_T0>(first.cast());
                _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(16 * size - 1).cast());
            }
        }
        let mut s = [_mm512_setzero_ps(); V];
        for (v, x) in s.iter_mut().enumerate() {
            // SAFETY: row `k`'s elements of the vector's columns, masked to the operand's.
            *x = unsafe { stationary16(base, bf16, row, at[v], lanes[v]) };
            // The least nonzero magnitude, doubled to drop the sign, less one (zeros and the
            // lanes past the operand wrap to the largest).
            let twice = _mm512_slli_epi32::<1>(_mm512_castps_si512(*x));
            *least = _mm512_min_epu32(*least, _mm512_sub_epi32(twice, one));
        }
        for (cj, &bj) in c.iter_mut().zip(b) {
            let bj = _mm512_set1_ps(bj);
            for (x, &sv) in cj.iter_mut().zip(&s) {
                *x = _mm512_fmadd_ps(sv, bj, *x);
            }
        }
    }
}

/// Every row of the result for `N` columns, in blocks of `V` vectors; returns the least of
/// `2·|x| − 1` (wrapping) over the stationary elements `x` read (as bits: `u32::MAX` when all
/// are zero).
///
/// # Safety
/// As [`block`], `pitch` a multiple of `16·V` at least the links' columns.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn rows<const N: usize, const V: usize>(
    links: (&[Link<'_>], &[f32]),
    (acc, pitch): (&mut [f32], usize),
) -> u32 {
    const { assert!(N * V + V + 2 <= MAX_REGISTERS && (PITCH_QUANTUM / 16).is_multiple_of(V)) };
    let mut magnitudes = _mm512_set1_epi32(-1);
    let mut m0 = 0;
    let cols = links.0.first().map_or(0, |l| l.st.cols);
    while m0 < cols {
        // SAFETY: `m0 < cols ≤ pitch`, and blocks of `16·V` rows divide `pitch`: the block's
        // rows are within `acc`'s columns.
        unsafe { block::<N, V>(links, (acc, pitch), m0, &mut magnitudes) };
        m0 += 16 * V;
    }
    _mm512_reduce_min_epu32(magnitudes)
}

/// What a pitch of the transposed results is a multiple of: every block of `16·V` rows.
pub(super) const PITCH_QUANTUM: usize = 128;

/// Where the results of the stationary operand's columns go in the output (element offsets of
/// output column 0; column `j` is `j` further).
#[derive(Copy, Clone)]
pub(super) enum Places<'a> {
    /// One matmul's output rows: column `i` at `offset + i · row_stride`.
    Rows {
        /// Element offset of row 0.
        offset: usize,
        /// Elements between rows.
        row_stride: usize,
    },
    /// A table: column `i` at `table[i]`, nowhere when negative.
    Table(&'a [i32]),
}

impl Places<'_> {
    /// The places of columns `i .. i + 16` of `cols`, and the lanes that have one.
    ///
    /// # Safety
    /// AVX-512 F; `i < cols`; a table holds `cols` entries.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn at(&self, i: usize, cols: usize) -> (__m512i, u16) {
        let lanes = lanes16(cols - i);
        match *self {
            Places::Rows { offset, row_stride } => {
                // The rows of a validated output are element offsets within i32 (the lanes past
                // `cols` may wrap; they are masked).
                let stride = _mm512_set1_epi32(row_stride as i32);
                let steps = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                let first = offset.wrapping_add(i.wrapping_mul(row_stride)) as i32;
                let at =
                    _mm512_add_epi32(_mm512_mullo_epi32(steps, stride), _mm512_set1_epi32(first));
                (at, lanes)
            }
            Places::Table(t) => {
                // SAFETY: the masked lanes are entries of the table.
                let at = unsafe { _mm512_maskz_loadu_epi32(lanes, t.as_ptr().add(i).cast()) };
                (
                    at,
                    lanes & _mm512_cmpge_epi32_mask(at, _mm512_setzero_si512()),
                )
            }
        }
    }
}

/// The results of the stationary operand's columns (laid out along its partitions as `runs`
/// says) for every moving column, computed into
/// `acc` (`N · pitch` values, transposed) and scattered to their `places` in `out`:
/// `out[place(i) + j] (=|+=) Σ_k st[k][i] · mv[k][j]` as [`super::matmul`] computes each;
/// `false` (nothing written) when the operands' dtypes or values need the packed path (module
/// documentation).
///
/// # Safety
/// AVX-512 F/BW/VL; `mv` lies in its slice, and so does every element of `st`'s columns laid
/// out as `runs` says (each vector of 16 adjacent: [`Runs::vectors_adjacent`]), with
/// `st.rows == mv.rows ≤ MAX_K`; every place plus `mv.cols` is at most `out.len()`, which is at
/// most `i32::MAX`; `pitch` is a
/// multiple of [`PITCH_QUANTUM`] at least `st.cols`, and `acc` holds `mv.cols · pitch` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn run(
    (st, runs): (&Operand, Runs),
    mv: &Operand,
    (out, places): (&mut [f32], Places<'_>),
    accumulate: bool,
    (acc, pitch): (&mut [f32], usize),
) -> bool {
    let link = Link { st, runs, mv };
    let mut widened = [0f32; WIDENED];
    // SAFETY: as this function's; one link's widened moving operand.
    unsafe {
        let results = (&mut *acc, pitch);
        let links = (core::slice::from_ref(&link), &mut widened[..]);
        if !compute(links, (&*out, places), accumulate, results) {
            return false;
        }
        store(mv.cols, (out, places, st.cols), (acc, pitch));
    }
    true
}

/// [`run`]'s results for a chain of `links` (each accumulating onto the one before, the
/// first onto the initial accumulators), into `acc` alone (`out` is read for the initial
/// accumulators); `true` when they stand, for [`store`]. `widened` receives the links' moving
/// operands.
///
/// # Safety
/// As [`run`], for every link (one output: the links' stationary operands have one number of
/// columns, their moving ones one number of columns, and each link's operands agree on its
/// `K`); `widened` holds `links.len() · WIDENED` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn compute(
    (links, widened): (&[Link<'_>], &mut [f32]),
    (out, places): (&[f32], Places<'_>),
    accumulate: bool,
    (acc, pitch): (&mut [f32], usize),
) -> bool {
    let Some(first) = links.first() else {
        return false;
    };
    let (m, n) = (first.st.cols, first.mv.cols);
    let (st_dtype, mv_dtype) = (first.st.dtype, first.mv.dtype);
    let links_ok = links.iter().all(|l| {
        l.st.dtype == st_dtype
            && l.mv.dtype == mv_dtype
            && l.st.cols == m
            && l.mv.cols == n
            && l.st.rows > 0
    });
    let dtypes_ok = matches!(st_dtype, DType::Bf16 | DType::F32)
        && matches!(mv_dtype, DType::Bf16 | DType::F32);
    if !links_ok || !dtypes_ok || n == 0 || n > MAX_COLUMNS || m == 0 {
        return false;
    }
    let mut key_b = u32::MAX;
    for (l, buf) in links.iter().zip(widened.chunks_exact_mut(WIDENED)) {
        // SAFETY: the operand lies in its slice; `n ≤ MAX_COLUMNS`, its rows `≤ MAX_K`.
        key_b = key_b.min(unsafe { widen_moving(l.mv, buf) });
    }
    // The initial accumulators, transposed: column `j`'s rows contiguous.
    if accumulate {
        let (exp, sign) = (_mm512_set1_epi32(0x7f80_0000), _mm512_set1_epi32(i32::MIN));
        let mut off_grid = 0u16;
        for j in 0..n {
            let mut i = 0;
            while i < m {
                // SAFETY: `i < m`; the masked lanes' places are output elements.
                let (at, mask) = unsafe { places.at(i, m) };
                let x = unsafe {
                    _mm512_mask_i32gather_epi32::<4>(
                        _mm512_setzero_si512(),
                        mask,
                        _mm512_add_epi32(at, _mm512_set1_epi32(j as i32)),
                        out.as_ptr().cast(),
                    )
                };
                // DAZ, then the grid test (`super::acc_on_grid`: zero, or an exponent field
                // of at least 24).
                let x = _mm512_mask_and_epi32(x, _mm512_testn_epi32_mask(x, exp), x, sign);
                let field = _mm512_srli_epi32::<23>(_mm512_and_si512(x, exp));
                let key = _mm512_sub_epi32(field, _mm512_set1_epi32(1));
                off_grid |= _mm512_cmplt_epu32_mask(key, _mm512_set1_epi32(23));
                // SAFETY: 16 values of `acc` (`i + 16 ≤ pitch`).
                unsafe { _mm512_storeu_si512(acc.as_mut_ptr().add(j * pitch + i).cast(), x) };
                i += 16;
            }
        }
        if off_grid != 0 {
            return false;
        }
    } else {
        acc[..n * pitch].fill(-0.0);
    }
    let links = (links, &*widened);
    let results = (&mut *acc, pitch);
    // SAFETY: as this function's.
    let least = unsafe {
        match n {
            1 => rows::<1, 8>(links, results),
            2 => rows::<2, 8>(links, results),
            3 => rows::<3, 4>(links, results),
            4 => rows::<4, 4>(links, results),
            5 => rows::<5, 4>(links, results),
            6 => rows::<6, 4>(links, results),
            7 => rows::<7, 2>(links, results),
            _ => rows::<8, 2>(links, results),
        }
    };
    // The stationary operand's least nonzero magnitude, read as it was multiplied: the results
    // stand when it is not subnormal and the exponent proof holds.
    let key_a = match least {
        u32::MAX => u32::MAX,
        twice => {
            let magnitude = (twice + 1) >> 1;
            if magnitude < 0x0080_0000 {
                return false;
            }
            (magnitude >> 23) - 1
        }
    };
    products_on_grid(key_a, st_dtype, key_b, mv_dtype)
}

/// Writes the results [`compute`] left in `acc` (`n` moving columns, `m` stationary ones) to
/// their places in `out`, a NaN as the canonical one.
///
/// # Safety
/// AVX-512 F/BW/VL; every place plus `n` is at most `out.len()`, which is at most
/// `i32::MAX`; `pitch` is at least `m` rounded up to 16, and `acc` holds `n · pitch` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn store(
    n: usize,
    (out, places, m): (&mut [f32], Places<'_>, usize),
    (acc, pitch): (&[f32], usize),
) {
    let nan = _mm512_castsi512_ps(_mm512_set1_epi32(CANONICAL_NAN as i32));
    for j in 0..n {
        let mut i = 0;
        while i < m {
            // SAFETY: `i < m`; 16 values of `acc` (`i + 16 ≤ pitch`); the masked lanes' places
            // are output elements.
            unsafe {
                let (at, mask) = places.at(i, m);
                let x = _mm512_loadu_ps(acc.as_ptr().add(j * pitch + i));
                let x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), nan);
                let at = _mm512_add_epi32(at, _mm512_set1_epi32(j as i32));
                _mm512_mask_i32scatter_ps::<4>(out.as_mut_ptr().cast(), mask, at, x);
            }
            i += 16;
        }
    }
}

/// `out[m][n] (=|+=) Σ_k st[k][m] · mv[k][n]` as [`super::matmul`] computes it, for a moving
/// operand of at most [`MAX_COLUMNS`] columns; `false` (nothing written) when the operands'
/// dtypes or values need the packed path (module documentation).
///
/// # Safety
/// AVX-512 F/BW/VL; [`super::validate`] holds for the operands and the output over all of the
/// moving operand's columns.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn matmul(
    st: &Operand,
    mv: &Operand,
    out: &mut Output,
    accumulate: bool,
) -> bool {
    // Gather and scatter indices are i32 element offsets.
    if i32::try_from(out.data.len()).is_err() {
        return false;
    }
    let places = Places::Rows {
        offset: out.offset,
        row_stride: out.row_stride,
    };
    let mut acc = [0f32; MAX_COLUMNS * super::MAX_M];
    const { assert!(super::MAX_M.is_multiple_of(PITCH_QUANTUM)) };
    // SAFETY: the CPU features as this function's; `validate` checked the operands' and the
    // output's bounds (every row's columns `0..N` within `out`, which fits i32); `MAX_M` is a
    // multiple of the quantum at least `M`.
    unsafe {
        run(
            (st, Runs::adjacent(st.cols)),
            mv,
            (&mut *out.data, places),
            accumulate,
            (&mut acc, super::MAX_M),
        )
    }
}
