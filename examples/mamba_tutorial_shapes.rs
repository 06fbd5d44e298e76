//! NKI's fused Mamba kernels (`mamba_v1`, `mamba_v2`) exactly as the tutorial runs them at its
//! benchmark shapes: the sequence length and the channel count are meta-parameters, so every
//! tile has NKI's shape (`[128, seq_len]`, v1's accumulator NKI's block tile
//! `(channels // 128, par_dim(128), seq_len)`)
//! and no instruction is masked or zero-filled. `examples/mamba.rs` holds the same kernels for
//! any shape up to a capacity, which costs masks and zero fills NKI's kernels do not have.
//!
//! Instances (the timing model's calibration cases, `docs/sources/calibration.md`):
//! `mamba_v1_512x256` (seq_len 512, 256 channels: `mamba-v1-small`, 172.93 µs on Trn1),
//! `mamba_v2_512x4096` (seq_len 512, 4096 channels: `mamba-v2`, 1.61 ms); and the tutorial's
//! other published points, which the model is checked against but not fitted to
//! (`examples/calibration.rs`): `mamba_v1_512x4096`, `mamba_v2_1024`, `mamba_v2_2048`,
//! `mamba_v3_1024`, `mamba_v3_2048` (`mamba_v3`: the sequence tiled by 512 in an unrolled
//! `static_range`, as NKI writes it; its `scanC` in SBUF, as nki-samples' main has it).
//!
//! Deviation from NKI (forced by the language): `B_i.broadcast_to((128, seq_len))` of a
//! one-partition tile is a TensorE matmul against a tile of ones into PSUM and a copy back to
//! SBUF (`docs/language.md`); NKI leaves the broadcast to its compiler. The timing model times
//! what that compiler runs: a broadcast of one PSUM bank (512 fp32) is read from PSUM, without
//! the copy (`docs/timing.md`, "Scheduling"), so the copy costs no modeled time at 512 wide;
//! wider broadcasts (`mamba_v2` at 1024 and 2048) keep it.
//!
//! `cargo run --release --example mamba_tutorial_shapes [-- --profile]`: runs each instance on
//! random inputs against the f64 reference of `examples/mamba.rs` (v1 small only; the large
//! shapes take minutes of f64 reference here) and, with `--profile`, prints each one's modeled
//! Trn1 profile.

#![allow(non_snake_case)] // NKI's names: A, B, C, deltaA, scanC_accum, ...

#[path = "mamba.rs"]
#[allow(dead_code)]
pub mod mamba;

use clap::Parser;
use nki::prelude::*;

/// The input shapes of one launch at the tutorial's batch of 1 and 16 states: `delta`, `u`
/// `[1, channels, seq_len]`, `A [channels, 16]`, `B`, `C [1, 16, seq_len]`.
pub fn input_shapes(channels: usize, seq_len: usize) -> [Vec<usize>; 5] {
    [
        vec![1, channels, seq_len],
        vec![1, channels, seq_len],
        vec![channels, 16],
        vec![1, 16, seq_len],
        vec![1, 16, seq_len],
    ]
}

/// NKI's `mamba_v1` at a fixed sequence length and channel count: batch → state → channel
/// tile, the channel tiles' results accumulated in one SBUF tile.
#[kernel(
    mamba_v1_512x256(SEQ_LEN = 512, CHANNELS = 256),
    mamba_v1_512x4096(SEQ_LEN = 512, CHANNELS = 4096)
)]
pub fn mamba_v1_fixed<const SEQ_LEN: usize, const CHANNELS: usize>(
    delta: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    u: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    A: Hbm<f32, CHANNELS, STATE_SIZE>,
    B: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
    C: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
) -> Hbm<f32, BATCH, CHANNELS, SEQ_LEN> {
    let output = ndarray([BATCH, CHANNELS, SEQ_LEN], delta.dtype, SharedHbm);

    const CHANNEL_PSIZE: usize = 128; // nl.tile_size.pmax
    const N_CHANNEL_TILE: usize = CHANNELS / CHANNEL_PSIZE;

    let (i_p, i_f) = mgrid![0..CHANNEL_PSIZE, 0..SEQ_LEN];
    let (j_p, j_f) = mgrid![0..1, 0..SEQ_LEN];

    for i_batch in affine_range(BATCH) {
        let scanC_accum = zeros(
            (N_CHANNEL_TILE, par_dim(CHANNEL_PSIZE), SEQ_LEN),
            delta.dtype,
            Sbuf,
        );
        for i_state in affine_range(STATE_SIZE) {
            for i_channel_tile in affine_range(N_CHANNEL_TILE) {
                let channel_start = i_channel_tile * CHANNEL_PSIZE;
                let delta_i = load(delta[[i_batch, channel_start + i_p, i_f]]);
                let A_i = load(
                    A[[
                        channel_start..channel_start + CHANNEL_PSIZE,
                        i_state..i_state + 1,
                    ]],
                );
                let deltaA = activation(op = exp, data = delta_i, scale = A_i);
                let u_i = load(u[[i_batch, channel_start + i_p, i_f]]);
                let B_i = load(B[[i_batch, i_state + j_p, j_f]]);
                let deltaU = tensor_tensor(delta_i, u_i, op = multiply);
                let B_i_bcast = broadcast_to(B_i, [CHANNEL_PSIZE, SEQ_LEN]);
                let deltaBu = tensor_tensor(deltaU, B_i_bcast, op = multiply);
                let scan_res =
                    tensor_tensor_scan(deltaA, deltaBu, initial = 0.0, op0 = multiply, op1 = add);
                let C_i = load(C[[i_batch, i_state + j_p, j_f]]);
                let C_i_bcast = broadcast_to(C_i, [CHANNEL_PSIZE, SEQ_LEN]);
                let scanC = tensor_tensor(scan_res, C_i_bcast, op = multiply);
                scanC_accum[[i_channel_tile, i_p, i_f]] += scanC;
            }
        }
        for i_channel_tile in affine_range(N_CHANNEL_TILE) {
            let channel_start = i_channel_tile * CHANNEL_PSIZE;
            store(
                output[[i_batch, channel_start + i_p, i_f]],
                scanC_accum[[i_channel_tile, i_p, i_f]],
            );
        }
    }
    output
}

/// NKI's `mamba_v2` at a fixed sequence length: batch → channel tile → state, `delta` and `u`
/// loaded once per channel tile.
#[kernel(
    mamba_v2_512x4096(SEQ_LEN = 512),
    mamba_v2_1024(SEQ_LEN = 1024),
    mamba_v2_2048(SEQ_LEN = 2048)
)]
pub fn mamba_v2_fixed<const SEQ_LEN: usize>(
    delta: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    u: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    A: Hbm<f32, CHANNELS, STATE_SIZE>,
    B: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
    C: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
) -> Hbm<f32, BATCH, CHANNELS, SEQ_LEN> {
    let output = ndarray([BATCH, CHANNELS, SEQ_LEN], delta.dtype, SharedHbm);

    const CHANNEL_PSIZE: usize = 128; // nl.tile_size.pmax

    let (i_p, i_f) = mgrid![0..CHANNEL_PSIZE, 0..SEQ_LEN];
    let (j_p, j_f) = mgrid![0..1, 0..SEQ_LEN];

    for i_batch in affine_range(BATCH) {
        for i_channel_tile in affine_range(CHANNELS / CHANNEL_PSIZE) {
            let channel_start = i_channel_tile * CHANNEL_PSIZE;
            let scanC_accum = zeros([CHANNEL_PSIZE, SEQ_LEN], delta.dtype, Sbuf);
            let delta_i = load(delta[[i_batch, channel_start + i_p, i_f]]);
            let u_i = load(u[[i_batch, channel_start + i_p, i_f]]);
            for i_state in affine_range(STATE_SIZE) {
                let A_i = load(
                    A[[
                        channel_start..channel_start + CHANNEL_PSIZE,
                        i_state..i_state + 1,
                    ]],
                );
                let deltaA = activation(op = exp, data = delta_i, scale = A_i);
                let B_i = load(B[[i_batch, i_state + j_p, j_f]]);
                let deltaU = tensor_tensor(delta_i, u_i, op = multiply);
                let B_i_bcast = broadcast_to(B_i, [CHANNEL_PSIZE, SEQ_LEN]);
                let deltaBu = tensor_tensor(deltaU, B_i_bcast, op = multiply);
                let scan_res =
                    tensor_tensor_scan(deltaA, deltaBu, initial = 0.0, op0 = multiply, op1 = add);
                let C_i = load(C[[i_batch, i_state + j_p, j_f]]);
                let C_i_bcast = broadcast_to(C_i, [CHANNEL_PSIZE, SEQ_LEN]);
                let scanC = tensor_tensor(scan_res, C_i_bcast, op = multiply);
                scanC_accum[[i_p, i_f]] += scanC;
            }
            store(
                output[[i_batch, channel_start + i_p, i_f]],
                scanC_accum[[i_p, i_f]],
            );
        }
    }
    output
}

/// NKI's `mamba_v3` at a fixed sequence length: v2 with the sequence tiled by 512 (an
/// unrolled `static_range`, as NKI writes it), the scan's last value carried from one tile to
/// the next.
#[kernel(mamba_v3_1024(SEQ_LEN = 1024), mamba_v3_2048(SEQ_LEN = 2048))]
pub fn mamba_v3_fixed<const SEQ_LEN: usize>(
    delta: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    u: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    A: Hbm<f32, CHANNELS, STATE_SIZE>,
    B: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
    C: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
) -> Hbm<f32, BATCH, CHANNELS, SEQ_LEN> {
    let output = ndarray([BATCH, CHANNELS, SEQ_LEN], delta.dtype, SharedHbm);

    const CHANNEL_PSIZE: usize = 128; // nl.tile_size.pmax
    const SEQ_LEN_FSIZE: usize = 512;
    const N_SEQ_LEN_TILE: usize = SEQ_LEN / SEQ_LEN_FSIZE;

    let (i_p, i_f) = mgrid![0..CHANNEL_PSIZE, 0..SEQ_LEN];

    for i_batch in affine_range(BATCH) {
        for i_channel_tile in affine_range(CHANNELS / CHANNEL_PSIZE) {
            let channel_start = i_channel_tile * CHANNEL_PSIZE;
            let scanC_accum = zeros([CHANNEL_PSIZE, SEQ_LEN], delta.dtype, Sbuf);
            let delta_i = load(delta[[i_batch, channel_start + i_p, i_f]]);
            let u_i = load(u[[i_batch, channel_start + i_p, i_f]]);
            for i_state in affine_range(STATE_SIZE) {
                let A_i = load(
                    A[[
                        channel_start..channel_start + CHANNEL_PSIZE,
                        i_state..i_state + 1,
                    ]],
                );
                let scan_init = zeros([CHANNEL_PSIZE, 1], delta_i.dtype, Sbuf);
                for i_seq_len_tile in static_range(N_SEQ_LEN_TILE) {
                    let seq_len_start = i_seq_len_tile * SEQ_LEN_FSIZE;
                    let seq_end = seq_len_start + SEQ_LEN_FSIZE;
                    let deltaA = activation(
                        op = exp,
                        data = delta_i[[0..CHANNEL_PSIZE, seq_len_start..seq_end]],
                        scale = A_i,
                    );
                    let B_i = load(B[[i_batch, i_state..i_state + 1, seq_len_start..seq_end]]);
                    let deltaU = tensor_tensor(
                        delta_i[[0..CHANNEL_PSIZE, seq_len_start..seq_end]],
                        u_i[[0..CHANNEL_PSIZE, seq_len_start..seq_end]],
                        op = multiply,
                    );
                    let B_i_bcast = broadcast_to(B_i, [CHANNEL_PSIZE, SEQ_LEN_FSIZE]);
                    let deltaBu = tensor_tensor(deltaU, B_i_bcast, op = multiply);
                    let scan_res = tensor_tensor_scan(
                        deltaA,
                        deltaBu,
                        initial = scan_init,
                        op0 = multiply,
                        op1 = add,
                    );
                    scan_init[..] = scan_res[[0..CHANNEL_PSIZE, SEQ_LEN_FSIZE - 1..SEQ_LEN_FSIZE]];
                    let C_i = load(C[[i_batch, i_state..i_state + 1, seq_len_start..seq_end]]);
                    let C_i_bcast = broadcast_to(C_i, [CHANNEL_PSIZE, SEQ_LEN_FSIZE]);
                    let scanC = tensor_tensor(scan_res, C_i_bcast, op = multiply);
                    scanC_accum[[0..CHANNEL_PSIZE, seq_len_start..seq_end]] += scanC;
                }
            }
            store(
                output[[i_batch, channel_start + i_p, i_f]],
                scanC_accum[[i_p, i_f]],
            );
        }
    }
    output
}

/// NKI's fused Mamba kernels at the tutorial's shapes, checked against an f64 reference.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: mamba::common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let mut core = NeuronCore::default();
    let small = mamba::Inputs::random(1, 512, 256, 16, 1);
    let [d, x, a, b, c] = &small.device()?;
    let out = mamba_v1_512x256(&mut core, d, x, a, b, c)?.into_array::<nki::ndarray::Ix3>()?;
    let (reference, bound) = small.reference();
    let (worst, ratio, within) = mamba::max_error(out.view(), &reference, &bound);
    println!(
        "mamba_v1_512x256: largest |error| against the f64 reference {worst:.3e}, at most \
         {ratio:.3} of the fp32 bound (within it: {within})"
    );
    if !within {
        return Err("result outside the fp32 error bound".into());
    }
    let (large, small) = (input_shapes(4096, 512), input_shapes(256, 512));
    let (shapes, small_shapes) = (
        large.each_ref().map(Vec::as_slice),
        small.each_ref().map(Vec::as_slice),
    );
    cli.profile
        .run_shapes(&mut core, &mamba_v1_512x256::KERNEL, &small_shapes)?;
    cli.profile
        .run_shapes(&mut core, &mamba_v1_512x4096::KERNEL, &shapes)?;
    cli.profile
        .run_shapes(&mut core, &mamba_v2_512x4096::KERNEL, &shapes)?;
    // v3 at 1024 against the f64 reference (one batch, two channel tiles, four states).
    let v3 = mamba::Inputs::random(1, 1024, 256, 4, 2);
    let [d, x, a, b, c] = &v3.device()?;
    let out = mamba_v3_1024(&mut core, d, x, a, b, c)?.into_array::<nki::ndarray::Ix3>()?;
    let (reference, bound) = v3.reference();
    let (worst, ratio, within) = mamba::max_error(out.view(), &reference, &bound);
    println!(
        "mamba_v3_1024: largest |error| against the f64 reference {worst:.3e}, at most \
         {ratio:.3} of the fp32 bound (within it: {within})"
    );
    if !within {
        return Err("result outside the fp32 error bound".into());
    }
    Ok(())
}
