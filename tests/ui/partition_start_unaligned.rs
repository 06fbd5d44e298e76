use nki::prelude::*;

#[kernel]
fn unaligned(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    for i in affine_range(2) {
        // 64 partitions start at 0 or 64, not at 48.
        t[[i * 48 + arange(64).p(), arange(64).x()]] = load(x[[i * 64 + arange(64).p(), arange(64).x()]]);
    }
    store(out, t);
    out
}

fn main() {}
