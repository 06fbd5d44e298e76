//! The rule of `dma_compute`: the DMA engines' fp32 sum of tiles of one shape.

use super::infer::{Blame, InferIn, Inferred, Part, Slot, tile};
use crate::ir::InstrData;
use crate::rules::RuleViolation;
use crate::target::Memory;

/// `dma_compute(dst, srcs)`: one to [`crate::DMA_COMPUTE_SOURCES`] sources, given first (no
/// empty slot before a used one), every source a tile of the destination's shape; any dtypes
/// (each source is widened to fp32, the sum rounded into the destination's dtype). A new
/// destination has the first source's shape and dtype.
pub(super) fn dma_compute(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let InstrData::DmaCompute { srcs, .. } = *x.data else {
        return Ok(None);
    };
    let used = srcs.iter().take_while(|s| s.is_some()).count();
    if used == 0 || srcs.iter().skip(used).any(Option::is_some) {
        return Err(Blame {
            part: Part::Whole,
            violation: RuleViolation::OperandKind {
                op: x.info().name,
                operand: "srcs",
                expected: "one to four sources in the first slots",
            },
        });
    }
    let dst = match x.slots[0] {
        Slot::View(d) => d,
        Slot::Absent | Slot::Access(_) | Slot::Imm(_) | Slot::Expr => *tile(x, 1)?,
    };
    for slot in 1..=used {
        let src = *tile(x, slot)?;
        if src.shape.dims() != dst.shape.dims() {
            return Err(x.blame(
                slot,
                RuleViolation::ShapeMismatch {
                    op: x.info().name,
                    operand: x.info().operands[slot].name,
                    expected: dst.shape,
                    found: src.shape,
                },
            ));
        }
    }
    Ok(Some(Inferred {
        shape: dst.shape,
        dtype: dst.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf],
    }))
}
