use nki::prelude::*;

// A view indexed again stays inside the view, not only inside its tile.
#[kernel]
fn view_indexed_past_its_end(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(x[..]);
    let left = t[[0..128, 0..64]];
    let a = copy(left[[0..128, 32..96]]);
    let top = t[[0..64, 0..512]];
    let b = copy(top[[0..128, 0..512]]);
    store(out[..], t);
    out
}

fn main() {}
