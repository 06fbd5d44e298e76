use nki::prelude::*;

// NKI's Python `assert`, checked when the kernel compiles: failures, conditions known only at
// launch, and malformed assertions.
#[kernel(d64(D = 64))]
fn asserts<const D: usize>(a: Hbm<f32, N, D>, c: Hbm<f32, M, D>) -> Hbm<f32, N, D> {
    assert!(D > 128);
    assert_eq!(a.dtype, bf16, "a must be bf16");
    assert_ne!(a.shape[1], 64);
    assert!(a.shape == c.shape);
    assert!(N > 0);
    assert!(a.shape[0] == c.shape[0]);
    assert!(D > 1, "D", "again");
    let message = 1;
    assert!(D > 1, message);
    assert_eq!(D);
    let out = ndarray(a.shape, a.dtype, SharedHbm);
    for i in affine_range((N + 127) / 128) {
        let (i_p, i_f) = mgrid![0..128, 0..D];
        let x = load(a[[i * 128 + i_p, i_f]], mask = i * 128 + i_p < N);
        store(out[[i * 128 + i_p, i_f]], x, mask = i * 128 + i_p < N);
    }
    out
}

fn main() {}
