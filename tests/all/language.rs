//! The language's constructs end to end, each kernel checked against an `ndarray` reference:
//! arange and slice indexing, casts, PSUM stores, `matmul` without `transpose_x`,
//! `nc_transpose`, loop kinds, assignment into tile views, `full`, several outputs.

use nki::ndarray::{Array2, s};
use nki::prelude::*;

fn ramp_f32(rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, j)| ((i * 7 + j * 3) % 23) as f32 - 11.0)
}

fn ramp_bf16(rows: usize, cols: usize) -> Array2<bf16> {
    ramp_f32(rows, cols).mapv(bf16::from_f32)
}

/// `arange` indices with a loop offset, and `ds` slices over a symbolic free dimension.
#[kernel]
fn copy_columns(x: Hbm<f32, 128, N>) -> Hbm<f32, 128, N> {
    let out = ndarray([128, N], f32, SharedHbm);
    let i_p = arange(128).p();
    let i_f = arange(256).x();
    for j in affine_range(N / 256) {
        let t = load(x[[i_p, j * 256 + i_f]]);
        store(out[[0..128, ds(j * 256, 256)]], t);
    }
    out
}

#[test]
fn arange_and_ds_indexing() {
    let x = ramp_f32(128, 768);
    let mut core = NeuronCore::default();
    let out = copy_columns::host(&mut core, x.view()).unwrap();
    assert_eq!(out, x);
    // N must be a multiple of 256.
    let bad = ramp_f32(128, 300);
    let e = copy_columns::host(&mut core, bad.view())
        .unwrap_err()
        .to_string();
    assert!(e.contains("N % 256 == 0"), "{e}");
}

/// A load that casts bf16 to f32, a copy that rounds back to bf16, two outputs.
#[kernel]
fn casts(x: Hbm<bf16, 128, 64>, y: Hbm<f32, 128, 64>) -> (Hbm<f32, 128, 64>, Hbm<bf16, 128, 64>) {
    let wide = ndarray([128, 64], f32, SharedHbm);
    let narrow = ndarray([128, 64], bf16, SharedHbm);
    let a = load(x[..], dtype = f32);
    store(wide[..], a);
    let b = load(y[..]);
    store(narrow[..], copy(b, bf16));
    (wide, narrow)
}

#[test]
fn loads_and_copies_cast_with_round_to_nearest_even() {
    let x = ramp_bf16(128, 64);
    let y = Array2::from_shape_fn((128, 64), |(i, j)| 1.0 + (i * 64 + j) as f32 * 1e-3);
    let mut core = NeuronCore::default();
    let (wide, narrow) = casts::host(&mut core, x.view(), y.view()).unwrap();
    assert_eq!(wide, x.mapv(f32::from));
    // half's from_f32 rounds to nearest even (the reference for normal values).
    assert_eq!(narrow, y.mapv(bf16::from_f32));
}

/// `matmul(x, y)` without `transpose_x`: x is transposed on TensorE first. The PSUM result is
/// stored directly (through an implicit SBUF copy).
#[kernel]
fn plain_matmul(x: Hbm<bf16, 64, 128>, y: Hbm<bf16, 128, 256>) -> Hbm<f32, 64, 256> {
    let out = ndarray([64, 256], f32, SharedHbm);
    let a = load(x[..]);
    let b = load(y[..]);
    let r = matmul(a, b);
    store(out[..], r);
    out
}

#[test]
fn matmul_without_transpose_x() {
    let x = ramp_bf16(64, 128);
    let y = ramp_bf16(128, 256);
    let mut core = NeuronCore::default();
    let out = plain_matmul::host(&mut core, x.view(), y.view()).unwrap();
    // Small integers: exact in bf16 and in f32 accumulation.
    let reference = x.mapv(f32::from).dot(&y.mapv(f32::from));
    assert_eq!(out, reference);
}

/// `nc_transpose`, and a copy into a view of a pre-declared tile.
#[kernel]
fn transpose_halves(x: Hbm<f32, 128, 64>) -> Hbm<f32, 64, 256> {
    let out = ndarray([64, 256], f32, SharedHbm);
    let a = load(x[..]);
    let t = nc_transpose(a);
    let wide = ndarray([64, 256], f32, Sbuf);
    wide[[0..64, 0..128]] = copy(t);
    wide[[0..64, 128..256]] = copy(t);
    store(out[..], wide);
    out
}

#[test]
fn transpose_and_assignment_into_views() {
    let x = ramp_f32(128, 64);
    let mut core = NeuronCore::default();
    let out = transpose_halves::host(&mut core, x.view()).unwrap();
    assert_eq!(out.slice(s![.., 0..128]), x.t());
    assert_eq!(out.slice(s![.., 128..256]), x.t());
}

/// `full`, `sequential_range` accumulation across iterations, `static_range` unrolling.
#[kernel]
fn loops(
    x: Hbm<bf16, 128, 128>,
    y: Hbm<bf16, 128, 512>,
) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 512>) {
    let acc_out = ndarray([128, 512], f32, SharedHbm);
    let fill_out = ndarray([128, 512], f32, SharedHbm);
    let a = load(x[..]);
    let b = load(y[..]);
    let acc = zeros([128, 512], f32, Psum);
    for _ in sequential_range(3) {
        acc += nc_matmul(a, b);
    }
    store(acc_out[..], acc);
    let f = full([128, 512], 0.5, f32, Sbuf);
    for j in static_range(2) {
        store(
            fill_out[[0..128, j * 256..(j + 1) * 256]],
            f[[0..128, 0..256]],
        );
    }
    (acc_out, fill_out)
}

#[test]
fn loop_kinds_full_and_accumulation() {
    let x = ramp_bf16(128, 128);
    let y = ramp_bf16(128, 512);
    let mut core = NeuronCore::default();
    let (acc, fill) = loops::host(&mut core, x.view(), y.view()).unwrap();
    let once = x.mapv(f32::from).t().dot(&y.mapv(f32::from));
    assert_eq!(acc, once.mapv(|v| 3.0 * v));
    assert!(fill.iter().all(|&v| v == 0.5));
}

/// Copies within SBUF and within PSUM, large enough to be split between two host threads,
/// between tiles at different offsets and with a cast.
#[kernel]
fn copies_within(x: Hbm<f32, 128, 512>) -> (Hbm<bf16, 128, 512>, Hbm<f32, 128, 384>) {
    let out = ndarray([128, 512], bf16, SharedHbm);
    let out2 = ndarray([128, 384], f32, SharedHbm);
    let pad = zeros([128, 40], f32, Sbuf);
    let a = load(x[..]);
    let b = copy(a, bf16);
    store(out[..], b);
    let p = ndarray([128, 512], f32, Psum);
    p[..] = copy(a);
    let q = ndarray([128, 384], f32, Psum);
    q[..] = copy(p[[0..128, 128..512]]);
    store(out2[..], q);
    store(out[[0..128, 0..40]], copy(pad, bf16));
    (out, out2)
}

#[test]
fn copies_within_one_memory_on_two_threads_match_one_thread_and_the_reference() {
    let x = Array2::from_shape_fn((128, 512), |(i, j)| (i * 512 + j) as f32 * 0.37 - 9000.0);
    let mut serial = NeuronCore::default()
        .with_strict(false)
        .with_host_threads(1);
    let mut parallel = NeuronCore::default()
        .with_strict(false)
        .with_host_threads(2);
    let (a1, b1) = copies_within::host(&mut serial, x.view()).unwrap();
    let (a2, b2) = copies_within::host(&mut parallel, x.view()).unwrap();
    let bits = |a: &Array2<bf16>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a1), bits(&a2));
    assert_eq!(b1, b2);
    let mut expected = x.mapv(bf16::from_f32);
    expected.slice_mut(s![.., 0..40]).fill(bf16::ZERO);
    assert_eq!(bits(&a2), bits(&expected));
    assert_eq!(b2, x.slice(s![.., 128..512]));
}
