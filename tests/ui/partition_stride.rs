use nki::prelude::*;

#[kernel]
fn even_rows(a: Hbm<f32, 128, 512>) -> Hbm<f32, 64, 512> {
    let out = ndarray([64, 512], f32, SharedHbm);
    let x = load(a[..]);
    let (i_p, i_f) = mgrid![0..64, 0..512];
    let y = copy(x[[2 * i_p, i_f]]);
    store(out[..], y);
    out
}

fn main() {}
