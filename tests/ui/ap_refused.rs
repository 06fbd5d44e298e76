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
    // An `ap` of a view of HBM is not accepted yet; nor run-time offsets on chip.
    let a = x.slice(0, 0, 128).ap([[32, 128], [1, 32]]);
    let i = ndarray([1, 1], i32, Sbuf);
    nisa::memset(dst = i, value = 3);
    let a = t.ap([[64, 128], [1, 32]], scalar_offset = i, indirect_dim = 1);
    // Run-time offsets: one of the two, an int32 tile or a register, on a dimension of the
    // tensor; a vector offset on dimension 0, its pattern within one row.
    let idx = ndarray([128, 1], i32, Sbuf);
    nisa::memset(dst = idx, value = 0);
    let a = x.ap([[32, 128], [1, 32]], scalar_offset = i, vector_offset = idx);
    let a = x.ap([[32, 128], [1, 32]], scalar_offset = 3);
    let a = x.ap([[32, 128], [1, 32]], scalar_offset = i, indirect_dim = 2);
    let a = x.ap([[1, 128], [32, 32]], vector_offset = idx, indirect_dim = 1);
    let a = x.ap([[32, 128], [1, 64]], vector_offset = idx);
    // The offset tile: one int32 or uint32 element; the index column: one per partition.
    let f = ndarray([1, 1], f32, Sbuf);
    nisa::memset(dst = f, value = 3.0);
    nisa::dma_copy(dst = t, src = x.ap([[32, 128], [1, 64]], scalar_offset = f));
    let two = ndarray([1, 2], i32, Sbuf);
    nisa::memset(dst = two, value = 3);
    nisa::dma_copy(dst = t, src = x.ap([[32, 128], [1, 64]], scalar_offset = two));
    let r = ndarray([64, 64], f32, Sbuf);
    nisa::dma_copy(dst = r, src = x.ap([[32, 64], [1, 32]], vector_offset = idx));
    // `atomic_rmw` takes rows of indices, not a scalar offset.
    atomic_rmw(x.ap([[32, 128], [1, 32]], scalar_offset = i), t, op = add);
    nisa::dma_copy(dst = out, src = t);
    out
}

fn main() {}
