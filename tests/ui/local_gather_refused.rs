use nki::prelude::*;

#[kernel]
fn local_gather_refused(
    a: Hbm<f32, 128, 64>,
    b: Hbm<u16, 128, 4>,
    c: Hbm<i32, 128, 4>,
    e: Hbm<u16, 128, 2, 2>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let ix = load(b[..]);
    let wide = load(c[..]);
    let ix3 = load(e[..]);
    // Indices are uint16, in a [P, C] tile.
    let g = local_gather(x, wide);
    let g = local_gather(x, ix3);
    // A multiple of 16 partitions, the same for both.
    let g = local_gather(x[[0..8, 0..64]], ix[[0..8, 0..4]]);
    let g = local_gather(x, ix[[0..64, 0..4]]);
    // 1, 2, 4, 8, 16 or 32 elements per index; 1 to 16 · 4 indices.
    let g = local_gather(x, ix, 3);
    let g = local_gather(x, ix, 1, 65);
    // GpSimd cannot read PSUM.
    let p = ndarray([128, 64], f32, Psum);
    p[..] = 0.0;
    let g = local_gather(p, ix);
    // Not maskable.
    let (i_p, i_f) = mgrid![0..128, 0..4];
    let g = local_gather(x, ix[[i_p, i_f]], mask = i_p < 64);
    store(out[..], x);
    out
}

fn main() {}
