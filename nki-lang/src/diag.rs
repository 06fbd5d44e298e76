//! What [`crate::ProgramBuf::finish`] reports: each broken rule ([`Diagnostic`]) with the part
//! of the program it is about ([`Site`]).

use crate::rules::RuleViolation;

/// Which part of a program a diagnostic is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Site {
    /// The program as a whole.
    Program,
    /// A tile's declaration.
    Tile(usize),
    /// An HBM tensor's declaration.
    Tensor(usize),
    /// An instruction as a whole.
    Instr(usize),
    /// An operand of an instruction, by slot ([`crate::ir::ops::OpInfo::operands`] names it).
    Operand {
        /// Instruction index.
        instr: usize,
        /// The operand's slot.
        slot: u8,
    },
}

/// A broken rule and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The part of the program the rule is about.
    pub site: Site,
    /// The rule and its limit.
    pub violation: RuleViolation,
}
