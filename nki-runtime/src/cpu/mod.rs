//! Host CPU code paths for the modeled engines' inner loops.
//!
//! Every routine here takes an [`Isa`] chosen once by the caller (normally [`Isa::detect`]) and
//! produces results that are bit-identical on every path: the vector paths are faster
//! implementations of the portable one, never different numerics.
//!
//! - [`act`]: the Scalar engine's activation functions and the ALU's `power`, each defined once
//!   in fp32 from IEEE operations (accuracy measured in `docs/numerics.md`).
//! - [`alu`]: the Vector and GpSimd engines' ALU operations, each defined once on fp32 or
//!   int32 lanes, and the reductions' fold.
//! - [`convert`]: element type conversions over contiguous runs (DMA casts, engine copies).
//! - [`matmul`]: the TensorEngine's `nc_matmul` inner loop with a defined accumulation order.
//! - `runs` (crate-private): gathers of short runs of words into lanes (broadcast operands).
//! - `search` (crate-private): the top-8 searches' scans of a row's order keys.

pub mod act;
pub mod alu;
pub mod convert;
pub mod matmul;
pub(crate) mod runs;
pub(crate) mod search;
pub mod transpose;

/// Which host code path runs the engines' inner loops.
///
/// The variants are ordered from the most portable to the most specialized; all of them compute
/// bit-identical results, they differ only in speed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Plain Rust scalar loops; runs everywhere.
    Portable,
    /// x86-64 AVX2 with FMA (F16C is used for `f16` when the CPU has it; the vector conversion
    /// loops need it, and fall back to the portable ones without it).
    Avx2Fma,
    /// x86-64 AVX-512 (F, BW, VL); uses 512-bit `vfmadd231ps` for every matmul.
    Avx512,
    /// [`Isa::Avx512`] plus AVX512_BF16: `vcvtneps2bf16` for f32 → bf16 conversions, and
    /// `vdpbf16ps` for bf16 × bf16 matmuls on CPUs where it outruns 512-bit FMA.
    ///
    /// That is AMD: on Zen 4 `vdpbf16ps` retires one per cycle, twice the FLOP rate of
    /// `vfmadd231ps` (`docs/sources/cpu-facts.md`). On Intel Xeon (measured on an Emerald Rapids KVM
    /// guest) it sustains one per ~2.1 cycles against two FMAs per cycle, so bf16 × bf16
    /// matmuls take the FMA kernel there (a 128×128×512 tile: ~116 µs against ~200 µs).
    /// Results are bit-identical either way.
    Avx512Bf16,
}

impl Isa {
    /// Every variant, from the most portable to the most specialized.
    const ALL: [Isa; 4] = [Isa::Portable, Isa::Avx2Fma, Isa::Avx512, Isa::Avx512Bf16];

    /// The best path this CPU supports (the most specialized one).
    pub fn detect() -> Isa {
        Self::ALL
            .into_iter()
            .rev()
            .find(|isa| isa.is_supported())
            .unwrap_or(Isa::Portable)
    }

    /// Every path this CPU can run, [`Isa::Portable`] first (for tests and benchmarks).
    pub fn supported() -> Vec<Isa> {
        Self::ALL
            .into_iter()
            .filter(|isa| isa.is_supported())
            .collect()
    }

    /// Whether this CPU can run the path. Detected once per process: the vector paths assert
    /// it on every call, and the standard library's per-feature queries, though cached, cost
    /// a few loads each.
    #[inline]
    pub fn is_supported(self) -> bool {
        use std::sync::atomic::{AtomicU8, Ordering};
        /// Bit `k` set: `ALL[k]` is supported; bit 7: detection has run.
        static SUPPORTED: AtomicU8 = AtomicU8::new(0);
        let mut bits = SUPPORTED.load(Ordering::Relaxed);
        if bits == 0 {
            bits = Self::ALL
                .iter()
                .enumerate()
                .filter(|(_, isa)| isa.detect_now())
                .fold(0x80, |b, (k, _)| b | 1 << k);
            SUPPORTED.store(bits, Ordering::Relaxed);
        }
        bits & 1 << (self as u8) != 0
    }

    /// Run-time feature detection for the path.
    fn detect_now(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => {
                std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("fma")
                    && std::is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Bf16 => {
                Isa::Avx512.detect_now() && std::is_x86_feature_detected!("avx512bf16")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Panics unless the CPU supports `self`: the vector paths are only sound on such CPUs.
    #[inline]
    pub(crate) fn assert_supported(self) {
        assert!(
            self.is_supported(),
            "the host CPU does not support the {self:?} code path"
        );
    }
}

/// Whether `vdpbf16ps` outruns 512-bit FMA on this CPU: AMD (see [`Isa::Avx512Bf16`]).
/// Cached: CPUID traps to the hypervisor in a VM.
#[cfg(target_arch = "x86_64")]
pub(crate) fn bf16_dot_is_fast() -> bool {
    static FAST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAST.get_or_init(|| {
        let id = core::arch::x86_64::__cpuid(0);
        let mut vendor = [0u8; 12];
        vendor[..4].copy_from_slice(&id.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&id.edx.to_le_bytes());
        vendor[8..].copy_from_slice(&id.ecx.to_le_bytes());
        &vendor == b"AuthenticAMD"
    })
}

/// Asks the host to bring the cache lines of `bytes` into its caches: a hint that changes no
/// value (a no-op where there is no prefetch instruction).
#[inline]
pub(crate) fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..bytes.len()).step_by(64) {
        // SAFETY: `off` is within `bytes`; a prefetch reads nothing architecturally and never
        // faults.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr().add(off).cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Copies `src` into `dst` (of one length) with non-temporal stores where the destination is
/// 16-byte aligned (plain copies of the unaligned head and tail): the destination's lines are
/// not read into the cache before they are overwritten, nor kept there after. The bytes
/// written are those of `copy_from_slice`; [`store_fence`] orders the stores before anything
/// the thread does next.
pub(crate) fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "a streamed copy of unequal lengths");
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let n = dst.len();
        let head = dst.as_ptr().align_offset(16).min(n);
        let body = (n - head) / 16 * 16;
        dst[..head].copy_from_slice(&src[..head]);
        for at in (head..head + body).step_by(16) {
            // SAFETY: bytes `at..at + 16` lie within both slices (`at + 16 ≤ head + body ≤ n`);
            // the destination address is 16-byte aligned (`head` aligns it, steps keep it);
            // SSE2 is part of every x86_64 CPU.
            unsafe {
                let v = _mm_loadu_si128(src.as_ptr().add(at).cast::<__m128i>());
                _mm_stream_si128(dst.as_mut_ptr().add(at).cast::<__m128i>(), v);
            }
        }
        dst[head + body..].copy_from_slice(&src[head + body..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// Orders this thread's non-temporal stores ([`copy_streaming`]) before its later stores.
pub(crate) fn store_fence() {
    // SAFETY: `sfence` (SSE, part of every x86_64 CPU) only orders stores.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
}

/// A reusable, 64-byte-aligned buffer of `u32` words (packing scratch; never reallocated).
pub(crate) struct AlignedBuf {
    words: Vec<u32>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// Allocates `len` zeroed words starting on a 64-byte boundary.
    pub(crate) fn new(len: usize) -> Self {
        let words = vec![0u32; len + 16];
        let misalign = (words.as_ptr() as usize % 64) / 4;
        let start = (16 - misalign) % 16;
        AlignedBuf { words, start, len }
    }

    /// How many aligned words it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The aligned words.
    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u32] {
        &mut self.words[self.start..self.start + self.len]
    }

    /// The aligned words, read-only.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u32] {
        &self.words[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_is_supported_and_listed() {
        let best = Isa::detect();
        assert!(best.is_supported());
        let all = Isa::supported();
        assert_eq!(all[0], Isa::Portable);
        assert_eq!(*all.last().unwrap(), best);
        assert!(all.iter().all(|isa| isa.is_supported()));
    }

    #[test]
    fn streamed_copies_write_the_source_bytes_and_nothing_else() {
        let src: Vec<u8> = (0..4200u32).map(|i| (i * 37 % 251) as u8).collect();
        // Every misalignment of the destination, lengths around the 16-byte steps.
        for offset in 0..17 {
            for len in [0, 1, 15, 16, 17, 31, 64, 1000, 4096] {
                let mut dst = vec![0xa5u8; len + 40];
                copy_streaming(&mut dst[offset..offset + len], &src[3..3 + len]);
                store_fence();
                assert_eq!(
                    &dst[offset..offset + len],
                    &src[3..3 + len],
                    "{offset} {len}"
                );
                assert!(dst[..offset].iter().all(|&b| b == 0xa5), "{offset} {len}");
                assert!(
                    dst[offset + len..].iter().all(|&b| b == 0xa5),
                    "{offset} {len}"
                );
            }
        }
    }

    #[test]
    fn aligned_buf_is_aligned() {
        for len in [1, 17, 1000] {
            let mut b = AlignedBuf::new(len);
            let s = b.as_mut_slice();
            assert_eq!(s.len(), len);
            assert_eq!(s.as_ptr() as usize % 64, 0);
        }
    }
}
