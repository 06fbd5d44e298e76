use nki::prelude::*;

#[kernel]
fn too_much_sbuf(x: Hbm<f32, 128, 32768>) -> Hbm<f32, 128, 32768> {
    let out = ndarray([128, 32768], f32, SharedHbm);
    let a = load(x[[0..128, 0..32768]]);
    let b = copy(a, f32);
    store(out[[0..128, 0..32768]], a);
    store(out[[0..128, 0..32768]], b);
    out
}

fn main() {}
