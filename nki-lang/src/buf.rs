//! Programs under construction: [`ProgramBuf`], owned and unchecked, with its HBM tensors
//! ([`TensorBuf`]), its tiles ([`TileBuf`]) before allocation, and the pools of views, accesses,
//! masks and expressions its instructions refer to by index.
//!
//! `#[kernel]` lowers a kernel body into a [`ProgramBuf`] at compile time and a tool can build
//! one at run time ([`crate::builder::ProgramBuilder`]); both call [`ProgramBuf::finish`] (the
//! validator, `verify/`) to check it and turn it into a [`crate::CompiledProgram`].

use crate::dtype::DType;
use crate::ir::ops::{self, Blame, InferIn, Slot, ViewInfo};
use crate::ir::{
    AccessId, AxisIndex, ExprId, HbmAccess, Instr, MAX_SLOTS, Mask, MaskId, OperandRef, TileView,
    ViewId,
};
use crate::program::TensorRole;
use crate::shape::{Dim, Extent, TileShape};
use crate::target::{Memory, Target};

/// An HBM tensor of a [`ProgramBuf`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorBuf {
    /// Its name in the kernel source.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dimensions, literal or symbolic.
    pub shape: Vec<Dim>,
    /// Input, output, scratch or constant.
    pub role: TensorRole,
    /// See [`crate::TensorDecl::scope`].
    pub scope: Option<u32>,
    /// See [`crate::TensorDecl::data`].
    pub data: Vec<u8>,
}

/// A reshape of an HBM tensor of a [`ProgramBuf`] (see [`crate::ReshapeDecl`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReshapeBuf {
    /// The name it is bound to in the kernel source.
    pub name: String,
    /// The tensor it views.
    pub tensor: u8,
    /// Its dimensions, literal or symbolic.
    pub shape: Vec<Dim>,
}

/// A tile of a [`ProgramBuf`], before allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileBuf {
    /// Its name in the kernel source (`_tN` for temporaries).
    pub name: String,
    /// SBUF or PSUM.
    pub memory: Memory,
    /// Element type.
    pub dtype: DType,
    /// Partition size, then free sizes.
    pub shape: TileShape,
    /// The `LoopBegin` of the innermost loop whose body declares it (`None`: the kernel's top
    /// level); see [`crate::TileDecl::scope`].
    pub scope: Option<u32>,
    /// For a tile whose first free axis is a block axis sized by a symbolic dimension (NKI's
    /// `nl.ndarray((K // 128, nl.par_dim(128), 512))`): the number of blocks, known at launch.
    /// The axis' size in `shape` is replaced by [`ProgramBuf::finish`] with the capacity it
    /// reserves (every block the SBUF left beside the other tiles holds); a launch whose count
    /// exceeds it is refused ([`crate::Constraint::Blocks`]).
    pub blocks: Option<Extent>,
    /// Number of block axes (NKI's axes before `par_dim`), stored right after the partition
    /// axis in `shape`: each block is a tile of the remaining free axes. A PSUM tile with block
    /// axes takes one bank per 2 KiB of blocks ([`crate::rules::check_psum_block_tile`]).
    pub block_axes: u8,
}

/// A program under construction: owned, unchecked, without tile addresses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgramBuf {
    /// Kernel name.
    pub name: String,
    /// Target generation.
    pub target: Target,
    /// Symbolic dimension names.
    pub symbols: Vec<String>,
    /// HBM tensors: inputs first, then outputs.
    pub tensors: Vec<TensorBuf>,
    /// Reshapes of the tensors ([`crate::HbmAccess::reshape`]).
    pub reshapes: Vec<ReshapeBuf>,
    /// On-chip tiles.
    pub tiles: Vec<TileBuf>,
    /// Loop variable names.
    pub loop_vars: Vec<String>,
    /// The tile views instructions use ([`ViewId`]).
    pub views: Vec<TileView>,
    /// The HBM accesses instructions use ([`AccessId`]).
    pub accesses: Vec<HbmAccess>,
    /// The masks instructions use ([`MaskId`]).
    pub masks: Vec<Mask>,
    /// The grid expressions instructions use ([`ExprId`]).
    pub exprs: Vec<AxisIndex>,
    /// Instructions.
    pub instrs: Vec<Instr>,
    /// Instruction names, `with_schedule` edges and `no_reorder!` blocks
    /// ([`crate::schedule_control`]).
    pub control: crate::schedule_control::ControlBuf,
}

/// Adds `item` to `pool` unless an equal one is there; its index, or `None` past `u16::MAX`.
fn intern<T: PartialEq>(pool: &mut Vec<T>, item: T) -> Option<u16> {
    if let Some(i) = pool.iter().position(|x| *x == item) {
        return u16::try_from(i).ok();
    }
    let i = u16::try_from(pool.len()).ok()?;
    pool.push(item);
    Some(i)
}

impl ProgramBuf {
    /// The view's id in the pool (an equal view is stored once), or `None` when the pool is
    /// full.
    pub fn add_view(&mut self, v: TileView) -> Option<ViewId> {
        intern(&mut self.views, v).map(ViewId)
    }

    /// The access's id in the pool (an equal access is stored once), or `None` when full.
    pub fn add_access(&mut self, a: HbmAccess) -> Option<AccessId> {
        intern(&mut self.accesses, a).map(AccessId)
    }

    /// The mask's id in the pool (an equal mask is stored once), or `None` when full.
    pub fn add_mask(&mut self, m: Mask) -> Option<MaskId> {
        intern(&mut self.masks, m).map(MaskId)
    }

    /// The expression's id in the pool, or `None` when full.
    pub fn add_expr(&mut self, e: AxisIndex) -> Option<ExprId> {
        intern(&mut self.exprs, e).map(ExprId)
    }

    /// What the rules know of a view: its tile's memory and dtype, its shape.
    pub fn view_info(&self, v: ViewId) -> Option<ViewInfo> {
        let view = self.views.get(v.index())?;
        let tile = self.tiles.get(view.tile as usize)?;
        Some(ViewInfo {
            memory: tile.memory,
            dtype: view.dtype_of(tile.dtype),
            shape: view.shape,
            column: view.is_column(),
        })
    }

    /// What the rules know of an access: HBM, its tensor's dtype, its grid shape.
    pub fn access_info(&self, a: AccessId) -> Option<ViewInfo> {
        let access = self.accesses.get(a.index())?;
        let tensor = self.tensors.get(access.tensor as usize)?;
        Some(ViewInfo {
            memory: Memory::Hbm,
            dtype: tensor.dtype,
            shape: access.shape,
            column: false,
        })
    }

    /// What the rules know of each operand slot of `ins` (an operand whose index is out of
    /// range is [`Slot::Absent`]; [`ProgramBuf::finish`] reports it).
    pub fn slots(&self, ins: &Instr) -> [Slot; MAX_SLOTS] {
        let mut slots = [Slot::Absent; MAX_SLOTS];
        for o in ins.operands() {
            slots[o.slot as usize] = match o.operand {
                OperandRef::View(v) => self.view_info(v).map_or(Slot::Absent, Slot::View),
                OperandRef::Access(a) => self.access_info(a).map_or(Slot::Absent, Slot::Access),
                OperandRef::Expr(_) => Slot::Expr,
                OperandRef::Imm(x) => Slot::Imm(x),
            };
        }
        slots
    }

    /// Applies `ins`'s opcode rules ([`ops::infer`]) to its operands as this program has them.
    pub fn infer(&self, ins: &Instr) -> Result<Option<ops::Inferred>, Blame> {
        ops::infer(&InferIn {
            opcode: ins.opcode,
            engine: ins.engine,
            data: &ins.data,
            slots: self.slots(ins),
            mask_axes: ins
                .mask
                .and_then(|m| self.masks.get(m.index()))
                .map_or(0, |m| {
                    m.terms()
                        .iter()
                        .filter(|t| t.coef != 0)
                        .fold(0u8, |axes, t| {
                            axes | 1u8.checked_shl(t.axis.into()).unwrap_or(0)
                        })
                }),
            target: self.target,
        })
    }
}
