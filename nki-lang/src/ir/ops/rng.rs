//! The rules of the random number generator's opcodes: `rand`, `random_seed`, `dropout`.

use super::infer::{
    Blame, InferIn, Inferred, Slot, check_free_size, elementwise, scalar_or_column,
};
use crate::dtype::DType;
use crate::rules::RuleViolation;
use crate::target::Memory;

/// `rand`: the destination's own shape and float dtype (the values are exact in it).
pub(super) fn rand(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let dst = x.view(0)?;
    check_free_size(x, 0)?;
    if !dst.dtype.is_float() {
        return Err(x.blame(
            0,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "dst",
                expected: "a float type (values in [0, 1))",
                found: dst.dtype,
            },
        ));
    }
    Ok(Some(Inferred {
        shape: dst.shape,
        dtype: dst.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf, Memory::Psum],
    }))
}

/// `random_seed`: one integer element. No result.
pub(super) fn random_seed(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let seed = x.view(1)?;
    if seed.shape.partitions() != 1 || seed.shape.free_elems() != 1 {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "seed",
                expected: "a tile of one element ([1, 1])",
            },
        ));
    }
    if !seed.dtype.is_int() {
        return Err(x.blame(
            1,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "seed",
                expected: "an integer type (int32)",
                found: seed.dtype,
            },
        ));
    }
    Ok(None)
}

/// `dropout`: the data's shape and dtype; `prob` an immediate or a `[P, 1]` column of a float
/// type, and an integer `data` keeps its dtype (NKI's rules).
pub(super) fn dropout(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let data = *x.view(1)?;
    check_free_size(x, 1)?;
    scalar_or_column(x, 2, &data.shape)?;
    if let Slot::View(p) = x.slots[2]
        && !p.dtype.is_float()
    {
        return Err(x.blame(
            2,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "prob",
                expected: "a float type (a probability)",
                found: p.dtype,
            },
        ));
    }
    if let Slot::View(dst) = x.slots[0]
        && data.dtype.is_int()
        && dst.dtype != data.dtype
    {
        return Err(x.blame(
            0,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "dst",
                expected: data.dtype.name(),
                found: dst.dtype,
            },
        ));
    }
    if data.dtype == DType::Bool {
        return Err(x.blame(
            1,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "data",
                expected: "a number type",
                found: data.dtype,
            },
        ));
    }
    Ok(Some(elementwise(data.shape, data.dtype)))
}
