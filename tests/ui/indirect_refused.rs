use nki::prelude::*;

// NKI's refusals of indirect indices: on a free axis or beside an `mgrid` component
// (err_indirect_indices_free_dim), in `load_transpose2d`
// (err_indirect_indices_are_not_supported_with_nki_api), on an SBUF tile
// (err_copy_dynamic_indirect_indices_not_natively_supported), float or wide indices, and
// `atomic_rmw` without indices or with another operation.
#[kernel]
fn indirect_refused(data: Hbm<f32, 128, 64>, idx_in: Hbm<i32, 64, 1>) -> Hbm<f32, 64, 64> {
    let out = ndarray([64, 64], f32, SharedHbm);
    let idx = load(idx_in[..]);
    let i_p = arange(64).p();
    let i_f = arange(64).x();
    let a = load(data[[i_p, idx]]);
    let (g_p, g_f) = mgrid![0..64, 0..64];
    let b = load(data[[idx, g_f]]);
    let c = load_transpose2d(data[[idx, i_f]]);
    let t = load(data[[0..64, 0..64]]);
    let d = t[[idx, i_f]];
    let f = memset([64, 1], 1.0, f32);
    let e = load(data[[f, i_f]]);
    let w = load(data[[idx_in, i_f]]);
    atomic_rmw(out[[i_p, i_f]], value = t, op = add);
    atomic_rmw(out[[idx, i_f]], value = t, op = multiply);
    store(out[[idx, i_f]], t);
    out
}

fn main() {}
