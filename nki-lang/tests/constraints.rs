//! Launch constraints derived by `ProgramBuf::finish`: `Divisible` from symbolic trip counts
//! (deduplicated), `InBounds` for accesses the compiler cannot decide (and none where the
//! divisibility constraint already implies the bound), `Constraint::holds` for chosen symbol
//! values, `check_constraints`, and `Constraint::display`. Every expected constraint and
//! every `holds` answer is worked out by hand.

mod common;

use common::{compile, dims, edit_view};
use nki_lang::builder::{Grid, ProgramBuilder};
use nki_lang::constraint::check_constraints;
use nki_lang::{
    Affine, Bounded, CompiledProgram, Constraint, DType, Dim, Extent, LoopKind, MAX_PIDS, MAX_VARS,
    Memory, Opcode, Scalar, SymbolValues, Target,
};

const K: u8 = 0;

/// The trip count `symbols[sym] / div`.
const fn sym_div(sym: u8, div: u64) -> Extent {
    Extent::Sym { sym, add: 0, div }
}

/// Symbol values with `K` (symbol 0) and optionally `M` (symbol 1).
fn syms(k: u64, m: u64) -> SymbolValues {
    let mut s = [0; 8];
    s[0] = k;
    s[1] = m;
    s
}

/// Coefficients with `d0` for the outermost loop (the index variables after the program ids).
fn coef(d0: i64) -> [i64; MAX_VARS] {
    let mut c = [0; MAX_VARS];
    c[MAX_PIDS] = d0;
    c
}

/// Index variable ranges with `l0` for the outermost loop.
fn loops(l0: Option<Extent>) -> [Extent; MAX_VARS] {
    let mut l = [Extent::Fixed(1); MAX_VARS];
    if let Some(e) = l0 {
        l[MAX_PIDS] = e;
    }
    l
}

/// Displays a constraint of a program whose only symbols are `K`, `M`, tensors `x`, `w`,
/// `out` and tile `t`.
fn show(c: &Constraint) -> String {
    c.display(&["K", "M"], &["x", "w", "out"], &[], &["t"])
        .to_string()
}

/// `x: f32[K, 512]` in, `out: f32[K, 512]` out, and for each `(divisor, offset)` a loop
/// `for i in range(K / divisor): out[divisor*i + offset + p, f] = x[same]` with a
/// [128, 512] tile.
fn row_loops(blocks: &[(u64, i64)]) -> CompiledProgram {
    let mut b = ProgramBuilder::new("rows", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let x = b.input("x", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    for (n, &(div, offset)) in blocks.iter().enumerate() {
        let i = b
            .begin_loop(LoopKind::Affine, &format!("i{n}"), sym_div(K, div))
            .unwrap();
        let row = i
            .checked_scale(div as i64)
            .and_then(|r| r.checked_add(&Affine::constant(offset)))
            .unwrap();
        b.load(t, Grid::origin(x).at(0, row)).unwrap();
        b.store(Grid::origin(out).at(0, row), t).unwrap();
        b.end_loop().unwrap();
    }
    compile(b)
}

#[test]
fn symbolic_trip_count_requires_divisibility_once() {
    // Two loops over K / 128: one constraint.
    let p = row_loops(&[(128, 0), (128, 0)]);
    assert_eq!(
        p.constraints(),
        &[Constraint::Divisible { sym: K, by: 128 }]
    );
    // A loop over K / 256 adds its own.
    let p = row_loops(&[(128, 0), (256, 0), (128, 0)]);
    assert_eq!(
        p.constraints(),
        &[
            Constraint::Divisible { sym: K, by: 128 },
            Constraint::Divisible { sym: K, by: 256 },
        ]
    );
    // The compiled program carries the same list.
    assert_eq!(p.parts().program().constraints(), p.constraints());
}

#[test]
fn block_access_over_k_div_128_needs_no_bounds_constraint() {
    // k*128 + [0, 128) over K/128 iterations tops out at K - 1 whenever K % 128 == 0.
    let p = row_loops(&[(128, 0)]);
    assert!(
        !p.constraints()
            .iter()
            .any(|c| matches!(c, Constraint::InBounds { .. })),
        "{:?}",
        p.constraints()
    );
}

#[test]
fn block_access_shifted_by_one_keeps_its_bounds_constraint() {
    // k*128 + 1 + [0, 128) reaches K: not implied, so it is checked at launch (and fails for
    // every K that passes the divisibility check).
    let p = row_loops(&[(128, 1)]);
    let bound = |tensor| Constraint::InBounds {
        target: Bounded::Tensor { tensor, axis: 0 },
        size: Dim::Sym(K),
        lo: 1,
        hi: 128,
        coef: coef(128),
        loops: loops(Some(sym_div(K, 128))),
        depth: 1,
        upper: true,
    };
    assert_eq!(
        p.constraints(),
        &[
            Constraint::Divisible { sym: K, by: 128 },
            bound(0),
            bound(1)
        ]
    );
    // K = 256: two iterations, last index 128 + 128 = 256, not below 256.
    assert!(!bound(0).holds(&syms(256, 0)));
    // K = 100: no iteration at all, so nothing is accessed.
    assert!(bound(0).holds(&syms(100, 0)));
}

#[test]
fn block_access_into_a_different_symbol_keeps_its_bounds_constraint() {
    // for k in range(K / 128): t = x[128k + p, f] with x: f32[M, 512]; w: f32[K, 512]
    // binds K.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let m = b.symbol("M").unwrap();
    let x = b.input("x", DType::F32, &[m, Dim::Fixed(512)]).unwrap();
    b.input("w", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let i = b
        .begin_loop(LoopKind::Affine, "k", sym_div(K, 128))
        .unwrap();
    b.load(t, Grid::origin(x).at(0, i.checked_scale(128).unwrap()))
        .unwrap();
    b.store(Grid::origin(out), t).unwrap();
    b.end_loop().unwrap();
    let p = compile(b);
    let bound = Constraint::InBounds {
        target: Bounded::Tensor { tensor: 0, axis: 0 },
        size: Dim::Sym(1),
        lo: 0,
        hi: 127,
        coef: coef(128),
        loops: loops(Some(sym_div(K, 128))),
        depth: 1,
        upper: true,
    };
    assert_eq!(
        p.constraints(),
        &[Constraint::Divisible { sym: K, by: 128 }, bound]
    );
    // K = 256: last index 127 + 128 = 255. M = 256 holds, M = 200 does not.
    assert!(bound.holds(&syms(256, 256)));
    assert!(!bound.holds(&syms(256, 200)));
}

/// `t = x[p, f]` (no loop) with x: f32[K, 512], read `reads` times.
fn fixed_block_of_symbolic_axis(reads: usize) -> CompiledProgram {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let x = b.input("x", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    for _ in 0..reads {
        b.load(t, Grid::origin(x)).unwrap();
    }
    b.store(Grid::origin(out), t).unwrap();
    compile(b)
}

const X_ROWS_0_127: Constraint = Constraint::InBounds {
    target: Bounded::Tensor { tensor: 0, axis: 0 },
    size: Dim::Sym(K),
    lo: 0,
    hi: 127,
    coef: [0; MAX_VARS],
    loops: [Extent::Fixed(1); MAX_VARS],
    depth: 0,
    upper: true,
};

#[test]
fn fixed_block_of_a_symbolic_axis_adds_a_bounds_constraint() {
    let p = fixed_block_of_symbolic_axis(1);
    assert_eq!(p.constraints(), &[X_ROWS_0_127]);
    let c = &p.constraints()[0];
    assert!(c.holds(&syms(128, 0)));
    assert!(c.holds(&syms(256, 0)));
    assert!(!c.holds(&syms(100, 0)));
    // 127 is the largest row: K = 127 is one short.
    assert!(!c.holds(&syms(127, 0)));
}

#[test]
fn identical_bounds_constraints_are_kept_once() {
    let p = fixed_block_of_symbolic_axis(3);
    assert_eq!(p.constraints(), &[X_ROWS_0_127]);
}

#[test]
fn trip_count_k_with_coefficient_2_keeps_its_bound() {
    // for i in range(K): t = x[2i + p, f] with a [1, 512] tile and x: f32[K, 512].
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let x = b.input("x", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &dims(&[1, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[1, 512]).unwrap();
    let i = b
        .begin_loop(LoopKind::Sequential, "i", sym_div(K, 1))
        .unwrap();
    b.load(t, Grid::origin(x).at(0, i.checked_scale(2).unwrap()))
        .unwrap();
    b.store(Grid::origin(out), t).unwrap();
    b.end_loop().unwrap();
    let p = compile(b);
    let bound = Constraint::InBounds {
        target: Bounded::Tensor { tensor: 0, axis: 0 },
        size: Dim::Sym(K),
        lo: 0,
        hi: 0,
        coef: coef(2),
        loops: loops(Some(sym_div(K, 1))),
        depth: 1,
        upper: true,
    };
    // Division by 1 needs no divisibility constraint.
    assert_eq!(p.constraints(), &[bound]);
    // K = 1: only row 0. K = 2: row 2 of 2. K = 5: row 8 of 5. K = 0: no iteration.
    assert!(bound.holds(&syms(1, 0)));
    assert!(!bound.holds(&syms(2, 0)));
    assert!(!bound.holds(&syms(5, 0)));
    assert!(bound.holds(&syms(0, 0)));
    assert_eq!(show(&bound), "x axis 0: index in [0, 0] + 2*(K - 1) < K");
}

#[test]
fn trip_count_k_with_coefficient_1_is_implied() {
    // for i in range(K): t = x[i + p, f] with a [1, 512] tile reaches row K - 1 at most.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let x = b.input("x", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &dims(&[1, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[1, 512]).unwrap();
    let i = b
        .begin_loop(LoopKind::Sequential, "i", sym_div(K, 1))
        .unwrap();
    b.load(t, Grid::origin(x).at(0, i)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    b.end_loop().unwrap();
    assert_eq!(compile(b).constraints(), &[]);
}

#[test]
fn tile_view_indexed_by_a_symbolic_loop_is_bounded_at_launch() {
    // for k in range(K): memset t[p, k + f] with a [128, 512] view of a [128, 1024] tile.
    // Instructions: 0 loop, 1 memset t, 2 end, 3 memset r, 4 store out <- r.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let k = b.symbol("K").unwrap();
    b.input("x", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 1024]).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.begin_loop(LoopKind::Sequential, "k", sym_div(K, 1))
        .unwrap();
    b.memset(t, Scalar::float(0.0)).unwrap();
    b.end_loop().unwrap();
    b.memset(r, Scalar::float(0.0)).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    let mut src = compile(b).source().clone();
    edit_view(&mut src, 1, Opcode::Memset, common::slot::DST, |dst| {
        dst.shape = nki_lang::TileShape::new(&[128, 512]).unwrap();
        dst.offset = Affine::loop_var(0, 1);
    });
    let p = src.finish().expect("valid");
    let bound = Constraint::InBounds {
        target: Bounded::TileFree { tile: 0 },
        size: Dim::Fixed(1024),
        lo: 0,
        hi: 511,
        coef: coef(1),
        loops: loops(Some(sym_div(K, 1))),
        depth: 1,
        upper: true,
    };
    assert_eq!(p.constraints(), &[bound]);
    // Last element 511 + (K - 1): 1023 for K = 513, 1024 for K = 514.
    assert!(bound.holds(&syms(513, 0)));
    assert!(!bound.holds(&syms(514, 0)));
    assert_eq!(
        show(&bound),
        "t free elements: index in [0, 511] + 1*(K - 1) < 1024"
    );
}

#[test]
fn check_constraints_returns_the_first_failing_one() {
    let cs = [
        Constraint::Divisible { sym: K, by: 128 },
        Constraint::InBounds {
            target: Bounded::Tensor { tensor: 1, axis: 0 },
            size: Dim::Sym(1),
            lo: 0,
            hi: 127,
            coef: [0; MAX_VARS],
            loops: [Extent::Fixed(1); MAX_VARS],
            depth: 0,
            upper: true,
        },
    ];
    assert_eq!(check_constraints(&cs, &syms(256, 128)), Ok(()));
    // Both fail: the first is reported.
    let e = check_constraints(&cs, &syms(100, 100)).unwrap_err();
    assert!(std::ptr::eq(e, &cs[0]));
    // Only the second fails.
    let e = check_constraints(&cs, &syms(256, 100)).unwrap_err();
    assert!(std::ptr::eq(e, &cs[1]));
    assert_eq!(check_constraints(&[], &syms(0, 0)), Ok(()));
}

#[test]
fn divisible_holds_exactly_for_multiples() {
    let c = Constraint::Divisible { sym: K, by: 128 };
    assert!(c.holds(&syms(0, 0)));
    assert!(c.holds(&syms(384, 0)));
    assert!(!c.holds(&syms(100, 0)));
    assert!(!c.holds(&syms(129, 0)));
}

#[test]
fn constraint_display() {
    assert_eq!(
        show(&Constraint::Divisible { sym: K, by: 128 }),
        "K % 128 == 0"
    );
    assert_eq!(
        show(&Constraint::Divisible { sym: 1, by: 64 }),
        "M % 64 == 0"
    );
    assert_eq!(show(&X_ROWS_0_127), "x axis 0: index in [0, 127] < K");
    let shifted = Constraint::InBounds {
        target: Bounded::Tensor { tensor: 2, axis: 1 },
        size: Dim::Fixed(300),
        lo: 1,
        hi: 128,
        coef: coef(128),
        loops: loops(Some(sym_div(1, 128))),
        depth: 1,
        upper: true,
    };
    assert_eq!(
        show(&shifted),
        "out axis 1: index in [1, 128] + 128*(M / 128 - 1) < 300"
    );
    // A fixed trip count prints as its number.
    let fixed = Constraint::InBounds {
        target: Bounded::Tensor { tensor: 2, axis: 1 },
        size: Dim::Fixed(300),
        lo: 1,
        hi: 128,
        coef: coef(128),
        loops: loops(Some(Extent::Fixed(4))),
        depth: 1,
        upper: true,
    };
    assert_eq!(
        show(&fixed),
        "out axis 1: index in [1, 128] + 128*(4 - 1) < 300"
    );
}

#[test]
fn a_program_id_in_an_index_is_bounded_by_the_grid_size() {
    // t = x[pid0 * 128 + p, f] with x: f32[K, 512]: the program declares num_programs(0),
    // and the index must stay below K for every program id of the grid.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let x = b.input("x", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(t, Grid::origin(x).at(0, Affine::program_id(0, 128)))
        .unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let p = compile(b);
    let parts = p.parts();
    let program = parts.program();
    assert_eq!(program.symbols(), &["K", "num_programs(0)"]);
    let mut c = [0; MAX_VARS];
    c[0] = 128;
    let mut l = [Extent::Fixed(1); MAX_VARS];
    l[0] = sym_div(1, 1);
    let bound = Constraint::InBounds {
        target: Bounded::Tensor { tensor: 0, axis: 0 },
        size: Dim::Sym(K),
        lo: 0,
        hi: 127,
        coef: c,
        loops: l,
        depth: 0,
        upper: true,
    };
    assert_eq!(p.constraints(), &[bound]);
    // K = 512 takes a grid of 4 along axis 0, not 5.
    assert!(bound.holds(&syms(512, 4)));
    assert!(!bound.holds(&syms(512, 5)));
    assert_eq!(
        bound
            .display(program.symbols(), &["x", "out"], &[], &["t"])
            .to_string(),
        "x axis 0: index in [0, 127] + 128*(num_programs(0) - 1) < K"
    );
}
