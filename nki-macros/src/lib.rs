//! `#[kernel]`: lowers an NKI kernel written as a Rust function to a static program at compile
//! time.
//!
//! This file holds the entry points only; each calls its expansion in `expand`. The expansion
//! parses the function into this crate's model of a kernel (`parse`), lowers the body to
//! `nki-lang`'s instructions (`lower`), applies the hardware's rules and assigns SBUF and PSUM
//! addresses (`check`, with `nki-lang`'s one implementation of each rule), and emits the program
//! as a `static` with typed launch functions (`emit`). Every error is reported on the user's
//! tokens, all of them at once. Use it through the `nki` crate, which documents the language.
//!
//! A match on `nki-lang`'s enums (opcodes, dtypes, engines, functions) or on this crate's own
//! kinds (an ISA call's parameters, a destination, a loop's kind) names every variant. The `_`
//! arms that remain are type checks' fallbacks, "expected a tile, found …", over `syn`'s
//! non-exhaustive syntax trees and a kernel's values; that is why clippy's
//! `wildcard_enum_match_arm`, on in `nki-lang` and `nki-runtime`, is not on here.

#![warn(missing_docs)]

mod check;
mod depth;
mod emit;
mod errors;
mod expand;
mod lower;
#[cfg(test)]
mod mutations;
#[cfg(test)]
mod nki_api_coverage;
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
    expand::expand(attr.into(), item.into(), proc_macro2::TokenStream::new()).into()
}

/// Declares a helper: a function of tiles, indices and numbers that kernels call and
/// `#[kernel]` inlines at each call.
///
/// See the `nki` crate's documentation for the language.
#[proc_macro_attribute]
pub fn helper(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::helper(attr.into(), item.into()).into()
}

/// The end of a chain of helper macros: `{ helper definitions } [attribute] kernel item`.
/// Emitted by `#[kernel]`, not to be written by hand.
#[doc(hidden)]
#[proc_macro]
pub fn __kernel_with_helpers(input: TokenStream) -> TokenStream {
    expand::kernel_with_helpers(input.into()).into()
}
