//! NKI's matmul tutorial, stage 2 (`nki_matmul_hoist_load_`): the tiled matmul with the loads
//! hoisted out of the inner loop. For each 128-column block `m` of `lhs_t` the whole column of
//! `K / 128` stationary tiles is loaded once into an SBUF block tile and reused for every `n`;
//! for each `n` the column of `K / 128` moving tiles is loaded once, then the K loop only
//! multiplies. Checked against an f64 reference.
//!
//! Shapes: `lhs_t [K, M]`, `rhs [K, N]` bf16 → `result [M, N]` bf16 (fp32 PSUM accumulation);
//! K and M multiples of 128, N of 512.
//!
//! `cargo run --release --example matmul_hoist_load -- [K M N]` (default 2048 2048 2048);
//! the tutorial's benchmark shape is `-- 8192 4096 8192` (`[4096, 8192] @ [8192, 8192]`,
//! about 550 GFLOP: seconds per launch here, and minutes for the f64 reference).
//!
//! The block tiles are NKI's `(K // TILE_K, par_dim(TILE_K), TILE_M)`, sized by the traced K
//! (`docs/language.md`, "Block axes"): the compiler gives both room for the same number of
//! K tiles, the most the SBUF holds beside the kernel's other tiles (152, so K ≤ 19456 on
//! trn1); a launch with more is refused by the launch constraint `lhs_t_tiles blocks: K / 128
//! <= 152`.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::prelude::*;

/// `result = lhs_tᵀ · rhs` for `lhs_t: [K, M]`, `rhs: [K, N]`; K and M multiples of 128 (K ≤ 19456),
/// N of 512.
#[kernel]
pub fn nki_matmul_hoist_load_(lhs_t: Hbm<bf16, K, M>, rhs: Hbm<bf16, K, N>) -> Hbm<bf16, M, N> {
    let result = ndarray([M, N], bf16, SharedHbm);

    const TILE_M: usize = 128; // nl.tile_size.gemm_stationary_fmax
    const TILE_K: usize = 128; // nl.tile_size.pmax
    const TILE_N: usize = 512; // nl.tile_size.gemm_moving_fmax

    // Define the indices (shape) of the tiles
    let i_lhs_t = mgrid![0..TILE_K, 0..TILE_M];
    let i_rhs = mgrid![0..TILE_K, 0..TILE_N];
    let i_res = mgrid![0..TILE_M, 0..TILE_N];

    // Use affine_range to loop over tiles
    for m in affine_range(M / TILE_M) {
        // Load a whole column tiles from lhs_t (with K * TILE_M numbers)
        // This corresponds to the whole row in the original lhs
        let lhs_t_tiles = ndarray((K / TILE_K, par_dim(TILE_K), TILE_M), lhs_t.dtype, Sbuf);
        for k in affine_range(K / TILE_K) {
            // `.p` for the partition dimension and `.x` for the first free dimension
            lhs_t_tiles[[k, i_lhs_t.p, i_lhs_t.x]] =
                load(lhs_t[[k * TILE_K + i_lhs_t.p, m * TILE_M + i_lhs_t.x]]);
        }

        for n in affine_range(N / TILE_N) {
            // Load a whole column tiles from rhs (with K * TILE_N numbers)
            let rhs_tiles = ndarray((K / TILE_K, par_dim(TILE_K), TILE_N), rhs.dtype, Sbuf);
            for k in affine_range(K / TILE_K) {
                rhs_tiles[[k, i_rhs.p, i_rhs.x]] =
                    load(rhs[[k * TILE_K + i_rhs.p, n * TILE_N + i_rhs.x]]);
            }

            // Allocate a tile in PSUM for the result
            let res_psum = zeros([TILE_M, TILE_N], f32, Psum);
            for k in affine_range(K / TILE_K) {
                // Accumulate partial-sums into PSUM
                res_psum += matmul(
                    lhs_t_tiles[[k, i_lhs_t.p, i_lhs_t.x]],
                    rhs_tiles[[k, i_rhs.p, i_rhs.x]],
                    transpose_x = true,
                );
            }

            // Copy the result from PSUM back to SBUF, and cast to expected output data-type
            let res_sb = copy(res_psum, dtype = result.dtype);
            store(result[[m * TILE_M + i_res.p, n * TILE_N + i_res.x]], res_sb);
        }
    }
    result
}

/// NKI's matmul tutorial, stage 2 (loads hoisted), checked against an f64 reference.
#[derive(Parser)]
struct Cli {
    /// The shape: lhs_t [K, M], rhs [K, N] (default 2048 2048 2048)
    #[arg(value_names = ["K", "M", "N"], num_args = 3, action = clap::ArgAction::Set)]
    shape: Vec<usize>,
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let [k, m, n] = common::shape(&cli.shape, [2048, 2048, 2048]);
    let lhs_t = DeviceTensor::from_array(&common::random_bf16(k, m, 3))?;
    let rhs = DeviceTensor::from_array(&common::random_bf16(k, n, 4))?;
    let mut core = NeuronCore::default();
    cli.profile.run(
        &mut core,
        &nki_matmul_hoist_load_::KERNEL,
        &[lhs_t.arg(), rhs.arg()],
    )?;
    let out = nki_matmul_hoist_load_(&mut core, &lhs_t, &rhs)?;
    let median = common::median_time(5, || {
        nki_matmul_hoist_load_(&mut core, &lhs_t, &rhs).map(drop)
    })?;

    let a = lhs_t.view().into_dimensionality()?;
    let b = rhs.view().into_dimensionality()?;
    let (reference, magnitude) = common::reference(a, b);
    let out = out.into_array::<nki::ndarray::Ix2>()?;
    let (worst, within) = common::max_error(out.view(), &reference, &magnitude, k);
    println!(
        "nki_matmul_hoist_load_ K={k} M={m} N={n}: median launch {median:.2?} (5 launches); \
         largest |error| against the f64 reference: {worst:.3e} (within the bf16 bound: {within})"
    );
    if !within {
        return Err("result outside the bf16 error bound".into());
    }
    Ok(())
}
