//! NKI's MX (microscaling) support on Trn3: the packed `_x4` types and their conversions
//! against references written here (a minifloat decoder in f64 and a nearest-code search),
//! DMA copies of packed tensors bit for bit.

use nki::ndarray::Array2;
use nki::prelude::*;
use nki::{F4E2M1FnX4, F8E4M3FnX4, F8E5M2X4};

// ---------------------------------------------------------------------------------------------
// Independent references.
// ---------------------------------------------------------------------------------------------

/// A small float format: `e` exponent and `m` mantissa bits, and how its top codes are used.
#[derive(Copy, Clone, Debug)]
struct Mini {
    e: u32,
    m: u32,
    /// IEEE-style: the top exponent is inf (mantissa 0) and NaN (else).
    ieee: bool,
    /// OCP "fn": no inf, only the all-ones code is NaN (e4m3fn); false with `ieee` false
    /// means no inf or NaN at all (e2m1).
    fn_nan: bool,
}

const E5M2: Mini = Mini {
    e: 5,
    m: 2,
    ieee: true,
    fn_nan: false,
};
const E4M3FN: Mini = Mini {
    e: 4,
    m: 3,
    ieee: false,
    fn_nan: true,
};
const E2M1: Mini = Mini {
    e: 2,
    m: 1,
    ieee: false,
    fn_nan: false,
};

impl Mini {
    fn bits(self) -> u32 {
        1 + self.e + self.m
    }

    /// The value of a code (NaN for NaN codes).
    fn decode(self, code: u32) -> f64 {
        let sign = if code >> (self.e + self.m) & 1 == 1 {
            -1.0
        } else {
            1.0
        };
        let exp = (code >> self.m) & ((1 << self.e) - 1);
        let man = code & ((1 << self.m) - 1);
        let top = (1 << self.e) - 1;
        if self.ieee && exp == top {
            return if man == 0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        if self.fn_nan && exp == top && man == (1 << self.m) - 1 {
            return f64::NAN;
        }
        let bias = (1i32 << (self.e - 1)) - 1;
        let frac = f64::from(man) / f64::from(1u32 << self.m);
        if exp == 0 {
            sign * frac * 2f64.powi(1 - bias)
        } else {
            sign * (1.0 + frac) * 2f64.powi(exp as i32 - bias)
        }
    }

    /// The code of the nearest finite value to `x` (ties to the even code), found by search
    /// over every code; `None` when `x` lies beyond the largest finite value by half a step or
    /// more (the overflow the format resolves its own way).
    fn nearest(self, x: f64) -> Option<u32> {
        let mut best: Option<(f64, u32)> = None;
        let mut max = 0f64;
        for c in 0..1u32 << self.bits() {
            let v = self.decode(c);
            if !v.is_finite() {
                continue;
            }
            max = max.max(v.abs());
            let d = (v - x).abs();
            // Same distance: prefer the even code (and +0 over -0 for a positive x).
            let better = match best {
                None => true,
                Some((bd, bc)) => {
                    d < bd
                        || (d == bd
                            && (c & 1 == 0 && bc & 1 == 1
                                || (c & 1 == bc & 1
                                    && v.is_sign_negative() == x.is_sign_negative())))
                }
            };
            if better {
                best = Some((d, c));
            }
        }
        let ulp_top = 2f64.powi(
            (max.log2().floor() as i32) - self.m as i32, // the step at the top binade
        );
        if x.abs() >= max + ulp_top / 2.0 {
            return None;
        }
        best.map(|b| b.1)
    }
}

/// NaN-aware equality of an f32 with an f64 reference.
fn same(got: f32, want: f64) -> bool {
    (want.is_nan() && got.is_nan()) || f64::from(got) == want
}

// ---------------------------------------------------------------------------------------------
// The packed types' conversions, over every bit pattern of each lane.
// ---------------------------------------------------------------------------------------------

/// Every 16-bit pattern of `float4_e2m1fn_x4`: lane `j` is bits `4j … 4j+3`.
#[test]
fn fp4_x4_unpacks_every_bit_pattern() {
    for bits in 0..=u16::MAX {
        let v = F4E2M1FnX4(bits);
        let lanes = v.lanes();
        let values = v.to_f32s();
        for j in 0..4 {
            let code = u32::from(bits >> (4 * j)) & 0xf;
            assert_eq!(u32::from(lanes[j]), code, "{bits:#06x} lane {j}");
            assert!(same(values[j], E2M1.decode(code)), "{bits:#06x} lane {j}");
        }
        assert_eq!(F4E2M1FnX4::from_lanes(lanes), v);
        // Every value packs back to its code (fp4 has no NaN; -0 keeps its sign).
        assert_eq!(F4E2M1FnX4::from_f32s(values), v, "{bits:#06x}");
    }
}

/// Every code of every lane of the two fp8 `_x4` types (each lane independent: lane `j` is
/// bits `8j … 8j+7`), with the other lanes running through every code too.
#[test]
fn fp8_x4_unpacks_every_code_in_every_lane() {
    for (mini, name) in [(E5M2, "e5m2"), (E4M3FN, "e4m3fn")] {
        for i in 0..=u16::MAX {
            let (a, b) = ((i & 0xff) as u32, (i >> 8) as u32);
            // Lanes 0 and 1 cover every pair; 2 and 3 every code, shifted.
            let codes = [a, b, a ^ 0x5a, b.wrapping_add(a) & 0xff];
            let bits = codes
                .iter()
                .enumerate()
                .fold(0u32, |w, (j, &c)| w | c << (8 * j));
            let (lanes, values) = if name == "e5m2" {
                let v = F8E5M2X4(bits);
                assert_eq!(F8E5M2X4::from_lanes(v.lanes()), v);
                (v.lanes(), v.to_f32s())
            } else {
                let v = F8E4M3FnX4(bits);
                assert_eq!(F8E4M3FnX4::from_lanes(v.lanes()), v);
                (v.lanes(), v.to_f32s())
            };
            for j in 0..4 {
                assert_eq!(
                    u32::from(lanes[j]),
                    codes[j],
                    "{name} {bits:#010x} lane {j}"
                );
                assert!(
                    same(values[j], mini.decode(codes[j])),
                    "{name} {bits:#010x} lane {j}: {} vs {}",
                    values[j],
                    mini.decode(codes[j])
                );
            }
        }
    }
}

/// Packing rounds each lane to nearest, ties to even, as the reference's search over every
/// code: every value, every midpoint between neighbours, and the overflow past the top.
#[test]
fn x4_packs_every_value_and_midpoint_to_nearest_even() {
    for (mini, kind) in [(E5M2, 0), (E4M3FN, 1), (E2M1, 2)] {
        let pack = |x: f32| -> u32 {
            let xs = [x, 0.0, -x, 1.0];
            let (got, lanes) = match kind {
                0 => {
                    let v = F8E5M2X4::from_f32s(xs);
                    (v.lanes()[0], v.lanes())
                }
                1 => {
                    let v = F8E4M3FnX4::from_f32s(xs);
                    (v.lanes()[0], v.lanes())
                }
                _ => {
                    let v = F4E2M1FnX4::from_f32s(xs);
                    (v.lanes()[0], v.lanes())
                }
            };
            // Lane 1 holds +0, lane 3 one; lane 2 is lane 0 negated.
            assert_eq!(lanes[1], 0, "{mini:?} {x}");
            assert_eq!(u32::from(lanes[3]), mini.nearest(1.0).unwrap());
            let sign = 1 << (mini.e + mini.m);
            if x != 0.0 {
                assert_eq!(u32::from(lanes[2]), u32::from(got) ^ sign, "{mini:?} {x}");
            }
            u32::from(got)
        };
        let mut finite: Vec<f64> = (0..1u32 << mini.bits())
            .map(|c| mini.decode(c))
            .filter(|v| v.is_finite())
            .collect();
        finite.sort_by(f64::total_cmp);
        finite.dedup();
        let mut points = finite.clone();
        points.extend(finite.windows(2).map(|w| (w[0] + w[1]) / 2.0));
        for x in points {
            let got = pack(x as f32);
            match mini.nearest(x) {
                Some(code) => assert_eq!(got, code, "{mini:?} {x}"),
                None => unreachable!("the midpoints lie within the finite range"),
            }
        }
        // Past the top by half a step or more: e5m2 gives inf, e4m3fn its NaN, e2m1 saturates.
        let top = *finite.last().unwrap();
        let big = pack((top * 2.0) as f32);
        let want = match kind {
            0 => 0x7c,
            1 => 0x7f,
            _ => mini.nearest(top).unwrap(),
        };
        assert_eq!(big, want, "{mini:?} overflow");
    }
}

// ---------------------------------------------------------------------------------------------
// DMA moves packed tensors bit for bit.
// ---------------------------------------------------------------------------------------------

#[kernel(target = trn3)]
fn packed_round_trip(
    a: Hbm<float8_e4m3fn_x4, 128, 16>,
    b: Hbm<float8_e5m2_x4, 64, 8>,
    c: Hbm<float4_e2m1fn_x4, 32, 24>,
) -> (
    Hbm<float8_e4m3fn_x4, 128, 16>,
    Hbm<float8_e5m2_x4, 64, 8>,
    Hbm<float4_e2m1fn_x4, 32, 24>,
) {
    let oa = ndarray([128, 16], float8_e4m3fn_x4, SharedHbm);
    let ob = ndarray([64, 8], float8_e5m2_x4, SharedHbm);
    let oc = ndarray([32, 24], float4_e2m1fn_x4, SharedHbm);
    let ta = ndarray([128, 16], float8_e4m3fn_x4, Sbuf);
    let tb = ndarray([64, 8], float8_e5m2_x4, Sbuf);
    let tc = ndarray([32, 24], float4_e2m1fn_x4, Sbuf);
    nisa::dma_copy(dst = ta, src = a);
    nisa::dma_copy(dst = tb, src = b);
    nisa::dma_copy(dst = tc, src = c);
    nisa::dma_copy(dst = oa, src = ta);
    nisa::dma_copy(dst = ob, src = tb);
    nisa::dma_copy(dst = oc, src = tc);
    (oa, ob, oc)
}

#[test]
fn dma_copies_packed_tensors_bit_for_bit() {
    let mut x = 0x9e37_79b9u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let a = Array2::from_shape_fn((128, 16), |_| F8E4M3FnX4(next()));
    let b = Array2::from_shape_fn((64, 8), |_| F8E5M2X4(next()));
    let c = Array2::from_shape_fn((32, 24), |_| F4E2M1FnX4(next() as u16));
    let mut core = NeuronCore::new(Target::Trn3);
    let (oa, ob, oc) = packed_round_trip::host(&mut core, a.view(), b.view(), c.view()).unwrap();
    assert_eq!(oa, a);
    assert_eq!(ob, b);
    assert_eq!(oc, c);
}

// ---------------------------------------------------------------------------------------------
// quantize_mx against a by-hand f64 quantization.
// ---------------------------------------------------------------------------------------------

/// The largest unbiased exponent of an element format (8 for e4m3fn, 15 for e5m2).
fn emax(mini: Mini) -> i32 {
    (0..1u32 << mini.bits())
        .map(|c| mini.decode(c))
        .filter(|v| v.is_finite())
        .fold(0f64, f64::max)
        .log2()
        .floor() as i32
}

/// NKI's `quantize_mx` on `src` (`[P, F]` values): one scale code per group of 8 partitions ×
/// 4 values (`[P / 8, F / 4]`, contiguous), and each value's lane code.
fn quantize_ref(src: &Array2<f64>, mini: Mini) -> (Array2<u8>, Array2<u32>) {
    let (p, f) = src.dim();
    let mut scales = Array2::<u8>::zeros((p / 8, f / 4));
    let mut codes = Array2::<u32>::zeros((p, f));
    for i in 0..p / 8 {
        for g in 0..f / 4 {
            let group = || (0..8).flat_map(move |r| (0..4).map(move |l| (8 * i + r, 4 * g + l)));
            let amax = group().map(|ix| src[ix].abs()).fold(0f64, f64::max);
            // X = 2^(floor(log2 amax) - (emax - 1)); 2^-127 for an all-zero group.
            let code = if amax == 0.0 {
                0
            } else {
                (amax.log2().floor() as i32 - (emax(mini) - 1) + 127).clamp(0, 254)
            };
            scales[[i, g]] = code as u8;
            for ix in group() {
                let q = src[ix] / 2f64.powi(code - 127);
                codes[ix] = mini.nearest(q).expect("amax / X < 2^emax: no overflow");
            }
        }
    }
    (scales, codes)
}

/// bf16 values with a spread of magnitudes per group: some groups all zero, some with
/// subnormal-scale values, ties in the lane type.
fn mx_inputs(p: usize, f: usize, seed: u64) -> Array2<bf16> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    Array2::from_shape_fn((p, f), |(r, c)| {
        let group = (r / 8) * (f / 4) + c / 4;
        let e = match group % 5 {
            0 => -3,
            1 => 10,
            2 => -120,
            3 => 60,
            _ => 0,
        };
        if group % 7 == 6 {
            return bf16::ZERO; // an all-zero group
        }
        let m = (next() % 256) as f32 / 64.0 - 2.0;
        bf16::from_f32(m * 2f32.powi(e + (next() % 5) as i32))
    })
}

#[kernel(target = trn3)]
fn quantize_e4m3fn(x: Hbm<bf16, 128, 64>) -> (Hbm<float8_e4m3fn_x4, 128, 16>, Hbm<u8, 128, 16>) {
    let out = ndarray([128, 16], float8_e4m3fn_x4, SharedHbm);
    let out_scale = ndarray([128, 16], u8, SharedHbm);
    let src = ndarray([128, 64], bf16, Sbuf);
    nisa::dma_copy(dst = src, src = x);
    let data = ndarray([128, 16], float8_e4m3fn_x4, Sbuf);
    // More than 32 partitions: the scale tile spans the quadrants (oversized).
    let scale = ndarray([128, 16], u8, Sbuf);
    nisa::memset(dst = scale, value = 0);
    nisa::quantize_mx(dst = data, src = src, dst_scale = scale);
    nisa::dma_copy(dst = out, src = data);
    nisa::dma_copy(dst = out_scale, src = scale);
    (out, out_scale)
}

#[kernel(target = trn3)]
fn quantize_e5m2_small(
    x: Hbm<f16, 32, 32>,
) -> (Hbm<float8_e5m2_x4, 32, 8>, Hbm<float8_e8m0fnu, 4, 8>) {
    let out = ndarray([32, 8], float8_e5m2_x4, SharedHbm);
    let out_scale = ndarray([4, 8], float8_e8m0fnu, SharedHbm);
    let src = ndarray([32, 32], f16, Sbuf);
    nisa::dma_copy(dst = src, src = x);
    let data = ndarray([32, 8], float8_e5m2_x4, Sbuf);
    // Up to 32 partitions: P / 8 scale partitions.
    let scale = ndarray([4, 8], float8_e8m0fnu, Sbuf);
    nisa::quantize_mx(dst = data, src = src, dst_scale = scale);
    nisa::dma_copy(dst = out, src = data);
    nisa::dma_copy(dst = out_scale, src = scale);
    (out, out_scale)
}

/// Lane codes of fp8 x4 words, `[P, F/4]` → `[P, F]`.
fn fp8_lanes(words: impl Fn(usize, usize) -> u32, p: usize, f: usize) -> Array2<u32> {
    Array2::from_shape_fn((p, f), |(r, c)| (words(r, c / 4) >> (8 * (c % 4))) & 0xff)
}

#[test]
fn quantize_mx_e4m3fn_over_four_quadrants() {
    let x = mx_inputs(128, 64, 5);
    let xf = x.mapv(|v| f64::from(v.to_f32()));
    let (want_scales, want_codes) = quantize_ref(&xf, E4M3FN);
    let mut core = NeuronCore::new(Target::Trn3);
    let (data, scale) = quantize_e4m3fn::host(&mut core, x.view()).unwrap();
    let got = fp8_lanes(|r, c| data[[r, c]].0, 128, 64);
    assert_eq!(got, want_codes);
    // Group i's scale at partition 32·(i / 4) + i % 4; the others keep the memset's 0.
    for sp in 0..128 {
        for g in 0..16 {
            let want = if sp % 32 < 4 {
                want_scales[[sp / 32 * 4 + sp % 32, g]]
            } else {
                0
            };
            assert_eq!(scale[[sp, g]], want, "scale partition {sp}, column {g}");
        }
    }
    // The groups used several scales, the zero group the smallest.
    assert!(want_scales.iter().any(|&c| c == 0));
    assert!(want_scales.iter().any(|&c| c > 127 + 50));
}

#[test]
fn quantize_mx_e5m2_with_p_over_8_scales() {
    let x = mx_inputs(32, 32, 9).mapv(|v| f16::from_f32(v.to_f32().clamp(-60000.0, 60000.0)));
    let xf = x.mapv(|v| f64::from(v.to_f32()));
    let (want_scales, want_codes) = quantize_ref(&xf, E5M2);
    let mut core = NeuronCore::new(Target::Trn3);
    let (data, scale) = quantize_e5m2_small::host(&mut core, x.view()).unwrap();
    assert_eq!(fp8_lanes(|r, c| data[[r, c]].0, 32, 32), want_codes);
    assert_eq!(scale.mapv(|s| s.0), want_scales);
}

// ---------------------------------------------------------------------------------------------
// nc_matmul_mx against an f64 matmul of the dequantized values.
// ---------------------------------------------------------------------------------------------

/// The dequantized values of `quantize_ref`'s output: `code`'s lane value times the group's
/// scale, `[P, F]`.
fn dequantize_ref(scales: &Array2<u8>, codes: &Array2<u32>, mini: Mini) -> Array2<f64> {
    Array2::from_shape_fn(codes.dim(), |(p, f)| {
        mini.decode(codes[[p, f]]) * 2f64.powi(i32::from(scales[[p / 8, f / 4]]) - 127)
    })
}

/// `Σ_k Σ_l a[k, 4m + l] · b[k, 4n + l]` and the sum of the terms' magnitudes.
fn mx_matmul_ref(a: &Array2<f64>, b: &Array2<f64>) -> (Array2<f64>, Array2<f64>) {
    let (k, fm) = a.dim();
    let fn_ = b.ncols();
    let sum = |abs: bool| {
        Array2::from_shape_fn((fm / 4, fn_ / 4), |(m, n)| {
            (0..k)
                .flat_map(|p| (0..4).map(move |l| (p, l)))
                .map(|(p, l)| {
                    let t = a[[p, 4 * m + l]] * b[[p, 4 * n + l]];
                    if abs { t.abs() } else { t }
                })
                .sum::<f64>()
        })
    };
    (sum(false), sum(true))
}

#[kernel(target = trn3)]
fn quantize_then_matmul(s: Hbm<bf16, 128, 256>, m: Hbm<bf16, 128, 512>) -> Hbm<f32, 64, 128> {
    let out = ndarray([64, 128], f32, SharedHbm);
    let s_src = ndarray([128, 256], bf16, Sbuf);
    let m_src = ndarray([128, 512], bf16, Sbuf);
    nisa::dma_copy(dst = s_src, src = s);
    nisa::dma_copy(dst = m_src, src = m);
    let s_q = ndarray([128, 64], float8_e4m3fn_x4, Sbuf);
    let m_q = ndarray([128, 128], float8_e5m2_x4, Sbuf);
    // One oversized scale tile for both: the stationary's at partitions 32q..32q+3, the
    // moving's 4 partitions further (NKI's packed-scale example).
    let scales = ndarray([128, 128], u8, Sbuf);
    nisa::memset(dst = scales, value = 0);
    nisa::quantize_mx(dst = s_q, src = s_src, dst_scale = scales[[0..128, 0..64]]);
    nisa::quantize_mx(dst = m_q, src = m_src, dst_scale = scales[[4..128, 0..128]]);
    let acc = ndarray([64, 128], f32, Psum);
    nisa::nc_matmul_mx(
        dst = acc,
        stationary = s_q,
        moving = m_q,
        stationary_scale = scales[[0..128, 0..64]],
        moving_scale = scales[[4..128, 0..128]],
        accumulate = false,
    );
    let res = ndarray([64, 128], f32, Sbuf);
    nisa::tensor_copy(dst = res, src = acc);
    nisa::dma_copy(dst = out, src = res);
    out
}

#[test]
fn quantize_mx_then_nc_matmul_mx_is_the_matmul_of_the_dequantized_values() {
    // Magnitudes up to about 2^30 (the products stay within fp32's range).
    let moderate = |v: bf16| {
        let x = v.to_f32();
        bf16::from_f32(if x.abs() > 1e9 { x * 2f32.powi(-40) } else { x })
    };
    let s = mx_inputs(128, 256, 21).mapv(moderate);
    let m = mx_inputs(128, 512, 22).mapv(moderate);
    let (sf, mf) = (
        s.mapv(|v| f64::from(v.to_f32())),
        m.mapv(|v| f64::from(v.to_f32())),
    );
    let (ss, sc) = quantize_ref(&sf, E4M3FN);
    let (ms, mc) = quantize_ref(&mf, E5M2);
    let (want, mag) = mx_matmul_ref(
        &dequantize_ref(&ss, &sc, E4M3FN),
        &dequantize_ref(&ms, &mc, E5M2),
    );
    let mut core = NeuronCore::new(Target::Trn3);
    let got = quantize_then_matmul::host(&mut core, s.view(), m.view()).unwrap();
    for ((ix, &g), (&w, &a)) in got.indexed_iter().zip(want.iter().zip(mag.iter())) {
        // fp32 accumulation of 512 terms: within 512 roundings of the terms' magnitudes.
        let tol = 512.0 * 2f64.powi(-24) * a;
        assert!(
            (f64::from(g) - w).abs() <= tol || (f64::from(g) == w),
            "{ix:?}: {g} vs {w} (tolerance {tol})"
        );
    }
    let prog = quantize_then_matmul::KERNEL.program();
    assert!(
        crate::common::has_instr(prog, "Tensor", "nc_matmul_mx"),
        "{prog}"
    );
}

#[kernel(target = trn3)]
fn offline_fp4_matmul(
    s: Hbm<float4_e2m1fn_x4, 32, 16>,
    s_scale: Hbm<u8, 4, 16>,
    m: Hbm<float8_e4m3fn_x4, 32, 8>,
    m_scale: Hbm<float8_e8m0fnu, 4, 8>,
) -> Hbm<f32, 16, 8> {
    let out = ndarray([16, 8], f32, SharedHbm);
    let s_t = ndarray([32, 16], float4_e2m1fn_x4, Sbuf);
    let ss_t = ndarray([4, 16], u8, Sbuf);
    let m_t = ndarray([32, 8], float8_e4m3fn_x4, Sbuf);
    let ms_t = ndarray([4, 8], float8_e8m0fnu, Sbuf);
    nisa::dma_copy(dst = s_t, src = s);
    nisa::dma_copy(dst = ss_t, src = s_scale);
    nisa::dma_copy(dst = m_t, src = m);
    nisa::dma_copy(dst = ms_t, src = m_scale);
    let acc = ndarray([16, 8], f32, Psum);
    // Twice: the second accumulates.
    nisa::nc_matmul_mx(
        dst = acc,
        stationary = s_t,
        moving = m_t,
        stationary_scale = ss_t,
        moving_scale = ms_t,
        accumulate = false,
    );
    // (On the last 32-row tile of the PE array: the same result.)
    nisa::nc_matmul_mx(
        dst = acc,
        stationary = s_t,
        moving = m_t,
        stationary_scale = ss_t,
        moving_scale = ms_t,
        accumulate = true,
        tile_position = (96, 0),
        tile_size = (32, 128),
    );
    let res = ndarray([16, 8], f32, Sbuf);
    nisa::tensor_copy(dst = res, src = acc);
    nisa::dma_copy(dst = out, src = res);
    out
}

#[test]
fn offline_mxfp4_by_mxfp8_matmul_accumulates_exactly() {
    let mut x = 0x2545_f491u32;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    // Scales 1 or 2, fp8 lanes of magnitude 1 to 31 (multiples of 1/8), fp4 multiples of
    // 1/2: every product is a multiple of 2^-4 below 2^9, every partial sum (256 terms, twice)
    // a multiple of 2^-4 below 2^18, exact in fp32.
    let s = Array2::from_shape_fn((32, 16), |_| F4E2M1FnX4(next() as u16));
    let ss = Array2::from_shape_fn((4, 16), |_| (127 + next() % 2) as u8);
    let m = Array2::from_shape_fn((32, 8), |_| {
        let lanes = [0, 1, 2, 3].map(|_| {
            let r = next();
            ((r & 0x80) | ((7 + (r >> 8) % 4) << 3) | (r & 7)) as u8
        });
        F8E4M3FnX4::from_lanes(lanes)
    });
    let ms = Array2::from_shape_fn((4, 8), |_| nki::F8E8M0Fnu((127 + next() % 2) as u8));
    let sv = Array2::from_shape_fn((32, 64), |(k, f)| {
        E2M1.decode(u32::from(s[[k, f / 4]].0 >> (4 * (f % 4))) & 0xf)
            * 2f64.powi(i32::from(ss[[k / 8, f / 4]]) - 127)
    });
    let mv = Array2::from_shape_fn((32, 32), |(k, f)| {
        E4M3FN.decode((m[[k, f / 4]].0 >> (8 * (f % 4))) & 0xff)
            * 2f64.powi(i32::from(ms[[k / 8, f / 4]].0) - 127)
    });
    let (want, _) = mx_matmul_ref(&sv, &mv);
    let mut core = NeuronCore::new(Target::Trn3);
    let got =
        offline_fp4_matmul::host(&mut core, s.view(), ss.view(), m.view(), ms.view()).unwrap();
    for (ix, &g) in got.indexed_iter() {
        assert_eq!(f64::from(g), 2.0 * want[ix], "{ix:?}");
    }
}
