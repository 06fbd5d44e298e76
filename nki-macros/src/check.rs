//! Checking: `ProgramBuf::finish` applies the rules of `nki-lang`; each violation is reported
//! on the tokens of the instruction operand, tile or tensor it concerns.

use crate::span::Span;
use nki_lang::{CompiledProgram, RuleViolation, Site};

use crate::errors::Errors;
use crate::lower::Lowered;

/// The message of a violation: the rule and its limit, with NKI's error code.
pub fn message(v: &RuleViolation) -> String {
    format!("{v} ({})", v.code())
}

/// Checks a lowered kernel; on failure every violation is reported at its span.
pub fn check(lowered: Lowered, fallback: Span, errors: &mut Errors) -> Option<CompiledProgram> {
    let Lowered { buf, spans } = lowered;
    match buf.finish() {
        Ok(p) => Some(p),
        Err(diags) => {
            for d in diags {
                let span = match d.site {
                    Site::Program => fallback,
                    Site::Tile(t) => spans.tiles.get(t).copied().unwrap_or(fallback),
                    Site::Tensor(t) => spans.tensors.get(t).copied().unwrap_or(fallback),
                    Site::Operand { instr, role } => spans
                        .instrs
                        .get(instr)
                        .map(|s| s.get(role))
                        .unwrap_or(fallback),
                };
                errors.push(span, message(&d.violation));
            }
            None
        }
    }
}
