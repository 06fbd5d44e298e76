//! The searches of 8 values per partition (`max8`, `nc_find_index8`, `nc_match_replace8`) on
//! one partition's values: the order they rank by, when a value matches an element, the 8
//! largest, and the positions 8 values claim (`docs/numerics.md`, "Top-8 searches"). Shared by
//! the reference interpreter (`exec::reference::top8`) and the Vector engine's routine
//! (`engines::top8`), which differ only in how they read a partition's values.

use core::cmp::Ordering;

/// The index `nc_find_index8` writes for a value that matches no element of its partition
/// (NKI leaves it undefined): all ones, `0xffff_ffff` in uint32, `0xffff` in uint16.
pub(crate) const NOT_FOUND: i32 = -1;

/// The order `max8` sorts by: every NaN above +∞, then the IEEE order with −0 below +0 (the
/// order of the ALU's `maximum`, which propagates NaN and orders the zeros).
pub(crate) fn rank(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.total_cmp(&b),
    }
}

/// Whether a value matches an element: the same fp32 bits, every NaN alike (so `+0` and `−0`
/// differ, and a NaN `max8` found is found again).
pub(crate) fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// The 8 largest of `row` by [`rank`], in descending order; among equal keys the earlier
/// element first. `row` has at least 8 values (the op table's rule).
pub(crate) fn max8_row(row: &[f32]) -> Vec<f32> {
    // One pass keeping the 8 largest seen, in descending order with earlier elements first
    // among equal keys: a later element enters only when it ranks above the last one kept,
    // behind every kept element that ranks at least as high (what a stable sort of the whole
    // row would put first).
    let mut top: Vec<f32> = Vec::with_capacity(9);
    for &x in row {
        if top.len() == 8 && rank(x, top[7]) != Ordering::Greater {
            continue;
        }
        let at = top.partition_point(|&t| rank(t, x) != Ordering::Less);
        top.insert(at, x);
        top.truncate(8);
    }
    top
}

/// The positions `vals` claim in `data`, one per value, visiting the values in `visit` order:
/// each claims the first position of an element [`same`] as it that no earlier value claimed
/// (so duplicate values claim successive occurrences), or none.
pub(crate) fn claim(
    data: &[f32],
    vals: &[f32],
    visit: impl Iterator<Item = usize>,
) -> Vec<Option<usize>> {
    let mut taken = vec![false; data.len()];
    let mut at = vec![None; vals.len()];
    for j in visit {
        let found = (0..data.len()).find(|&i| !taken[i] && same(data[i], vals[j]));
        if let Some(i) = found {
            taken[i] = true;
        }
        at[j] = found;
    }
    at
}
