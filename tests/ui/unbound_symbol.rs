use nki::prelude::*;

#[kernel]
fn free_dim(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, N> {
    let out = ndarray([128, N], f32, SharedHbm);
    let a = load(x[[0..128, 0..512]]);
    store(out[[0..128, 0..512]], a);
    out
}

fn main() {}
