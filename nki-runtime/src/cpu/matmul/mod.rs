//! The TensorEngine's `nc_matmul` inner loop: `out = init + stationaryᵀ · moving`, f32
//! accumulation with a defined order, so that every [`Isa`] path is bit-identical.
//!
//! # Definition
//!
//! For every output element `out[m][n]` (`n` in the requested column range):
//!
//! ```text
//! acc = if accumulate { DAZ(out[m][n]) } else { -0.0 }    // -0.0: the additive identity
//! for k in 0..K (ascending):
//!     acc = FTZ(round(acc + DAZ(s[k][m]) · DAZ(mv[k][n])))  // fused: exact product, one rounding
//! out[m][n] = if acc is NaN { f32::NAN (0x7fc0_0000) } else { acc }
//! ```
//!
//! - Operands widen exactly to f32 (see [`super::convert`]); **DAZ** turns an f32 subnormal into
//!   a zero of the same sign (only bf16 and f32 operands can be subnormal in f32; an f16
//!   subnormal widens to a normal f32).
//! - Each step is a **fused** multiply-add: the product is exact (never rounded, never
//!   underflowed or overflowed on its own), `round` is one IEEE round-to-nearest-even to f32.
//!   So `acc = -f32::MAX` plus the bf16 product `2^64 · 2^64` gives `2^104`, not `inf`.
//! - **FTZ** flushes to a zero of the result's sign when the result is tiny *after rounding*
//!   in IEEE 754's sense: rounded to f32's 24-bit precision **with an unbounded exponent**, its
//!   magnitude is below `f32::MIN_POSITIVE` (2^-126). Equivalently, with `r` the ordinary
//!   IEEE result: `|r| < 2^-126` → flush; `|r| == 2^-126` → flush iff the exact value
//!   `|acc + a·b| < 2^-126 − 2^-151`; otherwise keep `r`. Results in
//!   `[2^-126 − 2^-151, 2^-126)` therefore become `±2^-126`, results below it become `±0`.
//! - A NaN result of any step stays NaN to the end (NaN is absorbing); the stored NaN is always
//!   the canonical `0x7fc0_0000`, whatever payloads or `inf − inf` produced it.
//! - An odd `K` is padded on the `vdpbf16ps` path with a stationary `+0.0` and a moving `-0.0`;
//!   their product `-0.0` leaves every `acc` unchanged (including `-0.0`, `inf` and NaN), so the
//!   padding is invisible.
//!
//! # Evidence (probed with small `vdpbf16ps` programs on the development machine, an Intel
//! Xeon (Emerald Rapids) KVM guest; `docs/sources/cpu-facts.md` reports the same order and DAZ/FTZ on
//! AMD Zen 4, and the tests below re-check every corner case on whatever machine runs them)
//!
//! `vdpbf16ps` computes `(acc + a_hi·b_hi) + a_lo·b_lo` per lane, each step a fused FMA with
//! DAZ inputs (including the accumulator: `2^-130 + 2^-126` gave `2^-126`) and FTZ outputs (a
//! subnormal intermediate `2^-130` was flushed before the second pair was added), regardless
//! of MXCSR; products are fused (`2^-120 + 2^-70·2^-70` gave `2^-120·(1 + 2^-20)`,
//! `-MAX + 2^64·2^64` gave `2^104`). Tininess is detected after rounding with unbounded
//! exponent: `2^-126 − 1.5·2^-151` (IEEE rounding gives `2^-126`, 24-bit rounding gives
//! `2^-126 − 2^-150`) was flushed to `0`, while `2^-126 − 2^-152` and the tie
//! `2^-126 − 2^-151` gave `2^-126`, both signs alike. A plain `vfmadd231ps` (MXCSR default)
//! returns `2^-126` for the first case, so the f32 paths use the exact check described above.
//! Its NaN payload rules (operand NaNs before the accumulator's, `0xffc0_0000` for invalid
//! operations) cannot be matched by compiler-ordered FMAs, hence the canonical NaN. Packing
//! each K-pair swapped (`k` in the high half, `k + 1` in the low) makes `vdpbf16ps` add in
//! ascending `k`. The tests check every path (both kernels of [`Isa::Avx512Bf16`]) against the
//! portable one bit for bit on random, subnormal-heavy, signed-zero and special data, and on
//! "boundary" data where thousands of step results round to exactly `±2^-126` (a few hundred
//! of them below `2^-126 − 2^-151`, hence flushed): `vdpbf16ps` agreed on every one.
//!
//! # Implementation
//!
//! - bf16 × bf16 on [`Isa::Avx512Bf16`] where `vdpbf16ps` is fast (AMD): `vdpbf16ps`, which
//!   follows the definition natively, 8 rows × 48 columns per register block.
//! - A moving operand of at most 8 columns on the AVX-512 paths (`narrow.rs`:
//!   decode attention's few query columns): the output's rows in the zmm lanes, the stationary
//!   operand read unpacked, a DAZ-widened copy of the moving one broadcast; it runs only where
//!   the exponent proof below holds and no stationary element is subnormal (else the packed
//!   paths). The same kernel runs a group of matmuls on the phases of one strided region in one
//!   pass (`narrow_group_compute`) and a chain of matmuls accumulating into one output
//!   (`narrow_chain_compute`), each output element still its own FMA chain in the
//!   definition's order.
//! - Everything else (f16, f32, mixed; bf16 on other CPUs): operands widened to f32 with DAZ
//!   while packing, then FMA (`vfmadd231ps` zmm 8 × 48 blocks, AVX2 ymm 4 × 24 blocks, or
//!   `f32::mul_add`). FTZ is not free there, so each call first proves from the data when it
//!   cannot matter: if every nonzero operand of `A` is a multiple of `2^ga`, of `B` of `2^gb`
//!   and every initial accumulator of `2^gc` (taking `2^(exponent − mantissa bits)`), every
//!   exact intermediate sum is a multiple of `2^min(ga + gb, gc)`; when that is `≥ 2^-126`, no
//!   nonzero intermediate can be tiny and the plain FMA chain already equals the definition.
//!   f16 × f16 products always pass; ordinary bf16/f32 data does unless it holds magnitudes
//!   near `2^-40` and below. Otherwise each vector step flushes subnormal results branch-free
//!   and records whether some result was exactly `±2^-126`; the columns where that happened
//!   are recomputed with the scalar definition (`step`, which decides with an exact TwoSum
//!   in f64). That slow path is ~10× slower (subnormal results also cost microcode assists).

use core::ops::Range;

use nki_lang::DType;

use super::convert::{bf16_to_f32, elem_size, f16_to_f32};
use super::{AlignedBuf, Isa};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod narrow;

/// Most moving columns [`matmul_narrow`] takes.
pub(crate) const NARROW_COLUMNS: usize = 8;

/// Largest contraction size `K` (partitions).
pub const MAX_K: usize = 128;
/// Largest stationary free size `M` (output partitions).
pub const MAX_M: usize = 128;
/// Largest moving free size `N` (output columns).
pub const MAX_N: usize = 512;

/// Words of the stationary packing buffer (largest layout: `K` × `M` rounded up to 8 rows).
const A_WORDS: usize = MAX_K * (MAX_M + 16);
/// Words of the moving packing buffer (largest layout: `K` × `N` rounded up to 64 columns).
const B_WORDS: usize = MAX_K * (MAX_N + 64);

/// The stored value of a NaN result.
pub(super) const CANONICAL_NAN: u32 = 0x7fc0_0000;

/// A matmul operand in the modeled SBUF: element `[k][i]` lives at byte
/// `offset + k * row_stride + i * dtype.size()` of `data`, little-endian.
#[derive(Copy, Clone, Debug)]
pub struct Operand<'a> {
    /// The whole SBUF byte array (or any slice containing the operand).
    pub data: &'a [u8],
    /// Element type: `F32`, `Bf16` or `F16`.
    pub dtype: DType,
    /// Byte offset of element `[0][0]`.
    pub offset: usize,
    /// Bytes between element `[k][i]` and `[k + 1][i]` (the partition size).
    pub row_stride: usize,
    /// `K`, the contraction size (partitions), at most [`MAX_K`].
    pub rows: usize,
    /// `M` for the stationary operand (at most [`MAX_M`]), `N` for the moving one (at most
    /// [`MAX_N`]).
    pub cols: usize,
}

/// The matmul output in the modeled PSUM: `out[m][n]` is
/// `data[offset + m * row_stride + n]`.
#[derive(Debug)]
pub struct Output<'a> {
    /// The whole PSUM as f32 words.
    pub data: &'a mut [f32],
    /// Element offset of `out[0][0]`.
    pub offset: usize,
    /// Elements between `out[m][n]` and `out[m + 1][n]`.
    pub row_stride: usize,
}

impl Output<'_> {
    /// Its rows, without the data.
    pub(crate) fn rows(&self) -> Rows {
        Rows {
            offset: self.offset,
            row_stride: self.row_stride,
        }
    }
}

/// Preallocated packing buffers for [`matmul`]: create one per modeled core (or per thread) and
/// reuse it; `matmul` never allocates.
pub struct MatmulScratch {
    /// Packed stationary operand.
    pub(super) a: AlignedBuf,
    /// Packed moving operand.
    pub(super) b: AlignedBuf,
}

impl MatmulScratch {
    /// Buffers sized for `K ≤ 128`, `M ≤ 128`, `N ≤ 512` (about 360 KiB).
    pub fn new() -> Self {
        MatmulScratch {
            a: AlignedBuf::new(A_WORDS),
            b: AlignedBuf::new(B_WORDS),
        }
    }
}

impl Default for MatmulScratch {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for MatmulScratch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("MatmulScratch")
    }
}

/// Computes `out[m][n] = init + Σ_k stationary[k][m] · moving[k][n]` for every `m < M` and every
/// `n` in `cols`, following the [module's definition](self) bit for bit on every `isa`.
///
/// `init` is the existing `out[m][n]` when `accumulate`, else nothing (`-0.0`). Only the output
/// columns in `cols` are read or written, so disjoint column ranges can run on different
/// threads (each with its own scratch). The two operands may have different dtypes.
///
/// # Panics
/// If `K`, `M` or `N` exceed their maxima, the operands disagree on `K`, `cols` is not within
/// `0..N`, an operand or the output does not fit its slice, the output rows overlap, a dtype is
/// not `F32`, `Bf16` or `F16`, or the CPU does not support `isa`.
pub fn matmul(
    isa: Isa,
    scratch: &mut MatmulScratch,
    stationary: &Operand,
    moving: &Operand,
    out: &mut Output,
    accumulate: bool,
    cols: Range<usize>,
) {
    #[cfg(target_arch = "x86_64")]
    let bf16_dot = isa == Isa::Avx512Bf16 && super::bf16_dot_is_fast();
    #[cfg(not(target_arch = "x86_64"))]
    let bf16_dot = false;
    run(
        isa, bf16_dot, scratch, stationary, moving, out, accumulate, cols,
    );
}

/// [`matmul`] over all of the moving operand's columns when there are at most
/// [`NARROW_COLUMNS`], on the AVX-512 kernel that puts the output's rows in the vector lanes
/// and reads the stationary operand unpacked (`narrow.rs`): `true` when it computed the result,
/// `false`, with nothing written, when `isa` has no such kernel or the operands need the packed
/// paths (f16, a subnormal stationary element, data near the flush boundary). The same bits as
/// [`matmul`].
///
/// # Panics
/// As [`matmul`].
pub(crate) fn matmul_narrow(
    isa: Isa,
    stationary: &Operand,
    moving: &Operand,
    out: &mut Output,
    accumulate: bool,
) -> bool {
    validate(stationary, moving, out, &(0..moving.cols));
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(isa, Isa::Avx512 | Isa::Avx512Bf16) && isa.is_supported() {
            const _: () = assert!(NARROW_COLUMNS == narrow::MAX_COLUMNS);
            // SAFETY: the CPU has AVX-512 F/BW/VL (both paths require them); `validate`
            // checked that every element addressed lies in its slice.
            return unsafe { narrow::matmul(stationary, moving, out, accumulate) };
        }
    }
    let _ = (isa, accumulate);
    false
}

/// Most matmuls [`narrow_chain_compute`] takes.
pub(crate) const NARROW_CHAIN: usize = 128;

/// The values of the scratch [`narrow_chain_compute`] needs for `links` matmuls.
pub(crate) fn narrow_chain_scratch(links: usize) -> usize {
    links.saturating_mul(MAX_K * NARROW_COLUMNS)
}

/// The values of a chain's results ([`narrow_chain_compute`], [`narrow_chain_store`]).
pub(crate) const NARROW_CHAIN_RESULTS: usize = NARROW_COLUMNS * MAX_M;

/// The rows of an output, without its data: row `m` starts at element
/// `offset + m · row_stride`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Rows {
    /// Element offset of row 0.
    pub offset: usize,
    /// Elements between rows.
    pub row_stride: usize,
}

/// Matmuls that accumulate into one output one after another, in one pass (`narrow.rs`), first
/// half: for `pairs` `(stationary, moving)` of one number of stationary columns `M` and one of
/// moving columns `N ≤` [`NARROW_COLUMNS`], the results `init + Σ_l Σ_k stationary_l[k][m] ·
/// moving_l[k][n]` into `results` (transposed; `init` the value at row `m` of `rows` in `out`
/// when `accumulate`, the first matmul's flag: every later one accumulates), each element's FMA
/// chain in the matmuls' order, then `k`'s. `true` when they are the matmuls' results one after
/// the other, bit for bit ([`matmul`]'s definition: under the exponent proof for the whole chain
/// no intermediate result is tiny, so the flush of each matmul's result and the DAZ of the next
/// one's initial value change nothing), for [`narrow_chain_store`]; `false` when `isa` has no
/// such kernel, the matmuls' shapes or dtypes differ, or the operands need the packed paths (as
/// [`matmul_narrow`]). Nothing is written to `out`: two threads may each compute some of the
/// rows (each with its own operands' columns, scratch and results).
///
/// # Panics
/// As [`matmul`] for each pair (over all of its moving columns); if there are more than
/// [`NARROW_CHAIN`] pairs, `scratch` holds fewer than [`narrow_chain_scratch`] values or
/// `results` fewer than [`NARROW_CHAIN_RESULTS`], or `out` has more than `i32::MAX` elements.
pub(crate) fn narrow_chain_compute(
    isa: Isa,
    pairs: &[(Operand<'_>, Operand<'_>)],
    (out, rows): (&[f32], Rows),
    accumulate: bool,
    scratch: &mut [f32],
    results: &mut [f32],
) -> bool {
    assert!(
        pairs.len() <= NARROW_CHAIN,
        "a chain of {} matmuls",
        pairs.len()
    );
    assert!(
        scratch.len() >= narrow_chain_scratch(pairs.len()) && results.len() >= NARROW_CHAIN_RESULTS,
        "a chain's scratch of {} and results of {} values",
        scratch.len(),
        results.len()
    );
    for (st, mv) in pairs {
        validate_shapes(st.shape(), mv.shape(), (out.len(), rows), &(0..mv.cols));
        validate_operand(st);
        validate_operand(mv);
    }
    assert!(
        i32::try_from(out.len()).is_ok(),
        "an output past i32 offsets"
    );
    let Some((st0, mv0)) = pairs.first() else {
        return false;
    };
    let same = pairs
        .iter()
        .all(|(st, mv)| st.cols == st0.cols && mv.cols == mv0.cols);
    if !same || mv0.cols > NARROW_COLUMNS {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(isa, Isa::Avx512 | Isa::Avx512Bf16) && isa.is_supported() {
            const _: () = assert!(NARROW_COLUMNS == narrow::MAX_COLUMNS);
            fn link<'a>((st, mv): &'a (Operand<'a>, Operand<'a>)) -> narrow::Link<'a> {
                narrow::Link {
                    st,
                    runs: narrow::Runs::adjacent(st.cols),
                    mv,
                }
            }
            let mut links = [link(&pairs[0]); NARROW_CHAIN];
            for (l, p) in links.iter_mut().zip(pairs) {
                *l = link(p);
            }
            let places = narrow::Places::Rows {
                offset: rows.offset,
                row_stride: rows.row_stride,
            };
            // SAFETY: the CPU has AVX-512 F/BW/VL; every pair's operands lie in their slices and
            // agree on their `K ≤ MAX_K`; the output's rows hold the `N` columns of every one of
            // the `M ≤ MAX_M` rows, at offsets within i32; the scratch holds each link's widened
            // moving operand, the results `N · MAX_M` values (`MAX_M` a multiple of the quantum).
            return unsafe {
                narrow::compute(
                    (
                        &links[..pairs.len()],
                        &mut scratch[..narrow_chain_scratch(pairs.len())],
                    ),
                    (out, places),
                    accumulate,
                    (results, MAX_M),
                )
            };
        }
    }
    let _ = (isa, out, rows, accumulate, results);
    false
}

/// The second half of a chain ([`narrow_chain_compute`]): writes its results for `m` rows and
/// `n` columns to `rows` of `out`, a NaN as the canonical one.
///
/// # Panics
/// If the rows do not fit `out` or overlap, `out` has more than `i32::MAX` elements, `results`
/// holds fewer than [`NARROW_CHAIN_RESULTS`] values, or `isa` has no narrow kernel (nothing can
/// have been computed).
pub(crate) fn narrow_chain_store(
    isa: Isa,
    (m, n): (usize, usize),
    (out, rows): (&mut [f32], Rows),
    results: &[f32],
) {
    assert!(m <= MAX_M && n <= NARROW_COLUMNS, "a chain of {m} × {n}");
    assert!(
        results.len() >= NARROW_CHAIN_RESULTS,
        "a chain's results of {}",
        results.len()
    );
    let shape = |cols| OperandShape {
        dtype: DType::F32,
        rows: 1,
        cols,
    };
    validate_shapes(shape(m), shape(n), (out.len(), rows), &(0..n));
    assert!(
        i32::try_from(out.len()).is_ok(),
        "an output past i32 offsets"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(isa, Isa::Avx512 | Isa::Avx512Bf16) && isa.is_supported() {
            let places = narrow::Places::Rows {
                offset: rows.offset,
                row_stride: rows.row_stride,
            };
            // SAFETY: the CPU has AVX-512 F/BW/VL; the `m` rows' `n` columns lie in `out`, whose
            // offsets fit i32; the results hold `n · MAX_M` values.
            unsafe { narrow::store(n, (out, places, m), (results, MAX_M)) };
            return;
        }
    }
    let _ = (out, results);
    panic!("no narrow chain was computed on {isa:?}");
}

/// Most stationary columns [`matmul_narrow_group`] takes.
pub(crate) const NARROW_GROUP_COLUMNS: usize = 1 << 14;

/// The values of the scratch [`matmul_narrow_group`] needs for `cols` stationary and `n`
/// moving columns.
pub(crate) fn narrow_group_scratch(cols: usize, n: usize) -> usize {
    cols.next_multiple_of(128).saturating_mul(n)
}

/// Many narrow matmuls in one pass over their stationary operands (`narrow.rs`):
/// `out[places[q] + j] (=|+=) Σ_k stationary[k][q] · moving[k][j]` for every stationary column
/// `q` with a place (`places[q] ≥ 0`) and every moving column `j`, each result [`matmul`]'s bit
/// for bit: the matmuls of a group that each take every `s`-th column of one SBUF region, from
/// successive columns, with one moving operand of at most [`NARROW_COLUMNS`] columns. The
/// stationary operand's `cols` columns lie in runs: column `q` is element
/// `(q / run) · stride + q % run` of its row (`(run, stride)`; `run` a multiple of 16, or at
/// least `cols` for adjacent columns). The places' elements must be distinct for the results to
/// be those of the matmuls one after the other. `scratch` holds [`narrow_group_scratch`]
/// values. `true` when it computed the results, `false` with nothing written when `isa` has no
/// such kernel or the operands need the packed paths (as [`matmul_narrow`]): it is
/// [`narrow_group_compute`], then [`narrow_group_store`] when that takes the operands.
///
/// # Panics
/// As [`narrow_group_compute`].
#[cfg(test)]
pub(crate) fn matmul_narrow_group(
    isa: Isa,
    stationary: (&Operand, (usize, usize)),
    moving: &Operand,
    (out, places): (&mut [f32], &[i32]),
    accumulate: bool,
    scratch: &mut [f32],
) -> bool {
    let taken = narrow_group_compute(isa, stationary, moving, (out, places), accumulate, scratch);
    if taken {
        narrow_group_store(isa, moving.cols, (out, places), scratch);
    }
    taken
}

/// The first half of [`matmul_narrow_group`]: the results into `scratch` alone (`out` is read
/// for the initial accumulators), `true` when they stand; nothing is written to `out`. Two
/// threads may each compute a part of a group's columns (each with its own places and
/// scratch) while neither writes `out`.
///
/// # Panics
/// If an operand does not fit its slice (the stationary one's columns where the runs put them)
/// or has a dtype no matmul reads, the runs are neither, the operands disagree on `K` or `K`
/// exceeds [`MAX_K`], there are more than [`NARROW_GROUP_COLUMNS`] stationary or
/// [`NARROW_COLUMNS`] moving columns, `places` is not one entry per stationary column, a place's
/// elements are not within `out`, `out` has more than `i32::MAX` elements, or `scratch` is too
/// small.
pub(crate) fn narrow_group_compute(
    isa: Isa,
    (stationary, (run, stride)): (&Operand, (usize, usize)),
    moving: &Operand,
    (out, places): (&[f32], &[i32]),
    accumulate: bool,
    scratch: &mut [f32],
) -> bool {
    let (cols, n) = (stationary.cols, moving.cols);
    assert!(
        run > 0 && (run >= cols || run.is_multiple_of(16)),
        "runs of {run} columns for {cols}"
    );
    // The elements the columns span: up to the last column's.
    let span = match cols.checked_sub(1) {
        Some(last) => (last / run)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(last % run + 1))
            .expect("a stationary span past usize"),
        None => 0,
    };
    validate_operand(&Operand {
        cols: span,
        ..*stationary
    });
    validate_operand(moving);
    assert_eq!(
        stationary.rows, moving.rows,
        "stationary and moving disagree on K"
    );
    assert!(
        stationary.rows <= MAX_K,
        "K = {} exceeds {MAX_K}",
        stationary.rows
    );
    assert!(
        cols <= NARROW_GROUP_COLUMNS && n <= NARROW_COLUMNS,
        "a narrow group of {cols} × {n}"
    );
    assert_eq!(places.len(), cols, "one place per stationary column");
    validate_places(n, out.len(), places, scratch.len());
    let pitch = cols.next_multiple_of(128);
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(isa, Isa::Avx512 | Isa::Avx512Bf16) && isa.is_supported() {
            const _: () = assert!(narrow::PITCH_QUANTUM == 128);
            let runs = narrow::Runs { run, stride };
            debug_assert!(runs.vectors_adjacent(cols));
            // SAFETY: the CPU has AVX-512 F/BW/VL; the moving operand lies in its slice, and so
            // does the stationary one's span of its columns (the runs' vectors adjacent); they
            // agree on `K ≤ MAX_K`; every place and the `n` elements after it lie in `out`,
            // whose offsets fit i32; `pitch` is a multiple of the quantum at least `cols`, and
            // the scratch holds `n · pitch` values.
            let link = narrow::Link {
                st: stationary,
                runs,
                mv: moving,
            };
            let mut widened = [0f32; narrow::WIDENED];
            return unsafe {
                narrow::compute(
                    (core::slice::from_ref(&link), &mut widened),
                    (out, narrow::Places::Table(places)),
                    accumulate,
                    (scratch, pitch),
                )
            };
        }
    }
    let _ = (isa, out, accumulate, scratch, pitch);
    false
}

/// The second half of [`matmul_narrow_group`]: writes the results [`narrow_group_compute`] left
/// in `scratch` (for `n` moving columns and the same `places`) to their places in `out`, a NaN
/// as the canonical one.
///
/// # Panics
/// If a place's elements are not within `out`, `out` has more than `i32::MAX` elements, or
/// `scratch` is too small; or if `isa` has no narrow kernel (nothing can have been computed).
pub(crate) fn narrow_group_store(
    isa: Isa,
    n: usize,
    (out, places): (&mut [f32], &[i32]),
    scratch: &[f32],
) {
    assert!(n <= NARROW_COLUMNS, "a narrow group of {n} moving columns");
    validate_places(n, out.len(), places, scratch.len());
    let pitch = places.len().next_multiple_of(128);
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(isa, Isa::Avx512 | Isa::Avx512Bf16) && isa.is_supported() {
            // SAFETY: the CPU has AVX-512 F/BW/VL; every place and the `n` elements after it lie
            // in `out`, whose offsets fit i32; the scratch holds `n · pitch` values.
            unsafe {
                narrow::store(
                    n,
                    (out, narrow::Places::Table(places), places.len()),
                    (scratch, pitch),
                )
            };
            return;
        }
    }
    let _ = (out, scratch, pitch);
    panic!("no narrow group was computed on {isa:?}");
}

/// Checks a narrow group's places (every one's `n` elements within an output of `len`, whose
/// offsets fit i32) and the size of its scratch.
fn validate_places(n: usize, len: usize, places: &[i32], scratch: usize) {
    assert!(i32::try_from(len).is_ok(), "an output past i32 offsets");
    let last = places.iter().copied().max().unwrap_or(-1);
    assert!(
        last < 0 || usize::try_from(last).is_ok_and(|l| l + n <= len),
        "a place past the output"
    );
    assert!(
        scratch >= narrow_group_scratch(places.len(), n),
        "a narrow group's scratch of {scratch} values"
    );
}

/// The layout of a matmul's operands packed by panels, from [`shared_packing`]: which kernel
/// reads them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct MovingPacking {
    kernel: PackedKernel,
}

/// The kernels that read operands packed by panels.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum PackedKernel {
    /// AVX-512 `vdpbf16ps`: K-pairs of bf16, 8 × 48 register blocks.
    Avx512Dot,
    /// AVX-512 `vfmadd231ps`: elements widened to f32, 8 × 48 register blocks.
    Avx512F32,
    /// AVX2 `vfmadd231ps`: elements widened to f32, 4 × 24 register blocks.
    Avx2F32,
}

impl MovingPacking {
    /// The words the packing of columns `[0, col)` of an operand of `k` rows takes.
    fn offset(self, k: usize, col: usize) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            match self.kernel {
                PackedKernel::Avx512Dot => avx512::packed_moving_offset(k, col),
                PackedKernel::Avx512F32 => avx512::packed_moving_offset_f32(k, col),
                PackedKernel::Avx2F32 => avx2::packed_moving_offset(k, col),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (self, k, col);
            0
        }
    }

    /// The words between two blocks of [`STATIONARY_BLOCK`] stationary columns packed in this
    /// layout for a contraction of `k` rows.
    fn stationary_block(self, k: usize) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            match self.kernel {
                PackedKernel::Avx512Dot => avx512::packed_stationary_block(true, k),
                PackedKernel::Avx512F32 => avx512::packed_stationary_block(false, k),
                PackedKernel::Avx2F32 => avx2::packed_stationary_block(k),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (self, k);
            0
        }
    }

    /// Whether [`matmul_chain_prepacked`] keeps the accumulators in registers from one matmul
    /// of a chain to the next in this layout (else it runs the matmuls one by one).
    pub(crate) fn chains_in_registers(self) -> bool {
        match self.kernel {
            PackedKernel::Avx512Dot | PackedKernel::Avx2F32 => true,
            PackedKernel::Avx512F32 => false,
        }
    }

    /// Columns per panel of the moving operand.
    fn panel(self) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            match self.kernel {
                PackedKernel::Avx512Dot | PackedKernel::Avx512F32 => avx512::PANEL,
                PackedKernel::Avx2F32 => avx2::PANEL,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = self;
            1
        }
    }
}

/// The stationary operand's columns (the output's rows) a packing keeps together: a
/// [`PackedStationary`] splits at multiples of it.
pub(crate) const STATIONARY_BLOCK: usize = 8;

/// What packing part of a moving operand learned of its values (the smallest magnitude, which
/// decides whether the f32 kernel must flush tiny results); [`MovingKey::and`] combines the
/// parts'.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct MovingKey(u32);

impl MovingKey {
    /// The key of two parts together.
    pub(crate) fn and(self, other: MovingKey) -> MovingKey {
        MovingKey(self.0.min(other.0))
    }
}

/// How a matmul's operands are packed for [`matmul_prepacked`], if [`matmul`] on `isa` packs
/// them by independent panels: every AVX-512 and AVX2 kernel does; the portable path does not
/// (`None`). Two threads that split a matmul's output rows then share one packing of its
/// moving operand: each [`pack_moving`]s half of its panels and [`pack_stationary`]s its rows
/// of the stationary operand, then each runs [`matmul_prepacked`] on its rows.
pub(crate) fn shared_packing(
    isa: Isa,
    stationary: &Operand,
    moving: &Operand,
) -> Option<MovingPacking> {
    packing_of(isa, stationary.dtype, moving.dtype)
}

/// [`shared_packing`] for operands of these dtypes.
pub(crate) fn packing_of(isa: Isa, stationary: DType, moving: DType) -> Option<MovingPacking> {
    #[cfg(target_arch = "x86_64")]
    {
        let dot = super::bf16_dot_is_fast() && stationary == DType::Bf16 && moving == DType::Bf16;
        let kernel = match isa {
            Isa::Portable => return None,
            Isa::Avx2Fma => PackedKernel::Avx2F32,
            Isa::Avx512 => PackedKernel::Avx512F32,
            Isa::Avx512Bf16 if dot => PackedKernel::Avx512Dot,
            Isa::Avx512Bf16 => PackedKernel::Avx512F32,
        };
        isa.is_supported().then_some(MovingPacking { kernel })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, stationary, moving);
        None
    }
}

/// Where two threads split the packing of `n` moving columns in layout `packing`: about half,
/// on a panel boundary (`n` when the columns are one panel).
pub(crate) fn moving_split(packing: MovingPacking, n: usize) -> usize {
    (n / 2).next_multiple_of(packing.panel()).min(n)
}

/// An operand's element type and size without its data: what a packed operand keeps of it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct OperandShape {
    /// Element type.
    pub dtype: DType,
    /// `K`, the contraction size.
    pub rows: usize,
    /// `M` (stationary) or `N` (moving).
    pub cols: usize,
}

impl Operand<'_> {
    /// The operand's dtype and size.
    pub(crate) fn shape(&self) -> OperandShape {
        OperandShape {
            dtype: self.dtype,
            rows: self.rows,
            cols: self.cols,
        }
    }
}

/// The stationary operand's packing buffer of a [`MatmulScratch`], for [`pack_stationary`].
pub(crate) struct StationaryScratch<'a>(&'a mut AlignedBuf);

/// The moving operand's packing buffer of a [`MatmulScratch`], for [`pack_moving`].
pub(crate) struct MovingScratch<'a>(&'a mut AlignedBuf);

impl MatmulScratch {
    /// The stationary and the moving buffer, to be packed separately.
    pub(crate) fn parts(&mut self) -> (StationaryScratch<'_>, MovingScratch<'_>) {
        (StationaryScratch(&mut self.a), MovingScratch(&mut self.b))
    }

    /// The stationary buffer alone.
    pub(crate) fn stationary(&mut self) -> StationaryScratch<'_> {
        StationaryScratch(&mut self.a)
    }
}

impl<'a> MovingScratch<'a> {
    /// The words of a moving operand of `k` rows packed in layout `packing`, split at column
    /// `col` (from [`moving_split`]; 0 puts every column in the second part): where the columns
    /// before it and from it go, for two threads' [`pack_moving`].
    pub(crate) fn split(
        &mut self,
        packing: MovingPacking,
        k: usize,
        col: usize,
    ) -> (&mut [u32], &mut [u32]) {
        let words = self.0.as_mut_slice();
        let at = packing.offset(k, col).min(words.len());
        words.split_at_mut(at)
    }

    /// The moving operand of `shape` packed here in layout `packing`, every column of it by
    /// [`pack_moving`] calls whose keys combine into `key`, for [`matmul_prepacked`]. (Packed
    /// otherwise, the results are meaningless, but every read stays inside the buffer.)
    pub(crate) fn packed(
        self,
        packing: MovingPacking,
        shape: OperandShape,
        key: MovingKey,
    ) -> PackedMoving<'a> {
        PackedMoving {
            packing,
            words: self.0.as_slice(),
            shape,
            key,
        }
    }
}

/// A moving operand packed for [`matmul_prepacked`] ([`MovingScratch::packed`]).
#[derive(Copy, Clone)]
pub(crate) struct PackedMoving<'a> {
    packing: MovingPacking,
    words: &'a [u32],
    shape: OperandShape,
    key: MovingKey,
}

/// A stationary operand packed for [`matmul_prepacked`] by [`pack_stationary`].
#[derive(Copy, Clone)]
pub(crate) struct PackedStationary<'a> {
    packing: MovingPacking,
    words: &'a [u32],
    shape: OperandShape,
    key: u32,
}

impl<'a> PackedStationary<'a> {
    /// The packing of the operand's columns `cols` alone (the output's rows `cols`), for
    /// threads that split a matmul's rows but share one packing of its stationary operand.
    ///
    /// # Panics
    /// If `cols` does not start at a multiple of [`STATIONARY_BLOCK`] or is not within the
    /// operand's columns.
    pub(crate) fn columns(&self, cols: Range<usize>) -> PackedStationary<'a> {
        assert!(
            cols.start.is_multiple_of(STATIONARY_BLOCK)
                && cols.start <= cols.end
                && cols.end <= self.shape.cols,
            "columns {cols:?} of a packed stationary operand of {} columns",
            self.shape.cols
        );
        let block = self.packing.stationary_block(self.shape.rows);
        let at = (cols.start / STATIONARY_BLOCK * block).min(self.words.len());
        PackedStationary {
            words: &self.words[at..],
            shape: OperandShape {
                cols: cols.len(),
                ..self.shape
            },
            ..*self
        }
    }
}

/// Which operand an [`OwnedPacking`] holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Side {
    Stationary,
    Moving,
}

/// One operand packed for [`matmul_prepacked`] in a buffer of its own, which can be packed
/// again in place (a cache of packings keeps these).
pub(crate) struct OwnedPacking {
    side: Side,
    packing: MovingPacking,
    buf: AlignedBuf,
    shape: OperandShape,
    /// [`MovingKey`]'s value for a moving operand, the exponent key of a stationary one.
    key: u32,
}

impl OwnedPacking {
    /// A buffer that holds any moving operand's packing, for [`OwnedPacking::moving`].
    pub(crate) fn moving_buffer() -> AlignedBuf {
        AlignedBuf::new(B_WORDS)
    }

    /// A buffer that holds any stationary operand's packing, for [`OwnedPacking::stationary`].
    pub(crate) fn stationary_buffer() -> AlignedBuf {
        AlignedBuf::new(A_WORDS)
    }

    /// `moving`'s packing in layout `packing` (from [`shared_packing`] for `isa`), every
    /// column of it, in `buf` (from [`OwnedPacking::moving_buffer`]).
    pub(crate) fn moving(
        buf: AlignedBuf,
        isa: Isa,
        packing: MovingPacking,
        moving: &Operand,
    ) -> OwnedPacking {
        assert_eq!(buf.len(), B_WORDS, "not a moving packing's buffer");
        let mut p = OwnedPacking {
            side: Side::Moving,
            packing,
            buf,
            shape: moving.shape(),
            key: 0,
        };
        p.pack_moving(isa, packing, moving);
        p
    }

    /// `stationary`'s packing ([`pack_stationary`]), in `buf` (from
    /// [`OwnedPacking::stationary_buffer`]).
    pub(crate) fn stationary(
        buf: AlignedBuf,
        isa: Isa,
        packing: MovingPacking,
        stationary: &Operand,
    ) -> OwnedPacking {
        assert_eq!(buf.len(), A_WORDS, "not a stationary packing's buffer");
        let mut p = OwnedPacking {
            side: Side::Stationary,
            packing,
            buf,
            shape: stationary.shape(),
            key: 0,
        };
        p.pack_stationary(isa, packing, stationary);
        p
    }

    /// Packs `moving` into this buffer, as [`OwnedPacking::moving`] does.
    ///
    /// # Panics
    /// If the buffer holds a stationary operand's packing.
    pub(crate) fn pack_moving(&mut self, isa: Isa, packing: MovingPacking, moving: &Operand) {
        assert_eq!(self.side, Side::Moving, "a stationary packing's buffer");
        let words = self.buf.as_mut_slice();
        self.key = pack_moving(isa, packing, words, moving, 0..moving.cols).0;
        (self.packing, self.shape) = (packing, moving.shape());
    }

    /// Packs `stationary` into this buffer, as [`OwnedPacking::stationary`] does.
    ///
    /// # Panics
    /// If the buffer holds a moving operand's packing.
    pub(crate) fn pack_stationary(
        &mut self,
        isa: Isa,
        packing: MovingPacking,
        stationary: &Operand,
    ) {
        assert_eq!(self.side, Side::Stationary, "a moving packing's buffer");
        let words = self.buf.as_mut_slice();
        self.key = pack_stationary_words(isa, packing, words, stationary);
        (self.packing, self.shape) = (packing, stationary.shape());
    }

    /// The layout it is packed in.
    pub(crate) fn layout(&self) -> MovingPacking {
        self.packing
    }

    /// The packing as a moving operand; `None` if it is a stationary one's.
    pub(crate) fn as_moving(&self) -> Option<PackedMoving<'_>> {
        (self.side == Side::Moving).then(|| PackedMoving {
            packing: self.packing,
            words: self.buf.as_slice(),
            shape: self.shape,
            key: MovingKey(self.key),
        })
    }

    /// The packing as a stationary operand; `None` if it is a moving one's.
    pub(crate) fn as_stationary(&self) -> Option<PackedStationary<'_>> {
        (self.side == Side::Stationary).then(|| PackedStationary {
            packing: self.packing,
            words: self.buf.as_slice(),
            shape: self.shape,
            key: self.key,
        })
    }
}

impl core::fmt::Debug for OwnedPacking {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OwnedPacking")
            .field("side", &self.side)
            .field("packing", &self.packing)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

/// The kernel of layout `packing` after checking that [`packing_of`] gives it for `isa` (for
/// some pair of dtypes) and that it packs operands of `dtype` (the `vdpbf16ps` layout packs
/// bf16 alone): the packers' features are then the CPU's.
///
/// # Panics
/// If it does not.
#[cfg(target_arch = "x86_64")]
fn checked_kernel(isa: Isa, packing: MovingPacking, dtype: DType) -> PackedKernel {
    let ok = isa.is_supported()
        && match packing.kernel {
            PackedKernel::Avx512Dot => isa == Isa::Avx512Bf16 && dtype == DType::Bf16,
            PackedKernel::Avx512F32 => matches!(isa, Isa::Avx512 | Isa::Avx512Bf16),
            PackedKernel::Avx2F32 => isa == Isa::Avx2Fma,
        };
    assert!(
        ok,
        "a {dtype:?} operand packed in layout {packing:?} on {isa:?}"
    );
    packing.kernel
}

/// Packs the moving operand's columns `cols` (starting on a panel boundary) in layout
/// `packing` (from [`shared_packing`] for `isa`) into `words`, the part of a
/// [`MovingScratch::split`] buffer where those columns go, and returns what the packing
/// learned of them.
pub(crate) fn pack_moving(
    isa: Isa,
    packing: MovingPacking,
    words: &mut [u32],
    moving: &Operand,
    cols: Range<usize>,
) -> MovingKey {
    assert!(
        cols.start <= cols.end && cols.end <= moving.cols && moving.rows <= MAX_K,
        "columns {cols:?} of a moving operand of {} columns",
        moving.cols
    );
    validate_operand(moving);
    if cols.is_empty() {
        return MovingKey(u32::MAX);
    }
    #[cfg(target_arch = "x86_64")]
    {
        let kernel = checked_kernel(isa, packing, moving.dtype);
        // SAFETY: `checked_kernel` checked the CPU's features for the layout's kernel (and that
        // the `vdpbf16ps` layout packs a bf16 operand); `validate_operand` that the dtype is
        // one the packers read and that every element of the operand lies in its slice; the
        // packers assert that `words` holds the packing.
        unsafe {
            match kernel {
                PackedKernel::Avx512Dot => {
                    avx512::pack_moving_bf16(words, moving, cols);
                    MovingKey(u32::MAX)
                }
                PackedKernel::Avx512F32 => MovingKey(avx512::pack_moving_f32(words, moving, cols)),
                PackedKernel::Avx2F32 => MovingKey(avx2::pack_moving_f32(words, moving, cols)),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, packing, words);
        unreachable!("no panel packing on this architecture")
    }
}

/// Packs the stationary operand in layout `packing` (from [`shared_packing`] for `isa`) into
/// `scratch`, for [`matmul_prepacked`].
pub(crate) fn pack_stationary<'a>(
    isa: Isa,
    packing: MovingPacking,
    scratch: StationaryScratch<'a>,
    stationary: &Operand,
) -> PackedStationary<'a> {
    let words = scratch.0.as_mut_slice();
    let key = pack_stationary_words(isa, packing, words, stationary);
    PackedStationary {
        packing,
        words,
        shape: stationary.shape(),
        key,
    }
}

/// [`pack_stationary`] into `words`; returns the packing's exponent key.
fn pack_stationary_words(
    isa: Isa,
    packing: MovingPacking,
    words: &mut [u32],
    stationary: &Operand,
) -> u32 {
    assert!(
        stationary.rows <= MAX_K && stationary.cols <= MAX_M,
        "a stationary operand of {} × {}",
        stationary.rows,
        stationary.cols
    );
    validate_operand(stationary);
    #[cfg(target_arch = "x86_64")]
    {
        let kernel = checked_kernel(isa, packing, stationary.dtype);
        // SAFETY: as in `pack_moving`.
        unsafe {
            match kernel {
                PackedKernel::Avx512Dot => {
                    avx512::pack_stationary_bf16(words, stationary);
                    u32::MAX
                }
                PackedKernel::Avx512F32 => avx512::pack_stationary_f32(words, stationary),
                PackedKernel::Avx2F32 => avx2::pack_stationary_f32(words, stationary),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, packing, words);
        unreachable!("no panel packing on this architecture")
    }
}

/// Where a matmul also writes its results converted to `dtype` (bf16 or f32) as it computes
/// them: the `tensor_copy` out of PSUM that follows a matmul, done while each block of results
/// is still in L1. `copy[m][n]` (for the output's `out[m][n]`) is at byte
/// `offset + m * row_stride + n * dtype.size()` of `data`, converted with the model's
/// conversion ([`super::convert`]).
#[derive(Debug)]
pub(crate) struct CopyOut<'a> {
    /// The memory it goes to (the SBUF bytes).
    pub data: &'a mut [u8],
    /// `Bf16` or `F32`.
    pub dtype: DType,
    /// Byte offset of `copy[0][0]`.
    pub offset: usize,
    /// Bytes between `copy[m][n]` and `copy[m + 1][n]`.
    pub row_stride: usize,
}

/// A [`CopyOut`] as raw parts for the kernels' block loops: where the copy of output column
/// `col0` of row 0 is, bytes between rows, and whether it holds bf16 (else f32).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct CopyAt {
    /// Where the copy of output column `col0` of row 0 is.
    origin: *mut u8,
    /// Bytes between rows.
    row_stride: usize,
    /// Whether it holds bf16 (else f32).
    bf16: bool,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl CopyAt {
    /// The copy `c` of an output whose columns start at `col0`.
    fn new(c: &mut CopyOut, col0: usize) -> CopyAt {
        let size = c.dtype.size() as usize;
        CopyAt {
            origin: c.data.as_mut_ptr().wrapping_add(c.offset + col0 * size),
            row_stride: c.row_stride,
            bf16: c.dtype == DType::Bf16,
        }
    }

    /// Where the copy of the block at row `row`, column `col` (from `col0`) starts.
    fn block(&self, row: usize, col: usize) -> *mut u8 {
        let size = if self.bf16 { 2 } else { 4 };
        self.origin.wrapping_add(row * self.row_stride + col * size)
    }
}

/// [`matmul`] over all of the moving operand's columns, both operands already packed (the
/// stationary one by [`pack_stationary`], the moving one by [`pack_moving`]s into a
/// [`MovingScratch`]), and, with `copy`, each result also converted into it. The same bits as
/// [`matmul`] (and the copy's as [`super::convert`]'s of them).
///
/// # Panics
/// As [`matmul`]; also if the operands were packed in different layouts or in another than
/// [`shared_packing`]'s for `isa`, or if `copy` does not fit its slice, its rows overlap or its
/// dtype is neither `Bf16` nor `F32`.
pub(crate) fn matmul_prepacked(
    isa: Isa,
    stationary: &PackedStationary,
    moving: &PackedMoving,
    out: &mut Output,
    copy: Option<&mut CopyOut>,
    accumulate: bool,
) {
    matmul_chain_prepacked(isa, &[(*stationary, *moving)], out, copy, accumulate);
}

/// One matmul of a chain as the packed kernels read it: its stationary operand packed into
/// `a`, its moving operand's columns packed into `b`, both of `k` rows, in the kernel's
/// layout.
#[derive(Copy, Clone)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Link<'a> {
    /// The packed stationary operand.
    a: &'a [u32],
    /// The packed moving operand.
    b: &'a [u32],
    /// The contraction size.
    k: usize,
}

/// Most matmuls [`matmul_chain_prepacked`] runs in one pass.
pub(crate) const PACKED_CHAIN: usize = 16;

/// The matmuls `links` (each one's packed operands, all of one layout and of one shape but for
/// the contraction size) into `out` one after another, the first as `accumulate` says and the
/// others accumulating, and, with
/// `copy`, the last one's results also converted into it: the bits of [`matmul_prepacked`] on
/// each link in turn. With the `vdpbf16ps` kernel, and with the AVX2 one while no product or
/// initial value can make a result tiny, each block of accumulators stays in registers from one
/// link to the next, instead of a store and a load of the block between two matmuls (with K =
/// 128 a tenth of the kernel's time); the AVX-512 f32 kernel runs the links one by one.
///
/// # Panics
/// As [`matmul_prepacked`] for each link (which is a chain of one); also if the links differ
/// in layout, dtypes or free sizes, or if there are more than [`PACKED_CHAIN`] of them.
pub(crate) fn matmul_chain_prepacked(
    isa: Isa,
    links: &[(PackedStationary, PackedMoving)],
    out: &mut Output,
    mut copy: Option<&mut CopyOut>,
    accumulate: bool,
) {
    let Some(((s0, m0), rest)) = links.split_first() else {
        return;
    };
    // Alike but for the contraction size, which each link has its own of.
    let alike = |s: &OperandShape, m: &OperandShape| {
        (s.dtype, s.cols, m.dtype, m.cols)
            == (s0.shape.dtype, s0.shape.cols, m0.shape.dtype, m0.shape.cols)
    };
    assert!(
        links.len() <= PACKED_CHAIN
            && rest.iter().all(|(s, m)| {
                alike(&s.shape, &m.shape) && (s.packing, m.packing) == (s0.packing, m0.packing)
            }),
        "a chain of {} matmuls of different shapes or layouts (at most {PACKED_CHAIN} alike)",
        links.len()
    );
    let (st, mv) = (s0.shape, m0.shape);
    let cols = 0..mv.cols;
    for (s, m) in links {
        validate_shapes(s.shape, m.shape, (out.data.len(), out.rows()), &cols);
    }
    if let Some(c) = &copy {
        validate_copy(c, st.cols, &cols);
    }
    if cols.is_empty() || st.cols == 0 {
        return;
    }
    let packing = m0.packing;
    assert!(
        s0.packing == packing && packing_of(isa, st.dtype, mv.dtype) == Some(packing),
        "operands packed in another layout than {isa:?}'s for {:?} × {:?}",
        st.dtype,
        mv.dtype
    );
    if !packing.chains_in_registers() && !rest.is_empty() {
        let last = links.len() - 1;
        for (i, link) in links.iter().enumerate() {
            let c = if i == last { copy.take() } else { None };
            matmul_chain_prepacked(
                isa,
                core::slice::from_ref(link),
                out,
                c,
                accumulate || i > 0,
            );
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let empty = Link {
            a: &[],
            b: &[],
            k: 0,
        };
        let mut chain = [empty; PACKED_CHAIN];
        for (l, (s, m)) in chain.iter_mut().zip(links) {
            *l = Link {
                a: s.words,
                b: m.words,
                k: s.shape.rows,
            };
        }
        let chain = &chain[..links.len()];
        // No product of any link can be tiny (`products_on_grid`).
        let ops_ok = links
            .iter()
            .all(|(s, m)| products_on_grid(s.key, st.dtype, m.key.0, mv.dtype));
        let m = st.cols;
        // SAFETY: `packing_of` checked the CPU's features and chose the kernel; the shapes,
        // the output and the copy are validated; the kernels assert the buffers' sizes
        // (whatever they hold, every access stays inside them).
        unsafe {
            match (packing.kernel, chain) {
                (PackedKernel::Avx512Dot, _) => {
                    avx512::matmul_bf16_prepacked(chain, m, out, copy, accumulate, cols)
                }
                (PackedKernel::Avx2F32, _) => {
                    avx2::matmul_f32_prepacked(chain, ops_ok, m, out, copy, accumulate, cols)
                }
                (PackedKernel::Avx512F32, [l]) => {
                    let (a, b, k) = (l.a, l.b, l.k);
                    avx512::matmul_f32_prepacked(a, b, ops_ok, k, m, out, copy, accumulate, cols)
                }
                (PackedKernel::Avx512F32, _) => unreachable!("runs a chain one matmul at a time"),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, copy, accumulate);
        unreachable!("no panel packing on this architecture")
    }
}

/// [`matmul`] with the choice of the `vdpbf16ps` kernel made by the caller (`bf16_dot`: use it
/// for bf16 × bf16 on [`Isa::Avx512Bf16`]), so that the tests can run both kernels anywhere.
#[allow(clippy::too_many_arguments)]
fn run(
    isa: Isa,
    bf16_dot: bool,
    scratch: &mut MatmulScratch,
    stationary: &Operand,
    moving: &Operand,
    out: &mut Output,
    accumulate: bool,
    cols: Range<usize>,
) {
    validate(stationary, moving, out, &cols);
    if cols.is_empty() || stationary.cols == 0 {
        return;
    }
    match isa {
        Isa::Portable => portable(scratch, stationary, moving, out, accumulate, cols),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            let both_bf16 = stationary.dtype == DType::Bf16 && moving.dtype == DType::Bf16;
            // SAFETY: `assert_supported` checked the CPU features of `isa`, which cover every
            // feature these functions enable; `validate` checked that every element they
            // address lies inside its slice.
            unsafe {
                match isa {
                    Isa::Avx512Bf16 if both_bf16 && bf16_dot => {
                        avx512::matmul_bf16(scratch, stationary, moving, out, accumulate, cols)
                    }
                    Isa::Avx512Bf16 | Isa::Avx512 => {
                        avx512::matmul_f32(scratch, stationary, moving, out, accumulate, cols)
                    }
                    Isa::Avx2Fma => {
                        avx2::matmul_f32(scratch, stationary, moving, out, accumulate, cols)
                    }
                    Isa::Portable => unreachable!("the portable path is taken above"),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            let _ = bf16_dot;
            isa.assert_supported();
            unreachable!()
        }
    }
}

/// Checks shapes and bounds; the vector paths rely on it for memory safety.
fn validate(st: &Operand, mv: &Operand, out: &Output, cols: &Range<usize>) {
    validate_shapes(st.shape(), mv.shape(), (out.data.len(), out.rows()), cols);
    validate_operand(st);
    validate_operand(mv);
}

/// Checks the operands' shapes against each other and the limits, and the output's bounds.
fn validate_shapes(
    st: OperandShape,
    mv: OperandShape,
    (len, out): (usize, Rows),
    cols: &Range<usize>,
) {
    assert_eq!(st.rows, mv.rows, "stationary and moving disagree on K");
    assert!(st.rows <= MAX_K, "K = {} exceeds {MAX_K}", st.rows);
    assert!(st.cols <= MAX_M, "M = {} exceeds {MAX_M}", st.cols);
    assert!(mv.cols <= MAX_N, "N = {} exceeds {MAX_N}", mv.cols);
    assert!(
        cols.start <= cols.end && cols.end <= mv.cols,
        "column range {cols:?} not within 0..{}",
        mv.cols
    );
    let m = st.cols;
    if m > 0 && !cols.is_empty() {
        assert!(
            m == 1 || out.row_stride >= cols.end,
            "matmul output rows overlap"
        );
        let end = (m - 1)
            .checked_mul(out.row_stride)
            .and_then(|x| x.checked_add(out.offset))
            .and_then(|x| x.checked_add(cols.end));
        assert!(
            end.is_some_and(|end| end <= len),
            "matmul output does not fit its slice"
        );
    }
}

/// Checks a [`CopyOut`] of `m` rows and columns `cols`: its dtype, that its rows do not
/// overlap and that it fits its slice.
fn validate_copy(c: &CopyOut, m: usize, cols: &Range<usize>) {
    assert!(
        matches!(c.dtype, DType::Bf16 | DType::F32),
        "a matmul's copy is bf16 or f32, not {:?}",
        c.dtype
    );
    let row = cols.end * elem_size(c.dtype);
    if m > 0 && !cols.is_empty() {
        assert!(m == 1 || c.row_stride >= row, "matmul copy rows overlap");
        let end = (m - 1)
            .checked_mul(c.row_stride)
            .and_then(|x| x.checked_add(c.offset))
            .and_then(|x| x.checked_add(row));
        assert!(
            end.is_some_and(|end| end <= c.data.len()),
            "matmul copy does not fit its slice"
        );
    }
}

/// Checks that an operand has a dtype the matmul reads (every path sizes its elements by it)
/// and that every element lies inside its slice.
fn validate_operand(op: &Operand) {
    assert!(
        matches!(op.dtype, DType::F32 | DType::Bf16 | DType::F16),
        "a matmul operand is f32, bf16 or f16, not {:?}",
        op.dtype
    );
    let size = elem_size(op.dtype);
    if op.rows > 0 && op.cols > 0 {
        let end = (op.rows - 1)
            .checked_mul(op.row_stride)
            .and_then(|x| x.checked_add(op.offset))
            .and_then(|x| x.checked_add(op.cols * size));
        assert!(
            end.is_some_and(|end| end <= op.data.len()),
            "matmul operand does not fit its slice"
        );
    }
}

// ---- Packed layouts of the vector paths ----

/// Words from one packed block of `bw` columns (a moving panel or a stationary row block) to
/// the next, for `rows` packed rows (K-pairs or `k`): the block's `rows · bw` words and one
/// cache line more. A packer writes the same row of every block in turn; unpadded, those rows
/// would be a multiple of 4 KiB apart (a bf16 panel of 64 pairs is 12 KiB) and all fall in one
/// L1 set.
#[cfg(target_arch = "x86_64")]
const fn block_stride(rows: usize, bw: usize) -> usize {
    rows * bw + 16
}

/// The smallest [`exp_key`] of a packed f32 region, from `min`, the minimum over its words of
/// `|bits| − 1` (`u32::MAX`: all zero): read off `min`, unless a subnormal is present; then the
/// region is flushed first (DAZ, the rare case: only f32 and bf16 operands have subnormals).
///
/// # Safety
/// `dst` holds the region a packer wrote for `rows` rows and `width` columns: every column up
/// to `width` rounded up to `chunk`, in blocks of `BW` columns [`block_stride`] apart.
#[cfg(target_arch = "x86_64")]
unsafe fn packed_key<const BW: usize>(
    min: u32,
    dst: *mut u32,
    rows: usize,
    width: usize,
    chunk: usize,
) -> u32 {
    match min {
        u32::MAX => u32::MAX, // all zero
        // SAFETY: forwarded caller contract.
        m if m < 0x007f_ffff => unsafe { flush_packed::<BW>(dst, rows, width, chunk) },
        m => ((m + 1) >> 23) - 1, // `exp_key` of the smallest nonzero magnitude
    }
}

/// DAZ over a packed region ([`packed_key`]'s): flushes every subnormal word and returns the
/// minimum [`exp_key`] of the result.
///
/// # Safety
/// As for [`packed_key`].
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
unsafe fn flush_packed<const BW: usize>(
    dst: *mut u32,
    rows: usize,
    width: usize,
    chunk: usize,
) -> u32 {
    let mut key = u32::MAX;
    for c in 0..width.div_ceil(chunk) * chunk {
        for k in 0..rows {
            // SAFETY: the packer stored this word (all `chunk` columns of every chunk).
            let w = unsafe { &mut *dst.add(c / BW * block_stride(rows, BW) + k * BW + c % BW) };
            let x = daz(f32::from_bits(*w));
            *w = x.to_bits();
            key = key.min(exp_key(x));
        }
    }
    key
}

// ---- Scalar pieces of the definition, shared by every path ----

/// Flushes an f32 subnormal to a zero of the same sign.
#[inline]
pub(crate) fn daz(x: f32) -> f32 {
    let bits = x.to_bits();
    if bits & 0x7f80_0000 == 0 {
        f32::from_bits(bits & 0x8000_0000)
    } else {
        x
    }
}

/// A key whose minimum over values gives the smallest exponent field of the nonzero ones:
/// `exponent field − 1`, so that zeros (after DAZ) map to `u32::MAX`.
#[inline]
pub(super) fn exp_key(x: f32) -> u32 {
    ((x.to_bits() >> 23) & 0xff).wrapping_sub(1)
}

/// Mantissa bits of a dtype once widened: every nonzero finite value is a multiple of
/// `2^(exponent − mantissa_bits)`.
fn mantissa_bits(dtype: DType) -> i32 {
    match dtype {
        DType::F32 => 23,
        DType::F16 => 10,
        DType::Bf16 => 7,
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
            unreachable!("validate_operand admits f32, bf16 and f16, not {:?}", dtype)
        }
    }
}

/// Whether every product of the operands lies on the grid `2^-126 · ℤ`, given the minimum
/// [`exp_key`] of each operand (see the module docs: then the FMA chain needs no FTZ).
pub(super) fn products_on_grid(key_a: u32, dt_a: DType, key_b: u32, dt_b: DType) -> bool {
    if key_a == u32::MAX || key_b == u32::MAX {
        return true; // one operand is all zero: every product is ±0 (or NaN).
    }
    let grain = |key: u32, dt: DType| key as i32 + 1 - 127 - mantissa_bits(dt);
    grain(key_a, dt_a) + grain(key_b, dt_b) >= -126
}

/// Whether an initial accumulator (after DAZ) lies on the grid `2^-126 · ℤ`: zero, or an
/// exponent field of at least 24 (`ulp ≥ 2^-126`).
#[inline]
pub(super) fn acc_on_grid(x: f32) -> bool {
    exp_key(x) >= 23
}

/// One step of the definition: `FTZ(round(acc + a·b))` for DAZ'd `a`, `b` and a flushed `acc`.
#[inline]
pub(crate) fn step(a: f32, b: f32, acc: f32) -> f32 {
    let r = a.mul_add(b, acc);
    if (r.to_bits() & 0x7fff_ffff).wrapping_sub(1) < 0x0080_0000 {
        ftz_fixup(r, a, b, acc)
    } else {
        r
    }
}

/// FTZ for an IEEE FMA result `r = round(acc + a·b)` with `0 < |r| ≤ 2^-126`: flushes when the
/// result is tiny after rounding with an unbounded exponent (the `vdpbf16ps` rule).
#[cold]
#[inline(never)]
fn ftz_fixup(r: f32, a: f32, b: f32, acc: f32) -> f32 {
    let bits = r.to_bits();
    let zero = f32::from_bits(bits & 0x8000_0000);
    if bits & 0x7fff_ffff != 0x0080_0000 {
        return zero; // subnormal (or zero)
    }
    // |r| is 2^-126: compare the exact |acc + a·b| with 2^-126 − 2^-151 (the boundary below
    // which 24-bit rounding gives 2^-126 − 2^-150). `p` is exact in f64 (48-bit product) and
    // (s, t) is the exact sum as an f64 pair (TwoSum), so s + t = acc + a·b.
    let p = a as f64 * b as f64;
    let c = acc as f64;
    let s = p + c;
    let bb = s - p;
    let t = (p - (s - bb)) + (c - bb);
    let (s, t) = if bits >> 31 == 1 { (-s, -t) } else { (s, t) };
    const LIMIT: f64 = f32::MIN_POSITIVE as f64 * (1.0 - 1.0 / (1u64 << 25) as f64);
    if s < LIMIT || (s == LIMIT && t < 0.0) {
        zero
    } else {
        r
    }
}

/// Recomputes an `rows × cols` output block with scalar [`step`]s (the definition itself)
/// from packed f32 operands: `a[k * a_stride + r]`, `b[k * b_stride + c]`. The vector paths
/// fall back to it for the rare blocks where some step's result was exactly `±2^-126`.
///
/// # Safety
/// The packed operands hold `k` rows of at least `rows` / `cols` values; the output block
/// (`out[r * stride + c]`) is in bounds.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) unsafe fn exact_block(
    k: usize,
    a: *const f32,
    a_stride: usize,
    b: *const f32,
    b_stride: usize,
    out: *mut f32,
    stride: usize,
    rows: usize,
    cols: usize,
    accumulate: bool,
) {
    for r in 0..rows {
        for c in 0..cols {
            // SAFETY: in bounds by the caller's contract.
            unsafe {
                let o = out.add(r * stride + c);
                let mut acc = if accumulate { daz(*o) } else { -0.0 };
                for kk in 0..k {
                    acc = step(*a.add(kk * a_stride + r), *b.add(kk * b_stride + c), acc);
                }
                *o = canonical(acc);
            }
        }
    }
}

/// Replaces a NaN by the canonical one.
#[inline]
fn canonical(x: f32) -> f32 {
    if x.is_nan() {
        f32::from_bits(CANONICAL_NAN)
    } else {
        x
    }
}

// ---- The portable path ----

/// Widens `op[k][cols]` for every `k` into `dst[k * cols.len() + i]` with DAZ; returns the
/// minimum [`exp_key`].
fn widen_rows(op: &Operand, cols: Range<usize>, dst: &mut [f32]) -> u32 {
    let size = elem_size(op.dtype);
    let w = cols.len();
    let mut key = u32::MAX;
    for k in 0..op.rows {
        let start = op.offset + k * op.row_stride + cols.start * size;
        let src = &op.data[start..start + w * size];
        let row = &mut dst[k * w..(k + 1) * w];
        match op.dtype {
            DType::F32 => {
                for (d, s) in row.iter_mut().zip(src.chunks_exact(4)) {
                    *d = daz(f32::from_le_bytes([s[0], s[1], s[2], s[3]]));
                }
            }
            DType::Bf16 => {
                for (d, s) in row.iter_mut().zip(src.chunks_exact(2)) {
                    *d = daz(bf16_to_f32(u16::from_le_bytes([s[0], s[1]])));
                }
            }
            DType::F16 => {
                for (d, s) in row.iter_mut().zip(src.chunks_exact(2)) {
                    *d = f16_to_f32(u16::from_le_bytes([s[0], s[1]]));
                }
            }
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
        key = row.iter().fold(key, |m, &x| m.min(exp_key(x)));
    }
    key
}

/// Plain loops: widen both operands, then one FMA chain per output row.
fn portable(
    scratch: &mut MatmulScratch,
    st: &Operand,
    mv: &Operand,
    out: &mut Output,
    accumulate: bool,
    cols: Range<usize>,
) {
    let (k, m, w) = (st.rows, st.cols, cols.len());
    let a: &mut [f32] = bytemuck::cast_slice_mut(&mut scratch.a.as_mut_slice()[..k * m]);
    let key_a = widen_rows(st, 0..m, a);
    let b: &mut [f32] = bytemuck::cast_slice_mut(&mut scratch.b.as_mut_slice()[..k * w]);
    let key_b = widen_rows(mv, cols.clone(), b);
    let ops_ok = products_on_grid(key_a, st.dtype, key_b, mv.dtype);
    for mi in 0..m {
        let start = out.offset + mi * out.row_stride + cols.start;
        let row = &mut out.data[start..start + w];
        let mut acc_ok = true;
        for x in row.iter_mut() {
            *x = if accumulate { daz(*x) } else { -0.0 };
            acc_ok &= acc_on_grid(*x);
        }
        if ops_ok && acc_ok {
            for ki in 0..k {
                let av = a[ki * m + mi];
                for (x, &bv) in row.iter_mut().zip(&b[ki * w..(ki + 1) * w]) {
                    *x = av.mul_add(bv, *x);
                }
            }
        } else {
            for ki in 0..k {
                let av = a[ki * m + mi];
                for (x, &bv) in row.iter_mut().zip(&b[ki * w..(ki + 1) * w]) {
                    *x = step(av, bv, *x);
                }
            }
        }
        for x in row.iter_mut() {
            *x = canonical(*x);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::convert::{convert, f32_to_bf16, f32_to_f16, tests::Rng};
    use super::*;

    /// Kinds of generated data.
    #[derive(Copy, Clone, Debug, PartialEq)]
    pub(crate) enum Kind {
        /// Random values of moderate magnitude (some zeros).
        Normal,
        /// Tiny magnitudes: products and sums around 2^-126, subnormals, signed zeros.
        Tiny,
        /// Mostly signed zeros.
        Zeros,
        /// Normal values with infinities and NaNs sprinkled in.
        Special,
        /// Products of 2^-154 .. 2^-146 on initial accumulators within a few ulps of
        /// ±2^-126: results often round to exactly ±2^-126, where the flush decision needs the
        /// exact sum.
        Boundary,
    }

    fn gen_f32(rng: &mut Rng, kind: Kind) -> f32 {
        let r = rng.next_u32();
        let sign = if r & 1 == 1 { -1.0f32 } else { 1.0 };
        let mant = 1.0 + (rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
        let pick = (r >> 1) % 16;
        match kind {
            Kind::Normal if pick == 0 => 0.0 * sign,
            Kind::Normal => sign * mant * 2f32.powi((r >> 8) as i32 % 17 - 8),
            Kind::Zeros if pick < 13 => 0.0 * sign,
            Kind::Zeros => sign * mant * 2f32.powi((r >> 8) as i32 % 9 - 4),
            Kind::Special if pick == 0 => f32::INFINITY * sign,
            Kind::Special if pick == 1 => {
                f32::from_bits(0x7fc0_0000 | (rng.next_u32() & 0x803f_ffff))
            }
            Kind::Special => sign * mant * 2f32.powi((r >> 8) as i32 % 17 - 8),
            Kind::Tiny if pick == 0 => 0.0 * sign,
            Kind::Tiny if pick == 1 => f32::from_bits(rng.next_u32() & 0x807f_ffff), // subnormal
            Kind::Boundary => sign * mant * p2(-77 + ((r >> 8) % 5) as i32),
            Kind::Tiny => {
                // |x| ≈ 2^-63 ± 6, so products are ≈ 2^-126 ± 12.
                let e = -69 + ((r >> 8) % 13) as i32;
                sign * mant * (2f32.powi(e / 2) * 2f32.powi(e - e / 2))
            }
        }
    }

    /// An operand in a fake SBUF: `rows × cols` of `dtype`, rows `stride` bytes apart, starting
    /// at an odd offset; returns the bytes and the widened (exact) values.
    fn make_operand(
        rng: &mut Rng,
        dtype: DType,
        rows: usize,
        cols: usize,
        kind: Kind,
    ) -> (Vec<u8>, usize, usize, Vec<f32>) {
        let size = elem_size(dtype);
        let offset = 3;
        let stride = cols * size + 6;
        let mut data = vec![0xeeu8; offset + rows * stride + 8];
        let mut vals = Vec::with_capacity(rows * cols);
        for k in 0..rows {
            for i in 0..cols {
                let x = gen_f32(rng, kind);
                let at = offset + k * stride + i * size;
                let v = match dtype {
                    DType::F32 => {
                        data[at..at + 4].copy_from_slice(&x.to_le_bytes());
                        x
                    }
                    DType::Bf16 => {
                        // Keep subnormals: truncate instead of the flushing conversion.
                        let h = if x.is_subnormal() {
                            (x.to_bits() >> 16) as u16
                        } else {
                            f32_to_bf16(x)
                        };
                        data[at..at + 2].copy_from_slice(&h.to_le_bytes());
                        bf16_to_f32(h)
                    }
                    DType::Tf32
                    | DType::F16
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
                        let h = f32_to_f16(x);
                        data[at..at + 2].copy_from_slice(&h.to_le_bytes());
                        f16_to_f32(h)
                    }
                };
                vals.push(v);
            }
        }
        (data, offset, stride, vals)
    }

    pub(crate) struct Case {
        pub(crate) st: (Vec<u8>, usize, usize, Vec<f32>),
        pub(crate) mv: (Vec<u8>, usize, usize, Vec<f32>),
        dt: (DType, DType),
        pub(crate) k: usize,
        m: usize,
        n: usize,
        pub(crate) psum: Vec<f32>,
    }

    /// A code path: an [`Isa`] and whether bf16 × bf16 uses `vdpbf16ps` (only meaningful for
    /// [`Isa::Avx512Bf16`]). Every supported path, the portable one first; both kernels of
    /// `Avx512Bf16` whatever [`matmul`] would pick on this CPU.
    pub(crate) type Path = (Isa, bool);

    fn paths() -> Vec<Path> {
        let mut paths: Vec<Path> = Isa::supported()
            .into_iter()
            .map(|isa| (isa, false))
            .collect();
        if Isa::Avx512Bf16.is_supported() {
            paths.push((Isa::Avx512Bf16, true));
        }
        paths
    }

    pub(crate) const PORTABLE: Path = (Isa::Portable, false);

    pub(crate) const PSUM_OFFSET: usize = 5;
    pub(crate) const PSUM_STRIDE: usize = 520;

    impl Case {
        pub(crate) fn new(
            seed: u64,
            dt: (DType, DType),
            k: usize,
            m: usize,
            n: usize,
            kind: Kind,
        ) -> Case {
            let mut rng = Rng::new(seed);
            let st = make_operand(&mut rng, dt.0, k, m, kind);
            let mv = make_operand(&mut rng, dt.1, k, n, kind);
            let psum_kind = if kind == Kind::Normal {
                Kind::Normal
            } else {
                Kind::Tiny
            };
            let psum = (0..PSUM_OFFSET + m * PSUM_STRIDE)
                .map(|_| {
                    if kind == Kind::Boundary {
                        let r = rng.next_u32();
                        let bits = 0x0080_0000u32 + (r >> 4) % 5 - 2; // MIN_POSITIVE ± 2 ulps
                        return f32::from_bits(bits | (r & 1) << 31);
                    }
                    let x = gen_f32(&mut rng, psum_kind);
                    if kind == Kind::Tiny && x != 0.0 && rng.next_u32().is_multiple_of(2) {
                        x * 2f32.powi(-40) // deep into the subnormal range, or flushed later
                    } else {
                        x
                    }
                })
                .collect();
            Case {
                st,
                mv,
                dt,
                k,
                m,
                n,
                psum,
            }
        }

        /// The stationary and moving operands.
        pub(crate) fn operands(&self) -> (Operand<'_>, Operand<'_>) {
            let st = Operand {
                data: &self.st.0,
                dtype: self.dt.0,
                offset: self.st.1,
                row_stride: self.st.2,
                rows: self.k,
                cols: self.m,
            };
            let mv = Operand {
                data: &self.mv.0,
                dtype: self.dt.1,
                offset: self.mv.1,
                row_stride: self.mv.2,
                rows: self.k,
                cols: self.n,
            };
            (st, mv)
        }

        pub(crate) fn run(&self, path: Path, accumulate: bool, cols: Range<usize>) -> Vec<f32> {
            let (st, mv) = self.operands();
            let mut psum = self.psum.clone();
            let mut out = Output {
                data: &mut psum,
                offset: PSUM_OFFSET,
                row_stride: PSUM_STRIDE,
            };
            let mut scratch = MatmulScratch::new();
            super::run(
                path.0,
                path.1,
                &mut scratch,
                &st,
                &mv,
                &mut out,
                accumulate,
                cols,
            );
            psum
        }

        /// [`super::matmul_narrow`] on `isa` over every moving column: the output when it
        /// computed it, `None` when it declined (having written nothing: checked).
        pub(crate) fn run_narrow(&self, isa: Isa, accumulate: bool) -> Option<Vec<f32>> {
            let (st, mv) = self.operands();
            let mut psum = self.psum.clone();
            let mut out = Output {
                data: &mut psum,
                offset: PSUM_OFFSET,
                row_stride: PSUM_STRIDE,
            };
            if super::matmul_narrow(isa, &st, &mv, &mut out, accumulate) {
                return Some(psum);
            }
            assert_same_bits(&psum, &self.psum, "the output of a declined narrow matmul");
            None
        }
    }

    /// The narrow kernel (`narrow.rs`) gives the portable path's bits for every moving width
    /// up to [`NARROW_COLUMNS`], on row counts around its blocks of 16 rows, whenever it takes
    /// the operands; it takes every ordinary, zero and special (inf, NaN) case, and leaves the
    /// output untouched where it declines (subnormal-heavy and boundary data, f16, and paths
    /// without AVX-512).
    #[test]
    fn narrow_moving_operands_give_the_same_bits() {
        const NARROW_DTYPES: [(DType, DType); 5] = [
            (DType::Bf16, DType::Bf16),
            (DType::F32, DType::F32),
            (DType::Bf16, DType::F32),
            (DType::F32, DType::Bf16),
            (DType::F16, DType::F16),
        ];
        let mut seed = 1000;
        let (mut taken, mut expected) = (0, 0);
        for (k, m) in [(1, 1), (7, 15), (64, 17), (33, 100), (128, 128), (128, 113)] {
            for n in [1, 2, 3, 5, 6, 7, 8] {
                for dt in NARROW_DTYPES {
                    let kinds: &[Kind] = &[
                        Kind::Normal,
                        Kind::Zeros,
                        Kind::Special,
                        Kind::Tiny,
                        Kind::Boundary,
                    ];
                    for &kind in kinds {
                        seed += 1;
                        let case = Case::new(seed, dt, k, m, n, kind);
                        for accumulate in [false, true] {
                            let want = case.run(PORTABLE, accumulate, 0..n);
                            for isa in Isa::ALL {
                                let what = format!(
                                    "narrow {isa:?} {dt:?} K{k} M{m} N{n} {kind:?} acc {accumulate}"
                                );
                                let ordinary =
                                    matches!(kind, Kind::Normal | Kind::Zeros | Kind::Special);
                                let avx512 = matches!(isa, Isa::Avx512 | Isa::Avx512Bf16)
                                    && isa.is_supported();
                                let must_take = avx512 && ordinary && dt.0 != DType::F16;
                                expected += usize::from(must_take);
                                match case.run_narrow(isa, accumulate) {
                                    Some(got) => {
                                        assert!(avx512 && dt.0 != DType::F16, "{what} taken");
                                        assert_same_bits(&got, &want, &what);
                                        taken += usize::from(must_take);
                                    }
                                    None => assert!(!must_take, "{what} declined"),
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(taken, expected);
        // One subnormal stationary element among ordinary ones: the definition flushes it to
        // zero (DAZ), which the kernel does not, so it declines.
        for dt in [(DType::Bf16, DType::Bf16), (DType::F32, DType::F32)] {
            let mut case = Case::new(7, dt, 16, 20, 3, Kind::Normal);
            let size = elem_size(dt.0);
            let at = case.st.1 + 5 * case.st.2 + 3 * size;
            let subnormal: &[u8] = if dt.0 == DType::Bf16 {
                &[0x03, 0x00]
            } else {
                &[0x00, 0x03, 0x00, 0x00]
            };
            case.st.0[at..at + size].copy_from_slice(subnormal);
            for isa in Isa::ALL {
                for accumulate in [false, true] {
                    assert!(
                        case.run_narrow(isa, accumulate).is_none(),
                        "{isa:?} {dt:?} took a subnormal stationary element"
                    );
                }
            }
        }
    }

    /// A chain of narrow matmuls into one output in one pass ([`super::narrow_chain_compute`],
    /// then [`super::narrow_chain_store`]; the rows in two parts as two threads would compute
    /// them): the portable matmuls one after the other (the first with the chain's
    /// `accumulate`, the others accumulating), bit for bit, whenever the kernel takes them; it
    /// takes ordinary data, and nothing is written when it declines.
    #[test]
    fn narrow_chains_are_the_matmuls_one_after_the_other() {
        let mut seed = 9000;
        for m in [1, 20, 128] {
            for n in [1, 5, 8] {
                for links in [1, 2, 5] {
                    for kind in [Kind::Normal, Kind::Special, Kind::Tiny, Kind::Boundary] {
                        // One case per link, `K` differing from link to link; the first's PSUM.
                        let dt = [DType::Bf16, DType::F32][seed as usize % 2];
                        let cases: Vec<Case> = (0..links)
                            .map(|l| {
                                seed += 1;
                                let k = [128, 7, 64, 1, 33][l];
                                Case::new(seed, (dt, dt), k, m, n, kind)
                            })
                            .collect();
                        let pairs: Vec<(Operand<'_>, Operand<'_>)> =
                            cases.iter().map(Case::operands).collect();
                        // Rows [0, h) and [h, m), each part its operands' columns.
                        let h = (m / 2).next_multiple_of(16).min(m);
                        let part = |from: usize, to: usize| -> Vec<(Operand<'_>, Operand<'_>)> {
                            pairs
                                .iter()
                                .map(|(st, mv)| {
                                    let size = elem_size(st.dtype);
                                    let st = Operand {
                                        offset: st.offset + from * size,
                                        cols: to - from,
                                        ..*st
                                    };
                                    (st, *mv)
                                })
                                .collect()
                        };
                        let parts = [(0, h), (h, m)];
                        // The PSUM rows from row `from` on.
                        let rows_from = |from: usize| Rows {
                            offset: PSUM_OFFSET + from * PSUM_STRIDE,
                            row_stride: PSUM_STRIDE,
                        };
                        for accumulate in [false, true] {
                            let mut want = cases[0].psum.clone();
                            for (l, (st, mv)) in pairs.iter().enumerate() {
                                let mut out = Output {
                                    data: &mut want,
                                    offset: PSUM_OFFSET,
                                    row_stride: PSUM_STRIDE,
                                };
                                let mut scratch = MatmulScratch::new();
                                let acc = accumulate || l > 0;
                                super::run(
                                    Isa::Portable,
                                    false,
                                    &mut scratch,
                                    st,
                                    mv,
                                    &mut out,
                                    acc,
                                    0..n,
                                );
                            }
                            for isa in Isa::ALL {
                                let what = format!(
                                    "chain {isa:?} M{m} N{n} links {links} {kind:?} acc {accumulate}"
                                );
                                let mut got = cases[0].psum.clone();
                                let mut taken = true;
                                let mut results = [[0f32; NARROW_CHAIN_RESULTS]; 2];
                                for (&(from, to), res) in parts.iter().zip(&mut results) {
                                    let rows = rows_from(from);
                                    let mut widened = vec![0f32; narrow_chain_scratch(links)];
                                    taken &= from == to
                                        || super::narrow_chain_compute(
                                            isa,
                                            &part(from, to),
                                            (&got, rows),
                                            accumulate,
                                            &mut widened,
                                            res,
                                        );
                                }
                                if taken {
                                    for (&(from, to), res) in parts.iter().zip(&results) {
                                        if from < to {
                                            super::narrow_chain_store(
                                                isa,
                                                (to - from, n),
                                                (&mut got, rows_from(from)),
                                                res,
                                            );
                                        }
                                    }
                                }
                                let avx512 = matches!(isa, Isa::Avx512 | Isa::Avx512Bf16)
                                    && isa.is_supported();
                                let ordinary = matches!(kind, Kind::Normal | Kind::Special);
                                assert!(!taken || avx512, "{what} taken");
                                assert!(taken || !(avx512 && ordinary), "{what} declined");
                                let expected = if taken { &want } else { &cases[0].psum };
                                assert_same_bits(&got, expected, &what);
                            }
                        }
                    }
                }
            }
        }
    }

    /// A group of narrow matmuls in one pass ([`super::matmul_narrow_group`]), its stationary
    /// columns adjacent or in runs of 16 with gaps between: each column's results at its place
    /// in the table (columns without one untouched) are those of the portable matmul of all the
    /// columns, bit for bit, whenever the kernel takes them; it takes ordinary data, and
    /// declines (writing nothing) otherwise.
    #[test]
    fn narrow_groups_place_the_portable_bits() {
        let mut seed = 5000;
        for (k, cols) in [(1, 3), (7, 100), (128, 128)] {
            for n in [1, 5, 8] {
                for dt in [(DType::Bf16, DType::Bf16), (DType::F32, DType::Bf16)] {
                    for kind in [Kind::Normal, Kind::Special, Kind::Tiny, Kind::Boundary] {
                        seed += 1;
                        let case = Case::new(seed, dt, k, cols, n, kind);
                        let (st, mv) = case.operands();
                        // Column `i` at a scattered place, `n + 1` apart; every 7th without one.
                        let places: Vec<i32> = (0..cols)
                            .map(|i| {
                                let slot = (i * 37) % cols;
                                if i % 7 == 3 {
                                    -1
                                } else {
                                    (3 + slot * (n + 1)) as i32
                                }
                            })
                            .collect();
                        let len = 3 + cols * (n + 1) + 4;
                        let init: Vec<f32> = case.psum[..len].to_vec();
                        for accumulate in [false, true] {
                            // The portable matmul of every column, its rows' initial values
                            // taken from their places.
                            let mut rows = vec![0f32; cols * n];
                            for (i, &p) in places.iter().enumerate() {
                                if p >= 0 {
                                    let p = p as usize;
                                    rows[i * n..][..n].copy_from_slice(&init[p..p + n]);
                                }
                            }
                            let mut out = Output {
                                data: &mut rows,
                                offset: 0,
                                row_stride: n,
                            };
                            let mut scratch = MatmulScratch::new();
                            super::run(
                                Isa::Portable,
                                false,
                                &mut scratch,
                                &st,
                                &mv,
                                &mut out,
                                accumulate,
                                0..n,
                            );
                            let mut want = init.clone();
                            for (i, &p) in places.iter().enumerate() {
                                if p >= 0 {
                                    let p = p as usize;
                                    want[p..p + n].copy_from_slice(&rows[i * n..][..n]);
                                }
                            }
                            // The same columns in runs of 16, 40 elements apart, the gaps
                            // filled with other values (which no result may read).
                            let size = elem_size(dt.0);
                            let (run, apart) = (16, 40);
                            let element = |q: usize| (q / run) * apart + q % run;
                            let span = element(cols - 1) + 1;
                            let row = span * size + 6;
                            let mut spread = vec![0xeeu8; 3 + k * row];
                            for kk in 0..k {
                                for q in 0..cols {
                                    let from = case.st.1 + kk * case.st.2 + q * size;
                                    let to = 3 + kk * row + element(q) * size;
                                    spread[to..to + size]
                                        .copy_from_slice(&case.st.0[from..from + size]);
                                }
                            }
                            let in_runs = Operand {
                                data: &spread,
                                offset: 3,
                                row_stride: row,
                                ..st
                            };
                            for (isa, (st, runs)) in Isa::ALL.into_iter().flat_map(|i| {
                                [(i, (&st, (cols, 0))), (i, (&in_runs, (run, apart)))]
                            }) {
                                let what = format!(
                                    "group {isa:?} {dt:?} K{k} W{cols} N{n} {kind:?} acc {accumulate} runs {runs:?}"
                                );
                                let mut got = init.clone();
                                let mut results = vec![0f32; narrow_group_scratch(cols, n)];
                                let taken = super::matmul_narrow_group(
                                    isa,
                                    (st, runs),
                                    &mv,
                                    (&mut got, &places),
                                    accumulate,
                                    &mut results,
                                );
                                let avx512 = matches!(isa, Isa::Avx512 | Isa::Avx512Bf16)
                                    && isa.is_supported();
                                let ordinary = matches!(kind, Kind::Normal | Kind::Special);
                                assert_eq!(taken, taken && avx512, "{what} taken");
                                assert!(taken || !(avx512 && ordinary), "{what} declined");
                                let expected = if taken { &want } else { &init };
                                assert_same_bits(&got, expected, &what);
                            }
                        }
                    }
                }
            }
        }
    }

    pub(crate) fn assert_same_bits(got: &[f32], want: &[f32], what: &str) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{what}: element {i} (row {}, col {}): got {g:e} want {w:e}",
                i.saturating_sub(PSUM_OFFSET) / PSUM_STRIDE,
                i.saturating_sub(PSUM_OFFSET) % PSUM_STRIDE,
            );
        }
    }

    const DTYPES: [(DType, DType); 6] = [
        (DType::Bf16, DType::Bf16),
        (DType::F16, DType::F16),
        (DType::F32, DType::F32),
        (DType::Bf16, DType::F16),
        (DType::F32, DType::Bf16),
        (DType::F16, DType::F32),
    ];

    /// Every path equals the portable one bit for bit; sizes, column ranges, accumulation.
    /// Two halves of the output's rows computed from one packing of the moving operand, made
    /// in two halves of its panels (as two host threads do), give [`matmul`]'s bits, on every
    /// path that shares packings (both AVX-512 kernels) and for every dtype pair.
    #[test]
    fn shared_moving_packing_gives_the_same_bits() {
        let mut seed = 500;
        for dt in DTYPES {
            for k in [1, 2, 7, 128] {
                for m in [9, 16, 128] {
                    for n in [1, 23, 24, 47, 48, 100, 512] {
                        for kind in [Kind::Normal, Kind::Special, Kind::Tiny] {
                            seed += 1;
                            let case = Case::new(seed, dt, k, m, n, kind);
                            let (st, mv) = case.operands();
                            let packings: Vec<_> = Isa::supported()
                                .into_iter()
                                .filter_map(|isa| Some((isa, shared_packing(isa, &st, &mv)?)))
                                .collect();
                            if packings.is_empty() {
                                continue;
                            }
                            for accumulate in [false, true] {
                                // The definition once, every kernel with a shared packing against it.
                                let want = case.run(PORTABLE, accumulate, 0..n);
                                for &(isa, packing) in &packings {
                                    let (got, _) =
                                        shared_run(&case, isa, packing, accumulate, None);
                                    let what = format!(
                                        "{isa:?} {dt:?} K{k} M{m} N{n} {kind:?} acc {accumulate}"
                                    );
                                    assert_same_bits(&got, &want, &what);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Rows of the output computed from columns of one packing of the stationary operand
    /// ([`PackedStationary::columns`], split at every multiple of 8, odd block counts
    /// included) give [`matmul`]'s bits, on both AVX-512 kernels and for every dtype pair.
    #[test]
    fn columns_of_one_stationary_packing_give_the_same_bits() {
        let mut seed = 700;
        for isa in Isa::supported() {
            for dt in DTYPES {
                for (k, m, n) in [(1, 9, 47), (7, 72, 100), (128, 128, 512), (128, 17, 48)] {
                    for kind in [Kind::Normal, Kind::Tiny] {
                        seed += 1;
                        let case = Case::new(seed, dt, k, m, n, kind);
                        let (st, mv) = case.operands();
                        let Some(packing) = shared_packing(isa, &st, &mv) else {
                            continue;
                        };
                        let mut scratch = MatmulScratch::new();
                        let (a, mut b) = scratch.parts();
                        let (_, words) = b.split(packing, k, 0);
                        let key = pack_moving(isa, packing, words, &mv, 0..n);
                        let packed = b.packed(packing, mv.shape(), key);
                        let whole = pack_stationary(isa, packing, a, &st);
                        for accumulate in [false, true] {
                            let want = case.run(PORTABLE, accumulate, 0..n);
                            for h in (8..m).step_by(8) {
                                let mut psum = case.psum.clone();
                                let (lo, hi) = psum.split_at_mut(PSUM_OFFSET + h * PSUM_STRIDE);
                                let mut out_lo = Output {
                                    data: lo,
                                    offset: PSUM_OFFSET,
                                    row_stride: PSUM_STRIDE,
                                };
                                let mut out_hi = Output {
                                    data: hi,
                                    offset: 0,
                                    row_stride: PSUM_STRIDE,
                                };
                                let (a_lo, a_hi) = (whole.columns(0..h), whole.columns(h..m));
                                matmul_prepacked(
                                    isa,
                                    &a_lo,
                                    &packed,
                                    &mut out_lo,
                                    None,
                                    accumulate,
                                );
                                matmul_prepacked(
                                    isa,
                                    &a_hi,
                                    &packed,
                                    &mut out_hi,
                                    None,
                                    accumulate,
                                );
                                let what = format!(
                                    "{isa:?} {dt:?} K{k} M{m} N{n} {kind:?} acc {accumulate} h {h}"
                                );
                                assert_same_bits(&psum, &want, &what);
                            }
                        }
                    }
                }
            }
        }
    }

    /// `case` computed as two threads share the packing of its moving operand: the packing's
    /// second half first, then the output rows' halves, each with its own stationary packing
    /// (and, with `copy` of that dtype, the results converted into a copy as they are computed:
    /// returned after the output).
    fn shared_run(
        case: &Case,
        isa: Isa,
        packing: MovingPacking,
        accumulate: bool,
        copy: Option<DType>,
    ) -> (Vec<f32>, Vec<u8>) {
        let (st, mv) = case.operands();
        let (k, m, n) = (case.k, case.m, case.n);
        let mut psum = case.psum.clone();
        let h = (m / 2).div_ceil(8) * 8;
        let (lo, hi) = psum.split_at_mut(PSUM_OFFSET + h * PSUM_STRIDE);
        let size = st.dtype.size() as usize;
        let st_lo = Operand { cols: h, ..st };
        let st_hi = Operand {
            offset: st.offset + h * size,
            cols: m - h,
            ..st
        };
        let mut scratch = MatmulScratch::new();
        let mut other = MatmulScratch::new();
        let half = moving_split(packing, n);
        let (a, mut b) = scratch.parts();
        let key = {
            let (before, from) = b.split(packing, k, half);
            let k_hi = pack_moving(isa, packing, from, &mv, half..n);
            pack_moving(isa, packing, before, &mv, 0..half).and(k_hi)
        };
        let packed = b.packed(packing, mv.shape(), key);
        let a_lo = pack_stationary(isa, packing, a, &st_lo);
        let a_hi = pack_stationary(isa, packing, other.stationary(), &st_hi);
        let mut copied = vec![0xa5u8; COPY_OFFSET + m.max(1) * COPY_STRIDE];
        let (c_lo, c_hi) = copied.split_at_mut(COPY_OFFSET + h.min(m) * COPY_STRIDE);
        let copy_of = |data, offset| {
            copy.map(|dtype| CopyOut {
                data,
                dtype,
                offset,
                row_stride: COPY_STRIDE,
            })
        };
        let (mut copy_lo, mut copy_hi) = (copy_of(c_lo, COPY_OFFSET), copy_of(c_hi, 0));
        let mut out_lo = Output {
            data: lo,
            offset: PSUM_OFFSET,
            row_stride: PSUM_STRIDE,
        };
        matmul_prepacked(
            isa,
            &a_lo,
            &packed,
            &mut out_lo,
            copy_lo.as_mut(),
            accumulate,
        );
        let mut out_hi = Output {
            data: hi,
            offset: 0,
            row_stride: PSUM_STRIDE,
        };
        matmul_prepacked(
            isa,
            &a_hi,
            &packed,
            &mut out_hi,
            copy_hi.as_mut(),
            accumulate,
        );
        (psum, copied)
    }

    /// Byte offset of a test copy's first row (odd, as SBUF tiles may start anywhere).
    const COPY_OFFSET: usize = 7;
    /// Bytes between a test copy's rows (more than a row of 512 f32s).
    const COPY_STRIDE: usize = 2060;

    /// A matmul's results converted into a copy as they are computed are [`convert`]'s
    /// conversion of the stored results, on both AVX-512 kernels, for both copy dtypes, with
    /// and without accumulation, on data with NaNs, infinities and tiny values; bytes outside
    /// the copy keep their values.
    #[test]
    fn copies_are_the_conversions_of_the_results() {
        let mut seed = 900;
        for isa in Isa::supported() {
            for dt in [(DType::Bf16, DType::Bf16), (DType::F32, DType::Bf16)] {
                for (k, m, n) in [(128, 128, 512), (7, 13, 100), (128, 9, 47), (2, 128, 1)] {
                    for kind in [Kind::Normal, Kind::Special, Kind::Tiny] {
                        seed += 1;
                        let case = Case::new(seed, dt, k, m, n, kind);
                        let (st, mv) = case.operands();
                        let Some(packing) = shared_packing(isa, &st, &mv) else {
                            continue;
                        };
                        for accumulate in [false, true] {
                            for dtype in [DType::Bf16, DType::F32] {
                                let what = format!(
                                    "{isa:?} {dt:?} K{k} M{m} N{n} {kind:?} acc {accumulate} \
                                     copy {dtype:?}"
                                );
                                let want = case.run(PORTABLE, accumulate, 0..n);
                                let run = shared_run(&case, isa, packing, accumulate, Some(dtype));
                                let (got, copied) = run;
                                assert_same_bits(&got, &want, &what);
                                let expected = expected_copy(&want, m, n, dtype, copied.len());
                                assert!(copied == expected, "{what}: the copy differs");
                            }
                        }
                    }
                }
            }
        }
    }

    /// The bytes the fused copy writes for PSUM results `want` (`m` rows of `n`): each row
    /// converted to `dtype` by the portable [`convert`] at its place in a buffer of `len` bytes
    /// that otherwise holds `0xa5`.
    fn expected_copy(want: &[f32], m: usize, n: usize, dtype: DType, len: usize) -> Vec<u8> {
        let size = elem_size(dtype);
        let mut expected = vec![0xa5u8; len];
        for r in 0..m {
            let from = PSUM_OFFSET + r * PSUM_STRIDE;
            let row: &[u8] = bytemuck::cast_slice(&want[from..from + n]);
            let at = COPY_OFFSET + r * COPY_STRIDE;
            let to = &mut expected[at..at + n * size];
            convert(Isa::Portable, row, DType::F32, to, dtype, n);
        }
        expected
    }

    /// Chains of matmuls of every packed layout ([`matmul_chain_prepacked`]: the `vdpbf16ps`
    /// kernel keeps its accumulators in registers from one matmul to the next) give the bits
    /// of the matmuls one after the other on the portable path, and their copy the conversions
    /// of the last one's results: tiny data whose intermediate sums are subnormal, NaNs and
    /// infinities, results on ±2^-126, on shapes that are not multiples of the blocks.
    #[test]
    fn chains_give_the_bits_of_the_matmuls_one_after_the_other() {
        let mut seed = 4100;
        for isa in Isa::supported() {
            for dt in [(DType::Bf16, DType::Bf16), (DType::F32, DType::Bf16)] {
                for (k, m, n, links) in [
                    (2_usize, 1, 1, 2),
                    (5, 9, 40, 3),
                    (128, 16, 96, PACKED_CHAIN),
                    (127, 24, 49, 4),
                    (64, 17, 100, 2),
                ] {
                    for kind in [Kind::Normal, Kind::Tiny, Kind::Special, Kind::Boundary] {
                        seed += 1;
                        // Every other link with half the contraction (a chain's last
                        // matmul over fewer partitions).
                        let cases: Vec<Case> = (0..links)
                            .map(|i| {
                                let k = if i % 2 == 1 { k.div_ceil(2) } else { k };
                                Case::new(seed * 100 + i as u64, dt, k, m, n, kind)
                            })
                            .collect();
                        let ops: Vec<_> = cases.iter().map(Case::operands).collect();
                        let Some(packing) = shared_packing(isa, &ops[0].0, &ops[0].1) else {
                            continue;
                        };
                        let packed: Vec<_> = ops
                            .iter()
                            .map(|(st, mv)| {
                                let s = OwnedPacking::stationary_buffer();
                                let b = OwnedPacking::moving_buffer();
                                (
                                    OwnedPacking::stationary(s, isa, packing, st),
                                    OwnedPacking::moving(b, isa, packing, mv),
                                )
                            })
                            .collect();
                        let chain: Vec<_> = packed
                            .iter()
                            .filter_map(|(s, m)| s.as_stationary().zip(m.as_moving()))
                            .collect();
                        for accumulate in [false, true] {
                            let mut want = cases[0].psum.clone();
                            for (i, (st, mv)) in ops.iter().enumerate() {
                                let mut out = Output {
                                    data: &mut want,
                                    offset: PSUM_OFFSET,
                                    row_stride: PSUM_STRIDE,
                                };
                                let mut scratch = MatmulScratch::new();
                                let acc = accumulate || i > 0;
                                super::run(
                                    PORTABLE.0,
                                    PORTABLE.1,
                                    &mut scratch,
                                    st,
                                    mv,
                                    &mut out,
                                    acc,
                                    0..n,
                                );
                            }
                            for copy in [None, Some(DType::Bf16)] {
                                let what = format!(
                                    "{isa:?} {packing:?} {dt:?} K{k} M{m} N{n} {links} links \
                                     {kind:?} acc {accumulate} copy {copy:?}"
                                );
                                let mut psum = cases[0].psum.clone();
                                let mut out = Output {
                                    data: &mut psum,
                                    offset: PSUM_OFFSET,
                                    row_stride: PSUM_STRIDE,
                                };
                                let mut copied = vec![0xa5u8; COPY_OFFSET + m * COPY_STRIDE];
                                let mut c = copy.map(|dtype| CopyOut {
                                    data: &mut copied,
                                    dtype,
                                    offset: COPY_OFFSET,
                                    row_stride: COPY_STRIDE,
                                });
                                matmul_chain_prepacked(
                                    isa,
                                    &chain,
                                    &mut out,
                                    c.as_mut(),
                                    accumulate,
                                );
                                assert_same_bits(&psum, &want, &what);
                                let Some(dtype) = copy else { continue };
                                let expected = expected_copy(&want, m, n, dtype, copied.len());
                                assert!(copied == expected, "{what}: the copy differs");
                            }
                        }
                    }
                }
            }
        }
    }

    /// Every packed layout (AVX2's 4 × 24 blocks, AVX-512's 8 × 48) on shapes that are not
    /// multiples of its blocks, one row, one column, one contraction row: one thread's packing
    /// and [`matmul_prepacked`] with and without a copy give [`matmul`]'s portable bits (and
    /// the copy [`convert`]'s of them).
    #[test]
    fn packed_layouts_on_edge_shapes_give_the_same_bits() {
        let mut seed = 1100;
        for isa in Isa::supported() {
            for dt in DTYPES {
                for (k, m, n) in [
                    (1, 1, 1),
                    (1, 1, 24),
                    (3, 4, 23),
                    (5, 5, 25),
                    (2, 12, 49),
                    (128, 1, 512),
                    (127, 127, 511),
                    (128, 128, 1),
                    (9, 3, 8),
                    (7, 9, 40),
                    (16, 8, 47),
                    (64, 17, 100),
                ] {
                    for kind in [Kind::Normal, Kind::Tiny, Kind::Special] {
                        seed += 1;
                        let case = Case::new(seed, dt, k, m, n, kind);
                        let (st, mv) = case.operands();
                        let Some(packing) = shared_packing(isa, &st, &mv) else {
                            continue;
                        };
                        let mut scratch = MatmulScratch::new();
                        let (a, mut b) = scratch.parts();
                        let (_, words) = b.split(packing, k, 0);
                        let key = pack_moving(isa, packing, words, &mv, 0..n);
                        let packed = b.packed(packing, mv.shape(), key);
                        let a = pack_stationary(isa, packing, a, &st);
                        for accumulate in [false, true] {
                            let want = case.run(PORTABLE, accumulate, 0..n);
                            for copy in [None, Some(DType::Bf16), Some(DType::F32)] {
                                let what = format!(
                                    "{isa:?} {dt:?} K{k} M{m} N{n} {kind:?} acc {accumulate} \
                                     copy {copy:?}"
                                );
                                let mut psum = case.psum.clone();
                                let mut out = Output {
                                    data: &mut psum,
                                    offset: PSUM_OFFSET,
                                    row_stride: PSUM_STRIDE,
                                };
                                let mut copied = vec![0xa5u8; COPY_OFFSET + m * COPY_STRIDE];
                                let mut c = copy.map(|dtype| CopyOut {
                                    data: &mut copied,
                                    dtype,
                                    offset: COPY_OFFSET,
                                    row_stride: COPY_STRIDE,
                                });
                                matmul_prepacked(
                                    isa,
                                    &a,
                                    &packed,
                                    &mut out,
                                    c.as_mut(),
                                    accumulate,
                                );
                                assert_same_bits(&psum, &want, &what);
                                let Some(dtype) = copy else { continue };
                                let expected = expected_copy(&want, m, n, dtype, copied.len());
                                assert!(copied == expected, "{what}: the copy differs");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn paths_agree_bit_for_bit() {
        let paths = paths();
        let mut seed = 1;
        for k in [1, 2, 7, 64, 127, 128] {
            for m in [1, 5, 128] {
                for n in [1, 17, 128, 512] {
                    let big = k * m * n > 1 << 16;
                    for (di, &dt) in DTYPES.iter().enumerate() {
                        // Keep the debug-build run time reasonable: big shapes with a subset.
                        if big && di % 3 != seed as usize % 3 {
                            continue;
                        }
                        let kinds: &[Kind] = if big {
                            &[Kind::Normal]
                        } else {
                            &[Kind::Normal, Kind::Tiny, Kind::Zeros, Kind::Special]
                        };
                        for &kind in kinds {
                            seed += 1;
                            let case = Case::new(seed, dt, k, m, n, kind);
                            let sub = n / 3..n - n / 4;
                            for (accumulate, cols) in
                                [(false, 0..n), (true, sub.clone()), (true, 0..n)]
                            {
                                let want = case.run(PORTABLE, accumulate, cols.clone());
                                for &path in &paths[1..] {
                                    let got = case.run(path, accumulate, cols.clone());
                                    let what = format!(
                                        "{path:?} {dt:?} K{k} M{m} N{n} {kind:?} acc {accumulate} cols {cols:?}"
                                    );
                                    assert_same_bits(&got, &want, &what);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Subnormal-heavy data on bigger shapes, where the `vdpbf16ps` hardware flush decisions
    /// must match the portable exact ones; and data whose results land on ±2^-126.
    #[test]
    fn tiny_data_paths_agree() {
        let paths = paths();
        for (seed, dt) in DTYPES.iter().enumerate() {
            for (kind, k) in [
                (Kind::Tiny, 128),
                (Kind::Boundary, 1),
                (Kind::Boundary, 2),
                (Kind::Boundary, 5),
            ] {
                let case = Case::new(100 + seed as u64, *dt, k, 24, 96, kind);
                for accumulate in [false, true] {
                    let want = case.run(PORTABLE, accumulate, 0..96);
                    for &path in &paths[1..] {
                        let got = case.run(path, accumulate, 0..96);
                        assert_same_bits(
                            &got,
                            &want,
                            &format!("{path:?} {dt:?} {kind:?} K{k} acc {accumulate}"),
                        );
                    }
                }
            }
        }
    }

    /// The portable path stays within a classic error bound of an f64 reference.
    #[test]
    fn portable_close_to_f64_reference() {
        for (seed, &dt) in DTYPES.iter().enumerate() {
            for (k, m, n) in [(1, 3, 5), (64, 16, 40), (128, 8, 64)] {
                let case = Case::new(500 + seed as u64, dt, k, m, n, Kind::Normal);
                for accumulate in [false, true] {
                    let got = case.run(PORTABLE, accumulate, 0..n);
                    for mi in 0..m {
                        for ni in 0..n {
                            let at = PSUM_OFFSET + mi * PSUM_STRIDE + ni;
                            let init = if accumulate {
                                case.psum[at] as f64
                            } else {
                                0.0
                            };
                            let (mut sum, mut mag) = (init, init.abs());
                            for ki in 0..k {
                                let p =
                                    case.st.3[ki * m + mi] as f64 * case.mv.3[ki * n + ni] as f64;
                                sum += p;
                                mag += p.abs();
                            }
                            let bound = (k + 1) as f64 * f32::EPSILON as f64 / 2.0 * mag;
                            let err = (got[at] as f64 - sum).abs();
                            assert!(
                                err <= bound,
                                "{dt:?} K{k} m{mi} n{ni}: {} vs {sum} (bound {bound})",
                                got[at]
                            );
                        }
                    }
                }
            }
        }
    }

    /// Runs a 1×1 matmul with bf16 operands given as f32 values (must be exact in bf16) on
    /// every path, checking they agree, and returns the result.
    fn dot_bf16(init: Option<f32>, pairs: &[(f32, f32)]) -> f32 {
        let k = pairs.len();
        let enc = |x: f32| {
            assert_eq!(x.to_bits() & 0xffff, 0, "{x:e} is not a bf16");
            ((x.to_bits() >> 16) as u16).to_le_bytes()
        };
        let st: Vec<u8> = pairs.iter().flat_map(|p| enc(p.0)).collect();
        let mv: Vec<u8> = pairs.iter().flat_map(|p| enc(p.1)).collect();
        let op = |data| Operand {
            data,
            dtype: DType::Bf16,
            offset: 0,
            row_stride: 2,
            rows: k,
            cols: 1,
        };
        let mut results = Vec::new();
        for path in paths() {
            let mut psum = [init.unwrap_or(1.0)];
            let mut out = Output {
                data: &mut psum,
                offset: 0,
                row_stride: 1,
            };
            let (st, mv) = (op(&st), op(&mv));
            let mut scratch = MatmulScratch::new();
            super::run(
                path.0,
                path.1,
                &mut scratch,
                &st,
                &mv,
                &mut out,
                init.is_some(),
                0..1,
            );
            results.push((path, psum[0]));
        }
        for &(path, r) in &results {
            assert_eq!(
                r.to_bits(),
                results[0].1.to_bits(),
                "{path:?} disagrees: {results:?}"
            );
        }
        results[0].1
    }

    fn p2(e: i32) -> f32 {
        2f32.powi(e / 2) * 2f32.powi(e - e / 2)
    }

    /// The definition's corner cases (the same as the `vdpbf16ps` probes in the module docs).
    #[test]
    fn definition_corner_cases() {
        let min = f32::MIN_POSITIVE;
        let bits = |x: f32| x.to_bits();
        // -0.0 identity and signed zeros.
        assert_eq!(bits(dot_bf16(None, &[(0.0, -0.0)])), bits(-0.0));
        assert_eq!(bits(dot_bf16(None, &[(0.0, 0.0), (0.0, -0.0)])), bits(0.0));
        assert_eq!(bits(dot_bf16(Some(-0.0), &[(0.0, -0.0); 3])), bits(-0.0));
        // DAZ of the accumulator and of operands.
        assert_eq!(dot_bf16(Some(p2(-130)), &[(p2(-63), p2(-63))]), min);
        assert_eq!(
            dot_bf16(Some(min), &[(f32::from_bits(0x0002_0000), p2(100))]),
            min
        );
        // Products are fused: no underflow, no overflow of their own.
        assert_eq!(
            dot_bf16(Some(p2(-120)), &[(p2(-70), p2(-70))]),
            p2(-120) * (1.0 + p2(-20))
        );
        assert_eq!(dot_bf16(Some(-f32::MAX), &[(p2(64), p2(64))]), p2(104));
        // A subnormal intermediate is flushed before the next product is added.
        assert_eq!(
            dot_bf16(None, &[(p2(-65), p2(-65)), (p2(-63), p2(-63))]),
            min
        );
        // Tininess after rounding with unbounded exponent.
        assert_eq!(bits(dot_bf16(Some(min), &[(-1.5 * p2(-75), p2(-76))])), 0);
        assert_eq!(dot_bf16(Some(min), &[(-p2(-76), p2(-76))]), min);
        assert_eq!(dot_bf16(Some(min), &[(-p2(-75), p2(-76))]), min); // the tie
        assert_eq!(
            bits(dot_bf16(Some(-min), &[(1.5 * p2(-75), p2(-76))])),
            bits(-0.0)
        );
        assert_eq!(dot_bf16(Some(-min), &[(p2(-76), p2(-76))]), -min);
        // Flushed results keep their sign.
        assert_eq!(
            bits(dot_bf16(Some(-p2(-125)), &[(1.5 * p2(-63), p2(-63))])),
            bits(-0.0)
        );
        // NaN is canonical.
        let nan = CANONICAL_NAN;
        assert_eq!(bits(dot_bf16(None, &[(f32::INFINITY, 0.0)])), nan);
        assert_eq!(
            bits(dot_bf16(None, &[(f32::from_bits(0xff81_0000), 1.0)])),
            nan
        );
        assert_eq!(
            bits(dot_bf16(Some(f32::from_bits(0x7f80_0001)), &[(1.0, 1.0)])),
            nan
        );
        assert_eq!(
            bits(dot_bf16(
                None,
                &[(f32::INFINITY, 1.0), (f32::NEG_INFINITY, 1.0)]
            )),
            nan
        );
        // K = 0 stores the initial accumulator.
        assert_eq!(bits(dot_bf16(None, &[])), bits(-0.0));
        assert_eq!(bits(dot_bf16(Some(p2(-130)), &[])), 0);
        assert_eq!(dot_bf16(Some(3.0), &[]), 3.0);
    }

    /// The f32 paths follow the same definition for f32 operands (where `a·b` is not exact).
    #[test]
    fn f32_operands_are_fused() {
        // (1 + 2^-12)² = 1 + 2^-11 + 2^-24: fused, -1 - 2^-11 leaves exactly 2^-24.
        let a = 1.0 + p2(-12);
        let st: Vec<u8> = a.to_le_bytes().to_vec();
        let op = |data| Operand {
            data,
            dtype: DType::F32,
            offset: 0,
            row_stride: 4,
            rows: 1,
            cols: 1,
        };
        for isa in Isa::supported() {
            let mut psum = [-1.0 - p2(-11)];
            let mut out = Output {
                data: &mut psum,
                offset: 0,
                row_stride: 1,
            };
            matmul(
                isa,
                &mut MatmulScratch::new(),
                &op(&st),
                &op(&st),
                &mut out,
                true,
                0..1,
            );
            assert_eq!(psum[0], p2(-24), "{isa:?}");
        }
    }

    #[test]
    fn empty_ranges_touch_nothing() {
        let case = Case::new(9, (DType::Bf16, DType::Bf16), 4, 3, 20, Kind::Normal);
        for path in paths() {
            assert_same_bits(&case.run(path, false, 7..7), &case.psum, "empty");
        }
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn rejects_short_operand() {
        let data = [0u8; 10];
        let op = Operand {
            data: &data,
            dtype: DType::Bf16,
            offset: 0,
            row_stride: 4,
            rows: 3,
            cols: 2,
        };
        let mut psum = [0.0f32; 16];
        let mut out = Output {
            data: &mut psum,
            offset: 0,
            row_stride: 4,
        };
        matmul(
            Isa::detect(),
            &mut MatmulScratch::new(),
            &op,
            &op,
            &mut out,
            false,
            0..2,
        );
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn rejects_short_output() {
        let data = [0u8; 64];
        let op = Operand {
            data: &data,
            dtype: DType::Bf16,
            offset: 0,
            row_stride: 8,
            rows: 2,
            cols: 4,
        };
        let mut psum = [0.0f32; 14];
        let mut out = Output {
            data: &mut psum,
            offset: 0,
            row_stride: 4,
        };
        matmul(
            Isa::detect(),
            &mut MatmulScratch::new(),
            &op,
            &op,
            &mut out,
            false,
            0..4,
        );
    }
}
