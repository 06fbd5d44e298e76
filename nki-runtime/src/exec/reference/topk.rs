//! `topk`: the K largest values of each 16-partition snake, ascending, in the snake layout.

use nki_lang::{DType, GATHER_GROUP, topk_place};

use super::{Elems, Machine, free_elems, unravel};
use crate::cpu::convert;
use crate::operand::Operands;
use crate::top8::rank;

/// `topk`: for each group `g` of 16 partitions of `src` (counted from the access's start),
/// the snake's values `v_i` (`i < n`, at partition `16g + i mod 16`, free position `i / 16`,
/// row-major) are ordered by [`rank`] (every NaN above +∞, −0 below +0), the lower index first
/// among equal keys; the first `K` (`K` the free size of `val_dst`) are written in reverse,
/// ascending: value `j` of the result is the `(K − 1 − j)`-th, its bf16 bits at snake
/// position `j` of `val_dst` (partition `16g + j mod 16`, free position `j / 16`) and its
/// snake index `i` as uint32 at the same place of `idx_dst`. Every value of a group is read
/// before any of its results is written; no other element is touched.
pub(super) fn topk(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, n: u16) {
    let (val, src, idx) = (ops.get(0), ops.get(1), ops.get(2));
    let (to_v, from, to_i) = (Elems::own(val), Elems::own(src), Elems::own(idx));
    let k = free_elems(&val.dims);
    let n = usize::from(n);
    for base in (0..src.dims[0]).step_by(GATHER_GROUP) {
        let at = |dims, j: usize| {
            let (r, c) = topk_place(j);
            unravel(dims, base + r, c)
        };
        let bits: Vec<u32> = (0..n)
            .map(|i| m.read(from.loc, src.dtype, from.offset(at(&src.dims, i))))
            .collect();
        let keys: Vec<f32> = bits
            .iter()
            .map(|&b| convert::to_f32(src.dtype, b))
            .collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| rank(keys[b], keys[a]).then(a.cmp(&b)));
        for (j, &i) in order.iter().take(k).rev().enumerate() {
            m.write(to_v.loc, val.dtype, to_v.offset(at(&val.dims, j)), bits[i]);
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            m.write(to_i.loc, DType::U32, to_i.offset(at(&idx.dims, j)), index);
        }
    }
}
