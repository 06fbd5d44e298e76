use nki::prelude::*;

#[kernel]
fn mixed(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let i_p = arange(128).p();
    let a = load(x[[i_p, 0..512]]);
    store(out[[0..128, 0..512]], a);
    out
}

fn main() {}
