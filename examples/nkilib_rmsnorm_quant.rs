//! The NKI Library's `rmsnorm_quant` kernel (`src/nkilib_src/nkilib/core/rmsnorm/rmsnorm_quant.py`
//! of aws-neuron/nki-library, with its `rmsnorm_quant_constants.py` and
//! `rmsnorm_quant_tile_info.py`): an optional RMS normalisation of each row of a `[B, S, H]`
//! tensor, then an 8-bit quantisation along the row, either by the row's absolute maximum (ROW:
//! the output row carries its fp32 dequantisation scale in 4 trailing `float8_e4m3` bytes) or by
//! a scale given in HBM (STATIC).
//!
//! Written in NKI 0.6's destination-first dialect as the source is: `ndarray` tiles,
//! `nisa::memset` constants, `nisa::dma_copy`, `activation_reduce` (the squares' sum per row),
//! `activation` (`rsqrt` of the mean plus ε; the dequantisation scale's `copy` scaled by 1/240),
//! the gamma row broadcast over the partitions by an `nc_matmul` with a ones row into PSUM, then
//! `scalar_tensor_tensor` in place, `tensor_scalar_reduce` (`abs`, max into `reduce_res`),
//! `tensor_scalar` clips, `reciprocal`, the quantising `tensor_scalar` on the Vector engine into a
//! `float8_e4m3` tile, and the scale's store through `.ap(pattern, dtype = float8_e4m3)`.
//!
//! What differs, and why:
//! - Rust's spelling (`x[[a..b, c..d]]`, `nisa::`, `let`). The source's `RmsNormQuantKernelArgs`
//!   are meta-parameters: `NORM` (RMS_NORM or NO_NORM), `LOWER_BOUND`, `EPS`; its
//!   `quantization_type` selects one of two kernels, `rmsnorm_quant_row` (output
//!   `[B, S, H + 4]`) and `rmsnorm_quant_static` (output `[B, S, H]`, the extra
//!   `input_dequant_scale` input), because the output's shape is the kernel's type here. The
//!   shared steps are `#[helper]`s, as the source's are functions.
//! - The shapes and the dtype are the signature's (`Hbm<T, B, S, H>`), so the source's rank and
//!   size `kernel_assert`s are properties of the instantiations; the 2-D `(B * S, H)` view is the
//!   HBM reshape the source makes, and `ln_w` is the `[H]` vector reshaped to `(1, H)` as there.
//! - The tile loops are `static_range` (unrolled) as the source's Python `range` is: the last row
//!   tile and the last gamma column tile are ragged by `min()`, numbers when the kernel is
//!   lowered. The source's batches of 8 gamma tiles plus a remainder walk the same tiles in the
//!   same order; they are kept as written.
//! - One program: the source's 1-D SPMD sharding (`_rmsnorm_quant_sharded_kernel`) is not
//!   ported (`lnc_degree` 1 of the library test's sweep).
//!
//! `cargo run --release --example nkilib_rmsnorm_quant` runs `[1, 2048, 8192]` bf16 with RMS
//! normalisation and row quantisation (a shape of the library test's sweep), checks the
//! quantised values and the dequantisation scales against the library test's f64 reference and
//! tolerances (written in `reference` below), and prints the median host time per launch and the
//! timing model's estimate for Trn2 and Trn3.

#![allow(non_snake_case)] // NKI's names: ODT, PD

#[path = "common/mod.rs"]
pub mod common;

use clap::Parser;
use nki::F8E4M3;
use nki::ndarray::{Array2, Array3, ArrayView1, ArrayView3, Ix1, Ix3};
use nki::prelude::*;
use nki::program::Target;
use nki::timing::{Detail, Params, Timing};

/// The largest `float8_e4m3` value: the quantised range is `[-240, 240]`.
pub const FP8_RANGE: f64 = 240.0;

/// `_rms_normalize_tile`: `in_tile` (rows `0..num_p` of `PD` columns, in place) times the
/// inverse RMS of its row and `gamma` (a `(1, PD)` HBM view) broadcast over the partitions by
/// TensorE, in column tiles of 512 (`gemm_moving_fmax`).
#[helper]
pub fn rms_normalize_tile(
    in_tile: Tile,
    gamma: Tensor,
    squared: Tile,
    inverse_rms: Tile,
    zero_bias: Tile,
    eps_bias: Tile,
    ones: Tile,
    num_p: usize,
    PD: usize,
) {
    let proc_tile = 512; // nl.tile_size.gemm_moving_fmax
    let gamma_sb = ndarray([1, PD], gamma.dtype, Sbuf);
    nisa::dma_copy(dst = gamma_sb[[0..1, 0..PD]], src = gamma[[0..1, 0..PD]]);

    // The sum of the squares of each row, into inverse_rms (the squares themselves are unused).
    nisa::activation_reduce(
        dst = squared[[0..num_p, 0..PD]],
        op = square,
        data = in_tile[[0..num_p, 0..PD]],
        reduce_op = add,
        reduce_res = inverse_rms[[0..num_p, 0..1]],
        bias = zero_bias[[0..num_p, 0..1]],
        scale = 1.0,
    );
    // 1 / sqrt(sum / PD + eps).
    nisa::activation(
        dst = inverse_rms[[0..num_p, 0..1]],
        op = rsqrt,
        data = inverse_rms[[0..num_p, 0..1]],
        bias = eps_bias[[0..num_p, 0..1]],
        scale = 1.0 / PD,
    );

    let n_iters = (PD + proc_tile - 1) / proc_tile;
    let batch_count = n_iters / 8;
    let remainder_count = n_iters % 8;
    for batch_idx in static_range(batch_count) {
        for inner_idx in static_range(8) {
            let offset = (batch_idx * 8 + inner_idx) * proc_tile;
            let num_f = min(proc_tile, PD - offset);
            apply_gamma(
                in_tile,
                gamma_sb,
                inverse_rms,
                ones,
                num_p,
                offset,
                num_f,
                proc_tile,
            );
        }
    }
    for remainder_idx in static_range(remainder_count) {
        let offset = (batch_count * 8 + remainder_idx) * proc_tile;
        let num_f = min(proc_tile, PD - offset);
        apply_gamma(
            in_tile,
            gamma_sb,
            inverse_rms,
            ones,
            num_p,
            offset,
            num_f,
            proc_tile,
        );
    }
}

/// One column tile of the normalisation: gamma's columns `offset..offset + num_f` broadcast to
/// `num_p` partitions by a matmul with a ones row, then `in_tile *= inverse_rms * gamma`.
#[helper]
pub fn apply_gamma(
    in_tile: Tile,
    gamma_sb: Tile,
    inverse_rms: Tile,
    ones: Tile,
    num_p: usize,
    offset: usize,
    num_f: usize,
    proc_tile: usize,
) {
    let gamma_psum = ndarray([num_p, proc_tile], f32, Psum);
    nisa::nc_matmul(
        dst = gamma_psum[[0..num_p, 0..num_f]],
        stationary = ones[[0..1, 0..num_p]],
        moving = gamma_sb[[0..1, offset..offset + num_f]],
    );
    nisa::scalar_tensor_tensor(
        dst = in_tile[[0..num_p, offset..offset + num_f]],
        data = in_tile[[0..num_p, offset..offset + num_f]],
        op0 = multiply,
        operand0 = inverse_rms[[0..num_p, 0..1]],
        op1 = multiply,
        operand1 = gamma_psum[[0..num_p, 0..num_f]],
    );
}

/// `_row_quantize_tile`: the row's absolute maximum (clipped to `lower_bound` when there is one,
/// the tile clipped to `±lower_bound`), over 240, at least 1e-6, is the dequantisation scale; the
/// tile times its reciprocal, rounded to `float8_e4m3`, is the quantised row.
#[helper]
pub fn row_quantize_tile(
    in_tile: Tile,
    out_tile: Tile,
    dequant: Tile,
    zero_bias: Tile,
    num_p: usize,
    PD: usize,
    lower_bound: f32,
) {
    let abs_tile = ndarray([num_p, PD], bf16, Sbuf);
    nisa::tensor_scalar_reduce(
        dst = abs_tile[[0..num_p, 0..PD]],
        data = in_tile[[0..num_p, 0..PD]],
        op0 = abs,
        operand0 = 0.0,
        reduce_op = maximum,
        reduce_res = dequant[[0..num_p, 0..1]],
    );
    if lower_bound > 0.000001 {
        nisa::tensor_scalar(
            dst = dequant[[0..num_p, 0..1]],
            data = dequant[[0..num_p, 0..1]],
            op0 = minimum,
            operand0 = lower_bound,
        );
        nisa::tensor_scalar(
            dst = in_tile[[0..num_p, 0..PD]],
            data = in_tile[[0..num_p, 0..PD]],
            op0 = minimum,
            operand0 = lower_bound,
            op1 = maximum,
            operand1 = -lower_bound,
        );
    }
    nisa::activation(
        dst = dequant[[0..num_p, 0..1]],
        op = copy,
        data = dequant[[0..num_p, 0..1]],
        scale = 1.0 / 240.0,
        bias = zero_bias[[0..num_p, 0..1]],
    );
    nisa::tensor_scalar(
        dst = dequant[[0..num_p, 0..1]],
        data = dequant[[0..num_p, 0..1]],
        op0 = maximum,
        operand0 = 0.000001,
    );
    let quant_scales = ndarray([num_p, 1], f32, Sbuf);
    nisa::reciprocal(
        dst = quant_scales[[0..num_p, 0..1]],
        data = dequant[[0..num_p, 0..1]],
    );
    nisa::tensor_scalar(
        dst = out_tile[[0..num_p, 0..PD]],
        data = in_tile[[0..num_p, 0..PD]],
        op0 = multiply,
        operand0 = quant_scales[[0..num_p, 0..1]],
        engine = vector,
    );
}

/// `_rmsnorm_quant_single_core_kernel`: every row tile of the `(OD, PD)` views loaded,
/// normalised (with `norm`), quantised by its row (`row`) or by the static scale tile
/// `static_scale` (the reciprocal of the input's dequantisation scale; unread for `row`, where
/// the source passes `None`), and stored with, for `row`, its scales in the row's last 4 bytes.
#[helper]
pub fn single_core(
    in_view: Tensor,
    gamma: Tensor,
    static_scale: Tile,
    out_view: Tensor,
    OD: usize,
    PD: usize,
    norm: bool,
    row: bool,
    lower_bound: f32,
    eps: f32,
) {
    let ODT = 128; // nl.tile_size.pmax
    let dequant_scale_size = 4; // float32 bytes / float8_e4m3 bytes

    // build_rms_norm_quant_constants
    let zero_bias = ndarray([ODT, 1], f32, Sbuf);
    nisa::memset(dst = zero_bias, value = 0.0);
    let eps_bias = ndarray([ODT, 1], bf16, Sbuf);
    nisa::memset(dst = eps_bias, value = eps);
    let ones = ndarray([1, ODT], bf16, Sbuf);
    nisa::memset(dst = ones, value = 1.0);

    let n_tiles = (OD + ODT - 1) / ODT;
    for outer_tile_num in static_range(n_tiles) {
        let squared = ndarray([ODT, PD], f32, Sbuf);
        let inverse_rms = ndarray([ODT, 1], f32, Sbuf);
        let quant_tile = ndarray([ODT, PD], float8_e4m3, Sbuf);
        let in_tile = ndarray([ODT, PD], bf16, Sbuf);
        let dequant = ndarray([ODT, 1], f32, Sbuf);

        // _load_input_tensor_tile
        let offset = outer_tile_num * ODT;
        let num_p = min(ODT, OD - offset);
        nisa::dma_copy(
            dst = in_tile[[0..num_p, 0..PD]],
            src = in_view[[offset..offset + num_p, 0..PD]],
        );
        if norm {
            rms_normalize_tile(
                in_tile,
                gamma,
                squared,
                inverse_rms,
                zero_bias,
                eps_bias,
                ones,
                num_p,
                PD,
            );
        }
        if row {
            row_quantize_tile(
                in_tile,
                quant_tile,
                dequant,
                zero_bias,
                num_p,
                PD,
                lower_bound,
            );
        } else {
            // _static_quantize_tile
            nisa::tensor_scalar(
                dst = in_tile[[0..num_p, 0..PD]],
                data = in_tile[[0..num_p, 0..PD]],
                op0 = multiply,
                operand0 = static_scale[[0..num_p, 0..1]],
                op1 = add,
                operand1 = zero_bias[[0..num_p, 0..1]],
            );
            nisa::tensor_scalar(
                dst = quant_tile[[0..num_p, 0..PD]],
                data = in_tile[[0..num_p, 0..PD]],
                op0 = minimum,
                operand0 = 240.0,
                op1 = maximum,
                operand1 = -240.0,
            );
        }

        // _store_tensor_tile_and_dequant_scales
        nisa::dma_copy(
            dst = out_view[[offset..offset + num_p, 0..PD]],
            src = quant_tile[[0..num_p, 0..PD]],
        );
        if row {
            nisa::dma_copy(
                dst = out_view[[offset..offset + num_p, PD..PD + dequant_scale_size]],
                src = dequant.ap(
                    pattern = [[dequant_scale_size, num_p], [1, dequant_scale_size]],
                    dtype = float8_e4m3,
                ),
            );
        }
    }
}

/// RMS normalisation (with `NORM`) and row quantisation of a `[B, S, H]` tensor: `[B, S, H + 4]`
/// `float8_e4m3`, each row's last 4 bytes its fp32 dequantisation scale.
#[kernel(
    rmsnorm_quant_row_bf16_1x2048x8192(T = bf16, B = 1, S = 2048, H = 8192, NORM = true, LOWER_BOUND = 0.0, EPS = 0.000001),
    rmsnorm_quant_row_bf16_1x160x1024(T = bf16, B = 1, S = 160, H = 1024, NORM = true, LOWER_BOUND = 0.0, EPS = 0.000001),
    rmsnorm_quant_row_bf16_1x130x4608(T = bf16, B = 1, S = 130, H = 4608, NORM = true, LOWER_BOUND = 0.0, EPS = 0.000001),
    rmsnorm_quant_row_bf16_2x100x1000_lb(T = bf16, B = 2, S = 100, H = 1000, NORM = true, LOWER_BOUND = 0.5, EPS = 0.000001),
    rmsnorm_quant_row_bf16_1x2x4100_only(T = bf16, B = 1, S = 2, H = 4100, NORM = false, LOWER_BOUND = 0.0, EPS = 0.000001),
    rmsnorm_quant_row_f16_1x128x2048(T = f16, B = 1, S = 128, H = 2048, NORM = true, LOWER_BOUND = 0.0, EPS = 0.000001),
)]

pub fn rmsnorm_quant_row<
    T,
    const B: usize,
    const S: usize,
    const H: usize,
    const NORM: bool,
    const LOWER_BOUND: f32,
    const EPS: f32,
>(
    hidden: Hbm<T, B, S, H>,
    ln_w: Hbm<T, H>,
) -> Hbm<float8_e4m3, B, S, { H + 4 }> {
    let out = ndarray([B, S, H + 4], float8_e4m3, SharedHbm);
    let in_view = hidden.reshape((B * S, H));
    let out_view = out.reshape((B * S, H + 4));
    let gamma = ln_w.reshape((1, H));
    // The source's `static_quant_scale_sbuf = None` for row quantisation: never read.
    let no_static_scale = ndarray([128, 1], f32, Sbuf);
    single_core(
        in_view,
        gamma,
        no_static_scale,
        out_view,
        B * S,
        H,
        NORM,
        true,
        LOWER_BOUND,
        EPS,
    );
    out
}

/// RMS normalisation (with `NORM`) and static quantisation of a `[B, S, H]` tensor by the
/// reciprocal of `input_dequant_scale` (one value broadcast to `[128, 1]` in HBM), clipped to
/// `±240`: `[B, S, H]` `float8_e4m3`.
#[kernel(
    rmsnorm_quant_static_bf16_1x160x1024(T = bf16, B = 1, S = 160, H = 1024, NORM = true, EPS = 0.000001),
    rmsnorm_quant_static_bf16_1x2x2048_only(T = bf16, B = 1, S = 2, H = 2048, NORM = false, EPS = 0.000001),
)]

pub fn rmsnorm_quant_static<
    T,
    const B: usize,
    const S: usize,
    const H: usize,
    const NORM: bool,
    const EPS: f32,
>(
    hidden: Hbm<T, B, S, H>,
    ln_w: Hbm<T, H>,
    input_dequant_scale: Hbm<f32, 128, 1>,
) -> Hbm<float8_e4m3, B, S, H> {
    let out = ndarray([B, S, H], float8_e4m3, SharedHbm);
    let in_view = hidden.reshape((B * S, H));
    let out_view = out.reshape((B * S, H));
    let gamma = ln_w.reshape((1, H));

    // _load_and_invert_static_dequant_scale
    let quant_scale = ndarray([128, 1], f32, Sbuf);
    nisa::dma_copy(
        dst = quant_scale[[0..128, 0..1]],
        src = input_dequant_scale[[0..128, 0..1]],
    );
    nisa::reciprocal(
        dst = quant_scale[[0..128, 0..1]],
        data = quant_scale[[0..128, 0..1]],
    );
    single_core(
        in_view,
        gamma,
        quant_scale,
        out_view,
        B * S,
        H,
        NORM,
        false,
        0.0,
        EPS,
    );
    out
}

/// The library test's `rmsnorm_quant_ref` in f64: per row, `x / (sqrt(mean(x²)) + eps) · gamma`
/// (or `x` without normalisation), then ROW: the absolute maximum (clipped to `lower_bound` with
/// the row clipped to `±lower_bound` when `lower_bound > 0`) over 240 is the dequantisation scale
/// and `norm / scale` the value to quantise; STATIC (`static_dequant = Some(s)`): `norm / s`
/// clipped to `±240`. Returns the values to quantise `[B·S, H]` and the scales `[B·S]` (ROW).
pub fn reference(
    hidden: ArrayView3<f64>,
    gamma: ArrayView1<f64>,
    norm: bool,
    lower_bound: f64,
    eps: f64,
    static_dequant: Option<f64>,
) -> (Array2<f64>, Vec<f64>) {
    let (b, s, h) = hidden.dim();
    let mut values = Array2::<f64>::zeros((b * s, h));
    let mut scales = Vec::with_capacity(b * s);
    for bi in 0..b {
        for si in 0..s {
            let row = hidden.slice(nki::ndarray::s![bi, si, ..]);
            let r = bi * s + si;
            let rms = (row.iter().map(|x| x * x).sum::<f64>() / h as f64).sqrt();
            let mut normed: Vec<f64> = if norm {
                row.iter()
                    .zip(gamma.iter())
                    .map(|(x, g)| x / (rms + eps) * g)
                    .collect()
            } else {
                row.to_vec()
            };
            match static_dequant {
                None => {
                    let mut abs_max = normed.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    if lower_bound > 0.0 {
                        abs_max = abs_max.min(lower_bound);
                        for v in &mut normed {
                            *v = v.clamp(-lower_bound, lower_bound);
                        }
                    }
                    let dequant = abs_max / FP8_RANGE;
                    for (c, v) in normed.iter().enumerate() {
                        values[[r, c]] = v / dequant;
                    }
                    scales.push(dequant);
                }
                Some(d) => {
                    for (c, v) in normed.iter().enumerate() {
                        values[[r, c]] = (v / d).clamp(-FP8_RANGE, FP8_RANGE);
                    }
                }
            }
        }
    }
    (values, scales)
}

/// The bound on `|decoded output − reference|` for a quantised value `want`: the library test's
/// relative tolerance (`norm_values_rtol` 0.072, above `float8_e4m3`'s relative rounding error
/// of at most 2⁻⁴) plus half the spacing of its subnormals (2⁻¹⁰), where values round to 0 or to
/// a multiple of 2⁻⁹ whatever their relative error (the library compares with the reference
/// already cast to `float8_e4m3`, which absorbs that rounding; here the reference is exact).
pub fn value_bound(want: f64) -> f64 {
    0.072 * want.abs() + 2f64.powi(-10)
}

/// `float8_e4m3` (NKI's, IEEE-style: bias 7, 3 mantissa bits, largest finite 240, exponent 15
/// for inf and NaN) decoded from its byte.
pub fn decode_e4m3(byte: u8) -> f64 {
    let sign = if byte & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((byte >> 3) & 0xF);
    let man = f64::from(byte & 0x7);
    match exp {
        0 => sign * man / 8.0 * 2f64.powi(-6),
        15 if man == 0.0 => sign * f64::INFINITY,
        15 => f64::NAN,
        e => sign * (1.0 + man / 8.0) * 2f64.powi(e - 7),
    }
}

/// The library's `rmsnorm_quant` on `[1, 2048, 8192]` bf16 (RMS norm, row quantisation),
/// checked against the f64 reference, timed on the host and estimated by the timing model for
/// Trn2 and Trn3.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    profile: common::ProfileArg,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (b, s, h) = (1, 2048, 8192);
    let x = common::uniform(Ix3(b, s, h), 7, -3.0, 3.0).mapv(bf16::from_f64);
    let g = common::uniform(Ix1(h), 8, 0.5, 1.5).mapv(bf16::from_f64);
    let xd = DeviceTensor::from_array(&x)?;
    let gd = DeviceTensor::from_array(&g)?;
    let kernel = &rmsnorm_quant_row_bf16_1x2048x8192::KERNEL;
    let mut core = NeuronCore::default();
    cli.profile.run(&mut core, kernel, &[xd.arg(), gd.arg()])?;
    let mut out = rmsnorm_quant_row_bf16_1x2048x8192(&mut core, &xd, &gd)?;
    let t = common::median_time(5, || {
        rmsnorm_quant_row_bf16_1x2048x8192::launch_into(&mut core, &xd, &gd, &mut out)
    })?;
    let got: Array3<F8E4M3> = out.into_array::<Ix3>()?;
    let (want, scales) = reference(
        x.mapv(f64::from).view(),
        g.mapv(f64::from).view(),
        true,
        0.0,
        1e-6,
        None,
    );
    let got_values = got.slice(nki::ndarray::s![.., .., 0..h]);
    let c = common::compare(
        got_values.iter().map(|v| decode_e4m3(v.0)),
        want.iter().copied(),
        want.iter().map(|&w| value_bound(w)),
    );
    let mut scale_err = 0.0f64;
    for (r, want_scale) in scales.iter().enumerate() {
        let bytes: Vec<u8> = (0..4).map(|i| got[[0, r, h + i]].0).collect();
        let got_scale = f64::from(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
        scale_err = scale_err.max((got_scale - want_scale).abs() / want_scale.abs());
    }
    println!(
        "nkilib rmsnorm_quant [{b}, {s}, {h}] bf16 (row): values {c}; scales max rel err {scale_err:.2e}; median launch {t:.2?} (5 launches)"
    );
    for target in [Target::Trn2, Target::Trn3] {
        let mut core = NeuronCore::new(target);
        let schedule = Timing::new()
            .params(Params::for_target(target))
            .detail(Detail::Summary)
            .run_shapes(&mut core, kernel, &[&[b, s, h], &[h]])?;
        println!("  modeled on {target:?}: {:.1} µs", schedule.latency_us());
    }
    if !c.within || scale_err > 0.007 {
        return Err("result outside the library test's tolerance".into());
    }
    Ok(())
}
