//! The instruction set as plain data.
//!
//! An [`Instr`] is a fieldless [`Opcode`] (one per hardware instruction, described once in the
//! opcode table, [`ops`], which lives here because opcodes and formats refer to each other),
//! the [`Engine`] that runs it, an optional mask, the kernel source line, and its operands in
//! one of a few fixed layouts ([`InstrData`], the *formats*). A format carries function codes
//! ([`Alu`], [`ActFn`]) rather than one variant per NKI call: `nl.maximum` is `tensor_tensor`
//! with [`Alu::Max`].
//!
//! Operands refer by index to the program's pools: tile views ([`ViewId`]), HBM accesses
//! ([`AccessId`]), masks ([`MaskId`]) and grid expressions ([`ExprId`]), so that an instruction
//! stays small (at most 64 bytes) and each view is stored once.
//! [`Instr::operands`] is the one enumerator of an instruction's operands that every pass uses.

mod operand;
mod operands;
pub mod ops;

use core::fmt;

pub use operand::{AxisIndex, HbmAccess, MAX_MASK_TERMS, Mask, MaskTerm, TileView};
pub use operands::{Dir, MAX_SLOTS, OperandRef, Operands, SlotOperand};

use crate::affine::{MAX_LOOP_DEPTH, MAX_PIDS, VarValues};
use crate::func::{ActFn, Alu};
use crate::shape::Extent;
use crate::target::Engine;
use ops::Opcode;

/// The kind of a loop, with NKI's meaning.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LoopKind {
    /// `affine_range`: iterations are independent (except accumulation) and may overlap.
    Affine,
    /// `sequential_range`: iterations run in order; loop-carried dependencies are allowed.
    Sequential,
    /// A device loop (`fori_loop`, `dynamic_range`): the sequencer's loop instruction, whose
    /// trip count is read from registers when the loop starts. Register `var` holds the lower
    /// bound when the loop starts and the iteration value `lower + k·step` in iteration `k`;
    /// the loop runs `⌈(upper − lower) / step⌉` iterations, none when that is not positive.
    /// Iterations run in order. The loop's static trip ([`InstrData::LoopBegin`]'s `trip`) is
    /// 1: no affine index uses a device loop's variable.
    Dynamic {
        /// The iteration register.
        var: RegId,
        /// The register holding the exclusive upper bound.
        upper: RegId,
        /// The compile-time positive step.
        step: i32,
    },
    /// A device `while_loop`: an iteration starts while register `cond` is nonzero (checked
    /// before each iteration). Iterations run in order; the static trip is 1.
    While {
        /// The condition register.
        cond: RegId,
    },
}

impl LoopKind {
    /// The NKI iterator's name.
    pub const fn name(self) -> &'static str {
        match self {
            LoopKind::Affine => "affine_range",
            LoopKind::Sequential => "sequential_range",
            LoopKind::Dynamic { .. } => "dynamic_range",
            LoopKind::While { .. } => "while_loop",
        }
    }

    /// Whether the loop's trip count is read from registers at run time (a device loop).
    pub const fn is_device(self) -> bool {
        matches!(self, LoopKind::Dynamic { .. } | LoopKind::While { .. })
    }

    /// Whether iterations may overlap (`affine_range`).
    pub const fn is_affine(self) -> bool {
        matches!(self, LoopKind::Affine)
    }
}

/// Virtual registers a program may use (NKI: 64 32-bit registers per engine sequencer on
/// NeuronCore-v2 to v4; the model gives a program one file of that many).
pub const MAX_REGISTERS: usize = 64;

/// Iterations one run of a device loop may make: a `fori_loop` whose registers ask for more,
/// or a `while_loop` whose condition is still nonzero after that many, stops the launch with
/// an error (the model's limit, not the hardware's: it turns a runaway loop into an error
/// instead of a hang).
pub const MAX_DEVICE_TRIPS: i64 = 1 << 20;

/// A register operand: `register_move`'s source.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RegSrc {
    /// No register source (`register_load`, `register_store`).
    None,
    /// A compile-time integer.
    Imm(i32),
    /// Another register's value.
    Reg(RegId),
}

/// How an indirect DMA ([`InstrData::Indirect`]) reads its index operand.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum IndirectMode {
    /// One index per partition of the grid, each a row of the indexed axis (NKI's
    /// `load(src[idx, i_f])`, `.ap(..., vector_offset=idx, indirect_dim=0)`).
    Rows,
    /// One index for the whole access (NKI 0.6's `.ap(..., scalar_offset=v, indirect_dim=d)`):
    /// the access starts `v · scale` elements of its tensor (counted row-major) further; `v`
    /// must lie in `0..bound` (the size of dimension `d` of the tensor).
    Scalar {
        /// Elements of the tensor per unit of the index (its elements to the right of
        /// dimension `d`).
        scale: u32,
        /// The exclusive upper bound of the index (the size of dimension `d`).
        bound: u32,
    },
}

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u16);

        impl $name {
            /// The position in its pool.
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id!(
    /// A tile view in the program's view pool ([`crate::Program::views`]).
    ViewId
);
id!(
    /// An HBM access in the program's access pool ([`crate::Program::accesses`]).
    AccessId
);
id!(
    /// A mask in the program's mask pool ([`crate::Program::masks`]).
    MaskId
);
id!(
    /// A virtual register (`nisa.register_alloc`): one of [`MAX_REGISTERS`] 32-bit integers of
    /// each instance of a launch, read and written by the register instructions and read by
    /// device loops.
    RegId
);
id!(
    /// An affine grid expression in the program's expression pool ([`crate::Program::exprs`]):
    /// `iota`'s values and `affine_select`'s predicate.
    ExprId
);

/// An immediate operand.
///
/// Floats are kept as their bits so that instructions are `Eq` and `Hash`, and emit as
/// integer literals.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// An fp32 value, by its bits.
    Float(u32),
    /// A 32-bit integer (for integer tiles, bit operations and shifts).
    Int(i32),
}

impl Scalar {
    /// An fp32 immediate.
    pub const fn float(x: f32) -> Scalar {
        Scalar::Float(x.to_bits())
    }

    /// The value as the engines' fp32 (integers above 2²⁴ round to nearest even).
    pub fn as_f32(self) -> f32 {
        match self {
            Scalar::Float(bits) => f32::from_bits(bits),
            Scalar::Int(v) => v as f32,
        }
    }
}

impl fmt::Debug for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scalar::Float(bits) => write!(f, "{:?}", f32::from_bits(bits)),
            Scalar::Int(v) => write!(f, "{v}"),
        }
    }
}

/// A source operand of a compute instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// No operand (a slot the instruction does not use).
    None,
    /// A tile view. A `[P, 1]` column applied along every free element is a view whose free
    /// strides are 0, as is any free-dimension broadcast.
    Tile(ViewId),
    /// An immediate.
    Imm(Scalar),
}

impl Src {
    /// The view, if the operand is one.
    pub const fn view(self) -> Option<ViewId> {
        match self {
            Src::Tile(v) => Some(v),
            Src::None | Src::Imm(_) => None,
        }
    }
}

/// How an instruction writes its destination.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Write {
    /// Overwrite the destination.
    Overwrite,
    /// Combine the result into the destination: `dst = dst op result` (`+=` into PSUM or
    /// SBUF; `nl.loop_reduce`).
    Accumulate(Alu),
    /// An accumulation group (`acc += nc_matmul(...)` over a zeroed PSUM tile): overwrite
    /// while every loop in `loops` (bit `d` = loop at depth `d`) is in its first iteration,
    /// accumulate with `op` otherwise.
    Group {
        /// Loops (by depth) the group spans.
        loops: u8,
        /// How later iterations combine.
        op: Alu,
    },
}

impl Write {
    /// Whether the destination adds to its old value in the execution with loop values `vars`
    /// (an accumulation group overwrites while its loops are in their first iteration).
    pub fn accumulates_at(self, vars: &VarValues) -> bool {
        match self {
            Write::Overwrite => false,
            Write::Accumulate(_) => true,
            Write::Group { loops, .. } => (0..MAX_LOOP_DEPTH).any(|d| {
                loops >> d & 1 == 1
                    && vars
                        .get(MAX_PIDS.saturating_add(d))
                        .is_some_and(|&v| v != 0)
            }),
        }
    }
}

/// A destination operand and how it is written.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dst {
    /// The view written.
    pub view: ViewId,
    /// Overwrite or accumulate.
    pub write: Write,
}

impl Dst {
    /// A destination that is overwritten.
    pub const fn overwrite(view: ViewId) -> Dst {
        Dst {
            view,
            write: Write::Overwrite,
        }
    }

    /// Whether the instruction reads the destination's old value (in some iteration).
    pub const fn reads_old(&self) -> bool {
        !matches!(self.write, Write::Overwrite)
    }
}

/// A comparison of an affine grid expression with 0 (`affine_select`'s predicate).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// `e < 0`
    Lt,
    /// `e <= 0`
    Le,
    /// `e > 0`
    Gt,
    /// `e >= 0`
    Ge,
    /// `e == 0`
    Eq,
    /// `e != 0`
    Ne,
}

impl Cmp {
    /// Whether `v cmp 0` holds.
    #[inline]
    pub const fn holds(self, v: i64) -> bool {
        match self {
            Cmp::Lt => v < 0,
            Cmp::Le => v <= 0,
            Cmp::Gt => v > 0,
            Cmp::Ge => v >= 0,
            Cmp::Eq => v == 0,
            Cmp::Ne => v != 0,
        }
    }

    /// The operator's symbol.
    pub const fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
        }
    }
}

/// The predicate of a select.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Pred {
    /// A tile of truth values (nonzero = true): `nl.where`.
    Tile(ViewId),
    /// An affine expression of the grid and index variables compared with 0:
    /// `affine_select`.
    Affine {
        /// The expression.
        expr: ExprId,
        /// The comparison.
        cmp: Cmp,
    },
}

/// A second, per-partition output of an instruction that reduces its result along the free
/// dimensions (`activation`'s `reduce_res`, `tensor_scalar_reduce`): a `[P, 1]` view.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccOut {
    /// The reduction.
    pub op: Alu,
    /// The `[P, 1]` view it is written to.
    pub view: ViewId,
}

/// An instruction's operands, in one of a fixed set of layouts (formats). Each variant's doc
/// lists its operand slots in the order [`Instr::operands`] numbers them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstrData {
    /// Start of a loop; its body runs up to the matching `LoopEnd` at index `end`.
    /// No operand slots.
    LoopBegin {
        /// `affine_range` or `sequential_range`.
        kind: LoopKind,
        /// Number of iterations.
        trip: Extent,
        /// Index of the induction variable's name in [`crate::Program::loop_vars`].
        var: u16,
        /// Index of the matching `LoopEnd`.
        end: u32,
    },
    /// End of the loop that begins at `begin`. No operand slots.
    LoopEnd {
        /// Index of the matching `LoopBegin`.
        begin: u32,
    },
    /// A DMA between a tile and HBM; the opcode gives the direction.
    /// Slots: 0 `tile`, 1 `hbm`.
    Dma {
        /// The on-chip side.
        tile: ViewId,
        /// The HBM side.
        hbm: AccessId,
    },
    /// One source, one destination. Slots: 0 `dst`, 1 `src`.
    Unary {
        /// Destination.
        dst: Dst,
        /// Source.
        src: ViewId,
    },
    /// A constant. Slots: 0 `dst`.
    Fill {
        /// Destination.
        dst: Dst,
        /// The value, converted to the destination's dtype.
        value: Scalar,
    },
    /// The values of an affine expression of the grid. Slots: 0 `dst`, 1 `expr`.
    Iota {
        /// Destination.
        dst: Dst,
        /// The expression.
        expr: ExprId,
    },
    /// A chain of up to two ALU operations: `dst = (src0 op0 src1) op1 src2`, where bit `j`
    /// of `rev` swaps the operands of `op[j]`. `op1` is [`Alu::Bypass`] for one operation.
    /// Slots: 0 `dst`, 1 `src0`, 2 `src1`, 3 `src2`, 4 `acc`.
    Alu {
        /// Destination.
        dst: Dst,
        /// Operands.
        src: [Src; 3],
        /// Operations.
        op: [Alu; 2],
        /// Operand swaps.
        rev: u8,
        /// Optional per-partition reduction of the result.
        acc: Option<AccOut>,
    },
    /// `dst = func(src · scale + bias)` on the Scalar engine. Slots: 0 `dst`, 1 `src`,
    /// 2 `scale`, 3 `bias`, 4 `acc`.
    Act {
        /// Destination.
        dst: Dst,
        /// Input.
        src: ViewId,
        /// The function.
        func: ActFn,
        /// An immediate or a `[P, 1]` column.
        scale: Src,
        /// `Src::None` or a `[P, 1]` column.
        bias: Src,
        /// Optional per-partition reduction of the result.
        acc: Option<AccOut>,
    },
    /// `dst = func((src op0 imm0) op1 imm1)` (`activate2`): a tensor-scalar stage, then an
    /// activation function. Slots: 0 `dst`, 1 `src`, 2 `imm0`, 3 `imm1`, 4 `acc`.
    Act2 {
        /// Destination.
        dst: Dst,
        /// Input.
        src: ViewId,
        /// The tensor-scalar stage's operands: immediates or `[P, 1]` columns (`Src::None`
        /// for an operation that is `bypass`).
        imm: [Src; 2],
        /// The tensor-scalar stage's operations (`bypass` for none).
        op: [Alu; 2],
        /// Bit `j` set: operation `j` takes its operand first (`imm op value`).
        rev: u8,
        /// The function applied to the stage's result.
        func: ActFn,
        /// Optional per-partition reduction of the result.
        acc: Option<AccOut>,
    },
    /// A reduction along free axes. Slots: 0 `dst`, 1 `src`.
    Reduce {
        /// Destination.
        dst: Dst,
        /// Input.
        src: ViewId,
        /// The reduction.
        op: Alu,
        /// Bit `j` set: reduce the source's free axis `j` (axis `j + 1` of its shape).
        axes: u8,
        /// Multiply the result by −1.
        negate: bool,
    },
    /// A scan along the free elements of each partition:
    /// `r[i] = (src0[i] op0 r[i−1]) op1 src1[i]`, `r[−1] = init`.
    /// Slots: 0 `dst`, 1 `src0`, 2 `src1`, 3 `init`.
    Scan {
        /// Destination.
        dst: Dst,
        /// Inputs.
        src: [ViewId; 2],
        /// The initial value: an immediate or a `[P, 1]` column.
        init: Src,
        /// Operations.
        op: [Alu; 2],
        /// Operand swaps: bit `j` set, `op[j]` takes the running value (or `data1`) first
        /// (NKI's `reverse0`, `reverse1`).
        rev: u8,
    },
    /// `dst = pred ? on_true : on_false`, elementwise. Slots: 0 `dst`, 1 `pred`,
    /// 2 `on_true`, 3 `on_false`.
    Select {
        /// Destination.
        dst: Dst,
        /// The predicate.
        pred: Pred,
        /// Value where the predicate holds.
        on_true: Src,
        /// Value elsewhere.
        on_false: Src,
    },
    /// `dst = stationaryᵀ · moving` on TensorE, fp32 accumulation in PSUM.
    /// Slots: 0 `dst`, 1 `stationary`, 2 `moving`.
    Matmul {
        /// `[M, N]` fp32 in PSUM.
        dst: Dst,
        /// `[K, M]` in SBUF.
        stationary: ViewId,
        /// `[K, N]` in SBUF.
        moving: ViewId,
    },
    /// A search of each partition's free elements for 8 values (`nc_find_index8`,
    /// `nc_match_replace8`). Slots: 0 `dst`, 1 `data`, 2 `vals`, 3 `imm`, 4 `dst_idx`.
    Match8 {
        /// Destination.
        dst: Dst,
        /// The elements searched.
        data: ViewId,
        /// The 8 values of each partition.
        vals: ViewId,
        /// The value a match is replaced by (`nc_match_replace8`); `None` for an instruction
        /// that writes the matches' indices (`nc_find_index8`).
        imm: Option<Scalar>,
        /// A second output: the indices of the replaced elements (`nc_match_replace8`'s
        /// `dst_idx`, `[P, 8]`).
        idx: Option<ViewId>,
    },
    /// `dst = pred ? on_true : on_false` elementwise (the predicate negated when `reverse`),
    /// with an optional per-partition reduction of the results (`select_reduce`).
    /// Slots: 0 `dst`, 1 `predicate`, 2 `on_true`, 3 `on_false`, 4 `reduce_res`.
    SelectReduce {
        /// Destination.
        dst: Dst,
        /// The predicate: a tile of integers, nonzero = true.
        pred: ViewId,
        /// Value where the predicate holds.
        on_true: ViewId,
        /// Value elsewhere: an immediate or a `[P, 1]` column.
        on_false: Src,
        /// Negate the predicate (`reverse_pred`).
        reverse: bool,
        /// Optional per-partition reduction of the results.
        acc: Option<AccOut>,
    },
    /// A DMA between a tile and HBM places chosen at run time. In [`IndirectMode::Rows`]
    /// (NKI's indirect DMA: a tile of indices on the partition axis of an access,
    /// `load(src[idx, i_f])`, or 0.6's `.ap(..., vector_offset=idx)`): axis `axis` of the
    /// access takes, at the grid's partition `p`, the value of the index column `index` at
    /// partition `p` (plus the axis' affine index, which has no grid terms); the other axes are
    /// the access's. In [`IndirectMode::Scalar`] (0.6's `.ap(..., scalar_offset=)`): the
    /// whole access, as its indices give it, starts `value · scale` elements of its tensor
    /// (counted row-major) further, `value` the one element of `index`; `axis` is 0. The
    /// opcode gives the direction.
    /// Slots: 0 `tile`, 1 `hbm`, 2 `index`.
    Indirect {
        /// The on-chip side.
        tile: ViewId,
        /// The HBM side.
        hbm: AccessId,
        /// Rows mode: a `[P, 1]` int32 or uint32 SBUF column of row indices; scalar mode: a
        /// one-element int32 or uint32 SBUF tile.
        index: ViewId,
        /// The access's axis the indices select along (0 in scalar mode).
        axis: u8,
        /// How the index values address the HBM side.
        mode: IndirectMode,
    },
    /// A gather within each partition (`gather_flattened`): element `t` of `dst` is element
    /// `indices[t]` of its partition of `data`, the data's free elements flattened row-major.
    /// Slots: 0 `dst`, 1 `data`, 2 `indices`.
    Gather {
        /// Destination, of the indices' shape.
        dst: Dst,
        /// The values.
        data: ViewId,
        /// int32 or uint32 positions in the flattened free elements of `data`.
        indices: ViewId,
    },
    /// A copy whose source (`tensor_copy_dynamic_src`) or destination
    /// (`tensor_copy_dynamic_dst`) sits at a run-time offset within each partition: that
    /// operand's elements shifted by `value · stride` elements, `value` the int32 or uint32
    /// element of the `[1, 1]` tile `offset`. Slots: 0 `dst`, 1 `src`, 2 `offset`.
    DynCopy {
        /// Destination (at offset 0 for `tensor_copy_dynamic_dst`).
        dst: Dst,
        /// The source (at offset 0 for `tensor_copy_dynamic_src`).
        src: ViewId,
        /// The `[1, 1]` SBUF tile holding the offset.
        offset: ViewId,
        /// Elements of the shifted operand's partition row per unit of the offset (the indexed
        /// axis' stride).
        stride: i32,
    },
    /// The random number generators' values: `rand`, `rng` and `rand_get_state` (slot 0
    /// `dst`, the other slots `Src::None`) write uniform values in `[0, 1)`, random bits, and
    /// the XORWOW state; `dropout` (slots 0 `dst`, 1 `data`, 2 `prob`) writes `data` or 0,
    /// dropping each element with probability `prob`; `rand2` (slots 0 `dst`, 1 `min`,
    /// 2 `max`) writes uniform values in `[min, max]`.
    Rng {
        /// Destination.
        dst: Dst,
        /// `dropout`'s input tile, `rand2`'s `min` (an immediate or a `[P, 1]` column);
        /// `Src::None` for the others.
        src: Src,
        /// `dropout`'s drop probability, `rand2`'s `max`: an immediate or a `[P, 1]` column;
        /// `Src::None` for the others.
        prob: Src,
    },
    /// A generator's seed or state, read from a tile; writes no tile. `random_seed` and
    /// `set_rng_seed` read a one-element tile, `rand_set_state` a `[P, 6]` or `[P, 24]` uint32
    /// tile. Slot 1 `seed` (slot 0, the destination, is empty).
    Seed {
        /// The seed or state tile.
        seed: ViewId,
    },
    /// `range_select`: `dst[p, i] = on_true[p, i]` where `(start + i) cmp[0] bound0[p]` and
    /// `(start + i) cmp[1] bound1[p]` both hold (compared in fp32; `i` the row-major index of
    /// the free elements), fp32's lowest value elsewhere, with an optional per-partition
    /// reduction of the results. Slots: 0 `dst`, 1 `on_true`, 2 `bound0`, 3 `bound1`,
    /// 4 `reduce_res`.
    RangeSelect {
        /// Destination.
        dst: Dst,
        /// The values selected.
        on_true: ViewId,
        /// The two `[P, 1]` fp32 bound columns.
        bounds: [ViewId; 2],
        /// How the index is compared with each bound (`index cmp bound`).
        cmp: [Cmp; 2],
        /// The index of the first free element (`range_start`).
        start: i32,
        /// Optional per-partition reduction of the results.
        acc: Option<AccOut>,
    },
    /// `nc_stream_shuffle`: within each quadrant of 32 partitions, partition `i` of `dst` is
    /// partition `mask[i]` of the same quadrant of `src` (partitions counted from each
    /// access's start); where `mask[i]` is [`SHUFFLE_KEEP`], that partition of `dst` is left as
    /// it was (the destination is then read as well). Slots: 0 `dst`, 1 `src`.
    Shuffle {
        /// Destination.
        dst: Dst,
        /// Source.
        src: ViewId,
        /// The source partition of each destination partition of a quadrant.
        mask: [u8; SHUFFLE_QUADRANT],
    },
    /// `quantize_mx` (NeuronCore-v4): each group of 32 values of `src`, 8 partitions × 4
    /// consecutive free elements (partitions `8i … 8i+7`, elements `4f … 4f+3`), shares one
    /// E8M0 scale `2^(⌊log2 amax⌋ − (emax − 1))` (`emax` 8 for e4m3fn, 15 for e5m2; `2^−127` for
    /// an all-zero group), written at partition [`mx_scale_partition`]`(i)`, element `f` of
    /// `scale`; lane `l` of x4 element `f` of `dst`'s partition `8i + r` is value `4f + l` of
    /// `src`'s partition `8i + r` divided by the scale, rounded to nearest even. The scale
    /// tile's other partitions keep what they held. Slots: 0 `dst`, 1 `src`, 2 `dst_scale`.
    QuantizeMx {
        /// The packed data (`float8_e5m2_x4` or `float8_e4m3fn_x4`).
        dst: Dst,
        /// The fp16/bf16 values.
        src: ViewId,
        /// The scales (`float8_e8m0fnu` or `uint8`).
        scale: ViewId,
    },
    /// `nc_matmul_mx` (NeuronCore-v4): `dst[m, n] (+)= Σ_k Σ_l S(k, m, l) · M(k, n, l)`, `S` and
    /// `M` the lanes `l` of the packed `stationary[k, m]` and `moving[k, n]` each times its
    /// group's scale (`2^(code − 127)`, the code at partition [`mx_scale_partition`]`(k / 8)`,
    /// element `m` (or `n`) of the operand's scale tile). Slots: 0 `dst`, 1 `stationary`,
    /// 2 `moving`, 3 `stationary_scale`, 4 `moving_scale`.
    MatmulMx {
        /// `[M, N]` fp32 or bf16 in PSUM.
        dst: Dst,
        /// `[K, M]` packed, in SBUF.
        stationary: ViewId,
        /// `[K, N]` packed, in SBUF.
        moving: ViewId,
        /// The stationary and moving scale tiles.
        scales: [ViewId; 2],
    },
    /// `local_gather`: each group of 16 partitions (one GpSimd core's) gathers with its own
    /// indices: index `j` of a group (`0 ≤ j < valid`) is the element of `index` at partition
    /// `j mod 16` of the group and free position `j / 16`; element `j·elems + e` of each
    /// partition `p` of `dst` is element `index_j + e` of partition `p` of `src` (its free
    /// elements flattened row-major). Slots: 0 `dst`, 1 `src_buffer`, 2 `index`.
    LocalGather {
        /// Destination: `valid · elems` elements per partition.
        dst: Dst,
        /// The data gathered from.
        src: ViewId,
        /// The uint16 indices, `[P, C]`.
        index: ViewId,
        /// Contiguous elements per index (`num_elem_per_idx`).
        elems: u8,
        /// Indices per group (`num_valid_indices`).
        valid: u16,
    },
    /// A virtual register instruction: `register_move` (`reg = src`), `register_load` (`reg`
    /// = the one int32 or uint32 element of the tile `tile`, slot 1 `src`) or
    /// `register_store` (the one int32 or uint32 element of `tile`, slot 0 `dst`, = `reg`).
    Register {
        /// The register written (move, load) or read (store).
        reg: RegId,
        /// `register_move`'s source ([`RegSrc::None`] for the others).
        src: RegSrc,
        /// The one-element tile loaded or stored (`None` for `register_move`).
        tile: Option<ViewId>,
    },
    /// `nonzero_with_count` (GpSimd, NeuronCore-v3 and newer): on partitions `0, 16, 32, …`
    /// (counted from each access's start: partition 0 of each GpSimd core's 16), the
    /// positions of `src`'s nonzero elements (its free elements row-major) plus `offset`,
    /// compacted, then `padding` up to `T` elements, then the count: `T + 1` int32 elements;
    /// the other partitions of `dst` are left as they were. Slots: 0 `dst`, 1 `src`.
    Nonzero {
        /// Destination: `T + 1` int32 elements per partition.
        dst: Dst,
        /// The `T` values searched (float32 or int32).
        src: ViewId,
        /// Added to each position (`index_offset`).
        offset: i32,
        /// Written after the positions (`padding_val`).
        padding: i32,
    },
    /// `dma_compute` (the DMA engines' compute): element `t` of `dst` is
    /// `srcs[0][t] + srcs[1][t] + …`, each source element widened to fp32, the sum taken left to
    /// right in fp32 and rounded to nearest even into the destination's dtype. The sources
    /// used come first; the slots after them are `None`. Slots: 0 `dst`, 1 to
    /// [`DMA_COMPUTE_SOURCES`] the sources.
    DmaCompute {
        /// Destination.
        dst: Dst,
        /// The sources, in the order they are added.
        srcs: [Option<ViewId>; DMA_COMPUTE_SOURCES],
    },
    /// `topk` (GpSimd, NeuronCore-v3 and newer): each group of [`GATHER_GROUP`] partitions
    /// (counted from the accesses' start) holds a snake of `n` values, value `i` at partition
    /// `i mod 16` of the group and free position `i / 16` of `src` (its free elements
    /// row-major); the `K` largest (`K` the free size of `val`) are written in ascending order
    /// in the same snake layout, value `j` at partition `j mod 16` and free position `j / 16`
    /// of `val`, its snake index (uint32) at the same place of `idx` ([`topk_place`]). The
    /// other elements of `val` and `idx` are left as they were. Slots: 0 `val_dst`, 1 `src`,
    /// 2 `idx_dst`.
    TopK {
        /// The values (`val_dst`).
        val: Dst,
        /// The snake indices (`idx_dst`).
        idx: ViewId,
        /// The snakes.
        src: ViewId,
        /// Values per snake (`n`).
        n: u16,
    },
}

/// Sources one `dma_compute` instruction adds: every operand slot but the destination's.
/// (NKI takes up to 16; the kernel language splits a longer list into a chain of instructions
/// through fp32 tiles, which sums the same values in the same order.)
pub const DMA_COMPUTE_SOURCES: usize = MAX_SLOTS - 1;

/// Partitions of the group one GpSimd core gathers within (`local_gather`).
pub const GATHER_GROUP: usize = 16;

/// Where element `i` of a group's snake sits (`topk`'s source and results): partition
/// `i mod 16` of the group, free position `i / 16`.
pub const fn topk_place(i: usize) -> (usize, usize) {
    (i % GATHER_GROUP, i / GATHER_GROUP)
}

/// Whether `nonzero_with_count` reads and writes partition `j` (counted from its access's
/// start): partition 0 of each GpSimd core's group of [`GATHER_GROUP`] partitions, that is
/// `0, 16, 32, …, 112`.
pub const fn nonzero_partition(j: usize) -> bool {
    j.is_multiple_of(GATHER_GROUP)
}

/// Partitions of an MX scaling group (`quantize_mx`, `nc_matmul_mx`): a group is 8
/// partitions × [`MX_GROUP_FREE`] values.
pub const MX_GROUP_PARTITIONS: usize = 8;

/// Values per partition of an MX scaling group: the four lanes of one x4 element.
pub const MX_GROUP_FREE: usize = 4;

/// The partition of an MX scale tile holding the scale of group `i` (data partitions
/// `8i … 8i+7`): the group's quadrant's first partition plus `i mod 4`, i.e.
/// `32·(i / 4) + i mod 4` — each 32-partition quadrant of data keeps its four groups' scales
/// in its own quadrant (NKI's Trn3 architecture guide).
pub const fn mx_scale_partition(i: usize) -> usize {
    (i / 4).saturating_mul(32).saturating_add(i % 4)
}

/// Partitions of a quadrant `nc_stream_shuffle` moves data within.
pub const SHUFFLE_QUADRANT: usize = 32;

/// The `nc_stream_shuffle` mask entry that leaves its destination partition unmodified.
pub const SHUFFLE_KEEP: u8 = 255;

/// The source partition `nc_stream_shuffle` moves to destination partition `j` (both counted
/// from their access's start): partition `mask[j mod 32]` of `j`'s quadrant; `None` where that
/// entry is [`SHUFFLE_KEEP`].
pub const fn shuffle_source(mask: &[u8; SHUFFLE_QUADRANT], j: usize) -> Option<usize> {
    let entry = mask[j % SHUFFLE_QUADRANT];
    if entry == SHUFFLE_KEEP {
        return None;
    }
    let quadrant = (j / SHUFFLE_QUADRANT).saturating_mul(SHUFFLE_QUADRANT);
    Some(quadrant.saturating_add(entry as usize))
}

/// Loop control, as the passes that track loop nesting see it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LoopControl {
    /// A loop starts; its body ends at instruction `end`.
    Begin {
        /// The trip count.
        trip: Extent,
        /// Index of the matching `LoopEnd`.
        end: u32,
    },
    /// A loop's body ends.
    End,
}

impl InstrData {
    /// The loop control this instruction is, or `None` for an operation.
    pub const fn loop_control(&self) -> Option<LoopControl> {
        match *self {
            InstrData::LoopBegin { trip, end, .. } => Some(LoopControl::Begin { trip, end }),
            InstrData::LoopEnd { .. } => Some(LoopControl::End),
            InstrData::Dma { .. }
            | InstrData::Unary { .. }
            | InstrData::Fill { .. }
            | InstrData::Iota { .. }
            | InstrData::Alu { .. }
            | InstrData::Act { .. }
            | InstrData::Act2 { .. }
            | InstrData::Reduce { .. }
            | InstrData::Scan { .. }
            | InstrData::Select { .. }
            | InstrData::Matmul { .. }
            | InstrData::Match8 { .. }
            | InstrData::SelectReduce { .. }
            | InstrData::Indirect { .. }
            | InstrData::Gather { .. }
            | InstrData::DynCopy { .. }
            | InstrData::Rng { .. }
            | InstrData::Seed { .. }
            | InstrData::RangeSelect { .. }
            | InstrData::Shuffle { .. }
            | InstrData::QuantizeMx { .. }
            | InstrData::MatmulMx { .. }
            | InstrData::LocalGather { .. }
            | InstrData::Nonzero { .. }
            | InstrData::DmaCompute { .. }
            | InstrData::TopK { .. }
            | InstrData::Register { .. } => None,
        }
    }

    /// The destination, for formats that have one.
    pub const fn dst(&self) -> Option<Dst> {
        match *self {
            InstrData::Unary { dst, .. }
            | InstrData::Fill { dst, .. }
            | InstrData::Iota { dst, .. }
            | InstrData::Alu { dst, .. }
            | InstrData::Act { dst, .. }
            | InstrData::Act2 { dst, .. }
            | InstrData::Reduce { dst, .. }
            | InstrData::Scan { dst, .. }
            | InstrData::Select { dst, .. }
            | InstrData::Matmul { dst, .. }
            | InstrData::Match8 { dst, .. }
            | InstrData::SelectReduce { dst, .. }
            | InstrData::Gather { dst, .. }
            | InstrData::DynCopy { dst, .. }
            | InstrData::Rng { dst, .. }
            | InstrData::RangeSelect { dst, .. }
            | InstrData::Shuffle { dst, .. }
            | InstrData::QuantizeMx { dst, .. }
            | InstrData::MatmulMx { dst, .. }
            | InstrData::LocalGather { dst, .. }
            | InstrData::Nonzero { dst, .. }
            | InstrData::DmaCompute { dst, .. }
            | InstrData::TopK { val: dst, .. } => Some(dst),
            InstrData::LoopBegin { .. }
            | InstrData::LoopEnd { .. }
            | InstrData::Dma { .. }
            | InstrData::Indirect { .. }
            | InstrData::Seed { .. }
            | InstrData::Register { .. } => None,
        }
    }

    /// How the destination accumulates: its [`Write`], or, for an ALU instruction that updates
    /// its destination in place with an accumulating operation (`t = t + x`, `t -= 2.0`, the
    /// combine of `t += load(x)`: source 0 is the destination's view, in order, and the second
    /// operation is `bypass`), [`Write::Accumulate`] with that operation, as NKI treats `t = t +
    /// x` and `t += x` alike. `None` for formats without a destination.
    pub fn accumulation(&self) -> Option<Write> {
        let dst = self.dst()?;
        if let InstrData::Alu { src, op, rev, .. } = *self
            && dst.write == Write::Overwrite
            && src[0] == Src::Tile(dst.view)
            && rev == 0
            && op[1] == Alu::Bypass
            && matches!(
                op[0],
                Alu::Add | Alu::Subtract | Alu::Multiply | Alu::Divide | Alu::Max | Alu::Min
            )
        {
            return Some(Write::Accumulate(op[0]));
        }
        Some(dst.write)
    }

    /// The destination, to change it (`None` for formats without one).
    pub fn dst_mut(&mut self) -> Option<&mut Dst> {
        match self {
            InstrData::Unary { dst, .. }
            | InstrData::Fill { dst, .. }
            | InstrData::Iota { dst, .. }
            | InstrData::Alu { dst, .. }
            | InstrData::Act { dst, .. }
            | InstrData::Act2 { dst, .. }
            | InstrData::Reduce { dst, .. }
            | InstrData::Scan { dst, .. }
            | InstrData::Select { dst, .. }
            | InstrData::Matmul { dst, .. }
            | InstrData::Match8 { dst, .. }
            | InstrData::SelectReduce { dst, .. }
            | InstrData::Gather { dst, .. }
            | InstrData::DynCopy { dst, .. }
            | InstrData::Rng { dst, .. }
            | InstrData::RangeSelect { dst, .. }
            | InstrData::Shuffle { dst, .. }
            | InstrData::QuantizeMx { dst, .. }
            | InstrData::MatmulMx { dst, .. }
            | InstrData::LocalGather { dst, .. }
            | InstrData::Nonzero { dst, .. }
            | InstrData::DmaCompute { dst, .. }
            | InstrData::TopK { val: dst, .. } => Some(dst),
            InstrData::LoopBegin { .. }
            | InstrData::LoopEnd { .. }
            | InstrData::Dma { .. }
            | InstrData::Indirect { .. }
            | InstrData::Seed { .. }
            | InstrData::Register { .. } => None,
        }
    }

    /// The same operands with the destination's view replaced (formats without a destination
    /// are returned unchanged).
    pub fn with_dst_view(mut self, view: ViewId) -> InstrData {
        if let Some(dst) = self.dst_mut() {
            dst.view = view;
        }
        self
    }
}

/// One instruction: the opcode, the engine that runs it, an optional mask, the kernel source
/// line it came from (0 when unknown), and its operands.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instr {
    /// The operation.
    pub opcode: Opcode,
    /// The engine that runs it: one of the opcode's legal engines
    /// ([`crate::ir::ops::OpInfo::engines`]).
    pub engine: Engine,
    /// The mask restricting the instruction to a sub-rectangle of its grid.
    pub mask: Option<MaskId>,
    /// Line of the kernel source that produced the instruction.
    pub line: u32,
    /// The operands, in the opcode's format.
    pub data: InstrData,
}

const _: () = assert!(core::mem::size_of::<Instr>() <= 64);

impl Instr {
    /// An instruction on the opcode's default engine, without mask or source line.
    pub fn new(opcode: Opcode, data: InstrData) -> Instr {
        Instr {
            opcode,
            engine: opcode.info().engines[0],
            mask: None,
            line: 0,
            data,
        }
    }

    /// The operands, each with its slot and direction: the one enumeration that allocation,
    /// checking, remapping, execution, timing and strictness all use.
    pub fn operands(&self) -> Operands {
        Operands::of(self)
    }

    /// The instruction's mnemonic (NKI's name): [`crate::ir::ops::OpInfo::name`].
    pub fn mnemonic(&self) -> &'static str {
        self.opcode.info().name
    }
}
