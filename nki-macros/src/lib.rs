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
    if errors.is_empty() {
        let lowered = lower::lower(&kernel, &mut errors);
        if errors.is_empty()
            && let Some(program) = check::check(lowered, kernel.name.span().into(), &mut errors)
        {
            return emit::kernel(&kernel, &program);
        }
    } else {
        // The body is still lowered so that its errors are reported together with the
        // signature's.
        let _ = lower::lower(&kernel, &mut errors);
    }
    let mut out = errors.to_compile_errors();
    out.extend(emit::fallback(&kernel));
    out
}
