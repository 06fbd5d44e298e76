//! The rule of `tensor_scalar_cumulative`: the Vector engine's running reduction of a
//! tensor-scalar result along each partition.

use super::infer::{
    Blame, InferIn, Inferred, Part, Slot, check_free_size, elementwise, malformed,
    scalar_or_column, tile, unsupported,
};
use crate::dtype::DType;
use crate::func::{Alu, AluClass};
use crate::ir::InstrData;
use crate::rules::RuleViolation;

/// The fp32 value the accumulator register starts from under `reduce_cmd = reset_reduce`:
/// `0` for add and subtract, `1` for multiply, `-inf` for maximum, `+inf` for minimum (NKI's
/// pseudocode); `None` for an operation the instruction does not accumulate with.
pub const fn cumulative_reset(op1: Alu) -> Option<f32> {
    if matches!(op1, Alu::Add | Alu::Subtract) {
        Some(0.0)
    } else if matches!(op1, Alu::Multiply) {
        Some(1.0)
    } else if matches!(op1, Alu::Max) {
        Some(f32::NEG_INFINITY)
    } else if matches!(op1, Alu::Min) {
        Some(f32::INFINITY)
    } else {
        None
    }
}

/// Whether `tensor_scalar_cumulative` reads or writes tiles of `dtype`: NKI lists bf16, fp16,
/// fp32, fp8, uint8, uint16, int8 and int16; int32 and uint32 are an ISA limitation.
const fn cumulative_dtype(dtype: DType) -> bool {
    !matches!(dtype, DType::I32 | DType::U32)
}

/// `tensor_scalar_cumulative(src, op0, op1, imm0, imm1)`: `src` a tile of any dtype but
/// int32/uint32; `imm0` and (with `load_reduce`) `imm1` compile-time scalars or fp32 `[P, 1]`
/// columns of its partitions; `op0` binary arithmetic; `op1` add, subtract, multiply, maximum or
/// minimum; no operand swap, no `reduce_res`. The result has `src`'s shape and dtype (a given
/// destination any dtype but int32/uint32).
pub(super) fn tensor_scalar_cumulative(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let InstrData::Alu { op, rev, acc, .. } = *x.data else {
        return Err(malformed(x));
    };
    if rev != 0 || acc.is_some() {
        return Err(malformed(x));
    }
    let data = *tile(x, 1)?;
    for (slot, v) in [(1, Some(data)), (0, x.slots[0].info().copied())] {
        if let Some(v) = v
            && !cumulative_dtype(v.dtype)
        {
            return Err(x.wrong_dtype(slot, "bf16, fp16, fp32, fp8, uint8, uint16, int8 or int16 (int32 and uint32 are not supported by the ISA)", v.dtype));
        }
    }
    for slot in [2, 3] {
        scalar_or_column(x, slot, &data.shape)?;
        if let Slot::View(v) = x.slots[slot]
            && v.dtype != DType::F32
        {
            return Err(x.wrong_dtype(slot, "float32", v.dtype));
        }
    }
    if matches!(x.slots[2], Slot::Absent) {
        return Err(x.blame(
            2,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "imm0",
                expected: "a compile-time scalar or a (P, 1) float32 vector",
            },
        ));
    }
    if op[0].class() != AluClass::Arithmetic || op[0].arity() != 2 {
        return Err(unsupported(
            x,
            Part::Code(0),
            op[0],
            "op0 is a binary arithmetic operation",
        ));
    }
    if cumulative_reset(op[1]).is_none() {
        return Err(unsupported(
            x,
            Part::Code(1),
            op[1],
            "op1 accumulates with add, subtract, multiply, maximum or minimum",
        ));
    }
    check_free_size(x, 1)?;
    Ok(Some(elementwise(data.shape, data.dtype)))
}
