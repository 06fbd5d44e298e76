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
}

impl<'a> Mems<'a> {
    /// Bytes `r` of `loc`'s memory (within one partition).
    pub(crate) fn read(&self, loc: Loc, r: Range<usize>) -> &[u8] {
        self.region(loc).read(r)
    }

    /// `loc`'s memory (SBUF for anything but PSUM).
    pub(super) fn region(&self, loc: Loc) -> &Region<'a> {
        match loc {
            Loc::Psum => &self.psum,
            Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => &self.sbuf,
        }
    }

    /// `loc`'s memory, to write (SBUF for anything but PSUM).
    pub(super) fn region_mut(&mut self, loc: Loc) -> &mut Region<'a> {
        match loc {
            Loc::Psum => &mut self.psum,
            Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => &mut self.sbuf,
        }
    }
}

/// The byte range of `n` elements of `size` bytes from element `start` with element stride
/// `stride` (all in one partition).
pub(super) fn span(start: isize, stride: isize, n: usize, size: usize) -> Range<usize> {
    let last = start + stride * (n as isize - 1);
    let (lo, hi) = (start.min(last), start.max(last));
    (lo as usize * size)..((hi as usize + 1) * size)
}
