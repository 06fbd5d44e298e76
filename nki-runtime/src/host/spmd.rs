//! The instances of a grid launch on the core's two host threads.
//!
//! The instances are split in row-major order: the first half runs on the calling thread with
//! the core's engines, the second on the worker with a second set of engines (SBUF, PSUM and
//! scratch of its own, as each NKI instance has). Inputs are shared; each output tensor is
//! split into two byte ranges, one per thread, when the two halves' accesses to it (stores,
//! and loads of outputs) lie on either side of one offset. That is
//! decided before anything runs, from the accesses' affine indices over the halves' program ids
//! and every loop value: a conservative hull, so a launch whose halves might touch the same
//! elements runs its instances serially instead. Either way each instance computes what it
//! computes alone, and the two halves touch disjoint memory, so the results are those of the
//! serial run, bit for bit.
//!
//! When no offset separates the halves but their boxes of indices are disjoint (instances that
//! each write a column block of every row), the second half works on a copy of its box instead
//! (`host::interleaved`).
//!
//! A second half that the worker has not started by the time the first is done (its vCPU busy,
//! or it left the job to the caller: `worker`) runs on the calling thread, on the core's
//! engines, right after the first: the instances in order on one set of engines, as a serial
//! run has them.

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{MAX_PIDS, MAX_TENSORS, MAX_VARS, Target};

use super::hull::{output_boxes, output_hulls};
use super::interleaved::Shares;
use super::{HostState, Plain, WorkerState};
use crate::bind::{Bound, HbmOut};
use crate::engines::EngineState;
use crate::exec::{ExecError, Unobserved, run, run_instances};
use crate::grid::LaunchGrid;

/// Instances a launch needs before its halves go to two threads.
const MIN_PARALLEL_INSTANCES: usize = 2;

/// The bounding box of the program ids of instances `first..=last` (row-major indices): axes
/// where both agree are fixed; the first that differs spans the two; later ones span the grid.
fn pid_box(grid: &LaunchGrid, first: usize, last: usize) -> [(i64, i64); MAX_PIDS] {
    let (a, b) = (grid.coords(first), grid.coords(last));
    let mut bx = [(0i64, 0i64); MAX_PIDS];
    let mut free = false;
    for axis in 0..MAX_PIDS {
        bx[axis] = if free {
            (
                0,
                i64::try_from(grid.size(axis)).map_or(i64::MAX, |n| n.saturating_sub(1)),
            )
        } else {
            (a[axis], b[axis])
        };
        free |= a[axis] != b[axis];
    }
    bx
}

/// The index-variable ranges of a box of program ids (loops at 0).
fn pid_ranges(pids: &[(i64, i64); MAX_PIDS]) -> [(i128, i128); MAX_VARS] {
    let mut ranges = [(0i128, 0i128); MAX_VARS];
    for (r, &(lo, hi)) in ranges.iter_mut().zip(pids) {
        *r = (i128::from(lo), i128::from(hi));
    }
    ranges
}

/// Runs a plain launch: a grid's halves on two threads when the core has a worker, the launch
/// has enough instances and its outputs split; else every instance on this thread, whose
/// outermost loops may split instead (`loops`).
pub(crate) fn execute(
    e: &mut EngineState,
    state: &mut HostState,
    target: Target,
    b: &mut Bound<'_, '_, '_>,
) -> Result<(), ExecError> {
    let HostState {
        second,
        outputs: second_outputs,
        readers,
    } = state;
    // The rows of an indirect DMA and a dynamic copy's source are data: no shortcut can see
    // what they touch before they run, so a program with one runs serially, every
    // instruction as written.
    if b.program.instrs().iter().any(|i| {
        matches!(
            i.data,
            nki_lang::InstrData::Indirect { .. } | nki_lang::InstrData::DynCopy { .. }
        )
    }) {
        return run(e, b, &mut Unobserved, &mut crate::exec::plan::Serial);
    }
    readers.find(b.program);
    let readers = &*readers;
    let n = b.grid.count().unwrap_or(0);
    let serial = |e: &mut EngineState, b: &mut Bound<'_, '_, '_>, second, second_outputs| {
        let mut second = WorkerState {
            engines: second,
            outputs: second_outputs,
            target,
        };
        let mut plan = Plain::new(e, readers, Some(&mut second));
        run(e, b, &mut Unobserved, &mut plan)
    };
    // A launch's allocated tensors (scratch, constants) are bound once: its instances take
    // turns on them (`scratch`).
    if n < MIN_PARALLEL_INSTANCES || e.worker.is_none() || !b.program.allocated().is_empty() {
        return serial(e, b, second, second_outputs);
    }
    let h = n.div_ceil(2);
    let outputs = b.outputs.len();
    let all = 0..b.program.instrs().len();
    // n ≥ MIN_PARALLEL_INSTANCES ≥ 2, so 1 ≤ h < n.
    let a_ranges = pid_ranges(&pid_box(&b.grid, 0, h.saturating_sub(1)));
    let b_ranges = pid_ranges(&pid_box(&b.grid, h, n.saturating_sub(1)));
    let ha = output_hulls(b, all.clone(), a_ranges, 0);
    let hb = output_hulls(b, all.clone(), b_ranges, 0);
    let boxes = || {
        (
            output_boxes(b, all.clone(), a_ranges, 0),
            output_boxes(b, all.clone(), b_ranges, 0),
        )
    };
    let work = super::work_of(b, 0..b.program.instrs().len())
        .saturating_mul(u64::try_from(n).unwrap_or(u64::MAX));
    let Some(shares) = Shares::plan(&ha, &hb, boxes, b.outputs, work) else {
        return serial(e, b, second, second_outputs);
    };
    let mut outs_a: [HbmOut<'_>; MAX_TENSORS] = core::array::from_fn(|_| HbmOut::empty());
    let mut outs_b: [HbmOut<'_>; MAX_TENSORS] = core::array::from_fn(|_| HbmOut::empty());
    shares.lend(b.outputs, second_outputs, &mut outs_a, &mut outs_b);
    let engines_b =
        second.get_or_insert_with(|| Box::new(EngineState::single_threaded(target, e.isa)));
    engines_b.isa = e.isa;
    engines_b.block_bytes = e.block_bytes;
    let mut worker = e.worker.take();
    let Some(w) = worker.as_mut() else {
        unreachable!("checked above")
    };
    let mut bound_a = Bound {
        outputs: &mut outs_a[..outputs],
        ..*b
    };
    let mut bound_b = Bound {
        outputs: &mut outs_b[..outputs],
        ..*b
    };
    // A second half the worker has not started by the time the first is done runs here, on
    // these engines, right after the first, as a serial run would.
    let (ra, rb) = w.join_or_leave(
        || {
            let mut plan = Plain::new(e, readers, None);
            run_instances(e, &mut bound_a, &mut Unobserved, &mut plan, 0..h)
        },
        || {
            let mut plan = Plain::new(engines_b, readers, None);
            run_instances(engines_b, &mut bound_b, &mut Unobserved, &mut plan, h..n)
        },
    );
    let rb = match (rb, &ra) {
        (Some(rb), _) => rb,
        (None, Err(_)) => Ok(()),
        (None, Ok(())) => {
            #[cfg(test)]
            crate::worker::note_left(crate::worker::Left::Grid);
            let mut plan = Plain::new(e, readers, None);
            run_instances(e, &mut bound_b, &mut Unobserved, &mut plan, h..n)
        }
    };
    e.worker = worker;
    shares.give_back(b.outputs, second_outputs);
    ra.and(rb)
}
