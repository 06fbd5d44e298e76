//! NKI's LayerNorm tutorial kernels, `nki_layernorm_kernel_v1` and `nki_layernorm_kernel_v2`
//! (aws-neuron/nki-samples, `src/nki_samples/tutorials/layernorm/layernorm_nki_kernel.py`):
//! `out = (x − mean(x)) / sqrt(var(x) + ε) · γ + β` per row, rows processed 128 at a time with
//! a mask for the last, ragged, tile. v1 uses `nl` operations only (`mean`, `square`, `rsqrt`,
//! operators, `broadcast_to`); v2 computes the mean and variance with `bn_stats` on each
//! 512-element chunk and `bn_aggr`, and shifts and scales with one `tensor_scalar`. Both are
//! checked against an f64 reference.
//!
//! `cargo run --release --example layernorm` runs the tutorial's default (benchmark) shape: input
//! [4096, 8192] f32, γ and β [8192], all uniform in [0, 1) as the tutorial draws them, ε = 1e-5.
//! Small and ragged shapes are in `tests/all/tutorials_norm.rs`.
//!
//! The row count is symbolic (`N`). The row length `D` (NKI's `input_tensor.shape[1]`) and ε
//! (NKI's `epsilon` argument) are meta-parameters, `const D: usize` and `const EPS: f32`: each
//! kernel's `#[kernel(...)]` lists one instantiation per row length used, rows of 8192 (the
//! benchmark) and of 1024 (the tests), both with the tutorial's ε = 1e-5, each a kernel of its
//! own (`nki_layernorm_kernel_v1_8192`, ..., listed in `nki_layernorm_kernel_v1::INSTANCES`).
//! `tile_size.pmax` and `tile_size.bn_stats_fmax` stand where the tutorial writes
//! `nl.tile_size.pmax` and `nl.tile_size.bn_stats_fmax`. The row length must be a multiple of
//! 512 for v2: NKI masks the last `bn_stats` chunk (`j * bn_stats_fmax + i_f_bn < D`), and
//! `bn_stats` cannot be masked (NKI's known issue; docs/language.md, "Masks"), so a partial
//! last chunk is a compile-time out-of-bounds error instead.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, ArrayView1, ArrayView2, Ix1, Ix2};
use nki::prelude::*;

/// ε, as the tutorial's test passes it: the `EPS` of every instantiation of both kernels.
pub const EPSILON: f64 = 1e-5;

/// `nki_layernorm_kernel_v1` for rows of `D` elements and ε = `EPS`, as NKI's tutorial writes
/// it, with `nl` operations only: γ and β loaded once as `[1, D]` tiles and broadcast to
/// `[128, D]`, then for each 128-row tile the mean and variance (`mean(x²) − mean²`), the shift
/// and scale, `· γ + β`, and the store. As in NKI only the load and the store are masked.
///
/// One kernel per row length: `nki_layernorm_kernel_v1_8192` (the benchmark shape) and
/// `nki_layernorm_kernel_v1_1024` (the tests), both with the tutorial's ε = 1e-5 ([`EPSILON`]).
#[kernel(
    nki_layernorm_kernel_v1_8192(D = 8192, EPS = 1e-5),
    nki_layernorm_kernel_v1_1024(D = 1024, EPS = 1e-5)
)]
pub fn nki_layernorm_kernel_v1<const D: usize, const EPS: f32>(
    input_tensor: Hbm<f32, N, D>,
    gamma_vector: Hbm<f32, D>,
    beta_vector: Hbm<f32, D>,
) -> Hbm<f32, N, D> {
    let output_tensor = ndarray([N, D], f32, SharedHbm);

    // Tile indices for the input and output, and for the (1, D) parameters.
    let (i_p_io, i_f_io) = mgrid![0..tile_size.pmax, 0..D];
    let (i_p_param, i_f_param) = mgrid![0..1, 0..D];

    // γ and β, loaded once (viewed as (1, D), as NKI's `reshape((1, D))`) and broadcast along
    // the partitions.
    let gamma_sb = load(gamma_vector[[i_p_param * D + i_f_param]]);
    let beta_sb = load(beta_vector[[i_p_param * D + i_f_param]]);
    let gamma_sb_bcast = broadcast_to(gamma_sb, [tile_size.pmax, D]);
    let beta_sb_bcast = broadcast_to(beta_sb, [tile_size.pmax, D]);

    // The rows, tile_size.pmax (128) at a time: NKI's `math.ceil(num_rows / nl.tile_size.pmax)`
    // tiles.
    for i in affine_range((N + (tile_size.pmax - 1)) / tile_size.pmax) {
        let input_sb = load(
            input_tensor[[i * tile_size.pmax + i_p_io, i_f_io]],
            mask = i * tile_size.pmax + i_p_io < N,
        );

        // The mean and the variance, as mean(x²) − mean(x)².
        let mean = nl::mean(input_sb, axis = 1);
        let var = nl::mean(square(input_sb), axis = 1) - mean * mean;

        // Shift by the mean, scale by 1 / sqrt(var + ε).
        let shift_scale_tensor = (input_sb - mean) * rsqrt(var + EPS);

        // · γ + β.
        let output_sb = shift_scale_tensor * gamma_sb_bcast + beta_sb_bcast;

        store(
            output_tensor[[i * tile_size.pmax + i_p_io, i_f_io]],
            output_sb,
            mask = i * tile_size.pmax + i_p_io < N,
        );
    }
    output_tensor
}

/// `nki_layernorm_kernel_v2` for rows of `D` elements and ε = `EPS`, as NKI's tutorial writes
/// it: as v1, but the mean and variance come from `bn_stats` on each `bn_stats_fmax` (512)
/// element chunk and `bn_aggr`, and the shift and scale is one `tensor_scalar` (two ALU
/// operations).
///
/// One kernel per row length: `nki_layernorm_kernel_v2_8192` (the benchmark shape, 16 chunks)
/// and `nki_layernorm_kernel_v2_1024` (the tests, two chunks), both with ε = 1e-5.
#[kernel(
    nki_layernorm_kernel_v2_8192(D = 8192, EPS = 1e-5),
    nki_layernorm_kernel_v2_1024(D = 1024, EPS = 1e-5)
)]
pub fn nki_layernorm_kernel_v2<const D: usize, const EPS: f32>(
    input_tensor: Hbm<f32, N, D>,
    gamma_vector: Hbm<f32, D>,
    beta_vector: Hbm<f32, D>,
) -> Hbm<f32, N, D> {
    let output_tensor = ndarray([N, D], f32, SharedHbm);

    let (i_p_io, i_f_io) = mgrid![0..tile_size.pmax, 0..D];
    let (i_p_param, i_f_param) = mgrid![0..1, 0..D];

    let gamma_sb = load(gamma_vector[[i_p_param * D + i_f_param]]);
    let beta_sb = load(beta_vector[[i_p_param * D + i_f_param]]);
    let gamma_sb_bcast = broadcast_to(gamma_sb, [tile_size.pmax, D]);
    let beta_sb_bcast = broadcast_to(beta_sb, [tile_size.pmax, D]);

    for i in affine_range((N + (tile_size.pmax - 1)) / tile_size.pmax) {
        let input_sb = load(
            input_tensor[[i * tile_size.pmax + i_p_io, i_f_io]],
            mask = i * tile_size.pmax + i_p_io < N,
        );

        // bn_stats on each chunk of bn_stats_fmax (its free-size limit), 6 values per chunk.
        let (i_p_bn, i_f_bn) = mgrid![0..tile_size.pmax, 0..tile_size.bn_stats_fmax];
        let (i_p_stats, i_f_stats) = mgrid![0..tile_size.pmax, 0..6];
        let num_bn_stats = (D + tile_size.bn_stats_fmax - 1) / tile_size.bn_stats_fmax;
        let stats_results = ndarray([tile_size.pmax, 6 * num_bn_stats], f32, Sbuf);
        for j in affine_range(num_bn_stats) {
            stats_results[[i_p_stats, j * 6 + i_f_stats]] = bn_stats(
                input_sb[[i_p_bn, j * tile_size.bn_stats_fmax + i_f_bn]],
                dtype = f32,
            );
        }

        // The chunks' statistics aggregated: the mean and the variance of the row.
        let mean_var = bn_aggr(stats_results);
        let mean = mean_var[[i_p_io, 0]];
        let var = mean_var[[i_p_io, 1]];

        // 1 / sqrt(var + ε).
        let scale_var = rsqrt(var + EPS);

        // (x − mean) · scale in one instruction (two ALU operations).
        let shift_scale_tensor = tensor_scalar(
            data = input_sb,
            op0 = subtract,
            operand0 = mean,
            op1 = multiply,
            operand1 = scale_var,
        );

        // · γ + β.
        let output_sb = shift_scale_tensor * gamma_sb_bcast + beta_sb_bcast;

        store(
            output_tensor[[i * tile_size.pmax + i_p_io, i_f_io]],
            output_sb,
            mask = i * tile_size.pmax + i_p_io < N,
        );
    }
    output_tensor
}

/// One row's statistics in f64: the mean, the (population) variance by two passes, the mean of
/// the squares and the mean of the absolute values.
struct RowStats {
    mean: f64,
    var: f64,
    mean_square: f64,
    mean_abs: f64,
}

fn row_stats(row: ArrayView1<f32>) -> RowStats {
    let n = row.len() as f64;
    let mean = row.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    RowStats {
        mean,
        var: row
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / n,
        mean_square: row.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / n,
        mean_abs: row.iter().map(|&x| f64::from(x).abs()).sum::<f64>() / n,
    }
}

/// `(x − mean) / sqrt(var + ε) · γ + β` per row, in f64 from the f32 inputs (the variance by two
/// passes over the row, not by the tutorial's `mean(x²) − mean²`).
pub fn reference(x: ArrayView2<f32>, gamma: ArrayView1<f32>, beta: ArrayView1<f32>) -> Array2<f64> {
    let mut out = Array2::zeros(x.raw_dim());
    for (mut o, row) in out.rows_mut().into_iter().zip(x.rows()) {
        let s = row_stats(row);
        let r = 1.0 / (s.var + EPSILON).sqrt();
        for (((o, &x), &g), &b) in o.iter_mut().zip(row).zip(gamma).zip(beta) {
            *o = (f64::from(x) - s.mean) * r * f64::from(g) + f64::from(b);
        }
    }
    out
}

/// The error bound of each element of [`reference`], for the computation in fp32 (`u = 2⁻²⁴`).
///
/// First-order propagation, per row of `D` elements with `M1 = mean|x|`, `m2 = mean(x²)`,
/// `r = 1/sqrt(var + ε)`, `z = (x − mean)·r`, `y = z·γ + β`:
/// - the mean: an fp32 sum in 16 partials of `D/16` terms and 4 combining levels, then a
///   division: `δmean ≤ K·M1` with `K = (D/16 + 8)·u`;
/// - the variance: v1 computes `mean(x²) − mean²`, an error of at most `K·(m2 + 2|mean|·M1)`
///   (relative to the variance this grows with the cancellation `m2 / var`); v2's `bn_stats` /
///   `bn_aggr` (two-pass per chunk, Chan's merge) stay within the same bound;
/// - `r`: half the relative error of `var + ε`, plus `rsqrt`'s 1.5 ulp (3u, docs/numerics.md):
///   `ρ = δvar / (2(var + ε)) + 4u`;
/// - `z`: `r·δmean + |z|·(ρ + 2u)` (the subtraction and the multiply round once each);
/// - `y`: `|γ|·(that + u·|z|) + u·|y|`.
///
/// The bound is twice that, for the second-order terms.
pub fn bounds(x: ArrayView2<f32>, gamma: ArrayView1<f32>, beta: ArrayView1<f32>) -> Array2<f64> {
    let u = 2f64.powi(-24);
    let k = (x.ncols() as f64 / 16.0 + 8.0) * u;
    let mut out = Array2::zeros(x.raw_dim());
    for (mut o, row) in out.rows_mut().into_iter().zip(x.rows()) {
        let s = row_stats(row);
        let r = 1.0 / (s.var + EPSILON).sqrt();
        let d_mean = k * s.mean_abs;
        let d_var = k * (s.mean_square + 2.0 * s.mean.abs() * s.mean_abs);
        let rho = d_var / (2.0 * (s.var + EPSILON)) + 4.0 * u;
        for (((o, &x), &g), &b) in o.iter_mut().zip(row).zip(gamma).zip(beta) {
            let z = (f64::from(x) - s.mean) * r;
            let y = z * f64::from(g) + f64::from(b);
            let d_z = r * d_mean + z.abs() * (rho + 2.0 * u);
            *o = 2.0 * (f64::from(g).abs() * (d_z + u * z.abs()) + u * y.abs());
        }
    }
    out
}

/// Compares a kernel's output with [`reference`] within [`bounds`].
pub fn check(
    out: ArrayView2<f32>,
    x: ArrayView2<f32>,
    gamma: ArrayView1<f32>,
    beta: ArrayView1<f32>,
) -> common::Comparison {
    assert_eq!(out.dim(), x.dim(), "output shape");
    let want = reference(x, gamma, beta);
    let bound = bounds(x, gamma, beta);
    common::compare(out.iter().map(|&v| f64::from(v)), want, bound)
}

/// NKI's LayerNorm tutorial kernels v1 and v2 on [4096, 8192] f32, checked against an f64
/// reference.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    const ROWS: usize = 4096;
    const D: usize = 8192;
    let x = common::random_f32(Ix2(ROWS, D), 4, 0.0, 1.0);
    let gamma = common::random_f32(Ix1(D), 5, 0.0, 1.0);
    let beta = common::random_f32(Ix1(D), 6, 0.0, 1.0);
    let x_dev = DeviceTensor::from_array(&x)?;
    let gamma_dev = DeviceTensor::from_array(&gamma)?;
    let beta_dev = DeviceTensor::from_array(&beta)?;
    let mut core = NeuronCore::default();
    cli.profile.run(
        &mut core,
        &nki_layernorm_kernel_v2_8192::KERNEL,
        &[x_dev.arg(), gamma_dev.arg(), beta_dev.arg()],
    )?;
    let mut out_v1 = DeviceTensor::<f32>::zeros(&[ROWS, D])?;
    let mut out_v2 = DeviceTensor::<f32>::zeros(&[ROWS, D])?;
    let time_v1 = common::median_time(5, || {
        nki_layernorm_kernel_v1_8192::launch_into(
            &mut core,
            &x_dev,
            &gamma_dev,
            &beta_dev,
            &mut out_v1,
        )
    })?;
    let time_v2 = common::median_time(5, || {
        nki_layernorm_kernel_v2_8192::launch_into(
            &mut core,
            &x_dev,
            &gamma_dev,
            &beta_dev,
            &mut out_v2,
        )
    })?;

    println!("{}", nki_layernorm_kernel_v2_8192::KERNEL.program());
    let mut ok = true;
    for (name, out, time) in [
        ("nki_layernorm_kernel_v1_8192", out_v1, time_v1),
        ("nki_layernorm_kernel_v2_8192", out_v2, time_v2),
    ] {
        let out = out.into_array::<Ix2>()?;
        let c = check(out.view(), x.view(), gamma.view(), beta.view());
        println!(
            "{name} [{ROWS}, {D}] f32: against the f64 reference, {c}; median of 5 launches {:.2} ms",
            time.as_secs_f64() * 1e3
        );
        ok &= c.within;
    }
    if !ok {
        return Err("layernorm: result outside the error bound".into());
    }
    Ok(())
}
