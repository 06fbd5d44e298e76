use nki::prelude::*;

#[kernel]
fn scaled_exp(a: Hbm<f32, 128, 512>, s: Hbm<bf16, 128, 1>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let scale = load(s[..]);
    let y = activation(op = exp, data = x, scale = scale);
    store(out[..], y);
    out
}

fn main() {}
