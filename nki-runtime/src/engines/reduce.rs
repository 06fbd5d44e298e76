//! The Vector engine's reductions and scans: `tensor_reduce`, `tensor_tensor_scan`,
//! `bn_stats` and `bn_aggr`.
//!
//! A reduction's order is [`RowFold`]'s: the values of one output element, in row-major order
//! of the reduced axes, are folded into 16 partials and the partials combined pairwise. A scan
//! is sequential along each partition's free elements in row-major order.

use nki_lang::{Alu, AluClass, DType, MAX_TILE_RANK};

use super::Engines;
use super::stream::{
    CHUNK, FreePlan, Lane, RowFold, RowSplit, Sink, Source, for_rows, load_lanes, store_lanes,
};
use crate::cpu::alu::{self, Rhs};
use crate::exec::Operands;

/// `op` on one lane.
fn one(isa: crate::cpu::Isa, lane: Lane, op: Alu, a: u32, b: u32) -> u32 {
    let mut out = [0u32];
    super::stream::apply(isa, lane, op, &[a], Rhs::Splat(b), &mut out);
    out[0]
}

/// `tensor_reduce`: for each partition and each position of the kept axes, `op` over the
/// reduced axes (bit `j` of `axes` = free axis `j`), negated when asked, combined into the
/// destination with `accumulate`.
pub(crate) fn tensor_reduce(
    e: &mut Engines,
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
    let split = RowSplit {
        rows: grid[0],
        elems: grid.iter().product(),
        writes: &[sink],
        reads: &[source],
    };
    for_rows(e, &split, &|isa, mems, rows, lanes| {
        let mut keep_strides = [src_strides, dst_strides];
        let keep = FreePlan::new(&kept_grid, &mut keep_strides);
        let mut red_strides = [src_strides];
        let red = FreePlan::new(&red_grid, &mut red_strides);
        let k_in = keep_strides.map(|s| s[keep.rank()]);
        let r_in = red_strides[0][red.rank()];
        let (buf, bytes) = lanes.scratch();
        for r in rows {
            let src_row = r as isize * src_strides[0];
            let dst_row = r as isize * dst_strides[0];
            keep.runs(&keep_strides, |offs, n| {
                for i in 0..n {
                    let s_off = offs[0] + i as isize * k_in[0];
                    let d_off = offs[1] + i as isize * k_in[1];
                    let mut fold = RowFold::new(op, lane);
                    red.runs(&red_strides, |roffs, m| {
                        let mut done = 0;
                        while done < m {
                            let c = CHUNK.min(m - done);
                            let off = s_off + roffs[0] + done as isize * r_in;
                            match source {
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
                                _ => {
                                    load_lanes(
                                        isa, mems, &source, lane, src_row, off, r_in, c, bytes, buf,
                                    );
                                    fold.fold(isa, lane, &buf[..c]);
                                }
                            }
                            done += c;
                        }
                    });
                    let mut v = fold.finish(isa, lane);
                    if negate {
                        v = match lane {
                            Lane::F32 => {
                                alu::eval(Alu::Multiply, f32::from_bits(v), -1.0).to_bits()
                            }
                            Lane::I32 => (v as i32).wrapping_neg() as u32,
                        };
                    }
                    if let Some(acc) = accumulate {
                        let old = Source::Mem {
                            loc: sink.loc,
                            dtype: sink.dtype,
                            base: sink.base,
                            strides: sink.strides,
                        };
                        load_lanes(isa, mems, &old, lane, dst_row, d_off, 1, 1, bytes, buf);
                        v = one(isa, lane, acc, buf[0], v);
                    }
                    store_lanes(isa, mems, &sink, lane, dst_row, d_off, 1, &[v], bytes);
                }
            });
        }
    });
}

/// `tensor_tensor_scan`: along each partition's free elements in row-major order,
/// `r = (src0[i] op0 r) op1 src1[i]` from `r = initial`, each step rounded to fp32.
pub(crate) fn scan(e: &mut Engines, ops: &Operands, op: [Alu; 2], accumulate: Option<Alu>) {
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
    };
    for_rows(e, &split, &|isa, mems, rows, lanes| {
        let strides = |s: &Source| match *s {
            Source::Mem { strides, .. } => strides,
            _ => [0; MAX_TILE_RANK],
        };
        let mut st = [strides(&srcs[0]), strides(&srcs[1]), sink.strides];
        let row_st = st.map(|s| s[0]);
        let plan = FreePlan::new(&grid, &mut st);
        let s_in = st.map(|s| s[plan.rank()]);
        let (a, b, out, old, bytes) = lanes.scan_scratch();
        for r in rows {
            let row = |j: usize| r as isize * row_st[j];
            load_lanes(
                isa,
                mems,
                &srcs[2],
                Lane::F32,
                r as isize * strides(&srcs[2])[0],
                0,
                0,
                1,
                bytes,
                a,
            );
            let mut acc = f32::from_bits(a[0]);
            plan.runs(&st, |offs, n| {
                let mut done = 0;
                while done < n {
                    let c = CHUNK.min(n - done);
                    let at = |j: usize| offs[j] + done as isize * s_in[j];
                    load_lanes(
                        isa,
                        mems,
                        &srcs[0],
                        Lane::F32,
                        row(0),
                        at(0),
                        s_in[0],
                        c,
                        bytes,
                        a,
                    );
                    load_lanes(
                        isa,
                        mems,
                        &srcs[1],
                        Lane::F32,
                        row(1),
                        at(1),
                        s_in[1],
                        c,
                        bytes,
                        b,
                    );
                    for k in 0..c {
                        let x = alu::eval(op[0], f32::from_bits(a[k]), acc);
                        acc = alu::eval(op[1], x, f32::from_bits(b[k]));
                        out[k] = acc.to_bits();
                    }
                    if let Some(o) = accumulate {
                        let d = Source::Mem {
                            loc: sink.loc,
                            dtype: sink.dtype,
                            base: sink.base,
                            strides: sink.strides,
                        };
                        load_lanes(
                            isa,
                            mems,
                            &d,
                            Lane::F32,
                            row(2),
                            at(2),
                            s_in[2],
                            c,
                            bytes,
                            old,
                        );
                        for k in 0..c {
                            let v = alu::eval(o, f32::from_bits(old[k]), f32::from_bits(out[k]));
                            out[k] = v.to_bits();
                        }
                    }
                    store_lanes(
                        isa,
                        mems,
                        &sink,
                        Lane::F32,
                        row(2),
                        at(2),
                        s_in[2],
                        &out[..c],
                        bytes,
                    );
                    done += c;
                }
            });
        }
    });
}

/// The values of one partition of `src`, in row-major order, into `out` (at most [`CHUNK`]).
#[allow(clippy::too_many_arguments)]
fn row_values(
    isa: crate::cpu::Isa,
    mems: &super::stream::Mems<'_>,
    src: &Source,
    grid: &[usize; MAX_TILE_RANK],
    r: usize,
    bytes: &mut [u8],
    buf: &mut [u32],
    out: &mut [f32],
) -> usize {
    let Source::Mem { strides, .. } = *src else {
        return 0;
    };
    let mut st = [strides];
    let plan = FreePlan::new(grid, &mut st);
    let s_in = st[0][plan.rank()];
    let mut n_out = 0;
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
            buf,
        );
        for k in 0..n {
            out[n_out + k] = f32::from_bits(buf[k]);
        }
        n_out += n;
    });
    n_out
}

/// The sum of `values` in [`RowFold`]'s order.
fn sum(isa: crate::cpu::Isa, values: impl Iterator<Item = f32>) -> f32 {
    let mut f = RowFold::new(Alu::Add, Lane::F32);
    for v in values {
        f.fold(isa, Lane::F32, &[v.to_bits()]);
    }
    f32::from_bits(f.finish(isa, Lane::F32))
}

/// `(count, mean, Σ (x − mean)²)` of `values`, in fp32: the sum in [`RowFold`]'s order, the
/// mean `sum / count`, each square of a rounded difference rounded, summed in the same order.
/// An empty group gives `(0, 0, 0)`.
fn stats(isa: crate::cpu::Isa, values: &[f32]) -> [f32; 3] {
    if values.is_empty() {
        return [0.0; 3];
    }
    let n = values.len() as f32;
    let mean = sum(isa, values.iter().copied()) / n;
    let m2 = sum(
        isa,
        values.iter().map(|&x| {
            let d = x - mean;
            d * d
        }),
    );
    [n, mean, m2]
}

/// A per-partition function: the partition's values in, its results written to the lanes
/// given, their count returned.
type RowFn = dyn Fn(crate::cpu::Isa, &[f32], &mut [u32]) -> usize + Sync;

/// Runs `f` on each partition's values (the source's free elements in row-major order) and
/// writes the fp32 values it returns to that partition of the destination.
fn per_row(e: &mut Engines, ops: &Operands, f: &RowFn) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let grid = src.dims;
    let source = Source::of(src, Lane::F32, &grid);
    let sink = Sink::of(dst, &dst.dims);
    let split = RowSplit {
        rows: grid[0],
        elems: grid.iter().product(),
        writes: &[sink],
        reads: &[source],
    };
    for_rows(e, &split, &|isa, mems, rows, lanes| {
        let (buf, bytes) = lanes.scratch();
        let mut row = [0f32; CHUNK];
        let mut out = [0u32; 8];
        for r in rows {
            let n = row_values(isa, mems, &source, &grid, r, bytes, buf, &mut row);
            let k = f(isa, &row[..n], &mut out);
            store_row(isa, mems, &sink, &dst.dims, r, &out[..k], bytes);
        }
    });
}

/// `bn_stats`: per partition, `[count, mean, m2]` of the even-indexed elements (row-major),
/// then of the odd-indexed ones ([`stats`]).
pub(crate) fn bn_stats(e: &mut Engines, ops: &Operands) {
    per_row(e, ops, &|isa, row, out| {
        let (mut even, mut odd) = ([0f32; CHUNK / 2], [0f32; CHUNK / 2]);
        let (ne, no) = (row.len().div_ceil(2), row.len() / 2);
        for (k, &v) in row.iter().enumerate() {
            match k % 2 {
                0 => even[k / 2] = v,
                _ => odd[k / 2] = v,
            }
        }
        let groups = stats(isa, &even[..ne])
            .into_iter()
            .chain(stats(isa, &odd[..no]));
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
pub(crate) fn bn_aggr(e: &mut Engines, ops: &Operands) {
    per_row(e, ops, &|_, row, out| {
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
    isa: crate::cpu::Isa,
    mems: &mut super::stream::Mems<'_>,
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
