//! `range_select(on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd, reduce_res,
//! reduce_op, range_start, on_false_value, mask, dtype)`: the Vector engine's select by a range
//! of free indices (NeuronCore-v3 and newer), with an optional per-partition maximum.

use crate::span::Span;
use nki_lang::{AccOut, Alu, Cmp, Dst, InstrData, Opcode, Src};

use super::super::builtins::P;
use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use super::isa::Operand;
use super::select_reduce::{Cmd, reduce_cmd};
use crate::parse::model::{Arg, Expr};

const NAME: &str = "range_select";

impl Lowerer<'_> {
    /// `range_select`: returns the selected tile (or writes the destination it is assigned
    /// to). `reduce_cmd` is `idle` (no reduction) or `reset_reduce` (the maximum of this
    /// instruction's results, into `reduce_res` when given); the commands that carry the
    /// engine's accumulator from one instruction to the next are refused. `on_false_value` is
    /// fp32's lowest value, the only one the hardware fills with.
    pub(in super::super) fn range_select(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = [
            "on_true_tile",
            "comp_op0",
            "comp_op1",
            "bound0",
            "bound1",
            "reduce_cmd",
            "reduce_res",
            "reduce_op",
            "range_start",
            "on_false_value",
            "mask",
            "dtype",
        ];
        let Some(a) = self.args(NAME, args, &params, 5, span) else {
            return Value::Poison;
        };
        let mut opts = OpOptions::default();
        for (k, p) in [(10, P::Mask), (11, P::DType)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut opts)
            {
                return Value::Poison;
            }
        }
        let (Some(c0), Some(c1)) = (self.cmp_arg(a[1]), self.cmp_arg(a[2])) else {
            return Value::Poison;
        };
        let reduce_op = match a[7] {
            None => Alu::Max,
            Some(e) => match self.alu_arg(e) {
                Some(op) => op,
                None => return Value::Poison,
            },
        };
        let reduces = match a[5].map(reduce_cmd) {
            None | Some(Ok(Cmd::ResetReduce)) => a[6].is_some(),
            Some(Ok(Cmd::Idle)) if a[6].is_some() => {
                return self.error(
                    span,
                    "`reduce_res` is written by `reduce_cmd = reset_reduce` (the default), not `idle`",
                );
            }
            Some(Ok(Cmd::Idle)) => false,
            Some(Err(why)) => return self.error(a[5].map_or(span, Expr::span), why),
        };
        let start = match a[8] {
            None => 0,
            Some(e) => match self.int(e, "`range_start`") {
                Some(n) => match i32::try_from(n) {
                    Ok(n) => n,
                    Err(_) => {
                        return self.error(e.span(), "`range_start` is a 32-bit integer");
                    }
                },
                None => return Value::Poison,
            },
        };
        if let Some(e) = a[9] {
            match self.eval(e) {
                Value::Float(f) if super::super::fp32(f) == f32::MIN => {}
                Value::Poison => return Value::Poison,
                _ => {
                    return self.error(
                        e.span(),
                        "`on_false_value` of `range_select` must be fp32's lowest value, `nl.fp32.min` (-3.4028235e+38): the hardware fills with nothing else",
                    );
                }
            }
        }
        let (true_e, b0_e, b1_e) = (
            a[0].expect("required"),
            a[3].expect("required"),
            a[4].expect("required"),
        );
        let (Some(on_true), Some(b0), Some(b1)) = (
            self.tile_arg(true_e, Opcode::RangeSelect, 1),
            self.tile_arg(b0_e, Opcode::RangeSelect, 2),
            self.tile_arg(b1_e, Opcode::RangeSelect, 3),
        ) else {
            return Value::Poison;
        };
        let grid = on_true.shape;
        let (Some(Src::Tile(t)), Some(Src::Tile(l)), Some(Src::Tile(u))) = (
            self.src_on(Operand::Tile(on_true), &grid, true_e.span()),
            self.src_on(Operand::Tile(b0), &grid, b0_e.span()),
            self.src_on(Operand::Tile(b1), &grid, b1_e.span()),
        ) else {
            return Value::Poison;
        };
        let mut spans = InstrSpans::at(span)
            .with(1, true_e.span())
            .with(2, b0_e.span())
            .with(3, b1_e.span());
        spans.codes[0] = a[1].map(Expr::span);
        spans.codes[1] = a[2].map(Expr::span);
        let acc = match a[6] {
            Some(e) if reduces => {
                let Some(res) = self.tile_arg(e, Opcode::RangeSelect, 4) else {
                    return Value::Poison;
                };
                spans = spans.with(4, e.span());
                spans.codes[2] = a[7].map(Expr::span);
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
        let write = self.write_for(&dest);
        let make = move |v| InstrData::RangeSelect {
            dst: Dst { view: v, write },
            on_true: t,
            bounds: [l, u],
            cmp: [c0, c1],
            start,
            acc,
        };
        match self.emit_op(Opcode::RangeSelect, &make, dest, opts, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// A comparison of `range_select` (`comp_op0 = greater_equal`, `nl::less`): equal, less,
    /// less_equal, greater or greater_equal, as `index cmp bound`.
    fn cmp_arg(&mut self, e: Option<&Expr>) -> Option<Cmp> {
        let e = e.expect("required");
        let cmp = match self.alu_arg(e)? {
            Alu::IsEqual => Cmp::Eq,
            Alu::IsLt => Cmp::Lt,
            Alu::IsLe => Cmp::Le,
            Alu::IsGt => Cmp::Gt,
            Alu::IsGe => Cmp::Ge,
            _ => {
                self.error(
                    e.span(),
                    "a comparison of `range_select` is equal, less, less_equal, greater or greater_equal",
                );
                return None;
            }
        };
        Some(cmp)
    }
}
