//! 16 × 16 transposes of 32-bit elements: the inner step of the engines' blocked transposes
//! (`nc_transpose` into PSUM, `load_transpose2d`). Moves bits only; every path gives the same
//! result. AVX-512 transposes in zmm registers whole; AVX2 as four 8 × 8 transposes in ymm
//! registers (32-bit, then 64-bit interleaves within 128-bit lanes, then a swap of lanes).

use super::Isa;

/// A transposed block: `out[j][i]` is element `(i, j)` of the source.
pub type Block16 = [[u32; 16]; 16];

/// `out[j][i] = block[i * stride + j]` for `i, j < 16`.
///
/// # Panics
/// If `block` is shorter than `15 * stride + 16`.
pub fn transpose16(isa: Isa, block: &[u32], stride: usize) -> Block16 {
    let need = stride
        .checked_mul(15)
        .and_then(|n| n.checked_add(16))
        .expect("a 16-row block's extent fits usize");
    assert!(block.len() >= need, "a 16 x 16 block at stride {stride}");
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F (`assert_supported`); `block` holds 16 rows of
            // 16 elements `stride` apart (checked above).
            unsafe { transpose16_avx512(block, stride) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 (`assert_supported`); `block` holds 16 rows of 16
            // elements `stride` apart (checked above).
            unsafe { transpose16_avx2(|i, c| &block[i * stride + c..i * stride + c + 8]) }
        }
        Isa::Portable => transpose16_portable(block, stride),
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => transpose16_portable(block, stride),
    }
}

/// [`transpose16`] of bf16 elements widened to fp32 bits on the way (`bits << 16`, exact):
/// `out[j][i] = src[first + i * stride + j] << 16`.
///
/// # Panics
/// If `src` is shorter than `first + 15 * stride + 16`.
pub fn transpose16_bf16(isa: Isa, src: &[u16], first: usize, stride: usize) -> Block16 {
    let need = stride
        .checked_mul(15)
        .and_then(|n| n.checked_add(first))
        .and_then(|n| n.checked_add(16))
        .expect("a 16-row block's extent fits usize");
    assert!(src.len() >= need, "a 16 x 16 block at stride {stride}");
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F (`assert_supported`); `src` holds 16 rows of
            // 16 elements `stride` apart from `first` (checked above).
            unsafe { transpose16_bf16_avx512(src, first, stride) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 (`assert_supported`); `src` holds 16 rows of 16
            // elements `stride` apart from `first` (checked above).
            unsafe { transpose16_bf16_avx2(src, first, stride) }
        }
        Isa::Portable => transpose16_bf16_portable(src, first, stride),
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            transpose16_bf16_portable(src, first, stride)
        }
    }
}

/// [`transpose16_bf16`] in scalar code.
fn transpose16_bf16_portable(src: &[u16], first: usize, stride: usize) -> Block16 {
    let mut out = [[0u32; 16]; 16];
    for (i, row) in (0..16)
        .map(|i| &src[first + i * stride..first + i * stride + 16])
        .enumerate()
    {
        for (j, &v) in row.iter().enumerate() {
            out[j][i] = u32::from(v) << 16;
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16_bf16_avx512(src: &[u16], first: usize, stride: usize) -> Block16 {
    use std::arch::x86_64::*;
    let mut words = [0u32; 256];
    for i in 0..16 {
        let row = &src[first + i * stride..first + i * stride + 16];
        // SAFETY: `row` holds 16 u16s (32 bytes); unaligned load, widened and shifted.
        let v = unsafe { _mm256_loadu_si256(row.as_ptr().cast()) };
        let w = _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(v));
        // SAFETY: `words[16 i ..]` holds 16 u32s.
        unsafe { _mm512_storeu_si512(words[16 * i..].as_mut_ptr().cast(), w) };
    }
    // SAFETY: the CPU supports AVX-512 F (the caller's contract); `words` holds 16 rows of 16.
    unsafe { transpose16_avx512(&words, 16) }
}

/// [`transpose16_bf16`] with AVX2: each row of 8 bf16 widened in a ymm register, then
/// [`transpose8_avx2`] as in [`transpose16_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose16_bf16_avx2(src: &[u16], first: usize, stride: usize) -> Block16 {
    use std::arch::x86_64::*;
    let mut out = [[0u32; 16]; 16];
    for bi in 0..2 {
        for bj in 0..2 {
            let rows: [__m256i; 8] = core::array::from_fn(|i| {
                let at = first + (8 * bi + i) * stride + 8 * bj;
                let row = &src[at..at + 8];
                // SAFETY: `row` holds 8 u16s (16 bytes); unaligned load, widened and shifted.
                let h = unsafe { _mm_loadu_si128(row.as_ptr().cast()) };
                _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h))
            });
            for (j, v) in transpose8_avx2(rows).into_iter().enumerate() {
                let col = &mut out[8 * bj + j][8 * bi..8 * bi + 8];
                // SAFETY: `col` holds 8 u32s (32 bytes); unaligned store.
                unsafe { _mm256_storeu_si256(col.as_mut_ptr().cast(), v) };
            }
        }
    }
    out
}

/// [`transpose16`] with AVX2: four 8 × 8 blocks, `row(i, c)` giving the 8 elements of row `i`
/// from column `c` (0 or 8).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn transpose16_avx2<'a>(row: impl Fn(usize, usize) -> &'a [u32]) -> Block16 {
    use std::arch::x86_64::*;
    let mut out = [[0u32; 16]; 16];
    for bi in 0..2 {
        for bj in 0..2 {
            let rows: [__m256i; 8] = core::array::from_fn(|i| {
                let r = &row(8 * bi + i, 8 * bj)[..8];
                // SAFETY: `r` holds 8 u32s (32 bytes); unaligned load.
                unsafe { _mm256_loadu_si256(r.as_ptr().cast()) }
            });
            for (j, v) in transpose8_avx2(rows).into_iter().enumerate() {
                let col = &mut out[8 * bj + j][8 * bi..8 * bi + 8];
                // SAFETY: `col` holds 8 u32s (32 bytes); unaligned store.
                unsafe { _mm256_storeu_si256(col.as_mut_ptr().cast(), v) };
            }
        }
    }
    out
}

/// An 8 × 8 transpose of 32-bit elements: vector `j` of the result holds element `j` of every
/// row. 32-bit then 64-bit interleaves within 128-bit lanes leave, in `u[c]` (`u[4 + c]`),
/// rows `0..4` (`4..8`) of column `c` in the low lane and of column `4 + c` in the high lane;
/// joining the low lanes of `u[c]` and `u[4 + c]` gives column `c`, their high lanes column
/// `4 + c`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8_avx2(r: [std::arch::x86_64::__m256i; 8]) -> [std::arch::x86_64::__m256i; 8] {
    use std::arch::x86_64::*;
    let t: [__m256i; 8] = core::array::from_fn(|k| {
        let (a, b) = (r[k / 2 * 2], r[k / 2 * 2 + 1]);
        if k % 2 == 0 {
            _mm256_unpacklo_epi32(a, b)
        } else {
            _mm256_unpackhi_epi32(a, b)
        }
    });
    // u[4h + c]: rows 4h..4h + 4 of columns c (low lane) and 4 + c (high lane).
    let u: [__m256i; 8] = core::array::from_fn(|k| {
        let (h, c) = (k / 4, k % 4);
        let (a, b) = (t[4 * h + c / 2], t[4 * h + c / 2 + 2]);
        if c % 2 == 0 {
            _mm256_unpacklo_epi64(a, b)
        } else {
            _mm256_unpackhi_epi64(a, b)
        }
    });
    core::array::from_fn(|j| {
        let c = j % 4;
        if j < 4 {
            _mm256_permute2x128_si256::<0x20>(u[c], u[4 + c])
        } else {
            _mm256_permute2x128_si256::<0x31>(u[c], u[4 + c])
        }
    })
}

fn transpose16_portable(block: &[u32], stride: usize) -> Block16 {
    let mut out = [[0u32; 16]; 16];
    for (i, row) in block.chunks(stride).take(16).enumerate() {
        for (j, &v) in row[..16].iter().enumerate() {
            out[j][i] = v;
        }
    }
    out
}

/// The network: 32-bit then 64-bit interleaves within 128-bit lanes leave, in vector
/// `u[4k + c]`, rows `4k..4k + 4` of column `4L + c` in lane `L`; a 4 × 4 transpose of the
/// 128-bit lanes of `u[c], u[4 + c], u[8 + c], u[12 + c]` then gives columns `c, 4 + c, 8 + c,
/// 12 + c` whole.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16_avx512(block: &[u32], stride: usize) -> Block16 {
    use std::arch::x86_64::*;
    let mut r = [_mm512_setzero_si512(); 16];
    for (i, v) in r.iter_mut().enumerate() {
        let row = &block[i * stride..i * stride + 16];
        // SAFETY: `row` holds 16 u32s (64 bytes); unaligned load.
        *v = unsafe { _mm512_loadu_si512(row.as_ptr().cast()) };
    }
    let mut t = [_mm512_setzero_si512(); 16];
    for k in 0..8 {
        t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    let mut u = [_mm512_setzero_si512(); 16];
    for k in 0..4 {
        u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
        u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
    let mut out = [[0u32; 16]; 16];
    for c in 0..4 {
        let (u0, u1, u2, u3) = (u[c], u[4 + c], u[8 + c], u[12 + c]);
        let a = _mm512_shuffle_i32x4::<0x44>(u0, u1);
        let b = _mm512_shuffle_i32x4::<0xEE>(u0, u1);
        let cc = _mm512_shuffle_i32x4::<0x44>(u2, u3);
        let d = _mm512_shuffle_i32x4::<0xEE>(u2, u3);
        let cols = [
            _mm512_shuffle_i32x4::<0x88>(a, cc),
            _mm512_shuffle_i32x4::<0xDD>(a, cc),
            _mm512_shuffle_i32x4::<0x88>(b, d),
            _mm512_shuffle_i32x4::<0xDD>(b, d),
        ];
        for (l, v) in cols.into_iter().enumerate() {
            // SAFETY: `out[4l + c]` holds 16 u32s (64 bytes); unaligned store.
            unsafe { _mm512_storeu_si512(out[4 * l + c].as_mut_ptr().cast(), v) };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_blocks_transpose_widened() {
        for (first, stride) in [(0usize, 16usize), (3, 40), (7, 128)] {
            let src: Vec<u16> = (0..first + 15 * stride + 16)
                .map(|k| (k as u16).wrapping_mul(40503))
                .collect();
            for isa in Isa::supported() {
                let out = transpose16_bf16(isa, &src, first, stride);
                for (j, col) in out.iter().enumerate() {
                    for (i, &v) in col.iter().enumerate() {
                        let want = u32::from(src[first + i * stride + j]) << 16;
                        assert_eq!(v, want, "{isa:?} first {first} stride {stride} ({i}, {j})");
                    }
                }
            }
        }
    }

    #[test]
    fn every_path_transposes() {
        for stride in [16usize, 17, 32, 128, 130] {
            let block: Vec<u32> = (0..15 * stride + 16)
                .map(|k| (k as u32).wrapping_mul(2_654_435_761))
                .collect();
            for isa in Isa::supported() {
                let out = transpose16(isa, &block, stride);
                for (j, col) in out.iter().enumerate() {
                    for (i, &v) in col.iter().enumerate() {
                        assert_eq!(
                            v,
                            block[i * stride + j],
                            "{isa:?} stride {stride} ({i}, {j})"
                        );
                    }
                }
            }
        }
    }
}
