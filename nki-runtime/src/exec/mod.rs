//! The interpreter: walks a program's instructions with a fixed-size loop stack, resolves each
//! instruction's operands once, shows them to an [`Observer`] and hands them to the engine
//! routine of the instruction's family.
//!
//! Loops: `LoopBegin` evaluates the trip count for the bound symbols and skips the body when
//! it is 0, else pushes the loop; `LoopEnd` advances the induction value and jumps back to the
//! body's first instruction, or pops. The index variables ([`VarValues`]: program ids, then the
//! loops' induction values by depth) feed every operand's affine indices. Nothing is allocated.
//!
//! Host threads: the instances of a grid launch split between the core's two threads
//! (`spmd`); in a launch of one instance, an outermost `affine_range` loop whose iterations
//! share no written tile splits its iterations instead (`loops`). A run with an observer
//! other than the plain one is serial.
//!
//! Steps: a plain run passes data that would only go through SBUF between two neighbouring
//! instructions straight from one to the other (`fuse`: a load into the matmul after it, a
//! matmul into the `tensor_copy` of its result, that copy into the store after it), with the
//! bits of the instructions run one after the other. A run with any other observer shows and
//! runs every instruction as written.

mod fuse;
mod interleaved;
pub(crate) mod loops;
pub(crate) mod spmd;

use core::ops::ControlFlow;

use nki_lang::{
    Alu, Engine, Instr, InstrData, MAX_LOOP_DEPTH, MAX_PIDS, MAX_VARS, Opcode, Pred, VarValues,
    Write,
};
use thiserror::Error;

pub use crate::operand::{Loc, Operands, Pattern, Resolved};

use crate::bind::Bound;
use crate::engines::{Engines, compute, dma, reduce, tensor, vector};

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

    /// Whether the instructions' data paths run. An observer that needs only the operands (a
    /// timing model ranking kernel variants) returns `false`: the run then resolves and shows
    /// every instruction, in the same order with the same loop values, but computes nothing,
    /// and the outputs keep whatever they held.
    #[inline(always)]
    fn computes(&self) -> bool {
        true
    }

    /// Called after instruction `pc` ran.
    #[inline(always)]
    fn after(&mut self, pc: usize, instr: &Instr) {
        let _ = (pc, instr);
    }
}

/// The observer of a plain run: does nothing.
pub(crate) struct Untimed;

impl Observer for Untimed {}

/// Whether an accumulating destination adds to its old value in this execution (an
/// accumulation group overwrites while its loops are in their first iteration).
pub(crate) fn accumulates(write: Write, vars: &VarValues) -> bool {
    match write {
        Write::Overwrite => false,
        Write::Accumulate(_) => true,
        Write::Group { loops, .. } => {
            (0..MAX_LOOP_DEPTH).any(|d| loops >> d & 1 == 1 && vars[MAX_PIDS + d] != 0)
        }
    }
}

/// A measure of an instruction's host work, for deciding whether splitting it (or a loop or
/// grid of it) between two threads pays: a matmul's multiply-adds, else the elements of its
/// widest operand.
pub(crate) fn work(p: &nki_lang::Program<'_>, ins: &Instr) -> u64 {
    let elems = |v: nki_lang::ViewId| {
        p.views().get(v.index()).map_or(0, |view| {
            u64::from(view.shape.partitions()).saturating_mul(view.shape.free_elems())
        })
    };
    if let InstrData::Matmul {
        stationary, moving, ..
    } = ins.data
    {
        // K·M·N: the stationary operand's elements (K·M) times the moving one's free size.
        let k = p
            .views()
            .get(moving.index())
            .map_or(1, |v| u64::from(v.shape.partitions()).max(1));
        return elems(stationary).saturating_mul(elems(moving) / k);
    }
    ins.operands()
        .filter_map(|o| match o.operand {
            nki_lang::OperandRef::View(v) => Some(elems(v)),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The [`work`] of instructions `instrs` of a bound program run once, each instruction counted
/// as many times as the loops it is nested in within `instrs` run (their trip counts at this
/// launch).
pub(crate) fn work_of(b: &Bound<'_, '_, '_>, instrs: core::ops::Range<usize>) -> u64 {
    let p = b.program;
    // Multipliers of the loops opened within `instrs`, innermost last.
    let mut nest = [1u64; MAX_LOOP_DEPTH + 1];
    let mut depth = 0usize;
    let mut total = 0u64;
    for ins in p.instrs().get(instrs).unwrap_or(&[]) {
        match ins.data {
            InstrData::LoopBegin { trip, .. } => {
                let outer = nest.get(depth).copied().unwrap_or(u64::MAX);
                depth = depth.saturating_add(1);
                if let Some(m) = nest.get_mut(depth) {
                    *m = outer.saturating_mul(trip.eval(&b.syms));
                }
            }
            InstrData::LoopEnd { .. } => depth = depth.saturating_sub(1),
            _ => {
                let m = nest.get(depth).copied().unwrap_or(u64::MAX);
                total = total.saturating_add(work(p, ins).saturating_mul(m));
            }
        }
    }
    total
}

/// The core's second set of engines (created on first use) for work on the worker thread.
pub(crate) struct Second<'s> {
    /// The engines.
    pub engines: &'s mut Option<Box<Engines>>,
    /// Copies of the parts of outputs the worker's half writes when they interleave with the
    /// calling thread's (`interleaved`), grown on first use.
    pub outputs: &'s mut Vec<u8>,
    /// The core's target, for creating them.
    pub target: nki_lang::Target,
}

/// How a run shows its instructions to its observer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Every instruction, one at a time (an observed run: timing, strictness, profiles).
    Each,
    /// A plain run (the [`Untimed`] observer): neighbouring instructions that only pass data
    /// through SBUF may run as one step ([`fuse`]).
    Fused,
}

/// Runs every instance of a bound program's grid in row-major order, each to completion, or
/// until the observer stops one.
pub(crate) fn run<O: Observer>(
    e: &mut Engines,
    b: &mut Bound<'_, '_, '_>,
    obs: &mut O,
    shown: Shown,
    second: Option<&mut Second<'_>>,
) -> Result<(), ExecError> {
    run_instances(e, b, obs, shown, 0..b.grid.count().unwrap_or(0), second)
}

/// Runs instances `range` (row-major indices) of the bound program's grid, in order. With
/// `second`, an instance's outermost `affine_range` loops may run on two threads
/// ([`loops`]).
pub(crate) fn run_instances<O: Observer>(
    e: &mut Engines,
    b: &mut Bound<'_, '_, '_>,
    obs: &mut O,
    shown: Shown,
    range: core::ops::Range<usize>,
    mut second: Option<&mut Second<'_>>,
) -> Result<(), ExecError> {
    let end = b.program.instrs().len();
    for i in range {
        let mut f = Frame::new(b.grid.coords(i));
        interpret(e, b, obs, shown, &mut f, (0, end), second.as_deref_mut())?;
    }
    Ok(())
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
        }
    }
}

/// Runs instructions `start..stop` from state `f`: a whole instance (`0..len`), or, for half of
/// a loop's iterations, its body and `LoopEnd` with the loop already open in `f`.
pub(crate) fn interpret<'i, O: Observer>(
    e: &mut Engines,
    b: &mut Bound<'i, '_, '_>,
    obs: &mut O,
    shown: Shown,
    f: &mut Frame,
    (start, stop): (usize, usize),
    mut second: Option<&mut Second<'_>>,
) -> Result<(), ExecError> {
    let p = b.program;
    let instrs = p.instrs();
    let syms = b.syms;
    let mut pc = start;
    let sbuf_stride = e.sbuf.partition_stride();
    let mut pending: fuse::Pending<'i> = [None; 2];
    // Packings of input operands from an earlier launch may be of other data by now, unless
    // they are of a device tensor's version.
    for cache in [&mut e.packs, &mut e.packs_worker] {
        cache.0.forget_unversioned();
        cache.1.forget_unversioned();
    }
    while pc < stop {
        let Some(ins) = instrs.get(pc) else { break };
        match ins.data {
            InstrData::LoopBegin { trip, end, .. } => {
                let t = trip.eval(&syms);
                let n = i64::try_from(t).unwrap_or(i64::MAX);
                if n <= 0 {
                    pc = end as usize + 1;
                    continue;
                }
                if let Some(s) = second.as_deref_mut()
                    && loops::run_parallel(e, s, b, f, (pc, end as usize), t)?
                {
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
                if f.vars[MAX_PIDS + d] < f.trips[d] {
                    pc = begin as usize + 1;
                    continue;
                }
                f.vars[MAX_PIDS + d] = 0;
                f.depth = d;
            }
            _ => {
                let vars = &f.vars;
                if let Some(ops) = crate::operand::resolve(b, ins, vars, sbuf_stride) {
                    if let ControlFlow::Break(what) = obs.before(pc, ins, &ops, vars) {
                        return Err(ExecError {
                            kernel: p.name().to_string(),
                            instr: pc,
                            mnemonic: ins.mnemonic(),
                            line: ins.line,
                            what,
                        });
                    }
                    let stepped = match shown {
                        Shown::Fused if obs.computes() => {
                            fuse::step(e, b, ins, &ops, (pc, stop), vars, &mut pending)
                        }
                        _ => None,
                    };
                    if let Some(more) = stepped {
                        obs.after(pc, ins);
                        pc += 1 + more;
                        continue;
                    }
                    if obs.computes() {
                        execute(e, b, ins, &ops, vars);
                    }
                    obs.after(pc, ins);
                } else if ins.opcode == Opcode::Matmul {
                    // Loads forwarded to a matmul are for this execution of it only.
                    pending = [None; 2];
                }
            }
        }
        pc += 1;
    }
    Ok(())
}

/// Runs one instruction's engine routine on its resolved operands: one arm per opcode, each
/// calling its family's routine with the instruction's function codes.
fn execute(
    e: &mut Engines,
    b: &mut Bound<'_, '_, '_>,
    ins: &Instr,
    ops: &Operands,
    vars: &VarValues,
) {
    let acc = |w: Write| match w {
        Write::Overwrite => None,
        Write::Accumulate(op) => Some(op),
        Write::Group { op, .. } => accumulates(w, vars).then_some(op),
    };
    match (ins.opcode, ins.data) {
        (Opcode::Load, _) => dma::load(e, b, ops),
        (Opcode::Store, _) => dma::store(e, b, ops),
        (Opcode::LoadTranspose2d, _) => dma::load_transpose2d(e, b, ops),
        (Opcode::Matmul, InstrData::Matmul { dst, .. }) => {
            tensor::matmul(e, ops, accumulates(dst.write, vars), None, [None; 2])
        }
        (Opcode::Transpose, _) => tensor::transpose(e, ops),
        (Opcode::TensorCopy, InstrData::Unary { dst, .. }) => match (ins.engine, acc(dst.write)) {
            // An accumulating copy is the ALU chain `bypass`, combined into the destination.
            (engine, a @ Some(_)) => {
                compute::alu_chain(e, ops, engine, [Alu::Bypass; 2], 0, None, a)
            }
            (Engine::Scalar, None) => compute::copy_through_f32(e, ops),
            _ => vector::copy(e, ops),
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
        (Opcode::TensorTensorScan, InstrData::Scan { dst, op, .. }) => {
            reduce::scan(e, ops, op, acc(dst.write))
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
        // The checks match every opcode with its format; loop control never gets here.
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
            | Opcode::AffineSelect,
            data,
        ) => unreachable!("opcode {:?} with operands {data:?}", ins.opcode),
    }
}
