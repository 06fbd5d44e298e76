//! `gather_flattened` ([`nki_lang::InstrData::Gather`]): within each partition, the elements of
//! `data` (slot 1, its free elements flattened row-major) at the positions the `indices` tile
//! (slot 2, int32 or uint32, the destination's shape) holds. Shared by the engines, the
//! reference interpreter's checks and strict mode: where an index is, and where the element it
//! names is.

// Positions come from kernel data: arithmetic on them is checked or saturating.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{DType, MAX_TILE_RANK};

use crate::operand::{Operands, Resolved};

/// The element offset of index `t` (partition first) of an operand.
pub(crate) fn offset(r: &Resolved, t: &[usize; MAX_TILE_RANK]) -> isize {
    r.pattern
        .strides
        .iter()
        .zip(t)
        .fold(r.pattern.base, |at, (&s, &i)| {
            at.saturating_add(s.saturating_mul(isize::try_from(i).unwrap_or(isize::MAX)))
        })
}

/// The index of partition `p`'s free element `k` (row-major) of `dims`.
pub(crate) fn unravel(
    dims: &[usize; MAX_TILE_RANK],
    p: usize,
    mut k: usize,
) -> [usize; MAX_TILE_RANK] {
    let mut t = [0; MAX_TILE_RANK];
    for j in (1..MAX_TILE_RANK).rev() {
        let d = dims[j].max(1);
        t[j] = k.checked_rem(d).unwrap_or(0);
        k = k.checked_div(d).unwrap_or(0);
    }
    t[0] = p;
    t
}

/// The number of free elements per partition of `dims`.
pub(crate) fn free(dims: &[usize; MAX_TILE_RANK]) -> usize {
    dims[1..].iter().product()
}

/// The position an index element's bits hold (`dtype` int32 or uint32).
pub(crate) fn position(dtype: DType, bits: u32) -> i64 {
    if dtype == DType::U32 {
        i64::from(bits)
    } else {
        i64::from(bits.cast_signed())
    }
}

/// The element offset of position `f` of partition `p` of `data`, its free elements flattened
/// row-major; `None` when `f` is outside them.
pub(crate) fn data_offset(data: &Resolved, p: usize, f: i64) -> Option<isize> {
    let f = usize::try_from(f).ok().filter(|&f| f < free(&data.dims))?;
    Some(offset(data, &unravel(&data.dims, p, f)))
}

/// The bits of element `at` of a `size`-byte dtype in `mem`, little-endian and zero-extended.
pub(crate) fn read(mem: &[u8], size: usize, at: isize) -> Option<u32> {
    let start = usize::try_from(at).ok()?.checked_mul(size)?;
    let bytes = mem.get(start..start.checked_add(size)?)?;
    let mut word = [0u8; 4];
    word.get_mut(..size)?.copy_from_slice(bytes);
    Some(u32::from_le_bytes(word))
}

/// Every index of one execution inside its partition's data: else what is wrong, naming the
/// first index outside (this model's run-time error, where NKI documents garbage).
pub(crate) fn check(ops: &Operands, sbuf: &[u8]) -> Result<(), String> {
    let (data, idx) = (ops.get(1), ops.get(2));
    let n = free(&data.dims);
    for p in 0..idx.dims[0] {
        for k in 0..free(&idx.dims) {
            let at = offset(idx, &unravel(&idx.dims, p, k));
            let bits = read(sbuf, 4, at).ok_or("an index outside SBUF")?;
            let f = position(idx.dtype, bits);
            if data_offset(data, p, f).is_none() {
                return Err(format!(
                    "gather_flattened index {f} (element {k} of partition {p} of the indices) is outside the {n} elements of its partition of `data`"
                ));
            }
        }
    }
    Ok(())
}
