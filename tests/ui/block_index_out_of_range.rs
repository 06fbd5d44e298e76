use nki::prelude::*;

// A tile of four blocks has no block 4 (NKI numbers the block axes first).
#[kernel]
fn block_index_out_of_range(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([4, par_dim(128), 64], f32, Sbuf);
    t[0] = load(x[..]);
    store(out[..], t[4]);
    out
}

fn main() {}
