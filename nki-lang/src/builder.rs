//! Building programs at run time.
//!
//! [`ProgramBuilder`] is the run-time counterpart of `#[kernel]`: tools that generate kernels
//! (autotuners, other front ends) build a program instruction by instruction and
//! [`finish`](ProgramBuilder::finish) it through the same checks the macro uses.
//!
//! ```
//! use nki_lang::builder::{Grid, ProgramBuilder};
//! use nki_lang::{DType, Dim, Memory, Target, Write};
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
//! b.nc_matmul(acc, a, x, Write::Overwrite)?;
//! b.tensor_copy(res, acc)?;
//! b.store(Grid::origin(out), res)?;
//! let program = b.finish()?;
//! assert_eq!(program.parts().program().instrs().len(), 5);
//! # Ok(())
//! # }
//! ```

use thiserror::Error;

use crate::affine::{Affine, MAX_LOOP_DEPTH};
use crate::buf::{ProgramBuf, TensorBuf, TileBuf};
use crate::compiled::CompiledProgram;
use crate::diag::Diagnostic;
use crate::dtype::DType;
use crate::func::{ActFn, Alu};
use crate::ir::ops::Opcode;
use crate::ir::{
    AccOut, AccessId, AxisIndex, Dst, ExprId, HbmAccess, Instr, InstrData, LoopKind, Mask, MaskId,
    RegId, RegSrc, Scalar, Src, TileView, ViewId, Write,
};
use crate::program::TensorRole;
use crate::shape::{Dim, Extent, MAX_TENSOR_RANK, MAX_TILE_RANK, TileShape};
use crate::target::{Engine, Memory, Target};

/// Why a program could not be built.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A call that cannot be made in this state or with these arguments.
    #[error("{0}")]
    Usage(&'static str),
    /// A name, `with_schedule` edge or `no_reorder` block that
    /// [`crate::schedule_control`]'s rules refuse.
    #[error(transparent)]
    Control(#[from] crate::schedule_control::ControlError),
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

/// A reshape of an HBM tensor of the program under construction (NKI's
/// `tensor.reshape(shape)`), indexed through [`Grid::reshaped`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ReshapeId {
    tensor: u8,
    reshape: u8,
}

impl ReshapeId {
    /// Its index in the program's reshape table (`HbmAccess::reshape`).
    pub fn index(self) -> u8 {
        self.reshape
    }

    /// The tensor it views.
    pub fn tensor(self) -> TensorId {
        TensorId(self.tensor)
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
    /// The reshape whose axes the grid runs along, if not the tensor's own.
    reshape: Option<u8>,
    start: [Affine; MAX_TENSOR_RANK],
    first_axis: usize,
    /// An axis named by [`Grid::at`] that no tensor has; reported when the grid is used.
    bad_axis: Option<usize>,
}

impl Grid {
    /// The window at index 0 of every axis, the tile's dimensions along the tensor's first axes.
    pub fn origin(tensor: TensorId) -> Grid {
        Grid {
            tensor,
            reshape: None,
            start: [Affine::ZERO; MAX_TENSOR_RANK],
            first_axis: 0,
            bad_axis: None,
        }
    }

    /// [`Grid::origin`] over a reshape's axes (the elements are its tensor's).
    pub fn reshaped(reshape: ReshapeId) -> Grid {
        Grid {
            reshape: Some(reshape.reshape),
            ..Grid::origin(reshape.tensor())
        }
    }

    /// Sets the start index on `axis` (an axis the tensor lacks is reported when the grid is
    /// used).
    pub fn at(mut self, axis: usize, start: Affine) -> Grid {
        match self.start.get_mut(axis) {
            Some(s) => *s = start,
            None => self.bad_axis = Some(axis),
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

/// A source operand of a builder call.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Operand {
    /// No operand.
    None,
    /// A whole tile.
    Tile(TileId),
    /// A `[P, 1]` tile applied along every free element.
    Column(TileId),
    /// An immediate.
    Imm(Scalar),
}

/// Builds a [`ProgramBuf`] and checks it.
#[derive(Clone, Debug)]
pub struct ProgramBuilder {
    buf: ProgramBuf,
    open: Vec<usize>,
    outputs_started: bool,
    /// Whether a scratch or constant tensor was declared (after which inputs and outputs are not).
    allocated_started: bool,
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
            allocated_started: false,
        }
    }

    /// The launch grid's size along `axis` (`num_programs(axis)`), a symbolic dimension bound
    /// at launch ([`crate::grid`]).
    pub fn num_programs(&mut self, axis: usize) -> Result<Dim, BuildError> {
        match crate::grid::GRID_SIZE_SYMBOLS.get(axis) {
            Some(name) => self.symbol(name),
            None => Err(BuildError::Usage("a launch grid has at most 3 axes")),
        }
    }

    /// A symbolic dimension (created on first use of the name). The names of
    /// [`crate::grid`] (`num_programs(0)`, `program_ndim()`, ...) are bound from the launch
    /// grid, every other one from the first input axis that names it.
    pub fn symbol(&mut self, name: &str) -> Result<Dim, BuildError> {
        const TOO_MANY: BuildError =
            BuildError::Usage("a program has at most 8 symbolic dimensions");
        if let Some(i) = self.buf.symbols.iter().position(|s| s == name) {
            return u8::try_from(i).map(Dim::Sym).map_err(|_| TOO_MANY);
        }
        if self.buf.symbols.len() >= crate::shape::MAX_SYMBOLS {
            return Err(TOO_MANY);
        }
        let i = u8::try_from(self.buf.symbols.len()).map_err(|_| TOO_MANY)?;
        self.buf.symbols.push(name.to_string());
        Ok(Dim::Sym(i))
    }

    fn tensor(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[Dim],
        role: TensorRole,
    ) -> Result<TensorId, BuildError> {
        if self.allocated_started && !role.allocated() {
            return Err(BuildError::Usage(
                "declare every input and output before the first scratch or constant tensor",
            ));
        }
        const TOO_MANY: BuildError = BuildError::Usage("a program has at most 16 HBM tensors");
        if self.buf.tensors.len() >= crate::MAX_TENSORS {
            return Err(TOO_MANY);
        }
        if shape.is_empty() || shape.len() > MAX_TENSOR_RANK {
            return Err(BuildError::Usage("an HBM tensor has 1 to 6 dimensions"));
        }
        let id = u8::try_from(self.buf.tensors.len()).map_err(|_| TOO_MANY)?;
        let scope = match role {
            TensorRole::Private => self.open.last().and_then(|&b| u32::try_from(b).ok()),
            TensorRole::Input | TensorRole::Output | TensorRole::Scratch | TensorRole::Constant => {
                None
            }
        };
        self.buf.tensors.push(TensorBuf {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
            role,
            scope,
            data: Vec::new(),
        });
        Ok(TensorId(id))
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

    /// A scratch tensor in HBM (NKI's `nl.ndarray(shape, dtype, buffer=nl.shared_hbm)` that the
    /// kernel does not return): every SPMD instance sees the same one; each launch allocates it,
    /// uninitialised. Declare scratch and constants after every input and output.
    pub fn scratch(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[Dim],
    ) -> Result<TensorId, BuildError> {
        self.allocated_started = true;
        self.tensor(name, dtype, shape, TensorRole::Scratch)
    }

    /// A scratch tensor of one SPMD instance (NKI's `buffer=nl.private_hbm`, or `nl.hbm`);
    /// declared inside a loop, of one iteration of the innermost open loop.
    pub fn private_scratch(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[Dim],
    ) -> Result<TensorId, BuildError> {
        self.allocated_started = true;
        self.tensor(name, dtype, shape, TensorRole::Private)
    }

    /// A constant tensor (NKI's `nl.shared_constant(array, dtype)`) of the compile-time shape
    /// `shape` holding `values` in row-major order, converted to `dtype` at launch as
    /// `tensor_copy` from f32 converts ([`crate::TensorDecl::data`]).
    pub fn constant(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[u64],
        values: &[f32],
    ) -> Result<TensorId, BuildError> {
        self.allocated_started = true;
        let dims: Vec<Dim> = shape.iter().map(|&n| Dim::Fixed(n)).collect();
        let id = self.tensor(name, dtype, &dims, TensorRole::Constant)?;
        if let Some(t) = self.buf.tensors.last_mut() {
            t.data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        }
        Ok(id)
    }

    /// A reshape of `tensor` to `shape` (NKI's `tensor.reshape(shape)`): the same elements, in
    /// the same row-major order, under other dimensions. [`ProgramBuf::finish`] checks that
    /// they hold the tensor's element count, or makes a launch check it when symbols decide.
    pub fn reshape(
        &mut self,
        tensor: TensorId,
        name: &str,
        shape: &[Dim],
    ) -> Result<ReshapeId, BuildError> {
        if usize::from(tensor.0) >= self.buf.tensors.len() {
            return Err(BuildError::Usage("unknown tensor"));
        }
        if shape.is_empty() || shape.len() > MAX_TENSOR_RANK {
            return Err(BuildError::Usage("a reshape has 1 to 6 dimensions"));
        }
        let reshape = u8::try_from(self.buf.reshapes.len())
            .ok()
            .filter(|&r| r < u8::MAX)
            .ok_or(BuildError::Usage("too many reshapes"))?;
        self.buf.reshapes.push(crate::buf::ReshapeBuf {
            name: name.to_string(),
            tensor: tensor.0,
            shape: shape.to_vec(),
        });
        Ok(ReshapeId {
            tensor: tensor.0,
            reshape,
        })
    }

    /// An on-chip tile (`shape`: partitions, then up to 4 free dimensions), declared in the
    /// innermost open loop: each of its iterations has a tile of its own, used only inside it.
    pub fn tile(
        &mut self,
        name: &str,
        memory: Memory,
        dtype: DType,
        shape: &[u32],
    ) -> Result<TileId, BuildError> {
        let shape = TileShape::new(shape).ok_or(BuildError::Usage(
            "a tile has 1 to 5 dimensions: its partitions, then up to 4 free dimensions",
        ))?;
        let id = u16::try_from(self.buf.tiles.len())
            .ok()
            .filter(|&i| i < u16::MAX)
            .ok_or(BuildError::Usage("too many tiles"))?;
        self.buf.tiles.push(TileBuf {
            blocks: None,
            block_axes: 0,
            name: name.to_string(),
            memory,
            dtype,
            shape,
            scope: self.open.last().and_then(|&b| u32::try_from(b).ok()),
        });
        Ok(TileId(id))
    }

    /// Opens a loop; returns its induction variable as an affine expression (`scale` 1).
    pub fn begin_loop(
        &mut self,
        kind: LoopKind,
        var: &str,
        trip: Extent,
    ) -> Result<Affine, BuildError> {
        if self.open.len() >= MAX_LOOP_DEPTH {
            return Err(BuildError::Usage("loops nest at most 8 deep"));
        }
        let v = u16::try_from(self.buf.loop_vars.len())
            .map_err(|_| BuildError::Usage("a program has at most 65536 loops"))?;
        self.instr_index()?;
        self.buf.loop_vars.push(var.to_string());
        let depth = self.open.len();
        self.open.push(self.buf.instrs.len());
        self.push_op(
            Opcode::LoopBegin,
            InstrData::LoopBegin {
                kind,
                trip,
                var: v,
                end: 0,
            },
        );
        Ok(Affine::loop_var(depth, 1))
    }

    /// The induction variable of the open loop at `depth` (0 = outermost), times `scale`.
    pub fn loop_var(&self, depth: usize, scale: i64) -> Result<Affine, BuildError> {
        if depth >= self.open.len() {
            return Err(BuildError::Usage("no open loop at that depth"));
        }
        Ok(Affine::loop_var(depth, scale))
    }

    /// Closes the innermost loop.
    pub fn end_loop(&mut self) -> Result<(), BuildError> {
        let end = self.instr_index()?;
        let begin = self
            .open
            .pop()
            .ok_or(BuildError::Usage("no loop is open"))?;
        // `begin` was an instruction index, below `end`.
        let begin32 = u32::try_from(begin).unwrap_or(u32::MAX);
        self.push_op(Opcode::LoopEnd, InstrData::LoopEnd { begin: begin32 });
        if let Some(InstrData::LoopBegin { end: e, .. }) =
            self.buf.instrs.get_mut(begin).map(|i| &mut i.data)
        {
            *e = end;
        }
        Ok(())
    }

    /// The index the next instruction gets, or an error when a program would have more
    /// instructions than `u32` counts.
    fn instr_index(&self) -> Result<u32, BuildError> {
        u32::try_from(self.buf.instrs.len())
            .ok()
            .filter(|&i| i < u32::MAX)
            .ok_or(BuildError::Usage(
                "a program has at most 2^32 - 1 instructions",
            ))
    }

    fn whole(&mut self, t: TileId) -> Result<(ViewId, TileShape), BuildError> {
        let tile = self
            .buf
            .tiles
            .get(t.0 as usize)
            .ok_or(BuildError::Usage("unknown tile"))?;
        let shape = tile.shape;
        Ok((self.view(TileView::whole(t.0, &shape))?, shape))
    }

    fn grid_access(&mut self, g: Grid, shape: &TileShape) -> Result<AccessId, BuildError> {
        let tensor = self
            .buf
            .tensors
            .get(g.tensor.0 as usize)
            .ok_or(BuildError::Usage("unknown tensor"))?;
        let rank = match g.reshape {
            Some(r) => self
                .buf
                .reshapes
                .get(usize::from(r))
                .ok_or(BuildError::Usage("unknown reshape"))?
                .shape
                .len(),
            None => tensor.shape.len(),
        };
        if g.bad_axis.is_some_and(|a| a >= rank)
            || g.start[rank..].iter().any(|s| *s != Affine::ZERO)
        {
            return Err(BuildError::Usage(
                "a start index is set on an axis the tensor does not have",
            ));
        }
        if g.first_axis.saturating_add(shape.rank()) > rank {
            return Err(BuildError::Usage(
                "the tile has more dimensions than the tensor has from that axis",
            ));
        }
        let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
        for (a, axis) in axes.iter_mut().enumerate().take(rank) {
            axis.start = g.start[a];
            if let Some(j) = a.checked_sub(g.first_axis).filter(|&j| j < shape.rank()) {
                axis.grid[j] = 1;
            }
        }
        self.access(HbmAccess {
            tensor: g.tensor.0,
            reshape: g.reshape,
            // rank ≤ MAX_TENSOR_RANK (checked when the tensor was declared)
            rank: u8::try_from(rank).unwrap_or(u8::MAX),
            shape: *shape,
            axes,
        })
    }

    fn push_op(&mut self, opcode: Opcode, data: InstrData) {
        self.buf.instrs.push(Instr::new(opcode, data));
    }

    /// Adds a tile view to the program's pool (see [`TileView`]: partition offsets, strides,
    /// zero-stride broadcasts) for use in [`ProgramBuilder::push`].
    pub fn view(&mut self, v: TileView) -> Result<ViewId, BuildError> {
        self.buf
            .add_view(v)
            .ok_or(BuildError::Usage("too many tile views"))
    }

    /// Adds an HBM access (any affine indices, see [`HbmAccess`]) to the program's pool.
    pub fn access(&mut self, a: HbmAccess) -> Result<AccessId, BuildError> {
        self.buf
            .add_access(a)
            .ok_or(BuildError::Usage("too many HBM accesses"))
    }

    /// Adds a mask (see [`Mask`]) to the program's pool.
    pub fn mask(&mut self, m: Mask) -> Result<MaskId, BuildError> {
        self.buf
            .add_mask(m)
            .ok_or(BuildError::Usage("too many masks"))
    }

    /// Adds a grid expression (`iota`'s values, `affine_select`'s predicate) to the pool.
    pub fn expr(&mut self, e: AxisIndex) -> Result<ExprId, BuildError> {
        self.buf
            .add_expr(e)
            .ok_or(BuildError::Usage("too many grid expressions"))
    }

    /// An instruction with explicit operands (pool ids from [`ProgramBuilder::view`],
    /// [`ProgramBuilder::access`], [`ProgramBuilder::mask`], [`ProgramBuilder::expr`]), engine,
    /// mask and line. Loops are opened and closed with [`ProgramBuilder::begin_loop`] and
    /// [`ProgramBuilder::end_loop`]; [`ProgramBuilder::finish`] checks the instruction like
    /// every other.
    pub fn push(&mut self, instr: Instr) -> Result<(), BuildError> {
        if matches!(
            instr.data,
            InstrData::LoopBegin { .. } | InstrData::LoopEnd { .. }
        ) {
            return Err(BuildError::Usage(
                "open and close loops with begin_loop and end_loop",
            ));
        }
        self.buf.instrs.push(instr);
        Ok(())
    }

    /// `load`: the window `src` of an HBM tensor into the whole tile `dst`.
    pub fn load(&mut self, dst: TileId, src: Grid) -> Result<(), BuildError> {
        let (tile, shape) = self.whole(dst)?;
        let hbm = self.grid_access(src, &shape)?;
        self.push_op(Opcode::Load, InstrData::Dma { tile, hbm });
        Ok(())
    }

    /// `store`: the whole tile `src` into the window `dst` of an HBM output.
    pub fn store(&mut self, dst: Grid, src: TileId) -> Result<(), BuildError> {
        let (tile, shape) = self.whole(src)?;
        let hbm = self.grid_access(dst, &shape)?;
        self.push_op(Opcode::Store, InstrData::Dma { tile, hbm });
        Ok(())
    }

    /// `nc_matmul`: `dst (PSUM) = stationaryᵀ · moving`, overwritten or accumulated per `write`.
    pub fn nc_matmul(
        &mut self,
        dst: TileId,
        stationary: TileId,
        moving: TileId,
        write: Write,
    ) -> Result<(), BuildError> {
        let (view, _) = self.whole(dst)?;
        let (stationary, _) = self.whole(stationary)?;
        let (moving, _) = self.whole(moving)?;
        let dst = Dst { view, write };
        self.push_op(
            Opcode::Matmul,
            InstrData::Matmul {
                dst,
                stationary,
                moving,
            },
        );
        Ok(())
    }

    /// `nc_transpose` on TensorE: `dst[f, p] = src[p, f]`.
    pub fn nc_transpose(&mut self, dst: TileId, src: TileId) -> Result<(), BuildError> {
        self.unary(Opcode::Transpose, dst, src)
    }

    /// `tensor_copy` with a cast to `dst`'s dtype.
    pub fn tensor_copy(&mut self, dst: TileId, src: TileId) -> Result<(), BuildError> {
        self.unary(Opcode::TensorCopy, dst, src)
    }

    fn unary(&mut self, opcode: Opcode, dst: TileId, src: TileId) -> Result<(), BuildError> {
        let (dst, _) = self.whole(dst)?;
        let (src, _) = self.whole(src)?;
        self.push_op(
            opcode,
            InstrData::Unary {
                dst: Dst::overwrite(dst),
                src,
            },
        );
        Ok(())
    }

    /// `memset`: every element of `dst` becomes `value`, converted to its dtype.
    pub fn memset(&mut self, dst: TileId, value: Scalar) -> Result<(), BuildError> {
        let (dst, _) = self.whole(dst)?;
        self.push_op(
            Opcode::Memset,
            InstrData::Fill {
                dst: Dst::overwrite(dst),
                value,
            },
        );
        Ok(())
    }

    /// An instruction of `opcode` with `data`, on `engine` (its default when `None`) and with
    /// `mask`.
    fn op(
        &mut self,
        opcode: Opcode,
        data: InstrData,
        engine: Option<Engine>,
        mask: Option<MaskId>,
    ) -> Result<(), BuildError> {
        let mut ins = Instr::new(opcode, data);
        ins.engine = engine.unwrap_or(ins.engine);
        ins.mask = mask;
        self.push(ins)
    }

    /// A source operand: a whole tile or an immediate.
    pub fn src(&mut self, s: Operand) -> Result<Src, BuildError> {
        Ok(match s {
            Operand::Tile(t) => Src::Tile(self.whole(t)?.0),
            Operand::Column(t) => Src::Tile(self.column(t)?),
            Operand::Imm(x) => Src::Imm(x),
            Operand::None => Src::None,
        })
    }

    /// A `[P, 1]` tile read along every free element of the grid `like`'s shape (a view with
    /// free strides 0).
    fn column(&mut self, t: TileId) -> Result<ViewId, BuildError> {
        let tile = self
            .buf
            .tiles
            .get(t.0 as usize)
            .ok_or(BuildError::Usage("unknown tile"))?;
        let shape = tile.shape;
        let mut v = TileView::whole(t.0, &shape);
        v.strides = [0; MAX_TILE_RANK - 1];
        self.view(v)
    }

    /// `tensor_tensor`: `dst = a op b`.
    pub fn tensor_tensor(
        &mut self,
        dst: TileId,
        a: TileId,
        b: TileId,
        op: Alu,
    ) -> Result<(), BuildError> {
        let (dst, a, b) = (self.whole(dst)?.0, self.whole(a)?.0, self.whole(b)?.0);
        let data = InstrData::Alu {
            dst: Dst::overwrite(dst),
            src: [Src::Tile(a), Src::Tile(b), Src::None],
            op: [op, Alu::Bypass],
            rev: 0,
            acc: None,
        };
        self.op(Opcode::TensorTensor, data, None, None)
    }

    /// `tensor_scalar`: `dst = (data op0 operand0) op1 operand1` (operands immediates or
    /// `[P, 1]` columns; `op1` [`Alu::Bypass`] with [`Operand::None`] for one operation).
    pub fn tensor_scalar(
        &mut self,
        dst: TileId,
        data: TileId,
        op0: Alu,
        operand0: Operand,
        op1: Alu,
        operand1: Operand,
    ) -> Result<(), BuildError> {
        let ops = [(op0, operand0), (op1, operand1)];
        self.with_scalars(Opcode::TensorScalar, dst, data, ops)
    }

    /// `tensor_scalar_cumulative`: along each partition, `reg = (data op0 imm0) op1 reg` in
    /// fp32, each step written to `dst`; `reg` starts at `op1`'s identity (`reduce_cmd =
    /// reset_reduce`, `imm1` [`Operand::None`]) or at `imm1` (`load_reduce`).
    pub fn tensor_scalar_cumulative(
        &mut self,
        dst: TileId,
        data: TileId,
        op0: Alu,
        imm0: Operand,
        op1: Alu,
        imm1: Operand,
    ) -> Result<(), BuildError> {
        let ops = [(op0, imm0), (op1, imm1)];
        self.with_scalars(Opcode::TensorScalarCumulative, dst, data, ops)
    }

    /// An instruction of the `Alu` format over the whole of `data`, with two operations and
    /// their scalar operands, into the whole of `dst`.
    fn with_scalars(
        &mut self,
        opcode: Opcode,
        dst: TileId,
        data: TileId,
        [(op0, operand0), (op1, operand1)]: [(Alu, Operand); 2],
    ) -> Result<(), BuildError> {
        let (dst, data) = (self.whole(dst)?.0, self.whole(data)?.0);
        let (s0, s1) = (self.src(operand0)?, self.src(operand1)?);
        let data = InstrData::Alu {
            dst: Dst::overwrite(dst),
            src: [Src::Tile(data), s0, s1],
            op: [op0, op1],
            rev: 0,
            acc: None,
        };
        self.op(opcode, data, None, None)
    }

    /// `activation`: `dst = func(data · scale + bias)`.
    pub fn activation(
        &mut self,
        dst: TileId,
        func: ActFn,
        data: TileId,
        scale: Operand,
        bias: Operand,
    ) -> Result<(), BuildError> {
        let (dst, src) = (self.whole(dst)?.0, self.whole(data)?.0);
        let (scale, bias) = (self.src(scale)?, self.src(bias)?);
        let data = InstrData::Act {
            dst: Dst::overwrite(dst),
            src,
            func,
            scale,
            bias,
            acc: None,
        };
        self.op(Opcode::Activation, data, None, None)
    }

    /// `activate2` (trn3): `dst = func((data op0 imm0) op1 imm1)` on the Scalar engine, bit `j`
    /// of `rev` reversing operation `j` (`imm op value`), and, with `reduce`, each partition's
    /// results reduced by its operation into its `[P, 1]` tile.
    #[allow(clippy::too_many_arguments)]
    pub fn activate2(
        &mut self,
        dst: TileId,
        func: ActFn,
        data: TileId,
        [(op0, imm0), (op1, imm1)]: [(Alu, Operand); 2],
        rev: u8,
        reduce: Option<(Alu, TileId)>,
    ) -> Result<(), BuildError> {
        let (dst, src) = (self.whole(dst)?.0, self.whole(data)?.0);
        let imm = [self.src(imm0)?, self.src(imm1)?];
        let acc = match reduce {
            Some((op, r)) => Some(AccOut {
                op,
                view: self.whole(r)?.0,
            }),
            None => None,
        };
        let data = InstrData::Act2 {
            dst: Dst::overwrite(dst),
            src,
            imm,
            op: [op0, op1],
            rev,
            func,
            acc,
        };
        self.op(Opcode::Activate2, data, None, None)
    }

    /// `exponential` (trn3): `dst = exp(data − max_value)` on the Vector engine (`max_value`
    /// [`Operand::None`] for 0, a number or a `[P, 1]` fp32 tile), and, with `reduce_res`, each
    /// partition's sum of the results into that `[P, 1]` tile (`reduce_cmd = reset_reduce`).
    pub fn exponential(
        &mut self,
        dst: TileId,
        data: TileId,
        max_value: Operand,
        reduce_res: Option<TileId>,
    ) -> Result<(), BuildError> {
        let (dst, src) = (self.whole(dst)?.0, self.whole(data)?.0);
        let bias = self.src(max_value)?;
        let acc = match reduce_res {
            Some(r) => Some(AccOut {
                op: Alu::Add,
                view: self.whole(r)?.0,
            }),
            None => None,
        };
        let data = InstrData::Act {
            dst: Dst::overwrite(dst),
            src,
            func: ActFn::Exp,
            scale: Src::None,
            bias,
            acc,
        };
        self.op(Opcode::Exponential, data, None, None)
    }

    /// `tensor_reduce`: `dst = op` over the free axes in `axes` (bit `j` = free axis `j`).
    pub fn tensor_reduce(
        &mut self,
        dst: TileId,
        op: Alu,
        data: TileId,
        axes: u8,
        negate: bool,
    ) -> Result<(), BuildError> {
        let (dst, src) = (self.whole(dst)?.0, self.whole(data)?.0);
        let data = InstrData::Reduce {
            dst: Dst::overwrite(dst),
            src,
            op,
            axes,
            negate,
        };
        self.op(Opcode::TensorReduce, data, None, None)
    }

    /// `iota`: `dst` holds the values of `expr` over its grid.
    pub fn iota(&mut self, dst: TileId, expr: AxisIndex) -> Result<(), BuildError> {
        let dst = self.whole(dst)?.0;
        let expr = self.expr(expr)?;
        let data = InstrData::Iota {
            dst: Dst::overwrite(dst),
            expr,
        };
        self.op(Opcode::Iota, data, None, None)
    }

    /// `max8`: the 8 largest values of each partition of `src`, in descending order, into
    /// `dst` (`[P, 8]`).
    pub fn max8(&mut self, dst: TileId, src: TileId) -> Result<(), BuildError> {
        self.unary(Opcode::Max8, dst, src)
    }

    /// `nc_find_index8`: per partition, the index of the first element of `data` equal to each
    /// of the 8 `vals`, into `dst` (`[P, 8]`, uint32 or uint16).
    pub fn nc_find_index8(
        &mut self,
        dst: TileId,
        data: TileId,
        vals: TileId,
    ) -> Result<(), BuildError> {
        self.match8(Opcode::FindIndex8, dst, data, vals, None, None)
    }

    /// `nc_match_replace8`: `data` with the first match of each of the 8 `vals` of a partition
    /// replaced by `imm`, into `dst`; with `dst_idx`, the replaced elements' indices there.
    pub fn nc_match_replace8(
        &mut self,
        dst: TileId,
        data: TileId,
        vals: TileId,
        imm: Scalar,
        dst_idx: Option<TileId>,
    ) -> Result<(), BuildError> {
        self.match8(Opcode::MatchReplace8, dst, data, vals, Some(imm), dst_idx)
    }

    fn match8(
        &mut self,
        opcode: Opcode,
        dst: TileId,
        data: TileId,
        vals: TileId,
        imm: Option<Scalar>,
        dst_idx: Option<TileId>,
    ) -> Result<(), BuildError> {
        let (dst, data, vals) = (self.whole(dst)?.0, self.whole(data)?.0, self.whole(vals)?.0);
        let idx = match dst_idx {
            Some(t) => Some(self.whole(t)?.0),
            None => None,
        };
        let data = InstrData::Match8 {
            dst: Dst::overwrite(dst),
            data,
            vals,
            imm,
            idx,
        };
        self.op(opcode, data, None, None)
    }

    /// `select_reduce`: `dst = pred ? on_true : on_false` (`pred` negated when `reverse`), and,
    /// with `reduce_res`, the maximum of each partition's results into that `[P, 1]` tile.
    pub fn select_reduce(
        &mut self,
        dst: TileId,
        pred: TileId,
        on_true: TileId,
        on_false: Operand,
        reverse: bool,
        reduce_res: Option<TileId>,
    ) -> Result<(), BuildError> {
        let (dst, pred, on_true) = (
            self.whole(dst)?.0,
            self.whole(pred)?.0,
            self.whole(on_true)?.0,
        );
        let on_false = self.src(on_false)?;
        let acc = match reduce_res {
            Some(t) => Some(AccOut {
                op: Alu::Max,
                view: self.whole(t)?.0,
            }),
            None => None,
        };
        let data = InstrData::SelectReduce {
            dst: Dst::overwrite(dst),
            pred,
            on_true,
            on_false,
            reverse,
            acc,
        };
        self.op(Opcode::SelectReduce, data, None, None)
    }

    /// `rand`: `dst` holds uniform values in `[0, 1)` from the generator.
    pub fn rand(&mut self, dst: TileId) -> Result<(), BuildError> {
        let dst = self.whole(dst)?.0;
        let data = InstrData::Rng {
            dst: Dst::overwrite(dst),
            src: Src::None,
            prob: Src::None,
        };
        self.op(Opcode::Rand, data, None, None)
    }

    /// `random_seed`: the generator's seed becomes the value of the one-element tile `seed`.
    pub fn random_seed(&mut self, seed: TileId) -> Result<(), BuildError> {
        let seed = self.whole(seed)?.0;
        self.op(Opcode::RandomSeed, InstrData::Seed { seed }, None, None)
    }

    /// `dropout`: `dst` holds `data` with each element replaced by 0 with probability `prob`
    /// (an immediate or a `[P, 1]` column).
    pub fn dropout(&mut self, dst: TileId, data: TileId, prob: Operand) -> Result<(), BuildError> {
        let dst = self.whole(dst)?.0;
        let src = Src::Tile(self.whole(data)?.0);
        let prob = self.src(prob)?;
        let data = InstrData::Rng {
            dst: Dst::overwrite(dst),
            src,
            prob,
        };
        self.op(Opcode::Dropout, data, None, None)
    }

    /// `rng(dst, engine)`: 32 random bits per element of `dst` (an integer tile; its least
    /// significant bits) from `engine`'s XORWOW generators (`Engine::Vector` or
    /// `Engine::GpSimd`).
    pub fn rng(&mut self, dst: TileId, engine: Engine) -> Result<(), BuildError> {
        let dst = self.whole(dst)?.0;
        let data = InstrData::Rng {
            dst: Dst::overwrite(dst),
            src: Src::None,
            prob: Src::None,
        };
        self.op(Opcode::Rng, data, Some(engine), None)
    }

    /// `rand_get_state(dst, engine)`: `engine`'s XORWOW state into the uint32 tile `dst`
    /// (`[P, 6]` for the GpSimd engine, `[P, 24]` for the Vector engine).
    pub fn rand_get_state(&mut self, dst: TileId, engine: Engine) -> Result<(), BuildError> {
        let dst = self.whole(dst)?.0;
        let data = InstrData::Rng {
            dst: Dst::overwrite(dst),
            src: Src::None,
            prob: Src::None,
        };
        self.op(Opcode::RandGetState, data, Some(engine), None)
    }

    /// `rand_set_state(src_seeds, engine)`: `engine`'s XORWOW state from the uint32 tile
    /// `src_seeds` (`[P, 6]` for the GpSimd engine, `[P, 24]` for the Vector engine).
    pub fn rand_set_state(&mut self, src_seeds: TileId, engine: Engine) -> Result<(), BuildError> {
        let seed = self.whole(src_seeds)?.0;
        self.op(
            Opcode::RandSetState,
            InstrData::Seed { seed },
            Some(engine),
            None,
        )
    }

    /// `set_rng_seed(src_seeds)`: the Vector engine's XORWOW state derived from the 32-bit
    /// value of the `[1, 1]` tile `src_seeds`.
    pub fn set_rng_seed(&mut self, src_seeds: TileId) -> Result<(), BuildError> {
        let seed = self.whole(src_seeds)?.0;
        self.op(Opcode::SetRngSeed, InstrData::Seed { seed }, None, None)
    }

    /// `register_move(reg, src)`: register `reg` becomes an immediate or another register's
    /// value.
    pub fn register_move(&mut self, reg: RegId, src: RegSrc) -> Result<(), BuildError> {
        let data = InstrData::Register {
            reg,
            src,
            tile: None,
        };
        self.op(Opcode::RegisterMove, data, None, None)
    }

    /// `register_load(reg, src)`: register `reg` becomes the value of the one-element integer
    /// tile `src`.
    pub fn register_load(&mut self, reg: RegId, src: TileId) -> Result<(), BuildError> {
        let tile = Some(self.whole(src)?.0);
        let data = InstrData::Register {
            reg,
            src: RegSrc::None,
            tile,
        };
        self.op(Opcode::RegisterLoad, data, None, None)
    }

    /// `register_store(dst, reg)`: the one-element integer tile `dst` becomes register `reg`'s
    /// value.
    pub fn register_store(&mut self, dst: TileId, reg: RegId) -> Result<(), BuildError> {
        let tile = Some(self.whole(dst)?.0);
        let data = InstrData::Register {
            reg,
            src: RegSrc::None,
            tile,
        };
        self.op(Opcode::RegisterStore, data, None, None)
    }

    /// `rand2(dst, min, max)`: uniform values in `[min, max]` (each an immediate or a
    /// `[P, 1]` fp32 column) from the Vector engine's XORWOW generators, converted to `dst`'s
    /// dtype.
    pub fn rand2(&mut self, dst: TileId, min: Operand, max: Operand) -> Result<(), BuildError> {
        let dst = self.whole(dst)?.0;
        let (src, prob) = (self.src(min)?, self.src(max)?);
        let data = InstrData::Rng {
            dst: Dst::overwrite(dst),
            src,
            prob,
        };
        self.op(Opcode::Rand2, data, None, None)
    }

    /// `range_select`: `dst[p, i] = on_true[p, i]` where `(start + i) cmp[0] bounds[0][p]` and
    /// `(start + i) cmp[1] bounds[1][p]` hold, fp32's lowest value elsewhere; with
    /// `reduce_res`, the maximum of each partition's results into that `[P, 1]` tile.
    pub fn range_select(
        &mut self,
        dst: TileId,
        on_true: TileId,
        bounds: [TileId; 2],
        cmp: [crate::ir::Cmp; 2],
        start: i32,
        reduce_res: Option<TileId>,
    ) -> Result<(), BuildError> {
        let (dst, on_true) = (self.whole(dst)?.0, self.whole(on_true)?.0);
        let bounds = [self.whole(bounds[0])?.0, self.whole(bounds[1])?.0];
        let acc = match reduce_res {
            Some(t) => Some(AccOut {
                op: Alu::Max,
                view: self.whole(t)?.0,
            }),
            None => None,
        };
        let data = InstrData::RangeSelect {
            dst: Dst::overwrite(dst),
            on_true,
            bounds,
            cmp,
            start,
            acc,
        };
        self.op(Opcode::RangeSelect, data, None, None)
    }

    /// `nc_matmul_mx`: `dst = stationaryᵀ · moving` of packed MX operands dequantized by
    /// their scale tiles (`scales[0]` the stationary's, `scales[1]` the moving's), overwriting
    /// `dst` (`accumulate` false) or adding into it.
    pub fn nc_matmul_mx(
        &mut self,
        dst: TileId,
        stationary: TileId,
        moving: TileId,
        scales: [TileId; 2],
        accumulate: bool,
    ) -> Result<(), BuildError> {
        let (dst, stationary, moving) = (
            self.whole(dst)?.0,
            self.whole(stationary)?.0,
            self.whole(moving)?.0,
        );
        let scales = [self.whole(scales[0])?.0, self.whole(scales[1])?.0];
        let write = if accumulate {
            Write::Accumulate(crate::func::Alu::Add)
        } else {
            Write::Overwrite
        };
        let data = InstrData::MatmulMx {
            dst: Dst { view: dst, write },
            stationary,
            moving,
            scales,
        };
        self.op(Opcode::MatmulMx, data, None, None)
    }

    /// `quantize_mx`: `src` (fp16/bf16) quantized to MXFP8 in `dst` (`float8_e5m2_x4` or
    /// `float8_e4m3fn_x4`), one E8M0 scale per group of 8 partitions × 4 values in `scale`
    /// (at partition [`crate::mx_scale_partition`] of the group).
    pub fn quantize_mx(
        &mut self,
        dst: TileId,
        src: TileId,
        scale: TileId,
    ) -> Result<(), BuildError> {
        let (dst, src, scale) = (self.whole(dst)?.0, self.whole(src)?.0, self.whole(scale)?.0);
        let data = InstrData::QuantizeMx {
            dst: Dst::overwrite(dst),
            src,
            scale,
        };
        self.op(Opcode::QuantizeMx, data, None, None)
    }

    /// `nc_stream_shuffle`: partition `i` of each 32-partition quadrant of `dst` becomes
    /// partition `mask[i]` of the same quadrant of `src`, or stays as it was where `mask[i]` is
    /// [`crate::SHUFFLE_KEEP`].
    pub fn nc_stream_shuffle(
        &mut self,
        dst: TileId,
        src: TileId,
        mask: [u8; crate::SHUFFLE_QUADRANT],
    ) -> Result<(), BuildError> {
        let (dst, src) = (self.whole(dst)?.0, self.whole(src)?.0);
        let data = InstrData::Shuffle {
            dst: Dst::overwrite(dst),
            src,
            mask,
        };
        self.op(Opcode::NcStreamShuffle, data, None, None)
    }

    /// `local_gather`: each 16-partition group gathers `valid` runs of `elems` elements from
    /// each of its partitions of `src`, at the group's indices in `index`.
    pub fn local_gather(
        &mut self,
        dst: TileId,
        src: TileId,
        index: TileId,
        elems: u8,
        valid: u16,
    ) -> Result<(), BuildError> {
        let (dst, src, index) = (self.whole(dst)?.0, self.whole(src)?.0, self.whole(index)?.0);
        let data = InstrData::LocalGather {
            dst: Dst::overwrite(dst),
            src,
            index,
            elems,
            valid,
        };
        self.op(Opcode::LocalGather, data, None, None)
    }

    /// `dma_compute`: `dst = srcs[0] + srcs[1] + …` in fp32 on the DMA engines (one to
    /// [`crate::DMA_COMPUTE_SOURCES`] sources, each a whole tile of `dst`'s shape).
    pub fn dma_compute(&mut self, dst: TileId, srcs: &[TileId]) -> Result<(), BuildError> {
        if srcs.is_empty() || srcs.len() > crate::DMA_COMPUTE_SOURCES {
            return Err(BuildError::Usage(
                "dma_compute adds one to four sources per instruction",
            ));
        }
        let dst = self.whole(dst)?.0;
        let mut views = [None; crate::DMA_COMPUTE_SOURCES];
        for (slot, &src) in views.iter_mut().zip(srcs) {
            *slot = Some(self.whole(src)?.0);
        }
        let data = InstrData::DmaCompute {
            dst: Dst::overwrite(dst),
            srcs: views,
        };
        self.op(Opcode::DmaCompute, data, None, None)
    }

    /// `topk`: in each group of 16 partitions, the `K` largest of the `n` values of the
    /// group's snake in `src`, ascending, into `val_dst` and their snake indices into `idx_dst`
    /// (`K` their free size; both in the snake layout). `n` above 65535 is an error.
    pub fn topk(
        &mut self,
        val_dst: TileId,
        idx_dst: TileId,
        src: TileId,
        n: u32,
    ) -> Result<(), BuildError> {
        let n = u16::try_from(n).map_err(|_| BuildError::Usage("topk takes n < 65536"))?;
        let (val, idx, src) = (
            self.whole(val_dst)?.0,
            self.whole(idx_dst)?.0,
            self.whole(src)?.0,
        );
        let data = InstrData::TopK {
            val: Dst::overwrite(val),
            idx,
            src,
            n,
        };
        self.op(Opcode::TopK, data, None, None)
    }

    /// How many instructions the program has so far: the index the next one gets (for
    /// [`ProgramBuilder::name_since`] and [`ProgramBuilder::no_reorder_since`]).
    pub fn instr_count(&self) -> u32 {
        u32::try_from(self.buf.instrs.len()).unwrap_or(u32::MAX)
    }

    /// NKI's `name = "..."`: names the instructions emitted since `first` (an
    /// [`ProgramBuilder::instr_count`] taken before them); none emitted, nothing is named.
    pub fn name_since(&mut self, name: &str, first: u32) -> Result<(), BuildError> {
        let end = self.instr_count();
        Ok(self.buf.control.name(name, first, end)?)
    }

    /// NKI's `kernel.with_schedule([(after, before)])`: every instruction named `after` waits
    /// for the instructions named `before`, which come earlier in the program.
    pub fn schedule(&mut self, after: &str, before: &str) -> Result<(), BuildError> {
        Ok(self.buf.control.edge(after, before)?)
    }

    /// NKI's `with nl.no_reorder():` over the instructions emitted since `first`; blocks do not
    /// overlap (one inside another is redundant: give the outer one only).
    pub fn no_reorder_since(&mut self, first: u32) -> Result<(), BuildError> {
        let end = self.instr_count();
        if self
            .buf
            .control
            .ordered
            .last()
            .is_some_and(|o| o.end > first)
        {
            return Err(BuildError::Usage("no_reorder blocks do not overlap"));
        }
        self.buf.control.ordered(first, end);
        Ok(())
    }

    /// `nonzero_with_count`: on partitions `0, 16, …` of `src` and `dst`, the positions of the
    /// nonzero elements plus `index_offset`, then `padding_val`, then the count.
    pub fn nonzero_with_count(
        &mut self,
        dst: TileId,
        src: TileId,
        index_offset: i32,
        padding_val: i32,
    ) -> Result<(), BuildError> {
        let (dst, src) = (self.whole(dst)?.0, self.whole(src)?.0);
        let data = InstrData::Nonzero {
            dst: Dst::overwrite(dst),
            src,
            offset: index_offset,
            padding: padding_val,
        };
        self.op(Opcode::NonzeroWithCount, data, None, None)
    }

    /// Closes the program and applies every rule ([`ProgramBuf::finish`]).
    pub fn finish(self) -> Result<CompiledProgram, BuildError> {
        if !self.open.is_empty() {
            return Err(BuildError::Usage("a loop is still open"));
        }
        self.buf.finish().map_err(BuildError::Rules)
    }
}
