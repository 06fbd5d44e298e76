use nki::prelude::*;

#[kernel]
fn nc_stream_shuffle_refused(
    a: Hbm<f32, 128, 64>,
    b: Hbm<bf16, 128, 64>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let h = load(b[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    let w = ndarray([128, 32], f32, Sbuf);
    let rot = 0;
    // dst has src's dtype and its elements per partition.
    nc_stream_shuffle(h, d, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
    nc_stream_shuffle(x, w, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
    // 32 entries, each a partition of the quadrant or 255.
    nc_stream_shuffle(x, d, [0, 1, 2]);
    nc_stream_shuffle(x, d, [32, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
    nc_stream_shuffle(x, d, rot);
    // Entries name partitions src has.
    nc_stream_shuffle(x[[0..4, 0..64]], d[[0..32, 0..64]], [0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    // 64 active partitions start at 0 or 64.
    nc_stream_shuffle(x[[32..96, 0..64]], d[[0..64, 0..64]], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
    // It writes its dst and returns nothing.
    let e = nc_stream_shuffle(x, d, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
    store(out[..], d);
    out
}

fn main() {}
