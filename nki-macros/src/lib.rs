//! `#[kernel]`: lowers an NKI kernel written as a Rust function to a static program at compile
//! time.
//!
//! The expansion parses the function into this crate's model of a kernel (`parse`), lowers the
//! body to `nki-lang`'s instructions (`lower`), applies the hardware's rules and assigns SBUF and
//! PSUM addresses (`check`, with `nki-lang`'s one implementation of each rule), and emits the
//! program as a `static` with typed launch functions (`emit`). Every error is reported on the
//! user's tokens, all of them at once. Use it through the `nki` crate, which documents the
//! language.

#![warn(missing_docs)]

mod check;
mod emit;
mod errors;
mod lower;
mod parse;
mod span;
#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Compiles an NKI kernel into a static program with launch functions.
///
/// See the `nki` crate's documentation for the language.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr.into(), item.into()).into()
}

fn expand(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = errors::Errors::default();
    let Some(kernel) = parse::parse(attr, item, &mut errors) else {
        return errors.to_compile_errors();
    };
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
    let clean = errors.is_empty();
    let lowered = lower::lower(kernel, instance, errors);
    if !clean || !errors.is_empty() {
        return None;
    }
    let program = check::check(lowered, kernel.name.span().into(), errors)?;
    Some(emit::kernel(kernel, instance, &program))
}
