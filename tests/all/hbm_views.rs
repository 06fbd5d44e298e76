//! Views of HBM tensors. Reshapes, NKI's `tensor.reshape(shape)`: the same elements, in the same
//! row-major order, under other dimensions; loads and stores through a reshape of an input or an
//! output against plain-loop references; element counts checked when the kernel compiles, or at
//! launch when the symbols decide; strict launches and the timing model see the tensor's own
//! elements. Partial indexing, NKI's `q[b, h]` then `[i_p, i_f]`: integers on the leading axes
//! leave a tensor of the remaining ones.

use crate::common;

use common::*;
use nki::ndarray::{Array1, Array2, Ix1, Ix2, Ix3};
use nki::prelude::*;

/// RMSNorm as NKI's tutorial writes it: the weight `g` [D] is viewed as (1, D) with
/// `g_tensor.reshape((1, D))` and indexed as a row.
#[kernel]
fn rmsnorm_reshaped_weight(a: Hbm<f32, N, 512>, g: Hbm<f32, 512>) -> Hbm<f32, N, 512> {
    let out = ndarray([N, 512], f32, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..512];
    let (iw, ig) = mgrid![0..1, 0..512];
    let g_row = g.reshape((1, 512));
    let g_tile = load(g_row[[iw, ig]]);
    for i in affine_range((N + 127) / 128) {
        let a_tile = load(a[[i * 128 + ix, iy]], mask = i * 128 + ix < N);
        let square_sum = sum(square(a_tile), axis = [1]);
        let rms_reciprocal = rsqrt(square_sum / 512);
        let out_tile = multiply(a_tile, rms_reciprocal);
        let g_bcast = broadcast_to(g_tile, [128, 512]);
        out_tile[..] = multiply(out_tile, g_bcast, mask = i * 128 + ix < N);
        store(out[[i * 128 + ix, iy]], out_tile, mask = i * 128 + ix < N);
    }
    out
}

/// Rows of `x` [N, 256] seen as [N, 2, 128] (two half rows each), the halves swapped, stored
/// through a reshape of the output to [N, 2, 128].
#[kernel]
fn swap_halves(x: Hbm<f32, N, 256>) -> Hbm<f32, N, 256> {
    let out = ndarray([N, 256], f32, SharedHbm);
    let x3 = x.reshape([N, 2, 128]);
    let out3 = out.reshape([N, 2, 128]);
    let (ip, jf) = mgrid![0..128, 0..128];
    for r in affine_range(N / 128) {
        for h in static_range(2) {
            let t = load(x3[[r * 128 + ip, h, jf]]);
            store(out3[[r * 128 + ip, 1 - h, jf]], t);
        }
    }
    out
}

/// A flat vector `v` [L] seen as [R, 64] rows, where `L` and `R` are different symbols: only a
/// launch can check that `L = 64·R`. `rows` [R, 64] gives `R`; the result is `v + rows`.
#[kernel]
fn add_flat_as_rows(v: Hbm<f32, L>, rows: Hbm<f32, R, 64>) -> Hbm<f32, R, 64> {
    let out = ndarray([R, 64], f32, SharedHbm);
    let v2 = v.reshape([R, 64]);
    let (ip, jf) = mgrid![0..128, 0..64];
    for i in affine_range((R + 127) / 128) {
        let a = load(v2[[i * 128 + ip, jf]], mask = i * 128 + ip < R);
        let b = load(rows[[i * 128 + ip, jf]], mask = i * 128 + ip < R);
        store(out[[i * 128 + ip, jf]], add(a, b), mask = i * 128 + ip < R);
    }
    out
}

/// A reshape of a reshape: [4, 8, 64] → [32, 64] → [2048], loaded as a [128, 16] tile.
#[kernel]
fn reshape_twice(x: Hbm<f32, 4, 8, 64>) -> Hbm<f32, 128, 16> {
    let out = ndarray([128, 16], f32, SharedHbm);
    let flat = x.reshape([32, 64]).reshape([2048]);
    let (ip, jf) = mgrid![0..128, 0..16];
    let t = load(flat[[ip * 16 + jf]]);
    store(out[[ip, jf]], t);
    out
}

/// NKI's `return dst.reshape(shape)`: the output is created as [2N, 64] rows (each row of `x`
/// [N, 128] split in two), filled, and returned as [N, 128], the caller's shape.
#[kernel]
fn split_rows_returned_reshaped(x: Hbm<f32, N, 128>) -> Hbm<f32, N, 128> {
    let dst = ndarray([N, 2, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..64];
    for r in affine_range(N / 128) {
        for h in static_range(2) {
            let t = load(x[[r * 128 + ip, h * 64 + jf]]);
            store(dst[[r * 128 + ip, h, jf]], multiply(t, 2.0));
        }
    }
    dst.reshape([N, 128])
}

/// Attention-style partial indexing: `q[[b, h]]` (NKI's `q[b, h]`) of `q` [B, H, S, 64] is the [S, 64] matrix of
/// batch `b`, head `h`, indexed again by row tiles; `out[b, h]` the same on the output. Each
/// element is doubled.
#[kernel]
fn double_per_head(q: Hbm<f32, B, 2, S, 64>) -> Hbm<f32, B, 2, S, 64> {
    let out = ndarray([B, 2, S, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..64];
    for b in affine_range(B) {
        for h in affine_range(2) {
            let qh = q[[b, h]];
            let oh = out[[b, h]];
            for s in affine_range(S / 128) {
                let t = load(qh[[s * 128 + ip, jf]]);
                store(oh[[s * 128 + ip, jf]], add(t, t));
            }
        }
    }
    out
}

/// NKI's interpolation kernels' pattern: `src.reshape((n * c, h, w))`, rows over the product of
/// two traced dimensions, and `dst.reshape((n, c, h, w))` returned. Each element plus one.
#[kernel]
fn rows_of_batches_and_channels(src: Hbm<f32, N, C, 64>) -> Hbm<f32, N, C, 64> {
    let rows = src.reshape([N * C, 64]);
    let dst = ndarray([N * C, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..64];
    for i in affine_range((N * C + 127) / 128) {
        let t = load(rows[[i * 128 + ip, jf]], mask = i * 128 + ip < N * C);
        store(
            dst[[i * 128 + ip, jf]],
            add(t, 1.0),
            mask = i * 128 + ip < N * C,
        );
    }
    dst.reshape([N, C, 64])
}

/// NKI's HBM-to-HBM `dma_copy(dst, src)`: rows of `x` copied to `out` in tiles, the last one
/// ragged (masked), with no tile in the kernel.
#[kernel]
fn hbm_to_hbm(x: Hbm<f32, N, 96>) -> Hbm<f32, N, 96> {
    let out = ndarray([N, 96], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..96];
    for i in affine_range((N + 127) / 128) {
        dma_copy(
            dst = out[[i * 128 + ip, jf]],
            src = x[[i * 128 + ip, jf]],
            mask = i * 128 + ip < N,
        );
    }
    out
}

/// `hbm_to_hbm` with NKI's `oob_mode` and `dge_mode` arguments, compiled for Trn2 (where
/// `hwdge` exists): the same transfers.
#[kernel(target = trn2)]
fn hbm_to_hbm_modes(x: Hbm<f32, N, 96>) -> Hbm<f32, N, 96> {
    let out = ndarray([N, 96], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..96];
    for i in affine_range((N + 127) / 128) {
        dma_copy(
            dst = out[[i * 128 + ip, jf]],
            src = x[[i * 128 + ip, jf]],
            mask = i * 128 + ip < N,
            oob_mode = oob_mode.error,
            dge_mode = nisa::dge_mode::hwdge,
        );
    }
    out
}

fn rms_reference(a: &Array2<f32>, g: &Array1<f32>) -> Array2<f64> {
    let mut out = Array2::zeros(a.raw_dim());
    for (mut o, row) in out.rows_mut().into_iter().zip(a.rows()) {
        let ms = row.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / 512.0;
        let r = 1.0 / ms.sqrt();
        for ((o, &x), &w) in o.iter_mut().zip(row).zip(g) {
            *o = f64::from(x) * r * f64::from(w);
        }
    }
    out
}

#[test]
fn a_weight_reshaped_to_a_row_matches_plain_loops() {
    for n in [128, 200, 384] {
        let a = rand_f32(Ix2(n, 512), n as u64, -2.0, 2.0);
        let g = rand_f32(Ix1(512), 7, -1.0, 1.0);
        let mut core = NeuronCore::default();
        let out = rmsnorm_reshaped_weight::host(&mut core, a.view(), g.view()).unwrap();
        let reference = rms_reference(&a, &g);
        for ((i, j), &x) in out.indexed_iter() {
            let want = reference[[i, j]];
            assert!(
                (f64::from(x) - want).abs() <= 1e-5 * want.abs().max(1.0),
                "N={n} [{i}, {j}]: {x} vs {want}"
            );
        }
    }
}

#[test]
fn loads_and_stores_through_reshapes_of_an_input_and_an_output_move_the_right_elements() {
    for n in [128, 512] {
        let x = rand_f32(Ix2(n, 256), n as u64 + 3, -100.0, 100.0);
        let mut core = NeuronCore::default();
        let out = swap_halves::host(&mut core, x.view()).unwrap();
        for ((i, j), &v) in out.indexed_iter() {
            let source = if j < 128 { j + 128 } else { j - 128 };
            assert_eq!(v.to_bits(), x[[i, source]].to_bits(), "N={n} [{i}, {j}]");
        }
    }
}

#[test]
fn a_reshape_between_different_symbols_is_checked_at_launch() {
    let r = 200;
    let v = rand_f32(Ix1(r * 64), 11, -8.0, 8.0);
    let rows = rand_f32(Ix2(r, 64), 12, -8.0, 8.0);
    let mut core = NeuronCore::default();
    let out = add_flat_as_rows::host(&mut core, v.view(), rows.view()).unwrap();
    for ((i, j), &x) in out.indexed_iter() {
        let want = f64::from(v[i * 64 + j]) + f64::from(rows[[i, j]]);
        assert_eq!(f64::from(x), f64::from(want as f32), "[{i}, {j}]");
    }

    // One element short: the reshape's [R, 64] holds 12800 elements, `v` 12799.
    let short = Array1::<f32>::zeros(r * 64 - 1);
    let err = add_flat_as_rows::host(&mut core, short.view(), rows.view()).unwrap_err();
    let msg = err.to_string();
    let LaunchError::Reshape {
        elements, reshaped, ..
    } = err
    else {
        panic!("{msg}")
    };
    assert_eq!((elements, reshaped), (12799, 12800), "{msg}");
    assert!(msg.contains("v.reshape([R, 64])"), "{msg}");
    assert!(msg.contains("R = 200"), "{msg}");
    assert!(msg.contains("L = 12799"), "{msg}");
}

#[test]
fn a_reshape_of_a_reshape_indexes_the_tensors_elements_in_row_major_order() {
    let x = rand_f32(Ix3(4, 8, 64), 5, -50.0, 50.0);
    let mut core = NeuronCore::default();
    let out = reshape_twice::host(&mut core, x.view()).unwrap();
    let flat: Vec<f32> = x.iter().copied().collect();
    for ((i, j), &v) in out.indexed_iter() {
        assert_eq!(v.to_bits(), flat[i * 16 + j].to_bits(), "[{i}, {j}]");
    }
}

#[test]
fn an_output_returned_through_a_reshape_has_the_reshapes_dimensions() {
    let program = split_rows_returned_reshaped::KERNEL.program();
    assert_eq!(program.outputs()[0].shape.len(), 2);
    let x = rand_f32(Ix2(256, 128), 4, -10.0, 10.0);
    let mut core = NeuronCore::default();
    let out = split_rows_returned_reshaped::host(&mut core, x.view()).unwrap();
    assert_eq!(out.dim(), (256, 128));
    for ((i, j), &v) in out.indexed_iter() {
        assert_eq!(f64::from(v), 2.0 * f64::from(x[[i, j]]), "[{i}, {j}]");
    }
    let listing = program.to_string();
    assert!(
        listing.contains("reshape dst.reshape([N, 2, 64]) = dst[N, 2, 64]"),
        "{listing}"
    );
}

#[test]
fn a_tensor_indexed_on_its_leading_axes_is_indexed_again_on_the_rest() {
    use nki::ndarray::{Array4, Ix4};
    let (b, s) = (3, 256);
    let q: Array4<f32> = rand_f32(Ix4(b, 2, s, 64), 21, -100.0, 100.0);
    let mut core = NeuronCore::default();
    let out = double_per_head::host(&mut core, q.view()).unwrap();
    for (ix, &v) in out.indexed_iter() {
        assert_eq!(f64::from(v), 2.0 * f64::from(q[ix]), "{ix:?}");
    }
    // The accesses index every axis of the tensor: two leading integers, then the tile.
    let listing = double_per_head::KERNEL.program().to_string();
    assert!(listing.contains("q:f32[b, h, "), "{listing}");
}

#[test]
fn a_product_of_traced_dimensions_sizes_a_reshape_a_loop_and_a_mask() {
    use nki::ndarray::Array3;
    for (n, c) in [(2, 64), (3, 50), (1, 1)] {
        let src: Array3<f32> = rand_f32(Ix3(n, c, 64), (n * c) as u64, -9.0, 9.0);
        let mut core = NeuronCore::default();
        let out = rows_of_batches_and_channels::host(&mut core, src.view()).unwrap();
        assert_eq!(out.dim(), (n, c, 64));
        for (ix, &v) in out.indexed_iter() {
            // One f32 addition, rounded to nearest even.
            assert_eq!(v.to_bits(), (src[ix] + 1.0).to_bits(), "N={n} C={c} {ix:?}");
        }
    }
    let program = rows_of_batches_and_channels::KERNEL.program();
    assert!(
        program.symbols().contains(&"C * N"),
        "{:?}",
        program.symbols()
    );
}

#[test]
fn an_hbm_to_hbm_dma_copy_moves_every_element() {
    for n in [128, 300] {
        let x = rand_f32(Ix2(n, 96), n as u64, -1e6, 1e6);
        let mut core = NeuronCore::default();
        let out = hbm_to_hbm::host(&mut core, x.view()).unwrap();
        assert_eq!(out, x, "N={n}");
        let mut core = NeuronCore::new(Target::Trn2);
        let out = hbm_to_hbm_modes::host(&mut core, x.view()).unwrap();
        assert_eq!(out, x, "N={n}, with oob_mode and dge_mode");
    }
    // The modes change nothing the program says.
    let body = |k: &Kernel<'_>| {
        let listing = k.program().to_string();
        listing.lines().skip(1).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(
        body(&hbm_to_hbm::KERNEL),
        body(&hbm_to_hbm_modes::KERNEL).replace("hbm_to_hbm_modes", "hbm_to_hbm")
    );
}

#[test]
fn the_listing_names_each_reshape_and_the_accesses_through_it() {
    let listing = swap_halves::KERNEL.program().to_string();
    assert!(
        listing.contains("reshape x.reshape([N, 2, 128]) = x[N, 2, 128]"),
        "{listing}"
    );
    assert!(
        listing.contains("out.reshape([N, 2, 128]):f32["),
        "{listing}"
    );
}

#[test]
fn a_strict_launch_sees_an_output_written_through_a_reshape_as_written() {
    let x = DeviceTensor::from_array(&rand_f32(Ix2(256, 256), 9, -1.0, 1.0)).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&[256, 256]).unwrap();
    let args = [x.arg()];
    let mut outs = [out.arg_mut()];
    let bound = swap_halves::KERNEL.bind(&args, &mut outs).unwrap();
    NeuronCore::default().execute_strict(bound).unwrap();
}

#[test]
fn the_timing_model_counts_the_bytes_moved_through_reshapes() {
    use nki::timing::{Mode, Timing};
    let n = 512usize;
    let x = DeviceTensor::<f32>::zeros(&[n, 256]).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&[n, 256]).unwrap();
    let mut core = NeuronCore::default();
    let s = Timing::new()
        .mode(Mode::TimingOnly)
        .run(
            &mut core,
            &swap_halves::KERNEL,
            &[x.arg()],
            &mut [out.arg_mut()],
        )
        .unwrap();
    // Every element is loaded once and stored once.
    let bytes = (n * 256 * 4) as u64;
    let profile = s.profile();
    assert_eq!(
        (profile.hbm_read_bytes, profile.hbm_write_bytes),
        (bytes, bytes)
    );
}
