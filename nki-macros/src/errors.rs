//! Accumulated diagnostics: every error is collected and all are reported together.

use proc_macro2::{Punct, Spacing, TokenStream, TokenTree};

use nki_lang::RuleViolation;

use crate::span::Span;

/// The message of a violation: the rule and its limit, with NKI's error code.
pub fn message(v: &RuleViolation) -> String {
    format!("{v} ({})", v.code())
}

/// A list of spanned errors.
#[derive(Default)]
pub struct Errors {
    list: Vec<syn::Error>,
}

impl Errors {
    /// Records an error underlining `span`.
    pub fn push(&mut self, span: impl Into<Span>, message: impl std::fmt::Display) {
        let span = span.into();
        let mut first = Punct::new('#', Spacing::Alone);
        first.set_span(span.start);
        let mut last = Punct::new('#', Spacing::Alone);
        last.set_span(span.end);
        let range: TokenStream = [TokenTree::Punct(first), TokenTree::Punct(last)]
            .into_iter()
            .collect();
        self.list.push(syn::Error::new_spanned(range, message));
    }

    /// Records a syn error.
    pub fn push_syn(&mut self, e: syn::Error) {
        self.list.push(e);
    }

    /// Whether any error was recorded.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Each error's message and the line and column its span starts at (for tests).
    #[cfg(test)]
    pub fn reported(&self) -> Vec<(String, usize, usize)> {
        self.list
            .iter()
            .flat_map(|e| e.clone().into_iter())
            .map(|e| {
                let start = e.span().start();
                (e.to_string(), start.line, start.column)
            })
            .collect()
    }

    /// The errors as `compile_error!` invocations.
    pub fn to_compile_errors(&self) -> TokenStream {
        self.list.iter().map(syn::Error::to_compile_error).collect()
    }
}
