//! NKI 0.6's tensor views (`slice`, `select`, `permute`, `broadcast`, `expand_dim`,
//! `squeeze_dim`, `reshape_dim`, `flatten_dims`, `reshape`) on tiles, HBM tensors and accesses:
//! each a new access of the same storage, no instruction. Results against plain-loop references;
//! listings equal where a view and the 2.26 indexing mean the same thing.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Array3, Ix2, Ix3};
use nki::prelude::*;

/// A program's listing without its first line (the signature, which names the kernel).
fn body(p: &nki::program::Program<'_>) -> String {
    p.to_string().lines().skip(1).collect::<Vec<_>>().join("\n")
}

// ---- the same access written both ways ----

/// NKI 2.26: integers, slices and an index grid.
#[kernel]
fn indexed_226(a: Hbm<f32, 4, 128, 64>) -> Hbm<f32, 4, 128, 16> {
    let out = ndarray([4, 128, 16], f32, SharedHbm);
    for b in affine_range(4) {
        let t = load(a[[b, 0..128, 32..64]]);
        let (i_p, i_f) = mgrid![0..128, 0..16];
        let even = t[[i_p, 2 * i_f]];
        let u = ndarray([128, 16], f32, Sbuf);
        u[..] = tensor_copy(even);
        store(out[[b, 0..128, 0..16]], u);
    }
    out
}

/// NKI 0.6: the same accesses as views.
#[kernel]
fn viewed_06(a: Hbm<f32, 4, 128, 64>) -> Hbm<f32, 4, 128, 16> {
    let out = ndarray([4, 128, 16], f32, SharedHbm);
    for b in affine_range(4) {
        let t = ndarray([128, 32], f32, Sbuf);
        nisa::dma_copy(dst = t, src = a.select(0, b).slice(1, 32, 64));
        let u = ndarray([128, 16], f32, Sbuf);
        nisa::tensor_copy(
            dst = u,
            src = t.slice(dim = 1, start = 0, end = 32, step = 2),
        );
        nisa::dma_copy(dst = out.select(0, b), src = u);
    }
    out
}

#[test]
fn select_and_slice_compile_to_the_2_26_indexing() {
    let old = indexed_226::KERNEL.program();
    let new = viewed_06::KERNEL.program();
    assert_eq!(body(old), body(new), "2.26:\n{old}\n0.6:\n{new}");
}

#[test]
fn select_and_slice_read_what_numpy_slicing_reads() {
    let a = rand_f32(Ix3(4, 128, 64), 1, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let out = viewed_06::host(&mut core, a.view()).unwrap();
    for b in 0..4 {
        for p in 0..128 {
            for j in 0..16 {
                assert_eq!(out[[b, p, j]], a[[b, p, 32 + 2 * j]], "({b}, {p}, {j})");
            }
        }
    }
}

/// NKI 2.26: a free-axis transpose by an index grid, a broadcast by `broadcast_to`.
#[kernel]
fn permuted_226(a: Hbm<f32, 128, 8, 16>, c: Hbm<f32, 128, 1>) -> Hbm<f32, 128, 16, 8> {
    let out = ndarray([128, 16, 8], f32, SharedHbm);
    let t = load(a[..]);
    let col = load(c[..]);
    let (i_p, i_x, i_y) = mgrid![0..128, 0..16, 0..8];
    let u = ndarray([128, 16, 8], f32, Sbuf);
    u[..] = tensor_copy(t[[i_p, i_y, i_x]]);
    let w = ndarray([128, 16, 8], f32, Sbuf);
    w[..] = tensor_tensor(u, broadcast_to(col, [128, 16, 8]), add);
    store(out[..], w);
    out
}

/// NKI 0.6: `permute` of the free axes, `expand_dim` and `broadcast`.
#[kernel]
fn permuted_06(a: Hbm<f32, 128, 8, 16>, c: Hbm<f32, 128, 1>) -> Hbm<f32, 128, 16, 8> {
    let out = ndarray([128, 16, 8], f32, SharedHbm);
    let t = ndarray([128, 8, 16], f32, Sbuf);
    nisa::dma_copy(dst = t, src = a);
    let col = ndarray([128, 1], f32, Sbuf);
    nisa::dma_copy(dst = col, src = c);
    let u = ndarray([128, 16, 8], f32, Sbuf);
    nisa::tensor_copy(dst = u, src = t.permute((0, 2, 1)));
    let w = ndarray([128, 16, 8], f32, Sbuf);
    nisa::tensor_tensor(
        dst = w,
        data1 = u,
        data2 = col.expand_dim(2).broadcast(1, 16).broadcast(2, 8),
        op = nl::add,
    );
    nisa::dma_copy(dst = out, src = w);
    out
}

#[test]
fn permute_and_broadcast_compile_to_the_2_26_views() {
    let old = permuted_226::KERNEL.program();
    let new = permuted_06::KERNEL.program();
    assert_eq!(body(old), body(new), "2.26:\n{old}\n0.6:\n{new}");
}

#[test]
fn permute_and_broadcast_move_the_elements_numpy_moves() {
    let a = rand_f32(Ix3(128, 8, 16), 2, -4.0, 4.0);
    let c = rand_f32(Ix2(128, 1), 3, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let out: Array3<f32> = permuted_06::host(&mut core, a.view(), c.view()).unwrap();
    for p in 0..128 {
        for j in 0..16 {
            for i in 0..8 {
                assert_eq!(out[[p, j, i]], a[[p, i, j]] + c[[p, 0]], "({p}, {j}, {i})");
            }
        }
    }
}

/// NKI 2.26: one partition of a tile, by a one-partition slice.
#[kernel]
fn row_226(a: Hbm<f32, 128, 64>) -> Hbm<f32, 1, 32> {
    let out = ndarray([1, 32], f32, SharedHbm);
    let t = load(a[..]);
    let r = ndarray([1, 32], f32, Sbuf);
    r[..] = tensor_copy(t[[5..6, 32..64]]);
    store(out[..], r);
    out
}

/// NKI 0.6: `select` on a tile's partition axis keeps the axis, one partition long.
#[kernel]
fn row_06(a: Hbm<f32, 128, 64>) -> Hbm<f32, 1, 32> {
    let out = ndarray([1, 32], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = t, src = a);
    let r = ndarray([1, 32], f32, Sbuf);
    nisa::tensor_copy(dst = r, src = t.select(0, 5).slice(1, 32, 64));
    nisa::dma_copy(dst = out, src = r);
    out
}

#[test]
fn select_of_a_partition_is_a_one_partition_slice() {
    let old = row_226::KERNEL.program();
    let new = row_06::KERNEL.program();
    assert_eq!(body(old), body(new), "2.26:\n{old}\n0.6:\n{new}");
    let a = rand_f32(Ix2(128, 64), 7, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let out = row_06::host(&mut core, a.view()).unwrap();
    for j in 0..32 {
        assert_eq!(out[[0, j]], a[[5, 32 + j]], "column {j}");
    }
}

/// NKI 2.26: row blocks of a tensor with a symbolic dimension, by slices.
#[kernel]
fn rows_226(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    for i in affine_range(N / 128) {
        let t = load(x[[i * 128..(i + 1) * 128, 0..64]]);
        let u = ndarray([128, 64], f32, Sbuf);
        u[..] = tensor_scalar(t, multiply, 2.0);
        store(out[[i * 128..(i + 1) * 128, 0..64]], u);
    }
    out
}

/// NKI 0.6: `slice` of the symbolic dimension with loop-affine bounds.
#[kernel]
fn rows_06(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    for i in affine_range(N / 128) {
        let t = ndarray([128, 64], f32, Sbuf);
        nisa::dma_copy(dst = t, src = x.slice(0, i * 128, (i + 1) * 128));
        let u = ndarray([128, 64], f32, Sbuf);
        nisa::tensor_scalar(dst = u, data = t, op0 = nl::multiply, operand0 = 2.0);
        nisa::dma_copy(dst = out.slice(0, i * 128, (i + 1) * 128), src = u);
    }
    out
}

#[test]
fn a_slice_of_a_symbolic_dimension_is_the_2_26_slice() {
    let old = rows_226::KERNEL.program();
    let new = rows_06::KERNEL.program();
    assert_eq!(body(old), body(new), "2.26:\n{old}\n0.6:\n{new}");
    let x = rand_f32(Ix2(256, 64), 8, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let out = rows_06::host(&mut core, x.view()).unwrap();
    for ((r, c), v) in out.indexed_iter() {
        assert_eq!(*v, 2.0 * x[[r, c]], "({r}, {c})");
    }
}

// ---- HBM views ----

/// An HBM tensor read transposed (`permute((1, 0))`, the DMA's strided partition axis), its
/// rows split (`reshape_dim`) and stepped (`slice` with a step), a dimension added and removed.
#[kernel]
fn hbm_views(a: Hbm<f32, 64, 128>, b: Hbm<f32, 128, 96>) -> (Hbm<f32, 128, 64>, Hbm<f32, 128, 32>) {
    let out_t = ndarray([128, 64], f32, SharedHbm);
    let out_s = ndarray([128, 32], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = t, src = a.permute((1, 0)));
    nisa::dma_copy(dst = out_t.expand_dim(1), src = t.expand_dim(1));
    // b's rows as [128, 3, 32]: the middle third, every row.
    let s = ndarray([128, 1, 32], f32, Sbuf);
    nisa::dma_copy(dst = s, src = b.reshape_dim(1, (3, -1)).slice(1, 1, 2));
    nisa::dma_copy(dst = out_s, src = s.squeeze_dim(1));
    (out_t, out_s)
}

#[test]
fn hbm_views_read_and_write_what_numpy_views_do() {
    let a = rand_f32(Ix2(64, 128), 4, -4.0, 4.0);
    let b = rand_f32(Ix2(128, 96), 5, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let (t, s): (Array2<f32>, Array2<f32>) =
        hbm_views::host(&mut core, a.view(), b.view()).unwrap();
    for p in 0..128 {
        for j in 0..64 {
            assert_eq!(t[[p, j]], a[[j, p]], "transpose ({p}, {j})");
        }
        for j in 0..32 {
            assert_eq!(s[[p, j]], b[[p, 32 + j]], "third ({p}, {j})");
        }
    }
}

// ---- merging axes ----

/// `flatten_dims` and `reshape` of a tile's free axes, and of a stepped view that stays
/// contiguous where it is merged.
#[kernel]
fn merged(a: Hbm<f32, 128, 4, 16>) -> (Hbm<f32, 128, 64>, Hbm<f32, 128, 2, 32>, Hbm<f32, 128, 32>) {
    let flat = ndarray([128, 64], f32, SharedHbm);
    let re = ndarray([128, 2, 32], f32, SharedHbm);
    let half = ndarray([128, 32], f32, SharedHbm);
    let t = ndarray([128, 4, 16], f32, Sbuf);
    nisa::dma_copy(dst = t, src = a);
    let f = ndarray([128, 64], f32, Sbuf);
    nisa::tensor_copy(dst = f, src = t.flatten_dims(1, 2));
    nisa::dma_copy(dst = flat, src = f);
    let r = ndarray([128, 2, 32], f32, Sbuf);
    nisa::tensor_copy(dst = r, src = t.reshape((128, 2, 32)));
    nisa::dma_copy(dst = re, src = r);
    // Rows 0 and 2 of each partition's [4, 16]: a stepped axis, merged with nothing.
    let h = ndarray([128, 2, 16], f32, Sbuf);
    nisa::tensor_copy(dst = h, src = t.slice(1, 0, 4, 2));
    nisa::dma_copy(dst = half.reshape_dim(1, (2, 16)), src = h);
    (flat, re, half)
}

#[test]
fn merged_axes_keep_the_row_major_order() {
    let a = rand_f32(Ix3(128, 4, 16), 6, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let (flat, re, half) = merged::host(&mut core, a.view()).unwrap();
    for p in 0..128 {
        for k in 0..64 {
            let want = a[[p, k / 16, k % 16]];
            assert_eq!(flat[[p, k]], want, "flat ({p}, {k})");
            assert_eq!(re[[p, k / 32, k % 32]], want, "reshape ({p}, {k})");
        }
        for r in 0..2 {
            for j in 0..16 {
                assert_eq!(
                    half[[p, r * 16 + j]],
                    a[[p, 2 * r, j]],
                    "half ({p}, {r}, {j})"
                );
            }
        }
    }
}

/// A view costs no instruction: a kernel that only copies through views has the copies alone.
#[test]
fn views_add_no_instruction() {
    let p = merged::KERNEL.program();
    let listing = p.to_string();
    let count = |m: &str| listing.lines().filter(|l| l.contains(m)).count();
    // One load, three tensor copies, three stores.
    assert_eq!(count("tensor_copy"), 3, "{listing}");
    assert_eq!(p.instrs().len(), 7, "{listing}");
}
