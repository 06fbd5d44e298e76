use nki::prelude::*;

#[kernel(target = trn3)]
fn activate2_refused(a: Hbm<f32, 128, 64>, c: Hbm<bf16, 128, 1>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let col = load(c[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    let r = ndarray([128, 1], f32, Sbuf);
    // The tensor-scalar stage is one of NKI's six pairs.
    activate2(dst = d, op = exp, data = x, imm0 = 1.0, imm1 = 2.0, op0 = add, op1 = add);
    // A reversed operation is not bypass.
    activate2(dst = d, op = exp, data = x, op0 = bypass, op1 = bypass, reverse0 = true);
    // An operation that is not bypass has its operand.
    activate2(dst = d, op = exp, data = x, op0 = multiply);
    // An operand as a tile is an fp32 column.
    activate2(dst = d, op = exp, data = x, imm0 = col, op0 = multiply);
    // The reduction is add, maximum or minimum.
    activate2(dst = d, op = exp, data = x, reduce_op = divide, reduce_res = r);
    store(out[..], d);
    out
}

/// NeuronCore-v4 only.
#[kernel(target = trn2)]
fn activate2_on_trn2(a: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    activate2(dst = d, op = exp, data = x, imm0 = 2.0, op0 = multiply);
    store(out[..], d);
    out
}

fn main() {}
