//! Affine expressions of loop variables: the index arithmetic of a kernel.

use core::fmt;

/// Deepest loop nesting a program may have.
pub const MAX_LOOP_DEPTH: usize = 8;

/// The values of the enclosing loops' induction variables, outermost first.
pub type LoopValues = [i64; MAX_LOOP_DEPTH];

/// `constant + Σ coef[d] · iv[d]`, where `iv[d]` is the induction variable of the loop at
/// nesting depth `d` (0 = outermost).
///
/// Loop variables are named by depth rather than by identity: at any instruction the enclosing
/// loops are exactly depths `0..depth`, so the executor keeps their values in one small array.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Affine {
    /// The constant term.
    pub constant: i64,
    /// Coefficient of each enclosing loop's variable.
    pub coef: [i64; MAX_LOOP_DEPTH],
}

impl Affine {
    /// The expression `0`.
    pub const ZERO: Affine = Affine::constant(0);

    /// A constant expression.
    pub const fn constant(c: i64) -> Affine {
        Affine {
            constant: c,
            coef: [0; MAX_LOOP_DEPTH],
        }
    }

    /// The loop variable at `depth`, times `scale`.
    pub const fn var(depth: usize, scale: i64) -> Affine {
        let mut a = Affine::ZERO;
        a.coef[depth] = scale;
        a
    }

    /// The value for the given loop variables.
    #[inline]
    pub fn eval(&self, ivs: &LoopValues) -> i64 {
        let mut v = self.constant;
        for (c, iv) in self.coef.iter().zip(ivs) {
            v += c * iv;
        }
        v
    }

    /// Whether the expression has no loop variable.
    pub fn is_constant(&self) -> bool {
        self.coef.iter().all(|&c| c == 0)
    }

    /// `self + other`.
    pub fn add(&self, other: &Affine) -> Affine {
        let mut out = *self;
        out.constant += other.constant;
        for d in 0..MAX_LOOP_DEPTH {
            out.coef[d] += other.coef[d];
        }
        out
    }

    /// `self · k`.
    pub fn scale(&self, k: i64) -> Affine {
        let mut out = *self;
        out.constant *= k;
        for c in &mut out.coef {
            *c *= k;
        }
        out
    }

    /// Formats the expression with the given names for the loop variables.
    pub fn display<'a>(&'a self, names: &'a [&'a str]) -> impl fmt::Display + 'a {
        DisplayAffine { a: self, names }
    }
}

struct DisplayAffine<'a> {
    a: &'a Affine,
    names: &'a [&'a str],
}

impl fmt::Display for DisplayAffine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (d, &c) in self.a.coef.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let name = self.names.get(d).copied().unwrap_or("?");
            match (first, c < 0) {
                (true, false) => {}
                (true, true) => f.write_str("-")?,
                (false, false) => f.write_str(" + ")?,
                (false, true) => f.write_str(" - ")?,
            }
            match c.unsigned_abs() {
                1 => f.write_str(name)?,
                k => write!(f, "{k}*{name}")?,
            }
            first = false;
        }
        match (first, self.a.constant) {
            (true, c) => write!(f, "{c}"),
            (false, 0) => Ok(()),
            (false, c) if c > 0 => write!(f, " + {c}"),
            (false, c) => write!(f, " - {}", c.unsigned_abs()),
        }
    }
}
