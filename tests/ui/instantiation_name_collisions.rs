use nki::prelude::*;

// An instantiation named like the kernel, two named alike, and one named `Self`: each is an
// error on its name, and nothing else is reported.
#[kernel(scale(S = 1), twice(S = 2), twice(S = 3), Self(S = 4), thrice(S = 3))]
fn scale<const S: i32>(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], load(x[..]) * S);
    out
}

fn main() {
    let _ = thrice::KERNEL.program();
}
