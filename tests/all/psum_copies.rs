//! PSUM operands where NKI inserts the copy: `matmul` (`nl.matmul`) of a tile still in PSUM,
//! `affine_select` of a PSUM tile (GpSimd cannot read PSUM) and a TensorE transpose assigned
//! into an SBUF tile, against plain loops; `nc_matmul` still refuses a PSUM operand (a UI test).

use crate::common;

use common::*;
use nki::ndarray::Ix2;
use nki::prelude::*;

/// Three operands NKI copies out of PSUM, or into it: `matmul` (`nl.matmul`) of a transpose
/// still in PSUM, `affine_select` of a PSUM tile (GpSimd cannot read PSUM), and a TensorE
/// transpose assigned into an SBUF tile.
#[kernel]
fn psum_operands_copied(
    x: Hbm<f32, 128, 128>,
    y: Hbm<f32, 128, 512>,
) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 128>, Hbm<f32, 128, 128>) {
    let prod = ndarray([128, 512], f32, SharedHbm);
    let lower = ndarray([128, 128], f32, SharedHbm);
    let xt_out = ndarray([128, 128], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    let xs = load(x[..]);
    let ys = load(y[..]);
    // xᵀ in PSUM, multiplied as xtᵀ · y = x · y.
    let xt = nc_transpose(xs);
    let p = matmul(xt, ys, transpose_x = true);
    store(prod[..], copy(p, f32));
    // The lower triangle of xᵀ, read from PSUM.
    store(lower[..], affine_select(i_f <= i_p, xt, 0.0));
    // xᵀ written into an SBUF tile.
    let t = ndarray([128, 128], f32, Sbuf);
    t[..] = nc_transpose(xs);
    store(xt_out[..], t);
    (prod, lower, xt_out)
}

#[test]
fn psum_operands_are_copied_where_nki_copies_them() {
    let x = rand_int(Ix2(128, 128), 31, -4, 4);
    let y = rand_int(Ix2(128, 512), 32, -4, 4);
    let mut core = NeuronCore::default();
    let (prod, lower, xt) = psum_operands_copied::host(&mut core, x.view(), y.view()).unwrap();
    for ((i, j), &v) in prod.indexed_iter() {
        // Small integers: every product and sum is exact.
        let want: f64 = (0..128)
            .map(|k| f64::from(x[[i, k]]) * f64::from(y[[k, j]]))
            .sum();
        assert_eq!(f64::from(v), want, "x·y [{i}, {j}]");
    }
    for ((i, j), &v) in xt.indexed_iter() {
        assert_eq!(v, x[[j, i]], "xᵀ [{i}, {j}]");
        let want = if j <= i { x[[j, i]] } else { 0.0 };
        assert_eq!(lower[[i, j]], want, "lower [{i}, {j}]");
    }
    let program = psum_operands_copied::KERNEL.program();
    let copies = program
        .instrs()
        .iter()
        .filter(|ins| ins.opcode == nki::program::Opcode::TensorCopy)
        .count();
    // One per inserted copy (matmul's operand, affine_select's, the transpose's eviction), one
    // for `copy(p, f32)`.
    assert_eq!(copies, 4, "{program}");
}
