//! The TensorEngine's host inner loops alone, on one thread, for every code path this CPU runs,
//! the paths alternating round after round: `cpu::matmul::matmul` (packing both operands, then
//! the kernel) on the seed's 128×128×512 tile, and `cpu::transpose::transpose16_bf16` over a
//! `[128, 512]` bf16 tile (256 blocks of 16 × 16, what `nc_transpose` of such a tile does).
//!
//! `cargo run --release -p nki-runtime --example cpu_kernels [-- ROUNDS [CALLS [DTYPE [KxMxN]]]]`
//! (defaults: 7 rounds of 2000 calls, `bf16`, `128x128x512`; `DTYPE` is the matmul's, `bf16`,
//! `f16` or `f32`; `KxMxN` its contraction, stationary and moving sizes, at most 128, 128, 512).
//! Prints, per path, the median over rounds of each round's per-call P50, in microseconds.

use std::time::Instant;

use nki_lang::DType;
use nki_runtime::cpu::Isa;
use nki_runtime::cpu::matmul::{MatmulScratch, Operand, Output, matmul};
use nki_runtime::cpu::transpose::transpose16_bf16;

/// A deterministic pseudo-random value in [-1, 1).
fn value(i: usize) -> f32 {
    let x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
    x as f32 / (1u64 << 23) as f32 - 1.0
}

/// `rows × cols` values of `dtype`, little-endian, row-major.
fn operand(dtype: DType, rows: usize, cols: usize, seed: usize) -> Vec<u8> {
    let n = rows * cols;
    let mut out = Vec::with_capacity(n * dtype.size() as usize);
    for i in 0..n {
        let x = value(i + seed * n);
        match dtype {
            DType::F32 => out.extend_from_slice(&x.to_le_bytes()),
            DType::F16 => out.extend_from_slice(&half::f16::from_f32(x).to_le_bytes()),
            _ => out.extend_from_slice(&half::bf16::from_f32(x).to_le_bytes()),
        }
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: usize = args.first().map_or(7, |s| s.parse().expect("ROUNDS"));
    let calls: usize = args.get(1).map_or(2000, |s| s.parse().expect("CALLS"));
    let dtype = match args.get(2).map(String::as_str) {
        None | Some("bf16") => DType::Bf16,
        Some("f16") => DType::F16,
        Some("f32") => DType::F32,
        Some(other) => panic!("DTYPE is bf16, f16 or f32, not {other}"),
    };
    let (k, m, n) = match args.get(3) {
        None => (128, 128, 512),
        Some(s) => {
            let d: Vec<usize> = s.split('x').map(|x| x.parse().expect("KxMxN")).collect();
            assert!(
                d.len() == 3 && (1..=128).contains(&d[0]) && (1..=128).contains(&d[1]),
                "KxMxN with K, M in 1..=128"
            );
            assert!((1..=512).contains(&d[2]), "N in 1..=512");
            (d[0], d[1], d[2])
        }
    };
    let (a, b) = (operand(dtype, k, m, 1), operand(dtype, k, n, 2));
    let size = dtype.size() as usize;
    let st = Operand {
        data: &a,
        dtype,
        offset: 0,
        row_stride: m * size,
        rows: k,
        cols: m,
    };
    let mv = Operand {
        data: &b,
        dtype,
        offset: 0,
        row_stride: n * size,
        rows: k,
        cols: n,
    };
    let paths = Isa::supported();
    let mut scratch = MatmulScratch::new();
    let mut psum = vec![0f32; m * n];
    let mut p50s = vec![Vec::new(); paths.len()];
    let mut t50s = vec![Vec::new(); paths.len()];
    let tile: Vec<u16> = (0..128 * 512)
        .map(|i| (i as u16).wrapping_mul(40503))
        .collect();
    for _ in 0..rounds {
        for (p, &isa) in paths.iter().enumerate() {
            let mut ns = Vec::with_capacity(calls);
            let mut sink = 0u32;
            for _ in 0..calls {
                let t = Instant::now();
                for bi in 0..128 / 16 {
                    for bj in 0..512 / 16 {
                        let b = transpose16_bf16(isa, &tile, bi * 16 * 512 + bj * 16, 512);
                        sink ^= std::hint::black_box(&b)[bj % 16][bi];
                    }
                }
                ns.push(t.elapsed().as_nanos() as f64);
            }
            std::hint::black_box(sink);
            ns.sort_by(f64::total_cmp);
            t50s[p].push(ns[ns.len() / 2] / 1e3);
        }
        for (p, &isa) in paths.iter().enumerate() {
            let calls = if isa == Isa::Portable { 3 } else { calls };
            let mut ns = Vec::with_capacity(calls);
            for _ in 0..calls {
                let mut out = Output {
                    data: &mut psum,
                    offset: 0,
                    row_stride: n,
                };
                let t = Instant::now();
                matmul(isa, &mut scratch, &st, &mv, &mut out, false, 0..n);
                ns.push(t.elapsed().as_nanos() as f64);
            }
            ns.sort_by(f64::total_cmp);
            p50s[p].push(ns[ns.len() / 2] / 1e3);
        }
    }
    println!("[128, 512] bf16 tile in 16 x 16 transposes, one thread, {rounds} rounds");
    for (isa, mut v) in paths.iter().zip(t50s) {
        v.sort_by(f64::total_cmp);
        println!("{isa:?}: median P50 {:.2} µs", v[v.len() / 2]);
    }
    println!("{k}x{m}x{n} {dtype:?} matmul kernel, one thread, {rounds} rounds");
    for (isa, mut v) in paths.into_iter().zip(p50s) {
        v.sort_by(f64::total_cmp);
        let rounds: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
        println!(
            "{isa:?}: median P50 {:.1} µs (rounds: {})",
            v[v.len() / 2],
            rounds.join(" ")
        );
    }
}
