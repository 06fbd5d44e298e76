//! Outputs whose two halves of a split run interleave: disjoint boxes of indices that no one
//! offset separates.
//!
//! The halves of a split (a loop's iterations, `host::loops`, or a grid's instances,
//! `host::spmd`) normally get one byte range of each output each (`host::hull::split_outputs`).
//! A loop over column blocks of a row-major result, such as the outer loop of NKI's fully
//! optimised matmul, or a grid with one row of instances, writes every row in both halves: the
//! halves' boxes of indices are disjoint along the column axis, but their offsets interleave.
//! Such an output stays whole for the first half; the second half works on a copy of its box
//! in a buffer of the core's, which is copied back into the output after both halves finish.
//! Since neither half touches (reads or writes) any element of the other's box, every element
//! ends as in the serial run, bit for bit. The buffer is created on the first such launch and
//! kept (it grows to the largest output that needed it).

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{MAX_TENSOR_RANK, MAX_TENSORS};

use super::hull::{Hull, IndexBox, split_outputs, split_points};
use crate::bind::HbmOut;
use crate::shape::Shape;

/// How the outputs of a launch are shared between the two halves of a split.
// One value per split launch, on the stack: boxing the larger variant would allocate.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Shares {
    /// Each output split at an element offset (`host::hull::split_points`).
    At([(usize, bool); MAX_TENSORS]),
    /// Each output whole for the first half; the second works on copies of these boxes.
    Boxes([IndexBox; MAX_TENSORS]),
}

impl Shares {
    /// How the halves whose accesses to each output have hulls `a` and `b` (and boxes
    /// `boxes()`, computed only if the hulls overlap) share the outputs; `None` if they may
    /// touch the same element, or if copying the second half's boxes in and out would cost
    /// too much next to the split's `work` (see [`super::work`] and [`BYTES_PER_WORK_INV`]).
    pub(crate) fn plan(
        a: &[Hull; MAX_TENSORS],
        b: &[Hull; MAX_TENSORS],
        boxes: impl FnOnce() -> ([IndexBox; MAX_TENSORS], [IndexBox; MAX_TENSORS]),
        outputs: &[HbmOut<'_>],
        work: u64,
    ) -> Option<Shares> {
        if let Some(at) = split_points(a, b, outputs.len()) {
            return Some(Shares::At(at));
        }
        let (ba, bb) = boxes();
        let boxes = second_half_boxes(&ba, &bb, outputs)?;
        let copied = outputs.iter().zip(&boxes).fold(0u64, |acc, (out, bx)| {
            let bytes = bx
                .map_or(0, |bx| box_elems(&out.shape, &bx))
                .saturating_mul(u64::from(out.dtype.size()));
            // Copied in before the halves run and back after.
            acc.saturating_add(bytes.saturating_mul(2))
        });
        (copied.saturating_mul(BYTES_PER_WORK_INV) <= work).then_some(Shares::Boxes(boxes))
    }

    /// Lends the outputs to the two halves (`scratch` holds the second half's copies, if any).
    pub(crate) fn lend<'s>(
        &self,
        outputs: &'s mut [HbmOut<'_>],
        scratch: &'s mut Vec<u8>,
        outs_a: &mut [HbmOut<'s>; MAX_TENSORS],
        outs_b: &mut [HbmOut<'s>; MAX_TENSORS],
    ) {
        match self {
            Shares::At(at) => split_outputs(outputs, at, outs_a, outs_b),
            Shares::Boxes(boxes) => lend(outputs, boxes, scratch, outs_a, outs_b),
        }
    }

    /// After both halves ran: copies the second half's boxes back into the outputs.
    pub(crate) fn give_back(&self, outputs: &mut [HbmOut<'_>], scratch: &[u8]) {
        if let Shares::Boxes(boxes) = self {
            give_back(outputs, boxes, scratch);
        }
    }
}

/// The inverse of the most bytes of box copies a split may cost per unit of its work: a split
/// whose copies exceed `work / 8` bytes runs serially. The matmul tutorial's outer loop copies
/// 64 MiB for 275 G multiply-adds and ran 866–895 → 810 ms split so (against its instructions
/// split one by one), while the average pool's row loop, 32 MiB of copies for 80 M elements of
/// work, ran at 1.6× the time of its instructions split one by one.
const BYTES_PER_WORK_INV: u64 = 8;

/// The number of elements of box `bx` within a tensor of shape `shape`.
fn box_elems(shape: &Shape, bx: &[(i128, i128); MAX_TENSOR_RANK]) -> u64 {
    shape
        .as_slice()
        .iter()
        .zip(bx)
        .fold(1u64, |acc, (&d, &(lo, hi))| {
            let last = i128::try_from(d).unwrap_or(i128::MAX).saturating_sub(1);
            let n = hi
                .min(last)
                .saturating_sub(lo.max(0))
                .saturating_add(1)
                .max(0);
            acc.saturating_mul(u64::try_from(n).unwrap_or(0))
        })
}

/// Whether two boxes (of a tensor of rank `rank`) share no index: some axis separates them.
fn disjoint(
    a: &[(i128, i128); MAX_TENSOR_RANK],
    b: &[(i128, i128); MAX_TENSOR_RANK],
    rank: usize,
) -> bool {
    a.iter()
        .zip(b)
        .take(rank)
        .any(|(&(la, ha), &(lb, hb))| ha < lb || hb < la)
}

/// The boxes the second half touches, one per output (`None` where it touches nothing), if for
/// every output the halves' boxes (`a`, `b`, from `host::hull::output_boxes`) are disjoint or
/// one of them is empty; `None` if some output's halves may touch the same element.
fn second_half_boxes(
    a: &[IndexBox; MAX_TENSORS],
    b: &[IndexBox; MAX_TENSORS],
    outputs: &[HbmOut<'_>],
) -> Option<[IndexBox; MAX_TENSORS]> {
    for (o, out) in outputs.iter().enumerate() {
        if let (Some(ba), Some(bb)) = (a.get(o)?, b.get(o)?)
            && !disjoint(ba, bb, out.shape.rank())
        {
            return None;
        }
    }
    Some(*b)
}

/// Copies the elements of box `bx` of a tensor of shape `shape` and element size `size` from
/// `from` to `to`, two buffers that both hold the tensor's elements from `origin` on. Indices
/// outside the tensor or the buffers are skipped (the accesses that made the box were checked
/// against the tensor at launch).
fn copy_box(
    from: &[u8],
    to: &mut [u8],
    shape: &Shape,
    origin: usize,
    size: usize,
    bx: &[(i128, i128)],
) {
    let dims = shape.as_slice();
    let rank = dims.len();
    let strides = shape.strides();
    // The box clipped to the tensor, as usize ranges; an empty one copies nothing.
    let mut lo = [0usize; MAX_TENSOR_RANK];
    let mut hi = [0usize; MAX_TENSOR_RANK];
    for axis in 0..rank {
        let (a, z) = bx.get(axis).copied().unwrap_or((0, -1));
        let last = i128::try_from(dims[axis])
            .unwrap_or(i128::MAX)
            .saturating_sub(1);
        let (a, z) = (a.max(0), z.min(last));
        if a > z {
            return;
        }
        // Within 0..=last < 2⁴⁰ (`MAX_DIM`).
        lo[axis] = usize::try_from(a).unwrap_or(0);
        hi[axis] = usize::try_from(z).unwrap_or(0);
    }
    // One contiguous run along the last axis per index of the others (one element at rank 0).
    let run = match rank.checked_sub(1) {
        Some(l) => hi[l].saturating_sub(lo[l]).saturating_add(1),
        None => 1,
    };
    // Elements `origin .. origin + held` are in both buffers.
    let held = from.len().min(to.len()).checked_div(size).unwrap_or(0);
    let mut idx = lo;
    loop {
        let offset = (0..rank).fold(0usize, |acc, a| {
            acc.saturating_add(idx[a].saturating_mul(strides[a]))
        });
        // The run's elements that the buffers hold, as byte offsets into them.
        let first = offset.max(origin).saturating_sub(origin);
        let end = offset
            .saturating_add(run)
            .min(origin.saturating_add(held))
            .saturating_sub(origin);
        if first < end {
            let span = first.saturating_mul(size)..end.saturating_mul(size);
            if let (Some(s), Some(d)) = (from.get(span.clone()), to.get_mut(span)) {
                d.copy_from_slice(s);
            }
        }
        // The next index of the axes before the last, row-major; done after the last one.
        let mut axis = rank.saturating_sub(1);
        loop {
            let Some(a) = axis.checked_sub(1) else {
                return;
            };
            axis = a;
            if idx[a] < hi[a] {
                idx[a] = idx[a].saturating_add(1);
                break;
            }
            idx[a] = lo[a];
        }
    }
}

/// Lends the outputs to the two halves: each whole output to the first half, and to the second
/// a copy of its box in `scratch` (grown as needed), or an empty part where it touches nothing.
fn lend<'s>(
    outputs: &'s mut [HbmOut<'_>],
    boxes: &[IndexBox; MAX_TENSORS],
    scratch: &'s mut Vec<u8>,
    outs_a: &mut [HbmOut<'s>; MAX_TENSORS],
    outs_b: &mut [HbmOut<'s>; MAX_TENSORS],
) {
    let needed = outputs
        .iter()
        .zip(boxes)
        .filter(|(_, bx)| bx.is_some())
        .fold(0usize, |acc, (o, _)| acc.saturating_add(o.data.len()));
    if scratch.len() < needed {
        scratch.resize(needed, 0);
    }
    let mut rest: &'s mut [u8] = scratch;
    for (o, out) in outputs.iter_mut().enumerate() {
        let (dtype, shape, origin) = (out.dtype, out.shape, out.origin);
        let data: &'s mut [u8] = &mut out.data[..];
        let copy: &'s mut [u8] = match boxes[o] {
            Some(bx) => {
                let rest_now = core::mem::take(&mut rest);
                let at = data.len().min(rest_now.len());
                let (part, after) = rest_now.split_at_mut(at);
                rest = after;
                copy_box(data, part, &shape, origin, dtype.size() as usize, &bx);
                part
            }
            None => &mut [],
        };
        outs_a[o] = HbmOut {
            data,
            origin,
            dtype,
            shape,
        };
        outs_b[o] = HbmOut {
            data: copy,
            origin,
            dtype,
            shape,
        };
    }
}

/// Copies the second half's boxes back from `scratch` (as [`lend`] laid them out) into the
/// outputs.
pub(crate) fn give_back(
    outputs: &mut [HbmOut<'_>],
    boxes: &[IndexBox; MAX_TENSORS],
    scratch: &[u8],
) {
    let mut rest = scratch;
    for (o, out) in outputs.iter_mut().enumerate() {
        if let Some(bx) = boxes[o] {
            let (part, after) = rest.split_at(out.data.len().min(rest.len()));
            rest = after;
            copy_box(
                part,
                out.data,
                &out.shape,
                out.origin,
                out.dtype.size() as usize,
                &bx,
            );
        }
    }
}

#[cfg(test)]
// Small fixed sizes: plain arithmetic is the independent reference here.
#[allow(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap
)]
mod tests {
    use super::*;

    /// Copies box `bx` of a `dims` tensor of 2-byte elements between buffers holding elements
    /// `origin..` and compares with a plain loop over every index.
    fn check(dims: &[usize], origin: usize, bx: &[(i128, i128)]) {
        let shape = Shape::new(dims).unwrap();
        let len = shape.len() - origin;
        let from: Vec<u8> = (0..2 * len).map(|i| (i % 251) as u8 + 1).collect();
        let mut to = vec![0u8; 2 * len];
        copy_box(&from, &mut to, &shape, origin, 2, bx);
        let strides = shape.strides();
        for e in origin..shape.len() {
            let inside = (0..dims.len()).all(|a| {
                let i = (e / strides[a] % dims[a]) as i128;
                bx[a].0 <= i && i <= bx[a].1
            });
            let at = 2 * (e - origin);
            let want = if inside {
                &from[at..at + 2]
            } else {
                &[0, 0][..]
            };
            assert_eq!(&to[at..at + 2], want, "{dims:?} {bx:?} element {e}");
        }
    }

    #[test]
    fn copies_exactly_the_box() {
        check(&[4, 6], 0, &[(0, 3), (3, 5)]);
        check(&[5, 3, 7], 0, &[(1, 3), (0, 2), (2, 4)]);
        check(&[9], 0, &[(2, 6)]);
        // Clipped to the tensor, and to the part of it the buffers hold.
        check(&[4, 6], 0, &[(-3, 1), (4, 40)]);
        check(&[6, 8], 8, &[(0, 5), (0, 3)]);
        // An empty box copies nothing.
        check(&[4, 6], 0, &[(2, 1), (0, 5)]);
    }

    proptest::proptest! {
        /// Random shapes of rank 1 to 4, boxes reaching past the tensor on either side or
        /// empty, and parts of the tensor starting past element 0.
        #[test]
        fn copies_exactly_random_boxes(
            dims in proptest::collection::vec(1usize..6, 1..5),
            raw in proptest::collection::vec((-3i128..8, -3i128..8), 4),
            skip in 0usize..10,
        ) {
            let bx: Vec<(i128, i128)> = raw[..dims.len()].to_vec();
            let len: usize = dims.iter().product();
            check(&dims, skip.min(len - 1), &bx);
        }
    }

    #[test]
    fn boxes_disjoint_along_any_axis() {
        let a = [(0, 3), (0, 511), (0, 0), (0, 0), (0, 0), (0, 0)];
        let mut b = a;
        b[1] = (512, 1023);
        assert!(disjoint(
            &a[..].try_into().unwrap(),
            &b[..].try_into().unwrap(),
            2
        ));
        b[1] = (511, 1023);
        assert!(!disjoint(
            &a[..].try_into().unwrap(),
            &b[..].try_into().unwrap(),
            2
        ));
    }
}
