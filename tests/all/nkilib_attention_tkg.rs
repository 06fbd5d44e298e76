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

/// A case's inputs `(q, k_active, v_active, k_prior, v_prior)`.
type Inputs<T> = (Array2<T>, Array2<T>, Array4<T>, Array4<T>, Array4<T>);

/// `(bs, q_head, s_active, s_prior, full_sprior, d_head)`.
type Dims = (usize, usize, usize, usize, usize, usize);

/// A bf16 instantiation's host launch.
type Bf16Attention = fn(&mut NeuronCore, &Inputs<bf16>, &Array4<u8>) -> Array4<bf16>;

/// Random inputs of a case in f32, uniform in `[0, 1)` as the library test draws them, the
/// active keys in `[0, k_active_hi)`.
fn inputs((b, h, sa, _, sf, d): Dims, seed: u64, k_active_hi: f64) -> Inputs<f32> {
    (
        common::rand_f32(Ix2(d, b * h * sa), seed, 0.0, 1.0),
        common::rand_f32(Ix2(d, b * sa), seed + 1, 0.0, k_active_hi),
        common::rand_f32(Ix4(b, 1, sa, d), seed + 2, 0.0, 1.0),
        common::rand_f32(Ix4(b, 1, d, sf), seed + 3, 0.0, 1.0),
        common::rand_f32(Ix4(b, 1, sf, d), seed + 4, 0.0, 1.0),
    )
}

/// Checks `got [B, H, D, SA]` against the reference of the (already rounded) inputs.
fn check(name: &str, got: &Array4<f64>, x: &Inputs<f64>, mask: &Array4<u8>, dims: Dims) {
    let (b, h, sa, s, _, d) = dims;
    let want = reference(
        x.0.view(),
        x.1.view(),
        x.2.view(),
        x.3.view(),
        x.4.view(),
        mask.view(),
        (b, h, sa, s, d),
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

/// The inputs in f64, for the reference.
fn widened<T: Copy>(x: &Inputs<T>) -> Inputs<f64>
where
    f64: From<T>,
{
    (
        x.0.mapv(f64::from),
        x.1.mapv(f64::from),
        x.2.mapv(f64::from),
        x.3.mapv(f64::from),
        x.4.mapv(f64::from),
    )
}

/// A case's inputs rounded to bf16.
fn to_bf16(x: Inputs<f32>) -> Inputs<bf16> {
    (
        x.0.mapv(bf16::from_f32),
        x.1.mapv(bf16::from_f32),
        x.2.mapv(bf16::from_f32),
        x.3.mapv(bf16::from_f32),
        x.4.mapv(bf16::from_f32),
    )
}

#[test]
fn bf16_decode_attention_matches_the_library_reference() {
    let cases: [(Dims, f64, Bf16Attention); 3] = [
        ((4, 1, 5, 10240, 10240, 128), 1.0, |c, x, m| {
            attention_tkg_bf16_b4_h1_sa5_s10240_d128::host(
                c,
                x.0.view(),
                x.1.view(),
                x.2.view(),
                x.3.view(),
                x.4.view(),
                m.view(),
            )
            .unwrap()
        }),
        ((4, 10, 5, 5376, 5376, 64), 1.3, |c, x, m| {
            attention_tkg_bf16_b4_h10_sa5_s5376_d64::host(
                c,
                x.0.view(),
                x.1.view(),
                x.2.view(),
                x.3.view(),
                x.4.view(),
                m.view(),
            )
            .unwrap()
        }),
        ((2, 2, 7, 9216, 16384, 64), 1.3, |c, x, m| {
            attention_tkg_bf16_b2_h2_sa7_s9216_d64::host(
                c,
                x.0.view(),
                x.1.view(),
                x.2.view(),
                x.3.view(),
                x.4.view(),
                m.view(),
            )
            .unwrap()
        }),
    ];
    for (dims, k_active_hi, run) in cases {
        let (b, h, sa, s, _, d) = dims;
        let x = to_bf16(inputs(dims, (b * h * sa * s) as u64, k_active_hi));
        let mask = library_mask(b, h, sa, s);
        let got = run(&mut NeuronCore::default(), &x, &mask);
        check(
            &format!("bs {b} q_head {h} s_active {sa} s_prior {s} d_head {d} bf16"),
            &got.mapv(f64::from),
            &widened(&x),
            &mask,
            dims,
        );
    }
}

/// The library's shape on every host path the machine has against the portable one (strict:
/// every instruction as written), bit for bit: the narrow matmul kernels (one matmul, and the
/// `kᵀq` group in one pass over the key tile), the other shortcuts of plain launches and every
/// instruction's vector path give the definition's results.
#[test]
fn every_host_path_gives_the_portable_bits() {
    let dims = (4, 1, 5, 10240, 10240, 128);
    let x = to_bf16(inputs(dims, 11, 1.3));
    let mask = library_mask(4, 1, 5, 10240);
    let run = |core: &mut NeuronCore| {
        attention_tkg_bf16_b4_h1_sa5_s10240_d128::host(
            core,
            x.0.view(),
            x.1.view(),
            x.2.view(),
            x.3.view(),
            x.4.view(),
            mask.view(),
        )
        .unwrap()
    };
    // Strict launches (the default in debug builds) run every instruction as written; plain
    // ones take the host's shortcuts (`host::strided`'s groups among them).
    let want = run(&mut NeuronCore::default().with_isa(nki::Isa::Portable).unwrap());
    for (at, mut core) in common::host_paths() {
        let got = run(&mut core);
        let differ = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| g.to_bits() != w.to_bits())
            .count();
        assert_eq!(differ, 0, "{at}: {differ} elements differ");
    }
}

#[test]
fn an_f32_token_against_one_column_tile() {
    let dims = (1, 1, 1, 128, 256, 64);
    let x = inputs(dims, 7, 1.3);
    let mask = library_mask(1, 1, 1, 128);
    let got = attention_tkg_f32_b1_h1_sa1_s128_d64::host(
        &mut NeuronCore::default(),
        x.0.view(),
        x.1.view(),
        x.2.view(),
        x.3.view(),
        x.4.view(),
        mask.view(),
    )
    .unwrap();
    // The library's cache length for this shape is 96: positions 0..96 and the active one, 127.
    assert_eq!(mask.iter().filter(|&&m| m != 0).count(), 97);
    check(
        "f32 bs 1 q_head 1 s_active 1 s_prior 128 d_head 64",
        &got.mapv(f64::from),
        &widened(&x),
        &mask,
        dims,
    );
}
