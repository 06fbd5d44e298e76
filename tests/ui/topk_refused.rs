use nki::prelude::*;

#[kernel(target = trn1)]
fn topk_on_trn1(x: Hbm<bf16, 16, 4>) -> Hbm<bf16, 16, 8> {
    let out = ndarray([16, 8], bf16, SharedHbm);
    let s = load(x[..]);
    let v = ndarray([16, 8], bf16, Sbuf);
    let i = ndarray([16, 8], u32, Sbuf);
    // GpSimd's topk needs a NeuronCore-v3 or later.
    nisa::topk(val_dst = v, idx_dst = i, src = s, n = 64);
    store(out[..], v);
    out
}

#[kernel(target = trn2)]
fn topk_refused(x: Hbm<bf16, 32, 4>, y: Hbm<f32, 32, 4>) -> Hbm<bf16, 32, 8> {
    let out = ndarray([32, 8], bf16, SharedHbm);
    let s = load(x[..]);
    let f = load(y[..]);
    let v = ndarray([32, 8], bf16, Sbuf);
    let i = ndarray([32, 8], u32, Sbuf);
    let wrong_i = ndarray([32, 8], i32, Sbuf);
    let narrow = ndarray([32, 4], u32, Sbuf);
    let big = ndarray([32, 100], bf16, Sbuf);
    let big_i = ndarray([32, 100], u32, Sbuf);
    // bf16 source and values, uint32 indices.
    nisa::topk(val_dst = v, idx_dst = i, src = f, n = 64);
    nisa::topk(val_dst = v, idx_dst = wrong_i, src = s, n = 64);
    // val_dst and idx_dst of one shape.
    nisa::topk(val_dst = v, idx_dst = narrow, src = s, n = 64);
    // 8 <= n < 65536, K <= n, the source holding ceil(n / 16) columns.
    nisa::topk(val_dst = v, idx_dst = i, src = s, n = 7);
    nisa::topk(val_dst = v, idx_dst = i, src = s, n = 70000);
    nisa::topk(val_dst = big, idx_dst = big_i, src = s, n = 64);
    nisa::topk(val_dst = v, idx_dst = i, src = s, n = 65);
    // Snakes are groups of 16 partitions.
    nisa::topk(val_dst = v[[0..24, 0..8]], idx_dst = i[[0..24, 0..8]], src = s[[0..24, 0..4]], n = 64);
    nisa::topk(val_dst = v[[8..24, 0..8]], idx_dst = i[[8..24, 0..8]], src = s[[8..24, 0..4]], n = 64);
    // It writes its destinations and returns nothing.
    let e = nisa::topk(val_dst = v, idx_dst = i, src = s, n = 64);
    store(out[..], v);
    out
}

fn main() {}
