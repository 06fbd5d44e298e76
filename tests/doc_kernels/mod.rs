//! The kernels `docs/language.md` shows, as written there; used by `tests/all/ops_smoke.rs` (their
//! results) and `tests/zero_alloc.rs` (their launches allocate nothing).

use nki::prelude::*;

#[kernel]
pub fn elementwise(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let s = x + y;
    let m = maximum(s, x * 2.0);
    let e = exp(m - 3.0);
    store(out[..], e);
    out
}

/// The row softmax of docs/language.md, "A kernel", written with ISA calls.
#[kernel]
pub fn softmax_rows(x: Hbm<f32, N, 256>) -> Hbm<f32, N, 256> {
    let out = ndarray([N, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    for k in affine_range((N + 127) / 128) {
        let rows = k * 128 + i_p < N;
        let t = load(x[[k * 128 + i_p, i_f]], mask = rows);
        let neg_max = tensor_reduce(
            max,
            t,
            axis = 1,
            negate = true,
            keepdims = true,
            mask = rows,
        );
        let sum = ndarray([128, 1], f32, Sbuf);
        let e = activation(
            exp,
            t,
            bias = neg_max,
            reduce_op = add,
            reduce_res = sum,
            mask = rows,
        );
        let y = e * reciprocal(sum);
        store(out[[k * 128 + i_p, i_f]], y, mask = rows);
    }
    out
}

/// The same with `softmax`, which the docs say lowers to the same instructions.
#[kernel]
pub fn softmax_nl(x: Hbm<f32, N, 256>) -> Hbm<f32, N, 256> {
    let out = ndarray([N, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    for k in affine_range((N + 127) / 128) {
        let t = load(x[[k * 128 + i_p, i_f]], mask = k * 128 + i_p < N);
        let s = softmax(t, axis = 1, mask = k * 128 + i_p < N);
        store(out[[k * 128 + i_p, i_f]], s, mask = k * 128 + i_p < N);
    }
    out
}
