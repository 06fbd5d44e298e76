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

use core::ops::Range;

use nki_lang::DType;

use super::EngineState;
use super::lanes::{Lanes, Sink, Source};
use super::mems::{Mems, Region};
use crate::cpu::Isa;
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
}

/// Where to split the rows between two threads, or `None` when the instruction must run on
/// one: small, or some thread could read what the other writes.
fn split_point(s: &RowSplit<'_>, sbuf_stride: usize) -> Option<(usize, Loc, isize)> {
    let rows = s.rows;
    if !large_enough(rows, s.elems) {
        return None;
    }
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
    Some((rows / 2, d.loc, dp))
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
/// its own writable partitions) when [`RowSplit`] allows, else on this one.
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
            sbuf: Region::whole(sbuf.bytes_mut()),
            psum: Region::whole(psum.bytes_mut()),
        };
        return body(isa, &mut mems, 0..rows, lanes);
    };
    let (mem, other) = match loc {
        Loc::Psum => (psum.bytes_mut(), sbuf.bytes()),
        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => (sbuf.bytes_mut(), psum.bytes()),
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
    worker.join(
        || body(isa, &mut ma, 0..h, lanes),
        || body(isa, &mut mb, h..rows, lanes_worker),
    );
}
