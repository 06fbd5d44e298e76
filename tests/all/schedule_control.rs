//! NKI 0.6's scheduling control (`nki_lang::schedule_control`): `name = "..."` on a call,
//! `#[kernel(with_schedule = [...])]` edges and `no_reorder! { ... }` blocks. Names show in the
//! listing, the Chrome trace, the SVG and the profile; edges and blocks order instructions in
//! the timing model and in the schedule check, and change no result (checked against plain
//! f64 loops).

use nki::ndarray::Array2;
use nki::prelude::*;
use nki::strict::ScheduleCheck;
use nki::timing::{Detail, Kind, Record, Schedule, Timing};

/// NKI's guide example (`how-to-scheduling-apis.rst`) with an exp on Scalar in place of its
/// reciprocal: two independent instructions on two engines, `plus1` made to wait for `exp`.
#[kernel(with_schedule = [("plus1", "exp")])]
fn scheduled(t: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let x = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = x, src = t);
    let a = ndarray([128, 512], f32, Sbuf);
    let b = ndarray([128, 512], f32, Sbuf);
    let c = ndarray([128, 512], f32, Sbuf);
    nisa::activation(dst = a, op = exp, data = x, name = "exp");
    nisa::tensor_scalar(dst = b, data = x, op0 = add, operand0 = 1.0, name = "plus1");
    nisa::tensor_tensor(dst = c, data1 = a, data2 = b, op = add);
    let out = ndarray([128, 512], f32, SharedHbm);
    nisa::dma_copy(dst = out, src = c);
    out
}

/// The same without the edge.
#[kernel]
fn unscheduled(t: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let x = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = x, src = t);
    let a = ndarray([128, 512], f32, Sbuf);
    let b = ndarray([128, 512], f32, Sbuf);
    let c = ndarray([128, 512], f32, Sbuf);
    nisa::activation(dst = a, op = exp, data = x, name = "exp");
    nisa::tensor_scalar(dst = b, data = x, op0 = add, operand0 = 1.0, name = "plus1");
    nisa::tensor_tensor(dst = c, data1 = a, data2 = b, op = add);
    let out = ndarray([128, 512], f32, SharedHbm);
    nisa::dma_copy(dst = out, src = c);
    out
}

/// `("c", ["a", "b"])`: one name waiting for two.
#[kernel(with_schedule = [("last", ["first", "second"])])]
fn waits_for_two(t: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let x = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = x, src = t, name = "first");
    let y = ndarray([128, 512], f32, Sbuf);
    nisa::activation(dst = y, op = exp, data = x, name = "second");
    let z = ndarray([128, 512], f32, Sbuf);
    nisa::memset(dst = z, value = 2.0, name = "last");
    // NKI 2.26's tensor name on `ndarray`: no instruction to label.
    let w = ndarray([128, 512], f32, Sbuf, name = "w_tile");
    nisa::tensor_tensor(dst = w, data1 = y, data2 = z, op = multiply);
    let out = ndarray([128, 512], f32, SharedHbm);
    nisa::dma_copy(dst = out, src = w);
    out
}

/// Three independent loads kept in program order by a `no_reorder!` block.
#[kernel]
fn ordered_loads(
    a: Hbm<f32, 128, 512>,
    b: Hbm<f32, 128, 512>,
    c: Hbm<f32, 128, 512>,
) -> Hbm<f32, 128, 512> {
    let x = ndarray([128, 512], f32, Sbuf);
    let y = ndarray([128, 512], f32, Sbuf);
    let z = ndarray([128, 512], f32, Sbuf);
    no_reorder! {
        nisa::dma_copy(dst = x, src = a, name = "load_a");
        nisa::dma_copy(dst = y, src = b, name = "load_b");
        nisa::dma_copy(dst = z, src = c, name = "load_c");
    }
    let s = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_tensor(dst = s, data1 = x, data2 = y, op = add);
    nisa::tensor_tensor(dst = s, data1 = s, data2 = z, op = subtract);
    let out = ndarray([128, 512], f32, SharedHbm);
    nisa::dma_copy(dst = out, src = s);
    out
}

/// The same loads, free to overlap.
#[kernel]
fn free_loads(
    a: Hbm<f32, 128, 512>,
    b: Hbm<f32, 128, 512>,
    c: Hbm<f32, 128, 512>,
) -> Hbm<f32, 128, 512> {
    let x = ndarray([128, 512], f32, Sbuf);
    let y = ndarray([128, 512], f32, Sbuf);
    let z = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = x, src = a, name = "load_a");
    nisa::dma_copy(dst = y, src = b, name = "load_b");
    nisa::dma_copy(dst = z, src = c, name = "load_c");
    let s = ndarray([128, 512], f32, Sbuf);
    nisa::tensor_tensor(dst = s, data1 = x, data2 = y, op = add);
    nisa::tensor_tensor(dst = s, data1 = s, data2 = z, op = subtract);
    let out = ndarray([128, 512], f32, SharedHbm);
    nisa::dma_copy(dst = out, src = s);
    out
}

/// A `no_reorder!` block in a loop body: the iterations, free to overlap in an
/// `affine_range`, run one after the other. Its names stay bound after the block (Python's
/// `with` opens no scope).
#[kernel]
fn ordered_iterations(x: Hbm<f32, 1024, 512>) -> Hbm<f32, 1024, 512> {
    let out = ndarray([1024, 512], f32, SharedHbm);
    for i in affine_range(8) {
        no_reorder! {
            let t = load(x[[i * 128..(i + 1) * 128, 0..512]]);
            let y = exp(t);
        }
        store(out[[i * 128..(i + 1) * 128, 0..512]], y);
    }
    out
}

/// The same, iterations free.
#[kernel]
fn free_iterations(x: Hbm<f32, 1024, 512>) -> Hbm<f32, 1024, 512> {
    let out = ndarray([1024, 512], f32, SharedHbm);
    for i in affine_range(8) {
        let t = load(x[[i * 128..(i + 1) * 128, 0..512]]);
        let y = exp(t);
        store(out[[i * 128..(i + 1) * 128, 0..512]], y);
    }
    out
}

/// `tests/schedule.rs`'s memset-after-matmul race: each iteration drains the PSUM tile and
/// zeroes it for the next; the device may run the next iteration's matmul before this one's
/// memset. The whole body in a `no_reorder!` block keeps the iterations in program order.
#[kernel]
fn zeroes_psum_in_order(w: Hbm<f32, 128, 128>, x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let ps = zeros([128, 512], f32, Psum);
    let wt = load(w[[0..128, 0..128]]);
    for i in affine_range(2) {
        no_reorder! {
            let t = load(x[[i * 128..i * 128 + 128, 0..512]]);
            ps += matmul(wt, t, transpose_x = true);
            let r = copy(ps, f32);
            store(out[[i * 128..i * 128 + 128, 0..512]], r);
            ps[[0..128, 0..512]] = 0.0;
        }
    }
    out
}

/// The same race without the block.
#[kernel]
fn zeroes_psum_racing(w: Hbm<f32, 128, 128>, x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let ps = zeros([128, 512], f32, Psum);
    let wt = load(w[[0..128, 0..128]]);
    for i in affine_range(2) {
        let t = load(x[[i * 128..i * 128 + 128, 0..512]]);
        ps += matmul(wt, t, transpose_x = true);
        let r = copy(ps, f32);
        store(out[[i * 128..i * 128 + 128, 0..512]], r);
        ps[[0..128, 0..512]] = 0.0;
    }
    out
}

/// Deterministic inputs in [-1, 1).
fn input(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Array2::from_shape_fn((rows, cols), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    })
}

/// `got` against `want` elementwise with a relative tolerance (the model's exp is accurate to
/// a few ulp, not correctly rounded).
#[track_caller]
fn close(got: &Array2<f32>, want: &Array2<f64>) {
    assert_eq!(got.dim(), want.dim());
    for (g, w) in got.iter().zip(want) {
        let err = (f64::from(*g) - w).abs();
        assert!(err <= 1e-5 * w.abs().max(1.0), "got {g}, want {w}");
    }
}

/// The trace-detail schedule of `kernel` on `shapes`.
fn traced(kernel: &Kernel<'_>, shapes: &[&[usize]]) -> Schedule {
    Timing::new()
        .detail(Detail::Trace)
        .run_shapes(&mut NeuronCore::default(), kernel, shapes)
        .unwrap()
}

/// The record of the named instruction's executing part (a DMA's transfer, a compute
/// instruction, a matmul's MultiplyMoving).
fn part<'s>(s: &'s Schedule, name: &'s str) -> &'s Record {
    s.named_records(name)
        .find(|r| {
            matches!(
                r.kind,
                Kind::Instruction | Kind::DmaTransfer | Kind::MultiplyMoving
            )
        })
        .unwrap_or_else(|| panic!("no record named {name}"))
}

/// The named instruction's first start (its trigger for a DMA).
fn first_start(s: &Schedule, name: &str) -> u64 {
    s.named_records(name).map(|r| r.start).min().unwrap()
}

#[test]
fn an_edge_makes_an_independent_instruction_wait() {
    let shapes: &[&[usize]] = &[&[128, 512]];
    let free = traced(&unscheduled::KERNEL, shapes);
    let edge = traced(&scheduled::KERNEL, shapes);
    // Without the edge the two overlap; with it, plus1 starts after exp completes.
    assert!(first_start(&free, "plus1") < part(&free, "exp").done);
    assert!(first_start(&edge, "plus1") >= part(&edge, "exp").done);
    // The wait is the edge's: the record says what plus1 waited for.
    let exp_id = edge
        .records()
        .iter()
        .position(|r| r.pc == part(&edge, "exp").pc && r.kind == Kind::Instruction)
        .unwrap() as u32;
    assert_eq!(part(&edge, "plus1").pred, Some(exp_id));
    assert!(edge.total_ps() >= free.total_ps());
    // One name waiting for two.
    let two = traced(&waits_for_two::KERNEL, shapes);
    let last = first_start(&two, "last");
    assert!(last >= part(&two, "first").done);
    assert!(last >= part(&two, "second").done);
}

#[test]
fn edges_change_no_result() {
    let x = input(128, 512, 1);
    let mut core = NeuronCore::default();
    let want = x.mapv(|v| f64::from(v).exp() + (f64::from(v) + 1.0));
    close(&scheduled::host(&mut core, x.view()).unwrap(), &want);
    close(&unscheduled::host(&mut core, x.view()).unwrap(), &want);
    let want2 = x.mapv(|v| f64::from(v).exp() * 2.0);
    close(&waits_for_two::host(&mut core, x.view()).unwrap(), &want2);
}

#[test]
fn a_no_reorder_block_keeps_program_order() {
    let shapes: &[&[usize]] = &[&[128, 512], &[128, 512], &[128, 512]];
    let free = traced(&free_loads::KERNEL, shapes);
    let ordered = traced(&ordered_loads::KERNEL, shapes);
    // Free, the second load is triggered before the first completes.
    assert!(first_start(&free, "load_b") < part(&free, "load_a").done);
    // In the block each waits for the previous one's completion.
    assert!(first_start(&ordered, "load_b") >= part(&ordered, "load_a").done);
    assert!(first_start(&ordered, "load_c") >= part(&ordered, "load_b").done);
    assert!(ordered.total_ps() > free.total_ps());
    // Results: a + b - c.
    let (a, b, c) = (input(128, 512, 2), input(128, 512, 3), input(128, 512, 4));
    let mut want = Array2::<f64>::zeros((128, 512));
    for i in 0..128 {
        for j in 0..512 {
            want[[i, j]] = f64::from(a[[i, j]]) + f64::from(b[[i, j]]) - f64::from(c[[i, j]]);
        }
    }
    let mut core = NeuronCore::default();
    close(
        &ordered_loads::host(&mut core, a.view(), b.view(), c.view()).unwrap(),
        &want,
    );
}

#[test]
fn a_block_in_a_loop_serialises_the_iterations_and_fast_forward_stays_exact() {
    let shapes: &[&[usize]] = &[&[1024, 512]];
    let ordered = traced(&ordered_iterations::KERNEL, shapes);
    let free = traced(&free_iterations::KERNEL, shapes);
    assert!(ordered.total_ps() > free.total_ps());
    // Each iteration's load waits for the previous iteration's exp (the block's last).
    let loads: Vec<&Record> = ordered
        .records()
        .iter()
        .filter(|r| r.kind == Kind::DmaTrigger && r.opcode == nki::program::Opcode::Load)
        .collect();
    let exps: Vec<&Record> = ordered
        .records()
        .iter()
        .filter(|r| r.kind == Kind::Instruction && r.opcode == nki::program::Opcode::Activation)
        .collect();
    assert_eq!((loads.len(), exps.len()), (8, 8));
    for k in 1..8 {
        assert!(loads[k].start >= exps[k - 1].done);
    }
    // A summary run (which fast-forwards loops in a steady state unless the program orders
    // instructions) gives the traced run's time.
    let summary = Timing::new()
        .detail(Detail::Summary)
        .run_shapes(
            &mut NeuronCore::default(),
            &ordered_iterations::KERNEL,
            shapes,
        )
        .unwrap();
    assert_eq!(summary.total_ps(), ordered.total_ps());
    let x = input(1024, 512, 5);
    let got = ordered_iterations::host(&mut NeuronCore::default(), x.view()).unwrap();
    close(&got, &x.mapv(|v| f64::from(v).exp()));
}

#[test]
fn the_schedule_check_follows_no_reorder_blocks() {
    let w = input(128, 128, 6);
    let x = input(256, 512, 7);
    // Strict mode refuses both in program order (an `affine_range` iteration reading what
    // another wrote); the schedule check alone is what the block changes.
    let mut core = NeuronCore::default()
        .with_strict(false)
        .with_schedule_check(Some(ScheduleCheck::DEFAULT));
    assert!(matches!(
        zeroes_psum_racing::host(&mut core, w.view(), x.view()),
        Err(LaunchError::Schedule(_))
    ));
    let got = zeroes_psum_in_order::host(&mut core, w.view(), x.view()).unwrap();
    // out[i·128 + m, n] = Σ_k w[k, m] · x[i·128 + k, n].
    let mut want = Array2::<f64>::zeros((256, 512));
    for i in 0..2 {
        for m in 0..128 {
            for n in 0..512 {
                want[[i * 128 + m, n]] = (0..128)
                    .map(|k| f64::from(w[[k, m]]) * f64::from(x[[i * 128 + k, n]]))
                    .sum();
            }
        }
    }
    for (g, wv) in got.iter().zip(&want) {
        assert!((f64::from(*g) - wv).abs() <= 1e-3, "got {g}, want {wv}");
    }
}

#[test]
fn names_show_in_the_listing_trace_svg_and_profile() {
    let listing = scheduled::KERNEL.program().to_string();
    assert!(listing.contains("name=\"exp\""), "{listing}");
    assert!(listing.contains("name=\"plus1\""), "{listing}");
    assert!(
        listing.contains("schedule \"plus1\" after \"exp\""),
        "{listing}"
    );
    let two = waits_for_two::KERNEL.program();
    let names: Vec<&str> = two.control().names.iter().map(|n| n.name).collect();
    assert_eq!(names, ["first", "second", "last"]);
    assert!(!two.to_string().contains("w_tile"));
    let blocks = ordered_loads::KERNEL.program().to_string();
    assert!(blocks.contains("no_reorder "), "{blocks}");
    let s = traced(&scheduled::KERNEL, &[&[128, 512]]);
    // Chrome trace: the slice's name starts with the instruction's, and its args carry it.
    let mut buf = Vec::new();
    s.write_chrome_trace(&mut buf).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let plus1: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["args"]["instr_name"] == "plus1")
        .collect();
    assert_eq!(plus1.len(), 1);
    assert!(plus1[0]["name"].as_str().unwrap().starts_with("plus1 · "));
    assert_eq!(plus1[0]["args"]["opcode"], "tensor_scalar");
    // Unnamed records have no name argument.
    assert!(
        events
            .iter()
            .any(|e| e["args"]["opcode"] == "tensor_tensor" && e["args"]["instr_name"].is_null())
    );
    // SVG: a mark titled with the name.
    let mut svg = Vec::new();
    s.write_svg(&mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("<title>plus1: tensor_scalar on "), "{svg}");
    // Profile: a row per name, in order of first execution.
    let p = s.profile();
    let names: Vec<&str> = p.named.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["exp", "plus1"]);
    assert!(p.named[1].first_start_us >= p.named[0].last_done_us);
    assert!(p.to_string().contains("plus1"));
    let j: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(j["named"][1]["name"], "plus1");
    // Schedule::instr_name by pc.
    let pc = part(&s, "exp").pc;
    assert_eq!(s.instr_name(pc), Some("exp"));
    assert_eq!(s.instr_name(0), None);
}
