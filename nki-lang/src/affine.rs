//! Affine expressions of a kernel's index variables: the SPMD program ids and the enclosing
//! loops' induction variables.

use core::fmt;

/// Most SPMD launch-grid axes (`program_id(0..3)`).
pub const MAX_PIDS: usize = 3;
/// Deepest loop nesting a program may have.
pub const MAX_LOOP_DEPTH: usize = 8;
/// Number of index variables: the program ids, then the loops by depth.
pub const MAX_VARS: usize = MAX_PIDS + MAX_LOOP_DEPTH;

/// The values of the index variables at one instruction: `vars[a]` is `program_id(a)` for
/// `a < MAX_PIDS`, `vars[MAX_PIDS + d]` the induction value of the loop at depth `d`.
pub type VarValues = [i64; MAX_VARS];

/// An index variable.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Var {
    /// `program_id(axis)` of an SPMD launch.
    Pid(u8),
    /// The induction variable of the loop at this nesting depth (0 = outermost).
    Loop(u8),
}

impl Var {
    /// The variable's position in [`Affine::coef`] and [`VarValues`] (at most
    /// `MAX_PIDS + 255`: a position of an existing variable is below [`MAX_VARS`]).
    pub const fn index(self) -> usize {
        match self {
            Var::Pid(a) => a as usize,
            // A u8 plus 3: no overflow.
            #[allow(clippy::arithmetic_side_effects)]
            Var::Loop(d) => MAX_PIDS + d as usize,
        }
    }

    /// The variable at a position of [`Affine::coef`] (positions past `MAX_PIDS + 255`, which
    /// no variable has, give `Var::Loop(255)`).
    // Each cast is of a value checked to fit; `i - MAX_PIDS` follows `i >= MAX_PIDS`.
    #[allow(clippy::cast_possible_truncation, clippy::arithmetic_side_effects)]
    pub const fn from_index(i: usize) -> Var {
        if i < MAX_PIDS {
            Var::Pid(i as u8)
        } else if i - MAX_PIDS <= u8::MAX as usize {
            Var::Loop((i - MAX_PIDS) as u8)
        } else {
            Var::Loop(u8::MAX)
        }
    }

    /// Whether the variable exists: a program id below [`MAX_PIDS`] or a loop depth below
    /// [`MAX_LOOP_DEPTH`].
    pub const fn is_valid(self) -> bool {
        match self {
            Var::Pid(a) => (a as usize) < MAX_PIDS,
            Var::Loop(d) => (d as usize) < MAX_LOOP_DEPTH,
        }
    }
}

/// `constant + Σ coef[v] · var[v]` over the index variables ([`Var`]).
///
/// Loop variables are named by depth rather than by identity: at any instruction the enclosing
/// loops are exactly depths `0..depth`, so the executor keeps their values in one small array.
/// Program ids come first: a launch grid's instances behave, for bounds and constraints, like
/// outer loops whose trip counts are the grid's sizes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Affine {
    /// The constant term.
    pub constant: i64,
    /// Coefficient of each index variable.
    pub coef: [i64; MAX_VARS],
}

impl Affine {
    /// The expression `0`.
    pub const ZERO: Affine = Affine::constant(0);

    /// A constant expression.
    pub const fn constant(c: i64) -> Affine {
        Affine {
            constant: c,
            coef: [0; MAX_VARS],
        }
    }

    /// Variable `v` times `scale`.
    ///
    /// # Panics
    ///
    /// If the variable does not exist ([`Var::is_valid`]); [`Affine::checked_var`] returns
    /// `None` instead.
    pub const fn var(v: Var, scale: i64) -> Affine {
        match Affine::checked_var(v, scale) {
            Some(a) => a,
            None => panic!("no such index variable: program ids are 0..3, loop depths 0..8"),
        }
    }

    /// Variable `v` times `scale`, or `None` if the variable does not exist
    /// ([`Var::is_valid`]).
    pub const fn checked_var(v: Var, scale: i64) -> Option<Affine> {
        if !v.is_valid() {
            return None;
        }
        let mut a = Affine::ZERO;
        a.coef[v.index()] = scale;
        Some(a)
    }

    /// The loop variable at `depth`, times `scale`.
    ///
    /// # Panics
    ///
    /// If `depth` is not below [`MAX_LOOP_DEPTH`].
    pub const fn loop_var(depth: usize, scale: i64) -> Affine {
        assert!(depth < MAX_LOOP_DEPTH, "loops nest at most 8 deep");
        // depth < 8
        #[allow(clippy::cast_possible_truncation)]
        Affine::var(Var::Loop(depth as u8), scale)
    }

    /// `program_id(axis)` times `scale`.
    ///
    /// # Panics
    ///
    /// If `axis` is not below [`MAX_PIDS`].
    pub const fn program_id(axis: usize, scale: i64) -> Affine {
        assert!(axis < MAX_PIDS, "a launch grid has at most 3 axes");
        // axis < 3
        #[allow(clippy::cast_possible_truncation)]
        Affine::var(Var::Pid(axis as u8), scale)
    }

    /// The value for the given variables. The operands of a checked program keep every value
    /// inside `i64` for the variables a launch can bind; the arithmetic wraps rather than
    /// panics should an unchecked program get here.
    #[inline]
    pub fn eval(&self, vars: &VarValues) -> i64 {
        let mut v = self.constant;
        for (c, x) in self.coef.iter().zip(vars) {
            v = v.wrapping_add(c.wrapping_mul(*x));
        }
        v
    }

    /// Whether the expression has no variable.
    pub fn is_constant(&self) -> bool {
        self.coef.iter().all(|&c| c == 0)
    }

    /// Whether the expression uses a loop at depth `depth` or deeper.
    pub fn uses_loops_from(&self, depth: usize) -> bool {
        self.coef[MAX_PIDS.saturating_add(depth.min(MAX_LOOP_DEPTH))..]
            .iter()
            .any(|&c| c != 0)
    }

    /// Coefficient of the loop variable at `depth` (0 for a depth no loop can have).
    pub const fn loop_coef(&self, depth: usize) -> i64 {
        if depth < MAX_LOOP_DEPTH {
            // depth < 8: inside `coef`.
            #[allow(clippy::arithmetic_side_effects)]
            self.coef[MAX_PIDS + depth]
        } else {
            0
        }
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(&self, other: &Affine) -> Option<Affine> {
        let mut out = *self;
        out.constant = out.constant.checked_add(other.constant)?;
        for (c, o) in out.coef.iter_mut().zip(&other.coef) {
            *c = c.checked_add(*o)?;
        }
        Some(out)
    }

    /// `self · k`, or `None` on overflow.
    pub fn checked_scale(&self, k: i64) -> Option<Affine> {
        let mut out = *self;
        out.constant = out.constant.checked_mul(k)?;
        for c in &mut out.coef {
            *c = c.checked_mul(k)?;
        }
        Some(out)
    }

    /// Formats the expression with the given names for the loop variables (by depth); program
    /// ids print as `program_id(a)`.
    pub fn display<'a>(&'a self, loops: &'a [&'a str]) -> impl fmt::Display + 'a {
        DisplayAffine { a: self, loops }
    }
}

struct DisplayAffine<'a> {
    a: &'a Affine,
    loops: &'a [&'a str],
}

impl fmt::Display for DisplayAffine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (i, &c) in self.a.coef.iter().enumerate() {
            if c == 0 {
                continue;
            }
            match (first, c < 0) {
                (true, false) => {}
                (true, true) => f.write_str("-")?,
                (false, false) => f.write_str(" + ")?,
                (false, true) => f.write_str(" - ")?,
            }
            if c.unsigned_abs() != 1 {
                write!(f, "{}*", c.unsigned_abs())?;
            }
            match Var::from_index(i) {
                Var::Pid(a) => write!(f, "program_id({a})")?,
                Var::Loop(d) => f.write_str(self.loops.get(d as usize).copied().unwrap_or("?"))?,
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
