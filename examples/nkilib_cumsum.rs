//! The NKI Library's `cumsum` kernel (`src/nkilib_src/nkilib/core/cumsum/cumsum.py` of
//! aws-neuron/nki-library): the running sum along the last axis, rows in tiles of 128
//! partitions, columns in tiles of 2048 walked by a sequential loop whose carry (the last
//! column of the previous tile) seeds `tensor_tensor_scan`'s `initial`.
//!
//! Written in NKI 0.6's destination-first dialect as the source is: `ndarray` tiles,
//! `nisa::memset`, `nisa::dma_copy(dst = , src = )`, `nisa::tensor_tensor_scan(dst = , data0 = ,
//! data1 = , initial = , op0 = , op1 = )`, ragged tiles by `min()` slices and the carry's `if`
//! on the sequential loop index.
//!
//! What differs, and why:
//! - Rust's spelling (`x[[a..b, c..d]]`, `nisa::`, `let`).
//! - The shape and the dtype are the kernel's signature (`Hbm<T, B, H>` for the 2-D form,
//!   `Hbm<T, B, S, H>` for the 3-D one), so `axis` is always the last one and the source's
//!   `kernel_assert(axis == rank - 1)` is a property of the types; the 3-D form reshapes its HBM
//!   input and output to `(B * S, H)` as the source does for any rank.
//! - The library's `TiledRange(outer_dim, P_MAX)` (tiles of 128 rows, the last one ragged) is
//!   written out as a loop over `div_ceil(outer_dim, 128)` tiles with
//!   `p_size = min(128, outer_dim - p_start)`, and its `div_ceil` as `(a + b - 1) / b`.
//! - The loops are a `#[helper]` over the 2-D views, called by the 2-D kernel and by the 3-D
//!   one after its reshape (the source has one function for every rank).
//! - Both loops are `static_range` (unrolled), so `min()` of a loop index is a number when the
//!   kernel is lowered and sizes the ragged slices exactly. The source's
//!   `nl.sequential_range` would only state the order the unrolled loop has anyway (each free
//!   tile's scan reads the previous tile's carry); whether `sequential_range` with `min()`-sized
//!   slices lowers here was not tried.
//! - As in the source, `result_sb` has the input's dtype, so in bf16 each carry is rounded to
//!   bf16 before it seeds the next tile; past 2048 columns the error can exceed the library
//!   test's `atol + rtol·|want|` (see `tests/all/nkilib_cumsum.rs`).
//!
//! `cargo run --release --example nkilib_cumsum` runs the `[2048, 8192]` f32 shape of the
//! library test's sweep, checks it against an f64 running sum with the test's tolerance, and
//! prints the median host time per launch and the timing model's estimate for Trn2 and Trn3.

#![allow(non_snake_case)] // NKI's names: P_MAX, F_TILE_SIZE

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, ArrayView2, Ix2};
use nki::prelude::*;
use nki::program::Target;
use nki::timing::{Detail, Params, Timing};

/// The source's loops over a 2-D `(outer_dim, last_dim)` view of the input `x` and the output
/// `y` (both HBM): every rank reshapes to this before the tiles are walked.
#[helper]
pub fn cumsum_2d(x: Tensor, y: Tensor, outer_dim: usize, last_dim: usize) {
    let P_MAX = 128;
    let F_TILE_SIZE = 2048;

    let num_f_tiles = (last_dim + F_TILE_SIZE - 1) / F_TILE_SIZE;
    let num_p_tiles = (outer_dim + P_MAX - 1) / P_MAX;

    for p_tile_idx in static_range(num_p_tiles) {
        let p_start = p_tile_idx * P_MAX;
        let p_size = min(P_MAX, outer_dim - p_start);

        // The carry for this partition tile, in float32 as the scan accumulates.
        let init_sb = ndarray([P_MAX, 1], f32, Sbuf);
        nisa::memset(dst = init_sb, value = 0.0);

        // data0 of the scan: result[i] = 1 * result[i - 1] + data[i].
        let ones_sb = ndarray([P_MAX, F_TILE_SIZE], f32, Sbuf);
        nisa::memset(dst = ones_sb, value = 1.0);

        for f_tile_idx in static_range(num_f_tiles) {
            let f_start = f_tile_idx * F_TILE_SIZE;
            let f_end = min(f_start + F_TILE_SIZE, last_dim);
            let f_size = f_end - f_start;

            let data_sb = ndarray([P_MAX, F_TILE_SIZE], x.dtype, Sbuf);
            nisa::dma_copy(
                dst = data_sb[[0..p_size, 0..f_size]],
                src = x[[p_start..p_start + p_size, f_start..f_end]],
            );

            let result_sb = ndarray([P_MAX, F_TILE_SIZE], x.dtype, Sbuf);
            nisa::tensor_tensor_scan(
                dst = result_sb[[0..p_size, 0..f_size]],
                data0 = ones_sb[[0..p_size, 0..f_size]],
                data1 = data_sb[[0..p_size, 0..f_size]],
                initial = init_sb[[0..p_size, 0..1]],
                op0 = multiply,
                op1 = add,
            );

            nisa::dma_copy(
                dst = y[[p_start..p_start + p_size, f_start..f_end]],
                src = result_sb[[0..p_size, 0..f_size]],
            );

            // Carry the last column into the next free tile.
            if f_tile_idx + 1 < num_f_tiles {
                let last_col_idx = f_size - 1;
                nisa::tensor_copy(
                    dst = init_sb[[0..p_size, 0..1]],
                    src = result_sb[[0..p_size, last_col_idx..last_col_idx + 1]],
                );
            }
        }
    }
}

/// Cumulative sum along the last axis of a `[B, H]` HBM tensor (the 2-D form).
#[kernel(
    cumsum_f32_2048x8192(T = f32, B = 2048, H = 8192),
    cumsum_f32_1x256(T = f32, B = 1, H = 256),
    cumsum_f32_128x2048(T = f32, B = 128, H = 2048),
    cumsum_f32_200x5000(T = f32, B = 200, H = 5000),
    cumsum_bf16_300x6144(T = bf16, B = 300, H = 6144),
    cumsum_bf16_64x1000(T = bf16, B = 64, H = 1000),
)]
pub fn cumsum<T, const B: usize, const H: usize>(x: Hbm<T, B, H>) -> Hbm<T, B, H> {
    let y = ndarray([B, H], x.dtype, SharedHbm);
    cumsum_2d(x, y, B, H);
    y
}

/// Cumulative sum along the last axis of a `[B, S, H]` HBM tensor: input and output reshaped
/// to `(B * S, H)`, as the source does for any rank.
#[kernel(
    cumsum_3d_bf16_64x4x1024(T = bf16, B = 64, S = 4, H = 1024),
    cumsum_3d_f32_50x3x5000(T = f32, B = 50, S = 3, H = 5000),
)]
pub fn cumsum_3d<T, const B: usize, const S: usize, const H: usize>(
    x: Hbm<T, B, S, H>,
) -> Hbm<T, B, S, H> {
    let y = ndarray([B, S, H], x.dtype, SharedHbm);
    let shape_2d = (B * S, H);
    let x_2d = x.reshape(shape_2d);
    let y_2d = y.reshape(shape_2d);
    cumsum_2d(x_2d, y_2d, B * S, H);
    y
}

/// The running sum along the last axis in f64, row by row.
pub fn reference(x: ArrayView2<f64>) -> Array2<f64> {
    let mut want = Array2::<f64>::zeros(x.dim());
    for (r, row) in x.rows().into_iter().enumerate() {
        let mut s = 0.0;
        for (c, v) in row.iter().enumerate() {
            s += v;
            want[[r, c]] = s;
        }
    }
    want
}

/// The library test's tolerance: `atol` 1e-2 above 5000 columns (1e-3 below), `rtol` 1e-2 for
/// bf16 (1e-3 otherwise); `|got - want| <= atol + rtol * |want|` as `np.allclose` checks.
pub fn tolerance(h: usize, is_bf16: bool) -> (f64, f64) {
    let atol = if h > 5000 { 1e-2 } else { 1e-3 };
    let rtol = if is_bf16 { 1e-2 } else { 1e-3 };
    (atol, rtol)
}

/// The NKI Library's cumsum on `[2048, 8192]` f32, checked against f64, timed on the host and
/// estimated by the timing model for Trn2 and Trn3.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (b, h) = (2048, 8192);
    let x = common::random_f32(Ix2(b, h), 42, -1.0, 1.0);
    let xd = DeviceTensor::from_array(&x)?;
    let mut core = NeuronCore::default();
    cli.profile
        .run(&mut core, &cumsum_f32_2048x8192::KERNEL, &[xd.arg()])?;
    let mut out = cumsum_f32_2048x8192(&mut core, &xd)?;
    let t = common::median_time(5, || {
        cumsum_f32_2048x8192::launch_into(&mut core, &xd, &mut out)
    })?;
    let got = out.into_array::<Ix2>()?;
    let want = reference(x.mapv(f64::from).view());
    let (atol, rtol) = tolerance(h, false);
    let c = common::compare(
        got.iter().map(|&g| f64::from(g)),
        want.iter().copied(),
        want.iter().map(|w| atol + rtol * w.abs()),
    );
    println!("nkilib cumsum [{b}, {h}] f32: {c}; median launch {t:.2?} (5 launches)");
    for target in [Target::Trn2, Target::Trn3] {
        let mut core = NeuronCore::new(target);
        let schedule = Timing::new()
            .params(Params::for_target(target))
            .detail(Detail::Summary)
            .run_shapes(&mut core, &cumsum_f32_2048x8192::KERNEL, &[&[b, h]])?;
        println!("  modeled on {target:?}: {:.1} µs", schedule.latency_us());
    }
    if !c.within {
        return Err("result outside the library test's tolerance".into());
    }
    Ok(())
}
