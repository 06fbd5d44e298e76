//! The opcodes' shape/dtype rules, and the checks every opcode shares.

use super::{Maskable, OpInfo, Opcode, Packed};
use crate::dtype::DType;
use crate::func::{Alu, AluClass};
use crate::ir::{InstrData, MAX_SLOTS, Scalar};
use crate::rules::{self, RuleViolation};
use crate::shape::TileShape;
use crate::target::{BN_STATS_FMAX, Engine, Memory, PARTITIONS, Target};

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
            Slot::Absent | Slot::Imm(_) | Slot::Expr => None,
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
    /// The grid axes its mask cuts (bit `j` for grid axis `j`; 0 without a mask, or for a
    /// predicate on loop indices alone, which runs or skips any instruction whole).
    pub mask_axes: u8,
    /// The generation the program is for.
    pub target: Target,
}

impl InferIn<'_> {
    pub(super) fn info(&self) -> &'static OpInfo {
        self.opcode.info()
    }

    /// The view or access in `slot`; the rule functions only ask for slots the format fills.
    pub(super) fn view(&self, slot: usize) -> Result<&ViewInfo, Blame> {
        self.slots[slot].info().ok_or(Blame {
            part: Part::Slot(small(slot)),
            violation: RuleViolation::Malformed {
                what: "an operand slot the opcode needs is empty",
            },
        })
    }

    pub(super) fn blame(&self, slot: usize, violation: RuleViolation) -> Blame {
        Blame {
            part: Part::Slot(small(slot)),
            violation,
        }
    }

    /// Operand `slot` (named as the op table names it) has dtype `found` where the operation
    /// takes `expected`.
    pub(super) fn wrong_dtype(&self, slot: usize, expected: &'static str, found: DType) -> Blame {
        self.blame(
            slot,
            RuleViolation::WrongDType {
                op: self.info().name,
                operand: self.info().operands[slot].name,
                expected,
                found,
            },
        )
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

/// The part of an instruction a broken rule is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// The instruction as a whole.
    Whole,
    /// An operand slot.
    Slot(u8),
    /// A function code: 0 the first ALU operation (or the activation function), 1 the
    /// second, 2 the per-partition reduction's operation.
    Code(u8),
    /// The engine.
    Engine,
}

/// A broken rule and the part of the instruction it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blame {
    /// What to point at.
    pub part: Part,
    /// The rule.
    pub violation: RuleViolation,
}

/// NKI's packed MX types (`float8_e4m3fn_x4`, ...) only where the op-table row accepts them
/// ([`OpInfo::packed`](super::OpInfo::packed)): a copy moves them as bits (every operand of the
/// one packed type), an MX instruction's own rule checks them, any other refuses them.
fn check_packed(x: &InferIn<'_>) -> Result<(), Blame> {
    let info = x.info();
    let views = || {
        info.operands
            .iter()
            .enumerate()
            .filter_map(|(slot, spec)| Some((slot, spec.name, x.slots[slot].info()?.dtype)))
    };
    let Some((_, _, packed)) = views().find(|v| v.2.is_packed()) else {
        return Ok(());
    };
    let blame = |slot, operand, expected, found| {
        x.blame(
            slot,
            RuleViolation::WrongDType {
                op: info.name,
                operand,
                expected,
                found,
            },
        )
    };
    match info.packed {
        Packed::Mx => Ok(()),
        Packed::No => match views().find(|v| v.2.is_packed()) {
            Some((slot, operand, dtype)) => Err(blame(
                slot,
                operand,
                "an unpacked type: NKI's packed MX types (_x4) are only for quantize_mx, \
                 nc_matmul_mx and DMA copies",
                dtype,
            )),
            None => Ok(()),
        },
        Packed::Bits => match views().find(|v| v.2 != packed) {
            Some((slot, operand, dtype)) => Err(blame(
                slot,
                operand,
                "the packed type of the other operand: a DMA copies a packed MX type (_x4) as \
                 bits, it cannot convert it",
                dtype,
            )),
            None => Ok(()),
        },
    }
}

/// Applies an opcode's rules: the engine may run it, each operand is in an allowed memory, the
/// opcode's own shape/dtype rule, and (when slot 0 is given and is the result) the destination
/// matches the result. Returns the result the destination must hold, or the first broken rule
/// with the operand to blame.
pub fn infer(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let info = x.info();
    let refused = match info.maskable {
        Maskable::Any => None,
        Maskable::Partitions => (x.mask_axes & !1 != 0)
            .then_some("only its partitions can be masked, not the axis it reduces"),
        Maskable::No => (x.mask_axes != 0).then_some("mask its operands by indexing them instead"),
    };
    if let Some(why) = refused {
        return Err(Blame {
            part: Part::Whole,
            violation: RuleViolation::MaskNotSupported { op: info.name, why },
        });
    }
    if !info.engines.contains(&x.engine) {
        return Err(Blame {
            part: Part::Engine,
            violation: RuleViolation::EngineNotAllowed {
                op: info.name,
                engine: x.engine,
                allowed: info.engines,
            },
        });
    }
    for (slot, spec) in info.operands.iter().enumerate() {
        let result = slot == 0 && spec.dir.writes();
        if let (Some(v), false) = (x.slots[slot].info(), result) {
            if spec.memory.is_empty() {
                // A slot that holds no memory operand: an immediate (`on_false_value`).
                return Err(x.blame(
                    slot,
                    RuleViolation::OperandKind {
                        op: info.name,
                        operand: spec.name,
                        expected: "a compile-time number, not a tile",
                    },
                ));
            }
            rules::check_memory(info.name, spec.name, v.memory, spec.memory)
                .map_err(|e| x.blame(slot, e))?;
            if x.engine == Engine::GpSimd && v.memory == Memory::Psum {
                return Err(x.blame(slot, gpsimd_psum(info.name, spec.name)));
            }
        }
    }
    check_packed(x)?;
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
    RuleViolation::EngineMemory {
        op,
        operand,
        engine: Engine::GpSimd,
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
        #[expect(
            clippy::wildcard_enum_match_arm,
            reason = "a rule violation, not an instruction-set enum: `stationary` is blamed unless \
                      the violation is about another part"
        )]
        let part = match e {
            RuleViolation::MovingTooWide { .. } => Part::Slot(2),
            RuleViolation::ContractionMismatch { .. } => Part::Whole,
            _ => Part::Slot(1),
        };
        Blame { part, violation: e }
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
    check_free_size(x, 1)?;
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
    check_free_size(x, 0)?;
    Ok(Some(Inferred {
        shape: dst.shape,
        dtype: dst.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf, Memory::Psum],
    }))
}

/// An operand that is a tile view (not an immediate).
pub(super) fn tile<'a>(x: &'a InferIn<'_>, slot: usize) -> Result<&'a ViewInfo, Blame> {
    match &x.slots[slot] {
        Slot::View(v) => Ok(v),
        Slot::Absent | Slot::Access(_) | Slot::Imm(_) | Slot::Expr => Err(x.blame(
            slot,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: x.info().operands[slot].name,
                expected: "a tile",
            },
        )),
    }
}

/// The dtype an immediate stands for in promotion: NKI types a Python float as fp32 and an int
/// as int32.
fn imm_dtype(v: Scalar) -> DType {
    match v {
        Scalar::Float(_) => DType::F32,
        Scalar::Int(_) => DType::I32,
    }
}

/// The dtype of a source slot for promotion (`None` for an empty slot).
fn src_dtype(x: &InferIn<'_>, slot: usize) -> Option<DType> {
    match x.slots[slot] {
        Slot::View(v) | Slot::Access(v) => Some(v.dtype),
        Slot::Imm(v) => Some(imm_dtype(v)),
        Slot::Absent | Slot::Expr => None,
    }
}

/// An immediate, or a view that holds one value per partition (a `[P, 1]` column, possibly
/// broadcast along the free dimensions).
pub(super) fn scalar_or_column(
    x: &InferIn<'_>,
    slot: usize,
    grid: &TileShape,
) -> Result<(), Blame> {
    match &x.slots[slot] {
        Slot::Imm(_) | Slot::Absent => Ok(()),
        Slot::View(v) if v.column && v.shape.partitions() == grid.partitions() => Ok(()),
        Slot::View(v) if v.column => Err(partition_mismatch(x, 1, grid, slot, &v.shape)),
        Slot::View(_) | Slot::Access(_) | Slot::Expr => Err(x.blame(
            slot,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: x.info().operands[slot].name,
                expected: "a compile-time scalar or a (P, 1) vector",
            },
        )),
    }
}

pub(super) fn partition_mismatch(
    x: &InferIn<'_>,
    a: usize,
    a_shape: &TileShape,
    b: usize,
    b_shape: &TileShape,
) -> Blame {
    let ops = x.info().operands;
    x.blame(
        b,
        RuleViolation::PartitionMismatch {
            op: x.info().name,
            a: ops[a].name,
            a_shape: *a_shape,
            b: ops[b].name,
            b_shape: *b_shape,
        },
    )
}

/// Two tile operands of an elementwise instruction: same partitions, same elements in the
/// same order (broadcasts are views of the grid's shape with zero strides).
fn same_grid(x: &InferIn<'_>, a: usize, b: usize) -> Result<(), Blame> {
    let (va, vb) = (x.view(a)?, x.view(b)?);
    if va.shape.partitions() != vb.shape.partitions() {
        return Err(partition_mismatch(x, a, &va.shape, b, &vb.shape));
    }
    let info = x.info();
    rules::check_same_shape(info.name, info.operands[b].name, &va.shape, &vb.shape)
        .map_err(|e| x.blame(b, e))
}

/// Bit operations take integer operands.
fn check_alu_dtype(x: &InferIn<'_>, alu: Alu, slot: usize) -> Result<(), Blame> {
    let Some(d) = src_dtype(x, slot) else {
        return Ok(());
    };
    if alu.class() == AluClass::Bitvec && !(d.is_int() || d == DType::Bool) {
        return Err(x.wrong_dtype(slot, "an integer type (for a bit operation)", d));
    }
    Ok(())
}

/// The default dtype of an ALU result: `bool` for comparisons and logical operations, else the
/// operands' promoted type.
fn alu_dtype(alu: Alu, operands: impl Iterator<Item = DType>) -> Option<DType> {
    match alu.class() {
        AluClass::Compare | AluClass::Logical => Some(DType::Bool),
        AluClass::Arithmetic | AluClass::Bitvec => operands.reduce(DType::promote),
    }
}

pub(super) fn unsupported(x: &InferIn<'_>, part: Part, alu: Alu, why: &'static str) -> Blame {
    Blame {
        part,
        violation: RuleViolation::UnsupportedAlu {
            op: x.info().name,
            alu,
            why,
        },
    }
}

/// The refusal of the instruction's engine on a target older than `needs` names
/// (`err_unsupported_engine`).
pub(super) fn not_on_target(x: &InferIn<'_>, needs: &'static str) -> Blame {
    Blame {
        part: Part::Engine,
        violation: RuleViolation::EngineNotOnTarget {
            op: x.info().name,
            engine: x.engine,
            needs,
            target: x.target.name(),
        },
    }
}

pub(super) fn elementwise(shape: TileShape, dtype: DType) -> Inferred {
    Inferred {
        shape,
        dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf, Memory::Psum],
    }
}

/// The reduction of a per-partition output (`reduce_res`): a legal reduction, into a `[P, 1]`
/// column of the grid's partitions.
pub(super) fn check_acc(x: &InferIn<'_>, op: Alu, grid: &TileShape) -> Result<(), Blame> {
    if !op.is_reduction() {
        return Err(unsupported(x, Part::Code(2), op, "it is not a reduction"));
    }
    if x.opcode == Opcode::Activation && x.target == Target::Trn1 && op != Alu::Add {
        return Err(unsupported(
            x,
            Part::Code(2),
            op,
            "the Scalar engine of NeuronCore-v2 (trn1) only reduces with add",
        ));
    }
    let acc = tile(x, 4)?;
    if acc.shape.partitions() != grid.partitions() {
        return Err(partition_mismatch(x, 1, grid, 4, &acc.shape));
    }
    if acc.shape.free_elems() != 1 {
        return Err(x.blame(
            4,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: x.info().operands[4].name,
                expected: "a (P, 1) vector",
            },
        ));
    }
    Ok(())
}

/// The Vector and Scalar engines' free-size limits: 64K elements from SBUF, 4K from PSUM.
pub(super) fn check_free_size(x: &InferIn<'_>, slot: usize) -> Result<(), Blame> {
    let Some(v) = x.slots[slot].info() else {
        return Ok(());
    };
    let limit = match v.memory {
        Memory::Psum => 4096,
        Memory::Sbuf | Memory::Hbm => 65536,
    };
    let size = v.shape.free_elems();
    if size > limit {
        return Err(x.blame(
            slot,
            RuleViolation::SizeLimit {
                op: x.info().name,
                operand: x.info().operands[slot].name,
                what: "free size",
                size,
                limit,
            },
        ));
    }
    Ok(())
}

/// `tensor_tensor(data1, data2, op)`: two tiles of one grid, not both in PSUM.
pub(super) fn tensor_tensor(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let InstrData::Alu { op, .. } = *x.data else {
        return Err(malformed(x));
    };
    let (a, b) = (tile(x, 1)?, tile(x, 2)?);
    same_grid(x, 1, 2)?;
    if a.memory == Memory::Psum && b.memory == Memory::Psum {
        let ops = x.info().operands;
        return Err(x.blame(
            2,
            RuleViolation::BothInPsum {
                op: x.info().name,
                a: ops[1].name,
                b: ops[2].name,
            },
        ));
    }
    if op[0].arity() != 2 || op[1] != Alu::Bypass {
        return Err(unsupported(
            x,
            Part::Code(0),
            op[0],
            "tensor_tensor applies one binary operation",
        ));
    }
    check_alu_dtype(x, op[0], 1)?;
    check_alu_dtype(x, op[0], 2)?;
    check_free_size(x, 1)?;
    let dtype = alu_dtype(op[0], [a.dtype, b.dtype].into_iter()).unwrap_or(a.dtype);
    Ok(Some(elementwise(a.shape, dtype)))
}

/// `tensor_scalar(data, op0, operand0, op1, operand1)`, `scalar_tensor_tensor` (whose
/// `operand1` is a tile) and `tensor_scalar_reduce` (with a per-partition reduction).
pub(super) fn tensor_scalar(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let InstrData::Alu { op, acc, .. } = *x.data else {
        return Err(malformed(x));
    };
    let data = *tile(x, 1)?;
    scalar_or_column(x, 2, &data.shape)?;
    if x.opcode == Opcode::ScalarTensorTensor {
        tile(x, 3)?;
        same_grid(x, 1, 3)?;
    } else {
        scalar_or_column(x, 3, &data.shape)?;
    }
    if op[1] == Alu::Bypass && !matches!(x.slots[3], Slot::Absent) {
        return Err(x.blame(
            3,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "operand1",
                expected: "given with the operation op1 that applies it",
            },
        ));
    }
    let bit = |a: Alu| a.class() == AluClass::Bitvec;
    if op[1] != Alu::Bypass && bit(op[0]) != bit(op[1]) {
        return Err(unsupported(
            x,
            Part::Code(1),
            op[1],
            "the two operations must both be bit operations or both arithmetic",
        ));
    }
    if x.engine == Engine::Scalar {
        if x.target == Target::Trn1 {
            return Err(not_on_target(x, "trn2 or trn3"));
        }
        let ok = |a: Alu| matches!(a, Alu::Add | Alu::Multiply | Alu::Bypass);
        if let Some(j) = (0..2).find(|&j| !ok(op[j])) {
            return Err(unsupported(
                x,
                Part::Code(small(j)),
                op[j],
                "the Scalar engine runs tensor_scalar with multiply and add only",
            ));
        }
    }
    for (slot, &a) in (2..).zip(&op) {
        check_alu_dtype(x, a, 1)?;
        check_alu_dtype(x, a, slot)?;
    }
    match (x.opcode == Opcode::TensorScalarReduce, acc) {
        (true, Some(a)) => check_acc(x, a.op, &data.shape)?,
        (true, None) => {
            return Err(x.blame(
                4,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: "reduce_res",
                    expected: "a (P, 1) vector",
                },
            ));
        }
        (false, Some(_)) => return Err(malformed(x)),
        (false, None) => {}
    }
    check_free_size(x, 1)?;
    let last = if op[1] == Alu::Bypass { op[0] } else { op[1] };
    // An operand that no operation reads (a one-operand op's, an absent op1's) takes no part
    // in promotion.
    let read = [
        true,
        op[0].arity() == 2,
        op[1] != Alu::Bypass && op[1].arity() == 2,
    ];
    let dtypes = (1..4)
        .zip(read)
        .filter(|&(_, r)| r)
        .filter_map(|(s, _)| src_dtype(x, s));
    let dtype = alu_dtype(last, dtypes).unwrap_or(data.dtype);
    Ok(Some(elementwise(data.shape, dtype)))
}

/// `activation(op, data, bias, scale)`: `scale` an immediate or an f32 `[P, 1]` vector, `bias`
/// an f32/f16/bf16 `[P, 1]` vector.
pub(super) fn activation(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let InstrData::Act { func, acc, .. } = *x.data else {
        return Err(malformed(x));
    };
    let data = *tile(x, 1)?;
    match &x.slots[2] {
        Slot::Imm(_) => {}
        Slot::View(v) if !v.column => {
            return Err(x.blame(2, RuleViolation::ScaleNotScalarOrVector { shape: v.shape }));
        }
        Slot::View(v) if v.dtype != DType::F32 => {
            return Err(x.blame(2, RuleViolation::ScaleInvalidType { found: v.dtype }));
        }
        Slot::View(_) => scalar_or_column(x, 2, &data.shape)?,
        Slot::Absent | Slot::Access(_) | Slot::Expr => return Err(malformed(x)),
    }
    match &x.slots[3] {
        Slot::Absent => {}
        Slot::View(v) if v.column && matches!(v.dtype, DType::F32 | DType::F16 | DType::Bf16) => {
            scalar_or_column(x, 3, &data.shape)?;
            if func == crate::func::ActFn::Reciprocal && x.target == Target::Trn1 {
                return Err(x.blame(
                    3,
                    RuleViolation::OperandKind {
                        op: x.info().name,
                        operand: "bias",
                        expected: "absent for reciprocal on trn1 (NeuronCore-v2 applies no bias to reciprocal)",
                    },
                ));
            }
        }
        Slot::View(v) => {
            return Err(x.blame(
                3,
                RuleViolation::BiasInvalidType {
                    found: v.dtype,
                    column: v.column,
                    shape: v.shape,
                },
            ));
        }
        Slot::Access(_) | Slot::Imm(_) | Slot::Expr => {
            return Err(x.blame(
                3,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: "bias",
                    expected: "a (P, 1) vector of f32, f16 or bf16",
                },
            ));
        }
    }
    if let Some(a) = acc {
        check_acc(x, a.op, &data.shape)?;
    }
    check_free_size(x, 1)?;
    Ok(Some(elementwise(data.shape, data.dtype)))
}

/// `tensor_reduce(op, data, axis, negate)`: a reduction along free axes; the result keeps
/// the other axes and has size 1 along the reduced ones.
pub(super) fn tensor_reduce(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let InstrData::Reduce { op, axes, .. } = *x.data else {
        return Err(malformed(x));
    };
    let data = *tile(x, 1)?;
    let free = data.shape.rank().saturating_sub(1);
    if axes == 0 || u32::from(axes) >> free != 0 {
        let list = (0..8u8)
            .filter(|j| axes >> j & 1 == 1)
            .map(|j| j.saturating_add(1))
            .collect();
        return Err(x.blame(
            1,
            RuleViolation::ReduceAxes {
                op: x.info().name,
                axes: list,
                max_axis: free,
            },
        ));
    }
    if !op.is_reduction() {
        return Err(unsupported(x, Part::Code(0), op, "it is not a reduction"));
    }
    check_alu_dtype(x, op, 1)?;
    check_free_size(x, 1)?;
    let mut dims = [1u32; crate::shape::MAX_TILE_RANK];
    for (j, &d) in data.shape.dims().iter().enumerate() {
        dims[j] = if j.checked_sub(1).is_some_and(|a| axes >> a & 1 == 1) {
            1
        } else {
            d
        };
    }
    let shape = TileShape::new(&dims[..data.shape.rank()]).ok_or_else(|| malformed(x))?;
    let dtype = alu_dtype(op, core::iter::once(data.dtype)).unwrap_or(data.dtype);
    Ok(Some(elementwise(shape, dtype)))
}

/// `tensor_tensor_scan(data0, data1, initial, op0, op1)`: two tiles of one grid; `initial` an
/// immediate or a `[P, 1]` vector.
pub(super) fn tensor_tensor_scan(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let InstrData::Scan { op, .. } = *x.data else {
        return Err(malformed(x));
    };
    let a = *tile(x, 1)?;
    tile(x, 2)?;
    same_grid(x, 1, 2)?;
    scalar_or_column(x, 3, &a.shape)?;
    for (j, o) in op.into_iter().enumerate() {
        if o.class() != AluClass::Arithmetic || o.arity() != 2 {
            return Err(unsupported(
                x,
                Part::Code(small(j)),
                o,
                "a scan combines with binary arithmetic",
            ));
        }
    }
    check_free_size(x, 1)?;
    let dtype = [1, 2]
        .iter()
        .filter_map(|&s| src_dtype(x, s))
        .reduce(DType::promote);
    Ok(Some(elementwise(a.shape, dtype.unwrap_or(a.dtype))))
}

/// `select(pred, on_true, on_false)` and `affine_select`: the result has the grid of the
/// tiles involved.
pub(super) fn select(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    // Both values are given: a select has nothing to write where one is missing.
    if let Some(s) = (2..4).find(|&s| matches!(x.slots[s], Slot::Absent)) {
        return Err(x.blame(
            s,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: x.info().operands[s].name,
                expected: "a tile or a compile-time number",
            },
        ));
    }
    let tiles: Vec<usize> = (1..4)
        .filter(|&s| matches!(x.slots[s], Slot::View(_)))
        .collect();
    let Some(&first) = tiles.first() else {
        // Every operand an immediate: the destination gives the grid.
        return given_dst(x);
    };
    for &s in &tiles[1..] {
        same_grid(x, first, s)?;
    }
    if x.opcode == Opcode::AffineSelect {
        if !matches!(x.slots[1], Slot::Expr) || !matches!(x.slots[2], Slot::View(_)) {
            return Err(malformed(x));
        }
        if !matches!(x.slots[3], Slot::Imm(_)) {
            return Err(x.blame(
                3,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: x.info().operands[3].name,
                    expected: "a compile-time number (converted to fp32)",
                },
            ));
        }
    }
    let shape = x.view(first)?.shape;
    let dtype = [2, 3]
        .iter()
        .filter_map(|&s| src_dtype(x, s))
        .reduce(DType::promote);
    Ok(Some(elementwise(shape, dtype.unwrap_or(DType::F32))))
}

/// `nc_transpose`: TensorE as [`transpose`]; VectorE a `[P ≤ 32, F ≤ 32]` tile of any dtype,
/// on chip.
pub(super) fn nc_transpose(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.engine == Engine::Tensor {
        return transpose(x);
    }
    let src = x.view(1)?;
    let (p, f) = (u64::from(src.shape.partitions()), src.shape.free_elems());
    for (what, size) in [("partition dimension", p), ("free size", f)] {
        if size > 32 {
            return Err(x.blame(
                1,
                RuleViolation::SizeLimit {
                    op: x.info().name,
                    operand: "data",
                    what,
                    size,
                    limit: 32,
                },
            ));
        }
    }
    // Both at most 32 (checked above).
    let (f, p) = (u32::try_from(f), u32::try_from(p));
    let (Ok(f), Ok(p)) = (f, p) else {
        return Err(malformed(x));
    };
    let shape = TileShape::new(&[f, p]).ok_or_else(|| malformed(x))?;
    Ok(Some(elementwise(shape, src.dtype)))
}

/// `bn_stats(data)`: `[P, F ≤ 512]` → `[P, 6]` fp32 statistics.
pub(super) fn bn_stats(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let src = x.view(1)?;
    let f = src.shape.free_elems();
    if f > u64::from(BN_STATS_FMAX) {
        return Err(x.blame(
            1,
            RuleViolation::SizeLimit {
                op: x.info().name,
                operand: "data",
                what: "free size",
                size: f,
                limit: u64::from(BN_STATS_FMAX),
            },
        ));
    }
    let shape = TileShape::new(&[src.shape.partitions(), 6]).ok_or_else(|| malformed(x))?;
    Ok(Some(elementwise(shape, DType::F32)))
}

/// `bn_aggr(data)`: concatenated `bn_stats` results `[P, 6·k]` → `[P, 2]` (mean, variance).
pub(super) fn bn_aggr(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let src = x.view(1)?;
    let f = src.shape.free_elems();
    if f == 0 || f % 6 != 0 {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "data",
                expected: "concatenated bn_stats results: a free size that is a multiple of 6",
            },
        ));
    }
    let shape = TileShape::new(&[src.shape.partitions(), 2]).ok_or_else(|| malformed(x))?;
    Ok(Some(elementwise(shape, DType::F32)))
}

/// `load_transpose2d`: a 2-D HBM access `[A, B]` into an SBUF tile `[B, A]`.
pub(super) fn load_transpose2d(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let src = x.view(1)?;
    let dims: Vec<u32> = src
        .shape
        .dims()
        .iter()
        .copied()
        .filter(|&d| d != 1)
        .collect();
    let (a, b) = match dims.as_slice() {
        [a, b] => (*a, *b),
        [a] if src.shape.partitions() == 1 => (1, *a),
        [a] => (*a, 1),
        [] => (1, 1),
        _ => {
            return Err(x.blame(
                1,
                RuleViolation::RankLimit {
                    op: x.info().name,
                    operand: "src",
                    rank: dims.len(),
                    max: 2,
                },
            ));
        }
    };
    if b > PARTITIONS {
        return Err(x.blame(
            1,
            RuleViolation::PartitionDimTooLarge { size: u64::from(b) },
        ));
    }
    let shape = TileShape::new(&[b, a]).ok_or_else(|| malformed(x))?;
    Ok(Some(Inferred {
        shape,
        dtype: src.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf],
    }))
}

/// `iota(expr)`: the destination's own shape and dtype, on SBUF.
pub(super) fn iota(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if !matches!(x.slots[1], Slot::Expr) {
        return Err(malformed(x));
    }
    let dst = x.view(0)?;
    Ok(Some(Inferred {
        shape: dst.shape,
        dtype: dst.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf],
    }))
}

/// The free sizes `max8`, `nc_find_index8` and `nc_match_replace8` read per partition.
const TOP8_FREE: (u64, u64) = (8, 16384);

/// A searched operand (`max8`'s `src`, `data`) with 8 to 16384 free elements (the match-replace
/// takes fewer than 8 too: `min`).
fn check_top8_free<'a>(x: &'a InferIn<'_>, slot: usize, min: u64) -> Result<&'a ViewInfo, Blame> {
    let v = tile(x, slot)?;
    let size = v.shape.free_elems();
    if size < min || size > TOP8_FREE.1 {
        return Err(x.blame(
            slot,
            RuleViolation::SizeRange {
                op: x.info().name,
                operand: x.info().operands[slot].name,
                what: "free size",
                size,
                min,
                max: TOP8_FREE.1,
            },
        ));
    }
    Ok(v)
}

/// The 8 `vals` of each partition of `data`: a tile of the same partitions with exactly 8 free
/// elements.
fn check_vals(x: &InferIn<'_>, data: &ViewInfo) -> Result<(), Blame> {
    let vals = tile(x, 2)?;
    if vals.shape.partitions() != data.shape.partitions() {
        return Err(partition_mismatch(x, 1, &data.shape, 2, &vals.shape));
    }
    if vals.shape.free_elems() != 8 {
        return Err(x.blame(
            2,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "vals",
                expected: "a tile of exactly 8 elements per partition",
            },
        ));
    }
    Ok(())
}

/// `max8(src)`: `[P, F]` with `8 ≤ F ≤ 16384` → `[P, 8]`, the source's dtype.
pub(super) fn max8(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let src = check_top8_free(x, 1, TOP8_FREE.0)?;
    let shape = TileShape::new(&[src.shape.partitions(), 8]).ok_or_else(|| malformed(x))?;
    Ok(Some(elementwise(shape, src.dtype)))
}

/// `nc_find_index8(data, vals)`: `[P, 8 ≤ F ≤ 16384]` and `[P, 8]` → `[P, 8]` indices, uint32
/// unless the destination is uint16.
pub(super) fn nc_find_index8(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let data = check_top8_free(x, 1, TOP8_FREE.0)?;
    check_vals(x, data)?;
    if let Slot::View(dst) = x.slots[0]
        && !matches!(dst.dtype, DType::U32 | DType::U16)
    {
        return Err(x.blame(
            0,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "dst",
                expected: "uint32 or uint16",
                found: dst.dtype,
            },
        ));
    }
    let shape = TileShape::new(&[data.shape.partitions(), 8]).ok_or_else(|| malformed(x))?;
    Ok(Some(elementwise(shape, DType::U32)))
}

/// `nc_match_replace8(data, vals, imm, dst_idx)`: `[P, F ≤ 16384]`, `[P, 8]` and an immediate
/// → `data`'s shape and dtype; the optional `dst_idx` a `[P, 8]` uint32 or uint16 tile.
pub(super) fn nc_match_replace8(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let data = check_top8_free(x, 1, 1)?;
    check_vals(x, data)?;
    if !matches!(x.slots[3], Slot::Imm(_)) {
        return Err(x.blame(
            3,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "imm",
                expected: "a compile-time number",
            },
        ));
    }
    if let Slot::View(idx) = x.slots[4] {
        if idx.shape.partitions() != data.shape.partitions() {
            return Err(partition_mismatch(x, 1, &data.shape, 4, &idx.shape));
        }
        if idx.shape.free_elems() != 8 {
            return Err(x.blame(
                4,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: "dst_idx",
                    expected: "a tile of exactly 8 elements per partition",
                },
            ));
        }
        if !matches!(idx.dtype, DType::U32 | DType::U16) {
            return Err(x.blame(
                4,
                RuleViolation::WrongDType {
                    op: x.info().name,
                    operand: "dst_idx",
                    expected: "uint32 or uint16",
                    found: idx.dtype,
                },
            ));
        }
    }
    Ok(Some(elementwise(data.shape, data.dtype)))
}

/// `select_reduce(predicate, on_true, on_false)`: `predicate` (int8, uint8, int16 or uint16)
/// and `on_true` (any dtype but tfloat32, int32, uint32; not both in PSUM) of one grid,
/// `on_false` a number or a `[P, 1]` column; the optional `reduce_res` a float `[P, 1]` column
/// reduced with `maximum`. The result has `on_true`'s shape and dtype.
pub(super) fn select_reduce(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let (pred, on_true) = (tile(x, 1)?, tile(x, 2)?);
    same_grid(x, 2, 1)?;
    if !matches!(pred.dtype, DType::I8 | DType::U8 | DType::I16 | DType::U16) {
        return Err(x.blame(
            1,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "predicate",
                expected: "int8, uint8, int16 or uint16",
                found: pred.dtype,
            },
        ));
    }
    if matches!(on_true.dtype, DType::Tf32 | DType::I32 | DType::U32) {
        return Err(x.blame(
            2,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "on_true",
                expected: "a dtype other than tfloat32, int32 and uint32",
                found: on_true.dtype,
            },
        ));
    }
    if pred.memory == Memory::Psum && on_true.memory == Memory::Psum {
        return Err(x.blame(
            2,
            RuleViolation::BothInPsum {
                op: x.info().name,
                a: "predicate",
                b: "on_true",
            },
        ));
    }
    match x.slots[3] {
        Slot::Imm(_) => {}
        Slot::View(v) if v.column && v.shape.partitions() == on_true.shape.partitions() => {}
        Slot::View(_) | Slot::Absent | Slot::Access(_) | Slot::Expr => {
            return Err(x.blame(
                3,
                RuleViolation::OperandKind {
                    op: x.info().name,
                    operand: "on_false",
                    expected: "a number or a (P, 1) vector of on_true's partitions",
                },
            ));
        }
    }
    if let InstrData::SelectReduce { acc: Some(a), .. } = *x.data {
        if a.op != Alu::Max {
            return Err(unsupported(
                x,
                Part::Code(2),
                a.op,
                "select_reduce reduces with maximum only",
            ));
        }
        check_acc(x, a.op, &on_true.shape)?;
        let res = tile(x, 4)?;
        if !res.dtype.is_float() {
            return Err(x.blame(
                4,
                RuleViolation::WrongDType {
                    op: x.info().name,
                    operand: "reduce_res",
                    expected: "a float type",
                    found: res.dtype,
                },
            ));
        }
    }
    check_free_size(x, 2)?;
    Ok(Some(elementwise(on_true.shape, on_true.dtype)))
}

pub(super) fn malformed(_: &InferIn<'_>) -> Blame {
    Blame {
        part: Part::Whole,
        violation: RuleViolation::Malformed {
            what: "operands that do not fit the opcode",
        },
    }
}

/// A slot or function-code position (below `MAX_SLOTS`) as the `u8` a [`Part`] holds.
fn small(j: usize) -> u8 {
    u8::try_from(j).unwrap_or(u8::MAX)
}
