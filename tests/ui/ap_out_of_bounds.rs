use nki::prelude::*;

// A pattern past the end of the tile's rows, and one past the end of the tensor: the bounds
// every view is checked against.
#[kernel]
fn ap_out_of_bounds(x: Hbm<f32, 256, 32>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x.ap([[64, 128], [1, 64]]));
    let u = ndarray([128, 80], f32, Sbuf);
    nisa::tensor_copy(dst = u, src = t.ap([[64, 128], [1, 80]]));
    let v = ndarray([128, 32], f32, Sbuf);
    nisa::dma_copy(dst = v, src = x.ap([[32, 128], [1, 32]], offset = 200 * 32));
    nisa::dma_copy(dst = out, src = t);
    out
}

fn main() {}
