//! NKI's flash attention forward, `flash_fwd` of nki-samples
//! `src/nki_samples/reference/attention.py` (as of commit c4b806e^), ported with its names,
//! loops, tile sizes and masks: the helpers `_flash_attention_core`, `transpose_p_local`,
//! `dropout_p_local` and `load_v_tile`, the causal branches on loop indices
//! (`if multiplication_required_selection`, `if (i < n_tile_q) & causal_mask & sliding_mask`),
//! the diagonal masks of the logit bias, `par_dim` block tiles (`o_buffer[i1]`, `v[k_i]`), the
//! remat loop over `attn_core_tile_size` query tiles, GQA (`q_h_per_k_h` query heads per
//! key/value head, the launch grid over `[batch, kv_heads]`), and dropout re-seeded per 512
//! columns (`random_seed(seed + offset)`). Checked against an f64 attention (with the unit test's
//! tolerance `atol = 1e-2` for the output and the log-sum-exp) and, with dropout, for
//! determinism, the keep fraction and the `1 / (1 − p)` scaling.
//!
//! What differs from the Python, and why:
//! - The `FlashConfig` fields and the keyword arguments (`seq_tile_size`,
//!   `attn_core_tile_size`, `use_causal_mask`, `sliding_window`, `mixed_precision`,
//!   `dropout_p`, `training`) are meta-parameters, and so are the dimensions that size tiles or
//!   divide one another (`d`, `seqlen_q`, `seqlen_k`, `h`, `k_h`: NKI traces them as Python
//!   integers; here a tile's shape must be compile-time, and so must `q_h_per_k_h = h // k_h`:
//!   a traced quotient is a trip count or a shape, but the head index
//!   `head_id * q_h_per_k_h + i_q_h` multiplies a program id by it, and an index's coefficients
//!   are compile-time integers).
//! - `logit_bias=None` is a `LOGIT_BIAS` flag beside an always-present `logit_bias` input (a
//!   kernel's inputs are fixed), passed to the core as `has_logit_bias` where the Python tests
//!   `logit_bias_tile is not None`; `dropout_p_tensor=None` and `seed_tensor=None` are `0`.
//! - `nl.load(seed[0])` of the `(1,)` seed tensor is `load(seed[[0..1]])`: an integer index
//!   removes its axis here, and a tile has at least one.
//! - Training only (the kernel returns `(o, lse)`). `FlashConfig.should_transpose_v` is its
//!   default `False` (V as `(b, k_h, seqlen_k, d)`): `load_v_tile`'s transposed branches (a gen3
//!   `nisa.dma_transpose`, else `load_transpose2d`) are left out, since V's shape would then
//!   depend on the flag. `transpose_p_local`'s `use_dma_transpose` is `False` in NKI's kernel
//!   (no caller sets it), so only its `nc_transpose` branch is ported. The sliding-window
//!   branches are ported but not instantiated here.
//! - The random numbers are the model's generator (`docs/numerics.md`), not a NeuronCore's, so
//!   a dropout result is compared with itself and with the generator's definition, not with
//!   NKI's simulator.

use crate::common;

use nki::ndarray::{Array4, Ix4};

const P: usize = 128;
use nki::prelude::*;

#[helper]
fn transpose_p_local(p_local_transposed: Tile, p_local: Tile, LARGE_TILE_SZ: usize) {
    for i in affine_range(LARGE_TILE_SZ / 512) {
        let p_local_t_tmp = ndarray((par_dim(128), 512), f32, Psum);
        for j in affine_range(512 / 128) {
            let j_128_slice = ds(j * 128, 128);
            let i_j_128_slice = ds(i * 512 + j * 128, 128);
            p_local_t_tmp[[.., j_128_slice]] = nc_transpose(p_local[[.., i_j_128_slice]]);
        }
        p_local_transposed[[.., ds(i * 512, 512)]] =
            copy(p_local_t_tmp, dtype = p_local_transposed.dtype);
    }
}

#[helper]
fn dropout_p_local(
    p_local: Tile,
    dropout_p: f32,
    dropout_p_tensor: Tile,
    seed_tensor: Tile,
    seed_offset_base: Index,
    k_r_i: Index,
    REDUCTION_TILE: usize,
) {
    let B_F_SIZE = 512;
    for k_d_i in sequential_range(REDUCTION_TILE / B_F_SIZE) {
        let p_local_f_slice = ds(k_r_i * REDUCTION_TILE + k_d_i * B_F_SIZE, B_F_SIZE);
        let offset = k_d_i + seed_offset_base;
        let offset_seed = add(seed_tensor, offset, dtype = i32);
        random_seed(seed = offset_seed);
        let softmax_dropout = dropout(
            p_local[[.., p_local_f_slice]],
            rate = dropout_p_tensor[[.., 0]],
        );
        p_local[[.., p_local_f_slice]] = multiply(softmax_dropout, 1.0 / (1.0 - dropout_p));
    }
}

#[helper]
fn _flash_attention_core(
    q_local_tile: Tile,
    k: Tile,
    v: Tile,
    q_h_per_k_h: usize,
    seqlen_q: usize,
    nheads: usize,
    o_buffer: Tile,
    l_buffer: Tile,
    m_buffer: Tile,
    batch_id: Index,
    head_id: Index,
    gqa_head_idx: Index,
    q_tile_idx: Index,
    local_k_large_tile_idx: Index,
    kernel_dtype: DType,
    acc_type: DType,
    LARGE_TILE_SZ: usize,
    seqlen_k: usize,
    use_causal_mask: bool,
    sliding_window: i32,
    B_P_SIZE: usize,
    B_F_SIZE: usize,
    B_D_SIZE: usize,
    dropout_p: f32,
    dropout_p_tensor: Tile,
    seed_tensor: Tile,
    logit_bias_tile: Tile,
    has_logit_bias: bool,
) {
    let NEG_INFINITY = fp32.min;
    let num_k_tile_per_large_tile = LARGE_TILE_SZ / B_F_SIZE;
    let seq_q_num_tiles = seqlen_q / B_P_SIZE;
    let seq_k_num_tiles = seqlen_k / B_F_SIZE;

    let qk_res_buf = ndarray((par_dim(B_P_SIZE), LARGE_TILE_SZ), acc_type, Sbuf);
    let max_local = ndarray(
        (par_dim(B_P_SIZE), num_k_tile_per_large_tile),
        acc_type,
        Sbuf,
    );

    for k_i in affine_range(num_k_tile_per_large_tile) {
        let k_i_b_f_slice = ds(k_i * B_F_SIZE, B_F_SIZE);

        let qk_psum = ndarray((par_dim(B_P_SIZE), B_F_SIZE), f32, Psum); // (128, 512)
        let multiplication_required_selection = if use_causal_mask {
            q_tile_idx * B_P_SIZE >= local_k_large_tile_idx * LARGE_TILE_SZ + k_i * B_F_SIZE
        } else {
            true
        };

        if multiplication_required_selection {
            qk_psum[[.., ..]] = matmul(q_local_tile, k[[.., k_i_b_f_slice]], transpose_x = true); // (p(128), 512)
        } else {
            qk_psum[[.., ..]] = 0.0;
        }

        if use_causal_mask {
            let left_diagonal_selection = q_tile_idx * B_P_SIZE
                >= local_k_large_tile_idx * LARGE_TILE_SZ + (k_i + 1) * B_F_SIZE;
            let right_diagonal_selection = (q_tile_idx + 1) * B_P_SIZE
                <= local_k_large_tile_idx * LARGE_TILE_SZ + k_i * B_F_SIZE;
            let diagonal_and_left_selection = (q_tile_idx + 1) * B_P_SIZE
                > local_k_large_tile_idx * LARGE_TILE_SZ + k_i * B_F_SIZE;
            let diagonal = (q_tile_idx * B_P_SIZE
                < local_k_large_tile_idx * LARGE_TILE_SZ + (k_i + 1) * B_F_SIZE)
                & ((q_tile_idx + 1) * B_P_SIZE
                    > local_k_large_tile_idx * LARGE_TILE_SZ + k_i * B_F_SIZE);

            let (i_q_p, i_q_f) = mgrid![0..B_P_SIZE, 0..B_F_SIZE];
            let q_pos = q_tile_idx * B_P_SIZE + i_q_p;
            let k_pos = local_k_large_tile_idx * LARGE_TILE_SZ + k_i * B_F_SIZE + i_q_f;
            let pred_causal = q_pos >= k_pos; // causal mask
            let pred_sliding = k_pos > q_pos - sliding_window; // sliding window mask

            let qk_select_tmp = ndarray(qk_psum.shape, qk_psum.dtype, Sbuf);

            if has_logit_bias {
                if right_diagonal_selection {
                    qk_select_tmp[..] = copy(qk_psum);

                    // For tiles to the right of the diagonal, do affine_select.
                    qk_res_buf[[.., k_i_b_f_slice]] = affine_select(
                        pred = pred_causal,
                        on_true_tile = qk_select_tmp,
                        on_false_value = NEG_INFINITY,
                        dtype = acc_type,
                    );
                }

                // For tiles on the diagonal, add logit bias and need to do affine_select.
                let intermediate = add(
                    qk_psum,
                    logit_bias_tile[[.., k_i_b_f_slice]],
                    dtype = acc_type,
                    mask = diagonal,
                );
                qk_res_buf[[.., k_i_b_f_slice]] = affine_select(
                    pred = pred_causal,
                    on_true_tile = intermediate,
                    on_false_value = NEG_INFINITY,
                    dtype = acc_type,
                    mask = diagonal,
                );

                // For tiles on the left of the diagonal, add logit bias.
                qk_res_buf[[.., k_i_b_f_slice]] = add(
                    qk_psum,
                    logit_bias_tile[[.., k_i_b_f_slice]],
                    dtype = acc_type,
                    mask = left_diagonal_selection,
                );

                if sliding_window > 0 {
                    // Apply sliding window mask
                    qk_res_buf[[.., k_i_b_f_slice]] = affine_select(
                        pred = pred_sliding,
                        on_true_tile = intermediate,
                        on_false_value = NEG_INFINITY,
                        dtype = acc_type,
                        mask = left_diagonal_selection,
                    );
                }
            } else {
                // Apply causal mask
                qk_res_buf[[.., k_i_b_f_slice]] = affine_select(
                    pred = pred_causal,
                    on_true_tile = qk_psum,
                    on_false_value = NEG_INFINITY,
                    dtype = acc_type,
                );
                if sliding_window > 0 {
                    // Apply sliding window mask
                    qk_res_buf[[.., k_i_b_f_slice]] = affine_select(
                        pred = pred_sliding,
                        on_true_tile = qk_res_buf[[.., k_i_b_f_slice]],
                        on_false_value = NEG_INFINITY,
                        dtype = acc_type,
                        mask = diagonal_and_left_selection,
                    );
                }
            }
        } else {
            if has_logit_bias {
                // Simply add logit bias which copies back to sbuf at the same time
                qk_res_buf[[.., k_i_b_f_slice]] = add(
                    qk_psum,
                    logit_bias_tile[[.., k_i_b_f_slice]],
                    dtype = acc_type,
                );
            } else {
                // Simply send psum result back to sbuf
                qk_res_buf[[.., k_i_b_f_slice]] = copy(qk_psum, dtype = acc_type);
            }
        }

        // Calculate max of the current tile
        max_local[[.., k_i]] = tensor_reduce(
            np::max,
            qk_res_buf[[.., k_i_b_f_slice]],
            axis = (1,),
            dtype = acc_type,
            negate = false,
        );
    }

    let max_ = tensor_reduce(
        np::max,
        max_local[[.., ..]],
        axis = (1,),
        dtype = acc_type,
        negate = false,
    );

    let o_previous_scaled = ndarray((par_dim(B_P_SIZE), B_D_SIZE), o_buffer.dtype, Sbuf);

    let m_previous = copy(m_buffer[[.., 0]]);
    m_buffer[[.., 0]] = maximum(m_previous, max_); // (128,1)

    let m_current = m_buffer[[.., 0]];
    // Compute scaling factor
    let alpha = activation(np::exp, m_current, bias = m_previous, scale = -1.0);
    o_previous_scaled[..] = multiply(o_buffer[[.., ..]], alpha);

    let p_local = ndarray((par_dim(B_P_SIZE), LARGE_TILE_SZ), kernel_dtype, Sbuf);
    let REDUCTION_TILE = min(2048, LARGE_TILE_SZ / 2);

    let p_partial_sum = ndarray(
        (par_dim(B_P_SIZE), LARGE_TILE_SZ / REDUCTION_TILE),
        acc_type,
        Sbuf,
    );

    for k_r_i in affine_range(LARGE_TILE_SZ / REDUCTION_TILE) {
        let k_r_i_reduce_slice = ds(k_r_i * REDUCTION_TILE, REDUCTION_TILE);
        // compute exp(qk-max)
        // Compute partial row-tile sum of exp(qk-max))
        p_local[[.., k_r_i_reduce_slice]] = activation_reduce(
            np::exp,
            qk_res_buf[[.., k_r_i_reduce_slice]],
            bias = -1 * m_current,
            scale = 1.0,
            reduce_op = nl::add,
            reduce_res = p_partial_sum[[.., k_r_i]],
            dtype = kernel_dtype,
        );

        // dropout
        if dropout_p > 0.0 {
            let seed_offset_base = k_r_i * (REDUCTION_TILE / B_F_SIZE)
                + local_k_large_tile_idx * (LARGE_TILE_SZ / B_F_SIZE)
                + q_tile_idx * seq_k_num_tiles
                + (head_id * q_h_per_k_h + gqa_head_idx) * seq_k_num_tiles * seq_q_num_tiles
                + batch_id * nheads * seq_k_num_tiles * seq_q_num_tiles;

            dropout_p_local(
                p_local = p_local,
                dropout_p = dropout_p,
                dropout_p_tensor = dropout_p_tensor,
                seed_tensor = seed_tensor,
                seed_offset_base = seed_offset_base,
                k_r_i = k_r_i,
                REDUCTION_TILE = REDUCTION_TILE,
            );
        }
    }

    let ps = sum(p_partial_sum, axis = 1, dtype = acc_type);

    let p_local_transposed = ndarray((par_dim(B_P_SIZE), LARGE_TILE_SZ), kernel_dtype, Sbuf);
    transpose_p_local(
        p_local_transposed = p_local_transposed,
        p_local = p_local,
        LARGE_TILE_SZ = LARGE_TILE_SZ,
    );

    let pv_psum = zeros((par_dim(B_P_SIZE), B_D_SIZE), f32, Psum);
    for k_i in affine_range(LARGE_TILE_SZ / B_P_SIZE) {
        pv_psum[[.., ..]] += matmul(
            p_local_transposed[[.., ds(k_i * B_P_SIZE, B_P_SIZE)]],
            v[[k_i, .., ..]],
            transpose_x = true,
        ); // (128, 128) (p(Br), d)
    }

    o_buffer[[.., ..]] = add(o_previous_scaled, pv_psum);

    let exp = activation(nl::exp, m_current, bias = l_buffer[[.., 0]], scale = -1.0);
    l_buffer[[.., 0]] = add(m_current, activation(nl::log, exp, bias = ps));
}

#[helper]
fn load_v_tile(v_hbm_tile: Tensor, cur_v_tile: Tile, j: Index, v_i: Index, LARGE_TILE_SZ: usize) {
    let B_P_SIZE = 128;
    cur_v_tile[[v_i, .., ..]] = load(
        v_hbm_tile[[ds(j * LARGE_TILE_SZ + B_P_SIZE * v_i, B_P_SIZE), ..]],
        dtype = cur_v_tile.dtype,
    );
}

#[kernel(
    flash_fwd_causal_gqa(D = 64, SEQLEN_Q = 1024, SEQLEN_K = 1024, H = 2, K_H = 1, SEQ_TILE_SIZE = 512, ATTN_CORE_TILE_SIZE = 4, USE_CAUSAL_MASK = true, SLIDING_WINDOW = -1, MIXED_PRECISION = true, DROPOUT_P = 0.0, LOGIT_BIAS = false),
    flash_fwd_bias(D = 64, SEQLEN_Q = 1024, SEQLEN_K = 1024, H = 1, K_H = 1, SEQ_TILE_SIZE = 512, ATTN_CORE_TILE_SIZE = 256, USE_CAUSAL_MASK = true, SLIDING_WINDOW = -1, MIXED_PRECISION = true, DROPOUT_P = 0.0, LOGIT_BIAS = true),
    flash_fwd_full_bias(D = 64, SEQLEN_Q = 512, SEQLEN_K = 1024, H = 2, K_H = 2, SEQ_TILE_SIZE = 512, ATTN_CORE_TILE_SIZE = 256, USE_CAUSAL_MASK = false, SLIDING_WINDOW = -1, MIXED_PRECISION = true, DROPOUT_P = 0.0, LOGIT_BIAS = true),
    flash_fwd_dropout(D = 64, SEQLEN_Q = 512, SEQLEN_K = 1024, H = 2, K_H = 1, SEQ_TILE_SIZE = 1024, ATTN_CORE_TILE_SIZE = 256, USE_CAUSAL_MASK = true, SLIDING_WINDOW = -1, MIXED_PRECISION = true, DROPOUT_P = 0.25, LOGIT_BIAS = false),
)]
fn flash_fwd<
    const D: usize,
    const SEQLEN_Q: usize,
    const SEQLEN_K: usize,
    const H: usize,
    const K_H: usize,
    const SEQ_TILE_SIZE: usize,
    const ATTN_CORE_TILE_SIZE: usize,
    const USE_CAUSAL_MASK: bool,
    const SLIDING_WINDOW: i32,
    const MIXED_PRECISION: bool,
    const DROPOUT_P: f32,
    const LOGIT_BIAS: bool,
>(
    q: Hbm<f32, B, H, D, SEQLEN_Q>,
    k: Hbm<f32, B, K_H, D, SEQLEN_K>,
    v: Hbm<f32, B, K_H, SEQLEN_K, D>,
    seed: Hbm<i32, 1>,
    logit_bias: Hbm<f32, 1, 1, SEQLEN_Q, SEQLEN_K>,
) -> (
    Hbm<f32, B, H, SEQLEN_Q, D>,
    Hbm<f32, B, H, 128, { SEQLEN_Q / 128 }>,
) {
    let B_F_SIZE = 512;
    let B_P_SIZE = 128;
    let (b, h, d, seqlen_q) = q.shape;
    let B_D_SIZE = d;
    let (_, k_h, _, seqlen_k) = k.shape;
    assert!(d <= 128, " we do not support head_dim > 128");
    let use_causal_mask = if SLIDING_WINDOW > 0 {
        true
    } else {
        USE_CAUSAL_MASK
    }; // setting sliding window assumes causal
    let sliding_window = SLIDING_WINDOW;
    let kernel_dtype = if MIXED_PRECISION { bf16 } else { q.dtype };
    let acc_type = if MIXED_PRECISION { f32 } else { kernel_dtype };

    let o = ndarray((b, h, seqlen_q, d), q.dtype, SharedHbm);
    let lse = ndarray(
        (b, h, tile_size.pmax, seqlen_q / tile_size.pmax),
        acc_type,
        SharedHbm,
    );

    let batch_id = program_id(0);
    let head_id = program_id(1);

    let softmax_scale = 1.0 / power(d, 0.5);

    let n_tile_q = seqlen_q / B_P_SIZE; // since q will be loaded on tensor engine

    let LARGE_TILE_SZ = SEQ_TILE_SIZE;
    let attn_core_tile_size = ATTN_CORE_TILE_SIZE;

    assert!(
        SEQ_TILE_SIZE >= 512,
        " seq tile_size cannot be less than 512"
    );
    assert!(
        seqlen_k % LARGE_TILE_SZ == 0,
        "Need seqlen_k to be divisible by LARGE_TILE_SZ"
    );
    let num_large_k_tile = seqlen_k / LARGE_TILE_SZ;

    let q_h_per_k_h = h / k_h;

    let dropout_p = DROPOUT_P;
    let seed_local = if dropout_p > 0.0 {
        load(seed[[0..1]])
    } else {
        0
    };
    // TODO: Remove this once the dropout supports scale prob
    let dropout_p_tensor = if dropout_p > 0.0 {
        full((B_P_SIZE, 1), dropout_p, f32)
    } else {
        0
    };

    let n_remat = (n_tile_q + attn_core_tile_size - 1) / attn_core_tile_size;
    let attn_core_tile_size = min(n_tile_q, attn_core_tile_size);

    for i_q_h in affine_range(q_h_per_k_h) {
        // =============== Global Flash Attention accumulators ====================== #
        let l_buffer = full((par_dim(B_P_SIZE), n_tile_q), fp32.min, acc_type, Sbuf);
        // =============== Global Flash Attention accumulators END ================== #

        for i0 in sequential_range(n_remat) {
            // =============== Global Flash Attention accumulators ====================== #
            let o_buffer = zeros((attn_core_tile_size, par_dim(B_P_SIZE), d), acc_type, Sbuf);
            let m_buffer = full(
                (attn_core_tile_size, par_dim(B_P_SIZE), 1),
                fp32.min,
                acc_type,
                Sbuf,
            );
            // =============== Global Flash Attention accumulators END ================== #

            for j in sequential_range(0, num_large_k_tile) {
                let cur_k_tile = ndarray((par_dim(B_D_SIZE), LARGE_TILE_SZ), kernel_dtype, Sbuf);
                let cur_v_tile = ndarray(
                    (LARGE_TILE_SZ / B_P_SIZE, par_dim(B_P_SIZE), B_D_SIZE),
                    kernel_dtype,
                    Sbuf,
                );

                cur_k_tile[[.., ..]] =
                    load(k[[batch_id, head_id, .., ds(j * LARGE_TILE_SZ, LARGE_TILE_SZ)]]);

                let load_tile_size = B_P_SIZE;

                let v_hbm_tile = v[[batch_id, head_id]];
                for v_i in affine_range(LARGE_TILE_SZ / load_tile_size) {
                    load_v_tile(
                        v_hbm_tile = v_hbm_tile,
                        cur_v_tile = cur_v_tile,
                        j = j,
                        v_i = v_i,
                        LARGE_TILE_SZ = LARGE_TILE_SZ,
                    );
                }

                for i1 in affine_range(attn_core_tile_size) {
                    let i = i0 * attn_core_tile_size + i1;
                    // mask are used to only apply computation to the lower half of the matrix,
                    // which reduce the arthimetic intensity by half.
                    let causal_mask = if use_causal_mask {
                        i * B_P_SIZE >= j * LARGE_TILE_SZ
                    } else {
                        true
                    };
                    let sliding_mask = if sliding_window > 0 {
                        (j + 1) * LARGE_TILE_SZ - 1 > i * B_P_SIZE - sliding_window
                    } else {
                        true
                    };

                    if (i < n_tile_q) & causal_mask & sliding_mask {
                        let q_tile = ndarray((B_D_SIZE, B_P_SIZE), kernel_dtype, Sbuf);
                        let q_hbm_tile = q[[batch_id, head_id * q_h_per_k_h + i_q_h]];
                        let q_sbuf_tile = load(
                            q_hbm_tile[[.., ds(i * B_P_SIZE, B_P_SIZE)]],
                            dtype = kernel_dtype,
                        ); // load (d, 128) tile in SBUF
                        q_tile[[.., ..]] = q_sbuf_tile * softmax_scale;

                        let logit_bias_tile = if LOGIT_BIAS {
                            ndarray((par_dim(B_P_SIZE), LARGE_TILE_SZ), kernel_dtype, Sbuf)
                        } else {
                            0
                        };
                        if LOGIT_BIAS {
                            logit_bias_tile[[.., ..]] = load(
                                logit_bias[[
                                    0,
                                    0,
                                    ds(i * B_P_SIZE, B_P_SIZE),
                                    ds(j * LARGE_TILE_SZ, LARGE_TILE_SZ),
                                ]],
                            );
                        }

                        _flash_attention_core(
                            q_local_tile = q_tile,
                            k = cur_k_tile,
                            v = cur_v_tile,
                            q_h_per_k_h = q_h_per_k_h,
                            seqlen_q = seqlen_q,
                            nheads = h,
                            o_buffer = o_buffer[i1],
                            l_buffer = l_buffer[[.., i]],
                            m_buffer = m_buffer[i1],
                            batch_id = batch_id,
                            head_id = head_id,
                            gqa_head_idx = i_q_h,
                            q_tile_idx = i,
                            local_k_large_tile_idx = j,
                            kernel_dtype = kernel_dtype,
                            acc_type = acc_type,
                            LARGE_TILE_SZ = LARGE_TILE_SZ,
                            seqlen_k = seqlen_k,
                            use_causal_mask = use_causal_mask,
                            sliding_window = sliding_window,
                            B_P_SIZE = B_P_SIZE,
                            B_F_SIZE = B_F_SIZE,
                            B_D_SIZE = B_D_SIZE,
                            dropout_p = dropout_p,
                            dropout_p_tensor = dropout_p_tensor,
                            seed_tensor = seed_local,
                            logit_bias_tile = logit_bias_tile,
                            has_logit_bias = LOGIT_BIAS,
                        );
                    }
                }
            }

            // -------- write output to buffer on HBM ------------ #
            for i1 in affine_range(attn_core_tile_size) {
                let i = i0 * attn_core_tile_size + i1;

                if i < n_tile_q {
                    let exp = activation(
                        np::exp,
                        l_buffer[[.., i]],
                        bias = m_buffer[[i1, .., ..]],
                        scale = -1.0,
                    );
                    let out = multiply(o_buffer[[i1, .., ..]], exp, dtype = kernel_dtype);

                    store(
                        o[[
                            batch_id,
                            head_id * q_h_per_k_h + i_q_h,
                            ds(i * B_P_SIZE, B_P_SIZE),
                            ..,
                        ]],
                        out,
                    );
                }
            }
        }

        store(
            lse[[batch_id, head_id * q_h_per_k_h + i_q_h, .., ..]],
            l_buffer[[.., ..]],
        );
    }

    (o, lse)
}

/// Philox4x32-10, written from its definition (tests/all/random.rs checks it against Random123's
/// known answers): the first word.
fn philox_word(ctr: [u32; 4], key: [u32; 2]) -> u32 {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(0x9E37_79B9);
            k[1] = k[1].wrapping_add(0xBB67_AE85);
        }
        let p0 = u64::from(0xD251_1F53u32) * u64::from(c[0]);
        let p1 = u64::from(0xCD9E_8D57u32) * u64::from(c[2]);
        c = [
            ((p1 >> 32) as u32) ^ c[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c[0]
}

/// The shapes of one instantiation.
#[derive(Copy, Clone)]
struct Shape {
    b: usize,
    h: usize,
    k_h: usize,
    d: usize,
    sq: usize,
    sk: usize,
}

/// Whether flash_fwd's dropout keeps score `(sq_i, sk_i)` of query head `hq` in batch `b`:
/// the documented generator after `random_seed(seed + offset)`, the kernel's offset being the
/// index of the 128 × 512 block, its first call, the element's place in the block, the
/// instance `b · k_h + hq / (h / k_h)` of the `[b, k_h]` grid.
fn kept(s: Shape, seed: i32, rate: f32, b: usize, hq: usize, sq_i: usize, sk_i: usize) -> bool {
    let (q_tiles, k_tiles) = (s.sq / P, s.sk / 512);
    let offset =
        sk_i / 512 + (sq_i / P) * k_tiles + hq * k_tiles * q_tiles + b * s.h * k_tiles * q_tiles;
    let key = [
        (seed as u32).wrapping_add(offset as u32),
        (b * s.k_h + hq / (s.h / s.k_h)) as u32,
    ];
    let w = philox_word([(sk_i % 512) as u32, (sq_i % P) as u32, 0, 0], key);
    let u = (w >> 8) as f32 / (1u32 << 24) as f32;
    u >= rate
}

/// Whether dropout keeps the score `(row, col)` of head `h` in batch `b`: `keep(b, h, row, col)`.
type Keep = dyn Fn(usize, usize, usize, usize) -> bool;

/// Attention in f64 (the unit test's `cpu_attention_forward`, without its bf16 matmuls):
/// `o[b, h] = softmax(scale · q[b, h]ᵀ k[b, h / g] + bias, causal) · v[b, h / g]` and the
/// log-sum-exp of each row, laid out as the kernel's `lse[b, h, p, t]` (row `t · 128 + p`);
/// `keep(b, h, row, col)` drops scores after the softmax's sum (scaled by `1 / (1 − rate)`).
fn reference(
    s: Shape,
    (q, k, v): (&Array4<f32>, &Array4<f32>, &Array4<f32>),
    bias: Option<&Array4<f32>>,
    causal: bool,
    dropout: Option<(f32, &Keep)>,
) -> (Array4<f64>, Array4<f64>) {
    let scale = 1.0 / (s.d as f64).sqrt();
    let g = s.h / s.k_h;
    let mut o = Array4::<f64>::zeros((s.b, s.h, s.sq, s.d));
    let mut lse = Array4::<f64>::zeros((s.b, s.h, P, s.sq / P));
    for b in 0..s.b {
        for h in 0..s.h {
            let kv = h / g;
            for r in 0..s.sq {
                let cols = if causal { (r + 1).min(s.sk) } else { s.sk };
                let scores: Vec<f64> = (0..cols)
                    .map(|c| {
                        let dot: f64 = (0..s.d)
                            .map(|e| f64::from(q[[b, h, e, r]]) * f64::from(k[[b, kv, e, c]]))
                            .sum();
                        dot * scale + bias.map_or(0.0, |x| f64::from(x[[0, 0, r, c]]))
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
                let total: f64 = p.iter().sum();
                lse[[b, h, r % P, r / P]] = m + total.ln();
                for e in 0..s.d {
                    let mut acc = 0.0;
                    for (c, &pc) in p.iter().enumerate() {
                        let w = match dropout {
                            Some((rate, keep)) if keep(b, h, r, c) => pc / (1.0 - f64::from(rate)),
                            Some(_) => 0.0,
                            None => pc,
                        };
                        acc += w * f64::from(v[[b, kv, c, e]]);
                    }
                    o[[b, h, r, e]] = acc / total;
                }
            }
        }
    }
    (o, lse)
}

/// Random inputs of an instantiation, uniform in [-1, 1) as the unit test's.
fn inputs(s: Shape, seed: u64) -> (Array4<f32>, Array4<f32>, Array4<f32>, Array4<f32>) {
    (
        common::rand_f32(Ix4(s.b, s.h, s.d, s.sq), seed, -1.0, 1.0),
        common::rand_f32(Ix4(s.b, s.k_h, s.d, s.sk), seed + 1, -1.0, 1.0),
        common::rand_f32(Ix4(s.b, s.k_h, s.sk, s.d), seed + 2, -1.0, 1.0),
        common::rand_f32(Ix4(1, 1, s.sq, s.sk), seed + 3, -1.0, 1.0),
    )
}

/// `|got − want| ≤ 1e-2` everywhere (the unit test's `np.allclose(..., atol=1e-2)`, whose
/// relative term is 1e-5).
fn assert_allclose(what: &str, got: &Array4<f32>, want: &Array4<f64>) {
    let mut worst = (0.0f64, [0usize; 4]);
    for ((a, b, c, d), &g) in got.indexed_iter() {
        let w = want[[a, b, c, d]];
        let err = (f64::from(g) - w).abs() - 1e-5 * w.abs();
        if err > worst.0 {
            worst = (err, [a, b, c, d]);
        }
    }
    assert!(
        worst.0 <= 1e-2,
        "{what}: error {} at {:?}",
        worst.0,
        worst.1
    );
}

#[test]
fn causal_gqa_forward_matches_attention() {
    let s = Shape {
        b: 1,
        h: 2,
        k_h: 1,
        d: 64,
        sq: 1024,
        sk: 1024,
    };
    let (q, k, v, bias) = inputs(s, 1);
    let seed = nki::ndarray::Array1::from_elem(1, 0i32);
    let (o, lse) = flash_fwd_causal_gqa::grid([s.b, s.k_h])
        .host(
            &mut NeuronCore::default(),
            q.view(),
            k.view(),
            v.view(),
            seed.view(),
            bias.view(),
        )
        .unwrap();
    let (want_o, want_lse) = reference(s, (&q, &k, &v), None, true, None);
    assert_allclose("o", &o, &want_o);
    assert_allclose("lse", &lse, &want_lse);
}

#[test]
fn logit_bias_forward_matches_attention() {
    for causal in [true, false] {
        let s = if causal {
            Shape {
                b: 1,
                h: 1,
                k_h: 1,
                d: 64,
                sq: 1024,
                sk: 1024,
            }
        } else {
            Shape {
                b: 1,
                h: 2,
                k_h: 2,
                d: 64,
                sq: 512,
                sk: 1024,
            }
        };
        let (q, k, v, bias) = inputs(s, 7);
        let seed = nki::ndarray::Array1::from_elem(1, 0i32);
        let mut core = NeuronCore::default();
        let (o, lse) = if causal {
            flash_fwd_bias::grid([s.b, s.k_h]).host(
                &mut core,
                q.view(),
                k.view(),
                v.view(),
                seed.view(),
                bias.view(),
            )
        } else {
            flash_fwd_full_bias::grid([s.b, s.k_h]).host(
                &mut core,
                q.view(),
                k.view(),
                v.view(),
                seed.view(),
                bias.view(),
            )
        }
        .unwrap();
        let (want_o, want_lse) = reference(s, (&q, &k, &v), Some(&bias), causal, None);
        assert_allclose(&format!("o (causal {causal})"), &o, &want_o);
        assert_allclose(&format!("lse (causal {causal})"), &lse, &want_lse);
    }
}

#[test]
fn dropout_forward_is_deterministic_and_drops_what_the_generator_says() {
    let s = Shape {
        b: 2,
        h: 2,
        k_h: 1,
        d: 64,
        sq: 512,
        sk: 1024,
    };
    let rate = 0.25f32;
    let seed_value = 12345;
    let seed = nki::ndarray::Array1::from_elem(1, seed_value);
    let keep = move |b: usize, h: usize, r: usize, c: usize| kept(s, seed_value, rate, b, h, r, c);
    let grid = flash_fwd_dropout::grid([s.b, s.k_h]);

    // Values: against attention with the generator's keep mask.
    let (q, k, v, bias) = inputs(s, 11);
    let run = |core: &mut NeuronCore| {
        grid.host(core, q.view(), k.view(), v.view(), seed.view(), bias.view())
            .unwrap()
    };
    let (o, lse) = run(&mut NeuronCore::default());
    let (want_o, want_lse) = reference(s, (&q, &k, &v), None, true, Some((rate, &keep)));
    assert_allclose("o", &o, &want_o);
    assert_allclose("lse", &lse, &want_lse);
    // The same seed gives the same bits, strict or plain, on one host thread or two.
    for mut core in [
        NeuronCore::default()
            .with_strict(false)
            .with_host_threads(1),
        NeuronCore::default()
            .with_strict(false)
            .with_host_threads(2),
    ] {
        let (o2, lse2) = run(&mut core);
        assert!(o2.iter().zip(&o).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(
            lse2.iter()
                .zip(&lse)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
    }

    // Counts: with q = 0 every allowed score is 1 after the softmax's max, and v = 1 makes
    // each output the kept scores of its row times bf16(1 / (1 − 0.25)) = 1.3359375 over the
    // row's count: the kept count of each row, to the bf16 output's precision (2^-8 relative:
    // exact for the short rows, where one element more or less is over 1 %).
    let zeros_q = Array4::<f32>::zeros((s.b, s.h, s.d, s.sq));
    let ones_v = Array4::<f32>::ones((s.b, s.k_h, s.sk, s.d));
    let (o, _) = grid
        .host(
            &mut NeuronCore::default().with_strict(false),
            zeros_q.view(),
            k.view(),
            ones_v.view(),
            seed.view(),
            bias.view(),
        )
        .unwrap();
    let (mut kept_all, mut allowed_all) = (0usize, 0usize);
    for b in 0..s.b {
        for h in 0..s.h {
            for r in 0..s.sq {
                let want = (0..=r).filter(|&c| keep(b, h, r, c)).count();
                let got = f64::from(o[[b, h, r, 0]]) * (r + 1) as f64 / 1.3359375;
                assert!(
                    (got - want as f64).abs() <= 0.01 * want as f64 + 0.1,
                    "b {b} h {h} row {r}: {got} kept, want {want}"
                );
                kept_all += want;
                allowed_all += r + 1;
            }
        }
    }
    // 2 · 2 · 131328 scores: the keep fraction's standard error is 0.0006.
    let fraction = kept_all as f64 / allowed_all as f64;
    assert!((fraction - 0.75).abs() < 0.005, "kept {fraction}");
}
