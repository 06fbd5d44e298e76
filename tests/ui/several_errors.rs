use nki::prelude::*;

#[kernel]
fn many_mistakes(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let a = load(x[[0..128, 0..512]]);
    let b = laod(x[[0..128, 0..512]]);
    let c = copy(a, f64);
    store(out[[0..128, 0..512]], undefined_tile);
    out
}

fn main() {
    // The kernel's launch functions still exist after the errors: no cascade here.
    let mut core = NeuronCore::default();
    let x = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
    let _ = many_mistakes(&mut core, &x);
}
