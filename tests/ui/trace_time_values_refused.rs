use nki::prelude::*;

// Python arithmetic at trace time on values known only at launch, and `as` conversions.
#[kernel]
fn refused(x: Hbm<f32, N, 512>) -> Hbm<f32, N, 512> {
    let out = ndarray([N, 512], f32, SharedHbm);
    let rows = min(N, 128);
    let inv = 1.0 / N;
    let d = 512 as f32;
    let lo = finfo(i32).min;
    let hi = bool.max;
    let nan = sqrt(-1.0);
    let th = tanh(1.0);
    for k in affine_range((N + 127) / 128) {
        let (i_p, i_f) = mgrid![0..128, 0..512];
        let t = load(x[[k * 128 + i_p, i_f]], mask = k * 128 + i_p < N);
        let u = max(0, t);
        store(out[[k * 128 + i_p, i_f]], t, mask = k * 128 + i_p < N);
    }
    out
}

fn main() {}
