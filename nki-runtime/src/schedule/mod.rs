//! Schedule-independence checking ([`crate::strict::ScheduleCheck`]): a launch must compute
//! the same bits in every order of its instructions that the device may run, and with its loop
//! tiles' buffers rotating, not only in program order on one buffer per tile.
//!
//! NKI's compiler and the hardware run instructions as soon as the instructions they depend
//! on are done, not in program order; they give every tile a place of its own and rotate a
//! loop's tiles over several buffers, so that the iterations of an `affine_range` loop
//! overlap. A kernel whose result depends on program order (an `affine_range` iteration
//! reading what another wrote, a tile declared outside the loop and reused by every
//! iteration, a PSUM drain inside the loop that accumulates into it) computes, in a serial
//! simulator, the answer the device does not. [`ScheduleCheck`] runs the launch in several
//! other orders and compares the outputs bit for bit.
//!
//! How ([`crate::NeuronCore::with_schedule_check`]):
//! 1. The launch's dynamic instruction stream (every executed instruction, loops expanded,
//!    every SPMD instance) is recorded with what each instruction touches: for an on-chip
//!    operand, its tile *instance* (a tile declared inside a loop is a new tile in each
//!    iteration of that loop, as NKI defines it), for a `shared_hbm` output, the output.
//! 2. The dependency graph: an instruction waits for every earlier one that touches the same
//!    tile instance or output when one of the two writes (read-after-write, write-after-read,
//!    write-after-write), as the device's semaphores enforce on the program the compiler
//!    renamed (`timing::Scheduling::Device`: every tile in a place of its own, so tiles that
//!    share an address by allocation do not wait for each other), except when the two run in
//!    different iterations of an `affine_range` loop, or in different SPMD instances: NKI
//!    promises those independent, and the compiler does not order them. The exception to the
//!    exception is accumulation: `+=` and an accumulation group's matmuls into one tile keep
//!    their program order (their sum's rounding depends on the order of the adds, which the
//!    check does not explore: it tests the kernel's dependencies, not floating-point
//!    associativity). Instances of a tile rotate over `buffers` buffers (the instance's
//!    ordinal among the tile's instances, modulo `buffers`); two instances on one buffer are
//!    always ordered, as the compiler orders a buffer's reuse. Accesses are compared per tile
//!    instance and per output, not per byte, which adds edges (orders left out), never removes
//!    one.
//! 3. The steps run, with every tile instance in its buffer, in program order (the
//!    baseline). The baseline is compared with program order on one buffer per tile (as
//!    allocated): a difference is an instruction reading what another iteration's instance
//!    of a loop tile left, found by bisection over the instances ([`Reordering::Rotated`]).
//!    Then the steps run in the orders of [`ScheduleCheck::orders`]: independent steps latest
//!    first (`reverse`), the iterations of each loop in lockstep (`lockstep`, and lockstep
//!    with the later iterations first), reads as early and writes of shared tiles and outputs
//!    as late as allowed (`shared writes last`), then random orders the graph allows. Each
//!    order's outputs are compared with the baseline's, bit for bit.
//! 4. On a difference, the two instructions are found by bisection: between the baseline and
//!    the failing order lie orders that differ from their neighbours by one exchange of two
//!    adjacent steps; the check finds two such neighbours, one that computes the baseline's
//!    bits and one that does not, and names the two steps they exchange
//!    ([`ScheduleError`]): the device may run them either way, and the result depends on it.
//!
//! The steps run on the engines' routines (bit-identical to the reference interpreter,
//! `exec::reference`), one at a time, on one host thread. What this proves, and what not, is
//! in `docs/strictness.md`.

mod graph;
mod record;
mod replay;

use std::collections::HashMap;

use nki_lang::{MAX_PIDS, Program, VarValues};

use crate::bind::Bound;
use crate::engines::EngineState;
use crate::exec::plan::Serial;
use crate::launch::LaunchError;
use crate::strict::{Executed, Reordering, ScheduleCheck, ScheduleError};
use record::{Recorder, Recording};
use replay::{Snapshot, replay};

/// Element `element` of an output of `dtype`, from its bytes `bytes`: a number for the
/// floating-point types of 16 and 32 bits, else the bytes in hexadecimal (little-endian).
fn value(dtype: nki_lang::DType, bytes: &[u8], element: usize) -> String {
    let size = dtype.size() as usize;
    let Some(b) = bytes.get(element * size..(element + 1) * size) else {
        return String::new();
    };
    match (dtype, b) {
        (nki_lang::DType::F32, &[a, b, c, d]) => format!("{:e}", f32::from_le_bytes([a, b, c, d])),
        (nki_lang::DType::Bf16, &[a, b]) => {
            format!("{:e}", half::bf16::from_le_bytes([a, b]).to_f32())
        }
        (nki_lang::DType::F16, &[a, b]) => {
            format!("{:e}", half::f16::from_le_bytes([a, b]).to_f32())
        }
        _ => {
            let hex: String = b.iter().rev().map(|x| format!("{x:02x}")).collect();
            format!("0x{hex}")
        }
    }
}

/// The first output element where `a` and `b` differ: output index and element.
fn first_difference(p: &Program<'_>, a: &[Vec<u8>], b: &[Vec<u8>]) -> Option<(usize, usize)> {
    a.iter()
        .zip(b)
        .zip(p.outputs())
        .enumerate()
        .find_map(|(o, ((x, y), d))| {
            let at = x.iter().zip(y).position(|(u, v)| u != v)?;
            Some((o, at / (d.dtype.size() as usize).max(1)))
        })
}

/// A step as an [`ScheduleError`] names it.
fn executed(
    p: &Program<'_>,
    loops: &[Vec<(u32, nki_lang::LoopKind)>],
    pc: u32,
    vars: &VarValues,
) -> Executed {
    let ins = p.instrs().get(pc as usize);
    let depth = loops.get(pc as usize).map_or(0, Vec::len);
    let mut program_ids = [0; MAX_PIDS];
    program_ids.copy_from_slice(&vars[..MAX_PIDS]);
    Executed {
        instr: pc as usize,
        mnemonic: ins.map_or("", |i| i.mnemonic()),
        line: ins.map_or(0, |i| i.line),
        program_ids,
        loop_values: vars[MAX_PIDS..MAX_PIDS + depth].to_vec(),
    }
}

/// Runs `check` on the launch `b`: records it, runs it in program order and in the check's
/// orders, and fails naming two instructions when outputs differ. Leaves SBUF, PSUM and the
/// outputs as they were before.
pub(crate) fn check(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    check: ScheduleCheck,
) -> Result<(), LaunchError> {
    let p = b.program;
    let mut recorder = Recorder::new(p, check.buffers.clamp(1, ScheduleCheck::MAX_BUFFERS));
    crate::exec::run(e, b, &mut recorder, &mut Serial)?;
    let loops = core::mem::take(&mut recorder.loops);
    let rec: Recording = recorder.recording;
    let control = nki_lang::schedule_control::ControlPlan::new(&p.control(), p.instrs().len());
    let g = graph::build(&rec, &loops, &control);
    let start = Snapshot::take(e, b);
    let n = rec.steps.len();
    let program_order: Vec<u32> = (0..n)
        .map(|j| u32::try_from(j).unwrap_or(u32::MAX))
        .collect();
    let rotated: Vec<u32> = rec.instances.iter().map(|i| i.buffer).collect();
    let base = replay(e, b, &rec, &program_order, &rotated, &start);
    let rotation = if rotated.iter().any(|&r| r != 0) {
        rotation_error(e, b, (&rec, &loops), &rotated, &start, &base, check.buffers)
    } else {
        None
    };
    if let Some(err) = rotation {
        start.restore(e, b);
        return Err(LaunchError::Schedule(Box::new(err)));
    }
    let mut found = None;
    for k in 0..check.orders {
        let policy = check.policy(k);
        let order = graph::order(&rec, &g, policy);
        let out = replay(e, b, &rec, &order, &rotated, &start);
        if first_difference(p, &base, &out).is_some() {
            found = Some((policy, order));
            break;
        }
    }
    let result = match found {
        None => Ok(()),
        Some((policy, order)) => {
            let (i, j, (o, element), outputs) =
                bisect(e, b, (&rec, &rotated), &order, &start, &base);
            let dtype = p.outputs().get(o).map_or(nki_lang::DType::U8, |d| d.dtype);
            let expected = value(dtype, base.get(o).map_or(&[][..], Vec::as_slice), element);
            let found = value(
                dtype,
                outputs.get(o).map_or(&[][..], Vec::as_slice),
                element,
            );
            let s = |k: u32| {
                let st = &rec.steps[k as usize];
                executed(p, &loops, st.pc, &st.vars)
            };
            Err(LaunchError::Schedule(Box::new(ScheduleError {
                kernel: p.name().to_string(),
                first: s(i),
                second: s(j),
                output: p
                    .outputs()
                    .get(o)
                    .map_or(String::new(), |d| d.name.to_string()),
                element,
                expected,
                found,
                how: Reordering::Exchanged {
                    order: policy.name(),
                },
            })))
        }
    };
    start.restore(e, b);
    result
}

/// Two steps `(i, j)`, `i` before `j` in program order, whose exchange between two adjacent
/// orders changes the outputs, and the first output element it changes; `order` is an order
/// whose outputs differ from `base`, the program order's.
fn bisect(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    (rec, buffers): (&Recording, &[u32]),
    order: &[u32],
    start: &Snapshot,
    base: &[Vec<u8>],
) -> (u32, u32, (usize, usize), Vec<Vec<u8>>) {
    let p = b.program;
    let n = order.len();
    // The order of `order`'s first `t` steps, then the rest in program order.
    let mixed = |t: usize| -> Vec<u32> {
        let mut taken = vec![false; n];
        let mut out: Vec<u32> = order[..t].to_vec();
        for &s in &out {
            taken[s as usize] = true;
        }
        out.extend((0..n).filter(|&s| !taken[s]).map(|s| s as u32));
        out
    };
    let differs = |e: &mut EngineState, b: &mut Bound<'_, '_, '_>, o: &[u32]| {
        let out = replay(e, b, rec, o, buffers, start);
        first_difference(p, base, &out).map(|d| (d, out))
    };
    // mixed(lo) computes the baseline's bits, mixed(hi) does not.
    let (mut lo, mut hi) = (0usize, n);
    let mut diff = differs(e, b, order);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match differs(e, b, &mixed(mid)) {
            Some(d) => {
                hi = mid;
                diff = Some(d);
            }
            None => lo = mid,
        }
    }
    // mixed(hi) runs step x right after the first `lo` steps of `order`; mixed(lo) runs it
    // after the steps before it in program order. Move it past them one at a time.
    let x = order[lo];
    let prefix = &order[..lo];
    let rest: Vec<u32> = mixed(lo)[lo..]
        .iter()
        .copied()
        .filter(|&s| s != x)
        .collect();
    let with_x_at = |k: usize| -> Vec<u32> {
        let mut out = prefix.to_vec();
        out.extend_from_slice(&rest[..k]);
        out.push(x);
        out.extend_from_slice(&rest[k..]);
        out
    };
    let before = rest.iter().take_while(|&&s| s < x).count();
    // with_x_at(0) differs, with_x_at(before) does not.
    let (mut lo, mut hi) = (0usize, before);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match differs(e, b, &with_x_at(mid)) {
            Some(d) => {
                lo = mid;
                diff = Some(d);
            }
            None => hi = mid,
        }
    }
    // with_x_at(lo) differs, with_x_at(lo + 1) does not: they exchange x and rest[lo].
    let y = rest.get(lo).copied().unwrap_or(x);
    let (at, outputs) = diff.unwrap_or(((0, 0), Vec::new()));
    (y, x, at, outputs)
}

/// The error when the launch in program order computes other outputs (`rotated_out`) with
/// its tiles' instances on the buffers `rotated` than with one buffer per tile: bisection over
/// the instances finds one whose move to its own buffer changes them, and the two steps are a
/// read of that instance and the write of another instance it read (or the other way round).
fn rotation_error(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    (rec, loops): (&Recording, &[Vec<(u32, nki_lang::LoopKind)>]),
    rotated: &[u32],
    start: &Snapshot,
    rotated_out: &[Vec<u8>],
    buffers: u32,
) -> Option<ScheduleError> {
    let p = b.program;
    let n = rec.steps.len();
    let program_order: Vec<u32> = (0..n).map(|j| j as u32).collect();
    // The first `m` instances on their rotated buffers, the others on buffer 0.
    let mapping = |m: usize| -> Vec<u32> {
        rotated
            .iter()
            .enumerate()
            .map(|(i, &r)| if i < m { r } else { 0 })
            .collect()
    };
    let single = replay(e, b, rec, &program_order, &mapping(0), start);
    let mut diff = first_difference(p, &single, rotated_out)?;
    let mut out = rotated_out.to_vec();
    let (mut lo, mut hi) = (0usize, rotated.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let o = replay(e, b, rec, &program_order, &mapping(mid), start);
        match first_difference(p, &single, &o) {
            Some(d) => {
                hi = mid;
                diff = d;
                out = o;
            }
            None => lo = mid,
        }
    }
    // Instance `lo` moved to its own buffer changes the outputs.
    let (first, second) = rotation_pair(rec, &mapping(lo), lo as u32);
    let (o, element) = diff;
    let dtype = p.outputs().get(o).map_or(nki_lang::DType::U8, |d| d.dtype);
    let s = |k: u32| {
        let st = &rec.steps[k as usize];
        executed(p, loops, st.pc, &st.vars)
    };
    Some(ScheduleError {
        kernel: p.name().to_string(),
        first: s(first),
        second: s(second),
        output: p
            .outputs()
            .get(o)
            .map_or(String::new(), |d| d.name.to_string()),
        element,
        expected: value(dtype, single.get(o).map_or(&[][..], Vec::as_slice), element),
        found: value(dtype, out.get(o).map_or(&[][..], Vec::as_slice), element),
        how: Reordering::Rotated { buffers },
    })
}

/// The two steps (in program order) through which instance `c` shares its buffer with
/// another instance of its tile under `mapping`: if `c`'s first access reads, the last write
/// of another instance on that buffer before it, and that read; else `c`'s last write and the
/// first read of a later instance whose first access reads; else the first step of `c`, twice.
fn rotation_pair(rec: &Recording, mapping: &[u32], c: u32) -> (u32, u32) {
    let tile = rec.instances.get(c as usize).map_or(0, |i| i.tile);
    let buffer_of = |id: u32| {
        (
            rec.instances.get(id as usize).map(|i| i.tile),
            mapping.get(id as usize),
        )
    };
    let mine = buffer_of(c);
    let touches = |k: usize| {
        rec.steps[k].accesses.iter().filter_map(|a| match a.place {
            record::Place::Tile(id) => Some((id, a)),
            record::Place::Output(_) | record::Place::Generator => None,
        })
    };
    // Each instance's first access (reads or not), by step.
    let mut first_access: HashMap<u32, (usize, bool)> = HashMap::new();
    let mut last_other_write: Option<usize> = None;
    let mut last_own_write: Option<usize> = None;
    let mut first_step: Option<usize> = None;
    for k in 0..rec.steps.len() {
        for (id, a) in touches(k) {
            if buffer_of(id) != mine || rec.instances[id as usize].tile != tile {
                continue;
            }
            let first = *first_access.entry(id).or_insert((k, a.reads));
            if id == c {
                first_step.get_or_insert(k);
                if first == (k, true)
                    && let Some(w) = last_other_write
                {
                    return (w as u32, k as u32);
                }
                if a.writes {
                    last_own_write = Some(k);
                }
            } else {
                if first == (k, true)
                    && let Some(w) = last_own_write
                {
                    return (w as u32, k as u32);
                }
                if a.writes {
                    last_other_write = Some(k);
                }
            }
        }
    }
    let k = first_step.unwrap_or(0) as u32;
    (k, k)
}
