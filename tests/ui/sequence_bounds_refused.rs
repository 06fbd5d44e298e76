use nki::prelude::*;

#[kernel]
fn sequence_bounds_refused(
    a: Hbm<f32, 4, 32>,
    b: Hbm<i16, 1, 32>,
    c: Hbm<f32, 1, 4, 8>,
) -> Hbm<f32, 1, 2, 32> {
    let out = ndarray([1, 2, 32], f32, SharedHbm);
    let rows = load(a[..]);
    let narrow = load(b[..]);
    let cube = load(c[..]);
    // One partition of float32 or int32 ids, [1, n].
    let s = sequence_bounds(rows);
    let s = sequence_bounds(narrow);
    let s = sequence_bounds(cube);
    // The result is float32 or int32, [1, 2, n].
    let d = ndarray([1, 2, 32], bf16, Sbuf);
    d[..] = sequence_bounds(rows[[0..1, 0..32]]);
    let e = ndarray([1, 32], f32, Sbuf);
    e[..] = sequence_bounds(rows[[0..1, 0..32]]);
    let f = sequence_bounds(rows[[0..1, 0..32]]);
    store(out[..], f);
    out
}

fn main() {}
