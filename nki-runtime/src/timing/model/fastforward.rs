//! Loop fast-forward: a timing-only run that keeps totals only ([`Detail::Summary`]) skips the
//! iterations of a loop that has reached a steady state, with the same result as timing them.
//!
//! The model only takes maxima of times, adds constant costs to them and compares them, so
//! that a state whose times are all moved by Δ evolves as the original one moved by Δ. At a
//! back edge of a loop whose on-chip operands and masks do not depend on its induction value
//! (the body's instructions, tiles and costs are then the same in every iteration; only its
//! HBM addresses move), the state is compared with the one `P` iterations before (`P` ≤
//! [`MAX_PERIOD`]). When every time that the loop's next iterations can read is either
//!
//! - moved by one Δ > 0 (the engine queues, the DMA queues and engines, HBM's queue, the
//!   cells of the loop's tiles, the total, the tiles' live ranges),
//! - 0, in both (never set: a 0 never raises a maximum),
//! - unchanged and earlier than every queue's next possible start (a cell the loop only
//!   reads: it cannot delay an instruction of the loop),
//! - or an idle gap unchanged at the front of its engine's list (no instruction of the loop
//!   fitted in it, and, all later ones being ready later, none will); a list may grow by the
//!   gaps each period leaves behind, or drop as many as its window evicts, and is moved on
//!   as the periods would leave it (`gap_lists.rs`),
//!
//! and the rotating tiles are at the same buffer (under the device's scheduling, where each
//! tile's buffers are cells of its own, a tile that changes buffer within the loop is compared
//! buffer by buffer from the one it is at instead, and a skip moves its buffers' contents as
//! the skipped iterations would have: a period need not bring it back), the next `k·P`
//! iterations are the last `P`
//! moved by Δ, 2Δ, …: their counts, busy times, bytes and FLOPs are `k` times the last `P`'s,
//! and their times are the state's moved by `k·Δ`. HBM is the exception: its blocks are
//! addressed by the loop's values, so the accesses of written tensors are replayed on it, at
//! each skipped iteration's addresses and moved times, and each wait must find what the last
//! period's found, moved; the skip ends at the first period where one does not.
//!
//! When the period's HBM accesses are at the same addresses in the next period, only the first
//! skipped period is replayed and the last one marked (see [`Timeline::replay`]).
//!
//! A snapshot is taken once the engine queues have moved by one Δ over two candidate periods,
//! or at once in a loop too short for that; a loop whose comparison failed waits twice as many
//! back edges before the next one (a loop that never skipped first tries its buffers' period
//! after a shorter one failed), and the next look is for a longer period (the engine queues may
//! repeat sooner than the whole state, e.g. DMA engines taken in turn).
//!
//! The instances of a launch grid are a loop nest over its axes whose body is the whole
//! program and whose induction values are the program ids: between two instances the executor
//! calls [`Timeline::instance_edge`], and an axis no on-chip operand or mask depends on is
//! skipped as a loop is, with a detector of its own.
//!
//! `Timing::fast_forward(false)` times every iteration and instance;
//! `tests/all/timing_fast_forward.rs` compares the two on every tutorial, the calibration cases,
//! random shapes and launch grids.

use std::collections::VecDeque;

use nki_lang::{InstrData, MAX_LOOP_DEPTH, MAX_PIDS, MAX_VARS, Memory, OperandRef, VarValues};

use super::super::regions::Cell;
use super::super::schedule::Track;
use super::gap_lists::{self, ListStep};
use super::{Detail, Gaps, Timeline};
use crate::exec::{InstanceEdge, LoopEdge, Resolver, Skip};
use crate::operand::Loc;

/// Most iterations in a period: a loop is compared with itself up to this many iterations
/// back (a rotating tile returns to its buffer after its degree's iterations, at most 16).
const MAX_PERIOD: i64 = 16;

/// How often a comparison at the period of a loop's buffers is retried after failing, before
/// longer periods are looked for.
const MAX_RETRIES: u8 = 2;

/// Events kept before the ones no snapshot needs are dropped.
const EVENTS_KEPT: usize = 4096;

/// Index in [`Timeline::visit_stats`]' order of the transfers count.
const DMA_TRANSFERS: usize = 8;

/// Index in [`Timeline::visit_stats`]' order of track `i`'s count.
fn track_count(i: usize) -> usize {
    11 + 2 * i + 1
}

/// Most HBM events replayed by one skip.
const MAX_REPLAYED: i64 = 1 << 16;

/// Largest time a skip may reach (ps): far from `u64`'s end, where saturation would start.
const MAX_TIME: u64 = 1 << 62;

/// The fast-forward's state in a timeline.
#[derive(Default)]
pub(super) struct FastForward {
    /// Whether loops may be skipped (a timing-only, [`Detail::Summary`] run that allows it).
    pub on: bool,
    /// By pc of a `LoopBegin`: what is known of the loop (empty until the first back edge).
    loops: Vec<LoopSlot>,
    /// By grid axis: what is known of the instances as a loop over it (see
    /// [`Timeline::instance_edge`]).
    axes: [LoopSlot; MAX_PIDS],
    /// By loop depth, then by grid axis (from [`MAX_LOOP_DEPTH`] on): the loop's recent back
    /// edges and the snapshot its state is compared with.
    detectors: [Detector; MAX_LOOP_DEPTH + MAX_PIDS],
    /// Whether a snapshot is held (HBM accesses are then recorded).
    pub armed: bool,
    /// HBM accesses of written tensors, in order (the first is event `events_base`).
    events: Vec<Event>,
    events_base: usize,
    /// Accesses not one partition apart seen (their cells are a whole plane, not the tiles').
    pub wide: u64,
    /// The loop values of the instruction being timed (while armed).
    pub vars: VarValues,
    /// Scratch: the state's times.
    now: Vec<u64>,
    /// Iterations skipped so far.
    pub skipped: i64,
    /// The lengths of the last snapshot's times, shape and counts (the next one's are
    /// allocated at once).
    state_lens: [usize; 3],
    /// The words of state the last snapshot held, its gap lists' included (0: none taken).
    state_words: u64,
    /// Snapshots taken so far (each starts the gap lists' peaks again).
    snapshots: u64,
    /// By pc of a `LoopBegin`: what its comparisons found so far.
    backoff: Vec<Backoff>,
}

/// What a loop's comparisons found so far.
#[derive(Copy, Clone, Debug, Default)]
struct Backoff {
    /// Failures not yet made up for (a comparison that skips takes one off).
    fails: u32,
    /// Back edges that pass before the loop takes a snapshot again (twice as many after each
    /// failure, so that a loop never in a steady state costs a comparison every few
    /// iterations only).
    wait: u64,
    /// The shortest period tried: the one that skipped last, or, after a period shorter than
    /// its buffers' failed in a loop that never skipped, theirs.
    min_period: i64,
    /// The period that skipped last (0: none did).
    found: i64,
    /// Whether a guess after the loop's first iteration failed (it is not tried again).
    guess_failed: bool,
    /// Comparisons made, and how many of them skipped.
    compared: u32,
    skips: u32,
}

/// Most failures counted (a loop then waits `2^MAX_BACKOFF - 1` back edges).
const MAX_BACKOFF: u32 = 10;

/// Words of state (times, shape, counts, gaps) a snapshot and its comparison go through in
/// the time one instruction takes to be timed: about 80 on a Xeon (model 167), 3.7 ns a
/// word against 300 ns an instruction in the Mamba tutorial's v2 kernel; the lower figure
/// favours comparing.
const WORDS_PER_INSTRUCTION: u64 = 64;

/// What is known of a loop.
#[derive(Clone, Debug, Default)]
enum LoopSlot {
    /// Not a `LoopBegin`, or not looked at yet.
    #[default]
    Unknown,
    /// Its on-chip operands or masks depend on its induction value.
    Ineligible,
    /// It may be skipped.
    Eligible(Box<LoopInfo>),
}

/// A back edge the fast-forward looks at: a loop's, or a grid axis' between two instances.
#[derive(Copy, Clone, Debug)]
struct Edge<'a> {
    /// Its detector: the loop's depth, or [`MAX_LOOP_DEPTH`] plus the axis.
    detector: usize,
    /// What it is the edge of: the loop's `LoopBegin` pc, or `usize::MAX` minus the axis.
    begin: usize,
    /// The index values of the iteration about to start.
    vars: &'a VarValues,
    /// The value at which the loop (the axis) ends.
    trip: i64,
    /// Instructions executed so far.
    executed: u64,
}

/// A loop whose iterations differ only in their HBM addresses.
#[derive(Clone, Debug)]
struct LoopInfo {
    /// Index of its induction value in the loop values.
    var: usize,
    /// Whether its body holds a loop (its iterations are long next to a snapshot).
    nested: bool,
    /// The cells of its tiles (all their buffers) but the permuted ones', SBUF's then PSUM's,
    /// each once.
    cells: [Vec<usize>; 2],
    /// Its tiles (as the device reads them).
    tiles: Vec<usize>,
    /// Those that rotate.
    rotating: Vec<usize>,
    /// Those that change buffer within the loop (their iterations are told apart by its
    /// value or inner ones) and are not in `permuted`: a period brings each back to its
    /// buffer.
    turning: Vec<usize>,
    /// `turning`, then the permuted tiles.
    changing: Vec<usize>,
    /// Those that change buffer within the loop and whose buffers are compared from the one
    /// each is at (the device's scheduling: cells of their own).
    permuted: Vec<Permuted>,
}

/// A rotating tile compared buffer by buffer from the one it is at: a period need not bring
/// it back to the same buffer.
#[derive(Clone, Debug)]
struct Permuted {
    /// The tile.
    tile: usize,
    /// Whether it is in PSUM.
    psum: bool,
    /// Its cells in each of its buffers (plane `i`: buffer `i`), the same number each.
    planes: Vec<Vec<usize>>,
}

/// A loop's recent back edges, and the snapshot it waits to compare with.
#[derive(Clone, Debug, Default)]
struct Detector {
    /// The loop.
    begin: usize,
    /// The loop values at the last back edge.
    vars: VarValues,
    /// The engine queues at the last back edges (consecutive iterations).
    ring: VecDeque<Quick>,
    /// A snapshot and the period after which the state is compared with it.
    snap: Option<(Snapshot, i64)>,
    /// The shortest period to look for (after a comparison at a shorter one failed: the
    /// engine queues may repeat sooner than the whole state, e.g. DMA engines taken in turn).
    floor: i64,
    /// Whether the snapshot was taken before the engine queues showed a steady state (its
    /// comparison failing then says little of the loop: no back-off follows).
    early: bool,
    /// Whether the snapshot was taken on a guess after one iteration (its comparison
    /// failing changes nothing but that the loop is not guessed again).
    guess: bool,
    /// The rotation counts of the loop's changing tiles at the last back edge.
    turns: Vec<u64>,
    /// Comparisons at the buffers' period that failed in a row: such a period is looked for
    /// again (the state may not have settled yet) before longer ones.
    retries: u8,
}

/// The engine queues at a back edge.
#[derive(Copy, Clone, Debug)]
struct Quick {
    /// The next iteration.
    v: i64,
    /// Each queue's next possible start.
    free: [u64; 6],
    /// Instructions on each queue so far.
    counts: [u64; 6],
    /// A digest of the buffers the loop's turning tiles are at.
    buffers: u64,
    /// Instructions executed so far.
    executed: u64,
}

/// The Δ by which `b`'s queues are `a`'s moved (those that ran; the others unchanged), if
/// they are and one ran.
fn quick_moved(a: &Quick, b: &Quick) -> Option<u64> {
    let mut delta = None;
    for i in 0..6 {
        if a.counts[i] == b.counts[i] {
            if a.free[i] != b.free[i] {
                return None;
            }
            continue;
        }
        let d = b.free[i].checked_sub(a.free[i]).filter(|&d| d > 0)?;
        if *delta.get_or_insert(d) != d {
            return None;
        }
    }
    delta
}

/// The state at a loop's back edge.
#[derive(Clone, Debug)]
struct Snapshot {
    /// The loop values of the next iteration.
    vars: VarValues,
    /// Its times ([`Timeline::visit_times`] order).
    times: Vec<u64>,
    /// The engines' gap lists ([`Timeline::gap_lists`] order) and the gaps each dropped so
    /// far.
    lists: Vec<(VecDeque<(u64, u64)>, u64)>,
    /// [`FastForward::snapshots`] once it was taken (the lists' peaks count from it while no
    /// other was taken).
    generation: u64,
    /// What must be equal: flags, list lengths, tracked tensors.
    shape: Vec<u64>,
    /// Its counts ([`Timeline::visit_stats`] order).
    stats: Vec<u64>,
    /// The rotating tiles' state: seen, key, count.
    rotation: Vec<(bool, VarValues, u64)>,
    /// The next event's index.
    events: usize,
    /// Instructions executed so far.
    executed: u64,
    /// Wide accesses so far.
    wide: u64,
}

/// An HBM access of a written tensor (or a write): replayed on HBM for skipped iterations.
#[derive(Copy, Clone, Debug)]
pub(super) struct Event {
    pc: u32,
    vars: VarValues,
    /// `(slot, writes)` of its HBM operands (`n` of them).
    slots: [(u8, bool); 2],
    n: u8,
    /// When each could start by its blocks alone (0: at once).
    waits: [u64; 2],
    /// When the instruction completed (its marks).
    done: u64,
}

/// Which instructions set a time (a time they leave unchanged over a period, no instruction
/// of the period set: none of the next periods' will).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum User {
    /// The instructions counted on this track (by `Track::index`).
    Track(usize),
    /// Those of VectorE, ScalarE or GpSimd (a shared port).
    Compute,
    /// Every DMA.
    Dma,
}

/// How a time in the state may move from one period to the next.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// A queue's or engine's next possible start, or a constraint on it: moved, 0, or
    /// unchanged when its users did not run.
    Gate(User),
    /// A completion nothing waits for: moved, or 0.
    Total,
    /// A memory cell or a live range: moved, 0, or unchanged and before every gate.
    Cell,
}

impl FastForward {
    /// Skipping loops (`on`) or not.
    pub fn new(on: bool) -> FastForward {
        FastForward {
            on,
            ..FastForward::default()
        }
    }
}

impl Timeline<'_> {
    /// With `on`, a timing-only [`Detail::Summary`] run skips the iterations of loops in a
    /// steady state (the result is the same; see `fastforward.rs`).
    pub(super) fn set_fast_forward(&mut self, on: bool) {
        // A program with `with_schedule` edges or `no_reorder!` blocks is timed iteration by
        // iteration: the skipped iterations' shift does not carry the waits on the latest
        // execution of another instruction (`docs/timing.md`).
        self.ff.on =
            on && self.detail == Detail::Summary && !self.computes && !self.control.orders();
    }

    /// Records the HBM accesses of the DMA being timed (complete at `done`) while a snapshot
    /// is held: before its marks.
    pub(super) fn record_hbm(&mut self, pc: u32, ops: &crate::operand::Operands, done: u64) {
        let mut e = Event {
            pc,
            vars: self.ff.vars,
            slots: [(0, false); 2],
            n: 0,
            waits: [0; 2],
            done,
        };
        for s in 0..2u8 {
            if let Some(r) = ops.slot(usize::from(s))
                && let Loc::Hbm(t) = r.loc
            {
                let write = r.dir.writes();
                if write || self.hbm.tracked(usize::from(t)) {
                    let n = usize::from(e.n);
                    e.slots[n] = (s, write);
                    e.waits[n] = self.hbm.wait_alone(usize::from(t), r, write);
                    e.n += 1;
                }
            }
        }
        if e.n > 0 {
            self.ff.events.push(e);
        }
    }

    /// At a loop's back edge: compares the state with the loop's snapshot, skips what it can.
    pub(super) fn edge(&mut self, edge: &LoopEdge<'_>, resolve: &mut Resolver<'_>) -> Skip {
        if !self.ff.on {
            return Skip::NONE;
        }
        let depth = edge.depth;
        let edge = Edge {
            detector: depth.min(MAX_LOOP_DEPTH - 1),
            begin: edge.begin,
            vars: edge.vars,
            trip: edge.trip,
            executed: edge.executed,
        };
        if self.ff.loops.is_empty() {
            self.ff.loops = vec![LoopSlot::Unknown; self.program.instrs().len()];
            self.ff.backoff = vec![Backoff::default(); self.program.instrs().len()];
        }
        if matches!(self.ff.loops.get(edge.begin), Some(LoopSlot::Unknown)) {
            let slot = self.loop_info(edge.begin, depth);
            self.ff.loops[edge.begin] = slot;
        }
        if !matches!(self.ff.loops.get(edge.begin), Some(LoopSlot::Eligible(_))) {
            return Skip::NONE;
        }
        let slot = core::mem::take(&mut self.ff.loops[edge.begin]);
        let skip = match &slot {
            LoopSlot::Eligible(info) => self.edge_of(info, &edge, resolve),
            LoopSlot::Ineligible | LoopSlot::Unknown => Skip::NONE,
        };
        self.ff.loops[edge.begin] = slot;
        skip
    }

    /// Between two instances of a launch grid: the instances run as a loop nest over the
    /// grid's axes, whose body is the whole program and whose induction values are the
    /// program ids; an axis is skipped as a loop is when no on-chip operand or mask depends on
    /// its program id.
    pub(super) fn instance_edge(
        &mut self,
        edge: &InstanceEdge<'_>,
        resolve: &mut Resolver<'_>,
    ) -> Skip {
        if !self.ff.on || edge.axis >= MAX_PIDS {
            return Skip::NONE;
        }
        let axis = edge.axis;
        if matches!(self.ff.axes[axis], LoopSlot::Unknown) {
            self.ff.axes[axis] = self.grid_axis_info(axis);
        }
        let slot = core::mem::take(&mut self.ff.axes[axis]);
        let skip = match &slot {
            LoopSlot::Eligible(info) => {
                let edge = Edge {
                    detector: MAX_LOOP_DEPTH + axis,
                    begin: usize::MAX - axis,
                    vars: edge.vars,
                    trip: edge.size,
                    executed: edge.executed,
                };
                self.edge_of(info, &edge, resolve)
            }
            LoopSlot::Ineligible | LoopSlot::Unknown => Skip::NONE,
        };
        self.ff.axes[axis] = slot;
        skip
    }

    /// [`Timeline::edge`] of an eligible loop: a snapshot is taken when the engine queues
    /// have moved by one Δ over two periods of `p` iterations, and compared in full `p`
    /// iterations later.
    fn edge_of(&mut self, info: &LoopInfo, edge: &Edge<'_>, resolve: &mut Resolver<'_>) -> Skip {
        let d = edge.detector;
        let v = edge.vars[info.var];
        let remaining = edge.trip.saturating_sub(v);
        let mut det = core::mem::take(&mut self.ff.detectors[d]);
        let consecutive = det.begin == edge.begin
            && det.ring.back().is_some_and(|q| q.v == v - 1)
            && (0..MAX_VARS).all(|i| i == info.var || det.vars[i] == edge.vars[i]);
        if !consecutive {
            det.ring.clear();
            det.snap = None;
            det.begin = edge.begin;
            det.floor = 1;
            det.retries = 0;
        }
        det.vars = *edge.vars;
        let quick = Quick {
            v,
            free: self.free.map(|f| f.t),
            counts: core::array::from_fn(|i| self.tracks[i].count),
            buffers: info.turning.iter().fold(0u64, |h, &t| {
                let degree = u64::from(self.degree.get(t).copied().unwrap_or(1).max(1));
                let b = self.rotation.get(t).map_or(0, |r| r.count % degree);
                h.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(b)
            }),
            executed: edge.executed,
        };
        // The tiles' buffers repeat after the period their last iteration's advance gives:
        // the turning tiles' (`early`), all of them (`natural`).
        let (early, natural) = if consecutive && det.turns.len() == info.changing.len() {
            (
                self.buffer_period(&info.turning, &det.turns),
                self.buffer_period(&info.changing, &det.turns),
            )
        } else {
            (None, None)
        };
        det.turns.clear();
        det.turns
            .extend((info.changing.iter()).map(|&t| self.rotation.get(t).map_or(0, |r| r.count)));
        if let Some((snap, p)) = det.snap.take() {
            let since = v - snap.vars[info.var];
            if since == p {
                if remaining >= p
                    && let Some(skip) = self.try_skip(info, &snap, edge, p, resolve)
                {
                    det.ring.clear();
                    det.floor = p;
                    det.retries = 0;
                    det.guess = false;
                    self.ff.detectors[d] = det;
                    if let Some(b) = self.ff.backoff.get_mut(edge.begin) {
                        *b = Backoff {
                            fails: b.fails.saturating_sub(1),
                            min_period: p,
                            found: p,
                            guess_failed: b.guess_failed,
                            compared: b.compared.saturating_add(1),
                            skips: b.skips.saturating_add(1),
                            ..Backoff::default()
                        };
                    }
                    self.rearm();
                    return skip;
                }
                if let Some(b) = self.ff.backoff.get_mut(edge.begin) {
                    b.compared = b.compared.saturating_add(1);
                }
                if det.guess {
                    // A failed guess says nothing of the loop's periods; it is not tried again.
                    det.guess = false;
                    if let Some(b) = self.ff.backoff.get_mut(edge.begin) {
                        b.guess_failed = true;
                    }
                } else if (natural == Some(p) || early == Some(p)) && det.retries < MAX_RETRIES {
                    // The period of all the buffers, or of the turning tiles' (the permuted
                    // ones are compared from the buffer they are at): the state may not have
                    // settled yet. It is looked for again from here.
                    det.retries += 1;
                    det.floor = p;
                } else {
                    // The next look is for a longer period (from the shortest again after the
                    // longest).
                    det.retries = 0;
                    det.floor = if p < MAX_PERIOD { p + 1 } else { 1 };
                }
                // A period shorter than the buffers' (and than the turning tiles') that failed
                // in a loop that never skipped: theirs is tried next; else the loop waits. (A
                // loop whose tiles all turn with one period or are permuted repeats at the
                // turning tiles' period once it has settled: the Mamba tutorial's channel loop
                // at the first iteration its pipeline is full, not four iterations later.)
                if !det.early
                    && let Some(b) = self.ff.backoff.get_mut(edge.begin)
                {
                    match natural.filter(|&n| n > p && b.found == 0 && early != Some(p)) {
                        Some(n) => b.min_period = n,
                        None => {
                            b.min_period = b.found.max(1);
                            b.fails = (b.fails + 1).min(MAX_BACKOFF);
                            b.wait = (1 << b.fails) - 1;
                        }
                    }
                }
            } else if since < p {
                det.snap = Some((snap, p));
            }
        }
        if det.ring.len() > 2 * MAX_PERIOD as usize {
            det.ring.pop_front();
        }
        det.ring.push_back(quick);
        // After failed comparisons, the loop waits before it takes another snapshot.
        let (waiting, min_period) = match self.ff.backoff.get_mut(edge.begin) {
            Some(b) if det.snap.is_none() && b.wait > 0 => {
                b.wait -= 1;
                (true, 1)
            }
            Some(b) => (false, b.min_period.max(1)),
            None => (false, 1),
        };
        if waiting || (det.snap.is_none() && !self.worth_comparing(&det, edge, remaining)) {
            self.ff.detectors[d] = det;
            self.rearm();
            return Skip::NONE;
        }
        // In a loop too short for the ring to show two periods of the turning tiles'
        // buffers before too few iterations are left to skip one (at most 3 periods), a
        // snapshot is taken at once.
        if det.snap.is_none()
            && let Some(p) = early
            && det.ring.len() <= p as usize
            && remaining >= 2 * p
            && edge.trip <= 3 * p
        {
            det.snap = Some((self.snapshot(info, edge), p));
            det.early = true;
            det.guess = false;
        }
        if det.snap.is_none() && remaining >= 2 && self.buffers_seen(info) {
            let n = det.ring.len();
            let at = |back: i64| {
                usize::try_from(back)
                    .ok()
                    .and_then(|b| n.checked_sub(1 + b))
                    .and_then(|i| det.ring.get(i))
            };
            let period = (min_period.max(det.floor).max(1)..=MAX_PERIOD).find(|&p| {
                remaining >= 2 * p
                    && matches!(
                        (at(p), at(0)),
                        (Some(a), Some(b)) if a.buffers == b.buffers && quick_moved(a, b).is_some()
                    )
            });
            if let Some(p) = period {
                det.snap = Some((self.snapshot(info, edge), p));
                det.early = false;
                det.guess = false;
            }
        }
        // A loop with a loop inside, at its first back edge, is compared one iteration later
        // on a guess: a snapshot costs little next to such an iteration, and a loop of few
        // iterations skips one more when its state is steady at once.
        if det.snap.is_none()
            && det.ring.len() == 1
            && info.nested
            && remaining >= 2
            && self.buffers_seen(info)
            && self
                .ff
                .backoff
                .get(edge.begin)
                .is_none_or(|b| !b.guess_failed)
        {
            det.snap = Some((self.snapshot(info, edge), 1));
            det.early = true;
            det.guess = true;
        }
        self.ff.detectors[d] = det;
        self.rearm();
        Skip::NONE
    }

    /// Whether a snapshot is worth its cost: the instructions a skip from here could spare
    /// (the loop's remaining iterations at the instructions its last iterations executed),
    /// as likely to be spared as the loop's comparisons so far skipped (one more of each
    /// counted), against the words of state a snapshot and its comparison go through
    /// ([`WORDS_PER_INSTRUCTION`]). A loop of few short iterations whose state never settles
    /// (the Mamba tutorial's state loop inside its channel loop) stops comparing after a
    /// few failures; a long loop compares as its back-off allows.
    fn worth_comparing(&self, det: &Detector, edge: &Edge<'_>, remaining: i64) -> bool {
        let (Some(first), Some(last)) = (det.ring.front(), det.ring.back()) else {
            return true;
        };
        let iterations = u64::try_from(last.v - first.v).unwrap_or(0);
        if self.ff.state_words == 0 || iterations == 0 {
            return true;
        }
        let per = last.executed.saturating_sub(first.executed) / iterations;
        let spared = per
            .saturating_mul(u64::try_from(remaining).unwrap_or(0))
            .saturating_mul(WORDS_PER_INSTRUCTION);
        let (compared, skips) = (self.ff.backoff.get(edge.begin))
            .map_or((0, 0), |b| (u64::from(b.compared), u64::from(b.skips)));
        spared.saturating_mul(skips + 1) >= self.ff.state_words.saturating_mul(compared + 2)
    }

    /// Whether each tile that changes buffer within the loop has been at each of its buffers:
    /// before, a buffer never written is in the state, and a comparison with a snapshot
    /// taken then fails.
    fn buffers_seen(&self, info: &LoopInfo) -> bool {
        info.changing.iter().all(|&t| {
            let degree = u64::from(self.degree.get(t).copied().unwrap_or(1).max(1));
            self.rotation
                .get(t)
                .is_none_or(|r| r.seen && r.count.saturating_add(1) >= degree)
        })
    }

    /// The iterations after which `tiles` are back at the buffers they are at, if each keeps
    /// advancing as it did since `before` (their rotation counts at the last back edge) and
    /// that is at most [`MAX_PERIOD`].
    fn buffer_period(&self, tiles: &[usize], before: &[u64]) -> Option<i64> {
        let mut p = 1u64;
        for (&t, &a) in tiles.iter().zip(before) {
            let degree = u64::from(self.degree.get(t).copied().unwrap_or(1).max(1));
            let b = self.rotation.get(t).map_or(0, |r| r.count);
            let moved = b.checked_sub(a)?;
            // Mostly a tile that did not turn or turned once: no division.
            let step = if moved < degree {
                moved
            } else {
                moved % degree
            };
            if step == 0 {
                continue;
            }
            let own = degree / gcd(step, degree);
            p = p / gcd(p, own) * own;
            if p > MAX_PERIOD as u64 {
                return None;
            }
        }
        i64::try_from(p).ok()
    }

    /// Whether any snapshot is held; drops the events none needs.
    fn rearm(&mut self) {
        let oldest = (self.ff.detectors.iter())
            .filter_map(|d| d.snap.as_ref())
            .map(|(s, _)| s.events)
            .min();
        self.ff.armed = oldest.is_some();
        let oldest = oldest.unwrap_or(self.ff.events_base + self.ff.events.len());
        if self.ff.events.len() > EVENTS_KEPT
            || oldest == self.ff.events_base + self.ff.events.len()
        {
            let drop = oldest
                .saturating_sub(self.ff.events_base)
                .min(self.ff.events.len());
            self.ff.events.drain(..drop);
            self.ff.events_base += drop;
        }
    }

    /// A quick test before the whole comparison: the engine queues' next starts are the
    /// snapshot's moved by one Δ (the first of [`Timeline::visit_times`]'s times).
    fn queues_moved(&self, snap: &Snapshot) -> bool {
        let mut delta = None;
        for (i, (q, &a)) in self.free.iter().zip(&snap.times).enumerate() {
            let b = q.t;
            let ran = snap.stats.get(track_count(i)) != Some(&self.tracks[i].count);
            if a == 0 || (b == a && !ran) {
                if b != a {
                    return false;
                }
                continue;
            }
            let Some(d) = b.checked_sub(a).filter(|&d| d > 0) else {
                return false;
            };
            if *delta.get_or_insert(d) != d {
                return false;
            }
        }
        true
    }

    /// What is known of the loop at `begin` (at `depth`).
    fn loop_info(&self, begin: usize, depth: usize) -> LoopSlot {
        let instrs = self.program.instrs();
        let Some(InstrData::LoopBegin { end, .. }) = instrs.get(begin).map(|i| i.data) else {
            return LoopSlot::Ineligible;
        };
        self.body_info(begin + 1..end as usize, MAX_PIDS + depth)
    }

    /// What is known of the instances as a loop over grid axis `axis`: its body is the whole
    /// program, its induction value the program id.
    fn grid_axis_info(&self, axis: usize) -> LoopSlot {
        self.body_info(0..self.program.instrs().len(), axis)
    }

    /// Whether a loop whose body is the instructions `body` and whose induction value is
    /// index variable `var` may be skipped, and what its iterations touch.
    fn body_info(&self, body: core::ops::Range<usize>, var: usize) -> LoopSlot {
        let program = self.program;
        let instrs = program.instrs();
        if var >= MAX_VARS {
            return LoopSlot::Ineligible;
        }
        let views = program.views();
        let mut tiles: Vec<usize> = Vec::new();
        for ins in instrs.get(body.clone()).unwrap_or(&[]) {
            if let Some(m) = ins.mask
                && let Some(mask) = program.masks().get(m.index())
                && mask.terms().iter().any(|t| t.offset.coef[var] != 0)
            {
                return LoopSlot::Ineligible;
            }
            for o in ins.operands() {
                if let OperandRef::View(id) = o.operand {
                    let Some(view) = views.get(id.index()) else {
                        return LoopSlot::Ineligible;
                    };
                    if view.offset.coef[var] != 0 || view.part_var.coef[var] != 0 {
                        return LoopSlot::Ineligible;
                    }
                    let t = self.tile_read(view.tile);
                    if !tiles.contains(&t) {
                        tiles.push(t);
                    }
                }
            }
        }
        tiles.sort_unstable();
        let device = self.device();
        // Each tile's cells, plane by plane (every plane's in the same order).
        let mut spans: Vec<(usize, bool, Vec<Vec<usize>>)> = Vec::with_capacity(tiles.len());
        let mut rotating = Vec::new();
        for &t in &tiles {
            let Some(decl) = program.tiles().get(t) else {
                return LoopSlot::Ineligible;
            };
            let degree = self.degree.get(t).copied().unwrap_or(1).max(1) as usize;
            if degree > 1 && self.rotation.get(t).is_some_and(|r| r.scope.is_some()) {
                rotating.push(t);
            }
            let (psum, mem) = match decl.memory {
                Memory::Psum => (true, &self.psum),
                Memory::Sbuf => (false, &self.sbuf),
                Memory::Hbm => continue,
            };
            let lo = i64::from(decl.addr).saturating_add(self.shift.get(t).copied().unwrap_or(0));
            let hi = lo.saturating_add(decl.bytes_per_partition() as i64);
            let partitions = decl.shape.partitions() as usize;
            let planes = match (degree > 1, device) {
                (false, _) => 0..1,
                (true, true) => 0..degree,
                (true, false) => 1..degree + 1,
            };
            let planes = planes
                .map(|plane| {
                    let mut c = Vec::new();
                    mem.cells(mem.span(lo, hi, partitions, plane), &mut c);
                    c
                })
                .collect();
            spans.push((t, psum, planes));
        }
        // A tile whose iterations are told apart by this loop's value (or inner ones)
        // changes buffer within the loop; the others keep theirs.
        let changing: Vec<usize> = rotating
            .iter()
            .copied()
            .filter(|&t| {
                let scope = self.rotation.get(t).and_then(|r| r.scope).unwrap_or(0);
                MAX_PIDS + scope > var
            })
            .collect();
        // Under the device's scheduling, one whose planes hold cells of its own (in the same
        // number each, none shared with another tile) is compared buffer by buffer from the
        // one it is at: its state at any buffer is the same state. How many of the loop's
        // tiles' planes hold each cell of SBUF and PSUM:
        let mut holders = [vec![0u8; self.sbuf.len()], vec![0u8; self.psum.len()]];
        for (_, psum, planes) in &spans {
            let held = &mut holders[usize::from(*psum)];
            for &i in planes.iter().flatten() {
                if let Some(h) = held.get_mut(i) {
                    *h = h.saturating_add(1);
                }
            }
        }
        let own =
            |psum: bool, c: &usize| holders[usize::from(psum)].get(*c).is_some_and(|&h| h <= 1);
        // The cells of the tiles not permuted, in order and once each.
        let mut kept = [vec![false; self.sbuf.len()], vec![false; self.psum.len()]];
        let mut permuted = Vec::new();
        for (t, psum, planes) in spans {
            let n = planes.first().map_or(0, Vec::len);
            let permutable = device
                && changing.contains(&t)
                && planes.len() > 1
                && n > 0
                && planes
                    .iter()
                    .all(|c| c.len() == n && c.iter().all(|i| own(psum, i)));
            if permutable {
                permuted.push(Permuted {
                    tile: t,
                    psum,
                    planes,
                });
            } else {
                let kept = &mut kept[usize::from(psum)];
                for &i in planes.iter().flatten() {
                    if let Some(k) = kept.get_mut(i) {
                        *k = true;
                    }
                }
            }
        }
        let cells = kept.map(|kept| {
            (kept.iter().enumerate())
                .filter(|&(_, &k)| k)
                .map(|(i, _)| i)
                .collect::<Vec<usize>>()
        });
        let turning: Vec<usize> = changing
            .into_iter()
            .filter(|t| !permuted.iter().any(|p| p.tile == *t))
            .collect();
        let changing = (turning.iter().copied())
            .chain(permuted.iter().map(|p| p.tile))
            .collect();
        let nested = (instrs.get(body).unwrap_or(&[]).iter())
            .any(|i| matches!(i.data, InstrData::LoopBegin { .. }));
        LoopSlot::Eligible(Box::new(LoopInfo {
            var,
            nested,
            cells,
            permuted,
            tiles,
            rotating,
            turning,
            changing,
        }))
    }

    /// Calls `f` with every time of the state a loop's iterations may read or move, in one
    /// order, with how it may move.
    fn visit_times(&mut self, info: &LoopInfo, f: &mut impl FnMut(Kind, &mut u64)) {
        for (i, q) in self.free.iter_mut().enumerate() {
            f(Kind::Gate(User::Track(i)), &mut q.t);
        }
        f(
            Kind::Gate(User::Track(Track::TensorMatrix.index())),
            &mut self.mm_started.t,
        );
        for q in self.sbuf_port.iter_mut().chain(&mut self.psum_port) {
            f(Kind::Gate(User::Compute), &mut q.t);
        }
        f(Kind::Gate(User::Dma), &mut self.hbm_free);
        for queues in [&mut self.queue_done, &mut self.queue_trigger] {
            for (i, q) in queues.iter_mut().enumerate() {
                let track = Track::Queue(u8::try_from(i).unwrap_or(u8::MAX)).index();
                f(Kind::Gate(User::Track(track)), &mut q.t);
            }
        }
        let dma = if self.dma_uniform { 1 } else { self.dma.len() };
        for q in self.dma.iter_mut().take(dma) {
            f(Kind::Gate(User::Dma), &mut q.t);
        }
        f(Kind::Total, &mut self.total);
        self.each_loop_cell(info, |w, r| {
            f(Kind::Cell, &mut w.t);
            f(Kind::Cell, &mut r.t);
        });
        for &t in &info.tiles {
            if let Some(l) = self.live.get_mut(t) {
                f(Kind::Cell, &mut l.1);
            }
        }
    }

    /// Moves the buffers of each permuted tile of `info` by `by[i]` (its rotation count's
    /// advance): the contents of buffer `b` go to buffer `b + by`, as the iterations skipped
    /// would have left them.
    /// Calls `g` with the write and read of each cell of the loop's tiles: `info.cells`, then
    /// the turning tiles' buffers from the one each is at (the order a comparison and a skip
    /// see them in).
    fn each_loop_cell(&mut self, info: &LoopInfo, mut g: impl FnMut(&mut Cell, &mut Cell)) {
        for (mem, cells) in [&mut self.sbuf, &mut self.psum]
            .into_iter()
            .zip(&info.cells)
        {
            for &i in cells {
                if let Some((w, r)) = mem.cell_mut(i) {
                    g(w, r);
                }
            }
        }
        for pt in &info.permuted {
            let mem = if pt.psum {
                &mut self.psum
            } else {
                &mut self.sbuf
            };
            let at = self.rotation.get(pt.tile).map_or(0, |r| r.count);
            for plane in logical(&pt.planes, at) {
                for &i in plane {
                    if let Some((w, r)) = mem.cell_mut(i) {
                        g(w, r);
                    }
                }
            }
        }
    }

    fn turn_buffers(&mut self, info: &LoopInfo, by: &[u64]) {
        for (pt, &by) in info.permuted.iter().zip(by) {
            let d = pt.planes.len() as u64;
            let s = (by % d) as usize;
            if s == 0 {
                continue;
            }
            let mem = if pt.psum {
                &mut self.psum
            } else {
                &mut self.sbuf
            };
            let mut held = Vec::with_capacity(pt.planes.len() * pt.planes[0].len());
            for plane in &pt.planes {
                for &i in plane {
                    held.push(mem.cell_mut(i).map(|(w, r)| (*w, *r)));
                }
            }
            let n = pt.planes[0].len();
            for b in 0..pt.planes.len() {
                let to = &pt.planes[(b + s) % pt.planes.len()];
                for (j, &i) in to.iter().enumerate() {
                    if let (Some((w, r)), Some(Some(c))) = (mem.cell_mut(i), held.get(b * n + j)) {
                        (*w, *r) = *c;
                    }
                }
            }
        }
    }

    /// What must be equal between two states for one to be the other moved.
    fn shape(&mut self, info: &LoopInfo, out: &mut Vec<u64>) {
        out.clear();
        out.push(u64::from(self.dma_uniform));
        out.push(self.table.map_or(u64::MAX, u64::from));
        let tensors = self.program.tensors().len();
        for t in 0..tensors {
            out.push(u64::from(self.hbm.tracked(t)));
        }
        self.each_loop_cell(info, |w, r| {
            out.push(u64::from(w.pe) | (u64::from(r.pe) << 1));
        });
        for &t in &info.tiles {
            out.push(self.live.get(t).map_or(0, |l| l.0));
        }
    }

    /// Calls `f` with every count of the schedule.
    fn visit_stats(&mut self, f: &mut impl FnMut(&mut u64)) {
        for x in [
            &mut self.instructions,
            &mut self.not_run,
            &mut self.table_loads,
            &mut self.flops,
            &mut self.hw_flops,
            &mut self.hbm_read,
            &mut self.hbm_write,
            &mut self.dma_bytes,
            &mut self.dma_transfers,
            &mut self.dma_all.busy,
            &mut self.dma_all.count,
        ] {
            f(x);
        }
        for t in &mut self.tracks {
            f(&mut t.busy);
            f(&mut t.count);
        }
        for row in &mut self.opcodes {
            for c in row.iter_mut() {
                f(c);
            }
        }
    }

    /// The rotating tiles' state.
    fn rotation_state(&self, info: &LoopInfo) -> Vec<(bool, VarValues, u64)> {
        info.rotating
            .iter()
            .map(|&t| {
                self.rotation
                    .get(t)
                    .map_or((false, [0; MAX_VARS], 0), |r| (r.seen, r.key, r.count))
            })
            .collect()
    }

    /// The engines' gap lists a loop's iterations may fill, each with whether it is a DMA
    /// engine's or HBM's (a transfer's), in one order.
    fn gap_lists(&self) -> impl Iterator<Item = (&Gaps, bool)> {
        let dma = if self.dma_uniform { 1 } else { self.dma.len() };
        (self.gaps.iter().map(|g| (g, false)))
            .chain(self.dma_gaps.iter().take(dma).map(|g| (g, true)))
            .chain(core::iter::once((&self.hbm_gaps, true)))
    }

    /// [`Timeline::gap_lists`], to change.
    fn gap_lists_mut(&mut self) -> impl Iterator<Item = &mut Gaps> {
        let dma = if self.dma_uniform { 1 } else { self.dma.len() };
        (self.gaps.iter_mut())
            .chain(self.dma_gaps.iter_mut().take(dma))
            .chain(core::iter::once(&mut self.hbm_gaps))
    }

    /// The state at a back edge.
    fn snapshot(&mut self, info: &LoopInfo, edge: &Edge<'_>) -> Snapshot {
        let [times_len, shape_len, stats_len] = self.ff.state_lens;
        let mut times = Vec::with_capacity(times_len);
        self.visit_times(info, &mut |_, t| times.push(*t));
        self.ff.snapshots += 1;
        for g in self.gap_lists_mut() {
            g.reset_peak();
        }
        let lists = self
            .gap_lists()
            .map(|(g, _)| (g.list.clone(), g.evicted))
            .collect();
        let mut shape = Vec::with_capacity(shape_len);
        self.shape(info, &mut shape);
        let mut stats = Vec::with_capacity(stats_len);
        self.visit_stats(&mut |x| stats.push(*x));
        self.ff.state_lens = [times.len(), shape.len(), stats.len()];
        let gaps: usize = self.gap_lists().map(|(g, _)| 2 * g.list.len()).sum();
        self.ff.state_words = (times.len() + shape.len() + stats.len() + gaps) as u64;
        Snapshot {
            vars: *edge.vars,
            times,
            lists,
            generation: self.ff.snapshots,
            shape,
            stats,
            rotation: self.rotation_state(info),
            events: self.ff.events_base + self.ff.events.len(),
            executed: edge.executed,
            wide: self.ff.wide,
        }
    }

    /// How each gap list followed from the snapshot's over the period in which the gates
    /// moved by `delta` (see `gap_lists.rs`), and the earliest start of their moved gaps in
    /// the snapshot; `None` when one did not. An unchanged gap may stay in an engine's list
    /// (an instruction takes the first gap it fits in). In a DMA engine's or HBM's, it may stay
    /// while the DMA engines are in one state, or if it ends before `arrivals`, when no
    /// transfer of the next periods has arrived yet (none fits in it): a transfer takes the engines
    /// that can start it earliest, and an unchanged gap that fits one of this period's
    /// transfers on an engine it did not take may change the choice when that transfer comes
    /// Δ later.
    fn list_steps(
        &self,
        snap: &Snapshot,
        delta: u64,
        arrivals: u64,
    ) -> Option<(Vec<ListStep>, u64)> {
        let frozen_anywhere = self.dma_uniform;
        let mut floor = u64::MAX;
        let mut steps = Vec::with_capacity(snap.lists.len());
        let mut lists = self.gap_lists();
        for (old, evicted) in &snap.lists {
            let (g, transfers) = lists.next()?;
            let frozen_ok = |(_, end): (u64, u64)| !transfers || frozen_anywhere || end < arrivals;
            let evicted = g.evicted.checked_sub(*evicted)?;
            let (s, f) = gap_lists::step(old, &g.list, evicted, delta, frozen_ok)?;
            floor = floor.min(f);
            steps.push(s);
        }
        lists.next().is_none().then_some((steps, floor))
    }

    /// Skips whole periods of `p` iterations if the state is the snapshot's moved (see the
    /// module's doc); `None` when it is not, or no period could be skipped.
    fn try_skip(
        &mut self,
        info: &LoopInfo,
        snap: &Snapshot,
        edge: &Edge<'_>,
        p: i64,
        resolve: &mut Resolver<'_>,
    ) -> Option<Skip> {
        if self.ff.wide != snap.wide || !self.queues_moved(snap) {
            return None;
        }
        // The rotating tiles at the same buffer, their keys moved by the period or not.
        let rotation = self.rotation_state(info);
        let mut rot_delta = Vec::with_capacity(rotation.len());
        for ((&t, a), b) in info.rotating.iter().zip(&snap.rotation).zip(&rotation) {
            let degree = u64::from(self.degree.get(t).copied().unwrap_or(1).max(1));
            let dc = b.2.checked_sub(a.2)?;
            let dk = b.1[info.var].checked_sub(a.1[info.var])?;
            let keys = (0..MAX_VARS).all(|i| i == info.var || a.1[i] == b.1[i]);
            let permuted = info.permuted.iter().any(|pt| pt.tile == t);
            if a.0 != b.0 || (dc % degree != 0 && !permuted) || !keys || (dk != 0 && dk != p) {
                return None;
            }
            rot_delta.push((dc, dk));
        }
        let mut shape = Vec::with_capacity(snap.shape.len());
        self.shape(info, &mut shape);
        if shape != snap.shape {
            return None;
        }
        let mut now = core::mem::take(&mut self.ff.now);
        now.clear();
        let mut kinds = Vec::with_capacity(snap.times.len());
        self.visit_times(info, &mut |k, t| {
            now.push(*t);
            kinds.push(k);
        });
        // Counts per period.
        let mut stats = Vec::with_capacity(snap.stats.len());
        self.visit_stats(&mut |x| stats.push(*x));
        let per: Vec<u64> = stats
            .iter()
            .zip(&snap.stats)
            .map(|(&b, &a)| b.checked_sub(a))
            .collect::<Option<_>>()?;
        let ran = |u: User| match u {
            User::Track(i) => per.get(track_count(i)).is_none_or(|&c| c > 0),
            User::Compute => [Track::Vector, Track::Scalar, Track::GpSimd]
                .iter()
                .any(|t| per.get(track_count(t.index())).is_none_or(|&c| c > 0)),
            User::Dma => per.get(DMA_TRANSFERS).is_none_or(|&c| c > 0),
        };
        // Every transfer of the next periods is triggered on a queue this one used, after its
        // last trigger, and arrives a trigger and the DMA latency later.
        let arrivals = (0..self.queue_trigger.len())
            .filter(|&q| ran(User::Track(Track::Queue(q as u8).index())))
            .map(|q| self.queue_trigger[q].t + self.dma_issue + self.dma_latency)
            .min()
            .unwrap_or(u64::MAX);
        let gates = gates_moved(&kinds, &snap.times, &now);
        let steps = gates
            .and_then(|(delta, gate_floor)| self.list_steps(snap, delta, gate_floor.max(arrivals)));
        let moved = match (gates, &steps) {
            (Some(gates), Some((_, floor))) => {
                moved_by(&kinds, &snap.times, &now, gates, *floor, &ran)
            }
            _ => false,
        };
        let lists_end = (self.gap_lists())
            .filter_map(|(g, _)| g.list.back().map(|l| l.1))
            .max();
        let max_now = now.iter().copied().chain(lists_end).max().unwrap_or(0);
        self.ff.now = now;
        let (delta, (steps, _)) = (gates?.0, steps?);
        if !moved {
            return None;
        }
        let executed = edge.executed.checked_sub(snap.executed)?;
        // Whole periods left, as far as the times stay far from saturation.
        let mut k = (edge.trip - edge.vars[info.var]) / p;
        let room = (MAX_TIME.saturating_sub(max_now) / delta).saturating_sub(1);
        k = k.min(i64::try_from(room).unwrap_or(i64::MAX));
        for (&s, &d) in stats.iter().zip(&per) {
            if let Some(fit) = (u64::MAX - s).checked_div(d) {
                k = k.min(i64::try_from(fit).unwrap_or(i64::MAX));
            }
        }
        // A gap list that grows stays within its window: its peak over the period is known
        // only while no other snapshot was taken since this one.
        for (s, (g, _)) in steps.iter().zip(self.gap_lists()) {
            if s.evicted == 0 && s.grows > 0 {
                if snap.generation != self.ff.snapshots {
                    return None;
                }
                let periods = Gaps::MAX.saturating_sub(g.peak) / s.grows;
                k = k.min(i64::try_from(periods).unwrap_or(i64::MAX));
            }
        }
        if k <= 0 {
            return None;
        }
        // HBM: replay the period's accesses of written tensors, period by period.
        let first = snap.events.checked_sub(self.ff.events_base)?;
        let last = self.ff.events.len();
        if first < last {
            let fixed = self.fixed_addresses(info, first..last, p, resolve);
            if !fixed {
                // Replaying costs each period's events: at most about `MAX_REPLAYED` at once
                // (the loop then runs on and skips again), so that a launch's budget is charged
                // often.
                let per = i64::try_from(last - first).unwrap_or(i64::MAX);
                k = k.min((MAX_REPLAYED / per).max(1));
            }
            k = self.replay(info, first..last, (k, p, delta, fixed), resolve);
            if k == 0 {
                return None;
            }
        }
        let (ku, moved) = (k as u64, (k as u64).checked_mul(delta)?);
        // Move the times.
        let mut i = 0;
        let old = &snap.times;
        self.visit_times(info, &mut |kind, t| {
            let was = old[i];
            i += 1;
            let keep = match kind {
                Kind::Gate(_) => *t == 0 || *t == was,
                Kind::Total => *t == 0,
                Kind::Cell => *t == was,
            };
            if !keep {
                *t += moved;
            }
        });
        for (&s, g) in steps.iter().zip(self.gap_lists_mut()) {
            gap_lists::extrapolate(&mut g.list, s, ku, delta);
            g.evicted += s.evicted * ku;
            if s.evicted == 0 {
                g.peak += s.grows * k as usize;
            }
        }
        let mut i = 0;
        self.visit_stats(&mut |x| {
            *x += per[i] * ku;
            i += 1;
        });
        let turns: Vec<u64> = (info.permuted.iter())
            .map(|pt| {
                let i = info.rotating.iter().position(|&t| t == pt.tile);
                i.and_then(|i| rot_delta.get(i))
                    .map_or(0, |&(dc, _)| dc.wrapping_mul(ku))
            })
            .collect();
        self.turn_buffers(info, &turns);
        for (&t, &(dc, dk)) in info.rotating.iter().zip(&rot_delta) {
            if let Some(r) = self.rotation.get_mut(t) {
                r.count += dc * ku;
                r.key[info.var] += dk * k;
            }
        }
        self.ff.skipped += k * p;
        Some(Skip {
            iterations: k * p,
            executed: executed.saturating_mul(ku),
        })
    }

    /// Replays the HBM events `range` (one period of `p` iterations) for up to `k` periods,
    /// each moved by `delta` more; returns how many periods found what the first one found
    /// (their marks stay, the failing period's are undone).
    ///
    /// With `fixed` (see [`Timeline::fixed_addresses`]), once the first period found what the
    /// template found, the periods between it and the last are not replayed: each touches the
    /// blocks the one before touched, later, so the state before each is the one before the
    /// first moved (each finds what the first found), and the last one's marks supersede theirs.
    /// The last period is then marked without its waits being compared (they would be the
    /// skipped periods' to compare with).
    fn replay(
        &mut self,
        info: &LoopInfo,
        range: core::ops::Range<usize>,
        (k, p, delta, fixed): (i64, i64, u64, bool),
        resolve: &mut Resolver<'_>,
    ) -> i64 {
        let template: Vec<Event> = self.ff.events[range].to_vec();
        let mut done = 0;
        let jump = fixed && k > 2;
        let mut m = 0;
        'periods: while m < k {
            m = if jump && m == 1 { k } else { m + 1 };
            let compare = !(jump && m == k);
            // Each period's marks are kept until it is found to be the template's, moved.
            self.hbm.journal(true);
            let shift = delta * m as u64;
            let mut moved = Vec::with_capacity(template.len());
            for (i, e) in template.iter().enumerate() {
                let mut vars = e.vars;
                vars[info.var] += m * p;
                let Some(ops) = resolve(e.pc as usize, &vars) else {
                    self.hbm.undo();
                    break 'periods;
                };
                let mut out = Event { vars, ..*e };
                for j in 0..usize::from(e.n) {
                    let (s, write) = e.slots[j];
                    let Some(r) = ops.slot(usize::from(s)) else {
                        self.hbm.undo();
                        break 'periods;
                    };
                    let Loc::Hbm(t) = r.loc else {
                        self.hbm.undo();
                        break 'periods;
                    };
                    let t = usize::from(t);
                    let want = if e.waits[j] == 0 {
                        0
                    } else {
                        e.waits[j] + shift
                    };
                    let found = compare.then(|| self.hbm.wait_alone(t, r, write));
                    if !(write || self.hbm.tracked(t)) || found.is_some_and(|w| w != want) {
                        self.hbm.undo();
                        break 'periods;
                    }
                    out.waits[j] = want;
                }
                out.done = e.done + shift;
                // The period's last event is found to be the template's before it marks, so
                // its marks are never undone: not journaled.
                if i + 1 == template.len() {
                    self.hbm.pause_journal();
                }
                let cell = Cell {
                    t: out.done,
                    who: u32::MAX,
                    pe: false,
                };
                for j in 0..usize::from(e.n) {
                    let (s, write) = e.slots[j];
                    if let Some(r) = ops.slot(usize::from(s))
                        && let Loc::Hbm(t) = r.loc
                    {
                        self.hbm.mark(usize::from(t), r, write, cell);
                    }
                }
                moved.push(out);
            }
            self.ff.events.extend(moved);
            done = m;
        }
        self.hbm.journal(false);
        done
    }

    /// Whether the HBM events `range` (one period of `p` iterations) access the same elements
    /// in the next period (their addresses do not depend on the loop's value), and no other
    /// loop holds a snapshot (whose period would replay these events one by one).
    fn fixed_addresses(
        &self,
        info: &LoopInfo,
        range: core::ops::Range<usize>,
        p: i64,
        resolve: &mut Resolver<'_>,
    ) -> bool {
        if self.ff.detectors.iter().any(|d| d.snap.is_some()) {
            return false;
        }
        self.ff.events[range].iter().all(|e| {
            let mut next = e.vars;
            next[info.var] += p;
            match (
                resolve(e.pc as usize, &e.vars),
                resolve(e.pc as usize, &next),
            ) {
                (Some(a), Some(b)) => e.slots[..usize::from(e.n)]
                    .iter()
                    .all(|&(s, _)| a.slot(usize::from(s)) == b.slot(usize::from(s))),
                (None, _) | (_, None) => false,
            }
        })
    }
}

/// A permuted tile's buffers from the one its rotation count `at` points at.
fn logical(planes: &[Vec<usize>], at: u64) -> impl Iterator<Item = &Vec<usize>> {
    let d = planes.len().max(1);
    let first = (at % d as u64) as usize;
    (0..planes.len()).filter_map(move |j| planes.get((first + j) % d))
}

/// The greatest common divisor of `a` and `b` (`b` when `a` is 0; Stein's algorithm, no
/// division).
fn gcd(a: u64, b: u64) -> u64 {
    if a == 0 || b == 0 {
        return a | b;
    }
    let shift = (a | b).trailing_zeros();
    let (mut a, mut b) = (a >> a.trailing_zeros(), b);
    while b != 0 {
        b >>= b.trailing_zeros();
        if a > b {
            core::mem::swap(&mut a, &mut b);
        }
        b -= a;
    }
    a << shift
}

/// The Δ > 0 by which the first gate that changed moved, and the earliest of the gates that
/// moved by it (every instruction of the period started at or after one of them, its
/// engine's or its DMA queue's, and so will every later one); `None` when none moved.
fn gates_moved(kinds: &[Kind], old: &[u64], now: &[u64]) -> Option<(u64, u64)> {
    if old.len() != now.len() || kinds.len() != now.len() {
        return None;
    }
    let i = (0..now.len())
        .position(|i| matches!(kinds[i], Kind::Gate(_)) && old[i] != 0 && now[i] != old[i])?;
    let delta = now[i].checked_sub(old[i]).filter(|&d| d > 0)?;
    let gate_floor = (0..now.len())
        .filter(|&j| matches!(kinds[j], Kind::Gate(_)) && old[j] != 0)
        .filter(|&j| now[j] == old[j] + delta)
        .map(|j| old[j])
        .min()
        .unwrap_or(0);
    Some((delta, gate_floor))
}

/// Whether `now` is `old` moved by the gates' Δ ([`gates_moved`]), by each time's [`Kind`];
/// `lists_floor`: the earliest start of the gap lists' moved gaps.
fn moved_by(
    kinds: &[Kind],
    old: &[u64],
    now: &[u64],
    (delta, gate_floor): (u64, u64),
    lists_floor: u64,
    ran: &dyn Fn(User) -> bool,
) -> bool {
    if old.len() != now.len() || kinds.len() != now.len() {
        return false;
    }
    // The earliest next start of any queue: a cell the loop only reads and that is earlier
    // cannot delay it.
    let mut floor = lists_floor;
    for (j, &kind) in kinds.iter().enumerate() {
        let (a, b) = (old[j], now[j]);
        let ok = match kind {
            Kind::Gate(user) => {
                if a == 0 || (b == a && !ran(user)) {
                    b == a
                } else if b == a + delta {
                    floor = floor.min(a);
                    true
                } else {
                    // A DMA engine, HBM or a shared port the period did not use, free before
                    // every moved gate: an instruction starts after that gate anyway (a DMA
                    // engine none of the period's transfers took stays untaken).
                    b == a && a < gate_floor && matches!(user, User::Dma | User::Compute)
                }
            }
            Kind::Total => {
                if a == 0 {
                    b == 0
                } else {
                    b == a + delta
                }
            }
            Kind::Cell => {
                if a == 0 {
                    b == 0
                } else {
                    b == a + delta || (b == a && a < floor)
                }
            }
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use nki_lang::builder::{Grid, ProgramBuilder};
    use nki_lang::{Affine, DType, Dim, Extent, LoopKind, Memory, Target};

    use super::super::super::{Detail, Params, Scheduling};
    use super::super::Timeline;
    use crate::bind::{HbmIn, HbmOut};
    use crate::{Kernel, LaunchGrid, NeuronCore};

    /// Stein's algorithm agrees with Euclid's on every pair up to 300 and on large values.
    #[test]
    fn gcd_is_euclids() {
        fn euclid(mut a: u64, mut b: u64) -> u64 {
            while a != 0 {
                (a, b) = (b % a, a);
            }
            b
        }
        let large = [u64::MAX, u64::MAX - 1, 1 << 63, 3 << 40, 6_700_417 * 641];
        for a in (0..300).chain(large) {
            for b in (0..300).chain(large) {
                assert_eq!(super::gcd(a, b), euclid(a, b), "gcd({a}, {b})");
            }
        }
    }

    /// Times `kernel` on zero tensors of `cols` columns (one input, one output of `[128,
    /// cols]` f32) with and without the fast-forward: the schedules' Debug forms and the
    /// iterations skipped.
    fn both(kernel: &Kernel<'_>, cols: usize, scheduling: Scheduling) -> [(String, i64); 2] {
        both_on(kernel, cols, scheduling, LaunchGrid::SINGLE)
    }

    /// [`both`] over the launch grid `grid`.
    fn both_on(
        kernel: &Kernel<'_>,
        cols: usize,
        scheduling: Scheduling,
        grid: LaunchGrid,
    ) -> [(String, i64); 2] {
        let x = vec![0f32; 128 * cols];
        let mut out = vec![0f32; 128 * cols];
        [false, true].map(|on| {
            let mut core = NeuronCore::new(Target::Trn1);
            let inputs = [HbmIn::new(&x, &[128, cols]).unwrap()];
            let mut outputs = [HbmOut::new(&mut out, &[128, cols]).unwrap()];
            let bound = kernel.bind_on(grid, &inputs, &mut outputs).unwrap();
            let program = bound.program();
            let bytes = vec![128 * cols as u64 * 4; program.tensors().len()];
            let mut tl = Timeline::new(
                program,
                Params::TRN1,
                Detail::Summary,
                false,
                core.sbuf().partition_stride(),
                bytes,
            )
            .with_scheduling(scheduling)
            .with_fast_forward(on);
            core.execute_observed(bound, &mut tl).unwrap();
            let skipped = tl.ff.skipped;
            (format!("{:?}", tl.finish()), skipped)
        })
    }

    /// `for i in 0..trip`: load a `[128, 512]` column block, copy it on VectorE, store it;
    /// with `reread`, also load the stored block back and store it again (HBM read-after-write
    /// and write-after-read on the output within each iteration).
    fn program(trip: u64, reread: bool) -> nki_lang::CompiledProgram {
        let cols = Dim::Fixed(512 * trip);
        let mut b = ProgramBuilder::new("columns", Target::Trn1);
        let x = b.input("x", DType::F32, &[Dim::Fixed(128), cols]).unwrap();
        let out = b
            .output("out", DType::F32, &[Dim::Fixed(128), cols])
            .unwrap();
        b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(trip))
            .unwrap();
        let i = b.loop_var(0, 512).unwrap();
        let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
        let u = b.tile("u", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
        b.load(t, Grid::origin(x).at(1, i)).unwrap();
        b.tensor_copy(u, t).unwrap();
        b.store(Grid::origin(out).at(1, i), u).unwrap();
        if reread {
            let v = b.tile("v", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
            b.load(v, Grid::origin(out).at(1, i)).unwrap();
            b.store(Grid::origin(out).at(1, i), v).unwrap();
        }
        b.end_loop().unwrap();
        b.finish().unwrap()
    }

    #[test]
    fn a_steady_loop_is_skipped_with_the_same_schedule() {
        for reread in [false, true] {
            let c = program(256, reread);
            let parts = c.parts();
            let kernel = Kernel::new(parts.program());
            for scheduling in [
                Scheduling::default(),
                Scheduling::ProgramOrder { buffers: 1 },
            ] {
                let [(plain, none), (fast, skipped)] = both(&kernel, 512 * 256, scheduling);
                assert_eq!(none, 0);
                assert_eq!(plain, fast, "reread {reread}, {scheduling:?}");
                assert!(
                    skipped > 16,
                    "reread {reread}, {scheduling:?}: {skipped} skipped"
                );
            }
        }
    }

    /// One instance per `[128, 512]` column block (`program_id(0)`) of a grid of `blocks`:
    /// load, copy on VectorE, store.
    fn per_instance(blocks: u64) -> nki_lang::CompiledProgram {
        let cols = Dim::Fixed(512 * blocks);
        let mut b = ProgramBuilder::new("instances", Target::Trn1);
        let x = b.input("x", DType::F32, &[Dim::Fixed(128), cols]).unwrap();
        let out = b
            .output("out", DType::F32, &[Dim::Fixed(128), cols])
            .unwrap();
        let k = Affine::program_id(0, 512);
        let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
        let u = b.tile("u", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
        b.load(t, Grid::origin(x).at(1, k)).unwrap();
        b.tensor_copy(u, t).unwrap();
        b.store(Grid::origin(out).at(1, k), u).unwrap();
        b.finish().unwrap()
    }

    #[test]
    fn steady_instances_are_skipped_with_the_same_schedule() {
        let c = per_instance(256);
        let parts = c.parts();
        let kernel = Kernel::new(parts.program());
        for scheduling in [
            Scheduling::default(),
            Scheduling::ProgramOrder { buffers: 1 },
            Scheduling::ProgramOrder { buffers: 2 },
        ] {
            let grid = LaunchGrid::from(256);
            let [(plain, none), (fast, skipped)] = both_on(&kernel, 512 * 256, scheduling, grid);
            assert_eq!(none, 0);
            assert_eq!(plain, fast, "{scheduling:?}");
            assert!(skipped > 128, "{scheduling:?}: {skipped} skipped");
        }
    }
}
