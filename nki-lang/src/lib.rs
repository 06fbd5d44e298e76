//! The NKI kernel language as plain data: element types, shapes, the instruction set, the
//! hardware's rules, tile allocation and launch constraints.
//!
//! `nki-macros` lowers a `#[kernel]` body into a [`ProgramBuf`] at compile time, checks it with
//! [`ProgramBuf::finish`] and emits the result as a `static` [`Program`]; `nki-runtime` executes
//! programs and builds them at run time with the same checks.

#![warn(missing_docs)]

pub mod affine;
pub mod alloc;
pub mod build;
pub mod builder;
pub mod constraint;
pub mod dtype;
pub mod func;
pub mod ir;
pub mod listing;
pub mod program;
pub mod rules;
pub mod shape;
pub mod target;

pub use affine::{Affine, LoopValues, MAX_LOOP_DEPTH};
pub use build::{CompiledProgram, Diagnostic, ProgramBuf, Role, Site, TensorBuf, TileBuf};
pub use constraint::{Bounded, Constraint};
pub use dtype::{DType, DTypeClass};
pub use func::{ActFn, Alu, AluClass, ValidRange};
pub use ir::{AxisIndex, Engine, HbmAccess, Instr, LoopKind, Memory, Op, PsumWrite, TileView};
pub use program::{Program, TensorDecl, TensorRole, TileDecl};
pub use rules::RuleViolation;
pub use shape::{
    Dim, Extent, MAX_SYMBOLS, MAX_TENSOR_RANK, MAX_TILE_RANK, SymbolValues, TileShape,
};
pub use target::Target;

/// Most HBM tensors (inputs plus outputs) one kernel may have.
pub const MAX_TENSORS: usize = 16;
