//! The reference interpreter: what every instruction of the op table computes, element by
//! element. Open this module to learn what an instruction does; the engines (`crate::engines`)
//! compute the same bits faster.
//!
//! [`Reference`] is a host plan (`super::plan::HostPlan`) whose `step` runs each instruction
//! itself, one element at a time, on the core's memories: SBUF and PSUM, and the bound launch's
//! HBM tensors. The interpreter (`super::interpret`) still walks the program, evaluates the
//! loops and resolves the operands ([`crate::operand::resolve`]: a [`Resolved`] pattern per
//! operand, clipped to the instruction's mask), so what is defined here is exactly what an
//! instruction does with its resolved operands:
//!
//! - **Elements.** Element `t = (t0, …, t4)` of an operand's `dims` is element
//!   `pattern.base + Σ pattern.strides[j] · tj` of its memory (in elements of its dtype). An
//!   elementwise instruction's grid is its destination's dims; a source with size-1 dimensions
//!   where the grid has more (a `[P, 1]` column, an immediate) is broadcast along them
//!   ([`Resolved::strides_on`]).
//! - **Values.** The engines compute on 32-bit *lanes*: fp32 for arithmetic, comparisons and
//!   logical operations, int32 for bit operations (and GpSimd's exact integer `add`,
//!   `subtract`, `multiply`). An element enters a lane by the load of `cpu::convert`
//!   ([`convert::to_f32`], [`convert::to_i32`]) and leaves it by the store
//!   ([`convert::from_f32`], [`convert::from_i32`]); a copy within one dtype keeps the bits.
//!   Every operation on lanes is a function of `cpu`: [`alu::eval`], [`alu::eval_bits`],
//!   [`act::eval`], the matmul's `daz` and `step`. Nothing here defines a numeric function of
//!   its own, with one exception: `bn_aggr`'s merge is plain IEEE fp32 arithmetic, as
//!   `engines/reduce.rs` defines it (its NaNs are not made canonical).
//! - **Accumulation.** A destination written with [`Write::Accumulate`] (or a
//!   [`Write::Group`] past its loops' first iterations: `Write::accumulates_at`) becomes
//!   `old op result`, computed on the instruction's lanes before the store.
//! - **Reductions** fold values in the order `docs/numerics.md` defines ([`Fold`]): value `i`
//!   into partial `i mod 16` (each partial starting from the operation's identity), then the
//!   partials pairwise.
//! - **Order.** Where a destination shares memory with a source (an operand updated in place,
//!   or views of one tile that overlap), the order of reads and writes is part of the
//!   definition: an elementwise instruction, a scan or a `bn_stats`/`bn_aggr` runs partition by
//!   partition (of its grid, in order), reading every operand element of the partition before it
//!   writes the partition's results; a `tensor_reduce` computes its output elements one after
//!   the other in row-major order, reading all the values of one before writing it; a move
//!   (`load`, `store`, `tensor_copy` on Vector/GpSimd, `nc_transpose`, `load_transpose2d`)
//!   reads all its source elements, then writes. (The engines stream a partition in chunks of
//!   1024 elements, each read before it is written; an instruction whose destination partly
//!   overlaps a source runs with these definitions on every host path instead, whatever its
//!   size: `exec/overlap.rs`.)
//!
//! Loop control (`loop`, `end`) is the interpreter's; every other opcode has one function
//! below, in the op table's order. No fusion, no threads, no SIMD: clarity first.

mod cumulative;
mod dma_compute;
mod local_gather;
mod mx;
mod nonzero;
mod range_select;
mod select_reduce;
mod sequence_bounds;
mod shuffle;
mod top8;
mod topk;

use nki_lang::{
    AccOut, ActFn, Alu, AluClass, Cmp, DType, Engine, Instr, InstrData, MAX_TILE_RANK, Opcode,
    Pred, Scalar, VarValues, Write,
};

use super::plan::HostPlan;
use super::{ExecError, Unobserved, run};
use crate::bind::Bound;
use crate::cpu::{act, alu, convert, matmul};
use crate::engines::EngineState;
use crate::operand::{Loc, Operands, Resolved};

/// The plan that runs every instruction with the reference definitions of this module.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct Reference;

impl<'i> HostPlan<'i> for Reference {
    fn step(
        &mut self,
        e: &mut EngineState,
        b: &mut Bound<'i, '_, '_>,
        ins: &Instr,
        ops: &Operands,
        _: (usize, usize),
        vars: &VarValues,
    ) -> Option<usize> {
        if matches!(ins.data, InstrData::Rng { .. } | InstrData::Seed { .. }) {
            // The generator's routines are element by element already, and keep its state
            // in the engines (`engines::rng`): they are their own definition.
            super::execute(e, b, ins, ops, vars);
            return Some(0);
        }
        let mut m = Machine {
            sbuf: e.sbuf.bytes_mut(),
            psum: e.psum.bytes_mut(),
            bound: b,
        };
        execute(&mut m, ins, ops, vars);
        Some(0)
    }
}

/// Runs every instance of a bound program's grid, in row-major order, with the reference
/// definitions (on `e`'s SBUF and PSUM; its scratch and threads are not used).
pub(crate) fn run_reference(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
) -> Result<(), ExecError> {
    run(e, b, &mut Unobserved, &mut Reference)
}

/// Runs one instruction: one arm per opcode, in the op table's order.
fn execute(m: &mut Machine<'_, '_, '_, '_>, ins: &Instr, ops: &Operands, vars: &VarValues) {
    // The operation an accumulating destination combines with in this execution.
    let acc = |w: Write| match w {
        Write::Overwrite => None,
        Write::Accumulate(op) => Some(op),
        Write::Group { op, .. } => w.accumulates_at(vars).then_some(op),
    };
    match (ins.opcode, ins.data) {
        (Opcode::Load, _) => load(m, ops),
        (Opcode::Store, _) => store(m, ops),
        (Opcode::Matmul, InstrData::Matmul { dst, .. }) => {
            nc_matmul(m, ops, dst.write.accumulates_at(vars))
        }
        (Opcode::Transpose, _) => nc_transpose(m, ops),
        (Opcode::TensorCopy, InstrData::Unary { dst, .. }) => {
            tensor_copy(m, ops, ins.engine, acc(dst.write))
        }
        (Opcode::Memset, InstrData::Fill { value, .. }) => memset(m, ops, value),
        (Opcode::TensorTensor, InstrData::Alu { dst, op, rev, .. }) => {
            tensor_tensor(m, ops, ins.engine, op[0], rev, acc(dst.write))
        }
        (Opcode::TensorScalar, InstrData::Alu { dst, op, rev, .. }) => {
            tensor_scalar(m, ops, ins.engine, op, rev, acc(dst.write))
        }
        (Opcode::ScalarTensorTensor, InstrData::Alu { dst, op, rev, .. }) => {
            scalar_tensor_tensor(m, ops, ins.engine, op, rev, acc(dst.write))
        }
        (
            Opcode::TensorScalarReduce,
            InstrData::Alu {
                dst,
                op,
                rev,
                acc: reduce,
                ..
            },
        ) => tensor_scalar_reduce(m, ops, ins.engine, op, rev, reduce, acc(dst.write)),
        (
            Opcode::Activation,
            InstrData::Act {
                dst,
                func,
                acc: reduce,
                ..
            },
        ) => activation(m, ops, func, reduce, acc(dst.write)),
        (
            Opcode::TensorReduce,
            InstrData::Reduce {
                dst,
                op,
                axes,
                negate,
                ..
            },
        ) => tensor_reduce(m, ops, op, axes, negate, acc(dst.write)),
        (Opcode::TensorTensorScan, InstrData::Scan { dst, op, rev, .. }) => {
            tensor_tensor_scan(m, ops, op, rev, acc(dst.write))
        }
        (Opcode::Iota, _) => iota(m, ops),
        (
            Opcode::AffineSelect,
            InstrData::Select {
                dst,
                pred: Pred::Affine { cmp, .. },
                ..
            },
        ) => affine_select(m, ops, cmp, acc(dst.write)),
        (Opcode::Select, InstrData::Select { dst, .. }) => select(m, ops, acc(dst.write)),
        (Opcode::Reciprocal, InstrData::Unary { dst, .. }) => {
            reciprocal(m, ops, ins.engine, acc(dst.write))
        }
        (Opcode::BnStats, _) => bn_stats(m, ops),
        (Opcode::BnAggr, _) => bn_aggr(m, ops),
        (Opcode::LoadTranspose2d, _) => load_transpose2d(m, ops),
        (Opcode::Max8, _) => top8::max8(m, ops),
        (Opcode::FindIndex8, _) => top8::nc_find_index8(m, ops),
        (Opcode::MatchReplace8, InstrData::Match8 { imm: Some(imm), .. }) => {
            top8::nc_match_replace8(m, ops, imm)
        }
        (
            Opcode::SelectReduce,
            InstrData::SelectReduce {
                dst,
                reverse,
                acc: reduce,
                ..
            },
        ) => select_reduce::select_reduce(m, ops, reverse, reduce, acc(dst.write)),
        (Opcode::IndirectLoad | Opcode::IndirectStore | Opcode::AtomicRmw, _) => {
            indirect(m, ins, ops)
        }
        (Opcode::GatherFlattened | Opcode::NcNGather, _) => gather_flattened(m, ops),
        (Opcode::TensorCopyDynamicSrc | Opcode::TensorCopyDynamicDst, _) => {
            // The source or destination shifted by the offset's value (`crate::dyncopy`), then `tensor_copy`;
            // the interpreter stopped the run before an offset out of range.
            let offset = ops.get(2);
            let bits = m.read(offset.loc, offset.dtype, offset.pattern.base);
            let value = crate::dyncopy::value(offset.dtype, bits);
            if let Ok(o) = crate::dyncopy::shifted(m.bound.program, ins, ops, vars, value) {
                tensor_copy(m, &o, ins.engine, None);
            }
        }
        (Opcode::DmaTranspose | Opcode::DmaTransposeSbuf, _) => dma_transpose(m, ins, ops),
        (
            Opcode::RangeSelect,
            InstrData::RangeSelect {
                dst,
                cmp,
                start,
                acc: reduce,
                ..
            },
        ) => range_select::range_select(m, ops, cmp, start, reduce, acc(dst.write)),
        (Opcode::NcStreamShuffle, InstrData::Shuffle { mask, .. }) => {
            shuffle::nc_stream_shuffle(m, ops, mask)
        }
        (Opcode::QuantizeMx, _) => mx::quantize_mx(m, ops),
        (Opcode::MatmulMx, InstrData::MatmulMx { dst, .. }) => {
            mx::nc_matmul_mx(m, ops, dst.write.accumulates_at(vars))
        }
        (Opcode::LocalGather, InstrData::LocalGather { elems, valid, .. }) => {
            local_gather::local_gather(m, ops, elems, valid)
        }
        (Opcode::SequenceBounds, _) => sequence_bounds::sequence_bounds(m, ops),
        (
            Opcode::NonzeroWithCount,
            InstrData::Nonzero {
                offset, padding, ..
            },
        ) => nonzero::nonzero_with_count(m, ops, offset, padding),
        (Opcode::TensorScalarCumulative, InstrData::Alu { dst, op, .. }) => {
            cumulative::tensor_scalar_cumulative(m, ops, op, acc(dst.write))
        }
        (Opcode::Exponential, InstrData::Act { acc: reduce, .. }) => exponential(m, ops, reduce),
        (
            Opcode::Activate2,
            InstrData::Act2 {
                op,
                rev,
                func,
                acc: reduce,
                ..
            },
        ) => activate2(m, ops, op, rev, func, reduce),
        // The interpreter runs register instructions on the instance's registers.
        (Opcode::RegisterMove | Opcode::RegisterLoad | Opcode::RegisterStore, _) => {}
        (Opcode::DmaCompute, _) => dma_compute::dma_compute(m, ops),
        (Opcode::TopK, InstrData::TopK { n, .. }) => topk::topk(m, ops, n),
        // Loop control is the interpreter's; the checks match every other opcode with its
        // format.
        (
            Opcode::LoopBegin
            | Opcode::LoopEnd
            | Opcode::Matmul
            | Opcode::TensorCopy
            | Opcode::Memset
            | Opcode::TensorTensor
            | Opcode::TensorScalar
            | Opcode::ScalarTensorTensor
            | Opcode::TensorScalarReduce
            | Opcode::Activation
            | Opcode::TensorReduce
            | Opcode::TensorTensorScan
            | Opcode::AffineSelect
            | Opcode::Select
            | Opcode::Reciprocal
            | Opcode::MatchReplace8
            | Opcode::SelectReduce
            | Opcode::MatmulMx
            | Opcode::RangeSelect
            | Opcode::NcStreamShuffle
            | Opcode::LocalGather
            | Opcode::TensorScalarCumulative
            | Opcode::NonzeroWithCount
            | Opcode::Exponential
            | Opcode::Activate2
            | Opcode::TopK,
            data,
        ) => unreachable!("opcode {:?} with operands {data:?}", ins.opcode),
        // `Reference::step` runs the generator's instructions.
        (
            Opcode::Rand
            | Opcode::RandomSeed
            | Opcode::Dropout
            | Opcode::Rng
            | Opcode::Rand2
            | Opcode::RandGetState
            | Opcode::RandSetState
            | Opcode::SetRngSeed,
            data,
        ) => {
            unreachable!("opcode {:?} with operands {data:?}", ins.opcode)
        }
    }
}

// ---- The instructions, in the op table's order ----

/// `load`: element `k` of the HBM access (row-major over its grid) becomes element `k` of the
/// SBUF tile (row-major over its view), converted to the tile's dtype ([`cast`]).
fn load(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    transfer(m, hbm, tile);
}

/// `store`: element `k` of the SBUF tile (row-major) becomes element `k` of the HBM output
/// access, converted to the tensor's dtype ([`cast`]).
fn store(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    transfer(m, tile, hbm);
}

/// `nc_matmul`: `dst[m, n] = Σ_k stationary[k, m] · moving[k, n]` in fp32 in PSUM, `m` and `n`
/// the row-major indices of the operands' free elements. Per output element, the definition
/// of `cpu::matmul` (its module docs, "Definition"):
///
/// ```text
/// acc = if accumulate { DAZ(dst[m, n]) } else { -0.0 }
/// for k in 0..K: acc = FTZ(round(acc + DAZ(stationary[k, m]) · DAZ(moving[k, n])))  // fused
/// dst[m, n] = acc, a NaN stored as the canonical NaN
/// ```
///
/// An accumulating matmul (`+=`, or an accumulation group past its first iteration) adds to
/// PSUM whatever its operation; the operands widen exactly to fp32.
fn nc_matmul(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, accumulate: bool) {
    let (dst, stationary, moving) = (ops.get(0), ops.get(1), ops.get(2));
    // Each operand's columns (free element `i`, over the contraction index `k`) in fp32,
    // subnormals flushed (DAZ).
    let columns = |m: &Machine<'_, '_, '_, '_>, r: &Resolved| -> Vec<Vec<f32>> {
        let e = Elems::own(r);
        (0..free_elems(&r.dims))
            .map(|i| {
                (0..r.dims[0])
                    .map(|k| matmul::daz(m.get(&e, unravel(&r.dims, k, i), Lane::F32).f32()))
                    .collect()
            })
            .collect()
    };
    let (s, mv) = (columns(m, stationary), columns(m, moving));
    let out = Elems::own(dst);
    for (mi, s_col) in s.iter().enumerate() {
        for (ni, mv_col) in mv.iter().enumerate() {
            let t = unravel(&dst.dims, mi, ni);
            let mut acc = if accumulate {
                matmul::daz(m.get(&out, t, Lane::F32).f32())
            } else {
                -0.0
            };
            for (&a, &b) in s_col.iter().zip(mv_col) {
                acc = matmul::step(a, b, acc);
            }
            let acc = if acc.is_nan() {
                alu::CANONICAL_NAN
            } else {
                acc
            };
            m.put(&out, t, Lane::F32, Value::from_f32(acc));
        }
    }
}

/// `nc_transpose`: `dst[f, p] = src[p, f]`, `f` the row-major index of the source's free
/// elements (the destination's partition), `p` the source's partition (the destination's one
/// non-trivial free dimension), converted to the destination's dtype ([`cast`]): TensorE
/// widens exactly to fp32 in PSUM, VectorE keeps the dtype.
fn nc_transpose(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let from = Elems::own(src);
    // The destination's free stride that runs along the source's partitions.
    let p_stride = (1..MAX_TILE_RANK)
        .find(|&j| dst.dims[j] != 1)
        .map_or(0, |j| dst.pattern.strides[j]);
    let mut moved = Vec::new();
    for p in 0..src.dims[0] {
        for (f, t) in free_indices(&src.dims, p).enumerate() {
            let at = dst.pattern.base + f as isize * dst.pattern.strides[0] + p as isize * p_stride;
            moved.push((at, m.read(from.loc, src.dtype, from.offset(t))));
        }
    }
    for (at, bits) in moved {
        m.write(dst.loc, dst.dtype, at, cast(src.dtype, dst.dtype, bits));
    }
}

/// `tensor_copy`: `dst = src`, converted to the destination's dtype. Vector and GpSimd copy
/// with [`cast`] (the bits within one dtype); the Scalar engine always goes through fp32
/// (`from_f32(to_f32(x))`, so an int32 above 2²⁴ rounds). An accumulating copy
/// (`dst += src`) is the ALU chain `bypass` combined into the destination ([`alu_chain`]).
fn tensor_copy(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    engine: Engine,
    accumulate: Option<Alu>,
) {
    if accumulate.is_some() {
        return alu_chain(m, ops, engine, [Alu::Bypass; 2], 0, None, accumulate);
    }
    let (dst, src) = (ops.get(0), ops.get(1));
    if engine == Engine::Scalar {
        let from = Elems::over(src, &dst.dims);
        elementwise(m, ops, Lane::F32, None, None, |m, t| {
            m.get(&from, t, Lane::F32)
        });
    } else {
        transfer(m, src, dst);
    }
}

/// `memset`: every element of `dst` becomes the value as fp32, stored in the destination's
/// dtype ([`convert::from_f32`]). The destination is overwritten (its `Write` is not
/// consulted, as the engines do).
fn memset(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, value: Scalar) {
    let dst = ops.get(0);
    let to = Elems::own(dst);
    let bits = convert::from_f32(dst.dtype, value.as_f32());
    for t in indices(dst.dims) {
        m.write(to.loc, to.dtype, to.offset(t), bits);
    }
}

/// `tensor_tensor`: `dst = data1 op data2` elementwise ([`alu_chain`] with one operation).
fn tensor_tensor(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    engine: Engine,
    op: Alu,
    rev: u8,
    accumulate: Option<Alu>,
) {
    alu_chain(m, ops, engine, [op, Alu::Bypass], rev, None, accumulate);
}

/// `tensor_scalar`: `dst = (data op0 operand0) op1 operand1`, each operand an immediate or a
/// `[P, 1]` column broadcast along the free elements ([`alu_chain`]).
fn tensor_scalar(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    engine: Engine,
    op: [Alu; 2],
    rev: u8,
    accumulate: Option<Alu>,
) {
    alu_chain(m, ops, engine, op, rev, None, accumulate);
}

/// `scalar_tensor_tensor`: `dst = (data op0 operand0) op1 operand1`, `operand0` an immediate
/// or a `[P, 1]` column, `operand1` a tile of the grid ([`alu_chain`]).
fn scalar_tensor_tensor(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    engine: Engine,
    op: [Alu; 2],
    rev: u8,
    accumulate: Option<Alu>,
) {
    alu_chain(m, ops, engine, op, rev, None, accumulate);
}

/// `tensor_scalar_reduce`: `dst = data op0 operand0` ([`alu_chain`]), and `reduce_res[p]` the
/// reduction ([`Fold`]) of partition `p`'s results.
fn tensor_scalar_reduce(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    engine: Engine,
    op: [Alu; 2],
    rev: u8,
    reduce: Option<AccOut>,
    accumulate: Option<Alu>,
) {
    alu_chain(m, ops, engine, op, rev, reduce, accumulate);
}

/// `activation`: `dst = func(data · scale + bias)` on fp32 lanes, the pre-activation one fused
/// multiply-add (`bias` −0.0 when absent), `func` by [`act::eval`]; combined into the
/// destination when it accumulates; with `reduce_res`, partition `p`'s results (after the
/// accumulation) reduced by [`Fold`] into `reduce_res[p]`.
fn activation(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    func: ActFn,
    reduce: Option<AccOut>,
    accumulate: Option<Alu>,
) {
    let dst = ops.get(0);
    let grid = dst.dims;
    let data = Elems::over(ops.get(1), &grid);
    let scale = Elems::over(ops.get(2), &grid);
    let bias = ops.slot(3).map(|r| Elems::over(r, &grid));
    elementwise(m, ops, Lane::F32, reduce, accumulate, |m, t| {
        let x = m.get(&data, t, Lane::F32).f32();
        let s = m.get(&scale, t, Lane::F32).f32();
        let b = bias.map_or(-0.0, |b| m.get(&b, t, Lane::F32).f32());
        Value::from_f32(act::eval(func, x.mul_add(s, b)))
    });
}

/// `activate2`: per element, the tensor-scalar stage on fp32 lanes, `v = (x op0 imm0) op1
/// imm1` with [`alu::eval`] (an operation that is `bypass` passes `v` on; bit `j` of `rev`
/// computes `imm_j op_j v`), then `func` by [`act::eval`], stored in the destination's dtype;
/// with `reduce`, each partition's fp32 results reduced as `activation`'s are.
fn activate2(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    op: [Alu; 2],
    rev: u8,
    func: ActFn,
    reduce: Option<AccOut>,
) {
    let grid = ops.get(0).dims;
    let data = Elems::over(ops.get(1), &grid);
    let imm = [2, 3].map(|s| ops.slot(s).map(|r| Elems::over(r, &grid)));
    elementwise(m, ops, Lane::F32, reduce, None, |m, t| {
        let mut v = m.get(&data, t, Lane::F32).f32();
        for (j, (&o, k)) in op.iter().zip(imm).enumerate() {
            if o == Alu::Bypass {
                continue;
            }
            // The rule gives every operation that is not `bypass` its operand.
            let k = k.map_or(0.0, |k| m.get(&k, t, Lane::F32).f32());
            v = if rev >> j & 1 == 1 {
                alu::eval(o, k, v)
            } else {
                alu::eval(o, v, k)
            };
        }
        Value::from_f32(act::eval(func, v))
    });
}

/// `exponential`: `exp(x − max_value)` on fp32 lanes, the subtraction [`alu::eval`]'s and
/// the exponential [`act::eval`]'s (`max_value` 0 when absent), stored in the destination's
/// dtype; with `reduce`, each partition's results (fp32, before the conversion) summed in
/// row-major order into its `reduce_res` element, as `activation` does.
fn exponential(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, reduce: Option<AccOut>) {
    let grid = ops.get(0).dims;
    let data = Elems::over(ops.get(1), &grid);
    let max = ops.slot(3).map(|r| Elems::over(r, &grid));
    elementwise(m, ops, Lane::F32, reduce, None, |m, t| {
        let x = m.get(&data, t, Lane::F32).f32();
        let mx = max.map_or(0.0, |b| m.get(&b, t, Lane::F32).f32());
        Value::from_f32(act::eval(ActFn::Exp, alu::eval(Alu::Subtract, x, mx)))
    });
}

/// `tensor_reduce`: for each partition and each position of the kept axes, `op` over the
/// reduced free axes (bit `j` of `axes` = free axis `j`) in the order of [`Fold`], the values
/// taken in row-major order of the reduced axes; then negated when asked (fp32: multiplied by
/// −1 with [`alu::eval`]; int32: two's-complement negation), combined into the destination when
/// it accumulates, and stored. Bit operations reduce int32 lanes, the others fp32 lanes. Output
/// elements are computed in row-major order, each read completely before it is written.
fn tensor_reduce(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    op: Alu,
    axes: u8,
    negate: bool,
    accumulate: Option<Alu>,
) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let lane = Lane::of(op);
    let grid = src.dims;
    let reduced = |j: usize| j > 0 && axes >> (j - 1) & 1 == 1;
    let (mut kept_grid, mut red_grid) = (grid, grid);
    red_grid[0] = 1;
    for j in 1..MAX_TILE_RANK {
        if reduced(j) {
            kept_grid[j] = 1;
        } else {
            red_grid[j] = 1;
        }
    }
    let from = Elems::own(src);
    let to = Elems::over(dst, &kept_grid);
    for k in indices(kept_grid) {
        let mut fold = Fold::new(op, lane);
        for q in indices(red_grid) {
            let t: [usize; MAX_TILE_RANK] =
                core::array::from_fn(|j| if reduced(j) { q[j] } else { k[j] });
            fold.push(m.get(&from, t, lane));
        }
        let mut v = fold.finish();
        if negate {
            v = match lane {
                Lane::F32 => Value::from_f32(alu::eval(Alu::Multiply, v.f32(), -1.0)),
                Lane::I32 => Value::from_i32(v.i32().wrapping_neg()),
            };
        }
        if let Some(acc) = accumulate {
            v = lane.op(acc, m.get(&to, k, lane), v);
        }
        m.put(&to, k, lane, v);
    }
}

/// `tensor_tensor_scan`: along each partition's free elements in row-major order,
/// `r = (data0[i] op0 r) op1 data1[i]` from `r = initial[p]` on fp32 lanes ([`alu::eval`], each
/// step rounded), `dst[i] = r` (combined into the destination when it accumulates; the scan
/// carries `r`, not the combined value).
fn tensor_tensor_scan(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    op: [Alu; 2],
    rev: u8,
    accumulate: Option<Alu>,
) {
    let dst = ops.get(0);
    let grid = dst.dims;
    let (a, b, init) = (
        Elems::over(ops.get(1), &grid),
        Elems::over(ops.get(2), &grid),
        Elems::over(ops.get(3), &grid),
    );
    let to = Elems::own(dst);
    for p in 0..grid[0] {
        let mut r = m.get(&init, first(p), Lane::F32).f32();
        let results: Vec<_> = free_indices(&grid, p)
            .map(|t| {
                let (x, y) = (m.get(&a, t, Lane::F32).f32(), m.get(&b, t, Lane::F32).f32());
                let first = if rev & 1 == 1 {
                    alu::eval(op[0], r, x)
                } else {
                    alu::eval(op[0], x, r)
                };
                r = if rev & 2 == 2 {
                    alu::eval(op[1], y, first)
                } else {
                    alu::eval(op[1], first, y)
                };
                let mut v = Value::from_f32(r);
                if let Some(acc) = accumulate {
                    v = Lane::F32.op(acc, m.get(&to, t, Lane::F32), v);
                }
                (t, v)
            })
            .collect();
        for (t, v) in results {
            m.put(&to, t, Lane::F32, v);
        }
    }
}

/// `iota`: each element of `dst` is the affine expression's value at its grid index, computed
/// in 64 bits and wrapped to int32, then stored in the destination's dtype: through fp32 for
/// a float dtype, as an int32 lane ([`convert::from_i32`]: the low bits) otherwise.
fn iota(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let dst = ops.get(0);
    let lane = if dst.dtype.is_float() {
        Lane::F32
    } else {
        Lane::I32
    };
    let expr = Elems::over(ops.get(1), &dst.dims);
    elementwise(m, ops, lane, None, None, |m, t| m.get(&expr, t, lane));
}

/// `affine_select`: `dst = (expr cmp 0) ? on_true_tile : on_false_value` on fp32 lanes, `expr`
/// the affine expression of the grid index and the loop values wrapped to int32 (as `iota`'s);
/// combined into the destination when it accumulates.
fn affine_select(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    cmp: Cmp,
    accumulate: Option<Alu>,
) {
    let grid = ops.get(0).dims;
    let (pred, on_true, on_false) = (
        Elems::over(ops.get(1), &grid),
        Elems::over(ops.get(2), &grid),
        Elems::over(ops.get(3), &grid),
    );
    elementwise(m, ops, Lane::F32, None, accumulate, |m, t| {
        let e = m.get(&pred, t, Lane::I32).i32();
        let side = if cmp.holds(i64::from(e)) {
            &on_true
        } else {
            &on_false
        };
        m.get(side, t, Lane::F32)
    });
}

/// `select` (`nl.where`): `dst = predicate ≠ 0 ? on_true : on_false` on fp32 lanes (a NaN
/// predicate is true); combined into the destination when it accumulates.
fn select(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, accumulate: Option<Alu>) {
    let grid = ops.get(0).dims;
    let (pred, on_true, on_false) = (
        Elems::over(ops.get(1), &grid),
        Elems::over(ops.get(2), &grid),
        Elems::over(ops.get(3), &grid),
    );
    elementwise(m, ops, Lane::F32, None, accumulate, |m, t| {
        let side = if m.get(&pred, t, Lane::F32).f32() != 0.0 {
            &on_true
        } else {
            &on_false
        };
        m.get(side, t, Lane::F32)
    });
}

/// `reciprocal`: `dst = 1 / data` ([`alu_chain`] with `reciprocal`: IEEE division).
fn reciprocal(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    engine: Engine,
    accumulate: Option<Alu>,
) {
    alu_chain(
        m,
        ops,
        engine,
        [Alu::Reciprocal, Alu::Bypass],
        0,
        None,
        accumulate,
    );
}

/// `bn_stats`: per partition, of its free elements in row-major order (fp32), the
/// `[count, mean, m2]` of the even-indexed ones, then of the odd-indexed ones ([`stats`]),
/// stored in row-major order of the destination's free elements.
fn bn_stats(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    per_partition(m, ops, |row| {
        let even: Vec<f32> = row.iter().copied().step_by(2).collect();
        let odd: Vec<f32> = row.iter().copied().skip(1).step_by(2).collect();
        [stats(&even), stats(&odd)].concat()
    });
}

/// `bn_aggr`: per partition, the mean and variance of the groups `[count, mean, m2]` of its
/// row (concatenated `bn_stats` results), merged left to right with Chan et al.'s update:
///
/// ```text
/// n = na + nb   (a group that leaves n = 0 is skipped)
/// δ = mb − ma
/// mean = ma + δ · (nb / n)
/// m2 = (m2a + m2b) + (δ · δ) · (na · nb / n)
/// ```
///
/// each operation an IEEE fp32 operation in that order (as `engines/reduce.rs` defines it: a NaN
/// keeps the payload the host's arithmetic propagates, it is not made canonical); the
/// variance is `m2 / n` (0 for no element). `[mean, variance]` are stored in row-major order of
/// the destination's free elements.
fn bn_aggr(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    per_partition(m, ops, |row| {
        let (mut n, mut mean, mut m2) = (0f32, 0f32, 0f32);
        for g in row.chunks_exact(3) {
            let (nb, mb, m2b) = (g[0], g[1], g[2]);
            let total = n + nb;
            if total == 0.0 {
                continue;
            }
            let delta = mb - mean;
            mean += delta * (nb / total);
            m2 = (m2 + m2b) + (delta * delta) * (n * nb / total);
            n = total;
        }
        let var = if n == 0.0 { 0.0 } else { m2 / n };
        vec![mean, var]
    });
}

/// `load_transpose2d`: the HBM access's 2-D grid `[A, B]` into the SBUF tile `[B, A]`: access
/// element `(a, b)` becomes tile element `(b, a)` (`b` the partition, `a` the tile's one
/// non-trivial free dimension), converted to the tile's dtype ([`cast`]). An access with one
/// non-trivial axis is `[A, 1]` when that axis is its first, else `[1, B]`.
fn load_transpose2d(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    let g = hbm.dims;
    let mut axes = (0..MAX_TILE_RANK).filter(|&j| g[j] != 1);
    let (ga, gb) = match (axes.next(), axes.next()) {
        (Some(a), Some(b)) => (Some(a), Some(b)),
        (Some(a), None) if a == 0 => (Some(a), None),
        (Some(b), None) => (None, Some(b)),
        _ => (None, None),
    };
    let a_stride = (1..MAX_TILE_RANK)
        .find(|&j| tile.dims[j] != 1)
        .map_or(0, |j| tile.pattern.strides[j]);
    let from = Elems::own(hbm);
    let moved: Vec<_> = indices(g)
        .map(|t| {
            let a = ga.map_or(0, |j| t[j]) as isize;
            let b = gb.map_or(0, |j| t[j]) as isize;
            let at = tile.pattern.base + b * tile.pattern.strides[0] + a * a_stride;
            (at, m.read(from.loc, hbm.dtype, from.offset(t)))
        })
        .collect();
    for (at, bits) in moved {
        m.write(tile.loc, tile.dtype, at, cast(hbm.dtype, tile.dtype, bits));
    }
}

/// `dma_transpose` (from HBM) and `dma_transpose_sbuf` (from SBUF): with `axes` NKI's
/// permutation for the instruction's rank (its destination's; `[1, 0]`, `[2, 1, 0]` or
/// `[3, 1, 2, 0]`, [`nki_lang::ops::dma_transpose_axes`]), the destination's element at `t`
/// becomes the source's element at `s`, `s[axes[i]] = t[i]`, converted to the destination's
/// dtype ([`cast`]). All the source's elements are read, then written.
fn dma_transpose(m: &mut Machine<'_, '_, '_, '_>, ins: &Instr, ops: &Operands) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let rank = crate::operand::grid_rank(m.bound.program, ins);
    let axes = nki_lang::ops::dma_transpose_padded(rank);
    let (from, to) = (Elems::own(src), Elems::own(dst));
    let moved: Vec<_> = indices(dst.dims)
        .map(|t| {
            let mut s = [0usize; MAX_TILE_RANK];
            for (i, &a) in axes.iter().enumerate() {
                s[a] = t[i];
            }
            (to.offset(t), m.read(from.loc, from.dtype, from.offset(s)))
        })
        .collect();
    for (at, bits) in moved {
        m.write(to.loc, to.dtype, at, cast(from.dtype, to.dtype, bits));
    }
}

/// `indirect_load`, `indirect_store`, `atomic_rmw`: every row index is read from the index
/// column first (`crate::indirect::rows`, which the interpreter has checked), then partition
/// by partition in order, the one-partition [`load`] or [`store`] of the row its index names,
/// or for `atomic_rmw` each element of the row becomes `old + value`: both loaded to fp32
/// lanes, [`alu::eval`]'s `add`, stored in the tensor's dtype. A row named twice is written
/// twice, in partition order (a scatter keeps the last; `atomic_rmw` accumulates both). A
/// scalar-offset DMA (`.ap(..., scalar_offset=)`) is the `load` or `store` of its access moved
/// by the offset (`crate::indirect::shifted`).
fn indirect(m: &mut Machine<'_, '_, '_, '_>, ins: &Instr, ops: &Operands) {
    if let InstrData::Indirect {
        mode: nki_lang::IndirectMode::Scalar { .. },
        ..
    } = ins.data
    {
        // A scalar offset: one `load` or `store` of the access it moves.
        let Ok(moved) = crate::indirect::shifted(m.bound, ins, ops, m.sbuf) else {
            return;
        };
        if ins.opcode == Opcode::IndirectLoad {
            load(m, &moved);
        } else {
            store(m, &moved);
        }
        return;
    }
    let Ok(rows) = crate::indirect::rows(m.bound, ins, ops, m.sbuf) else {
        return;
    };
    for (k, &row) in rows.rows().iter().enumerate() {
        let one = crate::indirect::row_operands(ops, k, row);
        if ins.opcode == Opcode::IndirectLoad {
            load(m, &one);
        } else if ins.opcode == Opcode::IndirectStore {
            store(m, &one);
        } else {
            // `atomic_rmw`: the dispatch sends only the three indirect opcodes here.
            let (value, dst) = (Elems::own(one.get(0)), Elems::own(one.get(1)));
            for t in indices(one.get(1).dims) {
                let old = m.get(&dst, t, Lane::F32).f32();
                let v = m.get(&value, t, Lane::F32).f32();
                let sum = Value::from_f32(alu::eval(Alu::Add, old, v));
                m.put(&dst, t, Lane::F32, sum);
            }
        }
    }
}

/// `gather_flattened`: destination element `t` of partition `p` (row-major) is element `f`
/// of partition `p` of `data`, its free elements flattened row-major, `f` the value of
/// `indices[t]` (int32 or uint32); converted to the destination's dtype ([`cast`]). Every
/// source element is read before any is written. An index outside the partition's elements
/// stops the run before the instruction (`crate::gather::check`): none reaches here.
fn gather_flattened(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (dst, data, idx) = (ops.get(0), ops.get(1), ops.get(2));
    let (d, s, ix) = (Elems::own(dst), Elems::own(data), Elems::own(idx));
    let n = free_elems(&data.dims);
    let moved: Vec<_> = indices(dst.dims)
        .filter_map(|t| {
            let f = crate::gather::position(idx.dtype, m.read(ix.loc, idx.dtype, ix.offset(t)));
            let f = usize::try_from(f).ok().filter(|&f| f < n)?;
            let bits = m.read(s.loc, data.dtype, s.offset(unravel(&data.dims, t[0], f)));
            Some((d.offset(t), bits))
        })
        .collect();
    for (at, bits) in moved {
        m.write(dst.loc, dst.dtype, at, cast(data.dtype, dst.dtype, bits));
    }
}

// ---- What several instructions share ----

/// An ALU chain, the definition behind `tensor_tensor`, `tensor_scalar`,
/// `scalar_tensor_tensor`, `tensor_scalar_reduce`, `reciprocal` and the accumulating
/// `tensor_copy`: for each element,
///
/// ```text
/// x = src0 op0 src1        (operands swapped when bit 0 of `rev` is set)
/// y = x op1 src2           (swapped by bit 1; when op1 is `bypass`, y = x)
/// y = old op y             (when the destination accumulates with op)
/// ```
///
/// on the chain's lanes ([`alu_lane`]); an absent source reads as lane 0. On int32 lanes a
/// logical `right_shift` of an `i8`/`i16` first operand (or accumulated destination) shifts
/// the dtype's own bits: the sign-extended lane is cut to the dtype's width first. With
/// `reduce`, partition `p`'s results `y` are reduced by [`Fold`] into `reduce_res[p]`.
fn alu_chain(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    engine: Engine,
    op: [Alu; 2],
    rev: u8,
    reduce: Option<AccOut>,
    accumulate: Option<Alu>,
) {
    let lane = alu_lane(
        engine,
        [op[0], op[1], accumulate.unwrap_or(Alu::Bypass)],
        ops,
    );
    let grid = ops.get(0).dims;
    let src = |slot: usize| ops.slot(slot).map(|r| Elems::over(r, &grid));
    let (s0, s1, s2) = (src(1), src(2), src(3));
    let width = ops.slot(1).map_or(u32::MAX, |r| width_mask(r.dtype));
    let narrow = lane == Lane::I32 && op[0] == Alu::RightShift;
    let apply = |op: Alu, a: Value, b: Value, swap: bool| {
        if swap {
            lane.op(op, b, a)
        } else {
            lane.op(op, a, b)
        }
    };
    elementwise(m, ops, lane, reduce, accumulate, |m, t| {
        let read = |s: Option<Elems>| s.map_or(Value(0), |s| m.get(&s, t, lane));
        let mut a = read(s0);
        if narrow {
            a = Value(a.0 & width);
        }
        let x = apply(op[0], a, read(s1), rev & 1 == 1);
        if op[1] == Alu::Bypass {
            x
        } else {
            apply(op[1], x, read(s2), rev >> 1 & 1 == 1)
        }
    });
}

/// The lanes an ALU chain computes on: int32 when one of its operations (the two of the chain
/// and the destination's accumulation) is a bit operation, or on GpSimd when every operation is
/// `add`, `subtract`, `multiply` or `bypass` and every operand (destination included) is an
/// integer or bool (an immediate: an integer one); fp32 otherwise.
fn alu_lane(engine: Engine, op: [Alu; 3], ops: &Operands) -> Lane {
    if op.iter().any(|o| o.class() == AluClass::Bitvec) {
        return Lane::I32;
    }
    let is_int = |r: Option<&Resolved>| {
        r.is_none_or(|r| match r.loc {
            Loc::Imm(x) => matches!(x, Scalar::Int(_)),
            Loc::Expr => true,
            Loc::Sbuf | Loc::Psum | Loc::Hbm(_) => r.dtype.is_int() || r.dtype == DType::Bool,
        })
    };
    let int_op = |o: &Alu| matches!(o, Alu::Add | Alu::Subtract | Alu::Multiply | Alu::Bypass);
    let int_operands = (1..4).all(|s| is_int(ops.slot(s))) && is_int(Some(ops.get(0)));
    if engine == Engine::GpSimd && op.iter().all(int_op) && int_operands {
        Lane::I32
    } else {
        Lane::F32
    }
}

/// The bits of a narrow signed integer's sign-extended int32 lane that are its own.
fn width_mask(dtype: DType) -> u32 {
    match dtype {
        DType::I8 => 0xff,
        DType::I16 => 0xffff,
        DType::F32
        | DType::Tf32
        | DType::Bf16
        | DType::F16
        | DType::F8E4M3
        | DType::F8E5M2
        | DType::F8E4M3Fn
        | DType::F4E2M1Fn
        | DType::F8E8M0Fnu
        | DType::F8E5M2X4
        | DType::F8E4M3FnX4
        | DType::F4E2M1FnX4
        | DType::I32
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::Bool => u32::MAX,
    }
}

/// Runs an elementwise instruction over its grid (the destination's dims), partition by
/// partition: for each element of the partition (row-major), `result(t)`, combined into the
/// destination's old value with `accumulate` (`old op result`; a logical `right_shift` on int32
/// lanes cuts the old value to the destination's width first) and folded into the partition's
/// reduction when there is one; then the partition's results are stored, and its reduction goes
/// to element `p` of `reduce_res` (slot 4).
fn elementwise(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    lane: Lane,
    reduce: Option<AccOut>,
    accumulate: Option<Alu>,
    result: impl Fn(&Machine<'_, '_, '_, '_>, [usize; MAX_TILE_RANK]) -> Value,
) {
    let dst = ops.get(0);
    let grid = dst.dims;
    let to = Elems::own(dst);
    let reduce_res = reduce.map(|r| (r.op, Elems::over(ops.get(4), &grid)));
    for p in 0..grid[0] {
        let mut fold = reduce_res.map(|(op, _)| Fold::new(op, lane));
        let results: Vec<_> = free_indices(&grid, p)
            .map(|t| {
                let mut v = result(m, t);
                if let Some(op) = accumulate {
                    let mut old = m.get(&to, t, lane);
                    if op == Alu::RightShift && lane == Lane::I32 {
                        old = Value(old.0 & width_mask(dst.dtype));
                    }
                    v = lane.op(op, old, v);
                }
                if let Some(f) = fold.as_mut() {
                    f.push(v);
                }
                (t, v)
            })
            .collect();
        for (t, v) in results {
            m.put(&to, t, lane, v);
        }
        if let (Some(f), Some((_, res))) = (fold, reduce_res) {
            m.put(&res, first(p), lane, f.finish());
        }
    }
}

/// Moves element `k` of `from` (row-major over its dims) to element `k` of `to`, converted
/// with [`cast`]: `load`, `store`, and `tensor_copy` on Vector and GpSimd. The two sides have the
/// same dimensions up to size-1 ones (the checks make sure). Every source element is read
/// before the first is written.
fn transfer(m: &mut Machine<'_, '_, '_, '_>, from: &Resolved, to: &Resolved) {
    let (src, dst) = (Elems::own(from), Elems::own(to));
    let moved: Vec<_> = indices(from.dims)
        .zip(indices(to.dims))
        .map(|(s, d)| (d, m.read(src.loc, src.dtype, src.offset(s))))
        .collect();
    for (d, bits) in moved {
        m.write(
            dst.loc,
            dst.dtype,
            dst.offset(d),
            cast(src.dtype, dst.dtype, bits),
        );
    }
}

use crate::cpu::convert::cast;

/// Runs `f` on each partition's values (the source's free elements in row-major order, loaded
/// to fp32) and stores the fp32 values it returns in that partition of the destination, in
/// row-major order of its free elements: `bn_stats` and `bn_aggr`.
fn per_partition(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, f: impl Fn(&[f32]) -> Vec<f32>) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let (from, to) = (Elems::own(src), Elems::own(dst));
    for p in 0..src.dims[0] {
        let row: Vec<f32> = free_indices(&src.dims, p)
            .map(|t| m.get(&from, t, Lane::F32).f32())
            .collect();
        for (t, v) in free_indices(&dst.dims, p).zip(f(&row)) {
            m.put(&to, t, Lane::F32, Value::from_f32(v));
        }
    }
}

/// `[count, mean, m2]` of one `bn_stats` group in fp32: the mean is the [`Fold`] sum divided by
/// the count, `m2` the [`Fold`] sum of the squares of the differences from the mean, each
/// operation by [`alu::eval`]. An empty group gives `[0, 0, 0]`.
fn stats(values: &[f32]) -> Vec<f32> {
    if values.is_empty() {
        return vec![0.0; 3];
    }
    let sum = |xs: &mut dyn Iterator<Item = f32>| {
        let mut fold = Fold::new(Alu::Add, Lane::F32);
        xs.for_each(|x| fold.push(Value::from_f32(x)));
        fold.finish().f32()
    };
    let n = values.len() as f32;
    let mean = alu::eval(Alu::Divide, sum(&mut values.iter().copied()), n);
    let m2 = sum(&mut values.iter().map(|&x| {
        let d = alu::eval(Alu::Subtract, x, mean);
        alu::eval(Alu::Multiply, d, d)
    }));
    vec![n, mean, m2]
}

/// A reduction in the order `docs/numerics.md` defines: value `i` is combined into partial
/// `i mod 16`, each partial starting from the operation's identity ([`Alu::identity`]: −0.0
/// for `add`, 1 for `multiply`, −∞ for `maximum`, ...; on int32 lanes converted to an integer);
/// then partial `l` absorbs partial `l + 8`, then `l + 4`, `l + 2`, `l + 1`, leaving the result
/// in partial 0. Each combination is the lane's [`Lane::op`].
struct Fold {
    op: Alu,
    lane: Lane,
    partials: [Value; 16],
    count: usize,
}

impl Fold {
    fn new(op: Alu, lane: Lane) -> Fold {
        let id = op.identity().unwrap_or(0.0);
        let id = match lane {
            Lane::F32 => Value::from_f32(id),
            Lane::I32 => Value::from_i32(id as i32),
        };
        Fold {
            op,
            lane,
            partials: [id; 16],
            count: 0,
        }
    }

    fn push(&mut self, v: Value) {
        let l = self.count % 16;
        self.partials[l] = self.lane.op(self.op, self.partials[l], v);
        self.count += 1;
    }

    fn finish(mut self) -> Value {
        for w in [8, 4, 2, 1] {
            for l in 0..w {
                self.partials[l] = self
                    .lane
                    .op(self.op, self.partials[l], self.partials[l + w]);
            }
        }
        self.partials[0]
    }
}

// ---- Lanes, elements and memories ----

/// What an engine computes on: fp32 or int32 lanes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Lane {
    F32,
    I32,
}

/// One lane's 32 bits: an fp32 or an int32, as its [`Lane`] says.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Value(u32);

impl Value {
    fn from_f32(x: f32) -> Value {
        Value(x.to_bits())
    }

    fn from_i32(x: i32) -> Value {
        Value(x as u32)
    }

    fn f32(self) -> f32 {
        f32::from_bits(self.0)
    }

    fn i32(self) -> i32 {
        self.0 as i32
    }
}

impl Lane {
    /// The lanes a reduction with `op` folds: int32 for bit operations, fp32 otherwise.
    fn of(op: Alu) -> Lane {
        if op.class() == AluClass::Bitvec {
            Lane::I32
        } else {
            Lane::F32
        }
    }

    /// `a op b`: [`alu::eval`] on fp32 lanes, [`alu::eval_bits`] on int32 lanes.
    fn op(self, op: Alu, a: Value, b: Value) -> Value {
        match self {
            Lane::F32 => Value::from_f32(alu::eval(op, a.f32(), b.f32())),
            Lane::I32 => Value::from_i32(alu::eval_bits(op, a.i32(), b.i32())),
        }
    }

    /// An element of `dtype` (its bits) in a lane: [`convert::to_f32`] / [`convert::to_i32`].
    fn load(self, dtype: DType, bits: u32) -> Value {
        match self {
            Lane::F32 => Value::from_f32(convert::to_f32(dtype, bits)),
            Lane::I32 => Value::from_i32(convert::to_i32(dtype, bits)),
        }
    }

    /// A lane as an element of `dtype` (its bits): [`convert::from_f32`] /
    /// [`convert::from_i32`].
    fn store(self, dtype: DType, v: Value) -> u32 {
        match self {
            Lane::F32 => convert::from_f32(dtype, v.f32()),
            Lane::I32 => convert::from_i32(dtype, v.i32()),
        }
    }

    /// An immediate in a lane: an fp32 lane holds [`Scalar::as_f32`]; an int32 lane an integer
    /// immediate's value, or a float immediate converted toward zero (saturating).
    fn imm(self, x: Scalar) -> Value {
        match (self, x) {
            (Lane::F32, x) => Value::from_f32(x.as_f32()),
            (Lane::I32, Scalar::Int(v)) => Value::from_i32(v),
            (Lane::I32, Scalar::Float(bits)) => Value::from_i32(f32::from_bits(bits) as i32),
        }
    }

    /// An affine expression's value (computed in 64 bits) in a lane: wrapped to int32, and on
    /// an fp32 lane that int32 rounded to fp32.
    fn expr(self, v: i64) -> Value {
        let v = v as i32;
        match self {
            Lane::F32 => Value::from_f32(v as f32),
            Lane::I32 => Value::from_i32(v),
        }
    }
}

/// One operand's elements over an instruction's grid: element `t` is at
/// `base + Σ strides[j] · tj` of `loc` (or, for an expression, has that value; an immediate
/// has one value for every `t`).
#[derive(Copy, Clone, Debug)]
struct Elems {
    loc: Loc,
    dtype: DType,
    base: isize,
    strides: [isize; MAX_TILE_RANK],
}

impl Elems {
    /// Operand `r` over its own dimensions.
    fn own(r: &Resolved) -> Elems {
        Elems {
            loc: r.loc,
            dtype: r.dtype,
            base: r.pattern.base,
            strides: r.pattern.strides,
        }
    }

    /// Operand `r` read over the grid `grid`: broadcast along the grid's dimensions where it
    /// has size 1 ([`Resolved::strides_on`]).
    fn over(r: &Resolved, grid: &[usize; MAX_TILE_RANK]) -> Elems {
        Elems {
            strides: r.strides_on(grid),
            ..Elems::own(r)
        }
    }

    /// The element offset (or expression value) at grid index `t`.
    fn offset(&self, t: [usize; MAX_TILE_RANK]) -> isize {
        self.strides
            .iter()
            .zip(t)
            .fold(self.base, |at, (&s, tj)| at + s * tj as isize)
    }
}

/// The memories an instruction reads and writes: SBUF, PSUM and the launch's HBM tensors.
struct Machine<'m, 'i, 'a, 'o> {
    sbuf: &'m mut [u8],
    psum: &'m mut [u8],
    bound: &'m mut Bound<'i, 'a, 'o>,
}

impl Machine<'_, '_, '_, '_> {
    /// The bytes of element `at` of `dtype` in `loc`'s memory.
    fn span(loc: Loc, dtype: DType, at: isize) -> core::ops::Range<usize> {
        let size = dtype.size() as usize;
        let at = usize::try_from(at)
            .unwrap_or_else(|_| panic!("element {at} of {loc:?}: the checks keep it in range"));
        at * size..(at + 1) * size
    }

    /// The bits of element `at` of `dtype` in `loc`'s memory (little-endian, zero-extended).
    fn read(&self, loc: Loc, dtype: DType, at: isize) -> u32 {
        let mem: &[u8] = match loc {
            Loc::Sbuf => self.sbuf,
            Loc::Psum => self.psum,
            Loc::Hbm(t) => self.bound.hbm(usize::from(t)).0,
            Loc::Expr | Loc::Imm(_) => unreachable!("{loc:?} is not in memory"),
        };
        let mut word = [0u8; 4];
        let bytes = &mem[Self::span(loc, dtype, at)];
        word[..bytes.len()].copy_from_slice(bytes);
        u32::from_le_bytes(word)
    }

    /// Writes element `at` of `dtype` in `loc`'s memory: the low bytes of `bits`.
    fn write(&mut self, loc: Loc, dtype: DType, at: isize, bits: u32) {
        let span = Self::span(loc, dtype, at);
        let n = span.len();
        let mem: &mut [u8] = match loc {
            Loc::Sbuf => self.sbuf,
            Loc::Psum => self.psum,
            Loc::Hbm(t) => self.bound.hbm_mut(usize::from(t)).0,
            Loc::Expr | Loc::Imm(_) => unreachable!("{loc:?} is not in memory"),
        };
        mem[span].copy_from_slice(&bits.to_le_bytes()[..n]);
    }

    /// Element `t` of an operand in a lane: an immediate's value, an expression's value, or
    /// the element loaded from memory.
    fn get(&self, e: &Elems, t: [usize; MAX_TILE_RANK], lane: Lane) -> Value {
        match e.loc {
            Loc::Imm(x) => lane.imm(x),
            Loc::Expr => {
                let v = e.strides.iter().zip(t).fold(e.base as i64, |v, (&s, tj)| {
                    v.wrapping_add((s as i64).wrapping_mul(tj as i64))
                });
                lane.expr(v)
            }
            loc @ (Loc::Sbuf | Loc::Psum | Loc::Hbm(_)) => {
                lane.load(e.dtype, self.read(loc, e.dtype, e.offset(t)))
            }
        }
    }

    /// Stores a lane as element `t` of an operand in memory.
    fn put(&mut self, e: &Elems, t: [usize; MAX_TILE_RANK], lane: Lane, v: Value) {
        let bits = lane.store(e.dtype, v);
        self.write(e.loc, e.dtype, e.offset(t), bits);
    }
}

// ---- Grid indices ----

/// The indices `(t0, …, t4)` of a grid, in row-major order.
fn indices(dims: [usize; MAX_TILE_RANK]) -> impl Iterator<Item = [usize; MAX_TILE_RANK]> {
    let n: usize = dims.iter().product();
    (0..n).map(move |k| unravel(&dims, 0, k))
}

/// The indices of partition `p`'s free elements of a grid, in row-major order.
fn free_indices(
    dims: &[usize; MAX_TILE_RANK],
    p: usize,
) -> impl Iterator<Item = [usize; MAX_TILE_RANK]> + use<> {
    let dims = *dims;
    (0..free_elems(&dims)).map(move |k| unravel(&dims, p, k))
}

/// The index of partition `p`'s first element.
fn first(p: usize) -> [usize; MAX_TILE_RANK] {
    let mut t = [0; MAX_TILE_RANK];
    t[0] = p;
    t
}

/// The number of free elements per partition of a grid.
fn free_elems(dims: &[usize; MAX_TILE_RANK]) -> usize {
    dims[1..].iter().product()
}

/// The index of partition `p`'s free element `k` (row-major) of a grid; with `p = 0` and `k`
/// up to the grid's size, the row-major index `k` of the whole grid.
fn unravel(dims: &[usize; MAX_TILE_RANK], p: usize, mut k: usize) -> [usize; MAX_TILE_RANK] {
    let mut t = [0; MAX_TILE_RANK];
    for j in (1..MAX_TILE_RANK).rev() {
        t[j] = k % dims[j];
        k /= dims[j];
    }
    t[0] = p + k;
    t
}
