use nki::prelude::*;

// An input stays read-only through a reshape: a store into it is a store into the input.
#[kernel]
fn reshape_input_read_only(y: Hbm<f32, N, 4>) -> Hbm<f32, N, 4> {
    let out = ndarray([N, 4], f32, SharedHbm);
    let y2 = y.reshape([4, N]);
    let i = mgrid![0..4, 0..4];
    let t = load(y[[i.p, i.x]]);
    store(y2[[i.p, i.x]], t);
    store(out[[i.p, i.x]], t);
    out
}

fn main() {}
