use nki::prelude::*;

#[kernel]
fn exp_and_row_max(a: Hbm<f32, 128, 512>) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 1>) {
    let out = ndarray([128, 512], f32, SharedHbm);
    let row_max = ndarray([128, 1], f32, SharedHbm);
    let x = load(a[..]);
    let m = ndarray([128, 1], f32, Sbuf);
    let e = activation_reduce(op = exp, data = x, reduce_op = maximum, reduce_res = m);
    store(out[..], e);
    store(row_max[..], m);
    (out, row_max)
}

fn main() {}
