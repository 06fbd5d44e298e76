//! NKI 0.6's `t.rearrange(src_pattern, dst_pattern, fixed_sizes)` (einops' notation) on tiles,
//! HBM tensors and accesses: splits, a permutation and merges of axes in one call, which compile
//! to the same accesses as the `reshape_dim` / `permute` / `flatten_dims` chain, and move the
//! elements einops moves (checked against index arithmetic written out here).

use crate::common;

use common::*;
use nki::ndarray::{Array3, Ix2, Ix3};
use nki::prelude::*;

/// A program's listing without its first line (the signature, which names the kernel).
fn body(p: &nki::program::Program<'_>) -> String {
    p.to_string().lines().skip(1).collect::<Vec<_>>().join("\n")
}

/// NKI's docstring example: `(128, 24)` as `('b', ('h', 'w')) -> ('b', 'w', 'h')` with `h = 4`.
#[kernel]
fn split_swap(a: Hbm<f32, 128, 24>) -> Hbm<f32, 128, 6, 4> {
    let out = ndarray([128, 6, 4], f32, SharedHbm);
    let t = ndarray([128, 24], f32, Sbuf);
    nisa::dma_copy(dst = t, src = a);
    let u = ndarray([128, 6, 4], f32, Sbuf);
    nisa::tensor_copy(
        dst = u,
        src = t.rearrange(("b", ("h", "w")), ("b", "w", "h"), [("h", 4)]),
    );
    nisa::dma_copy(dst = out, src = u);
    out
}

/// The same view as the chain of the other views.
#[kernel]
fn split_swap_chain(a: Hbm<f32, 128, 24>) -> Hbm<f32, 128, 6, 4> {
    let out = ndarray([128, 6, 4], f32, SharedHbm);
    let t = ndarray([128, 24], f32, Sbuf);
    nisa::dma_copy(dst = t, src = a);
    let u = ndarray([128, 6, 4], f32, Sbuf);
    nisa::tensor_copy(dst = u, src = t.reshape_dim(1, (4, 6)).permute((0, 2, 1)));
    nisa::dma_copy(dst = out, src = u);
    out
}

#[test]
fn rearrange_compiles_to_the_chain_of_views() {
    let a = split_swap::KERNEL.program();
    let b = split_swap_chain::KERNEL.program();
    assert_eq!(body(a), body(b), "rearrange:\n{a}\nchain:\n{b}");
}

#[test]
fn a_split_and_swap_moves_what_einops_moves() {
    let a = rand_f32(Ix2(128, 24), 11, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let out: Array3<f32> = split_swap::host(&mut core, a.view()).unwrap();
    for b in 0..128 {
        for w in 0..6 {
            for h in 0..4 {
                // ('b', ('h', 'w')): column h * 6 + w.
                assert_eq!(out[[b, w, h]], a[[b, h * 6 + w]], "({b}, {w}, {h})");
            }
        }
    }
}

/// The tensor-view page's example (`(p, h*w, c) -> (p, c, h, w)`, `h` given, `w` inferred) on a
/// tile, a merge of contiguous axes (`(p, a, b) -> (p, (a b))`), and a rearrange of HBM: an
/// access read transposed (`(r, c) -> (c, r)`) and an output written through a split.
#[kernel]
fn several(
    x: Hbm<f32, 128, 12, 8>,
    y: Hbm<f32, 64, 128>,
) -> (
    Hbm<f32, 128, 8, 3, 4>,
    Hbm<f32, 128, 96>,
    Hbm<f32, 128, 64>,
    Hbm<f32, 128, 2, 48>,
) {
    let o1 = ndarray([128, 8, 3, 4], f32, SharedHbm);
    let o2 = ndarray([128, 96], f32, SharedHbm);
    let o3 = ndarray([128, 64], f32, SharedHbm);
    let o4 = ndarray([128, 2, 48], f32, SharedHbm);
    let t = ndarray([128, 12, 8], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x);
    let u = ndarray([128, 8, 3, 4], f32, Sbuf);
    nisa::tensor_copy(
        dst = u,
        src = t.rearrange(
            src_pattern = ("p", ("h", "w"), "c"),
            dst_pattern = ("p", "c", "h", "w"),
            fixed_sizes = [("h", 3)],
        ),
    );
    nisa::dma_copy(dst = o1, src = u);
    let f = ndarray([128, 96], f32, Sbuf);
    nisa::tensor_copy(
        dst = f,
        src = t.rearrange(("p", "a", "b"), ("p", ("a", "b"))),
    );
    nisa::dma_copy(dst = o2, src = f);
    let g = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = g, src = y.rearrange(("r", "c"), ("c", "r")));
    nisa::dma_copy(dst = o3, src = g);
    nisa::dma_copy(
        dst = o4,
        src = f.rearrange(("p", ("s", "k")), ("p", "s", "k"), ("s", 2)),
    );
    (o1, o2, o3, o4)
}

#[test]
fn rearranges_of_tiles_and_hbm_move_what_einops_moves() {
    let x = rand_f32(Ix3(128, 12, 8), 12, -4.0, 4.0);
    let y = rand_f32(Ix2(64, 128), 13, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let (o1, o2, o3, o4) = several::host(&mut core, x.view(), y.view()).unwrap();
    for p in 0..128 {
        for c in 0..8 {
            for h in 0..3 {
                for w in 0..4 {
                    // ('p', ('h', 'w'), 'c') with h = 3: row h * 4 + w.
                    assert_eq!(
                        o1[[p, c, h, w]],
                        x[[p, h * 4 + w, c]],
                        "o1 ({p}, {c}, {h}, {w})"
                    );
                }
            }
        }
        for k in 0..96 {
            assert_eq!(o2[[p, k]], x[[p, k / 8, k % 8]], "o2 ({p}, {k})");
            assert_eq!(
                o4[[p, k / 48, k % 48]],
                x[[p, k / 8, k % 8]],
                "o4 ({p}, {k})"
            );
        }
        for r in 0..64 {
            assert_eq!(o3[[p, r]], y[[r, p]], "o3 ({p}, {r})");
        }
    }
}
