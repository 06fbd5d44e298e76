use nki::prelude::*;

#[kernel]
fn biased_gelu(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let bias = load(b[..]);
    let y = activation(op = gelu, data = x, bias = bias);
    store(out[..], y);
    out
}

fn main() {}
