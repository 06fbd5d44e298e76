//! Checking: `ProgramBuf::finish` applies the rules of `nki-lang`; each violation is reported
//! on the tokens of the instruction operand, tile or tensor it concerns.

use crate::span::Span;
use nki_lang::ops::Part;
use nki_lang::{CompiledProgram, RuleViolation, Site};

use crate::errors::{Errors, message};
use crate::lower::Lowered;

/// Checks a lowered kernel; on failure every violation is reported at its span.
pub fn check(lowered: Lowered, fallback: Span, errors: &mut Errors) -> Option<CompiledProgram> {
    let Lowered { buf, spans } = lowered;
    // A symbol's span, by name: `finish` reports an unbound symbol on the program as a whole.
    let symbol_spans: Vec<(String, Span)> = buf
        .symbols
        .iter()
        .cloned()
        .zip(spans.symbols.iter().copied())
        .collect();
    let diags = match buf.finish() {
        Ok(p) => return Some(p),
        Err(diags) => diags,
    };
    for d in diags {
        let span = match (d.site, &d.violation) {
            (Site::Program, RuleViolation::UnboundSymbol { name }) => symbol_spans
                .iter()
                .find(|(n, _)| n == name)
                .map_or(fallback, |&(_, s)| s),
            (Site::Program, _) => fallback,
            (Site::Tile(t), _) => spans.tiles.get(t).copied().unwrap_or(fallback),
            (Site::Tensor(t), _) => spans.tensors.get(t).copied().unwrap_or(fallback),
            (Site::Instr(instr), _) => spans.instrs.get(instr).map_or(fallback, |s| s.whole),
            (Site::Operand { instr, slot }, _) => spans
                .instrs
                .get(instr)
                .map_or(fallback, |s| s.get(Part::Slot(slot))),
        };
        // An instruction inlined from a helper: where the helper was called.
        let note = match d.site {
            Site::Instr(instr) | Site::Operand { instr, .. } => spans
                .instrs
                .get(instr)
                .and_then(|s| s.note)
                .and_then(|n| spans.notes.get(n as usize)),
            Site::Program | Site::Tile(_) | Site::Tensor(_) => None,
        };
        match note {
            Some(note) => errors.push(span, format!("{}\n{note}", message(&d.violation))),
            None => errors.push(span, message(&d.violation)),
        }
    }
    None
}
