//! `adaptive_avg_pool2d_kernel` of nki-samples' `reference/vision.py`, ported with NKI's names,
//! loops, tile sizes and masks, against PyTorch's `AdaptiveAvgPool2d` written as plain f64 loops.
//!
//! What differs: Rust's spelling (`&` for Python's `and` of compile-time conditions); `N`, `C`, `H`, `W` and `output_size` are meta-parameters (the
//! kernel sizes tiles by them); NumPy's index arrays (`h_start_indices[out_h_idx]`) are computed
//! per index in the unrolled loops, and the window buffer is sized by `min(H, 128)` × `min(W,
//! 128)`, a bound of NKI's `min(int(h_spans.max()), 128)` (the largest window), which needs a
//! maximum over a NumPy array.

use crate::common;

use common::*;
use nki::ndarray::{Array4, Ix4};
use nki::prelude::*;

#[kernel(
    adaptive_avg_pool2d_30x20_to_7x5(N = 2, C = 80, H = 30, W = 20, OH = 7, OW = 5),
    adaptive_avg_pool2d_16x16_to_4x4(N = 1, C = 128, H = 16, W = 16, OH = 4, OW = 4)
)]
fn adaptive_avg_pool2d_kernel<
    const N: usize,
    const C: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(
    in_tensor: Hbm<f32, N, C, H, W>,
) -> Hbm<f32, N, C, OH, OW> {
    assert!((OH > 0) & (OW > 0), "Output size must be positive");
    assert!(
        (OH <= H) & (OW <= W),
        "Output size cannot be larger than input size"
    );

    // Create output tensor.
    let out_tensor = ndarray((N, C, OH, OW), in_tensor.dtype, SharedHbm);

    // Tile configuration for processing the N*C dimension.
    let nc_tile_size = min(N * C, tile_size.pmax);
    let n_nc_tiles = (N * C + nc_tile_size - 1) / nc_tile_size;

    // Spatial tile sizes to fit within SBUF memory constraints.
    let pool_h_tile_size = 128;
    let pool_w_tile_size = 128;

    // Flatten batch and channel dimensions for efficient processing.
    let in_flattened = in_tensor.reshape((N * C, H, W));
    let out_flattened = out_tensor.reshape((N * C, OH, OW));

    // Allocate buffers with spatial tiling support.
    let max_pool_h = min(H, pool_h_tile_size);
    let max_pool_w = min(W, pool_w_tile_size);

    let in_tile_sbuf = zeros(
        (n_nc_tiles, par_dim(nc_tile_size), max_pool_h, max_pool_w),
        in_tensor.dtype,
        Sbuf,
    );
    let out_tile_sbuf = zeros(
        (n_nc_tiles, par_dim(nc_tile_size), OH, OW),
        in_tensor.dtype,
        Sbuf,
    );

    // Process tiles along the N*C dimension.
    for nc_tile_idx in affine_range(n_nc_tiles) {
        let nc_tile_start = nc_tile_idx * nc_tile_size;

        // Partition indices of the current tile.
        let i_p_nc = arange(nc_tile_size).p() + nc_tile_start;

        // Compute the adaptive average of each output position.
        for out_h_idx in static_range(OH) {
            for out_w_idx in static_range(OW) {
                // The pooling window of this output position.
                let (h_start, h_end) = ((out_h_idx * H) / OH, ((out_h_idx + 1) * H + OH - 1) / OH);
                let (w_start, w_end) = ((out_w_idx * W) / OW, ((out_w_idx + 1) * W + OW - 1) / OW);
                let pool_h_size = h_end - h_start;
                let pool_w_size = w_end - w_start;

                let accumulator = zeros((nc_tile_size, 1), f32, Sbuf);
                let total_elements = pool_h_size * pool_w_size;

                let n_pool_h_tiles = (pool_h_size + pool_h_tile_size - 1) / pool_h_tile_size;
                let n_pool_w_tiles = (pool_w_size + pool_w_tile_size - 1) / pool_w_tile_size;

                // Process the pooling region in tiles.
                for pool_h_tile_idx in sequential_range(n_pool_h_tiles) {
                    let cur_pool_h_tile_size = min(pool_h_size, pool_h_tile_size);
                    let pool_h_tile_start = pool_h_tile_idx * cur_pool_h_tile_size;
                    let i_f_pool_h = arange(cur_pool_h_tile_size).x() + pool_h_tile_start + h_start;

                    for pool_w_tile_idx in sequential_range(n_pool_w_tiles) {
                        let cur_pool_w_tile_size = min(pool_w_size, pool_w_tile_size);
                        let pool_w_tile_start = pool_w_tile_idx * cur_pool_w_tile_size;
                        let i_f_pool_w =
                            arange(cur_pool_w_tile_size).y() + pool_w_tile_start + w_start;

                        // Load the current pooling region tile.
                        dma_copy(
                            src = in_flattened[[
                                nc_tile_start..nc_tile_start + nc_tile_size,
                                h_start + pool_h_tile_start
                                    ..h_start + pool_h_tile_start + cur_pool_h_tile_size,
                                w_start + pool_w_tile_start
                                    ..w_start + pool_w_tile_start + cur_pool_w_tile_size,
                            ]],
                            dst = in_tile_sbuf[[
                                nc_tile_idx,
                                ..,
                                0..cur_pool_h_tile_size,
                                0..cur_pool_w_tile_size,
                            ]],
                            mask = (i_p_nc < N * C) & (i_f_pool_h < H) & (i_f_pool_w < W),
                        );

                        // Sum the elements of the current tile.
                        let tile_sum = sum(
                            in_tile_sbuf[[
                                nc_tile_idx,
                                ..,
                                0..cur_pool_h_tile_size,
                                0..cur_pool_w_tile_size,
                            ]],
                            axis = [-2, -1],
                            mask = (i_f_pool_h < H) & (i_f_pool_w < W),
                        );

                        // Accumulate the sum.
                        accumulator[[.., ..]] = accumulator + tile_sum;
                    }
                }

                // Compute the average.
                if total_elements > 0 {
                    out_tile_sbuf[[nc_tile_idx, .., out_h_idx, out_w_idx]] =
                        divide(accumulator, total_elements);
                } else {
                    out_tile_sbuf[[nc_tile_idx, .., out_h_idx, out_w_idx]] = 0.0;
                }
            }
        }

        // Store the output tile.
        store(
            out_flattened[[nc_tile_start..nc_tile_start + nc_tile_size, .., ..]],
            value = out_tile_sbuf[nc_tile_idx],
            mask = i_p_nc < N * C,
        );
    }

    out_tensor
}

/// `AdaptiveAvgPool2d((oh, ow))` in f64: window `[⌊i·H/OH⌋, ⌈(i+1)·H/OH⌉)` on each axis.
fn reference(x: &Array4<f32>, oh: usize, ow: usize) -> Array4<f64> {
    let (n, c, h, w) = x.dim();
    Array4::from_shape_fn((n, c, oh, ow), |(a, b, i, j)| {
        let (h0, h1) = (i * h / oh, ((i + 1) * h).div_ceil(oh));
        let (w0, w1) = (j * w / ow, ((j + 1) * w).div_ceil(ow));
        let mut s = 0.0;
        for y in h0..h1 {
            for z in w0..w1 {
                s += f64::from(x[[a, b, y, z]]);
            }
        }
        s / ((h1 - h0) * (w1 - w0)) as f64
    })
}

#[test]
fn adaptive_avg_pool2d_matches_plain_loops() {
    let mut core = NeuronCore::default();
    let x = rand_f32(Ix4(2, 80, 30, 20), 3, -1.0, 1.0);
    let out = adaptive_avg_pool2d_30x20_to_7x5::host(&mut core, x.view()).unwrap();
    let want = reference(&x, 7, 5);
    for (ix, &v) in out.indexed_iter() {
        assert!(
            (f64::from(v) - want[ix]).abs() <= 1e-6,
            "{ix:?}: {v} vs {}",
            want[ix]
        );
    }
    let x = rand_f32(Ix4(1, 128, 16, 16), 4, -1.0, 1.0);
    let out = adaptive_avg_pool2d_16x16_to_4x4::host(&mut core, x.view()).unwrap();
    let want = reference(&x, 4, 4);
    for (ix, &v) in out.indexed_iter() {
        assert!(
            (f64::from(v) - want[ix]).abs() <= 1e-6,
            "{ix:?}: {v} vs {}",
            want[ix]
        );
    }
}
