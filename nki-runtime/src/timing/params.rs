//! The model's parameters: one table per NeuronCore generation, in one place.
//!
//! Every number comes from `docs/sources/neuroncore-model.md` and carries the key of its source in
//! that document's source table (`ARCH1` = the Trainium/Inferentia2 architecture guide,
//! `ARCH2` = the Trainium2 guide, `ISA` = the "Estimated instruction cost" blocks of the SDK
//! 2.26 `nki.isa` docstrings, `DMABW` = the DMA bandwidth guide, ...). Numbers that the
//! document marks **UNSURE** say so in their source text; `docs/timing.md` lists them.

use core::fmt;

use nki_lang::Target;

/// The NeuronCore generation a parameter table describes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Generation {
    /// NeuronCore-v2: Trn1 and Inf2.
    V2,
    /// NeuronCore-v3: Trn2.
    V3,
    /// NeuronCore-v4: Trn3.
    V4,
}

impl Generation {
    /// The generation of a compile target: Trn1 → v2, Trn2 → v3, Trn3 → v4.
    pub const fn of(target: Target) -> Generation {
        match target {
            Target::Trn1 => Generation::V2,
            Target::Trn2 => Generation::V3,
            Target::Trn3 => Generation::V4,
        }
    }

    /// `NeuronCore-v2 (Trn1)`, `NeuronCore-v3 (Trn2)` or `NeuronCore-v4 (Trn3)`.
    pub const fn name(self) -> &'static str {
        match self {
            Generation::V2 => "NeuronCore-v2 (Trn1)",
            Generation::V3 => "NeuronCore-v3 (Trn2)",
            Generation::V4 => "NeuronCore-v4 (Trn3)",
        }
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One parameter of a table, for listings: its name, value, unit and source.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamEntry {
    /// The field's name in [`Params`].
    pub name: &'static str,
    /// Its value, as text.
    pub value: String,
    /// Its unit.
    pub unit: &'static str,
    /// Where the number comes from (source keys of `neuroncore-model.md`).
    pub source: &'static str,
}

/// A value a parameter can hold, shown in listings.
trait Show {
    fn show(&self) -> String;
}

impl Show for u32 {
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Show for bool {
    fn show(&self) -> String {
        self.to_string()
    }
}

macro_rules! params {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty, $unit:literal, v2 = $v2:expr, v3 = $v3:expr, v4 = $v4:expr, $source:literal;
    )*) => {
        /// The timing model's parameters for one NeuronCore generation. [`Params::TRN1`],
        /// [`Params::TRN2`] and [`Params::TRN3`] are the documented tables; a caller may change
        /// any field to ask "what if" (every field is public).
        #[derive(Clone, Debug, PartialEq)]
        pub struct Params {
            /// The generation the numbers describe.
            pub generation: Generation,
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Params {
            /// NeuronCore-v2 (Trn1).
            pub const TRN1: Params = Params {
                generation: Generation::V2,
                $( $field: $v2, )*
            };

            /// NeuronCore-v3 (Trn2).
            pub const TRN2: Params = Params {
                generation: Generation::V3,
                $( $field: $v3, )*
            };

            /// NeuronCore-v4 (Trn3): published sizes, clocks and rates, derived per-core
            /// shares, and the v3 figure where no Trn3 figure is published. No Trn3
            /// measurement was available to calibrate against.
            pub const TRN3: Params = Params {
                generation: Generation::V4,
                $( $field: $v4, )*
            };

            /// Every parameter with its value, unit and source, in declaration order.
            pub fn entries(&self) -> Vec<ParamEntry> {
                vec![$(
                    ParamEntry {
                        name: stringify!($field),
                        value: Show::show(&self.$field),
                        unit: $unit,
                        source: $source,
                    },
                )*]
            }
        }
    };
}

params! {
    /// TensorE clock.
    pe_mhz: u32, "MHz", v2 = 2800, v3 = 2400, v4 = 2400, "ARCH1 (2.8 GHz) / ARCH2 (2.4 GHz); v4: TRN3ARCH (2.4 GHz)";
    /// VectorE clock.
    vector_mhz: u32, "MHz", v2 = 1120, v3 = 960, v4 = 1200, "ARCH1 (1.12 GHz) / ARCH2 (0.96 GHz); v4: TRN3ARCH (1.2 GHz)";
    /// ScalarE (activation engine) clock.
    scalar_mhz: u32, "MHz", v2 = 1400, v3 = 1200, v4 = 1200, "ARCH1 (1.4 GHz) / ARCH2 (1.2 GHz); v4: TRN3ARCH (1.2 GHz)";
    /// GpSimdE clock.
    gpsimd_mhz: u32, "MHz", v2 = 1400, v3 = 1200, v4 = 1200, "ARCH1 (1.4 GHz) / ARCH2 (1.2 GHz); v4: TRN3ARCH (1.2 GHz)";
    /// Sync engine (sequencer) clock: the NeuronCore base clock the profiler counts in.
    sync_mhz: u32, "MHz", v2 = 1400, v3 = 1200, v4 = 1200, "SCHEMA (neuroncore_cycle_count base clock); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// TensorE MultiplyMoving initiation interval floor: a matmul's II is
    /// `max(N_moving, mm_min_ii_cycles)` PE cycles.
    mm_min_ii_cycles: u32, "PE cycles", v2 = 64, v3 = 64, v4 = 64, "ARCH1 (MM_INIT_LATENCY = 64), model §1.3/§5/§6; v4: as v3 (no Trn3 figure published; UNSURE)";
    /// TensorE cycles each MultiplyMoving pass spends starting, on top of its moving columns:
    /// a matmul's II is `max(N_moving, mm_min_ii_cycles) + mm_start_cycles` per pass.
    mm_start_cycles: u32, "PE cycles", v2 = 64, v3 = 64, v4 = 64, "ARCH1 (MM_INIT_LATENCY = 64) charged per matmul: fit to mm-fully-optimized-trn1 (6.97 ms, HFU 85.24 % = 32,768 × (512 + 64) cycles at 2.8 GHz and the pipeline's fill and drain); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// How much faster a LoadStationary is than a MultiplyMoving of the same free size: LS II =
    /// `max(M, mm_min_ii_cycles) / ls_speedup` PE cycles (32 cycles for M = 128).
    ls_speedup: u32, "×", v2 = 4, v3 = 4, v4 = 4, "ARCH1 + PERF Opt #7 (fast LoadStationary, up to 4× faster; floor UNSURE); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// FP32 matmul cost factor (two passes at twice the cost: 2 LDWEIGHTS + 2 MATMUL).
    pe_fp32_factor: u32, "×", v2 = 4, v3 = 4, v4 = 4, "ARCH1 (FP32 1/4 rate), ISA nc_matmul, X-DN, KOPT v5-pe; v4: derived from TRN3ARCH (79 BF16 / 20 FP32 TFLOPS)";
    /// FP32 TensorE transpose cost factor (v3's transpose mode makes them 2× faster).
    pe_fp32_transpose_factor: u32, "×", v2 = 4, v3 = 2, v4 = 2, "ISA nc_transpose + ARCH1 FP32 rate / ARCH2 transpose mode; v4: as v3 (no Trn3 figure published; UNSURE)";
    /// TensorE pipeline latency: a matmul's result is ready this long after its II ends.
    pe_latency_ns: u32, "ns", v2 = 150, v3 = 150, v4 = 150, "PGFIG fig18/20/21 fit (latency ≈ II + 140–170 ns; UNSURE); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Vector/Scalar/GpSimd instruction floor (`MIN_II`).
    min_ii_cycles: u32, "cycles", v2 = 64, v3 = 64, v4 = 64, "ISA (MIN_II ≈ 64); v3 UNSURE; v4: as v3 (no Trn3 figure published; UNSURE)";
    /// The static overhead of a Vector or Scalar instruction, part of its interval (the
    /// engine is busy, and the profiler shows the instruction active, while it starts its
    /// accesses and drains); its result is visible at the interval's end. A GpSimd
    /// instruction's formula has its own start-up (`gpsimd_start_cycles`): its result is
    /// visible this long after its interval.
    static_overhead_cycles: u32, "cycles", v2 = 100, v3 = 100, v4 = 100, "ARCH1 (~100-cycle static overhead per instruction of back-to-back tiny instructions and RAW-dependent chains); inside the interval: profiler durations include a fixed part (PERF Opt #5a ACTIVATE of 1 element 159 ns; PGFIG fig10 TENSOR_TENSOR 2N + 0.36 µs; X-DN 685 ns for N = 512 on Trn2) and VectorE is 98.71 % / 99.63 % active in mamba-v1-small / mamba-v2, whose Vector instructions form RAW chains; v3 UNSURE; v4: as v3 (no Trn3 figure published; UNSURE)";
    /// GpSimd start-up overhead of every instruction: cost `gpsimd_start_cycles + N`.
    gpsimd_start_cycles: u32, "cycles", v2 = 150, v3 = 150, v4 = 150, "ISA (iota, affine_select: 150 + N); model §1.6/§5; v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Innermost free stride above which an engine's SBUF/PSUM access runs at reduced rate.
    wide_stride_bytes: u32, "bytes", v2 = 16, v3 = 16, v4 = 16, "ARCH1 §1.7 (stride ≤ 16 B: full rate); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Slow-down of an access whose innermost stride exceeds `wide_stride_bytes`.
    wide_stride_factor: u32, "×", v2 = 2, v3 = 2, v4 = 2, "ARCH1 §1.7 (> 16 B: half bandwidth); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Elements per partition VectorE processes per cycle at its base rate (32-bit data).
    vector_elements_per_cycle: u32, "elements", v2 = 1, v3 = 1, v4 = 2, "ARCH1, ARCH2 (one element per lane per cycle); v4: TRN3ARCH (256 elements per cycle for 32-bit types over 128 partitions)";
    /// ScalarE performance mode (v4): 2× `tensor_copy`/`tensor_scalar` on 16-bit floats.
    scalar_perf_mode: bool, "", v2 = false, v3 = false, v4 = true, "TRN3ARCH (ScalarE 2× performance mode for BF16/FP16 tensor_scalar and tensor_copy)";
    /// VectorE performance mode: 4× `tensor_copy`/`tensor_scalar` for SBUF→SBUF 16-bit
    /// contiguous data, 2× when strided or one side in PSUM, 2× `tensor_tensor` on 16-bit SBUF.
    vector_perf_mode: bool, "", v2 = false, v3 = true, v4 = true, "ARCH2 (performance mode, v3 only); v4: TRN3ARCH (512 BF16/FP16 elements per cycle)";
    /// The v2 shared ports: VectorE and GpSimdE cannot access SBUF at the same time, VectorE
    /// and ScalarE cannot access PSUM at the same time (v3 lifts both).
    shared_ports: bool, "", v2 = true, v3 = false, v4 = false, "ARCH1 §1.7 / ARCH2; v4: as v3";
    /// Fixed start-up and tear-down of one NEFF execution, outside the kernel's instructions:
    /// what the profiler's device execution time and `nki.benchmark` add to the kernel's
    /// latency (`Schedule::execution_ps`).
    execution_overhead_ns: u32, "ns", v2 = 33_700, v3 = 33_700, v4 = 33_700, "fit to mamba-v1-small (the tutorial: its 172.93 µs device execution time includes the NEFF's start-up and tear-down, and VectorE is 98.71 % active over the execution between them; the kernel itself models at 139.2 µs); v3, v4: as v2 (no figure published; UNSURE)";
    /// Activation-function table load (`ACT_TABLE_LOAD`) when an activation's function group
    /// differs from the loaded one.
    act_table_load_ns: u32, "ns", v2 = 1300, v3 = 1283, v4 = 1283, "X-DN (1283 ns measured on Trn2); v2 UNSURE (~1.3 µs); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// DMA engines per core.
    dma_engines: u32, "engines", v2 = 16, v3 = 16, v4 = 16, "ARCH1, ARCH2, DMAOV; v4: derived from TRN3ARCH (128 DMA engines / 8 cores)";
    /// Partitions one DMA engine serves in a 128-partition transfer (128 / 16).
    dma_partitions_per_engine: u32, "partitions", v2 = 8, v3 = 8, v4 = 8, "DMAOV, ARCH2; v4: as v3 (no Trn3 figure published; UNSURE)";
    /// DMA queues (tracks in the trace; each static DMA instruction of a kernel gets one).
    dma_queues: u32, "queues", v2 = 16, v3 = 16, v4 = 16, "DMAOV, SCHEMA (16 queues per engine); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Practical bandwidth of one DMA engine.
    dma_engine_bytes_per_us: u32, "B/µs", v2 = 17_000, v3 = 23_000, v4 = 38_000, "DMABW (17 B/ns v2, 23 B/ns v3); v4: derived from TRN3 (4.9 TB/s of DMA per device / 128 engines)";
    /// Fixed latency from a DMA's trigger to its first data (descriptor setup, sync,
    /// semaphore-to-start).
    dma_fixed_latency_ns: u32, "ns", v2 = 1300, v3 = 1000, v4 = 1000, "DMABW (~1300 ns) / DMAOV figs (~1.0 µs trigger→data on Trn2); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Time a DMA trigger occupies its issuing queue (the Sync engine).
    dma_issue_ns: u32, "ns", v2 = 50, v3 = 600, v4 = 600, "v2: a short WRITE (model §2; UNSURE) / ARCH2, DGE (HW DGE ≈ 600 ns); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Per-descriptor overhead, in byte-times of one engine: a descriptor of `d` bytes runs at
    /// `d / (d + overhead)` of peak (2 KiB → 90 %, 4 KiB → 95 %, 256 B → 53 %).
    dma_descriptor_overhead_bytes: u32, "bytes", v2 = 228, v3 = 228, v4 = 228, "fit to DMABW/DMAOV (<256 B overhead bound, ≥2 KiB near peak, ≥4 KiB saturates; UNSURE); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Time each DMA engine of a transfer spends on it beyond moving its descriptors: taking
    /// the transfer from its queue and writing the completion semaphore that every engine
    /// writes, whether it moved data or not (DMAOV).
    dma_transfer_overhead_ns: u32, "ns", v2 = 360, v3 = 50, v4 = 50, "v2: fit to mm-tiled-trn1 (51.80 ms: 32,768 pairs of 32 KiB + 128 KiB loads at ~104 GB/s, 1.58 µs per pair per engine); v3: fit to kopt-v2-tiled-trn2 (39.89 ms, DMA active 99.93 %: 32,768 pairs of 64 KiB + 256 KiB fp32 loads with 512 B and 2 KiB rows); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Whether the DMA engines transpose natively (`load_transpose2d` at
    /// `dma_transpose_percent` of peak); otherwise every element is its own descriptor.
    dma_native_transpose: bool, "", v2 = false, v3 = true, v4 = true, "ARCH2 (DMA transpose) / PERF Opt #8 (v2 'much lower bandwidth'; UNSURE); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Throughput of a native DMA transpose, in percent of the engines' peak.
    dma_transpose_percent: u32, "%", v2 = 90, v3 = 90, v4 = 90, "ARCH2 (HBM→SBUF up to 90 %); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// Throughput of a native DMA transpose within SBUF (`dma_transpose` of an SBUF tile), in
    /// percent of the engines' peak.
    dma_transpose_sbuf_percent: u32, "%", v2 = 50, v3 = 50, v4 = 50, "ARCH2 (SBUF→SBUF up to 50 %); v2: unused (no native transpose); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// HBM bandwidth available to one core (all DMA engines together).
    hbm_bytes_per_us: u32, "B/µs", v2 = 410_000, v3 = 362_000, v4 = 587_000, "derived: TRN1 820 GB/s / 2 cores; TRN2 2.9 TB/s / 8 cores (UNSURE); v4: derived from TRN3ARCH (4.7 TB/s / 8 cores; UNSURE)";
    /// SBUF bytes per partition.
    sbuf_partition_bytes: u32, "bytes", v2 = 196_608, v3 = 229_376, v4 = 262_144, "ARCH1 (192 KiB) / ARCH2 (224 KiB); v4: TRN3ARCH (32 MiB / 128 partitions)";
    /// PSUM banks per partition.
    psum_banks: u32, "banks", v2 = 8, v3 = 8, v4 = 8, "ARCH1, ARCH2; v4: TRN3ARCH (PSUM 2 MiB, as v3)";
    /// Bytes of one PSUM bank per partition.
    psum_bank_bytes: u32, "bytes", v2 = 2048, v3 = 2048, v4 = 2048, "ARCH1 (2 KiB = 512 fp32); v4: as v3 (no Trn3 figure published; UNSURE)";
    /// TensorE FLOPs per PE cycle at full (BF16/FP16/TF32/FP8) rate: 2 × 128 × 128.
    pe_flops_per_cycle: u32, "FLOP", v2 = 32_768, v3 = 32_768, v4 = 32_768, "ARCH1 §1.2 (128×128 PEs, one moving column per cycle); v4: TRN3ARCH (79 BF16 TFLOPS at 2.4 GHz)";
}

impl Params {
    /// The table of a compile target's generation.
    pub fn for_target(target: Target) -> Params {
        match Generation::of(target) {
            Generation::V2 => Params::TRN1,
            Generation::V3 => Params::TRN2,
            Generation::V4 => Params::TRN3,
        }
    }

    /// TensorE peak at full rate, in FLOP/s (91.75 TFLOPS on v2, 78.64 on v3). A clock of 0
    /// MHz counts as 1, as in every time the model computes.
    pub fn peak_flops(&self) -> f64 {
        f64::from(self.pe_flops_per_cycle) * f64::from(self.pe_mhz.max(1)) * 1e6
    }

    /// The roofline's ridge point: peak FLOP/s over HBM bytes/s.
    pub fn ridge_flops_per_byte(&self) -> f64 {
        self.peak_flops() / (f64::from(self.hbm_bytes_per_us.max(1)) * 1e6)
    }
}

impl Default for Params {
    /// [`Params::TRN1`].
    fn default() -> Self {
        Params::TRN1
    }
}

/// Picoseconds of `cycles` at `mhz`, rounded to nearest (saturating; 0 MHz counts as 1).
pub(crate) fn cycles_ps(cycles: u64, mhz: u32) -> u64 {
    let mhz = u128::from(mhz.max(1));
    let ps = (u128::from(cycles) * 1_000_000 + mhz / 2) / mhz;
    u64::try_from(ps).unwrap_or(u64::MAX)
}

/// Picoseconds of `ns` nanoseconds.
pub(crate) fn ns_ps(ns: u32) -> u64 {
    u64::from(ns) * 1000
}

/// Picoseconds to move `bytes` at `bytes_per_us` (rounded up, saturating).
pub(crate) fn bytes_ps(bytes: u64, bytes_per_us: u32) -> u64 {
    let bw = u128::from(bytes_per_us.max(1));
    let ps = (u128::from(bytes) * 1_000_000).div_ceil(bw);
    u64::try_from(ps).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_match_the_published_numbers() {
        // 91.75 TFLOPS (v2), 78.64 TFLOPS (v3): model §1.2.
        assert!((Params::TRN1.peak_flops() / 1e12 - 91.75).abs() < 0.01);
        assert!((Params::TRN2.peak_flops() / 1e12 - 78.64).abs() < 0.01);
        // Trn3: 79 BF16 TFLOPS per NeuronCore-v4 [TRN3ARCH].
        assert!((Params::TRN3.peak_flops() / 1e12 - 78.64).abs() < 0.01);
        assert_eq!(
            Params::TRN3.sbuf_partition_bytes,
            Target::Trn3.sbuf_partition_bytes()
        );
        assert_eq!(
            Params::TRN1.sbuf_partition_bytes,
            Target::Trn1.sbuf_partition_bytes()
        );
        assert_eq!(
            Params::TRN2.sbuf_partition_bytes,
            Target::Trn2.sbuf_partition_bytes()
        );
        // The ridge point of the tutorial: ~222 FLOP/B on Trn1.
        assert!((Params::TRN1.ridge_flops_per_byte() - 223.8).abs() < 1.0);
    }

    #[test]
    fn every_entry_has_a_source() {
        for p in [Params::TRN1, Params::TRN2, Params::TRN3] {
            let e = p.entries();
            assert!(e.len() > 25);
            assert!(e.iter().all(|e| !e.source.is_empty()));
        }
    }

    #[test]
    fn conversions() {
        assert_eq!(cycles_ps(64, 2800), 22_857);
        assert_eq!(cycles_ps(512, 2800), 182_857);
        assert_eq!(bytes_ps(17, 17_000), 1000);
        assert_eq!(cycles_ps(u64::MAX, 1), u64::MAX);
        assert_eq!(bytes_ps(u64::MAX, 1), u64::MAX);
    }
}
