//! TensorE's `nc_matmul`, `matmul` and `nc_transpose`, and `copy`.

use crate::span::Span;
use nki_lang::{Alu, DType, Dst, Engine, InstrData, Memory, Opcode, TileView, Write};

use super::super::builtins::P;
use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

impl Lowerer<'_> {
    /// `nc_matmul(stationary, moving)`.
    pub(in super::super) fn nc_matmul(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = [
            "stationary",
            "moving",
            "mask",
            "is_stationary_onezero",
            "is_moving_onezero",
            "is_transpose",
            "tile_position",
            "tile_size",
        ];
        let Some(a) = self.args("nc_matmul", args, &params, 2, span) else {
            return Value::Poison;
        };
        let (s_e, m_e) = (a[0].expect("required"), a[1].expect("required"));
        let s = self.tile_arg(s_e, Opcode::Matmul, 1);
        let m = self.tile_arg(m_e, Opcode::Matmul, 2);
        let (Some(s), Some(m)) = (s, m) else {
            return Value::Poison;
        };
        // Hints that leave the result as it is: 0/1 operands, an identity `moving` (a PE
        // transpose).
        for (k, name) in [
            (3, "is_stationary_onezero"),
            (4, "is_moving_onezero"),
            (5, "is_transpose"),
        ] {
            if let Some(e) = a[k]
                && self.bool_arg(e, name).is_none()
            {
                return Value::Poison;
            }
        }
        // The PE array's tiling: where the stationary operand sits; the result is the same.
        match (a[6], a[7]) {
            (None, None) => {}
            (Some(p_e), Some(z_e)) => {
                let (Some(position), Some(size)) = (self.int_pair(p_e), self.int_pair(z_e)) else {
                    return Value::Poison;
                };
                let dims = s.shape.dims();
                let stationary = (dims[0], dims[1..].iter().product::<u32>());
                if let Err(v) =
                    nki_lang::rules::check_pe_tiling(position, size, stationary, self.buf.target)
                {
                    return self.error(span, crate::errors::message(&v));
                }
            }
            (Some(e), None) | (None, Some(e)) => {
                return self.error(
                    e.span(),
                    "`tile_position` and `tile_size` are given together",
                );
            }
        }
        // The opcode's rule refuses a mask (NKI masks a matmul through its operands' indices).
        let mut opts = OpOptions::default();
        if let Some(e) = a[2]
            && !self.option_arg(P::Mask, e, &mut opts)
        {
            return Value::Poison;
        }
        self.matmul_op(s, m, s_e.span(), m_e.span(), span, dest, opts)
    }

    /// A pair of compile-time integers, `(a, b)` or `[a, b]` (`None` after an error).
    pub(in super::super) fn int_pair(
        &mut self,
        e: &crate::parse::model::Expr,
    ) -> Option<(i64, i64)> {
        use crate::parse::model::Expr;
        let items = match e {
            Expr::Tuple(items, _) | Expr::Array(items, _) if items.len() == 2 => items,
            _ => {
                self.error(e.span(), "expected two integers, `(a, b)`");
                return None;
            }
        };
        let mut out = [0i64; 2];
        for (o, item) in out.iter_mut().zip(items) {
            match self.eval(item) {
                Value::Int(n) => *o = n,
                Value::Poison => return None,
                other => {
                    self.error(
                        item.span(),
                        format!("expected an integer, not {}", other.describe()),
                    );
                    return None;
                }
            }
        }
        Some((out[0], out[1]))
    }

    /// How a matmul writes its PSUM destination: overwrite, `+=` (the first into a zeroed tile
    /// opening an accumulation group over the loops entered since the `zeros`); `None` after
    /// an error (an accumulation other than `+=`).
    pub(in super::super) fn matmul_write(
        &mut self,
        name: &'static str,
        dest: &Dest<'_>,
    ) -> Option<Write> {
        let write = match dest {
            Dest::Into {
                accumulate: Some(op),
                span: dspan,
                ..
            } if *op != Alu::Add => {
                let v = nki_lang::RuleViolation::UnsupportedAlu {
                    op: name,
                    alu: *op,
                    why: "a matmul accumulates into PSUM with `+=` only (PSUM adds in place)",
                };
                self.error(*dspan, crate::errors::message(&v));
                return None;
            }
            Dest::Into {
                view,
                accumulate: Some(_),
                ..
            } => match self.fresh_zero.remove(&view.tile) {
                // The first `+=` into a zeroed PSUM tile opens an accumulation group over the
                // loops entered since the `zeros`.
                Some(d0) => {
                    let mask = (d0..self.loops.len()).fold(0u8, |m, d| m | 1 << d);
                    if mask == 0 {
                        Write::Overwrite
                    } else {
                        Write::Group {
                            loops: mask,
                            op: Alu::Add,
                        }
                    }
                }
                None => Write::Accumulate(Alu::Add),
            },
            Dest::Into {
                accumulate: None, ..
            }
            | Dest::New(_) => Write::Overwrite,
        };
        Some(write)
    }

    #[allow(clippy::too_many_arguments)]
    fn matmul_op(
        &mut self,
        s: TileView,
        m: TileView,
        s_span: Span,
        m_span: Span,
        span: Span,
        dest: Dest<'_>,
        opts: OpOptions,
    ) -> Value {
        let Some(write) = self.matmul_write("nc_matmul", &dest) else {
            return Value::Poison;
        };
        let (Some(stationary), Some(moving)) = (self.view_id(s, s_span), self.view_id(m, m_span))
        else {
            return Value::Poison;
        };
        let spans = InstrSpans::at(span).with(1, s_span).with(2, m_span);
        let make = |view| InstrData::Matmul {
            dst: Dst { view, write },
            stationary,
            moving,
        };
        match self.emit_op(Opcode::Matmul, &make, dest, opts, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `matmul(x, y, transpose_x, mask)`: `xᵀ · y` with `transpose_x`, else `x · y` through a
    /// TensorE transpose of `x`, as NKI lowers it; the mask applies to the product.
    pub(in super::super) fn matmul(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let params = ["x", "y", "transpose_x", "mask"];
        let Some(a) = self.args("matmul", args, &params, 2, span) else {
            return Value::Poison;
        };
        let mut opts = OpOptions::default();
        if let Some(e) = a[3]
            && !self.option_arg(super::super::builtins::P::Mask, e, &mut opts)
        {
            return Value::Poison;
        }
        let (x_e, y_e) = (a[0].expect("required"), a[1].expect("required"));
        let transpose_x = match a[2].map(|e| self.bool_arg(e, "transpose_x")) {
            None => false,
            Some(Some(b)) => b,
            Some(None) => return Value::Poison,
        };
        if self.strict_hardware
            && let Err(e) = nki_lang::device_support::check_matmul(transpose_x)
        {
            let at = a[2].map_or(span, Expr::span);
            return self.error(at, e);
        }
        let x = self.tile_arg(x_e, Opcode::Matmul, 1);
        let y = self.tile_arg(y_e, Opcode::Matmul, 2);
        let (Some(x), Some(y)) = (x, y) else {
            return Value::Poison;
        };
        // NKI's `nl.matmul` copies an operand out of PSUM first (`nc_matmul` refuses one).
        let (Some(x), Some(y)) = (
            self.out_of_psum(x, x_e.span()),
            self.out_of_psum(y, y_e.span()),
        ) else {
            return Value::Poison;
        };
        if transpose_x {
            return self.matmul_op(x, y, x_e.span(), y_e.span(), span, dest, opts);
        }
        // x @ y = nc_matmul(xᵀ, y): transpose x on TensorE, evict to SBUF, multiply.
        let xd = x.dtype_of(self.buf.tiles[x.tile as usize].dtype);
        let Some(xt) = self.transpose_op(x, x_e.span(), Dest::New(None)) else {
            return Value::Poison;
        };
        let Value::Tile(xs) = self.new_tile(None, Memory::Sbuf, xd, xt.shape, x_e.span()) else {
            return Value::Poison;
        };
        let into = Dest::Into {
            view: xs,
            span: x_e.span(),
            accumulate: None,
        };
        if self
            .copy_op(xt, x_e.span(), into, OpOptions::default(), x_e.span())
            .is_none()
        {
            return Value::Poison;
        }
        self.matmul_op(xs, y, x_e.span(), y_e.span(), span, dest, opts)
    }

    /// `v`, or its copy into a new SBUF tile when it is in PSUM (`None` after an error).
    pub(in super::super) fn out_of_psum(&mut self, v: TileView, span: Span) -> Option<TileView> {
        if self.buf.tiles[v.tile as usize].memory == Memory::Psum {
            self.sbuf_copy(v, span, None)
        } else {
            Some(v)
        }
    }

    pub(in super::super) fn transpose_op(
        &mut self,
        x: TileView,
        span: Span,
        dest: Dest<'_>,
    ) -> Option<TileView> {
        let src = self.view_id(x, span)?;
        let make = |view| InstrData::Unary {
            dst: Dst::overwrite(view),
            src,
        };
        let spans = InstrSpans::at(span).with(1, span);
        self.emit_op(Opcode::Transpose, &make, dest, OpOptions::default(), spans)
    }

    /// `nc_transpose(data, dtype, engine, mask)`: TensorE by default for SBUF data, VectorE
    /// for PSUM data; a `dtype` other than the result's adds a copy, as NKI inserts a cast.
    pub(in super::super) fn transpose(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = ["data", "dtype", "engine", "mask"];
        let Some(a) = self.args("nc_transpose", args, &params, 1, span) else {
            return Value::Poison;
        };
        let e = a[0].expect("required");
        let Some(x) = self.tile_arg(e, Opcode::Transpose, 1) else {
            return Value::Poison;
        };
        let mut opts = OpOptions::default();
        for (k, p) in [(1, P::DType), (2, P::Engine), (3, P::Mask)] {
            if let Some(arg) = a[k]
                && !self.option_arg(p, arg, &mut opts)
            {
                return Value::Poison;
            }
        }
        let mut spans = InstrSpans::at(span).with(1, e.span());
        spans.engine = a[2].map(|arg| arg.span());
        let in_psum = self.buf.tiles[x.tile as usize].memory == Memory::Psum;
        let engine = opts.engine.unwrap_or(if in_psum {
            Engine::Vector
        } else {
            Engine::Tensor
        });
        let t_opts = OpOptions {
            engine: Some(engine),
            mask: opts.mask,
            ..OpOptions::default()
        };
        let cast = opts
            .dtype
            .filter(|&d| engine == Engine::Tensor && d != DType::F32);
        // TensorE writes PSUM: a transpose assigned into an SBUF tile goes through PSUM and a
        // copy, as NKI inserts it.
        let into_sbuf = matches!(dest, Dest::Into { view, .. }
            if engine == Engine::Tensor && self.buf.tiles[view.tile as usize].memory != Memory::Psum);
        let Some(src) = self.view_id(x, e.span()) else {
            return Value::Poison;
        };
        let make = |view| InstrData::Unary {
            dst: Dst::overwrite(view),
            src,
        };
        if cast.is_none() && !into_sbuf {
            let t_opts = OpOptions {
                dtype: opts.dtype,
                ..t_opts
            };
            return match self.emit_op(Opcode::Transpose, &make, dest, t_opts, spans) {
                Some(v) => Value::Tile(v),
                None => Value::Poison,
            };
        }
        let Some(t) = self.emit_op(Opcode::Transpose, &make, Dest::New(None), t_opts, spans) else {
            return Value::Poison;
        };
        let copy = OpOptions {
            dtype: cast,
            ..OpOptions::default()
        };
        match self.copy_op(t, span, dest, copy, span) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `copy(src, dtype, mask)`.
    pub(in super::super) fn copy(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some(a) = self.args("copy", args, &["src", "dtype", "mask"], 1, span) else {
            return Value::Poison;
        };
        let e = a[0].expect("required");
        let Some(src) = self.tile_arg(e, Opcode::TensorCopy, 1) else {
            return Value::Poison;
        };
        let mut options = OpOptions::default();
        for (k, p) in [(1, P::DType), (2, P::Mask)] {
            if let Some(arg) = a[k]
                && !self.option_arg(p, arg, &mut options)
            {
                return Value::Poison;
            }
        }
        match self.copy_op(src, e.span(), dest, options, span) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    pub(in super::super) fn copy_op(
        &mut self,
        src: TileView,
        src_span: Span,
        dest: Dest<'_>,
        options: OpOptions,
        span: Span,
    ) -> Option<TileView> {
        let src = self.view_id(src, src_span)?;
        let write = self.write_for(&dest);
        let make = |view| InstrData::Unary {
            dst: Dst { view, write },
            src,
        };
        let spans = InstrSpans::at(span).with(1, src_span);
        self.emit_op(Opcode::TensorCopy, &make, dest, options, spans)
    }

    /// `dst[...] = src`: a copy (`dst[...] op= src`: combined into `dst`).
    pub(in super::super) fn copy_into(
        &mut self,
        src: TileView,
        dst: TileView,
        span: Span,
        dspan: Span,
        accumulate: Option<Alu>,
    ) -> Value {
        let dest = Dest::Into {
            view: dst,
            span: dspan,
            accumulate,
        };
        match self.copy_op(src, span, dest, OpOptions::default(), span) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }
}
