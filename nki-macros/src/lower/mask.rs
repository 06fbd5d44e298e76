//! Masks and predicates: comparisons of index expressions, normalised to the instruction set's
//! forms.
//!
//! A mask (`mask = (i_p < 64) & (k * 128 + i_p < n)`) becomes a [`Mask`]: each condition bounds
//! one grid axis, `coef · t + offset < S`, so that the kept elements form a box. A predicate
//! (`affine_select`'s `pred`) is one comparison of an affine expression of several grid axes
//! with 0.

use crate::span::Span;
use nki_lang::{AxisIndex, Cmp, Instr, MAX_MASK_TERMS, Mask, MaskId, MaskTerm};

use super::Lowerer;
use super::value::{Cond, Value};
use crate::parse::model::Expr;

const NOT_A_BOX: &str = "err_unsupported_expression_in_mask";

const YIELDS: &str = "an `if` on loop indices runs its branches as instructions predicated on the condition, so it yields no value: assign into a tile declared before it (`t[..] = ...`)";

impl Lowerer<'_> {
    /// The mask of a `mask =` argument (`None` after an error; `Some(None)` when the mask
    /// keeps everything).
    pub(super) fn mask_arg(&mut self, e: &Expr) -> Option<Option<MaskId>> {
        let conds = match self.eval(e) {
            Value::Cond(c) => c,
            Value::Bool(true) => return Some(None),
            Value::Bool(false) => Vec::new(),
            Value::Poison => return None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "a mask is a comparison of indices, or several joined with `&`, not {} ({NOT_A_BOX})",
                        other.describe()
                    ),
                );
                return None;
            }
        };
        let mut terms: Vec<MaskTerm> = Vec::new();
        if conds.is_empty() {
            // `false`: `0 < 0` never holds.
            terms.push(MaskTerm {
                axis: 0,
                coef: 0,
                offset: nki_lang::Affine::ZERO,
                sym: None,
            });
        }
        for c in &conds {
            if !self.mask_terms(c, e.span(), &mut terms) {
                return None;
            }
        }
        if terms.len() > MAX_MASK_TERMS {
            self.error(
                e.span(),
                format!("a mask joins at most {MAX_MASK_TERMS} bounds ({NOT_A_BOX})"),
            );
            return None;
        }
        let mut mask = Mask {
            terms: [terms[0]; MAX_MASK_TERMS],
            // At most MAX_MASK_TERMS, checked above.
            len: u8::try_from(terms.len()).unwrap_or(u8::MAX),
        };
        mask.terms[..terms.len()].copy_from_slice(&terms);
        match self.buf.add_mask(mask) {
            Some(id) => Some(Some(id)),
            None => {
                self.error(e.span(), "a kernel uses at most 65535 distinct masks");
                None
            }
        }
    }

    /// Appends the bounds of one condition: `expr cmp S` as `coef · t + offset < S`.
    pub(super) fn mask_terms(&mut self, c: &Cond, span: Span, out: &mut Vec<MaskTerm>) -> bool {
        let axes: Vec<usize> = (0..c.expr.grid.len())
            .filter(|&j| c.expr.grid[j] != 0)
            .collect();
        let (axis, coef) = match axes.as_slice() {
            [] => (0, 0),
            [j] => (*j, c.expr.grid[*j]),
            _ => {
                self.error(
                    span,
                    format!("a mask condition bounds one index-grid axis; a condition on several (like `i_p < i_f`) is not a box: use `affine_select` ({NOT_A_BOX})"),
                );
                return false;
            }
        };
        let lin = c.expr.lin;
        let term = |coef: i64, offset: nki_lang::Affine, sym| MaskTerm {
            // A grid axis: below MAX_TILE_RANK.
            axis: u8::try_from(axis).unwrap_or(u8::MAX),
            coef,
            offset,
            sym,
        };
        let shifted = |k: i64| lin.checked_add(&nki_lang::Affine::constant(k));
        let negated = |k: i64| {
            lin.checked_scale(-1)
                .and_then(|n| n.checked_add(&nki_lang::Affine::constant(k)))
        };
        let overflow = || "integer overflow in a mask".to_string();
        let Some(neg) = coef.checked_neg() else {
            self.error(span, overflow());
            return false;
        };
        // `x < S`, `x <= S` keep a symbol on the upper side; `x > 0`, `x >= 0` become
        // `−x < 0`, `−x − 1 < 0`.
        let new: Result<Vec<MaskTerm>, String> = match (c.cmp, c.sym) {
            (Cmp::Lt, s) => Ok(vec![term(coef, lin, s)]),
            (Cmp::Le, s) => shifted(-1)
                .map(|o| vec![term(coef, o, s)])
                .ok_or_else(overflow),
            (Cmp::Gt, None) => negated(0)
                .map(|o| vec![term(neg, o, None)])
                .ok_or_else(overflow),
            (Cmp::Ge, None) => negated(-1)
                .map(|o| vec![term(neg, o, None)])
                .ok_or_else(overflow),
            (Cmp::Eq, None) => match (shifted(-1), negated(-1)) {
                (Some(le), Some(ge)) => Ok(vec![term(coef, le, None), term(neg, ge, None)]),
                _ => Err(overflow()),
            },
            (Cmp::Ne, _) => Err(format!(
                "`!=` keeps everything but one index: not a box ({NOT_A_BOX})"
            )),
            (_, Some(_)) => Err(format!(
                "a symbolic dimension can only bound an index from above: `expr < N` or `expr <= N` ({NOT_A_BOX})"
            )),
        };
        match new {
            Ok(t) => {
                out.extend(t);
                true
            }
            Err(msg) => {
                self.error(span, msg);
                false
            }
        }
    }

    /// `if cond { then } else { els }` where `cond` compares loop indices or program ids (NKI's
    /// `if (i < n_tile_q) & causal_mask:` in flash attention): both branches are lowered, each
    /// instruction of `then` predicated on `cond` and each of `els` on its negation (a mask of
    /// loop-only conditions, which runs or skips the instruction whole). Yields nothing.
    pub(super) fn predicated(
        &mut self,
        conds: &[Cond],
        then: &crate::parse::model::Block,
        els: Option<&crate::parse::model::Block>,
        span: Span,
    ) -> Value {
        if conds.iter().any(|c| c.expr.is_advanced()) {
            return self.error(
                span,
                format!("an `if` condition on index grids would split an instruction's elements: mask them (`mask = ...`) or use `affine_select` ({NOT_A_BOX})"),
            );
        }
        let mut terms = Vec::new();
        for c in conds {
            if !self.mask_terms(c, span, &mut terms) {
                return Value::Poison;
            }
        }
        let negated = match (els, conds) {
            (None, _) => None,
            (Some(_), [c]) => Some(Cond {
                cmp: match c.cmp {
                    Cmp::Lt => Cmp::Ge,
                    Cmp::Le => Cmp::Gt,
                    Cmp::Gt => Cmp::Le,
                    Cmp::Ge => Cmp::Lt,
                    Cmp::Eq => Cmp::Ne,
                    Cmp::Ne => Cmp::Eq,
                },
                ..*c
            }),
            (Some(_), _) => {
                return self.error(
                    span,
                    "the `else` of an `if` on several joined conditions runs where any of them fails, which no mask describes: write an `if` per case",
                );
            }
        };
        let mut else_terms = Vec::new();
        if let Some(c) = negated
            && !self.mask_terms(&c, span, &mut else_terms)
        {
            return Value::Poison;
        }
        let v = self.under_predicate(terms, then);
        if let Some(b) = els {
            let w = self.under_predicate(else_terms, b);
            if !matches!(w, Value::Unit | Value::Poison) {
                return self.error(span, YIELDS);
            }
        }
        match v {
            Value::Unit | Value::Poison => v,
            _ => self.error(span, YIELDS),
        }
    }

    /// Lowers `b` with every instruction predicated on `terms` too.
    fn under_predicate(&mut self, terms: Vec<MaskTerm>, b: &crate::parse::model::Block) -> Value {
        let outer = self.predicate.len();
        self.predicate.extend(terms);
        let v = self.branch(b);
        self.predicate.truncate(outer);
        v
    }

    /// `instr`'s mask joined with the enclosing `if`s' predicates (`None` after an error).
    pub(super) fn with_predicate(&mut self, instr: Instr, span: Span) -> Option<Instr> {
        if self.predicate.is_empty() {
            return Some(instr);
        }
        let mut terms: Vec<MaskTerm> = instr
            .mask
            .and_then(|m| self.buf.masks.get(m.index()))
            .map_or_else(Vec::new, |m| m.terms().to_vec());
        terms.extend(self.predicate.iter().copied());
        if terms.len() > MAX_MASK_TERMS {
            self.error(
                span,
                format!("an instruction under an `if` on loop indices joins at most {MAX_MASK_TERMS} conditions with its own mask ({NOT_A_BOX})"),
            );
            return None;
        }
        let mut mask = Mask {
            terms: [terms[0]; MAX_MASK_TERMS],
            // At most MAX_MASK_TERMS, checked above.
            len: u8::try_from(terms.len()).unwrap_or(u8::MAX),
        };
        mask.terms[..terms.len()].copy_from_slice(&terms);
        let Some(id) = self.buf.add_mask(mask) else {
            self.error(span, "a kernel uses at most 65535 distinct masks");
            return None;
        };
        Some(Instr {
            mask: Some(id),
            ..instr
        })
    }

    /// The predicate of `affine_select`: one comparison of an affine expression of the grid
    /// with a constant.
    pub(super) fn pred_arg(&mut self, e: &Expr) -> Option<(AxisIndex, Cmp)> {
        match self.eval(e) {
            Value::Cond(c) if c.len() == 1 && c[0].sym.is_none() => Some((
                AxisIndex {
                    start: c[0].expr.lin,
                    grid: c[0].expr.grid,
                },
                c[0].cmp,
            )),
            Value::Poison => None,
            Value::Cond(_) => {
                self.error(
                    e.span(),
                    "affine_select's predicate is one comparison of affine index expressions without symbolic dimensions",
                );
                None
            }
            other => {
                self.error(
                    e.span(),
                    format!(
                        "affine_select's predicate is a comparison of indices, not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }
}
