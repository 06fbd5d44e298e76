//! Strict launches: reads of SBUF, PSUM or output bytes that no instruction of the launch
//! wrote, and outputs left partly unwritten, are errors naming the instruction, its line, the
//! tile or tensor and the loop values; correct kernels (the tutorials', with masks, PSUM
//! accumulation groups and loop-private tiles) run strictly with the plain run's results.

use crate::examples::average_pool2d;
use crate::examples::fused_attention;
use crate::examples::layernorm;
use crate::examples::mamba;
use crate::examples::matmul_block_free_dimension;
use crate::examples::matmul_fully_optimized;
use crate::examples::matmul_hoist_load;
use crate::examples::matmul_tiled;
use crate::examples::rmsnorm;
use crate::examples::softmax;
use crate::examples::tensor_add;
use crate::examples::transpose2d;

use fused_attention::common;
use nki::LaunchError;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;
use nki::strict::StrictError;
use nki::{Element, HbmIn, HbmOut, Kernel};

/// Adds a tile of which only the first 64 rows were written.
#[kernel]
fn reads_an_unwritten_tile(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let scratch = ndarray([128, 512], f32, Sbuf);
    scratch[[0..64, 0..512]] = load(x[[0..64, 0..512]]);
    let t = load(x[[0..128, 0..512]]);
    store(out[[0..128, 0..512]], t + scratch);
    out
}

/// Writes the left half of a tile in each iteration, then reads all of it.
#[kernel]
fn reads_half_a_tile(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    for i in affine_range(2) {
        let t = ndarray([128, 512], f32, Sbuf);
        t[[0..128, 0..256]] = load(x[[i * 128 + 0..i * 128 + 128, 0..256]]);
        store(out[[i * 128 + 0..i * 128 + 128, 0..512]], t);
    }
    out
}

/// Every instance of its grid stores the same 128 rows.
#[kernel]
fn instances_share_rows(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    store(out[[ip, jf]], load(x[[ip, jf]]));
    out
}

/// Stores only the first 128 of its 256 output rows.
#[kernel]
fn writes_half_the_output(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    store(out[[0..128, 0..512]], load(x[[0..128, 0..512]]));
    out
}

/// The aws-neuron-sdk#1045 pattern: one tile, declared outside the loop, that every iteration
/// loads into and stores from.
#[kernel]
fn reuses_a_tile_across_iterations(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let buf = ndarray([128, 512], f32, Sbuf);
    for i in affine_range(2) {
        buf[[0..128, 0..512]] = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        store(out[[i * 128 + 0..i * 128 + 128, 0..512]], buf);
    }
    out
}

/// The same, with the tile declared in the loop: a tile per iteration.
#[kernel]
fn declares_the_tile_in_the_loop(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    for i in affine_range(2) {
        let buf = ndarray([128, 512], f32, Sbuf);
        buf[[0..128, 0..512]] = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        store(out[[i * 128 + 0..i * 128 + 128, 0..512]], buf);
    }
    out
}

/// The same as `reuses_a_tile_across_iterations` over a `sequential_range`: ordered.
#[kernel]
fn reuses_a_tile_in_order(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let buf = ndarray([128, 512], f32, Sbuf);
    for i in sequential_range(2) {
        buf[[0..128, 0..512]] = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        store(out[[i * 128 + 0..i * 128 + 128, 0..512]], buf);
    }
    out
}

/// A running difference `total = t − total`: a loop-carried dependency, not an accumulation
/// (`total = total + t` would be one, as `+=`).
#[kernel]
fn carries_a_sum_without_accumulating(x: Hbm<f32, 512, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let total = zeros([128, 512], f32, Sbuf);
    for i in affine_range(4) {
        let t = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        total[[0..128, 0..512]] = subtract(t, total);
    }
    store(out[[0..128, 0..512]], total);
    out
}

/// NKI's accumulation idiom: `+=` into a tile declared outside the loop, read after it; the
/// same as `t = t + x`, and as `+=` of a load (an add of a new tile).
#[kernel]
fn accumulates_across_iterations(x: Hbm<f32, 512, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let total = zeros([128, 512], f32, Sbuf);
    let again = zeros([128, 512], f32, Sbuf);
    let loaded = zeros([128, 512], f32, Sbuf);
    for i in affine_range(4) {
        let t = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        total[[0..128, 0..512]] += t;
        again[[0..128, 0..512]] = add(again, t);
        loaded[[0..128, 0..512]] += load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
    }
    let both = add(total, again);
    store(out[[0..128, 0..512]], subtract(both, loaded));
    out
}

/// Reads the sum inside the loop, while other iterations still add to it.
#[kernel]
fn reads_a_partial_sum(x: Hbm<f32, 512, 512>) -> Hbm<f32, 512, 512> {
    let out = ndarray([512, 512], f32, SharedHbm);
    let total = zeros([128, 512], f32, Sbuf);
    for i in affine_range(4) {
        let t = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        total[[0..128, 0..512]] += t;
        store(out[[i * 128 + 0..i * 128 + 128, 0..512]], total);
    }
    out
}

/// Every iteration stores the same 128 rows (over a symbolic trip count: the compiler cannot
/// tell that there are two).
#[kernel]
fn iterations_store_the_same_rows(x: Hbm<f32, N, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    for i in affine_range(N / 128) {
        let t = load(x[[i * 128 + 0..i * 128 + 128, 0..512]]);
        store(out[[0..128, 0..512]], t);
    }
    out
}

/// Loads into its per-iteration tile in the first iteration only, and stores it in each.
#[kernel]
fn reads_what_an_earlier_iteration_left(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    for i in affine_range(2) {
        let t = ndarray([128, 512], f32, Sbuf);
        t[[0..128, 0..512]] = load(x[[0..128, 0..512]], mask = i < 1);
        store(out[[i * 128 + 0..i * 128 + 128, 0..512]], t);
    }
    out
}

/// Columns 300 and up of the tile are never loaded; `exp` runs on whole rows, and only the
/// loaded columns are stored.
#[kernel]
fn computes_past_a_ragged_column_mask(x: Hbm<f32, 128, 300>) -> Hbm<f32, 128, 300> {
    let out = ndarray([128, 300], f32, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..512];
    let t = load(x[[ix, iy]], mask = iy < 300);
    let e = exp(t);
    store(out[[ix, iy]], e, mask = iy < 300);
    out
}

/// The same, storing one column too many.
#[kernel]
fn stores_a_column_never_loaded(x: Hbm<f32, 128, 301>) -> Hbm<f32, 128, 301> {
    let out = ndarray([128, 301], f32, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..512];
    let t = load(x[[ix, iy]], mask = iy < 300);
    let e = exp(t);
    store(out[[ix, iy]], e, mask = iy < 301);
    out
}

/// Issue 21, finding 1: a scan's element `i` depends on every element before it. `data1` is
/// loaded whole in rows 0..64 and only in its second half in rows 64..128; the second half of
/// every row is stored.
#[kernel]
fn scans_past_a_half_written_tile(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 256> {
    let out = ndarray([128, 256], f32, SharedHbm);
    let a = load(x[..]);
    let b = ndarray([128, 512], f32, Sbuf);
    b[[0..64, 0..512]] = load(x[[0..64, 0..512]]);
    b[[64..128, 256..512]] = load(x[[64..128, 256..512]]);
    let r = tensor_tensor_scan(
        data0 = a,
        data1 = b,
        initial = 0.0,
        op0 = multiply,
        op1 = add,
    );
    store(out[..], r[[0..128, 256..512]]);
    out
}

/// The same scan with `data1`'s first half written and its second half not: the first half of
/// the result depends only on written elements.
#[kernel]
fn scans_the_written_prefix(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 256> {
    let out = ndarray([128, 256], f32, SharedHbm);
    let a = load(x[..]);
    let b = ndarray([128, 512], f32, Sbuf);
    b[[0..128, 0..256]] = load(x[[0..128, 0..256]]);
    let r = tensor_tensor_scan(
        data0 = a,
        data1 = b,
        initial = 0.0,
        op0 = multiply,
        op1 = add,
    );
    store(out[..], r[[0..128, 0..256]]);
    out
}

/// Issue 21, finding 2: `bn_stats` of a ragged tile (rows 0..40 loaded whole, rows 40..64 only
/// in their first 300 columns), `bn_aggr`, rows 0..64 stored: each row's statistics depend on
/// the whole row, so rows 40..64 are computed from bytes no instruction wrote.
#[kernel]
fn normalizes_a_ragged_tile(x: Hbm<f32, 64, 512>) -> Hbm<f32, 64, 2> {
    let out = ndarray([64, 2], f32, SharedHbm);
    let t = ndarray([128, 512], f32, Sbuf);
    t[[0..40, 0..512]] = load(x[[0..40, 0..512]]);
    t[[40..64, 0..300]] = load(x[[40..64, 0..300]]);
    let mv = bn_aggr(bn_stats(t));
    store(out[..], mv[[0..64, 0..2]]);
    out
}

/// The same tile with only its loaded rows stored: correct.
#[kernel]
fn normalizes_the_loaded_rows(x: Hbm<f32, 64, 512>) -> Hbm<f32, 40, 2> {
    let out = ndarray([40, 2], f32, SharedHbm);
    let t = ndarray([128, 512], f32, Sbuf);
    t[[0..40, 0..512]] = load(x[[0..40, 0..512]]);
    t[[40..64, 0..300]] = load(x[[40..64, 0..300]]);
    let mv = bn_aggr(bn_stats(t));
    store(out[..], mv[[0..40, 0..2]]);
    out
}

/// Issue 21, finding 3: a reduction over the middle axis of a `[128, 4, 64]` tile loaded under
/// a mask (rows below 100, last-axis positions below 40), stored under the same mask: correct.
#[kernel]
fn reduces_the_middle_axis_under_a_mask(x: Hbm<f32, 100, 4, 40>) -> Hbm<f32, 100, 40> {
    let out = ndarray([100, 40], f32, SharedHbm);
    let (ip, ja, jb) = mgrid![0..128, 0..4, 0..64];
    let t = load(x[[ip, ja, jb]], mask = (ip < 100) & (jb < 40));
    let m = max(t, axis = 1);
    let (op, of) = mgrid![0..128, 0..64];
    store(out[[op, of]], m, mask = (op < 100) & (of < 40));
    out
}

/// The same, storing one position of the last axis too many.
#[kernel]
fn reduces_the_middle_axis_and_stores_too_much(x: Hbm<f32, 100, 4, 41>) -> Hbm<f32, 100, 41> {
    let out = ndarray([100, 41], f32, SharedHbm);
    let (ip, ja, jb) = mgrid![0..128, 0..4, 0..64];
    let t = load(x[[ip, ja, jb]], mask = (ip < 100) & (jb < 40));
    let m = max(t, axis = 1);
    let (op, of) = mgrid![0..128, 0..64];
    store(out[[op, of]], m, mask = (op < 100) & (of < 41));
    out
}

/// A masked load (300 of 512 columns) into a full matmul: the unwritten columns of the result
/// are never stored.
#[kernel]
fn multiplies_a_ragged_tile(s: Hbm<f32, 128, 128>, x: Hbm<f32, 128, 300>) -> Hbm<f32, 128, 300> {
    let out = ndarray([128, 300], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    let st = load(s[..]);
    let mv = load(x[[ip, jf]], mask = jf < 300);
    let r = copy(nc_matmul(st, mv), f32);
    store(out[[ip, jf]], r, mask = jf < 300);
    out
}

/// The same, with rows 0..64 of the stationary operand unwritten: every element of the result
/// sums over them.
#[kernel]
fn multiplies_a_half_written_stationary(
    s: Hbm<f32, 128, 128>,
    x: Hbm<f32, 128, 300>,
) -> Hbm<f32, 128, 300> {
    let out = ndarray([128, 300], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    let st = ndarray([128, 128], f32, Sbuf);
    st[[64..128, 0..128]] = load(s[[64..128, 0..128]]);
    let mv = load(x[[ip, jf]], mask = jf < 300);
    let r = copy(nc_matmul(st, mv), f32);
    store(out[[ip, jf]], r, mask = jf < 300);
    out
}

fn run_strict(
    kernel: &Kernel<'_>,
    inputs: &[&DeviceTensor<f32>],
    out_shape: &[usize],
) -> Result<DeviceTensor<f32>, LaunchError> {
    let args: Vec<_> = inputs.iter().map(|t| t.arg()).collect();
    let mut out = DeviceTensor::<f32>::zeros(out_shape).unwrap();
    let mut outs = [out.arg_mut()];
    let bound = kernel.bind(&args, &mut outs)?;
    NeuronCore::default().execute_strict(bound)?;
    Ok(out)
}

#[test]
fn a_result_computed_from_a_tile_never_written_is_refused_where_it_is_stored() {
    let x = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
    let err = run_strict(&reads_an_unwritten_tile::KERNEL, &[&x], &[128, 512]).unwrap_err();
    let LaunchError::Exec(e) = &err else {
        panic!("{err:?}")
    };
    // The add computes row by row on bytes no instruction wrote: its result is undefined, and
    // the store of it is the error, naming the add.
    assert_eq!(e.mnemonic, "store", "{err}");
    assert!(e.line > 0, "{err}");
    assert!(
        e.what.contains("which instruction 2 (tensor_tensor, line"),
        "{err}"
    );
    assert!(e.what.contains("SBUF"), "{err}");
    // A plain launch reads whatever SBUF holds and succeeds.
    let mut core = NeuronCore::default().with_strict(false);
    assert!(reads_an_unwritten_tile(&mut core, &x).is_ok());
}

#[test]
fn a_read_past_what_this_iteration_wrote_names_the_loop_values() {
    let x = DeviceTensor::<f32>::zeros(&[256, 512]).unwrap();
    let err = run_strict(&reads_half_a_tile::KERNEL, &[&x], &[256, 512]).unwrap_err();
    let LaunchError::Exec(e) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(e.mnemonic, "store", "{err}");
    assert!(e.what.contains("tile `t`"), "{err}");
    // The first unwritten element is column 256 of row 0: element 256 of the operand.
    assert!(e.what.contains("element 256 of the operand"), "{err}");
    assert!(e.what.contains("loop values by depth []"), "{err}");
}

/// The [`LaunchError::Exec`] of a strict launch of `kernel` on zero inputs.
fn strict_error(kernel: &Kernel<'_>, inputs: &[&[usize]], out_shape: &[usize]) -> nki::ExecError {
    let ins: Vec<DeviceTensor<f32>> = inputs
        .iter()
        .map(|s| DeviceTensor::zeros(s).unwrap())
        .collect();
    let refs: Vec<&DeviceTensor<f32>> = ins.iter().collect();
    match run_strict(kernel, &refs, out_shape) {
        Err(LaunchError::Exec(e)) => e,
        other => panic!("{}: {:?}", kernel.program().name(), other.map(|_| ())),
    }
}

#[test]
fn a_tile_reused_across_affine_iterations_is_an_error_naming_both() {
    let e = strict_error(
        &reuses_a_tile_across_iterations::KERNEL,
        &[&[256, 512]],
        &[256, 512],
    );
    assert_eq!(e.mnemonic, "load", "{e}");
    assert!(e.what.starts_with("overwrites tile `buf`"), "{e}");
    assert!(
        e.what.contains(
            "that iteration i = 0 wrote, in iteration i = 1 of the affine_range loop on line"
        ),
        "{e}"
    );
    assert!(e.what.contains("aws-neuron-sdk#1045"), "{e}");
    // Declared in the loop, or over an ordered loop: the same kernel is right.
    let x = common::random_f32(Ix2(256, 512), 7, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    for k in [
        &declares_the_tile_in_the_loop::KERNEL,
        &reuses_a_tile_in_order::KERNEL,
    ] {
        let out = run_strict(k, &[&xd], &[256, 512]).unwrap();
        assert_eq!(
            out.into_array::<Ix2>().unwrap(),
            x,
            "{}",
            k.program().name()
        );
    }
}

#[test]
fn an_affine_iteration_reading_another_ones_write_is_an_error_unless_it_accumulates() {
    let e = strict_error(
        &carries_a_sum_without_accumulating::KERNEL,
        &[&[512, 512]],
        &[128, 512],
    );
    assert_eq!(e.mnemonic, "tensor_tensor", "{e}");
    assert!(e.what.starts_with("reads tile `total`"), "{e}");
    assert!(
        e.what
            .contains("that iteration i = 0 wrote, in iteration i = 1"),
        "{e}"
    );
    assert!(e.what.contains("accumulate with `+=`"), "{e}");
    // `+=` is NKI's accumulation: allowed, and the sum read after the loop is the reference.
    let x = common::random_f32(Ix2(512, 512), 8, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    let out = run_strict(&accumulates_across_iterations::KERNEL, &[&xd], &[128, 512]).unwrap();
    let out = out.into_array::<Ix2>().unwrap();
    for r in 0..128 {
        for c in 0..512 {
            // The fp32 sum in iteration order, as the engines add: total + again − loaded.
            let want = (0..4).fold(0f32, |acc, i| acc + x[[i * 128 + r, c]]);
            assert_eq!(out[[r, c]], want, "({r}, {c})");
        }
    }
    // Reading the sum while other iterations still add to it is not.
    let e = strict_error(&reads_a_partial_sum::KERNEL, &[&[512, 512]], &[512, 512]);
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(
        e.what.starts_with("reads the partial sum in tile `total`"),
        "{e}"
    );
}

#[test]
fn two_affine_iterations_writing_one_output_element_are_an_error() {
    let e = strict_error(
        &iterations_store_the_same_rows::KERNEL,
        &[&[256, 512]],
        &[128, 512],
    );
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(e.what.starts_with("writes output `out`"), "{e}");
    assert!(e.what.contains("element 0 of the tensor"), "{e}");
    assert!(
        e.what
            .contains("two iterations must not write the same output element"),
        "{e}"
    );
}

#[test]
fn a_tile_declared_in_a_loop_is_new_in_each_iteration() {
    let e = strict_error(
        &reads_what_an_earlier_iteration_left::KERNEL,
        &[&[256, 512]],
        &[256, 512],
    );
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(
        e.what
            .starts_with("reads tile `t` where no instruction of this launch wrote"),
        "{e}"
    );
    assert!(e.what.contains("loop values by depth [1]"), "{e}");
}

#[test]
fn definedness_is_tracked_per_element() {
    // Row-by-row instructions on the unloaded columns are fine while those columns are not
    // stored: the result is exp of the input.
    let x = common::random_f32(Ix2(128, 300), 9, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    let out = run_strict(
        &computes_past_a_ragged_column_mask::KERNEL,
        &[&xd],
        &[128, 300],
    )
    .unwrap();
    let out = out.into_array::<Ix2>().unwrap();
    for ((r, c), &v) in out.indexed_iter() {
        let want = f64::from(x[[r, c]]).exp();
        assert!(
            (f64::from(v) - want).abs() <= 4e-7 * want,
            "({r}, {c}): {v} vs {want}"
        );
    }
    // Storing column 300 stores what exp computed from a byte no instruction wrote.
    let e = strict_error(
        &stores_a_column_never_loaded::KERNEL,
        &[&[128, 301]],
        &[128, 301],
    );
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(
        e.what.contains("which instruction 1 (activation, line"),
        "{e}"
    );
    assert!(e.what.contains("element 300 of the operand"), "{e}");
}

#[test]
fn an_output_left_partly_unwritten_is_an_error() {
    let x = DeviceTensor::<f32>::zeros(&[256, 512]).unwrap();
    let err = run_strict(&writes_half_the_output::KERNEL, &[&x], &[256, 512]).unwrap_err();
    assert_eq!(
        err,
        LaunchError::Strict(StrictError::Unwritten {
            kernel: "writes_half_the_output".to_string(),
            output: "out".to_string(),
            first: 128 * 512,
            count: 128 * 512,
        }),
        "{err}"
    );
    assert!(
        err.to_string().contains("with_unwritten_outputs(true)"),
        "{err}"
    );
}

#[test]
fn an_output_left_partly_unwritten_by_design_is_allowed_when_asked() {
    let x = DeviceTensor::from_array(&nki::ndarray::Array2::from_shape_fn(
        (256, 512),
        |(p, f)| (p * 512 + f) as f32,
    ))
    .unwrap();
    let mut out =
        DeviceTensor::<f32>::from_array(&nki::ndarray::Array2::from_elem((256, 512), -7.0))
            .unwrap();
    let mut core = NeuronCore::default()
        .with_strict(true)
        .with_unwritten_outputs(true);
    writes_half_the_output::launch_into(&mut core, &x, &mut out).unwrap();
    let (got, x) = (out.as_slice(), x.as_slice());
    // The kernel writes rows 0..128 (as the error above says), the rest keeps what it held.
    assert_eq!(&got[..128 * 512], &x[..128 * 512]);
    assert!(got[128 * 512..].iter().all(|&v| v == -7.0));
}

#[test]
fn spmd_instances_that_write_the_same_output_elements_are_an_error() {
    let x = DeviceTensor::<f32>::zeros(&[256, 512]).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&[256, 512]).unwrap();
    let (ins, mut outs) = ([x.arg()], [out.arg_mut()]);
    let grid = LaunchGrid::from([2]);
    let bound = instances_share_rows::KERNEL
        .bind_on(grid, &ins, &mut outs)
        .unwrap();
    let err = NeuronCore::default().execute_strict(bound).unwrap_err();
    let LaunchError::Exec(e) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(e.mnemonic, "store", "{err}");
    assert!(e.what.contains("program ids [0, 0, 0] wrote"), "{err}");
    assert!(e.what.contains("program ids [1, 0, 0]"), "{err}");
}

#[test]
fn the_spmd_tensor_add_runs_strictly_over_its_grid() {
    let a = DeviceTensor::<bf16>::zeros(&[512, 1024]).unwrap();
    let b = DeviceTensor::<bf16>::zeros(&[512, 1024]).unwrap();
    let mut out = DeviceTensor::<bf16>::zeros(&[512, 1024]).unwrap();
    let (ins, mut outs) = ([a.arg(), b.arg()], [out.arg_mut()]);
    let grid = LaunchGrid::from(tensor_add::grid_for(512, 1024));
    let bound = tensor_add::tensor_add_bf16::KERNEL
        .bind_on(grid, &ins, &mut outs)
        .unwrap();
    NeuronCore::default().execute_strict(bound).unwrap();
}

#[test]
fn correct_kernels_run_strictly_with_the_plain_results() {
    // The tiled matmul: PSUM accumulation groups over a loop.
    let a = common::random_bf16(256, 128, 1);
    let b = common::random_bf16(256, 512, 2);
    let (ad, bd) = (
        DeviceTensor::from_array(&a).unwrap(),
        DeviceTensor::from_array(&b).unwrap(),
    );
    let mut plain_core = NeuronCore::default();
    let plain = matmul_tiled::matmul_tiled(&mut plain_core, &ad, &bd).unwrap();
    let mut out = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
    let (ins, mut outs) = ([ad.arg(), bd.arg()], [out.arg_mut()]);
    let bound = matmul_tiled::matmul_tiled::KERNEL
        .bind(&ins, &mut outs)
        .unwrap();
    NeuronCore::default().execute_strict(bound).unwrap();
    assert_eq!(out.as_slice(), plain.as_slice());

    // Fused attention with and without the causal mask: masked whole-row instructions over
    // buffers sized for 4096 columns, of which a launch writes `seqlen`.
    for causal in [false, true] {
        let seqlen = 384;
        let q = common::random_f32(Ix2(seqlen, 64), 3, 0.0, 1.0);
        let k = common::random_f32(Ix2(seqlen, 64), 4, 0.0, 1.0);
        let v = common::random_f32(Ix2(seqlen, 64), 5, -1.0, 1.0);
        let [qd, kd, vd] = [&q, &k, &v].map(|a| DeviceTensor::from_array(a).unwrap());
        let kernel = if causal {
            &fused_attention::fused_self_attn_for_sd_small_head_size_d64_causal::KERNEL
        } else {
            &fused_attention::fused_self_attn_for_sd_small_head_size_d64::KERNEL
        };
        let strict = run_strict(kernel, &[&qd, &kd, &vd], &[seqlen, 64]).unwrap();
        let strict: Array2<f32> = strict.into_array::<Ix2>().unwrap();
        let (want, bound) = fused_attention::reference(q.view(), k.view(), v.view(), causal);
        let (worst, ratio, within) = fused_attention::max_error(strict.view(), &want, &bound);
        assert!(within, "causal = {causal}: {worst:e}, {ratio} of the bound");
    }
}

/// Runs `kernel` strictly on zero inputs of `shapes` (element type `T` in and out): what it
/// reads must be what it wrote, whatever the values.
fn runs_strictly<T: Element>(
    name: &str,
    kernel: &Kernel<'_>,
    shapes: &[&[usize]],
    failures: &mut Vec<String>,
) {
    let ins: Vec<DeviceTensor<T>> = shapes
        .iter()
        .map(|s| DeviceTensor::zeros(s).unwrap())
        .collect();
    let args: Vec<HbmIn<'_>> = ins.iter().map(|t| t.arg()).collect();
    let syms = kernel.bind_inputs(&args).unwrap();
    let mut outs: Vec<DeviceTensor<T>> = (0..kernel.program().outputs().len())
        .map(|i| DeviceTensor::zeros(kernel.output_shape(i, &syms).unwrap().as_slice()).unwrap())
        .collect();
    let mut out_args: Vec<HbmOut<'_>> = outs.iter_mut().map(|t| t.arg_mut()).collect();
    let bound = kernel.bind(&args, &mut out_args).unwrap();
    if let Err(e) = NeuronCore::default().execute_strict(bound) {
        failures.push(format!("{name}: {e}"));
    }
}

#[test]
fn every_tutorial_kernel_runs_strictly_at_ragged_shapes() {
    let rows = 300; // not a multiple of 128: masked last tiles
    let mut failures = Vec::new();
    runs_strictly::<f32>(
        "softmax",
        &softmax::nki_softmax_kernel_512::KERNEL,
        &[&[rows, 512]],
        &mut failures,
    );
    runs_strictly::<f32>(
        "rmsnorm",
        &rmsnorm::nki_rmsnorm_kernel_512::KERNEL,
        &[&[rows, 512], &[512]],
        &mut failures,
    );
    let ln: &[&[usize]] = &[&[rows, 1024], &[1024], &[1024]];
    runs_strictly::<f32>(
        "layernorm v1",
        &layernorm::nki_layernorm_kernel_v1_1024::KERNEL,
        ln,
        &mut failures,
    );
    runs_strictly::<f32>(
        "layernorm v2",
        &layernorm::nki_layernorm_kernel_v2_1024::KERNEL,
        ln,
        &mut failures,
    );
    runs_strictly::<f32>(
        "avgpool",
        &average_pool2d::tensor_avgpool_kernel_512::KERNEL,
        &[&[130, 512, 512]],
        &mut failures,
    );
    runs_strictly::<f32>(
        "transpose2d",
        &transpose2d::tensor_transpose2d_kernel_64x64::KERNEL,
        &[&[130, 4096]],
        &mut failures,
    );
    let scan: &[&[usize]] = &[
        &[1, 256, 500],
        &[1, 256, 500],
        &[256, 16],
        &[1, 16, 500],
        &[1, 16, 500],
    ];
    runs_strictly::<f32>("mamba v1", &mamba::mamba_v1::KERNEL, scan, &mut failures);
    runs_strictly::<f32>("mamba v2", &mamba::mamba_v2::KERNEL, scan, &mut failures);
    let scan_v3: &[&[usize]] = &[
        &[1, 256, 1024],
        &[1, 256, 1024],
        &[256, 16],
        &[1, 16, 1024],
        &[1, 16, 1024],
    ];
    runs_strictly::<f32>("mamba v3", &mamba::mamba_v3::KERNEL, scan_v3, &mut failures);
    runs_strictly::<bf16>(
        "matmul hoisted loads",
        &matmul_hoist_load::nki_matmul_hoist_load_::KERNEL,
        &[&[256, 256], &[256, 512]],
        &mut failures,
    );
    runs_strictly::<bf16>(
        "matmul blocked free dimension",
        &matmul_block_free_dimension::nki_matmul_block_free_dimension_::KERNEL,
        &[&[256, 512], &[256, 2048]],
        &mut failures,
    );
    runs_strictly::<bf16>(
        "matmul fully optimised",
        &matmul_fully_optimized::nki_matmul_fully_optimized_small::KERNEL,
        &[&[1024, 512], &[1024, 1024]],
        &mut failures,
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_strict_core_checks_every_launch_api() {
    let x = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
    let mut core = NeuronCore::default().with_strict(true);
    assert!(core.is_strict());
    let err = reads_an_unwritten_tile(&mut core, &x).unwrap_err();
    assert!(matches!(err, LaunchError::Exec(_)), "{err:?}");
    let view = nki::ndarray::Array2::<f32>::zeros((128, 512));
    let err = reads_an_unwritten_tile::host(&mut core, view.view()).unwrap_err();
    assert!(matches!(err, LaunchError::Exec(_)), "{err:?}");
    let x2 = DeviceTensor::<f32>::zeros(&[256, 512]).unwrap();
    let err = writes_half_the_output(&mut core, &x2).unwrap_err();
    assert!(matches!(err, LaunchError::Strict(_)), "{err:?}");
    // A correct kernel runs on a strict core as on any other.
    let a = common::random_bf16(128, 128, 7);
    let b = common::random_bf16(128, 512, 8);
    let strict = matmul_tiled::matmul_tiled::host(&mut core, a.view(), b.view()).unwrap();
    let plain =
        matmul_tiled::matmul_tiled::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    assert_eq!(strict, plain);
}

#[test]
fn a_scan_depends_on_every_element_before_it() {
    let e = strict_error(
        &scans_past_a_half_written_tile::KERNEL,
        &[&[128, 512]],
        &[128, 256],
    );
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(
        e.what
            .contains("which instruction 3 (tensor_tensor_scan, line"),
        "{e}"
    );
    // Row 64, column 256 of the scan: the first stored element computed from row 64's
    // unwritten first half.
    assert!(e.what.contains("element 16384 of the operand"), "{e}");
    assert!(e.what.contains("element 16384 of output `out`"), "{e}");
    // The written prefix is defined: the scan of it runs strictly, with the plain results.
    let x = common::random_f32(Ix2(128, 512), 3, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    let strict = run_strict(&scans_the_written_prefix::KERNEL, &[&xd], &[128, 256]).unwrap();
    let mut plain = NeuronCore::default().with_strict(false);
    let want = scans_the_written_prefix(&mut plain, &xd).unwrap();
    assert_eq!(
        strict.into_array::<Ix2>().unwrap(),
        want.into_array::<Ix2>().unwrap()
    );
}

#[test]
fn bn_stats_depends_on_its_whole_row() {
    let e = strict_error(&normalizes_a_ragged_tile::KERNEL, &[&[64, 512]], &[64, 2]);
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(
        e.what.contains("which instruction 2 (bn_stats, line"),
        "{e}"
    );
    // Row 40: the first row with unwritten columns.
    assert!(e.what.contains("element 80 of the operand"), "{e}");
    assert!(e.what.contains("element 80 of output `out`"), "{e}");
    let x = common::random_f32(Ix2(64, 512), 4, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    let out = run_strict(&normalizes_the_loaded_rows::KERNEL, &[&xd], &[40, 2]).unwrap();
    let out = out.into_array::<Ix2>().unwrap();
    for r in 0..40 {
        let row = x.row(r);
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / 512.0;
        let var = row
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / 512.0;
        assert!((f64::from(out[[r, 0]]) - mean).abs() < 1e-5, "row {r}");
        assert!((f64::from(out[[r, 1]]) - var).abs() < 1e-5, "row {r}");
    }
}

#[test]
fn a_reduction_over_the_middle_axis_under_a_mask_is_exact() {
    let x = common::random_f32(nki::ndarray::Ix3(100, 4, 40), 5, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x).unwrap();
    let out = run_strict(
        &reduces_the_middle_axis_under_a_mask::KERNEL,
        &[&xd],
        &[100, 40],
    )
    .unwrap();
    let out = out.into_array::<Ix2>().unwrap();
    for ((r, c), &v) in out.indexed_iter() {
        let want = (0..4)
            .map(|a| x[[r, a, c]])
            .fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(v, want, "({r}, {c})");
    }
    let e = strict_error(
        &reduces_the_middle_axis_and_stores_too_much::KERNEL,
        &[&[100, 4, 41]],
        &[100, 41],
    );
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(e.what.contains("(tensor_reduce, line"), "{e}");
    // Row 0, position 40.
    assert!(e.what.contains("element 40 of the operand"), "{e}");
    assert!(e.what.contains("element 40 of output `out`"), "{e}");
}

#[test]
fn a_matmul_depends_on_its_contraction() {
    let s = common::random_f32(Ix2(128, 128), 6, -1.0, 1.0);
    let x = common::random_f32(Ix2(128, 300), 7, -1.0, 1.0);
    let (sd, xd) = (
        DeviceTensor::from_array(&s).unwrap(),
        DeviceTensor::from_array(&x).unwrap(),
    );
    let strict = run_strict(&multiplies_a_ragged_tile::KERNEL, &[&sd, &xd], &[128, 300]).unwrap();
    let mut plain = NeuronCore::default().with_strict(false);
    let want = multiplies_a_ragged_tile(&mut plain, &sd, &xd).unwrap();
    assert_eq!(
        strict.into_array::<Ix2>().unwrap(),
        want.into_array::<Ix2>().unwrap()
    );
    let e = strict_error(
        &multiplies_a_half_written_stationary::KERNEL,
        &[&[128, 128], &[128, 300]],
        &[128, 300],
    );
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(e.what.contains("(nc_matmul, line"), "{e}");
    assert!(e.what.contains("element 0 of the operand"), "{e}");
}

/// `where(cond, x, 0)`: `x` loaded in columns `0..256` only, the condition loaded whole; every
/// column stored. Whether a stored element depends on the unwritten half of `x` is up to the
/// condition's values.
#[kernel]
fn selects_from_a_half_loaded_tile(
    c: Hbm<f32, 128, 512>,
    x: Hbm<f32, 128, 512>,
) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..512];
    let cond = load(c[[ix, iy]]);
    let t = load(x[[ix, iy]], mask = iy < 256);
    let s = r#where(cond, t, 0.0);
    store(out[[ix, iy]], s);
    out
}

/// `where(cond, x, -1)` with the condition loaded in rows `0..64` only; rows `0..ROWS` stored.
#[kernel(
    selects_on_a_half_loaded_condition(ROWS = 128),
    selects_on_the_loaded_condition(ROWS = 64)
)]
fn selects_on_a_condition<const ROWS: usize>(
    c: Hbm<f32, 128, 512>,
    x: Hbm<f32, 128, 512>,
) -> Hbm<f32, ROWS, 512> {
    let out = ndarray([ROWS, 512], f32, SharedHbm);
    let (ix, iy) = mgrid![0..128, 0..512];
    let cond = load(c[[ix, iy]], mask = ix < 64);
    let t = load(x[[ix, iy]]);
    let s = r#where(cond, t, -1.0);
    store(out[[ix, iy]], s, mask = ix < ROWS);
    out
}

/// Launches `kernel` strictly on `c` and `x` (`[128, 512]` each) into an output of `rows`
/// rows of zeros.
fn strict_select(
    kernel: &Kernel<'_>,
    c: &Array2<f32>,
    x: &Array2<f32>,
    rows: usize,
) -> Result<Array2<f32>, LaunchError> {
    let (c, x) = (
        DeviceTensor::from_array(c).unwrap(),
        DeviceTensor::from_array(x).unwrap(),
    );
    let out = run_strict(kernel, &[&c, &x], &[rows, 512])?;
    Ok(out.into_array::<Ix2>().unwrap())
}

#[test]
fn a_select_depends_only_on_the_side_its_condition_picks() {
    let x = Array2::from_shape_fn((128, 512), |(r, c)| (r * 512 + c) as f32 * 0.5 + 1.0);
    // Nonzero (1, or NaN: true as well) only where x was loaded: the unwritten half of x is
    // never picked, and the launch passes strictly with the plain launch's values.
    let cond = Array2::from_shape_fn((128, 512), |(r, c)| match (c < 256, (r + c) % 3) {
        (true, 0) => 1.0,
        (true, 1) => f32::NAN,
        _ => 0.0,
    });
    let got = strict_select(&selects_from_a_half_loaded_tile::KERNEL, &cond, &x, 128).unwrap();
    for ((r, c), &v) in got.indexed_iter() {
        let want = if c < 256 && (r + c) % 3 != 2 {
            x[[r, c]]
        } else {
            0.0
        };
        assert_eq!(v.to_bits(), want.to_bits(), "({r}, {c})");
    }
    // A condition of -0.0 is false too.
    let negative_zero = cond.mapv(|v| if v == 0.0 { -0.0 } else { v });
    assert!(
        strict_select(
            &selects_from_a_half_loaded_tile::KERNEL,
            &negative_zero,
            &x,
            128
        )
        .is_ok()
    );
    // One condition element picks x where it was never loaded: row 2, column 300, element
    // 2·512 + 300 of the stored operand, computed by the select.
    let mut picks_unwritten = cond.clone();
    picks_unwritten[[2, 300]] = 0.5;
    let err = strict_select(
        &selects_from_a_half_loaded_tile::KERNEL,
        &picks_unwritten,
        &x,
        128,
    )
    .unwrap_err();
    let LaunchError::Exec(e) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(e.mnemonic, "store", "{err}");
    assert!(e.what.contains("element 1324 of the operand"), "{err}");
    assert!(
        e.what.contains("which instruction 2 (select, line"),
        "{err}"
    );
}

#[test]
fn a_select_on_an_undefined_condition_is_undefined_whatever_its_sides() {
    let x = Array2::from_shape_fn((128, 512), |(r, c)| (r + c) as f32);
    let cond = Array2::from_shape_fn((128, 512), |(r, c)| ((r * c) % 2) as f32);
    // Both sides are defined everywhere; rows 64.. of the condition were never loaded.
    let err =
        strict_select(&selects_on_a_half_loaded_condition::KERNEL, &cond, &x, 128).unwrap_err();
    let LaunchError::Exec(e) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(e.mnemonic, "store", "{err}");
    assert!(e.what.contains("element 32768 of the operand"), "{err}");
    assert!(
        e.what.contains("which instruction 2 (select, line"),
        "{err}"
    );
    // Storing the rows whose condition was loaded passes, with the plain launch's values.
    let got = strict_select(&selects_on_the_loaded_condition::KERNEL, &cond, &x, 64).unwrap();
    for ((r, c), &v) in got.indexed_iter() {
        let want = if cond[[r, c]] != 0.0 { x[[r, c]] } else { -1.0 };
        assert_eq!(v, want, "({r}, {c})");
    }
}
