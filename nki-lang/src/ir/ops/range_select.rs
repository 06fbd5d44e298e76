//! The rule of `range_select`: the Vector engine's select by a range of free indices.

use super::infer::{
    Blame, InferIn, Inferred, Part, check_acc, check_free_size, elementwise, not_on_target,
    partition_mismatch, tile, unsupported,
};
use crate::func::Alu;
use crate::ir::InstrData;
use crate::rules::RuleViolation;
use crate::target::Target;

/// The largest magnitude of `range_start` plus a free index: the engine compares them with the
/// bounds in fp32, which holds every integer up to 2^24 exactly.
pub const RANGE_SELECT_INDEX_LIMIT: i64 = 1 << 24;

/// `range_select(on_true_tile, comp_op0, comp_op1, bound0, bound1, range_start)`: NeuronCore-v3
/// and newer only (trn2, trn3); `on_true_tile` of a float dtype; `bound0` and `bound1` fp32
/// `[P, 1]` columns of its partitions; `range_start` plus every free index within ±2^24; the
/// optional `reduce_res` a `[P, 1]` column reduced with `maximum`. The result has
/// `on_true_tile`'s shape and dtype.
pub(super) fn range_select(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.target == Target::Trn1 {
        return Err(not_on_target(x, "NeuronCore-v3 and newer (trn2, trn3)"));
    }
    let on_true = *tile(x, 1)?;
    if !on_true.dtype.is_float() {
        return Err(x.blame(
            1,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "on_true_tile",
                expected: "a float type",
                found: on_true.dtype,
            },
        ));
    }
    for slot in [2, 3] {
        let b = tile(x, slot)?;
        if b.shape.partitions() != on_true.shape.partitions() {
            return Err(partition_mismatch(x, 1, &on_true.shape, slot, &b.shape));
        }
        if !b.column {
            return Err(x.blame(
                slot,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: x.info().operands[slot].name,
                    expected: "a tile with one element per partition ((P, 1))",
                },
            ));
        }
        if b.dtype != crate::dtype::DType::F32 {
            return Err(x.wrong_dtype(slot, "float32", b.dtype));
        }
    }
    let InstrData::RangeSelect { start, acc, .. } = *x.data else {
        return Ok(None);
    };
    let first = i64::from(start);
    let last = i64::try_from(on_true.shape.free_elems())
        .ok()
        .and_then(|n| first.checked_add(n))
        .and_then(|e| e.checked_sub(1));
    let exact = |v: i64| (-RANGE_SELECT_INDEX_LIMIT..=RANGE_SELECT_INDEX_LIMIT).contains(&v);
    if !(exact(first) && last.is_some_and(exact)) {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "on_true_tile",
                expected: "a tile whose free indices plus range_start stay within 2^24 in magnitude (the engine compares them in fp32)",
            },
        ));
    }
    if let Some(a) = acc {
        if a.op != Alu::Max {
            return Err(unsupported(
                x,
                Part::Code(2),
                a.op,
                "range_select reduces with maximum only",
            ));
        }
        check_acc(x, a.op, &on_true.shape)?;
    }
    check_free_size(x, 1)?;
    Ok(Some(elementwise(on_true.shape, on_true.dtype)))
}
