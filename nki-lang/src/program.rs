//! Programs: a kernel's signature, tiles and instructions as plain data.

use crate::constraint::Constraint;
use crate::dtype::DType;
use crate::ir::{AxisIndex, HbmAccess, Instr, Mask, TileView};
use crate::schedule_control::ScheduleControl;
use crate::shape::{Dim, Extent, SymbolValues, TileShape};
use crate::target::{Memory, Target};

/// What an HBM tensor is to a kernel: an input, an output it creates and returns, or a tensor
/// a launch allocates for it (scratch, constants) that the caller never sees.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TensorRole {
    /// A kernel parameter; immutable.
    Input,
    /// A `shared_hbm` tensor the kernel creates and returns.
    Output,
    /// A `shared_hbm` tensor the kernel creates and does not return: scratch that every SPMD
    /// instance sees, allocated by each launch, uninitialised.
    Scratch,
    /// A `private_hbm` (`hbm`) tensor: scratch of one SPMD instance (and, declared in a loop,
    /// of one iteration of that loop), uninitialised.
    Private,
    /// An `nl.shared_constant` tensor: immutable data of the program ([`TensorDecl::data`]).
    Constant,
}

impl TensorRole {
    /// Whether a launch allocates the tensor itself (scratch and constants).
    pub const fn allocated(self) -> bool {
        matches!(
            self,
            TensorRole::Scratch | TensorRole::Private | TensorRole::Constant
        )
    }
    /// Whether instructions may write the tensor (outputs and scratch).
    pub const fn writable(self) -> bool {
        matches!(
            self,
            TensorRole::Output | TensorRole::Scratch | TensorRole::Private
        )
    }
    /// NKI's buffer name of the tensor (`input`, `shared_hbm`, `private_hbm`, `shared_constant`).
    pub const fn buffer_name(self) -> &'static str {
        match self {
            TensorRole::Input => "input",
            TensorRole::Output | TensorRole::Scratch => "shared_hbm",
            TensorRole::Private => "private_hbm",
            TensorRole::Constant => "shared_constant",
        }
    }
}

/// An HBM tensor of the kernel's signature.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorDecl<'a> {
    /// Its name in the kernel source.
    pub name: &'a str,
    /// Element type.
    pub dtype: DType,
    /// Dimensions, literal or symbolic.
    pub shape: &'a [Dim],
    /// Input, output, scratch or constant.
    pub role: TensorRole,
    /// For a [`TensorRole::Private`] tensor declared in a loop: the `LoopBegin` instruction of
    /// the innermost loop whose body declares it (each iteration has a tensor of its own, as a
    /// tile declared there does); `None` otherwise.
    pub scope: Option<u32>,
    /// A [`TensorRole::Constant`]'s elements in row-major order as the kernel wrote them: each
    /// an f32, 4 bytes little-endian (a launch converts them to [`TensorDecl::dtype`] as
    /// `tensor_copy` from f32 does); empty for every other role.
    pub data: &'a [u8],
}

/// An HBM tensor under other dimensions: NKI's `tensor.reshape(shape)`, a view of the same
/// elements in the same row-major order. Accesses index it with
/// [`crate::HbmAccess::reshape`]; what they read and write is the tensor's.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReshapeDecl<'a> {
    /// The name it is bound to in the kernel source.
    pub name: &'a str,
    /// The tensor it views (index in the program's tensor table).
    pub tensor: u8,
    /// Its dimensions, literal or symbolic; their product is the tensor's element count
    /// (checked when the program is built if every dimension is known, else at launch).
    pub shape: &'a [Dim],
}

impl ReshapeDecl<'_> {
    /// The number of elements its dimensions hold for symbol values `syms`, or `None` past
    /// `u64::MAX`. A launch runs only when it is its tensor's count.
    pub fn elements(&self, syms: &SymbolValues) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |n, d| n.checked_mul(d.eval(syms)))
    }
}

/// An on-chip tile with the address the compiler gave it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileDecl<'a> {
    /// Its name in the kernel source (`_tN` for temporaries).
    pub name: &'a str,
    /// SBUF or PSUM.
    pub memory: Memory,
    /// Element type.
    pub dtype: DType,
    /// Partition size, then free sizes.
    pub shape: TileShape,
    /// Byte offset within each partition it occupies (for PSUM: bank × 2048).
    pub addr: u32,
    /// Where it is declared: the `LoopBegin` instruction of the innermost loop whose body
    /// declares it, or `None` at the kernel's top level. Each iteration of that loop has a tile
    /// of its own (what one iteration wrote, the next does not see); a tile declared outside a
    /// loop is one tile shared by the loop's iterations.
    pub scope: Option<u32>,
    /// For a tile whose first free axis is a block axis sized by a symbolic dimension: the
    /// number of blocks a launch uses (`K / 128`); `shape` holds the capacity reserved for
    /// them ([`crate::TileBuf::blocks`]).
    pub blocks: Option<Extent>,
    /// Number of block axes, stored right after the partition axis ([`crate::TileBuf::block_axes`]).
    pub block_axes: u8,
}

impl TileDecl<'_> {
    /// Bytes the tile occupies in each partition.
    pub const fn bytes_per_partition(&self) -> u64 {
        self.shape
            .free_elems()
            .saturating_mul(self.dtype.size() as u64)
    }

    /// Bytes per partition a launch with symbol values `syms` uses: for a tile whose blocks a
    /// symbolic dimension counts ([`TileDecl::blocks`]), the launch's blocks (at most the
    /// capacity the tile has room for), else [`TileDecl::bytes_per_partition`].
    pub fn bytes_in_use(&self, syms: &SymbolValues) -> u64 {
        let all = self.bytes_per_partition();
        let (Some(count), Some(&capacity)) = (self.blocks, self.shape.dims().get(1)) else {
            return all;
        };
        let capacity = u64::from(capacity);
        let per_block = all.checked_div(capacity).unwrap_or(0);
        count.eval(syms).min(capacity).saturating_mul(per_block)
    }
}

/// A compiled kernel: its signature, tiles (with addresses), loop variable names,
/// instructions and launch constraints.
///
/// A `Program` is plain borrowed data: `#[kernel]` emits one as a `static`, and
/// [`crate::CompiledProgram::parts`] lends one built at run time. Either way it has been
/// checked against every rule in [`crate::rules`]; the fields are private so that an unchecked
/// program cannot be made.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Program<'a> {
    name: &'a str,
    target: Target,
    symbols: &'a [&'a str],
    tensors: &'a [TensorDecl<'a>],
    reshapes: &'a [ReshapeDecl<'a>],
    tiles: &'a [TileDecl<'a>],
    loop_vars: &'a [&'a str],
    views: &'a [TileView],
    accesses: &'a [HbmAccess],
    masks: &'a [Mask],
    exprs: &'a [AxisIndex],
    instrs: &'a [Instr],
    constraints: &'a [Constraint],
    sbuf_bytes: u32,
    psum_banks: u32,
    input_count: usize,
    output_count: usize,
    control: ScheduleControl<'a>,
}

impl<'a> Program<'a> {
    /// Assembles a program that `#[kernel]` or [`crate::ProgramBuf::finish`] has checked.
    /// Not for direct use: a program that breaks the rules can crash the executor's bounds
    /// checks.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn from_checked_parts(
        name: &'a str,
        target: Target,
        symbols: &'a [&'a str],
        tensors: &'a [TensorDecl<'a>],
        reshapes: &'a [ReshapeDecl<'a>],
        tiles: &'a [TileDecl<'a>],
        loop_vars: &'a [&'a str],
        views: &'a [TileView],
        accesses: &'a [HbmAccess],
        masks: &'a [Mask],
        exprs: &'a [AxisIndex],
        instrs: &'a [Instr],
        constraints: &'a [Constraint],
        sbuf_bytes: u32,
        psum_banks: u32,
    ) -> Program<'a> {
        let mut input_count = 0;
        while input_count < tensors.len() && matches!(tensors[input_count].role, TensorRole::Input)
        {
            // input_count < tensors.len()
            #[allow(clippy::arithmetic_side_effects)]
            {
                input_count += 1;
            }
        }
        let mut output_end = input_count;
        while output_end < tensors.len() && matches!(tensors[output_end].role, TensorRole::Output) {
            // output_end < tensors.len()
            #[allow(clippy::arithmetic_side_effects)]
            {
                output_end += 1;
            }
        }
        // input_count <= output_end
        #[allow(clippy::arithmetic_side_effects)]
        let output_count = output_end - input_count;
        Program {
            name,
            target,
            symbols,
            tensors,
            reshapes,
            tiles,
            loop_vars,
            views,
            accesses,
            masks,
            exprs,
            instrs,
            constraints,
            sbuf_bytes,
            psum_banks,
            input_count,
            output_count,
            control: ScheduleControl::EMPTY,
        }
    }

    /// The same program with its scheduling control (instruction names, `with_schedule` edges,
    /// `no_reorder!` blocks), which [`crate::ProgramBuf::finish`] or `#[kernel]` checked.
    #[doc(hidden)]
    pub const fn with_control(mut self, control: ScheduleControl<'a>) -> Program<'a> {
        self.control = control;
        self
    }

    /// Its instruction names, extra dependency edges and `no_reorder!` blocks
    /// ([`crate::schedule_control`]).
    #[inline]
    pub const fn control(&self) -> ScheduleControl<'a> {
        self.control
    }

    /// The kernel's name.
    #[inline]
    pub const fn name(&self) -> &'a str {
        self.name
    }
    /// The NeuronCore generation the program was checked against.
    #[inline]
    pub const fn target(&self) -> Target {
        self.target
    }
    /// Names of the symbolic dimensions, by symbol index.
    #[inline]
    pub const fn symbols(&self) -> &'a [&'a str] {
        self.symbols
    }
    /// HBM tensors: inputs in parameter order, then outputs in return order, then the scratch
    /// and constant tensors a launch allocates ([`Program::allocated`]).
    #[inline]
    pub const fn tensors(&self) -> &'a [TensorDecl<'a>] {
        self.tensors
    }
    /// The tensors' reshapes the accesses index (NKI's `tensor.reshape(shape)`), by
    /// [`HbmAccess::reshape`].
    #[inline]
    pub const fn reshapes(&self) -> &'a [ReshapeDecl<'a>] {
        self.reshapes
    }
    /// The dimensions `access` indexes: its reshape's, or its tensor's (empty for an index
    /// out of range, which a checked program does not have).
    #[inline]
    pub fn access_dims(&self, access: &HbmAccess) -> &'a [Dim] {
        match access.reshape {
            Some(r) => self.reshapes.get(usize::from(r)).map_or(&[], |r| r.shape),
            None => self
                .tensors
                .get(usize::from(access.tensor))
                .map_or(&[], |t| t.shape),
        }
    }
    /// The input tensors.
    #[inline]
    pub fn inputs(&self) -> &'a [TensorDecl<'a>] {
        &self.tensors[..self.input_count()]
    }
    /// The output tensors, in return order.
    #[inline]
    pub fn outputs(&self) -> &'a [TensorDecl<'a>] {
        &self.tensors[self.input_count..self.output_end()]
    }
    /// The scratch (`shared_hbm` not returned, `private_hbm`) and constant tensors, which each
    /// launch allocates and the caller never sees.
    #[inline]
    pub fn allocated(&self) -> &'a [TensorDecl<'a>] {
        &self.tensors[self.output_end()..]
    }
    /// The index of the first tensor after the outputs (at most the table's length).
    #[inline]
    const fn output_end(&self) -> usize {
        self.input_count.saturating_add(self.output_count)
    }
    /// The tensors after the inputs: the outputs, then [`Program::allocated`]. A launch binds
    /// each to memory it may write (by index in this slice: tensor index − input count).
    #[inline]
    pub fn owned(&self) -> &'a [TensorDecl<'a>] {
        &self.tensors[self.input_count..]
    }
    /// Number of inputs.
    #[inline]
    pub const fn input_count(&self) -> usize {
        self.input_count
    }
    /// On-chip tiles.
    #[inline]
    pub const fn tiles(&self) -> &'a [TileDecl<'a>] {
        self.tiles
    }
    /// The tile views instructions use (indexed by [`crate::ir::ViewId`]).
    #[inline]
    pub const fn views(&self) -> &'a [TileView] {
        self.views
    }
    /// The HBM accesses instructions use (indexed by [`crate::ir::AccessId`]).
    #[inline]
    pub const fn accesses(&self) -> &'a [HbmAccess] {
        self.accesses
    }
    /// The masks instructions use (indexed by [`crate::ir::MaskId`]).
    #[inline]
    pub const fn masks(&self) -> &'a [Mask] {
        self.masks
    }
    /// The grid expressions instructions use (indexed by [`crate::ir::ExprId`]).
    #[inline]
    pub const fn exprs(&self) -> &'a [AxisIndex] {
        self.exprs
    }
    /// Names of the loop induction variables (indexed by `InstrData::LoopBegin::var`).
    #[inline]
    pub const fn loop_vars(&self) -> &'a [&'a str] {
        self.loop_vars
    }
    /// The instructions.
    #[inline]
    pub const fn instrs(&self) -> &'a [Instr] {
        self.instrs
    }
    /// Whether the program has a device loop (`fori_loop`, `dynamic_range`, `while_loop`): its
    /// trip counts are data, read from registers at run time.
    pub fn has_device_loops(&self) -> bool {
        self.instrs.iter().any(
            |i| matches!(i.data, crate::ir::InstrData::LoopBegin { kind, .. } if kind.is_device()),
        )
    }
    /// Conditions on the symbolic dimensions, checked at launch.
    #[inline]
    pub const fn constraints(&self) -> &'a [Constraint] {
        self.constraints
    }
    /// Highest SBUF byte per partition any tile uses.
    #[inline]
    pub const fn sbuf_bytes(&self) -> u32 {
        self.sbuf_bytes
    }
    /// Number of PSUM banks used.
    #[inline]
    pub const fn psum_banks(&self) -> u32 {
        self.psum_banks
    }
}
