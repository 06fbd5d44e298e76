use nki::prelude::*;

#[kernel(plain(CAUSAL = false))]
fn scores<const CAUSAL: bool>(x: Hbm<f32, 128, 128>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    let t = load(x[[i_p, i_f]]);
    // A meta-parameter decides at compile time; a tile's values cannot.
    let t = if CAUSAL { affine_select(i_p >= i_f, t, -1e9) } else { t };
    let u = if t > 0.0 { t } else { -t };
    store(out[[i_p, i_f]], u);
    out
}

fn main() {}
