//! The Scalar engine's activation functions ([`ActFn`]) and the ALU's `power`, defined once in
//! fp32 and computed bit-identically on every host code path ([`Isa`]).
//!
//! # The rules every definition follows
//!
//! - **One definition per function**: [`eval`] (activations) and [`pow`]. [`apply`] and
//!   [`apply_pow`] run that same definition over a row; every [`Isa`] produces the same bits.
//! - **Only IEEE 754 operations whose results are fully determined**, in a fixed order: add,
//!   subtract, multiply, divide, square root, fused multiply-add (`f32::mul_add`, `vfmadd`),
//!   ordered quiet comparisons, selects, conversions to and from integers of integral values,
//!   and bit manipulation. No libm, no `f32::exp` and the like, no approximate instructions
//!   (`vrcp14ps`, `vrsqrtps`). Round to nearest even throughout; subnormal inputs and results
//!   are IEEE (no flush to zero). `max(a, b)` is `a > b ? a : b` and `min(a, b)` is
//!   `a < b ? a : b` exactly (what `vmaxps` / `vminps` compute, NaN and `±0` included).
//! - Where a definition says fma, every path uses one fused operation; where it multiplies then
//!   adds, every path rounds twice.
//! - Two places compute in **f64** (also IEEE, widened exactly from f32, rounded once back to
//!   f32): `power`, and the normal tail `G` used by `gelu`, `gelu_dx` and `erf`, where f32
//!   evaluation of that rational function alone cost 3 to 5 ulp.
//! - **NaN**: every NaN result is stored as the canonical NaN `0x7fc0_0000` (decided on the
//!   bits, so that no compiler may substitute another NaN).
//! - [`apply`]'s pre-activation `x·scale + bias` is **one** fused multiply-add; `bias = -0.0`
//!   leaves every `x`, `-0.0` included, unchanged.
//!
//! # How the paths stay identical
//!
//! Every definition is written once, generically over a lane type (the crate-private trait
//! `Simd`, whose methods are the operations above). `f32` implements it with scalar operations:
//! that instantiation *is* the definition, and the portable path. The x86-64 module
//! `x86` implements it on 16 lanes (`__m512`, AVX-512F) and 8 lanes (`__m256`, AVX2 + FMA)
//! with the instruction computing the same IEEE operation (`vfmadd…ps` for `mul_add`, `vdivps`,
//! `vsqrtps`, `vroundps`/`vrndscaleps` for floor/ceil/trunc, `vcvttps2dq` on integral values,
//! ...). The vector loops are monomorphized per function (the `match` on [`ActFn`] happens
//! once per call), compiled with `#[target_feature]`, and finish the row's tail with the scalar
//! definition. The rare lanes that need a scalar-only step (Payne–Hanek reduction for
//! `|x| > 65536` in sin/cos/tan) are handed to the same scalar code. The tests compare every
//! supported path with the portable one bit for bit on special values, every power of two and
//! its neighbours, the boundaries of every piece below, 2^20 random bit patterns, random values
//! inside each valid range, non-default scale and bias, odd lengths and unaligned slices.
//!
//! # Building blocks
//!
//! Polynomial and rational coefficients were fitted offline: weighted minimax (Lawson's
//! iteration, Sanathanan–Koerner for rationals) on 3000–4000 Chebyshev nodes against 120-bit
//! mpmath values, then rounded to f32 one coefficient at a time (lowest degree first) with the
//! others refitted. They are in the source as exact literals, each with its fitted error.
//!
//! - **`exp_core(h, l, s)` = `e^(h+l)·2^s`**: `h` clamped to `[−130, 130]`;
//!   `k = round(h·log2 e)` (adding `1.5·2^23`), `r = h − k·ln2` by Cody–Waite with a 16-bit
//!   `ln2_hi` (exact) and an fma with `ln2_lo`, plus `l`; `e^r = 1 + (r + r²·Q(r))`, `Q` of
//!   degree 4 on `|r| ≤ 0.3467` (error 2^-28.2); then `·2^(k+s)` as two exact power-of-two
//!   factors so that only the last multiplication rounds (into the subnormal range or to inf).
//!   The rounding error of `1 + (…)` is also returned (Fast2Sum) for callers that correct with
//!   it.
//! - **`log`**: `x = 2^e·m`, `m ∈ [√½, √2)` by integer arithmetic on the bits (subnormals
//!   scaled by 2^23 first), `f = m − 1` exact, `ln x = e·ln2 + f + f²·P(f)`, `P` of degree 8
//!   (error 2^-27.8), `e·ln2_hi + f` summed exactly (Fast2Sum).
//! - **Normal tail**: `Φ(−y) = e^(−y²/2)·G(y)` with `G` a rational of degree (5, 6) in `y`
//!   evaluated in f64 (error 2^-33.4 on `[0, 15]`), and `y²/2` formed exactly as hi + lo.
//! - **Reduction by π/2** (sin, cos, tan): `k = round(x·2/π)`, `r = x − k·π/2` with a
//!   three-part Cody–Waite `π/2` (first step exact) for `|x| ≤ 65536`; beyond, Payne–Hanek in
//!   128-bit integer arithmetic on 448 bits of `2/π` (scalar; the vector paths call it for those
//!   lanes). The reduced argument is kept as `r_hi + r_lo` (`k·P2` exact by fma, TwoSum; the
//!   Payne–Hanek f64 result split in two). Polynomials on `|r| ≤ 0.79`: `sin` degree 9 (odd,
//!   error 2^-32.5), `cos` degree 8 (even, with the rounding error of `1 − r²/2` carried,
//!   2^-32.9), `tan` degree 15 (odd, 2^-29.3); `r_lo` enters to first order.
//!   Outside the valid ranges the same definitions hold; on samples (2^16 below 65536, 2^16
//!   above it up to `f32::MAX`, 20000 f32 nearest to multiples of `π/2`) the errors were
//!   ≤ 0.74 (sin), 0.79 (cos) and 1.09 ulp (tan); the tests assert ≤ 1, 1 and 2.
//!
//! # The functions
//!
//! The thresholds below were found by scanning every f32 and checked to hold for every f32
//! beyond them. Accuracy is the largest error over **every f32 in NKI's valid range** (`ValidRange::All`:
//! every finite f32), measured by `examples/activation_accuracy.rs` against f64 references; the
//! table with the counts of results that differ from correct rounding is in
//! `docs/numerics.md`. An ulp is the spacing of f32 at the exact value (2^-149 in the subnormal
//! range).
//!
//! | function | definition (fp32 unless noted) | special values, thresholds | max ulp |
//! |---|---|---|---:|
//! | `identity` | `x` | NaN → canonical NaN | 0 |
//! | `exp` | `exp_core(x)` | `+inf` for `x ≥ 88.72284` (`0x42b17218`); subnormal for `x ≤ −87.33655`; `+0` for `x ≤ −103.97208`; `exp(−inf) = 0` | 1.013 |
//! | `log` | log kernel; subnormals scaled by 2^23 | `log(±0) = −inf`, `log(inf) = inf`, `log(x < 0) = NaN` | 0.887 |
//! | `tanh` | `|x| < 0.55`: `x + x³·P(x²)` (degree 11, error 2^-29.7); else `1 − q`, `q = 2/(e^(2|x|) + 1)` with `exp`'s rounding error, the residual of `e + 1` and of the division carried into `q` | `±1` for `|x| ≥ 9.010914` (`x` clamped to 20 inside); `tanh(x) = x` for `|x| < 2^-12` (keeps `−0`) | 0.879 |
//! | `sqrt` | IEEE `sqrt` | `sqrt(−0) = −0`, negative → NaN | 0.500 |
//! | `rsqrt` | `1 / sqrt(x)`: two correctly rounded operations (≤ 1.5 ulp by construction) | `rsqrt(±0) = ±inf`, `rsqrt(inf) = 0`, negative → NaN | 1.490 |
//! | `reciprocal` | IEEE `1 / x` | `±0 → ±inf`, `±inf → ±0` | 0.500 |
//! | `square` | `x · x` | overflow to inf | 0.500 |
//! | `relu` | `x > 0 ? x : +0` | `relu(−0) = +0`, NaN stays NaN | 0 |
//! | `gelu` | `|x| < 0.75`: `x·(1/2 + x·Q(x²))` (`Q` of degree 5 in `x²`, error 2^-29.0); else with `E = e^(−x²/2)` (exact `x²` as hi + lo, `exp`'s rounding error carried) and `G` in f64: `x < 0`: `x·G·E`, `x ≥ 0`: `x − x·G·E` (one fma) | `gelu(x) = x` for `x ≥ 5.3475156`, `−0` for `x ≤ −14.356069` (`x` clamped to `[−20, 20]` inside); `gelu(±inf) = inf, −0` | 2.580 |
//! | `gelu_dx` | `−1/4 < x < 3/4`: `1/2 + x·R(x²)` (degree 11, 2^-28.1); within 1/2 of the zero `x0`: `d·P(d)`, `d = x − x0` (degree 9, 2^-26.3); else with `t = |x|/√(2π) − G(|x|)` (hi + lo constant): `x < 0`: `−t·E`, `x ≥ 0`: `1 + t·E` | `1` for `x ≥ 5.910161`, `−0` for `x ≤ −14.541349`; `(±inf) → 1, −0` | 2.804 |
//! | `gelu_apprx_tanh` | `x·sigmoid(w)`, `w = x·(c1 + c2·x²)` (`c1 = 2√(2/π)`, `c2 = 0.044715·c1`, both hi + lo) formed as hi + lo, then as `sigmoid` | `x` clamped to `[−20, 20]` for `w`; `−0` for `x ≤ −10.770868`; `(±inf) → inf, −0` | 1.332 |
//! | `gelu_apprx_sigmoid` | `x·sigmoid(1.702·x)` with `1.702·x` exact as hi + lo (`1.702` hi + lo) | `−0` for `x ≤ −63.527348`; `(±inf) → inf, −0` | 1.317 |
//! | `sigmoid` | `E = e^−|x|·2^24` (hi + lo); `x ≥ 0`: `1/(1 + F)`, `x < 0`: `E/((1 + F)·2^24)`, `F = E·2^-24`; the residuals of `1 + F`, of the product and of the division, and `E`'s own error, corrected before one final rounding | `1` for `x ≥ 17.32868`, `+0` for `x ≤ −103.97208`; `(±inf) → 1, 0` | 1.005 |
//! | `silu` | `x·sigmoid(x)` the same way (`x/(1 + F)`, `x·E/((1 + F)·2^24)`) | `−0` for `x ≤ −108.6603`; `(±inf) → inf, −0` | 1.171 |
//! | `silu_dx` | `x ≥ 0`: `(d + x·F)/d²`; `x < 0`: `F·((1 + x) + F)/d²` (`d = 1 + F`), numerators and `d²` as hi + lo, quotient corrected; within 5/16 of the zero `x0`: `d·P(d)` (degree 7, 2^-26.7) | `1` for `x ≥ 19.556345`, `−0` for `x ≤ −108.65097`; `(±inf) → 1, −0` | 2.009 |
//! | `softplus` | `max(x, 0) + log1p(e^−|x|)`, `log1p(E) = log(1 + E) + (E − ((1 + E) − 1))/(1 + E)`, the final sum by TwoSum | `x` for `x ≥ 17` (returned directly above 32); `+0` for `x ≤ −103.97208`; `(±inf) → inf, 0` | 1.728 |
//! | `mish` | `x·n/(n + 2)`: `x < 0`: `n = E² + 2E`; `x ≥ 0`: `(1 + 2F)/(1 + 2F + 2F²)`; numerators and denominators hi + lo, quotient corrected, one rounding for `x·(q + lo)` | `−0` for `x ≤ −108.6603`; `(±inf) → inf, −0` | 1.093 |
//! | `erf` | `|x| < 1`: `x·(2/√π + Q(x²))` (`2/√π` hi + lo, `Q` of degree 6 in `x²`, 2^-29.3); else `1 − 2·e^(−x²)·G(|x|·√2)` (exact `x²`), sign restored | `±1` for `|x| ≥ 3.919206` (`|x|` clamped to 4 inside); `erf(±0) = ±0` | 1.320 |
//! | `erf_dx` | `2/√π · e^(−x²)`: exact `x²`, `exp`'s rounding error and the constant's low part carried, scaled by 2^24 so that subnormal results round once | `+0` for `|x| ≥ 10.202591` | 1.299 |
//! | `sin`, `cos` | reduction by `π/2` (hi + lo), polynomials, quadrant by the low two bits of `k` | `sin(x) = x` for `|x| < 2^-12` (keeps `−0`); `±inf` → NaN; outside the valid range: Cody–Waite to 65536, Payne–Hanek beyond | 0.828 / 0.788 |
//! | `tan` | `t = r + (r³·T(r²) + r_lo·(1 + r²))` (hi + lo); odd quadrants `−1/t`, corrected | `tan(x) = x` for `|x| < 2^-12`; `±inf` → NaN | 1.060 |
//! | `arctan` | `|x| > tan(3π/8)`: `π/2 + atan(−1/|x|)`; `|x| > tan(π/8)`: `π/4 + atan((|x| − 1)/(|x| + 1))`; else `y + y³·A(y²)` (degree 11, 2^-30.4); the reduced argument's rounding errors carried as a first-order correction; sign restored | `±π/2` (rounded) for `±inf`; `x` for `|x| < 2^-12` | 1.096 |
//! | `abs` | clears the sign bit | | 0 |
//! | `sign` | `1`, `−1`, or `+0` for `±0` | NaN stays NaN | 0 |
//! | `floor`, `ceil`, `trunc` | IEEE round to integral | `ceil(−0.5) = trunc(−0.5) = −0` | 0 |
//!
//! **Interior zeros.** `gelu_dx` (at `x0 ≈ −0.7517915`) and `silu_dx` (at `x0 ≈ −1.2784645`)
//! vanish inside the range where their formulas cancel; within `1/2` and `5/16` of `x0` they are
//! evaluated as `d·P(d)`, `d = (x − x0_hi) − x0_lo`, so their error stays relative there too;
//! the measurement reports the window `|x − x0| < 2^-10` separately (`docs/numerics.md`). Every
//! other zero is at `x = 0` (or at `±π` for sin, `±π/2` for cos) and is reached with relative
//! accuracy: the reductions keep `r` accurate to the last bit near multiples of `π/2`.
//!
//! # Power
//!
//! [`pow`]`(x, y)`: special cases first (C99 Annex F, as NumPy's `np.power` on float32):
//! `x^±0 = 1` and `1^y = 1` even for NaN; otherwise NaN if either is NaN; a negative finite `x`
//! with a finite non-integer `y` is NaN; `±0^y` is `±0`/`±inf` for odd integer `y` and
//! `+0`/`+inf` otherwise (by the sign of `y`); `±inf^y` likewise; `(−1)^±inf = 1`;
//! `x^±inf` is `+0` or `+inf` by `|x| < 1` or `> 1`. Otherwise, with `|x| = 2^e·m`,
//! `m ∈ [√½, √2)`: in f64, `log2 m = 2/ln2·atanh(u)`, `u = (m−1)/(m+1)`, by its series to
//! `u^17` (remainder below 2^-50), `t = y·(e + log2 m)` clamped to `[−300, 300]`,
//! `2^t = 2^k·2^r` with `k = round(t)`, `2^r` by its Taylor series to degree 11 (remainder
//! below 2^-45), `k` added to the exponent, then one rounding to f32 (which also produces
//! subnormal results and overflow correctly). The sign is negative for a negative `x` and an
//! odd integer `y`. The f64 value is within about 2^-40 (relative) of `|x|^y`, so the f32
//! result is within 0.5 ulp + 2^-16 ulp, i.e. correctly rounded except when `|x|^y` lies within
//! 2^-40 of a rounding boundary (for example an exact midpoint such as `(1 + 2^-12)^2`, which
//! may round either way).
//!
//! # Speed
//!
//! On the development machine (AMD EPYC, Zen 5 family, KVM guest; 1 Mi elements in
//! `[−10, 10]`), the 16-lane loops take about 0.22 ns/element for exp, 0.33 log, 0.4 sin,
//! 0.55 tanh, 0.65 sigmoid/silu, 0.6–0.7 erf/gelu, 1.2 mish, 2.2 gelu_apprx_tanh (probably
//! slowed by subnormal intermediates from its tiny results there), 1.5–1.9 power; AVX2 about twice that;
//! the portable path 20–70 ns/element (the baseline x86-64 target has no FMA instruction, so
//! `f32::mul_add` is a library call). Measured by `act_timing`, an `#[ignore]` test:
//! `cargo test --release -p nki-runtime -- --ignored --nocapture act_timing`.

use core::ops::{Add, Div, Mul, Neg, Sub};

use nki_lang::ActFn;

use super::Isa;

#[cfg(target_arch = "x86_64")]
mod x86;

/// The stored value of every NaN result.
#[cfg(test)]
const CANONICAL_NAN: f32 = f32::from_bits(0x7fc0_0000);

// ---------------------------------------------------------------------------------------------
// The lane abstraction: every definition is written once, generically, over `Simd`. `f32` is the
// scalar definition (and the portable path); the x86 paths implement the same operations on
// 16 or 8 lanes with instructions that compute the same IEEE results, so a vector path runs the
// very same sequence of operations as the definition, lane by lane.
// ---------------------------------------------------------------------------------------------

/// Lanes of f32 with the IEEE operations the definitions are built from.
///
/// Every method is one IEEE operation (round to nearest even, no flush of subnormals) or an
/// exact bit manipulation, with the same result for every implementation. Comparisons are
/// ordered and quiet: false when an operand is NaN.
pub(crate) trait Simd:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// A per-lane truth value.
    type M: Copy;
    /// Lanes of 32-bit integers.
    type I: Copy;
    /// The same number of f64 lanes.
    type D: SimdF64;

    /// Every lane `x`.
    fn splat(x: f32) -> Self;
    /// `self · a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Correctly rounded square root.
    fn sqrt(self) -> Self;
    /// Largest integer ≤ `self` (exact).
    fn floor(self) -> Self;
    /// Smallest integer ≥ `self` (exact).
    fn ceil(self) -> Self;
    /// `self` rounded toward zero (exact).
    fn trunc(self) -> Self;
    /// `self > b ? self : b` (so `b` when either is NaN, and `b` for `±0` against `∓0`).
    fn max(self, b: Self) -> Self;
    /// `self < b ? self : b` (so `b` when either is NaN, and `b` for `±0` against `∓0`).
    fn min(self, b: Self) -> Self;
    /// `self < b`.
    fn lt(self, b: Self) -> Self::M;
    /// `self <= b`.
    fn le(self, b: Self) -> Self::M;
    /// `self == b`.
    fn eq(self, b: Self) -> Self::M;
    /// `m ? a : b` per lane.
    fn select(m: Self::M, a: Self, b: Self) -> Self;
    /// Lane-wise and.
    fn m_and(a: Self::M, b: Self::M) -> Self::M;
    /// Lane-wise or.
    fn m_or(a: Self::M, b: Self::M) -> Self::M;
    /// Lane-wise not.
    fn m_not(a: Self::M) -> Self::M;
    /// Whether some lane is true.
    fn any(m: Self::M) -> bool;
    /// The bits of each lane.
    fn to_bits(self) -> Self::I;
    /// Lanes with the given bits.
    fn from_bits(i: Self::I) -> Self;
    /// Every lane `i`.
    fn i_splat(i: i32) -> Self::I;
    /// Wrapping add.
    fn i_add(a: Self::I, b: Self::I) -> Self::I;
    /// Wrapping subtract.
    fn i_sub(a: Self::I, b: Self::I) -> Self::I;
    /// Bitwise and.
    fn i_and(a: Self::I, b: Self::I) -> Self::I;
    /// Bitwise xor.
    fn i_xor(a: Self::I, b: Self::I) -> Self::I;
    /// `a == b`.
    fn i_eq(a: Self::I, b: Self::I) -> Self::M;
    /// `a > b` (signed).
    fn i_gt(a: Self::I, b: Self::I) -> Self::M;
    /// `m ? a : b` per lane.
    fn i_select(m: Self::M, a: Self::I, b: Self::I) -> Self::I;
    /// Shift left by `N`.
    fn i_shl<const N: i32>(a: Self::I) -> Self::I;
    /// Arithmetic shift right by `N`.
    fn i_sra<const N: i32>(a: Self::I) -> Self::I;
    /// Conversion of an integral value in `i32` range (the callers guarantee it, except for
    /// NaN lanes whose result is NaN whatever the integer).
    fn to_int(self) -> Self::I;
    /// Exact conversion of integers below 2^24 in magnitude.
    fn from_int(i: Self::I) -> Self;
    /// `K` applied to the lanes widened (exactly) to f64, the result rounded to f32.
    fn map_f64<K: F64Kernel>(a: Self, b: Self, c: Self) -> Self;
    /// Lanes where `m` holds get `f(self)`, the others keep `v`: the rare lanes that need a
    /// scalar-only part of a definition.
    fn patch3(
        self,
        m: Self::M,
        v: (Self, Self, Self),
        f: fn(f32) -> (f32, f32, f32),
    ) -> (Self, Self, Self);
}

/// A computation in f64 lanes (a type rather than a closure, so that it is called statically
/// and compiles into the vector loops with their target features).
pub(crate) trait F64Kernel {
    /// The computation.
    fn run<D: SimdF64>(a: D, b: D, c: D) -> D;
}

/// Lanes of f64, for the extra precision of [`pow`] and of the normal tail.
pub(crate) trait SimdF64:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self>
{
    /// Every lane `x`.
    fn splat(x: f64) -> Self;
    /// `self · a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `self > b ? self : b`.
    fn max(self, b: Self) -> Self;
    /// `self < b ? self : b`.
    fn min(self, b: Self) -> Self;
    /// `self · 2^k` where `kk = k + 0x1.8p52` holds an integer `k` in its low bits and the
    /// result is a normal f64: adds `k` to the exponent field.
    fn ldexp_magic(self, kk: Self) -> Self;
}

impl Simd for f32 {
    type M = bool;
    type I = i32;
    type D = f64;
    #[inline(always)]
    fn splat(x: f32) -> Self {
        x
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn floor(self) -> Self {
        f32::floor(self)
    }
    #[inline(always)]
    fn ceil(self) -> Self {
        f32::ceil(self)
    }
    #[inline(always)]
    fn trunc(self) -> Self {
        f32::trunc(self)
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        if self > b { self } else { b }
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        if self < b { self } else { b }
    }
    #[inline(always)]
    fn lt(self, b: Self) -> bool {
        self < b
    }
    #[inline(always)]
    fn le(self, b: Self) -> bool {
        self <= b
    }
    #[inline(always)]
    fn eq(self, b: Self) -> bool {
        self == b
    }
    #[inline(always)]
    fn select(m: bool, a: Self, b: Self) -> Self {
        if m { a } else { b }
    }
    #[inline(always)]
    fn m_and(a: bool, b: bool) -> bool {
        a & b
    }
    #[inline(always)]
    fn m_or(a: bool, b: bool) -> bool {
        a | b
    }
    #[inline(always)]
    fn m_not(a: bool) -> bool {
        !a
    }
    #[inline(always)]
    fn any(m: bool) -> bool {
        m
    }
    #[inline(always)]
    fn to_bits(self) -> i32 {
        f32::to_bits(self) as i32
    }
    #[inline(always)]
    fn from_bits(i: i32) -> Self {
        f32::from_bits(i as u32)
    }
    #[inline(always)]
    fn i_splat(i: i32) -> i32 {
        i
    }
    #[inline(always)]
    fn i_add(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    fn i_sub(a: i32, b: i32) -> i32 {
        a.wrapping_sub(b)
    }
    #[inline(always)]
    fn i_and(a: i32, b: i32) -> i32 {
        a & b
    }
    #[inline(always)]
    fn i_xor(a: i32, b: i32) -> i32 {
        a ^ b
    }
    #[inline(always)]
    fn i_eq(a: i32, b: i32) -> bool {
        a == b
    }
    #[inline(always)]
    fn i_gt(a: i32, b: i32) -> bool {
        a > b
    }
    #[inline(always)]
    fn i_select(m: bool, a: i32, b: i32) -> i32 {
        if m { a } else { b }
    }
    #[inline(always)]
    fn i_shl<const N: i32>(a: i32) -> i32 {
        a << N
    }
    #[inline(always)]
    fn i_sra<const N: i32>(a: i32) -> i32 {
        a >> N
    }
    #[inline(always)]
    fn to_int(self) -> i32 {
        self as i32
    }
    #[inline(always)]
    fn from_int(i: i32) -> Self {
        i as f32
    }
    #[inline(always)]
    fn map_f64<K: F64Kernel>(a: Self, b: Self, c: Self) -> Self {
        K::run(a as f64, b as f64, c as f64) as f32
    }
    #[inline(always)]
    fn patch3(
        self,
        m: bool,
        v: (Self, Self, Self),
        f: fn(f32) -> (f32, f32, f32),
    ) -> (Self, Self, Self) {
        if m { f(self) } else { v }
    }
}

impl SimdF64 for f64 {
    #[inline(always)]
    fn splat(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f64::mul_add(self, a, b)
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        if self > b { self } else { b }
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        if self < b { self } else { b }
    }
    #[inline(always)]
    fn ldexp_magic(self, kk: Self) -> Self {
        f64::from_bits(self.to_bits().wrapping_add(kk.to_bits() << 52))
    }
}

// ---- small generic helpers ----

/// `V::splat`, shorter.
#[inline(always)]
fn c<V: Simd>(x: f32) -> V {
    V::splat(x)
}

/// `|x|` (clears the sign bit).
#[inline(always)]
fn abs<V: Simd>(x: V) -> V {
    V::from_bits(V::i_and(x.to_bits(), V::i_splat(0x7fff_ffff)))
}

/// `x` with the sign bit of `s` xor-ed in (`-x` where `s` is negative, including `-0.0`).
#[inline(always)]
fn xor_sign<V: Simd>(x: V, s: V) -> V {
    let sign = V::i_and(s.to_bits(), V::i_splat(i32::MIN));
    V::from_bits(V::i_xor(x.to_bits(), sign))
}

/// `x > b` (quiet, false for NaN).
#[inline(always)]
fn gt<V: Simd>(x: V, b: f32) -> V::M {
    c::<V>(b).lt(x)
}

/// `x < b` (quiet, false for NaN).
#[inline(always)]
fn lt<V: Simd>(x: V, b: f32) -> V::M {
    x.lt(c(b))
}

/// Whether the lane is NaN.
#[inline(always)]
fn is_nan<V: Simd>(x: V) -> V::M {
    V::m_not(x.eq(x))
}

/// `x` clamped to `[lo, hi]` (NaN stays NaN).
#[inline(always)]
fn clamp<V: Simd>(x: V, lo: f32, hi: f32) -> V {
    c::<V>(hi).min(c::<V>(lo).max(x))
}

/// Horner's rule with one fused multiply-add per coefficient: `p[0] + x·(p[1] + x·(…))`.
#[inline(always)]
fn poly<V: Simd, const N: usize>(x: V, p: &[f32; N]) -> V {
    let mut acc = c::<V>(p[N - 1]);
    let mut i = N - 1;
    while i > 0 {
        i -= 1;
        acc = acc.mul_add(x, c(p[i]));
    }
    acc
}

/// Horner's rule in f64.
#[inline(always)]
fn poly64<D: SimdF64, const N: usize>(x: D, p: &[f64; N]) -> D {
    let mut acc = D::splat(p[N - 1]);
    let mut i = N - 1;
    while i > 0 {
        i -= 1;
        acc = acc.mul_add(x, D::splat(p[i]));
    }
    acc
}

/// `a · b` as an unevaluated sum `hi + lo` (exact unless the product under- or overflows).
#[inline(always)]
fn two_prod<V: Simd>(a: V, b: V) -> (V, V) {
    let hi = a * b;
    (hi, a.mul_add(b, -hi))
}

/// `a + b` as `hi + lo`, exactly (Knuth's TwoSum; any magnitudes, finite operands).
#[inline(always)]
fn two_sum<V: Simd>(a: V, b: V) -> (V, V) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

// ---------------------------------------------------------------------------------------------
// Constants. Polynomial coefficients were fitted offline (weighted minimax by Lawson's
// iteration on 3000 Chebyshev nodes with 120-bit mpmath reference values, then rounded to f32
// one coefficient at a time, lowest degree first, refitting the remaining ones); the bound given
// with each is the fitted polynomial's weighted error with the f32 coefficients, before
// evaluation rounding.
// ---------------------------------------------------------------------------------------------

/// `1.5 · 2^23`: adding it rounds a float of magnitude below `2^22` to an integer.
const SHIFT: f32 = 12_582_912.0;
/// `log2(e)` rounded to f32.
const LOG2E: f32 = f32::from_bits(0x3fb8_aa3b);
/// `ln 2` to 16 bits (`0x1.62e4p-1`): `k · LN2_HI` is exact for `|k| < 2^8`.
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
/// `ln 2 − LN2_HI` rounded to f32.
const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);

/// `(e^r − 1 − r) / r²` on `|r| ≤ 0.3467`, degree 4; weighted by `r²/e^r` (the error of
/// `e^r`, relative): 2^-28.2.
const EXP_Q: [f32; 5] = [
    0.49999994,
    0.16666521,
    0.041668262,
    0.008368672,
    0.0013820967,
];

/// `(log1p(f) − f) / f²` on `f ∈ [√½ − 1, √2 − 1]`, degree 8; weighted by
/// `f² / |log1p(f)|` (relative error of `log1p`): 2^-27.8.
const LOG_P: [f32; 9] = [
    -0.49999988,
    0.33333325,
    -0.2500161,
    0.20002013,
    -0.1660843,
    0.14180596,
    -0.132475,
    0.12914729,
    -0.0762317,
];

/// `(tanh(x) − x) / x³` as a polynomial in `x²`, `|x| ≤ 0.55`, degree 4; relative error of
/// `tanh`: 2^-29.7.
const TANH_P: [f32; 5] = [
    -0.33333316,
    0.13332544,
    -0.053847548,
    0.021050714,
    -0.006242849,
];

/// `(sin(r) − r) / r³` in `r²`, `|r| ≤ 0.79`, degree 3; relative error of `sin`: 2^-32.5.
const SIN_P: [f32; 4] = [-0.16666667, 0.008333379, -0.00019853014, 2.8314842e-06];
/// `(cos(r) − 1 + r²/2) / r⁴` in `r²`, `|r| ≤ 0.79`, degree 2; relative error of `cos`:
/// 2^-32.9.
const COS_P: [f32; 3] = [0.041666646, -0.0013887304, 2.4431201e-05];
/// `(tan(r) − r) / r³` in `r²`, `|r| ≤ 0.79`, degree 6; relative error of `tan`: 2^-29.3.
const TAN_P: [f32; 7] = [
    0.33333352,
    0.13332577,
    0.05406992,
    0.02122936,
    0.010975664,
    -9.128272e-05,
    0.004467123,
];
/// `(atan(y) − y) / y³` in `y²`, `|y| ≤ tan(π/8)`, degree 4; relative error of `atan`:
/// 2^-30.4.
const ATAN_P: [f32; 5] = [
    -0.33333316,
    0.19998528,
    -0.14244393,
    0.10599191,
    -0.06090134,
];

/// `2/√π` rounded to f32.
const TWO_OVER_SQRT_PI_HI: f32 = f32::from_bits(0x3f90_6ebb);
/// `2/√π − TWO_OVER_SQRT_PI_HI` rounded to f32.
const TWO_OVER_SQRT_PI_LO: f32 = f32::from_bits(0xb37b_d649);
/// `erf(x)/x = HI + (LO + z·P(z))`, `z = x²`, `|x| ≤ 1`: `P` of degree 5 (`ERF_P[0]` is `LO`,
/// fixed); relative error of `erf(x)/x`: 2^-29.3.
const ERF_P: [f32; 7] = [
    TWO_OVER_SQRT_PI_LO,
    -0.3761263,
    0.11283603,
    -0.026854202,
    0.0051885983,
    -0.00080093986,
    7.842549e-05,
];

/// `G(y) = Φ(−y)·e^(y²/2) = N(y)/D(y)` (a scaled Mills ratio), `y ∈ [0, 15]`, evaluated in
/// f64 and rounded once to f32: a rational minimax of degree (5, 6) fitted by
/// Sanathanan–Koerner/Lawson iteration; relative error 2^-33.4 (checked at 3001 points with
/// mpmath), so the f32 result is within 0.5 ulp + 2^-9 ulp. All coefficients are positive.
const G_NUM: [f64; 6] = [
    f64::from_bits(0x3fdf_ffff_fff3_c177),
    f64::from_bits(0x3fe0_44a1_0839_31de),
    f64::from_bits(0x3fd0_15a7_cb7d_d3a3),
    f64::from_bits(0x3fb2_5624_c796_de49),
    f64::from_bits(0x3f87_fe27_865f_55e7),
    f64::from_bits(0x3f4d_650e_1f98_5a0c),
];
/// The denominator of [`G_NUM`].
const G_DEN: [f64; 7] = [
    1.0,
    f64::from_bits(0x3ffd_08c3_9fda_9adb),
    f64::from_bits(0x3ff7_3550_e702_0567),
    f64::from_bits(0x3fe5_187d_a363_e5aa),
    f64::from_bits(0x3fc7_4518_0689_328a),
    f64::from_bits(0x3f9e_1200_a9f6_3a4b),
    f64::from_bits(0x3f62_6ba2_6b69_f29a),
];

/// `(Φ(x) − 1/2)/x` in `x²`, `|x| ≤ 0.75`, degree 5; weighted by `|x|/Φ(−|x|)` (the relative
/// error of `x·Φ(x)` it causes): 2^-29.0.
const GELU_Q: [f32; 6] = [
    0.3989423,
    -0.06649074,
    0.009976871,
    -0.00120002,
    0.00013679733,
    -2.2190614e-05,
];
/// `(gelu_dx(x) − 1/2)/x` in `x²`, `|x| ≤ 0.75`, degree 5; weighted by `|x|/gelu_dx(x)`:
/// 2^-28.1.
const GELU_DX_R: [f32; 6] = [
    0.7978846,
    -0.26596242,
    0.059851207,
    -0.009540561,
    0.0012282247,
    -0.00015394532,
];
/// The zero `x0 ≈ −0.7517915` of `gelu_dx` as hi + lo.
const GELU_DX_X0_HI: f32 = -0.75179154;
const GELU_DX_X0_LO: f32 = 1.211445e-08;
/// `gelu_dx(x0 + d)/d` for `|d| ≤ 1/2`, degree 8; relative error 2^-26.3 (the rounding of the
/// constant term).
const GELU_DX_Z: [f32; 9] = [
    0.431494,
    0.38828498,
    -0.018200155,
    -0.114007995,
    -0.014764306,
    0.019412544,
    0.004499554,
    -0.002161476,
    -0.00065177865,
];
/// The zero `x0 = −1 − W(1/e) ≈ −1.2784646` of `silu_dx` as hi + lo.
const SILU_DX_X0_HI: f32 = -1.2784646;
const SILU_DX_X0_LO: f32 = 1.29792825e-08;
/// `silu_dx(x0 + d)/d` for `|d| ≤ 5/16`, degree 6; relative error 2^-26.7 (the rounding of
/// the constant term).
const SILU_DX_Z: [f32; 7] = [
    0.2178117,
    0.1466488,
    0.018874977,
    -0.015223295,
    -0.006608919,
    0.00015062213,
    0.00080304465,
];

/// `2/π` rounded to f32 (only picks the quadrant).
const TWO_OVER_PI: f32 = f32::from_bits(0x3f22_f983);
/// `π/2` as the unevaluated sum of three f32 (Cody–Waite): `PIO2_1` is `π/2` rounded to f32.
const PIO2_1: f32 = f32::from_bits(0x3fc9_0fdb);
/// `π/2 − PIO2_1` rounded to 22 significant bits.
const PIO2_2: f32 = f32::from_bits(0xb33b_bd30);
/// `π/2 − PIO2_1 − PIO2_2` rounded to f32 (what remains is ~1e-22).
const PIO2_3: f32 = f32::from_bits(0x27c2_34c5);
/// Above this magnitude sin/cos/tan reduce with [`reduce_large`] (exact, scalar).
const TRIG_CW_MAX: f32 = 65536.0;
/// `π/2` rounded to f32, and the rest.
const PI_2_HI: f32 = f32::from_bits(0x3fc9_0fdb);
const PI_2_LO: f32 = f32::from_bits(0xb33b_bd2e);
/// `π/4` rounded to f32, and the rest.
const PI_4_HI: f32 = f32::from_bits(0x3f49_0fdb);
const PI_4_LO: f32 = f32::from_bits(0xb2bb_bd2e);
/// `tan(π/8)` and `tan(3π/8)` rounded to f32: the arctangent's reduction boundaries.
const TAN_PI_8: f32 = f32::from_bits(0x3ed4_13cd);
const TAN_3PI_8: f32 = f32::from_bits(0x401a_827a);

/// `√2` rounded to f32.
const SQRT2: f32 = f32::from_bits(0x3fb5_04f3);
/// `1/√(2π)` rounded to f32, and the rest.
const INV_SQRT_2PI: f32 = f32::from_bits(0x3ecc_422a);
const INV_SQRT_2PI_LO: f32 = f32::from_bits(0xb242_bc9b);
/// `2·√(2/π)` as hi + lo.
const GT_C1_HI: f32 = f32::from_bits(0x3fcc_422a);
const GT_C1_LO: f32 = f32::from_bits(0xb342_bc9b);
/// `2·√(2/π) · 0.044715` as hi + lo.
const GT_C2_HI: f32 = f32::from_bits(0x3d92_2279);
const GT_C2_LO: f32 = f32::from_bits(0x3124_d8b5);
/// `1.702` as hi + lo.
const GS_HI: f32 = f32::from_bits(0x3fd9_db23);
const GS_LO: f32 = f32::from_bits(0xb2bc_6a7f);

/// `2^-12`: below it, `sin`, `tan`, `tanh` and `atan` round to `x` itself.
const TINY: f32 = 1.0 / 4096.0;
/// `2^24` and `2^-24`: scales that keep tiny intermediate results normal.
const TWO_24: f32 = 16_777_216.0;
const TWO_M24: f32 = 1.0 / 16_777_216.0;

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

/// `e^(h + l) · 2^s` with one final rounding (`s` a small integer, `l` finite and tiny beside
/// `h`, or `None` for 0).
///
/// `h` is clamped to `[−130, 130]` (beyond, the result is 0 or inf for every `s` used here);
/// `k = round(h · log2 e)` (the `SHIFT` trick), `r = h − k·ln2` by Cody–Waite (exact first
/// step), `e^r = 1 + (r + r²·Q(r))`, then `· 2^(k+s)` applied as two exact power-of-two
/// factors, so that only the last multiplication rounds (into the subnormal range, or to inf).
#[inline(always)]
fn exp_core<V: Simd>(h: V, l: Option<V>, s: f32) -> V {
    exp_core2(h, l, s).0
}

/// [`exp_core`] and the rounding error of its last addition (`1 + (r + r²·Q)`, exact by
/// Fast2Sum), scaled like the result: `e^(h + l)·2^s ≈ E + E_lo` to about 2^-25 relative.
#[inline(always)]
fn exp_core2<V: Simd>(h: V, l: Option<V>, s: f32) -> (V, V) {
    let h = clamp(h, -130.0, 130.0);
    let k = h.mul_add(c(LOG2E), c(SHIFT)) - c(SHIFT);
    let r = (-k).mul_add(c(LN2_HI), h);
    let mut r = (-k).mul_add(c(LN2_LO), r);
    if let Some(l) = l {
        r = r + l;
    }
    let sp = (r * r).mul_add(poly(r, &EXP_Q), r);
    let p = sp + c(1.0);
    let p_lo = (c::<V>(1.0) - p) + sp;
    let n = clamp(k + c(s), -152.0, 130.0).to_int();
    let n1 = V::i_sra::<1>(n);
    let n2 = V::i_sub(n, n1);
    let bias = V::i_splat(127);
    let s1 = V::from_bits(V::i_shl::<23>(V::i_add(n1, bias)));
    let s2 = V::from_bits(V::i_shl::<23>(V::i_add(n2, bias)));
    // (A zero low part is +0, so that it never flips the sign of a zero result.)
    let lo = (p_lo * s1) * s2;
    ((p * s1) * s2, V::select(lo.eq(c(0.0)), c(0.0), lo))
}

/// `ln(x)` for a positive, finite, normal `x`, plus `e_add · ln 2`, as `hi + lo`.
///
/// `x = 2^e · m` with `m ∈ [√½, √2)` (bit arithmetic), `f = m − 1` exactly,
/// `ln(x) = e·ln2 + f + f²·P(f)`; `e·LN2_HI + f` is summed exactly (Fast2Sum).
#[inline(always)]
fn log_parts<V: Simd>(x: V, e_add: V) -> (V, V) {
    let ix = V::i_sub(x.to_bits(), V::i_splat(0x3f35_04f3));
    let e = V::from_int(V::i_sra::<23>(ix)) + e_add;
    let m = V::from_bits(V::i_add(
        V::i_and(ix, V::i_splat(0x007f_ffff)),
        V::i_splat(0x3f35_04f3),
    ));
    let f = m - c(1.0);
    let tail = (f * f) * poly(f, &LOG_P);
    let a = e * c(LN2_HI);
    let s = a + f;
    let err = (a - s) + f;
    (s, e.mul_add(c(LN2_LO), tail) + err)
}

/// `ln(1 + E)` for `E ∈ [0, 1]`, as `hi + lo`: `w = 1 + E` rounded, `ln(w) + (E − (w − 1))/w`.
#[inline(always)]
fn log1p_unit<V: Simd>(e: V) -> (V, V) {
    let w = e + c(1.0);
    let corr = e - (w - c(1.0));
    let (s, lo) = log_parts(w, c(0.0));
    (s, lo + corr / w)
}

/// `E + E_lo = e^(−y²/2)·2^24` and `G(y) = Φ(−y)·e^(y²/2)` for `0 ≤ y ≤ 20` (so
/// `Φ(−y) = (E + E_lo)·G·2^-24`).
#[inline(always)]
fn normal_tail<V: Simd>(y: V) -> (V, V, V) {
    let (h, l) = two_prod(y, y);
    let (e, e_lo) = exp_core2(h * c(-0.5), Some(l * c(-0.5)), 24.0);
    (e, e_lo, g_tail(y))
}

/// `G(y) = Φ(−y)·e^(y²/2) = N(y)/D(y)`, in f64.
#[inline(always)]
fn g_tail<V: Simd>(y: V) -> V {
    V::map_f64::<GCore>(y, y, y)
}

/// [`g_tail`]'s f64 part (the unused operands keep [`Simd::map_f64`]'s shape).
struct GCore;
impl F64Kernel for GCore {
    #[inline(always)]
    fn run<D: SimdF64>(y: D, _: D, _: D) -> D {
        poly64(y, &G_NUM) / poly64(y, &G_DEN)
    }
}

/// Reduces `x` by multiples of `π/2`: `x = q·π/2 + r_hi + r_lo`, `|r| ≲ π/4`; returns
/// `(q, r_hi, r_lo)` with `q` an integral float whose low two bits (of `q as i32`) give the
/// quadrant.
///
/// Cody–Waite with `π/2 = P1 + P2 + P3`: `r1 = x − k·P1` is exact (one fma); `k·P2` is formed
/// exactly as hi + lo (fma) and `r1 − hi` split exactly (TwoSum); the low parts and `k·P3`
/// make `r_lo`.
#[inline(always)]
fn reduce_pio2<V: Simd>(x: V) -> (V, V, V) {
    let k = x.mul_add(c(TWO_OVER_PI), c(SHIFT)) - c(SHIFT);
    let r1 = (-k).mul_add(c(PIO2_1), x);
    let (p2, p2_lo) = two_prod(k, c(PIO2_2));
    let (r2, e2) = two_sum(r1, -p2);
    let t3 = (-k).mul_add(c(PIO2_3), e2 - p2_lo);
    let r = r2 + t3;
    let r_lo = (r2 - r) + t3;
    // Beyond `TRIG_CW_MAX` (and for inf/NaN), the exact scalar reduction.
    let big = V::m_not(abs(x).le(c(TRIG_CW_MAX)));
    if V::any(big) {
        x.patch3(big, (k, r, r_lo), reduce_large)
    } else {
        (k, r, r_lo)
    }
}

/// `2/π` in binary, 448 bits after the point, preceded by a zero word (so that bit `j ≥ −63`
/// after the point is bit `j + 63` of this string, counting from 0 at the top of word 0).
const TWO_OVER_PI_BITS: [u64; 8] = [
    0,
    0xa2f9_836e_4e44_1529,
    0xfc27_57d1_f534_ddc0,
    0xdb62_9599_3c43_9041,
    0xfe51_63ab_debb_c561,
    0xb724_6e3a_424d_d2e0,
    0x0649_2eea_09d1_921c,
    0xfe1d_eb1c_b129_a73e,
];

/// Payne–Hanek reduction for `|x| > TRIG_CW_MAX`: `(q mod 4, r_hi, r_lo)` with
/// `x = q·π/2 + r`, `|r| ≤ π/4`, `r` split into two f32 from an f64 with relative error below
/// 2^-50 (integer arithmetic on 128-bit windows of `2/π`). NaN and ±inf give `(0, NaN, 0)`.
fn reduce_large(x: f32) -> (f32, f32, f32) {
    if !x.is_finite() {
        return (0.0, f32::NAN, 0.0);
    }
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32;
    // |x| = m · 2^e, m < 2^24 an integer; here e ≥ 16 − 23.
    let m = ((bits & 0x007f_ffff) | 0x0080_0000) as u128;
    let e = exp - 150;
    // x·2/π mod 4 = (m · W mod 2^128) · 2^-126 with W the 128 bits j = e−1 … e+126 of 2/π.
    let p = (e - 1 + 63) as usize;
    let (wi, off) = (p / 64, p % 64);
    let hi = ((TWO_OVER_PI_BITS[wi] as u128) << 64) | TWO_OVER_PI_BITS[wi + 1] as u128;
    let w = if off == 0 {
        hi
    } else {
        (hi << off) | (TWO_OVER_PI_BITS[wi + 2] >> (64 - off)) as u128
    };
    let prod = m.wrapping_mul(w);
    let q = prod.wrapping_add(1 << 125) >> 126;
    let frac = prod.wrapping_sub(q << 126) as i128;
    // π/2 · 2^-126.
    const SCALE: f64 = core::f64::consts::FRAC_PI_2 / (1u128 << 126) as f64;
    let r = frac as f64 * SCALE;
    let (q, r) = if x < 0.0 {
        ((4 - q as u32) & 3, -r)
    } else {
        (q as u32 & 3, r)
    };
    let r_hi = r as f32;
    (q as f32, r_hi, (r - r_hi as f64) as f32)
}

/// `sin(r)` and `cos(r)` for `r = r_hi + r_lo`, `|r| ≲ π/4`: `sin ≈ r + (r³·S(r²) + r_lo)`,
/// `cos ≈ w + (((1 − w) − r²/2) + r⁴·C(r²) − r·r_lo)` with `w = 1 − r²/2` rounded (the
/// bracket recovers its rounding error exactly).
#[inline(always)]
fn sincos_poly<V: Simd>(r: V, r_lo: V) -> (V, V) {
    let z = r * r;
    let s = r + (r * z).mul_add(poly(z, &SIN_P), r_lo);
    let hz = z * c(0.5);
    let w = c::<V>(1.0) - hz;
    let tail = (z * z).mul_add(poly(z, &COS_P), (c::<V>(1.0) - w) - hz);
    let cs = w + (-r).mul_add(r_lo, tail);
    (s, cs)
}

/// `sin(x)` (`quarter = 0`) or `cos(x)` (`quarter = 1`, a quarter turn later).
#[inline(always)]
fn sin_cos<V: Simd>(x: V, quarter: i32) -> V {
    let (q, r, r_lo) = reduce_pio2(x);
    let (s, cs) = sincos_poly(r, r_lo);
    let qi = V::i_add(q.to_int(), V::i_splat(quarter));
    let one = V::i_splat(1);
    let swap = V::i_eq(V::i_and(qi, one), one);
    let two = V::i_splat(2);
    let negate = V::i_eq(V::i_and(qi, two), two);
    let v = V::select(swap, cs, s);
    let v = V::select(negate, -v, v);
    if quarter == 0 {
        // sin(x) = x (correctly rounded) for |x| < 2^-12, and keeps the sign of ±0.
        V::select(lt(abs(x), TINY), x, v)
    } else {
        v
    }
}

/// `tan(x)`: `t = r + (r³·T(r²) + r_lo·(1 + r²))` as hi + lo (Fast2Sum); odd quadrants
/// `−1/t` with the quotient corrected by `t`'s low part and the division's residual.
#[inline(always)]
fn tan<V: Simd>(x: V) -> V {
    let (q, r, r_lo) = reduce_pio2(x);
    let z = r * r;
    let inner = (r * z).mul_add(poly(z, &TAN_P), r_lo.mul_add(z, r_lo));
    let t = r + inner;
    let t_lo = (r - t) + inner;
    let one = V::i_splat(1);
    let odd = V::i_eq(V::i_and(q.to_int(), one), one);
    let cot = div_corrected(c(-1.0), c(0.0), t, t_lo);
    let v = V::select(odd, cot, t);
    V::select(lt(abs(x), TINY), x, v)
}

/// `atan(x)`: `|x| > tan(3π/8)`: `π/2 + atan(−1/|x|)`; `|x| > tan(π/8)`:
/// `π/4 + atan((|x| − 1)/(|x| + 1))`; else the polynomial; sign restored. The rounding errors
/// of the reduced argument `y = num/den` (of `num`, `den` and the division, all exact by
/// Fast2Sum and FMA) are carried as a first-order correction `δ·(1 − y²)`.
#[inline(always)]
fn atan<V: Simd>(x: V) -> V {
    let a = abs(x);
    let one = c::<V>(1.0);
    let big = gt(a, TAN_3PI_8);
    let mid = V::m_and(gt(a, TAN_PI_8), V::m_not(big));
    // mid: num = a − 1 and den = a + 1, with their exact rounding errors.
    let nm = a - one;
    let nm_err = a - (nm + one);
    let (hi, lo) = (one.max(a), one.min(a));
    let dn = hi + lo;
    let dn_err = lo - (dn - hi);
    let zero = c::<V>(0.0);
    let num = V::select(big, c(-1.0), V::select(mid, nm, a));
    // (|x| is bounded so that the remainder below stays finite for |x| = inf.)
    let den = V::select(big, c::<V>(1e30).min(a), V::select(mid, dn, one));
    let num_err = V::select(mid, nm_err, zero);
    let den_err = V::select(mid, dn_err, zero);
    let y = num / den;
    let rem = (-y).mul_add(den, num);
    let dy = (-y).mul_add(den_err, rem + num_err) / den;
    let z = y * y;
    let p = (y * z).mul_add(poly(z, &ATAN_P), y);
    let off_hi = V::select(big, c(PI_2_HI), V::select(mid, c(PI_4_HI), zero));
    let off_lo = V::select(big, c(PI_2_LO), V::select(mid, c(PI_4_LO), zero));
    let v = off_hi + (p + dy.mul_add(one - z, off_lo));
    let v = V::select(lt(a, TINY), a, v);
    xor_sign(v, x)
}

/// `e^x`.
#[inline(always)]
fn exp<V: Simd>(x: V) -> V {
    // Below −104 the result is +0 (table above). Lanes computed there would pass through
    // subnormal products, which x86 cores finish in microcode, many times slower: a causal
    // mask's −9984 made attention's exponential about 1.5× as slow. They are computed at 0
    // instead and replaced by +0.
    let zero = lt(x, -104.0);
    V::select(
        zero,
        c(0.0),
        exp_core(V::select(zero, c(0.0), x), None, 0.0),
    )
}

/// `ln(x)`: subnormal `x` is scaled by 2^23 first; `ln(±0) = −inf`, `ln(inf) = inf`,
/// `ln(x < 0) = NaN`.
#[inline(always)]
fn log<V: Simd>(x: V) -> V {
    let sub = lt(x, f32::MIN_POSITIVE);
    let xs = V::select(sub, x * c(8_388_608.0), x);
    let (s, lo) = log_parts(xs, V::select(sub, c(-23.0), c(0.0)));
    let v = s + lo;
    let v = V::select(x.eq(c(f32::INFINITY)), x, v);
    let v = V::select(x.eq(c(0.0)), c(f32::NEG_INFINITY), v);
    V::select(V::m_not(c::<V>(0.0).le(x)), c(f32::NAN), v)
}

/// `tanh(x)`: `|x| < 0.55`: `x + x³·P(x²)`; else `±(1 − q)`, `q = 2/(E + 1)`,
/// `E = e^(2·min(|x|, 20))` (tanh rounds to ±1 long before 20), `q` corrected by the exact
/// residuals of `E + 1` and of the division and by `E`'s own rounding error.
#[inline(always)]
fn tanh<V: Simd>(x: V) -> V {
    let z = x * x;
    let small = (x * z).mul_add(poly(z, &TANH_P), x);
    let a = abs(x);
    let ac = c::<V>(20.0).min(a);
    let (e, e_lo) = exp_core2(ac + ac, None, 0.0);
    let one = c::<V>(1.0);
    let two = c::<V>(2.0);
    let d = e + one;
    // Fast2Sum (E ≥ 1 here): d + d_lo = E + 1 exactly, plus E's error.
    let d_lo = (one - (d - e)) + e_lo;
    let q = two / d;
    let rem = (-q).mul_add(d, two);
    let q = q + (-q).mul_add(d_lo, rem) / d;
    let big = xor_sign(one - q, x);
    // tanh(x) = x (correctly rounded) for |x| < 2^-12, and keeps the sign of ±0.
    let small = V::select(lt(a, TINY), x, small);
    V::select(lt(a, 0.55), small, big)
}

/// `e^(−|z|) · 2^24` as hi + lo (see [`exp_core2`]) for `z = zh + zl` (an unevaluated sum
/// with `|zl| ≪ |zh|`).
#[inline(always)]
fn exp_neg_abs_scaled<V: Simd>(zh: V, zl: V) -> (V, V) {
    let neg = lt(zh, 0.0);
    exp_core2(V::select(neg, zh, -zh), Some(V::select(neg, zl, -zl)), 24.0)
}

/// `num · sigmoid(z)` given `E + E_lo = e^(−|z|)·2^24` and `num` (`num_c`: `num` clamped so
/// that it is finite): `num/(1 + F)` for `z ≥ 0`, `num_c·E / ((1 + F)·2^24)` for `z < 0`
/// (`F = E·2^-24`), each quotient corrected by its exact residuals (the rounding errors of
/// `1 + F`, of `num_c·E` and of the division, and `E_lo`) so that only the final addition of the
/// correction rounds.
#[inline(always)]
fn times_sigmoid<V: Simd>(z_neg: V::M, num: V, num_c: V, e: V, e_lo: V) -> V {
    let one = c::<V>(1.0);
    let d = e.mul_add(c(TWO_M24), one);
    // The exact error of d (d − 1 is exact), plus E_lo's share.
    let d_lo = e_lo.mul_add(c(TWO_M24), e.mul_add(c(TWO_M24), -(d - one)));
    // z ≥ 0: num / (d + d_lo).
    let q = num / d;
    let rem = (-q).mul_add(d, num);
    let pos = q + (-q).mul_add(d_lo, rem) / d;
    // (A zero quotient keeps its sign, an infinite one — num = ±inf — stays.)
    let keep = V::m_or(q.eq(c(0.0)), abs(q).eq(c(f32::INFINITY)));
    let pos = V::select(keep, q, pos);
    // z < 0: num_c·(E + E_lo) / ((d + d_lo)·2^24).
    let t = num_c * e;
    let t_err = num_c.mul_add(e, -t);
    let big_d = d * c(TWO_24);
    let qn = t / big_d;
    let rem_n = (-qn).mul_add(big_d, t);
    let corr = num_c.mul_add(e_lo, rem_n + t_err);
    let corr = (-qn * c(TWO_24)).mul_add(d_lo, corr);
    let neg = qn + corr / big_d;
    let neg = V::select(qn.eq(c(0.0)), qn, neg);
    V::select(z_neg, neg, pos)
}

/// `sigmoid(x) = 1/(1 + e^−x)`.
#[inline(always)]
fn sigmoid<V: Simd>(x: V) -> V {
    let (e, e_lo) = exp_core2(-abs(x), None, 24.0);
    times_sigmoid(lt(x, 0.0), c(1.0), c(1.0), e, e_lo)
}

/// `x · sigmoid(x)`.
#[inline(always)]
fn silu<V: Simd>(x: V) -> V {
    let (e, e_lo) = exp_core2(-abs(x), None, 24.0);
    times_sigmoid(lt(x, 0.0), x, c::<V>(-200.0).max(x), e, e_lo)
}

/// `x · sigmoid(1.702·x)`, with `1.702·x` formed exactly as hi + lo.
#[inline(always)]
fn gelu_sigmoid<V: Simd>(x: V) -> V {
    let xc = clamp(x, -200.0, 200.0);
    let (zh, zl0) = two_prod(xc, c(GS_HI));
    let zl = xc.mul_add(c(GS_LO), zl0);
    let (e, e_lo) = exp_neg_abs_scaled(zh, zl);
    times_sigmoid(lt(x, 0.0), x, xc, e, e_lo)
}

/// `x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³))) = x · sigmoid(w)`,
/// `w = x·(c1 + c2·x²)`, `c1 = 2√(2/π)`, `c2 = 0.044715·c1`, `w` as hi + lo.
#[inline(always)]
fn gelu_tanh<V: Simd>(x: V) -> V {
    let xc = clamp(x, -20.0, 20.0);
    let (x2h, x2l) = two_prod(xc, xc);
    let (ph, pl0) = two_prod(x2h, c(GT_C2_HI));
    let pl = pl0 + x2h.mul_add(c(GT_C2_LO), x2l * c(GT_C2_HI));
    let (sh, sl0) = two_sum(c(GT_C1_HI), ph);
    let sl = sl0 + (pl + c(GT_C1_LO));
    let (wh, wl0) = two_prod(xc, sh);
    let wl = xc.mul_add(sl, wl0);
    let (e, e_lo) = exp_neg_abs_scaled(wh, wl);
    times_sigmoid(lt(x, 0.0), x, xc, e, e_lo)
}

/// `x · Φ(x)`: `Φ(−|x|) = e^(−x²/2)·G(|x|)`; `x < 0`: `((x·G)·E)·2^-24`;
/// `x ≥ 0`: `x − x·Φ(−x)` (one fused operation).
#[inline(always)]
fn gelu<V: Simd>(x: V) -> V {
    let xc = clamp(x, -20.0, 20.0);
    let (e, e_lo, g) = normal_tail(abs(xc));
    let xg = xc * g;
    let neg = xg.mul_add(e, xg * e_lo) * c(TWO_M24);
    let tail = e.mul_add(g, e_lo * g) * c(TWO_M24);
    let pos = (-xc).mul_add(tail, x);
    let v = V::select(x.le(c(0.0)), neg, pos);
    // |x| < 0.75: x·(1/2 + x·Q(x²)).
    let small = x * x.mul_add(poly(x * x, &GELU_Q), c(0.5));
    V::select(lt(abs(x), 0.75), small, v)
}

/// `Φ(x) + x·φ(x)`: with `t = |x|/√(2π) − G(|x|)`, `x < 0`: `−t·E·2^-24`; `x ≥ 0`:
/// `1 + t·E·2^-24`; for `−1/4 < x < 3/4`: `1/2 + x·R(x²)`; within 1/2 of the zero `x0`:
/// a polynomial in `x − x0`.
#[inline(always)]
fn gelu_dx<V: Simd>(x: V) -> V {
    let ac = c::<V>(20.0).min(abs(x));
    let (e, e_lo, g) = normal_tail(ac);
    let t = ac.mul_add(c(INV_SQRT_2PI_LO), ac.mul_add(c(INV_SQRT_2PI), -g));
    let t24 = -t * c(TWO_M24);
    let neg = t24.mul_add(e, t24 * e_lo);
    let pos = (e * c(TWO_M24)).mul_add(t, c(1.0));
    let v = V::select(lt(x, 0.0), neg, pos);
    // −1/4 < x < 3/4: 1/2 + x·R(x²).
    let small = x.mul_add(poly(x * x, &GELU_DX_R), c(0.5));
    let v = V::select(V::m_and(gt(x, -0.25), lt(x, 0.75)), small, v);
    near_zero(x, v, GELU_DX_X0_HI, GELU_DX_X0_LO, 0.5, &GELU_DX_Z)
}

/// Within `w` of the zero `x0 = hi + lo`: `d·P(d)`, `d = (x − hi) − lo`; elsewhere `v`.
#[inline(always)]
fn near_zero<V: Simd, const N: usize>(x: V, v: V, hi: f32, lo: f32, w: f32, p: &[f32; N]) -> V {
    let d = (x - c(hi)) - c(lo);
    V::select(lt(abs(d), w), d * poly(d, p), v)
}

/// `(n + n_lo) / (d + d_lo)` for finite `d > 0` as `q + lo`: `q = n/d` and the correction
/// `lo = (rem + n_lo − q·d_lo)/d`, `rem = n − q·d` exact (one fma); 0 when `q` is zero or
/// infinite.
#[inline(always)]
fn div_hilo<V: Simd>(n: V, n_lo: V, d: V, d_lo: V) -> (V, V) {
    let q = n / d;
    let rem = (-q).mul_add(d, n);
    let lo = (-q).mul_add(d_lo, rem + n_lo) / d;
    let keep = V::m_or(q.eq(c(0.0)), abs(q).eq(c(f32::INFINITY)));
    (q, V::select(keep, c(0.0), lo))
}

/// [`div_hilo`] summed (a zero quotient keeps its sign).
#[inline(always)]
fn div_corrected<V: Simd>(n: V, n_lo: V, d: V, d_lo: V) -> V {
    let (q, lo) = div_hilo(n, n_lo, d, d_lo);
    V::select(q.eq(c(0.0)), q, q + lo)
}

/// `sigmoid(x)·(1 + x·(1 − sigmoid(x)))`: with `F = e^−|x|`, `d = 1 + F`:
/// `x ≥ 0`: `(d + x·F)/d²`; `x < 0`: `F·((1 + x) + F)/d²`, each numerator and `d²` carried as
/// hi + lo (exact residuals by TwoSum/fma, and `F`'s own rounding error) and the quotient
/// corrected ([`div_corrected`]); within 5/16 of the zero `x0`: a polynomial in `x − x0`.
#[inline(always)]
fn silu_dx<V: Simd>(x: V) -> V {
    let one = c::<V>(1.0);
    let xc = clamp(x, -200.0, 200.0);
    let (e, e_lo) = exp_core2(-abs(x), None, 24.0);
    let f = e * c(TWO_M24);
    let f_lo = e_lo * c(TWO_M24);
    let d = e.mul_add(c(TWO_M24), one);
    let d_lo = e.mul_add(c(TWO_M24), -(d - one)) + f_lo;
    let d2 = d * d;
    let d2_lo = d.mul_add(d, -d2) + (d + d) * d_lo;
    // x ≥ 0: (d + x·F) / d².
    let (p, p_err) = two_prod(xc, f);
    let (n, n_err) = two_sum(d, p);
    let n_lo = xc.mul_add(f_lo, n_err + p_err + d_lo);
    let pos = div_corrected(n, n_lo, d2, d2_lo);
    // x < 0: F·((1 + x) + F) / d², scaled by 2^24.
    let (ox, ox_err) = two_sum(one, xc);
    let (t, t_err) = two_sum(ox, f);
    let t_lo = t_err + ox_err + f_lo;
    let (m, m_err) = two_prod(e, t);
    let m_lo = e_lo.mul_add(t, e.mul_add(t_lo, m_err));
    let big = c::<V>(TWO_24);
    let neg = div_corrected(m, m_lo, d2 * big, d2_lo * big);
    let v = V::select(lt(x, 0.0), neg, pos);
    near_zero(x, v, SILU_DX_X0_HI, SILU_DX_X0_LO, 0.3125, &SILU_DX_Z)
}

/// `ln(1 + e^x) = max(x, 0) + log1p(e^−|x|)`; `x > 32`: `x`.
#[inline(always)]
fn softplus<V: Simd>(x: V) -> V {
    let e = exp(-abs(x));
    let (s, lo) = log1p_unit(e);
    let m = c::<V>(0.0).max(x);
    let (sum, err) = two_sum(m, s);
    let v = sum + (err + lo);
    V::select(gt(x, 32.0), x, v)
}

/// `x · tanh(softplus(x))`: with `E = e^x`, `tanh(ln(1 + E)) = n/(n + 2)`, `n = E·E + 2E`;
/// `x ≥ 0` uses `F = e^−x`: `(1 + 2F)/(1 + 2F + 2F²)`. Numerators and denominators are
/// carried as hi + lo (exact residuals, and `E`'s own rounding error) and the quotient
/// corrected ([`div_hilo`]); then `x·(q + lo)` with one rounding (for `x < 0` on values scaled
/// by 2^24, so that tiny results round once into the subnormal range).
#[inline(always)]
fn mish<V: Simd>(x: V) -> V {
    let one = c::<V>(1.0);
    let xc = c::<V>(-200.0).max(x);
    let (e, e_lo) = exp_core2(-abs(x), None, 24.0);
    let f = e * c(TWO_M24);
    let f_lo = e_lo * c(TWO_M24);
    // x ≥ 0: num = 1 + 2F, den = num + 2F².
    let f2 = f + f;
    let num = f2 + one;
    let num_lo = (f2 - (num - one)) + (f_lo + f_lo);
    let (p, p_err) = two_prod(f2, f);
    let (den, den_err) = two_sum(num, p);
    let den_lo = (f2 + f2).mul_add(f_lo, den_err + p_err + num_lo);
    let (r, r_lo) = div_hilo(num, num_lo, den, den_lo);
    // (x bounded in the correction term, so that x = inf gives inf, not inf·0.)
    let pos = x.mul_add(r, c::<V>(1e30).min(x) * r_lo);
    // x < 0, scaled by 2^24: n' = E'·F + 2E', den' = n' + 2^25.
    let (q, q_err) = two_prod(e, f);
    let (n, n_err) = two_sum(q, e + e);
    let n_lo = e_lo.mul_add(f + c(2.0), e.mul_add(f_lo, n_err + q_err));
    let (dn, dn_err) = two_sum(n, c(2.0 * TWO_24));
    let (r, r_lo) = div_hilo(n, n_lo, dn * c(TWO_M24), (dn_err + n_lo) * c(TWO_M24));
    let neg = xc.mul_add(r, xc * r_lo) * c(TWO_M24);
    V::select(lt(x, 0.0), neg, pos)
}

/// `erf(x)`: `|x| < 1`: `x·(2/√π + z·P(z))` (hi + lo constant); else
/// `±(1 − 2·e^(−x²)·G(|x|·√2))` with `|x|` clamped to 4 (where `erf` rounds to ±1).
#[inline(always)]
fn erf<V: Simd>(x: V) -> V {
    let a = abs(x);
    let z = a * a;
    let small = a.mul_add(c(TWO_OVER_SQRT_PI_HI), a * poly(z, &ERF_P));
    let ac = c::<V>(4.0).min(a);
    let (h, l) = two_prod(ac, ac);
    let e = exp_core(-h, Some(-l), 0.0);
    let g = g_tail(ac * c(SQRT2));
    let big = (e + e).mul_add(-g, c(1.0));
    xor_sign(V::select(lt(a, 1.0), small, big), x)
}

/// `2/√π · e^(−x²)`, with `x²` exact as hi + lo and the constant as hi + lo.
#[inline(always)]
fn erf_dx<V: Simd>(x: V) -> V {
    let ac = c::<V>(20.0).min(abs(x));
    let (h, l) = two_prod(ac, ac);
    let (e, e_lo) = exp_core2(-h, Some(-l), 24.0);
    let lo = e.mul_add(c(TWO_OVER_SQRT_PI_LO), e_lo * c(TWO_OVER_SQRT_PI_HI));
    e.mul_add(c(TWO_OVER_SQRT_PI_HI * TWO_M24), lo * c(TWO_M24))
}

/// `max(x, 0)`: `x` if `x > 0`, else `+0.0`; NaN stays NaN.
#[inline(always)]
fn relu<V: Simd>(x: V) -> V {
    V::select(V::m_or(gt(x, 0.0), is_nan(x)), x, c(0.0))
}

/// −1, +0 or 1 by the sign of `x`; NaN stays NaN.
#[inline(always)]
fn sign<V: Simd>(x: V) -> V {
    let v = V::select(gt(x, 0.0), c(1.0), c(0.0));
    let v = V::select(lt(x, 0.0), c(-1.0), v);
    V::select(is_nan(x), x, v)
}

/// The activation function `f` of `x` (before NaN canonicalization).
#[inline(always)]
fn act<V: Simd>(f: ActFn, x: V) -> V {
    match f {
        ActFn::Identity => x,
        ActFn::Exp => exp(x),
        ActFn::Log => log(x),
        ActFn::Tanh => tanh(x),
        ActFn::Sqrt => x.sqrt(),
        ActFn::Rsqrt => c::<V>(1.0) / x.sqrt(),
        ActFn::Reciprocal => c::<V>(1.0) / x,
        ActFn::Square => x * x,
        ActFn::Relu => relu(x),
        ActFn::Gelu => gelu(x),
        ActFn::GeluDx => gelu_dx(x),
        ActFn::GeluApproxTanh => gelu_tanh(x),
        ActFn::GeluApproxSigmoid => gelu_sigmoid(x),
        ActFn::Sigmoid => sigmoid(x),
        ActFn::Silu => silu(x),
        ActFn::SiluDx => silu_dx(x),
        ActFn::Softplus => softplus(x),
        ActFn::Mish => mish(x),
        ActFn::Erf => erf(x),
        ActFn::ErfDx => erf_dx(x),
        ActFn::Sin => sin_cos(x, 0),
        ActFn::Cos => sin_cos(x, 1),
        ActFn::Tan => tan(x),
        ActFn::Arctan => atan(x),
        ActFn::Abs => abs(x),
        ActFn::Sign => sign(x),
        ActFn::Floor => x.floor(),
        ActFn::Ceil => x.ceil(),
        ActFn::Trunc => x.trunc(),
    }
}

/// NaN lanes become the canonical NaN. (Decided on the bits: a compiler may treat a float
/// select between NaNs as interchangeable.)
#[inline(always)]
pub(crate) fn canonical<V: Simd>(x: V) -> V {
    let abs = V::i_and(x.to_bits(), V::i_splat(0x7fff_ffff));
    let nan = V::i_gt(abs, V::i_splat(0x7f80_0000));
    V::from_bits(V::i_select(nan, V::i_splat(0x7fc0_0000), x.to_bits()))
}

/// The activation `f` applied to the pre-activation `x·scale + bias` (one fused multiply-add),
/// canonical NaN: what every path computes for one element.
#[inline(always)]
pub(crate) fn act_affine<V: Simd>(f: ActFn, x: V, scale: V, bias: V) -> V {
    canonical(act(f, x.mul_add(scale, bias)))
}

// ---- power ----

/// `log2(x) = 2/ln2 · atanh(u)`, `u = (m−1)/(m+1)`: the series `Σ 2/(ln2·(2j+1)) · u^(2j)`,
/// truncated after `j = 8` (`|u| ≤ 0.1716`: the omitted terms are below 2^-50 relative).
const POW_LOG2: [f64; 9] = [
    f64::from_bits(0x4007_1547_652b_82fe),
    f64::from_bits(0x3fee_c709_dc3a_03fd),
    f64::from_bits(0x3fe2_776c_50ef_9bfe),
    f64::from_bits(0x3fda_6176_2a7a_ded9),
    f64::from_bits(0x3fd4_84b1_3d7c_02a9),
    f64::from_bits(0x3fd0_c9a8_4994_022d),
    f64::from_bits(0x3fcc_68f5_68d3_1760),
    f64::from_bits(0x3fc8_9f3b_1694_cffe),
    f64::from_bits(0x3fc5_b9ac_9b74_3f0d),
];
/// `2^r = Σ (r·ln2)^i / i!`, `i ≤ 11`, `|r| ≤ 1/2` (omitted terms below 2^-45).
const POW_EXP2: [f64; 12] = [
    1.0,
    f64::from_bits(0x3fe6_2e42_fefa_39ef),
    f64::from_bits(0x3fce_bfbd_ff82_c58f),
    f64::from_bits(0x3fac_6b08_d704_a0c0),
    f64::from_bits(0x3f83_b2ab_6fba_4e77),
    f64::from_bits(0x3f55_d87f_e78a_6731),
    f64::from_bits(0x3f24_3091_2f86_c787),
    f64::from_bits(0x3eef_fcbf_c588_b0c7),
    f64::from_bits(0x3eb6_2c02_23a5_c824),
    f64::from_bits(0x3e7b_5253_d395_e7c4),
    f64::from_bits(0x3e3e_4cf5_158b_8eca),
    f64::from_bits(0x3dfe_8cac_7351_bb25),
];

/// `2^(y · (e + log2 m))` in f64 for `m ∈ [√½, √2)`, `e` and `y` finite (widened exactly from
/// f32). The product `t` is clamped to `[−300, 300]` (the f32 result is 0 or inf beyond
/// ±151), `t = k + r` with `k = round(t)`, `2^r` by [`POW_EXP2`], and `k` added to the exponent.
#[inline(always)]
pub(crate) fn pow_core<D: SimdF64>(m: D, e: D, y: D) -> D {
    let one = D::splat(1.0);
    let u = (m - one) / (m + one);
    let l = u * poly64(u * u, &POW_LOG2);
    let t = y * (e + l);
    let t = D::splat(300.0).min(D::splat(-300.0).max(t));
    let shift = D::splat(6_755_399_441_055_744.0); // 1.5 · 2^52
    let kk = t + shift;
    let r = t - (kk - shift);
    poly64(r, &POW_EXP2).ldexp_magic(kk)
}

/// [`pow_core`] as an [`F64Kernel`].
struct PowCore;
impl F64Kernel for PowCore {
    #[inline(always)]
    fn run<D: SimdF64>(m: D, e: D, y: D) -> D {
        pow_core(m, e, y)
    }
}

/// `x^y` with C99/NumPy special cases (see [`pow`]).
#[inline(always)]
pub(crate) fn pow_v<V: Simd>(x: V, y: V) -> V {
    let ax = abs(x);
    // |x| = 2^e · m, m ∈ [√½, √2), subnormals scaled by 2^23 first.
    let sub = lt(ax, f32::MIN_POSITIVE);
    let axs = V::select(sub, ax * c(8_388_608.0), ax);
    let ix = V::i_sub(axs.to_bits(), V::i_splat(0x3f35_04f3));
    let e = V::from_int(V::i_sra::<23>(ix)) + V::select(sub, c(-23.0), c(0.0));
    let m = V::from_bits(V::i_add(
        V::i_and(ix, V::i_splat(0x007f_ffff)),
        V::i_splat(0x3f35_04f3),
    ));
    let mag = V::map_f64::<PowCore>(m, e, y);

    let y_int = y.trunc().eq(y);
    let half = y * c(0.5);
    let y_odd = V::m_and(y_int, V::m_not(half.trunc().eq(half)));
    // The sign bit (so that −0 and −inf count as negative).
    let sign = V::i_splat(i32::MIN);
    let x_neg = V::i_eq(V::i_and(x.to_bits(), sign), sign);
    let odd_neg = V::m_and(x_neg, y_odd);
    let inf = c::<V>(f32::INFINITY);
    let x_fin = ax.lt(inf);
    let y_inf = abs(y).eq(inf);
    let y_neg = lt(y, 0.0);

    let mut v = V::select(odd_neg, -mag, mag);
    // Negative finite x with a finite non-integer y.
    v = V::select(
        V::m_and(V::m_and(x_neg, x_fin), V::m_not(V::m_or(y_int, y_inf))),
        c(f32::NAN),
        v,
    );
    // x = ±0, x = ±inf or y = ±inf: the result is 0 or inf.
    let x_zero = ax.eq(c(0.0));
    let x_inf = ax.eq(inf);
    let big = V::m_or(
        V::m_or(V::m_and(x_zero, y_neg), V::m_and(x_inf, V::m_not(y_neg))),
        V::m_and(y_inf, mask_eq::<V>(lt(ax, 1.0), y_neg)),
    );
    let edge = V::select(big, inf, c(0.0));
    let edge = V::select(odd_neg, -edge, edge);
    v = V::select(V::m_or(V::m_or(x_zero, x_inf), y_inf), edge, v);
    // (−1)^±inf = 1.
    v = V::select(V::m_and(y_inf, ax.eq(c(1.0))), c(1.0), v);
    v = V::select(V::m_or(is_nan(x), is_nan(y)), c(f32::NAN), v);
    // x^±0 = 1 and 1^y = 1, even for NaN.
    v = V::select(V::m_or(y.eq(c(0.0)), x.eq(c(1.0))), c(1.0), v);
    canonical(v)
}

/// Lane-wise `a == b` of two masks.
#[inline(always)]
fn mask_eq<V: Simd>(a: V::M, b: V::M) -> V::M {
    V::m_or(V::m_and(a, b), V::m_and(V::m_not(a), V::m_not(b)))
}

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// The definition of the activation function `f` at `x`: what every [`Isa`] path computes for
/// one element (see the [module docs](self) for each function's algorithm and accuracy).
/// A NaN result is the canonical NaN `0x7fc0_0000`.
pub fn eval(f: ActFn, x: f32) -> f32 {
    canonical(act(f, x))
}

/// The definition of the ALU's `power`: `x^y` in fp32 (computed through f64, see the
/// [module docs](self)), with the C99 / NumPy special cases: `x^±0 = 1` and `1^y = 1` (even
/// for NaN), NaN for a negative finite `x` with a finite non-integer `y`, a negative `x` with
/// an integer `y` gives `±|x|^y` by the parity of `y`, `±0^y` and `±inf^y` by the sign and
/// parity of `y`, `x^±inf` by `|x| < 1` or `> 1` (`(−1)^±inf = 1`). NaN results are the
/// canonical NaN.
pub fn pow(x: f32, y: f32) -> f32 {
    pow_v(x, y)
}

/// `dst[i] = eval(f, src[i].mul_add(scale, bias))` for every `i`: the pre-activation
/// `x·scale + bias` is one fused multiply-add (pass `scale = 1.0, bias = -0.0` for none:
/// that leaves every `x`, `-0.0` included, unchanged). Rows are processed as a stream with
/// `f` dispatched once per call; every `isa` produces the same bits.
///
/// # Panics
/// If `src` and `dst` differ in length, or if the CPU does not support `isa`.
pub fn apply(isa: Isa, f: ActFn, src: &[f32], dst: &mut [f32], scale: f32, bias: f32) {
    assert_eq!(
        src.len(),
        dst.len(),
        "activation source and destination lengths differ"
    );
    macro_rules! dispatch {
        ($($v:ident),* $(,)?) => {
            match f {
                $(ActFn::$v => run::<{ ActFn::$v as u8 }>(isa, src, dst, scale, bias),)*
            }
        };
    }
    dispatch!(
        Identity,
        Exp,
        Log,
        Tanh,
        Sqrt,
        Rsqrt,
        Reciprocal,
        Square,
        Relu,
        Gelu,
        GeluDx,
        GeluApproxTanh,
        GeluApproxSigmoid,
        Sigmoid,
        Silu,
        SiluDx,
        Softplus,
        Mish,
        Erf,
        ErfDx,
        Sin,
        Cos,
        Tan,
        Arctan,
        Abs,
        Sign,
        Floor,
        Ceil,
        Trunc,
    );
}

/// `dst[i] = pow(a[i], b[i])` for every `i`, identical on every `isa`.
///
/// # Panics
/// If the lengths differ, or if the CPU does not support `isa`.
pub fn apply_pow(isa: Isa, a: &[f32], b: &[f32], dst: &mut [f32]) {
    assert!(
        a.len() == dst.len() && b.len() == dst.len(),
        "power operand and destination lengths differ"
    );
    match isa {
        Isa::Portable => portable_pow(a, b, dst),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: `assert_supported` checked that the CPU has the features `isa` needs.
            unsafe { x86::apply_pow(isa, a, b, dst) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            unreachable!()
        }
    }
}

/// One monomorphized stream per function (`F` is the function's index in [`ActFn::ALL`]).
fn run<const F: u8>(isa: Isa, src: &[f32], dst: &mut [f32], scale: f32, bias: f32) {
    match isa {
        Isa::Portable => portable::<F>(src, dst, scale, bias),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: `assert_supported` checked that the CPU has the features `isa` needs.
            unsafe { x86::apply::<F>(isa, src, dst, scale, bias) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            unreachable!()
        }
    }
}

/// The portable path (also the vector paths' tails): the scalar definition per element.
pub(crate) fn portable<const F: u8>(src: &[f32], dst: &mut [f32], scale: f32, bias: f32) {
    let f = const { ActFn::ALL[F as usize] };
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = act_affine(f, s, scale, bias);
    }
}

/// The portable power loop (also the vector paths' tails).
pub(crate) fn portable_pow(a: &[f32], b: &[f32], dst: &mut [f32]) {
    for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
        *d = pow_v(x, y);
    }
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::reference::*;
    use super::*;
    use crate::cpu::convert::tests::Rng;
    use nki_lang::ValidRange;

    /// Documented bounds (ulp, see the module docs) checked on samples here; the whole-range
    /// measurement is `examples/activation_accuracy.rs`.
    fn ulp_bound(f: ActFn) -> f64 {
        match f {
            ActFn::Identity
            | ActFn::Relu
            | ActFn::Abs
            | ActFn::Sign
            | ActFn::Floor
            | ActFn::Ceil
            | ActFn::Trunc => 0.0,
            ActFn::Sqrt | ActFn::Reciprocal | ActFn::Square => 0.5,
            ActFn::Log | ActFn::Tanh => 1.0,
            ActFn::Exp => 1.02,
            ActFn::Sigmoid => 1.05,
            ActFn::Arctan | ActFn::Mish => 1.1,
            ActFn::Silu => 1.2,
            ActFn::Erf | ActFn::ErfDx => 1.35,
            ActFn::Sin | ActFn::Cos => 0.9,
            ActFn::Rsqrt | ActFn::GeluApproxTanh => 1.5,
            ActFn::GeluApproxSigmoid => 1.5,
            ActFn::Softplus => 1.75,
            ActFn::SiluDx => 2.05,
            ActFn::Tan => 1.1,
            ActFn::Gelu => 2.6,
            ActFn::GeluDx => 2.85,
        }
    }

    /// Special values, every power of two with its neighbours, and the boundaries of each
    /// piece of the definitions, with neighbours.
    fn special_inputs() -> Vec<f32> {
        let mut v: Vec<f32> = vec![
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xffa1_2345),
            f32::from_bits(0x7fff_ffff),
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
        ];
        for e in 0..=254u32 {
            v.push(f32::from_bits(e << 23).max(f32::from_bits(1)));
        }
        let mut bounds: Vec<f32> = vec![
            88.722_84,
            88.722_83,
            89.0,
            -87.336_55,
            -103.972_08,
            -104.0,
            130.0,
            -130.0,
            0.55,
            1.0,
            4.0,
            3.9,
            20.0,
            200.0,
            32.0,
            17.0,
            65536.0,
            131_072.0,
            0.414_213_57,
            2.414_213_7,
            2.441_406_2e-4,
            12_582_912.0,
            8_388_608.0,
            1e5,
            1e10,
            1e20,
            1e30,
            3.0e38,
            0.751_791_5,
            1.278_464_5,
            1.702,
            10.0,
            13.5,
            14.5,
            15.0,
            9.0,
            44.0,
            120.6,
            150.0,
            0.3466,
            core::f32::consts::FRAC_1_SQRT_2,
            core::f32::consts::SQRT_2,
            1.5707964,
            core::f32::consts::PI,
        ];
        for k in -16..=16 {
            bounds.push(k as f32 * core::f32::consts::FRAC_PI_4);
        }
        for k in [1e3f32, 1e4, 6e4, 1e6, 1e7] {
            bounds.push((k / core::f32::consts::FRAC_PI_2).round() * core::f32::consts::FRAC_PI_2);
        }
        v.extend(bounds.iter().flat_map(|&b| [b, -b]));
        // Neighbours (±1, ±2 bit patterns) of all of them.
        let base = v.clone();
        for x in base {
            let b = x.to_bits();
            for d in [1u32, 2] {
                v.push(f32::from_bits(b.wrapping_add(d)));
                v.push(f32::from_bits(b.wrapping_sub(d)));
            }
        }
        v
    }

    /// A random f32 inside `range`: uniform or log-uniform, either sign where allowed.
    fn in_valid_range(rng: &mut Rng, range: ValidRange) -> f32 {
        loop {
            let x = match range {
                ValidRange::All => match rng.next_u32() % 3 {
                    0 => f32::from_bits(rng.next_u32()),
                    1 => (rng.next_u32() as f32 / u32::MAX as f32 - 0.5) * 40.0,
                    _ => (rng.next_u32() as f32 / u32::MAX as f32 - 0.5) * 4.0,
                },
                ValidRange::Closed(lo, hi) => {
                    let t = rng.next_u32() as f64 / u32::MAX as f64;
                    if rng.next_u32().is_multiple_of(2) && lo > 0.0 {
                        (lo.ln() + t * (hi.ln() - lo.ln())).exp() as f32
                    } else {
                        (lo + t * (hi - lo)) as f32
                    }
                }
                ValidRange::Magnitude(lo, hi) => {
                    let t = rng.next_u32() as f64 / u32::MAX as f64;
                    let m = (lo.ln() + t * (hi.ln() - lo.ln())).exp() as f32;
                    if rng.next_u32().is_multiple_of(2) {
                        m
                    } else {
                        -m
                    }
                }
            };
            if in_range(range, x) {
                return x;
            }
        }
    }

    fn run(isa: Isa, f: ActFn, src: &[f32], scale: f32, bias: f32) -> Vec<u32> {
        let mut dst = vec![0f32; src.len()];
        apply(isa, f, src, &mut dst, scale, bias);
        dst.iter().map(|x| x.to_bits()).collect()
    }

    #[track_caller]
    fn assert_same(f: ActFn, isa: Isa, src: &[f32], got: &[u32], want: &[u32], what: &str) {
        if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "{f} on {isa:?} ({what}): x = {:e} ({:#010x}) gives {:#010x}, definition {:#010x}",
                src[i],
                src[i].to_bits(),
                got[i],
                want[i]
            );
        }
    }

    #[test]
    fn definition_is_eval_of_fma() {
        let xs = special_inputs();
        for &f in ActFn::ALL {
            for (scale, bias) in [(1.0, -0.0), (1.5, -0.25), (-3.0, 1e-3)] {
                let got = run(Isa::Portable, f, &xs, scale, bias);
                for (i, &x) in xs.iter().enumerate() {
                    assert_eq!(
                        got[i],
                        eval(f, x.mul_add(scale, bias)).to_bits(),
                        "{f} {x:e}"
                    );
                }
            }
            // No bias leaves -0.0 unchanged.
            assert_eq!(
                run(Isa::Portable, f, &[-0.0], 1.0, -0.0)[0],
                eval(f, -0.0).to_bits()
            );
        }
    }

    #[test]
    fn every_path_matches_the_definition() {
        let mut rng = Rng::new(11);
        let specials = special_inputs();
        let random: Vec<f32> = (0..1 << 20)
            .map(|_| f32::from_bits(rng.next_u32()))
            .collect();
        let isas: Vec<Isa> = Isa::supported().into_iter().skip(1).collect();
        for &f in ActFn::ALL {
            let ranged: Vec<f32> = (0..1 << 16)
                .map(|_| in_valid_range(&mut rng, f.valid_range()))
                .collect();
            for (what, src) in [
                ("special", &specials),
                ("random bits", &random),
                ("valid range", &ranged),
            ] {
                let want = run(Isa::Portable, f, src, 1.0, -0.0);
                for &isa in &isas {
                    assert_same(f, isa, src, &run(isa, f, src, 1.0, -0.0), &want, what);
                }
            }
            // Non-default scale and bias.
            for (scale, bias) in [
                (1.5f32, -0.25f32),
                (-3.0, 1e-3),
                (1e-20, 2.0),
                (7.0, -f32::MAX),
            ] {
                let src = &random[..1 << 14];
                let want = run(Isa::Portable, f, src, scale, bias);
                for &isa in &isas {
                    let got = run(isa, f, src, scale, bias);
                    assert_same(f, isa, src, &got, &want, "scale and bias");
                }
            }
            // Odd lengths (tails) and unaligned starts; bytes around the run untouched.
            for &isa in &isas {
                for start in [0usize, 1, 3] {
                    for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 31, 33, 47, 100] {
                        let src = &specials[start..start + len];
                        let mut out = vec![1234.5f32; start + len + 5];
                        apply(isa, f, src, &mut out[start..start + len], 0.75, 0.5);
                        let mut want = vec![1234.5f32; start + len + 5];
                        apply(
                            Isa::Portable,
                            f,
                            src,
                            &mut want[start..start + len],
                            0.75,
                            0.5,
                        );
                        let (o, w): (Vec<u32>, Vec<u32>) = out
                            .iter()
                            .zip(&want)
                            .map(|(a, b)| (a.to_bits(), b.to_bits()))
                            .unzip();
                        assert_same(f, isa, &out, &o, &w, "tail");
                    }
                }
            }
        }
    }

    fn pow_inputs() -> (Vec<f32>, Vec<f32>) {
        let mut xs = vec![];
        let mut ys = vec![];
        let sp: Vec<f32> = [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -0.5,
            2.0,
            -2.0,
            3.0,
            -3.0,
            2.5,
            -2.5,
            1e-3,
            1e30,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::MAX,
            -f32::MAX,
            16_777_216.0,
            16_777_217.0,
            33_554_432.0,
            1.000_000_1,
            0.999_999_94,
            127.5,
            128.0,
            -149.0,
            -150.0,
            0.1,
            10.0,
        ]
        .into_iter()
        .flat_map(|v| [v, -v])
        .collect();
        for &x in &sp {
            for &y in &sp {
                xs.push(x);
                ys.push(y);
            }
        }
        let mut rng = Rng::new(5);
        for i in 0..1 << 20 {
            let (x, y) = match i % 4 {
                0 => (
                    f32::from_bits(rng.next_u32()),
                    f32::from_bits(rng.next_u32()),
                ),
                1 => (
                    f32::from_bits(rng.next_u32() % 0x7f80_0000),
                    (rng.next_u32() as f32 / u32::MAX as f32) * 16.0 - 8.0,
                ),
                2 => (
                    f32::from_bits(0x3f00_0000 + rng.next_u32() % 0x0100_0000),
                    (rng.next_u32() as f32 / u32::MAX as f32) * 4000.0 - 2000.0,
                ),
                _ => (
                    -f32::from_bits(0x3c00_0000 + rng.next_u32() % 0x0800_0000),
                    (rng.next_u32() % 81) as f32 - 40.0,
                ),
            };
            xs.push(x);
            ys.push(y);
        }
        (xs, ys)
    }

    #[test]
    fn pow_every_path_matches_the_definition() {
        let (xs, ys) = pow_inputs();
        let mut want = vec![0f32; xs.len()];
        apply_pow(Isa::Portable, &xs, &ys, &mut want);
        for (i, w) in want.iter().enumerate() {
            assert_eq!(w.to_bits(), pow(xs[i], ys[i]).to_bits());
        }
        for isa in Isa::supported().into_iter().skip(1) {
            for start in [0usize, 1, 3] {
                let n = xs.len() - start - 5;
                let mut got = vec![0f32; n];
                apply_pow(isa, &xs[start..start + n], &ys[start..start + n], &mut got);
                for i in 0..n {
                    assert_eq!(
                        got[i].to_bits(),
                        want[start + i].to_bits(),
                        "{isa:?}: pow({:e}, {:e})",
                        xs[start + i],
                        ys[start + i]
                    );
                }
            }
        }
    }

    #[test]
    fn pow_special_cases_and_accuracy() {
        let nan = CANONICAL_NAN.to_bits();
        let inf = f32::INFINITY;
        let cases: &[(f32, f32, f32)] = &[
            (f32::NAN, 0.0, 1.0),
            (f32::NAN, -0.0, 1.0),
            (1.0, f32::NAN, 1.0),
            (1.0, inf, 1.0),
            (-1.0, inf, 1.0),
            (-1.0, -inf, 1.0),
            (0.5, inf, 0.0),
            (0.5, -inf, inf),
            (2.0, inf, inf),
            (2.0, -inf, 0.0),
            (-2.0, 3.0, -8.0),
            (-2.0, 2.0, 4.0),
            (-2.0, -1.0, -0.5),
            (-0.0, 3.0, -0.0),
            (-0.0, 2.0, 0.0),
            (0.0, -1.0, inf),
            (-0.0, -1.0, -inf),
            (-0.0, -2.0, inf),
            (-0.0, -0.5, inf),
            (-inf, 3.0, -inf),
            (-inf, 2.0, inf),
            (-inf, -3.0, -0.0),
            (-inf, -2.0, 0.0),
            (-inf, 0.5, inf),
            (inf, -0.5, 0.0),
            (inf, 0.5, inf),
            (2.0, 10.0, 1024.0),
            (2.0, -149.0, f32::from_bits(1)),
            (2.0, 128.0, inf),
            (10.0, 38.0, 1e38),
            (4.0, 0.5, 2.0),
        ];
        for &(x, y, want) in cases {
            assert_eq!(pow(x, y).to_bits(), want.to_bits(), "pow({x:e}, {y:e})");
        }
        assert_eq!(pow(-2.0, 0.5).to_bits(), nan);
        assert_eq!(pow(f32::NAN, 1.0).to_bits(), nan);
        assert_eq!(pow(2.0, f32::NAN).to_bits(), nan);
        let (xs, ys) = pow_inputs();
        let mut got = vec![0f32; xs.len()];
        apply_pow(Isa::detect(), &xs, &ys, &mut got);
        for i in 0..xs.len() {
            let e = ulp_error(got[i], reference_pow(xs[i], ys[i]));
            assert!(
                e <= 0.5001,
                "pow({:e}, {:e}) = {:e}: {e} ulp",
                xs[i],
                ys[i],
                got[i]
            );
        }
    }

    #[test]
    fn accuracy_on_samples() {
        let mut rng = Rng::new(17);
        let specials = special_inputs();
        for &f in ActFn::ALL {
            let range = f.valid_range();
            let mut xs: Vec<f32> = specials
                .iter()
                .copied()
                .filter(|&x| in_range(range, x))
                .collect();
            xs.extend((0..1 << 17).map(|_| in_valid_range(&mut rng, range)));
            let mut got = vec![0f32; xs.len()];
            apply(Isa::detect(), f, &xs, &mut got, 1.0, -0.0);
            let bound = ulp_bound(f);
            for (&x, &g) in xs.iter().zip(&got) {
                let r = reference(f, x);
                let e = ulp_error(g, r);
                match interior_zero(f) {
                    Some(z) if (x as f64 - z).abs() < ZERO_WINDOW => {
                        assert!(
                            (g as f64 - r).abs() <= 1e-7,
                            "{f}({x:e}) = {g:e}, ref {r:e}"
                        );
                    }
                    _ => assert!(
                        e <= bound,
                        "{f}({x:e}) = {g:e}, ref {r:e}: {e} ulp > {bound}"
                    ),
                }
            }
        }
    }

    /// Outside the valid range, sin/cos/tan stay accurate: Cody–Waite up to 2^16, Payne–Hanek
    /// beyond.
    #[test]
    fn trig_large_arguments() {
        let mut rng = Rng::new(29);
        let mut xs: Vec<f32> = (0..1 << 16)
            .map(|_| (rng.next_u32() as f32 / u32::MAX as f32) * 65536.0)
            .collect();
        xs.extend((0..1 << 16).map(|_| f32::from_bits(0x4780_0000 + rng.next_u32() % 0x37ff_ffff)));
        // f32 close to multiples of π/2 (the hardest reductions).
        for k in 1..20_000u32 {
            let x = (k as f64 * core::f64::consts::FRAC_PI_2) as f32;
            xs.push(x);
        }
        for f in [ActFn::Sin, ActFn::Cos, ActFn::Tan] {
            let mut got = vec![0f32; xs.len()];
            apply(Isa::detect(), f, &xs, &mut got, 1.0, -0.0);
            let mut worst = (0.0, 0.0);
            for (&x, &g) in xs.iter().zip(&got) {
                let e = ulp_error(g, reference(f, x));
                if e > worst.0 {
                    worst = (e, x);
                }
            }
            // The bounds stated in the module docs for arguments outside the valid range.
            let bound = if f == ActFn::Tan { 2.0 } else { 1.0 };
            println!(
                "{f} outside the valid range: {} ulp at {:e}",
                worst.0, worst.1
            );
            assert!(worst.0 <= bound, "{f}({:e}): {} ulp", worst.1, worst.0);
        }
    }

    #[test]
    fn special_values() {
        let nan = CANONICAL_NAN.to_bits();
        let inf = f32::INFINITY;
        let ninf = f32::NEG_INFINITY;
        for &f in ActFn::ALL {
            for x in [f32::NAN, -f32::NAN, f32::from_bits(0x7f80_0001)] {
                assert_eq!(eval(f, x).to_bits(), nan, "{f}(NaN)");
            }
        }
        let cases: &[(ActFn, f32, f32)] = &[
            (ActFn::Exp, inf, inf),
            (ActFn::Exp, ninf, 0.0),
            (ActFn::Exp, 88.722_84, inf),
            (ActFn::Exp, -0.0, 1.0),
            (ActFn::Log, 0.0, ninf),
            (ActFn::Log, -0.0, ninf),
            (ActFn::Log, inf, inf),
            (ActFn::Log, 1.0, 0.0),
            (ActFn::Tanh, inf, 1.0),
            (ActFn::Tanh, ninf, -1.0),
            (ActFn::Tanh, -0.0, -0.0),
            (ActFn::Tanh, 10.0, 1.0),
            (ActFn::Sigmoid, inf, 1.0),
            (ActFn::Sigmoid, ninf, 0.0),
            (ActFn::Sigmoid, 0.0, 0.5),
            (ActFn::Silu, inf, inf),
            (ActFn::Silu, ninf, -0.0),
            (ActFn::Silu, -0.0, -0.0),
            (ActFn::Gelu, inf, inf),
            (ActFn::Gelu, ninf, -0.0),
            (ActFn::Gelu, -0.0, -0.0),
            (ActFn::GeluDx, inf, 1.0),
            (ActFn::GeluDx, ninf, -0.0),
            (ActFn::GeluDx, 0.0, 0.5),
            (ActFn::GeluApproxTanh, inf, inf),
            (ActFn::GeluApproxTanh, ninf, -0.0),
            (ActFn::GeluApproxSigmoid, inf, inf),
            (ActFn::GeluApproxSigmoid, ninf, -0.0),
            (ActFn::SiluDx, inf, 1.0),
            (ActFn::SiluDx, ninf, -0.0),
            (ActFn::SiluDx, 0.0, 0.5),
            (ActFn::Softplus, inf, inf),
            (ActFn::Softplus, ninf, 0.0),
            (ActFn::Softplus, 100.0, 100.0),
            (ActFn::Mish, inf, inf),
            (ActFn::Mish, ninf, -0.0),
            (ActFn::Erf, inf, 1.0),
            (ActFn::Erf, ninf, -1.0),
            (ActFn::Erf, -0.0, -0.0),
            (ActFn::ErfDx, inf, 0.0),
            (ActFn::Sin, -0.0, -0.0),
            (ActFn::Tan, -0.0, -0.0),
            (ActFn::Arctan, -0.0, -0.0),
            (ActFn::Arctan, inf, core::f32::consts::FRAC_PI_2),
            (ActFn::Sqrt, -0.0, -0.0),
            (ActFn::Rsqrt, 0.0, inf),
            (ActFn::Rsqrt, -0.0, ninf),
            (ActFn::Rsqrt, inf, 0.0),
            (ActFn::Reciprocal, -0.0, ninf),
            (ActFn::Relu, -0.0, 0.0),
            (ActFn::Relu, -1.0, 0.0),
            (ActFn::Sign, -0.0, 0.0),
            (ActFn::Sign, ninf, -1.0),
            (ActFn::Floor, -0.5, -1.0),
            (ActFn::Ceil, -0.5, -0.0),
            (ActFn::Trunc, -0.5, -0.0),
            (ActFn::Abs, ninf, inf),
        ];
        for &(f, x, want) in cases {
            assert_eq!(
                eval(f, x).to_bits(),
                want.to_bits(),
                "{f}({x:e}) = {:e}",
                eval(f, x)
            );
        }
        for f in [
            ActFn::Sin,
            ActFn::Cos,
            ActFn::Tan,
            ActFn::Log,
            ActFn::Sqrt,
            ActFn::Rsqrt,
        ] {
            assert_eq!(eval(f, ninf).to_bits(), nan, "{f}(-inf)");
        }
        // Large arguments stay sane: no NaN where the math is finite, saturation where due.
        let mut rng = Rng::new(23);
        for _ in 0..100_000 {
            let x = f32::from_bits(rng.next_u32() & 0x7f7f_ffff);
            for s in [x, -x] {
                for &f in ActFn::ALL {
                    let v = eval(f, s);
                    let r = reference(f, s);
                    if !r.is_nan() {
                        assert!(!v.is_nan(), "{f}({s:e}) is NaN, reference {r:e}");
                    }
                }
                for f in [ActFn::Sin, ActFn::Cos] {
                    assert!(eval(f, s).abs() <= 1.0, "{f}({s:e})");
                }
            }
        }
    }

    /// `cargo test --release -p nki-runtime -- --ignored --nocapture act_timing`
    #[test]
    #[ignore]
    fn act_timing() {
        let mut rng = Rng::new(1);
        let src: Vec<f32> = (0..1 << 20)
            .map(|_| (rng.next_u32() as f32 / u32::MAX as f32 - 0.5) * 20.0)
            .collect();
        let mut dst = vec![0f32; src.len()];
        for isa in Isa::supported() {
            for f in [
                ActFn::Exp,
                ActFn::Log,
                ActFn::Tanh,
                ActFn::Sigmoid,
                ActFn::Silu,
                ActFn::Gelu,
                ActFn::GeluApproxTanh,
                ActFn::Erf,
                ActFn::Sin,
                ActFn::Mish,
                ActFn::Relu,
            ] {
                let reps = if isa == Isa::Portable { 1 } else { 20 };
                apply(isa, f, &src, &mut dst, 1.0, -0.0);
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    apply(isa, f, &src, &mut dst, 1.0, -0.0);
                }
                let ns = t.elapsed().as_secs_f64() * 1e9 / (reps * src.len()) as f64;
                println!("{isa:?} {f}: {ns:.2} ns/element");
            }
            let reps = if isa == Isa::Portable { 1 } else { 20 };
            let b: Vec<f32> = src.iter().map(|x| x * 0.1).collect();
            let a: Vec<f32> = src.iter().map(|x| x.abs()).collect();
            let t = std::time::Instant::now();
            for _ in 0..reps {
                apply_pow(isa, &a, &b, &mut dst);
            }
            let ns = t.elapsed().as_secs_f64() * 1e9 / (reps * src.len()) as f64;
            println!("{isa:?} power: {ns:.2} ns/element");
        }
    }
}
