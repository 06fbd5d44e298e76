use nki::prelude::*;

// NKI functions the language refuses, each with its rewrite.
#[kernel]
fn refused(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(x);
    let a = expand_dims(t, 2);
    let b = static_cast(t, bf16);
    device_print(t);
    let d = loop_reduce(t, add, [0]);
    let c = all_reduce(t, add, [0]);
    let placed = ndarray([128, 512], f32, sbuf.alloc(place));
    store(out, t);
    out
}

fn main() {}
