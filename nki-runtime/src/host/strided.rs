//! Matmuls that read one SBUF region's columns at a step, each from the next column (the NKI
//! Library's decode attention computes `kᵀq` over a `[128, 10240]` key tile as 80 matmuls,
//! the one at offset `o` taking columns `o, o + 80, o + 160, …`): the region is de-interleaved
//! once (`engines::phases`), and each matmul reads its `[K, M]` operand contiguous from its
//! phase instead of gathering it element by element, one cache line per element.
//!
//! At a matmul whose stationary operand is such a view, the instructions after it are looked
//! at, up to [`WINDOW`] of them, until one would need the interpreter's own handling (a loop, a
//! register, an indirect or data-dependent access, a run that reads what it partly overwrites)
//! or writes a byte of the region. When the matmuls among them that read phases of the region
//! are enough to pay for the pass ([`worth_it`]), the phases are filled, the instructions up
//! to the last such matmul run in order exactly as the interpreter runs them, and the phases
//! are forgotten. The matmuls read the elements they would have read from SBUF, which nothing
//! in between writes: the results are those of the instructions one after the other, bit for
//! bit.
//!
//! When the group is matmuls only, all with one moving operand of at most eight columns (decode
//! attention's `kᵀq`: five query columns), no phase is filled: the narrow matmul kernel reads the
//! region once, row by row and in order, its columns in the vector lanes, and scatters each
//! column's results to its matmul's row (`engines::tensor::narrow_phases`). Each result is still
//! its own FMA chain over `k`: the same bits.

use nki_lang::{Instr, InstrData, Opcode, VarValues};

use crate::bind::Bound;
use crate::engines::EngineState;
use crate::engines::phases::{MAX_BYTES, Region};
use crate::exec::overlap::{partly_overlapping, share_bytes};
use crate::host::input_tiles::InputTiles;
use crate::operand::{self, Loc, Operands, Resolved};

/// Most instructions looked at after the first matmul of a group.
const WINDOW: usize = 256;

/// Whether de-interleaving `phases` phases pays for `matmuls` matmuls reading them: a strided
/// gather costs about a cache line per element, 8 times what the pass costs per element
/// (decode attention on an Intel Xeon: 1.15 ns against about 0.15 ns), and the pass reads every
/// phase once.
fn worth_it(matmuls: usize, phases: usize) -> bool {
    matmuls >= 2 && matmuls.saturating_mul(8) >= phases
}

/// The region a matmul's stationary operand `r` is phase 0 of: a view of SBUF partitions, its
/// columns at least two elements apart.
fn region_of(r: &Resolved, sbuf_stride: usize) -> Option<Region> {
    let (d, s) = (r.dims, r.pattern.strides);
    let size = r.dtype.size() as isize;
    let stride = usize::try_from(s[1]).ok().filter(|&st| st >= 2)?;
    let partitions_apart = d[0] == 1 || s[0].checked_mul(size) == isize::try_from(sbuf_stride).ok();
    (r.loc == Loc::Sbuf && d[1] >= 2 && d[2..].iter().all(|&n| n == 1) && partitions_apart).then(
        || Region {
            dtype: r.dtype,
            base: r.pattern.base,
            partition_stride: s[0],
            rows: d[0],
            stride,
            cols: d[1],
            phases: stride,
        },
    )
}

/// The region's elements as one operand: its rows, and every column of every phase.
fn whole(region: &Region, template: &Resolved) -> Resolved {
    let mut r = *template;
    r.dims = [
        region.rows,
        region.cols.saturating_mul(region.stride),
        1,
        1,
        1,
    ];
    r.pattern.strides = [region.partition_stride, 1, 0, 0, 0];
    r
}

/// Whether the interpreter runs `ins` as [`crate::exec::execute`] does, with no checks of
/// its own first (the data-dependent accesses have some) and no state of its own (loops,
/// registers, the generator).
fn plain(ins: &Instr) -> bool {
    match ins.data {
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
        | InstrData::SelectReduce { .. }
        | InstrData::RangeSelect { .. } => true,
        InstrData::LoopBegin { .. }
        | InstrData::LoopEnd { .. }
        | InstrData::Match8 { .. }
        | InstrData::Indirect { .. }
        | InstrData::Gather { .. }
        | InstrData::DynCopy { .. }
        | InstrData::Rng { .. }
        | InstrData::Seed { .. }
        | InstrData::Shuffle { .. }
        | InstrData::QuantizeMx { .. }
        | InstrData::MatmulMx { .. }
        | InstrData::LocalGather { .. }
        | InstrData::Nonzero { .. }
        | InstrData::DmaCompute { .. }
        | InstrData::TopK { .. }
        | InstrData::Register { .. } => false,
    }
}

/// Runs instructions `pc..=last` (operands `ops` at `pc`) as one pass of the narrow matmul
/// kernel over `region` (`engines::tensor::narrow_phases`) when every one of them is a matmul
/// on a phase of the region with one moving operand and one `accumulate` (decode attention's
/// `kᵀq` over a key tile): no phase is de-interleaved, and the region is read once, in order.
/// `false`, with nothing run, when they are not or the kernel declines.
fn narrow_group(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    (pc, last): (usize, usize),
    ops: &Operands,
    vars: &VarValues,
    region: &Region,
) -> bool {
    let sbuf_stride = e.sbuf.partition_stride();
    let instrs = b.program.instrs();
    let (Some(&dst), Some(&moving)) = (ops.slot(0), ops.slot(2)) else {
        return false;
    };
    let mut group = [(0usize, dst); WINDOW + 1];
    let mut accumulate = None;
    for (i, (at, ins)) in instrs
        .iter()
        .enumerate()
        .take(last + 1)
        .skip(pc)
        .enumerate()
    {
        let InstrData::Matmul { dst, .. } = ins.data else {
            return false;
        };
        let resolved = if at == pc {
            Some(*ops)
        } else {
            operand::resolve(b, ins, vars, sbuf_stride)
        };
        let Some(r) = resolved.filter(|_| ins.opcode == Opcode::Matmul) else {
            return false;
        };
        let acc = dst.write.accumulates_at(vars);
        let phase = r.slot(1).and_then(|s| region.phase_of(s));
        match (phase, r.slot(0), group.get_mut(i)) {
            (Some(o), Some(&d), Some(g))
                if r.slot(2) == Some(&moving) && *accumulate.get_or_insert(acc) == acc =>
            {
                *g = (o, d);
            }
            _ => return false,
        }
    }
    let n = last + 1 - pc;
    crate::engines::tensor::narrow_phases(
        e,
        region,
        &moving,
        &group[..n],
        accumulate.unwrap_or(false),
    )
}

/// Runs the group of matmuls that starts at `ins` (at `pc`, operands `ops`) and the
/// instructions among them with the region de-interleaved, when there is one worth it;
/// returns how many instructions after `ins` it also ran, or `None` when `ins` is to run as
/// written.
pub(crate) fn step(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    ins: &Instr,
    ops: &Operands,
    (pc, stop): (usize, usize),
    vars: &VarValues,
    inputs: &InputTiles,
) -> Option<usize> {
    if !matches!(ins.data, InstrData::Matmul { .. }) {
        return None;
    }
    let sbuf_stride = e.sbuf.partition_stride();
    let first = ops.slot(1)?;
    let mut region = region_of(first, sbuf_stride)?;
    let whole = whole(&region, first);
    let instrs = b.program.instrs();
    // The last matmul of the group, the phases its matmuls read, and how many.
    let (mut last, mut phases, mut matmuls) = (pc, 1usize, 1usize);
    for (at, next) in instrs
        .iter()
        .enumerate()
        .take(stop)
        .skip(pc + 1)
        .take(WINDOW)
    {
        // A matmul that reads a tile whose load was skipped runs on its own (`input_tiles`).
        if !plain(next) || inputs.reads_skipped(b.program, next) {
            break;
        }
        let Some(resolved) = operand::resolve(b, next, vars, sbuf_stride) else {
            // Masked out: runs as nothing.
            continue;
        };
        if partly_overlapping(next, &resolved, sbuf_stride) {
            break;
        }
        let writes_region = resolved
            .iter()
            .any(|r| r.dir.writes() && share_bytes(r, &whole, sbuf_stride));
        if writes_region {
            break;
        }
        if matches!(next.data, InstrData::Matmul { .. })
            && let Some(o) = resolved.slot(1).and_then(|s| region.phase_of(s))
        {
            (last, matmuls) = (at, matmuls + 1);
            phases = phases.max(o + 1);
        }
    }
    region.phases = phases;
    if !worth_it(matmuls, phases) || region.bytes() > MAX_BYTES {
        return None;
    }
    // The matmuls up to the first other instruction, in one pass of the narrow kernel.
    let matmuls_end = instrs
        .iter()
        .enumerate()
        .take(last + 1)
        .skip(pc)
        .find(|(_, i)| !matches!(i.data, InstrData::Matmul { .. }))
        .map_or(last, |(at, _)| at - 1);
    if matmuls_end > pc && narrow_group(e, b, (pc, matmuls_end), ops, vars, &region) {
        return Some(matmuls_end - pc);
    }
    e.phases.fill(e.isa, &e.sbuf, region, e.worker.as_mut());
    for (at, next) in instrs.iter().enumerate().take(last + 1).skip(pc) {
        let resolved = if at == pc {
            Some(*ops)
        } else {
            operand::resolve(b, next, vars, sbuf_stride)
        };
        if let Some(r) = resolved {
            crate::exec::execute(e, b, next, &r, vars);
        }
    }
    e.phases.clear();
    Some(last - pc)
}
