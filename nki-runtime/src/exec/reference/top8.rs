//! The Vector engine's searches of 8 values per partition: `max8`, `nc_find_index8` and
//! `nc_match_replace8`.
//!
//! Each reads the free elements of a partition of its searched operand (`src`, `data`) in
//! row-major order, loaded to fp32 ([`convert::to_f32`]); a partition's values are compared as
//! the keys [`rank`] and [`same`] define (`docs/numerics.md`, "Top-8 searches"). The partitions
//! are independent; each reads all its operand elements before writing.

use super::{Elems, Lane, Machine, Value, cast, free_indices};
use crate::cpu::convert;
use crate::operand::{Operands, Resolved};
use core::cmp::Ordering;
use nki_lang::Scalar;

/// The index `nc_find_index8` writes for a value that matches no element of its partition
/// (NKI leaves it undefined): all ones, `0xffff_ffff` in uint32, `0xffff` in uint16.
pub(super) const NOT_FOUND: i32 = -1;

/// The order `max8` sorts by: every NaN above +∞, then the IEEE order with −0 below +0 (the
/// order of the ALU's `maximum`, which propagates NaN and orders the zeros).
pub(super) fn rank(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.total_cmp(&b),
    }
}

/// Whether a value matches an element: the same fp32 bits, every NaN alike (so `+0` and `−0`
/// differ, and a NaN `max8` found is found again).
pub(super) fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// The 8 largest of `row` by [`rank`], in descending order; among equal keys the earlier
/// element first. `row` has at least 8 values (the op table's rule).
pub(super) fn max8_row(row: &[f32]) -> Vec<f32> {
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
pub(super) fn claim(
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

/// The fp32 values of partition `p` of `r`, row-major.
fn row(m: &Machine<'_, '_, '_, '_>, r: &Resolved, p: usize) -> Vec<f32> {
    let e = Elems::own(r);
    free_indices(&r.dims, p)
        .map(|t| m.get(&e, t, Lane::F32).f32())
        .collect()
}

/// `max8`: per partition, [`max8_row`] of the source's values, written as fp32 lanes in
/// row-major order of the destination's free elements (so converted to its dtype).
pub(super) fn max8(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let to = Elems::own(dst);
    for p in 0..src.dims[0] {
        let top = max8_row(&row(m, src, p));
        for (t, v) in free_indices(&dst.dims, p).zip(top) {
            m.put(&to, t, Lane::F32, Value::from_f32(v));
        }
    }
}

/// `nc_find_index8`: per partition, the position (row-major, from 0) each of the 8 `vals`
/// claims in `data` ([`claim`], the values visited first to last), or [`NOT_FOUND`], written as
/// int32 lanes (the destination is uint32 or uint16).
pub(super) fn nc_find_index8(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (dst, data, vals) = (ops.get(0), ops.get(1), ops.get(2));
    let to = Elems::own(dst);
    for p in 0..data.dims[0] {
        let vs = row(m, vals, p);
        let at = claim(&row(m, data, p), &vs, 0..vs.len());
        for (t, i) in free_indices(&dst.dims, p).zip(at) {
            let i = i.map_or(NOT_FOUND, |i| i32::try_from(i).unwrap_or(NOT_FOUND));
            m.put(&to, t, Lane::I32, Value::from_i32(i));
        }
    }
}

/// `nc_match_replace8`: per partition, `data` with the positions the 8 `vals` claim ([`claim`],
/// the values visited last to first, as NKI documents) holding `imm` (converted from fp32 to
/// the destination's dtype), every other element copied ([`cast`]: the bits when the dtypes
/// are equal); with `dst_idx` (slot 4), the position each value claimed there, as
/// `nc_find_index8` writes them (so a value repeated in `vals` pairs its last column with the
/// first occurrence, as NKI documents).
pub(super) fn nc_match_replace8(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, imm: Scalar) {
    let (dst, data, vals) = (ops.get(0), ops.get(1), ops.get(2));
    let (from, to) = (Elems::own(data), Elems::own(dst));
    let idx = ops.slot(4).map(|r| (r, Elems::own(r)));
    let imm = convert::from_f32(dst.dtype, imm.as_f32());
    for p in 0..data.dims[0] {
        let vs = row(m, vals, p);
        let at = claim(&row(m, data, p), &vs, (0..vs.len()).rev());
        let bits: Vec<u32> = free_indices(&data.dims, p)
            .map(|t| m.read(from.loc, from.dtype, from.offset(t)))
            .collect();
        let mut out: Vec<u32> = bits
            .iter()
            .map(|&b| cast(data.dtype, dst.dtype, b))
            .collect();
        for &i in at.iter().flatten() {
            out[i] = imm;
        }
        if let Some((r, e)) = &idx {
            for (t, i) in free_indices(&r.dims, p).zip(&at) {
                let i = i.map_or(NOT_FOUND, |i| i32::try_from(i).unwrap_or(NOT_FOUND));
                m.put(e, t, Lane::I32, Value::from_i32(i));
            }
        }
        for (t, b) in free_indices(&dst.dims, p).zip(out) {
            m.write(to.loc, to.dtype, to.offset(t), b);
        }
    }
}
