//! NKI 0.6's GpSimd `topk(val_dst, idx_dst, src, n)` against a plain reference that builds each
//! 16-partition snake by hand (value `i` at partition `16g + i % 16`, column `i / 16`), selects
//! the K largest by selection (NaN above everything, `+0` above `−0`, the lower index first
//! among equal values), and lays them out ascending in the same snake layout: NKI's documented
//! example (n = 42, K = 8), ragged `n`, K = 1, K = n, ties, NaN and signed zeros, and strict
//! mode refusing a stored element `topk` does not write.

use nki::ndarray::Array2;
use nki::prelude::*;

/// Whether `a` ranks above `b` (as `max8` ranks): every NaN above everything else, then by
/// value, `+0` above `−0`.
fn above(a: f32, b: f32) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && !b.is_nan();
    }
    a > b || (a == 0.0 && b == 0.0 && a.is_sign_positive() && b.is_sign_negative())
}

/// The expected `[P, cols]` values and indices: for each group of 16 partitions, the snake of
/// `src`'s first `n` elements, its `k` largest by selection (each round the first unused
/// element no other unused element ranks above), ascending in the snake layout; elsewhere
/// `None` (not written).
#[allow(clippy::type_complexity)]
fn expected(src: &Array2<bf16>, n: usize, k: usize, cols: usize) -> Array2<Option<(u16, u32)>> {
    let p = src.nrows();
    let mut out = Array2::from_elem((p, cols), None);
    for g in 0..p / 16 {
        let snake: Vec<(f32, u16)> = (0..n)
            .map(|i| {
                let v = src[[16 * g + i % 16, i / 16]];
                (v.to_f32(), v.to_bits())
            })
            .collect();
        let mut used = vec![false; n];
        let mut descending = Vec::new();
        for _ in 0..k {
            let mut best: Option<usize> = None;
            for i in 0..n {
                if !used[i] && best.is_none_or(|b| above(snake[i].0, snake[b].0)) {
                    best = Some(i);
                }
            }
            let b = best.unwrap();
            used[b] = true;
            descending.push(b);
        }
        for (j, &i) in descending.iter().rev().enumerate() {
            out[[16 * g + j % 16, j / 16]] = Some((snake[i].1, i as u32));
        }
    }
    out
}

/// Compares a run's outputs with the reference where `topk` writes, and with the memset
/// values (`fill` bits, index 7) elsewhere.
fn check(vals: &Array2<bf16>, idx: &Array2<u32>, want: &Array2<Option<(u16, u32)>>, fill: u16) {
    for ((p, c), w) in want.indexed_iter() {
        let got = (vals[[p, c]].to_bits(), idx[[p, c]]);
        match w {
            Some(w) => assert_eq!(got, *w, "[{p}, {c}]"),
            None => assert_eq!(got, (fill, 7), "[{p}, {c}] is not written"),
        }
    }
}

/// NKI's documented example: n = 42 values in a `[P, 3]` snake tile, K = 8; the outputs memset
/// first (to -1.0 and 7) so they can be stored whole.
#[kernel(target = trn2)]
fn topk_example(x: Hbm<bf16, 128, 3>) -> (Hbm<bf16, 128, 8>, Hbm<u32, 128, 8>) {
    let ov = ndarray([128, 8], bf16, SharedHbm);
    let oi = ndarray([128, 8], u32, SharedHbm);
    let src = ndarray([128, 3], bf16, Sbuf);
    nisa::dma_copy(dst = src, src = x);
    let val = ndarray([128, 8], bf16, Sbuf);
    let idx = ndarray([128, 8], u32, Sbuf);
    memset(dst = val, value = -1.0);
    memset(dst = idx, value = 7);
    nisa::topk(val_dst = val, idx_dst = idx, src = src, n = 42);
    nisa::dma_copy(dst = ov, src = val);
    nisa::dma_copy(dst = oi, src = idx);
    (ov, oi)
}

/// K = n = 37 on 32 partitions (positional), on trn3.
#[kernel(target = trn3)]
fn topk_all(x: Hbm<bf16, 32, 5>) -> (Hbm<bf16, 32, 37>, Hbm<u32, 32, 37>) {
    let ov = ndarray([32, 37], bf16, SharedHbm);
    let oi = ndarray([32, 37], u32, SharedHbm);
    let src = load(x[..]);
    let val = ndarray([32, 37], bf16, Sbuf);
    let idx = ndarray([32, 37], u32, Sbuf);
    memset(dst = val, value = -1.0);
    memset(dst = idx, value = 7);
    nisa::topk(val, idx, src, 37);
    store(ov[..], val);
    store(oi[..], idx);
    (ov, oi)
}

/// K = 1 and K = 20 of a ragged n = 100 over 64 partitions (a source wider than the snake).
#[kernel(target = trn2)]
fn topk_ragged(
    x: Hbm<bf16, 64, 9>,
) -> (
    Hbm<bf16, 64, 1>,
    Hbm<u32, 64, 1>,
    Hbm<bf16, 64, 20>,
    Hbm<u32, 64, 20>,
) {
    let o1 = ndarray([64, 1], bf16, SharedHbm);
    let i1 = ndarray([64, 1], u32, SharedHbm);
    let o20 = ndarray([64, 20], bf16, SharedHbm);
    let i20 = ndarray([64, 20], u32, SharedHbm);
    let src = load(x[..]);
    let v1 = ndarray([64, 1], bf16, Sbuf);
    let x1 = ndarray([64, 1], u32, Sbuf);
    memset(dst = v1, value = -1.0);
    memset(dst = x1, value = 7);
    nisa::topk(val_dst = v1, idx_dst = x1, src = src, n = 100);
    let v20 = ndarray([64, 20], bf16, Sbuf);
    let x20 = ndarray([64, 20], u32, Sbuf);
    memset(dst = v20, value = -1.0);
    memset(dst = x20, value = 7);
    nisa::topk(val_dst = v20, idx_dst = x20, src = src, n = 100);
    store(o1[..], v1);
    store(i1[..], x1);
    store(o20[..], v20);
    store(i20[..], x20);
    (o1, i1, o20, i20)
}

/// The outputs not memset: storing all of `val_dst` stores elements `topk` does not write.
#[kernel(target = trn2)]
fn topk_unwritten(x: Hbm<bf16, 16, 2>) -> Hbm<bf16, 16, 8> {
    let ov = ndarray([16, 8], bf16, SharedHbm);
    let src = load(x[..]);
    let val = ndarray([16, 8], bf16, Sbuf);
    let idx = ndarray([16, 8], u32, Sbuf);
    nisa::topk(val_dst = val, idx_dst = idx, src = src, n = 20);
    store(ov[..], val);
    ov
}

/// Only the snake positions it writes (the first column, and column 1 of partitions 0..3).
#[kernel(target = trn2)]
fn topk_written(x: Hbm<bf16, 16, 2>) -> (Hbm<bf16, 16, 1>, Hbm<u32, 4, 1>) {
    let ov = ndarray([16, 1], bf16, SharedHbm);
    let oi = ndarray([4, 1], u32, SharedHbm);
    let src = load(x[..]);
    let val = ndarray([16, 20], bf16, Sbuf);
    let idx = ndarray([16, 20], u32, Sbuf);
    nisa::topk(val_dst = val, idx_dst = idx, src = src, n = 20);
    store(ov[..], val[[0..16, 0..1]]);
    store(oi[..], idx[[0..4, 1..2]]);
    (ov, oi)
}

/// bf16 values with many ties (a few distinct values), NaN, ±0 and ±∞ among them.
fn input(p: usize, cols: usize, seed: u32) -> Array2<bf16> {
    let pick = [
        0.5,
        -0.0,
        0.0,
        1.25,
        -3.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        2.0,
        1.25,
        0.5,
        -7.5,
    ];
    Array2::from_shape_fn((p, cols), |(r, c)| {
        let h = (r as u32 * 31 + c as u32 * 17 + seed).wrapping_mul(2_654_435_761) >> 7;
        let v = if h.is_multiple_of(5) {
            pick[(h as usize / 5) % pick.len()]
        } else {
            (h % 2000) as f32 / 8.0 - 125.0
        };
        bf16::from_f32(v)
    })
}

#[test]
fn nki_documented_example() {
    let x = input(128, 3, 1);
    let fill = bf16::from_f32(-1.0).to_bits();
    for strict in [false, true] {
        let mut core = NeuronCore::new(Target::Trn2).with_strict(strict);
        let (v, i) = topk_example::host(&mut core, x.view()).unwrap();
        check(&v, &i, &expected(&x, 42, 8, 8), fill);
    }
}

#[test]
fn k_equal_to_n_sorts_each_snake() {
    let x = input(32, 5, 2);
    let mut core = NeuronCore::new(Target::Trn3);
    let (v, i) = topk_all::host(&mut core, x.view()).unwrap();
    let want = expected(&x, 37, 37, 37);
    check(&v, &i, &want, bf16::from_f32(-1.0).to_bits());
    // Ascending along the snake: value j + 1 never ranks below value j.
    for g in 0..2 {
        for j in 0..36 {
            let a = v[[16 * g + j % 16, j / 16]].to_f32();
            let b = v[[16 * g + (j + 1) % 16, (j + 1) / 16]].to_f32();
            assert!(!above(a, b), "group {g}: {a} before {b}");
        }
    }
}

#[test]
fn ragged_n_with_k_one_and_twenty() {
    let x = input(64, 9, 3);
    let fill = bf16::from_f32(-1.0).to_bits();
    let mut core = NeuronCore::new(Target::Trn2).with_strict(true);
    let (v1, i1, v20, i20) = topk_ragged::host(&mut core, x.view()).unwrap();
    check(&v1, &i1, &expected(&x, 100, 1, 1), fill);
    check(&v20, &i20, &expected(&x, 100, 20, 20), fill);
}

#[test]
fn strict_mode_follows_the_snake_positions_it_writes() {
    let x = input(16, 2, 4);
    let mut strict = NeuronCore::new(Target::Trn2).with_strict(true);
    let why = topk_unwritten::host(&mut strict, x.view())
        .unwrap_err()
        .to_string();
    assert!(why.contains("store") && why.contains("unwritten"), "{why}");
    // K = 8 fills partitions 0..8 of column 0: element 1 (partition 0, column 1) is the first
    // element stored that topk does not write.
    assert!(why.contains("element 1 "), "{why}");
    let (v, i) = topk_written::host(&mut strict, x.view()).unwrap();
    let want = expected(&x, 20, 20, 20);
    for p in 0..16 {
        assert_eq!(Some(v[[p, 0]].to_bits()), want[[p, 0]].map(|w| w.0));
    }
    for p in 0..4 {
        assert_eq!(Some(i[[p, 0]]), want[[p, 1]].map(|w| w.1));
    }
}

/// Two `topk` of 8 values: of n = 64 and of n = 1024 snake values.
#[kernel(target = trn2)]
fn topk_two_sizes(x: Hbm<bf16, 128, 64>) -> (Hbm<bf16, 128, 8>, Hbm<bf16, 128, 8>) {
    let o1 = ndarray([128, 8], bf16, SharedHbm);
    let o2 = ndarray([128, 8], bf16, SharedHbm);
    let src = load(x[..]);
    let v1 = ndarray([128, 8], bf16, Sbuf);
    let i1 = ndarray([128, 8], u32, Sbuf);
    memset(dst = v1, value = 0.0);
    nisa::topk(val_dst = v1, idx_dst = i1, src = src, n = 64);
    let v2 = ndarray([128, 8], bf16, Sbuf);
    let i2 = ndarray([128, 8], u32, Sbuf);
    memset(dst = v2, value = 0.0);
    nisa::topk(val_dst = v2, idx_dst = i2, src = src, n = 1024);
    store(o1[..], v1);
    store(o2[..], v2);
    (o1, o2)
}

/// The timing model (`docs/timing.md`): `150 + 4n + K` GpSimd cycles per instruction, the
/// eight groups of 16 partitions at once: 960 more values cost 3840 more cycles, 3.2 µs at
/// Trn2's 1.2 GHz.
#[test]
fn the_timing_model_charges_four_cycles_per_snake_value() {
    use nki::program::{Engine, Opcode};
    use nki::timing::{Detail, Kind, Timing};
    let mut core = NeuronCore::new(Target::Trn2);
    let s = Timing::new()
        .detail(Detail::Trace)
        .run_shapes(&mut core, &topk_two_sizes::KERNEL, &[&[128, 64]])
        .unwrap();
    assert_eq!(s.opcode_count(Engine::GpSimd, Opcode::TopK), 2);
    let busy: Vec<u64> = s
        .records()
        .iter()
        .filter(|r| r.opcode == Opcode::TopK && r.kind == Kind::Instruction)
        .map(|r| r.end - r.start)
        .collect();
    assert_eq!(busy.len(), 2);
    assert_eq!(busy[1] - busy[0], 3_200_000, "{busy:?} ps");
}
