//! `nl` reductions (`sum`, `max`, `min`, `prod`, `all`, `mean`, `var`) and the composites
//! `softmax` and `rms_norm`, built from the instruction set as NKI builds them.

use crate::span::Span;
use nki_lang::{
    AccOut, ActFn, Alu, DType, Dst, InstrData, Memory, Opcode, Scalar, Src, TileShape, TileView,
};

use super::super::builtins::{P, Reduction};
use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use super::isa::Operand;
use crate::parse::model::{Arg, BinOp};

impl Lowerer<'_> {
    /// `tensor_reduce(op, x, axes)` into `dest`.
    #[allow(clippy::too_many_arguments)]
    fn reduce_op(
        &mut self,
        op: Alu,
        x: TileView,
        x_span: Span,
        axes: u8,
        negate: bool,
        keepdims: bool,
        span: Span,
        dest: Dest<'_>,
        mut opts: OpOptions,
    ) -> Option<TileView> {
        let src = self.view_id(x, x_span)?;
        let write = self.write_for(&dest);
        let make = |v| InstrData::Reduce {
            dst: Dst { view: v, write },
            src,
            op,
            axes,
            negate,
        };
        opts.squeeze = !keepdims;
        let spans = InstrSpans::at(span).with(1, x_span);
        self.emit_op(Opcode::TensorReduce, &make, dest, opts, spans)
    }

    /// `tensor_partition_reduce(op, data, dtype)`: `op` over the partitions of a `[P, F]` tile,
    /// a `[1, F]` result. Composed of instructions the model has, 128 columns at a time: a
    /// TensorE transpose (exact), `tensor_reduce` along the free axis in fp32 (the reductions'
    /// defined order), a transpose back and a copy (NKI runs one GpSimd instruction, whose
    /// order of combination is not documented).
    pub(in super::super) fn tensor_partition_reduce(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        const NAME: &str = "tensor_partition_reduce";
        let Some(a) = self.args(NAME, args, &["op", "data", "dtype"], 2, span) else {
            return Value::Poison;
        };
        let (op_e, data_e) = (a[0].expect("required"), a[1].expect("required"));
        let Some(op) = self.alu_arg(op_e) else {
            return Value::Poison;
        };
        let Some(data) = self.tile_arg(data_e, Opcode::TensorReduce, 1) else {
            return Value::Poison;
        };
        let mut opts = OpOptions::default();
        if let Some(e) = a[2]
            && !self.option_arg(P::DType, e, &mut opts)
        {
            return Value::Poison;
        }
        let [f] = *data.shape.free() else {
            return self.error(data_e.span(), format!("`{NAME}` takes a `[P, F]` tile"));
        };
        let dtype = opts
            .dtype
            .unwrap_or(data.dtype_of(self.buf.tiles[data.tile as usize].dtype));
        let Some(shape) = TileShape::new(&[1, f]) else {
            return Value::Poison;
        };
        let Value::Tile(result) = self.new_tile(None, Memory::Sbuf, dtype, shape, span) else {
            return Value::Poison;
        };
        let f32_opts = OpOptions {
            dtype: Some(DType::F32),
            ..OpOptions::default()
        };
        let mut start = 0u32;
        while start < f {
            let n = f.saturating_sub(start).min(nki_lang::target::PARTITIONS);
            let cols = |v: &TileView| -> Option<TileView> {
                Some(TileView {
                    shape: TileShape::new(&[v.shape.partitions(), n])?,
                    offset: v.offset.checked_add(&nki_lang::Affine::constant(
                        i64::from(start).checked_mul(v.strides[0])?,
                    ))?,
                    ..*v
                })
            };
            let (Some(block), Some(part)) = (cols(&data), cols(&result)) else {
                return self.error(span, "integer overflow in an index expression");
            };
            let Some(t) = self.transpose_op(block, data_e.span(), Dest::New(None)) else {
                return Value::Poison;
            };
            let Some(r) = self.reduce_op(
                op,
                t,
                data_e.span(),
                1,
                false,
                true,
                span,
                Dest::New(None),
                f32_opts,
            ) else {
                return Value::Poison;
            };
            let Some(back) = self.transpose_op(r, span, Dest::New(None)) else {
                return Value::Poison;
            };
            let into = Dest::Into {
                view: part,
                span,
                accumulate: None,
            };
            if self
                .copy_op(back, span, into, OpOptions::default(), span)
                .is_none()
            {
                return Value::Poison;
            }
            // start + n ≤ f.
            start = start.saturating_add(n);
        }
        self.assign(Value::Tile(result), span, dest)
    }

    /// Number of elements a reduction over `axes` of `shape` combines.
    fn reduced_count(shape: &TileShape, axes: u8) -> u64 {
        shape
            .free()
            .iter()
            .enumerate()
            .filter(|(j, _)| axes >> j & 1 == 1)
            .map(|(_, &d)| u64::from(d))
            .product()
    }

    /// Python's `max` (`is_max`) or `min` of compile-time numbers, `first` the value of the
    /// first argument: the first greatest (least) argument, as Python returns it (an integer
    /// stays an integer).
    pub(in super::super) fn python_min_max(
        &mut self,
        is_max: bool,
        first: Value,
        args: &[Arg],
    ) -> Value {
        let name = if is_max { "max" } else { "min" };
        let mut best = first;
        for (k, a) in args.iter().enumerate() {
            let v = if k == 0 {
                best.clone()
            } else {
                self.eval(&a.value)
            };
            let sp = a.value.span();
            match &v {
                Value::Int(_) | Value::Float(_) => {}
                Value::Poison => return Value::Poison,
                Value::Sym { .. } => {
                    return self.error(
                        sp,
                        format!("`{name}` of a symbolic dimension is known only at launch: make the dimension a meta-parameter (`const D: usize`) or bound the loop with a mask"),
                    );
                }
                other => {
                    return self.error(
                        sp,
                        format!("Python's `{name}(a, b, ...)` compares compile-time numbers, not {}; the elementwise {} of tiles is `{}(x, y)`, a reduction `{name}(x, axis)`", other.describe(), if is_max { "maximum" } else { "minimum" }, if is_max { "maximum" } else { "minimum" }),
                    );
                }
            }
            if k == 0 {
                continue;
            }
            let cmp = if is_max { BinOp::Gt } else { BinOp::Lt };
            if let Value::Bool(true) = self.arith(cmp, v.clone(), best.clone(), sp) {
                best = v;
            }
        }
        best
    }

    /// `nl.sum(x, axis, dtype, mask, keepdims)` and the other reductions.
    pub(in super::super) fn nl_reduce(
        &mut self,
        name: &str,
        r: Reduction,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        // Python's `min(a, b, ...)` / `max(a, b, ...)` on numbers at trace time: two or more
        // positional arguments, the first a number.
        let python = matches!(name, "min" | "max")
            && args.len() >= 2
            && args.iter().all(|a| a.name.is_none());
        let first = python.then(|| self.eval(&args[0].value));
        if let Some(v @ (Value::Int(_) | Value::Float(_) | Value::Sym { .. })) = &first {
            let v = v.clone();
            let r = self.python_min_max(name == "max", v, args);
            return self.assign(r, span, dest);
        }
        let Some(a) = self.args(
            name,
            args,
            &["x", "axis", "dtype", "mask", "keepdims"],
            2,
            span,
        ) else {
            return Value::Poison;
        };
        let x_e = a[0].expect("required");
        let x = match first.unwrap_or_else(|| self.eval(x_e)) {
            Value::Tile(v) => v,
            Value::Poison => return Value::Poison,
            other => {
                return self.error(
                    x_e.span(),
                    format!("`{name}` takes a tile, not {}", other.describe()),
                );
            }
        };
        let Some(axes) = self.axes_arg(a[1].expect("required"), static_name(name), &x.shape) else {
            return Value::Poison;
        };
        let mut opts = OpOptions::default();
        for (k, p) in [(2, P::DType), (3, P::Mask)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut opts)
            {
                return Value::Poison;
            }
        }
        let keepdims = match a[4].map(|e| self.bool_arg(e, "keepdims")) {
            Some(None) => return Value::Poison,
            Some(Some(b)) => b,
            None => false,
        };
        let xs = x_e.span();
        let done = |v: Option<TileView>| v.map_or(Value::Poison, Value::Tile);
        match r {
            Reduction::Op(op) => {
                done(self.reduce_op(op, x, xs, axes, false, keepdims, span, dest, opts))
            }
            Reduction::Mean | Reduction::Var => {
                let n = Self::reduced_count(&x.shape, axes);
                let int = !x.dtype_of(self.buf.tiles[x.tile as usize].dtype).is_float();
                let work = OpOptions {
                    dtype: if int { Some(DType::F32) } else { None },
                    mask: opts.mask,
                    ..OpOptions::default()
                };
                let count = (Operand::Imm(Scalar::float(n as f32)), span);
                // var: the mean of the squared deviations from the mean.
                let (x, xs) = match r {
                    Reduction::Var => {
                        let Some(s) = self.reduce_op(
                            Alu::Add,
                            x,
                            xs,
                            axes,
                            false,
                            true,
                            span,
                            Dest::New(None),
                            work,
                        ) else {
                            return Value::Poison;
                        };
                        let deviations = self
                            .temp(Alu::Divide, (Operand::Tile(s), span), count, span, work)
                            .and_then(|mean| {
                                let (x, mean) =
                                    ((Operand::Tile(x), xs), (Operand::Tile(mean), span));
                                self.temp(Alu::Subtract, x, mean, span, work)
                            })
                            .and_then(|d| {
                                let d = (Operand::Tile(d), span);
                                self.temp(Alu::Multiply, d, d, span, work)
                            });
                        match deviations {
                            Some(sq) => (sq, span),
                            None => return Value::Poison,
                        }
                    }
                    Reduction::Op(_) | Reduction::Mean => (x, xs),
                };
                let Some(s) = self.reduce_op(
                    Alu::Add,
                    x,
                    xs,
                    axes,
                    false,
                    keepdims,
                    span,
                    Dest::New(None),
                    work,
                ) else {
                    return Value::Poison;
                };
                self.binary(
                    Alu::Divide,
                    (Operand::Tile(s), span),
                    count,
                    span,
                    dest,
                    opts,
                )
            }
        }
    }

    /// `a op b` into a new tile (a composite's intermediate).
    fn temp(
        &mut self,
        op: Alu,
        a: (Operand, Span),
        b: (Operand, Span),
        span: Span,
        opts: OpOptions,
    ) -> Option<TileView> {
        match self.binary(op, a, b, span, Dest::New(None), opts) {
            Value::Tile(t) => Some(t),
            _ => None,
        }
    }

    /// A new `[P, 1]` fp32 tile for a per-partition result.
    fn column_tile(&mut self, partitions: u32, span: Span) -> Option<TileView> {
        let shape = TileShape::new(&[partitions, 1])?;
        match self.new_tile(None, Memory::Sbuf, DType::F32, shape, span) {
            Value::Tile(v) => Some(v),
            _ => None,
        }
    }

    /// `activation(func, x, bias = −m?)` with a per-partition `add` reduction into `res`.
    #[allow(clippy::too_many_arguments)]
    fn act_reduce(
        &mut self,
        func: ActFn,
        x: TileView,
        scale: Src,
        bias: Option<TileView>,
        res: TileView,
        span: Span,
        dest: Dest<'_>,
        opts: OpOptions,
    ) -> Option<TileView> {
        let src = self.view_id(x, span)?;
        let bias = match bias {
            Some(b) => Src::Tile(self.view_id(self.broadcast(&b, &x.shape)?, span)?),
            None => Src::None,
        };
        let acc = Some(AccOut {
            op: Alu::Add,
            view: self.view_id(res, span)?,
        });
        let write = self.write_for(&dest);
        let make = |v| InstrData::Act {
            dst: Dst { view: v, write },
            src,
            func,
            scale,
            bias,
            acc,
        };
        self.emit_op(Opcode::Activation, &make, dest, opts, InstrSpans::at(span))
    }

    /// The tile argument `name` of a composite.
    fn tile_param(&mut self, e: &crate::parse::model::Expr, name: &str) -> Option<TileView> {
        match self.eval(e) {
            Value::Tile(v) => Some(v),
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!("`{name}` takes a tile, not {}", other.describe()),
                );
                None
            }
        }
    }

    /// `softmax(x, axis)` along every free axis: `exp(x − max(x)) / Σ exp(x − max(x))`, as
    /// NKI's kernels compute it: a negated max (VectorE), the exponential with that bias and its
    /// per-partition sum in one activation (ScalarE), a reciprocal (VectorE) and a multiply.
    pub(in super::super) fn softmax(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let params = ["x", "axis", "dtype", "compute_dtype", "mask"];
        let Some(a) = self.args("softmax", args, &params, 2, span) else {
            return Value::Poison;
        };
        let Some(x) = self.tile_param(a[0].expect("required"), "softmax") else {
            return Value::Poison;
        };
        let Some(axes) = self.axes_arg(a[1].expect("required"), "softmax", &x.shape) else {
            return Value::Poison;
        };
        let all = (1u8 << x.shape.rank().saturating_sub(1)).saturating_sub(1);
        if axes != all {
            return self.error(
                a[1].expect("required").span(),
                "softmax here normalises along every free axis of its tile (axis = [1, ..]): index the tile so that the softmax axis is its free dimension",
            );
        }
        let mut opts = OpOptions::default();
        for (k, p) in [(2, P::DType), (4, P::Mask)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut opts)
            {
                return Value::Poison;
            }
        }
        let work = OpOptions {
            dtype: Some(DType::F32),
            mask: opts.mask,
            ..OpOptions::default()
        };
        let p = x.shape.partitions();
        let Some(neg_max) = self.reduce_op(
            Alu::Max,
            x,
            span,
            axes,
            true,
            true,
            span,
            Dest::New(None),
            work,
        ) else {
            return Value::Poison;
        };
        let Some(sum) = self.column_tile(p, span) else {
            return Value::Poison;
        };
        let one = Src::Imm(Scalar::float(1.0));
        let Some(e) = self.act_reduce(
            ActFn::Exp,
            x,
            one,
            Some(neg_max),
            sum,
            span,
            Dest::New(None),
            work,
        ) else {
            return Value::Poison;
        };
        let recip = self.isa_unary(Opcode::Reciprocal, sum, span, work);
        let Some(recip) = recip else {
            return Value::Poison;
        };
        self.binary(
            Alu::Multiply,
            (Operand::Tile(e), span),
            (Operand::Tile(recip), span),
            span,
            dest,
            opts,
        )
    }

    /// A one-operand instruction (`reciprocal`) into a new tile.
    fn isa_unary(
        &mut self,
        opcode: Opcode,
        x: TileView,
        span: Span,
        opts: OpOptions,
    ) -> Option<TileView> {
        let src = self.view_id(x, span)?;
        let make = |v| InstrData::Unary {
            dst: Dst::overwrite(v),
            src,
        };
        self.emit_op(opcode, &make, Dest::New(None), opts, InstrSpans::at(span))
    }

    /// `rms_norm(x, w, axis, n, epsilon)`: `x / sqrt(Σ x² / n + ε) · w`, along every free axis:
    /// the squares and their per-partition sum in one activation, `/ n + ε`, a reciprocal square
    /// root, then two multiplies (`w` broadcast as NumPy would).
    pub(in super::super) fn rms_norm(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let params = [
            "x",
            "w",
            "axis",
            "n",
            "epsilon",
            "dtype",
            "compute_dtype",
            "mask",
        ];
        let Some(a) = self.args("rms_norm", args, &params, 4, span) else {
            return Value::Poison;
        };
        let Some(x) = self.tile_param(a[0].expect("required"), "rms_norm") else {
            return Value::Poison;
        };
        let w_e = a[1].expect("required");
        let Some(w) = self.operand(w_e, "w") else {
            return Value::Poison;
        };
        let Some(axes) = self.axes_arg(a[2].expect("required"), "rms_norm", &x.shape) else {
            return Value::Poison;
        };
        if axes != (1u8 << x.shape.rank().saturating_sub(1)).saturating_sub(1) {
            return self.error(
                span,
                "rms_norm normalises along every free axis of its tile",
            );
        }
        let n_e = a[3].expect("required");
        let n = match self.eval(n_e) {
            Value::Int(n) if n > 0 => n as f32,
            Value::Float(f) if f > 0.0 => super::super::fp32(f),
            Value::Poison => return Value::Poison,
            _ => return self.error(n_e.span(), "`n` is a positive number"),
        };
        let eps = match a[4].map(|e| (e, self.eval(e))) {
            None => 1e-6,
            Some((_, Value::Float(f))) => super::super::fp32(f),
            Some((_, Value::Int(i))) => i as f32,
            Some((_, Value::Poison)) => return Value::Poison,
            Some((e, _)) => return self.error(e.span(), "`epsilon` is a number"),
        };
        let mut opts = OpOptions::default();
        for (k, p) in [(5, P::DType), (7, P::Mask)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut opts)
            {
                return Value::Poison;
            }
        }
        let work = OpOptions {
            dtype: Some(DType::F32),
            mask: opts.mask,
            ..OpOptions::default()
        };
        let p = x.shape.partitions();
        let Some(ss) = self.column_tile(p, span) else {
            return Value::Poison;
        };
        let one = Src::Imm(Scalar::float(1.0));
        if self
            .act_reduce(ActFn::Square, x, one, None, ss, span, Dest::New(None), work)
            .is_none()
        {
            return Value::Poison;
        }
        let Some(ss_id) = self.view_id(ss, span) else {
            return Value::Poison;
        };
        let make = |v| InstrData::Alu {
            dst: Dst::overwrite(v),
            src: [
                Src::Tile(ss_id),
                Src::Imm(Scalar::float(n)),
                Src::Imm(Scalar::float(eps)),
            ],
            op: [Alu::Divide, Alu::Add],
            rev: 0,
            acc: None,
        };
        let Some(ms) = self.emit_op(
            Opcode::TensorScalar,
            &make,
            Dest::New(None),
            work,
            InstrSpans::at(span),
        ) else {
            return Value::Poison;
        };
        let Value::Tile(r) = self.act(ActFn::Rsqrt, ms, span, one, span, Dest::New(None), work)
        else {
            return Value::Poison;
        };
        let xr = ((Operand::Tile(x), span), (Operand::Tile(r), span));
        let Some(y) = self.temp(Alu::Multiply, xr.0, xr.1, span, work) else {
            return Value::Poison;
        };
        self.binary(
            Alu::Multiply,
            (Operand::Tile(y), span),
            (w, w_e.span()),
            span,
            dest,
            opts,
        )
    }
}

/// The `&'static` name of an `nl` reduction, for its diagnostics.
fn static_name(name: &str) -> &'static str {
    ["sum", "max", "min", "prod", "all", "mean", "var"]
        .into_iter()
        .find(|n| *n == name)
        .unwrap_or("tensor_reduce")
}
