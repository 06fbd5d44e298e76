//! NeuronCore-v4's MX (microscaling) instructions: `quantize_mx(dst, src, dst_scale)`.

use crate::span::Span;
use nki_lang::{Dst, InstrData, Opcode};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::Arg;

impl Lowerer<'_> {
    /// `quantize_mx(dst, src, dst_scale)`: writes `dst` (the packed MXFP8 data) and
    /// `dst_scale` (the E8M0 scales); returns nothing. The rule checks the dtypes and shapes.
    pub(in super::super) fn quantize_mx(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        const NAME: &str = "quantize_mx";
        if !matches!(dest, Dest::New(None)) {
            return self.error(
                span,
                format!("`{NAME}` writes its `dst` and `dst_scale` and returns nothing"),
            );
        }
        let Some(a) = self.args(NAME, args, &["dst", "src", "dst_scale"], 3, span) else {
            return Value::Poison;
        };
        let (dst_e, src_e, scale_e) = (
            a[0].expect("required"),
            a[1].expect("required"),
            a[2].expect("required"),
        );
        let (Some(dst), Some(src), Some(scale)) = (
            self.tile_arg(dst_e, Opcode::QuantizeMx, 0),
            self.tile_arg(src_e, Opcode::QuantizeMx, 1),
            self.tile_arg(scale_e, Opcode::QuantizeMx, 2),
        ) else {
            return Value::Poison;
        };
        let (Some(s), Some(c)) = (
            self.view_id(src, src_e.span()),
            self.view_id(scale, scale_e.span()),
        ) else {
            return Value::Poison;
        };
        let make = move |v| InstrData::QuantizeMx {
            dst: Dst::overwrite(v),
            src: s,
            scale: c,
        };
        let spans = InstrSpans::at(span)
            .with(0, dst_e.span())
            .with(1, src_e.span())
            .with(2, scale_e.span());
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        match self.emit_op(Opcode::QuantizeMx, &make, into, OpOptions::default(), spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }
}
