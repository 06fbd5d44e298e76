//! NKI's matmul tutorial, stage 3 (`nki_matmul_block_free_dimension_`): the hoisted loads, with
//! the free dimensions blocked. A block of `TILES_IN_BLOCK_M` stationary column tiles and a block
//! of `TILES_IN_BLOCK_N` moving column tiles (each `K / 128` tiles deep) are held in SBUF block
//! tiles, and every pair of them is multiplied, so each loaded tile is reused across a whole
//! block. Checked against an f64 reference.
//!
//! Shapes: `lhs_t [K, M]`, `rhs [K, N]` bf16 → `result [M, N]` bf16 (fp32 PSUM accumulation);
//! K a multiple of 128 (K ≤ 9728), M of `BLOCK_M` = 256, N of `BLOCK_N` = 1024.
//!
//! `cargo run --release --example matmul_block_free_dimension -- [K M N]` (default 2048 2048
//! 2048); the tutorial's benchmark shape is `-- 8192 4096 8192` (`[4096, 8192] @ [8192, 8192]`,
//! about 550 GFLOP: seconds per launch here, and minutes for the f64 reference).
//!
//! The block tiles are NKI's `(TILES_IN_BLOCK, K // TILE_K, par_dim(TILE_K), TILE)`, sized by
//! the traced K (`docs/language.md`, "Block axes"). The compiler stores the K axis first
//! (block `(b, k)` at `(k · TILES_IN_BLOCK + b) × tile bytes`), so that a block's place does
//! not depend on K, and gives both tiles room for the same number of K tiles, the most the
//! SBUF holds beside the kernel's other tiles (76 on trn1); a launch with more is refused by
//! the launch constraint `lhs_t_tiles blocks: K / 128 <= 76`.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::prelude::*;

/// `result = lhs_tᵀ · rhs` for `lhs_t: [K, M]`, `rhs: [K, N]`; K a multiple of 128 (K ≤ 9728), M of
/// 256, N of 1024.
#[kernel]
pub fn nki_matmul_block_free_dimension_(
    lhs_t: Hbm<bf16, K, M>,
    rhs: Hbm<bf16, K, N>,
) -> Hbm<bf16, M, N> {
    let result = ndarray([M, N], bf16, SharedHbm);

    const TILE_M: usize = 128; // nl.tile_size.gemm_stationary_fmax
    const TILE_K: usize = 128; // nl.tile_size.pmax
    const TILE_N: usize = 512; // nl.tile_size.gemm_moving_fmax

    // Define the indices (shape) of the tiles
    let i_lhs_t = mgrid![0..TILE_K, 0..TILE_M];
    let i_rhs = mgrid![0..TILE_K, 0..TILE_N];
    let i_res = mgrid![0..TILE_M, 0..TILE_N];

    // Configuring the blocking size for the free dimensions
    const TILES_IN_BLOCK_M: usize = 2;
    const TILES_IN_BLOCK_N: usize = 2;

    const BLOCK_M: usize = TILE_M * TILES_IN_BLOCK_M; // 256
    const BLOCK_N: usize = TILE_N * TILES_IN_BLOCK_N; // 1024

    // Loop over blocks over the M dimension (M % BLOCK_M == 0 is a launch constraint)
    for m in affine_range(M / BLOCK_M) {
        // Load TILES_IN_BLOCK_M columns tiles from lhs_t
        let lhs_t_tiles = ndarray(
            (TILES_IN_BLOCK_M, K / TILE_K, par_dim(TILE_K), TILE_M),
            lhs_t.dtype,
            Sbuf,
        );
        for bm in affine_range(TILES_IN_BLOCK_M) {
            for k in affine_range(K / TILE_K) {
                lhs_t_tiles[[bm, k, i_lhs_t.p, i_lhs_t.x]] = load(
                    lhs_t[[
                        k * TILE_K + i_lhs_t.p,
                        (m * TILES_IN_BLOCK_M + bm) * TILE_M + i_lhs_t.x,
                    ]],
                );
            }
        }

        for n in affine_range(N / BLOCK_N) {
            // Load TILES_IN_BLOCK_N columns from rhs
            let rhs_tiles = ndarray(
                (TILES_IN_BLOCK_N, K / TILE_K, par_dim(TILE_K), TILE_N),
                rhs.dtype,
                Sbuf,
            );
            for bn in affine_range(TILES_IN_BLOCK_N) {
                for k in affine_range(K / TILE_K) {
                    rhs_tiles[[bn, k, i_rhs.p, i_rhs.x]] = load(
                        rhs[[
                            k * TILE_K + i_rhs.p,
                            (n * TILES_IN_BLOCK_N + bn) * TILE_N + i_rhs.x,
                        ]],
                    );
                }
            }

            for bm in affine_range(TILES_IN_BLOCK_M) {
                for bn in affine_range(TILES_IN_BLOCK_N) {
                    // Allocate a tensor in PSUM
                    let res_psum = zeros([TILE_M, TILE_N], f32, Psum);
                    for k in affine_range(K / TILE_K) {
                        // Accumulate partial-sums into PSUM
                        res_psum += matmul(
                            lhs_t_tiles[[bm, k, i_lhs_t.p, i_lhs_t.x]],
                            rhs_tiles[[bn, k, i_rhs.p, i_rhs.x]],
                            transpose_x = true,
                        );
                    }

                    // Copy the result from PSUM back to SBUF, and cast to expected output data-type
                    let res_sb = copy(res_psum, dtype = result.dtype);
                    store(
                        result[[
                            (m * TILES_IN_BLOCK_M + bm) * TILE_M + i_res.p,
                            (n * TILES_IN_BLOCK_N + bn) * TILE_N + i_res.x,
                        ]],
                        res_sb,
                    );
                }
            }
        }
    }
    result
}

/// NKI's matmul tutorial, stage 3 (blocked free dimension), checked against an f64 reference.
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
        &nki_matmul_block_free_dimension_::KERNEL,
        &[lhs_t.arg(), rhs.arg()],
    )?;
    let out = nki_matmul_block_free_dimension_(&mut core, &lhs_t, &rhs)?;
    let median = common::median_time(5, || {
        nki_matmul_block_free_dimension_(&mut core, &lhs_t, &rhs).map(drop)
    })?;

    let a = lhs_t.view().into_dimensionality()?;
    let b = rhs.view().into_dimensionality()?;
    let (reference, magnitude) = common::reference(a, b);
    let out = out.into_array::<nki::ndarray::Ix2>()?;
    let (worst, within) = common::max_error(out.view(), &reference, &magnitude, k);
    println!(
        "nki_matmul_block_free_dimension_ K={k} M={m} N={n}: median launch {median:.2?} \
         (5 launches); largest |error| against the f64 reference: {worst:.3e} \
         (within the bf16 bound: {within})"
    );
    if !within {
        return Err("result outside the bf16 error bound".into());
    }
    Ok(())
}
