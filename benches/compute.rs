//! Criterion benchmarks of the compute families on one `[128, 8192]` SBUF tile, in f32 and
//! bf16, next to a plain copy of the same tile (the memory bound of the modeled SBUF on this
//! host).
//!
//! ```sh
//! cargo bench --bench compute                  # about two minutes on 2 cores
//! cargo bench --bench compute -- '^bf16/'      # one dtype, both host threads (a name filter)
//! cargo bench --bench compute -- 1-thread      # the calling thread only
//! ```
//!
//! Each program fills its tiles once with `iota` (values 0..8191 scaled to [0, 1)) and then
//! runs the measured instruction `REPS` times in an `affine_range` loop, so that the fill costs
//! about 1/`REPS` of a figure; criterion's throughput is elements of the tile per second
//! (`elem/s`): divide by 10⁹ for elements per nanosecond.
//!
//! Cases: `copy` (`tensor_copy` SBUF → SBUF), `tensor_tensor_add`, `tensor_scalar`
//! (`(x · 1.5) + 0.25`), `activation_exp`, `tensor_reduce_add` (the free axis into `[128, 1]`);
//! each on a core with two host threads (groups `f32`, `bf16`) and with one (`f32-1-thread`,
//! `bf16-1-thread`).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use nki::lang::builder::{Operand, ProgramBuilder, TileId};
use nki::lang::{ActFn, Affine, Alu, AxisIndex, DType, Extent, LoopKind, Memory, Scalar, Target};
use nki::prelude::*;

const P: u32 = 128;
const F: u32 = 8192;
const REPS: u64 = 16;

/// A program with tiles `x`, `y` (filled) and `r`, running `body(x, y, r)` `REPS` times.
fn program(
    dtype: DType,
    out_shape: &[u32],
    body: impl Fn(&mut ProgramBuilder, TileId, TileId, TileId),
) -> nki::lang::CompiledProgram {
    let mut b = ProgramBuilder::new("bench", Target::Trn1);
    let x = b.tile("x", Memory::Sbuf, dtype, &[P, F]).unwrap();
    let y = b.tile("y", Memory::Sbuf, dtype, &[P, F]).unwrap();
    let r = b.tile("r", Memory::Sbuf, dtype, out_shape).unwrap();
    // x[p, f] = (p + f) mod-free ramp; y = 1.5 · x, both through f32.
    let ramp = AxisIndex {
        start: Affine::constant(1),
        grid: [7, 1, 0, 0, 0],
    };
    b.iota(x, ramp).unwrap();
    b.tensor_scalar(
        x,
        x,
        Alu::Multiply,
        Operand::Imm(Scalar::float(1.0 / 9000.0)),
        Alu::Bypass,
        Operand::None,
    )
    .unwrap();
    b.tensor_scalar(
        y,
        x,
        Alu::Multiply,
        Operand::Imm(Scalar::float(1.5)),
        Alu::Bypass,
        Operand::None,
    )
    .unwrap();
    b.begin_loop(LoopKind::Sequential, "rep", Extent::Fixed(REPS))
        .unwrap();
    body(&mut b, x, y, r);
    b.end_loop().unwrap();
    b.finish()
        .unwrap_or_else(|e| panic!("bench program rejected: {e:?}"))
}

fn cases(dtype: DType) -> Vec<(&'static str, nki::lang::CompiledProgram)> {
    let full = [P, F];
    vec![
        (
            "copy",
            program(dtype, &full, |b, x, _, r| b.tensor_copy(r, x).unwrap()),
        ),
        (
            "tensor_tensor_add",
            program(dtype, &full, |b, x, y, r| {
                b.tensor_tensor(r, x, y, Alu::Add).unwrap()
            }),
        ),
        (
            "tensor_scalar",
            program(dtype, &full, |b, x, _, r| {
                b.tensor_scalar(
                    r,
                    x,
                    Alu::Multiply,
                    Operand::Imm(Scalar::float(1.5)),
                    Alu::Add,
                    Operand::Imm(Scalar::float(0.25)),
                )
                .unwrap()
            }),
        ),
        (
            "activation_exp",
            program(dtype, &full, |b, x, _, r| {
                b.activation(
                    r,
                    ActFn::Exp,
                    x,
                    Operand::Imm(Scalar::float(1.0)),
                    Operand::None,
                )
                .unwrap()
            }),
        ),
        (
            "tensor_reduce_add",
            program(dtype, &[P, 1], |b, x, _, r| {
                b.tensor_reduce(r, Alu::Add, x, 1, false).unwrap()
            }),
        ),
    ]
}

fn bench_compute(c: &mut Criterion) {
    for threads in [2, 1] {
        let mut core = NeuronCore::default().with_host_threads(threads);
        for (dtype, name) in [(DType::F32, "f32"), (DType::Bf16, "bf16")] {
            let group = match core.host_threads() {
                1 => format!("{name}-1-thread"),
                _ => name.to_string(),
            };
            let mut g = c.benchmark_group(group);
            g.throughput(Throughput::Elements(u64::from(P * F) * REPS));
            for (case, compiled) in cases(dtype) {
                let parts = compiled.parts();
                let kernel = Kernel::new(parts.program());
                g.bench_function(BenchmarkId::from_parameter(case), |bench| {
                    bench.iter(|| core.launch(&kernel, &[], &mut []).unwrap())
                });
            }
            g.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_compute
}
criterion_main!(benches);
