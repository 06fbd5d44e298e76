use nki::prelude::*;

#[kernel]
fn top8_sizes(
    a: Hbm<f32, 128, 4>,
    b: Hbm<f32, 128, 16400>,
) -> (Hbm<f32, 128, 8>, Hbm<u32, 128, 8>, Hbm<f32, 128, 16400>) {
    let o1 = ndarray([128, 8], f32, SharedHbm);
    let o2 = ndarray([128, 8], u32, SharedHbm);
    let o3 = ndarray([128, 16400], f32, SharedHbm);
    let small = load(a[..]);
    let wide = load(b[..]);
    // Fewer than 8 elements per partition.
    store(o1[..], max8(small));
    // More than 16384.
    let top = max8(wide[[0..128, 0..16]]);
    store(o2[..], nc_find_index8(wide, top));
    store(o3[..], nc_match_replace8(wide, top, 0.0));
    (o1, o2, o3)
}

fn main() {}
