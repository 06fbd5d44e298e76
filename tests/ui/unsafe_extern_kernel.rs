use nki::prelude::*;

#[kernel]
unsafe extern "C" fn qualified(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[[0..128, 0..512]], load(x[[0..128, 0..512]]));
    out
}

fn main() {}
