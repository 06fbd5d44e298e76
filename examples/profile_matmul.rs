//! The matmul tutorial's four stages on the modeled NeuronCore's timing model: tiled, hoisted
//! loads, blocked free dimension, fully optimised, at the tutorial's benchmark shape
//! `[4096, 8192] × [8192, 8192]` bf16 on Trn1 — timing only (no arithmetic runs), so the
//! whole comparison takes about a second on any machine.
//!
//! ```sh
//! cargo run --release --example profile_matmul                   # table + profiles, files in target/profile_matmul
//! cargo run --release --example profile_matmul -- --json         # one JSON object keyed by stage
//! cargo run --release --example profile_matmul -- --out DIR      # traces and timelines into DIR
//! cargo run --release --example profile_matmul -- --no-files     # no trace or timeline
//! cargo run --release --example profile_matmul -- --shape 2048 2048 2048 --target trn2
//! cargo run --release --example profile_matmul -- --program-order      # the program as allocated and ordered
//! cargo run --release --example profile_matmul -- --rotation 2          # loop tiles rotate over at most 2 buffers
//! ```
//!
//! For each stage: the modeled latency through the benchmark API (P50 and P99 of `--iters`
//! timed runs after `--warmup` untimed ones; the model is deterministic, so they are equal),
//! the host time the model took, the per-engine utilisation and the MFU; then its profile.
//! Each stage's Chrome trace (`<kernel>.trace.json`: open it in https://ui.perfetto.dev or
//! chrome://tracing) and SVG timeline (`<kernel>.svg`) are written to the output directory.
//! `--shape K M N` changes the shape (`lhs_t [K, M]`, `rhs [K, N]`; each stage's launch
//! constraints apply: K ≤ 19456 for the hoisted loads, K ≤ 9728 for the blocked free
//! dimension, M a multiple of 2048 and at most 8192 for the fully optimised one). By default the model times the program NKI's compiler would
//! hand the device (`Scheduling::Device`: tiles renamed, loop tiles rotating over up to
//! `--rotation N` buffers, 4 by default); `--program-order` times this project's program as
//! allocated and ordered, and `--affine-buffers N` that program with N buffers per loop tile
//! (a what-if whose capacity is not checked).

#![allow(dead_code, clippy::duplicate_mod)]

#[path = "matmul_block_free_dimension.rs"]
mod block_free_dimension;
#[path = "matmul_fully_optimized.rs"]
mod fully_optimized;
#[path = "matmul_hoist_load.rs"]
mod hoist_load;
#[path = "matmul_tiled.rs"]
mod tiled;

use std::path::PathBuf;

use tiled::common;

use clap::Parser;
use nki::prelude::*;
use nki::timing::{Benchmark, Detail, Params, Profile, Scheduling, Timing};

/// The stages: JSON key, title, kernel.
fn stages() -> [(&'static str, &'static str, &'static Kernel<'static>); 4] {
    [
        ("tiled", "1. tiled", &tiled::matmul_tiled::KERNEL),
        (
            "hoist_load",
            "2. hoisted loads",
            &hoist_load::nki_matmul_hoist_load_::KERNEL,
        ),
        (
            "block_free_dimension",
            "3. blocked free dimension",
            &block_free_dimension::nki_matmul_block_free_dimension_::KERNEL,
        ),
        (
            "fully_optimized",
            "4. fully optimised",
            &fully_optimized::nki_matmul_fully_optimized_::KERNEL,
        ),
    ]
}

struct Options {
    json: bool,
    out: Option<PathBuf>,
    shape: [usize; 3],
    target: Target,
    warmup: usize,
    iters: usize,
    scheduling: Scheduling,
}

/// The matmul tutorial's four stages through the timing model: each one's modeled latency,
/// profile, Chrome trace and SVG timeline.
#[derive(Parser)]
struct Cli {
    /// Print one JSON object keyed by stage
    #[arg(long)]
    json: bool,
    /// Write the traces and timelines into DIR
    #[arg(
        long,
        value_name = "DIR",
        default_value = "target/profile_matmul",
        conflicts_with = "no_files"
    )]
    out: PathBuf,
    /// Write no trace or timeline
    #[arg(long)]
    no_files: bool,
    /// The shape: lhs_t [K, M], rhs [K, N]
    #[arg(
        long,
        value_names = ["K", "M", "N"],
        num_args = 3,
        action = clap::ArgAction::Set,
        default_values_t = [8192, 4096, 8192]
    )]
    shape: Vec<usize>,
    /// The modeled generation: trn1 (or inf2), trn2 or trn3
    #[arg(
        long,
        value_name = "TARGET",
        default_value = "trn1",
        value_parser = common::target
    )]
    target: Target,
    /// Untimed runs before the benchmark's timed ones
    #[arg(long, value_name = "N", default_value_t = 2)]
    warmup: usize,
    /// Timed runs of the benchmark
    #[arg(long, value_name = "N", default_value_t = 10)]
    iters: usize,
    /// Loop tiles rotate over at most N buffers (the compiler's program; default 4)
    #[arg(long, value_name = "N", group = "scheduling")]
    rotation: Option<u32>,
    /// Time the program as allocated and ordered
    #[arg(long, group = "scheduling")]
    program_order: bool,
    /// Time the program as allocated with N buffers per loop tile (capacity not checked)
    #[arg(long, value_name = "N", group = "scheduling")]
    affine_buffers: Option<u32>,
}

/// The options the command line asks for.
fn options(cli: Cli) -> Options {
    let scheduling = match (cli.rotation, cli.program_order, cli.affine_buffers) {
        (Some(rotation), _, _) => Scheduling::Device { rotation },
        (_, true, _) => Scheduling::ProgramOrder { buffers: 1 },
        (_, _, Some(buffers)) => Scheduling::ProgramOrder { buffers },
        _ => Scheduling::default(),
    };
    Options {
        json: cli.json,
        out: (!cli.no_files).then_some(cli.out),
        shape: common::shape(&cli.shape, [8192, 4096, 8192]),
        target: cli.target,
        warmup: cli.warmup,
        iters: cli.iters,
        scheduling,
    }
}

/// What one stage gave.
struct Row {
    key: &'static str,
    title: &'static str,
    p50: f64,
    p99: f64,
    host_ms: f64,
    profile: Profile,
    files: Option<(PathBuf, PathBuf)>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = options(Cli::parse());
    let [k, m, n] = o.shape;
    let mut core = NeuronCore::new(o.target);
    let lhs_t = [k, m];
    let rhs = [k, n];
    let shapes: [&[usize]; 2] = [&lhs_t, &rhs];
    let mut rows = Vec::new();
    for (key, title, kernel) in stages() {
        // The benchmark API: warm-up and timed runs, timing only, totals only.
        let timing = Timing::new()
            .params(Params::for_target(o.target))
            .scheduling(o.scheduling);
        let bench = Benchmark::new()
            .warmup(o.warmup)
            .iters(o.iters)
            .timing(timing.clone().detail(Detail::Summary))
            .run_shapes(&mut core, kernel, &shapes)?;
        let p50 = bench.nc_latency.get_latency_percentile(50).unwrap_or(0.0);
        let p99 = bench.nc_latency.get_latency_percentile(99).unwrap_or(0.0);
        let host_ms = bench.host_model.get_latency_percentile(50).unwrap_or(0.0) / 1e3;
        // One recorded run for the profile (critical path) and the files.
        let detail = if o.out.is_some() {
            Detail::Trace
        } else {
            Detail::Profile
        };
        let schedule = timing
            .detail(detail)
            .run_shapes(&mut core, kernel, &shapes)?;
        debug_assert_eq!(schedule.latency_us(), p50);
        let files = match &o.out {
            Some(dir) => Some(schedule.write_files(dir, kernel.name())?),
            None => None,
        };
        rows.push(Row {
            key,
            title,
            p50,
            p99,
            host_ms,
            profile: schedule.profile(),
            files,
        });
    }
    if o.json {
        let mut obj = serde_json::Map::new();
        for r in &rows {
            let p = &r.profile;
            let util: serde_json::Map<String, serde_json::Value> = p
                .engines
                .iter()
                .map(|e| (e.name.clone(), serde_json::json!(e.utilisation)))
                .collect();
            obj.insert(
                r.key.to_string(),
                serde_json::json!({
                    "kernel": p.kernel,
                    "latency_us": r.p50,
                    "p50_us": r.p50,
                    "p99_us": r.p99,
                    "mfu": p.mfu,
                    "hfu": p.hfu,
                    "utilisation": util,
                    "hbm_read_bytes": p.hbm_read_bytes,
                    "hbm_write_bytes": p.hbm_write_bytes,
                    "instructions": p.instructions,
                    "host_model_ms": r.host_ms,
                }),
            );
        }
        println!("{}", serde_json::to_string_pretty(&obj)?);
        return Ok(());
    }
    println!(
        "matmul tutorial, lhs_t [{k}, {m}] · rhs [{k}, {n}] bf16 on the {} model (timing only; \
         the model is deterministic, P50 = P99)",
        Params::for_target(o.target).generation
    );
    println!(
        "{:<27} {:>11} {:>11} {:>7} {:>7} {:>7} {:>7} {:>7} {:>9}",
        "stage", "P50 µs", "P99 µs", "MFU", "PE", "Vector", "Scalar", "DMA", "model ms"
    );
    for r in &rows {
        let u = |name: &str| {
            r.profile
                .engine(name)
                .map_or(0.0, |e| 100.0 * e.utilisation)
        };
        println!(
            "{:<27} {:>11.1} {:>11.1} {:>6.1}% {:>6.1}% {:>6.1}% {:>6.1}% {:>6.1}% {:>9.1}",
            r.title,
            r.p50,
            r.p99,
            100.0 * r.profile.mfu,
            u("TensorMatrix"),
            u("Vector"),
            u("Scalar"),
            u("DMA"),
            r.host_ms
        );
    }
    for r in &rows {
        println!("\n{}: {}", r.title, r.profile);
        if let Some((trace, svg)) = &r.files {
            println!("  trace {}  timeline {}", trace.display(), svg.display());
        }
    }
    Ok(())
}
