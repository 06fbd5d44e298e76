//! The DMA queues' transpose (`dma_transpose`, `dma_transpose_sbuf`): an HBM access or an SBUF
//! tile of 2 to 4 axes into an SBUF tile, its axes permuted as NKI's `dma_transpose` permutes
//! them ([`nki_lang::ops::dma_transpose_axes`]), converted to the destination's dtype.

use nki_lang::MAX_TILE_RANK;
use nki_lang::ops::dma_transpose_padded;

use super::EngineState;
use super::access::{End, Plan, transfer_par, transfer_par_within};
use crate::bind::Bound;
use crate::operand::{Loc, Operands, Pattern};

/// `dma_transpose` of an instruction of `rank` axes: the source's element at `s` goes to the
/// destination's element at `t`, `s[axes[i]] = t[i]`. The transfer walks the source's grid,
/// each source axis `axes[i]` stepping the destination by its axis `i`'s stride.
pub(crate) fn dma_transpose(
    e: &mut EngineState,
    b: &Bound<'_, '_, '_>,
    rank: usize,
    ops: &Operands,
) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let perm = dma_transpose_padded(rank);
    let mut strides = [0isize; MAX_TILE_RANK];
    for (i, &a) in perm.iter().enumerate() {
        strides[a] = dst.pattern.strides[i];
    }
    let to = Pattern {
        base: dst.pattern.base,
        strides,
    };
    let plan = Plan::for_grid(&src.dims, &src.pattern, &to);
    let from = End {
        dtype: src.dtype,
        base: src.pattern.base,
    };
    let into = End {
        dtype: dst.dtype,
        base: dst.pattern.base,
    };
    let bufs = (&mut e.chunks, &mut e.chunks_worker);
    match src.loc {
        Loc::Hbm(t) => {
            let (data, _) = b.hbm(t as usize);
            transfer_par(
                e.isa,
                e.worker.as_mut(),
                bufs,
                data,
                (e.sbuf.bytes_mut(), false),
                from,
                into,
                &plan,
            );
        }
        Loc::Sbuf => transfer_par_within(
            e.isa,
            e.worker.as_mut(),
            bufs,
            e.sbuf.bytes_mut(),
            from,
            into,
            &plan,
        ),
        other @ (Loc::Psum | Loc::Expr | Loc::Imm(_)) => {
            unreachable!("dma_transpose from {other:?}: the op table keeps it to HBM and SBUF")
        }
    }
}
