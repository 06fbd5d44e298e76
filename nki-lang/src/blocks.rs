//! Tiles whose blocks a symbolic dimension counts (NKI's `nl.ndarray((K // 128,
//! nl.par_dim(128), 512))`, [`crate::TileBuf::blocks`]): the capacity reserved for them and
//! their place in SBUF.
//!
//! Such a tile's first free axis is its block axis; block `k` lies at `base + k × block
//! bytes` of each partition, so that the views of a block do not depend on how many blocks
//! the tile has. The tiles of fixed size are allocated first (first-fit by live range); the
//! block tiles follow them, one after the other, each with room for the same number of blocks
//! `C`, the most the rest of each SBUF partition holds. A launch whose count exceeds `C` is
//! refused by [`crate::Constraint::Blocks`], and every block index is checked against the
//! launch's count ([`crate::Bounded::TileBlocks`]).

use crate::alloc::{Allocation, allocate};
use crate::buf::ProgramBuf;
use crate::rules::RuleViolation;
use crate::shape::TileShape;
use crate::target::{Memory, SBUF_ALIGN};

/// Bytes per partition of one block of a tile with block axis 1: the product of its free
/// dimensions after the block axis, times the element size (saturating: far over capacity).
fn block_bytes(shape: &TileShape, elem: u32) -> u64 {
    shape
        .free()
        .iter()
        .skip(1)
        .fold(u64::from(elem), |n, &d| n.saturating_mul(u64::from(d)))
}

/// `n` rounded up to the SBUF alignment (saturating).
fn aligned(n: u64) -> u64 {
    let align = u64::from(SBUF_ALIGN);
    n.div_ceil(align).saturating_mul(align)
}

/// Each tile's memory and bytes per partition for first-fit allocation: the block tiles
/// count 0 there (they are placed after the others by [`place`]).
pub(crate) fn fixed_sizes(p: &ProgramBuf) -> Vec<(Memory, u64)> {
    p.tiles
        .iter()
        .map(|t| {
            let bytes = match t.blocks {
                Some(_) => 0,
                None => t
                    .shape
                    .free_elems()
                    .saturating_mul(u64::from(t.dtype.size())),
            };
            (t.memory, bytes)
        })
        .collect()
}

/// The most blocks `c` such that every block tile with room for `c` blocks fits in `room`
/// bytes per partition after the others.
fn capacity(block_sizes: &[u64], room: u64) -> u64 {
    let per_block = block_sizes
        .iter()
        .fold(0u64, |n, &b| n.saturating_add(b))
        .max(1);
    // Alignment adds less than 64 bytes per tile: a few steps down at most.
    let mut c = room.checked_div(per_block).unwrap_or(0);
    while c > 0
        && block_sizes
            .iter()
            .fold(0u64, |n, &b| n.saturating_add(aligned(b.saturating_mul(c))))
            > room
    {
        c = c.saturating_sub(1);
    }
    c
}

/// Sets the block axis of every block tile to the capacity its place will hold, and returns
/// that capacity (`None` when the program has no block tile). A program whose fixed tiles do
/// not fit is left for the final allocation to report; its block tiles keep one block.
pub(crate) fn reserve(p: &mut ProgramBuf) -> Option<u64> {
    let blocked: Vec<usize> = (0..p.tiles.len())
        .filter(|&t| p.tiles[t].blocks.is_some() && p.tiles[t].shape.rank() >= 3)
        .collect();
    if blocked.is_empty() {
        return None;
    }
    let fixed_end = allocate(p, &fixed_sizes(p)).map_or(u64::MAX, |a| u64::from(a.sbuf_bytes));
    let room = u64::from(p.target.sbuf_partition_bytes()).saturating_sub(aligned(fixed_end));
    let sizes: Vec<u64> = blocked
        .iter()
        .map(|&t| block_bytes(&p.tiles[t].shape, p.tiles[t].dtype.size()))
        .collect();
    let c = capacity(&sizes, room).max(1);
    let dim = u32::try_from(c).unwrap_or(u32::MAX);
    for &t in &blocked {
        let mut dims = p.tiles[t].shape.dims().to_vec();
        dims[1] = dim;
        if let Some(s) = TileShape::new(&dims) {
            p.tiles[t].shape = s;
        }
    }
    Some(u64::from(dim))
}

/// Places the block tiles after the tiles `alloc` placed, one after the other (64-byte
/// aligned); a failure names the tile that does not fit.
pub(crate) fn place(p: &ProgramBuf, alloc: &mut Allocation) -> Result<(), (usize, RuleViolation)> {
    let capacity = p.target.sbuf_partition_bytes();
    let mut at = aligned(u64::from(alloc.sbuf_bytes));
    for (t, tile) in p.tiles.iter().enumerate() {
        if tile.blocks.is_none() {
            continue;
        }
        let bytes = tile
            .shape
            .free_elems()
            .saturating_mul(u64::from(tile.dtype.size()));
        let end = at.saturating_add(aligned(bytes));
        let (Ok(start), Ok(end32)) = (u32::try_from(at), u32::try_from(end)) else {
            return Err((t, over(end, capacity, p)));
        };
        if end32 > capacity {
            return Err((t, over(end, capacity, p)));
        }
        alloc.addrs[t] = start;
        alloc.sbuf_bytes = alloc.sbuf_bytes.max(end32);
        at = end;
    }
    Ok(())
}

fn over(needed: u64, capacity: u32, p: &ProgramBuf) -> RuleViolation {
    RuleViolation::SbufCapacity {
        needed,
        capacity,
        target: p.target.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_the_most_blocks_that_fit_aligned() {
        // Two tiles of 256 and 1024 bytes per block in 10 KiB: 8 blocks (2 KiB + 8 KiB).
        assert_eq!(capacity(&[256, 1024], 10240), 8);
        // 100-byte blocks: 3 blocks are 300 bytes, 320 aligned; two tiles need 640 > 600.
        assert_eq!(capacity(&[100, 100], 600), 2);
        assert_eq!(capacity(&[100], 50), 0);
    }
}
