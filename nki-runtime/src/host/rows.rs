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

use nki_lang::{Deps, Dir, Engine, Instr, InstrData, MAX_SLOTS, Opcode, VarValues};

use crate::bind::Bound;
use crate::engines::compute::{self, Expression};
use crate::engines::lanes::MAX_SOURCES;
use crate::engines::{EngineState, tensor};
use crate::exec::overlap::{partly_overlapping, rows, share_bytes, span};
use crate::host::exprs;
use crate::host::readers::{Readers, tile_of};
use crate::operand::{self, Loc, Operands, Resolved};
use crate::worker::{FAR_MIN_ELEMS, Reach};

/// Most instructions in one blocked run (their resolved operands live on the stack).
pub(super) const MAX_RUN: usize = exprs::MAX_PIECES;

/// The fewest elements of each piece of a block when the worker is near (see [`step`]).
const NEAR_MIN_ELEMS: usize = 1 << 16;

/// The fewest elements of a piece of a far blocked run that folds which splits with the
/// worker (see [`step`]).
const FOLDED_FAR_MIN_ELEMS: usize = FAR_MIN_ELEMS / 4;

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
fn chip_rows_agree<'a>(
    run: impl Iterator<Item = &'a Operands> + Clone,
    next: &Operands,
    sbuf_stride: usize,
) -> bool {
    let on_chip = |r: &&Resolved| matches!(r.loc, Loc::Sbuf | Loc::Psum);
    next.iter().filter(on_chip).all(|a| {
        run.clone()
            .flat_map(Operands::iter)
            .filter(on_chip)
            .all(|b| {
                !(a.dir.writes() || b.dir.writes())
                    || !share_bytes(a, b, sbuf_stride)
                    || rows(a, sbuf_stride) == rows(b, sbuf_stride)
            })
    })
}

/// `r` restricted to rows `from..to` of its first axis; `kept` in the run's last rows: those
/// rows in the place of rows `partitions - (to - from)..partitions` (see [`kept_in_last_rows`]).
fn restrict(r: &Resolved, (from, to): (usize, usize), partitions: usize, kept: bool) -> Resolved {
    let mut out = *r;
    let first = if kept {
        partitions.saturating_sub(to.saturating_sub(from))
    } else {
        from
    };
    out.pattern.base = r
        .pattern
        .base
        .saturating_add(r.pattern.strides[0].saturating_mul(first as isize));
    out.dims[0] = to.min(r.dims[0]).saturating_sub(from);
    out
}

/// The bytes `[lo, hi)` an SBUF operand reaches within each of its partitions, from the
/// partition's first byte.
fn partition_bytes(r: &Resolved, sbuf_stride: usize) -> (isize, isize) {
    let size = r.dtype.size() as isize;
    let start = r
        .pattern
        .base
        .saturating_mul(size)
        .rem_euclid(sbuf_stride.max(1) as isize);
    let (lo, hi) = span(r, 1);
    (
        start.saturating_add(lo.saturating_mul(size)),
        start.saturating_add(hi.saturating_add(1).saturating_mul(size)),
    )
}

/// Which operands of the run `run` (its pieces, of instructions `instrs`, over `partitions`)
/// may keep every block's rows in the run's last rows: bit `s` of entry `k` for the operand in
/// slot `s` of the run's `k`-th piece.
///
/// An SBUF tile that a write of the run fills and that no instruction outside the run reads
/// holds nothing after the run that the program uses: it only passes data between the run's
/// instructions. Such a tile's block of rows can go to the last rows of the run, block after
/// block, with every access of its bytes in the run: they then stay in the host's cache
/// instead of filling the whole tile (RoPE's copy and four products: 10 MiB a launch that
/// never leave the cache). This holds when the write `w`
/// - writes, and does not read, every byte of each of its partitions' run of bytes (contiguous
///   free axes), on every partition of the run, of a tile no instruction outside the run reads;
/// - is the run's first access of its bytes (nothing before it in the run, nor its own
///   instruction's sources, reads what the bytes held before the run);
/// - and every later access of the run that shares a byte with it either keeps its rows with
///   it (an access of a tile that no instruction outside the run reads, `w`'s or one the
///   allocator placed in its bytes after it, starting at its first partition and reaching no
///   byte of a partition that it does not write), or is of a tile none of whose accesses
///   does, and comes after every access that does.
///
/// A tile in the same bytes that keeps its own rows (tiles live apart by their live ranges,
/// `nki_lang::alloc`, so it lives after the kept accesses: the run's result in the bytes of a
/// product, say) is intact: its block `i` writes rows that the kept accesses, in the last rows,
/// leave alone after block `i`, and its block in the last rows comes after theirs in the same
/// block. SBUF keeps its old contents in the rows the kept tiles did not use, as for a
/// forwarded load (`fuse.rs`); a strict core runs every instruction as written.
fn kept_in_last_rows(
    p: &nki_lang::Program<'_>,
    readers: &Readers,
    run: &[(usize, Operands)],
    (instrs, partitions): (core::ops::Range<usize>, usize),
    sbuf_stride: usize,
) -> [u8; MAX_RUN] {
    let mut kept = [0u8; MAX_RUN];
    // The tile of the operand in `slot` of the run's `k`-th piece.
    let tile = |k: usize, slot: u8| {
        p.instrs()
            .get(run.get(k).map_or(usize::MAX, |&(at, _)| at))
            .and_then(|ins| ins.operands().find(|o| o.slot == slot))
            .and_then(|o| o.view())
            .and_then(|v| tile_of(p, v))
    };
    for (k, (_, ops)) in run.iter().enumerate() {
        for w in ops.iter() {
            let Some(t) = tile(k, w.slot) else { continue };
            let fills = w.loc == Loc::Sbuf
                && w.dir == Dir::Write
                && w.dims[0] == partitions
                && tensor::free_contiguous(&w.dims, &w.pattern)
                && rows(w, sbuf_stride).is_some()
                && readers.all_among(t, instrs.clone());
            if !fills {
                continue;
            }
            let (w_lo, w_hi) = partition_bytes(w, sbuf_stride);
            // The run's later accesses of `w`'s bytes: (piece, slot, tile, whether it may
            // keep its rows with `w`).
            let mut touching = [(0usize, 0u8, None, false); MAX_RUN * MAX_SLOTS];
            let mut n = 0usize;
            let mut before = false;
            for (j, (_, other)) in run.iter().enumerate() {
                for r in other.iter() {
                    if (j == k && r.slot == w.slot) || !share_bytes(r, w, sbuf_stride) {
                        continue;
                    }
                    before |= j <= k;
                    let (lo, hi) = partition_bytes(r, sbuf_stride);
                    let u = tile(j, r.slot);
                    let member = rows(r, sbuf_stride) == rows(w, sbuf_stride)
                        && r.dims[0] <= w.dims[0]
                        && w_lo <= lo
                        && hi <= w_hi
                        && (u == Some(t)
                            || u.is_some_and(|u| readers.all_among(u, instrs.clone())));
                    if let Some(slot) = touching.get_mut(n) {
                        *slot = (j, r.slot, u, member);
                        n += 1;
                    }
                }
            }
            let touching = &touching[..n];
            let is_member_tile =
                |u: Option<u16>| u == Some(t) || touching.iter().any(|&(_, _, v, m)| m && v == u);
            let last_member = touching.iter().filter(|x| x.3).map(|x| x.0).max();
            let first_other = touching.iter().filter(|x| !x.3).map(|x| x.0).min();
            let ok = !before
                && n < MAX_RUN * MAX_SLOTS
                && touching
                    .iter()
                    .all(|&(_, _, u, member)| member || (u.is_some() && !is_member_tile(u)))
                && match (last_member, first_other) {
                    (Some(m), Some(o)) => m < o,
                    _ => true,
                };
            let mut members = [0u8; MAX_RUN];
            for &(j, slot, _, _) in touching.iter().filter(|x| x.3) {
                members[j] |= 1 << slot;
            }
            if ok {
                kept[k] |= 1 << w.slot;
                for (kept, m) in kept.iter_mut().zip(members) {
                    *kept |= m;
                }
            }
        }
    }
    kept
}

/// Runs expression `x`, piece `k`'s, of a run's pieces `run` over one block, each operand
/// restricted to the block by `restricted(piece, operand)`; nothing when the block has none of
/// its partitions.
fn run_expression(
    (e, b): (&mut EngineState, &Bound<'_, '_, '_>),
    (k, x): (usize, &exprs::Expr),
    run: &[(usize, Operands)],
    restricted: impl Fn(usize, &Resolved) -> Resolved,
) {
    let Some((_, ops)) = run.get(k) else {
        return;
    };
    let dst = restricted(k, ops.get(0));
    let mut srcs = [dst; MAX_SOURCES];
    for (s, leaf) in srcs.iter_mut().zip(&x.leaves[..x.n_leaves]) {
        let l = usize::from(leaf.piece);
        if let Some(r) = run.get(l).and_then(|(_, o)| o.slot(usize::from(leaf.slot))) {
            *s = restricted(l, r);
        }
    }
    let srcs = &srcs[..x.n_leaves];
    if dst.dims[0] == 0 || srcs.iter().any(|r| r.dims[0] == 0) {
        return;
    }
    // The input a folded load reads (one at most: `exprs::plan`).
    let hbm = srcs.iter().find_map(|r| match r.loc {
        Loc::Hbm(t) => Some(b.hbm(t as usize).0),
        Loc::Sbuf | Loc::Psum | Loc::Expr | Loc::Imm(_) => None,
    });
    let expr = Expression {
        nodes: &x.nodes[..x.n_nodes],
        srcs,
        dst: &dst,
        whole_rows: x.whole_rows,
        hbm: hbm.unwrap_or(&[]),
    };
    compute::expression(e, &expr);
}

/// The rows of an instruction: the most of any of its operands.
fn rows_of(ops: &Operands) -> usize {
    ops.iter().map(|r| r.dims[0]).max().unwrap_or(0)
}

/// Runs `ins` (at `pc`, operands `ops`) and the row-local instructions after it block by block,
/// when they form a run worth blocking; returns how many instructions after `ins` it also ran,
/// or `None` when `ins` is to run as written.
///
/// The run's rows are the fewest of its instructions' (down to a quarter of the first's): an
/// instruction over more rows takes part as pieces of that many rows, each a row-local
/// instruction of its own (RoPE's load of a whole tile whose halves the products read from
/// partitions 0 and 64, and its store of both halves of the result).
pub(crate) fn step(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    readers: &Readers,
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
    let first_rows = rows_of(ops);
    // Cheap first: is the first instruction alone beyond a block's share of the cache?
    let first_bytes: usize = ops.iter().map(Resolved::bytes).sum();
    if first_rows < 2 || first_bytes < block_bytes.saturating_mul(2) {
        return None;
    }
    let instrs = b.program.instrs();
    // The instructions that may join: row-local, with operands that step by partitions (on
    // chip) or rows (HBM).
    let mut found = [Operands::default(); MAX_RUN];
    let mut n_found = 0usize;
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
        let aligned = resolved
            .iter()
            .all(|r| match (r.loc, rows(r, sbuf_stride)) {
                (Loc::Expr, _) => false,
                (Loc::Imm(_), _) => true,
                (_, None) => false,
                (Loc::Sbuf | Loc::Psum | Loc::Hbm(_), Some(_)) => r.dims[0] > 0,
            });
        if !aligned || partly_overlapping(next, &resolved, sbuf_stride) {
            break;
        }
        found[n_found] = resolved;
        n_found += 1;
    }
    let partitions = found[..n_found]
        .iter()
        .map(rows_of)
        .filter(|&r| r >= 2 && r.saturating_mul(4) >= first_rows)
        .min()?;
    // The run: each instruction whole or as pieces of `partitions` rows, with its index.
    let mut run = [(0usize, Operands::default()); MAX_RUN];
    let mut len = 0usize;
    let mut joined = 0usize;
    for (i, whole) in found[..n_found].iter().enumerate() {
        let n_pieces = rows_of(whole).div_ceil(partitions);
        if len.saturating_add(n_pieces) > MAX_RUN {
            break;
        }
        let mut pieces = [Operands::default(); MAX_RUN];
        for (h, piece) in pieces.iter_mut().enumerate().take(n_pieces) {
            let from = h.saturating_mul(partitions);
            let to = from.saturating_add(partitions);
            for r in whole.iter() {
                *piece = piece.with(match r.loc {
                    Loc::Imm(_) | Loc::Expr => *r,
                    Loc::Sbuf | Loc::Psum | Loc::Hbm(_) => restrict(r, (from, to), 0, false),
                });
            }
        }
        let pieces = &pieces[..n_pieces];
        let agree = pieces.iter().all(|piece| {
            piece.iter().all(|r| r.dims[0] > 0)
                && chip_rows_agree(run[..len].iter().map(|(_, o)| o), piece, sbuf_stride)
        });
        if !agree {
            break;
        }
        for piece in pieces {
            run[len] = (pc.saturating_add(i), *piece);
            len += 1;
        }
        joined = i.saturating_add(1);
    }
    if joined < 2 {
        return None;
    }
    let run = &run[..len];
    // HBM accesses of one tensor, one of them a write, keep their order block by block.
    for (i, (_, a)) in run.iter().enumerate() {
        for w in a
            .iter()
            .filter(|w| w.dir.writes() && matches!(w.loc, Loc::Hbm(_)))
        {
            for (_, x) in run.iter().skip(i).chain(run[..i].iter()) {
                for r in x.iter().filter(|r| r.loc == w.loc) {
                    if !core::ptr::eq(r, w) && !hbm_pair_ok(w, r) {
                        return None;
                    }
                }
            }
        }
    }
    // The bytes per partition of the run's distinct operands (by memory and first element).
    let mut per_partition = 0usize;
    let mut seen = [(Loc::Expr, 0isize); MAX_RUN * nki_lang::MAX_SLOTS];
    let mut n_seen = 0usize;
    for r in run.iter().flat_map(|(_, o)| o.iter()) {
        let key = (r.loc, r.pattern.base);
        if matches!(r.loc, Loc::Sbuf | Loc::Psum | Loc::Hbm(_)) && !seen[..n_seen].contains(&key) {
            seen[n_seen] = key;
            n_seen += 1;
            per_partition = per_partition.saturating_add(r.bytes() / r.dims[0].max(1));
        }
    }
    let cache_block = (block_bytes / per_partition.max(1)).max(1);
    // Each instruction of a block is one hand-over to the worker, or none: a far worker takes
    // half of an instruction only from `FAR_MIN_ELEMS` elements, so a block that small leaves
    // the host's other core idle, and a near one costs a hand-over and a dispatch (~0.3 µs on
    // a Zen 5 guest) per instruction and block. With a worker, every piece of a block has at
    // least `FAR_MIN_ELEMS` (far) or `NEAR_MIN_ELEMS` (near) elements, at the cost of blocks
    // beyond L2. Measured on a Zen 5 guest, each partition stays with one thread from
    // instruction to instruction either way: far, the pooling tutorial took 6.9–7.3 ms against
    // 13.3–14.4 ms in 1 MiB blocks and RoPE 0.60–0.69 against 0.70–0.81 ms; near, RoPE
    // 0.44–0.46 against 0.53–0.55 ms and the NKI Library rmsnorm_quant 10.3–10.6 against
    // 11.1–11.6 ms (`docs/performance.md`).
    let reach = e.worker.as_mut().map(|w| w.reach());
    let floor = match reach {
        Some(Reach::Far) => FAR_MIN_ELEMS,
        Some(Reach::Near) => NEAR_MIN_ELEMS,
        Some(Reach::Away) | None => 0,
    };
    // Each piece's elements per row: those of its largest operand.
    let per_row = |o: &Operands| {
        o.iter()
            .map(|r| r.dims[1..].iter().product::<usize>())
            .max()
            .unwrap_or(1)
    };
    let widths = || run.iter().map(|(_, o)| per_row(o).max(1));
    // The block in which pieces `width` wide have the floor's elements.
    let block_for = |width: usize| cache_block.max(floor.div_ceil(width));
    let mut block = block_for(widths().min().unwrap_or(1));
    let fold_plan = || {
        let kept = kept_in_last_rows(
            b.program,
            readers,
            run,
            (pc..pc.saturating_add(joined), partitions),
            sbuf_stride,
        );
        let plan = exprs::plan(
            b.program,
            readers,
            run,
            pc..pc.saturating_add(joined),
            |k, slot| kept.get(k).is_some_and(|m| m & (1 << slot) != 0),
            sbuf_stride,
        );
        (kept, plan)
    };
    let mut planned = None;
    if block >= partitions && reach == Some(Reach::Far) {
        // Far, only the pieces of `FAR_MIN_ELEMS` split; narrower ones run on this thread. A
        // run that folds instructions into their readers is blocked so that its widest pieces
        // split: the passes over the data it saves outweigh its narrow pieces' time on one
        // thread (RoPE, whose `cos` and `sin` loads are a quarter of `x`'s width: 314–334 µs
        // in blocks of 32 of its 64 rows, against 365–396 µs unblocked). One that only
        // streams stays unblocked (the pooling tutorial: 12.1 ms blocked so, against 6.8–7.3).
        let widest = block_for(widths().max().unwrap_or(1));
        if widest < partitions {
            let (kept, plan) = fold_plan();
            if plan.is_some() {
                block = widest;
                planned = Some((kept, plan));
            }
        }
    }
    if block >= partitions {
        return None;
    }
    let (kept, plan) = planned.unwrap_or_else(fold_plan);
    // The pieces in the order they run.
    let mut order = [0usize; MAX_RUN];
    let mut n_order = 0;
    let in_order: &mut dyn Iterator<Item = usize> = match &plan {
        Some(p) => &mut p.order(run.len()),
        None => &mut (0..run.len()),
    };
    for (slot, k) in order.iter_mut().zip(in_order) {
        *slot = k;
        n_order += 1;
    }
    // Far, the pieces of a run that folds split from `FOLDED_FAR_MIN_ELEMS`: its rows stay with
    // one thread from piece to piece, so a split pays for its hand-over only (RoPE's `cos`
    // and `sin` loads in blocks of 32 rows, 64 Ki elements each: 278–295 µs against 315–330).
    let folded_far = reach == Some(Reach::Far) && plan.is_some();
    if folded_far && let Some(w) = e.worker.as_mut() {
        w.far_min_elems(FOLDED_FAR_MIN_ELEMS);
    }
    let mut from = 0;
    while from < partitions {
        let to = (from + block).min(partitions);
        // An operand of piece `k` restricted to the block.
        let restricted = |k: usize, r: &Resolved| match r.loc {
            Loc::Imm(_) | Loc::Expr => *r,
            Loc::Sbuf | Loc::Psum | Loc::Hbm(_) => {
                restrict(r, (from, to), partitions, kept[k] & (1 << r.slot) != 0)
            }
        };
        for &k in &order[..n_order] {
            let (at, whole) = &run[k];
            if let Some(p) = &plan {
                if p.folded[k] {
                    continue;
                }
                if let Some(x) = &p.exprs[k] {
                    e.far_split = readers.far_split(b.program, &instrs[*at]);
                    run_expression((e, b), (k, x), run, restricted);
                    continue;
                }
            }
            let mut part = Operands::default();
            for r in whole.iter() {
                part = part.with(restricted(k, r));
            }
            if part.iter().any(|r| r.dims[0] == 0) {
                // This instruction covers fewer partitions than the run: none in this block.
                continue;
            }
            e.far_split = readers.far_split(b.program, &instrs[*at]);
            crate::exec::execute(e, b, &instrs[*at], &part, vars);
        }
        from = to;
    }
    if folded_far && let Some(w) = e.worker.as_mut() {
        w.far_min_elems(FAR_MIN_ELEMS);
    }
    Some(joined - 1)
}
