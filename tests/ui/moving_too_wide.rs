use nki::prelude::*;

#[kernel]
fn wide_moving(lhs_t: Hbm<bf16, 128, 128>, rhs: Hbm<bf16, 128, 1024>) -> Hbm<f32, 128, 1024> {
    let out = ndarray([128, 1024], f32, SharedHbm);
    let a = load(lhs_t[[0..128, 0..128]]);
    let b = load(rhs[[0..128, 0..1024]]);
    let acc = nc_matmul(a, b);
    store(out[[0..128, 0..1024]], copy(acc, f32));
    out
}

fn main() {}
