//! f64 references for the activation functions and `power`, and the error measures used by the
//! tests of `cpu::act` and by `examples/activation_accuracy.rs` (which includes this file).
//!
//! The references use the `libm` crate (a port of musl's f64 functions, errors of about 1 ulp
//! of f64, i.e. ~2^-29 of an f32 ulp) and are formulated so that they do not cancel
//! catastrophically where the function is tiny (`x / (1 + e^−z)` rather than `(1 + tanh)/2`,
//! `erfc` for the lower tail of `Φ`).

#![allow(dead_code)]

use nki_lang::{ActFn, ValidRange};

/// `x` widened to f64.
fn w(x: f32) -> f64 {
    x as f64
}

/// `1 / (1 + e^−z)`.
fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + libm::exp(-z))
}

/// `Φ(x)`, the standard normal CDF.
fn ncdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x * core::f64::consts::FRAC_1_SQRT_2)
}

/// The exact value of `f(x)`, to f64 accuracy.
pub fn reference(f: ActFn, x: f32) -> f64 {
    let x = w(x);
    let inv_sqrt_2pi = 0.398_942_280_401_432_7_f64;
    match f {
        ActFn::Identity => x,
        ActFn::Exp => libm::exp(x),
        ActFn::Log => libm::log(x),
        ActFn::Tanh => libm::tanh(x),
        ActFn::Sqrt => libm::sqrt(x),
        ActFn::Rsqrt => 1.0 / libm::sqrt(x),
        ActFn::Reciprocal => 1.0 / x,
        ActFn::Square => x * x,
        ActFn::Relu => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                0.0
            }
        }
        ActFn::Gelu => {
            if x == f64::INFINITY {
                x
            } else {
                x * ncdf(x)
            }
        }
        ActFn::GeluDx => {
            if x.is_infinite() {
                if x > 0.0 { 1.0 } else { -0.0 }
            } else {
                let v = ncdf(x) + x * libm::exp(-x * x / 2.0) * inv_sqrt_2pi;
                // Below x0 the exact value is negative: an underflowed result is -0.
                if v == 0.0 && x < 0.0 { -0.0 } else { v }
            }
        }
        ActFn::GeluApproxTanh => {
            let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            if x.is_infinite() {
                if x > 0.0 { x } else { -0.0 }
            } else {
                x * sigmoid(2.0 * u)
            }
        }
        ActFn::GeluApproxSigmoid => {
            if x.is_infinite() {
                if x > 0.0 { x } else { -0.0 }
            } else {
                x * sigmoid(1.702 * x)
            }
        }
        ActFn::Sigmoid => sigmoid(x),
        ActFn::Silu => {
            if x == f64::NEG_INFINITY {
                -0.0
            } else {
                x * sigmoid(x)
            }
        }
        ActFn::SiluDx => {
            if x.is_infinite() {
                if x > 0.0 { 1.0 } else { -0.0 }
            } else {
                let s = sigmoid(x);
                s * (1.0 + x * sigmoid(-x))
            }
        }
        ActFn::Softplus => {
            if x > 0.0 {
                x + libm::log1p(libm::exp(-x))
            } else {
                libm::log1p(libm::exp(x))
            }
        }
        ActFn::Mish => {
            let sp = if x > 0.0 {
                x + libm::log1p(libm::exp(-x))
            } else {
                libm::log1p(libm::exp(x))
            };
            if x == f64::NEG_INFINITY {
                -0.0
            } else {
                x * libm::tanh(sp)
            }
        }
        ActFn::Erf => libm::erf(x),
        ActFn::ErfDx => 2.0 / core::f64::consts::PI.sqrt() * libm::exp(-x * x),
        ActFn::Sin => libm::sin(x),
        ActFn::Cos => libm::cos(x),
        ActFn::Tan => libm::tan(x),
        ActFn::Arctan => libm::atan(x),
        ActFn::Abs => x.abs(),
        ActFn::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else if x == 0.0 {
                0.0
            } else {
                x
            }
        }
        ActFn::Floor => x.floor(),
        ActFn::Ceil => x.ceil(),
        ActFn::Trunc => x.trunc(),
    }
}

/// The exact value of `x^y`, to f64 accuracy (C99 special cases, as `libm::pow`).
pub fn reference_pow(x: f32, y: f32) -> f64 {
    libm::pow(w(x), w(y))
}

/// The spacing of f32 at `r` (2^-149 in the subnormal range).
pub fn ulp_f32(r: f64) -> f64 {
    let a = r.abs();
    if a < f32::MIN_POSITIVE as f64 {
        return f64::from_bits(0x36a0_0000_0000_0000); // 2^-149
    }
    let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    2f64.powi(e.min(127) - 23)
}

/// `|got − r| / ulp_f32(r)`: 0 when both are the same infinity or both NaN, +inf when one is NaN
/// and the other not, or when `got` is infinite and `r` rounds to a finite f32 (and vice versa).
pub fn ulp_error(got: f32, r: f64) -> f64 {
    if got.is_nan() || r.is_nan() {
        return if got.is_nan() && r.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let rr = r as f32;
    if got.is_infinite() || rr.is_infinite() {
        if got == rr {
            return 0.0;
        }
        if got.is_infinite() {
            return f64::INFINITY;
        }
        // `r` is beyond f32's range: measure against the largest finite value's spacing.
        return (w(got) - r).abs() / ulp_f32(f32::MAX as f64);
    }
    (w(got) - r).abs() / ulp_f32(r)
}

/// Whether `got` is `r` rounded to nearest f32, or, when `r` lies within 2^-45 (relative) of a
/// rounding boundary (where an f64 reference cannot decide), either neighbour.
pub fn correctly_rounded(got: f32, r: f64) -> bool {
    if got.is_nan() || r.is_nan() {
        return got.is_nan() && r.is_nan();
    }
    let rr = r as f32;
    if got.to_bits() == rr.to_bits() {
        return true;
    }
    if got.is_infinite() || rr.is_infinite() || (got == 0.0 && rr == 0.0) {
        return false;
    }
    // Undecidable: r (nearly) halfway between got and its rounding.
    let mid = (w(got) + w(rr)) / 2.0;
    let adjacent = got.to_bits().abs_diff(rr.to_bits()) == 1;
    adjacent && (r - mid).abs() <= r.abs() * 2f64.powi(-45)
}

/// Whether `x` lies in NKI's documented valid range.
pub fn in_range(range: ValidRange, x: f32) -> bool {
    let x = w(x);
    match range {
        ValidRange::All => x.is_finite(),
        ValidRange::Closed(lo, hi) => lo <= x && x <= hi,
        ValidRange::Magnitude(lo, hi) => lo <= x.abs() && x.abs() <= hi,
    }
}

/// The interior zero `x0` of functions whose value there cannot be relative-accurate in fp32
/// (the two terms that cancel carry fp32 rounding errors): their error is reported separately
/// within `|x − x0| < ZERO_WINDOW`.
pub fn interior_zero(f: ActFn) -> Option<f64> {
    match f {
        ActFn::GeluDx => Some(-0.751_791_524_693_564_5),
        ActFn::SiluDx => Some(-1.278_464_542_761_074),
        ActFn::Identity
        | ActFn::Exp
        | ActFn::Log
        | ActFn::Tanh
        | ActFn::Sqrt
        | ActFn::Rsqrt
        | ActFn::Reciprocal
        | ActFn::Square
        | ActFn::Relu
        | ActFn::Gelu
        | ActFn::GeluApproxTanh
        | ActFn::GeluApproxSigmoid
        | ActFn::Sigmoid
        | ActFn::Silu
        | ActFn::Softplus
        | ActFn::Mish
        | ActFn::Erf
        | ActFn::ErfDx
        | ActFn::Sin
        | ActFn::Cos
        | ActFn::Tan
        | ActFn::Arctan
        | ActFn::Abs
        | ActFn::Sign
        | ActFn::Floor
        | ActFn::Ceil
        | ActFn::Trunc => None,
    }
}

/// Half-width of the window around an [`interior_zero`].
pub const ZERO_WINDOW: f64 = 1.0 / 1024.0;
