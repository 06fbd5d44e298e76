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

impl Span {
    /// The range covered by an expression's tokens, found by walking down its left and right
    /// edges: unlike [`Span::of`], it does not print the expression, so that it costs the
    /// expression's depth rather than its size (spans of every node of a long sum stay linear).
    pub fn of_expr(e: &syn::Expr) -> Span {
        let start = first_token(e);
        Span {
            start,
            end: last_token(e),
        }
    }
}

/// The span of an expression's first token.
fn first_token(mut e: &syn::Expr) -> TokenSpan {
    use syn::Expr as E;
    loop {
        if let Some(a) = attrs(e).first() {
            return a.pound_token.span;
        }
        e = match e {
            E::Binary(b) => &b.left,
            E::MethodCall(m) => &m.receiver,
            E::Field(f) => &f.base,
            E::Index(i) => &i.expr,
            E::Call(c) => &c.func,
            E::Cast(c) => &c.expr,
            E::Try(t) => &t.expr,
            E::Await(a) => &a.base,
            E::Assign(a) => &a.left,
            E::Range(r) => match &r.start {
                Some(s) => s,
                None => return Span::of(&r.limits).start,
            },
            E::Lit(l) => return l.lit.span(),
            E::Unary(u) => return Span::of(&u.op).start,
            E::Reference(r) => return r.and_token.span,
            E::Paren(p) => return p.paren_token.span.open(),
            E::Tuple(t) => return t.paren_token.span.open(),
            E::Array(a) => return a.bracket_token.span.open(),
            E::Group(g) => return g.group_token.span,
            E::If(i) => return i.if_token.span,
            E::Macro(m) => return Span::of(&m.mac.path).start,
            E::Path(p) if p.qself.is_none() => return Span::of(&p.path).start,
            other => return Span::of(other).start,
        };
    }
}

/// The span of an expression's last token.
fn last_token(mut e: &syn::Expr) -> TokenSpan {
    use syn::Expr as E;
    loop {
        e = match e {
            E::Binary(b) => &b.right,
            E::Unary(u) => &u.expr,
            E::Reference(r) => &r.expr,
            E::Assign(a) => &a.right,
            E::Range(r) => match &r.end {
                Some(end) => end,
                None => return Span::of(&r.limits).end,
            },
            E::If(i) => match &i.else_branch {
                Some((_, els)) => els,
                None => return i.then_branch.brace_token.span.close(),
            },
            E::Lit(l) => return l.lit.span(),
            E::Call(c) => return c.paren_token.span.close(),
            E::MethodCall(m) => return m.paren_token.span.close(),
            E::Index(i) => return i.bracket_token.span.close(),
            E::Field(f) => return Span::of(&f.member).end,
            E::Paren(p) => return p.paren_token.span.close(),
            E::Tuple(t) => return t.paren_token.span.close(),
            E::Array(a) => return a.bracket_token.span.close(),
            E::Group(g) => return g.group_token.span,
            E::Try(t) => return t.question_token.span,
            E::Block(b) => return b.block.brace_token.span.close(),
            E::Macro(m) => {
                return match &m.mac.delimiter {
                    syn::MacroDelimiter::Paren(p) => p.span.close(),
                    syn::MacroDelimiter::Brace(b) => b.span.close(),
                    syn::MacroDelimiter::Bracket(b) => b.span.close(),
                };
            }
            E::Path(p) => return Span::of(&p.path).end,
            other => return Span::of(other).end,
        };
    }
}

/// An expression's outer attributes (they come before its first token).
fn attrs(e: &syn::Expr) -> &[syn::Attribute] {
    use syn::Expr as E;
    match e {
        E::Array(x) => &x.attrs,
        E::Assign(x) => &x.attrs,
        E::Binary(x) => &x.attrs,
        E::Call(x) => &x.attrs,
        E::Cast(x) => &x.attrs,
        E::Field(x) => &x.attrs,
        E::Group(x) => &x.attrs,
        E::If(x) => &x.attrs,
        E::Index(x) => &x.attrs,
        E::Lit(x) => &x.attrs,
        E::Macro(x) => &x.attrs,
        E::MethodCall(x) => &x.attrs,
        E::Paren(x) => &x.attrs,
        E::Path(x) => &x.attrs,
        E::Range(x) => &x.attrs,
        E::Reference(x) => &x.attrs,
        E::Try(x) => &x.attrs,
        E::Tuple(x) => &x.attrs,
        E::Unary(x) => &x.attrs,
        _ => &[],
    }
}
