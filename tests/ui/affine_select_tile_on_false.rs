use nki::prelude::*;

#[kernel]
fn causal(a: Hbm<f32, 128, 128>, fill: Hbm<f32, 128, 128>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    let x = load(a[[i_p, i_f]]);
    let f = load(fill[[i_p, i_f]]);
    let y = affine_select(pred = i_p - i_f >= 0, on_true_tile = x, on_false_value = f);
    store(out[[i_p, i_f]], y);
    out
}

fn main() {}
