//! NKI's compute vocabulary end to end: `#[kernel]` kernels exercising each operation family,
//! each output compared with an independent reference (plain f32/f64 loops written here from the
//! documented definitions), and result dtypes checked in the compiled program.
//!
//! Elementwise functions and Rust operators on tiles, broadcasting and type promotion are
//! here; the ISA calls, reductions and composites are in `tests/isa.rs`, masks and accumulation
//! in `tests/masks.rs`, dtypes and bit operations in `tests/dtypes.rs`.

mod common;

use common::*;
use nki::Bool;
use nki::lang::DType;
use nki::ndarray::{Array2, Ix2, Ix3, s};
use nki::prelude::*;

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
    let refs: [(&str, fn(f32, f32) -> f32); 12] = [
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
    assert_eq!(out[[7, 0, 2]].to_bits(), (-0.0f32).to_bits(), "minimum(-0, 0)");
    assert_eq!(out[[3, 0, 3]].abs(), f32::INFINITY, "x / 0");
    assert_eq!(out[[4, 0, 3]].to_bits(), 0x7fc0_0000, "x % 0 is the canonical NaN");
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
    assert_close("power(x, y)", out.slice(s![0, .., ..]).iter(), want, 1e-6, 0.0);
    let want = a.iter().map(|&x| (x as f64).powi(2));
    assert_close("power(x, 2)", out.slice(s![1, .., ..]).iter(), want, 1e-6, 0.0);
    // NKI runs power on GpSimd.
    assert!(has_instr(power_tt::KERNEL.program(), "GpSimd", "tensor_tensor"));
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
    let refs: [(&str, fn(f32) -> f32); 10] = [
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
        assert_bits(name, out.slice(s![k, .., ..]).iter(), a.iter().map(|&x| f(x)));
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
    let refs: [(&str, fn(f32, f32) -> f32); 6] = [
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
) -> (Hbm<f32, 128, 4, 64>, Hbm<f32, 128, 4, 64>, Hbm<f32, 128, 4, 64>) {
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
    assert!(has_instr(partition_broadcast::KERNEL.program(), "Tensor", "nc_matmul"));
}

// ---------------------------------------------------------------------------------------------
// Comparisons and logical operations.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn compare(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>, c: Hbm<f32, 128, 1>) -> Hbm<bool, 14, 128, 512> {
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
    let refs: [(&str, fn(f32, f32, f32) -> bool); 14] = [
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
            assert_eq!(out[[k, p, j]], want, "{name} at ({p}, {j}): x = {x}, y = {}", b[[p, j]]);
        }
    }
    assert_eq!(out[[5, 1, 0]], Bool::from(true), "NaN != y");
    assert_eq!(out[[4, 1, 0]], Bool::from(false), "NaN == y");
    let prog = compare::KERNEL.program();
    assert_eq!(tile(prog, "lt").0, DType::Bool, "a comparison gives a bool tile");
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
    let refs: [(&str, fn(bool, bool) -> bool); 8] = [
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
    assert_bits("bf16 + f16", s_.iter(), h.indexed_iter().map(|((p, j), _)| sum(p, j)));
    let want_d: Vec<bf16> = h.indexed_iter().map(|((p, j), _)| bf16::from_f32(sum(p, j))).collect();
    assert_eq!(d.iter().copied().collect::<Vec<_>>(), want_d, "add(.., dtype = bf16)");
    assert_eq!(n, i.mapv(|v| v as i32 + 2), "int8 + 2");
    let want_m = i.indexed_iter().map(|((p, j), &v)| v as i16 + u[[p, j]] as i16);
    assert_eq!(m.iter().copied().collect::<Vec<_>>(), want_m.collect::<Vec<_>>(), "int8 + uint8");
    assert_bits("bf16 * 2.0", w.iter(), h.iter().map(|v| v.to_f32() * 2.0));
    let want_e: Vec<f16> = g.iter().map(|v| f16::from_f32(v.to_f32() * 3.0)).collect();
    assert_eq!(e.iter().copied().collect::<Vec<_>>(), want_e, "multiply(.., dtype = f16)");
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
