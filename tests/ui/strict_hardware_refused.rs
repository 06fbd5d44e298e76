use nki::prelude::*;

// `strict_hardware`: what NKI 0.3+ simulates but the device cannot run (the release notes'
// known issues): division and remainder of tiles, binary broadcasting, matmul without
// `transpose_x`.
#[kernel(strict_hardware)]
fn refused(a: Hbm<f32, 128, 512>, c: Hbm<f32, 128, 1>, w: Hbm<f32, 128, 128>) -> Hbm<f32, 128, 512> {
    let x = load(a[..]);
    let col = load(c[..]);
    let wt = load(w[..]);
    let q = x / x;
    let d = divide(x, 2.0);
    let r = x % x;
    let f = fmod(x, x);
    let b = x + col;
    let m = matmul(wt, x);
    let acc = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_copy(dst = acc, src = x);
    acc /= x;
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], q);
    store(out[..], d);
    store(out[..], r);
    store(out[..], f);
    store(out[..], b);
    store(out[..], m);
    store(out[..], acc);
    out
}

// The same constructs without the attribute simulate.
#[kernel]
fn simulated(a: Hbm<f32, 128, 512>, c: Hbm<f32, 128, 1>) -> Hbm<f32, 128, 512> {
    let x = load(a[..]);
    let col = load(c[..]);
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], x / x + col);
    out
}

// What the device runs passes: same shapes, multiplication by a reciprocal, matmul with
// `transpose_x`, numbers as operands.
#[kernel(strict_hardware)]
fn accepted(a: Hbm<f32, 128, 512>, w: Hbm<f32, 128, 128>) -> Hbm<f32, 128, 512> {
    let x = load(a[..]);
    let wt = load(w[..]);
    let y = x * reciprocal(x) + x * 2.0;
    let m = matmul(wt, y, transpose_x = true);
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], copy(m, f32));
    out
}

fn main() {}
