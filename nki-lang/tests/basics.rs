//! The language's small value types: `Affine` evaluation, arithmetic and display,
//! `TileShape` construction and `same_layout`, `Extent`/`Dim` evaluation, `DType` names and
//! sizes, and `Target` capacities. Every expectation is worked out by hand.

use nki_lang::{
    Affine, DType, Dim, Extent, MAX_LOOP_DEPTH, MAX_PIDS, MAX_VARS, Target, TileShape, VarValues,
};

/// The index variables with the loops at depths `0..values.len()` at `values` (program ids 0).
fn ivs(values: &[i64]) -> VarValues {
    let mut v = [0; MAX_VARS];
    v[MAX_PIDS..MAX_PIDS + values.len()].copy_from_slice(values);
    v
}

/// `a + b`, which must not overflow.
fn add(a: Affine, b: Affine) -> Affine {
    a.checked_add(&b).expect("no overflow")
}

/// `a · k`, which must not overflow.
fn scale(a: Affine, k: i64) -> Affine {
    a.checked_scale(k).expect("no overflow")
}

fn shape(d: &[u32]) -> TileShape {
    TileShape::new(d).expect("valid rank")
}

#[test]
fn affine_eval_sums_constant_and_scaled_loop_variables() {
    // 128*k0 + 3*k1 - 7 at k0 = 2, k1 = 5: 256 + 15 - 7 = 264.
    let a = add(
        add(Affine::loop_var(0, 128), Affine::loop_var(1, 3)),
        Affine::constant(-7),
    );
    assert_eq!(a.eval(&ivs(&[2, 5])), 264);
    // Deeper loop values do not matter when their coefficients are zero.
    assert_eq!(a.eval(&ivs(&[2, 5, 100, 100])), 264);
    assert_eq!(Affine::ZERO.eval(&ivs(&[9, 9, 9])), 0);
    // The innermost possible depth takes part too: 4 * 6 = 24.
    assert_eq!(
        Affine::loop_var(MAX_LOOP_DEPTH - 1, 4).eval(&ivs(&[0, 0, 0, 0, 0, 0, 0, 6])),
        24
    );
}

#[test]
fn affine_scale_and_is_constant() {
    // (k + 2) * 3 = 3k + 6; at k = 4 that is 18.
    let a = scale(add(Affine::loop_var(0, 1), Affine::constant(2)), 3);
    assert_eq!(a.constant, 6);
    assert_eq!(a.loop_coef(0), 3);
    assert_eq!(a.coef[MAX_PIDS], 3);
    assert_eq!(a.eval(&ivs(&[4])), 18);
    assert!(!a.is_constant());
    assert!(Affine::constant(17).is_constant());
    // A variable scaled by 0 is constant again.
    assert!(scale(Affine::loop_var(3, 5), 0).is_constant());
}

#[test]
fn affine_display() {
    let names = ["k", "m"];
    let show = |a: Affine| a.display(&names).to_string();
    assert_eq!(
        show(add(Affine::loop_var(0, 128), Affine::constant(5))),
        "128*k + 5"
    );
    assert_eq!(show(Affine::loop_var(1, -1)), "-m");
    assert_eq!(show(Affine::ZERO), "0");
    assert_eq!(show(Affine::constant(-7)), "-7");
    assert_eq!(
        show(add(Affine::loop_var(0, 1), Affine::loop_var(1, -2))),
        "k - 2*m"
    );
    assert_eq!(
        show(add(Affine::loop_var(0, -128), Affine::constant(-1))),
        "-128*k - 1"
    );
    assert_eq!(
        show(add(Affine::loop_var(0, 1), Affine::constant(-3))),
        "k - 3"
    );
    // A loop without a name prints as `?`.
    assert_eq!(show(Affine::loop_var(2, 1)), "?");
}

#[test]
fn tile_shape_construction_and_sizes() {
    assert_eq!(TileShape::new(&[]), None);
    assert_eq!(TileShape::new(&[1, 2, 3, 4, 5, 6]), None);
    let s = shape(&[128, 2, 256]);
    assert_eq!(s.rank(), 3);
    assert_eq!(s.dims(), &[128, 2, 256]);
    assert_eq!(s.partitions(), 128);
    assert_eq!(s.free(), &[2, 256]);
    assert_eq!(s.free_elems(), 512);
    assert_eq!(s.to_string(), "[128, 2, 256]");
    // A rank-1 shape has no free dimension: one element per partition.
    assert_eq!(shape(&[64]).free_elems(), 1);
    assert_eq!(shape(&[64]).free(), &[] as &[u32]);
}

#[test]
fn tile_shape_same_layout_ignores_unit_free_dims_only() {
    assert!(shape(&[128, 1, 512]).same_layout(&shape(&[128, 512])));
    assert!(shape(&[128, 512]).same_layout(&shape(&[128, 512, 1])));
    assert!(!shape(&[128, 512]).same_layout(&shape(&[128, 256, 2])));
    // Same element count, different order of free sizes.
    assert!(!shape(&[128, 2, 256]).same_layout(&shape(&[128, 256, 2])));
    // The partition dimension must match exactly.
    assert!(!shape(&[64, 512]).same_layout(&shape(&[128, 512])));
    // A shape made only of unit free dims matches any other such shape.
    assert!(shape(&[32, 1]).same_layout(&shape(&[32, 1, 1, 1])));
}

#[test]
fn extent_and_dim_eval() {
    let mut syms = [0u64; 8];
    syms[0] = 512;
    syms[2] = 300;
    assert_eq!(Extent::Fixed(7).eval(&syms), 7);
    assert_eq!(
        Extent::Sym {
            sym: 0,
            add: 0,
            div: 128,
        }
        .eval(&syms),
        4
    );
    // Integer division: 300 / 128 = 2.
    assert_eq!(
        Extent::Sym {
            sym: 2,
            add: 0,
            div: 128,
        }
        .eval(&syms),
        2
    );
    assert_eq!(
        Extent::Sym {
            sym: 2,
            add: 0,
            div: 1,
        }
        .eval(&syms),
        300
    );
    assert_eq!(Extent::Fixed(7).fixed(), Some(7));
    assert_eq!(
        Extent::Sym {
            sym: 0,
            add: 0,
            div: 1,
        }
        .fixed(),
        None
    );
    assert_eq!(Dim::Fixed(9).eval(&syms), 9);
    assert_eq!(Dim::Sym(2).eval(&syms), 300);
}

#[test]
fn dtype_names_and_sizes() {
    assert_eq!(DType::from_name("f32"), Some(DType::F32));
    assert_eq!(DType::from_name("float32"), Some(DType::F32));
    assert_eq!(DType::from_name("fp32"), Some(DType::F32));
    assert_eq!(DType::from_name("bf16"), Some(DType::Bf16));
    assert_eq!(DType::from_name("bfloat16"), Some(DType::Bf16));
    assert_eq!(DType::from_name("f16"), Some(DType::F16));
    assert_eq!(DType::from_name("float16"), Some(DType::F16));
    assert_eq!(DType::from_name("fp16"), Some(DType::F16));
    assert_eq!(DType::from_name("f64"), None);
    assert_eq!(DType::from_name("BF16"), None);
    assert_eq!(DType::from_name(""), None);

    assert_eq!(DType::F32.size(), 4);
    assert_eq!(DType::Bf16.size(), 2);
    assert_eq!(DType::F16.size(), 2);

    assert_eq!(DType::Bf16.to_string(), "bf16");
    assert_eq!(DType::F16.nki_name(), "nl.float16");
    // Every type's display name parses back to it.
    for t in DType::ALL {
        assert_eq!(DType::from_name(t.name()), Some(t));
    }
}

#[test]
fn target_capacities_and_names() {
    assert_eq!(Target::Trn1.sbuf_partition_bytes(), 196_608);
    assert_eq!(Target::Trn2.sbuf_partition_bytes(), 229_376);
    assert_eq!(Target::default(), Target::Trn1);
    assert_eq!(Target::from_name("inf2"), Some(Target::Trn1));
    assert_eq!(Target::from_name("trn2"), Some(Target::Trn2));
    assert_eq!(Target::Trn3.sbuf_partition_bytes(), 262_144);
    assert_eq!(Target::from_name("trn3"), Some(Target::Trn3));
    assert_eq!(Target::Trn3.name(), "trn3");
    assert_eq!(Target::from_name("trn4"), None);
}
