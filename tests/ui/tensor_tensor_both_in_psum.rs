use nki::prelude::*;

#[kernel]
fn sum_of_products(
    lhs_t: Hbm<bf16, 128, 128>,
    b: Hbm<bf16, 128, 512>,
    c: Hbm<bf16, 128, 512>,
) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(lhs_t[..]);
    let x = load(b[..]);
    let y = load(c[..]);
    let p = nc_matmul(a, x);
    let q = nc_matmul(a, y);
    let s = p + q;
    store(out[..], s);
    out
}

fn main() {}
