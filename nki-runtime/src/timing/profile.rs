//! The profile of a timed run: the summary a kernel author reads first.

use core::fmt;

use nki_lang::{Engine, Opcode};
use serde::{Serialize, Serializer};

use super::params::Generation;
use super::schedule::{ENGINES, Schedule, Track};
use super::trace::Decimal;

/// One row of the engine table.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineRow {
    /// The row: `Sync`, `Tensor` (LoadStationary), `TensorMatrix` (MultiplyMoving), `Vector`,
    /// `Scalar`, `GpSimd`, `DMA` (the 16 engines on average).
    pub name: String,
    /// Time the engine was busy (µs); for DMA the engines' average.
    pub active_us: f64,
    /// `active_us` over the kernel's time.
    pub utilisation: f64,
    /// Records on the row (instructions; LoadStationary/MultiplyMoving halves; table loads
    /// count on Scalar; DMA: transfers).
    pub count: u64,
    /// Share of the critical path spent on this row (`None` without records).
    pub critical_share: Option<f64>,
}

/// How often one engine executed one opcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpcodeCount {
    /// The engine.
    pub engine: Engine,
    /// The opcode.
    pub opcode: Opcode,
    /// Executions.
    pub count: u64,
}

/// The executions of one named instruction (`name = "..."` on its call).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NamedRow {
    /// The name.
    pub name: String,
    /// Its records (an instruction's parts: a matmul's LoadStationary and MultiplyMoving, a
    /// DMA's trigger and transfer), over every execution.
    pub records: u64,
    /// When its first record starts (µs).
    pub first_start_us: f64,
    /// When its last record completes (µs).
    pub last_done_us: f64,
    /// Busy time of its records (µs).
    pub busy_us: f64,
}

/// A run's profile. Its `Display` is a table; [`Profile::to_json`] gives the same as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The kernel's name.
    pub kernel: String,
    /// The modeled generation.
    pub generation: Generation,
    /// Modeled device time (µs): from the kernel's first instruction to the completion of its
    /// last.
    pub latency_us: f64,
    /// Modeled time of one NEFF execution (µs): the latency plus the execution's fixed
    /// start-up and tear-down, as the profiler and `nki.benchmark` measure
    /// ([`Schedule::execution_us`]).
    pub execution_us: f64,
    /// Instructions executed.
    pub instructions: u64,
    /// Executed instructions the device would not run ([`Schedule::not_run`]).
    pub not_run: u64,
    /// One row per engine, then DMA.
    pub engines: Vec<EngineRow>,
    /// Executions per engine and opcode (nonzero ones).
    pub opcodes: Vec<OpcodeCount>,
    /// Activation-table loads.
    pub table_loads: u64,
    /// Useful FLOPs (matmuls).
    pub flops: u64,
    /// FLOPs the PE array executed (with transposes).
    pub hardware_flops: u64,
    /// Model FLOPs utilisation: useful FLOPs over the TensorE peak × time.
    pub mfu: f64,
    /// Hardware FLOPs utilisation: the PE array's FLOPs over the peak × time.
    pub hfu: f64,
    /// The TensorE peak (FLOP/s).
    pub peak_flops: f64,
    /// Bytes read from HBM.
    pub hbm_read_bytes: u64,
    /// Bytes written to HBM.
    pub hbm_write_bytes: u64,
    /// Bytes the DMA engines moved.
    pub dma_bytes: u64,
    /// DMA transfers.
    pub dma_transfers: u64,
    /// DMA bytes over the kernel's time (GB/s).
    pub dma_throughput_gbps: f64,
    /// DMA bytes over the time the DMA engines were busy, per engine × engines (GB/s): the rate
    /// while moving data, after the descriptor derate.
    pub dma_active_throughput_gbps: f64,
    /// FLOPs per HBM byte.
    pub arithmetic_intensity: f64,
    /// The roofline's ridge point (FLOP/byte): above it a kernel can be compute bound.
    pub ridge_flops_per_byte: f64,
    /// Largest SBUF use (bytes per partition) over the run.
    pub peak_sbuf_bytes: u64,
    /// SBUF capacity (bytes per partition).
    pub sbuf_capacity: u64,
    /// Largest PSUM use (banks) over the run.
    pub peak_psum_banks: u64,
    /// PSUM banks.
    pub psum_banks: u64,
    /// Time before the critical path's first record, as a share (`None` without records).
    pub critical_idle: Option<f64>,
    /// The named instructions, in order of first execution (empty without records, or
    /// without names).
    pub named: Vec<NamedRow>,
}

impl Profile {
    /// The profile of a schedule.
    pub fn of(s: &Schedule) -> Profile {
        let p = s.params();
        let total = s.total_ps();
        let t = total as f64;
        let share = |x: u64| if total == 0 { 0.0 } else { x as f64 / t };
        let cp = s.critical_path_by_track();
        let mut engines: Vec<EngineRow> = Track::ENGINES
            .iter()
            .enumerate()
            .map(|(i, &tr)| {
                let st = s.track_stats(tr);
                EngineRow {
                    name: tr.to_string(),
                    active_us: st.busy as f64 / 1e6,
                    utilisation: share(st.busy),
                    count: st.count,
                    critical_share: cp.map(|c| share(c.engines[i])),
                }
            })
            .collect();
        let n_dma = (p.dma_engines as usize).clamp(1, super::schedule::MAX_DMA);
        // Saturating: a what-if table of absurd rates saturates each engine's busy time.
        let dma_busy: u64 = (0..n_dma)
            .map(|e| s.track_stats(Track::DmaEngine(e as u8)).busy)
            .fold(0, u64::saturating_add);
        engines.push(EngineRow {
            name: "DMA".to_string(),
            active_us: dma_busy as f64 / n_dma as f64 / 1e6,
            utilisation: share(dma_busy) / n_dma as f64,
            count: s.dma_transfers(),
            critical_share: cp.map(|c| share(c.dma)),
        });
        let mut opcodes = Vec::new();
        for &e in &ENGINES {
            for &op in Opcode::ALL {
                let count = s.opcode_count(e, op);
                if count > 0 {
                    opcodes.push(OpcodeCount {
                        engine: e,
                        opcode: op,
                        count,
                    });
                }
            }
        }
        let peak = p.peak_flops();
        let secs = t / 1e12;
        // 0 without time or without a peak (`pe_flops_per_cycle` of 0 in a what-if table).
        let util = |f: u64| {
            if total == 0 || peak <= 0.0 {
                0.0
            } else {
                f as f64 / (peak * secs)
            }
        };
        let hbm = s.hbm_read_bytes().saturating_add(s.hbm_write_bytes());
        let (peak_sbuf, peak_psum) = s.peak_memory();
        Profile {
            kernel: s.kernel().to_string(),
            generation: p.generation,
            latency_us: s.latency_us(),
            execution_us: s.execution_us(),
            instructions: s.instructions(),
            not_run: s.not_run(),
            engines,
            opcodes,
            table_loads: s.table_loads(),
            flops: s.flops(),
            hardware_flops: s.hardware_flops(),
            mfu: util(s.flops()),
            hfu: util(s.hardware_flops()),
            peak_flops: peak,
            hbm_read_bytes: s.hbm_read_bytes(),
            hbm_write_bytes: s.hbm_write_bytes(),
            dma_bytes: s.dma_bytes(),
            dma_transfers: s.dma_transfers(),
            dma_throughput_gbps: if total == 0 {
                0.0
            } else {
                s.dma_bytes() as f64 / t * 1e3
            },
            dma_active_throughput_gbps: if dma_busy == 0 {
                0.0
            } else {
                s.dma_bytes() as f64 / dma_busy as f64 * 1e3 * n_dma as f64
            },
            arithmetic_intensity: if hbm == 0 {
                0.0
            } else {
                s.flops() as f64 / hbm as f64
            },
            ridge_flops_per_byte: p.ridge_flops_per_byte(),
            peak_sbuf_bytes: peak_sbuf,
            sbuf_capacity: u64::from(p.sbuf_partition_bytes),
            peak_psum_banks: peak_psum,
            psum_banks: u64::from(p.psum_banks),
            critical_idle: cp.map(|c| share(c.idle)),
            named: named_rows(s),
        }
    }

    /// The row named `name` (`Tensor`, `TensorMatrix`, `Vector`, `Scalar`, `GpSimd`, `Sync`,
    /// `DMA`).
    pub fn engine(&self, name: &str) -> Option<&EngineRow> {
        self.engines.iter().find(|e| e.name == name)
    }

    /// The profile as one JSON object: `kernel`, `generation`, `latency_us`, `execution_us`,
    /// `instructions`,
    /// `not_run`, `mfu`, `hfu`, `utilisation` (by row name), `active_us`,
    /// `critical_path_share`, `counts` (`engine.opcode`), the byte and memory figures.
    pub fn to_json(&self) -> String {
        let rows = |f: fn(&EngineRow) -> Option<f64>| Rows {
            engines: &self.engines,
            value: f,
        };
        let json = ProfileJson {
            kernel: &self.kernel,
            generation: self.generation.name(),
            latency_us: self.latency_us,
            execution_us: self.execution_us,
            instructions: self.instructions,
            not_run: self.not_run,
            mfu: self.mfu,
            hfu: self.hfu,
            utilisation: rows(|e| Some(e.utilisation)),
            active_us: rows(|e| Some(e.active_us)),
            critical_path_share: rows(|e| e.critical_share),
            counts: Counts(&self.opcodes),
            table_loads: self.table_loads,
            flops: self.flops,
            hardware_flops: self.hardware_flops,
            hbm_read_bytes: self.hbm_read_bytes,
            hbm_write_bytes: self.hbm_write_bytes,
            dma_bytes: self.dma_bytes,
            dma_transfers: self.dma_transfers,
            dma_throughput_gbps: self.dma_throughput_gbps,
            arithmetic_intensity: self.arithmetic_intensity,
            peak_sbuf_bytes_per_partition: self.peak_sbuf_bytes,
            peak_psum_banks: self.peak_psum_banks,
            named: &self.named,
        };
        let mut out = Vec::new();
        json.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out, Decimal,
        ))
        .expect("a profile serialises to JSON");
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }
}

/// The rows of the named instructions of `s`'s records.
fn named_rows(s: &Schedule) -> Vec<NamedRow> {
    let mut rows: Vec<NamedRow> = Vec::new();
    for r in s.records() {
        let Some(name) = s.instr_name(r.pc) else {
            continue;
        };
        let (start, done) = (r.start as f64 / 1e6, r.done.max(r.end) as f64 / 1e6);
        let busy = r.end.saturating_sub(r.start) as f64 / 1e6;
        match rows.iter_mut().find(|row| row.name == name) {
            Some(row) => {
                row.records += 1;
                row.first_start_us = row.first_start_us.min(start);
                row.last_done_us = row.last_done_us.max(done);
                row.busy_us += busy;
            }
            None => rows.push(NamedRow {
                name: name.to_string(),
                records: 1,
                first_start_us: start,
                last_done_us: done,
                busy_us: busy,
            }),
        }
    }
    rows
}

/// [`Profile::to_json`]'s object.
#[derive(Serialize)]
struct ProfileJson<'a> {
    kernel: &'a str,
    generation: &'static str,
    latency_us: f64,
    execution_us: f64,
    instructions: u64,
    not_run: u64,
    mfu: f64,
    hfu: f64,
    utilisation: Rows<'a>,
    active_us: Rows<'a>,
    critical_path_share: Rows<'a>,
    counts: Counts<'a>,
    table_loads: u64,
    flops: u64,
    hardware_flops: u64,
    hbm_read_bytes: u64,
    hbm_write_bytes: u64,
    dma_bytes: u64,
    dma_transfers: u64,
    dma_throughput_gbps: f64,
    arithmetic_intensity: f64,
    peak_sbuf_bytes_per_partition: u64,
    peak_psum_banks: u64,
    #[serde(skip_serializing_if = "<[NamedRow]>::is_empty")]
    named: &'a [NamedRow],
}

/// One figure of every engine row, keyed by the row's name (`null` where it has none).
struct Rows<'a> {
    engines: &'a [EngineRow],
    value: fn(&EngineRow) -> Option<f64>,
}

impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_map(self.engines.iter().map(|e| (&e.name, (self.value)(e))))
    }
}

/// Executions keyed by `engine.opcode`.
struct Counts<'a>(&'a [OpcodeCount]);

impl Serialize for Counts<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_map(self.0.iter().map(|c| {
            (
                format!("{}.{}", c.engine.name(), c.opcode.info().name),
                c.count,
            )
        }))
    }
}

/// Bytes in B, KiB, MiB or GiB.
fn bytes(b: u64) -> String {
    let x = b as f64;
    if b < 1 << 10 {
        format!("{b} B")
    } else if b < 1 << 20 {
        format!("{:.1} KiB", x / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1} MiB", x / (1 << 20) as f64)
    } else {
        format!("{:.2} GiB", x / (1 << 30) as f64)
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kernel {} on the {} model: {:.3} µs modeled (deterministic), {} instructions",
            self.kernel, self.generation, self.latency_us, self.instructions
        )?;
        writeln!(
            f,
            "  one NEFF execution with its start-up and tear-down (as the profiler and \
             nki.benchmark measure): {:.3} µs",
            self.execution_us
        )?;
        writeln!(
            f,
            "  {:<14} {:>12} {:>7} {:>10} {:>10}",
            "engine", "active µs", "util", "count", "crit.path"
        )?;
        for e in &self.engines {
            let cp = e
                .critical_share
                .map_or_else(|| "-".to_string(), |c| format!("{:.1} %", 100.0 * c));
            writeln!(
                f,
                "  {:<14} {:>12.3} {:>6.1}% {:>10} {:>10}",
                e.name,
                e.active_us,
                100.0 * e.utilisation,
                e.count,
                cp
            )?;
        }
        if let Some(idle) = self.critical_idle
            && idle > 0.0
        {
            writeln!(f, "  (critical path idle at start: {:.1} %)", 100.0 * idle)?;
        }
        write!(f, "  instructions:")?;
        for (i, c) in self.opcodes.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(f, "{sep}{} {} {}", c.engine, c.opcode.info().name, c.count)?;
        }
        if self.table_loads > 0 {
            write!(f, ", ACT_TABLE_LOAD {}", self.table_loads)?;
        }
        if self.not_run > 0 {
            write!(
                f,
                "; {} not run on the device (accumulation fills, hoisted repeats)",
                self.not_run
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  MFU {:.1} %, HFU {:.1} % of {:.2} TFLOPS ({:.3e} useful FLOPs, {:.3e} on the PE array)",
            100.0 * self.mfu,
            100.0 * self.hfu,
            self.peak_flops / 1e12,
            self.flops as f64,
            self.hardware_flops as f64
        )?;
        writeln!(
            f,
            "  HBM read {}, written {}; DMA {} in {} transfers, {:.1} GB/s over the kernel, {:.1} GB/s while active",
            bytes(self.hbm_read_bytes),
            bytes(self.hbm_write_bytes),
            bytes(self.dma_bytes),
            self.dma_transfers,
            self.dma_throughput_gbps,
            self.dma_active_throughput_gbps
        )?;
        writeln!(
            f,
            "  arithmetic intensity {:.1} FLOP/B (ridge {:.0}); peak SBUF {} of {} per partition ({:.1} %), peak PSUM {} of {} banks",
            self.arithmetic_intensity,
            self.ridge_flops_per_byte,
            bytes(self.peak_sbuf_bytes),
            bytes(self.sbuf_capacity),
            100.0 * self.peak_sbuf_bytes as f64 / self.sbuf_capacity.max(1) as f64,
            self.peak_psum_banks,
            self.psum_banks
        )?;
        if !self.named.is_empty() {
            write!(
                f,
                "\n  {:<20} {:>8} {:>12} {:>12} {:>10}",
                "named instruction", "records", "first µs", "done µs", "busy µs"
            )?;
            for n in &self.named {
                write!(
                    f,
                    "\n  {:<20} {:>8} {:>12.3} {:>12.3} {:>10.3}",
                    n.name, n.records, n.first_start_us, n.last_done_us, n.busy_us
                )?;
            }
        }
        Ok(())
    }
}
