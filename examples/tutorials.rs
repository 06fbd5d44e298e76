//! NKI's tutorial kernels at the shapes `peers/bench_ops.py` times torch and numpy
//! on, end to end with device-resident inputs (each launch writes into caller-provided
//! outputs).
//!
//! ```sh
//! cargo run --release --example tutorials                      # a table: min, P50, P99 in µs
//! cargo run --release --example tutorials -- --json            # {case: {min, p50, p99, ...}}
//! cargo run --release --example tutorials -- --cases add,exp   # some cases
//! cargo run --release --example tutorials -- --compare peers.json   # beside bench_ops.py's
//! cargo run --release --example tutorials -- --host-profile   # + where each case's host time goes
//! cargo run --release --example tutorials -- --strict         # run each case once, strictly
//! cargo run --release --example tutorials -- --schedule-check # each case once, in other orders
//! ```
//!
//! Each case calls its kernel twice, then times every call with `Instant::now()` until three
//! seconds have passed (at least 5 calls, at most 2000), as `bench_ops.py` does. The kernels
//! are the examples' own (each example file is compiled in here), so what is timed is what the
//! examples and tests check against their references. Each case also names the host round trip
//! between the core's two threads before and after it (`host_round_trip_ns` in the JSON; -1
//! with one thread): the hypervisor's placement of the two vCPUs, near (tens of ns) or far
//! (hundreds), moves the two-thread figures more than most changes do.

#![allow(dead_code, clippy::duplicate_mod)]

#[path = "average_pool2d.rs"]
mod average_pool2d;
#[path = "exp.rs"]
mod exp;
#[path = "fused_attention.rs"]
mod fused_attention;
#[path = "layernorm.rs"]
mod layernorm;
#[path = "mamba.rs"]
mod mamba;
#[path = "matmul_fully_optimized.rs"]
mod matmul_fully_optimized;
#[path = "nkilib_attention_tkg.rs"]
mod nkilib_attention_tkg;
#[path = "nkilib_cumsum.rs"]
mod nkilib_cumsum;
#[path = "nkilib_rmsnorm_quant.rs"]
mod nkilib_rmsnorm_quant;
#[path = "nkilib_rope.rs"]
mod nkilib_rope;
#[path = "nkilib_router_topk.rs"]
mod nkilib_router_topk;
#[path = "nkilib_topk.rs"]
mod nkilib_topk;
#[path = "rmsnorm.rs"]
mod rmsnorm;
#[path = "softmax.rs"]
mod softmax;
#[path = "tensor_add.rs"]
mod tensor_add;
#[path = "transpose2d.rs"]
mod transpose2d;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Parser;
use nki::ndarray::{Dimension, Ix1, Ix2, Ix3, Ix4};
use nki::prelude::*;
use tensor_add::common;

/// A case: its name (`bench_ops.py`'s) and one launch.
type Launch = Box<dyn FnMut(&mut NeuronCore) -> Result<(), LaunchError>>;

/// `[shape]` f32 values uniform in `[lo, hi)` on the device.
fn f32s<D: Dimension>(shape: D, seed: u64, lo: f64, hi: f64) -> DeviceTensor<f32> {
    DeviceTensor::from_array(&common::random_f32(shape, seed, lo, hi)).expect("a valid shape")
}

fn bf16s<D: Dimension>(shape: D, seed: u64) -> DeviceTensor<bf16> {
    let a = common::uniform(shape, seed, -2.0, 2.0).mapv(bf16::from_f64);
    DeviceTensor::from_array(&a).expect("a valid shape")
}

fn zeros<T: nki::Element>(shape: &[usize]) -> DeviceTensor<T> {
    DeviceTensor::zeros(shape).expect("a valid shape")
}

/// The cases, in `bench_ops.py`'s order, built lazily (the matmul's inputs take 200 MB).
fn case(name: &str) -> Option<Launch> {
    Some(match name {
        "add" => {
            let (a, b) = (bf16s(Ix2(4096, 4096), 1), bf16s(Ix2(4096, 4096), 2));
            let mut c = zeros::<bf16>(&[4096, 4096]);
            let grid = tensor_add::tensor_add_bf16::grid(tensor_add::grid_for(4096, 4096));
            Box::new(move |core| grid.launch_into(core, &a, &b, &mut c))
        }
        "exp" => {
            let a = bf16s(Ix2(4096, 4096), 3);
            let mut out = zeros::<bf16>(&[4096, 4096]);
            Box::new(move |core| exp::exp_bf16_4096::launch_into(core, &a, &mut out))
        }
        "softmax" => {
            let a = f32s(Ix2(4096, 4096), 4, -4.0, 4.0);
            let mut out = zeros::<f32>(&[4096, 4096]);
            Box::new(move |core| softmax::nki_softmax_kernel_4096::launch_into(core, &a, &mut out))
        }
        "rmsnorm" => {
            let (a, g) = (
                f32s(Ix2(4096, 4096), 5, -1.0, 1.0),
                f32s(Ix1(4096), 6, 0.0, 1.0),
            );
            let mut out = zeros::<f32>(&[4096, 4096]);
            Box::new(move |core| {
                rmsnorm::nki_rmsnorm_kernel_4096::launch_into(core, &a, &g, &mut out)
            })
        }
        "layernorm" => {
            let x = f32s(Ix2(4096, 8192), 7, -1.0, 1.0);
            let (g, b) = (f32s(Ix1(8192), 8, 0.0, 1.0), f32s(Ix1(8192), 9, 0.0, 1.0));
            let mut out = zeros::<f32>(&[4096, 8192]);
            Box::new(move |core| {
                layernorm::nki_layernorm_kernel_v1_8192::launch_into(core, &x, &g, &b, &mut out)
            })
        }
        "avgpool" => {
            let x = f32s(Ix3(128, 512, 512), 10, -1.0, 1.0);
            let mut out = zeros::<f32>(&[128, 256, 256]);
            Box::new(move |core| {
                average_pool2d::tensor_avgpool_kernel_512::launch_into(core, &x, &mut out)
            })
        }
        "transpose" => {
            let a = f32s(Ix2(4096, 64 * 64), 11, -1.0, 1.0);
            let mut out = zeros::<f32>(&[4096, 64 * 64]);
            Box::new(move |core| {
                transpose2d::tensor_transpose2d_kernel_64x64::launch_into(core, &a, &mut out)
            })
        }
        "attention" | "attention_causal" => {
            let q = f32s(Ix2(4096, 64), 12, 0.0, 1.0);
            let k = f32s(Ix2(4096, 64), 13, 0.0, 1.0);
            let v = f32s(Ix2(4096, 64), 14, -1.0, 1.0);
            let mut out = zeros::<f32>(&[4096, 64]);
            let causal = name == "attention_causal";
            Box::new(move |core| {
                use fused_attention::*;
                match causal {
                    false => fused_self_attn_for_sd_small_head_size_d64::launch_into(
                        core, &q, &k, &v, &mut out,
                    ),
                    true => fused_self_attn_for_sd_small_head_size_d64_causal::launch_into(
                        core, &q, &k, &v, &mut out,
                    ),
                }
            })
        }
        "matmul_big" => {
            // [4096, 8192] × [8192, 8192]: lhsT [K = 8192, M = 4096], rhs [K, N = 8192].
            let (a, b) = (bf16s(Ix2(8192, 4096), 15), bf16s(Ix2(8192, 8192), 16));
            let mut out = zeros::<bf16>(&[4096, 8192]);
            Box::new(move |core| {
                matmul_fully_optimized::nki_matmul_fully_optimized_::launch_into(
                    core, &a, &b, &mut out,
                )
            })
        }
        "mamba" => {
            let (batch, channels, seq, state) = (1, 256, 512, 16);
            let delta = f32s(Ix3(batch, channels, seq), 17, 0.0, 0.1);
            let u = f32s(Ix3(batch, channels, seq), 18, -1.0, 1.0);
            let a = f32s(Ix2(channels, state), 19, -2.0, -0.1);
            let b = f32s(Ix3(batch, state, seq), 20, -1.0, 1.0);
            let c = f32s(Ix3(batch, state, seq), 21, -1.0, 1.0);
            let mut out = zeros::<f32>(&[batch, channels, seq]);
            Box::new(move |core| {
                mamba::mamba_v2::launch_into(core, &delta, &u, &a, &b, &c, &mut out)
            })
        }
        "cumsum" => {
            // The NKI Library's cumsum at the largest shape of its test sweep.
            let x = f32s(Ix2(2048, 8192), 22, -1.0, 1.0);
            let mut out = zeros::<f32>(&[2048, 8192]);
            Box::new(move |core| {
                nkilib_cumsum::cumsum_f32_2048x8192::launch_into(core, &x, &mut out)
            })
        }
        "rope" => {
            // The NKI Library's RoPE at its test's [128, 32, 4, 64] ([d_head, B, n_heads, S]),
            // contiguous halves, one program, in f32 as the peers compute it.
            let x = f32s(Ix4(128, 32, 4, 64), 23, -2.0, 2.0);
            let angle = common::uniform(Ix3(64, 32, 64), 24, 0.0, std::f64::consts::TAU);
            let on_device = |a: nki::ndarray::Array3<f64>| {
                DeviceTensor::from_array(&a.mapv(|v| v as f32)).expect("a valid shape")
            };
            let cos = on_device(angle.mapv(f64::cos));
            let sin = on_device(angle.mapv(f64::sin));
            let mut out = zeros::<f32>(&[128, 32, 4, 64]);
            Box::new(move |core| {
                nkilib_rope::rope_f32_128x32x4x64::launch_into(core, &x, &cos, &sin, &mut out)
            })
        }
        "rmsnorm_quant" => {
            // The NKI Library's rmsnorm_quant at [1, 2048, 8192] bf16 of its test sweep: RMS
            // norm, then row quantisation to float8_e4m3 with the scale in 4 trailing bytes.
            let x = DeviceTensor::from_array(
                &common::uniform(Ix3(1, 2048, 8192), 25, -3.0, 3.0).mapv(bf16::from_f64),
            )
            .expect("a valid shape");
            let g = DeviceTensor::from_array(
                &common::uniform(Ix1(8192), 26, 0.5, 1.5).mapv(bf16::from_f64),
            )
            .expect("a valid shape");
            let mut out = zeros::<nki::F8E4M3>(&[1, 2048, 8192 + 4]);
            Box::new(move |core| {
                nkilib_rmsnorm_quant::rmsnorm_quant_row_bf16_1x2048x8192::launch_into(
                    core, &x, &g, &mut out,
                )
            })
        }
        "router_topk" => {
            // The NKI Library's MoE router: x [H, T] = [2048, 512], w [2048, 128] bf16, k = 8,
            // softmax over the experts, the top 8 normalised and scattered.
            let x = DeviceTensor::from_array(
                &common::uniform(Ix2(2048, 512), 27, -1.0, 1.0).mapv(bf16::from_f64),
            )
            .expect("a valid shape");
            let w = DeviceTensor::from_array(
                &common::uniform(Ix2(2048, 128), 28, -0.1, 0.1).mapv(bf16::from_f64),
            )
            .expect("a valid shape");
            let mut logits = zeros::<f32>(&[512, 128]);
            let mut index = zeros::<u32>(&[512, 8]);
            let mut affinities = zeros::<f32>(&[512, 128]);
            Box::new(move |core| {
                nkilib_router_topk::router_topk_bf16_512x2048x128_k8_norm::launch_into(
                    core,
                    &x,
                    &w,
                    &mut logits,
                    &mut index,
                    &mut affinities,
                )
            })
        }
        "topk" => {
            // The NKI Library's scanning top-k: [80, 8192] f32, k = 64.
            let x = f32s(Ix2(80, 8192), 29, -1.0, 1.0);
            let mut vals = zeros::<f32>(&[80, 64]);
            let mut idx = zeros::<u32>(&[80, 64]);
            Box::new(move |core| {
                nkilib_topk::topk_f32_80x8192_k64::launch_into(core, &x, &mut vals, &mut idx)
            })
        }
        "attention_tkg" => {
            // The NKI Library's decode attention at its test's shape: bs 4, q_head 1,
            // s_active 5, s_prior 10240, d_head 128, bf16 inputs in [0, 1), its cache mask.
            let (b, h, sa, s, d) = (4, 1, 5, 10240, 128);
            let u = |shape: &[usize], seed| {
                DeviceTensor::from_array(
                    &common::uniform(nki::ndarray::IxDyn(shape), seed, 0.0, 1.0)
                        .mapv(bf16::from_f64),
                )
                .expect("a valid shape")
            };
            let q = u(&[d, b * h * sa], 30);
            let k_active = u(&[d, b * sa], 31);
            let v_active = u(&[b, 1, sa, d], 32);
            let k_prior = u(&[b, 1, d, s], 33);
            let v_prior = u(&[b, 1, s, d], 34);
            let mask = DeviceTensor::from_array(&nkilib_attention_tkg::library_mask(b, h, sa, s))
                .expect("a valid shape");
            let mut out = zeros::<bf16>(&[b, h, d, sa]);
            Box::new(move |core| {
                nkilib_attention_tkg::attention_tkg_bf16_b4_h1_sa5_s10240_d128::launch_into(
                    core, &q, &k_active, &v_active, &k_prior, &v_prior, &mask, &mut out,
                )
            })
        }
        _ => return None,
    })
}

/// The cases of `bench_ops.py`, in its order.
const CASES: [&str; 17] = [
    "add",
    "exp",
    "softmax",
    "rmsnorm",
    "layernorm",
    "avgpool",
    "transpose",
    "attention",
    "attention_causal",
    "matmul_big",
    "mamba",
    "cumsum",
    "rope",
    "rmsnorm_quant",
    "router_topk",
    "topk",
    "attention_tkg",
];

/// min, P50, P99 in µs (linear interpolation between samples, as `bench_ops.py`), and the
/// host round trip before and after (ns).
#[derive(Copy, Clone, Debug)]
struct Stats {
    min: f64,
    p50: f64,
    p99: f64,
    n: usize,
    round_trip: [i64; 2],
}

/// The round trip of a cache line between the core's two host threads, in ns (`-1`: one
/// thread, or the worker did not answer): about 40–60 ns when the hypervisor placed them
/// near, 300–450 ns far on the project's Zen 5 guests (`NeuronCore::host_round_trip`).
fn round_trip_ns(core: &mut NeuronCore) -> i64 {
    core.host_round_trip()
        .map_or(-1, |t| i64::try_from(t.as_nanos()).unwrap_or(i64::MAX))
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = (sorted.len() - 1) as f64 * q / 100.0;
    let lo = pos as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn time(launch: &mut Launch, core: &mut NeuronCore) -> Result<Stats, LaunchError> {
    launch(core)?;
    launch(core)?;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut samples = Vec::new();
    for i in 0..2000 {
        let t = Instant::now();
        launch(core)?;
        let end = Instant::now();
        samples.push((end - t).as_secs_f64() * 1e6);
        if i + 1 >= 5 && end > deadline {
            break;
        }
    }
    samples.sort_by(f64::total_cmp);
    Ok(Stats {
        min: samples[0],
        p50: percentile(&samples, 50.0),
        p99: percentile(&samples, 99.0),
        n: samples.len(),
        round_trip: [-1; 2],
    })
}

/// `bench_ops.py`'s JSON rows: `{rows: [{group, case, min_us, p50_us, p99_us}]}`, the P50s by
/// (group, case).
fn peers(path: &str) -> Result<BTreeMap<(String, String), f64>, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    let rows = json["rows"].as_array().ok_or("no `rows` array")?;
    let mut out = BTreeMap::new();
    for r in rows {
        if let (Some(g), Some(c), Some(p)) = (
            r["group"].as_str(),
            r["case"].as_str(),
            r["p50_us"].as_f64(),
        ) {
            out.insert((g.to_string(), c.to_string()), p);
        }
    }
    Ok(out)
}

/// Each case once on a core that checks schedule independence, timed against one plain launch
/// on a one-thread core (after one untimed launch of each).
fn check_schedules(cases: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let mut plain = NeuronCore::default()
        .with_strict(false)
        .with_host_threads(1);
    let mut checked = NeuronCore::default()
        .with_strict(false)
        .with_host_threads(1)
        .with_schedule_check(Some(nki::strict::ScheduleCheck::DEFAULT));
    let mut failed = 0;
    for name in cases {
        let mut launch = case(name).ok_or_else(|| format!("unknown case `{name}`"))?;
        launch(&mut plain)?;
        let t = Instant::now();
        launch(&mut plain)?;
        let plain_time = t.elapsed();
        let t = Instant::now();
        let result = launch(&mut checked);
        let checked_time = t.elapsed();
        match result {
            Ok(()) => println!(
                "{name}: schedule check ok in {:.3} s (a plain launch on one thread: {:.3} s)",
                checked_time.as_secs_f64(),
                plain_time.as_secs_f64()
            ),
            Err(e) => {
                failed += 1;
                println!("{name}: {e}");
            }
        }
    }
    match failed {
        0 => Ok(()),
        n => Err(format!("{n} case(s) failed the schedule check").into()),
    }
}

/// NKI's tutorial kernels at bench_ops.py's shapes, end to end with device-resident inputs: min,
/// P50, P99 per case.
#[derive(Parser)]
struct Cli {
    /// Print {case: {min, p50, p99}} (µs) as JSON instead of the table
    #[arg(long)]
    json: bool,
    /// The cases to run, comma-separated (default: all)
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = CASES)]
    cases: Option<Vec<String>>,
    /// bench_ops.py's JSON output: its torch and numpy P50s beside ours
    #[arg(long, value_name = "FILE")]
    compare: Option<String>,
    /// Also print where each case's host time goes (one more launch, observed)
    #[arg(long)]
    host_profile: bool,
    /// Run each case once on a strict core instead of timing it
    #[arg(long)]
    strict: bool,
    /// Bytes of the host's cache per block of partitions (`NeuronCore::with_host_cache_bytes`;
    /// a huge value runs every instruction over all its partitions at once)
    #[arg(long, value_name = "BYTES")]
    host_cache_bytes: Option<usize>,
    /// Host threads of the core (`NeuronCore::with_host_threads`; 1 runs every instruction on
    /// the calling thread)
    #[arg(long, value_name = "N")]
    host_threads: Option<usize>,
    /// Run each case once with the schedule-independence check (ScheduleCheck::DEFAULT)
    /// instead of timing it, and print the check's time beside a plain launch's
    #[arg(long)]
    schedule_check: bool,
    /// The host code path (`NeuronCore::with_isa`; default: the fastest this CPU supports), to
    /// time a narrower machine's path on this one
    #[arg(long, value_enum)]
    isa: Option<HostPath>,
}

/// The host code paths `--isa` names (`nki::Isa`).
#[derive(Copy, Clone, Debug, clap::ValueEnum)]
enum HostPath {
    /// `Isa::Portable`.
    Portable,
    /// `Isa::Avx2Fma`.
    Avx2,
    /// `Isa::Avx512`.
    Avx512,
    /// `Isa::Avx512Bf16`.
    Avx512Bf16,
}

impl HostPath {
    fn isa(self) -> nki::Isa {
        match self {
            HostPath::Portable => nki::Isa::Portable,
            HostPath::Avx2 => nki::Isa::Avx2Fma,
            HostPath::Avx512 => nki::Isa::Avx512,
            HostPath::Avx512Bf16 => nki::Isa::Avx512Bf16,
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let Cli {
        json,
        cases,
        compare,
        host_profile,
        strict,
        host_cache_bytes,
        host_threads,
        schedule_check,
        isa,
    } = cli;
    let cases = cases.unwrap_or_else(|| CASES.iter().map(|c| c.to_string()).collect());
    if strict {
        // Each case once on a strict core: a read of memory the launch never wrote, or an
        // output left unwritten, is reported instead of timed.
        let mut core = NeuronCore::default().with_strict(true);
        let mut failed = 0;
        for name in &cases {
            let mut launch = case(name).ok_or_else(|| format!("unknown case `{name}`"))?;
            match launch(&mut core) {
                Ok(()) => println!("{name}: strict launch ok"),
                Err(e) => {
                    failed += 1;
                    println!("{name}: {e}");
                }
            }
        }
        return match failed {
            0 => Ok(()),
            n => Err(format!("{n} case(s) failed the strict launch").into()),
        };
    }
    if schedule_check {
        return check_schedules(&cases);
    }
    let mut core = NeuronCore::default();
    if let Some(bytes) = host_cache_bytes {
        core = core.with_host_cache_bytes(bytes);
    }
    if let Some(n) = host_threads {
        core = core.with_host_threads(n);
    }
    if let Some(path) = isa {
        core = core.with_isa(path.isa())?;
    }
    let mut results = BTreeMap::new();
    for name in &cases {
        let mut launch = case(name).ok_or_else(|| format!("unknown case `{name}`"))?;
        // The hypervisor's placement of the two threads moves two-thread figures more than
        // most changes do: each case names the round trip before and after it.
        let before = round_trip_ns(&mut core);
        let mut s = time(&mut launch, &mut core)?;
        s.round_trip = [before, round_trip_ns(&mut core)];
        if !json {
            eprintln!(
                "{name}: P50 {:.1} µs ({} calls; host round trip {} / {} ns)",
                s.p50, s.n, s.round_trip[0], s.round_trip[1]
            );
        }
        if host_profile {
            // One more launch, observed (serially: the profile shows every instruction).
            core.record_host_profile(true);
            launch(&mut core)?;
            if let Some(p) = core.host_profile() {
                eprintln!("{name}: {p}");
            }
            core.record_host_profile(false);
        }
        results.insert(name.clone(), s);
    }
    if json {
        let obj: serde_json::Map<String, serde_json::Value> = cases
            .iter()
            .map(|c| {
                let s = results[c];
                (
                    c.clone(),
                    serde_json::json!({
                        "min": s.min,
                        "p50": s.p50,
                        "p99": s.p99,
                        "host_round_trip_ns": s.round_trip,
                    }),
                )
            })
            .collect();
        println!("{}", serde_json::Value::Object(obj));
        return Ok(());
    }
    let peers = match &compare {
        Some(p) => peers(p)?,
        None => BTreeMap::new(),
    };
    let p50 = |g: &str, c: &str| peers.get(&(g.to_string(), c.to_string())).copied();
    println!(
        "{:<18} {:>12} {:>12} {:>12} {:>12} {:>9} {:>12} {:>9}",
        "case",
        "ours min",
        "ours P50",
        "ours P99",
        "torch P50",
        "ours/torch",
        "numpy P50",
        "ours/np"
    );
    for c in &cases {
        let s = results[c];
        let cell = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
        let ratio = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{:.2}", s.p50 / v));
        let (t, n) = (p50("torch", c), p50("numpy", c));
        println!(
            "{:<18} {:>12.1} {:>12.1} {:>12.1} {:>12} {:>9} {:>12} {:>9}",
            c,
            s.min,
            s.p50,
            s.p99,
            cell(t),
            ratio(t),
            cell(n),
            ratio(n)
        );
    }
    Ok(())
}
