//! A timed run: every engine's busy time and counts, and (when asked for) one record per
//! instruction with its start, end and the constraint that set its start.

use core::fmt;

use nki_lang::{DType, Dir, Engine, Memory, Opcode};

use super::Detail;
use super::params::Params;
use crate::operand::Loc;

/// Number of opcodes (the columns of [`Schedule::opcode_count`]).
pub const OPCODES: usize = Opcode::ALL.len();

/// Most DMA engines or queues a parameter table may ask for.
pub const MAX_DMA: usize = 32;

/// A row of the timeline: an engine's in-order queue, or a DMA queue or engine.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Track {
    /// The Sync engine: DMA triggers.
    Sync,
    /// TensorE's LoadStationary (the profiler's `Tensor` row, `LDWEIGHTS`).
    Tensor,
    /// TensorE's MultiplyMoving (the profiler's `TensorMatrix` row, `MATMUL`).
    TensorMatrix,
    /// VectorE.
    Vector,
    /// ScalarE (activation engine).
    Scalar,
    /// GpSimdE.
    GpSimd,
    /// DMA queue `n`: one per static DMA instruction of the kernel (modulo the queue count).
    Queue(u8),
    /// DMA engine `n`: the data phase of each transfer it takes part in.
    DmaEngine(u8),
}

impl Track {
    /// The six instruction queues, in the profiler's order.
    pub const ENGINES: [Track; 6] = [
        Track::Sync,
        Track::Tensor,
        Track::TensorMatrix,
        Track::Vector,
        Track::Scalar,
        Track::GpSimd,
    ];

    /// Index in [`Schedule::track_stats`]' table.
    pub(crate) fn index(self) -> usize {
        match self {
            Track::Sync => 0,
            Track::Tensor => 1,
            Track::TensorMatrix => 2,
            Track::Vector => 3,
            Track::Scalar => 4,
            Track::GpSimd => 5,
            Track::Queue(q) => 6 + (q as usize).min(MAX_DMA - 1),
            Track::DmaEngine(e) => 6 + MAX_DMA + (e as usize).min(MAX_DMA - 1),
        }
    }

    /// Number of track indices.
    pub(crate) const COUNT: usize = 6 + 2 * MAX_DMA;

    /// The track of an engine that runs instructions (`Dma` is the Sync engine's trigger).
    pub fn of_engine(engine: Engine) -> Track {
        match engine {
            Engine::Tensor => Track::TensorMatrix,
            Engine::Vector => Track::Vector,
            Engine::Scalar => Track::Scalar,
            Engine::GpSimd => Track::GpSimd,
            Engine::Dma | Engine::Sync => Track::Sync,
        }
    }

    /// Whether the track is a DMA queue or engine.
    pub fn is_dma(self) -> bool {
        matches!(self, Track::Queue(_) | Track::DmaEngine(_))
    }
}

impl fmt::Display for Track {
    /// The profiler's row names: `Sync`, `Tensor`, `TensorMatrix`, `Vector`, `Scalar`,
    /// `GpSimd`, `qSyncIO3`, `DMA-E5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Track::Sync => f.pad("Sync"),
            Track::Tensor => f.pad("Tensor"),
            Track::TensorMatrix => f.pad("TensorMatrix"),
            Track::Vector => f.pad("Vector"),
            Track::Scalar => f.pad("Scalar"),
            Track::GpSimd => f.pad("GpSimd"),
            Track::Queue(q) => f.pad(&format!("qSyncIO{q}")),
            Track::DmaEngine(e) => f.pad(&format!("DMA-E{e}")),
        }
    }
}

/// What a record is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A Vector, Scalar or GpSimd instruction.
    Instruction,
    /// An activation-table load on ScalarE (`ACT_TABLE_LOAD`) before an activation whose
    /// function group differs from the loaded table's.
    TableLoad,
    /// The LoadStationary half of a TensorE instruction (`LDWEIGHTS`).
    LoadStationary,
    /// The MultiplyMoving half of a TensorE instruction (`MATMUL`).
    MultiplyMoving,
    /// A DMA trigger on the Sync engine.
    DmaTrigger,
    /// A DMA transfer on its queue: from its first data to its completion.
    DmaTransfer,
}

impl Kind {
    /// The profiler's opcode-like name: `ACT_TABLE_LOAD`, `LDWEIGHTS`, `MATMUL`,
    /// `DMA_TRIGGER`, `DMA`; `None` for an instruction (named by its mnemonic).
    pub fn label(self) -> Option<&'static str> {
        match self {
            Kind::Instruction => None,
            Kind::TableLoad => Some("ACT_TABLE_LOAD"),
            Kind::LoadStationary => Some("LDWEIGHTS"),
            Kind::MultiplyMoving => Some("MATMUL"),
            Kind::DmaTrigger => Some("DMA_TRIGGER"),
            Kind::DmaTransfer => Some("DMA"),
        }
    }
}

/// One timed piece of work. Times are picoseconds from the kernel's start.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its row.
    pub track: Track,
    /// What it is.
    pub kind: Kind,
    /// The instruction it belongs to.
    pub opcode: Opcode,
    /// The instruction's index in the program.
    pub pc: u32,
    /// The kernel source line (0 when unknown).
    pub line: u32,
    /// When it started.
    pub start: u64,
    /// When its engine could take the next one (start + initiation interval; a transfer's
    /// completion).
    pub end: u64,
    /// When its result was visible to dependent instructions.
    pub done: u64,
    /// How long it waited for its operands after its engine was free (the profiler's
    /// `evt_wait_time`).
    pub wait: u64,
    /// The record whose end set its start: the previous one on its engine, or the producer
    /// it waited for (`None` at the kernel's start).
    pub pred: Option<u32>,
    /// Its operands in [`Schedule::operands`] (empty unless traced).
    pub(crate) ops: (u32, u8),
}

/// An operand of a traced instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OperandSummary {
    /// The slot in the instruction's format.
    pub slot: u8,
    /// Read, written, or both.
    pub dir: Dir,
    /// Where it is.
    pub loc: Loc,
    /// Element type.
    pub dtype: DType,
    /// The tile (index in the program's tile table), for SBUF/PSUM operands.
    pub tile: Option<u16>,
    /// First element (SBUF/PSUM: `partition · partition_elems + offset`; HBM: the element's
    /// offset in its tensor).
    pub base: i64,
    /// Element stride of the partition dimension.
    pub partition_stride: i64,
    /// Elements per dimension (partition first).
    pub dims: [u32; 5],
}

/// A DMA engine's part of one transfer (traced runs only).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DmaPhase {
    /// The engine.
    pub engine: u8,
    /// When it started moving this transfer's data.
    pub start: u64,
    /// When it finished.
    pub end: u64,
    /// The transfer's record.
    pub record: u32,
}

/// Busy time and instruction count of one track.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackStats {
    /// Sum of the intervals of its records (ps); on an in-order engine the intervals do not
    /// overlap, so this is its active time.
    pub busy: u64,
    /// Records on it.
    pub count: u64,
}

/// An on-chip tile's use over the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileUse {
    /// Its name in the kernel.
    pub name: String,
    /// SBUF or PSUM.
    pub memory: Memory,
    /// Bytes per partition.
    pub bytes_per_partition: u64,
    /// Partitions.
    pub partitions: u32,
    /// Its byte offset within each partition (PSUM: bank × bank bytes).
    pub addr: u32,
    /// The buffers the timed program gives it (more than 1 when it rotates across a loop's
    /// iterations; the extra ones lie beyond the program's tiles).
    pub buffers: u32,
    /// First access start and last access completion (ps), if any instruction touched it.
    pub live: Option<(u64, u64)>,
}

/// The result of a timed run.
#[derive(Clone, Debug)]
pub struct Schedule {
    pub(crate) kernel: String,
    pub(crate) params: Params,
    pub(crate) detail: Detail,
    pub(crate) total: u64,
    pub(crate) instructions: u64,
    pub(crate) not_run: u64,
    pub(crate) tracks: Vec<TrackStats>,
    pub(crate) opcodes: Vec<[u64; OPCODES]>,
    pub(crate) table_loads: u64,
    pub(crate) flops: u64,
    pub(crate) hw_flops: u64,
    pub(crate) hbm_read: u64,
    pub(crate) hbm_write: u64,
    pub(crate) dma_bytes: u64,
    pub(crate) dma_transfers: u64,
    pub(crate) tiles: Vec<TileUse>,
    pub(crate) tensors: Vec<String>,
    pub(crate) records: Vec<Record>,
    pub(crate) truncated: bool,
    pub(crate) ops: Vec<OperandSummary>,
    pub(crate) phases: Vec<DmaPhase>,
    /// By pc: the instruction's `name = "..."` (empty when no instruction is named).
    pub(crate) names: Vec<Option<String>>,
}

/// Index of an engine in [`Schedule::opcode_count`]'s table.
pub(crate) fn engine_index(e: Engine) -> usize {
    match e {
        Engine::Tensor => 0,
        Engine::Vector => 1,
        Engine::Scalar => 2,
        Engine::GpSimd => 3,
        Engine::Dma => 4,
        Engine::Sync => 5,
    }
}

/// The engines, in [`engine_index`] order.
pub(crate) const ENGINES: [Engine; 6] = [
    Engine::Tensor,
    Engine::Vector,
    Engine::Scalar,
    Engine::GpSimd,
    Engine::Dma,
    Engine::Sync,
];

impl Schedule {
    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        &self.kernel
    }

    /// The parameters the run was timed with.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// How much was recorded.
    pub fn detail(&self) -> Detail {
        self.detail
    }

    /// The modeled device time: from the kernel's start to the completion of its last
    /// instruction, in picoseconds.
    pub fn total_ps(&self) -> u64 {
        self.total
    }

    /// The modeled device time in microseconds.
    pub fn latency_us(&self) -> f64 {
        self.total as f64 / 1e6
    }

    /// The modeled time of one NEFF execution of the kernel, in picoseconds: its latency
    /// ([`Schedule::total_ps`]) plus the execution's fixed start-up and tear-down
    /// ([`Params::execution_overhead_ns`]). This is what the Neuron profiler's device
    /// execution time and `nki.benchmark` measure; the latency is what a kernel's own
    /// instructions take, and what comparing two kernels needs.
    pub fn execution_ps(&self) -> u64 {
        self.total
            .saturating_add(super::params::ns_ps(self.params.execution_overhead_ns))
    }

    /// [`Schedule::execution_ps`] in microseconds.
    pub fn execution_us(&self) -> f64 {
        self.execution_ps() as f64 / 1e6
    }

    /// Instructions executed (shown to the model: an instruction whose mask keeps nothing
    /// is neither executed nor timed).
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// Executed instructions the device would not run, so not timed: zero fills of PSUM
    /// accumulation groups and the repeats of loop-invariant instructions
    /// ([`super::Scheduling::Device`]).
    pub fn not_run(&self) -> u64 {
        self.not_run
    }

    /// A track's busy time and record count.
    pub fn track_stats(&self, track: Track) -> TrackStats {
        self.tracks[track.index()]
    }

    /// How many times `engine` executed `opcode`.
    pub fn opcode_count(&self, engine: Engine, opcode: Opcode) -> u64 {
        self.opcodes[engine_index(engine)][opcode as usize]
    }

    /// Activation-table loads.
    pub fn table_loads(&self) -> u64 {
        self.table_loads
    }

    /// Useful FLOPs: `2·K·M·N` of every `nc_matmul`.
    pub fn flops(&self) -> u64 {
        self.flops
    }

    /// FLOPs the PE array executed: the matmuls' and the TensorE transposes' (as matmuls with
    /// an identity).
    pub fn hardware_flops(&self) -> u64 {
        self.hw_flops
    }

    /// Bytes read from HBM.
    pub fn hbm_read_bytes(&self) -> u64 {
        self.hbm_read
    }

    /// Bytes written to HBM.
    pub fn hbm_write_bytes(&self) -> u64 {
        self.hbm_write
    }

    /// Bytes the DMA engines moved.
    pub fn dma_bytes(&self) -> u64 {
        self.dma_bytes
    }

    /// DMA transfers.
    pub fn dma_transfers(&self) -> u64 {
        self.dma_transfers
    }

    /// The program's tiles and when each was in use.
    pub fn tiles(&self) -> &[TileUse] {
        &self.tiles
    }

    /// Names of the program's HBM tensors (inputs, then outputs).
    pub fn tensors(&self) -> &[String] {
        &self.tensors
    }

    /// The name the kernel gave instruction `pc` (`name = "..."` on its call), if any.
    pub fn instr_name(&self, pc: u32) -> Option<&str> {
        self.names.get(pc as usize)?.as_deref()
    }

    /// The records of the instructions named `name` (`name = "..."`), in execution order.
    pub fn named_records<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s Record> + 's {
        self.records
            .iter()
            .filter(move |r| self.instr_name(r.pc) == Some(name))
    }

    /// Every record, in the order the instructions executed (empty for
    /// [`Detail::Summary`]).
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Whether records were dropped (more than `u32::MAX - 1` of them).
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The operands of a record's instruction ([`Detail::Trace`] only; empty otherwise).
    pub fn operands(&self, r: &Record) -> &[OperandSummary] {
        let (start, len) = (r.ops.0 as usize, r.ops.1 as usize);
        self.ops.get(start..start + len).unwrap_or(&[])
    }

    /// The DMA engines' parts of every transfer ([`Detail::Trace`] only).
    pub fn dma_phases(&self) -> &[DmaPhase] {
        &self.phases
    }

    /// Time-ordered changes of on-chip memory in use: `(time, SBUF bytes per partition, PSUM
    /// banks)` from each instant on, counting the distinct addresses of the tiles live then (a
    /// tile from its first access's start to its last access's completion; tiles the
    /// allocator put at one address count once) and the extra buffers of rotating tiles.
    pub fn memory_use(&self) -> Vec<(u64, u64, u64)> {
        let bank = u64::from(self.params.psum_bank_bytes.max(1));
        // A tile's extent: bytes per partition (SBUF) or banks (PSUM), from its address.
        let extent = |t: &TileUse| match t.memory {
            Memory::Psum => {
                let first = u64::from(t.addr) / bank;
                (first, first + t.bytes_per_partition.div_ceil(bank).max(1))
            }
            Memory::Sbuf | Memory::Hbm => {
                let a = u64::from(t.addr);
                (a, a.saturating_add(t.bytes_per_partition))
            }
        };
        let mut times: Vec<u64> = self
            .tiles
            .iter()
            .filter_map(|t| t.live)
            .flat_map(|(a, b)| [a, b])
            .collect();
        times.sort_unstable();
        times.dedup();
        // At each instant: the union of the live tiles' address ranges (tiles that share an
        // address take it once), plus their extra rotating buffers. A tile is live from its
        // first access's start to its last access's completion, not including that instant.
        let mut out: Vec<(u64, u64, u64)> = Vec::with_capacity(times.len());
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for &at in &times {
            let mut used = [0u64; 2];
            for (slot, memory) in [(0, Memory::Sbuf), (1, Memory::Psum)] {
                ranges.clear();
                let mut extra = 0u64;
                for t in self.tiles.iter().filter(|t| t.memory == memory) {
                    let Some((a, b)) = t.live else { continue };
                    if a <= at && at < b {
                        let (lo, hi) = extent(t);
                        ranges.push((lo, hi));
                        extra = extra.saturating_add(
                            u64::from(t.buffers.saturating_sub(1)).saturating_mul(hi - lo),
                        );
                    }
                }
                ranges.sort_unstable();
                let (mut union, mut reach) = (0u64, 0u64);
                for &(lo, hi) in &ranges {
                    let lo = lo.max(reach);
                    if hi > lo {
                        union += hi - lo;
                        reach = hi;
                    }
                }
                used[slot] = union.saturating_add(extra);
            }
            out.push((at, used[0], used[1]));
        }
        out
    }

    /// How long at least one DMA transfer was moving data (from its first data to its
    /// completion), in picoseconds: the profiler's "DMA active" time. `None` without records
    /// ([`Detail::Summary`]).
    pub fn dma_active_ps(&self) -> Option<u64> {
        if self.records.is_empty() {
            return None;
        }
        let mut spans: Vec<(u64, u64)> = self
            .records
            .iter()
            .filter(|r| r.kind == Kind::DmaTransfer)
            .map(|r| (r.start.saturating_add(r.wait).min(r.end), r.end))
            .collect();
        spans.sort_unstable();
        let (mut total, mut reach) = (0u64, 0u64);
        for (a, b) in spans {
            let a = a.max(reach);
            if b > a {
                total += b - a;
                reach = b;
            }
        }
        Some(total)
    }

    /// The largest SBUF use (bytes per partition) and PSUM use (banks) over the run.
    pub fn peak_memory(&self) -> (u64, u64) {
        self.memory_use()
            .iter()
            .fold((0, 0), |(s, p), &(_, a, b)| (s.max(a), p.max(b)))
    }

    /// The critical path: from the record that completes last, back through the record that
    /// set each one's start. Each record is charged from its start to the next one's start on
    /// the path (the last one to the end). `None` without records.
    pub fn critical_path(&self) -> Option<Vec<(u32, u64)>> {
        if self.records.is_empty() {
            return None;
        }
        let last = self
            .records
            .iter()
            .enumerate()
            .max_by_key(|(i, r)| (r.done, usize::MAX - i))
            .map(|(i, _)| i as u32)?;
        let mut path = Vec::new();
        let mut cursor = self.total;
        let mut at = Some(last);
        let mut steps = 0usize;
        while let Some(i) = at {
            let r = self.records.get(i as usize)?;
            let start = r.start.min(cursor);
            path.push((i, cursor - start));
            cursor = start;
            // Predecessors always come earlier; the bound guards against a cycle.
            steps += 1;
            at = r.pred.filter(|&p| p < i && steps <= self.records.len());
        }
        Some(path)
    }

    /// The critical path's time per track (ps), in [`Track::ENGINES`] order then DMA (the
    /// queues together), and the time before its first record.
    pub fn critical_path_by_track(&self) -> Option<CriticalPath> {
        let path = self.critical_path()?;
        let mut engines = [0u64; 6];
        let mut dma = 0u64;
        let mut total = 0u64;
        for &(i, t) in &path {
            let r = &self.records[i as usize];
            total += t;
            match r.track {
                Track::Queue(_) | Track::DmaEngine(_) => dma += t,
                tr @ (Track::Sync
                | Track::Tensor
                | Track::TensorMatrix
                | Track::Vector
                | Track::Scalar
                | Track::GpSimd) => engines[tr.index()] += t,
            }
        }
        Some(CriticalPath {
            engines,
            dma,
            idle: self.total.saturating_sub(total),
            records: path.len(),
        })
    }
}

/// The critical path's time per row.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CriticalPath {
    /// Per [`Track::ENGINES`] entry (ps).
    pub engines: [u64; 6],
    /// On DMA queues (ps): transfers, including their fixed latency.
    pub dma: u64,
    /// Before the first record of the path (ps).
    pub idle: u64,
    /// Records on the path.
    pub records: usize,
}
