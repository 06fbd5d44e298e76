//! The hook through which host shortcuts enter a run, as observers do.
//!
//! The interpreter calls a [`HostPlan`] at two points: when a loop is about to start, and when
//! an instruction's engine routine is about to run. A plan may do the work itself there (run a
//! loop's iterations on two threads, run neighbouring instructions as one step) and say so;
//! the interpreter then skips what the plan did. What an instruction computes stays the
//! interpreter's and the engines': a plan only chooses how the host gets there, and every plan
//! gives the results of [`Serial`], which takes no shortcut, bit for bit. Strict and observed
//! runs use [`Serial`]; plain runs the host's plan (`crate::host`).

use nki_lang::{Instr, VarValues};

use super::{ExecError, Frame};
use crate::bind::Bound;
use crate::engines::EngineState;
use crate::operand::Operands;

/// How a run takes host shortcuts. Every method defaults to taking none.
pub(crate) trait HostPlan<'i> {
    /// Called when the loop `begin..=end` (its `LoopBegin` and `LoopEnd` indices) is about to
    /// run its `trip ≥ 1` iterations from state `f`: runs the whole loop and returns `Ok(true)`,
    /// or returns `Ok(false)` having run nothing.
    #[inline(always)]
    fn run_loop(
        &mut self,
        e: &mut EngineState,
        b: &mut Bound<'i, '_, '_>,
        f: &Frame,
        (begin, end): (usize, usize),
        trip: u64,
    ) -> Result<bool, ExecError> {
        let _ = (e, b, f, begin, end, trip);
        Ok(false)
    }

    /// Called when instruction `ins` at `pc` (operands `ops`, loop values `vars`, the run
    /// ending before `stop`) is about to run: runs it, perhaps with the instructions after it,
    /// and returns how many of those it also ran; `None` when it is to run as written.
    #[inline(always)]
    fn step(
        &mut self,
        e: &mut EngineState,
        b: &mut Bound<'i, '_, '_>,
        ins: &Instr,
        ops: &Operands,
        (pc, stop): (usize, usize),
        vars: &VarValues,
    ) -> Option<usize> {
        let _ = (e, b, ins, ops, pc, stop, vars);
        None
    }

    /// Called when instruction `ins` at `pc` does not run in this execution: its mask leaves
    /// no element.
    #[inline(always)]
    fn masked_out(&mut self, pc: usize, ins: &Instr) {
        let _ = (pc, ins);
    }
}

/// The plan that takes no shortcut: every instruction runs as written, every loop serially.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct Serial;

impl HostPlan<'_> for Serial {}
