use nki::prelude::*;

// Quotients and sums of symbolic dimensions are symbols of their own (trip counts, shapes); a
// difference of two dimensions, a remainder, a dimension minus a literal as a shape, and a
// quotient as an index's coefficient are not.
#[kernel]
fn symbolic_arithmetic_refused(x: Hbm<f32, H, 64>, k: Hbm<f32, KH, 64>) -> Hbm<f32, H, 64> {
    let out = ndarray([H, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..1, 0..64];
    for i in affine_range(H - KH) {
        store(out[[i + ip, jf]], load(x[[i + ip, jf]]));
    }
    for i in affine_range(H % KH) {
        store(out[[i + ip, jf]], load(x[[i + ip, jf]]));
    }
    for g in affine_range(KH) {
        for i in affine_range(H / KH) {
            let t = load(x[[g * (H / KH) + i + ip, jf]]);
            store(out[[i + ip, jf]], t);
        }
    }
    let r = x.reshape([H - 1, 64]);
    out
}

fn main() {}
