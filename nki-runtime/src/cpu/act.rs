//! Activation functions and `power` (placeholder until the defined kernels land; replaced in
//! the next commit).

use nki_lang::ActFn;

use super::Isa;

/// `x^y`.
pub fn pow(x: f32, y: f32) -> f32 {
    (x as f64).powf(y as f64) as f32
}

/// `f(x)`.
pub fn eval(f: ActFn, x: f32) -> f32 {
    let x64 = x as f64;
    (match f {
        ActFn::Exp => x64.exp(),
        _ => x64,
    }) as f32
}

/// `dst[i] = eval(f, src[i].mul_add(scale, bias))`.
pub fn apply(_isa: Isa, f: ActFn, src: &[f32], dst: &mut [f32], scale: f32, bias: f32) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = eval(f, s.mul_add(scale, bias));
    }
}

/// `dst[i] = pow(a[i], b[i])`.
pub fn apply_pow(_isa: Isa, a: &[f32], b: &[f32], dst: &mut [f32]) {
    for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
        *d = pow(x, y);
    }
}
