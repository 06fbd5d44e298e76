use nki::prelude::*;

// The mistake is inside the helper: the error points at the helper's tokens and names the call.
#[helper]
fn add_rows(a: Tile, b: Tile) -> Tile {
    a + b
}

#[kernel]
fn uses_helper(x: Hbm<f32, 128, 512>, y: Hbm<f32, 64, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(x[..]);
    let b = load(y[..]);
    store(out[..], add_rows(a, b));
    out
}

fn main() {}
