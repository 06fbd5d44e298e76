use nki::prelude::*;

// A negative axis counts from the last; past the tile's rank it is out of range.
#[kernel]
fn axis_out_of_range(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 1> {
    let out = ndarray([128, 1], f32, SharedHbm);
    let t = load(x[..]);
    let a = sum(t, axis = (-3,));
    let b = tensor_reduce(add, t, axis = [-2]);
    store(out[..], a);
    out
}

fn main() {}
