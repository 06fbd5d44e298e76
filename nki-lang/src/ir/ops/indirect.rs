//! The shape/dtype rules of the indirect DMA opcodes (`indirect_load`, `indirect_store`,
//! `atomic_rmw`): slot 2 holds the indices, a `[P, 1]` int32 or uint32 SBUF column with one
//! index per partition of the access's grid.

use super::infer::{Blame, InferIn, Inferred};
use crate::dtype::DType;
use crate::rules::{self, RuleViolation};
use crate::target::Memory;

/// Slot 2: one int32 or uint32 index per partition of the access (slot 1), or in scalar
/// mode ([`crate::IndirectMode::Scalar`], `.ap(..., scalar_offset=)`) one for the whole access.
fn indices(x: &InferIn<'_>) -> Result<(), Blame> {
    let (access, idx) = (x.view(1)?, x.view(2)?);
    let scalar = matches!(
        x.data,
        crate::InstrData::Indirect {
            mode: crate::IndirectMode::Scalar { .. },
            ..
        }
    );
    if !matches!(idx.dtype, DType::I32 | DType::U32) {
        return Err(x.blame(
            2,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: if scalar { "scalar_offset" } else { "indices" },
                expected: "int32 or uint32",
                found: idx.dtype,
            },
        ));
    }
    if scalar {
        if idx.shape.partitions() != 1 || idx.shape.free_elems() != 1 {
            return Err(x.blame(
                2,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: "scalar_offset",
                    expected: "one element of a tile (a `[1, 1]` int32 or uint32 tile)",
                },
            ));
        }
        return Ok(());
    }
    if idx.shape.free_elems() != 1 {
        return Err(x.blame(
            2,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "indices",
                expected: "a [P, 1] column: one index per partition (`idx[i_p, 0]`)",
            },
        ));
    }
    if idx.shape.partitions() != access.shape.partitions() {
        return Err(x.blame(
            2,
            RuleViolation::PartitionMismatch {
                op: x.info().name,
                a: "indices",
                a_shape: idx.shape,
                b: "src",
                b_shape: access.shape,
            },
        ));
    }
    Ok(())
}

/// `indirect_load`: the access's shape and dtype, into SBUF.
pub(super) fn load(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    indices(x)?;
    let src = x.view(1)?;
    Ok(Some(Inferred {
        shape: src.shape,
        dtype: src.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf],
    }))
}

/// `indirect_store`, `atomic_rmw`: the value's shape is the access's.
pub(super) fn store(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    indices(x)?;
    let (value, dst) = (x.view(0)?, x.view(1)?);
    rules::check_same_shape(x.info().name, "value", &dst.shape, &value.shape)
        .map_err(|e| x.blame(0, e))?;
    Ok(None)
}
