use nki::prelude::*;

#[kernel]
fn unrolls_forever(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    for j in static_range(4294967296) {
        let a = load(x[[0..128, 0..512]]);
        store(out[[0..128, 0..512]], a);
    }
    out
}

#[kernel]
fn unrolls_too_much(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    for i in static_range(4096) {
        for j in static_range(4096) {
            let a = load(x[[0..128, 0..512]]);
            store(out[[0..128, 0..512]], a);
        }
    }
    out
}

fn main() {}
