use nki::prelude::*;

#[kernel]
fn row_stats(a: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 2> {
    let out = ndarray([128, 2], f32, SharedHbm);
    let x = load(a[..]);
    let mv = bn_aggr(x);
    store(out[..], mv);
    out
}

fn main() {}
