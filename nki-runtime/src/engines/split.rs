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
//! split when [`transfer_splits`]: the destination's halves are disjoint byte ranges. Each
//! half computes exactly what the serial loop computes for its rows.
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
use crate::worker::near;

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
}

/// Where to split the rows between two threads, or `None` when the instruction must run on
/// one: small, or some thread could read what the other writes.
fn split_point(s: &RowSplit<'_>, sbuf_stride: usize) -> Option<(usize, Loc, isize)> {
    if !large_enough(s.rows, s.elems) {
        return None;
    }
    let (loc, first) = independent_rows(s, sbuf_stride)?;
    Some((s.rows / 2, loc, first))
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
    other: &'m [u8],
) -> Mems<'m> {
    let mine = Region::owning(below, own, own_start, above, above_start);
    match loc {
        Loc::Psum => Mems {
            sbuf: Region::shared(other),
            psum: mine,
        },
        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => Mems {
            sbuf: mine,
            psum: Region::shared(other),
        },
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
    let plan = split_point(split, sbuf_stride).and_then(|p| near(worker.as_mut()?).map(|w| (w, p)));
    let Some((worker, (h, loc, p0))) = plan else {
        let mut mems = Mems {
            sbuf: Region::whole(sbuf.bytes_mut_within(split.sbuf_columns.clone())),
            psum: Region::whole(psum.bytes_mut()),
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
    let (a0, b0, b1) = (p0 * part, (p0 + h) * part, (p0 + rows) * part);
    let (below, rest) = mem.split_at_mut(a0);
    let (own_a, rest) = rest.split_at_mut(b0 - a0);
    let (own_b, above) = rest.split_at_mut(b1 - b0);
    let (below, above) = (&*below, &*above);
    let mut ma = thread_mems(loc, below, own_a, a0, above, b1, other);
    let mut mb = thread_mems(loc, below, own_b, b0, above, b1, other);
    // Rows the worker has not started by the time this thread's are done run here, with this
    // thread's lanes, whose buffers its cache holds.
    let (_, ran) = worker.join_or_leave(
        || body(isa, &mut ma, 0..h, lanes),
        || body(isa, &mut mb, h..rows, lanes_worker),
    );
    if ran.is_none() {
        #[cfg(test)]
        crate::worker::note_left(crate::worker::Left::Rows);
        body(isa, &mut mb, h..rows, lanes);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{RowShare, split_rows};

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
