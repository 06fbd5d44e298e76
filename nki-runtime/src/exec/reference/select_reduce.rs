//! `select_reduce`: a select whose predicate may be negated, with an optional maximum of each
//! partition's results.

use nki_lang::{AccOut, Alu};

use super::{Elems, Lane, Machine, elementwise};
use crate::operand::Operands;

/// `select_reduce`: at each point `t` of the grid (the destination's dims), `on_true[t]` where
/// `predicate[t]` (loaded to fp32) is nonzero, or zero when `reverse`, else `on_false[t]` (an
/// immediate or a `[P, 1]` column), as fp32 lanes stored to the destination's dtype; with a
/// reduction, the `maximum` of each partition's selected fp32 values in the documented fold
/// order goes to element `p` of `reduce_res` ([`elementwise`]).
pub(super) fn select_reduce(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    reverse: bool,
    reduce: Option<AccOut>,
    accumulate: Option<Alu>,
) {
    let grid = ops.get(0).dims;
    let (pred, on_true, on_false) = (
        Elems::over(ops.get(1), &grid),
        Elems::over(ops.get(2), &grid),
        Elems::over(ops.get(3), &grid),
    );
    elementwise(m, ops, Lane::F32, reduce, accumulate, |m, t| {
        let holds = (m.get(&pred, t, Lane::F32).f32() != 0.0) != reverse;
        m.get(if holds { &on_true } else { &on_false }, t, Lane::F32)
    });
}
