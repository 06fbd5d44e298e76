//! `select_and_scatter_kernel` of nki-samples' `reference/vision.py` (as of the commit before
//! c4b806e, which removed it), ported with NKI's names, loops, tile sizes and masks, against
//! its unit test's `cpu_golden_result` written as plain loops: for each 3 × 3 window (stride 2,
//! padding 1) of the operand, the source value is added at the window's first maximum.
//!
//! The kernel is `examples/select_and_scatter.rs`'s, which runs the unit test's own shape,
//! 8 × 64 × 112 × 112, in f32 and bf16 against its own golden result
//! (`cargo run --release --example select_and_scatter`: a strict launch there takes about ten
//! times a plain one, which is too long for the test suite). Here the unit test's f32 case runs
//! at 2 × 64 × 16 × 16 and 4 × 64 × 24 × 24 (the same code paths at a fraction of the time),
//! where its `rtol = atol = 1e-2` comparison is exact, since every output element is a sum of
//! at most four source values added in the kernel's order, which the reference follows; its
//! bf16 case runs at 2 × 64 × 16 × 16 with the unit test's tolerance.

use crate::common;

use common::*;
use nki::Element;
use nki::ndarray::{Array4, Ix4};
use nki::prelude::*;

use crate::examples::select_and_scatter::*;

/// The unit test's `cpu_golden_result`: window dimensions (3, 3), strides (2, 2), padding
/// (1, 1) with zeros, `np.argmax` (the first maximum in row-major order) of each window, the
/// source value added there.
fn cpu_golden_result(operand: &Array4<f32>, source: &Array4<f32>) -> Array4<f32> {
    let (n, c, h, w) = operand.dim();
    let (_, _, src_h, src_w) = source.dim();
    let padded = |y: usize, x: usize, b: usize, ch: usize| -> f32 {
        if y == 0 || x == 0 || y > h || x > w {
            0.0
        } else {
            operand[[b, ch, y - 1, x - 1]]
        }
    };
    let mut out = Array4::<f32>::zeros((n, c, h, w));
    for b in 0..n {
        for ch in 0..c {
            for i in 0..src_h {
                for j in 0..src_w {
                    let mut best = (0usize, f32::NEG_INFINITY);
                    for k in 0..9 {
                        let v = padded(2 * i + k / 3, 2 * j + k % 3, b, ch);
                        if v > best.1 {
                            best = (k, v);
                        }
                    }
                    let (oy, ox) = (2 * i + best.0 / 3 - 1, 2 * j + best.0 % 3 - 1);
                    out[[b, ch, oy, ox]] += source[[b, ch, i, j]];
                }
            }
        }
    }
    out
}

/// One launch of `kernel` (strict or not) on the operand and source.
fn launch<E: Element>(
    kernel: &Kernel<'static>,
    operand: &Array4<E>,
    source: &Array4<E>,
    strict: bool,
) -> Array4<E> {
    let mut core = NeuronCore::new(kernel.program().target()).with_strict(strict);
    let a = DeviceTensor::from_array(operand).unwrap();
    let b = DeviceTensor::from_array(source).unwrap();
    let mut out = DeviceTensor::<E>::zeros(operand.shape()).unwrap();
    let mut outs = [out.arg_mut()];
    let ins = [a.arg(), b.arg()];
    let bound = kernel.bind(&ins, &mut outs).unwrap();
    core.execute(bound).unwrap();
    out.into_array::<Ix4>().unwrap()
}

/// The kernel's order of additions: `out_local` starts at 0 and adds the scattered windows in
/// `(iq, ih)` order, which is the window offsets' row-major order (`k = 3 iq + ih`); the
/// reference adds them in source order. Both are exact here: the source values are multiples
/// of 1/8 below 4, and at most four land on one element.
fn check(kernel: &Kernel<'static>, n: usize, hw: usize, seed: u64) {
    let s = hw / 2;
    // The unit test draws `random_sample`; distinct values keep each window's maximum unique
    // apart from the padding's zeros (the operand is positive, so padding never wins).
    let operand = rand_f32(Ix4(n, 64, hw, hw), seed, 0.001, 1.0);
    let source = rand_int(Ix4(n, 64, s, s), seed + 1, 0, 31).mapv(|v| v / 8.0);
    let want = cpu_golden_result(&operand, &source);
    for strict in [true, false] {
        let got = launch(kernel, &operand, &source, strict);
        assert_eq!(got, want, "{} strict {strict}", kernel.program().name());
    }
}

/// The unit test's bf16 case: the operand and source drawn as `random_sample` in `[0, 1)`
/// and rounded to bf16 (so a window often holds its maximum twice: the first one wins in both
/// the kernel and `np.argmax`), the golden result computed in f32 from the rounded values, the
/// kernel's bf16 output compared with `np.allclose(rtol = 1e-2, atol = 1e-2)` (the kernel adds
/// in bf16, rounding after each of up to four additions).
fn check_bf16(kernel: &Kernel<'static>, n: usize, hw: usize, seed: u64) {
    let s = hw / 2;
    let operand = rand_f32(Ix4(n, 64, hw, hw), seed, 0.0, 1.0).mapv(bf16::from_f32);
    let source = rand_f32(Ix4(n, 64, s, s), seed + 1, 0.0, 1.0).mapv(bf16::from_f32);
    let want = cpu_golden_result(&operand.mapv(f32::from), &source.mapv(f32::from));
    let got = launch(kernel, &operand, &source, true).mapv(f32::from);
    let mut compared = 0;
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-2 + 1e-2 * w.abs(),
            "{}: {g} against {w}",
            kernel.program().name()
        );
        compared += 1;
    }
    assert_eq!(compared, n * 64 * hw * hw);
}

#[test]
fn select_and_scatter_matches_the_unit_tests_golden_result() {
    check(&select_and_scatter_2x64x16::KERNEL, 2, 16, 41);
    check(&select_and_scatter_4x64x24::KERNEL, 4, 24, 43);
}

#[test]
fn select_and_scatter_in_bf16_is_within_the_unit_tests_tolerance() {
    check_bf16(&select_and_scatter_2x64x16_bf16::KERNEL, 2, 16, 45);
}
