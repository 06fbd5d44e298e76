use nki::prelude::*;

#[kernel]
fn big_psum(x: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 1024> {
    let out = ndarray([128, 1024], f32, SharedHbm);
    let acc = zeros([128, 1024], f32, Psum);
    store(out[[0..128, 0..1024]], copy(acc, f32));
    out
}

fn main() {}
