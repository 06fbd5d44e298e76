use nki::prelude::*;

// 100 blocks of 1024 f32 take 400 KiB of each SBUF partition: more than a partition holds.
#[kernel]
fn block_tile_too_large(x: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 1024> {
    let out = ndarray([128, 1024], f32, SharedHbm);
    let t = ndarray([100, par_dim(128), 1024], f32, Sbuf);
    for k in affine_range(100) {
        t[k] = load(x[..]);
    }
    store(out[..], t[99]);
    out
}

fn main() {}
