use nki::prelude::*;

#[kernel]
fn row_quotient(a: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 1> {
    let out = ndarray([128, 1], f32, SharedHbm);
    let x = load(a[..]);
    let q = tensor_reduce(op = divide, data = x, axis = 1, keepdims = true);
    store(out[..], q);
    out
}

fn main() {}
