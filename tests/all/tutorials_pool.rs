//! NKI's data-movement and pooling tutorial kernels (`examples/transpose2d.rs`,
//! `examples/average_pool2d.rs`, `examples/maxpool2d.rs`), each checked against the example's
//! own independent reference at the tutorial's shape and at channel and row counts that are not
//! multiples of the 128-partition tile (the last tile masked).
//!
//! The benchmark-shape instantiations run here with few channels or rows; the full benchmark shapes
//! are the examples' `main`.

// The example files, compiled here as modules; each brings its own copy of `examples/common`.
use crate::examples::average_pool2d;
use crate::examples::maxpool2d;
use crate::examples::transpose2d;

use nki::ndarray::{Array2, Array3, Ix2, Ix3};
use nki::prelude::*;

use average_pool2d::{
    tensor_avgpool_kernel_6x6, tensor_avgpool_kernel_9x12_pool3, tensor_avgpool_kernel_512,
};
use maxpool2d::{
    tensor_maxpool_kernel_6x6, tensor_maxpool_kernel_9x12_pool3, tensor_maxpool_kernel_512,
};
use transpose2d::{common, tensor_transpose2d_kernel_3x4, tensor_transpose2d_kernel_64x64};

/// Asserts that a `Comparison` (each example has its own copy of the type) is within bounds.
macro_rules! assert_within {
    ($what:expr, $c:expr $(,)?) => {{
        let c = $c;
        assert!(c.within, "{}: {}", $what, c);
    }};
}

// ---------------------------------------------------------------------------------------------
// transpose2d
// ---------------------------------------------------------------------------------------------

fn transpose_i8(core: &mut NeuronCore, a: &Array2<i8>) -> Array2<i8> {
    let out = tensor_transpose2d_kernel_3x4(core, &DeviceTensor::from_array(a).unwrap()).unwrap();
    out.into_array::<Ix2>().unwrap()
}

#[test]
fn transpose2d_tutorial_example() {
    let mut core = NeuronCore::default();
    let a = transpose2d::tutorial_input(5, 12);
    let out = transpose_i8(&mut core, &a);
    // The tutorial's docstring: [a0..a3, b0..b3, c0..c3] becomes [a0, b0, c0, a1, b1, c1, ...].
    let first: Vec<i8> = vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11];
    for (p, row) in out.rows().into_iter().enumerate() {
        let want: Vec<i8> = first.iter().map(|&v| v + 12 * p as i8).collect();
        assert_eq!(row.to_vec(), want, "row {p}");
    }
    assert_within!(
        "transpose2d (5, 12) int8",
        transpose2d::check(out.view(), a.view(), (3, 4)),
    );
}

#[test]
fn transpose2d_ragged_rows() {
    let mut core = NeuronCore::default();
    // One row, a row count just past a tile, and three tiles with a ragged last one; the values
    // wrap through every int8.
    for p in [1, 129, 300] {
        let a = transpose2d::tutorial_input(p, 12);
        let out = transpose_i8(&mut core, &a);
        assert_within!(
            &format!("transpose2d ({p}, 12) int8"),
            transpose2d::check(out.view(), a.view(), (3, 4)),
        );
    }
    // The benchmark's 64×64 matrices, 130 rows (a tile of 2).
    let a = common::random_f32(Ix2(130, 64 * 64), 11, -1.0, 1.0);
    let out = tensor_transpose2d_kernel_64x64(&mut core, &DeviceTensor::from_array(&a).unwrap())
        .unwrap()
        .into_array::<Ix2>()
        .unwrap();
    assert_within!(
        "transpose2d (130, 64·64) f32",
        transpose2d::check(out.view(), a.view(), (64, 64)),
    );
}

// ---------------------------------------------------------------------------------------------
// average_pool2d
// ---------------------------------------------------------------------------------------------

#[test]
fn avgpool_tutorial_example() {
    let mut core = NeuronCore::default();
    let x = average_pool2d::tutorial_input(2, 6, 6);
    let out = tensor_avgpool_kernel_6x6(&mut core, &DeviceTensor::from_array(&x).unwrap())
        .unwrap()
        .into_array::<Ix3>()
        .unwrap();
    // The window sums (at most 284) and their quarters are exact in fp16: the tutorial's test
    // asks for equality with NumPy.
    let want = average_pool2d::reference(x.view(), 2);
    assert_eq!(out.mapv(f64::from), want);
    assert_eq!(out[[0, 0, 0]], f16::from_f32(3.5));
    assert_eq!(out[[1, 2, 2]], f16::from_f32(67.5));
}

#[test]
fn avgpool_ragged_channels() {
    let mut core = NeuronCore::default();
    for (c, seed) in [(1, 12), (200, 13)] {
        let x = common::random_f16(Ix3(c, 6, 6), seed, -4.0, 4.0);
        let out = tensor_avgpool_kernel_6x6(&mut core, &DeviceTensor::from_array(&x).unwrap())
            .unwrap()
            .into_array::<Ix3>()
            .unwrap();
        assert_within!(
            &format!("avgpool [{c}, 6, 6] f16"),
            average_pool2d::check(out.view(), x.view(), 2),
        );
    }
    let x = common::random_f16(Ix3(130, 9, 12), 14, -4.0, 4.0);
    let out = tensor_avgpool_kernel_9x12_pool3(&mut core, &DeviceTensor::from_array(&x).unwrap())
        .unwrap()
        .into_array::<Ix3>()
        .unwrap();
    assert_within!(
        "avgpool [130, 9, 12] f16, pool 3",
        average_pool2d::check(out.view(), x.view(), 3),
    );
}

#[test]
fn avgpool_benchmark_kernel_few_channels() {
    let mut core = NeuronCore::default();
    let x = common::random_f32(Ix3(3, 512, 512), 15, -1.0, 1.0);
    let out = tensor_avgpool_kernel_512(&mut core, &DeviceTensor::from_array(&x).unwrap())
        .unwrap()
        .into_array::<Ix3>()
        .unwrap();
    assert_within!(
        "avgpool [3, 512, 512] f32",
        average_pool2d::check(out.view(), x.view(), 2),
    );
}

// ---------------------------------------------------------------------------------------------
// maxpool2d
// ---------------------------------------------------------------------------------------------

#[test]
fn maxpool_tutorial_example() {
    let mut core = NeuronCore::default();
    let x = maxpool2d::tutorial_input(2, 6, 6);
    let out = tensor_maxpool_kernel_6x6(&mut core, &DeviceTensor::from_array(&x).unwrap())
        .unwrap()
        .into_array::<Ix3>()
        .unwrap();
    // Each window's maximum is its bottom-right element, 7 + 2·(6i + j) + 36c.
    let want = Array3::from_shape_fn((2, 3, 3), |(c, i, j)| {
        f16::from_f64((36 * c + 6 * (2 * i + 1) + 2 * j + 1) as f64)
    });
    assert_eq!(out, want);
    assert_within!(
        "maxpool 2×6×6 fp16",
        maxpool2d::check(out.view(), x.view(), 2),
    );
}

#[test]
fn maxpool_ragged_channels() {
    let mut core = NeuronCore::default();
    for (c, seed) in [(1, 16), (200, 17)] {
        let x = common::random_f16(Ix3(c, 6, 6), seed, -4.0, 4.0);
        let out = tensor_maxpool_kernel_6x6(&mut core, &DeviceTensor::from_array(&x).unwrap())
            .unwrap()
            .into_array::<Ix3>()
            .unwrap();
        assert_within!(
            &format!("maxpool [{c}, 6, 6] f16"),
            maxpool2d::check(out.view(), x.view(), 2),
        );
    }
    let x = common::random_f16(Ix3(130, 9, 12), 18, -4.0, 4.0);
    let out = tensor_maxpool_kernel_9x12_pool3(&mut core, &DeviceTensor::from_array(&x).unwrap())
        .unwrap()
        .into_array::<Ix3>()
        .unwrap();
    assert_within!(
        "maxpool [130, 9, 12] f16, pool 3",
        maxpool2d::check(out.view(), x.view(), 3),
    );
}

#[test]
fn maxpool_benchmark_kernel_few_channels() {
    let mut core = NeuronCore::default();
    let x = common::random_f32(Ix3(3, 512, 512), 19, -1.0, 1.0);
    let out = tensor_maxpool_kernel_512(&mut core, &DeviceTensor::from_array(&x).unwrap())
        .unwrap()
        .into_array::<Ix3>()
        .unwrap();
    assert_within!(
        "maxpool [3, 512, 512] f32",
        maxpool2d::check(out.view(), x.view(), 2),
    );
}
