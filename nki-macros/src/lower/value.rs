//! Compile-time values of a kernel body and the index arithmetic on them.

use nki_lang::{Affine, DType, Dim, MAX_TILE_RANK, TileView};

/// An index expression: affine in the loop variables, plus index-grid terms.
///
/// The value at tile coordinate `(t_0, t_1, ...)` is `lin + Σ grid[j] · t_j`; `sizes[j]` is the
/// extent of grid axis `j` (0 when the expression does not constrain it).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Idx {
    /// The loop-dependent part, with the constant.
    pub lin: Affine,
    /// Coefficient of each grid axis.
    pub grid: [i64; MAX_TILE_RANK],
    /// Extent of each grid axis (0 = unconstrained).
    pub sizes: [u32; MAX_TILE_RANK],
    /// The whole shape of the `mgrid!` its grid terms come from (NKI's dense `nl.mgrid`: every
    /// component has the grid's shape, which is the shape of an `iota` of it); all 0 for an
    /// `arange` axis, an expression without grid terms, or terms of different grids.
    pub dense: [u32; MAX_TILE_RANK],
}

impl Idx {
    /// A loop-only (basic) index.
    pub fn from_affine(lin: Affine) -> Idx {
        Idx {
            lin,
            grid: [0; MAX_TILE_RANK],
            sizes: [0; MAX_TILE_RANK],
            dense: [0; MAX_TILE_RANK],
        }
    }

    /// Grid axis `axis` of extent `size`, starting at `start`.
    pub fn grid_axis(axis: usize, start: i64, size: u32) -> Idx {
        let mut i = Idx::from_affine(Affine::constant(start));
        i.grid[axis] = 1;
        i.sizes[axis] = size;
        i
    }

    /// Whether the index has grid terms (advanced indexing).
    pub fn is_advanced(&self) -> bool {
        self.grid.iter().any(|&g| g != 0)
    }

    /// `self + k·other`.
    pub fn add_scaled(&self, other: &Idx, k: i64) -> Result<Idx, IdxError> {
        let mut out = *self;
        let scaled = other.lin.checked_scale(k).ok_or(IdxError::Overflow)?;
        out.lin = self.lin.checked_add(&scaled).ok_or(IdxError::Overflow)?;
        for j in 0..MAX_TILE_RANK {
            let term = k.checked_mul(other.grid[j]).ok_or(IdxError::Overflow)?;
            out.grid[j] = out.grid[j].checked_add(term).ok_or(IdxError::Overflow)?;
            match (self.sizes[j], other.sizes[j]) {
                (0, s) | (s, 0) => out.sizes[j] = s,
                (a, b) if a == b => {}
                _ => return Err(IdxError::GridSizes(j)),
            }
        }
        // A term without grid terms keeps the other's grid; two different grids have none.
        out.dense = match (self.is_advanced(), other.is_advanced()) {
            (_, false) => self.dense,
            (false, true) => other.dense,
            (true, true) if self.dense == other.dense => self.dense,
            (true, true) => [0; MAX_TILE_RANK],
        };
        Ok(out)
    }

    /// `self · k`, or `None` on overflow.
    pub fn scale(&self, k: i64) -> Option<Idx> {
        let mut out = *self;
        out.lin = self.lin.checked_scale(k)?;
        for g in &mut out.grid {
            *g = g.checked_mul(k)?;
        }
        Some(out)
    }
}

/// Why two index expressions cannot be combined.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IdxError {
    /// A coefficient or constant overflows `i64`.
    Overflow,
    /// Two index grids of different sizes on this axis.
    GridSizes(usize),
}

/// A comparison of index expressions: `expr cmp S`, where `S` is the symbolic dimension
/// `sym` (0 when `None`). The building block of masks and predicates.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Cond {
    /// The left side minus the right side's non-symbolic part.
    pub expr: Idx,
    /// The comparison.
    pub cmp: nki_lang::Cmp,
    /// A symbolic dimension on the right side.
    pub sym: Option<u8>,
}

/// A buffer named in a creation call.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// `Sbuf`
    Sbuf,
    /// `Psum`
    Psum,
    /// `SharedHbm`
    SharedHbm,
    /// `PrivateHbm` (NKI's `private_hbm`, and `hbm`, its alias)
    PrivateHbm,
}

impl Buffer {
    /// Whether it is HBM (`SharedHbm`, `PrivateHbm`).
    pub fn is_hbm(self) -> bool {
        matches!(self, Buffer::SharedHbm | Buffer::PrivateHbm)
    }

    /// Parses a buffer name.
    pub fn from_name(name: &str) -> Option<Buffer> {
        Some(match name {
            "Sbuf" | "sbuf" => Buffer::Sbuf,
            "Psum" | "psum" => Buffer::Psum,
            "SharedHbm" | "shared_hbm" => Buffer::SharedHbm,
            "PrivateHbm" | "private_hbm" | "Hbm" | "hbm" => Buffer::PrivateHbm,
            _ => return None,
        })
    }
}

/// A whole HBM tensor, under its own dimensions or a reshape's, or the part of it left after
/// integers on its leading axes (`q[b, h]`, NKI's partial indexing, indexed again later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hbm {
    /// Tensor id (see [`super::Lowerer::tensor`]).
    pub tensor: usize,
    /// The reshape it is seen through (index in the program's reshapes), if any.
    pub reshape: Option<usize>,
    /// The indices of the leading axes fixed by a partial index.
    pub prefix: Vec<Affine>,
}

impl Hbm {
    /// The tensor under its own dimensions.
    pub fn whole(tensor: usize) -> Hbm {
        Hbm {
            tensor,
            reshape: None,
            prefix: Vec::new(),
        }
    }
}

/// An indexed HBM tensor: one index per axis over a tile-shaped grid.
#[derive(Clone, Debug)]
pub struct Access {
    /// Tensor id (see [`super::Lowerer::tensor`]).
    pub tensor: usize,
    /// The reshape whose axes `axes` index, if not the tensor's own.
    pub reshape: Option<usize>,
    /// One index per tensor axis; grid coefficients refer to `shape`'s dimensions.
    pub axes: Vec<Idx>,
    /// The grid's shape.
    pub shape: nki_lang::TileShape,
    /// NKI's indirect indexing: the axis (of `axes`, where its index is 0) whose row at the
    /// grid's partition `p` is the value of this `[P, 1]` index column at `p`
    /// ([`nki_lang::IndirectMode::Rows`]); or (`.ap(..., scalar_offset=)`,
    /// [`nki_lang::IndirectMode::Scalar`]) the axis along which the whole access starts the
    /// one element of this tile times the mode's scale further.
    pub indirect: Option<(usize, TileView, nki_lang::IndirectMode)>,
    /// `t.view(dtype)` of the tensor: the dtype its bytes are read as, the last axis' index
    /// counting elements of it; `None` for the tensor's own. A DMA moves the reinterpretation
    /// to its tile side ([`super::Lowerer::unview`]).
    pub dtype: Option<nki_lang::DType>,
}

/// The value of a kernel-body expression at compile time.
#[derive(Clone, Debug)]
pub enum Value {
    /// An integer constant.
    Int(i64),
    /// A float constant.
    Float(f64),
    /// A boolean constant.
    Bool(bool),
    /// An index expression.
    Index(Idx),
    /// A symbolic dimension plus a literal, divided by a literal: `K`, `K / 128`,
    /// `(K + 127) / 128`.
    Sym {
        /// Symbol id.
        sym: u8,
        /// Addend.
        add: u64,
        /// Divisor.
        div: u64,
    },
    /// A symbolic dimension minus a positive literal (`H - 2`): the upper side of a mask's
    /// comparison (`i_h < H - (K - 1)`), which a trip count cannot be.
    SymMinus {
        /// Symbol id.
        sym: u8,
        /// What is subtracted.
        sub: u64,
    },
    /// A whole HBM tensor (or a reshape of one).
    Tensor(Hbm),
    /// An indexed HBM tensor.
    Access(Access),
    /// A tile or a view of one.
    Tile(TileView),
    /// A whole tile with leading block axes (NKI's `ndarray((B, par_dim(P), F))`): the view
    /// of all its blocks, the block axes stored after the partition axis (`[P, B, F]`). It is
    /// indexed block first (`t[k]`, `t[[k, i_p, i_f]]`) before it is an operand.
    Blocks {
        /// The whole tile.
        view: TileView,
        /// Number of leading block axes.
        axes: u8,
    },
    /// An `mgrid![...]` result: its axes.
    Grid(Vec<Idx>),
    /// An `arange(...)` before `.p()` / `.x()` picks its axis: (start, size).
    Range(i64, u32),
    /// A dtype.
    DType(DType),
    /// `finfo(dtype)` or `iinfo(dtype)`: the type's limits, read by field (`.min`, `.max`, ...).
    Info(DType),
    /// `ds(start, size)`: a slice of `size` elements from `start`, bound to a name and used as
    /// an index later.
    Slice {
        /// The first element (loop-affine).
        start: Affine,
        /// The number of elements.
        size: u32,
    },
    /// NKI's `x.shape` of a tensor or tile: its dimensions, fixed or symbolic (indexed
    /// `x.shape[1]`, destructured `let (m, n) = x.shape;`, or a shape argument).
    Shape(Vec<Dim>),
    /// A buffer.
    Buffer(Buffer),
    /// Comparisons joined with `&`: a mask, or an `affine_select` predicate.
    Cond(Vec<Cond>),
    /// A bare name of an ALU operation, activation function or engine (`add`, `exp`,
    /// `vector`), read by the parameter it is passed to.
    Code(String),
    /// A virtual register (`register_alloc`, a device loop's variable): a 32-bit integer
    /// known at run time only.
    Reg(nki_lang::RegId),
    /// The result of an operation that returns nothing (`store`).
    Unit,
    /// The result of an erroneous expression (already reported).
    Poison,
}

impl Value {
    /// Whether the value is a compile-time number (an integer or a float).
    pub fn is_number(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Float(_))
    }

    /// A short description for error messages.
    pub fn describe(&self) -> &'static str {
        match self {
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a bool",
            Value::Index(_) => "an index expression",
            Value::Sym { .. } => "a symbolic dimension",
            Value::SymMinus { .. } => "a symbolic dimension minus a literal",
            Value::Tensor(_) => "an HBM tensor",
            Value::Access(_) => "an indexed HBM tensor",
            Value::Tile(_) => "a tile",
            Value::Blocks { .. } => "a tile with block axes (select a block first: `t[k]`)",
            Value::Grid(_) => "an index grid",
            Value::Range(..) => "an arange",
            Value::DType(_) => "a dtype",
            Value::Info(_) => "the limits of a dtype (`finfo`, `iinfo`)",
            Value::Slice { .. } => "a slice (`ds`)",
            Value::Shape(_) => "a shape (`x.shape`)",
            Value::Buffer(_) => "a buffer",
            Value::Cond(_) => "a comparison of indices",
            Value::Code(_) => "the name of an operation",
            Value::Reg(_) => "a virtual register (a value known at run time only)",
            Value::Unit => "nothing (the result of `store`)",
            Value::Poison => "an erroneous value",
        }
    }
}
