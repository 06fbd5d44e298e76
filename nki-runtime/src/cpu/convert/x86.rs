//! x86-64 vector loops for [`super::convert`]: each dtype has one 16-lane (AVX-512) and one
//! 8-lane (AVX2) *load* (elements → f32 lanes) and *store* (f32 lanes → elements), and a
//! conversion loop is a generic loop over a (source, destination) pair of them, `store(load(·))`
//! per vector, instantiated by the compiler for every pair (f32 loads and stores are plain
//! moves, so converting from or to f32 is a single load or store). The loops convert whole
//! vectors; the caller finishes the tail with the portable definitions. Bit-identical to the
//! scalar definitions in [`super::convert`].
//!
//! Where a load or store uses floating-point instructions, the result is exact or rounded once
//! to nearest even: AVX-512 names the rounding in the instruction; AVX2 uses MXCSR's rounding
//! control. Rust code runs with MXCSR at its default (round to nearest, DAZ and FTZ off) and
//! these loops assume it, as the bf16 and f16 ones always have. No instruction here produces a
//! subnormal, and where one reads an f32 input as a float the definition gives a subnormal
//! input the same result as a zero (the bool store, where it does not, tests the bits).

use core::arch::x86_64::*;
use core::mem::transmute;

use nki_lang::DType;

use super::{E4M3, E5M2, Isa, MiniFloat, VectorRun};

/// Round to nearest even, exceptions suppressed (AVX-512 embedded rounding).
const RNE: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

/// The vector loop converting `s` to `d` (`s != d`) on `isa`, if there is one.
///
/// The caller checked that the CPU supports `isa`. The AVX2 loops are compiled with F16C
/// (for f16 and e5m2) and are only returned when the CPU has it, as every AVX2 CPU does.
///
/// The OCP formats (`float8_e4m3fn`, `float4_e2m1fn`, `float8_e8m0fnu`) have no vector
/// routines: a conversion from or to one of them is `None` here, and the caller runs the
/// portable definitions for the whole run. Nor have the packed MX types (which the rules only
/// let DMA copy as bits).
pub(super) fn vector_loop(isa: Isa, s: DType, d: DType) -> Option<VectorRun> {
    use DType::*;
    match isa {
        Isa::Portable => None,
        Isa::Avx512 | Isa::Avx512Bf16 => {
            let hw = isa == Isa::Avx512Bf16;
            match s {
                F32 => to_512::<v512::F32>(d, hw),
                Tf32 => to_512::<v512::Tf32>(d, hw),
                Bf16 => to_512::<v512::Bf16>(d, hw),
                F16 => to_512::<v512::F16>(d, hw),
                F8E4M3 => to_512::<v512::E4M3>(d, hw),
                F8E5M2 => to_512::<v512::E5M2>(d, hw),
                I8 => to_512::<v512::I8>(d, hw),
                I16 => to_512::<v512::I16>(d, hw),
                I32 => to_512::<v512::I32>(d, hw),
                U8 => to_512::<v512::U8>(d, hw),
                U16 => to_512::<v512::U16>(d, hw),
                U32 => to_512::<v512::U32>(d, hw),
                Bool => to_512::<v512::Bool>(d, hw),
                F8E4M3Fn | F4E2M1Fn | F8E8M0Fnu | F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => None,
            }
        }
        Isa::Avx2Fma if std::is_x86_feature_detected!("f16c") => match s {
            F32 => to_256::<v256::F32>(d),
            Tf32 => to_256::<v256::Tf32>(d),
            Bf16 => to_256::<v256::Bf16>(d),
            F16 => to_256::<v256::F16>(d),
            F8E4M3 => to_256::<v256::E4M3>(d),
            F8E5M2 => to_256::<v256::E5M2>(d),
            I8 => to_256::<v256::I8>(d),
            I16 => to_256::<v256::I16>(d),
            I32 => to_256::<v256::I32>(d),
            U8 => to_256::<v256::U8>(d),
            U16 => to_256::<v256::U16>(d),
            U32 => to_256::<v256::U32>(d),
            Bool => to_256::<v256::Bool>(d),
            F8E4M3Fn | F4E2M1Fn | F8E8M0Fnu | F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => None,
        },
        Isa::Avx2Fma => None,
    }
}

/// The AVX-512 loop from `S` to `d`, if `d` has vector routines; `bf16_hw`: store bf16 with
/// `vcvtneps2bf16`.
fn to_512<S: Lanes512>(d: DType, bf16_hw: bool) -> Option<VectorRun> {
    use DType::*;
    Some(match d {
        F32 => fused512::<S, v512::F32>,
        Tf32 => fused512::<S, v512::Tf32>,
        Bf16 if bf16_hw => fused512_bf16::<S, v512::Bf16Hw>,
        Bf16 => fused512::<S, v512::Bf16>,
        F16 => fused512::<S, v512::F16>,
        F8E4M3 => fused512::<S, v512::E4M3>,
        F8E5M2 => fused512::<S, v512::E5M2>,
        I8 => fused512::<S, v512::I8>,
        I16 => fused512::<S, v512::I16>,
        I32 => fused512::<S, v512::I32>,
        U8 => fused512::<S, v512::U8>,
        U16 => fused512::<S, v512::U16>,
        U32 => fused512::<S, v512::U32>,
        Bool => fused512::<S, v512::Bool>,
        F8E4M3Fn | F4E2M1Fn | F8E8M0Fnu | F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => return None,
    })
}

/// The AVX2 loop from `S` to `d`, if `d` has vector routines.
fn to_256<S: Lanes256>(d: DType) -> Option<VectorRun> {
    use DType::*;
    Some(match d {
        F32 => fused256::<S, v256::F32>,
        Tf32 => fused256::<S, v256::Tf32>,
        Bf16 => fused256::<S, v256::Bf16>,
        F16 => fused256::<S, v256::F16>,
        F8E4M3 => fused256::<S, v256::E4M3>,
        F8E5M2 => fused256::<S, v256::E5M2>,
        I8 => fused256::<S, v256::I8>,
        I16 => fused256::<S, v256::I16>,
        I32 => fused256::<S, v256::I32>,
        U8 => fused256::<S, v256::U8>,
        U16 => fused256::<S, v256::U16>,
        U32 => fused256::<S, v256::U32>,
        Bool => fused256::<S, v256::Bool>,
        F8E4M3Fn | F4E2M1Fn | F8E8M0Fnu | F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => return None,
    })
}

// ==== AVX-512: 16 lanes ====

/// Splats a u32 bit pattern.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn s512(x: u32) -> __m512i {
    _mm512_set1_epi32(x as i32)
}

/// Logical right shift of every lane by `n` (a constant after inlining).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn srl512(v: __m512i, n: u32) -> __m512i {
    _mm512_srl_epi32(v, _mm_cvtsi32_si128(n as i32))
}

/// Loads 16 bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn bytes16(p: *const u8) -> __m128i {
    // SAFETY: the caller guarantees 16 readable bytes at `p`; the load is unaligned.
    unsafe { _mm_loadu_si128(p.cast()) }
}

/// Loads 16 two-byte elements.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn words16(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 32 readable bytes at `p`; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// Loads 16 four-byte elements.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn dwords16(p: *const u8) -> __m512i {
    // SAFETY: the caller guarantees 64 readable bytes at `p`; the load is unaligned.
    unsafe { _mm512_loadu_si512(p.cast()) }
}

/// Stores the low byte of every lane (16 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn put_bytes16(p: *mut u8, v: __m512i) {
    // SAFETY: the caller guarantees 16 writable bytes at `p`; the store is unaligned.
    unsafe { _mm_storeu_si128(p.cast(), _mm512_cvtepi32_epi8(v)) }
}

/// Stores the low two bytes of every lane (32 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn put_words16(p: *mut u8, v: __m512i) {
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), _mm512_cvtepi32_epi16(v)) }
}

/// Stores 16 four-byte lanes (64 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn put_dwords16(p: *mut u8, v: __m512i) {
    // SAFETY: the caller guarantees 64 writable bytes at `p`; the store is unaligned.
    unsafe { _mm512_storeu_si512(p.cast(), v) }
}

// ---- AVX-512 loads ----

/// Loads 16 f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_f32(p: *const u8) -> __m512 {
    // SAFETY: the caller guarantees 64 readable bytes at `p`; the load is unaligned.
    unsafe { _mm512_loadu_ps(p.cast()) }
}

/// Loads 16 tf32 containers (low 13 bits cleared).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_tf32(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    let v = unsafe { dwords16(p) };
    _mm512_castsi512_ps(_mm512_and_si512(v, s512(0xffff_e000)))
}

/// Loads 16 bf16 and widens them exactly (`bits << 16`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_bf16(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    let h = unsafe { words16(p) };
    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
}

/// Loads 16 f16 and widens them exactly (`vcvtph2ps`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_f16(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    _mm512_cvtph_ps(unsafe { words16(p) })
}

/// Widens 16 e4m3 (one per lane, zero-extended) exactly.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn e4m3_x16(x: __m512i) -> __m512 {
    let a = _mm512_and_si512(x, s512(0x7f));
    // Normal: rebias the exponent by 127 - 7.
    let normal = _mm512_add_epi32(_mm512_slli_epi32::<20>(a), s512(120 << 23));
    // Subnormal (exponent 0): mantissa · 2^-9, exact.
    let sub = _mm512_mul_round_ps::<RNE>(_mm512_cvtepi32_ps(a), _mm512_set1_ps(1.0 / 512.0));
    let r = _mm512_mask_mov_epi32(
        normal,
        _mm512_cmplt_epu32_mask(a, s512(8)),
        _mm512_castps_si512(sub),
    );
    // Exponent 15: inf, or a NaN with f32's quiet bit and the payload.
    let special = _mm512_or_si512(
        s512(0x7f80_0000),
        _mm512_and_si512(_mm512_slli_epi32::<20>(a), s512(0x0070_0000)),
    );
    let special = _mm512_mask_or_epi32(
        special,
        _mm512_cmpgt_epu32_mask(a, s512(0x78)),
        special,
        s512(0x0040_0000),
    );
    let r = _mm512_mask_mov_epi32(r, _mm512_cmpge_epu32_mask(a, s512(0x78)), special);
    let sign = _mm512_slli_epi32::<24>(_mm512_and_si512(x, s512(0x80)));
    _mm512_castsi512_ps(_mm512_or_si512(r, sign))
}

/// Loads 16 e4m3 and widens them exactly.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_e4m3(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    e4m3_x16(_mm512_cvtepu8_epi32(unsafe { bytes16(p) }))
}

/// Loads 16 e5m2 and widens them exactly: they are the f16 `bits << 8`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_e5m2(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    let b = unsafe { bytes16(p) };
    _mm512_cvtph_ps(_mm256_slli_epi16::<8>(_mm256_cvtepu8_epi16(b)))
}

/// Loads 16 i8 (exact in f32).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_i8(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(unsafe { bytes16(p) }))
}

/// Loads 16 u8 (exact in f32).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_u8(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(unsafe { bytes16(p) }))
}

/// Loads 16 i16 (exact in f32).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_i16(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(unsafe { words16(p) }))
}

/// Loads 16 u16 (exact in f32).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_u16(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(unsafe { words16(p) }))
}

/// Loads 16 i32, rounded to nearest even.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_i32(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    _mm512_cvt_roundepi32_ps::<RNE>(unsafe { dwords16(p) })
}

/// Loads 16 u32, rounded to nearest even.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_u32(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    _mm512_cvt_roundepu32_ps::<RNE>(unsafe { dwords16(p) })
}

/// Loads 16 bools: 1.0 for a nonzero byte, else 0.0.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld16_bool(p: *const u8) -> __m512 {
    // SAFETY: forwarded to the caller.
    let x = _mm512_cvtepu8_epi32(unsafe { bytes16(p) });
    let nonzero = _mm512_test_epi32_mask(x, x);
    _mm512_castsi512_ps(_mm512_maskz_mov_epi32(nonzero, s512(0x3f80_0000)))
}

// ---- AVX-512 stores ----

/// Stores 16 f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_f32(p: *mut u8, v: __m512) {
    // SAFETY: the caller guarantees 64 writable bytes at `p`; the store is unaligned.
    unsafe { _mm512_storeu_ps(p.cast(), v) }
}

/// The model's f32 → bf16 rounding with integer operations (AVX-512F).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(in crate::cpu) fn f32_to_bf16_x16(v: __m512) -> __m256i {
    let bits = _mm512_castps_si512(v);
    let abs = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fff_ffff));
    let nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f80_0000));
    let sub = _mm512_cmplt_epu32_mask(abs, _mm512_set1_epi32(0x0080_0000));
    let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
    let r = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), lsb);
    let r = _mm512_mask_or_epi32(r, nan, bits, _mm512_set1_epi32(0x0040_0000));
    let r = _mm512_mask_and_epi32(r, sub, bits, _mm512_set1_epi32(i32::MIN));
    _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(r))
}

/// Narrows 16 f32 to bf16 with integer operations and stores them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_bf16(p: *mut u8, v: __m512) {
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), f32_to_bf16_x16(v)) }
}

/// The model's f32 → bf16 rounding with `vcvtneps2bf16` (AVX512_BF16), which follows it
/// natively (round to nearest even, subnormals flushed, NaNs quieted).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(in crate::cpu) fn f32_to_bf16_hw_x16(v: __m512) -> __m256i {
    // SAFETY: `__m256bh` and `__m256i` are both plain 256-bit vectors.
    unsafe { transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(v)) }
}

/// Narrows 16 f32 to bf16 with `vcvtneps2bf16` and stores them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn st16_bf16_hw(p: *mut u8, v: __m512) {
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), f32_to_bf16_hw_x16(v)) }
}

/// Narrows 16 f32 to f16 (`vcvtps2ph`, round to nearest even) and stores them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_f16(p: *mut u8, v: __m512) {
    let h = _mm512_cvtps_ph::<RNE>(v);
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), h) }
}

/// Narrows 16 f32 to tf32 containers (bf16's integer rounding at bit 13) and stores them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_tf32(p: *mut u8, v: __m512) {
    let bits = _mm512_castps_si512(v);
    let abs = _mm512_and_si512(bits, s512(0x7fff_ffff));
    let nan = _mm512_cmpgt_epu32_mask(abs, s512(0x7f80_0000));
    let sub = _mm512_cmplt_epu32_mask(abs, s512(0x0080_0000));
    let lsb = _mm512_and_si512(_mm512_srli_epi32::<13>(bits), s512(1));
    let r = _mm512_add_epi32(_mm512_add_epi32(bits, s512(0x0fff)), lsb);
    let r = _mm512_mask_or_epi32(r, nan, bits, s512(0x0040_0000));
    let r = _mm512_mask_and_epi32(r, sub, bits, s512(0x8000_0000));
    // SAFETY: forwarded to the caller.
    unsafe { put_dwords16(p, _mm512_and_si512(r, s512(0xffff_e000))) }
}

/// Narrows 16 f32 to the 8-bit format `f` ([`MiniFloat::encode`]); one code per lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn f32_to_mini_x16(v: __m512, f: MiniFloat) -> __m512i {
    let (m, bias) = (f.m, f.bias());
    let shift = 23 - m;
    let bits = _mm512_castps_si512(v);
    let abs = _mm512_and_si512(bits, s512(0x7fff_ffff));
    // At least the smallest normal: rebias, round at bit `shift`, clamp at inf.
    let r = _mm512_sub_epi32(abs, s512((127 - bias) << 23));
    let lsb = _mm512_and_si512(srl512(r, shift), s512(1));
    let r = _mm512_add_epi32(_mm512_add_epi32(r, s512((1 << (shift - 1)) - 1)), lsb);
    let r = _mm512_min_epu32(srl512(r, shift), s512(f.inf()));
    // Below it: |x| + 2^(23 + 1 − bias − m) lands in a binade whose ulp is the format's
    // quantum 2^(1 − bias − m), so the addition rounds |x| to a whole number of quanta.
    let c = f32::from_bits((151 - bias - m) << 23);
    let sum = _mm512_add_round_ps::<RNE>(_mm512_castsi512_ps(abs), _mm512_set1_ps(c));
    let q = _mm512_sub_epi32(_mm512_castps_si512(sum), s512(c.to_bits()));
    let tiny = _mm512_cmplt_epu32_mask(abs, s512((128 - bias) << 23));
    let r = _mm512_mask_mov_epi32(r, tiny, q);
    // NaN: inf | quiet | top payload bits.
    let nan = _mm512_cmpgt_epu32_mask(abs, s512(0x7f80_0000));
    let payload = _mm512_and_si512(srl512(abs, shift), s512((1 << m) - 1));
    let nan_code = _mm512_or_si512(payload, s512(f.inf() | (1 << (m - 1))));
    let r = _mm512_mask_mov_epi32(r, nan, nan_code);
    let sign = _mm512_and_si512(_mm512_srli_epi32::<24>(bits), s512(0x80));
    _mm512_or_si512(r, sign)
}

/// Narrows 16 f32 to e4m3 and stores them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_e4m3(p: *mut u8, v: __m512) {
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes16(p, f32_to_mini_x16(v, E4M3)) }
}

/// Narrows 16 f32 to e5m2 and stores them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_e5m2(p: *mut u8, v: __m512) {
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes16(p, f32_to_mini_x16(v, E5M2)) }
}

/// NaN → 0, clamps to `[lo, hi]` (integers), rounds to nearest even.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn to_int_x16(v: __m512, lo: f32, hi: f32) -> __m512i {
    let v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v), v);
    let v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(lo)), _mm512_set1_ps(hi));
    _mm512_cvt_roundps_epi32::<RNE>(v)
}

/// Stores 16 f32 as i8.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_i8(p: *mut u8, v: __m512) {
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes16(p, to_int_x16(v, -128.0, 127.0)) }
}

/// Stores 16 f32 as u8.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_u8(p: *mut u8, v: __m512) {
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes16(p, to_int_x16(v, 0.0, 255.0)) }
}

/// Stores 16 f32 as i16.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_i16(p: *mut u8, v: __m512) {
    // SAFETY: forwarded to the caller.
    unsafe { put_words16(p, to_int_x16(v, -32768.0, 32767.0)) }
}

/// Stores 16 f32 as u16.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_u16(p: *mut u8, v: __m512) {
    // SAFETY: forwarded to the caller.
    unsafe { put_words16(p, to_int_x16(v, 0.0, 65535.0)) }
}

/// Stores 16 f32 as i32: ≥ 2^31 saturates explicitly, ≤ -2^31 gives the conversion's
/// `0x8000_0000`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_i32(p: *mut u8, v: __m512) {
    let v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v), v);
    let i = _mm512_cvt_roundps_epi32::<RNE>(v);
    let big = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(v, _mm512_set1_ps(2_147_483_648.0));
    // SAFETY: forwarded to the caller.
    unsafe { put_dwords16(p, _mm512_mask_mov_epi32(i, big, s512(i32::MAX as u32))) }
}

/// Stores 16 f32 as u32: negatives clamp to 0, ≥ 2^32 gives the conversion's `u32::MAX`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_u32(p: *mut u8, v: __m512) {
    let v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v), v);
    let v = _mm512_max_ps(v, _mm512_setzero_ps());
    // SAFETY: forwarded to the caller.
    unsafe { put_dwords16(p, _mm512_cvt_roundps_epu32::<RNE>(v)) }
}

/// Stores 16 f32 as bools: 0 for ±0.0, else 1 (NaN included).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn st16_bool(p: *mut u8, v: __m512) {
    // Integer test of the magnitude bits: a subnormal is nonzero even under DAZ.
    let nonzero = _mm512_test_epi32_mask(_mm512_castps_si512(v), s512(0x7fff_ffff));
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes16(p, _mm512_maskz_mov_epi32(nonzero, s512(1))) }
}

// ==== AVX2: 8 lanes ====

/// Splats a u32 bit pattern.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn s256(x: u32) -> __m256i {
    _mm256_set1_epi32(x as i32)
}

/// Logical right shift of every lane by `n` (a constant after inlining).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn srl256(v: __m256i, n: u32) -> __m256i {
    _mm256_srl_epi32(v, _mm_cvtsi32_si128(n as i32))
}

/// All-ones lanes where `v` is NaN.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn nan8(v: __m256) -> __m256i {
    _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v))
}

/// All-ones lanes where `|v| < limit` (a normal number; NaN is not below). Float compares
/// rather than integer ones on the magnitude bits: LLVM turns the latter into unsigned
/// compares, which AVX2 lacks (two instructions each). The result does not depend on DAZ:
/// a subnormal is below `limit` either way.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn below8(v: __m256, limit: f32) -> __m256i {
    let abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0), v);
    _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LT_OQ>(abs, _mm256_set1_ps(limit)))
}

/// Loads 8 bytes.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn bytes8(p: *const u8) -> __m128i {
    // SAFETY: the caller guarantees 8 readable bytes at `p`; the load is unaligned.
    unsafe { _mm_loadl_epi64(p.cast()) }
}

/// Loads 8 two-byte elements.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn words8(p: *const u8) -> __m128i {
    // SAFETY: the caller guarantees 16 readable bytes at `p`; the load is unaligned.
    unsafe { _mm_loadu_si128(p.cast()) }
}

/// Loads 8 four-byte elements.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dwords8(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 32 readable bytes at `p`; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// Stores the low byte of every lane (8 bytes).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn put_bytes8(p: *mut u8, v: __m256i) {
    // Lanes hold 0..=255 after the mask, so both packs are exact. packus works per 128-bit
    // half: bytes 0..4 hold lanes 0..4 and bytes 16..20 lanes 4..8; gather those dwords.
    let v = _mm256_and_si256(v, s256(0xff));
    let b = _mm256_packus_epi16(_mm256_packus_epi32(v, v), v);
    let b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
    // SAFETY: the caller guarantees 8 writable bytes at `p`; the store is unaligned.
    unsafe { _mm_storel_epi64(p.cast(), _mm256_castsi256_si128(b)) }
}

/// Stores the low two bytes of every lane (16 bytes).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn put_words8(p: *mut u8, v: __m256i) {
    // packus works per 128-bit half: [w0..w3 w0..w3 | w4..w7 w4..w7]; gather quadwords 0, 2.
    let v = _mm256_and_si256(v, s256(0xffff));
    let w = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(v, v));
    // SAFETY: the caller guarantees 16 writable bytes at `p`; the store is unaligned.
    unsafe { _mm_storeu_si128(p.cast(), _mm256_castsi256_si128(w)) }
}

/// Stores 8 four-byte lanes (32 bytes).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn put_dwords8(p: *mut u8, v: __m256i) {
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), v) }
}

// ---- AVX2 loads ----

/// Loads 8 f32.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_f32(p: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 32 readable bytes at `p`; the load is unaligned.
    unsafe { _mm256_loadu_ps(p.cast()) }
}

/// Loads 8 tf32 containers (low 13 bits cleared).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_tf32(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    let v = unsafe { dwords8(p) };
    _mm256_castsi256_ps(_mm256_and_si256(v, s256(0xffff_e000)))
}

/// Loads 8 bf16 and widens them exactly.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_bf16(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    let h = unsafe { words8(p) };
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
}

/// Loads 8 f16 and widens them exactly.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ld8_f16(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    _mm256_cvtph_ps(unsafe { words8(p) })
}

/// Loads 8 e4m3 and widens them exactly (as [`e4m3_x16`]).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_e4m3(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    let x = _mm256_cvtepu8_epi32(unsafe { bytes8(p) });
    let a = _mm256_and_si256(x, s256(0x7f));
    let normal = _mm256_add_epi32(_mm256_slli_epi32::<20>(a), s256(120 << 23));
    let sub = _mm256_mul_ps(_mm256_cvtepi32_ps(a), _mm256_set1_ps(1.0 / 512.0));
    let is_sub = _mm256_cmpgt_epi32(s256(8), a);
    let r = _mm256_blendv_epi8(normal, _mm256_castps_si256(sub), is_sub);
    let special = _mm256_or_si256(
        s256(0x7f80_0000),
        _mm256_and_si256(_mm256_slli_epi32::<20>(a), s256(0x0070_0000)),
    );
    let quiet = _mm256_and_si256(_mm256_cmpgt_epi32(a, s256(0x78)), s256(0x0040_0000));
    let special = _mm256_or_si256(special, quiet);
    let r = _mm256_blendv_epi8(r, special, _mm256_cmpgt_epi32(a, s256(0x77)));
    let sign = _mm256_slli_epi32::<24>(_mm256_and_si256(x, s256(0x80)));
    _mm256_castsi256_ps(_mm256_or_si256(r, sign))
}

/// Loads 8 e5m2 and widens them exactly (the f16 `bits << 8`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ld8_e5m2(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    let b = unsafe { bytes8(p) };
    _mm256_cvtph_ps(_mm_slli_epi16::<8>(_mm_cvtepu8_epi16(b)))
}

/// Loads 8 i8.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_i8(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(unsafe { bytes8(p) }))
}

/// Loads 8 u8.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_u8(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(unsafe { bytes8(p) }))
}

/// Loads 8 i16.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_i16(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(unsafe { words8(p) }))
}

/// Loads 8 u16.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_u16(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(unsafe { words8(p) }))
}

/// Loads 8 i32, rounded to nearest even (MXCSR's default).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_i32(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    _mm256_cvtepi32_ps(unsafe { dwords8(p) })
}

/// Loads 8 u32, rounded to nearest even: `hi · 2^16` (exact) `+ lo` rounds once.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_u32(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    let x = unsafe { dwords8(p) };
    let hi = _mm256_cvtepi32_ps(_mm256_srli_epi32::<16>(x));
    let lo = _mm256_cvtepi32_ps(_mm256_and_si256(x, s256(0xffff)));
    _mm256_add_ps(_mm256_mul_ps(hi, _mm256_set1_ps(65536.0)), lo)
}

/// Loads 8 bools: 1.0 for a nonzero byte, else 0.0.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn ld8_bool(p: *const u8) -> __m256 {
    // SAFETY: forwarded to the caller.
    let x = _mm256_cvtepu8_epi32(unsafe { bytes8(p) });
    let zero = _mm256_cmpeq_epi32(x, _mm256_setzero_si256());
    _mm256_castsi256_ps(_mm256_andnot_si256(zero, s256(0x3f80_0000)))
}

// ---- AVX2 stores ----

/// Stores 8 f32.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_f32(p: *mut u8, v: __m256) {
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_ps(p.cast(), v) }
}

/// Narrows 8 f32 to bf16 with integer operations (the model's rounding: to nearest even,
/// subnormals flushed, NaNs quieted), in the low 128 bits.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(in crate::cpu) fn f32_to_bf16_x8(v: __m256) -> __m128i {
    let bits = _mm256_castps_si256(v);
    let (nan, sub) = (nan8(v), below8(v, f32::MIN_POSITIVE));
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
    let r = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb);
    let quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x0040_0000));
    let r = _mm256_blendv_epi8(r, quiet, nan);
    let zero = _mm256_and_si256(bits, _mm256_set1_epi32(i32::MIN));
    let r = _mm256_blendv_epi8(r, zero, sub);
    let r = _mm256_srli_epi32::<16>(r);
    // packus works per 128-bit lane: [r0..r3 r0..r3 | r4..r7 r4..r7]; gather quadwords 0 and 2.
    let packed = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(r, r));
    _mm256_castsi256_si128(packed)
}

/// Narrows 8 f32 to bf16 with integer operations and stores them.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_bf16(p: *mut u8, v: __m256) {
    // SAFETY: the caller guarantees 16 writable bytes at `p`; the store is unaligned.
    unsafe { _mm_storeu_si128(p.cast(), f32_to_bf16_x8(v)) }
}

/// Narrows 8 f32 to f16 (`vcvtps2ph`, round to nearest even) and stores them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn st8_f16(p: *mut u8, v: __m256) {
    let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
    // SAFETY: the caller guarantees 16 writable bytes at `p`; the store is unaligned.
    unsafe { _mm_storeu_si128(p.cast(), h) }
}

/// Narrows 8 f32 to tf32 containers and stores them.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_tf32(p: *mut u8, v: __m256) {
    let bits = _mm256_castps_si256(v);
    let (nan, sub) = (nan8(v), below8(v, f32::MIN_POSITIVE));
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<13>(bits), s256(1));
    let r = _mm256_add_epi32(_mm256_add_epi32(bits, s256(0x0fff)), lsb);
    let r = _mm256_blendv_epi8(r, _mm256_or_si256(bits, s256(0x0040_0000)), nan);
    let r = _mm256_blendv_epi8(r, _mm256_and_si256(bits, s256(0x8000_0000)), sub);
    // SAFETY: forwarded to the caller.
    unsafe { put_dwords8(p, _mm256_and_si256(r, s256(0xffff_e000))) }
}

/// Narrows 8 f32 to the 8-bit format `f` (as [`f32_to_mini_x16`]).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn f32_to_mini_x8(v: __m256, f: MiniFloat) -> __m256i {
    let (m, bias) = (f.m, f.bias());
    let shift = 23 - m;
    let bits = _mm256_castps_si256(v);
    let abs = _mm256_and_si256(bits, s256(0x7fff_ffff));
    let r = _mm256_sub_epi32(abs, s256((127 - bias) << 23));
    let lsb = _mm256_and_si256(srl256(r, shift), s256(1));
    let r = _mm256_add_epi32(_mm256_add_epi32(r, s256((1 << (shift - 1)) - 1)), lsb);
    let r = _mm256_min_epu32(srl256(r, shift), s256(f.inf()));
    let c = f32::from_bits((151 - bias - m) << 23);
    let sum = _mm256_add_ps(_mm256_castsi256_ps(abs), _mm256_set1_ps(c));
    let q = _mm256_sub_epi32(_mm256_castps_si256(sum), s256(c.to_bits()));
    let tiny = below8(v, f32::from_bits((128 - bias) << 23));
    let r = _mm256_blendv_epi8(r, q, tiny);
    let nan = nan8(v);
    let payload = _mm256_and_si256(srl256(abs, shift), s256((1 << m) - 1));
    let nan_code = _mm256_or_si256(payload, s256(f.inf() | (1 << (m - 1))));
    let r = _mm256_blendv_epi8(r, nan_code, nan);
    let sign = _mm256_and_si256(_mm256_srli_epi32::<24>(bits), s256(0x80));
    _mm256_or_si256(r, sign)
}

/// Narrows 8 f32 to e4m3 and stores them.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_e4m3(p: *mut u8, v: __m256) {
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes8(p, f32_to_mini_x8(v, E4M3)) }
}

/// Narrows 8 f32 to e5m2 and stores them.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_e5m2(p: *mut u8, v: __m256) {
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes8(p, f32_to_mini_x8(v, E5M2)) }
}

/// NaN → 0 (an ordered compare's mask clears it).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn nan_to_zero8(v: __m256) -> __m256 {
    _mm256_and_ps(v, _mm256_cmp_ps::<_CMP_ORD_Q>(v, v))
}

/// NaN → 0, clamps to `[lo, hi]` (integers), rounds to nearest even.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn to_int_x8(v: __m256, lo: f32, hi: f32) -> __m256i {
    let v = nan_to_zero8(v);
    let v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(lo)), _mm256_set1_ps(hi));
    _mm256_cvtps_epi32(v)
}

/// Stores 8 f32 as i8.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_i8(p: *mut u8, v: __m256) {
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes8(p, to_int_x8(v, -128.0, 127.0)) }
}

/// Stores 8 f32 as u8.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_u8(p: *mut u8, v: __m256) {
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes8(p, to_int_x8(v, 0.0, 255.0)) }
}

/// Stores 8 f32 as i16.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_i16(p: *mut u8, v: __m256) {
    // SAFETY: forwarded to the caller.
    unsafe { put_words8(p, to_int_x8(v, -32768.0, 32767.0)) }
}

/// Stores 8 f32 as u16.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_u16(p: *mut u8, v: __m256) {
    // SAFETY: forwarded to the caller.
    unsafe { put_words8(p, to_int_x8(v, 0.0, 65535.0)) }
}

/// Stores 8 f32 as i32 (as [`st16_i32`]).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_i32(p: *mut u8, v: __m256) {
    let v = nan_to_zero8(v);
    let i = _mm256_cvtps_epi32(v);
    let big = _mm256_cmp_ps::<_CMP_GE_OQ>(v, _mm256_set1_ps(2_147_483_648.0));
    let i = _mm256_blendv_epi8(i, s256(i32::MAX as u32), _mm256_castps_si256(big));
    // SAFETY: forwarded to the caller.
    unsafe { put_dwords8(p, i) }
}

/// Stores 8 f32 as u32: below 2^31 a signed conversion; in `[2^31, 2^32)` the value is an
/// integer and `x − 2^31` is exact; from 2^32 on `u32::MAX`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_u32(p: *mut u8, v: __m256) {
    let v = _mm256_max_ps(nan_to_zero8(v), _mm256_setzero_ps());
    let two31 = _mm256_set1_ps(2_147_483_648.0);
    let low = _mm256_cvtps_epi32(v);
    let high = _mm256_xor_si256(
        _mm256_cvtps_epi32(_mm256_sub_ps(v, two31)),
        s256(0x8000_0000),
    );
    let i = _mm256_blendv_epi8(
        low,
        high,
        _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(v, two31)),
    );
    let max = _mm256_cmp_ps::<_CMP_GE_OQ>(v, _mm256_set1_ps(4_294_967_296.0));
    let i = _mm256_or_si256(i, _mm256_castps_si256(max));
    // SAFETY: forwarded to the caller.
    unsafe { put_dwords8(p, i) }
}

/// Stores 8 f32 as bools: 0 for ±0.0, else 1 (NaN included).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn st8_bool(p: *mut u8, v: __m256) {
    // Integer test of the magnitude bits: a subnormal is nonzero even under DAZ.
    let abs = _mm256_and_si256(_mm256_castps_si256(v), s256(0x7fff_ffff));
    let zero = _mm256_cmpeq_epi32(abs, _mm256_setzero_si256());
    let b = _mm256_andnot_si256(zero, s256(1));
    // SAFETY: forwarded to the caller.
    unsafe { put_bytes8(p, b) }
}

// ==== The loops ====

/// One dtype's AVX-512 load (16 elements → 16 f32 lanes) and store (16 f32 lanes → 16
/// elements).
trait Lanes512 {
    /// Bytes per element.
    const SIZE: usize;
    /// Loads 16 elements from `p` into f32 lanes.
    ///
    /// # Safety
    /// `16 · SIZE` readable bytes at `p`; the CPU has AVX-512 F/BW/VL.
    unsafe fn load(p: *const u8) -> __m512;
    /// Stores 16 f32 lanes as elements at `p`.
    ///
    /// # Safety
    /// `16 · SIZE` writable bytes at `p`; the CPU has AVX-512 F/BW/VL (and AVX512_BF16 for
    /// [`v512::Bf16Hw`]).
    unsafe fn store(p: *mut u8, v: __m512);
}

/// One dtype's AVX2 load (8 elements → 8 f32 lanes) and store.
trait Lanes256 {
    /// Bytes per element.
    const SIZE: usize;
    /// Loads 8 elements from `p` into f32 lanes.
    ///
    /// # Safety
    /// `8 · SIZE` readable bytes at `p`; the CPU has AVX2, FMA and F16C.
    unsafe fn load(p: *const u8) -> __m256;
    /// Stores 8 f32 lanes as elements at `p`.
    ///
    /// # Safety
    /// `8 · SIZE` writable bytes at `p`; the CPU has AVX2, FMA and F16C.
    unsafe fn store(p: *mut u8, v: __m256);
}

/// Defines, per dtype, a type implementing `$trait` with the given load and store.
macro_rules! lanes {
    ($trait:ident, $v:ty, $features:literal; $($name:ident: $size:literal, $ld:ident, $st:ident;)*) => {
        $(
            #[doc = concat!("`", stringify!($ld), "` and `", stringify!($st), "`.")]
            pub(super) struct $name;
            impl super::$trait for $name {
                const SIZE: usize = $size;
                #[inline]
                #[target_feature(enable = $features)]
                unsafe fn load(p: *const u8) -> $v {
                    // SAFETY: forwarded to the caller.
                    unsafe { super::$ld(p) }
                }
                #[inline]
                #[target_feature(enable = $features)]
                unsafe fn store(p: *mut u8, v: $v) {
                    // SAFETY: forwarded to the caller.
                    unsafe { super::$st(p, v) }
                }
            }
        )*
    };
}

/// The AVX-512 loads and stores, per dtype.
mod v512 {
    use core::arch::x86_64::__m512;

    lanes! {
        Lanes512, __m512, "avx512f,avx512bw,avx512vl";
        F32: 4, ld16_f32, st16_f32;
        Tf32: 4, ld16_tf32, st16_tf32;
        Bf16: 2, ld16_bf16, st16_bf16;
        F16: 2, ld16_f16, st16_f16;
        E4M3: 1, ld16_e4m3, st16_e4m3;
        E5M2: 1, ld16_e5m2, st16_e5m2;
        I8: 1, ld16_i8, st16_i8;
        I16: 2, ld16_i16, st16_i16;
        I32: 4, ld16_i32, st16_i32;
        U8: 1, ld16_u8, st16_u8;
        U16: 2, ld16_u16, st16_u16;
        U32: 4, ld16_u32, st16_u32;
        Bool: 1, ld16_bool, st16_bool;
    }

    lanes! {
        Lanes512, __m512, "avx512f,avx512bw,avx512vl,avx512bf16";
        Bf16Hw: 2, ld16_bf16, st16_bf16_hw;
    }
}

/// The AVX2 loads and stores, per dtype.
mod v256 {
    use core::arch::x86_64::__m256;

    lanes! {
        Lanes256, __m256, "avx2,fma,f16c";
        F32: 4, ld8_f32, st8_f32;
        Tf32: 4, ld8_tf32, st8_tf32;
        Bf16: 2, ld8_bf16, st8_bf16;
        F16: 2, ld8_f16, st8_f16;
        E4M3: 1, ld8_e4m3, st8_e4m3;
        E5M2: 1, ld8_e5m2, st8_e5m2;
        I8: 1, ld8_i8, st8_i8;
        I16: 2, ld8_i16, st8_i16;
        I32: 4, ld8_i32, st8_i32;
        U8: 1, ld8_u8, st8_u8;
        U16: 2, ld8_u16, st8_u16;
        U32: 4, ld8_u32, st8_u32;
        Bool: 1, ld8_bool, st8_bool;
    }
}

/// Defines a generic loop converting whole vectors of `$lanes` elements, `D::store(S::load(·))`;
/// it returns how many elements it converted (the rest is the caller's tail).
macro_rules! fused_loop {
    ($(#[$doc:meta])* $name:ident, $trait:ident, $features:literal, $lanes:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The CPU has the features the loop is compiled with.
        #[target_feature(enable = $features)]
        unsafe fn $name<S: $trait, D: $trait>(src: &[u8], dst: &mut [u8]) -> usize {
            let n = (src.len() / S::SIZE).min(dst.len() / D::SIZE) / $lanes * $lanes;
            let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
            for i in (0..n).step_by($lanes) {
                // SAFETY: `i + $lanes <= n`, and `n` whole elements fit in both slices; the
                // caller guarantees the features.
                unsafe { D::store(d.add(i * D::SIZE), S::load(s.add(i * S::SIZE))) };
            }
            n
        }
    };
}

fused_loop!(
    /// The AVX-512 loop.
    fused512, Lanes512, "avx512f,avx512bw,avx512vl", 16
);
fused_loop!(
    /// The AVX-512 loop with AVX512_BF16 (for [`v512::Bf16Hw`] stores).
    fused512_bf16, Lanes512, "avx512f,avx512bw,avx512vl,avx512bf16", 16
);
fused_loop!(
    /// The AVX2 loop.
    fused256, Lanes256, "avx2,fma,f16c", 8
);
