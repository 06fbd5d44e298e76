//! Criterion benchmarks of the timing model's speed in timing-only mode
//! (`Timing::run_shapes`, `Detail::Summary`: what an autotuner runs per candidate), in executed
//! instructions per second: each case declares the instructions its launch executes as its
//! throughput (those of the loop iterations the fast-forward skips included, as a plain run
//! executes them), so criterion's "elem/s" figure is instructions per second.
//!
//! ```sh
//! cargo bench --bench timing_model                  # about 30 s on 2 cores
//! cargo bench --bench timing_model -- --quick       # about 5 s, less precise
//! ```
//!
//! Cases, at the matmul tutorial's shape `[4096, 8192] × [8192, 8192]` bf16 on Trn1 under the
//! default `Scheduling::Device`, its four stages: `tiled` (99,328 executed instructions, DMA
//! bound), `hoist_load`, `block_free_dimension` and `fully_optimized` (39,176, TensorE bound);
//! `mamba_v2` at the tutorial's `[1, 4096, 512]` (5,284, Vector bound).
//!
//! Group `timing_only` times one launch after another on one host thread; group
//! `both_threads` times the same cases as an autotuner ranks candidates (`autotune_matmul`):
//! a modeled core per host thread, each thread timing launches of its own at once, criterion's
//! figure the launches of all threads per second of wall time.

#[path = "../examples/matmul_block_free_dimension.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod block_free_dimension;
#[path = "../examples/matmul_fully_optimized.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod fully_optimized;
#[path = "../examples/matmul_hoist_load.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod hoist_load;
#[path = "../examples/mamba_tutorial_shapes.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod mamba_shapes;
#[path = "../examples/matmul_tiled.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod tiled;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use nki::prelude::*;
use nki::timing::{Detail, Timing};

/// A case: its name, kernel and input shapes.
type Case<'a> = (&'static str, &'static Kernel<'static>, &'a [&'a [usize]]);

fn timing_only(c: &mut Criterion) {
    let mm: [&[usize]; 2] = [&[8192, 4096], &[8192, 8192]];
    let mamba_shapes = mamba_shapes::input_shapes(4096, 512);
    let mamba = mamba_shapes.each_ref().map(Vec::as_slice);
    let cases: [Case<'_>; 5] = [
        ("tiled", &tiled::matmul_tiled::KERNEL, &mm),
        (
            "hoist_load",
            &hoist_load::nki_matmul_hoist_load_::KERNEL,
            &mm,
        ),
        (
            "block_free_dimension",
            &block_free_dimension::nki_matmul_block_free_dimension_::KERNEL,
            &mm,
        ),
        (
            "fully_optimized",
            &fully_optimized::nki_matmul_fully_optimized_::KERNEL,
            &mm,
        ),
        ("mamba_v2", &mamba_shapes::mamba_v2_512x4096::KERNEL, &mamba),
    ];
    one_thread(c, &cases);
    both_threads(c, &cases);
}

/// A group of the bench: 20 samples over 8 s per case.
fn group<'c>(c: &'c mut Criterion, name: &str) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .measurement_time(Duration::from_secs(8))
        .sample_size(20);
    group
}

/// Launch after launch on one host thread.
fn one_thread(c: &mut Criterion, cases: &[Case<'_>]) {
    let mut group = group(c, "timing_only");
    let timing = Timing::new().detail(Detail::Summary);
    for &(name, kernel, shapes) in cases {
        let mut core = NeuronCore::new(Target::Trn1);
        let executed = timing
            .run_shapes(&mut core, kernel, shapes)
            .expect("the case launches")
            .instructions();
        group.throughput(Throughput::Elements(executed));
        group.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    timing
                        .run_shapes(&mut core, kernel, shapes)
                        .expect("launches"),
                )
            })
        });
    }
    group.finish();
}

/// Launches on every host thread at once, a modeled core each, as `autotune_matmul` ranks
/// its candidates: the wall time of `iters` launches shared between the threads.
fn both_threads(c: &mut Criterion, cases: &[Case<'_>]) {
    let mut group = group(c, "both_threads");
    let timing = Timing::new().detail(Detail::Summary);
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let mut cores: Vec<NeuronCore> = (0..threads)
        .map(|_| NeuronCore::new(Target::Trn1))
        .collect();
    for &(name, kernel, shapes) in cases {
        let executed = timing
            .run_shapes(&mut cores[0], kernel, shapes)
            .expect("the case launches")
            .instructions();
        group.throughput(Throughput::Elements(executed));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                let timing = &timing;
                std::thread::scope(|scope| {
                    for (i, core) in cores.iter_mut().enumerate() {
                        // Thread `i` takes every `threads`-th launch from the `i`-th on.
                        let share = (iters as usize + threads - 1 - i) / threads;
                        scope.spawn(move || {
                            for _ in 0..share {
                                black_box(
                                    timing.run_shapes(core, kernel, shapes).expect("launches"),
                                );
                            }
                        });
                    }
                });
                start.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, timing_only);
criterion_main!(benches);
