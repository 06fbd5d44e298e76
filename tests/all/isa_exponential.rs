//! `exponential` (NeuronCore-v4, the Vector engine) against plain loops: `exp(src − max_value)`
//! in fp32, written in the destination's dtype, with `max_value` absent (0), a number or a
//! per-partition column, and the sum of each partition's results into `reduce_res` under
//! `reduce_cmd = reset_reduce` (the documented reduction order, `sum16`). The reference is
//! f64's `exp` of the fp32 difference, within the documented accuracy of the model's `exp`
//! (about 1 ulp: `docs/numerics.md`).

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `exp(x − m[p])` with the per-partition sums, both written out.
#[kernel(target = trn3)]
fn softmax_numerator(
    x: Hbm<f32, 128, 200>,
    m: Hbm<f32, 128, 1>,
) -> (Hbm<f32, 128, 200>, Hbm<f32, 128, 1>) {
    let out = ndarray([128, 200], f32, SharedHbm);
    let sums = ndarray([128, 1], f32, SharedHbm);
    let s = load(x[..]);
    let mx = load(m[..]);
    let d = ndarray([128, 200], f32, Sbuf);
    let r = ndarray([128, 1], f32, Sbuf);
    exponential(
        dst = d,
        src = s,
        max_value = mx,
        reduce_res = r,
        reduce_cmd = nisa::reduce_cmd::reset_reduce,
    );
    store(out[..], d);
    store(sums[..], r);
    (out, sums)
}

/// Positional, a number as `max_value`, a bf16 destination.
#[kernel(target = trn3)]
fn exp_minus_two_bf16(x: Hbm<f32, 32, 64>) -> Hbm<bf16, 32, 64> {
    let out = ndarray([32, 64], bf16, SharedHbm);
    let s = load(x[..]);
    let d = ndarray([32, 64], bf16, Sbuf);
    exponential(d, s, 2.0);
    store(out[..], d);
    out
}

/// No `max_value`: plain `exp`.
#[kernel(target = trn3)]
fn plain_exp(x: Hbm<f32, 16, 8>) -> Hbm<f32, 16, 8> {
    let out = ndarray([16, 8], f32, SharedHbm);
    let s = load(x[..]);
    let d = ndarray([16, 8], f32, Sbuf);
    exponential(dst = d, src = s);
    store(out[..], d);
    out
}

/// Whether `got` is within `ulps` of f64's `exp(x)` rounded to fp32.
fn near_exp(got: f32, x: f32, ulps: u32) -> bool {
    let want = f64::from(x).exp() as f32;
    if want == got {
        return true;
    }
    let (a, b) = (got.to_bits() as i64, want.to_bits() as i64);
    got.is_finite() && (a - b).unsigned_abs() <= u64::from(ulps)
}

#[test]
fn exp_of_the_difference_and_its_sum_per_partition() {
    let x = rand_f32(Ix2(128, 200), 401, -20.0, 20.0);
    let m = rand_f32(Ix2(128, 1), 402, -5.0, 25.0);
    let mut core = NeuronCore::new(Target::Trn3);
    let (out, sums) = softmax_numerator::host(&mut core, x.view(), m.view()).unwrap();
    for p in 0..128 {
        for i in 0..200 {
            // fp32 subtraction (one rounding), then exp.
            let d = x[[p, i]] - m[[p, 0]];
            assert!(
                near_exp(out[[p, i]], d, 2),
                "[{p}, {i}]: exp({d}) = {} (f64: {})",
                out[[p, i]],
                f64::from(d).exp()
            );
        }
        // The sum of the fp32 results, in the documented order.
        let want = sum16(out.row(p).iter().copied());
        assert_eq!(sums[[p, 0]].to_bits(), want.to_bits(), "partition {p}");
    }
}

#[test]
fn a_number_as_max_value_and_a_bf16_destination() {
    let x = rand_f32(Ix2(32, 64), 403, -8.0, 8.0);
    let mut core = NeuronCore::new(Target::Trn3);
    let out = exp_minus_two_bf16::host(&mut core, x.view()).unwrap();
    for ((p, i), &got) in out.indexed_iter() {
        let e = f64::from(x[[p, i]] - 2.0).exp();
        // Within bf16's half ulp of the exact value, plus the fp32 result's error.
        let tol = e * (2f64.powi(-8) + 2f64.powi(-21));
        assert!(
            (f64::from(got.to_f32()) - e).abs() <= tol,
            "[{p}, {i}]: {got} for exp({})",
            x[[p, i]] - 2.0
        );
    }
}

#[test]
fn without_max_value_it_is_exp() {
    let mut x = Array2::from_shape_fn((16, 8), |(p, i)| (p as f32 - 8.0) * 1.5 + i as f32 * 0.25);
    x[[0, 0]] = 0.0;
    x[[0, 1]] = -0.0;
    x[[0, 2]] = 100.0; // overflows fp32
    x[[0, 3]] = -110.0; // underflows to a subnormal or zero
    let mut core = NeuronCore::new(Target::Trn3);
    let out = plain_exp::host(&mut core, x.view()).unwrap();
    assert_eq!(out[[0, 0]], 1.0);
    assert_eq!(out[[0, 1]], 1.0);
    assert_eq!(out[[0, 2]], f32::INFINITY);
    assert!(out[[0, 3]] >= 0.0 && out[[0, 3]] < 1e-38);
    for p in 0..16 {
        for i in 4..8 {
            assert!(near_exp(out[[p, i]], x[[p, i]], 2), "[{p}, {i}]");
        }
    }
}

#[test]
fn the_listing_and_the_timing_name_the_instruction() {
    let listing = softmax_numerator::KERNEL.program().to_string();
    assert!(
        listing
            .lines()
            .any(|l| l.contains("exponential") && l.contains("exp(")),
        "{listing}"
    );
    let s = nki::timing::Timing::new()
        .run_shapes(
            &mut NeuronCore::new(Target::Trn3),
            &softmax_numerator::KERNEL,
            &[&[128, 200], &[128, 1]],
        )
        .unwrap();
    assert_eq!(
        s.opcode_count(
            nki::program::Engine::Vector,
            nki::program::Opcode::Exponential
        ),
        1
    );
}
