use nki::prelude::*;

#[kernel]
fn row_stats(a: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 2> {
    let out = ndarray([128, 2], f32, SharedHbm);
    let x = load(a[..]);
    let stats = bn_stats(x);
    let mv = bn_aggr(stats);
    store(out[..], mv);
    out
}

fn main() {}
