//! `sequence_bounds`: the bounds of the runs of equal segment ids in one partition.

use nki_lang::DType;

use super::{Elems, Lane, Machine, Value, free_elems, unravel};
use crate::operand::Operands;

/// `sequence_bounds`: with `n` ids (the `[1, n]` source, read as int32 when it is int32, else
/// as fp32), element `k` of the destination (row-major) is the start of the run of equal
/// nonzero ids holding id `k`, and element `n + k` its end (exclusive); an id equal to 0
/// (`-0.0` included) gets start `n` and end `-1`. Equality is the lane's (fp32: a NaN id equals
/// nothing, so it is a run of its own). Values are stored as numbers in the destination's
/// dtype (float32 or int32: exact, `n` being at most 65536).
pub(super) fn sequence_bounds(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (dst, ids) = (ops.get(0), ops.get(1));
    let (to, from) = (Elems::own(dst), Elems::own(ids));
    let n = free_elems(&ids.dims);
    let lane = if ids.dtype == DType::I32 {
        Lane::I32
    } else {
        Lane::F32
    };
    let id: Vec<Value> = (0..n)
        .map(|k| m.get(&from, unravel(&ids.dims, 0, k), lane))
        .collect();
    let padding = |v: Value| match lane {
        Lane::I32 => v.i32() == 0,
        Lane::F32 => v.f32() == 0.0,
    };
    let same = |a: Value, b: Value| match lane {
        Lane::I32 => a.i32() == b.i32(),
        Lane::F32 => a.f32() == b.f32(),
    };
    let (mut start, mut end) = (vec![0i64; n], vec![0i64; n]);
    let len = i64::try_from(n).unwrap_or(i64::MAX);
    for k in 0..n {
        start[k] = match k {
            _ if padding(id[k]) => len,
            0 => 0,
            _ if same(id[k], id[k - 1]) => start[k - 1],
            _ => k as i64,
        };
    }
    for k in (0..n).rev() {
        end[k] = match k {
            _ if padding(id[k]) => -1,
            _ if k + 1 == n => len,
            _ if same(id[k], id[k + 1]) => end[k + 1],
            _ => k as i64 + 1,
        };
    }
    for (k, v) in start.into_iter().chain(end).enumerate() {
        // |v| ≤ 65536: exact in fp32.
        #[allow(clippy::cast_precision_loss)]
        m.put(
            &to,
            unravel(&dst.dims, 0, k),
            Lane::F32,
            Value::from_f32(v as f32),
        );
    }
}
