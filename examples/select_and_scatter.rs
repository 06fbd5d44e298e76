//! `select_and_scatter_kernel` of nki-samples' `reference/vision.py` (as of the commit before
//! c4b806e, which removed it), ported with NKI's names, loops, tile sizes and masks: for each
//! 3 × 3 window (stride 2, padding 1) of the operand, the source value is added at the
//! window's first maximum.
//!
//! It uses what this port was written for: the two batches loaded into partitions 0–64 and
//! 64–128 by a loop variable (`operand_local[ib_1 * 64..(ib_1 + 1) * 64, ...]`), and the
//! scattered windows kept in a `private_hbm` tensor declared in the batch loop,
//! `(sw_h, sw_w, par_dim(p), H, W)`.
//!
//! What differs: Rust's spelling (`&` for the asserts' `and`, `/` for `//`, `..` for `:`,
//! `r#where` for `nl.where`, `mgrid!` for `nl.mgrid`, `ds`-free slices written `a..b`);
//! `N`, `C`, `H`, `W`, `SH`, `SW` are meta-parameters (the kernel sizes tiles by them); the
//! type annotations `nt.tensor[...]` are left out (they state the shapes the calls produce);
//! the tuple `padding = (1, 1)` and its `sum(padding)` are two integers and their sum; the
//! dtype is a parameter `T` (NKI's kernel takes whatever dtype its operand has).
//!
//! `cargo run --release --example select_and_scatter` runs the unit test's own shape,
//! 8 × 64 × 112 × 112, in f32 and bf16, each launch plain and strict, checks every output
//! element against the unit test's `cpu_golden_result` (written here as plain loops: exactly
//! in f32, within the unit test's `rtol = atol = 1e-2` in bf16), and prints the host time of
//! each launch and the timing model's estimate on Trn2. The tests (`tests/all/
//! ported_select_and_scatter.rs`) run the same kernel at 2 × 64 × 16 × 16 and 4 × 64 × 24 × 24
//! against their own reference.
//!
//! Why the full shape is slow: 6.4 M elements per tensor, the padded operand tile
//! `[128, 114, 114]` read as 3 × 3 windows (runs of three elements; neighbouring windows share
//! a row or a column), and nine scattered windows written one element in two, stored to HBM
//! and loaded back. A plain launch took 2.4 s (f32) and 2.4 s (bf16), a strict one 21.4 s and
//! 16.7 s with `--release`, and 2.9, 3.6, 26.0 and 19.5 s with the dev profile, which builds
//! the modeled core at opt-level 3 too (this project's 2-vCPU Xeon with a load average of 3 to
//! 5 from other builds: wall times about twice the process's CPU time). `perf record` of the
//! whole run puts two thirds of its samples in strict mode's bookkeeping of on-chip memory
//! (`Shadow::each_slice` 25 %, `Shadow::set` 13 %, `Strict::each_run` 10 %,
//! `Iterations::relation` 6 %): strict mode keeps a 12-byte stamp per byte of SBUF, so each
//! f32 element read or written walks 48 bytes of shadow (the operand tile alone has 80 MB of
//! it), and a stride-2 operand is judged an element at a time. Stamps per element rather than
//! per byte would cut that walk by the element size; the shadow is per byte so that views of
//! another dtype (`view(dtype)`) are judged exactly, so that change is left for now.

#[path = "common/mod.rs"]
pub mod common;

use nki::Element;
use nki::ndarray::{Array4, Ix4};
use nki::prelude::*;
use nki::timing::{Detail, Params, Timing};
use std::time::Instant;

#[kernel(
    select_and_scatter_2x64x16(T = f32, N = 2, C = 64, H = 16, W = 16, SH = 8, SW = 8),
    select_and_scatter_4x64x24(T = f32, N = 4, C = 64, H = 24, W = 24, SH = 12, SW = 12),
    select_and_scatter_2x64x16_bf16(T = bf16, N = 2, C = 64, H = 16, W = 16, SH = 8, SW = 8),
    select_and_scatter_8x64x112(T = f32, N = 8, C = 64, H = 112, W = 112, SH = 56, SW = 56),
    select_and_scatter_8x64x112_bf16(T = bf16, N = 8, C = 64, H = 112, W = 112, SH = 56, SW = 56)
)]
pub fn select_and_scatter_kernel<
    T,
    const N: usize,
    const C: usize,
    const H: usize,
    const W: usize,
    const SH: usize,
    const SW: usize,
>(
    operand_tensor: Hbm<T, N, C, H, W>,
    source_tensor: Hbm<T, N, C, SH, SW>,
) -> Hbm<T, N, C, H, W> {
    let (N, C, H, W) = operand_tensor.shape; // batch, channel, height, width
    let (sw_h, sw_w) = (3, 3); // set window dimensions to 3
    let (stride_h, stride_w) = (2, 2); // set window strides to 2
    let (padding_h, padding_w) = (1, 1); // set padding to 2
    let (src_n, src_c, src_h, src_w) = source_tensor.shape;
    let padded_h = H + padding_h + padding_w;
    let padded_w = W + padding_h + padding_w;
    assert!((N == src_n) & (C == src_c));
    assert!((padded_h - sw_h) / stride_h + 1 == src_h);
    assert!((padded_w - sw_w) / stride_w + 1 == src_w);
    assert!((H == W) & (src_h == src_w));

    // restriction imposed when we work on two batches together in partitions 0-64 and 64-128
    assert!((C == 64) & (N % 2 == 0));

    let kernel_dtype = operand_tensor.dtype;
    assert_eq!(operand_tensor.dtype, source_tensor.dtype);

    let out_tensor = ndarray((N, C, H, W), operand_tensor.dtype, SharedHbm);

    let p = 128; // num of partitions to use
    for ib in affine_range(N / 2) {
        let win_idx_mask_local = ndarray(
            (par_dim(p), src_h, src_w, sw_h, sw_w),
            dtype = u8,
            buffer = Sbuf,
        );

        let operand_local = full(
            (par_dim(p), padded_h, padded_w),
            dtype = kernel_dtype,
            buffer = Sbuf,
            fill_value = finfo(kernel_dtype).min,
        );

        for ib_1 in affine_range(2) {
            // pad and load the first and second batch to partitions 0-64, 64-128
            operand_local[[ib_1 * 64..(ib_1 + 1) * 64, 1..H + 1, 1..W + 1]] = load(
                operand_tensor[[2 * ib + ib_1, 0..64, 0..H, 0..W]],
                dtype = kernel_dtype,
            );
        }

        for ik in affine_range(src_h) {
            // All the instructions in this loop will work on the same `window`
            let window = mgrid![0..p, 0..src_w, 0..sw_h, 0..sw_w];

            // create sliding windows for operand_local
            let operand_local_sw =
                copy(operand_local[[window.p, 2 * ik + window.y, 2 * window.x + window.z]]);

            // Step 1
            // Iterate all sliding windows, and find the maximum val of each window.
            let max_val = max(
                operand_local_sw,
                axis = [2, 3],
                dtype = kernel_dtype,
                keepdims = true,
            );

            // Step 2
            // Create a mask with the shape of all the sliding windows
            // - When the a position value equal to the maximum of the its sliding windows, the mask value = 1
            // - Otherwise, the mask value = 0
            let _win_idx_mask = equal(max_val, operand_local_sw, dtype = i8);

            // Step 3
            // The sliding window in the mask may have multiple positions with value 1.
            // Need to find the first position with value 1 which we will later scatter to that position.
            //
            // 1. Generate a linear sequence with same size of the window using iota and
            //    get the maximum value of the sequence.
            // 2. Based on each mask window, we select the maximum value when the
            //    position value is 0, and the corresponding value from the linear sequence when
            //    the position value is 1.
            // 3. Then we get minimum value of each window.
            let index = 3 * window.y + window.z;
            let linear_indices = iota(index, dtype = u32);

            let selecting_win_indices =
                r#where(_win_idx_mask, linear_indices, sw_h * sw_w, dtype = u32);
            let selected_win_indices = min(
                selecting_win_indices,
                axis = [2, 3],
                dtype = u32,
                keepdims = true,
            );

            // Step 4
            // With the minimum value, we can create another mask where value 1 indicates the postition we are going to scatter to.
            win_idx_mask_local[[0..p, ik, 0..src_w, 0..sw_h, 0..sw_w]] =
                equal(selected_win_indices, linear_indices, dtype = u8);
        }

        let source_local = ndarray(
            (par_dim(p), src_h, src_w),
            dtype = kernel_dtype,
            buffer = Sbuf,
        );
        for ib_1 in affine_range(2) {
            source_local[[ib_1 * 64..(ib_1 + 1) * 64, 0..src_h, 0..src_w]] = load(
                source_tensor[[2 * ib + ib_1, 0..64, 0..src_h, 0..src_w]],
                dtype = kernel_dtype,
            );
        }

        let vals_nonlocal = ndarray(
            (sw_h, sw_w, par_dim(p), H, W),
            dtype = kernel_dtype,
            buffer = PrivateHbm,
        );
        for iq in affine_range(sw_h) {
            for ih in affine_range(sw_w) {
                // Step 5
                // Scatter on the windows using the mask created in step 4
                let tile = mgrid![0..p, 0..src_h, 0..src_w];
                let vals_local = zeros(
                    (par_dim(p), padded_h, padded_w),
                    dtype = kernel_dtype,
                    buffer = Sbuf,
                );
                vals_local[[tile.p, 2 * tile.x + iq, 2 * tile.y + ih]] = multiply(
                    source_local,
                    win_idx_mask_local[[tile.p, tile.x, tile.y, iq, ih]],
                    dtype = kernel_dtype,
                );

                store(
                    vals_nonlocal[[iq, ih, 0..p, 0..H, 0..W]],
                    value = vals_local[[0..p, 1..H + 1, 1..W + 1]],
                );
            }
        }

        let out_local = zeros(
            (par_dim(p), H, W),
            dtype = kernel_dtype,
            buffer = Sbuf,
            name = "out_local",
        );

        for iq in affine_range(sw_h) {
            for ih in affine_range(sw_w) {
                // Step 6
                // Reduce add for each window from Step 5 to get the final result
                let vals_local = load(vals_nonlocal[[iq, ih, 0..p, 0..H, 0..W]]);
                out_local += vals_local;
            }
        }

        for ib_1 in affine_range(2) {
            store(
                out_tensor[[2 * ib + ib_1, 0..64, 0..H, 0..W]],
                value = out_local[[(ib_1 * 64)..((ib_1 + 1) * 64), 0..H, 0..W]],
            );
        }
    }

    out_tensor
}

/// The unit test's `cpu_golden_result`: window dimensions (3, 3), strides (2, 2), padding
/// (1, 1) with zeros, `np.argmax` (the first maximum in row-major order) of each window, the
/// source value added there, in f64.
pub fn golden(operand: &Array4<f64>, source: &Array4<f64>) -> Array4<f64> {
    let (n, c, h, w) = operand.dim();
    let (_, _, src_h, src_w) = source.dim();
    let mut out = Array4::<f64>::zeros((n, c, h, w));
    for b in 0..n {
        for ch in 0..c {
            for i in 0..src_h {
                for j in 0..src_w {
                    // The padded operand's window at (2i, 2j): padding is 0.
                    let mut best = (0, 0, f64::NEG_INFINITY);
                    for dy in 0..3 {
                        for dx in 0..3 {
                            let (y, x) = (2 * i + dy, 2 * j + dx);
                            let v = if y == 0 || x == 0 || y > h || x > w {
                                0.0
                            } else {
                                operand[[b, ch, y - 1, x - 1]]
                            };
                            if v > best.2 {
                                best = (y, x, v);
                            }
                        }
                    }
                    out[[b, ch, best.0 - 1, best.1 - 1]] += source[[b, ch, i, j]];
                }
            }
        }
    }
    out
}

/// One launch of `kernel` on `operand` and `source` (strict or not): the output and the host
/// time of the launch (binding and execution, not the copies in and out).
fn launch<E: Element>(
    kernel: &Kernel<'static>,
    operand: &Array4<E>,
    source: &Array4<E>,
    strict: bool,
) -> Result<(Array4<E>, f64), Box<dyn std::error::Error>> {
    let mut core = NeuronCore::new(kernel.program().target()).with_strict(strict);
    let a = DeviceTensor::from_array(operand)?;
    let b = DeviceTensor::from_array(source)?;
    let mut out = DeviceTensor::<E>::zeros(operand.shape())?;
    let start = Instant::now();
    {
        let mut outs = [out.arg_mut()];
        let ins = [a.arg(), b.arg()];
        let bound = kernel.bind(&ins, &mut outs)?;
        core.execute(bound)?;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((out.into_array::<Ix4>()?, secs))
}

/// The largest `|got − want| − (atol + rtol·|want|)` over the elements (≤ 0 when every element
/// is within the bound) and the number of elements compared.
fn excess(got: &Array4<f64>, want: &Array4<f64>, rtol: f64, atol: f64) -> (f64, usize) {
    let mut worst = f64::NEG_INFINITY;
    let mut compared = 0;
    for (g, w) in got.iter().zip(want) {
        worst = worst.max((g - w).abs() - (atol + rtol * w.abs()));
        compared += 1;
    }
    (worst, compared)
}

/// Runs `kernel` plain and strict on `operand` and `source`, compares both outputs (read as
/// f64 by `value`) with the golden result under `rtol`/`atol`, prints the times; an error when
/// an element is outside the bound.
fn run<E: Element>(
    kernel: &Kernel<'static>,
    operand: &Array4<E>,
    source: &Array4<E>,
    value: fn(E) -> f64,
    (rtol, atol): (f64, f64),
) -> Result<(), Box<dyn std::error::Error>> {
    let to_f64 = |a: &Array4<E>| a.mapv(value);
    let want = golden(&to_f64(operand), &to_f64(source));
    let name = kernel.program().name().to_string();
    for strict in [false, true] {
        let (got, secs) = launch(kernel, operand, source, strict)?;
        let (worst, compared) = excess(&to_f64(&got), &want, rtol, atol);
        let mode = if strict { "strict" } else { "plain" };
        println!(
            "{name} {mode}: {compared} elements, {}; launch {secs:.2} s",
            if worst <= 0.0 {
                format!("all within rtol = {rtol}, atol = {atol} of the golden result")
            } else {
                format!("an element {worst:e} outside the bound")
            }
        );
        if worst > 0.0 || compared != want.len() {
            return Err(format!("{name} {mode}: not the golden result").into());
        }
    }
    let target = Target::Trn2;
    let schedule = Timing::new()
        .params(Params::for_target(target))
        .detail(Detail::Summary)
        .run_shapes(
            &mut NeuronCore::new(target),
            kernel,
            &[operand.shape(), source.shape()],
        )?;
    println!("  modeled on {target:?}: {:.1} µs", schedule.latency_us());
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, hw) = (8, 112);
    let s = hw / 2;
    // f32: the operand positive (padding's zeros never win) with 24 random bits per value, so
    // each window's maximum is unique; the source multiples of 1/8 below 4, so the at most
    // four values added into one element are added exactly in any order.
    let operand = common::random_f32(Ix4(n, 64, hw, hw), 47, 0.001, 1.0);
    let source =
        common::uniform(Ix4(n, 64, s, s), 48, 0.0, 32.0).mapv(|v| (v.floor() / 8.0) as f32);
    run(
        &select_and_scatter_8x64x112::KERNEL,
        &operand,
        &source,
        f64::from,
        (0.0, 0.0),
    )?;
    // bf16, as the unit test: `random_sample` in [0, 1) rounded to bf16 (a window often holds
    // its maximum twice: the first one wins in the kernel and in `np.argmax`), compared with
    // `np.allclose(rtol = 1e-2, atol = 1e-2)` (the kernel adds in bf16).
    let operand = common::uniform(Ix4(n, 64, hw, hw), 49, 0.0, 1.0).mapv(bf16::from_f64);
    let source = common::uniform(Ix4(n, 64, s, s), 50, 0.0, 1.0).mapv(bf16::from_f64);
    run(
        &select_and_scatter_8x64x112_bf16::KERNEL,
        &operand,
        &source,
        bf16::to_f64,
        (1e-2, 1e-2),
    )
}
