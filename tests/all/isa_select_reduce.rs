//! `select_reduce` against plain loops: the predicate (uint8, int16) picks `on_true` or
//! `on_false` (a number or a `[P, 1]` column), negated by `reverse_pred`; the maximum of each
//! partition's selected values goes to `reduce_res`; a mask on partitions and free elements
//! leaves the other elements of `dst` and `reduce_res` as they were.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

#[kernel]
fn select_reduce_calls(
    x: Hbm<f32, 128, 64>,
    pr: Hbm<u8, 128, 64>,
    pr16: Hbm<i16, 128, 64>,
    c: Hbm<f32, 128, 1>,
) -> (
    Hbm<f32, 128, 64>,
    Hbm<f32, 128, 1>,
    Hbm<bf16, 128, 64>,
    Hbm<f32, 128, 1>,
    Hbm<f32, 128, 64>,
    Hbm<f32, 128, 1>,
) {
    let o1 = ndarray([128, 64], f32, SharedHbm);
    let o2 = ndarray([128, 1], f32, SharedHbm);
    let o3 = ndarray([128, 64], bf16, SharedHbm);
    let o4 = ndarray([128, 1], f32, SharedHbm);
    let o5 = ndarray([128, 64], f32, SharedHbm);
    let o6 = ndarray([128, 1], f32, SharedHbm);
    let t = load(x[..]);
    let p = load(pr[..]);
    let p16 = load(pr16[..]);
    let col = load(c[..]);
    let d = ndarray([128, 64], f32, Sbuf);
    let m = ndarray([128, 1], f32, Sbuf);
    select_reduce(
        dst = d,
        predicate = p,
        on_true = t,
        on_false = -1e9,
        reduce_res = m,
        reduce_cmd = reset_reduce,
        reduce_op = maximum,
    );
    store(o1[..], d);
    store(o2[..], m);
    // Reversed, a [P, 1] column on the false side, into bf16.
    let d2 = ndarray([128, 64], bf16, Sbuf);
    let m2 = ndarray([128, 1], f32, Sbuf);
    select_reduce(d2, p16, t, col, reduce_res = m2, reverse_pred = true);
    store(o3[..], d2);
    store(o4[..], m2);
    // Masked: partitions below 100, the first 40 columns; the rest keep 5.0 (and the reduction
    // its 7.0).
    let d3 = ndarray([128, 64], f32, Sbuf);
    let m3 = ndarray([128, 1], f32, Sbuf);
    d3[..] = 5.0;
    m3[..] = 7.0;
    let (i_p, i_f) = mgrid![0..128, 0..64];
    select_reduce(
        d3[[i_p, i_f]],
        p[[i_p, i_f]],
        t[[i_p, i_f]],
        0,
        reduce_res = m3,
        mask = (i_p < 100) & (i_f < 40),
    );
    store(o5[..], d3);
    store(o6[..], m3);
    (o1, o2, o3, o4, o5, o6)
}

/// The maximum of a row as `maximum` folds it: NaN wins, `+0` above `−0`.
fn row_max(v: impl Iterator<Item = f32>) -> f32 {
    v.fold(f32::NEG_INFINITY, fmax)
}

#[test]
fn select_reduce_selects_and_takes_each_partitions_maximum() {
    let x = rand_f32(Ix2(128, 64), 31, -50.0, 50.0);
    let pr = rand_int(Ix2(128, 64), 32, 0, 3).mapv(|v| v as u8);
    let pr16 = rand_int(Ix2(128, 64), 33, -2, 1).mapv(|v| v as i16);
    // One row never selects: its maximum is on_false's.
    let mut pr = pr;
    pr.row_mut(5).fill(0);
    let c = rand_f32(Ix2(128, 1), 34, -5.0, 5.0);
    let (o1, o2, o3, o4, o5, o6) = select_reduce_calls::host(
        &mut NeuronCore::default(),
        x.view(),
        pr.view(),
        pr16.view(),
        c.view(),
    )
    .unwrap();
    let want1 = Array2::from_shape_fn(
        (128, 64),
        |(p, f)| {
            if pr[[p, f]] != 0 { x[[p, f]] } else { -1e9 }
        },
    );
    assert_bits("select", o1.iter(), want1.iter().copied());
    for p in 0..128 {
        assert_bits(
            &format!("maximum of row {p}"),
            [o2[[p, 0]]].iter(),
            [row_max(want1.row(p).iter().copied())],
        );
    }
    assert_eq!(o2[[5, 0]], -1e9);
    let sel2 = Array2::from_shape_fn((128, 64), |(p, f)| {
        if pr16[[p, f]] == 0 {
            x[[p, f]]
        } else {
            c[[p, 0]]
        }
    });
    assert_eq!(o3, sel2.mapv(bf16::from_f32), "reversed into bf16");
    for p in 0..128 {
        // The maximum of the selected fp32 values (before the conversion to bf16).
        assert_bits(
            &format!("reversed maximum of row {p}"),
            [o4[[p, 0]]].iter(),
            [row_max(sel2.row(p).iter().copied())],
        );
    }
    for p in 0..128 {
        let mut kept = Vec::new();
        for f in 0..64 {
            let want = if p < 100 && f < 40 {
                let v = if pr[[p, f]] != 0 { x[[p, f]] } else { 0.0 };
                kept.push(v);
                v
            } else {
                5.0
            };
            assert_eq!(o5[[p, f]], want, "masked select ({p}, {f})");
        }
        let want = if p < 100 {
            row_max(kept.into_iter())
        } else {
            7.0
        };
        assert_eq!(o6[[p, 0]], want, "masked maximum of row {p}");
    }
    let prog = select_reduce_calls::KERNEL.program();
    assert!(has_instr(prog, "Vector", "select_reduce"), "{prog}");
}
