//! Indexing: `t[[k * 128 + i_p, i_f]]`, `t[[0..128, m * 512..(m + 1) * 512]]`, `t[..]`.
//!
//! Each axis takes a slice (`a..b`, `ds(start, size)`), an advanced index (an affine expression
//! of index-grid values) or an integer (which drops the axis). Slices and advanced indices do
//! not mix in one subscript, as in NKI.

use crate::span::Span;
use nki_lang::{Affine, Dim, MAX_TILE_RANK, TileShape, TileView};

use super::Lowerer;
use super::value::{Access, Idx, Value};
use crate::parse::model::Expr;

const TOO_LONG: &str = "a slice is longer than 4294967295 elements";

enum Sel {
    Slice {
        start: Affine,
        size: u32,
    },
    Advanced(Idx),
    Scalar(Affine),
    /// A tile of indices (NKI's indirect DMA): HBM rows chosen at run time.
    Indirect(TileView),
}

impl Lowerer<'_> {
    /// `x.shape[i]`: one dimension of a shape, `i` a compile-time integer counted from the
    /// end when negative (Python's tuple index).
    fn shape_item(&mut self, dims: &[Dim], indices: &[Expr], span: Span) -> Value {
        let [i_e] = indices else {
            return self.error(span, "a shape is indexed by one integer: `x.shape[1]`");
        };
        let Some(i) = self.int(i_e, "a shape's index") else {
            return Value::Poison;
        };
        match nki_lang::rules::normalize_axis("shape", i, dims.len()) {
            Ok(k) => dims
                .get(usize::try_from(k).unwrap_or(usize::MAX))
                .map_or(Value::Poison, |&d| super::expr::dim_value(d)),
            Err(_) => self.error(
                i_e.span(),
                format!(
                    "the shape has {} dimensions: index {i} is out of range (Python's IndexError)",
                    dims.len()
                ),
            ),
        }
    }

    pub(super) fn index(&mut self, base: Value, indices: &[Expr], span: Span) -> Value {
        // A tile with block axes is indexed block first; its blocks stand for a tile of their
        // own (`base` becomes the whole tile, indexed in its stored axis order).
        let (base, blocks) = match base {
            Value::Shape(dims) => return self.shape_item(&dims, indices, span),
            Value::Blocks { view, axes } => (Value::Tile(view), usize::from(axes)),
            other => (other, 0),
        };
        let dims: Vec<Option<u64>> = match &base {
            Value::Poison => return Value::Poison,
            Value::Tensor(h) => match h.reshape {
                Some(r) => &self.buf.reshapes[r].shape,
                None => &self.tensors[h.tensor].shape,
            }
            .iter()
            .skip(h.prefix.len())
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n),
                Dim::Sym(_) => None,
            })
            .collect(),
            // A view is indexed within its own dimensions (NKI's view passed to a helper and
            // indexed there).
            Value::Tile(v) => v.shape.dims().iter().map(|&d| Some(d as u64)).collect(),
            other => return self.error(span, format!("cannot index {}", other.describe())),
        };
        let full = indices.len() == 1
            && matches!(
                indices[0],
                Expr::Range {
                    start: None,
                    end: None,
                    ..
                }
            );
        let order: Vec<Option<&Expr>> = if blocks > 0 {
            let Value::Tile(v) = &base else {
                unreachable!("a block tile is a tile")
            };
            let name = self.buf.tiles[v.tile as usize].name.clone();
            let Some(&info) = self.tile_blocks.get(&v.tile) else {
                unreachable!("a block tile is registered")
            };
            match self.block_order(&name, info, dims.len(), indices, span) {
                Some(o) => o,
                None => return Value::Poison,
            }
        } else {
            if !full && indices.len() > dims.len() {
                return self.error(
                    span,
                    format!(
                        "{} indices for a tensor of rank {}",
                        indices.len(),
                        dims.len()
                    ),
                );
            }
            (0..dims.len())
                .map(|axis| if full { None } else { indices.get(axis) })
                .collect()
        };
        let mut sels = Vec::new();
        for (axis, &dim) in dims.iter().enumerate() {
            let e = order[axis];
            // Integers on the leading axes only (`q[b, h]`): the tensor of the remaining axes,
            // indexed later (`q[b, h][[i_p, i_f]]`) or whole where it is an operand.
            if let Value::Tensor(h) = &base
                && e.is_none()
                && !full
                && !sels.is_empty()
                && sels.iter().all(|s| matches!(s, Sel::Scalar(_)))
            {
                let mut h = h.clone();
                h.prefix.extend(sels.iter().filter_map(|s| match s {
                    Sel::Scalar(a) => Some(*a),
                    Sel::Slice { .. } | Sel::Advanced(_) | Sel::Indirect(_) => None,
                }));
                return Value::Tensor(h);
            }
            match self.select(e, dim, span) {
                Some(s) => sels.push(s),
                None => return Value::Poison,
            }
        }
        for axis in 1..=blocks {
            if !matches!(sels[axis], Sel::Scalar(_)) {
                self.block_index_error(order[axis], span);
                return Value::Poison;
            }
        }
        let indirect = match self.indirect_axis(&base, &mut sels, span) {
            Ok(i) => i,
            Err(()) => return Value::Poison,
        };
        let slices = sels.iter().any(|s| matches!(s, Sel::Slice { .. }));
        let advanced = sels.iter().any(|s| matches!(s, Sel::Advanced(_)));
        if slices && advanced {
            return self.error(span, "mixing basic tensor indexing (slices) and advanced tensor indexing (index grids) is not supported (err_unsupported_mixing_basic_advanced_tensor_indexing)");
        }
        // The grid: its shape, and each axis' index over it.
        let mut shape_dims: Vec<u32> = Vec::new();
        let mut axes: Vec<Idx> = Vec::new();
        if advanced {
            let mut sizes = [0u32; MAX_TILE_RANK];
            let mut rank = 2;
            for s in &sels {
                if let Sel::Advanced(i) = s {
                    for (j, size) in sizes.iter_mut().enumerate() {
                        if i.grid[j] != 0 || i.sizes[j] != 0 {
                            // j < MAX_TILE_RANK.
                            rank = rank.max(j.saturating_add(1));
                        }
                        match (*size, i.sizes[j]) {
                            (_, 0) => {}
                            (0, n) => *size = n,
                            (a, b) if a == b => {}
                            _ => {
                                return self.error(
                                    span,
                                    format!("index grids of different sizes on axis {j}"),
                                );
                            }
                        }
                    }
                }
            }
            shape_dims = (0..rank).map(|j| sizes[j].max(1)).collect();
            for s in sels {
                axes.push(match s {
                    Sel::Advanced(i) => i,
                    Sel::Scalar(a) => Idx::from_affine(a),
                    Sel::Slice { .. } => unreachable!("not mixed"),
                    Sel::Indirect(_) => unreachable!("replaced by indirect_axis"),
                });
            }
        } else {
            let mut g = 0;
            for s in sels {
                axes.push(match s {
                    Sel::Slice { start, size } => {
                        let mut i = Idx::from_affine(start);
                        if g >= MAX_TILE_RANK {
                            return self.error(
                                span,
                                format!("an access has at most {MAX_TILE_RANK} sliced axes"),
                            );
                        }
                        i.grid[g] = 1;
                        shape_dims.push(size);
                        // g < MAX_TILE_RANK, checked above.
                        g = g.saturating_add(1);
                        i
                    }
                    Sel::Scalar(a) => Idx::from_affine(a),
                    Sel::Advanced(_) | Sel::Indirect(_) => unreachable!("not mixed"),
                });
            }
            while shape_dims.len() < 2 {
                shape_dims.push(1);
            }
        }
        let Some(shape) = TileShape::new(&shape_dims) else {
            return self.error(span, "an access has at most 4 dimensions");
        };
        match base {
            Value::Tensor(h) => {
                let prefix = h.prefix.len();
                let mut axes: Vec<Idx> = h
                    .prefix
                    .iter()
                    .map(|&a| Idx::from_affine(a))
                    .chain(axes)
                    .collect();
                // The indirect axis' row is the index's value: no grid term of its own.
                let indirect = indirect.map(|(axis, view)| {
                    let axis = axis.saturating_add(prefix);
                    if let Some(a) = axes.get_mut(axis) {
                        *a = Idx::from_affine(Affine::ZERO);
                    }
                    (axis, view, nki_lang::IndirectMode::Rows)
                });
                Value::Access(Access {
                    tensor: h.tensor,
                    reshape: h.reshape,
                    axes,
                    shape,
                    indirect,
                    dtype: None,
                })
            }
            Value::Tile(v) => self.tile_view(v, &axes, shape, span),
            _ => unreachable!("checked above"),
        }
    }

    /// NKI's indirect indexing: a tile of indices on one axis of an HBM tensor
    /// (`data[idx[i_p, 0], i_f]`, `data[b, idx, i_f]`). The tile must be a `[P, 1]` column and
    /// stand for the grid's partition axis, the other axes affine in `arange` axes (not an
    /// `mgrid`) that leave the partition axis to it. Replaces the tile's selector by the
    /// partition axis of its size (the grid's shape) and returns the axis (among `sels`) and
    /// the tile; `Err` once the mistake is reported.
    fn indirect_axis(
        &mut self,
        base: &Value,
        sels: &mut [Sel],
        span: Span,
    ) -> Result<Option<(usize, TileView)>, ()> {
        let mut found = sels.iter().enumerate().filter_map(|(k, s)| match s {
            Sel::Indirect(v) => Some((k, *v)),
            Sel::Slice { .. } | Sel::Advanced(_) | Sel::Scalar(_) => None,
        });
        let Some((axis, view)) = found.next() else {
            return Ok(None);
        };
        let fail = |this: &mut Self, msg: &str| {
            this.error(span, msg);
            Err(())
        };
        if found.next().is_some() {
            return fail(
                self,
                "an access takes one tile of indices, on the partition axis (err_indirect_indices_free_dim)",
            );
        }
        if !matches!(base, Value::Tensor(_)) {
            return fail(
                self,
                "a tile indexed by the values of a tile (a copy with run-time offsets in SBUF) is not supported: load or store the rows from HBM with the indices (`load(t[idx, i_f])`), or use `tensor_copy_dynamic_src` (err_copy_dynamic_indirect_indices_not_natively_supported)",
            );
        }
        if view.shape.rank() != 2 || view.shape.free_elems() != 1 {
            let msg = format!(
                "a tile of indirect indices is a [P, 1] column, one row index per partition (`idx[i_p, 0]`); got {} (err_indirect_indices_free_dim)",
                view.shape
            );
            return fail(self, &msg);
        }
        for s in sels.iter() {
            let Sel::Advanced(i) = s else { continue };
            if i.grid[0] != 0 {
                return fail(
                    self,
                    "indirect indices are only supported on the partition dimension: another axis of this access indexes the partitions (err_indirect_indices_free_dim)",
                );
            }
            if i.dense.iter().any(|&d| d != 0) {
                return fail(
                    self,
                    "the other indices of an access with indirect indices must be `arange` axes, not `mgrid` components (err_indirect_indices_free_dim)",
                );
            }
        }
        sels[axis] = Sel::Advanced(Idx::grid_axis(0, 0, view.shape.partitions()));
        Ok(Some((axis, view)))
    }

    fn select(&mut self, e: Option<&Expr>, dim: Option<u64>, span: Span) -> Option<Sel> {
        let whole = |this: &mut Self, at: Span| match dim {
            Some(n) => match u32::try_from(n) {
                Ok(size) => Some(Sel::Slice {
                    start: Affine::ZERO,
                    size,
                }),
                Err(_) => {
                    this.error(at, TOO_LONG);
                    None
                }
            },
            None => {
                this.error(at, "a slice over a symbolic dimension needs explicit bounds (`a..b`): its size must be known at compile time");
                None
            }
        };
        let Some(e) = e else { return whole(self, span) };
        match e {
            Expr::Range { start, end, span } => {
                let s = match start {
                    Some(s) => {
                        let v = self.eval(s);
                        self.basic(v, s.span())?
                    }
                    None => Affine::ZERO,
                };
                match end {
                    None if start.is_none() => whole(self, *span),
                    None => match (dim, s.is_constant()) {
                        (Some(n), true) if s.constant >= 0 && s.constant.unsigned_abs() < n => {
                            match u32::try_from(n.saturating_sub(s.constant.unsigned_abs())) {
                                Ok(size) => Some(Sel::Slice { start: s, size }),
                                Err(_) => {
                                    self.error(*span, TOO_LONG);
                                    None
                                }
                            }
                        }
                        _ => {
                            self.error(*span, "an open-ended slice needs a constant start and a literal dimension");
                            None
                        }
                    },
                    Some(end_e) => {
                        let v = self.eval(end_e);
                        let end = self.basic(v, end_e.span())?;
                        let size = s.checked_scale(-1).and_then(|m| end.checked_add(&m));
                        let Some(size) = size else {
                            self.error(*span, "integer overflow in an index expression");
                            return None;
                        };
                        if !size.is_constant() || size.constant <= 0 {
                            self.error(*span, "a slice's size (`end - start`) must be a positive compile-time constant");
                            return None;
                        }
                        let Ok(size) = u32::try_from(size.constant) else {
                            self.error(*span, TOO_LONG);
                            return None;
                        };
                        Some(Sel::Slice { start: s, size })
                    }
                }
            }
            other => {
                match self.eval(other) {
                    // `ds(start, size)`, written in the index or bound to a name before.
                    Value::Slice { start, size } => Some(Sel::Slice { start, size }),
                    Value::Int(n) => Some(Sel::Scalar(Affine::constant(n))),
                    Value::Index(i) if i.is_advanced() => Some(Sel::Advanced(i)),
                    Value::Index(i) => Some(Sel::Scalar(i.lin)),
                    Value::Tile(v) => Some(Sel::Indirect(v)),
                    Value::Tensor(_) | Value::Access(_) => {
                        self.error(other.span(), "indirect indices are read from SBUF: load them into a [P, 1] int32 tile first (`let idx = load(idx_tensor[..]);`, then `data[[idx, i_f]]`)");
                        None
                    }
                    Value::Poison => None,
                    v => {
                        self.error(other.span(), format!("an index is a slice, an integer or an affine index expression, not {}", v.describe()));
                        None
                    }
                }
            }
        }
    }

    /// `ds(start, size)`: `start..start + size`, a value that indexes an axis (in the index
    /// itself or through a name bound to it).
    pub(super) fn ds(&mut self, args: &[crate::parse::model::Arg], span: Span) -> Value {
        let Some(a) = self.args("ds", args, &["start", "size"], 2, span) else {
            return Value::Poison;
        };
        let (start_e, size_e) = (a[0].expect("required"), a[1].expect("required"));
        let v = self.eval(start_e);
        let Some(start) = self.basic(v, start_e.span()) else {
            return Value::Poison;
        };
        let Some(size) = self.int(size_e, "the size of `ds`") else {
            return Value::Poison;
        };
        if size <= 0 {
            return self.error(size_e.span(), "a slice's size must be positive");
        }
        let Ok(size) = u32::try_from(size) else {
            return self.error(size_e.span(), TOO_LONG);
        };
        Value::Slice { start, size }
    }

    /// A loop-affine value without grid terms.
    pub(super) fn basic(&mut self, v: Value, span: Span) -> Option<Affine> {
        let i = self.as_index(v, span)?;
        if i.is_advanced() {
            self.error(span, "a slice bound cannot use an index grid");
            return None;
        }
        Some(i.lin)
    }

    /// A view of a tile from one index per tile axis.
    /// The range of an index over the grid `shape` and every iteration of the enclosing loops,
    /// when those are known at compile time (no program id, no symbolic trip count).
    fn index_range(&self, idx: &Idx, shape: &TileShape) -> Option<(i128, i128)> {
        let mut lo = i128::from(idx.lin.constant);
        let mut hi = lo;
        // |c| ≤ 2^63 and n − 1 < 2^64: the product fits i128; the sums saturate outward, so
        // that an absurd range fails the bounds it is checked against.
        let mut add = |c: i64, n: u64| {
            let span = i128::from(c).saturating_mul(i128::from(n.saturating_sub(1)));
            lo = lo.saturating_add(span.min(0));
            hi = hi.saturating_add(span.max(0));
        };
        for (&g, &n) in idx.grid.iter().zip(shape.dims()) {
            add(g, u64::from(n));
        }
        for (v, &c) in idx.lin.coef.iter().enumerate().filter(|(_, c)| **c != 0) {
            let d = v.checked_sub(nki_lang::MAX_PIDS)?;
            match self.loops.get(d)? {
                nki_lang::Extent::Fixed(0) => return None,
                nki_lang::Extent::Fixed(n) => add(c, *n),
                nki_lang::Extent::Sym { .. } => return None,
            }
        }
        Some((lo, hi))
    }

    /// The view of `base` (a whole tile, or a view of one) that `axes` index over a grid of
    /// `shape`.
    pub(super) fn tile_view(
        &mut self,
        base: TileView,
        axes: &[Idx],
        shape: TileShape,
        span: Span,
    ) -> Value {
        let tile = base.tile;
        let whole = base == TileView::whole(tile, &self.buf.tiles[tile as usize].shape);
        let p = &axes[0];
        // The start: a compile-time integer, or set by loop variables (not program ids).
        let pids = p.lin.coef[..nki_lang::MAX_PIDS].iter().any(|&c| c != 0);
        let part_ok =
            !pids && p.lin.constant >= 0 && p.grid[0] == 1 && p.grid[1..].iter().all(|&g| g == 0);
        if !part_ok {
            let v = nki_lang::RuleViolation::PartitionStride;
            return self.error(span, crate::errors::message(&v));
        }
        let part_var = nki_lang::Affine {
            constant: 0,
            coef: p.lin.coef,
        };
        let Some(part_var) = base.part_var.checked_add(&part_var) else {
            return self.error(span, "integer overflow in an index expression");
        };
        if part_var != nki_lang::Affine::ZERO {
            let start = i64::from(base.part_start).saturating_add(p.lin.constant);
            let aligned =
                nki_lang::rules::check_partition_start(shape.dims()[0], start, &part_var.coef);
            if let Err(v) = aligned {
                return self.error(span, crate::errors::message(&v));
            }
            // Inside the view for every loop value (the program checks the tile's).
            let within = i128::from(base.shape.dims()[0]);
            match self.index_range(p, &shape) {
                Some((lo, hi)) if lo >= 0 && (whole || hi < within) => {}
                Some((lo, hi)) => {
                    return self.error(
                        span,
                        format!(
                            "out-of-bound access for a view of tile `{}` on dimension 0: partitions [{lo}, {hi}] exceed the view's {within} (err_tensor_access_out_of_bound)",
                            self.buf.tiles[tile as usize].name,
                        ),
                    );
                }
                None => {
                    let v = nki_lang::RuleViolation::PartitionStride;
                    return self.error(span, crate::errors::message(&v));
                }
            }
        }
        // A view's partitions are checked here (the program checks the tile's).
        let parts = i128::from(p.lin.constant).saturating_add(i128::from(shape.dims()[0]));
        if !whole && part_var == nki_lang::Affine::ZERO && parts > i128::from(base.shape.dims()[0])
        {
            return self.error(
                span,
                format!(
                    "out-of-bound access for a view of tile `{}` on dimension 0: partitions [{}, {}) exceed the view's {} (err_tensor_access_out_of_bound)",
                    self.buf.tiles[tile as usize].name,
                    p.lin.constant,
                    parts,
                    base.shape.dims()[0]
                ),
            );
        }
        let free = base.shape.free();
        // The base's strides: row-major for a whole tile (their product is the tile's free
        // size, which a tile shape keeps far below i64::MAX).
        let row = &base.strides[..free.len()];
        let mut offset = base.offset;
        let mut strides = [0i64; MAX_TILE_RANK - 1];
        for (a, idx) in axes[1..].iter().enumerate() {
            if idx.grid[0] != 0 {
                return self.error(span, "the partition axis of an index grid can only index a tile's partition dimension");
            }
            // Each free axis of a tile with several, and of a view, stays inside its own
            // dimension (a whole tile's flattened free range is checked with the program).
            let info = self.tile_blocks.get(&tile).copied().filter(|_| whole);
            // A block axis a symbolic dimension sizes is checked at launch.
            let symbolic = info.is_some_and(|i| i.symbolic.is_some() && a == 0);
            if (free.len() > 1 || !whole)
                && !symbolic
                && let Some((lo, hi)) = self.index_range(idx, &shape)
                && (lo < 0 || hi >= i128::from(free[a]))
            {
                let name = self.buf.tiles[tile as usize].name.clone();
                if let Some(info) = info
                    && a < usize::from(info.axes)
                {
                    return self.error(
                        span,
                        format!(
                            "out-of-bound block index for tile `{name}` on block axis {}: index range [{lo}, {hi}] exceeds its {} blocks (err_tensor_access_out_of_bound)",
                            info.written(a),
                            free[a]
                        ),
                    );
                }
                // NKI numbers the axes as written: the block axes, the partition axis, then
                // the free axes.
                let what = if whole {
                    format!("tile `{name}`")
                } else {
                    format!("a view of tile `{name}`")
                };
                return self.error(
                    span,
                    format!(
                        "out-of-bound access for {what} on dimension {}: index range [{lo}, {hi}] exceeds dimension size of {} (err_tensor_access_out_of_bound)",
                        a.saturating_add(1),
                        free[a]
                    ),
                );
            }
            let term = idx.lin.checked_scale(row[a]);
            let Some(next) = term.and_then(|t| offset.checked_add(&t)) else {
                return self.error(span, "integer overflow in an index expression");
            };
            offset = next;
            for (j, stride) in strides.iter_mut().enumerate() {
                let s = idx.grid[j.saturating_add(1)]
                    .checked_mul(row[a])
                    .and_then(|t| stride.checked_add(t));
                let Some(s) = s else {
                    return self.error(span, "integer overflow in an index expression");
                };
                *stride = s;
            }
        }
        let start = i64::from(base.part_start).checked_add(p.lin.constant);
        let Some(Ok(part_start)) = start.map(u32::try_from) else {
            return self.error(
                span,
                crate::errors::message(&nki_lang::RuleViolation::PartitionStride),
            );
        };
        Value::Tile(TileView {
            tile,
            part_start,
            shape,
            offset,
            strides,
            part_var,
            dtype: base.dtype,
        })
    }
}
