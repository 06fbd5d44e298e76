//! The host's shortcuts for plain runs: what a run without an observer does to use the host
//! well, with the results of the serial interpreter bit for bit.
//!
//! - **Two threads** (`spmd`, `loops`): the instances of a grid launch, or else the iterations
//!   of an outermost `affine_range` loop, split between the calling thread and the core's
//!   worker, each half with engines of its own, when the halves' outputs provably do not
//!   overlap (`hull`; `interleaved` when they interleave in disjoint boxes).
//! - **Steps** (`fuse`): data that would only pass through SBUF between two neighbouring
//!   instructions goes straight from one to the other (a load into the matmul after it, a
//!   matmul into the `tensor_copy` of its result, that copy into the store after it).
//! - **Blocks of partitions** (`rows`): neighbouring instructions that compute each partition
//!   on its own run a few partitions at a time, all of them, so that their tiles stay in the
//!   host's cache between them; in such a block, elementwise instructions and loads whose
//!   results only later ones of it read are computed inside those (`exprs`), without their
//!   tiles.
//! - **Strided operands** (`strided`): matmuls that each read every `s`-th column of one SBUF
//!   region, from successive columns, read it de-interleaved in one pass instead of gathering
//!   it element by element (or, with a narrow moving operand, all run as one pass over it).
//! - **Chains** (`chains`): matmuls that accumulate into one PSUM tile one after another run
//!   as one step, their rows split between the threads once for all of them (one pass of the
//!   narrow kernel for narrow moving operands).
//! - **Accumulation groups** (`group_loops`): a loop whose body is one matmul accumulating
//!   into one PSUM tile (after the loads of its operands) runs as one pass of the kernel, its
//!   results kept in registers from the first matmul to the last.
//! - **Tiles loaded once for matmuls** (`input_tiles`): a load outside every loop whose tile
//!   only matmuls read does not run; they read the input where it lies (each thread its own
//!   copy, so chains of them split even while the host's cores are far apart).
//!
//! All of it enters the interpreter through one [`HostPlan`], [`Plain`]: the interpreter names
//! none of it. Strict and observed runs use [`crate::exec::plan::Serial`] and see every
//! instruction as written.

mod chains;
mod exprs;
mod fuse;
mod group_loops;
mod hull;
mod input_tiles;
mod interleaved;
mod loops;
mod readers;
mod rows;
mod spmd;
mod strided;
#[cfg(all(test, target_os = "linux"))]
mod tests;

use nki_lang::{Instr, InstrData, MAX_LOOP_DEPTH, Opcode, VarValues};

use crate::bind::Bound;
use crate::engines::EngineState;
use crate::exec::plan::HostPlan;
use crate::exec::{ExecError, Frame};
use crate::operand::Operands;

pub(crate) use spmd::execute;

/// What a core keeps between plain runs for its shortcuts: the second set of engines (created
/// on first use), the buffer of interleaved outputs (`interleaved`) and the program's facts
/// (`readers::Readers`), all reused from launch to launch.
#[derive(Default)]
pub(crate) struct HostState {
    /// The engines of the worker's half.
    pub second: Option<Box<EngineState>>,
    /// Copies of the parts of outputs the worker's half writes when they interleave with the
    /// calling thread's.
    pub outputs: Vec<u8>,
    /// Which instruction reads each tile of the launch's program.
    pub readers: readers::Readers,
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
            nki_lang::OperandRef::Access(_)
            | nki_lang::OperandRef::Expr(_)
            | nki_lang::OperandRef::Imm(_) => None,
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
            | InstrData::Register { .. } => {
                let m = nest.get(depth).copied().unwrap_or(u64::MAX);
                total = total.saturating_add(work(p, ins).saturating_mul(m));
            }
        }
    }
    total
}

/// The core's second set of engines (created on first use) for work on the worker thread.
pub(crate) struct WorkerState<'s> {
    /// The engines.
    pub engines: &'s mut Option<Box<EngineState>>,
    /// Copies of the parts of outputs the worker's half writes when they interleave with the
    /// calling thread's (`interleaved`), grown on first use.
    pub outputs: &'s mut Vec<u8>,
    /// The core's target, for creating them.
    pub target: nki_lang::Target,
}

/// The plan of a plain run: each instance's outermost loops may split between two threads
/// (with `second`), and neighbouring instructions run as one step where data only passes
/// through SBUF.
pub(crate) struct Plain<'i, 's, 't> {
    /// The second engines, for splitting loops; `None` within a half, which runs serially.
    second: Option<&'s mut WorkerState<'t>>,
    /// Which instruction reads each tile (computed once per launch).
    readers: &'s readers::Readers,
    /// The loads skipped for the matmul ahead.
    pending: fuse::Pending<'i>,
    /// The loads skipped for the matmuls that read their tiles from the inputs.
    inputs: input_tiles::InputTiles,
}

impl<'i, 's, 't> Plain<'i, 's, 't> {
    /// The plan of a run on engines `e`. Packings of input operands kept from an earlier
    /// launch may be of other data by now, unless they are of a device tensor's version: those
    /// of borrowed host memory are dropped here.
    pub(crate) fn new(
        e: &mut EngineState,
        readers: &'s readers::Readers,
        second: Option<&'s mut WorkerState<'t>>,
    ) -> Self {
        for cache in [&mut e.packs, &mut e.packs_worker] {
            cache.0.forget_unversioned();
            cache.1.forget_unversioned();
        }
        Plain {
            second,
            readers,
            pending: [None; 2],
            inputs: input_tiles::InputTiles::default(),
        }
    }
}

impl<'i> HostPlan<'i> for Plain<'i, '_, '_> {
    fn run_loop(
        &mut self,
        e: &mut EngineState,
        b: &mut Bound<'i, '_, '_>,
        f: &Frame,
        range: (usize, usize),
        trip: u64,
    ) -> Result<bool, ExecError> {
        if group_loops::run(e, b, self.readers, &self.inputs, f, range, trip) {
            return Ok(true);
        }
        match self.second.as_deref_mut() {
            Some(second) => loops::run_parallel(e, second, self.readers, b, f, range, trip),
            None => Ok(false),
        }
    }

    fn step(
        &mut self,
        e: &mut EngineState,
        b: &mut Bound<'i, '_, '_>,
        ins: &Instr,
        ops: &Operands,
        at: (usize, usize),
        vars: &VarValues,
    ) -> Option<usize> {
        e.far_split = self.readers.far_split(b.program, ins);
        if self.inputs.skip(b, self.readers, ins, ops, at.0) {
            return Some(0);
        }
        // A matmul that reads skipped tiles from the inputs runs as a chain or through `fuse`.
        let in_place = self.inputs.before(e, b, ins, ops, vars);
        // A group of strided matmuls runs its instructions as written: none may wait for a
        // forwarded load.
        let nothing_pending = self.pending.iter().all(Option::is_none);
        let inputs = &self.inputs;
        let ran = nothing_pending
            .then(|| {
                (!in_place)
                    .then(|| strided::step(e, b, ins, ops, at, vars, inputs))
                    .flatten()
                    .or_else(|| chains::step(e, b, ins, ops, at, vars, inputs))
            })
            .flatten()
            .or_else(|| {
                fuse::step(
                    e,
                    b,
                    self.readers,
                    ins,
                    ops,
                    at,
                    vars,
                    &mut self.pending,
                    inputs,
                )
            })
            .or_else(|| rows::step(e, b, self.readers, ins, ops, at, vars));
        // The instructions run here, or as written: a load among them is not skipped (its
        // tile holds what it loaded).
        self.inputs
            .ran(at.0..=at.0.saturating_add(ran.unwrap_or(0)));
        ran
    }

    fn masked_out(&mut self, pc: usize, ins: &Instr) {
        self.inputs.masked_out(pc);
        if ins.opcode == Opcode::Matmul {
            // Loads forwarded to a matmul are for this execution of it only.
            self.pending = [None; 2];
        }
    }
}
