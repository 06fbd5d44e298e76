//! NKI's tiled matmul (`nki_matmul_tiled_`): symbolic K, M, N, 128×128 stationary and 128×512
//! moving tiles, PSUM accumulation over K, checked against an f64 reference.
//!
//! `cargo run --release --example matmul_tiled -- [K M N] [--time RUNS [--threads 1|2]]` (default
//! 1024 1024 1024)
//!
//! `--time RUNS` also times `RUNS` launches with device-resident tensors on a two-thread core
//! (`--threads 1`: one thread; after one untimed launch) and prints min and P50: the 1024³ figures of
//! `docs/performance.md`. It does so twice: with the same inputs every time (the core keeps
//! the packed matmul operands of unchanged device tensors between launches), and with both
//! inputs marked written before each launch (`as_mut_slice`), so that every launch packs its
//! operands anew.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::prelude::*;

/// `result = lhs_tᵀ · rhs` for `lhs_t: [K, M]`, `rhs: [K, N]`; K and M multiples of 128, N of 512.
#[kernel]
pub fn matmul_tiled(lhs_t: Hbm<bf16, K, M>, rhs: Hbm<bf16, K, N>) -> Hbm<bf16, M, N> {
    const TILE_K: usize = 128;
    const TILE_M: usize = 128;
    const TILE_N: usize = 512;
    let result = ndarray([M, N], bf16, SharedHbm);
    for m in affine_range(M / TILE_M) {
        for n in affine_range(N / TILE_N) {
            let res_psum = zeros([TILE_M, TILE_N], f32, Psum);
            for k in affine_range(K / TILE_K) {
                let lhs_tile =
                    load(lhs_t[[k * TILE_K..(k + 1) * TILE_K, m * TILE_M..(m + 1) * TILE_M]]);
                let rhs_tile =
                    load(rhs[[k * TILE_K..(k + 1) * TILE_K, n * TILE_N..(n + 1) * TILE_N]]);
                res_psum += matmul(lhs_tile, rhs_tile, transpose_x = true);
            }
            let res_sb = copy(res_psum, result.dtype);
            store(
                result[[m * TILE_M..(m + 1) * TILE_M, n * TILE_N..(n + 1) * TILE_N]],
                res_sb,
            );
        }
    }
    result
}

/// NKI's tiled matmul, checked against an f64 reference.
#[derive(Parser)]
struct Cli {
    /// The shape: lhs_t [K, M], rhs [K, N] (default 1024 1024 1024)
    #[arg(value_names = ["K", "M", "N"], num_args = 3, action = clap::ArgAction::Set)]
    shape: Vec<usize>,
    /// Also time RUNS launches with device-resident tensors on a two-thread core (min, P50)
    #[arg(long, value_name = "RUNS")]
    time: Option<usize>,
    /// Host threads of the timed core (1 or 2)
    #[arg(long, default_value_t = 2)]
    threads: usize,
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let [k, m, n] = common::shape(&cli.shape, [1024, 1024, 1024]);
    let runs = cli.time;
    let mut lhs_t = DeviceTensor::from_array(&common::random_bf16(k, m, 3))?;
    let mut rhs = DeviceTensor::from_array(&common::random_bf16(k, n, 4))?;
    let mut core = NeuronCore::default();
    cli.profile
        .run(&mut core, &matmul_tiled::KERNEL, &[lhs_t.arg(), rhs.arg()])?;
    let out = matmul_tiled(&mut core, &lhs_t, &rhs)?;

    println!("{}", matmul_tiled::KERNEL.program());
    let a = lhs_t.view().into_dimensionality()?;
    let b = rhs.view().into_dimensionality()?;
    let (reference, magnitude) = common::reference(a, b);
    let out = out.into_array::<nki::ndarray::Ix2>()?;
    let (worst, within) = common::max_error(out.view(), &reference, &magnitude, k);
    println!(
        "K={k} M={m} N={n}: largest |error| against the f64 reference: {worst:.3e} (within the bf16 bound: {within})"
    );
    if !within {
        return Err("result outside the bf16 error bound".into());
    }
    if let Some(runs) = runs {
        let mut out = DeviceTensor::<bf16>::zeros(&[m, n])?;
        let mut core = NeuronCore::default()
            .with_strict(false)
            .with_host_threads(cli.threads);
        let threads = core.host_threads();
        for written in [false, true] {
            let (min, p50) = common::time_runs(runs, || {
                if written {
                    lhs_t.as_mut_slice();
                    rhs.as_mut_slice();
                }
                matmul_tiled::launch_into(&mut core, &lhs_t, &rhs, &mut out)
            })?;
            let inputs = if written {
                "inputs marked written before each launch"
            } else {
                "the same inputs"
            };
            println!(
                "K={k} M={m} N={n}, {runs} launches, device-resident, {threads} host thread(s), {inputs}: min {:.0} µs, P50 {:.0} µs",
                min * 1e6,
                p50 * 1e6
            );
        }
    }
    Ok(())
}
