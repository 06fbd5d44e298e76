//! NKI's transpose2d tutorial kernel, `tensor_transpose2D_kernel_` (aws-neuron/nki-samples,
//! `src/nki_samples/tutorials/transpose2d/transpose2d_nki_kernels.py`): each row of the input
//! holds an F1×F2 matrix, row-major; the kernel writes its F2×F1 transpose in its place. The
//! reorder happens inside each partition, by one SBUF-to-SBUF `copy` whose source is read
//! through a 3-D index view `[p, f1, f2] → f1·F2 + f2` and whose destination is written through
//! `[p, f1, f2] → f2·F1 + f1`. Checked against an `ndarray` transpose.
//!
//! `cargo run --release --example transpose2d` runs the benchmark shape, [4096, 64·64] f32
//! (4096 rows of 64×64 matrices), and the tutorial's example, (5, 3·4) int8 with the values
//! 0..60 and shape2D = (3, 4). Ragged row counts are in `tests/all/tutorials_pool.rs`.
//!
//! The tutorial loads the whole input as one tile (at most 128 rows). Here the row count is
//! symbolic (`P`) and the rows are processed 128 at a time, the last tile masked. shape2D, a
//! compile-time argument in NKI too (a Python tuple), is two meta-parameters, `const F1: usize`
//! and `const F2: usize`, and the row length is the dimension `{ F1 * F2 }` computed from them;
//! `#[kernel(...)]` lists one instantiation per shape2D used, each a kernel of its own:
//! `tensor_transpose2d_kernel_3x4` (int8, the tutorial's (3, 4)) and
//! `tensor_transpose2d_kernel_64x64` (f32, the benchmark's (64, 64)). The tutorial's kernel takes
//! any dtype (`in_tensor.dtype`); here the dtype is the type parameter `T`, set per
//! instantiation.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, ArrayView2, Ix2};
use nki::prelude::*;

/// `tensor_transpose2D_kernel_` for the dtype `T` and shape2D = (`F1`, `F2`): per 128-row
/// tile, a load, the permuting copy and a store, each masked to the rows below `P` (the
/// tutorial's single tile has exactly `P` partitions).
///
/// One kernel per dtype and shape2D: `tensor_transpose2d_kernel_3x4` (int8, the tutorial's
/// (3, 4)) and `tensor_transpose2d_kernel_64x64` (f32, the benchmark's (64, 64)).
#[kernel(
    tensor_transpose2d_kernel_3x4(T = i8, F1 = 3, F2 = 4),
    tensor_transpose2d_kernel_64x64(T = f32, F1 = 64, F2 = 64),
)]
pub fn tensor_transpose2d_kernel<T, const F1: usize, const F2: usize>(
    in_tensor: Hbm<T, P, { F1 * F2 }>,
) -> Hbm<T, P, { F1 * F2 }> {
    let out_tensor = ndarray([P, F1 * F2], in_tensor.dtype, SharedHbm);

    // The transpose pattern (NKI's shape2D).
    let sz_f1 = F1;
    let sz_f2 = F2;

    // Indices of a 128-row tile, flat and as F1×F2 matrices: i_p0 is the partition index,
    // i_f1 and i_f2 are the two free indices that trade places.
    let (i_p, i_f) = mgrid![0..128, 0..sz_f1 * sz_f2];
    let (i_p0, i_f1, i_f2) = mgrid![0..128, 0..sz_f1, 0..sz_f2];

    for k in affine_range((P + 127) / 128) {
        let in_tile = load(in_tensor[[k * 128 + i_p, i_f]], mask = k * 128 + i_p < P);

        // The transpose, as an SBUF-to-SBUF copy through two access patterns: the source
        // traverses the F1×F2 matrix row-major, the destination the F2×F1 one.
        let out_tile = ndarray([128, sz_f2 * sz_f1], out_tensor.dtype, Sbuf);
        out_tile[[i_p0, i_f2 * sz_f1 + i_f1]] = copy(
            in_tile[[i_p0, i_f1 * sz_f2 + i_f2]],
            mask = k * 128 + i_p0 < P,
        );

        store(
            out_tensor[[k * 128 + i_p, i_f]],
            out_tile,
            mask = k * 128 + i_p < P,
        );
    }
    out_tensor
}

/// Each row's F1×F2 matrix transposed, with `ndarray` (`reshape`, `permuted_axes`).
pub fn reference<T: Copy>(a: ArrayView2<T>, shape2d: (usize, usize)) -> Array2<T> {
    let (p, f) = a.dim();
    let (f1, f2) = shape2d;
    assert_eq!(f, f1 * f2, "row length is F1·F2");
    let matrices = a
        .to_shape((p, f1, f2))
        .expect("a standard-layout copy")
        .permuted_axes([0, 2, 1])
        .as_standard_layout()
        .into_owned();
    matrices
        .into_shape_with_order((p, f))
        .expect("standard layout")
}

/// Compares a kernel's output with [`reference`]: a transpose moves elements, so every
/// element must be equal (bound 0).
pub fn check<T: Copy + Into<f64>>(
    out: ArrayView2<T>,
    a: ArrayView2<T>,
    shape2d: (usize, usize),
) -> common::Comparison {
    assert_eq!(out.dim(), a.dim(), "output shape");
    let want = reference(a, shape2d);
    common::compare(
        out.iter().map(|&x| x.into()),
        want.iter().map(|&x| x.into()),
        std::iter::repeat(0.0),
    )
}

/// The tutorial's example input: `arange(P·F1·F2)` as int8 (wrapping past 127, as NumPy's
/// `arange(..., dtype=int8)` does), shape (P, F1·F2).
pub fn tutorial_input(p: usize, f: usize) -> Array2<i8> {
    Array2::from_shape_fn((p, f), |(i, j)| (i * f + j) as u8 as i8)
}

/// NKI's transpose2d tutorial kernel on [4096, 64·64] f32 and the tutorial's (5, 3·4) int8, checked
/// against ndarray.
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
    let a = tutorial_input(5, 12);
    let out = tensor_transpose2d_kernel_3x4(&mut core, &DeviceTensor::from_array(&a)?)?;
    let out = out.into_array::<Ix2>()?;
    println!("input (5, 3·4) int8:\n{a}\ntransposed per row with shape2D = (3, 4):\n{out}");
    let c = check(out.view(), a.view(), (3, 4));
    println!("tensor_transpose2d_kernel_3x4 (5, 12) int8: against ndarray's transpose, {c}");
    ok &= c.within;

    // The benchmark shape.
    const ROWS: usize = 4096;
    let a = common::random_f32(Ix2(ROWS, 64 * 64), 7, -1.0, 1.0);
    let a_dev = DeviceTensor::from_array(&a)?;
    cli.profile.run(
        &mut core,
        &tensor_transpose2d_kernel_64x64::KERNEL,
        &[a_dev.arg()],
    )?;
    let mut out = DeviceTensor::<f32>::zeros(&[ROWS, 64 * 64])?;
    let time = common::median_time(5, || {
        tensor_transpose2d_kernel_64x64::launch_into(&mut core, &a_dev, &mut out)
    })?;
    println!("{}", tensor_transpose2d_kernel_64x64::KERNEL.program());
    let out = out.into_array::<Ix2>()?;
    let c = check(out.view(), a.view(), (64, 64));
    println!(
        "tensor_transpose2d_kernel_64x64 [{ROWS}, 64·64] f32: against ndarray's transpose, {c}; \
         median of 5 launches {:.2} ms",
        time.as_secs_f64() * 1e3
    );
    ok &= c.within;

    if !ok {
        return Err("transpose2d: result differs from the reference".into());
    }
    Ok(())
}
