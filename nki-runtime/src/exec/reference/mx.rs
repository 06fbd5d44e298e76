//! NeuronCore-v4's MX (microscaling) instructions: `quantize_mx`, `nc_matmul_mx`.

use nki_lang::{DType, MX_GROUP_FREE, MX_GROUP_PARTITIONS, mx_scale_partition};

use super::{Elems, Machine, free_elems, free_indices, unravel};
use crate::cpu::convert::{from_f32, pack_x4, to_f32, x4_to_f32};
use crate::cpu::{alu, matmul};
use crate::operand::{Operands, Resolved};

/// The largest unbiased exponent of an MX element type (`float8_e4m3fn` 8, `float8_e5m2` 15,
/// `float4_e2m1fn` 2), from its largest finite value.
fn emax(lane: DType) -> i32 {
    lane.max_value().map_or(0, |m| m.log2().floor() as i32)
}

/// The E8M0 code of the scale `quantize_mx` gives a group whose largest magnitude is `amax`
/// for elements of `lane`: `⌊log2 amax⌋ − (emax − 1) + 127`, clamped to the smallest scale
/// (code 0, `2^−127`; an all-zero group gets it too); `0xff` (NaN) when `amax` is not finite.
pub(crate) fn quantize_mx_scale(amax: f32, lane: DType) -> u8 {
    if !amax.is_finite() {
        return 0xff;
    }
    if amax == 0.0 {
        return 0;
    }
    // ⌊log2⌋ of a positive finite f32, subnormals included, exactly.
    let bits = amax.to_bits();
    let field = (bits >> 23) as i32;
    let log2 = if field == 0 {
        -127 - (bits.leading_zeros() as i32 - 9)
    } else {
        field - 127
    };
    (log2 - (emax(lane) - 1) + 127).clamp(0, 254) as u8
}

/// `quantize_mx`: group `(i, f)` is source partitions `8i … 8i+7`, elements `4f … 4f+3`
/// (row-major over the free dims; every access counted from its start). Its scale code goes to
/// partition [`mx_scale_partition`]`(i)`, element `f` of the scale tile; lane `l` of x4 element
/// `f` of destination partition `8i + r` is the source value `(8i + r, 4f + l)` times
/// `2^(127 − code)` (exact but where it falls below f32's normals, far under the lane type's
/// smallest value), stored as the lane type (round to nearest even). A group with a NaN or
/// an infinity gets the NaN scale `0xff` and the lane type's conversion of NaN in every lane.
pub(super) fn quantize_mx(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands) {
    let (dst, src, scale) = (ops.get(0), ops.get(1), ops.get(2));
    let (to, from, sc) = (Elems::own(dst), Elems::own(src), Elems::own(scale));
    let Some(lane) = to.dtype.lane() else {
        return; // the rule admits packed destinations only
    };
    let parts = src.dims[0];
    let src_at: Vec<Vec<_>> = (0..parts)
        .map(|p| free_indices(&src.dims, p).collect())
        .collect();
    let dst_at: Vec<Vec<_>> = (0..parts)
        .map(|p| free_indices(&dst.dims, p).collect())
        .collect();
    let scale_rows = scale.dims[0];
    let scale_at: Vec<Vec<_>> = (0..scale_rows)
        .map(|p| free_indices(&scale.dims, p).collect())
        .collect();
    let x4 = dst_at.first().map_or(0, Vec::len);
    for i in 0..parts / MX_GROUP_PARTITIONS {
        let rows = i * MX_GROUP_PARTITIONS..(i + 1) * MX_GROUP_PARTITIONS;
        for f in 0..x4 {
            let mut group = [[0f32; MX_GROUP_FREE]; MX_GROUP_PARTITIONS];
            for (r, row) in group.iter_mut().enumerate() {
                for (l, v) in row.iter_mut().enumerate() {
                    let at = from.offset(src_at[rows.start + r][f * MX_GROUP_FREE + l]);
                    *v = to_f32(from.dtype, m.read(from.loc, from.dtype, at));
                }
            }
            let values = group.iter().flatten();
            let finite = values.clone().all(|v| v.is_finite());
            let amax = values.fold(0f32, |a, v| a.max(v.abs()));
            let code = if finite {
                quantize_mx_scale(amax, lane)
            } else {
                0xff
            };
            for (r, row) in group.iter().enumerate() {
                let lanes = row.map(|v| {
                    let q = if code == 0xff {
                        f32::NAN
                    } else {
                        // Exact: a power of two in f64, then to f32 (see above).
                        (f64::from(v) * 2f64.powi(127 - i32::from(code))) as f32
                    };
                    from_f32(lane, q) as u8
                });
                let bits = pack_x4(to.dtype, lanes).unwrap_or(0);
                m.write(to.loc, to.dtype, to.offset(dst_at[rows.start + r][f]), bits);
            }
            let sp = mx_scale_partition(i);
            if let Some(at) = scale_at.get(sp).and_then(|row| row.get(f)) {
                m.write(sc.loc, sc.dtype, sc.offset(*at), u32::from(code));
            }
        }
    }
}

/// One accumulation step of `nc_matmul_mx`: `acc + p` rounded once to f32 (nearest even), `p`
/// a dequantized product formed exactly in f64 (lane significands of at most 4 bits, times a
/// power of two); a result below f32's normals is flushed to a zero of its sign as
/// `nc_matmul`'s step flushes (tiny after rounding with an unbounded exponent).
fn mx_step(acc: f32, p: f64) -> f32 {
    let c = f64::from(acc);
    let s = p + c;
    // `s` is exact, or the smaller term lies below 2^-29 of the larger one's f32 ulp (a lane
    // product has at most 8 significant bits, the accumulator 24): no f32 midpoint is then
    // within reach, and rounding `s` once more to f32 rounds the exact sum.
    let r = s as f32;
    if r != 0.0 && r.abs() <= f32::MIN_POSITIVE {
        // 2^-126 − 2^-151: below it, 24-bit rounding with an unbounded exponent stays tiny.
        let limit = f64::from(f32::MIN_POSITIVE) * (1.0 - 2f64.powi(-25));
        if s.abs() < limit {
            return f32::from_bits(r.to_bits() & 0x8000_0000);
        }
    }
    r
}

/// Each x4 element's four values times its group's scale, by column: `cols[i][k]` for free
/// element `i` (row-major) and partition `k` of operand `data`, the scale tile `scale`
/// holding group `k / 8`'s at partition [`mx_scale_partition`]`(k / 8)`, element `i`. A NaN
/// scale (`0xff`) gives NaN values.
fn dequantized(
    m: &Machine<'_, '_, '_, '_>,
    data: &Resolved,
    scale: &Resolved,
) -> Vec<Vec<[f64; 4]>> {
    let (d, sc) = (Elems::own(data), Elems::own(scale));
    (0..free_elems(&data.dims))
        .map(|i| {
            (0..data.dims[0])
                .map(|k| {
                    let bits = m.read(d.loc, d.dtype, d.offset(unravel(&data.dims, k, i)));
                    let sp = mx_scale_partition(k / MX_GROUP_PARTITIONS);
                    let code = m.read(sc.loc, sc.dtype, sc.offset(unravel(&scale.dims, sp, i)));
                    let factor = if code & 0xff == 0xff {
                        f64::NAN
                    } else {
                        2f64.powi((code & 0xff) as i32 - 127)
                    };
                    let lanes = x4_to_f32(d.dtype, bits).unwrap_or([f32::NAN; 4]);
                    lanes.map(|v| f64::from(v) * factor)
                })
                .collect()
        })
        .collect()
}

/// `nc_matmul_mx`: `dst[m, n] = acc₀ + Σ_k Σ_l S[k][m][l] · M[k][n][l]`, the dequantized lanes
/// ([`dequantized`]), each product exact, added one at a time (`k` ascending, the four lanes
/// of an x4 element in lane order) with one rounding to f32 per step ([`mx_step`]); `acc₀` is
/// `dst`'s old value (DAZ, read as f32) when the instruction accumulates, `-0.0` otherwise. A
/// NaN result is f32's canonical NaN; the result is stored as `dst`'s dtype (bf16: rounded
/// to nearest even).
pub(super) fn nc_matmul_mx(m: &mut Machine<'_, '_, '_, '_>, ops: &Operands, accumulate: bool) {
    let (dst, st, mv) = (ops.get(0), ops.get(1), ops.get(2));
    let (ss, ms) = (ops.get(3), ops.get(4));
    let s_cols = dequantized(m, st, ss);
    let m_cols = dequantized(m, mv, ms);
    let out = Elems::own(dst);
    for (mi, s_col) in s_cols.iter().enumerate() {
        for (ni, m_col) in m_cols.iter().enumerate() {
            let at = out.offset(unravel(&dst.dims, mi, ni));
            let mut acc = if accumulate {
                matmul::daz(to_f32(out.dtype, m.read(out.loc, out.dtype, at)))
            } else {
                -0.0
            };
            for (a, b) in s_col.iter().zip(m_col) {
                for l in 0..MX_GROUP_FREE {
                    let p = a[l] * b[l];
                    acc = if p.is_nan() || acc.is_nan() {
                        f32::NAN
                    } else {
                        mx_step(acc, p)
                    };
                }
            }
            let acc = if acc.is_nan() {
                alu::CANONICAL_NAN
            } else {
                acc
            };
            m.write(out.loc, out.dtype, at, from_f32(out.dtype, acc));
        }
    }
}
