//! Tiles with leading block axes, NKI's `nl.ndarray((K // 128, nl.par_dim(128), 512))`,
//! written `ndarray([K / 128, par_dim(128), 512], ...)` and indexed block first (`t[k]`,
//! `t[[k, i_p, i_f]]`): block counts known at compile time and sized by a launch's shapes,
//! against plain-loop references; the launch errors of a count past the SBUF's capacity and
//! of a block index past the launch's count.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// NKI's matmul tutorial, stage 2 (`nki_matmul_hoist_load_`), as NKI writes it: the column of
/// `K // 128` stationary tiles is loaded once per `m` into a block tile sized by the traced
/// `K`, the moving tiles once per `n`, then the K loop only multiplies.
#[kernel]
fn hoist_load_blocks(lhs_t: Hbm<bf16, K, M>, rhs: Hbm<bf16, K, N>) -> Hbm<f32, M, N> {
    let result = ndarray([M, N], f32, SharedHbm);
    let i_lhs_t = mgrid![0..128, 0..128];
    let i_rhs = mgrid![0..128, 0..512];
    let i_res = mgrid![0..128, 0..512];
    for m in affine_range(M / 128) {
        let lhs_t_tiles = ndarray((K / 128, par_dim(128), 128), lhs_t.dtype, Sbuf);
        for k in affine_range(K / 128) {
            lhs_t_tiles[[k, i_lhs_t.p, i_lhs_t.x]] =
                load(lhs_t[[k * 128 + i_lhs_t.p, m * 128 + i_lhs_t.x]]);
        }
        for n in affine_range(N / 512) {
            let rhs_tiles = ndarray([K / 128, par_dim(128), 512], rhs.dtype, Sbuf);
            for k in affine_range(K / 128) {
                rhs_tiles[[k, i_rhs.p, i_rhs.x]] =
                    load(rhs[[k * 128 + i_rhs.p, n * 512 + i_rhs.x]]);
            }
            let res_psum = zeros([128, 512], f32, Psum);
            for k in affine_range(K / 128) {
                res_psum += matmul(lhs_t_tiles[k], rhs_tiles[k], transpose_x = true);
            }
            let res_sb = copy(res_psum, dtype = result.dtype);
            store(result[[m * 128 + i_res.p, n * 512 + i_res.x]], res_sb);
        }
    }
    result
}

/// `lhs_tᵀ · rhs` by plain loops in f64.
fn matmul_reference(a: &Array2<f32>, b: &Array2<f32>) -> Array2<f64> {
    let (k, m) = a.dim();
    let n = b.dim().1;
    let mut out = Array2::<f64>::zeros((m, n));
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f64;
            for l in 0..k {
                s += f64::from(a[[l, i]]) * f64::from(b[[l, j]]);
            }
            out[[i, j]] = s;
        }
    }
    out
}

fn to_bf16(a: &Array2<f32>) -> Array2<bf16> {
    a.mapv(bf16::from_f32)
}

#[test]
fn hoisted_block_tiles_sized_by_k_match_plain_loops() {
    // Small integers: every product and sum is exact in fp32, so the result is exact.
    for (k, m, n) in [(128, 128, 512), (384, 256, 1024), (1024, 128, 512)] {
        let a = rand_int(Ix2(k, m), k as u64, -4, 4);
        let b = rand_int(Ix2(k, n), n as u64 + 1, -4, 4);
        let mut core = NeuronCore::default();
        let out =
            hoist_load_blocks::host(&mut core, to_bf16(&a).view(), to_bf16(&b).view()).unwrap();
        let reference = matmul_reference(&a, &b);
        for ((i, j), &x) in out.indexed_iter() {
            assert_eq!(
                f64::from(x),
                reference[[i, j]],
                "K={k} M={m} N={n} at [{i}, {j}]"
            );
        }
    }
}

#[test]
fn the_program_stays_a_loop_and_reserves_the_rest_of_sbuf() {
    let p = hoist_load_blocks::KERNEL.program();
    let blocks: Vec<_> = p.tiles().iter().filter(|t| t.blocks.is_some()).collect();
    assert_eq!(blocks.len(), 2);
    // Both block tiles hold the same number of blocks; together with the other tiles they
    // fit one SBUF partition (192 KiB on trn1).
    let cap = blocks[0].shape.dims()[1];
    assert_eq!(blocks[1].shape.dims()[1], cap);
    for t in &blocks {
        assert!(u64::from(t.addr) + t.bytes_per_partition() <= 192 * 1024);
    }
    // lhs_t_tiles: 256 B per block, rhs_tiles: 1 KiB per block; the only other SBUF tile is the
    // [128, 512] f32 copy (2 KiB): (192 KiB − 2 KiB) / 1280 B = 152 blocks.
    assert_eq!(cap, 152);
    let listing = p.to_string();
    assert!(
        listing.contains("bf16[128, 152, 512] @0x0a000  blocks K / 128"),
        "{listing}"
    );
    // Loops over exactly the tiles' blocks need no constraint on their block indices.
    assert!(!listing.contains("block index"), "{listing}");
    assert!(
        listing.contains("require rhs_tiles blocks: K / 128 <= 152"),
        "{listing}"
    );
}

#[test]
fn a_block_count_past_the_capacity_is_refused_at_launch() {
    // 153 blocks of K: one more than the SBUF holds beside the kernel's other tiles.
    let k = 153 * 128;
    let a = Array2::from_elem((k, 128), bf16::ZERO);
    let b = Array2::from_elem((k, 512), bf16::ZERO);
    let mut core = NeuronCore::default();
    let err = hoist_load_blocks::host(&mut core, a.view(), b.view()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LaunchError::Constraint { .. }), "{msg}");
    assert!(msg.contains("lhs_t_tiles blocks: K / 128 <= 152"), "{msg}");
    assert!(msg.contains("K = 19584"), "{msg}");
}

/// A loop of `K / 64` iterations over a tile of `K / 128` blocks: its second half of block
/// indices is past the launch's count.
#[kernel]
fn block_index_past_count(x: Hbm<f32, K, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let i = mgrid![0..128, 0..64];
    let t = ndarray([K / 128, par_dim(128), 64], f32, Sbuf);
    for k in affine_range(K / 64) {
        t[[k, i.p, i.x]] = load(x[[i.p, i.x]]);
    }
    store(out[[i.p, i.x]], t[0]);
    out
}

#[test]
fn a_block_index_past_the_launch_count_is_refused_at_launch() {
    let x = Array2::<f32>::zeros((256, 64));
    let mut core = NeuronCore::default();
    let err = block_index_past_count::host(&mut core, x.view()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LaunchError::Constraint { .. }), "{msg}");
    assert!(msg.contains("t block index k"), "{msg}");
}

/// Blocks counted at compile time: four `[128, 64]` blocks accumulated into (`+=`) one per
/// column block of `x`, a block read by a constant index, every block zeroed by `zeros`.
#[kernel]
fn fixed_blocks(x: Hbm<f32, 128, 256>) -> (Hbm<f32, 128, 256>, Hbm<f32, 128, 64>) {
    let out = ndarray([128, 256], f32, SharedHbm);
    let last = ndarray([128, 64], f32, SharedHbm);
    let i = mgrid![0..128, 0..64];
    let acc = zeros([4, par_dim(128), 64], f32, Sbuf);
    for _r in sequential_range(2) {
        for j in affine_range(4) {
            acc[[j, i.p, i.x]] += load(x[[i.p, j * 64 + i.x]]);
        }
    }
    for j in affine_range(4) {
        store(out[[i.p, j * 64 + i.x]], acc[j] * 3.0);
    }
    store(last[..], acc[3]);
    (out, last)
}

#[test]
fn fixed_block_counts_accumulate_per_block() {
    let x = rand_f32(Ix2(128, 256), 7, -1.0, 1.0);
    let mut core = NeuronCore::default();
    let (out, last) = fixed_blocks::host(&mut core, x.view()).unwrap();
    for p in 0..128 {
        for f in 0..256 {
            // 0 + x + x, then · 3: each step rounded to fp32 as the engines do.
            let twice = x[[p, f]] + x[[p, f]];
            assert_eq!(out[[p, f]], twice * 3.0, "[{p}, {f}]");
        }
        for f in 0..64 {
            assert_eq!(
                last[[p, f]],
                x[[p, 192 + f]] + x[[p, 192 + f]],
                "[{p}, {f}]"
            );
        }
    }
    // The fixed tile is one SBUF tile of 4 · 64 f32 per partition.
    let p = fixed_blocks::KERNEL.program();
    let acc = p.tiles().iter().find(|t| t.name == "acc").unwrap();
    assert_eq!(acc.shape.dims(), &[128, 4, 64]);
    assert!(acc.blocks.is_none());
}

/// A ragged row count: `(N + 127) / 128` blocks, zeroed by a loop over the launch's blocks,
/// filled under a mask and read back block by block.
#[kernel]
fn ragged_blocks(x: Hbm<f32, N, 8>) -> Hbm<f32, N, 8> {
    let out = ndarray([N, 8], f32, SharedHbm);
    let i = mgrid![0..128, 0..8];
    let t = zeros([(N + 127) / 128, par_dim(128), 8], f32, Sbuf);
    for k in affine_range((N + 127) / 128) {
        t[[k, i.p, i.x]] += load(x[[k * 128 + i.p, i.x]], mask = k * 128 + i.p < N);
    }
    for k in affine_range((N + 127) / 128) {
        store(out[[k * 128 + i.p, i.x]], t[k], mask = k * 128 + i.p < N);
    }
    out
}

#[test]
fn ragged_block_counts_round_trip() {
    for n in [1usize, 128, 200, 700] {
        let x = rand_f32(Ix2(n, 8), n as u64, -2.0, 2.0);
        let mut core = NeuronCore::default();
        let out = ragged_blocks::host(&mut core, x.view()).unwrap();
        // 0 + x is x.
        assert_eq!(out, x, "N={n}");
    }
}

/// Writes the even blocks of a `K / 128`-block tile, then stores every block: the odd ones
/// were never written.
#[kernel]
fn writes_even_blocks(x: Hbm<f32, K, 64>) -> Hbm<f32, K, 64> {
    let out = ndarray([K, 64], f32, SharedHbm);
    let i = mgrid![0..128, 0..64];
    let t = ndarray([K / 128, par_dim(128), 64], f32, Sbuf);
    for j in affine_range(K / 256) {
        t[[2 * j, i.p, i.x]] = load(x[[2 * j * 128 + i.p, i.x]]);
    }
    for k in affine_range(K / 128) {
        store(out[[k * 128 + i.p, i.x]], t[k]);
    }
    out
}

#[test]
fn strict_mode_sees_each_blocks_bytes() {
    let x = rand_f32(Ix2(512, 64), 3, -1.0, 1.0);
    let mut core = NeuronCore::default().with_strict(true);
    let err = writes_even_blocks::host(&mut core, x.view()).unwrap_err();
    let LaunchError::Exec(e) = &err else {
        panic!("{err:?}")
    };
    // Block 1 (the first odd one) is the first store of unwritten bytes.
    assert_eq!(e.mnemonic, "store", "{err}");
    assert!(e.what.contains("tile `t`"), "{err}");
    assert!(e.what.contains("loop values by depth [1]"), "{err}");
    // The written blocks hold their rows: a plain launch stores them.
    let mut core = NeuronCore::default().with_strict(false);
    let out = writes_even_blocks::host(&mut core, x.view()).unwrap();
    for k in [0usize, 2] {
        for p in 0..128 {
            for f in 0..64 {
                assert_eq!(out[[k * 128 + p, f]], x[[k * 128 + p, f]]);
            }
        }
    }
}

#[test]
fn the_timing_model_sees_the_launchs_blocks() {
    use nki::timing::{Mode, Timing};
    let peak = |k: usize| {
        let lhs = DeviceTensor::from_array(&Array2::from_elem((k, 128), bf16::ZERO)).unwrap();
        let rhs = DeviceTensor::from_array(&Array2::from_elem((k, 512), bf16::ZERO)).unwrap();
        let mut out = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
        let mut core = NeuronCore::default();
        let s = Timing::new()
            .mode(Mode::TimingOnly)
            .run(
                &mut core,
                &hoist_load_blocks::KERNEL,
                &[lhs.arg(), rhs.arg()],
                &mut [out.arg_mut()],
            )
            .unwrap();
        s.profile().peak_sbuf_bytes
    };
    // Each K tile adds 256 B (lhs_t_tiles) + 1 KiB (rhs_tiles) per partition; the capacity
    // reserved for 152 of them is not counted.
    let (small, large) = (peak(256), peak(1024));
    assert_eq!(large - small, 6 * 1280, "{small} {large}");
    assert!(large < 32 * 1024, "{large}");
}

/// NKI's `nl.zeros((2, nl.par_dim(128), 512), buffer=nl.psum)`: two PSUM blocks, one bank
/// each, accumulating the two 512-column halves of the result over K.
#[kernel]
fn psum_blocks(lhs_t: Hbm<bf16, K, 128>, rhs: Hbm<bf16, K, 1024>) -> Hbm<f32, 128, 1024> {
    let out = ndarray([128, 1024], f32, SharedHbm);
    let i = mgrid![0..128, 0..512];
    let j = mgrid![0..128, 0..128];
    let acc = zeros((2, par_dim(128), 512), f32, Psum);
    for k in affine_range(K / 128) {
        let a = load(lhs_t[[k * 128 + j.p, j.x]]);
        for n in affine_range(2) {
            let b = load(rhs[[k * 128 + i.p, n * 512 + i.x]]);
            acc[n] += nc_matmul(a, b);
        }
    }
    for n in affine_range(2) {
        store(out[[i.p, n * 512 + i.x]], copy(acc[n], dtype = f32));
    }
    out
}

#[test]
fn psum_block_tiles_take_a_bank_per_block() {
    let p = psum_blocks::KERNEL.program();
    let acc = p.tiles().iter().find(|t| t.name == "acc").unwrap();
    assert_eq!(acc.shape.dims(), &[128, 2, 512]);
    assert_eq!(acc.addr % 2048, 0);
    assert_eq!(p.psum_banks(), 2);
    for k in [128usize, 384] {
        let a = rand_int(Ix2(k, 128), 11, -3, 3);
        let b = rand_int(Ix2(k, 1024), 12, -3, 3);
        let mut core = NeuronCore::default();
        let out = psum_blocks::host(&mut core, to_bf16(&a).view(), to_bf16(&b).view()).unwrap();
        let reference = matmul_reference(&a, &b);
        for ((r, c), &x) in out.indexed_iter() {
            assert_eq!(f64::from(x), reference[[r, c]], "K={k} at [{r}, {c}]");
        }
    }
}

/// NKI's `nl.ndarray((nl.par_dim(128), 512), buffer=nl.psum)` without block axes (flash
/// attention's tiles): a plain tile, an operand as it is.
#[kernel]
fn par_dim_alone(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = ndarray((par_dim(128), 512), f32, Sbuf);
    t[..] = load(x[..]);
    let acc = zeros((par_dim(128), 512), f32, Psum);
    acc[..] = multiply(t, 2.0);
    store(out[..], copy(acc));
    out
}

#[test]
fn par_dim_without_block_axes_is_a_plain_tile() {
    let p = par_dim_alone::KERNEL.program();
    let t = p.tiles().iter().find(|t| t.name == "t").unwrap();
    assert_eq!(t.shape.dims(), &[128, 512]);
    let x = rand_int(Ix2(128, 512), 5, -8, 8);
    let out = par_dim_alone::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(out, x.mapv(|v| v * 2.0));
}
