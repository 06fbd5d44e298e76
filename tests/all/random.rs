//! The random number generator: `rand`, `random_seed` and `dropout` (`nl` and `nisa`
//! spellings), checked against an independent Philox4x32-10 written here (Random123's known
//! answers first), and statistically with fixed seeds and wide bounds.

use crate::common;

use nki::ndarray::Array2;
use nki::prelude::*;

/// Philox4x32-10 (Salmon et al., SC 2011), written from the paper's definition.
fn philox(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(0x9E37_79B9);
            k[1] = k[1].wrapping_add(0xBB67_AE85);
        }
        let p0 = u64::from(0xD251_1F53u32) * u64::from(c[0]);
        let p1 = u64::from(0xCD9E_8D57u32) * u64::from(c[2]);
        c = [
            ((p1 >> 32) as u32) ^ c[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

#[test]
fn the_reference_generator_has_random123s_known_answers() {
    assert_eq!(
        philox([0; 4], [0; 2]),
        [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    );
    assert_eq!(
        philox([u32::MAX; 4], [u32::MAX; 2]),
        [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
    );
    assert_eq!(
        philox(
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0]
        ),
        [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
    );
}

/// The documented value of element `(p, f)` of call `call` after seed `seed` in instance
/// `instance`, with `bits` significand bits.
fn uniform(seed: u32, instance: u32, call: u32, p: usize, f: usize, bits: u32) -> f64 {
    let w = philox([f as u32, p as u32, call, 0], [seed, instance])[0];
    f64::from(w >> (32 - bits)) / f64::from(1u32 << bits)
}

#[kernel]
fn two_draws(seed: Hbm<i32, 1, 1>) -> Hbm<f32, 2, 128, 512> {
    let out = ndarray([2, 128, 512], f32, SharedHbm);
    let s = load(seed[..]);
    random_seed(s);
    let a = rand([128, 512], f32);
    let b = rand(shape = [128, 512], dtype = f32);
    store(out[[0, 0..128, 0..512]], a);
    store(out[[1, 0..128, 0..512]], b);
    out
}

#[test]
fn rand_is_philox_of_each_elements_counter() {
    let seed = Array2::from_elem((1, 1), 1234i32);
    let out = two_draws::host(&mut NeuronCore::default(), seed.view()).unwrap();
    for ((c, p, f), &v) in out.indexed_iter() {
        let want = uniform(1234, 0, c as u32, p, f, 24);
        assert_eq!(f64::from(v), want, "call {c} ({p}, {f})");
    }
}

/// Mean and variance of a sample.
fn moments(xs: impl Iterator<Item = f64>) -> (f64, f64, usize) {
    let v: Vec<f64> = xs.collect();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var, v.len())
}

#[test]
fn rand_is_uniform_on_zero_to_one() {
    for seed in [0, 1, -7, i32::MAX] {
        let s = Array2::from_elem((1, 1), seed);
        let out = two_draws::host(&mut NeuronCore::default(), s.view()).unwrap();
        assert!(out.iter().all(|&v| (0.0..1.0).contains(&v)), "seed {seed}");
        // 131072 values: the mean's standard error is 0.0008, the variance's 0.0002.
        let (mean, var, _) = moments(out.iter().map(|&v| f64::from(v)));
        assert!((mean - 0.5).abs() < 0.01, "seed {seed}: mean {mean}");
        assert!(
            (var - 1.0 / 12.0).abs() < 0.005,
            "seed {seed}: variance {var}"
        );
        // The two calls differ, and the same seed gives the same values again.
        assert_ne!(
            out.index_axis(nki::ndarray::Axis(0), 0),
            out.index_axis(nki::ndarray::Axis(0), 1)
        );
        let again = two_draws::host(&mut NeuronCore::default(), s.view()).unwrap();
        assert_eq!(out, again, "seed {seed}");
    }
    let one = two_draws::host(
        &mut NeuronCore::default(),
        Array2::from_elem((1, 1), 1).view(),
    );
    let two = two_draws::host(
        &mut NeuronCore::default(),
        Array2::from_elem((1, 1), 2).view(),
    );
    assert_ne!(one.unwrap(), two.unwrap());
}

/// `random_seed` resets the call count: the same seed twice repeats the same draw, in a
/// sequential loop each iteration draws anew (its call count grows), and a masked draw writes
/// the unmasked draw's values where it writes.
#[kernel]
fn reseeds(seed: Hbm<i32, 1, 1>) -> Hbm<f32, 6, 128, 64> {
    let out = ndarray([6, 128, 64], f32, SharedHbm);
    let s = load(seed[..]);
    random_seed(seed = s);
    let a = rand([128, 64], f32);
    store(out[[0, 0..128, 0..64]], a);
    random_seed(s);
    let b = rand([128, 64], f32);
    store(out[[1, 0..128, 0..64]], b);
    for i in sequential_range(2) {
        let c = rand([128, 64], f32);
        store(out[[2 + i, 0..128, 0..64]], c);
    }
    random_seed(s);
    let (i_p, i_f) = mgrid![0..128, 0..64];
    let m = zeros([128, 64], f32);
    m[[i_p, i_f]] = rand([128, 64], f32, mask = (i_p >= 32) & (i_f < 40));
    store(out[[4, 0..128, 0..64]], m);
    let bf = rand([128, 64], bf16);
    store(out[[5, 0..128, 0..64]], bf);
    out
}

#[test]
fn random_seed_restarts_the_sequence_and_masks_keep_positions() {
    let s = Array2::from_elem((1, 1), 99i32);
    let out = reseeds::host(&mut NeuronCore::default(), s.view()).unwrap();
    for ((k, p, f), &v) in out.indexed_iter() {
        let want = match k {
            0 | 1 => uniform(99, 0, 0, p, f, 24),
            // After the second seed: calls 1 and 2.
            2 | 3 => uniform(99, 0, k as u32 - 1, p, f, 24),
            4 if p >= 32 && f < 40 => uniform(99, 0, 0, p, f, 24),
            4 => 0.0,
            // bf16: 8 significand bits, call 1 after the third seed.
            _ => uniform(99, 0, 1, p, f, 8),
        };
        assert_eq!(f64::from(v), want, "[{k}, {p}, {f}]");
    }
}

/// Each instance of a grid has its own generator (the instance in the key), started at seed 0
/// until it seeds it.
#[kernel]
fn per_instance() -> Hbm<f32, 5, 128, 256> {
    let out = ndarray([5, 128, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    let r = rand([128, 256], f32);
    store(out[[program_id(0), i_p, i_f]], r);
    out
}

#[test]
fn instances_draw_their_own_numbers_on_any_thread_count() {
    let mut results = Vec::new();
    for threads in [1, 2] {
        let mut core = NeuronCore::default().with_host_threads(threads);
        let out = per_instance::grid([5]).host(&mut core).unwrap();
        results.push(out);
    }
    assert_eq!(results[0], results[1], "one host thread vs two");
    for ((i, p, f), &v) in results[0].indexed_iter() {
        assert_eq!(
            f64::from(v),
            uniform(0, i as u32, 0, p, f, 24),
            "[{i}, {p}, {f}]"
        );
    }
}

/// `nl.dropout(x, rate)` and `nisa.dropout(data, prob)`: an immediate rate, a per-partition
/// column, the edge rates 0 and 1, a dtype.
#[kernel]
fn dropouts(
    x: Hbm<f32, 128, 512>,
    rates: Hbm<f32, 128, 1>,
    seed: Hbm<i32, 1, 1>,
) -> Hbm<f32, 4, 128, 512> {
    let out = ndarray([4, 128, 512], f32, SharedHbm);
    let t = load(x[..]);
    let r = load(rates[..]);
    let s = load(seed[..]);
    random_seed(seed = s);
    let a = dropout(t, 0.3);
    let b = dropout(x = t, rate = r);
    let c = dropout(data = t, prob = 0.0);
    let d = dropout(t, prob = 1.0, dtype = bf16);
    store(out[[0, 0..128, 0..512]], a);
    store(out[[1, 0..128, 0..512]], b);
    store(out[[2, 0..128, 0..512]], c);
    store(out[[3, 0..128, 0..512]], d);
    out
}

#[test]
fn dropout_zeroes_each_element_with_its_probability_and_does_not_scale() {
    let x = common::rand_f32(nki::ndarray::Ix2(128, 512), 5, 0.5, 2.0);
    let rates = Array2::from_shape_fn((128, 1), |(p, _)| p as f32 / 128.0);
    let seed = Array2::from_elem((1, 1), 2024i32);
    let out = dropouts::host(
        &mut NeuronCore::default(),
        x.view(),
        rates.view(),
        seed.view(),
    )
    .unwrap();
    let mut kept = [0usize; 2];
    for ((k, p, f), &v) in out.indexed_iter() {
        let rate = match k {
            0 => 0.3f32,
            1 => rates[[p, 0]],
            2 => 0.0,
            _ => 1.0,
        };
        let u = uniform(2024, 0, k as u32, p, f, 24) as f32;
        let want = if u < rate { 0.0 } else { x[[p, f]] };
        assert_eq!(v.to_bits(), want.to_bits(), "[{k}, {p}, {f}]");
        if k < 2 && v != 0.0 {
            kept[k] += 1;
        }
    }
    // 65536 elements: the keep fraction's standard error is below 0.002.
    let n = (128 * 512) as f64;
    let fraction = |k: usize| kept[k] as f64 / n;
    assert!(
        (fraction(0) - 0.7).abs() < 0.01,
        "rate 0.3 kept {}",
        fraction(0)
    );
    let want = 1.0 - rates.iter().map(|&r| f64::from(r)).sum::<f64>() / 128.0;
    assert!(
        (fraction(1) - want).abs() < 0.01,
        "column rates kept {}",
        fraction(1)
    );
    assert!(out.slice(nki::ndarray::s![2, .., ..]) == x);
    assert!(
        out.slice(nki::ndarray::s![3, .., ..])
            .iter()
            .all(|&v| v == 0.0)
    );
}

/// A seed read from a tile nothing wrote in this launch (its load is masked off when `N` is
/// 1): strict launches refuse it, as they refuse storing such an element.
#[kernel]
fn seed_when_n_is_two(
    x: Hbm<f32, 128, 64>,
    seed: Hbm<i32, 1, 1>,
    n: Hbm<f32, N, 1>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = load(x[..]);
    let (ip, jf) = mgrid![0..1, 0..1];
    let s = ndarray([1, 1], i32, Sbuf);
    s[[ip, jf]] = load(seed[[ip, jf]], mask = ip + 1 < N);
    random_seed(s);
    let r = dropout(t, 0.5);
    store(out[..], r);
    out
}

#[test]
fn strict_launches_refuse_an_unwritten_seed() {
    let x = Array2::<f32>::ones((128, 64));
    let seed = Array2::from_elem((1, 1), 3i32);
    let two = Array2::<f32>::zeros((2, 1));
    assert!(
        seed_when_n_is_two::host(
            &mut NeuronCore::default(),
            x.view(),
            seed.view(),
            two.view()
        )
        .is_ok()
    );
    let one = Array2::<f32>::zeros((1, 1));
    let err = seed_when_n_is_two::host(
        &mut NeuronCore::default(),
        x.view(),
        seed.view(),
        one.view(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("random_seed"), "{msg}");
    let mut plain = NeuronCore::default().with_strict(false);
    assert!(seed_when_n_is_two::host(&mut plain, x.view(), seed.view(), one.view()).is_ok());
}

/// Draws inside an outermost `affine_range` loop with enough work to split between host
/// threads, among instructions that compute each partition on their own (which plain runs
/// run a block of partitions at a time): every host path gives the documented values.
#[kernel]
fn draws_in_a_loop(x: Hbm<f32, 512, 2048>) -> Hbm<f32, 512, 2048> {
    let out = ndarray([512, 2048], f32, SharedHbm);
    for i in affine_range(4) {
        let t = load(x[[i * 128..i * 128 + 128, 0..2048]]);
        let d = dropout(t, 0.25);
        let y = multiply(d, 2.0);
        let r = rand([128, 2048], f32);
        let z = add(y, r);
        store(out[[i * 128..i * 128 + 128, 0..2048]], z);
    }
    out
}

#[test]
fn every_host_path_draws_the_same_numbers() {
    let x = common::rand_f32(nki::ndarray::Ix2(512, 2048), 9, 1.0, 2.0);
    let cores = [
        NeuronCore::default(),
        NeuronCore::default()
            .with_strict(false)
            .with_host_threads(1),
        NeuronCore::default()
            .with_strict(false)
            .with_host_threads(2),
        NeuronCore::default()
            .with_strict(false)
            .with_host_cache_bytes(1024),
    ];
    for (k, mut core) in cores.into_iter().enumerate() {
        let out = draws_in_a_loop::host(&mut core, x.view()).unwrap();
        for ((r, f), &v) in out.indexed_iter() {
            // Iteration i draws calls 2i (dropout) and 2i + 1 (rand) on its [128, 2048] grid.
            let (i, p) = ((r / 128) as u32, r % 128);
            let u = uniform(0, 0, 2 * i, p, f, 24) as f32;
            let kept = if u < 0.25 { 0.0 } else { x[[r, f]] };
            let want = kept * 2.0 + uniform(0, 0, 2 * i + 1, p, f, 24) as f32;
            assert_eq!(v.to_bits(), want.to_bits(), "core {k}: ({r}, {f})");
        }
    }
}

/// `random_seed` in a branch on a loop index runs only in the iterations the branch picks.
#[kernel]
fn seed_in_a_branch(seed: Hbm<i32, 1, 1>) -> Hbm<f32, 2, 128, 64> {
    let out = ndarray([2, 128, 64], f32, SharedHbm);
    let s = load(seed[..]);
    for i in sequential_range(2) {
        if i >= 1 {
            random_seed(s);
        }
        let r = rand([128, 64], f32);
        store(out[[i, 0..128, 0..64]], r);
    }
    out
}

#[test]
fn a_predicated_random_seed_is_skipped_where_its_branch_is_not_taken() {
    let s = Array2::from_elem((1, 1), 77i32);
    let out = seed_in_a_branch::host(&mut NeuronCore::default(), s.view()).unwrap();
    for ((i, p, f), &v) in out.indexed_iter() {
        // Iteration 0: seed 0, call 0; iteration 1: seed 77, call 0.
        let seed = if i == 0 { 0 } else { 77 };
        assert_eq!(
            f64::from(v),
            uniform(seed, 0, 0, p, f, 24),
            "[{i}, {p}, {f}]"
        );
    }
}

/// The schedule check runs launches in other orders the device may take: each instance's
/// generator keeps its calls in program order there, so draws in `affine_range` iterations
/// (re-seeded per iteration, as flash attention does, or not) and in several instances give
/// the program-order bits in every order.
#[test]
fn the_schedule_check_keeps_each_instances_draws_in_program_order() {
    use nki::strict::ScheduleCheck;
    let x = common::rand_f32(nki::ndarray::Ix2(512, 2048), 9, 1.0, 2.0);
    let mut core = NeuronCore::default().with_schedule_check(Some(ScheduleCheck::DEFAULT));
    let checked = draws_in_a_loop::host(&mut core, x.view()).unwrap();
    let plain = draws_in_a_loop::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(checked, plain);
    let mut core = NeuronCore::default().with_schedule_check(Some(ScheduleCheck::DEFAULT));
    let grid = per_instance::grid([5]).host(&mut core).unwrap();
    assert_eq!(
        grid,
        per_instance::grid([5])
            .host(&mut NeuronCore::default())
            .unwrap()
    );
}
