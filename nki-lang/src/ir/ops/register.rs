//! The rules of the virtual register instructions: `register_move` (no memory operand),
//! `register_load` and `register_store` (one integer element of an SBUF tile).

use super::infer::{Blame, InferIn, Inferred};
use crate::rules::RuleViolation;

/// `register_move`: registers and an immediate only. No result.
pub(super) fn register_move(_x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    Ok(None)
}

/// `register_load`: the source (slot 1) is one integer element of at most 32 bits. No result.
pub(super) fn register_load(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    one_int_element(x, 1, "src")?;
    Ok(None)
}

/// `register_store`: the destination (slot 0) is one integer element of at most 32 bits. No
/// result (the destination is given).
pub(super) fn register_store(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    one_int_element(x, 0, "dst")?;
    Ok(None)
}

/// NKI's rule: "a tensor with exactly one element"; the model's registers hold 32-bit integers,
/// so the element is an integer of at most 32 bits (a float is refused: `docs/language.md`).
fn one_int_element(x: &InferIn<'_>, slot: usize, operand: &'static str) -> Result<(), Blame> {
    let v = x.view(slot)?;
    if v.shape.partitions() != 1 || v.shape.free_elems() != 1 {
        return Err(x.blame(
            slot,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand,
                expected: "a tile of one element ([1, 1])",
            },
        ));
    }
    if !v.dtype.is_int() || v.dtype.size() > 4 {
        return Err(x.blame(
            slot,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand,
                expected: "an integer type of at most 32 bits (int32, uint32): registers hold 32-bit integers",
                found: v.dtype,
            },
        ));
    }
    Ok(())
}
