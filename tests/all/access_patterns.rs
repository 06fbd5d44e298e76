//! NKI 0.6's `t.ap(pattern = [[step, count], ...], offset = n)` with static offsets, on SBUF
//! tiles and HBM tensors: `[step, count]` pairs over the storage flattened row-major. Checked
//! against NKI's own example (the same access as a `slice`) and against index arithmetic
//! written out here for patterns no other view makes (overlapping windows).

use crate::common;

use common::*;
use nki::ndarray::{Array3, Ix2};
use nki::prelude::*;

/// A program's listing without its first line (the signature, which names the kernel).
fn body(p: &nki::program::Program<'_>) -> String {
    p.to_string().lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[kernel]
fn sliced(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 16> {
    let out = ndarray([128, 16], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x);
    let u = ndarray([128, 16], f32, Sbuf);
    nisa::tensor_copy(dst = u, src = t.slice(dim = 1, start = 8, end = 24));
    nisa::dma_copy(dst = out, src = u);
    out
}

/// NKI's deep-dive example: `t.ap(pattern=[[64, 128], [1, 16]], offset=8)` is that slice.
#[kernel]
fn patterned(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 16> {
    let out = ndarray([128, 16], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x);
    let u = ndarray([128, 16], f32, Sbuf);
    nisa::tensor_copy(
        dst = u,
        src = t.ap(pattern = [[64, 128], [1, 16]], offset = 8),
    );
    nisa::dma_copy(dst = out, src = u);
    out
}

#[test]
fn nkis_example_is_the_slice() {
    let a = sliced::KERNEL.program();
    let b = patterned::KERNEL.program();
    assert_eq!(body(a), body(b), "slice:\n{a}\nap:\n{b}");
}

/// Overlapping windows of a tile (16 elements every 8), partitions 32..96 of it through an
/// offset past the first 32 rows, and an HBM tensor's odd columns of its last 128 rows.
#[kernel]
fn windows(
    x: Hbm<f32, 128, 64>,
    y: Hbm<f32, 256, 32>,
) -> (Hbm<f32, 128, 7, 16>, Hbm<f32, 64, 64>, Hbm<f32, 128, 16>) {
    let o_win = ndarray([128, 7, 16], f32, SharedHbm);
    let o_mid = ndarray([64, 64], f32, SharedHbm);
    let o_odd = ndarray([128, 16], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x);
    let w = ndarray([128, 7, 16], f32, Sbuf);
    nisa::tensor_copy(dst = w, src = t.ap([[64, 128], [8, 7], [1, 16]]));
    nisa::dma_copy(dst = o_win, src = w);
    let m = ndarray([64, 64], f32, Sbuf);
    nisa::tensor_copy(dst = m, src = t.ap([[64, 64], [1, 64]], 32 * 64));
    nisa::dma_copy(dst = o_mid, src = m);
    let d = ndarray([128, 16], f32, Sbuf);
    nisa::dma_copy(
        dst = d,
        src = y.ap(pattern = [[32, 128], [2, 16]], offset = 128 * 32 + 1),
    );
    nisa::dma_copy(dst = o_odd, src = d);
    (o_win, o_mid, o_odd)
}

#[test]
fn patterns_read_the_flattened_storage() {
    let x = rand_f32(Ix2(128, 64), 51, -4.0, 4.0);
    let y = rand_f32(Ix2(256, 32), 52, -4.0, 4.0);
    let mut core = NeuronCore::default();
    let (o_win, o_mid, o_odd): (Array3<f32>, _, _) =
        windows::host(&mut core, x.view(), y.view()).unwrap();
    for p in 0..128 {
        for w in 0..7 {
            for j in 0..16 {
                assert_eq!(
                    o_win[[p, w, j]],
                    x[[p, 8 * w + j]],
                    "window ({p}, {w}, {j})"
                );
            }
        }
        for j in 0..16 {
            assert_eq!(o_odd[[p, j]], y[[128 + p, 2 * j + 1]], "odd ({p}, {j})");
        }
    }
    for p in 0..64 {
        for j in 0..64 {
            assert_eq!(o_mid[[p, j]], x[[32 + p, j]], "mid ({p}, {j})");
        }
    }
}
