//! The opcode table: one entry per hardware instruction, written once.
//!
//! Each [`Opcode`] has an [`OpInfo`]: its NKI name (which is also the listing's mnemonic and
//! the [`crate::builder::ProgramBuilder`] method), its format (the [`InstrData`] variant it
//! uses), the engines that may run it (the first is the default), the name, direction and
//! allowed memories of each operand slot, one shape/dtype inference function, and which source
//! elements each element it writes depends on ([`Deps`]). `#[kernel]`
//! calls [`infer`] to create a result tile and to blame the right operand of a mistake;
//! [`crate::ProgramBuf::finish`] calls the same function for every instruction. No rule is wired
//! twice.

mod activate2;
mod cumulative;
mod dma_compute;
mod dma_transpose;
mod dyncopy;
mod exponential;
mod gather;
mod indirect;
mod infer;
mod local_gather;
mod mx;
mod nonzero;
mod range_select;
mod register;
mod rng;
mod sequence_bounds;
mod shuffle;
mod topk;

pub use activate2::ACTIVATE2_STAGES;
pub use cumulative::cumulative_reset;
pub use dma_transpose::{dma_transpose_axes, dma_transpose_padded};
pub use infer::{Blame, InferIn, Inferred, Part, Slot, ViewInfo, infer};
pub use mx::mx_scale_partitions_needed;
pub use rng::{XORWOW_WORDS, xorwow_generators, xorwow_state_words};

use crate::ir::{Dir, InstrData};
use crate::target::{Engine, Memory};

/// An operand layout: which [`InstrData`] variant an opcode uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// [`InstrData::LoopBegin`]
    LoopBegin,
    /// [`InstrData::LoopEnd`]
    LoopEnd,
    /// [`InstrData::Dma`]
    Dma,
    /// [`InstrData::Unary`]
    Unary,
    /// [`InstrData::Fill`]
    Fill,
    /// [`InstrData::Iota`]
    Iota,
    /// [`InstrData::Alu`]
    Alu,
    /// [`InstrData::Act`]
    Act,
    /// [`InstrData::Reduce`]
    Reduce,
    /// [`InstrData::Scan`]
    Scan,
    /// [`InstrData::Select`]
    Select,
    /// [`InstrData::Matmul`]
    Matmul,
    /// [`InstrData::Match8`]
    Match8,
    /// [`InstrData::SelectReduce`]
    SelectReduce,
    /// [`InstrData::Indirect`]
    Indirect,
    /// [`InstrData::Gather`]
    Gather,
    /// [`InstrData::DynCopy`]
    DynCopy,
    /// [`InstrData::Rng`]
    Rng,
    /// [`InstrData::Seed`]
    Seed,
    /// [`InstrData::RangeSelect`]
    RangeSelect,
    /// [`InstrData::Shuffle`]
    Shuffle,
    /// [`InstrData::QuantizeMx`]
    QuantizeMx,
    /// [`InstrData::MatmulMx`]
    MatmulMx,
    /// [`InstrData::LocalGather`]
    LocalGather,
    /// [`InstrData::Nonzero`]
    Nonzero,
    /// [`InstrData::DmaCompute`]
    DmaCompute,
    /// [`InstrData::TopK`]
    TopK,
    /// [`InstrData::Act2`]
    Act2,
    /// [`InstrData::Register`]
    Register,
}

impl Format {
    /// The format of an instruction's operands.
    pub const fn of(data: &InstrData) -> Format {
        match data {
            InstrData::LoopBegin { .. } => Format::LoopBegin,
            InstrData::LoopEnd { .. } => Format::LoopEnd,
            InstrData::Dma { .. } => Format::Dma,
            InstrData::Unary { .. } => Format::Unary,
            InstrData::Fill { .. } => Format::Fill,
            InstrData::Iota { .. } => Format::Iota,
            InstrData::Alu { .. } => Format::Alu,
            InstrData::Act { .. } => Format::Act,
            InstrData::Reduce { .. } => Format::Reduce,
            InstrData::Scan { .. } => Format::Scan,
            InstrData::Select { .. } => Format::Select,
            InstrData::Matmul { .. } => Format::Matmul,
            InstrData::Match8 { .. } => Format::Match8,
            InstrData::SelectReduce { .. } => Format::SelectReduce,
            InstrData::Indirect { .. } => Format::Indirect,
            InstrData::Gather { .. } => Format::Gather,
            InstrData::DynCopy { .. } => Format::DynCopy,
            InstrData::Rng { .. } => Format::Rng,
            InstrData::Seed { .. } => Format::Seed,
            InstrData::RangeSelect { .. } => Format::RangeSelect,
            InstrData::Shuffle { .. } => Format::Shuffle,
            InstrData::QuantizeMx { .. } => Format::QuantizeMx,
            InstrData::MatmulMx { .. } => Format::MatmulMx,
            InstrData::LocalGather { .. } => Format::LocalGather,
            InstrData::Nonzero { .. } => Format::Nonzero,
            InstrData::DmaCompute { .. } => Format::DmaCompute,
            InstrData::TopK { .. } => Format::TopK,
            InstrData::Act2 { .. } => Format::Act2,
            InstrData::Register { .. } => Format::Register,
        }
    }
}

/// One operand slot of an opcode.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OperandSpec {
    /// NKI's name of the operand (`src`, `stationary`, `data1`, ...); empty for a slot the
    /// opcode does not use.
    pub name: &'static str,
    /// Whether the instruction reads or writes it (a destination that accumulates is read too).
    pub dir: Dir,
    /// The memories it may be in.
    pub memory: &'static [Memory],
    /// How its axes follow the instruction's grid (the axes a mask restricts).
    pub axes: Axes,
}

/// How an operand's axes follow its instruction's grid: the grid is the destination's
/// dimensions (a reduction's: its source's), and a mask's terms name grid axes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Axes {
    /// Axis `j` of the operand is axis `j` of the grid, or has size 1 and is broadcast along
    /// it, or (a reduction's result) is reduced away.
    Grid,
    /// The grid's first two axes swapped: a transpose's source.
    Swapped,
    /// Not a function of the grid (a matmul's operands); such opcodes take no mask.
    Own,
    /// Only its partition axis is the grid's (`gather_flattened`'s data, whose free elements
    /// are all read by position): a mask cuts its partitions, never its free axes.
    Partitions,
    /// The grid's axes permuted as NKI's `dma_transpose` permutes a source of the grid's rank
    /// ([`dma_transpose_axes`]: the first and the last axis swapped): a DMA transpose's source.
    Ends,
}

impl Axes {
    /// The operand axis that grid axis `axis` runs along, if any, for an operand of `rank`
    /// axes.
    pub fn of_grid_axis(self, axis: usize, rank: usize) -> Option<usize> {
        match (self, axis) {
            (Axes::Ends, a) => dma_transpose_padded(rank).get(a).copied(),
            (Axes::Grid, a) => Some(a),
            (Axes::Swapped, 0) => Some(1),
            (Axes::Swapped, 1) => Some(0),
            (Axes::Swapped, a) => Some(a),
            (Axes::Own, _) => None,
            (Axes::Partitions, 0) => Some(0),
            (Axes::Partitions, _) => None,
        }
    }
}

/// Which source elements each element an instruction writes depends on: its definedness rule.
///
/// Strict launches follow it (`nki_runtime::Strict`): an element computed from a byte no
/// instruction of the launch wrote, or from such an element, is *undefined*, and storing one is
/// the error. Each rule is stated on the operands as the executor resolves them (after the
/// mask), in the terms of the reference interpreter (`nki-runtime/src/exec/reference.rs`); under
/// every rule, an element of a destination that accumulates (`+=`, an accumulation group past
/// its first iteration) also depends on its old value. Every opcode has one (a required field
/// of the table), and every consumer matches on it exhaustively.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Deps {
    /// No data: loop control.
    Control,
    /// Element `k` of the destination (row-major over its dimensions) is element `k` of the
    /// source (row-major over its own): `load`, `store`, `tensor_copy`.
    Move,
    /// The destination's element at point `t` of the grid depends on every source's element at
    /// `t` (a source broadcast along its size-1 or zero-stride axes reads one element for many
    /// points; immediates and grid expressions are always defined). A per-partition reduction
    /// of the results (`reduce_res`) depends on every result of its partition.
    Elementwise,
    /// `affine_select`: the element at `t` depends on `on_true_tile[t]` where the affine
    /// predicate holds at `t` (a function of the grid and the loop values, so known to strict
    /// mode), and on nothing in memory elsewhere (`on_false_value` is an immediate).
    AffineSelect,
    /// `select`, `select_reduce`: the element at `t` depends on `predicate[t]`; where that
    /// element is defined, also on the side its value picks (`on_true[t]` where it is nonzero as
    /// fp32, NaN included, or zero under `select_reduce`'s `reverse_pred`; `on_false[t]`
    /// elsewhere), and on nothing on the other side; where it is undefined, the element is
    /// undefined whatever the sides hold. A per-partition reduction of the results
    /// (`reduce_res`) depends on every result of its partition.
    Select,
    /// `range_select`: the element at `t = (p, …)` depends on the bounds' elements of `p`;
    /// where both are defined, also on `on_true[t]` if `range_start` plus `t`'s free index lies
    /// in their range, and on nothing in memory elsewhere (the fill is an immediate). A
    /// per-partition reduction of the results (`reduce_res`) depends on every result of its
    /// partition.
    RangeSelect,
    /// A reduction along free axes: each destination element depends on every source element
    /// whose kept coordinates are its own (the whole of the reduced axes).
    Reduce,
    /// A scan along each partition's free elements: element `i` of partition `p` (row-major)
    /// depends on the sources' elements `0..=i` of partition `p` (slots 1 and 2) and on the
    /// initial value of `p` (slot 3): `tensor_tensor_scan`'s `data0`, `data1`, `initial`;
    /// `tensor_scalar_cumulative`'s `src`, `imm0`, `imm1`.
    Prefix,
    /// Every element of partition `p` of the destination depends on every element of partition
    /// `p` of every source: `bn_stats`, `bn_aggr`, `max8`, `nc_find_index8`,
    /// `nc_match_replace8`.
    Row,
    /// A contraction over the partitions: `dst[m, n]` depends on `stationary[:, m]` and
    /// `moving[:, n]` (`m`, `n` the row-major indices of the operands' free elements), and for
    /// `nc_matmul_mx` on the scales of those columns (element `m` of `stationary_scale`,
    /// `n` of `moving_scale`, on the partitions [`crate::mx_scale_partition`] of each group).
    Contraction,
    /// A transpose: `dst[f, p]` depends on `src[p, f]` (`f` the row-major index of the
    /// source's free elements): `nc_transpose`, `load_transpose2d`.
    Transpose,
    /// An indirect DMA ([`InstrData::Indirect`]): with `r(p)` the HBM row the index column's
    /// element at partition `p` names, the element at grid point `t = (p, f…)` moves between
    /// the tile's element `t` and the access's element `t` on row `r(p)`, and depends on the
    /// source's element and on the index element of `p` (an undefined index defines nothing:
    /// it names no row). `atomic_rmw`'s HBM element also depends on its old value, and on
    /// every earlier update of its row in the same instruction (duplicate indices accumulate
    /// in partition order).
    Indirect,
    /// `gather_flattened`: the element at `t` depends on `indices[t]` and, where that is
    /// defined, on the element of its partition of `data` it names (the data's free elements
    /// flattened row-major); where it is undefined, the element is undefined.
    Gather,
    /// `random_seed`, `set_rng_seed`, `rand_set_state`: no element of memory is written; the
    /// generator's state (for the `rand`, `dropout`, `rng`, `rand2` and `rand_get_state` after
    /// it) depends on every element of the source, so strict launches refuse a seed or state
    /// read from unwritten or undefined bytes, as they refuse storing one.
    Seed,
    /// NKI's `dma_transpose`: with `axes` the permutation of the destination's rank
    /// ([`dma_transpose_axes`]), the destination's element at `t` is the source's element at
    /// `s` where `s[axes[i]] = t[i]`, and depends on it alone.
    Permute,
    /// `nc_stream_shuffle`: element `f` of destination partition `j` (counted from the
    /// access's start; `q = j / 32`, `i = j mod 32`) depends on element `f` of source partition
    /// `32·q + mask[i]`, or on its own old value where `mask[i]` is 255 (left unmodified).
    Shuffle,
    /// `quantize_mx`: element `f` of destination partition `p` (counted from the access's
    /// start) depends on the 32 source values of its group (partitions `8·(p / 8) … +7`,
    /// elements `4f … 4f+3`, row-major over the free dims); the scale at partition
    /// [`crate::mx_scale_partition`]`(i)`, element `f`, on group `(i, f)`'s; the scale tile's
    /// other elements keep their old value.
    Mx,
    /// `local_gather`: element `j·elems + e` of partition `p` depends on index `j` of `p`'s
    /// group of 16 partitions and, where that is defined, on element `index_j + e` of partition
    /// `p` of `src_buffer` (flattened row-major); where it is undefined, the element is
    /// undefined.
    LocalGather,
    /// `nonzero_with_count`: on the partitions it processes (`0, 16, 32, …` counted from the
    /// access's start, [`crate::nonzero_partition`]) every element of the destination depends
    /// on every element of the same partition of the source (the positions, the padding's
    /// place and the count all do); it writes no other partition, whose elements keep what
    /// they held (unwritten in a new tile).
    Nonzero,
    /// `topk`: within each group of 16 partitions (counted from the accesses' start), the
    /// elements it writes (snake positions `0 … K−1` of `val_dst` and `idx_dst`,
    /// [`crate::topk_place`]) depend on every element of the group's snake in `src` (positions
    /// `0 … n−1`): which values are the largest depends on all of them. It writes no other
    /// element; those keep what they held (unwritten in a new tile).
    TopK,
    /// The register instructions: `register_move` touches no memory; `register_load` writes
    /// no memory, but the register (and the device loops that read it) depends on the element
    /// read, so strict launches refuse an unwritten or undefined one, as for a seed;
    /// `register_store`'s element is the register's value, always defined.
    Register,
}

/// The shape/dtype rule of an opcode: given what is known of its operands, the result's
/// shape, dtype and memory, or the operand to blame for a broken rule.
pub type InferFn = fn(&InferIn<'_>) -> Result<Option<Inferred>, Blame>;

/// Everything the language knows about one opcode.
#[derive(Copy, Clone, Debug)]
pub struct OpInfo {
    /// NKI's name: the listing's mnemonic and the builder's method name.
    pub name: &'static str,
    /// The operand layout.
    pub format: Format,
    /// The engines that may run it; the first is the default.
    pub engines: &'static [Engine],
    /// Operand slots, in the format's order.
    pub operands: &'static [OperandSpec],
    /// The shape/dtype rule.
    pub infer: InferFn,
    /// Which `mask` the instruction takes (a predicate on loop indices alone, which runs or
    /// skips it whole, it always takes).
    pub maskable: Maskable,
    /// Which source elements each element it writes depends on.
    pub deps: Deps,
    /// Whether it can combine its result into its destination ([`crate::Write::Accumulate`],
    /// [`crate::Write::Group`]): a matmul accumulates in PSUM, and the engines' ALU-based
    /// instructions combine with what the destination holds; a memset, an iota, a transpose,
    /// the batch-norm statistics and the DMA transfers only overwrite it.
    pub accumulates: bool,
    /// Whether and how the instruction accepts NKI's packed MX types (`float8_e4m3fn_x4`,
    /// ...: NKI's "custom data type for `nc_matmul_mx` and `quantize_mx`").
    pub packed: Packed,
    /// What the instruction computes.
    pub doc: &'static str,
}

const ON_CHIP: &[Memory] = &[Memory::Sbuf, Memory::Psum];
const SBUF: &[Memory] = &[Memory::Sbuf];
const PSUM: &[Memory] = &[Memory::Psum];
const HBM: &[Memory] = &[Memory::Hbm];

const fn slot(name: &'static str, dir: Dir, memory: &'static [Memory]) -> OperandSpec {
    OperandSpec {
        name,
        dir,
        memory,
        axes: Axes::Grid,
    }
}

impl OperandSpec {
    const fn axes(self, axes: Axes) -> OperandSpec {
        OperandSpec { axes, ..self }
    }
}

/// Which masks an instruction takes: conditions that cut its grid, on which axes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Maskable {
    /// Any mask.
    Any,
    /// Conditions on its partitions only (`bn_stats`: NKI refuses a mask on its reduced axis).
    Partitions,
    /// None that cuts its grid (a matmul is masked through its operands' indices).
    No,
}

/// Which instructions take NKI's packed MX types (`float8_e5m2_x4`, `float8_e4m3fn_x4`,
/// `float4_e2m1fn_x4`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Packed {
    /// None of its operands may have one (NKI: they are only for the MX instructions).
    No,
    /// A copy moving them as bits: with one packed operand, every operand has that type.
    Bits,
    /// An MX instruction (`quantize_mx`, `nc_matmul_mx`): its own rule says which operand
    /// takes which packed type.
    Mx,
}

macro_rules! opcodes {
    ($( $(#[doc = $doc:literal])* $v:ident { name: $name:literal, format: $format:ident, engines: $engines:expr, operands: $operands:expr, infer: $infer:path, maskable: $maskable:ident, deps: $deps:ident, accumulates: $accumulates:literal, packed: $packed:ident, } )*) => {
        /// A hardware instruction (one per NKI ISA call), described by its [`OpInfo`].
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Opcode {
            $( $(#[doc = $doc])* $v, )*
        }

        /// The table, indexed by `Opcode as usize`.
        static OPS: &[OpInfo] = &[$(
            OpInfo {
                name: $name,
                format: Format::$format,
                engines: $engines,
                operands: $operands,
                infer: $infer,
                maskable: Maskable::$maskable,
                deps: Deps::$deps,
                accumulates: $accumulates,
                packed: Packed::$packed,
                doc: concat!($($doc),*),
            },
        )*];

        impl Opcode {
            /// Every opcode, in table order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$v),*];
        }
    };
}

opcodes! {
    /// Start of a loop (`affine_range`, `sequential_range`): runs on the sync engine.
    LoopBegin {
        name: "loop",
        format: LoopBegin,
        engines: &[Engine::Sync],
        operands: &[],
        infer: infer::none,
        maskable: No,
        deps: Control,
        accumulates: false,
        packed: No,
    }
    /// End of a loop: advance the induction variable and jump back, or leave.
    LoopEnd {
        name: "end",
        format: LoopEnd,
        engines: &[Engine::Sync],
        operands: &[],
        infer: infer::none,
        maskable: No,
        deps: Control,
        accumulates: false,
        packed: No,
    }
    /// `load`: an HBM access into an SBUF tile, cast to the tile's dtype.
    Load {
        name: "load",
        format: Dma,
        engines: &[Engine::Dma],
        operands: &[slot("dst", Dir::Write, SBUF), slot("src", Dir::Read, HBM)],
        infer: infer::load,
        maskable: Any,
        deps: Move,
        accumulates: false,
        packed: Bits,
    }
    /// `store`: an SBUF tile into an HBM output access, cast to the tensor's dtype.
    Store {
        name: "store",
        format: Dma,
        engines: &[Engine::Dma],
        operands: &[slot("value", Dir::Read, SBUF), slot("dst", Dir::Write, HBM)],
        infer: infer::store,
        maskable: Any,
        deps: Move,
        accumulates: false,
        packed: Bits,
    }
    /// `nc_matmul`: `dst = stationaryᵀ · moving` in fp32 in PSUM.
    Matmul {
        name: "nc_matmul",
        format: Matmul,
        engines: &[Engine::Tensor],
        operands: &[
            slot("dst", Dir::Write, PSUM),
            slot("stationary", Dir::Read, SBUF).axes(Axes::Own),
            slot("moving", Dir::Read, SBUF).axes(Axes::Own),
        ],
        infer: infer::matmul,
        maskable: No,
        deps: Contraction,
        accumulates: true,
        packed: No,
    }
    /// `nc_transpose`: `dst[f, p] = src[p, f]`, the free dimensions flattened. TensorE: a
    /// `[P ≤ 128, F ≤ 128]` SBUF tile into fp32 PSUM; VectorE: `[P ≤ 32, F ≤ 32]`, any dtype,
    /// SBUF or PSUM.
    Transpose {
        name: "nc_transpose",
        format: Unary,
        engines: &[Engine::Tensor, Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP).axes(Axes::Swapped),
        ],
        infer: infer::nc_transpose,
        maskable: Any,
        deps: Transpose,
        accumulates: false,
        packed: No,
    }
    /// `tensor_copy`: `dst = src`, cast through fp32 to the destination's dtype. Vector and
    /// GpSimd keep the bits when the dtypes are equal; the Scalar engine always goes through
    /// fp32 (so an int32 copy above 2²⁴ rounds).
    TensorCopy {
        name: "tensor_copy",
        format: Unary,
        engines: &[Engine::Vector, Engine::Scalar, Engine::GpSimd],
        operands: &[slot("dst", Dir::Write, ON_CHIP), slot("src", Dir::Read, ON_CHIP)],
        infer: infer::same_as_src,
        maskable: Any,
        deps: Move,
        accumulates: true,
        packed: No,
    }
    /// `memset`: every element of `dst` becomes the value, converted to its dtype.
    Memset {
        name: "memset",
        format: Fill,
        engines: &[Engine::Vector, Engine::GpSimd],
        operands: &[slot("dst", Dir::Write, ON_CHIP)],
        infer: infer::given_dst,
        maskable: Any,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `tensor_tensor`: `dst = data1 op data2`, elementwise, in fp32 (bit operations on
    /// 32-bit integers).
    TensorTensor {
        name: "tensor_tensor",
        format: Alu,
        engines: &[Engine::Vector, Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data1", Dir::Read, ON_CHIP),
            slot("data2", Dir::Read, ON_CHIP),
        ],
        infer: infer::tensor_tensor,
        maskable: Any,
        deps: Elementwise,
        accumulates: true,
        packed: No,
    }
    /// `tensor_scalar`: `dst = (data op0 operand0) op1 operand1`, each operand an immediate or
    /// a `[P, 1]` vector applied along the free dimensions.
    TensorScalar {
        name: "tensor_scalar",
        format: Alu,
        engines: &[Engine::Vector, Engine::Scalar, Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP),
            slot("operand0", Dir::Read, ON_CHIP),
            slot("operand1", Dir::Read, ON_CHIP),
        ],
        infer: infer::tensor_scalar,
        maskable: Any,
        deps: Elementwise,
        accumulates: true,
        packed: No,
    }
    /// `scalar_tensor_tensor`: `dst = (data op0 operand0) op1 operand1`, `operand0` an
    /// immediate or `[P, 1]` vector, `operand1` a tile.
    ScalarTensorTensor {
        name: "scalar_tensor_tensor",
        format: Alu,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP),
            slot("operand0", Dir::Read, ON_CHIP),
            slot("operand1", Dir::Read, ON_CHIP),
        ],
        infer: infer::tensor_scalar,
        maskable: Any,
        deps: Elementwise,
        accumulates: true,
        packed: No,
    }
    /// `tensor_scalar_reduce`: `dst = data op0 operand0`, and `reduce_res` the reduction of
    /// each partition's results.
    TensorScalarReduce {
        name: "tensor_scalar_reduce",
        format: Alu,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP),
            slot("operand0", Dir::Read, ON_CHIP),
            slot("", Dir::Read, ON_CHIP),
            slot("reduce_res", Dir::Write, ON_CHIP),
        ],
        infer: infer::tensor_scalar,
        maskable: Any,
        deps: Elementwise,
        accumulates: true,
        packed: No,
    }
    /// `activation`: `dst = op(data · scale + bias)` on the Scalar engine, with an optional
    /// reduction of each partition's results into `reduce_res`.
    Activation {
        name: "activation",
        format: Act,
        engines: &[Engine::Scalar],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP),
            slot("scale", Dir::Read, ON_CHIP),
            slot("bias", Dir::Read, ON_CHIP),
            slot("reduce_res", Dir::Write, ON_CHIP),
        ],
        infer: infer::activation,
        maskable: Any,
        deps: Elementwise,
        accumulates: true,
        packed: No,
    }
    /// `tensor_reduce`: a reduction along free axes of each partition.
    TensorReduce {
        name: "tensor_reduce",
        format: Reduce,
        engines: &[Engine::Vector],
        operands: &[slot("dst", Dir::Write, ON_CHIP), slot("data", Dir::Read, ON_CHIP)],
        infer: infer::tensor_reduce,
        maskable: Any,
        deps: Reduce,
        accumulates: true,
        packed: No,
    }
    /// `tensor_tensor_scan`: `r[i] = (data0[i] op0 r[i−1]) op1 data1[i]` along each
    /// partition's free elements, `r[−1] = initial`.
    TensorTensorScan {
        name: "tensor_tensor_scan",
        format: Scan,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data0", Dir::Read, ON_CHIP),
            slot("data1", Dir::Read, ON_CHIP),
            slot("initial", Dir::Read, ON_CHIP),
        ],
        infer: infer::tensor_tensor_scan,
        maskable: Any,
        deps: Prefix,
        accumulates: true,
        packed: No,
    }
    /// `iota`: the values of an affine expression of the grid (int32 arithmetic), converted to
    /// the destination's dtype.
    Iota {
        name: "iota",
        format: Iota,
        engines: &[Engine::GpSimd],
        operands: &[slot("dst", Dir::Write, SBUF), slot("expr", Dir::Read, &[])],
        infer: infer::iota,
        maskable: Any,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `affine_select`: `dst = pred ? on_true_tile : on_false_value`, where `pred` is an affine
    /// comparison of the grid's coordinates and the index variables.
    AffineSelect {
        name: "affine_select",
        format: Select,
        engines: &[Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, SBUF),
            slot("pred", Dir::Read, &[]),
            slot("on_true_tile", Dir::Read, SBUF),
            slot("on_false_value", Dir::Read, &[]),
        ],
        infer: infer::select,
        maskable: Any,
        deps: AffineSelect,
        accumulates: true,
        packed: No,
    }
    /// `select`: `dst = predicate ? on_true : on_false` elementwise (`nl.where`); the
    /// predicate is a tile (nonzero = true), the values tiles or immediates.
    Select {
        name: "select",
        format: Select,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("predicate", Dir::Read, ON_CHIP),
            slot("on_true", Dir::Read, ON_CHIP),
            slot("on_false", Dir::Read, ON_CHIP),
        ],
        infer: infer::select,
        maskable: Any,
        deps: Select,
        accumulates: true,
        packed: No,
    }
    /// `reciprocal`: `dst = 1 / data` on the Vector engine (IEEE division: more accurate than
    /// the Scalar engine's approximation on hardware).
    Reciprocal {
        name: "reciprocal",
        format: Unary,
        engines: &[Engine::Vector],
        operands: &[slot("dst", Dir::Write, ON_CHIP), slot("data", Dir::Read, ON_CHIP)],
        infer: infer::same_as_src,
        maskable: Any,
        deps: Elementwise,
        accumulates: true,
        packed: No,
    }
    /// `bn_stats`: per partition, the count, mean and variance·count of the even and of the odd
    /// elements of a `[P, F ≤ 512]` tile: `[P, 6]` fp32.
    BnStats {
        name: "bn_stats",
        format: Unary,
        engines: &[Engine::Vector],
        operands: &[slot("dst", Dir::Write, ON_CHIP), slot("data", Dir::Read, ON_CHIP)],
        infer: infer::bn_stats,
        maskable: Partitions,
        deps: Row,
        accumulates: false,
        packed: No,
    }
    /// `bn_aggr`: the mean and variance of each partition from concatenated `bn_stats` results:
    /// `[P, 2]` fp32.
    BnAggr {
        name: "bn_aggr",
        format: Unary,
        engines: &[Engine::Vector],
        operands: &[slot("dst", Dir::Write, ON_CHIP), slot("data", Dir::Read, ON_CHIP)],
        infer: infer::bn_aggr,
        maskable: Any,
        deps: Row,
        accumulates: false,
        packed: No,
    }
    /// `load_transpose2d`: a 2-D HBM access `[A, B]` into an SBUF tile `[B, A]`, cast to the
    /// tile's dtype.
    LoadTranspose2d {
        name: "load_transpose2d",
        format: Dma,
        engines: &[Engine::Dma],
        operands: &[
            slot("dst", Dir::Write, SBUF),
            slot("src", Dir::Read, HBM).axes(Axes::Swapped),
        ],
        infer: infer::load_transpose2d,
        maskable: Any,
        deps: Transpose,
        accumulates: false,
        packed: No,
    }
    /// `max8`: the 8 largest values of each partition's free elements (8 to 16384 of them,
    /// compared as fp32), in descending order: `[P, 8]`.
    Max8 {
        name: "max8",
        format: Unary,
        engines: &[Engine::Vector],
        operands: &[slot("dst", Dir::Write, ON_CHIP), slot("src", Dir::Read, ON_CHIP)],
        infer: infer::max8,
        maskable: Partitions,
        deps: Row,
        accumulates: false,
        packed: No,
    }
    /// `nc_find_index8`: per partition, the index (row-major, from 0) of the first element of
    /// `data` (8 to 16384 of them) equal, as fp32, to each of the 8 `vals`: `[P, 8]` uint32 or
    /// uint16.
    FindIndex8 {
        name: "nc_find_index8",
        format: Match8,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP),
            slot("vals", Dir::Read, ON_CHIP),
        ],
        infer: infer::nc_find_index8,
        maskable: Partitions,
        deps: Row,
        accumulates: false,
        packed: No,
    }
    /// `nc_match_replace8`: `data` with, per partition, the first element equal (as fp32) to
    /// each of the 8 `vals` not yet replaced, replaced by the immediate `imm`; optionally the
    /// replaced elements' indices into `dst_idx` (`[P, 8]`, uint32 or uint16).
    MatchReplace8 {
        name: "nc_match_replace8",
        format: Match8,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP),
            slot("vals", Dir::Read, ON_CHIP),
            slot("imm", Dir::Read, &[]),
            slot("dst_idx", Dir::Write, ON_CHIP),
        ],
        infer: infer::nc_match_replace8,
        maskable: Partitions,
        deps: Row,
        accumulates: false,
        packed: No,
    }
    /// `select_reduce`: `dst = predicate ? on_true : on_false` elementwise (`predicate` a tile
    /// of integers, nonzero = true, negated by `reverse_pred`; `on_false` a number or a
    /// `[P, 1]` column), and optionally the maximum of each partition's results into the
    /// `[P, 1]` `reduce_res`.
    SelectReduce {
        name: "select_reduce",
        format: SelectReduce,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("predicate", Dir::Read, ON_CHIP),
            slot("on_true", Dir::Read, ON_CHIP),
            slot("on_false", Dir::Read, ON_CHIP),
            slot("reduce_res", Dir::Write, ON_CHIP),
        ],
        infer: infer::select_reduce,
        maskable: Any,
        deps: Select,
        accumulates: false,
        packed: No,
    }
    /// `load` with a tile of indices (NKI's indirect DMA, `load(src[idx, i_f])`): the HBM rows
    /// the indices name, one per partition, into an SBUF tile, cast to its dtype.
    IndirectLoad {
        name: "indirect_load",
        format: Indirect,
        engines: &[Engine::Dma],
        operands: &[
            slot("dst", Dir::Write, SBUF),
            slot("src", Dir::Read, HBM),
            slot("indices", Dir::Read, SBUF),
        ],
        infer: indirect::load,
        maskable: Any,
        deps: Indirect,
        accumulates: false,
        packed: No,
    }
    /// `store` with a tile of indices (`store(dst[idx, i_f], value)`): partition `p` of the
    /// tile to the HBM row index `p` names, cast to the tensor's dtype, in partition order (a
    /// row named twice keeps the last partition's values).
    IndirectStore {
        name: "indirect_store",
        format: Indirect,
        engines: &[Engine::Dma],
        operands: &[
            slot("value", Dir::Read, SBUF),
            slot("dst", Dir::Write, HBM),
            slot("indices", Dir::Read, SBUF),
        ],
        infer: indirect::store,
        maskable: Any,
        deps: Indirect,
        accumulates: false,
        packed: No,
    }
    /// `atomic_rmw(dst[idx, i_f], value, op=add)`: each HBM row index `p` names becomes
    /// `row + value[p]` (in fp32, rounded once to the tensor's dtype), in partition order, so
    /// that duplicate indices accumulate.
    AtomicRmw {
        name: "atomic_rmw",
        format: Indirect,
        engines: &[Engine::Dma],
        operands: &[
            slot("value", Dir::Read, SBUF),
            slot("dst", Dir::ReadWrite, HBM),
            slot("indices", Dir::Read, SBUF),
        ],
        infer: indirect::store,
        maskable: Any,
        deps: Indirect,
        accumulates: false,
        packed: No,
    }
    /// `gather_flattened(data, indices)`: per partition, the elements of `data` (its free
    /// elements flattened row-major) at the positions `indices` holds, in the indices' shape.
    GatherFlattened {
        name: "gather_flattened",
        format: Gather,
        engines: &[Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, SBUF),
            slot("data", Dir::Read, SBUF).axes(Axes::Partitions),
            slot("indices", Dir::Read, SBUF),
        ],
        infer: gather::gather_flattened,
        maskable: Any,
        deps: Gather,
        accumulates: false,
        packed: No,
    }
    /// `nc_n_gather` (NKI 0.6): `gather_flattened`'s per-partition gather as NKI's ISA call,
    /// uint32 indices only, the result in the data's dtype; NKI's `n` is the count of
    /// 512-element groups the instruction is made of.
    NcNGather {
        name: "nc_n_gather",
        format: Gather,
        engines: &[Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, SBUF),
            slot("data", Dir::Read, SBUF).axes(Axes::Partitions),
            slot("indices", Dir::Read, SBUF),
        ],
        infer: gather::nc_n_gather,
        maskable: No,
        deps: Gather,
        accumulates: false,
        packed: No,
    }
    /// `tensor_copy_dynamic_src`: `tensor_copy` of a source shifted within each partition by
    /// a run-time offset (an int32 or uint32 scalar in SBUF) along one free axis.
    TensorCopyDynamicSrc {
        name: "tensor_copy_dynamic_src",
        format: DynCopy,
        engines: &[Engine::Vector, Engine::Scalar, Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("src", Dir::Read, ON_CHIP),
            slot("offset", Dir::Read, SBUF).axes(Axes::Own),
        ],
        infer: dyncopy::tensor_copy_dynamic_src,
        maskable: Any,
        deps: Move,
        accumulates: false,
        packed: No,
    }
    /// `tensor_copy_dynamic_dst`: `tensor_copy` into a destination shifted within each
    /// partition by a run-time offset (an int32 or uint32 scalar in SBUF) along one free axis.
    TensorCopyDynamicDst {
        name: "tensor_copy_dynamic_dst",
        format: DynCopy,
        engines: &[Engine::Vector, Engine::Scalar, Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("src", Dir::Read, ON_CHIP),
            slot("offset", Dir::Read, SBUF).axes(Axes::Own),
        ],
        infer: dyncopy::tensor_copy_dynamic_src,
        maskable: Any,
        deps: Move,
        accumulates: false,
        packed: No,
    }
    /// `rand`: uniform values in `[0, 1)` from the counter-based generator (Philox4x32-10
    /// keyed by the seed and the instance; each element's counter is its partition, its free
    /// index and the generator's call count), converted exactly to the destination's float
    /// dtype.
    Rand {
        name: "rand",
        format: Rng,
        engines: &[Engine::Vector],
        operands: &[slot("dst", Dir::Write, ON_CHIP)],
        infer: rng::rand,
        maskable: Any,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `random_seed`: the generator's seed becomes the value of a one-element int32 tile, and
    /// its call count 0.
    RandomSeed {
        name: "random_seed",
        format: Seed,
        engines: &[Engine::Vector],
        operands: &[slot("", Dir::Write, &[]), slot("seed", Dir::Read, SBUF)],
        infer: rng::random_seed,
        maskable: No,
        deps: Seed,
        accumulates: false,
        packed: No,
    }
    /// `dropout`: `dst = u < prob ? 0 : data`, `u` the generator's uniform value for the
    /// element (as `rand` in fp32) and `prob` an immediate or a `[P, 1]` column; no scaling.
    Dropout {
        name: "dropout",
        format: Rng,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP),
            slot("prob", Dir::Read, ON_CHIP),
        ],
        infer: rng::dropout,
        maskable: Any,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `dma_transpose` of an HBM access of 2, 3 or 4 axes into an SBUF tile, permuted as NKI
    /// permutes it (`[1, 0]`, `[2, 1, 0]`, `[3, 1, 2, 0]`: the first and the last axis
    /// swapped), cast to the tile's dtype.
    DmaTranspose {
        name: "dma_transpose",
        format: Dma,
        engines: &[Engine::Dma],
        operands: &[
            slot("dst", Dir::Write, SBUF),
            slot("src", Dir::Read, HBM).axes(Axes::Ends),
        ],
        infer: dma_transpose::dma_transpose,
        maskable: Any,
        deps: Permute,
        accumulates: false,
        packed: No,
    }
    /// `dma_transpose` of an SBUF tile of 2, 3 or 4 axes into an SBUF tile, permuted as
    /// `dma_transpose` permutes an HBM access, cast to the destination's dtype.
    DmaTransposeSbuf {
        name: "dma_transpose_sbuf",
        format: Unary,
        engines: &[Engine::Dma],
        operands: &[
            slot("dst", Dir::Write, SBUF),
            slot("src", Dir::Read, SBUF).axes(Axes::Ends),
        ],
        infer: dma_transpose::dma_transpose,
        maskable: Any,
        deps: Permute,
        accumulates: false,
        packed: No,
    }
    /// `range_select` (NeuronCore-v3 and newer): `dst[p, i] = on_true_tile[p, i]` where
    /// `range_start + i` compares true with both `bound0[p]` and `bound1[p]` (`comp_op0`,
    /// `comp_op1`; in fp32, `i` the row-major free index), fp32's lowest value elsewhere; and
    /// optionally the maximum of each partition's results into the `[P, 1]` `reduce_res`.
    RangeSelect {
        name: "range_select",
        format: RangeSelect,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("on_true_tile", Dir::Read, ON_CHIP),
            slot("bound0", Dir::Read, ON_CHIP),
            slot("bound1", Dir::Read, ON_CHIP),
            slot("reduce_res", Dir::Write, ON_CHIP),
        ],
        infer: range_select::range_select,
        maskable: Partitions,
        deps: RangeSelect,
        accumulates: false,
        packed: No,
    }
    /// `nc_stream_shuffle`: partition `i` of each 32-partition quadrant of `dst` is partition
    /// `shuffle_mask[i]` of the same quadrant of `src` (bits copied), or is left as it was
    /// where the entry is 255.
    NcStreamShuffle {
        name: "nc_stream_shuffle",
        format: Shuffle,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP).axes(Axes::Own),
            slot("src", Dir::Read, ON_CHIP).axes(Axes::Own),
        ],
        infer: shuffle::nc_stream_shuffle,
        maskable: No,
        deps: Shuffle,
        accumulates: false,
        packed: No,
    }
    /// `quantize_mx` (NeuronCore-v4): fp16/bf16 `src` to MXFP8 on the Vector engine: each
    /// group of 8 partitions × 4 values shares one E8M0 scale in `dst_scale` (at partition
    /// `32·(i / 4) + i mod 4` for group `i`), the values divided by it and rounded to the
    /// packed `dst`'s lane type (`float8_e5m2_x4`, `float8_e4m3fn_x4`).
    QuantizeMx {
        name: "quantize_mx",
        format: QuantizeMx,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, SBUF).axes(Axes::Own),
            slot("src", Dir::Read, SBUF).axes(Axes::Own),
            slot("dst_scale", Dir::ReadWrite, SBUF).axes(Axes::Own),
        ],
        infer: mx::quantize_mx,
        maskable: No,
        deps: Mx,
        accumulates: false,
        packed: Mx,
    }
    /// `nc_matmul_mx` (NeuronCore-v4): `dst = stationaryᵀ · moving` of MXFP8/MXFP4 operands
    /// on the Tensor engine, each lane dequantized by its group's E8M0 scale (groups of 8
    /// partitions × the 4 lanes of an x4 element), accumulated in fp32 into a float32 or
    /// bfloat16 PSUM tile.
    MatmulMx {
        name: "nc_matmul_mx",
        format: MatmulMx,
        engines: &[Engine::Tensor],
        operands: &[
            slot("dst", Dir::Write, PSUM),
            slot("stationary", Dir::Read, SBUF).axes(Axes::Own),
            slot("moving", Dir::Read, SBUF).axes(Axes::Own),
            slot("stationary_scale", Dir::Read, SBUF).axes(Axes::Own),
            slot("moving_scale", Dir::Read, SBUF).axes(Axes::Own),
        ],
        infer: mx::nc_matmul_mx,
        maskable: No,
        deps: Contraction,
        accumulates: true,
        packed: Mx,
    }
    /// `local_gather`: within each group of 16 partitions, the group's indices (uint16, taken
    /// partition first) name positions in each partition's flattened free elements of
    /// `src_buffer`, `num_elem_per_idx` contiguous elements from each.
    LocalGather {
        name: "local_gather",
        format: LocalGather,
        engines: &[Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, SBUF).axes(Axes::Own),
            slot("src_buffer", Dir::Read, SBUF).axes(Axes::Own),
            slot("index", Dir::Read, SBUF).axes(Axes::Own),
        ],
        infer: local_gather::local_gather,
        maskable: No,
        deps: LocalGather,
        accumulates: false,
        packed: No,
    }
    /// `sequence_bounds`: for each element of a `[1, n]` tile of segment ids, the start and the
    /// end (exclusive) of the run of equal nonzero ids it belongs to, `[1, 2, n]`; an id of 0
    /// (padding) gets `n` and `-1`.
    SequenceBounds {
        name: "sequence_bounds",
        format: Unary,
        engines: &[Engine::GpSimd],
        operands: &[slot("dst", Dir::Write, SBUF), slot("segment_ids", Dir::Read, SBUF)],
        infer: sequence_bounds::sequence_bounds,
        maskable: No,
        deps: Row,
        accumulates: false,
        packed: No,
    }
    /// `tensor_scalar_cumulative`: along each partition's free elements (row-major), the
    /// accumulator `reg = (data op0 imm0) op1 reg` in fp32, each step's value written;
    /// `reg` starts at `op1`'s identity (`reset_reduce`) or at `imm1` (`load_reduce`).
    TensorScalarCumulative {
        name: "tensor_scalar_cumulative",
        format: Alu,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("src", Dir::Read, ON_CHIP),
            slot("imm0", Dir::Read, ON_CHIP),
            slot("imm1", Dir::Read, ON_CHIP),
        ],
        infer: cumulative::tensor_scalar_cumulative,
        maskable: Partitions,
        deps: Prefix,
        accumulates: true,
        packed: No,
    }
    /// `nonzero_with_count` (NeuronCore-v3 and newer): on partitions `0, 16, …, 112` only,
    /// the positions of the nonzero elements of `src` (`T` per partition) plus `index_offset`,
    /// then `padding_val` up to `T` elements, then their count: `T + 1` int32 elements.
    NonzeroWithCount {
        name: "nonzero_with_count",
        format: Nonzero,
        engines: &[Engine::GpSimd],
        operands: &[
            slot("dst", Dir::Write, SBUF).axes(Axes::Own),
            slot("src", Dir::Read, SBUF).axes(Axes::Own),
        ],
        infer: nonzero::nonzero_with_count,
        maskable: No,
        deps: Nonzero,
        accumulates: false,
        packed: No,
    }
    /// `activate2` (NeuronCore-v4): `dst = func((data op0 imm0) op1 imm1)` on the Scalar
    /// engine, the stage's operations each rounded to fp32 as `tensor_scalar`'s, with an
    /// optional reduction of each partition's results into `reduce_res`.
    Activate2 {
        name: "activate2",
        format: Act2,
        engines: &[Engine::Scalar],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("data", Dir::Read, ON_CHIP),
            slot("imm0", Dir::Read, ON_CHIP),
            slot("imm1", Dir::Read, ON_CHIP),
            slot("reduce_res", Dir::Write, ON_CHIP),
        ],
        infer: activate2::activate2,
        maskable: Any,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `exponential` (NeuronCore-v4): `dst = exp(src − max_value)` on the Vector engine in
    /// fp32 (`max_value` in the `bias` field: absent for 0, a number or a `[P, 1]` vector),
    /// with an optional `add` reduction of each partition's results into `reduce_res`.
    Exponential {
        name: "exponential",
        format: Act,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("src", Dir::Read, ON_CHIP),
            slot("", Dir::Read, ON_CHIP),
            slot("max_value", Dir::Read, ON_CHIP),
            slot("reduce_res", Dir::Write, ON_CHIP),
        ],
        infer: exponential::exponential,
        maskable: Any,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `rng` (NKI 0.6): 32 random bits per element from the engine's XORWOW generators,
    /// truncated to the destination's integer dtype (its least significant bits); each
    /// partition's lane steps through its elements in row-major order. GpSimd from
    /// NeuronCore-v3 on.
    Rng {
        name: "rng",
        format: Rng,
        engines: &[Engine::Vector, Engine::GpSimd],
        operands: &[slot("dst", Dir::Write, ON_CHIP)],
        infer: rng::rng,
        maskable: Any,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `rand_get_state` (NeuronCore-v3 and newer; Vector on NeuronCore-v4): the engine's
    /// XORWOW state, lane `p` into partition `p` of a uint32 `[P, 6]` (GpSimd) or `[P, 24]`
    /// (Vector) tile.
    RandGetState {
        name: "rand_get_state",
        format: Rng,
        engines: &[Engine::GpSimd, Engine::Vector],
        operands: &[slot("dst", Dir::Write, ON_CHIP)],
        infer: rng::rand_get_state,
        maskable: No,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `rand_set_state` (NeuronCore-v3 and newer; Vector on NeuronCore-v4): lane `p` of the
    /// engine's XORWOW state becomes partition `p` of a uint32 `[P, 6]` (GpSimd) or `[P, 24]`
    /// (Vector) SBUF tile. Writes no tile.
    RandSetState {
        name: "rand_set_state",
        format: Seed,
        engines: &[Engine::GpSimd, Engine::Vector],
        operands: &[slot("", Dir::Write, &[]), slot("src_seeds", Dir::Read, SBUF)],
        infer: rng::rand_set_state,
        maskable: No,
        deps: Seed,
        accumulates: false,
        packed: No,
    }
    /// `set_rng_seed`: every lane of the Vector engine's XORWOW state is derived from the
    /// 32-bit value of a `[1, 1]` tile (the model's mixing function, `docs/numerics.md`).
    /// Writes no tile.
    SetRngSeed {
        name: "set_rng_seed",
        format: Seed,
        engines: &[Engine::Vector],
        operands: &[slot("", Dir::Write, &[]), slot("src_seeds", Dir::Read, ON_CHIP)],
        infer: rng::set_rng_seed,
        maskable: No,
        deps: Seed,
        accumulates: false,
        packed: No,
    }
    /// `rand2` (NeuronCore-v4): uniform fp32 values in `[min, max]` from the Vector engine's
    /// XORWOW generators (`min + u·(max − min)`, `u = x·2⁻³² + 2⁻³³` of the 32-bit draw `x`),
    /// converted to the destination's dtype; `min` and `max` immediates or `[P, 1]` columns.
    Rand2 {
        name: "rand2",
        format: Rng,
        engines: &[Engine::Vector],
        operands: &[
            slot("dst", Dir::Write, ON_CHIP),
            slot("min", Dir::Read, ON_CHIP),
            slot("max", Dir::Read, ON_CHIP),
        ],
        infer: rng::rand2,
        maskable: Any,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `register_move`: a virtual register becomes an immediate or another register's value
    /// (a sequencer instruction; no memory operand).
    RegisterMove {
        name: "register_move",
        format: Register,
        engines: &[Engine::Sync],
        operands: &[],
        infer: register::register_move,
        maskable: No,
        deps: Register,
        accumulates: false,
        packed: No,
    }
    /// `register_load`: a virtual register becomes the value of a one-element integer SBUF
    /// tile (sign- or zero-extended to 32 bits). Writes no tile.
    RegisterLoad {
        name: "register_load",
        format: Register,
        engines: &[Engine::Sync],
        operands: &[slot("", Dir::Write, &[]), slot("src", Dir::Read, SBUF)],
        infer: register::register_load,
        maskable: No,
        deps: Register,
        accumulates: false,
        packed: No,
    }
    /// `register_store`: a one-element integer SBUF tile becomes a virtual register's value
    /// (its low bits for a narrower type).
    RegisterStore {
        name: "register_store",
        format: Register,
        engines: &[Engine::Sync],
        operands: &[slot("dst", Dir::Write, SBUF)],
        infer: register::register_store,
        maskable: No,
        deps: Register,
        accumulates: false,
        packed: No,
    }
    /// `dma_compute`: `dst = srcs[0] + srcs[1] + …` element by element, computed by the DMA
    /// engines in fp32 (each source widened, the sum left to right, rounded to nearest even
    /// into the destination's dtype); every operand of one shape, in SBUF (the kernel language
    /// moves an HBM operand through an SBUF tile).
    DmaCompute {
        name: "dma_compute",
        format: DmaCompute,
        engines: &[Engine::Dma],
        operands: &[
            slot("dst", Dir::Write, SBUF),
            slot("src0", Dir::Read, SBUF),
            slot("src1", Dir::Read, SBUF),
            slot("src2", Dir::Read, SBUF),
            slot("src3", Dir::Read, SBUF),
        ],
        infer: dma_compute::dma_compute,
        maskable: No,
        deps: Elementwise,
        accumulates: false,
        packed: No,
    }
    /// `topk` (GpSimd, NeuronCore-v3 and newer): in each group of 16 partitions, the `K`
    /// largest of the `n` bf16 values of the group's snake (value `i` at partition `i mod 16`,
    /// free position `i / 16`), ascending, with their snake indices as uint32, written in the
    /// same snake layout into `val_dst` and `idx_dst` (`K` their free size).
    TopK {
        name: "topk",
        format: TopK,
        engines: &[Engine::GpSimd],
        operands: &[
            slot("val_dst", Dir::Write, SBUF).axes(Axes::Own),
            slot("src", Dir::Read, SBUF).axes(Axes::Own),
            slot("idx_dst", Dir::Write, SBUF).axes(Axes::Own),
        ],
        infer: topk::topk,
        maskable: No,
        deps: TopK,
        accumulates: false,
        packed: No,
    }
}

impl Opcode {
    /// The opcode's table entry.
    #[inline]
    pub fn info(self) -> &'static OpInfo {
        &OPS[self as usize]
    }

    /// Looks an opcode up by its NKI name.
    pub fn from_name(name: &str) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|o| o.info().name == name)
    }

    /// Whether the instruction can combine its result into its destination
    /// ([`OpInfo::accumulates`]).
    pub fn accumulates(self) -> bool {
        self.info().accumulates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::MAX_SLOTS;

    #[test]
    fn the_table_is_consistent() {
        for (i, &op) in Opcode::ALL.iter().enumerate() {
            let info = op.info();
            assert_eq!(op as usize, i);
            assert!(!info.engines.is_empty(), "{}", info.name);
            assert!(info.operands.len() <= MAX_SLOTS, "{}", info.name);
            assert_eq!(Opcode::from_name(info.name), Some(op));
            assert!(!info.doc.is_empty(), "{}", info.name);
        }
    }

    #[test]
    fn every_dependency_rule_fits_its_format() {
        for &op in Opcode::ALL {
            let info = op.info();
            let fits = match info.deps {
                Deps::Control => matches!(info.format, Format::LoopBegin | Format::LoopEnd),
                Deps::Move => {
                    matches!(info.format, Format::Dma | Format::Unary | Format::DynCopy)
                }
                Deps::Elementwise => matches!(
                    info.format,
                    Format::Unary
                        | Format::Fill
                        | Format::Iota
                        | Format::Alu
                        | Format::Act
                        | Format::Act2
                        | Format::Rng
                        | Format::RangeSelect
                        | Format::DmaCompute
                ),
                Deps::AffineSelect => op == Opcode::AffineSelect,
                Deps::Select => matches!(op, Opcode::Select | Opcode::SelectReduce),
                Deps::RangeSelect => op == Opcode::RangeSelect,
                Deps::Reduce => info.format == Format::Reduce,
                Deps::Prefix => info.format == Format::Scan || op == Opcode::TensorScalarCumulative,
                Deps::Row => matches!(info.format, Format::Unary | Format::Match8),
                Deps::Contraction => matches!(info.format, Format::Matmul | Format::MatmulMx),
                Deps::Transpose => info.operands.iter().any(|o| o.axes == Axes::Swapped),
                Deps::Indirect => info.format == Format::Indirect,
                Deps::Gather => info.format == Format::Gather,
                Deps::Seed => info.format == Format::Seed,
                Deps::Permute => info.operands.iter().any(|o| o.axes == Axes::Ends),
                Deps::Shuffle => info.format == Format::Shuffle,
                Deps::Mx => info.format == Format::QuantizeMx,
                Deps::LocalGather => info.format == Format::LocalGather,
                Deps::Nonzero => info.format == Format::Nonzero,
                Deps::TopK => info.format == Format::TopK,
                Deps::Register => info.format == Format::Register,
            };
            assert!(fits, "{}: {:?} on {:?}", info.name, info.deps, info.format);
            // Loop control and `register_move` have no operands; everything else writes its
            // slot 0 or a tensor.
            assert_eq!(
                info.deps == Deps::Control || op == Opcode::RegisterMove,
                info.operands.is_empty(),
                "{}",
                info.name
            );
        }
    }
}
