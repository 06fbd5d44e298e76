use nki::prelude::*;

#[kernel]
fn tuple_of_tiles(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray(x.shape, x.dtype, SharedHbm);
    let t = load(x);
    let pair = (512, t);
    store(out, t);
    out
}

fn main() {}
