//! The instruction set: plain-data instructions with their operands' access patterns.

use core::fmt;

use crate::affine::Affine;
use crate::shape::{Extent, MAX_TENSOR_RANK, MAX_TILE_RANK, TileShape};

/// Where a tensor or tile lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Memory {
    /// Device memory: kernel inputs and outputs (`nl.shared_hbm`).
    Hbm,
    /// The state buffer: 128 partitions, the engines' working memory (`nl.sbuf`).
    Sbuf,
    /// The partial-sum buffer: 128 partitions × 8 banks of 2 KiB, written by TensorE (`nl.psum`).
    Psum,
}

impl Memory {
    /// NKI's name of the address space (`hbm`, `sbuf`, `psum`).
    pub const fn name(self) -> &'static str {
        match self {
            Memory::Hbm => "hbm",
            Memory::Sbuf => "sbuf",
            Memory::Psum => "psum",
        }
    }
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The NeuronCore engine that runs an instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// The 128×128 systolic array: `nc_matmul`, transposes.
    Tensor,
    /// The vector engine: elementwise arithmetic, copies, memsets, reductions.
    Vector,
    /// The scalar (activation) engine.
    Scalar,
    /// The general-purpose SIMD engine.
    GpSimd,
    /// The DMA queues: loads and stores between HBM and SBUF.
    Dma,
    /// The sync engine: a sequencer without a datapath; runs loop control.
    Sync,
}

impl Engine {
    /// Short name used in listings and traces.
    pub const fn name(self) -> &'static str {
        match self {
            Engine::Tensor => "Tensor",
            Engine::Vector => "Vector",
            Engine::Scalar => "Scalar",
            Engine::GpSimd => "GpSimd",
            Engine::Dma => "DMA",
            Engine::Sync => "Sync",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// The kind of a loop, with NKI's meaning.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LoopKind {
    /// `affine_range`: iterations are independent (except PSUM accumulation) and may overlap.
    Affine,
    /// `sequential_range`: iterations run in order; loop-carried dependencies are allowed.
    Sequential,
}

impl LoopKind {
    /// The NKI iterator's name.
    pub const fn name(self) -> &'static str {
        match self {
            LoopKind::Affine => "affine_range",
            LoopKind::Sequential => "sequential_range",
        }
    }
}

/// How `nc_matmul` writes its PSUM destination.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PsumWrite {
    /// Overwrite the destination (a fresh result tile).
    Overwrite,
    /// Add to the destination (a later `+=` of an accumulation group).
    Accumulate,
    /// The first `+=` of an accumulation group: overwrite when every loop in the bit mask
    /// (bit `d` = loop at depth `d`) is in its first iteration, add otherwise. This is the
    /// hardware's accumulation group for `acc += nc_matmul(...)` over a zeroed PSUM tile.
    Group {
        /// Loops (by depth) the accumulation group spans.
        loops: u8,
    },
}

/// A view of an on-chip tile: a partition range and an affine pattern over its free elements.
///
/// The view's element `(p, f0, f1, ...)` is at partition `part_start + p` and free element
/// `offset + Σ stride[j] · fj` (in elements, row-major within the partition).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileView {
    /// Index of the tile in the program's tile table.
    pub tile: u16,
    /// First partition of the view.
    pub part_start: u32,
    /// The view's shape: partitions, then free sizes.
    pub shape: TileShape,
    /// Free-element offset of the view's first element.
    pub offset: Affine,
    /// Element stride of each free dimension of the view (`strides[j]` for `shape.free()[j]`).
    pub strides: [i64; MAX_TILE_RANK - 1],
}

impl TileView {
    /// The whole of tile `tile` of shape `shape`: every partition, free elements row-major.
    pub fn whole(tile: u16, shape: &TileShape) -> TileView {
        let mut strides = [0i64; MAX_TILE_RANK - 1];
        let free = shape.free();
        let mut s = 1i64;
        for j in (0..free.len()).rev() {
            strides[j] = s;
            s *= free[j] as i64;
        }
        TileView {
            tile,
            part_start: 0,
            shape: *shape,
            offset: Affine::ZERO,
            strides,
        }
    }
}

/// One axis of an HBM access: `index = start + Σ grid[j] · t_j`, where `t_j` runs over the
/// `j`-th dimension of the accessed tile shape (`t_0` = partition).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct AxisIndex {
    /// Index of the access's first element on this axis.
    pub start: Affine,
    /// Coefficient of each tile dimension.
    pub grid: [i64; MAX_TILE_RANK],
}

/// A tile-shaped access into an HBM tensor, one affine index per tensor axis.
///
/// Indices stay per axis (not flattened) because a tensor's strides depend on symbolic
/// dimensions known only at launch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct HbmAccess {
    /// Index of the tensor in the program's tensor table.
    pub tensor: u8,
    /// Rank of the tensor.
    pub rank: u8,
    /// One index per tensor axis (`axes[..rank]`).
    pub axes: [AxisIndex; MAX_TENSOR_RANK],
}

impl HbmAccess {
    /// The used axes.
    pub fn axes(&self) -> &[AxisIndex] {
        &self.axes[..self.rank as usize]
    }
}

/// An operation with its operands.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Op {
    /// Start of a loop; its body runs up to the matching [`Op::LoopEnd`] at index `end`.
    LoopBegin {
        /// `affine_range` or `sequential_range`.
        kind: LoopKind,
        /// Number of iterations.
        trip: Extent,
        /// Index of the induction variable's name in [`crate::Program::loop_vars`].
        var: u16,
        /// Index of the matching `LoopEnd`.
        end: u32,
    },
    /// End of the loop that begins at `begin`.
    LoopEnd {
        /// Index of the matching `LoopBegin`.
        begin: u32,
    },
    /// `load`: HBM → SBUF, casting to the tile's dtype.
    Load {
        /// The source access.
        src: HbmAccess,
        /// The destination view.
        dst: TileView,
    },
    /// `store`: SBUF → HBM, casting to the tensor's dtype.
    Store {
        /// The destination access.
        dst: HbmAccess,
        /// The source view.
        src: TileView,
    },
    /// `nc_matmul`: `dst = stationaryᵀ · moving`, fp32 accumulation in PSUM.
    Matmul {
        /// `[K, M]` in SBUF.
        stationary: TileView,
        /// `[K, N]` in SBUF.
        moving: TileView,
        /// `[M, N]` fp32 in PSUM.
        dst: TileView,
        /// Overwrite or accumulate.
        write: PsumWrite,
    },
    /// `nc_transpose` on TensorE: `dst[f, p] = src[p, f]`, SBUF → PSUM (fp32).
    Transpose {
        /// `[P, F]` in SBUF.
        src: TileView,
        /// `[F, P]` in PSUM.
        dst: TileView,
    },
    /// `copy` / `tensor_copy`: elementwise copy with a cast through fp32.
    Copy {
        /// The source view (SBUF or PSUM).
        src: TileView,
        /// The destination view (SBUF or PSUM).
        dst: TileView,
    },
    /// `memset`: fill a view with a constant.
    Memset {
        /// The destination view.
        dst: TileView,
        /// The value, rounded to the destination's dtype.
        value: f32,
    },
}

impl Op {
    /// The instruction's mnemonic in listings.
    pub const fn mnemonic(&self) -> &'static str {
        match self {
            Op::LoopBegin { .. } => "loop",
            Op::LoopEnd { .. } => "end",
            Op::Load { .. } => "load",
            Op::Store { .. } => "store",
            Op::Matmul { .. } => "nc_matmul",
            Op::Transpose { .. } => "nc_transpose",
            Op::Copy { .. } => "tensor_copy",
            Op::Memset { .. } => "memset",
        }
    }

    /// The engine NKI runs this operation on.
    pub const fn default_engine(&self) -> Engine {
        match self {
            Op::LoopBegin { .. } | Op::LoopEnd { .. } => Engine::Sync,
            Op::Load { .. } | Op::Store { .. } => Engine::Dma,
            Op::Matmul { .. } | Op::Transpose { .. } => Engine::Tensor,
            Op::Copy { .. } | Op::Memset { .. } => Engine::Vector,
        }
    }
}

/// One instruction: an operation, the engine that runs it, and the kernel source line it
/// came from (0 when unknown).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Instr {
    /// The engine that runs it ([`Engine::Dma`] for loads and stores, [`Engine::Sync`] for
    /// loop control).
    pub engine: Engine,
    /// Line of the kernel source that produced the instruction.
    pub line: u32,
    /// The operation.
    pub op: Op,
}
