use nki::prelude::*;

#[kernel]
fn nc_n_gather_refused(
    a: Hbm<f32, 128, 64>,
    i: Hbm<i32, 128, 8>,
    u: Hbm<u32, 128, 8>,
) -> Hbm<f32, 128, 8> {
    let out = ndarray([128, 8], f32, SharedHbm);
    let x = load(a[..]);
    let ints = load(i[..]);
    let idx = load(u[..]);
    let g = ndarray([128, 8], f32, Sbuf);
    // The indices are uint32 (gather_flattened also takes int32).
    nc_n_gather(dst = g, data = x, indices = ints);
    // The destination has the data's dtype: no conversion.
    let h = ndarray([128, 8], bf16, Sbuf);
    nc_n_gather(dst = h, data = x, indices = idx);
    // NKI's call takes no mask.
    let i_p = arange(128).p();
    nc_n_gather(dst = g, data = x, indices = idx, mask = i_p < 64);
    store(out[..], g);
    out
}

fn main() {}
