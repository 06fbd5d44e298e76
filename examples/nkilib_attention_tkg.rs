//! The NKI Library's attention for token generation (`attention_tkg` of
//! `src/nkilib_src/nkilib/core/attention/attention_tkg.py` in aws-neuron/nki-library): a decode
//! step, `SA` new query tokens of `H` heads per batch against a KV cache of `S` prior positions
//! whose last `SA` are the active keys and values: `QK^T` on TensorE with `K` stationary, the
//! mask applied by a predicated copy out of PSUM, a cascaded max (a strided reduction, a PE
//! transpose and a reduction of the transposed maxima), `exp(QK - max)`, a cascaded sum (ones
//! matmuls on TensorE), `softmax · V` with `V` stationary, and, past 8K prior positions, flash
//! attention over tiles of 8K with a running max, a running sum and a running output.
//!
//! Written in NKI 0.6's destination-first dialect as the source is, its steps in the source's
//! order under its functions' names (comments in the kernel; the small shared functions as
//! `#[helper]`s): `_load_mask` (the mask's HBM view
//! `reshape_dim(0, (128, n_tile))`, partition `p` and column tile `t` holding prior position
//! `p · n_tile + t`: the source's `strided_mm1` layout), `_compute_qk_matmul` (`k_prior`'s tile
//! loaded `[d, s]`, `k_active` copied into its last `SA` columns on the Scalar engine, matmul
//! groups of 4K (fewer when the PSUM bank would overflow) of stationary `K` column tiles read with
//! step `n_tile`, the group's PSUM copied into `qk` by `tensor_copy_predicated` on the mask),
//! `_cascaded_max_reduce` (`tensor_reduce` max over a `permute`d view, `nc_transpose` into PSUM
//! and a max along it, the running max's update with `exp(prev - cur)` as correction,
//! `_transpose_broadcast_max`: the maximum clamped at fp32's lowest and broadcast over the
//! partitions by one PE transpose of a stride-0 view), `_compute_exp_qk` (one `tensor_tensor`
//! subtract against the max broadcast along the column tiles, one `activation(exp)` into the
//! input dtype), `_cascaded_sum_reduction` (`nc_matmul` of each column tile against a ones
//! column, a sum along PSUM; its reciprocal transposed 32 at a time on the Vector engine and
//! broadcast over the partitions by `nc_stream_shuffle`), `_compute_pv_matmul_and_store` (`v_prior`
//! loaded `reshape_dim(0, (128, n_tile))` with `v_active` in two DMAs into the last positions,
//! one PSUM accumulation over the column tiles per batch) and the flash-attention updates and
//! finalisation (`_fa_update_running_max`, `_fa_update_running_sum`, `_fa_accumulate_output`,
//! `_fa_finalize_and_store`), the output stored through `permute((2, 0, 1, 3))` of `out`.
//!
//! What differs, and why:
//! - Rust's spelling. The source's `AttnTKGConfig` holds the shapes (`bs` `B`, `q_head` `H`,
//!   `s_active` `SA`, `curr_sprior` `S`, `full_sprior` `SF`, `d_head` `D`) and flags; the
//!   shapes are meta-parameters here and the flags the one configuration ported. Its
//!   `AttnTileParams` are `let`s computed as the source computes them, and the Python `range`
//!   loops are `static_range`s (unrolled, as NKI traces them): the last flash-attention tile is
//!   ragged by `min()`.
//! - One configuration of the source's many, the one of the library test's `qk_in_sb` cases
//!   with default flags (`AttnTKGConfig(4, 1, 5, 10240, 10240, 128, 0, qk_in_sb=True)`): `q`
//!   and `k_active` in SBUF (`qk_in_sb`; the test's wrapper loads them there from HBM, and so
//!   does this kernel, first), `k_prior` `[B, 1, D, SF]` (not `tp_k_prior`), the mask generated
//!   outside the kernel (not `use_pos_id`), `strided_mm1`, the output in HBM, one program. Not
//!   ported: fused RoPE (`fuse_rope`, `k_out`), the in-kernel mask (`gen_mask_tkg`, sliding
//!   windows), attention sinks, block KV caches (`active_blocks_table`, indirect DMA and
//!   `dma_transpose` loads), `tp_k_prior` (a `dma_transpose` of `k_prior`), FP8 KV caches,
//!   `strided_mm1 = False`, SBUF outputs (`out_in_sb`, `k_out_in_sb`), batch tiling (used when
//!   `8 · bs · q_head · s_active · 8192` bytes exceed 16 MiB), the debug tensors and LNC2
//!   sharding (batch or `s_prior` split over the two cores of a logical NeuronCore with
//!   `sendrecv`; the modeled device is one NeuronCore).
//! - `stream_shuffle_broadcast` of a row: the source transposes the row into the first partition
//!   of the destination and shuffles that partition over the destination's quadrants, the first
//!   quadrant in place. The modeled engines refuse a shuffle whose destination partly overlaps its
//!   source (the order in which a streaming engine reads and writes is not defined), so the row is
//!   a one-partition tile of its own: the same transposes and shuffles, into and from that tile.
//! - The source's SBUF stack allocator (`SbufManager`, its scopes and interleave degrees) and its
//!   PSUM addresses are the compiler's allocation here; they change no instruction.
//! - Each `QK^T` matmul writes its own slot of the group's PSUM tile once, so it is written with
//!   `accumulate = false` (the source's default, `None`, overwrites a location's first write; here
//!   a later slot of a tile already written would add). As in the source, a group issues
//!   `n_mm1_per_grp` matmuls even when the tile has fewer column tiles left (their products land
//!   in slots the flush does not read); they are kept, and timed. The strided view of `K` ends
//!   at its last column: the source's `end`, `k_tile_offset + num_acc · n_tile`, runs past the
//!   tile for offsets above 0, which a `slice` here refuses; the columns are the same.
//! - `_compute_exp_qk` takes the source's branch for NeuronCore-v2 and v3 (`get_nc_version() <
//!   gen4`): one `tensor_tensor` and one `activation` over the whole tile. The kernel is compiled
//!   for the default target, as the other ports are, and the Trn2 and Trn3 estimates below time
//!   that program; on Trn3 the source issues one pair per column tile instead (its comment: the
//!   instruction start-up cost on Trn2 outweighs the pipelining), which is not ported.
//!
//! `cargo run --release --example nkilib_attention_tkg` runs the library test's shape
//! `bs = 4`, `q_head = 1`, `s_active = 5`, `s_prior = 10240`, `d_head = 128` in bf16 (two flash
//! attention tiles, 8192 and 2048 positions), checks the output against the library's
//! `attention_tkg_torch_ref` written in f64 (`reference` below) with the library test's inputs
//! (uniform in `[0, 1)`) and tolerance (its `maxAllClose`: `|got - want| <= 1e-5 + 1e-2 ·
//! max|want|`), and prints the median host time per launch and the
//! timing model's estimate for Trn2 and Trn3.

#![allow(non_snake_case)] // NKI's names: B, H, SA, S, SF, D, P_MAX

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array1, Array4, ArrayView2, ArrayView4, Ix2, Ix4};
use nki::prelude::*;
use nki::program::Target;
use nki::timing::{Detail, Params, Timing};

/// `_column_tile_transpose`: `src[0..tile_size, index]` (a column) into `dst[0, index *
/// tile_stride ..]` (a row), 32 partitions at a time on the Vector engine.
#[helper]
pub fn column_tile_transpose(
    dst: Tile,
    src: Tile,
    index: usize,
    tile_size: usize,
    tile_stride: usize,
) {
    let QUADRANT = 32;
    let base_offset = index * tile_stride;
    for quadrant_idx in static_range((tile_size + QUADRANT - 1) / QUADRANT) {
        let offset = quadrant_idx * QUADRANT;
        let full_offset = base_offset + offset;
        let tp_size = min(QUADRANT, tile_size - offset);
        nisa::nc_transpose(
            dst = dst[[0..1, full_offset..full_offset + tp_size]],
            data = src[[offset..offset + tp_size, index..index + 1]],
            engine = vector,
        );
    }
}

/// `_s_active_bqh_tile_transpose_broadcast`: `src [bqh_tile, n_bsq_tiles]` transposed into one
/// row, then broadcast over `dst [X, BQH]`'s partitions by `stream_shuffle_broadcast` (one
/// `nc_stream_shuffle` per 32 partitions). The source transposes into `dst`'s first partition and
/// shuffles from there; the row is a tile of its own here (see the header).
#[helper]
pub fn transpose_broadcast(
    src: Tile,
    dst: Tile,
    dst_p: usize,
    BQH: usize,
    bqh_tile: usize,
    n_bsq_full_tiles: usize,
    bqh_remainder: usize,
) {
    let row = ndarray([1, BQH], f32, Sbuf);
    for i_bsq_tile in static_range(n_bsq_full_tiles) {
        column_tile_transpose(row, src, i_bsq_tile, bqh_tile, bqh_tile);
    }
    if bqh_remainder > 0 {
        column_tile_transpose(row, src, n_bsq_full_tiles, bqh_remainder, bqh_tile);
    }
    for i in static_range((dst_p + 31) / 32) {
        let cur_npar = min(32, dst_p - i * 32);
        nisa::nc_stream_shuffle(
            src = row,
            dst = dst[[i * 32..i * 32 + cur_npar, 0..BQH]],
            shuffle_mask = [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0,
            ],
        );
    }
}

/// `_transpose_max_psum`: the column maxima `qk_max[.., index * bqh_tile ..][0..tile_size]`
/// transposed into PSUM and reduced along their 128 partitions into `qk_max_buf[.., index]`.
#[helper]
pub fn transpose_max_psum(
    qk_max: Tile,
    qk_max_buf: Tile,
    index: usize,
    tile_size: usize,
    bqh_tile: usize,
) {
    let qk_max_psum = ndarray([tile_size, 128], f32, Psum);
    nisa::nc_transpose(
        dst = qk_max_psum,
        data = qk_max[[0..128, index * bqh_tile..index * bqh_tile + tile_size]],
    );
    nisa::tensor_reduce(
        dst = qk_max_buf[[0..tile_size, index..index + 1]],
        op = maximum,
        data = qk_max_psum,
        axis = 1,
        keepdims = true,
    );
}

/// `_transpose_broadcast_max`: column `index` of `max_src` clamped at fp32's lowest value (a
/// column masked whole would give `-inf - (-inf)`), transposed and broadcast over the 128
/// partitions by one PE transpose of a stride-0 view (`tp_broadcast`), into `qk_max`.
#[helper]
pub fn transpose_broadcast_max(
    qk_max: Tile,
    max_src: Tile,
    index: usize,
    tile_size: usize,
    bqh_tile: usize,
) {
    let qk_max_buf_copy = ndarray([tile_size, 1], f32, Sbuf);
    let qk_max_copy = ndarray([128, tile_size], f32, Sbuf);
    nisa::tensor_scalar(
        dst = qk_max_buf_copy,
        data = max_src[[0..tile_size, index..index + 1]],
        op0 = maximum,
        operand0 = finfo(f32).min,
    );
    let tp_psum = ndarray([128, tile_size], f32, Psum);
    nisa::nc_transpose(
        dst = tp_psum,
        data = qk_max_buf_copy.slice(1, 0, 1).broadcast(1, 128),
    );
    nisa::tensor_copy(dst = qk_max_copy, src = tp_psum);
    nisa::tensor_copy(
        dst = qk_max[[0..128, index * bqh_tile..index * bqh_tile + tile_size]],
        src = qk_max_copy,
    );
}

/// `_tile_sum_reduction`: the column sums of `qk_io_type`'s columns `index * bqh_tile ..`
/// (`tile_size` of them) in every column tile, one `nc_matmul` against the ones column per
/// column tile into PSUM, then a sum along PSUM into `exp_sum[.., index]`.
#[helper]
pub fn tile_sum_reduction(
    qk_io_type: Tile,
    one_vec: Tile,
    exp_sum: Tile,
    index: usize,
    tile_size: usize,
    tile_n_sprior: usize,
    BQH: usize,
    bqh_tile: usize,
) {
    let sum_reduce_psum = ndarray([tile_size, tile_n_sprior], f32, Psum);
    let pos = index * bqh_tile;
    for i_exp_reduce in static_range(tile_n_sprior) {
        nisa::nc_matmul(
            dst = sum_reduce_psum.slice(1, i_exp_reduce, i_exp_reduce + 1),
            stationary = qk_io_type
                .reshape_dim(1, (tile_n_sprior, BQH))
                .select(1, i_exp_reduce)
                .slice(1, pos, pos + tile_size),
            moving = one_vec,
            accumulate = false,
        );
    }
    nisa::tensor_reduce(
        dst = exp_sum[[0..tile_size, index..index + 1]],
        op = add,
        data = sum_reduce_psum,
        axis = 1,
    );
}

/// `_gather_and_store_output` for one program and an HBM output: `res [D, BQH]` (columns
/// batch-major, then head, then token) into `out [B, H, D, SA]`.
#[helper]
pub fn store_output(out: Tensor, res: Tile, B: usize, H: usize, SA: usize, D: usize) {
    nisa::dma_copy(
        dst = out.slice(0, 0, B).permute((2, 0, 1, 3)),
        src = res.reshape((D, B, H, SA)),
    );
}

/// The attention decode step: `out [B, H, D, SA]` of `q [D, B·H·SA]` (column `b·H·SA + h·SA +
/// s`), `k_active [D, B·SA]`, `v_active [B, 1, SA, D]`, `k_prior [B, 1, D, SF]`, `v_prior [B, 1,
/// SF, D]` and `mask [S, B, H, SA]` (nonzero where prior position `s` is attended), of which the
/// first `S` prior positions are used, the last `SA` of them replaced by the active keys and
/// values.
#[kernel(
    attention_tkg_bf16_b4_h1_sa5_s10240_d128(T = bf16, B = 4, H = 1, SA = 5, S = 10240, SF = 10240, D = 128),
    attention_tkg_bf16_b4_h10_sa5_s5376_d64(T = bf16, B = 4, H = 10, SA = 5, S = 5376, SF = 5376, D = 64),
    attention_tkg_bf16_b2_h2_sa7_s9216_d64(T = bf16, B = 2, H = 2, SA = 7, S = 9216, SF = 16384, D = 64),
    attention_tkg_f32_b1_h1_sa1_s128_d64(T = f32, B = 1, H = 1, SA = 1, S = 128, SF = 256, D = 64),
)]
pub fn attention_tkg<
    T,
    const B: usize,
    const H: usize,
    const SA: usize,
    const S: usize,
    const SF: usize,
    const D: usize,
>(
    q: Hbm<T, D, { B * H * SA }>,
    k_active: Hbm<T, D, { B * SA }>,
    v_active: Hbm<T, B, 1, SA, D>,
    k_prior: Hbm<T, B, 1, D, SF>,
    v_prior: Hbm<T, B, 1, SF, D>,
    mask: Hbm<u8, S, B, H, SA>,
) -> Hbm<T, B, H, D, SA> {
    let P_MAX = 128;
    let PSUM_F_MAX = 512;
    // _FA_TILE_SIZE: prior lengths above it are processed in flash-attention tiles of it.
    let FA_TILE_SIZE = 8 * 1024;
    let out = ndarray([B, H, D, SA], q.dtype, SharedHbm);

    // _compute_tile_params' checks, compile errors of an instantiation here.
    assert!(B > 0, "Batch size must be strictly positive");
    assert!(H > 0, "Number of Q heads must be strictly positive");
    assert!(SA > 0, "Number of decode tokens must be strictly positive");
    assert!((S > 0) & (S <= SF), "curr_sprior must be <= full_sprior");
    assert!(
        (D > 0) & (D <= 128),
        "Unsupported d_head: must be between 1 and 128"
    );
    assert!(S % P_MAX == 0, "s_prior must be divisible by p_max");
    assert!(
        (S <= FA_TILE_SIZE) | (S % FA_TILE_SIZE == 0) | (S % FA_TILE_SIZE >= SA),
        "The last flash-attention tile must be able to hold s_active"
    );

    // _compute_tile_params and _update_atp_for_batch_tile (one program, one batch tile).
    let s_active_qh = SA * H;
    let BQH = B * s_active_qh;
    let bqh_remainder = BQH % P_MAX;
    let n_bsq_full_tiles = BQH / P_MAX;
    let n_bsq_tiles = n_bsq_full_tiles + if bqh_remainder > 0 { 1 } else { 0 };
    let bqh_tile = if n_bsq_tiles > 1 { P_MAX } else { BQH };
    let use_fa = S > FA_TILE_SIZE;
    let num_fa_tiles = if use_fa {
        (S + FA_TILE_SIZE - 1) / FA_TILE_SIZE
    } else {
        1
    };
    let fa_tile_s_prior = if use_fa { FA_TILE_SIZE } else { S };
    // uses_batch_tiling: one batch tile while 8 bytes per QK element of every batch fit 16 MiB.
    assert!(
        B <= (16 * 1024 * 1024) / (8 * H * SA * fa_tile_s_prior),
        "batch tiling (not ported) would be needed for this batch size"
    );
    // The QK^T matmul groups hold at least one column tile of q_head * s_active columns.
    assert!(
        s_active_qh <= PSUM_F_MAX,
        "q_head * s_active must fit one PSUM bank (512 fp32 columns)"
    );

    // qk_in_sb: q and k_active in SBUF, as the library test's wrapper loads them before the
    // kernel starts.
    let q_sb = ndarray([D, BQH], q.dtype, Sbuf);
    nisa::dma_copy(dst = q_sb, src = q);
    let k_active_sb = ndarray([D, B * SA], k_active.dtype, Sbuf);
    nisa::dma_copy(dst = k_active_sb, src = k_active);

    let one_vec = ndarray([P_MAX, 1], q.dtype, Sbuf);
    nisa::memset(dst = one_vec, value = 1.0);

    // _allocate_fa_buffers (declared whatever `use_fa`: a tile no instruction touches takes no
    // instruction).
    let fa_running_max = ndarray([bqh_tile, n_bsq_tiles], f32, Sbuf);
    let fa_running_sum = ndarray([bqh_tile, n_bsq_tiles], f32, Sbuf);
    let fa_correction_factor = ndarray([bqh_tile, n_bsq_tiles], f32, Sbuf);
    let fa_running_output = ndarray([D, BQH], f32, Sbuf);

    for fa_tile_idx in static_range(num_fa_tiles) {
        // _compute_fa_tile_context.
        let is_last_fa_tile = fa_tile_idx == num_fa_tiles - 1;
        let tile_offset = fa_tile_idx * fa_tile_s_prior;
        let tile_s_prior = if is_last_fa_tile & use_fa {
            min(fa_tile_s_prior, S - tile_offset)
        } else {
            fa_tile_s_prior
        };
        let tile_n_sprior = (tile_s_prior + P_MAX - 1) / P_MAX;

        // _allocate_qk_buffers: QK^T filled with -inf (masked positions keep it).
        let qk = ndarray([P_MAX, tile_n_sprior * BQH], f32, Sbuf);
        nisa::memset(dst = qk, value = -np::inf);
        let qk_io_type = ndarray([P_MAX, tile_n_sprior * BQH], q.dtype, Sbuf);
        let mask_sb = ndarray([P_MAX, tile_n_sprior * BQH], u8, Sbuf);

        // _load_mask (pre-generated, strided_mm1 layout).
        nisa::dma_copy(
            dst = mask_sb.reshape_dim(1, (tile_n_sprior, BQH)),
            src = mask
                .reshape([S, BQH])
                .slice(0, tile_offset, tile_offset + tile_s_prior)
                .reshape_dim(0, (P_MAX, tile_n_sprior)),
        );

        // Step 1. _compute_qk_matmul.
        let mm1_grp_sz = if (4096 / P_MAX) * s_active_qh > PSUM_F_MAX {
            (PSUM_F_MAX / s_active_qh) * P_MAX
        } else {
            4096
        };
        let n_mm1_per_grp = mm1_grp_sz / P_MAX;
        let n_mm1_grps = (tile_s_prior + mm1_grp_sz - 1) / mm1_grp_sz;
        for i_b in static_range(B) {
            let k_sb = ndarray([D, tile_s_prior], k_prior.dtype, Sbuf);
            nisa::dma_copy(
                dst = k_sb,
                src = k_prior.select(0, i_b).squeeze_dim(0).slice(
                    1,
                    tile_offset,
                    tile_offset + tile_s_prior,
                ),
            );
            if is_last_fa_tile {
                nisa::tensor_copy(
                    dst = k_sb[[0..D, tile_s_prior - SA..tile_s_prior]],
                    src = k_active_sb[[0..D, i_b * SA..i_b * SA + SA]],
                    engine = scalar,
                );
            }
            for i_mm1_grp in static_range(n_mm1_grps) {
                let qk_psum = ndarray([P_MAX, n_mm1_per_grp * s_active_qh], f32, Psum);
                for i_mm1 in static_range(n_mm1_per_grp) {
                    let k_tile_offset = i_mm1_grp * n_mm1_per_grp + i_mm1;
                    // The source breaks once the offset passes the tile's last column.
                    if k_tile_offset < tile_s_prior {
                        let num_acc = min(
                            P_MAX,
                            (tile_s_prior - 1 - k_tile_offset) / tile_n_sprior + 1,
                        );
                        nisa::nc_matmul(
                            dst = qk_psum
                                .reshape_dim(1, (n_mm1_per_grp, s_active_qh))
                                .select(1, i_mm1)
                                .slice(0, 0, num_acc),
                            stationary = k_sb.slice(
                                1,
                                k_tile_offset,
                                k_tile_offset + (num_acc - 1) * tile_n_sprior + 1,
                                tile_n_sprior,
                            ),
                            moving = q_sb.reshape_dim(1, (B, s_active_qh)).select(1, i_b),
                            accumulate = false,
                        );
                    }
                }
                // Flush PSUM into qk where the mask is set (batch-interleaved columns).
                let sprior_tile_pos = i_mm1_grp * n_mm1_per_grp;
                if sprior_tile_pos < tile_n_sprior {
                    let num_acc_cpy = min(n_mm1_per_grp, tile_n_sprior - sprior_tile_pos);
                    nisa::tensor_copy_predicated(
                        dst = qk
                            .reshape_dim(1, (tile_n_sprior, B, s_active_qh))
                            .slice(1, sprior_tile_pos, sprior_tile_pos + num_acc_cpy)
                            .select(2, i_b),
                        src = qk_psum.reshape_dim(1, (n_mm1_per_grp, s_active_qh)).slice(
                            1,
                            0,
                            num_acc_cpy,
                        ),
                        predicate = mask_sb
                            .reshape_dim(1, (tile_n_sprior, B, s_active_qh))
                            .slice(1, sprior_tile_pos, sprior_tile_pos + num_acc_cpy)
                            .select(2, i_b),
                    );
                }
            }
        }

        // Step 2. _cascaded_max_reduce.
        let qk_max = ndarray([P_MAX, BQH], f32, Sbuf);
        nisa::tensor_reduce(
            dst = qk_max,
            op = maximum,
            data = qk.reshape_dim(1, (tile_n_sprior, BQH)).permute((0, 2, 1)),
            axis = 2,
            keepdims = false,
        );
        let qk_max_buf = ndarray([bqh_tile, n_bsq_tiles], f32, Sbuf);
        for i_bsq_tile in static_range(n_bsq_full_tiles) {
            transpose_max_psum(qk_max, qk_max_buf, i_bsq_tile, bqh_tile, bqh_tile);
        }
        if bqh_remainder > 0 {
            transpose_max_psum(
                qk_max,
                qk_max_buf,
                n_bsq_full_tiles,
                bqh_remainder,
                bqh_tile,
            );
        }
        if use_fa {
            // _fa_update_running_max (max not negated: no sink, one program).
            if fa_tile_idx == 0 {
                nisa::tensor_copy(dst = fa_running_max, src = qk_max_buf);
                nisa::memset(dst = fa_correction_factor, value = 1.0);
            } else {
                let prev_running_max = ndarray([bqh_tile, n_bsq_tiles], f32, Sbuf);
                nisa::tensor_copy(dst = prev_running_max, src = fa_running_max);
                nisa::tensor_tensor(
                    dst = fa_running_max,
                    data1 = fa_running_max,
                    data2 = qk_max_buf,
                    op = maximum,
                );
                // _fa_update_correction_factor: exp(prev - cur).
                for i_bsq_tile in static_range(n_bsq_tiles) {
                    nisa::activation(
                        dst = fa_correction_factor[[0..bqh_tile, i_bsq_tile..i_bsq_tile + 1]],
                        op = exp,
                        data = fa_running_max[[0..bqh_tile, i_bsq_tile..i_bsq_tile + 1]],
                        bias = prev_running_max[[0..bqh_tile, i_bsq_tile..i_bsq_tile + 1]],
                        scale = -1.0,
                    );
                }
            }
        }
        let max_src = if use_fa { fa_running_max } else { qk_max_buf };
        for i_bsq_tile in static_range(n_bsq_full_tiles) {
            transpose_broadcast_max(qk_max, max_src, i_bsq_tile, bqh_tile, bqh_tile);
        }
        if bqh_remainder > 0 {
            transpose_broadcast_max(qk_max, max_src, n_bsq_full_tiles, bqh_remainder, bqh_tile);
        }

        // Step 3. _compute_exp_qk (the NeuronCore-v2/v3 branch).
        nisa::tensor_tensor(
            dst = qk.reshape_dim(1, (tile_n_sprior, BQH)),
            data1 = qk.reshape_dim(1, (tile_n_sprior, BQH)),
            data2 = qk_max.expand_dim(1).broadcast(1, tile_n_sprior),
            op = subtract,
        );
        nisa::activation(dst = qk_io_type, op = exp, data = qk);

        // Step 4. _cascaded_sum_reduction.
        let exp_sum = ndarray([bqh_tile, n_bsq_tiles], f32, Sbuf);
        for i_bsq_tile in static_range(n_bsq_full_tiles) {
            tile_sum_reduction(
                qk_io_type,
                one_vec,
                exp_sum,
                i_bsq_tile,
                bqh_tile,
                tile_n_sprior,
                BQH,
                bqh_tile,
            );
        }
        if bqh_remainder > 0 {
            tile_sum_reduction(
                qk_io_type,
                one_vec,
                exp_sum,
                n_bsq_full_tiles,
                bqh_remainder,
                tile_n_sprior,
                BQH,
                bqh_tile,
            );
        }
        // Written and read without flash attention only (its reciprocal comes at the end).
        let exp_sum_recip = ndarray([P_MAX, BQH], f32, Sbuf);
        if use_fa {
            // _fa_update_running_sum: running_sum · correction + tile_sum.
            if fa_tile_idx == 0 {
                nisa::tensor_copy(dst = fa_running_sum, src = exp_sum);
            } else {
                nisa::tensor_tensor(
                    dst = fa_running_sum,
                    data1 = fa_running_sum,
                    data2 = fa_correction_factor,
                    op = multiply,
                );
                nisa::tensor_tensor(
                    dst = fa_running_sum,
                    data1 = fa_running_sum,
                    data2 = exp_sum,
                    op = add,
                );
            }
        } else {
            nisa::reciprocal(dst = exp_sum, data = exp_sum);
            transpose_broadcast(
                exp_sum,
                exp_sum_recip,
                P_MAX,
                BQH,
                bqh_tile,
                n_bsq_full_tiles,
                bqh_remainder,
            );
        }

        // Step 5. _compute_pv_matmul_and_store.
        let exp_v = ndarray([D, B, s_active_qh], f32, Sbuf);
        for i_b in static_range(B) {
            let v_sb = ndarray([P_MAX, D * tile_n_sprior], v_prior.dtype, Sbuf);
            nisa::dma_copy(
                dst = v_sb.reshape_dim(1, (tile_n_sprior, D)),
                src = v_prior
                    .select(0, i_b)
                    .squeeze_dim(0)
                    .slice(0, tile_offset, tile_offset + P_MAX * tile_n_sprior)
                    .reshape_dim(0, (P_MAX, tile_n_sprior)),
            );
            if is_last_fa_tile {
                // v_active into the last SA positions, strided as v_sb is: the first
                // SA % n_tile rows in one partition, the rest whole partitions.
                let load1_nrows = SA % tile_n_sprior;
                let load2_nrows = SA - load1_nrows;
                if load1_nrows > 0 {
                    let load1_pidx = P_MAX - load2_nrows / tile_n_sprior - 1;
                    nisa::dma_copy(
                        dst = v_sb
                            .slice(0, load1_pidx, load1_pidx + 1)
                            .reshape_dim(1, (tile_n_sprior, D))
                            .slice(1, tile_n_sprior - load1_nrows, tile_n_sprior),
                        src = v_active.select(0, i_b).slice(1, 0, load1_nrows),
                    );
                }
                if load2_nrows > 0 {
                    let load2_pidx = P_MAX - load2_nrows / tile_n_sprior;
                    nisa::dma_copy(
                        dst = v_sb
                            .slice(0, load2_pidx, load2_pidx + load2_nrows / tile_n_sprior)
                            .reshape_dim(1, (tile_n_sprior, D)),
                        src = v_active
                            .select(0, i_b)
                            .squeeze_dim(0)
                            .slice(0, load1_nrows, load1_nrows + load2_nrows)
                            .reshape_dim(0, (load2_nrows / tile_n_sprior, tile_n_sprior)),
                    );
                }
            }
            // (exp @ V)^T = V^T @ exp^T, accumulated over the column tiles.
            let exp_v_psum = ndarray([D, s_active_qh], f32, Psum);
            for i_t in static_range(tile_n_sprior) {
                nisa::nc_matmul(
                    dst = exp_v_psum,
                    stationary = v_sb.reshape_dim(1, (tile_n_sprior, D)).select(1, i_t),
                    moving = qk_io_type
                        .reshape_dim(1, (tile_n_sprior, BQH))
                        .select(1, i_t)
                        .slice(1, i_b * s_active_qh, (i_b + 1) * s_active_qh),
                );
            }
            if use_fa {
                nisa::tensor_copy(dst = exp_v.select(1, i_b), src = exp_v_psum);
            } else {
                nisa::tensor_tensor(
                    dst = exp_v.select(1, i_b),
                    data1 = exp_v_psum,
                    data2 = exp_sum_recip
                        .reshape_dim(1, (B, s_active_qh))
                        .select(1, i_b)
                        .slice(0, 0, D),
                    op = multiply,
                );
            }
        }
        if use_fa {
            // _fa_accumulate_output: running_output · correction + exp_v.
            let exp_v_flat = exp_v.reshape((D, BQH));
            if fa_tile_idx == 0 {
                nisa::tensor_copy(dst = fa_running_output, src = exp_v_flat);
            } else {
                let fa_correction_factor_bc = ndarray([D, BQH], f32, Sbuf);
                transpose_broadcast(
                    fa_correction_factor,
                    fa_correction_factor_bc,
                    D,
                    BQH,
                    bqh_tile,
                    n_bsq_full_tiles,
                    bqh_remainder,
                );
                nisa::tensor_tensor(
                    dst = fa_running_output,
                    data1 = fa_running_output,
                    data2 = fa_correction_factor_bc,
                    op = multiply,
                );
                nisa::tensor_tensor(
                    dst = fa_running_output,
                    data1 = fa_running_output,
                    data2 = exp_v_flat,
                    op = add,
                );
            }
        } else {
            store_output(out, exp_v.reshape((D, BQH)), B, H, SA, D);
        }
    }

    if use_fa {
        // _fa_finalize_and_store: the running output divided by the running sum.
        nisa::reciprocal(dst = fa_running_sum, data = fa_running_sum);
        let fa_sum_recip_bc = ndarray([D, BQH], f32, Sbuf);
        transpose_broadcast(
            fa_running_sum,
            fa_sum_recip_bc,
            D,
            BQH,
            bqh_tile,
            n_bsq_full_tiles,
            bqh_remainder,
        );
        nisa::tensor_tensor(
            dst = fa_running_output,
            data1 = fa_running_output,
            data2 = fa_sum_recip_bc,
            op = multiply,
        );
        store_output(out, fa_running_output, B, H, SA, D);
    }
    out
}

/// The library's `attention_tkg_torch_ref` in f64 for this configuration: for each batch `b`,
/// head `h` and active token `a`, the scores `K[b, :, s] · q[:, b·H·SA + h·SA + a]` over the first
/// `S` prior positions (the last `SA` keys and values replaced by the active ones), `-inf` where
/// `mask[s, b, h, a]` is 0, softmax over `s`, times `V`. Returns `[B, H, D, SA]`.
pub fn reference(
    q: ArrayView2<f64>,
    k_active: ArrayView2<f64>,
    v_active: ArrayView4<f64>,
    k_prior: ArrayView4<f64>,
    v_prior: ArrayView4<f64>,
    mask: ArrayView4<u8>,
    (b_n, h_n, sa, s, d): (usize, usize, usize, usize, usize),
) -> Array4<f64> {
    let mut out = Array4::<f64>::zeros((b_n, h_n, d, sa));
    for b in 0..b_n {
        let key = |pos: usize, i: usize| {
            if pos >= s - sa {
                k_active[[i, b * sa + pos - (s - sa)]]
            } else {
                k_prior[[b, 0, i, pos]]
            }
        };
        let value = |pos: usize, i: usize| {
            if pos >= s - sa {
                v_active[[b, 0, pos - (s - sa), i]]
            } else {
                v_prior[[b, 0, pos, i]]
            }
        };
        for h in 0..h_n {
            for a in 0..sa {
                let col = b * h_n * sa + h * sa + a;
                let scores: Array1<f64> = (0..s)
                    .map(|pos| {
                        if mask[[pos, b, h, a]] == 0 {
                            f64::NEG_INFINITY
                        } else {
                            (0..d).map(|i| key(pos, i) * q[[i, col]]).sum()
                        }
                    })
                    .collect();
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e = scores.mapv(|x| (x - m).exp());
                let sum = e.sum();
                for i in 0..d {
                    out[[b, h, i, a]] = (0..s).map(|pos| e[pos] * value(pos, i)).sum::<f64>() / sum;
                }
            }
        }
    }
    out
}

/// The library test's mask (`build_full_attention_mask` with the causal active mask, transposed
/// to `[S, B, H, SA]`): prior position `s` is attended by every active token of batch `b` when
/// `s < cache_len[b]`, and the last `SA` positions causally (active token `a` sees active
/// positions `0..=a`), with the test's `cache_len[b] = (3b + 3·(S/4)) mod (S − SA)`.
pub fn library_mask(b_n: usize, h_n: usize, sa: usize, s: usize) -> Array4<u8> {
    Array4::from_shape_fn((s, b_n, h_n, sa), |(pos, b, _, a)| {
        let cache_len = (b * 3 + s / 4 * 3) % (s - sa);
        let on = if pos >= s - sa {
            pos - (s - sa) <= a
        } else {
            pos < cache_len
        };
        u8::from(on)
    })
}

/// The library's decode attention at its test's shape, checked against the f64 reference, timed
/// on the host and estimated by the timing model for Trn2 and Trn3.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (b, h, sa, s, d) = (4, 1, 5, 10240, 128);
    // The library test's inputs: uniform in [0, 1) (`np.random.random_sample`), in bf16.
    let q = common::uniform(Ix2(d, b * h * sa), 41, 0.0, 1.0).mapv(bf16::from_f64);
    let k_active = common::uniform(Ix2(d, b * sa), 42, 0.0, 1.0).mapv(bf16::from_f64);
    let v_active = common::uniform(Ix4(b, 1, sa, d), 43, 0.0, 1.0).mapv(bf16::from_f64);
    let k_prior = common::uniform(Ix4(b, 1, d, s), 44, 0.0, 1.0).mapv(bf16::from_f64);
    let v_prior = common::uniform(Ix4(b, 1, s, d), 45, 0.0, 1.0).mapv(bf16::from_f64);
    let mask = library_mask(b, h, sa, s);
    let qd = &DeviceTensor::from_array(&q)?;
    let kad = &DeviceTensor::from_array(&k_active)?;
    let vad = &DeviceTensor::from_array(&v_active)?;
    let kpd = &DeviceTensor::from_array(&k_prior)?;
    let vpd = &DeviceTensor::from_array(&v_prior)?;
    let md = &DeviceTensor::from_array(&mask)?;
    let kernel = &attention_tkg_bf16_b4_h1_sa5_s10240_d128::KERNEL;
    let mut core = NeuronCore::default();
    cli.profile.run(
        &mut core,
        kernel,
        &[
            qd.arg(),
            kad.arg(),
            vad.arg(),
            kpd.arg(),
            vpd.arg(),
            md.arg(),
        ],
    )?;
    let mut out = attention_tkg_bf16_b4_h1_sa5_s10240_d128(&mut core, qd, kad, vad, kpd, vpd, md)?;
    let time = common::median_time(5, || {
        attention_tkg_bf16_b4_h1_sa5_s10240_d128::launch_into(
            &mut core, qd, kad, vad, kpd, vpd, md, &mut out,
        )
    })?;
    let want = reference(
        q.mapv(f64::from).view(),
        k_active.mapv(f64::from).view(),
        v_active.mapv(f64::from).view(),
        k_prior.mapv(f64::from).view(),
        v_prior.mapv(f64::from).view(),
        mask.view(),
        (b, h, sa, s, d),
    );
    let got = out.into_array::<Ix4>()?;
    // maxAllClose's "max" mode: |got - want| <= atol + rtol * max|want|.
    let range = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let c = common::compare(
        got.iter().map(|&v| f64::from(v)),
        want.iter().copied(),
        want.iter().map(|_| 1e-5 + 1e-2 * range),
    );
    println!(
        "nkilib attention_tkg bs {b} q_head {h} s_active {sa} s_prior {s} d_head {d} bf16: output {c}; median launch {time:.2?} (5 launches)"
    );
    for target in [Target::Trn2, Target::Trn3] {
        let mut core = NeuronCore::new(target);
        let schedule = Timing::new()
            .params(Params::for_target(target))
            .detail(Detail::Summary)
            .run_shapes(
                &mut core,
                kernel,
                &[
                    &[d, b * h * sa],
                    &[d, b * sa],
                    &[b, 1, sa, d],
                    &[b, 1, d, s],
                    &[b, 1, s, d],
                    &[s, b, h, sa],
                ],
            )?;
        println!("  modeled on {target:?}: {:.1} µs", schedule.latency_us());
    }
    if !c.within {
        return Err("result outside the tolerance".into());
    }
    Ok(())
}
