//! The NKI Library's top-k by scanning (`naive_scanning_topk` and `topk_core` of
//! `src/nkilib_src/nkilib/core/topk/rotational_topk_utils.py` in aws-neuron/nki-library, the
//! library's `SCANNING` method): the `k` largest values of each row of a `[BxS, V]` HBM tensor
//! and their indices, rows in tiles of 128 partitions, each tile searched in folds of 8 on the
//! Vector engine: `max8` finds a fold's 8 largest values and `nc_match_replace8` knocks them out
//! of the tile (replaced by −inf) while writing their indices; a last partial fold takes `max8`
//! and `nc_find_index8` into 8-wide buffers and copies the `k mod 8` it needs on the Scalar
//! engine.
//!
//! Written in NKI 0.6's destination-first dialect as the source is (`ndarray` tiles,
//! `nisa::memset`, `nisa::dma_copy(dst = , src = )`, `nisa::max8`, `nisa::nc_match_replace8`
//! in place with `dst_idx`, `nisa::nc_find_index8`, `nisa::tensor_copy(engine = scalar)`).
//!
//! What differs, and why:
//! - Rust's spelling (`x[[a..b, c..d]]`, `nisa::`, `let`); the shapes and `k` are the kernel's
//!   meta-parameters (the source reads them from its `TopkConfig`), and the dtype its type.
//! - The source shards `BxS` over the logical NeuronCore's programs (`n_prgs`, `prg_id`); this
//!   port is one program (`lnc_degree` 1 of the library test's sweep), so `per_lnc_BxS` is `BxS`
//!   and `lnc_batch_start` is 0.
//! - Both loops are `static_range` (unrolled): the tile loop's last tile is ragged by `min()`,
//!   and the fold loop's last fold is chosen by an `if` on its index, both numbers when the
//!   kernel is lowered (the source's `nl.sequential_range` over tiles states the order the
//!   unrolled loop has anyway).
//! - The source's padding value for a ragged tile, `BFLOAT16_MIN` / `FLOAT32_MIN`, is the
//!   dtype's lowest finite value, `finfo(dtype).min`.
//!
//! `cargo run --release --example nkilib_topk` runs `BxS = 16 · 5`, `V = 8192`, `k = 64` f32
//! (batch 16, seqlen 5 of the library test's sweep), checks every row against a sort in f64,
//! and prints the median host time per launch and the timing model's estimate for Trn2 and
//! Trn3. On the host, `max8`, `nc_find_index8` and `nc_match_replace8` run the Vector engine's
//! routines (`nki-runtime/src/engines/top8.rs`: rows loaded by runs, searched on integer keys,
//! an in-place `nc_match_replace8` writing only its 8 replacements): 35 ms per launch of this
//! shape on a 2.9 GHz Xeon under a load average of 5, where the definitions alone took 660 ms.
//! `tutorials --cases topk` races it against `torch.topk` and numpy.

#![allow(non_snake_case)] // NKI's names: P_MAX, BxS

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, ArrayView2, Ix2};
use nki::prelude::*;
use nki::program::Target;
use nki::timing::{Detail, Params, Timing};

/// `topk_core`: the `k` largest values of each row of the SBUF tile `data` (`rows` of its
/// partitions, `V` columns; modified in place) into `out_vals` and their indices into
/// `out_inds`, 8 per fold.
#[helper]
pub fn topk_core(data: Tile, out_vals: Tile, out_inds: Tile, rows: usize, V: usize, k: usize) {
    let TOPK_PER_STAGE = 8;
    let n_fold = (k + TOPK_PER_STAGE - 1) / TOPK_PER_STAGE;
    for fold_idx in static_range(n_fold) {
        if (k % TOPK_PER_STAGE != 0) & (fold_idx == n_fold - 1) {
            let val_buf = ndarray([rows, TOPK_PER_STAGE], out_vals.dtype, Sbuf);
            let ind_buf = ndarray([rows, TOPK_PER_STAGE], out_inds.dtype, Sbuf);
            nisa::max8(dst = val_buf, src = data[[0..rows, 0..V]]);
            nisa::nc_find_index8(dst = ind_buf, data = data[[0..rows, 0..V]], vals = val_buf);
            let elts_remain = k % TOPK_PER_STAGE;
            nisa::tensor_copy(
                dst = out_vals[[0..rows, k - elts_remain..k]],
                src = val_buf[[0..rows, 0..elts_remain]],
                engine = scalar,
            );
            nisa::tensor_copy(
                dst = out_inds[[0..rows, k - elts_remain..k]],
                src = ind_buf[[0..rows, 0..elts_remain]],
                engine = scalar,
            );
        } else {
            let f0 = fold_idx * TOPK_PER_STAGE;
            nisa::max8(
                dst = out_vals[[0..rows, f0..f0 + TOPK_PER_STAGE]],
                src = data[[0..rows, 0..V]],
            );
            nisa::nc_match_replace8(
                dst = data[[0..rows, 0..V]],
                dst_idx = out_inds[[0..rows, f0..f0 + TOPK_PER_STAGE]],
                data = data[[0..rows, 0..V]],
                vals = out_vals[[0..rows, f0..f0 + TOPK_PER_STAGE]],
                imm = f32::NEG_INFINITY,
            );
        }
    }
}

/// `naive_scanning_topk`: the `K` largest values of each row of `inp` (`[BxS, V]`, largest
/// first) and their indices (uint32).
#[kernel(
    topk_f32_80x8192_k64(T = f32, BxS = 80, V = 8192, K = 64),
    topk_f32_7x256_k1(T = f32, BxS = 7, V = 256, K = 1),
    topk_f32_200x3168_k13(T = f32, BxS = 200, V = 3168, K = 13),
    topk_bf16_130x4058_k20(T = bf16, BxS = 130, V = 4058, K = 20),
    topk_bf16_16x256_k256(T = bf16, BxS = 16, V = 256, K = 256),
)]
pub fn naive_scanning_topk<T, const BxS: usize, const V: usize, const K: usize>(
    inp: Hbm<T, BxS, V>,
) -> (Hbm<T, BxS, K>, Hbm<u32, BxS, K>) {
    let P_MAX = 128;
    let topk_values = ndarray([BxS, K], inp.dtype, SharedHbm);
    let topk_indices = ndarray([BxS, K], u32, SharedHbm);

    let tile_size = min(BxS, P_MAX);
    let n_tiles = (BxS + tile_size - 1) / tile_size;
    for tile_idx in static_range(n_tiles) {
        let tile_batch_start = tile_idx * tile_size;
        let tile_batch_end = min(tile_batch_start + tile_size, BxS);
        let tile_bxs = tile_batch_end - tile_batch_start;

        let inp_sbuf = ndarray([tile_size, V], inp.dtype, Sbuf);
        if tile_bxs < tile_size {
            nisa::memset(dst = inp_sbuf, value = finfo(inp.dtype).min);
        }
        nisa::dma_copy(
            dst = inp_sbuf[[0..tile_bxs, 0..V]],
            src = inp[[tile_batch_start..tile_batch_end, 0..V]],
        );

        let out_vals = ndarray([tile_size, K], inp.dtype, Sbuf);
        let out_inds = ndarray([tile_size, K], u32, Sbuf);
        topk_core(inp_sbuf, out_vals, out_inds, tile_size, V, K);
        nisa::dma_copy(
            dst = topk_values[[tile_batch_start..tile_batch_end, 0..K]],
            src = out_vals[[0..tile_bxs, 0..K]],
        );
        nisa::dma_copy(
            dst = topk_indices[[tile_batch_start..tile_batch_end, 0..K]],
            src = out_inds[[0..tile_bxs, 0..K]],
        );
    }
    (topk_values, topk_indices)
}

/// Each row's `k` largest values in f64, largest first.
pub fn reference(x: ArrayView2<f64>, k: usize) -> Array2<f64> {
    let mut want = Array2::<f64>::zeros((x.nrows(), k));
    for (r, row) in x.rows().into_iter().enumerate() {
        let mut v: Vec<f64> = row.to_vec();
        v.sort_by(|a, b| b.total_cmp(a));
        for (j, &x) in v.iter().take(k).enumerate() {
            want[[r, j]] = x;
        }
    }
    want
}

/// Whether the result is a top-k of `x`: the values are each row's `k` largest (largest first),
/// and the indices are distinct positions holding them (ties may be broken either way, as the
/// library test accepts).
pub fn is_topk(
    x: ArrayView2<f64>,
    vals: ArrayView2<f64>,
    idx: ArrayView2<u32>,
) -> Result<(), String> {
    let k = vals.ncols();
    let want = reference(x, k);
    for r in 0..x.nrows() {
        let mut seen = std::collections::HashSet::new();
        for j in 0..k {
            if vals[[r, j]] != want[[r, j]] {
                return Err(format!(
                    "row {r}, value {j}: {} where the sort gives {}",
                    vals[[r, j]],
                    want[[r, j]]
                ));
            }
            let i = idx[[r, j]] as usize;
            if i >= x.ncols() || x[[r, i]] != vals[[r, j]] || !seen.insert(i) {
                return Err(format!(
                    "row {r}, index {j}: {i} does not hold {}",
                    vals[[r, j]]
                ));
            }
        }
    }
    Ok(())
}

/// The NKI Library's scanning top-k on `[80, 8192]` f32 with `k = 64`, checked against a sort,
/// timed on the host and estimated by the timing model for Trn2 and Trn3.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (b, v, k) = (80, 8192, 64);
    let x = common::random_f32(Ix2(b, v), 42, -4.0, 4.0);
    let xd = DeviceTensor::from_array(&x)?;
    let mut core = NeuronCore::default();
    let kernel = &topk_f32_80x8192_k64::KERNEL;
    cli.profile.run(&mut core, kernel, &[xd.arg()])?;
    let (mut vals, mut idx) = topk_f32_80x8192_k64(&mut core, &xd)?;
    let t = common::median_time(5, || {
        topk_f32_80x8192_k64::launch_into(&mut core, &xd, &mut vals, &mut idx)
    })?;
    let (vals, idx) = (vals.into_array::<Ix2>()?, idx.into_array::<Ix2>()?);
    let check = is_topk(
        x.mapv(f64::from).view(),
        vals.mapv(f64::from).view(),
        idx.view(),
    );
    println!(
        "nkilib top-k (scanning) [{b}, {v}] f32, k = {k}: {}; median launch {t:.2?} (5 launches)",
        match &check {
            Ok(()) => "every row's top-k, largest first".to_string(),
            Err(e) => e.clone(),
        }
    );
    for target in [Target::Trn2, Target::Trn3] {
        let mut core = NeuronCore::new(target);
        let schedule = Timing::new()
            .params(Params::for_target(target))
            .detail(Detail::Summary)
            .run_shapes(&mut core, kernel, &[&[b, v]])?;
        println!("  modeled on {target:?}: {:.1} µs", schedule.latency_us());
    }
    check.map_err(|e| e.into())
}
