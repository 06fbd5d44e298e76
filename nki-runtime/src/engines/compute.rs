//! The elementwise families, each a [`stream`] with its compute callback: ALU chains
//! (`tensor_tensor`, `tensor_scalar`, `scalar_tensor_tensor`, `tensor_scalar_reduce`,
//! `reciprocal`), activations, selects (`select`, `affine_select`), `iota`, and the Scalar
//! engine's `tensor_copy`.

use nki_lang::{AccOut, ActFn, Alu, AluClass, Cmp, DType, Engine, MAX_TILE_RANK};

use super::access::fill_run;
use super::lanes::{Lane, MAX_SOURCES, Sink, Source, apply_rev, lanes_of, width_mask};
use super::stream::{Compute, Repeats, RowReduce, Stream, stream};
use super::{CHUNK, EngineState};
use crate::cpu::alu::Rhs;
use crate::cpu::{Isa, act};
use crate::operand::{Loc, Operands, Resolved};

/// The sources of the given slots, each at its slot's position: an absent slot before a present
/// one reads as lane 0 (`tensor_scalar` with no `operand0` and an `operand1`); absent slots at
/// the end are left out.
fn sources(ops: &Operands, slots: &[usize], lane: Lane) -> ([Source; 4], usize) {
    let grid = ops.get(0).dims;
    let mut out = [Source::Splat(0); 4];
    let mut n = 0;
    for (k, &s) in slots.iter().enumerate() {
        if let Some(r) = ops.slot(s) {
            out[k] = Source::of(r, lane, &grid);
            n = k + 1;
        }
    }
    (out, n)
}

fn reduce_of(ops: &Operands, acc: Option<AccOut>) -> Option<RowReduce> {
    acc.map(|a| RowReduce {
        op: a.op,
        sink: Sink::of(ops.get(4), &ops.get(0).dims),
    })
}

fn is_int(r: Option<&Resolved>) -> bool {
    r.is_none_or(|r| match r.loc {
        Loc::Imm(x) => matches!(x, nki_lang::Scalar::Int(_)),
        Loc::Expr => true,
        Loc::Sbuf | Loc::Psum | Loc::Hbm(_) => r.dtype.is_int() || r.dtype == DType::Bool,
    })
}

/// The lanes an ALU chain computes in (its two operations and the accumulation into the
/// destination): int32 for bit operations, and for GpSimd's exact int32 `add`, `subtract` and
/// `multiply` on integer operands; fp32 otherwise.
pub(crate) fn alu_lane(engine: Engine, op: [Alu; 3], ops: &Operands) -> Lane {
    if op.iter().any(|o| o.class() == AluClass::Bitvec) {
        return Lane::I32;
    }
    let int_op = |o: &Alu| matches!(o, Alu::Add | Alu::Subtract | Alu::Multiply | Alu::Bypass);
    let int_operands = (1..4).all(|s| is_int(ops.slot(s))) && is_int(Some(ops.get(0)));
    if engine == Engine::GpSimd && op.iter().all(int_op) && int_operands {
        Lane::I32
    } else {
        Lane::F32
    }
}

/// An ALU chain: `dst = (src0 op0 src1) op1 src2` (bit `j` of `rev` swaps op `j`'s operands),
/// combined into the destination with `accumulate`, and reduced per partition into `acc`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn alu_chain(
    e: &mut EngineState,
    ops: &Operands,
    engine: Engine,
    op: [Alu; 2],
    rev: u8,
    acc: Option<AccOut>,
    accumulate: Option<Alu>,
) {
    let lane = alu_lane(
        engine,
        [op[0], op[1], accumulate.unwrap_or(Alu::Bypass)],
        ops,
    );
    let (srcs, n) = sources(ops, &[1, 2, 3], lane);
    let dst = ops.get(0);
    let s = Stream {
        dims: dst.dims,
        srcs: &srcs[..n],
        dst: Sink::of(dst, &dst.dims),
        lane,
        accumulate,
        reduce: reduce_of(ops, acc),
        lanewise: true,
        whole_rows: false,
        repeats: true,
        hbm: &[],
    };
    let isa = e.isa;
    // A logical right shift of a narrow signed integer shifts its own bits: the sign-extended
    // lane is cut to the dtype's width first (docs/dtypes.md, integer lanes).
    let width = ops.slot(1).map_or(u32::MAX, |r| width_mask(r.dtype));
    let narrow =
        (lane == Lane::I32 && op[0] == Alu::RightShift && width != u32::MAX).then_some(width);
    let compute: &Compute<'_> = &|_, ins, repeats, out, scratch| {
        let arg = |k: usize| operand(ins, repeats, k);
        let tmp = &mut scratch[..out.len()];
        alu_lanes(
            isa,
            lane,
            (op, rev, narrow),
            [arg(0), arg(1), arg(2)],
            out,
            tmp,
        );
    };
    stream(e, &s, compute);
}

/// One ALU chain on lanes: `out = (a op0 b) op1 c` (bit `j` of `rev` swaps op `j`'s operands;
/// an absent operand is lane 0, an operand of one lane is that lane repeated), with `narrow`
/// the width of a narrow signed integer whose logical right shift cuts `a` to it first; `tmp`
/// (as long as `out`) holds `a op0 b`. The one definition of what [`alu_chain`] computes per
/// chunk, which [`expression`] applies node by node.
fn alu_lanes(
    isa: Isa,
    lane: Lane,
    (op, rev, narrow): ([Alu; 2], u8, Option<u32>),
    [a, b, c]: [Rhs<'_, u32>; 3],
    out: &mut [u32],
    tmp: &mut [u32],
) {
    let n = out.len();
    let mut cut: [u32; CHUNK];
    let a = match a {
        Rhs::Run(a) if narrow.is_none() => a,
        Rhs::Run(a) => {
            // A narrow signed operand cut to its width.
            cut = [0; CHUNK];
            for (x, &v) in cut[..n].iter_mut().zip(a) {
                *x = narrow.map_or(v, |w| v & w);
            }
            &cut[..n]
        }
        Rhs::Splat(v) => {
            // One lane spread over the chunk.
            cut = [0; CHUNK];
            cut[..n].fill(narrow.map_or(v, |w| v & w));
            &cut[..n]
        }
        a @ Rhs::Repeat { .. } => {
            // Repeated runs spread over the chunk (`bypass` of them, swapped: their lanes).
            cut = [0; CHUNK];
            apply_rev(isa, lane, Alu::Bypass, &tmp[..n], a, true, &mut cut[..n]);
            if let Some(w) = narrow {
                cut[..n].iter_mut().for_each(|x| *x &= w);
            }
            &cut[..n]
        }
    };
    if op[1] == Alu::Bypass {
        apply_rev(isa, lane, op[0], a, b, rev & 1 == 1, out);
    } else {
        apply_rev(isa, lane, op[0], a, b, rev & 1 == 1, tmp);
        apply_rev(isa, lane, op[1], tmp, c, rev >> 1 & 1 == 1, out);
    }
}

/// Source `j`'s lanes as an ALU operand: absent, lane 0; one lane, that lane for every lane;
/// runs repeated as [`Repeats`] says.
fn operand<'a>(ins: &[&'a [u32]], repeats: &Repeats, j: usize) -> Rhs<'a, u32> {
    match (ins.get(j), repeats.get(j).copied().flatten()) {
        (None, _) => Rhs::Splat(0),
        (Some(&runs), Some((len, times))) => Rhs::Repeat { runs, len, times },
        (Some(x), None) => lanes_of(x),
    }
}

/// Most ALU instructions one [`Expression`] computes.
pub(crate) const MAX_NODES: usize = 6;

/// An operand of a node of an [`Expression`].
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) enum Arg {
    /// Source `j` of the expression.
    Src(u8),
    /// The results of an earlier node.
    Node(u8),
    /// An immediate (or an absent operand: 0): these fp32 bits in every lane.
    Splat(u32),
}

/// One ALU chain of an [`Expression`]: `(a op0 b) op1 c`, as [`alu_chain`] computes it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct Node {
    /// The two operations.
    pub op: [Alu; 2],
    /// Bit `j` swaps the operands of operation `j`.
    pub rev: u8,
    /// `a`, `b`, `c`.
    pub args: [Arg; 3],
}

/// ALU chains on fp32 lanes, each reading sources and the results of the nodes before it, the
/// last one's results written to `dst` (over its grid): instructions whose results only feed
/// later ones, computed chunk by chunk without their tiles (`host::exprs`). Each node computes
/// its instruction's lanes exactly ([`alu_lanes`]); a node's results are what its instruction
/// would have written to an fp32 tile and the next one read back, bit for bit.
pub(crate) struct Expression<'a> {
    /// The nodes, in order; the last one's results are the destination's.
    pub nodes: &'a [Node],
    /// The sources, on the destination's grid.
    pub srcs: &'a [Resolved],
    /// The destination.
    pub dst: &'a Resolved,
    /// Whether each row's results are written after all its sources are read (a destination
    /// in the bytes of a source of the same row: [`Stream::whole_rows`]).
    pub whole_rows: bool,
    /// The bytes of the HBM input its sources in HBM read (a folded load's; empty when none
    /// does).
    pub hbm: &'a [u8],
}

/// Streams an [`Expression`].
pub(crate) fn expression(e: &mut EngineState, x: &Expression<'_>) {
    let grid = x.dst.dims;
    let srcs: [Source; MAX_SOURCES] = core::array::from_fn(|j| {
        x.srcs
            .get(j)
            .map_or(Source::Splat(0), |r| Source::of(r, Lane::F32, &grid))
    });
    let s = Stream {
        dims: grid,
        srcs: &srcs[..x.srcs.len().min(MAX_SOURCES)],
        dst: Sink::of(x.dst, &grid),
        lane: Lane::F32,
        accumulate: None,
        reduce: None,
        lanewise: true,
        whole_rows: x.whole_rows,
        repeats: true,
        hbm: x.hbm,
    };
    let isa = e.isa;
    let compute: &Compute<'_> = &|_, ins, repeats, out, scratch| {
        let n = out.len();
        let (results, tmp) = scratch.split_at_mut((MAX_NODES - 1) * n);
        let tmp = &mut tmp[..n];
        let last = x.nodes.len().saturating_sub(1);
        for (k, node) in x.nodes.iter().enumerate() {
            let (before, mine) = results.split_at_mut(k.min(MAX_NODES - 1) * n);
            let before = &*before;
            let arg = |a: Arg| match a {
                Arg::Src(j) => operand(ins, repeats, usize::from(j)),
                Arg::Node(i) => Rhs::Run(&before[usize::from(i) * n..(usize::from(i) + 1) * n]),
                Arg::Splat(bits) => Rhs::Splat(bits),
            };
            let args = node.args.map(arg);
            let dst = if k == last { &mut *out } else { &mut mine[..n] };
            alu_lanes(isa, Lane::F32, (node.op, node.rev, None), args, dst, tmp);
        }
    };
    stream(e, &s, compute);
}

/// `activation`: `dst = func(src · scale + bias)`, `scale` and `bias` one value per
/// partition, reduced per partition into `acc`.
pub(crate) fn activation(
    e: &mut EngineState,
    ops: &Operands,
    func: ActFn,
    acc: Option<AccOut>,
    accumulate: Option<Alu>,
) {
    let (srcs, n) = sources(ops, &[1, 2, 3], Lane::F32);
    let has_bias = ops.slot(3).is_some();
    let dst = ops.get(0);
    let s = Stream {
        dims: dst.dims,
        srcs: &srcs[..n],
        dst: Sink::of(dst, &dst.dims),
        lane: Lane::F32,
        accumulate,
        reduce: reduce_of(ops, acc),
        lanewise: false,
        whole_rows: false,
        repeats: false,
        hbm: &[],
    };
    let isa = e.isa;
    let compute: &Compute<'_> = &|_, ins, _, out, tmp| {
        let scale = f32::from_bits(ins[1][0]);
        let bias = if has_bias {
            f32::from_bits(ins[2][0])
        } else {
            -0.0
        };
        let tmp = &mut tmp[..out.len()];
        let data = if ins[0].len() < out.len() {
            spread(ins[0], tmp);
            &*tmp
        } else {
            ins[0]
        };
        act::apply(
            isa,
            func,
            bytemuck::cast_slice(data),
            bytemuck::cast_slice_mut(out),
            scale,
            bias,
        );
    };
    stream(e, &s, compute);
}

/// `select` (`nl.where`): `dst = pred ≠ 0 ? on_true : on_false`; `affine_select` with `cmp`:
/// `dst = (expr cmp 0) ? on_true : on_false`.
pub(crate) fn select(
    e: &mut EngineState,
    ops: &Operands,
    cmp: Option<Cmp>,
    accumulate: Option<Alu>,
) {
    if let (Some(c), None) = (cmp, accumulate)
        && select_rows(e, ops, c)
    {
        return;
    }
    let (srcs, n) = sources(ops, &[1, 2, 3], Lane::F32);
    let dst = ops.get(0);
    let s = Stream {
        dims: dst.dims,
        srcs: &srcs[..n],
        dst: Sink::of(dst, &dst.dims),
        lane: Lane::F32,
        accumulate,
        reduce: None,
        lanewise: false,
        whole_rows: false,
        repeats: false,
        hbm: &[],
    };
    let compute: &Compute<'_> = &|_, ins, _, out, _| {
        let (p, t, f) = (ins[0], ins[1], ins[2]);
        // An expression's lanes are its int32 values as fp32: the sign and zero survive, so
        // comparing them with 0.0 is comparing the integers with 0.
        match cmp {
            None => blend(|v| v != 0.0, p, t, f, out),
            Some(Cmp::Lt) => blend(|v| v < 0.0, p, t, f, out),
            Some(Cmp::Le) => blend(|v| v <= 0.0, p, t, f, out),
            Some(Cmp::Gt) => blend(|v| v > 0.0, p, t, f, out),
            Some(Cmp::Ge) => blend(|v| v >= 0.0, p, t, f, out),
            Some(Cmp::Eq) => blend(|v| v == 0.0, p, t, f, out),
            Some(Cmp::Ne) => blend(|v| v != 0.0, p, t, f, out),
        }
    };
    stream(e, &s, compute);
}

/// One side of an `affine_select` row: fp32 bits, or an fp32 tile row (`loc`, element of
/// partition 0, partition stride).
#[derive(Copy, Clone)]
enum Side {
    Value(u32),
    Row(Loc, isize, isize),
}

impl Side {
    fn of(r: &Resolved, grid: &[usize; MAX_TILE_RANK], j: usize) -> Option<Side> {
        match Source::of(r, Lane::F32, grid) {
            Source::Splat(bits) => Some(Side::Value(bits)),
            Source::Mem {
                loc: loc @ (Loc::Sbuf | Loc::Psum),
                dtype: DType::F32,
                base,
                strides,
            } if grid[j] == 1 || strides[j] == 1 => Some(Side::Row(loc, base, strides[0])),
            Source::Mem { .. } | Source::Expr { .. } => None,
        }
    }
}

/// `affine_select` with an ordering predicate (`<`, `<=`, `>`, `>=`) over a `[P, F]` grid whose
/// values are fp32 (tiles with contiguous rows, or immediates), written to an fp32 tile with
/// contiguous rows: the predicate `a + b·p + c·f` is monotone along each row, so it holds on a
/// prefix or a suffix, found by binary search, and each row is two copies. The same bits as the
/// blend (selection copies fp32 lanes unchanged). `false`, having written nothing, for any other
/// case, or when the predicate's values leave int32 (whose wrap-around [`Source::Expr`] keeps).
fn select_rows(e: &mut EngineState, ops: &Operands, cmp: Cmp) -> bool {
    let (Some(dst), Some(pred), Some(t), Some(f)) =
        (ops.slot(0), ops.slot(1), ops.slot(2), ops.slot(3))
    else {
        return false;
    };
    let g = dst.dims;
    let mut free = (1..MAX_TILE_RANK).filter(|&j| g[j] != 1);
    let (j, rest) = (free.next().unwrap_or(1), free.next());
    let Source::Expr {
        base: pb,
        strides: ps,
    } = Source::of(pred, Lane::F32, &g)
    else {
        return false;
    };
    let sink = Sink::of(dst, &g);
    let (Some(on_true), Some(on_false)) = (Side::of(t, &g, j), Side::of(f, &g, j)) else {
        return false;
    };
    let monotone = matches!(cmp, Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge);
    let contiguous = g[j] == 1 || sink.strides[j] == 1;
    let on_chip = matches!(sink.loc, Loc::Sbuf | Loc::Psum);
    if rest.is_some() || !monotone || !contiguous || !on_chip || sink.dtype != DType::F32 {
        return false;
    }
    let (rows, cols) = (g[0] as i64, g[j] as i64);
    // A tile side in the destination's memory either is the destination or, with the same
    // partition stride, occupies other bytes of each partition (otherwise a row could be read
    // after part of it was written).
    let apart = |s: Side| match s {
        Side::Row(loc, base, pstride) if loc == sink.loc => {
            let ps = sink.strides[0];
            let same = base == sink.base && pstride == ps;
            let (a, b) = (base.rem_euclid(ps.max(1)), sink.base.rem_euclid(ps.max(1)));
            let n = cols as isize;
            same || (pstride == ps && ps > 0 && (a + n <= b || b + n <= a))
        }
        Side::Value(_) | Side::Row(..) => true,
    };
    if !apart(on_true) || !apart(on_false) {
        return false;
    }
    let at = |p: i64, c: i64| {
        i128::from(pb) + i128::from(ps[0]) * i128::from(p) + i128::from(ps[j]) * i128::from(c)
    };
    let int32 = |v: i128| (i128::from(i32::MIN)..=i128::from(i32::MAX)).contains(&v);
    let corners = [(0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1)];
    if corners.iter().any(|&(p, c)| !int32(at(p, c))) {
        return false;
    }
    let holds = |v: i128| match cmp {
        Cmp::Lt => v < 0,
        Cmp::Le => v <= 0,
        Cmp::Gt => v > 0,
        Cmp::Ge => v >= 0,
        Cmp::Eq | Cmp::Ne => unreachable!("{cmp:?} is not monotone: returned above"),
    };
    let EngineState { sbuf, psum, .. } = e;
    for p in 0..rows {
        // Columns `[0, k)` take one side and `[k, cols)` the other: `first` says which.
        let first = holds(at(p, 0));
        let (mut lo, mut hi) = (1i64, cols);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if holds(at(p, mid)) == first {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let k = lo as usize;
        let (a, b) = if first {
            (on_true, on_false)
        } else {
            (on_false, on_true)
        };
        let d0 = sink.base + p as isize * sink.strides[0];
        for (side, from, n) in [(a, 0usize, k), (b, k, cols as usize - k)] {
            if n == 0 {
                continue;
            }
            let d = (d0 as usize + from) * 4;
            match side {
                Side::Value(bits) => {
                    let mem = match sink.loc {
                        Loc::Psum => psum.bytes_mut(),
                        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => sbuf.bytes_mut(),
                    };
                    fill_run(&mut mem[d..d + n * 4], &bits.to_le_bytes());
                }
                Side::Row(loc, base, pstride) => {
                    let src = (base + p as isize * pstride) as usize * 4 + from * 4;
                    match (loc, sink.loc) {
                        (Loc::Psum, Loc::Psum) => psum.bytes_mut().copy_within(src..src + n * 4, d),
                        (Loc::Psum, _) => sbuf.bytes_mut()[d..d + n * 4]
                            .copy_from_slice(&psum.bytes()[src..src + n * 4]),
                        (_, Loc::Psum) => psum.bytes_mut()[d..d + n * 4]
                            .copy_from_slice(&sbuf.bytes()[src..src + n * 4]),
                        _ => sbuf.bytes_mut().copy_within(src..src + n * 4, d),
                    }
                }
            }
        }
    }
    true
}

/// `out[k] = holds(p[k]) ? t[k] : f[k]`, each source a run or a single lane (one value for every
/// `k`); compiled once per predicate, without a branch per element.
#[inline(always)]
fn blend(holds: impl Fn(f32) -> bool, p: &[u32], t: &[u32], f: &[u32], out: &mut [u32]) {
    let n = out.len();
    let pick = |c: bool, a: u32, b: u32| if c { a } else { b };
    if let [one] = p {
        let c = holds(f32::from_bits(*one));
        let src = if c { t } else { f };
        return spread(src, out);
    }
    let p = &p[..n];
    match (t, f) {
        ([a], [b]) => {
            for (o, &x) in out.iter_mut().zip(p) {
                *o = pick(holds(f32::from_bits(x)), *a, *b);
            }
        }
        (t, [b]) => {
            for ((o, &x), &a) in out.iter_mut().zip(p).zip(&t[..n]) {
                *o = pick(holds(f32::from_bits(x)), a, *b);
            }
        }
        ([a], f) => {
            for ((o, &x), &b) in out.iter_mut().zip(p).zip(&f[..n]) {
                *o = pick(holds(f32::from_bits(x)), *a, b);
            }
        }
        (t, f) => {
            for (((o, &x), &a), &b) in out.iter_mut().zip(p).zip(&t[..n]).zip(&f[..n]) {
                *o = pick(holds(f32::from_bits(x)), a, b);
            }
        }
    }
}

/// `iota`: the expression's int32 values, converted to the destination's dtype.
pub(crate) fn iota(e: &mut EngineState, ops: &Operands) {
    let dst = ops.get(0);
    let lane = if dst.dtype.is_float() {
        Lane::F32
    } else {
        Lane::I32
    };
    let srcs = [Source::of(ops.get(1), lane, &dst.dims)];
    let s = Stream {
        dims: dst.dims,
        srcs: &srcs,
        dst: Sink::of(dst, &dst.dims),
        lane,
        accumulate: None,
        reduce: None,
        lanewise: false,
        whole_rows: false,
        repeats: false,
        hbm: &[],
    };
    stream(e, &s, &|_, ins, _, out, _| spread(ins[0], out));
}

/// `out` = the lanes of `x`, a single lane repeated.
fn spread(x: &[u32], out: &mut [u32]) {
    match x {
        [one] => out.fill(*one),
        run => out.copy_from_slice(run),
    }
}

/// `tensor_copy` through fp32 lanes (the Scalar engine's copy, lossy for int32 above 2²⁴).
pub(crate) fn copy_through_f32(e: &mut EngineState, ops: &Operands) {
    let dst = ops.get(0);
    let srcs = [Source::of(ops.get(1), Lane::F32, &dst.dims)];
    let s = Stream {
        dims: dst.dims,
        srcs: &srcs,
        dst: Sink::of(dst, &dst.dims),
        lane: Lane::F32,
        accumulate: None,
        reduce: None,
        lanewise: false,
        whole_rows: false,
        repeats: false,
        hbm: &[],
    };
    stream(e, &s, &|_, ins, _, out, _| spread(ins[0], out));
}
