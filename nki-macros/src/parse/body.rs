//! The kernel body: syn's syntax tree to the statements and expressions a kernel may contain.
//! Anything else is an error on its own tokens.

use syn::ext::IdentExt;
use syn::{Expr as SynExpr, Lit, Pat, Stmt as SynStmt};

use super::model::{Arg, BinOp, Block, Expr, IterKind, Stmt};
use crate::errors::Errors;
use crate::span::Span;

/// Parses a block; statements that cannot be parsed are reported and skipped.
pub fn parse_block(block: &syn::Block, errors: &mut Errors) -> Block {
    let mut stmts = Vec::new();
    let mut tail = None;
    let n = block.stmts.len();
    for (i, s) in block.stmts.iter().enumerate() {
        match s {
            SynStmt::Local(local) => {
                let Some(init) = &local.init else {
                    errors.push(Span::of(&local), "a `let` in a kernel needs a value");
                    continue;
                };
                if let Some((e, _)) = &init.diverge {
                    errors.push(Span::of(&e), "`let ... else` is not supported in a kernel");
                }
                let Some((names, tuple)) = parse_pat(&local.pat, errors) else {
                    continue;
                };
                // A value that fails to parse still binds its names (to an erroneous value),
                // so that their uses report nothing more.
                let value = parse_expr(&init.expr, errors)
                    .unwrap_or_else(|| Expr::Error(Span::of_expr(&init.expr)));
                stmts.push(Stmt::Let {
                    names,
                    tuple,
                    value,
                });
            }
            SynStmt::Item(syn::Item::Const(c)) => {
                if let Some(value) = parse_expr(&c.expr, errors) {
                    stmts.push(Stmt::Let {
                        names: vec![Some(c.ident.unraw())],
                        tuple: false,
                        value,
                    });
                }
            }
            SynStmt::Item(item) => {
                errors.push(
                    Span::of(&item),
                    "a kernel body cannot contain items other than `const`",
                );
            }
            SynStmt::Macro(m) if m.mac.path.is_ident("no_reorder") => {
                if let Some(s) = no_reorder(&m.mac, errors) {
                    stmts.push(s);
                }
            }
            SynStmt::Macro(m) => match assertion(&m.mac, errors) {
                Some(Some(a)) => stmts.push(a),
                Some(None) => {}
                None => errors.push(
                    Span::of(&m),
                    "this macro cannot be used as a statement in a kernel",
                ),
            },
            // An empty statement (a stray `;`), which syn keeps as an empty expression.
            SynStmt::Expr(SynExpr::Verbatim(tokens), Some(_)) if tokens.is_empty() => {}
            SynStmt::Expr(e, semi) => {
                if semi.is_none() && i + 1 == n && !matches!(e, SynExpr::ForLoop(_)) {
                    tail = parse_expr(e, errors);
                    continue;
                }
                if let Some(s) = parse_stmt_expr(e, errors) {
                    stmts.push(s);
                }
            }
        }
    }
    Block { stmts, tail }
}

fn parse_pat(pat: &Pat, errors: &mut Errors) -> Option<(Vec<Option<syn::Ident>>, bool)> {
    match pat {
        Pat::Ident(p) => Some((vec![Some(p.ident.unraw())], false)),
        Pat::Wild(_) => Some((vec![None], false)),
        Pat::Type(t) => parse_pat(&t.pat, errors),
        Pat::Tuple(t) => {
            let mut names = Vec::new();
            for e in &t.elems {
                match e {
                    Pat::Ident(p) => names.push(Some(p.ident.unraw())),
                    Pat::Wild(_) => names.push(None),
                    other => {
                        errors.push(Span::of(&other), "expected a name or `_`");
                        return None;
                    }
                }
            }
            Some((names, true))
        }
        other => {
            errors.push(
                Span::of(&other),
                "a kernel binds plain names or tuples of names",
            );
            None
        }
    }
}

/// `assert!`, `assert_eq!` or `assert_ne!` as a statement (NKI's Python `assert`): `None` for
/// another macro; `Some(None)` when its arguments were reported.
fn assertion(mac: &syn::Macro, errors: &mut Errors) -> Option<Option<Stmt>> {
    let op = assertion_op(mac)?;
    let args = match mac
        .parse_body_with(syn::punctuated::Punctuated::<SynExpr, syn::Token![,]>::parse_terminated)
    {
        Ok(list) => list.into_iter().collect::<Vec<_>>(),
        Err(err) => {
            errors.push_syn(err);
            return Some(None);
        }
    };
    let operands = if op.is_some() { 2 } else { 1 };
    let usage = match op {
        None => "`assert!(condition)` or `assert!(condition, \"message\")`",
        Some(_) => "`assert_eq!(a, b)` or `assert_eq!(a, b, \"message\")` (`assert_ne!` alike)",
    };
    if args.len() < operands || args.len() > operands + 1 {
        errors.push(
            Span::of(mac),
            format!("{usage}: NKI's `assert`, checked when the kernel compiles"),
        );
        return Some(None);
    }
    let message = match args.get(operands) {
        None => {
            let parts: Vec<String> = args.iter().map(source).collect();
            match op {
                None => format!("assertion failed: {}", parts[0]),
                Some(o) => format!("assertion failed: {} {} {}", parts[0], o.symbol(), parts[1]),
            }
        }
        Some(SynExpr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        })) => s.value(),
        Some(other) => {
            errors.push(
                Span::of_expr(other),
                format!(
                    "an assertion's message is a string literal (without format arguments): {usage}"
                ),
            );
            return Some(None);
        }
    };
    let parsed: Option<Vec<Expr>> = args[..operands]
        .iter()
        .map(|a| parse_expr(a, errors))
        .collect();
    let Some(mut parsed) = parsed.map(Vec::into_iter) else {
        return Some(None);
    };
    let Some(first) = parsed.next() else {
        return Some(None);
    };
    let cond = match (op, parsed.next()) {
        (Some(op), Some(rhs)) => {
            let span = Span {
                start: first.span().start,
                end: rhs.span().end,
            };
            Expr::Binary {
                op,
                lhs: Box::new(first),
                rhs: Box::new(rhs),
                span,
            }
        }
        _ => first,
    };
    Some(Some(Stmt::Assert { cond, message }))
}

/// An expression's tokens as text, without the spaces the token printer puts around `.`,
/// inside brackets and parentheses, and before `,` (`x.shape[0] == 128`).
fn source(e: &SynExpr) -> String {
    let mut text = quote::ToTokens::to_token_stream(e).to_string();
    for (from, to) in [
        (" . ", "."),
        (" [", "["),
        ("[ ", "["),
        (" ]", "]"),
        ("( ", "("),
        (" )", ")"),
        (" ,", ","),
    ] {
        text = text.replace(from, to);
    }
    text
}

/// Which assertion macro `mac` is: `Some(None)` for `assert!`, `Some(Some(op))` for
/// `assert_eq!` / `assert_ne!`, `None` for any other macro.
fn assertion_op(mac: &syn::Macro) -> Option<Option<BinOp>> {
    match mac.path.get_ident()?.to_string().as_str() {
        "assert" => Some(None),
        "assert_eq" => Some(Some(BinOp::Eq)),
        "assert_ne" => Some(Some(BinOp::Ne)),
        _ => None,
    }
}

/// `no_reorder! { statements }`: NKI's `with nl.no_reorder():` block.
fn no_reorder(mac: &syn::Macro, errors: &mut Errors) -> Option<Stmt> {
    let tokens = &mac.tokens;
    let block: syn::Block = match syn::parse2(quote::quote!({ #tokens })) {
        Ok(b) => b,
        Err(e) => {
            errors.push_syn(e);
            return None;
        }
    };
    let mut body = parse_block(&block, errors);
    // A last statement without `;` is a statement too: the block has no value.
    if let Some(t) = body.tail.take() {
        body.stmts.push(Stmt::Expr(t));
    }
    Some(Stmt::NoReorder { body })
}

fn parse_stmt_expr(e: &SynExpr, errors: &mut Errors) -> Option<Stmt> {
    match e {
        SynExpr::Macro(m) if m.mac.path.is_ident("no_reorder") => no_reorder(&m.mac, errors),
        SynExpr::Macro(m) if assertion_op(&m.mac).is_some() => assertion(&m.mac, errors).flatten(),
        SynExpr::Assign(a) => {
            let target = parse_expr(&a.left, errors)?;
            let value = parse_expr(&a.right, errors)?;
            Some(Stmt::Assign { target, value })
        }
        SynExpr::Binary(b) if compound_assign(&b.op).is_some() => {
            let op = compound_assign(&b.op)?;
            let target = parse_expr(&b.left, errors)?;
            let value = parse_expr(&b.right, errors)?;
            Some(Stmt::OpAssign {
                op,
                target,
                value,
                span: Span::of_expr(e),
            })
        }
        SynExpr::ForLoop(f) => {
            if let Some(l) = &f.label {
                errors.push(Span::of(&l), "loop labels are not supported in a kernel");
            }
            let var = match &*f.pat {
                Pat::Ident(p) => Some(p.ident.unraw()),
                Pat::Wild(_) => None,
                other => {
                    errors.push(Span::of(&other), "a loop variable is a plain name or `_`");
                    None
                }
            };
            let SynExpr::Call(call) = &*f.expr else {
                errors.push(Span::of_expr(&f.expr), ITER_HELP);
                return None;
            };
            let kind = match &*call.func {
                // `affine_range(n)` or `nl::affine_range(n)`: the iterator's own name.
                SynExpr::Path(p) => {
                    match p
                        .path
                        .segments
                        .last()
                        .map(|s| s.ident.unraw().to_string())
                        .as_deref()
                    {
                        Some("affine_range") => IterKind::Affine,
                        Some("sequential_range") | Some("range") => IterKind::Sequential,
                        Some("static_range") => IterKind::Static,
                        Some("dynamic_range") => IterKind::Dynamic,
                        _ => {
                            errors.push(Span::of(&call.func), ITER_HELP);
                            return None;
                        }
                    }
                }
                _ => {
                    errors.push(Span::of(&call.func), ITER_HELP);
                    return None;
                }
            };
            let (start, trip, step) = iter_args(call, errors)?;
            let mut body = parse_block(&f.body, errors);
            // A trailing `if` without `;` is a statement.
            if let Some(Expr::If { .. }) = &body.tail {
                body.stmts.extend(body.tail.take().map(Stmt::Expr));
            }
            if let Some(t) = &body.tail {
                errors.push(
                    t.span(),
                    "a loop body has no value: end this expression with `;`",
                );
            }
            Some(Stmt::For {
                var,
                kind,
                start,
                trip,
                step,
                iter_span: Span::of_expr(&f.expr),
                body,
            })
        }
        other => parse_expr(other, errors).map(Stmt::Expr),
    }
}

/// The arguments of a loop iterator, bound as NKI's `affine_range(start, stop=None, step=1)`
/// binds them (by position or keyword; without a stop, `start` is the stop): the start (if
/// any), the stop and the step (if any).
fn iter_args(call: &syn::ExprCall, errors: &mut Errors) -> Option<IterArgs> {
    const PARAMS: [&str; 3] = ["start", "stop", "step"];
    let usage = "a loop iterator takes `(stop)`, `(start, stop)` or `(start, stop, step)`, as Python's `range`, or NKI's keywords `start`, `stop`, `step`";
    let args = parse_args(call.args.iter(), errors)?;
    if args.is_empty() || args.len() > 3 {
        errors.push(Span::of(&call), usage);
        return None;
    }
    let mut slots: [Option<Expr>; 3] = [None, None, None];
    let mut keyword_seen = false;
    for (k, a) in args.into_iter().enumerate() {
        let at = match &a.name {
            None if keyword_seen => {
                errors.push(
                    a.value.span(),
                    "a positional argument cannot follow a keyword argument",
                );
                return None;
            }
            None => k,
            Some(n) => {
                keyword_seen = true;
                match PARAMS.iter().position(|p| n == p) {
                    Some(j) => j,
                    None => {
                        errors.push(
                            Span::of(n),
                            format!("a loop iterator has no parameter `{n}`: {usage}"),
                        );
                        return None;
                    }
                }
            }
        };
        if slots[at].is_some() {
            errors.push(
                a.value.span(),
                format!("the loop iterator's `{}` is given twice", PARAMS[at]),
            );
            return None;
        }
        slots[at] = Some(a.value);
    }
    let [start, stop, step] = slots;
    let step = step.map(Box::new);
    match (start, stop) {
        (Some(start), Some(stop)) => Some((Some(Box::new(start)), stop, step)),
        // NKI's `affine_range(n)`: `start` is the stop, the start 0.
        (Some(stop), None) if step.is_none() => Some((None, stop, None)),
        (Some(stop), None) => Some((Some(Box::new(Expr::Int(0, stop.span()))), stop, step)),
        (None, _) => {
            errors.push(
                Span::of(&call),
                format!("the loop iterator's `start` is missing: {usage}"),
            );
            None
        }
    }
}

/// A loop iterator's start, stop and step.
type IterArgs = (Option<Box<Expr>>, Expr, Option<Box<Expr>>);

const ITER_HELP: &str = "a kernel loops over `affine_range(n)`, `sequential_range(n)`, `static_range(n)` or `dynamic_range(n)` (each also `(start, stop)` and `(start, stop, step)`)";

/// The operator of a compound assignment (`+=` → `+`), if `op` is one.
fn compound_assign(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as S;
    Some(match op {
        S::AddAssign(_) => BinOp::Add,
        S::SubAssign(_) => BinOp::Sub,
        S::MulAssign(_) => BinOp::Mul,
        S::DivAssign(_) => BinOp::Div,
        S::RemAssign(_) => BinOp::Rem,
        S::BitXorAssign(_) => BinOp::BitXor,
        S::BitAndAssign(_) => BinOp::BitAnd,
        S::BitOrAssign(_) => BinOp::BitOr,
        S::ShlAssign(_) => BinOp::Shl,
        S::ShrAssign(_) => BinOp::Shr,
        _ => return None,
    })
}

/// NKI's `name = "..."` of a call: the name and its literal's span.
type Label = Option<(String, Span)>;

/// A call's arguments, and its NKI `name = "..."` if it has one.
fn parse_named_args<'a>(
    args: impl Iterator<Item = &'a SynExpr>,
    errors: &mut Errors,
) -> Option<(Vec<Arg>, Label)> {
    let mut name = None;
    let mut rest = Vec::new();
    for a in args {
        // NKI's `name = "..."` labels the instructions of the call (`schedule_control`).
        if let SynExpr::Assign(kw) = a
            && let SynExpr::Path(p) = &*kw.left
            && p.path.is_ident("name")
            && let SynExpr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) = &*kw.right
        {
            if name.is_some() {
                errors.push(Span::of(&kw), "the keyword `name` is given twice");
            }
            name = Some((s.value(), Span::of(s)));
            continue;
        }
        rest.push(a);
    }
    let args = parse_args(rest.into_iter(), errors)?;
    Some((args, name))
}

fn parse_args<'a>(
    args: impl Iterator<Item = &'a SynExpr>,
    errors: &mut Errors,
) -> Option<Vec<Arg>> {
    let mut out = Vec::new();
    let mut ok = true;
    for a in args {
        let arg = match a {
            SynExpr::Assign(kw) => match &*kw.left {
                SynExpr::Path(p) if p.path.get_ident().is_some() => {
                    let name = p.path.get_ident().map(IdentExt::unraw);
                    parse_expr(&kw.right, errors).map(|value| Arg { name, value })
                }
                other => {
                    errors.push(Span::of(&other), "a keyword argument is `name = value`");
                    None
                }
            },
            e => parse_expr(e, errors).map(|value| Arg { name: None, value }),
        };
        match arg {
            Some(a) => out.push(a),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// The kernel's operator for syn's, or an error on it.
fn binary_op(op: &syn::BinOp, errors: &mut Errors) -> Option<BinOp> {
    use syn::BinOp as S;
    Some(match op {
        S::Add(_) => BinOp::Add,
        S::Sub(_) => BinOp::Sub,
        S::Mul(_) => BinOp::Mul,
        S::Div(_) => BinOp::Div,
        S::Rem(_) => BinOp::Rem,
        S::BitAnd(_) => BinOp::BitAnd,
        S::BitOr(_) => BinOp::BitOr,
        S::BitXor(_) => BinOp::BitXor,
        S::Shl(_) => BinOp::Shl,
        S::Shr(_) => BinOp::Shr,
        S::Lt(_) => BinOp::Lt,
        S::Le(_) => BinOp::Le,
        S::Gt(_) => BinOp::Gt,
        S::Ge(_) => BinOp::Ge,
        S::Eq(_) => BinOp::Eq,
        S::Ne(_) => BinOp::Ne,
        S::And(_) | S::Or(_) => {
            errors.push(
                Span::of(op),
                "`&&` and `||` have no meaning on tiles and masks: join conditions with `&` and `|`, compile-time ones too (Python's `and` and `or`) (err_ambiguous_tensor_truth_value)",
            );
            return None;
        }
        _ => {
            errors.push(Span::of(op), "this operator cannot appear in a kernel");
            return None;
        }
    })
}

/// Parses a chain of binary operators `a + b - c ...` (`span` its tokens). syn nests it to the
/// left, as deep as it is long: its left side is walked in a loop, not recursively, so that a
/// sum of thousands of terms costs no stack per term. Errors come in the order of the tokens;
/// below an operator that cannot appear in a kernel nothing is parsed.
fn parse_binary(e: &SynExpr, span: Span, errors: &mut Errors) -> Option<Expr> {
    // The operators from the outermost (the last in the source) in.
    let mut spine = Vec::new();
    let mut leaf = e;
    while let SynExpr::Binary(b) = leaf {
        spine.push(b);
        leaf = &b.left;
    }
    // The outermost operator that cannot appear reports, and hides what it nests.
    let hidden = spine
        .iter()
        .position(|b| binary_op(&b.op, &mut Errors::default()).is_none());
    let mut acc = match hidden {
        Some(k) => binary_op(&spine[k].op, errors).and(None),
        None => parse_expr(leaf, errors),
    };
    for b in spine[..hidden.unwrap_or(spine.len())].iter().rev() {
        let op = binary_op(&b.op, errors);
        let rhs = parse_expr(&b.right, errors);
        acc = match (acc, op, rhs) {
            (Some(lhs), Some(op), Some(rhs)) => Some(Expr::Binary {
                op,
                span: Span {
                    start: span.start,
                    end: Span::of_expr(&b.right).end,
                },
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            }),
            _ => None,
        };
    }
    acc
}

/// Parses an expression.
pub fn parse_expr(e: &SynExpr, errors: &mut Errors) -> Option<Expr> {
    let span = Span::of_expr(e);
    Some(match e {
        SynExpr::Lit(l) => match &l.lit {
            Lit::Int(i) => match i.base10_parse::<i64>() {
                Ok(v) => Expr::Int(v, span),
                Err(err) => {
                    errors.push_syn(err);
                    return None;
                }
            },
            Lit::Float(f) => match f.base10_parse::<f64>() {
                Ok(v) => Expr::Float(v, span),
                Err(err) => {
                    errors.push_syn(err);
                    return None;
                }
            },
            Lit::Bool(b) => Expr::Bool(b.value, span),
            Lit::Str(s) => Expr::Str(s.value(), span),
            _ => {
                errors.push(
                    span,
                    "only integer, float, bool and string literals can appear in a kernel",
                );
                return None;
            }
        },
        SynExpr::Path(p) => match p.path.get_ident() {
            Some(i) => Expr::Name(i.unraw()),
            None => {
                let last = p.path.segments.last().map(|s| s.ident.unraw());
                // Rust's `f32::MIN` / `f32::MAX`: the dtype's finite limits, as `f32.min`.
                let n = p.path.segments.len();
                if n >= 2
                    && let Some(l) = &last
                    && (l == "MIN" || l == "MAX")
                    && p.path.segments.iter().all(|s| s.arguments.is_none())
                {
                    let ty = p.path.segments[n.saturating_sub(2)].ident.unraw();
                    if nki_lang::DType::from_name(&ty.to_string()).is_some() {
                        let field = syn::Ident::new(&l.to_string().to_lowercase(), l.span());
                        return Some(Expr::Field {
                            base: Box::new(Expr::Name(ty)),
                            field,
                            span,
                        });
                    }
                }
                // Rust's `f32::INFINITY` / `f32::NEG_INFINITY` and NumPy's `np::inf` (Python's
                // `float('inf')`, `-np.inf`): infinities as numbers.
                if n >= 2
                    && let Some(l) = &last
                    && p.path.segments.iter().all(|s| s.arguments.is_none())
                {
                    let ty = p.path.segments[n.saturating_sub(2)]
                        .ident
                        .unraw()
                        .to_string();
                    let float_type = ty == "f64"
                        || nki_lang::DType::from_name(&ty).is_some_and(|d| d.is_float());
                    let numpy = matches!(ty.as_str(), "np" | "numpy" | "math");
                    match l.to_string().as_str() {
                        "INFINITY" if float_type => return Some(Expr::Float(f64::INFINITY, span)),
                        "NEG_INFINITY" if float_type => {
                            return Some(Expr::Float(f64::NEG_INFINITY, span));
                        }
                        "inf" if numpy => return Some(Expr::Float(f64::INFINITY, span)),
                        _ => {}
                    }
                }
                match last {
                    // `nl::psum`, `Buffer::Psum`: the last segment names the value
                    Some(i) if p.path.segments.iter().all(|s| s.arguments.is_none()) => {
                        Expr::Name(i)
                    }
                    _ => {
                        errors.push(span, "unsupported path in a kernel");
                        return None;
                    }
                }
            }
        },
        SynExpr::Paren(p) => parse_expr(&p.expr, errors)?,
        SynExpr::Group(g) => parse_expr(&g.expr, errors)?,
        SynExpr::Unary(u) => match u.op {
            syn::UnOp::Neg(_) => Expr::Neg(Box::new(parse_expr(&u.expr, errors)?), span),
            syn::UnOp::Not(_) => Expr::Not(Box::new(parse_expr(&u.expr, errors)?), span),
            _ => {
                errors.push(
                    span,
                    "references have no meaning in a kernel: pass tensors and tiles by name",
                );
                return None;
            }
        },
        SynExpr::Binary(_) => return parse_binary(e, span, errors),
        SynExpr::Call(c) => {
            let SynExpr::Path(p) = &*c.func else {
                errors.push(Span::of(&c.func), "a kernel calls NKI functions by name");
                return None;
            };
            let Some(func) = p.path.segments.last().map(|s| s.ident.unraw()) else {
                errors.push(Span::of(&c.func), "a kernel calls NKI functions by name");
                return None;
            };
            let (args, name) = parse_named_args(c.args.iter(), errors)?;
            match name {
                Some((name, name_span)) => Expr::Named {
                    call: Box::new(Expr::Call { func, args, span }),
                    name,
                    name_span,
                },
                None => Expr::Call { func, args, span },
            }
        }
        SynExpr::MethodCall(m) => {
            let recv = parse_expr(&m.receiver, errors)?;
            let (args, name) = parse_named_args(m.args.iter(), errors)?;
            if let Some((_, at)) = name {
                errors.push(
                    at,
                    "`name = \"...\"` labels the instructions of a function call (`nisa::activation(..., name = \"act0\")`), not of a method",
                );
            }
            Expr::Method {
                recv: Box::new(recv),
                method: m.method.unraw(),
                args,
                span,
            }
        }
        SynExpr::Field(f) => {
            let syn::Member::Named(field) = &f.member else {
                errors.push(
                    Span::of(&f.member),
                    "expected a named field (`.p`, `.x`, `.dtype`)",
                );
                return None;
            };
            let base = parse_expr(&f.base, errors)?;
            Expr::Field {
                base: Box::new(base),
                field: field.unraw(),
                span,
            }
        }
        SynExpr::Index(ix) => {
            let base = parse_expr(&ix.expr, errors)?;
            let indices = match &*ix.index {
                SynExpr::Array(a) => {
                    let mut v = Vec::new();
                    for e in &a.elems {
                        v.push(parse_expr(e, errors)?);
                    }
                    v
                }
                // `t[..]`, or one index: the first axis (`t[k]`, a block of a tile with
                // block axes).
                _ => vec![parse_expr(&ix.index, errors)?],
            };
            Expr::Index {
                base: Box::new(base),
                indices,
                span,
            }
        }
        SynExpr::Range(r) => {
            if matches!(r.limits, syn::RangeLimits::Closed(_)) {
                errors.push(span, "use a half-open range `a..b`");
                return None;
            }
            let start = match &r.start {
                Some(s) => Some(Box::new(parse_expr(s, errors)?)),
                None => None,
            };
            let end = match &r.end {
                Some(s) => Some(Box::new(parse_expr(s, errors)?)),
                None => None,
            };
            Expr::Range { start, end, span }
        }
        SynExpr::Array(a) => {
            let mut v = Vec::new();
            for e in &a.elems {
                v.push(parse_expr(e, errors)?);
            }
            Expr::Array(v, span)
        }
        SynExpr::Tuple(t) => {
            let mut v = Vec::new();
            for e in &t.elems {
                v.push(parse_expr(e, errors)?);
            }
            Expr::Tuple(v, span)
        }
        SynExpr::Macro(m) if m.mac.path.is_ident("mgrid") => {
            let parsed = m.mac.parse_body_with(
                syn::punctuated::Punctuated::<SynExpr, syn::Token![,]>::parse_terminated,
            );
            match parsed {
                Ok(list) => {
                    let mut v = Vec::new();
                    for e in &list {
                        v.push(parse_expr(e, errors)?);
                    }
                    Expr::Mgrid(v, span)
                }
                Err(err) => {
                    errors.push_syn(err);
                    return None;
                }
            }
        }
        SynExpr::If(i) => {
            let cond = parse_expr(&i.cond, errors);
            let then = parse_block(&i.then_branch, errors);
            let els = match &i.else_branch {
                None => None,
                Some((_, e)) => Some(match &**e {
                    SynExpr::Block(b) => parse_block(&b.block, errors),
                    other => Block {
                        stmts: Vec::new(),
                        tail: Some(parse_expr(other, errors)?),
                    },
                }),
            };
            Expr::If {
                cond: Box::new(cond?),
                then: Box::new(then),
                els: els.map(Box::new),
                span,
            }
        }
        SynExpr::While(_) | SynExpr::Loop(_) => {
            errors.push(span, "a kernel loops with `for _ in affine_range(n)`, `sequential_range(n)`, `static_range(n)` or `dynamic_range(n)`; a loop on a register's value is `nl::while_loop(reg, |r| { ..; r })`");
            return None;
        }
        SynExpr::Cast(c) => {
            errors.push(
                Span::of(&c.as_token),
                "`as` conversions cannot appear in a kernel: a compile-time integer mixes with a float as in Python (`1.0 / D` is a float), and a tile converts with `copy(x, dtype)`",
            );
            return None;
        }
        SynExpr::Closure(c) => {
            let mut params = Vec::new();
            for p in &c.inputs {
                match p {
                    Pat::Ident(p) => params.push(Some(p.ident.unraw())),
                    Pat::Wild(_) => params.push(None),
                    other => {
                        errors.push(
                            Span::of(other),
                            "a device loop body's parameter is a plain name or `_`",
                        );
                        return None;
                    }
                }
            }
            let mut body = match &*c.body {
                SynExpr::Block(b) => parse_block(&b.block, errors),
                other => Block {
                    stmts: Vec::new(),
                    tail: Some(parse_expr(other, errors)?),
                },
            };
            // A trailing `if` without `;` is a statement.
            if let Some(Expr::If { .. }) = &body.tail {
                body.stmts.extend(body.tail.take().map(Stmt::Expr));
            }
            Expr::Closure {
                params,
                body: Box::new(body),
                span,
            }
        }
        SynExpr::Return(_) => {
            errors.push(
                span,
                "a kernel returns its outputs as its final expression, without `return`",
            );
            return None;
        }
        SynExpr::Unsafe(_) | SynExpr::Block(_) | SynExpr::Async(_) => {
            errors.push(span, "blocks cannot appear in a kernel body");
            return None;
        }
        SynExpr::Reference(_) => {
            errors.push(
                span,
                "references have no meaning in a kernel: pass tensors and tiles by name",
            );
            return None;
        }
        _ => {
            errors.push(span, "this expression cannot appear in a kernel");
            return None;
        }
    })
}
