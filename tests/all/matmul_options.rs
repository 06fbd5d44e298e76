//! `nc_matmul`'s keyword options that leave its result as it is: the hints
//! `is_stationary_onezero`, `is_moving_onezero`, `is_transpose` (an identity `moving`: a PE
//! transpose, as `rmsnorm_qkv` writes it) and the PE array's tiling `tile_position` /
//! `tile_size` (NKI's nc_matmul example 3: four 64 × 64 matmuls side by side); against plain
//! loops. Their limits are UI tests.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `xᵀ` by `nc_matmul(x, identity, is_transpose = true)`, and `aᵀ · b` of 64 × 64 quarters by
/// four tiled matmuls: quarter (r, c) of the result is `a[r]ᵀ · b[c]` (rows r·64.., columns
/// c·64.. of `a` and `b`).
#[kernel(target = trn2)]
fn matmul_options(
    x: Hbm<bf16, 128, 128>,
    identity: Hbm<bf16, 128, 128>,
    a: Hbm<bf16, 64, 128>,
    b: Hbm<bf16, 64, 128>,
) -> (Hbm<f32, 128, 128>, Hbm<f32, 128, 128>) {
    let xt_out = ndarray([128, 128], f32, SharedHbm);
    let quarters = ndarray([128, 128], f32, SharedHbm);
    let xs = load(x[..]);
    let id = load(identity[..]);
    let t = nc_matmul(xs, id, is_transpose = true, is_moving_onezero = true);
    store(xt_out[..], copy(t, f32));
    let at = load(a[..]);
    let bt = load(b[..]);
    for r in static_range(2) {
        for c in static_range(2) {
            let q = nc_matmul(
                at[[0..64, r * 64..(r + 1) * 64]],
                bt[[0..64, c * 64..(c + 1) * 64]],
                tile_position = (r * 64, c * 64),
                tile_size = (64, 64),
            );
            store(
                quarters[[r * 64..(r + 1) * 64, c * 64..(c + 1) * 64]],
                copy(q, f32),
            );
        }
    }
    (xt_out, quarters)
}

#[test]
fn matmul_hints_and_pe_tiling_leave_the_product_as_it_is() {
    let x = rand_int(Ix2(128, 128), 1, -8, 8);
    let identity = Array2::<f32>::eye(128);
    let a = rand_int(Ix2(64, 128), 2, -4, 4);
    let b = rand_int(Ix2(64, 128), 3, -4, 4);
    let bf = |m: &Array2<f32>| m.mapv(bf16::from_f32);
    let mut core = NeuronCore::new(Target::Trn2);
    let (xt, quarters) = matmul_options::host(
        &mut core,
        bf(&x).view(),
        bf(&identity).view(),
        bf(&a).view(),
        bf(&b).view(),
    )
    .unwrap();
    for ((i, j), &v) in xt.indexed_iter() {
        assert_eq!(v, x[[j, i]], "xᵀ [{i}, {j}]");
    }
    for ((i, j), &v) in quarters.indexed_iter() {
        let (r, c) = (i / 64, j / 64);
        // Small integers: exact.
        let want: f64 = (0..64)
            .map(|k| f64::from(a[[k, r * 64 + i % 64]]) * f64::from(b[[k, c * 64 + j % 64]]))
            .sum();
        assert_eq!(f64::from(v), want, "quarter ({r}, {c}) [{i}, {j}]");
    }
}
