//! `tensor_copy_dynamic_src`: a copy whose source sits at a run-time offset along a free axis
//! (NKI's `test_nki_isa_tensor_copy_dynamic.py` examples), against `np.take` as plain loops;
//! an offset past the tile is a launch error, and strict mode refuses an unwritten offset.
//! `tensor_copy_dynamic_dst`, its mirror (a scatter of columns or blocks to run-time offsets),
//! against plain loops: the last write of a `sequential_range` wins, strict mode refuses two
//! iterations of an `affine_range` writing one column and a store of columns no copy wrote.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Array3, Ix2, Ix3};
use nki::prelude::*;

/// NKI's `example_tensor_copy_dynamic_src_0`: column `idx[0, b]` of a `[128, 512]` tile into
/// column `b` of the result, for each of the 64 offsets.
#[kernel]
fn example_tensor_copy_dynamic_src_0(
    in_tensor: Hbm<f32, 128, 512>,
    idx_tensor: Hbm<i32, 1, 64>,
) -> Hbm<f32, 128, 64> {
    let out_tensor = ndarray([128, 64], in_tensor.dtype, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..1];
    let in_tensor_sbuf = load(in_tensor[..]);
    // indices must be on SBUF
    let idx_tensor_sbuf = load(idx_tensor[..]);
    // write temporary output to SBUF
    let out_sbuf = ndarray([128, 64], in_tensor.dtype, Sbuf);
    for b_idx in affine_range(idx_tensor_sbuf.shape[1]) {
        out_sbuf[[ix, b_idx]] =
            tensor_copy_dynamic_src(in_tensor_sbuf[[ix, idx_tensor_sbuf[[0, b_idx]] + iy]]);
    }
    store(out_tensor[..], out_sbuf);
    out_tensor
}

/// NKI's `example_tensor_copy_dynamic_src_1`: `[128, 1, 4]` blocks of a `[128, 512, 4]` tile.
#[kernel]
fn example_tensor_copy_dynamic_src_1(
    in_tensor: Hbm<f32, 128, 512, 4>,
    idx_tensor: Hbm<i32, 1, 8>,
) -> Hbm<f32, 128, 8, 4> {
    let out_tensor = ndarray([128, 8, 4], in_tensor.dtype, SharedHbm);
    let (ix, iy, iz) = mgrid![0..128, 0..1, 0..4];
    let in_tensor_sbuf = load(in_tensor[..]);
    let idx_tensor_sbuf = load(idx_tensor[..]);
    let out_sbuf = ndarray([128, 8, 4], in_tensor.dtype, Sbuf);
    for b_idx in affine_range(idx_tensor.shape[1]) {
        out_sbuf[[ix, b_idx + iy, iz]] =
            tensor_copy_dynamic_src(in_tensor_sbuf[[ix, idx_tensor_sbuf[[0, b_idx]], iz]]);
    }
    store(out_tensor[..], out_sbuf);
    out_tensor
}

#[test]
fn columns_at_run_time_offsets_as_np_take() {
    let x = rand_f32(Ix2(128, 512), 1, -1.0, 1.0);
    // NKI's test: 4 + arange(64); then offsets out of order with repeats.
    for offsets in [
        (0..64).map(|i| 4 + i).collect::<Vec<i32>>(),
        (0..64).map(|i| (i * 97 + 11) % 512).collect(),
    ] {
        let idx = Array2::from_shape_vec((1, 64), offsets.clone()).unwrap();
        let out = example_tensor_copy_dynamic_src_0::host(
            &mut NeuronCore::default(),
            x.view(),
            idx.view(),
        )
        .unwrap();
        let want = Array2::from_shape_fn((128, 64), |(p, b)| x[[p, offsets[b] as usize]]);
        assert_eq!(out, want);
    }
    let x = rand_f32(Ix3(128, 512, 4), 2, -1.0, 1.0);
    let offsets: Vec<i32> = vec![4, 5, 6, 7, 511, 0, 300, 4];
    let idx = Array2::from_shape_vec((1, 8), offsets.clone()).unwrap();
    let out =
        example_tensor_copy_dynamic_src_1::host(&mut NeuronCore::default(), x.view(), idx.view())
            .unwrap();
    let want = Array3::from_shape_fn((128, 8, 4), |(p, b, k)| x[[p, offsets[b] as usize, k]]);
    assert_eq!(out, want);
}

#[test]
fn an_offset_past_the_tile_is_a_launch_error() {
    let x = rand_f32(Ix2(128, 512), 3, -1.0, 1.0);
    let mut offsets: Vec<i32> = (0..64).collect();
    offsets[9] = 512;
    let idx = Array2::from_shape_vec((1, 64), offsets).unwrap();
    let err =
        example_tensor_copy_dynamic_src_0::host(&mut NeuronCore::default(), x.view(), idx.view())
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("tensor_copy_dynamic_src offset 512 moves its source to elements 512..=512"),
        "{err}"
    );
}

/// The offsets loaded into the first 32 columns of their tile only.
#[kernel]
fn offsets_half_written(
    in_tensor: Hbm<f32, 128, 64>,
    idx_tensor: Hbm<i32, 1, 64>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..1];
    let t = load(in_tensor[..]);
    let idx = ndarray([1, 64], i32, Sbuf);
    idx[[0..1, 0..32]] = load(idx_tensor[[0..1, 0..32]]);
    let o = ndarray([128, 64], f32, Sbuf);
    for b in affine_range(64) {
        o[[ix, b]] = tensor_copy_dynamic_src(t[[ix, idx[[0, b]] + iy]]);
    }
    store(out[..], o);
    out
}

#[test]
fn strict_mode_refuses_an_offset_no_instruction_wrote() {
    let x = rand_f32(Ix2(128, 64), 4, -1.0, 1.0);
    let idx = Array2::<i32>::zeros((1, 64));
    let mut core = NeuronCore::default().with_strict(true);
    let err = offsets_half_written::host(&mut core, x.view(), idx.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the offset of tensor_copy_dynamic_src must be defined"),
        "{err}"
    );
}

/// Column `b` of a `[128, 64]` tile into column `idx[0, b]` of a zeroed `[128, 512]` tile,
/// NKI's `tensor_copy_dynamic_dst(dst=out[ix, idx[0, b] + iy], src=x[ix, b])`.
#[kernel]
fn scatter_columns(x: Hbm<f32, 128, 64>, idx_tensor: Hbm<i32, 1, 64>) -> Hbm<f32, 128, 512> {
    let out_tensor = ndarray([128, 512], x.dtype, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..1];
    let x_sbuf = load(x[..]);
    let idx = load(idx_tensor[..]);
    let out_sbuf = zeros([128, 512], x.dtype, Sbuf);
    for b in sequential_range(64) {
        tensor_copy_dynamic_dst(
            dst = out_sbuf[[ix, idx[[0, b]] + iy]],
            src = x_sbuf[[ix, b]],
        );
    }
    store(out_tensor[..], out_sbuf);
    out_tensor
}

/// `[128, 1, 4]` blocks of a `[128, 8, 4]` tile to the blocks `idx[0, b]` of a `[128, 32, 4]`
/// one, in an `affine_range`, on the engine named, converting to bf16.
macro_rules! scatter_blocks {
    ($name:ident, $engine:ident) => {
        #[kernel]
        fn $name(x: Hbm<f32, 128, 8, 4>, idx_tensor: Hbm<u32, 1, 8>) -> Hbm<bf16, 128, 32, 4> {
            let out_tensor = ndarray([128, 32, 4], bf16, SharedHbm);
            let (ix, iy, iz) = mgrid![0..128, 0..1, 0..4];
            let x_sbuf = load(x[..]);
            let idx = load(idx_tensor[..]);
            let out_sbuf = zeros([128, 32, 4], bf16, Sbuf);
            for b in affine_range(8) {
                tensor_copy_dynamic_dst(
                    dst = out_sbuf[[ix, idx[[0, b]] + iy, iz]],
                    src = x_sbuf[[ix, b + iy, iz]],
                    dtype = bf16,
                    engine = $engine,
                );
            }
            store(out_tensor[..], out_sbuf);
            out_tensor
        }
    };
}
scatter_blocks!(scatter_blocks_vector, vector);
scatter_blocks!(scatter_blocks_scalar, scalar);
scatter_blocks!(scatter_blocks_gpsimd, gpsimd);

#[test]
fn columns_scattered_to_run_time_offsets() {
    let x = rand_f32(Ix2(128, 64), 5, -1.0, 1.0);
    for offsets in [
        (0..64).map(|i| (i * 97 + 11) % 512).collect::<Vec<i32>>(),
        // Repeats: the sequential loop's last write wins.
        (0..64).map(|i| (i % 5) * 100).collect(),
    ] {
        let idx = Array2::from_shape_vec((1, 64), offsets.clone()).unwrap();
        let mut core = NeuronCore::default().with_strict(true);
        let out = scatter_columns::host(&mut core, x.view(), idx.view()).unwrap();
        let mut want = Array2::<f32>::zeros((128, 512));
        for (b, &o) in offsets.iter().enumerate() {
            for p in 0..128 {
                want[[p, o as usize]] = x[[p, b]];
            }
        }
        assert_eq!(out, want);
    }
}

#[test]
fn blocks_scattered_on_every_engine_with_a_conversion() {
    let x = rand_f32(Ix3(128, 8, 4), 6, -3.0, 3.0);
    let offsets: Vec<u32> = vec![31, 0, 7, 8, 16, 1, 30, 2];
    let idx = Array2::from_shape_vec((1, 8), offsets.clone()).unwrap();
    let mut want = Array3::from_elem((128, 32, 4), bf16::ZERO);
    for (b, &o) in offsets.iter().enumerate() {
        for p in 0..128 {
            for k in 0..4 {
                want[[p, o as usize, k]] = bf16::from_f32(x[[p, b, k]]);
            }
        }
    }
    let mut core = NeuronCore::default().with_strict(true);
    let v = scatter_blocks_vector::host(&mut core, x.view(), idx.view()).unwrap();
    let s = scatter_blocks_scalar::host(&mut core, x.view(), idx.view()).unwrap();
    let g = scatter_blocks_gpsimd::host(&mut core, x.view(), idx.view()).unwrap();
    assert_eq!(v, want);
    assert_eq!(s, want);
    assert_eq!(g, want);
}

#[test]
fn a_destination_offset_past_the_tile_is_a_launch_error() {
    let x = rand_f32(Ix2(128, 64), 7, -1.0, 1.0);
    let mut offsets: Vec<i32> = (0..64).collect();
    offsets[3] = -1;
    let idx = Array2::from_shape_vec((1, 64), offsets).unwrap();
    let err = scatter_columns::host(&mut NeuronCore::default(), x.view(), idx.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tensor_copy_dynamic_dst offset -1 moves its destination to elements -1..=-1"),
        "{err}"
    );
}

/// Each column of `x` to column `idx[0, b]` of an uninitialized tile, in an `affine_range`.
#[kernel]
fn scatter_uninitialized(x: Hbm<f32, 128, 64>, idx_tensor: Hbm<i32, 1, 64>) -> Hbm<f32, 128, 64> {
    let out_tensor = ndarray([128, 64], x.dtype, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..1];
    let x_sbuf = load(x[..]);
    let idx = load(idx_tensor[..]);
    let out_sbuf = ndarray([128, 64], x.dtype, Sbuf);
    for b in affine_range(64) {
        tensor_copy_dynamic_dst(
            dst = out_sbuf[[ix, idx[[0, b]] + iy]],
            src = x_sbuf[[ix, b]],
        );
    }
    store(out_tensor[..], out_sbuf);
    out_tensor
}

#[test]
fn strict_mode_follows_the_destination_offsets() {
    let x = rand_f32(Ix2(128, 64), 8, -1.0, 1.0);
    // A permutation writes every column once: a strict launch passes.
    let perm: Vec<i32> = (0..64).map(|i| (i * 37 + 5) % 64).collect();
    let idx = Array2::from_shape_vec((1, 64), perm.clone()).unwrap();
    let mut core = NeuronCore::default().with_strict(true);
    let out = scatter_uninitialized::host(&mut core, x.view(), idx.view()).unwrap();
    let want = Array2::from_shape_fn((128, 64), |(p, c)| {
        let b = perm.iter().position(|&o| o as usize == c).unwrap();
        x[[p, b]]
    });
    assert_eq!(out, want);
    // Column 9 twice and column 10 never: two iterations of an affine_range race on one
    // column, and the store reads one no copy wrote.
    let mut twice = perm.clone();
    let at = twice.iter().position(|&o| o == 10).unwrap();
    twice[at] = 9;
    let idx = Array2::from_shape_vec((1, 64), twice).unwrap();
    let err = scatter_uninitialized::host(&mut core, x.view(), idx.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("tensor_copy_dynamic_dst"), "{err}");
    assert!(err.contains("iteration"), "{err}");
}
