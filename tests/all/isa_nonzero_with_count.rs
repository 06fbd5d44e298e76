//! `nonzero_with_count` (NeuronCore-v3 and newer) against plain loops: on partitions
//! `0, 16, …, 112` only, the positions of the nonzero elements plus `index_offset`, then
//! `padding_val` up to `T` elements, then the count; every other partition of `dst` keeps what
//! it held. NKI's documented example (`[0, 1, 1, 0, 0, 1, 0, 0]`, offset 16), float32 sources
//! with `-0.0` (zero) and NaN (nonzero), int32 sources, a tile of fewer partitions than a
//! core group, and strict mode following the partitions it leaves unwritten.

use crate::common;

use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// `nonzero_with_count` of a float32 tile into an int32 tile memset to 7 first.
#[kernel(target = trn2)]
fn nonzero_f32(x: Hbm<f32, 128, 8>) -> Hbm<i32, 128, 9> {
    let out = ndarray([128, 9], i32, SharedHbm);
    let s = load(x[..]);
    let d = ndarray([128, 9], i32, Sbuf);
    memset(dst = d, value = 7);
    nonzero_with_count(dst = d, src = s, index_offset = 16, padding_val = -1);
    store(out[..], d);
    out
}

/// Positional, the defaults (`index_offset = 0`, `padding_val = -1`), int32 data.
#[kernel(target = trn2)]
fn nonzero_i32(x: Hbm<i32, 40, 50>) -> Hbm<i32, 40, 51> {
    let out = ndarray([40, 51], i32, SharedHbm);
    let s = load(x[..]);
    let d = ndarray([40, 51], i32, Sbuf);
    memset(dst = d, value = -5);
    nonzero_with_count(d, s);
    store(out[..], d);
    out
}

/// A negative offset and padding on trn3, one partition.
#[kernel(target = trn3)]
fn nonzero_one_row(x: Hbm<f32, 1, 12>) -> Hbm<i32, 1, 13> {
    let out = ndarray([1, 13], i32, SharedHbm);
    let s = load(x[..]);
    let d = ndarray([1, 13], i32, Sbuf);
    nonzero_with_count(d, s, -100, 99);
    store(out[..], d);
    out
}

/// The plain loop: one partition's output.
fn expected(row: &[f64], offset: i64, padding: i64) -> Vec<i64> {
    let mut out: Vec<i64> = (0..row.len())
        .filter(|&k| row[k] != 0.0 || row[k].is_nan())
        .map(|k| k as i64 + offset)
        .collect();
    let n = out.len() as i64;
    out.resize(row.len(), padding);
    out.push(n);
    out
}

#[test]
fn nki_documented_example_and_unprocessed_partitions() {
    let mut x = Array2::<f32>::zeros((128, 8));
    for (k, v) in [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
        .into_iter()
        .enumerate()
    {
        x[[0, k]] = v;
    }
    // Other rows: random values with zeros, -0.0 and NaN among them.
    let noise = common::rand_int(Ix2(128, 8), 401, -2, 2);
    for p in 1..128 {
        for k in 0..8 {
            x[[p, k]] = match (p + k) % 9 {
                0 => -0.0,
                1 => f32::NAN,
                _ => noise[[p, k]],
            };
        }
    }
    let mut core = NeuronCore::new(Target::Trn2);
    let out = nonzero_f32::host(&mut core, x.view()).unwrap();
    // NKI's example: [17, 18, 21, -1, -1, -1, -1, -1, 3].
    let row0: Vec<i32> = out.row(0).to_vec();
    assert_eq!(row0, vec![17, 18, 21, -1, -1, -1, -1, -1, 3]);
    for p in 0..128 {
        let want: Vec<i64> = if p % 16 == 0 {
            let row: Vec<f64> = x.row(p).iter().map(|&v| f64::from(v)).collect();
            expected(&row, 16, -1)
        } else {
            vec![7; 9]
        };
        let got: Vec<i64> = out.row(p).iter().map(|&v| i64::from(v)).collect();
        assert_eq!(got, want, "partition {p}");
    }
}

#[test]
fn int32_sources_and_a_partial_core_group() {
    let x = Array2::from_shape_fn((40, 50), |(p, k)| {
        // Large values that are not exact in fp32, zero every third element or so.
        if (p * 7 + k * 3) % 5 < 2 {
            0
        } else {
            16_777_217 + (p * 50 + k) as i32
        }
    });
    let mut core = NeuronCore::new(Target::Trn2);
    let out = nonzero_i32::host(&mut core, x.view()).unwrap();
    for p in 0..40 {
        let want: Vec<i64> = if p % 16 == 0 {
            let row: Vec<f64> = x.row(p).iter().map(|&v| f64::from(v)).collect();
            expected(&row, 0, -1)
        } else {
            vec![-5; 51]
        };
        let got: Vec<i64> = out.row(p).iter().map(|&v| i64::from(v)).collect();
        assert_eq!(got, want, "partition {p}");
    }
}

#[test]
fn negative_offset_and_padding_all_zero_and_all_nonzero_rows() {
    let mut core = NeuronCore::new(Target::Trn3);
    for row in [
        vec![0.0f32; 12],
        vec![-1.5f32; 12],
        vec![
            0.0,
            3.0,
            0.0,
            -0.0,
            1e-30,
            0.0,
            0.0,
            0.0,
            f32::INFINITY,
            0.0,
            0.0,
            2.0,
        ],
    ] {
        let x = Array2::from_shape_vec((1, 12), row.clone()).unwrap();
        let out = nonzero_one_row::host(&mut core, x.view()).unwrap();
        let r: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
        let got: Vec<i64> = out.row(0).iter().map(|&v| i64::from(v)).collect();
        assert_eq!(got, expected(&r, -100, 99), "{row:?}");
    }
}

/// Without the memset the partitions it does not process stay unwritten.
#[kernel(target = trn2)]
fn nonzero_unwritten(x: Hbm<f32, 32, 4>) -> (Hbm<i32, 1, 5>, Hbm<i32, 32, 5>) {
    let o1 = ndarray([1, 5], i32, SharedHbm);
    let o2 = ndarray([32, 5], i32, SharedHbm);
    let s = load(x[..]);
    let d = ndarray([32, 5], i32, Sbuf);
    nonzero_with_count(d, s);
    store(o1[..], d[[0..1, 0..5]]);
    store(o2[..], d);
    (o1, o2)
}

#[test]
fn strict_mode_refuses_storing_an_unprocessed_partition() {
    let x = common::rand_int(Ix2(32, 4), 402, -1, 1);
    let mut strict = NeuronCore::new(Target::Trn2).with_strict(true);
    let err = nonzero_unwritten::host(&mut strict, x.view()).unwrap_err();
    let why = err.to_string();
    assert!(why.contains("store") && why.contains("unwritten"), "{why}");
    // Element 5 of the second output: partition 1, the first one the instruction skips.
    assert!(why.contains("element 5 "), "{why}");
    // A plain core runs it; partition 0 holds the plain loop's result.
    let mut plain = NeuronCore::new(Target::Trn2).with_strict(false);
    let (o1, _) = nonzero_unwritten::host(&mut plain, x.view()).unwrap();
    let r: Vec<f64> = x.row(0).iter().map(|&v| f64::from(v)).collect();
    let got: Vec<i64> = o1.row(0).iter().map(|&v| i64::from(v)).collect();
    assert_eq!(got, expected(&r, 0, -1));
}
