//! Loops that are one accumulation group (`host::group_loops`): a body of one matmul into a
//! PSUM tile that every iteration adds to, after the loads of its operands or on operands
//! already in SBUF, runs as one pass of the kernel on a plain launch. Every path against plain
//! f64 loops, exactly (small integers: every product and sum is exact in f32), with loops of
//! one pass and of several, and loops left as written: one iteration, a destination that moves
//! with the loop, and a load whose tile the loop reads again.

use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

use crate::common;

/// NKI's tiled matmul with an f32 result: for each `[128, 512]` block of the result, a loop
/// over `K / 128` that loads a tile of each operand and accumulates their product.
#[kernel]
fn tiled(lhs_t: Hbm<bf16, K, M>, rhs: Hbm<bf16, K, N>) -> Hbm<f32, M, N> {
    let result = ndarray([M, N], f32, SharedHbm);
    for m in affine_range(M / 128) {
        for n in affine_range(N / 512) {
            let res_psum = zeros([128, 512], f32, Psum);
            for k in affine_range(K / 128) {
                let lhs_tile = load(lhs_t[[k * 128..(k + 1) * 128, m * 128..(m + 1) * 128]]);
                let rhs_tile = load(rhs[[k * 128..(k + 1) * 128, n * 512..(n + 1) * 512]]);
                res_psum += matmul(lhs_tile, rhs_tile, transpose_x = true);
            }
            let res_sb = copy(res_psum, f32);
            store(
                result[[m * 128..(m + 1) * 128, n * 512..(n + 1) * 512]],
                res_sb,
            );
        }
    }
    result
}

/// Operands loaded into SBUF whole (`a [128, 4, 128]`, `b [128, 4, 512]`, row `k·128 + p` of
/// the inputs at `[p, k]`), then: `group`, `aᵀb` as one `sequential_range` loop of four
/// accumulating matmuls; `columns`, each `k`'s product into its own column block of PSUM (a
/// destination that moves with the loop: no group); `reloaded`, `aᵀb` again with `b`'s tile
/// reloaded in each iteration into a tile the loop reads after the matmul too (a load that is
/// not the matmul's alone).
#[kernel]
fn resident(
    a: Hbm<bf16, 512, 128>,
    b: Hbm<bf16, 512, 512>,
) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 512>, Hbm<f32, 128, 512>) {
    let group = ndarray([128, 512], f32, SharedHbm);
    let columns = ndarray([128, 512], f32, SharedHbm);
    let reloaded = ndarray([128, 512], f32, SharedHbm);
    let a_sb = ndarray([128, 4, 128], bf16, Sbuf);
    nisa::dma_copy(
        dst = a_sb,
        src = a.reshape_dim(0, (4, 128)).permute((1, 0, 2)),
    );
    let b_sb = ndarray([128, 4, 512], bf16, Sbuf);
    nisa::dma_copy(
        dst = b_sb,
        src = b.reshape_dim(0, (4, 128)).permute((1, 0, 2)),
    );
    let acc = zeros([128, 512], f32, Psum);
    for k in sequential_range(4) {
        acc[..] += nc_matmul(a_sb[[0..128, k, 0..128]], b_sb[[0..128, k, 0..512]]);
    }
    let acc_sb = copy(acc, f32);
    store(group, acc_sb);
    let per_k = ndarray([128, 512], f32, Psum);
    for k in affine_range(4) {
        per_k[[0..128, k * 128..(k + 1) * 128]] = nc_matmul(
            a_sb[[0..128, k, 0..128]],
            b_sb[[0..128, k, k * 128..(k + 1) * 128]],
        );
    }
    let per_k_sb = copy(per_k, f32);
    store(columns, per_k_sb);
    let again = zeros([128, 512], f32, Psum);
    let last = ndarray([128, 512], bf16, Sbuf);
    for k in sequential_range(4) {
        let b_tile = load(b[[k * 128..(k + 1) * 128, 0..512]]);
        again[..] += nc_matmul(a_sb[[0..128, k, 0..128]], b_tile);
        last[..] = copy(b_tile, bf16);
    }
    let again_sb = copy(again, f32);
    let sum = ndarray([128, 512], f32, Sbuf);
    sum[..] = add(again_sb, last);
    store(reloaded, sum);
    (group, columns, reloaded)
}

/// `Σ_k a[k, m] · b[k, n]` over `k` in `rows`, as `[M, N]` row-major f64s.
fn product(a: &Array2<f32>, b: &Array2<f32>, rows: core::ops::Range<usize>) -> Vec<f64> {
    let mut out = vec![0.0; a.ncols() * b.ncols()];
    for m in 0..a.ncols() {
        for n in 0..b.ncols() {
            out[m * b.ncols() + n] = rows
                .clone()
                .map(|k| f64::from(a[[k, m]]) * f64::from(b[[k, n]]))
                .sum();
        }
    }
    out
}

fn bf16s(a: &Array2<f32>) -> Array2<bf16> {
    a.mapv(bf16::from_f32)
}

#[test]
fn loads_and_matmuls_of_a_loop_run_as_one_group_on_every_path() {
    // K = 512: four matmuls per block (one pass); 2048: sixteen, as many as one pass takes;
    // 128: one (a loop of one, as written); 2176: 17 (two passes, the second of one matmul);
    // 4224: 33 (three).
    for (k, m, seed) in [
        (512, 256, 1),
        (2048, 128, 2),
        (128, 256, 3),
        (2176, 128, 4),
        (4224, 128, 5),
    ] {
        let n = 512;
        let a = common::rand_int(Ix2(k, m), 60 + seed, -8, 8);
        let b = common::rand_int(Ix2(k, n), 70 + seed, -8, 8);
        let want = product(&a, &b, 0..k);
        let (da, db) = (
            DeviceTensor::from_array(&bf16s(&a)).unwrap(),
            DeviceTensor::from_array(&bf16s(&b)).unwrap(),
        );
        for (label, mut core) in common::host_paths() {
            // Device tensors keep their packings from launch to launch: run twice.
            for launch in 0..2 {
                let got = tiled(&mut core, &da, &db).unwrap();
                common::assert_bits(
                    &format!("K {k}, {label}, launch {launch}"),
                    got.as_slice(),
                    want.iter().map(|&v| v as f32),
                );
            }
        }
    }
}

#[test]
fn matmuls_of_sbuf_tiles_in_a_loop_run_as_one_group_on_every_path() {
    let a = common::rand_int(Ix2(512, 128), 81, -8, 8);
    let b = common::rand_int(Ix2(512, 512), 82, -8, 8);
    let want_group = product(&a, &b, 0..512);
    // Column block k of `columns`: rows k·128.. of a against the same columns of b.
    let mut want_columns = vec![0.0; 128 * 512];
    for kb in 0..4 {
        let rows = kb * 128..(kb + 1) * 128;
        let full = product(&a, &b, rows);
        for m in 0..128 {
            for c in kb * 128..(kb + 1) * 128 {
                want_columns[m * 512 + c] = full[m * 512 + c];
            }
        }
    }
    // The sum plus the last tile of b (rows 384..512), as `reloaded` adds them.
    let want_reloaded: Vec<f64> = want_group
        .iter()
        .enumerate()
        .map(|(i, v)| v + f64::from(b[[384 + i / 512, i % 512]]))
        .collect();
    let (da, db) = (
        DeviceTensor::from_array(&bf16s(&a)).unwrap(),
        DeviceTensor::from_array(&bf16s(&b)).unwrap(),
    );
    for (label, mut core) in common::host_paths() {
        for launch in 0..2 {
            let (group, columns, reloaded) = resident(&mut core, &da, &db).unwrap();
            let what = format!("{label}, launch {launch}");
            for (name, got, want) in [
                ("group", &group, &want_group),
                ("columns", &columns, &want_columns),
                ("reloaded", &reloaded, &want_reloaded),
            ] {
                common::assert_bits(
                    &format!("{name} ({what})"),
                    got.as_slice(),
                    want.iter().map(|&v| v as f32),
                );
            }
        }
    }
}
