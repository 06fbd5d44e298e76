use nki::prelude::*;

// Both iterations write rows 0..128 of `out`: which one lands is not defined.
#[kernel]
fn iterations_store_the_same_rows(x: Hbm<f32, 256, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    for i in affine_range(2) {
        let t = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        store(out[[0..128, 0..512]], t);
    }
    out
}

// A sequential loop orders them (the last one lands), and a masked store can depend on `i`.
#[kernel]
fn ordered_or_masked(x: Hbm<f32, 256, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    for i in sequential_range(2) {
        let t = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        store(out[[0..128, 0..512]], t);
    }
    for i in affine_range(2) {
        let t = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        store(out[[0..128, 0..512]], t, mask = i < 1);
    }
    out
}

fn main() {}
