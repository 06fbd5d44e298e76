//! Element types of tensors and tiles, and NKI's type promotion.

use core::fmt;

/// An element type of an HBM tensor or an on-chip tile: every type NKI supports.
///
/// The names follow NKI (`nl.bfloat16`, `nl.float8_e4m3`, `nl.int32`, ...); in a kernel body they
/// are written the way Rust spells the matching host types where Rust has one (`bf16`, `f32`,
/// `i8`, `u32`, `bool`) and as NKI spells them otherwise (`tfloat32`, `float8_e4m3`).
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
    /// Every element type, in a fixed order.
    pub const ALL: [DType; 13] = [
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
    ];

    /// Size of one element in bytes, as stored in HBM, SBUF and PSUM.
    pub const fn size(self) -> u32 {
        match self {
            DType::F32 | DType::Tf32 | DType::I32 | DType::U32 => 4,
            DType::Bf16 | DType::F16 | DType::I16 | DType::U16 => 2,
            DType::F8E4M3 | DType::F8E5M2 | DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// The class of the type.
    pub const fn class(self) -> DTypeClass {
        match self {
            DType::F32 | DType::Tf32 | DType::Bf16 | DType::F16 | DType::F8E4M3 | DType::F8E5M2 => {
                DTypeClass::Float
            }
            DType::I8 | DType::I16 | DType::I32 => DTypeClass::Signed,
            DType::U8 | DType::U16 | DType::U32 => DTypeClass::Unsigned,
            DType::Bool => DTypeClass::Bool,
        }
    }

    /// Whether the type is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self.class(), DTypeClass::Float)
    }

    /// Whether the type is an integer type (signed or unsigned; not `bool`).
    pub const fn is_int(self) -> bool {
        matches!(self.class(), DTypeClass::Signed | DTypeClass::Unsigned)
    }

    /// Bits of precision of a float type's significand, the implicit bit included (24 for
    /// f32); 0 for the other classes.
    pub const fn significand_bits(self) -> u32 {
        match self {
            DType::F32 => 24,
            DType::Tf32 | DType::F16 => 11,
            DType::Bf16 => 8,
            DType::F8E4M3 => 4,
            DType::F8E5M2 => 3,
            DType::I8
            | DType::I16
            | DType::I32
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::Bool => 0,
        }
    }

    /// The largest finite value of the type: NumPy's `finfo(dtype).max` for a float type
    /// (`(2 − 2^−m) · 2^emax`: 3.4028234663852886e38 for f32, 3.3895313892515355e38 for bf16,
    /// 65504 for f16, 240 for the IEEE-style `float8_e4m3`, 57344 for `float8_e5m2`),
    /// `iinfo(dtype).max` for an integer type; `None` for `bool`.
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
            DType::I8 => f64::from(i8::MAX),
            DType::I16 => f64::from(i16::MAX),
            DType::I32 => f64::from(i32::MAX),
            DType::U8 => f64::from(u8::MAX),
            DType::U16 => f64::from(u16::MAX),
            DType::U32 => f64::from(u32::MAX),
            DType::Bool => return None,
        })
    }

    /// The most negative finite value of the type: `−max` for a float type (NKI's
    /// `nl.fp32.min`, bit pattern `0xff7fffff`, is f32's), the integer type's minimum; `None`
    /// for `bool`.
    pub fn min_value(self) -> Option<f64> {
        Some(match self {
            DType::F32 | DType::Tf32 | DType::Bf16 | DType::F16 | DType::F8E4M3 | DType::F8E5M2 => {
                -self.max_value()?
            }
            DType::I8 => f64::from(i8::MIN),
            DType::I16 => f64::from(i16::MIN),
            DType::I32 => f64::from(i32::MIN),
            DType::U8 | DType::U16 | DType::U32 => 0.0,
            DType::Bool => return None,
        })
    }

    /// A float type's machine epsilon, the distance from 1 to the next value (`2^−m`, NumPy's
    /// `finfo(dtype).eps`); `None` for the other classes.
    pub fn epsilon(self) -> Option<f64> {
        let m = i32::try_from(self.significand_bits().checked_sub(1)?).ok()?;
        self.is_float().then(|| 2f64.powi(m.saturating_neg()))
    }

    /// A float type's smallest positive normal value (NumPy's `finfo(dtype).smallest_normal`,
    /// alias `tiny`): `2^(1 − emax)`; `None` for the other classes.
    pub fn smallest_normal(self) -> Option<f64> {
        let emax: i32 = match self {
            DType::F32 | DType::Tf32 | DType::Bf16 => 127,
            DType::F16 | DType::F8E5M2 => 15,
            DType::F8E4M3 => 7,
            DType::I8
            | DType::I16
            | DType::I32
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::Bool => return None,
        };
        Some(2f64.powi(1i32.saturating_sub(emax)))
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
        }
    }

    /// Parses a kernel-body type name: the Rust spelling (`bf16`, `i8`) or NKI's (`bfloat16`,
    /// `int8`, `float8_e4m3`).
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
            _ => return None,
        })
    }

    /// The type of an operation's result on operands of types `self` and `other` when the
    /// operation names no `dtype`: NKI's promotion rules.
    ///
    /// - `bool` with any type gives that type.
    /// - A float with an integer gives the float.
    /// - Two floats give the wider one; two of the same width but different formats give a
    ///   type holding both: `f16` + `bf16` → `f32`, `float8_e4m3` + `float8_e5m2` → `bf16`;
    ///   `tfloat32` holds `bf16` and `f16`, `f32` holds everything.
    /// - Two integers of one signedness give the wider. A signed and an unsigned one give the
    ///   signed type if it is wider, else a signed type twice the unsigned one's width, and
    ///   `f32` when that would take 64 bits (`i32` + `u32` → `f32`, as NKI has no 64-bit
    ///   types).
    pub const fn promote(self, other: DType) -> DType {
        use DTypeClass::*;
        if self as u8 == other as u8 {
            return self;
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
        DType::Bf16 | DType::F16 => 2,
        DType::F8E4M3 | DType::F8E5M2 => 1,
        // Not floats: `promote_float` never sees them.
        DType::I8 | DType::I16 | DType::I32 | DType::U8 | DType::U16 | DType::U32 | DType::Bool => {
            1
        }
    }
}

const fn promote_float(a: DType, b: DType) -> DType {
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
    }
}
