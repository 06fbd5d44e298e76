//! Inputs, timing and comparisons shared by the examples, the independent f64 reference of
//! the matmul examples, and the command-line pieces their parsers (`clap`) share.

// Each example uses a part of these helpers.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nki::HbmIn;
use nki::ndarray::{Array, Array2, ArrayView2, Dimension, Ix2};
use nki::program::Target;
use nki::timing::{Profile, ProfileRequest, TimingError};
use nki::{Kernel, LaunchGrid, NeuronCore, bf16, f16};

/// `--profile[=DIR]`, for an example's arguments (`#[command(flatten)]`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ProfileArg {
    /// Print the kernel's modeled Trainium profile; with =DIR also write its Chrome trace
    /// (Perfetto) and SVG timeline into DIR
    #[arg(
        long,
        value_name = "DIR",
        num_args = 0..=1,
        require_equals = true,
        value_parser = directory,
    )]
    profile: Option<Option<PathBuf>>,
}

impl ProfileArg {
    /// The request, if `--profile` was given.
    pub fn request(&self) -> Option<ProfileRequest> {
        let dir = self.profile.clone()?;
        Some(ProfileRequest { dir })
    }

    /// With `--profile`: times one launch of `kernel` on `inputs` (timing only, placeholder
    /// outputs), prints its profile, writes the trace and the timeline into the directory if
    /// one was given, and returns the profile. Without: nothing.
    pub fn run(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        inputs: &[HbmIn<'_>],
    ) -> Result<Option<Profile>, TimingError> {
        self.run_grid(core, kernel, LaunchGrid::SINGLE, inputs)
    }

    /// [`ProfileArg::run`] for a launch over an SPMD grid.
    pub fn run_grid(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        grid: LaunchGrid,
        inputs: &[HbmIn<'_>],
    ) -> Result<Option<Profile>, TimingError> {
        self.request()
            .map(|r| r.run_inputs(core, kernel, grid, inputs))
            .transpose()
    }

    /// [`ProfileArg::run`] on placeholder inputs of the given shapes.
    pub fn run_shapes(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        input_shapes: &[&[usize]],
    ) -> Result<Option<Profile>, TimingError> {
        self.request()
            .map(|r| r.run_shapes(core, kernel, input_shapes))
            .transpose()
    }
}

/// `--profile=DIR`'s directory: not empty.
fn directory(dir: &str) -> Result<PathBuf, String> {
    if dir.is_empty() {
        Err("give a directory after `=`, or no `=`".to_string())
    } else {
        Ok(PathBuf::from(dir))
    }
}

/// Positional dimensions (`[K M N]` and the like: an argument with `num_args = D`, so that
/// `clap` takes all of them or none), or `default` when none are given.
pub fn shape<const D: usize>(given: &[usize], default: [usize; D]) -> [usize; D] {
    given.try_into().unwrap_or(default)
}

/// `--target`'s value: `trn1` (or `inf2`), `trn2` or `trn3`.
pub fn target(name: &str) -> Result<Target, String> {
    Target::from_name(name)
        .ok_or_else(|| format!("unknown target `{name}` (trn1, inf2, trn2 or trn3)"))
}

/// A deterministic bf16 matrix with values in [-2, 2) ([`uniform`]).
pub fn random_bf16(rows: usize, cols: usize, seed: u64) -> Array2<bf16> {
    uniform(Ix2(rows, cols), seed, -2.0, 2.0).mapv(bf16::from_f64)
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

/// A deterministic array of `shape` with values uniform in `[lo, hi)` (the same 64-bit LCG as
/// [`random_bf16`], 24 random bits per value), in f64: convert it to the kernel's dtype with
/// `mapv`. Each value is a multiple of `(hi − lo)·2⁻²⁴` from `lo`.
pub fn uniform<D: Dimension>(shape: D, seed: u64, lo: f64, hi: f64) -> Array<f64, D> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let n = shape.size();
    let values = (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let unit = (state >> 40) as f64 / (1u64 << 24) as f64;
            lo + (hi - lo) * unit
        })
        .collect();
    Array::from_shape_vec(shape, values).expect("the shape's size")
}

/// [`uniform`] rounded to f32.
pub fn random_f32<D: Dimension>(shape: D, seed: u64, lo: f64, hi: f64) -> Array<f32, D> {
    uniform(shape, seed, lo, hi).mapv(|x| x as f32)
}

/// [`uniform`] rounded to f16.
pub fn random_f16<D: Dimension>(shape: D, seed: u64, lo: f64, hi: f64) -> Array<f16, D> {
    uniform(shape, seed, lo, hi).mapv(f16::from_f64)
}

/// The minimum and the median of `runs` timed calls of `launch` (after one untimed call), in
/// seconds.
pub fn time_runs<E>(
    runs: usize,
    mut launch: impl FnMut() -> Result<(), E>,
) -> Result<(f64, f64), E> {
    launch()?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        launch()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok((times[0], times[times.len() / 2]))
}

/// The median of `runs` timed calls of `launch` (after one untimed call).
pub fn median_time<E>(runs: usize, launch: impl FnMut() -> Result<(), E>) -> Result<Duration, E> {
    time_runs(runs, launch).map(|(_, p50)| Duration::from_secs_f64(p50))
}

/// A comparison of results against a reference with a bound per element.
#[derive(Copy, Clone, Debug)]
pub struct Comparison {
    /// The largest `|got − reference|` (NaN if any result or reference is NaN).
    pub max_error: f64,
    /// The largest `|got − reference| / bound` (1 means at the bound).
    pub worst_ratio: f64,
    /// Where (the element's row-major position) `worst_ratio` was reached.
    pub worst_at: usize,
    /// Whether every element is within its bound (false on any NaN).
    pub within: bool,
    /// The number of elements compared.
    pub count: usize,
}

/// Compares `got` with `reference`, element `i` against `bound[i]` (`|got − ref| ≤ bound`; a
/// bound of 0 asks for equality). The three sequences must have the same length.
pub fn compare(
    got: impl IntoIterator<Item = f64>,
    reference: impl IntoIterator<Item = f64>,
    bound: impl IntoIterator<Item = f64>,
) -> Comparison {
    let mut c = Comparison {
        max_error: 0.0,
        worst_ratio: 0.0,
        worst_at: 0,
        within: true,
        count: 0,
    };
    let mut r = reference.into_iter();
    let mut b = bound.into_iter();
    for (i, g) in got.into_iter().enumerate() {
        let (Some(r), Some(b)) = (r.next(), b.next()) else {
            panic!("fewer reference values or bounds than results");
        };
        let err = (g - r).abs();
        if err.is_nan() {
            if !c.max_error.is_nan() {
                c.max_error = f64::NAN;
                c.worst_ratio = f64::NAN;
                c.worst_at = i;
            }
        } else if !c.max_error.is_nan() {
            let ratio = if err == 0.0 { 0.0 } else { err / b };
            if ratio > c.worst_ratio {
                c.worst_ratio = ratio;
                c.worst_at = i;
            }
            c.max_error = c.max_error.max(err);
        }
        c.within &= err <= b;
        c.count += 1;
    }
    assert!(r.next().is_none(), "more reference values than results");
    c
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "max |error| {:.3e}, worst error/bound {:.3} (element {}), {} of {} elements checked: {}",
            self.max_error,
            self.worst_ratio,
            self.worst_at,
            if self.within { "all" } else { "NOT all" },
            self.count,
            if self.within {
                "within bounds"
            } else {
                "OUT OF BOUNDS"
            }
        )
    }
}

/// A floating-point element type of kernel inputs and outputs, for error bounds.
pub trait Real: Copy {
    /// The unit roundoff: round to nearest changes a normal value by at most `UNIT·|x|`.
    const UNIT: f64;
    /// Half the smallest subnormal: the largest rounding error below the normal range.
    const TINY: f64;
    /// The value in f64 (exact).
    fn to_f64(self) -> f64;
}

impl Real for f32 {
    const UNIT: f64 = 1.0 / (1u64 << 24) as f64;
    const TINY: f64 = f32::from_bits(1) as f64 / 2.0;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Real for f16 {
    const UNIT: f64 = 1.0 / (1u64 << 11) as f64;
    const TINY: f64 = 1.0 / (1u64 << 25) as f64;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Real for bf16 {
    const UNIT: f64 = 1.0 / (1u64 << 8) as f64;
    const TINY: f64 = f32::from_bits(1 << 16) as f64 / 2.0;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}
