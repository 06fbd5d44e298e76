use nki::prelude::*;

#[kernel]
fn scaled(a: Hbm<f32, 128, 512>, w: Hbm<f32, 128, 256>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let g = load(w[..]);
    let y = x * g;
    store(out[..], y);
    out
}

fn main() {}
