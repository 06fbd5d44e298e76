use nki::prelude::*;

#[kernel(target = trn2)]
fn relu_on_act(a: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = tensor_scalar(x, op0 = maximum, operand0 = 0.0, engine = scalar);
    store(out[..], y);
    out
}

fn main() {}
