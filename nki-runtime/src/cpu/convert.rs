//! Element type conversions over contiguous runs of little-endian elements.
//!
//! # The model's conversion semantics
//!
//! Every path ([`Isa`]) produces exactly these bits:
//!
//! - **bf16 → f32** and **f16 → f32** widen exactly: subnormals are kept, NaN payloads are kept
//!   (bf16 → f32 is `bits << 16`, also for a signaling NaN, where `half::bf16::to_f32` would set
//!   the quiet bit; f16 → f32 sets the quiet bit of a NaN, like `half::f16::to_f32` and
//!   `vcvtph2ps`).
//! - **f32 → bf16** rounds to nearest, ties to even. A NaN becomes `(bits >> 16) | 0x0040`
//!   (quiet; sign and top payload kept). **f32 subnormal inputs become a zero of the same sign**;
//!   everything else, including overflow to ±inf, is plain IEEE round-to-nearest-even. This is
//!   what `vcvtneps2bf16` does: probed on the development machine (Intel Xeon, Emerald Rapids,
//!   KVM guest), it returned `0x0000` for `0x0000_0001` and `0x007f_ffff` (IEEE would give
//!   `0x0080` for the latter) and `0x8000` for `0x8040_0000` (MXCSR at its default, no DAZ);
//!   NaNs came out as `(bits >> 16) | 0x0040` and `0x7f7f_ffff` rounded to `0x7f80`. An
//!   exhaustive run over all 2^32 f32 inputs matched the portable definition bit for bit, and
//!   the tests compare it again on edge cases and random inputs on whatever machine runs them. This flush is the one place where the model
//!   differs from `half::bf16::from_f32`.
//! - **f32 → f16** rounds to nearest even exactly like `half::f16::from_f32` (IEEE, subnormal
//!   `f16` results produced normally, overflow to ±inf); a NaN becomes
//!   `sign | 0x7e00 | (mantissa >> 13)`.
//! - **bf16 ↔ f16** widen exactly to f32, then narrow as above.
//!
//! The scalar functions ([`bf16_to_f32`], [`f32_to_bf16`], [`f16_to_f32`], [`f32_to_f16`]) are
//! the definition; [`convert`] applies them to runs, vectorized where the CPU allows.

use nki_lang::DType;

use super::Isa;

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

/// Converts `count` little-endian elements of `src_dtype` at the start of `src` into
/// `dst_dtype` elements at the start of `dst` (both may be unaligned slices of bigger buffers).
///
/// Same dtype = plain copy. The semantics are the module's (see the [module docs](self)) and
/// identical on every `isa`.
///
/// # Panics
/// If a slice is too short for `count` elements, if a dtype is not `F32`, `Bf16` or `F16`, or if
/// the CPU does not support `isa`.
pub fn convert(
    isa: Isa,
    src: &[u8],
    src_dtype: DType,
    dst: &mut [u8],
    dst_dtype: DType,
    count: usize,
) {
    let bytes = |dtype| {
        count
            .checked_mul(elem_size(dtype))
            .expect("element count overflows usize")
    };
    let src = &src[..bytes(src_dtype)];
    let dst = &mut dst[..bytes(dst_dtype)];
    if src_dtype == dst_dtype {
        dst.copy_from_slice(src);
        return;
    }
    match isa {
        Isa::Portable => portable(src, src_dtype, dst, dst_dtype),
        #[cfg(target_arch = "x86_64")]
        _ => {
            isa.assert_supported();
            // SAFETY: `assert_supported` checked that the CPU has the features `isa` needs.
            unsafe { super::convert_x86::convert(isa, src, src_dtype, dst, dst_dtype) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => {
            isa.assert_supported();
            unreachable!()
        }
    }
}

/// Bytes per element of a dtype this module handles.
pub(crate) fn elem_size(dtype: DType) -> usize {
    dtype.size() as usize
}

/// The portable path: one scalar loop per dtype pair, so that nothing is dispatched per element.
pub(crate) fn portable(src: &[u8], src_dtype: DType, dst: &mut [u8], dst_dtype: DType) {
    /// Maps 2-byte elements to 4-byte ones.
    fn widen(src: &[u8], dst: &mut [u8], f: impl Fn(u16) -> f32) {
        for (s, d) in src.chunks_exact(2).zip(dst.chunks_exact_mut(4)) {
            d.copy_from_slice(&f(u16::from_le_bytes([s[0], s[1]])).to_le_bytes());
        }
    }
    /// Maps 4-byte elements to 2-byte ones.
    fn narrow(src: &[u8], dst: &mut [u8], f: impl Fn(f32) -> u16) {
        for (s, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(2)) {
            let x = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            d.copy_from_slice(&f(x).to_le_bytes());
        }
    }
    /// Maps 2-byte elements to 2-byte ones.
    fn cross(src: &[u8], dst: &mut [u8], f: impl Fn(u16) -> u16) {
        for (s, d) in src.chunks_exact(2).zip(dst.chunks_exact_mut(2)) {
            d.copy_from_slice(&f(u16::from_le_bytes([s[0], s[1]])).to_le_bytes());
        }
    }
    match (src_dtype, dst_dtype) {
        (DType::Bf16, DType::F32) => widen(src, dst, bf16_to_f32),
        (DType::F16, DType::F32) => widen(src, dst, f16_to_f32),
        (DType::F32, DType::Bf16) => narrow(src, dst, f32_to_bf16),
        (DType::F32, DType::F16) => narrow(src, dst, f32_to_f16),
        (DType::Bf16, DType::F16) => cross(src, dst, |x| f32_to_f16(bf16_to_f32(x))),
        (DType::F16, DType::Bf16) => cross(src, dst, |x| f32_to_bf16(f16_to_f32(x))),
        (s, d) if s == d => dst.copy_from_slice(src),
        (s, d) => panic!("unsupported conversion {s:?} -> {d:?}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so the tests need no dependencies.
    pub(crate) struct Rng(u64);
    impl Rng {
        pub(crate) fn new(seed: u64) -> Self {
            Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
        }
        pub(crate) fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        pub(crate) fn next_u32(&mut self) -> u32 {
            (self.next_u64() >> 32) as u32
        }
    }

    fn all_16bit_patterns() -> Vec<u8> {
        (0..=u16::MAX).flat_map(|x| x.to_le_bytes()).collect()
    }

    /// f32 inputs: edge cases (ties, subnormals, NaN, inf, max, rounding boundaries) plus random
    /// bits and random values near the f16/bf16 ranges.
    fn f32_inputs() -> Vec<u32> {
        #[rustfmt::skip]
        let edges = [
            0x0000_0000, 0x8000_0000, 0x0000_0001, 0x8000_0001, 0x007f_ffff, 0x807f_ffff,
            0x0040_0000, 0x0080_0000, 0x8080_0000, 0x0080_8000, 0x0080_ffff, 0x0081_8000,
            0x7f7f_ffff, 0xff7f_ffff, 0x7f7f_7fff, 0x7f7f_8000, 0x7f80_0000, 0xff80_0000,
            0x7f80_0001, 0xff80_0001, 0x7fa1_2345, 0x7fc0_0000, 0xffc0_0000, 0x7fff_ffff,
            0x3f80_8000, 0x3f81_8000, 0x3f80_8001, 0x3f80_7fff, 0x477f_e000, 0x477f_efff,
            0x477f_f000, 0x477f_f001, 0x4780_0000, 0x3880_0000, 0x387f_f000, 0x387f_efff,
            0x3800_0000, 0x3300_0000, 0x3300_0001, 0x32ff_ffff, 0x3380_0000, 0x33c0_0000,
            0x3400_0000, 0x3f80_1000, 0x3f80_3000, 0x3f80_2000, 0x3f80_1001, 0x3f80_0fff,
        ];
        let mut v: Vec<u32> = edges.to_vec();
        // Every sign/exponent with tie-ish and random mantissas.
        for e in 0..=255u32 {
            for man in [
                0, 1, 0x1000, 0x3000, 0x8000, 0x18000, 0x7fffff, 0x400000, 0x7fff, 0xfff,
            ] {
                v.push((e << 23) | man);
                v.push(0x8000_0000 | (e << 23) | man);
            }
        }
        let mut rng = Rng::new(7);
        for _ in 0..200_000 {
            v.push(rng.next_u32());
        }
        for _ in 0..100_000 {
            // Exponents around the f16 range, to hit subnormal f16 rounding.
            let e = 95 + rng.next_u32() % 50;
            v.push((rng.next_u32() & 0x807f_ffff) | (e << 23));
        }
        v
    }

    fn run(isa: Isa, src: &[u8], s: DType, d: DType, count: usize) -> Vec<u8> {
        let mut out = vec![0xa5u8; count * elem_size(d) + 3];
        convert(isa, src, s, &mut out, d, count);
        out
    }

    #[test]
    fn scalar_f16_matches_half() {
        for x in 0..=u16::MAX {
            let want = half::f16::from_bits(x).to_f32().to_bits();
            assert_eq!(f16_to_f32(x).to_bits(), want, "f16 {x:04x}");
        }
        for x in f32_inputs() {
            let want = half::f16::from_f32(f32::from_bits(x)).to_bits();
            assert_eq!(f32_to_f16(f32::from_bits(x)), want, "f32 {x:08x}");
        }
    }

    #[test]
    fn scalar_bf16_matches_half_except_subnormal_flush() {
        for x in 0..=u16::MAX {
            let h = half::bf16::from_bits(x);
            // half sets the quiet bit of a signaling NaN; the model keeps the payload as is.
            let want = if h.is_nan() {
                (x as u32) << 16
            } else {
                h.to_f32().to_bits()
            };
            assert_eq!(bf16_to_f32(x).to_bits(), want, "bf16 {x:04x}");
        }
        for x in f32_inputs() {
            let f = f32::from_bits(x);
            let got = f32_to_bf16(f);
            if f.is_subnormal() {
                // The intentional difference: vcvtneps2bf16 flushes subnormal inputs.
                assert_eq!(got, ((x >> 16) & 0x8000) as u16, "f32 {x:08x}");
            } else if f.is_nan() {
                assert_eq!(got, ((x >> 16) | 0x40) as u16, "f32 {x:08x}");
            } else {
                assert_eq!(got, half::bf16::from_f32(f).to_bits(), "f32 {x:08x}");
            }
        }
    }

    #[test]
    fn widening_all_patterns_every_path() {
        let src = all_16bit_patterns();
        for s in [DType::Bf16, DType::F16] {
            let want = run(Isa::Portable, &src, s, DType::F32, 65536);
            for (i, w) in want[..65536 * 4].chunks_exact(4).enumerate() {
                let f = f32::from_le_bytes(w.try_into().unwrap());
                let expect = match s {
                    DType::Bf16 => bf16_to_f32(i as u16),
                    _ => f16_to_f32(i as u16),
                };
                assert_eq!(f.to_bits(), expect.to_bits());
            }
            for isa in Isa::supported() {
                assert_eq!(run(isa, &src, s, DType::F32, 65536), want, "{isa:?} {s:?}");
            }
        }
    }

    #[test]
    fn half_to_half_all_patterns_every_path() {
        let src = all_16bit_patterns();
        for (s, d) in [(DType::Bf16, DType::F16), (DType::F16, DType::Bf16)] {
            let want = run(Isa::Portable, &src, s, d, 65536);
            for isa in Isa::supported() {
                assert_eq!(run(isa, &src, s, d, 65536), want, "{isa:?} {s:?}->{d:?}");
            }
        }
    }

    #[test]
    fn narrowing_every_path() {
        let inputs = f32_inputs();
        let src: Vec<u8> = inputs.iter().flat_map(|x| x.to_le_bytes()).collect();
        for d in [DType::Bf16, DType::F16] {
            let want = run(Isa::Portable, &src, DType::F32, d, inputs.len());
            for isa in Isa::supported() {
                assert_eq!(
                    run(isa, &src, DType::F32, d, inputs.len()),
                    want,
                    "{isa:?} {d:?}"
                );
            }
        }
    }

    #[test]
    fn unaligned_runs_and_tails_every_path() {
        let mut rng = Rng::new(3);
        let bytes: Vec<u8> = (0..4200).map(|_| rng.next_u32() as u8).collect();
        for isa in Isa::supported() {
            for (s, d) in [
                (DType::F32, DType::Bf16),
                (DType::F32, DType::F16),
                (DType::Bf16, DType::F32),
                (DType::F16, DType::F32),
                (DType::Bf16, DType::F16),
                (DType::F16, DType::Bf16),
                (DType::F32, DType::F32),
                (DType::Bf16, DType::Bf16),
            ] {
                for start in [0usize, 1, 3] {
                    for count in [0usize, 1, 7, 8, 15, 16, 17, 31, 33, 100, 1000] {
                        let src = &bytes[start..];
                        // Bytes after the run must stay untouched.
                        let mut out = vec![0x5au8; start + count * elem_size(d) + 9];
                        convert(isa, src, s, &mut out[start..], d, count);
                        let mut want = vec![0x5au8; start + count * elem_size(d) + 9];
                        portable(
                            &src[..count * elem_size(s)],
                            s,
                            &mut want[start..start + count * elem_size(d)],
                            d,
                        );
                        assert_eq!(
                            out, want,
                            "{isa:?} {s:?}->{d:?} start {start} count {count}"
                        );
                    }
                }
            }
        }
    }
}

/// Widens `dst.len()` elements of `dtype` to f32 (placeholder: replaced by the per-dtype
/// routines in the next commit).
pub fn load_f32(isa: Isa, src: &[u8], dtype: DType, dst: &mut [f32]) {
    let n = dst.len();
    convert(
        isa,
        src,
        dtype,
        bytemuck::cast_slice_mut(dst),
        DType::F32,
        n,
    );
}

/// Narrows f32 lanes to `dtype` (placeholder, as [`load_f32`]).
pub fn store_f32(isa: Isa, src: &[f32], dst: &mut [u8], dtype: DType) {
    convert(
        isa,
        bytemuck::cast_slice(src),
        DType::F32,
        dst,
        dtype,
        src.len(),
    );
}

/// Integer lanes (placeholder, as [`load_f32`]).
pub fn load_i32(_isa: Isa, src: &[u8], dtype: DType, dst: &mut [i32]) {
    let size = dtype.size() as usize;
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(size)) {
        let mut b = [0u8; 4];
        b[..size].copy_from_slice(s);
        *d = i32::from_le_bytes(b);
    }
}

/// Integer lanes (placeholder, as [`load_f32`]).
pub fn store_i32(_isa: Isa, src: &[i32], dst: &mut [u8], dtype: DType) {
    let size = dtype.size() as usize;
    for (s, d) in src.iter().zip(dst.chunks_exact_mut(size)) {
        d.copy_from_slice(&s.to_le_bytes()[..size]);
    }
}
