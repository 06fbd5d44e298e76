use nki::prelude::*;

#[kernel]
fn half_store(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(x[[0..128, 0..256]]);
    store(out[[0..128, 0..512]], a);
    out
}

fn main() {}
