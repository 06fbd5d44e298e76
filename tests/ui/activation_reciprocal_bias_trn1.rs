use nki::prelude::*;

#[kernel]
fn inverse_shifted(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 1>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let shift = load(b[..]);
    let y = activation(op = reciprocal, data = x, bias = shift);
    store(out[..], y);
    out
}

fn main() {}
