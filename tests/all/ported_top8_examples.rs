//! The NKI API pages' examples of `max8`, `nc_find_index8` and `nc_match_replace8`
//! (aws-neuron-sdk `general/nki/test/test_nki_isa_max8.py`, `test_nki_isa_nc_find_index8.py`,
//! `test_nki_isa_nc_match_replace8.py`), ported with their names and shapes, checked with their
//! tests' assertions and against plain loops.
//!
//! What differs: the examples draw their tile with `nl.rand((32, 128))`; here the same uniform
//! `[0, 1)` values come from the host, loaded from an input (a kernel's random numbers are not
//! this port's subject). `float('-inf')` is written `-1e39`, which rounds to −∞ as an fp32
//! immediate (the language has no infinity literal).

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

#[kernel]
fn nki_max8(expr_a: Hbm<f32, 32, 128>) -> Hbm<f32, 32, 8> {
    let expr_a = load(expr_a[..]);
    let a = max8(src = expr_a);
    let a_tensor = ndarray([32, 8], f32, SharedHbm);
    store(a_tensor[..], value = a);
    a_tensor
}

#[kernel]
fn nki_max_index8(data: Hbm<f32, 32, 128>) -> Hbm<u32, 32, 8> {
    let data = load(data[..]);
    // Find max 8 values per row
    let max_vals = max8(src = data);
    // Create output tensor for indices
    let indices_tensor = ndarray([32, 8], u32, SharedHbm);
    // Find indices of max values
    let indices = nc_find_index8(data = data, vals = max_vals);
    // Store results
    store(indices_tensor[..], value = indices);
    indices_tensor
}

#[kernel]
fn nki_nc_match_replace8(data_tile: Hbm<f32, 4, 16>) -> Hbm<f32, 4, 16> {
    let data_tile = load(data_tile[..]);
    let max_vals = max8(src = data_tile);
    let result = nc_match_replace8(
        data = data_tile[[0..4, 0..16]],
        vals = max_vals,
        imm = -1e39,
    );
    let result_tensor = ndarray([4, 16], f32, SharedHbm);
    store(result_tensor[..], value = result);
    result_tensor
}

/// The 8 largest of a row of distinct finite values, largest first, with their positions.
fn top8(row: &[f32]) -> Vec<(f32, u32)> {
    let mut v: Vec<(f32, u32)> = row.iter().copied().zip(0..).collect();
    v.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    v.truncate(8);
    v
}

fn rand01(p: usize, f: usize, seed: u64) -> Array2<f32> {
    rand_f32(Ix2(p, f), seed, 0.0, 1.0)
}

#[test]
fn max8_example() {
    let x = rand01(32, 128, 41);
    let a = nki_max8::host(&mut NeuronCore::default(), x.view()).unwrap();
    // The example's assertions.
    assert_eq!(a.dim(), (32, 8));
    assert!(a.iter().all(|&v| (0.0..=1.0).contains(&v)));
    for r in a.rows() {
        assert!(r.windows(2).into_iter().all(|w| w[1] <= w[0]), "descending");
    }
    for p in 0..32 {
        let want: Vec<f32> = top8(&x.row(p).to_vec()).iter().map(|t| t.0).collect();
        assert_eq!(a.row(p).to_vec(), want, "row {p}");
    }
}

#[test]
fn nc_find_index8_example() {
    let x = rand01(32, 128, 42);
    let indices = nki_max_index8::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(indices.dim(), (32, 8));
    assert!(indices.iter().all(|&i| i < 128));
    for r in indices.rows() {
        assert!(r.windows(2).into_iter().all(|w| w[0] != w[1]), "unique");
    }
    for p in 0..32 {
        let want: Vec<u32> = top8(&x.row(p).to_vec()).iter().map(|t| t.1).collect();
        assert_eq!(indices.row(p).to_vec(), want, "row {p}");
    }
}

#[test]
fn nc_match_replace8_example() {
    let x = rand01(4, 16, 43);
    let result = nki_nc_match_replace8::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(result.dim(), (4, 16));
    for p in 0..4 {
        let row = result.row(p);
        assert_eq!(row.iter().filter(|v| **v == f32::NEG_INFINITY).count(), 8);
        assert!(
            row.iter()
                .filter(|v| **v != f32::NEG_INFINITY)
                .all(|v| (0.0..=1.0).contains(v))
        );
        let mut want = x.row(p).to_vec();
        for (_, i) in top8(&x.row(p).to_vec()) {
            want[i as usize] = f32::NEG_INFINITY;
        }
        assert_eq!(row.to_vec(), want, "row {p}");
    }
}
