//! The NeuronCore's on-chip memories: the state buffer (SBUF) and the partial-sum buffer
//! (PSUM).
//!
//! Both are 128 partitions of bytes, modeled as one flat byte array in which partition `p`
//! starts at byte `p * stride`, the stride being the partition's size and [`PARTITION_PAD`]
//! more. The backing storage is allocated once, zeroed, and 64-byte aligned, so PSUM can also
//! be viewed as `f32`s. Elements are stored in the host's byte order (little-endian on every
//! supported host).

use bytemuck::{Pod, Zeroable};
use nki_lang::Target;
use nki_lang::target::{PARTITIONS, PSUM_BANK_BYTES, PSUM_BANKS, PSUM_PARTITION_BYTES};

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

/// The state buffer: 128 partitions × [`Target::sbuf_partition_bytes`] bytes.
pub struct Sbuf {
    mem: Partitions,
}

impl Sbuf {
    /// A zeroed SBUF of the target's size.
    pub(crate) fn new(target: Target) -> Self {
        Sbuf {
            mem: Partitions::new(target.sbuf_partition_bytes() as usize),
        }
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

    /// All partitions, [`Sbuf::partition_stride`] bytes apart, writable.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        self.mem.bytes_mut()
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
}
