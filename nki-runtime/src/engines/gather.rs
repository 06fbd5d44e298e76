//! `gather_flattened` on GpSimd: each destination element is the `data` element its index
//! names in its partition (`crate::gather`), converted to the destination's dtype (the bits
//! kept when the dtypes are equal).

use super::EngineState;
use crate::cpu::convert;
use crate::gather::{data_offset, free, offset, position, read, unravel};
use crate::operand::Operands;

/// Runs `gather_flattened`. The indices were checked when the interpreter resolved the
/// instruction: an index outside its partition writes nothing here.
pub(crate) fn run(e: &mut EngineState, ops: &Operands) {
    let (dst, data, idx) = (ops.get(0), ops.get(1), ops.get(2));
    let sbuf = e.sbuf.bytes();
    let (dsize, ssize) = (dst.dtype.size() as usize, data.dtype.size() as usize);
    // Every source element is read before any is written (a move's order).
    let mut moved = Vec::with_capacity(dst.elems());
    for p in 0..dst.dims[0] {
        for k in 0..free(&dst.dims) {
            let t = unravel(&idx.dims, p, k);
            let f = read(sbuf, 4, offset(idx, &t)).map(|b| position(idx.dtype, b));
            let bits = f
                .and_then(|f| data_offset(data, p, f))
                .and_then(|at| read(sbuf, ssize, at));
            if let Some(bits) = bits {
                let bits = if data.dtype == dst.dtype {
                    bits
                } else {
                    convert::from_f32(dst.dtype, convert::to_f32(data.dtype, bits))
                };
                moved.push((offset(dst, &unravel(&dst.dims, p, k)), bits));
            }
        }
    }
    let sbuf = e.sbuf.bytes_mut();
    for (at, bits) in moved {
        let start = usize::try_from(at)
            .unwrap_or(usize::MAX)
            .saturating_mul(dsize);
        if let Some(b) = sbuf.get_mut(start..start.saturating_add(dsize)) {
            b.copy_from_slice(&bits.to_le_bytes()[..dsize]);
        }
    }
}
