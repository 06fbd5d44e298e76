use nki::prelude::*;

#[kernel]
fn load_twice(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(x[[0..128, 0..512]]);
    let b = load(a);
    store(out[[0..128, 0..512]], b);
    out
}

fn main() {}
