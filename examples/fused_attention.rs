//! NKI's fused self-attention for Stable Diffusion (`fused_self_attn_for_SD_small_head_size`,
//! tutorial "fused-self-attn"): `out = softmax(Q·Kᵀ·0.125)·V`, optionally with a causal mask,
//! fp32 inputs and output, bf16 matmuls with fp32 accumulation (NKI's `mixed_precision=True`).
//! Checked against an f64 reference with the error bound bf16 rounding allows.
//!
//! Shapes: `q, k, v [seqlen, d_head]` f32 → `out [seqlen, d_head]` f32, with `seqlen` a
//! multiple of 128 (as NKI's `seqlen // 128` tiling needs; a multiple of 512 is not required)
//! up to 4096, and `d_head` 64 or 128 (one kernel each, below).
//!
//! `cargo run --release --example fused_attention -- [SEQLEN D_HEAD]` (default: the tutorial's
//! benchmark shape 4096 64), without and with the causal mask.
//!
//! Deviations from NKI, each forced by the language:
//! - NKI's `use_causal_mask` is a keyword argument and `d_head` is read from the traced shape:
//!   here both are meta-parameters, one instantiation per pair. `seqlen` is a symbolic
//!   dimension.
//! - NKI sizes its SBUF buffers by the traced `seqlen` (`(par_dim(128), seqlen)`,
//!   `(par_dim(128), seqlen // 128, d_head)`, ...). A tile's shape here is a compile-time
//!   constant and its partition dimension comes first, so they hold `MAX_SEQLEN` = 4096
//!   columns; the whole-row instructions (the max over the k tiles' maxima, `exp`, the copy to
//!   bf16) are masked to `seqlen`, and a longer `seqlen` fails at launch with the constraint
//!   the indices carry.
//! - NKI's `affine_select` reads the QKᵀ tile straight from PSUM; the GpSimd engine cannot
//!   access PSUM (`err_unsupported_memory` here), so the tile is first copied to SBUF (exact:
//!   fp32 to fp32).
//! - NKI assigns the TensorE transpose (a PSUM result) into the bf16 SBUF buffer and the
//!   compiler inserts the copy; here `nc_transpose(..., dtype = bf16)` asks for it.
//! - NKI sums `exp` with a separate `tensor_reduce(add)` and notes that the compiler merges it
//!   into the activation; here the activation's own `reduce_res` computes the sum.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, ArrayView2, Axis};
use nki::prelude::*;

/// `softmax(q·kᵀ·0.125)·v` for `q, k, v: [seqlen, D_HEAD]`, seqlen a multiple of 128 up to
/// 4096; with `USE_CAUSAL_MASK`, query `i` attends to keys `j ≤ i`. One instantiation per
/// `(d_head, use_causal_mask)`, as NKI specialises on the traced shape and keyword argument.
#[kernel(
    fused_self_attn_for_sd_small_head_size_d64(D_HEAD = 64, USE_CAUSAL_MASK = false),
    fused_self_attn_for_sd_small_head_size_d64_causal(D_HEAD = 64, USE_CAUSAL_MASK = true),
    fused_self_attn_for_sd_small_head_size_d128(D_HEAD = 128, USE_CAUSAL_MASK = false),
    fused_self_attn_for_sd_small_head_size_d128_causal(D_HEAD = 128, USE_CAUSAL_MASK = true)
)]
pub fn fused_self_attn_for_sd_small_head_size<const D_HEAD: usize, const USE_CAUSAL_MASK: bool>(
    q_ref: Hbm<f32, SEQLEN, D_HEAD>,
    k_ref: Hbm<f32, SEQLEN, D_HEAD>,
    v_ref: Hbm<f32, SEQLEN, D_HEAD>,
) -> Hbm<f32, SEQLEN, D_HEAD> {
    // Capacity of the SBUF buffers along the sequence (NKI sizes them by seqlen).
    const MAX_SEQLEN: usize = 4096;

    // Use q_ref dtype as the intermediate tensor dtype
    let kernel_dtype = q_ref.dtype;
    // mixed_precision=True: Tensor Engine operands in bfloat16
    let pe_in_dt = bf16;
    let out_ref = ndarray([SEQLEN, D_HEAD], q_ref.dtype, SharedHbm);

    // Softmax scaling factor, multiplied onto Q: softmax_scale = 0.125

    // q_seq_n_tiles = k_seq_n_tiles = v_seq_n_tiles = SEQLEN / 128 (trip counts below)
    const Q_SEQ_TILE_SIZE: usize = 128;
    const K_SEQ_TILE_SIZE: usize = 128;
    const V_SEQ_TILE_SIZE: usize = 128;
    // No tiling on d_head dimension since the dimension of d_head fits in SB
    const D_HEAD_TILE_SIZE: usize = D_HEAD;
    const MAX_SEQ_N_TILES: usize = MAX_SEQLEN / 128;

    ///////////////////////////////////
    // Step 1. transpose(tensor_v)
    ///////////////////////////////////
    // Buffer for v matrix transposed
    // Pre-fetch and keep it in SBUF throughout different softmax tiles
    let trans_v = ndarray([V_SEQ_TILE_SIZE, MAX_SEQ_N_TILES, D_HEAD], pe_in_dt, Sbuf);

    for i_k_seq_tile in affine_range(SEQLEN / K_SEQ_TILE_SIZE) {
        let (ip_v_, if_v_) = mgrid![0..V_SEQ_TILE_SIZE, 0..D_HEAD_TILE_SIZE];
        trans_v[[ip_v_, i_k_seq_tile, if_v_]] = load(
            v_ref[[i_k_seq_tile * K_SEQ_TILE_SIZE + ip_v_, if_v_]],
            dtype = pe_in_dt,
        );
    }

    let q_local = ndarray(
        [D_HEAD_TILE_SIZE, MAX_SEQ_N_TILES, Q_SEQ_TILE_SIZE],
        pe_in_dt,
        Sbuf,
    );
    let (ip_q_, if_q_) = mgrid![0..D_HEAD_TILE_SIZE, 0..Q_SEQ_TILE_SIZE];
    for i_q_seq_tile in affine_range(SEQLEN / Q_SEQ_TILE_SIZE) {
        let (idx_1, idx_2) = mgrid![0..Q_SEQ_TILE_SIZE, 0..D_HEAD_TILE_SIZE];
        q_local[[ip_q_, i_q_seq_tile, if_q_]] = load_transpose2d(
            q_ref[[i_q_seq_tile * Q_SEQ_TILE_SIZE + idx_1, idx_2]],
            dtype = pe_in_dt,
        ) * 0.125;
    }

    let k_local = ndarray(
        [D_HEAD_TILE_SIZE, MAX_SEQ_N_TILES, K_SEQ_TILE_SIZE],
        pe_in_dt,
        Sbuf,
    );
    let (ip_k_, if_k_) = mgrid![0..D_HEAD_TILE_SIZE, 0..K_SEQ_TILE_SIZE];
    for i_k_seq_tile in affine_range(SEQLEN / K_SEQ_TILE_SIZE) {
        let (idx_1, idx_2) = mgrid![0..K_SEQ_TILE_SIZE, 0..D_HEAD_TILE_SIZE];
        k_local[[ip_k_, i_k_seq_tile, if_k_]] = load_transpose2d(
            k_ref[[i_k_seq_tile * K_SEQ_TILE_SIZE + idx_1, idx_2]],
            dtype = pe_in_dt,
        );
    }

    for i_q_seq_tile in affine_range(SEQLEN / Q_SEQ_TILE_SIZE) {
        // A SBUF buffer for an independent softmax tile
        let qk_res_buf = ndarray([Q_SEQ_TILE_SIZE, MAX_SEQLEN], kernel_dtype, Sbuf);

        let neg_max_res = ndarray([Q_SEQ_TILE_SIZE, MAX_SEQ_N_TILES], kernel_dtype, Sbuf);
        let (ip_max, if_max) = mgrid![0..Q_SEQ_TILE_SIZE, 0..MAX_SEQ_N_TILES];

        // Loop over RHS free of matmul(stationary=tensor_q, moving=tensor_k, contract=d_head)
        for i_k_seq_tile in affine_range(SEQLEN / K_SEQ_TILE_SIZE) {
            // Since the K^T tile is the RHS, the q_seq_len dimension will be P in the result
            // PSUM buffer shape: [q_seq_tile_size P, k_seq_tile_size F]
            let qk_psum = zeros([Q_SEQ_TILE_SIZE, K_SEQ_TILE_SIZE], f32, Psum);

            // Tensor indices for accessing qk result in k_seq_tile_size
            let (ip_qk, if_qk) = mgrid![0..Q_SEQ_TILE_SIZE, 0..K_SEQ_TILE_SIZE];

            //////////////////////////////////////////////////////////////
            // Step 2. matmul(stationary=tensor_q, moving=tensor_k, contract=d_head)
            //////////////////////////////////////////////////////////////
            qk_psum[[ip_qk, if_qk]] += nc_matmul(
                moving = k_local[[ip_k_, i_k_seq_tile, if_k_]],
                stationary = q_local[[ip_q_, i_q_seq_tile, if_q_]],
            );

            ///////////////////////////////////
            // Step 3. Apply optional causal mask
            ///////////////////////////////////
            if USE_CAUSAL_MASK {
                // GpSimd cannot read PSUM: the scores go to SBUF first (exact).
                let qk_sbuf = copy(qk_psum[[ip_qk, if_qk]], dtype = kernel_dtype);
                // Magic number -9984.0 to replace -inf similar to what neuronx-cc uses
                qk_res_buf[[ip_qk, i_k_seq_tile * K_SEQ_TILE_SIZE + if_qk]] = affine_select(
                    pred = i_q_seq_tile * Q_SEQ_TILE_SIZE + ip_qk
                        >= i_k_seq_tile * K_SEQ_TILE_SIZE + if_qk,
                    on_true_tile = qk_sbuf[[ip_qk, if_qk]],
                    on_false_value = -9984.0,
                    dtype = kernel_dtype,
                );
            } else {
                // Simply send psum result back to sbuf
                qk_res_buf[[ip_qk, i_k_seq_tile * K_SEQ_TILE_SIZE + if_qk]] =
                    copy(qk_psum[[ip_qk, if_qk]], dtype = kernel_dtype);
            }

            ///////////////////////////////////
            // Step 4. Softmax
            ///////////////////////////////////
            neg_max_res[[0..Q_SEQ_TILE_SIZE, i_k_seq_tile..i_k_seq_tile + 1]] = tensor_reduce(
                max,
                data = qk_res_buf[[ip_qk, i_k_seq_tile * K_SEQ_TILE_SIZE + if_qk]],
                axis = 1,
                dtype = kernel_dtype,
                negate = true,
                keepdims = true,
            );
        }

        let neg_max_res_final = tensor_reduce(
            min,
            data = neg_max_res[[ip_max, if_max]],
            axis = 1,
            dtype = kernel_dtype,
            negate = false,
            keepdims = true,
            mask = K_SEQ_TILE_SIZE * if_max < SEQLEN,
        );

        let (ip_softmax, if_softmax) = mgrid![0..Q_SEQ_TILE_SIZE, 0..MAX_SEQLEN];
        let (ip_sum_res, if_sum_res) = mgrid![0..Q_SEQ_TILE_SIZE, 0..D_HEAD_TILE_SIZE];

        let softmax_res = ndarray([Q_SEQ_TILE_SIZE, MAX_SEQLEN], pe_in_dt, Sbuf);
        let sum_divisor = ndarray([Q_SEQ_TILE_SIZE, D_HEAD_TILE_SIZE], kernel_dtype, Sbuf);

        // Simply use a large tile of seq_len in size since this is a "blocking" instruction
        // exp and its row sum in one instruction on ACT
        let sum_res = ndarray([Q_SEQ_TILE_SIZE, 1], kernel_dtype, Sbuf);
        let exp_res = activation(
            exp,
            data = qk_res_buf[[ip_softmax, if_softmax]],
            bias = neg_max_res_final,
            scale = 1.0,
            reduce_op = add,
            reduce_res = sum_res,
            mask = if_softmax < SEQLEN,
        );

        softmax_res[[ip_softmax, if_softmax]] =
            copy(exp_res, dtype = pe_in_dt, mask = if_softmax < SEQLEN);

        let sum_reciprocal_broadcast =
            broadcast_to(reciprocal(sum_res), [Q_SEQ_TILE_SIZE, D_HEAD_TILE_SIZE]);
        sum_divisor[[ip_sum_res, if_sum_res]] =
            copy(sum_reciprocal_broadcast, dtype = kernel_dtype);

        // Buffer for transposed softmax results
        let trans_softmax_res = ndarray(
            [K_SEQ_TILE_SIZE, MAX_SEQ_N_TILES, Q_SEQ_TILE_SIZE],
            pe_in_dt,
            Sbuf,
        );

        // Result psum buffer has the hidden dim as P
        let attn_res_psum = zeros([D_HEAD_TILE_SIZE, Q_SEQ_TILE_SIZE], f32, Psum);

        let (ip_scores_t, if_scores_t) = mgrid![0..K_SEQ_TILE_SIZE, 0..Q_SEQ_TILE_SIZE];

        // Loop over matmul_1 contraction
        for i_k_seq_tile in affine_range(SEQLEN / K_SEQ_TILE_SIZE) {
            ///////////////////////////////////
            // Step 5. transpose(softmax_res)
            ///////////////////////////////////
            let (ip_scores, if_scores) = mgrid![0..Q_SEQ_TILE_SIZE, 0..K_SEQ_TILE_SIZE];

            trans_softmax_res[[ip_scores_t, i_k_seq_tile, if_scores_t]] = nc_transpose(
                softmax_res[[ip_scores, i_k_seq_tile * K_SEQ_TILE_SIZE + if_scores]],
                dtype = pe_in_dt,
            );
        }

        let (ip_out, if_out) = mgrid![0..D_HEAD_TILE_SIZE, 0..Q_SEQ_TILE_SIZE];
        for i_k_seq_tile in affine_range(SEQLEN / K_SEQ_TILE_SIZE) {
            //////////////////////////////////////////////////////////////////////
            // Step 6. matmul_1(stationary=trans_v, moving=trans_softmax_res, contract=seqlen_v=seqlen_k)
            //////////////////////////////////////////////////////////////////////
            let (ip_v_t, if_v_t) = mgrid![0..K_SEQ_TILE_SIZE, 0..D_HEAD_TILE_SIZE];
            attn_res_psum[[ip_out, if_out]] += nc_matmul(
                moving = trans_softmax_res[[ip_scores_t, i_k_seq_tile, if_scores_t]],
                stationary = trans_v[[ip_v_t, i_k_seq_tile, if_v_t]],
            );
        }

        let attn_res_sbuf = copy(attn_res_psum[[ip_out, if_out]], dtype = kernel_dtype);

        let attn_res_div = attn_res_sbuf * nc_transpose(sum_divisor[[ip_sum_res, if_sum_res]]);

        store(
            out_ref[[i_q_seq_tile * Q_SEQ_TILE_SIZE + if_out, ip_out]],
            attn_res_div,
        );
    }
    out_ref
}

/// The kernel for `d_head` (64 or 128) and the mask.
pub type Attention = fn(
    &mut NeuronCore,
    &DeviceTensor<f32>,
    &DeviceTensor<f32>,
    &DeviceTensor<f32>,
) -> Result<DeviceTensor<f32>, LaunchError>;

/// The kernel for `d_head` and `use_causal_mask`, if there is one.
pub fn kernel_for(d_head: usize, use_causal_mask: bool) -> Option<Attention> {
    Some(match (d_head, use_causal_mask) {
        (64, false) => fused_self_attn_for_sd_small_head_size_d64,
        (64, true) => fused_self_attn_for_sd_small_head_size_d64_causal,
        (128, false) => fused_self_attn_for_sd_small_head_size_d128,
        (128, true) => fused_self_attn_for_sd_small_head_size_d128_causal,
        _ => return None,
    })
}

/// `softmax(q·kᵀ·0.125)·v` in f64 with `ndarray` (with the causal mask, row `i` over keys
/// `j ≤ i`), and for each element a bound on the error the kernel's bf16 matmuls allow.
///
/// The bound: q (scaled by 0.125, exact) and k are rounded to bf16 (relative error
/// u = 2⁻⁸ each), so a score errs by at most Δ = 0.125·(2u + u²)·Σ_d |q·k| (plus fp32
/// accumulation over d_head); shifting every score of a row by at most Δ multiplies each
/// softmax probability by a factor within e^{±2Δ}. The probabilities and v are rounded to bf16
/// for the second matmul (another (1 + u)² on each product), and the fp32 sums, `exp` and the
/// final scaling add a relative η = (seqlen + d_head + 16)·2⁻²³. With Δ the largest over the
/// row's keys, `|out − ref| ≤ ((1 + u)²·e^{2Δ}·(1 + η) − 1)·Σ_j p_j·|v_j|`.
pub fn reference(
    q: ArrayView2<f32>,
    k: ArrayView2<f32>,
    v: ArrayView2<f32>,
    use_causal_mask: bool,
) -> (Array2<f64>, Array2<f64>) {
    let (seqlen, d_head) = q.dim();
    let (q, k, v) = (q.mapv(f64::from), k.mapv(f64::from), v.mapv(f64::from));
    let mut scores = q.dot(&k.t()) * 0.125;
    let abs_scores = q.mapv(f64::abs).dot(&k.mapv(f64::abs).t()) * 0.125;
    for (i, mut row) in scores.axis_iter_mut(Axis(0)).enumerate() {
        let keys = if use_causal_mask { i + 1 } else { seqlen };
        let max = row
            .iter()
            .take(keys)
            .fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        let mut sum = 0.0;
        for (j, s) in row.iter_mut().enumerate() {
            *s = if j < keys { (*s - max).exp() } else { 0.0 };
            sum += *s;
        }
        row /= sum;
    }
    let out = scores.dot(&v);
    let spread = scores.dot(&v.mapv(f64::abs));
    let u = 2f64.powi(-8);
    let eta = (seqlen + d_head + 16) as f64 * 2f64.powi(-23);
    let mut bound = spread;
    for (i, mut row) in bound.axis_iter_mut(Axis(0)).enumerate() {
        let keys = if use_causal_mask { i + 1 } else { seqlen };
        let s_max = abs_scores
            .row(i)
            .iter()
            .take(keys)
            .fold(0.0f64, |a, &b| a.max(b));
        let delta = s_max * (2.0 * u + u * u + d_head as f64 * 2f64.powi(-23));
        let factor = (1.0 + u).powi(2) * (2.0 * delta).exp() * (1.0 + eta) - 1.0;
        row *= factor;
    }
    (out, bound)
}

/// The largest error of `out` against the reference, the largest error relative to the
/// element's bound, and whether every element is within its bound.
pub fn max_error(
    out: ArrayView2<f32>,
    reference: &Array2<f64>,
    bound: &Array2<f64>,
) -> (f64, f64, bool) {
    let mut worst = 0.0f64;
    let mut worst_ratio = 0.0f64;
    for ((o, r), b) in out.iter().zip(reference).zip(bound) {
        let err = (f64::from(*o) - r).abs();
        worst = worst.max(err);
        // NaN compares false: a NaN output fails.
        worst_ratio = if err <= *b {
            worst_ratio.max(err / b)
        } else {
            f64::INFINITY
        };
    }
    (worst, worst_ratio, worst_ratio.is_finite())
}

/// NKI's fused self-attention for Stable Diffusion, checked against an f64 reference.
#[derive(Parser)]
struct Cli {
    /// q, k, v [SEQLEN, D_HEAD]; D_HEAD 64 or 128 (default 4096 64)
    #[arg(value_names = ["SEQLEN", "D_HEAD"], num_args = 2, action = clap::ArgAction::Set)]
    shape: Vec<usize>,
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let [seqlen, d_head] = common::shape(&cli.shape, [4096, 64]);
    // As the tutorial's test: uniform values in [0, 1).
    let q = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), 1, 0.0, 1.0);
    let k = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), 2, 0.0, 1.0);
    let v = common::random_f32(nki::ndarray::Ix2(seqlen, d_head), 3, 0.0, 1.0);
    let (dq, dk, dv) = (
        DeviceTensor::from_array(&q)?,
        DeviceTensor::from_array(&k)?,
        DeviceTensor::from_array(&v)?,
    );
    let mut core = NeuronCore::default();
    let mut all_within = true;
    for use_causal_mask in [false, true] {
        let kernel = kernel_for(d_head, use_causal_mask).ok_or("D_HEAD must be 64 or 128")?;
        let inst = fused_self_attn_for_sd_small_head_size::INSTANCES
            .iter()
            .find(|i| {
                i.value("D_HEAD") == Some(nki::MetaValue::Int(d_head as i64))
                    && i.value("USE_CAUSAL_MASK") == Some(nki::MetaValue::Bool(use_causal_mask))
            });
        if let Some(i) = inst {
            cli.profile
                .run(&mut core, i.kernel, &[dq.arg(), dk.arg(), dv.arg()])?;
        }
        let out = kernel(&mut core, &dq, &dk, &dv)?;
        let median = common::median_time(5, || kernel(&mut core, &dq, &dk, &dv).map(drop))?;
        let (reference, bound) = reference(q.view(), k.view(), v.view(), use_causal_mask);
        let out = out.into_array::<nki::ndarray::Ix2>()?;
        let (worst, ratio, within) = max_error(out.view(), &reference, &bound);
        println!(
            "fused_self_attn_for_SD_small_head_size seqlen={seqlen} d_head={d_head} \
             use_causal_mask={use_causal_mask}: median launch {median:.2?} (5 launches); \
             largest |error| against the f64 reference: {worst:.3e}, at most {ratio:.3} of \
             the bf16 bound (within it: {within})"
        );
        all_within &= within;
    }
    if !all_within {
        return Err("result outside the bf16 error bound".into());
    }
    Ok(())
}
