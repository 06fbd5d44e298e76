//! NKI's virtual registers and device loops: `register_alloc`, `register_move`,
//! `register_load`, `register_store`, `fori_loop(lower, upper, |i| { .. }, step)`,
//! `for i in dynamic_range(lower, upper, step) { .. }` and `while_loop(reg, |r| { ..; r })`.
//! A device loop stays one loop of the program ([`nki_lang::LoopKind::Dynamic`],
//! [`nki_lang::LoopKind::While`]); its trip count is read from registers at run time.

use crate::span::Span;
use nki_lang::{Extent, Instr, InstrData, LoopKind, MAX_REGISTERS, Opcode, RegId, RegSrc};

use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Block, Expr};

/// The body of a device loop: its parameter and statements.
struct Body<'a> {
    param: Option<&'a syn::Ident>,
    block: &'a Block,
}

impl Lowerer<'_> {
    /// A new register of the program's file; `None` (reported) past [`MAX_REGISTERS`].
    fn new_register(&mut self, span: Span) -> Option<RegId> {
        if usize::from(self.registers) >= MAX_REGISTERS {
            self.error(
                span,
                format!("a kernel uses at most {MAX_REGISTERS} virtual registers (the engine sequencers' 64)"),
            );
            return None;
        }
        let r = RegId(self.registers);
        self.registers = self.registers.saturating_add(1);
        Some(r)
    }

    /// `e` as a register; `None` (reported) otherwise.
    fn register_arg(&mut self, e: &Expr, what: &str) -> Option<RegId> {
        match self.eval(e) {
            Value::Reg(r) => Some(r),
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "{what} is a virtual register (`nisa::register_alloc()`), not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// `e` as a register's source: a compile-time 32-bit integer or a register.
    fn register_src(&mut self, e: &Expr, what: &str) -> Option<RegSrc> {
        match self.eval(e) {
            Value::Reg(r) => Some(RegSrc::Reg(r)),
            Value::Int(n) => match i32::try_from(n) {
                Ok(n) => Some(RegSrc::Imm(n)),
                Err(_) => {
                    self.error(
                        e.span(),
                        format!("{what} {n} does not fit a 32-bit register"),
                    );
                    None
                }
            },
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "{what} is a compile-time integer or a virtual register, not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// Emits a register instruction; whether it was.
    fn emit_register(&mut self, opcode: Opcode, data: InstrData, spans: InstrSpans) -> bool {
        self.emit_checked(Instr::new(opcode, data), spans)
    }

    /// `register_move(dst, src)` into `reg` at `span`.
    fn move_into(&mut self, reg: RegId, src: RegSrc, span: Span) -> bool {
        let data = InstrData::Register {
            reg,
            src,
            tile: None,
        };
        self.emit_register(Opcode::RegisterMove, data, InstrSpans::at(span))
    }

    /// `register_alloc(x=None)`: a new register, set to `x` when it is given (an integer or a
    /// register); without `x` it is uninitialized (0 in the model).
    pub(in super::super) fn register_alloc(&mut self, args: &[Arg], span: Span) -> Value {
        let Some(a) = self.args("register_alloc", args, &["x"], 0, span) else {
            return Value::Poison;
        };
        let Some(r) = self.new_register(span) else {
            return Value::Poison;
        };
        if let Some(e) = a[0] {
            if matches!(e, Expr::Name(n) if n == "None") {
                return Value::Reg(r);
            }
            let Some(src) = self.register_src(e, "`register_alloc`'s value") else {
                return Value::Poison;
            };
            if !self.move_into(r, src, span) {
                return Value::Poison;
            }
        }
        Value::Reg(r)
    }

    /// `register_move(dst, src)`: `dst` a register, `src` an integer or a register.
    pub(in super::super) fn register_move(&mut self, args: &[Arg], span: Span) -> Value {
        let Some(a) = self.args("register_move", args, &["dst", "src"], 2, span) else {
            return Value::Poison;
        };
        let (dst_e, src_e) = (a[0].expect("required"), a[1].expect("required"));
        let (Some(reg), Some(src)) = (
            self.register_arg(dst_e, "`register_move`'s `dst`"),
            self.register_src(src_e, "`register_move`'s `src`"),
        ) else {
            return Value::Poison;
        };
        if self.move_into(reg, src, span) {
            Value::Unit
        } else {
            Value::Poison
        }
    }

    /// `register_load(dst, src)`: `dst` a register, `src` a one-element integer SBUF tile, or
    /// a one-element integer HBM tensor or access (NKI: "from memory (HBM or SBUF)"), loaded
    /// first into an SBUF tile of its own.
    pub(in super::super) fn register_load(&mut self, args: &[Arg], span: Span) -> Value {
        let Some(a) = self.args("register_load", args, &["dst", "src"], 2, span) else {
            return Value::Poison;
        };
        let (dst_e, src_e) = (a[0].expect("required"), a[1].expect("required"));
        let Some(reg) = self.register_arg(dst_e, "`register_load`'s `dst`") else {
            return Value::Poison;
        };
        let v = match self.eval(src_e) {
            src @ (Value::Tensor(_) | Value::Access(_)) => {
                let Some(access) = self.access_of(src, src_e, Opcode::Load, 1) else {
                    return Value::Poison;
                };
                match self.register_staged_load(&access, src_e.span(), span) {
                    Some(v) => v,
                    None => return Value::Poison,
                }
            }
            src => match self.tile_of(src, src_e, Opcode::RegisterLoad, 1) {
                Some(v) => v,
                None => return Value::Poison,
            },
        };
        let Some(tile) = self.view_id(v, src_e.span()) else {
            return Value::Poison;
        };
        let data = InstrData::Register {
            reg,
            src: RegSrc::None,
            tile: Some(tile),
        };
        let spans = InstrSpans::at(span).with(1, src_e.span());
        if self.emit_register(Opcode::RegisterLoad, data, spans) {
            Value::Unit
        } else {
            Value::Poison
        }
    }

    /// `register_store(dst, src)`: `dst` a one-element integer SBUF tile, or a one-element
    /// integer HBM tensor or access (NKI: "into memory (HBM/SBUF)"), written through an SBUF
    /// tile of its own and a `store`; `src` a register.
    pub(in super::super) fn register_store(&mut self, args: &[Arg], span: Span) -> Value {
        let Some(a) = self.args("register_store", args, &["dst", "src"], 2, span) else {
            return Value::Poison;
        };
        let (dst_e, src_e) = (a[0].expect("required"), a[1].expect("required"));
        let (v, hbm) = match self.eval(dst_e) {
            dst @ (Value::Tensor(_) | Value::Access(_)) => {
                let Some(access) = self.access_of(dst, dst_e, Opcode::Store, 1) else {
                    return Value::Poison;
                };
                let dtype = access.dtype.unwrap_or(self.tensors[access.tensor].dtype);
                let mem = nki_lang::Memory::Sbuf;
                match self.new_tile(None, mem, dtype, access.shape, dst_e.span()) {
                    Value::Tile(v) => (v, Some(access)),
                    _ => return Value::Poison,
                }
            }
            dst => match self.tile_of(dst, dst_e, Opcode::RegisterStore, 0) {
                Some(v) => (v, None),
                None => return Value::Poison,
            },
        };
        let Some(reg) = self.register_arg(src_e, "`register_store`'s `src`") else {
            return Value::Poison;
        };
        let Some(tile) = self.view_id(v, dst_e.span()) else {
            return Value::Poison;
        };
        let data = InstrData::Register {
            reg,
            src: RegSrc::None,
            tile: Some(tile),
        };
        let spans = InstrSpans::at(span).with(0, dst_e.span());
        if !self.emit_register(Opcode::RegisterStore, data, spans) {
            return Value::Poison;
        }
        match hbm {
            Some(access) if !self.register_staged_store(&access, dst_e.span(), v, span) => {
                Value::Poison
            }
            _ => Value::Unit,
        }
    }

    /// A device loop body written as a closure of `params` parameters.
    fn closure_body<'a>(&mut self, e: &'a Expr, func: &str) -> Option<Body<'a>> {
        let Expr::Closure { params, body, span } = e else {
            self.error(
                e.span(),
                format!("`{func}`'s body is a closure written in the call: `|i| {{ .. }}`"),
            );
            return None;
        };
        if params.len() != 1 {
            self.error(
                *span,
                format!("`{func}`'s body takes one parameter, the register (`|i| {{ .. }}`)"),
            );
            return None;
        }
        Some(Body {
            param: params.first().and_then(Option::as_ref),
            block: body,
        })
    }

    /// A device loop's step: a positive compile-time integer.
    fn device_step(&mut self, e: Option<&Expr>) -> Option<i32> {
        let Some(e) = e else { return Some(1) };
        match self.eval(e) {
            Value::Int(n) if n > 0 => match i32::try_from(n) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.error(
                        e.span(),
                        format!("a device loop's step {n} does not fit 32 bits"),
                    );
                    None
                }
            },
            Value::Poison => None,
            other => {
                let what = match other {
                    Value::Int(_) => "an integer that is not positive",
                    o => o.describe(),
                };
                self.error(
                    e.span(),
                    format!("a device loop's step is a positive compile-time integer (the loop instruction encodes it as an immediate), not {what}"),
                );
                None
            }
        }
    }

    /// `fori_loop(lower, upper, body, step=1)`: `body(i)` for `i` in `range(lower, upper,
    /// step)`, `lower` and `upper` integers or registers read when the loop starts.
    pub(in super::super) fn fori_loop(&mut self, args: &[Arg], span: Span) -> Value {
        let params = ["lower", "upper", "body_fun", "step"];
        let Some(a) = self.args("fori_loop", args, &params, 3, span) else {
            return Value::Poison;
        };
        let Some(body) = self.closure_body(a[2].expect("required"), "fori_loop") else {
            return Value::Poison;
        };
        let (lower, upper) = (a[0].expect("required"), a[1].expect("required"));
        self.dynamic_loop(Some(lower), upper, a[3], body, span);
        Value::Unit
    }

    /// `for i in dynamic_range(start, stop, step) { .. }`: the device loop of `fori_loop`.
    pub(in super::super) fn dynamic_range(
        &mut self,
        var: Option<&syn::Ident>,
        (start, stop, step): (Option<&Expr>, &Expr, Option<&Expr>),
        span: Span,
        block: &Block,
    ) {
        let body = Body { param: var, block };
        self.dynamic_loop(start, stop, step, body, span);
    }

    /// The device loop `for param in range(lower, upper, step)`.
    fn dynamic_loop(
        &mut self,
        lower: Option<&Expr>,
        upper: &Expr,
        step: Option<&Expr>,
        body: Body<'_>,
        span: Span,
    ) {
        let lo = match lower {
            Some(e) => self.register_src(e, "a device loop's lower bound"),
            None => Some(RegSrc::Imm(0)),
        };
        let hi = self.register_src(upper, "a device loop's upper bound");
        let step = self.device_step(step);
        let (Some(lo), Some(hi), Some(step)) = (lo, hi, step) else {
            return;
        };
        // The iteration register starts at the lower bound; an immediate upper bound is moved
        // into a register of its own.
        let Some(var) = self.new_register(span) else {
            return;
        };
        if !self.move_into(var, lo, span) {
            return;
        }
        let upper = match hi {
            RegSrc::Reg(r) => r,
            RegSrc::Imm(_) | RegSrc::None => {
                let Some(r) = self.new_register(span) else {
                    return;
                };
                if !self.move_into(r, hi, span) {
                    return;
                }
                r
            }
        };
        self.device_loop(LoopKind::Dynamic { var, upper, step }, var, body, span);
    }

    /// `while_loop(init, body)`: while register `init` is nonzero, `init = body(init)`.
    pub(in super::super) fn while_loop(&mut self, args: &[Arg], span: Span) -> Value {
        let Some(a) = self.args("while_loop", args, &["init", "body_fun"], 2, span) else {
            return Value::Poison;
        };
        let Some(cond) = self.register_arg(a[0].expect("required"), "`while_loop`'s `init`") else {
            return Value::Poison;
        };
        let Some(body) = self.closure_body(a[1].expect("required"), "while_loop") else {
            return Value::Poison;
        };
        if body.block.tail.is_none() {
            self.error(
                body.block
                    .stmts
                    .last()
                    .map_or(span, |_| a[1].map_or(span, Expr::span)),
                "`while_loop`'s body returns the next condition register: end it with the register (`|r| { ..; r }`)",
            );
            return Value::Poison;
        }
        self.device_loop(LoopKind::While { cond }, cond, body, span);
        Value::Unit
    }

    /// Emits the device loop `kind` around `body`, its parameter bound to register `param`;
    /// a `while_loop`'s body tail is the next condition register.
    fn device_loop(&mut self, kind: LoopKind, param: RegId, body: Body<'_>, span: Span) {
        if self.loops.len() == nki_lang::MAX_LOOP_DEPTH {
            self.error(
                span,
                format!("loops nest at most {} deep", nki_lang::MAX_LOOP_DEPTH),
            );
            return;
        }
        if !self.predicate.is_empty() {
            self.error(
                span,
                "a device loop cannot be inside an `if` on loop indices: its instructions run whole",
            );
            return;
        }
        let name = body
            .param
            .map_or_else(|| "_".to_string(), ToString::to_string);
        // A device loop's static trip is 1: no index uses its variable.
        let begin = self.open_loop(&name, kind, Extent::Fixed(1), span);
        if body.param.is_some() {
            self.bind(&name, Value::Reg(param));
        }
        self.block(body.block);
        if let LoopKind::While { cond } = kind
            && let Some(tail) = &body.block.tail
        {
            // The next condition: the register the body returns.
            match self.register_arg(tail, "`while_loop`'s body's result") {
                Some(r) if r != cond => {
                    self.move_into(cond, RegSrc::Reg(r), tail.span());
                }
                Some(_) | None => {}
            }
        } else if let Some(tail) = &body.block.tail {
            self.error(
                tail.span(),
                "a device loop body has no value: end this expression with `;`",
            );
        }
        self.close_loop(begin, span);
    }
}
