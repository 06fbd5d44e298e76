//! The Vector engine's reductions and scans: `tensor_reduce`, `tensor_tensor_scan`,
//! `bn_stats` and `bn_aggr`.
//!
//! A reduction's order is [`RowFold`]'s: the values of one output element, in row-major order
//! of the reduced axes, are folded into 16 partials and the partials combined pairwise. A scan
//! is sequential along each partition's free elements in row-major order.
//!
//! `tensor_reduce` computes that order in one of two ways, with the same bits:
//!
//! - **Across output elements** ([`fold_across`]), when the reduced axes' innermost run is
//!   short next to the number of output elements (pooling windows, reductions over outer axes):
//!   a batch of output elements at a time, value `i` of every element of the batch is gathered
//!   into one lane array and combined into partial array `i mod 16` with one whole-array ALU
//!   routine; then the 16 partial arrays combine pairwise as [`RowFold::finish`] combines single
//!   partials. A partial that received no value (fewer than 16 values) holds a constant (the
//!   identity, or what combining identities made of it); combining a partial with such a
//!   constant is skipped where it provably leaves every value's bits unchanged ([`neutral`]),
//!   and so is the first step `identity op value` where it gives the value itself
//!   ([`transparent`]).
//! - **One output element at a time** ([`fold_each`]), when the reduced values lie in long
//!   runs (row sums): [`RowFold`] over each run, read in place when it is contiguous fp32.
//!
//! Both write a batch of results at once (negated, accumulated, converted, scattered). When the
//! destination may overlap the source, or may repeat an element while accumulating, the batch
//! is one element, so that each element is read and written in the order of the definition.

use nki_lang::{Alu, AluClass, DType, MAX_TILE_RANK};

use super::access::footprint;
use super::lanes::{
    Lane, RowFold, Runs, Sink, Source, apply_assign, combine, contiguous_lanes, gather_lanes,
    identity_bits, load_lanes, scatter_lanes, store_lanes,
};
use super::mems::Mems;
use super::split::{RowSplit, for_rows, rows_independent};
use super::stream::FreePlan;
use super::{CHUNK, EngineState};
use crate::cpu::Isa;
use crate::cpu::alu::{self, Rhs};
use crate::operand::{Operands, Resolved};

/// Output elements per batch of `tensor_reduce`.
const BATCH: usize = 256;

/// A batch of output elements of one partition, as runs of the kept axes' innermost merged
/// dimension: run `j` has `lens[j]` elements, its source values start at free offset `src[j]`
/// (stride `strides[0]` between elements) and its results go from `dst[j]` (stride
/// `strides[1]`).
struct Batch {
    src: [isize; BATCH],
    dst: [isize; BATCH],
    lens: [usize; BATCH],
    runs: usize,
    n: usize,
    strides: [isize; 2],
    src_bounds: (isize, isize),
    dst_bounds: (isize, isize),
}

impl Batch {
    fn new(strides: [isize; 2]) -> Batch {
        Batch {
            src: [0; BATCH],
            dst: [0; BATCH],
            lens: [0; BATCH],
            runs: 0,
            n: 0,
            strides,
            src_bounds: (isize::MAX, isize::MIN),
            dst_bounds: (isize::MAX, isize::MIN),
        }
    }

    /// Appends a run of `len ≥ 1` elements (at most the room left).
    fn push(&mut self, src: isize, dst: isize, len: usize) {
        self.src[self.runs] = src;
        self.dst[self.runs] = dst;
        self.lens[self.runs] = len;
        self.runs += 1;
        self.n += len;
        let widen = |(lo, hi): (isize, isize), first: isize, stride: isize| {
            let last = first + stride * (len as isize - 1);
            (lo.min(first.min(last)), hi.max(first.max(last)))
        };
        self.src_bounds = widen(self.src_bounds, src, self.strides[0]);
        self.dst_bounds = widen(self.dst_bounds, dst, self.strides[1]);
    }

    fn clear(&mut self) {
        self.runs = 0;
        self.n = 0;
        self.src_bounds = (isize::MAX, isize::MIN);
        self.dst_bounds = (isize::MAX, isize::MIN);
    }

    /// The source elements of the batch (each output element's first value).
    fn src_runs(&self) -> Runs<'_> {
        Runs {
            starts: &self.src[..self.runs],
            lens: &self.lens[..self.runs],
            stride: self.strides[0],
            bounds: self.src_bounds,
        }
    }

    /// The destination elements of the batch.
    fn dst_runs(&self) -> Runs<'_> {
        Runs {
            starts: &self.dst[..self.runs],
            lens: &self.lens[..self.runs],
            stride: self.strides[1],
            bounds: self.dst_bounds,
        }
    }
}

/// Whether `identity op v` is `v` for every value `v` the fold can meet, so that the first step
/// into each partial can be skipped: `add`, `multiply`, `maximum`, `minimum` on fp32 lanes give
/// `v` exactly except that a NaN becomes the canonical NaN, and with `m ≥ 2` values the final
/// combination of partials 0 and 1 is computed and makes any NaN that reached it canonical
/// (NaN is absorbing for these operations); the bitwise operations on integer lanes give `v`
/// exactly.
fn transparent(op: Alu, lane: Lane, m: usize) -> bool {
    match lane {
        Lane::F32 => m >= 2 && matches!(op, Alu::Add | Alu::Multiply | Alu::Max | Alu::Min),
        Lane::I32 => matches!(op, Alu::BitwiseAnd | Alu::BitwiseOr | Alu::BitwiseXor),
    }
}

/// Whether `x op a` is `x`, bit for bit, for every value `x` a partial can hold, so that
/// combining a partial with an empty partial holding `a` can be skipped. fp32 lanes: `x + (−0)`,
/// `x − (+0)`, `x · 1`, `maximum(x, −∞)`, `minimum(x, +∞)` are `x` for every non-NaN `x` (a NaN
/// partial keeps its NaN, made canonical by a later step as in [`transparent`], or already
/// canonical when the first step was computed); the logical operations' partials are 0.0 or 1.0
/// (the first step is always computed for them), which `and 1`, `or 0`, `xor 0` keep. Integer
/// lanes: `and −1`, `or 0`, `xor 0`.
fn neutral(op: Alu, lane: Lane, a: u32) -> bool {
    let f = |x: f32| x.to_bits();
    match (lane, op) {
        (Lane::F32, Alu::Add) => a == f(-0.0),
        (Lane::F32, Alu::Subtract) => a == f(0.0),
        (Lane::F32, Alu::Multiply | Alu::LogicalAnd) => a == f(1.0),
        (Lane::F32, Alu::Max) => a == f(f32::NEG_INFINITY),
        (Lane::F32, Alu::Min) => a == f(f32::INFINITY),
        (Lane::F32, Alu::LogicalOr | Alu::LogicalXor) => a == f(0.0),
        (Lane::I32, Alu::BitwiseAnd) => a == u32::MAX,
        (Lane::I32, Alu::BitwiseOr | Alu::BitwiseXor) => a == 0,
        _ => false,
    }
}

/// Whether writing the destination of some row could change what the source of the same row
/// reads (rows run in order, so only a row's own reads and writes can interleave differently).
fn may_overlap(src: &Resolved, dst: &Resolved, sbuf_stride: usize) -> bool {
    match (footprint(src, sbuf_stride), footprint(dst, sbuf_stride)) {
        (Some((a, pa, a0, a1)), Some((b, pb, b0, b1))) if a == b => match (pa, pb) {
            (Some(pa), Some(pb)) => pa == pb && a0 < b1 && b0 < a1,
            _ => true,
        },
        _ => false,
    }
}

/// Whether distinct elements of `dims` (free dims; the partition stride is assumed to keep
/// rows apart) map to distinct offsets with `strides`: sorted by stride, each stride passes the
/// reach of the smaller ones (a sufficient condition).
fn distinct(dims: &[usize; MAX_TILE_RANK], strides: &[isize; MAX_TILE_RANK]) -> bool {
    let mut used: [(isize, usize); MAX_TILE_RANK] = [(0, 1); MAX_TILE_RANK];
    for j in 1..MAX_TILE_RANK {
        used[j] = (strides[j].abs(), dims[j]);
    }
    used[1..].sort_unstable();
    let mut reach = 0isize;
    for &(s, n) in &used[1..] {
        if n <= 1 {
            continue;
        }
        if s <= reach {
            return false;
        }
        reach += s * (n as isize - 1);
    }
    true
}

/// `tensor_reduce`: for each partition and each position of the kept axes, `op` over the
/// reduced axes (bit `j` of `axes` = free axis `j`), negated when asked, combined into the
/// destination with `accumulate`.
pub(crate) fn tensor_reduce(
    e: &mut EngineState,
    ops: &Operands,
    op: Alu,
    axes: u8,
    negate: bool,
    accumulate: Option<Alu>,
) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let grid = src.dims;
    let lane = if op.class() == AluClass::Bitvec {
        Lane::I32
    } else {
        Lane::F32
    };
    let reduced = |j: usize| j > 0 && axes >> (j - 1) & 1 == 1;
    // The destination's strides over the kept axes (0 along the reduced ones).
    let mut kept_grid = grid;
    let mut red_grid = grid;
    for j in 1..MAX_TILE_RANK {
        if reduced(j) {
            kept_grid[j] = 1;
        } else {
            red_grid[j] = 1;
        }
    }
    let dst_strides = dst.strides_on(&kept_grid);
    let src_strides = src.pattern.strides;
    let source = Source::of(src, lane, &grid);
    let sink = Sink {
        strides: dst_strides,
        ..Sink::of(dst, &dst.dims)
    };
    // Element by element when a write could change a later read (of the source, or of the
    // destination's old value when accumulating).
    let overlaps = may_overlap(src, dst, e.sbuf.partition_stride());
    let repeats = accumulate.is_some() && !distinct(&kept_grid, &dst_strides);
    let batch = if overlaps || repeats { 1 } else { BATCH };
    let split = RowSplit {
        rows: grid[0],
        elems: grid.iter().product(),
        writes: &[sink],
        reads: &[source],
        sbuf_columns: None,
        hbm: &[],
    };
    for_rows(e, &split, &|isa, mems, rows, lanes| {
        let mut keep_strides = [src_strides, dst_strides];
        let keep = FreePlan::new(&kept_grid, &mut keep_strides);
        let mut red_strides = [src_strides];
        let red = FreePlan::new(&red_grid, &mut red_strides);
        let k_in = keep_strides.map(|s| s[keep.rank()]);
        let plan = Reduction {
            isa,
            op,
            lane,
            source,
            red: &red,
            red_strides: &red_strides[0],
            m: red_grid[1..].iter().product(),
        };
        // Across output elements when the reduced values' runs are short next to a batch.
        let kept: usize = kept_grid[1..].iter().product();
        let run = red.inner();
        let across = run <= 16 || 2 * run <= kept.min(batch);
        let (buf, bytes) = lanes.scratch();
        let mut lanes = BatchLanes {
            parts: [[0u32; BATCH]; 16],
            res: [0u32; BATCH],
            tmp: [0u32; BATCH],
        };
        if kept == 1 && batch == BATCH && accumulate.is_none() {
            // One output element per partition (a row's reduction): the batch runs across
            // partitions, so that the results are negated and written once per batch.
            let mut b = Batch::new([src_strides[0], dst_strides[0]]);
            let mut r = rows.start;
            while r < rows.end {
                let n = BATCH.min(rows.end - r);
                b.push(r as isize * src_strides[0], r as isize * dst_strides[0], n);
                let out = &mut lanes.res[..n];
                plan.fold_each(mems, 0, &b, buf, bytes, out);
                if negate {
                    negate_lanes(isa, lane, out);
                }
                scatter_lanes(isa, mems, &sink, lane, 0, &b.dst_runs(), out, bytes);
                b.clear();
                r += n;
            }
            return;
        }
        let mut b = Batch::new(k_in);
        for r in rows {
            let src_row = r as isize * src_strides[0];
            let dst_row = r as isize * dst_strides[0];
            let mut flush = |b: &mut Batch, mems: &mut Mems<'_>| {
                let c = b.n;
                let out = if across {
                    plan.fold_across(mems, src_row, b, &mut lanes, bytes)
                } else {
                    plan.fold_each(mems, src_row, b, buf, bytes, &mut lanes.res[..c]);
                    &mut lanes.res[..c]
                };
                if negate {
                    negate_lanes(isa, lane, out);
                }
                if let Some(acc) = accumulate {
                    let old = Source::Mem {
                        loc: sink.loc,
                        dtype: sink.dtype,
                        base: sink.base,
                        strides: sink.strides,
                    };
                    let o = &mut buf[..c];
                    gather_lanes(isa, mems, &old, lane, dst_row, &b.dst_runs(), 0, bytes, o);
                    apply_assign(isa, lane, acc, out, Rhs::Run(o), true);
                }
                scatter_lanes(isa, mems, &sink, lane, dst_row, &b.dst_runs(), out, bytes);
                b.clear();
            };
            keep.runs(&keep_strides, |offs, n| {
                let mut i = 0;
                while i < n {
                    let take = (batch - b.n).min(n - i);
                    b.push(
                        offs[0] + i as isize * k_in[0],
                        offs[1] + i as isize * k_in[1],
                        take,
                    );
                    i += take;
                    if b.n == batch {
                        flush(&mut b, mems);
                    }
                }
            });
            if b.n > 0 {
                flush(&mut b, mems);
            }
        }
    });
}

/// `tensor_reduce`'s `negate`: fp32 lanes multiplied by −1 (the ALU's `multiply`), integer
/// lanes negated with wrap-around.
fn negate_lanes(isa: Isa, lane: Lane, out: &mut [u32]) {
    match lane {
        Lane::F32 => apply_assign(
            isa,
            lane,
            Alu::Multiply,
            out,
            Rhs::Splat((-1.0f32).to_bits()),
            false,
        ),
        Lane::I32 => out
            .iter_mut()
            .for_each(|v| *v = (*v as i32).wrapping_neg() as u32),
    }
}

/// Lanes of a batch folded across its elements: the 16 partials, the result when no value is
/// folded, the values being folded in.
struct BatchLanes {
    parts: [[u32; BATCH]; 16],
    res: [u32; BATCH],
    tmp: [u32; BATCH],
}

/// One thread's view of a `tensor_reduce`: the operation, the source, and the reduced axes'
/// plan (`m` values per output element).
struct Reduction<'a> {
    isa: Isa,
    op: Alu,
    lane: Lane,
    source: Source,
    red: &'a FreePlan,
    red_strides: &'a [isize; MAX_TILE_RANK],
    m: usize,
}

impl Reduction<'_> {
    /// The stride of the reduced values' innermost run.
    fn run_stride(&self) -> isize {
        self.red_strides[self.red.rank()]
    }

    /// The results of the batch's elements, folded across elements (module docs): value `i` of
    /// each element into `parts[i mod 16]`, then the pairwise combination. Returns the result
    /// lanes (in `parts[0]`, or in `res` when no value is folded).
    fn fold_across<'p>(
        &self,
        mems: &Mems<'_>,
        src_row: isize,
        b: &Batch,
        lanes: &'p mut BatchLanes,
        bytes: &mut [u8],
    ) -> &'p mut [u32] {
        let BatchLanes { parts, res, tmp } = lanes;
        let (isa, op, lane, c) = (self.isa, self.op, self.lane, b.n);
        let id = identity_bits(op, lane);
        let skip_first = transparent(op, lane, self.m);
        let r_in = self.run_stride();
        let runs = b.src_runs();
        let mut i = 0usize;
        self.red
            .runs(core::slice::from_ref(self.red_strides), |roffs, n| {
                for j in 0..n {
                    let add = roffs[0] + j as isize * r_in;
                    let l = i % 16;
                    if i >= 16
                        && let Some(v) =
                            contiguous_lanes(mems, &self.source, lane, src_row, &runs, add)
                    {
                        // Contiguous fp32 values are folded where they are.
                        apply_assign(isa, lane, op, &mut parts[l][..c], Rhs::Run(v), false);
                        i += 1;
                        continue;
                    }
                    let into = if i < 16 {
                        &mut parts[l][..c]
                    } else {
                        &mut tmp[..c]
                    };
                    gather_lanes(
                        isa,
                        mems,
                        &self.source,
                        lane,
                        src_row,
                        &runs,
                        add,
                        bytes,
                        into,
                    );
                    if i >= 16 {
                        apply_assign(
                            isa,
                            lane,
                            op,
                            &mut parts[l][..c],
                            Rhs::Run(&tmp[..c]),
                            false,
                        );
                    } else if !skip_first {
                        apply_assign(isa, lane, op, &mut parts[l][..c], Rhs::Splat(id), true);
                    }
                    i += 1;
                }
            });
        // Partials `0..present` hold values; the others all hold `absent`.
        let present = i.min(16);
        let mut absent = id;
        for w in [8, 4, 2, 1] {
            for l in 0..w.min(present) {
                if l + w < present {
                    let (lo, hi) = parts.split_at_mut(l + w);
                    apply_assign(isa, lane, op, &mut lo[l][..c], Rhs::Run(&hi[0][..c]), false);
                } else if !neutral(op, lane, absent) {
                    apply_assign(isa, lane, op, &mut parts[l][..c], Rhs::Splat(absent), false);
                }
            }
            absent = combine(lane, op, absent, absent);
        }
        if present == 0 {
            res[..c].fill(absent);
            return &mut res[..c];
        }
        &mut parts[0][..c]
    }

    /// The results of the batch's elements, one [`RowFold`] per element, into `out`.
    fn fold_each(
        &self,
        mems: &Mems<'_>,
        src_row: isize,
        b: &Batch,
        buf: &mut [u32],
        bytes: &mut [u8],
        out: &mut [u32],
    ) {
        let (isa, lane) = (self.isa, self.lane);
        let r_in = self.run_stride();
        let mut offs = [0isize; BATCH];
        let mut k = 0;
        for (&start, &len) in b.src[..b.runs].iter().zip(&b.lens) {
            for j in 0..len {
                offs[k] = start + j as isize * b.strides[0];
                k += 1;
            }
        }
        // Each element's values one contiguous fp32 run: folded where they are, in one call.
        if let Source::Mem {
            loc,
            dtype: DType::F32,
            base,
            ..
        } = self.source
            && lane == Lane::F32
            && self.red.rank() <= 1
            && self.red.inner() == self.m
            && r_in == 1
        {
            for (o, &s_off) in out.iter_mut().zip(&offs[..b.n]) {
                let at = (base + src_row + s_off) as usize * 4;
                let mut fold = RowFold::new(self.op, lane);
                fold.fold(
                    isa,
                    lane,
                    bytemuck::cast_slice(mems.read(loc, at..at + self.m * 4)),
                );
                *o = fold.finish(isa, lane);
            }
            return;
        }
        for (o, &s_off) in out.iter_mut().zip(&offs[..b.n]) {
            let mut fold = RowFold::new(self.op, lane);
            self.red
                .runs(core::slice::from_ref(self.red_strides), |roffs, m| {
                    let mut done = 0;
                    while done < m {
                        let c = CHUNK.min(m - done);
                        let off = s_off + roffs[0] + done as isize * r_in;
                        match self.source {
                            // Contiguous fp32 values are folded where they are.
                            Source::Mem {
                                loc,
                                dtype: DType::F32,
                                base,
                                ..
                            } if lane == Lane::F32 && r_in == 1 => {
                                let at = (base + src_row + off) as usize * 4;
                                let values = mems.read(loc, at..at + c * 4);
                                fold.fold(isa, lane, bytemuck::cast_slice(values));
                            }
                            Source::Mem { .. } | Source::Splat(_) | Source::Expr { .. } => {
                                load_lanes(
                                    isa,
                                    mems,
                                    &self.source,
                                    lane,
                                    src_row,
                                    off,
                                    r_in,
                                    c,
                                    bytes,
                                    buf,
                                );
                                fold.fold(isa, lane, &buf[..c]);
                            }
                        }
                        done += c;
                    }
                });
            *o = fold.finish(isa, lane);
        }
    }
}

/// `tensor_tensor_scan`: along each partition's free elements in row-major order,
/// `r = (src0[i] op0 r) op1 src1[i]` from `r = initial`, each step rounded to fp32.
pub(crate) fn scan(
    e: &mut EngineState,
    ops: &Operands,
    op: [Alu; 2],
    rev: u8,
    accumulate: Option<Alu>,
) {
    let dst = ops.get(0);
    let grid = dst.dims;
    let srcs = [
        Source::of(ops.get(1), Lane::F32, &grid),
        Source::of(ops.get(2), Lane::F32, &grid),
        Source::of(ops.get(3), Lane::F32, &grid),
    ];
    let sink = Sink::of(dst, &grid);
    let split = RowSplit {
        rows: grid[0],
        elems: grid.iter().product(),
        writes: &[sink],
        reads: &srcs,
        sbuf_columns: None,
        hbm: &[],
    };
    // Interleaving rows moves a row's reads before an earlier row's writes.
    let interleave = rows_independent(&split, e.sbuf.partition_stride());
    for_rows(e, &split, &|isa, mems, rows, lanes| {
        let mut first = rows.start;
        while first < rows.end {
            if interleave && rows.end - first >= SCAN_ROWS {
                scan_group::<SCAN_ROWS, { CHUNK / SCAN_ROWS }>(
                    isa, mems, lanes, &grid, &srcs, &sink, first, op, rev, accumulate,
                );
                first += SCAN_ROWS;
            } else {
                scan_group::<1, CHUNK>(
                    isa, mems, lanes, &grid, &srcs, &sink, first, op, rev, accumulate,
                );
                first += 1;
            }
        }
    });
}

/// Rows `tensor_tensor_scan` runs at once ([`alu::scan_rows`]): each row is one dependency chain
/// of two operations, so 8 of them keep a host core's floating-point units busy.
const SCAN_ROWS: usize = 8;

/// [`scan`] of rows `first..first + G`, their chains interleaved, through the scratch of
/// `lanes`: row `g`'s chunk of at most `S` elements at lanes `g·S ..` of each buffer.
#[allow(clippy::too_many_arguments)]
fn scan_group<const G: usize, const S: usize>(
    isa: Isa,
    mems: &mut Mems<'_>,
    lanes: &mut super::lanes::Lanes,
    grid: &[usize; MAX_TILE_RANK],
    srcs: &[Source; 3],
    sink: &Sink,
    first: usize,
    op: [Alu; 2],
    rev: u8,
    accumulate: Option<Alu>,
) {
    let strides = |s: &Source| match *s {
        Source::Mem { strides, .. } => strides,
        Source::Splat(_) | Source::Expr { .. } => [0; MAX_TILE_RANK],
    };
    let mut st = [strides(&srcs[0]), strides(&srcs[1]), sink.strides];
    let row_st = st.map(|s| s[0]);
    let plan = FreePlan::new(grid, &mut st);
    let s_in = st.map(|s| s[plan.rank()]);
    let (a, b, out, old, bytes) = lanes.scan_scratch();
    let lanes_of = |g: usize| g * S..(g + 1) * S;
    let mut acc = [0.0f32; G];
    for (g, acc) in acc.iter_mut().enumerate() {
        let r = (first + g) as isize;
        let at = r * strides(&srcs[2])[0];
        load_lanes(
            isa,
            mems,
            &srcs[2],
            Lane::F32,
            at,
            0,
            0,
            1,
            bytes,
            &mut a[lanes_of(g)],
        );
        *acc = f32::from_bits(a[g * S]);
    }
    let row = |g: usize, j: usize| (first + g) as isize * row_st[j];
    plan.runs(&st, |offs, n| {
        let mut done = 0;
        while done < n {
            let c = S.min(n - done);
            let at = |j: usize| offs[j] + done as isize * s_in[j];
            for g in 0..G {
                let (ga, gb) = (&mut a[lanes_of(g)], &mut b[lanes_of(g)]);
                load_lanes(
                    isa,
                    mems,
                    &srcs[0],
                    Lane::F32,
                    row(g, 0),
                    at(0),
                    s_in[0],
                    c,
                    bytes,
                    ga,
                );
                load_lanes(
                    isa,
                    mems,
                    &srcs[1],
                    Lane::F32,
                    row(g, 1),
                    at(1),
                    s_in[1],
                    c,
                    bytes,
                    gb,
                );
            }
            acc = alu::scan_rows::<G, S>(
                op,
                rev,
                bytemuck::cast_slice(a),
                bytemuck::cast_slice(b),
                c,
                acc,
                bytemuck::cast_slice_mut(out),
            );
            for g in 0..G {
                let o = &mut out[lanes_of(g)][..c];
                if let Some(op) = accumulate {
                    let d = Source::Mem {
                        loc: sink.loc,
                        dtype: sink.dtype,
                        base: sink.base,
                        strides: sink.strides,
                    };
                    let old = &mut old[lanes_of(g)];
                    load_lanes(
                        isa,
                        mems,
                        &d,
                        Lane::F32,
                        row(g, 2),
                        at(2),
                        s_in[2],
                        c,
                        bytes,
                        old,
                    );
                    // `out = old op out`.
                    apply_assign(isa, Lane::F32, op, o, Rhs::Run(&old[..c]), true);
                }
                store_lanes(
                    isa,
                    mems,
                    sink,
                    Lane::F32,
                    row(g, 2),
                    at(2),
                    s_in[2],
                    o,
                    bytes,
                );
            }
            done += c;
        }
    });
}

/// The values of one partition of `src`, in row-major order, into `out` (at most [`CHUNK`]).
#[allow(clippy::too_many_arguments)]
fn row_values(
    isa: Isa,
    mems: &Mems<'_>,
    src: &Source,
    grid: &[usize; MAX_TILE_RANK],
    r: usize,
    bytes: &mut [u8],
    out: &mut [f32],
) -> usize {
    let Source::Mem { strides, .. } = *src else {
        return 0;
    };
    let mut st = [strides];
    let plan = FreePlan::new(grid, &mut st);
    let s_in = st[0][plan.rank()];
    let mut n_out = 0;
    let lanes: &mut [u32] = bytemuck::cast_slice_mut(out);
    plan.runs(&st, |offs, n| {
        load_lanes(
            isa,
            mems,
            src,
            Lane::F32,
            r as isize * strides[0],
            offs[0],
            s_in,
            n,
            bytes,
            &mut lanes[n_out..],
        );
        n_out += n;
    });
    n_out
}

/// The sum of `values` in [`RowFold`]'s order.
fn sum(isa: Isa, values: &[f32]) -> f32 {
    let mut f = RowFold::new(Alu::Add, Lane::F32);
    f.fold(isa, Lane::F32, bytemuck::cast_slice(values));
    f32::from_bits(f.finish(isa, Lane::F32))
}

/// `(count, mean, Σ (x − mean)²)` of `values`, in fp32: the sum in [`RowFold`]'s order, the
/// mean `sum / count`, each square of a rounded difference rounded, summed in the same order
/// (`squares`, as long as `values`, is scratch). An empty group gives `(0, 0, 0)`.
fn stats(isa: Isa, values: &[f32], squares: &mut [f32]) -> [f32; 3] {
    if values.is_empty() {
        return [0.0; 3];
    }
    let n = values.len() as f32;
    let mean = sum(isa, values) / n;
    let squares = &mut squares[..values.len()];
    for (q, &x) in squares.iter_mut().zip(values) {
        let d = x - mean;
        *q = d * d;
    }
    [n, mean, sum(isa, squares)]
}

/// A per-partition function: the partition's values in (with scratch of `2 · CHUNK` fp32s),
/// its results written to the lanes given, their count returned.
type RowFn = dyn Fn(Isa, &[f32], &mut [f32], &mut [u32]) -> usize + Sync;

/// Runs `f` on each partition's values (the source's free elements in row-major order) and
/// writes the fp32 values it returns to that partition of the destination.
fn per_row(e: &mut EngineState, ops: &Operands, f: &RowFn) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let grid = src.dims;
    let source = Source::of(src, Lane::F32, &grid);
    let sink = Sink::of(dst, &dst.dims);
    let split = RowSplit {
        rows: grid[0],
        elems: grid.iter().product(),
        writes: &[sink],
        reads: &[source],
        sbuf_columns: None,
        hbm: &[],
    };
    for_rows(e, &split, &|isa, mems, rows, lanes| {
        let (_, bytes) = lanes.scratch();
        let mut row = [0f32; CHUNK];
        let mut scratch = [0f32; 2 * CHUNK];
        let mut out = [0u32; 8];
        for r in rows {
            let n = row_values(isa, mems, &source, &grid, r, bytes, &mut row);
            let k = f(isa, &row[..n], &mut scratch, &mut out);
            store_row(isa, mems, &sink, &dst.dims, r, &out[..k], bytes);
        }
    });
}

/// `bn_stats`: per partition, `[count, mean, m2]` of the even-indexed elements (row-major),
/// then of the odd-indexed ones ([`stats`]).
pub(crate) fn bn_stats(e: &mut EngineState, ops: &Operands) {
    per_row(e, ops, &|isa, row, scratch, out| {
        let (groups, squares) = scratch.split_at_mut(CHUNK);
        let (even, odd) = groups.split_at_mut(CHUNK / 2);
        let (ne, no) = (row.len().div_ceil(2), row.len() / 2);
        for ((pair, e), o) in row.chunks_exact(2).zip(even.iter_mut()).zip(odd.iter_mut()) {
            *e = pair[0];
            *o = pair[1];
        }
        if ne > no {
            even[no] = row[row.len() - 1];
        }
        let groups =
            stats(isa, &even[..ne], squares)
                .into_iter()
                .chain(stats(isa, &odd[..no], squares));
        for (o, v) in out.iter_mut().zip(groups) {
            *o = v.to_bits();
        }
        6
    });
}

/// `bn_aggr`: per partition, the mean and variance of the groups `[count, mean, m2]` of its
/// row (concatenated `bn_stats` results), merged left to right with Chan et al.'s update:
/// `n = na + nb`, `δ = mb − ma`, `mean = ma + δ·(nb / n)`, `m2 = (m2a + m2b) + (δ·δ)·(na·nb / n)`,
/// each operation rounded to fp32 in that order; the variance is `m2 / n` (0 for no element).
pub(crate) fn bn_aggr(e: &mut EngineState, ops: &Operands) {
    per_row(e, ops, &|_, row, _, out| {
        let (mut cn, mut cm, mut c2) = (0f32, 0f32, 0f32);
        for g in row.chunks_exact(3) {
            let (nb, mb, m2b) = (g[0], g[1], g[2]);
            let total = cn + nb;
            if total == 0.0 {
                continue;
            }
            let delta = mb - cm;
            cm += delta * (nb / total);
            c2 = (c2 + m2b) + (delta * delta) * (cn * nb / total);
            cn = total;
        }
        let var = if cn == 0.0 { 0.0 } else { c2 / cn };
        out[0] = cm.to_bits();
        out[1] = var.to_bits();
        2
    });
}

/// Writes `values` to partition `r` of `sink` in row-major order of its free dims.
fn store_row(
    isa: Isa,
    mems: &mut Mems<'_>,
    sink: &Sink,
    dims: &[usize; MAX_TILE_RANK],
    r: usize,
    values: &[u32],
    bytes: &mut [u8],
) {
    let mut st = [sink.strides];
    let plan = FreePlan::new(dims, &mut st);
    let s_in = st[0][plan.rank()];
    let mut done = 0;
    plan.runs(&st, |offs, n| {
        let row = r as isize * sink.strides[0];
        let take = n.min(values.len() - done);
        store_lanes(
            isa,
            mems,
            sink,
            Lane::F32,
            row,
            offs[0],
            s_in,
            &values[done..done + take],
            bytes,
        );
        done += take;
    });
}
