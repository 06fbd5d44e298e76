//! `tensor_scalar_cumulative` against plain loops: along each partition's free elements
//! (row-major), the fp32 register becomes `op1(op0(src, imm0), reg)` and each step's value is
//! written. The register starts at `op1`'s identity (`reset_reduce`, the default) or at `imm1`
//! (`load_reduce`). Cases: a running sum with an immediate, a running maximum of products with
//! per-partition columns loaded into the register, `subtract` (NKI's operand order: the value
//! minus the register), a running product, two free axes, a bf16 destination (the register stays
//! fp32; only what is written is rounded), and the refused `reduce_cmd`s.

use crate::common;

use common::*;
use nki::bf16;
use nki::ndarray::{Array2, Array3, Ix2, Ix3};
use nki::prelude::*;

/// A running sum of `src + 1.5`.
#[kernel]
fn cumsum_plus(src: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let s = load(src[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    tensor_scalar_cumulative(dst = d, src = s, op0 = add, op1 = add, imm0 = 1.5);
    store(out[..], d);
    out
}

/// A running maximum of `src * scale[p]`, the register loaded with `init[p]`; positional
/// arguments in NKI 0.6's order.
#[kernel]
fn running_max_loaded(
    src: Hbm<f32, 64, 40>,
    scale: Hbm<f32, 64, 1>,
    init: Hbm<f32, 64, 1>,
) -> Hbm<f32, 64, 40> {
    let out = ndarray([64, 40], f32, SharedHbm);
    let s = load(src[..]);
    let k = load(scale[..]);
    let i = load(init[..]);
    let d = ndarray([64, 40], f32, Sbuf);
    tensor_scalar_cumulative(d, s, multiply, maximum, k, i, reduce_cmd = load_reduce);
    store(out[..], d);
    out
}

/// `reg = (src - 0.25) - reg`, from `imm1 = 2.0`.
#[kernel]
fn alternating(src: Hbm<f32, 16, 33>) -> Hbm<f32, 16, 33> {
    let out = ndarray([16, 33], f32, SharedHbm);
    let s = load(src[..]);
    let d = ndarray([16, 33], f32, Sbuf);
    tensor_scalar_cumulative(
        dst = d,
        src = s,
        op0 = subtract,
        op1 = subtract,
        imm0 = 0.25,
        imm1 = 2.0,
        reduce_cmd = nisa::reduce_cmd::load_reduce,
    );
    store(out[..], d);
    out
}

/// A running product of `src / 1.25` over two free axes.
#[kernel]
fn running_product(src: Hbm<f32, 8, 4, 6>) -> Hbm<f32, 8, 4, 6> {
    let out = ndarray([8, 4, 6], f32, SharedHbm);
    let s = load(src[..]);
    let d = ndarray([8, 4, 6], f32, Sbuf);
    tensor_scalar_cumulative(
        dst = d,
        src = s,
        op0 = divide,
        op1 = multiply,
        imm0 = 1.25,
        reduce_cmd = reset_reduce,
    );
    store(out[..], d);
    out
}

/// A running sum written as bf16, the register fp32.
#[kernel]
fn cumsum_bf16(src: Hbm<f32, 32, 300>) -> Hbm<bf16, 32, 300> {
    let out = ndarray([32, 300], bf16, SharedHbm);
    let s = load(src[..]);
    let d = ndarray([32, 300], bf16, Sbuf);
    tensor_scalar_cumulative(dst = d, src = s, op0 = multiply, op1 = add, imm0 = 1.0);
    store(out[..], d);
    out
}

/// fp32 arithmetic through f64: each operation rounded once to fp32 (exact for +, −, ×, ÷ of
/// two fp32 values).
fn f32_of(x: f64) -> f32 {
    x as f32
}

/// The plain loop: per partition, `reg = op1(op0(x, s), reg)` in fp32.
fn scan(
    rows: &[Vec<f32>],
    s: impl Fn(usize) -> f32,
    start: impl Fn(usize) -> f32,
    op0: impl Fn(f32, f32) -> f32,
    op1: impl Fn(f32, f32) -> f32,
) -> Vec<Vec<f32>> {
    rows.iter()
        .enumerate()
        .map(|(p, row)| {
            let mut reg = start(p);
            row.iter()
                .map(|&x| {
                    reg = op1(op0(x, s(p)), reg);
                    reg
                })
                .collect()
        })
        .collect()
}

fn rows2(a: &Array2<f32>) -> Vec<Vec<f32>> {
    a.rows().into_iter().map(|r| r.to_vec()).collect()
}

fn add(a: f32, b: f32) -> f32 {
    f32_of(f64::from(a) + f64::from(b))
}
fn sub(a: f32, b: f32) -> f32 {
    f32_of(f64::from(a) - f64::from(b))
}
fn mul(a: f32, b: f32) -> f32 {
    f32_of(f64::from(a) * f64::from(b))
}
fn div(a: f32, b: f32) -> f32 {
    f32_of(f64::from(a) / f64::from(b))
}

#[test]
fn a_running_sum_starts_from_zero() {
    let x = rand_f32(Ix2(128, 64), 301, -10.0, 10.0);
    let mut core = NeuronCore::default();
    let out = cumsum_plus::host(&mut core, x.view()).unwrap();
    let want = scan(&rows2(&x), |_| 1.5, |_| 0.0, add, add);
    for p in 0..128 {
        for i in 0..64 {
            assert_eq!(out[[p, i]].to_bits(), want[p][i].to_bits(), "[{p}, {i}]");
        }
    }
}

#[test]
fn load_reduce_starts_from_imm1_and_columns_are_per_partition() {
    let x = rand_f32(Ix2(64, 40), 302, -5.0, 5.0);
    let k = rand_f32(Ix2(64, 1), 303, -2.0, 2.0);
    let init = rand_f32(Ix2(64, 1), 304, -1.0, 8.0);
    let mut core = NeuronCore::default();
    let out = running_max_loaded::host(&mut core, x.view(), k.view(), init.view()).unwrap();
    let want = scan(&rows2(&x), |p| k[[p, 0]], |p| init[[p, 0]], mul, f32::max);
    for p in 0..64 {
        for i in 0..40 {
            assert_eq!(out[[p, i]].to_bits(), want[p][i].to_bits(), "[{p}, {i}]");
        }
    }
}

#[test]
fn subtract_takes_the_value_minus_the_register() {
    let x = rand_f32(Ix2(16, 33), 305, -3.0, 3.0);
    let mut core = NeuronCore::default();
    let out = alternating::host(&mut core, x.view()).unwrap();
    for p in 0..16 {
        let mut reg = 2.0f32;
        for i in 0..33 {
            reg = sub(sub(x[[p, i]], 0.25), reg);
            assert_eq!(out[[p, i]].to_bits(), reg.to_bits(), "[{p}, {i}]");
        }
    }
}

#[test]
fn two_free_axes_are_scanned_row_major() {
    let x = rand_f32(Ix3(8, 4, 6), 306, 0.5, 1.5);
    let mut core = NeuronCore::default();
    let out = running_product::host(&mut core, x.view()).unwrap();
    let want = Array3::from_shape_fn((8, 4, 6), |(p, a, b)| {
        let mut reg = 1.0f32;
        for k in 0..=a * 6 + b {
            reg = mul(div(x[[p, k / 6, k % 6]], 1.25), reg);
        }
        reg
    });
    for (got, w) in out.iter().zip(want.iter()) {
        assert_eq!(got.to_bits(), w.to_bits());
    }
}

#[test]
fn a_bf16_destination_rounds_what_is_written_not_the_register() {
    // Small increments on a growing sum: a bf16 register would stop growing.
    let x = rand_f32(Ix2(32, 300), 307, 0.0, 1.0);
    let mut core = NeuronCore::default();
    let out = cumsum_bf16::host(&mut core, x.view()).unwrap();
    let want = scan(&rows2(&x), |_| 1.0, |_| 0.0, mul, add);
    for p in 0..32 {
        for i in 0..300 {
            assert_eq!(
                out[[p, i]].to_bits(),
                bf16::from_f32(want[p][i]).to_bits(),
                "[{p}, {i}]"
            );
        }
    }
    // The last values are near the row sums (~150), far past where bf16 steps of ~0.5 would
    // have stalled a bf16 accumulator.
    let sum: f64 = (0..300).map(|i| f64::from(x[[0, i]])).sum();
    assert!((f64::from(out[[0, 299]].to_f32()) - sum).abs() < 1.0);
}
