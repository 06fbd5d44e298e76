//! `dma_transpose`: NKI's DMA-engine transpose (`nisa.dma_transpose`) of an HBM access or of
//! an SBUF tile of 2, 3 or 4 axes, into an SBUF tile. The permutation follows the source's
//! rank (NKI allows no other): `[1, 0]`, `[2, 1, 0]`, `[3, 1, 2, 0]`, so axis `i` of the result
//! is axis `axes[i]` of the source ([`dma_transpose_axes`]); every one of them swaps the first
//! and the last axis and keeps the others. The result has the source's dtype unless the kernel
//! names another (a cast, as a DMA casts).

use super::infer::{Blame, InferIn, Inferred, Part};
use crate::rules::RuleViolation;
use crate::shape::{MAX_TILE_RANK, TileShape};
use crate::target::{Memory, PARTITIONS};

/// NKI's permutation for a source of `rank` axes: axis `i` of the result is axis `axes[i]` of
/// the source. `None` for a rank NKI's `dma_transpose` does not take.
pub const fn dma_transpose_axes(rank: usize) -> Option<&'static [usize]> {
    match rank {
        2 => Some(&[1, 0]),
        3 => Some(&[2, 1, 0]),
        4 => Some(&[3, 1, 2, 0]),
        _ => None,
    }
}

/// The permutation of [`dma_transpose_axes`] over all [`MAX_TILE_RANK`] axes of a padded
/// index (the axes past `rank` keep their place); the identity for another rank.
pub fn dma_transpose_padded(rank: usize) -> [usize; MAX_TILE_RANK] {
    let mut perm = [0, 1, 2, 3, 4];
    if let Some(axes) = dma_transpose_axes(rank) {
        perm[..axes.len()].copy_from_slice(axes);
    }
    perm
}

/// `dma_transpose` (from HBM, `src` slot 1) and `dma_transpose_sbuf` (from an SBUF tile): a
/// source of 2 to 4 axes; the result's first axis (the source's last) is its partition axis,
/// at most 128.
pub(super) fn dma_transpose(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    let src = x.view(1)?;
    let dims = src.shape.dims();
    let Some(axes) = dma_transpose_axes(dims.len()) else {
        return Err(x.blame(
            1,
            RuleViolation::OperandKind {
                op: x.info().name,
                operand: "src",
                expected: "of 2, 3 or 4 dimensions (NKI's permutations [1, 0], [2, 1, 0] and [3, 1, 2, 0])",
            },
        ));
    };
    let out: Vec<u32> = axes.iter().map(|&a| dims[a]).collect();
    if out[0] > PARTITIONS {
        return Err(x.blame(
            1,
            RuleViolation::PartitionDimTooLarge {
                size: u64::from(out[0]),
            },
        ));
    }
    let shape = TileShape::new(&out).ok_or(Blame {
        part: Part::Slot(1),
        violation: RuleViolation::Malformed {
            what: "a transposed shape that is not a tile's",
        },
    })?;
    Ok(Some(Inferred {
        shape,
        dtype: src.dtype,
        fixed_dtype: false,
        memories: &[Memory::Sbuf],
    }))
}
