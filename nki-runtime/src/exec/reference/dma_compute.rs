//! `dma_compute`: the DMA engines' fp32 sum of tiles of one shape.

use super::{Elems, Lane, Machine, Value, free_elems, unravel};
use crate::cpu::alu;
use crate::operand::Operands;
use nki_lang::Alu;

/// `dma_compute`: element `k` of each partition `p` of the destination (row-major) is
/// `((s0 + s1) + s2) + …`, `sj` element `k` of partition `p` of source `j` widened to fp32
/// ([`Lane::F32`]'s load), each addition the engines' fp32 add ([`alu::eval`] with
/// [`Alu::Add`]: round to nearest even, a NaN made canonical), stored in the destination's
/// dtype by [`Lane::F32`]'s store (round to nearest even). One source is a conversion. The
/// sources of a partition are all read before its results are written, so a source that is the
/// destination (`dst = dst + src`) reads its old values.
pub(super) fn dma_compute(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let dst = ops.get(0);
    let to = Elems::own(dst);
    let srcs: Vec<_> = (1..=nki_lang::DMA_COMPUTE_SOURCES)
        .map_while(|slot| ops.slot(slot))
        .map(|r| (Elems::own(r), r.dims))
        .collect();
    let n = free_elems(&dst.dims);
    for p in 0..dst.dims[0] {
        let sums: Vec<Value> = (0..n)
            .map(|k| {
                let mut terms = srcs
                    .iter()
                    .map(|(e, dims)| m.get(e, unravel(dims, p, k), Lane::F32).f32());
                let first = terms.next().unwrap_or(0.0);
                Value::from_f32(terms.fold(first, |acc, x| alu::eval(Alu::Add, acc, x)))
            })
            .collect();
        for (k, v) in sums.into_iter().enumerate() {
            m.put(&to, unravel(&dst.dims, p, k), Lane::F32, v);
        }
    }
}
