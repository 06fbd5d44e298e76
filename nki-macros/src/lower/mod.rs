//! Lowering: the kernel model into a [`ProgramBuf`], with the span of every instruction operand,
//! tile and tensor so that rule violations found later point at the user's tokens.
//!
//! A kernel's literals (sizes, indices, strides, trip counts, unroll counts) are user input:
//! arithmetic on them is checked (a spanned compile error on overflow) and conversions are
//! fallible, never silently truncated, wrapped or panicking. The lints below keep it so; each
//! `allow` says why its operation cannot overflow.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

mod blocks;
pub(crate) mod builtins;
mod call;
pub use call::DTYPES;
mod dst_first;
mod expr;
mod index;
mod inline;
mod mask;
mod ops;
pub mod value;
mod views;

use std::collections::HashMap;
use syn::ext::IdentExt;

use crate::span::Span;
use nki_lang::ops::Part;
use nki_lang::{
    Affine, DType, Dim, Extent, Instr, InstrData, LoopKind, MAX_SLOTS, Memory, Opcode, ProgramBuf,
    TensorBuf, TensorRole, TileBuf, TileShape, TileView, ViewId,
};

use crate::errors::Errors;
use crate::parse::model::{
    Block, DimSpec, Expr, Helper, Instance, IterKind, Kernel, MetaKind, MetaValue, Stmt, TensorType,
};
use value::{Hbm, Value};

/// The most iterations one `static_range` unrolls.
pub(crate) const MAX_STATIC_TRIP: u64 = 4096;

/// The most instructions unrolling may make a kernel (loops stay loops and do not count
/// their iterations).
pub(crate) const MAX_INSTRS: usize = 1 << 16;

/// A kernel's number as an fp32 immediate: rounded to nearest even, as the hardware's fp32
/// immediates are (past fp32's range, ±inf).
pub(crate) fn fp32(x: f64) -> f32 {
    // The rounding is the point.
    #[allow(clippy::cast_possible_truncation)]
    let y = x as f32;
    y
}

/// Spans of one instruction: the whole call, and the tokens of each operand slot, function
/// code and engine where the kernel wrote them.
#[derive(Copy, Clone)]
pub struct InstrSpans {
    /// The whole instruction's source.
    pub whole: Span,
    /// Each operand slot's source, by slot.
    pub slots: [Option<Span>; MAX_SLOTS],
    /// The function codes' arguments (`op0`, `op1`, `reduce_op`; [`Part::Code`]).
    pub codes: [Option<Span>; 3],
    /// The `engine =` argument.
    pub engine: Option<Span>,
    /// The note of the helper call the instruction was inlined from ([`Spans::notes`]).
    pub note: Option<u32>,
}

impl InstrSpans {
    /// Every operand at one span.
    pub fn at(span: Span) -> InstrSpans {
        InstrSpans {
            whole: span,
            slots: [None; MAX_SLOTS],
            codes: [None; 3],
            engine: None,
            note: None,
        }
    }

    /// The same with slot `slot` at `span`.
    pub fn with(mut self, slot: usize, span: Span) -> InstrSpans {
        self.slots[slot] = Some(span);
        self
    }

    /// The span of a part of the instruction (the whole call when the kernel wrote none).
    pub fn get(&self, part: Part) -> Span {
        let at = match part {
            Part::Whole => None,
            Part::Slot(s) => self.slots.get(s as usize).copied().flatten(),
            Part::Code(c) => self.codes.get(c as usize).copied().flatten(),
            Part::Engine => self.engine,
        };
        at.unwrap_or(self.whole)
    }
}

/// Source spans parallel to a program's tables.
#[derive(Default)]
pub struct Spans {
    /// One per instruction.
    pub instrs: Vec<InstrSpans>,
    /// Notes that errors at an instruction inlined from a helper carry (where it was called),
    /// indexed by [`InstrSpans::note`].
    pub notes: Vec<String>,
    /// One per tile (its creation).
    pub tiles: Vec<Span>,
    /// One per tensor (its declaration).
    pub tensors: Vec<Span>,
    /// One per symbolic dimension (its first appearance in the signature).
    pub symbols: Vec<Span>,
}

/// How many instructions a program has, as the `u32` its side tables use.
fn instr_count(buf: &ProgramBuf) -> u32 {
    // At most MAX_INSTRS (2^16) instructions.
    u32::try_from(buf.instrs.len()).unwrap_or(u32::MAX)
}

/// An HBM tensor known to the lowering, before outputs are put in return order.
struct Tensor {
    name: String,
    dtype: DType,
    shape: Vec<Dim>,
    role: TensorRole,
    /// A `private_hbm` tensor's declaring loop (see [`nki_lang::TensorDecl::scope`]).
    scope: Option<u32>,
    /// A constant's elements (see [`nki_lang::TensorDecl::data`]).
    data: Vec<u8>,
    span: Span,
}

/// Lowers one kernel.
pub struct Lowerer<'e> {
    errors: &'e mut Errors,
    buf: ProgramBuf,
    spans: Spans,
    tensors: Vec<Tensor>,
    scopes: Vec<HashMap<String, Value>>,
    /// Trip counts of the enclosing (non-unrolled) loops.
    loops: Vec<Extent>,
    /// The `LoopBegin` instruction of each enclosing loop, outermost first: a tile is declared
    /// in the innermost.
    loop_begins: Vec<u32>,
    /// PSUM tiles zeroed or created uninitialized and not yet written: tile → loop depth at
    /// their creation.
    fresh_zero: HashMap<u16, usize>,
    /// Arrays bound to a name (`const TABLE: [[f32; 4]; 2] = [...];`), for
    /// `shared_constant(TABLE)`: the name's literal.
    arrays: HashMap<String, Expr>,
    /// The conditions of the enclosing `if`s on loop indices: every instruction lowered inside
    /// them is predicated on them ([`Lowerer::predicated`]).
    predicate: Vec<nki_lang::MaskTerm>,
    /// Tiles declared with block axes (`par_dim`): tile → number of block axes.
    tile_blocks: HashMap<u16, blocks::BlockInfo>,
    temp_count: usize,
    /// The helpers the kernel may call.
    helpers: &'e [Helper],
    /// The helpers being inlined, innermost last: name and the note their errors get.
    inlining: Vec<(String, u32)>,
    /// Unrolling passed [`MAX_INSTRS`] (reported once; every `static_range` stops).
    too_long: bool,
    /// Virtual registers allocated so far (`register_alloc`, device loops).
    registers: u16,
    /// `no_reorder!` blocks being lowered (only the outermost is recorded).
    no_reorder: usize,
    /// `#[kernel(strict_hardware)]`: refuse what NKI 0.3+ simulates but the device cannot
    /// run ([`nki_lang::device_support`]).
    strict_hardware: bool,
}

/// The rewrite of a loop whose bounds depend on an enclosing loop (a triangle).
const DEPENDENT_BOUNDS: &str = "every loop of a program has one trip count; loop over the whole range and mask the body's instructions (`mask = j >= i`), or select with `affine_select`";

/// The bounds of a loop as written: `iter(stop)`, `iter(start, stop)`, `iter(start, stop,
/// step)`.
struct LoopRange<'a> {
    start: Option<&'a Expr>,
    stop: &'a Expr,
    step: Option<&'a Expr>,
}

/// The result of lowering: the unchecked program and its spans.
pub struct Lowered {
    /// The program.
    pub buf: ProgramBuf,
    /// Spans parallel to its tables.
    pub spans: Spans,
}

/// Whether `name` is one of the language's functions.
pub fn is_builtin(name: &str) -> bool {
    builtins::lookup(name).is_some()
}

/// Whether `name` is an NKI function the language refuses (reported as such, with the
/// rewrite, rather than looked up as a helper).
pub fn is_refused(name: &str) -> bool {
    builtins::refused(name).is_some()
}

/// Whether `name` is one edit from one of the language's functions: a typo, reported as such
/// (with the right name) rather than looked up as a helper.
pub fn near_builtin(name: &str) -> bool {
    // A name that differs from one of NKI's versioned names only by its number (`activate` and
    // `activate2`) is as likely a helper of the kernel's own.
    let versioned = |n: &str| {
        let extra = n.strip_prefix(name).or_else(|| name.strip_prefix(n));
        extra.is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    !is_builtin(name) && builtins::names().any(|n| call::close(n, name) && !versioned(n))
}

/// Lowers `kernel`; errors go to `errors`.
pub fn lower(kernel: &Kernel, instance: Option<&Instance>, errors: &mut Errors) -> Lowered {
    let name = instance.map_or(&kernel.name, |i| &i.name);
    let mut l = Lowerer {
        errors,
        buf: ProgramBuf {
            name: name.to_string(),
            target: kernel.target,
            ..ProgramBuf::default()
        },
        spans: Spans::default(),
        tensors: Vec::new(),
        scopes: vec![HashMap::new()],
        loops: Vec::new(),
        loop_begins: Vec::new(),
        fresh_zero: HashMap::new(),
        arrays: HashMap::new(),
        predicate: Vec::new(),
        tile_blocks: HashMap::new(),
        temp_count: 0,
        helpers: &kernel.helpers,
        inlining: Vec::new(),
        too_long: false,
        registers: 0,
        no_reorder: 0,
        strict_hardware: kernel.strict_hardware,
    };
    // The meta-parameters are compile-time values, like `const` items (one an instantiation
    // does not set, already reported, is poison).
    for m in &kernel.meta {
        let set = instance.and_then(|i| i.values.iter().find(|(p, ..)| *p == m.name));
        let value = match (set, m.kind) {
            (Some((_, MetaValue::Int(n), _)), MetaKind::Int) => Value::Int(*n),
            (Some((_, MetaValue::Int(n), _)), MetaKind::Float) => Value::Float(*n as f64),
            (Some((_, MetaValue::Float(b), _)), MetaKind::Float) => {
                Value::Float(f64::from_bits(*b))
            }
            (Some((_, MetaValue::Bool(b), _)), MetaKind::Bool) => Value::Bool(*b),
            (Some((_, MetaValue::DType(d), _)), MetaKind::DType) => Value::DType(*d),
            _ => Value::Poison,
        };
        l.bind(&m.name.unraw().to_string(), value);
    }
    l.declare_params(kernel);
    for ty in &kernel.returns {
        // Symbols of the outputs resolve in the body; one that no input binds is reported by
        // the checks (`UnboundSymbol`).
        l.dims(ty, true);
    }
    l.block(&kernel.body);
    l.finish_outputs(kernel);
    l.schedule_edges(kernel);
    let Lowerer { buf, spans, .. } = l;
    Lowered { buf, spans }
}

impl Lowerer<'_> {
    fn error(&mut self, span: Span, msg: impl std::fmt::Display) -> Value {
        self.errors.push(span, msg);
        Value::Poison
    }

    fn bind(&mut self, name: &str, v: Value) {
        self.scopes
            .last_mut()
            .expect("a scope")
            .insert(name.to_string(), v);
    }

    fn lookup(&self, name: &str) -> Option<&Value> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn symbol(&mut self, name: &syn::Ident) -> u8 {
        self.symbol_named(&name.to_string(), name.span().into())
    }

    /// The symbol called `name`, declared at `span` on first use.
    fn symbol_named(&mut self, name: &str, span: Span) -> u8 {
        // Past 255 symbols: an index the verifier refuses (a kernel has at most 8).
        if let Some(i) = self.buf.symbols.iter().position(|s| s == name) {
            return u8::try_from(i).unwrap_or(u8::MAX);
        }
        self.buf.symbols.push(name.to_string());
        self.spans.symbols.push(span);
        u8::try_from(self.buf.symbols.len().saturating_sub(1)).unwrap_or(u8::MAX)
    }

    /// A tensor type's dimensions; a returned tensor's (`derived`) may also be a quotient or
    /// sum of symbolic dimensions (`{ H / KH }`, `{ H + 2 }`), which an input's cannot (an
    /// input binds the symbols it names).
    fn dims(&mut self, ty: &TensorType, derived: bool) -> Vec<Dim> {
        ty.dims
            .iter()
            .map(|d| match d {
                DimSpec::Lit(n) => Dim::Fixed(*n),
                // An integer meta-parameter fixes the dimension in its instantiation.
                DimSpec::Sym(i) => match self.lookup(&i.unraw().to_string()) {
                    Some(&Value::Int(n)) if n > 0 => Dim::Fixed(n.unsigned_abs()),
                    Some(Value::Int(_)) => {
                        self.errors
                            .push(i.span(), format!("the dimension `{i}` must be positive"));
                        Dim::Fixed(1)
                    }
                    _ => Dim::Sym(self.symbol(i)),
                },
                DimSpec::Expr(e) => match self.eval(e) {
                    Value::Int(n) if n > 0 => Dim::Fixed(n.unsigned_abs()),
                    Value::Poison => Dim::Fixed(1),
                    Value::Sym { sym, add, div } if derived => {
                        let s = i64::try_from(add)
                            .ok()
                            .and_then(|add| self.as_symbol(sym, add, div, e.span()));
                        s.map_or(Dim::Fixed(1), Dim::Sym)
                    }
                    other => {
                        let what = other.describe();
                        self.errors.push(
                            e.span(),
                            format!("a dimension is a positive compile-time integer, not {what}"),
                        );
                        Dim::Fixed(1)
                    }
                },
            })
            .collect()
    }

    fn declare_params(&mut self, kernel: &Kernel) {
        for p in &kernel.params {
            let shape = self.dims(&p.ty, false);
            // The body's names are unraw (`r#in` is `in`), so are the parameters'.
            // A name declared twice was reported with the signature.
            let name = p.name.unraw().to_string();
            self.add_tensor(Tensor {
                name: name.clone(),
                dtype: p.ty.dtype,
                shape,
                role: TensorRole::Input,
                scope: None,
                data: Vec::new(),
                span: p.name.span().into(),
            });
            self.bind(
                &name,
                Value::Tensor(Hbm::whole(self.tensors.len().saturating_sub(1))),
            );
        }
    }

    /// Declares an HBM tensor (in declaration order until [`Lowerer::finish_outputs`] puts the
    /// table in its final order); returns its index.
    fn add_tensor(&mut self, t: Tensor) -> usize {
        self.buf.tensors.push(TensorBuf {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            role: t.role,
            scope: t.scope,
            data: t.data.clone(),
        });
        self.tensors.push(t);
        self.tensors.len().saturating_sub(1)
    }

    /// Adds an instruction on its opcode's default engine at the current statement.
    fn emit(&mut self, opcode: Opcode, data: InstrData, spans: InstrSpans) -> usize {
        let mut instr = Instr::new(opcode, data);
        instr.line = spans.whole.line();
        self.buf.instrs.push(instr);
        self.push_spans(spans);
        self.buf.instrs.len().saturating_sub(1)
    }

    /// Opens a loop over the variable `name` (`_` for none): its `LoopBegin` (the matching end
    /// patched when the loop closes), its trip on the loop stack, a new scope. Returns the
    /// `LoopBegin`'s index.
    fn open_loop(&mut self, name: &str, kind: LoopKind, trip: Extent, span: Span) -> usize {
        self.buf.loop_vars.push(name.to_string());
        // Past 65535 loops: an index the verifier refuses.
        let var = u16::try_from(self.buf.loop_vars.len().saturating_sub(1)).unwrap_or(u16::MAX);
        let begin = self.emit(
            Opcode::LoopBegin,
            InstrData::LoopBegin {
                kind,
                trip,
                var,
                end: 0,
            },
            InstrSpans::at(span),
        );
        self.loops.push(trip);
        // Instruction indices fit u32: unrolling stops at MAX_INSTRS, and no source holds 2^32
        // instructions (past that, an index the verifier refuses).
        self.loop_begins
            .push(u32::try_from(begin).unwrap_or(u32::MAX));
        self.scopes.push(HashMap::new());
        begin
    }

    /// Closes the loop [`Self::open_loop`] opened at `begin`: its scope and stack entries go,
    /// its `LoopEnd` is emitted and the `LoopBegin` given its index.
    fn close_loop(&mut self, begin: usize, span: Span) {
        self.scopes.pop();
        self.loops.pop();
        self.loop_begins.pop();
        let end = self.emit(
            Opcode::LoopEnd,
            InstrData::LoopEnd {
                begin: u32::try_from(begin).unwrap_or(u32::MAX),
            },
            InstrSpans::at(span),
        );
        if let InstrData::LoopBegin { end: e, .. } = &mut self.buf.instrs[begin].data {
            *e = u32::try_from(end).unwrap_or(u32::MAX);
        }
    }

    /// Records an instruction's spans, with the note of the helper call being inlined.
    fn push_spans(&mut self, mut spans: InstrSpans) {
        spans.note = self.inlining.last().map(|&(_, note)| note);
        self.spans.instrs.push(spans);
    }

    /// The pool id of a view (each distinct view is stored once).
    fn view_id(&mut self, v: TileView, span: Span) -> Option<ViewId> {
        let id = self.buf.add_view(v);
        if id.is_none() {
            self.error(span, "a kernel uses at most 65535 distinct tile views");
        }
        id
    }

    /// Creates a tile; checks its shape rules on the spot.
    fn new_tile(
        &mut self,
        name: Option<&str>,
        memory: Memory,
        dtype: DType,
        shape: TileShape,
        span: Span,
    ) -> Value {
        self.new_block_tile(name, memory, dtype, shape, 0, span)
    }

    /// A new tile whose first `block_axes` free axes are block axes (NKI's axes before
    /// `par_dim`).
    fn new_block_tile(
        &mut self,
        name: Option<&str>,
        memory: Memory,
        dtype: DType,
        shape: TileShape,
        block_axes: u8,
        span: Span,
    ) -> Value {
        let target = self.buf.target;
        let check = nki_lang::rules::check_tile_shape(&shape).and_then(|()| match memory {
            Memory::Psum => nki_lang::rules::check_psum_block_tile(&shape, dtype, block_axes),
            Memory::Sbuf => nki_lang::rules::check_sbuf_tile(&shape, dtype, target),
            Memory::Hbm => Ok(()),
        });
        if let Err(v) = check {
            return self.error(span, crate::errors::message(&v));
        }
        if self.buf.tiles.len() >= u16::MAX as usize {
            return self.error(span, "a kernel has at most 65535 tiles");
        }
        let name = match name {
            Some(n) => n.to_string(),
            None => {
                self.temp_count = self.temp_count.saturating_add(1);
                format!("_t{}", self.temp_count)
            }
        };
        self.buf.tiles.push(TileBuf {
            blocks: None,
            block_axes,
            name,
            memory,
            dtype,
            shape,
            scope: self.loop_begins.last().copied(),
        });
        self.spans.tiles.push(span);
        // Below u16::MAX, checked above.
        let tile = u16::try_from(self.buf.tiles.len().saturating_sub(1)).unwrap_or(u16::MAX);
        Value::Tile(TileView::whole(tile, &shape))
    }

    /// Lowers a call with NKI's `name = "..."` (`f`), and names the instructions it made.
    fn labelled<R>(&mut self, name: &str, at: Span, f: impl FnOnce(&mut Self) -> R) -> R {
        let first = instr_count(&self.buf);
        let r = f(self);
        self.label(name, at, first);
        r
    }

    /// Names the instructions from `first` to the last one made; a broken rule of
    /// [`nki_lang::schedule_control`] is an error at `at` (the name's literal).
    fn label(&mut self, name: &str, at: Span, first: u32) {
        if !self.errors.is_empty() {
            // The call's own error (a poisoned call makes no instruction) is enough.
            return;
        }
        let end = instr_count(&self.buf);
        if let Err(e) = self.buf.control.name(name, first, end) {
            self.error(at, e);
        }
    }

    /// `#[kernel(with_schedule = [...])]`: each pair's edges, an error at the name the rules
    /// of [`nki_lang::schedule_control`] refuse.
    fn schedule_edges(&mut self, kernel: &Kernel) {
        if !self.errors.is_empty() {
            // A call in error names nothing: its edges would only add unknown names.
            return;
        }
        for pair in &kernel.schedule {
            let (after, after_at) = (&pair.after.0, pair.after.1);
            for (before, before_at) in &pair.before {
                if let Err(e) = self.buf.control.edge(after, before) {
                    let at =
                        match &e {
                            nki_lang::schedule_control::ControlError::UnknownName {
                                name, ..
                            } if name == after => after_at,
                            _ => *before_at,
                        };
                    self.error(at, e);
                }
            }
        }
    }

    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            self.stmt(s);
        }
    }

    /// The branch an `if` takes: its statements in a scope of their own, then its tail's
    /// value (`()` without one).
    fn branch(&mut self, b: &Block) -> Value {
        self.scopes.push(HashMap::new());
        self.block(b);
        let v = b.tail.as_ref().map_or(Value::Unit, |t| self.eval(t));
        self.scopes.pop();
        v
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Let {
                names,
                tuple,
                value,
            } => {
                // Python's tuple assignment, `h_out, w_out = h - 2, w - 2`: one binding per
                // element, each evaluated before any is bound.
                if *tuple && let Expr::Tuple(items, span) = value {
                    if items.len() != names.len() {
                        self.error(
                            *span,
                            format!(
                                "the tuple has {} elements but the pattern binds {} names",
                                items.len(),
                                names.len()
                            ),
                        );
                        return;
                    }
                    let values: Vec<Value> = items
                        .iter()
                        .zip(names)
                        .map(|(e, n)| {
                            let name = n.as_ref().map(|i| i.to_string());
                            self.produce(e, call::Dest::New(name.as_deref()))
                        })
                        .collect();
                    for (n, v) in names.iter().zip(values) {
                        if let Some(n) = n {
                            self.bind(&n.to_string(), v);
                        }
                    }
                    return;
                }
                let single = if *tuple {
                    None
                } else {
                    names[0].as_ref().map(|i| i.to_string())
                };
                // An array literal (a `const` of the kernel): data for `shared_constant`.
                if let (Some(n), Expr::Array(..)) = (&single, value) {
                    self.arrays.insert(n.clone(), value.clone());
                    return;
                }
                let v = self.produce(value, call::Dest::New(single.as_deref()));
                if *tuple {
                    self.bind_tuple(names, v, value.span());
                } else if let Some(n) = single {
                    self.bind(&n, v);
                }
            }
            Stmt::Expr(Expr::Named {
                call,
                name,
                name_span,
            }) => {
                // A destination-first call with a name: its instructions carry the name.
                let first = instr_count(&self.buf);
                if self.dst_first_stmt(call) {
                    self.label(name, *name_span, first);
                    return;
                }
                let v = self.labelled(name, *name_span, |l| l.produce(call, call::Dest::New(None)));
                if !matches!(v, Value::Poison | Value::Unit) {
                    self.error(
                        call.span(),
                        "this value is unused: bind it with `let` or store it",
                    );
                }
            }
            Stmt::NoReorder { body, .. } => {
                // Python's `with` opens no scope: the block's names stay bound after it.
                let first = instr_count(&self.buf);
                self.no_reorder = self.no_reorder.saturating_add(1);
                self.block(body);
                self.no_reorder = self.no_reorder.saturating_sub(1);
                if self.no_reorder == 0 {
                    let end = instr_count(&self.buf);
                    self.buf.control.ordered(first, end);
                }
            }
            Stmt::Expr(e) => {
                // NKI 0.6's `nisa::op(dst, ...)`: writes its destination.
                if self.dst_first_stmt(e) {
                    return;
                }
                let v = self.produce(e, call::Dest::New(None));
                if !matches!(v, Value::Poison | Value::Unit) {
                    self.error(
                        e.span(),
                        "this value is unused: bind it with `let` or store it",
                    );
                }
            }
            Stmt::Assign { target, value } => {
                let dst = self.eval(target);
                match dst {
                    Value::Tile(view) => {
                        self.produce(
                            value,
                            call::Dest::Into {
                                view,
                                span: target.span(),
                                accumulate: None,
                            },
                        );
                    }
                    Value::Poison => {}
                    Value::Access(_) | Value::Tensor(_) => {
                        self.error(
                            target.span(),
                            "write to an HBM tensor with `store(dst, value)`",
                        );
                    }
                    other => {
                        self.error(
                            target.span(),
                            format!("cannot assign to {}", other.describe()),
                        );
                    }
                }
            }
            Stmt::OpAssign {
                op,
                target,
                value,
                span,
            } => {
                let Some(alu) = accumulation(*op) else {
                    self.error(
                        *span,
                        format!("`{}=` does not accumulate into a tile", op.symbol()),
                    );
                    return;
                };
                if self.strict_hardware
                    && let Err(e) = nki_lang::device_support::check_alu(alu)
                {
                    self.error(*span, e);
                    return;
                }
                match self.eval(target) {
                    Value::Poison => {}
                    Value::Tile(view) => {
                        self.produce(
                            value,
                            call::Dest::Into {
                                view,
                                span: target.span(),
                                accumulate: Some(alu),
                            },
                        );
                    }
                    other => {
                        self.error(
                            target.span(),
                            format!("cannot accumulate into {}", other.describe()),
                        );
                    }
                }
            }
            Stmt::Assert { cond, message } => match self.eval(cond) {
                Value::Bool(true) | Value::Poison => {}
                Value::Bool(false) => {
                    self.error(cond.span(), message.clone());
                }
                other => {
                    self.error(
                        cond.span(),
                        format!(
                            "an assertion is checked when the kernel compiles, as NKI checks its Python `assert` at trace time: its condition must be a compile-time bool (of integers, meta-parameters, dtypes, shapes), not {}; a symbolic dimension is checked at launch by the signature's names and the launch constraints",
                            other.describe()
                        ),
                    );
                }
            },
            Stmt::For {
                var,
                kind,
                start,
                trip,
                step,
                iter_span,
                body,
            } => {
                let range = LoopRange {
                    start: start.as_deref(),
                    stop: trip,
                    step: step.as_deref(),
                };
                self.for_loop(var.as_ref(), *kind, range, *iter_span, body)
            }
        }
    }

    fn bind_tuple(&mut self, names: &[Option<syn::Ident>], v: Value, span: Span) {
        let parts: Vec<Value> = match v {
            Value::Grid(axes) => axes.into_iter().map(Value::Index).collect(),
            // NKI's `m, n = x.shape`.
            Value::Shape(dims) => dims.into_iter().map(expr::dim_value).collect(),
            Value::Poison => vec![Value::Poison; names.len()],
            other => {
                self.error(
                    span,
                    format!("cannot destructure {} into a tuple", other.describe()),
                );
                vec![Value::Poison; names.len()]
            }
        };
        if parts.len() != names.len() {
            self.error(
                span,
                format!(
                    "the value has {} parts (axes of a grid, dimensions of a shape) but the pattern binds {} names",
                    parts.len(),
                    names.len()
                ),
            );
            return;
        }
        for (n, p) in names.iter().zip(parts) {
            if let Some(n) = n {
                self.bind(&n.to_string(), p);
            }
        }
    }

    /// A loop's start and step (compile-time integers, 0 and 1 by default), its trip count
    /// (Python's `len(range(start, stop, step))`, symbolic when `stop` is) and how many of its
    /// first iterations do nothing: a loop by 1 from `start` to a symbolic end whose trip count
    /// a launch-time trip count (`(K + a) / c`) cannot express runs from 0 instead, its body
    /// predicated off for its first `start` iterations.
    fn loop_range(&mut self, range: &LoopRange<'_>, span: Span) -> Option<(i64, i64, Value, i64)> {
        let int = |this: &mut Self, e: Option<&Expr>, default: i64, what: &str| match e {
            None => Some(default),
            Some(e) => match this.eval(e) {
                Value::Int(n) => Some(n),
                Value::Poison => None,
                Value::Index(_) => {
                    this.error(e.span(), format!("a loop's {what} cannot depend on another loop's variable or a program id: {DEPENDENT_BOUNDS}"));
                    None
                }
                other => {
                    this.error(
                        e.span(),
                        format!(
                            "a loop's {what} is a compile-time integer (a literal, a constant, a meta-parameter), not {}",
                            other.describe()
                        ),
                    );
                    None
                }
            },
        };
        let start = int(self, range.start, 0, "start");
        let step = int(self, range.step, 1, "step");
        let stop = self.eval(range.stop);
        let (start, step) = (start?, step?);
        if step <= 0 {
            let at = range.step.map_or(span, Expr::span);
            self.error(
                at,
                "a loop's step is a positive integer: loops here run upwards (index with `stop - 1 - i` to go down)",
            );
            return None;
        }
        if start == 0 && step == 1 {
            return Some((start, step, stop, 0));
        }
        let overflow = |this: &mut Self| {
            this.error(span, "integer overflow in a compile-time expression");
            None
        };
        let trip = match stop {
            Value::Int(stop) if stop <= start => Value::Int(0),
            Value::Int(stop) => {
                // stop > start, step > 0: ceil((stop − start) / step).
                let Some(n) = stop
                    .checked_sub(start)
                    .and_then(|d| d.checked_add(step.checked_sub(1)?))
                    .and_then(|d| d.checked_div(step))
                else {
                    return overflow(self);
                };
                Value::Int(n)
            }
            Value::Poison => return None,
            // From `start` by a step other than 1 to a symbolic end `S` (`K / 128`, or `K + a`
            // with `a < start`): the trip count `ceil((S − start) / step)`, which is
            // `(S + step − 1 − start) / step` with the difference clamped at 0 (Python's
            // `len(range(start, stop, step))`), is a symbol of its own, bound at launch; the
            // index is `start + step · i`.
            Value::Sym { sym, div, add }
                if step != 1 && (div != 1 || i64::try_from(add).is_ok_and(|a| a < start)) =>
            {
                let at = range.stop.span();
                let Ok(add) = i64::try_from(add) else {
                    return overflow(self);
                };
                let Some(offset) = step.checked_sub(1).and_then(|s| s.checked_sub(start)) else {
                    return overflow(self);
                };
                let stop = self.as_symbol(sym, add, div, at)?;
                let name = self.buf.symbols.get(usize::from(stop))?.clone();
                let name =
                    nki_lang::derived::offset_quotient_name(&name, offset, step.unsigned_abs());
                let trip = self.derived(name, at);
                return Some((start, step, trip, 0));
            }
            // From `start` by 1 to a symbolic end `(K + a) / d` the trip count cannot express:
            // the loop runs from 0 over `(K + a) / d` iterations, its first `start` predicated
            // off.
            Value::Sym { div, add, .. }
                if div != 1 || i64::try_from(add).is_ok_and(|a| a < start) =>
            {
                return Some((0, 1, stop, start));
            }
            stop => {
                let d = self.arith(
                    crate::parse::model::BinOp::Sub,
                    stop,
                    Value::Int(start),
                    span,
                );
                if step == 1 {
                    d
                } else {
                    let Some(round) = step.checked_sub(1) else {
                        return overflow(self);
                    };
                    let up =
                        self.arith(crate::parse::model::BinOp::Add, d, Value::Int(round), span);
                    self.arith(crate::parse::model::BinOp::Div, up, Value::Int(step), span)
                }
            }
        };
        Some((start, step, trip, 0))
    }

    fn for_loop(
        &mut self,
        var: Option<&syn::Ident>,
        kind: IterKind,
        range: LoopRange<'_>,
        iter_span: Span,
        body: &Block,
    ) {
        if kind == IterKind::Dynamic {
            let range = (range.start, range.stop, range.step);
            self.dynamic_range(var, range, iter_span, body);
            return;
        }
        let trip = range.stop;
        let Some((start, step, t, idle)) = self.loop_range(&range, iter_span) else {
            return;
        };
        let extent = match t {
            Value::Int(n) if n >= 0 => Extent::Fixed(n.unsigned_abs()),
            Value::Sym { sym, add, div } => Extent::Sym { sym, add, div },
            Value::Poison => return,
            Value::Int(_) => {
                self.error(trip.span(), "a trip count cannot be negative");
                return;
            }
            Value::Index(_) => {
                self.error(
                    trip.span(),
                    format!("a trip count cannot depend on another loop's variable or a program id: {DEPENDENT_BOUNDS}"),
                );
                return;
            }
            other => {
                self.error(trip.span(), format!("a trip count is an integer, a symbolic dimension, or a quotient or sum of them and literals (`K / 128`, `h / k_h`, `H + 2`), not {}: loop to the dimension and mask the rest (`mask = i < N - 2`), or make the dimension a meta-parameter", other.describe()));
                return;
            }
        };
        if kind == IterKind::Static {
            let Extent::Fixed(n) = extent else {
                self.error(
                    trip.span(),
                    "`static_range` unrolls at compile time: its trip count must be a literal",
                );
                return;
            };
            if n > MAX_STATIC_TRIP {
                self.error(
                    trip.span(),
                    format!(
                        "`static_range({n})` would unroll {n} copies of its body; it unrolls at most {MAX_STATIC_TRIP} (use `affine_range` or `sequential_range`, which stay loops)"
                    ),
                );
                return;
            }
            for i in 0..n {
                // i < 4096 (the unroll limit); start + step · i is checked.
                let value = i64::try_from(i)
                    .ok()
                    .and_then(|i| step.checked_mul(i))
                    .and_then(|s| start.checked_add(s));
                let Some(value) = value else {
                    self.error(iter_span, "integer overflow in a loop's values");
                    return;
                };
                self.scopes.push(HashMap::new());
                if let Some(v) = var {
                    self.bind(&v.to_string(), Value::Int(value));
                }
                self.block(body);
                self.scopes.pop();
                if self.too_long {
                    return;
                }
                if self.buf.instrs.len() > MAX_INSTRS {
                    self.too_long = true;
                    self.error(
                        iter_span,
                        format!(
                            "unrolling this `static_range` makes the kernel longer than {MAX_INSTRS} instructions"
                        ),
                    );
                    return;
                }
            }
            return;
        }
        if self.loops.len() == nki_lang::MAX_LOOP_DEPTH {
            self.error(
                iter_span,
                format!("loops nest at most {} deep", nki_lang::MAX_LOOP_DEPTH),
            );
            return;
        }
        let depth = self.loops.len();
        let name = var
            .map(|v| v.to_string())
            .unwrap_or_else(|| "_".to_string());
        let kind = match kind {
            IterKind::Affine => LoopKind::Affine,
            // `static_range` was unrolled above.
            IterKind::Sequential | IterKind::Static | IterKind::Dynamic => LoopKind::Sequential,
        };
        let begin = self.open_loop(&name, kind, extent, iter_span);
        if var.is_some() {
            // `start + step · i`.
            let value = Affine::loop_var(depth, step).checked_add(&Affine::constant(start));
            match value {
                Some(a) => self.bind(&name, Value::Index(value::Idx::from_affine(a))),
                None => {
                    self.error(iter_span, "integer overflow in a loop's values");
                    self.bind(&name, Value::Poison);
                }
            }
        }
        // The first `idle` iterations of a loop from a start its trip count cannot express
        // run nothing: each instruction of the body is predicated on `i >= idle`.
        let outer = self.predicate.len();
        if idle > 0 {
            let from = idle
                .checked_neg()
                .and_then(|n| Affine::loop_var(depth, 1).checked_add(&Affine::constant(n)));
            let cond = from.map(|a| value::Cond {
                expr: value::Idx::from_affine(a),
                cmp: nki_lang::Cmp::Ge,
                sym: None,
            });
            let mut terms = Vec::new();
            match cond {
                Some(c) if self.mask_terms(&c, iter_span, &mut terms) => {
                    self.predicate.extend(terms);
                }
                Some(_) => {}
                None => {
                    self.error(iter_span, "integer overflow in a loop's values");
                }
            }
        }
        self.block(body);
        self.predicate.truncate(outer);
        self.close_loop(begin, iter_span);
    }

    /// Puts outputs in return order, checks them against the declared return type and builds
    /// the tensor table.
    fn finish_outputs(&mut self, kernel: &Kernel) {
        let mut returned: Vec<usize> = Vec::new();
        if let Some(tail) = &kernel.body.tail {
            let items: Vec<&Expr> = match tail {
                Expr::Tuple(v, _) => v.iter().collect(),
                e => vec![e],
            };
            for e in items {
                match self.eval(e) {
                    Value::Tensor(h) if !h.prefix.is_empty() => {
                        self.error(e.span(), "a kernel returns whole tensors, not a tensor indexed on its leading axes");
                    }
                    Value::Tensor(Hbm {
                        tensor: t,
                        reshape: Some(r),
                        ..
                    }) if self.tensors[t].role == TensorRole::Output => {
                        if returned.contains(&t) {
                            self.error(e.span(), "this output is returned twice");
                        }
                        self.return_reshaped(t, r);
                        returned.push(t);
                    }
                    Value::Tensor(Hbm { tensor: t, .. })
                        if self.tensors[t].role == TensorRole::Output =>
                    {
                        if returned.contains(&t) {
                            self.error(e.span(), "this output is returned twice");
                        }
                        returned.push(t);
                    }
                    Value::Tensor(Hbm { tensor: t, .. })
                        if self.tensors[t].role != TensorRole::Input =>
                    {
                        let msg = format!(
                            "a kernel returns the `shared_hbm` tensors it creates; `{}` is a `{}` tensor, which the caller never sees",
                            self.tensors[t].name,
                            self.tensors[t].role.buffer_name()
                        );
                        self.error(e.span(), msg);
                    }
                    Value::Tensor(_) => {
                        self.error(
                            e.span(),
                            "a kernel returns the `shared_hbm` tensors it creates, not its inputs",
                        );
                    }
                    Value::Poison => return,
                    other => {
                        self.error(e.span(), format!("a kernel returns HBM tensors created with `ndarray(shape, dtype, SharedHbm)`, not {}", other.describe()));
                    }
                }
            }
        }
        // A `shared_hbm` tensor the kernel does not return is scratch (the attention
        // tutorial's v3 keeps its intermediates in such tensors).
        for (t, tensor) in self.tensors.iter_mut().enumerate() {
            if tensor.role == TensorRole::Output && !returned.contains(&t) {
                tensor.role = TensorRole::Scratch;
            }
        }
        if returned.len() != kernel.returns.len() {
            let msg = format!(
                "the kernel returns {} tensor(s) but its signature declares {}",
                returned.len(),
                kernel.returns.len()
            );
            self.errors.push(kernel.returns_span, msg);
        } else {
            for (&t, ty) in returned.iter().zip(&kernel.returns) {
                let declared = self.dims(ty, true);
                let out = &self.tensors[t];
                if out.dtype != ty.dtype || out.shape != declared {
                    let msg = format!(
                        "output `{}` is {}[{}] but the signature declares {}[{}] (err_annotation_shape_mismatch)",
                        out.name,
                        out.dtype,
                        fmt_dims(&out.shape, &self.buf.symbols),
                        ty.dtype,
                        fmt_dims(&declared, &self.buf.symbols)
                    );
                    self.errors.push(ty.span, msg);
                }
            }
        }
        // Table order: inputs, then outputs in return order, then scratch and constants in
        // declaration order.
        let mut order: Vec<usize> = (0..self.tensors.len())
            .filter(|&t| self.tensors[t].role == TensorRole::Input)
            .collect();
        order.extend(returned.iter().copied());
        let rest: Vec<usize> = (0..self.tensors.len())
            .filter(|t| !order.contains(t))
            .collect();
        order.extend(rest);
        let mut remap = vec![0u8; self.tensors.len()];
        for (new, &old) in order.iter().enumerate() {
            // At most MAX_TENSORS (16) tensors.
            remap[old] = u8::try_from(new).unwrap_or(u8::MAX);
        }
        // Every tensor index of the program is in the access pool and the reshapes.
        for a in &mut self.buf.accesses {
            a.tensor = remap[a.tensor as usize];
        }
        for r in &mut self.buf.reshapes {
            r.tensor = remap[r.tensor as usize];
        }
        self.buf.tensors.clear();
        for &t in &order {
            let x = &self.tensors[t];
            self.buf.tensors.push(TensorBuf {
                name: x.name.clone(),
                dtype: x.dtype,
                shape: x.shape.clone(),
                role: x.role,
                scope: x.scope,
                data: x.data.clone(),
            });
            self.spans.tensors.push(x.span);
        }
    }
}

impl Lowerer<'_> {
    /// Output `t` returned through its reshape `r` (NKI's `return out.reshape(shape)`): the
    /// kernel's output has the reshape's dimensions, and the dimensions it was created with
    /// become a reshape of it. The accesses are swapped to match.
    fn return_reshaped(&mut self, t: usize, r: usize) {
        let created = self.tensors[t].shape.clone();
        let returned = self.buf.reshapes[r].shape.clone();
        let name = format!(
            "{}.reshape([{}])",
            self.tensors[t].name,
            fmt_dims(&created, &self.buf.symbols)
        );
        self.tensors[t].shape = returned;
        let view = &mut self.buf.reshapes[r];
        view.shape = created;
        view.name = name;
        let (t8, r8) = (u8::try_from(t).ok(), u8::try_from(r).ok());
        for a in &mut self.buf.accesses {
            if Some(a.tensor) == t8 {
                a.reshape = match a.reshape {
                    None => r8,
                    x if x == r8 => None,
                    other => other,
                };
            }
        }
    }
}

fn fmt_dims(dims: &[Dim], symbols: &[String]) -> String {
    dims.iter()
        .map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Sym(s) => symbols.get(*s as usize).cloned().unwrap_or_default(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The ALU operation of a compound assignment (`+=` adds, `-=` subtracts, ...).
fn accumulation(op: crate::parse::model::BinOp) -> Option<nki_lang::Alu> {
    use crate::parse::model::BinOp as B;
    use nki_lang::Alu;
    Some(match op {
        B::Add => Alu::Add,
        B::Sub => Alu::Subtract,
        B::Mul => Alu::Multiply,
        B::Div => Alu::Divide,
        B::Rem => Alu::Mod,
        B::BitAnd => Alu::BitwiseAnd,
        B::BitOr => Alu::BitwiseOr,
        B::BitXor => Alu::BitwiseXor,
        B::Shl => Alu::LeftShift,
        B::Shr => Alu::RightShift,
        B::Lt | B::Le | B::Gt | B::Ge | B::Eq | B::Ne => return None,
    })
}
