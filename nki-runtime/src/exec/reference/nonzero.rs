//! `nonzero_with_count`: the positions of each processed partition's nonzero elements,
//! compacted, then padding, then their count.

use nki_lang::{DType, nonzero_partition};

use super::{Elems, Lane, Machine, Value, free_elems, unravel};
use crate::operand::Operands;

/// `nonzero_with_count`: on each partition `p` of the source that [`nonzero_partition`] names
/// (`0, 16, …` from the access's start), with `T` source elements (row-major; read as int32
/// when the source is int32, else as fp32, where `-0.0` is zero and a NaN is nonzero), element
/// `j` of the destination's partition `p` is `k_j + offset` for the `j`-th nonzero position
/// `k_j`, `padding` for `j` from the count up to `T − 1`, and the count at `T`; stored as int32
/// lanes (the rule keeps every position plus `offset` within int32). Other partitions are not
/// touched.
pub(super) fn nonzero_with_count(
    m: &mut Machine<'_, '_, '_, '_>,
    ops: &Operands,
    offset: i32,
    padding: i32,
) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let (to, from) = (Elems::own(dst), Elems::own(src));
    let t = free_elems(&src.dims);
    let lane = if src.dtype == DType::I32 {
        Lane::I32
    } else {
        Lane::F32
    };
    for p in (0..src.dims[0]).filter(|&p| nonzero_partition(p)) {
        let mut out: Vec<i32> = (0..t)
            .filter(|&k| {
                let v = m.get(&from, unravel(&src.dims, p, k), lane);
                match lane {
                    Lane::I32 => v.i32() != 0,
                    Lane::F32 => v.f32() != 0.0,
                }
            })
            .map(|k| {
                let k = i32::try_from(k).unwrap_or(i32::MAX);
                k.wrapping_add(offset)
            })
            .collect();
        let count = i32::try_from(out.len()).unwrap_or(i32::MAX);
        out.resize(t, padding);
        out.push(count);
        for (k, v) in out.into_iter().enumerate() {
            m.put(&to, unravel(&dst.dims, p, k), Lane::I32, Value::from_i32(v));
        }
    }
}
