//! SBUF and PSUM as one thread of an instruction sees them ([`Mems`]): each memory a
//! [`Region`], writable in the partitions the thread owns and read-only elsewhere, so that two
//! threads can run halves of one instruction ([`super::split`]) without sharing a writable byte.

use core::ops::Range;

use crate::operand::Loc;

/// One on-chip memory as one thread of an instruction sees it: writable in `own`, read-only
/// below and above it.
pub(crate) struct Region<'a> {
    below: &'a [u8],
    own: &'a mut [u8],
    own_start: usize,
    above: &'a [u8],
    above_start: usize,
}

impl<'a> Region<'a> {
    /// The whole memory, writable.
    pub(crate) fn whole(mem: &'a mut [u8]) -> Region<'a> {
        let len = mem.len();
        Region {
            below: &[],
            own: mem,
            own_start: 0,
            above: &[],
            above_start: len,
        }
    }

    /// The whole memory, read-only.
    pub(crate) fn shared(mem: &'a [u8]) -> Region<'a> {
        Region {
            below: mem,
            own: &mut [],
            own_start: mem.len(),
            above: &[],
            above_start: mem.len(),
        }
    }

    /// The memory cut in three: `below` (its bytes from 0) and `above` (its bytes from
    /// `above_start`) read-only, `own` (its bytes from `own_start`) writable.
    pub(super) fn owning(
        below: &'a [u8],
        own: &'a mut [u8],
        own_start: usize,
        above: &'a [u8],
        above_start: usize,
    ) -> Region<'a> {
        Region {
            below,
            own,
            own_start,
            above,
            above_start,
        }
    }

    /// Bytes `r` (which lie in one of the three parts: a run never crosses a partition, and
    /// parts are whole partitions).
    pub(super) fn read(&self, r: Range<usize>) -> &[u8] {
        let (part, start) = self.part_of(&r);
        &part[r.start - start..r.end - start]
    }

    /// The part (below, own or above) that holds bytes `r`, and the offset of its first byte.
    fn part_of(&self, r: &Range<usize>) -> (&[u8], usize) {
        if r.end <= self.own_start {
            (self.below, 0)
        } else if r.start >= self.above_start {
            (self.above, self.above_start)
        } else {
            (&self.own[..], self.own_start)
        }
    }

    /// Asks the host to bring bytes `r` (within one partition) into its caches: a hint, with
    /// no effect on any value; bytes outside the memory are skipped.
    pub(super) fn prefetch(&self, r: Range<usize>) {
        let (part, start) = self.part_of(&r);
        let lo = r.start.saturating_sub(start).min(part.len());
        let hi = r.end.saturating_sub(start).min(part.len());
        crate::cpu::prefetch(&part[lo..hi]);
    }

    /// Bytes `r` of the writable part.
    pub(super) fn write(&mut self, r: Range<usize>) -> &mut [u8] {
        &mut self.own[r.start - self.own_start..r.end - self.own_start]
    }
}

/// SBUF and PSUM as one thread of an instruction sees them.
pub(crate) struct Mems<'a> {
    /// The state buffer.
    pub sbuf: Region<'a>,
    /// The partial-sum buffer.
    pub psum: Region<'a>,
    /// The bytes of the HBM input an instruction's sources in HBM read, read-only (empty when
    /// none does): the folded load of a [`super::compute::Expression`] (`host::exprs`).
    pub hbm: Region<'a>,
}

impl<'a> Mems<'a> {
    /// Bytes `r` of `loc`'s memory (within one partition).
    pub(crate) fn read(&self, loc: Loc, r: Range<usize>) -> &[u8] {
        self.region(loc).read(r)
    }

    /// `loc`'s memory (SBUF for anything but PSUM and HBM).
    pub(super) fn region(&self, loc: Loc) -> &Region<'a> {
        match loc {
            Loc::Psum => &self.psum,
            Loc::Hbm(_) => &self.hbm,
            Loc::Sbuf | Loc::Expr | Loc::Imm(_) => &self.sbuf,
        }
    }

    /// `loc`'s memory, to write (SBUF for anything but PSUM; nothing writes HBM here).
    pub(super) fn region_mut(&mut self, loc: Loc) -> &mut Region<'a> {
        match loc {
            Loc::Psum => &mut self.psum,
            Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => &mut self.sbuf,
        }
    }
}

/// Bytes to write and, beside them, the bytes of each read asked for ([`Mems::write_with`]).
pub(super) type WriteWith<'m, const N: usize> = (&'m mut [u8], [Option<&'m [u8]>; N]);

impl Mems<'_> {
    /// Bytes `w` of `loc`'s memory to write, with the bytes of `reads` (each in either memory)
    /// to read alongside; `None` when `w` is not writable here or a read of `loc`'s memory
    /// shares a byte with `w` (the caller then copies). Each read lies in one part of its
    /// memory, as for [`Region::read`]; a read of HBM is of [`Mems::hbm`].
    pub(super) fn write_with<const N: usize>(
        &mut self,
        loc: Loc,
        w: Range<usize>,
        reads: &[Option<(Loc, Range<usize>)>; N],
    ) -> Option<WriteWith<'_, N>> {
        let on_psum = |l: Loc| matches!(l, Loc::Psum);
        let hbm = &self.hbm;
        let (mine, other) = if on_psum(loc) {
            (&mut self.psum, &self.sbuf)
        } else {
            (&mut self.sbuf, &self.psum)
        };
        let Region {
            below,
            own,
            own_start,
            above,
            above_start,
        } = mine;
        let (own_start, above_start) = (*own_start, *above_start);
        if w.start < own_start || w.end > own_start + own.len() {
            return None;
        }
        let (left, rest) = own.split_at_mut(w.start - own_start);
        let (mid, right) = rest.split_at_mut(w.len());
        let (left, right): (&[u8], &[u8]) = (left, right);
        let mut out = [None; N];
        for (o, read) in out.iter_mut().zip(reads) {
            let Some((l, r)) = read else { continue };
            let r = r.clone();
            *o = Some(if matches!(l, Loc::Hbm(_)) {
                hbm.read(r)
            } else if on_psum(*l) != on_psum(loc) {
                other.read(r)
            } else if r.end <= own_start {
                &below[r]
            } else if r.start >= above_start {
                &above[r.start - above_start..r.end - above_start]
            } else if r.end <= w.start {
                &left[r.start - own_start..r.end - own_start]
            } else if r.start >= w.end {
                &right[r.start - w.end..r.end - w.end]
            } else {
                return None;
            });
        }
        Some((mid, out))
    }
}

/// The byte range of `n` elements of `size` bytes from element `start` with element stride
/// `stride` (all in one partition).
pub(super) fn span(start: isize, stride: isize, n: usize, size: usize) -> Range<usize> {
    let last = start + stride * (n as isize - 1);
    let (lo, hi) = (start.min(last), start.max(last));
    (lo as usize * size)..((hi as usize + 1) * size)
}

#[cfg(test)]
mod tests {
    use super::{Mems, Region};
    use crate::operand::Loc;

    /// A destination's bytes to write with reads beside it: below and above the owned part,
    /// before and after the destination within it, in the other memory; a read that shares a
    /// byte with the destination, or a destination outside the owned part, gives `None`.
    #[test]
    fn writes_come_with_the_reads_beside_them() {
        let sbuf: Vec<u8> = (0..=255).collect();
        let psum: Vec<u8> = (0..64).map(|b| b + 100).collect();
        let (below, rest) = sbuf.split_at(64);
        let (own, above) = rest.split_at(128);
        let mut own = own.to_vec();
        let mut mems = Mems {
            sbuf: Region::owning(below, &mut own, 64, above, 192),
            psum: Region::shared(&psum),
            hbm: Region::shared(&[]),
        };
        let reads = [
            Some((Loc::Sbuf, 8..12)),
            Some((Loc::Sbuf, 200..204)),
            Some((Loc::Sbuf, 70..74)),
            Some((Loc::Sbuf, 150..154)),
            Some((Loc::Psum, 4..8)),
            None,
        ];
        let (w, got) = mems.write_with(Loc::Sbuf, 100..140, &reads).unwrap();
        assert_eq!(w, &(100..140).collect::<Vec<u8>>()[..]);
        for (read, got) in reads.iter().zip(got) {
            match read {
                Some((Loc::Psum, r)) => {
                    assert_eq!(got.unwrap(), &psum[r.clone()]);
                }
                Some((_, r)) => assert_eq!(got.unwrap(), &sbuf[r.clone()]),
                None => assert!(got.is_none()),
            }
        }
        w.fill(0);
        assert!(own[36..76].iter().all(|&b| b == 0));
        assert_eq!(own[35], 99);
        assert_eq!(own[76], 140);
        let mut mems = Mems {
            sbuf: Region::owning(below, &mut own, 64, above, 192),
            psum: Region::shared(&psum),
            hbm: Region::shared(&[]),
        };
        // Sharing one byte at either end, or the destination partly outside the owned bytes.
        for r in [96..101, 139..150] {
            assert!(
                mems.write_with(Loc::Sbuf, 100..140, &[Some((Loc::Sbuf, r))])
                    .is_none()
            );
        }
        assert!(mems.write_with(Loc::Sbuf, 60..70, &[None]).is_none());
        assert!(mems.write_with(Loc::Sbuf, 190..194, &[None]).is_none());
        assert!(mems.write_with(Loc::Psum, 0..4, &[None]).is_none());
    }
}
