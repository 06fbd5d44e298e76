use nki::prelude::*;

#[kernel]
fn int_product(lhs_t: Hbm<i8, 128, 128>, rhs: Hbm<i8, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(lhs_t[..]);
    let b = load(rhs[..]);
    let acc = nc_matmul(a, b);
    store(out[..], copy(acc, f32));
    out
}

fn main() {}
