use nki::prelude::*;

#[kernel]
fn select_reduce_refused(
    a: Hbm<f32, 128, 64>,
    b: Hbm<f32, 128, 64>,
    c: Hbm<i16, 128, 64>,
    e: Hbm<i32, 128, 64>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let fp = load(b[..]);
    let ip = load(c[..]);
    let wide = load(e[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    let m = ndarray([128, 1], f32, Sbuf);
    // The predicate is a tile of 8- or 16-bit integers.
    select_reduce(d, fp, x, 0.0);
    // on_true is not int32.
    select_reduce(d, ip, wide, 0.0);
    // on_false is a number or a (P, 1) column.
    select_reduce(d, ip, x, x);
    // The reduction is a maximum.
    select_reduce(d, ip, x, 0.0, reduce_res = m, reduce_op = add);
    // The accumulator is not carried between instructions.
    select_reduce(d, ip, x, 0.0, reduce_res = m, reduce_cmd = reduce);
    // reset_reduce needs reduce_res.
    select_reduce(d, ip, x, 0.0, reduce_cmd = reset_reduce);
    store(out[..], d);
    out
}

fn main() {}
