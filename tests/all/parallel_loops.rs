//! Outermost `affine_range` loops on two host threads: which loops qualify, and that every
//! kernel computes the bits of a serial run (one host thread, or an observed run, which keeps
//! loops serial) and of an independent reference.

use crate::examples::fused_attention;
use crate::examples::matmul_fully_optimized as fully_optimized;

use fused_attention::common;
use nki::host_profile::HostProfile;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `exp(x · w)` row tile by row tile: `w` is loaded once before the loop and read by every
/// iteration (the second thread gets a copy); each iteration writes its own rows.
#[kernel]
fn scaled_exp(x: Hbm<f32, N, 512>, w: Hbm<f32, 128, 512>) -> Hbm<f32, N, 512> {
    let out = ndarray([N, 512], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    let wt = load(w[[ip, jf]]);
    for i in affine_range(N / 128) {
        let t = load(x[[i * 128 + ip, jf]]);
        let u = exp(t * wt);
        store(out[[i * 128 + ip, jf]], u);
    }
    out
}

/// [`scaled_exp`]'s row loop inside a loop that runs once (as a loop over `(C + 127) / 128`
/// channel tiles does for 128 channels): the row loop is the outermost one that splits.
#[kernel]
fn scaled_exp_in_a_single_pass(x: Hbm<f32, N, 512>, w: Hbm<f32, 128, 512>) -> Hbm<f32, N, 512> {
    let out = ndarray([N, 512], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    for pass in affine_range(1) {
        let wt = load(w[[pass * 128 + ip, jf]]);
        for i in affine_range(N / 128) {
            let t = load(x[[i * 128 + ip, jf]]);
            store(out[[i * 128 + ip, jf]], exp(t * wt));
        }
    }
    out
}

/// The sum of `x`'s row tiles, accumulated in an SBUF tile declared outside the loop: the loop
/// writes a tile that is read after it, so it stays serial.
#[kernel]
fn row_tile_sum(x: Hbm<f32, N, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    let acc = zeros([128, 512], f32, Sbuf);
    for i in affine_range(N / 128) {
        acc[[ip, jf]] += load(x[[i * 128 + ip, jf]]);
    }
    store(out[[ip, jf]], acc);
    out
}

/// Row `i·128 + p` of `x` to row `p·32 + i` of the output: both halves of the loop write rows
/// all over the output, so it stays serial.
#[kernel]
fn interleave_rows(x: Hbm<f32, 4096, 512>) -> Hbm<f32, 4096, 512> {
    let out = ndarray([4096, 512], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    for i in affine_range(32) {
        let t = load(x[[i * 128 + ip, jf]]);
        store(out[[ip * 32 + i, jf]], t);
    }
    out
}

/// `lhs_tᵀ · rhs` for the first 256 columns of each 512-column block of `rhs`, into the same
/// columns of the output: both halves of the loop write every row, in disjoint column ranges,
/// and the second half's range holds columns the kernel never writes.
#[kernel]
fn half_column_block_products(
    lhs_t: Hbm<bf16, 128, 128>,
    rhs: Hbm<bf16, 128, 4096>,
) -> Hbm<f32, 128, 4096> {
    let out = ndarray([128, 4096], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..256];
    let (lp, lf) = mgrid![0..128, 0..128];
    for j in affine_range(8) {
        let l = load(lhs_t[[lp, lf]]);
        let r = load(rhs[[ip, j * 512 + jf]]);
        let acc = nc_matmul(l, r);
        store(out[[ip, j * 512 + jf]], copy(acc, f32));
    }
    out
}

/// The same loop with `exp` instead of a matmul: too little work per byte of the output for
/// the second half's copy of its columns to pay, so it stays serial.
#[kernel]
fn half_column_block_exp(x: Hbm<f32, 128, 4096>) -> Hbm<f32, 128, 4096> {
    let out = ndarray([128, 4096], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..256];
    for j in affine_range(8) {
        let t = load(x[[ip, j * 512 + jf]]);
        store(out[[ip, j * 512 + jf]], exp(t));
    }
    out
}

/// Two host threads and one, plain: a strict launch runs on one thread.
fn cores() -> [NeuronCore; 2] {
    [
        NeuronCore::default().with_strict(false),
        NeuronCore::default()
            .with_strict(false)
            .with_host_threads(1),
    ]
}

fn same_bits(a: &Array2<f32>, b: &Array2<f32>) -> bool {
    a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Runs `kernel` on `inputs` on a two-thread core, a one-thread core and under an observer
/// (serial), asserts the three agree bit for bit, and returns the result and which loops ran
/// in halves.
fn run_three_ways(
    kernel: &nki::Kernel<'_>,
    inputs: &[&DeviceTensor<f32>],
    out_shape: [usize; 2],
) -> (Array2<f32>, Vec<usize>) {
    let args: Vec<_> = inputs.iter().map(|t| t.arg()).collect();
    let mut results = Vec::new();
    let mut parallel = Vec::new();
    for mut core in cores() {
        let mut out = DeviceTensor::<f32>::zeros(&out_shape).unwrap();
        let mut outs = [out.arg_mut()];
        let bound = kernel.bind(&args, &mut outs).unwrap();
        if core.host_threads() == 2 {
            parallel = bound.host_parallel_loops();
        }
        core.execute(bound).unwrap();
        results.push(out.into_array::<Ix2>().unwrap());
    }
    let mut out = DeviceTensor::<f32>::zeros(&out_shape).unwrap();
    let mut core = NeuronCore::default();
    let mut outs = [out.arg_mut()];
    let bound = kernel.bind(&args, &mut outs).unwrap();
    core.execute_observed(bound, &mut HostProfile::new())
        .unwrap();
    results.push(out.into_array::<Ix2>().unwrap());
    assert!(same_bits(&results[0], &results[1]), "two threads vs one");
    assert!(
        same_bits(&results[0], &results[2]),
        "two threads vs observed"
    );
    (results.swap_remove(0), parallel)
}

#[test]
fn independent_iterations_run_in_halves_with_the_serial_bits() {
    for n in [256, 384, 4096] {
        let x = common::random_f32(Ix2(n, 512), n as u64, -2.0, 2.0);
        let w = common::random_f32(Ix2(128, 512), 1, -1.0, 1.0);
        let (xd, wd) = (
            DeviceTensor::from_array(&x).unwrap(),
            DeviceTensor::from_array(&w).unwrap(),
        );
        let (got, parallel) = run_three_ways(&scaled_exp::KERNEL, &[&xd, &wd], [n, 512]);
        assert_eq!(parallel.len(), 1, "N = {n}: the row loop runs in halves");
        for ((r, c), &g) in got.indexed_iter() {
            let product = x[[r, c]] * w[[r % 128, c]];
            let want = f64::from(product).exp();
            let err = (f64::from(g) - want).abs() / want;
            assert!(
                err < 4.0 * f64::from(f32::EPSILON),
                "N = {n} ({r}, {c}): {g} vs {want}"
            );
        }
    }
}

#[test]
fn a_loop_inside_a_loop_that_runs_once_runs_in_halves() {
    let n = 2048;
    let x = common::random_f32(Ix2(n, 512), 31, -2.0, 2.0);
    let w = common::random_f32(Ix2(128, 512), 32, -1.0, 1.0);
    let (xd, wd) = (
        DeviceTensor::from_array(&x).unwrap(),
        DeviceTensor::from_array(&w).unwrap(),
    );
    let (got, parallel) =
        run_three_ways(&scaled_exp_in_a_single_pass::KERNEL, &[&xd, &wd], [n, 512]);
    assert_eq!(
        parallel.len(),
        1,
        "the row loop runs in halves: {parallel:?}"
    );
    for ((r, c), &g) in got.indexed_iter() {
        let want = f64::from(x[[r, c]] * w[[r % 128, c]]).exp();
        let err = (f64::from(g) - want).abs() / want;
        assert!(
            err < 4.0 * f64::from(f32::EPSILON),
            "({r}, {c}): {g} vs {want}"
        );
    }
}

#[test]
fn a_loop_that_accumulates_into_an_outer_tile_stays_serial() {
    let n = 4096;
    let x = common::random_f32(Ix2(n, 512), 9, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    let (got, parallel) = run_three_ways(&row_tile_sum::KERNEL, &[&xd], [128, 512]);
    assert!(parallel.is_empty(), "{parallel:?}");
    for ((p, c), &g) in got.indexed_iter() {
        let want = (0..n / 128).fold(0.0f32, |acc, i| acc + x[[i * 128 + p, c]]);
        assert_eq!(g.to_bits(), want.to_bits(), "({p}, {c})");
    }
}

#[test]
fn a_loop_whose_halves_write_interleaved_rows_stays_serial() {
    let x = common::random_f32(Ix2(4096, 512), 5, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    let (got, parallel) = run_three_ways(&interleave_rows::KERNEL, &[&xd], [4096, 512]);
    assert!(parallel.is_empty(), "{parallel:?}");
    for i in 0..32 {
        for p in 0..128 {
            assert_eq!(
                got.row(p * 32 + i),
                x.row(i * 128 + p),
                "row {}",
                p * 32 + i
            );
        }
    }
}

#[test]
fn fused_attention_runs_its_query_tiles_in_halves_with_the_serial_bits() {
    for causal in [false, true] {
        let seqlen = 512;
        let q = common::random_f32(Ix2(seqlen, 64), 11, 0.0, 1.0);
        let k = common::random_f32(Ix2(seqlen, 64), 12, 0.0, 1.0);
        let v = common::random_f32(Ix2(seqlen, 64), 13, -1.0, 1.0);
        let [qd, kd, vd] = [&q, &k, &v].map(|a| DeviceTensor::from_array(a).unwrap());
        let kernel = if causal {
            &fused_attention::fused_self_attn_for_sd_small_head_size_d64_causal::KERNEL
        } else {
            &fused_attention::fused_self_attn_for_sd_small_head_size_d64::KERNEL
        };
        let (got, parallel) = run_three_ways(kernel, &[&qd, &kd, &vd], [seqlen, 64]);
        assert_eq!(
            parallel.len(),
            1,
            "causal = {causal}: the query loop runs in halves"
        );
        let (want, bound) = fused_attention::reference(q.view(), k.view(), v.view(), causal);
        let (worst, ratio, within) = fused_attention::max_error(got.view(), &want, &bound);
        assert!(within, "causal = {causal}: {worst:e}, {ratio} of the bound");
    }
}

#[test]
fn a_loop_over_column_blocks_runs_in_halves_and_keeps_unwritten_columns() {
    let lhs_t = fully_optimized::common::random_bf16(128, 128, 21);
    let rhs = fully_optimized::common::random_bf16(128, 4096, 22);
    let (a, b) = (
        DeviceTensor::from_array(&lhs_t).unwrap(),
        DeviceTensor::from_array(&rhs).unwrap(),
    );
    let mut results = Vec::new();
    for mut core in cores() {
        let mut out = DeviceTensor::from_array(&Array2::from_elem((128, 4096), 7.5f32)).unwrap();
        let args = [a.arg(), b.arg()];
        let mut outs = [out.arg_mut()];
        let bound = half_column_block_products::KERNEL
            .bind(&args, &mut outs)
            .unwrap();
        if core.host_threads() == 2 {
            assert_eq!(bound.host_parallel_loops().len(), 1, "the loop splits");
        }
        core.execute(bound).unwrap();
        results.push(out.into_array::<Ix2>().unwrap());
    }
    assert!(same_bits(&results[0], &results[1]), "two threads vs one");
    let (want, size) = fully_optimized::common::reference(lhs_t.view(), rhs.view());
    for ((m, c), &g) in results[0].indexed_iter() {
        if c % 512 < 256 {
            let bound = 128.0 * f64::from(f32::EPSILON) * size[[m, c]];
            let want = want[[m, c]];
            assert!(
                (f64::from(g) - want).abs() <= bound,
                "({m}, {c}): {g} vs {want}"
            );
        } else {
            assert_eq!(g, 7.5, "({m}, {c}) is never written");
        }
    }
}

#[test]
fn a_loop_over_column_blocks_with_little_work_stays_serial() {
    let x = common::random_f32(Ix2(128, 4096), 23, -2.0, 2.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    let (got, parallel) = run_three_ways(&half_column_block_exp::KERNEL, &[&xd], [128, 4096]);
    assert!(parallel.is_empty(), "{parallel:?}");
    for ((r, c), &g) in got.indexed_iter().filter(|((_, c), _)| c % 512 < 256) {
        let want = f64::from(x[[r, c]]).exp();
        let err = (f64::from(g) - want).abs() / want;
        assert!(
            err < 4.0 * f64::from(f32::EPSILON),
            "({r}, {c}): {g} vs {want}"
        );
    }
}

#[test]
fn the_fully_optimized_matmul_runs_its_column_blocks_in_halves_with_the_serial_bits() {
    use fully_optimized::nki_matmul_fully_optimized_small as kernel;
    // K = M = 512 (one block each), N = 2048: four column blocks of 512, two per thread.
    let (k, m, n) = (512, 512, 2048);
    let lhs_t = fully_optimized::common::random_bf16(k, m, 31);
    let rhs = fully_optimized::common::random_bf16(k, n, 32);
    let (a, b) = (
        DeviceTensor::from_array(&lhs_t).unwrap(),
        DeviceTensor::from_array(&rhs).unwrap(),
    );
    let mut results = Vec::new();
    for mut core in cores() {
        let mut out = DeviceTensor::<bf16>::zeros(&[m, n]).unwrap();
        let args = [a.arg(), b.arg()];
        let mut outs = [out.arg_mut()];
        let bound = kernel::KERNEL.bind(&args, &mut outs).unwrap();
        if core.host_threads() == 2 {
            assert_eq!(
                bound.host_parallel_loops(),
                [0],
                "the column-block loop splits"
            );
        }
        core.execute(bound).unwrap();
        results.push(out.into_array::<Ix2>().unwrap());
    }
    let bits = |a: &Array2<bf16>| a.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&results[0]), bits(&results[1]), "two threads vs one");
    let (want, magnitude) = fully_optimized::common::reference(lhs_t.view(), rhs.view());
    let (worst, within) =
        fully_optimized::common::max_error(results[0].view(), &want, &magnitude, k);
    assert!(within, "largest error {worst:e}");
}

#[test]
fn the_round_trip_to_the_second_host_thread_is_measured_only_with_two() {
    let mut one = NeuronCore::default().with_host_threads(1);
    assert_eq!(one.host_round_trip(), None);
    let mut two = NeuronCore::default();
    if two.host_threads() == 2 {
        // `None` only when the other core is busy; a measured trip is a cache line's journey.
        if let Some(t) = two.host_round_trip() {
            assert!(t < std::time::Duration::from_millis(1), "{t:?}");
        }
    }
}
