//! x86-64 vector paths of [`super::convert`]: whole vectors of 16 (AVX-512) or 8 (AVX2)
//! elements, then the portable scalar loop for the tail. Bit-identical to the portable path.

use core::arch::x86_64::*;
use core::mem::transmute;

use nki_lang::DType;

use super::Isa;
use super::convert::{elem_size, portable};

/// Converts `src` (whole elements of `s`) into `dst` (as many elements of `d`), `s != d`.
///
/// # Safety
/// The CPU must support `isa` (and `isa` is not [`Isa::Portable`]).
pub(super) unsafe fn convert(isa: Isa, src: &[u8], s: DType, dst: &mut [u8], d: DType) {
    use DType::{Bf16, F16, F32};
    // SAFETY: the caller guarantees the CPU supports `isa`, whose detection covers every
    // feature the functions called below enable (`f16c` is checked where AVX2 uses it).
    let done = unsafe {
        match isa {
            Isa::Avx512Bf16 | Isa::Avx512 => {
                let hw_bf16 = isa == Isa::Avx512Bf16;
                match (s, d) {
                    (Bf16, F32) => v512_bf16_f32(src, dst),
                    (F16, F32) => v512_f16_f32(src, dst),
                    (F32, Bf16) if hw_bf16 => v512_f32_bf16_hw(src, dst),
                    (F32, Bf16) => v512_f32_bf16(src, dst),
                    (F32, F16) => v512_f32_f16(src, dst),
                    (Bf16, F16) => v512_bf16_f16(src, dst),
                    (F16, Bf16) if hw_bf16 => v512_f16_bf16_hw(src, dst),
                    (F16, Bf16) => v512_f16_bf16(src, dst),
                    _ => 0,
                }
            }
            Isa::Avx2Fma => {
                let f16c = std::is_x86_feature_detected!("f16c");
                match (s, d) {
                    (Bf16, F32) => v256_bf16_f32(src, dst),
                    (F32, Bf16) => v256_f32_bf16(src, dst),
                    (F16, F32) if f16c => v256_f16_f32(src, dst),
                    (F32, F16) if f16c => v256_f32_f16(src, dst),
                    (Bf16, F16) if f16c => v256_bf16_f16(src, dst),
                    (F16, Bf16) if f16c => v256_f16_bf16(src, dst),
                    _ => 0,
                }
            }
            Isa::Portable => 0,
        }
    };
    portable(
        &src[done * elem_size(s)..],
        s,
        &mut dst[done * elem_size(d)..],
        d,
    );
}

// ---- 16-lane AVX-512 loads (widen to f32) and stores (narrow from f32) ----

/// Loads 16 bf16 and widens them exactly (`bits << 16`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn load16_bf16(p: *const u8) -> __m512 {
    // SAFETY: the caller guarantees 32 readable bytes at `p`; the load is unaligned.
    let h = unsafe { _mm256_loadu_si256(p.cast()) };
    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
}

/// Loads 16 f16 and widens them exactly (`vcvtph2ps`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn load16_f16(p: *const u8) -> __m512 {
    // SAFETY: the caller guarantees 32 readable bytes at `p`; the load is unaligned.
    _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(p.cast()) })
}

/// Loads 16 f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn load16_f32(p: *const u8) -> __m512 {
    // SAFETY: the caller guarantees 64 readable bytes at `p`; the load is unaligned.
    unsafe { _mm512_loadu_ps(p.cast()) }
}

/// Stores 16 f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn store16_f32(p: *mut u8, v: __m512) {
    // SAFETY: the caller guarantees 64 writable bytes at `p`; the store is unaligned.
    unsafe { _mm512_storeu_ps(p.cast(), v) }
}

/// The model's f32 → bf16 rounding with integer operations (AVX-512F).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) fn f32_to_bf16_x16(v: __m512) -> __m256i {
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
unsafe fn store16_bf16(p: *mut u8, v: __m512) {
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), f32_to_bf16_x16(v)) }
}

/// Narrows 16 f32 to bf16 with `vcvtneps2bf16` and stores them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn store16_bf16_hw(p: *mut u8, v: __m512) {
    // SAFETY: `__m256bh` and `__m256i` are both plain 256-bit vectors.
    let h: __m256i = unsafe { transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(v)) };
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), h) }
}

/// Narrows 16 f32 to f16 (`vcvtps2ph`, round to nearest even) and stores them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn store16_f16(p: *mut u8, v: __m512) {
    let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), h) }
}

// ---- 8-lane AVX2 loads and stores ----

/// Loads 8 bf16 and widens them exactly.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load8_bf16(p: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 16 readable bytes at `p`; the load is unaligned.
    let h = unsafe { _mm_loadu_si128(p.cast()) };
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
}

/// Loads 8 f16 and widens them exactly.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load8_f16(p: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 16 readable bytes at `p`; the load is unaligned.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(p.cast()) })
}

/// Loads 8 f32.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load8_f32(p: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 32 readable bytes at `p`; the load is unaligned.
    unsafe { _mm256_loadu_ps(p.cast()) }
}

/// Stores 8 f32.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn store8_f32(p: *mut u8, v: __m256) {
    // SAFETY: the caller guarantees 32 writable bytes at `p`; the store is unaligned.
    unsafe { _mm256_storeu_ps(p.cast(), v) }
}

/// Narrows 8 f32 to bf16 with integer operations and stores them.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn store8_bf16(p: *mut u8, v: __m256) {
    let bits = _mm256_castps_si256(v);
    let abs = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fff_ffff));
    let nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f80_0000));
    let sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x0080_0000), abs);
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
    let r = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb);
    let quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x0040_0000));
    let r = _mm256_blendv_epi8(r, quiet, nan);
    let zero = _mm256_and_si256(bits, _mm256_set1_epi32(i32::MIN));
    let r = _mm256_blendv_epi8(r, zero, sub);
    let r = _mm256_srli_epi32::<16>(r);
    // packus works per 128-bit lane: [r0..r3 r0..r3 | r4..r7 r4..r7]; gather quadwords 0 and 2.
    let packed = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(r, r));
    // SAFETY: the caller guarantees 16 writable bytes at `p`; the store is unaligned.
    unsafe { _mm_storeu_si128(p.cast(), _mm256_castsi256_si128(packed)) }
}

/// Narrows 8 f32 to f16 (`vcvtps2ph`, round to nearest even) and stores them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn store8_f16(p: *mut u8, v: __m256) {
    let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
    // SAFETY: the caller guarantees 16 writable bytes at `p`; the store is unaligned.
    unsafe { _mm_storeu_si128(p.cast(), h) }
}

/// Defines a loop converting whole vectors of `$lanes` elements with a load and a store
/// function; it returns how many elements it converted (the rest is the caller's tail).
macro_rules! vector_loop {
    ($name:ident, $features:literal, $lanes:literal, $load:ident, $in:literal, $store:ident, $out:literal) => {
        #[target_feature(enable = $features)]
        unsafe fn $name(src: &[u8], dst: &mut [u8]) -> usize {
            let n = (src.len() / $in).min(dst.len() / $out) / $lanes * $lanes;
            let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
            for i in (0..n).step_by($lanes) {
                // SAFETY: `i + $lanes <= n`, and `n` whole elements fit in both slices.
                unsafe { $store(d.add(i * $out), $load(s.add(i * $in))) };
            }
            n
        }
    };
}

vector_loop!(
    v512_bf16_f32,
    "avx512f,avx512bw,avx512vl",
    16,
    load16_bf16,
    2,
    store16_f32,
    4
);
vector_loop!(
    v512_f16_f32,
    "avx512f,avx512bw,avx512vl",
    16,
    load16_f16,
    2,
    store16_f32,
    4
);
vector_loop!(
    v512_f32_bf16,
    "avx512f,avx512bw,avx512vl",
    16,
    load16_f32,
    4,
    store16_bf16,
    2
);
vector_loop!(
    v512_f32_bf16_hw,
    "avx512f,avx512bw,avx512vl,avx512bf16",
    16,
    load16_f32,
    4,
    store16_bf16_hw,
    2
);
vector_loop!(
    v512_f32_f16,
    "avx512f,avx512bw,avx512vl",
    16,
    load16_f32,
    4,
    store16_f16,
    2
);
vector_loop!(
    v512_bf16_f16,
    "avx512f,avx512bw,avx512vl",
    16,
    load16_bf16,
    2,
    store16_f16,
    2
);
vector_loop!(
    v512_f16_bf16,
    "avx512f,avx512bw,avx512vl",
    16,
    load16_f16,
    2,
    store16_bf16,
    2
);
vector_loop!(
    v512_f16_bf16_hw,
    "avx512f,avx512bw,avx512vl,avx512bf16",
    16,
    load16_f16,
    2,
    store16_bf16_hw,
    2
);
vector_loop!(v256_bf16_f32, "avx2,fma", 8, load8_bf16, 2, store8_f32, 4);
vector_loop!(v256_f32_bf16, "avx2,fma", 8, load8_f32, 4, store8_bf16, 2);
vector_loop!(
    v256_f16_f32,
    "avx2,fma,f16c",
    8,
    load8_f16,
    2,
    store8_f32,
    4
);
vector_loop!(
    v256_f32_f16,
    "avx2,fma,f16c",
    8,
    load8_f32,
    4,
    store8_f16,
    2
);
vector_loop!(
    v256_bf16_f16,
    "avx2,fma,f16c",
    8,
    load8_bf16,
    2,
    store8_f16,
    2
);
vector_loop!(
    v256_f16_bf16,
    "avx2,fma,f16c",
    8,
    load8_f16,
    2,
    store8_bf16,
    2
);
