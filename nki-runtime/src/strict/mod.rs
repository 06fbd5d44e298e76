//! Strict execution: a launch whose result depends on what hardware does not promise (memory
//! it never wrote, the order of an `affine_range` loop's iterations or of SPMD instances) is
//! an error instead of a result that hardware would not reproduce.
//!
//! SBUF and PSUM keep their contents between launches, and an output tensor holds whatever the
//! caller put in it; on a NeuronCore those bytes are whatever the previous kernel left. A
//! kernel that reads them computes, in a permissive simulator, the intended answer by accident
//! (a zeroed buffer) and garbage on the device. Likewise the iterations of an `affine_range`
//! loop may run in any order and overlap, and the instances of an SPMD grid run on separate
//! cores: a kernel whose iterations or instances depend on each other computes, serially, an
//! answer the device does not.
//!
//! [`Strict`] keeps a shadow of SBUF and PSUM with, per byte, the tile that last wrote it, the
//! iteration that wrote it (every loop's, see the `iterations` module) and whether it
//! accumulated; and per output element, the instance and iteration that wrote it. Each
//! instruction's operands are checked against it before the instruction runs. The launch stops
//! with [`crate::ExecError`] (the instruction, its kernel source line, the tile or tensor, the
//! element, the loop values) when an instruction:
//! - stores a value that depends on bytes no instruction of this launch wrote (a tile declared
//!   inside a loop is a new tile in each iteration, so what the previous iteration left in it
//!   counts). Every instruction that writes on chip may read such bytes: the elements it
//!   computes from them are *undefined*, by its opcode's dependency rule in the op table
//!   ([`nki_lang::Deps`], evaluated in the `defined` module), and so is what is computed from
//!   those; the error comes where an undefined element is stored, naming it and the
//!   instruction that first read unwritten bytes;
//! - reads, in one iteration of an `affine_range` loop, what another iteration wrote to a tile
//!   declared outside the loop, or to an output;
//! - overwrites, in one iteration, what another iteration wrote to such a tile (a tile reused
//!   across iterations, aws-neuron-sdk#1045) or to an output;
//!
//! except NKI's accumulation idiom: `+=` (and an accumulation group's matmuls) into a tile
//! declared outside the loop may run in every iteration; the sum is read after the loop.
//! `sequential_range` orders its iterations, so they may depend on each other. After the last
//! instruction, every output element must have been written ([`StrictError::Unwritten`]).
//!
//! Each SPMD instance starts with nothing written on chip, and an instance that reads or
//! writes an output element another instance wrote is an error naming both instances' program
//! ids.
//!
//! [`ScheduleCheck`] adds, as an option ([`crate::NeuronCore::with_schedule_check`]), runs of the
//! launch in other orders its dependencies allow, which must compute the same bits.
//!
//! Run a launch strictly with [`crate::NeuronCore::execute_strict`]. It is an observer, so
//! the launch runs on one thread, and each operand's elements are visited once more to check
//! or mark them: a debugging mode, many times slower than a plain launch.

mod defined;
mod indirect;
mod iterations;
pub(crate) mod schedule;
mod shadow;

pub use schedule::{Executed, Reordering, ScheduleCheck, ScheduleError};

use core::fmt;
use core::ops::ControlFlow;

use nki_lang::{
    Instr, InstrData, LoopKind, MAX_PIDS, MAX_TILE_RANK, OperandRef, Program, VarValues, Write,
    target::PARTITIONS,
};
use thiserror::Error;

use crate::exec::{Observer, OnChip};
use crate::operand::{Loc, Operands, Resolved};
use iterations::{Iterations, NodeId, Relation};
use shadow::{Shadow, Stamp};

/// A launch that left part of an output unwritten.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StrictError {
    /// Output `output` has `count` elements no instruction wrote, the first at row-major
    /// index `first`.
    #[error(
        "kernel `{kernel}` left {count} element{} of output `{output}` unwritten (the first at row-major index {first}); if it writes part of this output by design, allow that with `NeuronCore::with_unwritten_outputs(true)`",
        if *count == 1 { "" } else { "s" }
    )]
    Unwritten {
        /// The kernel's name.
        kernel: String,
        /// The output's name.
        output: String,
        /// The first unwritten element.
        first: usize,
        /// How many elements are unwritten.
        count: usize,
    },
}

/// [`Owner::instance`] of a constant's elements: written before the launch.
const CONSTANT: u32 = u32::MAX;

/// Who wrote an output element last.
#[derive(Copy, Clone, Debug, Default)]
struct Owner {
    /// 1 + the ordinal of the SPMD instance; 0 while unwritten.
    instance: u32,
    /// The iteration the write ran in (within that instance).
    node: NodeId,
}

/// How an operand uses its tile.
#[derive(Copy, Clone, Debug)]
struct Access {
    /// The tile (`u16::MAX` when the operand names none).
    tile: u16,
    /// The `LoopBegin` of the loop declaring the tile (`None`: the top level).
    scope: Option<u32>,
    /// Whether it reads (else it only writes).
    reads: bool,
    /// Whether it accumulates into the tile (`+=`, an accumulation group).
    accumulates: bool,
}

/// What an access may not do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Fault {
    /// Read bytes no instruction of this instance wrote (to this tile, in this iteration of
    /// the loops that declare it).
    Unwritten,
    /// Touched what another iteration of an `affine_range` loop wrote.
    Race {
        /// The loop's `LoopBegin`.
        begin: u32,
        /// The iteration that wrote.
        wrote: i64,
        /// The iteration that accesses.
        now: i64,
        /// Whether that write accumulated.
        accumulated: bool,
    },
    /// Touched an output element another SPMD instance wrote (its 1-based ordinal).
    Instance(u32),
    /// Read, inside an `affine_range` loop, a sum accumulated over its iterations.
    PartialSum {
        /// The loop's `LoopBegin`.
        begin: u32,
        /// The iteration that reads.
        now: i64,
    },
    /// Read a value that instruction `origin − 1` computed from bytes no instruction wrote.
    Undefined {
        /// 1 + the instruction.
        origin: u32,
    },
}

/// The strictness observer of one launch (see the [module documentation](self)).
#[derive(Clone, Debug)]
pub struct Strict<'p> {
    program: &'p Program<'p>,
    sbuf: Shadow,
    /// Bytes from one SBUF partition to the next.
    sbuf_stride: usize,
    psum: Shadow,
    /// Per output tensor (by output index), per element.
    outputs: Vec<Vec<Owner>>,
    /// The program ids of the instances seen so far, by ordinal (the last is running).
    instances: Vec<[i64; MAX_PIDS]>,
    iterations: Iterations,
    /// The iteration the running instruction belongs to.
    now: NodeId,
    /// The writes of the instruction that runs, marked after it ran: the operand, its tile,
    /// whether it accumulates, and the iteration of the outermost loop its sum runs over.
    pending: Vec<(Resolved, u16, bool, Option<NodeId>)>,
    /// For each on-chip operand the running instruction writes (by slot), the elements it
    /// computes from bytes no instruction wrote, by byte offset: 1 + the instruction that first
    /// read such bytes. Empty when all are defined.
    undefined: defined::Undefined,
    /// Elements of the running instruction's operands before the ones being checked: an
    /// indirect DMA is checked one partition at a time, and a fault names its element in the
    /// whole operand.
    row_offset: usize,
}

impl<'p> Strict<'p> {
    /// A shadow of nothing written, for a launch of `program` on a core with
    /// SBUF partitions `sbuf_stride` bytes apart and outputs of `output_bytes` bytes, followed
    /// by the bytes of the scratch and constant tensors the launch allocates
    /// ([`Program::allocated`], at the launch's sizes): a tensor given no size here is not
    /// tracked, and a value loaded from it counts as unwritten. [`crate::NeuronCore::execute_strict`]
    /// passes them all.
    pub fn new(program: &'p Program<'p>, sbuf_stride: usize, output_bytes: &[usize]) -> Self {
        Strict {
            program,
            sbuf: Shadow::new(PARTITIONS as usize * sbuf_stride),
            sbuf_stride,
            psum: Shadow::new(PARTITIONS as usize * crate::memory::Psum::PARTITION_STRIDE),
            outputs: output_bytes
                .iter()
                .zip(program.owned())
                .map(|(&n, d)| {
                    // A constant is written before the launch.
                    let owner = match d.role {
                        nki_lang::TensorRole::Constant => Owner {
                            instance: CONSTANT,
                            node: 0,
                        },
                        nki_lang::TensorRole::Input
                        | nki_lang::TensorRole::Output
                        | nki_lang::TensorRole::Scratch
                        | nki_lang::TensorRole::Private => Owner::default(),
                    };
                    vec![owner; n / d.dtype.size() as usize]
                })
                .collect(),
            instances: Vec::new(),
            iterations: Iterations::new(program),
            now: 0,
            pending: Vec::new(),
            undefined: Vec::new(),
            row_offset: 0,
        }
    }

    /// Notes the instance with program ids `pids` as running: a new instance starts with
    /// nothing written on chip (on hardware each runs on its own core, or after the previous
    /// one's tiles are gone). Returns its 1-based ordinal.
    fn enter(&mut self, pids: [i64; MAX_PIDS]) -> u32 {
        if self.instances.last() != Some(&pids) {
            self.instances.push(pids);
            self.sbuf.clear();
            self.psum.clear();
            self.iterations.reset();
        }
        u32::try_from(self.instances.len()).unwrap_or(u32::MAX)
    }

    /// The tile operand `slot` of `instr` goes through, and the loop that declares it.
    /// Also whether the operand is the destination's view (an accumulation's read of it).
    fn tile_of(&self, instr: &Instr, slot: u8) -> (u16, Option<u32>, bool) {
        let p = self.program;
        let id = instr.operands().into_iter().find_map(|o| match o.operand {
            OperandRef::View(v) if o.slot == slot => Some(v),
            OperandRef::View(_)
            | OperandRef::Access(_)
            | OperandRef::Expr(_)
            | OperandRef::Imm(_) => None,
        });
        let on_dst = id.is_some() && id == instr.data.dst().map(|d| d.view);
        id.and_then(|v| p.views().get(v.index()))
            .and_then(|v| Some((v.tile, p.tiles().get(usize::from(v.tile))?.scope, on_dst)))
            .unwrap_or((u16::MAX, None, false))
    }

    /// The loop whose `LoopBegin` is `begin`: its kind, variable name, end and source line.
    fn loop_at(&self, begin: u32) -> Option<(LoopKind, &'p str, u32, u32)> {
        let p = self.program;
        let ins = p.instrs().get(begin as usize)?;
        match ins.data {
            InstrData::LoopBegin { kind, var, end, .. } => {
                let name = p.loop_vars().get(usize::from(var)).copied().unwrap_or("_");
                Some((kind, name, end, ins.line))
            }
            InstrData::LoopEnd { .. }
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
            | InstrData::Register { .. } => None,
        }
    }

    /// What an access to a tile may not do, given the stamp of a byte it touches.
    fn judge(&self, stamp: Stamp, a: Access) -> Option<Fault> {
        let fresh = a.reads.then_some(Fault::Unwritten);
        if !stamp.written() || stamp.tile != a.tile {
            return fresh;
        }
        if a.reads
            && !a.accumulates
            && stamp.spans
            && self.iterations.encloses(stamp.node, self.now)
        {
            let (begin, now) = self.iterations.iteration(stamp.node);
            if let Some((LoopKind::Affine, ..)) = self.loop_at(begin) {
                return Some(Fault::PartialSum { begin, now });
            }
        }
        if let Relation::OtherIteration { begin, wrote, now } =
            self.iterations.relation(stamp.node, self.now)
            && let Some((kind, _, end, _)) = self.loop_at(begin)
        {
            // The loop declares the tile: each iteration has its own.
            if a.scope.is_some_and(|s| begin <= s && s < end) {
                return fresh;
            }
            if kind == LoopKind::Affine && !(a.accumulates && stamp.accumulated) {
                return Some(Fault::Race {
                    begin,
                    wrote,
                    now,
                    accumulated: stamp.accumulated,
                });
            }
        }
        (a.reads && stamp.undefined != 0).then_some(Fault::Undefined {
            origin: stamp.undefined,
        })
    }

    /// Whether the element of HBM tensor `t` that `owner` wrote holds, for the running
    /// instruction, what this launch wrote: a constant's always; a `private_hbm` tensor's only
    /// if this instance wrote it, in this iteration of the loops that declare the tensor (each
    /// instance and iteration has a tensor of its own); any other's if anything wrote it.
    fn written_here(&self, t: usize, owner: Owner) -> bool {
        if owner.instance == CONSTANT {
            return true;
        }
        if owner.instance == 0 {
            return false;
        }
        let Some(decl) = self.program.tensors().get(t) else {
            return true;
        };
        if decl.role != nki_lang::TensorRole::Private {
            return true;
        }
        if usize::try_from(owner.instance).ok() != Some(self.instances.len()) {
            return false;
        }
        let Some(scope) = decl.scope else {
            return true;
        };
        match self.iterations.relation(owner.node, self.now) {
            Relation::OtherIteration { begin, .. } => self
                .loop_at(begin)
                .is_none_or(|(_, _, end, _)| !(begin <= scope && scope < end)),
            _ => true,
        }
    }

    /// What an access to element `owner` of output (or scratch, or constant) `t` may not do,
    /// given who wrote it.
    fn judge_output(&self, t: usize, owner: Owner, me: u32, reads: bool) -> Option<Fault> {
        if !self.written_here(t, owner) {
            return reads.then_some(Fault::Unwritten);
        }
        if owner.instance == CONSTANT {
            return None;
        }
        if owner.instance != me {
            return Some(Fault::Instance(owner.instance));
        }
        let Relation::OtherIteration { begin, wrote, now } =
            self.iterations.relation(owner.node, self.now)
        else {
            return None;
        };
        match self.loop_at(begin)? {
            // Device loops run their iterations in order, as `sequential_range`.
            (LoopKind::Sequential | LoopKind::Dynamic { .. } | LoopKind::While { .. }, ..) => None,
            (LoopKind::Affine, ..) => Some(Fault::Race {
                begin,
                wrote,
                now,
                accumulated: false,
            }),
        }
    }

    /// Byte offsets of every element of `r`, in row-major order of its grid, until `f` returns
    /// `false`: then the element's index in that order.
    fn each_element(r: &Resolved, mut f: impl FnMut(usize) -> bool) -> Option<usize> {
        let size = r.dtype.size() as isize;
        let mut n = 0usize;
        let mut stopped = None;
        Strict::each_run(r, |start, inner, step| {
            for k in 0..inner {
                let elem = start + k as isize * step;
                let at = usize::try_from(elem * size).unwrap_or(usize::MAX);
                if !f(at) {
                    stopped = Some(n + k);
                    return false;
                }
            }
            n += inner;
            true
        });
        stopped
    }

    /// The runs of `r`'s elements along its innermost dimension of size above 1, in row-major
    /// order of its grid: each run's first element offset (in elements), its length and its
    /// element step, until `f` returns `false`. (Trailing dimensions of size 1, a tile of fewer
    /// than five dimensions, do not cut the runs.)
    fn each_run(r: &Resolved, mut f: impl FnMut(isize, usize, isize) -> bool) {
        let d = r.dims;
        let s = r.pattern.strides;
        if d.contains(&0) {
            return;
        }
        let last = (0..MAX_TILE_RANK).rev().find(|&j| d[j] != 1).unwrap_or(0);
        let (inner, step) = (d[last], s[last]);
        let mut idx = [0usize; MAX_TILE_RANK];
        loop {
            // The offset of this run's first element; the innermost dimension is a run.
            let start = r.pattern.base
                + idx[..last]
                    .iter()
                    .zip(&s[..last])
                    .map(|(&i, &st)| i as isize * st)
                    .sum::<isize>();
            if !f(start, inner, step) {
                return;
            }
            // Advance the outer dimensions like an odometer.
            let mut j = last;
            loop {
                if j == 0 {
                    return;
                }
                j -= 1;
                idx[j] += 1;
                if idx[j] < d[j] {
                    break;
                }
                idx[j] = 0;
            }
        }
    }

    /// The first fault of an on-chip operand: the element (in the operand's order), its byte
    /// in the memory, and the fault. With `undefined` (an instruction that writes on chip), a
    /// read of unwritten or undefined bytes is no fault: it sets the flag, and
    /// [`Strict::undefined_elements`] then finds the elements of the results they feed.
    fn check_on_chip(
        &self,
        r: &Resolved,
        a: Access,
        mut undefined: Option<&mut bool>,
    ) -> Option<(usize, usize, Fault)> {
        let map = if r.loc == Loc::Psum {
            &self.psum
        } else {
            &self.sbuf
        };
        let size = r.dtype.size() as usize;
        // Consecutive bytes mostly carry one stamp: judge each stamp once.
        let mut last: Option<(Stamp, Option<Fault>)> = None;
        let mut found = None;
        // Byte `b` of element `k` (in the operand's order) carries `stamp`: `false` at a fault.
        let mut visit = |b: usize, stamp: Stamp, k: usize| -> bool {
            let fault = match last {
                Some((s, f)) if s == stamp => f,
                _ => {
                    let f = self.judge(stamp, a);
                    last = Some((stamp, f));
                    f
                }
            };
            match (fault, undefined.as_deref_mut()) {
                (None, _) => true,
                (Some(Fault::Unwritten | Fault::Undefined { .. }), Some(flag)) => {
                    *flag = true;
                    true
                }
                (Some(f), _) => {
                    found = Some((k, b, f));
                    false
                }
            }
        };
        let mut n = 0usize;
        Strict::each_run(r, |start, inner, step| {
            let byte = |e: isize| usize::try_from(e * size as isize).unwrap_or(usize::MAX);
            let go = if step == 1 {
                // Adjacent elements: their bytes' stamps a page's slice at a time.
                let at = byte(start);
                map.each_slice(at, inner.saturating_mul(size), |b0, stamps| {
                    let mut i = 0;
                    while let Some(&stamp) = stamps.get(i) {
                        let b = b0 + i;
                        if !visit(b, stamp, n + (b - at) / size.max(1)) {
                            return false;
                        }
                        // The bytes after it with the same stamp are judged the same, and
                        // that judgement did not stop the walk.
                        let same = stamps[i + 1..].iter().take_while(|&&s| s == stamp).count();
                        i += 1 + same;
                    }
                    true
                })
            } else {
                (0..inner).all(|k| {
                    let at = byte(start + k as isize * step);
                    (at..at.saturating_add(size)).all(|b| visit(b, map.get(b), n + k))
                })
            };
            n += inner;
            go
        });
        found
    }

    /// The first fault of an output operand: the element (in the operand's order), its
    /// row-major index in the tensor, and the fault. With `undefined` (an instruction that
    /// writes on chip), a read of unwritten elements is no fault: it sets the flag.
    fn check_output(
        &self,
        r: &Resolved,
        me: u32,
        mut undefined: Option<&mut bool>,
    ) -> Option<(usize, usize, Fault)> {
        let Loc::Hbm(t) = r.loc else { return None };
        let out = usize::from(t).checked_sub(self.program.input_count())?;
        let owners = self.outputs.get(out)?;
        let size = (r.dtype.size() as usize).max(1);
        let mut found = None;
        let n = Strict::each_element(r, |at| {
            let e = at / size;
            let owner = owners.get(e).copied().unwrap_or_default();
            match (
                self.judge_output(usize::from(t), owner, me, r.dir.reads()),
                undefined.as_deref_mut(),
            ) {
                (None, _) => true,
                (Some(Fault::Unwritten), Some(flag)) => {
                    *flag = true;
                    true
                }
                (Some(f), _) => {
                    found = Some((e, f));
                    false
                }
            }
        })?;
        found.map(|(e, f)| (n, e, f))
    }

    /// Where element `n` of a store's source goes: `, stored as element E of output `out``
    /// (its row-major index in the tensor); empty for an instruction that stores nothing.
    fn stored_to(&self, instr: &Instr, operands: &Operands, n: usize) -> String {
        let Some(w) = operands
            .iter()
            .find(|r| r.dir.writes() && matches!(r.loc, Loc::Hbm(_)))
        else {
            return String::new();
        };
        let size = (w.dtype.size() as usize).max(1);
        let mut k = 0usize;
        let mut found = None;
        Strict::each_element(w, |at| {
            if k == n {
                found = Some(at / size);
                return false;
            }
            k = k.saturating_add(1);
            true
        });
        found.map_or(String::new(), |e| {
            format!(
                ", stored as element {e} of {}",
                self.describe(instr, w.slot, w)
            )
        })
    }

    /// The name of what operand `slot` of `instr` reads or writes.
    fn describe(&self, instr: &Instr, slot: u8, r: &Resolved) -> String {
        let p = self.program;
        let named = instr.operands().into_iter().find(|o| o.slot == slot);
        match (named.map(|o| o.operand), r.loc) {
            (Some(OperandRef::View(v)), _) => {
                let tile = p
                    .views()
                    .get(v.index())
                    .and_then(|v| p.tiles().get(usize::from(v.tile)));
                tile.map_or("a tile".to_string(), |t| format!("tile `{}`", t.name))
            }
            (_, Loc::Hbm(t)) => {
                p.tensors()
                    .get(usize::from(t))
                    .map_or("an output".to_string(), |t| match t.role {
                        nki_lang::TensorRole::Scratch => format!("shared_hbm scratch `{}`", t.name),
                        nki_lang::TensorRole::Private => format!("private_hbm tensor `{}`", t.name),
                        nki_lang::TensorRole::Constant => format!("constant `{}`", t.name),
                        nki_lang::TensorRole::Input | nki_lang::TensorRole::Output => {
                            format!("output `{}`", t.name)
                        }
                    })
            }
            _ => "an operand".to_string(),
        }
    }

    /// The message of a fault of operand `r` of `instr`, at element `n` of the operand
    /// (`place`: where that element is; `to`: where a store puts it, see [`Strict::stored_to`]).
    fn message(
        &self,
        instr: &Instr,
        r: &Resolved,
        (n, place, to): (usize, String, String),
        a: Access,
        fault: Fault,
        vars: &VarValues,
    ) -> String {
        let what = self.describe(instr, r.slot, r);
        let at = LoopValues(vars);
        match fault {
            Fault::Unwritten => format!(
                "reads {what} where no instruction of this launch wrote: element {n} of the operand ({place}{to}), {at}"
            ),
            Fault::Instance(o) => {
                let other = self
                    .instances
                    .get(o as usize - 1)
                    .copied()
                    .unwrap_or_default();
                let verb = if r.dir.writes() { "writes" } else { "reads" };
                format!(
                    "{verb} {place} of {what}, which the instance with program ids {other:?} wrote: SPMD instances must not share output elements ({at})"
                )
            }
            Fault::PartialSum { begin, now } => {
                let (_, var, _, line) =
                    self.loop_at(begin).unwrap_or((LoopKind::Affine, "_", 0, 0));
                format!(
                    "reads the partial sum in {what} ({place}, element {n} of the operand) in iteration {var} = {now} of the affine_range loop on line {line}, whose iterations accumulate into it: they may run in any order or overlap, and the sum is complete only after the loop; {at}"
                )
            }
            Fault::Undefined { origin } => {
                let (k, source) = self.instruction(origin);
                format!(
                    "reads {what} ({place}, element {n} of the operand{to}), which instruction {k} ({source}) computed from bytes no instruction of this launch wrote: mask that instruction to the rows that hold data, or write them first; {at}"
                )
            }
            Fault::Race {
                begin,
                wrote,
                now,
                accumulated,
            } => {
                let (_, var, _, line) =
                    self.loop_at(begin).unwrap_or((LoopKind::Affine, "_", 0, 0));
                let (verb, why) = match (a.reads, a.accumulates, accumulated) {
                    (_, true, _) => (
                        "accumulates into",
                        "an accumulation may only add to a sum that every iteration accumulates into",
                    ),
                    (true, false, true) => (
                        "reads the partial sum in",
                        "a sum accumulated across the iterations is complete only after the loop",
                    ),
                    (true, false, false) => (
                        "reads",
                        "one iteration must not read what another writes (accumulate with `+=`, or use `sequential_range`)",
                    ),
                    (false, false, _) if matches!(r.loc, Loc::Hbm(_)) => (
                        "writes",
                        "two iterations must not write the same output element",
                    ),
                    (false, false, _) => (
                        "overwrites",
                        "a tile declared outside the loop is one tile shared by its iterations (declare it inside the loop; aws-neuron-sdk#1045)",
                    ),
                };
                format!(
                    "{verb} {what} ({place}, element {n} of the operand) that iteration {var} = {wrote} wrote, in iteration {var} = {now} of the affine_range loop on line {line}: its iterations may run in any order or overlap, and {why}; {at}"
                )
            }
        }
    }

    /// The iteration of the outermost loop an accumulation (written `write`, into a tile
    /// declared in `scope`) sums over: an accumulation group's outermost loop, or for `+=` the
    /// outermost loop between the tile's declaration and the instruction.
    fn span(&self, write: Option<Write>, scope: Option<u32>) -> Option<NodeId> {
        let depth = match write? {
            Write::Overwrite => return None,
            Write::Group { loops, .. } => (loops != 0).then(|| loops.trailing_zeros() as usize)?,
            Write::Accumulate(_) => scope.map_or(0, |b| self.iterations.body_depth(b)),
        };
        self.iterations.current_at(depth + 1)
    }

    /// Instruction `origin − 1` by its index and as `mnemonic, line L`.
    fn instruction(&self, origin: u32) -> (usize, String) {
        let k = (origin as usize).saturating_sub(1);
        let source = self.program.instrs().get(k).map_or(String::new(), |i| {
            format!("{}, line {}", i.mnemonic(), i.line)
        });
        (k, source)
    }

    /// The elements of every output no instruction wrote: an error for the first output with
    /// any.
    pub fn finish(&self) -> Result<(), StrictError> {
        let outputs = self.program.outputs();
        for (owners, decl) in self.outputs.iter().zip(outputs) {
            let unwritten = |o: &Owner| o.instance == 0;
            if let Some(first) = owners.iter().position(unwritten) {
                return Err(StrictError::Unwritten {
                    kernel: self.program.name().to_string(),
                    output: decl.name.to_string(),
                    first,
                    count: owners.iter().filter(|o| unwritten(o)).count(),
                });
            }
        }
        Ok(())
    }
}

/// The program ids and the open loops' values by depth, as `program ids (0, 1, 0), loop
/// values [3, 0]` (trailing zero values left out).
struct LoopValues<'a>(&'a VarValues);

impl fmt::Display for LoopValues<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (pids, loops) = self.0.split_at(MAX_PIDS);
        let used = loops.iter().rposition(|&v| v != 0).map_or(0, |i| i + 1);
        write!(
            f,
            "program ids {pids:?}, loop values by depth {:?}",
            &loops[..used]
        )
    }
}

impl Observer for Strict<'_> {
    /// Without the memories, a `select` element counts both sides (see `Strict::check`).
    fn before(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
    ) -> ControlFlow<String> {
        self.check(pc, instr, operands, vars, None)
    }

    fn before_on(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
        memory: OnChip<'_>,
    ) -> ControlFlow<String> {
        self.check(pc, instr, operands, vars, Some(memory))
    }

    fn after(&mut self, _pc: usize, _instr: &Instr) {
        self.mark_written();
    }
}

impl Strict<'_> {
    /// Checks instruction `pc`'s operands before it runs (see the module documentation), and
    /// finds the undefined elements it computes. `memory`: SBUF and PSUM as it is about to
    /// run, from which a `select` element whose predicate is defined takes the side the
    /// predicate's value picks; without them, it depends on both sides.
    fn check(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
        memory: Option<OnChip<'_>>,
    ) -> ControlFlow<String> {
        self.pending.clear();
        let mut pids = [0i64; MAX_PIDS];
        pids.copy_from_slice(&vars[..MAX_PIDS]);
        let me = self.enter(pids);
        let Some(now) = self.iterations.enter(pc, vars) else {
            return ControlFlow::Break(
                "runs more loop iterations than strict mode can follow (2^32 per instance)"
                    .to_string(),
            );
        };
        self.now = now;
        // A destination that partly overlaps a source: which source values the engines read
        // before they overwrite them depends on their pipeline.
        if let Some((w, r)) =
            crate::exec::overlap::overlapping_slots(instr, operands, self.sbuf_stride)
        {
            let slot_name = |s: u8| {
                (instr.opcode.info().operands)
                    .get(usize::from(s))
                    .map_or("an operand", |o| o.name)
            };
            let dst = operands.get(usize::from(w));
            return ControlFlow::Break(format!(
                "writes {} (operand `{}`) over elements it also reads as other elements of \
                 its operand `{}`: the destination partly overlaps a source, and the engines \
                 stream their operands, so which source values they read before overwriting \
                 them depends on their pipeline, which NKI does not define (plain launches \
                 read every source element first); write the result to a tile of its own \
                 ({})",
                self.describe(instr, w, dst),
                slot_name(w),
                slot_name(r),
                LoopValues(vars)
            ));
        }
        let dst_write = instr.data.accumulation();
        self.undefined.clear();
        if matches!(instr.data, InstrData::Indirect { .. }) {
            return self.check_indirect(pc, instr, operands, vars, memory, me);
        }
        if matches!(instr.data, InstrData::DynCopy { .. }) {
            return self.check_dynamic_copy(pc, instr, operands, vars, memory, me);
        }
        self.check_operands(pc, instr, operands, vars, memory, me, dst_write)
    }

    /// The checks of [`Strict::check`] on `operands` (all of an instruction's, or one row of
    /// an indirect DMA's): each read and write judged against the shadow, the writes queued
    /// for [`Strict::mark_written`], and the undefined elements they compute added to
    /// [`Strict::undefined`].
    #[allow(clippy::too_many_arguments)]
    fn check_operands(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
        memory: Option<OnChip<'_>>,
        me: u32,
        dst_write: Option<Write>,
    ) -> ControlFlow<String> {
        let accumulating = dst_write.is_some_and(|w| w != Write::Overwrite);
        let group_overwrites =
            dst_write.is_some_and(|w| matches!(w, Write::Group { .. }) && !w.accumulates_at(vars));
        // An instruction that writes on chip may read unwritten or undefined elements: what it
        // computes from them is undefined, by its opcode's dependency rule (`defined`). A store
        // of one is the error.
        // `random_seed` writes no memory, but what it reads seeds the generator: like a store,
        // it may read no unwritten or undefined element.
        // `register_load` likewise: the register decides device loops' trip counts.
        let propagates = !matches!(
            instr.opcode.info().deps,
            nki_lang::Deps::Seed | nki_lang::Deps::Register
        ) && !operands
            .iter()
            .any(|r| r.dir.writes() && matches!(r.loc, Loc::Hbm(_)));
        let mut undefined = false;
        // Sources first: an instruction that reads what another iteration wrote and writes it
        // back is reported for the read.
        let sources = operands.iter().filter(|r| r.dir.reads());
        for r in sources.chain(operands.iter().filter(|r| !r.dir.reads())) {
            let reads = r.dir.reads() && !(r.slot == 0 && group_overwrites);
            if !reads && !r.dir.writes() {
                continue;
            }
            let (tile, scope, on_dst) = self.tile_of(instr, r.slot);
            let a = Access {
                tile,
                scope,
                reads,
                accumulates: (r.slot == 0 || on_dst) && accumulating,
            };
            if r.dir.writes() {
                let span = if a.accumulates {
                    self.span(dst_write, scope)
                } else {
                    None
                };
                let w = defined::written(instr, operands, r);
                self.pending.push((w, tile, a.accumulates, span));
                if instr.opcode.info().deps == nki_lang::Deps::TopK
                    && let (_, Some(w)) = defined::topk_written(r)
                {
                    self.pending.push((w, tile, a.accumulates, span));
                }
            }
            let flag = propagates.then_some(&mut undefined);
            let fault = match r.loc {
                Loc::Sbuf | Loc::Psum => self.check_on_chip(r, a, flag).map(|(n, b, f)| {
                    let mem = if r.loc == Loc::Psum { "PSUM" } else { "SBUF" };
                    (n, format!("byte {b} of {mem}"), f)
                }),
                Loc::Hbm(_) => self
                    .check_output(r, me, flag)
                    .filter(|(_, _, f)| !indirect::commutes(instr, f))
                    .map(|(n, e, f)| (n, format!("element {e} of the tensor"), f)),
                Loc::Expr | Loc::Imm(_) => None,
            };
            if let Some((n, place, f)) = fault {
                let to = self.stored_to(instr, operands, n);
                let n = n.saturating_add(self.row_offset);
                return ControlFlow::Break(self.message(instr, r, (n, place, to), a, f, vars));
            }
        }
        if undefined {
            let found = self.undefined_elements(
                pc,
                instr,
                operands,
                memory,
                (group_overwrites, accumulating),
            );
            for (slot, map) in found {
                match self.undefined.iter_mut().find(|(s, _)| *s == slot) {
                    Some((_, m)) => m.extend(map),
                    None => self.undefined.push((slot, map)),
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// Marks what the instruction that ran wrote (its pending writes), with the undefined
    /// elements found before it ran.
    fn mark_written(&mut self) {
        let me = u32::try_from(self.instances.len()).unwrap_or(u32::MAX);
        let node = self.now;
        let undefined = core::mem::take(&mut self.undefined);
        let pending = core::mem::take(&mut self.pending);
        for (r, tile, accumulated, span) in &pending {
            let size = r.dtype.size() as usize;
            let stamp = Stamp {
                node: span.unwrap_or(node),
                tile: *tile,
                accumulated: *accumulated,
                spans: span.is_some(),
                undefined: 0,
            };
            match r.loc {
                Loc::Sbuf | Loc::Psum => {
                    let map = if r.loc == Loc::Psum {
                        &mut self.psum
                    } else {
                        &mut self.sbuf
                    };
                    let origins = undefined.iter().find(|(s, _)| *s == r.slot).map(|(_, o)| o);
                    match origins {
                        // Every element defined: each run of adjacent elements at once.
                        None => Strict::each_run(r, |start, inner, step| {
                            let at = usize::try_from(start * size as isize).unwrap_or(usize::MAX);
                            if step == 1 {
                                map.set(at, inner.saturating_mul(size), stamp);
                            } else {
                                for k in 0..inner {
                                    let e = start + k as isize * step;
                                    let at = usize::try_from(e * size as isize);
                                    map.set(at.unwrap_or(usize::MAX), size, stamp);
                                }
                            }
                            true
                        }),
                        Some(o) => {
                            Strict::each_element(r, |at| {
                                let undefined = o.get(&at).copied().unwrap_or(0);
                                map.set(at, size, Stamp { undefined, ..stamp });
                                true
                            });
                        }
                    }
                }
                Loc::Hbm(t) => {
                    let out = usize::from(t).checked_sub(self.program.input_count());
                    if let Some(owners) = out.and_then(|o| self.outputs.get_mut(o)) {
                        Strict::each_element(r, |at| {
                            if let Some(o) = owners.get_mut(at / size.max(1)) {
                                *o = Owner { instance: me, node };
                            }
                            true
                        });
                    }
                }
                Loc::Expr | Loc::Imm(_) => {}
            }
        }
        self.pending = pending;
    }
}
