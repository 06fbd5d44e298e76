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
    /// The free elements of tile `tile`.
    TileFree {
        /// Tile index.
        tile: u16,
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
}

/// The index range `[lo, hi]` a bounds constraint reaches, or `None` if its access never runs.
/// `loops[v]` is how many values index variable `v` takes, `coef[v]` its coefficient.
/// Computed in `i128` (saturating), so that no coefficient or trip count can overflow it.
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
        // |c| ≤ 2^63 and t − 1 < 2^64: the product fits i128; the sums saturate outward, so
        // that an absurd range fails every bound it is checked against.
        let span = i128::from(c).saturating_mul(i128::from(t - 1));
        lo = lo.saturating_add(span.min(0));
        hi = hi.saturating_add(span.max(0));
    }
    Some((lo, hi))
}

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
            } => {
                let vars = loops.get(..MAX_PIDS + depth as usize).unwrap_or(&loops);
                match index_range(lo, hi, &coef, vars, syms) {
                    None => true,
                    Some((lo, hi)) => lo >= 0 && (!upper || hi < i128::from(size.eval(syms))),
                }
            }
        }
    }

    /// Formats the constraint with the program's names.
    pub fn display<'a>(
        &'a self,
        symbols: &'a [&'a str],
        tensors: &'a [&'a str],
        tiles: &'a [&'a str],
    ) -> impl fmt::Display + 'a {
        DisplayConstraint {
            c: self,
            symbols,
            tensors,
            tiles,
        }
    }
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
    tiles: &'a [&'a str],
}

impl DisplayConstraint<'_> {
    fn sym(&self, s: u8) -> &str {
        self.symbols.get(s as usize).copied().unwrap_or("?")
    }
}

impl fmt::Display for DisplayConstraint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self.c {
            Constraint::Divisible { sym, by } => write!(f, "{} % {by} == 0", self.sym(sym)),
            Constraint::InBounds {
                target,
                size,
                lo,
                hi,
                coef,
                loops,
                depth,
                upper,
            } => {
                let what = match target {
                    Bounded::Tensor { tensor, axis } => format!(
                        "{} axis {axis}",
                        self.tensors.get(tensor as usize).copied().unwrap_or("?")
                    ),
                    Bounded::TileFree { tile } => format!(
                        "{} free elements",
                        self.tiles.get(tile as usize).copied().unwrap_or("?")
                    ),
                };
                if upper {
                    write!(f, "{what}: index in [{lo}, {hi}]")?;
                } else {
                    write!(f, "{what}: lowest index {lo}")?;
                }
                for v in 0..(MAX_PIDS + depth as usize).min(MAX_VARS) {
                    if coef[v] != 0 {
                        write!(f, " + {}*(", coef[v])?;
                        write!(f, "{}", loops[v].display(self.symbols))?;
                        f.write_str(" - 1)")?;
                    }
                }
                if !upper {
                    return f.write_str(" >= 0");
                }
                f.write_str(" < ")?;
                match size {
                    Dim::Fixed(n) => write!(f, "{n}"),
                    Dim::Sym(s) => f.write_str(self.sym(s)),
                }
            }
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
