//! Calls of the language's functions: dispatch by name, argument matching, operand evaluation,
//! and the one path that emits an instruction through its opcode's rules.

use crate::span::Span;
use nki_lang::ops::Part;
use nki_lang::{
    Alu, DType, Engine, Instr, InstrData, MaskId, Memory, Opcode, TileShape, TileView, ViewId,
    Write, rules,
};

use super::builtins::{self, Kind, Special};

use super::value::{Access, Value};
use super::{InstrSpans, Lowerer};
use crate::errors::message;
use crate::parse::model::{Arg, Expr};

/// Where an operation's result goes.
#[allow(
    clippy::large_enum_variant,
    reason = "a transient argument of each call's lowering, passed by value once"
)]
pub enum Dest<'a> {
    /// A new tile, named after the `let` binding when there is one.
    New(Option<&'a str>),
    /// An existing tile view (`t[...] = op(...)`, `acc += nc_matmul(...)`).
    Into {
        /// The destination.
        view: TileView,
        /// Its span.
        span: Span,
        /// `op=`: the result is combined into the destination (`+=` is `Some(Alu::Add)`).
        accumulate: Option<Alu>,
    },
}

/// The options every operation takes besides its operands.
#[derive(Copy, Clone, Default)]
pub struct OpOptions {
    /// `dtype =`: the result's dtype (default: the opcode's rule).
    pub dtype: Option<DType>,
    /// `engine =` (default: the opcode's first engine).
    pub engine: Option<Engine>,
    /// `mask =`.
    pub mask: Option<MaskId>,
    /// A new result tile drops its size-1 free dimensions (a reduction without `keepdims`).
    pub squeeze: bool,
    /// The shape of a new result tile, for operations whose rule takes it from the
    /// destination (`iota`).
    pub shape: Option<TileShape>,
}

impl Lowerer<'_> {
    /// Evaluates an expression, writing its result to `dest`.
    pub(super) fn produce(&mut self, e: &Expr, dest: Dest<'_>) -> Value {
        if let Expr::Named {
            call,
            name,
            name_span,
        } = e
        {
            return self.labelled(name, *name_span, |l| l.produce(call, dest));
        }
        if let Expr::Binary { .. } | Expr::Neg(..) | Expr::Not(..) = e {
            return self.operator(e, dest);
        }
        // NKI's tile method `x.broadcast_to(shape)` is `broadcast_to(x, shape)`.
        if let Expr::Method {
            recv,
            method,
            args,
            span,
        } = e
            && method == "broadcast_to"
        {
            let mut all = Vec::with_capacity(args.len().saturating_add(1));
            all.push(Arg {
                name: None,
                value: (**recv).clone(),
            });
            all.extend(args.iter().cloned());
            return self.broadcast_to(&all, *span, dest);
        }
        let Expr::Call { func, args, span } = e else {
            let v = self.eval(e);
            return self.assign(v, e.span(), dest);
        };
        let name = func.to_string();
        let span = *span;
        if let Some(h) = self.helpers.iter().find(|h| h.name == name) {
            return self.inline(h, args, span, dest);
        }
        let Some(kind) = builtins::lookup(&name) else {
            if let Some(why) = builtins::refused(&name) {
                return self.error(func.span().into(), why);
            }
            let msg = match builtins::names().find(|n| close(n, &name)) {
                Some(n) => format!("unknown function `{name}` in a kernel; did you mean `{n}`?"),
                None => format!("unknown function `{name}` in a kernel"),
            };
            return self.error(func.span().into(), msg);
        };
        // NKI 0.6's destination-first call writes `dst` and returns nothing: as a value (a
        // `let`, an assignment) it is a mistake.
        if super::dst_first::takes_dst(kind)
            && let Some(d) = super::dst_first::dst_keyword(args)
        {
            let at = d.name.as_ref().map_or(span, |n| n.span().into());
            return self.error(
                at,
                format!("`{name}(dst = ...)` writes `dst` and returns nothing (NKI 0.6's destination-first form): call it as a statement, or drop `dst` and assign the result (`t[...] = {name}(...)`)"),
            );
        }
        match kind {
            Kind::Isa(opcode, params) => self.isa(opcode, params, args, span, dest),
            Kind::Binary(alu) => self.nl_binary(&name, alu, args, span, dest),
            Kind::UnaryAlu(alu) => self.nl_unary_alu(&name, alu, args, span, dest),
            Kind::Act(f) => self.nl_act(&name, f, args, span, dest),
            Kind::Reduce(r) => self.nl_reduce(&name, r, args, span, dest),
            Kind::Special(s) => self.special(s, &name, args, span, dest),
        }
    }

    pub(super) fn special(
        &mut self,
        s: Special,
        name: &str,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        match s {
            Special::Load => self.load(args, span, dest),
            Special::Store => self.store(args, span, dest),
            Special::LoadTranspose2d => self.load_transpose2d(args, span, dest),
            Special::DmaTranspose => self.dma_transpose(args, span, dest),
            Special::DmaCopy => self.dma_copy(args, span, dest),
            Special::NcMatmul => self.nc_matmul(args, span, dest),
            Special::Matmul => self.matmul(args, span, dest),
            Special::Copy => self.copy(args, span, dest),
            Special::Transpose => self.nl_transpose(args, span, dest),
            Special::NcTranspose => self.transpose(args, span, dest),
            Special::Where => self.nl_where(args, span, dest),
            Special::TensorCopyPredicated => self.tensor_copy_predicated(args, span, dest),
            Special::TensorPartitionReduce => self.tensor_partition_reduce(args, span, dest),
            Special::SelectReduce => self.select_reduce(args, span, dest),
            Special::BroadcastTo => self.broadcast_to(args, span, dest),
            Special::Softmax => self.softmax(args, span, dest),
            Special::RmsNorm => self.rms_norm(args, span, dest),
            Special::Negative => self.negative(args, span, dest),
            Special::ParDim => self.error(
                span,
                "`par_dim(n)` marks the partition dimension inside a tile's shape, after its block axes: `ndarray([K / 128, par_dim(128), 512], bf16, Sbuf)`",
            ),
            Special::GridSymbol => match dest {
                Dest::New(_) => self.grid_symbol(name, args, span),
                Dest::Into { .. } => self.error(span, "a grid size is an integer, not data"),
            },
            Special::ProgramId => match dest {
                Dest::New(_) => self.program_id(args, span),
                Dest::Into { .. } => self.error(span, "a program id is an index, not data"),
            },
            Special::Create | Special::Memset => match dest {
                Dest::New(n) => self.create(name, args, span, n),
                Dest::Into { .. } => self.error(
                    span,
                    format!("`{name}` creates a new tensor: bind it with `let`"),
                ),
            },
            Special::Arange => match dest {
                Dest::New(_) => self.arange(args, span),
                Dest::Into { .. } => self.error(
                    span,
                    "an arange is an index, not data: it cannot be assigned to a tile",
                ),
            },
            Special::Ds => match dest {
                Dest::New(_) => self.ds(args, span),
                Dest::Into { .. } => self.error(
                    span,
                    "`ds(start, size)` is a slice, not data: use it as an index (`t[[.., ds(start, size)]]`)",
                ),
            },
            Special::Len => {
                let v = self.len(args, span);
                self.assign(v, span, dest)
            }
            Special::NcVersion => {
                let v = match self.args("get_nc_version", args, &[], 0, span) {
                    Some(_) => Value::Int(super::expr::nc_version(self.buf.target)),
                    None => Value::Poison,
                };
                self.assign(v, span, dest)
            }
            Special::AtomicRmw => self.atomic_rmw(args, span, dest),
            Special::TensorCopyDynamicSrc => self.tensor_copy_dynamic_src(args, span, dest),
            Special::TensorCopyDynamicDst => self.tensor_copy_dynamic_dst(args, span, dest),
            Special::RegisterAlloc => match dest {
                Dest::New(_) => self.register_alloc(args, span),
                Dest::Into { .. } => self.error(
                    span,
                    "`register_alloc` makes a virtual register, not data: bind it with `let`",
                ),
            },
            Special::RegisterMove => self.register_move(args, span),
            Special::RegisterLoad => self.register_load(args, span),
            Special::RegisterStore => self.register_store(args, span),
            Special::ForiLoop => self.fori_loop(args, span),
            Special::WhileLoop => self.while_loop(args, span),
            Special::Info => match dest {
                Dest::New(_) => self.info(name, args, span),
                Dest::Into { .. } => self.error(
                    span,
                    format!("`{name}(dtype)` is the dtype's limits, not data: read one with `.min` or `.max`"),
                ),
            },
            Special::Rand => self.rand(args, span, dest),
            Special::RandomSeed => match dest {
                Dest::New(_) => self.random_seed(args, span),
                Dest::Into { .. } => self.error(
                    span,
                    "`random_seed(seed)` sets the generator's seed and returns nothing: call it as a statement",
                ),
            },
            Special::Dropout => self.dropout(args, span, dest),
            Special::SharedConstant => match dest {
                Dest::New(bound) => self.shared_constant(name, args, span, bound),
                Dest::Into { .. } => self.error(
                    span,
                    format!("`{name}` makes an HBM tensor: bind it with `let` and `load` from it"),
                ),
            },
            Special::RangeSelect => self.range_select(args, span, dest),
            Special::NcStreamShuffle => self.nc_stream_shuffle(args, span, dest),
            Special::QuantizeMx => self.quantize_mx(args, span, dest),
            Special::NcMatmulMx => self.nc_matmul_mx(args, span, dest),
            Special::LocalGather => self.local_gather(args, span, dest),
            Special::TensorScalarCumulative => self.tensor_scalar_cumulative(args, span, dest),
            Special::NonzeroWithCount => self.nonzero_with_count(args, span, dest),
            Special::DmaCompute => self.dma_compute(args, span, dest),
            Special::TopK => self.topk(args, span, dest),
            Special::Exponential => self.exponential(args, span, dest),
            Special::Rng => self.rng_dst(Opcode::Rng, args, span, dest),
            Special::RandGetState => self.rng_dst(Opcode::RandGetState, args, span, dest),
            Special::Rand2 => self.rand2(args, span, dest),
            Special::SetRngSeed => self.rng_seed_state(Opcode::SetRngSeed, args, span, dest),
            Special::RandSetState => self.rng_seed_state(Opcode::RandSetState, args, span, dest),
        }
    }

    /// How an instruction writing `dest` writes it: overwritten, or combined by `op=`.
    pub(super) fn write_for(&self, dest: &Dest<'_>) -> Write {
        match dest {
            Dest::Into {
                accumulate: Some(op),
                ..
            } => Write::Accumulate(*op),
            Dest::Into {
                accumulate: None, ..
            }
            | Dest::New(_) => Write::Overwrite,
        }
    }

    /// Whether an operation that writes its `dst` argument may take the `dtype` in `options`:
    /// none, or the destination's own (the result is written in the destination's dtype, so
    /// another would be silently ignored); else an error on `at`.
    pub(super) fn dtype_is_dst(&mut self, options: &OpOptions, dst: &TileView, at: Span) -> bool {
        let own = dst.dtype_of(self.buf.tiles[dst.tile as usize].dtype);
        match options.dtype {
            Some(d) if d != own => {
                self.error(
                    at,
                    format!(
                        "`dtype = {}` differs from the destination's dtype {}: the result is written in the destination's dtype (declare `dst` as {} to get it)",
                        d.name(),
                        own.name(),
                        d.name()
                    ),
                );
                false
            }
            Some(_) | None => true,
        }
    }

    /// The arguments of a call that writes its `dst` and returns nothing (NKI 0.6's
    /// destination-first ISA calls): [`Self::args`], once a use of its result is refused.
    pub(super) fn dst_call_args<'a>(
        &mut self,
        func: &str,
        dest: Dest<'_>,
        args: &'a [Arg],
        params: &[&str],
        required: usize,
        span: Span,
    ) -> Option<Vec<Option<&'a Expr>>> {
        if !matches!(dest, Dest::New(None)) {
            self.error(
                span,
                format!("`{func}` writes its `dst` and returns nothing"),
            );
            return None;
        }
        self.args(func, args, params, required, span)
    }

    /// Matches positional and keyword arguments to parameter names. A parameter named
    /// `"data|x"` takes either keyword (one function with `nki.isa`'s and `nki.language`'s
    /// spellings, `reciprocal(data)` and `reciprocal(x)`).
    pub(super) fn args<'a>(
        &mut self,
        func: &str,
        args: &'a [Arg],
        params: &[&str],
        required: usize,
        span: Span,
    ) -> Option<Vec<Option<&'a Expr>>> {
        let mut out: Vec<Option<&Expr>> = vec![None; params.len()];
        let mut ok = true;
        let mut positional = 0usize;
        for a in args {
            let slot = match &a.name {
                None => {
                    positional = positional.saturating_add(1);
                    if positional > params.len() {
                        self.error(
                            a.value.span(),
                            format!("`{func}` takes at most {} arguments", params.len()),
                        );
                        ok = false;
                        continue;
                    }
                    positional.saturating_sub(1)
                }
                Some(n) => match params.iter().position(|p| p.split('|').any(|k| n == k)) {
                    Some(i) => i,
                    None => {
                        let names: Vec<String> = params.iter().map(|p| shown(p)).collect();
                        self.error(
                            n.span().into(),
                            format!(
                                "`{func}` has no argument `{n}`; it takes {}",
                                names.join(", ")
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
                    format!("argument `{}` of `{func}` given twice", shown(params[slot])),
                );
                ok = false;
            }
            out[slot] = Some(&a.value);
        }
        for (i, p) in params.iter().enumerate().take(required) {
            if out[i].is_none() {
                self.error(span, format!("`{func}` needs the argument `{}`", shown(p)));
                ok = false;
            }
        }
        ok.then_some(out)
    }

    /// Evaluates a `dtype` argument.
    pub(super) fn dtype_arg(&mut self, e: &Expr) -> Option<DType> {
        if let Expr::Name(id) = e
            && self.lookup(&id.to_string()).is_none()
            && DType::from_name(&id.to_string()).is_none()
        {
            self.error(
                id.span().into(),
                format!("unknown dtype `{id}`: expected {}", DTYPES),
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
                        "expected a dtype ({DTYPES}, or `x.dtype`), found {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// A tile operand for `slot` of `opcode`. An HBM tensor where a tile is expected is the
    /// slot's memory error.
    pub(super) fn tile_arg(&mut self, e: &Expr, opcode: Opcode, slot: usize) -> Option<TileView> {
        let v = self.eval(e);
        self.tile_of(v, e, opcode, slot)
    }

    /// [`Lowerer::tile_arg`] of `e` evaluated already (to `value`): an expression whose
    /// evaluation emits instructions (a register `scalar_offset`) is evaluated once.
    pub(super) fn tile_of(
        &mut self,
        value: Value,
        e: &Expr,
        opcode: Opcode,
        slot: usize,
    ) -> Option<TileView> {
        let info = opcode.info();
        let spec = &info.operands[slot];
        match value {
            Value::Tile(view) => Some(view),
            Value::Tensor(_) | Value::Access(_) => {
                if let Err(v) = rules::check_memory(info.name, spec.name, Memory::Hbm, spec.memory)
                {
                    self.error(e.span(), message(&v));
                }
                None
            }
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "operand '{}' of '{}' must be a tile, not {}",
                        spec.name,
                        info.name,
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// An HBM access operand for `slot` of `opcode` (a whole tensor is indexed entirely). A
    /// tile where HBM is expected is the slot's memory error.
    pub(super) fn access_arg(&mut self, e: &Expr, opcode: Opcode, slot: usize) -> Option<Access> {
        let v = self.eval(e);
        self.access_of(v, e, opcode, slot)
    }

    /// [`Lowerer::access_arg`] of `e` evaluated already (to `value`).
    pub(super) fn access_of(
        &mut self,
        value: Value,
        e: &Expr,
        opcode: Opcode,
        slot: usize,
    ) -> Option<Access> {
        let info = opcode.info();
        let spec = &info.operands[slot];
        match value {
            Value::Access(acc) => Some(acc),
            Value::Tensor(h) => match self.index(Value::Tensor(h), &[], e.span()) {
                Value::Access(acc) => Some(acc),
                _ => None,
            },
            Value::Tile(v) => {
                let mem = self.buf.tiles[v.tile as usize].memory;
                if let Err(v) = rules::check_memory(info.name, spec.name, mem, spec.memory) {
                    self.error(e.span(), message(&v));
                }
                None
            }
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "operand '{}' of '{}' is an HBM tensor, not {}",
                        spec.name,
                        info.name,
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// Checks an instruction against its opcode's rules ([`nki_lang::ProgramBuf::infer`]) and
    /// emits it, or reports the broken rule on the blamed operand's tokens.
    pub(super) fn emit_checked(&mut self, instr: Instr, spans: InstrSpans) -> bool {
        let Some(instr) = self.with_predicate(instr, spans.whole) else {
            return false;
        };
        if let Err(b) = self.buf.infer(&instr) {
            self.error(spans.get(b.part), message(&b.violation));
            return false;
        }
        if let Some(dst) = instr.data.dst()
            && dst.write == Write::Overwrite
            && let Some(v) = self.buf.views.get(dst.view.index())
        {
            // A write other than `+=` ends a pending accumulation group on the tile.
            self.fresh_zero.remove(&v.tile);
        }
        let line = spans.whole.line();
        self.buf.instrs.push(Instr { line, ..instr });
        self.push_spans(spans);
        true
    }

    /// Emits `opcode` with the operands `make(dst)`, where `dst` is the result's view: `dest`'s
    /// view, or a new tile whose shape, dtype and memory the opcode's rule gives for these
    /// operands (`options.dtype` overrides the dtype). Returns the result's view.
    pub(super) fn emit_op(
        &mut self,
        opcode: Opcode,
        make: &dyn Fn(ViewId) -> InstrData,
        dest: Dest<'_>,
        options: OpOptions,
        spans: InstrSpans,
    ) -> Option<TileView> {
        if let Dest::Into {
            view,
            span,
            accumulate: Some(alu),
        } = dest
            && (make(ViewId(u16::MAX)).dst().is_none() || !opcode.accumulates())
        {
            // `t op= x` where `x`'s operation has no combining destination (a DMA into SBUF,
            // a memset, an iota, a transpose, batch-norm statistics): `x` into a new tile,
            // then `t = t op x` under the same mask.
            let overwrite = |v| {
                let mut data = make(v);
                if let Some(dst) = data.dst_mut() {
                    dst.write = Write::Overwrite;
                }
                data
            };
            let x = self.emit_op(opcode, &overwrite, Dest::New(None), options, spans)?;
            let combine = OpOptions {
                mask: options.mask,
                ..OpOptions::default()
            };
            let into = Dest::Into {
                view,
                span,
                accumulate: None,
            };
            return match self.tensor_op(alu, view, x, InstrSpans::at(spans.whole), into, combine) {
                Value::Tile(v) => Some(v),
                _ => None,
            };
        }
        let engine = options.engine.unwrap_or(opcode.info().engines[0]);
        let instr = |data| Instr {
            engine,
            mask: options.mask,
            ..Instr::new(opcode, data)
        };
        let (view, spans) = match dest {
            Dest::Into {
                view, span: dspan, ..
            } => (view, spans.with(0, dspan)),
            Dest::New(name) if options.shape.is_some() => {
                let (Some(shape), Some(dtype)) = (options.shape, options.dtype) else {
                    self.error(spans.whole, "this operation needs a `dtype`");
                    return None;
                };
                match self.new_tile(name, Memory::Sbuf, dtype, shape, spans.whole) {
                    Value::Tile(v) => (v, spans),
                    _ => return None,
                }
            }
            Dest::New(name) => {
                // The rule gives the result of these operands; slot 0 is still empty.
                let probe = instr(make(ViewId(u16::MAX)));
                let out = match self.buf.infer(&probe) {
                    Ok(Some(out)) => out,
                    Ok(None) => {
                        self.error(spans.whole, "this operation has no result");
                        return None;
                    }
                    Err(b) => {
                        self.error(spans.get(b.part), message(&b.violation));
                        return None;
                    }
                };
                let dtype = options.dtype.unwrap_or(out.dtype);
                let memory = out.memories[0];
                let shape = if options.squeeze {
                    squeezed(&out.shape)
                } else {
                    out.shape
                };
                match self.new_tile(name, memory, dtype, shape, spans.whole) {
                    Value::Tile(v) => (v, spans),
                    _ => return None,
                }
            }
        };
        let id = self.view_id(view, spans.get(Part::Slot(0)))?;
        self.emit_checked(instr(make(id)), spans).then_some(view)
    }
}

/// The dtypes, for messages.
pub const DTYPES: &str = "f32, tfloat32, bf16, f16, float8_e4m3, float8_e5m2, float8_e4m3fn, \
     float4_e2m1fn, float8_e8m0fnu, float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4, i8, i16, \
     i32, u8, u16, u32 or bool";

/// A shape without its size-1 free dimensions (at least one free dimension stays).
fn squeezed(s: &TileShape) -> TileShape {
    let mut dims = vec![s.partitions()];
    dims.extend(s.free().iter().copied().filter(|&d| d != 1));
    if dims.len() == 1 {
        dims.push(1);
    }
    TileShape::new(&dims).unwrap_or(*s)
}

/// Whether `candidate` is a likely intended spelling of `name` (one edit apart, or a prefix).
// The indices stay below the names' lengths and `edits` below 3: nothing overflows.
#[allow(clippy::arithmetic_side_effects)]
pub(super) fn close(candidate: &str, name: &str) -> bool {
    let (a, b) = (candidate.as_bytes(), name.as_bytes());
    if a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    // Levenshtein distance ≤ 1, or one transposition.
    let (mut i, mut j, mut edits) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            i += 1;
            j += 1;
            continue;
        }
        edits += 1;
        if edits > 1 {
            return false;
        }
        if i + 1 < a.len() && j + 1 < b.len() && a[i] == b[j + 1] && a[i + 1] == b[j] {
            i += 2;
            j += 2;
        } else if a.len() > b.len() {
            i += 1;
        } else if b.len() > a.len() {
            j += 1;
        } else {
            i += 1;
            j += 1;
        }
    }
    edits + (a.len() - i) + (b.len() - j) <= 1
}

/// A parameter's name as messages show it: `data|x` (either keyword) as `data` or `x`.
pub(super) fn shown(param: &str) -> String {
    param.replace('|', "` or `")
}
