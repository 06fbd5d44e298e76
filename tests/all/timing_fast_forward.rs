//! The loop and instance fast-forward of timing-only runs (`Timing::fast_forward`) against
//! timing every iteration and every instance: the whole schedule (total, counts and busy time
//! of every engine and DMA queue, opcodes, FLOPs, bytes, tiles' live ranges and buffers) and its
//! profile, bit for bit, on every tutorial kernel, the calibration cases, the autotuner's
//! candidates, random shapes and loops whose rotating buffers or block tiles move from one
//! iteration to the next, under each scheduling and generation; over launch grids (the SPMD
//! tutorial, instances whose work differs by program id, instances sharing HBM), and over grids
//! of 2^20 and more instances against the linear extrapolation of exact runs.

#![allow(dead_code)]

use crate::examples::autotune_matmul as autotune;
use crate::examples::average_pool2d as avgpool;
use crate::examples::calibration;
use crate::examples::exp;
use crate::examples::fused_attention;
use crate::examples::kernel_optimization_v2 as kopt;
use crate::examples::layernorm;
use crate::examples::mamba;
use crate::examples::mamba_tutorial_shapes as mamba_shapes;
use crate::examples::matmul_block_free_dimension as block_free_dimension;
use crate::examples::matmul_fully_optimized as fully_optimized;
use crate::examples::matmul_hoist_load as hoist_load;
use crate::examples::matmul_tiled as tiled;
use crate::examples::maxpool2d as maxpool;
use crate::examples::rmsnorm;
use crate::examples::softmax;
use crate::examples::tensor_add;
use crate::examples::transpose2d;

use nki::prelude::*;
use nki::timing::{Detail, Scheduling, Timing};

/// The schedulings compared: the device's, the program as allocated, and its rotation
/// what-if.
fn schedulings() -> [Scheduling; 3] {
    [
        Scheduling::default(),
        Scheduling::ProgramOrder { buffers: 1 },
        Scheduling::ProgramOrder { buffers: 2 },
    ]
}

/// Times `kernel` at `shapes` on `target` both ways under every scheduling and asserts the
/// schedules are the same; returns whether it launched.
fn same(name: &str, kernel: &Kernel<'static>, target: Target, shapes: &[Vec<usize>]) -> bool {
    same_on(name, kernel, target, shapes, LaunchGrid::SINGLE)
}

/// [`same`] over the launch grid `grid`.
fn same_on(
    name: &str,
    kernel: &Kernel<'static>,
    target: Target,
    shapes: &[Vec<usize>],
    grid: LaunchGrid,
) -> bool {
    let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let mut core = NeuronCore::new(target);
    for scheduling in schedulings() {
        let timing = Timing::new()
            .detail(Detail::Summary)
            .scheduling(scheduling)
            .grid(grid);
        let plain = timing
            .clone()
            .fast_forward(false)
            .run_shapes(&mut core, kernel, &shapes);
        let fast = timing.run_shapes(&mut core, kernel, &shapes);
        match (plain, fast) {
            (Ok(plain), Ok(fast)) => {
                assert_eq!(
                    format!("{plain:?}"),
                    format!("{fast:?}"),
                    "{name} {shapes:?} {target:?} {scheduling:?}: the schedules differ"
                );
                assert_eq!(
                    plain.profile().to_string(),
                    fast.profile().to_string(),
                    "{name} {shapes:?} {target:?} {scheduling:?}: the profiles differ"
                );
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "{name}: different refusals");
                return false;
            }
            (a, b) => panic!(
                "{name} {shapes:?}: one launched, one did not: {:?} / {:?}",
                a.err().map(|e| e.to_string()),
                b.err().map(|e| e.to_string())
            ),
        }
    }
    true
}

/// A small deterministic generator (LCG) for the random shapes.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn calibration_cases_and_held_out_checks() {
    for case in calibration::cases() {
        assert!(
            same(case.id, case.kernel, case.target, &case.shapes),
            "{}",
            case.id
        );
    }
    for (a, b) in calibration::held_out() {
        for c in [a, b] {
            let shapes = mamba_shapes::input_shapes(4096, c.seq_len).to_vec();
            assert!(same(c.id, c.kernel, Target::Trn1, &shapes), "{}", c.id);
        }
    }
}

#[test]
fn matmul_stages_at_random_shapes() {
    let stages: [(&str, &Kernel<'static>); 5] = [
        ("tiled", &tiled::matmul_tiled::KERNEL),
        ("hoist_load", &hoist_load::nki_matmul_hoist_load_::KERNEL),
        (
            "block_free_dimension",
            &block_free_dimension::nki_matmul_block_free_dimension_::KERNEL,
        ),
        (
            "fully_optimized",
            &fully_optimized::nki_matmul_fully_optimized_::KERNEL,
        ),
        (
            "fully_optimized_small",
            &fully_optimized::nki_matmul_fully_optimized_small::KERNEL,
        ),
    ];
    let mut rng = Lcg(7);
    let mut launched = 0;
    for round in 0..6 {
        let k = 128 * (1 + rng.below(24) as usize);
        let m = 128 * (1 + rng.below(16) as usize);
        let n = 512 * (1 + rng.below(8) as usize);
        let target = if round % 2 == 0 {
            Target::Trn1
        } else {
            Target::Trn2
        };
        for (name, kernel) in stages {
            if same(name, kernel, target, &[vec![k, m], vec![k, n]]) {
                launched += 1;
            }
        }
    }
    // Shapes the stages accept, so that each launches at several.
    for (k, m, n) in [(2048, 1024, 2048), (4096, 2048, 4096), (1024, 512, 1024)] {
        for (name, kernel) in stages {
            if same(name, kernel, Target::Trn1, &[vec![k, m], vec![k, n]]) {
                launched += 1;
            }
        }
    }
    assert!(launched >= 15, "only {launched} launches");
}

#[test]
fn autotune_candidates() {
    let mut launched = 0;
    for c in autotune::candidates() {
        if same(
            c.name,
            c.kernel,
            Target::Trn1,
            &[vec![2048, 1024], vec![2048, 2048]],
        ) {
            launched += 1;
        }
    }
    assert!(launched >= 10, "only {launched} candidates launched");
}

#[test]
fn mamba_at_random_shapes() {
    let mut rng = Lcg(11);
    let kernels: [(&str, &Kernel<'static>); 3] = [
        ("mamba_v1", &mamba::mamba_v1::KERNEL),
        ("mamba_v2", &mamba::mamba_v2::KERNEL),
        ("mamba_v3", &mamba::mamba_v3::KERNEL),
    ];
    let mut launched = 0;
    for _ in 0..3 {
        let channels = 128 * (1 + rng.below(6) as usize);
        let seq = 512 * (1 + rng.below(3) as usize);
        let shapes = mamba_shapes::input_shapes(channels, seq).to_vec();
        for (name, kernel) in kernels {
            if same(name, kernel, Target::Trn1, &shapes) {
                launched += 1;
            }
        }
    }
    assert!(launched >= 3, "only {launched} launches");
}

/// Row blocks of 3 tiles: an outer loop over blocks around an inner loop of 3 whose tiles
/// rotate (4 buffers under the device's scheduling), so that an outer iteration moves them by
/// 3 buffers and only every 4th comes back to the same ones: the outer loop is compared
/// buffer by buffer from where each tile is.
#[kernel]
fn row_blocks(x: Hbm<f32, R, 512>) -> Hbm<f32, R, 512> {
    let out = ndarray([R, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    for b in affine_range(R / 384) {
        for j in affine_range(3) {
            let t = load(x[[(b * 3 + j) * 128 + i_p, i_f]]);
            let y = exp(t);
            store(out[[(b * 3 + j) * 128 + i_p, i_f]], y);
        }
    }
    out
}

/// A running sum through a block tile: iteration `k` reads block `k` that iteration `k - 1`
/// wrote and writes block `k + 1`, so no two iterations touch the same cells the same way (the
/// loop must never be taken for one whose state only moves in time).
#[kernel]
fn running_sum(x: Hbm<f32, 1024, 512>) -> Hbm<f32, 1024, 512> {
    let out = ndarray([1024, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let blocks = zeros([128, 9, 512], f32, Sbuf);
    for k in sequential_range(8) {
        let t = load(x[[k * 128 + i_p, i_f]]);
        blocks[[i_p, k + 1, i_f]] = blocks[[i_p, k, i_f]] + t;
        store(out[[k * 128 + i_p, i_f]], blocks[[i_p, k + 1, i_f]]);
    }
    out
}

#[test]
fn loops_whose_buffers_or_blocks_move() {
    for rows in [384 * 8, 384 * 13, 384 * 3] {
        for target in [Target::Trn1, Target::Trn2] {
            assert!(
                same(
                    "row_blocks",
                    &row_blocks::KERNEL,
                    target,
                    &[vec![rows, 512]]
                ),
                "row_blocks {rows}"
            );
        }
    }
    assert!(same(
        "running_sum",
        &running_sum::KERNEL,
        Target::Trn1,
        &[vec![1024, 512]]
    ));
    // The matmul tutorial's shape, where the fully optimised stage's outer loop of 8 moves
    // its block tiles by 8 buffers of 3 (`tests/all/timing.rs` times it at others).
    assert!(same(
        "fully_optimized",
        &fully_optimized::nki_matmul_fully_optimized_::KERNEL,
        Target::Trn1,
        &[vec![8192, 4096], vec![8192, 8192]]
    ));
}

#[test]
fn other_tutorials() {
    let cases: Vec<(&str, &Kernel<'static>, Target, Vec<Vec<usize>>)> = vec![
        (
            "kopt",
            &kopt::matrix_multiply_kernel::KERNEL,
            Target::Trn2,
            vec![vec![1024, 512], vec![1024, 1024]],
        ),
        (
            "rmsnorm",
            &rmsnorm::nki_rmsnorm_kernel_512::KERNEL,
            Target::Trn1,
            vec![vec![1000, 512], vec![512]],
        ),
        (
            "softmax",
            &softmax::nki_softmax_kernel_512::KERNEL,
            Target::Trn1,
            vec![vec![1000, 512]],
        ),
        (
            "layernorm_v1",
            &layernorm::nki_layernorm_kernel_v1_1024::KERNEL,
            Target::Trn1,
            vec![vec![700, 1024], vec![1024], vec![1024]],
        ),
        (
            "layernorm_v2",
            &layernorm::nki_layernorm_kernel_v2_1024::KERNEL,
            Target::Trn1,
            vec![vec![700, 1024], vec![1024], vec![1024]],
        ),
        (
            "exp",
            &exp::exp_f32_512::KERNEL,
            Target::Trn1,
            vec![vec![1000, 512]],
        ),
        (
            "avgpool",
            &avgpool::tensor_avgpool_kernel_512::KERNEL,
            Target::Trn1,
            vec![vec![128, 512, 512]],
        ),
        (
            "maxpool",
            &maxpool::tensor_maxpool_kernel_512::KERNEL,
            Target::Trn1,
            vec![vec![128, 512, 512]],
        ),
        (
            "transpose2d",
            &transpose2d::tensor_transpose2d_kernel_64x64::KERNEL,
            Target::Trn1,
            vec![vec![128, 4096]],
        ),
        (
            "attention",
            &fused_attention::fused_self_attn_for_sd_small_head_size_d64::KERNEL,
            Target::Trn1,
            vec![vec![1024, 64], vec![1024, 64], vec![1024, 64]],
        ),
        (
            "attention_causal",
            &fused_attention::fused_self_attn_for_sd_small_head_size_d128_causal::KERNEL,
            Target::Trn1,
            vec![vec![1024, 128], vec![1024, 128], vec![1024, 128]],
        ),
    ];
    for (name, kernel, target, shapes) in cases {
        assert!(same(name, kernel, target, &shapes), "{name} did not launch");
    }
}

/// One `[1, 64]` row per instance of a grid of one axis: `out[i] = exp(x[i]) · 2`, `i` the
/// program id.
#[kernel]
fn rows_per_instance(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    exp_doubled_row(x, out, program_id(0));
    out
}

/// `out[i] = exp(x[i]) · 2` for the row `i`.
#[helper]
fn exp_doubled_row(x: Tensor, out: Tensor, i: Index) {
    let (i_p, i_f) = mgrid![0..1, 0..64];
    let t = load(x[[i + i_p, i_f]]);
    let e = exp(t);
    let y = multiply(e, 2.0);
    store(out[[i + i_p, i_f]], y);
}

/// [`rows_per_instance`] over a grid of three axes of at most `[_, 32, 32]`: row
/// `1024 · program_id(0) + 32 · program_id(1) + program_id(2)`.
#[kernel]
fn rows_per_instance_3d(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    let i = program_id(0) * 1024 + program_id(1) * 32 + program_id(2);
    exp_doubled_row(x, out, i);
    out
}

/// Instance `k` works on the first `16 · (k + 1)` columns of its `[128, 512]` block only (a
/// mask on its program id): the instances differ in work (the first 32 of them; all 512
/// columns from then on) and are timed one by one.
#[kernel]
fn work_by_program_id(x: Hbm<f32, N, 512>) -> Hbm<f32, N, 512> {
    let out = ndarray([N, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let k = program_id(0);
    let rows = k * 128 + i_p;
    let t = load(x[[rows, i_f]], mask = i_f < 16 * k + 16);
    let e = exp(t, mask = i_f < 16 * k + 16);
    store(out[[rows, i_f]], e, mask = i_f < 16 * k + 16);
    out
}

/// Every instance adds its block into one shared accumulator row in HBM (a read of what the
/// instance before wrote): HBM hazards between instances.
#[kernel]
fn shared_accumulator(x: Hbm<f32, N, 256>) -> Hbm<f32, 128, 256> {
    let out = ndarray([128, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    let t = load(x[[program_id(0) * 128 + i_p, i_f]]);
    let acc = load(out[[i_p, i_f]]);
    let s = add(t, acc);
    store(out[[i_p, i_f]], s);
    out
}

/// A loop inside every instance (the instances' fast-forward over loops that fast-forward).
#[kernel]
fn loop_per_instance(x: Hbm<f32, N, 2048>) -> Hbm<f32, N, 2048> {
    let out = ndarray([N, 2048], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    for j in affine_range(8) {
        let t = load(x[[program_id(0) * 128 + i_p, j * 256 + i_f]]);
        let y = multiply(t, 3.0);
        store(out[[program_id(0) * 128 + i_p, j * 256 + i_f]], y);
    }
    out
}

#[test]
fn grids_skip_instances_with_the_same_schedule() {
    // The SPMD tutorial over its grid, at the tutorial's shapes and larger.
    for (x, y) in [(256, 1024), (1024, 2048), (4096, 2048)] {
        let [gx, gy] = tensor_add::grid_for(x, y);
        assert!(same_on(
            "tensor_add",
            &tensor_add::tensor_add_f16::KERNEL,
            Target::Trn1,
            &[vec![x, y], vec![x, y]],
            LaunchGrid::from([gx, gy]),
        ));
    }
    let cases: [(&str, &Kernel<'static>, Vec<usize>, LaunchGrid); 8] = [
        (
            "rows, one axis",
            &rows_per_instance::KERNEL,
            vec![300, 64],
            LaunchGrid::from(300),
        ),
        (
            "rows, three axes",
            &rows_per_instance_3d::KERNEL,
            vec![3 * 1024, 64],
            LaunchGrid::from([3, 32, 32]),
        ),
        (
            "rows, three axes (the first of size 1)",
            &rows_per_instance_3d::KERNEL,
            vec![1024, 64],
            LaunchGrid::from([1, 7, 30]),
        ),
        (
            "work by program id",
            &work_by_program_id::KERNEL,
            vec![128 * 40, 512],
            LaunchGrid::from(40),
        ),
        (
            "shared accumulator",
            &shared_accumulator::KERNEL,
            vec![128 * 64, 256],
            LaunchGrid::from(64),
        ),
        (
            "loop per instance",
            &loop_per_instance::KERNEL,
            vec![128 * 48, 2048],
            LaunchGrid::from(48),
        ),
        (
            "loop per instance, two axes",
            &loop_per_instance::KERNEL,
            vec![128 * 24, 2048],
            LaunchGrid::from([4, 6]),
        ),
        (
            "rows, one instance",
            &rows_per_instance::KERNEL,
            vec![1, 64],
            LaunchGrid::from(1),
        ),
    ];
    for (name, kernel, shape, grid) in cases {
        for target in [Target::Trn1, Target::Trn2] {
            assert!(
                same_on(name, kernel, target, std::slice::from_ref(&shape), grid),
                "{name} did not launch"
            );
        }
    }
}

/// The timing-only summary of a grid of `n` instances each storing one row (one axis of `n`,
/// or, `three_axes`, `[n / 1024, 32, 32]`), skipping or not.
fn rows_schedule(n: usize, three_axes: bool, skip: bool) -> nki::timing::Schedule {
    let (grid, kernel) = if three_axes {
        (
            LaunchGrid::from([n / 1024, 32, 32]),
            &rows_per_instance_3d::KERNEL,
        )
    } else {
        (LaunchGrid::from(n), &rows_per_instance::KERNEL)
    };
    Timing::new()
        .detail(Detail::Summary)
        .grid(grid)
        .fast_forward(skip)
        .run_shapes(&mut NeuronCore::new(Target::Trn1), kernel, &[&[n, 64]])
        .unwrap()
}

#[test]
fn a_grid_of_a_million_instances_is_the_linear_extrapolation_of_exact_runs() {
    // Exact runs (every instance timed) on small grids: past the first instances each one
    // adds the same time and the same counts.
    let exact = [256, 512, 1024].map(|n| rows_schedule(n, false, false));
    let step = exact[1].total_ps() - exact[0].total_ps();
    assert!(step > 0);
    assert_eq!(
        exact[2].total_ps(),
        exact[1].total_ps() + 2 * step,
        "the exact runs are linear in the instances"
    );
    let per = |f: fn(&nki::timing::Schedule) -> u64| {
        let (a, b) = (f(&exact[0]), f(&exact[1]));
        assert_eq!(f(&exact[2]), b + 2 * (b - a));
        assert_eq!(b, 2 * a, "no fixed part");
        a / 256
    };
    let instructions = per(|s| s.instructions());
    let read = per(|s| s.hbm_read_bytes());
    let written = per(|s| s.hbm_write_bytes());
    let transfers = per(|s| s.dma_transfers());
    let flops = per(|s| s.flops());
    assert_eq!((read, written, transfers), (256, 256, 2));
    // The three-axis grid's exact run is the one-axis one's.
    let exact_3d = rows_schedule(2048, true, false);
    assert_eq!(exact_3d.total_ps(), exact[2].total_ps() + 4 * step);
    // 2^20 instances, on one axis and on three: what the exact runs extrapolate to.
    let n: u64 = 1 << 20;
    for three_axes in [false, true] {
        let big = rows_schedule(n as usize, three_axes, true);
        assert_eq!(
            big.total_ps(),
            exact[1].total_ps() + (n - 512) / 256 * step,
            "three axes: {three_axes}"
        );
        assert_eq!(big.instructions(), n * instructions);
        assert_eq!(big.hbm_read_bytes(), n * read);
        assert_eq!(big.hbm_write_bytes(), n * written);
        assert_eq!(big.dma_transfers(), n * transfers);
        assert_eq!(big.flops(), n * flops);
    }
}

/// Every instance loads the same `[1, 64]` row, takes `exp` and stores it to the same output
/// row (the instances' HBM addresses do not depend on their program id).
#[kernel]
fn same_row_every_instance(x: Hbm<f32, 1, 64>) -> Hbm<f32, 1, 64> {
    let out = ndarray([1, 64], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..1, 0..64];
    let t = load(x[[i_p, i_f]]);
    let e = exp(t);
    store(out[[i_p, i_f]], e);
    out
}

/// The timing-only summary of `same_row_every_instance` over `n` instances.
fn same_row_schedule(n: usize, skip: bool) -> nki::timing::Schedule {
    Timing::new()
        .detail(Detail::Summary)
        .grid(LaunchGrid::from(n))
        .fast_forward(skip)
        .run_shapes(
            &mut NeuronCore::new(Target::Trn1),
            &same_row_every_instance::KERNEL,
            &[&[1, 64]],
        )
        .unwrap()
}

#[test]
fn a_grid_of_2_pow_32_instances_at_one_address_is_the_linear_extrapolation() {
    let exact = [256, 512, 1024].map(|n| same_row_schedule(n, false));
    let step = exact[1].total_ps() - exact[0].total_ps();
    assert!(step > 0);
    assert_eq!(exact[2].total_ps(), exact[1].total_ps() + 2 * step);
    // Skipping gives the exact schedule at these sizes.
    for (n, e) in [256, 512, 1024].into_iter().zip(&exact) {
        assert_eq!(
            format!("{:?}", same_row_schedule(n, true)),
            format!("{e:?}")
        );
    }
    let per = |f: fn(&nki::timing::Schedule) -> u64| {
        let (a, b) = (f(&exact[0]), f(&exact[1]));
        assert_eq!(b, 2 * a, "no fixed part");
        a / 256
    };
    let instructions = per(|s| s.instructions());
    let written = per(|s| s.hbm_write_bytes());
    let transfers = per(|s| s.dma_transfers());
    assert_eq!((written, transfers), (256, 2));
    let n: u64 = 1 << 32;
    let big = same_row_schedule(n as usize, true);
    assert_eq!(big.total_ps(), exact[1].total_ps() + (n - 512) / 256 * step);
    assert_eq!(big.instructions(), n * instructions);
    assert_eq!(big.hbm_write_bytes(), n * written);
    assert_eq!(big.dma_transfers(), n * transfers);
}
