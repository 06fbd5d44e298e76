//! The NKI Library's `RoPE` kernel (`src/nkilib_src/nkilib/core/embeddings/rope.py` of
//! aws-neuron/nki-library): rotary position embedding of `x_in` `[d_head, B, n_heads, S]` (the
//! head dimension on the partitions) by `cos` and `sin` `[d_head / 2, B, S]`, broadcast over
//! the heads. In the contiguous layout the first half of `d_head` holds the even ("real")
//! elements and the second half the odd ones: `out[:h] = x[:h]·cos − x[h:]·sin`, `out[h:] =
//! x[h:]·cos + x[:h]·sin`.
//!
//! Written in NKI 0.6's destination-first dialect as the source is: `ndarray` tiles,
//! `nisa::dma_copy(dst = , src = )`, `nisa::tensor_copy` and `nisa::tensor_tensor(dst, data1,
//! data2, op)` as statements, the source's `TensorView(...).slice(...)`,
//! `.expand_dim(2).broadcast(dim=2, size=n_heads)` as views of the tiles and HBM tensors.
//!
//! What differs, and why:
//! - Rust's spelling (`x[[a..b, .., .., ..]]`, `nisa::`, `let`), and `TensorView(t).slice(...)
//!   .get_view()` is the view `t.slice(...)` (this language's views are methods of the tensor).
//! - The shapes and the dtype are the kernel's signature (`Hbm<T, D, B, NH, S>` and
//!   `Hbm<T, { D / 2 }, B, S>`), so `_validate_rope_inputs`' shape checks on `cos` and `sin`
//!   are properties of the types (a mismatched array is refused at launch), and its
//!   `kernel_assert`s on `d_head` and the sizes are `assert!`s at compile time.
//! - The source's keyword flags are meta-parameters: `CONTIGUOUS` (`contiguous_layout`),
//!   `RELAYOUT_IN_SBUF` (`relayout_in_sbuf`) and `LNC`. The source's `lnc_shard` reads the
//!   number of programs from the launch (`get_verified_program_sharding_info`); here a tile's
//!   shape must be known when the kernel is compiled and `num_programs(0)` is bound only at
//!   launch, so the number of programs is the meta-parameter `LNC` (1: `lnc_shard=False`; 2:
//!   a Trn2's two cores), the program is `program_id(0)`, and the kernel is launched over
//!   `grid(LNC)`. A grid larger than `LNC` is refused at launch (its sequence slice would
//!   reach past `S`); a smaller one leaves positions of the output unwritten, which a strict
//!   launch refuses and a plain one does not notice.
//! - `nl.shared_identity_matrix` is an SBUF tensor in NKI 0.6; here it is an HBM constant, so
//!   the in-SBUF relayout loads it into a tile with one extra `dma_copy` (`d_head × d_head`
//!   elements, once per launch). This is the one piece of work the language adds: at the
//!   library test's `(128, 1, 1, 16)` bf16 shape relayouted in SBUF the timing model charges it
//!   1.5 µs of the 5.9 µs modeled on a Trn2, all of it on the critical path (the example
//!   prints both).
//! - The permutation matrix's raw access pattern `identity_sb.ap(pattern=[[d_head, d_head],
//!   [1, 2], [2, half_d]])` has no counterpart (the language has no `.ap`); the same access is
//!   written as views, `identity_sb.reshape_dim(1, (half_d, 2)).permute((0, 2, 1))`
//!   (element `[p, j, k]` is column `2k + j` of row `p`), the same single `tensor_copy`.
//! - `nisa.nc_transpose(dst=psum, data=mat)`: NKI 0.6 requires the destination to have the
//!   data's dtype (bf16 for bf16 inputs). This language's Tensor-engine transpose writes fp32
//!   PSUM and adds a copy for any other destination dtype (`docs/language.md`, `nc_transpose`),
//!   so the PSUM tile here is f32, which keeps the instruction count of the source; the copy
//!   back to SBUF rounds the matrix's 0s and 1s exactly.
//!
//! SBUF capacity: every intermediate of `RoPE_sbuf` is a whole `[d_head/2, B, n_heads, S]`
//! tile, as in the source. Tiles are allocated here by live range, and at the peak five of them
//! are live with `cos_sb` and `sin_sb` (180 224 bytes per partition for f32 at `(128, 32, 4,
//! 64)`): `5·F + 2·F / n_heads` elements per partition for `F = B · n_heads · S` (per
//! program). On a Trn1's 192 KiB partition `F` can reach 14 K (one head) to 19.6 K (many) in
//! bf16 and half that in f32; on a Trn2's 224 KiB (`#[kernel(target = trn2)]`) 16 K to 22.9 K.
//! The source documents 72 K in bf16 for NKI's compiler, whose allocation is not modeled
//! here. Larger inputs are refused when the kernel compiles
//! (`err_sbuf_capacity_exceeded`): of the library test's manual shapes, the contiguous ones with
//! `B · n_heads · S` from 32 768 to 65 536 do not compile here; `(128 or 64, 1, 1, 8192)` and
//! the interleaved ones (up to `(64, 255, 8, 6)`, 12 240) do.
//!
//! `cargo run --release --example nkilib_rope` runs the library test's `(128, 1, 1, 8192)`
//! shape in bf16 (contiguous layout, one program), checks it against an f64 rotation with the
//! test's tolerance (`rtol` 2⁻⁷, `atol` 1e-3) plus the bf16 rounding of the two products each
//! output sums (the library's reference is torch in bf16, which rounds them too), and prints
//! the median host time per launch and the timing model's estimate for Trn2 and Trn3.

#![allow(non_snake_case)] // NKI's names: RoPE, RoPE_sbuf, B, S

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array3, Array4, ArrayView3, ArrayView4, Ix3, Ix4};
use nki::prelude::*;
use nki::program::Target;
use nki::timing::{Detail, Params, Timing};

/// The source's `_validate_rope_inputs`: `d_head` 64 or 128 and every size positive (the
/// shapes of `cos` and `sin` are the kernel's signature).
#[helper]
pub fn _validate_rope_inputs(x_in: Tensor) {
    let d_head = x_in.shape[0];
    let B = x_in.shape[1];
    let n_heads = x_in.shape[2];
    let S = x_in.shape[3];
    assert!(
        (d_head == 64) | (d_head == 128),
        "RoPE: d_head must be 64 or 128"
    );
    assert!(B > 0, "RoPE: B must be > 0");
    assert!(S > 0, "RoPE: S must be > 0");
    assert!(n_heads > 0, "RoPE: n_heads must be > 0");
}

/// The source's `RoPE_sbuf`: the rotation of `x_in_sb` `[d_head, B, n_heads, S]` by `cos_sb`
/// and `sin_sb` `[d_head/2, B, S]` (broadcast over the heads) into `x_out_sb`, all in SBUF;
/// with `convert_from_interleaved` the input is first permuted from interleaved to contiguous
/// by a matmul, and the output back.
#[helper]
pub fn RoPE_sbuf(
    x_in_sb: Tile,
    cos_sb: Tile,
    sin_sb: Tile,
    x_out_sb: Tile,
    convert_from_interleaved: bool,
) {
    let d_head = x_out_sb.shape[0];
    let B = x_out_sb.shape[1];
    let n_heads = x_out_sb.shape[2];
    let S = x_out_sb.shape[3];
    let half_d = d_head / 2;

    // Convert interleaved to contiguous layout if needed. (An `if` known at compile time
    // yields a value from each branch: without the conversion the matrix is never read, and
    // the `else` names the input only to have a value.)
    let convert_to_interleaved_mat = if convert_from_interleaved {
        _compute_convert_to_interleaved_mat(x_in_sb)
    } else {
        x_in_sb
    };
    let x_in_sb = if convert_from_interleaved {
        _convert_from_interleaved(x_in_sb, convert_to_interleaved_mat)
    } else {
        x_in_sb
    };

    // Copy the odd half to a separate buffer (the source: "required for tensor_tensor base
    // partition alignment").
    let sb_odd = ndarray([half_d, B, n_heads, S], x_in_sb.dtype, Sbuf);
    nisa::tensor_copy(dst = sb_odd, src = x_in_sb[[half_d.., .., .., ..]]);

    // Buffers for the intermediate products.
    let even_cos = ndarray([half_d, B, n_heads, S], x_in_sb.dtype, Sbuf);
    let odd_cos = ndarray([half_d, B, n_heads, S], x_in_sb.dtype, Sbuf);
    let even_sin = ndarray([half_d, B, n_heads, S], x_in_sb.dtype, Sbuf);
    let odd_sin = ndarray([half_d, B, n_heads, S], x_in_sb.dtype, Sbuf);

    // out_even = even·cos − odd·sin, out_odd = odd·cos + even·sin; cos and sin broadcast
    // over the heads by a stride-0 axis.
    nisa::tensor_tensor(
        even_cos,
        x_in_sb[[..half_d, .., .., ..]],
        cos_sb.expand_dim(2).broadcast(dim = 2, size = n_heads),
        nl::multiply,
    );
    nisa::tensor_tensor(
        odd_cos,
        sb_odd[[..half_d, .., .., ..]],
        cos_sb.expand_dim(2).broadcast(dim = 2, size = n_heads),
        nl::multiply,
    );
    nisa::tensor_tensor(
        even_sin,
        x_in_sb[[..half_d, .., .., ..]],
        sin_sb.expand_dim(2).broadcast(dim = 2, size = n_heads),
        nl::multiply,
    );
    nisa::tensor_tensor(
        odd_sin,
        sb_odd[[..half_d, .., .., ..]],
        sin_sb.expand_dim(2).broadcast(dim = 2, size = n_heads),
        nl::multiply,
    );

    nisa::tensor_tensor(
        x_out_sb[[..half_d, .., .., ..]],
        even_cos,
        odd_sin,
        nl::subtract,
    );
    nisa::tensor_tensor(x_out_sb[[half_d.., .., .., ..]], odd_cos, even_sin, nl::add);

    // Convert back to the interleaved layout if needed.
    if convert_from_interleaved {
        _convert_to_interleaved(x_out_sb, convert_to_interleaved_mat);
    }
}

/// The source's `_compute_convert_to_interleaved_mat`: the `[d_head, d_head]` permutation `P`
/// with `P·x` taking `[e0, e1, ..., o0, o1, ...]` to `[e0, o0, e1, o1, ...]`, copied out of
/// the identity: row `p`, column `j·half_d + k` is the identity's column `2k + j`.
#[helper]
pub fn _compute_convert_to_interleaved_mat(x_sb: Tile) -> Tile {
    let d_head = x_sb.shape[0];
    let half_d = d_head / 2;
    assert!(
        d_head % 2 == 0,
        "_compute_convert_to_interleaved_mat: d_head must be even"
    );

    // NKI 0.6's identity is in SBUF; this language's is an HBM constant, loaded once.
    let identity = shared_identity_matrix(d_head, dtype = x_sb.dtype);
    let identity_sb = ndarray([d_head, d_head], x_sb.dtype, Sbuf);
    nisa::dma_copy(dst = identity_sb, src = identity);

    // The source's `.ap(pattern=[[d_head, d_head], [1, 2], [2, half_d]])`: for each row, the
    // even columns then the odd ones.
    let convert_to_interleaved_mat = ndarray([d_head, d_head], x_sb.dtype, Sbuf);
    nisa::tensor_copy(
        dst = convert_to_interleaved_mat.reshape((d_head, 2, half_d)),
        src = identity_sb.reshape_dim(1, (half_d, 2)).permute((0, 2, 1)),
        engine = scalar_engine,
    );
    convert_to_interleaved_mat
}

/// The source's `_convert_from_interleaved`: `Pᵀ·x` into a new tile, in column blocks of
/// `gemm_moving_fmax`.
#[helper]
pub fn _convert_from_interleaved(x_sb: Tile, convert_to_interleaved_mat: Tile) -> Tile {
    let d_head = x_sb.shape[0];
    let B = x_sb.shape[1];
    let n_heads = x_sb.shape[2];
    let S = x_sb.shape[3];

    let total_free_dim = B * n_heads * S;
    let fmax = tile_size.gemm_moving_fmax;
    let x_converted_sb = ndarray([d_head, B, n_heads, S], x_sb.dtype, Sbuf);
    let x_flat = x_sb.reshape((d_head, total_free_dim));
    let x_out_flat = x_converted_sb.reshape((d_head, total_free_dim));
    for t_idx in static_range((total_free_dim + fmax - 1) / fmax) {
        let t_start = t_idx * fmax;
        let t_size = min(fmax, total_free_dim - t_start);
        let x_psum = ndarray([d_head, t_size], f32, Psum);
        nisa::nc_matmul(
            dst = x_psum,
            stationary = convert_to_interleaved_mat,
            moving = x_flat[[.., ds(t_start, t_size)]],
        );
        nisa::activation(
            dst = x_out_flat[[.., ds(t_start, t_size)]],
            op = copy,
            data = x_psum,
        );
    }
    x_converted_sb
}

/// The source's `_convert_to_interleaved`: `P·x` in place (the stationary operand is `Pᵀ`,
/// transposed on the Tensor engine, since `nc_matmul` computes `stationaryᵀ · moving`).
#[helper]
pub fn _convert_to_interleaved(x_sb: Tile, convert_to_interleaved_mat: Tile) {
    let d_head = x_sb.shape[0];
    let B = x_sb.shape[1];
    let n_heads = x_sb.shape[2];
    let S = x_sb.shape[3];

    // Pre-transpose to compensate for nc_matmul's implicit transpose (fp32 in PSUM here).
    let convert_from_interleaved_sb =
        ndarray([d_head, d_head], convert_to_interleaved_mat.dtype, Sbuf);
    let convert_from_interleaved_psum = ndarray([d_head, d_head], f32, Psum);
    nisa::nc_transpose(
        dst = convert_from_interleaved_psum,
        data = convert_to_interleaved_mat,
    );
    nisa::tensor_copy(
        dst = convert_from_interleaved_sb,
        src = convert_from_interleaved_psum,
        engine = scalar_engine,
    );

    let total_free_dim = B * n_heads * S;
    let fmax = tile_size.gemm_moving_fmax;
    let x_flat = x_sb.reshape((d_head, total_free_dim));
    for t_idx in static_range((total_free_dim + fmax - 1) / fmax) {
        let t_start = t_idx * fmax;
        let t_size = min(fmax, total_free_dim - t_start);
        let x_psum = ndarray([d_head, t_size], f32, Psum);
        nisa::nc_matmul(
            dst = x_psum,
            stationary = convert_from_interleaved_sb,
            moving = x_flat[[.., ds(t_start, t_size)]],
        );
        nisa::tensor_copy(
            dst = x_flat[[.., ds(t_start, t_size)]],
            src = x_psum,
            engine = scalar_engine,
        );
    }
}

/// Rotary position embedding of `x_in` `[D, B, NH, S]` by `cos`, `sin` `[D / 2, B, S]`
/// (the source's `RoPE`): contiguous or interleaved halves of the head dimension, the
/// interleaved layout converted by strided DMA or (small inputs, `RELAYOUT_IN_SBUF`) by a
/// matmul in SBUF; over `grid(LNC)` each program takes `S / LNC` positions.
#[kernel(
    rope_bf16_128x1x1x8192(T = bf16, D = 128, B = 1, NH = 1, S = 8192, CONTIGUOUS = true, RELAYOUT_IN_SBUF = false, LNC = 1),
    rope_bf16_64x1x1x8192_lnc2(T = bf16, D = 64, B = 1, NH = 1, S = 8192, CONTIGUOUS = true, RELAYOUT_IN_SBUF = false, LNC = 2),
    rope_bf16_128x32x4x64(T = bf16, D = 128, B = 32, NH = 4, S = 64, CONTIGUOUS = true, RELAYOUT_IN_SBUF = false, LNC = 1),
    rope_bf16_64x64x8x16_lnc2(T = bf16, D = 64, B = 64, NH = 8, S = 16, CONTIGUOUS = true, RELAYOUT_IN_SBUF = false, LNC = 2),
    rope_bf16_128x32x4x64_dma(T = bf16, D = 128, B = 32, NH = 4, S = 64, CONTIGUOUS = false, RELAYOUT_IN_SBUF = false, LNC = 1),
    rope_bf16_64x255x8x6_dma(T = bf16, D = 64, B = 255, NH = 8, S = 6, CONTIGUOUS = false, RELAYOUT_IN_SBUF = false, LNC = 1),
    rope_bf16_128x128x4x4_dma_lnc2(T = bf16, D = 128, B = 128, NH = 4, S = 4, CONTIGUOUS = false, RELAYOUT_IN_SBUF = false, LNC = 2),
    rope_bf16_128x1x1x16_sbuf(T = bf16, D = 128, B = 1, NH = 1, S = 16, CONTIGUOUS = false, RELAYOUT_IN_SBUF = true, LNC = 1),
    rope_bf16_64x8x8x128_sbuf_fallback(T = bf16, D = 64, B = 8, NH = 8, S = 128, CONTIGUOUS = false, RELAYOUT_IN_SBUF = true, LNC = 1),
    rope_f32_128x32x4x64(T = f32, D = 128, B = 32, NH = 4, S = 64, CONTIGUOUS = true, RELAYOUT_IN_SBUF = false, LNC = 1),
    rope_f32_128x8x1x128(T = f32, D = 128, B = 8, NH = 1, S = 128, CONTIGUOUS = true, RELAYOUT_IN_SBUF = false, LNC = 1),
    rope_f32_64x1x8x16_lnc2(T = f32, D = 64, B = 1, NH = 8, S = 16, CONTIGUOUS = true, RELAYOUT_IN_SBUF = false, LNC = 2),
    rope_f32_128x64x8x2_dma(T = f32, D = 128, B = 64, NH = 8, S = 2, CONTIGUOUS = false, RELAYOUT_IN_SBUF = false, LNC = 1),
    rope_f32_64x1x8x16_sbuf(T = f32, D = 64, B = 1, NH = 8, S = 16, CONTIGUOUS = false, RELAYOUT_IN_SBUF = true, LNC = 1),
    rope_f32_128x8x1x16_sbuf_lnc2(T = f32, D = 128, B = 8, NH = 1, S = 16, CONTIGUOUS = false, RELAYOUT_IN_SBUF = true, LNC = 2),
)]
pub fn RoPE<
    T,
    const D: usize,
    const B: usize,
    const NH: usize,
    const S: usize,
    const CONTIGUOUS: bool,
    const RELAYOUT_IN_SBUF: bool,
    const LNC: usize,
>(
    x_in: Hbm<T, D, B, NH, S>,
    cos: Hbm<T, { D / 2 }, B, S>,
    sin: Hbm<T, { D / 2 }, B, S>,
) -> Hbm<T, D, B, NH, S> {
    _validate_rope_inputs(x_in);

    let d_head = D;
    let half_d = d_head / 2;
    let n_heads = NH;

    // Layout conversion: strided DMA, or a matmul in SBUF when the input is small enough.
    // (Decided before `tile_size` below shadows the language's `tile_size` constants, which
    // the source reaches as `nl.tile_size`.)
    let is_relayout_in_sbuf_supported = B * n_heads * S <= tile_size.gemm_moving_fmax;

    // Parallelization across LNC cores: the number of programs is the meta-parameter.
    let n_prgs = LNC;
    let prg_id = program_id(0);

    // Tile along the sequence dimension.
    assert!(
        S % n_prgs == 0,
        "RoPE: sequence length not divisible by the number of programs"
    );
    let tile_size = S / n_prgs;
    let tile_start = tile_size * prg_id;

    let is_dma_relayout = !CONTIGUOUS & (!RELAYOUT_IN_SBUF | !is_relayout_in_sbuf_supported);
    let is_relayout_in_sbuf = !CONTIGUOUS & RELAYOUT_IN_SBUF & is_relayout_in_sbuf_supported;

    // Load the input, gathering even and odd rows with a step of 2 for the DMA relayout.
    let x_in_sb = ndarray([d_head, B, n_heads, tile_size], x_in.dtype, Sbuf);
    if is_dma_relayout {
        nisa::dma_copy(
            dst = x_in_sb[[..half_d, .., .., ..]],
            src = x_in
                .slice(dim = 0, start = 0, end = d_head, step = 2)
                .slice(dim = 3, start = tile_start, end = tile_start + tile_size),
        );
        nisa::dma_copy(
            dst = x_in_sb[[half_d.., .., .., ..]],
            src = x_in
                .slice(dim = 0, start = 1, end = d_head, step = 2)
                .slice(dim = 3, start = tile_start, end = tile_start + tile_size),
        );
    } else {
        nisa::dma_copy(
            dst = x_in_sb,
            src = x_in[[.., .., .., tile_start..tile_start + tile_size]],
        );
    }

    // Load the cos/sin tiles.
    let cos_sb = ndarray([half_d, B, tile_size], cos.dtype, Sbuf);
    let sin_sb = ndarray([half_d, B, tile_size], sin.dtype, Sbuf);
    nisa::dma_copy(
        dst = cos_sb,
        src = cos[[.., .., tile_start..tile_start + tile_size]],
    );
    nisa::dma_copy(
        dst = sin_sb,
        src = sin[[.., .., tile_start..tile_start + tile_size]],
    );

    // The rotation in SBUF.
    let x_out_sb = ndarray([d_head, B, n_heads, tile_size], x_in.dtype, Sbuf);
    RoPE_sbuf(
        x_in_sb,
        cos_sb,
        sin_sb,
        x_out_sb,
        convert_from_interleaved = is_relayout_in_sbuf,
    );

    // Store, scattering even and odd rows back with a step of 2 for the DMA relayout.
    let x_out = ndarray([D, B, NH, S], x_in.dtype, SharedHbm);
    if is_dma_relayout {
        nisa::dma_copy(
            dst = x_out
                .slice(dim = 0, start = 0, end = d_head, step = 2)
                .slice(dim = 3, start = tile_start, end = tile_start + tile_size),
            src = x_out_sb[[..half_d, .., .., ..]],
        );
        nisa::dma_copy(
            dst = x_out
                .slice(dim = 0, start = 1, end = d_head, step = 2)
                .slice(dim = 3, start = tile_start, end = tile_start + tile_size),
            src = x_out_sb[[half_d.., .., .., ..]],
        );
    } else {
        nisa::dma_copy(
            dst = x_out[[.., .., .., tile_start..tile_start + tile_size]],
            src = x_out_sb,
        );
    }
    x_out
}

/// The rotation in f64, as `rope_torch.py` computes it: for each batch, head and position,
/// the pairs (real, imaginary) of the head dimension (`(x[i], x[h + i])` in the contiguous
/// layout, `(x[2i], x[2i + 1])` in the interleaved one) rotated by `(cos[i], sin[i])`. Also
/// returns, per element, `|re·cos| + |im·sin|` (or `|re·sin| + |im·cos|`): the magnitude of the
/// two products it sums, which the kernel rounds to the input's dtype before adding.
pub fn reference(
    x: ArrayView4<f64>,
    cos: ArrayView3<f64>,
    sin: ArrayView3<f64>,
    contiguous: bool,
) -> (Array4<f64>, Array4<f64>) {
    let (d, b, nh, s) = x.dim();
    let h = d / 2;
    let mut out = Array4::<f64>::zeros((d, b, nh, s));
    let mut mag = Array4::<f64>::zeros((d, b, nh, s));
    for bi in 0..b {
        for hi in 0..nh {
            for si in 0..s {
                for i in 0..h {
                    let (re, im) = if contiguous {
                        (i, h + i)
                    } else {
                        (2 * i, 2 * i + 1)
                    };
                    let (xr, xi) = (x[[re, bi, hi, si]], x[[im, bi, hi, si]]);
                    let (c, sn) = (cos[[i, bi, si]], sin[[i, bi, si]]);
                    out[[re, bi, hi, si]] = xr * c - xi * sn;
                    out[[im, bi, hi, si]] = xr * sn + xi * c;
                    mag[[re, bi, hi, si]] = (xr * c).abs() + (xi * sn).abs();
                    mag[[im, bi, hi, si]] = (xr * sn).abs() + (xi * c).abs();
                }
            }
        }
    }
    (out, mag)
}

/// The library test's tolerance: `rtol` the bf16 epsilon 2⁻⁷, `atol` 1e-3.
pub const RTOL: f64 = 1.0 / 128.0;
/// See [`RTOL`].
pub const ATOL: f64 = 1e-3;

/// What the language adds to the source: the in-SBUF relayout loads the identity from HBM
/// (NKI 0.6 has it in SBUF). Prints the modeled Trn2 latency of the `(128, 1, 1, 16)` bf16
/// interleaved kernel relayouted in SBUF, the identity load's own time, and the part of the
/// critical path charged to it.
fn identity_load_cost() -> Result<(), Box<dyn std::error::Error>> {
    let kernel = &rope_bf16_128x1x1x16_sbuf::KERNEL;
    // The load's index in the program, from its listing (`0003  DMA  load  t4 ... <- identity:`).
    let listing = kernel.program().to_string();
    let pc: u32 = listing
        .lines()
        .find(|l| l.contains("<- identity:"))
        .and_then(|l| l.split_whitespace().next())
        .ok_or("no load of the identity in the listing")?
        .parse()?;
    let mut core = NeuronCore::new(Target::Trn2);
    let schedule = Timing::new()
        .params(Params::for_target(Target::Trn2))
        .detail(Detail::Profile)
        .run_shapes(
            &mut core,
            kernel,
            &[&[128, 1, 1, 16], &[64, 1, 16], &[64, 1, 16]],
        )?;
    let own: u64 = schedule
        .records()
        .iter()
        .filter(|r| r.pc == pc)
        .map(|r| r.done - r.start)
        .max()
        .unwrap_or(0);
    let charged: u64 = schedule
        .critical_path()
        .unwrap_or_default()
        .iter()
        .filter(|&&(i, _)| schedule.records()[i as usize].pc == pc)
        .map(|&(_, ps)| ps)
        .sum();
    println!(
        "  interleaved [128, 1, 1, 16] bf16, relayout in SBUF, modeled on Trn2: {:.2} µs; \
         the identity's load from HBM {:.2} µs, {:.2} µs of it on the critical path",
        schedule.latency_us(),
        own as f64 / 1e6,
        charged as f64 / 1e6
    );
    Ok(())
}

/// The NKI Library's RoPE on the library test's `(128, 1, 1, 8192)` bf16 shape, checked against
/// f64, timed on the host and estimated by the timing model for Trn2 and Trn3.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (d, b, nh, s) = (128, 1, 1, 8192);
    let bf = |a: Array4<f32>| a.mapv(bf16::from_f32);
    let x = bf(common::random_f32(Ix4(d, b, nh, s), 42, -2.0, 2.0));
    let angle = common::uniform(Ix3(d / 2, b, s), 43, 0.0, std::f64::consts::TAU);
    let cos: Array3<bf16> = angle.mapv(|a| bf16::from_f64(a.cos()));
    let sin: Array3<bf16> = angle.mapv(|a| bf16::from_f64(a.sin()));
    let (xd, cd, sd) = (
        DeviceTensor::from_array(&x)?,
        DeviceTensor::from_array(&cos)?,
        DeviceTensor::from_array(&sin)?,
    );
    let mut core = NeuronCore::new(Target::Trn2);
    cli.profile.run(
        &mut core,
        &rope_bf16_128x1x1x8192::KERNEL,
        &[xd.arg(), cd.arg(), sd.arg()],
    )?;
    let mut out = rope_bf16_128x1x1x8192(&mut core, &xd, &cd, &sd)?;
    let t = common::median_time(5, || {
        rope_bf16_128x1x1x8192::launch_into(&mut core, &xd, &cd, &sd, &mut out)
    })?;
    let got = out.into_array::<Ix4>()?;
    let f = |v: &bf16| f64::from(*v);
    let (want, mag) = reference(x.map(f).view(), cos.map(f).view(), sin.map(f).view(), true);
    // The library compares with torch in bf16, which rounds the two products as the kernel
    // does; against f64 their rounding, half a bf16 ulp (2⁻⁸) of each, is added to the bound.
    let c = common::compare(
        got.iter().map(f),
        want.iter().copied(),
        want.iter()
            .zip(&mag)
            .map(|(w, m)| ATOL + RTOL * w.abs() + m / 256.0),
    );
    println!("nkilib RoPE [{d}, {b}, {nh}, {s}] bf16: {c}; median launch {t:.2?} (5 launches)");
    for target in [Target::Trn2, Target::Trn3] {
        let mut core = NeuronCore::new(target);
        let schedule = Timing::new()
            .params(Params::for_target(target))
            .detail(Detail::Summary)
            .run_shapes(
                &mut core,
                &rope_bf16_128x1x1x8192::KERNEL,
                &[&[d, b, nh, s], &[d / 2, b, s], &[d / 2, b, s]],
            )?;
        println!("  modeled on {target:?}: {:.1} µs", schedule.latency_us());
    }
    identity_load_cost()?;
    if !c.within {
        return Err("result outside the library test's tolerance".into());
    }
    Ok(())
}
