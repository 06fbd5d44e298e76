//! The DMA queues: `load` (HBM → SBUF) and `store` (SBUF → HBM), casting between the tensor's
//! and the tile's element types.

use super::Engines;
use super::access::{End, Plan, transfer_par};
use crate::exec::{Operands, Resolved};
use crate::launch::Bound;

fn end(r: &Resolved) -> End {
    End {
        dtype: r.dtype,
        base: r.pattern.base,
    }
}

/// `load`: element `t` of the access's grid goes to the tile's element `t` (in row-major order
/// of both sides' non-trivial dimensions), converted to the tile's dtype.
pub(crate) fn load(e: &mut Engines, b: &Bound<'_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    let crate::exec::Loc::Hbm(t) = hbm.loc else {
        unreachable!("a load reads HBM")
    };
    let (data, _) = b.hbm(t as usize);
    let plan = Plan::between(hbm, tile);
    transfer_par(
        e.isa,
        e.worker.as_mut(),
        (&mut e.chunks, &mut e.chunks_worker),
        data,
        e.sbuf.bytes_mut(),
        end(hbm),
        end(tile),
        &plan,
    );
}

/// `store`: the reverse of [`load`], into an output tensor.
pub(crate) fn store(e: &mut Engines, b: &mut Bound<'_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    let crate::exec::Loc::Hbm(t) = hbm.loc else {
        unreachable!("a store writes HBM")
    };
    let (data, _) = b.hbm_mut(t as usize);
    let plan = Plan::between(tile, hbm);
    transfer_par(
        e.isa,
        e.worker.as_mut(),
        (&mut e.chunks, &mut e.chunks_worker),
        e.sbuf.bytes(),
        data,
        end(tile),
        end(hbm),
        &plan,
    );
}
