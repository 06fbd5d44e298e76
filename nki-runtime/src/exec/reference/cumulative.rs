//! `tensor_scalar_cumulative`: a running reduction of a tensor-scalar result along each
//! partition's free elements.

use nki_lang::Alu;
use nki_lang::ops::cumulative_reset;

use super::{Elems, Lane, Machine, Value, first, free_indices};
use crate::cpu::alu;
use crate::operand::Operands;

/// `tensor_scalar_cumulative`: for each partition `p` of the grid (the destination's dims),
/// the fp32 register starts at `imm1[p]` (`load_reduce`: slot 3 given) or at `op1`'s reset
/// value ([`cumulative_reset`]); then, along the free elements in row-major order,
/// `reg = op1(op0(src[t], imm0[p]), reg)` by [`alu::eval`] (NKI's operand order: the
/// tensor-scalar value is `op1`'s first operand, so `subtract` gives `value − reg`), and
/// `reg` is written at `t` as an fp32 lane stored to the destination's dtype (combined with
/// the old value first when the destination accumulates).
pub(super) fn tensor_scalar_cumulative(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    op: [Alu; 2],
    accumulate: Option<Alu>,
) {
    let dst = ops.get(0);
    let grid = dst.dims;
    let (data, imm0) = (
        Elems::over(ops.get(1), &grid),
        Elems::over(ops.get(2), &grid),
    );
    let imm1 = ops.slot(3).map(|r| Elems::over(r, &grid));
    let to = Elems::own(dst);
    let reset = cumulative_reset(op[1]).unwrap_or(0.0);
    for p in 0..grid[0] {
        let mut reg = imm1.map_or(reset, |i| m.get(&i, first(p), Lane::F32).f32());
        let s = m.get(&imm0, first(p), Lane::F32).f32();
        let results: Vec<_> = free_indices(&grid, p)
            .map(|t| {
                let x = m.get(&data, t, Lane::F32).f32();
                reg = alu::eval(op[1], alu::eval(op[0], x, s), reg);
                let mut v = Value::from_f32(reg);
                if let Some(acc) = accumulate {
                    v = Lane::F32.op(acc, m.get(&to, t, Lane::F32), v);
                }
                (t, v)
            })
            .collect();
        for (t, v) in results {
            m.put(&to, t, Lane::F32, v);
        }
    }
}
