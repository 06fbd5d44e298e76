//! NKI's packed MX types (`float8_e5m2_x4`, `float8_e4m3fn_x4`, `float4_e2m1fn_x4`): four
//! values of the lane type in one element.
//!
//! Lane `j` (0 … 3) of an fp8 `_x4` element is bits `8j … 8j+7` of its 32-bit little-endian
//! word, so the element's four bytes in memory are lanes 0, 1, 2, 3 in order, the same bytes as
//! four consecutive unpacked fp8 elements (NKI's tutorial views a `uint32` host array holding
//! four fp8 bytes each as `_x4`). Lane `j` of a `float4_e2m1fn_x4` is bits `4j … 4j+3` of its
//! 16-bit word: lane 0 is the low nibble of the low byte (the tutorial's packing, two fp4
//! values per byte, the even one low). The lanes are four consecutive contraction elements of
//! an MX matmul operand.
//!
//! A lane converts exactly as an element of its lane type does ([`to_f32`], [`from_f32`]):
//! loads exact, stores round to nearest even.

use nki_lang::DType;

use super::{from_f32, to_f32};

/// The bits per lane of a packed type (8 or 4) and its lane type; `None` for an unpacked type.
fn lane(dtype: DType) -> Option<(u32, DType)> {
    let lane = dtype.lane()?;
    Some((if lane == DType::F4E2M1Fn { 4 } else { 8 }, lane))
}

/// The four lane codes of a packed element's `bits` (zero-extended), lane 0 first: an fp8
/// lane's byte, an fp4 lane in the low nibble (as the unpacked `float4_e2m1fn` holds it).
/// `None` if `dtype` is not a packed type.
pub fn unpack_x4(dtype: DType, bits: u32) -> Option<[u8; 4]> {
    let (w, _) = lane(dtype)?;
    let mask = (1u32 << w) - 1;
    Some([0u32, 1, 2, 3].map(|j| ((bits >> (w * j)) & mask) as u8))
}

/// The packed element (bits, zero-extended) of four lane codes, lane 0 first; an fp4 lane's
/// high nibble is ignored. `None` if `dtype` is not a packed type.
pub fn pack_x4(dtype: DType, lanes: [u8; 4]) -> Option<u32> {
    let (w, _) = lane(dtype)?;
    let mask = (1u32 << w) - 1;
    Some(lanes.iter().enumerate().fold(0, |acc, (j, &c)| {
        acc | ((u32::from(c) & mask) << (w * j as u32))
    }))
}

/// The four values of a packed element, lane 0 first, each loaded exactly as its lane type.
/// `None` if `dtype` is not a packed type.
pub fn x4_to_f32(dtype: DType, bits: u32) -> Option<[f32; 4]> {
    let (_, t) = lane(dtype)?;
    Some(unpack_x4(dtype, bits)?.map(|c| to_f32(t, u32::from(c))))
}

/// Packs four f32 values, lane 0 first, each stored as its lane type (round to nearest even,
/// the lane type's overflow and NaN results). `None` if `dtype` is not a packed type.
pub fn f32_to_x4(dtype: DType, values: [f32; 4]) -> Option<u32> {
    let (_, t) = lane(dtype)?;
    pack_x4(dtype, values.map(|x| from_f32(t, x) as u8))
}
