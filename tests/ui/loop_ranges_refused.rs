use nki::prelude::*;

// Loops with a start or a step that the language cannot express.
#[kernel]
fn ranges(x: Hbm<f32, K, 512>) -> Hbm<f32, K, 512> {
    let out = ndarray([K, 512], f32, SharedHbm);
    for k in sequential_range(0, 4, 0) {
        store(out[[k..k + 1, 0..512]], load(x[[k..k + 1, 0..512]]));
    }
    for k in static_range(0, 8, 2, 1) {
        store(out[[k..k + 1, 0..512]], load(x[[k..k + 1, 0..512]]));
    }
    // NKI's keywords, bound as `affine_range(start, stop=None, step=1)` binds them.
    for k in affine_range(stop = 4) {
        store(out[[k..k + 1, 0..512]], load(x[[k..k + 1, 0..512]]));
    }
    for k in affine_range(1, start = 2) {
        store(out[[k..k + 1, 0..512]], load(x[[k..k + 1, 0..512]]));
    }
    for k in affine_range(start = 1, 4) {
        store(out[[k..k + 1, 0..512]], load(x[[k..k + 1, 0..512]]));
    }
    for k in sequential_range(1, 4, stride = 2) {
        store(out[[k..k + 1, 0..512]], load(x[[k..k + 1, 0..512]]));
    }
    for i in affine_range(4) {
        for j in affine_range(i, 4) {
            store(out[[j..j + 1, 0..512]], load(x[[j..j + 1, 0..512]]));
        }
        for j in sequential_range(i + 1) {
            store(out[[j..j + 1, 0..512]], load(x[[j..j + 1, 0..512]]));
        }
    }
    out
}

fn main() {}
