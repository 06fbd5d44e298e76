//! The hardware's tiling and memory rules, each implemented once.
//!
//! `#[kernel]` calls these while lowering a kernel body and reports a violation as a compile
//! error on the offending tokens; [`crate::ProgramBuf::finish`] calls the same functions for
//! programs built at run time. Each violation names NKI's error code.
//!
//! The rules depend on the hardware's facts only (element types, shapes, function codes, the
//! target's memories, engines and sizes), not on the instruction set: the opcode table
//! ([`crate::ir::ops`]) applies them to instructions.

use thiserror::Error;

use crate::dtype::DType;
use crate::shape::{Dim, TileShape};
use crate::target::{
    Engine, GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, Memory, PARTITIONS, PSUM_BANK_BYTES,
    PSUM_BANKS, Target,
};

/// A broken rule, with the limit it breaks.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RuleViolation {
    /// TC#1: a tile's partition dimension is larger than 128.
    #[error(
        "partition dimension {size} exceeds the architecture limit of {PARTITIONS} (nl.tile_size.pmax)"
    )]
    PartitionDimTooLarge {
        /// The partition size.
        size: u64,
    },
    /// A tile with a dimension of size 0, or fewer than 2 dimensions.
    #[error(
        "a tile needs a partition dimension and at least one free dimension, all non-zero; got {shape}"
    )]
    BadTileShape {
        /// The shape.
        shape: TileShape,
    },
    /// TC#3: `nc_matmul`'s stationary operand has more than 128 free elements.
    #[error(
        "free size {size} of the stationary operand exceeds gemm_stationary_fmax = {GEMM_STATIONARY_FMAX}"
    )]
    StationaryTooWide {
        /// The stationary free size.
        size: u64,
    },
    /// TC#3: `nc_matmul`'s moving operand has more than 512 free elements.
    #[error("free size {size} of the moving operand exceeds gemm_moving_fmax = {GEMM_MOVING_FMAX}")]
    MovingTooWide {
        /// The moving free size.
        size: u64,
    },
    /// LC#1: the operands' contraction (partition) sizes differ.
    #[error(
        "contraction sizes differ: stationary has {stationary} partitions, moving has {moving}"
    )]
    ContractionMismatch {
        /// Partitions of the stationary operand.
        stationary: u32,
        /// Partitions of the moving operand.
        moving: u32,
    },
    /// An operand is in the wrong address space.
    #[error(
        "expected operand '{operand}' of '{op}' to be in address space '{expected}', but got a tile in '{found}' instead"
    )]
    WrongMemory {
        /// The operation (`load`, `nc_matmul`, ...).
        op: &'static str,
        /// The operand's role (`src`, `stationary`, ...).
        operand: &'static str,
        /// Where it must be (`hbm`, `sbuf`, `psum`, `sbuf|psum`).
        expected: &'static str,
        /// Where it is.
        found: Memory,
    },
    /// An operand has a dtype the operation cannot take.
    #[error("operand '{operand}' of '{op}' must be {expected}, but it is {found}")]
    WrongDType {
        /// The operation.
        op: &'static str,
        /// The operand's role.
        operand: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: DType,
    },
    /// A PSUM tile with block axes whose blocks do not fit banks: a block over a bank or not
    /// dividing one (a block would straddle two banks), or more banks than PSUM has.
    #[error(
        "a PSUM tile with block axes takes {bytes} bytes per partition in blocks of {block} bytes: each block must fit one bank of {PSUM_BANK_BYTES} bytes without straddling two (its size dividing the bank's), and the tile at most PSUM's {PSUM_BANKS} banks"
    )]
    PsumBlocks {
        /// Bytes per partition of the whole tile.
        bytes: u64,
        /// Bytes per partition of one block.
        block: u64,
    },
    /// TC#2: a PSUM tile does not fit one 2 KiB bank.
    #[error(
        "a PSUM tile of {bytes} bytes per partition exceeds one bank of {PSUM_BANK_BYTES} bytes (nl.tile_size.psum_fmax = 512 fp32)"
    )]
    PsumTileTooLarge {
        /// Bytes per partition.
        bytes: u64,
    },
    /// One SBUF tile is larger than a partition of the target's SBUF (whether or not an
    /// instruction uses it).
    #[error(
        "an SBUF tile of {bytes} bytes per partition exceeds a partition of {target} ({capacity} bytes)"
    )]
    SbufTileTooLarge {
        /// Bytes per partition.
        bytes: u64,
        /// Bytes per partition available.
        capacity: u32,
        /// The target's name.
        target: &'static str,
    },
    /// A fixed dimension of an HBM tensor above [`crate::MAX_TENSOR_DIM`]: no tensor can be
    /// bound to it.
    #[error(
        "axis {axis} of `{tensor}` has {size} elements, over the {max} an HBM tensor axis may have"
    )]
    TensorDimTooLarge {
        /// The tensor's name.
        tensor: String,
        /// The axis.
        axis: usize,
        /// Its size.
        size: u64,
        /// The most an axis may have.
        max: u64,
    },
    /// Live SBUF tiles exceed the per-partition capacity (first-fit placement, 64-byte
    /// aligned, by live range).
    #[error(
        "the live SBUF tiles need {needed} bytes per partition as placed, over the {capacity} bytes a partition of {target} has"
    )]
    SbufCapacity {
        /// Bytes per partition the live tiles need.
        needed: u64,
        /// Bytes per partition available.
        capacity: u32,
        /// The target's name.
        target: &'static str,
    },
    /// More PSUM tiles are live than there are banks.
    #[error("the PSUM tiles live at once need {needed} banks, but PSUM has {PSUM_BANKS} banks")]
    PsumBanks {
        /// Banks needed.
        needed: u32,
    },
    /// An operation's operand shapes do not match.
    #[error("shape {found} of operand '{operand}' of '{op}' does not match {expected}")]
    ShapeMismatch {
        /// The operation.
        op: &'static str,
        /// The operand's role.
        operand: &'static str,
        /// The shape it must have.
        expected: TileShape,
        /// The shape it has.
        found: TileShape,
    },
    /// A static index range lies outside a dimension.
    #[error(
        "out-of-bound access for tensor `{tensor}` on dimension {axis}: index range [{lo}, {hi}] exceeds dimension size of {size}"
    )]
    OutOfBounds {
        /// The tensor's or tile's name.
        tensor: String,
        /// The dimension.
        axis: usize,
        /// Smallest index reached.
        lo: i64,
        /// Largest index reached.
        hi: i64,
        /// The dimension's size.
        size: u64,
    },
    /// An index whose range over its grid overflows 64-bit arithmetic.
    #[error("the index of tensor `{tensor}` on dimension {axis} overflows 64-bit arithmetic")]
    IndexOverflow {
        /// The tensor's or tile's name.
        tensor: String,
        /// The dimension.
        axis: usize,
    },
    /// A value computed from the index variables (a mask's bound, an `iota` value, an index
    /// a mask cuts off) can leave ±2⁶² ([`crate::constraint::MAX_INDEX`]), the range index
    /// arithmetic is done in.
    #[error(
        "{what} reaches [{lo}, {hi}], beyond ±2^62 (4611686018427387904), the range of index arithmetic"
    )]
    IndexRange {
        /// What the value is.
        what: String,
        /// Its smallest value (saturated to `i64`).
        lo: i64,
        /// Its largest value (saturated to `i64`).
        hi: i64,
    },
    /// A kernel parameter is written: inputs are immutable.
    #[error("cannot update immutable parameter `{name}`: kernel inputs are read-only")]
    ImmutableParameter {
        /// The parameter.
        name: String,
    },
    /// A tile is read before any instruction writes it (in program order, which every
    /// execution follows): the read sees whatever SBUF or PSUM held.
    #[error(
        "tile `{tile}` is read before any instruction writes it: it holds whatever the memory held (write it first, or create it with `zeros`)"
    )]
    ReadBeforeWrite {
        /// The tile.
        tile: String,
    },
    /// Every iteration of an `affine_range` loop writes the same elements of an output.
    #[error(
        "every iteration of the `affine_range` loop over `{var}` writes the same elements of `{tensor}`, in an order the loop does not define: index the write with `{var}`, or use `sequential_range`"
    )]
    OutputDependencies {
        /// The output.
        tensor: String,
        /// The loop's variable.
        var: String,
    },
    /// An output tensor is never stored to.
    #[error("output tensor `{name}` is never written to")]
    OutputNotWritten {
        /// The output.
        name: String,
    },
    /// A reshape whose dimensions do not hold exactly the tensor's elements.
    #[error(
        "`{name}` reshapes `{tensor}` [{tensor_shape}] to [{shape}], which holds a different number of elements: a reshape views the same elements under other dimensions"
    )]
    ReshapeSize {
        /// The reshape's name.
        name: String,
        /// The tensor reshaped.
        tensor: String,
        /// The tensor's dimensions.
        tensor_shape: String,
        /// The reshape's dimensions.
        shape: String,
    },
    /// A symbolic dimension that no input's shape determines.
    #[error(
        "symbolic dimension `{name}` does not appear in any input's shape, so a launch cannot bind it"
    )]
    UnboundSymbol {
        /// The symbol.
        name: String,
    },
    /// A program built by hand is inconsistent (an index out of range, unbalanced loops).
    #[error("malformed program: {what}")]
    Malformed {
        /// What is wrong.
        what: &'static str,
    },
    /// Two operands of an elementwise instruction have different partition counts.
    #[error(
        "number of partitions (dimension 0 size of a tile) mismatch in parameters ({a}{a_shape}, {b}{b_shape}) of '{op}'"
    )]
    PartitionMismatch {
        /// The operation.
        op: &'static str,
        /// First operand's name.
        a: &'static str,
        /// Its shape.
        a_shape: TileShape,
        /// Second operand's name.
        b: &'static str,
        /// Its shape.
        b_shape: TileShape,
    },
    /// Two operands that may not both be in PSUM are.
    #[error("operands '{a}' and '{b}' of '{op}' cannot both be in PSUM")]
    BothInPsum {
        /// The operation.
        op: &'static str,
        /// First operand.
        a: &'static str,
        /// Second operand.
        b: &'static str,
    },
    /// An instruction that only overwrites its destination is asked to combine into it
    /// (`+=`, `op=`, an accumulation group); see [`crate::Opcode::accumulates`].
    #[error(
        "'{op}' cannot combine its result into its destination (`+=`, `op=`): it only overwrites; write it to a tile of its own and combine that"
    )]
    NoAccumulation {
        /// The operation.
        op: &'static str,
    },
    /// An ALU operation that cannot be used here.
    #[error("'{op}' cannot use the ALU operation '{alu}': {why}")]
    UnsupportedAlu {
        /// The operation.
        op: &'static str,
        /// The ALU operation.
        alu: crate::func::Alu,
        /// Why.
        why: &'static str,
    },
    /// An activation's `scale` is neither an immediate nor a `[P, 1]` vector.
    #[error(
        "the scale of 'activation' must be a compile-time scalar or a (P, 1) vector, but it is a tile of shape {shape}"
    )]
    ScaleNotScalarOrVector {
        /// The scale's shape.
        shape: TileShape,
    },
    /// An activation's `scale` vector is not fp32.
    #[error("the scale vector of 'activation' must be f32, but it is {found}")]
    ScaleInvalidType {
        /// Its dtype.
        found: DType,
    },
    /// An activation's `bias` is not a `[P, 1]` vector of fp32, fp16 or bf16.
    #[error(
        "the bias of 'activation' must be a (P, 1) vector of f32, f16 or bf16, but it is {}",
        if *column { format!("a (P, 1) vector of {found}") } else { format!("a tile of {found}{shape}") }
    )]
    BiasInvalidType {
        /// Its dtype.
        found: DType,
        /// Whether it holds one value per partition.
        column: bool,
        /// Its shape (as broadcast to the instruction's grid).
        shape: TileShape,
    },
    /// Two operands whose shapes do not broadcast to one grid.
    #[error(
        "shapes {a} and {b} of '{op}' do not broadcast: free dimensions must be equal or 1 (aligned from the right), partitions equal or 1"
    )]
    NotBroadcastable {
        /// The operation.
        op: &'static str,
        /// The first shape.
        a: TileShape,
        /// The second shape.
        b: TileShape,
    },
    /// An instruction on an engine that runs it only on a later generation.
    #[error(
        "'{op}' runs on the {engine} engine only on {needs}; this kernel is compiled for {target}"
    )]
    EngineNotOnTarget {
        /// The operation.
        op: &'static str,
        /// The engine.
        engine: Engine,
        /// The generation it needs.
        needs: &'static str,
        /// The kernel's target.
        target: &'static str,
    },
    /// An engine reads or writes a memory it cannot access.
    #[error(
        "the {engine} engine cannot access {found}: operand '{operand}' of '{op}' is in {found}"
    )]
    EngineMemory {
        /// The operation.
        op: &'static str,
        /// The operand.
        operand: &'static str,
        /// The engine.
        engine: Engine,
        /// The memory.
        found: Memory,
    },
    /// An operand's dimension is over an instruction's limit.
    #[error(
        "size of {what} {size} of operand '{operand}' of '{op}' exceeds the architecture limit of {limit}"
    )]
    SizeLimit {
        /// The operation.
        op: &'static str,
        /// The operand.
        operand: &'static str,
        /// Which dimension (`free size`, `partition dimension`, ...).
        what: &'static str,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// An operand has more dimensions than the operation supports.
    #[error("operand '{operand}' of '{op}' has {rank} dimensions; '{op}' supports at most {max}")]
    RankLimit {
        /// The operation.
        op: &'static str,
        /// The operand.
        operand: &'static str,
        /// Its rank.
        rank: usize,
        /// The most the operation takes.
        max: usize,
    },
    /// A reduction over the partition dimension, or over no axis.
    #[error("'{op}' reduces along the free axes of its tile (1 to {max_axis}); got axis {axes:?}")]
    ReduceAxes {
        /// The operation.
        op: &'static str,
        /// The axes asked for.
        axes: Vec<u8>,
        /// The last free axis.
        max_axis: usize,
    },
    /// A negative axis that counts back to the partition axis (`-2` of a 2-D tile).
    #[error(
        "'{op}' reduces along the free axes of its tile (1 to {max_axis}); axis {axis} counts back to the partition axis"
    )]
    NegativePartitionAxis {
        /// The operation.
        op: &'static str,
        /// The axis asked for.
        axis: i64,
        /// The last free axis.
        max_axis: usize,
    },
    /// An axis outside a tile's rank (NumPy's `AxisError`).
    #[error(
        "'{op}': axis {axis} is out of range for a tile of rank {rank} (a negative axis counts from the last: -1 is the last)"
    )]
    AxisOutOfRange {
        /// The operation.
        op: &'static str,
        /// The axis asked for.
        axis: i64,
        /// The tile's rank.
        rank: usize,
    },
    /// An operand that must be an immediate, or a `[P, 1]` vector, is not.
    #[error("operand '{operand}' of '{op}' must be {expected}")]
    OperandKind {
        /// The operation.
        op: &'static str,
        /// The operand.
        operand: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// `nc_matmul`'s or `nc_matmul_mx`'s PE-array tiling (`tile_position`, `tile_size`)
    /// outside its limits.
    #[error("{op}'s tile_position {position:?} and tile_size {size:?}: {why}")]
    PeTiling {
        /// The instruction.
        op: &'static str,
        /// `(row, col)`.
        position: (i64, i64),
        /// `(rows, cols)`.
        size: (i64, i64),
        /// The limit broken.
        why: &'static str,
    },
    /// A mask on an instruction that cannot be masked.
    #[error("'{op}' cannot be masked: {why}")]
    MaskNotSupported {
        /// The operation.
        op: &'static str,
        /// What to do instead.
        why: &'static str,
    },
    /// An instruction on an engine that cannot run it.
    #[error(
        "'{op}' cannot run on the {engine} engine; it runs on {}",
        engine_list(allowed)
    )]
    EngineNotAllowed {
        /// The operation.
        op: &'static str,
        /// The engine asked for.
        engine: Engine,
        /// The engines that can run it.
        allowed: &'static [Engine],
    },
    /// A partition access with a stride: the partition dimension must be contiguous.
    #[error(
        "the partition dimension must be accessed contiguously with stride 1 from a start that is a compile-time integer or set by loop variables of compile-time trip counts"
    )]
    PartitionStride,
    /// An operand's size outside the range an instruction takes (`max8`'s 8 to 16384 elements
    /// per partition).
    #[error(
        "{what} {size} of operand '{operand}' of '{op}' is outside the range it takes: {min} to {max}"
    )]
    SizeRange {
        /// The operation.
        op: &'static str,
        /// The operand.
        operand: &'static str,
        /// Which size (`free size`, ...).
        what: &'static str,
        /// Its size.
        size: u64,
        /// The smallest it may be.
        min: u64,
        /// The largest it may be.
        max: u64,
    },
    /// A partition start set by loop variables that the engines cannot start an access of
    /// `parts` partitions at (a multiple of `align` for every loop value).
    #[error(
        "a partition start set by a loop variable must be a multiple of {align} for an access of {parts} partitions: the engines start an access of more than 64 partitions at partition 0, of 33 to 64 at 0 or 64, of up to 32 at a multiple of 32"
    )]
    PartitionStart {
        /// The access's partitions.
        parts: u32,
        /// The alignment its start needs.
        align: u32,
    },
    /// A `shared_constant` tensor is written: constants are immutable.
    #[error("cannot write constant tensor `{name}`: `shared_constant` data is read-only")]
    ImmutableConstant {
        /// The constant.
        name: String,
    },
}

impl RuleViolation {
    /// NKI's error code for the violation (from its error manual).
    pub const fn code(&self) -> &'static str {
        match self {
            RuleViolation::PartitionDimTooLarge { .. } => "err_num_partition_exceed_arch_limit",
            RuleViolation::BadTileShape { .. } => "err_failed_to_infer_tile_from_local_tensor",
            RuleViolation::StationaryTooWide { .. } | RuleViolation::MovingTooWide { .. } => {
                "err_size_of_dimension_exceed_arch_limit"
            }
            RuleViolation::ContractionMismatch { .. } => "err_num_partition_mismatch",
            RuleViolation::WrongMemory { .. } => "err_unsupported_memory",
            RuleViolation::WrongDType { .. } => "err_unsupported_dtype",
            RuleViolation::PsumTileTooLarge { .. } | RuleViolation::PsumBlocks { .. } => {
                "err_psum_tile_exceeds_bank"
            }
            RuleViolation::SbufCapacity { .. } | RuleViolation::SbufTileTooLarge { .. } => {
                "err_sbuf_capacity_exceeded"
            }
            RuleViolation::TensorDimTooLarge { .. } => "err_size_of_dimension_exceed_arch_limit",
            RuleViolation::PsumBanks { .. } => "err_psum_banks_exceeded",
            RuleViolation::ShapeMismatch { .. } => "err_store_dst_shape_smaller_than_other_shape",
            RuleViolation::OutOfBounds { .. }
            | RuleViolation::IndexOverflow { .. }
            | RuleViolation::IndexRange { .. } => "err_tensor_access_out_of_bound",
            RuleViolation::PartitionStride => "err_partition_access_not_contiguous",
            // NKI's code for it is not documented: the project's own.
            RuleViolation::PartitionStart { .. } => "err_partition_start_alignment",
            RuleViolation::ImmutableParameter { .. } | RuleViolation::ImmutableConstant { .. } => {
                "err_cannot_update_immutable_parameter"
            }
            RuleViolation::OutputNotWritten { .. } => "err_tensor_output_not_written_to",
            RuleViolation::ReadBeforeWrite { .. } => "err_read_before_write",
            RuleViolation::OutputDependencies { .. } => "err_unexpected_output_dependencies",
            RuleViolation::UnboundSymbol { .. } => "err_unbound_symbolic_dimension",
            RuleViolation::ReshapeSize { .. } => "err_reshape_size_mismatch",
            RuleViolation::Malformed { .. } => "err_malformed_program",
            RuleViolation::EngineNotAllowed { .. } => "err_unsupported_engine",
            RuleViolation::PartitionMismatch { .. } => "err_num_partition_mismatch",
            RuleViolation::BothInPsum { .. } => "err_unsupported_memory",
            RuleViolation::UnsupportedAlu { .. } => "err_unsupported_alu_op",
            RuleViolation::NoAccumulation { .. } => "err_unsupported_accumulation",
            RuleViolation::ScaleNotScalarOrVector { .. } => "err_activation_scale_scalar_or_vector",
            RuleViolation::ScaleInvalidType { .. } => "err_activation_scale_invalid_type",
            RuleViolation::BiasInvalidType { .. } => "err_activation_bias_invalid_type",
            RuleViolation::SizeLimit { .. } => "err_size_of_dimension_exceed_arch_limit",
            RuleViolation::RankLimit { .. } => "err_exceed_max_supported_dimension",
            RuleViolation::ReduceAxes { .. } => "err_unsupported_reduce_axes",
            RuleViolation::AxisOutOfRange { .. } | RuleViolation::NegativePartitionAxis { .. } => {
                "err_unsupported_reduce_axes"
            }
            RuleViolation::OperandKind { .. } => "err_unsupported_operand",
            RuleViolation::MaskNotSupported { .. } => "err_unsupported_mask",
            RuleViolation::PeTiling { .. } => "err_invalid_tile_position",
            RuleViolation::NotBroadcastable { .. } => "err_incompatible_broadcast_shapes",
            RuleViolation::EngineMemory { .. } => "err_unsupported_memory",
            RuleViolation::EngineNotOnTarget { .. } => "err_unsupported_engine",
            RuleViolation::SizeRange { .. } => "err_size_of_dimension_exceed_arch_limit",
        }
    }
}

fn engine_list(engines: &[Engine]) -> String {
    let names: Vec<&str> = engines.iter().map(|e| e.name()).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "no engine".to_string(),
    }
}

/// An axis of a tile (or tensor) of rank `rank`, NumPy's way: `0 ≤ axis < rank` as is, a
/// negative one counted from the last (`-1` is `rank − 1`); anything else is out of range.
pub fn normalize_axis(op: &'static str, axis: i64, rank: usize) -> Result<i64, RuleViolation> {
    let r = i64::try_from(rank).unwrap_or(i64::MAX);
    match axis {
        a if (0..r).contains(&a) => Ok(a),
        a if a < 0 && a >= r.saturating_neg() => Ok(a.saturating_add(r)),
        a => Err(RuleViolation::AxisOutOfRange { op, axis: a, rank }),
    }
}

/// TC#1 and tile well-formedness: partitions ≤ 128, at least one free dimension, no empty
/// dimension.
pub fn check_tile_shape(shape: &TileShape) -> Result<(), RuleViolation> {
    if shape.partitions() as u64 > PARTITIONS as u64 {
        return Err(RuleViolation::PartitionDimTooLarge {
            size: shape.partitions() as u64,
        });
    }
    if shape.rank() < 2 || shape.dims().contains(&0) {
        return Err(RuleViolation::BadTileShape { shape: *shape });
    }
    Ok(())
}

/// TC#2: a PSUM tile fits one bank.
pub fn check_psum_tile(shape: &TileShape, dtype: DType) -> Result<(), RuleViolation> {
    let bytes = shape.free_elems().saturating_mul(u64::from(dtype.size()));
    if bytes > PSUM_BANK_BYTES as u64 {
        return Err(RuleViolation::PsumTileTooLarge { bytes });
    }
    Ok(())
}

/// A PSUM tile with `block_axes` block axes (stored after the partition axis, NKI's
/// `(B, par_dim(128), 512)`): each block fits one bank and no block straddles two (its bytes
/// divide a bank, or the whole tile fits one), and the tile fits PSUM's 8 banks. Without
/// block axes, [`check_psum_tile`].
pub fn check_psum_block_tile(
    shape: &TileShape,
    dtype: DType,
    block_axes: u8,
) -> Result<(), RuleViolation> {
    let size = u64::from(dtype.size());
    let total = shape.free_elems().saturating_mul(size);
    let bank = u64::from(PSUM_BANK_BYTES);
    if block_axes == 0 || total <= bank {
        return check_psum_tile(shape, dtype);
    }
    let block = shape
        .free()
        .iter()
        .skip(usize::from(block_axes))
        .fold(size, |n, &d| n.saturating_mul(u64::from(d)));
    let banks = total.div_ceil(bank);
    if block > bank || !bank.is_multiple_of(block) || banks > u64::from(PSUM_BANKS) {
        return Err(RuleViolation::PsumBlocks {
            bytes: total,
            block,
        });
    }
    Ok(())
}

/// A tile fits one partition of the target's SBUF (an SBUF tile; PSUM tiles have
/// [`check_psum_tile`]).
pub fn check_sbuf_tile(
    shape: &TileShape,
    dtype: DType,
    target: Target,
) -> Result<(), RuleViolation> {
    let bytes = shape.free_elems().saturating_mul(u64::from(dtype.size()));
    let capacity = target.sbuf_partition_bytes();
    if bytes > u64::from(capacity) {
        return Err(RuleViolation::SbufTileTooLarge {
            bytes,
            capacity,
            target: target.name(),
        });
    }
    Ok(())
}

/// A fixed dimension of an HBM tensor is at most [`crate::MAX_TENSOR_DIM`].
pub fn check_tensor_dim(tensor: &str, axis: usize, size: u64) -> Result<(), RuleViolation> {
    if size > crate::MAX_TENSOR_DIM {
        return Err(RuleViolation::TensorDimTooLarge {
            tensor: tensor.to_string(),
            axis,
            size,
            max: crate::MAX_TENSOR_DIM,
        });
    }
    Ok(())
}

/// Whether a reshape from dimensions `from` to `to` keeps the element count: `Ok(true)` when
/// it does at every launch, `Ok(false)` when only a launch can tell (symbolic dimensions that do
/// not cancel out: [`crate::ReshapeDecl::elements`] checks it then), and the violation when it
/// never does. Products of symbols (`N * C`, named in `symbols`) count as their factors.
/// `describe` writes dimensions for the message.
pub fn check_reshape(
    name: &str,
    tensor: &str,
    from: &[Dim],
    to: &[Dim],
    symbols: &[String],
    describe: &dyn Fn(&[Dim]) -> String,
) -> Result<bool, RuleViolation> {
    use crate::product::{Factor, factors};
    // The literal factors' product (`None` past u64) and the symbols' names, sorted.
    let split = |dims: &[Dim]| {
        let mut fixed = Some(1u64);
        let mut syms: Vec<&str> = Vec::new();
        for d in dims {
            match *d {
                Dim::Fixed(n) => fixed = fixed.and_then(|f| f.checked_mul(n)),
                Dim::Sym(s) => {
                    let name = symbols.get(usize::from(s)).map_or("?", String::as_str);
                    for f in factors(name) {
                        match f {
                            Factor::Literal(n) => fixed = fixed.and_then(|f| f.checked_mul(n)),
                            Factor::Symbol(s) => syms.push(s),
                        }
                    }
                }
            }
        }
        syms.sort_unstable();
        (fixed, syms)
    };
    let ((a, sa), (b, sb)) = (split(from), split(to));
    let never = || RuleViolation::ReshapeSize {
        name: name.to_string(),
        tensor: tensor.to_string(),
        tensor_shape: describe(from),
        shape: describe(to),
    };
    match (a, b) {
        (Some(a), Some(b)) if sa == sb => {
            if a == b {
                Ok(true)
            } else {
                Err(never())
            }
        }
        // Symbols that differ: the launch's values decide (a product past u64 never matches an
        // element count, which a launch refuses then too).
        _ if sa != sb => Ok(false),
        // Same symbols, a literal product past u64 on one side or both.
        _ => Err(never()),
    }
}

/// `nc_matmul(..., tile_position = (row, col), tile_size = (rows, cols))`: the PE array's
/// tiling, which lets small matmuls run side by side. Both are given, in multiples of 32,
/// inside the 128 × 128 array; the tile holds the stationary operand (`stationary` is its
/// `[K, M]`: K rows, M columns); 32-wide tiles need Trn2 or later.
pub fn check_pe_tiling(
    position: (i64, i64),
    size: (i64, i64),
    stationary: (u32, u32),
    target: Target,
) -> Result<(), RuleViolation> {
    pe_tiling("nc_matmul", position, size, stationary, target)
}

/// `nc_matmul_mx`'s PE tiling (NKI: row tiling only): `tile_size` is `(32, 64 or 128 rows,
/// 128)`, `tile_position` `(a multiple of the rows, 0)`, and the tile holds the stationary
/// operand's `K` partitions; otherwise as [`check_pe_tiling`].
pub fn check_mx_pe_tiling(
    position: (i64, i64),
    size: (i64, i64),
    stationary: (u32, u32),
    target: Target,
) -> Result<(), RuleViolation> {
    let op = "nc_matmul_mx";
    if size.1 != 128 || position.1 != 0 {
        return Err(pe_violation(
            op,
            position,
            size,
            "nc_matmul_mx tiles rows only: tile_size (rows, 128), tile_position (row, 0)",
        ));
    }
    if ![32, 64, 128].contains(&size.0) || position.0.checked_rem(size.0) != Some(0) {
        return Err(pe_violation(
            op,
            position,
            size,
            "nc_matmul_mx's row tiles are 32, 64 or 128 rows, at a multiple of their size",
        ));
    }
    pe_tiling(
        op,
        position,
        size,
        (stationary.0, stationary.1.min(128)),
        target,
    )
}

/// [`check_pe_tiling`]'s limits for `op`.
fn pe_tiling(
    op: &'static str,
    position: (i64, i64),
    size: (i64, i64),
    stationary: (u32, u32),
    target: Target,
) -> Result<(), RuleViolation> {
    let v = |why| Err(pe_violation(op, position, size, why));
    let all = [position.0, position.1, size.0, size.1];
    if all.iter().any(|&x| x < 0 || x % 32 != 0) {
        return v("each is a multiple of 32");
    }
    if size.0 == 0 || size.1 == 0 {
        return v("a tile has at least 32 rows and columns");
    }
    let array = i64::from(crate::target::PARTITIONS);
    if position.0.saturating_add(size.0) > array || position.1.saturating_add(size.1) > array {
        return v("the tile lies inside the 128 x 128 PE array");
    }
    if size.0 < i64::from(stationary.0) || size.1 < i64::from(stationary.1) {
        return v("the tile holds the stationary operand (K rows, M columns)");
    }
    if target == Target::Trn1 && (size.0 == 32 || size.1 == 32) {
        return v("32-wide tiles need Trn2 or later (gen3)");
    }
    Ok(())
}

/// A [`RuleViolation::PeTiling`] of `op`.
fn pe_violation(
    op: &'static str,
    position: (i64, i64),
    size: (i64, i64),
    why: &'static str,
) -> RuleViolation {
    RuleViolation::PeTiling {
        op,
        position,
        size,
        why,
    }
}

/// An operand's address space.
pub fn check_memory(
    op: &'static str,
    operand: &'static str,
    found: Memory,
    allowed: &[Memory],
) -> Result<(), RuleViolation> {
    if allowed.contains(&found) {
        return Ok(());
    }
    let expected = match allowed {
        [Memory::Hbm] => "hbm",
        [Memory::Sbuf] => "sbuf",
        [Memory::Psum] => "psum",
        _ => "psum|sbuf",
    };
    Err(RuleViolation::WrongMemory {
        op,
        operand,
        expected,
        found,
    })
}

/// TC#3 and LC#1 for `nc_matmul(stationary, moving)`: both in SBUF, stationary `[K ≤ 128,
/// M ≤ 128]`, moving `[K ≤ 128, N ≤ 512]`, equal K. Returns the result shape `[M, N]`.
pub fn check_matmul(
    stationary: (&TileShape, Memory),
    moving: (&TileShape, Memory),
) -> Result<TileShape, RuleViolation> {
    check_memory("nc_matmul", "stationary", stationary.1, &[Memory::Sbuf])?;
    check_memory("nc_matmul", "moving", moving.1, &[Memory::Sbuf])?;
    let (s, m) = (stationary.0, moving.0);
    check_tile_shape(s)?;
    check_tile_shape(m)?;
    if s.free_elems() > GEMM_STATIONARY_FMAX as u64 {
        return Err(RuleViolation::StationaryTooWide {
            size: s.free_elems(),
        });
    }
    if m.free_elems() > GEMM_MOVING_FMAX as u64 {
        return Err(RuleViolation::MovingTooWide {
            size: m.free_elems(),
        });
    }
    if s.partitions() != m.partitions() {
        return Err(RuleViolation::ContractionMismatch {
            stationary: s.partitions(),
            moving: m.partitions(),
        });
    }
    // Both at most 512 (checked above).
    let dims = [s.free_elems(), m.free_elems()].map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    TileShape::new(&dims).ok_or(RuleViolation::BadTileShape { shape: *m })
}

/// `nc_transpose` on TensorE: SBUF `[P ≤ 128, F ≤ 128]` in. Returns the result shape `[F, P]`.
pub fn check_transpose(src: (&TileShape, Memory)) -> Result<TileShape, RuleViolation> {
    check_memory("nc_transpose", "data", src.1, &[Memory::Sbuf])?;
    check_tile_shape(src.0)?;
    let f = src.0.free_elems();
    if f > PARTITIONS as u64 {
        return Err(RuleViolation::PartitionDimTooLarge { size: f });
    }
    // f ≤ 128 (checked above).
    let f = u32::try_from(f).unwrap_or(u32::MAX);
    TileShape::new(&[f, src.0.partitions()]).ok_or(RuleViolation::BadTileShape { shape: *src.0 })
}

/// Floating-point dtypes `nc_matmul` and `nc_transpose` accept as inputs.
pub fn check_matmul_input_dtype(operand: &'static str, dtype: DType) -> Result<(), RuleViolation> {
    match dtype {
        DType::Bf16 | DType::F16 | DType::F32 => Ok(()),
        found @ (DType::Tf32
        | DType::F8E4M3
        | DType::F8E5M2
        | DType::F8E4M3Fn
        | DType::F4E2M1Fn
        | DType::F8E8M0Fnu
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::Bool
        | DType::F8E5M2X4
        | DType::F8E4M3FnX4
        | DType::F4E2M1FnX4) => Err(RuleViolation::WrongDType {
            op: "nc_matmul",
            operand,
            expected: "bf16, f16 or f32",
            found,
        }),
    }
}

/// `nc_matmul`'s and `nc_transpose`'s PSUM destination is fp32.
pub fn check_psum_result_dtype(op: &'static str, dtype: DType) -> Result<(), RuleViolation> {
    if dtype == DType::F32 {
        Ok(())
    } else {
        Err(RuleViolation::WrongDType {
            op,
            operand: "dst",
            expected: "f32",
            found: dtype,
        })
    }
}

/// Two operands hold the same elements in the same order.
pub fn check_same_shape(
    op: &'static str,
    operand: &'static str,
    expected: &TileShape,
    found: &TileShape,
) -> Result<(), RuleViolation> {
    if expected.same_layout(found) {
        Ok(())
    } else {
        Err(RuleViolation::ShapeMismatch {
            op,
            operand,
            expected: *expected,
            found: *found,
        })
    }
}

/// A static index range `[lo, hi]` lies inside a dimension of `size`.
/// The alignment the engines need of the first partition of an access of `parts` partitions:
/// more than 64 start at 0 (128 here: no other multiple fits), 33 to 64 at 0 or 64, up to 32
/// at a multiple of 32 (the partitions' quadrants).
pub const fn partition_start_alignment(parts: u32) -> u32 {
    if parts > 64 {
        128
    } else if parts > 32 {
        64
    } else {
        32
    }
}

/// A partition start `constant + Σ coef · var` set by loop variables (or program ids): every
/// value must be a multiple of [`partition_start_alignment`], which holds when the constant and
/// every coefficient are.
pub fn check_partition_start(parts: u32, constant: i64, coef: &[i64]) -> Result<(), RuleViolation> {
    let align = partition_start_alignment(parts);
    let aligned = |c: i64| c.rem_euclid(i64::from(align)) == 0;
    if !aligned(constant) || !coef.iter().all(|&c| aligned(c)) {
        return Err(RuleViolation::PartitionStart { parts, align });
    }
    Ok(())
}

pub fn check_bounds(
    tensor: &str,
    axis: usize,
    lo: i64,
    hi: i64,
    size: u64,
) -> Result<(), RuleViolation> {
    if lo < 0 || hi < lo || hi.unsigned_abs() >= size {
        return Err(RuleViolation::OutOfBounds {
            tensor: tensor.to_string(),
            axis,
            lo,
            hi,
            size,
        });
    }
    Ok(())
}

/// Reduction axes: free axes of a tile with `free` free dimensions, at least one (`axes` are
/// tile axes, 1-based for the free ones). Returns the bit mask (bit `j` = free axis `j + 1`).
pub fn check_reduce_axes(op: &'static str, axes: &[i64], free: usize) -> Result<u8, RuleViolation> {
    // A negative axis counts from the last (NumPy's rule): `-1` is the last of the tile's
    // `free + 1` axes.
    let mut normalized = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(op, a, free.saturating_add(1))?;
        if a < 0 && n == 0 {
            return Err(RuleViolation::NegativePartitionAxis {
                op,
                axis: a,
                max_axis: free,
            });
        }
        normalized.push(n);
    }
    let axes = normalized;
    let axes = axes.as_slice();
    // A free axis is 1 to `free`, and its bit must fit the mask's 8.
    let bit = |a: i64| {
        let a = usize::try_from(a).ok().filter(|&a| a >= 1 && a <= free)?;
        1u8.checked_shl(u32::try_from(a.saturating_sub(1)).ok()?)
    };
    let bits: Option<Vec<u8>> = axes.iter().map(|&a| bit(a)).collect();
    match bits {
        Some(bits) if !bits.is_empty() => Ok(bits.iter().fold(0u8, |m, &b| m | b)),
        _ => Err(RuleViolation::ReduceAxes {
            op,
            axes: axes
                .iter()
                .map(|&a| u8::try_from(a.clamp(0, 255)).unwrap_or(u8::MAX))
                .collect(),
            max_axis: free,
        }),
    }
}
