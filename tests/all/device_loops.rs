//! NKI's device loops and virtual registers: `fori_loop` / `dynamic_range` with bounds read
//! from SBUF at run time, `while_loop` on a condition register, and `register_alloc`,
//! `register_move`, `register_load`, `register_store`. NKI's two docstring examples ported
//! (the body reads the iteration register through `register_store` and
//! `tensor_copy_dynamic_src` / `tensor_copy_dynamic_dst`, where NKI's example uses
//! `.ap(scalar_offset = i)`; `ap_offsets.rs` runs it as written), checked against plain loops; empty, negative and enormous
//! bounds; a never-ending `while_loop`; a device loop nested in an `affine_range`; strict mode;
//! the timing model following the run-time trip count.

use nki::Budget;
use nki::ndarray::Array2;
use nki::prelude::*;
use nki::program::{Engine, Opcode};
use nki::timing::{Timing, Track};

/// NKI's `fori_loop` example: `output[0, i] = data[0, i]` for `i` in `0..ub`, `ub` read from an
/// input tensor into a register; the rest of the output is 0.
#[kernel]
fn fori_copy(data: Hbm<f32, 1, 16>, ub_input: Hbm<i32, 1, 1>) -> Hbm<f32, 1, 16> {
    let output = ndarray([1, 16], f32, SharedHbm);
    let ub_sb = ndarray([1, 1], i32, Sbuf);
    nisa::dma_copy(dst = ub_sb, src = ub_input[..]);
    let ub_reg = nisa::register_alloc();
    nisa::register_load(ub_reg, ub_sb);
    let data_sb = ndarray([1, 16], f32, Sbuf);
    nisa::dma_copy(dst = data_sb, src = data[..]);
    let out_sb = ndarray([1, 16], f32, Sbuf);
    nisa::memset(dst = out_sb, value = 0.0);
    let i_sb = ndarray([1, 1], i32, Sbuf);
    let (ix, iy) = mgrid![0..1, 0..1];
    nl::fori_loop(0, ub_reg, |i| {
        // `i` is the loop's iteration register; read it as a dynamic offset.
        nisa::register_store(i_sb, i);
        let temp = tensor_copy_dynamic_src(data_sb[[ix, i_sb[[0, 0]] + iy]]);
        tensor_copy_dynamic_dst(out_sb[[ix, i_sb[[0, 0]] + iy]], temp);
    });
    nisa::dma_copy(dst = output[..], src = out_sb);
    output
}

/// NKI's `while_loop` example: `acc += val` and `count -= 1` while the count, reloaded into
/// the condition register after each iteration, is nonzero.
#[kernel]
fn while_countdown(data: Hbm<f32, 1, 1>, count_input: Hbm<i32, 1, 1>) -> Hbm<f32, 1, 1> {
    let out = ndarray([1, 1], f32, SharedHbm);
    let val = ndarray([1, 1], f32, Sbuf);
    nisa::dma_copy(dst = val, src = data[..]);
    let acc = zeros([1, 1], f32, Sbuf);
    let count_sb = ndarray([1, 1], i32, Sbuf);
    nisa::dma_copy(dst = count_sb, src = count_input[..]);
    let one_sb = ndarray([1, 1], i32, Sbuf);
    nisa::memset(dst = one_sb, value = 1);
    let reg = nisa::register_alloc();
    nisa::register_load(reg, count_sb);
    nl::while_loop(reg, |r| {
        nisa::tensor_tensor(dst = acc, data1 = acc, data2 = val, op = add);
        nisa::tensor_tensor(
            dst = count_sb,
            data1 = count_sb,
            data2 = one_sb,
            op = subtract,
        );
        nisa::register_load(r, count_sb);
        r
    });
    nisa::dma_copy(dst = out[..], src = acc);
    out
}

/// A `dynamic_range(lo, hi, step)` with both bounds read at run time: each iteration adds its
/// value (stored from the iteration register) to a running sum; also the values of
/// `register_move`'s immediate and register forms, stored.
#[kernel]
fn dynamic_sum(bounds: Hbm<i32, 1, 2>) -> Hbm<i32, 1, 4> {
    let out = ndarray([1, 4], i32, SharedHbm);
    let b_sb = ndarray([1, 2], i32, Sbuf);
    nisa::dma_copy(dst = b_sb, src = bounds[..]);
    let lo = nisa::register_alloc();
    nisa::register_load(lo, b_sb[[0..1, 0..1]]);
    let hi = nisa::register_alloc(None);
    nisa::register_load(dst = hi, src = b_sb[[0..1, 1..2]]);
    let acc = zeros([1, 1], i32, Sbuf);
    let count = zeros([1, 1], i32, Sbuf);
    let one = ndarray([1, 1], i32, Sbuf);
    nisa::memset(dst = one, value = 1);
    let v = ndarray([1, 1], i32, Sbuf);
    for i in nl::dynamic_range(lo, hi, 3) {
        nisa::register_store(dst = v, src = i);
        nisa::tensor_tensor(dst = acc, data1 = acc, data2 = v, op = add);
        nisa::tensor_tensor(dst = count, data1 = count, data2 = one, op = add);
    }
    let r = nisa::register_alloc(-7);
    let copy = nisa::register_alloc();
    nisa::register_move(copy, r);
    let res = ndarray([1, 4], i32, Sbuf);
    nisa::tensor_copy(dst = res[[0..1, 0..1]], src = acc);
    nisa::tensor_copy(dst = res[[0..1, 1..2]], src = count);
    nisa::register_store(res[[0..1, 2..3]], copy);
    nisa::register_move(copy, 41);
    nisa::register_store(res[[0..1, 3..4]], copy);
    nisa::dma_copy(dst = out[..], src = res);
    out
}

/// A device loop inside an `affine_range`: row `k` of the output counts `n[k]` iterations,
/// each adding `x[k]`.
#[kernel]
fn nested(x: Hbm<f32, 4, 1>, n: Hbm<i32, 4, 1>) -> Hbm<f32, 4, 1> {
    let out = ndarray([4, 1], f32, SharedHbm);
    for k in affine_range(4) {
        let n_sb = ndarray([1, 1], i32, Sbuf);
        nisa::dma_copy(dst = n_sb, src = n[[k..k + 1, 0..1]]);
        let x_sb = ndarray([1, 1], f32, Sbuf);
        nisa::dma_copy(dst = x_sb, src = x[[k..k + 1, 0..1]]);
        let trips = nisa::register_alloc();
        nisa::register_load(trips, n_sb);
        let acc = zeros([1, 1], f32, Sbuf);
        nl::fori_loop(0, trips, |_| {
            nisa::tensor_tensor(dst = acc, data1 = acc, data2 = x_sb, op = add);
        });
        nisa::dma_copy(dst = out[[k..k + 1, 0..1]], src = acc);
    }
    out
}

/// A `while_loop` whose condition never becomes 0.
#[kernel]
fn forever(x: Hbm<f32, 1, 1>) -> Hbm<f32, 1, 1> {
    let out = ndarray([1, 1], f32, SharedHbm);
    let t = ndarray([1, 1], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x[..]);
    let r = nisa::register_alloc(1);
    nl::while_loop(r, |c| {
        nisa::register_move(c, 1);
        c
    });
    nisa::dma_copy(dst = out[..], src = t);
    out
}

fn ub(n: i32) -> Array2<i32> {
    Array2::from_elem((1, 1), n)
}

#[test]
fn fori_loop_copies_the_elements_below_the_run_time_bound() {
    let data = Array2::from_shape_fn((1, 16), |(_, j)| 1.5 * j as f32 - 3.0);
    for (bound, strict) in [(5, false), (16, true), (0, true), (-3, false), (1, true)] {
        let mut core = NeuronCore::default().with_strict(strict);
        let out = fori_copy::host(&mut core, data.view(), ub(bound).view()).unwrap();
        // Python's range(0, bound): none for a bound ≤ 0.
        let want = Array2::from_shape_fn((1, 16), |(_, j)| {
            if (j as i64) < i64::from(bound) {
                data[[0, j]]
            } else {
                0.0
            }
        });
        assert_eq!(out, want, "bound {bound}");
    }
}

#[test]
fn an_iteration_register_past_the_tile_is_a_launch_error() {
    let data = Array2::zeros((1, 16));
    let err = fori_copy::host(&mut NeuronCore::default(), data.view(), ub(17).view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("offset 16"), "{err}");
}

#[test]
fn while_loop_counts_down_as_nkis_example() {
    for (count, strict) in [(0, true), (1, false), (7, true), (40, false)] {
        let mut core = NeuronCore::default().with_strict(strict);
        let data = Array2::from_elem((1, 1), 0.25f32);
        let out = while_countdown::host(&mut core, data.view(), ub(count).view()).unwrap();
        let mut acc = 0.0f64;
        let mut c = count;
        while c != 0 {
            acc += 0.25;
            c -= 1;
        }
        assert_eq!(f64::from(out[[0, 0]]), acc, "count {count}");
    }
}

#[test]
fn dynamic_range_reads_both_bounds_and_steps_by_its_constant() {
    for (lo, hi) in [(0, 10), (2, 3), (-7, 8), (5, 5), (9, -4), (-20, -1)] {
        let bounds = Array2::from_shape_vec((1, 2), vec![lo, hi]).unwrap();
        let mut core = NeuronCore::default().with_strict(true);
        let out = dynamic_sum::host(&mut core, bounds.view()).unwrap();
        let (mut sum, mut n) = (0i64, 0i64);
        let mut i = i64::from(lo);
        while i < i64::from(hi) {
            sum += i;
            n += 1;
            i += 3;
        }
        assert_eq!(
            out.row(0).to_vec(),
            vec![sum as i32, n as i32, -7, 41],
            "[{lo}, {hi})"
        );
    }
}

#[test]
fn a_device_loop_inside_an_affine_range_runs_each_rows_count() {
    let x = Array2::from_shape_vec((4, 1), vec![1.0f32, -2.0, 0.5, 3.0]).unwrap();
    let n = Array2::from_shape_vec((4, 1), vec![3, 0, 6, -1]).unwrap();
    let out = nested::host(
        &mut NeuronCore::default().with_strict(true),
        x.view(),
        n.view(),
    )
    .unwrap();
    for k in 0..4 {
        let trips = n[[k, 0]].max(0);
        let want = (0..trips).fold(0.0f64, |a, _| a + f64::from(x[[k, 0]]));
        assert_eq!(f64::from(out[[k, 0]]), want, "row {k}");
    }
}

#[test]
fn an_enormous_bound_is_a_launch_error_at_once() {
    let data = Array2::zeros((1, 16));
    let err = fori_copy::host(&mut NeuronCore::default(), data.view(), ub(i32::MAX).view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "dynamic_range(0, 2147483647, 1) from registers asks for 2147483647 iterations"
        ),
        "{err}"
    );
}

#[test]
fn a_never_ending_while_loop_is_a_launch_error() {
    let x = Array2::from_elem((1, 1), 1.0f32);
    // Without a budget: the model's limit of iterations per run of a device loop.
    let err = forever::host(&mut NeuronCore::default(), x.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("condition register r0 is still 1 after 1048576 iterations"),
        "{err}"
    );
    // With an instruction budget: stopped by it.
    let mut core = NeuronCore::default();
    core.set_budget(Budget::instructions(10_000));
    let err = forever::host(&mut core, x.view()).unwrap_err();
    assert!(matches!(err, LaunchError::Stopped(_)), "{err}");
    // The negative count of NKI's example never reaches 0 either.
    let err = while_countdown::host(&mut core, x.view(), ub(-1).view()).unwrap_err();
    assert!(matches!(err, LaunchError::Stopped(_)), "{err}");
}

#[test]
fn strict_mode_refuses_a_register_load_of_an_unwritten_element() {
    let data = Array2::from_elem((1, 1), 0.5f32);
    #[kernel]
    fn unwritten_bound(x: Hbm<f32, 1, 1>) -> Hbm<f32, 1, 1> {
        let out = ndarray([1, 1], f32, SharedHbm);
        let t = ndarray([1, 1], f32, Sbuf);
        nisa::dma_copy(dst = t, src = x[..]);
        // Only the first of the two elements is written.
        let n = ndarray([1, 2], i32, Sbuf);
        nisa::memset(dst = n[[0..1, 0..1]], value = 2);
        let r = nisa::register_alloc();
        nisa::register_load(r, n[[0..1, 1..2]]);
        nl::fori_loop(0, r, |_| {
            nisa::tensor_tensor(dst = t, data1 = t, data2 = t, op = add);
        });
        nisa::dma_copy(dst = out[..], src = t);
        out
    }
    let err = unwritten_bound::host(&mut NeuronCore::default().with_strict(true), data.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("register_load"), "{err}");
}

#[test]
fn the_timing_model_runs_the_body_the_run_time_number_of_times() {
    let mut core = NeuronCore::default();
    let data = Array2::from_elem((1, 1), 0.25f32);
    let busy = |core: &mut NeuronCore, count: i32| {
        let d = DeviceTensor::from_array(&data).unwrap();
        let c = DeviceTensor::from_array(&ub(count)).unwrap();
        let mut out = DeviceTensor::<f32>::zeros(&[1, 1]).unwrap();
        let s = Timing::new()
            .run(
                core,
                &while_countdown::KERNEL,
                &[d.arg(), c.arg()],
                &mut [out.arg_mut()],
            )
            .unwrap();
        let stats = s.track_stats(Track::of_engine(Engine::Vector));
        (
            stats.busy,
            stats.count,
            s.opcode_count(Engine::Sync, Opcode::RegisterLoad),
        )
    };
    let (b4, n4, loads4) = busy(&mut core, 4);
    let (b8, n8, loads8) = busy(&mut core, 8);
    let (b12, _, _) = busy(&mut core, 12);
    // Two tensor_tensor per iteration on VectorE (plus the memsets outside the loop), and one
    // register_load before the loop and one per iteration.
    assert_eq!(n8 - n4, 2 * 4);
    assert_eq!((loads4, loads8), (5, 9));
    // Each iteration costs VectorE the same time.
    assert!(b8 > b4, "{b4} {b8}");
    assert_eq!(b12 - b8, b8 - b4);
}

#[test]
fn timing_only_runs_of_device_loops_compute_their_trip_counts() {
    // On placeholder inputs (zeros): the count is 0, so the while_loop's body never runs, and
    // the run is timed computing (its trip counts are data).
    let s = Timing::new()
        .run_shapes(
            &mut NeuronCore::default(),
            &while_countdown::KERNEL,
            &[&[1, 1], &[1, 1]],
        )
        .unwrap();
    assert_eq!(s.opcode_count(Engine::Sync, Opcode::RegisterLoad), 1);
    assert_eq!(s.opcode_count(Engine::Vector, Opcode::TensorTensor), 0);
}

#[test]
fn the_schedule_check_refuses_device_loops_with_an_error() {
    let data = Array2::from_elem((1, 1), 0.25f32);
    let mut core =
        NeuronCore::default().with_schedule_check(Some(nki::strict::ScheduleCheck::DEFAULT));
    let err = while_countdown::host(&mut core, data.view(), ub(3).view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the schedule check's recording cannot follow device loops"),
        "{err}"
    );
}

#[test]
fn the_listing_shows_device_loops_and_registers() {
    let listing = while_countdown::KERNEL.program().to_string();
    assert!(listing.contains("while r0 != 0:"), "{listing}");
    assert!(listing.contains("register_load r0 <- "), "{listing}");
    let listing = dynamic_sum::KERNEL.program().to_string();
    assert!(
        listing.contains("for i = r2 in dynamic_range(r2, r1, 3):"),
        "{listing}"
    );
    assert!(listing.contains("register_move r3 <- -7"), "{listing}");
}

/// NKI's `register_load` and `register_store` on HBM ("from memory (HBM or SBUF)"): the trip
/// count read straight from an input tensor, the iteration count reached stored straight into
/// an output; the body doubles a running value.
#[kernel]
fn hbm_registers(n: Hbm<i32, 1, 1>) -> (Hbm<f32, 1, 1>, Hbm<i32, 1, 1>) {
    let out = ndarray([1, 1], f32, SharedHbm);
    let count = ndarray([1, 1], i32, SharedHbm);
    let trips = nisa::register_alloc();
    nisa::register_load(trips, n);
    let acc = ndarray([1, 1], f32, Sbuf);
    nisa::memset(dst = acc, value = 1.0);
    nl::fori_loop(0, trips, |_| {
        nisa::tensor_tensor(dst = acc, data1 = acc, data2 = acc, op = add);
    });
    nisa::register_store(count, trips);
    nisa::dma_copy(dst = out, src = acc);
    (out, count)
}

#[test]
fn register_load_and_store_reach_hbm_tensors() {
    for (n, strict) in [(0, true), (3, false), (10, true), (-2, true)] {
        let mut core = NeuronCore::default().with_strict(strict);
        let (out, count) = hbm_registers::host(&mut core, ub(n).view()).unwrap();
        let want = (0..n.max(0)).fold(1.0f64, |a, _| a + a);
        assert_eq!(f64::from(out[[0, 0]]), want, "n {n}");
        assert_eq!(count[[0, 0]], n, "n {n}");
    }
    // Each is an ordinary DMA through a one-element SBUF tile of its own, then the register
    // instruction (or the register instruction, then the DMA).
    let listing = hbm_registers::KERNEL.program().to_string();
    let load = listing.find("load         ").expect("a load");
    let reg_load = listing.find("register_load r0").expect("a register_load");
    let reg_store = listing.find("register_store").expect("a register_store");
    let store = listing[reg_store..]
        .find("store        count")
        .expect("a store");
    assert!(
        load < reg_load && reg_store > reg_load && store > 0,
        "{listing}"
    );
}
