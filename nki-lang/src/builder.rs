//! Building programs at run time.
//!
//! [`ProgramBuilder`] is the run-time counterpart of `#[kernel]`: tools that generate kernels
//! (autotuners, other front ends) build a program instruction by instruction and
//! [`finish`](ProgramBuilder::finish) it through the same checks the macro uses.
//!
//! ```
//! use nki_lang::builder::{Grid, ProgramBuilder};
//! use nki_lang::{DType, Dim, Memory, PsumWrite, Target};
//!
//! # fn main() -> Result<(), nki_lang::builder::BuildError> {
//! let mut b = ProgramBuilder::new("matmul_basic", Target::Trn1);
//! let lhs_t = b.input("lhs_t", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(128)])?;
//! let rhs = b.input("rhs", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)])?;
//! let out = b.output("result", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)])?;
//! let a = b.tile("lhs_tile", Memory::Sbuf, DType::Bf16, &[128, 128])?;
//! let x = b.tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512])?;
//! let acc = b.tile("acc", Memory::Psum, DType::F32, &[128, 512])?;
//! let res = b.tile("res", Memory::Sbuf, DType::Bf16, &[128, 512])?;
//! b.load(a, Grid::origin(lhs_t))?;
//! b.load(x, Grid::origin(rhs))?;
//! b.matmul(acc, a, x, PsumWrite::Overwrite)?;
//! b.copy(res, acc)?;
//! b.store(Grid::origin(out), res)?;
//! let program = b.finish()?;
//! assert_eq!(program.parts().program().instrs().len(), 5);
//! # Ok(())
//! # }
//! ```

use thiserror::Error;

use crate::affine::{Affine, MAX_LOOP_DEPTH};
use crate::build::{CompiledProgram, Diagnostic, ProgramBuf, TensorBuf, TileBuf};
use crate::dtype::DType;
use crate::ir::{AxisIndex, HbmAccess, Instr, LoopKind, Memory, Op, PsumWrite, TileView};
use crate::program::TensorRole;
use crate::shape::{Dim, Extent, MAX_TENSOR_RANK, MAX_TILE_RANK, TileShape};
use crate::target::Target;

/// Why a program could not be built.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A call that cannot be made in this state or with these arguments.
    #[error("{0}")]
    Usage(&'static str),
    /// The finished program breaks rules; every violation with its site.
    #[error("the program breaks {} rule(s); the first: {}", .0.len(), .0.first().map(|d| d.violation.to_string()).unwrap_or_default())]
    Rules(Vec<Diagnostic>),
}

/// An HBM tensor of the program under construction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TensorId(u8);

impl TensorId {
    /// Its index in the program's tensor table (`HbmAccess::tensor`).
    pub fn index(self) -> u8 {
        self.0
    }
}

/// A tile of the program under construction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TileId(u16);

impl TileId {
    /// Its index in the program's tile table (`TileView::tile`).
    pub fn index(self) -> u16 {
        self.0
    }
}

/// A tile-shaped window of an HBM tensor: the tile's partition dimension runs along one tensor
/// axis and its free dimensions along the following ones, from a start index per axis (affine
/// in the enclosing loops' variables, see [`ProgramBuilder::loop_var`]).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Grid {
    tensor: TensorId,
    start: [Affine; MAX_TENSOR_RANK],
    first_axis: usize,
}

impl Grid {
    /// The window at index 0 of every axis, the tile's dimensions along the tensor's first axes.
    pub fn origin(tensor: TensorId) -> Grid {
        Grid {
            tensor,
            start: [Affine::ZERO; MAX_TENSOR_RANK],
            first_axis: 0,
        }
    }

    /// Sets the start index on `axis`.
    pub fn at(mut self, axis: usize, start: Affine) -> Grid {
        if axis < MAX_TENSOR_RANK {
            self.start[axis] = start;
        }
        self
    }

    /// Makes the tile's dimensions run along the tensor's axes from `axis` on (earlier axes are
    /// fixed at their start index).
    pub fn from_axis(mut self, axis: usize) -> Grid {
        self.first_axis = axis;
        self
    }
}

/// Builds a [`ProgramBuf`] and checks it.
#[derive(Clone, Debug)]
pub struct ProgramBuilder {
    buf: ProgramBuf,
    open: Vec<usize>,
    outputs_started: bool,
}

impl ProgramBuilder {
    /// An empty program.
    pub fn new(name: &str, target: Target) -> ProgramBuilder {
        ProgramBuilder {
            buf: ProgramBuf {
                name: name.to_string(),
                target,
                ..ProgramBuf::default()
            },
            open: Vec::new(),
            outputs_started: false,
        }
    }

    /// A symbolic dimension (created on first use of the name).
    pub fn symbol(&mut self, name: &str) -> Result<Dim, BuildError> {
        if let Some(i) = self.buf.symbols.iter().position(|s| s == name) {
            return Ok(Dim::Sym(i as u8));
        }
        if self.buf.symbols.len() == crate::shape::MAX_SYMBOLS {
            return Err(BuildError::Usage(
                "a program has at most 8 symbolic dimensions",
            ));
        }
        self.buf.symbols.push(name.to_string());
        Ok(Dim::Sym((self.buf.symbols.len() - 1) as u8))
    }

    fn tensor(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[Dim],
        role: TensorRole,
    ) -> Result<TensorId, BuildError> {
        if self.buf.tensors.len() == crate::MAX_TENSORS {
            return Err(BuildError::Usage("a program has at most 16 HBM tensors"));
        }
        if shape.is_empty() || shape.len() > MAX_TENSOR_RANK {
            return Err(BuildError::Usage("an HBM tensor has 1 to 6 dimensions"));
        }
        self.buf.tensors.push(TensorBuf {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
            role,
        });
        Ok(TensorId((self.buf.tensors.len() - 1) as u8))
    }

    /// An input tensor (declare every input before the first output).
    pub fn input(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[Dim],
    ) -> Result<TensorId, BuildError> {
        if self.outputs_started {
            return Err(BuildError::Usage(
                "declare every input before the first output",
            ));
        }
        self.tensor(name, dtype, shape, TensorRole::Input)
    }

    /// An output tensor, in return order.
    pub fn output(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[Dim],
    ) -> Result<TensorId, BuildError> {
        self.outputs_started = true;
        self.tensor(name, dtype, shape, TensorRole::Output)
    }

    /// An on-chip tile (`shape`: partitions, then 1 to 3 free dimensions).
    pub fn tile(
        &mut self,
        name: &str,
        memory: Memory,
        dtype: DType,
        shape: &[u32],
    ) -> Result<TileId, BuildError> {
        let shape =
            TileShape::new(shape).ok_or(BuildError::Usage("a tile has 1 to 4 dimensions"))?;
        if self.buf.tiles.len() >= u16::MAX as usize {
            return Err(BuildError::Usage("too many tiles"));
        }
        self.buf.tiles.push(TileBuf {
            name: name.to_string(),
            memory,
            dtype,
            shape,
        });
        Ok(TileId((self.buf.tiles.len() - 1) as u16))
    }

    /// Opens a loop; returns its induction variable as an affine expression (`scale` 1).
    pub fn begin_loop(
        &mut self,
        kind: LoopKind,
        var: &str,
        trip: Extent,
    ) -> Result<Affine, BuildError> {
        if self.open.len() == MAX_LOOP_DEPTH {
            return Err(BuildError::Usage("loops nest at most 8 deep"));
        }
        self.buf.loop_vars.push(var.to_string());
        let v = (self.buf.loop_vars.len() - 1) as u16;
        let depth = self.open.len();
        self.open.push(self.buf.instrs.len());
        self.push_op(Op::LoopBegin {
            kind,
            trip,
            var: v,
            end: 0,
        });
        Ok(Affine::var(depth, 1))
    }

    /// The induction variable of the open loop at `depth` (0 = outermost), times `scale`.
    pub fn loop_var(&self, depth: usize, scale: i64) -> Result<Affine, BuildError> {
        if depth >= self.open.len() {
            return Err(BuildError::Usage("no open loop at that depth"));
        }
        Ok(Affine::var(depth, scale))
    }

    /// Closes the innermost loop.
    pub fn end_loop(&mut self) -> Result<(), BuildError> {
        let begin = self
            .open
            .pop()
            .ok_or(BuildError::Usage("no loop is open"))?;
        let end = self.buf.instrs.len() as u32;
        self.push_op(Op::LoopEnd {
            begin: begin as u32,
        });
        if let Op::LoopBegin { end: e, .. } = &mut self.buf.instrs[begin].op {
            *e = end;
        }
        Ok(())
    }

    fn view(&self, t: TileId) -> Result<TileView, BuildError> {
        let tile = self
            .buf
            .tiles
            .get(t.0 as usize)
            .ok_or(BuildError::Usage("unknown tile"))?;
        Ok(TileView::whole(t.0, &tile.shape))
    }

    fn access(&self, g: Grid, shape: &TileShape) -> Result<HbmAccess, BuildError> {
        let tensor = self
            .buf
            .tensors
            .get(g.tensor.0 as usize)
            .ok_or(BuildError::Usage("unknown tensor"))?;
        let rank = tensor.shape.len();
        if g.first_axis + shape.rank() > rank {
            return Err(BuildError::Usage(
                "the tile has more dimensions than the tensor has from that axis",
            ));
        }
        let mut axes = [AxisIndex {
            start: Affine::ZERO,
            grid: [0; MAX_TILE_RANK],
        }; MAX_TENSOR_RANK];
        for (a, axis) in axes.iter_mut().enumerate().take(rank) {
            axis.start = g.start[a];
            if a >= g.first_axis && a - g.first_axis < shape.rank() {
                axis.grid[a - g.first_axis] = 1;
            }
        }
        Ok(HbmAccess {
            tensor: g.tensor.0,
            rank: rank as u8,
            axes,
        })
    }

    fn push_op(&mut self, op: Op) {
        let engine = op.default_engine();
        self.buf.instrs.push(Instr {
            engine,
            line: 0,
            op,
        });
    }

    /// An instruction with explicit operands: views with partition offsets or strides, HBM
    /// accesses with any affine indices (see [`TileView`], [`HbmAccess`]). Loops are opened and
    /// closed with [`ProgramBuilder::begin_loop`] and [`ProgramBuilder::end_loop`];
    /// [`ProgramBuilder::finish`] checks the operands like every other instruction's.
    pub fn push(&mut self, op: Op) -> Result<(), BuildError> {
        if matches!(op, Op::LoopBegin { .. } | Op::LoopEnd { .. }) {
            return Err(BuildError::Usage(
                "open and close loops with begin_loop and end_loop",
            ));
        }
        self.push_op(op);
        Ok(())
    }

    /// `load`: the window `src` of an HBM tensor into the whole tile `dst`.
    pub fn load(&mut self, dst: TileId, src: Grid) -> Result<(), BuildError> {
        let dst = self.view(dst)?;
        let src = self.access(src, &dst.shape)?;
        self.push_op(Op::Load { src, dst });
        Ok(())
    }

    /// `store`: the whole tile `src` into the window `dst` of an HBM output.
    pub fn store(&mut self, dst: Grid, src: TileId) -> Result<(), BuildError> {
        let src = self.view(src)?;
        let dst = self.access(dst, &src.shape)?;
        self.push_op(Op::Store { dst, src });
        Ok(())
    }

    /// `nc_matmul`: `dst (PSUM) = stationaryᵀ · moving`, overwritten or accumulated per `write`.
    pub fn matmul(
        &mut self,
        dst: TileId,
        stationary: TileId,
        moving: TileId,
        write: PsumWrite,
    ) -> Result<(), BuildError> {
        let (dst, stationary, moving) =
            (self.view(dst)?, self.view(stationary)?, self.view(moving)?);
        self.push_op(Op::Matmul {
            stationary,
            moving,
            dst,
            write,
        });
        Ok(())
    }

    /// `nc_transpose` on TensorE: `dst[f, p] = src[p, f]`.
    pub fn transpose(&mut self, dst: TileId, src: TileId) -> Result<(), BuildError> {
        let (dst, src) = (self.view(dst)?, self.view(src)?);
        self.push_op(Op::Transpose { src, dst });
        Ok(())
    }

    /// `tensor_copy` with a cast to `dst`'s dtype.
    pub fn copy(&mut self, dst: TileId, src: TileId) -> Result<(), BuildError> {
        let (dst, src) = (self.view(dst)?, self.view(src)?);
        self.push_op(Op::Copy { src, dst });
        Ok(())
    }

    /// `memset`.
    pub fn memset(&mut self, dst: TileId, value: f32) -> Result<(), BuildError> {
        let dst = self.view(dst)?;
        self.push_op(Op::Memset { dst, value });
        Ok(())
    }

    /// Closes the program and applies every rule ([`ProgramBuf::finish`]).
    pub fn finish(self) -> Result<CompiledProgram, BuildError> {
        if !self.open.is_empty() {
            return Err(BuildError::Usage("a loop is still open"));
        }
        self.buf.finish().map_err(BuildError::Rules)
    }
}
