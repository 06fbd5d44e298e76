//! Loops that are one accumulation group: a body of one matmul into a PSUM tile that every
//! iteration adds to (`res += nc_matmul(...)` over a loop of `K` tiles), perhaps after the
//! loads of its operands. The matmul tutorial's shape runs 8 such loops of 8 matmuls per block
//! of its result, the tiled 1024³ matmul 8 loops of 8 (each with its two loads) per thread.
//!
//! Each matmul alone stores its block of results to PSUM and the next loads it back: with
//! `K = 128` that is a tenth of the `vdpbf16ps` kernel's time. Here, when the loop starts, its
//! iterations' operands are resolved (the loop value set to each in turn) and the matmuls run
//! in passes of the kernel ([`tensor::register_chain`]), each block of results in registers
//! from the first matmul of a pass to the last, when:
//! - the loop is an `affine_range` or `sequential_range` of 2 to [`GROUP_TRIPS`] iterations
//!   (passes of [`PACKED_CHAIN`] matmuls) and the launch has no instruction budget or stop
//!   handle (the loop runs whole);
//! - every iteration's matmul has the same PSUM destination and accumulates into it, except
//!   perhaps the first;
//! - each load of the body hands its tile straight to the matmul ([`fuse::forward_load`]: an
//!   input read whole where the load would have copied it, the tile read by nothing else), so
//!   that no iteration writes what another reads;
//! - the kernel takes the first pass (operands of one shape and layout that keeps chains in
//!   registers: `vdpbf16ps`, or AVX2's while no result can be tiny).
//!
//! Else the loop runs as written. Each result is still one chain of the kernel's steps over
//! the matmuls' `k` in program order: the same bits (`cpu::matmul::matmul_chain_prepacked`).
//! The loads' tiles keep their old contents, as a forwarded load's do.

use nki_lang::{InstrData, LoopKind, MAX_PIDS, Opcode};

use super::fuse;
use super::input_tiles::InputTiles;
use super::readers::Readers;
use crate::bind::Bound;
use crate::cpu::matmul::PACKED_CHAIN;
use crate::engines::tensor::HbmOperand;
use crate::engines::{EngineState, tensor};
use crate::exec::Frame;
use crate::operand::{self, Operands};

/// Most loads in the body before its matmul (one per operand).
const MAX_LOADS: usize = 2;

/// Most iterations of a loop run so: passes of [`PACKED_CHAIN`] matmuls, the results kept in
/// PSUM between two passes (a causal attention's `v` products, 32 per query tile, take two).
const GROUP_TRIPS: usize = 4 * PACKED_CHAIN;

/// Runs the loop at `begin..=end` (`trip` iterations from state `f`) as one chain of matmuls
/// if it is one (module documentation) and returns `true`; returns `false`, having run
/// nothing, if it is to run as written.
pub(crate) fn run(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    readers: &Readers,
    inputs: &InputTiles,
    f: &Frame,
    (begin, end): (usize, usize),
    trip: u64,
) -> bool {
    let p = b.program;
    let instrs = p.instrs();
    let (Some(ins), Some(body)) = (instrs.get(begin), instrs.get(begin + 1..end)) else {
        return false;
    };
    let Some((mm, loads)) = body.split_last() else {
        return false;
    };
    let n = match usize::try_from(trip) {
        Ok(n) if (2..=GROUP_TRIPS).contains(&n) => n,
        _ => return false,
    };
    let plain_loop = matches!(
        ins.data,
        InstrData::LoopBegin {
            kind: LoopKind::Affine | LoopKind::Sequential,
            ..
        }
    );
    let InstrData::Matmul { dst, .. } = mm.data else {
        return false;
    };
    if !plain_loop
        || mm.opcode != Opcode::Matmul
        || loads.len() > MAX_LOADS
        || loads.iter().any(|l| l.opcode != Opcode::Load)
        || !b.meter.runs_unchecked()
        || inputs.reads_skipped(p, mm)
    {
        return false;
    }
    let mm_at = end - 1;
    let stride = e.sbuf.partition_stride();
    let mut vars = f.vars;
    let mut chain = [Operands::default(); GROUP_TRIPS];
    let mut from: [[Option<HbmOperand<'_>>; 2]; GROUP_TRIPS] = [[None; 2]; GROUP_TRIPS];
    let mut accumulate = false;
    for (i, (ops, from)) in chain.iter_mut().zip(from.iter_mut()).take(n).enumerate() {
        let Some(v) = vars.get_mut(MAX_PIDS + f.depth) else {
            return false;
        };
        *v = i as i64;
        let Some(resolved) = operand::resolve(b, mm, &vars, stride) else {
            return false;
        };
        let adds = dst.write.accumulates_at(&vars);
        match i {
            0 => accumulate = adds,
            _ if !adds => return false,
            _ => {}
        }
        for (j, load) in loads.iter().enumerate() {
            let Some(lops) = operand::resolve(b, load, &vars, stride) else {
                return false;
            };
            let at = begin + 1 + j;
            let Some((slot, hbm)) =
                fuse::forward_load(e, b, readers, load, &lops, (at, end), &vars)
                    .and_then(|fw| fw.to(mm_at))
            else {
                return false;
            };
            let Some(o) = from.get_mut(usize::from(slot) - 1) else {
                return false;
            };
            *o = Some(hbm);
        }
        *ops = resolved;
    }
    // Passes of at most `PACKED_CHAIN` matmuls, one after another; a later pass the kernel does
    // not take (its operands' views differ from the first's) runs its matmuls one by one.
    let passes = chain[..n]
        .chunks(PACKED_CHAIN)
        .zip(from[..n].chunks(PACKED_CHAIN));
    for (i, (ops, from)) in passes.enumerate() {
        let adds = accumulate || i > 0;
        if tensor::register_chain(e, ops, adds, from) {
            continue;
        }
        if i == 0 {
            return false;
        }
        for (o, f) in ops.iter().zip(from) {
            tensor::matmul(e, o, true, None, *f);
        }
    }
    true
}
