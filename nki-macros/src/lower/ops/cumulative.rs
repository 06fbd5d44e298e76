//! `tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1, reduce_cmd)`: the Vector engine's
//! running reduction of a tensor-scalar result along each partition (NKI 0.6).

use crate::span::Span;
use nki_lang::{Dst, InstrData, Opcode, Src};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

const NAME: &str = "tensor_scalar_cumulative";

/// The `reduce_cmd`s of `tensor_scalar_cumulative` the model runs.
enum Start {
    /// `reset_reduce`: the register starts at `op1`'s identity.
    Reset,
    /// `load_reduce`: the register starts at `imm1`.
    Load,
}

/// A `reduce_cmd` argument of `tensor_scalar_cumulative`; the refused ones with their rewrite.
fn start_cmd(e: &Expr) -> Result<Start, &'static str> {
    match super::member_name(e).as_deref().unwrap_or("") {
        "reset_reduce" => Ok(Start::Reset),
        "load_reduce" => Ok(Start::Load),
        "reduce" => Err(
            "`reduce_cmd = reduce` continues from the accumulator a previous instruction left, which the model does not keep: give that running value as `imm1` with `reduce_cmd = load_reduce` (for a scan over two tiles, the last column of the first one's result)",
        ),
        "idle" | "reset" => Err(
            "`tensor_scalar_cumulative` accumulates: `reduce_cmd` is `reset_reduce` (the default: start from op1's identity) or `load_reduce` (start from `imm1`); for the tensor-scalar values alone use `tensor_scalar`",
        ),
        _ => Err(
            "`reduce_cmd` of `tensor_scalar_cumulative` is `reset_reduce` or `load_reduce` (reduce_cmd::reset_reduce, reduce_cmd::load_reduce)",
        ),
    }
}

impl Lowerer<'_> {
    /// `tensor_scalar_cumulative`: writes `dst` (returns nothing). `imm0` and `imm1` are numbers
    /// or fp32 `[P, 1]` tiles; `imm1` is given with `reduce_cmd = load_reduce` and only then.
    pub(in super::super) fn tensor_scalar_cumulative(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = ["dst", "src", "op0", "op1", "imm0", "imm1", "reduce_cmd"];
        let Some(a) = self.dst_call_args(NAME, dest, args, &params, 5, span) else {
            return Value::Poison;
        };
        let start = match a[6].map(start_cmd) {
            None => Start::Reset,
            Some(Ok(s)) => s,
            Some(Err(why)) => return self.error(a[6].map_or(span, Expr::span), why),
        };
        match (&start, a[5]) {
            (Start::Load, None) => {
                return self.error(
                    span,
                    "`reduce_cmd = load_reduce` starts the accumulator at `imm1`: give `imm1`",
                );
            }
            (Start::Reset, Some(e)) => {
                return self.error(
                    e.span(),
                    "`imm1` is the accumulator's start under `reduce_cmd = load_reduce`; `reset_reduce` (the default) starts from op1's identity and would ignore it",
                );
            }
            _ => {}
        }
        let (dst_e, src_e) = (a[0].expect("required"), a[1].expect("required"));
        let (Some(op0), Some(op1)) = (
            self.alu_arg(a[2].expect("required")),
            self.alu_arg(a[3].expect("required")),
        ) else {
            return Value::Poison;
        };
        let (Some(dst), Some(src)) = (
            self.tile_arg(dst_e, Opcode::TensorScalarCumulative, 0),
            self.tile_arg(src_e, Opcode::TensorScalarCumulative, 1),
        ) else {
            return Value::Poison;
        };
        let grid = src.shape;
        let mut imm = [Src::None; 2];
        let mut spans = InstrSpans::at(span)
            .with(0, dst_e.span())
            .with(1, src_e.span());
        spans.codes[0] = a[2].map(Expr::span);
        spans.codes[1] = a[3].map(Expr::span);
        for (j, slot, k) in [(0usize, 2usize, 4usize), (1, 3, 5)] {
            let Some(e) = a[k] else { continue };
            let Some(o) = self.operand(e, params[k]) else {
                return Value::Poison;
            };
            let Some(s) = self.src_on(o, &grid, e.span()) else {
                return Value::Poison;
            };
            imm[j] = s;
            spans = spans.with(slot, e.span());
        }
        let Some(s) = self.view_id(src, src_e.span()) else {
            return Value::Poison;
        };
        let make = move |v| InstrData::Alu {
            dst: Dst::overwrite(v),
            src: [Src::Tile(s), imm[0], imm[1]],
            op: [op0, op1],
            rev: 0,
            acc: None,
        };
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        match self.emit_op(
            Opcode::TensorScalarCumulative,
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
