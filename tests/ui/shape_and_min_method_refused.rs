use nki::prelude::*;

// NKI's `x.shape` and Rust's `a.min(b)` where they have no meaning.
#[kernel]
fn refused(x: Hbm<f32, N, 512>) -> Hbm<f32, N, 512> {
    let out = ndarray(x.shape, f32, SharedHbm);
    let past = x.shape[2];
    let (a, b, c) = x.shape;
    let inv = 1.0 / x.shape[0];
    let tile = zeros(x.shape, f32, Sbuf);
    let cols = 512.min(128, 64);
    let t = load(x[[0..128, 0..512]]);
    let low = t.min(0.0);
    let wrong = zeros(x.dtype, f32, Sbuf);
    let rank = len(x);
    for k in affine_range((N + 127) / 128) {
        let (i_p, i_f) = mgrid![0..128, 0..512];
        let u = load(x[[k * 128 + i_p, i_f]], mask = k * 128 + i_p < N);
        store(out[[k * 128 + i_p, i_f]], u, mask = k * 128 + i_p < N);
    }
    out
}

fn main() {}
