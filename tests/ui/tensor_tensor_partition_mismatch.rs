use nki::prelude::*;

#[kernel]
fn add_rows(a: Hbm<f32, 128, 512>, b: Hbm<f32, 64, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let s = tensor_tensor(x, y, op = add);
    store(out[..], s);
    out
}

fn main() {}
