//! `UninitializedMemory::Nan`: a plain launch that computes from memory it did not write (a
//! tile half loaded, an output half stored) shows NaN there, where the default keeps what the
//! previous launch left; a kernel that writes before it reads computes the same bits either way.

use ndarray::{Array2, s};
use nki::UninitializedMemory;
use nki::prelude::*;

#[kernel]
fn half_loaded(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..32];
    let t = ndarray([128, 64], f32, Sbuf);
    t[[i_p, i_f]] = load(x[[i_p, i_f]]);
    store(out[..], t);
    out
}

#[kernel]
fn half_stored(x: Hbm<bf16, 128, 64>) -> Hbm<bf16, 128, 64> {
    let out = ndarray([128, 64], bf16, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..32];
    let t = load(x[[i_p, i_f]]);
    store(out[[i_p, i_f]], t);
    out
}

#[kernel]
fn scaled_sum(x: Hbm<f32, 128, 512>, y: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(x[..]);
    let b = load(y[..]);
    store(out[..], a * 2.0 + b);
    out
}

fn core(memory: UninitializedMemory) -> NeuronCore {
    NeuronCore::default()
        .with_strict(false)
        .with_uninitialized_memory(memory)
}

#[test]
fn reads_of_unwritten_tile_bytes_come_out_nan() {
    let x = Array2::from_shape_fn((128, 64), |(p, f)| (p * 64 + f) as f32);
    let got = half_loaded::host(&mut core(UninitializedMemory::Nan), x.view()).unwrap();
    assert_eq!(got.slice(s![.., ..32]), x.slice(s![.., ..32]));
    assert!(got.slice(s![.., 32..]).iter().all(|v| v.is_nan()));
    // By default a fresh core's SBUF holds zeros, and the stale half reads as data.
    let kept = half_loaded::host(&mut core(UninitializedMemory::Keep), x.view()).unwrap();
    assert!(kept.iter().all(|v| !v.is_nan()));
}

#[test]
fn unwritten_output_elements_come_out_nan() {
    let x = Array2::from_elem((128, 64), bf16::from_f32(1.5));
    let got = half_stored::host(&mut core(UninitializedMemory::Nan), x.view()).unwrap();
    assert!(
        got.slice(s![.., ..32])
            .iter()
            .all(|&v| v == bf16::from_f32(1.5))
    );
    assert!(got.slice(s![.., 32..]).iter().all(|v| v.is_nan()));
}

#[test]
fn kernels_that_write_before_they_read_compute_the_same_bits() {
    let x = Array2::from_shape_fn((128, 512), |(p, f)| (p as f32 - 60.0) / (f as f32 + 1.0));
    let y = Array2::from_shape_fn((128, 512), |(p, f)| ((p * 31 + f * 7) % 97) as f32 * 0.25);
    let want = Array2::from_shape_fn((128, 512), |(p, f)| x[[p, f]] * 2.0 + y[[p, f]]);
    for memory in [UninitializedMemory::Keep, UninitializedMemory::Nan] {
        let mut c = core(memory);
        for _ in 0..2 {
            let got = scaled_sum::host(&mut c, x.view(), y.view()).unwrap();
            assert_eq!(got, want, "{memory:?}");
        }
    }
}
