//! The rule of `topk`: the GpSimd engine's K largest values of each 16-partition snake.

use super::infer::{Blame, InferIn, Inferred, Part, not_on_target, partition_mismatch, tile};
use crate::dtype::DType;
use crate::ir::{GATHER_GROUP, InstrData};
use crate::rules::RuleViolation;
use crate::target::{Memory, Target};

/// Most values a snake holds (NKI: `n < 65536`).
pub const TOPK_MAX_N: u32 = 65535;

/// Fewest values a snake holds (NKI: `8 <= n`).
pub const TOPK_MIN_N: u32 = 8;

/// Most values `topk` selects per snake (NKI: `K < 32768`).
pub const TOPK_MAX_K: u64 = 32767;

/// `topk(val_dst, idx_dst, src, n)` (NeuronCore-v3 and newer): `src` a bf16 SBUF tile, its
/// partitions a multiple of 16, with at least `ceil(n / 16)` elements per partition;
/// `val_dst` bf16 and `idx_dst` uint32 SBUF tiles `[P, K]` of `src`'s partitions, `K` their
/// free size; `8 <= n < 65536`, `1 <= K < 32768`, `K <= n` (NKI's constraints). No result of
/// its own: it writes the given destinations.
pub(super) fn topk(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.target == Target::Trn1 {
        return Err(not_on_target(x, "NeuronCore-v3 and newer (trn2, trn3)"));
    }
    let (val, src, idx) = (*tile(x, 0)?, *tile(x, 1)?, *tile(x, 2)?);
    for (slot, v, dtype) in [
        (0, val, DType::Bf16),
        (1, src, DType::Bf16),
        (2, idx, DType::U32),
    ] {
        if v.dtype != dtype {
            return Err(x.wrong_dtype(slot, dtype.name(), v.dtype));
        }
    }
    let kind = |slot: usize, expected: &'static str| {
        x.blame(
            slot,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: x.info().operands[slot].name,
                expected,
            },
        )
    };
    if !(src.shape.partitions() as usize).is_multiple_of(GATHER_GROUP) {
        return Err(kind(
            1,
            "a tile of a multiple of 16 partitions (one snake per group of 16)",
        ));
    }
    for (slot, v) in [(0, val), (2, idx)] {
        if v.shape.rank() != 2 {
            return Err(kind(slot, "a [P, K] tile"));
        }
        if v.shape.partitions() != src.shape.partitions() {
            return Err(partition_mismatch(x, 1, &src.shape, slot, &v.shape));
        }
    }
    if idx.shape.dims() != val.shape.dims() {
        return Err(x.blame(
            2,
            RuleViolation::ShapeMismatch {
                op: x.info().name,
                operand: "idx_dst",
                expected: val.shape,
                found: idx.shape,
            },
        ));
    }
    let k = val.shape.free_elems();
    if !(1..=TOPK_MAX_K).contains(&k) {
        return Err(kind(0, "a [P, K] tile with 1 <= K < 32768"));
    }
    let InstrData::TopK { n, .. } = *x.data else {
        return Ok(None);
    };
    let whole = |expected: &'static str| Blame {
        part: Part::Whole,
        violation: RuleViolation::OperandKind {
            op: x.info().name,
            operand: "n",
            expected,
        },
    };
    let n = u32::from(n);
    if !(TOPK_MIN_N..=TOPK_MAX_N).contains(&n) {
        return Err(whole("a number of values 8 <= n < 65536"));
    }
    if k > u64::from(n) {
        return Err(whole(
            "at least K values (K, val_dst's free size, is at most n)",
        ));
    }
    let group = u64::try_from(GATHER_GROUP).unwrap_or(u64::MAX);
    if src.shape.free_elems() < u64::from(n).div_ceil(group) {
        return Err(kind(
            1,
            "a tile with at least ceil(n / 16) elements per partition (the snake's columns)",
        ));
    }
    Ok(Some(Inferred {
        shape: val.shape,
        dtype: DType::Bf16,
        fixed_dtype: true,
        memories: &[Memory::Sbuf],
    }))
}
