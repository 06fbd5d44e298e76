//! The seed kernel: one 128×128 stationary tile times one 128×512 moving tile, as in NKI's
//! `nki_matmul_basic_` tutorial, checked against an f64 reference.
//!
//! `cargo run --release --example matmul_basic`

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::prelude::*;

/// `result = lhs_tᵀ · rhs` for a `[128, 128]` stationary and a `[128, 512]` moving matrix.
#[kernel]
pub fn matmul_basic(lhs_t: Hbm<bf16, 128, 128>, rhs: Hbm<bf16, 128, 512>) -> Hbm<bf16, 128, 512> {
    let result = ndarray([128, 512], bf16, SharedHbm);
    let (i_lp, i_lf) = mgrid![0..128, 0..128];
    let (i_rp, i_rf) = mgrid![0..128, 0..512];
    let lhs_tile = load(lhs_t[[i_lp, i_lf]]);
    let rhs_tile = load(rhs[[i_rp, i_rf]]);
    let acc = nc_matmul(lhs_tile, rhs_tile);
    store(result[[i_rp, i_rf]], copy(acc, bf16));
    result
}

/// The seed kernel: one 128×128 by 128×512 bf16 matmul, checked against an f64 reference.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let lhs_t = common::random_bf16(128, 128, 1);
    let rhs = common::random_bf16(128, 512, 2);
    let mut core = NeuronCore::default();
    cli.profile.run_shapes(
        &mut core,
        &matmul_basic::KERNEL,
        &[&[128, 128], &[128, 512]],
    )?;
    let out = matmul_basic::host(&mut core, lhs_t.view(), rhs.view())?;

    println!("{}", matmul_basic::KERNEL.program());
    let (reference, magnitude) = common::reference(lhs_t.view(), rhs.view());
    let (worst, within) = common::max_error(out.view(), &reference, &magnitude, 128);
    println!(
        "largest |error| against the f64 reference: {worst:.3e} (within the bf16 bound: {within})"
    );
    if !within {
        return Err("result outside the bf16 error bound".into());
    }
    Ok(())
}
