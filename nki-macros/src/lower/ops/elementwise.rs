//! Elementwise `nl` functions and Rust's operators on tiles: binary operations with NumPy
//! broadcasting and scalar operands (`tensor_tensor` or `tensor_scalar`), one-operand ALU
//! operations, activation functions, `where`, `broadcast_to` and `nl.transpose`.

use crate::span::Span;
use nki_lang::ops::Part;
use nki_lang::{
    ActFn, Alu, DType, Dim, Dst, Engine, InstrData, MAX_TILE_RANK, Memory, Opcode, Pred, Scalar,
    Src, TileShape, TileView, Write,
};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use super::isa::Operand;
use crate::parse::model::{Arg, BinOp, Expr};

/// The NumPy broadcast of two free shapes (aligned from the right), or `None`.
fn broadcast_free(a: &[u32], b: &[u32]) -> Option<Vec<u32>> {
    let n = a.len().max(b.len());
    let mut out = vec![1u32; n];
    for (k, o) in out.iter_mut().enumerate() {
        let x = a.len().checked_sub(n.saturating_sub(k)).map_or(1, |j| a[j]);
        let y = b.len().checked_sub(n.saturating_sub(k)).map_or(1, |j| b[j]);
        *o = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

impl Lowerer<'_> {
    /// Evaluates `nl` arguments `x, y, dtype, mask` (or the names given).
    fn nl_args(
        &mut self,
        name: &str,
        args: &[Arg],
        operands: &[&str],
        span: Span,
    ) -> Option<(Vec<(Operand, Span)>, OpOptions)> {
        let (values, opts) = self.nl_values(name, args, operands, span)?;
        let ops = self.nl_operands(values, operands)?;
        Some((ops, opts))
    }

    /// The operands of an `nl` function as operands of an instruction.
    fn nl_operands(
        &mut self,
        values: Vec<(Value, Span)>,
        operands: &[&str],
    ) -> Option<Vec<(Operand, Span)>> {
        let mut out = Vec::new();
        let mut ok = true;
        for (p, (v, sp)) in operands.iter().zip(values) {
            match self.operand_value(v, sp, p) {
                Some(o) => out.push((o, sp)),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Evaluates `nl` arguments `x, y, dtype, mask` (or the names given) to values.
    fn nl_values(
        &mut self,
        name: &str,
        args: &[Arg],
        operands: &[&str],
        span: Span,
    ) -> Option<(Vec<(Value, Span)>, OpOptions)> {
        let mut params: Vec<&str> = operands.to_vec();
        params.extend(["dtype", "mask"]);
        let a = self.args(name, args, &params, operands.len(), span)?;
        let mut out = Vec::new();
        let mut ok = true;
        for e in a.iter().take(operands.len()) {
            let e = e.expect("required");
            match self.eval(e) {
                Value::Poison => ok = false,
                v => out.push((v, e.span())),
            }
        }
        let mut opts = OpOptions::default();
        if let Some(e) = a[operands.len()] {
            ok &= self.option_arg(super::super::builtins::P::DType, e, &mut opts);
        }
        if let Some(e) = a[operands.len().saturating_add(1)] {
            ok &= self.option_arg(super::super::builtins::P::Mask, e, &mut opts);
        }
        ok.then_some((out, opts))
    }

    /// `nl.add(x, y)` and the other elementwise binary functions.
    pub(in super::super) fn nl_binary(
        &mut self,
        name: &str,
        alu: Alu,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let Some((values, opts)) = self.nl_values(name, args, &["x", "y"], span) else {
            return Value::Poison;
        };
        // `power(d, 0.5)` (Python's `d ** 0.5`), `maximum(a, b)`, ... of numbers at trace time.
        if let [(a, _), (b, _)] = values.as_slice()
            && a.is_number()
            && b.is_number()
            && let Some(v) = self.math2(name, alu, a.clone(), b.clone(), span)
        {
            return self.assign(v, span, dest);
        }
        let Some(ops) = self.nl_operands(values, &["x", "y"]) else {
            return Value::Poison;
        };
        self.binary(alu, ops[0], ops[1], span, dest, opts)
    }

    fn dtype_of(&self, v: &TileView) -> DType {
        v.dtype_of(self.buf.tiles[v.tile as usize].dtype)
    }

    fn memory_of(&self, v: &TileView) -> Memory {
        self.buf.tiles[v.tile as usize].memory
    }

    /// `a op b` elementwise: `tensor_tensor` on two tiles broadcast to one grid (a tile with
    /// one partition first broadcast across partitions, as NKI does, through TensorE),
    /// `tensor_scalar` when one operand is a number or holds one value per partition.
    pub(in super::super) fn binary(
        &mut self,
        alu: Alu,
        a: (Operand, Span),
        b: (Operand, Span),
        span: Span,
        dest: Dest<'_>,
        opts: OpOptions,
    ) -> Value {
        let spans = |x: Span, y: Span| InstrSpans::at(span).with(1, x).with(2, y);
        if self.strict_hardware {
            use nki_lang::device_support as dev;
            let tile = |o: &Operand| matches!(o, Operand::Tile(_));
            let shapes = match (&a.0, &b.0) {
                (Operand::Tile(x), Operand::Tile(y)) => Some((x.shape, y.shape)),
                _ => None,
            };
            let refused = if tile(&a.0) || tile(&b.0) {
                dev::check_alu(alu).and_then(|()| match shapes {
                    Some((x, y)) => dev::check_binary_shapes(&x, &y),
                    None => Ok(()),
                })
            } else {
                Ok(())
            };
            if let Err(e) = refused {
                return self.error(span, e);
            }
        }
        // `/` and `divide` of integers are Python's true division: an f32 result unless a
        // dtype or destination says otherwise (NKI's `nl.floor(iota / w, dtype=nl.int32)` in
        // `resize_nearest` floors the quotient, not a quotient already rounded to an integer).
        let int_tile = |o: &Operand| match o {
            Operand::Tile(t) => self.dtype_of(t).is_int(),
            Operand::Imm(_) => true,
        };
        let opts = if alu == Alu::Divide
            && opts.dtype.is_none()
            && matches!(dest, Dest::New(_))
            && int_tile(&a.0)
            && int_tile(&b.0)
        {
            OpOptions {
                dtype: Some(DType::F32),
                ..opts
            }
        } else {
            opts
        };
        match (a.0, b.0) {
            (Operand::Imm(_), Operand::Imm(_)) => {
                self.error(span, "an elementwise operation needs a tile operand")
            }
            (Operand::Tile(t), Operand::Imm(x)) => {
                self.scalar_op(alu, t, Src::Imm(x), false, spans(a.1, b.1), dest, opts)
            }
            (Operand::Imm(x), Operand::Tile(t)) => {
                self.scalar_op(alu, t, Src::Imm(x), true, spans(b.1, a.1), dest, opts)
            }
            (Operand::Tile(x), Operand::Tile(y)) => {
                let (px, py) = (x.shape.partitions(), y.shape.partitions());
                let x = if px == 1 && py > 1 {
                    match self.partition_broadcast(x, py, a.1) {
                        Some(v) => v,
                        None => return Value::Poison,
                    }
                } else {
                    x
                };
                let y = if py == 1 && px > 1 {
                    match self.partition_broadcast(y, px, b.1) {
                        Some(v) => v,
                        None => return Value::Poison,
                    }
                } else {
                    y
                };
                let Some(free) = broadcast_free(x.shape.free(), y.shape.free()) else {
                    let v = nki_lang::RuleViolation::NotBroadcastable {
                        op: alu.name(),
                        a: x.shape,
                        b: y.shape,
                    };
                    return self.error(span, crate::errors::message(&v));
                };
                let mut dims = vec![x.shape.partitions()];
                dims.extend(free);
                let Some(grid) = TileShape::new(&dims) else {
                    return self.error(span, "the broadcast result has more than 5 dimensions");
                };
                // A partition mismatch is the rule's to report: keep the operands as they are.
                let bx = self.broadcast(&x, &grid).unwrap_or(x);
                let by = self.broadcast(&y, &grid).unwrap_or(y);
                match (
                    bx.is_column() && !by.is_column(),
                    by.is_column() && !bx.is_column(),
                ) {
                    (_, true) => {
                        let Some(col) = self.view_id(by, b.1) else {
                            return Value::Poison;
                        };
                        self.scalar_op(alu, bx, Src::Tile(col), false, spans(a.1, b.1), dest, opts)
                    }
                    (true, _) => {
                        let Some(col) = self.view_id(bx, a.1) else {
                            return Value::Poison;
                        };
                        self.scalar_op(alu, by, Src::Tile(col), true, spans(b.1, a.1), dest, opts)
                    }
                    _ => self.tensor_op(alu, bx, by, spans(a.1, b.1), dest, opts),
                }
            }
        }
    }

    /// `tensor_tensor(x, y, op)`, on GpSimd for `power` and for int32 add/subtract/multiply
    /// (where NKI runs them), else on the Vector engine.
    pub(in super::super) fn tensor_op(
        &mut self,
        alu: Alu,
        x: TileView,
        y: TileView,
        spans: InstrSpans,
        dest: Dest<'_>,
        mut opts: OpOptions,
    ) -> Value {
        let int32 = |d: DType| matches!(d, DType::I32 | DType::U32);
        let on_chip_sbuf = self.memory_of(&x) == Memory::Sbuf && self.memory_of(&y) == Memory::Sbuf;
        let gpsimd = alu == Alu::Pow
            || (matches!(alu, Alu::Add | Alu::Subtract | Alu::Multiply)
                && int32(self.dtype_of(&x))
                && int32(self.dtype_of(&y)));
        if opts.engine.is_none() && gpsimd && on_chip_sbuf {
            opts.engine = Some(Engine::GpSimd);
        }
        let (Some(a), Some(b)) = (
            self.view_id(x, spans.get(Part::Slot(1))),
            self.view_id(y, spans.get(Part::Slot(2))),
        ) else {
            return Value::Poison;
        };
        let write = self.write_for(&dest);
        let make = |v| InstrData::Alu {
            dst: Dst { view: v, write },
            src: [Src::Tile(a), Src::Tile(b), Src::None],
            op: [alu, Alu::Bypass],
            rev: 0,
            acc: None,
        };
        match self.emit_op(Opcode::TensorTensor, &make, dest, opts, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `tensor_scalar(data, op, operand)`, the operands swapped with `rev`.
    #[allow(clippy::too_many_arguments)]
    fn scalar_op(
        &mut self,
        alu: Alu,
        data: TileView,
        operand: Src,
        rev: bool,
        spans: InstrSpans,
        dest: Dest<'_>,
        opts: OpOptions,
    ) -> Value {
        let Some(d) = self.view_id(data, spans.get(Part::Slot(1))) else {
            return Value::Poison;
        };
        let write = self.write_for(&dest);
        let make = |v| InstrData::Alu {
            dst: Dst { view: v, write },
            src: [Src::Tile(d), operand, Src::None],
            op: [alu, Alu::Bypass],
            rev: rev as u8,
            acc: None,
        };
        match self.emit_op(Opcode::TensorScalar, &make, dest, opts, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `nl.logical_not(x)`, `nl.invert(x)`: a one-operand ALU operation.
    pub(in super::super) fn nl_unary_alu(
        &mut self,
        name: &str,
        alu: Alu,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let Some((ops, opts)) = self.nl_args(name, args, &["x"], span) else {
            return Value::Poison;
        };
        match ops[0].0 {
            Operand::Tile(t) => self.unary_alu(alu, t, ops[0].1, span, dest, opts),
            Operand::Imm(_) => self.error(ops[0].1, format!("`{name}` takes a tile")),
        }
    }

    /// A one-operand ALU operation on `x` (`tensor_scalar` with an unused operand).
    fn unary_alu(
        &mut self,
        alu: Alu,
        x: TileView,
        x_span: Span,
        span: Span,
        dest: Dest<'_>,
        opts: OpOptions,
    ) -> Value {
        let spans = InstrSpans::at(span).with(1, x_span);
        self.scalar_op(alu, x, Src::Imm(Scalar::Int(0)), false, spans, dest, opts)
    }

    /// `nl.exp(x)` and the other activation functions: `activation(op, x)`.
    pub(in super::super) fn nl_act(
        &mut self,
        name: &str,
        func: ActFn,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let Some((values, opts)) = self.nl_values(name, args, &["x"], span) else {
            return Value::Poison;
        };
        // `sqrt(D)`, `exp(1.0)`, ... of a number at trace time (Python's `math`).
        if let [(x, xs)] = values.as_slice()
            && x.is_number()
        {
            let (x, xs) = (x.clone(), *xs);
            return match self.math1(name, func, x, xs) {
                Some(v) => self.assign(v, span, dest),
                None => self.error(xs, format!("`{name}` of a compile-time number is not evaluated at trace time (`sqrt`, `exp`, `log`, `abs`, `floor`, `ceil` are): compute it outside the kernel and pass it as a float meta-parameter (`const C: f32`)")),
            };
        }
        let Some(ops) = self.nl_operands(values, &["x"]) else {
            return Value::Poison;
        };
        match ops[0].0 {
            Operand::Tile(t) => self.act(
                func,
                t,
                ops[0].1,
                Src::Imm(Scalar::float(1.0)),
                span,
                dest,
                opts,
            ),
            Operand::Imm(_) => self.error(ops[0].1, format!("`{name}` takes a tile")),
        }
    }

    /// `activation(func, x, scale)`.
    #[allow(clippy::too_many_arguments)]
    pub(in super::super) fn act(
        &mut self,
        func: ActFn,
        x: TileView,
        x_span: Span,
        scale: Src,
        span: Span,
        dest: Dest<'_>,
        opts: OpOptions,
    ) -> Value {
        let Some(src) = self.view_id(x, x_span) else {
            return Value::Poison;
        };
        let write = self.write_for(&dest);
        let make = |v| InstrData::Act {
            dst: Dst { view: v, write },
            src,
            func,
            scale,
            bias: Src::None,
            acc: None,
        };
        let spans = InstrSpans::at(span).with(1, x_span);
        match self.emit_op(Opcode::Activation, &make, dest, opts, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `nl.negative(x)`.
    pub(in super::super) fn negative(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some((ops, opts)) = self.nl_args("negative", args, &["x"], span) else {
            return Value::Poison;
        };
        match ops[0].0 {
            Operand::Tile(t) => self.negate(t, ops[0].1, span, dest, opts),
            Operand::Imm(_) => self.error(ops[0].1, "`negative` takes a tile"),
        }
    }

    /// `−x`: `x · −1` on the Vector engine, in `x`'s dtype unless `dtype =` says otherwise (the
    /// weak `−1` takes no part in promotion, as in NKI).
    fn negate(
        &mut self,
        x: TileView,
        x_span: Span,
        span: Span,
        dest: Dest<'_>,
        mut opts: OpOptions,
    ) -> Value {
        opts.dtype.get_or_insert(self.dtype_of(&x));
        let minus = (Operand::Imm(Scalar::float(-1.0)), span);
        self.binary(
            Alu::Multiply,
            (Operand::Tile(x), x_span),
            minus,
            span,
            dest,
            opts,
        )
    }

    /// Rust's operators: on tiles, elementwise operations; on integers, indices and
    /// comparisons, compile-time arithmetic, masks and predicates.
    pub(in super::super) fn operator(&mut self, e: &Expr, dest: Dest<'_>) -> Value {
        let span = e.span();
        match e {
            Expr::Binary { .. } => {
                // A chain `a + b + c ...` nests to the left, as deep as it is long: its left
                // side is walked in a loop, not recursively, and evaluated innermost first.
                let mut spine = Vec::new();
                let mut leaf = e;
                while let Expr::Binary { op, lhs, rhs, span } = leaf {
                    spine.push((*op, &**lhs, &**rhs, *span));
                    leaf = lhs;
                }
                let mut acc = self.eval(leaf);
                let Some(top) = spine.first().copied() else {
                    return acc;
                };
                for &(op, lhs, rhs, span) in spine[1..].iter().rev() {
                    let b = self.eval(rhs);
                    acc = self.binary_operator(op, (acc, lhs), (b, rhs), span, Dest::New(None));
                }
                let (op, lhs, rhs, span) = top;
                let b = self.eval(rhs);
                self.binary_operator(op, (acc, lhs), (b, rhs), span, dest)
            }
            Expr::Neg(inner, _) => match self.eval(inner) {
                Value::Tile(t) => self.negate(t, inner.span(), span, dest, OpOptions::default()),
                Value::Float(f) => self.assign(Value::Float(-f), span, dest),
                v => {
                    let r = self.arith(BinOp::Mul, v, Value::Int(-1), span);
                    self.assign(r, span, dest)
                }
            },
            Expr::Not(inner, _) => match self.eval(inner) {
                Value::Tile(t) => {
                    let alu = if self.dtype_of(&t) == DType::Bool {
                        Alu::LogicalNot
                    } else {
                        Alu::Invert
                    };
                    self.unary_alu(alu, t, inner.span(), span, dest, OpOptions::default())
                }
                Value::Bool(b) => self.assign(Value::Bool(!b), span, dest),
                Value::Int(n) => self.assign(Value::Int(!n), span, dest),
                Value::Poison => Value::Poison,
                other => self.error(span, format!("cannot apply `!` to {}", other.describe())),
            },
            _ => unreachable!("only operators come here"),
        }
    }

    /// `a op b` of evaluated operands (each with its expression, for spans), written to
    /// `dest`.
    fn binary_operator(
        &mut self,
        op: BinOp,
        (a, lhs): (Value, &Expr),
        (b, rhs): (Value, &Expr),
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let tiles = matches!(a, Value::Tile(_)) || matches!(b, Value::Tile(_));
        if !tiles {
            let v = self.arith(op, a, b, span);
            return self.assign(v, span, dest);
        }
        let bool_tiles = [&a, &b].iter().all(|v| match v {
            Value::Tile(t) => self.dtype_of(t) == DType::Bool,
            _ => true,
        });
        let alu = match op {
            BinOp::Add => Alu::Add,
            BinOp::Sub => Alu::Subtract,
            BinOp::Mul => Alu::Multiply,
            BinOp::Div => Alu::Divide,
            BinOp::Rem => Alu::Mod,
            BinOp::BitAnd if bool_tiles => Alu::LogicalAnd,
            BinOp::BitOr if bool_tiles => Alu::LogicalOr,
            BinOp::BitXor if bool_tiles => Alu::LogicalXor,
            BinOp::BitAnd => Alu::BitwiseAnd,
            BinOp::BitOr => Alu::BitwiseOr,
            BinOp::BitXor => Alu::BitwiseXor,
            BinOp::Shl => Alu::LeftShift,
            BinOp::Shr => Alu::RightShift,
            BinOp::Lt => Alu::IsLt,
            BinOp::Le => Alu::IsLe,
            BinOp::Gt => Alu::IsGt,
            BinOp::Ge => Alu::IsGe,
            BinOp::Eq => Alu::IsEqual,
            BinOp::Ne => Alu::NotEqual,
        };
        let (Some(x), Some(y)) = (
            self.operand_of(a, lhs.span()),
            self.operand_of(b, rhs.span()),
        ) else {
            return Value::Poison;
        };
        self.binary(
            alu,
            (x, lhs.span()),
            (y, rhs.span()),
            span,
            dest,
            OpOptions::default(),
        )
    }

    fn operand_of(&mut self, v: Value, span: Span) -> Option<Operand> {
        match v {
            Value::Tile(t) => Some(Operand::Tile(t)),
            Value::Float(f) => Some(Operand::Imm(Scalar::float(super::super::fp32(f)))),
            Value::Int(n) => match i32::try_from(n) {
                Ok(n) => Some(Operand::Imm(Scalar::Int(n))),
                Err(_) => {
                    self.error(span, "an immediate is a 32-bit integer or a float");
                    None
                }
            },
            Value::Bool(b) => Some(Operand::Imm(Scalar::Int(b as i32))),
            Value::Poison => None,
            other => {
                self.error(
                    span,
                    format!("cannot combine {} with a tile", other.describe()),
                );
                None
            }
        }
    }

    /// A compile-time value as an expression's result: itself, or written into a tile view: a
    /// tile copied (`t[...] = x`, `t[...] op= x`), a number filled (`t[...] = 0.0`) or combined
    /// into every element (`t[...] op= 2.0`).
    pub(in super::super) fn assign(&mut self, v: Value, span: Span, dest: Dest<'_>) -> Value {
        let Dest::Into {
            view,
            span: dspan,
            accumulate,
        } = dest
        else {
            return v;
        };
        match v {
            Value::Tile(src) => self.copy_into(src, view, span, dspan, accumulate),
            Value::Poison => Value::Poison,
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                let Some(x) = self.operand_of(v, span) else {
                    return Value::Poison;
                };
                let Operand::Imm(value) = x else {
                    unreachable!("numbers are immediates")
                };
                let Some(op) = accumulate else {
                    return match self.fill(view, value, span, OpOptions::default()) {
                        true => Value::Tile(view),
                        false => Value::Poison,
                    };
                };
                let into = Dest::Into {
                    view,
                    span: dspan,
                    accumulate: None,
                };
                let opts = OpOptions::default();
                self.binary(
                    op,
                    (Operand::Tile(view), dspan),
                    (x, span),
                    span,
                    into,
                    opts,
                )
            }
            other => self.error(
                span,
                format!("cannot assign {} to a tile", other.describe()),
            ),
        }
    }

    /// `nl.where(condition, x, y)`: `select`, the condition a tile (nonzero = true), `x` and
    /// `y` tiles or numbers broadcast to the condition's grid.
    pub(in super::super) fn nl_where(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some((ops, opts)) = self.nl_args("where", args, &["condition", "x", "y"], span) else {
            return Value::Poison;
        };
        let Operand::Tile(cond) = ops[0].0 else {
            return self.error(ops[0].1, "the condition of `where` is a tile");
        };
        let grid = cond.shape;
        let mut src = [Src::None; 3];
        for (k, &(o, sp)) in ops.iter().enumerate() {
            match self.src_on(o, &grid, sp) {
                Some(s) => src[k] = s,
                None => return Value::Poison,
            }
        }
        let Src::Tile(pred) = src[0] else {
            return Value::Poison;
        };
        let write = self.write_for(&dest);
        let make = |v| InstrData::Select {
            dst: Dst { view: v, write },
            pred: Pred::Tile(pred),
            on_true: src[1],
            on_false: src[2],
        };
        let spans = InstrSpans::at(span)
            .with(1, ops[0].1)
            .with(2, ops[1].1)
            .with(3, ops[2].1);
        match self.emit_op(Opcode::Select, &make, dest, opts, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `tensor_copy_predicated(dst, src, predicate, reverse_pred)`: `src`'s elements into `dst`
    /// where `predicate` is nonzero (zero with `reverse_pred`), the others left as they are: a
    /// `select` of `src` and `dst` itself, written into `dst`. Returns nothing. By position the
    /// arguments are NKI 0.6's (`dst` first); NKI 2.26 took them by keyword only.
    pub(in super::super) fn tensor_copy_predicated(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        const NAME: &str = "tensor_copy_predicated";
        let params = ["dst", "src", "predicate", "reverse_pred", "mask", "dtype"];
        let Some(a) = self.dst_call_args(NAME, dest, args, &params, 3, span) else {
            return Value::Poison;
        };
        let reverse = match a[3].map(|e| self.bool_arg(e, "reverse_pred")) {
            None => false,
            Some(Some(b)) => b,
            Some(None) => return Value::Poison,
        };
        let mut opts = OpOptions::default();
        for (k, p) in [
            (4, super::super::builtins::P::Mask),
            (5, super::super::builtins::P::DType),
        ] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut opts)
            {
                return Value::Poison;
            }
        }
        let (dst_e, src_e, pred_e) = (
            a[0].expect("required"),
            a[1].expect("required"),
            a[2].expect("required"),
        );
        let (Some(src), Some(dst), Some(pred)) = (
            self.tile_arg(src_e, Opcode::Select, 2),
            self.tile_arg(dst_e, Opcode::Select, 0),
            self.tile_arg(pred_e, Opcode::Select, 1),
        ) else {
            return Value::Poison;
        };
        if !self.dtype_is_dst(&opts, &dst, a[5].map_or(span, |e| e.span())) {
            return Value::Poison;
        }
        let grid = dst.shape;
        let (Some(Src::Tile(s)), Some(Src::Tile(d)), Some(Src::Tile(p))) = (
            self.src_on(Operand::Tile(src), &grid, src_e.span()),
            self.src_on(Operand::Tile(dst), &grid, dst_e.span()),
            self.src_on(Operand::Tile(pred), &grid, pred_e.span()),
        ) else {
            return Value::Poison;
        };
        let (on_true, on_false) = if reverse { (d, s) } else { (s, d) };
        let make = |v| InstrData::Select {
            dst: Dst::overwrite(v),
            pred: Pred::Tile(p),
            on_true: Src::Tile(on_true),
            on_false: Src::Tile(on_false),
        };
        let spans = InstrSpans::at(span)
            .with(0, dst_e.span())
            .with(1, pred_e.span())
            .with(2, src_e.span())
            .with(3, dst_e.span());
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        match self.emit_op(Opcode::Select, &make, into, opts, spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }

    /// `broadcast_to(src, shape)`: along the free dimensions a view (no instruction); across
    /// partitions a TensorE matmul with a tile of ones, as NKI does.
    pub(in super::super) fn broadcast_to(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let Some(a) = self.args("broadcast_to", args, &["src", "shape"], 2, span) else {
            return Value::Poison;
        };
        let (src_e, shape_e) = (a[0].expect("required"), a[1].expect("required"));
        let src = match self.eval(src_e) {
            Value::Tile(v) => v,
            Value::Poison => return Value::Poison,
            other => {
                return self.error(
                    src_e.span(),
                    format!("`broadcast_to` takes a tile, not {}", other.describe()),
                );
            }
        };
        let Some(shape) = self.shape_arg(shape_e) else {
            return Value::Poison;
        };
        let src = if src.shape.partitions() == 1 && shape.partitions() > 1 {
            match self.partition_broadcast(src, shape.partitions(), src_e.span()) {
                Some(v) => v,
                None => return Value::Poison,
            }
        } else {
            src
        };
        match self.broadcast(&src, &shape) {
            Some(v) => self.assign(Value::Tile(v), span, dest),
            None => {
                let v = nki_lang::RuleViolation::NotBroadcastable {
                    op: "broadcast_to",
                    a: src.shape,
                    b: shape,
                };
                self.error(src_e.span(), crate::errors::message(&v))
            }
        }
    }

    /// A shape argument: `[128, 512]`, NKI's tuple `(128, 512)`, or a shape value (`x.shape`).
    pub(in super::super) fn shape_arg(&mut self, e: &Expr) -> Option<TileShape> {
        let mut sizes = Vec::new();
        if let Expr::Array(dims, _) | Expr::Tuple(dims, _) = e {
            for d in dims {
                match self.int(d, "a tile dimension").map(u32::try_from) {
                    Some(Ok(n)) if n > 0 => sizes.push(n),
                    Some(_) => {
                        self.error(d.span(), "a tile dimension is a positive 32-bit integer");
                        return None;
                    }
                    None => return None,
                }
            }
        } else {
            for d in self.shape_value(e)? {
                match d {
                    Dim::Fixed(n) => match u32::try_from(n) {
                        Ok(n) => sizes.push(n),
                        Err(_) => {
                            self.error(e.span(), "a tile dimension is a positive 32-bit integer");
                            return None;
                        }
                    },
                    Dim::Sym(s) => {
                        let name = self
                            .buf
                            .symbols
                            .get(usize::from(s))
                            .cloned()
                            .unwrap_or_default();
                        self.error(
                            e.span(),
                            format!("a tile's dimensions are compile-time integers, and this shape has the symbolic dimension `{name}`: make it a meta-parameter (`const {name}: usize`) or give the tile's shape"),
                        );
                        return None;
                    }
                }
            }
        }
        let shape = TileShape::new(&sizes).filter(|s| s.rank() >= 2);
        if shape.is_none() {
            self.error(
                e.span(),
                format!(
                    "a tile has a partition dimension and 1 to {} free dimensions",
                    MAX_TILE_RANK - 1
                ),
            );
        }
        shape
    }

    /// A shape given as a value (`x.shape`, or a name bound to one): its dimensions, or an
    /// error on `e` for any other value.
    pub(in super::super) fn shape_value(&mut self, e: &Expr) -> Option<Vec<Dim>> {
        match self.eval(e) {
            Value::Shape(dims) => Some(dims),
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "a shape is an array of dimensions `[128, 512]`, a tuple `(128, 512)` or a tensor's or tile's `x.shape`, not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// A one-partition tile `[1, F]` repeated on `partitions` partitions: an SBUF tile of the
    /// same dtype, computed as `onesᵀ · src` on TensorE (512 columns per matmul, through PSUM).
    /// Exact for finite values; a subnormal value becomes zero (TensorE flushes them). An
    /// integer tile is broadcast exactly through f32 ([`Lowerer::int_partition_broadcast`]).
    pub(in super::super) fn partition_broadcast(
        &mut self,
        src: TileView,
        partitions: u32,
        span: Span,
    ) -> Option<TileView> {
        let dtype = self.dtype_of(&src);
        if dtype.is_int() {
            return self.int_partition_broadcast(src, partitions, span);
        }
        if !matches!(dtype, DType::F32 | DType::Bf16 | DType::F16) {
            self.error(span, format!("a broadcast across partitions goes through TensorE, which takes f32, bf16 or f16 tiles, not {dtype}"));
            return None;
        }
        let free = src.shape.free();
        let [f] = *free else {
            self.error(span, "a broadcast across partitions takes a `[1, F]` tile");
            return None;
        };
        let shape = TileShape::new(&[partitions, f])?;
        let Value::Tile(out) = self.new_tile(None, Memory::Sbuf, dtype, shape, span) else {
            return None;
        };
        let ones_shape = TileShape::new(&[1, partitions])?;
        let Value::Tile(ones) = self.new_tile(None, Memory::Sbuf, dtype, ones_shape, span) else {
            return None;
        };
        self.fill(ones, Scalar::float(1.0), span, OpOptions::default())
            .then_some(())?;
        let ones_id = self.view_id(ones, span)?;
        let mut start = 0u32;
        while start < f {
            let n = f
                .saturating_sub(start)
                .min(nki_lang::target::GEMM_MOVING_FMAX);
            let cols = |v: &TileView, rows: u32| TileView {
                shape: TileShape::new(&[rows, n]).expect("rank 2"),
                offset: v
                    .offset
                    .checked_add(&nki_lang::Affine::constant(
                        i64::from(start).saturating_mul(v.strides[0]),
                    ))
                    .unwrap_or(v.offset),
                ..*v
            };
            let moving = self.view_id(cols(&src, 1), span)?;
            let psum_shape = TileShape::new(&[partitions, n])?;
            let Value::Tile(acc) = self.new_tile(None, Memory::Psum, DType::F32, psum_shape, span)
            else {
                return None;
            };
            let acc_id = self.view_id(acc, span)?;
            let mm = InstrData::Matmul {
                dst: Dst::overwrite(acc_id),
                stationary: ones_id,
                moving,
            };
            self.emit_checked(
                nki_lang::Instr::new(Opcode::Matmul, mm),
                InstrSpans::at(span),
            )
            .then_some(())?;
            let part = self.view_id(cols(&out, partitions), span)?;
            let copy = InstrData::Unary {
                dst: Dst {
                    view: part,
                    write: Write::Overwrite,
                },
                src: acc_id,
            };
            self.emit_checked(
                nki_lang::Instr::new(Opcode::TensorCopy, copy),
                InstrSpans::at(span),
            )
            .then_some(())?;
            // start + n ≤ f.
            start = start.saturating_add(n);
        }
        Some(out)
    }

    /// An integer `[1, F]` tile repeated on `partitions` partitions, bit for bit: its values
    /// through f32, where TensorE's broadcast is exact — whole for 8- and 16-bit integers, as
    /// two 16-bit halves (`x & 0xffff`, `x >> 16`) recombined by `(hi << 16) | lo` for 32-bit
    /// ones.
    fn int_partition_broadcast(
        &mut self,
        src: TileView,
        partitions: u32,
        span: Span,
    ) -> Option<TileView> {
        let dtype = self.dtype_of(&src);
        let spans = InstrSpans::at(span).with(1, span);
        let as_f32 = OpOptions {
            dtype: Some(DType::F32),
            ..OpOptions::default()
        };
        let back = OpOptions {
            dtype: Some(dtype),
            ..OpOptions::default()
        };
        // `x op k` of a tile into a new tile of `opts`' dtype.
        let scalar = |this: &mut Self, op: Alu, x: TileView, k: i32, opts: OpOptions| match this
            .scalar_op(
                op,
                x,
                Src::Imm(Scalar::Int(k)),
                false,
                spans,
                Dest::New(None),
                opts,
            ) {
            Value::Tile(v) => Some(v),
            _ => None,
        };
        // A tile of integers below 2^24 in magnitude, broadcast through f32 and back.
        let through_f32 = |this: &mut Self, x: TileView| {
            let f = this.copy_op(x, span, Dest::New(None), as_f32, span)?;
            let b = this.partition_broadcast(f, partitions, span)?;
            this.copy_op(b, span, Dest::New(None), back, span)
        };
        if dtype.size() < 4 {
            return through_f32(self, src);
        }
        let lo = scalar(self, Alu::BitwiseAnd, src, 0xffff, back)?;
        let hi = scalar(self, Alu::RightShift, src, 16, back)?;
        let lo = through_f32(self, lo)?;
        let hi = through_f32(self, hi)?;
        let hi = scalar(self, Alu::LeftShift, hi, 16, back)?;
        let (h, l) = (self.view_id(hi, span)?, self.view_id(lo, span)?);
        let make = |v| InstrData::Alu {
            dst: Dst::overwrite(v),
            src: [Src::Tile(h), Src::Tile(l), Src::None],
            op: [Alu::BitwiseOr, Alu::Bypass],
            rev: 0,
            acc: None,
        };
        self.emit_op(Opcode::TensorTensor, &make, Dest::New(None), back, spans)
    }

    /// `nl.transpose(x)`: a 2-D tile `[P ≤ 128, F ≤ 128]` transposed on TensorE into PSUM
    /// (copied to SBUF in `dtype` when one is given).
    pub(in super::super) fn nl_transpose(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let Some((ops, opts)) = self.nl_args("transpose", args, &["x"], span) else {
            return Value::Poison;
        };
        let Operand::Tile(x) = ops[0].0 else {
            return self.error(ops[0].1, "`transpose` takes a tile");
        };
        if x.shape.rank() != 2 {
            let v = nki_lang::RuleViolation::RankLimit {
                op: "transpose",
                operand: "x",
                rank: x.shape.rank(),
                max: 2,
            };
            return self.error(ops[0].1, crate::errors::message(&v));
        }
        let Some(src) = self.view_id(x, ops[0].1) else {
            return Value::Poison;
        };
        let make = |v| InstrData::Unary {
            dst: Dst::overwrite(v),
            src,
        };
        let spans = InstrSpans::at(span).with(1, ops[0].1);
        let t_opts = OpOptions {
            mask: opts.mask,
            ..OpOptions::default()
        };
        match opts.dtype {
            None => match self.emit_op(Opcode::Transpose, &make, dest, t_opts, spans) {
                Some(v) => Value::Tile(v),
                None => Value::Poison,
            },
            Some(_) => {
                let Some(t) =
                    self.emit_op(Opcode::Transpose, &make, Dest::New(None), t_opts, spans)
                else {
                    return Value::Poison;
                };
                let copy = OpOptions {
                    dtype: opts.dtype,
                    ..OpOptions::default()
                };
                match self.copy_op(t, span, dest, copy, span) {
                    Some(v) => Value::Tile(v),
                    None => Value::Poison,
                }
            }
        }
    }
}
