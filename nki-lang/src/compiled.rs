//! The result of checking a program, kept apart from its input as naga keeps `ModuleInfo` apart
//! from `Module`: a [`CompiledProgram`] owns the checked [`ProgramBuf`] with its tile addresses,
//! launch constraints and memory use, and lends them out as a [`Program`] through
//! [`ProgramParts`]. Only [`ProgramBuf::finish`] makes one.

use crate::buf::ProgramBuf;
use crate::constraint::Constraint;
use crate::program::{Program, ReshapeDecl, TensorDecl, TileDecl};
use crate::schedule_control::{InstrName, ScheduleControl};

/// A program that passed [`ProgramBuf::finish`]: owned storage behind a [`Program`].
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledProgram {
    /// The checked source.
    pub(crate) buf: ProgramBuf,
    /// Address of each tile.
    pub(crate) addrs: Vec<u32>,
    /// Launch constraints.
    pub(crate) constraints: Vec<Constraint>,
    /// SBUF bytes per partition used.
    pub(crate) sbuf_bytes: u32,
    /// PSUM banks used.
    pub(crate) psum_banks: u32,
}

/// Borrowed views of a [`CompiledProgram`]'s names, for building a [`Program`].
pub struct ProgramParts<'a> {
    symbols: Vec<&'a str>,
    tensors: Vec<TensorDecl<'a>>,
    reshapes: Vec<ReshapeDecl<'a>>,
    tiles: Vec<TileDecl<'a>>,
    loop_vars: Vec<&'a str>,
    names: Vec<InstrName<'a>>,
    owner: &'a CompiledProgram,
}

impl CompiledProgram {
    /// The unchecked source it was compiled from.
    pub fn source(&self) -> &ProgramBuf {
        &self.buf
    }
    /// Address of each tile.
    pub fn addrs(&self) -> &[u32] {
        &self.addrs
    }
    /// Launch constraints.
    pub fn constraints(&self) -> &[Constraint] {
        &self.constraints
    }
    /// SBUF bytes per partition used.
    pub fn sbuf_bytes(&self) -> u32 {
        self.sbuf_bytes
    }
    /// PSUM banks used.
    pub fn psum_banks(&self) -> u32 {
        self.psum_banks
    }
    /// The name tables a [`Program`] borrows; call [`ProgramParts::program`] on the result.
    pub fn parts(&self) -> ProgramParts<'_> {
        ProgramParts {
            symbols: self.buf.symbols.iter().map(String::as_str).collect(),
            tensors: self
                .buf
                .tensors
                .iter()
                .map(|t| TensorDecl {
                    name: &t.name,
                    dtype: t.dtype,
                    shape: &t.shape,
                    role: t.role,
                    scope: t.scope,
                    data: &t.data,
                })
                .collect(),
            reshapes: self
                .buf
                .reshapes
                .iter()
                .map(|r| ReshapeDecl {
                    name: &r.name,
                    tensor: r.tensor,
                    shape: &r.shape,
                })
                .collect(),
            tiles: self
                .buf
                .tiles
                .iter()
                .zip(&self.addrs)
                .map(|(t, &addr)| TileDecl {
                    name: &t.name,
                    memory: t.memory,
                    dtype: t.dtype,
                    shape: t.shape,
                    addr,
                    scope: t.scope,
                    blocks: t.blocks,
                    block_axes: t.block_axes,
                })
                .collect(),
            loop_vars: self.buf.loop_vars.iter().map(String::as_str).collect(),
            names: self
                .buf
                .control
                .names
                .iter()
                .map(|(name, first, end)| InstrName {
                    name,
                    first: *first,
                    end: *end,
                })
                .collect(),
            owner: self,
        }
    }
}

impl<'a> ProgramParts<'a> {
    /// The program.
    pub fn program(&self) -> Program<'_> {
        let o = self.owner;
        Program::from_checked_parts(
            &o.buf.name,
            o.buf.target,
            &self.symbols,
            &self.tensors,
            &self.reshapes,
            &self.tiles,
            &self.loop_vars,
            &o.buf.views,
            &o.buf.accesses,
            &o.buf.masks,
            &o.buf.exprs,
            &o.buf.instrs,
            &o.constraints,
            o.sbuf_bytes,
            o.psum_banks,
        )
        .with_control(ScheduleControl {
            names: &self.names,
            edges: &o.buf.control.edges,
            ordered: &o.buf.control.ordered,
        })
    }
}
