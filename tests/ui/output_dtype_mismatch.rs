use nki::prelude::*;

#[kernel]
fn widen(a: Hbm<bf16, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], bf16, SharedHbm);
    let x = load(a[..]);
    store(out[..], x);
    out
}

fn main() {}
