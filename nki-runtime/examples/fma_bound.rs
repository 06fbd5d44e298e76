//! The host's arithmetic limit for the seed tile (`[128, 128] × [128, 512]`, 8,388,608
//! multiply-adds): the core's clock and its throughput of 512-bit and 256-bit FMAs (and of
//! `vdpbf16ps` where the CPU has it), measured with hand-written loops, and the time the seed
//! matmul cannot beat on one thread on each code path. Issue 23 compares the kernel with it.
//!
//! ```sh
//! cargo run --release -p nki-runtime --example fma_bound
//! ```
//!
//! The clock is timed on a chain of dependent register-register adds (one per cycle); each throughput on
//! twelve independent accumulators (more than the FMA latency × ports needs), so the loops run
//! at the ports' limit. The bound counts the multiply-adds only: packing, conversions to and
//! from bf16 and the copy out of PSUM come on top. On AVX2 machines it also times the AVX2
//! kernel's step (three moving loads, four `vbroadcastss`, twelve FMAs) from L1, in ymm and in
//! xmm registers: whether the broadcasts keep the FMAs from their limit. Last, the clock and the
//! FMA throughput again while a second thread keeps the other core busy with FMAs: a core may
//! run slower when both are busy, and that is the two-thread bound. x86-64 only.

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::asm;
    use std::time::Instant;

    /// Multiply-adds of the seed tile.
    const SEED_MACS: f64 = 128.0 * 128.0 * 512.0;
    /// Iterations per timed loop.
    const ITERS: u64 = 20_000_000;

    /// Seconds per iteration of `run`, the best of five runs.
    fn best(run: impl Fn(u64)) -> f64 {
        run(ITERS / 10);
        (0..5)
            .map(|_| {
                let t = Instant::now();
                run(ITERS);
                t.elapsed().as_secs_f64() / ITERS as f64
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// Eight dependent 1-cycle register-register adds per iteration (an add of an immediate
    /// can be folded away by the renamer of recent Intel cores).
    fn add_chain(n: u64) {
        let mut x = 0u64;
        let y = std::hint::black_box(1u64);
        // SAFETY: plain integer instructions on registers the asm owns.
        unsafe {
            asm!(
                "2:",
                "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}",
                "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}",
                "dec {n}",
                "jnz 2b",
                x = inout(reg) x,
                y = in(reg) y,
                n = inout(reg) n => _,
                options(nomem, nostack),
            );
        }
        std::hint::black_box(x);
    }

    macro_rules! twelve_independent {
        ($name:ident, $feature:literal, $op:literal, $reg:literal) => {
            /// Twelve independent accumulations per iteration.
            #[target_feature(enable = $feature)]
            fn $name(n: u64) {
                // SAFETY: register-only vector instructions of the enabled feature; every
                // register they write is declared clobbered.
                unsafe {
                    asm!(
                        concat!("vxorps ", $reg, "12, ", $reg, "12, ", $reg, "12"),
                        concat!("vxorps ", $reg, "13, ", $reg, "13, ", $reg, "13"),
                        "2:",
                        concat!($op, " ", $reg, "0, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "1, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "2, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "3, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "4, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "5, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "6, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "7, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "8, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "9, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "10, ", $reg, "12, ", $reg, "13"),
                        concat!($op, " ", $reg, "11, ", $reg, "12, ", $reg, "13"),
                        "dec {n}",
                        "jnz 2b",
                        n = inout(reg) n => _,
                        out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                        out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                        out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                        out("xmm12") _, out("xmm13") _,
                        options(nomem, nostack),
                    );
                }
            }
        };
    }

    twelve_independent!(fma256, "avx2,fma", "vfmadd231ps", "ymm");
    twelve_independent!(fma512, "avx512f", "vfmadd231ps", "zmm");
    twelve_independent!(dpbf16, "avx512bf16,avx512f", "vdpbf16ps", "zmm");

    macro_rules! kernel_step {
        ($(#[$doc:meta])* $name:ident, $reg:literal, $second:literal, $third:literal) => {
            $(#[$doc])*
            #[target_feature(enable = "avx2,fma")]
            fn $name(n: u64, buf: &[f32; 64]) {
                // SAFETY: loads from `buf` (offsets below 256 bytes, unaligned); every register
                // written is declared clobbered.
                unsafe {
                    asm!(
                        "2:",
                        concat!("vmovups ", $reg, "12, [{b}]"),
                        concat!("vmovups ", $reg, "13, [{b} + ", $second, "]"),
                        concat!("vmovups ", $reg, "14, [{b} + ", $third, "]"),
                        concat!("vbroadcastss ", $reg, "15, [{b} + 128]"),
                        concat!("vfmadd231ps ", $reg, "0, ", $reg, "15, ", $reg, "12"),
                        concat!("vfmadd231ps ", $reg, "1, ", $reg, "15, ", $reg, "13"),
                        concat!("vfmadd231ps ", $reg, "2, ", $reg, "15, ", $reg, "14"),
                        concat!("vbroadcastss ", $reg, "15, [{b} + 132]"),
                        concat!("vfmadd231ps ", $reg, "3, ", $reg, "15, ", $reg, "12"),
                        concat!("vfmadd231ps ", $reg, "4, ", $reg, "15, ", $reg, "13"),
                        concat!("vfmadd231ps ", $reg, "5, ", $reg, "15, ", $reg, "14"),
                        concat!("vbroadcastss ", $reg, "15, [{b} + 136]"),
                        concat!("vfmadd231ps ", $reg, "6, ", $reg, "15, ", $reg, "12"),
                        concat!("vfmadd231ps ", $reg, "7, ", $reg, "15, ", $reg, "13"),
                        concat!("vfmadd231ps ", $reg, "8, ", $reg, "15, ", $reg, "14"),
                        concat!("vbroadcastss ", $reg, "15, [{b} + 140]"),
                        concat!("vfmadd231ps ", $reg, "9, ", $reg, "15, ", $reg, "12"),
                        concat!("vfmadd231ps ", $reg, "10, ", $reg, "15, ", $reg, "13"),
                        concat!("vfmadd231ps ", $reg, "11, ", $reg, "15, ", $reg, "14"),
                        "dec {n}",
                        "jnz 2b",
                        b = in(reg) buf.as_ptr(),
                        n = inout(reg) n => _,
                        out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                        out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                        out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                        out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
                        options(nostack, readonly),
                    );
                }
            }
        };
    }

    kernel_step!(
        /// The AVX2 kernel's step (`cpu/matmul/avx2.rs`, a 4 × 24 block): three moving vectors
        /// loaded, then per row a `vbroadcastss` of the stationary value and three FMAs; from a
        /// buffer that stays in L1. 96 multiply-adds per iteration.
        step_ymm,
        "ymm",
        "32",
        "64"
    );
    kernel_step!(
        /// [`step_ymm`] in 128-bit registers (a 4 × 12 block, `vbroadcastss` into xmm): 48
        /// multiply-adds per iteration.
        step_xmm,
        "xmm",
        "16",
        "32"
    );

    /// One measured instruction kind: its throughput and the seed's bound with it.
    fn report(name: &str, per_iter: f64, hz: f64, macs_per_instr: f64) {
        let per_cycle = 12.0 / (per_iter * hz);
        let macs_per_s = per_cycle * hz * macs_per_instr;
        println!(
            "{name:<28} {per_cycle:>5.2} per cycle  {:>7.1} GMAC/s  seed tile ≥ {:>6.1} µs",
            macs_per_s / 1e9,
            SEED_MACS / macs_per_s * 1e6
        );
    }

    pub fn main() {
        let hz = 8.0 / best(add_chain);
        println!(
            "clock (8 dependent adds per iteration): {:.2} GHz",
            hz / 1e9
        );
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            let t = best(|n| unsafe { fma256(n) });
            report("vfmadd231ps ymm (Avx2Fma)", t, hz, 8.0);
            let buf = [1.0f32; 64];
            for (name, macs, step) in [
                (
                    "AVX2 kernel step, 4 x 24 ymm",
                    96.0,
                    step_ymm as unsafe fn(u64, &[f32; 64]),
                ),
                ("the same, 4 x 12 xmm", 48.0, step_xmm),
            ] {
                // SAFETY: the CPU has AVX2 and FMA (checked above).
                let t = best(|n| unsafe { step(n, &buf) });
                let per_cycle = macs / (t * hz);
                println!(
                    "{name:<28} {per_cycle:>5.2} MAC/cycle  seed tile ≥ {:>6.1} µs",
                    SEED_MACS / (per_cycle * hz) * 1e6
                );
            }
        }
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked above).
            let t = best(|n| unsafe { fma512(n) });
            report("vfmadd231ps zmm (Avx512)", t, hz, 16.0);
        }
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16") {
            // SAFETY: the CPU has AVX-512F and AVX512_BF16 (checked above).
            let t = best(|n| unsafe { dpbf16(n) });
            report("vdpbf16ps zmm (bf16 pairs)", t, hz, 32.0);
        }
        both_cores();
        println!(
            "(the bound counts the seed's {} multiply-adds only; packing, bf16 conversions and the copy out of PSUM come on top)",
            SEED_MACS as u64
        );
    }

    /// The clock and the widest FMA's throughput on this core while a second thread runs the
    /// same FMAs on the other (a core may clock lower when both are busy): the bound of the
    /// seed split over two threads.
    fn both_cores() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (fma, name, macs): (unsafe fn(u64), &str, f64) =
            if std::is_x86_feature_detected!("avx512f") {
                (fma512, "zmm", 16.0)
            } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
            {
                (fma256, "ymm", 8.0)
            } else {
                return;
            };
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return;
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: the CPU has the feature `fma` was chosen for (checked above).
                    unsafe { fma(ITERS / 100) };
                }
            });
            let hz = 8.0 / best(add_chain);
            // SAFETY: as above.
            let t = best(|n| unsafe { fma(n) });
            stop.store(true, Ordering::Relaxed);
            let per_cycle = 12.0 / (t * hz);
            let macs_per_s = per_cycle * hz * macs;
            println!(
                "both cores running {name} FMAs: clock {:.2} GHz, {per_cycle:.2} per cycle, {:.1} GMAC/s per core: seed tile on two threads ≥ {:.1} µs",
                hz / 1e9,
                macs_per_s / 1e9,
                SEED_MACS / (2.0 * macs_per_s) * 1e6
            );
        });
    }
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    x86::main();
    #[cfg(not(target_arch = "x86_64"))]
    println!("fma_bound measures x86-64 vector units only");
}
