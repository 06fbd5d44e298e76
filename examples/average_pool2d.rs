//! NKI's average-pooling tutorial kernel, `tensor_avgpool_kernel` (aws-neuron/nki-samples,
//! `src/nki_samples/tutorials/average_pool2d/average_pool2d_nki_kernels.py`, in its
//! `neuronxcc.nki` form): a C×H×W input, channels on the partitions, pooled over square
//! `pool × pool` windows into C×(H/pool)×(W/pool). The windows come from a 5-D index view of
//! the 3-D tile, `[c, h_out, i, w_out, j] → (c, pool·h_out + i, pool·w_out + j)`, summed over
//! axes 2 and 4 and divided by `pool²`. Checked against an f64 reference.
//!
//! `cargo run --release --example average_pool2d` runs the tutorial's example (2×6×6 fp16, the
//! values 0..72, pool 2 → 2×3×3) and the benchmark shape, [128, 512, 512] f32 → [128, 256, 256].
//! Ragged channel counts are in `tests/all/tutorials_pool.rs`.
//!
//! The tutorial loads the whole input as one tile (C ≤ 128, H·W small). Here the channel count
//! is symbolic (`C`) and the channels are processed 128 at a time, the last tile masked; and the
//! rows are processed in blocks of `OUT_ROWS` output rows (`POOL_SIZE·OUT_ROWS` input rows),
//! since a 512×512 image per partition is larger than a partition of SBUF (and than the 64K
//! elements of one Vector instruction). H, W, the pool size (NKI's `pool_size` argument) and
//! `OUT_ROWS` are meta-parameters, and the output's dimensions `{ H / POOL_SIZE }` and
//! `{ W / POOL_SIZE }` are computed from them; `#[kernel(...)]` lists one instantiation per
//! shape used, each a kernel of its own: `tensor_avgpool_kernel_6x6` (fp16, the tutorial's
//! example), `tensor_avgpool_kernel_9x12_pool3` (fp16, for the tests) and
//! `tensor_avgpool_kernel_512` (f32, the benchmark). The tutorial's kernel takes any dtype
//! (`in_tensor.dtype`); here the dtype is the type parameter `T`, set per instantiation.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use common::Real;
use nki::ndarray::{Array3, ArrayView3, Ix3};
use nki::prelude::*;

/// `tensor_avgpool_kernel` for the dtype `T`: `[C, H, W]` inputs pooled by `POOL_SIZE`
/// into `[C, H/POOL_SIZE, W/POOL_SIZE]`, `OUT_ROWS` output rows per tile (it must divide
/// `H/POOL_SIZE`). Per tile: a load of `POOL_SIZE·OUT_ROWS` input rows, the 5-D view summed over
/// its axes 2 and 4, the division by `POOL_SIZE²`, a store, each masked to the tile's channels
/// below `C` (the tutorial's single tile has exactly `C` partitions).
///
/// One kernel per dtype and shape: `tensor_avgpool_kernel_6x6` (fp16, the tutorial's example:
/// 6×6 images, pool 2, one tile of rows), `tensor_avgpool_kernel_9x12_pool3` (fp16, 9×12
/// images, pool 3, one output row per tile: three row tiles; for `tests/all/tutorials_pool.rs`) and
/// `tensor_avgpool_kernel_512` (f32, the benchmark's 512×512 images, 16 output rows per tile).
#[kernel(
    tensor_avgpool_kernel_6x6(T = f16, H = 6, W = 6, POOL_SIZE = 2, OUT_ROWS = 3),
    tensor_avgpool_kernel_9x12_pool3(T = f16, H = 9, W = 12, POOL_SIZE = 3, OUT_ROWS = 1),
    tensor_avgpool_kernel_512(T = f32, H = 512, W = 512, POOL_SIZE = 2, OUT_ROWS = 16),
)]
pub fn tensor_avgpool_kernel<
    T,
    const H: usize,
    const W: usize,
    const POOL_SIZE: usize,
    const OUT_ROWS: usize,
>(
    in_tensor: Hbm<T, C, H, W>,
) -> Hbm<T, C, { H / POOL_SIZE }, { W / POOL_SIZE }> {
    // The output's dimensions, and the pool size.
    let sz_hout = H / POOL_SIZE;
    let sz_wout = W / POOL_SIZE;
    let out_tensor = ndarray([C, sz_hout, sz_wout], in_tensor.dtype, SharedHbm);
    let sz_pool = POOL_SIZE;
    // Output rows per tile, and the input rows they pool.
    let sz_hout_tile = OUT_ROWS;
    let sz_hin_tile = sz_pool * sz_hout_tile;

    // Indices of an input tile, of an output tile, and the pool pattern (two extra dimensions
    // for the window): axes 1 and 2 index the rows (2 inside the window), axes 3 and 4 the
    // columns (4 inside the window).
    let (i_p, i_hin, i_win) = mgrid![0..128, 0..sz_hin_tile, 0..W];
    let (i_q, i_hout, i_wout) = mgrid![0..128, 0..sz_hout_tile, 0..sz_wout];
    let (i_0, i_1, i_2, i_3, i_4) =
        mgrid![0..128, 0..sz_hout_tile, 0..sz_pool, 0..sz_wout, 0..sz_pool];

    for c in affine_range((C + 127) / 128) {
        for h in affine_range(sz_hout / sz_hout_tile) {
            let in_tile = load(
                in_tensor[[c * 128 + i_p, h * sz_hin_tile + i_hin, i_win]],
                mask = c * 128 + i_p < C,
            );

            // The pooling: the tile viewed in 5-D, reduced over the window's axes.
            let sum_tile = sum(
                in_tile[[i_0, sz_pool * i_1 + i_2, sz_pool * i_3 + i_4]],
                axis = [2, 4],
                mask = c * 128 + i_0 < C,
            );
            let out_tile = divide(sum_tile, sz_pool * sz_pool, mask = c * 128 + i_q < C);

            store(
                out_tensor[[c * 128 + i_q, h * sz_hout_tile + i_hout, i_wout]],
                out_tile,
                mask = c * 128 + i_q < C,
            );
        }
    }
    out_tensor
}

/// The mean of each `pool × pool` window, in f64 (NumPy's
/// `x.reshape(C, H/p, p, W/p, p).mean(axis=(2, 4))`).
pub fn reference<T: Real>(input: ArrayView3<T>, pool: usize) -> Array3<f64> {
    let (c, h, w) = input.dim();
    Array3::from_shape_fn((c, h / pool, w / pool), |(k, i, j)| {
        let mut s = 0.0;
        for di in 0..pool {
            for dj in 0..pool {
                s += input[[k, pool * i + di, pool * j + dj]].to_f64();
            }
        }
        s / (pool * pool) as f64
    })
}

/// Compares a kernel's output with [`reference`] within `2·UNIT·|ref| + pool²·2⁻²⁴·mean|x| +
/// 2·TINY` (the output type's unit roundoff and half its smallest subnormal).
///
/// The window's sum is folded in fp32 (`pool² − 1` roundings, each at most `2⁻²⁴` of the sum of
/// the magnitudes), rounded to the output type once (`UNIT`, or `TINY` below its normal range)
/// and divided by `pool²` (a second rounding, unless `pool²` is a power of two and the result
/// is normal).
pub fn check<T: Real>(out: ArrayView3<T>, input: ArrayView3<T>, pool: usize) -> common::Comparison {
    let (c, h, w) = input.dim();
    assert_eq!(out.dim(), (c, h / pool, w / pool), "output shape");
    let want = reference(input, pool);
    let magnitude = reference(input.mapv(|x| x.to_f64().abs() as f32).view(), pool);
    let fold = (pool * pool) as f64 * 2f64.powi(-24);
    common::compare(
        out.iter().map(|x| x.to_f64()),
        want.iter().copied(),
        want.iter()
            .zip(&magnitude)
            .map(|(r, m)| 2.0 * (T::UNIT * r.abs() + T::TINY) + fold * m),
    )
}

/// The tutorial's example input: `arange(C·H·W)` in fp16, shape (C, H, W).
pub fn tutorial_input(c: usize, h: usize, w: usize) -> Array3<f16> {
    Array3::from_shape_fn((c, h, w), |(k, i, j)| {
        f16::from_f64(((k * h + i) * w + j) as f64)
    })
}

/// NKI's average-pooling tutorial kernel on 2×6×6 fp16 and [128, 512, 512] f32, checked against an
/// f64 reference.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let mut core = NeuronCore::default();
    let mut ok = true;

    // The tutorial's example.
    let x = tutorial_input(2, 6, 6);
    let out = tensor_avgpool_kernel_6x6(&mut core, &DeviceTensor::from_array(&x)?)?;
    let out = out.into_array::<Ix3>()?;
    println!("input 2×6×6 fp16:\n{x}\naverage-pooled by 2:\n{out}");
    let c = check(out.view(), x.view(), 2);
    println!("tensor_avgpool_kernel_6x6 2×6×6 fp16: against the f64 reference, {c}");
    ok &= c.within;

    // The benchmark shape.
    const C: usize = 128;
    const H: usize = 512;
    const W: usize = 512;
    let x = common::random_f32(Ix3(C, H, W), 8, -1.0, 1.0);
    let x_dev = DeviceTensor::from_array(&x)?;
    cli.profile.run(
        &mut core,
        &tensor_avgpool_kernel_512::KERNEL,
        &[x_dev.arg()],
    )?;
    let mut out = DeviceTensor::<f32>::zeros(&[C, H / 2, W / 2])?;
    let time = common::median_time(5, || {
        tensor_avgpool_kernel_512::launch_into(&mut core, &x_dev, &mut out)
    })?;
    println!("{}", tensor_avgpool_kernel_512::KERNEL.program());
    let out = out.into_array::<Ix3>()?;
    let c = check(out.view(), x.view(), 2);
    println!(
        "tensor_avgpool_kernel_512 [{C}, {H}, {W}] f32 → [{C}, {}, {}]: against the f64 reference, \
         {c}; median of 5 launches {:.2} ms",
        H / 2,
        W / 2,
        time.as_secs_f64() * 1e3
    );
    ok &= c.within;

    if !ok {
        return Err("average_pool2d: result outside the error bound".into());
    }
    Ok(())
}
