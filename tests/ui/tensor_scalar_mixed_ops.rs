use nki::prelude::*;

#[kernel]
fn low_byte_doubled(a: Hbm<i32, 128, 512>) -> Hbm<i32, 128, 512> {
    let out = ndarray([128, 512], i32, SharedHbm);
    let x = load(a[..]);
    let y = tensor_scalar(x, op0 = bitwise_and, operand0 = 255, op1 = multiply, operand1 = 2);
    store(out[..], y);
    out
}

fn main() {}
