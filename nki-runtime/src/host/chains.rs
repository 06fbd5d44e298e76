//! Matmuls that accumulate into one PSUM tile one after another, run as one step with the
//! output's rows split between the host threads once for all of them:
//! - with a narrow moving operand (the NKI Library's decode attention computes `vᵀp` as one
//!   matmul per column tile of positions, 64 or 80 of them into one `[d_head, 5]`
//!   accumulator), one pass of the narrow matmul kernel whose accumulators stay in registers
//!   from one matmul to the next (`engines::tensor::narrow_chain`), where each matmul alone is
//!   too small to split;
//! - with a wider one (the library's router accumulates 16 `[128, 128]` products per token
//!   tile), each thread packs and computes its rows of every matmul in turn
//!   (`engines::tensor::packed_chain`), where each matmul alone would hand its half over and
//!   wait for it.
//!
//! At such a matmul, the instructions after it are looked at, up to [`MAX_LINKS`] in all, while
//! they are matmuls into the same destination that accumulate. Each output element is still
//! one FMA chain over the matmuls' `k` in program order, as the matmuls one after the other
//! compute it (under the exponent proof for the whole chain no intermediate result is tiny, so
//! the flush of each result and the DAZ of the next initial value change nothing): the same
//! bits. The matmuls write only their destination in PSUM and read only SBUF, so none reads
//! what another writes.

use nki_lang::{Instr, InstrData, Opcode, VarValues};

use crate::bind::Bound;
use crate::cpu::matmul::{NARROW_CHAIN, NARROW_COLUMNS};
use crate::engines::{EngineState, tensor};
use crate::host::input_tiles::InputTiles;
use crate::operand::{self, Loc, Operands};
use crate::worker::Reach;

/// Most matmuls in one chain.
const MAX_LINKS: usize = NARROW_CHAIN;

/// Whether a matmul's operands may be a link, and of which kind of chain: a PSUM
/// destination, operands in SBUF; `Some(true)` for a moving operand of at most
/// [`NARROW_COLUMNS`] columns (a narrow chain).
fn link(ops: &Operands) -> Option<bool> {
    let (dst, st, mv) = (ops.slot(0)?, ops.slot(1)?, ops.slot(2)?);
    let n: usize = mv.dims[1..].iter().product();
    (dst.loc == Loc::Psum && st.loc == Loc::Sbuf && mv.loc == Loc::Sbuf)
        .then_some(n <= NARROW_COLUMNS)
}

/// Runs the chain of accumulating matmuls that starts at `ins` (at `pc`, operands `ops`) in one
/// pass, when there is one of at least two; returns how many instructions after `ins` it also
/// ran, or `None` when `ins` is to run as written. Operands of tiles whose loads were skipped
/// are read from the inputs (`inputs`; a link that reads one otherwise ends the chain before it).
pub(crate) fn step<'i, 'p, 'o>(
    e: &mut EngineState,
    b: &mut Bound<'i, 'p, 'o>,
    ins: &Instr,
    ops: &Operands,
    (pc, stop): (usize, usize),
    vars: &VarValues,
    inputs: &InputTiles,
) -> Option<usize> {
    let InstrData::Matmul { dst, .. } = ins.data else {
        return None;
    };
    if ins.opcode != Opcode::Matmul {
        return None;
    }
    let narrow = link(ops)?;
    let first = inputs.matmul_operands(b, ins, ops)?;
    let from_inputs = first.iter().all(Option::is_some);
    // The narrow kernel reads its operands in SBUF.
    if narrow && first.iter().any(Option::is_some) {
        return None;
    }
    // A wide chain splits between the threads or runs as written: without a worker nearby (or
    // far, for operands of inputs) it is not looked for (nor again from each of its matmuls).
    let splits = e.worker.as_mut().is_some_and(|w| match w.reach() {
        Reach::Near => true,
        Reach::Far => from_inputs,
        Reach::Away => false,
    });
    if !narrow && !splits {
        return None;
    }
    let dst0 = ops.slot(0)?;
    let sbuf_stride = e.sbuf.partition_stride();
    let instrs = b.program.instrs();
    // The next link and its operands of inputs, if the instruction after this one is one that
    // reads inputs where the first does.
    let next_link = |b: &mut Bound<'i, 'p, 'o>, at: usize| {
        let next = instrs.get(at).filter(|_| at < stop)?;
        let InstrData::Matmul { dst: d, .. } = next.data else {
            return None;
        };
        if next.opcode != Opcode::Matmul || !d.write.accumulates_at(vars) {
            return None;
        }
        let r = operand::resolve(b, next, vars, sbuf_stride).filter(|r| {
            link(r) == Some(narrow) && r.slot(0).is_some_and(|d| d.same_elements(dst0))
        })?;
        let from = inputs
            .matmul_operands(b, next, &r)
            .filter(|f| f.map(|o| o.is_some()) == first.map(|o| o.is_some()))?;
        Some((r, from))
    };
    // Most matmuls are no chain: nothing more is built for them.
    let second = next_link(b, pc + 1)?;
    let mut chain = [*ops; MAX_LINKS];
    let mut from = [first; MAX_LINKS];
    (chain[1], from[1]) = second;
    let mut len = 2;
    while len < MAX_LINKS
        && let Some((r, f)) = next_link(b, pc + len)
    {
        (chain[len], from[len]) = (r, f);
        len += 1;
    }
    let accumulate = dst.write.accumulates_at(vars);
    let ran = if narrow {
        tensor::narrow_chain(e, &chain[..len], accumulate)
    } else {
        tensor::packed_chain(e, &chain[..len], accumulate, &from[..len])
    };
    ran.then_some(len - 1)
}
