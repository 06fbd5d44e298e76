use nki::prelude::*;

#[kernel]
fn bad_patterns(x: Hbm<f32, 256, 32>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x.ap([[64, 128], [1, 64]]));
    // On chip, the first pair walks the partitions: its step is the row of 64 elements.
    let a = t.ap([[32, 128], [1, 32]]);
    // Steps at least 0, counts at least 1, offsets at least 0.
    let a = t.ap([[64, 128], [-1, 32]]);
    let a = t.ap([[64, 128], [1, 0]]);
    let a = t.ap([[64, 128], [1, 32]], offset = -4);
    // Pairs of integers.
    let a = t.ap([[64, 128], [1]]);
    // Offsets read at run time are not accepted yet; nor an `ap` of a view of HBM.
    let a = t.ap([[64, 128], [1, 32]], scalar_offset = t);
    let a = x.slice(0, 0, 128).ap([[32, 128], [1, 32]]);
    nisa::dma_copy(dst = out, src = t);
    out
}

fn main() {}
