use nki::prelude::*;

// `N - 2` bounds an index in a mask from above; a trip count or a shape is `K`, `K / c` or
// `(K + a) / c`.
#[kernel]
fn symbol_minus_literal(x: Hbm<f32, 128, N>) -> Hbm<f32, 128, N> {
    let out = ndarray([128, N], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    for t in affine_range(N - 2) {
        let a = load(x[[ip, t * 512 + jf]], mask = t * 512 + jf < N - 2);
        store(out[[ip, t * 512 + jf]], a, mask = t * 512 + jf < N - 2);
    }
    out
}

fn main() {}
