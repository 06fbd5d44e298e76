//! Inputs and the independent f64 reference shared by the matmul examples.

use nki::bf16;
use nki::ndarray::{Array2, ArrayView2};

/// A deterministic bf16 matrix with values in [-2, 2) (a 64-bit LCG; no dependency).
pub fn random_bf16(rows: usize, cols: usize, seed: u64) -> Array2<bf16> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    Array2::from_shape_fn((rows, cols), |_| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let unit = (state >> 40) as f64 / (1u64 << 24) as f64;
        bf16::from_f64(unit * 4.0 - 2.0)
    })
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

/// The largest error of `out` against the reference, and whether every element is within the
/// bound when the result is rounded to bf16 `roundings` times on its way (a kernel that
/// accumulates partial sums in a bf16 SBUF tile, as NKI's fully optimised matmul does, rounds
/// once per K block). Each rounding of a partial sum `s` errs by at most 2⁻⁸·|s| ≤ 2⁻⁸·Σ|a·b|
/// (plus the error already made; 2⁻⁸ + 2⁻²³ where the sum is first rounded to fp32 by the
/// engine's add), and fp32 accumulation adds `k`·2⁻²⁴·Σ|a·b| as in [`max_error`].
#[allow(dead_code)]
pub fn max_error_rounded(
    out: ArrayView2<bf16>,
    reference: &Array2<f64>,
    magnitude: &Array2<f64>,
    k: usize,
    roundings: usize,
) -> (f64, bool) {
    let u = 2f64.powi(-8) + 2f64.powi(-23);
    let grow = (1.0 + u).powi(roundings as i32);
    let mut worst = 0.0f64;
    let mut ok = true;
    for ((o, r), m) in out.iter().zip(reference).zip(magnitude) {
        let err = (f64::from(*o) - r).abs();
        let last = u * r.abs();
        let partial = (roundings.saturating_sub(1)) as f64 * u * m;
        let bound = (last + partial + (k as f64 + 2.0) * 2f64.powi(-24) * m) * grow;
        ok &= err <= bound;
        worst = worst.max(err);
    }
    (worst, ok)
}

/// The command line's dimensions (`[K M N]` and the like), or `default` when none are given.
#[allow(dead_code)]
pub fn dims<const D: usize>(usage: &str, default: [usize; D]) -> Result<[usize; D], String> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().map_err(|e| format!("{a}: {e}; usage: {usage}")))
        .collect::<Result<_, _>>()?;
    match args.len() {
        0 => Ok(default),
        n if n == D => Ok(args.try_into().expect("length checked")),
        _ => Err(format!("usage: {usage}")),
    }
}

/// Runs `launch` `runs` times and returns the median wall-clock time of one run.
#[allow(dead_code)]
pub fn median_time<E>(
    runs: usize,
    mut launch: impl FnMut() -> Result<(), E>,
) -> Result<std::time::Duration, E> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let start = std::time::Instant::now();
        launch()?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// A deterministic f32 matrix with values in `[lo, hi)` (the same LCG as [`random_bf16`]).
#[allow(dead_code)]
pub fn random_f32(rows: usize, cols: usize, seed: u64, lo: f64, hi: f64) -> Array2<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    Array2::from_shape_fn((rows, cols), |_| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let unit = (state >> 40) as f64 / (1u64 << 24) as f64;
        (lo + (hi - lo) * unit) as f32
    })
}
