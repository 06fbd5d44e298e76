//! The matmul tutorial's stages (tiled, hoisted loads, blocked free dimensions, fully optimised)
//! at small shapes against the independent f64 reference of `examples/common`, and their launch
//! constraints.

// The example kernels, compiled here as modules; each example brings its own copy of
// `examples/common`, which is why the same file is loaded several times.
use crate::examples::matmul_block_free_dimension as block_free_dimension;
use crate::examples::matmul_fully_optimized as fully_optimized;
use crate::examples::matmul_hoist_load as hoist_load;
use crate::examples::matmul_tiled as tiled;

use block_free_dimension::nki_matmul_block_free_dimension_;
use fully_optimized::{nki_matmul_fully_optimized_, nki_matmul_fully_optimized_small};
use hoist_load::nki_matmul_hoist_load_;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;
use tiled::{common, matmul_tiled};

type Stage = fn(
    &mut NeuronCore,
    &DeviceTensor<bf16>,
    &DeviceTensor<bf16>,
) -> Result<DeviceTensor<bf16>, LaunchError>;

fn inputs(k: usize, m: usize, n: usize, seed: u64) -> (Array2<bf16>, Array2<bf16>) {
    (
        common::random_bf16(k, m, seed),
        common::random_bf16(k, n, seed + 1),
    )
}

/// Runs `stage` on device-resident inputs and checks it against the f64 reference, the result
/// rounded to bf16 `roundings` times; returns the result's bits.
fn check(name: &str, stage: Stage, k: usize, m: usize, n: usize, roundings: usize) -> Vec<u16> {
    let (a, b) = inputs(k, m, n, (k + m + n) as u64);
    let mut core = NeuronCore::default();
    let (da, db) = (
        DeviceTensor::from_array(&a).unwrap(),
        DeviceTensor::from_array(&b).unwrap(),
    );
    let out = stage(&mut core, &da, &db).unwrap();
    assert_eq!(out.shape(), &[m, n], "{name}");
    let bits = out.as_slice().iter().map(|x| x.to_bits()).collect();
    let out = out.into_array::<Ix2>().unwrap();
    let (reference, magnitude) = common::reference(a.view(), b.view());
    let (worst, within) =
        common::max_error_rounded(out.view(), &reference, &magnitude, k, roundings);
    assert!(
        within,
        "{name} K={k} M={m} N={n}: largest error {worst} exceeds the bound"
    );
    bits
}

#[test]
fn hoist_load_matches_the_reference_and_the_tiled_kernel() {
    for (k, m, n) in [(128, 128, 512), (384, 256, 1024)] {
        let hoisted = check("hoist_load", nki_matmul_hoist_load_, k, m, n, 1);
        let tiled = check("tiled", matmul_tiled, k, m, n, 1);
        // Same tiles, same accumulation order into PSUM: the same bits.
        assert_eq!(hoisted, tiled, "K={k} M={m} N={n}");
    }
}

#[test]
fn block_free_dimension_matches_the_reference_and_the_tiled_kernel() {
    for (k, m, n) in [(128, 256, 1024), (512, 512, 2048)] {
        let blocked = check(
            "block_free_dimension",
            nki_matmul_block_free_dimension_,
            k,
            m,
            n,
            1,
        );
        let tiled = check("tiled", matmul_tiled, k, m, n, 1);
        assert_eq!(blocked, tiled, "K={k} M={m} N={n}");
    }
}

#[test]
fn fully_optimized_matches_the_reference() {
    // One K block: the PSUM sum is rounded to bf16 once, as the other stages round it.
    let one = check(
        "fully_optimized",
        nki_matmul_fully_optimized_,
        1024,
        2048,
        1024,
        1,
    );
    let tiled = check("tiled", matmul_tiled, 1024, 2048, 1024, 1);
    assert_eq!(one, tiled);
    // Two K blocks and two N blocks: each K block's sum is added into the bf16 SBUF result.
    let k = 2 * fully_optimized::BLOCK_K;
    check(
        "fully_optimized",
        nki_matmul_fully_optimized_,
        k,
        2048,
        2048,
        k / fully_optimized::BLOCK_K,
    );
}

#[test]
fn fully_optimized_small_blocks_match_the_reference() {
    // Blocks of 512 rows, 512 columns and 512 of the contraction: a shape the tutorial's
    // blocks do not divide, two K blocks.
    let small = check(
        "fully_optimized_small",
        nki_matmul_fully_optimized_small,
        1024,
        512,
        1536,
        2,
    );
    assert_eq!(small.len(), 512 * 1536);
    let (a, b) = inputs(1024, 512, 1536, 1);
    let (da, db) = (
        DeviceTensor::from_array(&a).unwrap(),
        DeviceTensor::from_array(&b).unwrap(),
    );
    assert!(nki_matmul_fully_optimized_(&mut NeuronCore::default(), &da, &db).is_err());
}

#[test]
fn launch_constraints_name_the_shape_each_stage_needs() {
    let mut core = NeuronCore::default();
    let mut err = |stage: Stage, k: usize, m: usize, n: usize| {
        let a = DeviceTensor::<bf16>::zeros(&[k, m]).unwrap();
        let b = DeviceTensor::<bf16>::zeros(&[k, n]).unwrap();
        stage(&mut core, &a, &b).unwrap_err().to_string()
    };
    // NKI's block tiles sized by K: room for 152 K tiles beside the other tiles (K ≤ 19456).
    let e = err(nki_matmul_hoist_load_, 19456 + 128, 128, 512);
    assert!(
        e.contains("lhs_t_tiles blocks: K / 128 <= 152") && e.contains("K = 19584"),
        "{e}"
    );
    // Room for 76 K tiles of both block tiles beside the other tiles (K ≤ 9728).
    let e = err(nki_matmul_block_free_dimension_, 9728 + 128, 256, 1024);
    assert!(
        e.contains("lhs_t_tiles blocks: K / 128 <= 76") && e.contains("K = 9856"),
        "{e}"
    );
    // Blocks: M % 256 and N % 1024 for block_free_dimension; K % 1024, M % 2048, N % 1024 and
    // at most 2 blocks of M for fully_optimized (its `result_tiles` is NKI's at M = 4096).
    let e = err(nki_matmul_block_free_dimension_, 128, 128, 1024);
    assert!(e.contains("M % 256 == 0"), "{e}");
    let e = err(nki_matmul_block_free_dimension_, 128, 256, 512);
    assert!(e.contains("N % 1024 == 0"), "{e}");
    let e = err(nki_matmul_fully_optimized_, 512, 2048, 1024);
    assert!(e.contains("K % 1024 == 0"), "{e}");
    let e = err(nki_matmul_fully_optimized_, 1024, 1024, 1024);
    assert!(e.contains("M % 2048 == 0"), "{e}");
    let e = err(nki_matmul_fully_optimized_, 1024, 2048, 512);
    assert!(e.contains("N % 1024 == 0"), "{e}");
    let e = err(nki_matmul_fully_optimized_, 1024, 3 * 2048, 1024);
    assert!(e.contains("result_tiles") && e.contains("6144"), "{e}");
}
