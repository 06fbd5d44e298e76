use nki::prelude::*;

#[kernel]
fn scratch_per_iteration(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    for i in affine_range(2) {
        let spill = ndarray([128, 256], f32, SharedHbm);
        store(spill, load(x[[arange(128).p(), i * 256 + arange(256).x()]]));
        store(out[[arange(128).p(), i * 256 + arange(256).x()]], load(spill));
    }
    out
}

fn main() {}
