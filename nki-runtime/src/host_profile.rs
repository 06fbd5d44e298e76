//! Host time per instruction: where the modeled core spends this machine's time.
//!
//! [`HostProfile`] is an [`Observer`]: pass it to [`crate::NeuronCore::execute_observed`] for
//! one launch or a series of launches of the same program, then print it; or switch a core's
//! recording on with [`crate::NeuronCore::record_host_profile`] and read
//! [`crate::NeuronCore::host_profile`] after launching through any API. It times each
//! instruction's data path (from after its operands are resolved to its end) with
//! [`Instant`], per program counter, and sums the rows by opcode and engine. A plain launch
//! does not use it and pays nothing for it: the executor is generic over its observer, and the
//! plain one's hooks are empty.
//!
//! Under an observer the SPMD instances of a grid launch run one after the other on the
//! calling thread, so the profile shows the work of every instance; a matmul still splits its
//! rows over the core's worker thread, and its time is the wall-clock time of both halves.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use nki_lang::{Engine, Instr, Opcode, VarValues};

use crate::exec::Observer;
use crate::operand::Operands;

/// Host time spent on one instruction of a program, over every time it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostRow {
    /// The instruction's index in the program.
    pub pc: usize,
    /// Its operation.
    pub opcode: Opcode,
    /// The engine it runs on.
    pub engine: Engine,
    /// The kernel source line that produced it.
    pub line: u32,
    /// How many times it ran.
    pub count: u64,
    /// The host time it took in total.
    pub time: Duration,
}

/// Host time summed over the instructions of one opcode on one engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostOpRow {
    /// The operation.
    pub opcode: Opcode,
    /// The engine.
    pub engine: Engine,
    /// How many instructions of the program have this opcode and engine.
    pub instructions: usize,
    /// How many times they ran.
    pub count: u64,
    /// The host time they took in total.
    pub time: Duration,
}

/// Host time per instruction and per opcode, summed over the launches it observed. See the
/// [module documentation](self).
#[derive(Clone, Debug, Default)]
pub struct HostProfile {
    rows: BTreeMap<usize, HostRow>,
    started: Option<Instant>,
}

impl HostProfile {
    /// An empty profile.
    pub fn new() -> HostProfile {
        HostProfile::default()
    }

    /// Every instruction that ran, most host time first.
    pub fn by_instruction(&self) -> Vec<HostRow> {
        let mut rows: Vec<HostRow> = self.rows.values().copied().collect();
        rows.sort_by(|a, b| b.time.cmp(&a.time).then(a.pc.cmp(&b.pc)));
        rows
    }

    /// The instructions summed by opcode and engine, most host time first.
    pub fn by_opcode(&self) -> Vec<HostOpRow> {
        let mut rows: Vec<HostOpRow> = Vec::new();
        for r in self.rows.values() {
            let i = match rows
                .iter()
                .position(|s| s.opcode == r.opcode && s.engine == r.engine)
            {
                Some(i) => i,
                None => {
                    rows.push(HostOpRow {
                        opcode: r.opcode,
                        engine: r.engine,
                        instructions: 0,
                        count: 0,
                        time: Duration::ZERO,
                    });
                    rows.len() - 1
                }
            };
            let s = &mut rows[i];
            s.instructions += 1;
            s.count = s.count.saturating_add(r.count);
            s.time = s.time.saturating_add(r.time);
        }
        rows.sort_by_key(|r| core::cmp::Reverse(r.time));
        rows
    }

    /// The host time of every instruction together (loop control and operand resolution
    /// excluded).
    pub fn total(&self) -> Duration {
        self.rows
            .values()
            .fold(Duration::ZERO, |t, r| t.saturating_add(r.time))
    }

    /// How many instructions ran, counting each execution.
    pub fn executed(&self) -> u64 {
        self.rows
            .values()
            .fold(0u64, |n, r| n.saturating_add(r.count))
    }

    /// Forgets every observation.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.started = None;
    }
}

impl Observer for HostProfile {
    fn before(
        &mut self,
        _pc: usize,
        _instr: &Instr,
        _operands: &Operands,
        _vars: &VarValues,
    ) -> ControlFlow<String> {
        self.started = Some(Instant::now());
        ControlFlow::Continue(())
    }

    fn after(&mut self, pc: usize, instr: &Instr) {
        let Some(start) = self.started.take() else {
            return;
        };
        let time = start.elapsed();
        let row = self.rows.entry(pc).or_insert(HostRow {
            pc,
            opcode: instr.opcode,
            engine: instr.engine,
            line: instr.line,
            count: 0,
            time: Duration::ZERO,
        });
        row.count = row.count.saturating_add(1);
        row.time = row.time.saturating_add(time);
    }
}

/// How many per-instruction rows the table shows.
const TOP_INSTRUCTIONS: usize = 12;

impl fmt::Display for HostProfile {
    /// The opcode table, then the instructions that took the most host time.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total();
        let share = |t: Duration| {
            if total.is_zero() {
                0.0
            } else {
                100.0 * t.as_secs_f64() / total.as_secs_f64()
            }
        };
        let us = |t: Duration| t.as_secs_f64() * 1e6;
        writeln!(
            f,
            "host time {:.1} µs over {} executed instructions",
            us(total),
            self.executed()
        )?;
        writeln!(
            f,
            "  {:<24} {:<8} {:>6} {:>9} {:>12} {:>10} {:>6}",
            "opcode", "engine", "instrs", "runs", "total µs", "µs/run", "share"
        )?;
        for r in self.by_opcode() {
            writeln!(
                f,
                "  {:<24} {:<8} {:>6} {:>9} {:>12.1} {:>10.3} {:>5.1}%",
                r.opcode.info().name,
                format!("{:?}", r.engine),
                r.instructions,
                r.count,
                us(r.time),
                us(r.time) / r.count.max(1) as f64,
                share(r.time)
            )?;
        }
        writeln!(f, "  most host time, by instruction:")?;
        writeln!(
            f,
            "  {:>5} {:<24} {:<8} {:>5} {:>9} {:>12} {:>10} {:>6}",
            "pc", "opcode", "engine", "line", "runs", "total µs", "µs/run", "share"
        )?;
        for r in self.by_instruction().iter().take(TOP_INSTRUCTIONS) {
            writeln!(
                f,
                "  {:>5} {:<24} {:<8} {:>5} {:>9} {:>12.1} {:>10.3} {:>5.1}%",
                r.pc,
                r.opcode.info().name,
                format!("{:?}", r.engine),
                r.line,
                r.count,
                us(r.time),
                us(r.time) / r.count.max(1) as f64,
                share(r.time)
            )?;
        }
        Ok(())
    }
}
