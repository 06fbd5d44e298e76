//! Criterion benchmarks of kernel launch overhead and end-to-end execution on the modeled
//! NeuronCore: the cases of `examples/launch_overhead.rs`, measured with criterion.
//!
//! ```sh
//! cargo bench --bench launch                       # full run, about 30 s on 2 cores
//! cargo bench --bench launch -- --quick            # about 5 s, less precise
//! cargo bench --bench launch -- seed/              # one group (criterion's name filter)
//! ```
//!
//! Cases, all on the 128×128×512 bf16 seed kernel (`examples/matmul_basic.rs`) unless stated:
//! - `launch/bind`: host launch overhead of the compile-time program: argument checks and
//!   binding of device-resident tensors (`KERNEL.bind`), no instruction executed;
//! - `launch/construct_and_bind`: the same program built at run time on every call through
//!   `nki::program::builder::ProgramBuilder` (the equivalent of NKI's per-call tracing),
//!   `Kernel::new`, then the same binding;
//! - `seed/device_resident`: `matmul_basic::launch_into`, launch and modeled execution with
//!   device-resident tensors;
//! - `seed/ndarray`: `matmul_basic::host`, `ndarray` views in and an array out;
//! - `seed/ndarray_reference`: a plain CPU matmul of the same inputs with `ndarray` (f32 `dot`,
//!   then conversion to bf16), for scale;
//! - `tiled_1024/device_resident`: the tiled kernel (`examples/matmul_tiled.rs`) at
//!   K = M = N = 1024, launch and modeled execution with device-resident tensors.
//!
//! The `seed` and `tiled_1024` groups declare a throughput of 2·K·M·N elements per iteration,
//! so criterion's "elem/s" figure is FLOP/s.

// The example files each declare `common` by path, so it is compiled twice here (as in
// `tests/all/matmul.rs`); the two copies are never mixed. `launch_overhead` brings the seed kernel
// (`overhead::basic`) and the run-time builder of its program.
#[path = "../examples/launch_overhead.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod overhead;
#[path = "../examples/matmul_tiled.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod tiled;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nki::ndarray::Array2;
use nki::prelude::*;
use nki::{HbmIn, HbmOut};
use overhead::basic::{common, matmul_basic};
use overhead::build_seed_program;
use tiled::matmul_tiled;

/// FLOPs of a `[K, M]ᵀ · [K, N]` matmul.
fn matmul_flops(k: u64, m: u64, n: u64) -> u64 {
    2 * k * m * n
}

/// Fails the bench early if the run-time program is not the compile-time one, instruction for
/// instruction (otherwise `launch/construct_and_bind` would not compare like with like).
fn assert_builder_matches_kernel() {
    let built = build_seed_program();
    assert!(
        overhead::same_instructions(&built.parts().program(), matmul_basic::KERNEL.program()),
        "the builder's seed program differs from the #[kernel] program"
    );
}

fn bench_launch(c: &mut Criterion) {
    assert_builder_matches_kernel();
    let a = common::random_bf16(128, 128, 1);
    let b = common::random_bf16(128, 512, 2);
    let da = DeviceTensor::from_array(&a).expect("valid tensor");
    let db = DeviceTensor::from_array(&b).expect("valid tensor");
    let mut out = DeviceTensor::<bf16>::zeros(&[128, 512]).expect("valid tensor");

    let mut group = c.benchmark_group("launch");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));

    let kernel = &matmul_basic::KERNEL;
    group.bench_function("bind", |bench| {
        bench.iter(|| {
            let inputs = [da.arg(), db.arg()];
            let mut outputs = [out.arg_mut()];
            black_box(
                kernel
                    .bind(black_box(&inputs), &mut outputs)
                    .expect("valid launch"),
            );
        })
    });

    group.bench_function("construct_and_bind", |bench| {
        bench.iter(|| {
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
        })
    });
    group.finish();
}

fn bench_seed(c: &mut Criterion) {
    let a = common::random_bf16(128, 128, 1);
    let b = common::random_bf16(128, 512, 2);
    let mut core = NeuronCore::default();
    let da = DeviceTensor::from_array(&a).expect("valid tensor");
    let db = DeviceTensor::from_array(&b).expect("valid tensor");
    let mut out = DeviceTensor::<bf16>::zeros(&[128, 512]).expect("valid tensor");

    let mut group = c.benchmark_group("seed");
    group
        .throughput(Throughput::Elements(matmul_flops(128, 128, 512)))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));

    group.bench_function("device_resident", |bench| {
        bench.iter(|| {
            matmul_basic::launch_into(&mut core, black_box(&da), black_box(&db), &mut out)
                .expect("valid launch");
            black_box(&out);
        })
    });

    group.bench_function("ndarray", |bench| {
        bench.iter(|| {
            black_box(
                matmul_basic::host(&mut core, black_box(a.view()), black_box(b.view()))
                    .expect("valid launch"),
            )
        })
    });

    let a32 = a.mapv(f32::from);
    let b32 = b.mapv(f32::from);
    group.bench_function("ndarray_reference", |bench| {
        bench.iter(|| {
            let c: Array2<f32> = black_box(&a32).t().dot(black_box(&b32));
            black_box(c.mapv(bf16::from_f32))
        })
    });
    group.finish();
}

fn bench_tiled(c: &mut Criterion) {
    const SIZE: usize = 1024;
    let mut core = NeuronCore::default();
    let da = DeviceTensor::from_array(&common::random_bf16(SIZE, SIZE, 3)).expect("valid tensor");
    let db = DeviceTensor::from_array(&common::random_bf16(SIZE, SIZE, 4)).expect("valid tensor");
    let mut out = DeviceTensor::<bf16>::zeros(&[SIZE, SIZE]).expect("valid tensor");

    let mut group = c.benchmark_group("tiled_1024");
    let n = SIZE as u64;
    group
        .throughput(Throughput::Elements(matmul_flops(n, n, n)))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));

    group.bench_function("device_resident", |bench| {
        bench.iter(|| {
            matmul_tiled::launch_into(&mut core, black_box(&da), black_box(&db), &mut out)
                .expect("valid launch");
            black_box(&out);
        })
    });
    group.finish();
}

criterion_group!(benches, bench_launch, bench_seed, bench_tiled);
criterion_main!(benches);
