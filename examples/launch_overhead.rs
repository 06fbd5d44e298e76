//! The seed's measurement, reproduced: the 128×128×512 bf16 matmul kernel called many times,
//! each call timed with a wall clock.
//!
//! `cargo run --release --example launch_overhead [-- [--json] [--iters N] [--host-profile]]`
//!
//! Cases (min, P50, P99 per call):
//! - (a) host launch overhead of the compile-time program: argument checks and binding of
//!   device-resident tensors, no instruction executed;
//! - (b) the same program built at run time on every call through the public program builder
//!   (the honest equivalent of NKI's per-call tracing), then the same binding;
//! - (c) end to end: launch and modeled execution with device-resident tensors, and the same
//!   with `ndarray` arrays in and out;
//! - (c) again on a core limited to one host thread, to show what the second core buys;
//! - (c) again with both inputs marked written before each call (`as_mut_slice`): a core keeps
//!   the packed matmul operands of device tensors from one launch to the next while they keep
//!   their version, so this row shows a launch whose inputs are new every time;
//! - (d) a plain CPU matmul of the same inputs with `ndarray` (f32 `dot`), for scale.
//!
//! Every figure includes the timer's own cost, printed as the timer floor (`timer_floor_ns`).
//! The cache-line round trip to the core's second host thread is printed from before and after
//! case (c) (`host_round_trip_ns`, -1 when there is none): up to
//! `NeuronCore::NEAR_ROUND_TRIP` (250 ns), single instructions split between the threads;
//! above, the two vCPUs sit far apart and (c) takes about the one-thread time.
//! `--host-profile` also prints where the host's time goes in the seed kernel's instructions,
//! over `N` observed launches (which run on one thread: see `nki::host_profile`).

#[path = "matmul_basic.rs"]
#[allow(dead_code)]
pub mod basic;

use std::hint::black_box;
use std::time::Instant;

use basic::{common, matmul_basic};
use clap::Parser;
use nki::ndarray::Array2;
use nki::prelude::*;
use nki::program::builder::{Grid, ProgramBuilder};
use nki::program::{DType, Dim, Memory, Program, Target, Write};
use nki::{HbmIn, HbmOut};

/// min, P50, P99 of per-call samples, in nanoseconds.
struct Stats {
    min: f64,
    p50: f64,
    p99: f64,
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = (sorted.len() - 1) as f64 * q;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Times `f` once per sample after `warmup` untimed calls.
fn measure(warmup: usize, samples: usize, mut f: impl FnMut()) -> Stats {
    for _ in 0..warmup {
        f();
    }
    let mut ns: Vec<f64> = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t0 = Instant::now();
        f();
        ns.push(t0.elapsed().as_nanos() as f64);
    }
    ns.sort_by(f64::total_cmp);
    Stats {
        min: ns[0],
        p50: percentile(&ns, 0.5),
        p99: percentile(&ns, 0.99),
    }
}

/// Whether two programs have the same instructions (source lines aside) over the same tile
/// views and HBM accesses.
pub fn same_instructions(a: &Program<'_>, b: &Program<'_>) -> bool {
    let strip = |p: &Program<'_>| {
        let instrs: Vec<_> = p
            .instrs()
            .iter()
            .map(|i| (i.opcode, i.engine, i.mask, i.data))
            .collect();
        (instrs, p.views().to_vec(), p.accesses().to_vec())
    };
    strip(a) == strip(b)
}

/// The seed kernel's program, built instruction by instruction at run time.
pub fn build_seed_program() -> nki::program::CompiledProgram {
    let dims = |r, c| [Dim::Fixed(r), Dim::Fixed(c)];
    let mut b = ProgramBuilder::new("matmul_basic", Target::Trn1);
    let lhs_t = b
        .input("lhs_t", DType::Bf16, &dims(128, 128))
        .expect("valid");
    let rhs = b.input("rhs", DType::Bf16, &dims(128, 512)).expect("valid");
    let result = b
        .output("result", DType::Bf16, &dims(128, 512))
        .expect("valid");
    let lhs_tile = b
        .tile("lhs_tile", Memory::Sbuf, DType::Bf16, &[128, 128])
        .expect("valid");
    let rhs_tile = b
        .tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512])
        .expect("valid");
    let acc = b
        .tile("acc", Memory::Psum, DType::F32, &[128, 512])
        .expect("valid");
    let res = b
        .tile("_t1", Memory::Sbuf, DType::Bf16, &[128, 512])
        .expect("valid");
    b.load(lhs_tile, Grid::origin(lhs_t)).expect("valid");
    b.load(rhs_tile, Grid::origin(rhs)).expect("valid");
    b.nc_matmul(acc, lhs_tile, rhs_tile, Write::Overwrite)
        .expect("valid");
    b.tensor_copy(res, acc).expect("valid");
    b.store(Grid::origin(result), res).expect("valid");
    b.finish().expect("the seed program follows the rules")
}

/// The seed kernel called many times, each call timed: launch overhead, end to end, and a plain CPU
/// matmul for scale.
#[derive(Parser)]
struct Cli {
    /// Print one JSON object instead of the table
    #[arg(long)]
    json: bool,
    /// Timed calls per case
    #[arg(long, value_name = "N", default_value_t = 2000)]
    iters: usize,
    /// Also print where the host's time goes in the seed kernel's instructions, over --iters
    /// observed launches
    #[arg(long)]
    host_profile: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (json, iters) = (cli.json, cli.iters);
    let warmup = (iters / 10).max(100);

    let a = common::random_bf16(128, 128, 1);
    let b = common::random_bf16(128, 512, 2);
    let mut core = NeuronCore::default();
    let mut da = DeviceTensor::from_array(&a)?;
    let mut db = DeviceTensor::from_array(&b)?;
    let mut out = DeviceTensor::<bf16>::zeros(&[128, 512])?;

    // The run-time program is the compile-time one, instruction for instruction.
    let built = build_seed_program();
    if !same_instructions(&built.parts().program(), matmul_basic::KERNEL.program()) {
        return Err("the builder's seed program differs from the #[kernel] program".into());
    }

    let floor = measure(warmup, iters, || black_box(()));

    let kernel = &matmul_basic::KERNEL;
    let launch = measure(warmup, iters, || {
        let inputs = [da.arg(), db.arg()];
        let mut outputs = [out.arg_mut()];
        black_box(
            kernel
                .bind(black_box(&inputs), &mut outputs)
                .expect("valid launch"),
        );
    });

    let construct = measure(warmup, iters, || {
        let compiled = build_seed_program();
        let parts = compiled.parts();
        let kernel = Kernel::new(parts.program());
        let inputs: [HbmIn<'_>; 2] = [da.arg(), db.arg()];
        let mut outputs: [HbmOut<'_>; 1] = [out.arg_mut()];
        black_box(
            kernel
                .bind(black_box(&inputs), &mut outputs)
                .expect("valid launch"),
        );
    });

    let round_trip_before = core.host_round_trip();
    let end_to_end = measure(warmup, iters, || {
        matmul_basic::launch_into(&mut core, &da, &db, &mut out).expect("valid launch");
    });
    let round_trip_after = core.host_round_trip();
    let round_trip_ns = |t: Option<std::time::Duration>| t.map_or(-1.0, |t| t.as_nanos() as f64);

    let mut serial_core = NeuronCore::default().with_host_threads(1);
    let end_to_end_one_thread = measure(warmup, iters, || {
        matmul_basic::launch_into(&mut serial_core, &da, &db, &mut out).expect("valid launch");
    });

    let end_to_end_written = measure(warmup, iters, || {
        // Marks the inputs written (nothing changes): the packings kept from the last launch
        // are of an older version.
        da.as_mut_slice();
        db.as_mut_slice();
        matmul_basic::launch_into(&mut core, &da, &db, &mut out).expect("valid launch");
    });

    let end_to_end_ndarray = measure(warmup, iters, || {
        black_box(matmul_basic::host(&mut core, a.view(), b.view()).expect("valid launch"));
    });

    let a32 = a.mapv(f32::from);
    let b32 = b.mapv(f32::from);
    let reference = measure(warmup.min(200), iters.min(1000), || {
        let c: Array2<f32> = a32.t().dot(&b32);
        black_box(c.mapv(bf16::from_f32));
    });

    let (ns, us) = (
        |s: &Stats| (s.min, s.p50, s.p99),
        |s: &Stats| (s.min / 1e3, s.p50 / 1e3, s.p99 / 1e3),
    );
    if json {
        let obj = |name: &str, (min, p50, p99): (f64, f64, f64)| {
            format!("\"{name}\": {{\"min\": {min:.3}, \"p50\": {p50:.3}, \"p99\": {p99:.3}}}")
        };
        println!(
            "{{{}, {}, {}, {}, {}, {}, {}, {}, \"host_round_trip_ns\": [{:.0}, {:.0}]}}",
            obj("launch_ns", ns(&launch)),
            obj("construct_and_launch_ns", ns(&construct)),
            obj("end_to_end_us", us(&end_to_end)),
            obj("end_to_end_ndarray_us", us(&end_to_end_ndarray)),
            obj("reference_us", us(&reference)),
            obj("timer_floor_ns", ns(&floor)),
            obj("end_to_end_one_thread_us", us(&end_to_end_one_thread)),
            obj("end_to_end_inputs_written_us", us(&end_to_end_written)),
            round_trip_ns(round_trip_before),
            round_trip_ns(round_trip_after),
        );
        return Ok(());
    }
    println!(
        "seed kernel: 128x128x512 bf16 matmul, {iters} timed calls per case after {warmup} warm-up calls, host code path {:?}",
        core.isa()
    );
    let show = |t: Option<std::time::Duration>| match t {
        Some(t) if t.as_nanos() <= 150 => {
            format!("{} ns (near: single instructions split)", t.as_nanos())
        }
        Some(t) => format!(
            "{} ns (far: single instructions run on one thread)",
            t.as_nanos()
        ),
        None => "none (one host thread, or the other core is busy)".to_string(),
    };
    println!(
        "cache-line round trip to the second host thread, before and after case (c): {}; {}",
        show(round_trip_before),
        show(round_trip_after)
    );
    println!("{:<62} {:>12} {:>12} {:>12}", "case", "min", "P50", "P99");
    let row = |name: &str, (min, p50, p99): (f64, f64, f64), unit: &str| {
        println!("{name:<62} {min:>9.3} {unit} {p50:>9.3} {unit} {p99:>9.3} {unit}");
    };
    row(
        "timer floor: an empty closure between two Instant::now()",
        ns(&floor),
        "ns",
    );
    row(
        "(a) launch: checks + binding, compile-time program",
        ns(&launch),
        "ns",
    );
    row(
        "(b) program built at run time (builder) + the same launch",
        ns(&construct),
        "ns",
    );
    row(
        "(c) end to end, device-resident tensors",
        us(&end_to_end),
        "µs",
    );
    row(
        "(c) the same on one host thread (with_host_threads(1))",
        us(&end_to_end_one_thread),
        "µs",
    );
    row(
        "(c) the same, inputs marked written before each call",
        us(&end_to_end_written),
        "µs",
    );
    row(
        "(c') end to end, ndarray in and out",
        us(&end_to_end_ndarray),
        "µs",
    );
    row(
        "(d) ndarray f32 dot of the same inputs (+ bf16 output)",
        us(&reference),
        "µs",
    );
    println!(
        "b/a (P50): {:.0}x   c/d (P50): {:.2}",
        construct.p50 / launch.p50,
        end_to_end.p50 / reference.p50
    );
    if cli.host_profile {
        core.record_host_profile(true);
        for _ in 0..iters {
            matmul_basic::launch_into(&mut core, &da, &db, &mut out)?;
        }
        if let Some(p) = core.host_profile() {
            println!("seed kernel, {iters} observed launches: {p}");
        }
    }
    Ok(())
}
