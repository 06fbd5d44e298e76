//! NKI 0.6's tensor views (`t.slice(1, 0, 64)`, `t.select(0, b)`, `t.permute((0, 2, 1))`,
//! `t.broadcast(1, 8)`, `t.expand_dim(1)`, `t.squeeze_dim(1)`, `t.reshape_dim(1, (4, 6))`,
//! `t.flatten_dims(1, 2)`, `t.reshape((128, 24))`): the rules each method checks and the new
//! layout it gives, as plain arithmetic on dimensions and strides.
//!
//! A view copies nothing: it is a new affine access of the same storage. Most methods are a
//! [`ViewMap`], which writes each axis of the viewed tensor as an affine function of the view's
//! axes (a slice's `old = start + step·new`); the caller composes it with the access it views.
//! Merging axes (`flatten_dims`, `reshape`) is no such map (it would divide): it is computed on
//! the strides instead, and refused where the merged axes are not contiguous, as NKI refuses it.
//!
//! On-chip tensors (SBUF, PSUM tiles) keep their partition axis first and whole-strided: NKI
//! forbids every method that would move, remove, insert before, broadcast or merge it.

use thiserror::Error;

use crate::Affine;

/// Most axes a view may have (a tile's, an HBM access's grid).
pub const MAX_VIEW_RANK: usize = crate::MAX_TILE_RANK;

/// Why a view method is refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ViewError {
    /// `dim` is not an axis of the tensor.
    #[error("`{method}`: dimension {dim} is out of range for a tensor of rank {rank}")]
    Axis {
        /// The method.
        method: &'static str,
        /// The dimension given.
        dim: i64,
        /// The tensor's rank.
        rank: usize,
    },
    /// A method NKI forbids on the partition axis of an on-chip tensor.
    #[error(
        "`{method}` cannot {what} the partition dimension (dimension 0) of an SBUF or PSUM tile: partitions are separate memory lanes that every engine reads in place, so the partition axis stays first and whole{hint}"
    )]
    Partition {
        /// The method.
        method: &'static str,
        /// What it would do (`remove`, `broadcast`, `move`, ...).
        what: &'static str,
        /// How to do it instead.
        hint: &'static str,
    },
    /// A slice outside `0 <= start < end <= size`.
    #[error(
        "`slice`: start {start} and end {end} must satisfy 0 <= start < end <= {size} (the size of dimension {dim})"
    )]
    SliceBounds {
        /// The dimension.
        dim: usize,
        /// The start.
        start: i64,
        /// The end.
        end: i64,
        /// The dimension's size.
        size: u32,
    },
    /// A slice whose size (`end - start`) is not a positive compile-time constant.
    #[error(
        "`slice`: its size (`end - start`) must be a positive compile-time constant (`slice(1, k * 128, (k + 1) * 128)`)"
    )]
    SliceSize,
    /// A step below 1.
    #[error("`slice`: the step must be at least 1, not {step}")]
    Step {
        /// The step.
        step: i64,
    },
    /// A step other than 1 on a tile's partition axis.
    #[error(
        "`slice`: the partition dimension of an SBUF or PSUM tile is read with stride 1 (an engine reads consecutive partitions), so its step must be 1, not {step}"
    )]
    PartitionStep {
        /// The step.
        step: i64,
    },
    /// A static index outside the dimension.
    #[error("`select`: index {index} is out of range for dimension {dim} of size {size}")]
    Index {
        /// The dimension.
        dim: usize,
        /// The index.
        index: i64,
        /// The dimension's size.
        size: u32,
    },
    /// `broadcast` or `squeeze_dim` of a dimension whose size is not 1.
    #[error(
        "`{method}`: dimension {dim} has size {size}, and only a size-1 dimension can be {what}"
    )]
    NotSizeOne {
        /// The method.
        method: &'static str,
        /// The dimension.
        dim: usize,
        /// Its size.
        size: u32,
        /// `broadcast` or `removed`.
        what: &'static str,
    },
    /// A size that is not a positive 32-bit integer.
    #[error("`{method}`: a size is a positive 32-bit integer, not {size}")]
    Size {
        /// The method.
        method: &'static str,
        /// The size given.
        size: i64,
    },
    /// A view with too many axes.
    #[error(
        "`{method}`: a view has at most {MAX_VIEW_RANK} dimensions, and this one would have {rank}"
    )]
    Rank {
        /// The method.
        method: &'static str,
        /// The rank it would have.
        rank: usize,
    },
    /// `permute`'s `dims` is not a permutation of the axes.
    #[error("`permute`: ({dims}) is not a permutation of the {rank} dimensions (0 to {last})")]
    NotPermutation {
        /// The dims given.
        dims: String,
        /// The tensor's rank.
        rank: usize,
        /// `rank - 1`.
        last: usize,
    },
    /// `flatten_dims` with `start_dim > end_dim`.
    #[error("`flatten_dims`: start_dim {start} is after end_dim {end}")]
    FlattenOrder {
        /// start_dim.
        start: usize,
        /// end_dim.
        end: usize,
    },
    /// Merged axes that are not contiguous in memory.
    #[error(
        "`{method}`: dimensions {first} and {second} are not contiguous in memory (stride {outer} where {inner} x {size} = {want} would be), so they cannot be merged into one: the view is not a valid view of storage (a `permute`, a stepped `slice` or a `broadcast` separates them); copy the data into a tile of the shape you need"
    )]
    NotContiguous {
        /// The method.
        method: &'static str,
        /// The outer dimension.
        first: usize,
        /// The inner dimension.
        second: usize,
        /// The outer stride.
        outer: i64,
        /// The inner stride.
        inner: i64,
        /// The inner size.
        size: u32,
        /// `inner * size`.
        want: i128,
    },
    /// A reshape to another number of elements.
    #[error("`{method}`: the new shape holds {got} elements, the tensor {want}")]
    Elements {
        /// The method.
        method: &'static str,
        /// Elements of the new shape.
        got: u128,
        /// Elements of the tensor (or the split dimension).
        want: u128,
    },
    /// A reshape of a tile that changes its partitions.
    #[error(
        "`reshape` of an SBUF or PSUM tile keeps its partition dimension: shape[0] must be {parts}, not {got}"
    )]
    ReshapePartitions {
        /// The tile's partitions.
        parts: u32,
        /// `shape[0]` given.
        got: i64,
    },
    /// More than one `-1` in `reshape_dim`.
    #[error("`reshape_dim`: at most one size may be -1 (inferred)")]
    TwoInferred,
    /// A size of a symbolic dimension where the method needs it.
    #[error(
        "`{method}`: dimension {dim} is symbolic; a view needs its size at compile time: slice it with explicit bounds first, or make it a meta-parameter"
    )]
    Symbolic {
        /// The method.
        method: &'static str,
        /// The dimension.
        dim: usize,
    },
    /// An offset or stride overflows `i64`.
    #[error("`{method}`: integer overflow in the view's offsets or strides")]
    Overflow {
        /// The method.
        method: &'static str,
    },
    /// `view(dtype)` of a view whose last dimension is not contiguous.
    #[error(
        "`view`: the last dimension must be contiguous in memory to reinterpret its bytes as {to}, and its stride is {stride} elements, not 1 (a `permute`, a stepped `slice` or a `broadcast` made it so); copy the data into a contiguous tile first"
    )]
    DtypeNotContiguous {
        /// The target dtype.
        to: crate::DType,
        /// The last dimension's stride.
        stride: i64,
    },
    /// `view(dtype)` of an HBM access whose last dimension steps another axis of the tensor
    /// than its last.
    #[error(
        "`view`: the last dimension must be contiguous in memory to reinterpret its bytes as {to}, and it steps axis {axis} of the tensor, not its last (a `permute` made it so); copy the data into a contiguous tile first"
    )]
    DtypeNotLastAxis {
        /// The target dtype.
        to: crate::DType,
        /// The tensor axis it steps.
        axis: usize,
    },
    /// `view(dtype)` to a wider dtype of a last dimension the ratio does not divide.
    #[error(
        "`view`: reading {from} as {to} joins {ratio} elements into one, so the last dimension's size must be divisible by {ratio}, and it is {size}"
    )]
    DtypeDivide {
        /// The viewed dtype.
        from: crate::DType,
        /// The target dtype.
        to: crate::DType,
        /// `to.size() / from.size()`.
        ratio: u32,
        /// The last dimension's size.
        size: u32,
    },
    /// `view(dtype)` to a wider dtype of a view whose start or outer strides fall inside an
    /// element of the new dtype.
    #[error(
        "`view`: the view's {what} is not a whole number of {to} elements ({ratio} {from} elements each), so its {to} elements would not be aligned"
    )]
    DtypeAlign {
        /// The viewed dtype.
        from: crate::DType,
        /// The target dtype.
        to: crate::DType,
        /// `to.size() / from.size()`.
        ratio: u32,
        /// What is misaligned (`start`, `stride of dimension 1`).
        what: String,
    },
    /// An `ap(pattern, offset)` NKI's access patterns do not allow.
    #[error("`ap`: {what}")]
    Ap {
        /// The argument at fault (`pattern`, `offset`).
        param: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A `rearrange` whose patterns or sizes do not describe one rearrangement.
    #[error("`rearrange`: {what}")]
    Rearrange {
        /// The argument at fault (`src_pattern`, `dst_pattern`, `fixed_sizes`).
        param: &'static str,
        /// What is wrong.
        what: String,
    },
}

impl ViewError {
    /// The NKI parameter the error is about (its argument is underlined), or `None` for the
    /// whole call.
    pub fn param(&self) -> Option<&'static str> {
        match self {
            ViewError::Axis { method, .. } | ViewError::Partition { method, .. } => match *method {
                "permute" => Some("dims"),
                "rearrange" => Some("dst_pattern"),
                "flatten_dims" | "reshape" => None,
                _ => Some("dim"),
            },
            ViewError::NotSizeOne { .. } => Some("dim"),
            ViewError::Step { .. } | ViewError::PartitionStep { .. } => Some("step"),
            ViewError::Index { .. } => Some("index"),
            ViewError::Size { method, .. } => match *method {
                "broadcast" => Some("size"),
                _ => Some("shape"),
            },
            ViewError::NotPermutation { .. } => Some("dims"),
            ViewError::Rearrange { param, .. } | ViewError::Ap { param, .. } => Some(param),
            ViewError::Elements { .. }
            | ViewError::ReshapePartitions { .. }
            | ViewError::TwoInferred => Some("shape"),
            ViewError::DtypeNotContiguous { .. }
            | ViewError::DtypeNotLastAxis { .. }
            | ViewError::DtypeDivide { .. }
            | ViewError::DtypeAlign { .. } => None,
            ViewError::SliceBounds { .. }
            | ViewError::SliceSize
            | ViewError::Rank { .. }
            | ViewError::FlattenOrder { .. }
            | ViewError::NotContiguous { .. }
            | ViewError::Symbolic { .. }
            | ViewError::Overflow { .. } => None,
        }
    }
}

/// One axis of the viewed tensor as a function of the view's axes: `start + Σ coef[k]·u_k`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisMap {
    /// The index at the view's origin (loop-affine: a slice's start may be `k * 128`).
    pub start: Affine,
    /// The coefficient of each of the view's axes.
    pub coef: [i64; MAX_VIEW_RANK],
}

/// A view as an affine map from its axes to the viewed tensor's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewMap {
    /// The view's dimensions (`None`: a symbolic dimension, for an HBM tensor).
    pub shape: Vec<Option<u32>>,
    /// One map per axis of the viewed tensor, in its order.
    pub axes: Vec<AxisMap>,
}

fn unit(k: usize) -> [i64; MAX_VIEW_RANK] {
    let mut c = [0; MAX_VIEW_RANK];
    if let Some(x) = c.get_mut(k) {
        *x = 1;
    }
    c
}

fn constant(start: Affine) -> AxisMap {
    AxisMap {
        start,
        coef: [0; MAX_VIEW_RANK],
    }
}

/// Axis `dim` (negative: from the end, as Python indexes) of a tensor of rank `rank`.
pub fn axis(method: &'static str, dim: i64, rank: usize) -> Result<usize, ViewError> {
    let r = i64::try_from(rank).unwrap_or(i64::MAX);
    let d = if dim < 0 { dim.saturating_add(r) } else { dim };
    match usize::try_from(d) {
        Ok(d) if d < rank => Ok(d),
        _ => Err(ViewError::Axis { method, dim, rank }),
    }
}

fn size_u32(method: &'static str, size: i64) -> Result<u32, ViewError> {
    match u32::try_from(size) {
        Ok(s) if s > 0 => Ok(s),
        _ => Err(ViewError::Size { method, size }),
    }
}

fn check_rank(method: &'static str, rank: usize) -> Result<(), ViewError> {
    if rank > MAX_VIEW_RANK {
        return Err(ViewError::Rank { method, rank });
    }
    Ok(())
}

/// The map of old axis `j` to view axis `k` (identity on that axis).
fn same(k: usize) -> AxisMap {
    AxisMap {
        start: Affine::ZERO,
        coef: unit(k),
    }
}

/// `t.slice(dim, start, end, step)`: elements `start, start + step, ...` below `end` of axis
/// `dim` (NKI: `0 <= start < end <= t.shape[dim]`, `step >= 1`). `start` and `end` may be
/// loop-affine when their difference is a constant; their bounds are then checked with the
/// access.
pub fn slice(
    dims: &[Option<u32>],
    on_chip: bool,
    dim: i64,
    start: Affine,
    end: Affine,
    step: i64,
) -> Result<ViewMap, ViewError> {
    const M: &str = "slice";
    let d = axis(M, dim, dims.len())?;
    check_rank(M, dims.len())?;
    if step < 1 {
        return Err(ViewError::Step { step });
    }
    if on_chip && d == 0 && step != 1 {
        return Err(ViewError::PartitionStep { step });
    }
    let len = start
        .checked_scale(-1)
        .and_then(|m| end.checked_add(&m))
        .ok_or(ViewError::Overflow { method: M })?;
    if !len.is_constant() || len.constant <= 0 {
        if start.is_constant()
            && end.is_constant()
            && let Some(size) = dims[d]
        {
            return Err(ViewError::SliceBounds {
                dim: d,
                start: start.constant,
                end: end.constant,
                size,
            });
        }
        return Err(ViewError::SliceSize);
    }
    if let (Some(size), true) = (dims[d], start.is_constant()) {
        let (s, e) = (start.constant, end.constant);
        if s < 0 || e > i64::from(size) {
            return Err(ViewError::SliceBounds {
                dim: d,
                start: s,
                end: e,
                size,
            });
        }
    }
    // ceil(len / step): len > 0 and step >= 1, so neither overflows.
    let count = len
        .constant
        .checked_sub(1)
        .and_then(|x| x.checked_div(step))
        .and_then(|x| x.checked_add(1))
        .ok_or(ViewError::Overflow { method: M })?;
    let count = size_u32(M, count)?;
    let mut shape = dims.to_vec();
    shape[d] = Some(count);
    let axes = (0..dims.len())
        .map(|j| {
            if j == d {
                let mut coef = [0; MAX_VIEW_RANK];
                coef[j] = step;
                AxisMap { start, coef }
            } else {
                same(j)
            }
        })
        .collect();
    Ok(ViewMap { shape, axes })
}

/// `t.select(dim, index)`: the tensor at `index` on axis `dim`, which it removes (NKI:
/// `0 <= index < t.shape[dim]`). A tile's partition axis is not removed: as NKI's integer index
/// on it, the view keeps it one partition long.
pub fn select(
    dims: &[Option<u32>],
    on_chip: bool,
    dim: i64,
    index: Affine,
) -> Result<ViewMap, ViewError> {
    const M: &str = "select";
    let d = axis(M, dim, dims.len())?;
    check_rank(M, dims.len())?;
    if let (Some(size), true) = (dims[d], index.is_constant())
        && (index.constant < 0 || index.constant >= i64::from(size))
    {
        return Err(ViewError::Index {
            dim: d,
            index: index.constant,
            size,
        });
    }
    // On chip, NKI's integer on the partition axis keeps it, one partition long.
    if on_chip && d == 0 {
        let end = index
            .checked_add(&Affine::constant(1))
            .ok_or(ViewError::Overflow { method: M })?;
        return slice(dims, on_chip, 0, index, end, 1);
    }
    let mut shape = dims.to_vec();
    shape.remove(d);
    let axes = (0..dims.len())
        .map(|j| match j.cmp(&d) {
            std::cmp::Ordering::Less => same(j),
            std::cmp::Ordering::Equal => constant(index),
            std::cmp::Ordering::Greater => same(j.saturating_sub(1)),
        })
        .collect();
    Ok(ViewMap { shape, axes })
}

/// `t.permute(dims)`: view axis `k` is axis `dims[k]` of `t` (NKI: a permutation of
/// `range(t.ndim)`; on-chip, `dims[0] == 0`).
pub fn permute(dims: &[Option<u32>], on_chip: bool, perm: &[i64]) -> Result<ViewMap, ViewError> {
    const M: &str = "permute";
    check_rank(M, dims.len())?;
    let rank = dims.len();
    let bad = || ViewError::NotPermutation {
        dims: perm
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        rank,
        last: rank.saturating_sub(1),
    };
    if perm.len() != rank {
        return Err(bad());
    }
    let mut from = Vec::with_capacity(rank);
    for &p in perm {
        let j = usize::try_from(p)
            .ok()
            .filter(|&j| j < rank)
            .ok_or_else(bad)?;
        if from.contains(&j) {
            return Err(bad());
        }
        from.push(j);
    }
    if on_chip && from[0] != 0 {
        return Err(ViewError::Partition {
            method: M,
            what: "move",
            hint: ": dims[0] must be 0; exchanging partitions and free elements moves data (`nc_transpose` on TensorE, `dma_transpose`)",
        });
    }
    let shape = from.iter().map(|&j| dims[j]).collect();
    let mut axes = vec![same(0); rank];
    for (k, &j) in from.iter().enumerate() {
        axes[j] = same(k);
    }
    Ok(ViewMap { shape, axes })
}

/// `t.broadcast(dim, size)`: the size-1 axis `dim` repeated `size` times, a stride-0 axis (NKI:
/// `t.shape[dim] == 1`; on-chip, `dim != 0`).
pub fn broadcast(
    dims: &[Option<u32>],
    on_chip: bool,
    dim: i64,
    size: i64,
) -> Result<ViewMap, ViewError> {
    const M: &str = "broadcast";
    let d = axis(M, dim, dims.len())?;
    check_rank(M, dims.len())?;
    if on_chip && d == 0 {
        return Err(ViewError::Partition {
            method: M,
            what: "broadcast",
            hint: ": copying one partition to others moves data (`broadcast_to` of a `[1, F]` tile does it on TensorE)",
        });
    }
    size_one(M, dims, d, "broadcast")?;
    let size = size_u32(M, size)?;
    let mut shape = dims.to_vec();
    shape[d] = Some(size);
    let axes = (0..dims.len())
        .map(|j| {
            if j == d {
                constant(Affine::ZERO)
            } else {
                same(j)
            }
        })
        .collect();
    Ok(ViewMap { shape, axes })
}

/// `t.expand_dim(dim)`: a new size-1 axis at position `dim` (`0..=t.ndim`; on-chip, not 0).
pub fn expand_dim(dims: &[Option<u32>], on_chip: bool, dim: i64) -> Result<ViewMap, ViewError> {
    const M: &str = "expand_dim";
    let rank = dims.len().saturating_add(1);
    let d = axis(M, dim, rank)?;
    check_rank(M, rank)?;
    if on_chip && d == 0 {
        return Err(ViewError::Partition {
            method: M,
            what: "insert a dimension before",
            hint: "",
        });
    }
    let mut shape = dims.to_vec();
    shape.insert(d, Some(1));
    let axes = (0..dims.len())
        .map(|j| {
            if j < d {
                same(j)
            } else {
                same(j.saturating_add(1))
            }
        })
        .collect();
    Ok(ViewMap { shape, axes })
}

/// That axis `d` of `dims` has size 1, as `method` needs to `what` it.
fn size_one(
    method: &'static str,
    dims: &[Option<u32>],
    d: usize,
    what: &'static str,
) -> Result<(), ViewError> {
    match dims[d] {
        Some(1) => Ok(()),
        Some(size) => Err(ViewError::NotSizeOne {
            method,
            dim: d,
            size,
            what,
        }),
        None => Err(ViewError::Symbolic { method, dim: d }),
    }
}

/// `t.squeeze_dim(dim)`: removes the size-1 axis `dim` (on-chip, not 0).
pub fn squeeze_dim(dims: &[Option<u32>], on_chip: bool, dim: i64) -> Result<ViewMap, ViewError> {
    const M: &str = "squeeze_dim";
    let d = axis(M, dim, dims.len())?;
    check_rank(M, dims.len())?;
    if on_chip && d == 0 {
        return Err(ViewError::Partition {
            method: M,
            what: "remove",
            hint: "",
        });
    }
    size_one(M, dims, d, "removed")?;
    select(dims, false, dim, Affine::ZERO).map_err(|_| ViewError::Overflow { method: M })
}

/// `t.reshape_dim(dim, shape)`: axis `dim` split into axes of sizes `shape` (row-major; one
/// size may be -1, inferred). Splitting never needs contiguity. On-chip, `dim != 0` unless the
/// split is trivial (`(128,)`).
pub fn reshape_dim(
    dims: &[Option<u32>],
    on_chip: bool,
    dim: i64,
    sizes: &[i64],
) -> Result<ViewMap, ViewError> {
    const M: &str = "reshape_dim";
    let d = axis(M, dim, dims.len())?;
    let Some(n) = dims[d] else {
        return Err(ViewError::Symbolic { method: M, dim: d });
    };
    let rank = dims.len().saturating_sub(1).saturating_add(sizes.len());
    check_rank(M, rank)?;
    if sizes.is_empty() {
        return Err(ViewError::Elements {
            method: M,
            got: 1,
            want: u128::from(n),
        });
    }
    if sizes.iter().filter(|&&s| s == -1).count() > 1 {
        return Err(ViewError::TwoInferred);
    }
    let mut known: u128 = 1;
    for &s in sizes.iter().filter(|&&s| s != -1) {
        let s = size_u32(M, s)?;
        known = known.saturating_mul(u128::from(s));
    }
    let inferred = if known == 0 {
        0
    } else {
        u128::from(n).checked_div(known).unwrap_or(0)
    };
    let split: Vec<u32> = sizes
        .iter()
        .map(|&s| {
            if s == -1 {
                u32::try_from(inferred).unwrap_or(0)
            } else {
                u32::try_from(s).unwrap_or(0)
            }
        })
        .collect();
    let got = split
        .iter()
        .fold(1u128, |a, &s| a.saturating_mul(u128::from(s)));
    if got != u128::from(n) || split.contains(&0) {
        return Err(ViewError::Elements {
            method: M,
            got,
            want: u128::from(n),
        });
    }
    if on_chip && d == 0 && split.len() != 1 {
        return Err(ViewError::Partition {
            method: M,
            what: "split",
            hint: "",
        });
    }
    let mut shape = dims[..d].to_vec();
    shape.extend(split.iter().map(|&s| Some(s)));
    shape.extend_from_slice(&dims[d.saturating_add(1)..]);
    // Old axis d = Σ_k (product of the later split sizes) · u_{d+k}.
    let mut coef = [0i64; MAX_VIEW_RANK];
    let mut weight: i64 = 1;
    for (k, &s) in split.iter().enumerate().rev() {
        coef[d.saturating_add(k)] = weight;
        weight = weight
            .checked_mul(i64::from(s))
            .ok_or(ViewError::Overflow { method: M })?;
    }
    let extra = split.len().saturating_sub(1);
    let axes = (0..dims.len())
        .map(|j| match j.cmp(&d) {
            std::cmp::Ordering::Less => same(j),
            std::cmp::Ordering::Equal => AxisMap {
                start: Affine::ZERO,
                coef,
            },
            std::cmp::Ordering::Greater => same(j.saturating_add(extra)),
        })
        .collect();
    Ok(ViewMap { shape, axes })
}

/// The strides of a view after merging axes: one stride vector per component of the address
/// (a tile's free offset; each axis of the HBM tensor an access indexes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restrided {
    /// The view's new dimensions.
    pub shape: Vec<u32>,
    /// Each component's stride per new dimension.
    pub strides: Vec<Vec<i64>>,
}

/// Whether `outer` and `inner` (axes of sizes `> 1`) are contiguous in every component:
/// `stride[outer] == stride[inner] · dims[inner]`.
fn contiguous(
    method: &'static str,
    dims: &[u32],
    strides: &[Vec<i64>],
    outer: usize,
    inner: usize,
) -> Result<(), ViewError> {
    for s in strides {
        let want = i128::from(s[inner]).saturating_mul(i128::from(dims[inner]));
        if i128::from(s[outer]) != want {
            return Err(ViewError::NotContiguous {
                method,
                first: outer,
                second: inner,
                outer: s[outer],
                inner: s[inner],
                size: dims[inner],
                want,
            });
        }
    }
    Ok(())
}

/// `t.flatten_dims(start_dim, end_dim)`: axes `start_dim..=end_dim` merged into one (NKI: they
/// must be contiguous in memory; on-chip, `start_dim > 0`). `strides` holds one stride per axis
/// for each component of the address.
pub fn flatten_dims(
    dims: &[u32],
    strides: &[Vec<i64>],
    on_chip: bool,
    start: i64,
    end: i64,
) -> Result<Restrided, ViewError> {
    const M: &str = "flatten_dims";
    let s = axis(M, start, dims.len())?;
    let e = axis(M, end, dims.len())?;
    if s > e {
        return Err(ViewError::FlattenOrder { start: s, end: e });
    }
    if on_chip && s == 0 {
        return Err(ViewError::Partition {
            method: M,
            what: "merge",
            hint: ": start_dim must be above 0",
        });
    }
    // The axes of size > 1 in the range must chain; axes of size 1 are never stepped.
    let big: Vec<usize> = (s..=e).filter(|&k| dims[k] != 1).collect();
    for w in big.windows(2) {
        contiguous(M, dims, strides, w[0], w[1])?;
    }
    let merged = dims[s..=e]
        .iter()
        .try_fold(1u32, |a, &n| a.checked_mul(n))
        .ok_or(ViewError::Size {
            method: M,
            size: i64::MAX,
        })?;
    let mut shape = dims[..s].to_vec();
    shape.push(merged);
    shape.extend_from_slice(&dims[e.saturating_add(1)..]);
    let strides = strides
        .iter()
        .map(|st| {
            let inner = big.last().map_or(0, |&k| st[k]);
            let mut out = st[..s].to_vec();
            out.push(inner);
            out.extend_from_slice(&st[e.saturating_add(1)..]);
            out
        })
        .collect();
    Ok(Restrided { shape, strides })
}

/// `t.reshape(shape)`: the same elements in row-major order under `shape`, where the layout
/// allows it without a copy (NKI: the element count is the same; on-chip, `shape[0]` is the
/// partitions; "fails if the current memory layout is incompatible"). Runs of old axes and new
/// axes with equal products are matched; each old run must be contiguous, and the new axes of a
/// run take strides from its innermost axis.
pub fn reshape(
    dims: &[u32],
    strides: &[Vec<i64>],
    on_chip: bool,
    new: &[i64],
) -> Result<Restrided, ViewError> {
    const M: &str = "reshape";
    check_rank(M, new.len())?;
    let mut sizes = Vec::with_capacity(new.len());
    for &n in new {
        sizes.push(size_u32(M, n)?);
    }
    let count = |d: &[u32]| {
        d.iter()
            .fold(1u128, |a, &n| a.saturating_mul(u128::from(n)))
    };
    if count(&sizes) != count(dims) {
        return Err(ViewError::Elements {
            method: M,
            got: count(&sizes),
            want: count(dims),
        });
    }
    // On-chip, the partition axis stays: reshape the free axes alone.
    let skip = if on_chip {
        let parts = dims.first().copied().unwrap_or(1);
        if sizes.first().copied() != Some(parts) {
            return Err(ViewError::ReshapePartitions {
                parts,
                got: new.first().copied().unwrap_or(0),
            });
        }
        1
    } else {
        0
    };
    // Axes of size 1 are never stepped: the old ones are left out, the new ones get stride 0.
    let old: Vec<usize> = (skip..dims.len()).filter(|&k| dims[k] != 1).collect();
    let big: Vec<usize> = (skip..sizes.len()).filter(|&k| sizes[k] != 1).collect();
    let mut out: Vec<Vec<i64>> = strides
        .iter()
        .map(|st| {
            let mut o = vec![0i64; sizes.len()];
            o[..skip].copy_from_slice(&st[..skip]);
            o
        })
        .collect();
    let (mut i, mut j) = (0usize, 0usize);
    while i < old.len() && j < big.len() {
        // One run: old axes old[i..i2] and new axes big[j..j2] of equal products.
        let (mut i2, mut j2) = (i.saturating_add(1), j.saturating_add(1));
        let mut po = u128::from(dims[old[i]]);
        let mut pn = u128::from(sizes[big[j]]);
        while po != pn {
            if po < pn && i2 < old.len() {
                po = po.saturating_mul(u128::from(dims[old[i2]]));
                i2 = i2.saturating_add(1);
            } else if j2 < big.len() {
                pn = pn.saturating_mul(u128::from(sizes[big[j2]]));
                j2 = j2.saturating_add(1);
            } else {
                break;
            }
        }
        let run = &old[i..i2];
        for w in run.windows(2) {
            contiguous(M, dims, strides, w[0], w[1])?;
        }
        for (c, st) in strides.iter().enumerate() {
            let mut s = run.last().map_or(0, |&k| st[k]);
            for &k in big[j..j2].iter().rev() {
                out[c][k] = s;
                s = s
                    .checked_mul(i64::from(sizes[k]))
                    .ok_or(ViewError::Overflow { method: M })?;
            }
        }
        i = i2;
        j = j2;
    }
    Ok(Restrided {
        shape: sizes,
        strides: out,
    })
}

/// A view's layout after `view(dtype)`: its dimensions, the strides of each address component
/// and its start, all in elements of the new dtype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reinterpreted {
    /// The new dimensions (the last scaled by the ratio of the dtype sizes).
    pub shape: Vec<u32>,
    /// The new strides, one vector per component (as [`Restrided::strides`]).
    pub strides: Vec<Vec<i64>>,
    /// The new start of each component.
    pub starts: Vec<Affine>,
}

/// `t.view(dtype)` (NumPy's `ndarray.view(dtype)`): the same bytes read as `to`, where the
/// view's elements are `from`. The last dimension must be contiguous in memory (stride 1, or
/// size 1); it is scaled by `from.size() / to.size()` (a narrower dtype: more elements) or
/// divided by `to.size() / from.size()` (a wider one: its size must be divisible, and the view's
/// start and outer strides whole elements of `to`). `strides` and `starts` hold one entry per
/// address component; the component where the last dimension steps is the one that changes
/// scale: every component's start and strides are scaled, which is right for a tile's one free
/// offset (and for the last axis of an HBM tensor, the only one the caller passes).
pub fn view_dtype(
    dims: &[u32],
    strides: &[Vec<i64>],
    starts: &[Affine],
    from: crate::DType,
    to: crate::DType,
) -> Result<Reinterpreted, ViewError> {
    const M: &str = "view";
    let (fs, ts) = (from.size(), to.size());
    let Some(last) = dims.len().checked_sub(1) else {
        return Err(ViewError::Rank { method: M, rank: 0 });
    };
    let mut shape = dims.to_vec();
    let mut out: Vec<Vec<i64>> = strides.to_vec();
    let mut new_starts: Vec<Affine> = starts.to_vec();
    if fs == ts {
        return Ok(Reinterpreted {
            shape,
            strides: out,
            starts: new_starts,
        });
    }
    for st in strides {
        let s = st.get(last).copied().unwrap_or(0);
        if dims[last] != 1 && s != 1 {
            return Err(ViewError::DtypeNotContiguous { to, stride: s });
        }
    }
    if fs > ts {
        let k = fs.checked_div(ts).unwrap_or(1);
        let ki = i64::from(k);
        shape[last] = dims[last].checked_mul(k).ok_or(ViewError::Size {
            method: M,
            size: i64::from(dims[last]).saturating_mul(ki),
        })?;
        for st in &mut out {
            for (j, s) in st.iter_mut().enumerate() {
                *s = if j == last {
                    1
                } else {
                    s.checked_mul(ki).ok_or(ViewError::Overflow { method: M })?
                };
            }
        }
        for a in &mut new_starts {
            *a = a
                .checked_scale(ki)
                .ok_or(ViewError::Overflow { method: M })?;
        }
    } else {
        let k = ts.checked_div(fs).unwrap_or(1);
        let ki = i64::from(k);
        if dims[last].checked_rem(k) != Some(0) {
            return Err(ViewError::DtypeDivide {
                from,
                to,
                ratio: k,
                size: dims[last],
            });
        }
        shape[last] = dims[last].checked_div(k).unwrap_or(0);
        let align = |what: String| ViewError::DtypeAlign {
            from,
            to,
            ratio: k,
            what,
        };
        for st in &mut out {
            for (j, s) in st.iter_mut().enumerate() {
                if j == last {
                    *s = 1;
                } else if dims[j] != 1 && s.checked_rem(ki) != Some(0) {
                    return Err(align(format!("stride of dimension {j} ({s})")));
                } else {
                    *s = s.checked_div(ki).unwrap_or(0);
                }
            }
        }
        for a in &mut new_starts {
            let whole = |c: i64| c.checked_rem(ki) == Some(0);
            if !whole(a.constant) || !a.coef.iter().all(|&c| whole(c)) {
                return Err(align("start".to_string()));
            }
            a.constant = a.constant.checked_div(ki).unwrap_or(0);
            for c in &mut a.coef {
                *c = c.checked_div(ki).unwrap_or(0);
            }
        }
    }
    Ok(Reinterpreted {
        shape,
        strides: out,
        starts: new_starts,
    })
}

/// An explicit access pattern (`t.ap(pattern = [[step, count], ...], offset = n)`), read: the
/// view's dimensions and the element stride of each over the tensor flattened row-major, and
/// the offset added to the viewed tensor's own start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessPattern {
    /// Each pair's count: the view's shape.
    pub shape: Vec<u32>,
    /// Each pair's step, in elements of the flattened tensor.
    pub steps: Vec<i64>,
    /// The static offset (0 when `offset` is not given).
    pub offset: i64,
}

/// `t.ap(pattern, offset)` (NKI's escape hatch, `torch.as_strided`): `pattern`'s `[step, count]`
/// pairs, outermost first, over the tensor flattened row-major, from `offset` elements past the
/// viewed tensor's start. A step is at least 0 here (the view primitives never make a negative
/// one; NKI documents none). On-chip (`row`: each partition's elements), the first pair walks
/// the partitions: its step is `row`, as NKI requires (every partition reads the same pattern).
pub fn ap(pairs: &[(i64, i64)], offset: i64, row: Option<u64>) -> Result<AccessPattern, ViewError> {
    let bad = |param: &'static str, what: String| ViewError::Ap { param, what };
    if pairs.is_empty() {
        return Err(bad(
            "pattern",
            "the pattern has at least one [step, count] pair (on chip, the partitions')".into(),
        ));
    }
    check_rank("ap", pairs.len())?;
    let mut shape = Vec::with_capacity(pairs.len());
    let mut steps = Vec::with_capacity(pairs.len());
    for (k, &(step, count)) in pairs.iter().enumerate() {
        let count = u32::try_from(count)
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| {
                bad(
                    "pattern",
                    format!("pair {k}'s count is a positive 32-bit integer, not {count}"),
                )
            })?;
        if step < 0 {
            return Err(bad(
                "pattern",
                format!("pair {k}'s step is at least 0, not {step}"),
            ));
        }
        shape.push(count);
        steps.push(step);
    }
    if let Some(row) = row
        && u64::try_from(steps[0]).ok() != Some(row)
    {
        return Err(bad(
            "pattern",
            format!(
                "the first pair walks the partitions of an SBUF or PSUM tile, so its step is the tile's {row} elements per partition, not {}: every partition reads the same pattern",
                steps[0]
            ),
        ));
    }
    if offset < 0 {
        return Err(bad(
            "offset",
            format!("the offset is at least 0, not {offset}"),
        ));
    }
    Ok(AccessPattern {
        shape,
        steps,
        offset,
    })
}

/// How an `ap`'s offset read at run time (NKI 0.6's `scalar_offset`, `vector_offset`) addresses
/// an HBM tensor ([`ap_indirect`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ApIndirect {
    /// `scalar_offset = v`: the whole pattern starts `v · scale` elements further (`scale` the
    /// tensor's elements to the right of `indirect_dim`), `v` in `0..bound` (the size of
    /// `indirect_dim`).
    Scalar {
        /// Elements per unit of the offset.
        scale: u32,
        /// The exclusive upper bound of the offset.
        bound: u32,
    },
    /// `vector_offset = idx`: the tensor as `rows` rows of `row` elements (dimension 0, and
    /// the rest flattened); partition `p` of the pattern reads row `idx[p]`, from the offset
    /// along the pattern's later pairs, which stay within the row.
    Rows {
        /// The size of dimension 0.
        rows: u32,
        /// Elements of one row.
        row: u64,
    },
}

/// The rule of `t.ap(pattern, offset, scalar_offset=, vector_offset=, indirect_dim=)` on an HBM
/// tensor of dimensions `dims`, `ap` its checked pattern ([`ap`]) and `vector` whether the
/// offset is a `vector_offset` (NKI 0.6, `nki/deep-dives/nki-aps.rst`): the element a pattern
/// point reads is `offset + Σ stepₖ·iₖ + v · prod(dims[indirect_dim + 1..])`.
///
/// `indirect_dim` is a dimension of the tensor (of `dims`, not of the pattern). A
/// `vector_offset` indexes dimension 0 only (NKI: "only `indirect_dim=0` is supported"), with
/// one index per partition of the pattern; NKI ignores the first pair's step (the row's
/// length is used), and here the later pairs, from the offset, must stay within one row: a
/// pattern crossing rows is refused (NKI does not say what it reads). The offset per unit of
/// a `scalar_offset` is at most `u32::MAX` elements.
pub fn ap_indirect(
    dims: &[u32],
    ap: &AccessPattern,
    indirect_dim: i64,
    vector: bool,
) -> Result<ApIndirect, ViewError> {
    let bad = |param: &'static str, what: String| ViewError::Ap { param, what };
    let d = usize::try_from(indirect_dim)
        .ok()
        .filter(|&d| d < dims.len())
        .ok_or_else(|| {
            bad(
                "indirect_dim",
                format!(
                    "indirect_dim {indirect_dim} is not a dimension of the tensor (it has {})",
                    dims.len()
                ),
            )
        })?;
    let right = dims
        .iter()
        .skip(d.saturating_add(1))
        .try_fold(1u64, |t, &n| t.checked_mul(u64::from(n)))
        .unwrap_or(u64::MAX);
    if !vector {
        let scale = u32::try_from(right).map_err(|_| {
            bad(
                "indirect_dim",
                format!("one step of the scalar offset along dimension {d} is {right} elements, more than 2^32 - 1"),
            )
        })?;
        return Ok(ApIndirect::Scalar {
            scale,
            bound: dims[d],
        });
    }
    if d != 0 {
        return Err(bad(
            "indirect_dim",
            format!(
                "a vector_offset indexes dimension 0 (NKI supports only indirect_dim=0), not {d}"
            ),
        ));
    }
    let extent = ap
        .shape
        .iter()
        .zip(&ap.steps)
        .skip(1)
        .fold(ap.offset, |e, (&n, &s)| {
            e.saturating_add(s.saturating_mul(i64::from(n).saturating_sub(1)))
        });
    if u64::try_from(extent).map_or(true, |e| e >= right) {
        return Err(bad(
            "pattern",
            format!(
                "with a vector_offset, the offset and the pairs after the first stay within one row of dimension 0 ({right} elements): they reach element {extent}"
            ),
        ));
    }
    Ok(ApIndirect::Rows {
        rows: dims[0],
        row: right,
    })
}

/// How `t.rearrange(src_pattern, dst_pattern, fixed_sizes)` is done with the other views, in
/// order: each `(dim, sizes)` of `splits` is a `reshape_dim` (applied first to last: `dim`
/// counts the axes the earlier splits made), then `permute(perm)`, then each `(start, end)` of
/// `merges` a `flatten_dims` (applied first to last: later merges come first in the list, so
/// that the earlier axes keep their numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RearrangePlan {
    /// The `reshape_dim` calls.
    pub splits: Vec<(i64, Vec<i64>)>,
    /// The `permute` call (the identity when nothing moves).
    pub perm: Vec<i64>,
    /// The `flatten_dims` calls.
    pub merges: Vec<(i64, i64)>,
}

fn pattern_error(param: &'static str, what: String) -> ViewError {
    ViewError::Rearrange { param, what }
}

/// The names of a pattern in order, each once (a name twice is refused).
fn pattern_names<'a>(
    param: &'static str,
    pattern: &'a [Vec<String>],
) -> Result<Vec<&'a str>, ViewError> {
    let mut names: Vec<&str> = Vec::new();
    for group in pattern {
        if group.is_empty() {
            return Err(pattern_error(
                param,
                "an empty group `()` names no dimension (size-1 axes are `expand_dim` / `squeeze_dim`)".into(),
            ));
        }
        for n in group {
            if names.contains(&n.as_str()) {
                return Err(pattern_error(
                    param,
                    format!("the name \"{n}\" appears twice in {param}"),
                ));
            }
            names.push(n);
        }
    }
    Ok(names)
}

/// `t.rearrange(src_pattern, dst_pattern, fixed_sizes)` (einops' notation, as NKI 0.6's):
/// `src_pattern` names each axis of `t`, a group of names (`("h", "w")`) splitting the axis
/// row-major; `dst_pattern` orders the same names, a group merging its axes (which must be
/// contiguous in memory, as `flatten_dims` checks). `fixed_sizes` gives the size of names in
/// split groups; one name per group may be left out and is inferred. On-chip, the partition
/// axis stays first and whole.
pub fn rearrange(
    dims: &[Option<u32>],
    on_chip: bool,
    src: &[Vec<String>],
    dst: &[Vec<String>],
    fixed: &[(String, i64)],
) -> Result<RearrangePlan, ViewError> {
    const M: &str = "rearrange";
    if src.len() != dims.len() {
        return Err(pattern_error(
            "src_pattern",
            format!(
                "src_pattern has {} entries and the tensor {} dimensions: it names each dimension (a group of names splits one)",
                src.len(),
                dims.len()
            ),
        ));
    }
    let src_names = pattern_names("src_pattern", src)?;
    let dst_names = pattern_names("dst_pattern", dst)?;
    if let Some(n) = dst_names.iter().find(|n| !src_names.contains(n)) {
        return Err(pattern_error(
            "dst_pattern",
            format!("the name \"{n}\" of dst_pattern is not in src_pattern"),
        ));
    }
    if let Some(n) = src_names.iter().find(|n| !dst_names.contains(n)) {
        return Err(pattern_error(
            "dst_pattern",
            format!(
                "the name \"{n}\" of src_pattern is not in dst_pattern (a view keeps every element)"
            ),
        ));
    }
    let mut sizes: Vec<(&str, u32)> = Vec::new();
    for (n, s) in fixed {
        if !src_names.contains(&n.as_str()) {
            return Err(pattern_error(
                "fixed_sizes",
                format!("the name \"{n}\" of fixed_sizes is not in src_pattern"),
            ));
        }
        if sizes.iter().any(|(m, _)| m == n) {
            return Err(pattern_error(
                "fixed_sizes",
                format!("the name \"{n}\" is given twice in fixed_sizes"),
            ));
        }
        let s = u32::try_from(*s).ok().filter(|&s| s > 0).ok_or_else(|| {
            pattern_error(
                "fixed_sizes",
                format!("the size of \"{n}\" is a positive 32-bit integer, not {s}"),
            )
        })?;
        sizes.push((n, s));
    }
    if on_chip {
        if src.first().is_some_and(|g| g.len() != 1) {
            return Err(ViewError::Partition {
                method: M,
                what: "split",
                hint: ": the first entry of src_pattern is one name",
            });
        }
        if dst.first().is_some_and(|g| g.len() != 1) {
            return Err(ViewError::Partition {
                method: M,
                what: "merge",
                hint: ": the first entry of dst_pattern is one name",
            });
        }
        if src_names.first() != dst_names.first() {
            return Err(ViewError::Partition {
                method: M,
                what: "move",
                hint: ": the first name of dst_pattern must be the first of src_pattern; exchanging partitions and free elements moves data (`nc_transpose` on TensorE, `dma_transpose`)",
            });
        }
    }
    let mut splits = Vec::new();
    let mut at: i64 = 0;
    for (d, group) in src.iter().enumerate() {
        let name_list = group.join(", ");
        let size_of = |n: &String| sizes.iter().find(|(m, _)| m == n).map(|&(_, s)| s);
        let Some(n) = dims[d] else {
            if group.len() == 1 && size_of(&group[0]).is_none() {
                at = at.saturating_add(1);
                continue;
            }
            return Err(ViewError::Symbolic { method: M, dim: d });
        };
        let unknown = group.iter().filter(|g| size_of(g).is_none()).count();
        let known = group
            .iter()
            .filter_map(size_of)
            .fold(1u64, |a, s| a.saturating_mul(u64::from(s)));
        if unknown > 1 {
            return Err(pattern_error(
                "fixed_sizes",
                format!(
                    "dimension {d} of size {n} is split into ({name_list}): give the sizes of all but one of them in fixed_sizes"
                ),
            ));
        }
        let divides = if unknown == 1 {
            u64::from(n).checked_rem(known) == Some(0)
        } else {
            known == u64::from(n)
        };
        if !divides {
            return Err(pattern_error(
                "fixed_sizes",
                if unknown == 1 {
                    format!(
                        "dimension {d} has size {n}, which the product {known} of the given sizes of ({name_list}) does not divide"
                    )
                } else {
                    format!(
                        "dimension {d} has size {n}, not the product {known} of the sizes of ({name_list})"
                    )
                },
            ));
        }
        let split: Vec<i64> = group
            .iter()
            .map(|g| size_of(g).map_or(-1, i64::from))
            .collect();
        let len = i64::try_from(group.len()).unwrap_or(i64::MAX);
        if group.len() > 1 {
            splits.push((at, split));
        }
        at = at.saturating_add(len);
    }
    let perm = dst_names
        .iter()
        .map(|n| {
            let k = src_names.iter().position(|m| m == n).unwrap_or(0);
            i64::try_from(k).unwrap_or(i64::MAX)
        })
        .collect();
    let mut merges = Vec::new();
    let mut start: i64 = 0;
    for group in dst {
        let len = i64::try_from(group.len()).unwrap_or(i64::MAX);
        if group.len() > 1 {
            merges.push((start, start.saturating_add(len).saturating_sub(1)));
        }
        start = start.saturating_add(len);
    }
    merges.reverse();
    Ok(RearrangePlan {
        splits,
        perm,
        merges,
    })
}

#[cfg(test)]
#[allow(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "small test shapes"
)]
mod tests {
    use super::*;

    /// Row-major multi-index of linear position `i` in `dims`.
    fn unravel(mut i: u64, dims: &[u32]) -> Vec<u64> {
        let mut out = vec![0; dims.len()];
        for (k, &n) in dims.iter().enumerate().rev() {
            out[k] = i % u64::from(n);
            i /= u64::from(n);
        }
        out
    }

    fn address(idx: &[u64], strides: &[i64]) -> i64 {
        idx.iter().zip(strides).map(|(&i, &s)| i as i64 * s).sum()
    }

    /// Brute force: element `i` (row-major) of the new view addresses what element `i` of the
    /// old one does, in every component.
    fn same_elements(old: &[u32], old_st: &[Vec<i64>], new: &Restrided) {
        let n: u64 = old.iter().map(|&d| u64::from(d)).product();
        for i in 0..n {
            let a = unravel(i, old);
            let b = unravel(i, &new.shape);
            for (so, sn) in old_st.iter().zip(&new.strides) {
                assert_eq!(address(&a, so), address(&b, sn), "element {i}");
            }
        }
    }

    fn row_major(dims: &[u32]) -> Vec<i64> {
        let mut s = vec![0i64; dims.len()];
        let mut acc = 1i64;
        for k in (0..dims.len()).rev() {
            s[k] = acc;
            acc *= i64::from(dims[k]);
        }
        s
    }

    #[test]
    fn reshape_of_a_contiguous_layout_keeps_every_address() {
        let dims = [4u32, 6, 2];
        let st = vec![row_major(&dims)];
        for new in [
            vec![48i64],
            vec![4, 12],
            vec![24, 2],
            vec![2, 2, 3, 4],
            vec![1, 48, 1],
            vec![8, 1, 6],
        ] {
            let r = reshape(&dims, &st, false, &new).unwrap();
            same_elements(&dims, &st, &r);
        }
    }

    #[test]
    fn reshape_of_a_permuted_layout_splits_but_does_not_merge() {
        // A [4, 6] view of a [6, 4] row-major array, transposed: strides (1, 4).
        let dims = [4u32, 6];
        let st = vec![vec![1i64, 4]];
        let r = reshape(&dims, &st, false, &[4, 2, 3]).unwrap();
        same_elements(&dims, &st, &r);
        let e = reshape(&dims, &st, false, &[24]).unwrap_err();
        assert!(matches!(
            e,
            ViewError::NotContiguous {
                first: 0,
                second: 1,
                ..
            }
        ));
    }

    #[test]
    fn reshape_on_chip_keeps_the_partitions() {
        let dims = [128u32, 4, 6];
        // Partition component (stride 1 on axis 0) and free offset.
        let st = vec![vec![1, 0, 0], vec![0, 6, 1]];
        let r = reshape(&dims, &st, true, &[128, 24]).unwrap();
        assert_eq!(r.strides, vec![vec![1, 0], vec![0, 1]]);
        same_elements(&dims, &st, &r);
        assert_eq!(
            reshape(&dims, &st, true, &[64, 48]).unwrap_err(),
            ViewError::ReshapePartitions {
                parts: 128,
                got: 64
            }
        );
    }

    #[test]
    fn flatten_needs_contiguity() {
        let dims = [128u32, 2, 3, 4];
        let st = vec![vec![0, 12, 4, 1]];
        let r = flatten_dims(&dims, &st, true, 1, 2).unwrap();
        assert_eq!(r.shape, vec![128, 6, 4]);
        same_elements(&dims, &st, &r);
        // Stepped by 2 on axis 2: axes 2 and 3 no longer chain.
        let st2 = vec![vec![0, 24, 8, 1]];
        assert!(flatten_dims(&dims, &st2, true, 2, 3).is_err());
        assert!(flatten_dims(&dims, &st2, true, 1, 2).is_ok());
        assert!(matches!(
            flatten_dims(&dims, &st, true, 0, 1),
            Err(ViewError::Partition { .. })
        ));
    }

    fn fixed(d: &[u32]) -> Vec<Option<u32>> {
        d.iter().map(|&n| Some(n)).collect()
    }

    /// Where view element `u` lands in the viewed tensor.
    fn apply(m: &ViewMap, u: &[i64]) -> Vec<i64> {
        m.axes
            .iter()
            .map(|a| a.start.constant + a.coef.iter().zip(u).map(|(c, x)| c * x).sum::<i64>())
            .collect()
    }

    #[test]
    fn maps_follow_the_numpy_meaning() {
        let d = fixed(&[128, 8, 64]);
        let s = slice(&d, true, 2, Affine::constant(8), Affine::constant(24), 3).unwrap();
        assert_eq!(s.shape, fixed(&[128, 8, 6]));
        assert_eq!(apply(&s, &[5, 2, 4]), vec![5, 2, 20]);
        let s = select(&d, true, 1, Affine::constant(3)).unwrap();
        assert_eq!(s.shape, fixed(&[128, 64]));
        assert_eq!(apply(&s, &[7, 9]), vec![7, 3, 9]);
        let p = permute(&d, true, &[0, 2, 1]).unwrap();
        assert_eq!(p.shape, fixed(&[128, 64, 8]));
        assert_eq!(apply(&p, &[1, 2, 3]), vec![1, 3, 2]);
        let e = expand_dim(&d, true, 1).unwrap();
        assert_eq!(e.shape, fixed(&[128, 1, 8, 64]));
        assert_eq!(apply(&e, &[1, 0, 2, 3]), vec![1, 2, 3]);
        let one = fixed(&[128, 1, 64]);
        let b = broadcast(&one, true, 1, 8).unwrap();
        assert_eq!(b.shape, fixed(&[128, 8, 64]));
        assert_eq!(apply(&b, &[1, 7, 3]), vec![1, 0, 3]);
        let q = squeeze_dim(&one, true, 1).unwrap();
        assert_eq!(q.shape, fixed(&[128, 64]));
        assert_eq!(apply(&q, &[1, 3]), vec![1, 0, 3]);
        let r = reshape_dim(&fixed(&[128, 24]), true, 1, &[4, -1]).unwrap();
        assert_eq!(r.shape, fixed(&[128, 4, 6]));
        assert_eq!(apply(&r, &[2, 3, 5]), vec![2, 23]);
    }

    #[test]
    fn bad_arguments_are_refused() {
        let d = fixed(&[128, 8, 64]);
        let c = Affine::constant;
        assert!(matches!(
            slice(&d, true, 3, c(0), c(1), 1),
            Err(ViewError::Axis { .. })
        ));
        assert!(matches!(
            slice(&d, true, 1, c(4), c(9), 1),
            Err(ViewError::SliceBounds { .. })
        ));
        assert!(matches!(
            slice(&d, true, 1, c(4), c(4), 1),
            Err(ViewError::SliceBounds { .. })
        ));
        assert!(matches!(
            slice(&d, true, 1, c(0), c(4), 0),
            Err(ViewError::Step { step: 0 })
        ));
        assert!(matches!(
            slice(&d, true, 0, c(0), c(64), 2),
            Err(ViewError::PartitionStep { .. })
        ));
        assert!(slice(&d, false, 0, c(0), c(64), 2).is_ok());
        let one = select(&d, true, 0, c(1)).unwrap();
        assert_eq!(one.shape, fixed(&[1, 8, 64]));
        assert_eq!(apply(&one, &[0, 2, 3]), vec![1, 2, 3]);
        assert_eq!(select(&d, false, 0, c(1)).unwrap().shape, fixed(&[8, 64]));
        assert!(matches!(
            select(&d, true, 1, c(8)),
            Err(ViewError::Index { .. })
        ));
        assert!(matches!(
            permute(&d, true, &[1, 0, 2]),
            Err(ViewError::Partition { .. })
        ));
        assert!(permute(&d, false, &[1, 0, 2]).is_ok());
        assert!(matches!(
            permute(&d, true, &[0, 1, 1]),
            Err(ViewError::NotPermutation { .. })
        ));
        assert!(matches!(
            broadcast(&d, true, 1, 4),
            Err(ViewError::NotSizeOne { .. })
        ));
        assert!(matches!(
            squeeze_dim(&d, true, 2),
            Err(ViewError::NotSizeOne { .. })
        ));
        assert!(matches!(
            expand_dim(&d, true, 0),
            Err(ViewError::Partition { .. })
        ));
        assert!(matches!(
            reshape_dim(&d, true, 1, &[3, -1]),
            Err(ViewError::Elements { .. })
        ));
        assert!(matches!(
            expand_dim(&fixed(&[1, 1, 1, 1, 1]), false, 1),
            Err(ViewError::Rank { .. })
        ));
    }

    fn names(p: &[&[&str]]) -> Vec<Vec<String>> {
        p.iter()
            .map(|g| g.iter().map(|n| (*n).to_string()).collect())
            .collect()
    }

    #[test]
    fn rearrange_plans_splits_a_permutation_and_merges() {
        // (b, (h, w), c) -> (b, c, (w, h)) with h = 4 on [8, 24, 5].
        let plan = rearrange(
            &fixed(&[8, 24, 5]),
            false,
            &names(&[&["b"], &["h", "w"], &["c"]]),
            &names(&[&["b"], &["c"], &["w", "h"]]),
            &[("h".to_string(), 4)],
        )
        .unwrap();
        assert_eq!(plan.splits, vec![(1, vec![4, -1])]);
        assert_eq!(plan.perm, vec![0, 3, 2, 1]);
        assert_eq!(plan.merges, vec![(2, 3)]);
        // Two splits: the second's position counts the axes the first made.
        let plan = rearrange(
            &fixed(&[6, 8]),
            false,
            &names(&[&["a", "b"], &["c", "d"]]),
            &names(&[&["a"], &["b"], &["c"], &["d"]]),
            &[("a".to_string(), 2), ("d".to_string(), 2)],
        )
        .unwrap();
        assert_eq!(plan.splits, vec![(0, vec![2, -1]), (2, vec![-1, 2])]);
        assert_eq!(plan.perm, vec![0, 1, 2, 3]);
        assert!(plan.merges.is_empty());
    }

    #[test]
    fn rearrange_refuses_what_is_not_one_rearrangement() {
        let d = fixed(&[128, 24]);
        let bad = |src: &[&[&str]], dst: &[&[&str]], f: &[(&str, i64)], chip: bool| {
            let f: Vec<(String, i64)> = f.iter().map(|(n, s)| ((*n).to_string(), *s)).collect();
            rearrange(&d, chip, &names(src), &names(dst), &f).unwrap_err()
        };
        assert!(matches!(
            bad(&[&["p"], &["f"]], &[&["p"], &["g"]], &[], false),
            ViewError::Rearrange {
                param: "dst_pattern",
                ..
            }
        ));
        assert!(matches!(
            bad(&[&["p"], &["f", "f"]], &[&["p"], &["f"]], &[], false),
            ViewError::Rearrange {
                param: "src_pattern",
                ..
            }
        ));
        assert!(matches!(
            bad(
                &[&["p"], &["h", "w"]],
                &[&["p"], &["h", "w"]],
                &[("h", 7)],
                false
            ),
            ViewError::Rearrange {
                param: "fixed_sizes",
                ..
            }
        ));
        assert!(matches!(
            bad(
                &[&["p"], &["h", "w"]],
                &[&["p"], &["h", "w"]],
                &[("h", 4), ("w", 5)],
                false
            ),
            ViewError::Rearrange {
                param: "fixed_sizes",
                ..
            }
        ));
        assert!(matches!(
            bad(&[&["p"], &["f"]], &[&["f"], &["p"]], &[], true),
            ViewError::Partition { what: "move", .. }
        ));
        assert!(
            rearrange(
                &d,
                false,
                &names(&[&["p"], &["f"]]),
                &names(&[&["f"], &["p"]]),
                &[]
            )
            .is_ok()
        );
        assert!(matches!(
            bad(
                &[&["p", "q"], &["f"]],
                &[&["p"], &["q"], &["f"]],
                &[("p", 2)],
                true
            ),
            ViewError::Partition { what: "split", .. }
        ));
    }

    #[test]
    fn ap_reads_pairs_and_checks_the_partition_step() {
        let a = ap(&[(64, 128), (8, 7), (1, 16)], 8, Some(64)).unwrap();
        assert_eq!(a.shape, vec![128, 7, 16]);
        assert_eq!(a.steps, vec![64, 8, 1]);
        assert_eq!(a.offset, 8);
        assert!(matches!(
            ap(&[(32, 128), (1, 16)], 0, Some(64)),
            Err(ViewError::Ap {
                param: "pattern",
                ..
            })
        ));
        // HBM: any first step.
        assert!(ap(&[(32, 128), (1, 16)], 0, None).is_ok());
        assert!(matches!(
            ap(&[(64, 128)], -1, Some(64)),
            Err(ViewError::Ap {
                param: "offset",
                ..
            })
        ));
        assert!(ap(&[], 0, None).is_err());
        assert!(ap(&[(1, 2); 6], 0, None).is_err());
    }

    #[test]
    fn view_dtype_scales_the_last_dimension() {
        use crate::DType;
        // [128, 16] f32 row-major, free offset component: as u8, [128, 64].
        let st = vec![vec![0i64, 1]];
        let r = view_dtype(
            &[128, 16],
            &st,
            &[Affine::constant(4)],
            DType::F32,
            DType::U8,
        )
        .unwrap();
        assert_eq!(r.shape, vec![128, 64]);
        assert_eq!(r.starts[0].constant, 16);
        // [128, 4, 8] u8 as f32: outer stride 8 -> 2, last 8 -> 2.
        let st = vec![vec![0i64, 8, 1]];
        let r = view_dtype(&[128, 4, 8], &st, &[Affine::ZERO], DType::U8, DType::F32).unwrap();
        assert_eq!(r.shape, vec![128, 4, 2]);
        assert_eq!(r.strides[0], vec![0, 2, 1]);
        assert!(matches!(
            view_dtype(
                &[128, 6],
                &[vec![0, 1]],
                &[Affine::ZERO],
                DType::U8,
                DType::F32
            ),
            Err(ViewError::DtypeDivide {
                ratio: 4,
                size: 6,
                ..
            })
        ));
        assert!(matches!(
            view_dtype(
                &[128, 8],
                &[vec![0, 2]],
                &[Affine::ZERO],
                DType::F32,
                DType::U8
            ),
            Err(ViewError::DtypeNotContiguous { stride: 2, .. })
        ));
        assert!(matches!(
            view_dtype(
                &[128, 8],
                &[vec![0, 1]],
                &[Affine::constant(2)],
                DType::U8,
                DType::F32
            ),
            Err(ViewError::DtypeAlign { .. })
        ));
    }

    #[test]
    fn ap_indirect_scales_by_the_elements_right_of_the_dimension() {
        let deep = ap(&[(512, 128), (1, 256)], 0, None).unwrap();
        // NKI's deep dive: `A` of [512, 512], `indirect_dim = 0`: `offset + v · 512`.
        assert_eq!(
            ap_indirect(&[512, 512], &deep, 0, false),
            Ok(ApIndirect::Scalar {
                scale: 512,
                bound: 512
            })
        );
        // A [4, 6, 5] tensor: one unit of dimension 1 is 5 elements, of dimension 2 one.
        let small = ap(&[(1, 1), (1, 1)], 0, None).unwrap();
        assert_eq!(
            ap_indirect(&[4, 6, 5], &small, 1, false),
            Ok(ApIndirect::Scalar { scale: 5, bound: 6 })
        );
        assert_eq!(
            ap_indirect(&[4, 6, 5], &small, 2, false),
            Ok(ApIndirect::Scalar { scale: 1, bound: 5 })
        );
        for dim in [-1, 3] {
            assert!(matches!(
                ap_indirect(&[4, 6, 5], &small, dim, false),
                Err(ViewError::Ap {
                    param: "indirect_dim",
                    ..
                })
            ));
        }
    }

    #[test]
    fn ap_indirect_vector_rows_stay_within_a_row_of_dimension_0() {
        // NKI's example: `A` of [128, 512], 64 rows of 512.
        let rows = ap(&[(512, 64), (1, 512)], 0, None).unwrap();
        assert_eq!(
            ap_indirect(&[128, 512], &rows, 0, true),
            Ok(ApIndirect::Rows {
                rows: 128,
                row: 512
            })
        );
        // A [10, 4, 8] tensor: rows of 32; the last element of a row is reachable, the next not.
        let last = ap(&[(32, 16), (1, 8)], 24, None).unwrap();
        assert_eq!(
            ap_indirect(&[10, 4, 8], &last, 0, true),
            Ok(ApIndirect::Rows { rows: 10, row: 32 })
        );
        let past = ap(&[(32, 16), (1, 8)], 25, None).unwrap();
        assert!(matches!(
            ap_indirect(&[10, 4, 8], &past, 0, true),
            Err(ViewError::Ap {
                param: "pattern",
                ..
            })
        ));
        assert!(matches!(
            ap_indirect(&[10, 4, 8], &last, 1, true),
            Err(ViewError::Ap {
                param: "indirect_dim",
                ..
            })
        ));
    }
}
