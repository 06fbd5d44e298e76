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
//! (`(x · 1.5) + 0.25`), `activation_exp`, `tensor_reduce_add` (the free axis into `[128, 1]`),
//! `tensor_tensor_scan` (`r = x · r + y` along each partition);
//! each on a core with two host threads (groups `f32`, `bf16`) and with one (`f32-1-thread`,
//! `bf16-1-thread`).
//!
//! Short rows, f32, in groups `short` and `short-1-thread`: `tensor_tensor_add` and
//! `tensor_scalar` of `[128, 128]` tiles (the NKI Library router's one-hot tiles), where a
//! streamed instruction's work per row, not per element, is what shows.
//!
//! Reductions of other shapes, f32, in groups `reduce` and `reduce-1-thread` (throughput:
//! source elements): `pool2x2_add` and `pool2x2_max` (`tensor_reduce` of a `[128, 32·2·256·2]`
//! tile viewed as `[128, 32, 2, 256, 2]` over axes 2 and 4 into `[128, 32, 256]`, the pooling
//! tutorials' pattern) and `bn_stats` (`[128, 512]` → `[128, 6]`).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use nki::prelude::*;
use nki::program::builder::{Operand, ProgramBuilder, TileId};
use nki::program::{
    ActFn, Affine, Alu, AxisIndex, DType, Dst, Extent, Instr, InstrData, LoopKind, Memory, Opcode,
    Scalar, Target, TileShape, TileView,
};

const P: u32 = 128;
const F: u32 = 8192;
const REPS: u64 = 16;

/// A program with tiles `x`, `y` (filled) and `r`, running `body(x, y, r)` `REPS` times.
fn program(
    dtype: DType,
    out_shape: &[u32],
    body: impl Fn(&mut ProgramBuilder, TileId, TileId, TileId),
) -> nki::program::CompiledProgram {
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

/// `r = x · 1.5 + 0.25`, one `tensor_scalar` (the `y` operand unused).
fn scale_shift(b: &mut ProgramBuilder, x: TileId, _: TileId, r: TileId) {
    b.tensor_scalar(
        r,
        x,
        Alu::Multiply,
        Operand::Imm(Scalar::float(1.5)),
        Alu::Add,
        Operand::Imm(Scalar::float(0.25)),
    )
    .unwrap();
}

fn cases(dtype: DType) -> Vec<(&'static str, nki::program::CompiledProgram)> {
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
        ("tensor_scalar", program(dtype, &full, scale_shift)),
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
        (
            "tensor_tensor_scan",
            program(dtype, &full, |b, x, y, r| {
                let shape = TileShape::new(&full).unwrap();
                let view = |b: &mut ProgramBuilder, t: TileId| {
                    b.view(TileView::whole(t.index(), &shape)).unwrap()
                };
                let (dst, x, y) = (view(b, r), view(b, x), view(b, y));
                let init = b.src(Operand::Imm(Scalar::float(0.0))).unwrap();
                b.push(Instr::new(
                    Opcode::TensorTensorScan,
                    InstrData::Scan {
                        dst: Dst::overwrite(dst),
                        src: [x, y],
                        init,
                        op: [Alu::Multiply, Alu::Add],
                        rev: 0,
                    },
                ))
                .unwrap()
            }),
        ),
    ]
}

/// A program with an f32 tile `x` of `src` elements per partition (filled with a ramp) and a
/// tile `r` of shape `out`, running `body(x, r)` `REPS` times.
fn reduce_program(
    src: u32,
    out: &[u32],
    body: impl Fn(&mut ProgramBuilder, TileId, TileId),
) -> nki::program::CompiledProgram {
    let mut b = ProgramBuilder::new("bench", Target::Trn1);
    let x = b.tile("x", Memory::Sbuf, DType::F32, &[P, src]).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, out).unwrap();
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
    b.begin_loop(LoopKind::Sequential, "rep", Extent::Fixed(REPS))
        .unwrap();
    body(&mut b, x, r);
    b.end_loop().unwrap();
    b.finish()
        .unwrap_or_else(|e| panic!("bench program rejected: {e:?}"))
}

/// `[128, 32·2·256·2]` viewed as `[128, 32, 2, 256, 2]`, reduced over axes 2 and 4 with `op`.
fn pool2x2(op: Alu) -> nki::program::CompiledProgram {
    let (h, w) = (32u32, 256u32);
    reduce_program(h * 2 * w * 2, &[P, h, w], |b, x, r| {
        let shape = TileShape::new(&[P, h, 2, w, 2]).unwrap();
        let src = TileView {
            strides: [4 * i64::from(w), 2 * i64::from(w), 2, 1],
            ..TileView::whole(x.index(), &shape)
        };
        let src = b.view(src).unwrap();
        let out = TileShape::new(&[P, h, w]).unwrap();
        let dst = b.view(TileView::whole(r.index(), &out)).unwrap();
        b.push(Instr::new(
            Opcode::TensorReduce,
            InstrData::Reduce {
                dst: Dst::overwrite(dst),
                src,
                op,
                axes: 0b1010,
                negate: false,
            },
        ))
        .unwrap();
    })
}

/// `bn_stats` of a `[128, 512]` tile into `[128, 6]`.
fn bn_stats() -> nki::program::CompiledProgram {
    reduce_program(512, &[P, 6], |b, x, r| {
        let src = TileView::whole(x.index(), &TileShape::new(&[P, 512]).unwrap());
        let dst = TileView::whole(r.index(), &TileShape::new(&[P, 6]).unwrap());
        let (src, dst) = (b.view(src).unwrap(), b.view(dst).unwrap());
        b.push(Instr::new(
            Opcode::BnStats,
            InstrData::Unary {
                dst: Dst::overwrite(dst),
                src,
            },
        ))
        .unwrap();
    })
}

/// Elements per partition of the short-row cases (the NKI Library router's `[128, 128]`
/// one-hot tiles: a row is one chunk, so the per-row work of a streamed instruction shows).
const SHORT: u32 = 128;

/// `tensor_tensor` add and `tensor_scalar` (`x · 1.5 + 0.25`) of `[128, 128]` f32 tiles.
fn short_rows() -> Vec<(&'static str, nki::program::CompiledProgram)> {
    let shape = [P, SHORT];
    let with_y = |body: fn(&mut ProgramBuilder, TileId, TileId, TileId)| {
        reduce_program(SHORT, &shape, move |b, x, r| {
            let y = b.tile("y", Memory::Sbuf, DType::F32, &shape).unwrap();
            b.tensor_copy(y, x).unwrap();
            body(b, x, y, r);
        })
    };
    vec![
        (
            "tensor_tensor_add",
            with_y(|b, x, y, r| b.tensor_tensor(r, x, y, Alu::Add).unwrap()),
        ),
        ("tensor_scalar", with_y(scale_shift)),
    ]
}

fn bench_short(c: &mut Criterion) {
    for threads in [2, 1] {
        let mut core = NeuronCore::default().with_host_threads(threads);
        let mut g = c.benchmark_group(match core.host_threads() {
            1 => "short-1-thread",
            _ => "short",
        });
        g.throughput(Throughput::Elements(u64::from(P * SHORT) * REPS));
        for (case, compiled) in short_rows() {
            let parts = compiled.parts();
            let kernel = Kernel::new(parts.program());
            g.bench_function(BenchmarkId::from_parameter(case), |bench| {
                bench.iter(|| core.launch(&kernel, &[], &mut []).unwrap())
            });
        }
        g.finish();
    }
}

fn bench_reduce(c: &mut Criterion) {
    let cases = [
        ("pool2x2_add", 32 * 2 * 256 * 2, pool2x2(Alu::Add)),
        ("pool2x2_max", 32 * 2 * 256 * 2, pool2x2(Alu::Max)),
        ("bn_stats", 512, bn_stats()),
    ];
    for threads in [2, 1] {
        let mut core = NeuronCore::default().with_host_threads(threads);
        let mut g = c.benchmark_group(match core.host_threads() {
            1 => "reduce-1-thread",
            _ => "reduce",
        });
        for (case, free, compiled) in &cases {
            g.throughput(Throughput::Elements(u64::from(P * free) * REPS));
            let parts = compiled.parts();
            let kernel = Kernel::new(parts.program());
            g.bench_function(BenchmarkId::from_parameter(case), |bench| {
                bench.iter(|| core.launch(&kernel, &[], &mut []).unwrap())
            });
        }
        g.finish();
    }
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
    targets = bench_compute, bench_reduce, bench_short
}
criterion_main!(benches);
