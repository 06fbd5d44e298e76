use nki::prelude::*;

#[kernel]
fn biased_product(
    lhs_t: Hbm<bf16, 128, 128>,
    rhs: Hbm<bf16, 128, 512>,
    bias: Hbm<f32, 128, 512>,
) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(lhs_t[..]);
    let b = load(rhs[..]);
    let c = load(bias[..]);
    let p = nc_matmul(a, b);
    let s = tensor_tensor(p, c, op = add, engine = gpsimd);
    store(out[..], s);
    out
}

fn main() {}
