//! NKI's RMSNorm tutorial kernel, `nki_rmsnorm_kernel` (aws-neuron/nki-samples,
//! `src/nki_samples/tutorials/rmsnorm/rmsnorm_nki_kernels.py`): `out = a / RMS(a) · g` per row,
//! `RMS(a) = sqrt(mean(a²))` over the row's D elements, rows processed 128 at a time with a
//! mask for the last, ragged, tile. Checked against an f64 reference.
//!
//! `cargo run --release --example rmsnorm` runs the benchmark shape: `a` [4096, 4096] f32 (the
//! tutorial draws `a` and `g` uniform in [0, 1)), `g` [4096]. The tutorial's own test shape,
//! (128, 512), and ragged row counts are in `tests/all/tutorials_norm.rs`.
//!
//! The row count is symbolic (`N`): any number of rows, the last tile masked. The row length
//! `D` (NKI's `a_tensor.shape[1]`) is a meta-parameter, since it is a tile's free size
//! (`mgrid![0..128, 0..D]`): `#[kernel(...)]` lists one instantiation per row length used,
//! `nki_rmsnorm_kernel_4096` (the benchmark) and `nki_rmsnorm_kernel_512` (the tutorial's test),
//! each a kernel of its own; `nki_rmsnorm_kernel::INSTANCES` lists them.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, ArrayView1, ArrayView2, Ix1, Ix2};
use nki::prelude::*;

/// `nki_rmsnorm_kernel` for rows of `D` elements, as NKI's tutorial writes it: `g` loaded once
/// as a `[1, D]` tile, then for each 128-row tile: square, sum along the row, divide by `D`,
/// `rsqrt`, multiply by the `[128, 1]` column, multiply by `g` broadcast to `[128, D]` (masked),
/// store (masked). As in NKI, only the load, the last multiply and the store are masked; the
/// other instructions compute on the rows past `N` too and their results are never stored.
///
/// One kernel per row length: `nki_rmsnorm_kernel_4096` (the benchmark shape) and
/// `nki_rmsnorm_kernel_512` (the tutorial's test shape, (128, 512)).
#[kernel(nki_rmsnorm_kernel_4096(D = 4096), nki_rmsnorm_kernel_512(D = 512))]
pub fn nki_rmsnorm_kernel<const D: usize>(
    a_tensor: Hbm<f32, N, D>,
    g_tensor: Hbm<f32, D>,
) -> Hbm<f32, N, D> {
    let out_tensor = ndarray([N, D], f32, SharedHbm);

    // Tensor indices: 128 rows × D columns for `a`, one row × D columns for `g`.
    let (ix, iy) = mgrid![0..128, 0..D];
    let (iw, ig) = mgrid![0..1, 0..D];

    // The weight, loaded once and reused by every tile of rows: `g` viewed as (1, D), element
    // (iw, ig) at iw·D + ig, as NKI's `g_tensor.reshape((1, D))[iw, iy]`.
    let g_tile = load(g_tensor[[iw * D + ig]]);

    // 128 rows at a time (the partition dimension); the tiles are independent.
    for i in affine_range((N + 127) / 128) {
        let a_tile = load(a_tensor[[i * 128 + ix, iy]], mask = i * 128 + ix < N);

        // Σ a², along the row.
        let in_square = square(a_tile);
        let square_sum = sum(in_square, axis = [1]);

        // The mean, and 1 / sqrt(mean) (one activation).
        let mean = square_sum / D;
        let rms_reciprocal = rsqrt(mean);

        // a · (1 / RMS), the [128, 1] column broadcast along the row.
        let out_tile = multiply(a_tile, rms_reciprocal);

        // g broadcast along the partitions, and multiplied in.
        let g_bcast = broadcast_to(g_tile, [128, D]);
        out_tile[..] = multiply(out_tile, g_bcast, mask = i * 128 + ix < N);

        store(
            out_tensor[[i * 128 + ix, iy]],
            out_tile,
            mask = i * 128 + ix < N,
        );
    }
    out_tensor
}

/// `a / sqrt(mean(a²)) · g` per row, in f64 from the f32 inputs (each exact in f64).
pub fn reference(a: ArrayView2<f32>, g: ArrayView1<f32>) -> Array2<f64> {
    let d = a.ncols() as f64;
    let mut out = Array2::zeros(a.raw_dim());
    for (mut o, row) in out.rows_mut().into_iter().zip(a.rows()) {
        let mean_square = row
            .iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>()
            / d;
        let r = 1.0 / mean_square.sqrt();
        for ((o, &x), &w) in o.iter_mut().zip(row).zip(g) {
            *o = f64::from(x) * r * f64::from(w);
        }
    }
    out
}

/// The relative error bound for rows of `d` elements: `(d/16 + 16)·2⁻²⁴`.
///
/// Every step multiplies or adds positive terms, so the error is relative to each result
/// (`u = 2⁻²⁴`, first order): the squares round once (`u`); the fp32 sum folds `d/16` terms
/// into each of 16 partials and combines them in 4 levels (`(d/16 + 3)·u`, docs/numerics.md);
/// the division by `d` rounds once (`u`, exact for a power of two); `rsqrt` halves the mean's
/// relative error and adds its own, at most 1.5 ulp (`3u`, docs/numerics.md); the two
/// multiplies round once each (`2u`). That is `((d/16 + 5)/2 + 5)·u`; the bound allows about
/// twice that.
pub fn relative_tolerance(d: usize) -> f64 {
    (d as f64 / 16.0 + 16.0) * 2f64.powi(-24)
}

/// Compares a kernel's output with [`reference`] within [`relative_tolerance`].
pub fn check(out: ArrayView2<f32>, a: ArrayView2<f32>, g: ArrayView1<f32>) -> common::Comparison {
    assert_eq!(out.dim(), a.dim(), "output shape");
    let want = reference(a, g);
    let tol = relative_tolerance(a.ncols());
    common::compare(
        out.iter().map(|&x| f64::from(x)),
        want.iter().copied(),
        want.iter().map(|r| tol * r.abs()),
    )
}

/// NKI's RMSNorm tutorial kernel on [4096, 4096] f32, checked against an f64 reference.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    const ROWS: usize = 4096;
    const D: usize = 4096;
    let a = common::random_f32(Ix2(ROWS, D), 1, 0.0, 1.0);
    let g = common::random_f32(Ix1(D), 2, 0.0, 1.0);
    let a_dev = DeviceTensor::from_array(&a)?;
    let g_dev = DeviceTensor::from_array(&g)?;
    let mut core = NeuronCore::default();
    cli.profile.run(
        &mut core,
        &nki_rmsnorm_kernel_4096::KERNEL,
        &[a_dev.arg(), g_dev.arg()],
    )?;
    let mut out = DeviceTensor::<f32>::zeros(&[ROWS, D])?;
    let time = common::median_time(5, || {
        nki_rmsnorm_kernel_4096::launch_into(&mut core, &a_dev, &g_dev, &mut out)
    })?;

    println!("{}", nki_rmsnorm_kernel_4096::KERNEL.program());
    let out = out.into_array::<Ix2>()?;
    let c = check(out.view(), a.view(), g.view());
    println!(
        "nki_rmsnorm_kernel_4096 a [{ROWS}, {D}] f32, g [{D}]: against the f64 reference, {c} \
         (relative bound {:.2e}); median of 5 launches {:.2} ms",
        relative_tolerance(D),
        time.as_secs_f64() * 1e3
    );
    if !c.within {
        return Err("rmsnorm: result outside the error bound".into());
    }
    Ok(())
}
