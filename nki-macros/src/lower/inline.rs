//! Helper calls: a helper's body lowered in place, with its parameters bound to the call's
//! values, as NKI inlines the Python functions a kernel calls.

use std::collections::HashMap;

use super::Lowerer;
use super::call::Dest;
use super::value::Value;
use crate::errors::Errors;
use crate::parse::model::{Arg, Helper};
use crate::span::Span;

/// Helpers calling helpers nest at most this deep.
const MAX_HELPER_DEPTH: usize = 32;

impl Lowerer<'_> {
    /// A call of the helper `h`: its arguments evaluated here, its body lowered with only its
    /// parameters in scope (as a function sees only its arguments), its tail's value written
    /// to `dest`. Errors inside the helper are reported at the helper's tokens, with a note
    /// naming the call.
    pub(super) fn inline(&mut self, h: &Helper, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let name = h.name.to_string();
        if self.inlining.iter().any(|(n, _)| *n == name) {
            return self.error(
                span,
                format!(
                    "the helper `{name}` calls itself: helpers are inlined, so they cannot recurse"
                ),
            );
        }
        if self.inlining.len() == MAX_HELPER_DEPTH {
            return self.error(
                span,
                format!("helpers call helpers at most {MAX_HELPER_DEPTH} deep"),
            );
        }
        let Some(values) = self.helper_args(h, args, span) else {
            return Value::Poison;
        };
        let start = span.start.start();
        let note = match self.inlining.last() {
            None => format!(
                "in the helper `{name}`, called at line {}, column {}",
                start.line,
                start.column.saturating_add(1)
            ),
            Some(&(_, outer)) => format!(
                "in the helper `{name}`, called at line {}, column {}\n{}",
                start.line,
                start.column.saturating_add(1),
                self.spans.notes[outer as usize]
            ),
        };
        self.spans.notes.push(note.clone());
        let id = u32::try_from(self.spans.notes.len().saturating_sub(1)).unwrap_or(u32::MAX);
        self.inlining.push((name, id));
        let scope: HashMap<String, Value> =
            h.params.iter().map(|p| p.to_string()).zip(values).collect();
        let caller_scopes = std::mem::replace(&mut self.scopes, vec![scope]);
        let caller_errors = std::mem::take(self.errors);
        self.block(&h.body);
        let v = h.body.tail.as_ref().map_or(Value::Unit, |t| self.eval(t));
        let inner = std::mem::replace(self.errors, caller_errors);
        self.errors.append_noted(inner, &note);
        self.scopes = caller_scopes;
        self.inlining.pop();
        self.assign(v, span, dest)
    }

    /// The values of a helper call's arguments, by parameter: positional ones first, then
    /// `name = value` ones. `None` after an error.
    fn helper_args(&mut self, h: &Helper, args: &[Arg], span: Span) -> Option<Vec<Value>> {
        let mut values: Vec<Option<Value>> = (0..h.params.len()).map(|_| None).collect();
        let mut ok = true;
        for (k, a) in args.iter().enumerate() {
            let slot = match &a.name {
                None if k < h.params.len() => k,
                None => {
                    self.error(
                        a.value.span(),
                        format!(
                            "the helper `{}` takes {} argument{}",
                            h.name,
                            h.params.len(),
                            if h.params.len() == 1 { "" } else { "s" }
                        ),
                    );
                    ok = false;
                    continue;
                }
                Some(n) => match h.params.iter().position(|p| p == n) {
                    Some(s) => s,
                    None => {
                        self.error(
                            n.span().into(),
                            format!("the helper `{}` has no parameter `{n}`", h.name),
                        );
                        ok = false;
                        continue;
                    }
                },
            };
            let v = self.eval(&a.value);
            if values[slot].replace(v).is_some() {
                self.error(
                    a.value.span(),
                    format!("`{}` is given twice", h.params[slot]),
                );
                ok = false;
            }
        }
        let mut out = Vec::with_capacity(values.len());
        for (p, v) in h.params.iter().zip(values) {
            match v {
                Some(v) => out.push(v),
                None => {
                    self.error(
                        span,
                        format!("the helper `{}` needs its argument `{p}`", h.name),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }
}

impl Errors {
    /// Appends `other`'s errors, each with `note` on a line of its own.
    pub fn append_noted(&mut self, other: Errors, note: &str) {
        for (span, msg) in other.into_list() {
            self.push(span, format!("{msg}\n{note}"));
        }
    }
}
