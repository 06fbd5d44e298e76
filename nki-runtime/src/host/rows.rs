//! A run of neighbouring instructions that each compute every partition on its own (loads,
//! stores, elementwise instructions, copies, reductions and scans along the free axes,
//! `bn_stats`/`bn_aggr`), run a block of partitions at a time: all of them on partitions
//! `0..k`, then all of them on `k..2k`, and so on. A LayerNorm's ten passes over a 4 MiB tile
//! become ten passes over a block that stays in the host's L2 cache. The top-8 searches
//! (`max8`, `nc_find_index8`, `nc_match_replace8`) are left out: they search more than they
//! stream.
//!
//! The results are those of the instructions one after the other, bit for bit: each computes
//! row `i` of its destination from row `i` of its operands only (the engines' results for a
//! partition never depend on the others: a reduction is split between threads by partitions
//! too, `docs/numerics.md`), a block restricts every operand to the same rows `i`, and every
//! two accesses of the run of which one writes either touch no common byte or map row `i` to
//! the same partition (on chip) or the same bytes (HBM), so each byte is read and written by the
//! same instructions in the same order as before. Operands that start at other partitions
//! may share a run when no byte is both written by one and touched by another (RoPE's copy
//! of the upper half of a tile to partition 0, then products on partitions 0..64). A run is
//! blocked only when its bytes per partition exceed what the cache holds for a block of
//! several partitions; otherwise it runs as written. `rand`, `dropout` and `random_seed` are
//! never part of a run: each execution advances the generator's call count, so each runs once
//! over all its partitions.

use nki_lang::{Deps, Engine, Instr, InstrData, Opcode, VarValues};

use crate::bind::Bound;
use crate::engines::EngineState;
use crate::exec::overlap::{partly_overlapping, share_bytes, span};
use crate::operand::{self, Loc, Operands, Resolved};

/// Most instructions in one blocked run (their resolved operands live on the stack).
const MAX_RUN: usize = 16;

/// Whether `ins` may be part of a blocked run, from its opcode and engine alone.
fn row_local(ins: &Instr) -> bool {
    let engine_ok = match ins.engine {
        Engine::Vector | Engine::Scalar | Engine::GpSimd => true,
        Engine::Dma => matches!(ins.opcode, Opcode::Load | Opcode::Store),
        Engine::Tensor | Engine::Sync => false,
    };
    let deps_ok = match ins.opcode.info().deps {
        Deps::Move
        | Deps::Elementwise
        | Deps::Select
        | Deps::RangeSelect
        | Deps::Reduce
        | Deps::Prefix
        | Deps::Row => true,
        Deps::Control
        | Deps::Register
        | Deps::AffineSelect
        | Deps::Contraction
        | Deps::Transpose
        | Deps::Indirect
        | Deps::Gather
        | Deps::Seed
        | Deps::Permute
        | Deps::Shuffle
        | Deps::Mx
        | Deps::LocalGather
        | Deps::Nonzero
        | Deps::TopK => false,
    };
    // The generator counts its calls: each must run once, over all its partitions.
    let counted = matches!(ins.data, InstrData::Rng { .. } | InstrData::Seed { .. });
    // The top-8 searches spend their time searching, not streaming: a block of partitions
    // saves them little and costs a hand-over between the host threads per block (the NKI
    // Library top-k: 0.95 ms P50 unblocked, 1.15 ms in blocks of 31 partitions).
    let search = matches!(
        ins.opcode,
        Opcode::Max8 | Opcode::FindIndex8 | Opcode::MatchReplace8
    );
    engine_ok && deps_ok && !counted && !search && ins.data.loop_control().is_none()
}

/// The first partition, or HBM row offset, of an operand and its step, when its first axis
/// steps through partitions (on chip) or rows (HBM); `None` for immediates and expressions.
fn rows(r: &Resolved, sbuf_stride: usize) -> Option<(isize, isize)> {
    match r.loc {
        Loc::Sbuf | Loc::Psum => {
            let stride = if r.loc == Loc::Psum {
                crate::memory::Psum::PARTITION_STRIDE
            } else {
                sbuf_stride
            } as isize;
            let size = r.dtype.size() as isize;
            (r.pattern.strides[0].checked_mul(size) == Some(stride))
                .then(|| (r.pattern.base.saturating_mul(size).div_euclid(stride), 1))
        }
        Loc::Hbm(_) => Some((r.pattern.base, r.pattern.strides[0])),
        Loc::Expr | Loc::Imm(_) => None,
    }
}

/// Whether two HBM operands of one tensor, one of which writes, keep every byte's accesses in
/// order when run block by block: they touch no common element, or they map row `p` to the
/// same elements and no row reaches into another.
fn hbm_pair_ok(a: &Resolved, b: &Resolved) -> bool {
    let whole = |r: &Resolved| {
        let (lo, hi) = span(r, 0);
        (
            r.pattern.base.saturating_add(lo),
            r.pattern.base.saturating_add(hi),
        )
    };
    let (a_lo, a_hi) = whole(a);
    let (b_lo, b_hi) = whole(b);
    if a_hi <= b_lo || b_hi <= a_lo {
        return true;
    }
    // The elements the free axes reach within one row, from its first element.
    let fits = |r: &Resolved| {
        let (lo, hi) = span(r, 1);
        hi.saturating_sub(lo) <= r.pattern.strides[0].saturating_abs()
            && lo >= 0
            && hi <= r.pattern.strides[0].saturating_abs()
    };
    (a.pattern.base, a.pattern.strides[0]) == (b.pattern.base, b.pattern.strides[0])
        && fits(a)
        && fits(b)
}

/// Whether the on-chip operands of `next` and of the run before it (`run`) keep every byte's
/// accesses in order when run block by block: of two that share a byte, one of which writes,
/// both start at the same partition (so row `i` of each is the same partition, in the same
/// block).
fn chip_rows_agree(run: &[Operands], next: &Operands, sbuf_stride: usize) -> bool {
    let on_chip = |r: &&Resolved| matches!(r.loc, Loc::Sbuf | Loc::Psum);
    next.iter().filter(on_chip).all(|a| {
        run.iter()
            .flat_map(Operands::iter)
            .filter(on_chip)
            .all(|b| {
                !(a.dir.writes() || b.dir.writes())
                    || !share_bytes(a, b, sbuf_stride)
                    || rows(a, sbuf_stride) == rows(b, sbuf_stride)
            })
    })
}

/// `r` restricted to rows `from..to` of its first axis.
fn restrict(r: &Resolved, from: usize, to: usize) -> Resolved {
    let mut out = *r;
    out.pattern.base = r
        .pattern
        .base
        .saturating_add(r.pattern.strides[0].saturating_mul(from as isize));
    out.dims[0] = to.min(r.dims[0]).saturating_sub(from);
    out
}

/// Runs `ins` (at `pc`, operands `ops`) and the row-local instructions after it block by block,
/// when they form a run worth blocking; returns how many instructions after `ins` it also ran,
/// or `None` when `ins` is to run as written.
pub(crate) fn step(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    ins: &Instr,
    ops: &Operands,
    (pc, stop): (usize, usize),
    vars: &VarValues,
) -> Option<usize> {
    if !row_local(ins) {
        return None;
    }
    let sbuf_stride = e.sbuf.partition_stride();
    let block_bytes = e.block_bytes.max(1);
    let partitions = ops.iter().map(|r| r.dims[0]).max()?;
    // Cheap first: is the first instruction alone beyond a block's share of the cache?
    let first_bytes: usize = ops.iter().map(Resolved::bytes).sum();
    if partitions < 2 || first_bytes < block_bytes.saturating_mul(2) {
        return None;
    }
    let instrs = b.program.instrs();
    let mut run = [Operands::default(); MAX_RUN];
    let mut len = 0usize;
    // The bytes per partition of the run's distinct operands (by memory and first element of
    // a row), and the operands counted.
    let mut per_partition = 0usize;
    let mut seen = [(Loc::Expr, 0isize); MAX_RUN * nki_lang::MAX_SLOTS];
    let mut n_seen = 0usize;
    for (at, next) in instrs.iter().enumerate().take(stop).skip(pc).take(MAX_RUN) {
        if !row_local(next) {
            break;
        }
        let resolved = if at == pc {
            *ops
        } else {
            match operand::resolve(b, next, vars, sbuf_stride) {
                Some(r) => r,
                None => break,
            }
        };
        if partly_overlapping(next, &resolved, sbuf_stride) {
            break;
        }
        // Every on-chip operand steps by partitions; every HBM operand's first axis is its
        // rows; no operand has more rows than the run.
        let aligned = resolved
            .iter()
            .all(|r| match (r.loc, rows(r, sbuf_stride)) {
                (Loc::Expr, _) => false,
                (Loc::Imm(_), _) => true,
                (_, None) => false,
                (Loc::Sbuf | Loc::Psum | Loc::Hbm(_), Some(_)) => r.dims[0] <= partitions,
            });
        if !aligned || !chip_rows_agree(&run[..len], &resolved, sbuf_stride) {
            break;
        }
        run[len] = resolved;
        len += 1;
        for r in resolved.iter() {
            let row_start = match (r.loc, rows(r, sbuf_stride)) {
                (Loc::Sbuf | Loc::Psum, Some(_)) => {
                    let stride = r.pattern.strides[0].max(1);
                    r.pattern.base.rem_euclid(stride)
                }
                _ => r.pattern.base,
            };
            let key = (r.loc, row_start);
            if !seen[..n_seen].contains(&key) && n_seen < seen.len() {
                seen[n_seen] = key;
                n_seen += 1;
                per_partition = per_partition.saturating_add(r.bytes() / r.dims[0].max(1));
            }
        }
    }
    if len < 2 {
        return None;
    }
    // HBM accesses of one tensor, one of them a write, keep their order block by block.
    for (i, a) in run[..len].iter().enumerate() {
        for w in a
            .iter()
            .filter(|w| w.dir.writes() && matches!(w.loc, Loc::Hbm(_)))
        {
            for x in run[..len].iter().skip(i).chain(run[..i].iter()) {
                for r in x.iter().filter(|r| r.loc == w.loc) {
                    if !core::ptr::eq(r, w) && !hbm_pair_ok(w, r) {
                        return None;
                    }
                }
            }
        }
    }
    let block = (block_bytes / per_partition.max(1)).max(1);
    if block >= partitions {
        return None;
    }
    let mut from = 0;
    while from < partitions {
        let to = (from + block).min(partitions);
        for (k, whole) in run[..len].iter().enumerate() {
            let mut part = Operands::default();
            for r in whole.iter() {
                let restricted = match r.loc {
                    Loc::Imm(_) | Loc::Expr => *r,
                    Loc::Sbuf | Loc::Psum | Loc::Hbm(_) => restrict(r, from, to),
                };
                part = part.with(restricted);
            }
            if part.iter().any(|r| r.dims[0] == 0) {
                // This instruction covers fewer partitions than the run: none in this block.
                continue;
            }
            let at = pc + k;
            crate::exec::execute(e, b, &instrs[at], &part, vars);
        }
        from = to;
    }
    Some(len - 1)
}
