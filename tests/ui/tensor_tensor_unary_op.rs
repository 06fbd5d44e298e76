use nki::prelude::*;

#[kernel]
fn magnitude(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let m = tensor_tensor(x, y, op = abs);
    store(out[..], m);
    out
}

fn main() {}
