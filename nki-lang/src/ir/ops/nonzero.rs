//! The rule of `nonzero_with_count`: the GpSimd engine's compaction of nonzero positions.

use super::infer::{Blame, InferIn, Inferred, Slot, not_on_target, partition_mismatch, tile};
use crate::dtype::DType;
use crate::ir::InstrData;
use crate::rules::RuleViolation;
use crate::shape::TileShape;
use crate::target::{Memory, Target};

/// `nonzero_with_count(src, index_offset, padding_val)`: NeuronCore-v3 and newer (trn2,
/// trn3); `src` a float32 or int32 SBUF tile of `T` elements per partition; the destination an
/// int32 SBUF tile of the same partitions with `T + 1` elements per partition (a new one is
/// `[P, T + 1]`); `index_offset + T − 1` within int32 (every position written is exact).
pub(super) fn nonzero_with_count(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.target == Target::Trn1 {
        return Err(not_on_target(x, "NeuronCore-v3 and newer (trn2, trn3)"));
    }
    let src = *tile(x, 1)?;
    if !matches!(src.dtype, DType::F32 | DType::I32) {
        return Err(x.blame(
            1,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "src",
                expected: "float32 or int32",
                found: src.dtype,
            },
        ));
    }
    let t = src.shape.free_elems();
    let wide = t.checked_add(1).and_then(|n| u32::try_from(n).ok());
    let Some(wide) = wide else {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "src",
                expected: "a tile of fewer than 2^32 - 1 elements per partition",
            },
        ));
    };
    if let InstrData::Nonzero { offset, .. } = *x.data {
        let last = i64::try_from(t)
            .ok()
            .and_then(|t| i64::from(offset).checked_add(t))
            .and_then(|e| e.checked_sub(1));
        if last.is_none_or(|l| i32::try_from(l).is_err()) {
            return Err(x.blame(
                1,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: "src",
                    expected: "a tile whose positions plus index_offset stay within int32",
                },
            ));
        }
    }
    let shape = TileShape::new(&[src.shape.partitions(), wide]).ok_or_else(|| {
        x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "src",
                expected: "a tile of at most 2^32 - 2 elements per partition",
            },
        )
    })?;
    if let Slot::View(d) = x.slots[0] {
        if d.dtype != DType::I32 {
            return Err(x.blame(
                0,
                RuleViolation::WrongDType {
                    op: x.info().name,
                    operand: "dst",
                    expected: "int32",
                    found: d.dtype,
                },
            ));
        }
        if d.shape.partitions() != src.shape.partitions() {
            return Err(partition_mismatch(x, 1, &src.shape, 0, &d.shape));
        }
        if d.shape.free_elems() != u64::from(wide) {
            return Err(x.blame(
                0,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: "dst",
                    expected: "a tile with one more element per partition than src (the count after the T positions)",
                },
            ));
        }
        return Ok(Some(Inferred {
            shape: d.shape,
            dtype: DType::I32,
            fixed_dtype: true,
            memories: &[Memory::Sbuf],
        }));
    }
    Ok(Some(Inferred {
        shape,
        dtype: DType::I32,
        fixed_dtype: true,
        memories: &[Memory::Sbuf],
    }))
}
