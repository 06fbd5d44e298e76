//! Loads and stores against `memcpy`: a kernel that copies a device-resident `[4096, 4096]`
//! tensor HBM → SBUF → HBM, 128 rows at a time, as f32 and with a bf16 → f32 conversion on
//! the way, timed against a host `copy_from_slice` of the same bytes (and, for the cast, a
//! `half` conversion loop) on the same machine in the same run.
//!
//! `cargo run --release --example data_movement`
//!
//! Prints min and P50 per case and the ratios of the P50s. The kernel's row loop runs in two
//! halves on the core's two threads, and again on a one-thread core; the host copies run on
//! one thread. On a plain core each tile, loaded only to be stored, moves straight from the
//! input to the output (converted once, as the load converts); a strict core runs the load and
//! the store through SBUF, as written.

#[path = "common/mod.rs"]
pub mod common;

use std::hint::black_box;

use clap::Parser;
use nki::ndarray::Ix2;
use nki::prelude::*;

/// `out = x`, 128 rows at a time through SBUF, converted to f32.
#[kernel(copy_f32(T = f32), copy_bf16_to_f32(T = bf16))]
pub fn copy_rows<T>(x: Hbm<T, N, 4096>) -> Hbm<f32, N, 4096> {
    let out = ndarray([N, 4096], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..4096];
    for i in affine_range(N / 128) {
        let t = load(x[[i * 128 + ip, jf]], dtype = f32);
        store(out[[i * 128 + ip, jf]], t);
    }
    out
}

/// Loads and stores of a device-resident [4096, 4096] tensor against memcpy.
#[derive(Parser)]
struct Cli {}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    Cli::parse();
    const ROWS: usize = 4096;
    let x = common::random_f32(Ix2(ROWS, 4096), 1, -1.0, 1.0);
    let xb = x.mapv(bf16::from_f32);
    let (xd, xbd) = (
        DeviceTensor::from_array(&x)?,
        DeviceTensor::from_array(&xb)?,
    );
    let mut out = DeviceTensor::<f32>::zeros(&[ROWS, 4096])?;
    let mut core = NeuronCore::default();
    let runs = 31;

    let kernel_f32 = common::time_runs(runs, || copy_f32::launch_into(&mut core, &xd, &mut out))?;
    assert_eq!(out.as_slice(), xd.as_slice());
    let kernel_bf16 = common::time_runs(runs, || {
        copy_bf16_to_f32::launch_into(&mut core, &xbd, &mut out)
    })?;
    assert!(
        out.as_slice()
            .iter()
            .zip(xbd.as_slice())
            .all(|(&o, &b)| o == f32::from(b))
    );

    let mut one = NeuronCore::default().with_host_threads(1);
    let kernel_f32_one =
        common::time_runs(runs, || copy_f32::launch_into(&mut one, &xd, &mut out))?;
    let kernel_bf16_one = common::time_runs(runs, || {
        copy_bf16_to_f32::launch_into(&mut one, &xbd, &mut out)
    })?;

    let mut host = vec![0f32; ROWS * 4096];
    let memcpy = common::time_runs(runs, || {
        host.copy_from_slice(black_box(xd.as_slice()));
        black_box(&host);
        Ok::<(), LaunchError>(())
    })?;
    let convert = common::time_runs(runs, || {
        for (o, &b) in host.iter_mut().zip(black_box(xbd.as_slice())) {
            *o = f32::from(b);
        }
        black_box(&host);
        Ok::<(), LaunchError>(())
    })?;

    let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
    let f32_bytes = ROWS * 4096 * 4;
    let bf16_bytes = ROWS * 4096 * 2;
    println!("[{ROWS}, 4096], {runs} runs per case (min, P50):");
    let row = |name: &str, (min, p50): (f64, f64), moved: usize| {
        println!(
            "{name:<52} {:>9.3} ms {:>9.3} ms  {:>6.1} GB/s at P50",
            min * 1e3,
            p50 * 1e3,
            moved as f64 / p50 / 1e9
        );
    };
    row(
        "kernel: f32 load + store (HBM -> HBM, as plain cores run it)",
        kernel_f32,
        2 * f32_bytes,
    );
    row(
        "the same kernel on one host thread",
        kernel_f32_one,
        2 * f32_bytes,
    );
    row(
        "host: copy_from_slice of the same f32 bytes",
        memcpy,
        2 * f32_bytes,
    );
    row(
        "kernel: bf16 load as f32 + f32 store",
        kernel_bf16,
        bf16_bytes + f32_bytes,
    );
    row(
        "the same kernel on one host thread",
        kernel_bf16_one,
        bf16_bytes + f32_bytes,
    );
    row(
        "host: bf16 -> f32 conversion loop (half)",
        convert,
        bf16_bytes + f32_bytes,
    );
    println!(
        "P50 ratios: kernel / memcpy {:.2} (one thread {:.2}); kernel cast / host cast {:.2} (one thread {:.2}); {} MiB per f32 copy",
        kernel_f32.1 / memcpy.1,
        kernel_f32_one.1 / memcpy.1,
        kernel_bf16.1 / convert.1,
        kernel_bf16_one.1 / convert.1,
        mib(f32_bytes)
    );
    Ok(())
}
