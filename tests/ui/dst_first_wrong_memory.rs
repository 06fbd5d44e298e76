use nki::prelude::*;

#[kernel]
fn wrong_memories(a: Hbm<f32, 128, 128>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    // nc_matmul writes PSUM.
    let sb = ndarray([128, 512], f32, Sbuf);
    nisa::nc_matmul(dst = sb, stationary = x, moving = y);
    // A compute instruction does not write HBM.
    nisa::tensor_tensor(dst = out[..], data1 = y, data2 = y, op = nl::add);
    store(out[..], y);
    out
}

fn main() {}
