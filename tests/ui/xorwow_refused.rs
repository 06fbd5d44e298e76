use nki::prelude::*;

// NeuronCore-v2 (trn1): rng on the Vector engine only, no state instructions, no rand2.
#[kernel]
fn xorwow_trn1(a: Hbm<f32, 128, 8>) -> Hbm<f32, 128, 8> {
    let out = ndarray([128, 8], f32, SharedHbm);
    let x = load(a[..]);
    let d = ndarray([128, 8], i32, Sbuf);
    rng(d, engine = gpsimd);
    let s = ndarray([128, 6], u32, Sbuf);
    rand_get_state(s);
    rand_set_state(s);
    rand2(x, 0.0, 1.0);
    // rng writes integers.
    rng(dst = x);
    store(out[..], x);
    out
}

// NeuronCore-v3 (trn2): the state on GpSimd only, of 6 uint32 words per partition.
#[kernel(target = trn2)]
fn xorwow_trn2(a: Hbm<f32, 128, 8>) -> Hbm<f32, 128, 8> {
    let out = ndarray([128, 8], f32, SharedHbm);
    let x = load(a[..]);
    let v = ndarray([128, 24], u32, Sbuf);
    rand_get_state(v, engine = vector);
    rand_set_state(v);
    let w = ndarray([128, 6], i32, Sbuf);
    rand_get_state(dst = w);
    // GpSimd cannot write PSUM.
    let p = ndarray([128, 8], u16, Psum);
    rng(p, engine = gpsimd);
    rng(p, engine = scalar);
    // A seed is one 32-bit element.
    let k = ndarray([1, 2], i32, Sbuf);
    set_rng_seed(k);
    let h = ndarray([1, 1], i16, Sbuf);
    set_rng_seed(src_seeds = h);
    rand2(x, 0.0, 1.0);
    // They write their dst and return nothing.
    let e = rng(p);
    store(out[..], x);
    out
}

// NeuronCore-v4 (trn3): rand2's bounds.
#[kernel(target = trn3)]
fn xorwow_trn3(a: Hbm<f32, 128, 8>, c: Hbm<bf16, 128, 1>) -> Hbm<f32, 128, 8> {
    let out = ndarray([128, 8], f32, SharedHbm);
    let x = load(a[..]);
    let col = load(c[..]);
    rand2(x, 1.0, 1.0);
    rand2(dst = x, min = 0.0, max = col);
    let b = ndarray([128, 8], bool, Sbuf);
    rand2(b, 0.0, 1.0);
    // The Vector engine's state is 24 words per partition.
    let s6 = ndarray([128, 6], u32, Sbuf);
    rand_set_state(s6, engine = vector);
    store(out[..], x);
    out
}

fn main() {}
