//! `activate2` (NeuronCore-v4, the Scalar engine) against plain loops: the tensor-scalar stage
//! `(data op0 imm0) op1 imm1` on fp32 values (each operation rounded to fp32; `reverse` takes
//! the operand first; `bypass` passes the value on), then the activation function, written in
//! the destination's dtype, with the per-partition reduction into `reduce_res`. The stage is
//! computed here in f64 and rounded to fp32 after each operation (exact for +, −, ×), the
//! functions by f64 within the model's documented accuracy.

use crate::common;

use common::*;
use nki::ndarray::Ix2;
use nki::prelude::*;

/// `exp(x · s[p] − 0.5)` with the per-partition sums; keywords.
#[kernel(target = trn3)]
fn scale_and_bias(
    x: Hbm<f32, 128, 96>,
    s: Hbm<f32, 128, 1>,
) -> (Hbm<f32, 128, 96>, Hbm<f32, 128, 1>) {
    let out = ndarray([128, 96], f32, SharedHbm);
    let sums = ndarray([128, 1], f32, SharedHbm);
    let a = load(x[..]);
    let k = load(s[..]);
    let d = ndarray([128, 96], f32, Sbuf);
    let r = ndarray([128, 1], f32, Sbuf);
    activate2(
        dst = d,
        op = exp,
        data = a,
        imm0 = k,
        imm1 = 0.5,
        op0 = multiply,
        op1 = subtract,
        reduce_op = add,
        reduce_res = r,
        reduce_cmd = nisa::reduce_cmd::reset_reduce,
    );
    store(out[..], d);
    store(sums[..], r);
    (out, sums)
}

/// `relu(1.25 − x)` (reversed subtract, op1 bypass) with the per-partition maximum;
/// positional in NKI 0.6's order with the destination first.
#[kernel(target = trn3)]
fn reversed_relu(x: Hbm<f32, 64, 40>) -> (Hbm<f32, 64, 40>, Hbm<f32, 64, 1>) {
    let out = ndarray([64, 40], f32, SharedHbm);
    let peaks = ndarray([64, 1], f32, SharedHbm);
    let a = load(x[..]);
    let d = ndarray([64, 40], f32, Sbuf);
    let r = ndarray([64, 1], f32, Sbuf);
    nisa::activate2(
        d,
        relu,
        a,
        1.25,
        0.0,
        subtract,
        bypass,
        reverse0 = true,
        reduce_op = maximum,
        reduce_res = r,
        reduce_cmd = reset_reduce,
    );
    store(out[..], d);
    store(peaks[..], r);
    (out, peaks)
}

/// `tanh(x + 2)` into bf16, no reduction.
#[kernel(target = trn3)]
fn shifted_tanh_bf16(x: Hbm<f32, 16, 32>) -> Hbm<bf16, 16, 32> {
    let out = ndarray([16, 32], bf16, SharedHbm);
    let a = load(x[..]);
    let d = ndarray([16, 32], bf16, Sbuf);
    activate2(
        dst = d,
        op = tanh,
        data = a,
        imm0 = 2.0,
        imm1 = 0.0,
        op0 = add,
        op1 = bypass,
    );
    store(out[..], d);
    out
}

/// Whether `got` is within `ulps` of `want` rounded to fp32.
fn near(got: f32, want: f64, ulps: i64) -> bool {
    let w = want as f32;
    got == w || (got.is_finite() && (got.to_bits() as i64 - w.to_bits() as i64).abs() <= ulps)
}

#[test]
fn multiply_then_subtract_then_exp_with_sums() {
    let x = rand_f32(Ix2(128, 96), 501, -4.0, 4.0);
    let s = rand_f32(Ix2(128, 1), 502, -2.0, 2.0);
    let mut core = NeuronCore::new(Target::Trn3);
    let (out, sums) = scale_and_bias::host(&mut core, x.view(), s.view()).unwrap();
    for p in 0..128 {
        for i in 0..96 {
            // Two roundings: the product, then the difference.
            let v = ((f64::from(x[[p, i]]) * f64::from(s[[p, 0]])) as f32 as f64 - 0.5) as f32;
            assert!(
                near(out[[p, i]], f64::from(v).exp(), 2),
                "[{p}, {i}]: exp({v}) = {}",
                out[[p, i]]
            );
        }
        let want = sum16(out.row(p).iter().copied());
        assert_eq!(sums[[p, 0]].to_bits(), want.to_bits(), "partition {p}");
    }
}

#[test]
fn a_reversed_subtract_then_relu_with_the_maximum() {
    let x = rand_f32(Ix2(64, 40), 503, -3.0, 3.0);
    let mut core = NeuronCore::new(Target::Trn3);
    let (out, peaks) = reversed_relu::host(&mut core, x.view()).unwrap();
    for p in 0..64 {
        let mut peak = f32::NEG_INFINITY;
        for i in 0..40 {
            let want = ((1.25 - f64::from(x[[p, i]])) as f32).max(0.0);
            assert_eq!(out[[p, i]].to_bits(), want.to_bits(), "[{p}, {i}]");
            peak = peak.max(want);
        }
        assert_eq!(peaks[[p, 0]], peak, "partition {p}");
    }
}

#[test]
fn add_then_tanh_into_bf16() {
    let x = rand_f32(Ix2(16, 32), 504, -4.0, 2.0);
    let mut core = NeuronCore::new(Target::Trn3);
    let out = shifted_tanh_bf16::host(&mut core, x.view()).unwrap();
    for ((p, i), &got) in out.indexed_iter() {
        let want = f64::from((f64::from(x[[p, i]]) + 2.0) as f32).tanh();
        // bf16's half ulp plus the fp32 function's error.
        let tol = want.abs() * (2f64.powi(-8) + 2f64.powi(-20)) + 1e-30;
        assert!(
            (f64::from(got.to_f32()) - want).abs() <= tol,
            "[{p}, {i}]: {got} for tanh({})",
            x[[p, i]] + 2.0
        );
    }
}

#[test]
fn the_listing_shows_the_stage_and_the_function() {
    let listing = scale_and_bias::KERNEL.program().to_string();
    assert!(
        listing
            .lines()
            .any(|l| l.contains("activate2") && l.contains("exp(subtract(multiply(")),
        "{listing}"
    );
    let s = nki::timing::Timing::new()
        .run_shapes(
            &mut NeuronCore::new(Target::Trn3),
            &scale_and_bias::KERNEL,
            &[&[128, 96], &[128, 1]],
        )
        .unwrap();
    assert_eq!(
        s.opcode_count(
            nki::program::Engine::Scalar,
            nki::program::Opcode::Activate2
        ),
        1
    );
}
