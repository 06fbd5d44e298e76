use nki::prelude::*;

// An `if` on loop indices predicates its branches' instructions: its condition cannot split an
// instruction's elements, the `else` of joined conditions is no box, and it yields no value.
#[kernel]
fn predicated_if_refused(x: Hbm<f32, 512, 128>) -> Hbm<f32, 512, 128> {
    let out = ndarray([512, 128], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..128];
    for i in affine_range(4) {
        let t = load(x[[i * 128 + ip, jf]]);
        if ip < 64 {
            t[..] = multiply(t, 2.0);
        }
        if (i < 2) & (i > 0) {
            t[..] = multiply(t, 2.0);
        } else {
            t[..] = multiply(t, 3.0);
        }
        let u = if i < 2 { multiply(t, 2.0) } else { multiply(t, 3.0) };
        store(out[[i * 128 + ip, jf]], u);
    }
    out
}

fn main() {}
