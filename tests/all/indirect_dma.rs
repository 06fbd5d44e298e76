//! NKI's indirect DMA: `load(src[idx, i_f])` gathers the HBM rows a tile of indices names,
//! `store(dst[idx, i_f], t)` scatters, `atomic_rmw(dst[idx, i_f], value, op = add)` adds;
//! against plain loops over the same indices (duplicates, a ragged last tile, a block axis
//! before the indexed one), and the run-time error of an index outside its axis.

use crate::common;

use common::*;
use nki::ndarray::{Array1, Array2, Ix2};
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
        let i = Array1::from(idx.clone());
        let out = gather_64_of_128::host(&mut core, data.view(), i.view()).unwrap();
        assert_eq!(out, gathered(&data, &idx));
    }
}

#[test]
fn a_gather_may_name_a_row_many_times_and_read_a_short_tensor() {
    let data = rand_f32(Ix2(7, 512), 2, -1.0, 1.0);
    let idx: Vec<i32> = (0..128).map(|i| (i * i + 3) % 7).collect();
    let i = Array1::from(idx.clone());
    let out = gather_128_of_7::host(&mut NeuronCore::default(), data.view(), i.view()).unwrap();
    assert_eq!(out, gathered(&data, &idx));
}

#[test]
fn an_index_outside_the_tensor_is_a_launch_error_naming_it() {
    let data = rand_f32(Ix2(128, 512), 3, -1.0, 1.0);
    let mut idx: Vec<i32> = (0..64).collect();
    idx[17] = 128;
    let i = Array1::from(idx);
    let err = gather_64_of_128::host(&mut NeuronCore::default(), data.view(), i.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("indirect index 128"), "{err}");
    assert!(err.contains("partition 17"), "{err}");
    assert!(err.contains("`data_tensor`"), "{err}");
    let mut idx: Vec<i32> = (0..64).collect();
    idx[63] = -1;
    let i = Array1::from(idx);
    let err = gather_64_of_128::host(&mut NeuronCore::default(), data.view(), i.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("indirect index -1"), "{err}");
}

/// NKI's `example_indirect_save_2`: rows `2 i` of a `[128, 512]` output from an `iota` index.
#[kernel]
fn indirect_save_2(in_tensor: Hbm<f32, 64, 512>) -> Hbm<f32, 128, 512> {
    let data_tensor = ndarray([128, 512], in_tensor.dtype, SharedHbm);
    let i_f = arange(512).x();
    let data_tile = load(in_tensor[..]);
    let idx_expr = 2 * arange(64).p();
    let idx_tile = iota(idx_expr, dtype = i32);
    store(data_tensor[[idx_tile, i_f]], data_tile[[0..64, 0..512]]);
    data_tensor
}

/// A scatter of `N` rows by indices loaded from HBM, into a `[R, 512]` output.
#[kernel(scatter_128(R = 128, N = 128), scatter_100_into_7(R = 7, N = 100))]
fn scatter_rows<const R: usize, const N: usize>(
    in_tensor: Hbm<f32, N, 512>,
    idx_tensor: Hbm<i32, N, 1>,
) -> Hbm<f32, R, 512> {
    let out = ndarray([R, 512], in_tensor.dtype, SharedHbm);
    let i_p = arange(N).p();
    let i_f = arange(512).x();
    let idx = load(idx_tensor[..]);
    let t = load(in_tensor[..]);
    store(out[[idx[[i_p, 0]], i_f]], t);
    out
}

/// Plain loops: `out[idx[k], :] = x[k, :]` in partition order, over `base`.
fn scattered(base: Array2<f32>, x: &Array2<f32>, idx: &[i32]) -> Array2<f32> {
    let mut out = base;
    for (k, &r) in idx.iter().enumerate() {
        for j in 0..x.ncols() {
            out[[r as usize, j]] = x[[k, j]];
        }
    }
    out
}

#[test]
fn a_scatter_writes_the_rows_its_indices_name() {
    let x = rand_f32(Ix2(64, 512), 4, -3.0, 3.0);
    // Only the even rows are written: allowed by design, as NKI's test reads only those.
    let mut core = NeuronCore::default().with_unwritten_outputs(true);
    let out = indirect_save_2::host(&mut core, x.view()).unwrap();
    for k in 0..64 {
        for j in 0..512 {
            assert_eq!(out[[2 * k, j]], x[[k, j]], "[{k}, {j}]");
        }
    }
    // A permutation of every row: strict mode sees the whole output written.
    let x = rand_f32(Ix2(128, 512), 5, -3.0, 3.0);
    let idx: Vec<i32> = (0..128).map(|i| (i * 45 + 7) % 128).collect();
    let i = Array2::from_shape_vec((128, 1), idx.clone()).unwrap();
    let out = scatter_128::host(&mut NeuronCore::default(), x.view(), i.view()).unwrap();
    assert_eq!(out, scattered(Array2::zeros((128, 512)), &x, &idx));
}

#[test]
fn strict_mode_flags_two_partitions_scattered_to_one_row() {
    let x = rand_f32(Ix2(100, 512), 6, -3.0, 3.0);
    let idx: Vec<i32> = (0..100).map(|i| (i * 3) % 7).collect();
    let i = Array2::from_shape_vec((100, 1), idx.clone()).unwrap();
    let err = scatter_100_into_7::host(&mut NeuronCore::default(), x.view(), i.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("scatters partitions 0 and 7 of its tile to row 0 of output `out`"),
        "{err}"
    );
    // Without strict mode, the rows keep the last partition's values, in partition order.
    let mut core = NeuronCore::default().with_strict(false);
    let out = scatter_100_into_7::host(&mut core, x.view(), i.view()).unwrap();
    assert_eq!(out, scattered(Array2::zeros((7, 512)), &x, &idx));
}

/// NKI's `atomic_rmw_indirect_indices`: the input copied to the output, then `value` added to
/// the rows `indices` name.
#[kernel(atomic_rmw_128(N = 128, M = 512), atomic_rmw_100(N = 100, M = 64))]
fn atomic_rmw_indirect_indices<const N: usize, const M: usize>(
    in_tensor: Hbm<f32, N, M>,
    indices_tensor: Hbm<i32, N, 1>,
    value_tensor: Hbm<f32, N, M>,
) -> Hbm<f32, N, M> {
    let rmw_tensor = ndarray(in_tensor.shape, in_tensor.dtype, SharedHbm);
    let in_tile = load(in_tensor[..]);
    store(rmw_tensor[..], in_tile);
    let value = load(value_tensor[..]);
    let indices_tile = load(indices_tensor[..]);
    let ix = arange(M).x();
    atomic_rmw(rmw_tensor[[indices_tile, ix]], value = value, op = add);
    rmw_tensor
}

/// Plain loops: `out = x`, then `out[idx[k], :] += v[k, :]` in fp32, in partition order.
fn accumulated(x: &Array2<f32>, v: &Array2<f32>, idx: &[i32]) -> Array2<f32> {
    let mut out = x.clone();
    for (k, &r) in idx.iter().enumerate() {
        for j in 0..x.ncols() {
            out[[r as usize, j]] += v[[k, j]];
        }
    }
    out
}

#[test]
fn atomic_rmw_adds_and_duplicate_indices_accumulate() {
    let x = rand_f32(Ix2(128, 512), 7, -1.0, 1.0);
    let v = rand_f32(Ix2(128, 512), 8, -1.0, 1.0);
    // NKI's test: every row once.
    let idx: Vec<i32> = (0..128).collect();
    let i = Array2::from_shape_vec((128, 1), idx.clone()).unwrap();
    let mut core = NeuronCore::default();
    let out = atomic_rmw_128::host(&mut core, x.view(), i.view(), v.view()).unwrap();
    assert_eq!(out, accumulated(&x, &v, &idx));
    // Rows named many times: each partition's values added in partition order.
    let x = rand_f32(Ix2(100, 64), 9, -1.0, 1.0);
    let v = rand_f32(Ix2(100, 64), 10, -1.0, 1.0);
    let idx: Vec<i32> = (0..100).map(|i| (i * i) % 13).collect();
    let i = Array2::from_shape_vec((100, 1), idx.clone()).unwrap();
    let out = atomic_rmw_100::host(&mut core, x.view(), i.view(), v.view()).unwrap();
    assert_eq!(out, accumulated(&x, &v, &idx));
}

/// A gather whose index tile is written on its first 32 partitions only.
#[kernel]
fn gather_with_half_written_indices(
    data: Hbm<f32, 128, 64>,
    idx_tensor: Hbm<i32, 64, 1>,
) -> Hbm<f32, 64, 64> {
    let out = ndarray([64, 64], f32, SharedHbm);
    let idx = ndarray([64, 1], i32, Sbuf);
    idx[[0..32, 0..1]] = load(idx_tensor[[0..32, 0..1]]);
    let t = load(data[[idx, arange(64).x()]]);
    store(out[..], t);
    out
}

#[test]
fn strict_mode_refuses_indices_no_instruction_wrote() {
    let data = rand_f32(Ix2(128, 64), 11, -1.0, 1.0);
    let i = Array2::<i32>::zeros((64, 1));
    let mut core = NeuronCore::default().with_strict(true);
    let err = gather_with_half_written_indices::host(&mut core, data.view(), i.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the row indices of an indirect DMA must be defined"),
        "{err}"
    );
}

/// The same `[64, 512]` rows read directly: what the indirect gather is timed against.
#[kernel]
fn direct_load_64(data_tensor: Hbm<f32, 128, 512>, idx_tensor: Hbm<i32, 64>) -> Hbm<f32, 64, 512> {
    let out_tensor = ndarray([64, 512], data_tensor.dtype, SharedHbm);
    let i_p = arange(64).p();
    let i_f = arange(512).x();
    let idx_tile = load(idx_tensor[i_p]);
    let data_tile = load(data_tensor[[i_p, i_f]]);
    store(out_tensor[..], data_tile);
    let _ = idx_tile;
    out_tensor
}

#[test]
fn the_timing_model_moves_the_gathered_rows_and_charges_their_descriptors() {
    use nki::timing::{Mode, Timing};
    let data = DeviceTensor::from_array(&rand_f32(Ix2(128, 512), 12, -1.0, 1.0)).unwrap();
    let idx: Vec<i32> = (0..64).map(|i| (i * 7) % 128).collect();
    let idx = DeviceTensor::from_array(&Array1::from(idx)).unwrap();
    let mut core = NeuronCore::default();
    let mut latency = Vec::new();
    for kernel in [&gather_64_of_128::KERNEL, &direct_load_64::KERNEL] {
        for mode in [Mode::TimingOnly, Mode::Compute] {
            let mut out = DeviceTensor::<f32>::zeros(&[64, 512]).unwrap();
            let s = Timing::new()
                .mode(mode)
                .run(
                    &mut core,
                    kernel,
                    &[data.arg(), idx.arg()],
                    &mut [out.arg_mut()],
                )
                .unwrap();
            let p = s.profile();
            // The index column, then 64 rows of 2 KiB; the same rows stored.
            assert_eq!(p.hbm_read_bytes, 64 * 4 + 64 * 512 * 4);
            assert_eq!(p.hbm_write_bytes, 64 * 512 * 4);
            latency.push(p.latency_us);
        }
    }
    // Timing only and computing give one schedule; the gather's index fetch costs more than
    // the direct load of the same rows.
    assert_eq!(latency[0], latency[1]);
    assert_eq!(latency[2], latency[3]);
    assert!(latency[0] > latency[2], "{latency:?}");
}

/// Two iterations of an `affine_range` loop scattering to the rows one index tile names.
#[kernel]
fn scatter_twice(x: Hbm<f32, 64, 32>, idx_tensor: Hbm<i32, 64, 1>) -> Hbm<f32, 64, 32> {
    let out = ndarray([64, 32], f32, SharedHbm);
    let idx = load(idx_tensor[..]);
    let i_f = arange(32).x();
    for k in affine_range(2) {
        let t = load(x[[0..64, 0..32]]);
        store(out[[idx, i_f]], t);
        let _ = k;
    }
    out
}

#[test]
fn strict_mode_flags_scatters_of_two_iterations_to_one_row() {
    let x = rand_f32(Ix2(64, 32), 13, -1.0, 1.0);
    let idx: Vec<i32> = (0..64).rev().collect();
    let i = Array2::from_shape_vec((64, 1), idx).unwrap();
    let err = scatter_twice::host(
        &mut NeuronCore::default().with_strict(true),
        x.view(),
        i.view(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("that iteration k = 0 wrote"), "{err}");
}
