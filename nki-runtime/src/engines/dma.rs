//! The DMA queues: `load` (HBM → SBUF) and `store` (SBUF → HBM), casting between the tensor's
//! and the tile's element types.

use nki_lang::{HbmAccess, LoopValues, Memory, TileView};

use super::Engines;
use super::access::{End, Plan, grid, hbm_pattern, transfer_par, view_pattern};
use crate::launch::Bound;

/// `load`: element `t` of the tile-shaped grid goes from the HBM access's element `t` to the
/// view's element `t`, converted to the tile's dtype.
pub(crate) fn load(
    e: &mut Engines,
    b: &Bound<'_, '_, '_>,
    ivs: &LoopValues,
    src: &HbmAccess,
    dst: &TileView,
) {
    let p = b.program;
    let tile = &p.tiles()[dst.tile as usize];
    let dtype = p.tensors()[src.tensor as usize].dtype;
    let (data, shape) = b.hbm(src.tensor as usize);
    let hp = hbm_pattern(src, &shape.strides()[..shape.rank()], ivs);
    let tp = view_pattern(dst, tile, e.partition_bytes(Memory::Sbuf), ivs);
    let plan = Plan::for_grid(&grid(dst), &hp, &tp);
    transfer_par(
        e.isa,
        e.worker.as_mut(),
        (&mut e.chunks, &mut e.chunks_worker),
        data,
        e.sbuf.bytes_mut(),
        End {
            dtype,
            base: hp.base,
        },
        End {
            dtype: tile.dtype,
            base: tp.base,
        },
        &plan,
    );
}

/// `store`: the reverse of [`load`], into an output tensor.
pub(crate) fn store(
    e: &mut Engines,
    b: &mut Bound<'_, '_, '_>,
    ivs: &LoopValues,
    dst: &HbmAccess,
    src: &TileView,
) {
    let p = b.program;
    let tile = &p.tiles()[src.tile as usize];
    let dtype = p.tensors()[dst.tensor as usize].dtype;
    let (data, shape) = b.hbm_mut(dst.tensor as usize);
    let hp = hbm_pattern(dst, &shape.strides()[..shape.rank()], ivs);
    let tp = view_pattern(src, tile, e.partition_bytes(Memory::Sbuf), ivs);
    let plan = Plan::for_grid(&grid(src), &tp, &hp);
    transfer_par(
        e.isa,
        e.worker.as_mut(),
        (&mut e.chunks, &mut e.chunks_worker),
        e.sbuf.bytes(),
        data,
        End {
            dtype: tile.dtype,
            base: tp.base,
        },
        End {
            dtype,
            base: hp.base,
        },
        &plan,
    );
}
