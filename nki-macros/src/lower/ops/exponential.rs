//! `exponential(dst, src, max_value, reduce_res, reduce_cmd, reduce_init)`: NeuronCore-v4's
//! Vector-engine `exp(src − max_value)` with an optional sum per partition (NKI 0.6).

use crate::span::Span;
use nki_lang::{AccOut, ActFn, Alu, Dst, InstrData, Opcode, Src};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

const NAME: &str = "exponential";

/// Whether a `reduce_cmd` of `exponential` sums into `reduce_res` (`reset_reduce`) or not
/// (`idle`); the refused ones with their rewrite.
fn sums(e: &Expr) -> Result<bool, &'static str> {
    match super::member_name(e).as_deref().unwrap_or("") {
        "idle" => Ok(false),
        "reset_reduce" => Ok(true),
        "reduce" => Err(
            "`reduce_cmd = reduce` continues from the sum a previous instruction left in the engine's accumulators, which the model does not keep: sum this call with `reset_reduce` into its own `reduce_res` and add the two with `tensor_tensor`",
        ),
        "load_reduce" => Err(
            "`reduce_cmd = load_reduce` (start the sum at `reduce_init`) is not modeled yet: sum with `reset_reduce` into `reduce_res`, then add `reduce_init` with `tensor_scalar` (the start is then added last, which can round differently)",
        ),
        _ => Err(
            "`reduce_cmd` of `exponential` is `idle` (the default) or `reset_reduce` (reduce_cmd::idle, reduce_cmd::reset_reduce)",
        ),
    }
}

impl Lowerer<'_> {
    /// `exponential`: writes `dst` (returns nothing). `max_value` is a number or an fp32
    /// `[P, 1]` tile (0 when absent); `reduce_res` is given with `reduce_cmd = reset_reduce`
    /// and only then.
    pub(in super::super) fn exponential(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = [
            "dst",
            "src",
            "max_value",
            "reduce_res",
            "reduce_cmd",
            "reduce_init",
        ];
        let Some(a) = self.dst_call_args(NAME, dest, args, &params, 2, span) else {
            return Value::Poison;
        };
        let reduce = match a[4].map(sums) {
            None => false,
            Some(Ok(s)) => s,
            Some(Err(why)) => return self.error(a[4].map_or(span, Expr::span), why),
        };
        if let Some(e) = a[5] {
            return self.error(
                e.span(),
                "`reduce_init` is read by `reduce_cmd = load_reduce` only, which the model does not run yet: leave it out",
            );
        }
        match (reduce, a[3]) {
            (true, None) => {
                return self.error(
                    span,
                    "`reduce_cmd = reset_reduce` sums into the engine's accumulators, which the model does not keep between instructions: give `reduce_res` (a (P, 1) tile) to receive the sum",
                );
            }
            (false, Some(e)) => {
                return self.error(
                    e.span(),
                    "`reduce_res` receives the sum of `reduce_cmd = reset_reduce`; with `idle` (the default) nothing is summed: add `reduce_cmd = reset_reduce`",
                );
            }
            _ => {}
        }
        let (dst_e, src_e) = (a[0].expect("required"), a[1].expect("required"));
        let (Some(dst), Some(src)) = (
            self.tile_arg(dst_e, Opcode::Exponential, 0),
            self.tile_arg(src_e, Opcode::Exponential, 1),
        ) else {
            return Value::Poison;
        };
        let grid = src.shape;
        let mut spans = InstrSpans::at(span)
            .with(0, dst_e.span())
            .with(1, src_e.span());
        let mut bias = Src::None;
        if let Some(e) = a[2] {
            let Some(o) = self.operand(e, params[2]) else {
                return Value::Poison;
            };
            let Some(s) = self.src_on(o, &grid, e.span()) else {
                return Value::Poison;
            };
            bias = s;
            spans = spans.with(3, e.span());
        }
        let mut acc = None;
        if let Some(e) = a[3] {
            let Some(res) = self.tile_arg(e, Opcode::Exponential, 4) else {
                return Value::Poison;
            };
            let Some(view) = self.view_id(res, e.span()) else {
                return Value::Poison;
            };
            acc = Some(AccOut { op: Alu::Add, view });
            spans = spans.with(4, e.span());
        }
        let Some(s) = self.view_id(src, src_e.span()) else {
            return Value::Poison;
        };
        let make = move |v| InstrData::Act {
            dst: Dst::overwrite(v),
            src: s,
            func: ActFn::Exp,
            scale: Src::None,
            bias,
            acc,
        };
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        match self.emit_op(
            Opcode::Exponential,
            &make,
            into,
            OpOptions::default(),
            spans,
        ) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }
}
