//! The NKI Library's `cumsum` (`examples/nkilib_cumsum.rs`) at shapes of
//! `test/integration/nkilib/core/cumsum/test_cumsum.py`, in f32 and bf16, against a running sum
//! in f64 written here, with the library test's tolerance (`atol` 1e-2 above 5000 columns, 1e-3
//! below; `rtol` 1e-2 for bf16, 1e-3 for f32; `|got - want| <= atol + rtol·|want|`).
//!
//! The shapes cover a single row (`[1, 256]`), one full tile (`[128, 2048]`), ragged partition
//! tiles (200 = 128 + 72, 300 = 2·128 + 44 and 64 rows), a last free tile that is not 2048 wide
//! (5000 = 2·2048 + 904, 1000) so the `min()` slices are ragged, and more than 2048 columns
//! (5000, 6144) so the carry from one free tile into the next is exercised.

use crate::common;
use crate::examples::nkilib_cumsum::*;

use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `np.cumsum(x, axis=-1)` in f64.
fn running_sum(x: &Array2<f64>) -> Array2<f64> {
    let (b, h) = x.dim();
    let mut want = Array2::<f64>::zeros((b, h));
    for r in 0..b {
        let mut s = 0.0;
        for c in 0..h {
            s += x[[r, c]];
            want[[r, c]] = s;
        }
    }
    want
}

/// Asserts `np.allclose(got, want, rtol, atol)` element by element.
fn assert_close(name: &str, got: &Array2<f64>, want: &Array2<f64>, atol: f64, rtol: f64) {
    assert_eq!(got.dim(), want.dim(), "{name}: shape");
    for ((r, c), &w) in want.indexed_iter() {
        let g = got[[r, c]];
        assert!(
            (g - w).abs() <= atol + rtol * w.abs(),
            "{name} [{r}, {c}]: {g} vs {w}"
        );
    }
}

type F32Kernel = fn(&mut NeuronCore, nki::ndarray::ArrayView2<f32>) -> Array2<f32>;

#[test]
fn f32_matches_np_cumsum_with_the_library_tolerance() {
    let cases: [(usize, usize, F32Kernel); 3] = [
        (1, 256, |c, x| cumsum_f32_1x256::host(c, x).unwrap()),
        (128, 2048, |c, x| cumsum_f32_128x2048::host(c, x).unwrap()),
        (200, 5000, |c, x| cumsum_f32_200x5000::host(c, x).unwrap()),
    ];
    for (b, h, run) in cases {
        let x = common::rand_f32(Ix2(b, h), (b * h) as u64, -2.0, 2.0);
        let got = run(&mut NeuronCore::default(), x.view());
        let want = running_sum(&x.mapv(f64::from));
        let (atol, rtol) = (if h > 5000 { 1e-2 } else { 1e-3 }, 1e-3);
        assert_close(&format!("f32 [{b}, {h}]"), &got.mapv(f64::from), &want, atol, rtol);
    }
}

#[test]
fn bf16_matches_np_cumsum_with_the_library_tolerance() {
    // 300 × 6144: three partition tiles (the last of 44 rows), three full free tiles.
    let x = common::rand_f32(Ix2(300, 6144), 7, -2.0, 2.0).mapv(bf16::from_f32);
    let got = cumsum_bf16_300x6144::host(&mut NeuronCore::default(), x.view()).unwrap();
    let want = running_sum(&x.mapv(f64::from));
    assert_close("bf16 [300, 6144]", &got.mapv(f64::from), &want, 1e-2, 1e-2);

    // 64 × 1000: one ragged tile each way.
    let x = common::rand_f32(Ix2(64, 1000), 8, -2.0, 2.0).mapv(bf16::from_f32);
    let got = cumsum_bf16_64x1000::host(&mut NeuronCore::default(), x.view()).unwrap();
    let want = running_sum(&x.mapv(f64::from));
    assert_close("bf16 [64, 1000]", &got.mapv(f64::from), &want, 1e-3, 1e-2);
}

#[test]
fn the_carry_crosses_free_tiles() {
    // All ones: column c of every row holds c + 1 exactly in f32, so a lost or doubled carry at
    // 2048 or 4096 shows as an exact mismatch.
    let x = Array2::<f32>::ones((200, 5000));
    let got = cumsum_f32_200x5000::host(&mut NeuronCore::default(), x.view()).unwrap();
    for ((r, c), &g) in got.indexed_iter() {
        assert_eq!(g, (c + 1) as f32, "[{r}, {c}]");
    }
}
