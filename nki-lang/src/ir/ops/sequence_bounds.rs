//! The rule of `sequence_bounds`: the GpSimd engine's segment bounds of one partition of ids.

use super::infer::{Blame, InferIn, Inferred, Slot, tile};
use crate::dtype::DType;
use crate::rules::RuleViolation;
use crate::shape::TileShape;
use crate::target::Memory;

/// `sequence_bounds(segment_ids)`: `segment_ids` a `[1, n]` tile of float32 or int32; the
/// result `[1, 2, n]` of its dtype (a given destination float32 or int32, one partition, `2n`
/// elements: the `n` starts, then the `n` ends).
pub(super) fn sequence_bounds(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let ids = *tile(x, 1)?;
    let f32_or_i32 = |d: DType| matches!(d, DType::F32 | DType::I32);
    if !f32_or_i32(ids.dtype) {
        return Err(x.blame(
            1,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "segment_ids",
                expected: "float32 or int32",
                found: ids.dtype,
            },
        ));
    }
    if ids.shape.partitions() != 1 || ids.shape.rank() != 2 {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "segment_ids",
                expected: "a [1, n] tile (the partition dimension is always 1)",
            },
        ));
    }
    let n = ids.shape.free_elems();
    let mut shape =
        TileShape::new(&[1, 2, u32::try_from(n).unwrap_or(u32::MAX)]).unwrap_or(ids.shape);
    if let Slot::View(d) = x.slots[0] {
        if !f32_or_i32(d.dtype) {
            return Err(x.blame(
                0,
                RuleViolation::WrongDType {
                    op: x.info().name,
                    operand: "dst",
                    expected: "float32 or int32",
                    found: d.dtype,
                },
            ));
        }
        // Any free shape of the 2n bounds ([1, 2, n] as NKI writes it).
        if d.shape.partitions() == 1 && d.shape.free_elems() == n.saturating_mul(2) {
            shape = d.shape;
        }
    }
    Ok(Some(Inferred {
        shape,
        dtype: ids.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf],
    }))
}
