//! The scans of the top-8 searches (`max8`, `nc_find_index8`, `nc_match_replace8`): where in a
//! row of fp32 values the next element whose order key passes a test is.
//!
//! # Definition
//!
//! [`key`] maps a value to a signed integer that orders as `crate::top8::rank` and is equal
//! exactly when `crate::top8::same` holds. [`first_above`] and [`first_match`] return the
//! position of the first element at or after `from` whose key is above a threshold, or equal to
//! one of up to 8 keys; the row's length when there is none.
//!
//! # Implementation
//!
//! Both test 16 elements at a time, branch-free, and look at the elements one by one only in a
//! group where some element passes; [`first_match`] first tests whether a group holds a key
//! within the range of its keys (one comparison), and the keys themselves only where one does.
//! Each loop is compiled once per host code path from the same source (a function with the
//! path's target features around a generic `#[inline(always)]` body: a closure called there
//! would be compiled without them, and run at half the speed). A position is the first that
//! passes on every path, so the callers' results do not depend on the path.

use super::Isa;

/// The order key of a value: every NaN the one key above +∞, the IEEE total order (−0 below +0)
/// otherwise, as a signed integer (a negative value's magnitude bits flipped).
#[inline(always)]
pub(crate) fn key(x: f32) -> i32 {
    let b = x.to_bits() as i32;
    let ordered = b ^ ((((b >> 31) as u32) >> 1) as i32);
    if (b & 0x7fff_ffff) > 0x7f80_0000 {
        i32::MAX
    } else {
        ordered
    }
}

/// A key no value has (between +∞'s and NaN's): a slot of [`first_match`]'s keys that matches
/// nothing.
pub(crate) const NO_KEY: i32 = 0x7f80_0001;

/// Elements tested at a time.
const GROUP: usize = 16;

/// The first position at or after `from` of an element of `row` whose [`key`] is above `t`;
/// `row.len()` when none is.
pub(crate) fn first_above(isa: Isa, row: &[f32], from: usize, t: i32) -> usize {
    first(isa, row, from, |k| k > t)
}

/// Blocks [`eighth_key_floor`] takes the largest key of.
const FLOOR_BLOCKS: usize = 32;

/// A key that at least 8 elements of `row` reach, so that the 8 largest are found among the
/// elements at or above it: the 8th largest of the largest keys of [`FLOOR_BLOCKS`] disjoint
/// blocks of the row (each block's largest is another element). `None` for a row shorter than
/// [`FLOOR_BLOCKS`] groups.
pub(crate) fn eighth_key_floor(isa: Isa, row: &[f32]) -> Option<i32> {
    let len = row.len() / FLOOR_BLOCKS;
    if len < GROUP {
        return None;
    }
    let mut maxima = [i32::MIN; FLOOR_BLOCKS];
    for (m, block) in maxima.iter_mut().zip(row.chunks_exact(len)) {
        *m = max_key(isa, block);
    }
    let (_, &mut eighth, _) = maxima.select_nth_unstable_by(7, |a, b| b.cmp(a));
    Some(eighth)
}

/// The largest [`key`] of a nonempty `block`, in a loop compiled for `isa`.
fn max_key(isa: Isa, block: &[f32]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn max_avx2(block: &[f32]) -> i32 {
        fold_max(block)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn max_avx512(block: &[f32]) -> i32 {
        fold_max(block)
    }
    match isa {
        Isa::Portable => fold_max(block),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 and FMA (`assert_supported`).
            unsafe { max_avx2(block) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F/BW/VL (`assert_supported`).
            unsafe { max_avx512(block) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            fold_max(block)
        }
    }
}

/// [`max_key`]'s loop: [`GROUP`] running maxima, one per lane.
#[inline(always)]
fn fold_max(block: &[f32]) -> i32 {
    let mut lanes = [i32::MIN; GROUP];
    let mut groups = block.chunks_exact(GROUP);
    for g in groups.by_ref() {
        for (m, &x) in lanes.iter_mut().zip(g) {
            *m = (*m).max(key(x));
        }
    }
    let tail = groups.remainder().iter().map(|&x| key(x));
    lanes.into_iter().chain(tail).fold(i32::MIN, i32::max)
}

/// The first position at or after `from` of an element of `row` whose [`key`] is one of
/// `keys` (a slot holding [`NO_KEY`] matches nothing); `row.len()` when none is.
pub(crate) fn first_match(isa: Isa, row: &[f32], from: usize, keys: &[i32; 8]) -> usize {
    // Every key passes the one test of lying within the keys' range: a group none of whose
    // elements is in it is skipped at the cost of that test (the top 8's range holds few
    // elements of a row, the top 8 themselves among them).
    let mut live = keys.iter().copied().filter(|&q| q != NO_KEY);
    let Some(first_key) = live.next() else {
        return row.len();
    };
    let (lo, hi) = live.fold((first_key, first_key), |(lo, hi), q| (lo.min(q), hi.max(q)));
    let width = hi.wrapping_sub(lo) as u32;
    first_within::<true, _, _>(
        isa,
        row,
        from,
        move |k| (k.wrapping_sub(lo) as u32) <= width,
        move |k| keys.iter().fold(false, |hit, &q| hit | (q == k)),
    )
}

/// The first position at or after `from` whose key passes `pass`, in a loop compiled for `isa`.
#[inline(always)]
fn first<P: Fn(i32) -> bool + Copy>(isa: Isa, row: &[f32], from: usize, pass: P) -> usize {
    first_within::<false, _, _>(isa, row, from, pass, pass)
}

/// The first position at or after `from` whose key passes `pass`, where every key that passes
/// `pass` passes `maybe` (a cheaper test that skips most groups; used when `FILTER`), in a loop
/// compiled for `isa`.
#[inline(always)]
fn first_within<const FILTER: bool, M, P>(
    isa: Isa,
    row: &[f32],
    from: usize,
    maybe: M,
    pass: P,
) -> usize
where
    M: Fn(i32) -> bool + Copy,
    P: Fn(i32) -> bool + Copy,
{
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn first_avx2<const FILTER: bool, M, P>(row: &[f32], from: usize, maybe: M, pass: P) -> usize
    where
        M: Fn(i32) -> bool + Copy,
        P: Fn(i32) -> bool + Copy,
    {
        scan::<FILTER>(row, from, maybe, pass)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn first_avx512<const FILTER: bool, M, P>(row: &[f32], from: usize, maybe: M, pass: P) -> usize
    where
        M: Fn(i32) -> bool + Copy,
        P: Fn(i32) -> bool + Copy,
    {
        scan::<FILTER>(row, from, maybe, pass)
    }
    match isa {
        Isa::Portable => scan::<FILTER>(row, from, maybe, pass),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 and FMA (`assert_supported`).
            unsafe { first_avx2::<FILTER, _, _>(row, from, maybe, pass) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F/BW/VL (`assert_supported`).
            unsafe { first_avx512::<FILTER, _, _>(row, from, maybe, pass) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            scan::<FILTER>(row, from, maybe, pass)
        }
    }
}

/// [`first_within`]'s loop: groups of [`GROUP`] elements tested without a branch (with `maybe`
/// first when `FILTER`, then, in a group where one may pass, with `pass`), and one by one in the
/// group where one passes.
#[inline(always)]
fn scan<const FILTER: bool>(
    row: &[f32],
    from: usize,
    maybe: impl Fn(i32) -> bool + Copy,
    pass: impl Fn(i32) -> bool + Copy,
) -> usize {
    let rest = row.get(from..).unwrap_or(&[]);
    let mut groups = rest.chunks_exact(GROUP);
    let mut at = from;
    for g in groups.by_ref() {
        let may = !FILTER || g.iter().fold(false, |hit, &x| hit | maybe(key(x)));
        if may && g.iter().fold(false, |hit, &x| hit | pass(key(x))) {
            return at + g.iter().position(|&x| pass(key(x))).unwrap_or(0);
        }
        at += GROUP;
    }
    let tail = groups.remainder();
    tail.iter()
        .position(|&x| pass(key(x)))
        .map_or(row.len(), |i| at + i)
}

/// Longest row [`max8_short`] and [`claim_short`] take: its keys fit in a buffer on the stack,
/// and a pass over all of them per result costs less than the one-pass searches' bookkeeping
/// (the NKI Library's router ranks 128 experts per token).
pub(crate) const SHORT_ROW: usize = 256;

/// A short row's elements as `key · 2^32 + (SHORT_ROW − 1 − position)`: distinct, ordered by
/// key and, among equal keys, the earlier element higher; [`i64::MIN`] (no element's) after the
/// row and in place of a taken element. The largest is the first element of the largest key,
/// found by a maximum over all of them (a reduction the compiler vectorizes) without a search.
struct ShortKeys {
    ranked: [i64; SHORT_ROW],
    /// The row's length.
    len: usize,
}

impl ShortKeys {
    #[inline(always)]
    fn of(row: &[f32]) -> ShortKeys {
        let mut ranked = [i64::MIN; SHORT_ROW];
        for (i, (r, &x)) in ranked.iter_mut().zip(row).enumerate() {
            *r = rank_of(key(x), i);
        }
        ShortKeys {
            ranked,
            len: row.len().min(SHORT_ROW),
        }
    }

    /// The position and key of the largest element left, if one is.
    #[inline(always)]
    fn largest(&self) -> Option<(usize, i32)> {
        let m = self.ranked[..self.len]
            .iter()
            .fold(i64::MIN, |a, &r| a.max(r));
        (m != i64::MIN).then(|| position_of(m))
    }

    /// Takes the element at position `i` out.
    #[inline(always)]
    fn take(&mut self, i: usize) {
        self.ranked[i] = i64::MIN;
    }
}

/// The ranked form of key `k` at position `i` ([`ShortKeys`]).
#[inline(always)]
fn rank_of(k: i32, i: usize) -> i64 {
    (i64::from(k) << 32) | (SHORT_ROW - 1 - i) as i64
}

/// The position and key of a ranked element.
#[inline(always)]
fn position_of(r: i64) -> (usize, i32) {
    let low = (r & 0xffff_ffff) as usize;
    (SHORT_ROW - 1 - low, (r >> 32) as i32)
}

/// The `top.len()` (at most 8) largest of `row` (at most [`SHORT_ROW`] values, at least
/// `top.len()`) with their keys, in descending order, the earlier element first among equal
/// keys: each is the first element of the largest key left, taken out before the next.
pub(crate) fn max8_short(isa: Isa, row: &[f32], top: &mut [(i32, f32)]) {
    assert!(row.len() <= SHORT_ROW && top.len() <= row.len().min(8));
    #[inline(always)]
    fn body(row: &[f32], top: &mut [(i32, f32)]) {
        let mut keys = ShortKeys::of(row);
        for t in top {
            let Some((i, q)) = keys.largest() else { break };
            *t = (q, row[i]);
            keys.take(i);
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn body_avx2(row: &[f32], top: &mut [(i32, f32)]) {
        body(row, top)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn body_avx512(row: &[f32], top: &mut [(i32, f32)]) {
        body(row, top)
    }
    match isa {
        Isa::Portable => body(row, top),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 and FMA (`assert_supported`).
            unsafe { body_avx2(row, top) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F/BW/VL (`assert_supported`).
            unsafe { body_avx512(row, top) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            body(row, top)
        }
    }
}

/// The positions the keys `looking` (in visit order; [`NO_KEY`] looks for nothing) claim in
/// `data` (at most [`SHORT_ROW`] values): each the first position of its key that no key
/// before it claimed, or none.
pub(crate) fn claim_short(isa: Isa, data: &[f32], looking: &[i32; 8]) -> [Option<usize>; 8] {
    assert!(data.len() <= SHORT_ROW);
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn body_avx2(data: &[f32], looking: &[i32; 8]) -> [Option<usize>; 8] {
        use core::arch::x86_64::*;
        claim_body(data, looking, |g, q| {
            // SAFETY: `g` is 16 readable `i32`s; AVX2 is enabled here.
            let (a, b) = unsafe {
                let p = g.as_ptr().cast::<__m256i>();
                (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)))
            };
            let q = _mm256_set1_epi32(q);
            let lo = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, q)));
            let hi = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(b, q)));
            (lo as u32) | ((hi as u32) << 8)
        })
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn body_avx512(data: &[f32], looking: &[i32; 8]) -> [Option<usize>; 8] {
        use core::arch::x86_64::*;
        claim_body(data, looking, |g, q| {
            // SAFETY: `g` is 16 readable `i32`s; AVX-512 F is enabled here.
            let k = unsafe { _mm512_loadu_si512(g.as_ptr().cast()) };
            u32::from(_mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(q)))
        })
    }
    let portable = |g: &[i32; GROUP], q: i32| {
        let mut hits = 0;
        for (l, &k) in g.iter().enumerate() {
            hits |= u32::from(k == q) << l;
        }
        hits
    };
    match isa {
        Isa::Portable => claim_body(data, looking, portable),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 and FMA (`assert_supported`).
            unsafe { body_avx2(data, looking) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F/BW/VL (`assert_supported`).
            unsafe { body_avx512(data, looking) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            claim_body(data, looking, portable)
        }
    }
}

/// [`claim_short`]'s search, with `hits` the mask of a group's keys equal to a key (bit `l` for
/// lane `l`): the keys by groups, [`i32::MIN`] (no value's key) after the row and in place of a
/// claimed element.
#[inline(always)]
fn claim_body(
    data: &[f32],
    looking: &[i32; 8],
    hits: impl Fn(&[i32; GROUP], i32) -> u32,
) -> [Option<usize>; 8] {
    let mut groups = [[i32::MIN; GROUP]; SHORT_ROW / GROUP];
    for (g, xs) in groups.iter_mut().zip(data.chunks(GROUP)) {
        for (k, &x) in g.iter_mut().zip(xs) {
            *k = key(x);
        }
    }
    let groups = &mut groups[..data.len().div_ceil(GROUP)];
    let mut at = [None; 8];
    for (a, &q) in at.iter_mut().zip(looking) {
        if q == NO_KEY {
            continue;
        }
        for (j, g) in groups.iter_mut().enumerate() {
            let h = hits(g, q);
            if h != 0 {
                let l = h.trailing_zeros() as usize;
                g[l] = i32::MIN;
                *a = Some(j * GROUP + l);
                break;
            }
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain definitions: the key as a total order of (NaN class, f32 total order).
    fn reference_key_cmp(a: f32, b: f32) -> core::cmp::Ordering {
        crate::top8::rank(a, b)
    }

    fn values() -> Vec<f32> {
        let mut v = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xffff_ffff),
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x8000_0001),
            f32::MAX,
            f32::MIN,
        ];
        let mut s = 0x1234_5678u32;
        for _ in 0..200 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            v.push(f32::from_bits(s));
        }
        v
    }

    #[test]
    fn key_orders_and_matches_as_rank_and_same() {
        let v = values();
        for &a in &v {
            assert_ne!(key(a), NO_KEY);
            for &b in &v {
                assert_eq!(key(a).cmp(&key(b)), reference_key_cmp(a, b), "{a:?} {b:?}");
                assert_eq!(key(a) == key(b), crate::top8::same(a, b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn the_eighth_key_floor_is_reached_by_eight_elements_and_no_more_than_the_eighth_largest() {
        let v = values();
        let mut s = 0x9e37_79b9u32;
        let mut row = Vec::new();
        for len in [0, 100, 511, 512, 513, 1000, 4096, 8192] {
            row.clear();
            for i in 0..len {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                // Random values, runs of one value (ties), and the special values.
                row.push(match i % 7 {
                    0 => v[(s as usize) % v.len()],
                    1 => 2.5,
                    _ => f32::from_bits(s),
                });
            }
            let mut keys: Vec<i32> = row.iter().map(|&x| key(x)).collect();
            keys.sort_unstable_by(|a, b| b.cmp(a));
            for isa in Isa::supported() {
                match eighth_key_floor(isa, &row) {
                    None => assert!(len < 512, "{len}"),
                    Some(floor) => {
                        assert!(keys.iter().filter(|&&k| k >= floor).count() >= 8, "{len}");
                        assert!(floor <= keys[7], "{len} {isa:?}");
                        let block = len / 32;
                        let mut want: Vec<i32> = (0..32)
                            .map(|b| keys_max(&row[b * block..(b + 1) * block]))
                            .collect();
                        want.sort_unstable_by(|a, b| b.cmp(a));
                        assert_eq!(floor, want[7], "{len} {isa:?}");
                    }
                }
            }
        }
    }

    /// Rows of every short length with ties, both zeros, NaNs of several payloads and
    /// infinities among random values.
    fn short_rows() -> Vec<Vec<f32>> {
        let v = values();
        let mut s = 0x2545_f491u32;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s
        };
        let mut rows = Vec::new();
        for len in (0..=SHORT_ROW)
            .step_by(7)
            .chain([8, 15, 16, 17, 128, SHORT_ROW])
        {
            for mix in 0..3 {
                let row = (0..len)
                    .map(|_| match (mix, next() % 5) {
                        (0, _) => f32::from_bits(next()),
                        (1, 0 | 1) => v[(next() as usize) % v.len()],
                        (1, _) => (next() % 4) as f32 * 0.5,
                        (_, r) => [0.25, -0.0, 0.0, f32::NAN, -f32::NAN][r as usize],
                    })
                    .collect();
                rows.push(row);
            }
        }
        rows
    }

    #[test]
    fn short_rows_give_the_definitions_top_8_on_every_path() {
        for row in short_rows() {
            let want = crate::top8::max8_row(&row);
            for isa in Isa::supported() {
                let mut top = vec![(0, 0.0); row.len().min(8)];
                max8_short(isa, &row, &mut top);
                let got: Vec<u32> = top.iter().map(|t| t.1.to_bits()).collect();
                let bits: Vec<u32> = want.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, bits, "{isa:?} {row:?}");
                assert!(top.iter().all(|t| t.0 == key(t.1)));
            }
        }
    }

    #[test]
    fn short_rows_give_the_definitions_claims_on_every_path() {
        for row in short_rows() {
            // The row's own top 8 (found again, duplicates included), values of the row taken
            // twice, and values it may not hold, visited forwards and backwards.
            let top = crate::top8::max8_row(&row);
            let picks: Vec<f32> = (0..8)
                .map(|j| row.get(j * 5 % row.len().max(1)).copied().unwrap_or(1.5))
                .collect();
            let absent = [7.0, f32::NAN, -0.0, 0.25, 3.0, -1.0, 0.0, 0.5];
            for vals in [top, picks, absent.to_vec()] {
                let n = vals.len().min(8);
                for reverse in [false, true] {
                    let order = |q: usize| if reverse { n - 1 - q } else { q };
                    let want = crate::top8::claim(&row, &vals, (0..n).map(order));
                    let mut looking = [NO_KEY; 8];
                    for (q, l) in looking.iter_mut().enumerate().take(n) {
                        *l = key(vals[order(q)]);
                    }
                    for isa in Isa::supported() {
                        let found = claim_short(isa, &row, &looking);
                        let mut got = vec![None; vals.len()];
                        for (q, &i) in found.iter().enumerate().take(n) {
                            got[order(q)] = i;
                        }
                        assert_eq!(got, want, "{isa:?} {vals:?} {row:?}");
                    }
                }
            }
        }
    }

    fn keys_max(block: &[f32]) -> i32 {
        block.iter().map(|&x| key(x)).max().unwrap()
    }

    #[test]
    fn scans_find_the_first_passing_element_on_every_path() {
        let v = values();
        for len in [0, 1, 15, 16, 17, 40, v.len()] {
            let row = &v[..len];
            for from in [0, 1, 7, 16, 20, len, len + 3] {
                for &t in &[i32::MIN, -1, 0, 0x3f80_0000, 0x7f80_0000, i32::MAX] {
                    let want = (from..len).find(|&i| key(row[i]) > t).unwrap_or(len);
                    for isa in Isa::supported() {
                        assert_eq!(first_above(isa, row, from, t), want, "{isa:?}");
                    }
                }
                // Keys spread over the values, none at all, and a row's 8 largest (the range
                // the NKI Library's top-k asks about, which few elements fall in).
                let mut spread = [NO_KEY; 8];
                for (j, k) in spread.iter_mut().enumerate().take(5) {
                    *k = key(v[(j * 37 + 11) % v.len()]);
                }
                let mut sorted: Vec<i32> = row.iter().map(|&x| key(x)).collect();
                sorted.sort_unstable_by(|a, b| b.cmp(a));
                let mut largest = [NO_KEY; 8];
                for (k, &q) in largest.iter_mut().zip(&sorted) {
                    *k = q;
                }
                let extremes = [i32::MIN, i32::MAX, NO_KEY, 0, -1, 1, NO_KEY, NO_KEY];
                // One key, the last element's: the range is that key alone.
                let mut last = [NO_KEY; 8];
                last[3] = row.last().map_or(NO_KEY, |&x| key(x));
                for keys in [spread, [NO_KEY; 8], largest, extremes, last] {
                    let want = (from..len)
                        .find(|&i| keys.contains(&key(row[i])))
                        .unwrap_or(len);
                    for isa in Isa::supported() {
                        assert_eq!(first_match(isa, row, from, &keys), want, "{isa:?} {keys:?}");
                    }
                }
            }
        }
    }
}
