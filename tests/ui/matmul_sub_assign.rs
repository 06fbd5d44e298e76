use nki::prelude::*;

#[kernel]
fn difference(
    lhs_t: Hbm<bf16, 128, 128>,
    b: Hbm<bf16, 128, 512>,
    c: Hbm<bf16, 128, 512>,
) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(lhs_t[..]);
    let x = load(b[..]);
    let y = load(c[..]);
    let acc = zeros([128, 512], f32, Psum);
    acc += nc_matmul(a, x);
    acc -= nc_matmul(a, y);
    store(out[..], copy(acc, f32));
    out
}

fn main() {}
