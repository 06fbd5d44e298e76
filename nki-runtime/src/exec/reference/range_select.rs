//! `range_select`: a select by a range of each partition's free indices, with an optional
//! maximum of each partition's results.

use nki_lang::{AccOut, Alu, Cmp};

use super::{Elems, Lane, Machine, Value, elementwise};
use crate::operand::Operands;

/// `range_select`: at each point `t = (p, …)` of the grid (the destination's dims), with `i`
/// its free index (row-major) and `x = start + i` as fp32 (exact: the rule keeps it within
/// ±2^24), `on_true[t]` where `x cmp[0] bound0[p]` and `x cmp[1] bound1[p]` both hold (the
/// bounds loaded to fp32), else fp32's lowest value `-3.4028235e38`, as fp32 lanes stored to
/// the destination's dtype; with a reduction, the `maximum` of each partition's selected fp32
/// values in the documented fold order goes to element `p` of `reduce_res` ([`elementwise`]).
pub(super) fn range_select(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    cmp: [Cmp; 2],
    start: i32,
    reduce: Option<AccOut>,
    accumulate: Option<Alu>,
) {
    let grid = ops.get(0).dims;
    let (on_true, bound0, bound1) = (
        Elems::over(ops.get(1), &grid),
        Elems::over(ops.get(2), &grid),
        Elems::over(ops.get(3), &grid),
    );
    elementwise(m, ops, Lane::F32, reduce, accumulate, |m, t| {
        let (b0, b1) = (
            m.get(&bound0, t, Lane::F32).f32(),
            m.get(&bound1, t, Lane::F32).f32(),
        );
        if crate::range_select::selects(cmp, start, &grid, &t, [b0, b1]) {
            m.get(&on_true, t, Lane::F32)
        } else {
            Value::from_f32(f32::MIN)
        }
    });
}
