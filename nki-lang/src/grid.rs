//! The SPMD launch grid as the language sees it: `program_id(axis)` is an index variable
//! ([`crate::Var::Pid`]), and the grid's sizes are symbolic dimensions bound at launch.
//!
//! NKI launches a kernel over a grid (`kernel[2, 4](a, b)`); each instance reads its
//! coordinates with `program_id(axis)` and the grid with `num_programs(axis)` and
//! `program_ndim()`. Here the last two are symbols of the program's symbol table, named by the
//! NKI expressions themselves (which no Rust identifier can collide with), so that they work
//! wherever a symbolic dimension does: trip counts (`affine_range(N / num_programs(0))`), mask
//! bounds and launch constraints. [`SymbolSource::of`] says where each symbol's value comes
//! from.

use crate::affine::MAX_PIDS;
use crate::derived::Root;

/// The symbol names of `num_programs(axis)` for each grid axis.
pub const GRID_SIZE_SYMBOLS: [&str; MAX_PIDS] =
    ["num_programs(0)", "num_programs(1)", "num_programs(2)"];

/// The symbol name of `num_programs()`: the number of instances (the product of the sizes).
pub const GRID_COUNT_SYMBOL: &str = "num_programs()";

/// The symbol name of `program_ndim()`: the launch grid's rank.
pub const GRID_RANK_SYMBOL: &str = "program_ndim()";

/// Where a symbolic dimension's value comes from at launch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SymbolSource {
    /// An input tensor's axis that names it (`Hbm<f32, N, 256>`).
    Input,
    /// The grid's size along an axis (`num_programs(axis)`): 1 beyond the grid's rank.
    GridSize(u8),
    /// The number of instances (`num_programs()`).
    GridCount,
    /// The grid's rank (`program_ndim()`): 0 for a launch without a grid.
    GridRank,
    /// The product of other symbols and a literal (`N * C`, see [`crate::product`]), bound
    /// after them.
    Product,
    /// The floor quotient of two symbols or a symbol and a literal (`h / k_h`, NKI's
    /// `h // k_h`; see [`crate::derived`]), bound after them.
    Quotient,
    /// The sum of two symbols or a symbol and a literal (`H + W`, `H + 2`; see
    /// [`crate::derived`]), bound after them.
    Sum,
}

impl SymbolSource {
    /// Whether the symbol is computed from other symbols at launch (a product, a quotient or a
    /// sum, [`crate::derived`]).
    pub fn is_derived(self) -> bool {
        matches!(
            self,
            SymbolSource::Product | SymbolSource::Quotient | SymbolSource::Sum
        )
    }

    /// The source of the symbol called `name`.
    pub fn of(name: &str) -> SymbolSource {
        if let Some(axis) = GRID_SIZE_SYMBOLS.iter().position(|s| *s == name) {
            // axis < MAX_PIDS
            #[allow(clippy::cast_possible_truncation)]
            return SymbolSource::GridSize(axis as u8);
        }
        match name {
            GRID_COUNT_SYMBOL => SymbolSource::GridCount,
            GRID_RANK_SYMBOL => SymbolSource::GridRank,
            _ => match crate::derived::root(name) {
                Some(Root::Product) => SymbolSource::Product,
                Some(Root::Quotient) => SymbolSource::Quotient,
                Some(Root::Sum) => SymbolSource::Sum,
                None => SymbolSource::Input,
            },
        }
    }

    /// The symbol's name for a grid source (`None` for [`SymbolSource::Input`], whose symbols
    /// are named by the kernel, and the derived sources, named by their expressions).
    pub fn grid_name(self) -> Option<&'static str> {
        match self {
            SymbolSource::Input
            | SymbolSource::Product
            | SymbolSource::Quotient
            | SymbolSource::Sum => None,
            SymbolSource::GridSize(a) => GRID_SIZE_SYMBOLS.get(a as usize).copied(),
            SymbolSource::GridCount => Some(GRID_COUNT_SYMBOL),
            SymbolSource::GridRank => Some(GRID_RANK_SYMBOL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_symbols_round_trip() {
        for s in [
            SymbolSource::GridSize(0),
            SymbolSource::GridSize(2),
            SymbolSource::GridCount,
            SymbolSource::GridRank,
        ] {
            assert_eq!(SymbolSource::of(s.grid_name().unwrap()), s);
        }
        assert_eq!(SymbolSource::of("N"), SymbolSource::Input);
        assert_eq!(SymbolSource::of("h / k_h"), SymbolSource::Quotient);
        assert_eq!(
            SymbolSource::of("N / num_programs(0)"),
            SymbolSource::Quotient
        );
        assert_eq!(SymbolSource::of("H + 2"), SymbolSource::Sum);
        assert_eq!(SymbolSource::of("64 * N"), SymbolSource::Product);
        assert_eq!(SymbolSource::GridSize(3).grid_name(), None);
    }
}
