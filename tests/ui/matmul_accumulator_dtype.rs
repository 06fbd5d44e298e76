use nki::prelude::*;

#[kernel]
fn bf16_accumulator(lhs_t: Hbm<bf16, K, 128>, rhs: Hbm<bf16, K, 512>) -> Hbm<bf16, 128, 512> {
    let out = ndarray([128, 512], bf16, SharedHbm);
    let acc = zeros([128, 512], bf16, Psum);
    for k in affine_range(K / 128) {
        let a = load(lhs_t[[k * 128..(k + 1) * 128, 0..128]]);
        let b = load(rhs[[k * 128..(k + 1) * 128, 0..512]]);
        acc += nc_matmul(a, b);
    }
    store(out[..], copy(acc, bf16));
    out
}

fn main() {}
