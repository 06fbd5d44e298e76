use nki::prelude::*;

#[kernel(target = trn3)]
fn exponential_refused(
    a: Hbm<f32, 128, 64>,
    c: Hbm<bf16, 128, 1>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let col = load(c[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    let r = ndarray([128, 1], f32, Sbuf);
    // The sum a previous instruction left in the accumulators is not kept.
    exponential(d, x, reduce_res = r, reduce_cmd = reduce);
    // load_reduce is not modeled yet.
    exponential(d, x, reduce_res = r, reduce_cmd = load_reduce, reduce_init = 1.0);
    // reset_reduce needs somewhere to put the sum; idle sums nothing into reduce_res.
    exponential(d, x, reduce_cmd = reset_reduce);
    exponential(d, x, reduce_res = r);
    // max_value as a tile is an fp32 column.
    exponential(d, x, max_value = col);
    // A uint32 destination.
    let u = ndarray([128, 64], u32, Sbuf);
    exponential(u, x);
    // It writes dst and returns nothing.
    let e = exponential(d, x);
    store(out[..], d);
    out
}

/// NeuronCore-v4 only.
#[kernel(target = trn2)]
fn exponential_on_trn2(a: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    exponential(d, x, 1.0);
    store(out[..], d);
    out
}

fn main() {}
