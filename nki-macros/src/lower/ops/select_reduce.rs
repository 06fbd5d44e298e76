//! `select_reduce(dst, predicate, on_true, on_false, reduce_res, reduce_cmd, reduce_op,
//! reverse_pred, mask)`: the Vector engine's select with an optional per-partition maximum.

use crate::span::Span;
use nki_lang::{AccOut, Alu, Dst, InstrData, Opcode, Src};

use super::super::builtins::P;
use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use super::isa::Operand;
use crate::parse::model::{Arg, Expr};

const NAME: &str = "select_reduce";

impl Lowerer<'_> {
    /// `select_reduce`: writes `dst` (returns nothing). `reduce_cmd` is `idle` (no reduction)
    /// or `reset_reduce` (the maximum of this instruction's results into `reduce_res`); the
    /// commands that carry the engine's accumulator from one instruction to the next are
    /// refused.
    pub(in super::super) fn select_reduce(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = [
            "dst",
            "predicate",
            "on_true",
            "on_false",
            "reduce_res",
            "reduce_cmd",
            "reduce_op",
            "reverse_pred",
            "mask",
            "dtype",
        ];
        let Some(a) = self.dst_call_args(NAME, dest, args, &params, 4, span) else {
            return Value::Poison;
        };
        let reverse = match a[7].map(|e| self.bool_arg(e, "reverse_pred")) {
            None => false,
            Some(Some(b)) => b,
            Some(None) => return Value::Poison,
        };
        let mut opts = OpOptions::default();
        for (k, p) in [(8, P::Mask), (9, P::DType)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut opts)
            {
                return Value::Poison;
            }
        }
        let reduce_op = match a[6] {
            None => Alu::Max,
            Some(e) => match self.alu_arg(e) {
                Some(op) => op,
                None => return Value::Poison,
            },
        };
        let reduces = match a[5].map(reduce_cmd) {
            None => a[4].is_some(),
            Some(Ok(Cmd::Idle)) => false,
            Some(Ok(Cmd::ResetReduce)) => true,
            Some(Err(why)) => return self.error(a[5].map_or(span, Expr::span), why),
        };
        if reduces != a[4].is_some() {
            let why = if reduces {
                "`reduce_cmd = reset_reduce` writes its maximum to `reduce_res`: give that (P, 1) tile"
            } else {
                "`reduce_res` is written by `reduce_cmd = reset_reduce` (the default with `reduce_res`), not `idle`"
            };
            return self.error(span, why);
        }
        let (dst_e, pred_e, true_e, false_e) = (
            a[0].expect("required"),
            a[1].expect("required"),
            a[2].expect("required"),
            a[3].expect("required"),
        );
        let (Some(dst), Some(pred), Some(on_true)) = (
            self.tile_arg(dst_e, Opcode::SelectReduce, 0),
            self.tile_arg(pred_e, Opcode::SelectReduce, 1),
            self.tile_arg(true_e, Opcode::SelectReduce, 2),
        ) else {
            return Value::Poison;
        };
        let Some(on_false) = self.operand(false_e, "on_false") else {
            return Value::Poison;
        };
        if !self.dtype_is_dst(&opts, &dst, a[9].map_or(span, Expr::span)) {
            return Value::Poison;
        }
        let grid = dst.shape;
        let (Some(Src::Tile(p)), Some(Src::Tile(t)), Some(f)) = (
            self.src_on(Operand::Tile(pred), &grid, pred_e.span()),
            self.src_on(Operand::Tile(on_true), &grid, true_e.span()),
            self.src_on(on_false, &grid, false_e.span()),
        ) else {
            return Value::Poison;
        };
        let mut spans = InstrSpans::at(span)
            .with(0, dst_e.span())
            .with(1, pred_e.span())
            .with(2, true_e.span())
            .with(3, false_e.span());
        let acc = match a[4] {
            Some(e) if reduces => {
                let Some(res) = self.tile_arg(e, Opcode::SelectReduce, 4) else {
                    return Value::Poison;
                };
                spans = spans.with(4, e.span());
                if let Some(c) = a[6] {
                    spans.codes[2] = Some(c.span());
                }
                match self.view_id(res, e.span()) {
                    Some(view) => Some(AccOut {
                        op: reduce_op,
                        view,
                    }),
                    None => return Value::Poison,
                }
            }
            Some(_) | None => None,
        };
        let make = |v| InstrData::SelectReduce {
            dst: Dst::overwrite(v),
            pred: p,
            on_true: t,
            on_false: f,
            reverse,
            acc,
        };
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        match self.emit_op(Opcode::SelectReduce, &make, into, opts, spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }
}

/// The `reduce_cmd`s the model runs.
pub(super) enum Cmd {
    Idle,
    ResetReduce,
}

/// A `reduce_cmd` argument (`reset_reduce`, `reduce_cmd.reset_reduce`,
/// `nisa::reduce_cmd::reset_reduce`).
pub(super) fn reduce_cmd(e: &Expr) -> Result<Cmd, &'static str> {
    match super::member_name(e).as_deref().unwrap_or("") {
        "idle" => Ok(Cmd::Idle),
        "reset_reduce" => Ok(Cmd::ResetReduce),
        "reset" | "reduce" | "load_reduce" => Err(
            "this `reduce_cmd` carries the engine's accumulators from one instruction to the next, which the model does not keep: use `reset_reduce` on each instruction and combine the `reduce_res` columns",
        ),
        _ => Err(
            "`reduce_cmd` is `idle` or `reset_reduce` (reduce_cmd::idle, reduce_cmd::reset_reduce)",
        ),
    }
}
