//! x86-64 vector paths of [`super::act`]: the generic definitions instantiated on 16 lanes
//! (AVX-512) or 8 lanes (AVX2 + FMA), whole vectors first, then the scalar definition for the
//! tail. Every lane operation is the IEEE operation the scalar definition performs, in the same
//! order, so the results are bit-identical.
//!
//! The lane types ([`V16`], [`V8`], [`D8`], [`D4`]) are private to this module and only ever
//! created inside [`apply`] and [`apply_pow`], whose callers guarantee that the CPU supports
//! the [`Isa`] (the module invariant behind every `unsafe` block below). Their methods are
//! `#[inline(always)]`, so they compile into the `#[target_feature]` loops that use them.

use core::arch::x86_64::*;
use core::mem::transmute;
use core::ops::{Add, Div, Mul, Neg, Sub};

use nki_lang::ActFn;

use super::{F64Kernel, Isa, Simd, SimdF64, act_affine, portable, portable_pow, pow_v};

/// Runs a block of intrinsics.
macro_rules! avx {
    ($e:expr) => {
        // SAFETY: the lane types exist only inside loops entered after run-time detection of
        // the features these intrinsics need (the module invariant).
        unsafe { $e }
    };
}

/// 16 f32 lanes in a zmm register.
#[derive(Copy, Clone)]
struct V16(__m512);
/// 8 f32 lanes in a ymm register.
#[derive(Copy, Clone)]
struct V8(__m256);
/// 8 f64 lanes in a zmm register.
#[derive(Copy, Clone)]
struct D8(__m512d);
/// 4 f64 lanes in a ymm register.
#[derive(Copy, Clone)]
struct D4(__m256d);

/// Implements the arithmetic operators of a lane type with the given intrinsics.
macro_rules! ops {
    ($t:ident, $add:ident, $sub:ident, $mul:ident, $div:ident) => {
        impl Add for $t {
            type Output = $t;
            #[inline(always)]
            fn add(self, b: $t) -> $t {
                avx!($t($add(self.0, b.0)))
            }
        }
        impl Sub for $t {
            type Output = $t;
            #[inline(always)]
            fn sub(self, b: $t) -> $t {
                avx!($t($sub(self.0, b.0)))
            }
        }
        impl Mul for $t {
            type Output = $t;
            #[inline(always)]
            fn mul(self, b: $t) -> $t {
                avx!($t($mul(self.0, b.0)))
            }
        }
        impl Div for $t {
            type Output = $t;
            #[inline(always)]
            fn div(self, b: $t) -> $t {
                avx!($t($div(self.0, b.0)))
            }
        }
    };
}

ops!(
    V16,
    _mm512_add_ps,
    _mm512_sub_ps,
    _mm512_mul_ps,
    _mm512_div_ps
);
ops!(
    V8,
    _mm256_add_ps,
    _mm256_sub_ps,
    _mm256_mul_ps,
    _mm256_div_ps
);
ops!(
    D8,
    _mm512_add_pd,
    _mm512_sub_pd,
    _mm512_mul_pd,
    _mm512_div_pd
);
ops!(
    D4,
    _mm256_add_pd,
    _mm256_sub_pd,
    _mm256_mul_pd,
    _mm256_div_pd
);

impl Neg for V16 {
    type Output = V16;
    #[inline(always)]
    fn neg(self) -> V16 {
        avx!(V16(_mm512_castsi512_ps(_mm512_xor_si512(
            _mm512_castps_si512(self.0),
            _mm512_set1_epi32(i32::MIN)
        ))))
    }
}

impl Neg for V8 {
    type Output = V8;
    #[inline(always)]
    fn neg(self) -> V8 {
        avx!(V8(_mm256_xor_ps(self.0, _mm256_set1_ps(-0.0))))
    }
}

impl Simd for V16 {
    type M = __mmask16;
    type I = __m512i;
    type D = D8;
    #[inline(always)]
    fn splat(x: f32) -> Self {
        avx!(V16(_mm512_set1_ps(x)))
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        avx!(V16(_mm512_fmadd_ps(self.0, a.0, b.0)))
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        avx!(V16(_mm512_sqrt_ps(self.0)))
    }
    #[inline(always)]
    fn floor(self) -> Self {
        avx!(V16(_mm512_roundscale_ps::<0x09>(self.0)))
    }
    #[inline(always)]
    fn ceil(self) -> Self {
        avx!(V16(_mm512_roundscale_ps::<0x0a>(self.0)))
    }
    #[inline(always)]
    fn trunc(self) -> Self {
        avx!(V16(_mm512_roundscale_ps::<0x0b>(self.0)))
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        // vmaxps: `a > b ? a : b`.
        avx!(V16(_mm512_max_ps(self.0, b.0)))
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        // vminps: `a < b ? a : b`.
        avx!(V16(_mm512_min_ps(self.0, b.0)))
    }
    #[inline(always)]
    fn lt(self, b: Self) -> __mmask16 {
        avx!(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.0, b.0))
    }
    #[inline(always)]
    fn le(self, b: Self) -> __mmask16 {
        avx!(_mm512_cmp_ps_mask::<_CMP_LE_OQ>(self.0, b.0))
    }
    #[inline(always)]
    fn eq(self, b: Self) -> __mmask16 {
        avx!(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(self.0, b.0))
    }
    #[inline(always)]
    fn select(m: __mmask16, a: Self, b: Self) -> Self {
        avx!(V16(_mm512_mask_blend_ps(m, b.0, a.0)))
    }
    #[inline(always)]
    fn m_and(a: __mmask16, b: __mmask16) -> __mmask16 {
        a & b
    }
    #[inline(always)]
    fn m_or(a: __mmask16, b: __mmask16) -> __mmask16 {
        a | b
    }
    #[inline(always)]
    fn m_not(a: __mmask16) -> __mmask16 {
        !a
    }
    #[inline(always)]
    fn any(m: __mmask16) -> bool {
        m != 0
    }
    #[inline(always)]
    fn to_bits(self) -> __m512i {
        avx!(_mm512_castps_si512(self.0))
    }
    #[inline(always)]
    fn from_bits(i: __m512i) -> Self {
        avx!(V16(_mm512_castsi512_ps(i)))
    }
    #[inline(always)]
    fn i_splat(i: i32) -> __m512i {
        avx!(_mm512_set1_epi32(i))
    }
    #[inline(always)]
    fn i_add(a: __m512i, b: __m512i) -> __m512i {
        avx!(_mm512_add_epi32(a, b))
    }
    #[inline(always)]
    fn i_sub(a: __m512i, b: __m512i) -> __m512i {
        avx!(_mm512_sub_epi32(a, b))
    }
    #[inline(always)]
    fn i_and(a: __m512i, b: __m512i) -> __m512i {
        avx!(_mm512_and_si512(a, b))
    }
    #[inline(always)]
    fn i_xor(a: __m512i, b: __m512i) -> __m512i {
        avx!(_mm512_xor_si512(a, b))
    }
    #[inline(always)]
    fn i_eq(a: __m512i, b: __m512i) -> __mmask16 {
        avx!(_mm512_cmpeq_epi32_mask(a, b))
    }
    #[inline(always)]
    fn i_gt(a: __m512i, b: __m512i) -> __mmask16 {
        avx!(_mm512_cmpgt_epi32_mask(a, b))
    }
    #[inline(always)]
    fn i_select(m: __mmask16, a: __m512i, b: __m512i) -> __m512i {
        avx!(_mm512_mask_blend_epi32(m, b, a))
    }
    #[inline(always)]
    fn i_shl<const N: i32>(a: __m512i) -> __m512i {
        avx!(_mm512_sllv_epi32(a, _mm512_set1_epi32(N)))
    }
    #[inline(always)]
    fn i_sra<const N: i32>(a: __m512i) -> __m512i {
        avx!(_mm512_srav_epi32(a, _mm512_set1_epi32(N)))
    }
    #[inline(always)]
    fn to_int(self) -> __m512i {
        avx!(_mm512_cvttps_epi32(self.0))
    }
    #[inline(always)]
    fn from_int(i: __m512i) -> Self {
        avx!(V16(_mm512_cvtepi32_ps(i)))
    }
    #[inline(always)]
    fn map_f64<K: F64Kernel>(a: Self, b: Self, c: Self) -> Self {
        // (No closures around intrinsics here: a closure would not inherit the loop's target
        // features, and the intrinsics in it would become calls.)
        avx!({
            let (a_hi, b_hi, c_hi) = (
                _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a.0)),
                _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(b.0)),
                _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(c.0)),
            );
            let rl = _mm512_cvtpd_ps(
                K::run(
                    D8(_mm512_cvtps_pd(_mm512_castps512_ps256(a.0))),
                    D8(_mm512_cvtps_pd(_mm512_castps512_ps256(b.0))),
                    D8(_mm512_cvtps_pd(_mm512_castps512_ps256(c.0))),
                )
                .0,
            );
            let rh = _mm512_cvtpd_ps(
                K::run(
                    D8(_mm512_cvtps_pd(_mm256_castpd_ps(a_hi))),
                    D8(_mm512_cvtps_pd(_mm256_castpd_ps(b_hi))),
                    D8(_mm512_cvtps_pd(_mm256_castpd_ps(c_hi))),
                )
                .0,
            );
            let r = _mm512_insertf64x4::<1>(
                _mm512_castpd256_pd512(_mm256_castps_pd(rl)),
                _mm256_castps_pd(rh),
            );
            V16(_mm512_castpd_ps(r))
        })
    }
    #[inline(never)]
    #[cold]
    fn patch3(
        self,
        m: __mmask16,
        v: (Self, Self, Self),
        f: fn(f32) -> (f32, f32, f32),
    ) -> (Self, Self, Self) {
        // SAFETY: `__m512` and `[f32; 16]` are both 64 plain bytes.
        let t = |v: V16| unsafe { transmute::<__m512, [f32; 16]>(v.0) };
        let (x, mut a, mut b, mut c) = (t(self), t(v.0), t(v.1), t(v.2));
        for i in 0..16 {
            if m >> i & 1 == 1 {
                (a[i], b[i], c[i]) = f(x[i]);
            }
        }
        // SAFETY: as above.
        let u = |a: [f32; 16]| V16(unsafe { transmute::<[f32; 16], __m512>(a) });
        (u(a), u(b), u(c))
    }
}

impl Simd for V8 {
    type M = __m256;
    type I = __m256i;
    type D = D4;
    #[inline(always)]
    fn splat(x: f32) -> Self {
        avx!(V8(_mm256_set1_ps(x)))
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        avx!(V8(_mm256_fmadd_ps(self.0, a.0, b.0)))
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        avx!(V8(_mm256_sqrt_ps(self.0)))
    }
    #[inline(always)]
    fn floor(self) -> Self {
        avx!(V8(_mm256_round_ps::<0x09>(self.0)))
    }
    #[inline(always)]
    fn ceil(self) -> Self {
        avx!(V8(_mm256_round_ps::<0x0a>(self.0)))
    }
    #[inline(always)]
    fn trunc(self) -> Self {
        avx!(V8(_mm256_round_ps::<0x0b>(self.0)))
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        // vmaxps: `a > b ? a : b`.
        avx!(V8(_mm256_max_ps(self.0, b.0)))
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        // vminps: `a < b ? a : b`.
        avx!(V8(_mm256_min_ps(self.0, b.0)))
    }
    #[inline(always)]
    fn lt(self, b: Self) -> __m256 {
        avx!(_mm256_cmp_ps::<_CMP_LT_OQ>(self.0, b.0))
    }
    #[inline(always)]
    fn le(self, b: Self) -> __m256 {
        avx!(_mm256_cmp_ps::<_CMP_LE_OQ>(self.0, b.0))
    }
    #[inline(always)]
    fn eq(self, b: Self) -> __m256 {
        avx!(_mm256_cmp_ps::<_CMP_EQ_OQ>(self.0, b.0))
    }
    #[inline(always)]
    fn select(m: __m256, a: Self, b: Self) -> Self {
        avx!(V8(_mm256_blendv_ps(b.0, a.0, m)))
    }
    #[inline(always)]
    fn m_and(a: __m256, b: __m256) -> __m256 {
        avx!(_mm256_and_ps(a, b))
    }
    #[inline(always)]
    fn m_or(a: __m256, b: __m256) -> __m256 {
        avx!(_mm256_or_ps(a, b))
    }
    #[inline(always)]
    fn m_not(a: __m256) -> __m256 {
        avx!(_mm256_xor_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(-1))))
    }
    #[inline(always)]
    fn any(m: __m256) -> bool {
        avx!(_mm256_movemask_ps(m) != 0)
    }
    #[inline(always)]
    fn to_bits(self) -> __m256i {
        avx!(_mm256_castps_si256(self.0))
    }
    #[inline(always)]
    fn from_bits(i: __m256i) -> Self {
        avx!(V8(_mm256_castsi256_ps(i)))
    }
    #[inline(always)]
    fn i_splat(i: i32) -> __m256i {
        avx!(_mm256_set1_epi32(i))
    }
    #[inline(always)]
    fn i_add(a: __m256i, b: __m256i) -> __m256i {
        avx!(_mm256_add_epi32(a, b))
    }
    #[inline(always)]
    fn i_sub(a: __m256i, b: __m256i) -> __m256i {
        avx!(_mm256_sub_epi32(a, b))
    }
    #[inline(always)]
    fn i_and(a: __m256i, b: __m256i) -> __m256i {
        avx!(_mm256_and_si256(a, b))
    }
    #[inline(always)]
    fn i_xor(a: __m256i, b: __m256i) -> __m256i {
        avx!(_mm256_xor_si256(a, b))
    }
    #[inline(always)]
    fn i_eq(a: __m256i, b: __m256i) -> __m256 {
        avx!(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, b)))
    }
    #[inline(always)]
    fn i_gt(a: __m256i, b: __m256i) -> __m256 {
        avx!(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a, b)))
    }
    #[inline(always)]
    fn i_select(m: __m256, a: __m256i, b: __m256i) -> __m256i {
        avx!(_mm256_blendv_epi8(b, a, _mm256_castps_si256(m)))
    }
    #[inline(always)]
    fn i_shl<const N: i32>(a: __m256i) -> __m256i {
        avx!(_mm256_sllv_epi32(a, _mm256_set1_epi32(N)))
    }
    #[inline(always)]
    fn i_sra<const N: i32>(a: __m256i) -> __m256i {
        avx!(_mm256_srav_epi32(a, _mm256_set1_epi32(N)))
    }
    #[inline(always)]
    fn to_int(self) -> __m256i {
        avx!(_mm256_cvttps_epi32(self.0))
    }
    #[inline(always)]
    fn from_int(i: __m256i) -> Self {
        avx!(V8(_mm256_cvtepi32_ps(i)))
    }
    #[inline(always)]
    fn map_f64<K: F64Kernel>(a: Self, b: Self, c: Self) -> Self {
        // (No closures around intrinsics: see the 16-lane version.)
        avx!({
            let rl = _mm256_cvtpd_ps(
                K::run(
                    D4(_mm256_cvtps_pd(_mm256_castps256_ps128(a.0))),
                    D4(_mm256_cvtps_pd(_mm256_castps256_ps128(b.0))),
                    D4(_mm256_cvtps_pd(_mm256_castps256_ps128(c.0))),
                )
                .0,
            );
            let rh = _mm256_cvtpd_ps(
                K::run(
                    D4(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(a.0))),
                    D4(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(b.0))),
                    D4(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(c.0))),
                )
                .0,
            );
            V8(_mm256_insertf128_ps::<1>(_mm256_castps128_ps256(rl), rh))
        })
    }
    #[inline(never)]
    #[cold]
    fn patch3(
        self,
        m: __m256,
        v: (Self, Self, Self),
        f: fn(f32) -> (f32, f32, f32),
    ) -> (Self, Self, Self) {
        // SAFETY: `__m256` and `[f32; 8]`/`[u32; 8]` are all 32 plain bytes.
        let t = |v: V8| unsafe { transmute::<__m256, [f32; 8]>(v.0) };
        // SAFETY: as above.
        let m = unsafe { transmute::<__m256, [u32; 8]>(m) };
        let (x, mut a, mut b, mut c) = (t(self), t(v.0), t(v.1), t(v.2));
        for i in 0..8 {
            if m[i] >> 31 == 1 {
                (a[i], b[i], c[i]) = f(x[i]);
            }
        }
        // SAFETY: as above.
        let u = |a: [f32; 8]| V8(unsafe { transmute::<[f32; 8], __m256>(a) });
        (u(a), u(b), u(c))
    }
}

impl SimdF64 for D8 {
    #[inline(always)]
    fn splat(x: f64) -> Self {
        avx!(D8(_mm512_set1_pd(x)))
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        avx!(D8(_mm512_fmadd_pd(self.0, a.0, b.0)))
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        avx!(D8(_mm512_max_pd(self.0, b.0)))
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        avx!(D8(_mm512_min_pd(self.0, b.0)))
    }
    #[inline(always)]
    fn ldexp_magic(self, kk: Self) -> Self {
        avx!(D8(_mm512_castsi512_pd(_mm512_add_epi64(
            _mm512_castpd_si512(self.0),
            _mm512_slli_epi64::<52>(_mm512_castpd_si512(kk.0))
        ))))
    }
}

impl SimdF64 for D4 {
    #[inline(always)]
    fn splat(x: f64) -> Self {
        avx!(D4(_mm256_set1_pd(x)))
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        avx!(D4(_mm256_fmadd_pd(self.0, a.0, b.0)))
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        avx!(D4(_mm256_max_pd(self.0, b.0)))
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        avx!(D4(_mm256_min_pd(self.0, b.0)))
    }
    #[inline(always)]
    fn ldexp_magic(self, kk: Self) -> Self {
        avx!(D4(_mm256_castsi256_pd(_mm256_add_epi64(
            _mm256_castpd_si256(self.0),
            _mm256_slli_epi64::<52>(_mm256_castpd_si256(kk.0))
        ))))
    }
}

/// Applies the activation `F` (index in [`ActFn::ALL`]) to `src` into `dst` (equal lengths).
///
/// # Safety
/// The CPU must support `isa` (and `isa` is not [`Isa::Portable`]).
pub(super) unsafe fn apply<const F: u8>(
    isa: Isa,
    src: &[f32],
    dst: &mut [f32],
    scale: f32,
    bias: f32,
) {
    // SAFETY: the caller guarantees the CPU supports `isa`, whose detection covers the
    // features each loop enables.
    let done = unsafe {
        match isa {
            Isa::Avx512 | Isa::Avx512Bf16 => act512::<F>(src, dst, scale, bias),
            Isa::Avx2Fma => act256::<F>(src, dst, scale, bias),
            Isa::Portable => 0,
        }
    };
    portable::<F>(&src[done..], &mut dst[done..], scale, bias);
}

/// `dst[i] = pow(a[i], b[i])` (equal lengths).
///
/// # Safety
/// The CPU must support `isa` (and `isa` is not [`Isa::Portable`]).
pub(super) unsafe fn apply_pow(isa: Isa, a: &[f32], b: &[f32], dst: &mut [f32]) {
    // SAFETY: as in `apply`.
    let done = unsafe {
        match isa {
            Isa::Avx512 | Isa::Avx512Bf16 => pow512(a, b, dst),
            Isa::Avx2Fma => pow256(a, b, dst),
            Isa::Portable => 0,
        }
    };
    portable_pow(&a[done..], &b[done..], &mut dst[done..]);
}

/// The 16-lane activation loop over whole vectors; returns how many elements it did.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn act512<const F: u8>(src: &[f32], dst: &mut [f32], scale: f32, bias: f32) -> usize {
    let f = const { ActFn::ALL[F as usize] };
    let n = src.len().min(dst.len()) / 16 * 16;
    let (scale, bias) = (V16::splat(scale), V16::splat(bias));
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    for i in (0..n).step_by(16) {
        // SAFETY: `i + 16 <= n`, within both slices; unaligned loads and stores.
        unsafe {
            let x = V16(_mm512_loadu_ps(s.add(i)));
            _mm512_storeu_ps(d.add(i), act_affine(f, x, scale, bias).0);
        }
    }
    n
}

/// The 8-lane activation loop over whole vectors; returns how many elements it did.
#[target_feature(enable = "avx2,fma")]
unsafe fn act256<const F: u8>(src: &[f32], dst: &mut [f32], scale: f32, bias: f32) -> usize {
    let f = const { ActFn::ALL[F as usize] };
    let n = src.len().min(dst.len()) / 8 * 8;
    let (scale, bias) = (V8::splat(scale), V8::splat(bias));
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    for i in (0..n).step_by(8) {
        // SAFETY: `i + 8 <= n`, within both slices; unaligned loads and stores.
        unsafe {
            let x = V8(_mm256_loadu_ps(s.add(i)));
            _mm256_storeu_ps(d.add(i), act_affine(f, x, scale, bias).0);
        }
    }
    n
}

/// The 16-lane power loop over whole vectors.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn pow512(a: &[f32], b: &[f32], dst: &mut [f32]) -> usize {
    let n = dst.len().min(a.len()).min(b.len()) / 16 * 16;
    for i in (0..n).step_by(16) {
        // SAFETY: `i + 16 <= n`, within all three slices; unaligned loads and stores.
        unsafe {
            let x = V16(_mm512_loadu_ps(a.as_ptr().add(i)));
            let y = V16(_mm512_loadu_ps(b.as_ptr().add(i)));
            _mm512_storeu_ps(dst.as_mut_ptr().add(i), pow_v(x, y).0);
        }
    }
    n
}

/// The 8-lane power loop over whole vectors.
#[target_feature(enable = "avx2,fma")]
unsafe fn pow256(a: &[f32], b: &[f32], dst: &mut [f32]) -> usize {
    let n = dst.len().min(a.len()).min(b.len()) / 8 * 8;
    for i in (0..n).step_by(8) {
        // SAFETY: `i + 8 <= n`, within all three slices; unaligned loads and stores.
        unsafe {
            let x = V8(_mm256_loadu_ps(a.as_ptr().add(i)));
            let y = V8(_mm256_loadu_ps(b.as_ptr().add(i)));
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), pow_v(x, y).0);
        }
    }
    n
}
