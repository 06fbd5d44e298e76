//! Why helpers matter: `gelu(lhs_tᵀ · rhs + bias)` as one fused kernel, against the same three
//! steps as three kernels chained through device tensors. The steps are helpers written once;
//! the fused kernel inlines all three and keeps the matmul's result on chip, the chain pays an
//! HBM round trip (and a bf16 rounding) between kernels.
//!
//! `cargo run --release --example fused_matmul_bias_gelu -- [K M N]` (default 1024 1024 1024;
//! K and M multiples of 128, N of 512). Prints each version's median host time, the HBM bytes
//! each moves (counted by an `Observer` over one launch) and its error against an f64
//! reference.

#[path = "common/mod.rs"]
pub mod common;

use std::ops::ControlFlow;
use std::time::Instant;

use clap::Parser;
use nki::ndarray::{Array2, Ix2};
use nki::observe::Observer;
use nki::observe::{Loc, Operands};
use nki::prelude::*;
use nki::program::{Instr, VarValues};
use nki::{HbmIn, HbmOut};

/// One `[128, 512]` block of `lhs_tᵀ · rhs` (rows `m`, columns `n` in tiles), accumulated in
/// PSUM over `k_tiles` tiles of the contraction.
#[helper]
pub fn matmul_block(lhs_t: Tensor, rhs: Tensor, m: Index, n: Index, k_tiles: usize) -> Tile {
    let acc = zeros([128, 512], f32, Psum);
    for k in affine_range(k_tiles) {
        let a = load(lhs_t[[k * 128..(k + 1) * 128, m * 128..(m + 1) * 128]]);
        let b = load(rhs[[k * 128..(k + 1) * 128, n * 512..(n + 1) * 512]]);
        acc += matmul(a, b, transpose_x = true);
    }
    acc
}

/// `t + bias`, `bias` one value per row (partition).
#[helper]
pub fn add_bias(t: Tile, bias: Tile) -> Tile {
    t + bias
}

/// GELU.
#[helper]
pub fn activate(t: Tile) -> Tile {
    gelu(t)
}

/// The three steps in one kernel: the block stays in PSUM/SBUF between them.
#[kernel]
pub fn fused(
    lhs_t: Hbm<bf16, K, M>,
    rhs: Hbm<bf16, K, N>,
    bias: Hbm<f32, M, 1>,
) -> Hbm<bf16, M, N> {
    let out = ndarray([M, N], bf16, SharedHbm);
    let i_c = arange(1).x();
    let i_p = arange(128).p();
    for m in affine_range(M / 128) {
        let b = load(bias[[m * 128 + i_p, i_c]]);
        for n in affine_range(N / 512) {
            let acc = matmul_block(lhs_t, rhs, m, n, K / 128);
            let y = activate(add_bias(acc, b));
            store(out[[m * 128..(m + 1) * 128, n * 512..(n + 1) * 512]], y);
        }
    }
    out
}

/// Step 1 alone: the matmul, rounded to bf16 in HBM.
#[kernel]
pub fn matmul_only(lhs_t: Hbm<bf16, K, M>, rhs: Hbm<bf16, K, N>) -> Hbm<bf16, M, N> {
    let out = ndarray([M, N], bf16, SharedHbm);
    for m in affine_range(M / 128) {
        for n in affine_range(N / 512) {
            let acc = matmul_block(lhs_t, rhs, m, n, K / 128);
            store(
                out[[m * 128..(m + 1) * 128, n * 512..(n + 1) * 512]],
                copy(acc, bf16),
            );
        }
    }
    out
}

/// Step 2 alone: the bias.
#[kernel]
pub fn bias_only(c: Hbm<bf16, M, N>, bias: Hbm<f32, M, 1>) -> Hbm<bf16, M, N> {
    let out = ndarray([M, N], bf16, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let i_c = arange(1).x();
    for m in affine_range(M / 128) {
        let b = load(bias[[m * 128 + i_p, i_c]]);
        for n in affine_range(N / 512) {
            let t = load(c[[m * 128 + i_p, n * 512 + i_f]], dtype = f32);
            store(out[[m * 128 + i_p, n * 512 + i_f]], add_bias(t, b));
        }
    }
    out
}

/// Step 3 alone: the activation.
#[kernel]
pub fn gelu_only(d: Hbm<bf16, M, N>) -> Hbm<bf16, M, N> {
    let out = ndarray([M, N], bf16, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    for m in affine_range(M / 128) {
        for n in affine_range(N / 512) {
            let t = load(d[[m * 128 + i_p, n * 512 + i_f]], dtype = f32);
            store(out[[m * 128 + i_p, n * 512 + i_f]], activate(t));
        }
    }
    out
}

/// Counts the bytes DMA instructions move to and from HBM.
#[derive(Default)]
pub struct HbmBytes(pub u64);

impl Observer for HbmBytes {
    fn before(
        &mut self,
        _pc: usize,
        _instr: &Instr,
        operands: &Operands,
        _vars: &VarValues,
    ) -> ControlFlow<String> {
        for r in operands.iter() {
            if let Loc::Hbm(_) = r.loc {
                let elems: usize = r.dims.iter().product();
                self.0 += (elems * r.dtype.size() as usize) as u64;
            }
        }
        ControlFlow::Continue(())
    }
}

/// The HBM bytes one launch of `kernel` moves.
pub fn hbm_bytes(
    core: &mut NeuronCore,
    kernel: &Kernel<'_>,
    inputs: &[HbmIn<'_>],
    outputs: &mut [HbmOut<'_>],
) -> Result<u64, LaunchError> {
    let mut count = HbmBytes::default();
    core.execute_observed(kernel.bind(inputs, outputs)?, &mut count)?;
    Ok(count.0)
}

/// `gelu(lhs_tᵀ · rhs + bias)` in f64.
pub fn reference(lhs_t: &Array2<bf16>, rhs: &Array2<bf16>, bias: &Array2<f32>) -> Array2<f64> {
    let (c, _) = common::reference(lhs_t.view(), rhs.view());
    Array2::from_shape_fn(c.dim(), |(i, j)| {
        gelu_f64(c[[i, j]] + f64::from(bias[[i, 0]]))
    })
}

/// `x · Φ(x)`, Φ through erfc's continued fraction-free series (ample for bf16 results).
pub fn gelu_f64(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

fn erf(x: f64) -> f64 {
    if x.abs() > 4.0 {
        return x.signum();
    }
    let (mut sum, mut term) = (0.0, x);
    for n in 0..300 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn median(mut f: impl FnMut() -> Result<(), LaunchError>) -> Result<f64, LaunchError> {
    let mut t = Vec::new();
    for _ in 0..9 {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64() * 1e6);
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// gelu(lhs_tᵀ · rhs + bias) as one fused kernel against three chained kernels.
#[derive(Parser)]
struct Cli {
    /// The shape: lhs_t [K, M], rhs [K, N] (default 1024 1024 1024)
    #[arg(value_names = ["K", "M", "N"], num_args = 3, action = clap::ArgAction::Set)]
    shape: Vec<usize>,
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let [k, m, n] = common::shape(&cli.shape, [1024, 1024, 1024]);
    let a = common::random_bf16(k, m, 1);
    let b = common::random_bf16(k, n, 2);
    let bias = common::uniform(Ix2(m, 1), 3, -1.0, 1.0).mapv(|x| x as f32);
    let (a_d, b_d, bias_d) = (
        DeviceTensor::from_array(&a)?,
        DeviceTensor::from_array(&b)?,
        DeviceTensor::from_array(&bias)?,
    );
    let mut core = NeuronCore::default();
    cli.profile.run(
        &mut core,
        &fused::KERNEL,
        &[a_d.arg(), b_d.arg(), bias_d.arg()],
    )?;
    let mut out = DeviceTensor::<bf16>::zeros(&[m, n])?;
    let (mut c, mut d, mut e) = (out.clone(), out.clone(), out.clone());

    let t_fused = median(|| fused::launch_into(&mut core, &a_d, &b_d, &bias_d, &mut out))?;
    let t_chain = median(|| {
        matmul_only::launch_into(&mut core, &a_d, &b_d, &mut c)?;
        bias_only::launch_into(&mut core, &c, &bias_d, &mut d)?;
        gelu_only::launch_into(&mut core, &d, &mut e)
    })?;
    let fused_bytes = hbm_bytes(
        &mut core,
        &fused::KERNEL,
        &[a_d.arg(), b_d.arg(), bias_d.arg()],
        &mut [out.arg_mut()],
    )?;
    let chain_bytes = hbm_bytes(
        &mut core,
        &matmul_only::KERNEL,
        &[a_d.arg(), b_d.arg()],
        &mut [c.arg_mut()],
    )? + hbm_bytes(
        &mut core,
        &bias_only::KERNEL,
        &[c.arg(), bias_d.arg()],
        &mut [d.arg_mut()],
    )? + hbm_bytes(
        &mut core,
        &gelu_only::KERNEL,
        &[d.arg()],
        &mut [e.arg_mut()],
    )?;

    let want = reference(&a, &b, &bias);
    let err = |got: DeviceTensor<bf16>| -> Result<f64, Box<dyn std::error::Error>> {
        let got = got.into_array::<Ix2>()?;
        Ok(got
            .iter()
            .zip(&want)
            .map(|(g, w)| (f64::from(g.to_f32()) - w).abs())
            .fold(0.0, f64::max))
    };
    let (err_fused, err_chain) = (err(out)?, err(e)?);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!("gelu(lhs_tᵀ·rhs + bias), K={k} M={m} N={n}, bf16 in and out:");
    println!(
        "  fused kernel (helpers inlined):  {t_fused:9.0} µs, HBM {:7.1} MiB, max |error| {err_fused:.3e}",
        mib(fused_bytes)
    );
    println!(
        "  three kernels through HBM:       {t_chain:9.0} µs, HBM {:7.1} MiB, max |error| {err_chain:.3e}",
        mib(chain_bytes)
    );
    println!(
        "  the chain takes {:.2}× the time and moves {:.2}× the bytes",
        t_chain / t_fused,
        chain_bytes as f64 / fused_bytes as f64
    );
    // Both against the reference: the fused kernel rounds once to bf16, the chain three times.
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    if err_fused > scale * 2f64.powi(-7) || err_chain > scale * 2f64.powi(-6) {
        return Err("a result is outside its bf16 bound".into());
    }
    Ok(())
}
