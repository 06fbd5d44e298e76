//! The ALU operations of the Vector, Scalar and GpSimd engines, over runs of 32-bit lanes.
//!
//! # Definition
//!
//! Arithmetic, comparison and logical operations compute on fp32 lanes ([`eval`]); bit
//! operations on 32-bit integer lanes ([`eval_bits`]). Each is one scalar function of IEEE 754
//! binary32 operations, with:
//!
//! - **NaN results canonical**: every NaN an arithmetic operation produces is stored as
//!   `0x7fc0_0000`, whatever the operands' payloads.
//! - **`maximum` / `minimum`** propagate NaN (a NaN operand gives NaN) and order the zeros:
//!   `maximum(-0.0, +0.0) = +0.0`, `minimum(-0.0, +0.0) = -0.0` (IEEE 754-2019's `maximum`
//!   and `minimum`).
//! - **`divide`** is IEEE division (correctly rounded); **`reciprocal`** is `1 / a`;
//!   **`rsqrt`** is `1 / sqrt(a)`, two correctly rounded steps.
//! - **`mod`** is NumPy's floored remainder, `r = fmod(a, b)`, then `r + b` when `r` is nonzero
//!   and its sign differs from `b`'s (that addition rounds, as NumPy's does); **`fmod`** is
//!   the exact truncated remainder (IEEE `fmod`, C's `fmodf`).
//! - **`power`** is [`super::act::pow`].
//! - **Comparisons** give 1.0 or 0.0 (IEEE: a NaN operand makes every comparison false except
//!   `not_equal`). **Logical operations** read nonzero (NaN included) as true and give 1.0 or
//!   0.0.
//! - **Bit operations** act on the two's-complement 32-bit lanes; `left_shift` and
//!   `right_shift` (logical) by an amount outside `0..32` give 0. On integer lanes, `add`,
//!   `subtract` and `multiply` wrap (GpSimd's exact int32 arithmetic).
//!
//! # Implementation
//!
//! Each operation is a small `#[inline(always)]` function over `f32` or `i32`; a run applies it
//! in a loop that is compiled once per host code path from the same source (portable, AVX2,
//! AVX-512), so every path performs the same IEEE operations in the same order and produces
//! the same bits; only the vector width the compiler chooses differs. Rust never contracts a
//! multiply and an add into a fused operation, nor reorders floating-point arithmetic.

use nki_lang::Alu;

use super::Isa;

/// The canonical NaN every NaN result becomes.
pub const CANONICAL_NAN: f32 = f32::from_bits(0x7fc0_0000);

#[inline(always)]
fn canon(x: f32) -> f32 {
    if x.is_nan() { CANONICAL_NAN } else { x }
}

#[inline(always)]
fn truth(x: bool) -> f32 {
    if x { 1.0 } else { 0.0 }
}

// `maximum` and `minimum` are written with bit masks instead of branches, so that the compiler
// turns runs and 16-lane folds of them into vector compares and blends (control flow would keep
// them scalar).

/// `c ? a : b` without a branch.
#[inline(always)]
fn sel(c: bool, a: f32, b: f32) -> f32 {
    let m = (c as u32).wrapping_neg();
    f32::from_bits((a.to_bits() & m) | (b.to_bits() & !m))
}

#[inline(always)]
fn max(a: f32, b: f32) -> f32 {
    // Equal: identical bits, or ±0 (whose AND is +0).
    let eq = f32::from_bits(a.to_bits() & b.to_bits());
    let m = sel(a > b, a, sel(a < b, b, eq));
    sel(a.is_nan() | b.is_nan(), CANONICAL_NAN, m)
}

#[inline(always)]
fn min(a: f32, b: f32) -> f32 {
    // Equal: identical bits, or ±0 (whose OR is -0).
    let eq = f32::from_bits(a.to_bits() | b.to_bits());
    let m = sel(a < b, a, sel(a > b, b, eq));
    sel(a.is_nan() | b.is_nan(), CANONICAL_NAN, m)
}

#[inline(always)]
fn floored_mod(a: f32, b: f32) -> f32 {
    let r = a % b;
    if r != 0.0 && (r < 0.0) != (b < 0.0) {
        canon(r + b)
    } else {
        canon(r)
    }
}

/// The definition of an arithmetic, comparison or logical operation on fp32 lanes
/// ([`Alu::Bypass`] and one-operand operations ignore `b`). Bit operations are
/// [`eval_bits`]'s; here they compute on the lanes' values converted to integers.
#[inline]
pub fn eval(op: Alu, a: f32, b: f32) -> f32 {
    match op {
        Alu::Bypass => a,
        Alu::Add => canon(a + b),
        Alu::Subtract => canon(a - b),
        Alu::Multiply => canon(a * b),
        Alu::Divide => canon(a / b),
        Alu::Max => max(a, b),
        Alu::Min => min(a, b),
        Alu::Pow => super::act::pow(a, b),
        Alu::Mod => floored_mod(a, b),
        Alu::Fmod => canon(a % b),
        Alu::Abs => f32::from_bits(a.to_bits() & 0x7fff_ffff),
        Alu::Rsqrt => canon(1.0 / a.sqrt()),
        Alu::Reciprocal => canon(1.0 / a),
        Alu::IsEqual => truth(a == b),
        Alu::NotEqual => truth(a != b),
        Alu::IsGt => truth(a > b),
        Alu::IsGe => truth(a >= b),
        Alu::IsLt => truth(a < b),
        Alu::IsLe => truth(a <= b),
        Alu::LogicalAnd => truth(a != 0.0 && b != 0.0),
        Alu::LogicalOr => truth(a != 0.0 || b != 0.0),
        Alu::LogicalXor => truth((a != 0.0) != (b != 0.0)),
        Alu::LogicalNot => truth(a == 0.0),
        Alu::BitwiseAnd
        | Alu::BitwiseOr
        | Alu::BitwiseXor
        | Alu::Invert
        | Alu::LeftShift
        | Alu::RightShift => eval_bits(op, a as i32, b as i32) as f32,
    }
}

/// The definition of an operation on 32-bit integer lanes: bit operations exactly; `add`,
/// `subtract` and `multiply` in two's-complement wrapping arithmetic (GpSimd's int32
/// arithmetic); any other operation on the lanes' values as fp32 ([`eval`]), rounded back to
/// an integer toward zero (saturating; NaN becomes 0).
#[inline]
pub fn eval_bits(op: Alu, a: i32, b: i32) -> i32 {
    let shift = |f: fn(u32, u32) -> u32| {
        if (0..32).contains(&b) {
            f(a as u32, b as u32) as i32
        } else {
            0
        }
    };
    match op {
        Alu::BitwiseAnd => a & b,
        Alu::BitwiseOr => a | b,
        Alu::BitwiseXor => a ^ b,
        Alu::Invert => !a,
        Alu::LeftShift => shift(|x, s| x << s),
        Alu::RightShift => shift(|x, s| x >> s),
        Alu::Bypass => a,
        Alu::Add => a.wrapping_add(b),
        Alu::Subtract => a.wrapping_sub(b),
        Alu::Multiply => a.wrapping_mul(b),
        Alu::Divide
        | Alu::Max
        | Alu::Min
        | Alu::Pow
        | Alu::Mod
        | Alu::Fmod
        | Alu::Abs
        | Alu::Rsqrt
        | Alu::Reciprocal
        | Alu::IsEqual
        | Alu::NotEqual
        | Alu::IsGt
        | Alu::IsGe
        | Alu::IsLt
        | Alu::IsLe
        | Alu::LogicalAnd
        | Alu::LogicalOr
        | Alu::LogicalXor
        | Alu::LogicalNot => eval(op, a as f32, b as f32) as i32,
    }
}

/// The second operand of a run: a run of lanes, or one value for every lane.
#[derive(Copy, Clone, Debug)]
pub enum Rhs<'a, T> {
    /// One value per lane.
    Run(&'a [T]),
    /// The same value for every lane.
    Splat(T),
    /// Runs of `len` values, each repeated `times` times in turn: lane `(g·times + t)·len + i`
    /// takes `runs[g·len + i]` (an operand broadcast along an axis between two it steps along,
    /// such as RoPE's `cos` repeated over the heads, read where it lies).
    Repeat {
        /// The runs, one after the other.
        runs: &'a [T],
        /// Values per run.
        len: usize,
        /// Times each run repeats.
        times: usize,
    },
}

impl<T> Rhs<'_, T> {
    /// Panics unless the operand gives a value for each of `n` lanes.
    fn assert_covers(&self, n: usize) {
        match *self {
            Rhs::Run(b) => assert!(b.len() >= n, "operand run shorter than the output"),
            Rhs::Splat(_) => {}
            Rhs::Repeat { runs, len, times } => {
                let group = len.saturating_mul(times);
                assert!(
                    len > 0 && times > 0 && runs.len() >= n.div_ceil(group).saturating_mul(len),
                    "repeated runs shorter than the output"
                );
            }
        }
    }
}

/// `out[i] = eval(op, a[i], b[i])` (operands swapped when `rev`), for every lane of `out`.
///
/// # Panics
/// If `a` or a run `b` is shorter than `out`, or the CPU does not support `isa`.
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the last arm is the general definition (`eval`, `eval_bits`), right for every operation; the others are fast paths"
)]
pub fn apply(isa: Isa, op: Alu, a: &[f32], b: Rhs<'_, f32>, rev: bool, out: &mut [f32]) {
    macro_rules! go {
        ($f:expr) => {
            if rev {
                run(isa, a, b, out, |x: f32, y: f32| $f(y, x))
            } else {
                run(isa, a, b, out, $f)
            }
        };
    }
    match op {
        Alu::Bypass => go!(|x: f32, _y: f32| x),
        Alu::Add => go!(|x: f32, y: f32| canon(x + y)),
        Alu::Subtract => go!(|x: f32, y: f32| canon(x - y)),
        Alu::Multiply => go!(|x: f32, y: f32| canon(x * y)),
        Alu::Divide => go!(|x: f32, y: f32| canon(x / y)),
        Alu::Max => go!(max),
        Alu::Min => go!(min),
        Alu::IsEqual => go!(|x: f32, y: f32| truth(x == y)),
        Alu::NotEqual => go!(|x: f32, y: f32| truth(x != y)),
        Alu::IsGt => go!(|x: f32, y: f32| truth(x > y)),
        Alu::IsGe => go!(|x: f32, y: f32| truth(x >= y)),
        Alu::IsLt => go!(|x: f32, y: f32| truth(x < y)),
        Alu::IsLe => go!(|x: f32, y: f32| truth(x <= y)),
        Alu::Abs => go!(|x: f32, _y: f32| f32::from_bits(x.to_bits() & 0x7fff_ffff)),
        Alu::Reciprocal => go!(|x: f32, _y: f32| canon(1.0 / x)),
        Alu::Rsqrt => go!(|x: f32, _y: f32| canon(1.0 / x.sqrt())),
        Alu::Pow => match (b, rev) {
            (Rhs::Run(b), false) => {
                super::act::apply_pow(isa, &a[..out.len()], &b[..out.len()], out)
            }
            (Rhs::Run(b), true) => {
                super::act::apply_pow(isa, &b[..out.len()], &a[..out.len()], out)
            }
            (Rhs::Splat(_) | Rhs::Repeat { .. }, _) => go!(super::act::pow),
        },
        _ => go!(|x: f32, y: f32| eval(op, x, y)),
    }
}

/// `out[i] = eval_bits(op, a[i], b[i])` (operands swapped when `rev`), for every lane of `out`.
///
/// # Panics
/// As [`apply`].
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the last arm is the general definition (`eval`, `eval_bits`), right for every operation; the others are fast paths"
)]
pub fn apply_bits(isa: Isa, op: Alu, a: &[i32], b: Rhs<'_, i32>, rev: bool, out: &mut [i32]) {
    macro_rules! go {
        ($f:expr) => {
            if rev {
                run(isa, a, b, out, |x: i32, y: i32| $f(y, x))
            } else {
                run(isa, a, b, out, $f)
            }
        };
    }
    match op {
        Alu::BitwiseAnd => go!(|x: i32, y: i32| x & y),
        Alu::BitwiseOr => go!(|x: i32, y: i32| x | y),
        Alu::BitwiseXor => go!(|x: i32, y: i32| x ^ y),
        Alu::Invert => go!(|x: i32, _y: i32| !x),
        _ => go!(|x: i32, y: i32| eval_bits(op, x, y)),
    }
}

/// `acc[i] = eval(op, acc[i], b[i])` (operands swapped when `rev`), for every lane of `acc`:
/// [`apply`] with the output in place of the first operand, the same bits.
///
/// # Panics
/// If a run `b` is shorter than `acc`, or the CPU does not support `isa`.
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the last arm is the general definition (`eval`, `eval_bits`), right for every operation; the others are fast paths"
)]
pub fn apply_assign(isa: Isa, op: Alu, acc: &mut [f32], b: Rhs<'_, f32>, rev: bool) {
    macro_rules! go {
        ($f:expr) => {
            if rev {
                run_assign(isa, acc, b, |x: f32, y: f32| $f(y, x))
            } else {
                run_assign(isa, acc, b, $f)
            }
        };
    }
    match op {
        Alu::Add => go!(|x: f32, y: f32| canon(x + y)),
        Alu::Subtract => go!(|x: f32, y: f32| canon(x - y)),
        Alu::Multiply => go!(|x: f32, y: f32| canon(x * y)),
        Alu::Max => go!(max),
        Alu::Min => go!(min),
        Alu::LogicalAnd => go!(|x: f32, y: f32| truth(x != 0.0 && y != 0.0)),
        Alu::LogicalOr => go!(|x: f32, y: f32| truth(x != 0.0 || y != 0.0)),
        Alu::LogicalXor => go!(|x: f32, y: f32| truth((x != 0.0) != (y != 0.0))),
        _ => go!(|x: f32, y: f32| eval(op, x, y)),
    }
}

/// `acc[i] = eval_bits(op, acc[i], b[i])` (operands swapped when `rev`): [`apply_bits`] in
/// place.
///
/// # Panics
/// As [`apply_assign`].
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the last arm is the general definition (`eval`, `eval_bits`), right for every operation; the others are fast paths"
)]
pub fn apply_bits_assign(isa: Isa, op: Alu, acc: &mut [i32], b: Rhs<'_, i32>, rev: bool) {
    macro_rules! go {
        ($f:expr) => {
            if rev {
                run_assign(isa, acc, b, |x: i32, y: i32| $f(y, x))
            } else {
                run_assign(isa, acc, b, $f)
            }
        };
    }
    match op {
        Alu::BitwiseAnd => go!(|x: i32, y: i32| x & y),
        Alu::BitwiseOr => go!(|x: i32, y: i32| x | y),
        Alu::BitwiseXor => go!(|x: i32, y: i32| x ^ y),
        _ => go!(|x: i32, y: i32| eval_bits(op, x, y)),
    }
}

/// Combines 16 partial results pairwise: `acc[l] = eval(op, acc[l], acc[l + w])` for `w` = 8,
/// 4, 2, 1 and every `l < w`, in that order; returns `acc[0]` (the last step of the engines'
/// reductions). The operation is dispatched once, not per step, and the steps run lane-wise in
/// `isa`'s registers: each lane computes the scalar definition, so every path gives the same
/// bits.
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the last arm is the general definition (`eval`, `eval_bits`), right for every operation; the others are fast paths"
)]
pub fn pairwise16(isa: Isa, op: Alu, acc: &mut [f32; 16]) -> f32 {
    match op {
        Alu::Add => tree(isa, acc, |x: f32, y: f32| canon(x + y)),
        Alu::Multiply => tree(isa, acc, |x: f32, y: f32| canon(x * y)),
        Alu::Max => tree(isa, acc, max),
        Alu::Min => tree(isa, acc, min),
        _ => tree16(acc, |x: f32, y: f32| eval(op, x, y)),
    }
}

/// [`pairwise16`] on 32-bit integer lanes, with [`eval_bits`].
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the last arm is the general definition (`eval`, `eval_bits`), right for every operation; the others are fast paths"
)]
pub fn pairwise16_bits(op: Alu, acc: &mut [i32; 16]) -> i32 {
    match op {
        Alu::BitwiseAnd => tree16(acc, |x: i32, y: i32| x & y),
        Alu::BitwiseOr => tree16(acc, |x: i32, y: i32| x | y),
        Alu::BitwiseXor => tree16(acc, |x: i32, y: i32| x ^ y),
        Alu::Add => tree16(acc, |x: i32, y: i32| x.wrapping_add(y)),
        _ => tree16(acc, |x: i32, y: i32| eval_bits(op, x, y)),
    }
}

/// [`tree16`] compiled for `isa`.
#[inline(always)]
fn tree<T: Copy, F: Fn(T, T) -> T>(isa: Isa, acc: &mut [T; 16], f: F) -> T {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn tree_avx2<T: Copy, F: Fn(T, T) -> T>(acc: &mut [T; 16], f: F) -> T {
        tree16(acc, f)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn tree_avx512<T: Copy, F: Fn(T, T) -> T>(acc: &mut [T; 16], f: F) -> T {
        tree16(acc, f)
    }
    match isa {
        Isa::Portable => tree16(acc, f),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 and FMA (`assert_supported`).
            unsafe { tree_avx2(acc, f) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F/BW/VL (`assert_supported`).
            unsafe { tree_avx512(acc, f) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            tree16(acc, f)
        }
    }
}

#[inline(always)]
fn tree16<T: Copy>(acc: &mut [T; 16], f: impl Fn(T, T) -> T) -> T {
    for w in [8, 4, 2, 1] {
        for l in 0..w {
            acc[l] = f(acc[l], acc[l + w]);
        }
    }
    acc[0]
}

/// A scan step by step: `r = eval(op1, eval(op0, a[i], r), b[i])` from `r = init`, each `r`
/// written to `out[i]`, for every lane of `out`; returns the last `r`. Bit `j` of `rev` swaps
/// `op[j]`'s operands (`eval(op0, r, a[i])`, `eval(op1, b[i], ·)`). Sequential by definition
/// (one dependency chain); the operations are dispatched once, not per element, for the
/// arithmetic operations and `bypass` without swaps.
///
/// # Panics
/// If `a` or `b` is shorter than `out`.
pub fn scan(op: [Alu; 2], rev: u8, a: &[f32], b: &[f32], init: f32, out: &mut [f32]) -> f32 {
    let n = out.len();
    let [r] = scan_rows::<1, 0>(op, rev, a, b, n, [init], out);
    r
}

/// [`scan`] of `G` independent rows at once, row `g` at elements `g·S .. g·S + n` of `a`, `b`
/// and `out`, from `init[g]`: each row's values are exactly [`scan`]'s, its steps interleaved
/// with the other rows' so that `G` dependency chains are in flight instead of one; returns each
/// row's last `r`.
///
/// # Panics
/// If a buffer is shorter than `(G − 1)·S + n`, or rows overlap (`G > 1` and `n > S`).
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the last arm is the general definition (`eval`, `eval_bits`), right for every operation; the others are fast paths"
)]
pub fn scan_rows<const G: usize, const S: usize>(
    op: [Alu; 2],
    rev: u8,
    a: &[f32],
    b: &[f32],
    n: usize,
    init: [f32; G],
    out: &mut [f32],
) -> [f32; G] {
    assert!(G <= 1 || n <= S, "scan rows overlap");
    let len = (G.saturating_sub(1) * S).saturating_add(n);
    let (a, b, out) = (&a[..len], &b[..len], &mut out[..len]);
    if rev != 0 {
        let (r0, r1) = (rev & 1 == 1, rev & 2 == 2);
        return scan_run::<G, S>(
            a,
            b,
            n,
            init,
            out,
            |x: f32, r: f32| {
                if r0 {
                    eval(op[0], r, x)
                } else {
                    eval(op[0], x, r)
                }
            },
            |t: f32, y: f32| {
                if r1 {
                    eval(op[1], y, t)
                } else {
                    eval(op[1], t, y)
                }
            },
            |x| x,
        );
    }
    let same = |x: f32| x;
    macro_rules! second {
        ($f0:expr) => {
            match op[1] {
                Alu::Add => {
                    scan_run::<G, S>(a, b, n, init, out, $f0, |x: f32, y: f32| canon(x + y), same)
                }
                Alu::Subtract => {
                    scan_run::<G, S>(a, b, n, init, out, $f0, |x: f32, y: f32| canon(x - y), same)
                }
                Alu::Multiply => {
                    scan_run::<G, S>(a, b, n, init, out, $f0, |x: f32, y: f32| canon(x * y), same)
                }
                Alu::Max => scan_run::<G, S>(a, b, n, init, out, $f0, max, same),
                Alu::Min => scan_run::<G, S>(a, b, n, init, out, $f0, min, same),
                Alu::Bypass => scan_run::<G, S>(a, b, n, init, out, $f0, |x: f32, _y: f32| x, same),
                o => scan_run::<G, S>(
                    a,
                    b,
                    n,
                    init,
                    out,
                    $f0,
                    |x: f32, y: f32| eval(o, x, y),
                    same,
                ),
            }
        };
    }
    // `add`, `subtract`, `multiply` give NaN exactly when an operand is NaN, whatever its
    // encoding, and otherwise the IEEE result: a chain of them computed without
    // canonicalising each step is NaN where the defined chain is, and equal to it elsewhere,
    // so canonicalising each written value gives the defined values with two operations fewer
    // on the dependency chain.
    macro_rules! raw {
        ($f0:expr, $c1:expr) => {
            match $c1 {
                Chain::Add => {
                    scan_run::<G, S>(a, b, n, init, out, $f0, |x: f32, y: f32| x + y, canon)
                }
                Chain::Subtract => {
                    scan_run::<G, S>(a, b, n, init, out, $f0, |x: f32, y: f32| x - y, canon)
                }
                Chain::Multiply => {
                    scan_run::<G, S>(a, b, n, init, out, $f0, |x: f32, y: f32| x * y, canon)
                }
            }
        };
    }
    /// An operation of such a chain.
    #[derive(Copy, Clone)]
    enum Chain {
        Add,
        Subtract,
        Multiply,
    }
    let chain = |o: Alu| match o {
        Alu::Add => Some(Chain::Add),
        Alu::Subtract => Some(Chain::Subtract),
        Alu::Multiply => Some(Chain::Multiply),
        _ => None,
    };
    if let (Some(c0), Some(c1)) = (chain(op[0]), chain(op[1])) {
        return match c0 {
            Chain::Add => raw!(|x: f32, y: f32| x + y, c1),
            Chain::Subtract => raw!(|x: f32, y: f32| x - y, c1),
            Chain::Multiply => raw!(|x: f32, y: f32| x * y, c1),
        };
    }
    match op[0] {
        Alu::Add => second!(|x: f32, y: f32| canon(x + y)),
        Alu::Subtract => second!(|x: f32, y: f32| canon(x - y)),
        Alu::Multiply => second!(|x: f32, y: f32| canon(x * y)),
        Alu::Max => second!(max),
        Alu::Min => second!(min),
        o => scan_run::<G, S>(
            a,
            b,
            n,
            init,
            out,
            |x: f32, y: f32| eval(o, x, y),
            |x: f32, y: f32| eval(op[1], x, y),
            same,
        ),
    }
}

/// For each row `g` (elements `g·S ..` of each buffer): `r = f1(f0(a[i], r), b[i])`,
/// `out[i] = fin(r)`, step `i` of every row before step `i + 1` of any; returns `fin` of each
/// row's last `r` (`init` for empty rows). The chains carry `r` itself; `fin` (the identity or
/// the canonical NaN) is applied to the written rows in a second pass.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn scan_run<const G: usize, const S: usize>(
    a: &[f32],
    b: &[f32],
    n: usize,
    init: [f32; G],
    out: &mut [f32],
    f0: impl Fn(f32, f32) -> f32,
    f1: impl Fn(f32, f32) -> f32,
    fin: impl Fn(f32) -> f32,
) -> [f32; G] {
    let mut r = init;
    for i in 0..n {
        for (g, r) in r.iter_mut().enumerate() {
            let k = g * S + i;
            *r = f1(f0(a[k], *r), b[k]);
            out[k] = *r;
        }
    }
    for g in 0..G {
        for o in &mut out[g * S..g * S + n] {
            *o = fin(*o);
        }
    }
    r.map(fin)
}

/// Folds `values` into 16 partial results: `acc[l] = op(acc[l], values[16·k + l])` for each
/// whole block `k`, in block order (the order of the engines' reductions).
///
/// `max` and `min` give one result for a set of values whatever their order (the largest or
/// smallest value, `+0` over `-0` for `max` and `-0` over `+0` for `min`, the canonical NaN if
/// any is NaN): their blocks are folded in four independent chains (block `k` into chain
/// `k mod 4`, from the operation's identity), combined at the end, which gives the same bits
/// without one chain's latency per block.
///
/// For `add` and `multiply` a NaN partial may keep whatever NaN encoding the host produced:
/// NaN is absorbing there, so the partial stays NaN, and combining the partials with [`eval`]
/// gives the canonical NaN, the same bits as canonicalising every step. (Canonicalising every
/// step would put a compare and a blend on the fold's one dependency chain and more than
/// double its latency.)
///
/// # Panics
/// If `values.len()` is not a multiple of 16, or the CPU does not support `isa`.
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the last arm is the general definition (`eval`, `eval_bits`), right for every operation; the others are fast paths"
)]
pub fn fold16(isa: Isa, op: Alu, acc: &mut [f32; 16], values: &[f32]) {
    assert_eq!(values.len() % 16, 0, "fold16 takes whole blocks of 16");
    match op {
        Alu::Add => fold::<_, _, false>(isa, acc, values, |x: f32, y: f32| x + y, 0.0),
        Alu::Multiply => fold::<_, _, false>(isa, acc, values, |x: f32, y: f32| x * y, 1.0),
        Alu::Max => fold::<_, _, true>(isa, acc, values, max, f32::NEG_INFINITY),
        Alu::Min => fold::<_, _, true>(isa, acc, values, min, f32::INFINITY),
        _ => fold::<_, _, false>(isa, acc, values, |x: f32, y: f32| eval(op, x, y), 0.0),
    }
}

/// [`fold16`] on 32-bit integer lanes, with [`eval_bits`].
///
/// # Panics
/// As [`fold16`].
pub fn fold16_bits(isa: Isa, op: Alu, acc: &mut [i32; 16], values: &[i32]) {
    assert_eq!(values.len() % 16, 0, "fold16 takes whole blocks of 16");
    fold::<_, _, false>(isa, acc, values, |x: i32, y: i32| eval_bits(op, x, y), 0)
}

/// Folds `values` into `acc` ([`fold16`]): in block order, or with `UNORDERED` (an operation
/// whose result does not depend on the order) in four chains of blocks, block `k` into chain
/// `k mod 4` (the first from `acc`, the others from `identity`), the blocks after the last
/// whole group of four into the first, then the chains combined.
#[inline(always)]
fn fold<T: Copy, F: Fn(T, T) -> T, const UNORDERED: bool>(
    isa: Isa,
    acc: &mut [T; 16],
    values: &[T],
    f: F,
    identity: T,
) {
    #[inline(always)]
    fn body<T: Copy, F: Fn(T, T) -> T, const UNORDERED: bool>(
        acc: &mut [T; 16],
        values: &[T],
        f: F,
        identity: T,
    ) {
        let mut a0 = *acc;
        if UNORDERED {
            let (mut a1, mut a2, mut a3) = ([identity; 16], [identity; 16], [identity; 16]);
            let mut groups = values.chunks_exact(64);
            for g in &mut groups {
                for l in 0..16 {
                    a0[l] = f(a0[l], g[l]);
                    a1[l] = f(a1[l], g[16 + l]);
                    a2[l] = f(a2[l], g[32 + l]);
                    a3[l] = f(a3[l], g[48 + l]);
                }
            }
            for l in 0..16 {
                a1[l] = f(a1[l], a3[l]);
                a2[l] = f(a2[l], a1[l]);
            }
            for block in groups.remainder().chunks_exact(16) {
                for l in 0..16 {
                    a0[l] = f(a0[l], block[l]);
                }
            }
            for l in 0..16 {
                a0[l] = f(a0[l], a2[l]);
            }
            *acc = a0;
            return;
        }
        for block in values.chunks_exact(16) {
            for l in 0..16 {
                a0[l] = f(a0[l], block[l]);
            }
        }
        *acc = a0;
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn body_avx2<T: Copy, F: Fn(T, T) -> T, const UNORDERED: bool>(
        acc: &mut [T; 16],
        values: &[T],
        f: F,
        identity: T,
    ) {
        body::<T, F, UNORDERED>(acc, values, f, identity)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn body_avx512<T: Copy, F: Fn(T, T) -> T, const UNORDERED: bool>(
        acc: &mut [T; 16],
        values: &[T],
        f: F,
        identity: T,
    ) {
        body::<T, F, UNORDERED>(acc, values, f, identity)
    }
    match isa {
        Isa::Portable => body::<T, F, UNORDERED>(acc, values, f, identity),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 and FMA (`assert_supported`).
            unsafe { body_avx2::<T, F, UNORDERED>(acc, values, f, identity) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F/BW/VL (`assert_supported`).
            unsafe { body_avx512::<T, F, UNORDERED>(acc, values, f, identity) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            body::<T, F, UNORDERED>(acc, values, f, identity)
        }
    }
}

/// Applies `f` lane by lane, in a loop compiled for `isa`.
#[inline(always)]
fn run<T: Copy, F: Fn(T, T) -> T>(isa: Isa, a: &[T], b: Rhs<'_, T>, out: &mut [T], f: F) {
    let n = out.len();
    let a = &a[..n];
    b.assert_covers(n);
    match isa {
        Isa::Portable => body(a, b, out, f),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 and FMA (`assert_supported`).
            unsafe { body_avx2(a, b, out, f) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F/BW/VL (`assert_supported`).
            unsafe { body_avx512(a, b, out, f) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            body(a, b, out, f)
        }
    }
}

/// Applies `f` lane by lane in place, in a loop compiled for `isa`.
#[inline(always)]
fn run_assign<T: Copy, F: Fn(T, T) -> T>(isa: Isa, acc: &mut [T], b: Rhs<'_, T>, f: F) {
    #[inline(always)]
    fn body<T: Copy, F: Fn(T, T) -> T>(acc: &mut [T], b: Rhs<'_, T>, f: F) {
        match b {
            Rhs::Run(b) => {
                let b = &b[..acc.len()];
                for (x, &y) in acc.iter_mut().zip(b) {
                    *x = f(*x, y);
                }
            }
            Rhs::Splat(y) => {
                for x in acc.iter_mut() {
                    *x = f(*x, y);
                }
            }
            Rhs::Repeat { runs, len, times } => {
                let group = len * times;
                for (g, acc) in acc.chunks_mut(group).enumerate() {
                    let run = &runs[g * len..g * len + len.min(acc.len())];
                    for acc in acc.chunks_mut(len) {
                        for (x, &y) in acc.iter_mut().zip(run) {
                            *x = f(*x, y);
                        }
                    }
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn body_avx2<T: Copy, F: Fn(T, T) -> T>(acc: &mut [T], b: Rhs<'_, T>, f: F) {
        body(acc, b, f)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn body_avx512<T: Copy, F: Fn(T, T) -> T>(acc: &mut [T], b: Rhs<'_, T>, f: F) {
        body(acc, b, f)
    }
    b.assert_covers(acc.len());
    match isa {
        Isa::Portable => body(acc, b, f),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX2 and FMA (`assert_supported`).
            unsafe { body_avx2(acc, b, f) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            // SAFETY: the CPU supports AVX-512 F/BW/VL (`assert_supported`).
            unsafe { body_avx512(acc, b, f) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma | Isa::Avx512 | Isa::Avx512Bf16 => {
            isa.assert_supported();
            body(acc, b, f)
        }
    }
}

#[inline(always)]
fn body<T: Copy, F: Fn(T, T) -> T>(a: &[T], b: Rhs<'_, T>, out: &mut [T], f: F) {
    match b {
        Rhs::Run(b) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        Rhs::Splat(y) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
        }
        Rhs::Repeat { runs, len, times } => {
            let group = len * times;
            for (g, (out, a)) in out.chunks_mut(group).zip(a.chunks(group)).enumerate() {
                let run = &runs[g * len..g * len + len.min(out.len())];
                for (out, a) in out.chunks_mut(len).zip(a.chunks(len)) {
                    for ((o, &x), &y) in out.iter_mut().zip(a).zip(run) {
                        *o = f(x, y);
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn body_avx2<T: Copy, F: Fn(T, T) -> T>(a: &[T], b: Rhs<'_, T>, out: &mut [T], f: F) {
    body(a, b, out, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn body_avx512<T: Copy, F: Fn(T, T) -> T>(a: &[T], b: Rhs<'_, T>, out: &mut [T], f: F) {
    body(a, b, out, f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::convert::tests::Rng;

    /// Special values, then random bit patterns and random ordinary values.
    fn inputs() -> Vec<f32> {
        let mut v = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            3.0,
            -7.25,
            f32::MIN_POSITIVE,
            1e-45,
            -1e-45,
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::from_bits(0xffc0_0001),
            16777217.0,
            2.5,
            -2.5,
        ];
        let mut rng = Rng::new(11);
        for _ in 0..3000 {
            v.push(f32::from_bits(rng.next_u32()));
            v.push((rng.next_u32() % 2001) as f32 / 100.0 - 10.0);
        }
        v
    }

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits()
    }

    /// The extreme of `values` by its definition: the canonical NaN if any is NaN; else the
    /// largest (`max`) or smallest (`min`) value, a zero of either sign that ties taking `+0`
    /// for `max` and `-0` for `min`.
    fn extreme(op: Alu, values: &[f32]) -> f32 {
        if values.iter().any(|v| v.is_nan()) {
            return f32::from_bits(0x7fc0_0000);
        }
        let is_max = op == Alu::Max;
        let start = if is_max {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        };
        let m = values.iter().fold(start, |m, &v| {
            if (is_max && v > m) || (!is_max && v < m) {
                v
            } else {
                m
            }
        });
        if m == 0.0 {
            let preferred = values
                .iter()
                .any(|v| *v == 0.0 && v.is_sign_positive() == is_max);
            return if preferred == is_max { 0.0 } else { -0.0 };
        }
        m
    }

    /// `max` and `min` folds (four chains of blocks) give, lane by lane, the extreme of the
    /// lane's values on every path, for any number of blocks.
    #[test]
    fn max_and_min_folds_give_each_lanes_extreme() {
        let mut xs = inputs();
        // Many signed zeros: ties between them decide lanes.
        for i in (0..xs.len()).step_by(7) {
            xs[i] = if i % 2 == 0 { 0.0 } else { -0.0 };
        }
        let no_nan: Vec<f32> = xs.iter().copied().filter(|v| !v.is_nan()).collect();
        for vals in [&xs, &no_nan] {
            let start: [f32; 16] = core::array::from_fn(|l| vals[vals.len() - 1 - l]);
            for blocks in [0, 1, 3, 4, 5, 8, 13, 100] {
                let values = &vals[..16 * blocks];
                for op in [Alu::Max, Alu::Min] {
                    for isa in Isa::supported() {
                        let mut acc = start;
                        fold16(isa, op, &mut acc, values);
                        for (l, got) in acc.iter().enumerate() {
                            let lane: Vec<f32> = core::iter::once(start[l])
                                .chain(values.iter().skip(l).step_by(16).copied())
                                .collect();
                            let want = extreme(op, &lane);
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{op:?} {isa:?}, {blocks} blocks, lane {l}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn definitions_against_f64() {
        let xs = inputs();
        for &a in &xs[..200] {
            for &b in &xs[..200] {
                let (x, y) = (a as f64, b as f64);
                // Correctly rounded in f64 then to f32: equal to the single IEEE f32 result.
                // f64 has more than twice f32's precision plus 2 bits, so rounding the f64
                // result to f32 gives the correctly rounded f32 result.
                let cases = [
                    (Alu::Add, x + y),
                    (Alu::Subtract, x - y),
                    (Alu::Multiply, x * y),
                    (Alu::Divide, x / y),
                ];
                for (op, want) in cases {
                    let got = eval(op, a, b);
                    let want = want as f32;
                    if want.is_nan() {
                        assert_eq!(got.to_bits(), 0x7fc0_0000, "{op} {a:e} {b:e}");
                    } else {
                        assert!(same(got, want), "{op} {a:e} {b:e}: {got:e} vs {want:e}");
                    }
                }
                let m = eval(Alu::Max, a, b);
                if a.is_nan() || b.is_nan() {
                    assert_eq!(m.to_bits(), 0x7fc0_0000);
                } else {
                    assert_eq!(m as f64, x.max(y), "max {a:e} {b:e}");
                }
                assert_eq!(eval(Alu::IsLt, a, b) == 1.0, x < y);
                assert_eq!(eval(Alu::NotEqual, a, b) == 1.0, x != y);
                if b != 0.0 && a.is_finite() && b.is_finite() {
                    let r = eval(Alu::Fmod, a, b) as f64;
                    assert_eq!(r, x % y, "fmod {a:e} {b:e}");
                }
            }
        }
        assert!(same(eval(Alu::Max, -0.0, 0.0), 0.0));
        assert!(same(eval(Alu::Max, 0.0, -0.0), 0.0));
        assert!(same(eval(Alu::Min, 0.0, -0.0), -0.0));
        assert!(same(eval(Alu::Min, -0.0, 0.0), -0.0));
        assert_eq!(eval(Alu::Mod, -7.0, 3.0), 2.0);
        assert_eq!(eval(Alu::Mod, 7.0, -3.0), -2.0);
        assert_eq!(eval(Alu::Fmod, -7.0, 3.0), -1.0);
        assert_eq!(eval(Alu::LogicalAnd, f32::NAN, 2.0), 1.0);
        assert_eq!(eval(Alu::LogicalNot, 0.0, 0.0), 1.0);
        assert_eq!(eval_bits(Alu::LeftShift, 1, 31), i32::MIN);
        assert_eq!(eval_bits(Alu::LeftShift, 1, 32), 0);
        assert_eq!(eval_bits(Alu::RightShift, -1, 28), 15);
        assert_eq!(eval_bits(Alu::RightShift, 5, -1), 0);
        assert_eq!(eval_bits(Alu::Invert, 0, 0), -1);
    }

    #[test]
    fn every_path_matches_the_definition() {
        let xs = inputs();
        let ys: Vec<f32> = xs.iter().rev().copied().collect();
        for &op in Alu::ALL {
            if op.class() == nki_lang::AluClass::Bitvec {
                continue;
            }
            for isa in Isa::supported() {
                for rev in [false, true] {
                    let mut out = vec![0.0f32; xs.len() - 3];
                    apply(isa, op, &xs, Rhs::Run(&ys), rev, &mut out);
                    for (i, &o) in out.iter().enumerate() {
                        let (a, b) = if rev { (ys[i], xs[i]) } else { (xs[i], ys[i]) };
                        let want = eval(op, a, b);
                        assert!(same(o, want), "{isa:?} {op} {a:e} {b:e}: {o:e} vs {want:e}");
                    }
                    apply(isa, op, &xs, Rhs::Splat(2.5), rev, &mut out);
                    for (i, &o) in out.iter().enumerate() {
                        let (a, b) = if rev { (2.5, xs[i]) } else { (xs[i], 2.5) };
                        assert!(same(o, eval(op, a, b)), "{isa:?} {op} splat");
                    }
                    // Runs of 7 repeated 3 times, the last group cut short.
                    let (len, times) = (7, 3);
                    let at = |i: usize| i / (len * times) * len + i % len;
                    let rhs = Rhs::Repeat {
                        runs: &ys,
                        len,
                        times,
                    };
                    apply(isa, op, &xs, rhs, rev, &mut out);
                    let mut acc = xs[..out.len()].to_vec();
                    apply_assign(isa, op, &mut acc, rhs, rev);
                    for (i, (&o, &x)) in out.iter().zip(&acc).enumerate() {
                        let y = ys[at(i)];
                        let (a, b) = if rev { (y, xs[i]) } else { (xs[i], y) };
                        let want = eval(op, a, b);
                        assert!(same(o, want), "{isa:?} {op} repeat {i}: {o:e} vs {want:e}");
                        assert!(same(x, want), "{isa:?} {op} repeat in place {i}");
                    }
                }
            }
        }
        let mut rng = Rng::new(5);
        let a: Vec<i32> = (0..1000).map(|_| rng.next_u32() as i32).collect();
        let b: Vec<i32> = (0..1000)
            .map(|_| (rng.next_u32() % 40) as i32 - 4)
            .collect();
        for &op in Alu::ALL {
            for isa in Isa::supported() {
                let mut out = vec![0i32; 1000];
                apply_bits(isa, op, &a, Rhs::Run(&b), false, &mut out);
                for i in 0..1000 {
                    assert_eq!(out[i], eval_bits(op, a[i], b[i]), "{isa:?} {op}");
                }
            }
        }
    }

    #[test]
    fn pairwise_combination_matches_the_definition() {
        let xs = inputs();
        let mut rng = Rng::new(8);
        for &op in Alu::ALL {
            for _ in 0..200 {
                let acc: [f32; 16] = core::array::from_fn(|_| xs[rng.next_u32() as usize % 40]);
                let mut want = acc;
                for w in [8, 4, 2, 1] {
                    for l in 0..w {
                        want[l] = eval(op, want[l], want[l + w]);
                    }
                }
                for isa in Isa::supported() {
                    let mut a = acc;
                    assert!(
                        same(pairwise16(isa, op, &mut a), want[0]),
                        "{isa:?} {op} {acc:?}"
                    );
                }
                let mut bits: [i32; 16] = core::array::from_fn(|_| rng.next_u32() as i32);
                let mut want = bits;
                for w in [8, 4, 2, 1] {
                    for l in 0..w {
                        want[l] = eval_bits(op, want[l], want[l + w]);
                    }
                }
                assert_eq!(pairwise16_bits(op, &mut bits), want[0], "{op}");
            }
        }
    }

    #[test]
    fn scans_match_the_definition() {
        let xs = inputs();
        let ys: Vec<f32> = xs.iter().rev().copied().collect();
        for &op0 in Alu::ALL {
            for &op1 in Alu::ALL {
                if op0.class() == nki_lang::AluClass::Bitvec
                    || op1.class() == nki_lang::AluClass::Bitvec
                {
                    continue;
                }
                // Small values keep most chains finite; the specials come first.
                let n = 300;
                for rev in 0..4u8 {
                    let mut out = vec![0f32; n];
                    let last = scan([op0, op1], rev, &xs, &ys, 0.5, &mut out);
                    let mut r = 0.5f32;
                    for i in 0..n {
                        let t = match rev & 1 {
                            0 => eval(op0, xs[i], r),
                            _ => eval(op0, r, xs[i]),
                        };
                        r = match rev & 2 {
                            0 => eval(op1, t, ys[i]),
                            _ => eval(op1, ys[i], t),
                        };
                        assert!(
                            same(out[i], r),
                            "{op0} {op1} rev {rev} step {i}: {} vs {r}",
                            out[i]
                        );
                    }
                    assert!(same(last, r));
                }
            }
        }
    }

    #[test]
    fn in_place_routines_match_the_definition() {
        let xs = inputs();
        let ys: Vec<f32> = xs.iter().rev().copied().collect();
        for &op in Alu::ALL {
            if op.class() == nki_lang::AluClass::Bitvec {
                continue;
            }
            for isa in Isa::supported() {
                for rev in [false, true] {
                    let mut acc = xs[..xs.len() - 3].to_vec();
                    apply_assign(isa, op, &mut acc, Rhs::Run(&ys), rev);
                    for (i, &o) in acc.iter().enumerate() {
                        let (a, b) = if rev { (ys[i], xs[i]) } else { (xs[i], ys[i]) };
                        let want = eval(op, a, b);
                        assert!(same(o, want), "{isa:?} {op} {a:e} {b:e}: {o:e} vs {want:e}");
                    }
                    for y in [-0.0, 1.0, f32::NEG_INFINITY, f32::NAN] {
                        let mut acc = xs.clone();
                        apply_assign(isa, op, &mut acc, Rhs::Splat(y), rev);
                        for (i, &o) in acc.iter().enumerate() {
                            let (a, b) = if rev { (y, xs[i]) } else { (xs[i], y) };
                            assert!(same(o, eval(op, a, b)), "{isa:?} {op} splat {y}");
                        }
                    }
                }
            }
        }
        let mut rng = Rng::new(6);
        let a: Vec<i32> = (0..1000).map(|_| rng.next_u32() as i32).collect();
        let b: Vec<i32> = (0..1000)
            .map(|_| (rng.next_u32() % 40) as i32 - 4)
            .collect();
        for &op in Alu::ALL {
            for isa in Isa::supported() {
                for rev in [false, true] {
                    let mut acc = a.clone();
                    apply_bits_assign(isa, op, &mut acc, Rhs::Run(&b), rev);
                    for i in 0..1000 {
                        let (x, y) = if rev { (b[i], a[i]) } else { (a[i], b[i]) };
                        assert_eq!(acc[i], eval_bits(op, x, y), "{isa:?} {op}");
                    }
                }
            }
        }
    }
}
