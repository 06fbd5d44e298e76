//! A matmul's moving operand read again from SBUF: the host keeps its packing while the tile's
//! bytes are unchanged and packs it anew after any write that may reach them (a streamed
//! instruction writing the tile in place, a DMA into it), on every host path, against plain
//! f64 loops.

use crate::common;

use common::*;
use nki::bf16;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `x` [128, 512] read by three matmuls with the stationary `s` [128, 128] between writes of
/// another SBUF tile, then rewritten in place (`x + 1`, a streamed instruction) and read three
/// times more, then reloaded from `y` by a DMA and read three times more: the nine products
/// side by side in `[128, 9 · 512]`.
#[kernel]
fn moving_read_again(
    s: Hbm<bf16, 128, 128>,
    x: Hbm<bf16, 128, 512>,
    y: Hbm<bf16, 128, 512>,
) -> Hbm<f32, 128, 4608> {
    let out = ndarray([128, 4608], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    let st = load(s[..]);
    let mv = ndarray([128, 512], bf16, Sbuf);
    mv[..] = load(x[..]);
    let other = ndarray([128, 512], bf16, Sbuf);
    for phase in static_range(3) {
        if phase == 1 {
            nisa::tensor_scalar(mv, mv, add, 1.0);
        }
        if phase == 2 {
            mv[..] = load(y[..]);
        }
        for i in static_range(3) {
            let p = ndarray([128, 512], f32, Psum);
            nisa::nc_matmul(p, st, mv, accumulate = false);
            // A write of other columns of SBUF between the reads.
            nisa::tensor_scalar(other, mv, multiply, 3.0);
            store(out[[ip, (phase * 3 + i) * 512 + jf]], p);
        }
    }
    out
}

#[test]
fn a_moving_tile_read_again_gives_its_current_products() {
    // Small integers: every product and sum is exact.
    let small = |seed: u64| rand_int(Ix2(128, 512), seed, -4, 4).mapv(bf16::from_f32);
    let s = rand_int(Ix2(128, 128), 51, -3, 3).mapv(bf16::from_f32);
    let (x, y) = (small(52), small(53));
    let product = |m: &Array2<f64>| {
        Array2::from_shape_fn((128, 512), |(i, j)| {
            (0..128)
                .map(|k| f64::from(s[[k, i]]) * m[[k, j]])
                .sum::<f64>()
        })
    };
    let f = |a: &Array2<bf16>| a.mapv(f64::from);
    let phases = [
        product(&f(&x)),
        product(&f(&x).mapv(|v| v + 1.0)),
        product(&f(&y)),
    ];
    for (what, mut core) in host_paths() {
        // Twice: the second launch finds what the first kept.
        for launch in 0..2 {
            let got = moving_read_again::host(&mut core, s.view(), x.view(), y.view()).unwrap();
            for r in 0..9 {
                let want = &phases[r / 3];
                for ((i, j), &w) in want.indexed_iter() {
                    let v = got[[i, r * 512 + j]];
                    assert_eq!(
                        f64::from(v),
                        w,
                        "{what}, launch {launch}, read {r}: [{i}, {j}]"
                    );
                }
            }
        }
    }
}
