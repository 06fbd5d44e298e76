//! The NKI Library's MoE router (`router_topk` of
//! `src/nkilib_src/nkilib/core/router_topk/router_topk.py` in aws-neuron/nki-library): router
//! logits `x.T @ w` for `T` tokens and `E` experts, an activation, the top `k ≤ 8` experts of
//! each token by `max8` and `nc_find_index8`, and the expert affinities, either every expert's
//! (ACT1: softmax of all logits) or only the top-k's scattered into `[T, E]` by a one-hot mask
//! (ACT1 then an L1 norm of the top-k, or ACT2: softmax of the top-k logits).
//!
//! Written in NKI 0.6's destination-first dialect as the source is: `x` `[H, T]` loaded into
//! `[128, H/128, T]` through the HBM view `reshape_dim(0, (H/128, 128)).permute((1, 0, 2))` (the
//! source's `XHBMLayout_H_T__0` into `XSBLayout__128_Hdiv128_T__3`), `w` likewise into
//! `[128, H/128, E]`, one PSUM accumulation over the `H/128` tiles per token tile
//! (`nc_matmul(dst, stationary = x tile, moving = w tile)`), the logits copied out of PSUM,
//! `compute_activation`'s softmax (`tensor_reduce` max with `negate`, `activation` `exp` with the
//! sum into `reduce_res` under `reset_reduce`, `reciprocal`, `tensor_scalar` multiply), `max8` /
//! `nc_find_index8` / `tensor_copy` of the first `k`, the L1 norm (`tensor_reduce` add,
//! `reciprocal`, `tensor_scalar`), and the one-hot scatter (an iota of expert numbers compared
//! with each of the `k` index columns by `tensor_scalar(op0 = equal)`, summed into a mask by
//! `tensor_tensor`, multiplied with the affinities); the stores go through the source's
//! `_hbm_tiled_store_view` (`slice`, `reshape_dim`, `permute`) and `_hbm_remainder_store_view`
//! (`slice`, `expand_dim`).
//!
//! What differs, and why:
//! - Rust's spelling. The source's arguments are meta-parameters: the shapes, `k`,
//!   `router_pre_norm` (`PRE_NORM`) and `norm_topk_prob` (`NORM_TOPK`); the three outputs
//!   (`router_logits`, `expert_index`, `expert_affinities`, the source's `mutable_tensor`s) are
//!   the kernel's return values, in f32, u32 and f32.
//! - One configuration of the source's many: `x` in HBM as `[H, T]`, softmax, no bias, the
//!   one-hot scatter, one program. Not ported: the `[T, H]` layouts, SBUF inputs and outputs,
//!   `w_bias`, sigmoid, PE column tiling (`tile_position`), the indirect-DMA scatter,
//!   `return_eager_affi` and the LNC sharding with `sendrecv` (a collective between the two
//!   cores of a logical NeuronCore; the modeled device is one NeuronCore).
//! - The iota of expert numbers is the 2.26 `iota(i_f, dtype = ...)` over an `mgrid!`: NKI
//!   0.6's `nisa.iota(dst, pattern = [[1, E]], offset = 0, channel_multiplier = 0)` takes an
//!   access pattern this language does not accept on `iota` yet. It is written in f32, as the
//!   source's mask tile is, where it compares with the indices' f32 copy.
//! - The source's `TiledRange(T, 128)` is a `static_range` over `(T + 127) / 128` token tiles,
//!   the last ragged by `min()`; the `T_pad > 0` zero-fills of the one-hot buffers are kept.
//!
//! `cargo run --release --example nkilib_router_topk` runs `T = 512`, `H = 2048`, `E = 128`,
//! `k = 8` bf16 (ACT1 softmax with the top-k normalised and scattered), checks the three outputs
//! against the library's `router_topk_torch_ref` written in f64 (`reference` below), and prints
//! the median host time per launch and the timing model's estimate for Trn2 and Trn3.

#![allow(non_snake_case)] // NKI's names: P_MAX, E, H, T

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, ArrayView2, Ix2};
use nki::prelude::*;
use nki::program::Target;
use nki::timing::{Detail, Params, Timing};

/// `compute_activation` (softmax) of `src[0..t, idx, ..]` along its `F` columns: the negated
/// maximum into `negmax[.., idx]`, the reciprocal of the exponentials' sum into
/// `exp_sum[.., idx, 0]`, and with `complete` the softmax into `dst[0..t, idx, ..]`.
#[helper]
pub fn compute_activation(
    dst: Tile,
    src: Tile,
    negmax: Tile,
    exp_sum: Tile,
    t_size: usize,
    t_idx: usize,
    F: usize,
    complete: bool,
) {
    nisa::tensor_reduce(
        dst = negmax[[0..t_size, t_idx..t_idx + 1]],
        op = maximum,
        data = src[[0..t_size, t_idx, 0..F]],
        axis = 1,
        negate = true,
        keepdims = true,
    );
    let result_exp = ndarray([t_size, 1, F], f32, Sbuf);
    nisa::activation(
        dst = result_exp,
        op = exp,
        data = src[[0..t_size, t_idx..t_idx + 1, 0..F]],
        bias = negmax[[0..t_size, t_idx..t_idx + 1]],
        reduce_op = add,
        reduce_res = exp_sum.slice(0, 0, t_size).select(1, t_idx),
        reduce_cmd = reset_reduce,
    );
    nisa::reciprocal(
        dst = exp_sum[[0..t_size, t_idx, 0..1]],
        data = exp_sum[[0..t_size, t_idx, 0..1]],
    );
    if complete {
        nisa::tensor_scalar(
            dst = dst[[0..t_size, t_idx, 0..F]],
            data = result_exp,
            op0 = multiply,
            operand0 = exp_sum[[0..t_size, t_idx, 0..1]],
        );
    }
}

/// `dst [T, X]` (HBM) from `src [t_p_dim, n_tiles, X]` (SBUF): the whole tiles through
/// `_hbm_tiled_store_view`, the ragged last one through `_hbm_remainder_store_view`.
#[helper]
pub fn store_tiled(dst: Tensor, src: Tile, T: usize, t_p_dim: usize, X: usize) {
    let whole = T / t_p_dim;
    let remainder = T % t_p_dim;
    if whole > 0 {
        nisa::dma_copy(
            dst = dst
                .slice(0, 0, whole * t_p_dim)
                .reshape_dim(0, (whole, t_p_dim))
                .permute((1, 0, 2)),
            src = src[[0..t_p_dim, 0..whole, 0..X]],
        );
    }
    if remainder > 0 {
        nisa::dma_copy(
            dst = dst
                .slice(0, whole * t_p_dim, whole * t_p_dim + remainder)
                .expand_dim(1),
            src = src[[0..remainder, whole..whole + 1, 0..X]],
        );
    }
}

/// The router: `(router_logits [T, E] f32, expert_index [T, K] u32, expert_affinities [T, E]
/// f32)` of `x [H, T]` and `w [H, E]`.
#[kernel(
    router_topk_bf16_512x2048x128_k8_norm(T = bf16, TOK = 512, H = 2048, E = 128, K = 8, PRE_NORM = true, NORM_TOPK = true),
    router_topk_bf16_100x256x64_k4(TOK = 100, T = bf16, H = 256, E = 64, K = 4, PRE_NORM = true, NORM_TOPK = false),
    router_topk_bf16_200x384x96_k6_norm(T = bf16, TOK = 200, H = 384, E = 96, K = 6, PRE_NORM = true, NORM_TOPK = true),
    router_topk_bf16_300x256x40_k2_act2(T = bf16, TOK = 300, H = 256, E = 40, K = 2, PRE_NORM = false, NORM_TOPK = false),
    router_topk_f32_128x128x512_k8_act2(T = f32, TOK = 128, H = 128, E = 512, K = 8, PRE_NORM = false, NORM_TOPK = false),
)]
pub fn router_topk<
    T,
    const TOK: usize,
    const H: usize,
    const E: usize,
    const K: usize,
    const PRE_NORM: bool,
    const NORM_TOPK: bool,
>(
    x: Hbm<T, H, TOK>,
    w: Hbm<T, H, E>,
) -> (Hbm<f32, TOK, E>, Hbm<u32, TOK, K>, Hbm<f32, TOK, E>) {
    let P_MAX = 128;
    let router_logits = ndarray([TOK, E], f32, SharedHbm);
    let expert_index = ndarray([TOK, K], u32, SharedHbm);
    let expert_affinities = ndarray([TOK, E], f32, SharedHbm);

    // The pipeline's stages, as the source derives them from its flags.
    let act1 = PRE_NORM;
    let act2 = !PRE_NORM;
    let norm = act1 & NORM_TOPK;
    let scatter = act2 | norm;

    let num_h_tiles = H / P_MAX;
    let num_t_tiles = (TOK + P_MAX - 1) / P_MAX;
    let t_p_dim = if num_t_tiles == 1 { TOK } else { P_MAX };
    let T_pad = if TOK <= 128 {
        0
    } else {
        num_t_tiles * P_MAX - TOK
    };

    // router_topk_input_x_load (hbm_layout 0, sb_layout 3) and router_topk_input_w_load.
    let x_sb = ndarray([P_MAX, num_h_tiles, TOK], x.dtype, Sbuf);
    nisa::dma_copy(
        dst = x_sb,
        src = x.reshape_dim(0, (num_h_tiles, P_MAX)).permute((1, 0, 2)),
    );
    let w_sb = ndarray([P_MAX, num_h_tiles, E], w.dtype, Sbuf);
    nisa::dma_copy(
        dst = w_sb,
        src = w.reshape_dim(0, (num_h_tiles, P_MAX)).permute((1, 0, 2)),
    );

    // The tiled matmul: router_logits_sb [t_p_dim, num_t_tiles, E].
    let router_logits_sb = ndarray([t_p_dim, num_t_tiles, E], f32, Sbuf);
    for t_tile_idx in static_range(num_t_tiles) {
        let start_t = t_tile_idx * t_p_dim;
        let t_size = min(t_p_dim, TOK - start_t);
        let router_logits_psum = ndarray([P_MAX, E], f32, Psum);
        for h_tile_idx in static_range(num_h_tiles) {
            nisa::nc_matmul(
                dst = router_logits_psum[[0..t_size, 0..E]],
                stationary = x_sb[[0..P_MAX, h_tile_idx, start_t..start_t + t_size]],
                moving = w_sb[[0..P_MAX, h_tile_idx, 0..E]],
            );
        }
        nisa::tensor_copy(
            dst = router_logits_sb[[0..t_size, t_tile_idx, 0..E]],
            src = router_logits_psum[[0..t_size, 0..E]],
        );
    }
    store_tiled(router_logits, router_logits_sb, TOK, t_p_dim, E);

    // ACT1: softmax of every logit.
    let expert_affinities_full_sb = ndarray([t_p_dim, num_t_tiles, E], f32, Sbuf);
    if act1 {
        for t_tile_idx in static_range(num_t_tiles) {
            let t_size = min(t_p_dim, TOK - t_tile_idx * t_p_dim);
            // The source's local intermediates of a complete activation.
            let negmax = ndarray([t_size, num_t_tiles], f32, Sbuf);
            let exp_sum = ndarray([t_size, num_t_tiles, 1], f32, Sbuf);
            compute_activation(
                expert_affinities_full_sb,
                router_logits_sb,
                negmax,
                exp_sum,
                t_size,
                t_tile_idx,
                E,
                true,
            );
        }
        if !scatter {
            store_tiled(
                expert_affinities,
                expert_affinities_full_sb,
                TOK,
                t_p_dim,
                E,
            );
        }
    }

    // topK: max8, then the first k values and their indices.
    let topk_input_sb = if act1 {
        expert_affinities_full_sb
    } else {
        router_logits_sb
    };
    let router_logits_topk_sb = ndarray([t_p_dim, num_t_tiles, K], f32, Sbuf);
    let router_indexes_topk_sb = ndarray([t_p_dim, num_t_tiles, K], u32, Sbuf);
    let router_indexes_topk_f32 = ndarray([t_p_dim, num_t_tiles, K], f32, Sbuf);
    let tmp_buffer = ndarray([t_p_dim, 8], u32, Sbuf);
    for t_tile_idx in static_range(num_t_tiles) {
        let t_size = min(t_p_dim, TOK - t_tile_idx * t_p_dim);
        let top8 = ndarray([t_size, 8], f32, Sbuf);
        nisa::max8(
            dst = top8[[0..t_size, 0..8]],
            src = topk_input_sb[[0..t_size, t_tile_idx, 0..E]],
        );
        nisa::tensor_copy(
            dst = router_logits_topk_sb[[0..t_size, t_tile_idx, 0..K]],
            src = top8[[0..t_size, 0..K]],
        );
        nisa::nc_find_index8(
            dst = tmp_buffer[[0..t_size, 0..8]],
            data = topk_input_sb[[0..t_size, t_tile_idx, 0..E]],
            vals = top8,
        );
        nisa::tensor_copy(
            dst = router_indexes_topk_sb[[0..t_size, t_tile_idx, 0..K]],
            src = tmp_buffer[[0..t_size, 0..K]],
        );
        nisa::tensor_copy(
            dst = router_indexes_topk_f32[[0..t_size, t_tile_idx, 0..K]],
            src = router_indexes_topk_sb[[0..t_size, t_tile_idx, 0..K]],
        );
    }
    store_tiled(expert_index, router_indexes_topk_sb, TOK, t_p_dim, K);

    if scatter {
        // ACT2's numerator over every logit with the top-k's max and denominator, the norm's
        // scale, the one-hot mask and its product.
        let router_logits_topk_negmax_sb = ndarray([t_p_dim, num_t_tiles], f32, Sbuf);
        let router_logits_topk_exp_sum_sb = ndarray([t_p_dim, num_t_tiles, 1], f32, Sbuf);
        let router_logits_exp_sb = ndarray([t_p_dim, num_t_tiles, E], f32, Sbuf);
        let router_logits_softmax_sb = ndarray([t_p_dim, num_t_tiles, E], f32, Sbuf);
        let one_hot_sb = ndarray([t_p_dim, num_t_tiles, E], f32, Sbuf);
        if T_pad > 0 {
            nisa::memset(dst = one_hot_sb, value = 0.0, engine = gpsimd);
        }
        let sum_of_max_sb = ndarray([t_p_dim, num_t_tiles, 1], f32, Sbuf);
        for t_tile_idx in static_range(num_t_tiles) {
            let t_size = min(t_p_dim, TOK - t_tile_idx * t_p_dim);
            if act2 {
                // compute_activation without completing it: the top-k's negated max and the
                // reciprocal of their exponentials' sum.
                compute_activation(
                    router_logits_topk_sb,
                    router_logits_topk_sb,
                    router_logits_topk_negmax_sb,
                    router_logits_topk_exp_sum_sb,
                    t_size,
                    t_tile_idx,
                    K,
                    false,
                );
                nisa::activation(
                    dst = router_logits_exp_sb[[0..t_size, t_tile_idx, 0..E]],
                    op = exp,
                    data = router_logits_sb[[0..t_size, t_tile_idx, 0..E]],
                    bias = router_logits_topk_negmax_sb[[0..t_size, t_tile_idx..t_tile_idx + 1]],
                );
                nisa::tensor_scalar(
                    dst = router_logits_softmax_sb[[0..t_size, t_tile_idx, 0..E]],
                    data = router_logits_exp_sb[[0..t_size, t_tile_idx, 0..E]],
                    op0 = multiply,
                    operand0 = router_logits_topk_exp_sum_sb[[0..t_size, t_tile_idx, 0..1]],
                );
            }
            if norm {
                nisa::tensor_reduce(
                    dst = sum_of_max_sb[[0..t_size, t_tile_idx, 0..1]],
                    op = add,
                    data = router_logits_topk_sb[[0..t_size, t_tile_idx, 0..K]],
                    axis = 1,
                    keepdims = true,
                );
                nisa::reciprocal(
                    dst = sum_of_max_sb[[0..t_size, t_tile_idx, 0..1]],
                    data = sum_of_max_sb[[0..t_size, t_tile_idx, 0..1]],
                );
            }
            // The one-hot mask: 1 where the expert number equals one of the k indices.
            let mask_sbuf = ndarray([t_size, E], f32, Sbuf);
            nisa::memset(dst = mask_sbuf, value = 0.0, engine = gpsimd);
            let (_, i_e) = mgrid![0..t_size, 0..E];
            let expert_num = iota(i_e, dtype = f32);
            for expert_idx in static_range(K) {
                let export_check = ndarray([t_size, E], f32, Sbuf);
                nisa::tensor_scalar(
                    dst = export_check[[0..t_size, 0..E]],
                    op0 = equal,
                    data = expert_num,
                    operand0 = router_indexes_topk_f32
                        [[0..t_size, t_tile_idx, expert_idx..expert_idx + 1]],
                );
                nisa::tensor_tensor(
                    dst = mask_sbuf[[0..t_size, 0..E]],
                    data1 = mask_sbuf[[0..t_size, 0..E]],
                    op = add,
                    data2 = export_check[[0..t_size, 0..E]],
                );
            }
            if act1 {
                nisa::tensor_scalar(
                    dst = expert_affinities_full_sb[[0..t_size, t_tile_idx, 0..E]],
                    data = expert_affinities_full_sb[[0..t_size, t_tile_idx, 0..E]],
                    op0 = multiply,
                    operand0 = sum_of_max_sb[[0..t_size, t_tile_idx, 0..1]],
                );
                nisa::tensor_tensor(
                    dst = one_hot_sb[[0..t_size, t_tile_idx, 0..E]],
                    data1 = mask_sbuf[[0..t_size, 0..E]],
                    op = multiply,
                    data2 = expert_affinities_full_sb[[0..t_size, t_tile_idx, 0..E]],
                );
            } else {
                nisa::tensor_tensor(
                    dst = one_hot_sb[[0..t_size, t_tile_idx, 0..E]],
                    data1 = mask_sbuf[[0..t_size, 0..E]],
                    op = multiply,
                    data2 = router_logits_softmax_sb[[0..t_size, t_tile_idx, 0..E]],
                );
            }
        }
        store_tiled(expert_affinities, one_hot_sb, TOK, t_p_dim, E);
    }
    (router_logits, expert_index, expert_affinities)
}

/// The library's `router_topk_torch_ref` in f64 for this configuration: `logits = x.T @ w`, the
/// experts of each token by decreasing logit, and the affinities: with `pre_norm` the softmax of
/// every logit (its top `k` divided by their sum and the rest 0 with `norm_topk`), without it the
/// softmax of the top `k` logits at their experts and 0 elsewhere. Returns `(logits, order,
/// affinities)`, `order[t]` every expert of token `t` by decreasing logit.
pub fn reference(
    x: ArrayView2<f64>,
    w: ArrayView2<f64>,
    k: usize,
    pre_norm: bool,
    norm_topk: bool,
) -> (Array2<f64>, Vec<Vec<usize>>, Array2<f64>) {
    let (h, t) = x.dim();
    let e = w.dim().1;
    let mut logits = Array2::<f64>::zeros((t, e));
    for ti in 0..t {
        for ei in 0..e {
            logits[[ti, ei]] = (0..h).map(|hi| x[[hi, ti]] * w[[hi, ei]]).sum();
        }
    }
    let mut order = Vec::with_capacity(t);
    let mut affinities = Array2::<f64>::zeros((t, e));
    for ti in 0..t {
        let row: Vec<f64> = (0..e).map(|ei| logits[[ti, ei]]).collect();
        let mut idx: Vec<usize> = (0..e).collect();
        idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
        let softmax = |vals: &[f64]| {
            let m = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = vals.iter().map(|v| (v - m).exp()).sum();
            vals.iter().map(|v| (v - m).exp() / s).collect::<Vec<f64>>()
        };
        if pre_norm {
            let full = softmax(&row);
            if norm_topk {
                let sum: f64 = idx[..k].iter().map(|&i| full[i]).sum();
                for &i in &idx[..k] {
                    affinities[[ti, i]] = full[i] / sum;
                }
            } else {
                for (ei, v) in full.iter().enumerate() {
                    affinities[[ti, ei]] = *v;
                }
            }
        } else {
            let top: Vec<f64> = idx[..k].iter().map(|&i| row[i]).collect();
            for (j, v) in softmax(&top).iter().enumerate() {
                affinities[[ti, idx[j]]] = *v;
            }
        }
        order.push(idx);
    }
    (logits, order, affinities)
}

/// The library's router on `T = 512`, `H = 2048`, `E = 128`, `k = 8` bf16, ACT1 softmax with the
/// top-k normalised and scattered, checked against the f64 reference, timed on the host and
/// estimated by the timing model for Trn2 and Trn3.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (t, h, e, k) = (512, 2048, 128, 8);
    let x = common::uniform(Ix2(h, t), 31, -1.0, 1.0).mapv(bf16::from_f64);
    let w = common::uniform(Ix2(h, e), 32, -0.1, 0.1).mapv(bf16::from_f64);
    let xd = DeviceTensor::from_array(&x)?;
    let wd = DeviceTensor::from_array(&w)?;
    let kernel = &router_topk_bf16_512x2048x128_k8_norm::KERNEL;
    let mut core = NeuronCore::default();
    cli.profile.run(&mut core, kernel, &[xd.arg(), wd.arg()])?;
    let (mut logits, mut index, mut affinities) =
        router_topk_bf16_512x2048x128_k8_norm(&mut core, &xd, &wd)?;
    let time = common::median_time(5, || {
        router_topk_bf16_512x2048x128_k8_norm::launch_into(
            &mut core,
            &xd,
            &wd,
            &mut logits,
            &mut index,
            &mut affinities,
        )
    })?;
    let (want_logits, order, want_aff) = reference(
        x.mapv(f64::from).view(),
        w.mapv(f64::from).view(),
        k,
        true,
        true,
    );
    let got_logits = logits.into_array::<Ix2>()?;
    let got_index = index.into_array::<Ix2>()?;
    let got_aff = affinities.into_array::<Ix2>()?;
    let lc = common::compare(
        got_logits.iter().map(|&v| f64::from(v)),
        want_logits.iter().copied(),
        want_logits.iter().map(|w| 1e-5 + 1e-5 * w.abs()),
    );
    let ac = common::compare(
        got_aff.iter().map(|&v| f64::from(v)),
        want_aff.iter().copied(),
        want_aff.iter().map(|w| 1e-6 + 1e-4 * w.abs()),
    );
    let same_index = (0..t)
        .filter(|&ti| (0..k).all(|j| got_index[[ti, j]] as usize == order[ti][j]))
        .count();
    println!(
        "nkilib router_topk T {t} H {h} E {e} k {k} bf16: logits {lc}; affinities {ac}; indices as the reference's order for {same_index} of {t} tokens; median launch {time:.2?} (5 launches)"
    );
    for target in [Target::Trn2, Target::Trn3] {
        let mut core = NeuronCore::new(target);
        let schedule = Timing::new()
            .params(Params::for_target(target))
            .detail(Detail::Summary)
            .run_shapes(&mut core, kernel, &[&[h, t], &[h, e]])?;
        println!("  modeled on {target:?}: {:.1} µs", schedule.latency_us());
    }
    if !lc.within || !ac.within || same_index != t {
        return Err("result outside the tolerance".into());
    }
    Ok(())
}
