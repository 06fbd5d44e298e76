//! The random number generator's functions: `rand`, `random_seed` and `dropout`.

use crate::span::Span;
use nki_lang::{DType, Dst, Instr, InstrData, Opcode, Src};

use super::super::builtins::{DROPOUT, P};
use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::Arg;

impl Lowerer<'_> {
    /// `rand(shape, dtype=float32, mask=None)`: a new tile (or the destination) of uniform values in
    /// `[0, 1)`.
    pub(in super::super) fn rand(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some(a) = self.args("rand", args, &["shape", "dtype", "mask"], 1, span) else {
            return Value::Poison;
        };
        let mut options = OpOptions::default();
        if let Some(e) = a[2]
            && !self.option_arg(P::Mask, e, &mut options)
        {
            return Value::Poison;
        }
        let shape_e = a[0].expect("required");
        let Some(shape) = self.shape_arg(shape_e) else {
            return Value::Poison;
        };
        let dtype = match a[1] {
            Some(e) => match self.dtype_arg(e) {
                Some(d) => d,
                None => return Value::Poison,
            },
            None => DType::F32,
        };
        options.dtype = Some(dtype);
        options.shape = Some(shape);
        let write = self.write_for(&dest);
        let make = move |view| InstrData::Rng {
            dst: Dst { view, write },
            src: Src::None,
            prob: Src::None,
        };
        match self.emit_op(Opcode::Rand, &make, dest, options, InstrSpans::at(span)) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `random_seed(seed, mask=None)`: the generator's seed becomes the value of a one-element
    /// integer tile.
    pub(in super::super) fn random_seed(&mut self, args: &[Arg], span: Span) -> Value {
        let Some(a) = self.args("random_seed", args, &["seed", "mask"], 1, span) else {
            return Value::Poison;
        };
        let seed_e = a[0].expect("required");
        let mut opts = OpOptions::default();
        if let Some(e) = a[1]
            && !self.option_arg(P::Mask, e, &mut opts)
        {
            return Value::Poison;
        }
        let seed = match self.eval(seed_e) {
            Value::Tile(v) => v,
            Value::Poison => return Value::Poison,
            other => {
                return self.error(
                    seed_e.span(),
                    format!(
                        "`random_seed` takes a one-element int32 tile (`nl.load(seed[0])`), not {}",
                        other.describe()
                    ),
                );
            }
        };
        let Some(seed) = self.view_id(seed, seed_e.span()) else {
            return Value::Poison;
        };
        let mut instr = Instr::new(Opcode::RandomSeed, InstrData::Seed { seed });
        instr.mask = opts.mask;
        let spans = InstrSpans::at(span).with(1, seed_e.span());
        if self.emit_checked(instr, spans) {
            Value::Unit
        } else {
            Value::Poison
        }
    }

    /// `dropout`: NKI's `nl.dropout(x, rate, dtype=, mask=)` and `nisa.dropout(data, prob,
    /// mask=, dtype=)`, one instruction.
    pub(in super::super) fn dropout(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let renamed: Vec<Arg> = args
            .iter()
            .map(|a| {
                let name = a.name.as_ref().map(|n| match n.to_string().as_str() {
                    "x" => proc_macro2::Ident::new("data", n.span()),
                    "rate" => proc_macro2::Ident::new("prob", n.span()),
                    _ => n.clone(),
                });
                Arg {
                    name,
                    value: a.value.clone(),
                }
            })
            .collect();
        self.isa(Opcode::Dropout, DROPOUT, &renamed, span, dest)
    }
}
