use nki::prelude::*;

#[kernel]
fn flip(a: Hbm<bf16, 64, 64>) -> Hbm<bf16, 64, 64> {
    let out = ndarray([64, 64], bf16, SharedHbm);
    let x = load(a[..]);
    let t = nc_transpose(x, engine = vector);
    store(out[..], t);
    out
}

fn main() {}
