//! Gathers of short contiguous runs of words into one contiguous run: an operand read through
//! a broadcast axis between two axes it steps along (RoPE's `cos` repeated over the heads,
//! runs of 64 fp32 elements) becomes a chunk of lanes.

use nki_lang::MAX_TILE_RANK;

use super::Isa;

/// A walk over the elements of a grid's free axes in row-major order, from a given element:
/// the runs of its innermost axis (stride 1 in the words walked), each cut where the axis
/// wraps.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Walk {
    /// Each axis' size (axis 0 is the partition axis, unused).
    pub dims: [usize; MAX_TILE_RANK],
    /// Each axis' stride in words.
    pub strides: [isize; MAX_TILE_RANK],
    /// The index along each axis of the first element walked.
    pub idx: [usize; MAX_TILE_RANK],
    /// The innermost axis of more than one element (stride 1).
    pub last: usize,
    /// The word of index 0 along every axis.
    pub origin: isize,
}

/// Fills `dst` with the words of `src` that `walk` visits, in order, a run at a time.
///
/// # Panics
/// If a word of the walk lies outside `src` (the caller gives `src` as the walk's footprint).
pub(crate) fn gather_words(isa: Isa, dst: &mut [u32], src: &[u32], walk: &Walk) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F (`assert_supported`); every access is a
            // bounds-checked slice.
            unsafe { gather_avx512(dst, src, walk) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 (`assert_supported`); every access is a
            // bounds-checked slice.
            unsafe { gather_avx2(dst, src, walk) }
        }
        Isa::Portable => gather(dst, src, walk),
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => gather(dst, src, walk),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn gather_avx512(dst: &mut [u32], src: &[u32], walk: &Walk) {
    gather(dst, src, walk)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn gather_avx2(dst: &mut [u32], src: &[u32], walk: &Walk) {
    gather(dst, src, walk)
}

#[inline(always)]
fn gather(dst: &mut [u32], src: &[u32], walk: &Walk) {
    let Walk {
        dims,
        strides,
        mut idx,
        last,
        origin,
    } = *walk;
    let n = dst.len();
    let mut off: isize = origin
        + (1..MAX_TILE_RANK)
            .map(|k| idx[k] as isize * strides[k])
            .sum::<isize>();
    let mut done = 0;
    while done < n {
        let run = (dims[last].max(1) - idx[last]).min(n - done);
        let at = off as usize;
        copy(&mut dst[done..done + run], &src[at..at + run]);
        done += run;
        // The next run: the innermost axis wraps, the ones before it carry.
        idx[last] += run;
        off += run as isize * strides[last];
        let mut k = last;
        while k > 1 && idx[k] >= dims[k].max(1) {
            off -= idx[k] as isize * strides[k];
            idx[k] = 0;
            k -= 1;
            idx[k] += 1;
            off += strides[k];
        }
    }
}

/// `dst` ← `src` (of one length), sixteen words at a time: short runs copied inline, with the
/// widest vectors of the path the caller is compiled for.
#[inline(always)]
fn copy(dst: &mut [u32], src: &[u32]) {
    let (d16, d_rest) = dst.as_chunks_mut::<16>();
    let (s16, s_rest) = src.as_chunks::<16>();
    for (d, s) in d16.iter_mut().zip(s16) {
        *d = *s;
    }
    d_rest.copy_from_slice(s_rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path visits the words a plain index loop over the grid visits, from any element.
    #[test]
    fn gathers_visit_the_grid_in_row_major_order() {
        // `[_, 3, 4, 5]` free axes over a `[3, 5]` source broadcast along the middle axis, and
        // a transposed-then-broadcast one.
        let cases: [([usize; 4], [isize; 4]); 3] = [
            ([1, 3, 4, 5], [0, 5, 0, 1]),
            ([1, 2, 3, 40], [0, 120, 0, 1]),
            ([1, 3, 1, 17], [0, 40, 0, 1]),
        ];
        let src: Vec<u32> = (0..1000).collect();
        for (dims, strides) in cases {
            let mut dims5 = [1; MAX_TILE_RANK];
            let mut strides5 = [0; MAX_TILE_RANK];
            dims5[..4].copy_from_slice(&dims);
            strides5[..4].copy_from_slice(&strides);
            let total: usize = dims[1..].iter().product();
            // The plain loop's words, element by element.
            let mut want = Vec::new();
            for i in 0..dims[1] {
                for j in 0..dims[2] {
                    for k in 0..dims[3] {
                        let at = 7 + i as isize * strides[1] + j as isize * strides[2] + k as isize;
                        want.push(src[at as usize]);
                    }
                }
            }
            let last = (1..MAX_TILE_RANK).rev().find(|&k| dims5[k] > 1).unwrap();
            for isa in Isa::supported() {
                for e0 in [0, 1, total / 3, total - 1] {
                    for n in [1, 5, total - e0] {
                        let n = n.min(total - e0);
                        let mut idx = [0; MAX_TILE_RANK];
                        let mut rest = e0;
                        for k in (1..MAX_TILE_RANK).rev() {
                            idx[k] = rest % dims5[k];
                            rest /= dims5[k];
                        }
                        let walk = Walk {
                            dims: dims5,
                            strides: strides5,
                            idx,
                            last,
                            origin: 7,
                        };
                        let mut got = vec![0; n];
                        gather_words(isa, &mut got, &src, &walk);
                        assert_eq!(got, want[e0..e0 + n], "{isa:?} {dims:?} from {e0}");
                    }
                }
            }
        }
    }
}
