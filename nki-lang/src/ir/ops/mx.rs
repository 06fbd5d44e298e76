//! The rules of NeuronCore-v4's MX (microscaling) instructions: `quantize_mx` (Vector engine)
//! and `nc_matmul_mx` (Tensor engine).

use super::infer::{Blame, InferIn, Inferred, not_on_target, tile};
use crate::dtype::DType;
use crate::ir::{MX_GROUP_FREE, MX_GROUP_PARTITIONS, mx_scale_partition};
use crate::rules::RuleViolation;
use crate::target::{Memory, PARTITIONS, Target};

/// A shape rule of an MX instruction broken by operand `slot`.
fn shape(x: &InferIn<'_>, slot: usize, expected: &'static str) -> Blame {
    x.blame(
        slot,
        RuleViolation::OperandKind {
            op: x.info().name,
            operand: x.info().operands[slot].name,
            expected,
        },
    )
}

/// The partitions an MX scale tile needs for data of `parts` partitions: the scale of group
/// `i` (partitions `8i … 8i+7`) lives on partition [`mx_scale_partition`]`(i)` of the scale
/// tile, so `parts / 8` partitions up to 32 data partitions, and `32·(q − 1) + 4` for `q`
/// quadrants of data.
pub fn mx_scale_partitions_needed(parts: u32) -> u32 {
    let groups = (parts as usize).div_ceil(MX_GROUP_PARTITIONS);
    match groups.checked_sub(1) {
        Some(last) => u32::try_from(mx_scale_partition(last).saturating_add(1)).unwrap_or(u32::MAX),
        None => 0,
    }
}

/// Checks an MX scale operand (slot `slot`) for data of `parts` partitions and `free` x4
/// elements per partition: `float8_e8m0fnu` or `uint8`, as many free elements as the data,
/// at least [`mx_scale_partitions_needed`] partitions.
pub(super) fn check_scale(
    x: &InferIn<'_>,
    slot: usize,
    parts: u32,
    free: u64,
) -> Result<(), Blame> {
    let s = *tile(x, slot)?;
    if !matches!(s.dtype, DType::F8E8M0Fnu | DType::U8) {
        return Err(x.wrong_dtype(slot, "float8_e8m0fnu or uint8", s.dtype));
    }
    if s.shape.free_elems() != free {
        return Err(shape(
            x,
            slot,
            "a scale tile with one element per x4 element of a partition of the data (F // 4 of the unpacked data)",
        ));
    }
    if s.shape.partitions() < mx_scale_partitions_needed(parts) {
        return Err(shape(
            x,
            slot,
            "a scale tile with the group of partitions 8i … 8i+7 at partition 32·(i / 4) + i % 4: P / 8 partitions for up to 32 data partitions, 32·(P / 32 − 1) + 4 or more beyond",
        ));
    }
    Ok(())
}

/// `quantize_mx(dst, src, dst_scale)`: NeuronCore-v4 (trn3) only; every operand in SBUF;
/// `src` float16 or bfloat16 with a multiple of 32 partitions (at most 128) and a multiple of
/// 4 elements per partition; `dst` `float8_e5m2_x4` or `float8_e4m3fn_x4` with `src`'s
/// partitions and a quarter of its elements per partition; `dst_scale` as
/// [`check_scale`]. No result: the instruction writes its given destinations.
pub(super) fn quantize_mx(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.target != Target::Trn3 {
        return Err(not_on_target(x, "NeuronCore-v4 (trn3)"));
    }
    let (dst, src) = (*tile(x, 0)?, *tile(x, 1)?);
    if !matches!(src.dtype, DType::F16 | DType::Bf16) {
        return Err(x.wrong_dtype(1, "float16 or bfloat16", src.dtype));
    }
    if !matches!(dst.dtype, DType::F8E5M2X4 | DType::F8E4M3FnX4) {
        return Err(x.wrong_dtype(
            0,
            "float8_e5m2_x4 or float8_e4m3fn_x4 (quantize_mx has no fp4 output)",
            dst.dtype,
        ));
    }
    let parts = src.shape.partitions();
    if !parts.is_multiple_of(32) || parts > PARTITIONS {
        return Err(shape(x, 1, "a tile of 32, 64, 96 or 128 partitions"));
    }
    let free = src.shape.free_elems();
    if !free.is_multiple_of(MX_GROUP_FREE as u64) {
        return Err(shape(
            x,
            1,
            "a tile with a multiple of 4 elements per partition",
        ));
    }
    let x4 = free.div_ceil(MX_GROUP_FREE as u64);
    if dst.shape.partitions() != parts || dst.shape.free_elems() != x4 {
        return Err(shape(
            x,
            0,
            "src's partitions and a quarter of its elements per partition (four values per x4 element)",
        ));
    }
    check_scale(x, 2, parts, x4)?;
    Ok(Some(Inferred {
        shape: dst.shape,
        dtype: dst.dtype,
        fixed_dtype: true,
        memories: &[Memory::Sbuf],
    }))
}

/// `nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale)`: NeuronCore-v4
/// (trn3) only; `stationary` (`[K, M]`) and `moving` (`[K, N]`) packed MX types in SBUF with
/// one partition count `K`, a multiple of 32 up to 128; `M` even, at most 128; `N` at most 4096
/// (8192 into bfloat16: the whole PSUM); each scale as [`check_scale`] for its operand; `dst`
/// `[M, N]` float32 or bfloat16 in PSUM.
pub(super) fn nc_matmul_mx(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    if x.target != Target::Trn3 {
        return Err(not_on_target(x, "NeuronCore-v4 (trn3)"));
    }
    let (s, m) = (*tile(x, 1)?, *tile(x, 2)?);
    for (slot, v) in [(1, s), (2, m)] {
        if !v.dtype.is_packed() {
            return Err(x.wrong_dtype(
                slot,
                "float8_e5m2_x4, float8_e4m3fn_x4 or float4_e2m1fn_x4",
                v.dtype,
            ));
        }
    }
    let k = s.shape.partitions();
    if !k.is_multiple_of(32) || k > PARTITIONS {
        return Err(shape(x, 1, "a tile of 32, 64, 96 or 128 partitions"));
    }
    if m.shape.partitions() != k {
        return Err(shape(
            x,
            2,
            "as many partitions as stationary (the contraction)",
        ));
    }
    let (mm, n) = (s.shape.free_elems(), m.shape.free_elems());
    if !mm.is_multiple_of(2) || mm > 128 {
        return Err(shape(
            x,
            1,
            "an even number of elements per partition, at most 128",
        ));
    }
    let dst_dtype = match x.slots[0].info() {
        Some(d) => d.dtype,
        None => DType::F32,
    };
    if !matches!(dst_dtype, DType::F32 | DType::Bf16) {
        return Err(x.wrong_dtype(0, "float32 or bfloat16", dst_dtype));
    }
    let n_max = if dst_dtype == DType::Bf16 { 8192 } else { 4096 };
    if n > n_max {
        return Err(shape(
            x,
            2,
            "at most 4096 elements per partition (8192 into bfloat16): the whole PSUM",
        ));
    }
    check_scale(x, 3, k, mm)?;
    check_scale(x, 4, k, n)?;
    let dims = [mm, n].map(|v| u32::try_from(v).unwrap_or(u32::MAX));
    let Some(out) = crate::shape::TileShape::new(&dims) else {
        return Err(shape(x, 2, "a result of at most 128 × 8192"));
    };
    Ok(Some(Inferred {
        shape: out,
        dtype: dst_dtype,
        fixed_dtype: true,
        memories: &[Memory::Psum],
    }))
}
