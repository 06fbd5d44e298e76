//! The example kernels at several shapes against an independent f64 reference (`ndarray`), in
//! each launch form, and launch errors that change nothing.

// The example kernels, compiled here as modules; each example brings its own copy of
// `examples/common`, which is why the same file is loaded twice.
use crate::examples::matmul_basic as basic;
use crate::examples::matmul_tiled as tiled;

use basic::common;
use basic::matmul_basic;
use nki::ndarray::{Array2, Ix2, s};
use nki::prelude::*;
use tiled::matmul_tiled;

fn assert_close(out: &Array2<bf16>, lhs_t: &Array2<bf16>, rhs: &Array2<bf16>) {
    let (reference, magnitude) = common::reference(lhs_t.view(), rhs.view());
    let (worst, within) = common::max_error(out.view(), &reference, &magnitude, lhs_t.nrows());
    assert!(within, "largest error {worst} exceeds the bf16 bound");
}

#[test]
fn seed_kernel_device_resident() {
    let (a, b) = (
        common::random_bf16(128, 128, 11),
        common::random_bf16(128, 512, 12),
    );
    let mut core = NeuronCore::default();
    let (da, db) = (
        DeviceTensor::from_array(&a).unwrap(),
        DeviceTensor::from_array(&b).unwrap(),
    );
    let out = matmul_basic(&mut core, &da, &db).unwrap();
    assert_eq!(out.shape(), &[128, 512]);
    assert_close(&out.into_array::<Ix2>().unwrap(), &a, &b);
}

#[test]
fn seed_kernel_launches_repeatedly_on_resident_tensors() {
    let (a, b) = (
        common::random_bf16(128, 128, 13),
        common::random_bf16(128, 512, 14),
    );
    let mut core = NeuronCore::default();
    let (da, db) = (
        DeviceTensor::from_array(&a).unwrap(),
        DeviceTensor::from_array(&b).unwrap(),
    );
    let mut out = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
    matmul_basic::launch_into(&mut core, &da, &db, &mut out).unwrap();
    let first = out.to_array();
    for _ in 0..3 {
        matmul_basic::launch_into(&mut core, &da, &db, &mut out).unwrap();
        assert_eq!(out.to_array(), first);
    }
    assert_close(&first.into_dimensionality().unwrap(), &a, &b);
}

#[test]
fn seed_kernel_on_non_contiguous_views() {
    // A transposed (column-major) view and an every-other-column view.
    let square = common::random_bf16(128, 128, 15);
    let wide = common::random_bf16(128, 1024, 16);
    let (a, b) = (square.t(), wide.slice(s![.., ..;2]));
    assert!(a.as_slice().is_none() && b.as_slice().is_none());
    let mut core = NeuronCore::default();
    let out = matmul_basic::host(&mut core, a, b).unwrap();
    assert_close(&out, &a.to_owned(), &b.to_owned());
}

#[test]
fn one_kernel_output_feeds_the_next() {
    // first = aᵀ·b stays in the modeled HBM and is the moving input of second = aᵀ·first.
    let (a, b) = (
        common::random_bf16(128, 128, 17),
        common::random_bf16(128, 512, 18),
    );
    let mut core = NeuronCore::default();
    let (da, db) = (
        DeviceTensor::from_array(&a).unwrap(),
        DeviceTensor::from_array(&b).unwrap(),
    );
    let first = matmul_tiled(&mut core, &da, &db).unwrap(); // [128, 512], stays on the device
    let second = matmul_tiled(&mut core, &da, &first).unwrap(); // aᵀ · first
    let first_host: Array2<bf16> = first.into_array().unwrap();
    assert_close(&second.into_array().unwrap(), &a, &first_host);
}

#[test]
fn tiled_kernel_at_several_shapes() {
    let mut core = NeuronCore::default();
    for (i, &(k, m, n)) in [
        (128, 128, 512),
        (256, 384, 1024),
        (384, 256, 512),
        (1024, 1024, 1024),
    ]
    .iter()
    .enumerate()
    {
        let a = common::random_bf16(k, m, 100 + i as u64);
        let b = common::random_bf16(k, n, 200 + i as u64);
        let out = matmul_tiled::host(&mut core, a.view(), b.view()).unwrap();
        assert_eq!(out.dim(), (m, n), "K={k} M={m} N={n}");
        assert_close(&out, &a, &b);
    }
}

#[test]
fn two_host_threads_compute_what_one_computes() {
    let (k, m, n) = (384, 256, 1024);
    let a = DeviceTensor::from_array(&common::random_bf16(k, m, 31)).unwrap();
    let b = DeviceTensor::from_array(&common::random_bf16(k, n, 32)).unwrap();
    let mut serial = NeuronCore::default()
        .with_strict(false)
        .with_host_threads(1);
    let mut parallel = NeuronCore::default()
        .with_strict(false)
        .with_host_threads(2);
    assert_eq!(serial.host_threads(), 1);
    let one = matmul_tiled(&mut serial, &a, &b).unwrap();
    let two = matmul_tiled(&mut parallel, &a, &b).unwrap();
    let bits =
        |t: &DeviceTensor<bf16>| t.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&one), bits(&two));
}

#[test]
fn launch_errors_say_what_is_wrong_and_change_nothing() {
    let mut core = NeuronCore::default();
    let a = DeviceTensor::<bf16>::zeros(&[256, 128]).unwrap();
    let b = DeviceTensor::<bf16>::zeros(&[256, 512]).unwrap();
    let sentinel = bf16::from_f32(7.0);
    let mut out = DeviceTensor::from_array(&Array2::from_elem((128, 512), sentinel)).unwrap();

    // Rank.
    let rank3 = DeviceTensor::<bf16>::zeros(&[2, 128, 128]).unwrap();
    let e = matmul_tiled::launch_into(&mut core, &rank3, &b, &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lhs_t") && e.contains('3') && e.contains('2'),
        "{e}"
    );

    // Symbol bound twice with different values.
    let b_bad = DeviceTensor::<bf16>::zeros(&[384, 512]).unwrap();
    let e = matmul_tiled::launch_into(&mut core, &a, &b_bad, &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains('K') && e.contains("256") && e.contains("384"),
        "{e}"
    );

    // Divisibility constraint.
    let a_odd = DeviceTensor::<bf16>::zeros(&[200, 128]).unwrap();
    let b_odd = DeviceTensor::<bf16>::zeros(&[200, 512]).unwrap();
    let e = matmul_tiled::launch_into(&mut core, &a_odd, &b_odd, &mut out)
        .unwrap_err()
        .to_string();
    assert!(e.contains("K % 128 == 0") && e.contains("200"), "{e}");

    // Output shape.
    let mut wrong_out = DeviceTensor::<bf16>::zeros(&[128, 256]).unwrap();
    assert!(matmul_tiled::launch_into(&mut core, &a, &b, &mut wrong_out).is_err());

    // Literal dimension of a fixed-shape kernel.
    let e = matmul_basic(&mut core, &a, &b).unwrap_err().to_string();
    assert!(
        e.contains("lhs_t") && e.contains("256") && e.contains("128"),
        "{e}"
    );

    assert!(
        out.as_slice().iter().all(|&x| x == sentinel),
        "a failed launch wrote its output"
    );
}

/// Four matmuls on every 4th column of one key tile (a strided group, `host::strided`) with one
/// narrow moving operand, two of them on the same columns (phases 0, 0, 2 and 3): each writes
/// its own five PSUM columns.
#[kernel]
fn repeated_phases(k: Hbm<bf16, 128, 256>, q: Hbm<bf16, 128, 5>) -> Hbm<f32, 64, 20> {
    let out = ndarray([64, 20], f32, SharedHbm);
    let k_sb = ndarray([128, 256], bf16, Sbuf);
    let q_sb = ndarray([128, 5], bf16, Sbuf);
    nisa::dma_copy(dst = k_sb, src = k);
    nisa::dma_copy(dst = q_sb, src = q);
    let acc = ndarray([64, 20], f32, Psum);
    nisa::nc_matmul(
        dst = acc.slice(1, 0, 5),
        stationary = k_sb.slice(1, 0, 253, 4),
        moving = q_sb,
        accumulate = false,
    );
    nisa::nc_matmul(
        dst = acc.slice(1, 5, 10),
        stationary = k_sb.slice(1, 0, 253, 4),
        moving = q_sb,
        accumulate = false,
    );
    nisa::nc_matmul(
        dst = acc.slice(1, 10, 15),
        stationary = k_sb.slice(1, 2, 255, 4),
        moving = q_sb,
        accumulate = false,
    );
    nisa::nc_matmul(
        dst = acc.slice(1, 15, 20),
        stationary = k_sb.slice(1, 3, 256, 4),
        moving = q_sb,
        accumulate = false,
    );
    let res = ndarray([64, 20], f32, Sbuf);
    nisa::tensor_copy(dst = res, src = acc);
    nisa::dma_copy(dst = out, src = res);
    out
}

/// A strided group with two matmuls on one phase gives the portable strict run's bits on every
/// path (the one-pass narrow kernel declines it: its table holds one place per column), and
/// both matmuls on phase 0 give the same five columns.
#[test]
fn a_strided_group_with_a_repeated_phase_gives_the_portable_bits() {
    let k = common::random_bf16(128, 256, 21);
    let q = common::random_bf16(128, 5, 22);
    let run = |core: &mut NeuronCore| repeated_phases::host(core, k.view(), q.view()).unwrap();
    let want = run(&mut NeuronCore::default().with_isa(nki::Isa::Portable).unwrap());
    for isa in nki::Isa::supported() {
        for strict in [false, true] {
            let got = run(&mut NeuronCore::default()
                .with_isa(isa)
                .unwrap()
                .with_strict(strict));
            let same = got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits());
            assert!(
                same,
                "{isa:?} (strict {strict}) differs from the portable run"
            );
        }
    }
    assert_eq!(
        want.slice(s![.., 0..5]),
        want.slice(s![.., 5..10]),
        "two matmuls on one phase"
    );
}

/// Three matmuls into one PSUM tile one after another (a chain, `host::chains`: with 96 moving
/// columns, too wide for the narrow kernel, its rows split between the threads once for all
/// three): the first overwrites, the others accumulate, the last over 64 partitions only; bf16
/// stationary operands against f32 moving ones.
#[kernel]
fn accumulating_chain(a: Hbm<bf16, 128, 384>, b: Hbm<f32, 128, 288>) -> Hbm<f32, 128, 96> {
    let out = ndarray([128, 96], f32, SharedHbm);
    let a_sb = ndarray([128, 384], bf16, Sbuf);
    let b_sb = ndarray([128, 288], f32, Sbuf);
    nisa::dma_copy(dst = a_sb, src = a);
    nisa::dma_copy(dst = b_sb, src = b);
    let acc = ndarray([128, 96], f32, Psum);
    nisa::nc_matmul(
        dst = acc,
        stationary = a_sb[[0..128, 0..128]],
        moving = b_sb[[0..128, 0..96]],
        accumulate = false,
    );
    nisa::nc_matmul(
        dst = acc,
        stationary = a_sb[[0..128, 128..256]],
        moving = b_sb[[0..128, 96..192]],
        accumulate = true,
    );
    nisa::nc_matmul(
        dst = acc,
        stationary = a_sb[[0..64, 256..384]],
        moving = b_sb[[0..64, 192..288]],
        accumulate = true,
    );
    let res = ndarray([128, 96], f32, Sbuf);
    nisa::tensor_copy(dst = res, src = acc);
    nisa::dma_copy(dst = out, src = res);
    out
}

/// A chain of matmuls gives the portable strict run's bits on every path and thread count,
/// and the sum of the three products (f64 reference; each element's 320 fp32 steps stay
/// within `320 · 2⁻²⁴ · Σ|a·b|`).
#[test]
fn a_chain_of_accumulating_matmuls_gives_the_portable_bits() {
    let a = common::random_bf16(128, 384, 31);
    let b = common::uniform(Ix2(128, 288), 32, -1.0, 1.0).mapv(|v| v as f32);
    let run = |core: &mut NeuronCore| accumulating_chain::host(core, a.view(), b.view()).unwrap();
    let want = run(&mut NeuronCore::default().with_isa(nki::Isa::Portable).unwrap());
    let (a64, b64) = (a.mapv(f64::from), b.mapv(f64::from));
    for ((m, n), &got) in want.indexed_iter() {
        let terms = (0..128)
            .map(|k| (k, m, n))
            .chain((0..128).map(|k| (k, 128 + m, 96 + n)))
            .chain((0..64).map(|k| (k, 256 + m, 192 + n)));
        let (mut sum, mut mag) = (0.0, 0.0);
        for (k, i, j) in terms {
            let p = a64[[k, i]] * b64[[k, j]];
            sum += p;
            mag += p.abs();
        }
        let bound = 320.0 * 2f64.powi(-24) * mag;
        assert!(
            (f64::from(got) - sum).abs() <= bound,
            "[{m}, {n}]: {got} vs {sum}"
        );
    }
    for (at, mut core) in crate::common::host_paths() {
        let got = run(&mut core);
        let same = got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(same, "{at} differs from the portable run");
    }
}
