//! The creation functions `ndarray`, `zeros`, `ones`, `full`, and `arange`.

use crate::span::Span;
use nki_lang::{
    DType, Dim, Dst, Instr, InstrData, MAX_TENSOR_RANK, Memory, Opcode, Scalar, TileView,
};

use super::super::builtins::P;
use super::super::call::OpOptions;
use super::super::value::{Buffer, Value};
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

/// The dimensions of an output tensor: written in the call (`[M, N]`), or a shape value
/// (NKI's `ndarray(x.shape, ...)`).
enum OutDims<'a> {
    /// `[M, N]` or `(M, N)`, evaluated after the output's placement is checked.
    Exprs(&'a [Expr]),
    /// `x.shape`.
    Shape(Vec<Dim>),
}

impl Lowerer<'_> {
    pub(in super::super) fn create(
        &mut self,
        func: &str,
        args: &[Arg],
        span: Span,
        name: Option<&str>,
    ) -> Value {
        let like = func.ends_with("_like");
        let base = func.trim_end_matches("_like");
        let params: &[&str] = match (base, like) {
            ("memset", _) => &["shape", "value", "dtype", "engine", "mask"],
            ("full", false) => &["shape", "fill_value", "dtype", "buffer"],
            ("full", true) => &["a", "fill_value", "dtype", "buffer"],
            (_, false) => &["shape", "dtype", "buffer"],
            (_, true) => &["a", "dtype", "buffer"],
        };
        let fill_slot = matches!(base, "full" | "memset").then_some(1);
        let dtype_slot: usize = if fill_slot.is_some() { 2 } else { 1 };
        let required = if like {
            dtype_slot
        } else {
            dtype_slot.saturating_add(1)
        };
        let Some(a) = self.args(func, args, params, required, span) else {
            return Value::Poison;
        };
        let shape_e = a[0].expect("required");
        let fill_e = fill_slot.and_then(|k| a[k]);
        let mut opts = OpOptions::default();
        if base == "memset" {
            for (k, p) in [(3, P::Engine), (4, P::Mask)] {
                if let Some(e) = a[k]
                    && !self.option_arg(p, e, &mut opts)
                {
                    return Value::Poison;
                }
            }
        }
        let buffer_e = if base == "memset" {
            None
        } else {
            a[dtype_slot.saturating_add(1)]
        };
        let buffer = match buffer_e.map(|e| (e, self.eval(e))) {
            None => Buffer::Sbuf,
            Some((_, Value::Buffer(b))) => b,
            Some((_, Value::Poison)) => return Value::Poison,
            Some((e, other)) => {
                return self.error(
                    e.span(),
                    format!(
                        "expected a buffer (Sbuf, Psum, SharedHbm or PrivateHbm), found {}",
                        other.describe()
                    ),
                );
            }
        };
        // The shape and default dtype: given, or those of the tile `a`.
        let mut blocks: Option<(super::super::blocks::BlockInfo, Option<nki_lang::Extent>)> = None;
        let (shape, like_dtype) = if like {
            match self.eval(shape_e) {
                Value::Tile(v) => (
                    v.shape,
                    Some(v.dtype_of(self.buf.tiles[v.tile as usize].dtype)),
                ),
                Value::Blocks { view, .. } => {
                    let tile = &self.buf.tiles[view.tile as usize];
                    blocks = self
                        .tile_blocks
                        .get(&view.tile)
                        .map(|&info| (info, tile.blocks));
                    (view.shape, Some(tile.dtype))
                }
                Value::Poison => return Value::Poison,
                other => {
                    return self.error(
                        shape_e.span(),
                        format!("`{func}` takes a tile, not {}", other.describe()),
                    );
                }
            }
        } else if !matches!(shape_e, Expr::Array(..) | Expr::Tuple(..)) {
            // NKI's `ndarray(x.shape, ...)`: a shape value.
            if buffer.is_hbm() {
                let Some(dims) = self.shape_value(shape_e) else {
                    return Value::Poison;
                };
                let Some(dtype) = a[dtype_slot].and_then(|e| self.dtype_arg(e)) else {
                    return Value::Poison;
                };
                return self.create_output(func, OutDims::Shape(dims), dtype, buffer, span, name);
            }
            match self.shape_arg(shape_e) {
                Some(s) => (s, None),
                None => return Value::Poison,
            }
        } else {
            let (Expr::Array(dims, _) | Expr::Tuple(dims, _)) = shape_e else {
                unreachable!("an array or a tuple")
            };
            if Self::has_par_dim(dims) && buffer == Buffer::PrivateHbm {
                // NKI's `(sw_h, sw_w, par_dim(p), H, W)` private_hbm tensor
                // (select_and_scatter): HBM has no partitions, the mark is the dimension.
                let Some(dtype) = a[dtype_slot].and_then(|e| self.dtype_arg(e)) else {
                    return Value::Poison;
                };
                return self.create_output(func, OutDims::Exprs(dims), dtype, buffer, span, name);
            }
            if Self::has_par_dim(dims) {
                if buffer == Buffer::SharedHbm {
                    return self.error(
                        shape_e.span(),
                        "an HBM tensor has no partition dimension: `par_dim(n)` marks an SBUF or PSUM tile's",
                    );
                }
                match self.block_shape(dims, shape_e.span()) {
                    Some(b) => {
                        if b.count.is_some() && buffer == Buffer::Psum {
                            return self.error(
                                shape_e.span(),
                                "a PSUM tile's block axes are compile-time integers: PSUM has 8 banks, sized when the kernel compiles",
                            );
                        }
                        // `(par_dim(128), 512)` without block axes is a plain tile.
                        if b.info.axes > 0 {
                            blocks = Some((b.info, b.count));
                        }
                        (b.shape, None)
                    }
                    None => return Value::Poison,
                }
            } else if buffer.is_hbm() {
                let Some(dtype) = a[dtype_slot].and_then(|e| self.dtype_arg(e)) else {
                    return Value::Poison;
                };
                return self.create_output(func, OutDims::Exprs(dims), dtype, buffer, span, name);
            } else {
                match self.shape_arg(shape_e) {
                    Some(s) => (s, None),
                    None => return Value::Poison,
                }
            }
        };
        let dtype = match (a[dtype_slot], like_dtype) {
            (Some(e), _) => match self.dtype_arg(e) {
                Some(d) => d,
                None => return Value::Poison,
            },
            (None, Some(d)) => d,
            (None, None) => unreachable!("required"),
        };
        if buffer.is_hbm() {
            return self.error(span, "an HBM tensor cannot be created with an initial value: create it with `ndarray` and `store` into it (err_hbm_tensor_with_init_value_not_supported)");
        }
        let memory = if buffer == Buffer::Psum {
            Memory::Psum
        } else {
            Memory::Sbuf
        };
        let block_axes = blocks.map_or(0, |(info, _)| info.axes);
        let v = self.new_block_tile(name, memory, dtype, shape, block_axes, span);
        let Value::Tile(view) = v else { return v };
        if let Some((info, count)) = blocks {
            self.buf.tiles[view.tile as usize].blocks = count;
            self.tile_blocks.insert(view.tile, info);
        }
        let fill = match base {
            "zeros" => Some(Scalar::float(0.0)),
            "ones" => Some(Scalar::float(1.0)),
            "full" | "memset" => match fill_e.map(|e| (e, self.eval(e))) {
                Some((e, Value::Int(n))) => match i32::try_from(n) {
                    Ok(n) if dtype.is_float() => Some(Scalar::float(n as f32)),
                    Ok(n) => Some(Scalar::Int(n)),
                    Err(_) => {
                        return self.error(e.span(), "a fill value is a 32-bit integer or a float");
                    }
                },
                Some((_, Value::Float(f))) => Some(Scalar::float(super::super::fp32(f))),
                Some((_, Value::Bool(b))) => Some(Scalar::Int(b as i32)),
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
            let filled = match blocks {
                Some((_, Some(count))) => self.fill_blocks(view, count, value, span, opts),
                Some((_, None)) | None => self.fill(view, value, span, opts),
            };
            if !filled {
                return Value::Poison;
            }
            if value.as_f32() == 0.0 && memory == Memory::Psum && opts.mask.is_none() {
                self.fresh_zero.insert(view.tile, self.loops.len());
            }
        } else if memory == Memory::Psum {
            // An uninitialized PSUM tile (`ndarray`) too: the first matmul `+=` into it starts
            // an accumulation group, as NKI's allocated kernels write it (`res_psum[0] +=
            // nc_matmul(...)` in `allocated_fused_rms_norm_qkv`).
            self.fresh_zero.insert(view.tile, self.loops.len());
        }
        // `par_dim` first (`(par_dim(128), 512)`) marks no block axis: a plain tile.
        if let Some((info, _)) = blocks
            && info.axes > 0
        {
            return Value::Blocks {
                view,
                axes: info.axes,
            };
        }
        v
    }

    /// `memset`: writes `value` to every element of `view` (under `opts`' engine and mask).
    /// False after an error.
    pub(in super::super) fn fill(
        &mut self,
        view: TileView,
        value: Scalar,
        span: Span,
        opts: OpOptions,
    ) -> bool {
        let Some(dst) = self.view_id(view, span) else {
            return false;
        };
        let data = InstrData::Fill {
            dst: Dst::overwrite(dst),
            value,
        };
        let mut instr = Instr::new(Opcode::Memset, data);
        instr.engine = opts.engine.unwrap_or(instr.engine);
        instr.mask = opts.mask;
        self.emit_checked(instr, InstrSpans::at(span))
    }

    /// `num_programs(axis)` (the grid's size along `axis`), `num_programs()` (the number of
    /// instances) and `program_ndim()` (the grid's rank): symbolic dimensions the launch grid
    /// binds, usable wherever a symbolic dimension is (trip counts, masks).
    pub(in super::super) fn grid_symbol(&mut self, func: &str, args: &[Arg], span: Span) -> Value {
        use nki_lang::grid::{GRID_COUNT_SYMBOL, GRID_RANK_SYMBOL, GRID_SIZE_SYMBOLS};
        let name = if func == "program_ndim" {
            if self.args(func, args, &[], 0, span).is_none() {
                return Value::Poison;
            }
            GRID_RANK_SYMBOL
        } else {
            let Some(a) = self.args(func, args, &["axis"], 0, span) else {
                return Value::Poison;
            };
            match a[0] {
                None => GRID_COUNT_SYMBOL,
                Some(e) => match self.int(e, "an axis") {
                    Some(n) => match usize::try_from(n)
                        .ok()
                        .and_then(|n| GRID_SIZE_SYMBOLS.get(n))
                    {
                        Some(name) => name,
                        None => {
                            return self.error(
                                e.span(),
                                format!("a launch grid has at most {} axes", nki_lang::MAX_PIDS),
                            );
                        }
                    },
                    None => return Value::Poison,
                },
            }
        };
        Value::Sym {
            sym: self.symbol_named(name, span),
            add: 0,
            div: 1,
        }
    }

    /// `program_id(axis)`: this instance's coordinate along an axis of the launch grid, an
    /// index variable like a loop's.
    pub(in super::super) fn program_id(&mut self, args: &[Arg], span: Span) -> Value {
        let Some(a) = self.args("program_id", args, &["axis"], 1, span) else {
            return Value::Poison;
        };
        let e = a[0].expect("required");
        match self.int(e, "an axis").map(usize::try_from) {
            Some(Ok(n)) if n < nki_lang::MAX_PIDS => {
                // The index's bounds depend on the grid's size along the axis.
                self.symbol_named(nki_lang::grid::GRID_SIZE_SYMBOLS[n], span);
                Value::Index(super::super::value::Idx::from_affine(
                    nki_lang::Affine::program_id(n, 1),
                ))
            }
            Some(_) => self.error(
                e.span(),
                format!("a launch grid has at most {} axes", nki_lang::MAX_PIDS),
            ),
            None => Value::Poison,
        }
    }

    /// `ndarray(shape, dtype, SharedHbm)` (an output if the kernel returns it, else scratch)
    /// or `ndarray(shape, dtype, PrivateHbm)` (scratch of one instance and, in a loop, of one
    /// iteration).
    fn create_output(
        &mut self,
        func: &str,
        dims: OutDims<'_>,
        dtype: DType,
        buffer: Buffer,
        span: Span,
        name: Option<&str>,
    ) -> Value {
        if func != "ndarray" {
            return self.error(span, "an HBM tensor cannot be created with an initial value: create it with `ndarray` and `store` into it (err_hbm_tensor_with_init_value_not_supported)");
        }
        let private = buffer == Buffer::PrivateHbm;
        if !private && (!self.loops.is_empty() || self.scopes.len() > 1) {
            return self.error(span, "a shared_hbm tensor can only be created at the top level of the kernel (err_shared_hbm_must_in_kernel_level); a tensor of each instance or iteration is `PrivateHbm`");
        }
        let Some(name) = name else {
            return self.error(
                span,
                "bind the HBM tensor with `let` (an output so that the kernel can return it, scratch so that it can be used)",
            );
        };
        let rank = match &dims {
            OutDims::Exprs(d) => d.len(),
            OutDims::Shape(d) => d.len(),
        };
        if rank == 0 || rank > MAX_TENSOR_RANK {
            return self.error(
                span,
                format!("an HBM tensor has 1 to {MAX_TENSOR_RANK} dimensions"),
            );
        }
        let shape = match dims {
            OutDims::Shape(d) => d,
            OutDims::Exprs(dims) => {
                let mut shape = Vec::new();
                for d in dims {
                    let d = super::super::blocks::par_dim_arg(d).unwrap_or(d);
                    match self.eval(d) {
                        Value::Int(n) if n > 0 => shape.push(Dim::Fixed(n.unsigned_abs())),
                        // A quotient or sum (`H / K`, `N / 128`, `H + 2`): a symbol of its own.
                        Value::Sym { sym, add, div } => {
                            let Ok(add) = i64::try_from(add) else {
                                return self.error(d.span(), "integer overflow in a compile-time expression");
                            };
                            match self.as_symbol(sym, add, div, d.span()) {
                                Some(s) => shape.push(Dim::Sym(s)),
                                None => return Value::Poison,
                            }
                        }
                        Value::Poison => return Value::Poison,
                        _ => return self.error(d.span(), "an output dimension is a positive integer, a symbolic dimension of the inputs or a product, quotient or sum of them and literals (`N * C`, `H / K`, `H + 2`)"),
                    }
                }
                shape
            }
        };
        let (role, scope) = if private {
            (
                nki_lang::TensorRole::Private,
                self.loop_begins.last().copied(),
            )
        } else {
            (nki_lang::TensorRole::Output, None)
        };
        let t = self.add_tensor(super::super::Tensor {
            name: name.to_string(),
            dtype,
            shape,
            role,
            scope,
            data: Vec::new(),
            span,
        });
        Value::Tensor(super::super::value::Hbm::whole(t))
    }

    pub(in super::super) fn arange(&mut self, args: &[Arg], span: Span) -> Value {
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
        match stop.checked_sub(start).and_then(|n| u32::try_from(n).ok()) {
            Some(size) => Value::Range(start, size),
            None => self.error(span, "an arange has at most 4294967295 elements"),
        }
    }
}
