//! Tiles loaded once from an input and read only by matmuls (`host::input_tiles`): a plain
//! launch skips their loads and the matmuls read the inputs where they lie, as chains split
//! between the threads or one by one; a matmul whose operand does not map onto the input (a
//! stepped slice) has the load run first. Every path against plain f64 loops, exactly (small
//! integers: every product and sum is exact in f32).

use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

use crate::common;

/// `x [H, T]` loaded as `[128, H/128, T]` (rows `h·128 + p`) and `w [H, E]` likewise, as the
/// NKI Library's router loads them; `chain = x.T @ w` as one chain of `H/128` accumulating
/// matmuls per token tile (the last one 64 tokens), `single` the matmuls of
/// `x[0:128, 0:128].T @ w[0:128]` and `x[128:256, 64:192].T @ w[128:256]` one by one (other
/// elements of the same inputs), and `every_other = x[0:128, 0:192:2].T @ w[128:256]` through a
/// stepped slice.
#[kernel]
fn loaded_once(
    x: Hbm<f32, 256, 192>,
    w: Hbm<f32, 256, 96>,
) -> (Hbm<f32, 192, 96>, Hbm<f32, 256, 96>, Hbm<f32, 96, 96>) {
    let chain = ndarray([192, 96], f32, SharedHbm);
    let single = ndarray([256, 96], f32, SharedHbm);
    let every_other = ndarray([96, 96], f32, SharedHbm);
    let x_sb = ndarray([128, 2, 192], f32, Sbuf);
    nisa::dma_copy(
        dst = x_sb,
        src = x.reshape_dim(0, (2, 128)).permute((1, 0, 2)),
    );
    let w_sb = ndarray([128, 2, 96], f32, Sbuf);
    nisa::dma_copy(
        dst = w_sb,
        src = w.reshape_dim(0, (2, 128)).permute((1, 0, 2)),
    );
    for t in static_range(2) {
        let start = t * 128;
        let size = min(128, 192 - start);
        let acc = ndarray([128, 96], f32, Psum);
        for h in static_range(2) {
            nisa::nc_matmul(
                dst = acc[[0..size, 0..96]],
                stationary = x_sb[[0..128, h, start..start + size]],
                moving = w_sb[[0..128, h, 0..96]],
            );
        }
        let res = ndarray([128, 96], f32, Sbuf);
        nisa::tensor_copy(dst = res[[0..size, 0..96]], src = acc[[0..size, 0..96]]);
        nisa::dma_copy(
            dst = chain.slice(0, start, start + size),
            src = res[[0..size, 0..96]],
        );
    }
    for h in static_range(2) {
        let one = ndarray([128, 96], f32, Psum);
        nisa::nc_matmul(
            dst = one,
            stationary = x_sb[[0..128, h, h * 64..h * 64 + 128]],
            moving = w_sb[[0..128, h, 0..96]],
        );
        let one_sb = ndarray([128, 96], f32, Sbuf);
        nisa::tensor_copy(dst = one_sb, src = one);
        nisa::dma_copy(dst = single.slice(0, h * 128, h * 128 + 128), src = one_sb);
    }
    let stepped = ndarray([96, 96], f32, Psum);
    nisa::nc_matmul(
        dst = stepped,
        stationary = x_sb.select(1, 0).slice(1, 0, 192, 2),
        moving = w_sb[[0..128, 1, 0..96]],
    );
    let stepped_sb = ndarray([96, 96], f32, Sbuf);
    nisa::tensor_copy(dst = stepped_sb, src = stepped);
    nisa::dma_copy(dst = every_other, src = stepped_sb);
    (chain, single, every_other)
}

/// `Σ_k a[k0 + k, cols(m)] · b[k1 + k, n]` over `k < 128`, for each listed column `m` of `a`.
fn products(a: &Array2<f32>, b: &Array2<f32>, rows: [usize; 2], cols: &[usize]) -> Vec<f64> {
    let mut out = Vec::new();
    for &m in cols {
        for n in 0..b.ncols() {
            let sum: f64 = (0..128)
                .map(|k| f64::from(a[[rows[0] + k, m]]) * f64::from(b[[rows[1] + k, n]]))
                .sum();
            out.push(sum);
        }
    }
    out
}

#[test]
fn matmuls_read_the_inputs_of_skipped_loads_on_every_path() {
    let x = common::rand_int(Ix2(256, 192), 41, -8, 8);
    let w = common::rand_int(Ix2(256, 96), 42, -8, 8);
    // chain: both row tiles of x and w summed; single: rows 0..128, tokens 0..128, then rows
    // 128..256, tokens 64..192; every_other: x rows 0..128 at tokens 0, 2, …, 190 against w rows 128..256.
    let tokens: Vec<usize> = (0..192).collect();
    let lo = products(&x, &w, [0, 0], &tokens);
    let hi = products(&x, &w, [128, 128], &tokens);
    let want_chain: Vec<f64> = lo.iter().zip(&hi).map(|(a, b)| a + b).collect();
    let mut want_single = products(&x, &w, [0, 0], &tokens[..128]);
    want_single.extend(products(&x, &w, [128, 128], &tokens[64..]));
    let even: Vec<usize> = (0..192).step_by(2).collect();
    let want_every_other = products(&x, &w, [0, 128], &even);
    let (dx, dw) = (
        DeviceTensor::from_array(&x).unwrap(),
        DeviceTensor::from_array(&w).unwrap(),
    );
    for (label, mut core) in common::host_paths() {
        // Device tensors keep their packings from launch to launch: run twice.
        for launch in 0..2 {
            let (chain, single, every_other) = loaded_once(&mut core, &dx, &dw).unwrap();
            let what = format!("{label}, launch {launch}");
            let exact = |name: &str, got: &DeviceTensor<f32>, want: &[f64]| {
                common::assert_bits(
                    &format!("{name} ({what})"),
                    got.as_slice(),
                    want.iter().map(|&v| v as f32),
                );
            };
            exact("chain", &chain, &want_chain);
            exact("single", &single, &want_single);
            exact("every_other", &every_other, &want_every_other);
        }
    }
    // The host-side launch too (inputs without versions).
    let mut core = NeuronCore::default();
    let (chain, _, _) = loaded_once::host(&mut core, x.view(), w.view()).unwrap();
    common::assert_bits(
        "chain (host arrays)",
        chain.iter(),
        want_chain.iter().map(|&v| v as f32),
    );
}
