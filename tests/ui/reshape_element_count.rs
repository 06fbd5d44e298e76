use nki::prelude::*;

// A reshape views the same elements under other dimensions: its dimensions must hold exactly
// the tensor's elements (decided here when the symbols cancel out), be integers, the kernel's
// symbols or their products, quotients and sums (not a dimension minus a literal); a tile's
// reshape keeps its partitions.
#[kernel]
fn reshape_element_count(
    x: Hbm<f32, 4, 4>,
    y: Hbm<f32, N, 4>,
    z: Hbm<f32, N, C, 4>,
) -> Hbm<f32, N, 4> {
    let out = ndarray([N, 4], f32, SharedHbm);
    let e = z.reshape([N * C, 8]);
    let a = x.reshape([3, 5]);
    let b = y.reshape([N, 8]);
    let c = y.reshape([N - 2, 8]);
    let t = load(x[..]);
    let d = t.reshape([2, 8]);
    let i = mgrid![0..4, 0..4];
    store(out[[i.p, i.x]], t);
    out
}

fn main() {}
