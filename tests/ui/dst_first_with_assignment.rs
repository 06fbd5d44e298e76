use nki::prelude::*;

#[kernel]
fn dst_and_let(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let u = ndarray([128, 512], f32, Sbuf);
    let t = nisa::tensor_tensor(dst = u, data1 = x, data2 = y, op = nl::add);
    store(out[..], t);
    out
}

fn main() {}
