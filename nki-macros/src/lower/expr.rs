//! Evaluation of kernel-body expressions to compile-time values.

use crate::span::Span;
use nki_lang::{ActFn, Alu, Cmp, DType, Dim, Engine, MAX_TILE_RANK};

use super::Lowerer;
use super::call::Dest;
use super::value::{Buffer, Cond, Hbm, Idx, IdxError, Value};
use crate::parse::model::{Arg, BinOp, Expr};

const AXES: [&str; MAX_TILE_RANK] = ["p", "x", "y", "z", "w"];

/// The comparison an operator is, if it is one.
fn comparison(op: BinOp) -> Option<Cmp> {
    Some(match op {
        BinOp::Lt => Cmp::Lt,
        BinOp::Le => Cmp::Le,
        BinOp::Gt => Cmp::Gt,
        BinOp::Ge => Cmp::Ge,
        BinOp::Eq => Cmp::Eq,
        BinOp::Ne => Cmp::Ne,
        _ => return None,
    })
}

impl Lowerer<'_> {
    /// Evaluates an expression that creates nothing new (or a temporary).
    pub(super) fn eval(&mut self, e: &Expr) -> Value {
        match e {
            Expr::Int(v, _) => Value::Int(*v),
            Expr::Float(v, _) => Value::Float(*v),
            Expr::Bool(b, _) => Value::Bool(*b),
            Expr::Str(_, span) => self.error(
                *span,
                "a string literal is a dimension name of `rearrange`'s patterns (`t.rearrange((\"p\", (\"h\", \"w\")), (\"p\", \"w\", \"h\"), [(\"h\", 4)])`), not a value",
            ),
            Expr::Name(id) => self.name(&id.to_string(), id.span().into()),
            Expr::Neg(..) | Expr::Not(..) | Expr::Binary { .. } => self.produce(e, Dest::New(None)),
            Expr::Field { base, field, span } => {
                let b = self.eval(base);
                self.field(b, &field.to_string(), *span)
            }
            Expr::Method { method, .. } if method == "broadcast_to" => self.produce(e, Dest::New(None)),
            Expr::Method { recv, method, args, span } if method == "min" || method == "max" => {
                self.min_max_method(recv, method == "max", args, *span)
            }
            Expr::Method { recv, method, args, span } => {
                let r = self.eval(recv);
                let m = method.to_string();
                if let Value::Buffer(b) = &r {
                    match m.as_str() {
                        "mod_alloc" => return self.mod_alloc(*b, args, *span),
                        "auto_alloc" => return self.auto_alloc(*b, args, *span),
                        "alloc" => {
                            return self.error(
                                *span,
                                "NKI's `alloc(func)` places each block of a tile by a Python function, which a kernel here cannot contain: give the placement with `mod_alloc(...)`, or none (`sbuf`, `auto_alloc()`)",
                            );
                        }
                        _ => {}
                    }
                }
                if let (Value::Tensor(h), "reshape") = (&r, m.as_str()) {
                    if !h.prefix.is_empty() {
                        return self.error(*span, "reshape the whole tensor, then index the reshape: a tensor indexed on its leading axes (`q[b, h]`) is not reshaped");
                    }
                    return self.reshape(h.clone(), args, *span);
                }
                // NKI 0.6's views of a tile, an HBM tensor or an access.
                if super::views::is_view_method(&m)
                    && matches!(r, Value::Tile(_) | Value::Blocks { .. } | Value::Access(_) | Value::Tensor(_))
                {
                    return self.view_method(r, &m, args, *span);
                }
                if !AXES.contains(&m.as_str()) {
                    let hint = match m.as_str() {
                        "reshape" => ": reshape the HBM tensor it comes from, or index the tile with the shape you need (`x[[i_p, i_f]]` over an `mgrid!`)",
                        _ => "",
                    };
                    return match r {
                        Value::Poison => Value::Poison,
                        other => self.error(*span, format!("no method `{m}` on {}{hint}", other.describe())),
                    };
                }
                if !args.is_empty() {
                    return self.error(*span, format!("`.{m}()` takes no arguments"));
                }
                match (r, AXES.iter().position(|a| *a == m)) {
                    (Value::Range(start, size), Some(axis)) => Value::Index(Idx::grid_axis(axis, start, size)),
                    (Value::Poison, _) => Value::Poison,
                    (Value::Range(..), None) => self.error(method.span().into(), "pick the arange's axis with `.p()`, `.x()`, `.y()`, `.z()` or `.w()`"),
                    (other, _) => self.error(*span, format!("no method `{m}` on {}", other.describe())),
                }
            }
            Expr::Index { base, indices, span } => {
                let b = self.eval(base);
                // The index grid itself as the index (NKI's `x[g]` for `g = nl.mgrid[...]`):
                // its axes, one per tensor axis.
                if let [Expr::Name(g)] = indices.as_slice()
                    && let Some(Value::Grid(axes)) = self.lookup(&g.to_string())
                {
                    let n = axes.len();
                    let fields: Vec<Expr> = AXES[..n.min(AXES.len())]
                        .iter()
                        .map(|f| Expr::Field {
                            base: Box::new(Expr::Name(g.clone())),
                            field: syn::Ident::new(f, g.span()),
                            span: *span,
                        })
                        .collect();
                    if fields.len() == n {
                        return self.index(b, &fields, *span);
                    }
                }
                self.index(b, indices, *span)
            }
            Expr::Mgrid(ranges, span) => self.mgrid(ranges, *span),
            Expr::Closure { span, .. } => self.error(
                *span,
                "a closure is a device loop's body: `fori_loop(lower, upper, |i| { .. })`, `while_loop(reg, |r| { ..; r })`",
            ),
            Expr::If {
                cond,
                then,
                els,
                ..
            } => match self.eval(cond) {
                Value::Bool(true) => self.branch(then),
                Value::Bool(false) => els.as_ref().map_or(Value::Unit, |b| self.branch(b)),
                Value::Cond(conds) => self.predicated(&conds, then, els.as_deref(), cond.span()),
                Value::Poison => Value::Poison,
                other => self.error(
                    cond.span(),
                    format!(
                        "an `if` condition must be known at compile time (a meta-parameter, a constant comparison) or compare loop indices (`if i < 2`), not {}: a kernel's control flow cannot depend on runtime values (err_dynamic_control_flow_not_supported)",
                        other.describe()
                    ),
                ),
            },
            Expr::Call { .. } | Expr::Named { .. } => self.produce(e, Dest::New(None)),
            Expr::Range { span, .. } => self.error(*span, "a range can only appear inside an index `t[[a..b, ..]]` or `mgrid!`"),
            Expr::Array(_, span) => self.error(*span, "an array is a shape: it can only be the first argument of `ndarray`, `zeros`, `full` or `ones`"),
            Expr::Tuple(items, span) => self.tuple_shape(items, *span),
            Expr::Error(_) => Value::Poison,
        }
    }

    /// Rust's `a.min(b)` / `a.max(b)` on compile-time numbers: Python's `min(a, b)` /
    /// `max(a, b)` (the first least or greatest).
    fn min_max_method(&mut self, recv: &Expr, is_max: bool, args: &[Arg], span: Span) -> Value {
        let name = if is_max { "max" } else { "min" };
        let r = self.eval(recv);
        match r {
            Value::Poison => Value::Poison,
            Value::Int(_) | Value::Float(_) | Value::Sym { .. } => {
                if args.len() != 1 || args[0].name.is_some() {
                    return self.error(
                        span,
                        format!("`a.{name}(b)` takes one positional argument (Python's `{name}(a, b, ...)` takes any number)"),
                    );
                }
                let all = [
                    Arg {
                        name: None,
                        value: recv.clone(),
                    },
                    args[0].clone(),
                ];
                self.python_min_max(is_max, r, &all)
            }
            other => self.error(
                span,
                format!(
                    "no method `{name}` on {}: `a.{name}(b)` compares compile-time numbers; a reduction of a tile is `{name}(x, axis)`, the elementwise {} of tiles `{}(x, y)`",
                    other.describe(),
                    if is_max { "maximum" } else { "minimum" },
                    if is_max { "maximum" } else { "minimum" },
                ),
            ),
        }
    }

    fn name(&mut self, name: &str, span: Span) -> Value {
        if let Some(v) = self.lookup(name) {
            return v.clone();
        }
        if let Some(d) = DType::from_name(name) {
            return Value::DType(d);
        }
        if let Some(b) = Buffer::from_name(name) {
            return Value::Buffer(b);
        }
        if let Some(s) = self.buf.symbols.iter().position(|s| s == name) {
            return Value::Sym {
                // Past 255 symbols: an index the verifier refuses (a kernel has at most 8).
                sym: u8::try_from(s).unwrap_or(u8::MAX),
                add: 0,
                div: 1,
            };
        }
        let code = Alu::from_name(name).is_some()
            || ActFn::from_name(name).is_some()
            || Engine::from_name(name).is_some()
            || name == "tile_size"
            || name == "nc_version";
        if code {
            return Value::Code(name.to_string());
        }
        if self.arrays.contains_key(name) {
            return self.error(
                span,
                format!("`{name}` is an array: it is data for `shared_constant({name})`, which makes it an HBM tensor"),
            );
        }
        self.error(span, format!("cannot find `{name}` in this kernel"))
    }

    /// Evaluates an integer constant.
    pub(super) fn int(&mut self, e: &Expr, what: &str) -> Option<i64> {
        match self.eval(e) {
            Value::Int(n) => Some(n),
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "{what} must be a compile-time integer, not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// Evaluates a loop-affine index (no grid terms): a tile view offset, a slice bound.
    pub(super) fn as_index(&mut self, v: Value, span: Span) -> Option<Idx> {
        match v {
            Value::Int(n) => Some(Idx::from_affine(nki_lang::Affine::constant(n))),
            Value::Index(i) => Some(i),
            Value::Poison => None,
            other => {
                self.error(
                    span,
                    format!("expected an index expression, found {}", other.describe()),
                );
                None
            }
        }
    }

    /// An operator on compile-time values (integers, indices, comparisons); operators on
    /// tiles are [`Lowerer::operator`]'s.
    pub(super) fn arith(&mut self, op: BinOp, a: Value, b: Value, span: Span) -> Value {
        use Value::*;
        if let Some(cmp) = comparison(op) {
            return self.compare(cmp, a, b, span);
        }
        match (op, a, b) {
            (_, Poison, _) | (_, _, Poison) => Poison,
            (BinOp::BitAnd, Cond(mut x), Cond(y)) => {
                x.extend(y);
                Cond(x)
            }
            (BinOp::BitAnd, Bool(x), Bool(y)) => Bool(x & y),
            // A condition known at compile time joined with one on indices (NKI's
            // `(i < n_tile_q) & causal_mask` where `causal_mask` may be `True`).
            (BinOp::BitAnd, Cond(c), Bool(true)) | (BinOp::BitAnd, Bool(true), Cond(c)) => Cond(c),
            (BinOp::BitAnd, Cond(_), Bool(false)) | (BinOp::BitAnd, Bool(false), Cond(_)) => Bool(false),
            (BinOp::BitOr, Bool(x), Bool(y)) => Bool(x | y),
            (BinOp::BitXor, Bool(x), Bool(y)) => Bool(x ^ y),
            (BinOp::BitOr | BinOp::BitXor, Cond(_), _) | (BinOp::BitOr | BinOp::BitXor, _, Cond(_)) => self.error(
                span,
                "a mask joins conditions with `&`: any other combination is not a box (err_unsupported_expression_in_mask)",
            ),
            (BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor, Int(x), Int(y)) => Int(match op {
                BinOp::BitAnd => x & y,
                BinOp::BitOr => x | y,
                _ => x ^ y,
            }),
            (BinOp::Shl | BinOp::Shr, Int(x), Int(y)) => {
                let r = u32::try_from(y).ok().and_then(|y| match op {
                    BinOp::Shl => x.checked_shl(y).filter(|r| r >> y == x),
                    _ => x.checked_shr(y),
                });
                match r {
                    Some(v) => Int(v),
                    None => self.error(span, "integer overflow in a compile-time expression"),
                }
            }
            (BinOp::Add | BinOp::Sub | BinOp::Mul, Int(x), Int(y)) => {
                let r = match op {
                    BinOp::Add => x.checked_add(y),
                    BinOp::Sub => x.checked_sub(y),
                    _ => x.checked_mul(y),
                };
                match r {
                    Some(v) => Int(v),
                    None => self.error(span, "integer overflow in a compile-time expression"),
                }
            }
            (_, x @ (Int(_) | Float(_)), y @ (Int(_) | Float(_))) if matches!(x, Float(_)) || matches!(y, Float(_)) => {
                self.float_arith(op, number(&x), number(&y), span)
            }
            (_, Float(_), Sym { .. }) | (_, Sym { .. }, Float(_)) => self.error(
                span,
                "a symbolic dimension is known only at launch, so a float computed from it is not a compile-time number: make the dimension a meta-parameter (`const D: usize`, or a literal in the signature)",
            ),
            (BinOp::Div | BinOp::Rem, Int(_), Int(0)) => self.error(span, "division by zero"),
            (BinOp::Div | BinOp::Rem, Int(x), Int(y)) => match python_div_mod(x, y) {
                Some((q, r)) => Int(if op == BinOp::Div { q } else { r }),
                None => self.error(span, "integer overflow in a compile-time expression"),
            },
            (BinOp::Div, Sym { sym, add, div }, Int(y)) if y > 0 => match div.checked_mul(y.unsigned_abs()) {
                Some(div) => Sym { sym, add, div },
                None => self.error(span, "integer overflow in a compile-time expression"),
            },
            (BinOp::Add, Sym { sym, add, div: 1 }, Int(k)) | (BinOp::Add, Int(k), Sym { sym, add, div: 1 }) if k >= 0 => {
                match add.checked_add(k.unsigned_abs()) {
                    Some(add) => Sym { sym, add, div: 1 },
                    None => self.error(span, "integer overflow in a compile-time expression"),
                }
            }
            // `(N + TILE - 1) / TILE`: a literal subtracted from the addend.
            (BinOp::Sub, Sym { sym, add, div: 1 }, Int(k)) if k >= 0 && add >= k.unsigned_abs() => {
                Sym { sym, add: add.saturating_sub(k.unsigned_abs()), div: 1 }
            }
            // `H - (K - 1)`: below the dimension, a mask's upper side.
            (BinOp::Sub, Sym { sym, add, div: 1 }, Int(k)) if k > 0 => SymMinus { sym, sub: k.unsigned_abs().saturating_sub(add) },
            (BinOp::Sub, SymMinus { sym, sub }, Int(k)) if k >= 0 => match sub.checked_add(k.unsigned_abs()) {
                Some(sub) => SymMinus { sym, sub },
                None => self.error(span, "integer overflow in a compile-time expression"),
            },
            (BinOp::Add, SymMinus { sym, sub }, Int(k)) | (BinOp::Add, Int(k), SymMinus { sym, sub }) if k >= 0 => {
                let k = k.unsigned_abs();
                match k.checked_sub(sub) {
                    Some(add) => Sym { sym, add, div: 1 },
                    None => SymMinus { sym, sub: sub.saturating_sub(k) },
                }
            }
            (_, SymMinus { .. }, _) | (_, _, SymMinus { .. }) => self.error(
                span,
                "a symbolic dimension minus a literal (`H - 2`) bounds an index in a mask from above (`i_h < H - 2`); it is no trip count or shape",
            ),
            (BinOp::Mul, Sym { sym: a, add: 0, div: 1 }, Sym { sym: b, add: 0, div: 1 }) => self.product(1, &[a, b], span),
            (BinOp::Mul, Sym { sym, add: 0, div: 1 }, Int(k)) | (BinOp::Mul, Int(k), Sym { sym, add: 0, div: 1 }) if k > 0 => {
                self.product(k.unsigned_abs(), &[sym], span)
            }
            // A quotient or sum of symbols (`h / k_h`, `H + W`), a literal over a symbol
            // (`1024 / N`): a symbol of its own.
            (BinOp::Div, x @ Sym { .. }, y @ Sym { .. }) | (BinOp::Add, x @ Sym { .. }, y @ Sym { .. }) => {
                self.symbol_arith(op, x, y, span)
            }
            (BinOp::Div, x @ Int(k), y @ Sym { .. }) if k >= 0 => self.symbol_arith(op, x, y, span),
            // A product with a quotient or sum (`(N / 128) * 2`, `(H + 2) * W`): the quotient
            // or sum is a symbol of its own first.
            (BinOp::Mul, Sym { sym: a, add: xa, div: xd }, Sym { sym: b, add: ya, div: yd }) => {
                let (Ok(xa), Ok(ya)) = (i64::try_from(xa), i64::try_from(ya)) else {
                    return self.error(span, "integer overflow in a compile-time expression");
                };
                match (self.as_symbol(a, xa, xd, span), self.as_symbol(b, ya, yd, span)) {
                    (Some(a), Some(b)) => self.product(1, &[a, b], span),
                    _ => Poison,
                }
            }
            (BinOp::Mul, Sym { sym, add, div }, Int(k)) | (BinOp::Mul, Int(k), Sym { sym, add, div }) if k > 0 => {
                let Ok(add) = i64::try_from(add) else {
                    return self.error(span, "integer overflow in a compile-time expression");
                };
                match self.as_symbol(sym, add, div, span) {
                    Some(s) => self.product(k.unsigned_abs(), &[s], span),
                    None => Poison,
                }
            }
            // A literal added to a quotient (`K / 128 + 1`): the quotient is a symbol first.
            (BinOp::Add, Sym { sym, add, div }, Int(k)) | (BinOp::Add, Int(k), Sym { sym, add, div }) if k >= 0 && div > 1 => {
                let Ok(add) = i64::try_from(add) else {
                    return self.error(span, "integer overflow in a compile-time expression");
                };
                match self.as_symbol(sym, add, div, span) {
                    Some(s) => Sym { sym: s, add: k.unsigned_abs(), div: 1 },
                    None => Poison,
                }
            }
            (BinOp::Mul, Index(_), Sym { .. }) | (BinOp::Mul, Sym { .. }, Index(_)) => self.error(
                span,
                "an index is affine with compile-time coefficients: a loop variable or program id times a symbolic dimension (`g * (h / k_h)`) is not; make the dimensions meta-parameters (`const H: usize`), or view the tensor with the dimension as an axis of its own (`q.reshape([KH, H / KH, D])`, indexed `[g, i, ...]`)",
            ),
            (_, Sym { .. }, _) | (_, _, Sym { .. }) => self.error(
                span,
                "symbolic dimensions combine by `+`, `*` and `/` (Python's `//`) with each other and non-negative literals (`K / 128`, `(K + 127) / 128`, `h / k_h`, `N * C`, `H + 2`) into a trip count or a shape, or one bounds an index in a mask from above (`k * 128 + i_p < K`: keep the other terms on the left); no other operator applies (make the dimension a meta-parameter for other arithmetic)",
            ),
            (BinOp::Add | BinOp::Sub, x @ (Int(_) | Index(_)), y @ (Int(_) | Index(_))) => {
                let k = if op == BinOp::Sub { -1 } else { 1 };
                let (Some(x), Some(y)) = (self.as_index(x, span), self.as_index(y, span)) else { return Poison };
                match x.add_scaled(&y, k) {
                    Ok(i) => Index(i),
                    Err(IdxError::GridSizes(axis)) => self.error(span, format!("index grids of different sizes on axis {axis}")),
                    Err(IdxError::Overflow) => self.error(span, "integer overflow in an index expression"),
                }
            }
            (BinOp::Mul, Index(i), Int(k)) | (BinOp::Mul, Int(k), Index(i)) => match i.scale(k) {
                Some(i) => Index(i),
                None => self.error(span, "integer overflow in an index expression"),
            },
            (BinOp::Mul, Index(_), Index(_)) => self.error(span, "index expressions must be affine: a product of two indices is not"),
            (BinOp::Div | BinOp::Rem, Index(_), _) => self.error(span, "index expressions must be affine: `/` and `%` apply to integers only"),
            (_, x, y) => self.error(span, format!("cannot apply this operator to {} and {}", x.describe(), y.describe())),
        }
    }

    /// Python's arithmetic on two numbers, one of them a float (an integer converts to the
    /// nearest float first): `+ - * /` as f64, `%` floored as Python's (the result has the
    /// divisor's sign). A division by zero is an error, as Python's `ZeroDivisionError`.
    fn float_arith(&mut self, op: BinOp, x: f64, y: f64, span: Span) -> Value {
        match op {
            BinOp::Add => Value::Float(x + y),
            BinOp::Sub => Value::Float(x - y),
            BinOp::Mul => Value::Float(x * y),
            BinOp::Div | BinOp::Rem if y == 0.0 => self.error(span, "division by zero"),
            BinOp::Div => Value::Float(x / y),
            BinOp::Rem => {
                let r = x % y;
                Value::Float(if r != 0.0 && (r < 0.0) != (y < 0.0) {
                    r + y
                } else {
                    r
                })
            }
            BinOp::BitAnd
            | BinOp::BitOr
            | BinOp::BitXor
            | BinOp::Shl
            | BinOp::Shr
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::Eq
            | BinOp::Ne => self.error(
                span,
                format!("`{}` applies to integers, not to a float", op.symbol()),
            ),
        }
    }

    /// An activation function of a compile-time number, as Python's `math` computes it at trace
    /// time (`sqrt(D)` for `math.sqrt(d)`; `floor` and `ceil` give integers, `abs` keeps an
    /// integer an integer); `None` for a function without one. A domain error or an overflow is
    /// a compile error, as Python's `ValueError` / `OverflowError`.
    pub(super) fn math1(&mut self, name: &str, f: ActFn, x: Value, span: Span) -> Option<Value> {
        let v = number(&x);
        let float = |this: &mut Self, r: f64| {
            if r.is_finite() {
                Value::Float(r)
            } else {
                this.error(span, format!("`{name}` of {v} overflows"))
            }
        };
        let domain =
            |this: &mut Self| this.error(span, format!("`{name}` of {v}: a math domain error"));
        Some(if f == ActFn::Sqrt {
            if v < 0.0 {
                domain(self)
            } else {
                Value::Float(v.sqrt())
            }
        } else if f == ActFn::Exp {
            float(self, v.exp())
        } else if f == ActFn::Log {
            if v <= 0.0 {
                domain(self)
            } else {
                Value::Float(v.ln())
            }
        } else if f == ActFn::Abs {
            match x {
                Value::Int(n) => match n.checked_abs() {
                    Some(a) => Value::Int(a),
                    None => self.error(span, "integer overflow in a compile-time expression"),
                },
                Value::Float(_) => Value::Float(v.abs()),
                other => other,
            }
        } else if f == ActFn::Floor || f == ActFn::Ceil {
            match x {
                Value::Int(n) => Value::Int(n),
                Value::Float(_) => {
                    let r = if f == ActFn::Floor {
                        v.floor()
                    } else {
                        v.ceil()
                    };
                    // In range of i64 (±2^63, exclusive above), the conversion is exact.
                    #[allow(clippy::cast_possible_truncation)]
                    let n = r as i64;
                    if (-2f64.powi(63)..2f64.powi(63)).contains(&r) {
                        Value::Int(n)
                    } else {
                        self.error(span, format!("`{name}` of {v} is not an integer"))
                    }
                }
                other => other,
            }
        } else {
            return None;
        })
    }

    /// A two-operand `nl` function of compile-time numbers at trace time: `power(a, b)` is
    /// Python's `a ** b` (an integer for integers and a non-negative integer exponent),
    /// `maximum` / `minimum` / `add` / `subtract` / `multiply` as on NumPy scalars, `divide`
    /// a true division; `None` for the others.
    pub(super) fn math2(
        &mut self,
        name: &str,
        alu: Alu,
        a: Value,
        b: Value,
        span: Span,
    ) -> Option<Value> {
        let (x, y) = (number(&a), number(&b));
        Some(if alu == Alu::Pow {
            match (&a, &b) {
                (Value::Int(m), Value::Int(e)) if *e >= 0 => {
                    match u32::try_from(*e).ok().and_then(|e| m.checked_pow(e)) {
                        Some(r) => Value::Int(r),
                        None => self.error(span, "integer overflow in a compile-time expression"),
                    }
                }
                _ if x == 0.0 && y < 0.0 => {
                    self.error(span, "division by zero (`power(0, negative)`)")
                }
                _ if x < 0.0 && y.fract() != 0.0 => self.error(
                    span,
                    format!(
                        "`{name}` of a negative number to a fractional power is not a real number"
                    ),
                ),
                _ => {
                    let r = x.powf(y);
                    if r.is_finite() {
                        Value::Float(r)
                    } else {
                        self.error(span, format!("`{name}({x}, {y})` overflows"))
                    }
                }
            }
        } else if alu == Alu::Max || alu == Alu::Min {
            let first = if alu == Alu::Max { x >= y } else { x <= y };
            if first { a } else { b }
        } else if alu == Alu::Add {
            self.arith(BinOp::Add, a, b, span)
        } else if alu == Alu::Subtract {
            self.arith(BinOp::Sub, a, b, span)
        } else if alu == Alu::Multiply {
            self.arith(BinOp::Mul, a, b, span)
        } else if alu == Alu::Divide {
            self.float_arith(BinOp::Div, x, y, span)
        } else {
            return None;
        })
    }

    /// `a cmp b` on compile-time values: a bool for two integers, else a condition on indices
    /// (a mask or predicate), with at most a symbolic dimension on the upper side.
    fn compare(&mut self, cmp: Cmp, a: Value, b: Value, span: Span) -> Value {
        use Value::*;
        match (a, b) {
            (Poison, _) | (_, Poison) => Poison,
            (Int(x), Int(y)) => Bool(match cmp {
                Cmp::Lt => x < y,
                Cmp::Le => x <= y,
                Cmp::Gt => x > y,
                Cmp::Ge => x >= y,
                Cmp::Eq => x == y,
                Cmp::Ne => x != y,
            }),
            // Python compares an integer with a float by value.
            (x @ (Int(_) | Float(_)), y @ (Int(_) | Float(_))) => {
                let (x, y) = (number(&x), number(&y));
                Bool(match cmp {
                    Cmp::Lt => x < y,
                    Cmp::Le => x <= y,
                    Cmp::Gt => x > y,
                    Cmp::Ge => x >= y,
                    Cmp::Eq => x == y,
                    Cmp::Ne => x != y,
                })
            }
            (x @ (Int(_) | Index(_)), s @ (Sym { .. } | SymMinus { .. })) => {
                self.against_symbol(cmp, x, s, span)
            }
            (s @ (Sym { .. } | SymMinus { .. }), y @ (Int(_) | Index(_))) => {
                let mirrored = match cmp {
                    Cmp::Gt => Cmp::Lt,
                    Cmp::Ge => Cmp::Le,
                    Cmp::Lt => Cmp::Gt,
                    Cmp::Le => Cmp::Ge,
                    c @ (Cmp::Eq | Cmp::Ne) => c,
                };
                self.against_symbol(mirrored, y, s, span)
            }
            (x @ (Int(_) | Index(_)), y @ (Int(_) | Index(_))) => self.cond(cmp, x, y, None, span),
            // A symbolic dimension equals itself (`x.shape[0] == y.shape[0]` of two tensors of
            // `N` rows); whether it equals another is known only at launch.
            (
                Sym {
                    sym: s,
                    add: a,
                    div: d,
                },
                Sym {
                    sym: t,
                    add: b,
                    div: e,
                },
            ) => {
                if (s, a, d) == (t, b, e) {
                    Bool(matches!(cmp, Cmp::Eq | Cmp::Le | Cmp::Ge))
                } else {
                    self.error(span, LAUNCH_ONLY)
                }
            }
            // Python's `==` of dtypes, bools and shapes (tuples, compared element by element).
            (DType(x), DType(y)) if matches!(cmp, Cmp::Eq | Cmp::Ne) => {
                Bool((x == y) == (cmp == Cmp::Eq))
            }
            (Bool(x), Bool(y)) if matches!(cmp, Cmp::Eq | Cmp::Ne) => {
                Bool((x == y) == (cmp == Cmp::Eq))
            }
            (Shape(x), Shape(y)) if matches!(cmp, Cmp::Eq | Cmp::Ne) => {
                match shapes_equal(&x, &y) {
                    Some(eq) => Bool(eq == (cmp == Cmp::Eq)),
                    None => self.error(span, LAUNCH_ONLY),
                }
            }
            (x, y) => self.error(
                span,
                format!("cannot compare {} and {}", x.describe(), y.describe()),
            ),
        }
    }

    /// `x cmp s` for an index or integer `x` and a symbolic side `s`: `S + a`, `S − c`, or
    /// `(S + a) / d` (NKI's `j + 1 < n_tiles` of `n_tiles = (N + 511) // 512`), as a condition
    /// on `S` alone. For an integer `x`, `x < ⌊(S + a)/d⌋` exactly when `d·x + d − a − 1 < S`,
    /// `x ≤ ⌊(S + a)/d⌋` when `d·x − a ≤ S`, `x > ⌊(S + a)/d⌋` when `d·x − a > S`, and
    /// `x ≥ ⌊(S + a)/d⌋` when `d·x + d − a > S`.
    fn against_symbol(&mut self, cmp: Cmp, x: Value, s: Value, span: Span) -> Value {
        const OVERFLOW: &str = "integer overflow in a compile-time expression";
        let (sym, add, div) = match s {
            Value::Sym { sym, add, div } => match i64::try_from(add) {
                Ok(a) => (sym, a, div),
                Err(_) => return self.error(span, OVERFLOW),
            },
            Value::SymMinus { sym, sub } => {
                match i64::try_from(sub).ok().and_then(i64::checked_neg) {
                    Some(a) => (sym, a, 1),
                    None => return self.error(span, OVERFLOW),
                }
            }
            _ => unreachable!("a symbolic side"),
        };
        if div == 1 {
            return self.cond(cmp, x, Value::Int(add), Some(sym), span);
        }
        let Ok(d) = i64::try_from(div) else {
            return self.error(span, OVERFLOW);
        };
        let (cmp, shift) = match cmp {
            Cmp::Lt => (Cmp::Lt, d.checked_sub(add).and_then(|v| v.checked_sub(1))),
            Cmp::Le => (Cmp::Le, add.checked_neg()),
            Cmp::Gt => (Cmp::Gt, add.checked_neg()),
            Cmp::Ge => (Cmp::Gt, d.checked_sub(add)),
            Cmp::Eq | Cmp::Ne => {
                return self.error(span, "a mask compares an index with a launch-time quotient (`(N + 511) / 512`) by `<`, `<=`, `>` or `>=`");
            }
        };
        let Some(shift) = shift else {
            return self.error(span, OVERFLOW);
        };
        let Some(x) = self.as_index(x, span) else {
            return Value::Poison;
        };
        let Some(scaled) = x.scale(d) else {
            return self.error(span, "integer overflow in an index expression");
        };
        // `d·x + shift cmp S`, as `(d·x) − (−shift) cmp S`.
        let Some(neg) = shift.checked_neg() else {
            return self.error(span, OVERFLOW);
        };
        self.cond(cmp, Value::Index(scaled), Value::Int(neg), Some(sym), span)
    }

    /// The condition `a − b cmp S` (`S` the symbol `sym`, or 0).
    fn cond(&mut self, cmp: Cmp, a: Value, b: Value, sym: Option<u8>, span: Span) -> Value {
        let (Some(a), Some(b)) = (self.as_index(a, span), self.as_index(b, span)) else {
            return Value::Poison;
        };
        match a.add_scaled(&b, -1) {
            Ok(expr) => Value::Cond(vec![Cond { expr, cmp, sym }]),
            Err(IdxError::GridSizes(axis)) => self.error(
                span,
                format!("index grids of different sizes on axis {axis}"),
            ),
            Err(IdxError::Overflow) => self.error(span, "integer overflow in an index expression"),
        }
    }

    fn field(&mut self, base: Value, field: &str, span: Span) -> Value {
        match (&base, field) {
            (Value::Poison, _) => Value::Poison,
            (Value::Grid(axes), f) if AXES.contains(&f) => {
                let j = AXES.iter().position(|a| *a == f).expect("listed");
                match axes.get(j) {
                    Some(i) => Value::Index(*i),
                    None => self.error(span, format!("the grid has {} axes", axes.len())),
                }
            }
            // NKI's `nisa.nc_version`: the NeuronCore generations, compared with
            // `get_nc_version()`.
            (Value::Code(c), f) if c == "nc_version" => match f {
                "gen2" => Value::Int(2),
                "gen3" => Value::Int(3),
                "gen4" => Value::Int(4),
                _ => self.error(
                    span,
                    format!("`nc_version` has no `{f}`: it has gen2 (Trn1, Inf2), gen3 (Trn2) and gen4 (Trn3)"),
                ),
            },
            // NKI's `nl.tile_size`: the target's tile limits, from nki-lang's one definition.
            (Value::Code(c), f) if c == "tile_size" => {
                match self.buf.target.tile_size(f).map(i64::try_from) {
                    Some(Ok(n)) => Value::Int(n),
                    _ => self.error(
                        span,
                        format!(
                            "`tile_size` has no `{f}`: it has {}",
                            nki_lang::target::TILE_SIZES.join(", ")
                        ),
                    ),
                }
            }
            // NKI's `nl.fp32.min`; every dtype's finite range (`f32::MIN` parses to this too).
            (Value::DType(d), "min" | "max") => {
                let v = if field == "min" { d.min_value() } else { d.max_value() };
                match v {
                    Some(v) => limit(*d, v),
                    None => self.error(span, format!("`{}` has no `{field}`: it is not a number type", d.name())),
                }
            }
            (Value::Info(d), f) => {
                let v = match f {
                    "min" => d.min_value(),
                    "max" => d.max_value(),
                    "eps" => d.epsilon(),
                    "tiny" | "smallest_normal" => d.smallest_normal(),
                    "bits" => Some(f64::from(d.size().saturating_mul(8))),
                    "dtype" => return Value::DType(*d),
                    _ => None,
                };
                match v {
                    Some(v) if f == "bits" => limit(DType::I32, v),
                    Some(v) => limit(*d, v),
                    None => {
                        let has = if d.is_float() { "min, max, eps, tiny, smallest_normal, bits, dtype" } else { "min, max, bits, dtype" };
                        self.error(span, format!("the limits of `{}` have no `{f}`: they have {has}", d.name()))
                    }
                }
            }
            // NKI's `x.shape`: a tensor's dimensions as declared or reshaped (symbolic ones
            // stay symbolic), a tile's or an access's tile shape.
            (Value::Tensor(h), "shape") => Value::Shape(match h.reshape {
                Some(r) => self.buf.reshapes[r].shape.clone(),
                None => self.tensors[h.tensor].shape.clone(),
            }),
            (Value::Access(a), "shape") => Value::Shape(fixed_dims(&a.shape)),
            (Value::Tile(v), "shape") => Value::Shape(fixed_dims(&v.shape)),
            (Value::Tensor(h), "dtype") => Value::DType(self.tensors[h.tensor].dtype),
            (Value::Access(a), "dtype") => Value::DType(self.tensors[a.tensor].dtype),
            (Value::Tile(v) | Value::Blocks { view: v, .. }, "dtype") => {
                Value::DType(v.dtype_of(self.buf.tiles[v.tile as usize].dtype))
            }
            _ => self.error(span, format!("no field `{field}` on {}", base.describe())),
        }
    }

    /// The product of `literal` and the symbols `syms` (`N * C`, `64 * N`): a symbol of the
    /// program's table named by its factors ([`nki_lang::product`]), bound at launch.
    fn product(&mut self, literal: u64, syms: &[u8], span: Span) -> Value {
        let names: Vec<&str> = syms
            .iter()
            .filter_map(|&s| self.buf.symbols.get(usize::from(s)).map(String::as_str))
            .collect();
        let Some(name) = nki_lang::product::product_name(literal, &names) else {
            return self.error(span, "integer overflow in a compile-time expression");
        };
        self.derived(name, span)
    }

    /// The symbol of the program's table called `name` (a product, quotient or sum of
    /// symbols, [`nki_lang::derived`]), added if it is new.
    pub(super) fn derived(&mut self, name: String, span: Span) -> Value {
        match self.derived_symbol(name, span) {
            Some(sym) => Value::Sym {
                sym,
                add: 0,
                div: 1,
            },
            None => Value::Poison,
        }
    }

    /// The index of the symbol called `name`, added to the program's table if it is new;
    /// `None` (an error reported) when the table is full.
    fn derived_symbol(&mut self, name: String, span: Span) -> Option<u8> {
        let sym = match self.buf.symbols.iter().position(|s| *s == name) {
            Some(s) => s,
            None if self.buf.symbols.len() < nki_lang::MAX_SYMBOLS => {
                self.buf.symbols.push(name);
                self.buf.symbols.len().saturating_sub(1)
            }
            None => {
                self.error(span, format!("a kernel has at most {} symbolic dimensions, counting products, quotients and sums such as `{name}`", nki_lang::MAX_SYMBOLS));
                return None;
            }
        };
        // sym < MAX_SYMBOLS (8).
        Some(u8::try_from(sym).unwrap_or(u8::MAX))
    }

    /// The symbol whose value is `(symbols[sym] + add) / div`: `sym` itself when `add` is 0
    /// and `div` 1, else a derived symbol named by the expression (`N / 128`, `H + 2`).
    pub(super) fn as_symbol(&mut self, sym: u8, add: i64, div: u64, span: Span) -> Option<u8> {
        if add == 0 && div == 1 {
            return Some(sym);
        }
        let name = self.buf.symbols.get(usize::from(sym))?.clone();
        let name = nki_lang::derived::offset_quotient_name(&name, add, div);
        self.derived_symbol(name, span)
    }

    /// `a / b` (Python's `a // b`) or `a + b` of two symbolic values (each `(S + add) / div`)
    /// or of a literal and one: a derived symbol ([`nki_lang::derived`]) bound at launch.
    fn symbol_arith(&mut self, op: BinOp, a: Value, b: Value, span: Span) -> Value {
        let name = |this: &mut Self, v: Value| -> Option<String> {
            match v {
                Value::Int(n) => Some(n.to_string()),
                Value::Sym { sym, add, div } => {
                    let add = i64::try_from(add).ok()?;
                    let s = this.as_symbol(sym, add, div, span)?;
                    this.buf.symbols.get(usize::from(s)).cloned()
                }
                _ => None,
            }
        };
        let (Some(a), Some(b)) = (name(self, a), name(self, b)) else {
            return Value::Poison;
        };
        let name = if op == BinOp::Div {
            nki_lang::derived::quotient_name(&a, &b)
        } else {
            nki_lang::derived::sum_name(&a, &b)
        };
        self.derived(name, span)
    }

    /// `tensor.reshape([d0, d1, ...])` (also `reshape((d0, d1))` and `reshape(d0, d1)`): the
    /// tensor's elements, in the same row-major order, under dimensions that are positive
    /// integers or the kernel's symbolic dimensions.
    fn reshape(&mut self, h: Hbm, args: &[crate::parse::model::Arg], span: Span) -> Value {
        const WHAT: &str = "a reshape's dimension is a positive integer, one of the kernel's symbolic dimensions (`N`) or a product, quotient or sum of them and literals (`N * C`, `N / 128`, `H + 2`)";
        if let Some(a) = args.iter().find(|a| a.name.is_some()) {
            return self.error(a.value.span(), "`reshape` takes the new dimensions only");
        }
        let items: Vec<&Expr> = match args {
            [a] => match &a.value {
                Expr::Array(items, _) | Expr::Tuple(items, _) => items.iter().collect(),
                e => vec![e],
            },
            _ => args.iter().map(|a| &a.value).collect(),
        };
        // One name bound to a shape (`x.reshape(shape_2d)`, `y.reshape(x.shape)`): its dims.
        let mut values: Vec<(Value, Span)> =
            items.iter().map(|e| (self.eval(e), e.span())).collect();
        if let [(Value::Shape(dims), at)] = values.as_slice() {
            let at = *at;
            values = dims.iter().map(|&d| (dim_value(d), at)).collect();
        }
        if values.is_empty() || values.len() > nki_lang::MAX_TENSOR_RANK {
            return self.error(span, "a reshape has 1 to 6 dimensions");
        }
        let mut shape = Vec::new();
        for (value, at) in values {
            match value {
                Value::Int(n) if n > 0 => shape.push(Dim::Fixed(n.unsigned_abs())),
                // A quotient or sum (`N / 128`, `H + 2`): a symbol of its own, bound at launch;
                // the launch checks that the element count still matches.
                Value::Sym { sym, add, div } => {
                    let Ok(add) = i64::try_from(add) else {
                        return self.error(at, "integer overflow in a compile-time expression");
                    };
                    match self.as_symbol(sym, add, div, at) {
                        Some(s) => shape.push(Dim::Sym(s)),
                        None => return Value::Poison,
                    }
                }
                Value::Poison => return Value::Poison,
                Value::SymMinus { .. } => {
                    return self.error(at, format!("{WHAT}, not a symbolic dimension minus a literal (`H - 2`): reshape with the whole dimension and index past the part you skip, or make the dimension a meta-parameter"));
                }
                other => return self.error(at, format!("{WHAT}, not {}", other.describe())),
            }
        }
        let (from, tensor) = match h.reshape {
            Some(r) => (self.buf.reshapes[r].shape.clone(), &self.tensors[h.tensor]),
            None => (
                self.tensors[h.tensor].shape.clone(),
                &self.tensors[h.tensor],
            ),
        };
        let symbols = &self.buf.symbols;
        let describe = |dims: &[Dim]| super::fmt_dims(dims, symbols);
        let name = format!("{}.reshape([{}])", tensor.name, describe(&shape));
        let kept =
            nki_lang::rules::check_reshape(&name, &tensor.name, &from, &shape, symbols, &describe);
        if let Err(v) = kept {
            return self.error(span, crate::errors::message(&v));
        }
        let Ok(reshape) = u8::try_from(self.buf.reshapes.len()) else {
            return self.error(span, "a kernel has at most 255 reshapes");
        };
        self.buf.reshapes.push(nki_lang::ReshapeBuf {
            name,
            // At most MAX_TENSORS (16) tensors; remapped with them when outputs are ordered.
            tensor: u8::try_from(h.tensor).unwrap_or(u8::MAX),
            shape,
        });
        Value::Tensor(Hbm {
            reshape: Some(usize::from(reshape)),
            ..Hbm::whole(h.tensor)
        })
    }

    /// NKI's direct allocation, `sbuf.mod_alloc(base_addr, num_free_tiles)` and
    /// `psum.mod_alloc(base_bank, num_bank_tiles)`: the buffer itself. The placement is checked
    /// (non-negative integers) and not followed: every tile gets memory of its own here, as
    /// NKI's compiler gives an automatically allocated one (docs/language.md).
    fn mod_alloc(&mut self, b: Buffer, args: &[Arg], span: Span) -> Value {
        let params: &[&str] = match b {
            Buffer::Sbuf => &["base_addr", "num_free_tiles", "base_partition"],
            Buffer::Psum => &["base_bank", "num_bank_tiles", "base_addr"],
            Buffer::SharedHbm | Buffer::PrivateHbm => {
                return self.error(
                    span,
                    "`mod_alloc` places a tile in SBUF or PSUM, not in HBM",
                );
            }
        };
        let Some(a) = self.args("mod_alloc", args, params, 0, span) else {
            return Value::Poison;
        };
        for e in a.into_iter().flatten() {
            let items: Vec<&Expr> = match e {
                Expr::Array(items, _) | Expr::Tuple(items, _) => items.iter().collect(),
                e => vec![e],
            };
            for item in items {
                match self.eval(item) {
                    Value::Int(n) if n >= 0 => {}
                    Value::Poison => return Value::Poison,
                    other => {
                        return self.error(
                            item.span(),
                            format!(
                                "a placement is a non-negative compile-time integer (or a tuple of them), not {}",
                                other.describe()
                            ),
                        );
                    }
                }
            }
        }
        Value::Buffer(b)
    }

    /// NKI's `sbuf.auto_alloc()` and `psum.auto_alloc()`: the buffer, allocated as every tile
    /// without a placement is.
    fn auto_alloc(&mut self, b: Buffer, args: &[Arg], span: Span) -> Value {
        if matches!(b, Buffer::SharedHbm | Buffer::PrivateHbm) {
            return self.error(
                span,
                "`auto_alloc` allocates a tile in SBUF or PSUM, not in HBM",
            );
        }
        match self.args("auto_alloc", args, &[], 0, span) {
            Some(_) => Value::Buffer(b),
            None => Value::Poison,
        }
    }

    /// Python's `len(x.shape)`: the number of dimensions of a shape, an integer.
    pub(super) fn len(&mut self, args: &[Arg], span: Span) -> Value {
        let Some(a) = self.args("len", args, &["obj"], 1, span) else {
            return Value::Poison;
        };
        let e = a[0].expect("required");
        match self.eval(e) {
            Value::Shape(dims) => Value::Int(i64::try_from(dims.len()).unwrap_or(i64::MAX)),
            Value::Poison => Value::Poison,
            other => self.error(
                e.span(),
                format!(
                    "`len` takes a shape (`len(x.shape)`, the number of dimensions), not {}",
                    other.describe()
                ),
            ),
        }
    }

    /// `finfo(dtype)` (a float type's limits) or `iinfo(dtype)` (an integer type's), as NumPy's.
    pub(super) fn info(
        &mut self,
        func: &str,
        args: &[crate::parse::model::Arg],
        span: Span,
    ) -> Value {
        let Some(a) = self.args(func, args, &["dtype"], 1, span) else {
            return Value::Poison;
        };
        let e = a[0].expect("required");
        let Some(d) = self.dtype_arg(e) else {
            return Value::Poison;
        };
        match (func, d.is_float(), d.is_int()) {
            ("finfo", true, _) | ("iinfo", _, true) => Value::Info(d),
            ("finfo", false, _) => self.error(
                e.span(),
                format!("`finfo` takes a float dtype, not `{}`: an integer type's limits are `iinfo({0})` (or `{0}.min`, `{0}.max`)", d.name()),
            ),
            _ => self.error(
                e.span(),
                format!("`iinfo` takes an integer dtype, not `{}`: a float type's limits are `finfo({0})` (or `{0}.min`, `{0}.max`)", d.name()),
            ),
        }
    }

    fn mgrid(&mut self, ranges: &[Expr], span: Span) -> Value {
        if ranges.is_empty() || ranges.len() > MAX_TILE_RANK {
            return self.error(span, format!("`mgrid!` takes 1 to {MAX_TILE_RANK} ranges"));
        }
        let mut axes = Vec::new();
        for (j, r) in ranges.iter().enumerate() {
            let Expr::Range {
                start,
                end: Some(end),
                span: rs,
            } = r
            else {
                return self.error(
                    r.span(),
                    "`mgrid!` takes ranges `start..end` with literal bounds",
                );
            };
            let s = match start {
                Some(s) => self.int(s, "a range start"),
                None => Some(0),
            };
            let e = self.int(end, "a range end");
            let (Some(s), Some(e)) = (s, e) else {
                return Value::Poison;
            };
            if e <= s {
                return self.error(*rs, "an empty range");
            }
            let Some(size) = e.checked_sub(s).and_then(|n| u32::try_from(n).ok()) else {
                return self.error(*rs, "an index grid axis has at most 4294967295 elements");
            };
            axes.push(Idx::grid_axis(j, s, size));
        }
        let mut dense = [0u32; MAX_TILE_RANK];
        for (d, a) in dense.iter_mut().zip(&axes) {
            *d = a.sizes.iter().copied().max().unwrap_or(0);
        }
        for a in &mut axes {
            a.dense = dense;
        }
        Value::Grid(axes)
    }
}

/// A number as Python converts it for float arithmetic.
fn number(v: &Value) -> f64 {
    match v {
        // The nearest float, as Python's `float(n)`.
        #[allow(clippy::cast_precision_loss)]
        Value::Int(n) => *n as f64,
        Value::Float(f) => *f,
        // Callers pass numbers only.
        Value::Bool(_)
        | Value::Index(_)
        | Value::Sym { .. }
        | Value::SymMinus { .. }
        | Value::Tensor(_)
        | Value::Access(_)
        | Value::Tile(_)
        | Value::Blocks { .. }
        | Value::Grid(_)
        | Value::Range(..)
        | Value::DType(_)
        | Value::Info(_)
        | Value::Slice { .. }
        | Value::Shape(_)
        | Value::Buffer(_)
        | Value::Cond(_)
        | Value::Code(_)
        | Value::Reg(_)
        | Value::Unit
        | Value::Poison => f64::NAN,
    }
}

/// Why a comparison of two different symbolic dimensions has no compile-time value.
const LAUNCH_ONLY: &str = "whether two different symbolic dimensions compare so is known only at launch: two dimensions are equal when the signature names them alike (`Hbm<f32, N, D>` twice)";

/// Python's `==` of two shapes: `None` when it depends on symbolic dimensions' values.
fn shapes_equal(x: &[Dim], y: &[Dim]) -> Option<bool> {
    if x.len() != y.len() {
        return Some(false);
    }
    let mut known = true;
    for (a, b) in x.iter().zip(y) {
        match (a, b) {
            (Dim::Fixed(m), Dim::Fixed(n)) if m != n => return Some(false),
            (Dim::Fixed(_), Dim::Fixed(_)) => {}
            (Dim::Sym(s), Dim::Sym(t)) if s == t => {}
            _ => known = false,
        }
    }
    known.then_some(true)
}

/// A tile shape's dimensions, all fixed.
fn fixed_dims(shape: &nki_lang::TileShape) -> Vec<Dim> {
    shape
        .dims()
        .iter()
        .map(|&d| Dim::Fixed(u64::from(d)))
        .collect()
}

impl Lowerer<'_> {
    /// A Python tuple of dimensions (`(x_shape[0] * x_shape[1], x_shape[2])`): a shape, as
    /// `x.shape` is (indexed, destructured, or passed as a shape).
    fn tuple_shape(&mut self, items: &[Expr], span: Span) -> Value {
        let mut dims = Vec::with_capacity(items.len());
        for item in items {
            match self.eval(item) {
                Value::Int(n) if n >= 0 => dims.push(Dim::Fixed(n.unsigned_abs())),
                // A quotient or sum (`N / 128`, `H + 2`): a symbol of its own.
                Value::Sym { sym, add, div } => {
                    let Ok(add) = i64::try_from(add) else {
                        return self
                            .error(item.span(), "integer overflow in a compile-time expression");
                    };
                    match self.as_symbol(sym, add, div, item.span()) {
                        Some(s) => dims.push(Dim::Sym(s)),
                        None => return Value::Poison,
                    }
                }
                Value::Poison => return Value::Poison,
                other => {
                    return self.error(
                        item.span(),
                        format!(
                            "a tuple is a shape: its items are dimensions (non-negative integers, a tensor's dimensions or their products, quotients and sums), not {}; a tuple of other values can only be a kernel's return value",
                            other.describe()
                        ),
                    );
                }
            }
        }
        if dims.is_empty() {
            return self.error(span, "a shape has at least one dimension");
        }
        Value::Shape(dims)
    }
}

/// NKI's `nisa.get_nc_version()` of a kernel compiled for `target`: the NeuronCore generation
/// (`nc_version.gen2` for Trn1, `gen3` for Trn2, `gen4` for Trn3), known when it compiles.
pub(super) fn nc_version(target: nki_lang::Target) -> i64 {
    match target {
        nki_lang::Target::Trn1 => 2,
        nki_lang::Target::Trn2 => 3,
        nki_lang::Target::Trn3 => 4,
    }
}

/// A dimension of a shape as a kernel value: an integer, or a symbolic dimension.
pub(super) fn dim_value(d: Dim) -> Value {
    match d {
        // A fixed dimension is at most 2^40 (`nki_lang::MAX_TENSOR_DIM`) or a tile's u32.
        Dim::Fixed(n) => Value::Int(i64::try_from(n).unwrap_or(i64::MAX)),
        Dim::Sym(sym) => Value::Sym {
            sym,
            add: 0,
            div: 1,
        },
    }
}

/// A limit of `dtype` as a kernel value: an integer for an integer type, else a float.
fn limit(dtype: DType, v: f64) -> Value {
    if dtype.is_float() {
        return Value::Float(v);
    }
    // Integer limits are integers of at most 32 bits: exact in f64 and in i64.
    #[allow(clippy::cast_possible_truncation)]
    let n = v as i64;
    Value::Int(n)
}

/// Python's `x // y` and `x % y` (`y ≠ 0`): the quotient rounded towards −∞ and the remainder
/// with the divisor's sign; `None` on overflow (`i64::MIN // -1`).
fn python_div_mod(x: i64, y: i64) -> Option<(i64, i64)> {
    let (q, r) = (x.checked_div(y)?, x.checked_rem(y)?);
    if r != 0 && (r < 0) != (y < 0) {
        Some((q.checked_sub(1)?, r.checked_add(y)?))
    } else {
        Some((q, r))
    }
}
