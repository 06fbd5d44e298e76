//! The attention tutorial's first three kernels (nki-samples
//! `src/nki_samples/tutorials/attention_fwd_performance/attention_kernels.py`), ported with
//! NKI's names and calls: `attn_fwd_v1` (nki.language: `matmul`, `max`, `subtract`, `exp`,
//! `sum`, `divide`, `transpose`, a PSUM `matmul` operand copied out as NKI does) and
//! `attn_fwd_v2` (nki.isa: `nc_matmul`, `tensor_reduce`, `tensor_scalar`, `activation`,
//! `reciprocal`, `nc_transpose`, `tensor_copy`) and `attn_fwd_v3` (tiled along the sequence,
//! its intermediates kept in `shared_hbm` scratch tensors it does not return), against an f64
//! reference. What differs is Rust's spelling only (`assert_eq!` for the chained
//! `assert q.shape == k.shape == v.shape`, and for v1's type annotation
//! `qk: nt.tensor[seqlen_q, seqlen_kv]`; `tile_size.pmax` for `nl.tile_size.pmax`, `..` for
//! `:`), and v3 runs at the tutorial's smallest sequence length, 512 (its shapes are literal,
//! as v1's and v2's are, so that `seqlen_q // PMAX` is a compile-time integer).

use crate::common;

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

#[kernel]
fn attn_fwd_v3(
    q: Hbm<f32, 128, 512>,
    k: Hbm<f32, 128, 512>,
    v: Hbm<f32, 128, 512>,
) -> Hbm<f32, 512, 128> {
    let (d_head, seqlen_q) = q.shape;
    let seqlen_kv = seqlen_q;

    let PMAX = tile_size.pmax;
    let FMAX_STATIONARY = tile_size.gemm_stationary_fmax;
    let FMAX_MOVING = tile_size.gemm_moving_fmax;

    assert_eq!(q.shape, k.shape);
    assert_eq!(k.shape, v.shape);
    assert!(d_head == PMAX);
    assert!(seqlen_q >= 512);

    let kernel_out = ndarray((seqlen_q, d_head), q.dtype, SharedHbm);

    // load inputs into SBUF
    let q_sbuf = load(q);
    let k_sbuf = load(k);
    let v_sbuf = load(v);

    // Tile along seqlen_q #
    // for this example we assume that seqlen_q is divisible by PMAX and
    // seqlen_kv is divisible by FMAX_MOVING, otherwise need to use mask or "final multiplication"
    let qk = ndarray(
        (
            seqlen_q / PMAX,
            seqlen_kv / FMAX_MOVING,
            par_dim(PMAX),
            FMAX_MOVING,
        ),
        f32,
        Psum,
    );
    for i_tile_q in affine_range(seqlen_q / FMAX_STATIONARY) {
        // loop on stationary_free
        for i_tile_kv in affine_range(seqlen_kv / FMAX_MOVING) {
            // loop on moving_free
            // Q @ K, contract along d_head #
            qk[[i_tile_q, i_tile_kv, .., ..]] = nc_matmul(
                stationary = q_sbuf[[0..PMAX, ds(i_tile_q * FMAX_STATIONARY, FMAX_STATIONARY)]],
                moving = k_sbuf[[0..PMAX, ds(i_tile_kv * FMAX_MOVING, FMAX_MOVING)]],
            );
        }
    }

    // Softmax #
    // reduce max along seqlen_k
    let row_max = ndarray((par_dim(PMAX), seqlen_q / PMAX, 1), f32, Sbuf);
    for i_tile_q in affine_range(seqlen_q / PMAX) {
        let row_max_kv = ndarray((par_dim(PMAX), seqlen_kv / FMAX_MOVING), f32, Sbuf);
        for i_tile_kv in affine_range(seqlen_kv / FMAX_MOVING) {
            row_max_kv[[.., i_tile_kv]] =
                tensor_reduce(op = max, data = qk[[i_tile_q, i_tile_kv]], axis = 1);
        }
        row_max[[.., i_tile_q, ..]] =
            tensor_reduce(op = max, data = row_max_kv[[.., ..]], axis = 1);
    }

    // subtract max from row
    let norm_row = ndarray((seqlen_q / PMAX, PMAX, seqlen_kv), f32, SharedHbm);
    for i_tile_q in affine_range(seqlen_q / PMAX) {
        let norm_buf = ndarray(
            shape = (par_dim(PMAX), seqlen_kv),
            dtype = f32,
            buffer = Sbuf,
        );
        for i_tile_kv in affine_range(seqlen_kv / FMAX_MOVING) {
            norm_buf[[.., ds(i_tile_kv * FMAX_MOVING, FMAX_MOVING)]] = tensor_scalar(
                data = qk[[i_tile_q, i_tile_kv]],
                op0 = subtract,
                operand0 = row_max[[.., i_tile_q, ..]],
                engine = vector_engine,
            );
        }
        store(norm_row[i_tile_q], norm_buf[[.., ..]]);
    }

    // exponentiation
    let exp_row = ndarray((seqlen_q / PMAX, PMAX, seqlen_kv), f32, SharedHbm);
    for i_tile_q in affine_range(seqlen_q / PMAX) {
        let exp_buf = ndarray(
            shape = (par_dim(PMAX), seqlen_kv),
            dtype = f32,
            buffer = Sbuf,
        );
        let norm_buf = load(norm_row[i_tile_q]);
        exp_buf[[.., ..]] = activation(op = exp, data = norm_buf);
        store(exp_row[i_tile_q], exp_buf[[.., ..]]);
    }

    // sum of exp results
    let sum_row = ndarray((par_dim(PMAX), seqlen_q / PMAX), f32, Sbuf);
    for i_tile_q in affine_range(seqlen_q / PMAX) {
        let exp_buf = load(exp_row[i_tile_q]);
        sum_row[[.., i_tile_q]] = tensor_reduce(op = add, data = exp_buf, axis = 1);
    }

    // reciprocal of sum_row, tile shape is [PMAX, seqlen_q // PMAX]
    let inverse_sum_row = reciprocal(data = sum_row);

    let scores = ndarray((seqlen_q / PMAX, PMAX, seqlen_kv), f32, SharedHbm);
    for i_tile_q in affine_range(seqlen_q / PMAX) {
        let scores_buf = ndarray(
            shape = (par_dim(PMAX), seqlen_kv),
            dtype = f32,
            buffer = Sbuf,
        );
        let exp_buf = load(exp_row[i_tile_q]);
        scores_buf[[.., ..]] = tensor_scalar(
            data = exp_buf,
            op0 = multiply,
            operand0 = inverse_sum_row[[.., i_tile_q]],
            engine = vector_engine,
            dtype = f32,
        );
        store(scores[i_tile_q], scores_buf[[.., ..]]);
    }

    // v has the wrong layout
    let v_t = ndarray((seqlen_kv / PMAX, PMAX, d_head), f32, SharedHbm);
    for i_tile_kv in affine_range(seqlen_kv / PMAX) {
        let v_psum_t = nc_transpose(v_sbuf[[.., ds(i_tile_kv * PMAX, PMAX)]]); // TensorE
        let v_sbuf_t = ndarray((par_dim(PMAX), d_head), f32, Sbuf);
        v_sbuf_t[[.., ..]] = tensor_copy(v_psum_t, dtype = f32); // ScalarE
        store(v_t[i_tile_kv], v_sbuf_t[[.., ..]]);
    }

    // scores has the wrong layout
    // PMAX restriction on both free and partition dimension when performing transpose.
    let scores_t = ndarray(
        (seqlen_kv / PMAX, seqlen_q / PMAX, PMAX, PMAX),
        f32,
        SharedHbm,
    );
    for i_tile_q in affine_range(seqlen_q / PMAX) {
        for i_tile_kv in affine_range(seqlen_kv / PMAX) {
            let scores_buf = load(scores[[i_tile_q, .., ds(i_tile_kv * PMAX, PMAX)]]);
            let scores_psum_t = nc_transpose(scores_buf); // TensorE
            let scores_sbuf_t = ndarray((par_dim(PMAX), PMAX), f32, Sbuf);
            scores_sbuf_t[[.., ..]] = tensor_copy(scores_psum_t, dtype = f32); // ScalarE
            store(scores_t[[i_tile_kv, i_tile_q, .., ..]], scores_sbuf_t);
        }
    }

    // scores @ V, contract along seqlen_kv
    // d_head == P_MAX, no need to tile there
    for i_tile_q in affine_range(seqlen_q / PMAX) {
        // loop on stationary free
        let attn_out_psum = zeros((PMAX, PMAX), f32, Psum);
        let attn_out = ndarray((par_dim(PMAX), d_head), f32, Sbuf);
        for i_tile_kv in affine_range(seqlen_kv / PMAX) {
            // loop on contraction
            let scores_sbuf_t = load(scores_t[[i_tile_kv, i_tile_q, .., ..]]);
            let v_sbuf_t = load(v_t[[i_tile_kv, .., ..]]);
            attn_out_psum += nc_matmul(stationary = scores_sbuf_t, moving = v_sbuf_t);
        }
        attn_out[[.., ..]] = tensor_copy(attn_out_psum);
        store(
            dst = kernel_out[[ds(i_tile_q * PMAX, PMAX), ..]],
            value = attn_out[[.., ..]],
        );
    }

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

#[test]
fn attn_fwd_v3_matches_the_f64_reference_through_hbm_scratch() {
    let q = rand_f32(Ix2(128, 512), 21, -0.3, 0.3);
    let k = rand_f32(Ix2(128, 512), 22, -0.3, 0.3);
    let v = rand_f32(Ix2(128, 512), 23, -1.0, 1.0);
    let want = reference(&q, &k, &v);
    // Strictly (every scratch element read was written) and plainly.
    for strict in [true, false] {
        let mut core = NeuronCore::default().with_strict(strict);
        let out = attn_fwd_v3::host(&mut core, q.view(), k.view(), v.view()).unwrap();
        assert_eq!(out.dim(), (512, 128));
        for ((i, c), &x) in out.indexed_iter() {
            // fp32 products summed in fp32 over 512 terms and a few-ulp exp.
            assert!(
                (f64::from(x) - want[[i, c]]).abs() <= 2e-5,
                "strict {strict} [{i}, {c}]: {x} vs {}",
                want[[i, c]]
            );
        }
    }
    let p = attn_fwd_v3::KERNEL.program();
    let scratch: Vec<&str> = p.allocated().iter().map(|t| t.name).collect();
    assert_eq!(
        scratch,
        ["norm_row", "exp_row", "scores", "v_t", "scores_t"]
    );
}
