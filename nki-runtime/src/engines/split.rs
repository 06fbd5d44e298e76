//! The one policy for splitting an instruction's rows between the calling thread and the core's
//! worker.
//!
//! An instruction is split only when it is large enough ([`large_enough`]: at least two rows
//! and `MIN_SPLIT_ELEMS` elements, below which the hand-over costs about as much as the work)
//! and no thread can read what the other writes. Streamed instructions and reductions describe
//! their operands in a [`RowSplit`] and run through [`for_rows`]: split when every destination
//! maps row `r` to the same partition and every source in the written memory reads the same
//! rows or rows outside the written ones, each thread then with its own lanes and its own
//! writable partitions ([`super::mems`]). Strided transfers ([`super::access::transfer_par`])
//! split when [`transfer_splits`]: the destination's halves are disjoint byte ranges. Both
//! split by blocks of [`BLOCK`] partitions taken in turn when that is even enough
//! ([`BlockRuns`]; a transfer when one side is on chip), else by halves. Each thread computes
//! exactly what the serial loop computes for its rows.
//!
//! Matmuls (`super::tensor::matmul`) split their output rows, whose PSUM partitions the two
//! threads write apart, by [`split_rows`]: at least 16 rows and `MIN_MACS` multiply-adds (a
//! matmul's work per element is `K` multiply-adds, so its threshold counts those rather than
//! elements), at half the rows rounded up to the packed stationary block (8 rows, which every
//! kernel's row blocks tile). A matmul whose operands both come from input tensors splits
//! where a [`RowShare`] says instead: a share of the rows moved after each split toward even
//! finishing times of the two threads.

use core::ops::Range;
use std::time::Duration;

use nki_lang::DType;

use super::EngineState;
use super::lanes::{Lanes, Sink, Source};
use super::mems::{Mems, Region};
use crate::cpu::Isa;
use crate::cpu::matmul::STATIONARY_BLOCK;
use crate::memory::Psum;
use crate::operand::Loc;
use crate::worker::near_or_large;

/// Instructions with fewer elements stay on one thread: the hand-over to the worker costs about
/// as much as the work.
const MIN_SPLIT_ELEMS: usize = 1 << 14;

/// Whether an instruction of `rows` rows (a transfer's outermost dimension) and `elems`
/// elements is large enough to split its rows between two threads.
pub(super) fn large_enough(rows: usize, elems: usize) -> bool {
    rows >= 2 && elems >= MIN_SPLIT_ELEMS
}

/// Whether a transfer over `dims` (outermost first), whose destination has element strides
/// `dst`, may run in two halves of its outermost dimension: it is [`large_enough`], and its
/// destination rows are disjoint and ascending (a positive row stride, non-negative inner
/// strides, and each row's elements within one row stride).
pub(super) fn transfer_splits(dims: &[usize], dst: &[isize]) -> bool {
    let rank = dims.len();
    let elems: usize = dims.iter().product();
    let rows = dims.first().copied().unwrap_or(0);
    let d0 = dst.first().copied().unwrap_or(0);
    // Extent of one outer row on the destination side, in elements.
    let row_extent: isize = (1..rank)
        .map(|j| (dims[j] as isize - 1) * dst[j])
        .sum::<isize>()
        + 1;
    let disjoint = rank >= 2 && d0 > 0 && dst[1..rank].iter().all(|&s| s >= 0) && row_extent <= d0;
    disjoint && large_enough(rows, elems)
}

/// Matmuls with fewer multiply-adds stay on one thread (a few microseconds of work).
const MIN_MACS: usize = 1 << 19;

/// Where to split a `[K, M] x [K, N]` matmul's output rows between two threads, or `None` when
/// it is too small to pay for the hand-over (a few microseconds of work).
pub(crate) fn split_rows(k: usize, m: usize, n: usize) -> Option<usize> {
    if m < 2 * STATIONARY_BLOCK || k * m * n < MIN_MACS {
        return None;
    }
    // A multiple of the stationary block keeps the kernels' row blocks whole.
    Some((m / 2).div_ceil(STATIONARY_BLOCK) * STATIONARY_BLOCK).filter(|&h| h < m)
}

/// How a matmul whose operands both come from input tensors shares its output rows between the
/// calling thread and the worker: the fraction of rows the caller takes, moved after each such
/// split toward even finishing times (each half computes exactly its rows, so the results do
/// not depend on it). The two vCPUs of the project's virtual machines are not always equally
/// fast: when they sat far apart, the seed's half took the worker 28.3–28.6 µs against
/// 23.1–24.1 µs on the calling thread, and fixed halves waited for the worker.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct RowShare {
    caller: f32,
}

impl RowShare {
    /// Even halves to start with.
    pub(crate) fn new() -> RowShare {
        RowShare { caller: 0.5 }
    }

    /// The caller's rows of `m`: a multiple of 8 (the stationary block, which the kernels'
    /// row blocks tile), at least 8 and leaving the worker at least one; `None` below 16 rows.
    pub(crate) fn rows(&self, m: usize) -> Option<usize> {
        const B: usize = STATIONARY_BLOCK;
        if m < 2 * B {
            return None;
        }
        let h = (m as f32 * self.caller / B as f32).round() as usize * B;
        Some(h.clamp(B, (m - 1) / B * B))
    }

    /// Takes in that the caller computed `h` of `m` rows in `here` and the worker the rest in
    /// `there`: the share that would have made both take as long, averaged into the last ones
    /// and kept within a quarter and three quarters.
    pub(crate) fn observe(&mut self, h: usize, m: usize, here: Duration, there: Duration) {
        let rate = |rows: usize, t: Duration| rows as f32 / t.as_secs_f32().max(1e-9);
        let (mine, theirs) = (rate(h, here), rate(m.saturating_sub(h), there));
        if mine + theirs > 0.0 {
            let even = mine / (mine + theirs);
            self.caller = (0.75 * self.caller + 0.25 * even).clamp(0.25, 0.75);
        }
    }
}

/// The partition of element offset `elem` of a memory whose partitions hold `per` elements.
fn partition(elem: isize, per: isize) -> isize {
    elem.div_euclid(per)
}

/// What an instruction writes and reads, for deciding whether its rows can be split between
/// two threads.
pub(crate) struct RowSplit<'a> {
    /// Rows (partitions) of the grid.
    pub rows: usize,
    /// Elements of the grid.
    pub elems: usize,
    /// Every destination (all must map row `r` to the same partition of one memory).
    pub writes: &'a [Sink],
    /// Every source.
    pub reads: &'a [Source],
    /// The byte columns of SBUF's partitions (offsets from a partition's start) that the
    /// writes stay within, when the caller knows them (`Sbuf::columns`; empty when nothing is
    /// written in SBUF); `None` counts as a write of every SBUF byte.
    pub sbuf_columns: Option<Range<usize>>,
    /// The bytes of the HBM input its sources in HBM read (empty when none does), read-only
    /// on both threads.
    pub hbm: &'a [u8],
}

/// The written memory and the partition of row 0 when the rows may be split between two
/// threads, or `None` when the instruction must run on one: small, or some thread could read
/// what the other writes.
fn split_point(s: &RowSplit<'_>, sbuf_stride: usize) -> Option<(Loc, isize)> {
    if !large_enough(s.rows, s.elems) {
        return None;
    }
    independent_rows(s, sbuf_stride)
}

/// Whether no row of the instruction reads what another row writes: every destination maps row
/// `r` to the same partition of one memory, and every source in that memory reads the same rows
/// or rows outside the written ones. Then its rows may run in any order or interleaved.
pub(crate) fn rows_independent(s: &RowSplit<'_>, sbuf_stride: usize) -> bool {
    independent_rows(s, sbuf_stride).is_some()
}

/// [`rows_independent`]: the written memory and the partition of row 0 when it holds.
fn independent_rows(s: &RowSplit<'_>, sbuf_stride: usize) -> Option<(Loc, isize)> {
    let rows = s.rows;
    let per = |loc: Loc, dtype: DType| {
        let bytes = match loc {
            Loc::Psum => Psum::PARTITION_STRIDE,
            Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => sbuf_stride,
        };
        (bytes / dtype.size() as usize) as isize
    };
    let first = |loc, dtype, base| partition(base, per(loc, dtype));
    let (d, rest) = s.writes.split_first()?;
    if d.strides[0] != per(d.loc, d.dtype) {
        return None;
    }
    let dp = first(d.loc, d.dtype, d.base);
    for k in rest {
        if k.loc != d.loc
            || k.strides[0] != per(k.loc, k.dtype)
            || first(k.loc, k.dtype, k.base) != dp
        {
            return None;
        }
    }
    let written = dp..dp + rows as isize;
    for src in s.reads {
        if let Source::Mem {
            loc,
            dtype,
            base,
            strides,
        } = *src
            && loc == d.loc
        {
            let sp = first(loc, dtype, base);
            let same_rows = strides[0] == per(loc, dtype) && sp == dp;
            let reach = if strides[0] == 0 {
                sp..sp + 1
            } else {
                sp..sp + rows as isize
            };
            let disjoint = reach.end <= written.start || reach.start >= written.end;
            if !(same_rows || disjoint) {
                return None;
            }
        }
    }
    Some((d.loc, dp))
}

/// The memories one thread sees when it owns bytes `own_start..above_start` of the written
/// memory `loc`.
fn thread_mems<'m>(
    loc: Loc,
    below: &'m [u8],
    own: &'m mut [u8],
    own_start: usize,
    above: &'m [u8],
    above_start: usize,
    (other, hbm): (&'m [u8], &'m [u8]),
) -> Mems<'m> {
    let mine = Region::owning(below, own, own_start, above, above_start);
    let hbm = Region::shared(hbm);
    match loc {
        Loc::Psum => Mems {
            sbuf: Region::shared(other),
            psum: mine,
            hbm,
        },
        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => Mems {
            sbuf: mine,
            psum: Region::shared(other),
            hbm,
        },
    }
}

/// Partitions per block of the split that keeps each partition with one thread
/// ([`BlockRuns`]).
pub(crate) const BLOCK: usize = 32;

/// Most runs of rows an instruction's partitions form by blocks of [`BLOCK`].
pub(crate) const MAX_RUNS: usize = nki_lang::target::PARTITIONS as usize / BLOCK + 1;

/// The rows of an instruction cut where blocks of [`BLOCK`] partitions meet, the blocks taken
/// by the two threads in turn (even blocks by the calling thread, odd ones by the worker), so
/// that a partition is worked on by the same thread from one instruction to the next whatever
/// their row counts: RoPE's loads of all 128 partitions and its products on 64 leave each
/// thread the rows it loaded, where halves of each instruction gave a quarter of them to the
/// other thread (its core's cache then fetched them from the other's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BlockRuns {
    /// `(first row, end row, whether the worker takes them)`, in order.
    runs: [(usize, usize, bool); MAX_RUNS],
    len: usize,
}

impl BlockRuns {
    /// The runs of rows `0..rows` whose row 0 is partition `p0`; `None` when they would give
    /// either thread more than nine sixteenths of the rows (the caller then splits halves:
    /// the NKI Library top-k's 80 rows, 48 to one thread, ran 25 % slower).
    pub(crate) fn of(p0: usize, rows: usize) -> Option<BlockRuns> {
        let mut runs = [(0, 0, false); MAX_RUNS];
        let (mut len, mut r, mut theirs) = (0, 0, 0);
        while r < rows {
            let block = (p0 + r) / BLOCK;
            let end = ((block + 1) * BLOCK - p0).min(rows);
            let to_worker = block % 2 == 1;
            *runs.get_mut(len)? = (r, end, to_worker);
            len += 1;
            if to_worker {
                theirs += end - r;
            }
            r = end;
        }
        let most = theirs.max(rows - theirs);
        (most * 16 <= rows * 9).then_some(BlockRuns { runs, len })
    }

    /// The first half of rows `0..rows` (rounded down) for the calling thread, the rest for
    /// the worker.
    pub(crate) fn halves(rows: usize) -> BlockRuns {
        let mut runs = [(0, 0, false); MAX_RUNS];
        runs[0] = (0, rows / 2, false);
        runs[1] = (rows / 2, rows, true);
        BlockRuns { runs, len: 2 }
    }

    /// The runs, in order of rows.
    pub(crate) fn runs(&self) -> &[(usize, usize, bool)] {
        &self.runs[..self.len]
    }
}

/// Runs `body` over each piece (its memories and rows) with `lanes`.
fn run_pieces(
    isa: Isa,
    body: &RowsBody<'_>,
    pieces: &mut [Option<(Mems<'_>, Range<usize>)>],
    lanes: &mut Lanes,
) {
    for (mems, rows) in pieces.iter_mut().flatten() {
        body(isa, mems, rows.clone(), lanes);
    }
}

/// The work on a range of rows of an instruction, with one thread's memories and lanes.
pub(crate) type RowsBody<'a> = dyn Fn(Isa, &mut Mems<'_>, Range<usize>, &mut Lanes) + Sync + 'a;

/// Runs `body` over the rows of an instruction: on two threads (each with its own lanes and
/// its own writable partitions) when [`RowSplit`] allows, else on this one. The worker's rows
/// run on this thread, after its own, when the worker has not started them by then.
pub(crate) fn for_rows(e: &mut EngineState, split: &RowSplit<'_>, body: &RowsBody<'_>) {
    let sbuf_stride = e.sbuf.partition_stride();
    let EngineState {
        isa,
        sbuf,
        psum,
        lanes,
        lanes_worker,
        worker,
        ..
    } = e;
    let isa = *isa;
    let rows = split.rows;
    let plan = split_point(split, sbuf_stride)
        .and_then(|p| near_or_large(worker.as_mut()?, split.elems).map(|w| (w, p)));
    let Some((worker, (loc, p0))) = plan else {
        let mut mems = Mems {
            sbuf: Region::whole(sbuf.bytes_mut_within(split.sbuf_columns.clone())),
            psum: Region::whole(psum.bytes_mut()),
            hbm: Region::shared(split.hbm),
        };
        return body(isa, &mut mems, 0..rows, lanes);
    };
    let (mem, other) = match loc {
        Loc::Psum => (psum.bytes_mut(), sbuf.bytes()),
        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => (
            sbuf.bytes_mut_within(split.sbuf_columns.clone()),
            psum.bytes(),
        ),
    };
    let part = match loc {
        Loc::Psum => Psum::PARTITION_STRIDE,
        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => sbuf_stride,
    };
    let p0 = p0 as usize;
    let runs = BlockRuns::of(p0, rows).unwrap_or_else(|| BlockRuns::halves(rows));
    let (below, rest) = mem.split_at_mut(p0 * part);
    let (mut written, above) = rest.split_at_mut(rows * part);
    let (below, above, above_start) = (&*below, &*above, (p0 + rows) * part);
    let mut mine: [Option<(Mems<'_>, Range<usize>)>; MAX_RUNS] = Default::default();
    let mut theirs: [Option<(Mems<'_>, Range<usize>)>; MAX_RUNS] = Default::default();
    for (k, &(r0, r1, to_worker)) in runs.runs().iter().enumerate() {
        let (piece, rest) = core::mem::take(&mut written).split_at_mut((r1 - r0) * part);
        written = rest;
        let start = (p0 + r0) * part;
        let m = thread_mems(
            loc,
            below,
            piece,
            start,
            above,
            above_start,
            (other, split.hbm),
        );
        let side = if to_worker { &mut theirs } else { &mut mine };
        side[k] = Some((m, r0..r1));
    }
    // Rows the worker has not started by the time this thread's are done run here, with this
    // thread's lanes, whose buffers its cache holds.
    let (_, ran) = worker.join_or_leave(
        || run_pieces(isa, body, &mut mine, lanes),
        || run_pieces(isa, body, &mut theirs, lanes_worker),
    );
    if ran.is_none() {
        #[cfg(test)]
        crate::worker::note_left(crate::worker::Left::Rows);
        run_pieces(isa, body, &mut theirs, lanes);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{BlockRuns, RowShare, split_rows};

    /// Blocks of 32 partitions in turn from partition 0, even ones to the calling thread; a
    /// split that leaves either thread more than 9/16 of the rows is refused.
    #[test]
    fn rows_go_to_the_thread_of_their_block_of_partitions() {
        let runs = |p0, rows| BlockRuns::of(p0, rows).map(|r| r.runs().to_vec());
        assert_eq!(
            runs(0, 128),
            Some(vec![
                (0, 32, false),
                (32, 64, true),
                (64, 96, false),
                (96, 128, true)
            ])
        );
        // RoPE's upper half: the same threads as those partitions had in the load above.
        assert_eq!(runs(64, 64), Some(vec![(0, 32, false), (32, 64, true)]));
        assert_eq!(runs(0, 64), Some(vec![(0, 32, false), (32, 64, true)]));
        // A short first block.
        assert_eq!(
            runs(8, 120),
            Some(vec![
                (0, 24, false),
                (24, 56, true),
                (56, 88, false),
                (88, 120, true)
            ])
        );
        // Too uneven: 48 of 80 rows, 64 of 96, all 16 of 16.
        assert_eq!(runs(0, 80), None);
        assert_eq!(runs(32, 96), None);
        assert_eq!(runs(0, 16), None);
    }

    /// Matmuls split at half their rows rounded up to the stationary block, from 16 rows and
    /// 2^19 multiply-adds.
    #[test]
    fn matmuls_split_at_whole_stationary_blocks_when_large_enough() {
        assert_eq!(split_rows(128, 128, 512), Some(64));
        assert_eq!(split_rows(128, 17, 512), Some(8));
        assert_eq!(split_rows(128, 24, 512), Some(16));
        assert_eq!(split_rows(128, 15, 512), None);
        assert_eq!(split_rows(4, 128, 512), None);
        assert_eq!(split_rows(8, 128, 512), Some(64));
    }

    #[test]
    fn row_shares_move_toward_even_times_in_whole_row_blocks() {
        let mut share = RowShare::new();
        assert_eq!(share.rows(128), Some(64));
        assert_eq!(share.rows(15), None);
        assert_eq!(share.rows(16), Some(8));
        // The worker 40 % slower per row: the caller's share grows, by whole blocks of 8 rows.
        let us = Duration::from_micros;
        for _ in 0..20 {
            let h = share.rows(128).unwrap();
            share.observe(h, 128, us(h as u64), us((128 - h) as u64 * 14 / 10));
        }
        let h = share.rows(128).unwrap();
        assert!(h == 72 || h == 80, "{h}");
        assert_eq!(h % 8, 0);
        // Even again: back to halves.
        for _ in 0..40 {
            let h = share.rows(128).unwrap();
            share.observe(h, 128, us(h as u64), us((128 - h) as u64));
        }
        assert_eq!(share.rows(128), Some(64));
        // A worker that seems to take forever moves the share no further than three quarters,
        // and the worker keeps at least one row.
        for _ in 0..100 {
            share.observe(64, 128, us(1), us(1_000_000));
        }
        assert_eq!(share.rows(128), Some(96));
        assert_eq!(share.rows(17), Some(16));
    }
}
