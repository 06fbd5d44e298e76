//! The compute families end to end, one table row per operation: each program is built with
//! `ProgramBuilder` (load → one instruction → store), run on every host code path with one and
//! two host threads, and compared with an independent f64 reference.

use half::bf16;
use nki_lang::builder::{Grid, Operand, ProgramBuilder, TileId};
use nki_lang::{
    ActFn, Affine, Alu, AxisIndex, Cmp, DType, Dim, Dst, ExprId, Instr, InstrData, Mask, MaskTerm,
    Memory, Opcode, Pred, Scalar, Src, Target, TileView,
};
use nki_runtime::{DeviceTensor, Element, HbmIn, Isa, Kernel, NeuronCore};

/// Deterministic values in `[lo, hi)`.
fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let u = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            lo + (hi - lo) * u
        })
        .collect()
}

/// Every core configuration: each host code path, one and two host threads (plain: a strict
/// launch runs on one thread).
fn cores() -> Vec<NeuronCore> {
    let mut v = Vec::new();
    for isa in Isa::supported() {
        for threads in [1, 2] {
            let core = NeuronCore::new(Target::Trn1).with_isa(isa).unwrap();
            v.push(core.with_strict(false).with_host_threads(threads));
        }
    }
    v
}

/// A program reading inputs `x0, x1, ...` of shape `[p, f]` into tiles of the same dtype,
/// running `body(builder, input tiles, output tile)`, and storing the output tile.
fn program(
    inputs: &[DType],
    p: u32,
    f: u32,
    out: (DType, &[u32]),
    body: impl FnOnce(&mut ProgramBuilder, &[TileId], TileId),
) -> nki_lang::CompiledProgram {
    let mut b = ProgramBuilder::new("op", Target::Trn1);
    let dims = |d: &[u32]| d.iter().map(|&n| Dim::Fixed(n as u64)).collect::<Vec<_>>();
    let ts: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, &d)| b.input(&format!("x{i}"), d, &dims(&[p, f])).unwrap())
        .collect();
    let o = b.output("out", out.0, &dims(out.1)).unwrap();
    let tiles: Vec<TileId> = inputs
        .iter()
        .enumerate()
        .map(|(i, &d)| b.tile(&format!("t{i}"), Memory::Sbuf, d, &[p, f]).unwrap())
        .collect();
    for (&t, &x) in tiles.iter().zip(&ts) {
        b.load(t, Grid::origin(x)).unwrap();
    }
    let r = b.tile("r", Memory::Sbuf, out.0, out.1).unwrap();
    body(&mut b, &tiles, r);
    b.store(Grid::origin(o), r).unwrap();
    b.finish()
        .unwrap_or_else(|e| panic!("program rejected: {e:?}"))
}

/// Runs `prog` on every core with f32 inputs `xs` and returns each core's f32 output.
fn run_f32(
    prog: &nki_lang::CompiledProgram,
    xs: &[Vec<f32>],
    shape: [usize; 2],
    out: &[usize],
) -> Vec<Vec<f32>> {
    run::<f32, f32>(prog, xs, shape, out)
}

fn run<I: Element, O: Element>(
    prog: &nki_lang::CompiledProgram,
    xs: &[Vec<I>],
    shape: [usize; 2],
    out: &[usize],
) -> Vec<Vec<O>> {
    let parts = prog.parts();
    let kernel = Kernel::new(parts.program());
    cores()
        .into_iter()
        .map(|mut core| {
            let ins: Vec<HbmIn<'_>> = xs.iter().map(|x| HbmIn::new(x, &shape).unwrap()).collect();
            let mut o = DeviceTensor::<O>::zeros(out).unwrap();
            core.launch(&kernel, &ins, &mut [o.arg_mut()]).unwrap();
            o.as_slice().to_vec()
        })
        .collect()
}

fn same_bits(got: f32, want: f32) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

/// `tensor_tensor` with every arithmetic and comparison operation, against f64.
#[test]
fn tensor_tensor_table() {
    let (p, f) = (128usize, 700usize);
    let a: Vec<f32> = values(p * f, 1, -40.0, 40.0)
        .iter()
        .map(|&x| x as f32)
        .collect();
    let mut b: Vec<f32> = values(p * f, 2, -40.0, 40.0)
        .iter()
        .map(|&x| x as f32)
        .collect();
    b[3] = 0.0;
    b[4] = a[4];
    type Reference = fn(f64, f64) -> f64;
    let rows: &[(Alu, Reference)] = &[
        (Alu::Add, |x, y| x + y),
        (Alu::Subtract, |x, y| x - y),
        (Alu::Multiply, |x, y| x * y),
        (Alu::Divide, |x, y| x / y),
        (Alu::Max, f64::max),
        (Alu::Min, f64::min),
        (Alu::Fmod, |x, y| x % y),
        (Alu::IsEqual, |x, y| (x == y) as u8 as f64),
        (Alu::NotEqual, |x, y| (x != y) as u8 as f64),
        (Alu::IsGt, |x, y| (x > y) as u8 as f64),
        (Alu::IsGe, |x, y| (x >= y) as u8 as f64),
        (Alu::IsLt, |x, y| (x < y) as u8 as f64),
        (Alu::IsLe, |x, y| (x <= y) as u8 as f64),
        (Alu::LogicalAnd, |x, y| (x != 0.0 && y != 0.0) as u8 as f64),
        (Alu::LogicalOr, |x, y| (x != 0.0 || y != 0.0) as u8 as f64),
        (Alu::LogicalXor, |x, y| {
            ((x != 0.0) != (y != 0.0)) as u8 as f64
        }),
    ];
    for &(op, reference) in rows {
        let prog = program(
            &[DType::F32; 2],
            p as u32,
            f as u32,
            (DType::F32, &[p as u32, f as u32]),
            |b, t, r| {
                b.tensor_tensor(r, t[0], t[1], op).unwrap();
            },
        );
        for out in run_f32(&prog, &[a.clone(), b.clone()], [p, f], &[p, f]) {
            for i in 0..p * f {
                let want = reference(a[i] as f64, b[i] as f64) as f32;
                assert!(
                    same_bits(out[i], want),
                    "{op} {} {}: {} vs {want}",
                    a[i],
                    b[i],
                    out[i]
                );
            }
        }
    }
}

/// `tensor_scalar` with an immediate and with a `[P, 1]` column, two operations, into bf16.
#[test]
fn tensor_scalar_immediates_and_columns() {
    let (p, f) = (96usize, 300usize);
    let x: Vec<f32> = values(p * f, 3, -8.0, 8.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let col: Vec<f32> = values(p, 4, 0.5, 2.0).iter().map(|&v| v as f32).collect();
    let mut b = ProgramBuilder::new("ts", Target::Trn1);
    let d = |d: &[u64]| d.iter().map(|&n| Dim::Fixed(n)).collect::<Vec<_>>();
    let xi = b.input("x", DType::F32, &d(&[p as u64, f as u64])).unwrap();
    let ci = b.input("c", DType::F32, &d(&[p as u64, 1])).unwrap();
    let o = b
        .output("o", DType::Bf16, &d(&[p as u64, f as u64]))
        .unwrap();
    let xt = b
        .tile("x", Memory::Sbuf, DType::F32, &[p as u32, f as u32])
        .unwrap();
    let ct = b
        .tile("c", Memory::Sbuf, DType::F32, &[p as u32, 1])
        .unwrap();
    let rt = b
        .tile("r", Memory::Sbuf, DType::Bf16, &[p as u32, f as u32])
        .unwrap();
    b.load(xt, Grid::origin(xi)).unwrap();
    b.load(ct, Grid::origin(ci)).unwrap();
    // r = (x - 0.25) * c
    b.tensor_scalar(
        rt,
        xt,
        Alu::Subtract,
        Operand::Imm(Scalar::float(0.25)),
        Alu::Multiply,
        Operand::Column(ct),
    )
    .unwrap();
    b.store(Grid::origin(o), rt).unwrap();
    let prog = b.finish().unwrap();
    // Inputs of different shapes: run by hand.
    let parts = prog.parts();
    let kernel = Kernel::new(parts.program());
    for mut core in cores() {
        let ins = [
            HbmIn::new(&x, &[p, f]).unwrap(),
            HbmIn::new(&col, &[p, 1]).unwrap(),
        ];
        let mut out = DeviceTensor::<bf16>::zeros(&[p, f]).unwrap();
        core.launch(&kernel, &ins, &mut [out.arg_mut()]).unwrap();
        for r in 0..p {
            for c in 0..f {
                let t = (x[r * f + c] - 0.25f32) as f64 * col[r] as f64;
                let want = bf16::from_f32(t as f32);
                assert_eq!(out.as_slice()[r * f + c], want, "row {r} col {c}");
            }
        }
    }
}

/// `tensor_reduce` add/max over the free axis in the documented order, and over two axes.
#[test]
fn tensor_reduce_order_and_axes() {
    let (p, f) = (64usize, 1000usize);
    let x: Vec<f32> = values(p * f, 5, -1.0, 1.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    for (op, negate) in [(Alu::Add, false), (Alu::Max, true), (Alu::Multiply, false)] {
        let prog = program(
            &[DType::F32],
            p as u32,
            f as u32,
            (DType::F32, &[p as u32, 1]),
            |b, t, r| {
                b.tensor_reduce(r, op, t[0], 1, negate).unwrap();
            },
        );
        for out in run_f32(&prog, std::slice::from_ref(&x), [p, f], &[p, 1]) {
            for r in 0..p {
                let row = &x[r * f..(r + 1) * f];
                // The documented order: 16 partials by index mod 16, then pairwise.
                let mut partial = [op.identity().unwrap(); 16];
                for (i, &v) in row.iter().enumerate() {
                    let a = partial[i % 16];
                    partial[i % 16] = match op {
                        Alu::Add => a + v,
                        Alu::Max => a.max(v),
                        _ => a * v,
                    };
                }
                for w in [8, 4, 2, 1] {
                    for l in 0..w {
                        partial[l] = match op {
                            Alu::Add => partial[l] + partial[l + w],
                            Alu::Max => partial[l].max(partial[l + w]),
                            _ => partial[l] * partial[l + w],
                        };
                    }
                }
                let want = if negate { -partial[0] } else { partial[0] };
                assert!(
                    same_bits(out[r], want),
                    "{op} row {r}: {} vs {want}",
                    out[r]
                );
                // And the f64 value it approximates.
                if op == Alu::Add {
                    let exact: f64 = row.iter().map(|&v| v as f64).sum();
                    assert!((out[r] as f64 - exact).abs() < 1e-3, "sum row {r}");
                }
            }
        }
    }
    // [P, 4, 5, 6] reducing axes 1 and 3 (free axes 0 and 2) keeps axis 2: [P, 1, 5, 1].
    let (p, a, bb, c) = (8usize, 4usize, 5usize, 6usize);
    let x: Vec<f32> = values(p * a * bb * c, 6, 0.0, 1.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let mut b = ProgramBuilder::new("r2", Target::Trn1);
    let d = |d: &[u64]| d.iter().map(|&n| Dim::Fixed(n)).collect::<Vec<_>>();
    let xi = b
        .input(
            "x",
            DType::F32,
            &d(&[p as u64, a as u64, bb as u64, c as u64]),
        )
        .unwrap();
    let o = b
        .output("o", DType::F32, &d(&[p as u64, bb as u64]))
        .unwrap();
    let xt = b
        .tile(
            "x",
            Memory::Sbuf,
            DType::F32,
            &[p as u32, a as u32, bb as u32, c as u32],
        )
        .unwrap();
    let rt = b
        .tile("r", Memory::Sbuf, DType::F32, &[p as u32, bb as u32])
        .unwrap();
    b.load(xt, Grid::origin(xi)).unwrap();
    let src = b
        .view(TileView::whole(
            xt.index(),
            &nki_lang::TileShape::new(&[p as u32, a as u32, bb as u32, c as u32]).unwrap(),
        ))
        .unwrap();
    let dst = b
        .view(TileView::whole(
            rt.index(),
            &nki_lang::TileShape::new(&[p as u32, bb as u32]).unwrap(),
        ))
        .unwrap();
    b.push(Instr::new(
        Opcode::TensorReduce,
        InstrData::Reduce {
            dst: Dst::overwrite(dst),
            src,
            op: Alu::Max,
            axes: 0b101,
            negate: false,
        },
    ))
    .unwrap();
    b.store(Grid::origin(o), rt).unwrap();
    let prog = b.finish().unwrap();
    let parts = prog.parts();
    let kernel = Kernel::new(parts.program());
    for mut core in cores() {
        let ins = [HbmIn::new(&x, &[p, a, bb, c]).unwrap()];
        let mut out = DeviceTensor::<f32>::zeros(&[p, bb]).unwrap();
        core.launch(&kernel, &ins, &mut [out.arg_mut()]).unwrap();
        for r in 0..p {
            for j in 0..bb {
                let mut m = f32::NEG_INFINITY;
                for i in 0..a {
                    for k in 0..c {
                        m = m.max(x[((r * a + i) * bb + j) * c + k]);
                    }
                }
                assert_eq!(out.as_slice()[r * bb + j], m, "row {r} kept {j}");
            }
        }
    }
}

/// `activation` with a column scale and bias, and its per-partition sum.
#[test]
fn activation_with_scale_bias_and_reduction() {
    let (p, f) = (32usize, 2000usize);
    let x: Vec<f32> = values(p * f, 7, -3.0, 3.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let prog = program(
        &[DType::F32],
        p as u32,
        f as u32,
        (DType::F32, &[p as u32, f as u32]),
        |b, t, r| {
            let bias = b
                .tile("bias", Memory::Sbuf, DType::F32, &[p as u32, 1])
                .unwrap();
            b.memset(bias, Scalar::float(0.5)).unwrap();
            b.activation(
                r,
                ActFn::Exp,
                t[0],
                Operand::Imm(Scalar::float(-2.0)),
                Operand::Column(bias),
            )
            .unwrap();
        },
    );
    for out in run_f32(&prog, std::slice::from_ref(&x), [p, f], &[p, f]) {
        for i in 0..p * f {
            let want = ((x[i] as f64).mul_add(-2.0, 0.5)).exp();
            let rel = ((out[i] as f64) - want).abs() / want;
            assert!(rel < 1e-6, "exp at {i}: {} vs {want}", out[i]);
        }
    }
}

/// `iota` of `5 + 2·p + 3·f` into int32 and f32, and `affine_select`'s causal mask.
#[test]
fn iota_and_affine_select() {
    let (p, f) = (128usize, 128usize);
    let expr = AxisIndex {
        start: Affine::constant(5),
        grid: [2, 3, 0, 0, 0],
    };
    let prog = program(
        &[DType::F32],
        p as u32,
        f as u32,
        (DType::I32, &[p as u32, f as u32]),
        |b, _, r| {
            b.iota(r, expr).unwrap();
        },
    );
    let x = vec![0f32; p * f];
    for out in run::<f32, i32>(&prog, std::slice::from_ref(&x), [p, f], &[p, f]) {
        for r in 0..p {
            for c in 0..f {
                assert_eq!(out[r * f + c], 5 + 2 * r as i32 + 3 * c as i32);
            }
        }
    }
    // Keep x where p >= f (lower triangle), else -9984.
    let x: Vec<f32> = values(p * f, 8, -1.0, 1.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let prog = program(
        &[DType::F32],
        p as u32,
        f as u32,
        (DType::F32, &[p as u32, f as u32]),
        |b, t, r| {
            let e = b
                .expr(AxisIndex {
                    start: Affine::ZERO,
                    grid: [1, -1, 0, 0, 0],
                })
                .unwrap();
            let (dst, src) = (tile_view(b, r, p, f), tile_view(b, t[0], p, f));
            b.push(Instr::new(
                Opcode::AffineSelect,
                InstrData::Select {
                    dst: Dst::overwrite(dst),
                    pred: Pred::Affine {
                        expr: e,
                        cmp: Cmp::Ge,
                    },
                    on_true: Src::Tile(src),
                    on_false: Src::Imm(Scalar::float(-9984.0)),
                },
            ))
            .unwrap();
            let _: ExprId = e;
        },
    );
    for out in run_f32(&prog, std::slice::from_ref(&x), [p, f], &[p, f]) {
        for r in 0..p {
            for c in 0..f {
                let want = if r >= c { x[r * f + c] } else { -9984.0 };
                assert_eq!(out[r * f + c], want, "({r}, {c})");
            }
        }
    }
}

fn tile_view(b: &mut ProgramBuilder, t: TileId, p: usize, f: usize) -> nki_lang::ViewId {
    let shape = nki_lang::TileShape::new(&[p as u32, f as u32]).unwrap();
    b.view(TileView::whole(t.index(), &shape)).unwrap()
}

/// A mask restricts an instruction to a box: a ragged last tile is loaded, scaled and stored
/// without touching the rest.
#[test]
fn masks_cut_ragged_tiles() {
    // rows = 200, tiles of 128 over 2 iterations; the second covers rows 128..200.
    let (rows, f) = (200usize, 64usize);
    let mut b = ProgramBuilder::new("ragged", Target::Trn1);
    let n = b.symbol("N").unwrap();
    let Dim::Sym(sym) = n else { unreachable!() };
    let x = b
        .input("x", DType::F32, &[n, Dim::Fixed(f as u64)])
        .unwrap();
    let o = b
        .output("o", DType::F32, &[n, Dim::Fixed(f as u64)])
        .unwrap();
    let k = b
        .begin_loop(
            nki_lang::LoopKind::Affine,
            "k",
            nki_lang::Extent::Sym {
                sym,
                add: 127,
                div: 128,
            },
        )
        .unwrap();
    let t = b
        .tile("t", Memory::Sbuf, DType::F32, &[128, f as u32])
        .unwrap();
    let start = k.checked_scale(128).unwrap();
    let mut terms = [MaskTerm {
        axis: 0,
        coef: 1,
        offset: start,
        sym: Some(sym),
    }; 4];
    terms[0].offset = start;
    let m = b.mask(Mask { terms, len: 1 }).unwrap();
    let tv = tile_view(&mut b, t, 128, f);
    let access = |b: &mut ProgramBuilder, tensor| {
        let mut axes = [AxisIndex::constant(0); 6];
        axes[0] = AxisIndex {
            start,
            grid: [1, 0, 0, 0, 0],
        };
        axes[1] = AxisIndex {
            start: Affine::ZERO,
            grid: [0, 1, 0, 0, 0],
        };
        b.access(nki_lang::HbmAccess {
            tensor,
            reshape: None,
            rank: 2,
            shape: nki_lang::TileShape::new(&[128, f as u32]).unwrap(),
            axes,
        })
        .unwrap()
    };
    let (ax, ao) = (access(&mut b, x.index()), access(&mut b, o.index()));
    let push = |b: &mut ProgramBuilder, opcode, data| {
        let mut i = Instr::new(opcode, data);
        i.mask = Some(m);
        b.push(i).unwrap();
    };
    push(&mut b, Opcode::Load, InstrData::Dma { tile: tv, hbm: ax });
    push(
        &mut b,
        Opcode::TensorScalar,
        InstrData::Alu {
            dst: Dst::overwrite(tv),
            src: [Src::Tile(tv), Src::Imm(Scalar::float(3.0)), Src::None],
            op: [Alu::Multiply, Alu::Bypass],
            rev: 0,
            acc: None,
        },
    );
    push(&mut b, Opcode::Store, InstrData::Dma { tile: tv, hbm: ao });
    b.end_loop().unwrap();
    let prog = b.finish().unwrap_or_else(|e| panic!("{e:?}"));
    // The mask makes the bounds hold: no bounds constraint was needed, only the ranges of the
    // values the executor computes from the loop variable (the masked index, the mask's bound).
    assert!(
        prog.constraints()
            .iter()
            .all(|c| matches!(c, nki_lang::Constraint::InRange { .. })),
        "{:?}",
        prog.constraints()
    );
    let xs: Vec<f32> = values(rows * f, 9, -1.0, 1.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    for out in run_f32(&prog, std::slice::from_ref(&xs), [rows, f], &[rows, f]) {
        for i in 0..rows * f {
            assert_eq!(out[i], xs[i] * 3.0, "element {i}");
        }
    }
}

/// Bit operations on integer tiles: on the values' own bits (a logical right shift of an i8
/// shifts its 8 bits), results wrapped to the destination's width.
#[test]
fn bit_operations_on_integer_tiles() {
    let (p, f) = (16usize, 64usize);
    let a: Vec<i8> = (0..p * f).map(|i| (i as i32 * 37 - 100) as i8).collect();
    let b: Vec<i8> = (0..p * f).map(|i| (i % 9) as i8).collect();
    type Reference = fn(i8, i8) -> i8;
    let rows: &[(Alu, Reference)] = &[
        (Alu::BitwiseAnd, |x, y| x & y),
        (Alu::BitwiseOr, |x, y| x | y),
        (Alu::BitwiseXor, |x, y| x ^ y),
        (Alu::LeftShift, |x, y| {
            if y < 8 { ((x as u8) << y) as i8 } else { 0 }
        }),
        (Alu::RightShift, |x, y| {
            if y < 8 { ((x as u8) >> y) as i8 } else { 0 }
        }),
    ];
    for &(op, reference) in rows {
        let prog = program(
            &[DType::I8; 2],
            p as u32,
            f as u32,
            (DType::I8, &[p as u32, f as u32]),
            |bld, t, r| {
                bld.tensor_tensor(r, t[0], t[1], op).unwrap();
            },
        );
        for out in run::<i8, i8>(&prog, &[a.clone(), b.clone()], [p, f], &[p, f]) {
            for i in 0..p * f {
                assert_eq!(out[i], reference(a[i], b[i]), "{op} {} {}", a[i], b[i]);
            }
        }
    }
}
