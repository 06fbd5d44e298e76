use nki::prelude::*;

#[kernel]
fn dma_compute_refused(
    a: Hbm<f32, 128, 64>,
    b: Hbm<bf16, 128, 64>,
    rows: Hbm<i32, 128>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let ps = ndarray([128, 64], f32, Psum);
    let half = ndarray([128, 32], f32, Sbuf);
    let i_p = arange(128).p();
    let i_f = arange(64).x();
    let idx = load(rows[i_p]);
    // Only `add`, and scales of 1.0 (or None).
    nisa::dma_compute(dst = out, srcs = [a, b], reduce_op = nl::multiply);
    nisa::dma_compute(dst = out, srcs = [a, b], reduce_op = add, scales = [2.0, 1.0]);
    nisa::dma_compute(dst = out, srcs = [a, b], reduce_op = add, scales = [1.0]);
    // srcs is a list of 1 to 16 operands.
    nisa::dma_compute(dst = out, srcs = a, reduce_op = add);
    nisa::dma_compute(dst = out, srcs = [], reduce_op = add);
    nisa::dma_compute(
        dst = out,
        srcs = [a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a],
        reduce_op = add,
    );
    // The DMA engines reach HBM and SBUF, not PSUM.
    nisa::dma_compute(dst = out, srcs = [a, ps], reduce_op = add);
    nisa::dma_compute(dst = ps, srcs = [a, b], reduce_op = add);
    // Every operand has one shape.
    nisa::dma_compute(dst = half, srcs = [a, b], reduce_op = add);
    nisa::dma_compute(dst = x, srcs = [x, half], reduce_op = add);
    // The read-modify-write forms (an operand with `vector_offset`): exactly two sources,
    // `[dst, rows]` into SBUF or `[dst's rows, data]` into HBM, unique indices, no skipping.
    nisa::dma_compute(dst = x, srcs = [x, a[[idx[[i_p, 0]], i_f]], x], reduce_op = add);
    nisa::dma_compute(
        dst = x,
        srcs = [x, a.ap(pattern = [[64, 128], [1, 64]], vector_offset = idx)],
        reduce_op = add,
        unique_indices = false,
    );
    nisa::dma_compute(
        dst = x,
        srcs = [x, a[[idx[[i_p, 0]], i_f]]],
        reduce_op = add,
        oob_mode = oob_mode::skip,
    );
    nisa::dma_compute(dst = x, srcs = [a, a[[idx[[i_p, 0]], i_f]]], reduce_op = add);
    nisa::dma_compute(
        dst = out.ap(pattern = [[64, 128], [1, 64]], vector_offset = idx),
        srcs = [a, x],
        reduce_op = add,
    );
    // It writes its dst and returns nothing.
    let e = nisa::dma_compute(dst = x, srcs = [x, a], reduce_op = add);
    store(out[..], x);
    out
}

fn main() {}
