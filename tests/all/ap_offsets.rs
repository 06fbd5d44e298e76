//! NKI 0.6's access patterns with offsets read at run time: `x.ap(pattern, offset,
//! scalar_offset = v, indirect_dim = d)` (the whole pattern `v · prod(dims[d + 1..])` elements
//! further, `v` a virtual register or a one-element int32 tile) and `x.ap(pattern,
//! vector_offset = idx, indirect_dim = 0)` (NKI's indirect gather and scatter, one row per
//! partition), in `dma_copy`, `load` and `store` on HBM tensors. Checked against plain loops
//! over the same offsets: NKI's `fori_loop` example as its docstring writes it, a device loop
//! walking a tensor's rows, NKI's deep-dive examples; the run-time errors of offsets outside
//! the tensor, strict mode, the timing model, and the listing of `vector_offset` equal to
//! NKI 2.26's `x[[idx, iy]]`.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;
use nki::program::{Engine, Opcode};
use nki::timing::Timing;

/// NKI's `fori_loop` docstring example: `output[0, i] = data[0, i]` for `i` in `0..ub`, each
/// element moved through a one-element tile with `.ap(..., scalar_offset = i, indirect_dim =
/// 1)`; the rest of the output is 0.
#[kernel]
fn fori_ap(data: Hbm<f32, 1, 16>, ub_input: Hbm<i32, 1, 1>) -> Hbm<f32, 1, 16> {
    let output = ndarray([1, 16], f32, SharedHbm);
    let ub_sb = ndarray([1, 1], i32, Sbuf);
    nisa::dma_copy(dst = ub_sb, src = ub_input);
    let ub_reg = nisa::register_alloc();
    nisa::register_load(ub_reg, ub_sb);
    let zeros = zeros([1, 16], f32, Sbuf);
    nisa::dma_copy(dst = output, src = zeros);
    let temp = ndarray([1, 1], f32, Sbuf);
    nl::fori_loop(0, ub_reg, |i| {
        nisa::dma_copy(
            dst = temp,
            src = data.ap([[1, 1], [1, 1]], scalar_offset = i, indirect_dim = 1),
        );
        nisa::dma_copy(
            dst = output.ap([[1, 1], [1, 1]], scalar_offset = i, indirect_dim = 1),
            src = temp,
        );
    });
    output
}

fn ub(n: i32) -> Array2<i32> {
    Array2::from_elem((1, 1), n)
}

#[test]
fn nkis_fori_loop_example_copies_the_elements_below_the_bound() {
    let data = Array2::from_shape_fn((1, 16), |(_, j)| 1.5 * j as f32 - 3.0);
    for (bound, strict) in [(5, true), (16, false), (0, true), (-3, false), (1, true)] {
        let mut core = NeuronCore::default().with_strict(strict);
        let out = fori_ap::host(&mut core, data.view(), ub(bound).view()).unwrap();
        let mut want = Array2::<f32>::zeros((1, 16));
        for j in 0..i64::from(bound).max(0) as usize {
            want[[0, j]] = data[[0, j]];
        }
        assert_eq!(out, want, "bound {bound}");
    }
}

#[test]
fn an_iteration_register_past_the_dimension_is_a_launch_error() {
    let data = Array2::zeros((1, 16));
    let err = fori_ap::host(&mut NeuronCore::default(), data.view(), ub(17).view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "scalar offset 16 is out of bounds for the indirect dimension of tensor `data` (size 16)"
        ),
        "{err}"
    );
}

/// A device loop over the rows of a `[8, 32]` tensor: row `i` (for `i` in `lo..hi`, read at
/// run time) doubled into row `i` of the output, which is 0 elsewhere; `load` and `store`
/// take the access as `dma_copy` does.
#[kernel]
fn rows_walk(x: Hbm<f32, 8, 32>, bounds: Hbm<i32, 1, 2>) -> Hbm<f32, 8, 32> {
    let out = ndarray([8, 32], f32, SharedHbm);
    let z = zeros([8, 32], f32, Sbuf);
    nisa::dma_copy(dst = out, src = z);
    let b = ndarray([1, 2], i32, Sbuf);
    nisa::dma_copy(dst = b, src = bounds);
    let lo = nisa::register_alloc();
    nisa::register_load(lo, b[[0..1, 0..1]]);
    let hi = nisa::register_alloc();
    nisa::register_load(hi, b[[0..1, 1..2]]);
    nl::fori_loop(lo, hi, |i| {
        let row = load(x.ap([[32, 1], [1, 32]], scalar_offset = i, indirect_dim = 0));
        let twice = nl::multiply(row, 2.0);
        store(
            out.ap([[32, 1], [1, 32]], scalar_offset = i, indirect_dim = 0),
            twice,
        );
    });
    out
}

#[test]
fn a_device_loop_walks_a_tensors_rows_by_its_register() {
    let x = rand_f32(Ix2(8, 32), 61, -4.0, 4.0);
    for (lo, hi) in [(0, 8), (2, 5), (7, 8), (3, 3), (6, 1)] {
        let bounds = Array2::from_shape_vec((1, 2), vec![lo, hi]).unwrap();
        let mut core = NeuronCore::default().with_strict(true);
        let out = rows_walk::host(&mut core, x.view(), bounds.view()).unwrap();
        let mut want = Array2::<f32>::zeros((8, 32));
        for i in lo..hi {
            for j in 0..32 {
                let i = i as usize;
                want[[i, j]] = (f64::from(x[[i, j]]) * 2.0) as f32;
            }
        }
        assert_eq!(out, want, "[{lo}, {hi})");
    }
}

#[test]
fn a_negative_register_is_a_launch_error() {
    let x = Array2::zeros((8, 32));
    let bounds = Array2::from_shape_vec((1, 2), vec![-1, 2]).unwrap();
    let err = rows_walk::host(&mut NeuronCore::default(), x.view(), bounds.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "scalar offset -1 is out of bounds for the indirect dimension of tensor `x` (size 8)"
        ),
        "{err}"
    );
}

/// NKI's deep-dive `scalar_dynamic_dma`, at a smaller size: the offset a one-element tile set
/// to `3 · 32` rows, 32 partitions of 32 elements from there (`A[96:128, 0:32]`); and an
/// offset from the input, which may push the pattern past the tensor's end.
#[kernel]
fn batch_select(a: Hbm<f32, 128, 64>, at: Hbm<i32, 1, 1>) -> (Hbm<f32, 32, 32>, Hbm<f32, 32, 32>) {
    let fixed = ndarray([32, 32], f32, SharedHbm);
    let moved = ndarray([32, 32], f32, SharedHbm);
    let batch_idx = ndarray([1, 1], i32, Sbuf);
    nisa::memset(dst = batch_idx, value = 3 * 32);
    nisa::dma_copy(
        src = a.ap(
            pattern = [[64, 32], [1, 32]],
            offset = 0,
            scalar_offset = batch_idx,
            indirect_dim = 0,
        ),
        dst = fixed,
    );
    let idx = ndarray([1, 1], i32, Sbuf);
    nisa::dma_copy(dst = idx, src = at);
    let t = ndarray([32, 32], f32, Sbuf);
    nisa::dma_copy(
        dst = t,
        src = a.ap(
            [[64, 32], [1, 32]],
            16,
            scalar_offset = idx,
            indirect_dim = 0,
        ),
    );
    nisa::dma_copy(dst = moved, src = t);
    (fixed, moved)
}

#[test]
fn nkis_scalar_dynamic_dma_starts_at_the_offsets_row() {
    let a = rand_f32(Ix2(128, 64), 62, -8.0, 8.0);
    for r in [0, 5, 96] {
        let (fixed, moved) = batch_select::host(
            &mut NeuronCore::default().with_strict(true),
            a.view(),
            ub(r).view(),
        )
        .unwrap();
        let r = r as usize;
        for p in 0..32 {
            for j in 0..32 {
                assert_eq!(fixed[[p, j]], a[[96 + p, j]], "fixed [{p}, {j}]");
                // Element 16 + 64·p + j of the flattened tensor, `r` rows further.
                assert_eq!(moved[[p, j]], a[[r + p, 16 + j]], "offset {r}, [{p}, {j}]");
            }
        }
    }
}

#[test]
fn an_offset_that_moves_the_pattern_past_the_tensor_is_a_launch_error() {
    let a = Array2::zeros((128, 64));
    // Row 97 is in the dimension, but its 32 rows run past row 127.
    let err = batch_select::host(&mut NeuronCore::default(), a.view(), ub(97).view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("scalar offset 97 moves the access to elements 6224..=8239 of tensor `a`, which has 8192"),
        "{err}"
    );
}

#[test]
fn strict_mode_refuses_an_unwritten_scalar_offset() {
    #[kernel]
    fn unwritten(a: Hbm<f32, 4, 8>) -> Hbm<f32, 1, 8> {
        let out = ndarray([1, 8], f32, SharedHbm);
        // Only the first of the two elements is written.
        let idx = ndarray([1, 2], i32, Sbuf);
        nisa::memset(dst = idx[[0..1, 0..1]], value = 1);
        let t = ndarray([1, 8], f32, Sbuf);
        nisa::dma_copy(
            dst = t,
            src = a.ap(
                [[8, 1], [1, 8]],
                scalar_offset = idx[[0..1, 1..2]],
                indirect_dim = 0,
            ),
        );
        nisa::dma_copy(dst = out, src = t);
        out
    }
    let a = Array2::from_elem((4, 8), 1.0f32);
    let err = unwritten::host(&mut NeuronCore::default().with_strict(true), a.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the scalar offset of a DMA (`.ap(..., scalar_offset=)`) must be defined"),
        "{err}"
    );
}

#[test]
fn the_timing_model_moves_once_per_iteration_and_stores_the_register() {
    let x = DeviceTensor::from_array(&rand_f32(Ix2(8, 32), 63, -1.0, 1.0)).unwrap();
    let runs = |lo: i32, hi: i32| {
        let b = DeviceTensor::from_array(&Array2::from_shape_vec((1, 2), vec![lo, hi]).unwrap())
            .unwrap();
        let mut out = DeviceTensor::<f32>::zeros(&[8, 32]).unwrap();
        let s = Timing::new()
            .run(
                &mut NeuronCore::default(),
                &rows_walk::KERNEL,
                &[x.arg(), b.arg()],
                &mut [out.arg_mut()],
            )
            .unwrap();
        let loads = s.opcode_count(Engine::Dma, Opcode::IndirectLoad);
        let stores = s.opcode_count(Engine::Dma, Opcode::IndirectStore);
        (loads, stores, s.total_ps())
    };
    let (l3, s3, t3) = runs(0, 3);
    let (l7, s7, t7) = runs(1, 8);
    assert_eq!((l3, s3, l7, s7), (3, 3, 7, 7));
    assert!(t7 > t3, "{t3} {t7}");
}

/// NKI's `dma_copy` docstring gather (`vector_offset` on the source) and scatter (on the
/// destination), at `P = 64` rows of `F = 32` elements from a `[100, 32]` tensor.
#[kernel]
fn gather_scatter(
    data: Hbm<f32, 100, 32>,
    indices: Hbm<u32, 64, 1>,
) -> (Hbm<f32, 64, 32>, Hbm<f32, 100, 32>) {
    let gathered = ndarray([64, 32], f32, SharedHbm);
    let scattered = ndarray([100, 32], f32, SharedHbm);
    let idx = ndarray([64, 1], u32, Sbuf);
    nisa::dma_copy(dst = idx, src = indices);
    let dst = ndarray([64, 32], f32, Sbuf);
    nisa::dma_copy(
        dst = dst,
        src = data.ap(
            pattern = [[32, 64], [1, 32]],
            vector_offset = idx,
            indirect_dim = 0,
        ),
    );
    nisa::dma_copy(dst = gathered, src = dst);
    let z = zeros([100, 32], f32, Sbuf);
    nisa::dma_copy(dst = scattered, src = z);
    nisa::dma_copy(
        dst = scattered.ap(
            pattern = [[32, 64], [1, 32]],
            vector_offset = idx,
            indirect_dim = 0,
        ),
        src = dst,
    );
    (gathered, scattered)
}

#[test]
fn vector_offset_gathers_and_scatters_the_rows_its_indices_name() {
    let data = rand_f32(Ix2(100, 32), 64, -5.0, 5.0);
    // Distinct indices (a scatter with repeats races), in a mixed order.
    let idx: Vec<u32> = (0..64).map(|k| (k * 37 + 11) % 100).collect();
    let i = Array2::from_shape_vec((64, 1), idx.clone()).unwrap();
    let (g, s) = gather_scatter::host(
        &mut NeuronCore::default().with_strict(true),
        data.view(),
        i.view(),
    )
    .unwrap();
    let mut want_s = Array2::<f32>::zeros((100, 32));
    for (k, &r) in idx.iter().enumerate() {
        for j in 0..32 {
            assert_eq!(g[[k, j]], data[[r as usize, j]], "gathered [{k}, {j}]");
            want_s[[r as usize, j]] = data[[r as usize, j]];
        }
    }
    assert_eq!(s, want_s);
}

#[test]
fn a_vector_offset_past_the_rows_is_a_launch_error() {
    let data = Array2::zeros((100, 32));
    let idx: Vec<u32> = (0..64).map(|k| if k == 9 { 100 } else { k }).collect();
    let i = Array2::from_shape_vec((64, 1), idx).unwrap();
    let err = gather_scatter::host(&mut NeuronCore::default(), data.view(), i.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("indirect index 100 (the index tile's element at partition 9 of the access) is out of bounds for dimension 0 of tensor `data` (size 100)"),
        "{err}"
    );
}

/// NKI 2.26's spelling of the gather: `x[[idx, iy]]`.
#[kernel]
fn gather_226(data: Hbm<f32, 100, 32>, indices: Hbm<u32, 64, 1>) -> Hbm<f32, 64, 32> {
    let out = ndarray([64, 32], f32, SharedHbm);
    let idx = ndarray([64, 1], u32, Sbuf);
    nisa::dma_copy(dst = idx, src = indices);
    let iy = arange(32).x();
    let dst = load(data[[idx[[arange(64).p(), 0]], iy]]);
    nisa::dma_copy(dst = out, src = dst);
    out
}

/// The same gather in NKI 0.6's spelling.
#[kernel]
fn gather_06(data: Hbm<f32, 100, 32>, indices: Hbm<u32, 64, 1>) -> Hbm<f32, 64, 32> {
    let out = ndarray([64, 32], f32, SharedHbm);
    let idx = ndarray([64, 1], u32, Sbuf);
    nisa::dma_copy(dst = idx, src = indices);
    let dst = load(data.ap([[32, 64], [1, 32]], vector_offset = idx, indirect_dim = 0));
    nisa::dma_copy(dst = out, src = dst);
    out
}

/// A program's listing without its first line (the signature, which names the kernel).
fn body(p: &nki::program::Program<'_>) -> String {
    p.to_string().lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[test]
fn vector_offset_lowers_as_nki_226s_indirect_load() {
    let a = gather_226::KERNEL.program();
    let b = gather_06::KERNEL.program();
    assert_eq!(body(a), body(b), "2.26:\n{a}\n0.6:\n{b}");
    assert!(a.to_string().contains("indirect_load"), "{a}");
}

#[test]
fn the_listing_shows_the_scalar_offset() {
    let listing = batch_select::KERNEL.program().to_string();
    assert!(
        listing.contains("a.reshape([8192])") && listing.contains("* 64 (index < 128)"),
        "{listing}"
    );
    // A register offset is stored into a one-element tile the DMA reads: one `register_store`
    // per `.ap(scalar_offset = i)`, each `dma_copy` operand evaluated once.
    let listing = fori_ap::KERNEL.program().to_string();
    assert_eq!(listing.matches("register_store").count(), 2, "{listing}");
}

/// In an `affine_range`: iteration `k` stores row `k` of `x` at the row `at[k]` names (a
/// permutation), through a scalar offset; the host may run the loop's halves on two threads.
#[kernel]
fn permuted_rows(x: Hbm<f32, 8, 64>, at: Hbm<i32, 8, 1>) -> Hbm<f32, 8, 64> {
    let out = ndarray([8, 64], f32, SharedHbm);
    for k in affine_range(8) {
        let r = ndarray([1, 1], i32, Sbuf);
        nisa::dma_copy(dst = r, src = at[[k..k + 1, 0..1]]);
        let t = ndarray([1, 64], f32, Sbuf);
        nisa::dma_copy(dst = t, src = x[[k..k + 1, 0..64]]);
        nisa::dma_copy(
            dst = out.ap([[64, 1], [1, 64]], scalar_offset = r, indirect_dim = 0),
            src = t,
        );
    }
    out
}

#[test]
fn scalar_offset_stores_in_an_affine_range_land_on_their_rows_on_two_host_threads() {
    let x = rand_f32(Ix2(8, 64), 65, -3.0, 3.0);
    let perm: Vec<i32> = vec![5, 0, 7, 2, 6, 1, 4, 3];
    let at = Array2::from_shape_vec((8, 1), perm.clone()).unwrap();
    for threads in [1, 2] {
        let mut core = NeuronCore::default().with_host_threads(threads);
        let out = permuted_rows::host(&mut core, x.view(), at.view()).unwrap();
        let mut want = Array2::<f32>::zeros((8, 64));
        for (k, &r) in perm.iter().enumerate() {
            for j in 0..64 {
                want[[r as usize, j]] = x[[k, j]];
            }
        }
        assert_eq!(out, want, "{threads} host threads");
    }
}
