//! `resize_nearest_fixed_dma_kernel` of nki-samples' `reference/vision.py` (removed from the
//! repository by its commit c4b806e; the unit test is `test/unit/test_resize_nearest.py`),
//! ported with NKI's names, loops, tile sizes and masks, against the unit test's NumPy
//! `cpu_golden_result` written as plain loops, at the test's shapes (`[B, 30, 20, C]` to
//! `[B, 59, 38, C]`) in float32, float16 and bfloat16.
//!
//! What differs: Rust's spelling (`x[[b, i, j]]`, `dtype = i32`, `r#mod` for `nl.mod`: `mod`
//! is a Rust keyword); `out_shape` and the dtype are meta-parameters (`OB`,
//! `OH`, `OW`, `OC`, `T`), as the shape of `nl.ndarray(out_shape, ...)` is known when NKI
//! traces; the float32 case runs with 64 channels instead of 1280 (the same tiles and loops;
//! the test's 1280 channels run in float16 and bfloat16).

use crate::common;

use common::*;
use nki::ndarray::{Array4, Ix4};
use nki::prelude::*;

#[kernel(
    resize_f32(T = f32, B = 10, H = 30, W = 20, C = 64, OB = 10, OH = 59, OW = 38, OC = 64),
    resize_f16(T = f16, B = 1, H = 30, W = 20, C = 1280, OB = 1, OH = 59, OW = 38, OC = 1280),
    resize_bf16(T = bf16, B = 1, H = 30, W = 20, C = 1280, OB = 1, OH = 59, OW = 38, OC = 1280),
    resize_up_and_down(T = f32, B = 3, H = 7, W = 50, C = 8, OB = 3, OH = 16, OW = 9, OC = 8)
)]
fn resize_nearest_fixed_dma_kernel<
    T,
    const B: usize,
    const H: usize,
    const W: usize,
    const C: usize,
    const OB: usize,
    const OH: usize,
    const OW: usize,
    const OC: usize,
>(
    data_tensor: Hbm<T, B, H, W, C>,
) -> Hbm<T, OB, OH, OW, OC> {
    let (in_b, in_h, in_w, in_c) = data_tensor.shape;
    let (out_b, out_h, out_w, out_c) = (OB, OH, OW, OC);
    let out_tensor = ndarray((OB, OH, OW, OC), data_tensor.dtype, SharedHbm);

    assert!(
        in_b == out_b,
        "Input batch and output batch must be identical"
    );
    assert!(
        in_c == out_c,
        "Input channel and output channel must be identical"
    );

    // Scaling factors for height and width
    let h_scale = 1.0 * in_h / out_h;
    let w_scale = 1.0 * in_w / out_w;

    // Create flattened views
    let in_seqlen = in_h * in_w;
    let out_seqlen = out_h * out_w;
    let data_view_flattened = data_tensor.reshape((in_b, in_seqlen, in_c));
    let output_view_flattened = out_tensor.reshape((out_b, out_seqlen, out_c));

    // Tile configuration
    let h_w_tile_size = 128;
    let h_w_num_tiles = (out_seqlen + h_w_tile_size - 1) / h_w_tile_size;

    for b in affine_range(out_b) {
        for h_w_tile in affine_range(h_w_num_tiles) {
            // Partition dimension for image pixel spatial positions, free dimension for channels
            let i_p_hw = arange(h_w_tile_size).p();
            let i_f_channel = arange(out_c).x();

            // Output position for current tile
            let tile_start = h_w_tile * h_w_tile_size;
            let output_pos = tile_start + i_p_hw;
            let output_pos_iota = iota(output_pos, dtype = i32);

            // Convert flattened position to 2D coordinates
            let out_h_idx = floor(output_pos_iota / out_w, dtype = i32);
            let out_w_idx = r#mod(output_pos_iota, out_w, dtype = i32);

            // Compute nearest neighbor source indices
            let src_h_idx = floor(multiply(out_h_idx, h_scale, dtype = f32), dtype = i32);
            let src_w_idx = floor(multiply(out_w_idx, w_scale, dtype = f32), dtype = i32);

            // Convert to flattened index
            let load_indices = src_h_idx * in_w + src_w_idx;

            // Boundary mask
            let valid_mask = output_pos < out_seqlen;

            // Gather and store
            let target_addr = data_view_flattened[[b, load_indices, i_f_channel]];
            let loaded_tile_sbuf = load(target_addr, mask = valid_mask);

            store(
                output_view_flattened[[b, output_pos, i_f_channel]],
                value = loaded_tile_sbuf,
                mask = valid_mask,
            );
        }
    }
    out_tensor
}

/// The unit test's `cpu_golden_result` as plain loops: NumPy's `np.floor(i * h_scale)` over
/// a float32 `fromfunction` grid is the float32 product (the Python float scalar taken as
/// float32), floored; the map `h_map * in_w + w_map` then indexes the flattened input.
fn cpu_golden_result<E: Copy + Default>(
    data: &Array4<E>,
    (out_h, out_w): (usize, usize),
) -> Array4<E> {
    let (in_b, in_h, in_w, in_c) = data.dim();
    let h_scale = (1.0 * in_h as f64 / out_h as f64) as f32;
    let w_scale = (1.0 * in_w as f64 / out_w as f64) as f32;
    let mut out = Array4::<E>::from_elem((in_b, out_h, out_w, in_c), E::default());
    for b in 0..in_b {
        for i in 0..out_h {
            for j in 0..out_w {
                let h_map = (i as f32 * h_scale).floor();
                let w_map = (j as f32 * w_scale).floor();
                let map = (h_map * in_w as f32 + w_map) as usize;
                let (sh, sw) = (map / in_w, map % in_w);
                for c in 0..in_c {
                    out[[b, i, j, c]] = data[[b, sh, sw, c]];
                }
            }
        }
    }
    out
}

#[test]
fn resize_nearest_matches_its_unit_test_in_float32() {
    let x = rand_f32(Ix4(10, 30, 20, 64), 1, 0.0, 1.0);
    let out = resize_f32::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(out, cpu_golden_result(&x, (59, 38)));
    let x = rand_f32(Ix4(3, 7, 50, 8), 2, -1.0, 1.0);
    let out = resize_up_and_down::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(out, cpu_golden_result(&x, (16, 9)));
}

#[test]
fn resize_nearest_matches_its_unit_test_in_float16_and_bfloat16() {
    let x = rand_f32(Ix4(1, 30, 20, 1280), 3, 0.0, 1.0);
    let h = x.mapv(f16::from_f32);
    let out = resize_f16::host(&mut NeuronCore::default(), h.view()).unwrap();
    assert_eq!(out, cpu_golden_result(&h, (59, 38)));
    let h = x.mapv(bf16::from_f32);
    let out = resize_bf16::host(&mut NeuronCore::default(), h.view()).unwrap();
    assert_eq!(out, cpu_golden_result(&h, (59, 38)));
}
