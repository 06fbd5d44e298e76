//! The reference interpreter: evaluates a [`Case`] element by element, iteration by iteration,
//! straight from the program description (nothing of nki's IR or runtime is used).
//!
//! Every tile element holds a [`Val`]. Loads, memsets, copies, transposes, elementwise
//! operations, `maximum` reductions and stores are exact (fp32 arithmetic, one rounding to the
//! destination's dtype). A `tensor_reduce(add)` of exact values follows the order
//! `docs/numerics.md` defines (16 partials, combined pairwise) and is exact too; one of ranges
//! is a range. A matmul is a range: the f64 sum ± the fp32 bound of [`sum_range`].

use super::numerics::{CANONICAL_NAN, Sum, Val, act_val, bin, bin_val, daz, round_to, sum_range};
use super::spec::{Bin, Carry, Case, Dt, Eng, Layout, Op, Red, Scalar, Stage, Step};

/// Every output element's expected value, per output, row-major (`None`: never written).
pub type Expected = Vec<Vec<Option<Val>>>;

/// Evaluates the case. Panics if the program writes an output element twice or reads a step
/// not yet computed (generator bugs, not properties of nki).
pub fn evaluate(case: &Case) -> Expected {
    let program = &case.program;
    let mut outs: Expected = program
        .outputs
        .iter()
        .map(|t| vec![None; t.len()])
        .collect();
    for stage in &program.stages {
        run_stage(case, stage, &mut outs[stage.output]);
    }
    outs
}

/// Evaluates one stage into its output's expected values.
fn run_stage(case: &Case, stage: &Stage, out: &mut [Option<Val>]) {
    let program = &case.program;
    let otensor = program.outputs[stage.output];
    let result = stage.steps[stage.result].tile;
    let (p, f) = (i64::from(result.p), i64::from(result.f));
    // The stored box (the result's written elements).
    let (sp, sf) = (i64::from(stage.stored[0]), i64::from(stage.stored[1]));
    let len = (p * f) as usize;
    // The accumulator of `Carry::Tile`, and the operand pairs of every term of each element
    // of an accumulation group.
    let mut acc: Vec<Val> = match stage.carry {
        Some(Carry::Tile { dt, init, .. } | Carry::Accumulate { dt, init, .. }) => {
            vec![Val::Exact(round_to(dt, init)); len]
        }
        _ => Vec::new(),
    };
    let mut group: Vec<Dot> = vec![Dot::default(); len];
    let mut group_terms = 0;
    let n = stage.iterations();
    for it in 0..n {
        let vars = stage.vars(it);
        let mut tiles: Vec<Vec<Val>> = Vec::with_capacity(stage.steps.len());
        for step in &stage.steps {
            let v = eval_step(case, stage, step, &tiles, &vars);
            tiles.push(v);
        }
        let res = &tiles[stage.result];
        match stage.carry {
            // Exact, order-free combinations (`maximum`/`minimum`; rounding to `dt` commutes
            // with them) fold in any order.
            Some(Carry::Tile { dt, op, .. })
            | Some(Carry::Accumulate {
                dt,
                op: op @ (Bin::Max | Bin::Min),
                ..
            }) => {
                for (a, &r) in acc.iter_mut().zip(res) {
                    *a = bin_val(op, *a, r).round(dt);
                }
            }
            Some(Carry::Accumulate { .. }) => {
                // `+=` in an order the iterations do not promise: a sum of every iteration's
                // terms (and the initial value), with one rounding per iteration.
                for (g, &r) in group.iter_mut().zip(res) {
                    g.add(r.convert(result.dt, Dt::F32), Val::Exact(1.0));
                }
            }
            Some(Carry::Group { .. }) => {
                let Op::Matmul { stationary, moving } = stage.steps[stage.result].op else {
                    panic!("generator bug: a group's result is a matmul");
                };
                let (s, m) = (&tiles[stationary], &tiles[moving]);
                group_terms += s.len() / result.p as usize;
                let dots = matmul_dots(s, m, p as usize, f as usize);
                for (g, d) in group.iter_mut().zip(&dots) {
                    g.merge(d);
                }
            }
            None => {
                for r in 0..sp {
                    for c in 0..sf {
                        let (row, col) =
                            stage
                                .layout
                                .element(i64::from(n), i64::from(it), sp, sf, r, c);
                        if row >= i64::from(otensor.rows) {
                            // Cut off by the ragged last block's mask.
                            continue;
                        }
                        let v = res[(r * f + c) as usize].convert(result.dt, otensor.dt);
                        put(out, otensor.cols, row, col, v);
                    }
                }
            }
        }
    }
    let stored: Vec<Val> = match stage.carry {
        Some(Carry::Tile { .. }) => acc,
        Some(Carry::Accumulate {
            op: Bin::Max | Bin::Min,
            ..
        }) => acc,
        // f32 (the generator's rule); the `Dot`'s flush-to-zero allowance covers subnormal
        // terms the engines keep.
        Some(Carry::Accumulate { init, .. }) => group
            .iter_mut()
            .map(|dot| {
                dot.add(Val::Exact(init), Val::Exact(1.0));
                dot.value(n as usize + 1)
            })
            .collect(),
        // The PSUM sum over every iteration's terms, copied to an SBUF tile of `dt`.
        Some(Carry::Group { dt }) => group
            .iter()
            .map(|dot| dot.value(group_terms).convert(Dt::F32, dt))
            .collect(),
        None => return,
    };
    let dt = stage.carry.map_or(result.dt, Carry::dt);
    for r in 0..p {
        for c in 0..f {
            let (row, col) = Layout::RowBlocks.element(1, 0, p, f, r, c);
            let v = stored[(r * f + c) as usize].convert(dt, otensor.dt);
            put(out, otensor.cols, row, col, v);
        }
    }
}

/// Stores one element (already in the output's dtype), refusing a second write.
fn put(out: &mut [Option<Val>], cols: u32, row: i64, col: i64, v: Val) {
    let i = (row * i64::from(cols) + col) as usize;
    assert!(
        out[i].is_none(),
        "generator bug: output element {i} written twice"
    );
    out[i] = Some(v);
}

/// The new tile one step writes, row-major: the operation's values, then their conversion to
/// the tile's dtype from the dtype they were computed in (fp32 for the engines' arithmetic,
/// the source's for moves).
fn eval_step(
    case: &Case,
    stage: &Stage,
    step: &Step,
    tiles: &[Vec<Val>],
    vars: &[i64],
) -> Vec<Val> {
    let t = step.tile;
    let (p, f) = (t.p as usize, t.f as usize);
    // The mask's box on the instruction's grid (a reduction's: its input's).
    let [mp, mf] = step.mask.map_or([u32::MAX; 2], |m| m).map(|x| x as usize);
    let kept = |e: usize| e / f < mp && e % f < mf;
    let from = match step.op {
        Op::Load { input, .. } => case.program.inputs[input].dt,
        // The Scalar engine copies through fp32 even within one dtype (docs/language.md).
        Op::Copy { a, engine } if engine != Eng::Scalar => stage.steps[a].tile.dt,
        _ => Dt::F32,
    };
    let v: Vec<Val> = match &step.op {
        Op::Load { input, window, .. } => {
            let tensor = case.program.inputs[*input];
            let data = &case.inputs[*input];
            (0..p * f)
                .map(|e| {
                    if !kept(e) {
                        // Masked off: not read (it may lie past the input's end).
                        return Val::Any;
                    }
                    let (row, col) = window.element(vars, (e / f) as i64, (e % f) as i64);
                    Val::Exact(data[(row * i64::from(tensor.cols) + col) as usize])
                })
                .collect()
        }
        Op::Memset { value, .. } => vec![Val::Exact(*value); p * f],
        Op::TensorTensor { a, b, op, .. } => tiles[*a]
            .iter()
            .zip(&tiles[*b])
            .map(|(&x, &y)| bin_val(*op, x, y))
            .collect(),
        Op::TensorScalar {
            a, first, second, ..
        } => {
            let operand = |s: Scalar, row: usize| match s {
                Scalar::Imm(x) => Val::Exact(x),
                Scalar::Column(c) => tiles[c][row],
            };
            (0..p * f)
                .map(|e| {
                    let mut v = bin_val(first.0, tiles[*a][e], operand(first.1, e / f));
                    if let Some((op, s)) = *second {
                        v = bin_val(op, v, operand(s, e / f));
                    }
                    v
                })
                .collect()
        }
        Op::Copy { a, .. } => tiles[*a].clone(),
        // Integers below 2²⁴: exact in fp32.
        Op::Iota { expr } => (0..p * f)
            .map(|e| Val::Exact(expr.at(vars, (e / f) as i64, (e % f) as i64) as f32))
            .collect(),
        Op::AffineSelect {
            a,
            expr,
            cmp,
            on_false,
        } => (0..p * f)
            .map(|e| {
                if cmp.holds(expr.at(vars, (e / f) as i64, (e % f) as i64)) {
                    // Read into fp32 (then converted to the tile's dtype, below).
                    tiles[*a][e].convert(stage.steps[*a].tile.dt, Dt::F32)
                } else {
                    Val::Exact(*on_false)
                }
            })
            .collect(),
        Op::Activation {
            a,
            func,
            scale,
            bias,
        } => {
            let operand = |s: Scalar, row: usize| match s {
                Scalar::Imm(x) => Val::Exact(x),
                Scalar::Column(c) => tiles[c][row],
            };
            (0..p * f)
                .map(|e| {
                    if !kept(e) {
                        return Val::Any;
                    }
                    let s = operand(*scale, e / f);
                    // No bias: the product alone (an fma adding −0 keeps its sign).
                    let b = bias.map_or(Val::Exact(-0.0), |c| tiles[c][e / f]);
                    act_val(*func, tiles[*a][e], s, b)
                })
                .collect()
        }
        Op::Reduce { a, op, negate } => {
            let src = &tiles[*a];
            let width = src.len() / p;
            (0..p)
                .map(|r| {
                    if r >= mp {
                        return Val::Any;
                    }
                    // Only the columns the mask keeps are reduced.
                    let row = &src[r * width..r * width + width.min(mf)];
                    let v = match op {
                        Red::Max => row.iter().fold(Val::Exact(f32::NEG_INFINITY), |m, &x| {
                            bin_val(Bin::Max, m, x)
                        }),
                        Red::Add => reduce_add(row),
                    };
                    if *negate {
                        bin_val(Bin::Multiply, v, Val::Exact(-1.0))
                    } else {
                        v
                    }
                })
                .collect()
        }
        Op::Transpose { a } => {
            // The source is [f, p] (the result's transpose).
            let src = &tiles[*a];
            (0..p * f).map(|e| src[(e % f) * p + e / f]).collect()
        }
        Op::Matmul { stationary, moving } => {
            let k = tiles[*stationary].len() / p; // stationary is [k, p]
            matmul_dots(&tiles[*stationary], &tiles[*moving], p, f)
                .iter()
                .map(|d| d.value(k))
                .collect()
        }
    };
    // Masked-off elements are not written: undefined in this iteration's new tile (never
    // read by a later step nor stored, by construction; strict mode checks it).
    let reduce = matches!(step.op, Op::Reduce { .. });
    v.into_iter()
        .enumerate()
        .map(|(e, x)| {
            if reduce || kept(e) {
                x.convert(from, t.dt)
            } else {
                Val::Any
            }
        })
        .collect()
}

/// `tensor_reduce(add)` of one row. Exact values: `docs/numerics.md`'s order (value `i` into
/// partial `i mod 16`, each partial starting from the identity, then partial `l` absorbs
/// `l + 8`, `l + 4`, `l + 2`, `l + 1`), each step one fp32 rounding; the result is also
/// checked to lie in the order-free range. The identity is −0 (the doc says "0"; −0 is IEEE's
/// additive identity, so that a sum of −0s is −0, as the engines compute). Ranges:
/// [`sum_range`] over every term.
fn reduce_add(row: &[Val]) -> Val {
    let exact: Option<Vec<f32>> = row
        .iter()
        .map(|v| match v {
            Val::Exact(x) => Some(*x),
            _ => None,
        })
        .collect();
    let Some(xs) = exact else {
        let Some(terms) = row
            .iter()
            .map(|v| v.bounds().map(|(l, h)| (f64::from(l), f64::from(h))))
            .collect::<Option<Vec<_>>>()
        else {
            return Val::Any;
        };
        if terms.iter().any(|t| !t.0.is_finite() || !t.1.is_finite()) {
            return Val::Any;
        }
        return sum_range(&terms, row.len() + 4, 0.0);
    };
    let mut part = [-0.0f32; 16];
    for (i, &x) in xs.iter().enumerate() {
        part[i % 16] = bin(Bin::Add, part[i % 16], x);
    }
    for s in [8, 4, 2, 1] {
        for l in 0..s {
            part[l] = bin(Bin::Add, part[l], part[l + s]);
        }
    }
    let got = part[0];
    if xs.iter().all(|x| x.is_finite()) {
        let terms: Vec<(f64, f64)> = xs.iter().map(|&x| (f64::from(x), f64::from(x))).collect();
        if let Val::Within(lo, hi) = sum_range(&terms, xs.len() + 4, 0.0) {
            assert!(
                lo <= got && got <= hi,
                "reference inconsistent: ordered sum {got:e} outside [{lo:e}, {hi:e}]"
            );
        }
    }
    Val::Exact(got)
}

/// The terms of every element of `stationaryᵀ · moving` (`[k, p]` and `[k, f]`), summed;
/// in plain f64 loops when every operand is exact and finite (the common case), else term by
/// term through [`Dot::add`].
fn matmul_dots(s: &[Val], m: &[Val], p: usize, f: usize) -> Vec<Dot> {
    let k = s.len() / p;
    let finite = |v: &[Val]| {
        v.iter()
            .map(|v| match *v {
                Val::Exact(x) if x.is_finite() => Some(f64::from(daz(x))),
                _ => None,
            })
            .collect::<Option<Vec<f64>>>()
    };
    if let (Some(a), Some(b)) = (finite(s), finite(m)) {
        let mut total = vec![0.0f64; p * f];
        let mut mag = vec![0.0f64; p * f];
        for kk in 0..k {
            let row = &b[kk * f..(kk + 1) * f];
            for i in 0..p {
                let x = a[kk * p + i];
                let (t, g) = (&mut total[i * f..(i + 1) * f], &mut mag[i * f..(i + 1) * f]);
                for j in 0..f {
                    let prod = x * row[j];
                    t[j] += prod;
                    g[j] += prod.abs();
                }
            }
        }
        return (0..p * f)
            .map(|e| {
                let mut d = Dot::default();
                d.sum.add_exact(total[e], mag[e], k);
                d
            })
            .collect();
    }
    (0..p * f)
        .map(|e| {
            let (i, j) = (e / f, e % f);
            let mut d = Dot::default();
            for kk in 0..k {
                d.add(s[kk * p + i], m[kk * f + j]);
            }
            d
        })
        .collect()
}

/// One `nc_matmul` output element (or an accumulation group's), summed term by term:
/// subnormal operands read as zero; special values (exact operands) follow IEEE (any NaN
/// product, or infinities of both signs, give NaN; else an infinity wins) when no finite
/// partial sum can overflow; otherwise the fp32 range of the sum with one rounding per term
/// and `2⁻¹²⁶` per term for flushed tiny partial sums.
#[derive(Copy, Clone, Debug, Default)]
pub struct Dot {
    /// The finite terms (exact ones as ranges of one point).
    sum: Sum,
    /// A term was not exact.
    inexact: bool,
    /// A term was unconstrained, or a range reached a non-finite value.
    any: bool,
    /// A product was NaN (`0 · ∞`, or a NaN operand).
    nan: bool,
    /// A product was `+∞`.
    pos_inf: bool,
    /// A product was `−∞`.
    neg_inf: bool,
}

impl Dot {
    /// Adds the term `a · b`.
    pub fn add(&mut self, a: Val, b: Val) {
        if let (Val::Exact(x), Val::Exact(y)) = (a, b) {
            let t = f64::from(daz(x)) * f64::from(daz(y));
            if t.is_nan() {
                self.nan = true;
            } else if t == f64::INFINITY {
                self.pos_inf = true;
            } else if t == f64::NEG_INFINITY {
                self.neg_inf = true;
            } else {
                self.sum.add_range(t, t);
            }
            return;
        }
        self.inexact = true;
        let (Some((al, ah)), Some((bl, bh))) = (a.bounds(), b.bounds()) else {
            self.any = true;
            return;
        };
        let (al, ah, bl, bh) = (
            f64::from(daz(al)),
            f64::from(daz(ah)),
            f64::from(daz(bl)),
            f64::from(daz(bh)),
        );
        let c = [al * bl, al * bh, ah * bl, ah * bh];
        if c.iter().any(|x| !x.is_finite()) {
            self.any = true;
            return;
        }
        self.sum.add_range(
            c.iter().copied().fold(f64::INFINITY, f64::min),
            c.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        );
    }

    /// Adds another sum's terms.
    pub fn merge(&mut self, other: &Dot) {
        self.sum.merge(&other.sum);
        self.inexact |= other.inexact;
        self.any |= other.any;
        self.nan |= other.nan;
        self.pos_inf |= other.pos_inf;
        self.neg_inf |= other.neg_inf;
    }

    /// The PSUM value after `roundings` accumulation steps.
    pub fn value(&self, roundings: usize) -> Val {
        let special = self.nan || self.pos_inf || self.neg_inf;
        if self.any || (special && self.inexact) {
            return Val::Any;
        }
        if special {
            return if self.nan || (self.pos_inf && self.neg_inf) {
                Val::Exact(CANONICAL_NAN)
            } else if self.sum.magnitude() < 2f64.powi(126) {
                Val::Exact(if self.pos_inf {
                    f32::INFINITY
                } else {
                    f32::NEG_INFINITY
                })
            } else {
                Val::Any
            };
        }
        self.sum
            .range(roundings, roundings as f64 * 2f64.powi(-126))
    }
}
