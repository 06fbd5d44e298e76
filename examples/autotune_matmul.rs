//! Autotuning without hardware: the fully optimised matmul of NKI's tutorial instantiated for
//! a grid of block sizes (its meta-parameters `TILES_IN_BLOCK_M/N/K`), every candidate timed
//! by the NeuronCore timing model at a given shape without executing any arithmetic, ranked by
//! modeled latency.
//!
//! ```sh
//! cargo run --release --example autotune_matmul                    # [4096, 8192] × [8192, 8192] bf16, Trn1
//! cargo run --release --example autotune_matmul -- 4096 2048 4096  # K M N
//! cargo run --release --example autotune_matmul -- --target trn2 --json
//! cargo run --release --example autotune_matmul -- --program-order  # the programs as allocated and ordered
//! ```
//!
//! The candidates are the tutorial's own instantiations (`examples/matmul_fully_optimized.rs`,
//! compiled in here: `nki_matmul_fully_optimized_` with 16, 2, 8 and the small 4, 1, 4) and
//! `matmul_blocked`, the same kernel body instantiated for every block size of the grid
//! M ∈ {2, 4, 8, 16} × N ∈ {1, 2} × K ∈ {2, 4, 8, 16, 32} tiles whose tiles fit in SBUF (33
//! of the 40). `matmul_blocked` sizes its SBUF accumulator for M = 4096, as NKI's kernel
//! sizes it at the tutorial's shape (so M ≤ 4096 here). A candidate whose launch constraints the shape
//! breaks (K not a multiple of its K block, …) is listed as not launchable.
//!
//! The candidates are timed on every host thread at once (a modeled core each), then ranked;
//! for the winner the example names the engine the model finds it bound by (the busiest row
//! over the kernel's time) and how far that engine is from being busy all the time.

#![allow(dead_code, clippy::duplicate_mod)]

#[path = "matmul_fully_optimized.rs"]
mod fully_optimized;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::Parser;
use nki::Instance;
use nki::prelude::*;
use nki::timing::{Detail, Params, Profile, Scheduling, Timing, TimingError};

/// The fully optimised matmul's body (`examples/matmul_fully_optimized.rs`), with the SBUF
/// accumulator holding `4096 / BLOCK_M` blocks of M (any M up to 4096).
#[kernel(
    mm_m2_n1_k2(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 2),
    mm_m2_n1_k4(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 4),
    mm_m2_n1_k8(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 8),
    mm_m2_n1_k16(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 16),
    mm_m2_n1_k32(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 32),
    mm_m2_n2_k2(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 2),
    mm_m2_n2_k4(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 4),
    mm_m2_n2_k8(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 8),
    mm_m2_n2_k16(TILES_IN_BLOCK_M = 2, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 16),
    mm_m4_n1_k2(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 2),
    mm_m4_n1_k4(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 4),
    mm_m4_n1_k8(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 8),
    mm_m4_n1_k16(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 16),
    mm_m4_n1_k32(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 32),
    mm_m4_n2_k2(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 2),
    mm_m4_n2_k4(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 4),
    mm_m4_n2_k8(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 8),
    mm_m4_n2_k16(TILES_IN_BLOCK_M = 4, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 16),
    mm_m8_n1_k2(TILES_IN_BLOCK_M = 8, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 2),
    mm_m8_n1_k4(TILES_IN_BLOCK_M = 8, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 4),
    mm_m8_n1_k8(TILES_IN_BLOCK_M = 8, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 8),
    mm_m8_n1_k16(TILES_IN_BLOCK_M = 8, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 16),
    mm_m8_n1_k32(TILES_IN_BLOCK_M = 8, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 32),
    mm_m8_n2_k2(TILES_IN_BLOCK_M = 8, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 2),
    mm_m8_n2_k4(TILES_IN_BLOCK_M = 8, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 4),
    mm_m8_n2_k8(TILES_IN_BLOCK_M = 8, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 8),
    mm_m16_n1_k2(TILES_IN_BLOCK_M = 16, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 2),
    mm_m16_n1_k4(TILES_IN_BLOCK_M = 16, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 4),
    mm_m16_n1_k8(TILES_IN_BLOCK_M = 16, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 8),
    mm_m16_n1_k16(TILES_IN_BLOCK_M = 16, TILES_IN_BLOCK_N = 1, TILES_IN_BLOCK_K = 16),
    mm_m16_n2_k2(TILES_IN_BLOCK_M = 16, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 2),
    mm_m16_n2_k4(TILES_IN_BLOCK_M = 16, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 4),
    mm_m16_n2_k8(TILES_IN_BLOCK_M = 16, TILES_IN_BLOCK_N = 2, TILES_IN_BLOCK_K = 8)
)]
pub fn matmul_blocked<
    const TILES_IN_BLOCK_M: usize,
    const TILES_IN_BLOCK_N: usize,
    const TILES_IN_BLOCK_K: usize,
>(
    lhs_t: Hbm<bf16, K, M>,
    rhs: Hbm<bf16, K, N>,
) -> Hbm<bf16, M, N> {
    const TILE_M: usize = 128; // nl.tile_size.gemm_stationary_fmax
    const TILE_K: usize = 128; // nl.tile_size.pmax
    const TILE_N: usize = 512; // nl.tile_size.gemm_moving_fmax

    const BLOCK_M: usize = TILE_M * TILES_IN_BLOCK_M;
    const BLOCK_N: usize = TILE_N * TILES_IN_BLOCK_N;
    const BLOCK_K: usize = TILE_K * TILES_IN_BLOCK_K;

    // Capacity of `result_tiles` in blocks of M.
    // NKI sizes `result_tiles` by the traced M (M // BLOCK_M blocks); here, exactly for the
    // tutorial's M = 4096.
    const MAX_BLOCKS_M: usize = 4096 / BLOCK_M;

    let result = ndarray([M, N], bf16, SharedHbm);

    for n in affine_range(N / BLOCK_N) {
        let result_tiles = zeros(
            [
                TILE_M,
                MAX_BLOCKS_M,
                TILES_IN_BLOCK_M,
                TILES_IN_BLOCK_N,
                TILE_N,
            ],
            lhs_t.dtype,
            Sbuf,
        );

        for k in sequential_range(K / BLOCK_K) {
            let i_rhs = mgrid![0..TILE_K, 0..BLOCK_N];
            let rhs_tiles = ndarray([TILE_K, TILES_IN_BLOCK_K, BLOCK_N], rhs.dtype, Sbuf);
            for bk_r in affine_range(TILES_IN_BLOCK_K) {
                rhs_tiles[[i_rhs.p, bk_r, i_rhs.x]] = load(
                    rhs[[
                        (TILES_IN_BLOCK_K * k + bk_r) * TILE_K + i_rhs.p,
                        BLOCK_N * n + i_rhs.x,
                    ]],
                );
            }

            for m in affine_range(M / BLOCK_M) {
                let i_lhs_t = mgrid![0..TILE_K, 0..BLOCK_M];
                let lhs_t_tiles = ndarray([TILE_K, TILES_IN_BLOCK_K, BLOCK_M], lhs_t.dtype, Sbuf);
                for bk_l in affine_range(TILES_IN_BLOCK_K) {
                    lhs_t_tiles[[i_lhs_t.p, bk_l, i_lhs_t.x]] = load(
                        lhs_t[[
                            (TILES_IN_BLOCK_K * k + bk_l) * TILE_K + i_lhs_t.p,
                            BLOCK_M * m + i_lhs_t.x,
                        ]],
                    );
                }

                let i_lhs_t_mm = mgrid![0..TILE_K, 0..TILE_M];
                let i_rhs_mm = mgrid![0..TILE_K, 0..TILE_N];
                let i_res_mm = mgrid![0..TILE_M, 0..TILE_N];
                for bn in affine_range(TILES_IN_BLOCK_N) {
                    for bm in affine_range(TILES_IN_BLOCK_M) {
                        let res_tile = zeros([TILE_M, TILE_N], f32, Psum);
                        for bk in affine_range(TILES_IN_BLOCK_K) {
                            res_tile[..] += nc_matmul(
                                lhs_t_tiles[[i_lhs_t_mm.p, bk, bm * TILE_M + i_lhs_t_mm.x]],
                                rhs_tiles[[i_rhs_mm.p, bk, bn * TILE_N + i_rhs_mm.x]],
                            );
                        }
                        result_tiles[[i_res_mm.p, m, bm, bn, i_res_mm.x]] +=
                            res_tile[[i_res_mm.p, i_res_mm.x]];
                    }
                }
            }
        }

        for m in affine_range(M / BLOCK_M) {
            for bm in affine_range(TILES_IN_BLOCK_M) {
                let i_res = mgrid![0..TILE_K, 0..TILE_N];
                let i_res_packed = mgrid![0..TILE_K, 0..BLOCK_N];
                let result_packed = ndarray([TILE_K, BLOCK_N], result_tiles.dtype, Sbuf);
                for bn in affine_range(TILES_IN_BLOCK_N) {
                    result_packed[[i_res.p, bn * TILE_N + i_res.x]] =
                        copy(result_tiles[[i_res.p, m, bm, bn, i_res.x]]);
                }
                store(
                    result[[
                        (TILES_IN_BLOCK_M * m + bm) * TILE_K + i_res_packed.p,
                        BLOCK_N * n + i_res_packed.x,
                    ]],
                    result_packed[[i_res_packed.p, i_res_packed.x]],
                );
            }
        }
    }
    result
}

/// Every candidate: the tutorial's instantiations, then the grid's.
pub fn candidates() -> Vec<&'static Instance> {
    fully_optimized::nki_matmul_fully_optimized::INSTANCES
        .iter()
        .chain(matmul_blocked::INSTANCES.iter())
        .collect()
}

/// One candidate's result.
pub struct Outcome {
    /// The instantiation.
    pub instance: &'static Instance,
    /// Its profile, or why it cannot launch at the shape.
    pub result: Result<Profile, TimingError>,
    /// Host time of the timing run (ms).
    pub host_ms: f64,
}

/// Times every candidate at `lhs_t [k, m]`, `rhs [k, n]` (timing only, totals only) on every
/// host thread (a core of its own each, each taking the next candidate when it is free) and returns them fastest
/// first (ties in the candidates' order), the ones that cannot launch last.
/// `scheduling`: which program to time (`Scheduling::Device`: what NKI's compiler would run).
pub fn rank(target: Target, scheduling: Scheduling, k: usize, m: usize, n: usize) -> Vec<Outcome> {
    let timing = Timing::new()
        .params(Params::for_target(target))
        .scheduling(scheduling)
        .detail(Detail::Summary);
    let list = candidates();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, list.len().max(1));
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, Outcome)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (list, timing, next) = (&list, &timing, &next);
                scope.spawn(move || {
                    let mut core = NeuronCore::new(target);
                    // Each thread takes the next candidate not yet taken: a slow candidate
                    // does not hold back the ones dealt after it.
                    std::iter::from_fn(|| {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        list.get(i).map(|&instance| (i, instance))
                    })
                    .map(|(i, instance)| {
                        let start = Instant::now();
                        let result = timing
                            .run_shapes(&mut core, instance.kernel, &[&[k, m], &[k, n]])
                            .map(|s| s.profile());
                        let host_ms = start.elapsed().as_secs_f64() * 1e3;
                        (
                            i,
                            Outcome {
                                instance,
                                result,
                                host_ms,
                            },
                        )
                    })
                    .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a timing thread panicked"))
            .collect()
    });
    out.sort_by(|(i, a), (j, b)| {
        let by_latency = match (&a.result, &b.result) {
            (Ok(x), Ok(y)) => x.latency_us.total_cmp(&y.latency_us),
            (Ok(_), Err(_)) => std::cmp::Ordering::Less,
            (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
            (Err(_), Err(_)) => std::cmp::Ordering::Equal,
        };
        by_latency.then(i.cmp(j))
    });
    out.into_iter().map(|(_, o)| o).collect()
}

/// The engine a profile is bound by: the row busiest over the kernel's time (`TensorMatrix`
/// is the PE array, `DMA` the DMA engines' average), with its busy share.
pub fn bottleneck(p: &Profile) -> Option<(&str, f64)> {
    p.engines
        .iter()
        .filter(|e| e.name != "Sync")
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))
        .map(|e| (e.name.as_str(), e.utilisation))
}

fn value(i: &Instance, name: &str) -> String {
    i.value(name)
        .map_or_else(|| "?".to_string(), |v| v.to_string())
}

/// Ranks block sizes of the fully optimised matmul by modeled latency, without executing any
/// arithmetic.
#[derive(Parser)]
struct Cli {
    /// The shape: lhs_t [K, M], rhs [K, N] (default 8192 4096 8192)
    #[arg(value_names = ["K", "M", "N"], num_args = 3, action = clap::ArgAction::Set)]
    shape: Vec<usize>,
    /// The modeled generation: trn1 (or inf2), trn2 or trn3
    #[arg(
        long,
        value_name = "TARGET",
        default_value = "trn1",
        value_parser = fully_optimized::common::target
    )]
    target: Target,
    /// Time the programs as allocated and ordered (Scheduling::ProgramOrder)
    #[arg(long)]
    program_order: bool,
    /// Print JSON instead of the table
    #[arg(long)]
    json: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let [k, m, n] = fully_optimized::common::shape(&cli.shape, [8192, 4096, 8192]);
    let (target, json) = (cli.target, cli.json);
    let scheduling = if cli.program_order {
        Scheduling::ProgramOrder { buffers: 1 }
    } else {
        Scheduling::default()
    };
    let start = Instant::now();
    let ranked = rank(target, scheduling, k, m, n);
    let elapsed = start.elapsed();
    let timed = ranked.iter().filter(|o| o.result.is_ok()).count();
    if json {
        let rows: Vec<serde_json::Value> = ranked
            .iter()
            .map(|o| {
                let i = o.instance;
                match &o.result {
                    Ok(p) => serde_json::json!({
                        "kernel": i.name,
                        "tiles_in_block_m": value(i, "TILES_IN_BLOCK_M"),
                        "tiles_in_block_n": value(i, "TILES_IN_BLOCK_N"),
                        "tiles_in_block_k": value(i, "TILES_IN_BLOCK_K"),
                        "latency_us": p.latency_us,
                        "mfu": p.mfu,
                        "peak_sbuf_bytes_per_partition": p.peak_sbuf_bytes,
                    }),
                    Err(e) => serde_json::json!({ "kernel": i.name, "error": e.to_string() }),
                }
            })
            .collect();
        let best = ranked
            .first()
            .and_then(|o| o.result.as_ref().ok().map(|p| (o, p)));
        let winner = best.map(|(o, _)| o.instance.name);
        let bound = best.and_then(|(_, p)| bottleneck(p)).map(|(engine, busy)| {
            serde_json::json!({"engine": engine, "busy": busy, "from_peak": 1.0 - busy})
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "shape": {"K": k, "M": m, "N": n},
                "target": target.name(),
                "winner": winner,
                "bottleneck": bound,
                "candidates": rows,
            }))?
        );
        return Ok(());
    }
    println!(
        "autotuning the fully optimised matmul, lhs_t [{k}, {m}] · rhs [{k}, {n}] bf16 on the {} \
         model: {} candidates, {timed} launchable, timed in {:.2?} without running any arithmetic",
        Params::for_target(target).generation,
        ranked.len(),
        elapsed
    );
    println!(
        "{:>4}  {:<32} {:>3} {:>3} {:>3} {:>11} {:>6} {:>6} {:>6} {:>6} {:>9} {:>8}",
        "rank",
        "kernel",
        "M",
        "N",
        "K",
        "latency µs",
        "MFU",
        "PE",
        "Vector",
        "DMA",
        "SBUF KiB",
        "model ms"
    );
    for (r, o) in ranked.iter().enumerate() {
        let i = o.instance;
        let (tm, tn, tk) = (
            value(i, "TILES_IN_BLOCK_M"),
            value(i, "TILES_IN_BLOCK_N"),
            value(i, "TILES_IN_BLOCK_K"),
        );
        match &o.result {
            Ok(p) => {
                let u = |name: &str| p.engine(name).map_or(0.0, |e| 100.0 * e.utilisation);
                println!(
                    "{:>4}  {:<32} {tm:>3} {tn:>3} {tk:>3} {:>11.1} {:>5.1}% {:>5.1}% {:>5.1}% {:>5.1}% {:>9.1} {:>8.1}",
                    r + 1,
                    i.name,
                    p.latency_us,
                    100.0 * p.mfu,
                    u("TensorMatrix"),
                    u("Vector"),
                    u("DMA"),
                    p.peak_sbuf_bytes as f64 / 1024.0,
                    o.host_ms
                );
            }
            Err(e) => println!(
                "   -  {:<32} {tm:>3} {tn:>3} {tk:>3}  not launchable: {e}",
                i.name
            ),
        }
    }
    match ranked.first() {
        Some(Outcome {
            instance,
            result: Ok(p),
            ..
        }) => {
            println!(
                "winner: {instance} — {:.1} µs modeled, MFU {:.1} %",
                p.latency_us,
                100.0 * p.mfu
            );
            if let Some((engine, busy)) = bottleneck(p) {
                println!(
                    "bound by {engine}: busy {:.1} % of the kernel's time, {:.1} % from that \
                     engine's peak",
                    100.0 * busy,
                    100.0 * (1.0 - busy)
                );
            }
        }
        _ => println!("no candidate can launch at this shape"),
    }
    Ok(())
}
