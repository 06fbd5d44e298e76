use nki::prelude::*;

// A block axis is not a dimension of an access: it takes an integer index, not a slice or an
// index grid.
#[kernel]
fn block_index_not_integer(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let i = mgrid![0..128, 0..64];
    let t = ndarray([4, par_dim(128), 64], f32, Sbuf);
    t[[0..2, i.p, i.x]] = load(x[..]);
    t[[i.x, i.p, i.x]] = load(x[..]);
    store(out[..], t);
    out
}

fn main() {}
