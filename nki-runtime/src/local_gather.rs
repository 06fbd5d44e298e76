//! `local_gather` ([`nki_lang::InstrData::LocalGather`]): each group of 16 partitions (one
//! GpSimd core's) gathers with its own uint16 indices, taken from the group's partitions of
//! `index` (slot 2) partition first; element `j·elems + e` of partition `p` of the destination
//! is element `index_j + e` of partition `p` of `src_buffer` (slot 1, its free elements
//! flattened row-major). Shared by the reference interpreter, its checks and strict mode.

// Positions come from kernel data: arithmetic on them is checked or saturating.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{GATHER_GROUP, MAX_TILE_RANK};

use crate::gather::{free, offset, read};
use crate::operand::{Operands, Resolved};

/// The point of `index` holding index `j` of the group of partition `p`: partition
/// `16·(p / 16) + j mod 16`, free position `j / 16` (its one free axis).
pub(crate) fn index_point(p: usize, j: usize) -> [usize; MAX_TILE_RANK] {
    let group = p.checked_div(GATHER_GROUP).unwrap_or(0);
    let mut t = [0; MAX_TILE_RANK];
    t[0] = group
        .saturating_mul(GATHER_GROUP)
        .saturating_add(j.checked_rem(GATHER_GROUP).unwrap_or(0));
    t[1] = j.checked_div(GATHER_GROUP).unwrap_or(0);
    t
}

/// The element offset in `index` of index `j` of the group of partition `p`.
pub(crate) fn index_offset(index: &Resolved, p: usize, j: usize) -> isize {
    offset(index, &index_point(p, j))
}

/// Every run of elements the indices of one execution name inside its partition of
/// `src_buffer`: else what is wrong, naming the first index outside (this model's run-time
/// error, where NKI leaves the access undefined).
pub(crate) fn check(ops: &Operands, elems: u8, valid: u16, sbuf: &[u8]) -> Result<(), String> {
    let (src, index) = (ops.get(1), ops.get(2));
    let n = free(&src.dims);
    for p in (0..src.dims[0]).step_by(GATHER_GROUP) {
        for j in 0..usize::from(valid) {
            let bits = read(sbuf, 2, index_offset(index, p, j)).ok_or("an index outside SBUF")?;
            let last = usize::try_from(bits)
                .unwrap_or(usize::MAX)
                .saturating_add(usize::from(elems));
            if last > n {
                return Err(format!(
                    "local_gather index {bits} (index {j} of the group of partitions {p}..{}) reads elements {bits}..{last} of a partition of `src_buffer`, which has {n}",
                    p.saturating_add(GATHER_GROUP)
                ));
            }
        }
    }
    Ok(())
}
