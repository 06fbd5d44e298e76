//! Kernels of `aws-neuron/nki-samples/contributed`, ported from the NKI Python with NKI's
//! names, loops, tile sizes and masks, against references computed here with plain loops.
//!
//! `max_pooling_2d_stride_1` (`contributed/maxpooling.py`): what differs is Rust's spelling
//! only — `x[[a, b]]` for `x[a, b]`, `mgrid![..]` for `nl.mgrid[..]`, the trace-time integers
//! `h_in`, `w_in`, `pool_size` as meta-parameters (NKI reads them from the traced shape and the
//! Python argument), and the output's shape written in the signature.
//!
//! `interpolate_bilinear_2x_fwd` (`contributed/interpolate_bilinear_fwd.py`): Rust's spelling as
//! above; `h_src`, `w_src` and `chunk_size` are meta-parameters (tile shapes depend on them),
//! while `n` and `c` stay traced (`src_arr.reshape((n * c, h_src, w_src))`); Python's `1 / 4` is
//! written `1.0 / 4.0` (Rust's `/` on integers floors), `math.ceil(a / b)` of positive integers
//! `(a + b - 1) / b`, and `x if c else y` on integers `if c != 0 { x } else { y }`.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Array4, Ix2, Ix4};
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

/// Bilinear 2× upsampling of an `[N, C, H, W]` tensor, `align_corners = False`.
#[kernel(interpolate_bilinear_2x_fwd_64(H_SRC = 64, W_SRC = 32, CHUNK = 10))]
fn interpolate_bilinear_2x_fwd<const H_SRC: usize, const W_SRC: usize, const CHUNK: usize>(
    src_arr: Hbm<f32, N, C, H_SRC, W_SRC>,
) -> Hbm<f32, N, C, { 2 * H_SRC }, { 2 * W_SRC }> {
    let p_tile_size = tile_size.pmax;
    let (h_src, w_src) = (H_SRC, W_SRC);
    let (h_dst, w_dst) = (h_src * 2, w_src * 2);
    let (n, c) = (N, C);

    let weight_1d = 1.0 / 4.0;

    let src_arr = src_arr.reshape((n * c, h_src, w_src));
    let dst_arr = ndarray([n * c, h_dst, w_dst], src_arr.dtype, SharedHbm);

    let wdw_size = CHUNK;
    let step_size = wdw_size - 1;

    for h in static_range((h_src - wdw_size + step_size - 1) / step_size + 1) {
        let h_start_hbm_src = max(0, h * step_size);
        let h_end_hbm_src = min(wdw_size + h * step_size, h_src);

        let h_tile_size_src = h_end_hbm_src - h_start_hbm_src;
        let h_tile_size_dst = 2 * h_tile_size_src;

        let h_start_tile_dst = if h_start_hbm_src != 0 { 1 } else { 0 };
        let h_end_tile_dst = h_tile_size_dst;

        let h_start_hbm_dst = if h_start_hbm_src != 0 {
            2 * h_start_hbm_src + 1
        } else {
            0
        };
        let h_end_hbm_dst = 2 * h_end_hbm_src;

        for p in affine_range((n * c + p_tile_size - 1) / p_tile_size) {
            let out_tile = ndarray([p_tile_size, h_tile_size_dst, w_dst], src_arr.dtype, Sbuf);

            // Load input array from HBM.
            let (i_p, i_h, i_w) = mgrid![0..p_tile_size, h_start_hbm_src..h_end_hbm_src, 0..w_src];
            let i_p = p * p_tile_size + i_p;

            let in_tile = load(src_arr[[i_p, i_h, i_w]], mask = i_p < n * c);

            // Core region.
            let weight_2d = weight_1d * weight_1d;

            let (i_p, i_h_x, i_w_x, i_h_y, i_w_y) = mgrid![
                0..p_tile_size,
                0..2,
                0..2,
                0..(h_tile_size_src - 1),
                0..(w_src - 1)
            ];
            let i_h_dst = (2 * i_h_y + 1) + i_h_x;
            let i_w_dst = (2 * i_w_y + 1) + i_w_x;

            let i_h_src_056 = i_h_y + i_h_x;
            let i_w_src_056 = i_w_y + i_w_x;
            let i_h_src_006 = i_h_y + (-1 * i_h_x + 1);
            let i_w_src_006 = i_w_y + (-1 * i_w_x + 1);
            let i_h_src_018_h = i_h_y + (-1 * i_h_x + 1);
            let i_w_src_018_h = i_w_y + i_w_x;
            let i_h_src_018_w = i_h_y + i_h_x;
            let i_w_src_018_w = i_w_y + (-1 * i_w_x + 1);

            out_tile[[i_p, i_h_dst, i_w_dst]] =
                9.0 * weight_2d * in_tile[[i_p, i_h_src_056, i_w_src_056]]
                    + 3.0 * weight_2d * in_tile[[i_p, i_h_src_018_h, i_w_src_018_h]]
                    + 3.0 * weight_2d * in_tile[[i_p, i_h_src_018_w, i_w_src_018_w]]
                    + 1.0 * weight_2d * in_tile[[i_p, i_h_src_006, i_w_src_006]];

            // Edges. Upper & lower edges, i.e. h = 0 or h = h_dst - 1 (corners excluded).
            let (i_p, i_w_x, i_h, i_w_y) = mgrid![0..p_tile_size, 0..2, 0..2, 0..(w_src - 1)];

            let i_h_dst = (h_tile_size_dst - 1) * i_h;
            let i_w_dst = (2 * i_w_y + 1) + i_w_x;

            let i_h_src = (h_tile_size_src - 1) * i_h;
            let i_w_src_075 = i_w_y + i_w_x;
            let i_w_src_025 = i_w_y + (-1 * i_w_x + 1);

            out_tile[[i_p, i_h_dst, i_w_dst]] =
                3.0 * weight_1d * in_tile[[i_p, i_h_src, i_w_src_075]]
                    + 1.0 * weight_1d * in_tile[[i_p, i_h_src, i_w_src_025]];

            // Right & left edges, i.e. w = 0 or w = w_dst - 1 (corners excluded).
            let (i_p, i_h_x, i_w, i_h_y) =
                mgrid![0..p_tile_size, 0..2, 0..2, 0..(h_tile_size_src - 1)];

            let i_h_dst = (2 * i_h_y + 1) + i_h_x;
            let i_w_dst = (w_dst - 1) * i_w;

            let i_h_src_075 = i_h_y + i_h_x;
            let i_h_src_025 = i_h_y + (-1 * i_h_x + 1);
            let i_w_src = (w_src - 1) * i_w;

            out_tile[[i_p, i_h_dst, i_w_dst]] =
                3.0 * weight_1d * in_tile[[i_p, i_h_src_075, i_w_src]]
                    + 1.0 * weight_1d * in_tile[[i_p, i_h_src_025, i_w_src]];

            // Corners.
            let (i_p, i_w, i_h) = mgrid![0..p_tile_size, 0..2, 0..2];

            let i_h_dst = (h_tile_size_dst - 1) * i_h;
            let i_w_dst = (w_dst - 1) * i_w;
            let i_h_src = (h_tile_size_src - 1) * i_h;
            let i_w_src = (w_src - 1) * i_w;

            out_tile[[i_p, i_h_dst, i_w_dst]] = in_tile[[i_p, i_h_src, i_w_src]];

            // Write output array to HBM.
            let (i_p, i_h_tile, i_w) =
                mgrid![0..p_tile_size, h_start_tile_dst..h_end_tile_dst, 0..w_dst];
            let (_, i_h_hbm, _) = mgrid![0..p_tile_size, h_start_hbm_dst..h_end_hbm_dst, 0..w_dst];
            let i_p_hbm = p * p_tile_size + i_p;
            store(
                dst_arr[[i_p_hbm, i_h_hbm, i_w]],
                out_tile[[i_p, i_h_tile, i_w]],
                mask = i_p_hbm < n * c,
            );
        }
    }

    dst_arr.reshape((n, c, h_dst, w_dst))
}

/// `torch.nn.functional.interpolate(x, scale_factor = 2, mode = "bilinear")` by plain loops
/// in f64: source coordinate `d / 2 − 1/4`, clamped to the edges.
fn bilinear_2x_reference(x: &Array4<f32>) -> Array4<f64> {
    let (n, c, h, w) = x.dim();
    let coord = |d: usize, size: usize| {
        let s = (d as f64 / 2.0 - 0.25).max(0.0);
        let i0 = (s.floor() as usize).min(size - 1);
        let i1 = (i0 + 1).min(size - 1);
        (i0, i1, s - i0 as f64)
    };
    Array4::from_shape_fn((n, c, 2 * h, 2 * w), |(a, b, y, z)| {
        let (y0, y1, ly) = coord(y, h);
        let (z0, z1, lz) = coord(z, w);
        let v = |i: usize, j: usize| f64::from(x[[a, b, i, j]]);
        (1.0 - ly) * ((1.0 - lz) * v(y0, z0) + lz * v(y0, z1))
            + ly * ((1.0 - lz) * v(y1, z0) + lz * v(y1, z1))
    })
}

#[test]
fn interpolate_bilinear_2x_fwd_matches_plain_loops() {
    for (n, c) in [(2, 64), (1, 200)] {
        let x: Array4<f32> = rand_f32(Ix4(n, c, 64, 32), (n * c) as u64, 0.0, 1.0);
        let mut core = NeuronCore::default();
        let out = interpolate_bilinear_2x_fwd_64::host(&mut core, x.view()).unwrap();
        let reference = bilinear_2x_reference(&x);
        for (ix, &v) in out.indexed_iter() {
            let want = reference[ix];
            assert!(
                (f64::from(v) - want).abs() <= 1e-6,
                "N={n} C={c} {ix:?}: {v} vs {want}"
            );
        }
    }
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
