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
    list: Vec<(Span, String)>,
}

impl Errors {
    /// Records an error underlining `span`.
    pub fn push(&mut self, span: impl Into<Span>, message: impl std::fmt::Display) {
        self.list.push((span.into(), message.to_string()));
    }

    /// Records a syn error.
    pub fn push_syn(&mut self, e: syn::Error) {
        for one in e {
            self.list.push((one.span().into(), one.to_string()));
        }
    }

    /// Whether any error was recorded.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The errors, each with its span.
    pub fn into_list(self) -> Vec<(Span, String)> {
        self.list
    }

    /// Records the errors of a kernel's instantiations (`labels[i]` names instantiation `i`,
    /// `per[i]` holds its errors): an error that several of them report at the same tokens is
    /// reported once, naming them.
    pub fn extend_instances(&mut self, labels: &[String], per: Vec<Errors>) {
        // (span, message, the instantiations that report it), in first-seen order.
        let mut merged: Vec<(Span, String, Vec<usize>)> = Vec::new();
        for (i, errors) in per.into_iter().enumerate() {
            for (span, msg) in errors.list {
                let key = |s: &Span, m: &str| format!("{:?}{:?}{m}", s.start, s.end);
                let k = key(&span, &msg);
                // The same error at the same tokens (a statement of an unrolled loop) is
                // one error, naming its instantiation once.
                match merged.iter_mut().find(|(s, m, _)| key(s, m) == k) {
                    Some((_, _, who)) if who.contains(&i) => {}
                    Some((_, _, who)) => who.push(i),
                    None => merged.push((span, msg, vec![i])),
                }
            }
        }
        for (span, msg, who) in merged {
            let names: Vec<&str> = who.iter().map(|&i| labels[i].as_str()).collect();
            let whom = match names.as_slice() {
                _ if labels.len() > 1 && names.len() == labels.len() => {
                    "in every instantiation".to_string()
                }
                [one] => format!("in the instantiation {one}"),
                many => format!("in the instantiations {}", many.join(", ")),
            };
            self.list.push((span, format!("{msg}\n{whom}")));
        }
    }

    /// Each error's message and the line and column its span starts at (for tests).
    #[cfg(test)]
    pub fn reported(&self) -> Vec<(String, usize, usize)> {
        self.list
            .iter()
            .map(|(span, msg)| {
                let start = span.start.start();
                (msg.clone(), start.line, start.column)
            })
            .collect()
    }

    /// The errors as `compile_error!` invocations, each underlining its range.
    pub fn to_compile_errors(&self) -> TokenStream {
        self.list
            .iter()
            .map(|(span, msg)| {
                let mut first = Punct::new('#', Spacing::Alone);
                first.set_span(span.start);
                let mut last = Punct::new('#', Spacing::Alone);
                last.set_span(span.end);
                let range: TokenStream = [TokenTree::Punct(first), TokenTree::Punct(last)]
                    .into_iter()
                    .collect();
                syn::Error::new_spanned(range, msg).to_compile_error()
            })
            .collect()
    }
}
