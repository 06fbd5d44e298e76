//! Source ranges: the first and last token of an expression.
//!
//! Stable proc macros cannot join two spans into one, so an error that should underline a whole
//! expression carries both ends; [`crate::errors::Errors`] turns them into a `syn::Error` that
//! rustc reports from the first token to the last.

use proc_macro2::{Span as TokenSpan, TokenStream};
use quote::ToTokens;

/// A range of source tokens.
#[derive(Copy, Clone, Debug)]
pub struct Span {
    /// The first token's span.
    pub start: TokenSpan,
    /// The last token's span.
    pub end: TokenSpan,
}

impl Span {
    /// The range covered by a syntax node's tokens.
    pub fn of(node: &impl ToTokens) -> Span {
        let tokens: TokenStream = node.to_token_stream();
        let mut it = tokens.into_iter();
        let start = it
            .next()
            .map(|t| t.span())
            .unwrap_or_else(TokenSpan::call_site);
        let end = it.last().map(|t| t.span()).unwrap_or(start);
        Span { start, end }
    }

    /// The line the range starts on (1-based), for instruction line numbers.
    pub fn line(&self) -> u32 {
        self.start.start().line as u32
    }
}

impl From<TokenSpan> for Span {
    fn from(s: TokenSpan) -> Span {
        Span { start: s, end: s }
    }
}
