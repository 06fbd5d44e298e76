use nki::prelude::*;

// The flattened free size (2 × 64 = 128) would hold the index, but axis 2 has 64 elements.
#[kernel]
fn axis_overflow(x: Hbm<f32, 128, 128>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    let t = ndarray([128, 2, 64], f32, Sbuf);
    t[[i_p, 0, i_f]] = load(x[[i_p, i_f]]);
    out
}

fn main() {}
