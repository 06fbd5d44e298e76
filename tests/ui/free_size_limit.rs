use nki::prelude::*;

#[kernel]
fn wide_exp(a: Hbm<bf16, 128, 65600>) -> Hbm<bf16, 128, 65600> {
    let out = ndarray([128, 65600], bf16, SharedHbm);
    let x = load(a[..]);
    x[..] = exp(x);
    store(out[..], x);
    out
}

fn main() {}
