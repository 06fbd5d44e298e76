//! The language's functions: `load`, `store`, `nc_matmul`, `matmul`, `copy`, `nc_transpose`,
//! `zeros`, `full`, `ones`, `ndarray`, `arange`.

use crate::span::Span;
use nki_lang::{
    AxisIndex, DType, Dim, HbmAccess, MAX_TENSOR_RANK, MAX_TILE_RANK, Memory, Op, PsumWrite,
    TileShape, TileView, rules,
};

use super::value::{Access, Buffer, Value};
use super::{InstrSpans, Lowerer};
use crate::check::message;
use crate::parse::model::{Arg, Expr};

/// Where an operation's result goes.
pub enum Dest<'a> {
    /// A new tile, named after the `let` binding when there is one.
    New(Option<&'a str>),
    /// An existing tile view (`t[...] = op(...)`, `acc += nc_matmul(...)`).
    Into {
        /// The destination.
        view: TileView,
        /// Its span.
        span: Span,
        /// `+=` (PSUM accumulation).
        accumulate: bool,
    },
}

impl Lowerer<'_> {
    /// Evaluates an expression, writing its result to `dest`.
    pub(super) fn produce(&mut self, e: &Expr, dest: Dest<'_>) -> Value {
        let Expr::Call { func, args, span } = e else {
            let v = self.eval(e);
            return match dest {
                Dest::New(_) => v,
                Dest::Into {
                    view, span: dspan, ..
                } => match v {
                    Value::Tile(src) => self.copy_into(src, view, e.span(), dspan),
                    Value::Poison => Value::Poison,
                    other => self.error(
                        e.span(),
                        format!("cannot assign {} to a tile", other.describe()),
                    ),
                },
            };
        };
        let name = func.to_string();
        let span = *span;
        match name.as_str() {
            "load" => self.load(args, span, dest),
            "store" => self.store(args, span, dest),
            "nc_matmul" => self.nc_matmul(args, span, dest),
            "matmul" => self.matmul(args, span, dest),
            "copy" | "tensor_copy" => self.copy(args, span, dest),
            "nc_transpose" | "transpose" => self.transpose(args, span, dest),
            "zeros" | "ones" | "full" | "ndarray" => match dest {
                Dest::New(n) => self.create(&name, args, span, n),
                Dest::Into { .. } => self.error(
                    span,
                    format!("`{name}` creates a new tensor: bind it with `let`"),
                ),
            },
            "arange" => match dest {
                Dest::New(_) => self.arange(args, span),
                Dest::Into { .. } => self.error(
                    span,
                    "an arange is an index, not data: it cannot be assigned to a tile",
                ),
            },
            "ds" => self.error(
                span,
                "`ds(start, size)` is a slice: it can only appear inside an index",
            ),
            _ => self.error(
                func.span().into(),
                format!("unknown function `{name}` in a kernel"),
            ),
        }
    }

    /// Matches positional and keyword arguments to parameter names.
    fn args<'a>(
        &mut self,
        func: &str,
        args: &'a [Arg],
        params: &[&str],
        required: usize,
        span: Span,
    ) -> Option<Vec<Option<&'a Expr>>> {
        let mut out: Vec<Option<&Expr>> = vec![None; params.len()];
        let mut ok = true;
        let mut positional = 0;
        for a in args {
            let slot = match &a.name {
                None => {
                    positional += 1;
                    if positional > params.len() {
                        self.error(
                            a.value.span(),
                            format!("`{func}` takes at most {} arguments", params.len()),
                        );
                        ok = false;
                        continue;
                    }
                    positional - 1
                }
                Some(n) => match params.iter().position(|p| n == p) {
                    Some(i) => i,
                    None => {
                        self.error(
                            n.span().into(),
                            format!(
                                "`{func}` has no argument `{n}`; it takes {}",
                                params.join(", ")
                            ),
                        );
                        ok = false;
                        continue;
                    }
                },
            };
            if out[slot].is_some() {
                self.error(
                    a.value.span(),
                    format!("argument `{}` of `{func}` given twice", params[slot]),
                );
                ok = false;
            }
            out[slot] = Some(&a.value);
        }
        for (i, p) in params.iter().enumerate().take(required) {
            if out[i].is_none() {
                self.error(span, format!("`{func}` needs the argument `{p}`"));
                ok = false;
            }
        }
        ok.then_some(out)
    }

    fn dtype_arg(&mut self, e: &Expr) -> Option<DType> {
        if let Expr::Name(id) = e
            && self.lookup(&id.to_string()).is_none()
            && DType::from_name(&id.to_string()).is_none()
        {
            self.error(
                id.span().into(),
                format!("unknown dtype `{id}`: expected bf16, f16 or f32"),
            );
            return None;
        }
        match self.eval(e) {
            Value::DType(d) => Some(d),
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "expected a dtype (bf16, f16, f32 or `x.dtype`), found {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    fn tile_arg(
        &mut self,
        e: &Expr,
        op: &'static str,
        operand: &'static str,
        allowed: &[Memory],
    ) -> Option<TileView> {
        let v = self.eval(e);
        match v {
            Value::Tile(view) => {
                let mem = self.buf.tiles[view.tile as usize].memory;
                if let Err(violation) = rules::check_memory(op, operand, mem, allowed) {
                    self.error(e.span(), message(&violation));
                    return None;
                }
                Some(view)
            }
            Value::Tensor(_) | Value::Access(_) => {
                let violation = rules::check_memory(op, operand, Memory::Hbm, allowed)
                    .expect_err("hbm is never allowed here");
                self.error(e.span(), message(&violation));
                None
            }
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "operand '{operand}' of '{op}' must be a tile, not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// Where a result of `shape`/`dtype` in `memory` goes: a new tile or the given view.
    fn target(
        &mut self,
        dest: &Dest<'_>,
        op: &'static str,
        memory: Memory,
        dtype: DType,
        shape: TileShape,
        span: Span,
    ) -> Option<(TileView, Span)> {
        match dest {
            Dest::New(name) => match self.new_tile(*name, memory, dtype, shape, span) {
                Value::Tile(v) => Some((v, span)),
                _ => None,
            },
            Dest::Into {
                view, span: dspan, ..
            } => {
                if let Err(v) = rules::check_same_shape(op, "dst", &shape, &view.shape) {
                    self.error(*dspan, message(&v));
                    return None;
                }
                Some((*view, *dspan))
            }
        }
    }

    fn load(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some(a) = self.args("load", args, &["src", "dtype"], 1, span) else {
            return Value::Poison;
        };
        let src_e = a[0].expect("required");
        let access = match self.eval(src_e) {
            Value::Access(acc) => acc,
            Value::Tensor(t) => match self.index(Value::Tensor(t), &[], src_e.span()) {
                Value::Access(acc) => acc,
                _ => return Value::Poison,
            },
            Value::Tile(v) => {
                let mem = self.buf.tiles[v.tile as usize].memory;
                let violation = rules::check_memory("load", "src", mem, &[Memory::Hbm])
                    .expect_err("a tile is not in hbm");
                return self.error(src_e.span(), message(&violation));
            }
            Value::Poison => return Value::Poison,
            other => {
                return self.error(
                    src_e.span(),
                    format!("`load` reads an HBM tensor, not {}", other.describe()),
                );
            }
        };
        let tensor_dtype = self.tensors[access.tensor].dtype;
        let dtype = match a[1] {
            Some(d) => match self.dtype_arg(d) {
                Some(d) => d,
                None => return Value::Poison,
            },
            None => match &dest {
                Dest::Into { view, .. } => self.buf.tiles[view.tile as usize].dtype,
                Dest::New(_) => tensor_dtype,
            },
        };
        let Some((dst, dspan)) =
            self.target(&dest, "load", Memory::Sbuf, dtype, access.shape, span)
        else {
            return Value::Poison;
        };
        self.invalidate(&dst);
        let src = hbm_access(&access, &dst.shape);
        let spans = InstrSpans {
            src: src_e.span(),
            dst: dspan,
            ..InstrSpans::at(span)
        };
        self.emit(Op::Load { src, dst }, spans);
        Value::Tile(dst)
    }

    fn store(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        if !matches!(dest, Dest::New(None)) {
            return self.error(span, "`store` returns nothing");
        }
        let Some(a) = self.args("store", args, &["dst", "value"], 2, span) else {
            return Value::Poison;
        };
        let (dst_e, val_e) = (a[0].expect("required"), a[1].expect("required"));
        let access = match self.eval(dst_e) {
            Value::Access(acc) => Some(acc),
            Value::Tensor(t) => match self.index(Value::Tensor(t), &[], dst_e.span()) {
                Value::Access(acc) => Some(acc),
                _ => None,
            },
            Value::Tile(v) => {
                let mem = self.buf.tiles[v.tile as usize].memory;
                let violation = rules::check_memory("store", "dst", mem, &[Memory::Hbm])
                    .expect_err("a tile is not in hbm");
                self.error(dst_e.span(), message(&violation));
                None
            }
            Value::Poison => None,
            other => {
                self.error(
                    dst_e.span(),
                    format!("`store` writes an HBM tensor, not {}", other.describe()),
                );
                None
            }
        };
        let value = self.tile_arg(val_e, "store", "value", &[Memory::Sbuf, Memory::Psum]);
        let (Some(access), Some(mut value)) = (access, value) else {
            return Value::Poison;
        };
        if let Err(v) = rules::check_same_shape("store", "value", &access.shape, &value.shape) {
            return self.error(val_e.span(), message(&v));
        }
        let tile = &self.buf.tiles[value.tile as usize];
        if tile.memory == Memory::Psum {
            // NKI stores a PSUM value through an SBUF copy.
            let (dtype, shape) = (tile.dtype, value.shape);
            let Value::Tile(tmp) = self.new_tile(None, Memory::Sbuf, dtype, shape, val_e.span())
            else {
                return Value::Poison;
            };
            self.emit(
                Op::Copy {
                    src: value,
                    dst: tmp,
                },
                InstrSpans::at(val_e.span()),
            );
            value = tmp;
        }
        let dst = hbm_access(&access, &value.shape);
        let spans = InstrSpans {
            src: val_e.span(),
            dst: dst_e.span(),
            ..InstrSpans::at(span)
        };
        self.emit(Op::Store { dst, src: value }, spans);
        Value::Poison
    }

    fn nc_matmul(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some(a) = self.args("nc_matmul", args, &["stationary", "moving"], 2, span) else {
            return Value::Poison;
        };
        let (s_e, m_e) = (a[0].expect("required"), a[1].expect("required"));
        let s = self.tile_arg(s_e, "nc_matmul", "stationary", &[Memory::Sbuf]);
        let m = self.tile_arg(m_e, "nc_matmul", "moving", &[Memory::Sbuf]);
        let (Some(s), Some(m)) = (s, m) else {
            return Value::Poison;
        };
        self.matmul_op(s, m, s_e.span(), m_e.span(), span, dest)
    }

    fn matmul_op(
        &mut self,
        s: TileView,
        m: TileView,
        s_span: Span,
        m_span: Span,
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        for (view, operand, at) in [(&s, "stationary", s_span), (&m, "moving", m_span)] {
            let dtype = self.buf.tiles[view.tile as usize].dtype;
            if let Err(v) = rules::check_matmul_input_dtype(operand, dtype) {
                return self.error(at, message(&v));
            }
        }
        let shape = match rules::check_matmul((&s.shape, Memory::Sbuf), (&m.shape, Memory::Sbuf)) {
            Ok(shape) => shape,
            Err(v) => {
                let at = match v {
                    nki_lang::RuleViolation::MovingTooWide { .. } => m_span,
                    nki_lang::RuleViolation::ContractionMismatch { .. } => span,
                    _ => s_span,
                };
                return self.error(at, message(&v));
            }
        };
        let accumulate = matches!(
            dest,
            Dest::Into {
                accumulate: true,
                ..
            }
        );
        let Some((dst, dspan)) =
            self.target(&dest, "nc_matmul", Memory::Psum, DType::F32, shape, span)
        else {
            return Value::Poison;
        };
        let write = if !accumulate {
            self.invalidate(&dst);
            PsumWrite::Overwrite
        } else {
            match self.fresh_zero.remove(&dst.tile) {
                Some(d0) => {
                    let mask = (d0..self.loops.len()).fold(0u8, |m, d| m | 1 << d);
                    if mask == 0 {
                        PsumWrite::Overwrite
                    } else {
                        PsumWrite::Group { loops: mask }
                    }
                }
                None => PsumWrite::Accumulate,
            }
        };
        let spans = InstrSpans {
            stationary: s_span,
            moving: m_span,
            dst: dspan,
            ..InstrSpans::at(span)
        };
        self.emit(
            Op::Matmul {
                stationary: s,
                moving: m,
                dst,
                write,
            },
            spans,
        );
        Value::Tile(dst)
    }

    fn matmul(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some(a) = self.args("matmul", args, &["x", "y", "transpose_x"], 2, span) else {
            return Value::Poison;
        };
        let (x_e, y_e) = (a[0].expect("required"), a[1].expect("required"));
        let transpose_x = match a[2].map(|e| (e, self.eval(e))) {
            None => false,
            Some((_, Value::Bool(b))) => b,
            Some((_, Value::Poison)) => return Value::Poison,
            Some((e, other)) => {
                return self.error(
                    e.span(),
                    format!("`transpose_x` is a bool, not {}", other.describe()),
                );
            }
        };
        let x = self.tile_arg(x_e, "matmul", "x", &[Memory::Sbuf]);
        let y = self.tile_arg(y_e, "matmul", "y", &[Memory::Sbuf]);
        let (Some(x), Some(y)) = (x, y) else {
            return Value::Poison;
        };
        if transpose_x {
            return self.matmul_op(x, y, x_e.span(), y_e.span(), span, dest);
        }
        // x @ y = nc_matmul(xᵀ, y): transpose x on TensorE, evict to SBUF, multiply.
        let xd = self.buf.tiles[x.tile as usize].dtype;
        let Some(xt) = self.transpose_op(x, x_e.span(), Dest::New(None)) else {
            return Value::Poison;
        };
        let Value::Tile(xs) = self.new_tile(None, Memory::Sbuf, xd, xt.shape, x_e.span()) else {
            return Value::Poison;
        };
        self.emit(Op::Copy { src: xt, dst: xs }, InstrSpans::at(x_e.span()));
        self.matmul_op(xs, y, x_e.span(), y_e.span(), span, dest)
    }

    fn transpose_op(&mut self, x: TileView, span: Span, dest: Dest<'_>) -> Option<TileView> {
        let shape = match rules::check_transpose((&x.shape, Memory::Sbuf)) {
            Ok(s) => s,
            Err(v) => {
                self.error(span, message(&v));
                return None;
            }
        };
        let (dst, dspan) =
            self.target(&dest, "nc_transpose", Memory::Psum, DType::F32, shape, span)?;
        self.invalidate(&dst);
        let spans = InstrSpans {
            src: span,
            dst: dspan,
            ..InstrSpans::at(span)
        };
        self.emit(Op::Transpose { src: x, dst }, spans);
        Some(dst)
    }

    fn transpose(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some(a) = self.args("nc_transpose", args, &["data"], 1, span) else {
            return Value::Poison;
        };
        let e = a[0].expect("required");
        let Some(x) = self.tile_arg(e, "nc_transpose", "data", &[Memory::Sbuf]) else {
            return Value::Poison;
        };
        match self.transpose_op(x, e.span(), dest) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    fn copy(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some(a) = self.args("copy", args, &["src", "dtype"], 1, span) else {
            return Value::Poison;
        };
        let e = a[0].expect("required");
        let Some(src) = self.tile_arg(e, "copy", "src", &[Memory::Sbuf, Memory::Psum]) else {
            return Value::Poison;
        };
        let dtype = match a[1] {
            Some(d) => match self.dtype_arg(d) {
                Some(d) => d,
                None => return Value::Poison,
            },
            None => self.buf.tiles[src.tile as usize].dtype,
        };
        let Some((dst, dspan)) = self.target(&dest, "copy", Memory::Sbuf, dtype, src.shape, span)
        else {
            return Value::Poison;
        };
        self.invalidate(&dst);
        let spans = InstrSpans {
            src: e.span(),
            dst: dspan,
            ..InstrSpans::at(span)
        };
        self.emit(Op::Copy { src, dst }, spans);
        Value::Tile(dst)
    }

    fn copy_into(&mut self, src: TileView, dst: TileView, span: Span, dspan: Span) -> Value {
        if let Err(v) = rules::check_same_shape("copy", "dst", &src.shape, &dst.shape) {
            return self.error(dspan, message(&v));
        }
        self.invalidate(&dst);
        let spans = InstrSpans {
            src: span,
            dst: dspan,
            ..InstrSpans::at(span)
        };
        self.emit(Op::Copy { src, dst }, spans);
        Value::Tile(dst)
    }

    /// A write other than `+=` ends a pending accumulation group on the tile.
    fn invalidate(&mut self, dst: &TileView) {
        self.fresh_zero.remove(&dst.tile);
    }

    fn create(&mut self, func: &str, args: &[Arg], span: Span, name: Option<&str>) -> Value {
        let (params, required): (&[&str], usize) = match func {
            "full" => (&["shape", "fill_value", "dtype", "buffer"], 3),
            _ => (&["shape", "dtype", "buffer"], 2),
        };
        let Some(a) = self.args(func, args, params, required, span) else {
            return Value::Poison;
        };
        let (shape_e, fill_e, dtype_e, buffer_e) = match func {
            "full" => (a[0].expect("required"), a[1], a[2].expect("required"), a[3]),
            _ => (a[0].expect("required"), None, a[1].expect("required"), a[2]),
        };
        let Some(dtype) = self.dtype_arg(dtype_e) else {
            return Value::Poison;
        };
        let buffer = match buffer_e.map(|e| (e, self.eval(e))) {
            None => Buffer::Sbuf,
            Some((_, Value::Buffer(b))) => b,
            Some((_, Value::Poison)) => return Value::Poison,
            Some((e, other)) => {
                return self.error(
                    e.span(),
                    format!(
                        "expected a buffer (Sbuf, Psum or SharedHbm), found {}",
                        other.describe()
                    ),
                );
            }
        };
        let Expr::Array(dims, _) = shape_e else {
            return self.error(
                shape_e.span(),
                "a shape is an array of dimensions: `[128, 512]`",
            );
        };
        if buffer == Buffer::SharedHbm {
            return self.create_output(func, dims, dtype, span, name);
        }
        let mut sizes = Vec::new();
        for d in dims {
            match self.int(d, "a tile dimension") {
                Some(n) if n > 0 && n <= u32::MAX as i64 => sizes.push(n as u32),
                Some(_) => return self.error(d.span(), "a tile dimension must be positive"),
                None => return Value::Poison,
            }
        }
        let Some(shape) = TileShape::new(&sizes).filter(|s| s.rank() >= 2) else {
            return self.error(
                shape_e.span(),
                format!(
                    "a tile has a partition dimension and 1 to {} free dimensions",
                    MAX_TILE_RANK - 1
                ),
            );
        };
        let memory = if buffer == Buffer::Psum {
            Memory::Psum
        } else {
            Memory::Sbuf
        };
        let v = self.new_tile(name, memory, dtype, shape, span);
        let Value::Tile(view) = v else { return v };
        let fill = match func {
            "zeros" => Some(0.0),
            "ones" => Some(1.0),
            "full" => match fill_e.map(|e| (e, self.eval(e))) {
                Some((_, Value::Int(n))) => Some(n as f64),
                Some((_, Value::Float(f))) => Some(f),
                Some((_, Value::Poison)) => return Value::Poison,
                Some((e, other)) => {
                    return self.error(
                        e.span(),
                        format!("a fill value is a number, not {}", other.describe()),
                    );
                }
                None => unreachable!("required"),
            },
            _ => None,
        };
        if let Some(value) = fill {
            self.emit(
                Op::Memset {
                    dst: view,
                    value: value as f32,
                },
                InstrSpans::at(span),
            );
            if value == 0.0 && memory == Memory::Psum {
                self.fresh_zero.insert(view.tile, self.loops.len());
            }
        }
        v
    }

    fn create_output(
        &mut self,
        func: &str,
        dims: &[Expr],
        dtype: DType,
        span: Span,
        name: Option<&str>,
    ) -> Value {
        if func != "ndarray" {
            return self.error(span, "an HBM tensor cannot be created with an initial value: create it with `ndarray` and `store` into it (err_hbm_tensor_with_init_value_not_supported)");
        }
        if !self.loops.is_empty() || self.scopes.len() > 1 {
            return self.error(span, "a shared_hbm tensor can only be created at the top level of the kernel (err_shared_hbm_must_in_kernel_level)");
        }
        let Some(name) = name else {
            return self.error(
                span,
                "bind the output tensor with `let` so that the kernel can return it",
            );
        };
        if dims.is_empty() || dims.len() > MAX_TENSOR_RANK {
            return self.error(
                span,
                format!("an HBM tensor has 1 to {MAX_TENSOR_RANK} dimensions"),
            );
        }
        let mut shape = Vec::new();
        for d in dims {
            match self.eval(d) {
                Value::Int(n) if n > 0 => shape.push(Dim::Fixed(n as u64)),
                Value::Sym { sym, div: 1 } => shape.push(Dim::Sym(sym)),
                Value::Poison => return Value::Poison,
                _ => return self.error(d.span(), "an output dimension is a positive integer or a symbolic dimension of the inputs"),
            }
        }
        self.tensors.push(super::Tensor {
            name: name.to_string(),
            dtype,
            shape,
            role: nki_lang::TensorRole::Output,
            span,
        });
        Value::Tensor(self.tensors.len() - 1)
    }

    fn arange(&mut self, args: &[Arg], span: Span) -> Value {
        let ints: Vec<Option<i64>> = args
            .iter()
            .map(|a| self.int(&a.value, "an arange bound"))
            .collect();
        let (start, stop) = match ints.as_slice() {
            [Some(stop)] => (0, *stop),
            [Some(start), Some(stop)] => (*start, *stop),
            [_] | [_, _] => return Value::Poison,
            _ => return self.error(span, "`arange(stop)` or `arange(start, stop)`"),
        };
        if stop <= start {
            return self.error(span, "an empty arange");
        }
        Value::Range(start, (stop - start) as u32)
    }
}

/// The IR access of an indexed tensor over a grid of `shape` (same layout as the access's).
fn hbm_access(a: &Access, shape: &TileShape) -> HbmAccess {
    // Grid axes of size 1 may differ between the access and the tile: map the others in order.
    let from: Vec<usize> = (0..a.shape.rank())
        .filter(|&j| a.shape.dims()[j] != 1)
        .collect();
    let to: Vec<usize> = (0..shape.rank())
        .filter(|&j| shape.dims()[j] != 1)
        .collect();
    let mut axes = [AxisIndex {
        start: nki_lang::Affine::ZERO,
        grid: [0; MAX_TILE_RANK],
    }; MAX_TENSOR_RANK];
    for (k, idx) in a.axes.iter().enumerate() {
        let mut grid = [0i64; MAX_TILE_RANK];
        for (&f, &t) in from.iter().zip(&to) {
            grid[t] = idx.grid[f];
        }
        axes[k] = AxisIndex {
            start: idx.lin,
            grid,
        };
    }
    HbmAccess {
        tensor: a.tensor as u8,
        rank: a.axes.len() as u8,
        axes,
    }
}
