//! VectorE: `tensor_copy` (elementwise, with a cast) and `memset`, on SBUF and PSUM.

use nki_lang::{LoopValues, Memory, Program, TileView};

use super::Engines;
use super::access::{End, Mem, Plan, fill, grid, squeeze, transfer, view_pattern};
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
        ..
    } = e;
    let mem = match (st.memory, dt.memory) {
        (Memory::Sbuf, Memory::Sbuf) => Mem::One(sbuf.bytes_mut()),
        (Memory::Psum, Memory::Psum) => Mem::One(psum.bytes_mut()),
        (Memory::Sbuf, Memory::Psum) => Mem::Two(sbuf.bytes(), psum.bytes_mut()),
        (Memory::Psum, Memory::Sbuf) => Mem::Two(psum.bytes(), sbuf.bytes_mut()),
        // Tiles live in SBUF or PSUM (checked when the program was built).
        _ => return,
    };
    let end = |dtype, base| End { dtype, base };
    transfer(
        *isa,
        chunks,
        mem,
        end(st.dtype, sp.base),
        end(dt.dtype, dp.base),
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
