//! Helpers: `#[helper] fn f(x: Tile, k: usize) -> Tile { .. }`, functions of tiles, indices
//! and numbers that kernels call and `#[kernel]` inlines.
//!
//! A proc macro sees only the item it is applied to, so a helper's tokens travel to the
//! kernels that call it: `#[helper]` emits a `macro_rules!` of the helper's name that appends
//! the helper's definition to a list and passes it on. `#[kernel]` finds the calls its body
//! makes to functions that are not the language's own, and expands to a chain through those
//! helpers' macros that ends in `nki::__kernel_with_helpers!`, which compiles the kernel with
//! the definitions (and chains again for helpers that helpers call). The tokens keep their
//! spans, so errors inside a helper point at the helper's own code.

use proc_macro2::{Ident, TokenStream};
use quote::quote;
use syn::{FnArg, Pat};

use super::body::parse_block;
use super::model::{Block, Expr, Helper, Stmt};
use crate::errors::Errors;
use crate::span::Span;

/// Parses a helper's function. Parameter types are not checked (they document the kind of
/// value: `Tile`, `Index`, `usize`, `f32`, `bool`); the body is kernel code whose tail is the
/// helper's value.
pub fn parse_helper(func: &syn::ItemFn, errors: &mut Errors) -> Option<Helper> {
    let sig = &func.sig;
    if !sig.generics.params.is_empty() {
        errors.push(
            Span::of(&sig.generics),
            "a helper takes its compile-time values as arguments: it has no generic parameters",
        );
    }
    for (what, present) in [
        ("`const`", sig.constness.is_some()),
        ("`async`", sig.asyncness.is_some()),
        ("`unsafe`", !matches!(sig.safety, syn::Safety::Default)),
        ("`extern`", sig.abi.is_some()),
    ] {
        if present {
            errors.push(Span::of(sig), format!("a helper cannot be {what}"));
        }
    }
    if crate::lower::is_builtin(&sig.ident.unraw_string()) {
        errors.push(
            Span::of(&sig.ident),
            format!(
                "`{}` is a function of the language: a helper needs another name",
                sig.ident
            ),
        );
    }
    let mut params = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(p) => params.push(syn::ext::IdentExt::unraw(&p.ident)),
                other => errors.push(Span::of(other), "a helper parameter is a plain name"),
            },
            FnArg::Receiver(r) => errors.push(Span::of(r), "a helper has no `self` parameter"),
        }
    }
    let body = parse_block(&func.block, errors);
    Some(Helper {
        name: syn::ext::IdentExt::unraw(&sig.ident),
        params,
        body,
    })
}

/// The `macro_rules!` a `#[helper]` expands to, carrying the helper's tokens, and its import
/// into the module (so that kernels anywhere in the crate can name it).
pub fn helper_macro(func: &syn::ItemFn) -> TokenStream {
    let name = &func.sig.ident;
    let vis = match &func.vis {
        syn::Visibility::Inherited => quote!(),
        _ => quote!(pub(crate)),
    };
    let doc = format!(
        "The helper `{name}`: a function of tiles that `#[kernel]` inlines where a kernel calls it."
    );
    quote! {
        #[doc = #doc]
        #[allow(unused_macros)]
        macro_rules! #name {
            (@nki_helpers [$next:ident $(, $rest:ident)*] { $($defs:tt)* } $($kernel:tt)*) => {
                $next! { @nki_helpers [$($rest),*] { $($defs)* #func } $($kernel)* }
            };
            (@nki_helpers [] { $($defs:tt)* } $($kernel:tt)*) => {
                ::nki::__kernel_with_helpers! { { $($defs)* #func } $($kernel)* }
            };
        }
        #[allow(unused_imports)]
        #vis use #name;
    }
}

/// The chain of helper macros that brings the definitions of `missing` to the kernel
/// (`payload`: `[attribute] item`), after the definitions already gathered.
pub fn chain(missing: &[Ident], gathered: TokenStream, payload: TokenStream) -> TokenStream {
    let (first, rest) = missing.split_first().expect("a helper to fetch");
    quote!(#first! { @nki_helpers [#(#rest),*] { #gathered } #payload })
}

/// The functions a block calls that are neither the language's nor among `known`, in order of
/// first call, each once (with the span of a call, for errors).
pub fn unknown_calls(block: &Block, known: &dyn Fn(&str) -> bool, out: &mut Vec<Ident>) {
    for s in &block.stmts {
        match s {
            Stmt::Let { value, .. } | Stmt::Expr(value) | Stmt::Assert { cond: value, .. } => {
                expr_calls(value, known, out)
            }
            Stmt::Assign { target, value } | Stmt::OpAssign { target, value, .. } => {
                expr_calls(target, known, out);
                expr_calls(value, known, out);
            }
            Stmt::For {
                start,
                trip,
                step,
                body,
                ..
            } => {
                for e in [start.as_deref(), Some(trip), step.as_deref()]
                    .into_iter()
                    .flatten()
                {
                    expr_calls(e, known, out);
                }
                unknown_calls(body, known, out);
            }
            Stmt::NoReorder { body, .. } => unknown_calls(body, known, out),
        }
    }
    if let Some(t) = &block.tail {
        expr_calls(t, known, out);
    }
}

fn expr_calls(e: &Expr, known: &dyn Fn(&str) -> bool, out: &mut Vec<Ident>) {
    match e {
        Expr::Call { func, args, .. } => {
            let name = func.to_string();
            // A name one edit from the language's own is a typo, reported as one.
            let helper = !crate::lower::is_builtin(&name)
                && !crate::lower::near_builtin(&name)
                && !crate::lower::is_refused(&name);
            if helper && !known(&name) && !out.iter().any(|f| *f == name) {
                out.push(func.clone());
            }
            for a in args {
                expr_calls(&a.value, known, out);
            }
        }
        Expr::Method { recv, args, .. } => {
            expr_calls(recv, known, out);
            for a in args {
                expr_calls(&a.value, known, out);
            }
        }
        Expr::Binary { .. } => {
            // Down the left side of a chain `a + b + c ...` in a loop: it is as deep as it is
            // long. In the order of the tokens.
            let mut rights = Vec::new();
            let mut leaf = e;
            while let Expr::Binary { lhs, rhs, .. } = leaf {
                rights.push(&**rhs);
                leaf = lhs;
            }
            expr_calls(leaf, known, out);
            for r in rights.into_iter().rev() {
                expr_calls(r, known, out);
            }
        }
        Expr::Neg(x, _) | Expr::Not(x, _) => expr_calls(x, known, out),
        Expr::Named { call, .. } => expr_calls(call, known, out),
        Expr::Field { base, .. } => expr_calls(base, known, out),
        Expr::Index { base, indices, .. } => {
            expr_calls(base, known, out);
            for i in indices {
                expr_calls(i, known, out);
            }
        }
        Expr::Range { start, end, .. } => {
            for x in [start, end].into_iter().flatten() {
                expr_calls(x, known, out);
            }
        }
        Expr::Array(xs, _) | Expr::Tuple(xs, _) | Expr::Mgrid(xs, _) => {
            for x in xs {
                expr_calls(x, known, out);
            }
        }
        Expr::Closure { body, .. } => unknown_calls(body, known, out),
        Expr::If {
            cond, then, els, ..
        } => {
            expr_calls(cond, known, out);
            unknown_calls(then, known, out);
            if let Some(b) = els {
                unknown_calls(b, known, out);
            }
        }
        Expr::Int(..)
        | Expr::Float(..)
        | Expr::Str(..)
        | Expr::Bool(..)
        | Expr::Name(_)
        | Expr::Error(_) => {}
    }
}

/// `unraw` as a string.
trait UnrawString {
    fn unraw_string(&self) -> String;
}

impl UnrawString for Ident {
    fn unraw_string(&self) -> String {
        syn::ext::IdentExt::unraw(self).to_string()
    }
}
