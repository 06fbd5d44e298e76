//! `sequence_bounds` against NKI's own NumPy reference (`compute_sequence_bounds` of
//! `test_nki_isa_sequence_bounds.py`, written here as plain loops): the start and end
//! (exclusive) of the run of equal nonzero ids each element belongs to, `n` and `-1` for
//! padding (id 0). NKI's example (float32 ids, the documented `[0, 1, 1, 2, 2, 2, 0, 3, 3]`
//! case) and int32 ids with runs of a repeated id, leading and trailing padding.

use crate::common;

use nki::ndarray::{Array2, Array3};
use nki::prelude::*;

/// NKI's example: `out_tile[ix, iy, iz] = nisa.sequence_bounds(segment_ids=seq_tile)` over a
/// `[1, 32]` tile.
#[kernel]
fn nki_sequence_bounds(segment_ids: Hbm<f32, 1, 32>) -> Hbm<f32, 1, 2, 32> {
    let output = ndarray([1, 2, 32], f32, SharedHbm);
    let (ix, iy, iz) = mgrid![0..1, 0..2, 0..32];
    let out_tile = ndarray([1, 2, 32], f32, Sbuf);
    let seq_tile = load(segment_ids[..]);
    out_tile[[ix, iy, iz]] = sequence_bounds(segment_ids = seq_tile);
    store(output[..], out_tile);
    output
}

#[kernel]
fn sequence_bounds_of_9(ids: Hbm<i32, 1, 9>) -> Hbm<i32, 1, 2, 9> {
    let out = ndarray([1, 2, 9], i32, SharedHbm);
    let t = load(ids[..]);
    let b = sequence_bounds(t);
    store(out[..], b);
    out
}

#[kernel]
fn sequence_bounds_i32(ids: Hbm<i32, 1, 40>) -> Hbm<i32, 1, 2, 40> {
    let out = ndarray([1, 2, 40], i32, SharedHbm);
    let t = load(ids[..]);
    let b = sequence_bounds(t);
    store(out[..], b);
    out
}

/// NKI's `compute_sequence_bounds`: starts, then ends.
fn compute_sequence_bounds(sequence: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let n = sequence.len();
    let (mut min_bounds, mut max_bounds) = (vec![0.0; n], vec![0.0; n]);
    let (min_bound_pad, max_bound_pad) = (n as f64, -1.0);
    min_bounds[0] = if sequence[0] != 0.0 {
        0.0
    } else {
        min_bound_pad
    };
    for i in 1..n {
        min_bounds[i] = if sequence[i] == 0.0 {
            min_bound_pad
        } else if sequence[i] == sequence[i - 1] {
            min_bounds[i - 1]
        } else {
            i as f64
        };
    }
    max_bounds[n - 1] = if sequence[n - 1] != 0.0 {
        n as f64
    } else {
        max_bound_pad
    };
    for i in (0..n - 1).rev() {
        max_bounds[i] = if sequence[i] == 0.0 {
            max_bound_pad
        } else if sequence[i] == sequence[i + 1] {
            max_bounds[i + 1]
        } else {
            (i + 1) as f64
        };
    }
    (min_bounds, max_bounds)
}

#[test]
fn nki_api_page_example() {
    // np.sort(np.random.randint(0, 32, 32)): sorted ids with repeats and some zeros.
    let mut ids: Vec<f32> = common::values(32, 96, 0.0, 31.0)
        .into_iter()
        .map(|v| v.floor() as f32)
        .collect();
    ids.sort_by(f32::total_cmp);
    let segment_ids = Array2::from_shape_vec((1, 32), ids.clone()).unwrap();
    let a = nki_sequence_bounds::host(&mut NeuronCore::default(), segment_ids.view()).unwrap();
    let seq: Vec<f64> = ids.iter().map(|&v| v as f64).collect();
    let (lo, hi) = compute_sequence_bounds(&seq);
    let b = Array3::from_shape_fn((1, 2, 32), |(_, r, k)| {
        (if r == 0 { lo[k] } else { hi[k] }) as f32
    });
    assert_eq!(a, b);
    let prog = nki_sequence_bounds::KERNEL.program();
    assert!(
        common::has_instr(prog, "GpSimd", "sequence_bounds"),
        "{prog}"
    );
}

#[test]
fn the_documented_case() {
    let ids = Array2::from_shape_vec((1, 9), vec![0, 1, 1, 2, 2, 2, 0, 3, 3]).unwrap();
    let out = sequence_bounds_of_9::host(&mut NeuronCore::default(), ids.view()).unwrap();
    let starts = [9, 1, 1, 3, 3, 3, 9, 7, 7];
    let ends = [-1, 3, 3, 6, 6, 6, -1, 9, 9];
    for k in 0..9 {
        assert_eq!(out[[0, 0, k]], starts[k], "start {k}");
        assert_eq!(out[[0, 1, k]], ends[k], "end {k}");
    }
}

#[test]
fn int32_runs_against_the_reference() {
    // Leading and trailing padding, an id that comes back after another (a new run), large ids.
    let ids: Vec<i32> = (0..40)
        .map(|k| match k {
            0..=2 | 37..=39 => 0,
            3..=9 => 5,
            10..=12 => 16_777_217,
            13..=13 => 16_777_216,
            14..=20 => 5,
            21..=21 => 0,
            _ => k / 4,
        })
        .collect();
    let arr = Array2::from_shape_vec((1, 40), ids.clone()).unwrap();
    let out = sequence_bounds_i32::host(&mut NeuronCore::default(), arr.view()).unwrap();
    // The reference compares ids as f64: every id here is exact in it.
    let seq: Vec<f64> = ids.iter().map(|&v| v as f64).collect();
    let (lo, hi) = compute_sequence_bounds(&seq);
    for k in 0..40 {
        assert_eq!(out[[0, 0, k]] as f64, lo[k], "start {k}");
        assert_eq!(out[[0, 1, k]] as f64, hi[k], "end {k}");
    }
    // 16777217 and 16777216 are one fp32 value but two int32 ids: two runs.
    assert_eq!((out[[0, 0, 12]], out[[0, 1, 12]]), (10, 13));
    assert_eq!((out[[0, 0, 13]], out[[0, 1, 13]]), (13, 14));
}
