//! The interpreter: walks a program's instructions with a fixed-size loop stack, resolves each
//! instruction's operands once, shows them to an [`Observer`] and hands them to the engine
//! routine of the instruction's family.
//!
//! Loops: `LoopBegin` evaluates the trip count for the bound symbols and skips the body when
//! it is 0, else pushes the loop; `LoopEnd` advances the induction value and jumps back to the
//! body's first instruction, or pops. The index variables ([`VarValues`]: program ids, then the
//! loops' induction values by depth) feed every operand's affine indices. Nothing is allocated.
//!
//! Host shortcuts (two threads, neighbouring instructions run as one step) are not the
//! interpreter's: they enter through a host plan (`exec::plan::HostPlan`), as observers enter through
//! [`Observer`]. A run with the serial plan runs every instruction as written.

pub(crate) mod overlap;
pub(crate) mod plan;
pub(crate) mod reference;

use core::ops::ControlFlow;

use nki_lang::{
    Alu, Engine, Instr, InstrData, LoopKind, MAX_LOOP_DEPTH, MAX_PIDS, MAX_VARS, Opcode, Pred,
    VarValues, Write,
};
use thiserror::Error;

pub use crate::operand::{Loc, Operands, Pattern, Resolved};

use crate::bind::Bound;
use crate::engines::{EngineState, compute, dma, reduce, rng, tensor, vector};
use plan::HostPlan;

/// Why an execution stopped before the end of the program.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("kernel `{kernel}`, instruction {instr} ({mnemonic}, line {line}): {what}")]
pub struct ExecError {
    /// The kernel's name.
    pub kernel: String,
    /// Index of the instruction in the program.
    pub instr: usize,
    /// Its mnemonic.
    pub mnemonic: &'static str,
    /// The kernel source line it came from (0 when unknown).
    pub line: u32,
    /// What went wrong.
    pub what: String,
}

/// Sees every instruction as it executes, with its resolved operands: the hook for a timing
/// model, a profiler or a strictness check. The default methods do nothing, and an observer
/// that does nothing costs nothing.
pub trait Observer {
    /// Called before instruction `pc` runs (not for loop control), with the operands it reads
    /// and writes in this execution and the values of the index variables. Returning
    /// `ControlFlow::Break(what)` stops the execution with an [`ExecError`] saying `what`.
    #[inline(always)]
    fn before(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
    ) -> ControlFlow<String> {
        let _ = (pc, instr, operands, vars);
        ControlFlow::Continue(())
    }

    /// [`Observer::before`] with SBUF and PSUM as the instruction is about to run: for an
    /// observer whose verdict depends on values in memory (strict mode's `select`, whose
    /// element takes the side its predicate's value picks). The interpreter calls this one;
    /// the default calls [`Observer::before`].
    #[inline(always)]
    fn before_on(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
        memory: OnChip<'_>,
    ) -> ControlFlow<String> {
        let _ = memory;
        self.before(pc, instr, operands, vars)
    }

    /// Whether the instructions' data paths run. An observer that needs only the operands (a
    /// timing model ranking kernel variants) returns `false`: the run then resolves and shows
    /// every instruction, in the same order with the same loop values, but computes nothing,
    /// and the outputs keep whatever they held.
    #[inline(always)]
    fn computes(&self) -> bool {
        true
    }

    /// Whether an observer that does not compute ([`Observer::computes`] `false`) needs to see
    /// instruction `pc` at loop values `vars`: when it does not (a timing model's repeats of a
    /// hoisted load, fills the device never runs), the run counts the instruction and moves on
    /// without resolving its operands or calling [`Observer::before`]. Never asked of an
    /// observer that computes, nor for register instructions (they move registers). The
    /// default needs every instruction.
    #[inline(always)]
    fn needs(&mut self, pc: usize, instr: &Instr, vars: &VarValues) -> bool {
        let _ = (pc, instr, vars);
        true
    }

    /// Called after instruction `pc` ran.
    #[inline(always)]
    fn after(&mut self, pc: usize, instr: &Instr) {
        let _ = (pc, instr);
    }

    /// Called at a loop's back edge, when another iteration follows (`edge.vars` hold its
    /// values): returns how many iterations from that one on the observer accounts for
    /// without seeing them, which the executor then skips (a timing model that finds the
    /// loop in a steady state). Only an observer that does not compute ([`Observer::computes`]
    /// `false`) may skip; `resolve(pc, vars)` gives the operands instruction `pc` would have
    /// at loop values `vars` (`None`: its mask keeps nothing). The default skips nothing.
    #[inline(always)]
    fn loop_edge(&mut self, edge: &LoopEdge<'_>, resolve: &mut Resolver<'_>) -> Skip {
        let _ = (edge, resolve);
        Skip::NONE
    }

    /// Called between two instances of a launch grid of a run over the whole grid, when
    /// another instance follows (`edge.vars` hold its program ids): returns how many
    /// positions along `edge.axis`, from the one about to start, the observer accounts for
    /// without seeing them, each standing for every instance of the axes after it (the
    /// instances run in row-major order: a loop nest over the axes, axis 0 outermost). Only
    /// an observer that does not compute may skip; `resolve` is as for
    /// [`Observer::loop_edge`]. The default skips nothing.
    #[inline(always)]
    fn instance_edge(&mut self, edge: &InstanceEdge<'_>, resolve: &mut Resolver<'_>) -> Skip {
        let _ = (edge, resolve);
        Skip::NONE
    }
}

/// SBUF and PSUM, read-only, as [`Observer::before_on`] sees them.
#[derive(Copy, Clone, Debug)]
pub struct OnChip<'a> {
    sbuf: &'a [u8],
    psum: &'a [u8],
}

impl<'a> OnChip<'a> {
    /// The memories of `e`.
    pub(crate) fn of(e: &'a EngineState) -> OnChip<'a> {
        OnChip {
            sbuf: e.sbuf.bytes(),
            psum: e.psum.bytes(),
        }
    }

    /// The bits of element `elem` (an element offset, as [`Pattern::base`] counts them) of
    /// on-chip operand `r`, little-endian and zero-extended; `None` when `r` is not on chip
    /// or the element lies outside its memory.
    pub fn bits(&self, r: &Resolved, elem: isize) -> Option<u32> {
        let mem = match r.loc {
            Loc::Sbuf => self.sbuf,
            Loc::Psum => self.psum,
            Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => return None,
        };
        let size = r.dtype.size() as usize;
        let at = usize::try_from(elem).ok()?.checked_mul(size)?;
        let bytes = mem.get(at..at.checked_add(size)?)?;
        let mut word = [0u8; 4];
        word.get_mut(..size)?.copy_from_slice(bytes);
        Some(u32::from_le_bytes(word))
    }
}

/// The operands an instruction would have at given loop values (see [`Observer::loop_edge`]).
pub type Resolver<'a> = dyn FnMut(usize, &VarValues) -> Option<Operands> + 'a;

/// A loop's back edge, as [`Observer::loop_edge`] sees it.
#[derive(Copy, Clone, Debug)]
pub struct LoopEdge<'a> {
    /// The loop's `LoopBegin` index.
    pub begin: usize,
    /// Its depth (its induction value is `vars[MAX_PIDS + depth]`).
    pub depth: usize,
    /// The loop values of the iteration about to start.
    pub vars: &'a VarValues,
    /// The loop's trip count.
    pub trip: i64,
    /// Instructions executed so far in this run of the interpreter (masked-off ones included,
    /// loop control not): an observer that skips tells how many the skipped iterations hold.
    pub executed: u64,
}

/// The boundary between two instances of a launch grid, as [`Observer::instance_edge`] sees
/// it: the back edge of the innermost axis whose coordinate moves (the axes after it start
/// again at 0).
#[derive(Copy, Clone, Debug)]
pub struct InstanceEdge<'a> {
    /// The axis whose coordinate moves.
    pub axis: usize,
    /// The index values of the instance about to start: its program ids, loop values 0.
    pub vars: &'a VarValues,
    /// The grid's size along `axis`.
    pub size: i64,
    /// Instructions executed so far in the launch (masked-off ones included, loop control
    /// not).
    pub executed: u64,
}

/// What an observer accounted for at a loop's back edge (see [`Observer::loop_edge`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Skip {
    /// Iterations skipped, from the one about to start.
    pub iterations: i64,
    /// Instructions they execute (for the launch's budget).
    pub executed: u64,
}

impl Skip {
    /// Nothing skipped.
    pub const NONE: Skip = Skip {
        iterations: 0,
        executed: 0,
    };
}

/// The observer of a plain run: sees nothing, costs nothing.
pub(crate) struct Unobserved;

impl Observer for Unobserved {}

/// Runs every instance of a bound program's grid in row-major order, each to completion, or
/// until the observer stops one.
pub(crate) fn run<'i, O: Observer, H: HostPlan<'i>>(
    e: &mut EngineState,
    b: &mut Bound<'i, '_, '_>,
    obs: &mut O,
    plan: &mut H,
) -> Result<(), ExecError> {
    run_instances(e, b, obs, plan, 0..b.grid.count().unwrap_or(0))
}

/// Runs instances `range` (row-major indices) of the bound program's grid, in order. Over the
/// whole grid, an observer that does not compute sees the boundaries between instances
/// ([`Observer::instance_edge`]) and may skip instances.
pub(crate) fn run_instances<'i, O: Observer, H: HostPlan<'i>>(
    e: &mut EngineState,
    b: &mut Bound<'i, '_, '_>,
    obs: &mut O,
    plan: &mut H,
    range: core::ops::Range<usize>,
) -> Result<(), ExecError> {
    let end = b.program.instrs().len();
    let whole = range.start == 0 && b.grid.count() == Some(range.end);
    let mut count = 0u64;
    let mut i = range.start;
    while i < range.end {
        let mut f = Frame::new(b.grid.coords(i));
        e.rng.start(i);
        let ran = interpret(e, b, obs, plan, &mut f, (0, end))?;
        count = count.saturating_add(ran);
        i += 1;
        if whole && !obs.computes() {
            i = instance_edges(e, b, obs, (i, range.end), &mut count)?;
        }
    }
    Ok(())
}

/// Shows the observer the instance edges before instance `i` (of `end`) and skips what it
/// accounts for: returns the next instance to run. After a skip that completes an axis, the
/// edge of the axis before it follows at once.
fn instance_edges<'i, O: Observer>(
    e: &EngineState,
    b: &mut Bound<'i, '_, '_>,
    obs: &mut O,
    (mut i, end): (usize, usize),
    count: &mut u64,
) -> Result<usize, ExecError> {
    let instrs = b.program.instrs();
    let sbuf_stride = e.sbuf.partition_stride();
    let rank = b.grid.rank();
    while i < end {
        let c = b.grid.coords(i);
        let Some(axis) = (0..rank).rev().find(|&a| c[a] != 0) else {
            break;
        };
        // The instances one position along `axis` stands for (the grid's count fits).
        let inner = (axis + 1..rank).fold(1usize, |n, a| n.saturating_mul(b.grid.size(a)));
        let size = i64::try_from(b.grid.size(axis)).unwrap_or(i64::MAX);
        let mut vars: VarValues = [0; MAX_VARS];
        vars[..MAX_PIDS].copy_from_slice(&c);
        let edge = InstanceEdge {
            axis,
            vars: &vars,
            size,
            executed: *count,
        };
        let bound: &Bound<'_, '_, '_> = b;
        let mut resolve = |at: usize, vars: &VarValues| {
            instrs
                .get(at)
                .and_then(|ins| crate::operand::resolve(bound, ins, vars, sbuf_stride))
        };
        let skip = obs.instance_edge(&edge, &mut resolve);
        if skip.iterations <= 0 {
            break;
        }
        *count = count.saturating_add(skip.executed);
        if !b.meter.charge(skip.executed) {
            let at = instrs.len().saturating_sub(1);
            return Err(match instrs.get(at) {
                Some(last) => stopped(b, at, last),
                None => ExecError {
                    kernel: b.program.name().to_string(),
                    instr: 0,
                    mnemonic: "",
                    line: 0,
                    what: "stopped by the core's budget or stop handle".to_string(),
                },
            });
        }
        let left = size.saturating_sub(c[axis]);
        let n = skip.iterations.min(left);
        let moved = usize::try_from(n)
            .unwrap_or(usize::MAX)
            .saturating_mul(inner);
        i = i.saturating_add(moved).min(end);
        if n < left {
            break;
        }
    }
    Ok(i)
}

/// The interpreter's state within one instance: the index variables' values, the open loops'
/// trip counts and how many loops are open.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Frame {
    /// Program ids, then the open loops' induction values by depth.
    pub vars: VarValues,
    /// Trip count of each open loop (by depth): the value at which it ends.
    pub trips: [i64; MAX_LOOP_DEPTH],
    /// Number of open loops.
    pub depth: usize,
    /// The instance's virtual registers.
    pub regs: crate::registers::Registers,
    /// Each open device loop's lower bound (by depth): its iteration register is
    /// `base + k·step` in iteration `k`.
    pub bases: [i64; MAX_LOOP_DEPTH],
}

impl Frame {
    /// The state at the start of the instance with program ids `pids`.
    pub(crate) fn new(pids: [i64; MAX_PIDS]) -> Frame {
        let mut vars: VarValues = [0; MAX_VARS];
        vars[..MAX_PIDS].copy_from_slice(&pids);
        Frame {
            vars,
            trips: [0; MAX_LOOP_DEPTH],
            depth: 0,
            regs: [0; nki_lang::MAX_REGISTERS],
            bases: [0; MAX_LOOP_DEPTH],
        }
    }
}

/// Runs instructions `start..stop` from state `f`: a whole instance (`0..len`), or, for half of
/// a loop's iterations, its body and `LoopEnd` with the loop already open in `f`. Returns the
/// instructions executed (masked-off ones included, loop control not, skipped ones counted).
pub(crate) fn interpret<'i, O: Observer, H: HostPlan<'i>>(
    e: &mut EngineState,
    b: &mut Bound<'i, '_, '_>,
    obs: &mut O,
    plan: &mut H,
    f: &mut Frame,
    (start, stop): (usize, usize),
) -> Result<u64, ExecError> {
    let p = b.program;
    let instrs = p.instrs();
    let syms = b.syms;
    let mut pc = start;
    let sbuf_stride = e.sbuf.partition_stride();
    // Executed instructions not yet charged to the launch's meter (`crate::budget`).
    let mut executed = 0u64;
    // Executed instructions in all (what `Observer::loop_edge` sees).
    let mut count = 0u64;
    let mut resolved = crate::operand::Operands::default();
    while pc < stop {
        let Some(ins) = instrs.get(pc) else { break };
        match ins.data {
            InstrData::LoopBegin {
                kind: kind @ (LoopKind::Dynamic { .. } | LoopKind::While { .. }),
                end,
                ..
            } => {
                // A device loop: its trip count is in registers, which only a run that
                // computes has.
                let n = if obs.computes() {
                    device_trips(f, kind)
                } else {
                    Err("a device loop's trip count is data, which this run does not compute (the schedule check's recording cannot follow device loops)".to_string())
                };
                let n = n.map_err(|what| failed(b, pc, ins, what))?;
                if n <= 0 {
                    pc = end as usize + 1;
                    continue;
                }
                if let LoopKind::Dynamic { var, .. } = kind {
                    f.bases[f.depth] = i64::from(crate::registers::get(&f.regs, var));
                }
                f.trips[f.depth] = n;
                f.vars[MAX_PIDS + f.depth] = 0;
                f.depth += 1;
            }
            InstrData::LoopBegin { trip, end, .. } => {
                let t = trip.eval(&syms);
                let n = i64::try_from(t).unwrap_or(i64::MAX);
                if n <= 0 {
                    pc = end as usize + 1;
                    continue;
                }
                if plan.run_loop(e, b, f, (pc, end as usize), t)? {
                    pc = end as usize + 1;
                    continue;
                }
                f.trips[f.depth] = n;
                f.vars[MAX_PIDS + f.depth] = 0;
                f.depth += 1;
            }
            InstrData::LoopEnd { begin } => {
                let d = f.depth - 1;
                f.vars[MAX_PIDS + d] += 1;
                let device = match instrs.get(begin as usize).map(|i| i.data) {
                    Some(InstrData::LoopBegin { kind, .. }) if kind.is_device() => Some(kind),
                    _ => None,
                };
                if let Some(kind) = device {
                    // The next iteration's register, or the end of the loop.
                    let k = f.vars[MAX_PIDS + d];
                    let more = match kind {
                        LoopKind::Dynamic { var, step, .. } => {
                            let v = f.bases[d].saturating_add(k.saturating_mul(i64::from(step)));
                            if k < f.trips[d] {
                                // Below the upper bound, which is an i32.
                                crate::registers::set(&mut f.regs, var, v as i32);
                            }
                            k < f.trips[d]
                        }
                        LoopKind::While { cond } => {
                            let c = crate::registers::get(&f.regs, cond);
                            if c != 0 && k >= nki_lang::MAX_DEVICE_TRIPS {
                                return Err(failed(
                                    b,
                                    pc,
                                    ins,
                                    crate::registers::while_runaway(cond, c),
                                ));
                            }
                            c != 0
                        }
                        LoopKind::Affine | LoopKind::Sequential => false,
                    };
                    if more {
                        if !b.meter.charge(core::mem::take(&mut executed)) {
                            return Err(stopped(b, pc, ins));
                        }
                        pc = begin as usize + 1;
                        continue;
                    }
                    f.vars[MAX_PIDS + d] = 0;
                    f.depth = d;
                    pc += 1;
                    continue;
                }
                if f.vars[MAX_PIDS + d] < f.trips[d] {
                    if !b.meter.charge(core::mem::take(&mut executed)) {
                        return Err(stopped(b, pc, ins));
                    }
                    if !obs.computes() {
                        let edge = LoopEdge {
                            begin: begin as usize,
                            depth: d,
                            vars: &f.vars,
                            trip: f.trips[d],
                            executed: count,
                        };
                        let bound: &Bound<'_, '_, '_> = b;
                        let mut resolve = |at: usize, vars: &VarValues| {
                            instrs
                                .get(at)
                                .and_then(|i| crate::operand::resolve(bound, i, vars, sbuf_stride))
                        };
                        let skip = obs.loop_edge(&edge, &mut resolve);
                        if skip.iterations > 0 {
                            count = count.saturating_add(skip.executed);
                            if !b.meter.charge(skip.executed) {
                                return Err(stopped(b, pc, ins));
                            }
                            let v = &mut f.vars[MAX_PIDS + d];
                            *v = v.saturating_add(skip.iterations).min(f.trips[d]);
                            if *v >= f.trips[d] {
                                *v = 0;
                                f.depth = d;
                                pc += 1;
                                continue;
                            }
                        }
                    }
                    pc = begin as usize + 1;
                    continue;
                }
                f.vars[MAX_PIDS + d] = 0;
                f.depth = d;
            }
            // A register instruction runs on the instance's register file: shown to the
            // observer like any instruction, never to a host plan.
            InstrData::Register { src, .. } => {
                executed += 1;
                count += 1;
                if crate::operand::resolve_into(b, ins, &f.vars, sbuf_stride, &mut resolved) {
                    let memory = OnChip::of(e);
                    let seen = obs.before_on(pc, ins, &resolved, &f.vars, memory);
                    if let ControlFlow::Break(what) = seen {
                        return Err(failed(b, pc, ins, what));
                    }
                    // A run that does not compute still moves registers (no memory read).
                    if obs.computes() || src != nki_lang::RegSrc::None {
                        let sbuf = e.sbuf.bytes_mut();
                        crate::registers::step(&mut f.regs, ins.data, &resolved, sbuf)
                            .map_err(|what| failed(b, pc, ins, what))?;
                    }
                    obs.after(pc, ins);
                }
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
            | InstrData::TopK { .. } => {
                let vars = &f.vars;
                executed += 1;
                count += 1;
                if !obs.computes() && !obs.needs(pc, ins, vars) {
                    pc += 1;
                    continue;
                }
                if crate::operand::resolve_into(b, ins, vars, sbuf_stride, &mut resolved) {
                    let ops = &resolved;
                    // An indirect DMA's rows and a gather's positions are data: an index outside
                    // its axis stops the run (a run that does not compute has none to read).
                    let sbuf = e.sbuf.bytes();
                    let checked = match ins.data {
                        _ if !obs.computes() => Ok(()),
                        InstrData::Indirect {
                            mode: nki_lang::IndirectMode::Scalar { .. },
                            ..
                        } => crate::indirect::shifted(b, ins, ops, sbuf).map(|_| ()),
                        InstrData::Indirect { .. } => {
                            crate::indirect::rows(b, ins, ops, sbuf).map(|_| ())
                        }
                        InstrData::Gather { .. } => crate::gather::check(ops, sbuf),
                        InstrData::LocalGather { elems, valid, .. } => {
                            crate::local_gather::check(ops, elems, valid, sbuf)
                        }
                        InstrData::DynCopy { .. } => {
                            crate::dyncopy::operands(p, ins, ops, vars, sbuf).map(|_| ())
                        }
                        InstrData::LoopBegin { .. }
                        | InstrData::LoopEnd { .. }
                        | InstrData::Dma { .. }
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
                        | InstrData::Rng { .. }
                        | InstrData::Seed { .. }
                        | InstrData::RangeSelect { .. }
                        | InstrData::Shuffle { .. }
                        | InstrData::QuantizeMx { .. }
                        | InstrData::MatmulMx { .. }
                        | InstrData::Nonzero { .. }
                        | InstrData::DmaCompute { .. }
                        | InstrData::TopK { .. }
                        | InstrData::Register { .. } => Ok(()),
                    };
                    if let Err(what) = checked {
                        return Err(failed(b, pc, ins, what));
                    }
                    let memory = OnChip::of(e);
                    if let ControlFlow::Break(what) = obs.before_on(pc, ins, ops, vars, memory) {
                        return Err(failed(b, pc, ins, what));
                    }
                    if obs.computes() {
                        if overlap::partly_overlapping(ins, ops, sbuf_stride) {
                            // The definition reads before it writes; the engines' chunks
                            // agree with it only up to 1024 elements per partition.
                            reference::Reference.step(e, b, ins, ops, (pc, stop), vars);
                            obs.after(pc, ins);
                            pc += 1;
                            continue;
                        }
                        if let Some(more) = plan.step(e, b, ins, ops, (pc, stop), vars) {
                            obs.after(pc, ins);
                            executed += more as u64;
                            pc += 1 + more;
                            continue;
                        }
                        execute(e, b, ins, ops, vars);
                    }
                    obs.after(pc, ins);
                } else {
                    plan.masked_out(pc, ins);
                }
            }
        }
        pc += 1;
    }
    match instrs.get(pc.saturating_sub(1)) {
        Some(last) if !b.meter.charge(executed) => Err(stopped(b, pc - 1, last)),
        _ => Ok(count),
    }
}

/// The trip count of the device loop `kind` from the instance's registers: `fori_loop`'s as
/// Python's `range` counts it, a `while_loop`'s `i64::MAX` (it ends when its condition
/// register is 0) or 0 when its condition is 0 already; or what is wrong with the registers.
fn device_trips(f: &Frame, kind: LoopKind) -> Result<i64, String> {
    let get = |r| crate::registers::get(&f.regs, r);
    match kind {
        LoopKind::Dynamic { var, upper, step } => {
            crate::registers::fori_trips(get(var), get(upper), step)
        }
        LoopKind::While { cond } => Ok(if get(cond) != 0 { i64::MAX } else { 0 }),
        LoopKind::Affine | LoopKind::Sequential => Ok(0),
    }
}

/// The error that stops a launch at instruction `pc` (`ins`) for `what`.
#[cold]
fn failed(b: &Bound<'_, '_, '_>, pc: usize, ins: &Instr, what: String) -> ExecError {
    ExecError {
        kernel: b.program.name().to_string(),
        instr: pc,
        mnemonic: ins.mnemonic(),
        line: ins.line,
        what,
    }
}

/// The error that unwinds a launch its meter stopped (`crate::budget`); the core reports it
/// as [`crate::LaunchError::Stopped`].
#[cold]
fn stopped(b: &Bound<'_, '_, '_>, pc: usize, ins: &Instr) -> ExecError {
    failed(
        b,
        pc,
        ins,
        "stopped by the core's budget or stop handle".to_string(),
    )
}

/// Runs one instruction's engine routine on its resolved operands: one arm per opcode, each
/// calling its family's routine with the instruction's function codes.
pub(crate) fn execute(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    ins: &Instr,
    ops: &Operands,
    vars: &VarValues,
) {
    let acc = |w: Write| match w {
        Write::Overwrite => None,
        Write::Accumulate(op) => Some(op),
        Write::Group { op, .. } => w.accumulates_at(vars).then_some(op),
    };
    match (ins.opcode, ins.data) {
        (Opcode::Load, _) => dma::load(e, b, ops),
        (Opcode::Store, _) => dma::store(e, b, ops),
        (Opcode::LoadTranspose2d, _) => dma::load_transpose2d(e, b, ops),
        (Opcode::Matmul, InstrData::Matmul { dst, .. }) => {
            tensor::matmul(e, ops, dst.write.accumulates_at(vars), None, [None; 2])
        }
        (Opcode::Transpose, _) => tensor::transpose(e, ops),
        (Opcode::TensorCopy, InstrData::Unary { dst, .. }) => match (ins.engine, acc(dst.write)) {
            // An accumulating copy is the ALU chain `bypass`, combined into the destination.
            (engine, a @ Some(_)) => {
                compute::alu_chain(e, ops, engine, [Alu::Bypass; 2], 0, None, a)
            }
            (Engine::Scalar, None) => compute::copy_through_f32(e, ops),
            // The op table gives a copy VectorE, ScalarE or GpSimd; the others move the bits
            // as VectorE does.
            (
                Engine::Vector | Engine::GpSimd | Engine::Tensor | Engine::Dma | Engine::Sync,
                None,
            ) => vector::copy(e, ops),
        },
        (Opcode::Memset, InstrData::Fill { value, .. }) => vector::memset(e, ops, value),
        (Opcode::Reciprocal, InstrData::Unary { dst, .. }) => compute::alu_chain(
            e,
            ops,
            ins.engine,
            [Alu::Reciprocal, Alu::Bypass],
            0,
            None,
            acc(dst.write),
        ),
        (
            Opcode::TensorTensor
            | Opcode::TensorScalar
            | Opcode::ScalarTensorTensor
            | Opcode::TensorScalarReduce,
            InstrData::Alu {
                dst,
                op,
                rev,
                acc: reduce,
                ..
            },
        ) => compute::alu_chain(e, ops, ins.engine, op, rev, reduce, acc(dst.write)),
        (
            Opcode::Activation,
            InstrData::Act {
                dst,
                func,
                acc: reduce,
                ..
            },
        ) => compute::activation(e, ops, func, reduce, acc(dst.write)),
        (
            Opcode::TensorReduce,
            InstrData::Reduce {
                dst,
                op,
                axes,
                negate,
                ..
            },
        ) => reduce::tensor_reduce(e, ops, op, axes, negate, acc(dst.write)),
        (Opcode::TensorTensorScan, InstrData::Scan { dst, op, rev, .. }) => {
            reduce::scan(e, ops, op, rev, acc(dst.write))
        }
        (Opcode::BnStats, _) => reduce::bn_stats(e, ops),
        (Opcode::BnAggr, _) => reduce::bn_aggr(e, ops),
        (Opcode::Iota, _) => compute::iota(e, ops),
        (Opcode::Select | Opcode::AffineSelect, InstrData::Select { dst, pred, .. }) => {
            let cmp = match pred {
                Pred::Tile(_) => None,
                Pred::Affine { cmp, .. } => Some(cmp),
            };
            compute::select(e, ops, cmp, acc(dst.write))
        }
        // Searches of 8 values per partition: the Vector engine's routines, which read rows by
        // runs (the definition for operands off chip).
        (Opcode::Max8, _) => {
            if !crate::engines::top8::max8(e, ops) {
                reference::Reference.step(e, b, ins, ops, (0, 0), vars);
            }
        }
        (Opcode::FindIndex8, _) => {
            if !crate::engines::top8::nc_find_index8(e, ops) {
                reference::Reference.step(e, b, ins, ops, (0, 0), vars);
            }
        }
        (Opcode::MatchReplace8, InstrData::Match8 { imm: Some(imm), .. }) => {
            if !crate::engines::top8::nc_match_replace8(e, ops, imm) {
                reference::Reference.step(e, b, ins, ops, (0, 0), vars);
            }
        }
        // `select_reduce`: the reference definition is the only one.
        (Opcode::SelectReduce, _) => {
            reference::Reference.step(e, b, ins, ops, (0, 0), vars);
        }
        (Opcode::IndirectLoad | Opcode::IndirectStore | Opcode::AtomicRmw, _) => {
            crate::engines::indirect::run(e, b, ins, ops)
        }
        (Opcode::GatherFlattened | Opcode::NcNGather, _) => crate::engines::gather::run(e, ops),
        (Opcode::TensorCopyDynamicSrc | Opcode::TensorCopyDynamicDst, _) => {
            // The interpreter checked the offset: an offset out of range copies nothing here.
            if let Ok(o) = crate::dyncopy::operands(b.program, ins, ops, vars, e.sbuf.bytes()) {
                match ins.engine {
                    Engine::Scalar => compute::copy_through_f32(e, &o),
                    Engine::Vector
                    | Engine::GpSimd
                    | Engine::Tensor
                    | Engine::Dma
                    | Engine::Sync => vector::copy(e, &o),
                }
            }
        }
        (Opcode::Rand, _) => rng::rand(e, ops, crate::operand::grid_origin(b, ins, vars)),
        (Opcode::RandomSeed, _) => rng::random_seed(e, ops),
        (Opcode::Dropout, _) => rng::dropout(e, ops, crate::operand::grid_origin(b, ins, vars)),
        (Opcode::Rng, _) => rng::rng(
            e,
            ins.engine,
            ops,
            crate::operand::grid_origin(b, ins, vars),
        ),
        (Opcode::Rand2, _) => rng::rand2(e, ops, crate::operand::grid_origin(b, ins, vars)),
        (Opcode::RandGetState, _) => rng::rand_get_state(e, ins.engine, ops),
        (Opcode::RandSetState, _) => rng::rand_set_state(e, ins.engine, ops),
        (Opcode::SetRngSeed, _) => rng::set_rng_seed(e, ops),
        (Opcode::DmaTranspose | Opcode::DmaTransposeSbuf, _) => {
            let rank = crate::operand::grid_rank(b.program, ins);
            crate::engines::dma_transpose::dma_transpose(e, b, rank, ops)
        }
        // `range_select`, `nc_stream_shuffle`, `local_gather`, `sequence_bounds`,
        // `tensor_scalar_cumulative`, `nonzero_with_count`, `exponential`, `activate2`,
        // `dma_compute`, `topk`: the reference definition is the only one.
        (
            Opcode::RangeSelect
            | Opcode::NcStreamShuffle
            | Opcode::QuantizeMx
            | Opcode::MatmulMx
            | Opcode::LocalGather
            | Opcode::SequenceBounds
            | Opcode::TensorScalarCumulative
            | Opcode::NonzeroWithCount
            | Opcode::Exponential
            | Opcode::Activate2
            | Opcode::DmaCompute
            | Opcode::TopK,
            _,
        ) => {
            reference::Reference.step(e, b, ins, ops, (0, 0), vars);
        }
        // The checks match every opcode with its format; loop control never gets here.
        // The interpreter runs register instructions on the instance's registers.
        (Opcode::RegisterMove | Opcode::RegisterLoad | Opcode::RegisterStore, _) => {}
        (
            Opcode::LoopBegin
            | Opcode::LoopEnd
            | Opcode::Matmul
            | Opcode::TensorCopy
            | Opcode::Memset
            | Opcode::Reciprocal
            | Opcode::TensorTensor
            | Opcode::TensorScalar
            | Opcode::ScalarTensorTensor
            | Opcode::TensorScalarReduce
            | Opcode::Activation
            | Opcode::TensorReduce
            | Opcode::TensorTensorScan
            | Opcode::Select
            | Opcode::AffineSelect
            | Opcode::MatchReplace8,
            data,
        ) => unreachable!("opcode {:?} with operands {data:?}", ins.opcode),
    }
}
