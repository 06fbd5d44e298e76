//! Why the matmul has no AMX path: Intel AMX's `tdpbf16ps` (the tile unit of Sapphire and
//! Emerald Rapids, which torch's oneDNN uses for bf16 GEMMs) does not accumulate in the order
//! the project defines (`nki-runtime/src/cpu/matmul/mod.rs`: one fused multiply-add per `k`,
//! ascending, each rounded to f32), so it cannot give the same bits as the other paths.
//!
//! ```sh
//! cargo run --release -p nki-runtime --example amx_order
//! ```
//!
//! The probe multiplies random `[16, 32] × [32, 16]` bf16 tiles into a random f32 accumulator
//! with one `tdpbf16ps`, keeping 1, 2, 4 or all 16 of the instruction's K-pairs nonzero, and
//! counts the output elements equal to two scalar definitions computed here:
//! - `defined`: the project's order, `acc = fma(a[k], b[k], acc)` for ascending `k`;
//! - `pair sums`: `acc = acc + round(a[2j]·b[2j] + a[2j+1]·b[2j+1])` for ascending pairs `j`.
//!
//! On the development machine (Intel Xeon, family 6 model 167, KVM) one pair per
//! instruction matches `pair sums` on every element and `defined` on 93 %: AMX rounds each
//! pair's sum before adding it. With more pairs neither order matches (46 % at 16 pairs):
//! the pairs of one instruction are not added in ascending order either. x86-64 Linux only;
//! the probe asks the kernel for the tile state (`arch_prctl(ARCH_REQ_XCOMP_PERM)`) and says
//! so when the CPU or the kernel has no AMX.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod x86 {
    use std::arch::asm;
    use std::arch::x86_64::__cpuid_count;

    /// Whether the CPU has AMX-BF16 and the kernel grants this process the tile data state.
    fn amx_granted() -> Result<(), String> {
        // CPUID.(7, 0).EDX: bit 22 AMX-BF16, bit 24 AMX-TILE.
        let leaf = __cpuid_count(7, 0);
        if leaf.edx >> 22 & 1 == 0 || leaf.edx >> 24 & 1 == 0 {
            return Err("this CPU has no AMX-BF16".into());
        }
        let ret: i64;
        // SAFETY: arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18) only
        // changes this process's permitted XSAVE features; the syscall clobbers rcx and r11.
        unsafe {
            asm!("syscall", inlateout("rax") 158i64 => ret, in("rdi") 0x1023i64,
                in("rsi") 18i64, lateout("rcx") _, lateout("r11") _, options(nostack));
        }
        if ret != 0 {
            return Err(format!("the kernel refused the AMX tile state ({ret})"));
        }
        Ok(())
    }

    /// The 64-byte tile configuration: palette 1, tiles 0–2 of 16 rows × 64 bytes.
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    /// `c += a · b` with one `tdpbf16ps`: `c` 16 × 16 f32, `a` 16 × 32 bf16 (row-major bits),
    /// `b_pairs` 16 rows of 16 (b[2j][n], b[2j+1][n]) pairs.
    fn tdpbf16ps(c: &mut [f32; 256], a: &[u16; 512], b_pairs: &[u16; 512]) {
        let mut cfg = TileConfig([0; 64]);
        cfg.0[0] = 1;
        for t in 0..3 {
            cfg.0[16 + 2 * t] = 64;
            cfg.0[48 + t] = 16;
        }
        // SAFETY: `amx_granted` succeeded before any call; the configuration describes three
        // 16 × 64-byte tiles and each pointer addresses 16 rows of 64 bytes at stride 64.
        unsafe {
            asm!("ldtilecfg [{0}]", in(reg) cfg.0.as_ptr(), options(nostack));
            asm!("tileloadd tmm0, [{0} + {1}*1]", in(reg) c.as_ptr(), in(reg) 64usize,
                options(nostack));
            asm!("tileloadd tmm1, [{0} + {1}*1]", in(reg) a.as_ptr(), in(reg) 64usize,
                options(nostack));
            asm!("tileloadd tmm2, [{0} + {1}*1]", in(reg) b_pairs.as_ptr(), in(reg) 64usize,
                options(nostack));
            asm!("tdpbf16ps tmm0, tmm1, tmm2", options(nostack));
            asm!("tilestored [{0} + {1}*1], tmm0", in(reg) c.as_mut_ptr(), in(reg) 64usize,
                options(nostack));
            asm!("tilerelease", options(nostack));
        }
    }

    fn bf16(bits: u16) -> f32 {
        f32::from_bits(u32::from(bits) << 16)
    }

    /// xorshift64.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A normal bf16 of random sign with its exponent in `[127 - spread/2, 127 + spread/2)`.
        fn bf16(&mut self, spread: u16) -> u16 {
            let r = self.next();
            let sign = (r & 1) as u16;
            let exponent = 127 - spread / 2 + (r >> 1) as u16 % spread;
            sign << 15 | exponent << 7 | (r >> 20) as u16 & 0x7f
        }
    }

    /// Elements equal to the defined order and to the pair sums, of `rounds` tiles each with
    /// `pairs` nonzero K-pairs.
    fn probe(pairs: usize, rounds: usize) -> (usize, usize, usize) {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut defined, mut pair_sums, mut total) = (0, 0, 0);
        for round in 0..rounds {
            let spread = if round % 2 == 0 { 8 } else { 40 };
            let mut a = [0u16; 512];
            for m in 0..16 {
                for k in 0..2 * pairs {
                    a[m * 32 + k] = rng.bf16(spread);
                }
            }
            let mut b = [[0u16; 16]; 32];
            for row in b.iter_mut() {
                for x in row.iter_mut() {
                    *x = rng.bf16(spread);
                }
            }
            let mut c = [0f32; 256];
            for x in c.iter_mut() {
                *x = bf16(rng.bf16(spread)) * 1.001;
            }
            let mut b_pairs = [0u16; 512];
            for j in 0..16 {
                for n in 0..16 {
                    b_pairs[j * 32 + 2 * n] = b[2 * j][n];
                    b_pairs[j * 32 + 2 * n + 1] = b[2 * j + 1][n];
                }
            }
            let init = c;
            tdpbf16ps(&mut c, &a, &b_pairs);
            for m in 0..16 {
                for n in 0..16 {
                    let (av, bv) = (|k: usize| bf16(a[m * 32 + k]), |k: usize| bf16(b[k][n]));
                    let mut fused = init[m * 16 + n];
                    for k in 0..32 {
                        fused = av(k).mul_add(bv(k), fused);
                    }
                    let mut paired = init[m * 16 + n];
                    for j in 0..16 {
                        // Both products are exact in f64, and so is their sum at these spreads.
                        let sum = f64::from(av(2 * j)) * f64::from(bv(2 * j))
                            + f64::from(av(2 * j + 1)) * f64::from(bv(2 * j + 1));
                        paired += sum as f32;
                    }
                    let got = c[m * 16 + n].to_bits();
                    defined += usize::from(fused.to_bits() == got);
                    pair_sums += usize::from(paired.to_bits() == got);
                    total += 1;
                }
            }
        }
        (defined, pair_sums, total)
    }

    pub fn main() {
        if let Err(why) = amx_granted() {
            println!("no AMX probe: {why}");
            return;
        }
        println!("tdpbf16ps against two accumulation orders (share of output elements equal)");
        println!(
            "{:>16} {:>10} {:>10} {:>10}",
            "pairs per tile", "defined", "pair sums", "elements"
        );
        for pairs in [1, 2, 4, 16] {
            let (defined, pair_sums, total) = probe(pairs, 2000);
            let pct = |x: usize| 100.0 * x as f64 / total as f64;
            println!(
                "{pairs:>16} {:>9.1}% {:>9.1}% {total:>10}",
                pct(defined),
                pct(pair_sums)
            );
        }
    }
}

fn main() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    x86::main();
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    println!("the AMX probe runs on x86-64 Linux only");
}
