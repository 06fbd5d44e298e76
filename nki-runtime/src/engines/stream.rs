//! The driver of elementwise instructions: [`Stream`] describes one, [`stream`] runs it.
//!
//! Every elementwise instruction (ALU chains, activations, selects, `iota`) runs the same way:
//! for each partition (row) of its grid, the free elements are visited in row-major order in
//! chunks of at most [`CHUNK`]; each source is converted into a chunk of fp32 (or int32) lanes
//! ([`super::lanes`]) with the model's conversions, a [`Compute`] callback turns the source
//! chunks into a result chunk, the result is combined into the destination's old value when the
//! instruction accumulates, converted to the destination's dtype and written; a per-partition
//! reduction of the results (`reduce_res`, a [`RowReduce`]) folds the chunk in the order
//! [`RowFold`] defines. Nothing is dispatched per element: free dimensions that are contiguous
//! in every operand are merged into one run ([`FreePlan`]), and the rows ahead are prefetched.
//! Sources of contiguous fp32 elements are read where they lie, and a destination of
//! contiguous fp32 elements that is not accumulated into takes the results where it lies
//! (the chunk is not copied there afterwards) unless a source read in place shares its bytes:
//! the same bits are written either way.
//! Rows that are one short run each share a chunk when the compute is lane by lane
//! ([`Stream::lanewise`]): each row's lanes are read into its part of the chunk, the compute
//! runs once, and each part is written back to its row (a `[128, 8]` ALU instruction took half
//! the time, a `[128, 128]` one 15–19 % less, `cargo bench --bench compute -- short`).
//!
//! Large instructions are split by partition halves between the calling thread and the core's
//! worker as [`super::split`] decides (when no thread can read what the other writes); each
//! half computes exactly what the serial loop computes for its rows.

use core::ops::Range;

use nki_lang::{Alu, DType, MAX_TILE_RANK};

use super::lanes::{
    Lane, Lanes, MAX_SOURCES, RowFold, Sink, Source, apply, in_place, load_lanes, store_lanes,
    width_mask,
};
use super::mems::{Mems, span};
use super::split::{RowSplit, for_rows};
use super::{CHUNK, EngineState};
use crate::cpu::Isa;
use crate::cpu::alu::Rhs;
use crate::cpu::runs::{Walk, gather_words};
use crate::operand::Loc;

/// A per-partition reduction of the results into one element per row of `sink`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct RowReduce {
    /// The reduction.
    pub op: Alu,
    /// Row `r`'s result goes to element `sink.base + r · sink.strides[0]`.
    pub sink: Sink,
}

/// An elementwise instruction, ready to stream.
pub(crate) struct Stream<'a> {
    /// The grid (the destination's dimensions).
    pub dims: [usize; MAX_TILE_RANK],
    /// The sources, in the order the compute callback receives their lanes.
    pub srcs: &'a [Source],
    /// The destination.
    pub dst: Sink,
    /// What the lanes hold.
    pub lane: Lane,
    /// `Some(op)`: the destination becomes `dst op result`.
    pub accumulate: Option<Alu>,
    /// A per-partition reduction of the results.
    pub reduce: Option<RowReduce>,
    /// Whether the compute callback gives every lane its result from that lane of each source
    /// alone, a source given as one lane counting as that lane repeated (ALU chains): short
    /// rows may then share a chunk ([`stream_rows`]).
    pub lanewise: bool,
    /// Whether each row's results are written only after every source of the row is read
    /// (kept in [`ROW_LANES`] lanes meanwhile): a destination in bytes that a source of the same
    /// row reads elsewhere in the row (an [`super::compute::Expression`] whose destination the
    /// allocator placed over a tile its folded instructions read, which their own instructions
    /// read before it was written). Rows hold at most `ROW_LANES` elements; such an
    /// instruction neither accumulates nor reduces.
    pub whole_rows: bool,
    /// Whether the compute takes a source broadcast along a middle axis as its runs
    /// repeated ([`Repeats`]) instead of gathered lanes (ALU chains).
    pub repeats: bool,
    /// The bytes of the HBM input its sources in HBM read (empty when none does: only an
    /// [`super::compute::Expression`] has such a source).
    pub hbm: &'a [u8],
}

/// How each source's lanes reach a [`Compute`]: `Some((len, times))` for a source given as runs
/// of `len` lanes each repeated `times` times in turn (`cpu::alu::Rhs::Repeat`, read where it
/// lies: RoPE's `cos`, `[B, S]` repeated over the heads of `[B, heads, S]`), `None` for lanes
/// as usual. Only a [`Stream::repeats`] instruction is given any.
pub(crate) type Repeats = [Option<(usize, usize)>; MAX_SOURCES];

/// Most elements of a row of a [`Stream::whole_rows`] instruction: a partition of the largest
/// SBUF in fp32 lanes.
pub(crate) const ROW_LANES: usize = 64 << 10;

/// The shortest run of a destination that takes the compute's results in place ([`stream_rows`]).
const IN_PLACE_RUN: usize = 64;

/// Chunks of scratch lanes a [`Compute`] is given: one per node of the longest
/// [`super::compute::Expression`].
pub(crate) const SCRATCH_CHUNKS: usize = super::compute::MAX_NODES;

/// Turns one chunk of source lanes into result lanes (`out`); called with the row
/// (partition) index, the sources' lanes and how each is given ([`Repeats`]), and
/// [`SCRATCH_CHUNKS`] chunks of scratch lanes. It writes every lane of `out` and reads none
/// (`out` may be the destination's own memory). A source that has one value along the chunk
/// (an immediate, a `[P, 1]` column) is given as a single lane ([`super::lanes::lanes_of`]).
pub(crate) type Compute<'a> =
    dyn Fn(usize, &[&[u32]], &Repeats, &mut [u32], &mut [u32]) + Sync + 'a;

/// The free dimensions after merging those contiguous in every operand: `outer` sizes (up to
/// three) and the innermost run's length, with each operand's strides.
pub(crate) struct FreePlan {
    dims: [usize; MAX_TILE_RANK - 1],
    rank: usize,
}

impl FreePlan {
    /// Merges free dimension `j` into the next one when every operand has
    /// `stride[j] == stride[j + 1] · dims[j + 1]`, and drops size-1 dimensions. Returns the
    /// merged dims and rewrites each operand's free strides to those of the merged dims (the
    /// rest zero). Works in place: a merged axis is never after the axis it is read from.
    pub(crate) fn new(
        dims: &[usize; MAX_TILE_RANK],
        strides: &mut [[isize; MAX_TILE_RANK]],
    ) -> FreePlan {
        let mut out = FreePlan {
            dims: [1; MAX_TILE_RANK - 1],
            rank: 0,
        };
        for (j, &n) in dims.iter().enumerate().skip(1) {
            if n == 1 {
                continue;
            }
            let r = out.rank;
            // The merged axis `k` of an operand is at `stride[1 + k]`; the last one is `r`.
            if r > 0 && strides.iter().all(|s| s[r] == s[j] * n as isize) {
                out.dims[r - 1] *= n;
                for s in strides.iter_mut() {
                    s[r] = s[j];
                }
            } else {
                out.dims[r] = n;
                for s in strides.iter_mut() {
                    s[r + 1] = s[j];
                }
                out.rank += 1;
            }
        }
        for s in strides.iter_mut() {
            s[1 + out.rank..].fill(0);
        }
        out
    }

    /// The index of the innermost run's stride in each operand's merged strides.
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    /// The length of every innermost run.
    pub(crate) fn inner(&self) -> usize {
        if self.rank == 0 {
            1
        } else {
            self.dims[self.rank - 1]
        }
    }

    /// Calls `f(offsets, n)` for every innermost run: `offsets[j]` is the free offset of the
    /// run's first element for operand `j`, `n` its length.
    pub(crate) fn runs(
        &self,
        strides: &[[isize; MAX_TILE_RANK]],
        mut f: impl FnMut(&[isize], usize),
    ) {
        let r = self.rank.max(1);
        let inner = if self.rank == 0 { 1 } else { self.dims[r - 1] };
        let outer = &self.dims[..r - 1];
        let mut idx = [0usize; MAX_TILE_RANK];
        let mut offs = [0isize; 8];
        let n_ops = strides.len();
        loop {
            for (o, s) in offs.iter_mut().zip(strides) {
                *o = outer
                    .iter()
                    .enumerate()
                    .map(|(k, _)| idx[k] as isize * s[1 + k])
                    .sum();
            }
            f(&offs[..n_ops], inner);
            let mut k = outer.len();
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < outer[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
    }
}

/// How many rows ahead of the one it computes a streamed instruction prefetches its operands.
///
/// An operand's rows are a partition apart, so each is a separate short run (a `[128, 512]`
/// bf16 tile is 128 runs of 16 cache lines) that the hardware prefetchers barely start on
/// before it ends: a tile that is not in cache, such as the matmul tutorial's 16 MiB
/// `result_tiles` accumulated into `[128, 512]` slice by slice, was read at the memory's
/// latency: 11–14 µs per slice on two host threads (36–40 µs on one), against 8–9 µs with three
/// rows prefetched.
const PREFETCH_ROWS: usize = 3;

/// Largest footprint in one partition that a streamed instruction prefetches per operand row
/// (wider rows are long runs that the hardware prefetchers follow).
const PREFETCH_MAX_BYTES: usize = 8 << 10;

/// The bytes each memory operand of a streamed instruction touches in a row, for prefetching
/// the rows ahead.
struct RowFootprints {
    /// Per operand (the sources, then the destination): its memory, its row-0 byte range, and
    /// its bytes from one row to the next; `None` for operands not in memory or too wide.
    spans: [Option<(Loc, isize, isize, isize)>; MAX_SOURCES + 1],
}

impl RowFootprints {
    /// The footprints of `s`'s operands, whose element strides (sources, then destination)
    /// are `strides`.
    fn new(s: &Stream<'_>, strides: &[[isize; MAX_TILE_RANK]; MAX_SOURCES + 1]) -> Self {
        let span = |loc: Loc, dtype: DType, base: isize, st: &[isize; MAX_TILE_RANK]| {
            let (lo, hi) = row_reach(&s.dims, st);
            let (lo, hi) = (base + lo, base + hi);
            let size = dtype.size() as isize;
            let bytes = (hi - lo + 1) * size;
            (matches!(loc, Loc::Sbuf | Loc::Psum) && bytes <= PREFETCH_MAX_BYTES as isize)
                .then_some((loc, lo * size, bytes, st[0] * size))
        };
        let mut spans = [None; MAX_SOURCES + 1];
        for (j, src) in s.srcs.iter().enumerate() {
            if let Source::Mem {
                loc, dtype, base, ..
            } = *src
            {
                spans[j] = span(loc, dtype, base, &strides[j]);
            }
        }
        spans[s.srcs.len()] = span(s.dst.loc, s.dst.dtype, s.dst.base, &strides[s.srcs.len()]);
        RowFootprints { spans }
    }

    /// Prefetches every operand's bytes of row `r`.
    fn prefetch(&self, mems: &Mems<'_>, r: usize) {
        for &(loc, start, bytes, row) in self.spans.iter().flatten() {
            let at = start + r as isize * row;
            if let Ok(at) = usize::try_from(at) {
                mems.region(loc).prefetch(at..at + bytes as usize);
            }
        }
    }
}

impl Stream<'_> {
    /// The destination read as a source: its old values, when the instruction accumulates.
    fn dst_as_source(&self) -> Source {
        Source::Mem {
            loc: self.dst.loc,
            dtype: self.dst.dtype,
            base: self.dst.base,
            strides: self.dst.strides,
        }
    }
}

/// The results `out[..old.len()]` combined into the destination's old values `old` with `op`
/// (`old op result`; a logical right shift of a narrow signed integer first cuts the old lanes
/// to the dtype's width), left in `out` (computed in `sum`, the two swapped).
fn accumulate_lanes(
    isa: Isa,
    s: &Stream<'_>,
    op: Alu,
    old: &mut [u32],
    out: &mut Vec<u32>,
    sum: &mut Vec<u32>,
) {
    let len = old.len();
    if op == Alu::RightShift && s.lane == Lane::I32 {
        let width = width_mask(s.dst.dtype);
        old.iter_mut().for_each(|x| *x &= width);
    }
    apply(isa, s.lane, op, old, Rhs::Run(&out[..len]), &mut sum[..len]);
    core::mem::swap(out, sum);
}

/// Streams rows `rows` of the instruction with one thread's memories and lanes.
fn stream_rows(
    isa: Isa,
    mems: &mut Mems<'_>,
    s: &Stream<'_>,
    rows: Range<usize>,
    lanes: &mut Lanes,
    compute: &Compute<'_>,
) {
    // Operand 0..n: the sources, then the destination.
    let n_src = s.srcs.len();
    let mut strides = [[0isize; MAX_TILE_RANK]; MAX_SOURCES + 1];
    for (st, src) in strides.iter_mut().zip(s.srcs) {
        *st = src.strides().unwrap_or([0; MAX_TILE_RANK]);
    }
    strides[n_src] = s.dst.strides;
    let row_strides: [isize; MAX_SOURCES + 1] = core::array::from_fn(|j| strides[j][0]);
    let ahead = RowFootprints::new(s, &strides);
    let (plan, gathered) = plan_runs(s, &mut strides);
    let inner_strides: [isize; MAX_SOURCES + 1] = core::array::from_fn(|j| {
        if plan.rank == 0 {
            0
        } else {
            strides[j][plan.rank]
        }
    });
    let uniform: [bool; MAX_SOURCES] = core::array::from_fn(|j| {
        s.srcs
            .get(j)
            .is_some_and(|src| matches!(src, Source::Splat(_)) || inner_strides[j] == 0)
    });
    // Gathered sources the compute takes as repeated runs, and the chunk length that keeps
    // every chunk at the start of their groups.
    let (repeats, step) = repeats_of(s, &gathered);
    // How each source's lanes are had, decided once: gathered, read in place (contiguous fp32
    // lanes in memory: its memory and base), or loaded.
    let in_memory: [Option<(Loc, isize)>; MAX_SOURCES] =
        core::array::from_fn(|j| match s.srcs.get(j) {
            Some(&Source::Mem {
                loc,
                dtype: DType::F32,
                base,
                ..
            }) if !gathered[j] && s.lane == Lane::F32 && inner_strides[j] == 1 => Some((loc, base)),
            _ => None,
        });
    // A destination of fp32 elements contiguous along runs of at least `IN_PLACE_RUN`, written
    // as fp32 lanes and not accumulated into, takes the compute's results in place (a
    // `Compute` writes every lane of its `out` and reads none), unless a source read in place
    // is the destination itself: its memory, else `None`. (Shorter runs save less than the
    // check costs: decode attention's predicated copies of 5-element runs ran 8 % slower.)
    let rewrites_dst = in_memory
        .iter()
        .flatten()
        .any(|&(loc, base)| (loc, base) == (s.dst.loc, s.dst.base));
    let in_place_dst = (s.lane == Lane::F32
        && !s.whole_rows
        && s.dst.dtype == DType::F32
        && matches!(s.dst.loc, Loc::Sbuf | Loc::Psum)
        && s.accumulate.is_none()
        && inner_strides[n_src] == 1
        && plan.inner() >= IN_PLACE_RUN
        && !rewrites_dst)
        .then_some(s.dst.loc);
    let Lanes {
        ins,
        out,
        old,
        sum,
        scratch,
        row: row_lanes,
        bytes,
        ..
    } = lanes;
    let end = rows.end;
    // Rows of one short run each (the NKI Library router's `[128, 128]` one-hot tiles): several
    // rows to a chunk, so that the per-chunk work (the compute's dispatch, the sources' reads
    // set up) is done once for all of them.
    let per_chunk = CHUNK / plan.inner().max(1);
    if s.lanewise
        && !s.whole_rows
        && plan.rank <= 1
        && s.reduce.is_none()
        && !gathered.contains(&true)
        && per_chunk >= 2
    {
        let n = plan.inner();
        let mut r0 = rows.start;
        // Rows below this one have been prefetched. An accumulating instruction prefetches
        // the rows of the next few past each chunk, as the loop below does row by row: its
        // destination is often an accumulator revisited after a sweep over other tiles, out
        // of cache (the matmul tutorial's `result_tiles`, `[128, 512]` slices of 16 MiB:
        // 4–6 % of the whole kernel). The others' operands are mostly fresh, and the
        // prefetches cost more than they save (the tutorials' `add` and `mamba` ran 13 % and
        // 7 % slower with them).
        let mut fetched = if s.accumulate.is_some() { r0 } else { end };
        while r0 < end {
            let r1 = (r0 + per_chunk).min(end);
            let upto = (r1 + PREFETCH_ROWS).min(end).max(fetched);
            for later in fetched.max(r1)..upto {
                ahead.prefetch(mems, later);
            }
            fetched = upto;
            let len = (r1 - r0) * n;
            for (j, src) in s.srcs.iter().enumerate() {
                for (i, r) in (r0..r1).enumerate() {
                    let seg = &mut ins[j][i * n..(i + 1) * n];
                    let row = r as isize * row_strides[j];
                    if let Some((loc, base)) = in_memory[j] {
                        seg.copy_from_slice(in_place(mems.region(loc).read(span(
                            base + row,
                            1,
                            n,
                            4,
                        ))));
                    } else if uniform[j] {
                        // One value along the row, repeated over its lanes.
                        load_lanes(isa, mems, src, s.lane, row, 0, 0, 1, bytes, seg);
                        let v = seg[0];
                        seg.fill(v);
                    } else {
                        let s_in = inner_strides[j];
                        load_lanes(isa, mems, src, s.lane, row, 0, s_in, n, bytes, seg);
                    }
                }
            }
            let inputs: [&[u32]; MAX_SOURCES] = core::array::from_fn(|j| &ins[j][..len]);
            compute(
                r0,
                &inputs[..n_src],
                &[None; MAX_SOURCES],
                &mut out[..len],
                scratch,
            );
            let s_in = inner_strides[n_src];
            if let Some(op) = s.accumulate {
                let dst = s.dst_as_source();
                for (i, r) in (r0..r1).enumerate() {
                    let d_row = r as isize * row_strides[n_src];
                    let seg = &mut old[i * n..(i + 1) * n];
                    load_lanes(isa, mems, &dst, s.lane, d_row, 0, s_in, n, bytes, seg);
                }
                accumulate_lanes(isa, s, op, &mut old[..len], out, sum);
            }
            for (i, r) in (r0..r1).enumerate() {
                let d_row = r as isize * row_strides[n_src];
                let seg = &out[i * n..(i + 1) * n];
                store_lanes(isa, mems, &s.dst, s.lane, d_row, 0, s_in, seg, bytes);
            }
            r0 = r1;
        }
        return;
    }
    for r in rows.clone() {
        let first = if r == rows.start {
            r + 1
        } else {
            r + PREFETCH_ROWS
        };
        for later in first..=(r + PREFETCH_ROWS).min(end.saturating_sub(1)) {
            ahead.prefetch(mems, later);
        }
        let mut fold = s.reduce.map(|red| RowFold::new(red.op, s.lane));
        let mut held = 0;
        plan.runs(&strides[..=n_src], |offs, n| {
            let mut done = 0;
            while done < n {
                let c = step.min(n - done);
                // Sources that already are contiguous fp32 lanes in memory are read in place.
                let mut direct: [Option<(Loc, Range<usize>)>; MAX_SOURCES] = Default::default();
                for (j, src) in s.srcs.iter().enumerate() {
                    let off = offs[j] + done as isize * inner_strides[j];
                    let row = r as isize * row_strides[j];
                    if let Some((loc, base)) = in_memory[j] {
                        direct[j] = Some((loc, span(base + row + off, 1, c, 4)));
                        continue;
                    }
                    if let Some((len, times)) = repeats[j] {
                        let m = c.div_ceil(len * times) * len;
                        direct[j] = Some(repeated_runs(s, j, row, done, m));
                        continue;
                    }
                    if gathered[j] {
                        gather_lanes(isa, mems, s, j, row, done, c, bytes, &mut ins[j]);
                        continue;
                    }
                    // A source with one value along the run (an immediate, a column) is
                    // given as that one lane.
                    let n = if uniform[j] { 1 } else { c };
                    load_lanes(
                        isa,
                        mems,
                        src,
                        s.lane,
                        row,
                        off,
                        inner_strides[j],
                        n,
                        bytes,
                        &mut ins[j],
                    );
                }
                let d_off = offs[n_src] + done as isize * inner_strides[n_src];
                let d_row = r as isize * row_strides[n_src];
                // The results straight into a destination of contiguous fp32 elements, when
                // no source read in place shares a byte with it.
                let written = in_place_dst.and_then(|loc| {
                    let w = span(s.dst.base + d_row + d_off, 1, c, 4);
                    mems.write_with(loc, w, &direct)
                });
                if let Some((dst, read)) = written {
                    let inputs: [&[u32]; MAX_SOURCES] = core::array::from_fn(|j| match read[j] {
                        Some(bytes) => in_place(bytes),
                        None if uniform[j] => &ins[j][..1],
                        None => &ins[j][..c],
                    });
                    let results: &mut [u32] = bytemuck::cast_slice_mut(dst);
                    compute(r, &inputs[..n_src], &repeats, results, scratch);
                    if let Some(f) = fold.as_mut() {
                        f.fold(isa, s.lane, results);
                    }
                    done += c;
                    continue;
                }
                let inputs: [&[u32]; MAX_SOURCES] = core::array::from_fn(|j| match &direct[j] {
                    Some((loc, range)) => in_place(mems.region(*loc).read(range.clone())),
                    None if uniform[j] => &ins[j][..1],
                    None => &ins[j][..c],
                });
                if s.whole_rows {
                    // Into the row's lanes, written once the row is read.
                    compute(
                        r,
                        &inputs[..n_src],
                        &repeats,
                        &mut row_lanes[held..held + c],
                        scratch,
                    );
                    held += c;
                    done += c;
                    continue;
                }
                compute(r, &inputs[..n_src], &repeats, &mut out[..c], scratch);
                if let Some(op) = s.accumulate {
                    let dst = s.dst_as_source();
                    let s_in = inner_strides[n_src];
                    load_lanes(isa, mems, &dst, s.lane, d_row, d_off, s_in, c, bytes, old);
                    accumulate_lanes(isa, s, op, &mut old[..c], out, sum);
                }
                if let Some(f) = fold.as_mut() {
                    f.fold(isa, s.lane, &out[..c]);
                }
                let s_in = inner_strides[n_src];
                store_lanes(
                    isa,
                    mems,
                    &s.dst,
                    s.lane,
                    d_row,
                    d_off,
                    s_in,
                    &out[..c],
                    bytes,
                );
                done += c;
            }
        });
        if s.whole_rows {
            // The row's results, run by run, now that its sources are read.
            let d_row = r as isize * row_strides[n_src];
            let s_in = inner_strides[n_src];
            let mut from = 0;
            plan.runs(&strides[..=n_src], |offs, n| {
                let lanes = &row_lanes[from..from + n];
                store_lanes(
                    isa,
                    mems,
                    &s.dst,
                    s.lane,
                    d_row,
                    offs[n_src],
                    s_in,
                    lanes,
                    bytes,
                );
                from += n;
            });
        }
        if let (Some(f), Some(red)) = (fold, s.reduce) {
            let v = f.finish(isa, s.lane);
            let row = r as isize * red.sink.strides[0];
            store_lanes(isa, mems, &red.sink, s.lane, row, 0, 1, &[v], bytes);
        }
    }
}

/// The runs of `s`'s rows, from its operands' element strides (sources, then destination;
/// rewritten to the merged dimensions' strides), and which sources are gathered.
///
/// A source with a broadcast axis (stride 0) between axes it reads, such as RoPE's `cos`
/// repeated over the heads, cuts every run at its own contiguous length (64 elements there,
/// each run a dispatch of its own). When every other operand merges all the free axes into
/// one run at least twice as long, that source is gathered instead: its lanes for each chunk
/// are loaded run by run from its own pattern ([`gather_lanes`]), and the instruction streams
/// the long runs. The lanes hold the same values either way.
fn plan_runs(
    s: &Stream<'_>,
    strides: &mut [[isize; MAX_TILE_RANK]; MAX_SOURCES + 1],
) -> (FreePlan, [bool; MAX_SOURCES]) {
    let n_src = s.srcs.len();
    let original = *strides;
    let plan = FreePlan::new(&s.dims, &mut strides[..=n_src]);
    let mut gathered = [false; MAX_SOURCES];
    if plan.inner() >= CHUNK {
        return (plan, gathered);
    }
    let planned = *strides;
    let Some(last) = innermost_axis(&s.dims) else {
        return (plan, gathered);
    };
    for (j, src) in s.srcs.iter().enumerate() {
        gathered[j] = matches!(src, Source::Mem { .. })
            && original[j][last] != 0
            && (1..last).any(|k| s.dims[k] > 1 && original[j][k] == 0);
    }
    if !gathered.contains(&true) {
        return (plan, gathered);
    }
    // The others alone; a gathered source follows the destination's strides (unused).
    let mut others = original;
    for (st, &g) in others.iter_mut().zip(&gathered) {
        if g {
            *st = original[n_src];
        }
    }
    let merged = FreePlan::new(&s.dims, &mut others[..=n_src]);
    if merged.rank == 1 && merged.inner() >= 2 * plan.inner() {
        *strides = others;
        (merged, gathered)
    } else {
        *strides = planned;
        (plan, [false; MAX_SOURCES])
    }
}

/// The innermost free axis of more than one element of a grid, if any.
fn innermost_axis(dims: &[usize; MAX_TILE_RANK]) -> Option<usize> {
    (1..MAX_TILE_RANK).rev().find(|&k| dims[k] > 1)
}

/// The sources of `s` among the gathered ones given as repeated runs ([`Repeats`]), and the
/// chunk length: a multiple of every such source's group (`len · times` lanes), so that each
/// chunk of the row's one run starts a group (`CHUNK` when there is none). A gathered fp32
/// source on fp32 lanes qualifies when its innermost axis is contiguous, the axis outside
/// it is the broadcast one, and the axes outside that step through whole runs one after the
/// other (the runs of the row are contiguous).
fn repeats_of(s: &Stream<'_>, gathered: &[bool; MAX_SOURCES]) -> (Repeats, usize) {
    let mut out = [None; MAX_SOURCES];
    if !s.repeats || s.lane != Lane::F32 {
        return (out, CHUNK);
    }
    let mut group = 1usize;
    for (j, src) in s.srcs.iter().enumerate() {
        let Source::Mem {
            dtype: DType::F32,
            strides,
            ..
        } = *src
        else {
            continue;
        };
        if !gathered[j] {
            continue;
        }
        // The free axes of more than one element, innermost first.
        let mut axes = (1..MAX_TILE_RANK)
            .rev()
            .filter(|&k| s.dims[k] > 1)
            .map(|k| (s.dims[k], strides[k]));
        let (Some((len, 1)), Some((times, 0))) = (axes.next(), axes.next()) else {
            continue;
        };
        let mut next = len as isize;
        let mut whole = true;
        for (d, st) in axes {
            whole &= st == next;
            next = next.saturating_mul(d as isize);
        }
        let g = len * times;
        let lcm = group / gcd(group, g) * g;
        if whole && lcm <= CHUNK {
            out[j] = Some((len, times));
            group = lcm;
        }
    }
    (out, CHUNK / group * group)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The bytes of the `m` elements of source `j` of `s` from the one of element `e0` of a row
/// (`row`: the row's element offset), a repeated source's runs for the chunk at `e0`.
fn repeated_runs(s: &Stream<'_>, j: usize, row: isize, e0: usize, m: usize) -> (Loc, Range<usize>) {
    let Some(&Source::Mem {
        loc, base, strides, ..
    }) = s.srcs.get(j)
    else {
        return (Loc::Sbuf, 0..0);
    };
    let idx = free_index(&s.dims, e0);
    let off: isize = (1..MAX_TILE_RANK)
        .map(|k| idx[k] as isize * strides[k])
        .sum();
    (loc, span(base + row + off, 1, m, 4))
}

/// The lowest and highest element offsets, from a row's first element, that an operand of
/// element strides `st` reaches over the free dimensions of a grid `dims`.
fn row_reach(dims: &[usize; MAX_TILE_RANK], st: &[isize; MAX_TILE_RANK]) -> (isize, isize) {
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&d, &x) in dims.iter().zip(st).skip(1) {
        let reach = (d.max(1) as isize - 1) * x;
        lo += reach.min(0);
        hi += reach.max(0);
    }
    (lo, hi)
}

/// The index along each free dimension of a grid `dims` of its element `e` in row-major order.
fn free_index(dims: &[usize; MAX_TILE_RANK], e: usize) -> [usize; MAX_TILE_RANK] {
    let mut idx = [0usize; MAX_TILE_RANK];
    let mut rest = e;
    for k in (1..MAX_TILE_RANK).rev() {
        let d = dims[k].max(1);
        idx[k] = rest % d;
        rest /= d;
    }
    idx
}

/// Loads the lanes of source `j` of `s` for elements `e0..e0 + n` of a row (`row`: the row's
/// element offset), in the row-major order of the grid's free dimensions, one contiguous run
/// of its innermost axis at a time ([`plan_runs`]).
#[allow(clippy::too_many_arguments)]
fn gather_lanes(
    isa: Isa,
    mems: &Mems<'_>,
    s: &Stream<'_>,
    j: usize,
    row: isize,
    e0: usize,
    n: usize,
    bytes: &mut [u8],
    out: &mut [u32],
) {
    let src = &s.srcs[j];
    let Source::Mem { strides, .. } = *src else {
        return;
    };
    let mut idx = free_index(&s.dims, e0);
    // A gathered source has one ([`plan_runs`]).
    let last = innermost_axis(&s.dims).unwrap_or(MAX_TILE_RANK - 1);
    // fp32 lanes of contiguous fp32 runs (RoPE's `cos` and `sin`): the words of the row's
    // footprint read once, and its runs copied straight in one loop of the host's path.
    if let Source::Mem {
        loc,
        dtype: DType::F32,
        base,
        ..
    } = *src
        && s.lane == Lane::F32
        && strides[last] == 1
    {
        let (lo, hi) = row_reach(&s.dims, &strides);
        let words =
            in_place(
                mems.region(loc)
                    .read(span(base + row + lo, 1, (hi - lo + 1) as usize, 4)),
            );
        let walk = Walk {
            dims: s.dims,
            strides,
            idx,
            last,
            origin: -lo,
        };
        gather_words(isa, &mut out[..n], words, &walk);
        return;
    }
    let mut done = 0;
    while done < n {
        let run = (s.dims[last].max(1) - idx[last]).min(n - done);
        let off: isize = (1..MAX_TILE_RANK)
            .map(|k| idx[k] as isize * strides[k])
            .sum();
        load_lanes(
            isa,
            mems,
            src,
            s.lane,
            row,
            off,
            strides[last],
            run,
            bytes,
            &mut out[done..],
        );
        done += run;
        // The next run: the innermost axis wraps, the ones before it carry.
        idx[last] += run;
        let mut k = last;
        while k > 1 && idx[k] >= s.dims[k].max(1) {
            idx[k] = 0;
            k -= 1;
            idx[k] += 1;
        }
    }
}

/// The byte columns of SBUF's partitions that `s` writes (its destination over the grid, a
/// reduction's one element per row), when known (`Sbuf::columns`).
fn sbuf_columns(e: &EngineState, s: &Stream<'_>) -> Option<Range<usize>> {
    let mut one_per_row = [1; MAX_TILE_RANK];
    one_per_row[0] = s.dims[0];
    let writes = [
        Some((&s.dst, &s.dims)),
        s.reduce.as_ref().map(|r| (&r.sink, &one_per_row)),
    ];
    let mut cols: Option<Range<usize>> = None;
    for (sink, dims) in writes.into_iter().flatten() {
        if sink.loc != Loc::Sbuf {
            continue;
        }
        let c = e
            .sbuf
            .columns(sink.dtype.size() as usize, sink.base, &sink.strides, dims)?;
        cols = Some(match cols {
            Some(u) => u.start.min(c.start)..u.end.max(c.end),
            None => c,
        });
    }
    Some(cols.unwrap_or(0..0))
}

/// Runs a streamed instruction, on two threads when it is large and safe to split.
pub(crate) fn stream(e: &mut EngineState, s: &Stream<'_>, compute: &Compute<'_>) {
    let mut writes = [s.dst; 2];
    let n = match s.reduce {
        Some(r) => {
            writes[1] = r.sink;
            2
        }
        None => 1,
    };
    let split = RowSplit {
        rows: s.dims[0],
        elems: s.dims.iter().product(),
        writes: &writes[..n],
        reads: s.srcs,
        sbuf_columns: sbuf_columns(e, s),
        hbm: s.hbm,
    };
    for_rows(e, &split, &|isa, mems, rows, lanes| {
        stream_rows(isa, mems, s, rows, lanes, compute)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_plans_merge_contiguous_dims() {
        let dims = [4, 2, 3, 5, 1];
        let mut st = [[100, 15, 5, 1, 0], [0, 0, 0, 0, 0]];
        let p = FreePlan::new(&dims, &mut st);
        assert_eq!(&p.dims[..p.rank], &[30]);
        assert_eq!(st[0][1], 1);
        let mut st = [[100, 16, 5, 1, 0], [50, 15, 5, 1, 0]];
        let p = FreePlan::new(&dims, &mut st);
        assert_eq!(&p.dims[..p.rank], &[2, 15]);
        assert_eq!((st[0][1], st[0][2]), (16, 1));
        let mut runs = Vec::new();
        p.runs(&st, |o, n| runs.push((o.to_vec(), n)));
        assert_eq!(runs, [(vec![0, 0], 15), (vec![16, 15], 15)]);
    }
}
