use nki::prelude::*;

// Device loops and virtual registers: what the language refuses.
#[kernel]
fn refused(x: Hbm<f32, 128, 512>, n: Hbm<i32, 1, 1>, f: Hbm<f32, 1, 1>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(x);
    let n_sb = load(n);
    let r = nisa::register_alloc();
    nisa::register_load(r, n_sb);
    // A register is a run-time value: no shape or index takes it.
    let bad_shape = ndarray([r, 512], f32, Sbuf);
    let bad_index = t[[0..1, r]];
    // The body is a closure written in the call.
    nl::fori_loop(0, r, t);
    // The step is a positive compile-time integer.
    nl::fori_loop(0, r, |i| {
        store(out, t);
    }, r);
    for i in nl::dynamic_range(0, r, 0) {
        store(out, t);
    }
    // A register holds a 32-bit integer: no float element.
    let f_sb = load(f);
    nisa::register_load(r, f_sb);
    // A register_load of more than one element.
    nisa::register_load(r, t);
    // while_loop's body returns the next condition register.
    nl::while_loop(r, |c| {
        store(out, t);
    });
    // A closure anywhere else.
    let g = |i| i;
    // A device loop's variable is a register, not an index.
    nl::fori_loop(0, 4, |i| {
        store(out[[i..i + 1, 0..512]], t[[0..1, 0..512]]);
    });
    // A device loop runs whole: not under an `if` on loop indices.
    for j in affine_range(4) {
        if j < 2 {
            nl::fori_loop(0, r, |_| {
                store(out, t);
            });
        }
    }
    // A kernel has 64 registers.
    for k in static_range(65) {
        let many = nisa::register_alloc(k);
    }
    out
}

fn main() {}
