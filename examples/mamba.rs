//! NKI's fused Mamba selective scan (tutorial "fused_mamba"): `mamba_v1`, `mamba_v2` and
//! `mamba_v3`, all built on `tensor_tensor_scan`, checked against an f64 reference of the
//! recurrence.
//!
//! For each batch `b`, channel `c`, state `s` and step `t`:
//! `h[t] = exp(delta[b,c,t]·A[c,s])·h[t−1] + delta[b,c,t]·B[b,s,t]·u[b,c,t]` (`h[−1] = 0`), and
//! `out[b,c,t] = Σ_s C[b,s,t]·h[t]`. Channels map to partitions (128 per tile), the sequence
//! to the free dimension.
//!
//! - `mamba_v1`: loops batch → state → channel tile; the per-channel-tile results accumulate
//!   in an SBUF buffer of all channel tiles (`+=`).
//! - `mamba_v2`: loops batch → channel tile → state, so `delta` and `u` are loaded once per
//!   channel tile and reused across states.
//! - `mamba_v3`: v2 with the sequence tiled by 512; the scan carries its last value from one
//!   sequence tile to the next (`initial = scan_init`), and `scanC` lands in PSUM.
//!
//! Shapes: `delta, u [batch, channels, seq_len]`, `A [channels, state_size]`,
//! `B, C [batch, state_size, seq_len]` f32 → `out [batch, channels, seq_len]` f32; `channels` a
//! multiple of 128 (NKI asserts it), `seq_len` ≤ 2048 (a multiple of 512 for v3, as NKI
//! asserts), `channels` ≤ 2304 for v1 (the room its accumulator's channel blocks get).
//!
//! `cargo run --release --example mamba -- [BATCH SEQ_LEN CHANNELS STATE_SIZE]` (default: the
//! tutorial's defaults 1 2048 256 16).
//!
//! v1's accumulator is NKI's block tile `(channels // 128, par_dim(128), seq_len)`, its channel
//! blocks counted at launch (`docs/language.md`, "Block axes"), its sequence at the capacity
//! below.
//!
//! Deviations from NKI, each forced by keeping `SEQ_LEN` a launch-time dimension
//! (`examples/mamba_tutorial_shapes.rs` has `mamba_v1`/`mamba_v2` with it and `CHANNELS` as
//! meta-parameters, tiles sized exactly, none of these). What they cost in modeled time, on
//! Trn1 at the tutorial's `1 × 512 × 256 × 16`: 490 µs for `mamba_v1` here against 173 µs for
//! the exact kernel (173 µs published), `mamba_v2` 462 µs (the capacity-wide broadcasts span
//! four PSUM banks, so their copies to SBUF run):
//! - NKI sizes its SBUF tiles by the traced `seq_len`. A free dimension's size here is a
//!   compile-time constant, so the tiles hold `MAX_SEQ_LEN` columns and every instruction over
//!   the sequence is masked to `seq_len` (`mask = i_f < SEQ_LEN`). Longer inputs fail at
//!   launch with the constraint the indices carry; in v1 and v2, whose masks alone would let a
//!   longer sequence through, cut at the capacity, that is the constraint of an explicit
//!   one-element guard (the language has no `assert`).
//! - `broadcast_to` takes no mask: B's and C's rows are broadcast over the whole capacity in
//!   v1 and v2 (the columns past `seq_len` are never read).
//! - The `+=` into the accumulator is written `+= copy(scanC, mask = ...)`: one instruction
//!   that adds `scanC` into the accumulator, masked like the others (a plain `+= scanC` cannot
//!   carry a mask).
//! - v3's sequence loop is `sequential_range` (NKI's code uses `static_range` with the comment
//!   that `sequential_range` gave incorrect answers; `static_range` needs a literal trip count
//!   here, and the loop carries `scan_init`, which is what `sequential_range` is for).

#![allow(non_snake_case)] // NKI's names: A, B, C, deltaA, scanC_accum, ...

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::ndarray::{Array2, Array3, ArrayView2, ArrayView3};
use nki::prelude::*;

/// Mamba's selective scan, NKI's `mamba_v1`: batch → state → channel tile.
#[kernel]
pub fn mamba_v1(
    delta: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    u: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    A: Hbm<f32, CHANNELS, STATE_SIZE>,
    B: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
    C: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
) -> Hbm<f32, BATCH, CHANNELS, SEQ_LEN> {
    // Capacity of the SBUF tiles along the sequence (NKI sizes them by seq_len).
    const MAX_SEQ_LEN: usize = 2048;

    let output = ndarray([BATCH, CHANNELS, SEQ_LEN], delta.dtype, SharedHbm);

    // Launch guard: SEQ_LEN ≤ MAX_SEQ_LEN. The masks below keep every instruction inside
    // seq_len, but nothing else would stop a longer sequence from being silently cut at
    // MAX_SEQ_LEN; the language has no `assert`, so this one-element memset's index makes it a
    // launch constraint (one pass when the sequence fits).
    let seq_len_guard = ndarray([1, 1], f32, Sbuf);
    for i_pass in affine_range((SEQ_LEN + (MAX_SEQ_LEN - 1)) / MAX_SEQ_LEN) {
        seq_len_guard[[0..1, i_pass..i_pass + 1]] = 0.0;
    }

    // Map channels to the partition dimension
    // Tile channels to comply with NKI tile size constraints
    const CHANNEL_PSIZE: usize = 128; // nl.tile_size.pmax
    // n_channel_tile = CHANNELS / CHANNEL_PSIZE (CHANNELS % 128 == 0 is a launch constraint)

    // A channel tile over the sequence, and one row of B or C
    let (i_p, i_f) = mgrid![0..CHANNEL_PSIZE, 0..MAX_SEQ_LEN];
    let (j_p, j_f) = mgrid![0..1, 0..MAX_SEQ_LEN];

    // Most outer loop with batch_size, parallel_for
    for i_batch in affine_range(BATCH) {
        // partial accumulated scanC result with processed states: NKI's block tile of
        // `channels // 128` channel tiles
        let scanC_accum = zeros(
            (
                CHANNELS / CHANNEL_PSIZE,
                par_dim(CHANNEL_PSIZE),
                MAX_SEQ_LEN,
            ),
            delta.dtype,
            Sbuf,
        );

        // Second outer loop with state_size, partial parallel
        for i_state in affine_range(STATE_SIZE) {
            // Inner loop: tiling channels
            for i_channel_tile in affine_range(CHANNELS / CHANNEL_PSIZE) {
                let channel_start = i_channel_tile * CHANNEL_PSIZE;

                // Load the relevant tile from delta and A
                let delta_i = load(
                    delta[[i_batch, channel_start + i_p, i_f]],
                    mask = i_f < SEQ_LEN,
                );
                let A_i = load(
                    A[[
                        channel_start..channel_start + CHANNEL_PSIZE,
                        i_state..i_state + 1,
                    ]],
                );

                // Step 1&2: Element-wise multiplication of delta_i and A_i and then exponential
                let deltaA =
                    activation(op = exp, data = delta_i, scale = A_i, mask = i_f < SEQ_LEN);

                // Load the relevant tile from u and B
                let u_i = load(u[[i_batch, channel_start + i_p, i_f]], mask = i_f < SEQ_LEN);
                // The broadcast below reads all MAX_SEQ_LEN columns: the tail past SEQ_LEN is
                // zeroed so that it reads no stale SBUF (a strict launch refuses that).
                let B_i = zeros([1, MAX_SEQ_LEN], f32, Sbuf);
                B_i[[j_p, j_f]] = load(B[[i_batch, i_state + j_p, j_f]], mask = j_f < SEQ_LEN);

                // Step 3: Element-wise multiplication of delta_i, B_i and u_i
                let deltaU = tensor_tensor(delta_i, u_i, op = multiply, mask = i_f < SEQ_LEN);
                let B_i_bcast = broadcast_to(B_i, [CHANNEL_PSIZE, MAX_SEQ_LEN]);
                let deltaBu = tensor_tensor(deltaU, B_i_bcast, op = multiply, mask = i_f < SEQ_LEN);

                // Step 4: Associative scan between deltaA and deltaBu
                let scan_res = tensor_tensor_scan(
                    deltaA,
                    deltaBu,
                    initial = 0.0,
                    op0 = multiply,
                    op1 = add,
                    mask = i_f < SEQ_LEN,
                );

                // Load the relevant tile from C
                let C_i = zeros([1, MAX_SEQ_LEN], f32, Sbuf);
                C_i[[j_p, j_f]] = load(C[[i_batch, i_state + j_p, j_f]], mask = j_f < SEQ_LEN);

                // Step 5: Element-wise multiplication of scan_res and C_i
                let C_i_bcast = broadcast_to(C_i, [CHANNEL_PSIZE, MAX_SEQ_LEN]);
                let scanC = tensor_tensor(scan_res, C_i_bcast, op = multiply, mask = i_f < SEQ_LEN);

                // Step 6: Accumulation of scanC along state_size dimension
                scanC_accum[[i_channel_tile, i_p, i_f]] += copy(scanC, mask = i_f < SEQ_LEN);
            }
        }

        // Store scanC_accum for a single batch to output
        for i_channel_tile in affine_range(CHANNELS / CHANNEL_PSIZE) {
            let channel_start = i_channel_tile * CHANNEL_PSIZE;
            store(
                output[[i_batch, channel_start + i_p, i_f]],
                scanC_accum[[i_channel_tile, i_p, i_f]],
                mask = i_f < SEQ_LEN,
            );
        }
    }
    output
}

/// Mamba's selective scan, NKI's `mamba_v2`: batch → channel tile → state, `delta` and `u`
/// loaded once per channel tile.
#[kernel]
pub fn mamba_v2(
    delta: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    u: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    A: Hbm<f32, CHANNELS, STATE_SIZE>,
    B: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
    C: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
) -> Hbm<f32, BATCH, CHANNELS, SEQ_LEN> {
    // Capacity of the SBUF tiles along the sequence (NKI sizes them by seq_len).
    const MAX_SEQ_LEN: usize = 2048;

    let output = ndarray([BATCH, CHANNELS, SEQ_LEN], delta.dtype, SharedHbm);

    // Launch guard: SEQ_LEN ≤ MAX_SEQ_LEN. The masks below keep every instruction inside
    // seq_len, but nothing else would stop a longer sequence from being silently cut at
    // MAX_SEQ_LEN; the language has no `assert`, so this one-element memset's index makes it a
    // launch constraint (one pass when the sequence fits).
    let seq_len_guard = ndarray([1, 1], f32, Sbuf);
    for i_pass in affine_range((SEQ_LEN + (MAX_SEQ_LEN - 1)) / MAX_SEQ_LEN) {
        seq_len_guard[[0..1, i_pass..i_pass + 1]] = 0.0;
    }

    // Map channels to the partition dimension
    // Tile channels to comply with NKI tile size constraints
    const CHANNEL_PSIZE: usize = 128; // nl.tile_size.pmax

    let (i_p, i_f) = mgrid![0..CHANNEL_PSIZE, 0..MAX_SEQ_LEN];
    let (j_p, j_f) = mgrid![0..1, 0..MAX_SEQ_LEN];

    // Most outer loop with batch_size, parallel_for
    for i_batch in affine_range(BATCH) {
        // Second outer loop: tiling channels
        for i_channel_tile in affine_range(CHANNELS / CHANNEL_PSIZE) {
            let channel_start = i_channel_tile * CHANNEL_PSIZE;

            // partial accumulated scanC result with processed states
            let scanC_accum = zeros([CHANNEL_PSIZE, MAX_SEQ_LEN], delta.dtype, Sbuf);

            // Load delta/u once to be reused across states
            let delta_i = load(
                delta[[i_batch, channel_start + i_p, i_f]],
                mask = i_f < SEQ_LEN,
            );
            let u_i = load(u[[i_batch, channel_start + i_p, i_f]], mask = i_f < SEQ_LEN);

            // Inner loop with state_size, partial parallel
            for i_state in affine_range(STATE_SIZE) {
                // Load the relevant tile from A
                let A_i = load(
                    A[[
                        channel_start..channel_start + CHANNEL_PSIZE,
                        i_state..i_state + 1,
                    ]],
                );

                // Step 1&2: Element-wise multiplication of delta_i and A_i and then exponential
                let deltaA =
                    activation(op = exp, data = delta_i, scale = A_i, mask = i_f < SEQ_LEN);

                // Load the relevant tile from B
                // The broadcast below reads all MAX_SEQ_LEN columns: the tail past SEQ_LEN is
                // zeroed so that it reads no stale SBUF (a strict launch refuses that).
                let B_i = zeros([1, MAX_SEQ_LEN], f32, Sbuf);
                B_i[[j_p, j_f]] = load(B[[i_batch, i_state + j_p, j_f]], mask = j_f < SEQ_LEN);

                // Step 3: Element-wise multiplication of delta_i, B_i and u_i
                let deltaU = tensor_tensor(delta_i, u_i, op = multiply, mask = i_f < SEQ_LEN);
                let B_i_bcast = broadcast_to(B_i, [CHANNEL_PSIZE, MAX_SEQ_LEN]);
                let deltaBu = tensor_tensor(deltaU, B_i_bcast, op = multiply, mask = i_f < SEQ_LEN);

                // Step 4: Associative scan between deltaA and deltaBu
                let scan_res = tensor_tensor_scan(
                    deltaA,
                    deltaBu,
                    initial = 0.0,
                    op0 = multiply,
                    op1 = add,
                    mask = i_f < SEQ_LEN,
                );

                // Load the relevant tile from C
                let C_i = zeros([1, MAX_SEQ_LEN], f32, Sbuf);
                C_i[[j_p, j_f]] = load(C[[i_batch, i_state + j_p, j_f]], mask = j_f < SEQ_LEN);

                // Step 5: Element-wise multiplication of scan_res and C_i
                let C_i_bcast = broadcast_to(C_i, [CHANNEL_PSIZE, MAX_SEQ_LEN]);
                let scanC = tensor_tensor(scan_res, C_i_bcast, op = multiply, mask = i_f < SEQ_LEN);

                // Step 6: Accumulation of scanC along state_size dimension
                scanC_accum[[i_p, i_f]] += copy(scanC, mask = i_f < SEQ_LEN);
            }

            // Store scanC_accum for a single batch to output
            store(
                output[[i_batch, channel_start + i_p, i_f]],
                scanC_accum[[i_p, i_f]],
                mask = i_f < SEQ_LEN,
            );
        }
    }
    output
}

/// Mamba's selective scan, NKI's `mamba_v3`: v2 with the sequence tiled by 512, the scan's
/// last value carried from one sequence tile to the next.
#[kernel]
pub fn mamba_v3(
    delta: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    u: Hbm<f32, BATCH, CHANNELS, SEQ_LEN>,
    A: Hbm<f32, CHANNELS, STATE_SIZE>,
    B: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
    C: Hbm<f32, BATCH, STATE_SIZE, SEQ_LEN>,
) -> Hbm<f32, BATCH, CHANNELS, SEQ_LEN> {
    // Capacity of the SBUF tiles along the sequence (NKI sizes them by seq_len).
    const MAX_SEQ_LEN: usize = 2048;

    let output = ndarray([BATCH, CHANNELS, SEQ_LEN], delta.dtype, SharedHbm);

    // Map channels to the partition dimension
    // Tile channels to comply with NKI tile size constraints
    const CHANNEL_PSIZE: usize = 128; // nl.tile_size.pmax

    // Magic number, decided through empiracal profiling data
    const SEQ_LEN_FSIZE: usize = 512;
    // n_seq_len_tile = SEQ_LEN / SEQ_LEN_FSIZE (SEQ_LEN % 512 == 0 is a launch constraint)

    let (i_p, i_f) = mgrid![0..CHANNEL_PSIZE, 0..MAX_SEQ_LEN];

    // Most outer loop with batch_size, parallel_for
    for i_batch in affine_range(BATCH) {
        // Second outer loop: tiling channels
        for i_channel_tile in affine_range(CHANNELS / CHANNEL_PSIZE) {
            let channel_start = i_channel_tile * CHANNEL_PSIZE;

            // partial accumulated scanC result with processed states
            let scanC_accum = zeros([CHANNEL_PSIZE, MAX_SEQ_LEN], delta.dtype, Sbuf);

            // Load delta/u once to be reused across states
            let delta_i = load(
                delta[[i_batch, channel_start + i_p, i_f]],
                mask = i_f < SEQ_LEN,
            );
            let u_i = load(u[[i_batch, channel_start + i_p, i_f]], mask = i_f < SEQ_LEN);

            // Inner loop with state_size, partial parallel
            for i_state in affine_range(STATE_SIZE) {
                // Load the relevant tile from A
                let A_i = load(
                    A[[
                        channel_start..channel_start + CHANNEL_PSIZE,
                        i_state..i_state + 1,
                    ]],
                );

                // Last scan result
                let scan_init = zeros([CHANNEL_PSIZE, 1], delta_i.dtype, Sbuf);
                // NKI: static_range (its sequential_range gave incorrect answers there)
                for i_seq_len_tile in sequential_range(SEQ_LEN / SEQ_LEN_FSIZE) {
                    let seq_len_start = i_seq_len_tile * SEQ_LEN_FSIZE;

                    // Step 1&2: Element-wise multiplication of delta_i and A_i and then exponential
                    let deltaA = activation(
                        op = exp,
                        data = delta_i[[
                            0..CHANNEL_PSIZE,
                            seq_len_start..seq_len_start + SEQ_LEN_FSIZE,
                        ]],
                        scale = A_i,
                    );

                    // Load the relevant tile from B
                    let B_i = load(
                        B[[
                            i_batch,
                            i_state..i_state + 1,
                            seq_len_start..seq_len_start + SEQ_LEN_FSIZE,
                        ]],
                    );

                    // Step 3: Element-wise multiplication of delta_i, B_i and u_i
                    let deltaU = tensor_tensor(
                        delta_i[[
                            0..CHANNEL_PSIZE,
                            seq_len_start..seq_len_start + SEQ_LEN_FSIZE,
                        ]],
                        u_i[[
                            0..CHANNEL_PSIZE,
                            seq_len_start..seq_len_start + SEQ_LEN_FSIZE,
                        ]],
                        op = multiply,
                    );
                    let B_i_bcast = broadcast_to(B_i, [CHANNEL_PSIZE, SEQ_LEN_FSIZE]);
                    let deltaBu = tensor_tensor(deltaU, B_i_bcast, op = multiply);

                    // Step 4: Associative scan between deltaA and deltaBu
                    let scan_res = tensor_tensor_scan(
                        deltaA,
                        deltaBu,
                        initial = scan_init,
                        op0 = multiply,
                        op1 = add,
                    );
                    scan_init[..] = scan_res[[0..CHANNEL_PSIZE, SEQ_LEN_FSIZE - 1..SEQ_LEN_FSIZE]];

                    // Load the relevant tile from C
                    let C_i = load(
                        C[[
                            i_batch,
                            i_state..i_state + 1,
                            seq_len_start..seq_len_start + SEQ_LEN_FSIZE,
                        ]],
                    );

                    // Step 5: Element-wise multiplication of scan_res and C_i
                    let C_i_bcast = broadcast_to(C_i, [CHANNEL_PSIZE, SEQ_LEN_FSIZE]);

                    // Use PSUM buffer to reduce accumulation latency
                    let scanC = ndarray([CHANNEL_PSIZE, SEQ_LEN_FSIZE], delta.dtype, Psum);
                    scanC[..] = tensor_tensor(scan_res, C_i_bcast, op = multiply);

                    // Step 6: Accumulation of scanC along state_size dimension
                    scanC_accum[[
                        0..CHANNEL_PSIZE,
                        seq_len_start..seq_len_start + SEQ_LEN_FSIZE,
                    ]] += scanC;
                }
            }

            // Store scanC_accum for a single batch to output
            store(
                output[[i_batch, channel_start + i_p, i_f]],
                scanC_accum[[i_p, i_f]],
                mask = i_f < SEQ_LEN,
            );
        }
    }
    output
}

/// One of the three versions (they share the signature).
pub type Mamba = fn(
    &mut NeuronCore,
    &DeviceTensor<f32>,
    &DeviceTensor<f32>,
    &DeviceTensor<f32>,
    &DeviceTensor<f32>,
    &DeviceTensor<f32>,
) -> Result<DeviceTensor<f32>, LaunchError>;

/// The versions, by NKI's names.
pub const VERSIONS: [(&str, Mamba); 3] = [
    ("mamba_v1", mamba_v1),
    ("mamba_v2", mamba_v2),
    ("mamba_v3", mamba_v3),
];

/// The selective scan in f64, as NKI's PyTorch reference (`mamba_torch.py`) defines it:
/// `h[t] = exp(delta[t]·A)·h[t−1] + delta[t]·B[t]·u[t]` from `h[−1] = 0`,
/// `out[t] = Σ_s C[s, t]·h_s[t]`, and for each element a bound on the error of the kernels'
/// fp32 arithmetic.
///
/// The bound: with `M[t] = exp(delta·A)·M[t−1] + |delta·B·u|` (so `|h[t]| ≤ M[t]`), each step
/// of the kernels' scan errs relatively by at most (κ + 6)·u on its terms (u = 2⁻²⁴; `exp` of the
/// fp32-rounded product `delta·A`, |delta·A| ≤ κ, is within κ·u + 2.03·u, the products and the
/// sum add one rounding each), which sums to at most (κ + 6)·(t + 1)·u·M[t] after step t; the
/// multiply by C and the fp32 sum over `state_size` states add (S + 2)·u. So
/// `|out − ref| ≤ ((κ + 6)·(t + 1) + S + 2)·u·1.01·Σ_s |C[s, t]|·M_s[t]` (1.01 covers the
/// products of the (1 + u) factors).
pub fn reference(
    delta: ArrayView3<f32>,
    u: ArrayView3<f32>,
    A: ArrayView2<f32>,
    B: ArrayView3<f32>,
    C: ArrayView3<f32>,
) -> (Array3<f64>, Array3<f64>) {
    let (batch, channels, seq_len) = delta.dim();
    let state_size = A.ncols();
    let mut out = Array3::<f64>::zeros((batch, channels, seq_len));
    let mut magnitude = Array3::<f64>::zeros((batch, channels, seq_len));
    let mut kappa = 0.0f64;
    for b in 0..batch {
        for c in 0..channels {
            for s in 0..state_size {
                let a = f64::from(A[[c, s]]);
                let (mut h, mut m) = (0.0f64, 0.0f64);
                for t in 0..seq_len {
                    let d = f64::from(delta[[b, c, t]]);
                    kappa = kappa.max((d * a).abs());
                    let delta_a = (d * a).exp();
                    let delta_bu = d * f64::from(B[[b, s, t]]) * f64::from(u[[b, c, t]]);
                    h = delta_a * h + delta_bu;
                    m = delta_a * m + delta_bu.abs();
                    let c_t = f64::from(C[[b, s, t]]);
                    out[[b, c, t]] += c_t * h;
                    magnitude[[b, c, t]] += c_t.abs() * m;
                }
            }
        }
    }
    let unit = 2f64.powi(-24);
    for ((_, _, t), m) in magnitude.indexed_iter_mut() {
        let steps = (kappa + 6.0) * (t + 1) as f64 + state_size as f64 + 2.0;
        *m *= steps * unit * 1.01;
    }
    (out, magnitude)
}

/// The largest error of `out` against the reference, the largest error relative to the
/// element's bound, and whether every element is within its bound.
pub fn max_error(
    out: ArrayView3<f32>,
    reference: &Array3<f64>,
    bound: &Array3<f64>,
) -> (f64, f64, bool) {
    let mut worst = 0.0f64;
    let mut worst_ratio = 0.0f64;
    for ((o, r), b) in out.iter().zip(reference).zip(bound) {
        let err = (f64::from(*o) - r).abs();
        worst = worst.max(err);
        // NaN compares false: a NaN output fails.
        worst_ratio = if err <= *b {
            worst_ratio.max(if *b > 0.0 { err / b } else { 0.0 })
        } else {
            f64::INFINITY
        };
    }
    (worst, worst_ratio, worst_ratio.is_finite())
}

/// The kernels' inputs on the host.
pub struct Inputs {
    /// `[batch, channels, seq_len]`.
    pub delta: Array3<f32>,
    /// `[batch, channels, seq_len]`.
    pub u: Array3<f32>,
    /// `[channels, state_size]`.
    pub A: Array2<f32>,
    /// `[batch, state_size, seq_len]`.
    pub B: Array3<f32>,
    /// `[batch, state_size, seq_len]`.
    pub C: Array3<f32>,
}

impl Inputs {
    /// Deterministic inputs: `delta` in [0.01, 0.5) (a softplus output in Mamba), `A` in
    /// [−2, −0.1) (negative, as the tutorial chooses it so that the scan decays), `u`, `B`,
    /// `C` in [−1, 1).
    pub fn random(
        batch: usize,
        seq_len: usize,
        channels: usize,
        state_size: usize,
        seed: u64,
    ) -> Self {
        let r3 = |d0: usize, d1: usize, d2: usize, seed: u64, lo: f64, hi: f64| {
            common::random_f32(nki::ndarray::Ix2(d0 * d1, d2), seed, lo, hi)
                .into_shape_with_order((d0, d1, d2))
                .expect("same element count")
        };
        Inputs {
            delta: r3(batch, channels, seq_len, seed, 0.01, 0.5),
            u: r3(batch, channels, seq_len, seed + 1, -1.0, 1.0),
            A: common::random_f32(
                nki::ndarray::Ix2(channels, state_size),
                seed + 2,
                -2.0,
                -0.1,
            ),
            B: r3(batch, state_size, seq_len, seed + 3, -1.0, 1.0),
            C: r3(batch, state_size, seq_len, seed + 4, -1.0, 1.0),
        }
    }

    /// [`reference`] of these inputs.
    pub fn reference(&self) -> (Array3<f64>, Array3<f64>) {
        reference(
            self.delta.view(),
            self.u.view(),
            self.A.view(),
            self.B.view(),
            self.C.view(),
        )
    }

    /// The inputs uploaded to the modeled HBM, in the kernels' order.
    pub fn device(&self) -> Result<[DeviceTensor<f32>; 5], LaunchError> {
        Ok([
            DeviceTensor::from_array(&self.delta)?,
            DeviceTensor::from_array(&self.u)?,
            DeviceTensor::from_array(&self.A)?,
            DeviceTensor::from_array(&self.B)?,
            DeviceTensor::from_array(&self.C)?,
        ])
    }
}

/// NKI's Mamba tutorial kernels v1–v3 at any shape up to their capacity, checked against an f64
/// reference.
#[derive(Parser)]
struct Cli {
    /// The shape (default 1 2048 256 16): delta, u [BATCH, CHANNELS, SEQ_LEN], A [CHANNELS,
    /// STATE_SIZE], B, C [BATCH, STATE_SIZE, SEQ_LEN]
    #[arg(
        value_names = ["BATCH", "SEQ_LEN", "CHANNELS", "STATE_SIZE"],
        num_args = 4,
        action = clap::ArgAction::Set
    )]
    shape: Vec<usize>,
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let [batch, seq_len, channels, state_size] = common::shape(&cli.shape, [1, 2048, 256, 16]);
    let inputs = Inputs::random(batch, seq_len, channels, state_size, 1);
    let (reference, bound) = inputs.reference();
    let [d, x, a, b, c] = &inputs.device()?;
    let mut core = NeuronCore::default();
    for k in [&mamba_v1::KERNEL, &mamba_v2::KERNEL, &mamba_v3::KERNEL] {
        cli.profile
            .run(&mut core, k, &[d.arg(), x.arg(), a.arg(), b.arg(), c.arg()])?;
    }
    let mut all_within = true;
    for (name, kernel) in VERSIONS {
        let out = kernel(&mut core, d, x, a, b, c)?;
        let median = common::median_time(5, || kernel(&mut core, d, x, a, b, c).map(drop))?;
        let out = out.into_array::<nki::ndarray::Ix3>()?;
        let (worst, ratio, within) = max_error(out.view(), &reference, &bound);
        println!(
            "{name} batch={batch} seq_len={seq_len} channels={channels} state_size={state_size}: \
             median launch {median:.2?} (5 launches); largest |error| against the f64 \
             reference: {worst:.3e}, at most {ratio:.3} of the fp32 bound (within it: {within})"
        );
        all_within &= within;
    }
    if !all_within {
        return Err("result outside the fp32 error bound".into());
    }
    Ok(())
}
