//! The rule of `nc_stream_shuffle`: the Vector engine's data movement across the partitions of
//! each 32-partition quadrant.

use super::infer::{Blame, InferIn, Inferred, Part, tile};
use crate::ir::{InstrData, SHUFFLE_KEEP, SHUFFLE_QUADRANT, shuffle_source};
use crate::rules::RuleViolation;
use crate::target::Memory;

/// `nc_stream_shuffle(src, dst, shuffle_mask)`: `dst` and `src` of one dtype and one number of
/// elements per partition; every mask entry a partition of the quadrant (0 to 31) or 255; each
/// destination partition that takes data reads a partition `src` has. No result: the
/// instruction writes its given destination.
pub(super) fn nc_stream_shuffle(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let (dst, src) = (*tile(x, 0)?, *tile(x, 1)?);
    if dst.dtype != src.dtype {
        return Err(x.blame(
            0,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "dst",
                expected: src.dtype.name(),
                found: dst.dtype,
            },
        ));
    }
    if dst.shape.free_elems() != src.shape.free_elems() {
        return Err(x.blame(
            0,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "dst",
                expected: "a tile with as many elements per partition as src",
            },
        ));
    }
    let InstrData::Shuffle { mask, .. } = *x.data else {
        return Ok(None);
    };
    let whole = |expected: &'static str| Blame {
        part: Part::Whole,
        violation: RuleViolation::OperandKind {
            op: x.info().name,
            operand: "shuffle_mask",
            expected,
        },
    };
    if mask
        .iter()
        .any(|&m| m != SHUFFLE_KEEP && usize::from(m) >= SHUFFLE_QUADRANT)
    {
        return Err(whole(
            "32 partitions of a quadrant (0 to 31), or 255 to leave a partition unmodified",
        ));
    }
    let reads_past_src = (0..dst.shape.partitions() as usize)
        .any(|j| shuffle_source(&mask, j).is_some_and(|p| p >= src.shape.partitions() as usize));
    if reads_past_src {
        return Err(whole(
            "entries that name partitions src has (entry i of quadrant q reads partition 32·q + entry of src)",
        ));
    }
    Ok(Some(Inferred {
        shape: dst.shape,
        dtype: dst.dtype,
        fixed_dtype: true,
        memories: &[Memory::Sbuf, Memory::Psum],
    }))
}
