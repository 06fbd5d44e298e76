use nki::prelude::*;

#[kernel]
fn shifted(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let s = tensor_scalar(x, op0 = add, operand0 = y);
    store(out[..], s);
    out
}

fn main() {}
