use nki::prelude::*;

#[kernel]
fn column_max(a: Hbm<f32, 128, 512>) -> Hbm<f32, 1, 512> {
    let out = ndarray([1, 512], f32, SharedHbm);
    let x = load(a[..]);
    let m = max(x, axis = 0, keepdims = true);
    store(out[..], m);
    out
}

fn main() {}
