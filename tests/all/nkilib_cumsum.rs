//! The NKI Library's `cumsum` (`examples/nkilib_cumsum.rs`) at shapes of
//! `test/integration/nkilib/core/cumsum/test_cumsum.py`, in f32 and bf16, against a running sum
//! in f64 written here, with the library test's tolerance (`atol` 1e-2 above 5000 columns, 1e-3
//! below; `rtol` 1e-2 for bf16, 1e-3 for f32; `|got - want| <= atol + rtol·|want|`).
//!
//! The shapes cover a single row (`[1, 256]`), one full tile (`[128, 2048]`), ragged partition
//! tiles (200 = 128 + 72, 300 = 2·128 + 44 and 64 rows), a last free tile that is not 2048 wide
//! (5000 = 2·2048 + 904, 1000) so the `min()` slices are ragged, and more than 2048 columns
//! (5000, 6144) so the carry from one free tile into the next is exercised.
//!
//! In bf16 the library's tolerance alone does not hold past the first free tile: the kernel's
//! result tile has the input's dtype, so each carry is rounded to bf16 before it seeds the next
//! tile (the source does the same), and that error (up to 2⁻⁸ of the carried value) is added to
//! the bound of every later column (`bf16_bound`). Without it `[300, 6144]` fails at column
//! 3989 (16.625 against 16.4495).

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
        assert_close(
            &format!("f32 [{b}, {h}]"),
            &got.mapv(f64::from),
            &want,
            atol,
            rtol,
        );
    }
}

/// The bound of a bf16 result: the library test's `atol + rtol·|want|`, plus the rounding of
/// each carry. The kernel's `result_sb` has the input's dtype, so the last column of a free
/// tile is rounded to bf16 before it seeds the next tile's scan (as on the hardware: the
/// source's `result_sb` is `x.dtype` too), and every column after it inherits that error, up
/// to half a bf16 ulp (2⁻⁸ relative) of the carried value per carry.
fn bf16_bound(want: &Array2<f64>, atol: f64, rtol: f64) -> Array2<f64> {
    let (b, h) = want.dim();
    let mut bound = Array2::<f64>::zeros((b, h));
    for r in 0..b {
        let mut carried = 0.0;
        for c in 0..h {
            bound[[r, c]] = atol + rtol * want[[r, c]].abs() + carried;
            if c % 2048 == 2047 {
                carried += 2f64.powi(-8) * (want[[r, c]].abs() + carried);
            }
        }
    }
    bound
}

#[test]
fn bf16_matches_np_cumsum_with_the_library_tolerance_and_the_carry_rounding() {
    // 300 × 6144: three partition tiles (the last of 44 rows), three full free tiles; 64 ×
    // 1000: one ragged tile each way (no carry, the library's tolerance alone).
    type Bf16Kernel = fn(&mut NeuronCore, nki::ndarray::ArrayView2<bf16>) -> Array2<bf16>;
    let cases: [(usize, usize, Bf16Kernel); 2] = [
        (300, 6144, |c, x| cumsum_bf16_300x6144::host(c, x).unwrap()),
        (64, 1000, |c, x| cumsum_bf16_64x1000::host(c, x).unwrap()),
    ];
    for (b, h, run) in cases {
        let x = common::rand_f32(Ix2(b, h), (b + h) as u64, -2.0, 2.0).mapv(bf16::from_f32);
        let got = run(&mut NeuronCore::default(), x.view()).mapv(f64::from);
        let want = running_sum(&x.mapv(f64::from));
        let atol = if h > 5000 { 1e-2 } else { 1e-3 };
        let bound = bf16_bound(&want, atol, 1e-2);
        for ((r, c), &w) in want.indexed_iter() {
            let g = got[[r, c]];
            assert!(
                (g - w).abs() <= bound[[r, c]],
                "bf16 [{b}, {h}] [{r}, {c}]: {g} vs {w} (bound {})",
                bound[[r, c]]
            );
        }
    }
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

#[test]
fn three_d_inputs_reshape_to_rows() {
    // test_cumsum.py's `64_1024_3_4_bfloat16` (64 × 4 = 256 rows, one free tile), and 50 × 3 =
    // 150 rows (128 + 22) of 5000 columns in f32, through the kernel's HBM reshape to 2-D.
    let x = common::rand_f32(nki::ndarray::Ix3(64, 4, 1024), 42, -2.0, 2.0).mapv(bf16::from_f32);
    let got = cumsum_3d_bf16_64x4x1024::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(got.shape(), &[64, 4, 1024]);
    let rows = |a: nki::ndarray::Array3<f64>| a.into_shape_with_order((256, 1024)).unwrap();
    let want = running_sum(&rows(x.mapv(f64::from)));
    assert_close(
        "bf16 [64, 4, 1024]",
        &rows(got.mapv(f64::from)),
        &want,
        1e-3,
        1e-2,
    );

    let x = common::rand_f32(nki::ndarray::Ix3(50, 3, 5000), 43, -2.0, 2.0);
    let got = cumsum_3d_f32_50x3x5000::host(&mut NeuronCore::default(), x.view()).unwrap();
    let rows = |a: nki::ndarray::Array3<f64>| a.into_shape_with_order((150, 5000)).unwrap();
    let want = running_sum(&rows(x.mapv(f64::from)));
    assert_close(
        "f32 [50, 3, 5000]",
        &rows(got.mapv(f64::from)),
        &want,
        1e-3,
        1e-3,
    );
}
