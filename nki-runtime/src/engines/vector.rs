//! VectorE: `tensor_copy` (elementwise, with a cast) and `memset`, on SBUF and PSUM.

use nki_lang::{LoopValues, Memory, Program, TileView};

use super::Engines;
use super::access::{
    End, Plan, fill, grid, squeeze, transfer_par, transfer_par_within, view_pattern,
};
use crate::cpu::convert::convert;

/// `tensor_copy`: `dst[i] = cast(src[i])` element by element (in row-major order of the
/// views' non-trivial dimensions). Same-dtype copies keep the bits.
pub(crate) fn copy(
    e: &mut Engines,
    p: &Program<'_>,
    ivs: &LoopValues,
    src: &TileView,
    dst: &TileView,
) {
    let tiles = p.tiles();
    let (st, dt) = (&tiles[src.tile as usize], &tiles[dst.tile as usize]);
    let sp = view_pattern(src, st, e.partition_bytes(st.memory), ivs);
    let dp = view_pattern(dst, dt, e.partition_bytes(dt.memory), ivs);
    let plan = Plan::new(
        &squeeze(&grid(src), &sp.strides),
        &squeeze(&grid(dst), &dp.strides),
    );
    let Engines {
        isa,
        sbuf,
        psum,
        chunks,
        chunks_worker,
        worker,
        ..
    } = e;
    let (from, to) = (
        End {
            dtype: st.dtype,
            base: sp.base,
        },
        End {
            dtype: dt.dtype,
            base: dp.base,
        },
    );
    let (src_mem, dst_mem) = match (st.memory, dt.memory) {
        (Memory::Sbuf, Memory::Sbuf) => {
            let bufs = (chunks, chunks_worker);
            let mem = sbuf.bytes_mut();
            return transfer_par_within(*isa, worker.as_mut(), bufs, mem, from, to, &plan);
        }
        (Memory::Psum, Memory::Psum) => {
            let bufs = (chunks, chunks_worker);
            let mem = psum.bytes_mut();
            return transfer_par_within(*isa, worker.as_mut(), bufs, mem, from, to, &plan);
        }
        (Memory::Sbuf, Memory::Psum) => (sbuf.bytes(), psum.bytes_mut()),
        (Memory::Psum, Memory::Sbuf) => (psum.bytes(), sbuf.bytes_mut()),
        // Tiles live in SBUF or PSUM (checked when the program was built).
        _ => return,
    };
    transfer_par(
        *isa,
        worker.as_mut(),
        (chunks, chunks_worker),
        src_mem,
        dst_mem,
        from,
        to,
        &plan,
    );
}

/// `memset`: every element of the view becomes `value` rounded to the tile's dtype.
pub(crate) fn memset(
    e: &mut Engines,
    p: &Program<'_>,
    ivs: &LoopValues,
    dst: &TileView,
    value: f32,
) {
    let dt = &p.tiles()[dst.tile as usize];
    let dp = view_pattern(dst, dt, e.partition_bytes(dt.memory), ivs);
    let size = dt.dtype.size() as usize;
    let mut bits = [0u8; 4];
    convert(
        e.isa,
        &value.to_le_bytes(),
        nki_lang::DType::F32,
        &mut bits,
        dt.dtype,
        1,
    );
    let plan = Plan::for_grid(&grid(dst), &dp, &dp);
    let mem = match dt.memory {
        Memory::Psum => e.psum.bytes_mut(),
        _ => e.sbuf.bytes_mut(),
    };
    fill(mem, dp.base, &bits[..size], &plan);
}
