use nki::prelude::*;

// NeuronCore-v3 and newer only: refused on trn1 (the default target).
#[kernel]
fn nonzero_with_count_on_trn1(a: Hbm<f32, 128, 8>) -> Hbm<i32, 128, 9> {
    let out = ndarray([128, 9], i32, SharedHbm);
    let x = load(a[..]);
    let d = ndarray([128, 9], i32, Sbuf);
    nonzero_with_count(dst = d, src = x);
    store(out[..], d);
    out
}

#[kernel(target = trn2)]
fn nonzero_with_count_refused(a: Hbm<f32, 128, 8>, b: Hbm<f16, 128, 8>) -> Hbm<i32, 128, 9> {
    let out = ndarray([128, 9], i32, SharedHbm);
    let x = load(a[..]);
    let h = load(b[..]);
    let d = ndarray([128, 9], i32, Sbuf);
    // float32 or int32 data.
    nonzero_with_count(d, h);
    // An int32 destination with one more element per partition than src.
    let narrow = ndarray([128, 8], i32, Sbuf);
    nonzero_with_count(narrow, x);
    let floats = ndarray([128, 9], f32, Sbuf);
    nonzero_with_count(floats, x);
    // Each GpSimd core works on its partition 0: accesses start on a multiple of 16.
    nonzero_with_count(d[[8..16, 0..9]], x[[8..16, 0..8]]);
    // The offset and padding are int32.
    nonzero_with_count(d, x, index_offset = 3000000000);
    nonzero_with_count(d, x, padding_val = 1.5);
    // It writes dst and returns nothing.
    let r = nonzero_with_count(d, x);
    store(out[..], d);
    out
}

fn main() {}
