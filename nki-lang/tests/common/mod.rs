//! Helpers shared by the integration tests: literal shapes, finishing a program and
//! collecting its diagnostics, and naming an instruction operand's site.

// Each test file uses only some of the helpers.
#![allow(dead_code)]

use nki_lang::builder::{BuildError, ProgramBuilder};
use nki_lang::{CompiledProgram, Diagnostic, Dim, ProgramBuf, Role, Site};

/// A tensor shape of literal dimensions.
pub fn dims(sizes: &[u64]) -> Vec<Dim> {
    sizes.iter().map(|&n| Dim::Fixed(n)).collect()
}

/// Finishes a program that must pass every rule.
pub fn compile(b: ProgramBuilder) -> CompiledProgram {
    b.finish()
        .unwrap_or_else(|e| panic!("expected a valid program, got {e:?}"))
}

/// Finishes a program that must break rules; returns the diagnostics.
pub fn violations(b: ProgramBuilder) -> Vec<Diagnostic> {
    match b.finish() {
        Err(BuildError::Rules(d)) => d,
        Ok(_) => panic!("expected rule violations, but the program compiled"),
        Err(e) => panic!("expected rule violations, got {e:?}"),
    }
}

/// Finishes a hand-edited [`ProgramBuf`] that must break rules; returns the diagnostics.
pub fn buf_violations(p: ProgramBuf) -> Vec<Diagnostic> {
    match p.finish() {
        Err(d) => d,
        Ok(_) => panic!("expected rule violations, but the program compiled"),
    }
}

/// The site of operand `role` of instruction `instr`.
pub fn operand(instr: usize, role: Role) -> Site {
    Site::Operand { instr, role }
}

/// A diagnostic, for comparing whole lists.
pub fn diag(site: Site, violation: nki_lang::RuleViolation) -> Diagnostic {
    Diagnostic { site, violation }
}
