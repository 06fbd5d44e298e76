//! The timing model on `#[kernel]` programs: the matmul tutorial's four stages timed without
//! arithmetic agree exactly with full runs, their HBM traffic is what the loops imply,
//! masked-off instructions cost nothing, the trace names kernel source lines, and the
//! `--profile` argument parser.

use crate::examples::autotune_matmul as autotune;
use crate::examples::matmul_block_free_dimension as block_free_dimension;
use crate::examples::matmul_fully_optimized as fully_optimized;
use crate::examples::matmul_hoist_load as hoist_load;
use crate::examples::matmul_tiled as tiled;

use nki::prelude::*;
use nki::program::{Engine, Opcode};
use nki::timing::{
    Detail, Kind, Mode, ProfileRequest, Scheduling, Timing, TimingError, is_profile_arg,
};

/// The four stages, each with a shape its launch constraints accept.
fn stages() -> [(&'static Kernel<'static>, [usize; 3]); 4] {
    [
        (&tiled::matmul_tiled::KERNEL, [512, 256, 1024]),
        (
            &hoist_load::nki_matmul_hoist_load_::KERNEL,
            [512, 256, 1024],
        ),
        (
            &block_free_dimension::nki_matmul_block_free_dimension_::KERNEL,
            [512, 512, 1024],
        ),
        (
            &fully_optimized::nki_matmul_fully_optimized_small::KERNEL,
            [1024, 512, 1024],
        ),
    ]
}

#[test]
fn timing_only_agrees_with_full_runs_of_the_matmul_stages() {
    for (kernel, [k, m, n]) in stages() {
        let lhs = DeviceTensor::from_array(&tiled::common::random_bf16(k, m, 1)).unwrap();
        let rhs = DeviceTensor::from_array(&tiled::common::random_bf16(k, n, 2)).unwrap();
        let mut out = DeviceTensor::<bf16>::zeros(&[m, n]).unwrap();
        let mut core = NeuronCore::default();
        let time = |mode, core: &mut NeuronCore, out: &mut DeviceTensor<bf16>| {
            Timing::new()
                .detail(Detail::Trace)
                .mode(mode)
                .run(core, kernel, &[lhs.arg(), rhs.arg()], &mut [out.arg_mut()])
                .unwrap()
        };
        let only = time(Mode::TimingOnly, &mut core, &mut out);
        assert!(
            out.as_slice().iter().all(|x| x.to_bits() == 0),
            "{}: timing only computed",
            kernel.name()
        );
        let full = time(Mode::Compute, &mut core, &mut out);
        assert!(
            out.as_slice().iter().any(|x| x.to_bits() != 0),
            "{}: the full run computed nothing",
            kernel.name()
        );
        assert_eq!(full.total_ps(), only.total_ps(), "{}", kernel.name());
        assert_eq!(full.records(), only.records(), "{}", kernel.name());
        assert_eq!(full.profile(), only.profile(), "{}", kernel.name());
        // And timing on placeholders of the same shapes.
        let shapes = Timing::new()
            .detail(Detail::Trace)
            .run_shapes(&mut core, kernel, &[&[k, m], &[k, n]])
            .unwrap();
        assert_eq!(shapes.records(), only.records(), "{}", kernel.name());
        // Every matmul of the product, 2·K·M·N FLOPs.
        assert_eq!(only.flops(), 2 * (k * m * n) as u64, "{}", kernel.name());
        assert_eq!(
            only.opcode_count(Engine::Tensor, Opcode::Matmul),
            ((k / 128) * (m / 128) * (n / 512)) as u64
        );
    }
}

#[test]
fn hbm_traffic_follows_the_loops() {
    let (k, m, n) = (1024usize, 512usize, 2048usize);
    let mut core = NeuronCore::default();
    let bytes = |kernel: &Kernel<'_>, core: &mut NeuronCore| {
        let s = Timing::new()
            .detail(Detail::Summary)
            .run_shapes(core, kernel, &[&[k, m], &[k, n]])
            .unwrap();
        (s.hbm_read_bytes(), s.hbm_write_bytes())
    };
    let out = (m * n * 2) as u64;
    // Tiled: every lhs tile once per column block of 512, every rhs tile once per row
    // block of 128.
    let tiled_read = (k * m * 2 * (n / 512) + k * n * 2 * (m / 128)) as u64;
    assert_eq!(
        bytes(&tiled::matmul_tiled::KERNEL, &mut core),
        (tiled_read, out)
    );
    // Hoisted: lhs once per row block, rhs still once per row block of 128.
    let hoist_read = (k * m * 2 + k * n * 2 * (m / 128)) as u64;
    assert_eq!(
        bytes(&hoist_load::nki_matmul_hoist_load_::KERNEL, &mut core),
        (hoist_read, out)
    );
    // Blocked free dimension: rhs once per row block of 256.
    let block_read = (k * m * 2 + k * n * 2 * (m / 256)) as u64;
    assert_eq!(
        bytes(
            &block_free_dimension::nki_matmul_block_free_dimension_::KERNEL,
            &mut core
        ),
        (block_read, out)
    );
}

/// Exp of the first of four tiles only: a loop-only mask.
#[kernel]
fn first_tile_only(x: Hbm<f32, 512, 256>) -> Hbm<f32, 512, 256> {
    let out = ndarray([512, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    for k in affine_range(4) {
        let t = load(x[[k * 128 + i_p, i_f]]);
        let y = exp(t, mask = k < 1); // the masked exp
        store(out[[k * 128 + i_p, i_f]], y);
    }
    out
}

#[test]
fn masked_off_instructions_cost_nothing() {
    let mut core = NeuronCore::default();
    let s = Timing::new()
        .detail(Detail::Trace)
        .run_shapes(&mut core, &first_tile_only::KERNEL, &[&[512, 256]])
        .unwrap();
    assert_eq!(s.opcode_count(Engine::Scalar, Opcode::Activation), 1);
    assert_eq!(s.opcode_count(Engine::Dma, Opcode::Load), 4);
    assert_eq!(s.opcode_count(Engine::Dma, Opcode::Store), 4);
    assert_eq!(s.instructions(), 9);
    // The trace names the kernel source line of the exp.
    let src = include_str!("timing.rs");
    let line = src
        .lines()
        .position(|l| l.contains("// the masked exp"))
        .unwrap() as u32
        + 1;
    let act = s
        .records()
        .iter()
        .find(|r| r.kind == Kind::Instruction && r.opcode == Opcode::Activation)
        .unwrap();
    assert_eq!(act.line, line);
    let mut buf = Vec::new();
    s.write_chrome_trace(&mut buf).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
    let ev = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "activation")
        .unwrap();
    assert_eq!(ev["args"]["line"], line);
    assert!(
        ev["args"]["operands"]["data"]
            .as_str()
            .unwrap()
            .starts_with("t sbuf:f32[128, 256]")
    );
}

#[test]
fn profile_arguments() {
    let none = ProfileRequest::from_args(["1024", "--json"]).unwrap();
    assert_eq!(none, None);
    let plain = ProfileRequest::from_args(["--profile"]).unwrap().unwrap();
    assert_eq!(plain.dir, None);
    let dir = ProfileRequest::from_args(["8", "--profile=out/prof"])
        .unwrap()
        .unwrap();
    assert_eq!(dir.dir.as_deref(), Some(std::path::Path::new("out/prof")));
    assert!(matches!(
        ProfileRequest::from_args(["--profile="]),
        Err(TimingError::Args { .. })
    ));
    assert!(is_profile_arg("--profile") && is_profile_arg("--profile=x"));
    assert!(!is_profile_arg("--profiles") && !is_profile_arg("128"));
}

#[test]
fn grid_launches_time_every_instance() {
    #[kernel]
    fn add(a: Hbm<f32, X, 512>, b: Hbm<f32, X, 512>) -> Hbm<f32, X, 512> {
        let c = ndarray([X, 512], f32, SharedHbm);
        let ix = program_id(0) * 128 + arange(128).p();
        let iy = arange(512).x();
        store(c[[ix, iy]], load(a[[ix, iy]]) + load(b[[ix, iy]]));
        c
    }
    let mut core = NeuronCore::default();
    let one = Timing::new()
        .grid(LaunchGrid::new(&[1.into()]))
        .run_shapes(&mut core, &add::KERNEL, &[&[128, 512], &[128, 512]])
        .unwrap();
    let four = Timing::new()
        .grid(LaunchGrid::new(&[4.into()]))
        .run_shapes(&mut core, &add::KERNEL, &[&[512, 512], &[512, 512]])
        .unwrap();
    assert_eq!(four.instructions(), 4 * one.instructions());
    assert!(four.total_ps() > one.total_ps());
    assert!(four.total_ps() < 4 * one.total_ps(), "instances overlap");
}

#[test]
fn a_profile_request_prints_and_writes_files() {
    let dir = std::env::temp_dir().join(format!("nki-timing-test-{}", std::process::id()));
    let req = ProfileRequest {
        dir: Some(dir.clone()),
    };
    let mut core = NeuronCore::default();
    let p = req
        .run_shapes(&mut core, &first_tile_only::KERNEL, &[&[512, 256]])
        .unwrap();
    assert_eq!(p.kernel, "first_tile_only");
    assert!(p.latency_us > 0.0);
    let trace = std::fs::read(dir.join("first_tile_only.trace.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&trace).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().len() > 10);
    let svg = std::fs::read_to_string(dir.join("first_tile_only.svg")).unwrap();
    assert!(svg.contains("first_tile_only"));
    std::fs::remove_dir_all(&dir).unwrap();
    // Without a directory: the profile only.
    let p2 = ProfileRequest { dir: None }
        .run_inputs(
            &mut core,
            &first_tile_only::KERNEL,
            LaunchGrid::SINGLE,
            &[DeviceTensor::<f32>::zeros(&[512, 256]).unwrap().arg()],
        )
        .unwrap();
    assert_eq!(p2, p);
    // Profile JSON.
    let j: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(j["kernel"], "first_tile_only");
    assert!(j["utilisation"]["Scalar"].as_f64().unwrap() > 0.0);
    assert_eq!(j["counts"]["Scalar.activation"], 1);
    assert_eq!(j["instructions"], p.instructions);
    assert_eq!(j["not_run"], p.not_run);
}

#[test]
fn autotune_candidates_compute_the_product_and_rank_consistently() {
    // The tutorial's instance and the grid's instance with its values compute the same bits.
    let (k, m, n) = (2048, 2048, 1024);
    let a = tiled::common::random_bf16(k, m, 5);
    let b = tiled::common::random_bf16(k, n, 6);
    let (da, db) = (
        DeviceTensor::from_array(&a).unwrap(),
        DeviceTensor::from_array(&b).unwrap(),
    );
    let mut core = NeuronCore::default();
    let tutorial = fully_optimized::nki_matmul_fully_optimized_(&mut core, &da, &db).unwrap();
    let grid = autotune::mm_m16_n2_k8(&mut core, &da, &db).unwrap();
    assert_eq!(tutorial.as_slice(), grid.as_slice());
    // A long-K candidate against the f64 reference (one bf16 rounding per K block).
    let (k, m, n) = (4096, 256, 512);
    let a = tiled::common::random_bf16(k, m, 7);
    let b = tiled::common::random_bf16(k, n, 8);
    let out = autotune::mm_m2_n1_k32(
        &mut core,
        &DeviceTensor::from_array(&a).unwrap(),
        &DeviceTensor::from_array(&b).unwrap(),
    )
    .unwrap();
    let (reference, magnitude) = tiled::common::reference(a.view(), b.view());
    let out = out.into_array::<nki::ndarray::Ix2>().unwrap();
    let (worst, within) =
        tiled::common::max_error_rounded(out.view(), &reference, &magnitude, k, 1);
    assert!(within, "largest error {worst}");
    // Ranked fastest first; the two instances with the tutorial's values time the same.
    let ranked = autotune::rank(Target::Trn1, Scheduling::default(), 2048, 2048, 2048);
    let times: Vec<f64> = ranked
        .iter()
        .filter_map(|o| o.result.as_ref().ok().map(|p| p.latency_us))
        .collect();
    assert!(times.len() >= 30);
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let latency = |name: &str| {
        ranked
            .iter()
            .find(|o| o.instance.name == name)
            .and_then(|o| o.result.as_ref().ok())
            .map(|p| p.latency_us)
            .unwrap()
    };
    assert_eq!(
        latency("nki_matmul_fully_optimized_"),
        latency("mm_m16_n2_k8")
    );
}

/// A kernel compiled for Trn3.
#[kernel(target = trn3)]
fn double_trn3(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(x[[0..128, 0..512]]);
    store(out[[0..128, 0..512]], t + t);
    out
}

#[test]
fn a_trn3_kernel_runs_and_is_timed_on_the_v4_table() {
    assert_eq!(double_trn3::KERNEL.program().target(), Target::Trn3);
    let mut core = NeuronCore::new(Target::Trn3);
    let x = DeviceTensor::from_array(&nki::ndarray::Array2::from_shape_fn(
        (128, 512),
        |(i, j)| (i * 512 + j) as f32,
    ))
    .unwrap();
    let out = double_trn3(&mut core, &x).unwrap();
    let out = out.into_array::<nki::ndarray::Ix2>().unwrap();
    assert_eq!(out[[3, 7]], 2.0 * (3 * 512 + 7) as f32);
    let s = Timing::new()
        .run_shapes(&mut core, &double_trn3::KERNEL, &[&[128, 512]])
        .unwrap();
    assert_eq!(s.params().generation.to_string(), "NeuronCore-v4 (Trn3)");
}

/// `x * broadcast_to(row)`: a partition broadcast read by VectorE, one PSUM bank wide
/// (`F = 512` fp32) or two (`F = 1024`).
#[kernel(scale_rows_512(F = 512), scale_rows_1024(F = 1024))]
fn scale_rows<const F: usize>(x: Hbm<f32, 128, F>, row: Hbm<f32, 1, F>) -> Hbm<f32, 128, F> {
    let out = ndarray([128, F], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..F];
    let (j_p, j_f) = mgrid![0..1, 0..F];
    let t = load(x[[i_p, i_f]]);
    let r = load(row[[j_p, j_f]]);
    let b = broadcast_to(r, [128, F]);
    let y = tensor_tensor(t, b, op = multiply);
    store(out[[i_p, i_f]], y);
    out
}

/// Picoseconds of `cycles` VectorE cycles on Trn1 (1.12 GHz), as the model rounds them.
fn trn1_vector_ps(cycles: u64) -> u64 {
    (cycles * 1_000_000 + 560) / 1120
}

#[test]
fn a_one_bank_partition_broadcast_is_read_from_psum_on_the_device() {
    let mut core = NeuronCore::new(Target::Trn1);
    let time = |kernel: &Kernel<'static>, f: usize, scheduling, core: &mut NeuronCore| {
        Timing::new()
            .detail(Detail::Trace)
            .scheduling(scheduling)
            .run_shapes(core, kernel, &[&[128, f], &[1, f]])
            .unwrap()
    };
    let device = Scheduling::default();
    let as_allocated = Scheduling::ProgramOrder { buffers: 1 };
    for (kernel, f, copies) in [
        (&scale_rows_512::KERNEL, 512u64, 0u64),
        (&scale_rows_1024::KERNEL, 1024, 2),
    ] {
        let s = time(kernel, f as usize, device, &mut core);
        // One bank: the copy out of PSUM does not run, the multiply reads PSUM (N cycles).
        // Two banks: the broadcast is copied to SBUF and the multiply reads two SBUF tiles
        // (2N cycles).
        assert_eq!(
            s.opcode_count(Engine::Vector, Opcode::TensorCopy),
            copies,
            "F = {f}"
        );
        let tt = s
            .records()
            .iter()
            .find(|r| r.kind == Kind::Instruction && r.opcode == Opcode::TensorTensor)
            .unwrap();
        let n = if copies == 0 { f } else { 2 * f };
        // And the 100-cycle static overhead of every Vector instruction.
        assert_eq!(tt.end - tt.start, trn1_vector_ps(n + 100), "F = {f}");
        // It still waits for the broadcast's matmul.
        let mm = s
            .records()
            .iter()
            .filter(|r| r.kind == Kind::MultiplyMoving)
            .map(|r| r.done)
            .max()
            .unwrap();
        assert!(tt.start >= mm, "F = {f}");
        // The program as allocated runs every copy.
        let p = time(kernel, f as usize, as_allocated, &mut core);
        assert_eq!(
            p.opcode_count(Engine::Vector, Opcode::TensorCopy),
            f / 512,
            "F = {f}"
        );
    }
    // And the kernel computes the product either way.
    let x = nki::ndarray::Array2::from_shape_fn((128, 512), |(p, j)| (p as f32) - (j as f32) / 7.0);
    let row = nki::ndarray::Array2::from_shape_fn((1, 512), |(_, j)| 0.5 + j as f32);
    let out = scale_rows_512::host(&mut core, x.view(), row.view()).unwrap();
    for ((p, j), &v) in out.indexed_iter() {
        assert_eq!(v, x[[p, j]] * row[[0, j]]);
    }
}

/// `acc += t` of two SBUF tiles.
#[kernel]
fn accumulate_tile(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let acc = zeros([128, 512], f32, Sbuf);
    let t = load(x[[i_p, i_f]]);
    acc[[i_p, i_f]] += t;
    store(out[[i_p, i_f]], acc[[i_p, i_f]]);
    out
}

#[test]
fn an_accumulating_copy_costs_a_tensor_tensor_of_two_inputs() {
    let mut core = NeuronCore::new(Target::Trn1);
    let s = Timing::new()
        .detail(Detail::Trace)
        .run_shapes(&mut core, &accumulate_tile::KERNEL, &[&[128, 512]])
        .unwrap();
    let acc = s
        .records()
        .iter()
        .find(|r| r.kind == Kind::Instruction && r.opcode == Opcode::TensorCopy)
        .unwrap();
    // NKI's `+=`: a tensor_tensor add of two fp32 SBUF tiles, 2N cycles, and the static
    // overhead.
    assert_eq!(acc.end - acc.start, trn1_vector_ps(1024 + 100));
}

/// Each iteration loads a tile, takes its exp and stores it: the next iteration's load is
/// triggered long before this iteration's store.
#[kernel]
fn exp_tiles(x: Hbm<f32, 512, 512>) -> Hbm<f32, 512, 512> {
    let out = ndarray([512, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    for k in affine_range(4) {
        let t = load(x[[k * 128 + i_p, i_f]]);
        let y = exp(t);
        store(out[[k * 128 + i_p, i_f]], y);
    }
    out
}

#[test]
fn dma_engines_serve_transfers_in_trigger_order_on_the_device() {
    let mut core = NeuronCore::new(Target::Trn1);
    let first_data = |scheduling, core: &mut NeuronCore| {
        let s = Timing::new()
            .detail(Detail::Trace)
            .scheduling(scheduling)
            .run_shapes(core, &exp_tiles::KERNEL, &[&[512, 512]])
            .unwrap();
        let of = |opcode| -> Vec<u64> {
            s.records()
                .iter()
                .filter(|r| r.kind == Kind::DmaTransfer && r.opcode == opcode)
                .map(|r| r.start + r.wait)
                .collect()
        };
        (of(Opcode::Load), of(Opcode::Store))
    };
    let (loads, stores) = first_data(Scheduling::default(), &mut core);
    assert_eq!((loads.len(), stores.len()), (4, 4));
    // Iteration 1's load moves its data before iteration 0's store: the engines take it in
    // the idle time before the store, as the device's queues would. (Later loads find no gap
    // wide enough: a transfer already placed is never moved, so the gaps approximate the
    // queues' trigger order only where the engines were idle.)
    assert!(
        loads[1] < stores[0],
        "load 1 at {} ps, store 0 at {} ps",
        loads[1],
        stores[0]
    );
    // In program order on one Sync queue, each load waits for the store before it.
    let (loads, stores) = first_data(Scheduling::ProgramOrder { buffers: 4 }, &mut core);
    for k in 0..3 {
        assert!(loads[k + 1] > stores[k]);
    }
}

/// Two nested loops: a fill the same in every iteration of both, and a scale of a tile the
/// outer loop loads.
#[kernel]
fn nested_invariants(x: Hbm<f32, 4, 128, 512>) -> Hbm<f32, 4, 128, 512> {
    let out = ndarray([4, 128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    for i in sequential_range(4) {
        let t = load(x[[i, i_p, i_f]]);
        for _j in sequential_range(3) {
            let half = full([128, 512], 0.5, f32, Sbuf);
            let scaled = tensor_scalar(data = t, op0 = multiply, operand0 = 2.0);
            let y = tensor_tensor(scaled, half, op = add);
            store(out[[i, i_p, i_f]], y);
        }
    }
    out
}

#[test]
fn loop_invariant_instructions_leave_every_loop_they_do_not_depend_on() {
    let mut core = NeuronCore::new(Target::Trn1);
    let s = Timing::new()
        .run_shapes(&mut core, &nested_invariants::KERNEL, &[&[4, 128, 512]])
        .unwrap();
    // The fill depends on no loop: it runs once in the 12 iterations. The scale reads the
    // outer loop's tile: once per outer iteration. The add reads the scale, which an
    // instruction of the inner loop's body writes (the rule does not chain through hoisted
    // instructions): 12 times.
    assert_eq!(s.opcode_count(Engine::Vector, Opcode::Memset), 1);
    assert_eq!(s.opcode_count(Engine::Vector, Opcode::TensorScalar), 4);
    assert_eq!(s.opcode_count(Engine::Vector, Opcode::TensorTensor), 12);
    assert_eq!(s.not_run(), 11 + 8);
    // A run that computes sees every instruction and leaves out the same ones (a timing-only
    // run counts them without resolving their operands: `Observer::needs`).
    let computed = Timing::new()
        .mode(Mode::Compute)
        .run_shapes(&mut core, &nested_invariants::KERNEL, &[&[4, 128, 512]])
        .unwrap();
    assert_eq!(computed.not_run(), s.not_run());
    assert_eq!(computed.instructions(), s.instructions());
    assert_eq!(computed.latency_us().to_bits(), s.latency_us().to_bits());
    // As allocated and ordered, every one runs.
    let p = Timing::new()
        .scheduling(Scheduling::ProgramOrder { buffers: 1 })
        .run_shapes(&mut core, &nested_invariants::KERNEL, &[&[4, 128, 512]])
        .unwrap();
    assert_eq!(p.opcode_count(Engine::Vector, Opcode::Memset), 12);
    assert_eq!(p.opcode_count(Engine::Vector, Opcode::TensorScalar), 12);
    assert_eq!(p.not_run(), 0);
}

/// `rand` and `dropout` run on the Vector engine; in a loop they are not loop-invariant (each
/// call draws new numbers), so the model runs them in every iteration.
#[kernel]
fn draws_per_iteration(x: Hbm<f32, 128, 512>) -> Hbm<f32, 4, 128, 512> {
    let out = ndarray([4, 128, 512], f32, SharedHbm);
    let t = load(x[..]);
    for i in affine_range(4) {
        let r = rand([128, 512], f32);
        let d = dropout(t, 0.5);
        let y = add(r, d);
        store(out[[i, 0..128, 0..512]], y);
    }
    out
}

#[test]
fn random_draws_stay_in_their_loop_on_the_vector_engine() {
    let mut core = NeuronCore::new(Target::Trn1);
    let s = Timing::new()
        .run_shapes(&mut core, &draws_per_iteration::KERNEL, &[&[128, 512]])
        .unwrap();
    assert_eq!(s.opcode_count(Engine::Vector, Opcode::Rand), 4);
    assert_eq!(s.opcode_count(Engine::Vector, Opcode::Dropout), 4);
}

/// NKI 0.6's XORWOW instructions in a loop: each `rng` draws new bits and each
/// `rand_get_state` reads a state the draws changed, so neither is loop-invariant; they run on
/// the engine named, every iteration.
#[kernel(target = trn2)]
fn xorwow_per_iteration(st: Hbm<u32, 128, 6>) -> (Hbm<u32, 4, 128, 64>, Hbm<u32, 4, 128, 6>) {
    let o1 = ndarray([4, 128, 64], u32, SharedHbm);
    let o2 = ndarray([4, 128, 6], u32, SharedHbm);
    let s = load(st[..]);
    rand_set_state(s);
    for i in affine_range(4) {
        let d = ndarray([128, 64], u32, Sbuf);
        rng(d, engine = gpsimd);
        let v = ndarray([128, 64], u32, Sbuf);
        rng(v, engine = vector);
        let g = ndarray([128, 6], u32, Sbuf);
        rand_get_state(g);
        store(o1[[i, 0..128, 0..64]], d);
        store(o1[[i, 0..128, 0..64]], v);
        store(o2[[i, 0..128, 0..6]], g);
    }
    (o1, o2)
}

#[test]
fn xorwow_draws_and_state_reads_stay_in_their_loop_on_their_engines() {
    let mut core = NeuronCore::new(Target::Trn2);
    let s = Timing::new()
        .run_shapes(&mut core, &xorwow_per_iteration::KERNEL, &[&[128, 6]])
        .unwrap();
    assert_eq!(s.opcode_count(Engine::GpSimd, Opcode::Rng), 4);
    assert_eq!(s.opcode_count(Engine::Vector, Opcode::Rng), 4);
    assert_eq!(s.opcode_count(Engine::GpSimd, Opcode::RandGetState), 4);
    assert_eq!(s.opcode_count(Engine::GpSimd, Opcode::RandSetState), 1);
}
