//! The interpreter: walks a program's instructions with a fixed-size loop stack and hands
//! each instruction to its engine's routine.
//!
//! Loops: `LoopBegin` evaluates the trip count for the bound symbols and skips the body when
//! it is 0, else pushes the loop; `LoopEnd` advances the induction value and jumps back to the
//! body's first instruction, or pops. The induction values by depth ([`LoopValues`]) feed
//! every operand's affine indices. Nothing is allocated.

use nki_lang::{Instr, LoopValues, MAX_LOOP_DEPTH, Op, PsumWrite};

use crate::engines::{Engines, dma, tensor, vector};
use crate::launch::Bound;

/// Sees every instruction as it is executed, with its engine ([`Instr::engine`]) and the loop
/// values of that execution: the hook for a per-engine timing model.
pub(crate) trait Observer {
    /// Called before instruction `index` runs (loop control included).
    fn instr(&mut self, index: usize, instr: &Instr, ivs: &LoopValues);
}

/// The observer of an untimed run: does nothing.
pub(crate) struct Untimed;

impl Observer for Untimed {
    #[inline(always)]
    fn instr(&mut self, _index: usize, _instr: &Instr, _ivs: &LoopValues) {}
}

/// Runs a bound program to completion.
pub(crate) fn run<O: Observer>(e: &mut Engines, b: &mut Bound<'_, '_, '_>, obs: &mut O) {
    let p = b.program;
    let instrs = p.instrs();
    let syms = b.syms;
    let mut ivs: LoopValues = [0; MAX_LOOP_DEPTH];
    let mut trips = [0i64; MAX_LOOP_DEPTH];
    let mut depth = 0usize;
    let mut pc = 0usize;
    while let Some(ins) = instrs.get(pc) {
        obs.instr(pc, ins, &ivs);
        match &ins.op {
            Op::LoopBegin { trip, end, .. } => {
                let n = trip.eval(&syms) as i64;
                if n <= 0 {
                    pc = *end as usize + 1;
                    continue;
                }
                trips[depth] = n;
                ivs[depth] = 0;
                depth += 1;
            }
            Op::LoopEnd { begin } => {
                let d = depth - 1;
                ivs[d] += 1;
                if ivs[d] < trips[d] {
                    pc = *begin as usize + 1;
                    continue;
                }
                ivs[d] = 0;
                depth = d;
            }
            Op::Load { src, dst } => dma::load(e, b, &ivs, src, dst),
            Op::Store { dst, src } => dma::store(e, b, &ivs, dst, src),
            Op::Matmul {
                stationary,
                moving,
                dst,
                write,
            } => {
                let accumulate = match *write {
                    PsumWrite::Overwrite => false,
                    PsumWrite::Accumulate => true,
                    PsumWrite::Group { loops } => {
                        (0..MAX_LOOP_DEPTH).any(|d| loops >> d & 1 == 1 && ivs[d] != 0)
                    }
                };
                tensor::matmul(e, p, &ivs, stationary, moving, dst, accumulate);
            }
            Op::Transpose { src, dst } => tensor::transpose(e, p, &ivs, src, dst),
            Op::Copy { src, dst } => vector::copy(e, p, &ivs, src, dst),
            Op::Memset { dst, value } => vector::memset(e, p, &ivs, dst, *value),
        }
        pc += 1;
    }
}
