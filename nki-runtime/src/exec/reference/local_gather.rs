//! `local_gather`: a gather within each group of 16 partitions.

use super::{Elems, Machine, free_elems, unravel};
use crate::operand::Operands;

/// `local_gather`: for each partition `p` and each of its group's `valid` indices `j`
/// (`crate::local_gather::index_point`: the group's uint16 index at partition `j mod 16`, free
/// position `j / 16`), elements `index_j .. index_j + elems` of partition `p` of `src_buffer`
/// (flattened row-major) go to elements `j·elems ..` of partition `p` of the destination, bits
/// unchanged (one dtype). The interpreter stops a run whose index reads past a partition
/// (`crate::local_gather::check`) before this runs; such an element is not written here.
pub(super) fn local_gather(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, elems: u8, valid: u16) {
    let (dst, src, index) = (ops.get(0), ops.get(1), ops.get(2));
    let (d, s, ix) = (Elems::own(dst), Elems::own(src), Elems::own(index));
    let n = free_elems(&src.dims);
    let elems = usize::from(elems);
    let mut moved = Vec::new();
    for p in 0..dst.dims[0] {
        for j in 0..usize::from(valid) {
            let at = ix.offset(crate::local_gather::index_point(p, j));
            let first = m.read(ix.loc, index.dtype, at) as usize;
            for e in 0..elems {
                let f = first.saturating_add(e);
                if f >= n {
                    continue;
                }
                let k = j.saturating_mul(elems).saturating_add(e);
                let bits = m.read(s.loc, src.dtype, s.offset(unravel(&src.dims, p, f)));
                moved.push((d.offset(unravel(&dst.dims, p, k)), bits));
            }
        }
    }
    for (at, bits) in moved {
        m.write(dst.loc, dst.dtype, at, bits);
    }
}
