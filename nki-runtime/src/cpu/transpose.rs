//! 16 × 16 transposes of 32-bit elements: the inner step of the engines' blocked transposes
//! (`nc_transpose` into PSUM, `load_transpose2d`). Moves bits only; every path gives the same
//! result. AVX-512 transposes in zmm registers whole; AVX2 as 8 × 8 tiles whose rows `k` and
//! `k + 4` are loaded into the two 128-bit lanes of one ymm register, then transposed with
//! 32-bit and 64-bit interleaves within the lanes. [`transpose_elements`] transposes a whole
//! matrix of 1-, 2- or 4-byte elements (a copy whose access patterns swap two axes).

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

/// [`transpose16_bf16`] with AVX2: per 8 × 8 tile, rows `k` and `k + 4` loaded into the two
/// 128-bit lanes of one register and widened by interleaving with zero (`bits << 16`), then
/// [`transpose4_lanes`]: only in-lane shuffles, which every AVX2 core runs at full rate (the
/// cross-lane permutes cost 3 cycles each on AMD's first Zen cores).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose16_bf16_avx2(src: &[u16], first: usize, stride: usize) -> Block16 {
    use std::arch::x86_64::*;
    let mut out = [[0u32; 16]; 16];
    let zero = _mm256_setzero_si256();
    for bi in 0..2 {
        for bj in 0..2 {
            let row = |k: usize| {
                let at = first + (8 * bi + k) * stride + 8 * bj;
                &src[at..at + 8]
            };
            let v: [__m256i; 4] = core::array::from_fn(|k| {
                // SAFETY: each row holds 8 u16s (16 bytes); unaligned loads.
                unsafe {
                    let lo = _mm_loadu_si128(row(k).as_ptr().cast());
                    let up = _mm_loadu_si128(row(k + 4).as_ptr().cast());
                    _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), up)
                }
            });
            let lo = transpose4_lanes(v.map(|x| _mm256_unpacklo_epi16(zero, x)));
            let hi = transpose4_lanes(v.map(|x| _mm256_unpackhi_epi16(zero, x)));
            for j in 0..8 {
                let col = if j < 4 { lo[j] } else { hi[j - 4] };
                let o = &mut out[8 * bj + j][8 * bi..8 * bi + 8];
                // SAFETY: `o` holds 8 u32s (32 bytes); unaligned store.
                unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), col) };
            }
        }
    }
    out
}

/// [`transpose16`] with AVX2: per 8 × 8 tile, rows `k` and `k + 4` of each half of the tile's
/// columns loaded into the two 128-bit lanes of one register, then [`transpose4_lanes`];
/// `row(i, c)` gives the 8 elements of row `i` from column `c` (0 or 8).
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
            for h in 0..2 {
                let v: [__m256i; 4] = core::array::from_fn(|k| {
                    let lo = &row(8 * bi + k, 8 * bj)[4 * h..4 * h + 4];
                    let up = &row(8 * bi + k + 4, 8 * bj)[4 * h..4 * h + 4];
                    // SAFETY: each holds 4 u32s (16 bytes); unaligned loads.
                    unsafe {
                        let lo = _mm_loadu_si128(lo.as_ptr().cast());
                        let up = _mm_loadu_si128(up.as_ptr().cast());
                        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), up)
                    }
                });
                for (c, col) in transpose4_lanes(v).into_iter().enumerate() {
                    let o = &mut out[8 * bj + 4 * h + c][8 * bi..8 * bi + 8];
                    // SAFETY: `o` holds 8 u32s (32 bytes); unaligned store.
                    unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), col) };
                }
            }
        }
    }
    out
}

/// One side of [`transpose_elements`]: a matrix of elements in a byte buffer, by element
/// offset (`at`, the first element) and the element distance between its rows (`stride`).
#[derive(Copy, Clone, Debug)]
pub struct Matrix {
    /// Element offset of the first element.
    pub at: usize,
    /// Elements between the starts of two rows.
    pub stride: usize,
}

impl Matrix {
    /// The byte range `rows × cols` elements of `size` bytes cover (empty for an empty
    /// matrix), `None` when it does not fit `usize`.
    pub(crate) fn span(
        self,
        rows: usize,
        cols: usize,
        size: usize,
    ) -> Option<core::ops::Range<usize>> {
        if rows == 0 || cols == 0 {
            return Some(0..0);
        }
        let last = (rows - 1)
            .checked_mul(self.stride)?
            .checked_add(cols - 1)?
            .checked_add(self.at)?;
        let start = self.at.checked_mul(size)?;
        Some(start..last.checked_add(1)?.checked_mul(size)?)
    }
}

/// Transposes a `rows × cols` matrix of `size`-byte elements (1, 2 or 4): element `(i, j)` of
/// `src` (`src.at + i · src.stride + j`) goes to `(j, i)` of `dst` (`dst.at + j · dst.stride +
/// i`). Moves bits only, in cache-sized square blocks; 4- and 2-byte elements go through 8 × 8
/// register transposes where the CPU has AVX2. Every path gives the same bytes.
///
/// # Panics
/// If `size` is not 1, 2 or 4, or either matrix does not lie inside its buffer.
#[allow(clippy::too_many_arguments)]
pub fn transpose_elements(
    isa: Isa,
    src: &[u8],
    s: Matrix,
    dst: &mut [u8],
    d: Matrix,
    rows: usize,
    cols: usize,
    size: usize,
) {
    assert!(matches!(size, 1 | 2 | 4), "elements of 1, 2 or 4 bytes");
    let fits = |m: Matrix, r, c, len: usize| m.span(r, c, size).is_some_and(|x| x.end <= len);
    assert!(
        fits(s, rows, cols, src.len()),
        "the source matrix lies in its buffer"
    );
    assert!(
        fits(d, cols, rows, dst.len()),
        "the destination matrix lies in its buffer"
    );
    // Blocks of 32 × 32 elements: a block's source and destination rows stay in L1.
    const B: usize = 32;
    for i0 in (0..rows).step_by(B) {
        for j0 in (0..cols).step_by(B) {
            let (r, c) = ((rows - i0).min(B), (cols - j0).min(B));
            let sb = Matrix {
                at: s.at + i0 * s.stride + j0,
                stride: s.stride,
            };
            let db = Matrix {
                at: d.at + j0 * d.stride + i0,
                stride: d.stride,
            };
            #[cfg(target_arch = "x86_64")]
            if size == 4 && isa != Isa::Portable && std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (detected); both blocks lie inside their buffers
                // (asserted above for the whole matrices).
                unsafe { transpose_block_avx2(src, sb, dst, db, r, c) };
                continue;
            }
            #[cfg(target_arch = "x86_64")]
            if size == 2 && isa != Isa::Portable && std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: as above.
                unsafe { transpose_block_avx2_u16(src, sb, dst, db, r, c) };
                continue;
            }
            transpose_block_portable(src, sb, dst, db, r, c, size);
        }
    }
}

/// [`transpose_elements`] of one block, element by element.
fn transpose_block_portable(
    src: &[u8],
    s: Matrix,
    dst: &mut [u8],
    d: Matrix,
    rows: usize,
    cols: usize,
    size: usize,
) {
    for i in 0..rows {
        for j in 0..cols {
            let from = (s.at + i * s.stride + j) * size;
            let to = (d.at + j * d.stride + i) * size;
            dst[to..to + size].copy_from_slice(&src[from..from + size]);
        }
    }
}

/// [`transpose_elements`] of one block of 4-byte elements: 8 × 8 tiles in ymm registers, the
/// edges element by element.
///
/// # Safety
/// The CPU must support AVX2; both blocks lie inside their buffers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_block_avx2(
    src: &[u8],
    s: Matrix,
    dst: &mut [u8],
    d: Matrix,
    rows: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    by_tiles(src, s, dst, d, rows, cols, 4, |sp, dp, i, j| {
        // Row `k` of the tile starts at `row(k)` bytes into `src`.
        let row = |k: usize| (s.at + (i + k) * s.stride + j) * 4;
        // SAFETY: every row of the tile and every column written lies inside the blocks (the
        // caller's contract); loads and stores are unaligned.
        unsafe {
            let halves = |k: usize, hi: usize| {
                let lo = _mm_loadu_si128(sp.add(row(k) + 16 * hi).cast());
                let up = _mm_loadu_si128(sp.add(row(k + 4) + 16 * hi).cast());
                _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), up)
            };
            for hi in 0..2 {
                let v: [__m256i; 4] = core::array::from_fn(|k| halves(k, hi));
                for (c, col) in transpose4_lanes(v).into_iter().enumerate() {
                    let at = (d.at + (j + 4 * hi + c) * d.stride + i) * 4;
                    _mm256_storeu_si256(dp.add(at).cast(), col);
                }
            }
        }
    });
}

/// Runs `tile(src, dst, i, j)` on every full 8 × 8 tile of a `rows × cols` block of
/// `size`-byte elements (`i`, `j`: its first row and column; the pointers: the buffers'
/// starts), then moves the edges element by element: the columns right of the full tiles in
/// their rows, then every column of the rows below them.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn by_tiles(
    src: &[u8],
    s: Matrix,
    dst: &mut [u8],
    d: Matrix,
    rows: usize,
    cols: usize,
    size: usize,
    mut tile: impl FnMut(*const u8, *mut u8, usize, usize),
) {
    let (full_r, full_c) = (rows / 8 * 8, cols / 8 * 8);
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    for i in (0..full_r).step_by(8) {
        for j in (0..full_c).step_by(8) {
            tile(sp, dp, i, j);
        }
    }
    let at = |m: Matrix, i: usize, j: usize| Matrix {
        at: m.at + i * m.stride + j,
        ..m
    };
    let right = (at(s, 0, full_c), at(d, full_c, 0));
    transpose_block_portable(src, right.0, dst, right.1, full_r, cols - full_c, size);
    let below = (at(s, full_r, 0), at(d, 0, full_r));
    transpose_block_portable(src, below.0, dst, below.1, rows - full_r, cols, size);
}

/// [`transpose_elements`] of one block of 2-byte elements: 8 × 8 tiles in xmm registers
/// (16-, 32- and 64-bit interleaves), the edges element by element.
///
/// # Safety
/// The CPU must support AVX2; both blocks lie inside their buffers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_block_avx2_u16(
    src: &[u8],
    s: Matrix,
    dst: &mut [u8],
    d: Matrix,
    rows: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    by_tiles(src, s, dst, d, rows, cols, 2, |sp, dp, i, j| {
        // SAFETY: every row of the tile and every column written lies inside the blocks (the
        // caller's contract); loads and stores are unaligned.
        unsafe {
            let r: [__m128i; 8] = core::array::from_fn(|k| {
                _mm_loadu_si128(sp.add((s.at + (i + k) * s.stride + j) * 2).cast())
            });
            // Pairs of rows, element by element: a[2m] the low halves of rows 2m and 2m + 1,
            // a[2m + 1] their high halves.
            let a: [__m128i; 8] = core::array::from_fn(|x| {
                let (m, hi) = (x / 2, x % 2 == 1);
                if hi {
                    _mm_unpackhi_epi16(r[2 * m], r[2 * m + 1])
                } else {
                    _mm_unpacklo_epi16(r[2 * m], r[2 * m + 1])
                }
            });
            // Quads of rows: b[4q + 2h + u] holds columns 4h + 2u and 4h + 2u + 1 of rows
            // 4q..4q + 4.
            let b: [__m128i; 8] = core::array::from_fn(|x| {
                let (q, h, u) = (x / 4, (x / 2) % 2, x % 2 == 1);
                let (lo, hi) = (a[4 * q + h], a[4 * q + 2 + h]);
                if u {
                    _mm_unpackhi_epi32(lo, hi)
                } else {
                    _mm_unpacklo_epi32(lo, hi)
                }
            });
            // Column `c = 2w + v` of all eight rows: the halves of b[w] and b[4 + w].
            for c in 0..8 {
                let (w, v) = (c / 2, c % 2 == 1);
                let col = if v {
                    _mm_unpackhi_epi64(b[w], b[4 + w])
                } else {
                    _mm_unpacklo_epi64(b[w], b[4 + w])
                };
                let at = (d.at + (j + c) * d.stride + i) * 2;
                _mm_storeu_si128(dp.add(at).cast(), col);
            }
        }
    });
}

/// Four in-lane 4 × 4 transposes: `v[k]` holds row `k` of two 4 × 4 matrices (one per 128-bit
/// lane); vector `c` of the result holds column `c` of both.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
fn transpose4_lanes(v: [std::arch::x86_64::__m256i; 4]) -> [std::arch::x86_64::__m256i; 4] {
    use std::arch::x86_64::*;
    let t0 = _mm256_unpacklo_epi32(v[0], v[1]);
    let t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    let t2 = _mm256_unpacklo_epi32(v[2], v[3]);
    let t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    [
        _mm256_unpacklo_epi64(t0, t2),
        _mm256_unpackhi_epi64(t0, t2),
        _mm256_unpacklo_epi64(t1, t3),
        _mm256_unpackhi_epi64(t1, t3),
    ]
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
    fn matrices_transpose_on_every_path() {
        // Shapes around the 8 × 8 tiles and the 32 × 32 blocks, strides wider than a row.
        for (rows, cols) in [
            (1usize, 1usize),
            (8, 8),
            (7, 9),
            (64, 64),
            (33, 40),
            (3, 70),
        ] {
            for size in [1usize, 2, 4] {
                let (s, d) = (
                    Matrix {
                        at: 3,
                        stride: cols + 5,
                    },
                    Matrix {
                        at: 1,
                        stride: rows + 2,
                    },
                );
                let src: Vec<u8> = (0..(s.at + rows * s.stride) * size)
                    .map(|k| (k as u32).wrapping_mul(2_654_435_761).to_le_bytes()[2])
                    .collect();
                let dst_len = (d.at + cols * d.stride) * size;
                // The reference: element by element from the definition; untouched bytes
                // stay 0xee.
                let mut want = vec![0xee; dst_len];
                for i in 0..rows {
                    for j in 0..cols {
                        for b in 0..size {
                            want[(d.at + j * d.stride + i) * size + b] =
                                src[(s.at + i * s.stride + j) * size + b];
                        }
                    }
                }
                for isa in Isa::supported() {
                    let mut got = vec![0xee; dst_len];
                    transpose_elements(isa, &src, s, &mut got, d, rows, cols, size);
                    assert!(
                        got == want,
                        "{isa:?} {rows} x {cols} of {size}-byte elements"
                    );
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "the destination matrix lies in its buffer")]
    fn a_matrix_past_its_buffer_is_refused() {
        let src = [0u8; 64];
        let mut dst = [0u8; 60];
        let m = Matrix { at: 0, stride: 4 };
        transpose_elements(Isa::Portable, &src, m, &mut dst, m, 4, 4, 4);
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
