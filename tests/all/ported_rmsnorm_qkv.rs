//! `allocated_fused_rms_norm_qkv` of nki-samples' `reference/allocated_fused_linear.py`,
//! ported with NKI's names, loops, tile sizes, masks and direct allocation, against its unit
//! test's `cpu_golden_result` (`rms_norm(hidden) @ weights`) written as f64 loops, with the
//! test's tolerance (`np.allclose(atol=1e-2, rtol=1e-2)`).
//!
//! What differs: Rust's spelling; the shapes are meta-parameters (NKI reads them from the
//! tensors when it traces the kernel, and sizes tiles by them); the placements of
//! `ncc.sbuf.mod_alloc` / `ncc.psum.mod_alloc` are checked and not followed (each tile has
//! memory of its own; the kernel's placements do not overlap, so it computes the same);
//! `norm_dtype` and `eps` take their defaults; NKI's `if nisa.get_nc_version() >= gen3:` that
//! declares `transpose_res_psum` in each branch picks its dtype with an `if` expression (a Rust
//! `let` inside a branch ends with it). Compiled for Trn1, as the unit test runs it.

#![allow(non_snake_case)] // NKI's names: M, NUM_TRANSP_TILES, NUM_TILES, TILES_INT

use nki::ndarray::{Array2, Array3, Ix2, Ix3};
use nki::prelude::*;

use crate::common;

#[kernel(
    rms_norm_qkv_1x512x1024x384(T = bf16, BATCH = 1, SEQLEN = 512, DIM = 1024, HEAD_DIM = 384),
    rms_norm_qkv_2x384x512x512(T = f16, BATCH = 2, SEQLEN = 384, DIM = 512, HEAD_DIM = 512)
)]
fn allocated_fused_rms_norm_qkv<
    T,
    const BATCH: usize,
    const SEQLEN: usize,
    const DIM: usize,
    const HEAD_DIM: usize,
>(
    hidden: Hbm<T, BATCH, SEQLEN, DIM>,
    weights: Hbm<T, DIM, HEAD_DIM>,
) -> Hbm<T, BATCH, SEQLEN, HEAD_DIM> {
    let norm_dtype = f32;
    let eps = 1e-6;

    // Hidden should be in BSH layout.
    let (batch, seqlen, dim) = hidden.shape;
    let (_dim, head_dim) = weights.shape;

    assert!(
        (dim <= 8192) & (dim % 128 == 0),
        "Unsupported hidden dimension"
    );
    assert!(_dim == dim, "Reduction dimension must match");
    assert!(head_dim <= 512, "Head dimension must be 512 or less");

    let out_tensor = ndarray((batch, seqlen, head_dim), hidden.dtype, SharedHbm);

    let (pmax, fmax) = (tile_size.pmax, tile_size.psum_fmax); // 128, 512
    let (ix, iy) = mgrid![0..pmax, 0..dim];
    let i_lhs = mgrid![0..pmax, 0..pmax];
    let i_rhs = mgrid![0..pmax, 0..fmax];
    let i_res = mgrid![0..pmax, 0..fmax];
    let M = (dim + pmax - 1) / pmax;
    let NUM_TRANSP_TILES = (dim + fmax - 1) / fmax;
    let NUM_TILES = (seqlen + pmax - 1) / pmax;
    let TILES_INT = (NUM_TILES + 1) / 2;
    let scale = 1.0 / dim;

    let (iden_x, iden_y) = mgrid![0..pmax, 0..128];

    let identity_a = shared_constant(np::identity(128, dtype = i8), dtype = hidden.dtype);
    let identity_tensor = ndarray(
        (par_dim(pmax), 128),
        weights.dtype,
        sbuf.mod_alloc(base_addr = 0),
    );
    identity_tensor[[iden_x, iden_y]] = load(identity_a, dtype = weights.dtype);
    let bias_placeholder = ndarray((par_dim(pmax), 1), f32, sbuf.mod_alloc(base_addr = 128 * 2));
    bias_placeholder[..] = 0;

    for b in affine_range(batch) {
        let weights_buffer = ndarray(
            (M, par_dim(pmax), fmax),
            weights.dtype,
            sbuf.mod_alloc(
                base_addr = 260 + (3 * dim + fmax) * 2 + (dim + 1) * 4,
                num_free_tiles = (M,),
            ),
        );
        // Preload the entire weights tensor. everything fits in SBUF for LLaMA 3.1 70B
        for m in affine_range(M) {
            weights_buffer[[m, i_rhs.p, i_rhs.x]] = load(
                weights[[m * pmax + i_rhs.p, i_rhs.x]],
                mask = (m * pmax + i_rhs.p < dim) & (i_rhs.x < head_dim),
            );
        }
        for i in affine_range(TILES_INT) {
            // Double buffer the input tensor
            let in_bufs = ndarray(
                (2, par_dim(pmax), dim),
                hidden.dtype,
                sbuf.mod_alloc(base_addr = 260, num_free_tiles = (2,)),
            );
            for i_interleave_grp in affine_range(2) {
                in_bufs[[i_interleave_grp]] = load(
                    hidden[[b, (2 * i + i_interleave_grp) * pmax + ix, iy]],
                    mask = (2 * i + i_interleave_grp) * pmax < seqlen,
                );
                let act = ndarray(
                    (par_dim(pmax), dim),
                    norm_dtype,
                    sbuf.mod_alloc(base_addr = 260 + (2 * dim) * 2),
                );

                // Write the RMS and RMS Reciprocal tensors back out here, in-place
                let square_sum = ndarray(
                    (par_dim(pmax), 1),
                    norm_dtype,
                    sbuf.mod_alloc(base_addr = 260 + (2 * dim) * 2 + (dim) * 4),
                );

                // Write the output of RMS and RMS^T (in-place) out to here
                let out_tile = ndarray(
                    (par_dim(pmax), dim),
                    weights.dtype,
                    sbuf.mod_alloc(base_addr = 260 + (2 * dim) * 2 + (dim + 1) * 4),
                );

                // Store the final output tiles to here before sending back to DRAM
                let output_sbuf = ndarray(
                    (par_dim(pmax), fmax),
                    weights.dtype,
                    sbuf.mod_alloc(base_addr = 260 + (3 * dim) * 2 + (dim + 1) * 4),
                );

                act[..] = activation_reduce(
                    op = square,
                    data = in_bufs[[i_interleave_grp]],
                    reduce_op = add,
                    reduce_res = square_sum[..],
                    bias = bias_placeholder[..],
                    mask = (2 * i + i_interleave_grp) * pmax < seqlen,
                );
                square_sum[..] = tensor_scalar(
                    square_sum[..],
                    multiply,
                    scale,
                    op1 = add,
                    operand1 = eps,
                    mask = (2 * i + i_interleave_grp) * pmax < seqlen,
                );
                square_sum[..] = activation(
                    op = rsqrt,
                    data = square_sum[..],
                    bias = bias_placeholder[..],
                    mask = (2 * i + i_interleave_grp) * pmax < seqlen,
                );

                // all PE array ops must output to FP32 on trn1 but must match input dtype in trn2
                let transpose_dtype = if get_nc_version() >= nc_version.gen3 {
                    weights.dtype
                } else {
                    f32
                };
                let transpose_res_psum = ndarray(
                    (NUM_TRANSP_TILES, par_dim(pmax), 4 * pmax),
                    transpose_dtype,
                    psum.mod_alloc(base_bank = 0, num_bank_tiles = (1,)),
                );

                for m in affine_range(NUM_TRANSP_TILES) {
                    // Perform (hidden .* RMS Reciprocal)^T in tiles of fmax (512)
                    out_tile[[i_rhs.p, m * fmax + i_rhs.x]] = multiply(
                        in_bufs[[i_interleave_grp, i_rhs.p, m * fmax + i_rhs.x]],
                        square_sum[..],
                        dtype = weights.dtype,
                        mask = (2 * i + i_interleave_grp) * pmax < seqlen,
                    );
                    for j in affine_range(4) {
                        transpose_res_psum[[m, i_lhs.p, j * pmax + i_lhs.x]] = nc_matmul(
                            out_tile[[i_lhs.p, (m * 4 + j) * pmax + i_lhs.x]],
                            identity_tensor[..],
                            is_transpose = true,
                            mask = (2 * i + i_interleave_grp) * pmax < seqlen,
                        );
                    }
                    out_tile[[i_rhs.p, m * 4 * pmax + i_rhs.x]] = copy(
                        transpose_res_psum[[m]],
                        dtype = hidden.dtype,
                        mask = (2 * i + i_interleave_grp) * pmax < seqlen,
                    );
                }

                // perform (RMSNorm(hidden)^T)^T @ wQKV
                let res_psum = ndarray(
                    (1, par_dim(pmax), fmax),
                    f32,
                    psum.mod_alloc(base_bank = 7, num_bank_tiles = (1,)),
                );
                for m in affine_range(M) {
                    res_psum[[0]] += nc_matmul(
                        out_tile[[i_lhs.p, m * pmax + i_lhs.x]],
                        weights_buffer[[m, i_rhs.p, i_rhs.x]],
                        mask = (2 * i + i_interleave_grp) * pmax < seqlen,
                    );
                }

                output_sbuf[..] = copy(res_psum[[0]], dtype = out_tensor.dtype);
                store(
                    out_tensor[[b, (2 * i + i_interleave_grp) * pmax + i_res.p, i_res.x]],
                    value = output_sbuf,
                    mask = (i_res.x < head_dim) & ((2 * i + i_interleave_grp) * pmax < seqlen),
                );
            }
        }
    }
    out_tensor
}

/// `cpu_golden_result(hidden, None, weights, dtype, do_norm=True)`: `rms_norm(hidden) @
/// weights` in f64 on the inputs as the kernel sees them.
fn golden(hidden: &Array3<f64>, weights: &Array2<f64>) -> Array3<f64> {
    let (b, s, d) = hidden.dim();
    let h = weights.dim().1;
    let mut out = Array3::<f64>::zeros((b, s, h));
    for bi in 0..b {
        for r in 0..s {
            let ms = (0..d).map(|c| hidden[[bi, r, c]].powi(2)).sum::<f64>() / d as f64;
            let inv = 1.0 / (ms.sqrt() + 1e-6);
            for n in 0..h {
                let dot: f64 = (0..d)
                    .map(|c| hidden[[bi, r, c]] * inv * weights[[c, n]])
                    .sum();
                out[[bi, r, n]] = dot;
            }
        }
    }
    out
}

fn check(got: &Array3<f64>, want: &Array3<f64>, what: &str) {
    assert_eq!(got.dim(), want.dim(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
        assert!(
            (g - w).abs() <= 1e-2 + 1e-2 * w.abs(),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn rms_norm_qkv_matches_the_unit_tests_golden_result() {
    {
        let target = Target::Trn1;
        // The unit test's [1, 512, 1024, 384] bf16 case.
        let hidden = common::rand_f32(Ix3(1, 512, 1024), 1, 0.0, 1.0).mapv(bf16::from_f32);
        let weights = common::rand_f32(Ix2(1024, 384), 2, 0.0, 1.0).mapv(bf16::from_f32);
        let mut core = NeuronCore::new(target);
        let out =
            rms_norm_qkv_1x512x1024x384::host(&mut core, hidden.view(), weights.view()).unwrap();
        let want = golden(&hidden.mapv(f64::from), &weights.mapv(f64::from));
        check(&out.mapv(f64::from), &want, "bf16 1x512x1024x384");

        // Two batches of three row tiles (the last interleave group masked off), f16.
        let hidden = common::rand_f32(Ix3(2, 384, 512), 3, 0.0, 1.0).mapv(f16::from_f32);
        let weights = common::rand_f32(Ix2(512, 512), 4, 0.0, 1.0).mapv(f16::from_f32);
        let mut core = NeuronCore::new(target);
        let out =
            rms_norm_qkv_2x384x512x512::host(&mut core, hidden.view(), weights.view()).unwrap();
        let want = golden(&hidden.mapv(f64::from), &weights.mapv(f64::from));
        check(&out.mapv(f64::from), &want, "f16 2x384x512x512");
    }
}
