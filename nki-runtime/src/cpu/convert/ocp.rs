//! Scalar definitions of the OCP formats NKI 0.1–0.5 added: `float8_e4m3fn` (OFP8 E4M3),
//! `float4_e2m1fn` (MX FP4 E2M1, one element per byte) and `float8_e8m0fnu` (MX scale E8M0).
//!
//! Loads are exact for every bit pattern; stores round to nearest even, with the overflow and
//! NaN results of ml_dtypes' (non-saturating) conversion, the library NKI's simulator computes
//! with. The [module docs](super) and `docs/dtypes.md` give the rules and their sources. No
//! host path has vector routines for these types: every path runs these definitions.

/// Rounds a finite, nonzero-or-zero magnitude (f32 bits without the sign) to the nearest code,
/// ties to even, of a binary format with `m` mantissa bits and exponent bias `bias` that has
/// subnormals: the code is `exponent << m | mantissa`, unbounded above (a code past the
/// format's largest finite one is an overflow, which the caller resolves).
#[inline]
fn round_magnitude(abs: u32, m: u32, bias: u32) -> u32 {
    let shift = 23 - m;
    if abs >= (128 - bias) << 23 {
        // At least the smallest normal: rebias the exponent and round at bit `shift`; a carry
        // bumps the exponent.
        let r = abs - ((127 - bias) << 23);
        (r + (1 << (shift - 1)) - 1 + ((r >> shift) & 1)) >> shift
    } else {
        // Below the smallest normal: |x| / 2^(1 − bias − m), rounded to an integer (a
        // subnormal code, or the smallest normal one when it rounds up to 2^m).
        let exp = abs >> 23;
        let sig = if exp == 0 {
            abs
        } else {
            (abs & 0x007f_ffff) | 0x0080_0000
        };
        // |x| = sig · 2^(max(exp, 1) − 150), so the quotient is sig >> q_shift with
        let q_shift = 151 - bias - m - exp.max(1); // > 0: exp < 128 − bias
        if q_shift > 25 {
            0 // sig < 2^24 ≤ half a quantum
        } else {
            let q = sig >> q_shift;
            let rem = sig & ((1 << q_shift) - 1);
            let half = 1 << (q_shift - 1);
            q + (rem > half || (rem == half && q & 1 == 1)) as u32
        }
    }
}

/// Widens a `float8_e4m3fn` (bias 7, max ±448, no inf, NaN `S.1111.111`) exactly; the NaN
/// becomes `sign | 0x7fc0_0000`, f32's default NaN with its sign (ml_dtypes' result; the
/// format has one NaN per sign, so there is no payload to keep).
#[inline]
pub fn f8e4m3fn_to_f32(bits: u8) -> f32 {
    let sign = ((bits & 0x80) as u32) << 24;
    let exp = ((bits >> 3) & 0xf) as u32;
    let man = (bits & 0x7) as u32;
    let abs = if bits & 0x7f == 0x7f {
        0x7fc0_0000
    } else if exp == 0 {
        // man · 2^-9: exact (a small integer times a power of two).
        (man as f32 * f32::from_bits(118 << 23)).to_bits()
    } else {
        ((exp + 120) << 23) | (man << 20)
    };
    f32::from_bits(sign | abs)
}

/// Narrows an f32 to `float8_e4m3fn` bits: round to nearest even with fp8 subnormals; a
/// magnitude that rounds past 448 (`|x| > 464`), ±inf and NaN give the NaN `sign | 0x7f`.
#[inline]
pub fn f32_to_f8e4m3fn(x: f32) -> u8 {
    let bits = x.to_bits();
    let sign = (bits >> 24) & 0x80;
    let abs = bits & 0x7fff_ffff;
    let mag = if abs >= 0x7f80_0000 {
        0x7f
    } else {
        // Codes 0x00..=0x7e are finite; 0x7f, or a carry past it, is the NaN.
        round_magnitude(abs, 3, 7).min(0x7f)
    };
    (sign | mag) as u8
}

/// Widens a `float4_e2m1fn` (bias 1, max ±6, no inf or NaN), stored in the low nibble of its
/// byte, exactly; the high nibble is ignored.
#[inline]
pub fn f4e2m1fn_to_f32(bits: u8) -> f32 {
    let sign = ((bits & 0x8) as u32) << 28;
    let exp = ((bits >> 1) & 0x3) as u32;
    let man = (bits & 0x1) as u32;
    let abs = match (exp, man) {
        (0, 0) => 0,
        (0, _) => 0x3f00_0000, // 0.5
        _ => ((exp + 126) << 23) | (man << 22),
    };
    f32::from_bits(sign | abs)
}

/// Narrows an f32 to `float4_e2m1fn` bits (in the low nibble, the high nibble zero): round to
/// nearest even with the subnormal 0.5; a magnitude past 6 and ±inf saturate to ±6; a NaN gives
/// `0x8` (−0) when positive and `0x0` (+0) when negative, ml_dtypes' result.
#[inline]
pub fn f32_to_f4e2m1fn(x: f32) -> u8 {
    let bits = x.to_bits();
    let sign = (bits >> 28) & 0x8;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        // ml_dtypes: its quiet_NaN() is the code 0b1000, negated for a negative NaN.
        return (sign ^ 0x8) as u8;
    }
    let mag = if abs == 0x7f80_0000 {
        0x7
    } else {
        round_magnitude(abs, 1, 1).min(0x7)
    };
    (sign | mag) as u8
}

/// Widens a `float8_e8m0fnu` (no sign, no mantissa, bias 127: `2^(bits − 127)`) exactly:
/// `0x00` is `2^−127` (an f32 subnormal), `0xff` is the NaN, read as `0x7fc0_0000`.
#[inline]
pub fn f8e8m0fnu_to_f32(bits: u8) -> f32 {
    f32::from_bits(match bits {
        0xff => 0x7fc0_0000,
        0 => 0x0040_0000,
        e => (e as u32) << 23,
    })
}

/// Narrows an f32 to `float8_e8m0fnu` bits: `2^e · 1.f` rounds to `2^e` when `1.f < 1.5` and to
/// `2^(e+1)` from 1.5 on (ml_dtypes' rounding, the tie going up); below `2^−127` gives `0x00`
/// (`2^−127`, the smallest value); from `1.5 · 2^127` on, ±0, negative values, ±inf and NaN
/// give the NaN `0xff`.
#[inline]
pub fn f32_to_f8e8m0fnu(x: f32) -> u8 {
    let bits = x.to_bits();
    if bits == 0 || bits >= 0x7f80_0000 {
        // +0, +inf, NaN and everything with the sign bit.
        return 0xff;
    }
    let exp = bits >> 23;
    if exp == 0 {
        // Subnormal: 1.5 · 2^-127 and up round to 2^-126, the rest to 2^-127.
        (bits >= 0x0060_0000) as u8
    } else {
        // The f32 exponent field is the code (both biases are 127); 1.5 and up round up, and
        // rounding past 2^127 gives the NaN.
        (exp + ((bits >> 22) & 1)).min(0xff) as u8
    }
}
