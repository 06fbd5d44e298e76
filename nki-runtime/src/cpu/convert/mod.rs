//! Element conversions: every [`DType`] to and from the engines' f32 (and i32) lanes.
//!
//! # The model's conversion semantics
//!
//! The engines compute in fp32. Each dtype therefore has exactly two definitions, a **load**
//! ([`to_f32`]: element bits → f32) and a **store** ([`from_f32`]: f32 → element bits), and a
//! conversion between two dtypes is `from_f32(d, to_f32(s, bits))`; within one dtype it is a bit
//! copy. Every host path ([`Isa`]) produces exactly the bits of these scalar definitions; the
//! vector paths are faster implementations, never different numerics. `docs/dtypes.md` has
//! the same rules as a table, per dtype.
//!
//! Rounding is always to nearest, ties to even (the NeuronCore's default mode; stochastic
//! rounding is not modeled).
//!
//! - **f32**: both directions copy the bits (NaN payloads and signaling NaNs included).
//! - **bf16 → f32** is `bits << 16`, exact, also for a signaling NaN (where
//!   `half::bf16::to_f32` would set the quiet bit). **f16 → f32** is exact and sets a NaN's
//!   quiet bit, like `half::f16::to_f32` and `vcvtph2ps`.
//! - **f32 → bf16** rounds to nearest even. A NaN becomes `(bits >> 16) | 0x0040` (quiet; sign
//!   and top payload kept). **f32 subnormal inputs become a zero of the same sign**;
//!   everything else, including overflow to ±inf, is plain IEEE round-to-nearest-even. This is
//!   what `vcvtneps2bf16` does: probed on the development machine (Intel Xeon, Emerald Rapids,
//!   KVM guest), it returned `0x0000` for `0x0000_0001` and `0x007f_ffff` (IEEE would give
//!   `0x0080` for the latter) and `0x8000` for `0x8040_0000` (MXCSR at its default, no DAZ);
//!   NaNs came out as `(bits >> 16) | 0x0040` and `0x7f7f_ffff` rounded to `0x7f80`. An
//!   exhaustive run over all 2^32 f32 inputs matched the portable definition bit for bit, as
//!   it did on an AMD EPYC (Zen) KVM guest (`exhaustive_32_bit_inputs_every_path`, an ignored
//!   test), and the tests compare it again on edge cases and random inputs on whatever
//!   machine runs them.
//!   This flush is the one place where the model differs from `half::bf16::from_f32`.
//! - **f32 → f16** rounds to nearest even exactly like `half::f16::from_f32` (IEEE, subnormal
//!   `f16` results produced normally, overflow to ±inf); a NaN becomes
//!   `sign | 0x7e00 | (mantissa >> 13)`.
//! - **tf32** (1 sign, 8 exponent, 10 mantissa bits in a 32-bit container): the load reads the
//!   container as f32 after clearing its 13 low bits (the bits the format does not have; a
//!   container whose only NaN payload bits are there therefore reads as ±inf). The store is
//!   bf16's rule at 10 mantissa bits: round to nearest even at bit 13, f32 subnormal inputs to
//!   a signed zero, overflow to ±inf, NaN → `(bits | 0x0040_0000) & 0xffff_e000`; the 13 low
//!   bits of a stored tf32 are always zero.
//! - **float8_e4m3** and **float8_e5m2** are IEEE-754-style binary formats, the ones ml_dtypes
//!   calls `float8_e4m3` and `float8_e5m2`:
//!
//!   | | bias | largest finite | ±inf | NaN | smallest subnormal |
//!   |---|---|---|---|---|---|
//!   | e4m3 | 7 | `0x77` = 240 | `S.1111.000` | `S.1111.mmm`, mmm ≠ 0 | `0x01` = 2^-9 |
//!   | e5m2 | 15 | `0x7b` = 57344 | `S.11111.00` | `S.11111.mm`, mm ≠ 0 | `0x01` = 2^-16 |
//!
//!   Loads are exact (subnormals included); a NaN keeps sign and payload and gets f32's quiet
//!   bit: `sign | 0x7fc0_0000 | (mantissa << (23 − M))` (so e5m2 loads exactly like the f16
//!   `bits << 8`). Stores round to nearest even with gradual underflow (fp8 subnormals are
//!   produced; below half the smallest subnormal gives a signed zero), **overflow gives ±inf**
//!   (e4m3: `|x| ≥ 248`; e5m2: `|x| ≥ 61440`, the ties above the largest finite value rounding
//!   to the even infinity), and a NaN becomes `sign | inf | quiet | (mantissa >> (23 − M))`
//!   (f16's rule: e4m3 `0x7c`, e5m2 `0x7e` for the default NaN).
//!
//!   Why these formats. AWS documents NKI's `nl.float8_e4m3` only as "8-bit floating-point
//!   number (1S,4E,3M)" and `nl.float8_e5m2` as "(1S,5E,2M)"
//!   (`aws-neuron-sdk`, `nki/api/nki.api.shared.rst`), with RNE as the default rounding of
//!   NeuronCore-v2 and later (`about-neuron/arch/neuron-features/data-types.rst`,
//!   `rounding-modes.rst`). Its API reference shows `nl.float8_e4m3 = dtype(float8_e4m3)`, the
//!   ml_dtypes NumPy type its simulator computes with, and recent releases (2.29 on) list a
//!   separate `nl.float8_e4m3fn`: "8-bit floating-point number (1S,4E,3M), Extended range: no
//!   inf, NaN represented by 0bS111'1111" — the OCP/NVIDIA e4m3 (max 448) is the *other* type,
//!   and neuronx-cc rejects it on Trn1/Trn2 ("Data type F8E4M3FN is not supported on
//!   TRN1/TRN2. Target TRN3 or later hardware", quoted in aws-neuron-sdk issue #1393).
//!   ml_dtypes (`ml_dtypes/include/float8.h`) defines
//!   `float8_e4m3` as "IEEE 754" with bias 7, max `0b0'1110'111` = 240, inf `0b0'1111'000`, quiet
//!   NaN `0b0'1111'100`, and converts from f32 with round to nearest even, subnormals, and
//!   overflow to ±inf (it saturates only on request). No AWS source states what the hardware
//!   does on overflow or with NaN payloads: overflow to inf is a deliberate definition here
//!   (the IEEE rule of a format that has infinities, what the simulator does, and what this
//!   model's bf16 and f16 do); NaN payloads follow f16's rule, which agrees with ml_dtypes on
//!   the default NaNs (ml_dtypes returns the default NaN with the input's sign for any NaN,
//!   in both directions).
//! - **float8_e4m3fn**, **float4_e2m1fn** and **float8_e8m0fnu**, the OCP formats (OFP8 E4M3;
//!   MX FP4 E2M1, one element per byte in the low nibble; MX E8M0 scale), defined in
//!   `convert/ocp.rs` ([`f8e4m3fn_to_f32`], [`f32_to_f8e4m3fn`] and their siblings):
//!   loads are exact (e4m3fn's NaN `S.1111.111` → `sign | 0x7fc0_0000`, e8m0fnu's `0xff` →
//!   `0x7fc0_0000`, fp4's high nibble ignored); stores round to nearest even and resolve what
//!   the format cannot hold as ml_dtypes' default conversion does: e4m3fn gives its NaN past
//!   464 and for ±inf and NaN; e2m1fn saturates to ±6 (±inf too) and turns a NaN into `0x8`
//!   (positive) or `0x0` (negative); e8m0fnu rounds `1.5 · 2^e` and up to `2^(e+1)`, gives
//!   `0x00` below 2^-127 and its NaN `0xff` for 0, negative values, ±inf, NaN and from
//!   `1.5 · 2^127`. They have no vector routines: every path runs these definitions.
//!   `docs/dtypes.md` gives the sources.
//! - **Integers → f32** are exact where representable (every i8, u8, i16 and u16, and i32/u32
//!   of magnitude up to 2^24), else rounded to nearest even (Rust's `as`).
//! - **f32 → integers** round to nearest even, saturate to the type's range (±inf included),
//!   and give 0 for NaN; `-0.0` gives 0. (NumPy's `astype`, used by NKI's simulator, truncates
//!   toward zero and leaves overflow undefined; the hardware's documented default rounding
//!   mode is round to nearest even, which this model applies to every conversion.)
//! - **bool** (one byte): the load gives 0.0 for byte 0 and 1.0 for any other byte; the store
//!   gives 0 for ±0.0 and 1 otherwise (NaN → 1).
//!
//! # Integer lanes
//!
//! For bitwise ALU operations, [`to_i32`] / [`from_i32`] (and the runs [`load_i32`],
//! [`store_i32`]) move elements into and out of i32 lanes without going through f32:
//!
//! - load: an integer's exact value (signed types sign-extended, unsigned zero-extended; a
//!   `u32` above `i32::MAX` keeps its 32 bits, i.e. wraps to a negative lane); a bool is 0 or
//!   1 (any nonzero byte is 1); a float's raw bit pattern, zero-extended (NKI's bitvec
//!   operators treat elements as bit patterns).
//! - store: the lane's low bits, as many as the dtype has (two's-complement wrap: `300` stored
//!   as `u8` is `44`, `-1` as `u16` is `0xffff`); a bool keeps the lane's lowest bit. That is
//!   what a bitwise result computed on a lane of the narrower width holds: the low bits of
//!   AND/OR/XOR/NOT and of left shifts do not depend on the high bits, so computing in 32 bits
//!   and keeping the low ones gives the narrow operation's result. For bool that makes
//!   `and`/`or`/`xor` of 0/1 lanes 0/1 and `invert` a logical not (`!1 = -2` keeps 0). A
//!   logical right shift is the exception: its low bits come from above, so an operation
//!   shifting a narrow dtype right must first mask the lane to the dtype's width (a signed
//!   dtype's lane holds the sign-extended value, which comparisons and arithmetic need).
//!
//! # Runs
//!
//! [`load_f32`], [`store_f32`] and [`convert`] apply the definitions to runs of little-endian
//! elements in byte slices (which may be unaligned parts of bigger buffers), without heap
//! allocation and without dispatching per element: each call picks, once, the vector loop for
//! its (isa, source dtype, destination dtype) — AVX-512: 16 lanes, AVX2: 8 lanes — and the
//! portable loops for the tail. A vector loop is `store(load(·))` per vector, where `load`
//! is the source's and `store` the destination's per-dtype vector routine (O(n)
//! routines; the compiler instantiates the loop for each pair, so nothing goes through
//! memory in between). The portable path runs the per-dtype definitions, between two non-f32
//! dtypes in chunks through f32s on the stack.

use nki_lang::DType;

use super::Isa;

mod ocp;
mod packed;
#[cfg(target_arch = "x86_64")]
pub(in crate::cpu) mod x86;

pub use ocp::{
    f4e2m1fn_to_f32, f8e4m3fn_to_f32, f8e8m0fnu_to_f32, f32_to_f4e2m1fn, f32_to_f8e4m3fn,
    f32_to_f8e8m0fnu,
};
pub use packed::{f32_to_x4, pack_x4, unpack_x4, x4_to_f32};

/// Elements per chunk of the portable conversion between two non-f32 dtypes, through f32s
/// in a stack buffer.
const PORTABLE_CHUNK: usize = 64;

// ---- Scalar definitions: bf16, f16 ----

/// Widens a bf16 (given as its bits) to f32 exactly.
#[inline]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// Narrows an f32 to bf16 bits: round to nearest even, subnormal inputs flushed to a signed zero,
/// NaN → `(bits >> 16) | 0x0040`.
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        ((bits >> 16) | 0x0040) as u16
    } else if abs < 0x0080_0000 {
        ((bits >> 16) & 0x8000) as u16
    } else {
        // Round to nearest even at bit 16; a carry correctly bumps the exponent (up to inf).
        let rounded = bits + 0x7fff + ((bits >> 16) & 1);
        (rounded >> 16) as u16
    }
}

/// Widens an f16 (given as its bits) to f32 exactly; a NaN gets its quiet bit set.
#[inline]
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = ((bits & 0x8000) as u32) << 16;
    let exp = ((bits >> 10) & 0x1f) as u32;
    let man = (bits & 0x03ff) as u32;
    let out = match exp {
        0x1f if man == 0 => sign | 0x7f80_0000,
        0x1f => sign | 0x7fc0_0000 | (man << 13),
        0 if man == 0 => sign,
        0 => {
            // Subnormal f16 = man · 2^-24: normalize so that bit 10 is the implicit one.
            let shift = man.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | (((man << shift) & 0x03ff) << 13)
        }
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(out)
}

/// Narrows an f32 to f16 bits with IEEE round to nearest even (f16 subnormals produced, overflow
/// to ±inf); NaN → `sign | 0x7e00 | (mantissa >> 13)`. Equal to `half::f16::from_f32`.
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        sign | 0x7e00 | ((abs >> 13) & 0x03ff) as u16
    } else if abs >= 0x477f_f000 {
        // ≥ 65520 = 65504 + half an ulp (a tie, and 65504's mantissa is odd): ±inf.
        sign | 0x7c00
    } else if abs >= 0x3880_0000 {
        // Normal f16: rebias the exponent by 127 - 15 and round at bit 13.
        let m = abs - (112 << 23);
        sign | ((m + 0x0fff + ((m >> 13) & 1)) >> 13) as u16
    } else if abs <= 0x3300_0000 {
        // ≤ 2^-25 (half the smallest subnormal; the tie goes to even zero).
        sign
    } else {
        // Subnormal f16: the result is round(|x| / 2^-24).
        let e = abs >> 23;
        let m = (abs & 0x007f_ffff) | 0x0080_0000;
        let shift = 126 - e; // in 14..=24
        let q = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        let up = rem > half || (rem == half && q & 1 == 1);
        sign | (q + up as u32) as u16
    }
}

// ---- Scalar definitions: tf32 ----

/// Reads a tf32 container (its 32 bits) as f32: the 13 low bits, which tf32 does not have,
/// are cleared.
#[inline]
pub fn tf32_to_f32(bits: u32) -> f32 {
    f32::from_bits(bits & 0xffff_e000)
}

/// Narrows an f32 to a tf32 container: round to nearest even at bit 13, subnormal inputs
/// flushed to a signed zero, overflow to ±inf, NaN → `(bits | 0x0040_0000) & 0xffff_e000`
/// (bf16's rules at 10 mantissa bits). The 13 low bits of the result are zero.
#[inline]
pub fn f32_to_tf32(x: f32) -> u32 {
    let bits = x.to_bits();
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        (bits | 0x0040_0000) & 0xffff_e000
    } else if abs < 0x0080_0000 {
        bits & 0x8000_0000
    } else {
        // A carry bumps the exponent, up to inf; no u32 overflow (bits ≤ 0xff80_0000).
        (bits + 0x0fff + ((bits >> 13) & 1)) & 0xffff_e000
    }
}

// ---- Scalar definitions: fp8 ----

/// An IEEE-style binary float format narrower than f32: 1 sign bit, `e` exponent bits, `m`
/// mantissa bits, bias `2^(e−1) − 1`, the all-ones exponent for ±inf and NaN.
#[derive(Copy, Clone)]
pub(crate) struct MiniFloat {
    /// Exponent bits.
    pub e: u32,
    /// Mantissa bits.
    pub m: u32,
}

/// `float8_e4m3`.
pub(crate) const E4M3: MiniFloat = MiniFloat { e: 4, m: 3 };
/// `float8_e5m2`.
pub(crate) const E5M2: MiniFloat = MiniFloat { e: 5, m: 2 };

impl MiniFloat {
    /// The exponent bias.
    pub const fn bias(self) -> u32 {
        (1 << (self.e - 1)) - 1
    }

    /// The bits of +inf (all-ones exponent, zero mantissa).
    pub const fn inf(self) -> u32 {
        ((1 << self.e) - 1) << self.m
    }

    /// The sign bit.
    pub const fn sign(self) -> u32 {
        1 << (self.e + self.m)
    }

    /// Widens exactly (see the [module docs](self)).
    #[inline]
    pub fn decode(self, bits: u32) -> f32 {
        let (e, m) = (self.e, self.m);
        let sign = if bits & self.sign() != 0 {
            0x8000_0000
        } else {
            0
        };
        let exp = (bits >> m) & ((1 << e) - 1);
        let man = bits & ((1 << m) - 1);
        let out = if exp == (1 << e) - 1 {
            if man == 0 {
                sign | 0x7f80_0000
            } else {
                sign | 0x7fc0_0000 | (man << (23 - m))
            }
        } else if exp == 0 {
            // man · 2^(1 − bias − m): exact in f32 (a small integer times a power of two).
            let scale = f32::from_bits((128 - self.bias() - m) << 23);
            sign | (man as f32 * scale).to_bits()
        } else {
            sign | ((exp + 127 - self.bias()) << 23) | (man << (23 - m))
        };
        f32::from_bits(out)
    }

    /// Narrows with round to nearest even, gradual underflow and overflow to ±inf; NaN →
    /// `sign | inf | quiet | (mantissa >> (23 − m))` (see the [module docs](self)).
    #[inline]
    pub fn encode(self, x: f32) -> u32 {
        let (m, bias) = (self.m, self.bias());
        let bits = x.to_bits();
        let sign = if bits >> 31 != 0 { self.sign() } else { 0 };
        let abs = bits & 0x7fff_ffff;
        let shift = 23 - m;
        if abs > 0x7f80_0000 {
            return sign | self.inf() | (1 << (m - 1)) | ((abs >> shift) & ((1 << m) - 1));
        }
        let mag = if abs >= (128 - bias) << 23 {
            // At least the smallest normal: rebias the exponent and round at bit `shift`; a
            // carry bumps the exponent, and anything at or past inf is inf.
            let r = abs - ((127 - bias) << 23);
            let r = (r + (1 << (shift - 1)) - 1 + ((r >> shift) & 1)) >> shift;
            r.min(self.inf())
        } else {
            // Below the smallest normal: round |x| / 2^(1 − bias − m) to an integer (a
            // subnormal, or the smallest normal when it rounds up to 2^m).
            let exp = abs >> 23;
            let sig = if exp == 0 {
                abs
            } else {
                (abs & 0x007f_ffff) | 0x0080_0000
            };
            // |x| = sig · 2^(max(exp, 1) − 150), so the quotient is sig >> q_shift with
            let q_shift = 151 - bias - m - exp.max(1); // > 23 − m
            if q_shift > 25 {
                0 // |x| < 2^24 · 2^-26 of a quantum: below half of it
            } else {
                let q = sig >> q_shift;
                let rem = sig & ((1 << q_shift) - 1);
                let half = 1 << (q_shift - 1);
                q + (rem > half || (rem == half && q & 1 == 1)) as u32
            }
        };
        sign | mag
    }
}

/// Widens a `float8_e4m3` (bias 7, max 240, IEEE inf/NaN) exactly.
#[inline]
pub fn f8e4m3_to_f32(bits: u8) -> f32 {
    E4M3.decode(bits as u32)
}

/// Narrows an f32 to `float8_e4m3` bits: round to nearest even, subnormals produced,
/// `|x| ≥ 248` → ±inf, NaN → `sign | 0x7c | ((mantissa >> 20) & 3)`.
#[inline]
pub fn f32_to_f8e4m3(x: f32) -> u8 {
    E4M3.encode(x) as u8
}

/// Widens a `float8_e5m2` (bias 15, max 57344, IEEE inf/NaN) exactly: the f16 `bits << 8`.
#[inline]
pub fn f8e5m2_to_f32(bits: u8) -> f32 {
    f16_to_f32((bits as u16) << 8)
}

/// Narrows an f32 to `float8_e5m2` bits: round to nearest even, subnormals produced,
/// `|x| ≥ 61440` → ±inf, NaN → `sign | 0x7e | ((mantissa >> 21) & 1)`.
#[inline]
pub fn f32_to_f8e5m2(x: f32) -> u8 {
    E5M2.encode(x) as u8
}

// ---- Scalar definitions: integers, bool, and the per-dtype entry points ----

/// f32 → integer: round to nearest even, saturate to `[min, max]`, NaN → 0.
#[inline]
fn f32_to_int(x: f32, min: i64, max: i64) -> i64 {
    if x.is_nan() {
        0
    } else {
        // `as` saturates at i64's range, far outside every target range.
        (x.round_ties_even() as i64).clamp(min, max)
    }
}

/// Loads one element into f32: `bits` are the element's raw bits, zero-extended (only the low
/// `dtype.size()` bytes are read). The definition every path follows; see the
/// [module docs](self).
#[inline]
pub fn to_f32(dtype: DType, bits: u32) -> f32 {
    match dtype {
        DType::F32 => f32::from_bits(bits),
        DType::Tf32 => tf32_to_f32(bits),
        DType::Bf16 => bf16_to_f32(bits as u16),
        DType::F16 => f16_to_f32(bits as u16),
        DType::F8E4M3 => f8e4m3_to_f32(bits as u8),
        DType::F8E5M2 => f8e5m2_to_f32(bits as u8),
        DType::I8 => bits as u8 as i8 as f32,
        DType::I16 => bits as u16 as i16 as f32,
        DType::I32 => bits as i32 as f32,
        DType::U8 => bits as u8 as f32,
        DType::U16 => bits as u16 as f32,
        DType::U32 => bits as f32,
        DType::Bool => (bits as u8 != 0) as u32 as f32,
        DType::F8E4M3Fn => f8e4m3fn_to_f32(bits as u8),
        DType::F4E2M1Fn => f4e2m1fn_to_f32(bits as u8),
        DType::F8E8M0Fnu => f8e8m0fnu_to_f32(bits as u8),
        // An element of four values has no one value (see `x4_to_f32`); the rules refuse
        // every conversion of one, so this is never reached: NaN makes a bug visible.
        DType::F8E5M2X4 | DType::F8E4M3FnX4 | DType::F4E2M1FnX4 => f32::NAN,
    }
}

/// Stores an f32 as one element: the element's bits, zero-extended to u32. The definition
/// every path follows; see the [module docs](self).
#[inline]
pub fn from_f32(dtype: DType, x: f32) -> u32 {
    match dtype {
        DType::F32 => x.to_bits(),
        DType::Tf32 => f32_to_tf32(x),
        DType::Bf16 => f32_to_bf16(x) as u32,
        DType::F16 => f32_to_f16(x) as u32,
        DType::F8E4M3 => f32_to_f8e4m3(x) as u32,
        DType::F8E5M2 => f32_to_f8e5m2(x) as u32,
        DType::I8 => f32_to_int(x, i8::MIN as i64, i8::MAX as i64) as u8 as u32,
        DType::I16 => f32_to_int(x, i16::MIN as i64, i16::MAX as i64) as u16 as u32,
        DType::I32 => f32_to_int(x, i32::MIN as i64, i32::MAX as i64) as u32,
        DType::U8 => f32_to_int(x, 0, u8::MAX as i64) as u32,
        DType::U16 => f32_to_int(x, 0, u16::MAX as i64) as u32,
        DType::U32 => f32_to_int(x, 0, u32::MAX as i64) as u32,
        DType::Bool => (x != 0.0) as u32,
        DType::F8E4M3Fn => f32_to_f8e4m3fn(x) as u32,
        DType::F4E2M1Fn => f32_to_f4e2m1fn(x) as u32,
        DType::F8E8M0Fnu => f32_to_f8e8m0fnu(x) as u32,
        // Four values, not one (see `f32_to_x4`); never reached, as for `to_f32`: zero bits.
        DType::F8E5M2X4 | DType::F8E4M3FnX4 | DType::F4E2M1FnX4 => 0,
    }
}

/// One element converted between dtypes: within one dtype the bits are kept; between two, the
/// source's load to fp32 ([`to_f32`]) then the destination's store ([`from_f32`]).
#[inline]
pub fn cast(from: DType, to: DType, bits: u32) -> u32 {
    if from == to {
        bits
    } else {
        from_f32(to, to_f32(from, bits))
    }
}

/// Loads one element into an i32 lane (for bitwise operations): an integer's value
/// (sign- or zero-extended; a `u32` above `i32::MAX` wraps, keeping its 32 bits), a bool's 0
/// or 1 (any nonzero byte is 1), a float's raw bits zero-extended. `bits` as in [`to_f32`].
#[inline]
pub fn to_i32(dtype: DType, bits: u32) -> i32 {
    match dtype {
        DType::I8 => bits as u8 as i8 as i32,
        DType::I16 => bits as u16 as i16 as i32,
        DType::Bool => (bits as u8 != 0) as i32,
        DType::I32
        | DType::U32
        | DType::F32
        | DType::Tf32
        | DType::F8E5M2X4
        | DType::F8E4M3FnX4 => bits as i32,
        DType::U16 | DType::Bf16 | DType::F16 | DType::F4E2M1FnX4 => (bits & 0xffff) as i32,
        DType::U8
        | DType::F8E4M3
        | DType::F8E5M2
        | DType::F8E4M3Fn
        | DType::F4E2M1Fn
        | DType::F8E8M0Fnu => (bits & 0xff) as i32,
    }
}

/// Stores an i32 lane as one element: the lane's low `8 · dtype.size()` bits (two's-complement
/// wrap), and for bool its lowest bit (see the [module docs](self) for why). Returns the
/// element's bits, zero-extended.
#[inline]
pub fn from_i32(dtype: DType, v: i32) -> u32 {
    match dtype {
        DType::Bool => v as u32 & 1,
        d @ (DType::F32
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
        | DType::F4E2M1FnX4
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::U8
        | DType::U16
        | DType::U32) => match d.size() {
            1 => v as u32 & 0xff,
            2 => v as u32 & 0xffff,
            _ => v as u32,
        },
    }
}

// ---- Portable run routines: the definitions, one monomorphized loop per dtype ----

/// Reads one little-endian element of 1, 2 or 4 bytes, zero-extended.
#[inline(always)]
fn read_bits(s: &[u8]) -> u32 {
    match *s {
        [a] => a as u32,
        [a, b] => u16::from_le_bytes([a, b]) as u32,
        [a, b, c, d] => u32::from_le_bytes([a, b, c, d]),
        _ => unreachable!("elements have 1, 2 or 4 bytes"),
    }
}

/// Writes the low `d.len()` bytes of `bits`, little-endian.
#[inline(always)]
fn write_bits(d: &mut [u8], bits: u32) {
    let n = d.len();
    d.copy_from_slice(&bits.to_le_bytes()[..n]);
}

/// Loads the elements of `DType::ALL[D]` in `src` into the f32s (little-endian bytes) in
/// `dst`, as many as both hold.
fn load_portable<const D: usize>(src: &[u8], dst: &mut [u8]) {
    match DType::ALL[D].size() {
        1 => load_sized::<D, 1>(src, dst),
        2 => load_sized::<D, 2>(src, dst),
        _ => load_sized::<D, 4>(src, dst),
    }
}

/// [`load_portable`] for elements of `N` bytes.
#[inline(always)]
fn load_sized<const D: usize, const N: usize>(src: &[u8], dst: &mut [u8]) {
    let dtype = DType::ALL[D];
    for (s, d) in src
        .as_chunks::<N>()
        .0
        .iter()
        .zip(dst.as_chunks_mut::<4>().0)
    {
        let mut bits = [0u8; 4];
        bits[..N].copy_from_slice(s);
        *d = to_f32(dtype, u32::from_le_bytes(bits)).to_le_bytes();
    }
}

/// Stores the f32s (little-endian bytes) in `src` as elements of `DType::ALL[D]` in `dst`.
fn store_portable<const D: usize>(src: &[u8], dst: &mut [u8]) {
    match DType::ALL[D].size() {
        1 => store_sized::<D, 1>(src, dst),
        2 => store_sized::<D, 2>(src, dst),
        _ => store_sized::<D, 4>(src, dst),
    }
}

/// [`store_portable`] for elements of `N` bytes.
#[inline(always)]
fn store_sized<const D: usize, const N: usize>(src: &[u8], dst: &mut [u8]) {
    let dtype = DType::ALL[D];
    for (s, d) in src
        .as_chunks::<4>()
        .0
        .iter()
        .zip(dst.as_chunks_mut::<N>().0)
    {
        let bits = from_f32(dtype, f32::from_le_bytes(*s)).to_le_bytes();
        d.copy_from_slice(&bits[..N]);
    }
}

/// Loads the elements of `DType::ALL[D]` into i32 lanes.
fn load_i32_portable<const D: usize>(src: &[u8], dst: &mut [i32]) {
    let dtype = DType::ALL[D];
    for (s, d) in src.chunks_exact(dtype.size() as usize).zip(dst) {
        *d = to_i32(dtype, read_bits(s));
    }
}

/// Stores i32 lanes as elements of `DType::ALL[D]`.
fn store_i32_portable<const D: usize>(src: &[i32], dst: &mut [u8]) {
    let dtype = DType::ALL[D];
    for (&v, d) in src.iter().zip(dst.chunks_exact_mut(dtype.size() as usize)) {
        write_bits(d, from_i32(dtype, v));
    }
}

/// `[f::<0>, …, f::<15>]`: one instance per dtype, indexed by `dtype as usize` (the order of
/// [`DType::ALL`], checked by a test).
macro_rules! per_dtype {
    ($f:ident) => {
        [
            $f::<0>, $f::<1>, $f::<2>, $f::<3>, $f::<4>, $f::<5>, $f::<6>, $f::<7>, $f::<8>,
            $f::<9>, $f::<10>, $f::<11>, $f::<12>, $f::<13>, $f::<14>, $f::<15>,
        ]
    };
}

type BytesFn = fn(&[u8], &mut [u8]);
type LoadI32Fn = fn(&[u8], &mut [i32]);
type StoreI32Fn = fn(&[i32], &mut [u8]);
const LOAD_PORTABLE: [BytesFn; 16] = per_dtype!(load_portable);
const STORE_PORTABLE: [BytesFn; 16] = per_dtype!(store_portable);
const LOAD_I32_PORTABLE: [LoadI32Fn; 16] = per_dtype!(load_i32_portable);
const STORE_I32_PORTABLE: [StoreI32Fn; 16] = per_dtype!(store_i32_portable);

/// A vector loop: converts whole vectors of elements from `src` into `dst` (as many as both
/// hold, rounded down to whole vectors) and returns how many elements it converted.
///
/// # Safety
/// The CPU must support the features the loop was compiled for.
pub(crate) type VectorRun = unsafe fn(&[u8], &mut [u8]) -> usize;

/// The vector loop converting `s` to `d` on `isa`, if there is one; panics if the CPU lacks
/// `isa`.
fn vector_loop(isa: Isa, s: DType, d: DType) -> Option<VectorRun> {
    if isa == Isa::Portable {
        return None;
    }
    isa.assert_supported();
    arch_loop(isa, s, d)
}

#[cfg(target_arch = "x86_64")]
use x86::vector_loop as arch_loop;

/// No vector loops off x86-64.
#[cfg(not(target_arch = "x86_64"))]
fn arch_loop(_: Isa, _: DType, _: DType) -> Option<VectorRun> {
    None
}

/// Converts every element of `src` (of `s`) into `dst` (of `d`), both holding the same number
/// of elements, `s != d`: `isa`'s vector loop, then the portable definitions for the rest.
fn run(isa: Isa, src: &[u8], s: DType, dst: &mut [u8], d: DType) {
    if s.is_packed() || d.is_packed() {
        // No per-type loop (the rules let no instruction convert a packed type): the scalar
        // definitions, element by element.
        isa.assert_supported();
        let (ss, ds) = (elem_size(s), elem_size(d));
        for (sc, dc) in src.chunks_exact(ss).zip(dst.chunks_exact_mut(ds)) {
            write_bits(dc, from_f32(d, to_f32(s, read_bits(sc))));
        }
        return;
    }
    let done = match vector_loop(isa, s, d) {
        // SAFETY: `vector_loop` only returns loops whose features the CPU has.
        Some(v) => unsafe { v(src, dst) },
        None => 0,
    };
    let (ss, ds) = (elem_size(s), elem_size(d));
    let (src, dst) = (&src[done * ss..], &mut dst[done * ds..]);
    if s == DType::F32 {
        STORE_PORTABLE[d as usize](src, dst);
    } else if d == DType::F32 {
        LOAD_PORTABLE[s as usize](src, dst);
    } else {
        let (load, store) = (LOAD_PORTABLE[s as usize], STORE_PORTABLE[d as usize]);
        let mut buf = [0u8; PORTABLE_CHUNK * 4];
        for (sc, dc) in src
            .chunks(PORTABLE_CHUNK * ss)
            .zip(dst.chunks_mut(PORTABLE_CHUNK * ds))
        {
            let f = &mut buf[..sc.len() / ss * 4];
            load(sc, f);
            store(f, dc);
        }
    }
}

/// Bytes needed for `count` elements of `dtype`.
fn run_bytes(count: usize, dtype: DType) -> usize {
    count
        .checked_mul(elem_size(dtype))
        .expect("element count overflows usize")
}

// ---- Public run routines ----

/// Loads `dst.len()` little-endian elements of `dtype` from the start of `src` into f32
/// ([`to_f32`] on each).
///
/// # Panics
/// If `src` holds fewer than `dst.len()` elements, or if the CPU does not support `isa`.
pub fn load_f32(isa: Isa, src: &[u8], dtype: DType, dst: &mut [f32]) {
    let src = &src[..run_bytes(dst.len(), dtype)];
    let dst: &mut [u8] = bytemuck::cast_slice_mut(dst);
    if dtype == DType::F32 {
        isa.assert_supported();
        dst.copy_from_slice(src);
    } else {
        run(isa, src, dtype, dst, DType::F32);
    }
}

/// Stores the f32s of `src` as `src.len()` little-endian elements of `dtype` at the start of
/// `dst` ([`from_f32`] on each); the rest of `dst` is untouched.
///
/// # Panics
/// If `dst` is too short for `src.len()` elements, or if the CPU does not support `isa`.
pub fn store_f32(isa: Isa, src: &[f32], dst: &mut [u8], dtype: DType) {
    let dst = &mut dst[..run_bytes(src.len(), dtype)];
    let src: &[u8] = bytemuck::cast_slice(src);
    if dtype == DType::F32 {
        isa.assert_supported();
        dst.copy_from_slice(src);
    } else {
        run(isa, src, DType::F32, dst, dtype);
    }
}

/// Loads `dst.len()` little-endian elements of `dtype` from the start of `src` into i32 lanes
/// ([`to_i32`] on each). Every `isa` runs the same compiler-vectorized loop; the parameter
/// keeps the run routines uniform (and is checked like theirs).
///
/// # Panics
/// If `src` holds fewer than `dst.len()` elements, or if the CPU does not support `isa`.
pub fn load_i32(isa: Isa, src: &[u8], dtype: DType, dst: &mut [i32]) {
    isa.assert_supported();
    let src = &src[..run_bytes(dst.len(), dtype)];
    match LOAD_I32_PORTABLE.get(dtype as usize) {
        Some(load) => load(src, dst),
        // A packed type: its raw bits, as [`to_i32`] defines.
        None => {
            for (s, d) in src.chunks_exact(elem_size(dtype)).zip(dst.iter_mut()) {
                *d = to_i32(dtype, read_bits(s));
            }
        }
    }
}

/// Stores the i32 lanes of `src` as `src.len()` little-endian elements of `dtype` at the start
/// of `dst` ([`from_i32`] on each); the rest of `dst` is untouched. Every `isa` runs the same
/// compiler-vectorized loop.
///
/// # Panics
/// If `dst` is too short for `src.len()` elements, or if the CPU does not support `isa`.
pub fn store_i32(isa: Isa, src: &[i32], dst: &mut [u8], dtype: DType) {
    isa.assert_supported();
    let dst = &mut dst[..run_bytes(src.len(), dtype)];
    match STORE_I32_PORTABLE.get(dtype as usize) {
        Some(store) => store(src, dst),
        // A packed type: the lane's low bits, as [`from_i32`] defines.
        None => {
            for (&v, d) in src.iter().zip(dst.chunks_exact_mut(elem_size(dtype))) {
                write_bits(d, from_i32(dtype, v));
            }
        }
    }
}

/// Converts `count` little-endian elements of `src_dtype` at the start of `src` into
/// `dst_dtype` elements at the start of `dst` (both may be unaligned slices of bigger buffers);
/// the rest of `dst` is untouched.
///
/// Same dtype: a bit copy. Otherwise exactly [`store_f32`] of [`load_f32`], on every `isa`
/// (see the [module docs](self)).
///
/// # Panics
/// If a slice is too short for `count` elements, or if the CPU does not support `isa`.
pub fn convert(
    isa: Isa,
    src: &[u8],
    src_dtype: DType,
    dst: &mut [u8],
    dst_dtype: DType,
    count: usize,
) {
    let src = &src[..run_bytes(count, src_dtype)];
    let dst = &mut dst[..run_bytes(count, dst_dtype)];
    if src_dtype == dst_dtype {
        isa.assert_supported();
        dst.copy_from_slice(src);
    } else {
        run(isa, src, src_dtype, dst, dst_dtype);
    }
}

/// Bytes per element of a dtype.
pub(crate) fn elem_size(dtype: DType) -> usize {
    dtype.size() as usize
}

#[cfg(test)]
pub(crate) mod tests;
