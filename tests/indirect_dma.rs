//! NKI's indirect DMA: `load(src[idx, i_f])` gathers the HBM rows a tile of indices names,
//! `store(dst[idx, i_f], t)` scatters, `atomic_rmw(dst[idx, i_f], value, op = add)` adds;
//! against plain loops over the same indices (duplicates, a ragged last tile, a block axis
//! before the indexed one), and the run-time error of an index outside its axis.

mod common;

use common::*;
use nki::ndarray::{Array2, Array3, Ix2, Ix3};
use nki::prelude::*;

/// NKI's `example_indirect_load_1`: the indices loaded from HBM, `N` rows of `[R, 512]`.
#[kernel(gather_64_of_128(R = 128, N = 64), gather_128_of_7(R = 7, N = 128))]
fn indirect_load_1<const R: usize, const N: usize>(
    data_tensor: Hbm<f32, R, 512>,
    idx_tensor: Hbm<i32, N>,
) -> Hbm<f32, N, 512> {
    let out_tensor = ndarray([N, 512], data_tensor.dtype, SharedHbm);
    let i_p = arange(N).p();
    let i_f = arange(512).x();
    let idx_tile = load(idx_tensor[i_p]);
    let data_tile = load(data_tensor[[idx_tile[[i_p, 0]], i_f]]);
    store(out_tensor[..], data_tile);
    out_tensor
}

/// Plain loops: `out[k, :] = data[idx[k], :]`.
fn gathered(data: &Array2<f32>, idx: &[i32]) -> Array2<f32> {
    let mut out = Array2::<f32>::zeros((idx.len(), data.ncols()));
    for (k, &r) in idx.iter().enumerate() {
        for j in 0..data.ncols() {
            out[[k, j]] = data[[r as usize, j]];
        }
    }
    out
}

#[test]
fn a_gather_reads_the_rows_its_indices_name() {
    let data = rand_f32(Ix2(128, 512), 1, -10.0, 10.0);
    // NKI's test indices (0, 2, 4, ...), then a permutation with repeats.
    let even: Vec<i32> = (0..64).map(|i| 2 * i).collect();
    let mixed: Vec<i32> = (0..64).map(|i| (i * 37 + 5) % 100).collect();
    let mut core = NeuronCore::default();
    for idx in [even, mixed] {
        let i = nki::ndarray::Array1::from(idx.clone());
        let out = gather_64_of_128::host(&mut core, data.view(), i.view()).unwrap();
        assert_eq!(out, gathered(&data, &idx));
    }
}

#[test]
fn a_gather_may_name_a_row_many_times_and_read_a_short_tensor() {
    let data = rand_f32(Ix2(7, 512), 2, -1.0, 1.0);
    let idx: Vec<i32> = (0..128).map(|i| (i * i + 3) % 7).collect();
    let i = nki::ndarray::Array1::from(idx.clone());
    let out = gather_128_of_7::host(&mut NeuronCore::default(), data.view(), i.view()).unwrap();
    assert_eq!(out, gathered(&data, &idx));
}

#[test]
fn an_index_outside_the_tensor_is_a_launch_error_naming_it() {
    let data = rand_f32(Ix2(128, 512), 3, -1.0, 1.0);
    let mut idx: Vec<i32> = (0..64).collect();
    idx[17] = 128;
    let i = nki::ndarray::Array1::from(idx);
    let err = gather_64_of_128::host(&mut NeuronCore::default(), data.view(), i.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("indirect index 128"), "{err}");
    assert!(err.contains("partition 17"), "{err}");
    assert!(err.contains("`data_tensor`"), "{err}");
    let mut idx: Vec<i32> = (0..64).collect();
    idx[63] = -1;
    let i = nki::ndarray::Array1::from(idx);
    let err = gather_64_of_128::host(&mut NeuronCore::default(), data.view(), i.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("indirect index -1"), "{err}");
}
