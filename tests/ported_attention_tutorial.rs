//! The attention tutorial's first two kernels (nki-samples
//! `src/nki_samples/tutorials/attention_fwd_performance/attention_kernels.py`), ported with
//! NKI's names and calls: `attn_fwd_v1` (nki.language: `matmul`, `max`, `subtract`, `exp`,
//! `sum`, `divide`, `transpose`, a PSUM `matmul` operand copied out as NKI does) and
//! `attn_fwd_v2` (nki.isa: `nc_matmul`, `tensor_reduce`, `tensor_scalar`, `activation`,
//! `reciprocal`, `nc_transpose`, `tensor_copy`), against an f64 reference. What differs is
//! Rust's spelling only (`assert_eq!` for the chained `assert q.shape == k.shape == v.shape`,
//! and for v1's type annotation `qk: nt.tensor[seqlen_q, seqlen_kv]`).

mod common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

#[kernel]
fn attn_fwd_v1(
    q: Hbm<f32, 128, 128>,
    k: Hbm<f32, 128, 128>,
    v: Hbm<f32, 128, 128>,
) -> Hbm<f32, 128, 128> {
    let (d_head, seqlen_q) = q.shape;
    let seqlen_kv = seqlen_q;

    assert_eq!(q.shape, k.shape);
    assert_eq!(k.shape, v.shape);
    assert!(d_head == 128);
    assert!(seqlen_q == 128);

    let kernel_out = ndarray((seqlen_q, d_head), q.dtype, SharedHbm);

    // Load inputs into SBUF.
    let q_sbuf = load(q);
    let k_sbuf = load(k);
    let v_sbuf = load(v);

    // Q @ K, contract along d_head: [seqlen_q, seqlen_kv].
    let qk = matmul(x = q_sbuf, y = k_sbuf, transpose_x = true);
    assert_eq!(qk.shape[0], seqlen_q);
    assert_eq!(qk.shape[1], seqlen_kv);

    // Softmax: reduce max along seqlen_k.
    let row_max = max(qk, axis = 1);
    // Subtract max from row.
    let norm_row = subtract(qk, row_max);
    // Exponentiation.
    let exp_row = exp(norm_row);
    // Sum of exp results.
    let sum_row = sum(exp_row, axis = 1);
    // Divide exp results by sum.
    let scores = divide(exp_row, sum_row);

    // v has the wrong layout.
    let v_sbuf_t = transpose(v_sbuf);

    // scores @ V, contract along seqlen_kv.
    let attn_out = matmul(scores, v_sbuf_t, transpose_x = false);

    // Store output.
    store(dst = kernel_out, value = attn_out);
    kernel_out
}

#[kernel]
fn attn_fwd_v2(
    q: Hbm<f32, 128, 128>,
    k: Hbm<f32, 128, 128>,
    v: Hbm<f32, 128, 128>,
) -> Hbm<f32, 128, 128> {
    let (d_head, seqlen_q) = q.shape;
    assert_eq!(q.shape, k.shape);
    assert_eq!(k.shape, v.shape);
    assert!(d_head == 128);
    assert!(seqlen_q == 128);
    let kernel_out = ndarray((seqlen_q, d_head), q.dtype, SharedHbm);
    // Load inputs into SBUF.
    let q_sbuf = load(q);
    let k_sbuf = load(k);
    let v_sbuf = load(v);
    // Q @ K, contract along d_head.
    let qk = nc_matmul(stationary = q_sbuf, moving = k_sbuf);
    // Softmax: reduce max along seqlen_kv, dimension [seqlen_q, 1].
    let row_max = tensor_reduce(op = max, data = qk, axis = 1);
    // Subtract max from row, dimension [seqlen_q, seqlen_kv].
    let norm_row = tensor_scalar(
        data = qk,
        op0 = subtract,
        operand0 = row_max,
        engine = vector,
    );
    // Exponentiation, dimension [seqlen_q, seqlen_kv].
    let exp_row = activation(op = exp, data = norm_row, scale = 1.0);
    // Sum of exp results, dimension [seqlen_q, 1].
    let sum_row = tensor_reduce(op = add, data = exp_row, axis = 1);
    // Reciprocal of sum_row, dimension [seqlen_q, 1].
    let inverse_sum_row = reciprocal(data = sum_row);
    let scores = tensor_scalar(
        data = exp_row,
        op0 = multiply,
        operand0 = inverse_sum_row,
        engine = vector,
        dtype = q.dtype,
    );
    // v has the wrong layout.
    let v_psum_t = nc_transpose(v_sbuf); // TensorE
    // Dimension [seqlen_kv, d_head].
    let v_sbuf_t = tensor_copy(v_psum_t); // ScalarE
    // scores has the wrong layout.
    let scores_psum_t = nc_transpose(scores); // TensorE
    // Dimension [seqlen_kv, seqlen_q].
    let scores_sbuf_t = tensor_copy(scores_psum_t); // ScalarE
    // scores @ V, contract along seqlen_kv.
    let attn_out = nc_matmul(stationary = scores_sbuf_t, moving = v_sbuf_t);
    // Store output.
    store(dst = kernel_out, value = attn_out);
    kernel_out
}

/// `softmax(qᵀ k) · vᵀ` in f64: `q`, `k`, `v` are `[d_head, seqlen]`.
fn reference(q: &Array2<f32>, k: &Array2<f32>, v: &Array2<f32>) -> Array2<f64> {
    let (d, s) = q.dim();
    let mut out = Array2::<f64>::zeros((s, d));
    for i in 0..s {
        let logits: Vec<f64> = (0..s)
            .map(|j| {
                (0..d)
                    .map(|c| f64::from(q[[c, i]]) * f64::from(k[[c, j]]))
                    .sum()
            })
            .collect();
        let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = logits.iter().map(|x| (x - m).exp()).collect();
        let total: f64 = e.iter().sum();
        for c in 0..d {
            out[[i, c]] = (0..s).map(|j| e[j] / total * f64::from(v[[c, j]])).sum();
        }
    }
    out
}

#[test]
fn attn_fwd_v1_and_v2_match_the_f64_reference() {
    let q = rand_f32(Ix2(128, 128), 11, -0.3, 0.3);
    let k = rand_f32(Ix2(128, 128), 12, -0.3, 0.3);
    let v = rand_f32(Ix2(128, 128), 13, -1.0, 1.0);
    let want = reference(&q, &k, &v);
    let mut core = NeuronCore::default();
    for (name, out) in [
        (
            "v1",
            attn_fwd_v1::host(&mut core, q.view(), k.view(), v.view()).unwrap(),
        ),
        (
            "v2",
            attn_fwd_v2::host(&mut core, q.view(), k.view(), v.view()).unwrap(),
        ),
    ] {
        for ((i, c), &x) in out.indexed_iter() {
            // fp32 products summed in fp32 and a few-ulp exp: well within 1e-5 here.
            assert!(
                (f64::from(x) - want[[i, c]]).abs() <= 1e-5,
                "{name} [{i}, {c}]: {x} vs {}",
                want[[i, c]]
            );
        }
    }
}
