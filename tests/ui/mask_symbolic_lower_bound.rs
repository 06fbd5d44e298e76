use nki::prelude::*;

#[kernel]
fn pad_rows(a: Hbm<f32, N, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let t = load(a[[i_p, i_f]], mask = i_p < N);
    let pad = full([128, 512], -1.0, f32, Sbuf);
    t[[i_p, i_f]] = copy(pad, mask = i_p >= N);
    store(out[..], t);
    out
}

fn main() {}
