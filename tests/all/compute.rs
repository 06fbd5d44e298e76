//! NKI's compute vocabulary end to end: `#[kernel]` kernels exercising each operation family,
//! each output compared with an independent reference (plain f32/f64 loops written here from the
//! documented definitions), and result dtypes checked in the compiled program.
//!
//! Elementwise functions and Rust operators on tiles, broadcasting and type promotion are
//! here; the ISA calls, reductions and composites are in `tests/all/isa.rs`, masks and accumulation
//! in `tests/all/masks.rs`, dtypes and bit operations in `tests/all/dtypes.rs`.

use crate::common;

use common::*;
use nki::Bool;
use nki::ndarray::{Array2, Ix2, Ix3, s};
use nki::prelude::*;
use nki::program::DType;

const P: usize = 128;
const F: usize = 512;

/// Two f32 inputs with the edge cases the ALU definitions name: equal operands, ±0 pairs,
/// zero divisors, negative operands for the remainders.
fn pair() -> (Array2<f32>, Array2<f32>) {
    let mut a = rand_f32(Ix2(P, F), 1, -40.0, 40.0);
    let mut b = rand_f32(Ix2(P, F), 2, -40.0, 40.0);
    for j in 0..F {
        match j % 32 {
            0 => b[[0, j]] = a[[0, j]],
            1 => {
                a[[0, j]] = 0.0;
                b[[0, j]] = -0.0;
            }
            2 => {
                a[[0, j]] = -0.0;
                b[[0, j]] = 0.0;
            }
            3 => b[[0, j]] = 0.0,
            4 => {
                a[[0, j]] = -7.0;
                b[[0, j]] = 3.0;
            }
            5 => {
                a[[0, j]] = 7.0;
                b[[0, j]] = -3.0;
            }
            6 => {
                a[[0, j]] = -6.0;
                b[[0, j]] = 3.0;
            }
            _ => {}
        }
    }
    (a, b)
}

// ---------------------------------------------------------------------------------------------
// Arithmetic: Rust operators and nl functions, tile–tile.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn arith_tt(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 12, 128, 512> {
    let out = ndarray([12, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    store(out[[0, 0..128, 0..512]], x + y);
    store(out[[1, 0..128, 0..512]], x - y);
    store(out[[2, 0..128, 0..512]], x * y);
    store(out[[3, 0..128, 0..512]], x / y);
    store(out[[4, 0..128, 0..512]], x % y);
    store(out[[5, 0..128, 0..512]], -x);
    store(out[[6, 0..128, 0..512]], maximum(x, y));
    store(out[[7, 0..128, 0..512]], minimum(x, y));
    store(out[[8, 0..128, 0..512]], fmod(x, y));
    store(out[[9, 0..128, 0..512]], add(x, y));
    store(out[[10, 0..128, 0..512]], subtract(x = x, y = y));
    store(out[[11, 0..128, 0..512]], negative(x));
    out
}

#[test]
fn arithmetic_tile_tile() {
    let (a, b) = pair();
    let mut core = NeuronCore::default();
    let out = arith_tt::host(&mut core, a.view(), b.view()).unwrap();
    type Ref = fn(f32, f32) -> f32;
    let refs: [(&str, Ref); 12] = [
        ("x + y", |x, y| (x as f64 + y as f64) as f32),
        ("x - y", |x, y| (x as f64 - y as f64) as f32),
        ("x * y", |x, y| (x as f64 * y as f64) as f32),
        ("x / y", |x, y| (x as f64 / y as f64) as f32),
        ("x % y", floored_mod),
        ("-x", |x, _| -x),
        ("maximum", fmax),
        ("minimum", fmin),
        ("fmod", |x, y| ((x as f64) % (y as f64)) as f32),
        ("add", |x, y| (x as f64 + y as f64) as f32),
        ("subtract", |x, y| (x as f64 - y as f64) as f32),
        ("negative", |x, _| -x),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        let want = a.iter().zip(&b).map(|(&x, &y)| f(x, y));
        assert_bits(name, out.slice(s![k, .., ..]).iter(), want);
    }
    // Spot checks of the documented edge cases.
    assert_eq!(out[[4, 0, 4]], 2.0, "-7 mod 3");
    assert_eq!(out[[4, 0, 5]], -2.0, "7 mod -3");
    assert_eq!(out[[8, 0, 4]], -1.0, "fmod(-7, 3)");
    assert_eq!(out[[6, 0, 1]].to_bits(), 0.0f32.to_bits(), "maximum(0, -0)");
    assert_eq!(
        out[[7, 0, 2]].to_bits(),
        (-0.0f32).to_bits(),
        "minimum(-0, 0)"
    );
    assert_eq!(out[[3, 0, 3]].abs(), f32::INFINITY, "x / 0");
    assert_eq!(
        out[[4, 0, 3]].to_bits(),
        0x7fc0_0000,
        "x % 0 is the canonical NaN"
    );
}

/// `power` (a placeholder definition for now: compared within 1e-6).
#[kernel]
fn power_tt(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 2, 128, 512> {
    let out = ndarray([2, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    store(out[[0, 0..128, 0..512]], power(x, y));
    store(out[[1, 0..128, 0..512]], power(x, 2.0));
    out
}

#[test]
fn power_tile_tile_and_scalar() {
    let a = rand_f32(Ix2(P, F), 3, 0.1, 4.0);
    let b = rand_f32(Ix2(P, F), 4, -3.0, 3.0);
    let out = power_tt::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    let want = a.iter().zip(&b).map(|(&x, &y)| (x as f64).powf(y as f64));
    assert_close(
        "power(x, y)",
        out.slice(s![0, .., ..]).iter(),
        want,
        1e-6,
        0.0,
    );
    let want = a.iter().map(|&x| (x as f64).powi(2));
    assert_close(
        "power(x, 2)",
        out.slice(s![1, .., ..]).iter(),
        want,
        1e-6,
        0.0,
    );
    // NKI runs power on GpSimd.
    assert!(has_instr(
        power_tt::KERNEL.program(),
        "GpSimd",
        "tensor_tensor"
    ));
}

// ---------------------------------------------------------------------------------------------
// Tile–scalar and scalar–tile.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn arith_ts(a: Hbm<f32, 128, 512>) -> Hbm<f32, 10, 128, 512> {
    let out = ndarray([10, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    store(out[[0, 0..128, 0..512]], x + 2.5);
    store(out[[1, 0..128, 0..512]], 2.5 - x);
    store(out[[2, 0..128, 0..512]], x * -3.0);
    store(out[[3, 0..128, 0..512]], 1.0 / x);
    store(out[[4, 0..128, 0..512]], x / 4.0);
    store(out[[5, 0..128, 0..512]], x % 3.0);
    store(out[[6, 0..128, 0..512]], 7.0 % x);
    store(out[[7, 0..128, 0..512]], x - 2);
    store(out[[8, 0..128, 0..512]], 3 * x);
    store(out[[9, 0..128, 0..512]], maximum(0.0, x));
    out
}

#[test]
fn arithmetic_tile_scalar_and_scalar_tile() {
    let (a, _) = pair();
    let out = arith_ts::host(&mut NeuronCore::default(), a.view()).unwrap();
    type Ref = fn(f32) -> f32;
    let refs: [(&str, Ref); 10] = [
        ("x + 2.5", |x| (x as f64 + 2.5) as f32),
        ("2.5 - x", |x| (2.5 - x as f64) as f32),
        ("x * -3", |x| (x as f64 * -3.0) as f32),
        ("1 / x", |x| (1.0 / x as f64) as f32),
        ("x / 4", |x| (x as f64 / 4.0) as f32),
        ("x % 3", |x| floored_mod(x, 3.0)),
        ("7 % x", |x| floored_mod(7.0, x)),
        ("x - 2", |x| (x as f64 - 2.0) as f32),
        ("3 * x", |x| (3.0 * x as f64) as f32),
        ("maximum(0, x)", |x| fmax(0.0, x)),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        assert_bits(
            name,
            out.slice(s![k, .., ..]).iter(),
            a.iter().map(|&x| f(x)),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Broadcasting: [P, 1] columns, free dimensions, one partition.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn column_ops(a: Hbm<f32, 128, 512>, c: Hbm<f32, 128, 1>) -> Hbm<f32, 6, 128, 512> {
    let out = ndarray([6, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let col = load(c[..]);
    store(out[[0, 0..128, 0..512]], x + col);
    store(out[[1, 0..128, 0..512]], col - x);
    store(out[[2, 0..128, 0..512]], x * col);
    store(out[[3, 0..128, 0..512]], col / x);
    store(out[[4, 0..128, 0..512]], maximum(col, x));
    store(out[[5, 0..128, 0..512]], subtract(x, col));
    out
}

#[test]
fn column_broadcast() {
    let (a, _) = pair();
    let c = rand_f32(Ix2(P, 1), 5, -10.0, 10.0);
    let out = column_ops::host(&mut NeuronCore::default(), a.view(), c.view()).unwrap();
    type Ref = fn(f32, f32) -> f32;
    let refs: [(&str, Ref); 6] = [
        ("x + col", |x, c| (x as f64 + c as f64) as f32),
        ("col - x", |x, c| (c as f64 - x as f64) as f32),
        ("x * col", |x, c| (x as f64 * c as f64) as f32),
        ("col / x", |x, c| (c as f64 / x as f64) as f32),
        ("maximum(col, x)", |x, c| fmax(c, x)),
        ("subtract(x, col)", |x, c| (x as f64 - c as f64) as f32),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        let want = a.indexed_iter().map(|((p, _), &x)| f(x, c[[p, 0]]));
        assert_bits(name, out.slice(s![k, .., ..]).iter(), want);
    }
    // A column operand is `tensor_scalar`, not `tensor_tensor`.
    let prog = column_ops::KERNEL.program();
    assert!(has_instr(prog, "Vector", "tensor_scalar"), "{prog}");
    assert!(!has_instr(prog, "Vector", "tensor_tensor"), "{prog}");
}

#[kernel]
fn free_broadcast(
    a: Hbm<f32, 128, 4, 64>,
    b: Hbm<f32, 128, 1, 64>,
    c: Hbm<f32, 128, 64>,
) -> (
    Hbm<f32, 128, 4, 64>,
    Hbm<f32, 128, 4, 64>,
    Hbm<f32, 128, 4, 64>,
) {
    let o1 = ndarray([128, 4, 64], f32, SharedHbm);
    let o2 = ndarray([128, 4, 64], f32, SharedHbm);
    let o3 = ndarray([128, 4, 64], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let z = load(c[..]);
    store(o1[..], x + y);
    store(o2[..], y * x);
    store(o3[..], x - z);
    (o1, o2, o3)
}

#[test]
fn free_dimension_broadcast() {
    let a = rand_f32(Ix3(P, 4, 64), 6, -10.0, 10.0);
    let b = rand_f32(Ix3(P, 1, 64), 7, -10.0, 10.0);
    let c = rand_f32(Ix2(P, 64), 8, -10.0, 10.0);
    let (o1, o2, o3) =
        free_broadcast::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    let want1 = a.indexed_iter().map(|((p, _, f), &x)| x + b[[p, 0, f]]);
    assert_bits("[P,4,F] + [P,1,F]", o1.iter(), want1);
    let want2 = a.indexed_iter().map(|((p, _, f), &x)| b[[p, 0, f]] * x);
    assert_bits("[P,1,F] * [P,4,F]", o2.iter(), want2);
    let want3 = a.indexed_iter().map(|((p, _, f), &x)| x - c[[p, f]]);
    assert_bits("[P,4,F] - [P,F]", o3.iter(), want3);
}

/// A source broadcast over a middle axis (RoPE's `cos` over the heads): its runs of 100 are
/// gathered into the chunks of the other operands' one run of 2,100 per partition, across the
/// 1,024-element chunk boundaries; in f32 and through bf16 lanes.
#[kernel]
fn middle_axis_broadcast(
    a: Hbm<f32, 128, 7, 3, 100>,
    b: Hbm<f32, 128, 7, 1, 100>,
    c: Hbm<bf16, 128, 7, 3, 100>,
    d: Hbm<bf16, 128, 7, 1, 100>,
) -> (Hbm<f32, 128, 7, 3, 100>, Hbm<bf16, 128, 7, 3, 100>) {
    let o1 = ndarray([128, 7, 3, 100], f32, SharedHbm);
    let o2 = ndarray([128, 7, 3, 100], bf16, SharedHbm);
    let (x, y) = (load(a[..]), load(b[..]));
    let (z, w) = (load(c[..]), load(d[..]));
    store(o1[..], y - x);
    store(o2[..], z * w);
    (o1, o2)
}

#[test]
fn broadcast_over_a_middle_axis_matches_element_by_element() {
    use nki::ndarray::Ix4;
    let a = rand_f32(Ix4(P, 7, 3, 100), 40, -10.0, 10.0);
    let b = rand_f32(Ix4(P, 7, 1, 100), 41, -10.0, 10.0);
    let c = rand_f32(Ix4(P, 7, 3, 100), 42, -10.0, 10.0).mapv(bf16::from_f32);
    let d = rand_f32(Ix4(P, 7, 1, 100), 43, -10.0, 10.0).mapv(bf16::from_f32);
    let (o1, o2) = middle_axis_broadcast::host(
        &mut NeuronCore::default(),
        a.view(),
        b.view(),
        c.view(),
        d.view(),
    )
    .unwrap();
    let want1 = a
        .indexed_iter()
        .map(|((p, i, _, f), &x)| b[[p, i, 0, f]] - x);
    assert_bits("[P,7,1,100] - [P,7,3,100]", o1.iter(), want1);
    let got: Vec<u16> = o2.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u16> = c
        .indexed_iter()
        .map(|((p, i, _, f), z)| bf16::from_f32(z.to_f32() * d[[p, i, 0, f]].to_f32()).to_bits())
        .collect();
    assert_eq!(got, want, "bf16 [P,7,3,100] * [P,7,1,100]");
}

#[kernel]
fn partition_broadcast(a: Hbm<f32, 128, 512>, r: Hbm<f32, 1, 512>) -> Hbm<f32, 2, 128, 512> {
    let out = ndarray([2, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let row = load(r[..]);
    store(out[[0, 0..128, 0..512]], x + row);
    store(out[[1, 0..128, 0..512]], row * x);
    out
}

#[test]
fn one_partition_broadcast_through_tensor_engine() {
    let (a, _) = pair();
    let r = rand_f32(Ix2(1, F), 9, -10.0, 10.0);
    let out = partition_broadcast::host(&mut NeuronCore::default(), a.view(), r.view()).unwrap();
    let want = a.indexed_iter().map(|((_, f), &x)| x + r[[0, f]]);
    assert_bits("x + row", out.slice(s![0, .., ..]).iter(), want);
    let want = a.indexed_iter().map(|((_, f), &x)| r[[0, f]] * x);
    assert_bits("row * x", out.slice(s![1, .., ..]).iter(), want);
    assert!(has_instr(
        partition_broadcast::KERNEL.program(),
        "Tensor",
        "nc_matmul"
    ));
}

// ---------------------------------------------------------------------------------------------
// Comparisons and logical operations.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn compare(
    a: Hbm<f32, 128, 512>,
    b: Hbm<f32, 128, 512>,
    c: Hbm<f32, 128, 1>,
) -> Hbm<bool, 14, 128, 512> {
    let out = ndarray([14, 128, 512], bool, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let col = load(c[..]);
    let lt = x < y;
    store(out[[0, 0..128, 0..512]], lt);
    store(out[[1, 0..128, 0..512]], x <= y);
    store(out[[2, 0..128, 0..512]], x > y);
    store(out[[3, 0..128, 0..512]], x >= y);
    store(out[[4, 0..128, 0..512]], x == y);
    store(out[[5, 0..128, 0..512]], x != y);
    store(out[[6, 0..128, 0..512]], x < 0.5);
    store(out[[7, 0..128, 0..512]], 0.5 < x);
    store(out[[8, 0..128, 0..512]], x >= col);
    store(out[[9, 0..128, 0..512]], greater(x, y));
    store(out[[10, 0..128, 0..512]], less_equal(x, 1.0));
    store(out[[11, 0..128, 0..512]], equal(x, y));
    store(out[[12, 0..128, 0..512]], not_equal(x, 0.0));
    store(out[[13, 0..128, 0..512]], greater_equal(col, x));
    out
}

#[test]
fn comparisons_give_bool_tiles() {
    let (mut a, b) = pair();
    a[[1, 0]] = f32::NAN;
    let c = rand_f32(Ix2(P, 1), 10, -10.0, 10.0);
    let out = compare::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    type Ref = fn(f32, f32, f32) -> bool;
    let refs: [(&str, Ref); 14] = [
        ("x < y", |x, y, _| x < y),
        ("x <= y", |x, y, _| x <= y),
        ("x > y", |x, y, _| x > y),
        ("x >= y", |x, y, _| x >= y),
        ("x == y", |x, y, _| x == y),
        ("x != y", |x, y, _| x != y),
        ("x < 0.5", |x, _, _| x < 0.5),
        ("0.5 < x", |x, _, _| 0.5 < x),
        ("x >= col", |x, _, c| x >= c),
        ("greater", |x, y, _| x > y),
        ("less_equal", |x, _, _| x <= 1.0),
        ("equal", |x, y, _| x == y),
        ("not_equal", |x, _, _| x != 0.0),
        ("greater_equal(col, x)", |x, _, c| c >= x),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        for ((p, j), &x) in a.indexed_iter() {
            let want = Bool::from(f(x, b[[p, j]], c[[p, 0]]));
            assert_eq!(
                out[[k, p, j]],
                want,
                "{name} at ({p}, {j}): x = {x}, y = {}",
                b[[p, j]]
            );
        }
    }
    assert_eq!(out[[5, 1, 0]], Bool::from(true), "NaN != y");
    assert_eq!(out[[4, 1, 0]], Bool::from(false), "NaN == y");
    let prog = compare::KERNEL.program();
    assert_eq!(
        tile(prog, "lt").0,
        DType::Bool,
        "a comparison gives a bool tile"
    );
}

#[kernel]
fn logical(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<bool, 8, 128, 512> {
    let out = ndarray([8, 128, 512], bool, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let p = x < y;
    let q = x > 0.0;
    let both = p & q;
    store(out[[0, 0..128, 0..512]], both);
    store(out[[1, 0..128, 0..512]], p | q);
    store(out[[2, 0..128, 0..512]], p ^ q);
    let np = !p;
    store(out[[3, 0..128, 0..512]], np);
    store(out[[4, 0..128, 0..512]], logical_and(p, q));
    store(out[[5, 0..128, 0..512]], logical_or(p, q));
    store(out[[6, 0..128, 0..512]], logical_xor(p, q));
    store(out[[7, 0..128, 0..512]], logical_not(q));
    out
}

#[test]
fn logical_operations_on_bool_tiles() {
    let (a, b) = pair();
    let out = logical::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    type Ref = fn(bool, bool) -> bool;
    let refs: [(&str, Ref); 8] = [
        ("p & q", |p, q| p && q),
        ("p | q", |p, q| p || q),
        ("p ^ q", |p, q| p != q),
        ("!p", |p, _| !p),
        ("logical_and", |p, q| p && q),
        ("logical_or", |p, q| p || q),
        ("logical_xor", |p, q| p != q),
        ("logical_not(q)", |_, q| !q),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        for ((i, j), &x) in a.indexed_iter() {
            let (p, q) = (x < b[[i, j]], x > 0.0);
            assert_eq!(out[[k, i, j]], Bool::from(f(p, q)), "{name} at ({i}, {j})");
        }
    }
    let prog = logical::KERNEL.program();
    assert_eq!(tile(prog, "both").0, DType::Bool);
    assert_eq!(tile(prog, "np").0, DType::Bool);
}

// ---------------------------------------------------------------------------------------------
// `dtype =` and NKI's type promotion.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn promotion(
    h: Hbm<bf16, 128, 64>,
    g: Hbm<f16, 128, 64>,
    i: Hbm<i8, 128, 64>,
    u: Hbm<u8, 128, 64>,
) -> (
    Hbm<f32, 128, 64>,
    Hbm<i32, 128, 64>,
    Hbm<bf16, 128, 64>,
    Hbm<i16, 128, 64>,
    Hbm<f32, 128, 64>,
    Hbm<f16, 128, 64>,
) {
    let o_s = ndarray([128, 64], f32, SharedHbm);
    let o_n = ndarray([128, 64], i32, SharedHbm);
    let o_d = ndarray([128, 64], bf16, SharedHbm);
    let o_m = ndarray([128, 64], i16, SharedHbm);
    let o_w = ndarray([128, 64], f32, SharedHbm);
    let o_e = ndarray([128, 64], f16, SharedHbm);
    let hb = load(h[..]);
    let gf = load(g[..]);
    let ib = load(i[..]);
    let ub = load(u[..]);
    let s = hb + gf;
    let n = ib + 2;
    let d = add(hb, gf, dtype = bf16);
    let m = ib + ub;
    let w = hb * 2.0;
    let e = multiply(gf, 3.0, dtype = f16);
    store(o_s[..], s);
    store(o_n[..], n);
    store(o_d[..], d);
    store(o_m[..], m);
    store(o_w[..], w);
    store(o_e[..], e);
    (o_s, o_n, o_d, o_m, o_w, o_e)
}

#[test]
fn dtype_argument_and_type_promotion() {
    let hv = rand_f32(Ix2(P, 64), 11, -100.0, 100.0);
    let gv = rand_f32(Ix2(P, 64), 12, -100.0, 100.0);
    let h = hv.mapv(bf16::from_f32);
    let g = gv.mapv(f16::from_f32);
    let i = rand_int(Ix2(P, 64), 13, -128, 127).mapv(|v| v as i8);
    let u = rand_int(Ix2(P, 64), 14, 0, 255).mapv(|v| v as u8);
    let prog = promotion::KERNEL.program();
    assert_eq!(tile(prog, "s").0, DType::F32, "bf16 + f16");
    assert_eq!(tile(prog, "n").0, DType::I32, "int8 tile + 2");
    assert_eq!(tile(prog, "d").0, DType::Bf16, "dtype = bf16");
    assert_eq!(tile(prog, "m").0, DType::I16, "int8 + uint8");
    assert_eq!(tile(prog, "w").0, DType::F32, "bf16 * 2.0");
    assert_eq!(tile(prog, "e").0, DType::F16, "dtype = f16");
    let (s_, n, d, m, w, e) = promotion::host(
        &mut NeuronCore::default(),
        h.view(),
        g.view(),
        i.view(),
        u.view(),
    )
    .unwrap();
    let sum = |p: usize, j: usize| (h[[p, j]].to_f64() + g[[p, j]].to_f64()) as f32;
    assert_bits(
        "bf16 + f16",
        s_.iter(),
        h.indexed_iter().map(|((p, j), _)| sum(p, j)),
    );
    let want_d: Vec<bf16> = h
        .indexed_iter()
        .map(|((p, j), _)| bf16::from_f32(sum(p, j)))
        .collect();
    assert_eq!(
        d.iter().copied().collect::<Vec<_>>(),
        want_d,
        "add(.., dtype = bf16)"
    );
    assert_eq!(n, i.mapv(|v| v as i32 + 2), "int8 + 2");
    let want_m = i
        .indexed_iter()
        .map(|((p, j), &v)| v as i16 + u[[p, j]] as i16);
    assert_eq!(
        m.iter().copied().collect::<Vec<_>>(),
        want_m.collect::<Vec<_>>(),
        "int8 + uint8"
    );
    assert_bits("bf16 * 2.0", w.iter(), h.iter().map(|v| v.to_f32() * 2.0));
    let want_e: Vec<f16> = g.iter().map(|v| f16::from_f32(v.to_f32() * 3.0)).collect();
    assert_eq!(
        e.iter().copied().collect::<Vec<_>>(),
        want_e,
        "multiply(.., dtype = f16)"
    );
}

/// The promotion table, read from the program (compiled only).
#[kernel]
fn promotion_table(
    e4: Hbm<float8_e4m3, 128, 8>,
    e5: Hbm<float8_e5m2, 128, 8>,
    tf: Hbm<tfloat32, 128, 8>,
    h: Hbm<bf16, 128, 8>,
    i32_: Hbm<i32, 128, 8>,
    u32_: Hbm<u32, 128, 8>,
    i8_: Hbm<i8, 128, 8>,
    u16_: Hbm<u16, 128, 8>,
    u8_: Hbm<u8, 128, 8>,
    b: Hbm<bool, 128, 8>,
) -> Hbm<f32, 128, 8> {
    let out = ndarray([128, 8], f32, SharedHbm);
    let te4 = load(e4[..]);
    let te5 = load(e5[..]);
    let ttf = load(tf[..]);
    let th = load(h[..]);
    let ti32 = load(i32_[..]);
    let tu32 = load(u32_[..]);
    let ti8 = load(i8_[..]);
    let tu16 = load(u16_[..]);
    let tu8 = load(u8_[..]);
    let tb = load(b[..]);
    let fp8s = te4 + te5;
    let tf_bf = ttf * th;
    let tf_e4 = ttf - te4;
    let i_u32 = ti32 + tu32;
    let i8_u16 = ti8 + tu16;
    let u8_u16 = tu8 + tu16;
    let b_i8 = tb + ti8;
    let b_b = tb * tb;
    let f_i = th + ti32;
    let u8_imm = tu8 * 3;
    let h_int = th * 3;
    let cmp = ti8 < tu8;
    store(out[..], fp8s);
    store(out[..], tf_bf);
    store(out[..], tf_e4);
    store(out[..], i_u32);
    store(out[..], i8_u16);
    store(out[..], u8_u16);
    store(out[..], b_i8);
    store(out[..], b_b);
    store(out[..], f_i);
    store(out[..], u8_imm);
    store(out[..], h_int);
    store(out[..], cmp);
    out
}

#[test]
fn promotion_rules() {
    let p = promotion_table::KERNEL.program();
    let cases = [
        ("fp8s", DType::Bf16),
        ("tf_bf", DType::Tf32),
        ("tf_e4", DType::Tf32),
        ("i_u32", DType::F32),
        ("i8_u16", DType::I32),
        ("u8_u16", DType::U16),
        ("b_i8", DType::I8),
        ("b_b", DType::Bool),
        ("f_i", DType::Bf16),
        ("u8_imm", DType::I32),
        ("h_int", DType::Bf16),
        ("cmp", DType::Bool),
    ];
    for (name, want) in cases {
        assert_eq!(tile(p, name).0, want, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// Other tile shapes: fewer partitions, free sizes that are not multiples of 128, free sizes
// above one streamed chunk (1024 elements), views at a partition offset, PSUM operands.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn small_tiles(a: Hbm<f32, 64, 300>, b: Hbm<f32, 64, 300>) -> (Hbm<f32, 64, 300>, Hbm<f32, 64, 1>) {
    let o = ndarray([64, 300], f32, SharedHbm);
    let o_max = ndarray([64, 1], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    store(o[..], x * y - 1.5);
    store(o_max[..], max(x / y, axis = 1));
    (o, o_max)
}

#[test]
fn sixty_four_partitions_and_an_odd_free_size() {
    let a = rand_f32(Ix2(64, 300), 20, -5.0, 5.0);
    let b = rand_f32(Ix2(64, 300), 21, 0.5, 5.0);
    let (o, m) = small_tiles::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    assert_bits(
        "x * y - 1.5",
        o.iter(),
        a.iter().zip(&b).map(|(&x, &y)| x * y - 1.5),
    );
    let want = (0..64).map(|p| {
        let r = a
            .row(p)
            .iter()
            .zip(b.row(p))
            .map(|(&x, &y)| x / y)
            .collect::<Vec<_>>();
        fold16(r, f32::NEG_INFINITY, fmax)
    });
    assert_bits("max(x / y)", m.iter(), want);
}

#[kernel]
fn long_rows(
    a: Hbm<f32, 128, 3000>,
    b: Hbm<f32, 128, 3000>,
) -> (
    Hbm<f32, 128, 3000>,
    Hbm<f32, 128, 3000>,
    Hbm<f32, 128, 1>,
    Hbm<f32, 128, 1>,
) {
    let o = ndarray([128, 3000], f32, SharedHbm);
    let o_scan = ndarray([128, 3000], f32, SharedHbm);
    let o_sum = ndarray([128, 1], f32, SharedHbm);
    let o_red = ndarray([128, 1], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let r = ndarray([128, 1], f32, Sbuf);
    let z = tensor_scalar_reduce(
        data = x,
        op0 = add,
        operand0 = y[[0..128, 0..1]],
        reduce_op = add,
        reduce_res = r,
    );
    store(o[..], z);
    store(
        o_scan[..],
        tensor_tensor_scan(
            data0 = y,
            data1 = x,
            initial = 0.0,
            op0 = multiply,
            op1 = add,
        ),
    );
    store(o_sum[..], sum(x, axis = 1));
    store(o_red[..], r);
    (o, o_scan, o_sum, o_red)
}

#[test]
fn rows_longer_than_one_chunk() {
    let a = rand_f32(Ix2(128, 3000), 22, -5.0, 5.0);
    let b = rand_f32(Ix2(128, 3000), 23, 0.9, 1.0);
    let (o, scan, sum, red) =
        long_rows::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    let z: Vec<f32> = a.indexed_iter().map(|((p, _), &x)| x + b[[p, 0]]).collect();
    assert_bits("x + col", o.iter(), z.iter().copied());
    let mut want = Vec::new();
    for p in 0..128 {
        let mut h = 0.0f32;
        for j in 0..3000 {
            h = b[[p, j]] * h + a[[p, j]];
            want.push(h);
        }
    }
    assert_bits("scan over 3000", scan.iter(), want);
    assert_bits(
        "sum over 3000",
        sum.iter(),
        a.rows().into_iter().map(|r| sum16(r.iter().copied())),
    );
    let want = z.chunks(3000).map(|r| sum16(r.iter().copied()));
    assert_bits("reduce_res over 3000", red.iter(), want);
}

#[kernel]
fn partition_offsets(a: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let lo = x[[0..64, 0..512]] * 2.0;
    let hi = exp(x[[64..128, 0..512]]);
    store(out[[0..64, 0..512]], lo);
    store(out[[64..128, 0..512]], hi);
    out
}

#[test]
fn views_at_a_partition_offset() {
    let a = rand_f32(Ix2(128, 512), 24, -3.0, 3.0);
    let out = partition_offsets::host(&mut NeuronCore::default(), a.view()).unwrap();
    assert_bits(
        "rows 0..64 * 2",
        out.slice(s![0..64, ..]).iter(),
        a.slice(s![0..64, ..]).iter().map(|&x| x * 2.0),
    );
    let want = a
        .slice(s![64..128, ..])
        .iter()
        .map(|&x| (x as f64).exp())
        .collect::<Vec<_>>();
    assert_close(
        "exp of rows 64..128",
        out.slice(s![64..128, ..]).iter(),
        want,
        1e-6,
        0.0,
    );
}

#[kernel]
fn psum_operands(
    a: Hbm<bf16, 128, 128>,
    b: Hbm<bf16, 128, 512>,
    c: Hbm<f32, 128, 512>,
) -> (Hbm<f32, 3, 128, 512>, Hbm<f32, 32, 32>) {
    let out = ndarray([3, 128, 512], f32, SharedHbm);
    let out_t = ndarray([32, 32], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let z = load(c[..]);
    let acc = nc_matmul(x, y);
    store(out[[0, 0..128, 0..512]], acc * 0.5);
    store(out[[1, 0..128, 0..512]], acc + z);
    store(
        out[[2, 0..128, 0..512]],
        tensor_copy(src = acc, engine = scalar),
    );
    let small = acc[[0..32, 0..32]];
    let t = nc_transpose(small);
    store(out_t[..], t);
    (out, out_t)
}

#[test]
fn elementwise_operations_read_psum() {
    // Small integers: the matmul is exact.
    let a = rand_int(Ix2(128, 128), 25, -3, 3).mapv(bf16::from_f32);
    let b = rand_int(Ix2(128, 512), 26, -3, 3).mapv(bf16::from_f32);
    let c = rand_f32(Ix2(128, 512), 27, -3.0, 3.0);
    let (out, t) =
        psum_operands::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    let m = a.mapv(f32::from).t().dot(&b.mapv(f32::from));
    assert_bits(
        "psum * 0.5",
        out.slice(s![0, .., ..]).iter(),
        m.iter().map(|&v| v * 0.5),
    );
    assert_bits(
        "psum + sbuf",
        out.slice(s![1, .., ..]).iter(),
        m.iter().zip(&c).map(|(&v, &z)| v + z),
    );
    assert_bits(
        "copy of psum",
        out.slice(s![2, .., ..]).iter(),
        m.iter().copied(),
    );
    assert_eq!(
        t,
        m.slice(s![0..32, 0..32]).t(),
        "nc_transpose of PSUM data (Vector engine)"
    );
    let prog = psum_operands::KERNEL.program();
    assert!(has_instr(prog, "Vector", "nc_transpose"), "{prog}");
}

// ---------------------------------------------------------------------------------------------
// More broadcasting, rounding of narrow results, in-place updates.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn outer_broadcast(
    a: Hbm<f32, 128, 4, 1>,
    b: Hbm<f32, 128, 1, 64>,
    c: Hbm<f32, 128, 1>,
) -> (
    Hbm<f32, 128, 4, 64>,
    Hbm<f32, 128, 4, 64>,
    Hbm<f32, 128, 512>,
) {
    let o1 = ndarray([128, 4, 64], f32, SharedHbm);
    let o2 = ndarray([128, 4, 64], f32, SharedHbm);
    let o3 = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let col = load(c[..]);
    let outer = x * y;
    store(o1[..], outer);
    store(o2[..], outer - col);
    store(o3[..], broadcast_to(col, [128, 512]) + 1.0);
    (o1, o2, o3)
}

#[test]
fn outer_product_broadcast_and_columns_over_three_dimensions() {
    let a = rand_f32(Ix3(P, 4, 1), 30, -3.0, 3.0);
    let b = rand_f32(Ix3(P, 1, 64), 31, -3.0, 3.0);
    let c = rand_f32(Ix2(P, 1), 32, -3.0, 3.0);
    let (o1, o2, o3) =
        outer_broadcast::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    let want: Vec<f32> = o1
        .indexed_iter()
        .map(|((p, i, f), _)| a[[p, i, 0]] * b[[p, 0, f]])
        .collect();
    assert_bits("[P,4,1] * [P,1,64]", o1.iter(), want.iter().copied());
    let want2 = o2
        .indexed_iter()
        .map(|((p, i, f), _)| a[[p, i, 0]] * b[[p, 0, f]] - c[[p, 0]]);
    assert_bits("[P,4,64] - [P,1]", o2.iter(), want2);
    assert_bits(
        "broadcast_to(col) + 1",
        o3.iter(),
        o3.indexed_iter().map(|((p, _), _)| c[[p, 0]] + 1.0),
    );
    assert_eq!(
        tile(outer_broadcast::KERNEL.program(), "outer").1,
        vec![128, 4, 64]
    );
}

#[kernel]
fn narrow_results(
    a: Hbm<bf16, 128, 512>,
    b: Hbm<bf16, 128, 512>,
    c: Hbm<f16, 128, 512>,
    d: Hbm<f16, 128, 512>,
) -> (Hbm<bf16, 128, 512>, Hbm<f16, 128, 512>, Hbm<bf16, 128, 512>) {
    let o1 = ndarray([128, 512], bf16, SharedHbm);
    let o2 = ndarray([128, 512], f16, SharedHbm);
    let o3 = ndarray([128, 512], bf16, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let z = load(c[..]);
    let w = load(d[..]);
    let s = x + y;
    store(o1[..], s);
    let m = z * w;
    store(o2[..], m);
    store(o3[..], divide(x, y, dtype = bf16));
    (o1, o2, o3)
}

#[test]
fn narrow_float_results_round_once_to_nearest_even() {
    let a = rand_f32(Ix2(P, F), 33, -100.0, 100.0).mapv(bf16::from_f32);
    let b = rand_f32(Ix2(P, F), 34, -100.0, 100.0).mapv(bf16::from_f32);
    let c = rand_f32(Ix2(P, F), 35, -200.0, 200.0).mapv(f16::from_f32);
    let d = rand_f32(Ix2(P, F), 36, -200.0, 200.0).mapv(f16::from_f32);
    let (s_, m, q) = narrow_results::host(
        &mut NeuronCore::default(),
        a.view(),
        b.view(),
        c.view(),
        d.view(),
    )
    .unwrap();
    let prog = narrow_results::KERNEL.program();
    assert_eq!(tile(prog, "s").0, DType::Bf16, "bf16 + bf16");
    assert_eq!(tile(prog, "m").0, DType::F16, "f16 * f16");
    let bits = |v: &[u16]| v.to_vec();
    let got: Vec<u16> = s_.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u16> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| bf16::from_f32(x.to_f32() + y.to_f32()).to_bits())
        .collect();
    assert_eq!(bits(&got), want, "bf16 + bf16");
    let got: Vec<u16> = m.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u16> = c
        .iter()
        .zip(&d)
        .map(|(x, y)| f16::from_f32(x.to_f32() * y.to_f32()).to_bits())
        .collect();
    assert_eq!(got, want, "f16 * f16 (overflow to inf included)");
    let got: Vec<u16> = q.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u16> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| bf16::from_f32(x.to_f32() / y.to_f32()).to_bits())
        .collect();
    assert_eq!(got, want, "divide(.., dtype = bf16)");
}

#[kernel]
fn in_place(a: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(a[..]);
    t[..] = t * 2.0;
    t[[0..128, 0..256]] = t[[0..128, 256..512]] + 1.0;
    t[[0..128, 256..512]] = exp(t[[0..128, 256..512]]);
    store(out[..], t);
    out
}

#[test]
fn in_place_updates_of_a_tile() {
    let a = rand_f32(Ix2(P, F), 37, -2.0, 2.0);
    let out = in_place::host(&mut NeuronCore::default(), a.view()).unwrap();
    for ((p, f), &g) in out.indexed_iter() {
        let want = if f < 256 {
            (a[[p, f + 256]] * 2.0 + 1.0) as f64
        } else {
            ((a[[p, f]] * 2.0) as f64).exp()
        };
        assert!(
            (g as f64 - want).abs() <= 1e-6 * want.abs(),
            "({p}, {f}): {g} vs {want}"
        );
    }
}

#[kernel]
fn wide_partition_broadcast(
    a: Hbm<f32, 128, 1000>,
    r: Hbm<bf16, 1, 1000>,
) -> (Hbm<f32, 128, 1000>, Hbm<f32, 128, 1>) {
    let out = ndarray([128, 1000], f32, SharedHbm);
    let o_sum = ndarray([128, 1], f32, SharedHbm);
    let x = load(a[..]);
    let row = load(r[..]);
    let rows = broadcast_to(row, [128, 1000]);
    store(out[..], x - rows);
    let acc = zeros([128, 512], f32, Psum);
    acc[..] = copy(x[[0..128, 0..512]]);
    store(o_sum[..], sum(acc, axis = 1));
    (out, o_sum)
}

#[test]
fn partition_broadcast_wider_than_one_matmul_and_reductions_of_psum() {
    let a = rand_f32(Ix2(P, 1000), 38, -5.0, 5.0);
    let r = rand_f32(Ix2(1, 1000), 39, -5.0, 5.0).mapv(bf16::from_f32);
    let (out, sum) =
        wide_partition_broadcast::host(&mut NeuronCore::default(), a.view(), r.view()).unwrap();
    let want = a.indexed_iter().map(|((_, f), &x)| x - r[[0, f]].to_f32());
    assert_bits("x - broadcast_to([1, 1000] bf16)", out.iter(), want);
    let want = a
        .rows()
        .into_iter()
        .map(|row| sum16(row.iter().take(512).copied()));
    assert_bits("sum of a PSUM tile", sum.iter(), want);
}

// `nl.where` is a Rust keyword: a kernel calls it as `r#where`.
#[kernel]
fn select_where(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 3, 128, 512> {
    let out = ndarray([3, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let m = x > y;
    store(out[[0, 0..128, 0..512]], r#where(x > y, x, y));
    store(out[[1, 0..128, 0..512]], r#where(m, x, 0.0));
    store(
        out[[2, 0..128, 0..512]],
        r#where(condition = x < 0.0, x = -1.0, y = 1.0),
    );
    out
}

#[test]
fn where_selects_between_tiles_and_numbers() {
    let a = Array2::from_shape_fn((128, 512), |(p, f)| ((p * 37 + f * 11) % 41) as f32 - 20.0);
    let b = Array2::from_shape_fn((128, 512), |(p, f)| ((p * 13 + f * 7) % 43) as f32 - 21.0);
    let out = select_where::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    for ((p, f), &x) in a.indexed_iter() {
        let y = b[[p, f]];
        assert_eq!(out[[0, p, f]], if x > y { x } else { y });
        assert_eq!(out[[1, p, f]], if x > y { x } else { 0.0 });
        assert_eq!(out[[2, p, f]], if x < 0.0 { -1.0 } else { 1.0 });
    }
    assert!(
        select_where::KERNEL
            .program()
            .to_string()
            .contains("select")
    );
}

// `t op= number`: NKI tiles take a number on the right of `+=`, `*=`, `<<=`, ...
#[kernel]
fn op_assign_scalar(
    a: Hbm<f32, 128, 512>,
    b: Hbm<i32, 128, 64>,
) -> (Hbm<f32, 128, 512>, Hbm<i32, 128, 64>) {
    let o1 = ndarray([128, 512], f32, SharedHbm);
    let o2 = ndarray([128, 64], i32, SharedHbm);
    let t = load(a[..]);
    t += 1.0;
    t *= 2.0;
    t -= 0.5;
    t[[0..128, 0..8]] = 3.0;
    let u = load(b[..]);
    u <<= 1;
    u ^= 0xff;
    store(o1[..], t);
    store(o2[..], u);
    (o1, o2)
}

#[test]
fn op_assign_with_a_number() {
    let a = Array2::from_shape_fn((128, 512), |(p, f)| (p as f32 - f as f32) * 0.25);
    let b = Array2::from_shape_fn((128, 64), |(p, f)| (p * 64 + f) as i32);
    let (o1, o2) = op_assign_scalar::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    let want = Array2::from_shape_fn((128, 512), |(p, f)| {
        if f < 8 {
            3.0
        } else {
            (a[[p, f]] + 1.0) * 2.0 - 0.5
        }
    });
    assert_eq!(o1, want);
    assert_eq!(o2, b.mapv(|x| (x << 1) ^ 0xff));
}
