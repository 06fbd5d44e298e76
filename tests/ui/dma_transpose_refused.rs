use nki::prelude::*;

// What NKI's `dma_transpose` does not take: another permutation than its source's rank's,
// a source in PSUM, a source of 5 axes, a result of more than 128 partitions, indirect indices.
#[kernel]
fn transposes(
    x: Hbm<f32, 128, 128>,
    y: Hbm<f32, 4, 128, 128>,
    w: Hbm<f32, 64, 256>,
    idx: Hbm<i32, 128, 1>,
) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let a = dma_transpose(x[..], axes = [0, 1]);
    let b = dma_transpose(y[[0, .., ..]], axes = [2, 1, 0]);
    let c = dma_transpose(y[..], axes = [3, 2, 1, 0]);
    let acc = zeros([128, 128], f32, Psum);
    let d = dma_transpose(acc);
    let t5 = zeros([2, 2, 2, 2, 2], f32, Sbuf);
    let e = dma_transpose(t5);
    let f = dma_transpose(w[..]);
    let ix = load(idx[..]);
    let g = dma_transpose(x[[ix, arange(128).x()]]);
    store(out, a);
    out
}

fn main() {}
