//! The opcodes' shape/dtype rules, and the checks every opcode shares.

use super::{MAX_SLOTS, OpInfo, Opcode};
use crate::dtype::DType;
use crate::ir::{Engine, InstrData, Memory, Scalar};
use crate::rules::{self, RuleViolation};
use crate::shape::TileShape;

/// What the rules know of a tile view or an HBM access.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ViewInfo {
    /// Where it lives.
    pub memory: Memory,
    /// Its tile's (or tensor's) element type.
    pub dtype: DType,
    /// The shape it reads or writes.
    pub shape: TileShape,
    /// Whether it holds one value per partition (a `[P, 1]` column, possibly broadcast).
    pub column: bool,
}

/// What the rules know of one operand slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Nothing: an unused slot, or (slot 0) a result tile still to be created.
    Absent,
    /// A tile view.
    View(ViewInfo),
    /// An HBM access.
    Access(ViewInfo),
    /// An immediate.
    Imm(Scalar),
    /// A grid expression.
    Expr,
}

impl Slot {
    /// The view or access, if the slot holds one.
    pub const fn info(&self) -> Option<&ViewInfo> {
        match self {
            Slot::View(v) | Slot::Access(v) => Some(v),
            _ => None,
        }
    }
}

/// The input of an opcode's rule: the instruction's function codes and what is known of its
/// operands, by slot.
#[derive(Copy, Clone, Debug)]
pub struct InferIn<'a> {
    /// The opcode.
    pub opcode: Opcode,
    /// The engine that runs it.
    pub engine: Engine,
    /// The operands (view and access indices are not looked at: `slots` describes them).
    pub data: &'a InstrData,
    /// What each slot holds.
    pub slots: [Slot; MAX_SLOTS],
}

impl InferIn<'_> {
    fn info(&self) -> &'static OpInfo {
        self.opcode.info()
    }

    /// The view or access in `slot`; the rule functions only ask for slots the format fills.
    fn view(&self, slot: usize) -> Result<&ViewInfo, Blame> {
        self.slots[slot].info().ok_or(Blame {
            slot: Some(slot as u8),
            violation: RuleViolation::Malformed {
                what: "an operand slot the opcode needs is empty",
            },
        })
    }

    fn blame(&self, slot: usize, violation: RuleViolation) -> Blame {
        Blame {
            slot: Some(slot as u8),
            violation,
        }
    }
}

/// The result an opcode produces in its destination (slot 0).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Inferred {
    /// Its shape.
    pub shape: TileShape,
    /// Its dtype when the kernel names none.
    pub dtype: DType,
    /// Whether the destination must have exactly that dtype (TensorE's fp32 PSUM results).
    pub fixed_dtype: bool,
    /// The memories it may be written to; a new result tile goes to the first.
    pub memories: &'static [Memory],
}

/// A broken rule and the operand slot it is about (`None`: the instruction as a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blame {
    /// The slot.
    pub slot: Option<u8>,
    /// The rule.
    pub violation: RuleViolation,
}

/// Applies an opcode's rules: the engine may run it, each operand is in an allowed memory, the
/// opcode's own shape/dtype rule, and (when slot 0 is given and is the result) the destination
/// matches the result. Returns the result the destination must hold, or the first broken rule
/// with the operand to blame.
pub fn infer(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let info = x.info();
    if !info.engines.contains(&x.engine) {
        return Err(Blame {
            slot: None,
            violation: RuleViolation::EngineNotAllowed {
                op: info.name,
                engine: x.engine,
                allowed: info.engines,
            },
        });
    }
    for (slot, spec) in info.operands.iter().enumerate() {
        let result = slot == 0 && spec.dir.writes() && !matches!(info.format, super::Format::Dma);
        if let (Some(v), false) = (x.slots[slot].info(), result) {
            rules::check_memory(info.name, spec.name, v.memory, spec.memory)
                .map_err(|e| x.blame(slot, e))?;
            if x.engine == Engine::GpSimd && v.memory == Memory::Psum {
                return Err(x.blame(slot, gpsimd_psum(info.name, spec.name)));
            }
        }
    }
    let Some(out) = (info.infer)(x)? else {
        return Ok(None);
    };
    if let Slot::View(dst) = x.slots[0] {
        let name = info.operands.first().map_or("dst", |s| s.name);
        rules::check_memory(info.name, name, dst.memory, out.memories)
            .map_err(|e| x.blame(0, e))?;
        if x.engine == Engine::GpSimd && dst.memory == Memory::Psum {
            return Err(x.blame(0, gpsimd_psum(info.name, name)));
        }
        if out.fixed_dtype && dst.dtype != out.dtype {
            return Err(x.blame(
                0,
                RuleViolation::WrongDType {
                    op: info.name,
                    operand: name,
                    expected: out.dtype.name(),
                    found: dst.dtype,
                },
            ));
        }
        rules::check_same_shape(info.name, name, &out.shape, &dst.shape)
            .map_err(|e| x.blame(0, e))?;
    }
    Ok(Some(out))
}

fn gpsimd_psum(op: &'static str, operand: &'static str) -> RuleViolation {
    RuleViolation::WrongMemory {
        op,
        operand,
        expected: "sbuf",
        found: Memory::Psum,
    }
}

/// Loop control: no operands, no result.
pub(super) fn none(_: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    Ok(None)
}

/// `load`: the access's shape and the tensor's dtype, into SBUF.
pub(super) fn load(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let src = x.view(1)?;
    Ok(Some(Inferred {
        shape: src.shape,
        dtype: src.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf],
    }))
}

/// `store`: the value's shape is the access's.
pub(super) fn store(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let (value, dst) = (x.view(0)?, x.view(1)?);
    rules::check_same_shape(x.info().name, "value", &dst.shape, &value.shape)
        .map_err(|e| x.blame(0, e))?;
    Ok(None)
}

/// `nc_matmul`: float inputs, TC#3 and LC#1; an `[M, N]` fp32 result in PSUM.
pub(super) fn matmul(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let (s, m) = (x.view(1)?, x.view(2)?);
    rules::check_matmul_input_dtype("stationary", s.dtype).map_err(|e| x.blame(1, e))?;
    rules::check_matmul_input_dtype("moving", m.dtype).map_err(|e| x.blame(2, e))?;
    let shape = rules::check_matmul((&s.shape, s.memory), (&m.shape, m.memory)).map_err(|e| {
        let slot = match e {
            RuleViolation::MovingTooWide { .. } => Some(2),
            RuleViolation::ContractionMismatch { .. } => None,
            _ => Some(1),
        };
        Blame { slot, violation: e }
    })?;
    Ok(Some(Inferred {
        shape,
        dtype: DType::F32,
        fixed_dtype: true,
        memories: &[Memory::Psum],
    }))
}

/// `nc_transpose` on TensorE: `[P, F]` → `[F, P]`, both ≤ 128, fp32 in PSUM.
pub(super) fn transpose(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let src = x.view(1)?;
    let shape = rules::check_transpose((&src.shape, src.memory)).map_err(|e| x.blame(1, e))?;
    Ok(Some(Inferred {
        shape,
        dtype: DType::F32,
        fixed_dtype: true,
        memories: &[Memory::Psum],
    }))
}

/// Elementwise on one source: its shape and dtype, into SBUF (or PSUM).
pub(super) fn same_as_src(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let src = x.view(1)?;
    Ok(Some(Inferred {
        shape: src.shape,
        dtype: src.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf, Memory::Psum],
    }))
}

/// A result whose shape and dtype are the destination's own (`memset`).
pub(super) fn given_dst(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let dst = x.view(0)?;
    Ok(Some(Inferred {
        shape: dst.shape,
        dtype: dst.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf, Memory::Psum],
    }))
}
