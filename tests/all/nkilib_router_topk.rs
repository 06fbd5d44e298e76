//! The NKI Library's MoE router (`examples/nkilib_router_topk.rs`) against the library's
//! `router_topk_torch_ref` written in f64 (`reference` there): the router logits within 1e-5
//! (the kernel multiplies bf16 or f32 values into fp32 PSUM), each token's `k` expert indices in
//! the reference's order (each index's logit equal to the reference's `j`-th largest within that
//! tolerance), and the affinities within 1e-6 + 1e-4·|want|.
//!
//! The cases cover one token tile narrower than 128 (`T = 100`, ACT1 without the norm: every
//! expert's softmax), ragged token tiles with padding (`T = 200` = 128 + 72, ACT1 with the top-k
//! normalised and scattered; `T = 300` = 2·128 + 44, ACT2: softmax of the top-k scattered by the
//! one-hot mask), `k` of 2, 4, 6 and 8, `E` up to 512 (one PSUM bank of f32), and f32 inputs.

use crate::common;
use crate::examples::nkilib_router_topk::*;

use nki::ndarray::{Array2, ArrayView2, Ix2};
use nki::prelude::*;

/// Checks the three outputs for `x [H, T]`, `w [H, E]`.
fn check(
    name: &str,
    (logits, index, affinities): (&Array2<f32>, &Array2<u32>, &Array2<f32>),
    x: ArrayView2<f64>,
    w: ArrayView2<f64>,
    (k, pre_norm, norm_topk): (usize, bool, bool),
) {
    let (want_logits, order, want_aff) = reference(x, w, k, pre_norm, norm_topk);
    let (t, e) = want_logits.dim();
    assert_eq!(logits.dim(), (t, e), "{name}: logits shape");
    assert_eq!(index.dim(), (t, k), "{name}: index shape");
    assert_eq!(affinities.dim(), (t, e), "{name}: affinities shape");
    let tol = |v: f64| 1e-5 + 1e-5 * v.abs();
    for ((ti, ei), &want) in want_logits.indexed_iter() {
        let got = f64::from(logits[[ti, ei]]);
        assert!(
            (got - want).abs() <= tol(want),
            "{name} logits [{ti}, {ei}]: {got} vs {want}"
        );
    }
    for ti in 0..t {
        for j in 0..k {
            let got = index[[ti, j]] as usize;
            assert!(got < e, "{name} index [{ti}, {j}]: {got} out of range");
            let (a, b) = (want_logits[[ti, got]], want_logits[[ti, order[ti][j]]]);
            assert!(
                (a - b).abs() <= tol(b),
                "{name} index [{ti}, {j}]: expert {got} (logit {a}), the reference's {} (logit {b})",
                order[ti][j]
            );
        }
    }
    for ((ti, ei), &want) in want_aff.indexed_iter() {
        let got = f64::from(affinities[[ti, ei]]);
        assert!(
            (got - want).abs() <= 1e-6 + 1e-4 * want.abs(),
            "{name} affinities [{ti}, {ei}]: {got} vs {want}"
        );
    }
}

type Bf16Router = fn(
    &mut NeuronCore,
    ArrayView2<bf16>,
    ArrayView2<bf16>,
) -> (Array2<f32>, Array2<u32>, Array2<f32>);

#[test]
fn bf16_routers_match_the_library_reference() {
    let cases: [(usize, usize, usize, usize, bool, bool, Bf16Router); 3] = [
        (100, 256, 64, 4, true, false, |c, x, w| {
            router_topk_bf16_100x256x64_k4::host(c, x, w).unwrap()
        }),
        (200, 384, 96, 6, true, true, |c, x, w| {
            router_topk_bf16_200x384x96_k6_norm::host(c, x, w).unwrap()
        }),
        (300, 256, 40, 2, false, false, |c, x, w| {
            router_topk_bf16_300x256x40_k2_act2::host(c, x, w).unwrap()
        }),
    ];
    for (t, h, e, k, pre_norm, norm_topk, run) in cases {
        let x = common::rand_f32(Ix2(h, t), (t * h) as u64, -1.0, 1.0).mapv(bf16::from_f32);
        let w = common::rand_f32(Ix2(h, e), (h * e) as u64, -0.2, 0.2).mapv(bf16::from_f32);
        let (logits, index, aff) = run(&mut NeuronCore::default(), x.view(), w.view());
        check(
            &format!("T {t} H {h} E {e} k {k} pre_norm {pre_norm} norm {norm_topk}"),
            (&logits, &index, &aff),
            x.mapv(f64::from).view(),
            w.mapv(f64::from).view(),
            (k, pre_norm, norm_topk),
        );
    }
}

#[test]
fn an_f32_router_over_512_experts_scatters_the_top_k_softmax() {
    let x = common::rand_f32(Ix2(128, 128), 41, -1.0, 1.0);
    let w = common::rand_f32(Ix2(128, 512), 42, -0.3, 0.3);
    let (logits, index, aff) =
        router_topk_f32_128x128x512_k8_act2::host(&mut NeuronCore::default(), x.view(), w.view())
            .unwrap();
    check(
        "f32 T 128 H 128 E 512 k 8 act2",
        (&logits, &index, &aff),
        x.mapv(f64::from).view(),
        w.mapv(f64::from).view(),
        (8, false, false),
    );
    // Exactly k experts per token carry an affinity, and they sum to 1.
    for row in aff.rows() {
        assert_eq!(row.iter().filter(|&&v| v != 0.0).count(), 8);
        let s: f64 = row.iter().map(|&v| f64::from(v)).sum();
        assert!((s - 1.0).abs() < 1e-5, "affinities sum to {s}");
    }
}

/// The benchmark's shape (`T = 512`, `H = 2048`, `E = 128`, bf16) on every host path the
/// machine has against the portable one (strict: every instruction as written), bit for bit:
/// the 16 accumulating matmuls of each token tile as one chain split between the threads
/// (`host::chains`), the short rows' top-8 searches and every instruction's vector path give
/// the definition's results. Also checked against the f64 reference.
#[test]
fn every_host_path_gives_the_portable_bits() {
    let (t, h, e) = (512, 2048, 128);
    let x = common::rand_f32(Ix2(h, t), 51, -1.0, 1.0).mapv(bf16::from_f32);
    let w = common::rand_f32(Ix2(h, e), 52, -0.1, 0.1).mapv(bf16::from_f32);
    let run = |core: &mut NeuronCore| {
        router_topk_bf16_512x2048x128_k8_norm::host(core, x.view(), w.view()).unwrap()
    };
    let want = run(&mut NeuronCore::default().with_isa(nki::Isa::Portable).unwrap());
    check(
        "T 512 H 2048 E 128 k 8 norm",
        (&want.0, &want.1, &want.2),
        x.mapv(f64::from).view(),
        w.mapv(f64::from).view(),
        (8, true, true),
    );
    let bits = |a: &Array2<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
    for (at, mut core) in common::host_paths() {
        let got = run(&mut core);
        assert_eq!(bits(&got.0), bits(&want.0), "{at}: logits differ");
        assert_eq!(got.1, want.1, "{at}: indices differ");
        assert_eq!(bits(&got.2), bits(&want.2), "{at}: affinities differ");
    }
}
