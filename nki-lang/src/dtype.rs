//! Element types of tensors and tiles, and NKI's type promotion.

use core::fmt;

/// An element type of an HBM tensor or an on-chip tile: every type NKI supports.
///
/// The names follow NKI (`nl.bfloat16`, `nl.float8_e4m3`, `nl.int32`, ...); in a kernel body they
/// are written the way Rust spells the matching host types where Rust has one (`bf16`, `f32`,
/// `i8`, `u32`, `bool`) and as NKI spells them otherwise (`tfloat32`, `float8_e4m3`,
/// `float8_e4m3fn`).
///
/// The enum is exhaustive on purpose: every crate that handles elements (the macro's emitter,
/// the runtime's conversions) matches on it, and a new type must be handled in each of them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// TensorFloat-32: 1 sign, 8 exponent, 10 mantissa bits, stored in a 32-bit container
    /// (the low 13 mantissa bits are zero).
    Tf32,
    /// bfloat16: 1 sign, 8 exponent, 7 mantissa bits.
    Bf16,
    /// IEEE binary16.
    F16,
    /// 8-bit float with 4 exponent and 3 mantissa bits (`nl.float8_e4m3`).
    F8E4M3,
    /// 8-bit float with 5 exponent and 2 mantissa bits (`nl.float8_e5m2`).
    F8E5M2,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// A boolean stored in one byte (0 or 1), NKI's `nl.bool_`.
    Bool,
    /// OCP FP8 E4M3 "FN" (`nl.float8_e4m3fn`): 4 exponent and 3 mantissa bits, bias 7, no
    /// infinities, NaN only at `S.1111.111`, largest finite ±448.
    F8E4M3Fn,
    /// OCP MX FP4 E2M1 (ml_dtypes' `float4_e2m1fn`): 2 exponent and 1 mantissa bit, bias 1, no
    /// infinities or NaN, largest finite ±6; one element per byte, in the low nibble. NKI itself
    /// names it only packed four at a time (`nl.float4_e2m1fn_x4`).
    F4E2M1Fn,
    /// OCP MX scale E8M0 (`nl.float8_e8m0fnu`): 8 exponent bits, no sign, no mantissa, no
    /// zero, bias 127 (`2^−127` … `2^127`), `0xff` = NaN.
    F8E8M0Fnu,
    /// NKI's `nl.float8_e5m2_x4`: four `float8_e5m2` values packed in one 32-bit element,
    /// lane `j` (0 … 3) in bits `8j … 8j+7` (little-endian: lane 0 is the lowest byte). The four
    /// lanes are four consecutive contraction elements of an MX matmul operand; only
    /// `quantize_mx`, `nc_matmul_mx` and DMA copies accept it.
    F8E5M2X4,
    /// NKI's `nl.float8_e4m3fn_x4`: four `float8_e4m3fn` values packed in one 32-bit element,
    /// laid out as [`DType::F8E5M2X4`]'s.
    F8E4M3FnX4,
    /// NKI's `nl.float4_e2m1fn_x4`: four `float4_e2m1fn` values packed in one 16-bit element,
    /// lane `j` in bits `4j … 4j+3` (lane 0 the low nibble of the low byte).
    F4E2M1FnX4,
}

/// The broad class of an element type.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum DTypeClass {
    /// A floating-point type.
    Float,
    /// A signed integer.
    Signed,
    /// An unsigned integer.
    Unsigned,
    /// `bool`.
    Bool,
}

impl DType {
    /// Every element type with a value of its own (every type but the packed MX types of
    /// [`DType::PACKED`]), in a fixed order: `ALL[d as usize] == d`, which per-type tables use.
    pub const ALL: [DType; 16] = [
        DType::F32,
        DType::Tf32,
        DType::Bf16,
        DType::F16,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::Bool,
        DType::F8E4M3Fn,
        DType::F4E2M1Fn,
        DType::F8E8M0Fnu,
    ];

    /// The packed MX types (`nl.float8_e5m2_x4`, `nl.float8_e4m3fn_x4`,
    /// `nl.float4_e2m1fn_x4`): each element holds four values of [`DType::lane`]. They follow
    /// [`DType::ALL`] in the enum's order.
    pub const PACKED: [DType; 3] = [DType::F8E5M2X4, DType::F8E4M3FnX4, DType::F4E2M1FnX4];

    /// Whether the type is one of NKI's packed MX types ([`DType::PACKED`]).
    pub const fn is_packed(self) -> bool {
        matches!(
            self,
            DType::F8E5M2X4 | DType::F8E4M3FnX4 | DType::F4E2M1FnX4
        )
    }

    /// The type of each of a packed MX type's four values (`float8_e4m3fn` for
    /// `float8_e4m3fn_x4`, ...); `None` for the other types.
    pub const fn lane(self) -> Option<DType> {
        match self {
            DType::F8E5M2X4 => Some(DType::F8E5M2),
            DType::F8E4M3FnX4 => Some(DType::F8E4M3Fn),
            DType::F4E2M1FnX4 => Some(DType::F4E2M1Fn),
            DType::F32
            | DType::Tf32
            | DType::Bf16
            | DType::F16
            | DType::F8E4M3
            | DType::F8E5M2
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::Bool
            | DType::F8E4M3Fn
            | DType::F4E2M1Fn
            | DType::F8E8M0Fnu => None,
        }
    }

    /// Size of one element in bytes, as stored in HBM, SBUF and PSUM.
    pub const fn size(self) -> u32 {
        match self {
            DType::F32
            | DType::Tf32
            | DType::I32
            | DType::U32
            | DType::F8E5M2X4
            | DType::F8E4M3FnX4 => 4,
            DType::Bf16 | DType::F16 | DType::I16 | DType::U16 | DType::F4E2M1FnX4 => 2,
            DType::F8E4M3
            | DType::F8E5M2
            | DType::F8E4M3Fn
            | DType::F4E2M1Fn
            | DType::F8E8M0Fnu
            | DType::I8
            | DType::U8
            | DType::Bool => 1,
        }
    }

    /// The class of the type.
    pub const fn class(self) -> DTypeClass {
        match self {
            DType::F32
            | DType::Tf32
            | DType::Bf16
            | DType::F16
            | DType::F8E4M3
            | DType::F8E5M2
            | DType::F8E4M3Fn
            | DType::F4E2M1Fn
            | DType::F8E8M0Fnu
            | DType::F8E5M2X4
            | DType::F8E4M3FnX4
            | DType::F4E2M1FnX4 => DTypeClass::Float,
            DType::I8 | DType::I16 | DType::I32 => DTypeClass::Signed,
            DType::U8 | DType::U16 | DType::U32 => DTypeClass::Unsigned,
            DType::Bool => DTypeClass::Bool,
        }
    }

    /// Whether the type is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self.class(), DTypeClass::Float)
    }

    /// Whether the type has a NaN encoding: every float type but `float4_e2m1fn` (OCP MX FP4
    /// has neither NaN nor infinities) and the packed types (an element is four values, not
    /// one); no integer type or `bool`.
    pub const fn has_nan(self) -> bool {
        self.is_float() && !matches!(self, DType::F4E2M1Fn) && !self.is_packed()
    }

    /// Whether the type is an integer type (signed or unsigned; not `bool`).
    pub const fn is_int(self) -> bool {
        matches!(self.class(), DTypeClass::Signed | DTypeClass::Unsigned)
    }

    /// Bits of precision of a float type's significand, the implicit bit included (24 for
    /// f32); 0 for the other classes and the packed types (see [`DType::lane`]).
    pub const fn significand_bits(self) -> u32 {
        match self {
            DType::F32 => 24,
            DType::Tf32 | DType::F16 => 11,
            DType::Bf16 => 8,
            DType::F8E4M3 | DType::F8E4M3Fn => 4,
            DType::F8E5M2 => 3,
            DType::F4E2M1Fn => 2,
            DType::F8E8M0Fnu => 1,
            DType::I8
            | DType::I16
            | DType::I32
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::Bool
            | DType::F8E5M2X4
            | DType::F8E4M3FnX4
            | DType::F4E2M1FnX4 => 0,
        }
    }

    /// The largest finite value of the type: NumPy's `finfo(dtype).max` for a float type
    /// (`(2 − 2^−m) · 2^emax`: 3.4028234663852886e38 for f32, 3.3895313892515355e38 for bf16,
    /// 65504 for f16, 240 for the IEEE-style `float8_e4m3`, 57344 for `float8_e5m2`, 6 for
    /// `float4_e2m1fn`, 2^127 for `float8_e8m0fnu`; `float8_e4m3fn` gives its top mantissa
    /// code to NaN, so its largest is `1.75 · 2^8` = 448), `iinfo(dtype).max` for an integer
    /// type; `None` for `bool` and the packed types.
    pub fn max_value(self) -> Option<f64> {
        let float = |emax: i32| {
            let m = self.significand_bits().saturating_sub(1);
            let m = i32::try_from(m).unwrap_or(0);
            (2.0 - 2f64.powi(m.saturating_neg())) * 2f64.powi(emax)
        };
        Some(match self {
            DType::F32 | DType::Tf32 | DType::Bf16 => float(127),
            DType::F16 | DType::F8E5M2 => float(15),
            DType::F8E4M3 => float(7),
            DType::F8E4M3Fn => 448.0,
            DType::F4E2M1Fn => float(2),
            DType::F8E8M0Fnu => float(127),
            DType::I8 => f64::from(i8::MAX),
            DType::I16 => f64::from(i16::MAX),
            DType::I32 => f64::from(i32::MAX),
            DType::U8 => f64::from(u8::MAX),
            DType::U16 => f64::from(u16::MAX),
            DType::U32 => f64::from(u32::MAX),
            DType::Bool | DType::F8E5M2X4 | DType::F8E4M3FnX4 | DType::F4E2M1FnX4 => {
                return None;
            }
        })
    }

    /// The most negative finite value of the type: `−max` for a signed float type (NKI's
    /// `nl.fp32.min`, bit pattern `0xff7fffff`, is f32's), `2^−127` for the unsigned
    /// `float8_e8m0fnu` (its smallest value, code `0x00`, as ml_dtypes' `finfo(...).min`), the
    /// integer type's minimum; `None` for `bool` and the packed types.
    pub fn min_value(self) -> Option<f64> {
        Some(match self {
            DType::F32
            | DType::Tf32
            | DType::Bf16
            | DType::F16
            | DType::F8E4M3
            | DType::F8E5M2
            | DType::F8E4M3Fn
            | DType::F4E2M1Fn => -self.max_value()?,
            DType::F8E8M0Fnu => 2f64.powi(-127),
            DType::I8 => f64::from(i8::MIN),
            DType::I16 => f64::from(i16::MIN),
            DType::I32 => f64::from(i32::MIN),
            DType::U8 | DType::U16 | DType::U32 => 0.0,
            DType::Bool | DType::F8E5M2X4 | DType::F8E4M3FnX4 | DType::F4E2M1FnX4 => {
                return None;
            }
        })
    }

    /// A float type's machine epsilon, the distance from 1 to the next value (`2^−m`, NumPy's
    /// `finfo(dtype).eps`); `None` for the other classes.
    pub fn epsilon(self) -> Option<f64> {
        let m = i32::try_from(self.significand_bits().checked_sub(1)?).ok()?;
        self.is_float().then(|| 2f64.powi(m.saturating_neg()))
    }

    /// A float type's smallest positive normal value (NumPy's `finfo(dtype).smallest_normal`,
    /// alias `tiny`): `2^(1 − bias)`, and `2^−127` for `float8_e8m0fnu` (whose exponent code 0
    /// is a normal value: it has no zero and no subnormals); `None` for the other classes and
    /// the packed types.
    pub fn smallest_normal(self) -> Option<f64> {
        let bias: i32 = match self {
            DType::F32 | DType::Tf32 | DType::Bf16 => 127,
            DType::F16 | DType::F8E5M2 => 15,
            DType::F8E4M3 | DType::F8E4M3Fn => 7,
            DType::F4E2M1Fn => 1,
            DType::F8E8M0Fnu => return Some(2f64.powi(-127)),
            DType::I8
            | DType::I16
            | DType::I32
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::Bool
            | DType::F8E5M2X4
            | DType::F8E4M3FnX4
            | DType::F4E2M1FnX4 => return None,
        };
        Some(2f64.powi(1i32.saturating_sub(bias)))
    }

    /// The name used in kernel bodies and listings (`bf16`, `float8_e4m3`, `i32`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Tf32 => "tfloat32",
            DType::Bf16 => "bf16",
            DType::F16 => "f16",
            DType::F8E4M3 => "float8_e4m3",
            DType::F8E5M2 => "float8_e5m2",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::Bool => "bool",
            DType::F8E4M3Fn => "float8_e4m3fn",
            DType::F4E2M1Fn => "float4_e2m1fn",
            DType::F8E8M0Fnu => "float8_e8m0fnu",
            DType::F8E5M2X4 => "float8_e5m2_x4",
            DType::F8E4M3FnX4 => "float8_e4m3fn_x4",
            DType::F4E2M1FnX4 => "float4_e2m1fn_x4",
        }
    }

    /// NKI's name of the type (`nl.bfloat16`, ...), used in diagnostics.
    pub const fn nki_name(self) -> &'static str {
        match self {
            DType::F32 => "nl.float32",
            DType::Tf32 => "nl.tfloat32",
            DType::Bf16 => "nl.bfloat16",
            DType::F16 => "nl.float16",
            DType::F8E4M3 => "nl.float8_e4m3",
            DType::F8E5M2 => "nl.float8_e5m2",
            DType::I8 => "nl.int8",
            DType::I16 => "nl.int16",
            DType::I32 => "nl.int32",
            DType::U8 => "nl.uint8",
            DType::U16 => "nl.uint16",
            DType::U32 => "nl.uint32",
            DType::Bool => "nl.bool_",
            DType::F8E4M3Fn => "nl.float8_e4m3fn",
            // NKI names fp4 only packed (`nl.float4_e2m1fn_x4`); this is ml_dtypes' name.
            DType::F4E2M1Fn => "nl.float4_e2m1fn",
            DType::F8E8M0Fnu => "nl.float8_e8m0fnu",
            DType::F8E5M2X4 => "nl.float8_e5m2_x4",
            DType::F8E4M3FnX4 => "nl.float8_e4m3fn_x4",
            DType::F4E2M1FnX4 => "nl.float4_e2m1fn_x4",
        }
    }

    /// Parses a kernel-body type name: the Rust spelling (`bf16`, `i8`) or NKI's (`bfloat16`,
    /// `int8`, `float8_e4m3`, `float8_e4m3fn`, `float4_e2m1fn`, `float8_e8m0fnu`, and the packed
    /// `float8_e5m2_x4`, `float8_e4m3fn_x4`, `float4_e2m1fn_x4`).
    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "f32" | "float32" | "fp32" => DType::F32,
            "tf32" | "tfloat32" => DType::Tf32,
            "bf16" | "bfloat16" => DType::Bf16,
            "f16" | "float16" | "fp16" => DType::F16,
            "float8_e4m3" | "fp8_e4m3" | "f8e4m3" => DType::F8E4M3,
            "float8_e5m2" | "fp8_e5m2" | "f8e5m2" => DType::F8E5M2,
            "i8" | "int8" => DType::I8,
            "i16" | "int16" => DType::I16,
            "i32" | "int32" => DType::I32,
            "u8" | "uint8" => DType::U8,
            "u16" | "uint16" => DType::U16,
            "u32" | "uint32" => DType::U32,
            "bool" | "bool_" => DType::Bool,
            "float8_e4m3fn" | "fp8_e4m3fn" | "f8e4m3fn" => DType::F8E4M3Fn,
            "float4_e2m1fn" | "fp4_e2m1fn" | "f4e2m1fn" => DType::F4E2M1Fn,
            "float8_e8m0fnu" | "fp8_e8m0fnu" | "f8e8m0fnu" => DType::F8E8M0Fnu,
            "float8_e5m2_x4" => DType::F8E5M2X4,
            "float8_e4m3fn_x4" => DType::F8E4M3FnX4,
            "float4_e2m1fn_x4" => DType::F4E2M1FnX4,
            _ => return None,
        })
    }

    /// The type of an operation's result on operands of types `self` and `other` when the
    /// operation names no `dtype`: NKI's promotion rules.
    ///
    /// - `bool` with any type gives that type.
    /// - A float with an integer gives the float.
    /// - Two floats give the wider one; two of the same width but different formats give a
    ///   type holding both: `f16` + `bf16` → `f32`, two different 8-bit formats (`float8_e4m3`,
    ///   `float8_e5m2`, `float8_e4m3fn`) → `bf16`; `tfloat32` holds `bf16` and `f16`, `f32`
    ///   holds everything, and every 8-bit format holds `float4_e2m1fn`. The scale type
    ///   `float8_e8m0fnu` (8 exponent bits) promotes as `bf16` does, the narrowest type
    ///   holding all its values: with `f16` → `f32`, with an 8- or 4-bit format → `bf16`.
    ///   (NKI documents no promotion for its MX types; this is the rule chosen here.) A packed
    ///   type never promotes: no operation that promotes accepts one, and the rule returns
    ///   `self` for it.
    /// - Two integers of one signedness give the wider. A signed and an unsigned one give the
    ///   signed type if it is wider, else a signed type twice the unsigned one's width, and
    ///   `f32` when that would take 64 bits (`i32` + `u32` → `f32`, as NKI has no 64-bit
    ///   types).
    pub const fn promote(self, other: DType) -> DType {
        use DTypeClass::*;
        if self as u8 == other as u8 || self.is_packed() {
            return self;
        }
        if other.is_packed() {
            return other;
        }
        match (self.class(), other.class()) {
            (Bool, _) => other,
            (_, Bool) => self,
            (Float, Signed | Unsigned) => self,
            (Signed | Unsigned, Float) => other,
            (Float, Float) => promote_float(self, other),
            (Signed, Signed) | (Unsigned, Unsigned) => {
                if self.size() >= other.size() {
                    self
                } else {
                    other
                }
            }
            (Signed, Unsigned) => promote_mixed(self, other),
            (Unsigned, Signed) => promote_mixed(other, self),
        }
    }
}

/// Rank of a float type for promotion: a type holds every type of lower rank, except across
/// the two 16-bit and the two 8-bit formats, which [`promote_float`] widens.
const fn float_rank(d: DType) -> u8 {
    match d {
        DType::F32 => 4,
        DType::Tf32 => 3,
        DType::Bf16 | DType::F16 | DType::F8E8M0Fnu => 2,
        DType::F8E4M3 | DType::F8E5M2 | DType::F8E4M3Fn => 1,
        DType::F4E2M1Fn => 0,
        // Not floats, or packed: `promote_float` never sees them.
        DType::I8
        | DType::I16
        | DType::I32
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::Bool
        | DType::F8E5M2X4
        | DType::F8E4M3FnX4
        | DType::F4E2M1FnX4 => 1,
    }
}

const fn promote_float(a: DType, b: DType) -> DType {
    // `float8_e8m0fnu` promotes as `bf16` (it differs from `a` or `b`: equal types returned
    // earlier).
    let a = if matches!(a, DType::F8E8M0Fnu) {
        DType::Bf16
    } else {
        a
    };
    let b = if matches!(b, DType::F8E8M0Fnu) {
        DType::Bf16
    } else {
        b
    };
    if a as u8 == b as u8 {
        return a;
    }
    let (ra, rb) = (float_rank(a), float_rank(b));
    if ra > rb {
        a
    } else if rb > ra {
        b
    } else if ra == 2 {
        DType::F32
    } else {
        DType::Bf16
    }
}

const fn promote_mixed(signed: DType, unsigned: DType) -> DType {
    if signed.size() > unsigned.size() {
        signed
    } else {
        match unsigned.size() {
            1 => DType::I16,
            2 => DType::I32,
            _ => DType::F32,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_follows_nki() {
        use DType::*;
        let cases = [
            (F16, Bf16, F32),
            (F8E4M3, F8E5M2, Bf16),
            (F8E4M3, F16, F16),
            (F8E5M2, Bf16, Bf16),
            (F32, Tf32, F32),
            (Tf32, Bf16, Tf32),
            (I8, U8, I16),
            (I8, U16, I32),
            (U16, I32, I32),
            (I32, U32, F32),
            (I16, U8, I16),
            (U8, U32, U32),
            (Bool, I8, I8),
            (Bool, Bool, Bool),
            (F16, I32, F16),
            (U8, Bf16, Bf16),
            (F8E4M3Fn, F8E4M3, Bf16),
            (F8E4M3Fn, F8E5M2, Bf16),
            (F4E2M1Fn, F8E4M3Fn, F8E4M3Fn),
            (F4E2M1Fn, F8E5M2, F8E5M2),
            (F4E2M1Fn, Bf16, Bf16),
            (F8E8M0Fnu, F8E4M3Fn, Bf16),
            (F8E8M0Fnu, F4E2M1Fn, Bf16),
            (F8E8M0Fnu, Bf16, Bf16),
            (F8E8M0Fnu, F16, F32),
            (F8E8M0Fnu, Tf32, Tf32),
            (F8E8M0Fnu, U8, F8E8M0Fnu),
        ];
        for (a, b, want) in cases {
            assert_eq!(a.promote(b), want, "{a} + {b}");
            assert_eq!(b.promote(a), want, "{b} + {a}");
        }
        for d in DType::ALL {
            assert_eq!(d.promote(d), d);
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(DType::from_name(&d.nki_name()[3..]), Some(d));
        }
    }

    #[test]
    fn packed_types_are_four_lanes_of_their_lane_type() {
        for (i, d) in DType::PACKED.into_iter().enumerate() {
            // They follow `ALL` in the enum's order.
            assert_eq!(d as usize, DType::ALL.len() + i);
            assert!(d.is_packed());
            let lane = d.lane().expect("a packed type has a lane type");
            assert!(!lane.is_packed());
            // Four lanes: 8-bit lanes fill 32 bits, 4-bit lanes 16.
            let lane_bits = if lane == DType::F4E2M1Fn { 4 } else { 8 };
            assert_eq!(d.size() * 8, 4 * lane_bits);
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(DType::from_name(&d.nki_name()[3..]), Some(d));
            assert_eq!(d.promote(DType::F32), d);
            assert_eq!(d.max_value(), None);
            assert!(!d.has_nan());
        }
        assert_eq!(DType::F8E4M3FnX4.size(), 4);
        assert_eq!(DType::F8E5M2X4.size(), 4);
        assert_eq!(DType::F4E2M1FnX4.size(), 2);
        assert!(
            DType::ALL
                .iter()
                .all(|d| !d.is_packed() && d.lane().is_none())
        );
    }

    #[test]
    fn limits_are_the_formats_extremes() {
        // References: Rust's own f32 constants, and each format's largest finite bit
        // pattern decoded by hand.
        assert_eq!(DType::F32.max_value(), Some(f64::from(f32::MAX)));
        assert_eq!(
            DType::F32.min_value(),
            Some(f64::from(f32::from_bits(0xff7f_ffff)))
        );
        assert_eq!(DType::F32.epsilon(), Some(f64::from(f32::EPSILON)));
        assert_eq!(
            DType::F32.smallest_normal(),
            Some(f64::from(f32::MIN_POSITIVE))
        );
        // bf16 0x7f7f and tf32 0x7f7fe000 are f32 bit patterns with the low bits zero.
        assert_eq!(
            DType::Bf16.max_value(),
            Some(f64::from(f32::from_bits(0x7f7f_0000)))
        );
        assert_eq!(
            DType::Tf32.max_value(),
            Some(f64::from(f32::from_bits(0x7f7f_e000)))
        );
        assert_eq!(DType::F16.max_value(), Some(65504.0));
        assert_eq!(DType::F16.smallest_normal(), Some(1.0 / 16384.0));
        assert_eq!(DType::F8E4M3.max_value(), Some(240.0));
        assert_eq!(DType::F8E5M2.max_value(), Some(57344.0));
        assert_eq!(DType::F8E5M2.epsilon(), Some(0.25));
        assert_eq!(DType::I8.min_value(), Some(-128.0));
        assert_eq!(DType::U32.max_value(), Some(4_294_967_295.0));
        assert_eq!(DType::U8.min_value(), Some(0.0));
        assert_eq!(DType::I32.epsilon(), None);
        assert_eq!(DType::Bool.max_value(), None);
        // The OCP formats, decoded by hand: e4m3fn 0x7e = 1.110b · 2^(15−7) = 448 (0x7f is
        // NaN), smallest normal 0x08 = 2^(1−7); e2m1fn 0x7 = 1.1b · 2^(3−1) = 6, smallest
        // normal 0x2 = 2^0, eps 0x3 − 1 = 0.5; e8m0fnu 0xfe = 2^(254−127), 0x00 = 2^−127 (its
        // smallest, normal, value), 2 − 1 = 1 between neighbours of 1.
        assert_eq!(DType::F8E4M3Fn.max_value(), Some(448.0));
        assert_eq!(DType::F8E4M3Fn.min_value(), Some(-448.0));
        assert_eq!(DType::F8E4M3Fn.smallest_normal(), Some(1.0 / 64.0));
        assert_eq!(DType::F8E4M3Fn.epsilon(), Some(0.125));
        assert_eq!(DType::F4E2M1Fn.max_value(), Some(6.0));
        assert_eq!(DType::F4E2M1Fn.min_value(), Some(-6.0));
        assert_eq!(DType::F4E2M1Fn.smallest_normal(), Some(1.0));
        assert_eq!(DType::F4E2M1Fn.epsilon(), Some(0.5));
        assert_eq!(
            DType::F8E8M0Fnu.max_value(),
            Some(f64::from(f32::from_bits(0x7f00_0000)))
        );
        assert_eq!(
            DType::F8E8M0Fnu.min_value(),
            Some(f64::from(f32::from_bits(0x0040_0000)))
        );
        assert_eq!(
            DType::F8E8M0Fnu.smallest_normal(),
            Some(f64::from(f32::from_bits(0x0040_0000)))
        );
        assert_eq!(DType::F8E8M0Fnu.epsilon(), Some(1.0));
        for d in [DType::F8E4M3Fn, DType::F4E2M1Fn, DType::F8E8M0Fnu] {
            assert_eq!(d.size(), 1);
            assert!(d.is_float());
        }
        assert!(DType::F8E4M3Fn.has_nan() && DType::F8E8M0Fnu.has_nan());
        assert!(!DType::F4E2M1Fn.has_nan() && !DType::I8.has_nan() && !DType::Bool.has_nan());
    }
}
