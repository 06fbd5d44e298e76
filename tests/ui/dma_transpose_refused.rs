use nki::prelude::*;

// A DMA transpose from SBUF, and a permutation of three axes.
#[kernel]
fn transposes(x: Hbm<f32, 128, 128>, y: Hbm<f32, 4, 128, 128>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let t = load(x);
    let u = dma_transpose(t);
    let v = dma_transpose(y[[0, .., ..]], axes = [2, 1, 0]);
    store(out, u);
    store(out, v);
    out
}

fn main() {}
