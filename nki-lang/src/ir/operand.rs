//! The pooled operands: tile views, HBM accesses, grid expressions and masks.

use crate::affine::Affine;
use crate::dtype::DType;
use crate::shape::{MAX_TENSOR_RANK, MAX_TILE_RANK, TileShape};

/// A view of an on-chip tile: a partition range and an affine pattern over its free elements.
///
/// The view's element `(p, f0, f1, ...)` is at partition `part_start + part_var + p` and free element
/// `offset + Σ stride[j] · fj` (in elements, row-major within the partition). A free stride of
/// 0 broadcasts: a `[P, 1]` column read as `[P, F]` is a view of shape `[P, F]` with free
/// strides 0.
///
/// A view may read the tile's bytes as another dtype (NKI 0.6's `t.view(dtype)`, `dtype`): its
/// offset and strides then count elements of that dtype, from the tile's first byte of each
/// partition.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileView {
    /// Index of the tile in the program's tile table.
    pub tile: u16,
    /// First partition of the view.
    pub part_start: u32,
    /// The view's shape: partitions, then free sizes.
    pub shape: TileShape,
    /// Free-element offset of the view's first element.
    pub offset: Affine,
    /// Element stride of each free dimension of the view (`strides[j]` for `shape.free()[j]`).
    pub strides: [i64; MAX_TILE_RANK - 1],
    /// The part of the first partition that loop variables and program ids set (NKI's
    /// `t[i * 32 + i_p, ...]`, `t[ds(i * 64, 64), ...]`): added to `part_start` for their
    /// values; [`Affine::ZERO`] for a view whose partitions are fixed. Its constant is 0.
    pub part_var: Affine,
    /// The dtype the view reads the tile's bytes as (`t.view(u8)`: a bit reinterpretation,
    /// little-endian as NumPy's `ndarray.view`); `None` for the tile's own dtype. `offset` and
    /// `strides` count elements of this dtype.
    pub dtype: Option<DType>,
}

impl TileView {
    /// The whole of tile `tile` of shape `shape`: every partition, free elements row-major.
    pub fn whole(tile: u16, shape: &TileShape) -> TileView {
        TileView {
            tile,
            part_start: 0,
            shape: *shape,
            offset: Affine::ZERO,
            strides: row_major_strides(shape),
            part_var: Affine::ZERO,
            dtype: None,
        }
    }

    /// The dtype the view's elements have, for a tile of dtype `tile`.
    pub fn dtype_of(&self, tile: DType) -> DType {
        self.dtype.unwrap_or(tile)
    }

    /// Whether the view reads one value per partition, whatever its free shape: every free
    /// dimension of size 1 or stride 0 (a `[P, 1]` column, possibly broadcast).
    pub fn is_column(&self) -> bool {
        self.shape
            .free()
            .iter()
            .zip(&self.strides)
            .all(|(&n, &s)| n == 1 || s == 0)
    }

    /// Whether the view covers its free elements row-major from `offset` (no broadcast,
    /// no gap, no reordering).
    pub fn is_row_major(&self) -> bool {
        let free = self.shape.free();
        let mut stride = 1i64;
        for j in (0..free.len()).rev() {
            if free[j] != 1 && self.strides[j] != stride {
                return false;
            }
            stride = stride.saturating_mul(free[j] as i64);
        }
        true
    }
}

/// Row-major element strides of a shape's free dimensions.
pub(crate) fn row_major_strides(shape: &TileShape) -> [i64; MAX_TILE_RANK - 1] {
    let mut strides = [0i64; MAX_TILE_RANK - 1];
    let free = shape.free();
    let mut s = 1i64;
    for j in (0..free.len()).rev() {
        strides[j] = s;
        s = s.saturating_mul(free[j] as i64);
    }
    strides
}

/// An affine index over an instruction's grid: `start + Σ grid[j] · t_j`, where `t_j` runs
/// over the `j`-th dimension of the grid (`t_0` = partition) and `start` is affine in the index
/// variables. One axis of an HBM access; also `iota`'s values and `affine_select`'s predicate.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct AxisIndex {
    /// The value at the grid's first element.
    pub start: Affine,
    /// Coefficient of each grid dimension.
    pub grid: [i64; MAX_TILE_RANK],
}

impl AxisIndex {
    /// A constant index.
    pub const fn constant(c: i64) -> AxisIndex {
        AxisIndex {
            start: Affine::constant(c),
            grid: [0; MAX_TILE_RANK],
        }
    }
}

/// A tile-shaped access into an HBM tensor, one affine index per tensor axis.
///
/// Indices stay per axis (not flattened) because a tensor's strides depend on symbolic
/// dimensions known only at launch. The axes are the tensor's own, or those of one of its
/// reshapes (NKI's `tensor.reshape(shape)`: the same elements in the same row-major order,
/// under other dimensions).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct HbmAccess {
    /// Index of the tensor in the program's tensor table.
    pub tensor: u8,
    /// The reshape of the tensor the axes index (index in [`crate::Program::reshapes`]), or
    /// `None` for the tensor's own dimensions.
    pub reshape: Option<u8>,
    /// Number of axes indexed: the rank of the tensor, or of its reshape.
    pub rank: u8,
    /// The access's grid: the tile shape it reads or writes.
    pub shape: TileShape,
    /// One index per axis (`axes[..rank]`).
    pub axes: [AxisIndex; MAX_TENSOR_RANK],
}

impl HbmAccess {
    /// The used axes.
    pub fn axes(&self) -> &[AxisIndex] {
        &self.axes[..(self.rank as usize).min(MAX_TENSOR_RANK)]
    }
}

/// Most conditions one mask joins with `&`.
pub const MAX_MASK_TERMS: usize = 4;

/// One condition of a mask: `coef · t_axis + offset < S`, where `t_axis` runs over grid
/// dimension `axis` of the instruction, `offset` is affine in the index variables, and `S` is
/// the symbolic dimension `sym` bound at launch (0 when `sym` is `None`).
///
/// Every comparison of NKI's masks normalises to this form: `k * 128 + i_p < n_rows` is
/// `t_0 + 128·k < n_rows`; `i_f >= 64` is `−t_1 + 63 < 0`. A term with `coef == 0` masks the
/// whole instruction (for the iterations where it fails).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct MaskTerm {
    /// The grid dimension.
    pub axis: u8,
    /// Coefficient of the grid coordinate.
    pub coef: i64,
    /// The variable part, with the constant.
    pub offset: Affine,
    /// The symbolic dimension on the right-hand side.
    pub sym: Option<u8>,
}

/// NKI's `mask=`: a conjunction of [`MaskTerm`]s, each bounding one grid dimension, so that the
/// elements it keeps form a box. An instruction runs on that box only: masked-off elements are
/// neither read nor written, and accesses may reach past a tensor's end where the mask cuts
/// them off.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mask {
    /// The conditions (`terms[..len]`).
    pub terms: [MaskTerm; MAX_MASK_TERMS],
    /// Number of conditions.
    pub len: u8,
}

impl Mask {
    /// The conditions.
    pub fn terms(&self) -> &[MaskTerm] {
        &self.terms[..(self.len as usize).min(MAX_MASK_TERMS)]
    }

    /// Whether some condition bounds a grid axis (cuts the instruction's grid). A mask without
    /// one is a predicate on the loop indices and program ids alone (NKI's `if` on loop
    /// indices): the instruction runs whole or not at all, which every instruction allows.
    pub fn cuts_grid(&self) -> bool {
        self.terms().iter().any(|t| t.coef != 0)
    }
}
