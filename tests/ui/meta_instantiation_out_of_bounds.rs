use nki::prelude::*;

// The block size is a meta-parameter: the instantiation whose block reaches past the tensor is
// named in the error.
#[kernel(fits(BLOCK = 2), too_wide(BLOCK = 3))]
fn blocks<const BLOCK: usize>(x: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 1024> {
    let out = ndarray([128, 1024], f32, SharedHbm);
    let t = load(x[[0..128, 0..BLOCK * 512]]);
    store(out[[0..128, 0..BLOCK * 512]], t);
    out
}

fn main() {
    let _ = fits::KERNEL.program();
    let _ = &blocks::INSTANCES;
}
