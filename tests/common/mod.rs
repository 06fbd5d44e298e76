//! Helpers shared by the conformance tests: deterministic inputs, independent references of
//! the documented reduction order, comparisons, and the compiled program's tiles.
//!
//! Nothing here calls the code under test: the references are plain f32/f64 loops written from
//! the documented definitions.

#![allow(dead_code)]

use nki::ndarray::{Array, Dimension};
use nki::program::{DType, Program};

/// Deterministic values in `[lo, hi)` (xorshift).
pub fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let u = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            lo + (hi - lo) * u
        })
        .collect()
}

/// An f32 array of `shape` with values in `[lo, hi)`.
pub fn rand_f32<D: Dimension>(shape: D, seed: u64, lo: f64, hi: f64) -> Array<f32, D> {
    let n = shape.size();
    let v: Vec<f32> = values(n, seed, lo, hi).iter().map(|&x| x as f32).collect();
    Array::from_shape_vec(shape, v).unwrap()
}

/// An f32 array of `shape` with small integer values in `[lo, hi]` (exact in every float type
/// down to fp8 for |v| ≤ 8).
pub fn rand_int<D: Dimension>(shape: D, seed: u64, lo: i64, hi: i64) -> Array<f32, D> {
    let n = shape.size();
    let v: Vec<f32> = values(n, seed, 0.0, 1.0)
        .iter()
        .map(|&u| (lo + ((hi - lo + 1) as f64 * u).floor() as i64) as f32)
        .collect();
    Array::from_shape_vec(shape, v).unwrap()
}

/// The documented reduction order: value `i` folded into partial `i mod 16` (each partial starts
/// at the identity), then partial `l` absorbs `l + 8`, `l + 4`, `l + 2`, `l + 1`.
pub fn fold16(
    values: impl IntoIterator<Item = f32>,
    identity: f32,
    op: impl Fn(f32, f32) -> f32,
) -> f32 {
    let mut p = [identity; 16];
    for (i, v) in values.into_iter().enumerate() {
        p[i % 16] = op(p[i % 16], v);
    }
    for w in [8, 4, 2, 1] {
        for l in 0..w {
            p[l] = op(p[l], p[l + w]);
        }
    }
    p[0]
}

/// The sum in the documented order (identity −0.0).
pub fn sum16(values: impl IntoIterator<Item = f32>) -> f32 {
    fold16(values, -0.0, |a, b| a + b)
}

/// IEEE 754-2019 `maximum` with canonical NaN (the documented ALU `maximum`).
pub fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::from_bits(0x7fc0_0000)
    } else if a == b {
        if a.is_sign_negative() && b.is_sign_negative() {
            a
        } else {
            a.abs()
        }
    } else if a > b {
        a
    } else {
        b
    }
}

/// IEEE 754-2019 `minimum` with canonical NaN.
pub fn fmin(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::from_bits(0x7fc0_0000)
    } else if a == b {
        if a.is_sign_negative() || b.is_sign_negative() {
            -a.abs()
        } else {
            a
        }
    } else if a < b {
        a
    } else {
        b
    }
}

/// NumPy's floored remainder, computed in f64 (the fmod is exact; the correction rounds once).
pub fn floored_mod(a: f32, b: f32) -> f32 {
    let (x, y) = (a as f64, b as f64);
    let r = x % y;
    if r.is_nan() {
        return f32::NAN;
    }
    if r != 0.0 && (r < 0.0) != (y < 0.0) {
        (r + y) as f32
    } else {
        r as f32
    }
}

/// A core on every host path the machine has, with a label naming it: each supported ISA on
/// one thread and on two with plain launches (the host's shortcuts), and on two with strict
/// ones (every instruction as written).
pub fn host_paths() -> impl Iterator<Item = (String, nki::prelude::NeuronCore)> {
    nki::Isa::supported().into_iter().flat_map(|isa| {
        [(1, false), (2, false), (2, true)]
            .into_iter()
            .map(move |(threads, strict)| {
                let core = nki::prelude::NeuronCore::default()
                    .with_isa(isa)
                    .expect("a supported ISA")
                    .with_host_threads(threads)
                    .with_strict(strict);
                (
                    format!("{isa:?} on {threads} threads (strict {strict})"),
                    core,
                )
            })
    })
}

/// Same bits, or both NaN and the got one canonical (`0x7fc0_0000`).
pub fn same_f32(got: f32, want: f32) -> bool {
    if want.is_nan() {
        got.to_bits() == 0x7fc0_0000
    } else {
        got.to_bits() == want.to_bits()
    }
}

/// Asserts bit equality element by element (NaN: canonical).
#[track_caller]
pub fn assert_bits<'a>(
    what: &str,
    got: impl IntoIterator<Item = &'a f32>,
    want: impl IntoIterator<Item = f32>,
) {
    let mut n = 0;
    for (i, (&g, w)) in got.into_iter().zip(want).enumerate() {
        assert!(
            same_f32(g, w),
            "{what}: element {i}: got {g:e} ({:#010x}), want {w:e} ({:#010x})",
            g.to_bits(),
            w.to_bits()
        );
        n += 1;
    }
    assert!(n > 0, "{what}: nothing compared");
}

/// Asserts `|got − want| ≤ rel·|want| + abs` element by element.
#[track_caller]
pub fn assert_close<'a>(
    what: &str,
    got: impl IntoIterator<Item = &'a f32>,
    want: impl IntoIterator<Item = f64>,
    rel: f64,
    abs: f64,
) {
    let mut n = 0;
    for (i, (&g, w)) in got.into_iter().zip(want).enumerate() {
        let ok = (g as f64 - w).abs() <= rel * w.abs() + abs || (w.is_nan() && g.is_nan());
        assert!(ok, "{what}: element {i}: got {g:e}, want {w:e}");
        n += 1;
    }
    assert!(n > 0, "{what}: nothing compared");
}

/// The dtype and dims of the tile the kernel bound to `name` (its `let` name).
#[track_caller]
pub fn tile(p: &Program<'_>, name: &str) -> (DType, Vec<u32>) {
    let t = p
        .tiles()
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tile `{name}` in\n{p}"));
    (t.dtype, t.shape.dims().to_vec())
}

/// Whether the listing has an instruction line with this engine and mnemonic.
pub fn has_instr(p: &Program<'_>, engine: &str, mnemonic: &str) -> bool {
    p.to_string().lines().any(|l| {
        let mut w = l.split_whitespace();
        w.next()
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
            && w.next() == Some(engine)
            && w.next() == Some(mnemonic)
    })
}
