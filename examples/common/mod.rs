//! Inputs and the independent f64 reference shared by the matmul examples.

use nki::bf16;
use nki::ndarray::{Array2, ArrayView2};

/// A deterministic matrix with values in [-2, 2) (a 64-bit LCG; no dependency).
pub fn uniform(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    Array2::from_shape_fn((rows, cols), |_| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let unit = (state >> 40) as f64 / (1u64 << 24) as f64;
        unit * 4.0 - 2.0
    })
}

/// [`uniform`] rounded to bf16.
pub fn random_bf16(rows: usize, cols: usize, seed: u64) -> Array2<bf16> {
    uniform(rows, cols, seed).mapv(bf16::from_f64)
}

/// [`uniform`] rounded to f16.
pub fn random_f16(rows: usize, cols: usize, seed: u64) -> Array2<nki::f16> {
    uniform(rows, cols, seed).mapv(nki::f16::from_f64)
}

/// `lhs_tᵀ · rhs` in f64 with `ndarray`, and `|lhs_t|ᵀ · |rhs|` (the `Σ_k |a·b|` of each
/// element, for error bounds). bf16 values are exact in f64 and the products of two are too.
pub fn reference(lhs_t: ArrayView2<bf16>, rhs: ArrayView2<bf16>) -> (Array2<f64>, Array2<f64>) {
    let a = lhs_t.mapv(f64::from);
    let b = rhs.mapv(f64::from);
    let out = a.t().dot(&b);
    let mag = a.mapv(f64::abs).t().dot(&b.mapv(f64::abs));
    (out, mag)
}

/// The largest error of `out` against the reference, and whether every element is within the
/// bound that bf16 output rounding (half an ulp: 2⁻⁸·|x|) and fp32 accumulation over `k` terms
/// (`k`·2⁻²⁴·Σ|a·b|) allow.
pub fn max_error(
    out: ArrayView2<bf16>,
    reference: &Array2<f64>,
    magnitude: &Array2<f64>,
    k: usize,
) -> (f64, bool) {
    let mut worst = 0.0f64;
    let mut ok = true;
    for ((o, r), m) in out.iter().zip(reference).zip(magnitude) {
        let err = (f64::from(*o) - r).abs();
        let bound =
            2f64.powi(-8) * r.abs() + (k as f64 + 2.0) * 2f64.powi(-24) * m * (1.0 + 2f64.powi(-8));
        ok &= err <= bound;
        worst = worst.max(err);
    }
    (worst, ok)
}
