//! Kernels of `aws-neuron/nki-samples/contributed`, ported from the NKI Python with NKI's
//! names, loops, tile sizes and masks, against references computed here with plain loops.
//!
//! `max_pooling_2d_stride_1` (`contributed/maxpooling.py`): what differs is Rust's spelling
//! only — `x[[a, b]]` for `x[a, b]`, `mgrid![..]` for `nl.mgrid[..]`, the trace-time integers
//! `h_in`, `w_in`, `pool_size` as meta-parameters (NKI reads them from the traced shape and the
//! Python argument), and the output's shape written in the signature.

mod common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// 2-D max pooling with stride 1 of an `[H, W]` tensor by a `K × K` window.
#[kernel(
    max_pooling_448_k3(H = 448, W = 448, K = 3),
    max_pooling_200_k2(H = 200, W = 64, K = 2)
)]
fn max_pooling_2d_stride_1<const H: usize, const W: usize, const K: usize>(
    in_tensor: Hbm<f32, H, W>,
) -> Hbm<f32, { H - (K - 1) }, { W - (K - 1) }> {
    let k = K;
    let (h_in, w_in) = (H, W);
    let (h_out, w_out) = (h_in - (k - 1), w_in - (k - 1));
    let out_tensor = ndarray([h_out, w_out], in_tensor.dtype, SharedHbm);

    let h_tiles_count = (h_in + tile_size.pmax - 1) / tile_size.pmax;
    for h_tile_idx in affine_range(h_tiles_count) {
        let (i_h, i_kh, i_w) = mgrid![0..tile_size.pmax, 0..k, 0..w_in];
        let i_h = h_tile_idx * tile_size.pmax + i_h;
        let in_tile = load(in_tensor[[i_h + i_kh, i_w]], mask = i_h < (h_in - (k - 1)));
        let (i_h, i_kh, i_w, i_kw) = mgrid![0..tile_size.pmax, 0..k, 0..(w_in - (k - 1)), 0..k];
        let out_tile = max(
            in_tile[[i_h, i_kh, i_w + i_kw]],
            axis = [1, 3],
            mask = h_tile_idx * tile_size.pmax + i_h < h_in,
        );
        let (i_h_out, i_w_out) = mgrid![0..tile_size.pmax, 0..(w_in - (k - 1))];
        let i_h_out = h_tile_idx * tile_size.pmax + i_h_out;
        store(
            out_tensor[[i_h_out, i_w_out]],
            out_tile,
            mask = i_h_out < h_out,
        );
    }
    out_tensor
}

fn max_pool_reference(x: &Array2<f32>, k: usize) -> Array2<f32> {
    let (h, w) = x.dim();
    let (ho, wo) = (h - (k - 1), w - (k - 1));
    Array2::from_shape_fn((ho, wo), |(i, j)| {
        let mut m = f32::NEG_INFINITY;
        for a in 0..k {
            for b in 0..k {
                m = m.max(x[[i + a, j + b]]);
            }
        }
        m
    })
}

#[test]
fn max_pooling_2d_stride_1_matches_plain_loops() {
    let x = rand_f32(Ix2(448, 448), 1, -1.0, 1.0);
    let mut core = NeuronCore::default();
    let out = max_pooling_448_k3::host(&mut core, x.view()).unwrap();
    assert_eq!(out, max_pool_reference(&x, 3));

    let x = rand_f32(Ix2(200, 64), 2, -1.0, 1.0);
    let out = max_pooling_200_k2::host(&mut core, x.view()).unwrap();
    assert_eq!(out, max_pool_reference(&x, 2));
}
