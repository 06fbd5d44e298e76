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
//! `mamba_v2` at the tutorial's `[1, 4096, 512]` (5,344, Vector bound).

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
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nki::prelude::*;
use nki::timing::{Detail, Timing};

fn timing_only(c: &mut Criterion) {
    let mut group = c.benchmark_group("timing_only");
    group
        .measurement_time(Duration::from_secs(8))
        .sample_size(20);
    let mm: [&[usize]; 2] = [&[8192, 4096], &[8192, 8192]];
    let mamba_shapes = mamba_shapes::input_shapes(4096, 512);
    let mamba = mamba_shapes.each_ref().map(Vec::as_slice);
    let cases: [(&str, &Kernel<'static>, &[&[usize]]); 5] = [
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
    let timing = Timing::new().detail(Detail::Summary);
    for (name, kernel, shapes) in cases {
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

criterion_group!(benches, timing_only);
criterion_main!(benches);
