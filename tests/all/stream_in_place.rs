//! Elementwise instructions whose fp32 results go straight into their destination (runs of
//! at least 64 contiguous elements): sources beside the destination in the same partitions
//! (before and after it), the destination rewritten in place, sources in other partitions and
//! in PSUM, and a PSUM destination, on every host path, against plain f64 loops. (A source
//! that partly overlaps its destination runs with the definition, `exec::overlap`.)

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2, s};
use nki::prelude::*;

/// `x`, `y` [128, 1024] into one SBUF tile `w` [128, 3072] (`x`, `y`, then a third block),
/// then six instructions, each result stored to a block of `out` [128, 7 · 1024]:
/// 0. `w[:, 2048..]  = x · y` (sources before the destination);
/// 1. `w[:, ..1024]  = y − w[:, 2048..]` (sources after it);
/// 2. `w[:, 1024..2048] += x` as `w = w + x` (the destination rewritten in place);
/// 3. `w[:, 256..768] = 2 · w[:, 2048..2560]` (part of a row, the source after it);
/// 4. `v[..64, :] = w[64.., ..1024] · w[..64, 2048..]` (sources in other partitions);
/// 5. `p = w[:, ..1024] + w[:, 2048..]` in PSUM, then `w[:, 2048..] = p · x` (a PSUM
///    destination, then a PSUM source).
#[kernel]
fn in_place_results(x: Hbm<f32, 128, 1024>, y: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 7168> {
    let out = ndarray([128, 7168], f32, SharedHbm);
    let w = ndarray([128, 3072], f32, Sbuf);
    nisa::dma_copy(dst = w[[.., 0..1024]], src = x);
    nisa::dma_copy(dst = w[[.., 1024..2048]], src = y);
    nisa::tensor_tensor(
        w[[.., 2048..3072]],
        w[[.., 0..1024]],
        w[[.., 1024..2048]],
        nl::multiply,
    );
    nisa::dma_copy(dst = out[[.., 0..1024]], src = w[[.., 2048..3072]]);
    nisa::tensor_tensor(
        w[[.., 0..1024]],
        w[[.., 1024..2048]],
        w[[.., 2048..3072]],
        nl::subtract,
    );
    nisa::dma_copy(dst = out[[.., 1024..2048]], src = w[[.., 0..1024]]);
    let xs = ndarray([128, 1024], f32, Sbuf);
    nisa::dma_copy(dst = xs, src = x);
    nisa::tensor_tensor(w[[.., 1024..2048]], w[[.., 1024..2048]], xs, nl::add);
    nisa::dma_copy(dst = out[[.., 2048..3072]], src = w[[.., 1024..2048]]);
    nisa::tensor_scalar(w[[.., 256..768]], w[[.., 2048..2560]], multiply, 2.0);
    nisa::dma_copy(dst = out[[.., 3072..4096]], src = w[[.., 0..1024]]);
    let v = ndarray([64, 1024], f32, Sbuf);
    nisa::tensor_tensor(
        v,
        w[[64..128, 0..1024]],
        w[[0..64, 2048..3072]],
        nl::multiply,
    );
    nisa::dma_copy(dst = out[[0..64, 4096..5120]], src = v);
    nisa::dma_copy(dst = out[[64..128, 4096..5120]], src = v);
    let p = ndarray([128, 512], f32, Psum);
    nisa::tensor_tensor(p, w[[.., 0..512]], w[[.., 2048..2560]], nl::add);
    nisa::dma_copy(dst = out[[.., 5120..5632]], src = p);
    nisa::dma_copy(dst = out[[.., 5632..6144]], src = p);
    nisa::tensor_tensor(w[[.., 2048..2560]], p, xs[[.., 0..512]], nl::multiply);
    nisa::dma_copy(dst = out[[.., 6144..6656]], src = w[[.., 2048..2560]]);
    nisa::dma_copy(dst = out[[.., 6656..7168]], src = w[[.., 2048..2560]]);
    out
}

/// f32 arithmetic through f64: the exact sum or product of two f32 values in `[-3, 3]`,
/// rounded once.
fn r(v: f64) -> f64 {
    f64::from(v as f32)
}

#[test]
fn results_written_in_place_are_the_lanes_results() {
    let x = rand_f32(Ix2(128, 1024), 61, -3.0, 3.0).mapv(f64::from);
    let y = rand_f32(Ix2(128, 1024), 62, -3.0, 3.0).mapv(f64::from);
    let mut want = Array2::<f64>::zeros((128, 7168));
    // The tile `w`, column blocks of 1024, as the instructions leave it.
    let mut w = Array2::<f64>::zeros((128, 3072));
    w.slice_mut(s![.., 0..1024]).assign(&x);
    w.slice_mut(s![.., 1024..2048]).assign(&y);
    for i in 0..128 {
        for j in 0..1024 {
            w[[i, 2048 + j]] = r(x[[i, j]] * y[[i, j]]);
        }
    }
    want.slice_mut(s![.., 0..1024])
        .assign(&w.slice(s![.., 2048..3072]));
    for i in 0..128 {
        for j in 0..1024 {
            w[[i, j]] = r(w[[i, 1024 + j]] - w[[i, 2048 + j]]);
        }
    }
    want.slice_mut(s![.., 1024..2048])
        .assign(&w.slice(s![.., 0..1024]));
    for i in 0..128 {
        for j in 0..1024 {
            w[[i, 1024 + j]] = r(w[[i, 1024 + j]] + x[[i, j]]);
        }
    }
    want.slice_mut(s![.., 2048..3072])
        .assign(&w.slice(s![.., 1024..2048]));
    for i in 0..128 {
        for j in 0..512 {
            w[[i, 256 + j]] = 2.0 * w[[i, 2048 + j]];
        }
    }
    want.slice_mut(s![.., 3072..4096])
        .assign(&w.slice(s![.., 0..1024]));
    for i in 0..64 {
        for j in 0..1024 {
            let v = r(w[[64 + i, j]] * w[[i, 2048 + j]]);
            want[[i, 4096 + j]] = v;
            want[[64 + i, 4096 + j]] = v;
        }
    }
    for i in 0..128 {
        for j in 0..512 {
            let p = r(w[[i, j]] + w[[i, 2048 + j]]);
            want[[i, 5120 + j]] = p;
            want[[i, 5632 + j]] = p;
            let q = r(p * x[[i, j]]);
            want[[i, 6144 + j]] = q;
            want[[i, 6656 + j]] = q;
        }
    }
    let (xf, yf) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
    for (what, mut core) in host_paths() {
        let got = in_place_results::host(&mut core, xf.view(), yf.view()).unwrap();
        for ((i, j), &w) in want.indexed_iter() {
            assert_eq!(f64::from(got[[i, j]]), w, "{what}: [{i}, {j}]");
        }
    }
}
