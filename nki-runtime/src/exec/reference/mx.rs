//! NeuronCore-v4's MX (microscaling) instructions: `quantize_mx`.

use nki_lang::{DType, MX_GROUP_FREE, MX_GROUP_PARTITIONS, mx_scale_partition};

use super::{Elems, Machine, free_indices};
use crate::cpu::convert::{from_f32, pack_x4, to_f32};
use crate::operand::Operands;

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
