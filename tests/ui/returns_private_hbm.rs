use nki::prelude::*;

#[kernel]
fn returns_scratch(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let mine = ndarray([128, 512], f32, PrivateHbm);
    store(mine, load(x));
    mine
}

fn main() {}
