//! The event-driven schedule: an [`Observer`] that times every executed instruction as the
//! executor shows it, in the order it runs (the program's, or the one [`Scheduling::Device`]
//! gives each engine's stream).
//!
//! Each engine is a queue with a `free` time (and, under [`Scheduling::Device`], the idle gaps
//! it left, which a later instruction whose operands are ready may fill). An instruction
//! starts when its engine is free and every region it reads is written (RAW) and, for what it
//! writes, every earlier read and write is done (WAR, WAW); see [`super::regions`]. Then:
//!
//! - **Vector / Scalar / GpSimd**: busy for the instruction's interval (on Vector and Scalar
//!   with its `static_overhead_cycles`); its result is visible at the interval's end (GpSimd:
//!   `static_overhead_cycles` later). On v2, Vector and GpSimd share the SBUF port and Vector
//!   and Scalar the PSUM port: an instruction also waits for the port. A Scalar activation
//!   whose function group differs from the loaded table's is preceded by a table load.
//! - **TensorE**: a LoadStationary (waits for the stationary operand, the previous
//!   LoadStationary, and the start of the previous MultiplyMoving, whose weights it replaces
//!   in the background), then a MultiplyMoving (waits for the LoadStationary, the previous
//!   MultiplyMoving's interval, the moving operand and the PSUM destination; a TensorE result
//!   is seen by the next TensorE instruction at the end of its interval, by other engines
//!   `pe_latency_ns` later).
//! - **DMA**: a trigger on its queue (the Sync engine's one queue under
//!   [`Scheduling::ProgramOrder`]; waits for the operands), then after the fixed
//!   latency each of the transfer's engines moves its share when free; HBM bandwidth is shared
//!   by all transfers; a queue's transfers complete in order.

use core::ops::ControlFlow;
use std::collections::VecDeque;

use nki_lang::schedule_control::ControlPlan;
use nki_lang::{
    Dir, Engine, Instr, MAX_PIDS, MAX_SLOTS, MAX_VARS, OperandRef, Program, SymbolValues, VarValues,
};

use super::Detail;
use super::compiler::{self, Scheduling};
use super::cost::{self, Compute, Dma, Pe, Work};
use super::params::{Params, bytes_ps, ns_ps};
use super::regions::{
    BLOCK_SHIFT, Cell, Consumer, Hbm, OnChip, RENAMED_BLOCK_SHIFT, Ready, Region,
};
use super::schedule::{
    DmaPhase, ENGINES, Kind, MAX_DMA, OPCODES, OperandSummary, Record, Schedule, TileUse, Track,
    TrackStats, engine_index,
};
use crate::exec::{InstanceEdge, LoopEdge, Observer, Resolver, Skip};
use crate::operand::{Loc, Operands};

mod fastforward;
mod gap_lists;

/// PSUM's partition stride as the core lays it out.
const PSUM_STRIDE: usize = crate::memory::Psum::PARTITION_STRIDE;

/// A slot of [`Timeline::slot_tiles`] that is not a view of a tile.
const NO_TILE: u16 = u16::MAX;

/// An engine queue's state: when it can take the next instruction, and which record said so.
type Free = Ready;

/// How a tile's buffers rotate (see [`Timeline::with_scheduling`]).
#[derive(Copy, Clone, Debug)]
struct Rotation {
    /// The index variables that identify an iteration: the program ids and the loops at
    /// depths below `scope`; `None`: the tile never rotates.
    scope: Option<usize>,
    /// The iteration of the last access.
    key: [i64; MAX_VARS],
    /// Whether the tile was accessed yet.
    seen: bool,
    /// Iterations seen.
    count: u64,
}

/// Which of a shared port's two engines an engine is.
struct Port;

impl Port {
    /// `engine`'s side of a port shared by `pair`, if it uses the port.
    fn of(engine: Engine, pair: [Engine; 2]) -> Option<usize> {
        pair.iter().position(|&e| e == engine)
    }
}

/// The idle intervals an engine queue left before its last instruction, where the compiler's
/// schedule may place a later instruction whose operands are ready earlier (it orders each
/// engine's stream by readiness, not by program order). The most recent [`Gaps::MAX`] are
/// kept: a bounded window of the schedule.
#[derive(Clone, Debug, Default)]
struct Gaps {
    /// `(start, end)`, in order of time (a ring: the oldest leaves in O(1)).
    list: VecDeque<(u64, u64)>,
    /// Gaps dropped from the front so far, to keep [`Gaps::MAX`].
    evicted: u64,
    /// The most gaps held since [`Gaps::reset_peak`].
    peak: usize,
    /// Where the last search found its first gap (a guess for the next one: the times an
    /// engine is asked about mostly move forward; checked before it is used).
    hint: core::cell::Cell<usize>,
}

impl Gaps {
    /// Gaps kept per engine.
    const MAX: usize = 32;

    /// The index of the first gap that ends after `ready` (the gaps are in order of time and
    /// disjoint: those ending by `ready` cannot hold an interval starting there).
    #[inline]
    fn first_after(&self, ready: u64) -> usize {
        let n = self.list.len();
        match self.list.back() {
            Some(&(_, b)) if b > ready => {
                // The gap found last, or the one after it, when it is still the first to
                // end after `ready`; else a binary search.
                let ends_by = |i: usize| self.list.get(i).is_some_and(|&(_, b)| b <= ready);
                let h = self.hint.get();
                let i = if h < n && !ends_by(h) && (h == 0 || ends_by(h - 1)) {
                    h
                } else if h + 1 < n && !ends_by(h + 1) && ends_by(h) {
                    h + 1
                } else {
                    self.list.partition_point(|&(_, b)| b <= ready)
                };
                self.hint.set(i);
                i
            }
            Some(_) | None => n,
        }
    }

    /// The earliest start at or after `ready` of an interval of `busy` inside a gap, if a
    /// gap holds one.
    #[inline]
    fn fit(&self, ready: u64, busy: u64) -> Option<u64> {
        let from = self.first_after(ready);
        self.list
            .range(from..)
            .find(|&&(a, b)| a.max(ready).saturating_add(busy) <= b)
            .map(|&(a, _)| a.max(ready))
    }

    /// The earliest start at or after `ready` of an interval of `busy` inside a gap, which it
    /// takes, and where that gap opened; `None` when no gap holds it.
    fn take(&mut self, ready: u64, busy: u64) -> Option<(u64, u64)> {
        let from = self.first_after(ready);
        let i = from
            + self
                .list
                .range(from..)
                .position(|&(a, b)| a.max(ready).saturating_add(busy) <= b)?;
        let (a, b) = self.list[i];
        let start = a.max(ready);
        let end = start.saturating_add(busy);
        match (start > a, end < b) {
            (true, true) => {
                self.list[i] = (a, start);
                self.list.insert(i + 1, (end, b));
            }
            (true, false) => self.list[i] = (a, start),
            (false, true) => self.list[i] = (end, b),
            (false, false) => {
                self.list.remove(i);
            }
        }
        self.settle();
        Some((start, a))
    }

    /// Records the idle interval `[from, to)` (nothing if empty).
    fn open(&mut self, from: u64, to: u64) {
        if to > from {
            self.list.push_back((from, to));
            self.settle();
        }
    }

    /// Drops the oldest gap beyond [`Gaps::MAX`]; counts the peak.
    fn settle(&mut self) {
        if self.list.len() > Self::MAX {
            self.list.pop_front();
            self.evicted += 1;
        }
        self.peak = self.peak.max(self.list.len());
    }

    /// Starts counting the peak from the gaps held now.
    fn reset_peak(&mut self) {
        self.peak = self.list.len();
    }
}

/// Times a run: pass it to [`crate::NeuronCore::execute_observed`], then call
/// [`Timeline::finish`]. [`super::Timing`] does both.
pub struct Timeline<'p> {
    program: &'p Program<'p>,
    p: Params,
    detail: Detail,
    computes: bool,
    dma_rows: bool,
    sbuf_stride: usize,
    scheduling: Scheduling,
    /// The launch's symbol values, when known: the bytes a tile of blocks counted at launch
    /// uses ([`nki_lang::TileDecl::bytes_in_use`]); else every tile's whole size.
    syms: Option<SymbolValues>,
    /// Whether any tile rotates.
    rotates: bool,
    rotation: Vec<Rotation>,
    /// Buffers of each tile.
    degree: Vec<u32>,
    /// Each tile's byte shift into its own space (all zero: the memory as allocated).
    shift: Vec<i64>,
    /// Instructions the device does not run (by pc).
    folded: Vec<bool>,
    /// By tile: the PSUM tile its readers read instead (a partition broadcast left in PSUM,
    /// [`compiler::psum_broadcasts`]); empty when none is.
    alias: Vec<Option<u16>>,
    /// By pc: whether the instruction reads such a tile (empty when none does).
    reads_alias: Vec<bool>,
    /// Instructions hoisted out of the loop at this depth and the loops inside it (by pc): run
    /// in their first iteration only.
    hoisted: Vec<Option<usize>>,
    /// The plane and shift of each operand slot of the instruction being timed.
    place: [(usize, i64); MAX_SLOTS],
    /// The on-chip cells each operand slot of the instruction being timed covers.
    regions: [Region; MAX_SLOTS],
    sbuf: OnChip,
    psum: OnChip,
    hbm: Hbm,
    // Engine queues, by `Track::index` of the first six tracks.
    free: [Free; 6],
    /// The last MultiplyMoving's start: the next LoadStationary may not start earlier.
    mm_started: Free,
    /// The last access through each v2 shared port, by its two engines ([`Port::of`]).
    sbuf_port: [Free; 2],
    psum_port: [Free; 2],
    /// Each engine queue's idle gaps ([`Scheduling::Device`]).
    gaps: [Gaps; 6],
    /// Each DMA engine's queue (only engine 0's while `dma_uniform`).
    dma: Vec<Free>,
    /// Whether every DMA engine is in engine 0's state (`dma`, `dma_gaps`): then only engine
    /// 0's is kept up to date, the others' are stale.
    dma_uniform: bool,
    /// The busy time and transfers of every DMA engine's track while they were in one state
    /// (added to each engine's track by [`Timeline::finish`]).
    dma_all: TrackStats,
    /// Each DMA engine's idle gaps ([`Scheduling::Device`]): a transfer triggered earlier
    /// than one the model placed before it (program order) takes the engine first.
    dma_gaps: Vec<Gaps>,
    /// HBM's idle gaps ([`Scheduling::Device`]), likewise.
    hbm_gaps: Gaps,
    queue_done: Vec<Free>,
    /// Each DMA queue's trigger sequencer ([`Scheduling::Device`]).
    queue_trigger: Vec<Free>,
    /// DMA queue of each instruction of the program (by pc).
    queue_of: Vec<u8>,
    /// The tile of each operand slot that is a view, of each instruction (by pc;
    /// [`NO_TILE`]: the slot is not a view): computed once per program.
    slot_tiles: Vec<[u16; MAX_SLOTS]>,
    /// The last cost of each instruction (by pc) and the operands it was computed from: an
    /// execution whose operands differ only in their base elements costs the same
    /// ([`cost::same_inputs`]).
    costs: Vec<(Operands, Work)>,
    /// By pc: the index of its entry in `costs` (`u32::MAX`: not executed yet), so that
    /// only the instructions executed take an entry.
    cost_of_pc: Vec<u32>,
    hbm_free: u64,
    table: Option<u8>,
    // Constant times (ps).
    pe_latency: u64,
    table_load: u64,
    dma_issue: u64,
    dma_latency: u64,
    // What is measured.
    total: u64,
    instructions: u64,
    /// Executed instructions the device does not run (folded fills, hoisted repeats).
    not_run: u64,
    tracks: Vec<TrackStats>,
    opcodes: Vec<[u64; OPCODES]>,
    table_loads: u64,
    flops: u64,
    hw_flops: u64,
    hbm_read: u64,
    hbm_write: u64,
    dma_bytes: u64,
    dma_transfers: u64,
    live: Vec<(u64, u64)>,
    records: Vec<Record>,
    truncated: bool,
    ops: Vec<OperandSummary>,
    phases: Vec<DmaPhase>,
    /// Skipping loops in a steady state (`fastforward.rs`).
    ff: fastforward::FastForward,
    /// The program's `with_schedule` edges and `no_reorder!` blocks, by instruction.
    control: ControlPlan,
    /// By pc (when `control` orders anything): the completion of its latest execution.
    control_done: Vec<Ready>,
    /// By `no_reorder!` block: the completion of the last instruction it executed.
    block_done: Vec<Ready>,
}

impl<'p> Timeline<'p> {
    /// A timeline for one launch of `program` on a core whose SBUF partitions are
    /// `sbuf_stride` apart, with HBM tensors of `tensor_bytes` (the program's tensor
    /// table order). `computes`: whether the run also executes the arithmetic.
    pub fn new(
        program: &'p Program<'p>,
        params: Params,
        detail: Detail,
        computes: bool,
        sbuf_stride: usize,
        tensor_bytes: impl IntoIterator<Item = u64>,
    ) -> Timeline<'p> {
        let engines = (params.dma_engines as usize).clamp(1, MAX_DMA);
        let queues = (params.dma_queues as usize).clamp(1, MAX_DMA);
        // Each static DMA instruction gets its own queue, in program order.
        let mut next = 0usize;
        let queue_of = program
            .instrs()
            .iter()
            .map(|i| match i.engine {
                Engine::Dma => {
                    let q = (next % queues) as u8;
                    next += 1;
                    q
                }
                Engine::Tensor
                | Engine::Vector
                | Engine::Scalar
                | Engine::GpSimd
                | Engine::Sync => 0,
            })
            .collect();
        let views = program.views();
        let slot_tiles = program
            .instrs()
            .iter()
            .map(|ins| {
                let mut tiles = [NO_TILE; MAX_SLOTS];
                for o in ins.operands() {
                    let v = match o.operand {
                        OperandRef::View(v) => v,
                        OperandRef::Access(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => {
                            continue;
                        }
                    };
                    if let (Some(view), Some(t)) =
                        (views.get(v.index()), tiles.get_mut(o.slot as usize))
                    {
                        *t = view.tile;
                    }
                }
                tiles
            })
            .collect();
        let control = ControlPlan::new(&program.control(), program.instrs().len());
        Timeline {
            program,
            pe_latency: ns_ps(params.pe_latency_ns),
            table_load: cost::table_load_ps(&params),
            dma_issue: ns_ps(params.dma_issue_ns),
            dma_latency: ns_ps(params.dma_fixed_latency_ns),
            p: params,
            detail,
            computes,
            dma_rows: false,
            sbuf_stride,
            scheduling: Scheduling::ProgramOrder { buffers: 1 },
            syms: None,
            rotates: false,
            rotation: Vec::new(),
            degree: Vec::new(),
            shift: Vec::new(),
            folded: Vec::new(),
            alias: Vec::new(),
            reads_alias: Vec::new(),
            hoisted: Vec::new(),
            place: [(0, 0); MAX_SLOTS],
            regions: [Region::default(); MAX_SLOTS],
            sbuf: OnChip::new(sbuf_stride, sbuf_stride, 1, BLOCK_SHIFT),
            psum: OnChip::new(PSUM_STRIDE, PSUM_STRIDE, 1, BLOCK_SHIFT),
            hbm: Hbm::new(tensor_bytes, detail != Detail::Summary),
            free: [Free::NONE; 6],
            mm_started: Free::NONE,
            sbuf_port: [Free::NONE; 2],
            psum_port: [Free::NONE; 2],
            gaps: Default::default(),
            dma: vec![Free::NONE; engines],
            dma_uniform: true,
            dma_all: TrackStats::default(),
            dma_gaps: vec![Gaps::default(); engines],
            hbm_gaps: Gaps::default(),
            queue_done: vec![Free::NONE; queues],
            queue_trigger: vec![Free::NONE; queues],
            queue_of,
            slot_tiles,
            costs: Vec::new(),
            cost_of_pc: vec![u32::MAX; program.instrs().len()],
            hbm_free: 0,
            table: None,
            total: 0,
            instructions: 0,
            not_run: 0,
            tracks: vec![TrackStats::default(); Track::COUNT],
            opcodes: vec![[0; OPCODES]; ENGINES.len()],
            table_loads: 0,
            flops: 0,
            hw_flops: 0,
            hbm_read: 0,
            hbm_write: 0,
            dma_bytes: 0,
            dma_transfers: 0,
            live: vec![(u64::MAX, 0); program.tiles().len()],
            records: Vec::new(),
            truncated: false,
            ops: Vec::new(),
            phases: Vec::new(),
            ff: fastforward::FastForward::new(
                detail == Detail::Summary && !computes && !control.orders(),
            ),
            control_done: if control.orders() {
                vec![Ready::NONE; program.instrs().len()]
            } else {
                Vec::new()
            },
            block_done: vec![Ready::NONE; control.blocks()],
            control,
        }
    }

    /// What instruction `pc` waits for beyond its operands and engine: the latest completion
    /// of each instruction a `with_schedule` edge makes it depend on, and of the previous
    /// instruction its `no_reorder!` block executed ([`nki_lang::schedule_control`]).
    fn control_ready(&self, pc: u32) -> Ready {
        let mut ready = Ready::NONE;
        if !self.control.orders() {
            return ready;
        }
        for &q in self.control.waits(pc as usize) {
            if let Some(&r) = self.control_done.get(q as usize) {
                ready = ready.max(r);
            }
        }
        if let Some(r) = self
            .control
            .block(pc as usize)
            .and_then(|b| self.block_done.get(b))
        {
            ready = ready.max(*r);
        }
        ready
    }

    /// Records that an execution of instruction `pc` completes at `done`.
    fn control_complete(&mut self, pc: u32, done: Ready) {
        if !self.control.orders() {
            return;
        }
        if let Some(r) = self.control_done.get_mut(pc as usize) {
            *r = done;
        }
        if let Some(r) = self
            .control
            .block(pc as usize)
            .and_then(|b| self.block_done.get_mut(b))
        {
            *r = (*r).max(done);
        }
    }

    /// With `on` (the default), a timing-only run that keeps totals only ([`Detail::Summary`])
    /// skips the iterations of a loop, and the instances of a launch grid, in a steady state,
    /// accounting for them as the ones it timed moved in time: the same schedule, faster.
    /// `false` times every iteration and instance (the check that the two agree).
    pub fn with_fast_forward(mut self, on: bool) -> Timeline<'p> {
        self.set_fast_forward(on);
        self
    }

    /// With [`Detail::Trace`], also records each DMA engine's part of every transfer (the
    /// trace's `DMA-E` rows: 16 events per 128-partition transfer).
    pub fn with_dma_engine_rows(mut self, on: bool) -> Timeline<'p> {
        self.dma_rows = on;
        self
    }

    /// The launch's symbol values (call before [`Timeline::with_scheduling`]): a tile whose
    /// blocks a symbolic dimension counts then takes the launch's blocks in the places and
    /// the rotation [`Scheduling::Device`] gives tiles, not the capacity reserved for it.
    pub fn with_symbols(mut self, syms: SymbolValues) -> Timeline<'p> {
        self.syms = Some(syms);
        self
    }

    /// Times the program `scheduling` says (a new timeline times the program as allocated
    /// and ordered, one buffer per tile: [`Scheduling::ProgramOrder`] of 1).
    ///
    /// [`Scheduling::Device`] gives every tile a space of its own and every tile used only
    /// within one iteration of an `affine_range` loop (its first use a plain write) up to
    /// `rotation` buffers, rotating from one iteration to the next, as many as fit beside
    /// the program's tiles. [`Scheduling::ProgramOrder`] with `buffers` above 1 is a what-if
    /// on the program as allocated: such a tile rotates over `buffers` extra buffers whose
    /// capacity is not checked. A tile whose uses share no loop rotates between the instances
    /// of a launch grid.
    pub fn with_scheduling(mut self, scheduling: Scheduling) -> Timeline<'p> {
        let syms = self.syms;
        let mut scopes = compiler::rotation_scopes(self.program);
        let device = matches!(scheduling, Scheduling::Device { .. });
        self.hoisted = if device {
            compiler::hoisted_instructions(self.program)
        } else {
            Vec::new()
        };
        // A hoisted instruction's destination holds one result for the whole loop.
        let views = self.program.views();
        for (ins, h) in self.program.instrs().iter().zip(&self.hoisted) {
            if h.is_some()
                && let Some(d) = ins.data.dst()
                && let Some(s) = views
                    .get(d.view.index())
                    .and_then(|v| scopes.get_mut(v.tile as usize))
            {
                *s = None;
            }
        }
        let tiles = self.program.tiles().len();
        let (degree, planes) = match scheduling {
            Scheduling::Device { rotation } => {
                let degree = compiler::rotation_degrees(
                    self.program,
                    &scopes,
                    rotation,
                    &self.p,
                    syms.as_ref(),
                );
                let planes = degree.iter().copied().max().unwrap_or(1);
                (degree, planes)
            }
            Scheduling::ProgramOrder { buffers } => {
                let b = buffers.clamp(1, Scheduling::MAX_BUFFERS);
                let degree = scopes
                    .iter()
                    .map(|s| if s.is_some() { b } else { 1 })
                    .collect();
                (degree, if b > 1 { b + 1 } else { 1 })
            }
        };
        let planes = planes as usize;
        if device {
            let (shift, sbuf_span, psum_span) =
                compiler::renamed_layout(self.program, syms.as_ref());
            self.shift = shift;
            let psum_reads = compiler::psum_broadcasts(self.program, &self.p);
            self.folded = compiler::folded_memsets(self.program);
            for (f, &copy) in self.folded.iter_mut().zip(&psum_reads.folded) {
                *f |= copy;
            }
            (self.alias, self.reads_alias) = if psum_reads.alias.iter().any(Option::is_some) {
                (psum_reads.alias, psum_reads.readers)
            } else {
                (Vec::new(), Vec::new())
            };
            self.sbuf = OnChip::new(self.sbuf_stride, sbuf_span, planes, RENAMED_BLOCK_SHIFT);
            self.psum = OnChip::new(PSUM_STRIDE, psum_span, planes, RENAMED_BLOCK_SHIFT);
        } else {
            self.shift = vec![0; tiles];
            self.folded = Vec::new();
            self.alias = Vec::new();
            self.reads_alias = Vec::new();
            self.sbuf = OnChip::new(self.sbuf_stride, self.sbuf_stride, planes, BLOCK_SHIFT);
            self.psum = OnChip::new(PSUM_STRIDE, PSUM_STRIDE, planes, BLOCK_SHIFT);
        }
        self.rotates = degree.iter().any(|&d| d > 1);
        self.degree = degree;
        self.rotation = scopes
            .into_iter()
            .map(|scope| Rotation {
                scope,
                key: [0; MAX_VARS],
                seen: false,
                count: 0,
            })
            .collect();
        self.scheduling = scheduling;
        self
    }

    /// Whether the device's program is timed ([`Scheduling::Device`]): DMA triggers on their
    /// own queues, engine streams ordered by readiness.
    fn device(&self) -> bool {
        matches!(self.scheduling, Scheduling::Device { .. })
    }

    /// Sets the plane and shift of each operand of `ins` (its tile's current buffer and its
    /// place) for this execution.
    fn place_operands(&mut self, pc: usize, vars: &VarValues) {
        self.place = [(0, 0); MAX_SLOTS];
        if self.shift.is_empty() {
            return;
        }
        let program_order = !self.device();
        let Some(&slots) = self.slot_tiles.get(pc) else {
            return;
        };
        for (slot, tile) in slots.into_iter().enumerate() {
            if tile == NO_TILE {
                continue;
            }
            let t = self.tile_read(tile);
            let shift = self.shift.get(t).copied().unwrap_or(0);
            let mut plane = 0;
            if self.rotates
                && let (Some(rot), Some(&degree)) = (self.rotation.get_mut(t), self.degree.get(t))
                && let Some(scope) = rot.scope
                && degree > 1
            {
                let n = (MAX_PIDS + scope).min(MAX_VARS);
                // Element by element: a few words, not worth a call to `memcmp`.
                if !rot.seen || (0..n).any(|i| rot.key[i] != vars[i]) {
                    if rot.seen {
                        rot.count += 1;
                    }
                    rot.seen = true;
                    rot.key[..n].copy_from_slice(&vars[..n]);
                }
                let b = (rot.count % u64::from(degree)) as usize;
                // As allocated, plane 0 is the memory itself and the extra buffers follow.
                plane = if program_order { 1 + b } else { b };
            }
            self.place[slot] = (plane, shift);
        }
    }

    /// The tile the device reads for `tile`: its PSUM broadcast when the compiler left one
    /// there ([`compiler::psum_broadcasts`]), else itself.
    fn tile_read(&self, tile: u16) -> usize {
        match self.alias.get(usize::from(tile)) {
            Some(&Some(psum)) => usize::from(psum),
            Some(None) | None => usize::from(tile),
        }
    }

    /// The operands as the device reads them, when a partition broadcast that the
    /// compiler left in PSUM is among them (else `None`): that operand's elements at the same
    /// places of the PSUM tile (the two tiles have one shape, row-major).
    fn read_from_psum(&self, pc: usize, ins: &Instr, ops: &Operands) -> Option<Operands> {
        if !self.reads_alias.get(pc).copied().unwrap_or(false) {
            return None;
        }
        let views = self.program.views();
        let tiles = self.program.tiles();
        let mut out: Option<Operands> = None;
        for o in ins.operands() {
            let Some(view) = o.view().and_then(|v| views.get(v.index())) else {
                continue;
            };
            let psum = self.tile_read(view.tile);
            // A view of the tile's bytes as another dtype keeps its own place (its element
            // offsets are not the PSUM tile's).
            if psum == usize::from(view.tile) || view.dtype.is_some() {
                continue;
            }
            let (Some(sd), Some(pd), Some(r)) = (
                tiles.get(usize::from(view.tile)),
                tiles.get(psum),
                ops.slot(usize::from(o.slot)),
            ) else {
                continue;
            };
            let (s_size, p_size) = (
                i64::from(sd.dtype.size().max(1)),
                i64::from(pd.dtype.size().max(1)),
            );
            let s_part = self.sbuf_stride as i64 / s_size;
            let p_part = PSUM_STRIDE as i64 / p_size;
            if r.loc != Loc::Sbuf || s_part <= 0 {
                continue;
            }
            let base = r.pattern.base as i64;
            let partition = base.div_euclid(s_part);
            let element = base.rem_euclid(s_part) - i64::from(sd.addr) / s_size;
            let mut moved = *r;
            moved.loc = Loc::Psum;
            moved.dtype = pd.dtype;
            moved.pattern.base =
                (partition * p_part + i64::from(pd.addr) / p_size + element) as isize;
            moved.pattern.strides[0] =
                (r.pattern.strides[0] as i64 / s_part).saturating_mul(p_part) as isize;
            if let Some(slot) = out.get_or_insert(*ops).slot_mut(usize::from(o.slot)) {
                *slot = moved;
            }
        }
        out
    }

    /// The cells of each on-chip operand of the instruction being timed (once per
    /// instruction: its waits and its marks use them).
    fn locate(&mut self, ops: &Operands) {
        for (s, reg) in self.regions.iter_mut().enumerate() {
            *reg = match ops.slot(s) {
                Some(r) if r.loc == Loc::Sbuf => {
                    let (plane, shift) = self.place[s];
                    if !self.sbuf.is_partitioned(r) {
                        self.ff.wide += 1;
                    }
                    self.sbuf.region(r, plane, shift)
                }
                Some(r) if r.loc == Loc::Psum => {
                    let (plane, shift) = self.place[s];
                    if !self.psum.is_partitioned(r) {
                        self.ff.wide += 1;
                    }
                    self.psum.region(r, plane, shift)
                }
                Some(_) | None => Region::default(),
            };
        }
    }

    /// The schedule of everything the timeline saw.
    pub fn finish(mut self) -> Schedule {
        let program = self.program;
        for e in 0..self.dma.len() {
            if let Some(t) = self.tracks.get_mut(Track::DmaEngine(e as u8).index()) {
                t.busy = t.busy.saturating_add(self.dma_all.busy);
                t.count += self.dma_all.count;
            }
        }
        let tiles = program
            .tiles()
            .iter()
            .zip(&self.live)
            .enumerate()
            .map(|(i, (t, &(a, b)))| TileUse {
                name: t.name.to_string(),
                memory: t.memory,
                // A tile of blocks counted at launch: the launch's blocks.
                bytes_per_partition: self
                    .syms
                    .as_ref()
                    .map_or_else(|| t.bytes_per_partition(), |s| t.bytes_in_use(s)),
                partitions: t.shape.partitions(),
                addr: t.addr,
                // The buffers it used: one per iteration seen, up to its degree.
                buffers: self.degree.get(i).map_or(1, |&d| {
                    let seen = self
                        .rotation
                        .get(i)
                        .map_or(1, |r| r.count.saturating_add(1));
                    u32::try_from(seen.min(u64::from(d))).unwrap_or(d)
                }),
                live: (a <= b).then_some((a, b)),
            })
            .collect();
        Schedule {
            kernel: program.name().to_string(),
            params: self.p,
            detail: self.detail,
            total: self.total,
            instructions: self.instructions,
            not_run: self.not_run,
            tracks: self.tracks,
            opcodes: self.opcodes,
            table_loads: self.table_loads,
            flops: self.flops,
            hw_flops: self.hw_flops,
            hbm_read: self.hbm_read,
            hbm_write: self.hbm_write,
            dma_bytes: self.dma_bytes,
            dma_transfers: self.dma_transfers,
            tiles,
            tensors: program
                .tensors()
                .iter()
                .map(|t| t.name.to_string())
                .collect(),
            records: self.records,
            truncated: self.truncated,
            ops: self.ops,
            phases: self.phases,
            names: {
                let control = program.control();
                if control.names.is_empty() {
                    Vec::new()
                } else {
                    (0..program.instrs().len())
                        .map(|pc| {
                            let pc = u32::try_from(pc).unwrap_or(u32::MAX);
                            control.name_of(pc).map(str::to_string)
                        })
                        .collect()
                }
            },
        }
    }

    /// The record index the next [`Timeline::push`] will get (`u32::MAX` when records are
    /// not kept or no longer fit).
    fn next_id(&self) -> u32 {
        if self.detail == Detail::Summary || self.truncated {
            u32::MAX
        } else {
            u32::try_from(self.records.len())
                .unwrap_or(u32::MAX)
                .min(u32::MAX - 1)
        }
    }

    /// Counts a record on its track, and keeps it if records are kept.
    fn push(&mut self, r: Record) -> u32 {
        let t = &mut self.tracks[r.track.index()];
        t.busy = t.busy.saturating_add(r.end.saturating_sub(r.start));
        t.count += 1;
        self.total = self.total.max(r.done).max(r.end);
        let id = self.next_id();
        if id == u32::MAX {
            if self.detail != Detail::Summary {
                self.truncated = true;
            }
            return u32::MAX;
        }
        self.records.push(r);
        id
    }

    /// Keeps the operands of an instruction (traced runs); returns their place.
    fn summarize(&mut self, ins: &Instr, ops: &Operands) -> (u32, u8) {
        if self.detail != Detail::Trace || self.truncated {
            return (0, 0);
        }
        let start = u32::try_from(self.ops.len()).unwrap_or(u32::MAX);
        let mut n = 0u8;
        let views = self.program.views();
        for o in ins.operands() {
            let Some(r) = ops.slot(o.slot as usize) else {
                continue;
            };
            let tile = match o.operand {
                OperandRef::View(v) => views.get(v.index()).map(|v| v.tile),
                OperandRef::Access(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => None,
            };
            let mut dims = [0u32; 5];
            for (d, &s) in dims.iter_mut().zip(&r.dims) {
                *d = u32::try_from(s).unwrap_or(u32::MAX);
            }
            self.ops.push(OperandSummary {
                slot: r.slot,
                dir: r.dir,
                loc: r.loc,
                dtype: r.dtype,
                tile,
                base: r.pattern.base as i64,
                partition_stride: r.pattern.strides[0] as i64,
                dims,
            });
            n += 1;
        }
        (start, n)
    }

    /// Extends the live ranges of the tiles an instruction touches.
    fn touch_tiles(&mut self, pc: u32, start: u64, done: u64) {
        let Some(&slots) = self.slot_tiles.get(pc as usize) else {
            return;
        };
        for tile in slots {
            if tile != NO_TILE
                && let t = self.tile_read(tile)
                && let Some(l) = self.live.get_mut(t)
            {
                l.0 = l.0.min(start);
                l.1 = l.1.max(done);
            }
        }
    }

    /// The constraint of an instruction's operands: each read waits for the writes it reads,
    /// each write for the reads and writes of what it overwrites.
    fn operands_ready(&self, ops: &Operands, slots: &[usize], c: Consumer) -> Ready {
        let mut ready = Ready::NONE;
        for &s in slots {
            let Some(r) = ops.slot(s) else { continue };
            let write = r.dir.writes();
            match r.loc {
                Loc::Sbuf | Loc::Psum => {
                    let mem = if r.loc == Loc::Sbuf {
                        &self.sbuf
                    } else {
                        &self.psum
                    };
                    let reg = self.regions[s % MAX_SLOTS];
                    if write {
                        mem.wait_write(reg, c, &mut ready);
                    } else {
                        mem.wait_read(reg, c, &mut ready);
                    }
                }
                Loc::Hbm(t) => self.hbm.wait(t as usize, r, write, &mut ready),
                Loc::Expr | Loc::Imm(_) => {}
            }
        }
        ready
    }

    /// Records the accesses of an instruction's operands, complete at `done`.
    fn mark(&mut self, ops: &Operands, slots: &[usize], cell: Cell) {
        for &s in slots {
            let Some(r) = ops.slot(s) else { continue };
            let write = r.dir.writes();
            match r.loc {
                Loc::Sbuf | Loc::Psum => {
                    let mem = if r.loc == Loc::Sbuf {
                        &mut self.sbuf
                    } else {
                        &mut self.psum
                    };
                    let reg = self.regions[s % MAX_SLOTS];
                    if write {
                        mem.mark_write(reg, cell);
                    } else {
                        mem.mark_read(reg, cell);
                    }
                }
                Loc::Hbm(t) => self.hbm.mark(t as usize, r, write, cell),
                Loc::Expr | Loc::Imm(_) => {}
            }
        }
    }

    fn count(&mut self, ins: &Instr) {
        self.instructions += 1;
        let e = engine_index(ins.engine);
        self.opcodes[e][ins.opcode as usize] += 1;
    }

    /// A Vector, Scalar or GpSimd instruction.
    fn compute(&mut self, pc: u32, ins: &Instr, ops: &Operands, w: Compute) {
        let track = Track::of_engine(w.engine);
        let ti = track.index();
        let opsum = self.summarize(ins, ops);
        // An activation table load, when the function group changes.
        let loaded_table = w.table.is_some_and(|g| self.table != Some(g));
        if let Some(g) = w.table
            && self.table != Some(g)
        {
            let start = self.free[ti].t;
            let end = start.saturating_add(self.table_load);
            let pred = self.free[ti].who;
            let id = self.push(Record {
                track,
                kind: Kind::TableLoad,
                opcode: ins.opcode,
                pc,
                line: ins.line,
                start,
                end,
                done: end,
                wait: 0,
                pred: (pred != u32::MAX).then_some(pred),
                ops: (0, 0),
            });
            self.free[ti] = Free { t: end, who: id };
            self.table = Some(g);
            self.table_loads += 1;
        }
        let c = Consumer {
            pe: false,
            pe_latency: self.pe_latency,
        };
        let mut ready = self
            .operands_ready(ops, &[0, 1, 2, 3, 4], c)
            .max(self.control_ready(pc));
        // The v2 shared ports: wait until the other engine's last access through the port.
        let shared = self.p.shared_ports;
        let sbuf_port = (shared && w.sbuf)
            .then(|| Port::of(w.engine, [Engine::Vector, Engine::GpSimd]))
            .flatten();
        let psum_port = (shared && w.psum)
            .then(|| Port::of(w.engine, [Engine::Vector, Engine::Scalar]))
            .flatten();
        if let Some(side) = sbuf_port {
            ready = ready.max(self.sbuf_port[1 - side]);
        }
        if let Some(side) = psum_port {
            ready = ready.max(self.psum_port[1 - side]);
        }
        // The compiler's schedule may put the instruction in an idle gap its engine left
        // before the instructions so far (not across a table load).
        let gap = if self.device() && !loaded_table {
            self.gaps[ti].take(ready.t, w.busy)
        } else {
            None
        };
        let (start, gate, at) = match gap {
            Some((start, opened)) => (
                start,
                Free {
                    t: opened,
                    who: ready.who,
                },
                ready,
            ),
            None => {
                let gate = self.free[ti];
                let at = gate.max(ready);
                if self.device() {
                    self.gaps[ti].open(gate.t, at.t);
                }
                (at.t, gate, at)
            }
        };
        let end = start.saturating_add(w.busy);
        let done = end.saturating_add(w.latency);
        let id = self.push(Record {
            track,
            kind: Kind::Instruction,
            opcode: ins.opcode,
            pc,
            line: ins.line,
            start,
            end,
            done,
            wait: start.saturating_sub(gate.t),
            pred: (at.who != u32::MAX).then_some(at.who),
            ops: opsum,
        });
        if gap.is_none() {
            self.free[ti] = Free { t: end, who: id };
        }
        let used = Free { t: end, who: id };
        if let Some(side) = sbuf_port {
            self.sbuf_port[side] = self.sbuf_port[side].max(used);
        }
        if let Some(side) = psum_port {
            self.psum_port[side] = self.psum_port[side].max(used);
        }
        self.mark(
            ops,
            &[0, 1, 2, 3, 4],
            Cell {
                t: done,
                who: id,
                pe: false,
            },
        );
        self.control_complete(pc, Ready { t: done, who: id });
        self.touch_tiles(pc, start, done);
    }

    /// A TensorE instruction: LoadStationary (slot 1) then MultiplyMoving (slot 2 → slot 0).
    fn pe(&mut self, pc: u32, ins: &Instr, ops: &Operands, w: Pe) {
        let opsum = self.summarize(ins, ops);
        let c = Consumer {
            pe: true,
            pe_latency: self.pe_latency,
        };
        let ls_i = Track::Tensor.index();
        let mm_i = Track::TensorMatrix.index();
        // LoadStationary.
        let gate = self.free[ls_i].max(self.mm_started);
        let at = gate
            .max(self.operands_ready(ops, &[1], c))
            .max(self.control_ready(pc));
        let ls_start = at.t;
        let ls_end = ls_start.saturating_add(w.ls);
        let ls = self.push(Record {
            track: Track::Tensor,
            kind: Kind::LoadStationary,
            opcode: ins.opcode,
            pc,
            line: ins.line,
            start: ls_start,
            end: ls_end,
            done: ls_end,
            wait: ls_start - gate.t,
            pred: (at.who != u32::MAX).then_some(at.who),
            ops: opsum,
        });
        self.free[ls_i] = Free { t: ls_end, who: ls };
        // MultiplyMoving.
        let gate = self.free[mm_i].max(Ready { t: ls_end, who: ls });
        let at = gate.max(self.operands_ready(ops, &[2, 0], c));
        let mm_start = at.t;
        let mm_end = mm_start.saturating_add(w.mm);
        let done = mm_end.saturating_add(self.pe_latency);
        let mm = self.push(Record {
            track: Track::TensorMatrix,
            kind: Kind::MultiplyMoving,
            opcode: ins.opcode,
            pc,
            line: ins.line,
            start: mm_start,
            end: mm_end,
            done,
            wait: mm_start - gate.t,
            pred: (at.who != u32::MAX).then_some(at.who),
            ops: opsum,
        });
        self.free[mm_i] = Free { t: mm_end, who: mm };
        self.mm_started = Free {
            t: mm_start,
            who: mm,
        };
        // The stationary operand is read once loaded; the moving one and PSUM when done.
        self.mark(
            ops,
            &[1],
            Cell {
                t: ls_end.saturating_add(self.pe_latency),
                who: ls,
                pe: true,
            },
        );
        self.mark(
            ops,
            &[2, 0],
            Cell {
                t: done,
                who: mm,
                pe: true,
            },
        );
        self.flops = self.flops.saturating_add(w.flops);
        self.hw_flops = self.hw_flops.saturating_add(w.hw_flops);
        self.control_complete(pc, Ready { t: done, who: mm });
        self.touch_tiles(pc, ls_start, done);
    }

    /// The cost of `ins` on `ops` (pc `pc`): the last one computed for it when its operands
    /// differ from that execution's only in their base elements.
    fn cost_of(&mut self, pc: usize, ins: &Instr, ops: &Operands) -> Option<Work> {
        let entry = self.cost_of_pc.get(pc).copied().unwrap_or(u32::MAX);
        if let Some((seen, work)) = self.costs.get(entry as usize)
            && cost::same_inputs(seen, ops)
        {
            debug_assert_eq!(Some(*work), cost::cost(ins, ops, &self.p));
            return Some(*work);
        }
        let work = cost::cost(ins, ops, &self.p)?;
        if let Some(c) = self.costs.get_mut(entry as usize) {
            *c = (*ops, work);
        } else if let (Some(e), Ok(next)) =
            (self.cost_of_pc.get_mut(pc), u32::try_from(self.costs.len()))
        {
            *e = next;
            self.costs.push((*ops, work));
        }
        Some(work)
    }

    /// Gives every DMA engine a state of its own (engine 0's, while they share it).
    fn split_dma_engines(&mut self) {
        if self.dma_uniform {
            let (free, gaps) = (self.dma[0], self.dma_gaps[0].clone());
            self.dma.fill(free);
            for g in &mut self.dma_gaps[1..] {
                g.clone_from(&gaps);
            }
            self.dma_uniform = false;
        }
    }

    /// Whether every DMA engine is in engine 0's state.
    fn dma_engines_alike(&self) -> bool {
        let (free, gaps) = (self.dma[0], &self.dma_gaps[0]);
        self.dma.iter().all(|&f| f == free) && self.dma_gaps.iter().all(|g| g.list == gaps.list)
    }

    /// A DMA: the trigger on the Sync engine, then the transfer.
    fn dma(&mut self, pc: u32, ins: &Instr, ops: &Operands, w: Dma) {
        let opsum = self.summarize(ins, ops);
        // An indirect DMA: the rows are data the model does not see; it waits for and marks
        // its whole tensor, and waits for its index column (slot 2) too.
        let indirect = matches!(ins.data, nki_lang::InstrData::Indirect { .. });
        let wide;
        let (ops, slots): (&Operands, &[usize]) = match ops.slot(1) {
            Some(h) if indirect => {
                wide = ops.with(crate::indirect::whole_tensor(h));
                (&wide, &[0, 1, 2])
            }
            // `dma_compute`: the destination and every source.
            _ if matches!(ins.data, nki_lang::InstrData::DmaCompute { .. }) => {
                (ops, &[0, 1, 2, 3, 4])
            }
            _ => (ops, &[0, 1]),
        };
        let c = Consumer {
            pe: false,
            pe_latency: self.pe_latency,
        };
        let si = Track::Sync.index();
        let q =
            self.queue_of.get(pc as usize).copied().unwrap_or(0) as usize % self.queue_done.len();
        let queued = self.device();
        let gate = if queued {
            self.queue_trigger[q]
        } else {
            self.free[si]
        };
        let at = gate
            .max(self.operands_ready(ops, slots, c))
            .max(self.control_ready(pc));
        let t_start = at.t;
        let t_end = t_start.saturating_add(self.dma_issue);
        let trigger = self.push(Record {
            track: if queued {
                Track::Queue(q as u8)
            } else {
                Track::Sync
            },
            kind: Kind::DmaTrigger,
            opcode: ins.opcode,
            pc,
            line: ins.line,
            start: t_start,
            end: t_end,
            done: t_end,
            wait: t_start - gate.t,
            pred: (at.who != u32::MAX).then_some(at.who),
            ops: opsum,
        });
        let triggered = Free {
            t: t_end,
            who: trigger,
        };
        if queued {
            self.queue_trigger[q] = triggered;
        } else {
            self.free[si] = triggered;
        }
        // The data phase: the engines that can start it earliest (under the device's
        // scheduling, in an idle gap an engine left), in index order on ties.
        let arrive = t_end.saturating_add(self.dma_latency);
        let want = (w.engines as usize).clamp(1, self.dma.len());
        let gaps = queued;
        let engines = self.dma.len();
        // While every transfer takes all the engines, they are in one state: engine 0's
        // stands for all of them (the same choices, one engine's work).
        if want < engines {
            self.split_dma_engines();
        } else if !self.dma_uniform && self.dma_engines_alike() {
            self.dma_uniform = true;
        }
        let uniform = self.dma_uniform;
        let state = |e: usize| if uniform { 0 } else { e };
        let start_on = |tl: &Self, e: usize| -> (u64, bool) {
            let gap = if gaps {
                tl.dma_gaps[e].fit(arrive, w.data)
            } else {
                None
            };
            match gap {
                Some(s) => (s, true),
                None => (arrive.max(tl.dma[e].t), false),
            }
        };
        // Each engine's earliest start, and whether it is in a gap; the transfer takes the
        // `want` earliest (a stable sort: index order on ties).
        let mut option = [(u64::MAX, false); MAX_DMA];
        if uniform {
            let o = start_on(self, 0);
            option[..engines].fill(o);
        } else {
            // No engine starts before the data arrives: once `want` engines start then, in
            // index order, they are the ones taken, and the others need not be looked at.
            let mut at_arrival = 0;
            for (e, o) in option.iter_mut().enumerate().take(engines) {
                *o = start_on(self, e);
                at_arrival += usize::from(o.0 == arrive);
                if at_arrival == want {
                    break;
                }
            }
        }
        let mut chosen: [usize; MAX_DMA] = core::array::from_fn(|e| e);
        if want == 1 && engines > 1 {
            // The one engine that starts first (the first in index order on ties).
            chosen[0] = (0..engines).min_by_key(|&e| option[e].0).unwrap_or(0);
        } else if want < engines {
            chosen[..engines].sort_by_key(|&e| option[e].0);
        }
        let mut first = u64::MAX;
        let mut last = Ready {
            t: arrive,
            who: trigger,
        };
        // Under one state, every engine's start is engine 0's.
        let lanes = if uniform { 1 } else { want };
        for &e in &chosen[..lanes] {
            let (s, in_gap) = option[e];
            let st = state(e);
            let blocker = if !in_gap && self.dma[st].t > arrive {
                self.dma[st].who
            } else {
                trigger
            };
            let end = s.saturating_add(w.data);
            first = first.min(s);
            if end > last.t {
                last = Ready {
                    t: end,
                    who: blocker,
                };
            }
        }
        // HBM bandwidth, shared by every transfer.
        let hbm = w.hbm_read.saturating_add(w.hbm_write);
        if hbm > 0 {
            let busy = bytes_ps(hbm, self.p.hbm_bytes_per_us);
            let gap = if gaps {
                self.hbm_gaps.take(first, busy).map(|(s, _)| s)
            } else {
                None
            };
            let end = match gap {
                Some(s) => s.saturating_add(busy),
                None => {
                    let s = self.hbm_free.max(first);
                    if gaps {
                        self.hbm_gaps.open(self.hbm_free, s);
                    }
                    self.hbm_free = s.saturating_add(busy);
                    self.hbm_free
                }
            };
            last.merge(end, trigger);
        }
        // A queue's transfers complete in order.
        let done = last.max(self.queue_done[q]);
        let id = self.next_id();
        for &e in &chosen[..lanes] {
            let (s, in_gap) = option[e];
            let end = s.saturating_add(w.data);
            if in_gap {
                self.dma_gaps[e].take(s, w.data);
            } else {
                if gaps {
                    self.dma_gaps[e].open(self.dma[e].t, s);
                }
                self.dma[e] = Free { t: end, who: id };
            }
            if !uniform {
                let t = &mut self.tracks[Track::DmaEngine(e as u8).index()];
                t.busy = t.busy.saturating_add(w.data);
                t.count += 1;
            }
        }
        if uniform {
            // Every engine's share, added to each engine's track by `finish`.
            self.dma_all.busy = self.dma_all.busy.saturating_add(w.data);
            self.dma_all.count += 1;
        }
        if self.dma_rows && self.detail == Detail::Trace && id != u32::MAX {
            for &e in &chosen[..want] {
                let (s, _) = option[e];
                self.phases.push(DmaPhase {
                    engine: e as u8,
                    start: s,
                    end: s.saturating_add(w.data),
                    record: id,
                });
            }
        }
        // The transfer's record: from its trigger's end (the pred, unless an engine or an
        // earlier transfer on the queue held it) to its completion; `wait` is the time to
        // its first data.
        let pred = if done.who == u32::MAX {
            None
        } else if done.t == last.t && last.who == trigger {
            Some(trigger)
        } else {
            Some(done.who)
        };
        let rec = self.push(Record {
            track: Track::Queue(q as u8),
            kind: Kind::DmaTransfer,
            opcode: ins.opcode,
            pc,
            line: ins.line,
            start: t_end,
            end: done.t,
            done: done.t,
            wait: first.saturating_sub(t_end),
            pred: pred.filter(|&p| p != u32::MAX),
            ops: opsum,
        });
        debug_assert!(rec == id || rec == u32::MAX);
        self.queue_done[q] = Free {
            t: done.t,
            who: rec,
        };
        self.control_complete(
            pc,
            Ready {
                t: done.t,
                who: rec,
            },
        );
        if self.ff.armed {
            self.record_hbm(pc, ops, done.t);
        }
        self.mark(
            ops,
            slots,
            Cell {
                t: done.t,
                who: rec,
                pe: false,
            },
        );
        self.hbm_read = self.hbm_read.saturating_add(w.hbm_read);
        self.hbm_write = self.hbm_write.saturating_add(w.hbm_write);
        self.dma_bytes = self.dma_bytes.saturating_add(w.bytes);
        self.dma_transfers += 1;
        self.touch_tiles(pc, t_start, done.t);
    }
}

impl Observer for Timeline<'_> {
    fn before(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
    ) -> ControlFlow<String> {
        if !self.needs(pc, instr, vars) {
            return ControlFlow::Continue(());
        }
        if self.ff.armed {
            self.ff.vars = *vars;
        }
        let moved = self.read_from_psum(pc, instr, operands);
        let operands = moved.as_ref().unwrap_or(operands);
        let Some(work) = self.cost_of(pc, instr, operands) else {
            return ControlFlow::Continue(());
        };
        self.count(instr);
        self.place_operands(pc, vars);
        self.locate(operands);
        let pc = u32::try_from(pc).unwrap_or(u32::MAX);
        match work {
            Work::Compute(w) => self.compute(pc, instr, operands, w),
            Work::Pe(w) => self.pe(pc, instr, operands, w),
            Work::Dma(w) => self.dma(pc, instr, operands, w),
        }
        ControlFlow::Continue(())
    }

    fn computes(&self) -> bool {
        self.computes
    }

    /// Not the instructions the device does not run: a hoisted instruction past the first
    /// iteration of the loop it leaves or of a loop inside that one (the index of a loop not
    /// entered is 0), and a folded fill; each is counted in [`Schedule::not_run`].
    fn needs(&mut self, pc: usize, _instr: &Instr, vars: &VarValues) -> bool {
        let hoisted_repeat = (self.hoisted.get(pc).copied().flatten())
            .is_some_and(|d| vars.iter().skip(MAX_PIDS + d).any(|&v| v != 0));
        if hoisted_repeat || self.folded.get(pc).copied().unwrap_or(false) {
            self.not_run += 1;
            return false;
        }
        true
    }

    fn loop_edge(&mut self, edge: &LoopEdge<'_>, resolve: &mut Resolver<'_>) -> Skip {
        self.edge(edge, resolve)
    }

    fn instance_edge(&mut self, edge: &InstanceEdge<'_>, resolve: &mut Resolver<'_>) -> Skip {
        self.instance_edge(edge, resolve)
    }
}

/// Whether a direction reads (re-exported for the trace's operand descriptions).
pub(crate) fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Read => "read",
        Dir::Write => "write",
        Dir::ReadWrite => "read-write",
    }
}
