//! A partition start set by a loop variable (`t[i * 32 + i_p, ...]`, `t[ds(i * 64, 64), ..]`,
//! `t[i * 64..(i + 1) * 64, ..]`): each iteration's view starts where the loop puts it, on the
//! partitions the engines can start an access at; against plain loops, plainly and strictly.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// Row block `i` of `x` (32 rows) lands in partitions `32 i ..`; the tile is then negated
/// whole. Writes `t[i * 32 + i_p, i_f]`.
#[kernel]
fn quadrants(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    let (i_p, i_f) = mgrid![0..32, 0..64];
    for i in affine_range(4) {
        t[[i * 32 + i_p, i_f]] = load(x[[i * 32 + i_p, i_f]]);
    }
    store(out, negative(t));
    out
}

/// Two halves of 64 partitions, as select_and_scatter loads two batches: the half `h` of
/// `x` (rows `64 h ..`) is read from the tile through `ds(h * 64, 64)` and `h * 64..(h + 1) *
/// 64`, added to itself, and stored in swapped order.
#[kernel]
fn halves(x: Hbm<f32, 128, 32>) -> Hbm<f32, 128, 32> {
    let out = ndarray([128, 32], f32, SharedHbm);
    let t = load(x);
    for h in affine_range(2) {
        let a = copy(t[[ds(h * 64, 64), ..]]);
        let b = copy(t[[h * 64..(h + 1) * 64, ..]]);
        store(out[[(1 - h) * 64 + arange(64).p(), arange(32).x()]], a + b);
    }
    out
}

#[test]
fn loop_variable_partition_starts_match_plain_loops() {
    let x = rand_f32(Ix2(128, 64), 31, -3.0, 3.0);
    let y = rand_f32(Ix2(128, 32), 32, -3.0, 3.0);
    for strict in [false, true] {
        let mut core = NeuronCore::default().with_strict(strict);
        let got = quadrants::host(&mut core, x.view()).unwrap();
        assert_eq!(got, x.mapv(|v| -v), "quadrants, strict {strict}");
        let got = halves::host(&mut core, y.view()).unwrap();
        let mut want = Array2::<f32>::zeros((128, 32));
        for h in 0..2 {
            for p in 0..64 {
                for f in 0..32 {
                    let v = y[[h * 64 + p, f]];
                    want[[(1 - h) * 64 + p, f]] = v + v;
                }
            }
        }
        assert_eq!(got, want, "halves, strict {strict}");
    }
}

#[test]
fn the_listing_shows_the_loop_variable_start() {
    let listing = quadrants::KERNEL.program().to_string();
    assert!(listing.contains("{p+0+(32*i)"), "{listing}");
}
