use nki::prelude::*;

#[kernel]
fn writes_a_constant(x: Hbm<f32, 2, 2>) -> Hbm<f32, 2, 2> {
    let out = ndarray([2, 2], f32, SharedHbm);
    let table = shared_constant([[1.0, 0.0], [0.0, 1.0]]);
    store(table, load(x));
    store(out, load(table));
    out
}

fn main() {}
