use nki::prelude::*;

#[kernel]
fn mismatched(lhs_t: Hbm<bf16, 128, 128>, rhs: Hbm<bf16, 64, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(lhs_t[[0..128, 0..128]]);
    let b = load(rhs[[0..64, 0..512]]);
    let acc = nc_matmul(a, b);
    store(out[[0..128, 0..512]], copy(acc, f32));
    out
}

fn main() {}
