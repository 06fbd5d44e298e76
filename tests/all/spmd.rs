//! SPMD launch grids: `program_id`, `num_programs`, `program_ndim`; instances on two host
//! threads computing the bits of a serial run; grids refused for what they are.

use crate::examples::tensor_add as tensor_add_example;

use nki::LaunchError;
use nki::ndarray::{Array2, s};
use nki::prelude::*;
use tensor_add_example::{common, grid_for, reference, tensor_add_f16};

/// Two host threads and one, plain: a strict launch runs on one thread.
fn cores() -> [NeuronCore; 2] {
    [
        NeuronCore::default().with_strict(false),
        NeuronCore::default()
            .with_strict(false)
            .with_host_threads(1),
    ]
}

#[test]
fn tensor_add_over_its_grid_at_the_tutorials_shapes() {
    for (x, y) in [(256, 1024), (1024, 2048), (128, 512)] {
        let a = common::random_f16(nki::ndarray::Ix2(x, y), 7, -2.0, 2.0);
        let b = common::random_f16(nki::ndarray::Ix2(x, y), 8, -2.0, 2.0);
        let want = reference(&a, &b);
        for mut core in cores() {
            let threads = core.host_threads();
            let got = tensor_add_f16::grid(grid_for(x, y))
                .host(&mut core, a.view(), b.view())
                .unwrap();
            let same = got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits());
            assert!(same, "[{x}, {y}] on {threads} host threads");
        }
    }
}

/// Instance `j` multiplies `lhs_t` by column block `j` of `rhs` into the same columns of the
/// output: the two halves of a one-dimensional grid write every row, in disjoint column ranges,
/// so the second half works on a copy of its columns (`host::interleaved`).
#[kernel]
fn column_block_products(lhs_t: Hbm<bf16, 128, 128>, rhs: Hbm<bf16, 128, N>) -> Hbm<f32, 128, N> {
    let out = ndarray([128, N], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    let (lp, lf) = mgrid![0..128, 0..128];
    let l = load(lhs_t[[lp, lf]]);
    let r = load(rhs[[ip, program_id(0) * 512 + jf]]);
    let acc = nc_matmul(l, r);
    store(out[[ip, program_id(0) * 512 + jf]], copy(acc, f32));
    out
}

#[test]
fn instances_over_column_blocks_compute_the_serial_bits() {
    let n = 4096;
    let lhs_t = common::uniform(nki::ndarray::Ix2(128, 128), 11, -1.0, 1.0).mapv(bf16::from_f64);
    let rhs = common::uniform(nki::ndarray::Ix2(128, n), 12, -1.0, 1.0).mapv(bf16::from_f64);
    let (a, b) = (
        DeviceTensor::from_array(&lhs_t).unwrap(),
        DeviceTensor::from_array(&rhs).unwrap(),
    );
    let mut results = Vec::new();
    for mut core in cores() {
        let out = column_block_products::grid([n / 512])
            .launch(&mut core, &a, &b)
            .unwrap();
        results.push(out.into_array::<nki::ndarray::Ix2>().unwrap());
    }
    let bits = |x: &Array2<f32>| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&results[0]), bits(&results[1]), "two threads vs one");
    let (want, size) = common::reference(lhs_t.view(), rhs.view());
    for ((m, c), &g) in results[0].indexed_iter() {
        let (want, bound) = (want[[m, c]], 128.0 * f64::from(f32::EPSILON) * size[[m, c]]);
        assert!(
            (f64::from(g) - want).abs() <= bound,
            "({m}, {c}): {g} vs {want}"
        );
    }
}

#[test]
fn device_launches_over_a_grid_write_into_caller_outputs() {
    let (x, y) = (512, 1024);
    let a = DeviceTensor::from_array(&common::random_f16(nki::ndarray::Ix2(x, y), 1, -2.0, 2.0))
        .unwrap();
    let b = DeviceTensor::from_array(&common::random_f16(nki::ndarray::Ix2(x, y), 2, -2.0, 2.0))
        .unwrap();
    let mut core = NeuronCore::default();
    let grid = tensor_add_f16::grid([4, 2]);
    let fresh = grid.launch(&mut core, &a, &b).unwrap();
    let mut into = DeviceTensor::<f16>::zeros(&[x, y]).unwrap();
    grid.launch_into(&mut core, &a, &b, &mut into).unwrap();
    assert_eq!(fresh.as_slice(), into.as_slice());
}

#[test]
fn a_grid_that_reaches_past_the_tensor_is_refused() {
    let a = common::random_f16(nki::ndarray::Ix2(256, 1024), 3, -2.0, 2.0);
    let mut core = NeuronCore::default();
    let err = tensor_add_f16::grid([3, 2])
        .host(&mut core, a.view(), a.view())
        .unwrap_err();
    let LaunchError::Constraint { constraint, values } = &err else {
        panic!("{err:?}");
    };
    assert!(constraint.contains("num_programs(0)"), "{constraint}");
    assert!(values.contains("num_programs(0) = 3"), "{values}");
    // Without a grid, program ids are 0: one tile, the rest of the output unwritten (plain:
    // a strict launch refuses that).
    let mut core = core.with_strict(false);
    let one = tensor_add_f16::host(&mut core, a.view(), a.view()).unwrap();
    let want = reference(&a, &a);
    assert_eq!(one.slice(s![..128, ..512]), want.slice(s![..128, ..512]));
}

#[test]
fn bad_grids_are_launch_errors() {
    let a = common::random_f16(nki::ndarray::Ix2(128, 512), 3, -2.0, 2.0);
    let mut core = NeuronCore::default();
    let mut refused = |g: LaunchGrid| {
        let err = tensor_add_f16::grid(g)
            .host(&mut core, a.view(), a.view())
            .unwrap_err();
        let LaunchError::Grid { kernel, why } = err else {
            panic!("{err:?}");
        };
        assert_eq!(kernel, "tensor_add_f16");
        why
    };
    assert!(refused(LaunchGrid::from([1, 0])).contains("axis 1 has no instance"));
    assert!(refused(LaunchGrid::from([1, 1, 1, 1])).contains("at most 3 axes"));
    assert!(refused(LaunchGrid::new(&[nc(2), 1.into()])).contains("needs trn2"));
}

/// Each instance counts, in a `sequential_range` over the grid's symbols, how large the grid
/// is: `out[pid0, pid1] = [num_programs(1), num_programs(), program_ndim()]`.
#[kernel]
fn grid_sizes(x: Hbm<f32, 1, 1>, like: Hbm<f32, G, H>) -> Hbm<f32, G, H, 3> {
    let out = ndarray([G, H, 3], f32, SharedHbm);
    let one = load(x[..]);
    let n1 = zeros([1, 1], f32);
    for _ in sequential_range(num_programs(1)) {
        n1 += one;
    }
    let n = zeros([1, 1], f32);
    for _ in sequential_range(num_programs()) {
        n += one;
    }
    let r = zeros([1, 1], f32);
    for _ in sequential_range(program_ndim()) {
        r += one;
    }
    store(out[[program_id(0), program_id(1), 0]], n1);
    store(out[[program_id(0), program_id(1), 1]], n);
    store(out[[program_id(0), program_id(1), 2]], r);
    out
}

#[test]
fn num_programs_and_program_ndim_are_the_grids() {
    let x = Array2::from_elem((1, 1), 1.0f32);
    let like = Array2::<f32>::zeros((3, 5));
    for mut core in cores() {
        let out = grid_sizes::grid([3, 5])
            .host(&mut core, x.view(), like.view())
            .unwrap();
        for ((_, _, k), &v) in out.indexed_iter() {
            assert_eq!(v, [5.0, 15.0, 2.0][k]);
        }
    }
}

/// Every instance writes the same tile: the instances' halves overlap, so they run serially,
/// and the last instance's tile is the result, as in a serial run.
#[kernel]
fn last_writer_wins(a: Hbm<f32, N, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..64];
    let t = load(a[[program_id(0) * 128 + i_p, i_f]]);
    store(out[[i_p, i_f]], t);
    out
}

#[test]
fn overlapping_instances_run_in_order() {
    let a = Array2::from_shape_fn((128 * 5, 64), |(i, j)| (i * 64 + j) as f32);
    for mut core in cores() {
        let out = last_writer_wins::grid([5])
            .host(&mut core, a.view())
            .unwrap();
        assert_eq!(out, a.slice(s![4 * 128.., ..]));
    }
}

#[test]
fn the_dtype_is_a_meta_parameter() {
    use tensor_add_example::tensor_add_bf16;
    let a = common::uniform(nki::ndarray::Ix2(256, 512), 5, -2.0, 2.0).mapv(bf16::from_f64);
    let b = common::uniform(nki::ndarray::Ix2(256, 512), 6, -2.0, 2.0).mapv(bf16::from_f64);
    let got = tensor_add_bf16::grid([2, 1])
        .host(&mut NeuronCore::default(), a.view(), b.view())
        .unwrap();
    for ((g, x), y) in got.iter().zip(&a).zip(&b) {
        assert_eq!(
            *g,
            bf16::from_f64(f64::from(x.to_f32()) + f64::from(y.to_f32()))
        );
    }
    let inst = &tensor_add_example::tensor_add::INSTANCES[1];
    assert_eq!(
        inst.value("T"),
        Some(nki::MetaValue::DType(nki::program::DType::Bf16))
    );
}
