//! Runs of partition-local instructions run a block of partitions at a time (`nki_runtime`'s
//! host plan, `host/rows.rs`), including runs whose operands start at different partitions
//! (RoPE's copy of a tile's upper half to partition 0, then products on partitions 0..64),
//! instructions over more partitions than the run's taking part as pieces (a load of both
//! halves), and tiles that only pass data between the run's instructions kept in the run's
//! last partitions. Each kernel here is checked against plain f32 loops on cores that block a partition at a
//! time, that never block, and on one and two host threads; a run that read a partition before
//! an earlier instruction of the run wrote it would give the old values.

use nki::ndarray::Array2;
use nki::prelude::*;

/// RoPE's pattern of partitions, then the hazard such a run must stop at: `x` doubled in place
/// over all 128 partitions, then its upper half read into partition 0.
#[kernel]
fn halves(x: Hbm<f32, 128, 512>, c: Hbm<f32, 64, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let xs = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = xs, src = x);
    let cs = ndarray([64, 512], f32, Sbuf);
    nisa::dma_copy(dst = cs, src = c);
    let upper = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_copy(dst = upper, src = xs[[64.., ..]]);
    let lo_c = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_tensor(lo_c, xs[[..64, ..]], cs, nl::multiply);
    let up_c = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_tensor(up_c, upper, cs, nl::multiply);
    let o = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_tensor(o[[..64, ..]], lo_c, up_c, nl::subtract);
    nisa::tensor_tensor(o[[64.., ..]], up_c, lo_c, nl::add);
    nisa::tensor_tensor(xs, xs, xs, nl::add);
    nisa::tensor_copy(dst = upper, src = xs[[64.., ..]]);
    nisa::tensor_tensor(o[[..64, ..]], o[[..64, ..]], upper, nl::add);
    nisa::dma_copy(dst = out, src = o);
    out
}

/// [`halves`] in plain f32 loops.
fn halves_by_hand(x: &Array2<f32>, c: &Array2<f32>) -> Array2<f32> {
    let mut out = Array2::<f32>::zeros((128, 512));
    for p in 0..64 {
        for f in 0..512 {
            let lo_c = x[[p, f]] * c[[p, f]];
            let up_c = x[[p + 64, f]] * c[[p, f]];
            let doubled_upper = x[[p + 64, f]] + x[[p + 64, f]];
            out[[p, f]] = (lo_c - up_c) + doubled_upper;
            out[[p + 64, f]] = up_c + lo_c;
        }
    }
    out
}

/// Inputs `x` `[128, 512]` and `c` `[64, 512]` of small multiples of powers of two (the
/// kernels' sums and products of them are exact in f32 or rounded alike everywhere).
fn inputs() -> (Array2<f32>, Array2<f32>) {
    let x = Array2::from_shape_fn((128, 512), |(p, f)| {
        ((p * 37 + f * 11) % 97) as f32 * 0.03125 - 1.5
    });
    let c = Array2::from_shape_fn((64, 512), |(p, f)| {
        ((p * 5 + f * 3) % 13) as f32 * 0.25 - 1.0
    });
    (x, c)
}

/// `launch` on plain cores that block one or a few partitions at a time, and that never
/// block, on one and two host threads: each result must be `want`.
fn on_every_blocking(
    want: &Array2<f32>,
    launch: impl Fn(&mut NeuronCore) -> Result<Array2<f32>, LaunchError>,
) {
    let cores = [
        ("1 KiB blocks, 1 thread", 1024, 1),
        ("1 KiB blocks, 2 threads", 1024, 2),
        ("8 KiB blocks, 1 thread", 8 << 10, 1),
        ("16 KiB blocks, 2 threads", 16 << 10, 2),
        ("no blocks, 2 threads", 1 << 30, 2),
    ];
    for (name, cache, threads) in cores {
        let mut core = NeuronCore::default()
            .with_strict(false)
            .with_host_threads(threads)
            .with_host_cache_bytes(cache);
        assert_eq!(&launch(&mut core).unwrap(), want, "{name}");
    }
}

#[test]
fn runs_over_partitions_that_start_apart_keep_every_partitions_order() {
    let (x, c) = inputs();
    on_every_blocking(&halves_by_hand(&x, &c), |core| {
        halves::host(core, x.view(), c.view())
    });
}

/// A run whose intermediates only pass data between its instructions: `t` (dead after the
/// product) and the product `u`, in the bytes the allocator then gives the result `o`
/// (their live ranges are apart), which the store reads after the run's last access of `t`
/// and `u`; and `v`, whose bytes the later in-place sum writes as the result of its own
/// tile. Blocks keep `t`, `u` and `v` in the run's last partitions while `o` keeps its own.
#[kernel]
fn passing(x: Hbm<f32, 128, 512>, c: Hbm<f32, 64, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let xs = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = xs, src = x);
    let cs = ndarray([64, 512], f32, Sbuf);
    nisa::dma_copy(dst = cs, src = c);
    let t = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_copy(dst = t, src = xs[[64.., ..]]);
    let u = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_tensor(u, t, cs, nl::multiply);
    let v = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_tensor(v, xs[[..64, ..]], cs, nl::subtract);
    let o = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_tensor(o[[..64, ..]], v, u, nl::add);
    nisa::tensor_tensor(o[[64.., ..]], u, xs[[..64, ..]], nl::multiply);
    // Not partition-local: ends the run, so `xs` and `o` are read after it.
    let tr = ndarray([128, 128], f32, Psum);
    nisa::nc_transpose(dst = tr, data = xs[[.., ..128]]);
    let back = ndarray([128, 128], f32, Sbuf);
    nisa::tensor_copy(dst = back, src = tr);
    nisa::tensor_tensor(o[[.., ..128]], o[[.., ..128]], back, nl::add);
    nisa::dma_copy(dst = out, src = o);
    out
}

/// [`passing`] in plain f32 loops.
fn passing_by_hand(x: &Array2<f32>, c: &Array2<f32>) -> Array2<f32> {
    let mut out = Array2::<f32>::zeros((128, 512));
    for p in 0..64 {
        for f in 0..512 {
            let u = x[[p + 64, f]] * c[[p, f]];
            out[[p, f]] = (x[[p, f]] - c[[p, f]]) + u;
            out[[p + 64, f]] = u * x[[p, f]];
        }
    }
    for p in 0..128 {
        for f in 0..128 {
            out[[p, f]] += x[[f, p]];
        }
    }
    out
}

#[test]
fn tiles_that_only_pass_data_within_a_run_keep_the_results() {
    let (x, c) = inputs();
    on_every_blocking(&passing_by_hand(&x, &c), |core| {
        passing::host(core, x.view(), c.view())
    });
}

/// Elementwise instructions whose results only later ones of the run read, computed inside
/// those (`host/exprs.rs`): a copy read at its source, a `tensor_scalar` of two immediates
/// read by two instructions (computed in each), a bf16 difference that stays a tile (its
/// rounding is the tile's), and a product read after the bytes of one of its sources were
/// given to another tile (`w` over `cs`, which the instruction that reads the product must
/// then compute before it, or not fold it).
#[kernel]
fn chained(x: Hbm<f32, 128, 512>, c: Hbm<f32, 64, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let xs = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = xs, src = x);
    let cs = ndarray([64, 512], f32, Sbuf);
    nisa::dma_copy(dst = cs, src = c);
    let hi = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_copy(dst = hi, src = xs[[64.., ..]]);
    let a = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_scalar(
        dst = a,
        data = hi,
        op0 = multiply,
        operand0 = 0.5,
        op1 = add,
        operand1 = 1.0,
    );
    let b = ndarray([64, 512], bf16, Sbuf);
    nisa::tensor_tensor(b, xs[[..64, ..]], cs, nl::subtract);
    let p = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_tensor(p, a, cs, nl::multiply);
    let o = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_tensor(o[[64.., ..]], a, b, nl::multiply);
    let w = ndarray([64, 512], f32, Sbuf);
    nisa::tensor_tensor(w, xs[[..64, ..]], xs[[..64, ..]], nl::add);
    nisa::tensor_tensor(o[[..64, ..]], p, w, nl::subtract);
    nisa::dma_copy(dst = out, src = o);
    out
}

/// [`chained`] in plain f32 loops (the difference rounded to bf16).
fn chained_by_hand(x: &Array2<f32>, c: &Array2<f32>) -> Array2<f32> {
    let mut out = Array2::<f32>::zeros((128, 512));
    for p in 0..64 {
        for f in 0..512 {
            let a = x[[p + 64, f]] * 0.5 + 1.0;
            let b = nki::bf16::from_f32(x[[p, f]] - c[[p, f]]).to_f32();
            out[[p + 64, f]] = a * b;
            out[[p, f]] = a * c[[p, f]] - (x[[p, f]] + x[[p, f]]);
        }
    }
    out
}

#[test]
fn elementwise_instructions_fold_into_the_ones_that_read_them() {
    let (x, c) = inputs();
    on_every_blocking(&chained_by_hand(&x, &c), |core| {
        chained::host(core, x.view(), c.view())
    });
}
