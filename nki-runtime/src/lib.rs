//! Executes NKI programs on a modeled NeuronCore.
//!
//! # The modeled core
//!
//! A [`NeuronCore`] has the memories a NeuronCore exposes to NKI kernels:
//!
//! - **HBM**, the device memory: kernel inputs and outputs, here host buffers
//!   ([`DeviceTensor`], or any slice bound through [`HbmIn`] / [`HbmOut`]), row-major.
//! - **SBUF**, the state buffer: 128 partitions × 192 KiB (Trn1) or 224 KiB (Trn2).
//! - **PSUM**, the partial-sum buffer: 128 partitions × 8 banks × 2 KiB, where TensorE
//!   accumulates in fp32.
//!
//! and its engines: DMA (`load`, `store`), TensorE (`nc_matmul`, `nc_transpose`), VectorE,
//! ScalarE and GpSimd (the elementwise, activation, reduction, scan and selection operations
//! of NKI's ISA). A kernel is a [`nki_lang::Program`] (plain data, checked when it
//! was built, tile addresses assigned); [`Kernel::bind`] checks a launch's tensors against the
//! program's signature and launch constraints, and [`NeuronCore::execute`] runs it. Every
//! instruction runs to completion before the next one starts: the engines' overlap is a
//! matter of time, not of results. What a kernel would cost on Trn1 or Trn2, engine by engine,
//! is the [`timing`] module's: a timing model, a profiler and a benchmark, with or without the
//! arithmetic.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use nki_runtime::{DeviceTensor, NeuronCore};
//! use nki_runtime::nki_lang::Target;
//!
//! let core = NeuronCore::new(Target::Trn1);
//! let x = DeviceTensor::from_array(&ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0]]))?;
//! assert_eq!(x.shape(), &[2, 2]);
//! # let _ = core;
//! # Ok(())
//! # }
//! ```
//!
//! # Numerics
//!
//! - **Conversions** (DMA casts, `tensor_copy`, `memset` values) between any two of NKI's
//!   dtypes go through f32: the source's exact (or, for 32-bit integers, rounded) load, then the
//!   destination's store, which rounds to nearest, ties to even. Widening to f32 is exact for
//!   every float type (an f16 or fp8 signaling NaN becomes quiet). f32 → bf16 and → tfloat32
//!   flush f32 subnormal inputs to a signed zero, as `vcvtneps2bf16` does; f32 → f16 and
//!   → fp8 are IEEE (subnormals kept, overflow to ±inf; `float8_e4m3` is the IEEE-style format
//!   with max 240; the OCP `float8_e4m3fn` overflows to its NaN, `float4_e2m1fn` saturates,
//!   `float8_e8m0fnu` rounds to a power of two). f32 → integers saturate, NaN → 0; bool is 0
//!   or 1. The exact bit rules,
//!   NaNs included, are those of [`cpu::convert`]; `docs/dtypes.md` has them as a table.
//! - **`nc_matmul`** accumulates in fp32 in PSUM: for each output element, starting from the
//!   existing PSUM value (accumulate) or `-0.0` (overwrite), one fused multiply-add per
//!   contraction index in ascending order, inputs treated as zero when subnormal and results
//!   flushed when tiny: the order and rules of [`cpu::matmul`]. An accumulation group
//!   ([`nki_lang::Write::Group`]) overwrites in the first iteration of its loops and
//!   accumulates afterwards.
//! - **`nc_transpose`** widens exactly to fp32 in PSUM.
//! - The engines compute in fp32: a `tensor_copy` between two dtypes goes through f32; a copy
//!   within one dtype keeps the bits.
//! - Results are identical on every host code path ([`Isa`]); only speed differs.
//!
//! # Host threads
//!
//! A core splits its large instructions (a matmul's output rows, a transfer's partitions)
//! between the calling thread and one persistent worker thread of its own, so that a kernel
//! uses two host cores. Each half computes exactly what the serial code computes for its rows:
//! results are bit for bit the same with [`NeuronCore::with_host_threads`]`(1)`. A launch over
//! an SPMD grid ([`LaunchGrid`]) runs half of its instances on each thread instead, each half
//! with on-chip memories of its own, when their outputs split between them (else one after the
//! other); again the results are the serial run's. See `docs/performance.md` for the measured
//! effect.
//!
//! # Data that only passes through SBUF
//!
//! A plain run (no observer, not strict) does not copy data into SBUF that only passes through
//! it between two neighbouring instructions: a `load` whose tile only the next `nc_matmul`
//! reads is skipped, and the matmul packs that operand from the input tensor (once per launch,
//! however many matmuls read it, and once for all launches while the input is a
//! [`DeviceTensor`] that keeps its version: see [`DeviceTensor`]); a `tensor_copy` of a matmul's whole result right after it is
//! converted as each block of results is computed; and when that copy's tile only the next
//! `store` reads, the results go straight into the output tensor. Outputs are bit for bit those
//! of the instructions run one after the other; what differs is that the skipped tiles keep
//! their old contents in SBUF, where no instruction of the kernel reads them. Likewise, when
//! neighbouring partition-local instructions run a block of partitions at a time, a tile that
//! only passes data between them (no instruction after them reads it) is written block after
//! block into the same few partitions, which stay in the host's cache, and keeps its old
//! contents in the others; and an elementwise ALU instruction (or a copy, or a load) of such a
//! block whose results only later ones of it read is computed inside those, chunk by chunk,
//! without its tile being written at all (RoPE's four products, the copy of a tile's upper half
//! and the load of its input, inside the difference and the sum that read them: they read the
//! input tensor where it lies). A strict core, or an observed run
//! ([`NeuronCore::execute_observed`], a [`HostProfile`]), runs every instruction as written.
//!
//! # Layers
//!
//! The crate's modules form layers, and an import points only down (a parent module and its
//! own children in one folder excepted); `tests/layering.rs` checks it on the source, and the
//! workspace's `tests/all/no_circles.rs` that no files use each other in a circle:
//!
//! 1. `cpu/`: the numerics (conversions, ALU and activation functions, the matmul's
//!    accumulation), one definition per function with its host code paths; stateless.
//!    Beside it, host and device plumbing: `worker` (the second host thread), `memory` (SBUF,
//!    PSUM), `shape`, `grid` (the launch grid), `budget` (what bounds a launch's work), `top8`
//!    (the top-8 searches on one partition's values: their order, matches and claims).
//! 2. `element` (host element types), then `bind` (the launch's tensors: [`HbmIn`],
//!    [`HbmOut`], [`Bound`]), then `device_tensor` and `operand` (the vocabulary of a resolved
//!    operand: [`exec::Loc`], [`exec::Pattern`], [`exec::Resolved`], [`exec::Operands`]),
//!    then `gather` (where `gather_flattened`'s positions and elements are), then `indirect`
//!    (an indirect DMA's rows, read from its index tile), `dyncopy`
//!    (`tensor_copy_dynamic_src`'s shifted source, `tensor_copy_dynamic_dst`'s shifted
//!    destination), `local_gather` (each 16-partition group's indices), `range_select`
//!    (which elements its bounds select) and `registers` (an instance's virtual registers and
//!    the trip counts of device loops read from them): what data decides about an operand or a
//!    loop, shared by the engines, the interpreter and strict mode.
//! 3. `engines/`: one routine per instruction family, on resolved operands.
//! 4. `exec/`: the interpreter, its [`Observer`] hook and its host-plan hook.
//! 5. `host/` (the shortcuts of plain runs: two threads, fused steps), [`strict`],
//!    [`host_profile`]: the plans and observers that plug into the interpreter. Observers
//!    never see `engines/` or `host/`.
//! 6. `launch` ([`Kernel`], the checks), `instantiation`, `schedule` (the
//!    schedule-independence check of [`strict::ScheduleCheck`], which runs the engines) and
//!    `scratch` (the HBM scratch and constants a launch allocates), then `core` ([`NeuronCore`]: picks
//!    the serial plan for strict and observed runs, the host's plan otherwise), then
//!    [`timing`] and `reference_launch` (launches on the reference interpreter, the
//!    element-by-element definition of every instruction in `exec::reference`, for tests).
//!
//! Elements are stored little-endian, sharing bytes with the host's slices, so the host must
//! be little-endian.

#![warn(missing_docs)]
// A match on an enum that grows (opcodes, formats, operand kinds, engines, dtypes, ISAs, function
// codes) names every variant, so that a new variant is an error (under `-D warnings`) at every
// match that must decide it.
#![warn(clippy::wildcard_enum_match_arm)]

#[cfg(target_endian = "big")]
compile_error!("nki-runtime models the device's little-endian memories with host memory");

pub mod cpu;

mod bind;
mod budget;
mod core;
mod device_tensor;
mod dyncopy;
mod element;
mod engines;
pub mod exec;
mod gather;
mod grid;
mod host;
pub mod host_profile;
mod indirect;
mod instantiation;
mod launch;
mod local_gather;
pub mod memory;
mod operand;
mod range_select;
#[doc(hidden)]
pub mod reference_launch;
mod registers;
mod schedule;
mod scratch;
mod shape;
pub mod strict;
pub mod timing;
mod top8;
mod uninitialized;
mod worker;

pub use crate::core::{NeuronCore, UnsupportedIsa, isa_by_default, strict_by_default};
pub use bind::{Bound, HbmIn, HbmOut};
pub use budget::{Budget, StopHandle, Stopped};
pub use cpu::Isa;
pub use device_tensor::{DeviceTensor, TensorError};
pub use element::{
    Bool, Element, F4E2M1Fn, F4E2M1FnX4, F8E4M3, F8E4M3Fn, F8E4M3FnX4, F8E5M2, F8E5M2X4, F8E8M0Fnu,
    Tf32,
};
pub use exec::{ExecError, InstanceEdge, LoopEdge, Observer, OnChip, Resolver, Skip};
pub use grid::{GridDim, LaunchGrid, nc, spmd_dim};
pub use host_profile::{HostOpRow, HostProfile, HostRow};
pub use instantiation::{Instance, MetaValue};
pub use launch::{CheckedInputs, Kernel, LaunchError};
pub use nki_lang;
pub use shape::{MAX_DIM, Shape};
pub use strict::{Strict, StrictError};
pub use uninitialized::UninitializedMemory;
