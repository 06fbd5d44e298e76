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
//! - [`rng`]: the random number generator (`rand`, `random_seed`, `dropout`).
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
pub(crate) mod dma_transpose;
pub(crate) mod gather;
pub(crate) mod indirect;
pub(crate) mod lanes;
pub(crate) mod mems;
pub(crate) mod pack_cache;
pub(crate) mod phases;
pub(crate) mod reduce;
pub(crate) mod rng;
pub(crate) mod split;
pub(crate) mod stream;
pub(crate) mod tensor;
pub(crate) mod top8;
pub(crate) mod vector;

use nki_lang::Target;

use crate::cpu::Isa;
use crate::cpu::matmul::MatmulScratch;
use crate::memory::{Psum, Sbuf};
use crate::operand::Resolved;
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
    /// The phases of a column-strided region that a group of matmuls reads (`host::strided`).
    pub phases: phases::Phases,
    /// The scratch of such a group run in one pass by the narrow matmul kernel.
    pub group: tensor::GroupScratch,
    /// The packings of a chain of matmuls run in one pass on this thread.
    pub chain: tensor::ChainScratch,
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
    /// Whether the instruction about to run may split its rows with a far worker
    /// (`worker::Reach::Far`): set by a plain run's host plan (`host`), which knows who reads
    /// a load's tile; `true` otherwise.
    pub far_split: bool,
    /// The random number generator's state in the running instance (`rng`).
    pub rng: rng::RngState,
}

/// SBUF's bytes, writable, for an instruction that writes only the elements of `dst` there:
/// a write of `dst`'s columns for SBUF's clock (`Sbuf::version`) when they are known, else of
/// every byte.
pub(crate) fn sbuf_for<'a>(sbuf: &'a mut Sbuf, dst: &Resolved) -> &'a mut [u8] {
    let size = dst.dtype.size() as usize;
    let cols = sbuf.columns(size, dst.pattern.base, &dst.pattern.strides, &dst.dims);
    sbuf.bytes_mut_within(cols)
}

/// [`EngineState::block_bytes`] by default: the host's L2 cache per core, as Linux reports it
/// for the first CPU (`/sys/devices/system/cpu/cpu0/cache/index2/size`), else 1 MiB (Zen 3
/// has 512 KiB per core, Zen 4 and 5 1 MiB, recent Intel Xeons 2 MiB); read once per process.
/// Two host threads split each block's instructions, so each core's L2 holds half a block; on
/// a Zen 5 guest the whole L2 beat half of it on every blocked tutorial kernel with the worker
/// near (LayerNorm 24.0 against 26.8 ms, the pooling 7.9 against 10.6 ms, RoPE 0.52 against
/// 0.76 ms: `docs/performance.md`).
pub(crate) fn block_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let l2 = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/size")
            .ok()
            .and_then(|s| cache_size(s.trim()))
            .unwrap_or(1 << 20);
        l2.clamp(64 << 10, 16 << 20)
    })
}

/// A cache size as Linux's sysfs writes it: `2048K`, `1M`, or bytes.
fn cache_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1usize << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

impl EngineState {
    /// Zeroed memories for `target` and a worker thread; every buffer is allocated here, once.
    pub(crate) fn new(target: Target, isa: Isa) -> Self {
        let worker = Worker::start();
        let packs_worker = if worker.is_some() {
            tensor::pack_caches()
        } else {
            (
                PackCache::moving_operands(0),
                PackCache::stationary_operands(0),
            )
        };
        EngineState {
            worker,
            packs_worker,
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
            phases: phases::Phases::default(),
            group: tensor::GroupScratch::default(),
            chain: tensor::ChainScratch::default(),
            packs: tensor::pack_caches(),
            // Caches without slots: the worker thread's engines, whose matmul halves alone
            // read them, come with the worker.
            packs_worker: (
                PackCache::moving_operands(0),
                PackCache::stationary_operands(0),
            ),
            row_share: split::RowShare::new(),
            lanes: lanes::Lanes::new(),
            lanes_worker: lanes::Lanes::new(),
            block_bytes: block_bytes(),
            far_split: true,
            rng: rng::RngState::default(),
        }
    }
}

#[cfg(test)]
mod cache_tests {
    #[test]
    fn sysfs_cache_sizes() {
        assert_eq!(super::cache_size("2048K"), Some(2 << 20));
        assert_eq!(super::cache_size("1M"), Some(1 << 20));
        assert_eq!(super::cache_size("524288"), Some(512 << 10));
        assert_eq!(super::cache_size(""), None);
        assert_eq!(super::cache_size("xK"), None);
        assert!((64 << 10..=16 << 20).contains(&super::block_bytes()));
    }
}
