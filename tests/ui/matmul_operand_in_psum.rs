use nki::prelude::*;

#[kernel]
fn psum_operand(rhs: Hbm<bf16, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = zeros([128, 128], f32, Psum);
    let b = load(rhs[[0..128, 0..512]]);
    let acc = nc_matmul(a, b);
    store(out[[0..128, 0..512]], copy(acc, f32));
    out
}

fn main() {}
