//! Dimensions of HBM tensors (literal or symbolic) and loop trip counts.

use core::fmt;

/// Most symbolic dimension names one kernel may use.
pub const MAX_SYMBOLS: usize = 8;
/// Highest rank of an HBM tensor.
pub const MAX_TENSOR_RANK: usize = 6;
/// Largest size of one HBM tensor axis (2⁴⁰ elements): far beyond any memory, it keeps every
/// index computation of a launch inside `i64`.
pub const MAX_TENSOR_DIM: u64 = 1 << 40;
/// Highest rank of a tile or of an instruction's access pattern: the partition dimension plus
/// up to four free dimensions (the hardware's 4-D free access pattern).
pub const MAX_TILE_RANK: usize = 5;

/// Values of a program's symbolic dimensions, bound at launch (index = symbol id).
pub type SymbolValues = [u64; MAX_SYMBOLS];

/// One dimension of an HBM tensor: a literal, or a symbolic name bound at launch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A size known at compile time.
    Fixed(u64),
    /// The symbol with this index in the program's symbol table (`K`, `M`, `N`).
    Sym(u8),
}

impl Dim {
    /// The size, given the symbols' values.
    #[inline]
    pub const fn eval(self, syms: &SymbolValues) -> u64 {
        match self {
            Dim::Fixed(n) => n,
            Dim::Sym(s) => syms[s as usize],
        }
    }
}

/// A loop's trip count: a literal, or a symbolic dimension plus a literal, divided by a literal
/// (`K / 128`, `(K + 127) / 128`).
///
/// A symbolic trip count `S / d` (no addend) makes the program require `S % d == 0` at launch:
/// a kernel that silently skipped a remainder would leave part of its output unwritten. The
/// ceiling form `(S + d − 1) / d` covers a ragged last tile, which the kernel masks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    /// A trip count known at compile time.
    Fixed(u64),
    /// `(symbols[sym] + add) / div`.
    Sym {
        /// Symbol index.
        sym: u8,
        /// Literal addend.
        add: u64,
        /// Literal divisor (1 for a plain symbol).
        div: u64,
    },
}

impl Extent {
    /// The trip count, given the symbols' values.
    #[inline]
    pub const fn eval(self, syms: &SymbolValues) -> u64 {
        match self {
            Extent::Fixed(n) => n,
            Extent::Sym { sym, add, div } => {
                let s = syms[sym as usize].saturating_add(add);
                // `checked_div` is `None` only for a divisor of 0, which a checked program's trip
                // counts never have.
                match s.checked_div(div) {
                    Some(n) => n,
                    None => 0,
                }
            }
        }
    }

    /// Formats the trip count with the program's symbol names (`8`, `K`, `K / 128`,
    /// `(K + 127) / 128`).
    pub fn display<'a>(&'a self, symbols: &'a [&'a str]) -> impl fmt::Display + 'a {
        DisplayExtent { e: *self, symbols }
    }

    /// The trip count if it is known at compile time.
    pub const fn fixed(self) -> Option<u64> {
        match self {
            Extent::Fixed(n) => Some(n),
            Extent::Sym { .. } => None,
        }
    }
}

/// The shape of a tile or of a tile-shaped access: the partition size, then the free sizes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileShape {
    rank: u8,
    dims: [u32; MAX_TILE_RANK],
}

impl TileShape {
    /// A shape from its dimensions (partition first). `None` if the rank is 0 or above
    /// [`MAX_TILE_RANK`].
    pub const fn new(dims: &[u32]) -> Option<TileShape> {
        if dims.is_empty() || dims.len() > MAX_TILE_RANK {
            return None;
        }
        let mut out = [1u32; MAX_TILE_RANK];
        let mut i = 0;
        while i < dims.len() {
            out[i] = dims[i];
            // i < dims.len() ≤ 5
            #[allow(clippy::arithmetic_side_effects)]
            {
                i += 1;
            }
        }
        Some(TileShape {
            // dims.len() ≤ 5
            #[allow(clippy::cast_possible_truncation)]
            rank: dims.len() as u8,
            dims: out,
        })
    }

    /// The dimensions, partition first.
    pub fn dims(&self) -> &[u32] {
        &self.dims[..self.rank as usize]
    }

    /// Number of dimensions.
    pub const fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Size of the partition dimension.
    pub const fn partitions(&self) -> u32 {
        self.dims[0]
    }

    /// Elements per partition (the product of the free dimensions), saturating at `u64::MAX`
    /// (four free dimensions of up to 2³² − 1 can exceed it; no rule accepts such a tile).
    pub const fn free_elems(&self) -> u64 {
        let mut n = 1u64;
        let mut i = 1;
        while i < self.rank as usize {
            n = n.saturating_mul(self.dims[i] as u64);
            // i < rank ≤ 5
            #[allow(clippy::arithmetic_side_effects)]
            {
                i += 1;
            }
        }
        n
    }

    /// The free dimensions.
    pub fn free(&self) -> &[u32] {
        &self.dims[1..self.rank as usize]
    }

    /// Whether two shapes hold the same elements in the same row-major order, ignoring
    /// free dimensions of size 1 (`[128, 1, 512]` matches `[128, 512]`).
    pub fn same_layout(&self, other: &TileShape) -> bool {
        let a = self.dims().iter().skip(1).filter(|&&d| d != 1);
        let b = other.dims().iter().skip(1).filter(|&&d| d != 1);
        self.partitions() == other.partitions() && a.eq(b)
    }
}

impl fmt::Display for TileShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

struct DisplayExtent<'a> {
    e: Extent,
    symbols: &'a [&'a str],
}

impl fmt::Display for DisplayExtent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |s: u8| self.symbols.get(s as usize).copied().unwrap_or("?");
        match self.e {
            Extent::Fixed(n) => write!(f, "{n}"),
            Extent::Sym {
                sym,
                add: 0,
                div: 1,
            } => f.write_str(name(sym)),
            // Named as a derived symbol of the same value would be (`K / 128`, `(K + 127) / 128`,
            // `(h / k_h) / 2`).
            Extent::Sym { sym, add, div } => match i64::try_from(add) {
                Ok(a) => f.write_str(&crate::derived::offset_quotient_name(name(sym), a, div)),
                Err(_) => write!(f, "({} + {add}) / {div}", name(sym)),
            },
        }
    }
}
