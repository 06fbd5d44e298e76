//! The phases of a column-strided SBUF region, de-interleaved once for the matmuls that read
//! them.
//!
//! A matmul whose operand is a view with a column step (NKI Library decode attention's
//! `k_sb.slice(1, offset, …, step)`: each of 80 matmuls takes every 80th column of one tile,
//! starting one column further) gathers its `K × M` elements one by one, each from a cache line
//! of its own, before packing them. The matmuls of such a group together read every column of
//! the region once; de-interleaved in one pass, row by row (each row's source and its phases'
//! rows stay in L1), phase `o` is the contiguous `[K, M]` operand of the matmul at offset `o`.
//! The host step that finds a group (`host::strided`) fills [`Phases`] before its first matmul
//! and clears it after its last, and checks that nothing in between writes the region: a
//! matmul then reads the same elements from the phases as it would from SBUF.

use core::ops::Range;

use nki_lang::DType;

use crate::cpu::Isa;
use crate::cpu::matmul::Operand;
use crate::cpu::transpose::{Matrix, transpose_elements};
use crate::memory::Sbuf;
use crate::operand::{Loc, Resolved};
use crate::worker::Worker;

/// Most bytes the de-interleaved phases may take (a decode attention's `[128, 10240]` bf16
/// key tile is 2.5 MiB).
pub(crate) const MAX_BYTES: usize = 8 << 20;

/// Fewest bytes of phases split with the worker: a smaller pass takes a few microseconds, not
/// much more than handing half of it over and waiting for it.
const MIN_SPLIT_BYTES: usize = 64 << 10;

/// A column-strided region of SBUF: phase `o` (`o < phases`) is the `[rows, cols]` view at
/// element `base + o + p · partition_stride + j · stride`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    /// The elements' dtype.
    pub dtype: DType,
    /// Element offset of phase 0's element `[0, 0]` in SBUF.
    pub base: isize,
    /// Elements from one partition to the next.
    pub partition_stride: isize,
    /// Partitions (the matmul's `K`).
    pub rows: usize,
    /// Elements from one column of a phase to the next.
    pub stride: usize,
    /// Columns of each phase.
    pub cols: usize,
    /// Phases de-interleaved (at most `stride`).
    pub phases: usize,
}

impl Region {
    /// Bytes from one de-interleaved phase to the next: its elements, and a cache line, so that
    /// the phases' rows do not all fall in the same cache sets (`rows · cols` elements is a
    /// power of two in the usual shapes).
    fn pitch(&self) -> usize {
        self.rows
            .saturating_mul(self.cols)
            .saturating_mul(self.dtype.size() as usize)
            .saturating_add(64)
    }

    /// Bytes of the de-interleaved phases.
    pub(crate) fn bytes(&self) -> usize {
        self.pitch().saturating_mul(self.phases)
    }

    /// The phase `r` is, when it is one of this region's: a view of `rows` partitions and at
    /// most `cols` columns `stride` apart, starting `o < phases` elements after the base.
    pub(crate) fn phase_of(&self, r: &Resolved) -> Option<usize> {
        let (d, s) = (r.dims, r.pattern.strides);
        let o = usize::try_from(r.pattern.base.checked_sub(self.base)?).ok()?;
        let columns_ok = d[1] == 1 || usize::try_from(s[1]) == Ok(self.stride);
        (r.loc == Loc::Sbuf
            && r.dtype == self.dtype
            && d[0] == self.rows
            && (d[0] == 1 || s[0] == self.partition_stride)
            && columns_ok
            && d[1] <= self.cols
            && d[2..].iter().all(|&n| n == 1)
            && o < self.phases)
            .then_some(o)
    }
}

/// The de-interleaved phases of one region (none between groups).
#[derive(Default)]
pub(crate) struct Phases {
    /// Phase `o`, row `p`, column `j` at byte `o · pitch + (p · cols + j) · size`.
    buf: Vec<u8>,
    region: Option<Region>,
}

impl Phases {
    /// De-interleaves `region` of `sbuf` (within it and at most [`MAX_BYTES`]: the caller's
    /// checks; a region past SBUF's end is left unfilled, and no operand is then taken from
    /// it). The buffer grows to the largest region once and is kept. With `worker` (and at
    /// least [`MIN_SPLIT_BYTES`] to move), the worker fills the second half of the phases
    /// while this thread fills the first: each half is its own byte range of the buffer, and
    /// each reads mostly cache lines of its own (a row's columns are `stride` elements apart,
    /// its phases' elements adjacent).
    pub(crate) fn fill(
        &mut self,
        isa: Isa,
        sbuf: &Sbuf,
        region: Region,
        worker: Option<&mut Worker>,
    ) {
        self.region = None;
        let size = region.dtype.size() as usize;
        let src = sbuf.bytes();
        let row_elems = (region.cols.saturating_sub(1))
            .saturating_mul(region.stride)
            .saturating_add(region.phases);
        let last = isize::try_from(region.rows.saturating_sub(1))
            .ok()
            .and_then(|r| region.partition_stride.checked_mul(r))
            .and_then(|r| region.base.checked_add(r))
            .and_then(|b| b.checked_add(isize::try_from(row_elems).ok()?));
        let fits = region.base >= 0
            && last.is_some_and(|l| usize::try_from(l).is_ok_and(|l| l * size <= src.len()))
            && region.bytes() <= MAX_BYTES;
        if !fits || region.rows == 0 || region.cols == 0 || region.phases == 0 {
            return;
        }
        if self.buf.len() < region.bytes() {
            self.buf.resize(region.bytes(), 0);
        }
        let run = |dst: &mut [u8], phases: Range<usize>| {
            deinterleave(isa, src, dst, &region, phases);
        };
        let buf = &mut self.buf[..region.bytes()];
        let half = region.phases / 2;
        let worker = worker.filter(|_| half > 0 && region.bytes() >= MIN_SPLIT_BYTES);
        match worker.and_then(crate::worker::near) {
            Some(w) => {
                let (lo, hi) = buf.split_at_mut(half * region.pitch());
                w.join(|| run(lo, 0..half), || run(hi, half..region.phases));
            }
            None => run(buf, 0..region.phases),
        }
        self.region = Some(region);
    }

    /// Forgets the region (its SBUF may be written from here on).
    pub(crate) fn clear(&mut self) {
        self.region = None;
    }

    /// `r` as a matmul operand read from the phases, when it is one of the region's.
    pub(crate) fn operand(&self, r: &Resolved) -> Option<Operand<'_>> {
        let region = self.region.as_ref()?;
        let o = region.phase_of(r)?;
        let size = region.dtype.size() as usize;
        Some(Operand {
            data: &self.buf,
            dtype: region.dtype,
            offset: o * region.pitch(),
            row_stride: region.cols * size,
            rows: region.rows,
            cols: r.dims[1],
        })
    }
}

/// Phases `phases` (row `p`, column `j` of phase `o`) of `region` from `src` into `dst`, which
/// starts at the first of them, row by row: row `p`'s `cols × stride` elements, as a matrix of
/// `cols` rows, transposed into the phases' rows `p` (`cpu::transpose`: in register tiles
/// where the host has them; the row stays in L1).
fn deinterleave(isa: Isa, src: &[u8], dst: &mut [u8], region: &Region, phases: Range<usize>) {
    let size = region.dtype.size() as usize;
    let pitch = region.pitch() / size;
    for p in 0..region.rows {
        // In bounds: `fill` checked the region's last element.
        let from = (region.base + p as isize * region.partition_stride) as usize;
        let s = Matrix {
            at: from + phases.start,
            stride: region.stride,
        };
        let d = Matrix {
            at: p * region.cols,
            stride: pitch,
        };
        transpose_elements(isa, src, s, dst, d, region.cols, phases.len(), size);
    }
}

#[cfg(test)]
mod tests {
    use nki_lang::{MAX_TILE_RANK, Target};

    use super::*;
    use crate::operand::Pattern;

    /// A view of `rows` partitions and `cols` columns `stride` apart at element `base`.
    fn view(
        dtype: DType,
        base: isize,
        ps: isize,
        rows: usize,
        cols: usize,
        stride: isize,
    ) -> Resolved {
        let mut strides = [0isize; MAX_TILE_RANK];
        (strides[0], strides[1]) = (ps, stride);
        Resolved {
            slot: 1,
            dir: nki_lang::Dir::Read,
            loc: Loc::Sbuf,
            dtype,
            pattern: Pattern { base, strides },
            dims: [rows, cols, 1, 1, 1],
        }
    }

    /// Filled in two halves with the worker (when the host has one and it is near), on every
    /// path the host supports, the phases hold the bytes the portable path gives on one
    /// thread, for an odd number of phases too.
    #[test]
    fn split_fill_is_the_serial_fill() {
        let mut sbuf = Sbuf::new(Target::Trn2);
        for (i, b) in sbuf.bytes_mut().iter_mut().enumerate() {
            *b = (i.wrapping_mul(2_654_435_761) >> 9) as u8;
        }
        let mut worker = crate::worker::Worker::start();
        for (dtype, phases) in [(DType::Bf16, 80), (DType::F32, 7), (DType::U8, 33)] {
            let size = dtype.size() as usize;
            let ps = (sbuf.partition_stride() / size) as isize;
            let region = Region {
                dtype,
                base: 11,
                partition_stride: ps,
                rows: 128,
                stride: phases,
                cols: 96,
                phases,
            };
            assert!(region.bytes() >= MIN_SPLIT_BYTES);
            let mut serial = Phases::default();
            serial.fill(Isa::Portable, &sbuf, region, None);
            for isa in Isa::supported() {
                let mut split = Phases::default();
                split.fill(isa, &sbuf, region, worker.as_mut());
                assert!(split.region.is_some());
                assert_eq!(
                    serial.buf[..region.bytes()],
                    split.buf[..region.bytes()],
                    "{isa:?} {dtype:?}"
                );
            }
        }
    }

    /// Every phase's operand holds, element for element, the strided view's bytes in SBUF, for
    /// each element size; views of other shapes, strides or phases are not taken.
    #[test]
    fn each_phase_is_its_strided_view() {
        let mut sbuf = Sbuf::new(Target::Trn2);
        for (i, b) in sbuf.bytes_mut().iter_mut().enumerate() {
            *b = (i.wrapping_mul(2_654_435_761) >> 7) as u8;
        }
        for dtype in [DType::U8, DType::Bf16, DType::F32] {
            let size = dtype.size() as usize;
            let ps = (sbuf.partition_stride() / size) as isize;
            let (rows, cols, stride, phases, base) = (5, 7, 6usize, 5usize, 3isize);
            let region = Region {
                dtype,
                base,
                partition_stride: ps,
                rows,
                stride,
                cols,
                phases,
            };
            let mut ph = Phases::default();
            ph.fill(Isa::detect(), &sbuf, region, None);
            for o in 0..phases {
                let r = view(dtype, base + o as isize, ps, rows, cols, stride as isize);
                let op = ph.operand(&r).expect("a phase of the region");
                for p in 0..rows {
                    for j in 0..cols {
                        let at =
                            ((base + o as isize + p as isize * ps) as usize + j * stride) * size;
                        let got = op.offset + p * op.row_stride + j * size;
                        assert_eq!(&op.data[got..got + size], &sbuf.bytes()[at..at + size]);
                    }
                }
            }
            let other = [
                view(
                    dtype,
                    base + phases as isize,
                    ps,
                    rows,
                    cols,
                    stride as isize,
                ),
                view(dtype, base - 1, ps, rows, cols, stride as isize),
                view(dtype, base, ps, rows, cols, stride as isize + 1),
                view(dtype, base, ps, rows - 1, cols, stride as isize),
                view(dtype, base, ps, rows, cols + 1, stride as isize),
            ];
            assert!(other.iter().all(|r| ph.operand(r).is_none()));
            ph.clear();
            assert!(
                ph.operand(&view(dtype, base, ps, rows, cols, stride as isize))
                    .is_none()
            );
        }
    }
}
