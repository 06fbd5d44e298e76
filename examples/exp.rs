//! NKI's getting-started exp kernels (`nki.language.exp` over a tensor of any shape): rows in
//! tiles of 128 partitions with the last tile masked, the row length a meta-parameter, the
//! dtype a type parameter.
//!
//! `cargo run --release --example exp` runs `[4096, 4096]` bf16 (the peers' shape) and checks
//! it against f64.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `out = exp(x)` elementwise, `x: [N, D]` for any N.
#[kernel(
    exp_bf16_4096(T = bf16, D = 4096),
    exp_f32_512(T = f32, D = 512),
)]
pub fn exp_kernel<T, const D: usize>(x: Hbm<T, N, D>) -> Hbm<T, N, D> {
    let out = ndarray([N, D], T, SharedHbm);
    let (i_p, i_f) = mgrid![0..tile_size.pmax, 0..D];
    for k in affine_range((N + 127) / 128) {
        let rows = k * 128 + i_p < N;
        let t = load(x[[k * 128 + i_p, i_f]], mask = rows);
        store(out[[k * 128 + i_p, i_f]], exp(t, mask = rows), mask = rows);
    }
    out
}

/// `exp` in f64, and the bound of the result: the activation's 1.013 ulp in fp32
/// (`docs/numerics.md`) plus the output's rounding (half an ulp of `unit`).
pub fn reference(x: &Array2<f64>, unit: f64) -> (Array2<f64>, Array2<f64>) {
    let want = x.mapv(f64::exp);
    let bound = want.mapv(|w| w * (unit + 1.1 * 2f64.powi(-23)));
    (want, bound)
}

/// NKI's exp kernel on [4096, 4096] bf16, checked against f64.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let x = common::uniform(Ix2(4096, 4096), 1, -4.0, 4.0).mapv(bf16::from_f64);
    let xd = DeviceTensor::from_array(&x)?;
    let mut core = NeuronCore::default();
    cli.profile
        .run(&mut core, &exp_bf16_4096::KERNEL, &[xd.arg()])?;
    let mut out = exp_bf16_4096(&mut core, &xd)?;
    let t = common::median_time(9, || exp_bf16_4096::launch_into(&mut core, &xd, &mut out))?;
    let got = out.into_array::<Ix2>()?;
    let (want, bound) = reference(&x.mapv(f64::from), 2f64.powi(-8));
    let c = common::compare(
        got.iter().map(|g| f64::from(g.to_f32())),
        want.iter().copied(),
        bound.iter().copied(),
    );
    println!("exp [4096, 4096] bf16: {c}; median launch {t:?}");
    if !c.within {
        return Err("result outside the bound".into());
    }
    Ok(())
}
