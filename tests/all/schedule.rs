//! Schedule-independence checking (`NeuronCore::with_schedule_check`): kernels whose result
//! depends on program order — a memset after a matmul into the same PSUM tile, a PSUM drain
//! sunk into the K loop, a tile reused across `affine_range` iterations — fail, naming the two
//! instructions whose order changed the result; every tutorial kernel of the examples passes,
//! on random inputs, with the same bits as a plain launch.

use crate::examples::autotune_matmul;
use crate::examples::average_pool2d;
use crate::examples::data_movement;
use crate::examples::exp;
use crate::examples::fused_attention;
use crate::examples::fused_matmul_bias_gelu;
use crate::examples::kernel_optimization_v2;
use crate::examples::layernorm;
use crate::examples::mamba;
use crate::examples::mamba_tutorial_shapes;
use crate::examples::matmul_basic;
use crate::examples::matmul_block_free_dimension;
use crate::examples::matmul_fully_optimized;
use crate::examples::matmul_hoist_load;
use crate::examples::matmul_tiled;
use crate::examples::maxpool2d;
use crate::examples::rmsnorm;
use crate::examples::softmax;
use crate::examples::tensor_add;
use crate::examples::transpose2d;

use fused_attention::common;
use nki::LaunchError;
use nki::ndarray::IxDyn;
use nki::prelude::*;
use nki::strict::{Reordering, ScheduleCheck, ScheduleError};
use nki::{DType, HbmIn, HbmOut, Kernel, LaunchGrid, Target};

/// The memset-after-matmul pattern: each iteration accumulates into the PSUM tile, drains
/// it, and zeroes it for the next iteration. In program order each iteration sees a zeroed
/// tile; the device may run the next iteration's matmul before this one's memset.
#[kernel]
fn zeroes_psum_after_the_matmul(
    w: Hbm<f32, 128, 128>,
    x: Hbm<f32, 256, 512>,
) -> Hbm<f32, 256, 512> {
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

/// The same with a PSUM tile per iteration: schedule-independent.
#[kernel]
fn zeroes_psum_per_iteration(w: Hbm<f32, 128, 128>, x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let wt = load(w[[0..128, 0..128]]);
    for i in affine_range(2) {
        let ps = zeros([128, 512], f32, Psum);
        let t = load(x[[i * 128..i * 128 + 128, 0..512]]);
        ps += matmul(wt, t, transpose_x = true);
        let r = copy(ps, f32);
        store(out[[i * 128..i * 128 + 128, 0..512]], r);
    }
    out
}

/// A PSUM drain (and its store) sunk into the K loop: each iteration copies out the partial
/// sum and stores it to the same rows; in program order the last store holds the full sum.
/// (Over a symbolic trip count: with a fixed one the compiler refuses the stores.)
#[kernel]
fn drains_inside_the_k_loop(a: Hbm<f32, K, 128>, b: Hbm<f32, K, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let ps = zeros([128, 512], f32, Psum);
    for k in affine_range(K / 128) {
        let lt = load(a[[k * 128..k * 128 + 128, 0..128]]);
        let rt = load(b[[k * 128..k * 128 + 128, 0..512]]);
        ps += matmul(lt, rt, transpose_x = true);
        let r = copy(ps, f32);
        store(out[[0..128, 0..512]], r);
    }
    out
}

/// The drain after the K loop, as the tutorials write it: schedule-independent.
#[kernel]
fn drains_after_the_k_loop(a: Hbm<f32, K, 128>, b: Hbm<f32, K, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let ps = zeros([128, 512], f32, Psum);
    for k in affine_range(K / 128) {
        let lt = load(a[[k * 128..k * 128 + 128, 0..128]]);
        let rt = load(b[[k * 128..k * 128 + 128, 0..512]]);
        ps += matmul(lt, rt, transpose_x = true);
    }
    let r = copy(ps, f32);
    store(out[[0..128, 0..512]], r);
    out
}

/// The aws-neuron-sdk#1045 pattern: one tile, declared outside the loop, that every iteration
/// loads into, scales and stores from.
#[kernel]
fn reuses_a_tile_across_iterations(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let buf = ndarray([128, 512], f32, Sbuf);
    for i in affine_range(2) {
        buf[[0..128, 0..512]] = load(x[[i * 128..i * 128 + 128, 0..512]]);
        let y = multiply(buf, 2.0);
        store(out[[i * 128..i * 128 + 128, 0..512]], y);
    }
    out
}

/// The same over a `sequential_range`: ordered, so schedule-independent.
#[kernel]
fn reuses_a_tile_in_order(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    let buf = ndarray([128, 512], f32, Sbuf);
    for i in sequential_range(2) {
        buf[[0..128, 0..512]] = load(x[[i * 128..i * 128 + 128, 0..512]]);
        let y = multiply(buf, 2.0);
        store(out[[i * 128..i * 128 + 128, 0..512]], y);
    }
    out
}

/// Loads into its per-iteration tile in the first iteration only, and stores it in each: the
/// second iteration reads what the first left in the tile's one buffer as allocated.
#[kernel]
fn reads_what_an_earlier_iteration_left(x: Hbm<f32, 256, 512>) -> Hbm<f32, 256, 512> {
    let out = ndarray([256, 512], f32, SharedHbm);
    for i in affine_range(2) {
        let t = ndarray([128, 512], f32, Sbuf);
        t[[0..128, 0..512]] = load(x[[0..128, 0..512]], mask = i < 1);
        store(out[[i * 128..i * 128 + 128, 0..512]], t);
    }
    out
}

/// Every instance of its grid stores its own rows of `x` to the same 128 rows of the output.
#[kernel]
fn instances_store_the_same_rows(x: Hbm<f32, 256, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let ip = arange(128).p();
    let jf = arange(512).x();
    let t = load(x[[program_id(0) * 128 + ip, jf]]);
    store(out[[ip, jf]], t);
    out
}

/// A host tensor of any element type the kernels use.
enum Data {
    F32(Vec<f32>),
    Bf16(Vec<bf16>),
    F16(Vec<f16>),
    I8(Vec<i8>),
}

impl Data {
    /// `n` elements of `dtype`, uniform in [-2, 2) (or all of `i8`) from `seed`.
    fn random(dtype: DType, n: usize, seed: u64) -> Data {
        let v = common::uniform(IxDyn(&[n]), seed, -2.0, 2.0);
        let v = v.iter().copied();
        match dtype {
            DType::F32 => Data::F32(v.map(|x| x as f32).collect()),
            DType::Bf16 => Data::Bf16(v.map(bf16::from_f64).collect()),
            DType::F16 => Data::F16(v.map(f16::from_f64).collect()),
            DType::I8 => Data::I8(v.map(|x| (x * 60.0) as i8).collect()),
            other => panic!("no test data of {other:?}"),
        }
    }

    fn arg(&self, shape: &[usize]) -> HbmIn<'_> {
        match self {
            Data::F32(v) => HbmIn::new(v, shape),
            Data::Bf16(v) => HbmIn::new(v, shape),
            Data::F16(v) => HbmIn::new(v, shape),
            Data::I8(v) => HbmIn::new(v, shape),
        }
        .unwrap()
    }

    fn arg_mut(&mut self, shape: &[usize]) -> HbmOut<'_> {
        match self {
            Data::F32(v) => HbmOut::new(v, shape),
            Data::Bf16(v) => HbmOut::new(v, shape),
            Data::F16(v) => HbmOut::new(v, shape),
            Data::I8(v) => HbmOut::new(v, shape),
        }
        .unwrap()
    }

    fn bits(&self) -> Vec<u8> {
        match self {
            Data::F32(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
            Data::Bf16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
            Data::F16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
            Data::I8(v) => v.iter().map(|&x| x as u8).collect(),
        }
    }
}

/// Launches `kernel` over `grid` on `core` with random inputs of `shapes` (seeded), and
/// returns its outputs' bits, or the launch's error.
fn launch(
    core: &mut NeuronCore,
    kernel: &Kernel<'_>,
    grid: LaunchGrid,
    shapes: &[&[usize]],
) -> Result<Vec<Vec<u8>>, LaunchError> {
    let p = kernel.program();
    let ins: Vec<Data> = p
        .inputs()
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(i, (d, s))| Data::random(d.dtype, s.iter().product(), 11 + i as u64))
        .collect();
    let args: Vec<HbmIn<'_>> = ins.iter().zip(shapes).map(|(d, s)| d.arg(s)).collect();
    let syms = kernel.bind_inputs_on(&grid, &args)?;
    let out_shapes: Vec<Vec<usize>> = (0..p.outputs().len())
        .map(|i| kernel.output_shape(i, &syms).unwrap().as_slice().to_vec())
        .collect();
    // Outputs start as NaN-ish patterns: a kernel must write what it returns.
    let mut outs: Vec<Data> = p
        .outputs()
        .iter()
        .zip(&out_shapes)
        .enumerate()
        .map(|(i, (d, s))| Data::random(d.dtype, s.iter().product(), 97 + i as u64))
        .collect();
    {
        let mut out_args: Vec<HbmOut<'_>> = outs
            .iter_mut()
            .zip(&out_shapes)
            .map(|(d, s)| d.arg_mut(s))
            .collect();
        let bound = kernel.bind_on(grid, &args, &mut out_args)?;
        core.execute(bound)?;
    }
    Ok(outs.iter().map(Data::bits).collect())
}

/// A core that checks schedule independence with the default check.
fn checking() -> NeuronCore {
    NeuronCore::default().with_schedule_check(Some(ScheduleCheck::DEFAULT))
}

/// The [`ScheduleError`] of a checked, non-strict launch of `kernel` (strict mode would
/// refuse most of these kernels first, for the races it sees in program order).
fn schedule_error(kernel: &Kernel<'_>, shapes: &[&[usize]]) -> ScheduleError {
    let mut core = checking().with_strict(false);
    match launch(&mut core, kernel, LaunchGrid::SINGLE, shapes) {
        Err(LaunchError::Schedule(e)) => *e,
        other => panic!("{}: {:?}", kernel.program().name(), other.map(|_| ())),
    }
}

/// Whether a strict launch of `kernel` without the check refuses it (for what it sees in
/// program order).
fn strict_refuses(kernel: &Kernel<'_>, shapes: &[&[usize]]) -> bool {
    let mut core = NeuronCore::default().with_strict(true);
    matches!(
        launch(&mut core, kernel, LaunchGrid::SINGLE, shapes),
        Err(LaunchError::Exec(_))
    )
}

/// The instruction of `kernel` whose mnemonic is `mnemonic` (the only one).
fn instr(kernel: &Kernel<'_>, mnemonic: &str) -> usize {
    let found: Vec<usize> = kernel
        .program()
        .instrs()
        .iter()
        .enumerate()
        .filter(|(_, i)| i.mnemonic() == mnemonic)
        .map(|(k, _)| k)
        .collect();
    assert_eq!(found.len(), 1, "{mnemonic}: {found:?}");
    found[0]
}

#[test]
fn a_memset_after_a_matmul_into_the_same_psum_tile_fails_naming_both() {
    let k = &zeroes_psum_after_the_matmul::KERNEL;
    let e = schedule_error(k, &[&[128, 128], &[256, 512]]);
    let msg = e.to_string();
    println!("{msg}");
    assert_eq!(e.kernel, "zeroes_psum_after_the_matmul", "{msg}");
    // The next iteration's matmul and this iteration's memset (or drain) of the PSUM tile,
    // which the program orders only through the loop's order.
    let matmul = instr(k, "nc_matmul");
    assert!([e.first.instr, e.second.instr].contains(&matmul), "{msg}");
    assert_ne!(e.first.loop_values, e.second.loop_values, "{msg}");
    assert!(matches!(e.how, Reordering::Exchanged { .. }), "{msg}");
    let (mm, other) = if e.first.instr == matmul {
        (&e.first, &e.second)
    } else {
        (&e.second, &e.first)
    };
    assert_eq!(mm.loop_values, [1], "{msg}");
    assert_eq!(other.loop_values, [0], "{msg}");
    assert!(["memset", "tensor_copy"].contains(&other.mnemonic), "{msg}");
    assert!(mm.line > 0 && other.line > 0, "{msg}");
    assert_eq!(e.output, "out", "{msg}");
    assert!(msg.contains("nc_matmul, line"), "{msg}");
    // A PSUM tile per iteration is schedule-independent, and computes the same bits.
    let shapes: &[&[usize]] = &[&[128, 128], &[256, 512]];
    let good = &zeroes_psum_per_iteration::KERNEL;
    let checked = launch(&mut checking(), good, LaunchGrid::SINGLE, shapes).unwrap();
    let plain = launch(
        &mut NeuronCore::default().with_strict(false),
        good,
        LaunchGrid::SINGLE,
        shapes,
    )
    .unwrap();
    assert_eq!(checked, plain);
}

#[test]
fn a_drain_sunk_into_the_k_loop_fails_naming_both() {
    let k = &drains_inside_the_k_loop::KERNEL;
    let shapes: &[&[usize]] = &[&[256, 128], &[256, 512]];
    let e = schedule_error(k, shapes);
    let msg = e.to_string();
    println!("{msg}");
    let pcs = [e.first.instr, e.second.instr];
    // Two iterations' stores, or an iteration's drain and the other's matmul.
    let store = instr(k, "store");
    let pair_ok = pcs == [store, store]
        || (pcs.contains(&instr(k, "nc_matmul")) && pcs.contains(&instr(k, "tensor_copy")));
    assert!(pair_ok, "{msg}");
    assert_ne!(e.first.loop_values, e.second.loop_values, "{msg}");
    // The drain after the loop passes.
    let good = &drains_after_the_k_loop::KERNEL;
    launch(&mut checking(), good, LaunchGrid::SINGLE, shapes).unwrap();
}

#[test]
fn a_tile_reused_across_affine_iterations_fails_naming_both() {
    let k = &reuses_a_tile_across_iterations::KERNEL;
    let shapes: &[&[usize]] = &[&[256, 512]];
    let e = schedule_error(k, shapes);
    let msg = e.to_string();
    println!("{msg}");
    // The second iteration's load into `buf` ran before the first iteration's read of it.
    assert_eq!(e.first.instr, instr(k, "tensor_scalar"), "{msg}");
    assert_eq!(e.first.loop_values, [0], "{msg}");
    assert_eq!(e.second.instr, instr(k, "load"), "{msg}");
    assert_eq!(e.second.loop_values, [1], "{msg}");
    assert!(msg.contains("load, line"), "{msg}");
    // The error is the same on a strict core: the check runs first.
    let mut strict = checking().with_strict(true);
    let err = launch(&mut strict, k, LaunchGrid::SINGLE, shapes).unwrap_err();
    assert!(matches!(err, LaunchError::Schedule(_)), "{err}");
    // Over a sequential_range the same kernel passes, with the plain launch's bits.
    let good = &reuses_a_tile_in_order::KERNEL;
    let checked = launch(&mut checking(), good, LaunchGrid::SINGLE, shapes).unwrap();
    let plain = launch(
        &mut NeuronCore::default().with_strict(false),
        good,
        LaunchGrid::SINGLE,
        shapes,
    )
    .unwrap();
    assert_eq!(checked, plain);
}

#[test]
fn a_loop_tile_read_before_its_iteration_writes_it_fails_under_rotation_naming_both() {
    let k = &reads_what_an_earlier_iteration_left::KERNEL;
    let shapes: &[&[usize]] = &[&[256, 512]];
    let e = schedule_error(k, shapes);
    let msg = e.to_string();
    println!("{msg}");
    assert_eq!(e.how, Reordering::Rotated { buffers: 4 }, "{msg}");
    // The first iteration's load wrote the buffer the second iteration's store reads.
    assert_eq!(
        (e.first.mnemonic, e.first.loop_values.as_slice()),
        ("load", &[0][..]),
        "{msg}"
    );
    assert_eq!(
        (e.second.mnemonic, e.second.loop_values.as_slice()),
        ("store", &[1][..]),
        "{msg}"
    );
    assert_eq!(e.element, 128 * 512, "{msg}");
    // With one buffer per tile nothing rotates, and no order changes the result.
    let mut one = NeuronCore::default()
        .with_strict(false)
        .with_schedule_check(Some(ScheduleCheck::DEFAULT.with_buffers(1)));
    launch(&mut one, k, LaunchGrid::SINGLE, shapes).unwrap();
}

#[test]
fn spmd_instances_storing_the_same_elements_fail_naming_both() {
    let k = &instances_store_the_same_rows::KERNEL;
    let mut core = checking().with_strict(false);
    let e = match launch(&mut core, k, LaunchGrid::from([2]), &[&[256, 512]]) {
        Err(LaunchError::Schedule(e)) => *e,
        other => panic!("{:?}", other.map(|_| ())),
    };
    let msg = e.to_string();
    // The two instances' stores: on two cores, either may finish last.
    assert_eq!(
        (e.first.mnemonic, e.second.mnemonic),
        ("store", "store"),
        "{msg}"
    );
    assert_eq!(e.first.program_ids, [0, 0, 0], "{msg}");
    assert_eq!(e.second.program_ids, [1, 0, 0], "{msg}");
    // One instance alone is fine.
    launch(&mut checking(), k, LaunchGrid::SINGLE, &[&[256, 512]]).unwrap();
}

#[test]
fn strict_mode_refuses_the_planted_kernels_too() {
    let two: &[&[usize]] = &[&[256, 128], &[256, 512]];
    let mm: &[&[usize]] = &[&[128, 128], &[256, 512]];
    let one: &[&[usize]] = &[&[256, 512]];
    assert!(strict_refuses(&zeroes_psum_after_the_matmul::KERNEL, mm));
    assert!(strict_refuses(&drains_inside_the_k_loop::KERNEL, two));
    assert!(strict_refuses(
        &reuses_a_tile_across_iterations::KERNEL,
        one
    ));
    assert!(strict_refuses(
        &reads_what_an_earlier_iteration_left::KERNEL,
        one
    ));
    assert!(!strict_refuses(&zeroes_psum_per_iteration::KERNEL, mm));
    assert!(!strict_refuses(&drains_after_the_k_loop::KERNEL, two));
    assert!(!strict_refuses(&reuses_a_tile_in_order::KERNEL, one));
}

#[test]
fn the_check_leaves_memories_and_the_launch_as_without_it() {
    // A failing check writes nothing: the outputs keep what they held.
    let k = &reuses_a_tile_across_iterations::KERNEL;
    let x: Vec<f32> = (0..256 * 512).map(|i| i as f32).collect();
    let mut out = vec![7.0f32; 256 * 512];
    let ins = [HbmIn::new(&x, &[256, 512]).unwrap()];
    {
        let mut outs = [HbmOut::new(&mut out, &[256, 512]).unwrap()];
        let bound = k.bind(&ins, &mut outs).unwrap();
        let mut core = checking().with_strict(false);
        assert!(matches!(core.execute(bound), Err(LaunchError::Schedule(_))));
    }
    assert!(out.iter().all(|&v| v == 7.0));
    // The check compares values: on an input whose two halves are equal, the iterations'
    // race computes the same bits either way, and the launch passes.
    let same = vec![1.5f32; 256 * 512];
    let ins = [HbmIn::new(&same, &[256, 512]).unwrap()];
    {
        let mut outs = [HbmOut::new(&mut out, &[256, 512]).unwrap()];
        let bound = k.bind(&ins, &mut outs).unwrap();
        checking().with_strict(false).execute(bound).unwrap();
    }
    assert!(out.iter().all(|&v| v == 3.0));
    // Off by default.
    assert_eq!(NeuronCore::default().schedule_check(), None);
}

/// Runs `kernel` with the check (on a strict core) and plainly: the check must pass and the
/// outputs must be the plain launch's bits.
fn passes(
    name: &str,
    kernel: &Kernel<'_>,
    grid: LaunchGrid,
    shapes: &[&[usize]],
    failures: &mut Vec<String>,
) {
    passes_on(Target::Trn1, name, kernel, grid, shapes, failures);
}

/// [`passes`] on cores of generation `target`.
fn passes_on(
    target: Target,
    name: &str,
    kernel: &Kernel<'_>,
    grid: LaunchGrid,
    shapes: &[&[usize]],
    failures: &mut Vec<String>,
) {
    let mut core = NeuronCore::new(target)
        .with_strict(true)
        .with_schedule_check(Some(ScheduleCheck::DEFAULT));
    let checked = launch(&mut core, kernel, grid, shapes);
    let mut plain_core = NeuronCore::new(target).with_strict(false);
    let plain = launch(&mut plain_core, kernel, grid, shapes);
    match (checked, plain) {
        (Ok(c), Ok(p)) if c == p => {}
        (Ok(_), Ok(_)) => failures.push(format!("{name}: checked outputs differ from plain")),
        (Err(e), _) | (_, Err(e)) => failures.push(format!("{name}: {e}")),
    }
}

#[test]
fn every_tutorial_kernel_is_schedule_independent() {
    let one = LaunchGrid::SINGLE;
    let rows = 300; // masked last tiles
    let mut f = Vec::new();
    let ln: &[&[usize]] = &[&[rows, 1024], &[1024], &[1024]];
    let scan: &[&[usize]] = &[
        &[1, 256, 500],
        &[1, 256, 500],
        &[256, 16],
        &[1, 16, 500],
        &[1, 16, 500],
    ];
    let scan_v3: &[&[usize]] = &[
        &[1, 256, 1024],
        &[1, 256, 1024],
        &[256, 16],
        &[1, 16, 1024],
        &[1, 16, 1024],
    ];
    let cases: &[(&str, &Kernel<'static>, LaunchGrid, &[&[usize]])] = &[
        (
            "softmax",
            &softmax::nki_softmax_kernel_512::KERNEL,
            one,
            &[&[rows, 512]],
        ),
        (
            "rmsnorm",
            &rmsnorm::nki_rmsnorm_kernel_512::KERNEL,
            one,
            &[&[rows, 512], &[512]],
        ),
        (
            "layernorm v1",
            &layernorm::nki_layernorm_kernel_v1_1024::KERNEL,
            one,
            ln,
        ),
        (
            "layernorm v2",
            &layernorm::nki_layernorm_kernel_v2_1024::KERNEL,
            one,
            ln,
        ),
        (
            "avgpool",
            &average_pool2d::tensor_avgpool_kernel_9x12_pool3::KERNEL,
            one,
            &[&[130, 9, 12]],
        ),
        (
            "maxpool",
            &maxpool2d::tensor_maxpool_kernel_9x12_pool3::KERNEL,
            one,
            &[&[130, 9, 12]],
        ),
        (
            "transpose2d",
            &transpose2d::tensor_transpose2d_kernel_64x64::KERNEL,
            one,
            &[&[130, 4096]],
        ),
        (
            "transpose2d 3x4",
            &transpose2d::tensor_transpose2d_kernel_3x4::KERNEL,
            one,
            &[&[5, 12]],
        ),
        ("mamba v1", &mamba::mamba_v1::KERNEL, one, scan),
        ("mamba v2", &mamba::mamba_v2::KERNEL, one, scan),
        ("mamba v3", &mamba::mamba_v3::KERNEL, one, scan_v3),
        (
            "matmul basic",
            &matmul_basic::matmul_basic::KERNEL,
            one,
            &[&[128, 128], &[128, 512]],
        ),
        (
            "matmul tiled",
            &matmul_tiled::matmul_tiled::KERNEL,
            one,
            &[&[256, 256], &[256, 1024]],
        ),
        (
            "matmul hoisted loads",
            &matmul_hoist_load::nki_matmul_hoist_load_::KERNEL,
            one,
            &[&[256, 256], &[256, 512]],
        ),
        (
            "matmul blocked free dimension",
            &matmul_block_free_dimension::nki_matmul_block_free_dimension_::KERNEL,
            one,
            &[&[256, 512], &[256, 2048]],
        ),
        (
            "matmul fully optimised",
            &matmul_fully_optimized::nki_matmul_fully_optimized_small::KERNEL,
            one,
            &[&[1024, 512], &[1024, 1024]],
        ),
        (
            "fused matmul, bias, gelu",
            &fused_matmul_bias_gelu::fused::KERNEL,
            one,
            &[&[256, 256], &[256, 512], &[256, 1]],
        ),
        (
            "fused attention",
            &fused_attention::fused_self_attn_for_sd_small_head_size_d64::KERNEL,
            one,
            &[&[256, 64], &[256, 64], &[256, 64]],
        ),
        (
            "fused attention, causal",
            &fused_attention::fused_self_attn_for_sd_small_head_size_d64_causal::KERNEL,
            one,
            &[&[256, 64], &[256, 64], &[256, 64]],
        ),
        ("exp", &exp::exp_f32_512::KERNEL, one, &[&[300, 512]]),
        (
            "copy rows",
            &data_movement::copy_bf16_to_f32::KERNEL,
            one,
            &[&[256, 4096]],
        ),
        (
            "tensor add over a grid",
            &tensor_add::tensor_add_bf16::KERNEL,
            LaunchGrid::from(tensor_add::grid_for(256, 1024)),
            &[&[256, 1024], &[256, 1024]],
        ),
    ];
    for &(name, kernel, grid, shapes) in cases {
        passes(name, kernel, grid, shapes, &mut f);
    }
    assert!(f.is_empty(), "{}", f.join("\n"));
}

#[test]
fn every_other_ported_kernel_is_schedule_independent() {
    let one = LaunchGrid::SINGLE;
    let mut f = Vec::new();
    let mm: &[&[usize]] = &[&[256, 256], &[256, 512]];
    let scan: &[&[usize]] = &[
        &[1, 256, 512],
        &[1, 256, 512],
        &[256, 16],
        &[1, 16, 512],
        &[1, 16, 512],
    ];
    let scan_1024: &[&[usize]] = &[
        &[1, 256, 1024],
        &[1, 256, 1024],
        &[256, 16],
        &[1, 16, 1024],
        &[1, 16, 1024],
    ];
    passes_on(
        Target::Trn2,
        "kernel optimisation v2 (Trn2)",
        &kernel_optimization_v2::matrix_multiply_kernel::KERNEL,
        one,
        &[&[512, 256], &[512, 1024]],
        &mut f,
    );
    let cases: &[(&str, &Kernel<'static>, LaunchGrid, &[&[usize]])] = &[
        (
            "avgpool 6x6 f16",
            &average_pool2d::tensor_avgpool_kernel_6x6::KERNEL,
            one,
            &[&[130, 6, 6]],
        ),
        (
            "maxpool 6x6 f16",
            &maxpool2d::tensor_maxpool_kernel_6x6::KERNEL,
            one,
            &[&[130, 6, 6]],
        ),
        (
            "copy f32",
            &data_movement::copy_f32::KERNEL,
            one,
            &[&[384, 4096]],
        ),
        (
            "exp bf16",
            &exp::exp_bf16_4096::KERNEL,
            one,
            &[&[130, 4096]],
        ),
        (
            "matmul only",
            &fused_matmul_bias_gelu::matmul_only::KERNEL,
            one,
            mm,
        ),
        (
            "bias only",
            &fused_matmul_bias_gelu::bias_only::KERNEL,
            one,
            &[&[256, 512], &[256, 1]],
        ),
        (
            "gelu only",
            &fused_matmul_bias_gelu::gelu_only::KERNEL,
            one,
            &[&[256, 512]],
        ),
        (
            "autotuned matmul m2 n1 k2",
            &autotune_matmul::mm_m2_n1_k2::KERNEL,
            one,
            &[&[512, 512], &[512, 1024]],
        ),
        (
            "fused attention d128",
            &fused_attention::fused_self_attn_for_sd_small_head_size_d128::KERNEL,
            one,
            &[&[256, 128], &[256, 128], &[256, 128]],
        ),
        (
            "mamba v1 512x256",
            &mamba_tutorial_shapes::mamba_v1_512x256::KERNEL,
            one,
            scan,
        ),
        (
            "mamba v2 1024",
            &mamba_tutorial_shapes::mamba_v2_1024::KERNEL,
            one,
            scan_1024,
        ),
        (
            "mamba v3 1024",
            &mamba_tutorial_shapes::mamba_v3_1024::KERNEL,
            one,
            scan_1024,
        ),
    ];
    for &(name, kernel, grid, shapes) in cases {
        passes(name, kernel, grid, shapes, &mut f);
    }
    assert!(f.is_empty(), "{}", f.join("\n"));
}
