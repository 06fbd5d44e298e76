//! `range_select` (NeuronCore-v3 and newer) against plain loops: an element is kept where its
//! free index plus `range_start`, as fp32, compares true with both of its partition's bounds,
//! and is fp32's lowest value elsewhere; the maximum of each partition's selected fp32 values
//! goes to `reduce_res`. Edge cases: every comparison NKI allows, fractional and NaN bounds,
//! empty ranges, NaN data inside and outside the range, a negative `range_start`, two free
//! axes (the index is row-major over them), a bf16 destination (the fill becomes −inf) and a
//! mask on partitions. Also NKI's API-page example (`test_nki_isa_range_select.py`, its first
//! kernel and assertions).

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2, Ix3};
use nki::prelude::*;

/// NKI's example: `bound0 <= range_start + index < bound1` with `range_start = 32`, the
/// maximum into `reduce_res`, `on_false_value = nl.fp32.min`.
#[kernel(target = trn2)]
fn nki_range_select_example(
    on_true: Hbm<f32, 128, 512>,
    bound0: Hbm<f32, 128, 1>,
    bound1: Hbm<f32, 128, 1>,
) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 1>) {
    let select_res = ndarray([128, 512], f32, SharedHbm);
    let reduce_result = ndarray([128, 1], f32, SharedHbm);
    let on_true_tile = load(on_true[..]);
    let bound0_tile = load(bound0[..]);
    let bound1_tile = load(bound1[..]);
    let reduce_res_tile = ndarray([128, 1], f32, Sbuf);
    let result = ndarray([128, 512], f32, Sbuf);
    result[..] = range_select(
        on_true_tile = on_true_tile,
        comp_op0 = greater_equal,
        comp_op1 = less,
        bound0 = bound0_tile,
        bound1 = bound1_tile,
        reduce_cmd = reset_reduce,
        reduce_res = reduce_res_tile,
        reduce_op = maximum,
        range_start = 32,
        on_false_value = fp32.min,
    );
    store(select_res[..], result[..]);
    store(reduce_result[..], reduce_res_tile[..]);
    (select_res, reduce_result)
}

#[test]
fn nki_api_page_example() {
    let on_true = rand_f32(Ix2(128, 512), 71, 0.0, 1.0);
    let bound0 = Array2::<f32>::zeros((128, 1));
    let bound1 = Array2::<f32>::from_elem((128, 1), 64.0);
    let mut core = NeuronCore::new(Target::Trn2);
    let (result, reduction) =
        nki_range_select_example::host(&mut core, on_true.view(), bound0.view(), bound1.view())
            .unwrap();
    // The test's golden: indices 32 + i, kept where 0 <= index < 64.
    let golden = Array2::from_shape_fn((128, 512), |(p, i)| {
        let index = (32 + i) as f32;
        if index >= bound0[[p, 0]] && index < bound1[[p, 0]] {
            on_true[[p, i]]
        } else {
            f32::MIN
        }
    });
    assert_bits("select", result.iter(), golden.iter().copied());
    for p in 0..128 {
        let want = golden.row(p).iter().copied().fold(f32::MIN, f32::max);
        assert_eq!(reduction[[p, 0]], want, "maximum of row {p}");
    }
    let prog = nki_range_select_example::KERNEL.program();
    assert!(has_instr(prog, "Vector", "range_select"), "{prog}");
}

#[kernel(target = trn2)]
fn range_select_cases(
    x: Hbm<f32, 128, 64>,
    lo: Hbm<f32, 128, 1>,
    hi: Hbm<f32, 128, 1>,
    y: Hbm<f32, 128, 4, 16>,
) -> (
    Hbm<f32, 128, 64>,
    Hbm<f32, 128, 1>,
    Hbm<f32, 128, 64>,
    Hbm<bf16, 128, 64>,
    Hbm<f32, 128, 1>,
    Hbm<f32, 128, 4, 16>,
    Hbm<f32, 128, 64>,
    Hbm<f32, 128, 1>,
) {
    let o1 = ndarray([128, 64], f32, SharedHbm);
    let o2 = ndarray([128, 1], f32, SharedHbm);
    let o3 = ndarray([128, 64], f32, SharedHbm);
    let o4 = ndarray([128, 64], bf16, SharedHbm);
    let o5 = ndarray([128, 1], f32, SharedHbm);
    let o6 = ndarray([128, 4, 16], f32, SharedHbm);
    let o7 = ndarray([128, 64], f32, SharedHbm);
    let o8 = ndarray([128, 1], f32, SharedHbm);
    let t = load(x[..]);
    let b0 = load(lo[..]);
    let b1 = load(hi[..]);
    let t3 = load(y[..]);
    // greater and less_equal, range_start -10, the maximum.
    let m1 = ndarray([128, 1], f32, Sbuf);
    let d1 = range_select(
        t,
        greater,
        less_equal,
        b0,
        b1,
        reduce_res = m1,
        range_start = -10,
    );
    store(o1[..], d1);
    store(o2[..], m1);
    // equal and greater_equal: one index at most; no reduction (idle).
    let d3 = range_select(
        on_true_tile = t,
        comp_op0 = equal,
        comp_op1 = greater_equal,
        bound0 = b0,
        bound1 = b1,
        reduce_cmd = idle,
    );
    store(o3[..], d3);
    // Into bf16 (the fill becomes -inf), the maximum in fp32.
    let m2 = ndarray([128, 1], f32, Sbuf);
    let d4 = ndarray([128, 64], bf16, Sbuf);
    d4[..] = range_select(
        t,
        greater_equal,
        less,
        b0,
        b1,
        reduce_res = m2,
        range_start = 5,
    );
    store(o4[..], d4);
    store(o5[..], m2);
    // Two free axes: the index runs row-major over both.
    let d6 = range_select(t3, greater_equal, less, b0, b1, range_start = 3);
    store(o6[..], d6);
    // Masked on partitions: the others keep 5.0 (and the reduction 7.0).
    let d7 = ndarray([128, 64], f32, Sbuf);
    let m7 = ndarray([128, 1], f32, Sbuf);
    d7[..] = 5.0;
    m7[..] = 7.0;
    let (i_p, i_f) = mgrid![0..128, 0..64];
    d7[[i_p, i_f]] = range_select(
        t[[i_p, i_f]],
        greater_equal,
        less,
        b0,
        b1,
        reduce_res = m7,
        mask = i_p < 100,
    );
    store(o7[..], d7);
    store(o8[..], m7);
    (o1, o2, o3, o4, o5, o6, o7, o8)
}

/// `index cmp bound` for the five comparisons (IEEE: false against NaN).
fn holds(cmp: &str, index: f32, bound: f32) -> bool {
    match cmp {
        "equal" => index == bound,
        "less" => index < bound,
        "less_equal" => index <= bound,
        "greater" => index > bound,
        "greater_equal" => index >= bound,
        _ => unreachable!("{cmp}"),
    }
}

/// The selection of one row of `n` values (`value(i)`), by a plain loop.
fn select_row(
    n: usize,
    start: i64,
    (c0, b0): (&str, f32),
    (c1, b1): (&str, f32),
    value: impl Fn(usize) -> f32,
) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let index = (start + i as i64) as f32;
            if holds(c0, index, b0) && holds(c1, index, b1) {
                value(i)
            } else {
                f32::MIN
            }
        })
        .collect()
}

/// The maximum of a row as `maximum` folds it: NaN wins.
fn row_max(v: &[f32]) -> f32 {
    v.iter().copied().fold(f32::NEG_INFINITY, fmax)
}

#[test]
fn range_select_matches_plain_loops() {
    let mut x = rand_f32(Ix2(128, 64), 72, -50.0, 50.0);
    // NaN data: inside the range of row 3 (column 20), outside every range (column 63).
    x[[3, 20]] = f32::NAN;
    for p in 0..128 {
        x[[p, 63]] = f32::NAN;
    }
    let y = rand_f32(Ix3(128, 4, 16), 73, -50.0, 50.0);
    // Bounds: fractional ones, empty ranges, a NaN bound, ranges past the row.
    let lo = Array2::from_shape_fn((128, 1), |(p, _)| match p % 8 {
        0 => 0.0,
        1 => 10.5,
        2 => 40.0,
        3 => 15.0,
        4 => f32::NAN,
        5 => -20.0,
        6 => 30.0,
        _ => (p % 50) as f32,
    });
    let hi = Array2::from_shape_fn((128, 1), |(p, _)| match p % 8 {
        0 => 64.0,
        1 => 20.25,
        2 => 40.0,
        3 => 30.0,
        4 => 50.0,
        5 => 1000.0,
        6 => 10.0,
        _ => ((p % 50) + 7) as f32,
    });
    let mut core = NeuronCore::new(Target::Trn2);
    let (o1, o2, o3, o4, o5, o6, o7, o8) =
        range_select_cases::host(&mut core, x.view(), lo.view(), hi.view(), y.view()).unwrap();
    for p in 0..128 {
        let (l, h) = (lo[[p, 0]], hi[[p, 0]]);
        let row = |i: usize| x[[p, i]];
        let want1 = select_row(64, -10, ("greater", l), ("less_equal", h), row);
        assert_bits(&format!("row {p}"), o1.row(p).iter(), want1.iter().copied());
        assert_bits(
            &format!("maximum of row {p}"),
            [o2[[p, 0]]].iter(),
            [row_max(&want1)],
        );
        let want3 = select_row(64, 0, ("equal", l), ("greater_equal", h), row);
        assert_bits(&format!("equal, row {p}"), o3.row(p).iter(), want3);
        let want4 = select_row(64, 5, ("greater_equal", l), ("less", h), row);
        let bf: Vec<bf16> = want4.iter().map(|&v| bf16::from_f32(v)).collect();
        let got: Vec<u16> = o4.row(p).iter().map(|v| v.to_bits()).collect();
        let want_bits: Vec<u16> = bf.iter().map(|v| v.to_bits()).collect();
        // NaN stored canonical: compare NaN-ness there.
        for (i, (&g, &w)) in got.iter().zip(&want_bits).enumerate() {
            if bf[i].is_nan() {
                assert!(bf16::from_bits(g).is_nan(), "bf16 row {p} col {i}");
            } else {
                assert_eq!(g, w, "bf16 row {p} col {i}");
            }
        }
        assert_bits(
            &format!("fp32 maximum of the bf16 row {p}"),
            [o5[[p, 0]]].iter(),
            [row_max(&want4)],
        );
        let want6 = select_row(64, 3, ("greater_equal", l), ("less", h), |i| {
            y[[p, i / 16, i % 16]]
        });
        let got6: Vec<f32> = (0..64).map(|i| o6[[p, i / 16, i % 16]]).collect();
        assert_bits(&format!("two free axes, row {p}"), got6.iter(), want6);
        if p < 100 {
            let want7 = select_row(64, 0, ("greater_equal", l), ("less", h), row);
            assert_bits(
                &format!("masked row {p}"),
                o7.row(p).iter(),
                want7.iter().copied(),
            );
            assert_bits(
                &format!("masked maximum {p}"),
                [o8[[p, 0]]].iter(),
                [row_max(&want7)],
            );
        } else {
            assert!(o7.row(p).iter().all(|&v| v == 5.0), "row {p} kept");
            assert_eq!(o8[[p, 0]], 7.0, "maximum {p} kept");
        }
    }
    // The documented edge cases happened: an empty range keeps fp32's lowest value in the
    // reduction (row 2: 40 <= i < 40), and becomes -inf in bf16; a NaN bound selects nothing.
    assert_eq!(o5[[2, 0]], f32::MIN);
    assert!(o4.row(2).iter().all(|v| *v == bf16::NEG_INFINITY));
    assert!(o1.row(4).iter().all(|&v| v == f32::MIN));
    assert!(
        o8[[3, 0]].is_nan(),
        "a NaN inside the range wins the maximum"
    );
    assert!(
        !o2[[1, 0]].is_nan(),
        "a NaN outside the range is not selected"
    );
    assert!(o1.row(6).iter().all(|&v| v == f32::MIN), "an empty range");
}
