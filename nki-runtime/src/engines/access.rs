//! Access patterns and the one routine that moves elements between them.
//!
//! Every operand of an instruction (an SBUF/PSUM [`TileView`], an [`HbmAccess`]) resolves,
//! once per instruction, to a [`Pattern`]: a base element offset into its memory and one
//! element stride per tile dimension (partition first). Two patterns over the same grid form a
//! [`Plan`]: size-1 dimensions are dropped and dimensions that are contiguous on both sides
//! merged, so that the innermost dimension is as long as possible. [`transfer`] then walks the
//! outer dimensions and moves the innermost one as a contiguous run (one
//! [`crate::cpu::convert::convert`] call) when both sides allow, moves a matrix whose two
//! sides are each other's transpose by blocks, else gathers, converts and scatters it in
//! chunks.
//!
//! Offsets are in elements of each side's dtype. Every memory has partition and tile
//! addresses that are multiples of the element size, so element offsets are exact.

use nki_lang::{DType, MAX_TILE_RANK};

use super::CHUNK;
use super::split::{BlockRuns, MAX_RUNS, large_enough, transfer_splits};
use crate::cpu::Isa;
use crate::cpu::convert::convert;
use crate::memory::Psum;
use crate::operand::{Loc, Pattern, Resolved};
use crate::worker::{Worker, near_or_large};

/// The non-trivial dimensions of one side: sizes and strides, outermost first.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct Squeezed {
    dims: [usize; MAX_TILE_RANK],
    strides: [isize; MAX_TILE_RANK],
    rank: usize,
}

/// Drops the size-1 dimensions of a grid.
pub(crate) fn squeeze(grid: &[usize; MAX_TILE_RANK], strides: &[isize; MAX_TILE_RANK]) -> Squeezed {
    let mut s = Squeezed::default();
    for (&n, &st) in grid.iter().zip(strides) {
        if n != 1 {
            s.dims[s.rank] = n;
            s.strides[s.rank] = st;
            s.rank += 1;
        }
    }
    s
}

impl Squeezed {
    /// Whether the elements are one contiguous run (stride 1 over the row-major order).
    pub(crate) fn is_contiguous(&self) -> bool {
        let mut expect = 1isize;
        for j in (0..self.rank).rev() {
            if self.strides[j] != expect {
                return false;
            }
            expect *= self.dims[j] as isize;
        }
        true
    }
}

/// Two sides of a move over one grid, simplified: at least one dimension, the innermost as
/// long as contiguity on both sides allows.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Plan {
    dims: [usize; MAX_TILE_RANK],
    src: [isize; MAX_TILE_RANK],
    dst: [isize; MAX_TILE_RANK],
    rank: usize,
    /// The on-chip partition of row 0 when the outermost dimension steps through the
    /// partitions of one side ([`Plan::on_partitions`]): the transfer then splits its rows
    /// between the threads by blocks of partitions ([`BlockRuns`]).
    partition0: Option<usize>,
}

impl Plan {
    /// A plan for two sides with the same non-trivial dimensions (the rules make every
    /// operand pair of an instruction agree up to size-1 dimensions).
    pub(crate) fn new(src: &Squeezed, dst: &Squeezed) -> Plan {
        debug_assert_eq!(
            src.dims[..src.rank],
            dst.dims[..dst.rank],
            "operands differ in shape"
        );
        let mut p = Plan {
            dims: [1; MAX_TILE_RANK],
            src: [1; MAX_TILE_RANK],
            dst: [1; MAX_TILE_RANK],
            rank: 0,
            partition0: None,
        };
        for j in 0..src.rank.min(dst.rank) {
            let (n, s, d) = (src.dims[j], src.strides[j], dst.strides[j]);
            if p.rank > 0 {
                let last = p.rank - 1;
                let k = n as isize;
                if p.src[last] == s * k && p.dst[last] == d * k {
                    p.dims[last] *= n;
                    p.src[last] = s;
                    p.dst[last] = d;
                    continue;
                }
            }
            p.dims[p.rank] = n;
            p.src[p.rank] = s;
            p.dst[p.rank] = d;
            p.rank += 1;
        }
        if p.rank == 0 {
            // A single element.
            p.rank = 1;
        }
        p
    }

    /// A plan over one grid for two patterns.
    pub(crate) fn for_grid(grid: &[usize; MAX_TILE_RANK], src: &Pattern, dst: &Pattern) -> Plan {
        Plan::new(&squeeze(grid, &src.strides), &squeeze(grid, &dst.strides))
    }

    /// A plan between two resolved operands of the same layout.
    pub(crate) fn between(src: &Resolved, dst: &Resolved) -> Plan {
        Plan::new(
            &squeeze(&src.dims, &src.pattern.strides),
            &squeeze(&dst.dims, &dst.pattern.strides),
        )
    }

    /// The plan, told that `side` (its source when `!dst`, else its destination) is on chip
    /// (SBUF partitions `sbuf_stride` bytes apart, or PSUM) and where its row 0 is, when the
    /// plan's outermost dimension steps through that side's partitions.
    pub(crate) fn on_partitions(mut self, side: &Resolved, dst: bool, sbuf_stride: usize) -> Plan {
        let part = match side.loc {
            Loc::Sbuf => sbuf_stride,
            Loc::Psum => crate::memory::Psum::PARTITION_STRIDE,
            Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => return self,
        } as isize;
        let size = side.dtype.size() as isize;
        let step = if dst { self.dst[0] } else { self.src[0] };
        let byte = side.pattern.base.saturating_mul(size);
        self.partition0 =
            (step.checked_mul(size) == Some(part) && byte >= 0).then(|| (byte / part) as usize);
        self
    }

    /// Number of elements of the innermost dimension.
    fn inner(&self) -> (usize, isize, isize) {
        let j = self.rank - 1;
        (self.dims[j], self.src[j], self.dst[j])
    }

    /// Calls `f(src_offset, dst_offset)` for the first element of every innermost run.
    #[inline]
    fn for_each_run(&self, mut f: impl FnMut(isize, isize)) {
        let outer = self.rank - 1;
        let mut idx = [0usize; MAX_TILE_RANK];
        let (mut so, mut dof) = (0isize, 0isize);
        loop {
            f(so, dof);
            let mut j = outer;
            loop {
                if j == 0 {
                    return;
                }
                j -= 1;
                idx[j] += 1;
                so += self.src[j];
                dof += self.dst[j];
                if idx[j] < self.dims[j] {
                    break;
                }
                so -= self.src[j] * self.dims[j] as isize;
                dof -= self.dst[j] * self.dims[j] as isize;
                idx[j] = 0;
            }
        }
    }
}

/// Where an operand in SBUF or PSUM lies: its memory, the partition of its row 0 and the bytes
/// its free elements span within their partition; `None` for the partition when its rows are
/// not one partition apart.
pub(crate) fn footprint(
    r: &Resolved,
    sbuf_stride: usize,
) -> Option<(Loc, Option<isize>, isize, isize)> {
    let part = match r.loc {
        Loc::Sbuf => sbuf_stride as isize,
        Loc::Psum => Psum::PARTITION_STRIDE as isize,
        Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => return None,
    };
    let size = r.dtype.size() as isize;
    let base = r.pattern.base * size;
    let (mut lo, mut hi) = (base.rem_euclid(part), base.rem_euclid(part));
    for (&n, &s) in r.dims.iter().zip(&r.pattern.strides).skip(1) {
        let reach = s * size * (n.max(1) as isize - 1);
        lo += reach.min(0);
        hi += reach.max(0);
    }
    let row0 = (r.pattern.strides[0] * size == part).then(|| base.div_euclid(part));
    Some((r.loc, row0, lo, hi + size))
}

/// Whether two operands may share bytes of SBUF or PSUM: the same memory, overlapping bytes
/// within a partition and overlapping partitions (any partitions, for an operand whose rows
/// are not one partition apart).
pub(crate) fn may_share_bytes(a: &Resolved, b: &Resolved, sbuf_stride: usize) -> bool {
    match (footprint(a, sbuf_stride), footprint(b, sbuf_stride)) {
        (Some((la, pa, a0, a1)), Some((lb, pb, b0, b1))) => {
            let rows = |p: Option<isize>, r: &Resolved| p.map(|p| (p, p + r.dims[0] as isize));
            let parts_meet = match (rows(pa, a), rows(pb, b)) {
                (Some((p0, p1)), Some((q0, q1))) => p0 < q1 && q0 < p1,
                _ => true,
            };
            la == lb && a0 < b1 && b0 < a1 && parts_meet
        }
        _ => false,
    }
}

/// The memories a transfer reads and writes: two buffers, or one buffer for both (a copy
/// within SBUF or within PSUM).
pub(crate) enum Mem<'s, 'd> {
    /// Source and destination in different buffers.
    Two(&'s [u8], &'d mut [u8]),
    /// Source and destination in different buffers, the destination a tensor of at least
    /// [`STREAMED_BYTES`] that the transfer writes for the kernel's caller (a store): runs of
    /// the source's dtype of at least [`STREAMED_RUN_BYTES`] go with non-temporal stores
    /// ([`crate::cpu::copy_streaming`]), which do not read each destination line into the
    /// cache before overwriting it. The bytes written are the same.
    Streamed(&'s [u8], &'d mut [u8]),
    /// Source and destination in the same buffer.
    One(&'d mut [u8]),
}

impl<'s, 'd> Mem<'s, 'd> {
    /// Source and destination in different buffers, the destination written as
    /// [`Mem::Streamed`] when `streamed`.
    fn two(streamed: bool, src: &'s [u8], dst: &'d mut [u8]) -> Mem<'s, 'd> {
        if streamed {
            Mem::Streamed(src, dst)
        } else {
            Mem::Two(src, dst)
        }
    }
}

/// Fewest bytes of an HBM tensor whose stores are [`Mem::Streamed`]: larger than the host's
/// L2 cache, so that the lines a store writes would leave the cache before anything reads them
/// (the LayerNorm tutorial's 128 MiB output: 46.4 / 46.1 / 49.8 → 43.1 / 43.3 / 42.6 ms P50).
pub(crate) const STREAMED_BYTES: usize = 8 << 20;

/// Fewest bytes of a contiguous run that a [`Mem::Streamed`] transfer writes with non-temporal
/// stores (each fills whole cache lines; a short run would leave partial ones).
const STREAMED_RUN_BYTES: usize = 1 << 10;

impl Mem<'_, '_> {
    /// The memory read.
    pub(crate) fn src(&self) -> &[u8] {
        match self {
            Mem::Two(s, _) | Mem::Streamed(s, _) => s,
            Mem::One(b) => b,
        }
    }

    /// The memory written.
    pub(crate) fn dst(&mut self) -> &mut [u8] {
        match self {
            Mem::Two(_, d) | Mem::Streamed(_, d) => d,
            Mem::One(b) => b,
        }
    }
}

/// One side of a transfer: element type and base offset (in elements).
#[derive(Copy, Clone, Debug)]
pub(crate) struct End {
    /// Element type.
    pub dtype: DType,
    /// Element offset of the grid's first element.
    pub base: isize,
}

/// Scratch space for strided transfers: two chunks of up to [`CHUNK`] f32s.
pub(crate) struct ChunkBuf {
    a: Vec<u8>,
    b: Vec<u8>,
}

impl ChunkBuf {
    pub(crate) fn new() -> Self {
        ChunkBuf {
            a: vec![0; CHUNK * 4],
            b: vec![0; CHUNK * 4],
        }
    }
}

/// Byte range of `count` elements of `size` bytes at element offset `elem`.
#[inline]
fn bytes(elem: isize, size: usize, count: usize) -> core::ops::Range<usize> {
    // A negative offset can only come from a program that broke the rules; it becomes an
    // out-of-range index, which the slice access reports.
    let start = (elem as usize).wrapping_mul(size);
    start..start.wrapping_add(count * size)
}

/// Moves every element of the plan's grid from `src` to `dst`, converting from `src.dtype` to
/// `dst.dtype` with the model's conversions ([`crate::cpu::convert`]).
///
/// Each contiguous run is converted by one call. When the two inner dimensions transpose a
/// matrix (one side contiguous along each) and the dtypes agree, each matrix moves by blocks
/// ([`crate::cpu::transpose::transpose_elements`]) where its two sides share no byte. Other
/// strided runs are moved in chunks of [`CHUNK`] elements: a chunk is read completely before
/// it is written, which is all an overlapping source and destination within one buffer can
/// rely on.
pub(crate) fn transfer(
    isa: Isa,
    buf: &mut ChunkBuf,
    mut mem: Mem<'_, '_>,
    src: End,
    dst: End,
    plan: &Plan,
) {
    let (ss, ds) = (src.dtype.size() as usize, dst.dtype.size() as usize);
    let (n, s_in, d_in) = plan.inner();
    let same = src.dtype == dst.dtype;
    if s_in == 1 && d_in == 1 {
        plan.for_each_run(|so, dof| {
            let sr = bytes(src.base + so, ss, n);
            let dr = bytes(dst.base + dof, ds, n);
            match &mut mem {
                Mem::Streamed(s, d) if same && sr.len() >= STREAMED_RUN_BYTES => {
                    crate::cpu::copy_streaming(&mut d[dr], &s[sr]);
                }
                Mem::Two(s, d) | Mem::Streamed(s, d) => {
                    convert(isa, &s[sr], src.dtype, &mut d[dr], dst.dtype, n);
                }
                Mem::One(b) if same => b.copy_within(sr, dr.start),
                Mem::One(b) => {
                    if sr.end <= dr.start {
                        let (lo, hi) = b.split_at_mut(dr.start);
                        convert(isa, &lo[sr], src.dtype, hi, dst.dtype, n);
                    } else if dr.end <= sr.start {
                        let (lo, hi) = b.split_at_mut(sr.start);
                        convert(isa, hi, src.dtype, &mut lo[dr], dst.dtype, n);
                    } else {
                        // Overlapping ranges of different dtypes (a tile and its
                        // `view(dtype)`) in one instruction are refused by the overlap check;
                        // still, stay defined: go through scratch.
                        strided_run(isa, buf, &mut mem, src, dst, so, dof, n, 1, 1);
                    }
                }
            }
        });
    } else if let Some(t) = plan.transposed().filter(|_| same) {
        // Each block of the two inner dimensions is a matrix transposed: moved by square
        // tiles rather than one strided element at a time.
        let mut outer = *plan;
        outer.rank -= 1;
        let o = plan.rank - 2;
        outer.for_each_run(|so, dof| {
            if !transpose_block(isa, &mut mem, &t, src.base + so, dst.base + dof, ss) {
                for i in 0..plan.dims[o] as isize {
                    let (si, di) = (so + plan.src[o] * i, dof + plan.dst[o] * i);
                    strided_run(isa, buf, &mut mem, src, dst, si, di, n, s_in, d_in);
                }
            }
        });
    } else {
        plan.for_each_run(|so, dof| {
            strided_run(isa, buf, &mut mem, src, dst, so, dof, n, s_in, d_in)
        });
    }
    if matches!(mem, Mem::Streamed(..)) {
        // Non-temporal stores are ordered by a fence before anything this thread does next
        // (handing its half back included) can make another thread read them.
        crate::cpu::store_fence();
    }
}

/// The two inner dimensions of a [`Plan`] when they transpose a matrix: the source reads
/// `rows` rows of `cols` contiguous elements, `src_stride` apart, and the destination writes
/// them as columns, its rows (the source's columns) `dst_stride` apart.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Transposed {
    rows: usize,
    cols: usize,
    src_stride: usize,
    dst_stride: usize,
}

impl Plan {
    /// The inner two dimensions as a matrix transpose, if they are one: one side contiguous
    /// along the inner dimension and the other along the second-inner one, both other strides
    /// positive.
    fn transposed(&self) -> Option<Transposed> {
        if self.rank < 2 {
            return None;
        }
        let (o, i) = (self.rank - 2, self.rank - 1);
        if self.dims[o] == 0 || self.dims[i] == 0 {
            return None;
        }
        let pos = |x: isize| usize::try_from(x).ok().filter(|&x| x > 0);
        if self.src[i] == 1 && self.dst[o] == 1 {
            Some(Transposed {
                rows: self.dims[o],
                cols: self.dims[i],
                src_stride: pos(self.src[o])?,
                dst_stride: pos(self.dst[i])?,
            })
        } else if self.src[o] == 1 && self.dst[i] == 1 {
            Some(Transposed {
                rows: self.dims[i],
                cols: self.dims[o],
                src_stride: pos(self.src[i])?,
                dst_stride: pos(self.dst[o])?,
            })
        } else {
            None
        }
    }
}

/// Moves one matrix of a [`Transposed`] plan, its first elements at element offsets `so`
/// (source) and `dof` (destination), `size`-byte elements of one dtype; `false` (nothing
/// moved) when the two sides share bytes of one buffer or lie outside it, where the caller
/// moves it run by run.
fn transpose_block(
    isa: Isa,
    mem: &mut Mem<'_, '_>,
    t: &Transposed,
    so: isize,
    dof: isize,
    size: usize,
) -> bool {
    use crate::cpu::transpose::{Matrix, transpose_elements};
    let (Ok(so), Ok(dof)) = (usize::try_from(so), usize::try_from(dof)) else {
        return false;
    };
    let s = Matrix {
        at: so,
        stride: t.src_stride,
    };
    let d = Matrix {
        at: dof,
        stride: t.dst_stride,
    };
    let (Some(sr), Some(dr)) = (s.span(t.rows, t.cols, size), d.span(t.cols, t.rows, size)) else {
        return false;
    };
    match mem {
        Mem::Two(a, b) | Mem::Streamed(a, b) if sr.end <= a.len() && dr.end <= b.len() => {
            transpose_elements(isa, a, s, b, d, t.rows, t.cols, size);
            true
        }
        Mem::One(b) if sr.end <= b.len() && dr.end <= b.len() => {
            if sr.end <= dr.start {
                let (lo, hi) = b.split_at_mut(dr.start);
                let d = Matrix { at: 0, ..d };
                transpose_elements(isa, lo, s, hi, d, t.rows, t.cols, size);
                true
            } else if dr.end <= sr.start {
                let (lo, hi) = b.split_at_mut(sr.start);
                let s = Matrix { at: 0, ..s };
                transpose_elements(isa, hi, s, lo, d, t.rows, t.cols, size);
                true
            } else {
                false
            }
        }
        Mem::Two(..) | Mem::Streamed(..) | Mem::One(_) => false,
    }
}

/// A run of a transfer's rows for one thread: its destination bytes, both sides' first
/// elements there, and the plan of its rows.
type RowRun<'m> = (&'m mut [u8], End, End, Plan);

/// [`transfer`] over two buffers, split between this thread and `worker` along the plan's
/// outermost dimension when the transfer is large and the destination's halves are disjoint
/// byte ranges (rows that cannot overlap; [`transfer_splits`]); serial otherwise. When the
/// plan's rows are an on-chip side's partitions ([`Plan::on_partitions`]) they are split by
/// blocks of partitions ([`BlockRuns`]), else by halves. Each thread moves exactly the
/// elements the serial transfer moves for its rows. The destination is
/// given with whether it is written as [`Mem::Streamed`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn transfer_par(
    isa: Isa,
    worker: Option<&mut Worker>,
    bufs: (&mut ChunkBuf, &mut ChunkBuf),
    src_mem: &[u8],
    (dst_mem, streamed): (&mut [u8], bool),
    src: End,
    dst: End,
    plan: &Plan,
) {
    let rows = plan.dims[0];
    let (d0, ds) = (plan.dst[0], dst.dtype.size() as isize);
    let wanted = transfer_splits(&plan.dims[..plan.rank], &plan.dst[..plan.rank]) && dst.base >= 0;
    let elems: usize = plan.dims[..plan.rank].iter().product();
    let runs = plan
        .partition0
        .and_then(|p0| BlockRuns::of(p0, rows))
        .unwrap_or_else(|| BlockRuns::halves(rows));
    // Each run's destination rows: from its first row's first byte to the next run's
    // (the first from the memory's start, the last to its end).
    let start = |r: usize| ((dst.base + r as isize * d0) * ds) as usize;
    let fits = wanted
        && runs
            .runs()
            .iter()
            .all(|&(r0, _, _)| start(r0) <= dst_mem.len());
    let Some(worker) = worker
        .filter(|_| fits)
        .and_then(|w| near_or_large(w, elems))
    else {
        let mem = Mem::two(streamed, src_mem, dst_mem);
        return transfer(isa, bufs.0, mem, src, dst, plan);
    };
    let mut mine: [Option<RowRun<'_>>; MAX_RUNS] = Default::default();
    let mut theirs: [Option<RowRun<'_>>; MAX_RUNS] = Default::default();
    let mut rest = dst_mem;
    let mut at = 0;
    for (k, &(r0, r1, to_worker)) in runs.runs().iter().enumerate() {
        let end = runs
            .runs()
            .get(k + 1)
            .map_or(at + rest.len(), |&(next, _, _)| start(next));
        let (piece, tail) = core::mem::take(&mut rest).split_at_mut(end - at);
        rest = tail;
        let mut part = *plan;
        part.dims[0] = r1 - r0;
        let s_end = End {
            base: src.base + r0 as isize * plan.src[0],
            ..src
        };
        let d_end = End {
            base: dst.base + r0 as isize * d0 - (at / ds as usize) as isize,
            ..dst
        };
        at = end;
        let side = if to_worker { &mut theirs } else { &mut mine };
        side[k] = Some((piece, s_end, d_end, part));
    }
    let moves = |buf: &mut ChunkBuf, runs: &mut [Option<RowRun<'_>>]| {
        for (piece, s_end, d_end, part) in runs.iter_mut().flatten() {
            let mem = Mem::two(streamed, src_mem, piece);
            transfer(isa, buf, mem, *s_end, *d_end, part);
        }
    };
    let (b0, b1) = bufs;
    worker.join(|| moves(b0, &mut mine), || moves(b1, &mut theirs));
}

/// [`transfer`] within one buffer (a copy inside SBUF or inside PSUM), split like
/// [`transfer_par`] when one byte boundary separates the first half of the rows from the
/// second on both sides (tiles of one instruction share partitions, so the middle partition's
/// start does). Each thread then moves the rows it loaded or computed, which its core's cache
/// already holds. Serial otherwise.
#[allow(clippy::too_many_arguments)]
pub(crate) fn transfer_par_within(
    isa: Isa,
    worker: Option<&mut Worker>,
    bufs: (&mut ChunkBuf, &mut ChunkBuf),
    mem: &mut [u8],
    src: End,
    dst: End,
    plan: &Plan,
) {
    let elems: usize = plan.dims[..plan.rank].iter().product();
    let rows = plan.dims[0];
    let h = rows / 2;
    let (ss, ds) = (src.dtype.size() as isize, dst.dtype.size() as isize);
    // Extent of one outer row in elements, on each side.
    let extent = |strides: &[isize; MAX_TILE_RANK]| -> Option<isize> {
        if strides[1..plan.rank].iter().any(|&s| s < 0) {
            return None;
        }
        Some(
            (1..plan.rank)
                .map(|j| (plan.dims[j] as isize - 1) * strides[j])
                .sum::<isize>()
                + 1,
        )
    };
    // A boundary at or after the end of both sides' first halves and at or before the start
    // of both second halves, on a 4-byte multiple so that both sides' element offsets stay
    // exact (elements are 1, 2 or 4 bytes).
    let split = match (extent(&plan.src), extent(&plan.dst)) {
        (Some(se), Some(de))
            if plan.rank >= 2
                && large_enough(rows, elems)
                && src.base >= 0
                && dst.base >= 0
                && plan.src[0] > 0
                && plan.dst[0] > 0 =>
        {
            let hi_src = (src.base + h as isize * plan.src[0]) * ss;
            let hi_dst = (dst.base + h as isize * plan.dst[0]) * ds;
            let lo_src_end = (src.base + (h as isize - 1) * plan.src[0] + se) * ss;
            let lo_dst_end = (dst.base + (h as isize - 1) * plan.dst[0] + de) * ds;
            let at = (lo_src_end.max(lo_dst_end) + 3) / 4 * 4;
            (at <= hi_src && at <= hi_dst && (at as usize) <= mem.len())
                .then_some((at, hi_src, hi_dst))
        }
        _ => None,
    };
    let (Some(worker), Some((at, hi_src, hi_dst))) = (
        split.and(worker).and_then(|w| near_or_large(w, elems)),
        split,
    ) else {
        return transfer(isa, bufs.0, Mem::One(mem), src, dst, plan);
    };
    let (lo, hi) = mem.split_at_mut(at as usize);
    let mut first = *plan;
    first.dims[0] = h;
    let mut second = *plan;
    second.dims[0] = rows - h;
    let src_hi = End {
        base: (hi_src - at) / ss,
        ..src
    };
    let dst_hi = End {
        base: (hi_dst - at) / ds,
        ..dst
    };
    let (b0, b1) = bufs;
    worker.join(
        || transfer(isa, b0, Mem::One(lo), src, dst, &first),
        || transfer(isa, b1, Mem::One(hi), src_hi, dst_hi, &second),
    );
}

/// Moves one run of `n` elements with strides `s_in` / `d_in`, in chunks, through scratch.
#[allow(clippy::too_many_arguments)]
fn strided_run(
    isa: Isa,
    buf: &mut ChunkBuf,
    mem: &mut Mem<'_, '_>,
    src: End,
    dst: End,
    so: isize,
    dof: isize,
    n: usize,
    s_in: isize,
    d_in: isize,
) {
    let (ss, ds) = (src.dtype.size() as usize, dst.dtype.size() as usize);
    let same = src.dtype == dst.dtype;
    let mut done = 0usize;
    while done < n {
        let c = CHUNK.min(n - done);
        let s0 = src.base + so + s_in * done as isize;
        let d0 = dst.base + dof + d_in * done as isize;
        // Source chunk → `a` (source dtype), unless it is already contiguous.
        let src_contig = s_in == 1 && !(matches!(mem, Mem::One(_)) && d_in == 1);
        // A strided source into a contiguous destination of its dtype: gathered in place.
        if let (false, true, 1, Mem::Two(s, d) | Mem::Streamed(s, d)) =
            (src_contig, same, d_in, &mut *mem)
        {
            gather(s, ss, s0, s_in, c, &mut d[bytes(d0, ds, c)]);
            done += c;
            continue;
        }
        if !src_contig {
            gather(mem.src(), ss, s0, s_in, c, &mut buf.a);
        }
        if d_in == 1 {
            let dr = bytes(d0, ds, c);
            if src_contig {
                let sr = bytes(s0, ss, c);
                let (Mem::Two(s, d) | Mem::Streamed(s, d)) = mem else {
                    unreachable!()
                };
                convert(isa, &s[sr], src.dtype, &mut d[dr], dst.dtype, c);
            } else {
                convert(isa, &buf.a, src.dtype, &mut mem.dst()[dr], dst.dtype, c);
            }
        } else {
            let out: &[u8] = if same && !src_contig {
                &buf.a
            } else {
                if src_contig {
                    convert(
                        isa,
                        &mem.src()[bytes(s0, ss, c)],
                        src.dtype,
                        &mut buf.b,
                        dst.dtype,
                        c,
                    );
                } else {
                    convert(isa, &buf.a, src.dtype, &mut buf.b, dst.dtype, c);
                }
                &buf.b
            };
            scatter(out, ds, mem.dst(), d0, d_in, c);
        }
        done += c;
    }
}

/// Copies `count` elements of `size` bytes from element offsets `start + i * stride` of `src`
/// to the start of `out`.
fn gather(src: &[u8], size: usize, start: isize, stride: isize, count: usize, out: &mut [u8]) {
    fn go<const N: usize>(src: &[u8], start: isize, stride: isize, out: &mut [u8]) {
        let (elems, _) = out.as_chunks_mut::<N>();
        // The offsets form a progression: its two ends bound every element it reads.
        let ends = elems.len().checked_sub(1).and_then(|n| {
            let last = stride
                .checked_mul(isize::try_from(n).ok()?)?
                .checked_add(start)?;
            Some((start.min(last), start.max(last)))
        });
        let within = ends.is_some_and(|(lo, hi)| {
            let end = usize::try_from(hi)
                .ok()
                .and_then(|h| h.checked_mul(N)?.checked_add(N));
            lo >= 0 && end.is_some_and(|end| end <= src.len())
        });
        let mut e = start;
        if within {
            let base = src.as_ptr();
            for o in elems {
                // SAFETY: `e` lies between the progression's ends, whose elements are within
                // `src` (checked above), so the `N` bytes at `e · N` are too.
                *o = unsafe { base.add(e as usize * N).cast::<[u8; N]>().read_unaligned() };
                e = e.wrapping_add(stride);
            }
        } else {
            // Out of bounds somewhere: the checked copies panic where the plan is wrong.
            for o in elems {
                let b = (e as usize).wrapping_mul(N);
                o.copy_from_slice(&src[b..b.wrapping_add(N)]);
                e = e.wrapping_add(stride);
            }
        }
    }
    let out = &mut out[..count * size];
    debug_assert!(matches!(size, 1 | 2 | 4));
    match size {
        1 => go::<1>(src, start, stride, out),
        2 => go::<2>(src, start, stride, out),
        _ => go::<4>(src, start, stride, out),
    }
}

/// Copies `count` elements of `size` bytes from the start of `from` to element offsets
/// `start + i * stride` of `dst`.
fn scatter(from: &[u8], size: usize, dst: &mut [u8], start: isize, stride: isize, count: usize) {
    fn go<const N: usize>(from: &[u8], dst: &mut [u8], start: isize, stride: isize) {
        let mut e = start;
        for v in from.chunks_exact(N) {
            let b = (e as usize).wrapping_mul(N);
            dst[b..b.wrapping_add(N)].copy_from_slice(v);
            e += stride;
        }
    }
    let from = &from[..count * size];
    debug_assert!(matches!(size, 1 | 2 | 4));
    match size {
        1 => go::<1>(from, dst, start, stride),
        2 => go::<2>(from, dst, start, stride),
        _ => go::<4>(from, dst, start, stride),
    }
}

/// Writes `value` (one element's bytes) to every element of the grid on the plan's
/// destination side.
pub(crate) fn fill(dst: &mut [u8], base: isize, value: &[u8], plan: &Plan) {
    let size = value.len();
    let (n, _, d_in) = plan.inner();
    plan.for_each_run(|_, dof| {
        if d_in == 1 {
            fill_run(&mut dst[bytes(base + dof, size, n)], value);
        } else {
            let mut e = base + dof;
            for _ in 0..n {
                dst[bytes(e, size, 1)].copy_from_slice(value);
                e += d_in;
            }
        }
    });
}

/// Fills a contiguous run with copies of `value`, word-wise where the run is aligned (it is
/// in SBUF and PSUM, whose rows and tiles are element-aligned).
pub(crate) fn fill_run(run: &mut [u8], value: &[u8]) {
    match *value {
        [a, b] => match bytemuck::try_cast_slice_mut::<u8, u16>(run) {
            Ok(words) => words.fill(u16::from_ne_bytes([a, b])),
            Err(_) => run
                .chunks_exact_mut(2)
                .for_each(|e| e.copy_from_slice(value)),
        },
        [a, b, c, d] => match bytemuck::try_cast_slice_mut::<u8, u32>(run) {
            Ok(words) => words.fill(u32::from_ne_bytes([a, b, c, d])),
            Err(_) => run
                .chunks_exact_mut(4)
                .for_each(|e| e.copy_from_slice(value)),
        },
        _ => run
            .chunks_exact_mut(value.len())
            .for_each(|e| e.copy_from_slice(value)),
    }
}

/// A `[rows, cols]` source (element offsets: first element, row stride; contiguous rows) and
/// its transpose's destination (first element, stride between its rows; contiguous rows).
pub(crate) struct Block2d {
    /// Source rows (destination columns).
    pub(crate) rows: usize,
    /// Source columns (destination rows).
    pub(crate) cols: usize,
    /// Source: first element, row stride, dtype.
    pub(crate) src: (isize, isize, DType),
    /// Destination: first element, row stride, dtype.
    pub(crate) dst: (isize, isize, DType),
}

impl Block2d {
    /// Whether the source's and the destination's bytes may overlap (within one memory).
    pub(crate) fn overlaps(&self) -> bool {
        let span = |(base, stride, dt): (isize, isize, DType), n: usize, len: usize| {
            let size = dt.size() as isize;
            let last = base + (n as isize - 1) * stride + len as isize;
            (base * size, last * size)
        };
        let (a0, a1) = span(self.src, self.rows, self.cols);
        let (b0, b1) = span(self.dst, self.cols, self.rows);
        a0 < b1 && b0 < a1
    }
}

/// Column `c` of a block of rows `cols` elements wide (elements of `N` bytes) into `run`.
#[inline(always)]
fn column<const N: usize>(block: &[u8], run: &mut [u8], c: usize, cols: usize) {
    for (r, e) in run.chunks_exact_mut(N).enumerate() {
        let k = (r * cols + c) * N;
        let v: [u8; N] = block[k..k + N].try_into().expect("N bytes");
        e.copy_from_slice(&v);
    }
}

/// Rows of the source converted at once (the destination then gets runs of this many).
const T_ROWS: usize = 16;
/// Most columns a blocked transpose takes (TensorE's and VectorE's limits are below it).
pub(crate) const T_COLS: usize = 128;

/// `dst[c][r] = src[r][c]`, converted: `T_ROWS` source rows at a time are converted into a
/// scratch block, whose columns are then written as contiguous runs of the destination's rows.
pub(crate) fn transpose_blocks(isa: Isa, mem: &mut Mem<'_, '_>, b: &Block2d) {
    let (sb, s_row, s_dt) = b.src;
    let (db, d_row, d_dt) = b.dst;
    let (ss, ds) = (s_dt.size() as usize, d_dt.size() as usize);
    let mut words = [0u32; T_ROWS * T_COLS];
    let block: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    let at = |e: isize, size: usize| (e as usize) * size;
    for r0 in (0..b.rows).step_by(T_ROWS) {
        let n = T_ROWS.min(b.rows - r0);
        // A transposed 16 x 16 block of 32-bit elements: destination rows `c..c + 16`, each a
        // run of the 16 source rows from `r0`.
        let put = |mem: &mut Mem<'_, '_>, t: &crate::cpu::transpose::Block16, c: usize| {
            for (j, run) in t.iter().enumerate() {
                let d0 = at(db + (c + j) as isize * d_row + r0 as isize, ds);
                mem.dst()[d0..d0 + 64].copy_from_slice(bytemuck::cast_slice(run));
            }
        };
        // bf16 rows into fp32 (TensorE's transpose into PSUM): widened in registers, no
        // conversion pass.
        let halves = bytemuck::try_cast_slice::<u8, u16>(mem.src()).is_ok();
        if s_dt == DType::Bf16
            && d_dt == DType::F32
            && n == T_ROWS
            && b.cols.is_multiple_of(16)
            && halves
        {
            for c in (0..b.cols).step_by(16) {
                let first = (sb + r0 as isize * s_row) as usize + c;
                let src: &[u16] = bytemuck::cast_slice(mem.src());
                let t = crate::cpu::transpose::transpose16_bf16(isa, src, first, s_row as usize);
                put(mem, &t, c);
            }
            continue;
        }
        for r in 0..n {
            let s0 = at(sb + (r0 + r) as isize * s_row, ss);
            let src = &mem.src()[s0..s0 + b.cols * ss];
            let out = &mut block[r * b.cols * ds..(r + 1) * b.cols * ds];
            crate::cpu::convert::convert(isa, src, s_dt, out, d_dt, b.cols);
        }
        // Whole 16 x 16 blocks of 32-bit elements in registers, the rest column by column.
        let mut c = 0;
        if ds == 4 && n == T_ROWS {
            let words: &[u32] = bytemuck::cast_slice(&block[..n * b.cols * ds]);
            while c + 16 <= b.cols {
                let t = crate::cpu::transpose::transpose16(isa, &words[c..], b.cols);
                put(mem, &t, c);
                c += 16;
            }
        }
        let block = &block[..n * b.cols * ds];
        for c in c..b.cols {
            let d0 = at(db + c as isize * d_row + r0 as isize, ds);
            let run = &mut mem.dst()[d0..d0 + n * ds];
            match ds {
                1 => column::<1>(block, run, c, b.cols),
                2 => column::<2>(block, run, c, b.cols),
                _ => column::<4>(block, run, c, b.cols),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(grid: [usize; 4], s: [isize; 4], d: [isize; 4]) -> Plan {
        let pad = |a: [usize; 4]| [a[0], a[1], a[2], a[3], 1];
        let pads = |a: [isize; 4]| [a[0], a[1], a[2], a[3], 0];
        let (grid, s, d) = (pad(grid), pads(s), pads(d));
        Plan::for_grid(
            &grid,
            &Pattern {
                base: 0,
                strides: s,
            },
            &Pattern {
                base: 0,
                strides: d,
            },
        )
    }

    #[test]
    fn plans_merge_contiguous_dims() {
        let p = plan([128, 4, 8, 1], [32, 8, 1, 0], [1000, 8, 1, 7]);
        assert_eq!((p.rank, &p.dims[..2]), (2, &[128, 32][..]));
        let p = plan([128, 4, 8, 1], [32, 8, 1, 0], [32, 8, 1, 0]);
        assert_eq!((p.rank, p.dims[0]), (1, 4096));
        let p = plan([1, 1, 1, 1], [5, 5, 5, 5], [5, 5, 5, 5]);
        assert_eq!((p.rank, p.dims[0]), (1, 1));
        let p = plan([2, 3, 1, 1], [1, 2, 0, 0], [3, 1, 0, 0]);
        assert_eq!((p.rank, p.inner()), (2, (3, 2, 1)));
        let mut runs = Vec::new();
        p.for_each_run(|s, d| runs.push((s, d)));
        assert_eq!(runs, [(0, 0), (1, 3)]);
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        bytemuck::cast_slice(v).to_vec()
    }

    #[test]
    fn transfer_paths_agree() {
        // 3×5 f32 source, transposed into a 5×3 f32 destination, then cast to bf16.
        let src: Vec<f32> = (0..15).map(|i| i as f32 + 0.5).collect();
        let sb = f32s(&src);
        let mut buf = ChunkBuf::new();
        let grid = [3, 5, 1, 1];
        let s = End {
            dtype: DType::F32,
            base: 0,
        };
        let mut dst = vec![0u8; 15 * 4];
        let p = plan(grid, [5, 1, 0, 0], [1, 3, 0, 0]);
        let d = End {
            dtype: DType::F32,
            base: 0,
        };
        transfer(Isa::Portable, &mut buf, Mem::Two(&sb, &mut dst), s, d, &p);
        let out: &[f32] = bytemuck::cast_slice(&dst);
        for i in 0..3 {
            for j in 0..5 {
                assert_eq!(out[j * 3 + i], src[i * 5 + j]);
            }
        }
        let mut bf = vec![0u8; 15 * 2];
        let d = End {
            dtype: DType::Bf16,
            base: 0,
        };
        transfer(Isa::Portable, &mut buf, Mem::Two(&sb, &mut bf), s, d, &p);
        let out: &[half::bf16] = bytemuck::cast_slice(&bf);
        for i in 0..3 {
            for j in 0..5 {
                assert_eq!(out[j * 3 + i], half::bf16::from_f32(src[i * 5 + j]));
            }
        }
    }

    #[test]
    fn streamed_transfers_write_what_plain_ones_write() {
        // Rows of 300 f32s (long runs) and of 7 (short ones), contiguous or a row apart,
        // same dtype and converted to bf16, from several bases.
        let src: Vec<f32> = (0..8192).map(|i| i as f32 * 0.37 - 900.0).collect();
        let sb = f32s(&src);
        let mut buf = ChunkBuf::new();
        for (cols, d_row) in [(300, 300), (300, 313), (7, 9)] {
            for dtype in [DType::F32, DType::Bf16] {
                for base in [0, 1, 5] {
                    let p = plan([20, cols, 1, 1], [cols as isize, 1, 0, 0], [d_row, 1, 0, 0]);
                    let s = End {
                        dtype: DType::F32,
                        base: 3,
                    };
                    let d = End { dtype, base };
                    let bytes = (base as usize + 20 * d_row as usize) * dtype.size() as usize;
                    let mut plain = vec![0x5au8; bytes + 8];
                    let mut streamed = plain.clone();
                    transfer(Isa::Portable, &mut buf, Mem::Two(&sb, &mut plain), s, d, &p);
                    let mem = Mem::Streamed(&sb, &mut streamed);
                    transfer(Isa::Portable, &mut buf, mem, s, d, &p);
                    assert_eq!(plain, streamed, "{cols} {d_row} {dtype:?} {base}");
                }
            }
        }
    }

    #[test]
    fn same_buffer_moves() {
        // Same dtype, overlapping: a memmove.
        let mut b = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let mut buf = ChunkBuf::new();
        let p = plan([1, 4, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0]);
        let e = |base| End {
            dtype: DType::F32,
            base,
        };
        transfer(Isa::Portable, &mut buf, Mem::One(&mut b), e(0), e(2), &p);
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(&b),
            &[1.0, 2.0, 1.0, 2.0, 3.0, 4.0]
        );
        // Different dtypes, disjoint, both orders.
        let mut b = f32s(&[1.5, 2.5, 0.0, 0.0, 0.0, 0.0]);
        let bf = |base| End {
            dtype: DType::Bf16,
            base,
        };
        let p = plan([1, 2, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0]);
        transfer(Isa::Portable, &mut buf, Mem::One(&mut b), e(0), bf(4), &p);
        transfer(Isa::Portable, &mut buf, Mem::One(&mut b), bf(4), e(3), &p);
        b[..8].fill(0);
        transfer(Isa::Portable, &mut buf, Mem::One(&mut b), bf(4), e(0), &p);
        let out: &[f32] = bytemuck::cast_slice(&b);
        assert_eq!(out[..2], [1.5, 2.5]);
        assert_eq!(out[3..5], [1.5, 2.5]);
        // Strided within one buffer (reverse 3 elements into the tail).
        let mut b = f32s(&[1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
        let p = plan([1, 3, 1, 1], [0, 1, 0, 0], [0, -1, 0, 0]);
        transfer(Isa::Portable, &mut buf, Mem::One(&mut b), e(0), e(5), &p);
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(&b),
            &[1.0, 2.0, 3.0, 3.0, 2.0, 1.0]
        );
    }

    /// A strided source into a contiguous destination of its dtype (gathered in place), for
    /// each element size, both directions, over several chunks: element `i` is source
    /// element `base + i · stride`.
    #[test]
    fn strided_gathers_of_each_size_and_direction() {
        let n = CHUNK * 2 + 5;
        for (dtype, size) in [(DType::U8, 1), (DType::Bf16, 2), (DType::F32, 4)] {
            for (stride, base) in [(3isize, 2isize), (-3, 3 * n as isize)] {
                let src: Vec<u8> = (0..(3 * n + 4) * size)
                    .map(|i| (i * 7 % 251) as u8)
                    .collect();
                let mut dst = vec![0u8; n * size];
                let p = plan([1, n, 1, 1], [0, stride, 0, 0], [0, 1, 0, 0]);
                let (s, d) = (End { dtype, base }, End { dtype, base: 0 });
                let mut buf = ChunkBuf::new();
                transfer(Isa::Portable, &mut buf, Mem::Two(&src, &mut dst), s, d, &p);
                for i in 0..n {
                    let at = (base + i as isize * stride) as usize * size;
                    assert_eq!(
                        dst[i * size..][..size],
                        src[at..][..size],
                        "{dtype:?} {stride} {i}"
                    );
                }
            }
        }
    }

    /// A gather whose progression leaves the source panics; it never reads past it.
    #[test]
    #[should_panic]
    fn a_gather_past_the_source_panics() {
        let src = [0u8; 64];
        let mut out = [0u8; 40];
        // Elements 0, 3, …, 27 of 4 bytes: the last starts at byte 108 of 64.
        gather(&src, 4, 0, 3, 10, &mut out);
    }

    #[test]
    fn long_strided_runs_use_chunks() {
        let n = CHUNK * 2 + 7;
        let src: Vec<f32> = (0..2 * n).map(|i| i as f32).collect();
        let sb = f32s(&src);
        let mut dst = vec![0u8; n * 2];
        let mut buf = ChunkBuf::new();
        let p = plan([1, n, 1, 1], [0, 2, 0, 0], [0, 1, 0, 0]);
        let s = End {
            dtype: DType::F32,
            base: 1,
        };
        let d = End {
            dtype: DType::Bf16,
            base: 0,
        };
        transfer(Isa::Portable, &mut buf, Mem::Two(&sb, &mut dst), s, d, &p);
        let out: &[half::bf16] = bytemuck::cast_slice(&dst);
        for (i, &o) in out.iter().enumerate() {
            assert_eq!(o, half::bf16::from_f32(src[1 + 2 * i]));
        }
    }

    #[test]
    fn fill_unaligned_and_wide() {
        let mut b = vec![0u8; 11];
        fill_run(&mut b[1..9], &[1, 2]);
        assert_eq!(b, [0, 1, 2, 1, 2, 1, 2, 1, 2, 0, 0]);
        let mut b = vec![0u8; 11];
        fill_run(&mut b[1..9], &[1, 2, 3, 4]);
        assert_eq!(b, [0, 1, 2, 3, 4, 1, 2, 3, 4, 0, 0]);
        let mut w = vec![0u32; 4];
        fill_run(bytemuck::cast_slice_mut(&mut w), &[1, 0, 0, 0]);
        assert_eq!(w, [1u32.to_le(); 4]);
    }

    #[test]
    fn fill_strided() {
        let mut b = vec![0u8; 8 * 2];
        let p = plan([2, 2, 1, 1], [4, 2, 0, 0], [4, 2, 0, 0]);
        fill(&mut b, 1, &[0xab, 0xcd], &p);
        let out: &[u16] = bytemuck::cast_slice(&b);
        assert_eq!(out, &[0, 0xcdab, 0, 0xcdab, 0, 0xcdab, 0, 0xcdab]);
    }
}
