use nki::prelude::*;

#[kernel]
fn bad_views(a: Hbm<f32, 4, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([128, 8, 64], f32, Sbuf);
    nisa::dma_copy(dst = t[[0..128, 0, 0..64]], src = a.select(0, 1));
    // The dimension is not an axis.
    let x = t.slice(3, 0, 8);
    // Out of the dimension; empty; a bad step; a stepped partition axis.
    let x = t.slice(1, 4, 9);
    let x = t.slice(1, 4, 4);
    let x = t.slice(2, 0, 64, step = 0);
    let x = t.slice(0, 0, 128, 2);
    // A tile keeps its partitions first and whole.
    let x = a.select(0, 1).broadcast(0, 4);
    let x = t.permute((2, 1, 0));
    let x = t.permute((0, 1, 1));
    let x = t.expand_dim(0);
    // Only a size-1 axis is broadcast or removed.
    let x = t.broadcast(1, 4);
    let x = t.squeeze_dim(2);
    let x = t.select(1, 8);
    // Merging axes that a permute separated.
    let x = t.permute((0, 2, 1)).flatten_dims(1, 2);
    let x = t.reshape((128, 5, 100));
    let x = t.reshape_dim(1, (3, -1));
    let x = t.slice(1, 0, 8, 2).reshape((128, 256));
    nisa::dma_copy(dst = out, src = t[[0..128, 0, 0..64]]);
    out
}

fn main() {}
