//! The NKI Library's `rmsnorm_quant` (`examples/nkilib_rmsnorm_quant.rs`) against the library
//! test's `rmsnorm_quant_ref` written in f64 (`reference` there), with its tolerances: each
//! quantised value within `norm_values_rtol` 0.072 of the exact value (plus half a
//! `float8_e4m3` subnormal step, `value_bound`), each row's fp32 dequantisation scale (read from
//! the row's 4 trailing bytes) within `deq_scale_rtol` 0.007.
//!
//! The shapes cover one full row tile and a ragged one (`[1, 160, 1024]`: 128 + 32 rows), two
//! batches ragged in both axes with a lower bound (`[2, 100, 1000]`, `lower_bound` 0.5: 128 + 72
//! rows, gamma tiles 512 + 488), more than 8 gamma column tiles (`[1, 130, 4608]`: one batch of
//! 8 and a remainder of 1), quantisation only (`[1, 2, 4100]`), an f16 input, and static
//! quantisation with and without normalisation.

use crate::common;
use crate::examples::nkilib_rmsnorm_quant::*;

use nki::F8E4M3;
use nki::ndarray::{Array1, Array3, ArrayView1, ArrayView3, Ix1, Ix3, s};
use nki::prelude::*;

/// Checks a ROW output `[B, S, H + 4]` against the reference of `hidden` and `gamma`.
fn check_row(
    name: &str,
    got: &Array3<F8E4M3>,
    hidden: ArrayView3<f64>,
    gamma: ArrayView1<f64>,
    norm: bool,
    lower_bound: f64,
) {
    let (b, s, h) = hidden.dim();
    assert_eq!(got.dim(), (b, s, h + 4), "{name}: shape");
    let (want, scales) = reference(hidden, gamma, norm, lower_bound, 1e-6, None);
    for bi in 0..b {
        for si in 0..s {
            let r = bi * s + si;
            for c in 0..h {
                let g = decode_e4m3(got[[bi, si, c]].0);
                let w = want[[r, c]];
                assert!(
                    (g - w).abs() <= value_bound(w),
                    "{name} [{bi}, {si}, {c}]: {g} vs {w}"
                );
            }
            let bytes = [0, 1, 2, 3].map(|i| got[[bi, si, h + i]].0);
            let scale = f64::from(f32::from_le_bytes(bytes));
            let w = scales[r];
            assert!(
                (scale - w).abs() <= 0.007 * w.abs(),
                "{name} [{bi}, {si}] dequantisation scale: {scale} vs {w}"
            );
        }
    }
}

/// Uniform inputs in `[-3, 3)` and gamma in `[0.5, 1.5)`, rounded to bf16.
fn inputs_bf16(b: usize, s: usize, h: usize, seed: u64) -> (Array3<bf16>, Array1<bf16>) {
    let x = common::rand_f32(Ix3(b, s, h), seed, -3.0, 3.0).mapv(bf16::from_f32);
    let g = common::rand_f32(Ix1(h), seed + 1, 0.5, 1.5).mapv(bf16::from_f32);
    (x, g)
}

type RowKernel = fn(&mut NeuronCore, ArrayView3<bf16>, ArrayView1<bf16>) -> Array3<F8E4M3>;

#[test]
fn row_quantisation_matches_the_library_reference() {
    let cases: [(usize, usize, usize, bool, f64, RowKernel); 4] = [
        (1, 160, 1024, true, 0.0, |c, x, g| {
            rmsnorm_quant_row_bf16_1x160x1024::host(c, x, g).unwrap()
        }),
        (1, 130, 4608, true, 0.0, |c, x, g| {
            rmsnorm_quant_row_bf16_1x130x4608::host(c, x, g).unwrap()
        }),
        (2, 100, 1000, true, 0.5, |c, x, g| {
            rmsnorm_quant_row_bf16_2x100x1000_lb::host(c, x, g).unwrap()
        }),
        (1, 2, 4100, false, 0.0, |c, x, g| {
            rmsnorm_quant_row_bf16_1x2x4100_only::host(c, x, g).unwrap()
        }),
    ];
    for (b, s, h, norm, lower_bound, run) in cases {
        let (x, g) = inputs_bf16(b, s, h, (b * s * h) as u64);
        let got = run(&mut NeuronCore::default(), x.view(), g.view());
        check_row(
            &format!("row [{b}, {s}, {h}] norm {norm} lower_bound {lower_bound}"),
            &got,
            x.mapv(f64::from).view(),
            g.mapv(f64::from).view(),
            norm,
            lower_bound,
        );
    }
}

#[test]
fn an_f16_input_is_normalised_in_bf16_and_quantised() {
    let x = common::rand_f32(Ix3(1, 128, 2048), 5, -3.0, 3.0).mapv(f16::from_f32);
    let g = common::rand_f32(Ix1(2048), 6, 0.5, 1.5).mapv(f16::from_f32);
    let got =
        rmsnorm_quant_row_f16_1x128x2048::host(&mut NeuronCore::default(), x.view(), g.view())
            .unwrap();
    check_row(
        "row f16 [1, 128, 2048]",
        &got,
        x.mapv(f64::from).view(),
        g.mapv(f64::from).view(),
        true,
        0.0,
    );
}

#[test]
fn a_lower_bound_clips_the_rows_and_their_scales() {
    // With lower_bound 0.5 and normalised values of magnitude up to about 3, every row's scale
    // is 0.5 / 240 and the clipped values quantise to ±240.
    let (x, g) = inputs_bf16(2, 100, 1000, 11);
    let got =
        rmsnorm_quant_row_bf16_2x100x1000_lb::host(&mut NeuronCore::default(), x.view(), g.view())
            .unwrap();
    let mut saturated = 0;
    for bi in 0..2 {
        for si in 0..100 {
            let bytes = [0, 1, 2, 3].map(|i| got[[bi, si, 1000 + i]].0);
            assert_eq!(
                f32::from_le_bytes(bytes),
                0.5f32 / 240.0,
                "[{bi}, {si}] scale"
            );
            saturated += got
                .slice(s![bi, si, 0..1000])
                .iter()
                .filter(|v| decode_e4m3(v.0).abs() == 240.0)
                .count();
        }
    }
    assert!(saturated > 0, "some values reach the clip");
}

#[test]
fn static_quantisation_matches_the_library_reference() {
    type StaticKernel = fn(
        &mut NeuronCore,
        ArrayView3<bf16>,
        ArrayView1<bf16>,
        nki::ndarray::ArrayView2<f32>,
    ) -> Array3<F8E4M3>;
    let cases: [(usize, usize, usize, bool, StaticKernel); 2] = [
        (1, 160, 1024, true, |c, x, g, d| {
            rmsnorm_quant_static_bf16_1x160x1024::host(c, x, g, d).unwrap()
        }),
        (1, 2, 2048, false, |c, x, g, d| {
            rmsnorm_quant_static_bf16_1x2x2048_only::host(c, x, g, d).unwrap()
        }),
    ];
    for (b, s, h, norm, run) in cases {
        let (x, g) = inputs_bf16(b, s, h, (s * h) as u64 + 3);
        // The library test's static scale: one value near 0.5 broadcast to [128, 1].
        let dequant = 0.4375f32;
        let d = nki::ndarray::Array2::from_elem((128, 1), dequant);
        let got = run(&mut NeuronCore::default(), x.view(), g.view(), d.view());
        assert_eq!(got.dim(), (b, s, h), "static [{b}, {s}, {h}]: shape");
        let (want, _) = reference(
            x.mapv(f64::from).view(),
            g.mapv(f64::from).view(),
            norm,
            0.0,
            1e-6,
            Some(f64::from(dequant)),
        );
        for ((bi, si, c), v) in got.indexed_iter() {
            let w = want[[bi * s + si, c]];
            let g = decode_e4m3(v.0);
            assert!(
                (g - w).abs() <= value_bound(w),
                "static [{bi}, {si}, {c}]: {g} vs {w}"
            );
        }
    }
}
