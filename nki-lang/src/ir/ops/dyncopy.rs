//! The shape/dtype rule of `tensor_copy_dynamic_src` and `tensor_copy_dynamic_dst`: a copy of
//! its source (whose shape and dtype the result takes), the offset a `[1, 1]` int32 or uint32
//! tile.

use super::infer::{Blame, InferIn, Inferred};
use crate::dtype::DType;
use crate::rules::RuleViolation;
use crate::target::Memory;

/// `tensor_copy_dynamic_src` and `tensor_copy_dynamic_dst`.
pub(super) fn tensor_copy_dynamic_src(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let (src, offset) = (x.view(1)?, x.view(2)?);
    if !matches!(offset.dtype, DType::I32 | DType::U32) {
        return Err(x.blame(
            2,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "offset",
                expected: "int32 or uint32",
                found: offset.dtype,
            },
        ));
    }
    if offset.shape.partitions() != 1 || offset.shape.free_elems() != 1 {
        return Err(x.blame(
            2,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "offset",
                expected: "one element of a tile (`idx[[0, b]]`)",
            },
        ));
    }
    Ok(Some(Inferred {
        shape: src.shape,
        dtype: src.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf, Memory::Psum],
    }))
}
