use nki::prelude::*;

#[kernel]
fn top8_operands(a: Hbm<f32, 128, 64>) -> (Hbm<f32, 128, 8>, Hbm<u32, 128, 8>, Hbm<f32, 128, 64>) {
    let o1 = ndarray([128, 8], f32, SharedHbm);
    let o2 = ndarray([128, 8], u32, SharedHbm);
    let o3 = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let (i_p, i_f) = mgrid![0..128, 0..64];
    // A mask on the searched axis.
    store(o1[..], max8(x, mask = i_f < 32));
    let top = max8(x);
    // vals must hold 8 elements per partition, of the same partitions.
    store(o2[..], nc_find_index8(x, x[[0..128, 0..4]]));
    store(o2[..], nc_find_index8(x[[0..64, 0..64]], top));
    // Indices are uint32 or uint16.
    store(o2[..], nc_find_index8(x, top, dtype = f32));
    // The replacement is a number.
    store(o3[..], nc_match_replace8(x, top, x));
    // dst_idx holds 8 uint32 or uint16 indices per partition.
    let bad_idx = ndarray([128, 8], f32, Sbuf);
    store(o3[..], nc_match_replace8(x, top, 1.0, dst_idx = bad_idx));
    (o1, o2, o3)
}

fn main() {}
