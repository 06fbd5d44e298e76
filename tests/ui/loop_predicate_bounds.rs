use nki::prelude::*;

// A predicate on loop indices bounds a tile's first row, not its last: rows 384..512 of the last
// tile pass `(2 * i + g) * 128 < 400` and reach past the 400 rows.
#[kernel]
fn row_tiles(x: Hbm<f32, 400, 64>) -> Hbm<f32, 400, 64> {
    let out = ndarray([400, 64], f32, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..64];
    for i in affine_range(2) {
        for g in affine_range(2) {
            let t = load(x[[(2 * i + g) * 128 + ix, iy]], mask = (2 * i + g) * 128 < 400);
            store(out[[(2 * i + g) * 128 + ix, iy]], t, mask = (2 * i + g) * 128 < 400);
        }
    }
    out
}

fn main() {}
