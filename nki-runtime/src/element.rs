//! Host element types that map to the kernel language's [`DType`]s.
//!
//! Where Rust or `half` has the type (`f32`, `bf16`, `f16`, `i8` … `u32`) it is used directly.
//! The other NKI types get a transparent newtype over their bits: [`F8E4M3`], [`F8E5M2`],
//! [`F8E4M3Fn`], [`F4E2M1Fn`], [`F8E8M0Fnu`], [`Tf32`] and [`Bool`], and the packed MX types
//! [`F8E5M2X4`], [`F8E4M3FnX4`], [`F4E2M1FnX4`].

use bytemuck::{Pod, Zeroable};
use nki_lang::DType;

use crate::cpu::convert;

mod sealed {
    /// Keeps [`super::Element`] implemented only for the types below.
    pub trait Sealed {}
}

/// A host type whose values can live in the modeled HBM.
///
/// The trait is sealed: its bit layout must be exactly the [`DType`] it names, and every bit
/// pattern must be a valid value (the modeled engines write raw bits).
pub trait Element: Pod + Copy + Default + Send + Sync + 'static + sealed::Sealed {
    /// The kernel language's name for this type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(
            impl sealed::Sealed for $t {}
            impl Element for $t {
                const DTYPE: DType = DType::$d;
            }
        )*
    };
}

macro_rules! bits_newtype {
    ($(#[$doc:meta])* $name:ident($bits:ty)) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
        #[repr(transparent)]
        pub struct $name(pub $bits);

        impl $name {
            /// The value with these bits.
            pub const fn from_bits(bits: $bits) -> Self {
                $name(bits)
            }

            /// The value's bits.
            pub const fn to_bits(self) -> $bits {
                self.0
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, concat!(stringify!($name), "({:#x})"), self.0)
            }
        }
    };
}

bits_newtype!(
    /// An 8-bit float with 4 exponent and 3 mantissa bits (`nl.float8_e4m3`), by its bits.
    F8E4M3(u8)
);
bits_newtype!(
    /// An 8-bit float with 5 exponent and 2 mantissa bits (`nl.float8_e5m2`), by its bits.
    F8E5M2(u8)
);
bits_newtype!(
    /// An OCP FP8 E4M3 "FN" float (`nl.float8_e4m3fn`: bias 7, max ±448, no inf, NaN
    /// `S.1111.111`), by its bits.
    F8E4M3Fn(u8)
);
bits_newtype!(
    /// An OCP MX FP4 E2M1 float (`float4_e2m1fn`: bias 1, max ±6, no inf or NaN) in the low
    /// nibble of its byte, by that byte (loads ignore the high nibble, stores write it zero).
    F4E2M1Fn(u8)
);
bits_newtype!(
    /// An OCP MX E8M0 scale (`nl.float8_e8m0fnu`: `2^(bits − 127)`, `0xff` = NaN), by its bits.
    F8E8M0Fnu(u8)
);
bits_newtype!(
    /// NKI's `nl.float8_e5m2_x4`: four `float8_e5m2` values in one 32-bit word, lane `j` in
    /// bits `8j … 8j+7`, by its bits.
    F8E5M2X4(u32)
);
bits_newtype!(
    /// NKI's `nl.float8_e4m3fn_x4`: four `float8_e4m3fn` values in one 32-bit word, lane `j`
    /// in bits `8j … 8j+7`, by its bits.
    F8E4M3FnX4(u32)
);
bits_newtype!(
    /// NKI's `nl.float4_e2m1fn_x4`: four `float4_e2m1fn` values in one 16-bit word, lane `j`
    /// in bits `4j … 4j+3`, by its bits.
    F4E2M1FnX4(u16)
);
bits_newtype!(
    /// A TensorFloat-32 value in its 32-bit container (`nl.tfloat32`), by its bits.
    Tf32(u32)
);
bits_newtype!(
    /// NKI's `nl.bool_`: one byte, 0 for false and 1 for true (the engines read any nonzero
    /// byte as true).
    Bool(u8)
);

impl F8E4M3 {
    /// Rounds an f32 to the nearest `float8_e4m3` (ties to even, fp8 subnormals kept,
    /// `|x| ≥ 248` → ±inf, NaN → NaN): the model's f32 → e4m3 conversion,
    /// [`crate::cpu::convert::f32_to_f8e4m3`].
    pub fn from_f32(x: f32) -> Self {
        F8E4M3(convert::f32_to_f8e4m3(x))
    }

    /// The value as an f32 (exact; a NaN keeps sign and payload):
    /// [`crate::cpu::convert::f8e4m3_to_f32`].
    pub fn to_f32(self) -> f32 {
        convert::f8e4m3_to_f32(self.0)
    }
}

impl F8E5M2 {
    /// Rounds an f32 to the nearest `float8_e5m2` (ties to even, fp8 subnormals kept,
    /// `|x| ≥ 61440` → ±inf, NaN → NaN): the model's f32 → e5m2 conversion,
    /// [`crate::cpu::convert::f32_to_f8e5m2`].
    pub fn from_f32(x: f32) -> Self {
        F8E5M2(convert::f32_to_f8e5m2(x))
    }

    /// The value as an f32 (exact; a NaN keeps sign and payload):
    /// [`crate::cpu::convert::f8e5m2_to_f32`].
    pub fn to_f32(self) -> f32 {
        convert::f8e5m2_to_f32(self.0)
    }
}

impl F8E4M3Fn {
    /// Rounds an f32 to the nearest `float8_e4m3fn` (ties to even, fp8 subnormals kept,
    /// `|x| > 464`, ±inf and NaN → NaN `S.1111.111`): [`crate::cpu::convert::f32_to_f8e4m3fn`].
    pub fn from_f32(x: f32) -> Self {
        F8E4M3Fn(convert::f32_to_f8e4m3fn(x))
    }

    /// The value as an f32 (exact; the NaN keeps its sign):
    /// [`crate::cpu::convert::f8e4m3fn_to_f32`].
    pub fn to_f32(self) -> f32 {
        convert::f8e4m3fn_to_f32(self.0)
    }
}

impl F4E2M1Fn {
    /// Rounds an f32 to the nearest `float4_e2m1fn` (ties to even, past ±6 and ±inf saturate
    /// to ±6, NaN → a zero as ml_dtypes gives): [`crate::cpu::convert::f32_to_f4e2m1fn`].
    pub fn from_f32(x: f32) -> Self {
        F4E2M1Fn(convert::f32_to_f4e2m1fn(x))
    }

    /// The value as an f32 (exact): [`crate::cpu::convert::f4e2m1fn_to_f32`].
    pub fn to_f32(self) -> f32 {
        convert::f4e2m1fn_to_f32(self.0)
    }
}

impl F8E8M0Fnu {
    /// Rounds a positive f32 to a power of two (`2^e · 1.f` up to `2^(e+1)` from `1.f = 1.5`,
    /// below `2^−127` to `2^−127`); zero, negative values, overflow, ±inf and NaN give the NaN
    /// `0xff`: [`crate::cpu::convert::f32_to_f8e8m0fnu`].
    pub fn from_f32(x: f32) -> Self {
        F8E8M0Fnu(convert::f32_to_f8e8m0fnu(x))
    }

    /// The value as an f32 (exact, `0x00` = 2^−127 an f32 subnormal):
    /// [`crate::cpu::convert::f8e8m0fnu_to_f32`].
    pub fn to_f32(self) -> f32 {
        convert::f8e8m0fnu_to_f32(self.0)
    }
}

macro_rules! packed_values {
    ($($name:ident($bits:ty) => $d:ident),* $(,)?) => {
        $(
            impl $name {
                /// Packs four f32 values, lane 0 first, each rounded to the lane type as an
                /// unpacked element is ([`crate::cpu::convert::f32_to_x4`]).
                pub fn from_f32s(values: [f32; 4]) -> Self {
                    let bits = convert::f32_to_x4(DType::$d, values).unwrap_or(0);
                    $name(bits as $bits)
                }

                /// The four values, lane 0 first, each exact
                /// ([`crate::cpu::convert::x4_to_f32`]).
                pub fn to_f32s(self) -> [f32; 4] {
                    convert::x4_to_f32(DType::$d, u32::from(self.0)).unwrap_or([f32::NAN; 4])
                }

                /// Packs four lane codes, lane 0 first ([`crate::cpu::convert::pack_x4`]).
                pub fn from_lanes(lanes: [u8; 4]) -> Self {
                    $name(convert::pack_x4(DType::$d, lanes).unwrap_or(0) as $bits)
                }

                /// The four lane codes, lane 0 first ([`crate::cpu::convert::unpack_x4`]).
                pub fn lanes(self) -> [u8; 4] {
                    convert::unpack_x4(DType::$d, u32::from(self.0)).unwrap_or([0; 4])
                }
            }
        )*
    };
}

packed_values! {
    F8E5M2X4(u32) => F8E5M2X4,
    F8E4M3FnX4(u32) => F8E4M3FnX4,
    F4E2M1FnX4(u16) => F4E2M1FnX4,
}

impl Tf32 {
    /// Rounds an f32 to TensorFloat-32 (ties to even at 10 mantissa bits, f32 subnormals to a
    /// signed zero, overflow to ±inf; the 13 low container bits are zero):
    /// [`crate::cpu::convert::f32_to_tf32`].
    pub fn from_f32(x: f32) -> Self {
        Tf32(convert::f32_to_tf32(x))
    }

    /// The value as an f32: the container with its 13 low bits cleared,
    /// [`crate::cpu::convert::tf32_to_f32`].
    pub fn to_f32(self) -> f32 {
        convert::tf32_to_f32(self.0)
    }
}

impl From<bool> for Bool {
    fn from(b: bool) -> Bool {
        Bool(b as u8)
    }
}

impl From<Bool> for bool {
    fn from(b: Bool) -> bool {
        b.0 != 0
    }
}

element! {
    f32 => F32,
    half::bf16 => Bf16,
    half::f16 => F16,
    Tf32 => Tf32,
    F8E4M3 => F8E4M3,
    F8E5M2 => F8E5M2,
    i8 => I8,
    i16 => I16,
    i32 => I32,
    u8 => U8,
    u16 => U16,
    u32 => U32,
    Bool => Bool,
    F8E4M3Fn => F8E4M3Fn,
    F4E2M1Fn => F4E2M1Fn,
    F8E8M0Fnu => F8E8M0Fnu,
    F8E5M2X4 => F8E5M2X4,
    F8E4M3FnX4 => F8E4M3FnX4,
    F4E2M1FnX4 => F4E2M1FnX4,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_dtypes() {
        fn check<T: Element>() {
            assert_eq!(core::mem::size_of::<T>(), T::DTYPE.size() as usize);
        }
        check::<f32>();
        check::<half::bf16>();
        check::<half::f16>();
        check::<Tf32>();
        check::<F8E4M3>();
        check::<F8E5M2>();
        check::<i8>();
        check::<i16>();
        check::<i32>();
        check::<u8>();
        check::<u16>();
        check::<u32>();
        check::<Bool>();
        check::<F8E4M3Fn>();
        check::<F4E2M1Fn>();
        check::<F8E8M0Fnu>();
    }

    #[test]
    fn small_floats_round_trip() {
        for bits in 0..=u8::MAX {
            // A NaN comes back quiet (the format's top mantissa bit set), the rest exactly.
            let x = F8E4M3(bits).to_f32();
            let want = if x.is_nan() { bits | 0x04 } else { bits };
            assert_eq!(F8E4M3::from_f32(x), F8E4M3(want), "{x}");
            let x = F8E5M2(bits).to_f32();
            let want = if x.is_nan() { bits | 0x02 } else { bits };
            assert_eq!(F8E5M2::from_f32(x), F8E5M2(want), "{x}");
        }
        assert_eq!(F8E4M3::from_f32(240.0), F8E4M3(0x77));
        assert_eq!(F8E4M3::from_f32(300.0).to_f32(), f32::INFINITY);
        assert_eq!(F8E5M2::from_f32(-57344.0), F8E5M2(0xfb));
        assert_eq!(
            Tf32::from_f32(1.0 + 2f32.powi(-10)).to_f32(),
            1.0 + 2f32.powi(-10)
        );
        assert_eq!(Tf32::from_f32(1.0 + 2f32.powi(-12)).to_f32(), 1.0);
        assert_eq!(Tf32(0x3f80_1fff).to_f32(), 1.0);
        // The OCP formats: every code comes back (their NaNs too: each has only one per sign,
        // but fp4 has none and reads a byte's low nibble only).
        for bits in 0..=u8::MAX {
            assert_eq!(F8E4M3Fn::from_f32(F8E4M3Fn(bits).to_f32()), F8E4M3Fn(bits));
            assert_eq!(
                F8E8M0Fnu::from_f32(F8E8M0Fnu(bits).to_f32()),
                F8E8M0Fnu(bits)
            );
            let nibble = bits & 0x0f;
            assert_eq!(
                F4E2M1Fn::from_f32(F4E2M1Fn(bits).to_f32()),
                F4E2M1Fn(nibble)
            );
        }
        assert_eq!(F8E4M3Fn::from_f32(448.0), F8E4M3Fn(0x7e));
        assert!(F8E4M3Fn::from_f32(1000.0).to_f32().is_nan());
        assert_eq!(F4E2M1Fn::from_f32(-100.0).to_f32(), -6.0);
        assert_eq!(F8E8M0Fnu::from_f32(0.75).to_f32(), 1.0);
    }
}
