//! The modeled NeuronCore as the language sees it: its fixed sizes, its memories, its engines,
//! and the generations a kernel may target.

use core::fmt;

/// Number of SBUF and PSUM partitions (`nl.tile_size.pmax`).
pub const PARTITIONS: u32 = 128;
/// PSUM bytes per partition: 8 banks of 2 KiB.
pub const PSUM_PARTITION_BYTES: u32 = 16 * 1024;
/// Number of PSUM banks per partition.
pub const PSUM_BANKS: u32 = 8;
/// Bytes of one PSUM bank per partition (`psum_fmax` = 512 fp32 elements).
pub const PSUM_BANK_BYTES: u32 = 2048;
/// Largest free size of `nc_matmul`'s stationary operand (`gemm_stationary_fmax`).
pub const GEMM_STATIONARY_FMAX: u32 = 128;
/// Largest free size of `nc_matmul`'s moving operand (`gemm_moving_fmax`).
pub const GEMM_MOVING_FMAX: u32 = 512;
/// Largest free size `bn_stats` takes (`nl.tile_size.bn_stats_fmax`).
pub const BN_STATS_FMAX: u32 = 512;
/// Alignment of every SBUF tile's byte address within its partitions.
pub const SBUF_ALIGN: u32 = 64;

/// The names of NKI's `nl.tile_size` constants ([`Target::tile_size`] gives their values).
pub const TILE_SIZES: &[&str] = &[
    "pmax",
    "psum_fmax",
    "psum_bank_fmax",
    "psum_bank_fmax_bytes",
    "psum_num_banks",
    "sbuf_fmax",
    "sbuf_fmax_bytes",
    "sbuf_size_bytes",
    "total_available_sbuf_size",
    "gemm_stationary_fmax",
    "gemm_moving_fmax",
    "bn_stats_fmax",
    "psum_min_align",
    "sbuf_min_align",
];

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

    /// Parses NKI's engine names (`nisa.vector_engine`, `vector`, `gpsimd`, ...).
    pub fn from_name(name: &str) -> Option<Engine> {
        Some(match name {
            "tensor" | "tensor_engine" | "Tensor" => Engine::Tensor,
            "vector" | "vector_engine" | "Vector" => Engine::Vector,
            "scalar" | "scalar_engine" | "activation" | "Scalar" => Engine::Scalar,
            "gpsimd" | "gpsimd_engine" | "GpSimd" => Engine::GpSimd,
            "dma" | "dma_engine" | "sync" | "Dma" => Engine::Dma,
            _ => return None,
        })
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// The NeuronCore generation a kernel is compiled for.
///
/// The generations differ in SBUF capacity and in the forms some instructions take; a program
/// compiled for Trn1 runs on any of them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Target {
    /// NeuronCore-v2 (Trn1, Inf2): SBUF of 128 partitions × 192 KiB.
    #[default]
    Trn1,
    /// NeuronCore-v3 (Trn2): SBUF of 128 partitions × 224 KiB.
    Trn2,
    /// NeuronCore-v4 (Trn3): SBUF of 128 partitions × 256 KiB (32 MiB), PSUM as on Trn2.
    Trn3,
}

impl Target {
    /// SBUF bytes per partition.
    pub const fn sbuf_partition_bytes(self) -> u32 {
        match self {
            Target::Trn1 => 192 * 1024,
            Target::Trn2 => 224 * 1024,
            Target::Trn3 => 256 * 1024,
        }
    }

    /// The target's lower-case name (`trn1`, `trn2`, `trn3`).
    pub const fn name(self) -> &'static str {
        match self {
            Target::Trn1 => "trn1",
            Target::Trn2 => "trn2",
            Target::Trn3 => "trn3",
        }
    }

    /// Whether a program compiled for this target runs on a core of `core`'s: a generation
    /// runs the programs of its own and earlier generations (a Trn1 program runs anywhere; a
    /// Trn2 program, which may use Trn2's forms, on Trn2 and Trn3).
    pub const fn runs_on(self, core: Target) -> bool {
        const fn generation(t: Target) -> u8 {
            match t {
                Target::Trn1 => 2,
                Target::Trn2 => 3,
                Target::Trn3 => 4,
            }
        }
        generation(self) <= generation(core)
    }

    /// NKI's `nl.tile_size` constant called `name` for a kernel compiled for this target, or
    /// `None` for a name [`TILE_SIZES`] does not list. The sizes are this module's; the SBUF
    /// ones are the whole partition, since this compiler reserves none of it (NKI's compiler
    /// keeps 16 KiB back). The alignments are those of NKI's tracer (`leanprover/KLR`,
    /// `kernelEnv`): 4 bytes in PSUM, 1 in SBUF, on every generation.
    pub fn tile_size(self, name: &str) -> Option<u64> {
        let sbuf = u64::from(self.sbuf_partition_bytes());
        Some(match name {
            "pmax" => u64::from(PARTITIONS),
            "psum_fmax" | "psum_bank_fmax" => u64::from(PSUM_BANK_BYTES / 4),
            "psum_bank_fmax_bytes" => u64::from(PSUM_BANK_BYTES),
            "psum_num_banks" => u64::from(PSUM_BANKS),
            "sbuf_fmax" => sbuf / 4,
            "sbuf_fmax_bytes" | "total_available_sbuf_size" => sbuf,
            // At most 256 KiB × 128: far from u64::MAX.
            "sbuf_size_bytes" => sbuf.saturating_mul(u64::from(PARTITIONS)),
            "gemm_stationary_fmax" => u64::from(GEMM_STATIONARY_FMAX),
            "gemm_moving_fmax" => u64::from(GEMM_MOVING_FMAX),
            "bn_stats_fmax" => u64::from(BN_STATS_FMAX),
            "psum_min_align" => 4,
            "sbuf_min_align" => 1,
            _ => return None,
        })
    }

    /// Parses `trn1` (or `inf2`) / `trn2` / `trn3`.
    pub fn from_name(name: &str) -> Option<Target> {
        match name {
            "trn1" | "inf2" => Some(Target::Trn1),
            "trn2" => Some(Target::Trn2),
            "trn3" => Some(Target::Trn3),
            _ => None,
        }
    }
}
