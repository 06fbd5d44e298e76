//! The engines' datapaths: what each instruction does to the memories.
//!
//! Each instruction's operands arrive resolved (a [`crate::operand::Pattern`] per operand,
//! from the loop values) and one tight routine runs over them; nothing is dispatched per
//! element.
//!
//! - [`dma`]: `load`, `store`, `load_transpose2d` between HBM and SBUF, with casts.
//! - [`tensor`]: TensorE's `nc_matmul` and `nc_transpose`, writing PSUM in fp32.
//! - [`vector`]: `tensor_copy` within one dtype or with casts, and `memset`.
//! - [`compute`]: the ALU chains (`tensor_tensor`, `tensor_scalar`, …), activations, `iota`
//!   and the selections, streamed through f32 lanes ([`stream`]).
//! - [`reduce`]: reductions, scans and batch-norm statistics.
//!
//! What they share:
//!
//! - [`access`]: moving elements between two access patterns (the one strided-transfer
//!   routine), and 2-D transposes.
//! - [`stream`]: the driver of elementwise instructions, row by row in chunks of lanes.
//! - [`lanes`]: what the lanes hold, how they are filled from and emptied into the memories,
//!   and the ALU on them.
//! - [`mems`]: SBUF and PSUM as one thread of an instruction sees them.
//! - [`split`]: the one policy for splitting an instruction's rows between two threads.
//! - [`pack_cache`]: packings of matmul operands read straight from input tensors.

pub(crate) mod access;
pub(crate) mod compute;
pub(crate) mod dma;
pub(crate) mod lanes;
pub(crate) mod mems;
pub(crate) mod pack_cache;
pub(crate) mod reduce;
pub(crate) mod split;
pub(crate) mod stream;
pub(crate) mod tensor;
pub(crate) mod vector;

use nki_lang::Target;

use crate::cpu::Isa;
use crate::cpu::matmul::MatmulScratch;
use crate::memory::{Psum, Sbuf};
use crate::worker::Worker;
use access::ChunkBuf;
use pack_cache::PackCache;

/// Elements per chunk: the lanes of a streamed instruction or a reduction hold this many, and
/// a strided transfer moves this many per gather/convert/scatter step.
pub(crate) const CHUNK: usize = 1024;

/// The state the engines work on: the on-chip memories and preallocated scratch.
pub(crate) struct EngineState {
    /// The host code path for conversions and matmuls.
    pub isa: Isa,
    /// The state buffer.
    pub sbuf: Sbuf,
    /// The partial-sum buffer.
    pub psum: Psum,
    /// Chunks for strided transfers.
    pub chunks: ChunkBuf,
    /// Chunks for the worker's half of a strided transfer.
    pub chunks_worker: ChunkBuf,
    /// Packing buffers of the matmul kernel.
    pub mm: MatmulScratch,
    /// Packing buffers of the matmul kernel for the worker's half.
    pub mm_worker: MatmulScratch,
    /// The host thread that runs half of each large instruction (`None`: run serially).
    pub worker: Option<Worker>,
    /// Contiguous copies of matmul operands whose free elements are strided.
    pub packed: tensor::Packed,
    /// Packings of matmul operands read straight from input tensors, for reuse within an
    /// execution (and across launches for device tensors that keep their version): moving
    /// operands, then stationary ones.
    pub packs: (PackCache, PackCache),
    /// The same for the worker's half of a matmul whose operands both come from inputs.
    pub packs_worker: (PackCache, PackCache),
    /// How matmuls of input operands share their rows with the worker.
    pub row_share: split::RowShare,
    /// Lanes of streamed (elementwise) instructions.
    pub lanes: lanes::Lanes,
    /// Lanes of the worker's half of a streamed instruction.
    pub lanes_worker: lanes::Lanes,
    /// Bytes of the host's cache a block of partitions may take when plain runs run
    /// neighbouring partition-local instructions a block at a time (`host::rows`).
    pub block_bytes: usize,
}

/// [`EngineState::block_bytes`] by default: half of a 1 MiB L2 (Zen 3 and 4 have 512 KiB to
/// 1 MiB per core, Intel Xeons 1.25 to 2 MiB).
pub(crate) const BLOCK_BYTES: usize = 512 << 10;

impl EngineState {
    /// Zeroed memories for `target` and a worker thread; every buffer is allocated here, once.
    pub(crate) fn new(target: Target, isa: Isa) -> Self {
        EngineState {
            worker: Worker::start(),
            ..EngineState::single_threaded(target, isa)
        }
    }

    /// [`EngineState::new`] without a worker: every instruction runs on the calling thread.
    pub(crate) fn single_threaded(target: Target, isa: Isa) -> Self {
        EngineState {
            isa,
            sbuf: Sbuf::new(target),
            psum: Psum::new(),
            chunks: ChunkBuf::new(),
            chunks_worker: ChunkBuf::new(),
            mm: MatmulScratch::new(),
            mm_worker: MatmulScratch::new(),
            worker: None,
            packed: tensor::Packed::new(),
            packs: (
                PackCache::new(tensor::CACHED_MOVING),
                PackCache::new(tensor::CACHED_STATIONARY),
            ),
            packs_worker: (
                PackCache::new(tensor::CACHED_MOVING),
                PackCache::new(tensor::CACHED_STATIONARY),
            ),
            row_share: split::RowShare::new(),
            lanes: lanes::Lanes::new(),
            lanes_worker: lanes::Lanes::new(),
            block_bytes: BLOCK_BYTES,
        }
    }
}
