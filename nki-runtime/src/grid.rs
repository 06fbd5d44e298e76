//! SPMD launch grids: NKI's `kernel[2, 4](a, b)`.
//!
//! A launch runs one instance of the program per point of its grid (row-major order: the last
//! axis fastest); each instance reads its coordinates with `program_id(axis)` and the grid with
//! `num_programs(axis)`, `num_programs()` and `program_ndim()`. A launch without a grid is the
//! grid of rank 0: one instance, `program_ndim() = 0`, every `num_programs(axis) = 1`.
//!
//! NKI's Trn2 forms are accepted: [`nc`]`(2)` marks an axis spread over the two physical cores
//! of a logical NeuronCore, and [`spmd_dim`] combines such an axis with a size
//! (`kernel[spmd_dim(4, nc(2)), 2]` has `4 · 2 · 2` instances). The model runs every instance
//! on its own host threads either way: `nc` changes the grid's size, not the results.

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use core::fmt;

use nki_lang::grid::SymbolSource;
use nki_lang::{MAX_PIDS, Program, SymbolValues, Target};

/// One axis of a launch grid: a size, possibly spread over a Trn2's physical cores.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct GridDim {
    size: usize,
    cores: usize,
}

impl GridDim {
    /// An axis of `size` instances.
    pub const fn new(size: usize) -> GridDim {
        GridDim { size, cores: 1 }
    }

    /// The number of instances along the axis.
    pub const fn size(self) -> usize {
        self.size
    }

    /// The physical cores the axis is spread over (1 unless [`nc`] marked it).
    pub const fn cores(self) -> usize {
        self.cores
    }
}

impl From<usize> for GridDim {
    fn from(size: usize) -> GridDim {
        GridDim::new(size)
    }
}

/// NKI's `nl.nc(n)`: an axis of `n` instances, one per physical core of a Trn2 logical
/// NeuronCore (`n` must be 2, checked at launch).
pub const fn nc(n: usize) -> GridDim {
    GridDim { size: n, cores: n }
}

/// NKI's `nl.spmd_dim(a, b)`: an axis of `a · b` instances, where one of `a`, `b` may be an
/// [`nc`] axis (blocked when it comes first, interleaved when it comes second: a placement on
/// physical cores that does not change the results). An overflowing product is refused at
/// launch.
pub const fn spmd_dim(a: GridDim, b: GridDim) -> GridDim {
    GridDim {
        size: match a.size.checked_mul(b.size) {
            Some(n) => n,
            None => usize::MAX,
        },
        cores: if a.cores > b.cores { a.cores } else { b.cores },
    }
}

/// A launch grid of rank 0 to 3 ([`MAX_PIDS`]). Validated at launch: every size at least 1,
/// the number of instances representable, `nc` only on Trn2.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct LaunchGrid {
    dims: [GridDim; MAX_PIDS],
    rank: usize,
    /// A rank above [`MAX_PIDS`] was asked for (refused at launch).
    too_many: usize,
}

impl LaunchGrid {
    /// The grid of a launch without one: a single instance.
    pub const SINGLE: LaunchGrid = LaunchGrid {
        dims: [GridDim::new(1); MAX_PIDS],
        rank: 0,
        too_many: 0,
    };

    /// A grid with these axes (any number: more than three is refused at launch).
    pub fn new(dims: &[GridDim]) -> LaunchGrid {
        let mut g = LaunchGrid::SINGLE;
        if dims.len() > MAX_PIDS {
            g.too_many = dims.len();
            return g;
        }
        g.dims[..dims.len()].copy_from_slice(dims);
        g.rank = dims.len();
        g
    }

    /// The grid's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The axes.
    pub fn dims(&self) -> &[GridDim] {
        &self.dims[..self.rank]
    }

    /// The size along `axis` (1 beyond the rank).
    pub fn size(&self, axis: usize) -> usize {
        self.dims.get(axis).map_or(1, |d| d.size)
    }

    /// The number of instances, if it is representable.
    pub fn count(&self) -> Option<usize> {
        self.dims()
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(d.size))
    }

    /// Checks the grid for a program compiled for `target`: the number of instances, or why
    /// the grid cannot be launched.
    pub(crate) fn validate(&self, target: Target) -> Result<usize, String> {
        if self.too_many > 0 {
            return Err(format!(
                "a launch grid has at most {MAX_PIDS} axes, this one has {}",
                self.too_many
            ));
        }
        for (axis, d) in self.dims().iter().enumerate() {
            if d.size == 0 {
                return Err(format!("axis {axis} has no instance"));
            }
            if d.cores > 1 && (d.cores != 2 || target == Target::Trn1) {
                return Err(format!(
                    "nc({}) on axis {axis}: a {} kernel runs on one physical core (nc(2) needs trn2 or trn3)",
                    d.cores,
                    target.name()
                ));
            }
        }
        self.count()
            .filter(|&n| i64::try_from(n).is_ok())
            .ok_or_else(|| format!("{self} instances do not fit this host"))
    }

    /// Binds the program's grid symbols (`num_programs(axis)`, `num_programs()`,
    /// `program_ndim()`) in `syms`. The grid was validated.
    pub(crate) fn bind_symbols(&self, p: &Program<'_>, syms: &mut SymbolValues) {
        for (s, name) in p.symbols().iter().enumerate() {
            let value = match SymbolSource::of(name) {
                SymbolSource::Input
                | SymbolSource::Product
                | SymbolSource::Quotient
                | SymbolSource::Sum => continue,
                SymbolSource::GridSize(axis) => self.size(axis as usize),
                SymbolSource::GridCount => self.count().unwrap_or(0),
                SymbolSource::GridRank => self.rank,
            };
            syms[s] = value as u64;
        }
    }

    /// The coordinates of instance `i` (row-major: the last axis fastest).
    pub(crate) fn coords(&self, mut i: usize) -> [i64; MAX_PIDS] {
        let mut c = [0i64; MAX_PIDS];
        for axis in (0..self.rank).rev() {
            // Sizes are nonzero and the instance count fits i64 (checked when bound).
            let n = self.dims[axis].size.max(1);
            c[axis] = i64::try_from(i.checked_rem(n).unwrap_or(0)).unwrap_or(i64::MAX);
            i = i.checked_div(n).unwrap_or(0);
        }
        c
    }
}

impl Default for LaunchGrid {
    fn default() -> LaunchGrid {
        LaunchGrid::SINGLE
    }
}

impl<T: Into<GridDim>, const N: usize> From<[T; N]> for LaunchGrid {
    fn from(dims: [T; N]) -> LaunchGrid {
        let dims = dims.map(Into::into);
        LaunchGrid::new(&dims)
    }
}

impl From<usize> for LaunchGrid {
    fn from(n: usize) -> LaunchGrid {
        LaunchGrid::new(&[GridDim::new(n)])
    }
}

impl fmt::Display for LaunchGrid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (k, d) in self.dims().iter().enumerate() {
            if k > 0 {
                write!(f, ", ")?;
            }
            match d.cores {
                1 => write!(f, "{}", d.size)?,
                c => write!(
                    f,
                    "spmd_dim({}, nc({c}))",
                    d.size.checked_div(c).unwrap_or(0)
                )?,
            }
        }
        write!(f, "]")
    }
}

impl fmt::Debug for LaunchGrid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LaunchGrid{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_row_major() {
        let g = LaunchGrid::from([2, 3]);
        assert_eq!(g.count(), Some(6));
        let all: Vec<_> = (0..6).map(|i| g.coords(i)).collect();
        assert_eq!(all[0], [0, 0, 0]);
        assert_eq!(all[1], [0, 1, 0]);
        assert_eq!(all[3], [1, 0, 0]);
        assert_eq!(all[5], [1, 2, 0]);
        assert_eq!(LaunchGrid::SINGLE.count(), Some(1));
        assert_eq!(LaunchGrid::SINGLE.coords(0), [0; 3]);
    }

    #[test]
    fn bad_grids_are_launch_errors() {
        let err = |g: LaunchGrid, t| g.validate(t).unwrap_err();
        assert!(err(LaunchGrid::from([2, 0]), Target::Trn1).contains("axis 1 has no instance"));
        assert!(err(LaunchGrid::from([1, 1, 1, 1]), Target::Trn1).contains("at most 3 axes"));
        assert!(err(LaunchGrid::from([usize::MAX, 2]), Target::Trn1).contains("do not fit"));
        assert!(err(LaunchGrid::new(&[nc(2)]), Target::Trn1).contains("needs trn2"));
        assert!(err(LaunchGrid::new(&[nc(3)]), Target::Trn2).contains("nc(3)"));
        let g = LaunchGrid::new(&[spmd_dim(GridDim::new(4), nc(2)), GridDim::new(2)]);
        assert_eq!(g.validate(Target::Trn2).unwrap(), 16);
        assert_eq!(g.to_string(), "[spmd_dim(4, nc(2)), 2]");
        assert_eq!(
            LaunchGrid::new(&[spmd_dim(GridDim::new(usize::MAX), nc(2))]).count(),
            Some(usize::MAX)
        );
    }
}
