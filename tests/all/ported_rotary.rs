//! `nki_apply_rotary_embedding` of nki-samples' `tutorials/rotary/rotary_nki_kernels.py`,
//! ported with NKI's names, loops, tile sizes and masks, against Hugging Face's
//! `apply_rotary_pos_emb` (`q * cos + rotate_half(q) * sin`) written as plain f64 loops.
//!
//! What differs: Rust's spelling; the head dimension `D` is a meta-parameter (NKI reads it
//! from `q.shape[-1]` when it traces the kernel, and sizes the tiles by it), the batch, head and
//! sequence sizes are launch-time dimensions, as in NKI; `[2] + list(q.shape)` is written out.

use crate::common;

use nki::ndarray::{Array3, Array4, Ix4};
use nki::prelude::*;

/// NKI's `_nki_apply_rotary_embedding_core`: rotates the query and key tiles into the two
/// halves of `output_tile` (its `seq_len` is the tiles' last dimension, the head dimension).
#[helper]
fn _nki_apply_rotary_embedding_core(
    q_tile: Tile,
    k_tile: Tile,
    cos_tile: Tile,
    sin_tile: Tile,
    output_tile: Tile,
) {
    assert!(
        q_tile.shape[1] % 2 == 0,
        "Sequence length for q_tile must be even!"
    );
    assert!(
        k_tile.shape[1] % 2 == 0,
        "Sequence length for k_tile must be even!"
    );
    assert!(
        q_tile.shape[1] == k_tile.shape[1],
        "q_tile and k_tile must have the same sequence length"
    );

    let seq_len = q_tile.shape[1];

    // Rotate Q
    output_tile[[0, .., ..]] = q_tile * cos_tile;
    output_tile[[0, .., ..seq_len / 2]] = output_tile[[0, .., ..seq_len / 2]]
        + (-1 * q_tile[[.., seq_len / 2..]] * sin_tile[[.., ..seq_len / 2]]);
    output_tile[[0, .., seq_len / 2..]] = output_tile[[0, .., seq_len / 2..]]
        + (q_tile[[.., ..seq_len / 2]] * sin_tile[[.., seq_len / 2..]]);

    // Rotate K
    output_tile[[1, .., ..]] = k_tile * cos_tile;
    output_tile[[1, .., ..seq_len / 2]] = output_tile[[1, .., ..seq_len / 2]]
        + (-1 * k_tile[[.., seq_len / 2..]] * sin_tile[[.., ..seq_len / 2]]);
    output_tile[[1, .., seq_len / 2..]] = output_tile[[1, .., seq_len / 2..]]
        + (k_tile[[.., ..seq_len / 2]] * sin_tile[[.., seq_len / 2..]]);
}

#[kernel(
    nki_apply_rotary_embedding_64(D = 64),
    nki_apply_rotary_embedding_128(D = 128)
)]
fn nki_apply_rotary_embedding<const D: usize>(
    q: Hbm<f32, B, NH, S, D>,
    k: Hbm<f32, B, NH, S, D>,
    cos: Hbm<f32, B, S, D>,
    sin: Hbm<f32, B, S, D>,
) -> Hbm<f32, 2, B, NH, S, D> {
    assert!(D <= 128, "Shape of head dim (last dim) is more than 128");

    let batch_id = program_id(0);
    let head_id = program_id(1);
    let seq_len = q.shape[2];
    let num_seq_batches = (seq_len + tile_size.pmax - 1) / tile_size.pmax;
    let output = ndarray((2, B, NH, S, D), q.dtype, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..D];
    for seq_batch_id in affine_range(0, num_seq_batches) {
        let q_hbm_tile = q[[batch_id, head_id]];
        let k_hbm_tile = k[[batch_id, head_id]];
        let cos_hbm_tile = cos[[batch_id]];
        let sin_hbm_tile = sin[[batch_id]];

        let q_tile = load(
            q_hbm_tile[[seq_batch_id * tile_size.pmax + i_p, i_f]],
            mask = seq_batch_id * tile_size.pmax + i_p < seq_len,
        );
        let k_tile = load(
            k_hbm_tile[[seq_batch_id * tile_size.pmax + i_p, i_f]],
            mask = seq_batch_id * tile_size.pmax + i_p < seq_len,
        );
        let output_tile = ndarray(
            (2, par_dim(k_tile.shape[0]), k_tile.shape[1]),
            k_tile.dtype,
            Sbuf,
        );
        let cos_tile = load(
            cos_hbm_tile[[seq_batch_id * tile_size.pmax + i_p, i_f]],
            mask = seq_batch_id * tile_size.pmax + i_p < seq_len,
        );
        let sin_tile = load(
            sin_hbm_tile[[seq_batch_id * tile_size.pmax + i_p, i_f]],
            mask = seq_batch_id * tile_size.pmax + i_p < seq_len,
        );

        _nki_apply_rotary_embedding_core(q_tile, k_tile, cos_tile, sin_tile, output_tile);

        let output_q_hbm_tile = output[[0, batch_id, head_id]];
        let output_k_hbm_tile = output[[1, batch_id, head_id]];

        store(
            output_q_hbm_tile[[seq_batch_id * tile_size.pmax + i_p, i_f]],
            output_tile[[0, .., ..]],
            mask = seq_batch_id * tile_size.pmax + i_p < seq_len,
        );
        store(
            output_k_hbm_tile[[seq_batch_id * tile_size.pmax + i_p, i_f]],
            output_tile[[1, .., ..]],
            mask = seq_batch_id * tile_size.pmax + i_p < seq_len,
        );
    }
    output
}

/// The tutorial's `generate_pos_embedding` at positions `0..s`: `cos`, `sin` of
/// `[b, s, d]`, the frequencies `1 / 10000^(2j / d)` repeated over the two halves.
fn pos_embedding(b: usize, s: usize, d: usize) -> (Array3<f64>, Array3<f64>) {
    let angle = |p: usize, j: usize| {
        let j = j % (d / 2);
        p as f64 / 10000f64.powf((2 * j) as f64 / d as f64)
    };
    let cos = Array3::from_shape_fn((b, s, d), |(_, p, j)| angle(p, j).cos());
    let sin = Array3::from_shape_fn((b, s, d), |(_, p, j)| angle(p, j).sin());
    (cos, sin)
}

/// `apply_rotary_pos_emb`: `x * cos + rotate_half(x) * sin`, `rotate_half(x) = [-x2, x1]`.
fn rotate(x: &Array4<f64>, cos: &Array3<f64>, sin: &Array3<f64>) -> Array4<f64> {
    let d = x.shape()[3];
    Array4::from_shape_fn(x.raw_dim(), |(b, h, p, j)| {
        let half = if j < d / 2 {
            -x[[b, h, p, j + d / 2]]
        } else {
            x[[b, h, p, j - d / 2]]
        };
        x[[b, h, p, j]] * cos[[b, p, j]] + half * sin[[b, p, j]]
    })
}

#[test]
fn rotary_embedding_matches_apply_rotary_pos_emb() {
    // Two batches of three heads; 200 positions: a full tile of 128 and a ragged one of 72.
    for d in [64usize, 128] {
        let (b, nh, s) = (2, 3, 200);
        let shape = Ix4(b, nh, s, d);
        let q = common::rand_f32(shape, 1 + d as u64, -1.0, 1.0);
        let k = common::rand_f32(shape, 2 + d as u64, -1.0, 1.0);
        let (cos, sin) = pos_embedding(b, s, d);
        let (cos32, sin32) = (cos.mapv(|v| v as f32), sin.mapv(|v| v as f32));
        let mut core = NeuronCore::default();
        let out = match d {
            64 => nki_apply_rotary_embedding_64::grid([b, nh]).host(
                &mut core,
                q.view(),
                k.view(),
                cos32.view(),
                sin32.view(),
            ),
            _ => nki_apply_rotary_embedding_128::grid([b, nh]).host(
                &mut core,
                q.view(),
                k.view(),
                cos32.view(),
                sin32.view(),
            ),
        }
        .unwrap();
        assert_eq!(out.shape(), &[2, b, nh, s, d]);
        // The reference on the rounded inputs the kernel sees.
        let (cos_in, sin_in) = (cos32.mapv(f64::from), sin32.mapv(f64::from));
        for (which, x) in [(0, &q), (1, &k)] {
            let want = rotate(&x.mapv(f64::from), &cos_in, &sin_in);
            for ((bi, h, p, j), &w) in want.indexed_iter() {
                let got = f64::from(out[[which, bi, h, p, j]]);
                // Two products and a sum in f32: a few ulp of the terms.
                let bound = 4.0 * f64::from(f32::EPSILON) * (w.abs() + 2.0);
                assert!(
                    (got - w).abs() <= bound,
                    "d {d}, {which} [{bi}, {h}, {p}, {j}]: {got} vs {w}"
                );
            }
        }
    }
}
