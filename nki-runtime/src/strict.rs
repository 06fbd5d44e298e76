//! Strict execution: a launch that reads memory it never wrote, or leaves part of an output
//! unwritten, is an error instead of a result that hardware would not reproduce.
//!
//! SBUF and PSUM keep their contents between launches, and an output tensor holds whatever the
//! caller put in it; on a NeuronCore those bytes are whatever the previous kernel left. A
//! kernel that reads them computes, in a permissive simulator, the intended answer by accident
//! (a zeroed buffer) and garbage on the device. [`Strict`] keeps a shadow map with one bit per
//! byte of SBUF, PSUM and each output, set by every write of the launch, and checks every read
//! against it: an instruction that reads an element no instruction of this launch wrote stops
//! the launch with [`crate::ExecError`], naming the tile or tensor, the element, the loop
//! values and (through the error) the instruction and its kernel source line. After the last
//! instruction, every output element must have been written ([`StrictError::Unwritten`]).
//!
//! The instances of an SPMD grid run on separate cores on hardware: each starts with nothing
//! written on chip, and an instance that reads or writes an output element another instance
//! wrote is an error naming both instances' program ids (their result would depend on which
//! runs first).
//!
//! Run a launch strictly with [`crate::NeuronCore::execute_strict`]. It is an observer, so
//! the launch runs on one thread, and each operand's elements are visited once more to check
//! or mark them: a debugging mode, several times slower than a plain launch.

use core::fmt;
use core::ops::ControlFlow;

use nki_lang::{
    Instr, MAX_PIDS, MAX_TILE_RANK, OperandRef, Program, VarValues, Write,
    target::{PARTITIONS, PSUM_PARTITION_BYTES},
};
use thiserror::Error;

use crate::exec::{Loc, Observer, Operands, Resolved, accumulates};

/// A launch that left part of an output unwritten.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StrictError {
    /// Output `output` has `count` elements no instruction wrote, the first at row-major
    /// index `first`.
    #[error(
        "kernel `{kernel}` left {count} element{} of output `{output}` unwritten (the first at row-major index {first})",
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

/// One bit per byte.
#[derive(Clone, Debug)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(bytes: usize) -> Bits {
        Bits(vec![0; bytes.div_ceil(64)])
    }

    fn set(&mut self, from: usize, len: usize) {
        for b in from..from + len {
            if let Some(w) = self.0.get_mut(b / 64) {
                *w |= 1 << (b % 64);
            }
        }
    }

    fn clear(&mut self) {
        self.0.fill(0);
    }

    fn all(&self, from: usize, len: usize) -> bool {
        (from..from + len).all(|b| self.0.get(b / 64).is_some_and(|w| w >> (b % 64) & 1 == 1))
    }
}

/// The strictness observer of one launch (see the [module documentation](self)).
#[derive(Clone, Debug)]
pub struct Strict<'p> {
    program: &'p Program<'p>,
    sbuf: Bits,
    psum: Bits,
    /// Per output tensor (by output index), per element: 0 when unwritten, else 1 + the
    /// ordinal of the SPMD instance that wrote it.
    outputs: Vec<Vec<u32>>,
    /// The program ids of the instances seen so far, by ordinal (the last is running).
    instances: Vec<[i64; MAX_PIDS]>,
    /// The writes of the instruction that runs, marked after it ran.
    pending: Vec<Resolved>,
}

impl<'p> Strict<'p> {
    /// A shadow map of nothing written, for a launch of `program` on a core with
    /// `sbuf_partition_bytes` of SBUF per partition and outputs of `output_bytes` bytes.
    pub fn new(
        program: &'p Program<'p>,
        sbuf_partition_bytes: usize,
        output_bytes: &[usize],
    ) -> Self {
        Strict {
            program,
            sbuf: Bits::new(PARTITIONS as usize * sbuf_partition_bytes),
            psum: Bits::new(PARTITIONS as usize * PSUM_PARTITION_BYTES as usize),
            outputs: output_bytes
                .iter()
                .zip(program.outputs())
                .map(|(&n, d)| vec![0; n / d.dtype.size() as usize])
                .collect(),
            instances: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// The shadow map of an on-chip operand (SBUF or PSUM).
    fn on_chip(&mut self, r: &Resolved) -> Option<&mut Bits> {
        match r.loc {
            Loc::Sbuf => Some(&mut self.sbuf),
            Loc::Psum => Some(&mut self.psum),
            Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => None,
        }
    }

    /// The owners of an output operand's elements (`None` for inputs and on-chip operands).
    fn output(&mut self, r: &Resolved) -> Option<&mut Vec<u32>> {
        let Loc::Hbm(t) = r.loc else { return None };
        let out = usize::from(t).checked_sub(self.program.input_count())?;
        self.outputs.get_mut(out)
    }

    /// Notes the instance with program ids `pids` as running: a new instance starts with
    /// nothing written on chip (on hardware each runs on its own core, or after the previous
    /// one's tiles are gone).
    fn enter(&mut self, pids: [i64; MAX_PIDS]) -> u32 {
        if self.instances.last() != Some(&pids) {
            self.instances.push(pids);
            self.sbuf.clear();
            self.psum.clear();
        }
        u32::try_from(self.instances.len()).unwrap_or(u32::MAX)
    }

    /// Byte offsets of every element of `r`, in row-major order of its grid, until `f` returns
    /// `false`: then the element's index in that order.
    fn each_element(r: &Resolved, mut f: impl FnMut(usize) -> bool) -> Option<usize> {
        let size = r.dtype.size() as isize;
        let d = r.dims;
        let s = r.pattern.strides;
        if d.contains(&0) {
            return None;
        }
        let last = MAX_TILE_RANK - 1;
        let (inner, step) = (d[last], s[last]);
        let mut idx = [0usize; MAX_TILE_RANK];
        let mut n = 0usize;
        loop {
            // The offset of this run's first element; the innermost dimension is a run.
            let start = r.pattern.base
                + idx[..last]
                    .iter()
                    .zip(&s[..last])
                    .map(|(&i, &st)| i as isize * st)
                    .sum::<isize>();
            for k in 0..inner {
                let elem = start + k as isize * step;
                let at = usize::try_from(elem * size).unwrap_or(usize::MAX);
                if !f(at) {
                    return Some(n + k);
                }
            }
            n += inner;
            // Advance the outer dimensions like an odometer.
            let mut j = last;
            loop {
                if j == 0 {
                    return None;
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
            (_, Loc::Hbm(t)) => p
                .tensors()
                .get(usize::from(t))
                .map_or("an output".to_string(), |t| format!("output `{}`", t.name)),
            _ => "an operand".to_string(),
        }
    }

    /// The elements of every output no instruction wrote: an error for the first output with
    /// any.
    pub fn finish(&self) -> Result<(), StrictError> {
        let outputs = self.program.outputs();
        for (owners, decl) in self.outputs.iter().zip(outputs) {
            let count = owners.iter().filter(|&&o| o == 0).count();
            if let Some(first) = owners.iter().position(|&o| o == 0) {
                return Err(StrictError::Unwritten {
                    kernel: self.program.name().to_string(),
                    output: decl.name.to_string(),
                    first,
                    count,
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

/// What an output element's owner says about an access by instance `me` (1-based).
enum Conflict {
    /// Read before any write.
    Unwritten,
    /// Written by another instance (its 1-based ordinal).
    Other(u32),
}

impl Observer for Strict<'_> {
    fn before(
        &mut self,
        _pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
    ) -> ControlFlow<String> {
        self.pending.clear();
        let mut pids = [0i64; MAX_PIDS];
        pids.copy_from_slice(&vars[..MAX_PIDS]);
        let me = self.enter(pids);
        let group_overwrites = instr
            .data
            .dst()
            .is_some_and(|d| matches!(d.write, Write::Group { .. }) && !accumulates(d.write, vars));
        for r in operands.iter() {
            let reads = r.dir.reads() && !(r.slot == 0 && group_overwrites);
            let writes = r.dir.writes();
            if writes {
                self.pending.push(*r);
            }
            let size = r.dtype.size() as usize;
            let mut bad = 0;
            // On chip: every read must find bytes this instance wrote.
            let unread = match self.on_chip(r) {
                Some(map) if reads => Strict::each_element(r, |at| {
                    bad = at;
                    map.all(at, size)
                }),
                _ => None,
            };
            if let Some(n) = unread {
                let what = self.describe(instr, r.slot, r);
                let mem = if r.loc == Loc::Psum { "PSUM" } else { "SBUF" };
                return ControlFlow::Break(format!(
                    "reads {what} where no instruction of this launch wrote: element {n} of the operand (byte {bad} of {mem}), {}",
                    LoopValues(vars)
                ));
            }
            // Outputs: a read must find what this instance wrote; a write must not overwrite
            // what another instance wrote.
            let mut conflict = None;
            let found = match self.output(r) {
                Some(owners) => Strict::each_element(r, |at| {
                    let e = at / size.max(1);
                    let owner = owners.get(e).copied().unwrap_or(0);
                    bad = e;
                    conflict = match owner {
                        0 if reads => Some(Conflict::Unwritten),
                        0 => None,
                        o if o != me => Some(Conflict::Other(o)),
                        _ => None,
                    };
                    conflict.is_none()
                }),
                None => None,
            };
            if let (Some(n), Some(c)) = (found, conflict) {
                let what = self.describe(instr, r.slot, r);
                let at = LoopValues(vars);
                let msg = match c {
                    Conflict::Unwritten => format!(
                        "reads {what} where no instruction of this launch wrote: element {n} of the operand (element {bad} of the tensor), {at}"
                    ),
                    Conflict::Other(o) => {
                        let other = self
                            .instances
                            .get(o as usize - 1)
                            .copied()
                            .unwrap_or_default();
                        let verb = if writes { "writes" } else { "reads" };
                        format!(
                            "{verb} element {bad} of {what}, which the instance with program ids {other:?} wrote: SPMD instances must not share output elements ({at})"
                        )
                    }
                };
                return ControlFlow::Break(msg);
            }
        }
        ControlFlow::Continue(())
    }

    fn after(&mut self, _pc: usize, _instr: &Instr) {
        let me = u32::try_from(self.instances.len()).unwrap_or(u32::MAX);
        let pending = core::mem::take(&mut self.pending);
        for r in &pending {
            let size = r.dtype.size() as usize;
            if let Some(map) = self.on_chip(r) {
                Strict::each_element(r, |at| {
                    map.set(at, size);
                    true
                });
            } else if let Some(owners) = self.output(r) {
                Strict::each_element(r, |at| {
                    if let Some(o) = owners.get_mut(at / size.max(1)) {
                        *o = me;
                    }
                    true
                });
            }
        }
        self.pending = pending;
    }
}
