//! NKI's softmax tutorial kernel, `nki_softmax_kernel` (aws-neuron/nki-samples,
//! `src/nki_samples/tutorials/softmax/softmax_nki_kernels.py`): the softmax of each row,
//! `exp(x − max(x)) / Σ exp(x − max(x))`, rows processed 128 at a time with a mask for the last,
//! ragged, tile. Checked against an f64 reference.
//!
//! `cargo run --release --example softmax` runs the benchmark shape, [4096, 4096] f32 (values
//! uniform in [−4, 4)). Small and ragged shapes are in `tests/all/tutorials_norm.rs`.
//!
//! The row count is symbolic (`N`); the row length `D` (NKI's `a_tensor.shape[1]`) is a
//! meta-parameter, since it is a tile's free size: `#[kernel(...)]` lists one instantiation per
//! row length used, `nki_softmax_kernel_4096` (the benchmark) and `nki_softmax_kernel_512` (the
//! tests), each a kernel of its own; `nki_softmax_kernel::INSTANCES` lists them.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, ArrayView2, Ix2};
use nki::prelude::*;

/// `nki_softmax_kernel` for rows of `D` elements, as NKI's tutorial writes it: per 128-row
/// tile, the row maximum (`max` with `keepdims`, masked), the shift (`subtract`, masked), `exp`,
/// the row sum, the division by the `[128, 1]` sum, and the store (masked).
///
/// One kernel per row length: `nki_softmax_kernel_4096` (the benchmark shape) and
/// `nki_softmax_kernel_512` (the tests).
#[kernel(nki_softmax_kernel_4096(D = 4096), nki_softmax_kernel_512(D = 512))]
pub fn nki_softmax_kernel<const D: usize>(a_tensor: Hbm<f32, N, D>) -> Hbm<f32, N, D> {
    let out_tensor = ndarray([N, D], f32, SharedHbm);

    // Tensor indices: 128 rows × D columns.
    let (ix, iy) = mgrid![0..128, 0..D];

    // 128 rows at a time (the partition dimension); the tiles are independent.
    for i in affine_range((N + 127) / 128) {
        let a_tile = load(a_tensor[[i * 128 + ix, iy]], mask = i * 128 + ix < N);

        // The row maximum, subtracted for numerical stability.
        let max_vals = max(a_tile, axis = [1], keepdims = true, mask = i * 128 + ix < N);
        let shifted = subtract(a_tile, max_vals, mask = i * 128 + ix < N);

        // exp, and its sum along the row.
        let numerator = exp(shifted);
        let denominator = sum(numerator, axis = [1]);

        // The division by the [128, 1] sum.
        let sm = numerator / denominator;

        store(out_tensor[[i * 128 + ix, iy]], sm, mask = i * 128 + ix < N);
    }
    out_tensor
}

/// The softmax of each row, in f64 from the f32 inputs.
pub fn reference(a: ArrayView2<f32>) -> Array2<f64> {
    let mut out = a.mapv(f64::from);
    for mut row in out.rows_mut() {
        let m = row.fold(f64::NEG_INFINITY, |m, &x| m.max(x));
        row.mapv_inplace(|x| (x - m).exp());
        let s = row.sum();
        row.mapv_inplace(|x| x / s);
    }
    out
}

/// The relative error bound of a row of `d` elements whose values span at most `spread`
/// (`max − min`): `(d/16 + spread + 10)·2⁻²⁴`.
///
/// With `u = 2⁻²⁴`, first order: the shift `x − max` is rounded once, an error of at most
/// `spread·u` in the argument of `exp`, hence a relative error of `spread·u` in its result;
/// `exp` adds at most 1.013 ulp (`≤ 2.03u`, docs/numerics.md); the fp32 sum of `d` positive terms
/// in 16 partials of `d/16` and 4 combining levels adds `(d/16 + 3)·u` relative to the sum; the
/// division rounds once (`u`). That is `(d/16 + spread + 6.03)·u`; the bound adds `4u`.
pub fn relative_tolerance(d: usize, spread: f64) -> f64 {
    (d as f64 / 16.0 + spread + 10.0) * 2f64.powi(-24)
}

/// Compares a kernel's output with [`reference`] within [`relative_tolerance`] (the spread of
/// each row measured on the input).
pub fn check(out: ArrayView2<f32>, a: ArrayView2<f32>) -> common::Comparison {
    assert_eq!(out.dim(), a.dim(), "output shape");
    let want = reference(a);
    let bounds: Vec<f64> = a
        .rows()
        .into_iter()
        .zip(want.rows())
        .flat_map(|(row, w)| {
            let hi = row.fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            let lo = row.fold(f32::INFINITY, |m, &x| m.min(x));
            let tol = relative_tolerance(row.len(), f64::from(hi) - f64::from(lo));
            w.into_iter()
                .map(move |r| tol * r.abs())
                .collect::<Vec<_>>()
        })
        .collect();
    common::compare(
        out.iter().map(|&x| f64::from(x)),
        want.iter().copied(),
        bounds,
    )
}

/// NKI's softmax tutorial kernel on [4096, 4096] f32, checked against an f64 reference.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    const ROWS: usize = 4096;
    const D: usize = 4096;
    let a = common::random_f32(Ix2(ROWS, D), 3, -4.0, 4.0);
    let a_dev = DeviceTensor::from_array(&a)?;
    let mut core = NeuronCore::default();
    cli.profile
        .run(&mut core, &nki_softmax_kernel_4096::KERNEL, &[a_dev.arg()])?;
    let mut out = DeviceTensor::<f32>::zeros(&[ROWS, D])?;
    let time = common::median_time(5, || {
        nki_softmax_kernel_4096::launch_into(&mut core, &a_dev, &mut out)
    })?;

    println!("{}", nki_softmax_kernel_4096::KERNEL.program());
    let out = out.into_array::<Ix2>()?;
    let c = check(out.view(), a.view());
    println!(
        "nki_softmax_kernel_4096 [{ROWS}, {D}] f32: against the f64 reference, {c} \
         (relative bound {:.2e} for a spread of 8); median of 5 launches {:.2} ms",
        relative_tolerance(D, 8.0),
        time.as_secs_f64() * 1e3
    );
    if !c.within {
        return Err("softmax: result outside the error bound".into());
    }
    Ok(())
}
