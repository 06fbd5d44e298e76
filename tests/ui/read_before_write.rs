use nki::prelude::*;

// `scratch` is created but never written: the add would read whatever SBUF holds.
#[kernel]
fn reads_an_unwritten_tile(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let scratch = ndarray([128, 512], f32, Sbuf);
    let t = load(x[[0..128, 0..512]]);
    store(out[[0..128, 0..512]], t + scratch);
    out
}

// In its first iteration the loop reads `carry` before writing it.
#[kernel]
fn reads_before_the_loop_writes(x: Hbm<f32, 512, 512>) -> Hbm<f32, 512, 512> {
    let out = ndarray([512, 512], f32, SharedHbm);
    let carry = ndarray([128, 512], f32, Sbuf);
    for i in sequential_range(4) {
        store(out[[i * 128 + 0..i * 128 + 128, 0..512]], carry);
        carry[[0..128, 0..512]] = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
    }
    out
}

fn main() {}
