//! The Vector engine's searches of 8 values per partition: `max8`, `nc_find_index8` and
//! `nc_match_replace8`.
//!
//! Each reads the free elements of a partition of its searched operand (`src`, `data`) in
//! row-major order, loaded to fp32 ([`convert::to_f32`]); a partition's values are compared as
//! the keys `crate::top8::rank` and `crate::top8::same` define (`docs/numerics.md`, "Top-8
//! searches"). The partitions are independent; each reads all its operand elements before
//! writing. This is the definition; `engines::top8` reads the rows by runs and writes what this
//! writes.

use super::{Elems, Lane, Machine, Value, cast, free_indices};
use crate::cpu::convert;
use crate::operand::{Operands, Resolved};
use crate::top8::{NOT_FOUND, claim, max8_row};
use nki_lang::Scalar;

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
