//! NKI-style kernels for a modeled AWS NeuronCore, compiled to static programs.
//!
//! A kernel is a Rust function annotated with [`kernel`]. The attribute lowers its body (NKI's
//! `load`, `store`, `nc_matmul`, `matmul`, `copy`, `mgrid`, `affine_range`, tiles in SBUF and
//! PSUM) to a program of plain-data instructions **at compile time**, checks it against the
//! hardware's tiling rules (every violation is a compile error on your tokens), assigns SBUF and
//! PSUM addresses, and emits the program as a `static`. Launching checks the arguments against
//! the static signature and runs the program on a modeled [`NeuronCore`]; nothing is built per
//! call.
//!
//! ```
//! use nki::prelude::*;
//!
//! #[kernel]
//! fn matmul_basic(lhs_t: Hbm<bf16, 128, 128>, rhs: Hbm<bf16, 128, 512>) -> Hbm<bf16, 128, 512> {
//!     let result = ndarray([128, 512], bf16, SharedHbm);
//!     let (i_lp, i_lf) = mgrid![0..128, 0..128];
//!     let (i_rp, i_rf) = mgrid![0..128, 0..512];
//!     let lhs_tile = load(lhs_t[[i_lp, i_lf]]);
//!     let rhs_tile = load(rhs[[i_rp, i_rf]]);
//!     let acc = nc_matmul(lhs_tile, rhs_tile);
//!     store(result[[i_rp, i_rf]], copy(acc, bf16));
//!     result
//! }
//!
//! let mut core = NeuronCore::default();
//! let lhs_t = DeviceTensor::from_array(&ndarray::Array2::from_elem((128, 128), bf16::ONE)).unwrap();
//! let rhs = DeviceTensor::from_array(&ndarray::Array2::from_elem((128, 512), bf16::ONE)).unwrap();
//! let out = matmul_basic(&mut core, &lhs_t, &rhs).unwrap();
//! assert!(out.as_slice().iter().all(|&x| x == bf16::from_f32(128.0)));
//! println!("{}", matmul_basic::KERNEL.program());
//! ```
//!
//! The language is described in `docs/language.md`; the modeled core and its numerics in the
//! `nki_runtime` crate.
//!
//! # What this crate exports
//!
//! - [`prelude`]: what a kernel author needs (the attribute, the element types, the core, device
//!   tensors, launch grids);
//! - at the root, the launch API: [`NeuronCore`], [`DeviceTensor`], [`Kernel`], [`LaunchGrid`],
//!   raw bindings ([`HbmIn`], [`HbmOut`]), meta-parameter [`Instance`]s, the element types, the
//!   errors;
//! - [`timing`] (what a kernel costs on Trainium), [`strict`] (what hardware would not
//!   reproduce), [`host_profile`] (where the host's time goes), [`observe`] (a launch
//!   instruction by instruction);
//! - [`program`]: programs as data and the run-time [`program::builder`].
//!
//! The machinery under them (the interpreter, the engines, the host's code paths, the checker)
//! is not part of this API; the `nki_lang` and `nki_runtime` crates hold it.

#![warn(missing_docs)]

pub use half::{bf16, f16};
pub use ndarray;
#[doc(hidden)]
pub use nki_macros::__kernel_with_helpers;
pub use nki_macros::{helper, kernel};

// The launch API: cores, device tensors, kernels and their launch grids, the element types.
pub use nki_lang::{DType, Target};
pub use nki_runtime::{
    Bool, Bound, Budget, CheckedInputs, DeviceTensor, Element, ExecError, F4E2M1Fn, F4E2M1FnX4,
    F8E4M3, F8E4M3Fn, F8E4M3FnX4, F8E5M2, F8E5M2X4, F8E8M0Fnu, GridDim, HbmIn, HbmOut, Instance,
    Isa, Kernel, LaunchError, LaunchGrid, MAX_DIM, MetaValue, NeuronCore, Shape, StopHandle,
    Stopped, TensorError, Tf32, UninitializedMemory, UnsupportedIsa, isa_by_default, nc, spmd_dim,
    strict_by_default,
};

/// Where the host's time goes in a launch, instruction by instruction
/// ([`nki_runtime::host_profile`]).
pub use nki_runtime::host_profile;
/// Strict launches: what hardware would not reproduce is an error ([`nki_runtime::strict`]).
pub use nki_runtime::strict;
/// The NeuronCore timing model, profiler and benchmark ([`nki_runtime::timing`]).
pub use nki_runtime::timing;

/// Programs as data: what `#[kernel]` emits, what [`program::builder`] builds at run time, and
/// the vocabulary a tool reads them with (instructions, operands, the op table, dtypes, the
/// targets' limits).
pub mod program {
    pub use nki_lang::builder;
    pub use nki_lang::device_support;
    pub use nki_lang::ops;
    pub use nki_lang::schedule_control;
    pub use nki_lang::target;
    pub use nki_lang::{
        AccOut, AccessId, ActFn, Affine, Alu, AluClass, Axes, AxisIndex, Cmp, CompiledProgram,
        DType, DTypeClass, Diagnostic, Dim, Dir, Dst, Engine, ExprId, Extent, Format, HbmAccess,
        IndirectMode, Instr, InstrData, LoopControl, LoopKind, MAX_LOOP_DEPTH, MAX_MASK_TERMS,
        MAX_PIDS, MAX_SLOTS, MAX_SYMBOLS, MAX_TENSOR_DIM, MAX_TENSOR_RANK, MAX_TENSORS,
        MAX_TILE_RANK, MAX_VARS, Mask, MaskId, MaskTerm, Memory, OpInfo, Opcode, OperandRef,
        OperandSpec, Pred, Program, ProgramParts, RuleViolation, Scalar, Site, SlotOperand, Src,
        SymbolValues, Target, TensorDecl, TensorRole, TileDecl, TileShape, TileView, ValidRange,
        Var, VarValues, ViewId, Write,
    };
}

/// Watching a launch instruction by instruction: the [`Observer`](observe::Observer) hook and
/// the resolved operands it is shown.
pub mod observe {
    pub use nki_runtime::Observer;
    pub use nki_runtime::exec::{Loc, Operands, Pattern, Resolved};
}

/// What a kernel author needs: the attribute, the element types, the core and device tensors.
pub mod prelude {
    pub use crate::{helper, kernel};
    pub use half::{bf16, f16};
    pub use ndarray;
    pub use nki_lang::Target;
    pub use nki_runtime::{
        DeviceTensor, GridDim, Kernel, LaunchError, LaunchGrid, NeuronCore, nc, spmd_dim,
    };
}

/// Items the code generated by `#[kernel]` refers to. Not a public API.
#[doc(hidden)]
pub mod __private;
