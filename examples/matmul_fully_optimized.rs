//! NKI's matmul tutorial, stage 4 (`nki_matmul_fully_optimized_`): all three dimensions blocked.
//! For each block of N, the K blocks run in order (`sequential_range`); each loads a
//! `TILES_IN_BLOCK_K`-deep block of `rhs` once, then for each block of M a block of `lhs_t`,
//! multiplies every tile pair into PSUM over the K block, and adds the PSUM result into the
//! N block's result tiles held in SBUF (`+=`). The result tiles are then packed
//! `BLOCK_N` wide and stored. Checked against an f64 reference.
//!
//! Shapes: `lhs_t [K, M]`, `rhs [K, N]` bf16 → `result [M, N]` bf16 (fp32 PSUM accumulation
//! within a K block, bf16 SBUF accumulation across K blocks, as NKI's `result_tiles` has
//! `lhsT.dtype`); K a multiple of `BLOCK_K` = 1024, M of `BLOCK_M` = 2048 (M ≤ 8192), N of
//! `BLOCK_N` = 1024.
//!
//! `cargo run --release --example matmul_fully_optimized -- [K M N]` (default 2048 2048 2048);
//! the tutorial's benchmark shape is `-- 8192 4096 8192` (`[4096, 8192] @ [8192, 8192]`,
//! about 550 GFLOP: seconds per launch here, and minutes for the f64 reference).
//!
//! The meta-parameters `TILES_IN_BLOCK_M`, `TILES_IN_BLOCK_N`, `TILES_IN_BLOCK_K` are keyword
//! arguments of NKI's kernel; here they are the kernel's meta-parameters, instantiated with the
//! tutorial's 16, 2, 8 as `nki_matmul_fully_optimized_` (and once more with smaller blocks, for
//! small shapes and for tuning: `nki_matmul_fully_optimized::INSTANCES` lists both).
//!
//! Deviation from NKI: NKI allocates `result_tiles` as
//! `(NUM_BLOCK_M, TILES_IN_BLOCK_M, TILES_IN_BLOCK_N, par_dim(TILE_M), TILE_N)`, sized by the
//! traced M. A tile's shape here is a compile-time constant and its partition dimension comes
//! first, so it is `[TILE_M, NUM_BLOCK_M, TILES_IN_BLOCK_M, TILES_IN_BLOCK_N, TILE_N]` with
//! `NUM_BLOCK_M` a meta-parameter: 2 for `nki_matmul_fully_optimized_`, the tile NKI allocates
//! at the tutorial's shape (M = 4096), so the timing model sees the SBUF that NKI's kernel
//! leaves for rotating its loop tiles. A smaller M uses part of it (at M = 2048 the tile is
//! twice NKI's); a launch with more M blocks fails with the launch constraint the index `m`
//! carries.

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::prelude::*;

/// `result = lhs_tᵀ · rhs` for `lhs_t: [K, M]`, `rhs: [K, N]`; K a multiple of
/// `128·TILES_IN_BLOCK_K`, M of `128·TILES_IN_BLOCK_M` (at most `NUM_BLOCK_M` blocks), N of
/// `512·TILES_IN_BLOCK_N` (1024, 2048 and 1024 for the tutorial's values, M ≤ 4096).
#[kernel(
    nki_matmul_fully_optimized_(
        TILES_IN_BLOCK_M = 16,
        TILES_IN_BLOCK_N = 2,
        TILES_IN_BLOCK_K = 8,
        NUM_BLOCK_M = 2
    ),
    nki_matmul_fully_optimized_small(
        TILES_IN_BLOCK_M = 4,
        TILES_IN_BLOCK_N = 1,
        TILES_IN_BLOCK_K = 4,
        NUM_BLOCK_M = 4
    )
)]
pub fn nki_matmul_fully_optimized<
    const TILES_IN_BLOCK_M: usize,
    const TILES_IN_BLOCK_N: usize,
    const TILES_IN_BLOCK_K: usize,
    const NUM_BLOCK_M: usize,
>(
    lhs_t: Hbm<bf16, K, M>,
    rhs: Hbm<bf16, K, N>,
) -> Hbm<bf16, M, N> {
    let result = ndarray([M, N], bf16, SharedHbm);

    const TILE_M: usize = 128; // nl.tile_size.gemm_stationary_fmax
    const TILE_K: usize = 128; // nl.tile_size.pmax
    const TILE_N: usize = 512; // nl.tile_size.gemm_moving_fmax

    const BLOCK_M: usize = TILE_M * TILES_IN_BLOCK_M;
    const BLOCK_N: usize = TILE_N * TILES_IN_BLOCK_N;
    const BLOCK_K: usize = TILE_K * TILES_IN_BLOCK_K;

    // NUM_BLOCK_M = M // BLOCK_M, NUM_BLOCK_N = N // BLOCK_N, NUM_BLOCK_K = K // BLOCK_K are the
    // trip counts below; each divisibility is a launch constraint.

    // Blocking N dimension (the RHS free dimension)
    for n in affine_range(N / BLOCK_N) {
        let result_tiles = zeros(
            [
                TILE_M,
                NUM_BLOCK_M,
                TILES_IN_BLOCK_M,
                TILES_IN_BLOCK_N,
                TILE_N,
            ],
            lhs_t.dtype,
            Sbuf,
        );

        // Blocking K dimension (the contraction dimension)
        // Use `sequential_range` because we do not want the compiler to change this loop by,
        // for example, vectorizing it
        for k in sequential_range(K / BLOCK_K) {
            // Loading tiles from rhs
            // setting the load tile to `TILE_K x BLOCK_SIZE_N` to optimize DMA performance
            let i_rhs = mgrid![0..TILE_K, 0..BLOCK_N];
            let rhs_tiles = ndarray([TILE_K, TILES_IN_BLOCK_K, BLOCK_N], rhs.dtype, Sbuf);

            for bk_r in affine_range(TILES_IN_BLOCK_K) {
                rhs_tiles[[i_rhs.p, bk_r, i_rhs.x]] = load(
                    rhs[[
                        (TILES_IN_BLOCK_K * k + bk_r) * TILE_K + i_rhs.p,
                        BLOCK_N * n + i_rhs.x,
                    ]],
                );
            }

            // Blocking M dimension (the LHS free dimension)
            for m in affine_range(M / BLOCK_M) {
                // Loading tiles from lhs_t
                let i_lhs_t = mgrid![0..TILE_K, 0..BLOCK_M];
                let lhs_t_tiles = ndarray([TILE_K, TILES_IN_BLOCK_K, BLOCK_M], lhs_t.dtype, Sbuf);
                for bk_l in affine_range(TILES_IN_BLOCK_K) {
                    lhs_t_tiles[[i_lhs_t.p, bk_l, i_lhs_t.x]] = load(
                        lhs_t[[
                            (TILES_IN_BLOCK_K * k + bk_l) * TILE_K + i_lhs_t.p,
                            BLOCK_M * m + i_lhs_t.x,
                        ]],
                    );
                }

                // Do matmul with all tiles in the blocks
                let i_lhs_t_mm = mgrid![0..TILE_K, 0..TILE_M];
                let i_rhs_mm = mgrid![0..TILE_K, 0..TILE_N];
                let i_res_mm = mgrid![0..TILE_M, 0..TILE_N];
                for bn in affine_range(TILES_IN_BLOCK_N) {
                    for bm in affine_range(TILES_IN_BLOCK_M) {
                        let res_tile = zeros([TILE_M, TILE_N], f32, Psum);

                        for bk in affine_range(TILES_IN_BLOCK_K) {
                            res_tile[..] += nc_matmul(
                                lhs_t_tiles[[i_lhs_t_mm.p, bk, bm * TILE_M + i_lhs_t_mm.x]],
                                rhs_tiles[[i_rhs_mm.p, bk, bn * TILE_N + i_rhs_mm.x]],
                            );
                        }

                        // Accumulate on corresponding SBUF tile
                        result_tiles[[i_res_mm.p, m, bm, bn, i_res_mm.x]] +=
                            res_tile[[i_res_mm.p, i_res_mm.x]];
                    }
                }
            }
        }

        // Copying the result from SBUF to HBM
        for m in affine_range(M / BLOCK_M) {
            for bm in affine_range(TILES_IN_BLOCK_M) {
                let i_res = mgrid![0..TILE_K, 0..TILE_N];
                let i_res_packed = mgrid![0..TILE_K, 0..BLOCK_N];
                let result_packed = ndarray([TILE_K, BLOCK_N], result_tiles.dtype, Sbuf);

                // coalesce result tiles for better DMA performance
                for bn in affine_range(TILES_IN_BLOCK_N) {
                    result_packed[[i_res.p, bn * TILE_N + i_res.x]] =
                        copy(result_tiles[[i_res.p, m, bm, bn, i_res.x]]);
                }
                store(
                    result[[
                        (TILES_IN_BLOCK_M * m + bm) * TILE_K + i_res_packed.p,
                        BLOCK_N * n + i_res_packed.x,
                    ]],
                    result_packed[[i_res_packed.p, i_res_packed.x]],
                );
            }
        }
    }
    result
}

/// `nki_matmul_fully_optimized_`'s K block: the bf16 result tiles are rounded once per block.
pub const BLOCK_K: usize = 1024;

/// NKI's matmul tutorial, stage 4 (fully optimised), checked against an f64 reference.
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
        &nki_matmul_fully_optimized_::KERNEL,
        &[lhs_t.arg(), rhs.arg()],
    )?;
    let out = nki_matmul_fully_optimized_(&mut core, &lhs_t, &rhs)?;
    let median = common::median_time(5, || {
        nki_matmul_fully_optimized_(&mut core, &lhs_t, &rhs).map(drop)
    })?;

    let a = lhs_t.view().into_dimensionality()?;
    let b = rhs.view().into_dimensionality()?;
    let (reference, magnitude) = common::reference(a, b);
    let out = out.into_array::<nki::ndarray::Ix2>()?;
    let roundings = k / BLOCK_K;
    let (worst, within) =
        common::max_error_rounded(out.view(), &reference, &magnitude, k, roundings);
    println!(
        "nki_matmul_fully_optimized_ K={k} M={m} N={n}: median launch {median:.2?} \
         (5 launches); largest |error| against the f64 reference: {worst:.3e} \
         (within the bound of {roundings} bf16 roundings: {within})"
    );
    if !within {
        return Err("result outside the bf16 error bound".into());
    }
    Ok(())
}
