use nki::prelude::*;

// A `dtype` other than the destination's, on operations that write their `dst`.
#[kernel]
fn dst_dtype(a: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    let p = ndarray([128, 64], u8, Sbuf);
    p[..] = copy(x, dtype = u8);
    tensor_copy_predicated(dst = d, src = x, predicate = p, dtype = bf16);
    select_reduce(dst = d, predicate = p, on_true = x, on_false = 0.0, dtype = f16);
    store(out[..], d);
    out
}

fn main() {}
