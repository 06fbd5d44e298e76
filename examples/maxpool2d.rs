//! NKI's max-pooling example, `tensor_maxpool_kernel_` (the advanced-indexing example of NKI's
//! documentation, "index case 3"; nki-samples' average pooling with `max` for `sum`): a
//! C×H×W input, channels on the partitions, max-pooled over square `pool × pool` windows into
//! C×(H/pool)×(W/pool) through a 5-D index view of the 3-D tile,
//! `[c, h_out, i, w_out, j] → (c, pool·h_out + i, pool·w_out + j)`, reduced with `max` over axes
//! 2 and 4. Checked against an f64 reference (the maximum is one of the inputs: exact).
//!
//! `cargo run --release --example maxpool2d` runs the example's shape (2×6×6, the values 0..72,
//! pool 2 → 2×3×3; fp16 here, bf16 in NKI's example) and [128, 512, 512] f32 → [128, 256, 256].
//! Ragged channel counts are in `tests/tutorials_pool.rs`.
//!
//! As in `examples/average_pool2d.rs`: the channel count is symbolic (`C`, 128 channels per
//! tile, the last tile masked), the rows are processed in blocks of `out_rows` output rows, and
//! `tensor_maxpool_kernel!` stamps the kernel for each literal H, W and pool size.

#[path = "common/mod.rs"]
pub mod common;

use common::Real;
use nki::ndarray::{Array3, ArrayView3, Ix3};
use nki::prelude::*;

/// The kernel for `[C, H, W]` inputs of `dtype` max-pooled by `pool` into
/// `[C, H/pool, W/pool]`, `out_rows` output rows per tile (it must divide `H/pool`). Per tile:
/// a load of `pool·out_rows` input rows, the 5-D view reduced with `max` over its axes 2 and 4,
/// a store, each masked to the tile's channels below `C` (the example's single tile has exactly
/// `C` partitions).
macro_rules! tensor_maxpool_kernel {
    (
        $(#[$attr:meta])* $name:ident, $dtype:ident,
        [$h:tt, $w:tt] -> [$h_out:tt, $w_out:tt], pool = $pool:tt, out_rows = $rows:tt
    ) => {
        $(#[$attr])*
        #[kernel]
        pub fn $name(in_tensor: Hbm<$dtype, C, $h, $w>) -> Hbm<$dtype, C, $h_out, $w_out> {
            let out_tensor = ndarray([C, $h_out, $w_out], $dtype, SharedHbm);

            const SZ_POOL: usize = $pool;
            const SZ_HOUT: usize = $h_out;
            const SZ_WOUT: usize = $w_out;
            // Output rows per tile, and the input rows they pool.
            const SZ_HOUT_TILE: usize = $rows;
            const SZ_HIN_TILE: usize = SZ_POOL * SZ_HOUT_TILE;

            // Indices of an input tile, of an output tile, and the pool pattern (two extra
            // dimensions for the window): axes 1 and 2 index the rows (2 inside the window),
            // axes 3 and 4 the columns (4 inside the window).
            let (i_p, i_hin, i_win) = mgrid![0..128, 0..SZ_HIN_TILE, 0..$w];
            let (i_q, i_hout, i_wout) = mgrid![0..128, 0..SZ_HOUT_TILE, 0..SZ_WOUT];
            let (i_0, i_1, i_2, i_3, i_4) =
                mgrid![0..128, 0..SZ_HOUT_TILE, 0..SZ_POOL, 0..SZ_WOUT, 0..SZ_POOL];

            for c in affine_range((C + 127) / 128) {
                for h in affine_range(SZ_HOUT / SZ_HOUT_TILE) {
                    let in_tile = load(
                        in_tensor[[c * 128 + i_p, h * SZ_HIN_TILE + i_hin, i_win]],
                        mask = c * 128 + i_p < C,
                    );

                    // The pooling: the tile viewed in 5-D, the maximum over the window's axes.
                    let out_tile = max(
                        in_tile[[i_0, SZ_POOL * i_1 + i_2, SZ_POOL * i_3 + i_4]],
                        axis = [2, 4],
                        mask = c * 128 + i_0 < C,
                    );

                    store(
                        out_tensor[[c * 128 + i_q, h * SZ_HOUT_TILE + i_hout, i_wout]],
                        out_tile,
                        mask = c * 128 + i_q < C,
                    );
                }
            }
            out_tensor
        }
    };
}

tensor_maxpool_kernel!(
    /// `tensor_maxpool_kernel_` on fp16 6×6 images, pool 2 (the example's shape), one tile of
    /// rows.
    tensor_maxpool_kernel,
    f16,
    [6, 6] -> [3, 3],
    pool = 2,
    out_rows = 3
);

tensor_maxpool_kernel!(
    /// `tensor_maxpool_kernel_` on f32 512×512 images, pool 2, 16 output rows (32 input rows,
    /// 64 KiB per partition) per tile.
    tensor_maxpool_kernel_512,
    f32,
    [512, 512] -> [256, 256],
    pool = 2,
    out_rows = 16
);

/// The maximum of each `pool × pool` window, in f64 (NumPy's
/// `x.reshape(C, H/p, p, W/p, p).max(axis=(2, 4))`).
pub fn reference<T: Real>(input: ArrayView3<T>, pool: usize) -> Array3<f64> {
    let (c, h, w) = input.dim();
    Array3::from_shape_fn((c, h / pool, w / pool), |(k, i, j)| {
        let mut m = f64::NEG_INFINITY;
        for di in 0..pool {
            for dj in 0..pool {
                m = m.max(input[[k, pool * i + di, pool * j + dj]].to_f64());
            }
        }
        m
    })
}

/// Compares a kernel's output with [`reference`]: the maximum is one of the window's values and
/// converts back to its type exactly, so every element must be equal (bound 0).
pub fn check<T: Real>(out: ArrayView3<T>, input: ArrayView3<T>, pool: usize) -> common::Comparison {
    let (c, h, w) = input.dim();
    assert_eq!(out.dim(), (c, h / pool, w / pool), "output shape");
    let want = reference(input, pool);
    common::compare(
        out.iter().map(|x| x.to_f64()),
        want.iter().copied(),
        std::iter::repeat(0.0),
    )
}

/// The example's input: `arange(C·H·W)` in fp16, shape (C, H, W).
pub fn tutorial_input(c: usize, h: usize, w: usize) -> Array3<f16> {
    Array3::from_shape_fn((c, h, w), |(k, i, j)| {
        f16::from_f64(((k * h + i) * w + j) as f64)
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut core = NeuronCore::default();
    let mut ok = true;

    // The example's shape.
    let x = tutorial_input(2, 6, 6);
    let out = tensor_maxpool_kernel(&mut core, &DeviceTensor::from_array(&x)?)?;
    let out = out.into_array::<Ix3>()?;
    println!("input 2×6×6 fp16:\n{x}\nmax-pooled by 2:\n{out}");
    let c = check(out.view(), x.view(), 2);
    println!("tensor_maxpool_kernel 2×6×6 fp16: against the f64 reference, {c}");
    ok &= c.within;

    // The benchmark shape.
    const C: usize = 128;
    const H: usize = 512;
    const W: usize = 512;
    let x = common::random_f32(Ix3(C, H, W), 9, -1.0, 1.0);
    let x_dev = DeviceTensor::from_array(&x)?;
    let mut out = DeviceTensor::<f32>::zeros(&[C, H / 2, W / 2])?;
    let time = common::median_time(5, || {
        tensor_maxpool_kernel_512::launch_into(&mut core, &x_dev, &mut out)
    })?;
    println!("{}", tensor_maxpool_kernel_512::KERNEL.program());
    let out = out.into_array::<Ix3>()?;
    let c = check(out.view(), x.view(), 2);
    println!(
        "tensor_maxpool_kernel_512 [{C}, {H}, {W}] f32 → [{C}, {}, {}]: against the f64 reference, \
         {c}; median of 5 launches {:.2} ms",
        H / 2,
        W / 2,
        time.as_secs_f64() * 1e3
    );
    ok &= c.within;

    if !ok {
        return Err("maxpool2d: result differs from the reference".into());
    }
    Ok(())
}
