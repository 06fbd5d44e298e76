//! Index bounds: every view inside its tile and every HBM access inside its tensor in every
//! iteration of the enclosing loops, and every value the executor computes from the index
//! variables within ±[`crate::constraint::MAX_INDEX`]. Each is decided now when the trip counts
//! it depends on are literals, else becomes a launch constraint.

use super::{Checker, Site};
use crate::affine::{MAX_PIDS, MAX_VARS};
use crate::constraint::{
    Bounded, Computed, Constraint, implied_by_divisibility, in_range, index_range,
};
use crate::ir::ops::Axes;
use crate::ir::{AxisIndex, HbmAccess, Mask, MaskTerm, TileView};
use crate::rules::{self, RuleViolation};
use crate::shape::{Dim, Extent, MAX_SYMBOLS, TileShape};

/// An index `start + Σ grid[j]·t_j` over a grid, with the mask's restriction when one applies.
pub(super) struct Index<'a> {
    pub(super) start: &'a crate::affine::Affine,
    pub(super) grid: &'a [i64],
    pub(super) shape: &'a TileShape,
}

impl Index<'_> {
    /// The range in `i128`, which no grid of `i64` coefficients and `u32` sizes overflows.
    fn range128(&self) -> (i128, i128) {
        let c = i128::from(self.start.constant);
        let (mut lo, mut hi) = (c, c);
        for (&g, &size) in self.grid.iter().zip(self.shape.dims()) {
            let span = i128::from(g).saturating_mul(i128::from(size.saturating_sub(1)));
            lo = lo.saturating_add(span.min(0));
            hi = hi.saturating_add(span.max(0));
        }
        (lo, hi)
    }

    /// The index's range `[lo, hi]` over the grid at iteration 0 of every loop (`None` when the
    /// arithmetic overflows).
    fn range(&self) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (self.start.constant, self.start.constant);
        for (&g, &size) in self.grid.iter().zip(self.shape.dims()) {
            let span = g.checked_mul(i64::from(size.saturating_sub(1)))?;
            lo = lo.checked_add(span.min(0))?;
            hi = hi.checked_add(span.max(0))?;
        }
        Some((lo, hi))
    }
}

impl Checker<'_> {
    /// A view whose first partition loop variables set: aligned as the engines need
    /// ([`rules::check_partition_start`]) and inside its tile for every value of loops of
    /// compile-time trip counts.
    fn check_part_var(&mut self, site: Site, v: &TileView, loops: &[Extent]) -> bool {
        let tile = &self.p.tiles[v.tile as usize];
        let parts = v.shape.partitions();
        let start = crate::affine::Affine {
            constant: i64::from(v.part_start),
            coef: v.part_var.coef,
        };
        let aligned = rules::check_partition_start(parts, start.constant, &start.coef);
        if !self.report(site, aligned) {
            return false;
        }
        let mut grid = [0i64; crate::shape::MAX_TILE_RANK];
        grid[0] = 1;
        let index = Index {
            start: &start,
            grid: &grid,
            shape: &v.shape,
        };
        let Some((lo, hi)) = index.range() else {
            return self.report(site, Err(RuleViolation::PartitionStride));
        };
        let Some((ls, nvars)) = self.extents(site, &start.coef, loops) else {
            return false;
        };
        let pids = start.coef[..MAX_PIDS].iter().any(|&c| c != 0);
        match static_range(lo, hi, &start.coef, &ls[..nvars]) {
            Some((lo, hi)) if !pids => {
                let (name, n) = (tile.name.clone(), u64::from(tile.shape.partitions()));
                self.report(site, rules::check_bounds(&name, 0, clamp(lo), clamp(hi), n))
            }
            _ => self.report(site, Err(RuleViolation::PartitionStride)),
        }
    }

    /// The symbol of `num_programs(axis)`, which a program using `program_id(axis)` declares.
    fn grid_size_symbol(&self, axis: usize) -> Option<u8> {
        let name = crate::grid::GRID_SIZE_SYMBOLS.get(axis)?;
        let s = self.p.symbols.iter().position(|s| s == name)?;
        u8::try_from(s).ok()
    }

    /// A view lies inside its tile for every iteration of the enclosing loops.
    pub(super) fn check_view(&mut self, site: Site, v: &TileView, loops: &[Extent]) -> bool {
        let tile = &self.p.tiles[v.tile as usize];
        if !self.report(site, rules::check_tile_shape(&v.shape)) {
            return false;
        }
        // u32 + u32 fits in i64.
        let part_end = i64::from(v.part_start).saturating_add(i64::from(v.shape.partitions()));
        if v.part_var != crate::affine::Affine::ZERO {
            if !self.check_part_var(site, v, loops) {
                return false;
            }
        } else if part_end > i64::from(tile.shape.partitions()) {
            let r = rules::check_bounds(
                &tile.name,
                0,
                i64::from(v.part_start),
                part_end.saturating_sub(1),
                u64::from(tile.shape.partitions()),
            );
            return self.report(site, r);
        }
        let mut free = [0i64; crate::shape::MAX_TILE_RANK];
        free[1..].copy_from_slice(&v.strides);
        let index = Index {
            start: &v.offset,
            grid: &free,
            shape: &v.shape,
        };
        // A view of one block of a tile whose blocks a symbolic dimension counts: its block
        // index is checked against the launch's count (the count against the capacity by
        // `Constraint::Blocks`), which bounds its free elements too.
        if let Some(Extent::Sym { sym, add, div }) = tile.blocks
            && v.dtype.is_none()
            && let Some(ok) = self.check_blocks(site, v, &index, (sym, add, div), loops)
        {
            return ok;
        }
        // A view of the tile's bytes as another dtype stays within each partition's bytes.
        let size = match v.dtype {
            None => Dim::Fixed(tile.shape.free_elems()),
            Some(d) => Dim::Fixed(
                tile.shape
                    .free_elems()
                    .saturating_mul(u64::from(tile.dtype.size()))
                    .checked_div(u64::from(d.size()))
                    .unwrap_or(0),
            ),
        };
        let target = Bounded::TileFree { tile: v.tile };
        self.bound(site, &tile.name, 1, target, size, &index, false, loops)
    }

    /// The block index of a view of one block of a tile whose blocks symbol `sym` counts
    /// (`(S + add) / div` blocks of `E` elements, the first free axis) stays below the count
    /// at launch: `k < (S + add) / div` exactly when `div·k + div − 1 − add < S`, a bound on
    /// `S` like an HBM axis'. Implied when the index is the variable of a loop over exactly
    /// the tile's blocks. `None` when the view is not within one block at every iteration
    /// (its loop coefficients are not whole blocks, or it spans two), or `add ≥ div`: the
    /// bound on the tile's free elements then applies instead.
    fn check_blocks(
        &mut self,
        site: Site,
        v: &TileView,
        index: &Index<'_>,
        (sym, add, div): (u8, u64, u64),
        loops: &[Extent],
    ) -> Option<bool> {
        let tile = &self.p.tiles[v.tile as usize];
        let block: i64 = tile
            .shape
            .free()
            .get(1..)
            .unwrap_or(&[])
            .iter()
            .fold(1i64, |n, &d| n.saturating_mul(i64::from(d)));
        let (Ok(div_i), Ok(add_i)) = (i64::try_from(div), i64::try_from(add)) else {
            return None;
        };
        if add_i >= div_i || block <= 0 {
            return None;
        }
        let (lo, hi) = index.range()?;
        let coef = index.start.coef;
        let one_block = lo >= 0 && lo.checked_div(block)? == hi.checked_div(block)?;
        if !one_block || coef.iter().any(|&c| c.checked_rem(block) != Some(0)) {
            return None;
        }
        // A loop over exactly the tile's blocks, indexing block `k`.
        let count = Extent::Sym { sym, add, div };
        let mut vars = coef.iter().enumerate().filter(|(_, c)| **c != 0);
        if let (Some((var, &c)), None) = (vars.next(), vars.next())
            && c == block
            && lo.checked_div(block) == Some(0)
            && var
                .checked_sub(MAX_PIDS)
                .and_then(|d| loops.get(d))
                .is_some_and(|&trip| trip == count)
        {
            return Some(true);
        }
        // The shift `div − 1 − add` is in [0, div) here.
        let shift = div_i.saturating_sub(1).saturating_sub(add_i);
        let scaled = |x: i64| {
            x.checked_div_euclid(block)
                .and_then(|k| k.checked_mul(div_i))
                .and_then(|k| k.checked_add(shift))
        };
        let mut start = crate::affine::Affine::ZERO;
        let (Some(lo), Some(hi)) = (scaled(lo), scaled(hi)) else {
            return Some(self.report(
                site,
                Err(RuleViolation::IndexOverflow {
                    tensor: tile.name.clone(),
                    axis: 1,
                }),
            ));
        };
        for (s, &c) in start.coef.iter_mut().zip(&coef) {
            match c.checked_div(block).and_then(|k| k.checked_mul(div_i)) {
                Some(k) => *s = k,
                None => {
                    return Some(self.report(
                        site,
                        Err(RuleViolation::IndexOverflow {
                            tensor: tile.name.clone(),
                            axis: 1,
                        }),
                    ));
                }
            }
        }
        start.constant = lo;
        // A one-axis grid of two points spans `[lo, hi]`.
        let grid = [hi.saturating_sub(lo)];
        let two = TileShape::new(&[2])?;
        let blocks = Index {
            start: &start,
            grid: &grid,
            shape: &two,
        };
        let target = Bounded::TileBlocks {
            tile: v.tile,
            div,
            add,
        };
        let name = tile.name.clone();
        Some(self.bound(site, &name, 1, target, Dim::Sym(sym), &blocks, false, loops))
    }

    pub(super) fn check_access(
        &mut self,
        site: Site,
        a: &HbmAccess,
        mask: Option<(&Mask, Axes)>,
        loops: &[Extent],
    ) -> bool {
        let t = &self.p.tensors[a.tensor as usize];
        // A reshape's axes are bounded by its own dimensions (the structure check matched them
        // to the access's rank).
        let reshape = a
            .reshape
            .and_then(|r| Some((r, self.p.reshapes.get(usize::from(r))?)));
        let (name, dims) = match reshape {
            Some((_, r)) => (&r.name, &r.shape),
            None => (&t.name, &t.shape),
        };
        for (axis, ix) in a.axes().iter().enumerate() {
            let index = Index {
                start: &ix.start,
                grid: &ix.grid,
                shape: &a.shape,
            };
            // axis < MAX_TENSOR_RANK
            let axis8 = u8::try_from(axis).unwrap_or(u8::MAX);
            let target = match reshape {
                Some((reshape, _)) => Bounded::Reshape {
                    reshape,
                    axis: axis8,
                },
                None => Bounded::Tensor {
                    tensor: a.tensor,
                    axis: axis8,
                },
            };
            let size = dims[axis];
            let masked =
                mask.is_some_and(|(m, axes)| mask_bounds_above(m, axes, ix, &a.shape, size));
            if !self.bound(site, name, axis, target, size, &index, masked, loops) {
                return false;
            }
            // What the mask cuts off is still computed: it must stay within range.
            if masked {
                let what = match reshape {
                    Some((reshape, _)) => Computed::MaskedReshapeIndex {
                        reshape,
                        axis: axis8,
                    },
                    None => Computed::MaskedIndex {
                        tensor: a.tensor,
                        axis: axis8,
                    },
                };
                let label = format!(
                    "the index of tensor `{name}` on dimension {axis}, where the mask cuts it off,"
                );
                if !self.fits(site, what, &label, &index, loops) {
                    return false;
                }
            }
        }
        true
    }

    /// An index range inside a dimension: decided now when static, else a launch constraint.
    /// With `masked`, the instruction's mask keeps the index below the size, and only the lower
    /// bound is checked.
    #[allow(clippy::too_many_arguments)]
    fn bound(
        &mut self,
        site: Site,
        name: &str,
        axis: usize,
        target: Bounded,
        size: Dim,
        index: &Index<'_>,
        masked: bool,
        loops: &[Extent],
    ) -> bool {
        let Some((lo, hi)) = index.range() else {
            let v = RuleViolation::IndexOverflow {
                tensor: name.to_string(),
                axis,
            };
            return self.report(site, Err(v));
        };
        let coef = index.start.coef;
        let Some((ls, nvars)) = self.extents(site, &coef, loops) else {
            return false;
        };
        let vars = &ls[..nvars];
        if let (Dim::Fixed(n), Some((lo, hi))) = (size, static_range(lo, hi, &coef, vars)) {
            let (lo, hi) = (clamp(lo), clamp(hi));
            let hi = if masked { lo.max(0) } else { hi };
            return self.report(site, rules::check_bounds(name, axis, lo, hi, n.max(1)));
        }
        if !masked && implied_by_divisibility(size, lo, hi, &coef, vars) {
            return true;
        }
        if masked && lo >= 0 && coef[..vars.len()].iter().all(|&c| c >= 0) {
            return true;
        }
        self.constrain(Constraint::InBounds {
            target,
            size,
            lo,
            hi,
            coef,
            loops: ls,
            depth: depth8(loops),
            upper: !masked,
        });
        true
    }

    /// How many values each index variable takes: the program ids that `coef` uses (the grid's
    /// size along their axis), then the enclosing loops; and how many variables are in use.
    /// `None` after reporting a program id whose grid symbol is missing.
    fn extents(
        &mut self,
        site: Site,
        coef: &[i64; MAX_VARS],
        loops: &[Extent],
    ) -> Option<([Extent; MAX_VARS], usize)> {
        let mut ls = [Extent::Fixed(1); MAX_VARS];
        for (a, l) in ls.iter_mut().enumerate().take(MAX_PIDS) {
            if coef[a] != 0 {
                *l = match self.grid_size_symbol(a) {
                    Some(sym) => Extent::Sym {
                        sym,
                        add: 0,
                        div: 1,
                    },
                    None => {
                        self.malformed(site, "a program id without its grid symbol");
                        return None;
                    }
                };
            }
        }
        // The structure check keeps loops at most MAX_LOOP_DEPTH deep.
        let n = MAX_PIDS.saturating_add(loops.len()).min(MAX_VARS);
        for (l, e) in ls[MAX_PIDS..n].iter_mut().zip(loops) {
            *l = *e;
        }
        Some((ls, n))
    }

    /// A value the executor computes from the index variables (`label` names it in an error)
    /// stays within ±[`crate::constraint::MAX_INDEX`]: decided now when its loops' trip counts are literals,
    /// else a launch constraint.
    pub(super) fn fits(
        &mut self,
        site: Site,
        what: Computed,
        label: &str,
        index: &Index<'_>,
        loops: &[Extent],
    ) -> bool {
        let refuse = |this: &mut Self, lo: i128, hi: i128| {
            let v = RuleViolation::IndexRange {
                what: label.to_string(),
                lo: clamp(lo),
                hi: clamp(hi),
            };
            this.report(site, Err(v))
        };
        let (lo, hi) = index.range128();
        if !in_range(lo, hi) {
            return refuse(self, lo, hi);
        }
        // Within ±2^62.
        let (lo, hi) = (clamp(lo), clamp(hi));
        let coef = index.start.coef;
        let Some((ls, nvars)) = self.extents(site, &coef, loops) else {
            return false;
        };
        let vars = &ls[..nvars];
        if let Some((lo, hi)) = static_range(lo, hi, &coef, vars) {
            return in_range(lo, hi) || refuse(self, lo, hi);
        }
        self.constrain(Constraint::InRange {
            what,
            lo,
            hi,
            coef,
            loops: ls,
            depth: depth8(loops),
        });
        true
    }
}

/// A 1-partition shape: the grid of a value without grid terms.
pub(super) const UNIT: TileShape = match TileShape::new(&[1]) {
    Some(s) => s,
    None => panic!("a rank-1 shape"),
};

/// The loop depth as the `u8` a constraint holds (the structure check keeps it at most 8).
fn depth8(loops: &[Extent]) -> u8 {
    u8::try_from(loops.len()).unwrap_or(u8::MAX)
}

/// The range `[lo, hi] + Σ coef·(n − 1)` over the index variables `vars` when every variable
/// in use takes a literal number of values (a loop of none counts as one: its body is still
/// checked), else `None`.
fn static_range(lo: i64, hi: i64, coef: &[i64; MAX_VARS], vars: &[Extent]) -> Option<(i128, i128)> {
    let fixed = vars
        .iter()
        .zip(coef)
        .map(|(e, &c)| match (c, e.fixed()) {
            (0, _) => Some(Extent::Fixed(1)),
            (_, Some(n)) => Some(Extent::Fixed(n.max(1))),
            (_, None) => None,
        })
        .collect::<Option<Vec<Extent>>>()?;
    index_range(lo, hi, coef, &fixed, &[0; MAX_SYMBOLS])
}

fn clamp(x: i128) -> i64 {
    i64::try_from(x.clamp(i128::from(i64::MIN), i128::from(i64::MAX))).unwrap_or(0)
}

/// Whether the loop-only mask term `t` (`L + k0 < 0`, `L` affine in the loop values and program
/// ids: the instruction runs only in the iterations where it holds) keeps the access index `ix`
/// below the fixed dimension `size`: the index's own loop part is `L` (`ix = L + k1 + its grid
/// terms`), `L` is a multiple of the gcd `G` of its coefficients, so `L ≤ G·⌊(−k0 − 1) / G⌋`,
/// and the index's largest value is that plus `k1` and its grid terms' largest values
/// (`allocated_fused_rms_norm_qkv` loads row tiles `(2i + g)·128 + i_p` under `(2i + g)·128 <
/// seqlen`, seqlen a multiple of 128).
fn loop_term_bounds_above(t: &MaskTerm, ix: &AxisIndex, shape: &TileShape, size: Dim) -> bool {
    let (None, Dim::Fixed(n)) = (t.sym, size) else {
        return false;
    };
    if t.offset.coef != ix.start.coef {
        return false;
    }
    let g = t
        .offset
        .coef
        .iter()
        .fold(0u64, |g, &c| gcd(g, c.unsigned_abs()));
    let Ok(g) = i64::try_from(g) else {
        return false;
    };
    if g == 0 {
        return false;
    }
    let top = t
        .offset
        .constant
        .checked_neg()
        .and_then(|k| k.checked_sub(1))
        .map(|k| k.div_euclid(g))
        .and_then(|q| q.checked_mul(g));
    let others = ix
        .grid
        .iter()
        .zip(shape.dims())
        .filter(|&(&c, _)| c > 0)
        .try_fold(0i64, |acc, (&c, &d)| {
            acc.checked_add(c.checked_mul(i64::from(d).saturating_sub(1))?)
        });
    let max = top
        .zip(others)
        .and_then(|(l, o)| l.checked_add(ix.start.constant)?.checked_add(o));
    max.is_some_and(|m| m < 0 || u64::try_from(m).is_ok_and(|m| m < n))
}

/// The greatest common divisor of `a` and `b` (`b` when `a` is 0).
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while let Some(r) = b.checked_rem(a) {
        (a, b) = (r, a);
    }
    b
}

/// Whether some term of `mask` keeps the access index `ix` below the dimension `size` for
/// every element it lets through: the term bounds one grid expression of the index (`k * 128 +
/// i_p < n` for the index `k * 128 + i_p` of a dimension `n`), and the index's other grid terms
/// add at most their largest value over the access's grid `shape` (NKI's pooling kernels index
/// `i_h + i_kh` under `i_h < H - (K - 1)`). The access's axes follow the instruction's grid as
/// `axes` says.
fn mask_bounds_above(
    mask: &Mask,
    axes: Axes,
    ix: &AxisIndex,
    shape: &TileShape,
    size: Dim,
) -> bool {
    mask.terms().iter().any(|t| {
        if t.coef == 0 {
            return loop_term_bounds_above(t, ix, shape, size);
        }
        let Some(axis) = axes.of_grid_axis(t.axis as usize, shape.rank()) else {
            return false;
        };
        if ix.grid.get(axis).is_none_or(|&g| g == 0 || t.coef != g) {
            return false;
        }
        // index − (term's left side) = start − offset + the other grid terms must stay at or
        // below a constant c; then index < S + c, inside the dimension when S + c ≤ size.
        if t.offset.coef != ix.start.coef {
            return false;
        }
        let others = ix
            .grid
            .iter()
            .zip(shape.dims())
            .enumerate()
            .filter(|&(j, (&g, _))| j != axis && g > 0)
            .try_fold(0i64, |c, (_, (&g, &n))| {
                c.checked_add(g.checked_mul(i64::from(n).saturating_sub(1))?)
            });
        let c = ix
            .start
            .constant
            .checked_sub(t.offset.constant)
            .zip(others)
            .and_then(|(c, o)| c.checked_add(o));
        let Some(c) = c else {
            return false;
        };
        match (t.sym, size) {
            (Some(s), Dim::Sym(d)) => s == d && c <= 0,
            (None, Dim::Fixed(n)) => c <= 0 || u64::try_from(c).is_ok_and(|c| c <= n),
            (None, Dim::Sym(_)) => c <= 0,
            (Some(_), Dim::Fixed(_)) => false,
        }
    })
}
