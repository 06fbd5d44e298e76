//! The kernel's signature: `#[kernel(target = trn2)] fn name(x: Hbm<bf16, K, 128>) -> Hbm<...>`.

use nki_lang::{DType, Target};
use syn::{Expr, FnArg, GenericArgument, Lit, Pat, PathArguments, ReturnType, Type};

use super::model::{DimSpec, Param, TensorType};
use crate::errors::Errors;
use crate::span::Span;

/// Parses the attribute's arguments: empty, or `target = trn1 | trn2`.
pub fn parse_attr(attr: proc_macro2::TokenStream, errors: &mut Errors) -> Target {
    if attr.is_empty() {
        return Target::default();
    }
    let parsed: syn::Result<syn::MetaNameValue> = syn::parse2(attr.clone());
    match parsed {
        Ok(nv) if nv.path.is_ident("target") => {
            let name = match &nv.value {
                Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                Expr::Lit(l) => match &l.lit {
                    Lit::Str(s) => Some(s.value()),
                    _ => None,
                },
                _ => None,
            };
            match name.as_deref().and_then(Target::from_name) {
                Some(t) => t,
                None => {
                    errors.push(
                        Span::of(&nv.value),
                        "unknown target: expected `trn1` or `trn2`",
                    );
                    Target::default()
                }
            }
        }
        _ => {
            errors.push(
                Span::of(&attr),
                "expected `#[kernel]` or `#[kernel(target = trn1 | trn2)]`",
            );
            Target::default()
        }
    }
}

/// Parses the parameters: each `name: Hbm<dtype, dims...>`.
pub fn parse_params(sig: &syn::Signature, errors: &mut Errors) -> Vec<Param> {
    if !sig.generics.params.is_empty() {
        errors.push(
            Span::of(&sig.generics),
            "a kernel cannot be generic: its program is built at compile time",
        );
    }
    if let Some(c) = &sig.constness {
        errors.push(Span::of(&c), "a kernel cannot be `const`");
    }
    if let Some(a) = &sig.asyncness {
        errors.push(Span::of(&a), "a kernel cannot be `async`");
    }
    let mut params = Vec::new();
    for arg in &sig.inputs {
        let FnArg::Typed(pt) = arg else {
            errors.push(Span::of(&arg), "a kernel has no `self` parameter");
            continue;
        };
        let Pat::Ident(pi) = &*pt.pat else {
            errors.push(Span::of(&pt.pat), "a kernel parameter must be a plain name");
            continue;
        };
        if let Some(ty) = parse_tensor_type(&pt.ty, errors) {
            params.push(Param {
                name: pi.ident.clone(),
                ty,
            });
        }
    }
    params
}

/// Parses the return type: one `Hbm<...>` or a tuple of them.
pub fn parse_returns(sig: &syn::Signature, errors: &mut Errors) -> (Vec<TensorType>, Span) {
    match &sig.output {
        ReturnType::Default => (Vec::new(), sig.ident.span().into()),
        ReturnType::Type(_, ty) => {
            let span = Span::of(ty);
            let list = match &**ty {
                Type::Tuple(t) => t
                    .elems
                    .iter()
                    .filter_map(|e| parse_tensor_type(e, errors))
                    .collect(),
                t => parse_tensor_type(t, errors).into_iter().collect(),
            };
            (list, span)
        }
    }
}

fn parse_tensor_type(ty: &Type, errors: &mut Errors) -> Option<TensorType> {
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
    let dtype = match it.next() {
        Some(GenericArgument::Type(Type::Path(p))) => {
            let name = p
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            match DType::from_name(&name) {
                Some(d) => d,
                None => {
                    errors.push(
                        Span::of(&p),
                        format!("unknown dtype `{name}`: expected bf16, f16 or f32"),
                    );
                    return None;
                }
            }
        }
        Some(other) => {
            errors.push(Span::of(&other), "expected a dtype: bf16, f16 or f32");
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
            other => errors.push(
                Span::of(&other),
                "a dimension is an integer literal or a symbolic name",
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
        dims,
        span: Span::of(ty),
    })
}
