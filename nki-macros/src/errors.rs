//! Accumulated diagnostics: every error is collected and all are reported together.

use proc_macro2::{Span, TokenStream};

/// A list of spanned errors.
#[derive(Default)]
pub struct Errors {
    list: Vec<syn::Error>,
}

impl Errors {
    /// Records an error at `span`.
    pub fn push(&mut self, span: Span, message: impl std::fmt::Display) {
        self.list.push(syn::Error::new(span, message));
    }

    /// Records a syn error.
    pub fn push_syn(&mut self, e: syn::Error) {
        self.list.push(e);
    }

    /// Whether any error was recorded.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The errors as `compile_error!` invocations.
    pub fn to_compile_errors(&self) -> TokenStream {
        self.list.iter().map(syn::Error::to_compile_error).collect()
    }
}
