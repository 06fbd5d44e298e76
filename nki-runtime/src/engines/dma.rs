//! The DMA queues: `load` (HBM → SBUF) and `store` (SBUF → HBM), casting between the tensor's
//! and the tile's element types.

use nki_lang::MAX_TILE_RANK;

use super::access::{
    Block2d, End, Mem, Plan, STREAMED_BYTES, T_COLS, transfer_par, transpose_blocks,
};
use super::{EngineState, sbuf_for};
use crate::bind::Bound;
use crate::operand::{Loc, Operands, Pattern, Resolved};

fn end(r: &Resolved) -> End {
    End {
        dtype: r.dtype,
        base: r.pattern.base,
    }
}

/// `load`: element `t` of the access's grid goes to the tile's element `t` (in row-major order
/// of both sides' non-trivial dimensions), converted to the tile's dtype.
pub(crate) fn load(e: &mut EngineState, b: &Bound<'_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    let crate::operand::Loc::Hbm(t) = hbm.loc else {
        unreachable!("a load reads HBM")
    };
    let (data, _) = b.hbm(t as usize);
    let plan = Plan::between(hbm, tile).on_partitions(tile, true, e.sbuf.partition_stride());
    let far_split = e.far_split;
    let worker = e.worker.as_mut().and_then(|w| {
        if far_split {
            Some(w)
        } else {
            crate::worker::near(w)
        }
    });
    transfer_par(
        e.isa,
        worker,
        (&mut e.chunks, &mut e.chunks_worker),
        data,
        (sbuf_for(&mut e.sbuf, tile), false),
        end(hbm),
        end(tile),
        &plan,
    );
}

/// A `store` to `to` (in `output`, an output tensor's bytes) of a tile that only passed data
/// through: element `t` of `from` goes to element `t` of the store's access, converted once
/// from `from`'s dtype to the output's, and the tile is not written. `from` is the HBM side of
/// a load (in `input`, an input tensor's bytes) or the source of a `tensor_copy` in SBUF or
/// PSUM (`input` `None`).
pub(crate) fn store_straight(
    e: &mut EngineState,
    from: &Resolved,
    input: Option<&[u8]>,
    output: &mut [u8],
    to: &Resolved,
) {
    let plan = Plan::between(from, to);
    let src_mem = match (input, from.loc) {
        (Some(input), _) => input,
        (None, Loc::Psum) => e.psum.bytes(),
        (None, _) => e.sbuf.bytes(),
    };
    let streamed = output.len() >= STREAMED_BYTES;
    transfer_par(
        e.isa,
        e.worker.as_mut(),
        (&mut e.chunks, &mut e.chunks_worker),
        src_mem,
        (output, streamed),
        end(from),
        end(to),
        &plan,
    );
}

/// `store`: the reverse of [`load`], into an output tensor.
pub(crate) fn store(e: &mut EngineState, b: &mut Bound<'_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    let crate::operand::Loc::Hbm(t) = hbm.loc else {
        unreachable!("a store writes HBM")
    };
    let (data, _) = b.hbm_mut(t as usize);
    let plan = Plan::between(tile, hbm).on_partitions(tile, false, e.sbuf.partition_stride());
    // A large tensor's lines go to memory without a round trip through the cache.
    let streamed = data.len() >= STREAMED_BYTES;
    transfer_par(
        e.isa,
        e.worker.as_mut(),
        (&mut e.chunks, &mut e.chunks_worker),
        e.sbuf.bytes(),
        (data, streamed),
        end(tile),
        end(hbm),
        &plan,
    );
}

/// `load_transpose2d`: the access's 2-D grid `[A, B]` into the tile `[B, A]`: access element
/// `(a, b)` goes to tile element `(b, a)`, converted to the tile's dtype.
pub(crate) fn load_transpose2d(e: &mut EngineState, b: &Bound<'_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    let crate::operand::Loc::Hbm(t) = hbm.loc else {
        unreachable!("a load reads HBM")
    };
    let (data, _) = b.hbm(t as usize);
    let g = hbm.dims;
    // The access's two non-trivial axes: rows `a` (size A), then columns `b` (size B).
    let mut axes = (0..MAX_TILE_RANK).filter(|&j| g[j] != 1);
    let (ga, gb) = match (axes.next(), axes.next()) {
        (Some(a), Some(b)) => (Some(a), Some(b)),
        (Some(a), None) if g[0] != 1 => (Some(a), None),
        (Some(b), None) => (None, Some(b)),
        _ => (None, None),
    };
    // Tile `[B, A]`: partitions index `b`, the free elements `a`.
    let free = (1..MAX_TILE_RANK).find(|&j| tile.dims[j] != 1);
    let mut strides = [0isize; MAX_TILE_RANK];
    if let Some(gb) = gb {
        strides[gb] = tile.pattern.strides[0];
    }
    if let (Some(ga), Some(f)) = (ga, free) {
        strides[ga] = tile.pattern.strides[f];
    }
    // Rows of the access with contiguous elements into contiguous tile partitions: in blocks
    // (`[A, B]` rows converted a few at a time, their columns written as partition runs).
    if let (Some(ga), Some(gb), Some(f)) = (ga, gb, free)
        && hbm.pattern.strides[gb] == 1
        && tile.pattern.strides[f] == 1
        && g[gb] <= T_COLS
    {
        let block = Block2d {
            rows: g[ga],
            cols: g[gb],
            src: (hbm.pattern.base, hbm.pattern.strides[ga], hbm.dtype),
            dst: (tile.pattern.base, tile.pattern.strides[0], tile.dtype),
        };
        return transpose_blocks(
            e.isa,
            &mut Mem::Two(data, sbuf_for(&mut e.sbuf, tile)),
            &block,
        );
    }
    let to = Pattern {
        base: tile.pattern.base,
        strides,
    };
    let plan = Plan::for_grid(&g, &hbm.pattern, &to);
    transfer_par(
        e.isa,
        e.worker.as_mut(),
        (&mut e.chunks, &mut e.chunks_worker),
        data,
        (sbuf_for(&mut e.sbuf, tile), false),
        end(hbm),
        end(tile),
        &plan,
    );
}
