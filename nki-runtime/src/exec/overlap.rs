//! Instructions whose destination shares memory with a source without being the same elements
//! (`t[:, 1:] = t[:, :-1] * 2`, a row scaled by its own first column, a tile transposed onto
//! itself). The definition (`reference.rs`, "Order") reads every element of a partition, or
//! every source element of a move, before it writes; the engines stream a partition in chunks
//! of 1024 elements, each read before it is written, so they agree with it only up to 1024
//! elements per partition. Such an instruction runs with the definition instead, on every host
//! path, at any size. An elementwise instruction or a move whose destination is exactly a
//! source (the same elements in the same order: `t = t + x`) streams correctly and keeps the
//! engines.

use nki_lang::{Deps, Instr, MAX_TILE_RANK};

use crate::memory::Psum;
use crate::operand::{Loc, Operands, Resolved};

/// The bytes an operand covers: its partitions and, within each, the byte range of its free
/// elements (for a memory without partitions, or an operand whose first axis does not step by
/// whole partitions, one "partition" and the byte range of all its elements).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Extent {
    partitions: (isize, isize),
    bytes: (isize, isize),
}

impl Extent {
    fn meets(&self, other: &Extent) -> bool {
        let cross = |a: (isize, isize), b: (isize, isize)| a.0 < b.1 && b.0 < a.1;
        cross(self.partitions, other.partitions) && cross(self.bytes, other.bytes)
    }
}

/// The half-open range of `Σ strides[j] · t_j` over `dims[from..]`, in elements from the
/// operand's base (saturating: a saturated range meets everything, which only sends the
/// instruction to the definition, or keeps a run of partitions from being blocked).
pub(crate) fn span(r: &Resolved, from: usize) -> (isize, isize) {
    let (mut lo, mut hi) = (0isize, 0isize);
    for j in from..MAX_TILE_RANK {
        let reach = r.pattern.strides[j].saturating_mul(r.dims[j].saturating_sub(1) as isize);
        if reach < 0 {
            lo = lo.saturating_add(reach);
        } else {
            hi = hi.saturating_add(reach);
        }
    }
    (lo, hi.saturating_add(1))
}

/// The operand's extent in its memory, with `sbuf_stride` bytes from one SBUF partition to the
/// next; `None` when it covers no element.
fn extent(r: &Resolved, sbuf_stride: usize) -> Option<Extent> {
    if r.dims.contains(&0) {
        return None;
    }
    let size = r.dtype.size() as isize;
    let stride = match r.loc {
        Loc::Sbuf => Some(sbuf_stride as isize),
        Loc::Psum => Some(Psum::PARTITION_STRIDE as isize),
        Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => None,
    };
    let byte = |e: isize| e.saturating_mul(size);
    match stride {
        Some(stride) if stride > 0 && byte(r.pattern.strides[0]) == stride => {
            let start = byte(r.pattern.base);
            let (p, inner) = (start.div_euclid(stride), start.rem_euclid(stride));
            let (lo, hi) = span(r, 1);
            Some(Extent {
                partitions: (p, p.saturating_add(r.dims[0] as isize)),
                bytes: (
                    inner.saturating_add(byte(lo)),
                    inner.saturating_add(byte(hi)),
                ),
            })
        }
        _ => {
            let (lo, hi) = span(r, 0);
            Some(Extent {
                partitions: (0, 1),
                bytes: (
                    byte(r.pattern.base.saturating_add(lo)),
                    byte(r.pattern.base.saturating_add(hi)),
                ),
            })
        }
    }
}

/// The first partition, or HBM row offset, of an operand and its step, when its first axis
/// steps through partitions (on chip) or rows (HBM); `None` for immediates and expressions.
pub(crate) fn rows(r: &Resolved, sbuf_stride: usize) -> Option<(isize, isize)> {
    match r.loc {
        Loc::Sbuf | Loc::Psum => {
            let stride = if r.loc == Loc::Psum {
                Psum::PARTITION_STRIDE
            } else {
                sbuf_stride
            } as isize;
            let size = r.dtype.size() as isize;
            (r.pattern.strides[0].checked_mul(size) == Some(stride))
                .then(|| (r.pattern.base.saturating_mul(size).div_euclid(stride), 1))
        }
        Loc::Hbm(_) => Some((r.pattern.base, r.pattern.strides[0])),
        Loc::Expr | Loc::Imm(_) => None,
    }
}

/// Whether two operands share a byte of memory (the same memory, and their extents meet).
pub(crate) fn share_bytes(a: &Resolved, b: &Resolved, sbuf_stride: usize) -> bool {
    a.loc == b.loc
        && match (extent(a, sbuf_stride), extent(b, sbuf_stride)) {
            (Some(ea), Some(eb)) => ea.meets(&eb),
            _ => false,
        }
}

/// Whether `ins` writes memory that one of its sources also covers, other than as exactly the
/// same elements of an elementwise instruction, a move or a shuffle.
pub(crate) fn partly_overlapping(ins: &Instr, ops: &Operands, sbuf_stride: usize) -> bool {
    overlapping_slots(ins, ops, sbuf_stride).is_some()
}

/// The first operand `ins` writes that a source partly overlaps, and that source: their slots.
pub(crate) fn overlapping_slots(
    ins: &Instr,
    ops: &Operands,
    sbuf_stride: usize,
) -> Option<(u8, u8)> {
    let in_memory = |r: &&Resolved| matches!(r.loc, Loc::Sbuf | Loc::Psum | Loc::Hbm(_));
    // `nc_stream_shuffle` in place is NKI's own example: the engine reads every partition of
    // a quadrant before writing it.
    // `nc_match_replace8` in place is the NKI Library's top-k (`topk_core`): each element it
    // writes depends on its own value and on which earlier elements matched, all read before it
    // (a scan's order), so streaming in place reads nothing it has overwritten.
    let same_elements_allowed = matches!(
        ins.opcode.info().deps,
        Deps::Elementwise | Deps::Select | Deps::RangeSelect | Deps::Move | Deps::Shuffle
    ) || ins.opcode == nki_lang::Opcode::MatchReplace8;
    ops.iter()
        .filter(|w| w.dir.writes())
        .filter(in_memory)
        .find_map(|w| {
            let we = extent(w, sbuf_stride)?;
            ops.iter()
                .filter(|r| r.slot != w.slot && r.dir.reads() && r.loc == w.loc)
                .filter(in_memory)
                .find(|r| {
                    let same = r.dtype == w.dtype && r.pattern == w.pattern && r.dims == w.dims;
                    !(same && same_elements_allowed)
                        && extent(r, sbuf_stride).is_some_and(|re| re.meets(&we))
                })
                .map(|r| (w.slot, r.slot))
        })
}

#[cfg(test)]
mod tests {
    use nki_lang::{DType, Dir, Opcode};

    use super::*;
    use crate::operand::Pattern;

    const STRIDE: usize = 1 << 16;

    fn sbuf(slot: u8, dir: Dir, base: isize, dims: [usize; 2], free_stride: isize) -> Resolved {
        let mut d = [1; MAX_TILE_RANK];
        d[..2].copy_from_slice(&dims);
        let mut strides = [0; MAX_TILE_RANK];
        strides[0] = (STRIDE / 4) as isize;
        strides[1] = free_stride;
        Resolved {
            slot,
            dir,
            loc: Loc::Sbuf,
            dtype: DType::F32,
            pattern: Pattern { base, strides },
            dims: d,
        }
    }

    #[test]
    fn extents_are_per_partition() {
        // Two tiles side by side in every partition do not meet, although their bounding
        // boxes over all partitions do.
        let a = sbuf(0, Dir::Write, 0, [128, 256], 1);
        let b = sbuf(1, Dir::Read, 256, [128, 256], 1);
        let (ea, eb) = (extent(&a, STRIDE).unwrap(), extent(&b, STRIDE).unwrap());
        assert_eq!(ea.partitions, (0, 128));
        assert_eq!(eb.bytes, (1024, 2048));
        assert!(!ea.meets(&eb));
        // Shifted by one element: they meet.
        let c = sbuf(1, Dir::Read, 255, [128, 256], 1);
        assert!(ea.meets(&extent(&c, STRIDE).unwrap()));
        // Disjoint partitions never meet.
        let d = sbuf(1, Dir::Read, 64 * (STRIDE as isize / 4), [64, 256], 1);
        let e = sbuf(0, Dir::Write, 0, [64, 256], 1);
        assert!(
            !extent(&e, STRIDE)
                .unwrap()
                .meets(&extent(&d, STRIDE).unwrap())
        );
        // A reversed axis covers the elements below its base.
        let r = sbuf(1, Dir::Read, 255, [1, 256], -1);
        assert_eq!(extent(&r, STRIDE).unwrap().bytes, (0, 1024));
    }

    #[test]
    fn the_same_elements_stream_but_shifted_or_transposed_ones_do_not() {
        // Only the opcode matters here (its dependency rule); the operands are given apart.
        let ins = |op: Opcode| nki_lang::Instr::new(op, nki_lang::InstrData::LoopEnd { begin: 0 });
        let dst = Operands::default().with(sbuf(0, Dir::Write, 0, [128, 512], 1));
        let with_src =
            |base, free_stride| dst.with(sbuf(1, Dir::Read, base, [128, 512], free_stride));
        let same = with_src(0, 1);
        assert!(!partly_overlapping(
            &ins(Opcode::TensorScalar),
            &same,
            STRIDE
        ));
        assert!(!partly_overlapping(&ins(Opcode::TensorCopy), &same, STRIDE));
        assert!(partly_overlapping(&ins(Opcode::Transpose), &same, STRIDE));
        assert!(partly_overlapping(
            &ins(Opcode::TensorTensorScan),
            &same,
            STRIDE
        ));
        // Shifted by one element.
        assert!(partly_overlapping(
            &ins(Opcode::TensorScalar),
            &with_src(1, 1),
            STRIDE
        ));
        // A column broadcast from inside the destination.
        assert!(partly_overlapping(
            &ins(Opcode::TensorScalar),
            &with_src(0, 0),
            STRIDE
        ));
        // Elsewhere in the partition.
        assert!(!partly_overlapping(
            &ins(Opcode::TensorScalar),
            &with_src(512, 1),
            STRIDE
        ));
    }
}
