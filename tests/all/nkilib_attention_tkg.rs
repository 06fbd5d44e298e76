//! The NKI Library's decode attention (`examples/nkilib_attention_tkg.rs`) against the library's
//! `attention_tkg_torch_ref` written in f64 (`reference` there), with the library test's mask
//! (`library_mask`: each batch's cache length, the active tokens causal), its inputs (uniform in
//! `[0, 1)`, as `np.random.random_sample` draws them) and its tolerance (`maxAllClose` with
//! `rtol = 1e-2`, `atol = 1e-5` in its default mode: `|got − want| ≤ 1e-5 + 1e-2·max|want|`).
//!
//! The cases: the library test's shape `bs 4, q_head 1, s_active 5, s_prior 10240, d_head 128`
//! (flash attention over a tile of 8192 positions and a ragged one of 2048: the running max, sum
//! and output); `bs 4, q_head 10, s_active 5, s_prior 5376, d_head 64`, a shape of the library's
//! tests (there with `strided_mm1 = False`, which is not ported) without flash attention, whose
//! 200 query columns make a full tile of 128 and a remainder of 72 in the cascaded reductions and
//! the transposes; `bs 2, q_head 2, s_active 7, s_prior 9216` of a 16384-position cache (flash
//! attention whose last tile of 1024 positions holds only the active tokens a query may see, so
//! the running max meets a tile of lower maxima); and one f32 token against 128 positions of a
//! 256-position cache (one column tile: `v_active` in a whole partition).
//!
//! With the library's inputs the active tokens' scores (about 32 ± 2.5 at `d_head` 128) stay far
//! below the largest of thousands of prior scores, so they carry almost no weight, and a last
//! flash-attention tile holding only them never raises the running max. Outside the library's
//! case the active keys are drawn from `[0, 1.3)`: the active tokens then weigh as much as the
//! prior's largest scores, and the last tile of the 9216-position case raises the running max,
//! so a misplaced `k_active` or a correction factor left at 1 fails the check.

use crate::common;
use crate::examples::nkilib_attention_tkg::*;

use nki::ndarray::{Array2, Array4, Ix2, Ix4};
use nki::prelude::*;

/// Random inputs of a case: `(q, k_active, v_active, k_prior, v_prior)` in f32, uniform in
/// `[0, 1)` as the library test draws them, the active keys in `[0, k_active_hi)`.
#[allow(clippy::type_complexity)]
fn inputs(
    (b, h, sa, sf, d): (usize, usize, usize, usize, usize),
    seed: u64,
    k_active_hi: f64,
) -> (
    Array2<f32>,
    Array2<f32>,
    Array4<f32>,
    Array4<f32>,
    Array4<f32>,
) {
    (
        common::rand_f32(Ix2(d, b * h * sa), seed, 0.0, 1.0),
        common::rand_f32(Ix2(d, b * sa), seed + 1, 0.0, k_active_hi),
        common::rand_f32(Ix4(b, 1, sa, d), seed + 2, 0.0, 1.0),
        common::rand_f32(Ix4(b, 1, d, sf), seed + 3, 0.0, 1.0),
        common::rand_f32(Ix4(b, 1, sf, d), seed + 4, 0.0, 1.0),
    )
}

/// Checks `got [B, H, D, SA]` against the reference of the (already rounded) inputs.
fn check(
    name: &str,
    got: &Array4<f64>,
    (q, ka, va, kp, vp): (
        &Array2<f64>,
        &Array2<f64>,
        &Array4<f64>,
        &Array4<f64>,
        &Array4<f64>,
    ),
    mask: &Array4<u8>,
    dims: (usize, usize, usize, usize, usize),
) {
    let want = reference(
        q.view(),
        ka.view(),
        va.view(),
        kp.view(),
        vp.view(),
        mask.view(),
        dims,
    );
    assert_eq!(got.dim(), want.dim(), "{name}: output shape");
    let range = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    for (ix, &w) in want.indexed_iter() {
        let g = got[ix];
        assert!(
            (g - w).abs() <= 1e-5 + 1e-2 * range,
            "{name} out {ix:?}: {g} vs {w} (max |want| {range})"
        );
    }
}

type Bf16Attention = fn(
    &mut NeuronCore,
    (
        &Array2<bf16>,
        &Array2<bf16>,
        &Array4<bf16>,
        &Array4<bf16>,
        &Array4<bf16>,
    ),
    &Array4<u8>,
) -> Array4<bf16>;

#[test]
fn bf16_decode_attention_matches_the_library_reference() {
    let cases: [(
        (usize, usize, usize, usize, usize, usize),
        f64,
        Bf16Attention,
    ); 3] = [
        (
            (4, 1, 5, 10240, 10240, 128),
            1.0,
            |c, (q, ka, va, kp, vp), m| {
                attention_tkg_bf16_b4_h1_sa5_s10240_d128::host(
                    c,
                    q.view(),
                    ka.view(),
                    va.view(),
                    kp.view(),
                    vp.view(),
                    m.view(),
                )
                .unwrap()
            },
        ),
        (
            (4, 10, 5, 5376, 5376, 64),
            1.3,
            |c, (q, ka, va, kp, vp), m| {
                attention_tkg_bf16_b4_h10_sa5_s5376_d64::host(
                    c,
                    q.view(),
                    ka.view(),
                    va.view(),
                    kp.view(),
                    vp.view(),
                    m.view(),
                )
                .unwrap()
            },
        ),
        (
            (2, 2, 7, 9216, 16384, 64),
            1.3,
            |c, (q, ka, va, kp, vp), m| {
                attention_tkg_bf16_b2_h2_sa7_s9216_d64::host(
                    c,
                    q.view(),
                    ka.view(),
                    va.view(),
                    kp.view(),
                    vp.view(),
                    m.view(),
                )
                .unwrap()
            },
        ),
    ];
    for ((b, h, sa, s, sf, d), k_active_hi, run) in cases {
        let (q, ka, va, kp, vp) = inputs((b, h, sa, sf, d), (b * h * sa * s) as u64, k_active_hi);
        let to_bf16 = |x: f32| bf16::from_f32(x);
        let (q, ka, va, kp, vp) = (
            q.mapv(to_bf16),
            ka.mapv(to_bf16),
            va.mapv(to_bf16),
            kp.mapv(to_bf16),
            vp.mapv(to_bf16),
        );
        let mask = library_mask(b, h, sa, s);
        let got = run(&mut NeuronCore::default(), (&q, &ka, &va, &kp, &vp), &mask);
        check(
            &format!("bs {b} q_head {h} s_active {sa} s_prior {s} d_head {d} bf16"),
            &got.mapv(f64::from),
            (
                &q.mapv(f64::from),
                &ka.mapv(f64::from),
                &va.mapv(f64::from),
                &kp.mapv(f64::from),
                &vp.mapv(f64::from),
            ),
            &mask,
            (b, h, sa, s, d),
        );
    }
}

#[test]
fn an_f32_token_against_one_column_tile() {
    let (b, h, sa, s, sf, d) = (1, 1, 1, 128, 256, 64);
    let (q, ka, va, kp, vp) = inputs((b, h, sa, sf, d), 7, 1.3);
    let mask = library_mask(b, h, sa, s);
    let got = attention_tkg_f32_b1_h1_sa1_s128_d64::host(
        &mut NeuronCore::default(),
        q.view(),
        ka.view(),
        va.view(),
        kp.view(),
        vp.view(),
        mask.view(),
    )
    .unwrap();
    check(
        "f32 bs 1 q_head 1 s_active 1 s_prior 128 d_head 64",
        &got.mapv(f64::from),
        (
            &q.mapv(f64::from),
            &ka.mapv(f64::from),
            &va.mapv(f64::from),
            &kp.mapv(f64::from),
            &vp.mapv(f64::from),
        ),
        &mask,
        (b, h, sa, s, d),
    );
    // The cache length masks positions 96.. but the active one (127): no weight may land there.
    assert!(mask.iter().filter(|&&m| m != 0).count() == 97);
}
