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
//! (`exec::interleaved`).

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{
    Extent, InstrData, MAX_LOOP_DEPTH, MAX_PIDS, MAX_TENSOR_RANK, MAX_TENSORS, MAX_VARS,
    OperandRef, Program, Target,
};

use super::interleaved::Shares;
use super::{ExecError, Second, Shown, Untimed, run, run_instances};
use crate::bind::{Bound, HbmOut};
use crate::engines::Engines;
use crate::grid::LaunchGrid;

/// Instances a launch needs before its halves go to two threads.
const MIN_PARALLEL_INSTANCES: usize = 2;

/// An inclusive range of element offsets, or nothing.
pub(crate) type Hull = Option<(i128, i128)>;

/// An inclusive range of indices along each axis of a tensor, or nothing.
pub(crate) type IndexBox = Option<[(i128, i128); MAX_TENSOR_RANK]>;

fn union(a: Hull, b: Hull) -> Hull {
    match (a, b) {
        (Some((l1, h1)), Some((l2, h2))) => Some((l1.min(l2), h1.max(h2))),
        (x, None) | (None, x) => x,
    }
}

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

/// Calls `f(output, axes)` for every access of an output tensor (by output index) among
/// instructions `instrs` of the program, with the inclusive range of its index along each
/// of the tensor's axes over every value of the index variables: `ranges` gives the program
/// ids' and the `depth` already open loops' ranges, the loops the instructions open range over
/// their trip counts. In i128, saturating outward (a range past i128 fails every split).
fn each_output_access(
    b: &Bound<'_, '_, '_>,
    instrs: core::ops::Range<usize>,
    mut ranges: [(i128, i128); MAX_VARS],
    depth: usize,
    mut f: impl FnMut(usize, &[(i128, i128)]),
) {
    let p: &Program<'_> = b.program;
    let inputs = p.input_count();
    // `dead[d]`: inside a loop at depth `d` that never runs.
    let mut dead = [false; MAX_LOOP_DEPTH + 1];
    let mut depth = depth;
    for ins in p.instrs().get(instrs).unwrap_or(&[]) {
        match ins.data {
            InstrData::LoopBegin { trip, .. } => {
                let n = match trip {
                    Extent::Fixed(n) => n,
                    e => e.eval(&b.syms),
                };
                // Loops nest at most MAX_LOOP_DEPTH deep (a verified program's rule).
                let outer_dead = dead.get(depth).copied().unwrap_or(false);
                depth = depth.saturating_add(1);
                if let Some(d) = dead.get_mut(depth) {
                    *d = outer_dead || n == 0;
                }
                if let Some(r) = ranges.get_mut(MAX_PIDS.saturating_add(depth).saturating_sub(1)) {
                    *r = (0, i128::from(n.saturating_sub(1)));
                }
                continue;
            }
            InstrData::LoopEnd { .. } => {
                if let Some(r) = ranges.get_mut(MAX_PIDS.saturating_add(depth).saturating_sub(1)) {
                    *r = (0, 0);
                }
                depth = depth.saturating_sub(1);
                continue;
            }
            _ if dead.get(depth).copied().unwrap_or(false) => continue,
            _ => {}
        }
        for o in ins.operands() {
            let OperandRef::Access(id) = o.operand else {
                continue;
            };
            let access = &p.accesses()[id.index()];
            let Some(out) = (access.tensor as usize).checked_sub(inputs) else {
                continue;
            };
            let mut axes = [(0i128, 0i128); MAX_TENSOR_RANK];
            for (ix, range) in access.axes().iter().zip(axes.iter_mut()) {
                let (mut lo, mut hi) =
                    (i128::from(ix.start.constant), i128::from(ix.start.constant));
                let mut add = |c: i128, (a, z): (i128, i128)| {
                    let (x, y) = (c.saturating_mul(a), c.saturating_mul(z));
                    lo = lo.saturating_add(x.min(y));
                    hi = hi.saturating_add(x.max(y));
                };
                for (&c, &r) in ix.start.coef.iter().zip(&ranges) {
                    add(i128::from(c), r);
                }
                for (&g, &n) in ix.grid.iter().zip(access.shape.dims()) {
                    add(i128::from(g), (0, i128::from(n.max(1)).saturating_sub(1)));
                }
                *range = (lo, hi);
            }
            f(out, &axes[..access.axes().len()]);
        }
    }
}

/// For each output tensor (by output index), the element offsets that instructions `instrs` of
/// the program can read or write, over every value of the index variables (as in
/// [`each_output_access`]).
pub(crate) fn output_hulls(
    b: &Bound<'_, '_, '_>,
    instrs: core::ops::Range<usize>,
    ranges: [(i128, i128); MAX_VARS],
    depth: usize,
) -> [Hull; MAX_TENSORS] {
    let mut hulls = [None; MAX_TENSORS];
    let inputs = b.program.input_count();
    each_output_access(b, instrs, ranges, depth, |out, axes| {
        let (_, shape) = b.hbm(inputs.saturating_add(out));
        let (mut lo, mut hi) = (0i128, 0i128);
        for (&(a, z), stride) in axes.iter().zip(shape.strides()) {
            // Row-major strides are not negative.
            let st = i128::try_from(stride).unwrap_or(i128::MAX);
            lo = lo.saturating_add(st.saturating_mul(a));
            hi = hi.saturating_add(st.saturating_mul(z));
        }
        if let Some(h) = hulls.get_mut(out) {
            *h = union(*h, Some((lo, hi)));
        }
    });
    hulls
}

/// For each output tensor (by output index), the box of indices (a range per axis) that
/// instructions `instrs` of the program can read or write, as [`output_hulls`] does for
/// offsets.
pub(crate) fn output_boxes(
    b: &Bound<'_, '_, '_>,
    instrs: core::ops::Range<usize>,
    ranges: [(i128, i128); MAX_VARS],
    depth: usize,
) -> [IndexBox; MAX_TENSORS] {
    let mut boxes = [None; MAX_TENSORS];
    each_output_access(b, instrs, ranges, depth, |out, axes| {
        if let Some(bx) = boxes.get_mut(out) {
            let joined = bx.get_or_insert([(i128::MAX, i128::MIN); MAX_TENSOR_RANK]);
            for (j, &(a, z)) in joined.iter_mut().zip(axes) {
                *j = (j.0.min(a), j.1.max(z));
            }
        }
    });
    boxes
}

/// The index-variable ranges of a box of program ids (loops at 0).
fn pid_ranges(pids: &[(i64, i64); MAX_PIDS]) -> [(i128, i128); MAX_VARS] {
    let mut ranges = [(0i128, 0i128); MAX_VARS];
    for (r, &(lo, hi)) in ranges.iter_mut().zip(pids) {
        *r = (i128::from(lo), i128::from(hi));
    }
    ranges
}

/// Splits each output at its split point (`at`, from [`split_points`]): the part below the
/// offset goes to the half whose accesses lie lower. The outputs' bytes are lent to the
/// parts; they are whole again when the parts are dropped.
pub(crate) fn split_outputs<'s>(
    outputs: &'s mut [HbmOut<'_>],
    at: &[(usize, bool); MAX_TENSORS],
    outs_a: &mut [HbmOut<'s>; MAX_TENSORS],
    outs_b: &mut [HbmOut<'s>; MAX_TENSORS],
) {
    for (o, out) in outputs.iter_mut().enumerate() {
        let size = out.dtype.size() as usize;
        let (k, a_below) = at[o];
        let (dtype, shape, origin) = (out.dtype, out.shape, out.origin);
        let data: &'s mut [u8] = &mut out.data[..];
        let (below, above) = data.split_at_mut(k.saturating_mul(size).min(data.len()));
        let k = below.len().checked_div(size).unwrap_or(0);
        let (mine, theirs) = if a_below {
            ((below, 0), (above, k))
        } else {
            ((above, k), (below, 0))
        };
        let part = |data: &'s mut [u8], at: usize| HbmOut {
            data,
            origin: origin.saturating_add(at),
            dtype,
            shape,
        };
        outs_a[o] = part(mine.0, mine.1);
        outs_b[o] = part(theirs.0, theirs.1);
    }
}

/// Where each output splits between the halves: `Some(k)` elements go to the half below.
/// `None` if some output's halves might overlap.
pub(crate) fn split_points(
    a: &[Hull; MAX_TENSORS],
    b: &[Hull; MAX_TENSORS],
    outputs: usize,
) -> Option<[(usize, bool); MAX_TENSORS]> {
    let mut at = [(0usize, true); MAX_TENSORS];
    for o in 0..outputs {
        at[o] = match (a[o], b[o]) {
            // The half that touches nothing gets nothing.
            (None, _) => (0, true),
            (Some(_), None) => (usize::MAX, true),
            (Some((_, ha)), Some((lb, _))) if ha < lb => {
                (usize::try_from(ha.saturating_add(1)).ok()?, true)
            }
            (Some((la, _)), Some((_, hb))) if hb < la => {
                (usize::try_from(hb.saturating_add(1)).ok()?, false)
            }
            _ => return None,
        };
    }
    Some(at)
}

/// Runs a grid launch: its halves on two threads when the core has a worker, the launch has
/// enough instances and its outputs split; else every instance on this thread.
pub(crate) fn execute(
    e: &mut Engines,
    second: &mut Option<Box<Engines>>,
    second_outputs: &mut Vec<u8>,
    target: Target,
    b: &mut Bound<'_, '_, '_>,
) -> Result<(), ExecError> {
    let n = b.grid.count().unwrap_or(0);
    if n < MIN_PARALLEL_INSTANCES || e.worker.is_none() {
        return run(
            e,
            b,
            &mut Untimed,
            Shown::Fused,
            Some(&mut Second {
                engines: second,
                outputs: second_outputs,
                target,
            }),
        );
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
        return run(
            e,
            b,
            &mut Untimed,
            Shown::Fused,
            Some(&mut Second {
                engines: second,
                outputs: second_outputs,
                target,
            }),
        );
    };
    let mut outs_a: [HbmOut<'_>; MAX_TENSORS] = core::array::from_fn(|_| HbmOut::empty());
    let mut outs_b: [HbmOut<'_>; MAX_TENSORS] = core::array::from_fn(|_| HbmOut::empty());
    shares.lend(b.outputs, second_outputs, &mut outs_a, &mut outs_b);
    let engines_b = second.get_or_insert_with(|| Box::new(Engines::single_threaded(target, e.isa)));
    engines_b.isa = e.isa;
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
    let (ra, rb) = w.join(
        || run_instances(e, &mut bound_a, &mut Untimed, Shown::Fused, 0..h, None),
        || {
            run_instances(
                engines_b,
                &mut bound_b,
                &mut Untimed,
                Shown::Fused,
                h..n,
                None,
            )
        },
    );
    e.worker = worker;
    shares.give_back(b.outputs, second_outputs);
    ra.and(rb)
}
