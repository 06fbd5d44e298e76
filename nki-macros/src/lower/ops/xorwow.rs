//! NKI 0.6's XORWOW random-number instructions: `rng(dst, engine)`, `rand2(dst, min, max)`,
//! `set_rng_seed(src_seeds)`, `rand_set_state(src_seeds, engine)` and
//! `rand_get_state(dst, engine)`. Each is a statement that writes its `dst` or the engine's
//! generator state and returns nothing.

use crate::span::Span;
use nki_lang::{Dst, Engine, Instr, InstrData, Opcode, Src};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

impl Lowerer<'_> {
    /// `engine =` of a random-number instruction, or the opcode's default engine (the op
    /// table's first).
    fn rng_engine(&mut self, e: Option<&Expr>, opcode: Opcode) -> Option<Engine> {
        match e {
            Some(e) => self.engine_arg(e),
            None => Some(opcode.info().engines[0]),
        }
    }

    /// `rng(dst, engine = vector)` and `rand_get_state(dst, engine = gpsimd)`: an instruction
    /// that writes its `dst` from the engine's generators.
    pub(in super::super) fn rng_dst(
        &mut self,
        opcode: Opcode,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let name = opcode.info().name;
        let Some(a) = self.dst_call_args(name, dest, args, &["dst", "engine"], 1, span) else {
            return Value::Poison;
        };
        let dst_e = a[0].expect("required");
        let Some(engine) = self.rng_engine(a[1], opcode) else {
            return Value::Poison;
        };
        let Some(dst) = self.tile_arg(dst_e, opcode, 0) else {
            return Value::Poison;
        };
        let make = move |v| InstrData::Rng {
            dst: Dst::overwrite(v),
            src: Src::None,
            prob: Src::None,
        };
        let mut spans = InstrSpans::at(span).with(0, dst_e.span());
        spans.engine = a[1].map(Expr::span);
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        let options = OpOptions {
            engine: Some(engine),
            ..OpOptions::default()
        };
        match self.emit_op(opcode, &make, into, options, spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }

    /// `set_rng_seed(src_seeds)` and `rand_set_state(src_seeds, engine = gpsimd)`: the engine's
    /// generator state from a tile; no result.
    pub(in super::super) fn rng_seed_state(
        &mut self,
        opcode: Opcode,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let name = opcode.info().name;
        let params: &[&str] = if opcode == Opcode::SetRngSeed {
            &["src_seeds"]
        } else {
            &["src_seeds", "engine"]
        };
        let Some(a) = self.dst_call_args(name, dest, args, params, 1, span) else {
            return Value::Poison;
        };
        let src_e = a[0].expect("required");
        let Some(engine) = self.rng_engine(a.get(1).copied().flatten(), opcode) else {
            return Value::Poison;
        };
        let Some(src) = self.tile_arg(src_e, opcode, 1) else {
            return Value::Poison;
        };
        let Some(seed) = self.view_id(src, src_e.span()) else {
            return Value::Poison;
        };
        let instr = Instr {
            engine,
            ..Instr::new(opcode, InstrData::Seed { seed })
        };
        let mut spans = InstrSpans::at(span).with(1, src_e.span());
        spans.engine = a.get(1).copied().flatten().map(Expr::span);
        if self.emit_checked(instr, spans) {
            Value::Unit
        } else {
            Value::Poison
        }
    }

    /// `rand2(dst, min, max)`: uniform values in `[min, max]` into `dst`; `min` and `max`
    /// numbers or fp32 `[P, 1]` tiles.
    pub(in super::super) fn rand2(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let params = ["dst", "min", "max"];
        let Some(a) = self.dst_call_args("rand2", dest, args, &params, 3, span) else {
            return Value::Poison;
        };
        let dst_e = a[0].expect("required");
        let Some(dst) = self.tile_arg(dst_e, Opcode::Rand2, 0) else {
            return Value::Poison;
        };
        let grid = dst.shape;
        let mut bounds = [Src::None; 2];
        let mut spans = InstrSpans::at(span).with(0, dst_e.span());
        for (j, k) in [(0usize, 1usize), (1, 2)] {
            let e = a[k].expect("required");
            let Some(o) = self.operand(e, params[k]) else {
                return Value::Poison;
            };
            let Some(s) = self.src_on(o, &grid, e.span()) else {
                return Value::Poison;
            };
            bounds[j] = s;
            spans = spans.with(k, e.span());
        }
        let make = move |v| InstrData::Rng {
            dst: Dst::overwrite(v),
            src: bounds[0],
            prob: bounds[1],
        };
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        match self.emit_op(Opcode::Rand2, &make, into, OpOptions::default(), spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }
}
