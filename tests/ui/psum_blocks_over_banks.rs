use nki::prelude::*;

// Nine PSUM blocks of one bank each: PSUM has eight banks. Blocks of 1536 bytes would
// straddle banks.
#[kernel]
fn psum_blocks_over_banks(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let acc = zeros((9, par_dim(128), 512), f32, Psum);
    let odd = zeros((2, par_dim(128), 384), f32, Psum);
    store(out[..], load(x[..]));
    out
}

fn main() {}
