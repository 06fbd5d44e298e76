//! Indexing forms of NKI kernels, against plain loops: a view of a tile indexed again (NKI's
//! pattern of passing `buf[g]` or `t[:, 0:256]` to a helper that indexes it: the indices are
//! the view's, composed with its place in the tile; indexing past the view is a compile error,
//! a UI test), an index grid itself as the index (`x[g]` for `g = nl.mgrid[...]`), and NKI's
//! instruction labels `name = "..."`, accepted on any call.

use crate::common;

use common::*;
use nki::ndarray::Ix2;
use nki::prelude::*;

/// Doubles the first 64 rows and last 128 columns of a `[128, 256]` view it is given.
#[helper]
fn double_corner(v: Tile) {
    let (i_p, i_f) = mgrid![0..64, 0..128];
    v[[i_p, 128 + i_f]] = multiply(v[[i_p, 128 + i_f]], 2.0);
}

/// `t` is `[128, 512]`; its right half `t[[0..128, 256..512]]` goes to the helper, so the
/// doubled block is rows 0..64, columns 384..512. A strided view (every other column of the
/// left half) is indexed again too: its columns 0..64 (tile columns 0, 2, …, 126) are negated.
#[kernel]
fn views_indexed_again(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(x[..]);
    double_corner(t[[0..128, 256..512]]);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    let even = t[[i_p, 2 * i_f]];
    let (j_p, j_f) = mgrid![0..128, 0..64];
    even[[j_p, j_f]] = multiply(even[[j_p, j_f]], -1.0);
    store(out[..], t);
    out
}

#[test]
fn a_view_indexed_again_addresses_its_own_elements() {
    let x = rand_f32(Ix2(128, 512), 8, -10.0, 10.0);
    let mut core = NeuronCore::default();
    let out = views_indexed_again::host(&mut core, x.view()).unwrap();
    for ((r, c), &v) in out.indexed_iter() {
        let mut want = x[[r, c]];
        if r < 64 && c >= 384 {
            want *= 2.0;
        }
        if c < 128 && c % 2 == 0 {
            want = -want;
        }
        assert_eq!(v.to_bits(), want.to_bits(), "[{r}, {c}]");
    }
}

/// `x[g]` and `out[g]` for `g = mgrid![...]`: the grid's axes index the tensor's.
#[kernel]
fn grid_as_index(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let g = mgrid![0..128, 0..64];
    let t = load(x[g], name = "x_tile");
    store(out[g], exp(t, name = "exp_x"), name = "store_out");
    out
}

#[test]
fn an_index_grid_indexes_as_its_axes() {
    let x = rand_f32(Ix2(128, 64), 9, -2.0, 2.0);
    let mut core = NeuronCore::default();
    let out = grid_as_index::host(&mut core, x.view()).unwrap();
    for ((r, c), &v) in out.indexed_iter() {
        let want = f64::from(x[[r, c]]).exp();
        // docs/numerics.md: `exp` within 1.013 ulp; an f32 ulp is at most 2^-23 of the value.
        let ulp = f64::from(f32::EPSILON) * want;
        assert!(
            (f64::from(v) - want).abs() <= 1.013 * ulp,
            "[{r}, {c}]: {v} vs {want}"
        );
    }
}

/// A fifth `arange` axis (`.w()`): NKI's `nl.arange(n)[None, None, None, None, :]` on a tile of
/// five axes. The kernel reads `x` `[128, 2, 3, 4, 5]` through an `arange` per axis and writes
/// each element times 2.
#[kernel]
fn five_axes(x: Hbm<f32, 128, 2, 3, 4, 5>) -> Hbm<f32, 128, 2, 3, 4, 5> {
    let out = ndarray([128, 2, 3, 4, 5], f32, SharedHbm);
    let (p, a, b, c, d) = (
        arange(128).p(),
        arange(2).x(),
        arange(3).y(),
        arange(4).z(),
        arange(5).w(),
    );
    let t = load(x[[p, a, b, c, d]]);
    store(out[[p, a, b, c, d]], multiply(t, 2.0));
    out
}

#[test]
fn a_fifth_arange_axis_indexes_the_last_axis_of_a_five_axis_tile() {
    let x = nki::ndarray::Array5::from_shape_fn((128, 2, 3, 4, 5), |(p, a, b, c, d)| {
        (p * 120 + a * 60 + b * 20 + c * 5 + d) as f32
    });
    let out = five_axes::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(out, x.mapv(|v| v * 2.0));
}
