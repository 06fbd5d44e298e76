//! What a program's instruction order proves wrong before it runs: a tile read before any
//! instruction writes it, and an `affine_range` loop whose iterations all write the same output
//! elements. Strict launches catch the cases that depend on values known only at launch
//! (`nki_runtime::strict`); these are the ones every launch would hit.

use crate::affine::{Affine, MAX_PIDS};
use crate::buf::ProgramBuf;
use crate::diag::{Diagnostic, Site};
use crate::ir::{HbmAccess, Instr, InstrData, LoopKind, Mask, OperandRef, Write};
use crate::rules::RuleViolation;
use crate::shape::Extent;

/// Every read of a tile that no earlier instruction (in program order, which every execution
/// follows) writes: in its first execution the read sees whatever SBUF or PSUM held. One
/// diagnostic per tile, at its first such read.
pub fn reads_before_writes(p: &ProgramBuf) -> Vec<Diagnostic> {
    let mut written = vec![false; p.tiles.len()];
    let mut out = Vec::new();
    let tile_of = |o: OperandRef| match o {
        OperandRef::View(v) => p.views.get(v.index()).map(|v| usize::from(v.tile)),
        OperandRef::Access(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => None,
    };
    for (i, ins) in p.instrs.iter().enumerate() {
        if ins.data.loop_control().is_some() {
            continue;
        }
        // An accumulation group's first matmul overwrites its destination.
        let group = ins
            .data
            .dst()
            .is_some_and(|d| matches!(d.write, Write::Group { .. }));
        // `nc_stream_shuffle`'s destination, `quantize_mx`'s scale tile, are read only as the
        // old value of the partitions they leave unmodified: a new tile's stay unwritten
        // (strict mode follows them).
        let keeps = if ins.opcode == crate::ir::ops::Opcode::NcStreamShuffle {
            Some(0)
        } else if ins.opcode == crate::ir::ops::Opcode::QuantizeMx {
            Some(2)
        } else {
            None
        };
        for o in ins.operands() {
            let reads = o.dir.reads() && !(group && o.slot == 0) && keeps != Some(o.slot);
            if let Some(t) = tile_of(o.operand).filter(|_| reads)
                && written.get(t) == Some(&false)
            {
                written[t] = true;
                out.push(Diagnostic {
                    site: Site::Operand {
                        instr: i,
                        slot: o.slot,
                    },
                    violation: RuleViolation::ReadBeforeWrite {
                        tile: p.tiles[t].name.clone(),
                    },
                });
            }
        }
        for o in ins.operands().filter(|o| o.dir.writes()) {
            if let Some(w) = tile_of(o.operand).and_then(|t| written.get_mut(t)) {
                *w = true;
            }
        }
    }
    out
}

/// Every write to an output inside an `affine_range` loop of two or more iterations whose
/// access and mask do not depend on the loop's variable: each iteration writes the same
/// elements, in an order the loop does not define (NKI's `err_unexpected_output_dependencies`).
pub fn output_dependencies(p: &ProgramBuf) -> Vec<Diagnostic> {
    let mut open: Vec<(LoopKind, Extent, u16, usize)> = Vec::new();
    let mut out = Vec::new();
    for (i, ins) in p.instrs.iter().enumerate() {
        match ins.data {
            InstrData::LoopBegin {
                kind, trip, var, ..
            } => {
                open.push((kind, trip, var, i));
                continue;
            }
            InstrData::LoopEnd { .. } => {
                open.pop();
                continue;
            }
            InstrData::Dma { .. }
            | InstrData::Unary { .. }
            | InstrData::Fill { .. }
            | InstrData::Iota { .. }
            | InstrData::Alu { .. }
            | InstrData::Act { .. }
            | InstrData::Act2 { .. }
            | InstrData::Reduce { .. }
            | InstrData::Scan { .. }
            | InstrData::Select { .. }
            | InstrData::Matmul { .. }
            | InstrData::Match8 { .. }
            | InstrData::SelectReduce { .. }
            | InstrData::Gather { .. }
            | InstrData::DynCopy { .. }
            | InstrData::Rng { .. }
            | InstrData::Seed { .. }
            | InstrData::RangeSelect { .. }
            | InstrData::Shuffle { .. }
            | InstrData::QuantizeMx { .. }
            | InstrData::MatmulMx { .. }
            | InstrData::LocalGather { .. }
            | InstrData::Nonzero { .. }
            | InstrData::DmaCompute { .. }
            | InstrData::TopK { .. }
            | InstrData::Register { .. } => {}
            // The rows an indirect DMA writes are data: strict mode follows them at run time.
            InstrData::Indirect { .. } => continue,
        }
        if let Some((d, access)) = same_elements_each_iteration(p, ins, &open) {
            let (_, _, var, _) = open[d];
            let tensor = p
                .tensors
                .get(usize::from(access.tensor))
                .map_or(String::new(), |t| t.name.clone());
            out.push(Diagnostic {
                site: Site::Instr(i),
                violation: RuleViolation::OutputDependencies {
                    tensor,
                    var: p
                        .loop_vars
                        .get(usize::from(var))
                        .cloned()
                        .unwrap_or_default(),
                },
            });
        }
    }
    out
}

/// The depth of the outermost open `affine_range` loop of two or more iterations in whose
/// iterations `ins` writes the same output elements, if any, with the access it writes.
///
/// A `private_hbm` tensor declared in a loop is a tensor of each iteration of the loops that
/// enclose its declaration: those loops' iterations write tensors of their own.
fn same_elements_each_iteration<'p>(
    p: &'p ProgramBuf,
    ins: &Instr,
    open: &[(LoopKind, Extent, u16, usize)],
) -> Option<(usize, &'p HbmAccess)> {
    let access = ins.operands().find_map(|o| match o.operand {
        OperandRef::Access(a) if o.dir.writes() => p.accesses.get(a.index()),
        OperandRef::Access(_) | OperandRef::View(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => {
            None
        }
    })?;
    let mask: Option<&Mask> = ins.mask.and_then(|m| p.masks.get(m.index()));
    let uses = |e: &Affine, d: usize| {
        e.coef
            .get(MAX_PIDS.saturating_add(d))
            .is_some_and(|&c| c != 0)
    };
    let scope = p
        .tensors
        .get(usize::from(access.tensor))
        .and_then(|t| t.scope)
        .map(|s| s as usize);
    let depth = open
        .iter()
        .enumerate()
        .position(|(d, &(kind, trip, _, begin))| {
            kind == LoopKind::Affine
                && scope.is_none_or(|s| begin > s)
                && matches!(trip, Extent::Fixed(n) if n >= 2)
                && !access.axes().iter().any(|x| uses(&x.start, d))
                && !mask.is_some_and(|m| m.terms().iter().any(|t| uses(&t.offset, d)))
        })?;
    Some((depth, access))
}
