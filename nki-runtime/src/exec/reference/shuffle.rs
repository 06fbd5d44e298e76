//! `nc_stream_shuffle`: data movement across the partitions of each 32-partition quadrant.

use nki_lang::{SHUFFLE_QUADRANT, shuffle_source};

use super::{Elems, Machine, free_indices};
use crate::operand::Operands;

/// `nc_stream_shuffle`: destination partition `j` (counted from the access's start; quadrant
/// `q = j / 32`, `i = j mod 32`) receives the bits of source partition `32·q + mask[i]`,
/// element `k` from element `k` (row-major over each operand's free dims; one dtype), or keeps
/// its old value where `mask[i]` is 255. Every source element is read before the first is
/// written, so a shuffle in place (`dst` = `src`) moves the old values.
pub(super) fn nc_stream_shuffle(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    mask: [u8; SHUFFLE_QUADRANT],
) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let (to, from) = (Elems::own(dst), Elems::own(src));
    let mut moved = Vec::new();
    for j in 0..dst.dims[0] {
        // The rule keeps it inside the source's partitions.
        let Some(p) = shuffle_source(&mask, j) else {
            continue;
        };
        for (d, s) in free_indices(&dst.dims, j).zip(free_indices(&src.dims, p)) {
            moved.push((d, m.read(from.loc, from.dtype, from.offset(s))));
        }
    }
    for (d, bits) in moved {
        m.write(to.loc, to.dtype, to.offset(d), bits);
    }
}
