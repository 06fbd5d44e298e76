//! The geometry of a split run: which elements of each output tensor the two halves of a
//! launch (a grid's instances, a loop's iterations) may touch, as hulls of element offsets and
//! boxes of indices over the halves' index ranges, and the offsets that separate them.

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{
    Extent, HbmAccess, InstrData, MAX_LOOP_DEPTH, MAX_PIDS, MAX_TENSOR_RANK, MAX_TENSORS, MAX_VARS,
    OperandRef, Program,
};

use crate::bind::{Bound, HbmOut};

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
    mut f: impl FnMut(usize, &HbmAccess, &[(i128, i128)]),
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
                if dead.get(depth).copied().unwrap_or(false) {
                    continue;
                }
            }
        }
        for o in ins.operands() {
            let id = match o.operand {
                OperandRef::Access(id) => id,
                // Tiles, grid expressions and immediates are no output tensor's elements.
                OperandRef::View(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => continue,
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
            f(out, access, &axes[..access.axes().len()]);
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
    each_output_access(b, instrs, ranges, depth, |out, access, axes| {
        let (mut lo, mut hi) = (0i128, 0i128);
        for (&(a, z), stride) in axes.iter().zip(b.access_strides(access)) {
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
    let inputs = b.program.input_count();
    each_output_access(b, instrs, ranges, depth, |out, access, axes| {
        if let Some(bx) = boxes.get_mut(out) {
            let joined = bx.get_or_insert([(i128::MAX, i128::MIN); MAX_TENSOR_RANK]);
            if access.reshape.is_some() {
                // A reshape's indices are not the output's: the box is the whole output.
                let (_, shape) = b.hbm(inputs.saturating_add(out));
                for (j, &n) in joined.iter_mut().zip(shape.as_slice()) {
                    let last = i128::try_from(n).unwrap_or(i128::MAX).saturating_sub(1);
                    *j = (j.0.min(0), j.1.max(last));
                }
                return;
            }
            for (j, &(a, z)) in joined.iter_mut().zip(axes) {
                *j = (j.0.min(a), j.1.max(z));
            }
        }
    });
    boxes
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
