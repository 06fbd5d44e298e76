//! Conditions on symbolic dimensions that only launch can decide.
//!
//! Everything the compiler can decide it decides; what depends on a symbolic dimension
//! (`K / 128` must divide, `k * 128 + i_p` must stay inside `K`) becomes a [`Constraint`],
//! checked by [`check_constraints`] when a launch binds the symbols.

use core::fmt;

use crate::affine::{MAX_PIDS, MAX_VARS};
use crate::shape::{Dim, Extent, SymbolValues};

/// What a bounds constraint bounds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Bounded {
    /// Axis `axis` of HBM tensor `tensor`.
    Tensor {
        /// Tensor index.
        tensor: u8,
        /// Axis.
        axis: u8,
    },
    /// Axis `axis` of reshape `reshape` of an HBM tensor ([`crate::Program::reshapes`]).
    Reshape {
        /// Reshape index.
        reshape: u8,
        /// Axis.
        axis: u8,
    },
    /// The free elements of tile `tile`.
    TileFree {
        /// Tile index.
        tile: u16,
    },
    /// The first block axis of tile `tile`, whose `(S + add) / div` blocks a symbolic
    /// dimension `S` gives ([`crate::TileBuf::blocks`]). A block index `k` is below the count
    /// exactly when `div·k + div − 1 − add < S`: the constraint bounds that index by `S`.
    TileBlocks {
        /// Tile index.
        tile: u16,
        /// The count's divisor.
        div: u64,
        /// The count's addend.
        add: u64,
    },
}

/// A value the executor computes from the index variables that no dimension bounds (see
/// [`Constraint::InRange`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Computed {
    /// The index on axis `axis` of an access to HBM tensor `tensor`, where the instruction's
    /// mask cuts it off at the dimension's end.
    MaskedIndex {
        /// Tensor index.
        tensor: u8,
        /// Axis.
        axis: u8,
    },
    /// [`Computed::MaskedIndex`] on axis `axis` of reshape `reshape` of an HBM tensor.
    MaskedReshapeIndex {
        /// Reshape index.
        reshape: u8,
        /// Axis.
        axis: u8,
    },
    /// The bound of a mask condition (mask `mask` of the program's pool).
    MaskBound {
        /// Mask index.
        mask: u16,
    },
    /// An `iota`'s values or an `affine_select` predicate's expression (expression `expr` of
    /// the program's pool).
    Expr {
        /// Expression index.
        expr: u16,
    },
}

/// A condition on the symbolic dimensions.
// Plain data emitted into `static`s by `#[kernel]`: no variant can be boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Constraint {
    /// `symbols[sym] % by == 0` (from a trip count `SYM / by`).
    Divisible {
        /// Symbol index.
        sym: u8,
        /// Divisor.
        by: u64,
    },
    /// An index stays inside a dimension for every program id and every iteration of its
    /// loops: `0 ≤ lo + Σ min(0, coef[v]·(n[v]−1))` and, when `upper`,
    /// `hi + Σ max(0, coef[v]·(n[v]−1)) < size`, over the index variables `v`: the program
    /// ids (`n` = the grid's size, `num_programs(axis)`), then the enclosing loops (`n` = the
    /// trip count). Vacuous when any enclosing loop has no iteration. `upper` is false when the
    /// instruction's mask keeps the index below `size`.
    InBounds {
        /// What is indexed.
        target: Bounded,
        /// Size of the indexed dimension.
        size: Dim,
        /// Smallest index at program ids 0 and loop iteration 0.
        lo: i64,
        /// Largest index at program ids 0 and loop iteration 0.
        hi: i64,
        /// Coefficient of each index variable ([`crate::Var`] order: program ids, then loops).
        coef: [i64; MAX_VARS],
        /// How many values each index variable takes (`loops[..MAX_PIDS + depth]`).
        loops: [Extent; MAX_VARS],
        /// Number of enclosing loops.
        depth: u8,
        /// Whether the upper bound is checked.
        upper: bool,
    },
    /// A value the executor computes stays within ±[`MAX_INDEX`] for every program id and
    /// every iteration of its loops: `−MAX_INDEX ≤ lo + Σ min(0, coef[v]·(n[v]−1))` and
    /// `hi + Σ max(0, coef[v]·(n[v]−1)) ≤ MAX_INDEX`, over the index variables as in
    /// [`Constraint::InBounds`]. Vacuous when any enclosing loop has no iteration.
    InRange {
        /// What the value is.
        what: Computed,
        /// Smallest value at program ids 0 and loop iteration 0.
        lo: i64,
        /// Largest value at program ids 0 and loop iteration 0.
        hi: i64,
        /// Coefficient of each index variable.
        coef: [i64; MAX_VARS],
        /// How many values each index variable takes (`loops[..MAX_PIDS + depth]`).
        loops: [Extent; MAX_VARS],
        /// Number of enclosing loops.
        depth: u8,
    },
    /// A tile's blocks sized by a symbolic dimension fit the capacity the compiler reserved
    /// for them: `count ≤ capacity` ([`crate::TileBuf::blocks`]).
    Blocks {
        /// Tile index.
        tile: u16,
        /// The number of blocks, known at launch.
        count: Extent,
        /// Most blocks the tile's place holds.
        capacity: u64,
    },
}

/// The index range `[lo, hi]` a bounds constraint reaches, or `None` if its access never runs.
/// `loops[v]` is how many values index variable `v` takes, `coef[v]` its coefficient.
/// Computed in `i128`, saturating: a range beyond `i128` (only absurd coefficients and trip
/// counts reach one) saturates outward, so that it fails every bound it is checked against.
pub fn index_range(
    lo: i64,
    hi: i64,
    coef: &[i64],
    loops: &[Extent],
    syms: &SymbolValues,
) -> Option<(i128, i128)> {
    let (mut lo, mut hi) = (i128::from(lo), i128::from(hi));
    for (&c, trip) in coef.iter().zip(loops) {
        let t = trip.eval(syms);
        if t == 0 {
            return None;
        }
        // |c| ≤ 2^63 and t − 1 < 2^64: the product fits i128; the sums saturate.
        let span = i128::from(c).saturating_mul(i128::from(t.saturating_sub(1)));
        lo = lo.saturating_add(span.min(0));
        hi = hi.saturating_add(span.max(0));
    }
    Some((lo, hi))
}

/// The largest magnitude of a value the executor computes from the index variables without
/// a bound of its own: a mask's bound, an `iota` value or `affine_select` expression, an HBM
/// index a mask cuts off. 2⁶² leaves room for the executor's sums and differences of two such
/// values in `i64`.
pub const MAX_INDEX: i64 = 1 << 62;

impl Constraint {
    /// Whether the symbols satisfy the constraint.
    pub fn holds(&self, syms: &SymbolValues) -> bool {
        match *self {
            Constraint::Divisible { sym, by } => syms[sym as usize].is_multiple_of(by),
            Constraint::InBounds {
                size,
                lo,
                hi,
                coef,
                loops,
                depth,
                upper,
                ..
            } => match index_range(lo, hi, &coef, vars(&loops, depth), syms) {
                None => true,
                Some((lo, hi)) => lo >= 0 && (!upper || hi < i128::from(size.eval(syms))),
            },
            Constraint::InRange {
                lo,
                hi,
                coef,
                loops,
                depth,
                ..
            } => match index_range(lo, hi, &coef, vars(&loops, depth), syms) {
                None => true,
                Some((lo, hi)) => in_range(lo, hi),
            },
            Constraint::Blocks {
                count, capacity, ..
            } => count.eval(syms) <= capacity,
        }
    }

    /// The constraint's index-variable coefficients and counts, for the variables in use (none
    /// for [`Constraint::Divisible`]).
    pub fn variables(&self) -> (&[i64], &[Extent]) {
        match self {
            Constraint::Divisible { .. } | Constraint::Blocks { .. } => (&[], &[]),
            Constraint::InBounds {
                coef, loops, depth, ..
            }
            | Constraint::InRange {
                coef, loops, depth, ..
            } => {
                let v = vars(loops, *depth);
                (&coef[..v.len()], v)
            }
        }
    }

    /// Formats the constraint with the program's names (of its symbols, tensors, reshapes
    /// and tiles).
    pub fn display<'a>(
        &'a self,
        symbols: &'a [&'a str],
        tensors: &'a [&'a str],
        reshapes: &'a [&'a str],
        tiles: &'a [&'a str],
    ) -> impl fmt::Display + 'a {
        DisplayConstraint {
            c: self,
            symbols,
            tensors,
            reshapes,
            tiles,
        }
    }
}

/// The index variables in use at loop depth `depth`: the program ids, then the loops.
fn vars(loops: &[Extent; MAX_VARS], depth: u8) -> &[Extent] {
    loops
        .get(..MAX_PIDS.saturating_add(usize::from(depth)))
        .unwrap_or(loops)
}

/// Whether a value range lies within ±[`MAX_INDEX`].
pub fn in_range(lo: i128, hi: i128) -> bool {
    lo >= i128::from(MAX_INDEX.wrapping_neg()) && hi <= i128::from(MAX_INDEX)
}

/// Whether an index range `[lo, hi] + coef·(trip − 1)` inside a dimension `S` follows from its
/// loop's own launch constraint `S % div == 0`: with one loop term whose coefficient is `div`
/// and trip count `S / div`, the largest index is `hi + S − div`, below `S` exactly when
/// `hi < div`.
pub fn implied_by_divisibility(
    size: Dim,
    lo: i64,
    hi: i64,
    coef: &[i64],
    loops: &[Extent],
) -> bool {
    let Dim::Sym(s) = size else { return false };
    let mut terms = loops.iter().enumerate().filter(|&(d, _)| coef[d] != 0);
    let (Some((d, &trip)), None) = (terms.next(), terms.next()) else {
        return false;
    };
    match trip {
        Extent::Sym { sym, add: 0, div } => {
            sym == s && i64::try_from(div).is_ok_and(|div| coef[d] == div && lo >= 0 && hi < div)
        }
        Extent::Sym { .. } | Extent::Fixed(_) => false,
    }
}

/// Checks every constraint; returns the first that fails.
#[inline]
pub fn check_constraints<'c>(
    constraints: &'c [Constraint],
    syms: &SymbolValues,
) -> Result<(), &'c Constraint> {
    match constraints.iter().find(|c| !c.holds(syms)) {
        Some(c) => Err(c),
        None => Ok(()),
    }
}

struct DisplayConstraint<'a> {
    c: &'a Constraint,
    symbols: &'a [&'a str],
    tensors: &'a [&'a str],
    reshapes: &'a [&'a str],
    tiles: &'a [&'a str],
}

impl DisplayConstraint<'_> {
    fn sym(&self, s: u8) -> &str {
        self.symbols.get(s as usize).copied().unwrap_or("?")
    }
}

impl DisplayConstraint<'_> {
    /// ` + c*(n - 1)` for each index variable in use.
    fn terms(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (coef, loops) = self.c.variables();
        for (&c, n) in coef.iter().zip(loops).filter(|(c, _)| **c != 0) {
            write!(f, " + {c}*({} - 1)", n.display(self.symbols))?;
        }
        Ok(())
    }
}

impl fmt::Display for DisplayConstraint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tensor = |t: u8| self.tensors.get(usize::from(t)).copied().unwrap_or("?");
        let reshape = |r: u8| self.reshapes.get(usize::from(r)).copied().unwrap_or("?");
        let tile = |t: u16| self.tiles.get(usize::from(t)).copied().unwrap_or("?");
        match *self.c {
            Constraint::Divisible { sym, by } => write!(f, "{} % {by} == 0", self.sym(sym)),
            Constraint::InBounds {
                target,
                size,
                lo,
                hi,
                upper,
                ..
            } => {
                let what = match target {
                    Bounded::Tensor { tensor: t, axis } => format!("{} axis {axis}", tensor(t)),
                    Bounded::Reshape { reshape: r, axis } => {
                        format!("{} axis {axis}", reshape(r))
                    }
                    Bounded::TileFree { tile: t } => format!("{} free elements", tile(t)),
                    Bounded::TileBlocks { tile: t, div, add } => {
                        // The bounded index is `div·k + div − 1 − add`: say so.
                        let shift = i128::from(div)
                            .saturating_sub(1)
                            .saturating_sub(i128::from(add));
                        format!("{} block index k as {div}*k + {shift}", tile(t))
                    }
                };
                if upper {
                    write!(f, "{what}: index in [{lo}, {hi}]")?;
                } else {
                    write!(f, "{what}: lowest index {lo}")?;
                }
                self.terms(f)?;
                if !upper {
                    return f.write_str(" >= 0");
                }
                f.write_str(" < ")?;
                match size {
                    Dim::Fixed(n) => write!(f, "{n}"),
                    Dim::Sym(s) => f.write_str(self.sym(s)),
                }
            }
            Constraint::InRange { what, lo, hi, .. } => {
                match what {
                    Computed::MaskedIndex { tensor: t, axis } => {
                        write!(f, "{} axis {axis} (masked): index", tensor(t))?
                    }
                    Computed::MaskedReshapeIndex { reshape: r, axis } => {
                        write!(f, "{} axis {axis} (masked): index", reshape(r))?
                    }
                    Computed::MaskBound { mask } => write!(f, "mask {mask}: bound")?,
                    Computed::Expr { expr } => write!(f, "index expression {expr}: value")?,
                }
                write!(f, " in [{lo}, {hi}]")?;
                self.terms(f)?;
                f.write_str(" within ±2^62")
            }
            Constraint::Blocks {
                tile: t,
                count,
                capacity,
            } => write!(
                f,
                "{} blocks: {} <= {capacity} (the SBUF beside the kernel's other tiles holds {capacity})",
                tile(t),
                count.display(self.symbols)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::MAX_SYMBOLS;

    #[test]
    fn index_ranges_saturate_instead_of_overflowing() {
        let syms = [0u64; MAX_SYMBOLS];
        let loops = [Extent::Fixed(u64::MAX); MAX_VARS];
        let up = index_range(i64::MAX, i64::MAX, &[i64::MAX; MAX_VARS], &loops, &syms);
        assert_eq!(up, Some((i128::from(i64::MAX), i128::MAX)));
        let down = index_range(i64::MIN, i64::MIN, &[i64::MIN; MAX_VARS], &loops, &syms);
        assert_eq!(down, Some((i128::MIN, i128::from(i64::MIN))));
        // A small range is exact: 5 + 3·(4 − 1) − 2·(10 − 1).
        let small = index_range(
            5,
            5,
            &[3, -2],
            &[Extent::Fixed(4), Extent::Fixed(10)],
            &syms,
        );
        assert_eq!(small, Some((5 - 18, 5 + 9)));
        assert_eq!(index_range(0, 0, &[1], &[Extent::Fixed(0)], &syms), None);
    }
}
