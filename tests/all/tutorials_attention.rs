//! NKI's fused self-attention for Stable Diffusion (`examples/fused_attention.rs`) for both head
//! sizes, with and without the causal mask, against the f64 reference and its bf16 error bound,
//! and its launch constraints.

use crate::examples::fused_attention;

use fused_attention::{common, kernel_for, max_error, reference};
use nki::ndarray::Ix2;
use nki::prelude::*;

/// Runs the kernel for `d_head` and `use_causal_mask` at `seqlen` and checks it.
fn check(seqlen: usize, d_head: usize, use_causal_mask: bool) {
    let seed = (seqlen * 4 + d_head + usize::from(use_causal_mask)) as u64;
    let q = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), seed, 0.0, 1.0);
    let k = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), seed + 1, 0.0, 1.0);
    // Values of both signs for v: the output's cancellations are checked too.
    let v = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), seed + 2, -1.0, 1.0);
    let kernel = kernel_for(d_head, use_causal_mask).unwrap();
    let mut core = NeuronCore::default();
    let out = kernel(
        &mut core,
        &DeviceTensor::from_array(&q).unwrap(),
        &DeviceTensor::from_array(&k).unwrap(),
        &DeviceTensor::from_array(&v).unwrap(),
    )
    .unwrap();
    assert_eq!(out.shape(), &[seqlen, d_head]);
    let out = out.into_array::<Ix2>().unwrap();
    let (want, bound) = reference(q.view(), k.view(), v.view(), use_causal_mask);
    let (worst, ratio, within) = max_error(out.view(), &want, &bound);
    assert!(
        within,
        "seqlen={seqlen} d_head={d_head} causal={use_causal_mask}: largest error {worst:e}, \
         {ratio} of the bound"
    );
}

#[test]
fn head_size_64() {
    check(512, 64, false);
    check(512, 64, true);
}

#[test]
fn head_size_128() {
    check(512, 128, false);
    check(512, 128, true);
}

#[test]
fn sequence_lengths_that_are_not_multiples_of_512() {
    // NKI's kernel tiles the sequence by 128: any multiple of 128 works.
    check(384, 64, true);
    check(128, 128, false);
    check(640, 128, true);
}

#[test]
fn causal_mask_keeps_each_query_to_the_keys_before_it() {
    // Row 0 attends to key 0 only: its output is v's row 0 (rounded to bf16 for the matmul).
    let (seqlen, d_head) = (256, 64);
    let q = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), 70, 0.0, 1.0);
    let k = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), 71, 0.0, 1.0);
    let v = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), 72, -1.0, 1.0);
    let mut core = NeuronCore::default();
    let out = kernel_for(d_head, true).unwrap()(
        &mut core,
        &DeviceTensor::from_array(&q).unwrap(),
        &DeviceTensor::from_array(&k).unwrap(),
        &DeviceTensor::from_array(&v).unwrap(),
    )
    .unwrap()
    .into_array::<Ix2>()
    .unwrap();
    for d in 0..d_head {
        let v0 = f64::from(bf16::from_f32(v[[0, d]]));
        assert!(
            (f64::from(out[[0, d]]) - v0).abs() <= 1e-6 * v0.abs(),
            "{d}"
        );
    }
}

#[test]
fn launch_constraints_name_the_sequence_length() {
    let mut core = NeuronCore::default();
    let mut err = |seqlen: usize| {
        let x = DeviceTensor::<f32>::zeros(&[seqlen, 64]).unwrap();
        kernel_for(64, false).unwrap()(&mut core, &x, &x, &x)
            .unwrap_err()
            .to_string()
    };
    let e = err(200);
    assert!(e.contains("SEQLEN % 128 == 0") && e.contains("200"), "{e}");
    // The SBUF buffers hold 4096 columns.
    let e = err(4096 + 128);
    assert!(e.contains("SEQLEN") && e.contains("4224"), "{e}");
}
