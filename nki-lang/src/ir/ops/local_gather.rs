//! The rule of `local_gather`: the GpSimd engine's gather within groups of 16 partitions.

use super::infer::{Blame, InferIn, Inferred, Part, Slot, partition_mismatch, tile};
use crate::dtype::DType;
use crate::ir::{GATHER_GROUP, InstrData};
use crate::rules::RuleViolation;
use crate::shape::TileShape;
use crate::target::Memory;

/// The contiguous element counts `num_elem_per_idx` may take.
pub const LOCAL_GATHER_ELEMS: [u8; 6] = [1, 2, 4, 8, 16, 32];

/// The most indices one GpSimd core gathers with.
pub const LOCAL_GATHER_MAX_INDICES: u16 = 4096;

/// `local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices)`: `src_buffer` and
/// `index` of the same partitions, a multiple of 16; `index` a uint16 `[P, C]` tile;
/// `num_elem_per_idx` one of 1, 2, 4, 8, 16, 32; `num_valid_indices` from 1 to the `16·C`
/// indices of a group and at most 4096. The result has `src_buffer`'s partitions and dtype and
/// `num_valid_indices · num_elem_per_idx` elements per partition (a given destination any free
/// shape of that many).
pub(super) fn local_gather(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let (src, index) = (*tile(x, 1)?, *tile(x, 2)?);
    let parts = src.shape.partitions();
    if index.shape.partitions() != parts {
        return Err(partition_mismatch(x, 1, &src.shape, 2, &index.shape));
    }
    if !(parts as usize).is_multiple_of(GATHER_GROUP) {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "src_buffer",
                expected: "a tile of a multiple of 16 partitions (each GpSimd core gathers within its 16)",
            },
        ));
    }
    if index.dtype != DType::U16 {
        return Err(x.blame(
            2,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "index",
                expected: "uint16",
                found: index.dtype,
            },
        ));
    }
    if index.shape.rank() != 2 {
        return Err(x.blame(
            2,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "index",
                expected: "a [P, C] tile (one free axis: its indices are taken partition first)",
            },
        ));
    }
    let InstrData::LocalGather { elems, valid, .. } = *x.data else {
        return Ok(None);
    };
    let whole = |operand: &'static str, expected: &'static str| Blame {
        part: Part::Whole,
        violation: RuleViolation::OperandKind {
            op: x.info().name,
            operand,
            expected,
        },
    };
    if !LOCAL_GATHER_ELEMS.contains(&elems) {
        return Err(whole("num_elem_per_idx", "1, 2, 4, 8, 16 or 32"));
    }
    let per_group = index.shape.free_elems().saturating_mul(GATHER_GROUP as u64);
    if valid == 0 || u64::from(valid) > per_group || valid > LOCAL_GATHER_MAX_INDICES {
        return Err(whole(
            "num_valid_indices",
            "1 to the indices of a group of 16 partitions of `index` (16 · its free size), at most 4096",
        ));
    }
    let n = u64::from(valid).saturating_mul(u64::from(elems));
    let shape = match x.slots[0] {
        Slot::View(d) if d.shape.free_elems() == n && d.shape.partitions() == parts => d.shape,
        Slot::View(_) | Slot::Absent | Slot::Access(_) | Slot::Imm(_) | Slot::Expr => {
            TileShape::new(&[parts, u32::try_from(n).unwrap_or(u32::MAX)]).unwrap_or(src.shape)
        }
    };
    if let Slot::View(d) = x.slots[0]
        && d.dtype != src.dtype
    {
        return Err(x.blame(
            0,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "dst",
                expected: src.dtype.name(),
                found: d.dtype,
            },
        ));
    }
    Ok(Some(Inferred {
        shape,
        dtype: src.dtype,
        fixed_dtype: true,
        memories: &[Memory::Sbuf],
    }))
}
