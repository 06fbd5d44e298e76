use nki::prelude::*;

// A name is given once: a call unrolled twice names two instructions alike.
#[kernel]
fn duplicate_name(t: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let x = load(t[..]);
    let y = ndarray([128, 512], f32, Sbuf);
    for _i in static_range(2) {
        nisa::activation(dst = y, op = exp, data = x, name = "act");
    }
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], y);
    out
}

// Edges name instructions the kernel has, in program order, not themselves.
#[kernel(with_schedule = [("plus1", "Exp"), ("exp", "plus1"), ("exp", "exp"), ("nothing", ["exp"])])]
fn bad_edges(t: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let x = load(t[..]);
    let a = ndarray([128, 512], f32, Sbuf);
    let b = ndarray([128, 512], f32, Sbuf);
    nisa::activation(dst = a, op = exp, data = x, name = "exp");
    nisa::tensor_scalar(dst = b, data = a, op0 = add, operand0 = 1.0, name = "plus1");
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], b);
    out
}

// `with_schedule` is a list of pairs of string literals.
#[kernel(with_schedule = [("a", 1), "b"])]
fn malformed_schedule(t: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let x = load(t[..]);
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], x);
    out
}

// A name is on a function call, not a method.
#[kernel]
fn named_method(t: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let x = load(t[..]);
    let y = x.broadcast_to([128, 512], name = "view");
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], y);
    out
}

fn main() {}
