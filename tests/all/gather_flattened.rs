//! `gather_flattened(data, indices)`: per partition, the elements of `data` (its free elements
//! flattened row-major) at the positions the indices hold; against `np.take_along_axis` written
//! as plain loops.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Array3, Ix2, Ix3};
use nki::prelude::*;

/// NKI's `nki_gather_flattened` example: every 5th element of each row of a `[32, 64]` tile
/// (the data loaded from HBM where NKI draws it with `nl.rand`; the indices an `iota` where NKI
/// writes them element by element).
#[kernel]
fn nki_gather_flattened(data_in: Hbm<f32, 32, 64>) -> Hbm<f32, 32, 10> {
    let data = load(data_in[..]);
    let (i_p, i_f) = mgrid![0..32, 0..10];
    let indices = iota(5 * i_f + 0 * i_p, dtype = u32);
    let result = gather_flattened(data = data, indices = indices);
    let result_tensor = ndarray([32, 10], data.dtype, SharedHbm);
    store(result_tensor[..], result);
    result_tensor
}

#[test]
fn every_fifth_element_as_nki_s_example() {
    let x = rand_f32(Ix2(32, 64), 1, -1.0, 1.0);
    let out = nki_gather_flattened::host(&mut NeuronCore::default(), x.view()).unwrap();
    let want = Array2::from_shape_fn((32, 10), |(p, j)| x[[p, 5 * j]]);
    assert_eq!(out, want);
}

/// A `[P, 4, 16]` tile gathered by `[P, 3, 5]` indices from HBM into bf16, the partitions
/// masked to `p < KEEP` (the rest of the result zeroed first).
#[kernel(gather_3d(P = 128, KEEP = 100), gather_3d_all(P = 7, KEEP = 7))]
fn gather_by_loaded_indices<const P: usize, const KEEP: usize>(
    x: Hbm<f32, P, 4, 16>,
    idx: Hbm<u32, P, 3, 5>,
) -> Hbm<bf16, P, 3, 5> {
    let out = ndarray([P, 3, 5], bf16, SharedHbm);
    let data = load(x[..]);
    let ix = load(idx[..]);
    let r = zeros([P, 3, 5], bf16, Sbuf);
    let i_p = arange(P).p();
    r[[.., .., ..]] = gather_flattened(data, ix, dtype = bf16, mask = i_p < KEEP);
    store(out[..], r);
    out
}

/// Plain loops: `out[p, a, b] = bf16(x[p].flat[idx[p, a, b]])` for `p < keep`, else 0.
fn taken(x: &Array3<f32>, idx: &Array3<u32>, keep: usize) -> Array3<bf16> {
    Array3::from_shape_fn(idx.dim(), |(p, a, b)| {
        if p >= keep {
            return bf16::from_f32(0.0);
        }
        let f = idx[[p, a, b]] as usize;
        bf16::from_f32(x[[p, f / 16, f % 16]])
    })
}

#[test]
fn indices_from_hbm_in_three_dimensions_with_a_cast_and_a_mask() {
    let x = rand_f32(Ix3(128, 4, 16), 2, -100.0, 100.0);
    let idx = rand_int(Ix3(128, 3, 5), 3, 0, 63).mapv(|v| v as u32);
    let mut core = NeuronCore::default();
    let out = gather_3d::host(&mut core, x.view(), idx.view()).unwrap();
    assert_eq!(out, taken(&x, &idx, 100));
    let x = rand_f32(Ix3(7, 4, 16), 4, -100.0, 100.0);
    let idx = rand_int(Ix3(7, 3, 5), 5, 0, 63).mapv(|v| v as u32);
    let out = gather_3d_all::host(&mut core, x.view(), idx.view()).unwrap();
    assert_eq!(out, taken(&x, &idx, 7));
}

#[test]
fn an_index_past_the_partition_s_elements_is_a_launch_error() {
    let x = rand_f32(Ix3(7, 4, 16), 6, -1.0, 1.0);
    let mut idx = rand_int(Ix3(7, 3, 5), 7, 0, 63).mapv(|v| v as u32);
    idx[[4, 1, 2]] = 64;
    let err = gather_3d_all::host(&mut NeuronCore::default(), x.view(), idx.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("gather_flattened index 64 (element 7 of partition 4 of the indices)"),
        "{err}"
    );
}
