use nki::prelude::*;

#[kernel]
fn control_flow(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(x[[0..128, 0..512]]);
    if true {
        store(out[[0..128, 0..512]], a);
    }
    while false {}
    let f = |t| t;
    out
}

fn main() {}
