//! The iterations of an outermost `affine_range` loop on the core's two host threads.
//!
//! NKI's `affine_range` declares that a loop's iterations do not depend on each other (except
//! through accumulation, which the hardware orders): the compiler may pipeline them across the
//! engines. The model uses the same freedom for the host's second core. When an instance
//! reaches an outermost `affine_range` loop (at depth 0, or nested only in loops that run once,
//! such as a loop over `(C + 127) / 128` channel tiles when `C` is 128), its iterations split
//! in two halves, the first on
//! the calling thread with the core's engines and the second on the worker with the second set
//! of engines (the one SPMD grids use), if all of the following hold; otherwise the loop runs
//! serially, as always:
//!
//! - every tile the body writes is used only inside the body (it is the iteration's own: a
//!   tile declared in the body, or scratch reused only there), so that no value flows from one
//!   iteration to another or out of the loop through a tile;
//! - no accumulation group spans the loop itself (`acc += nc_matmul(...)` with `acc` declared
//!   outside it is excluded by the first rule already);
//! - the halves' accesses to each output tensor lie on either side of one offset (the hull
//!   analysis of SPMD grids, over the halves' iteration ranges), so each thread gets its own
//!   part of the output; or, failing that, in disjoint boxes of indices, such as the column
//!   blocks of a row-major result, and the second half works on a copy of its box
//!   (`host::interleaved`);
//! - the body neither draws random numbers nor seeds the generator (`rand`, `dropout`,
//!   `random_seed`: the generator counts its calls in program order);
//! - the loop does enough work to pay for the hand-over ([`MIN_PARALLEL_WORK`]) and the
//!   program has at most [`MAX_TILES`] tiles.
//!
//! A second half that the worker has not started by the time the first is done (its vCPU busy,
//! or it left the job to the caller: `worker`) runs on the calling thread, on the core's
//! engines, right after the first: the serial run's order on the serial run's engines.
//!
//! Before the halves start, every tile the body reads but does not write (values computed
//! before the loop, such as a transposed operand kept in SBUF) is copied into the second
//! engines' memories. Each iteration then reads exactly what it reads in a serial run and
//! writes memory no other iteration touches, so the results are those of the serial run, bit
//! for bit. (A kernel that breaks `affine_range`'s contract, by reading in one iteration a
//! loop-private tile that an earlier iteration wrote, computes here what it computes on
//! hardware: something that depends on the schedule.)
//!
//! A run with an [`crate::Observer`] (a profile, the timing model) keeps every loop serial.

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{
    InstrData, LoopKind, MAX_PIDS, MAX_TENSORS, Memory, OperandRef, Program, SymbolValues, Write,
};

use super::hull::{Hull, IndexBox, output_boxes, output_hulls};
use super::interleaved::Shares;
use super::readers::Readers;
use super::{Plain, WorkerState};
use crate::bind::{Bound, HbmOut};
use crate::engines::EngineState;
use crate::exec::{ExecError, Frame, Unobserved, interpret};
use crate::memory::Psum;

/// Loops whose body's instructions together do less [`super::work`] than this, over all
/// iterations, stay on one thread: a few tens of microseconds of work, about what the
/// hand-over and the copies cost.
pub(crate) const MIN_PARALLEL_WORK: u64 = 1 << 18;

/// Programs with more tiles run their loops serially (the analysis keeps its sets on the
/// stack).
pub(crate) const MAX_TILES: usize = 4096;

/// A fixed-size set of tile indices.
struct TileSet([u64; MAX_TILES / 64]);

impl TileSet {
    const EMPTY: TileSet = TileSet([0; MAX_TILES / 64]);

    fn insert(&mut self, t: usize) {
        self.0[t / 64] |= 1 << (t % 64);
    }

    fn contains(&self, t: usize) -> bool {
        self.0[t / 64] >> (t % 64) & 1 == 1
    }

    fn meets(&self, other: &TileSet) -> bool {
        self.0.iter().zip(&other.0).any(|(a, b)| a & b != 0)
    }
}

/// What the body of the loop at `begin..=end` (at depth `depth`) reads from outside it, if its
/// iterations may run on two threads (module documentation; `work` is theirs, from
/// [`super::work_of`]); `None` otherwise.
fn shared_reads(
    p: &Program<'_>,
    (begin, end): (usize, usize),
    depth: usize,
    work: u64,
) -> Option<TileSet> {
    let (tiles, views) = (p.tiles(), p.views());
    if tiles.len() > MAX_TILES {
        return None;
    }
    let (mut read_in, mut written_in, mut used_out) =
        (TileSet::EMPTY, TileSet::EMPTY, TileSet::EMPTY);
    for (pc, ins) in p.instrs().iter().enumerate() {
        let inside = pc > begin && pc < end;
        if inside
            && let Some(dst) = ins.data.dst()
            && let Write::Group { loops, .. } = dst.write
            && u32::try_from(depth).is_ok_and(|d| loops.checked_shr(d).unwrap_or(0) & 1 == 1)
        {
            return None;
        }
        for o in ins.operands() {
            let v = match o.operand {
                OperandRef::View(v) => v,
                // The tile sets are of tiles; HBM outputs are checked by their hulls.
                OperandRef::Access(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => continue,
            };
            let view = views.get(v.index())?;
            let t = usize::from(view.tile);
            if !inside {
                used_out.insert(t);
                continue;
            }
            if o.dir.reads() {
                read_in.insert(t);
            }
            if o.dir.writes() {
                written_in.insert(t);
            }
        }
    }
    if written_in.meets(&used_out) || work < MIN_PARALLEL_WORK {
        return None;
    }
    for (w, r) in written_in.0.iter().zip(read_in.0.iter_mut()) {
        *r &= !w;
    }
    Some(read_in)
}

/// Whether a loop opened in state `f` is outermost for splitting: every loop around it runs
/// once (so it runs once too, with the enclosing loops' variables fixed).
fn outermost(f: &Frame) -> bool {
    f.trips
        .get(..f.depth)
        .is_some_and(|t| t.iter().all(|&n| n == 1))
}

/// The index-variable ranges of iterations `lo..hi` of a loop opened in state `f` (the
/// instance's program ids and the enclosing loops' values from `f`).
fn half_ranges(f: &Frame, (lo, hi): (u64, u64)) -> [(i128, i128); nki_lang::MAX_VARS] {
    let mut ranges = [(0i128, 0i128); nki_lang::MAX_VARS];
    let open = MAX_PIDS.saturating_add(f.depth);
    for (r, &v) in ranges.iter_mut().zip(&f.vars[..open]) {
        *r = (i128::from(v), i128::from(v));
    }
    if let Some(r) = ranges.get_mut(open) {
        *r = (i128::from(lo), i128::from(hi).saturating_sub(1));
    }
    ranges
}

/// The element offsets of each output that iterations `lo..hi` of the loop at `begin..=end`
/// can touch.
fn half_hulls(
    b: &Bound<'_, '_, '_>,
    f: &Frame,
    (begin, end): (usize, usize),
    half: (u64, u64),
) -> [Hull; MAX_TENSORS] {
    output_hulls(
        b,
        begin.saturating_add(1)..end,
        half_ranges(f, half),
        f.depth.saturating_add(1),
    )
}

/// The boxes of indices of each output that iterations `lo..hi` of the loop at `begin..=end`
/// can touch.
fn half_boxes(
    b: &Bound<'_, '_, '_>,
    f: &Frame,
    (begin, end): (usize, usize),
    half: (u64, u64),
) -> [IndexBox; MAX_TENSORS] {
    output_boxes(
        b,
        begin.saturating_add(1)..end,
        half_ranges(f, half),
        f.depth.saturating_add(1),
    )
}

/// Copies tile `t` (every partition's bytes) from `from` to `to`.
fn copy_tile(
    p: &Program<'_>,
    syms: &SymbolValues,
    t: usize,
    from: &EngineState,
    to: &mut EngineState,
) {
    let tile = &p.tiles()[t];
    // A tile of blocks counted at launch: the launch's blocks only.
    let bytes = usize::try_from(tile.bytes_in_use(syms)).unwrap_or(usize::MAX);
    let addr = tile.addr as usize;
    let parts = tile.shape.partitions() as usize;
    let (src, dst, stride) = match tile.memory {
        Memory::Sbuf => (
            from.sbuf.bytes(),
            to.sbuf.bytes_mut(),
            from.sbuf.partition_stride(),
        ),
        Memory::Psum => (
            from.psum.bytes(),
            to.psum.bytes_mut(),
            Psum::PARTITION_STRIDE,
        ),
        // Tiles live on chip (the checks refuse others).
        Memory::Hbm => return,
    };
    for part in 0..parts {
        // Within the memory: the program's tiles were placed inside it.
        let at = part.saturating_mul(stride).saturating_add(addr);
        let run = at..at.saturating_add(bytes);
        if let (Some(d), Some(s)) = (dst.get_mut(run.clone()), src.get(run)) {
            d.copy_from_slice(s);
        }
    }
}

/// How the loop at `begin..=end` (`trip` iterations, the instance's state in `f`) runs on two
/// threads: the tiles to copy, how the outputs are shared and the first iteration of the
/// second half; `None` if it must run serially.
fn plan(
    b: &Bound<'_, '_, '_>,
    f: &Frame,
    (begin, end): (usize, usize),
    trip: u64,
) -> Option<(TileSet, Shares, u64)> {
    let p = b.program;
    let affine = matches!(
        p.instrs().get(begin)?.data,
        InstrData::LoopBegin {
            kind: LoopKind::Affine,
            ..
        }
    );
    // A launch's allocated tensors (scratch, constants) are bound once: its loops run serially.
    if trip < 2 || !outermost(f) || !affine || !p.allocated().is_empty() {
        return None;
    }
    // The random number generator counts its calls in program order: a body that draws
    // numbers or seeds the generator runs serially.
    let draws = p.instrs().get(begin..end)?.iter().any(|ins| {
        // Registers and device loops run in program order too.
        matches!(
            ins.data,
            InstrData::Rng { .. } | InstrData::Seed { .. } | InstrData::Register { .. }
        ) || matches!(ins.data, InstrData::LoopBegin { kind, .. } if kind.is_device())
    });
    if draws {
        return None;
    }
    let work = super::work_of(b, begin.saturating_add(1)..end).saturating_mul(trip);
    let shared = shared_reads(p, (begin, end), f.depth, work)?;
    let h = trip.div_ceil(2);
    let ha = half_hulls(b, f, (begin, end), (0, h));
    let hb = half_hulls(b, f, (begin, end), (h, trip));
    let shares = Shares::plan(
        &ha,
        &hb,
        || {
            (
                half_boxes(b, f, (begin, end), (0, h)),
                half_boxes(b, f, (begin, end), (h, trip)),
            )
        },
        b.outputs,
        work,
    )?;
    Some((shared, shares, h))
}

impl Bound<'_, '_, '_> {
    /// The outermost `affine_range` loops whose iterations this launch runs in two halves,
    /// one per host thread, on a core with two: their `LoopBegin` instruction indices (see
    /// `docs/performance.md`, "Host threads", for the conditions). Empty for a grid of several instances, whose
    /// instances are split instead, and when no loop qualifies.
    pub fn host_parallel_loops(&self) -> Vec<usize> {
        parallel_loops(self)
    }
}

/// The instructions (`LoopBegin` indices) of the outermost `affine_range` loops whose
/// iterations a launch of `b` on a core with two host threads runs in two halves: none when
/// the grid has several instances (those run in halves instead).
pub(crate) fn parallel_loops(b: &Bound<'_, '_, '_>) -> Vec<usize> {
    let mut found = Vec::new();
    if b.grid.count() != Some(1) {
        return found;
    }
    let mut f = Frame::new(b.grid.coords(0));
    let mut pc = 0;
    while let Some(ins) = b.program.instrs().get(pc) {
        match ins.data {
            // A device loop's body runs in program order.
            InstrData::LoopBegin { kind, end, .. } if kind.is_device() => pc = end as usize,
            InstrData::LoopBegin { trip, end, .. } => {
                let n = trip.eval(&b.syms);
                if plan(b, &f, (pc, end as usize), n).is_some() {
                    found.push(pc);
                    pc = end as usize;
                } else if n == 1 && f.depth < f.trips.len() {
                    // A loop that runs once: the loops in its body are outermost too.
                    f.trips[f.depth] = 1;
                    f.vars[MAX_PIDS.saturating_add(f.depth)] = 0;
                    f.depth = f.depth.saturating_add(1);
                } else {
                    pc = end as usize;
                }
            }
            InstrData::LoopEnd { .. } => f.depth = f.depth.saturating_sub(1),
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
            | InstrData::Indirect { .. }
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
        }
        pc = pc.saturating_add(1);
    }
    found
}

/// Runs the loop at `begin..=end` (`trip` iterations, the instance's state in `f`) in two
/// halves on two threads if it may (module documentation) and returns `Ok(true)`; returns
/// `Ok(false)`, having run nothing, if it must run serially.
pub(crate) fn run_parallel(
    e: &mut EngineState,
    second: &mut WorkerState<'_>,
    readers: &Readers,
    b: &mut Bound<'_, '_, '_>,
    f: &Frame,
    (begin, end): (usize, usize),
    trip: u64,
) -> Result<bool, ExecError> {
    if e.worker.is_none() {
        return Ok(false);
    }
    let p = b.program;
    let Some((shared, split, h)) = plan(b, f, (begin, end), trip) else {
        return Ok(false);
    };
    let outputs = b.outputs.len();
    let engines_b = second
        .engines
        .get_or_insert_with(|| Box::new(EngineState::single_threaded(second.target, e.isa)));
    engines_b.isa = e.isa;
    engines_b.block_bytes = e.block_bytes;
    for t in (0..p.tiles().len()).filter(|&t| shared.contains(t)) {
        copy_tile(p, &b.syms, t, e, engines_b);
    }
    let mut outs_a: [HbmOut<'_>; MAX_TENSORS] = core::array::from_fn(|_| HbmOut::empty());
    let mut outs_b: [HbmOut<'_>; MAX_TENSORS] = core::array::from_fn(|_| HbmOut::empty());
    split.lend(b.outputs, second.outputs, &mut outs_a, &mut outs_b);
    let mut bound_a = Bound {
        outputs: &mut outs_a[..outputs],
        ..*b
    };
    let mut bound_b = Bound {
        outputs: &mut outs_b[..outputs],
        ..*b
    };
    // `outermost` held, so the loop's depth is below MAX_LOOP_DEPTH.
    let d = f.depth;
    let half = |lo: u64, hi: u64| {
        let mut g = *f;
        g.vars[MAX_PIDS.saturating_add(d)] = i64::try_from(lo).unwrap_or(i64::MAX);
        g.trips[d] = i64::try_from(hi).unwrap_or(i64::MAX);
        g.depth = d.saturating_add(1);
        g
    };
    let (mut fa, mut fb) = (half(0, h), half(h, trip));
    let mut worker = e.worker.take();
    let Some(w) = worker.as_mut() else {
        unreachable!("checked above")
    };
    let body = (begin.saturating_add(1), end.saturating_add(1));
    // A second half the worker has not started by the time the first is done runs here, on
    // these engines, right after the first, as a serial run would.
    let (ra, rb) = w.join_or_leave(
        || {
            let mut plan = Plain::new(e, readers, None);
            interpret(e, &mut bound_a, &mut Unobserved, &mut plan, &mut fa, body)
        },
        || {
            let mut plan = Plain::new(engines_b, readers, None);
            interpret(
                engines_b,
                &mut bound_b,
                &mut Unobserved,
                &mut plan,
                &mut fb,
                body,
            )
        },
    );
    let rb = match (rb, &ra) {
        (Some(rb), _) => rb,
        (None, Err(_)) => Ok(0),
        (None, Ok(_)) => {
            #[cfg(test)]
            crate::worker::note_left(crate::worker::Left::Loop);
            let mut plan = Plain::new(e, readers, None);
            interpret(e, &mut bound_b, &mut Unobserved, &mut plan, &mut fb, body)
        }
    };
    e.worker = worker;
    split.give_back(b.outputs, second.outputs);
    ra.and(rb).map(|_| true)
}
