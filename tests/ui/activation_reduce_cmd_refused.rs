use nki::prelude::*;

// `reduce_cmd` values that carry the Scalar engine's accumulators between instructions.
#[kernel]
fn accumulators_carried(a: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 1> {
    let out = ndarray([128, 1], f32, SharedHbm);
    let x = load(a[..]);
    let r = ndarray([128, 1], f32, Sbuf);
    let e = activation(op = exp, data = x, reduce_op = add, reduce_res = r, reduce_cmd = reduce);
    let f = activation(op = exp, data = e, reduce_cmd = reset);
    store(out[..], r);
    out
}

fn main() {}
