use nki::prelude::*;

#[kernel]
fn flip_heads(a: Hbm<f32, 128, 4, 32>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let x = load(a[..]);
    let t = transpose(x);
    store(out[..], copy(t));
    out
}

fn main() {}
