//! NKI 0.6's destination-first ISA calls (`nisa::tensor_tensor(dst = t, data1 = a, data2 = b,
//! op = add)`) and `nc_matmul`'s `accumulate`: the same instructions as the 2.26 spelling
//! (`t[...] = tensor_tensor(a, b, add)`, `acc += nc_matmul(a, b)`), shown by equal listings, and
//! results checked against plain loops.

use nki::ndarray::Array2;
use nki::prelude::*;

/// A program's listing without its first line (the signature, which names the kernel).
fn body(p: &nki::program::Program<'_>) -> String {
    p.to_string().lines().skip(1).collect::<Vec<_>>().join("\n")
}

/// The matmul tutorial's tiled stage (`nki_matmul_tiled_`) as NKI 2.26 writes it: `nl.load`,
/// `nc_matmul` returning into a `+=`, `nl.copy`, `nl.store`.
#[kernel]
pub fn tiled_226(lhs_t: Hbm<bf16, K, M>, rhs: Hbm<bf16, K, N>) -> Hbm<bf16, M, N> {
    let result = ndarray([M, N], bf16, SharedHbm);
    for m in affine_range(M / 128) {
        for n in affine_range(N / 512) {
            let res_psum = zeros([128, 512], f32, Psum);
            for k in affine_range(K / 128) {
                let lhs_tile = load(lhs_t[[k * 128..(k + 1) * 128, m * 128..(m + 1) * 128]]);
                let rhs_tile = load(rhs[[k * 128..(k + 1) * 128, n * 512..(n + 1) * 512]]);
                res_psum += nc_matmul(lhs_tile, rhs_tile);
            }
            let res_sb = copy(res_psum, result.dtype);
            store(
                result[[m * 128..(m + 1) * 128, n * 512..(n + 1) * 512]],
                res_sb,
            );
        }
    }
    result
}

/// The same stage in NKI 0.6's spelling: `nl.ndarray` tiles written by destination-first
/// `nisa.dma_copy`, `nisa.nc_matmul(..., accumulate=True)` and `nisa.tensor_copy`.
#[kernel]
pub fn tiled_06(lhs_t: Hbm<bf16, K, M>, rhs: Hbm<bf16, K, N>) -> Hbm<bf16, M, N> {
    let result = ndarray([M, N], bf16, SharedHbm);
    for m in affine_range(M / tile_size.pmax) {
        for n in affine_range(N / tile_size.gemm_moving_fmax) {
            let res_psum = ndarray([128, 512], f32, Psum);
            nisa::memset(dst = res_psum, value = 0.0);
            for k in affine_range(K / 128) {
                let lhs_tile = ndarray([128, 128], lhs_t.dtype, Sbuf);
                nisa::dma_copy(
                    dst = lhs_tile,
                    src = lhs_t[[k * 128..(k + 1) * 128, m * 128..(m + 1) * 128]],
                );
                let rhs_tile = ndarray([128, 512], rhs.dtype, Sbuf);
                nisa::dma_copy(
                    dst = rhs_tile,
                    src = rhs[[k * 128..(k + 1) * 128, n * 512..(n + 1) * 512]],
                );
                nisa::nc_matmul(res_psum, lhs_tile, rhs_tile, accumulate = true);
            }
            let res_sb = ndarray([128, 512], result.dtype, Sbuf);
            nisa::tensor_copy(dst = res_sb, src = res_psum);
            nisa::dma_copy(
                dst = result[[m * 128..(m + 1) * 128, n * 512..(n + 1) * 512]],
                src = res_sb,
            );
        }
    }
    result
}

/// `lhs_tᵀ · rhs` by plain loops in f64 over the bf16 inputs.
fn reference(a: &Array2<bf16>, b: &Array2<bf16>) -> (Array2<f64>, Array2<f64>) {
    let (k, m) = a.dim();
    let n = b.dim().1;
    let mut out = Array2::<f64>::zeros((m, n));
    let mut mag = Array2::<f64>::zeros((m, n));
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut g) = (0.0f64, 0.0f64);
            for p in 0..k {
                let x = f64::from(a[[p, i]].to_f32()) * f64::from(b[[p, j]].to_f32());
                s += x;
                g += x.abs();
            }
            out[[i, j]] = s;
            mag[[i, j]] = g;
        }
    }
    (out, mag)
}

fn random_bf16(rows: usize, cols: usize, seed: u64) -> Array2<bf16> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    Array2::from_shape_fn((rows, cols), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        bf16::from_f32(((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
    })
}

#[test]
fn matmul_tutorial_in_both_dialects_has_one_listing() {
    let old = tiled_226::KERNEL.program();
    let new = tiled_06::KERNEL.program();
    assert_eq!(body(old), body(new), "2.26:\n{old}\n0.6:\n{new}");
}

#[test]
fn matmul_tutorial_in_both_dialects_computes_the_product() {
    let (k, m, n) = (384, 256, 1024);
    let a = random_bf16(k, m, 1);
    let b = random_bf16(k, n, 2);
    let (want, mag) = reference(&a, &b);
    let mut core = NeuronCore::default();
    let mut bits = Vec::new();
    let old = tiled_226::host(&mut core, a.view(), b.view()).unwrap();
    let new = tiled_06::host(&mut core, a.view(), b.view()).unwrap();
    for (name, out) in [("2.26", old), ("0.6", new)] {
        for ((i, j), v) in out.indexed_iter() {
            // fp32 accumulation of K products, then one bf16 rounding.
            let bound = mag[[i, j]] * (k as f64) * f64::from(f32::EPSILON)
                + want[[i, j]].abs() * 2f64.powi(-8);
            let got = f64::from(v.to_f32());
            assert!(
                (got - want[[i, j]]).abs() <= bound,
                "{name} ({i}, {j}): {got} vs {}",
                want[[i, j]]
            );
        }
        bits.push(out.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }
    assert_eq!(bits[0], bits[1]);
}

/// ISA calls in NKI 2.26's spelling: each result assigned into a tile or a view of one.
#[kernel]
fn ops_226(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 8>) {
    let out = ndarray([128, 512], f32, SharedHbm);
    let small = ndarray([128, 8], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let t = ndarray([128, 512], f32, Sbuf);
    t[..] = tensor_tensor(x, y, add);
    t[[0..64, 256..512]] = tensor_tensor(
        data1 = x[[0..64, 256..512]],
        data2 = y[[0..64, 256..512]],
        op = multiply,
    );
    t[..] = tensor_scalar(t, multiply, 0.5, op1 = add, operand1 = 1.0);
    let col = ndarray([128, 1], f32, Sbuf);
    let u = ndarray([128, 512], f32, Sbuf);
    u[..] = activation(
        op = exp,
        data = t,
        scale = 0.25,
        reduce_op = add,
        reduce_res = col,
    );
    let mx = ndarray([128, 1], f32, Sbuf);
    mx[..] = tensor_reduce(maximum, u, axis = 1, keepdims = true);
    u[..] = scalar_tensor_tensor(
        data = u,
        op0 = subtract,
        operand0 = mx,
        op1 = add,
        operand1 = x,
    );
    let rc = ndarray([128, 1], f32, Sbuf);
    rc[..] = reciprocal(data = col);
    let sc = ndarray([128, 512], f32, Sbuf);
    sc[..] = tensor_tensor_scan(x, y, 0.0, multiply, add);
    let st = ndarray([128, 6], f32, Sbuf);
    st[..] = bn_stats(u);
    let ag = ndarray([128, 2], f32, Sbuf);
    ag[..] = bn_aggr(st);
    let top = ndarray([128, 8], f32, Sbuf);
    top[..] = max8(src = u);
    let tr = ndarray([128, 128], f32, Psum);
    tr[..] = nc_transpose(u[[0..128, 0..128]]);
    let z = ndarray([128, 8], f32, Sbuf);
    z[..] = 0.5;
    z[[0..128, 0..2]] = tensor_copy(ag, engine = gpsimd);
    z[[0..128, 2..3]] = tensor_copy(rc);
    z[[0..128, 3..4]] = tensor_copy(sc[[0..128, 511..512]]);
    z[[0..128, 4..5]] = tensor_copy(tr[[0..128, 0..1]]);
    z[[0..128, 5..6]] = tensor_copy(top[[0..128, 0..1]]);
    store(out[..], t);
    store(small[..], z);
    (out, small)
}

/// The same calls in NKI 0.6's spelling: the destination first, by keyword or by position.
#[kernel]
fn ops_06(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 8>) {
    let out = ndarray([128, 512], f32, SharedHbm);
    let small = ndarray([128, 8], f32, SharedHbm);
    let x = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = x, src = a[..]);
    let y = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(y, b[..]);
    let t = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_tensor(t, x, y, nl::add);
    nisa::tensor_tensor(
        dst = t[[0..64, 256..512]],
        data1 = x[[0..64, 256..512]],
        data2 = y[[0..64, 256..512]],
        op = nl::multiply,
    );
    nisa::tensor_scalar(
        dst = t,
        data = t,
        op0 = multiply,
        operand0 = 0.5,
        op1 = add,
        operand1 = 1.0,
    );
    let col = ndarray([128, 1], f32, Sbuf);
    let u = ndarray([128, 512], f32, Sbuf);
    nisa::activation(
        dst = u,
        op = exp,
        data = t,
        scale = 0.25,
        reduce_op = add,
        reduce_res = col,
    );
    let mx = ndarray([128, 1], f32, Sbuf);
    nisa::tensor_reduce(dst = mx, op = maximum, data = u, axis = 1, keepdims = true);
    nisa::scalar_tensor_tensor(
        dst = u,
        data = u,
        op0 = subtract,
        operand0 = mx,
        op1 = add,
        operand1 = x,
    );
    let rc = ndarray([128, 1], f32, Sbuf);
    nisa::reciprocal(dst = rc, data = col);
    let sc = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_tensor_scan(
        dst = sc,
        data0 = x,
        data1 = y,
        initial = 0.0,
        op0 = multiply,
        op1 = add,
    );
    let st = ndarray([128, 6], f32, Sbuf);
    nisa::bn_stats(dst = st, data = u);
    let ag = ndarray([128, 2], f32, Sbuf);
    nisa::bn_aggr(dst = ag, data = st);
    let top = ndarray([128, 8], f32, Sbuf);
    nisa::max8(dst = top, src = u);
    let tr = ndarray([128, 128], f32, Psum);
    nisa::nc_transpose(dst = tr, data = u[[0..128, 0..128]]);
    let z = ndarray([128, 8], f32, Sbuf);
    nisa::memset(dst = z, value = 0.5);
    nisa::tensor_copy(
        dst = z[[0..128, 0..2]],
        src = ag,
        engine = nisa::gpsimd_engine,
    );
    nisa::tensor_copy(z[[0..128, 2..3]], rc);
    nisa::tensor_copy(dst = z[[0..128, 3..4]], src = sc[[0..128, 511..512]]);
    nisa::tensor_copy(dst = z[[0..128, 4..5]], src = tr[[0..128, 0..1]]);
    nisa::tensor_copy(dst = z[[0..128, 5..6]], src = top[[0..128, 0..1]]);
    nisa::dma_copy(dst = out[..], src = t);
    nisa::dma_copy(dst = small[..], src = z);
    (out, small)
}

#[test]
fn isa_calls_in_both_dialects_have_one_listing() {
    let old = ops_226::KERNEL.program();
    let new = ops_06::KERNEL.program();
    assert_eq!(body(old), body(new), "2.26:\n{old}\n0.6:\n{new}");
}

fn random_f32(seed: u64) -> Array2<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    Array2::from_shape_fn((128, 512), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
    })
}

#[test]
fn destination_first_calls_write_their_destination_and_its_views() {
    let (a, b) = (random_f32(3), random_f32(4));
    let mut core = NeuronCore::default();
    let (t, z) = ops_06::host(&mut core, a.view(), b.view()).unwrap();
    for p in 0..128 {
        for f in 0..512 {
            // The view `t[0..64, 256..512]` holds the product, the rest the sum.
            let v = if p < 64 && f >= 256 {
                a[[p, f]] * b[[p, f]]
            } else {
                a[[p, f]] + b[[p, f]]
            };
            let want = v * 0.5 + 1.0;
            assert_eq!(t[[p, f]].to_bits(), want.to_bits(), "t ({p}, {f})");
        }
        // `memset(dst = z, value = 0.5)`, then copies into columns 0..6.
        assert_eq!(z[[p, 6]], 0.5);
        assert_eq!(z[[p, 7]], 0.5);
        // The scan's last element: r[i] = x[i] * r[i - 1] + y[i] from 0, in f32.
        let mut r = 0.0f32;
        for f in 0..512 {
            r = a[[p, f]] * r + b[[p, f]];
        }
        assert_eq!(z[[p, 3]].to_bits(), r.to_bits(), "scan ({p})");
    }
}

/// `nc_matmul(dst, stationary, moving, accumulate)`: two products into one PSUM tile, the
/// second overwriting (`False`), adding (`True`) or following NKI's default rule (`None`: the
/// first write to a fresh tile overwrites, later ones add).
#[kernel]
fn accumulate_modes(
    s: Hbm<f32, 128, 128>,
    m: Hbm<f32, 128, 512>,
) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 512>, Hbm<f32, 128, 512>) {
    let over = ndarray([128, 512], f32, SharedHbm);
    let add = ndarray([128, 512], f32, SharedHbm);
    let auto = ndarray([128, 512], f32, SharedHbm);
    let st = load(s[..]);
    let mv = load(m[..]);
    let twice = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_scalar(twice, mv, multiply, 2.0);
    let p = ndarray([128, 512], f32, Psum);
    nisa::nc_matmul(p, st, mv, accumulate = false);
    nisa::nc_matmul(p, st, twice, accumulate = false);
    store(over[..], p);
    let q = ndarray([128, 512], f32, Psum);
    nisa::nc_matmul(q, st, mv, accumulate = false);
    nisa::nc_matmul(q, st, twice, accumulate = true);
    store(add[..], q);
    let r = ndarray([128, 512], f32, Psum);
    for i in affine_range(2) {
        nisa::nc_matmul(dst = r, stationary = st, moving = mv);
    }
    nisa::nc_matmul(dst = r, stationary = st, moving = twice, accumulate = None);
    store(auto[..], r);
    (over, add, auto)
}

#[test]
fn nc_matmul_accumulate_overwrites_adds_or_follows_the_default_rule() {
    // Small integers: every product and sum is exact in f32.
    let s = Array2::from_shape_fn((128, 128), |(k, i)| ((k * 7 + i * 3) % 5) as f32 - 2.0);
    let m = Array2::from_shape_fn((128, 512), |(k, j)| ((k * 5 + j) % 7) as f32 - 3.0);
    let mut prod = Array2::<f32>::zeros((128, 512));
    for i in 0..128 {
        for j in 0..512 {
            let mut acc = 0.0f32;
            for k in 0..128 {
                acc += s[[k, i]] * m[[k, j]];
            }
            prod[[i, j]] = acc;
        }
    }
    let mut core = NeuronCore::default();
    let (over, add, auto) = accumulate_modes::host(&mut core, s.view(), m.view()).unwrap();
    for ((i, j), &p) in prod.indexed_iter() {
        assert_eq!(over[[i, j]], 2.0 * p, "accumulate = False ({i}, {j})");
        assert_eq!(add[[i, j]], 3.0 * p, "accumulate = True ({i}, {j})");
        // Two iterations of the loop (the first overwrites the fresh tile), then `None` adds.
        assert_eq!(auto[[i, j]], 4.0 * p, "accumulate = None ({i}, {j})");
    }
}

/// More ISA calls assigned in NKI 2.26's spelling (compiled only, for their listing).
#[kernel]
fn more_226(a: Hbm<f32, 128, 128>, idx: Hbm<u32, 128, 8>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let x = load(a[..]);
    let tt = ndarray([128, 128], f32, Sbuf);
    tt[..] = dma_transpose(a[..]);
    let col = ndarray([128, 1], f32, Sbuf);
    let v = ndarray([128, 128], f32, Sbuf);
    v[..] = tensor_scalar_reduce(
        data = x,
        op0 = multiply,
        operand0 = 2.0,
        reduce_op = add,
        reduce_res = col,
    );
    v[..] = activation_reduce(op = exp, data = tt, reduce_op = add, reduce_res = col);
    let top = ndarray([128, 8], f32, Sbuf);
    top[..] = max8(src = x);
    let at = ndarray([128, 8], u32, Sbuf);
    at[..] = nc_find_index8(data = x, vals = top);
    let rep = ndarray([128, 128], f32, Sbuf);
    rep[..] = nc_match_replace8(data = x, vals = top, imm = 0.0);
    let pr = ndarray([1, 128], f32, Sbuf);
    pr[..] = tensor_partition_reduce(add, v);
    let d = ndarray([128, 128], f32, Sbuf);
    d[..] = dropout(rep, 0.25);
    let ix = load(idx[..]);
    let g = ndarray([128, 8], f32, Sbuf);
    g[..] = gather_flattened(d, ix);
    store(out[[0..128, 0..8]], g);
    store(out[[0..1, 8..128]], pr[[0..1, 8..128]]);
    out
}

/// The same calls in NKI 0.6's spelling.
#[kernel]
fn more_06(a: Hbm<f32, 128, 128>, idx: Hbm<u32, 128, 8>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let x = load(a[..]);
    let tt = ndarray([128, 128], f32, Sbuf);
    nisa::dma_transpose(dst = tt, src = a[..]);
    let col = ndarray([128, 1], f32, Sbuf);
    let v = ndarray([128, 128], f32, Sbuf);
    nisa::tensor_scalar_reduce(
        dst = v,
        data = x,
        op0 = multiply,
        operand0 = 2.0,
        reduce_op = add,
        reduce_res = col,
    );
    nisa::activation_reduce(v, exp, tt, add, col);
    let top = ndarray([128, 8], f32, Sbuf);
    nisa::max8(dst = top, src = x);
    let at = ndarray([128, 8], u32, Sbuf);
    nisa::nc_find_index8(dst = at, data = x, vals = top);
    let rep = ndarray([128, 128], f32, Sbuf);
    nisa::nc_match_replace8(dst = rep, data = x, vals = top, imm = 0.0);
    let pr = ndarray([1, 128], f32, Sbuf);
    nisa::tensor_partition_reduce(dst = pr, op = add, data = v);
    let d = ndarray([128, 128], f32, Sbuf);
    nisa::dropout(dst = d, data = rep, prob = 0.25);
    let ix = load(idx[..]);
    let g = ndarray([128, 8], f32, Sbuf);
    nisa::gather_flattened(g, d, ix);
    nisa::dma_copy(dst = out[[0..128, 0..8]], src = g);
    nisa::dma_copy(dst = out[[0..1, 8..128]], src = pr[[0..1, 8..128]]);
    out
}

#[test]
fn more_isa_calls_in_both_dialects_have_one_listing() {
    let old = more_226::KERNEL.program();
    let new = more_06::KERNEL.program();
    assert_eq!(body(old), body(new), "2.26:\n{old}\n0.6:\n{new}");
}

/// A kernel for `$target` that writes NKI's `tile_size` constants
/// into a `[1, 14]` int32 output (the order of `nki_lang::target::TILE_SIZES`).
macro_rules! tile_sizes_kernel {
    ($name:ident, $target:ident) => {
        #[kernel(target = $target)]
        fn $name(x: Hbm<i32, 1, 14>) -> Hbm<i32, 1, 14> {
            let out = ndarray([1, 14], i32, SharedHbm);
            let t = load(x[..]);
            t[[0..1, 0..1]] = tile_size.pmax;
            t[[0..1, 1..2]] = tile_size.psum_fmax;
            t[[0..1, 2..3]] = tile_size.psum_bank_fmax;
            t[[0..1, 3..4]] = tile_size.psum_bank_fmax_bytes;
            t[[0..1, 4..5]] = tile_size.psum_num_banks;
            t[[0..1, 5..6]] = tile_size.sbuf_fmax;
            t[[0..1, 6..7]] = tile_size.sbuf_fmax_bytes;
            t[[0..1, 7..8]] = tile_size.sbuf_size_bytes;
            t[[0..1, 8..9]] = tile_size.total_available_sbuf_size;
            t[[0..1, 9..10]] = tile_size.gemm_stationary_fmax;
            t[[0..1, 10..11]] = tile_size.gemm_moving_fmax;
            t[[0..1, 11..12]] = tile_size.bn_stats_fmax;
            t[[0..1, 12..13]] = tile_size.psum_min_align;
            t[[0..1, 13..14]] = tile_size.sbuf_min_align;
            store(out[..], t);
            out
        }
    };
}

tile_sizes_kernel!(tile_sizes_trn1, trn1);
tile_sizes_kernel!(tile_sizes_trn2, trn2);
tile_sizes_kernel!(tile_sizes_trn3, trn3);

#[test]
fn tile_size_constants_per_target() {
    // SBUF partitions of 192, 224 and 256 KiB (the whole partition: no compiler reserve).
    for (target, kib) in [
        (Target::Trn1, 192),
        (Target::Trn2, 224),
        (Target::Trn3, 256),
    ] {
        let bytes = kib * 1024;
        let want = [
            128,
            512,
            512,
            2048,
            8,
            bytes / 4,
            bytes,
            bytes * 128,
            bytes,
            128,
            512,
            512,
            4,
            1,
        ];
        let mut core = NeuronCore::new(target);
        let x = Array2::<i32>::zeros((1, 14));
        let got = match target {
            Target::Trn1 => tile_sizes_trn1::host(&mut core, x.view()),
            Target::Trn2 => tile_sizes_trn2::host(&mut core, x.view()),
            Target::Trn3 => tile_sizes_trn3::host(&mut core, x.view()),
        }
        .unwrap();
        assert_eq!(got.as_slice().unwrap(), &want, "{target:?}");
    }
}
