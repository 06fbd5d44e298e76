use nki::prelude::*;

#[kernel]
fn past_the_tile(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    for i in affine_range(3) {
        t[[ds(i * 64, 64), ..]] = load(x[[ds(0, 64), ..]]);
    }
    store(out, t);
    out
}

fn main() {}
