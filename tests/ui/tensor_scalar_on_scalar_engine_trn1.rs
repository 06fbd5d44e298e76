use nki::prelude::*;

#[kernel]
fn halved_on_act(a: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = tensor_scalar(x, op0 = multiply, operand0 = 0.5, engine = scalar);
    store(out[..], y);
    out
}

fn main() {}
