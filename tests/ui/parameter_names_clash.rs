use nki::prelude::*;

// Parameters named like an item of the kernel's module (`KERNEL`, `Grid`), and one declared
// twice: each is an error on its name, and its uses in the body report nothing more.
#[kernel]
fn adds(
    KERNEL: Hbm<f32, 128, 512>,
    Grid: Hbm<f32, 128, 512>,
    x: Hbm<f32, 128, 512>,
    x: Hbm<f32, 128, 512>,
) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], load(KERNEL[..]) + load(Grid[..]) + load(x[..]));
    out
}

fn main() {
    let _ = adds::KERNEL.program();
}
