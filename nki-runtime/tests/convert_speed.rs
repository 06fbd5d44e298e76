//! Conversion throughput, in ns per element: `cargo test --release -p nki-runtime --test
//! convert_speed -- --ignored --nocapture`. Not a correctness test (those live next to the code).

use std::time::Instant;

use nki_runtime::Isa;
use nki_runtime::cpu::convert::convert;
use nki_runtime::nki_lang::DType;

/// Best-of-`trials` time per element of converting `n` elements, `reps` times per trial.
fn time(isa: Isa, s: DType, d: DType, n: usize) -> f64 {
    // Both runs start on a 64-byte boundary, so that timings do not depend on where the
    // allocator put them.
    let (sb, db) = (n * s.size() as usize, n * d.size() as usize);
    let mut src_buf = vec![0u8; sb + 64];
    let mut dst_buf = vec![0u8; db + 64];
    let so = src_buf.as_ptr().align_offset(64);
    let dof = dst_buf.as_ptr().align_offset(64);
    let src = &mut src_buf[so..so + sb];
    for (i, b) in src.iter_mut().enumerate() {
        *b = (i.wrapping_mul(2_654_435_761) >> 13) as u8 & 0x3f;
    }
    let src = &*src;
    let dst = &mut dst_buf[dof..dof + db];
    let reps = (1 << 24) / n;
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..reps {
            convert(isa, std::hint::black_box(src), s, dst, d, n);
            std::hint::black_box(&mut *dst);
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / (reps * n) as f64);
    }
    best
}

#[test]
#[ignore = "timing, not correctness; run with --release"]
fn conversion_ns_per_element() {
    use DType::*;
    let old_only = std::env::var_os("NKI_BENCH_OLD").is_some();
    let mut pairs = vec![
        (F32, Bf16),
        (Bf16, F32),
        (F32, F16),
        (F16, F32),
        (Bf16, F16),
        (F16, Bf16),
    ];
    if !old_only {
        pairs.extend([
            (F32, F8E4M3),
            (F8E4M3, F32),
            (F32, F8E5M2),
            (F8E5M2, F32),
            (I8, F32),
            (F32, I8),
            (U8, F32),
            (I32, F32),
            (F32, I32),
            (F32, Tf32),
            (F32, Bool),
            (Bf16, F8E4M3),
            (F8E4M3, Bf16),
        ]);
    }
    for isa in Isa::supported() {
        for &(s, d) in &pairs {
            let l1 = time(isa, s, d, 4096);
            let big = time(isa, s, d, 1 << 20);
            println!("{isa:?}\t{s} -> {d}\t{l1:.3} ns/elem (4Ki, L1)\t{big:.3} ns/elem (1Mi)");
        }
    }
}
