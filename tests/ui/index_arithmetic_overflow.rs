use nki::prelude::*;

#[kernel]
fn huge_stride(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let t = load(x[[i_p, i_f * 4294967296 * 4294967296]]);
    store(out[[i_p, i_f]], t);
    out
}

#[kernel]
fn huge_grid(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..4294967297, 0..512];
    let t = load(x[[i_p, i_f]]);
    store(out[[i_p, i_f]], t);
    out
}

#[kernel]
fn huge_slice(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(x[[0..4294967424, 0..512]]);
    store(out[[0..128, 0..512]], t);
    out
}

#[kernel]
fn huge_offset(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let t = load(x[[i_p + 9223372036854775807 + 9223372036854775807, i_f]]);
    store(out[[i_p, i_f]], t);
    out
}

fn main() {}
