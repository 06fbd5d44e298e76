use nki::prelude::*;

#[kernel]
fn too_many_partitions(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let tile = zeros([256, 512], f32, Sbuf);
    store(out[[0..256, 0..512]], tile);
    out
}

fn main() {}
