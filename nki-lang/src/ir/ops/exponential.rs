//! The rule of `exponential`: NeuronCore-v4's Vector-engine `exp(src − max_value)`.

use super::infer::{
    Blame, InferIn, Inferred, Slot, check_acc, elementwise, malformed, not_on_target,
};
use super::infer::{check_free_size, scalar_or_column, tile};
use crate::dtype::DType;
use crate::func::{ActFn, Alu};
use crate::ir::InstrData;
use crate::rules::RuleViolation;
use crate::target::Target;

/// `exponential(dst, src, max_value, reduce_res)`: trn3 only; `max_value` absent (0), a number
/// or an fp32 `[P, 1]` vector; `reduce_res`, if any, a `[P, 1]` `add` reduction; the result
/// has `src`'s shape (a new tile also its dtype); a uint32 destination is refused, as NKI's
/// list of output dtypes leaves it out.
pub(super) fn exponential(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.target != Target::Trn3 {
        return Err(not_on_target(x, "NeuronCore-v4 (trn3)"));
    }
    let InstrData::Act { func, acc, .. } = *x.data else {
        return Err(malformed(x));
    };
    if func != ActFn::Exp || !matches!(x.slots[2], Slot::Absent) {
        return Err(malformed(x));
    }
    let src = *tile(x, 1)?;
    match &x.slots[3] {
        Slot::Absent | Slot::Imm(_) => {}
        Slot::View(v) if v.column && v.dtype == DType::F32 => {
            scalar_or_column(x, 3, &src.shape)?;
        }
        Slot::View(_) | Slot::Access(_) | Slot::Expr => {
            return Err(x.blame(
                3,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: "max_value",
                    expected: "a number or a (P, 1) vector of float32",
                },
            ));
        }
    }
    if let Some(a) = acc {
        if a.op != Alu::Add {
            return Err(malformed(x));
        }
        check_acc(x, a.op, &src.shape)?;
    }
    if let Slot::View(d) = &x.slots[0]
        && d.dtype == DType::U32
    {
        return Err(x.blame(
            0,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "dst",
                expected: "a float type or int8, int16, int32, uint8 or uint16 (not uint32)",
                found: d.dtype,
            },
        ));
    }
    check_free_size(x, 1)?;
    Ok(Some(elementwise(src.shape, src.dtype)))
}
