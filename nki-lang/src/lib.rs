//! The NKI kernel language as plain data: element types, shapes, the instruction set, the
//! hardware's rules, tile allocation and launch constraints.
//!
//! `nki-macros` lowers a `#[kernel]` body into a [`ProgramBuf`] at compile time, checks it with
//! [`ProgramBuf::finish`] and emits the result as a `static` [`Program`]; `nki-runtime` executes
//! programs and builds them at run time with the same checks.

#![warn(missing_docs)]
// A match on an enum that grows (opcodes, formats, operand kinds, engines, dtypes, function
// codes) names every variant, so that clippy points at every match a new variant must be decided
// in (an error under `-D warnings`). A wildcard that is right carries an `#[expect]` saying why.
#![warn(clippy::wildcard_enum_match_arm)]
// Sizes, strides, offsets, indices and trip counts all come from users (a kernel's literals, a
// builder's arguments, a launch's shapes): arithmetic on them is checked, saturating or wrapping
// by intent, never silently truncated or panicking. Each `allow` below says why it is safe.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

mod affine;
mod alloc;
mod blocks;
mod buf;
pub mod builder;
mod compiled;
#[doc(hidden)]
pub mod constraint;
mod dataflow;
pub mod derived;
pub mod device_support;
mod diag;
mod dtype;
mod func;
#[doc(hidden)]
pub mod grid;
mod ir;
mod listing;
pub mod product;
mod program;
#[doc(hidden)]
pub mod rules;
pub mod schedule_control;
mod shape;
pub mod target;
mod verify;
pub mod view;

pub use affine::{Affine, MAX_LOOP_DEPTH, MAX_PIDS, MAX_VARS, Var, VarValues};
pub use buf::{ProgramBuf, ReshapeBuf, TensorBuf, TileBuf};
pub use compiled::{CompiledProgram, ProgramParts};
pub use constraint::{Bounded, Constraint};
pub use diag::{Diagnostic, Site};
pub use dtype::{DType, DTypeClass};
pub use func::{ActFn, Alu, AluClass, ValidRange};
pub use grid::SymbolSource;
pub use ir::ops::{
    self, Axes, Deps, Format, Maskable, OpInfo, Opcode, OperandSpec, Packed, XORWOW_WORDS,
    xorwow_generators, xorwow_state_words,
};
pub use ir::{
    AccOut, AccessId, AxisIndex, Cmp, Dir, Dst, ExprId, HbmAccess, IndirectMode, Instr, InstrData,
    LoopControl, LoopKind, MAX_DEVICE_TRIPS, MAX_MASK_TERMS, MAX_REGISTERS, MAX_SLOTS, Mask,
    MaskId, MaskTerm, OperandRef, Pred, RegId, RegSrc, Scalar, SlotOperand, Src, TileView, ViewId,
    Write,
};
pub use ir::{
    DMA_COMPUTE_SOURCES, GATHER_GROUP, MX_GROUP_FREE, MX_GROUP_PARTITIONS, SHUFFLE_KEEP,
    SHUFFLE_QUADRANT, mx_scale_partition, nonzero_partition, shuffle_source, topk_place,
};
pub use program::{Program, ReshapeDecl, TensorDecl, TensorRole, TileDecl};
pub use rules::RuleViolation;
pub use shape::{
    Dim, Extent, MAX_SYMBOLS, MAX_TENSOR_DIM, MAX_TENSOR_RANK, MAX_TILE_RANK, SymbolValues,
    TileShape,
};
pub use target::{Engine, Memory, Target};

/// Most HBM tensors (inputs plus outputs) one kernel may have.
pub const MAX_TENSORS: usize = 16;
