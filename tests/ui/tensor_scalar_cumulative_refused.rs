use nki::prelude::*;

#[kernel]
fn tensor_scalar_cumulative_refused(
    a: Hbm<f32, 128, 64>,
    b: Hbm<i32, 128, 64>,
    c: Hbm<bf16, 128, 1>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let ints = load(b[..]);
    let col = load(c[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    // The accumulator a previous instruction left is not kept: load it with load_reduce.
    tensor_scalar_cumulative(d, x, add, add, 1.0, reduce_cmd = reduce);
    // No accumulation: that is tensor_scalar.
    tensor_scalar_cumulative(d, x, add, add, 1.0, reduce_cmd = idle);
    // load_reduce starts from imm1, reset_reduce ignores it.
    tensor_scalar_cumulative(d, x, add, add, 1.0, reduce_cmd = load_reduce);
    tensor_scalar_cumulative(d, x, add, add, 1.0, imm1 = 2.0);
    // op1 accumulates with add, subtract, multiply, maximum or minimum.
    tensor_scalar_cumulative(d, x, add, divide, 1.0);
    // op0 is binary arithmetic.
    tensor_scalar_cumulative(d, x, equal, add, 1.0);
    // No int32 data; imm0 as a tile is an fp32 column.
    let e = ndarray([128, 64], i32, Sbuf);
    tensor_scalar_cumulative(e, ints, add, add, 1.0);
    tensor_scalar_cumulative(d, x, multiply, add, col);
    // It writes dst and returns nothing.
    let r = tensor_scalar_cumulative(d, x, add, add, 1.0);
    store(out[..], d);
    out
}

fn main() {}
