use nki::prelude::*;

#[kernel]
fn mixed_mistakes(a: Hbm<f32, 128, 512>, b: Hbm<f32, 64, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let x = load(a[[i_p, i_f]]);
    let y = load(b[..]);
    let s = x + y;
    let e = exp(s);
    let m = max(x, axis = 0);
    let z = activation(op = exp, data = x, scale = x);
    let w = exp(x, mask = (i_p < 8) | (i_f < 8));
    store(out[..], e);
    out
}

fn main() {
    // The errors do not cascade: `e` uses the erroneous `s` without a second error, and the
    // kernel's launch functions still exist.
    let mut core = NeuronCore::default();
    let a = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
    let b = DeviceTensor::<f32>::zeros(&[64, 512]).unwrap();
    let _ = mixed_mistakes(&mut core, &a, &b);
}
