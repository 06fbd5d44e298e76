//! Every absolute path the expansion emits, in one place.

use proc_macro2::TokenStream;
use quote::quote;

/// The facade crate's hidden module that generated code uses.
pub fn private() -> TokenStream {
    quote!(::nki::__private)
}

/// A path inside the hidden module.
pub fn item(name: &str) -> TokenStream {
    let p = private();
    let id = proc_macro2::Ident::new(name, proc_macro2::Span::call_site());
    quote!(#p::#id)
}
