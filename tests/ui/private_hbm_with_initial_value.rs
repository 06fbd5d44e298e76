use nki::prelude::*;

#[kernel]
fn zeroed_scratch(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let mine = zeros([128, 512], f32, PrivateHbm);
    store(out, load(x) + load(mine));
    out
}

fn main() {}
