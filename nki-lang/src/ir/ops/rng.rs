//! The rules of the random number generators' opcodes: `rand`, `random_seed`, `dropout`
//! (the model's counter-based generator), and NKI 0.6's XORWOW instructions `rng`, `rand2`,
//! `set_rng_seed`, `rand_set_state` and `rand_get_state`.

use super::infer::{
    Blame, InferIn, Inferred, Slot, check_free_size, elementwise, not_on_target, scalar_or_column,
};
use crate::dtype::DType;
use crate::rules::RuleViolation;
use crate::target::{Engine, Memory, Target};

/// `rand`: the destination's own shape and float dtype (the values are exact in it).
pub(super) fn rand(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let dst = x.view(0)?;
    check_free_size(x, 0)?;
    if !dst.dtype.is_float() {
        return Err(x.blame(
            0,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "dst",
                expected: "a float type (values in [0, 1))",
                found: dst.dtype,
            },
        ));
    }
    Ok(Some(Inferred {
        shape: dst.shape,
        dtype: dst.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf, Memory::Psum],
    }))
}

/// `random_seed`: one integer element. No result.
pub(super) fn random_seed(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let seed = x.view(1)?;
    if seed.shape.partitions() != 1 || seed.shape.free_elems() != 1 {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "seed",
                expected: "a tile of one element ([1, 1])",
            },
        ));
    }
    if !seed.dtype.is_int() {
        return Err(x.blame(
            1,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "seed",
                expected: "an integer type (int32)",
                found: seed.dtype,
            },
        ));
    }
    Ok(None)
}

/// `dropout`: the data's shape and dtype; `prob` an immediate or a `[P, 1]` column of a float
/// type, and an integer `data` keeps its dtype (NKI's rules).
pub(super) fn dropout(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let data = *x.view(1)?;
    check_free_size(x, 1)?;
    scalar_or_column(x, 2, &data.shape)?;
    if let Slot::View(p) = x.slots[2]
        && !p.dtype.is_float()
    {
        return Err(x.blame(
            2,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "prob",
                expected: "a float type (a probability)",
                found: p.dtype,
            },
        ));
    }
    if let Slot::View(dst) = x.slots[0]
        && data.dtype.is_int()
        && dst.dtype != data.dtype
    {
        return Err(x.blame(
            0,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "dst",
                expected: data.dtype.name(),
                found: dst.dtype,
            },
        ));
    }
    if data.dtype == DType::Bool {
        return Err(x.blame(
            1,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "data",
                expected: "a number type",
                found: data.dtype,
            },
        ));
    }
    Ok(Some(elementwise(data.shape, data.dtype)))
}

/// XORWOW state words of one generator: `x`, `y`, `z`, `w`, `v` and the Weyl counter `d`.
pub const XORWOW_WORDS: u32 = 6;

/// XORWOW generators per compute lane of an engine: four on the Vector engine (NeuronCore-v4
/// keeps four per lane to make four 32-bit values a cycle), one on the GpSimd engine.
pub const fn xorwow_generators(engine: Engine) -> u32 {
    match engine {
        Engine::Vector => 4,
        Engine::GpSimd | Engine::Scalar | Engine::Tensor | Engine::Dma | Engine::Sync => 1,
    }
}

/// The state words per compute lane of `engine`'s generators: 24 on the Vector engine, 6 on
/// the GpSimd engine (NKI's `rand_get_state` / `rand_set_state` element counts).
pub const fn xorwow_state_words(engine: Engine) -> u32 {
    match xorwow_generators(engine) {
        4 => 4 * XORWOW_WORDS,
        _ => XORWOW_WORDS,
    }
}

/// The slots after the destination hold nothing (`rng`, `rand_get_state`), or (`rand2`) hold
/// something.
fn check_bound_slots(x: &InferIn<'_>, given: bool) -> Result<(), Blame> {
    for slot in [1, 2] {
        if matches!(x.slots[slot], Slot::Absent) == given {
            return Err(x.blame(
                slot,
                RuleViolation::Malformed {
                    what: if given {
                        "rand2 takes `min` and `max`"
                    } else {
                        "an operand in a slot the opcode does not use"
                    },
                },
            ));
        }
    }
    Ok(())
}

/// `rng(dst, engine)`: 32 random bits per element, truncated to `dst`'s integer dtype (int8,
/// int16, int32, uint8, uint16 or uint32). The GpSimd engine runs it from NeuronCore-v3 (trn2)
/// on; on NeuronCore-v2 (trn1) only the Vector engine does.
pub(super) fn rng(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.engine == Engine::GpSimd && x.target == Target::Trn1 {
        return Err(not_on_target(x, "NeuronCore-v3 and newer (trn2, trn3)"));
    }
    check_bound_slots(x, false)?;
    let dst = x.view(0)?;
    check_free_size(x, 0)?;
    let ints = [
        DType::I8,
        DType::I16,
        DType::I32,
        DType::U8,
        DType::U16,
        DType::U32,
    ];
    if !ints.contains(&dst.dtype) {
        return Err(x.wrong_dtype(
            0,
            "an integer type: int8, int16, int32, uint8, uint16 or uint32",
            dst.dtype,
        ));
    }
    Ok(Some(elementwise(dst.shape, dst.dtype)))
}

/// The generation rule of the state instructions: NeuronCore-v3 and newer on the GpSimd
/// engine, NeuronCore-v4 on the Vector engine.
fn state_on_target(x: &InferIn<'_>) -> Result<(), Blame> {
    match (x.engine, x.target) {
        (Engine::Vector, Target::Trn1 | Target::Trn2) => {
            Err(not_on_target(x, "NeuronCore-v4 (trn3)"))
        }
        (_, Target::Trn1) => Err(not_on_target(x, "NeuronCore-v3 and newer (trn2, trn3)")),
        _ => Ok(()),
    }
}

/// A state tile (slot `slot`): uint32, as many elements per partition as the engine keeps
/// state words per lane.
fn state_tile(x: &InferIn<'_>, slot: usize) -> Result<(), Blame> {
    let v = x.view(slot)?;
    if v.dtype != DType::U32 {
        return Err(x.wrong_dtype(slot, "uint32", v.dtype));
    }
    let words = u64::from(xorwow_state_words(x.engine));
    if v.shape.free_elems() != words {
        return Err(x.blame(
            slot,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: x.info().operands[slot].name,
                expected: match x.engine {
                    Engine::Vector => {
                        "a tile of 24 elements per partition on the Vector engine (its four XORWOW generators' state per lane; 6 on the GpSimd engine)"
                    }
                    Engine::GpSimd
                    | Engine::Scalar
                    | Engine::Tensor
                    | Engine::Dma
                    | Engine::Sync => {
                        "a tile of 6 elements per partition on the GpSimd engine (its XORWOW state per lane; 24 on the Vector engine)"
                    }
                },
            },
        ));
    }
    Ok(())
}

/// `rand_get_state(dst, engine)`: the engine's generator state, a uint32 `[P, 6]` (GpSimd) or
/// `[P, 24]` (Vector) tile. NeuronCore-v3+ on GpSimd, NeuronCore-v4 on Vector.
pub(super) fn rand_get_state(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    state_on_target(x)?;
    check_bound_slots(x, false)?;
    let dst = *x.view(0)?;
    state_tile(x, 0)?;
    Ok(Some(elementwise(dst.shape, dst.dtype)))
}

/// `rand_set_state(src_seeds, engine)`: loads the engine's generator state from a uint32
/// `[P, 6]` (GpSimd) or `[P, 24]` (Vector) SBUF tile. No result.
pub(super) fn rand_set_state(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    state_on_target(x)?;
    state_tile(x, 1)?;
    Ok(None)
}

/// `set_rng_seed(src_seeds)`: a `[1, 1]` tile of a 32-bit dtype (int32, uint32 or float32: its
/// bits are the seed). No result.
pub(super) fn set_rng_seed(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let seed = x.view(1)?;
    if seed.shape.partitions() != 1 || seed.shape.free_elems() != 1 {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "src_seeds",
                expected: "a tile of one element ([1, 1])",
            },
        ));
    }
    if !matches!(seed.dtype, DType::I32 | DType::U32 | DType::F32) {
        return Err(x.wrong_dtype(1, "a 32-bit type (int32, uint32, float32)", seed.dtype));
    }
    Ok(None)
}

/// `rand2(dst, min, max)`: NeuronCore-v4 (trn3) only; `min` and `max` fp32 immediates or fp32
/// `[P, 1]` columns of `dst`'s partitions, immediates with `min < max`; `dst` of a float
/// (fp8, fp16, bf16, fp32, tf32) or integer (int8/16/32, uint8/16/32) dtype.
pub(super) fn rand2(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.target != Target::Trn3 {
        return Err(not_on_target(x, "NeuronCore-v4 (trn3)"));
    }
    check_bound_slots(x, true)?;
    let dst = *x.view(0)?;
    check_free_size(x, 0)?;
    let ok = [
        DType::F8E4M3,
        DType::F8E5M2,
        DType::F16,
        DType::Bf16,
        DType::F32,
        DType::Tf32,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::U8,
        DType::U16,
        DType::U32,
    ];
    if !ok.contains(&dst.dtype) {
        return Err(x.wrong_dtype(
            0,
            "float8_e4m3, float8_e5m2, float16, bfloat16, float32, tfloat32, int8, int16, int32, uint8, uint16 or uint32",
            dst.dtype,
        ));
    }
    for slot in [1, 2] {
        scalar_or_column(x, slot, &dst.shape)?;
        if let Slot::View(v) = x.slots[slot]
            && v.dtype != DType::F32
        {
            return Err(x.wrong_dtype(slot, "float32", v.dtype));
        }
    }
    if let (Slot::Imm(lo), Slot::Imm(hi)) = (x.slots[1], x.slots[2])
        && lo.as_f32().partial_cmp(&hi.as_f32()) != Some(core::cmp::Ordering::Less)
    {
        return Err(x.blame(
            2,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "max",
                expected: "above `min` (rand2 draws from [min, max] with min < max)",
            },
        ));
    }
    Ok(Some(elementwise(dst.shape, dst.dtype)))
}
