//! The NeuronCore's on-chip memories: the state buffer (SBUF) and the partial-sum buffer
//! (PSUM).
//!
//! Both are 128 partitions of bytes, modeled as one flat byte array in which partition `p`
//! starts at byte `p * stride`, the stride being the partition's size and [`PARTITION_PAD`]
//! more. The backing storage is allocated once, zeroed, and 64-byte aligned, so PSUM can also
//! be viewed as `f32`s. Elements are stored in the host's byte order (little-endian on every
//! supported host).

use core::ops::Range;

use bytemuck::{Pod, Zeroable};
use nki_lang::target::{PARTITIONS, PSUM_BANK_BYTES, PSUM_BANKS, PSUM_PARTITION_BYTES};
use nki_lang::{MAX_TILE_RANK, Target};

/// 64 bytes on a 64-byte boundary: the unit of on-chip storage.
#[derive(Copy, Clone, Pod, Zeroable)]
#[repr(C, align(64))]
struct Block([u8; 64]);

/// Host bytes between the end of one partition and the start of the next: 17 cache lines.
///
/// Every partition size (192 KiB, 224 KiB, PSUM's 16 KiB) is a multiple of 16 KiB, so without
/// a gap the same offset of every partition falls in the same sets of the host's L1 and L2
/// caches, and a tile's 128 rows compete for one set's few ways (12 in a Zen 5 L1, 16 in its
/// L2): most of a `[128, 512]` tile was evicted while an instruction used it. An odd number of
/// lines above 16 puts consecutive partitions' rows in different sets at every level (the
/// 1024³ tiled matmul ran 8–9 % faster).
pub const PARTITION_PAD: usize = 17 * 64;

/// 128 partitions of `partition_bytes` bytes each, `stride` bytes apart.
struct Partitions {
    blocks: Vec<Block>,
    partition_bytes: usize,
    stride: usize,
}

impl Partitions {
    fn new(partition_bytes: usize) -> Self {
        debug_assert_eq!(partition_bytes % 64, 0);
        let stride = partition_bytes + PARTITION_PAD;
        let total = PARTITIONS as usize * stride;
        Partitions {
            blocks: vec![Block([0; 64]); total / 64],
            partition_bytes,
            stride,
        }
    }

    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.blocks)
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.blocks)
    }

    fn partition(&self, p: usize) -> Option<&[u8]> {
        if p >= PARTITIONS as usize {
            return None;
        }
        let start = p * self.stride;
        self.bytes().get(start..start + self.partition_bytes)
    }
}

/// Bytes of a partition per entry of [`Sbuf`]'s write clock: a host cache line, so that
/// neighbouring tiles rarely share one.
const CLOCK_COLUMNS: usize = 64;

/// The state buffer: 128 partitions × [`Target::sbuf_partition_bytes`] bytes.
///
/// It also keeps a clock of its writes, by columns of the partitions, so that the host may
/// keep what it derives from SBUF's bytes (packed matmul operands) while they are unchanged;
/// every writable borrow of the bytes counts as a write of the columns its taker names, or of
/// every byte.
pub struct Sbuf {
    mem: Partitions,
    /// The last tick at which each [`CLOCK_COLUMNS`] bytes of every partition were written.
    written: Vec<u64>,
    /// The last tick at which every byte was written.
    all: u64,
    /// Ticks so far.
    clock: u64,
}

impl Sbuf {
    /// A zeroed SBUF of the target's size.
    pub(crate) fn new(target: Target) -> Self {
        let mem = Partitions::new(target.sbuf_partition_bytes() as usize);
        Sbuf {
            written: vec![0; mem.stride.div_ceil(CLOCK_COLUMNS)],
            mem,
            all: 0,
            clock: 0,
        }
    }

    /// The clock's entries of partition-relative byte columns `cols`, or `None` for columns
    /// past a partition's storage.
    fn clock_entries(&self, cols: &Range<usize>) -> Option<Range<usize>> {
        if cols.end > self.mem.stride {
            return None;
        }
        if cols.start >= cols.end {
            return Some(0..0);
        }
        Some(cols.start / CLOCK_COLUMNS..(cols.end - 1) / CLOCK_COLUMNS + 1)
    }

    /// The byte columns, from a partition's start, of the elements of `size` bytes at
    /// `base + Σ i[j] · strides[j]` (element offsets in the flat SBUF) over the grid `dims`,
    /// when rows are whole partitions apart (or one) so that every row's elements are at the
    /// same columns; `None` otherwise or when they reach past a partition's storage.
    pub(crate) fn columns(
        &self,
        size: usize,
        base: isize,
        strides: &[isize; MAX_TILE_RANK],
        dims: &[usize; MAX_TILE_RANK],
    ) -> Option<Range<usize>> {
        let stride = isize::try_from(self.mem.stride).ok()?;
        let size = isize::try_from(size).ok()?;
        let row = strides[0].checked_mul(size)?;
        if dims[0] > 1 && row % stride != 0 {
            return None;
        }
        let start = base.checked_mul(size)?.rem_euclid(stride);
        let (mut lo, mut hi) = (start, start.checked_add(size)?);
        for (&d, &s) in dims.iter().zip(strides).skip(1) {
            let reach = isize::try_from(d.max(1) - 1)
                .ok()?
                .checked_mul(s)?
                .checked_mul(size)?;
            lo = lo.checked_add(reach.min(0))?;
            hi = hi.checked_add(reach.max(0))?;
        }
        (lo >= 0 && hi <= stride).then_some(lo as usize..hi as usize)
    }

    /// The version of byte columns `cols` of every partition (offsets from a partition's
    /// start): unchanged for as long as no writable borrow of them is taken. `None` for
    /// columns past a partition's storage.
    pub(crate) fn version(&self, cols: Range<usize>) -> Option<u64> {
        let entries = self.clock_entries(&cols)?;
        Some(
            self.written[entries]
                .iter()
                .fold(self.all, |v, &w| v.max(w)),
        )
    }

    /// Bytes per partition.
    pub fn partition_bytes(&self) -> usize {
        self.mem.partition_bytes
    }

    /// Bytes from the start of one partition to the next in the modeled SBUF's host memory:
    /// the partition's size and [`PARTITION_PAD`].
    pub fn partition_stride(&self) -> usize {
        self.mem.stride
    }

    /// The bytes of partition `p`, or `None` if `p` ≥ 128.
    pub fn partition(&self, p: usize) -> Option<&[u8]> {
        self.mem.partition(p)
    }

    /// All partitions, [`Sbuf::partition_stride`] bytes apart.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.mem.bytes()
    }

    /// All partitions, [`Sbuf::partition_stride`] bytes apart, writable: a write of every byte
    /// for [`Sbuf::version`].
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        self.clock += 1;
        self.all = self.clock;
        self.mem.bytes_mut()
    }

    /// All partitions, [`Sbuf::partition_stride`] bytes apart, writable, for a caller that
    /// writes only byte columns `cols` of partitions (offsets from a partition's start): a
    /// write of those columns of every partition for [`Sbuf::version`]. Columns not known
    /// (`None`, as [`Sbuf::columns`] gives them) or past a partition's storage count as every
    /// byte.
    pub(crate) fn bytes_mut_within(&mut self, cols: Option<Range<usize>>) -> &mut [u8] {
        match cols.and_then(|c| self.clock_entries(&c)) {
            Some(entries) => {
                self.clock += 1;
                let now = self.clock;
                self.written[entries].fill(now);
                self.mem.bytes_mut()
            }
            None => self.bytes_mut(),
        }
    }
}

/// The partial-sum buffer: 128 partitions × 8 banks × 2 KiB, where TensorE accumulates in fp32.
pub struct Psum {
    mem: Partitions,
}

impl Psum {
    /// Bytes per partition (16 KiB).
    pub const PARTITION_BYTES: usize = PSUM_PARTITION_BYTES as usize;
    /// `f32` elements per partition (4096).
    pub const PARTITION_F32S: usize = Self::PARTITION_BYTES / 4;
    /// Bytes from the start of one partition to the next in the host's storage: the
    /// partition's size and [`PARTITION_PAD`].
    pub const PARTITION_STRIDE: usize = Self::PARTITION_BYTES + PARTITION_PAD;
    /// [`Psum::PARTITION_STRIDE`] in `f32` elements.
    pub const STRIDE_F32S: usize = Self::PARTITION_STRIDE / 4;
    /// Banks per partition.
    pub const BANKS: usize = PSUM_BANKS as usize;
    /// Bytes per bank per partition.
    pub const BANK_BYTES: usize = PSUM_BANK_BYTES as usize;

    /// A zeroed PSUM.
    pub(crate) fn new() -> Self {
        Psum {
            mem: Partitions::new(Self::PARTITION_BYTES),
        }
    }

    /// The bytes of partition `p`, or `None` if `p` ≥ 128.
    pub fn partition(&self, p: usize) -> Option<&[u8]> {
        self.mem.partition(p)
    }

    /// All partitions, [`Psum::PARTITION_STRIDE`] bytes apart.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.mem.bytes()
    }

    /// All partitions, [`Psum::PARTITION_STRIDE`] bytes apart, writable.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        self.mem.bytes_mut()
    }

    /// All partitions as `f32`s (partition `p` starts at element `p * Psum::STRIDE_F32S`).
    pub(crate) fn f32s(&self) -> &[f32] {
        bytemuck::cast_slice(&self.mem.blocks)
    }

    /// All partitions as `f32`s, writable (partition `p` starts at element
    /// `p * Psum::STRIDE_F32S`).
    pub(crate) fn f32s_mut(&mut self) -> &mut [f32] {
        bytemuck::cast_slice_mut(&mut self.mem.blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_alignment() {
        let s = Sbuf::new(Target::Trn1);
        assert_eq!(s.bytes().len(), 128 * (192 * 1024 + PARTITION_PAD));
        assert_eq!(s.bytes().as_ptr() as usize % 64, 0);
        assert_eq!(s.partition(127).unwrap().len(), 192 * 1024);
        assert_eq!(s.partition_stride() % 64, 0);
        assert!(s.partition(128).is_none());
        assert_eq!(Sbuf::new(Target::Trn2).partition_bytes(), 224 * 1024);
        let mut p = Psum::new();
        assert_eq!(p.bytes().len(), 128 * Psum::PARTITION_STRIDE);
        assert_eq!(p.f32s_mut().len(), 128 * Psum::STRIDE_F32S);
        assert_eq!(p.partition(127).unwrap().len(), 16 * 1024);
        assert_eq!(Psum::BANKS * Psum::BANK_BYTES, Psum::PARTITION_BYTES);
    }

    /// A range's version changes with every writable borrow that may reach it and with no
    /// other.
    #[test]
    fn versions_change_with_the_writes_that_reach_them() {
        let mut s = Sbuf::new(Target::Trn1);
        let stride = s.partition_stride();
        let (a, b) = (0..1024, 8192..9216);
        let v = |s: &Sbuf, r: &Range<usize>| s.version(r.clone()).unwrap();
        let (a0, b0) = (v(&s, &a), v(&s, &b));
        s.bytes_mut_within(Some(a.clone()))[0] = 1;
        assert_ne!(v(&s, &a), a0, "a write of the range");
        assert_eq!(v(&s, &b), b0, "a write of other columns");
        let a1 = v(&s, &a);
        s.bytes_mut_within(Some(1000..8200));
        assert_ne!(v(&s, &a), a1, "overlapping at the start");
        assert_ne!(v(&s, &b), b0, "overlapping at the end");
        let (a2, b2) = (v(&s, &a), v(&s, &b));
        s.bytes_mut_within(Some(5000..5000));
        assert_eq!((v(&s, &a), v(&s, &b)), (a2, b2), "no columns");
        s.bytes_mut();
        assert!(v(&s, &a) > a2 && v(&s, &b) > b2, "every byte");
        let (a4, b4) = (v(&s, &a), v(&s, &b));
        s.bytes_mut_within(None);
        assert!(
            v(&s, &a) > a4 && v(&s, &b) > b4,
            "columns not known: every byte"
        );
        let (a3, b3) = (v(&s, &a), v(&s, &b));
        s.bytes_mut_within(Some(0..stride + 1));
        assert!(
            v(&s, &a) > a3 && v(&s, &b) > b3,
            "past a partition: every byte"
        );
        assert_eq!(s.version(0..stride + 1), None);
        assert!(s.version(stride - 64..stride).is_some());
    }

    /// The columns of a pattern: its rows' hull, when rows are whole partitions apart.
    #[test]
    fn patterns_columns() {
        let s = Sbuf::new(Target::Trn1);
        let p = (s.partition_stride() / 4) as isize; // f32 elements per partition
        // [128, 4, 16] f32 at column 64 of partition 2, its two free axes row-major.
        let dims = [128, 4, 16, 1, 1];
        assert_eq!(
            s.columns(4, 2 * p + 16, &[p, 16, 1, 0, 0], &dims),
            Some(64..64 + 4 * 64)
        );
        // Reversed along the free axis: the same bytes.
        assert_eq!(
            s.columns(4, 2 * p + 16 + 63, &[p, -16, -1, 0, 0], &dims),
            Some(64..64 + 4 * 64)
        );
        // Rows half a partition apart, or reaching past a partition: unknown.
        assert_eq!(s.columns(4, 0, &[p / 2, 16, 1, 0, 0], &dims), None);
        assert_eq!(s.columns(4, p - 8, &[p, 16, 1, 0, 0], &dims), None);
        // One row: any row stride.
        let one = [1, 4, 16, 1, 1];
        assert_eq!(s.columns(2, 7, &[3, 16, 1, 0, 0], &one), Some(14..14 + 128));
    }
}
