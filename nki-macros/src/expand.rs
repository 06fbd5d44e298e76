//! The expansions behind the entry points of `lib.rs` (thiserror's `impl/src/lib.rs` +
//! `expand.rs` shape).
//!
//! [`expand`] checks how deeply the kernel nests and continues on a stack sized for it, parses
//! the kernel, fetches the helpers it calls (a chain of helper macros, [`kernel_with_helpers`]
//! at its end), and compiles the kernel, or each of its instantiations with their dtypes
//! substituted ([`compile`]: `lower` → `check` → `emit`). After an error it emits the fallback
//! items, so that one mistake gives its own errors only. [`helper`] checks a helper and emits
//! the macro that passes its definition to the kernels that call it.

use crate::{check, depth, emit, errors, lower, parse, span};

/// `#[helper]` on `item`: its errors, and the macro that hands its definition to kernels.
pub(crate) fn helper(
    attr: proc_macro2::TokenStream,
    mut item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = errors::Errors::default();
    if !attr.is_empty() {
        errors.push(span::Span::of(&attr), "`#[helper]` takes no arguments");
    }
    let mut nesting = depth::check(&item, &mut errors);
    if !nesting.fits() {
        // Reported; the kernels that call the helper get its signature and an empty body.
        item = depth::hollow(&item);
        nesting = depth::nesting(&item);
        if !nesting.fits() {
            return errors.to_compile_errors();
        }
    }
    depth::on_stack(nesting, || {
        let func: syn::ItemFn = match syn::parse2(item) {
            Ok(f) => f,
            Err(e) => {
                let mut out = errors.to_compile_errors();
                out.extend(e.to_compile_error());
                return out;
            }
        };
        let _ = parse::helper::parse_helper(&func, &mut errors);
        let mut out = errors.to_compile_errors();
        out.extend(parse::helper::helper_macro(&func));
        out
    })
}

/// The end of a chain of helper macros, `{ helper definitions } [attribute] kernel item`:
/// [`expand`] with the definitions gathered.
pub(crate) fn kernel_with_helpers(input: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    let mut it = input.into_iter();
    let (Some(proc_macro2::TokenTree::Group(defs)), Some(proc_macro2::TokenTree::Group(attr))) =
        (it.next(), it.next())
    else {
        return quote::quote!(::core::compile_error!("malformed helper chain"););
    };
    expand(attr.stream(), it.collect(), defs.stream())
}

/// Expands `#[kernel(attr)] item` with the helper definitions `defs` gathered so far, on a
/// stack sized for how deeply they nest; a statement nested too deeply for any stack is an
/// error on its tokens, and the kernel's fallback item follows.
pub(crate) fn expand(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
    defs: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = errors::Errors::default();
    let nesting = depth::check(&attr, &mut errors).max(depth::check(&item, &mut errors));
    // `#[helper]` reported its own and sent its signature only.
    let nesting = nesting.max(depth::nesting(&defs));
    if nesting.fits() {
        return depth::on_stack(nesting, || expand_on_stack(attr, item, defs));
    }
    if errors.is_empty() {
        // Only the helpers' definitions, written by hand.
        return quote::quote!(::core::compile_error!("a helper definition nests too deeply"););
    }
    let item = depth::hollow(&item);
    let nesting = depth::nesting(&attr).max(depth::nesting(&item));
    depth::on_stack(nesting, || {
        // The signature's own errors are reported with the body's.
        let kernel = match nesting.fits() {
            true => parse::parse(attr, item, &mut errors),
            false => None,
        };
        let mut out = errors.to_compile_errors();
        if let Some(kernel) = kernel {
            out.extend(fallback(&kernel));
        }
        out
    })
}

/// The items a kernel expands to after an error: each instantiation's (or the kernel's)
/// launch functions with empty bodies, and the list of instantiations.
fn fallback(kernel: &parse::model::Kernel) -> proc_macro2::TokenStream {
    if kernel.meta.is_empty() {
        return emit::fallback(kernel, None);
    }
    let mut out: proc_macro2::TokenStream = kernel
        .instances
        .iter()
        .flat_map(|i| emit::fallback(kernel, Some(i)))
        .collect();
    out.extend(emit::instances(kernel));
    out
}

/// [`expand`] on a stack of its own.
fn expand_on_stack(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
    defs: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = errors::Errors::default();
    let Some(mut kernel) = parse::parse(attr.clone(), item.clone(), &mut errors) else {
        return errors.to_compile_errors();
    };
    // The helpers' own mistakes are reported by their `#[helper]`.
    let funcs: Vec<syn::ItemFn> = syn::parse2::<syn::File>(defs.clone())
        .map(|f| {
            f.items
                .into_iter()
                .filter_map(|i| match i {
                    syn::Item::Fn(f) => Some(f),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    kernel.helpers = funcs
        .iter()
        .filter_map(|f| parse::helper::parse_helper(f, &mut errors::Errors::default()))
        .collect();
    // Helpers the kernel (or a helper) calls whose definitions have not arrived: fetch them.
    let mut missing = Vec::new();
    let known = |n: &str| kernel.helpers.iter().any(|h| h.name == n);
    parse::helper::unknown_calls(&kernel.body, &known, &mut missing);
    for h in &kernel.helpers {
        parse::helper::unknown_calls(&h.body, &known, &mut missing);
    }
    if !missing.is_empty() {
        let payload = quote::quote!([#attr] #item);
        return parse::helper::chain(&missing, defs, payload);
    }
    if kernel.meta.is_empty() {
        return match compile(&kernel, None, &mut errors) {
            Some(out) => out,
            None => {
                let mut out = errors.to_compile_errors();
                out.extend(emit::fallback(&kernel, None));
                out
            }
        };
    }
    // One program per instantiation; an error several of them make is reported once.
    let mut per = Vec::new();
    let mut items = proc_macro2::TokenStream::new();
    let mut failed = !errors.is_empty();
    for inst in &kernel.instances {
        let mut e = errors::Errors::default();
        // An instantiation whose settings are wrong (reported) is not lowered: its poisoned
        // values would only cascade into more errors.
        let settled = kernel.meta.iter().all(|m| {
            let mut set = inst.values.iter().filter(|(p, ..)| *p == m.name);
            match (set.next(), set.next()) {
                (Some((_, v, _)), None) => v.fits(m.kind),
                _ => false,
            }
        });
        if !settled {
            failed = true;
            per.push(e);
            continue;
        }
        match compile(&kernel, Some(inst), &mut e) {
            Some(out) if !failed => items.extend(out),
            _ => {
                failed = true;
                items.extend(emit::fallback(&kernel, Some(inst)));
            }
        }
        per.push(e);
    }
    let labels: Vec<String> = kernel
        .instances
        .iter()
        .map(|i| format!("`{}` ({})", i.name, emit::settings(i)))
        .collect();
    errors.extend_instances(&labels, per);
    let mut out = errors.to_compile_errors();
    if failed {
        // Every instantiation's fallback, so that one mistake gives its errors only.
        out.extend(
            kernel
                .instances
                .iter()
                .flat_map(|i| emit::fallback(&kernel, Some(i))),
        );
    } else {
        out.extend(items);
    }
    out.extend(emit::instances(&kernel));
    out
}

/// Lowers, checks and emits one kernel (or instantiation); `None` after an error (recorded in
/// `errors`). After errors in the signature the body is still lowered, so that its errors are
/// reported together with the signature's.
fn compile(
    kernel: &parse::model::Kernel,
    instance: Option<&parse::model::Instance>,
    errors: &mut errors::Errors,
) -> Option<proc_macro2::TokenStream> {
    // The signature's dtype parameters, resolved for the instantiation.
    let resolved;
    let kernel = match instance {
        Some(i) if has_dtype_params(kernel) => {
            resolved = with_dtypes(kernel, i);
            &resolved
        }
        _ => kernel,
    };
    let clean = errors.is_empty();
    let lowered = lower::lower(kernel, instance, errors);
    if !clean || !errors.is_empty() {
        return None;
    }
    let program = check::check(lowered, kernel.name.span().into(), errors)?;
    Some(emit::kernel(kernel, instance, &program))
}

fn has_dtype_params(k: &parse::model::Kernel) -> bool {
    k.params
        .iter()
        .map(|p| &p.ty)
        .chain(&k.returns)
        .any(|t| t.dtype_param.is_some())
}

/// `k` with each dtype parameter of its signature replaced by the instantiation's dtype.
fn with_dtypes(k: &parse::model::Kernel, inst: &parse::model::Instance) -> parse::model::Kernel {
    let mut k = k.clone();
    let resolve = |t: &mut parse::model::TensorType| {
        if let Some(p) = &t.dtype_param
            && let Some((_, parse::model::MetaValue::DType(d), _)) =
                inst.values.iter().find(|(n, ..)| n == p)
        {
            t.dtype = *d;
        }
    };
    for p in &mut k.params {
        resolve(&mut p.ty);
    }
    k.returns.iter_mut().for_each(resolve);
    k
}
