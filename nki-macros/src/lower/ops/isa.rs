//! The one assembler of ISA calls: arguments matched to a table row's parameters, each filling
//! an instruction slot or a function code, the instruction built in its opcode's format.

use crate::span::Span;
use nki_lang::{
    AccOut, ActFn, Alu, Dst, Engine, Format, InstrData, MAX_TILE_RANK, Memory, Opcode, Pred,
    Scalar, Src, TileShape, TileView, ViewId,
};

use super::super::builtins::{P, Param};
use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

/// A source argument before it becomes an operand: a view still to be broadcast to the
/// instruction's grid, or an immediate.
#[derive(Copy, Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "a transient operand of one call's lowering; a view is its common case"
)]
pub(in super::super) enum Operand {
    /// A tile view.
    Tile(TileView),
    /// An immediate.
    Imm(Scalar),
}

/// Everything the arguments of an ISA call give.
#[derive(Default)]
struct Collected {
    srcs: [Option<(Operand, Span)>; 5],
    op: [Option<Alu>; 2],
    act: Option<ActFn>,
    rev: u8,
    negate: bool,
    keepdims: bool,
    axes: Option<(Vec<i64>, Span)>,
    reduce_op: Option<Alu>,
    reduce_res: Option<(TileView, Span)>,
    expr: Option<nki_lang::AxisIndex>,
    pred: Option<(nki_lang::AxisIndex, nki_lang::Cmp)>,
    options: OpOptions,
}

impl Lowerer<'_> {
    /// A source operand: a tile (view) or an immediate number.
    pub(in super::super) fn operand(&mut self, e: &Expr, what: &str) -> Option<Operand> {
        let v = self.eval(e);
        self.operand_value(v, e.span(), what)
    }

    /// An evaluated operand (its tokens at `span`): a tile or an immediate.
    pub(in super::super) fn operand_value(
        &mut self,
        v: Value,
        span: Span,
        what: &str,
    ) -> Option<Operand> {
        match v {
            Value::Tile(v) => Some(Operand::Tile(v)),
            Value::Float(f) => Some(Operand::Imm(Scalar::float(super::super::fp32(f)))),
            Value::Int(n) => match i32::try_from(n) {
                Ok(n) => Some(Operand::Imm(Scalar::Int(n))),
                Err(_) => {
                    self.error(span, "an immediate is a 32-bit integer or a float");
                    None
                }
            },
            Value::Bool(b) => Some(Operand::Imm(Scalar::Int(b as i32))),
            // A loop-only index (`k_d_i + seed_offset_base`, a Python integer of the loop in
            // NKI's trace): its value in each iteration, a one-element int32 tile (`iota`).
            Value::Index(i) if !i.is_advanced() => self.index_tile(i.lin, span).map(Operand::Tile),
            Value::Poison => None,
            other => {
                self.error(
                    span,
                    format!("{what} is a tile or a number, not {}", other.describe()),
                );
                None
            }
        }
    }

    /// A `[1, 1]` int32 tile holding a loop-only index expression's value: one `iota`.
    fn index_tile(&mut self, lin: nki_lang::Affine, span: Span) -> Option<TileView> {
        let expr = nki_lang::AxisIndex {
            start: lin,
            grid: [0; MAX_TILE_RANK],
        };
        let Some(id) = self.buf.add_expr(expr) else {
            self.error(span, "a kernel uses at most 65535 expressions");
            return None;
        };
        let options = OpOptions {
            dtype: Some(nki_lang::DType::I32),
            shape: TileShape::new(&[1, 1]),
            ..OpOptions::default()
        };
        let make = move |v| InstrData::Iota {
            dst: Dst::overwrite(v),
            expr: id,
        };
        self.emit_op(
            Opcode::Iota,
            &make,
            Dest::New(None),
            options,
            InstrSpans::at(span),
        )
    }

    /// An ALU operation named by an argument (`op = add`, `op = nl::maximum`).
    pub(in super::super) fn alu_arg(&mut self, e: &Expr) -> Option<Alu> {
        match self.eval(e) {
            Value::Code(n) if Alu::from_name(&n).is_some() => Alu::from_name(&n),
            Value::Poison => None,
            _ => {
                self.error(
                    e.span(),
                    "expected an ALU operation: add, subtract, multiply, divide, maximum, minimum, power, bitwise_and, equal, ...",
                );
                None
            }
        }
    }

    /// An activation function named by an argument (`op = exp`).
    fn act_arg(&mut self, e: &Expr) -> Option<ActFn> {
        match self.eval(e) {
            Value::Code(n) if ActFn::from_name(&n).is_some() => ActFn::from_name(&n),
            Value::Poison => None,
            _ => {
                self.error(
                    e.span(),
                    "expected an activation function: exp, log, tanh, gelu, sigmoid, silu, relu, ...",
                );
                None
            }
        }
    }

    /// An engine named by an argument (`engine = vector`, `engine = nisa::gpsimd_engine`).
    pub(in super::super) fn engine_arg(&mut self, e: &Expr) -> Option<Engine> {
        match self.eval(e) {
            Value::Code(n) if Engine::from_name(&n).is_some() => Engine::from_name(&n),
            Value::Poison => None,
            _ => {
                self.error(
                    e.span(),
                    "expected an engine: tensor, vector, scalar or gpsimd",
                );
                None
            }
        }
    }

    /// A compile-time bool argument.
    pub(in super::super) fn bool_arg(&mut self, e: &Expr, what: &str) -> Option<bool> {
        match self.eval(e) {
            Value::Bool(b) => Some(b),
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!("`{what}` is a bool, not {}", other.describe()),
                );
                None
            }
        }
    }

    /// Reduced axes (`axis = 1`, `axis = [1, 2]`) of a tile of shape `data` for the function
    /// `func`: free axes, as a bit mask (bit `j` = tile axis `j + 1`). A partition or missing
    /// axis is the reduction rule's error, on the argument.
    pub(in super::super) fn axes_arg(
        &mut self,
        e: &Expr,
        func: &'static str,
        data: &TileShape,
    ) -> Option<u8> {
        let items: Vec<&Expr> = match e {
            Expr::Array(v, _) | Expr::Tuple(v, _) => v.iter().collect(),
            e => vec![e],
        };
        let mut axes = Vec::new();
        for it in items {
            axes.push(self.int(it, "an axis")?);
        }
        match nki_lang::rules::check_reduce_axes(func, &axes, data.rank().saturating_sub(1)) {
            Ok(mask) => Some(mask),
            Err(v) => {
                self.error(e.span(), crate::errors::message(&v));
                None
            }
        }
    }

    /// The options every operation takes: `dtype`, `engine`, `mask`.
    pub(in super::super) fn option_arg(&mut self, p: P, e: &Expr, opts: &mut OpOptions) -> bool {
        match p {
            P::DType => match self.dtype_arg(e) {
                Some(d) => opts.dtype = Some(d),
                None => return false,
            },
            P::Engine => match self.engine_arg(e) {
                Some(g) => opts.engine = Some(g),
                None => return false,
            },
            P::Mask => match self.mask_arg(e) {
                Some(m) => opts.mask = m,
                None => return false,
            },
            P::Tile(_)
            | P::TileOrImm(_)
            | P::Alu(_)
            | P::Act
            | P::Rev(_)
            | P::Negate
            | P::KeepDims
            | P::Axis
            | P::ReduceOp
            | P::ReduceRes
            | P::ReduceCmd
            | P::Expr
            | P::Pred => unreachable!("not an option"),
        }
        true
    }

    /// `view` broadcast along the free dimensions to `shape` (NumPy's rules on the free
    /// dimensions, aligned from the right; the partitions must agree). `None` when the shapes
    /// do not broadcast.
    pub(in super::super) fn broadcast(&self, v: &TileView, shape: &TileShape) -> Option<TileView> {
        if v.shape.partitions() != shape.partitions() {
            return None;
        }
        if v.shape.same_layout(shape) {
            return Some(*v);
        }
        let (from, to) = (v.shape.free(), shape.free());
        if from.len() > to.len() {
            // Leading size-1 dimensions can go.
            let extra = from.len().saturating_sub(to.len());
            if from[..extra].iter().any(|&d| d != 1) {
                return None;
            }
        }
        let mut strides = [0i64; MAX_TILE_RANK - 1];
        for (k, &n) in to.iter().enumerate().rev() {
            let back = to.len().saturating_sub(k);
            let Some(j) = from.len().checked_sub(back) else {
                continue;
            };
            match from[j] {
                1 => {}
                d if d == n => strides[k] = v.strides[j],
                _ => return None,
            }
        }
        Some(TileView {
            shape: *shape,
            strides,
            ..*v
        })
    }

    /// An operand as a source of an instruction whose grid is `grid`: a tile broadcast to it.
    pub(in super::super) fn src_on(
        &mut self,
        o: Operand,
        grid: &TileShape,
        span: Span,
    ) -> Option<Src> {
        match o {
            Operand::Imm(x) => Some(Src::Imm(x)),
            Operand::Tile(v) => {
                let v = self.broadcast(&v, grid).unwrap_or(v);
                self.view_id(v, span).map(Src::Tile)
            }
        }
    }

    /// A tile source of `opcode` as the instruction reads it: `affine_select` runs on GpSimd,
    /// which cannot read PSUM, so NKI copies a PSUM tile out first (`None` after an error).
    fn source_tile(&mut self, opcode: Opcode, v: TileView, span: Span) -> Option<TileView> {
        if opcode == Opcode::AffineSelect {
            self.out_of_psum(v, span)
        } else {
            Some(v)
        }
    }

    /// An ISA call: every argument matched to the row's parameters, the instruction assembled
    /// in its opcode's format and emitted through the opcode's rules.
    pub(in super::super) fn isa(
        &mut self,
        opcode: Opcode,
        params: &[Param],
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let info = opcode.info();
        let names: Vec<&str> = params.iter().map(|p| p.name).collect();
        let Some(a) = self.args(info.name, args, &names, 0, span) else {
            return Value::Poison;
        };
        let mut c = Collected::default();
        let mut ok = true;
        let mut spans = InstrSpans::at(span);
        for (p, e) in params.iter().zip(&a) {
            let Some(e) = e else {
                if p.required {
                    self.error(
                        span,
                        format!(
                            "`{}` needs the argument `{}`",
                            info.name,
                            super::super::call::shown(p.name)
                        ),
                    );
                    ok = false;
                }
                continue;
            };
            ok &= match p.kind {
                P::Tile(slot) => match self.eval(e) {
                    Value::Tile(v) => match self.source_tile(opcode, v, e.span()) {
                        Some(v) => {
                            c.srcs[slot as usize] = Some((Operand::Tile(v), e.span()));
                            spans = spans.with(slot as usize, e.span());
                            true
                        }
                        None => false,
                    },
                    Value::Poison => false,
                    Value::Tensor(_) | Value::Access(_) => {
                        let spec = &info.operands[slot as usize];
                        let v = nki_lang::rules::check_memory(
                            info.name,
                            spec.name,
                            Memory::Hbm,
                            spec.memory,
                        );
                        if let Err(v) = v {
                            self.error(e.span(), crate::errors::message(&v));
                        }
                        false
                    }
                    other => {
                        let what = format!(
                            "operand '{}' of '{}' must be a tile, not {}",
                            &super::super::call::shown(p.name),
                            info.name,
                            other.describe()
                        );
                        self.error(e.span(), what);
                        false
                    }
                },
                P::TileOrImm(slot) => match self.operand(e, p.name) {
                    Some(Operand::Tile(v)) => match self.source_tile(opcode, v, e.span()) {
                        Some(v) => {
                            c.srcs[slot as usize] = Some((Operand::Tile(v), e.span()));
                            spans = spans.with(slot as usize, e.span());
                            true
                        }
                        None => false,
                    },
                    Some(o) => {
                        c.srcs[slot as usize] = Some((o, e.span()));
                        spans = spans.with(slot as usize, e.span());
                        true
                    }
                    None => false,
                },
                P::Alu(j) => {
                    spans.codes[j as usize] = Some(e.span());
                    self.alu_arg(e)
                        .map(|o| c.op[j as usize] = Some(o))
                        .is_some()
                }
                P::Act => {
                    spans.codes[0] = Some(e.span());
                    self.act_arg(e).map(|f| c.act = Some(f)).is_some()
                }
                P::Rev(j) => self
                    .bool_arg(e, p.name)
                    .map(|b| c.rev |= (b as u8) << j)
                    .is_some(),
                P::Negate => self.bool_arg(e, p.name).map(|b| c.negate = b).is_some(),
                P::KeepDims => self.bool_arg(e, p.name).map(|b| c.keepdims = b).is_some(),
                P::Axis => {
                    let items: Vec<&Expr> = match e {
                        Expr::Array(v, _) | Expr::Tuple(v, _) => v.iter().collect(),
                        e => vec![e],
                    };
                    let mut axes = Vec::new();
                    for it in items {
                        match self.int(it, "an axis") {
                            Some(n) => axes.push(n),
                            None => ok = false,
                        }
                    }
                    c.axes = Some((axes, e.span()));
                    true
                }
                P::ReduceOp => {
                    spans.codes[2] = Some(e.span());
                    self.alu_arg(e).map(|o| c.reduce_op = Some(o)).is_some()
                }
                // The accumulators' use: each form the model runs reduces this instruction's
                // results alone (into `reduce_res` when given).
                P::ReduceCmd => match super::select_reduce::reduce_cmd(e) {
                    Ok(_) => true,
                    Err(why) => {
                        self.error(e.span(), why);
                        false
                    }
                },
                P::ReduceRes => match self.eval(e) {
                    Value::Tile(v) => {
                        c.reduce_res = Some((v, e.span()));
                        spans = spans.with(4, e.span());
                        true
                    }
                    Value::Poison => false,
                    other => {
                        self.error(
                            e.span(),
                            format!("`reduce_res` is a (P, 1) tile, not {}", other.describe()),
                        );
                        false
                    }
                },
                P::Expr => match self.eval(e) {
                    Value::Index(i) => {
                        c.expr = Some(nki_lang::AxisIndex {
                            start: i.lin,
                            grid: i.grid,
                        });
                        // NKI's `iota` of an `mgrid` expression has the grid's whole shape.
                        let dense = i.is_advanced() && i.dense.iter().any(|&d| d != 0);
                        c.options.shape = Some(expr_shape(if dense { &i.dense } else { &i.sizes }));
                        true
                    }
                    Value::Int(n) => {
                        c.expr = Some(nki_lang::AxisIndex::constant(n));
                        true
                    }
                    Value::Poison => false,
                    other => {
                        self.error(
                            e.span(),
                            format!(
                                "iota takes an affine expression of index grids, not {}",
                                other.describe()
                            ),
                        );
                        false
                    }
                },
                P::Pred => self.pred_arg(e).map(|pr| c.pred = Some(pr)).is_some(),
                P::Engine => {
                    spans.engine = Some(e.span());
                    self.option_arg(p.kind, e, &mut c.options)
                }
                P::DType | P::Mask => self.option_arg(p.kind, e, &mut c.options),
            };
        }
        if !ok {
            return Value::Poison;
        }
        if c.reduce_res.is_some() != c.reduce_op.is_some() {
            self.error(span, "`reduce_op` and `reduce_res` go together");
            return Value::Poison;
        }
        self.assemble(opcode, c, spans, dest)
    }

    /// Builds the instruction of `opcode` from the collected arguments and emits it.
    fn assemble(
        &mut self,
        opcode: Opcode,
        c: Collected,
        spans: InstrSpans,
        dest: Dest<'_>,
    ) -> Value {
        let info = opcode.info();
        // The grid: the first tile operand's shape (broadcast columns and immediates follow it).
        let grid = c.srcs.iter().flatten().find_map(|(o, _)| match o {
            Operand::Tile(v) => Some(v.shape),
            Operand::Imm(_) => None,
        });
        let grid = match (grid, c.options.shape, &dest) {
            (Some(g), _, _) | (None, Some(g), _) => g,
            (None, None, Dest::Into { view, .. }) => view.shape,
            (None, None, Dest::New(_)) => {
                self.error(spans.whole, format!("'{}' needs a tile operand", info.name));
                return Value::Poison;
            }
        };
        let mut src = [Src::None; 5];
        for (slot, s) in c.srcs.iter().enumerate() {
            if let Some((o, sp)) = *s {
                // The 8 `vals` of a search and its `dst_idx` keep their own shape: they are not
                // on the grid.
                let o = match o {
                    Operand::Tile(v)
                        if info.format == Format::Match8 && (slot == 2 || slot == 4) =>
                    {
                        match self.view_id(v, sp) {
                            Some(id) => {
                                src[slot] = Src::Tile(id);
                                continue;
                            }
                            None => return Value::Poison,
                        }
                    }
                    o @ (Operand::Tile(_) | Operand::Imm(_)) => o,
                };
                match self.src_on(o, &grid, sp) {
                    Some(x) => src[slot] = x,
                    None => return Value::Poison,
                }
            }
        }
        let view = |s: Src| s.view().unwrap_or(ViewId(u16::MAX));
        let acc = match (c.reduce_op, c.reduce_res) {
            (Some(op), Some((v, sp))) => match self.view_id(v, sp) {
                Some(view) => Some(AccOut { op, view }),
                None => return Value::Poison,
            },
            _ => None,
        };
        let expr = match c.expr {
            Some(e) => match self.buf.add_expr(e) {
                Some(id) => Some(id),
                None => return self.error(spans.whole, "a kernel uses at most 65535 expressions"),
            },
            None => None,
        };
        let pred = match c.pred {
            Some((e, cmp)) => match self.buf.add_expr(e) {
                Some(id) => Some(Pred::Affine { expr: id, cmp }),
                None => return self.error(spans.whole, "a kernel uses at most 65535 expressions"),
            },
            None => None,
        };
        let write = self.write_for(&dest);
        let op = [
            c.op[0].unwrap_or(Alu::Bypass),
            c.op[1].unwrap_or(Alu::Bypass),
        ];
        let axes = match (&c.axes, grid) {
            (Some((list, sp)), data) if info.format == Format::Reduce => {
                match nki_lang::rules::check_reduce_axes(
                    info.name,
                    list,
                    data.rank().saturating_sub(1),
                ) {
                    Ok(m) => m,
                    Err(v) => return self.error(*sp, crate::errors::message(&v)),
                }
            }
            _ => 0,
        };
        let (rev, negate, act) = (c.rev, c.negate, c.act);
        let make = move |v: ViewId| -> InstrData {
            let dst = Dst { view: v, write };
            match info.format {
                Format::Alu => InstrData::Alu {
                    dst,
                    src: [src[1], src[2], src[3]],
                    op,
                    rev,
                    acc,
                },
                Format::Act => InstrData::Act {
                    dst,
                    src: view(src[1]),
                    func: act.unwrap_or(ActFn::Identity),
                    scale: match src[2] {
                        Src::None => Src::Imm(Scalar::float(1.0)),
                        s @ (Src::Tile(_) | Src::Imm(_)) => s,
                    },
                    bias: src[3],
                    acc,
                },
                Format::Act2 => InstrData::Act2 {
                    dst,
                    src: view(src[1]),
                    imm: [src[2], src[3]],
                    op,
                    rev,
                    func: act.unwrap_or(ActFn::Identity),
                    acc,
                },
                Format::Reduce => InstrData::Reduce {
                    dst,
                    src: view(src[1]),
                    op: op[0],
                    axes,
                    negate,
                },
                Format::Scan => InstrData::Scan {
                    dst,
                    src: [view(src[1]), view(src[2])],
                    init: src[3],
                    op,
                    rev,
                },
                Format::Iota => InstrData::Iota {
                    dst,
                    expr: expr.unwrap_or(nki_lang::ExprId(u16::MAX)),
                },
                Format::Select => InstrData::Select {
                    dst,
                    pred: pred.unwrap_or(Pred::Tile(view(src[1]))),
                    on_true: src[2],
                    on_false: src[3],
                },
                Format::Unary => InstrData::Unary {
                    dst,
                    src: view(src[1]),
                },
                Format::Match8 => InstrData::Match8 {
                    dst,
                    data: view(src[1]),
                    vals: view(src[2]),
                    imm: match src[3] {
                        Src::Imm(x) => Some(x),
                        Src::None | Src::Tile(_) => None,
                    },
                    idx: src[4].view(),
                },
                Format::Gather => InstrData::Gather {
                    dst,
                    data: view(src[1]),
                    indices: view(src[2]),
                },
                Format::Rng => InstrData::Rng {
                    dst,
                    src: src[1],
                    prob: src[2],
                },
                Format::LoopBegin
                | Format::LoopEnd
                | Format::Dma
                | Format::Fill
                | Format::Matmul
                | Format::SelectReduce
                | Format::Indirect
                | Format::DynCopy
                | Format::Seed
                | Format::RangeSelect
                | Format::Shuffle
                | Format::QuantizeMx
                | Format::MatmulMx
                | Format::LocalGather
                | Format::Nonzero
                | Format::DmaCompute
                | Format::TopK
                | Format::Register => unreachable!("{} is lowered by hand", info.name),
            }
        };
        let mut options = c.options;
        if info.format == Format::Reduce && !c.keepdims {
            options.squeeze = true;
        }
        if info.format == Format::Iota && options.shape.is_none() {
            options.shape = Some(grid);
        }
        match self.emit_op(opcode, &make, dest, options, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }
}

/// The shape of an index expression's grid: its axes' extents (size 1 where it has none).
fn expr_shape(sizes: &[u32; MAX_TILE_RANK]) -> TileShape {
    let rank = (0..MAX_TILE_RANK)
        .rev()
        .find(|&j| sizes[j] != 0)
        .map_or(2, |j| j.saturating_add(1).max(2));
    let dims: Vec<u32> = sizes[..rank].iter().map(|&s| s.max(1)).collect();
    TileShape::new(&dims).unwrap_or_else(|| TileShape::new(&[1, 1]).expect("rank 2"))
}
