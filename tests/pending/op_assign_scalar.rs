//! `t op= number`: NKI tiles take a Python number on the right of `+=`, `*=`, `<<=`, ...
//! Run by `tests/pending.rs`.

use nki::ndarray::Array2;
use nki::prelude::*;

#[kernel]
fn op_assign_scalar(a: Hbm<f32, 128, 512>, b: Hbm<i32, 128, 64>) -> (Hbm<f32, 128, 512>, Hbm<i32, 128, 64>) {
    let o1 = ndarray([128, 512], f32, SharedHbm);
    let o2 = ndarray([128, 64], i32, SharedHbm);
    let t = load(a[..]);
    t += 1.0;
    t *= 2.0;
    t -= 0.5;
    let u = load(b[..]);
    u <<= 1;
    u ^= 0xff;
    store(o1[..], t);
    store(o2[..], u);
    (o1, o2)
}

fn main() {
    let a = Array2::from_shape_fn((128, 512), |(p, f)| (p as f32 - f as f32) * 0.25);
    let b = Array2::from_shape_fn((128, 64), |(p, f)| (p * 64 + f) as i32);
    let (o1, o2) = op_assign_scalar::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    assert_eq!(o1, a.mapv(|x| (x + 1.0) * 2.0 - 0.5));
    assert_eq!(o2, b.mapv(|x| (x << 1) ^ 0xff));
}
