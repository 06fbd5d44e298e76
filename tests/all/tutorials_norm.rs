//! NKI's normalisation tutorial kernels (`examples/rmsnorm.rs`, `examples/layernorm.rs`,
//! `examples/softmax.rs`), each checked against the example's own independent f64 reference and
//! error bound at the tutorial's shape and at row counts that are not multiples of the
//! 128-row tile (the last tile masked).
//!
//! The benchmark-shape instantiations (rows of 4096 or 8192) run here with few rows; the full
//! benchmark shapes are the examples' `main`.

// The example files, compiled here as modules; each brings its own copy of `examples/common`.
use crate::examples::layernorm;
use crate::examples::rmsnorm;
use crate::examples::softmax;

use nki::ndarray::{Array1, Array2, Ix1, Ix2};
use nki::prelude::*;

use layernorm::{
    nki_layernorm_kernel_v1, nki_layernorm_kernel_v1_1024, nki_layernorm_kernel_v1_8192,
    nki_layernorm_kernel_v2, nki_layernorm_kernel_v2_1024, nki_layernorm_kernel_v2_8192,
};
use rmsnorm::{common, nki_rmsnorm_kernel_512, nki_rmsnorm_kernel_4096};
use softmax::{nki_softmax_kernel_512, nki_softmax_kernel_4096};

/// Asserts that a `Comparison` (each example has its own copy of the type) is within bounds.
macro_rules! assert_within {
    ($what:expr, $c:expr $(,)?) => {{
        let c = $c;
        assert!(c.within, "{}: {}", $what, c);
    }};
}

fn dev<D: nki::ndarray::Dimension>(a: &nki::ndarray::Array<f32, D>) -> DeviceTensor<f32> {
    DeviceTensor::from_array(a).unwrap()
}

fn matrix(t: DeviceTensor<f32>) -> Array2<f32> {
    t.into_array::<Ix2>().unwrap()
}

// ---------------------------------------------------------------------------------------------
// rmsnorm
// ---------------------------------------------------------------------------------------------

fn rmsnorm_inputs(rows: usize, d: usize, seed: u64, lo: f64) -> (Array2<f32>, Array1<f32>) {
    (
        common::random_f32(Ix2(rows, d), seed, lo, 1.0),
        common::random_f32(Ix1(d), seed + 1, 0.0, 1.0),
    )
}

#[test]
fn rmsnorm_tutorial_shape() {
    // The tutorial's test: a (128, 512) and g (512), uniform in [0, 1).
    let (a, g) = rmsnorm_inputs(128, 512, 21, 0.0);
    let out = nki_rmsnorm_kernel_512(&mut NeuronCore::default(), &dev(&a), &dev(&g)).unwrap();
    assert_within!(
        "rmsnorm (128, 512)",
        rmsnorm::check(matrix(out).view(), a.view(), g.view())
    );
}

#[test]
fn rmsnorm_ragged_rows() {
    let mut core = NeuronCore::default();
    for (rows, seed) in [(1, 22), (129, 23), (300, 24)] {
        let (a, g) = rmsnorm_inputs(rows, 512, seed, -1.0);
        let out = nki_rmsnorm_kernel_512(&mut core, &dev(&a), &dev(&g)).unwrap();
        assert_within!(
            format!("rmsnorm ({rows}, 512)"),
            rmsnorm::check(matrix(out).view(), a.view(), g.view())
        );
    }
    // The benchmark's row length.
    let (a, g) = rmsnorm_inputs(130, 4096, 25, -1.0);
    let out = nki_rmsnorm_kernel_4096(&mut core, &dev(&a), &dev(&g)).unwrap();
    assert_within!(
        "rmsnorm (130, 4096)",
        rmsnorm::check(matrix(out).view(), a.view(), g.view())
    );
}

// ---------------------------------------------------------------------------------------------
// layernorm
// ---------------------------------------------------------------------------------------------

fn layernorm_inputs(
    rows: usize,
    d: usize,
    seed: u64,
    lo: f64,
    hi: f64,
) -> (Array2<f32>, Array1<f32>, Array1<f32>) {
    (
        common::random_f32(Ix2(rows, d), seed, lo, hi),
        common::random_f32(Ix1(d), seed + 1, 0.0, 1.0),
        common::random_f32(Ix1(d), seed + 2, 0.0, 1.0),
    )
}

/// Runs both kernels of rows of 1024 on `x`, checks each, and returns their largest errors.
fn layernorm_1024(core: &mut NeuronCore, what: &str, x: &Array2<f32>, seed: u64) -> (f64, f64) {
    let gamma = common::random_f32(Ix1(1024), seed, 0.0, 1.0);
    let beta = common::random_f32(Ix1(1024), seed + 1, 0.0, 1.0);
    let (xd, gd, bd) = (dev(x), dev(&gamma), dev(&beta));
    let v1 = matrix(nki_layernorm_kernel_v1_1024(core, &xd, &gd, &bd).unwrap());
    let v2 = matrix(nki_layernorm_kernel_v2_1024(core, &xd, &gd, &bd).unwrap());
    let c1 = layernorm::check(v1.view(), x.view(), gamma.view(), beta.view());
    let c2 = layernorm::check(v2.view(), x.view(), gamma.view(), beta.view());
    println!("layernorm v1 {what}: {c1}\nlayernorm v2 {what}: {c2}");
    assert_within!(format!("layernorm v1 {what}"), c1);
    assert_within!(format!("layernorm v2 {what}"), c2);
    (c1.max_error, c2.max_error)
}

#[test]
fn layernorm_small_and_ragged_rows() {
    let mut core = NeuronCore::default();
    // The tutorial's distribution (uniform in [0, 1)): one tile, one row, a ragged third tile.
    for (rows, seed) in [(128, 31), (1, 32), (300, 33)] {
        let x = common::random_f32(Ix2(rows, 1024), seed, 0.0, 1.0);
        layernorm_1024(&mut core, &format!("({rows}, 1024)"), &x, seed + 10);
    }
}

#[test]
fn layernorm_v1_cancellation_and_v2() {
    // Rows centred far from 0 (uniform in [8, 9)): v1's variance, mean(x²) − mean², cancels
    // (mean(x²)/var ≈ 870); v2's bn_stats / bn_aggr do not. Both stay within their bounds, and
    // v2 is the more accurate.
    let mut core = NeuronCore::default();
    let x = common::random_f32(Ix2(200, 1024), 34, 8.0, 9.0);
    let (e1, e2) = layernorm_1024(&mut core, "(200, 1024) in [8, 9)", &x, 44);
    assert!(e2 < e1, "v2's error {e2:e} is not below v1's {e1:e}");
}

#[test]
fn layernorm_instantiations_take_the_tutorials_epsilon() {
    // The reference's ε is the one every instantiation of both kernels compiles in.
    for inst in nki_layernorm_kernel_v1::INSTANCES
        .iter()
        .chain(&nki_layernorm_kernel_v2::INSTANCES)
    {
        let eps = inst.value("EPS").and_then(nki::MetaValue::as_f64);
        assert_eq!(eps, Some(layernorm::EPSILON), "{inst}");
    }
}

#[test]
fn layernorm_benchmark_row_length() {
    // Rows of 8192 (16 bn_stats chunks per row), 130 rows: a full tile and a ragged one.
    let mut core = NeuronCore::default();
    let (x, gamma, beta) = layernorm_inputs(130, 8192, 35, -1.0, 1.0);
    let (xd, gd, bd) = (dev(&x), dev(&gamma), dev(&beta));
    let v1 = matrix(nki_layernorm_kernel_v1_8192(&mut core, &xd, &gd, &bd).unwrap());
    let v2 = matrix(nki_layernorm_kernel_v2_8192(&mut core, &xd, &gd, &bd).unwrap());
    assert_within!(
        "layernorm v1 (130, 8192)",
        layernorm::check(v1.view(), x.view(), gamma.view(), beta.view())
    );
    assert_within!(
        "layernorm v2 (130, 8192)",
        layernorm::check(v2.view(), x.view(), gamma.view(), beta.view())
    );
}

// ---------------------------------------------------------------------------------------------
// softmax
// ---------------------------------------------------------------------------------------------

#[test]
fn softmax_small_and_ragged_rows() {
    let mut core = NeuronCore::default();
    for (rows, seed) in [(128, 51), (1, 52), (129, 53), (300, 54)] {
        let a = common::random_f32(Ix2(rows, 512), seed, -4.0, 4.0);
        let out = nki_softmax_kernel_512(&mut core, &dev(&a)).unwrap();
        assert_within!(
            format!("softmax ({rows}, 512)"),
            softmax::check(matrix(out).view(), a.view())
        );
    }
}

#[test]
fn softmax_large_values_and_benchmark_row_length() {
    let mut core = NeuronCore::default();
    // Values whose exp overflows f32 without the max shift (up to e^100).
    let a = common::random_f32(Ix2(200, 512), 55, 60.0, 100.0);
    let out = matrix(nki_softmax_kernel_512(&mut core, &dev(&a)).unwrap());
    assert!(out.iter().all(|v| v.is_finite()));
    assert_within!(
        "softmax (200, 512) in [60, 100)",
        softmax::check(out.view(), a.view())
    );
    // The benchmark's row length.
    let a = common::random_f32(Ix2(130, 4096), 56, -4.0, 4.0);
    let out = nki_softmax_kernel_4096(&mut core, &dev(&a)).unwrap();
    assert_within!(
        "softmax (130, 4096)",
        softmax::check(matrix(out).view(), a.view())
    );
}
