//! `ProgramBuilder` usage: calls made in the wrong state or with impossible arguments
//! (input after output, unbalanced or too-deep loops, bad ranks, foreign ids) fail with
//! `BuildError::Usage` and its message; the instructions, loop links and HBM access patterns
//! it records are the ones written out by hand here.

mod common;

use common::{compile, dims};
use nki_lang::builder::{BuildError, Grid, ProgramBuilder};
use nki_lang::{
    Affine, AxisIndex, DType, Dim, Dst, Engine, Extent, HbmAccess, Instr, InstrData, LoopKind,
    MAX_TENSOR_RANK, MAX_TILE_RANK, Memory, Opcode, Scalar, Target, TileShape, Write,
};

fn new() -> ProgramBuilder {
    ProgramBuilder::new("b", Target::Trn1)
}

#[test]
fn input_after_output() {
    let mut b = new();
    b.input("x", DType::F32, &dims(&[4])).unwrap();
    b.output("y", DType::F32, &dims(&[4])).unwrap();
    assert_eq!(
        b.input("z", DType::F32, &dims(&[4])),
        Err(BuildError::Usage(
            "declare every input before the first output"
        ))
    );
    // More outputs are still fine.
    b.output("y2", DType::F32, &dims(&[4])).unwrap();
}

#[test]
fn end_loop_with_no_open_loop() {
    let mut b = new();
    assert_eq!(b.end_loop(), Err(BuildError::Usage("no loop is open")));
    b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(2))
        .unwrap();
    b.end_loop().unwrap();
    assert_eq!(b.end_loop(), Err(BuildError::Usage("no loop is open")));
}

#[test]
fn finish_with_an_open_loop() {
    let mut b = new();
    b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(2))
        .unwrap();
    assert_eq!(
        b.finish().unwrap_err(),
        BuildError::Usage("a loop is still open")
    );
}

#[test]
fn more_than_eight_nested_loops() {
    let mut b = new();
    for d in 0..8 {
        let v = b
            .begin_loop(LoopKind::Sequential, &format!("l{d}"), Extent::Fixed(1))
            .unwrap();
        // Each loop's variable is the one at its depth, scale 1.
        assert_eq!(v, Affine::loop_var(d, 1));
    }
    assert_eq!(
        b.begin_loop(LoopKind::Sequential, "l8", Extent::Fixed(1)),
        Err(BuildError::Usage("loops nest at most 8 deep"))
    );
    // The refused loop left nothing behind: eight ends close the program.
    for _ in 0..8 {
        b.end_loop().unwrap();
    }
    let p = compile(b);
    assert_eq!(p.source().instrs.len(), 16);
    assert_eq!(p.source().loop_vars.len(), 8);
}

#[test]
fn loop_var_only_for_open_loops() {
    let mut b = new();
    assert_eq!(
        b.loop_var(0, 1),
        Err(BuildError::Usage("no open loop at that depth"))
    );
    b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(2))
        .unwrap();
    b.begin_loop(LoopKind::Affine, "j", Extent::Fixed(2))
        .unwrap();
    assert_eq!(b.loop_var(0, 128), Ok(Affine::loop_var(0, 128)));
    assert_eq!(b.loop_var(1, -1), Ok(Affine::loop_var(1, -1)));
    assert_eq!(
        b.loop_var(2, 1),
        Err(BuildError::Usage("no open loop at that depth"))
    );
}

#[test]
fn loops_are_linked_begin_to_end() {
    // 0 for i   1 for j   2 memset   3 end j   4 memset   5 end i   6 store
    let mut b = new();
    let out = b.output("out", DType::F32, &dims(&[128, 4])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 4]).unwrap();
    b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(3))
        .unwrap();
    b.begin_loop(LoopKind::Sequential, "j", Extent::Fixed(5))
        .unwrap();
    b.memset(t, Scalar::float(1.0)).unwrap();
    b.end_loop().unwrap();
    b.memset(t, Scalar::float(2.0)).unwrap();
    b.end_loop().unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let p = compile(b);
    let ops: Vec<InstrData> = p.source().instrs.iter().map(|i| i.data).collect();
    assert_eq!(
        ops[0],
        InstrData::LoopBegin {
            kind: LoopKind::Affine,
            trip: Extent::Fixed(3),
            var: 0,
            end: 5
        }
    );
    assert_eq!(
        ops[1],
        InstrData::LoopBegin {
            kind: LoopKind::Sequential,
            trip: Extent::Fixed(5),
            var: 1,
            end: 3
        }
    );
    assert_eq!(ops[3], InstrData::LoopEnd { begin: 1 });
    assert_eq!(ops[5], InstrData::LoopEnd { begin: 0 });
    let opcodes: Vec<Opcode> = p.source().instrs.iter().map(|i| i.opcode).collect();
    assert_eq!(
        opcodes,
        [
            Opcode::LoopBegin,
            Opcode::LoopBegin,
            Opcode::Memset,
            Opcode::LoopEnd,
            Opcode::Memset,
            Opcode::LoopEnd,
            Opcode::Store
        ]
    );
    let engines: Vec<Engine> = p.source().instrs.iter().map(|i| i.engine).collect();
    assert_eq!(
        engines,
        [
            Engine::Sync,
            Engine::Sync,
            Engine::Vector,
            Engine::Sync,
            Engine::Vector,
            Engine::Sync,
            Engine::Dma
        ]
    );
    assert_eq!(p.source().loop_vars, ["i", "j"]);
}

#[test]
fn symbols_are_interned_and_limited_to_eight() {
    let mut b = new();
    assert_eq!(b.symbol("K"), Ok(Dim::Sym(0)));
    assert_eq!(b.symbol("N"), Ok(Dim::Sym(1)));
    assert_eq!(b.symbol("K"), Ok(Dim::Sym(0)));
    for s in 2..8 {
        assert_eq!(b.symbol(&format!("S{s}")), Ok(Dim::Sym(s)));
    }
    assert_eq!(
        b.symbol("ninth"),
        Err(BuildError::Usage(
            "a program has at most 8 symbolic dimensions"
        ))
    );
    // An existing name is still found when the table is full.
    assert_eq!(b.symbol("N"), Ok(Dim::Sym(1)));
}

#[test]
fn tile_and_tensor_ranks() {
    let mut b = new();
    let tile_rank = BuildError::Usage(
        "a tile has 1 to 5 dimensions: its partitions, then up to 4 free dimensions",
    );
    assert_eq!(
        b.tile("t", Memory::Sbuf, DType::F32, &[]),
        Err(tile_rank.clone())
    );
    assert_eq!(
        b.tile("t", Memory::Sbuf, DType::F32, &[1; MAX_TILE_RANK + 1]),
        Err(tile_rank)
    );
    b.tile("t", Memory::Sbuf, DType::F32, &[1; MAX_TILE_RANK])
        .unwrap();

    let tensor_rank = BuildError::Usage("an HBM tensor has 1 to 6 dimensions");
    assert_eq!(b.input("x", DType::F32, &[]), Err(tensor_rank.clone()));
    assert_eq!(
        b.input("x", DType::F32, &dims(&[1; MAX_TENSOR_RANK + 1])),
        Err(tensor_rank)
    );
    b.input("x", DType::F32, &dims(&[1; MAX_TENSOR_RANK]))
        .unwrap();
}

#[test]
fn at_most_sixteen_tensors() {
    let mut b = new();
    for n in 0..16 {
        b.input(&format!("x{n}"), DType::F32, &dims(&[4])).unwrap();
    }
    assert_eq!(
        b.output("y", DType::F32, &dims(&[4])),
        Err(BuildError::Usage("a program has at most 16 HBM tensors"))
    );
}

#[test]
fn access_needs_enough_tensor_axes() {
    let mut b = new();
    let v = b.input("v", DType::F32, &dims(&[128])).unwrap();
    let m = b.input("m", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let err = Err(BuildError::Usage(
        "the tile has more dimensions than the tensor has from that axis",
    ));
    assert_eq!(b.load(t, Grid::origin(v)), err);
    assert_eq!(b.load(t, Grid::origin(m).from_axis(1)), err);
    b.load(t, Grid::origin(m)).unwrap();
}

#[test]
fn ids_from_another_builder_are_unknown() {
    let mut other = new();
    let x = other.input("x", DType::F32, &dims(&[128, 4])).unwrap();
    let t = other
        .tile("t", Memory::Sbuf, DType::F32, &[128, 4])
        .unwrap();
    let mut b = new();
    assert_eq!(
        b.memset(t, Scalar::float(0.0)),
        Err(BuildError::Usage("unknown tile"))
    );
    let own = b.tile("own", Memory::Sbuf, DType::F32, &[128, 4]).unwrap();
    assert_eq!(
        b.load(own, Grid::origin(x)),
        Err(BuildError::Usage("unknown tensor"))
    );
}

#[test]
fn grid_places_the_tile_on_the_tensor_axes() {
    // t[p, f0] = x[i, 128*j + p, f0 + 7] for x: bf16[4, 512, 64], a [128, 16] tile,
    // at depth 2 (loops i and j).
    let mut b = new();
    let x = b.input("x", DType::Bf16, &dims(&[4, 512, 64])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::Bf16, &[128, 16]).unwrap();
    let i = b
        .begin_loop(LoopKind::Affine, "i", Extent::Fixed(4))
        .unwrap();
    let j = b
        .begin_loop(LoopKind::Affine, "j", Extent::Fixed(4))
        .unwrap();
    b.load(
        t,
        Grid::origin(x)
            .from_axis(1)
            .at(0, i)
            .at(1, j.checked_scale(128).unwrap())
            .at(2, Affine::constant(7)),
    )
    .unwrap();
    b.end_loop().unwrap();
    b.end_loop().unwrap();
    let out = b.output("out", DType::Bf16, &dims(&[128, 16])).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let p = compile(b);

    let none = AxisIndex {
        start: Affine::ZERO,
        grid: [0; MAX_TILE_RANK],
    };
    let mut axes = [none; MAX_TENSOR_RANK];
    axes[0] = AxisIndex {
        start: Affine::loop_var(0, 1),
        grid: [0, 0, 0, 0, 0],
    };
    axes[1] = AxisIndex {
        start: Affine::loop_var(1, 128),
        grid: [1, 0, 0, 0, 0],
    };
    axes[2] = AxisIndex {
        start: Affine::constant(7),
        grid: [0, 1, 0, 0, 0],
    };
    let ins = p.source().instrs[2];
    assert_eq!(ins.opcode, Opcode::Load, "instruction 2 is the load");
    let InstrData::Dma { tile, hbm } = ins.data else {
        panic!("instruction 2 is the load")
    };
    let (src, dst) = (
        p.source().accesses[hbm.index()],
        p.source().views[tile.index()],
    );
    // The access's grid is the tile's shape.
    assert_eq!(
        src,
        HbmAccess {
            tensor: 0,
            reshape: None,
            rank: 3,
            shape: TileShape::new(&[128, 16]).unwrap(),
            axes
        }
    );
    // The destination is the whole tile, row-major.
    assert_eq!(dst.tile, 0);
    assert_eq!(dst.part_start, 0);
    assert_eq!(dst.shape.dims(), &[128, 16]);
    assert_eq!(dst.offset, Affine::ZERO);
    assert_eq!(dst.strides, [1, 0, 0, 0]);
}

#[test]
fn whole_tile_views_have_row_major_strides() {
    // A [2, 3, 4, 5] tile: free strides 20, 5, 1.
    let mut b = new();
    let t = b
        .tile("t", Memory::Sbuf, DType::F32, &[2, 3, 4, 5])
        .unwrap();
    b.memset(t, Scalar::float(0.5)).unwrap();
    let p = compile(b);
    let ins = p.source().instrs[0];
    assert_eq!(ins.opcode, Opcode::Memset, "instruction 0 is the memset");
    let InstrData::Fill { dst, value } = ins.data else {
        panic!("instruction 0 is the memset")
    };
    assert_eq!(dst.write, Write::Overwrite);
    assert_eq!(p.source().views[dst.view.index()].strides, [20, 5, 1, 0]);
    assert_eq!(value, Scalar::float(0.5));
}

#[test]
fn rule_errors_are_reported_through_build_error() {
    let mut b = new();
    b.output("y", DType::F32, &dims(&[4])).unwrap();
    let e = b.finish().unwrap_err();
    let BuildError::Rules(d) = &e else {
        panic!("expected rule violations, got {e:?}")
    };
    assert_eq!(d.len(), 1);
    assert_eq!(
        e.to_string(),
        "the program breaks 1 rule(s); the first: output tensor `y` is never written to"
    );
    assert_eq!(
        BuildError::Usage("no loop is open").to_string(),
        "no loop is open"
    );
}

#[test]
fn push_takes_explicit_operands_and_leaves_loops_to_begin_and_end() {
    use nki_lang::TileView;
    let mut b = ProgramBuilder::new("explicit", Target::Trn1);
    b.input("x", DType::F32, &[Dim::Fixed(128), Dim::Fixed(64)])
        .unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 64]).unwrap();
    let loop_marker = Instr::new(Opcode::LoopEnd, InstrData::LoopEnd { begin: 0 });
    assert_eq!(
        b.push(loop_marker),
        Err(BuildError::Usage(
            "open and close loops with begin_loop and end_loop"
        ))
    );
    assert!(
        b.begin_loop(LoopKind::Affine, "i", nki_lang::Extent::Fixed(2))
            .is_ok()
    );
    // Every other column of the tile: 32 columns with stride 2, hand-written.
    let mut half = TileView::whole(t.index(), &TileShape::new(&[128, 32]).unwrap());
    half.strides[0] = 2;
    half.offset = Affine::constant(1);
    let v = b.view(half).unwrap();
    b.push(Instr::new(
        Opcode::Memset,
        InstrData::Fill {
            dst: Dst::overwrite(v),
            value: Scalar::float(1.0),
        },
    ))
    .unwrap();
    // Column 1 + 2·31 = 63 is the last one: in bounds. Offset 2 would reach column 64.
    half.offset = Affine::constant(2);
    let v = b.view(half).unwrap();
    b.push(Instr::new(
        Opcode::Memset,
        InstrData::Fill {
            dst: Dst::overwrite(v),
            value: Scalar::float(1.0),
        },
    ))
    .unwrap();
    b.end_loop().unwrap();
    let Err(BuildError::Rules(d)) = b.finish() else {
        panic!("the second memset is out of bounds")
    };
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].violation.code(), "err_tensor_access_out_of_bound");
}

#[test]
fn instructions_that_only_overwrite_cannot_accumulate() {
    use nki_lang::{Alu, TileView};
    // A memset and an iota asked to add into their destination: each refused, where the
    // executor would have overwritten it.
    for opcode in [Opcode::Memset, Opcode::Iota] {
        let mut b = ProgramBuilder::new("accumulating", Target::Trn1);
        b.input("x", DType::F32, &[Dim::Fixed(128), Dim::Fixed(64)])
            .unwrap();
        let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 64]).unwrap();
        let view = b
            .view(TileView::whole(
                t.index(),
                &TileShape::new(&[128, 64]).unwrap(),
            ))
            .unwrap();
        let expr = b.expr(AxisIndex::constant(0)).unwrap();
        let dst = Dst {
            view,
            write: Write::Accumulate(Alu::Add),
        };
        let data = match opcode {
            Opcode::Memset => InstrData::Fill {
                dst,
                value: Scalar::float(1.0),
            },
            _ => InstrData::Iota { dst, expr },
        };
        b.push(Instr::new(opcode, data)).unwrap();
        let Err(BuildError::Rules(d)) = b.finish() else {
            panic!("{opcode:?} accumulating into its destination was accepted")
        };
        assert_eq!(
            d[0].violation.code(),
            "err_unsupported_accumulation",
            "{d:?}"
        );
        assert!(d[0].violation.to_string().contains(opcode.info().name));
    }
    // The rule itself: the instructions the engines combine into their destination.
    assert!(Opcode::Matmul.accumulates() && Opcode::TensorTensor.accumulates());
    assert!(!Opcode::BnStats.accumulates() && !Opcode::Transpose.accumulates());
}

#[test]
fn a_grid_over_a_reshape_indexes_its_axes_and_counts_are_checked() {
    // x: f32[K, 64] seen as [K, 2, 32]; a [2, 32] tile t[p, f] = x3[5, p, f].
    let mut b = new();
    let k = b.symbol("K").unwrap();
    let x = b.input("x", DType::F32, &[k, Dim::Fixed(64)]).unwrap();
    let x3 = b
        .reshape(x, "x3", &[k, Dim::Fixed(2), Dim::Fixed(32)])
        .unwrap();
    assert_eq!((x3.tensor(), x3.index()), (x, 0));
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[2, 32]).unwrap();
    b.load(
        t,
        Grid::reshaped(x3).at(0, Affine::constant(5)).from_axis(1),
    )
    .unwrap();
    let out = b.output("out", DType::F32, &dims(&[2, 32])).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let p = compile(b);
    let InstrData::Dma { hbm, .. } = p.source().instrs[0].data else {
        panic!("instruction 0 is the load")
    };
    let access = p.source().accesses[hbm.index()];
    assert_eq!(
        (access.tensor, access.reshape, access.rank),
        (0, Some(0), 3)
    );
    assert_eq!(access.axes[0].start, Affine::constant(5));
    assert_eq!(access.axes[1].grid, [1, 0, 0, 0, 0]);
    assert_eq!(access.axes[2].grid, [0, 1, 0, 0, 0]);

    // A reshape that never holds the tensor's elements is a rule violation; one whose
    // symbols differ is left to the launch.
    let mut b = new();
    let n = b.symbol("N").unwrap();
    let x = b.input("x", DType::F32, &[n, Dim::Fixed(4)]).unwrap();
    b.reshape(x, "wrong", &[n, Dim::Fixed(8)]).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[4, 4]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    let out = b.output("out", DType::F32, &dims(&[4, 4])).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let e = b.finish().unwrap_err();
    assert_eq!(
        e.to_string(),
        "the program breaks 1 rule(s); the first: `wrong` reshapes `x` [N, 4] to [N, 8], which holds a different number of elements: a reshape views the same elements under other dimensions"
    );
    let mut b = new();
    assert_eq!(
        b.reshape(x, "r", &dims(&[4])),
        Err(BuildError::Usage("unknown tensor"))
    );
    let y = b.input("y", DType::F32, &dims(&[4])).unwrap();
    assert_eq!(
        b.reshape(y, "r", &[]),
        Err(BuildError::Usage("a reshape has 1 to 6 dimensions"))
    );
}
