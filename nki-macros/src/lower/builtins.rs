//! The language's functions by name: what each lowers to and the parameters it takes.
//!
//! Most functions are table rows: an ISA call (`tensor_tensor`, `activation`, ...) is its
//! opcode with a parameter list that says which instruction slot or function code each argument
//! fills, and one generic assembler ([`super::ops::isa`]) builds any of them; an `nl` function
//! is a family (`Binary(Alu::Add)`, `Act(ActFn::Exp)`, `Reduce(..)`) lowered by one routine per
//! family. Only the truly special operations (matmul's accumulation groups and transposes,
//! `store`'s PSUM hand-off, creation, index generators, composites) are hand-written.

use nki_lang::{ActFn, Alu, Opcode};

/// What one parameter of an ISA call fills.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum P {
    /// A tile operand for the instruction slot.
    Tile(u8),
    /// A tile, a `[P, 1]` column (broadcast along the free dimensions) or an immediate for the
    /// slot.
    TileOrImm(u8),
    /// The ALU operation `op[j]`.
    Alu(u8),
    /// The activation function.
    Act,
    /// Swaps the operands of `op[j]`.
    Rev(u8),
    /// `negate` of a reduction.
    Negate,
    /// `keepdims` of a reduction.
    KeepDims,
    /// The reduced axes.
    Axis,
    /// The result's dtype.
    DType,
    /// The engine.
    Engine,
    /// The mask.
    Mask,
    /// The per-partition reduction's operation.
    ReduceOp,
    /// The per-partition reduction's `[P, 1]` result.
    ReduceRes,
    /// `reduce_cmd`: how the engine's accumulators are used (`idle` or `reset_reduce`, both
    /// a reduction of this instruction's results alone).
    ReduceCmd,
    /// An affine expression of index grids (`iota`'s values).
    Expr,
    /// An affine comparison of index grids (`affine_select`'s predicate).
    Pred,
}

/// A parameter: its NKI keyword, what it fills, whether it must be given.
#[derive(Copy, Clone, Debug)]
pub struct Param {
    /// NKI's keyword (also its position in the list for positional arguments).
    pub name: &'static str,
    /// What it fills.
    pub kind: P,
    /// Whether a call must give it.
    pub required: bool,
}

const fn req(name: &'static str, kind: P) -> Param {
    Param {
        name,
        kind,
        required: true,
    }
}

const fn opt(name: &'static str, kind: P) -> Param {
    Param {
        name,
        kind,
        required: false,
    }
}

const DTYPE: Param = opt("dtype", P::DType);
const MASK: Param = opt("mask", P::Mask);
const ENGINE: Param = opt("engine", P::Engine);

/// An `nl` reduction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// `tensor_reduce` with this operation.
    Op(Alu),
    /// `sum / n`, in fp32 for integer inputs.
    Mean,
    /// The mean of the squared deviations from the mean.
    Var,
}

/// The functions whose lowering is written by hand.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Special {
    /// `load`
    Load,
    /// `store`
    Store,
    /// `load_transpose2d`
    LoadTranspose2d,
    /// `dma_transpose`
    DmaTranspose,
    /// `dma_copy`
    DmaCopy,
    /// `nc_matmul`
    NcMatmul,
    /// `matmul`
    Matmul,
    /// `copy` (`nl.copy`)
    Copy,
    /// `nl.transpose`
    Transpose,
    /// `nc_transpose`
    NcTranspose,
    /// `zeros`, `ones`, `full`, `ndarray`, `empty_like`, `zeros_like`, `ones_like`, `full_like`
    Create,
    /// `memset`
    Memset,
    /// `arange`
    Arange,
    /// `ds`
    Ds,
    /// `where`
    Where,
    /// `tensor_copy_predicated`
    TensorCopyPredicated,
    /// `tensor_partition_reduce`
    TensorPartitionReduce,
    /// `select_reduce`
    SelectReduce,
    /// `broadcast_to`
    BroadcastTo,
    /// `softmax`
    Softmax,
    /// `rms_norm`
    RmsNorm,
    /// `program_id`
    ProgramId,
    /// `num_programs`, `program_ndim`: the launch grid's sizes and rank
    GridSymbol,
    /// `nl.negative`
    Negative,
    /// `nl.par_dim(n)`: marks the partition dimension in a tile's shape (block axes before it)
    ParDim,
    /// `finfo`, `iinfo`: a dtype's limits
    Info,
    /// Python's `len` of a shape (`len(x.shape)`): its number of dimensions
    Len,
    /// `get_nc_version()`: the kernel's target NeuronCore generation
    NcVersion,
    /// `atomic_rmw`
    AtomicRmw,
    /// `tensor_copy_dynamic_src`
    TensorCopyDynamicSrc,
    /// `tensor_copy_dynamic_dst`
    TensorCopyDynamicDst,
    /// `register_alloc(x)`
    RegisterAlloc,
    /// `register_move(dst, src)`
    RegisterMove,
    /// `register_load(dst, src)`
    RegisterLoad,
    /// `register_store(dst, src)`
    RegisterStore,
    /// `fori_loop(lower, upper, body, step)`
    ForiLoop,
    /// `while_loop(init, body)`
    WhileLoop,
    /// `nl.rand(shape, dtype)`
    Rand,
    /// `nl.random_seed(seed)`
    RandomSeed,
    /// `nl.dropout(x, rate)` and `nisa.dropout(data, prob)`
    Dropout,
    /// `shared_constant`, `shared_identity_matrix`: constant HBM tensors
    SharedConstant,
    /// `range_select`
    RangeSelect,
    /// `nc_stream_shuffle`
    NcStreamShuffle,
    /// `quantize_mx`
    QuantizeMx,
    /// `nc_matmul_mx`
    NcMatmulMx,
    /// `local_gather`
    LocalGather,
    /// `tensor_scalar_cumulative`
    TensorScalarCumulative,
    /// `nonzero_with_count`
    NonzeroWithCount,
    /// `dma_compute`
    DmaCompute,
    /// `topk`
    TopK,
    /// `exponential`
    Exponential,
    /// `rng(dst, engine)`: XORWOW random bits
    Rng,
    /// `rand2(dst, min, max)`: XORWOW uniform values
    Rand2,
    /// `set_rng_seed(src_seeds)`
    SetRngSeed,
    /// `rand_set_state(src_seeds, engine)`
    RandSetState,
    /// `rand_get_state(dst, engine)`
    RandGetState,
}

/// How a function lowers.
#[derive(Copy, Clone, Debug)]
pub enum Kind {
    /// One ISA instruction assembled from the parameter list.
    Isa(Opcode, &'static [Param]),
    /// An elementwise binary operation with NumPy broadcasting and scalar operands
    /// (`tensor_tensor` or `tensor_scalar`).
    Binary(Alu),
    /// A one-operand ALU operation (`tensor_scalar` with one operation).
    UnaryAlu(Alu),
    /// An activation function on the Scalar engine.
    Act(ActFn),
    /// A reduction along free axes.
    Reduce(Reduction),
    /// Written by hand.
    Special(Special),
}

/// A function of the language.
#[derive(Copy, Clone, Debug)]
pub struct Builtin {
    /// Its names (NKI's, and accepted spellings).
    pub names: &'static [&'static str],
    /// How it lowers.
    pub kind: Kind,
}

const fn isa(names: &'static [&'static str], op: Opcode, params: &'static [Param]) -> Builtin {
    Builtin {
        names,
        kind: Kind::Isa(op, params),
    }
}

const fn special(names: &'static [&'static str], s: Special) -> Builtin {
    Builtin {
        names,
        kind: Kind::Special(s),
    }
}

/// The ISA calls, the hand-written functions and the `nl` reductions. The `nl` elementwise
/// functions are found by their operation's name ([`lookup`]).
static TABLE: &[Builtin] = &[
    isa(
        &["tensor_tensor"],
        Opcode::TensorTensor,
        &[
            req("data1", P::Tile(1)),
            req("data2", P::Tile(2)),
            req("op", P::Alu(0)),
            DTYPE,
            ENGINE,
            MASK,
        ],
    ),
    isa(
        &["tensor_scalar"],
        Opcode::TensorScalar,
        &[
            req("data", P::Tile(1)),
            req("op0", P::Alu(0)),
            req("operand0", P::TileOrImm(2)),
            opt("reverse0", P::Rev(0)),
            opt("op1", P::Alu(1)),
            opt("operand1", P::TileOrImm(3)),
            opt("reverse1", P::Rev(1)),
            DTYPE,
            ENGINE,
            MASK,
        ],
    ),
    isa(
        &["scalar_tensor_tensor"],
        Opcode::ScalarTensorTensor,
        &[
            req("data", P::Tile(1)),
            req("op0", P::Alu(0)),
            req("operand0", P::TileOrImm(2)),
            req("op1", P::Alu(1)),
            req("operand1", P::Tile(3)),
            opt("reverse0", P::Rev(0)),
            opt("reverse1", P::Rev(1)),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["tensor_scalar_reduce"],
        Opcode::TensorScalarReduce,
        &[
            req("data", P::Tile(1)),
            req("op0", P::Alu(0)),
            req("operand0", P::TileOrImm(2)),
            req("reduce_op", P::ReduceOp),
            req("reduce_res", P::ReduceRes),
            opt("reverse0", P::Rev(0)),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["activation"],
        Opcode::Activation,
        &[
            req("op", P::Act),
            req("data", P::Tile(1)),
            opt("bias", P::Tile(3)),
            opt("scale", P::TileOrImm(2)),
            opt("reduce_op", P::ReduceOp),
            opt("reduce_res", P::ReduceRes),
            opt("reduce_cmd", P::ReduceCmd),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["activate2"],
        Opcode::Activate2,
        &[
            req("op", P::Act),
            req("data", P::Tile(1)),
            opt("imm0", P::TileOrImm(2)),
            opt("imm1", P::TileOrImm(3)),
            opt("op0", P::Alu(0)),
            opt("op1", P::Alu(1)),
            opt("reverse0", P::Rev(0)),
            opt("reverse1", P::Rev(1)),
            opt("reduce_op", P::ReduceOp),
            opt("reduce_res", P::ReduceRes),
            opt("reduce_cmd", P::ReduceCmd),
            MASK,
        ],
    ),
    isa(
        &["activation_reduce"],
        Opcode::Activation,
        &[
            req("op", P::Act),
            req("data", P::Tile(1)),
            req("reduce_op", P::ReduceOp),
            req("reduce_res", P::ReduceRes),
            opt("bias", P::Tile(3)),
            opt("scale", P::TileOrImm(2)),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["tensor_reduce"],
        Opcode::TensorReduce,
        &[
            req("op", P::Alu(0)),
            req("data", P::Tile(1)),
            req("axis", P::Axis),
            opt("negate", P::Negate),
            opt("keepdims", P::KeepDims),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["tensor_tensor_scan"],
        Opcode::TensorTensorScan,
        &[
            req("data0", P::Tile(1)),
            req("data1", P::Tile(2)),
            req("initial", P::TileOrImm(3)),
            req("op0", P::Alu(0)),
            req("op1", P::Alu(1)),
            opt("reverse0", P::Rev(0)),
            opt("reverse1", P::Rev(1)),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["iota"],
        Opcode::Iota,
        &[req("expr", P::Expr), req("dtype", P::DType), MASK],
    ),
    isa(
        &["affine_select"],
        Opcode::AffineSelect,
        &[
            req("pred", P::Pred),
            req("on_true_tile", P::Tile(2)),
            req("on_false_value", P::TileOrImm(3)),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["reciprocal"],
        Opcode::Reciprocal,
        &[req("data|x", P::Tile(1)), DTYPE, MASK],
    ),
    isa(
        &["bn_stats"],
        Opcode::BnStats,
        &[req("data", P::Tile(1)), DTYPE, MASK],
    ),
    isa(
        &["bn_aggr"],
        Opcode::BnAggr,
        &[req("data", P::Tile(1)), DTYPE, MASK],
    ),
    isa(
        &["tensor_copy"],
        Opcode::TensorCopy,
        &[req("src", P::Tile(1)), DTYPE, ENGINE, MASK],
    ),
    isa(
        &["gather_flattened"],
        Opcode::GatherFlattened,
        &[
            req("data", P::Tile(1)),
            req("indices", P::Tile(2)),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["nc_n_gather"],
        Opcode::NcNGather,
        &[req("data", P::Tile(1)), req("indices", P::Tile(2))],
    ),
    special(&["load"], Special::Load),
    special(&["store"], Special::Store),
    special(&["load_transpose2d"], Special::LoadTranspose2d),
    special(&["dma_transpose"], Special::DmaTranspose),
    special(&["dma_copy"], Special::DmaCopy),
    special(&["nc_matmul"], Special::NcMatmul),
    special(&["matmul"], Special::Matmul),
    special(&["copy"], Special::Copy),
    special(&["transpose"], Special::Transpose),
    special(&["nc_transpose"], Special::NcTranspose),
    special(
        &[
            "zeros",
            "ones",
            "full",
            "ndarray",
            "empty_like",
            "zeros_like",
            "ones_like",
            "full_like",
        ],
        Special::Create,
    ),
    special(&["memset"], Special::Memset),
    special(&["arange"], Special::Arange),
    special(&["ds"], Special::Ds),
    special(&["where"], Special::Where),
    special(&["tensor_copy_predicated"], Special::TensorCopyPredicated),
    special(&["tensor_partition_reduce"], Special::TensorPartitionReduce),
    special(&["select_reduce"], Special::SelectReduce),
    special(&["broadcast_to"], Special::BroadcastTo),
    special(&["softmax"], Special::Softmax),
    special(&["rms_norm"], Special::RmsNorm),
    special(&["program_id"], Special::ProgramId),
    special(&["num_programs", "program_ndim"], Special::GridSymbol),
    special(&["negative"], Special::Negative),
    special(&["par_dim"], Special::ParDim),
    special(&["finfo", "iinfo"], Special::Info),
    special(&["len"], Special::Len),
    special(&["get_nc_version"], Special::NcVersion),
    special(&["atomic_rmw"], Special::AtomicRmw),
    special(&["tensor_copy_dynamic_src"], Special::TensorCopyDynamicSrc),
    special(&["tensor_copy_dynamic_dst"], Special::TensorCopyDynamicDst),
    special(&["register_alloc"], Special::RegisterAlloc),
    special(&["register_move"], Special::RegisterMove),
    special(&["register_load"], Special::RegisterLoad),
    special(&["register_store"], Special::RegisterStore),
    special(&["fori_loop"], Special::ForiLoop),
    special(&["while_loop"], Special::WhileLoop),
    special(
        &["shared_constant", "shared_identity_matrix"],
        Special::SharedConstant,
    ),
    special(&["range_select"], Special::RangeSelect),
    special(&["nc_stream_shuffle"], Special::NcStreamShuffle),
    special(&["quantize_mx"], Special::QuantizeMx),
    special(&["nc_matmul_mx"], Special::NcMatmulMx),
    special(&["local_gather"], Special::LocalGather),
    special(
        &["tensor_scalar_cumulative"],
        Special::TensorScalarCumulative,
    ),
    special(&["nonzero_with_count"], Special::NonzeroWithCount),
    special(&["dma_compute"], Special::DmaCompute),
    special(&["topk"], Special::TopK),
    special(&["exponential"], Special::Exponential),
    special(&["rng"], Special::Rng),
    special(&["rand2"], Special::Rand2),
    special(&["set_rng_seed"], Special::SetRngSeed),
    special(&["rand_set_state"], Special::RandSetState),
    special(&["rand_get_state"], Special::RandGetState),
    Builtin {
        names: &["sum"],
        kind: Kind::Reduce(Reduction::Op(Alu::Add)),
    },
    Builtin {
        names: &["max"],
        kind: Kind::Reduce(Reduction::Op(Alu::Max)),
    },
    Builtin {
        names: &["min"],
        kind: Kind::Reduce(Reduction::Op(Alu::Min)),
    },
    Builtin {
        names: &["prod"],
        kind: Kind::Reduce(Reduction::Op(Alu::Multiply)),
    },
    Builtin {
        names: &["all"],
        kind: Kind::Reduce(Reduction::Op(Alu::LogicalAnd)),
    },
    Builtin {
        names: &["mean"],
        kind: Kind::Reduce(Reduction::Mean),
    },
    Builtin {
        names: &["var"],
        kind: Kind::Reduce(Reduction::Var),
    },
    isa(
        &["max8"],
        Opcode::Max8,
        &[req("src", P::Tile(1)), DTYPE, MASK],
    ),
    isa(
        &["nc_find_index8"],
        Opcode::FindIndex8,
        &[
            req("data", P::Tile(1)),
            req("vals", P::Tile(2)),
            DTYPE,
            MASK,
        ],
    ),
    isa(
        &["nc_match_replace8"],
        Opcode::MatchReplace8,
        &[
            req("data", P::Tile(1)),
            req("vals", P::Tile(2)),
            req("imm", P::TileOrImm(3)),
            opt("dst_idx", P::Tile(4)),
            DTYPE,
            MASK,
        ],
    ),
    special(&["rand"], Special::Rand),
    special(&["random_seed"], Special::RandomSeed),
    special(&["dropout"], Special::Dropout),
    isa(
        &["sequence_bounds"],
        Opcode::SequenceBounds,
        &[req("segment_ids", P::Tile(1)), DTYPE],
    ),
];

/// `dropout`'s parameters, NKI ISA's names (`nl.dropout`'s `x` and `rate` are renamed to these).
pub const DROPOUT: &[Param] = &[
    req("data", P::Tile(1)),
    req("prob", P::TileOrImm(2)),
    DTYPE,
    MASK,
];

/// The function called `name`: a table row, else an `nl` elementwise function named after its
/// ALU operation (`add`, `maximum`, `logical_not`, ...) or activation (`exp`, `gelu`, ...).
pub fn lookup(name: &str) -> Option<Kind> {
    if let Some(b) = TABLE.iter().find(|b| b.names.contains(&name)) {
        return Some(b.kind);
    }
    if let Some(alu) = Alu::from_name(name).filter(|a| *a != Alu::Bypass) {
        return Some(match alu.arity() {
            1 => match alu {
                // The Scalar engine's functions where NKI lowers them there.
                Alu::Abs => Kind::Act(ActFn::Abs),
                Alu::Rsqrt => Kind::Act(ActFn::Rsqrt),
                Alu::Reciprocal => Kind::Act(ActFn::Reciprocal),
                Alu::Bypass
                | Alu::Add
                | Alu::Subtract
                | Alu::Multiply
                | Alu::Divide
                | Alu::Max
                | Alu::Min
                | Alu::Pow
                | Alu::Mod
                | Alu::Fmod
                | Alu::IsEqual
                | Alu::NotEqual
                | Alu::IsGt
                | Alu::IsGe
                | Alu::IsLt
                | Alu::IsLe
                | Alu::LogicalAnd
                | Alu::LogicalOr
                | Alu::LogicalXor
                | Alu::LogicalNot
                | Alu::BitwiseAnd
                | Alu::BitwiseOr
                | Alu::BitwiseXor
                | Alu::Invert
                | Alu::LeftShift
                | Alu::RightShift => Kind::UnaryAlu(alu),
            },
            _ => Kind::Binary(alu),
        });
    }
    ActFn::from_name(name).map(Kind::Act)
}

/// Every name the table knows, for "did you mean" help.
pub fn names() -> impl Iterator<Item = &'static str> {
    TABLE
        .iter()
        .flat_map(|b| b.names.iter().copied())
        .chain(Alu::ALL.iter().map(|a| a.name()))
        .chain(ActFn::ALL.iter().map(|f| f.name()))
}

/// NKI functions of the 2.26-era API the language refuses, each with why and the rewrite
/// (`docs/language.md`, "Not in the language").
const REFUSED: &[(&str, &str)] = &[
    (
        "expand_dims",
        "`expand_dims` (NKI 2.26's function) is not in the language: use NKI 0.6's view method, `x.expand_dim(axis)`",
    ),
    (
        "loop_reduce",
        "`loop_reduce` is not in the language: accumulate across the loop's iterations explicitly (`acc[..] = add(acc, x)` in a `sequential_range`, or `acc += ...` into a tile declared before the loop)",
    ),
    (
        "all_reduce",
        "`all_reduce` across program axes (a collective between cores) is not in the language: the modeled device is one NeuronCore; reduce each instance's part into a shared HBM output and combine on the host",
    ),
    (
        "device_print",
        "`device_print` prints only in NKI's simulator and is not in the language: return the value as an extra output, or read it from a strict launch's error or a trace (`Timing::detail(Detail::Trace)`)",
    ),
    (
        "static_cast",
        "`static_cast` is not in the language: convert values with `copy(x, dtype = ...)` or an operation's `dtype`",
    ),
];

/// Why the NKI function called `name` is refused, if it is one the language refuses.
pub fn refused(name: &str) -> Option<&'static str> {
    REFUSED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, why)| why)
}
