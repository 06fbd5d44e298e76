use nki::prelude::*;

#[kernel]
fn wide_stationary(lhs_t: Hbm<bf16, 128, 256>, rhs: Hbm<bf16, 128, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let a = load(lhs_t[[0..128, 0..256]]);
    let b = load(rhs[[0..128, 0..512]]);
    let acc = nc_matmul(a, b);
    store(out[[0..256, 0..512]], copy(acc, f32));
    out
}

fn main() {}
