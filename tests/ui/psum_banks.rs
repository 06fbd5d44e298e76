use nki::prelude::*;

#[kernel]
fn nine_accumulators(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a0 = zeros([128, 512], f32, Psum);
    let a1 = zeros([128, 512], f32, Psum);
    let a2 = zeros([128, 512], f32, Psum);
    let a3 = zeros([128, 512], f32, Psum);
    let a4 = zeros([128, 512], f32, Psum);
    let a5 = zeros([128, 512], f32, Psum);
    let a6 = zeros([128, 512], f32, Psum);
    let a7 = zeros([128, 512], f32, Psum);
    let a8 = zeros([128, 512], f32, Psum);
    store(out[[0..128, 0..512]], a0);
    store(out[[0..128, 0..512]], a1);
    store(out[[0..128, 0..512]], a2);
    store(out[[0..128, 0..512]], a3);
    store(out[[0..128, 0..512]], a4);
    store(out[[0..128, 0..512]], a5);
    store(out[[0..128, 0..512]], a6);
    store(out[[0..128, 0..512]], a7);
    store(out[[0..128, 0..512]], a8);
    out
}

fn main() {}
