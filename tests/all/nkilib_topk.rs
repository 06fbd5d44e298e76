//! The NKI Library's scanning top-k (`examples/nkilib_topk.rs`) at shapes of
//! `test/integration/nkilib/core/topk/test_topk.py`'s sweep, in f32 and bf16, against a sort in
//! f64 written here: each row's `k` values are its `k` largest, largest first, and each index
//! is a distinct position holding its value (ties may be broken either way, as the library
//! test accepts by checking the values only).
//!
//! The shapes cover one row short of a tile with `k = 1` (`[7, 256]`, a ragged tile padded with
//! the dtype's lowest value), a ragged second tile with `k` not a multiple of 8 (`[200, 3168]`,
//! `k = 13`: one fold of `nc_match_replace8`, then the `max8` / `nc_find_index8` fold),
//! bf16 with ties (`[130, 4058]`, `k = 20`), and `k` equal to the row length (`[16, 256]`,
//! `k = 256`: every element, sorted).

use crate::examples::nkilib_topk::*;

use nki::bf16;
use nki::ndarray::{Array2, ArrayView2};
use nki::prelude::*;

/// Draws in `[-4, 4)` from a splitmix64 stream, each exact in bf16 (so the f32 and bf16
/// cases see the same values and bf16 rows have ties).
fn draws(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut s = seed;
    Array2::from_shape_simple_fn((rows, cols), || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        bf16::from_f32((z >> 40) as f32 / (1u64 << 24) as f32 * 8.0 - 4.0).to_f32()
    })
}

/// Asserts that `vals`/`idx` are a top-k of `x`, largest first.
fn assert_topk(name: &str, x: ArrayView2<f32>, vals: ArrayView2<f32>, idx: ArrayView2<u32>) {
    let k = vals.ncols();
    for r in 0..x.nrows() {
        let mut sorted: Vec<f64> = x.row(r).iter().map(|&v| f64::from(v)).collect();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let mut seen = std::collections::HashSet::new();
        for j in 0..k {
            let v = f64::from(vals[[r, j]]);
            assert_eq!(v, sorted[j], "{name}: row {r}, value {j}");
            let i = idx[[r, j]] as usize;
            assert!(
                i < x.ncols(),
                "{name}: row {r}, index {j} = {i} out of the row"
            );
            assert_eq!(f64::from(x[[r, i]]), v, "{name}: row {r}, index {j} = {i}");
            assert!(seen.insert(i), "{name}: row {r}, index {i} twice");
        }
    }
}

#[test]
fn f32_rows_in_ragged_tiles_and_a_last_partial_fold() {
    let mut core = NeuronCore::default();
    let x = draws(7, 256, 1);
    let (v, i) = topk_f32_7x256_k1::host(&mut core, x.view()).unwrap();
    assert_topk("[7, 256] k 1", x.view(), v.view(), i.view());
    let x = draws(200, 3168, 2);
    let (v, i) = topk_f32_200x3168_k13::host(&mut core, x.view()).unwrap();
    assert_topk("[200, 3168] k 13", x.view(), v.view(), i.view());
}

#[test]
fn bf16_rows_with_ties_and_k_equal_to_the_row() {
    let mut core = NeuronCore::default();
    let x = draws(130, 4058, 3);
    let xb = x.mapv(bf16::from_f32);
    let (v, i) = topk_bf16_130x4058_k20::host(&mut core, xb.view()).unwrap();
    assert_topk(
        "[130, 4058] k 20",
        x.view(),
        v.mapv(bf16::to_f32).view(),
        i.view(),
    );
    let x = draws(16, 256, 4);
    let xb = x.mapv(bf16::from_f32);
    let (v, i) = topk_bf16_16x256_k256::host(&mut core, xb.view()).unwrap();
    assert_topk(
        "[16, 256] k 256",
        x.view(),
        v.mapv(bf16::to_f32).view(),
        i.view(),
    );
}
