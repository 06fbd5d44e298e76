//! The kernel's signature: `#[kernel(target = trn2)] fn name(x: Hbm<bf16, K, 128>) -> Hbm<...>`.

use nki_lang::{DType, Target};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{
    Expr, FnArg, GenericArgument, GenericParam, Lit, Meta, MetaNameValue, Pat, PathArguments,
    ReturnType, Token, Type,
};

use crate::lower::DTYPES;

use super::model::{
    DimSpec, Instance, MetaKind, MetaParam, MetaValue, Param, ScheduleEdge, TensorType,
};
use crate::errors::Errors;
use crate::span::Span;

/// Parses the attribute's arguments: a comma-separated list of `target = trn1 | trn2 | trn3` and
/// instantiations `name(P = value, ...)`.
pub fn parse_attr(attr: proc_macro2::TokenStream, errors: &mut Errors) -> Attr {
    const EXPECTED: &str = "expected `#[kernel]`, `#[kernel(target = trn1 | trn2 | trn3)]`, `with_schedule = [(\"a\", \"b\"), ...]`, `strict_hardware` or instantiations `#[kernel(name(PARAM = value, ...), ...)]`";
    let mut target = None;
    let mut instances = Vec::new();
    let mut schedule = None;
    let mut strict_hardware = false;
    let parser = Punctuated::<Meta, Token![,]>::parse_terminated;
    let metas = match parser.parse2(attr.clone()) {
        Ok(m) => m,
        Err(_) => {
            errors.push(Span::of(&attr), EXPECTED);
            return Attr {
                target: Target::default(),
                instances,
                schedule: Vec::new(),
                strict_hardware,
            };
        }
    };
    for meta in metas {
        match meta {
            Meta::NameValue(nv) if nv.path.is_ident("with_schedule") => {
                if schedule.is_some() {
                    errors.push(Span::of(&nv), "`with_schedule` is given twice");
                }
                schedule = Some(parse_schedule(&nv.value, errors));
            }
            Meta::Path(p) if p.is_ident("strict_hardware") => {
                if strict_hardware {
                    errors.push(Span::of(&p), "`strict_hardware` is given twice");
                }
                strict_hardware = true;
            }
            Meta::NameValue(nv) if nv.path.is_ident("target") => {
                let name = match &nv.value {
                    Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    Expr::Lit(l) => match &l.lit {
                        Lit::Str(s) => Some(s.value()),
                        _ => None,
                    },
                    _ => None,
                };
                match name.as_deref().and_then(Target::from_name) {
                    Some(_) if target.is_some() => {
                        errors.push(Span::of(&nv), "the target is given twice");
                    }
                    Some(t) => target = Some(t),
                    None => errors.push(
                        Span::of(&nv.value),
                        "unknown target: expected `trn1`, `trn2` or `trn3`",
                    ),
                }
            }
            Meta::List(list) => {
                let Some(name) = list.path.get_ident().cloned() else {
                    errors.push(
                        Span::of(&list.path),
                        "an instantiation is named by one identifier",
                    );
                    continue;
                };
                // The attribute's paths take keywords (`Self`, `fn`), which name no function or
                // module: the instantiation is not emitted.
                if syn::parse2::<syn::Ident>(quote::quote!(#name)).is_err() {
                    errors.push(
                        Span::of(&name),
                        format!(
                            "`{name}` is a keyword: an instantiation is named by an identifier, like a function"
                        ),
                    );
                    continue;
                }
                let args = Punctuated::<MetaNameValue, Token![,]>::parse_terminated;
                let Ok(args) = args.parse2(list.tokens.clone()) else {
                    errors.push(
                        Span::of(&list),
                        "expected the meta-parameters' values: `name(PARAM = value, ...)`",
                    );
                    continue;
                };
                let mut values = Vec::new();
                for nv in args {
                    let Some(p) = nv.path.get_ident().cloned() else {
                        errors.push(Span::of(&nv.path), "expected a meta-parameter's name");
                        continue;
                    };
                    match meta_value(&nv.value) {
                        Some(v) => values.push((p, v, Span::of(&nv.value))),
                        None => errors.push(
                            Span::of(&nv.value),
                            "a meta-parameter's value is a number, `true`/`false` or a dtype (`bf16`)",
                        ),
                    }
                }
                instances.push(Instance { name, values });
            }
            other => errors.push(Span::of(&other), EXPECTED),
        }
    }
    Attr {
        target: target.unwrap_or_default(),
        instances,
        schedule: schedule.unwrap_or_default(),
        strict_hardware,
    }
}

/// What `#[kernel(...)]` says.
pub struct Attr {
    /// The target generation.
    pub target: Target,
    /// The instantiations.
    pub instances: Vec<Instance>,
    /// The `with_schedule` pairs.
    pub schedule: Vec<ScheduleEdge>,
    /// Whether `strict_hardware` is on.
    pub strict_hardware: bool,
}

/// `with_schedule = [("a", "b"), ("c", ["a", "b"])]`: NKI's list of pairs, the name that waits
/// and the name (or names) it waits for.
fn parse_schedule(e: &Expr, errors: &mut Errors) -> Vec<ScheduleEdge> {
    const USAGE: &str = "`with_schedule` is a list of pairs of instruction names, `[(\"plus1\", \"recip\"), (\"c\", [\"a\", \"b\"])]`: the first waits for the second (NKI's `kernel.with_schedule`)";
    let string = |e: &Expr, errors: &mut Errors| match e {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => Some((s.value(), Span::of(s))),
        other => {
            errors.push(Span::of(other), USAGE);
            None
        }
    };
    let Expr::Array(list) = e else {
        errors.push(Span::of(e), USAGE);
        return Vec::new();
    };
    let mut out = Vec::new();
    for pair in &list.elems {
        let Expr::Tuple(t) = pair else {
            errors.push(Span::of(pair), USAGE);
            continue;
        };
        let [a, b] = [t.elems.get(0), t.elems.get(1)];
        let (Some(a), Some(b), 2) = (a, b, t.elems.len()) else {
            errors.push(Span::of(pair), USAGE);
            continue;
        };
        let Some(after) = string(a, errors) else {
            continue;
        };
        let before: Vec<(String, Span)> = match b {
            Expr::Array(names) => names
                .elems
                .iter()
                .filter_map(|n| string(n, errors))
                .collect(),
            other => string(other, errors).into_iter().collect(),
        };
        out.push(ScheduleEdge { after, before });
    }
    out
}

/// An integer literal (possibly negated) or a bool literal.
fn meta_value(e: &Expr) -> Option<MetaValue> {
    match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(i) => i.base10_parse::<i64>().ok().map(MetaValue::Int),
            Lit::Float(f) => f
                .base10_parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .map(|x| MetaValue::Float(x.to_bits())),
            Lit::Bool(b) => Some(MetaValue::Bool(b.value)),
            _ => None,
        },
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => match meta_value(&u.expr)? {
            MetaValue::Int(n) => n.checked_neg().map(MetaValue::Int),
            MetaValue::Float(b) => Some(MetaValue::Float((-f64::from_bits(b)).to_bits())),
            MetaValue::Bool(_) | MetaValue::DType(_) => None,
        },
        Expr::Path(p) => p
            .path
            .get_ident()
            .and_then(|i| DType::from_name(&i.to_string()))
            .map(MetaValue::DType),
        Expr::Group(g) => meta_value(&g.expr),
        Expr::Paren(p) => meta_value(&p.expr),
        _ => None,
    }
}

/// Parses the meta-parameters: `const NAME: usize` (or another integer type) and
/// `const NAME: bool`; any other generic parameter is an error.
pub fn parse_meta(sig: &syn::Signature, errors: &mut Errors) -> Vec<MetaParam> {
    let mut meta = Vec::new();
    for g in &sig.generics.params {
        let c = match g {
            GenericParam::Const(c) => c,
            // A dtype parameter: `T` in `fn k<T>(x: Hbm<T, N>)`.
            GenericParam::Type(t) if t.bounds.is_empty() && t.default.is_none() => {
                meta.push(MetaParam {
                    name: t.ident.clone(),
                    kind: MetaKind::DType,
                });
                continue;
            }
            _ => {
                errors.push(
                    Span::of(g),
                    "a kernel's generic parameters are meta-parameters: `const NAME: usize` (or an integer, float or bool type) and dtypes `T`",
                );
                continue;
            }
        };
        let ty = match &c.ty {
            Type::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        };
        let kind = match ty.as_deref() {
            Some("bool") => MetaKind::Bool,
            Some("f32" | "f64") => MetaKind::Float,
            Some(
                "usize" | "u8" | "u16" | "u32" | "u64" | "isize" | "i8" | "i16" | "i32" | "i64",
            ) => MetaKind::Int,
            _ => {
                errors.push(
                    Span::of(&c.ty),
                    "a meta-parameter is an integer, a float or a `bool`",
                );
                continue;
            }
        };
        if let Some(d) = &c.default {
            errors.push(
                Span::of(&d.1),
                "a meta-parameter has no default: each instantiation gives its value",
            );
        }
        meta.push(MetaParam {
            name: c.ident.clone(),
            kind,
        });
    }
    if let Some(w) = &sig.generics.where_clause {
        errors.push(Span::of(w), "a kernel has no `where` clause");
    }
    meta
}

/// Checks the instantiations against the meta-parameters: each gives every meta-parameter
/// once, with a value of its type, and the names are distinct and not the kernel's. An
/// instantiation named like the kernel or an earlier one is reported on its name and removed,
/// so that the expansion defines each name once.
pub fn check_instances(
    kernel: &syn::Ident,
    meta: &[MetaParam],
    instances: &mut Vec<Instance>,
    errors: &mut Errors,
) {
    if meta.is_empty() {
        if let Some(i) = instances.first() {
            errors.push(
                Span::of(&i.name),
                "an instantiation sets meta-parameters, but the kernel declares none (`fn k<const P: usize>(...)`)",
            );
        }
        return;
    }
    if instances.is_empty() {
        errors.push(
            Span::of(kernel),
            format!(
                "a kernel with meta-parameters is compiled once per instantiation: list them in the attribute, `#[kernel(name({} = ...))]`",
                meta[0].name
            ),
        );
        return;
    }
    // Whether each instantiation keeps its name (and is emitted).
    let mut keep = Vec::with_capacity(instances.len());
    for (k, inst) in instances.iter().enumerate() {
        let name = inst.name.unraw();
        let clash = if name == kernel.unraw() {
            Some("is the kernel's own name")
        } else if instances[..k].iter().any(|o| o.name.unraw() == name) {
            Some("names an earlier instantiation of this kernel")
        } else {
            None
        };
        keep.push(clash.is_none());
        if let Some(clash) = clash {
            errors.push(
                Span::of(&inst.name),
                format!(
                    "`{}` {clash}: each instantiation is a kernel with a name of its own",
                    inst.name
                ),
            );
        }
        for (j, (p, v, span)) in inst.values.iter().enumerate() {
            match meta.iter().find(|m| m.name == *p) {
                None => errors.push(
                    Span::of(p),
                    format!("`{}` has no meta-parameter `{p}`", kernel),
                ),
                Some(_) if inst.values[..j].iter().any(|(q, ..)| q == p) => {
                    errors.push(Span::of(p), format!("`{p}` is given twice"))
                }
                Some(m) if !v.fits(m.kind) => errors.push(
                    *span,
                    format!(
                        "`{p}` is {}",
                        match m.kind {
                            MetaKind::Int => "an integer",
                            MetaKind::Float => "a float",
                            MetaKind::Bool => "a bool",
                            MetaKind::DType => "a dtype",
                        }
                    ),
                ),
                Some(_) => {}
            }
        }
        for m in meta {
            if !inst.values.iter().any(|(p, ..)| *p == m.name) {
                errors.push(
                    Span::of(&inst.name),
                    format!(
                        "the instantiation `{}` does not set `{}`",
                        inst.name, m.name
                    ),
                );
            }
        }
    }
    let mut keep = keep.into_iter();
    instances.retain(|_| keep.next().unwrap_or(true));
}

/// Parses the parameters: each `name: Hbm<dtype, dims...>`.
pub fn parse_params(sig: &syn::Signature, meta: &[MetaParam], errors: &mut Errors) -> Vec<Param> {
    if let Some(c) = &sig.constness {
        errors.push(Span::of(&c), "a kernel cannot be `const`");
    }
    if let Some(a) = &sig.asyncness {
        errors.push(Span::of(&a), "a kernel cannot be `async`");
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        errors.push(Span::of(&u), "a kernel cannot be `unsafe`");
    }
    if let Some(abi) = &sig.abi {
        errors.push(
            Span::of(&abi),
            "a kernel cannot be `extern`: its launch functions are Rust's",
        );
    }
    let mut params: Vec<Param> = Vec::new();
    for arg in &sig.inputs {
        let FnArg::Typed(pt) = arg else {
            errors.push(Span::of(&arg), "a kernel has no `self` parameter");
            continue;
        };
        let Pat::Ident(pi) = &*pt.pat else {
            errors.push(Span::of(&pt.pat), "a kernel parameter must be a plain name");
            continue;
        };
        let name = pi.ident.clone();
        let unraw = name.unraw();
        let clash = if RESERVED_PARAMS.iter().any(|r| unraw == *r) {
            Some(format!(
                "a kernel parameter cannot be named `{unraw}`: the kernel's module defines `{}::{unraw}`, which a parameter of its launch functions cannot shadow",
                sig.ident
            ))
        } else if params.iter().any(|p| p.name.unraw() == unraw) {
            Some(format!("parameter `{unraw}` is declared twice"))
        } else {
            None
        };
        let binding = match clash {
            Some(message) => {
                errors.push(Span::of(&pi.ident), message);
                // The fallback item's launch functions keep the parameter, under a name of
                // the expansion's own; the body still knows it by its own.
                proc_macro2::Ident::new(
                    &format!("param{}", params.len()),
                    proc_macro2::Span::mixed_site(),
                )
            }
            None => name.clone(),
        };
        if let Some(ty) = parse_tensor_type(&pt.ty, meta, errors) {
            params.push(Param { name, binding, ty });
        }
    }
    params
}

/// Names the kernel's module defines in the scope of its launch functions, which a parameter
/// of the same name would shadow (a static and a tuple struct cannot be shadowed by a binding).
const RESERVED_PARAMS: [&str; 2] = ["KERNEL", "Grid"];

/// Parses the return type: one `Hbm<...>` or a tuple of them.
pub fn parse_returns(
    sig: &syn::Signature,
    meta: &[MetaParam],
    errors: &mut Errors,
) -> (Vec<TensorType>, Span) {
    match &sig.output {
        ReturnType::Default => (Vec::new(), sig.ident.span().into()),
        ReturnType::Type(_, ty) => {
            let span = Span::of(ty);
            let list = match &**ty {
                Type::Tuple(t) => t
                    .elems
                    .iter()
                    .filter_map(|e| parse_tensor_type(e, meta, errors))
                    .collect(),
                t => parse_tensor_type(t, meta, errors).into_iter().collect(),
            };
            (list, span)
        }
    }
}

fn parse_tensor_type(ty: &Type, meta: &[MetaParam], errors: &mut Errors) -> Option<TensorType> {
    const EXPECTED: &str =
        "expected an HBM tensor type `Hbm<dtype, dims...>`, e.g. `Hbm<bf16, 128, N>`";
    let Type::Path(tp) = ty else {
        errors.push(Span::of(&ty), EXPECTED);
        return None;
    };
    let seg = tp.path.segments.last()?;
    if seg.ident != "Hbm" {
        errors.push(Span::of(&ty), EXPECTED);
        return None;
    }
    let PathArguments::AngleBracketed(args) = &seg.arguments else {
        errors.push(Span::of(&ty), EXPECTED);
        return None;
    };
    let mut it = args.args.iter();
    let mut dtype_param = None;
    let dtype = match it.next() {
        Some(GenericArgument::Type(Type::Path(p))) => {
            let name = p
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            let param = meta
                .iter()
                .find(|m| m.kind == MetaKind::DType && m.name == name);
            match DType::from_name(&name) {
                Some(d) => d,
                // Resolved per instantiation.
                None if param.is_some() => {
                    dtype_param = param.map(|m| m.name.clone());
                    DType::F32
                }
                None => {
                    errors.push(
                        Span::of(&p),
                        format!("unknown dtype `{name}`: expected {DTYPES}"),
                    );
                    return None;
                }
            }
        }
        Some(other) => {
            errors.push(Span::of(&other), format!("expected a dtype: {DTYPES}"));
            return None;
        }
        None => {
            errors.push(Span::of(&ty), EXPECTED);
            return None;
        }
    };
    let mut dims = Vec::new();
    for a in it {
        match a {
            GenericArgument::Const(Expr::Lit(l)) => match &l.lit {
                Lit::Int(i) => match i.base10_parse::<u64>() {
                    Ok(0) | Err(_) => {
                        errors.push(Span::of(&i), "a dimension must be a positive integer")
                    }
                    Ok(n) => dims.push(DimSpec::Lit(n)),
                },
                _ => errors.push(
                    Span::of(&l),
                    "a dimension is an integer literal or a symbolic name",
                ),
            },
            GenericArgument::Type(Type::Path(p)) if p.path.get_ident().is_some() => {
                dims.push(DimSpec::Sym(p.path.get_ident().unwrap().clone()));
            }
            // `{ H / 2 }`: a compile-time expression of meta-parameters.
            GenericArgument::Const(Expr::Block(b)) => match b.block.stmts.as_slice() {
                [syn::Stmt::Expr(e, None)] => {
                    if let Some(e) = super::body::parse_expr(e, errors) {
                        dims.push(DimSpec::Expr(e));
                    }
                }
                _ => errors.push(Span::of(&b), "a dimension `{ ... }` is one expression"),
            },
            other => errors.push(
                Span::of(&other),
                "a dimension is an integer literal, a symbolic name or a `{ ... }` expression of meta-parameters",
            ),
        }
    }
    if dims.is_empty() || dims.len() > nki_lang::MAX_TENSOR_RANK {
        errors.push(
            Span::of(&ty),
            format!(
                "an HBM tensor has 1 to {} dimensions",
                nki_lang::MAX_TENSOR_RANK
            ),
        );
        return None;
    }
    Some(TensorType {
        dtype,
        dtype_param,
        dims,
        span: Span::of(ty),
    })
}
