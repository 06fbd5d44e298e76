//! Instructions whose rows the two host threads split by blocks of 32 partitions (even blocks
//! to the calling thread, odd ones to the worker) so that each partition stays with one thread:
//! a load, two streamed instructions and a store of a tile that starts at partition 8 (its
//! first block short), from and to HBM rows of another width, on every host path, against
//! plain f64 loops.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `out[i, j] = 2 · x[8 + i, j] + 1` for the first 4096 columns of `x`, through partitions
/// `8..128` of a tile.
#[kernel]
fn rows_from_partition_8(x: Hbm<f32, 128, 8192>) -> Hbm<f32, 120, 4096> {
    let out = ndarray([120, 4096], f32, SharedHbm);
    let t = ndarray([128, 4096], f32, Sbuf);
    nisa::dma_copy(dst = t[[8..128, ..]], src = x[[8..128, 0..4096]]);
    nisa::tensor_scalar(t[[8..128, ..]], t[[8..128, ..]], multiply, 2.0);
    let u = ndarray([128, 4096], f32, Sbuf);
    nisa::tensor_scalar(u[[8..128, ..]], t[[8..128, ..]], add, 1.0);
    nisa::dma_copy(dst = out, src = u[[8..128, ..]]);
    out
}

#[test]
fn rows_split_by_blocks_of_partitions_give_the_serial_results() {
    let x = rand_f32(Ix2(128, 8192), 71, -3.0, 3.0);
    let want = Array2::from_shape_fn((120, 4096), |(i, j)| {
        f64::from((2.0 * f64::from(x[[8 + i, j]]) + 1.0) as f32)
    });
    for (what, mut core) in host_paths() {
        for launch in 0..2 {
            let got = rows_from_partition_8::host(&mut core, x.view()).unwrap();
            for ((i, j), &w) in want.indexed_iter() {
                assert_eq!(
                    f64::from(got[[i, j]]),
                    w,
                    "{what}, launch {launch}: [{i}, {j}]"
                );
            }
        }
    }
}
