//! NKI's SPMD tensor add (`nki_tensor_add_kernel_`, the tutorial "SPMD tensor addition"): each
//! instance of a `[X / 128, Y / 512]` launch grid adds one 128×512 tile, found from its
//! `program_id`s.
//!
//! `cargo run --release --example tensor_add -- [X Y]` (default 4096 4096, f16; the tutorial's
//! demo is 256 1024). X must be a multiple of 128 and Y of 512: the grid covers the tensor
//! exactly, and a launch whose grid reaches past it is refused.

#[path = "common/mod.rs"]
pub mod common;

use std::time::Instant;

use clap::Parser;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `c = a + b`, one 128×512 tile per instance: launch over `[X / 128, Y / 512]`. The dtype is a
/// parameter, as in NKI's Python: one instantiation per dtype.
#[kernel(tensor_add_f16(T = f16), tensor_add_bf16(T = bf16))]
pub fn tensor_add<T>(a: Hbm<T, X, Y>, b: Hbm<T, X, Y>) -> Hbm<T, X, Y> {
    let c = ndarray([X, Y], T, SharedHbm);
    let ix = program_id(0) * 128 + arange(128).p();
    let iy = program_id(1) * 512 + arange(512).x();
    let a_tile = load(a[[ix, iy]]);
    let b_tile = load(b[[ix, iy]]);
    let c_tile = a_tile + b_tile;
    store(c[[ix, iy]], c_tile);
    c
}

/// The launch grid covering `[x, y]` with 128×512 tiles.
pub fn grid_for(x: usize, y: usize) -> [usize; 2] {
    [x / 128, y / 512]
}

/// `a + b` rounded once to f16, as the Vector engine computes it (fp32 sum, one rounding).
pub fn reference(a: &Array2<f16>, b: &Array2<f16>) -> Array2<f16> {
    Array2::from_shape_fn(a.dim(), |(i, j)| {
        f16::from_f64(f64::from(a[[i, j]].to_f32()) + f64::from(b[[i, j]].to_f32()))
    })
}

/// NKI's SPMD tensor add over a launch grid, f16, checked against a reference.
#[derive(Parser)]
struct Cli {
    /// The shape of a and b: X a multiple of 128, Y of 512 (default 4096 4096)
    #[arg(value_names = ["X", "Y"], num_args = 2, action = clap::ArgAction::Set)]
    shape: Vec<usize>,
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let [x, y] = common::shape(&cli.shape, [4096, 4096]);
    let a = common::random_f16(nki::ndarray::Ix2(x, y), 1, -2.0, 2.0);
    let b = common::random_f16(nki::ndarray::Ix2(x, y), 2, -2.0, 2.0);
    let (a_dev, b_dev) = (DeviceTensor::from_array(&a)?, DeviceTensor::from_array(&b)?);
    let [gx, gy] = grid_for(x, y);
    let grid = tensor_add_f16::grid([gx, gy]);
    let mut core = NeuronCore::default();
    cli.profile.run_grid(
        &mut core,
        &tensor_add_f16::KERNEL,
        grid.0,
        &[a_dev.arg(), b_dev.arg()],
    )?;
    let mut out = grid.launch(&mut core, &a_dev, &b_dev)?;
    let got = out.clone().into_array::<nki::ndarray::Ix2>()?;
    let want = reference(&a, &b);
    let wrong = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| g.to_bits() != w.to_bits());
    let wrong = wrong.count();
    println!(
        "tensor_add [{x}, {y}] f16 over the grid [{gx}, {gy}]: {wrong} elements differ from the reference"
    );
    if wrong > 0 {
        return Err("result differs from the reference".into());
    }
    // The grid with its instances on two host threads, and on one.
    let mut serial = NeuronCore::default().with_host_threads(1);
    let median = |f: &mut dyn FnMut() -> Result<(), LaunchError>| {
        let mut times = Vec::new();
        for _ in 0..15 {
            let t = Instant::now();
            f()?;
            times.push(t.elapsed());
        }
        times.sort();
        Ok::<_, LaunchError>(times[times.len() / 2])
    };
    let two = median(&mut || grid.launch_into(&mut core, &a_dev, &b_dev, &mut out))?;
    let one = median(&mut || grid.launch_into(&mut serial, &a_dev, &b_dev, &mut out))?;
    println!("median host time of a launch: {two:?} on 2 host threads, {one:?} on 1");
    // The same work as one launch per tile, each on tensors of its own (as many bytes, none of
    // them shared between launches), on one host thread like the grid above.
    let n = gx * gy;
    let tiles: Vec<_> = (0..n as u64)
        .map(|s| {
            let a = common::random_f16(Ix2(128, 512), 100 + s, -2.0, 2.0);
            let b = common::random_f16(Ix2(128, 512), 200 + s, -2.0, 2.0);
            let (a, b) = (DeviceTensor::from_array(&a), DeviceTensor::from_array(&b));
            Ok::<_, LaunchError>((a?, b?, DeviceTensor::<f16>::zeros(&[128, 512])?))
        })
        .collect::<Result<_, _>>()?;
    let mut tiles = tiles;
    let single = tensor_add_f16::grid([1, 1]);
    let each = median(&mut || {
        for (a, b, c) in tiles.iter_mut() {
            single.launch_into(&mut serial, a, b, c)?;
        }
        Ok(())
    })?;
    println!("{n} one-tile launches on 1 host thread: {each:?} (the grid on 1 thread: {one:?})");
    Ok(())
}
