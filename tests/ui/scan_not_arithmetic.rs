use nki::prelude::*;

#[kernel]
fn running_any(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let r = tensor_tensor_scan(x, y, initial = 0.0, op0 = multiply, op1 = logical_or);
    store(out[..], r);
    out
}

fn main() {}
