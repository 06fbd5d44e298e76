//! NeuronCore-v4's MX (microscaling) instructions: `quantize_mx(dst, src, dst_scale)` and
//! `nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale)`.

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

    /// `nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, accumulate,
    /// tile_position, tile_size)` (destination-first: `dst` and `accumulate` taken by the
    /// caller): the PSUM `dst` is written as `nc_matmul`'s is. `tile_position` and
    /// `tile_size` (row tiling only, [`nki_lang::rules::check_mx_pe_tiling`]) leave the result
    /// as it is.
    pub(in super::super) fn nc_matmul_mx(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        const NAME: &str = "nc_matmul_mx";
        let params = [
            "stationary",
            "moving",
            "stationary_scale",
            "moving_scale",
            "tile_position",
            "tile_size",
        ];
        let Some(a) = self.args(NAME, args, &params, 4, span) else {
            return Value::Poison;
        };
        if !matches!(dest, Dest::Into { .. }) {
            return self.error(
                span,
                format!("`{NAME}` writes its PSUM `dst`: `nisa::nc_matmul_mx(dst = t, ...)`"),
            );
        }
        let exprs = [0, 1, 2, 3].map(|k| a[k].expect("required"));
        let mut views = Vec::with_capacity(4);
        let mut stationary_shape = None;
        for (slot, e) in (1..).zip(exprs.iter()) {
            let Some(v) = self.tile_arg(e, Opcode::MatmulMx, slot) else {
                return Value::Poison;
            };
            let Some(id) = self.view_id(v, e.span()) else {
                return Value::Poison;
            };
            views.push(id);
            if slot == 1 {
                stationary_shape = Some(v.shape);
            }
        }
        // The PE array's row tiling: where the stationary operand sits; the result is the same.
        match (a[4], a[5], stationary_shape) {
            (None, None, _) | (_, _, None) => {}
            (Some(p_e), Some(z_e), Some(shape)) => {
                let (Some(position), Some(size)) = (self.int_pair(p_e), self.int_pair(z_e)) else {
                    return Value::Poison;
                };
                let dims = shape.dims();
                let stationary = (dims[0], dims[1..].iter().product::<u32>());
                if let Err(v) =
                    nki_lang::rules::check_mx_pe_tiling(position, size, stationary, self.buf.target)
                {
                    return self.error(span, crate::errors::message(&v));
                }
            }
            (Some(e), None, _) | (None, Some(e), _) => {
                return self.error(
                    e.span(),
                    "`tile_position` and `tile_size` are given together",
                );
            }
        }
        let Some(write) = self.matmul_write(NAME, &dest) else {
            return Value::Poison;
        };
        let (stationary, moving, scales) = (views[0], views[1], [views[2], views[3]]);
        let make = move |view| InstrData::MatmulMx {
            dst: Dst { view, write },
            stationary,
            moving,
            scales,
        };
        let mut spans = InstrSpans::at(span);
        for (slot, e) in (1..).zip(exprs.iter()) {
            spans = spans.with(slot, e.span());
        }
        match self.emit_op(Opcode::MatmulMx, &make, dest, OpOptions::default(), spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }
}
