//! The reference's arithmetic, written from `docs/numerics.md` and `docs/dtypes.md` alone:
//! fp32 operations computed in f64 and rounded once, bf16 rounding by the `half` crate, and
//! the value ranges that sums are checked against.

use super::spec::{Act, Bin, Dt};

/// The stored value of every NaN an operation produces.
pub const CANONICAL_NAN: f32 = f32::from_bits(0x7fc0_0000);

/// `x`, or the canonical NaN if `x` is a NaN.
pub fn canon(x: f32) -> f32 {
    if x.is_nan() { CANONICAL_NAN } else { x }
}

/// f32 → bf16 → f32: round to nearest even (`half`), f32 subnormals flushed to a zero of the
/// same sign (`docs/dtypes.md`), NaN → `(bits >> 16) | 0x0040`.
pub fn to_bf16(x: f32) -> f32 {
    if x.is_subnormal() {
        return if x.is_sign_negative() { -0.0 } else { 0.0 };
    }
    half::bf16::from_f32(x).to_f32()
}

/// `x` (an f32) stored as `dt` and read back as f32.
pub fn round_to(dt: Dt, x: f32) -> f32 {
    match dt {
        Dt::F32 => x,
        Dt::Bf16 => to_bf16(x),
    }
}

/// The element bits of `x` (exactly representable in `dt`) as `dt` stores them.
pub fn bits_in(dt: Dt, x: f32) -> u32 {
    match dt {
        Dt::F32 => x.to_bits(),
        Dt::Bf16 => x.to_bits() >> 16,
    }
}

/// The f32 value of element bits of `dt`.
pub fn value_of(dt: Dt, bits: u32) -> f32 {
    match dt {
        Dt::F32 => f32::from_bits(bits),
        Dt::Bf16 => f32::from_bits(bits << 16),
    }
}

/// One fp32 ALU operation as the engines define it: the exact result rounded once to f32
/// (f64 holds every product of two f32s exactly, and rounding a sum through f64 first
/// gives the same f32), NaN results canonical, `maximum`/`minimum` NaN-propagating with
/// `maximum(−0, +0) = +0` and `minimum(−0, +0) = −0`.
pub fn bin(op: Bin, a: f32, b: f32) -> f32 {
    let (x, y) = (f64::from(a), f64::from(b));
    match op {
        Bin::Add => canon((x + y) as f32),
        Bin::Subtract => canon((x - y) as f32),
        Bin::Multiply => canon((x * y) as f32),
        Bin::Max | Bin::Min if a.is_nan() || b.is_nan() => CANONICAL_NAN,
        Bin::Max if a == b => {
            if a.is_sign_positive() {
                a
            } else {
                b
            }
        }
        Bin::Min if a == b => {
            if a.is_sign_negative() {
                a
            } else {
                b
            }
        }
        Bin::Max => {
            if a > b {
                a
            } else {
                b
            }
        }
        Bin::Min => {
            if a < b {
                a
            } else {
                b
            }
        }
    }
}

/// The matmul's operand rule: an f32 subnormal reads as a zero of the same sign.
pub fn daz(x: f32) -> f32 {
    if x.is_subnormal() {
        if x.is_sign_negative() { -0.0 } else { 0.0 }
    } else {
        x
    }
}

/// The largest f32 ≤ `x` (`x` finite).
pub fn down(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) > x { f.next_down() } else { f }
}

/// The smallest f32 ≥ `x` (`x` finite).
pub fn up(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) < x { f.next_up() } else { f }
}

/// A reference value: exactly known, known to lie in a range, or unconstrained.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Val {
    /// These exact bits (NaN only as the canonical NaN).
    Exact(f32),
    /// Some non-NaN value `v` with `lo ≤ v ≤ hi` (compared as numbers: ±0 alike).
    Within(f32, f32),
    /// Anything: a range that reached an infinity or a NaN, where the engines' summation
    /// order would decide between values the reference does not model.
    Any,
}

impl Val {
    /// Its range as `(lo, hi)`, or `None` for [`Val::Any`].
    pub fn bounds(self) -> Option<(f32, f32)> {
        match self {
            Val::Exact(x) => Some((x, x)),
            Val::Within(lo, hi) => Some((lo, hi)),
            Val::Any => None,
        }
    }

    /// Applies a non-decreasing function to the value (both ends of a range).
    pub fn map(self, f: impl Fn(f32) -> f32) -> Val {
        match self {
            Val::Exact(x) => Val::Exact(f(x)),
            Val::Within(lo, hi) => Val::Within(f(lo), f(hi)),
            Val::Any => Val::Any,
        }
    }

    /// The fp32 value stored as `dt` (rounding is non-decreasing, so a range maps to a range).
    pub fn round(self, dt: Dt) -> Val {
        self.map(|x| round_to(dt, x))
    }

    /// A value of dtype `from` converted to `to`: within one dtype the bits are kept (a bf16
    /// subnormal stays one); otherwise through fp32, as [`Val::round`].
    pub fn convert(self, from: Dt, to: Dt) -> Val {
        if from == to { self } else { self.round(to) }
    }

    /// Whether element bits `got` of dtype `dt` are allowed.
    pub fn admits(self, dt: Dt, got: u32) -> bool {
        match self {
            Val::Exact(x) => bits_in(dt, x) == got,
            Val::Within(lo, hi) => {
                let v = value_of(dt, got);
                lo <= v && v <= hi
            }
            Val::Any => true,
        }
    }
}

/// `a op b` on reference values. Exact operands give the exact result. For finite ranges,
/// every operation used here is monotone in each operand (multiply: for a fixed sign of the
/// other), so the result lies between the smallest and the largest result at the ranges'
/// corners, and rounding is non-decreasing. An infinity or NaN among the ends breaks that
/// (`[−1, 1] · ∞` holds `0 · ∞ = NaN`): [`Val::Any`].
pub fn bin_val(op: Bin, a: Val, b: Val) -> Val {
    if let (Val::Exact(x), Val::Exact(y)) = (a, b) {
        return Val::Exact(bin(op, x, y));
    }
    let (Some((al, ah)), Some((bl, bh))) = (a.bounds(), b.bounds()) else {
        return Val::Any;
    };
    if ![al, ah, bl, bh].iter().all(|x| x.is_finite()) {
        return Val::Any;
    }
    let corners = [
        bin(op, al, bl),
        bin(op, al, bh),
        bin(op, ah, bl),
        bin(op, ah, bh),
    ];
    if corners.iter().any(|c| c.is_nan()) {
        return Val::Any;
    }
    let lo = corners.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = corners.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    Val::Within(lo, hi)
}

/// The range of an fp32 sum of terms `lo_i ≤ t_i ≤ hi_i` (finite), each step of it one
/// rounding, with at most `roundings` roundings on any term's way to the result, in any
/// order, plus `extra` of absolute error (flushed tiny results): the exact sum ± `γ·Σ|t_i|`,
/// `γ = n·u / (1 − n·u)`, `u = 2⁻²⁴` (Higham, *Accuracy and Stability of Numerical
/// Algorithms*, (4.4)), widened by the f64 summation's own error and rounded outwards to f32.
/// [`Val::Any`] where a partial sum could overflow.
pub fn sum_range(terms: &[(f64, f64)], roundings: usize, extra: f64) -> Val {
    let mut s = Sum::default();
    for &(lo, hi) in terms {
        s.add_range(lo, hi);
    }
    s.range(roundings, extra)
}

/// A running sum of finite term ranges, for [`sum_range`]'s bound.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Sum {
    /// Σ lo_i (in f64).
    lo: f64,
    /// Σ hi_i.
    hi: f64,
    /// Σ max(|lo_i|, |hi_i|).
    mag: f64,
    /// Terms added.
    n: usize,
}

impl Sum {
    /// Adds a term in `[lo, hi]`.
    pub fn add_range(&mut self, lo: f64, hi: f64) {
        self.lo += lo;
        self.hi += hi;
        self.mag += lo.abs().max(hi.abs());
        self.n += 1;
    }

    /// Adds `n` exact terms whose sum is `total` and whose magnitudes add up to `mag`.
    pub fn add_exact(&mut self, total: f64, mag: f64, n: usize) {
        self.lo += total;
        self.hi += total;
        self.mag += mag;
        self.n += n;
    }

    /// Adds another sum's terms.
    pub fn merge(&mut self, other: &Sum) {
        self.lo += other.lo;
        self.hi += other.hi;
        self.mag += other.mag;
        self.n += other.n;
    }

    /// Σ max(|lo_i|, |hi_i|) so far.
    pub fn magnitude(&self) -> f64 {
        self.mag
    }

    /// The range of the fp32 sum (see [`sum_range`]).
    pub fn range(&self, roundings: usize, extra: f64) -> Val {
        if !self.mag.is_finite() || self.mag > 2f64.powi(126) {
            return Val::Any;
        }
        let n = roundings as f64;
        let u = 2f64.powi(-24);
        let gamma = n * u / (1.0 - n * u);
        let f64_error = (self.n as f64 + 1.0) * 2f64.powi(-52) * self.mag;
        let err = gamma * self.mag + f64_error + extra;
        Val::Within(down(self.lo - err), up(self.hi + err))
    }
}

/// The spacing of f32 at the (finite) value `x`: `2^(e − 23)` for `2^e ≤ |x| < 2^(e+1)`,
/// `2⁻¹⁴⁹` in the subnormal range.
fn ulp32(x: f64) -> f64 {
    let a = x.abs();
    if a < 2f64.powi(-126) {
        return 2f64.powi(-149);
    }
    let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    2f64.powi(e - 23)
}

/// `func(z)` for an fp32 pre-activation `z`: exact for the exactly rounded functions
/// (identity, relu, abs, square), within `docs/numerics.md`'s measured maximum error for
/// `exp` (1.013 ulp), `tanh` (0.879), `sigmoid` (1.005), `silu` (1.171) and `softplus`
/// (1.728) of an f64 reference (widened by 2⁻²⁰ ulp for the reference's own error). The last
/// three at ±∞ (outside their documented valid range, "all finite") are `Any`.
pub fn act(func: Act, z: f32) -> Val {
    if z.is_nan() {
        // `relu` of NaN is not documented (a `max` with 0 may drop it).
        return if func == Act::Relu {
            Val::Any
        } else {
            Val::Exact(CANONICAL_NAN)
        };
    }
    let zf = f64::from(z);
    let bound = |r: f64, k: f64| -> Val {
        if r.is_infinite() || r.abs() > 2.0 * f64::from(f32::MAX) {
            return Val::Exact(if r > 0.0 {
                f32::INFINITY
            } else {
                f32::NEG_INFINITY
            });
        }
        let w = (k + 2f64.powi(-20)) * ulp32(r);
        if (r.abs() + w) >= f64::from(f32::MAX) {
            return Val::Any;
        }
        Val::Within(down(r - w), up(r + w))
    };
    match func {
        Act::Identity => Val::Exact(z),
        Act::Relu => Val::Exact(if z > 0.0 { z } else { 0.0 }),
        Act::Abs => Val::Exact(z.abs()),
        Act::Square => Val::Exact((zf * zf) as f32),
        Act::Exp => match z {
            f32::INFINITY => Val::Exact(f32::INFINITY),
            f32::NEG_INFINITY => Val::Exact(0.0),
            _ => bound(zf.exp(), 1.013),
        },
        Act::Tanh => match z {
            f32::INFINITY => Val::Exact(1.0),
            f32::NEG_INFINITY => Val::Exact(-1.0),
            _ => bound(zf.tanh(), 0.879),
        },
        _ if z.is_infinite() => Val::Any,
        Act::Sigmoid => bound(sigmoid(zf), 1.005),
        Act::Silu => bound(zf * sigmoid(zf), 1.171),
        Act::Softplus => bound(
            if zf > 0.0 {
                zf + (-zf).exp().ln_1p()
            } else {
                zf.exp().ln_1p()
            },
            1.728,
        ),
    }
}

/// `1 / (1 + e⁻ˣ)` in f64, without cancellation.
fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `func(x · scale + bias)`: the pre-activation is one fused multiply-add rounded to fp32
/// (NaN canonical); ranges go through the corners (the fma is monotone in each operand for a
/// fixed sign of the other factor) and the function's extremes over the range (every function
/// used is monotone, has its minimum at 0, or is `silu`, with its one minimum near −1.28).
pub fn act_val(func: Act, x: Val, scale: Val, bias: Val) -> Val {
    let fma = |x: f32, s: f32, b: f32| canon(x.mul_add(s, b));
    if let (Val::Exact(x), Val::Exact(s), Val::Exact(b)) = (x, scale, bias) {
        return act(func, fma(x, s, b));
    }
    let (Some((xl, xh)), Some((sl, sh)), Some((bl, bh))) =
        (x.bounds(), scale.bounds(), bias.bounds())
    else {
        return Val::Any;
    };
    if ![xl, xh, sl, sh, bl, bh].iter().all(|v| v.is_finite()) {
        return Val::Any;
    }
    let mut zs = Vec::with_capacity(8);
    for x in [xl, xh] {
        for s in [sl, sh] {
            for b in [bl, bh] {
                zs.push(fma(x, s, b));
            }
        }
    }
    if zs.iter().any(|z| !z.is_finite()) {
        return Val::Any;
    }
    let zl = zs.iter().copied().fold(f32::INFINITY, f32::min);
    let zh = zs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut ends = vec![act(func, zl), act(func, zh)];
    if matches!(func, Act::Abs | Act::Square) && zl <= 0.0 && 0.0 <= zh {
        ends.push(Val::Exact(0.0));
    }
    // `silu`'s minimum, −0.27846454 at x₀ = −1.2784645, less its error bound.
    if func == Act::Silu && zl <= -1.278 && -1.279 <= zh {
        ends.push(Val::Within(-0.278_464_7, -0.278_464_4));
    }
    let mut lo = f32::INFINITY;
    let mut hi = f32::NEG_INFINITY;
    for v in ends {
        let Some((l, h)) = v.bounds() else {
            return Val::Any;
        };
        if !l.is_finite() || !h.is_finite() {
            return Val::Any;
        }
        lo = lo.min(l);
        hi = hi.max(h);
    }
    Val::Within(lo, hi)
}
