//! The rule of `activate2`: NeuronCore-v4's Scalar-engine activation after a tensor-scalar
//! stage, `func((data op0 imm0) op1 imm1)`, with an optional reduction per partition.

use super::infer::{
    Blame, InferIn, Inferred, Part, Slot, check_acc, elementwise, malformed, not_on_target,
};
use super::infer::{check_free_size, scalar_or_column, tile, unsupported};
use crate::dtype::DType;
use crate::func::Alu;
use crate::ir::InstrData;
use crate::rules::RuleViolation;
use crate::target::Target;

/// The `(op0, op1)` pairs of the tensor-scalar stage NKI lists.
pub const ACTIVATE2_STAGES: [(Alu, Alu); 6] = [
    (Alu::Multiply, Alu::Add),
    (Alu::Multiply, Alu::Subtract),
    (Alu::Multiply, Alu::Bypass),
    (Alu::Add, Alu::Bypass),
    (Alu::Subtract, Alu::Bypass),
    (Alu::Bypass, Alu::Bypass),
];

/// `activate2(data, op0, imm0, op1, imm1, reverse0, reverse1, reduce_op, reduce_res)`: trn3
/// only; `(op0, op1)` one of [`ACTIVATE2_STAGES`], a reversed operation one that is not
/// `bypass`; each operand a number or an fp32 `[P, 1]` vector (given for an operation that is
/// not `bypass`; that of a `bypass` is not read); `reduce_res`, if any, a `[P, 1]` `add`, `maximum` or `minimum` reduction; the
/// result has `data`'s shape (a new tile also its dtype).
pub(super) fn activate2(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.target != Target::Trn3 {
        return Err(not_on_target(x, "NeuronCore-v4 (trn3)"));
    }
    let InstrData::Act2 { op, rev, acc, .. } = *x.data else {
        return Err(malformed(x));
    };
    let data = *tile(x, 1)?;
    if !ACTIVATE2_STAGES.contains(&(op[0], op[1])) {
        // The second operation is blamed when the first one starts some listed pair.
        let j = u8::from(op[1] != Alu::Bypass && ACTIVATE2_STAGES.iter().any(|s| s.0 == op[0]));
        return Err(unsupported(
            x,
            Part::Code(j),
            op[usize::from(j)],
            "activate2's tensor-scalar stage is (multiply, add), (multiply, subtract), (multiply, bypass), (add, bypass), (subtract, bypass) or (bypass, bypass)",
        ));
    }
    for (j, slot) in [(0u8, 2usize), (1, 3)] {
        let o = op[usize::from(j)];
        if rev >> j & 1 == 1 && o == Alu::Bypass {
            return Err(unsupported(
                x,
                Part::Code(j),
                o,
                "a reversed operation must not be bypass",
            ));
        }
        // NKI's call takes both operands always; that of a `bypass` is not read.
        match &x.slots[slot] {
            Slot::Absent if o != Alu::Bypass => {
                return Err(x.blame(
                    slot,
                    RuleViolation::OperandKind {
                        op: x.info().name,
                        operand: x.info().operands[slot].name,
                        expected: "given: its operation is not bypass",
                    },
                ));
            }
            Slot::Absent | Slot::Imm(_) => {}
            Slot::View(v) if v.column && v.dtype == DType::F32 => {
                scalar_or_column(x, slot, &data.shape)?;
            }
            Slot::View(_) | Slot::Access(_) | Slot::Expr => {
                return Err(x.blame(
                    slot,
                    RuleViolation::OperandKind {
                        op: x.info().name,
                        operand: x.info().operands[slot].name,
                        expected: "a number or a (P, 1) vector of float32",
                    },
                ));
            }
        }
    }
    if let Some(a) = acc {
        if !matches!(a.op, Alu::Add | Alu::Max | Alu::Min) {
            return Err(unsupported(
                x,
                Part::Code(2),
                a.op,
                "activate2 reduces with add, maximum or minimum (abs_max and abs_min are not modeled yet)",
            ));
        }
        check_acc(x, a.op, &data.shape)?;
    }
    check_free_size(x, 1)?;
    Ok(Some(elementwise(data.shape, data.dtype)))
}
