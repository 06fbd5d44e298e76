//! Every dtype end to end (loaded, computed through fp32, stored, cast by DMA both ways,
//! filled), bit operations on integer tiles, logical operations on bool tiles, GpSimd's int32
//! arithmetic, and the dtypes of one-operand operations. The conversions are checked against
//! references written here from `docs/dtypes.md` (fp8 by a nearest-value search over the
//! format's values, integers by `round_ties_even` and saturation), not the model's converters.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2, s};
use nki::prelude::*;
use nki::program::DType;
use nki::{Bool, F4E2M1Fn, F8E4M3, F8E4M3Fn, F8E5M2, F8E8M0Fnu, Tf32};

const P: usize = 128;
const F: usize = 64;

// ---------------------------------------------------------------------------------------------
// Independent conversion references.
// ---------------------------------------------------------------------------------------------

/// An IEEE-style binary float format with `e` exponent and `m` mantissa bits in one byte.
#[derive(Copy, Clone)]
struct Fp8 {
    e: u32,
    m: u32,
}

impl Fp8 {
    const E4M3: Fp8 = Fp8 { e: 4, m: 3 };
    const E5M2: Fp8 = Fp8 { e: 5, m: 2 };

    fn bias(self) -> i32 {
        (1 << (self.e - 1)) - 1
    }

    /// The value of `bits` (NaN for the NaN codes).
    fn decode(self, bits: u8) -> f64 {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let exp = (bits as u32 >> self.m) & ((1 << self.e) - 1);
        let man = bits as u32 & ((1 << self.m) - 1);
        let frac = man as f64 / (1u32 << self.m) as f64;
        let v = if exp == (1 << self.e) - 1 {
            if man == 0 { f64::INFINITY } else { f64::NAN }
        } else if exp == 0 {
            frac * 2f64.powi(1 - self.bias())
        } else {
            (1.0 + frac) * 2f64.powi(exp as i32 - self.bias())
        };
        sign * v
    }

    /// Round to nearest, ties to the even code; magnitudes at or past the midpoint between the
    /// largest finite value and the next power of two become infinity.
    fn encode(self, x: f32) -> u8 {
        assert!(!x.is_nan());
        let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
        let mag = (x as f64).abs();
        let inf_code = (((1u32 << self.e) - 1) << self.m) as u8;
        // Codes 0..inf_code are the finite magnitudes in increasing order; inf_code stands for
        // the next power of two, where rounding to infinity starts.
        let value = |c: u8| {
            if c == inf_code {
                2f64.powi((1 << self.e) - 1 - self.bias())
            } else {
                self.decode(c)
            }
        };
        let mut best = 0u8;
        for c in 1..=inf_code {
            let (d, db) = ((value(c) - mag).abs(), (value(best) - mag).abs());
            if d < db || (d == db && c % 2 == 0) {
                best = c;
            }
        }
        if mag > value(inf_code) {
            best = inf_code;
        }
        sign | best
    }
}

/// The OCP formats NKI 0.1–0.5 added, from their definitions (OFP8 E4M3 "FN"; OCP MX E2M1
/// and E8M0) and `docs/dtypes.md`'s store rules.
#[derive(Copy, Clone)]
enum Ocp {
    E4M3Fn,
    E2M1Fn,
    E8M0Fnu,
}

impl Ocp {
    /// The finite codes (nonnegative ones for the signed formats), in increasing value.
    fn finite_codes(self) -> core::ops::Range<u8> {
        match self {
            Ocp::E4M3Fn => 0..0x7f,
            Ocp::E2M1Fn => 0..0x8,
            Ocp::E8M0Fnu => 0..0xff,
        }
    }

    /// The value of `bits` (NaN for the NaN codes).
    fn decode(self, bits: u8) -> f64 {
        match self {
            Ocp::E4M3Fn => {
                let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
                let (e, m) = ((bits >> 3) & 0xf, f64::from(bits & 7) / 8.0);
                sign * match (e, m) {
                    (15, m) if m == 7.0 / 8.0 => f64::NAN,
                    (0, m) => m / 64.0,
                    (e, m) => (1.0 + m) * 2f64.powi(i32::from(e) - 7),
                }
            }
            Ocp::E2M1Fn => {
                let sign = if bits & 0x8 != 0 { -1.0 } else { 1.0 };
                let (e, m) = ((bits >> 1) & 3, f64::from(bits & 1) / 2.0);
                sign * if e == 0 {
                    m
                } else {
                    (1.0 + m) * 2f64.powi(i32::from(e) - 1)
                }
            }
            Ocp::E8M0Fnu if bits == 0xff => f64::NAN,
            Ocp::E8M0Fnu => 2f64.powi(i32::from(bits) - 127),
        }
    }

    /// The f32 a code loads as: its value, NaN as f32's default NaN (with the sign for e4m3fn).
    fn load(self, bits: u8) -> f32 {
        let v = self.decode(bits);
        match self {
            Ocp::E4M3Fn if v.is_nan() => {
                f32::from_bits(0x7fc0_0000 | (u32::from(bits) & 0x80) << 24)
            }
            _ => v as f32,
        }
    }

    /// Round to nearest, ties to the even code (e8m0fnu: to the larger value); what is past
    /// the largest finite value after rounding is NaN (e4m3fn, e8m0fnu) or the largest
    /// (e2m1fn); e8m0fnu has no sign or zero (NaN), and nothing below its 0x00.
    fn encode(self, x: f32) -> u8 {
        let neg = x.is_sign_negative();
        let (sign, nan) = match self {
            Ocp::E4M3Fn => (if neg { 0x80 } else { 0 }, 0x7f),
            Ocp::E2M1Fn => (if neg { 0x8 } else { 0 }, 0),
            Ocp::E8M0Fnu => (0, 0xff),
        };
        match self {
            Ocp::E4M3Fn if !x.is_finite() => return sign | nan,
            Ocp::E2M1Fn if x.is_nan() => return if neg { 0x0 } else { 0x8 },
            Ocp::E8M0Fnu if !x.is_finite() || x <= 0.0 => return nan,
            _ => {}
        }
        let mag = f64::from(x).abs();
        let past = match self {
            Ocp::E4M3Fn => 480.0,
            Ocp::E2M1Fn => 8.0,
            Ocp::E8M0Fnu => 2f64.powi(128),
        };
        // The finite values and, one code past the largest, the next power of two's place:
        // rounding there is an overflow.
        let end = self.finite_codes().end;
        let candidates = self
            .finite_codes()
            .map(|c| (self.decode(c), u16::from(c)))
            .chain([(past, u16::from(end))]);
        let mut best: Option<(f64, u16)> = None;
        for (v, c) in candidates {
            best = match best {
                Some((bv, _)) if (v - mag).abs() > (bv - mag).abs() => best,
                Some((bv, _)) if (v - mag).abs() == (bv - mag).abs() => {
                    let wins = match self {
                        Ocp::E8M0Fnu => true, // the larger value
                        _ => c % 2 == 0,
                    };
                    if wins { Some((v, c)) } else { best }
                }
                _ => Some((v, c)),
            };
        }
        let code = best.unwrap().1;
        match self {
            _ if code < u16::from(end) => sign | code as u8,
            Ocp::E2M1Fn => sign | 0x7,
            _ => sign | nan,
        }
    }
}

/// f32 → tfloat32: round to nearest even at bit 13 (finite normal inputs).
fn tf32_enc(x: f32) -> Tf32 {
    let b = x.to_bits();
    Tf32(b.wrapping_add(0x0fff + ((b >> 13) & 1)) & !0x1fff)
}

/// f32 → integer: nearest even, saturating, NaN → 0.
fn int_enc(x: f32, lo: f64, hi: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        (x as f64).round_ties_even().clamp(lo, hi)
    }
}

/// One dtype's host type with its reference conversions.
struct Conv<T> {
    enc: fn(f32) -> T,
    dec: fn(T) -> f32,
    bits: fn(T) -> u32,
}

/// The per-dtype kernel: a same-dtype copy, D → f32 and f32 → D DMA casts, a multiply through
/// fp32 back into D, an f32 tile stored into a D tensor, and `full`.
macro_rules! dtype_kernel {
    ($m:ident, $d:ident) => {
        mod $m {
            #![allow(dead_code)]
            use nki::prelude::*;
            #[kernel]
            pub fn k(
                x: Hbm<$d, 128, 64>,
                xf: Hbm<f32, 128, 64>,
            ) -> (
                Hbm<$d, 128, 64>,
                Hbm<f32, 128, 64>,
                Hbm<$d, 128, 64>,
                Hbm<$d, 128, 64>,
                Hbm<$d, 128, 64>,
                Hbm<$d, 128, 64>,
            ) {
                let o_copy = ndarray([128, 64], $d, SharedHbm);
                let o_wide = ndarray([128, 64], f32, SharedHbm);
                let o_comp = ndarray([128, 64], $d, SharedHbm);
                let o_narrow = ndarray([128, 64], $d, SharedHbm);
                let o_store = ndarray([128, 64], $d, SharedHbm);
                let o_full = ndarray([128, 64], $d, SharedHbm);
                let t = load(x[..]);
                store(o_copy[..], copy(t));
                store(o_wide[..], t);
                let y = multiply(t, 2.0, dtype = $d);
                store(o_comp[..], y);
                let w = load(xf[..], dtype = $d);
                store(o_narrow[..], w);
                let f = load(xf[..]);
                store(o_store[..], f * 0.5);
                store(o_full[..], full([128, 64], 3, $d));
                (o_copy, o_wide, o_comp, o_narrow, o_store, o_full)
            }
        }
    };
}

dtype_kernel!(k_f32, f32);
dtype_kernel!(k_tf32, tfloat32);
dtype_kernel!(k_bf16, bf16);
dtype_kernel!(k_f16, f16);
dtype_kernel!(k_e4m3, float8_e4m3);
dtype_kernel!(k_e5m2, float8_e5m2);
dtype_kernel!(k_i8, i8);
dtype_kernel!(k_i16, i16);
dtype_kernel!(k_i32, i32);
dtype_kernel!(k_u8, u8);
dtype_kernel!(k_u16, u16);
dtype_kernel!(k_u32, u32);
dtype_kernel!(k_bool, bool);
dtype_kernel!(k_e4m3fn, float8_e4m3fn);
dtype_kernel!(k_e2m1fn, float4_e2m1fn);
dtype_kernel!(k_e8m0fnu, float8_e8m0fnu);

type Outs<T> = (
    Array2<T>,
    Array2<f32>,
    Array2<T>,
    Array2<T>,
    Array2<T>,
    Array2<T>,
);

/// Checks the per-dtype kernel's outputs against the references.
#[track_caller]
fn check<T: Copy + core::fmt::Debug>(
    name: &str,
    c: &Conv<T>,
    x: &Array2<T>,
    xf: &Array2<f32>,
    o: Outs<T>,
) {
    let (copy, wide, comp, narrow, stored, full) = o;
    let bits = |a: &Array2<T>| a.iter().map(|&v| (c.bits)(v)).collect::<Vec<_>>();
    let want = |f: &dyn Fn(usize) -> T| (0..P * F).map(|i| (c.bits)(f(i))).collect::<Vec<_>>();
    let xs: Vec<T> = x.iter().copied().collect();
    let xfs: Vec<f32> = xf.iter().copied().collect();
    assert_eq!(
        bits(&copy),
        bits(x),
        "{name}: a same-dtype copy keeps the bits"
    );
    assert_bits(
        &format!("{name} -> f32"),
        wide.iter(),
        xs.iter().map(|&v| (c.dec)(v)),
    );
    assert_eq!(
        bits(&comp),
        want(&|i| (c.enc)((c.dec)(xs[i]) * 2.0)),
        "{name}: x * 2 in fp32"
    );
    assert_eq!(
        bits(&narrow),
        want(&|i| (c.enc)(xfs[i])),
        "{name}: f32 -> {name} on load"
    );
    assert_eq!(
        bits(&stored),
        want(&|i| (c.enc)(xfs[i] * 0.5)),
        "{name}: f32 tile stored"
    );
    assert_eq!(bits(&full), want(&|_| (c.enc)(3.0)), "{name}: full(3)");
}

/// f32 inputs in `[lo, hi)`, every fourth one scaled by `small` (subnormal ranges), with ties.
fn inputs(seed: u64, lo: f64, hi: f64, small: f64, ties: &[f32]) -> Array2<f32> {
    let mut a = rand_f32(Ix2(P, F), seed, lo, hi);
    for (i, v) in a.iter_mut().enumerate() {
        if i % 4 == 3 {
            *v = (*v as f64 * small) as f32;
        }
        if i % 16 == 5 {
            *v = ties[(i / 16) % ties.len()];
        }
    }
    a
}

macro_rules! dtype_test {
    ($test:ident, $m:ident, $name:literal, $conv:expr, $xf:expr, $x_from:expr) => {
        #[test]
        fn $test() {
            let c = $conv;
            let xf: Array2<f32> = $xf;
            let x = xf.mapv($x_from);
            let o = $m::k::host(&mut NeuronCore::default(), x.view(), xf.view()).unwrap();
            check($name, &c, &x, &xf, o);
            let prog = $m::k::KERNEL.program();
            assert_eq!(tile(prog, "t").0.name(), $name);
            assert_eq!(tile(prog, "y").0.name(), $name);
        }
    };
}

fn e4m3() -> Conv<F8E4M3> {
    Conv {
        enc: |x| F8E4M3(Fp8::E4M3.encode(x)),
        dec: |v| Fp8::E4M3.decode(v.0) as f32,
        bits: |v| v.0 as u32,
    }
}

fn e5m2() -> Conv<F8E5M2> {
    Conv {
        enc: |x| F8E5M2(Fp8::E5M2.encode(x)),
        dec: |v| Fp8::E5M2.decode(v.0) as f32,
        bits: |v| v.0 as u32,
    }
}

dtype_test!(
    f32_end_to_end,
    k_f32,
    "f32",
    Conv::<f32> {
        enc: |x| x,
        dec: |v| v,
        bits: |v| v.to_bits()
    },
    inputs(1, -1e6, 1e6, 1e-3, &[0.0, -0.0, 1.5]),
    |v| v
);
dtype_test!(
    tfloat32_end_to_end,
    k_tf32,
    "tfloat32",
    Conv::<Tf32> {
        enc: tf32_enc,
        dec: |v| f32::from_bits(v.0 & !0x1fff),
        bits: |v| v.0
    },
    inputs(
        2,
        -1e4,
        1e4,
        1e-3,
        &[1.0 + 1.0 / 2048.0, 1.0 + 3.0 / 2048.0, -0.0]
    ),
    tf32_enc
);
dtype_test!(
    bf16_end_to_end,
    k_bf16,
    "bf16",
    Conv::<bf16> {
        enc: bf16::from_f32,
        dec: |v| v.to_f32(),
        bits: |v| v.to_bits() as u32
    },
    inputs(
        3,
        -1e4,
        1e4,
        1e-3,
        &[1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, 3.0e38]
    ),
    bf16::from_f32
);
dtype_test!(
    f16_end_to_end,
    k_f16,
    "f16",
    Conv::<f16> {
        enc: f16::from_f32,
        dec: |v| v.to_f32(),
        bits: |v| v.to_bits() as u32
    },
    inputs(
        4,
        -7e4,
        7e4,
        1e-8,
        &[65519.0, 65520.0, 1.0 + 1.0 / 2048.0, 2f32.powi(-25)]
    ),
    f16::from_f32
);
dtype_test!(
    float8_e4m3_end_to_end,
    k_e4m3,
    "float8_e4m3",
    e4m3(),
    inputs(
        5,
        -300.0,
        300.0,
        1e-4,
        &[
            248.0,
            247.9,
            -240.0,
            2f32.powi(-10),
            3.0 * 2f32.powi(-10),
            1.0625,
            1.1875
        ]
    ),
    |v| F8E4M3(Fp8::E4M3.encode(v))
);
dtype_test!(
    float8_e5m2_end_to_end,
    k_e5m2,
    "float8_e5m2",
    e5m2(),
    inputs(
        6,
        -7e4,
        7e4,
        1e-8,
        &[
            61440.0,
            61439.0,
            2f32.powi(-17),
            3.0 * 2f32.powi(-17),
            1.125,
            1.375
        ]
    ),
    |v| F8E5M2(Fp8::E5M2.encode(v))
);
dtype_test!(
    i8_end_to_end,
    k_i8,
    "i8",
    Conv::<i8> {
        enc: |x| int_enc(x, -128.0, 127.0) as i8,
        dec: |v| v as f32,
        bits: |v| v as u8 as u32
    },
    inputs(
        7,
        -200.0,
        200.0,
        0.01,
        &[2.5, -2.5, 3.5, 127.5, -128.5, 0.5]
    ),
    |v| int_enc(v, -128.0, 127.0) as i8
);
dtype_test!(
    i16_end_to_end,
    k_i16,
    "i16",
    Conv::<i16> {
        enc: |x| int_enc(x, -32768.0, 32767.0) as i16,
        dec: |v| v as f32,
        bits: |v| v as u16 as u32
    },
    inputs(8, -40000.0, 40000.0, 0.001, &[2.5, -2.5, 32767.5, -1.5]),
    |v| int_enc(v, -32768.0, 32767.0) as i16
);
dtype_test!(
    i32_end_to_end,
    k_i32,
    "i32",
    Conv::<i32> {
        enc: |x| int_enc(x, i32::MIN as f64, i32::MAX as f64) as i32,
        dec: |v| v as f32,
        bits: |v| v as u32
    },
    inputs(9, -3e9, 3e9, 1e-5, &[2.5, -2.5, 16777217.0, -0.5]),
    |v| int_enc(v, i32::MIN as f64, i32::MAX as f64) as i32
);
dtype_test!(
    u8_end_to_end,
    k_u8,
    "u8",
    Conv::<u8> {
        enc: |x| int_enc(x, 0.0, 255.0) as u8,
        dec: |v| v as f32,
        bits: |v| v as u32
    },
    inputs(10, -50.0, 300.0, 0.1, &[2.5, 3.5, 255.5, -0.5]),
    |v| int_enc(v, 0.0, 255.0) as u8
);
dtype_test!(
    u16_end_to_end,
    k_u16,
    "u16",
    Conv::<u16> {
        enc: |x| int_enc(x, 0.0, 65535.0) as u16,
        dec: |v| v as f32,
        bits: |v| v as u32
    },
    inputs(11, -1000.0, 70000.0, 0.01, &[2.5, 65535.5, -3.0]),
    |v| int_enc(v, 0.0, 65535.0) as u16
);
dtype_test!(
    u32_end_to_end,
    k_u32,
    "u32",
    Conv::<u32> {
        enc: |x| int_enc(x, 0.0, u32::MAX as f64) as u32,
        dec: |v| v as f32,
        bits: |v| v
    },
    inputs(12, -1e3, 5e9, 1e-6, &[2.5, 3.5, -7.0, 4294967296.0]),
    |v| int_enc(v, 0.0, u32::MAX as f64) as u32
);

dtype_test!(
    float8_e4m3fn_end_to_end,
    k_e4m3fn,
    "float8_e4m3fn",
    Conv::<F8E4M3Fn> {
        enc: |x| F8E4M3Fn(Ocp::E4M3Fn.encode(x)),
        dec: |v| Ocp::E4M3Fn.load(v.0),
        bits: |v| v.0 as u32
    },
    // Within ±464 (no NaN among the inputs: a NaN load is checked as f32's canonical NaN);
    // `x * 2` and the stores overflow past 464 into the NaN.
    inputs(
        14,
        -464.0,
        464.0,
        1e-4,
        &[
            464.0,
            -448.0,
            256.0,
            2f32.powi(-10),
            3.0 * 2f32.powi(-10),
            1.0625,
            1.1875
        ]
    ),
    |v| F8E4M3Fn(Ocp::E4M3Fn.encode(v))
);
dtype_test!(
    float4_e2m1fn_end_to_end,
    k_e2m1fn,
    "float4_e2m1fn",
    Conv::<F4E2M1Fn> {
        enc: |x| F4E2M1Fn(Ocp::E2M1Fn.encode(x)),
        dec: |v| Ocp::E2M1Fn.load(v.0),
        bits: |v| v.0 as u32
    },
    inputs(15, -9.0, 9.0, 0.2, &[0.25, 0.75, 1.25, 5.0, -7.0, 2.5, 1e9]),
    |v| F4E2M1Fn(Ocp::E2M1Fn.encode(v))
);
dtype_test!(
    float8_e8m0fnu_end_to_end,
    k_e8m0fnu,
    "float8_e8m0fnu",
    Conv::<F8E8M0Fnu> {
        enc: |x| F8E8M0Fnu(Ocp::E8M0Fnu.encode(x)),
        dec: |v| Ocp::E8M0Fnu.load(v.0),
        bits: |v| v.0 as u32
    },
    // Mostly positive (the type has no sign: negative inputs and zero become its NaN).
    inputs(
        16,
        -1.0,
        1e6,
        1e-40,
        &[
            1.5,
            3.0,
            0.75,
            0.0,
            2f32.powi(-127),
            1.5 * 2f32.powi(-127),
            3e38
        ]
    ),
    |v| F8E8M0Fnu(Ocp::E8M0Fnu.encode(v))
);

#[test]
fn ocp_references_agree_with_the_documented_table() {
    // docs/dtypes.md: e4m3fn max 448 (0x7e), 464 a tie to it, NaN past it; e2m1fn saturates at
    // 6 (0x7); e8m0fnu rounds 1.5 up and has no zero.
    assert_eq!(Ocp::E4M3Fn.encode(448.0), 0x7e);
    assert_eq!(Ocp::E4M3Fn.encode(464.0), 0x7e);
    assert_eq!(Ocp::E4M3Fn.encode(464.5), 0x7f);
    assert_eq!(Ocp::E4M3Fn.encode(-1e6), 0xff);
    assert_eq!(Ocp::E4M3Fn.decode(0x01), 2f64.powi(-9));
    assert_eq!(Ocp::E2M1Fn.encode(5.0), 0x6);
    assert_eq!(Ocp::E2M1Fn.encode(-100.0), 0xf);
    assert_eq!(Ocp::E2M1Fn.encode(0.25), 0x0);
    assert_eq!(Ocp::E8M0Fnu.encode(1.5), 128);
    assert_eq!(Ocp::E8M0Fnu.encode(1.49), 127);
    assert_eq!(Ocp::E8M0Fnu.encode(0.0), 0xff);
    assert_eq!(Ocp::E8M0Fnu.encode(1e-45), 0x00);
    assert_eq!(Ocp::E8M0Fnu.encode(f32::MAX), 0xff);
    // The model's host conversions give the same bits on every code.
    for b in 0..=u8::MAX {
        assert_eq!(
            F8E4M3Fn(b).to_f32().to_bits(),
            Ocp::E4M3Fn.load(b).to_bits()
        );
        assert_eq!(
            F8E8M0Fnu(b).to_f32().to_bits(),
            Ocp::E8M0Fnu.load(b).to_bits()
        );
        assert_eq!(
            F4E2M1Fn(b & 0xf).to_f32().to_bits(),
            Ocp::E2M1Fn.load(b & 0xf).to_bits()
        );
    }
}

#[test]
fn bool_end_to_end() {
    let c = Conv::<Bool> {
        enc: |x| Bool((x != 0.0) as u8),
        dec: |v| (v.0 != 0) as u8 as f32,
        bits: |v| v.0 as u32,
    };
    let xf = rand_int(Ix2(P, F), 13, -2, 2);
    // Any nonzero byte is true.
    let x = xf.mapv(|v| Bool(v.abs() as u8));
    let o = k_bool::k::host(&mut NeuronCore::default(), x.view(), xf.view()).unwrap();
    check("bool", &c, &x, &xf, o);
}

#[test]
fn fp8_references_agree_with_the_documented_table() {
    // docs/dtypes.md: e4m3 max 240 (0x77), inf from 248; e5m2 max 57344 (0x7b), inf from 61440.
    assert_eq!(Fp8::E4M3.encode(240.0), 0x77);
    assert_eq!(Fp8::E4M3.encode(247.9), 0x77);
    assert_eq!(Fp8::E4M3.encode(248.0), 0x78);
    assert_eq!(Fp8::E4M3.decode(0x01), 2f64.powi(-9));
    assert_eq!(Fp8::E4M3.encode(2f32.powi(-10)), 0x00);
    assert_eq!(Fp8::E5M2.encode(-57344.0), 0xfb);
    assert_eq!(Fp8::E5M2.encode(61440.0), 0x7c);
    assert_eq!(Fp8::E5M2.decode(0x01), 2f64.powi(-16));
    assert_eq!(Fp8::E5M2.encode(2f32.powi(-17)), 0x00);
}

// ---------------------------------------------------------------------------------------------
// Bit operations on integer tiles.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn bits_i32(
    a: Hbm<i32, 128, 64>,
    b: Hbm<i32, 128, 64>,
    sh: Hbm<i32, 128, 64>,
) -> Hbm<i32, 13, 128, 64> {
    let out = ndarray([13, 128, 64], i32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let s = load(sh[..]);
    let and = x & y;
    store(out[[0, 0..128, 0..64]], and);
    store(out[[1, 0..128, 0..64]], x | y);
    store(out[[2, 0..128, 0..64]], x ^ y);
    store(out[[3, 0..128, 0..64]], x << s);
    store(out[[4, 0..128, 0..64]], x >> s);
    let inv = !x;
    store(out[[5, 0..128, 0..64]], inv);
    store(out[[6, 0..128, 0..64]], x & 0xff);
    store(out[[7, 0..128, 0..64]], 0x0f0f | x);
    store(out[[8, 0..128, 0..64]], bitwise_xor(x, -1));
    store(out[[9, 0..128, 0..64]], left_shift(x, 3));
    store(out[[10, 0..128, 0..64]], right_shift(x, 28));
    store(out[[11, 0..128, 0..64]], invert(x));
    store(
        out[[12, 0..128, 0..64]],
        tensor_scalar(
            data = x,
            op0 = bitwise_and,
            operand0 = 0xffff,
            op1 = left_shift,
            operand1 = 4,
        ),
    );
    out
}

#[test]
fn bit_operations_on_i32_tiles() {
    let a = Array2::from_shape_fn((P, F), |(p, f)| {
        (values(1, (p * F + f) as u64, 0.0, 1.0)[0] * 4294967296.0) as u32 as i32
    });
    let b = Array2::from_shape_fn((P, F), |(p, f)| {
        ((p * 7919 + f * 104729) as u32).wrapping_mul(2654435761) as i32
    });
    let sh = Array2::from_shape_fn((P, F), |(p, f)| ((p + 3 * f) % 40) as i32);
    let out = bits_i32::host(&mut NeuronCore::default(), a.view(), b.view(), sh.view()).unwrap();
    let shl = |x: i32, s: i32| {
        if (0..32).contains(&s) {
            ((x as u32) << s) as i32
        } else {
            0
        }
    };
    let shr = |x: i32, s: i32| {
        if (0..32).contains(&s) {
            ((x as u32) >> s) as i32
        } else {
            0
        }
    };
    type Ref = Box<dyn Fn(i32, i32, i32) -> i32>;
    let refs: [(&str, Ref); 13] = [
        ("&", Box::new(|x, y, _| x & y)),
        ("|", Box::new(|x, y, _| x | y)),
        ("^", Box::new(|x, y, _| x ^ y)),
        ("<< tile", Box::new(move |x, _, s| shl(x, s))),
        (">> tile (logical)", Box::new(move |x, _, s| shr(x, s))),
        ("!x", Box::new(|x, _, _| !x)),
        ("& 0xff", Box::new(|x, _, _| x & 0xff)),
        ("0x0f0f |", Box::new(|x, _, _| 0x0f0f | x)),
        ("bitwise_xor(x, -1)", Box::new(|x, _, _| x ^ -1)),
        ("left_shift(x, 3)", Box::new(move |x, _, _| shl(x, 3))),
        ("right_shift(x, 28)", Box::new(move |x, _, _| shr(x, 28))),
        ("invert", Box::new(|x, _, _| !x)),
        (
            "(x & 0xffff) << 4",
            Box::new(move |x, _, _| shl(x & 0xffff, 4)),
        ),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        for ((p, j), &x) in a.indexed_iter() {
            let want = f(x, b[[p, j]], sh[[p, j]]);
            assert_eq!(out[[k, p, j]], want, "{name} at ({p}, {j}): x = {x:#x}");
        }
    }
    let prog = bits_i32::KERNEL.program();
    assert_eq!(tile(prog, "and").0, DType::I32);
    assert_eq!(tile(prog, "inv").0, DType::I32);
}

#[kernel]
fn bits_narrow(
    a: Hbm<u8, 128, 64>,
    b: Hbm<u8, 128, 64>,
    c: Hbm<u16, 128, 64>,
    d: Hbm<u16, 128, 64>,
) -> (Hbm<u8, 6, 128, 64>, Hbm<u16, 6, 128, 64>) {
    let o8 = ndarray([6, 128, 64], u8, SharedHbm);
    let o16 = ndarray([6, 128, 64], u16, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let and8 = x & y;
    store(o8[[0, 0..128, 0..64]], and8);
    store(o8[[1, 0..128, 0..64]], x | y);
    store(o8[[2, 0..128, 0..64]], x ^ y);
    store(o8[[3, 0..128, 0..64]], left_shift(x, 1, dtype = u8));
    store(o8[[4, 0..128, 0..64]], right_shift(x, 3, dtype = u8));
    store(o8[[5, 0..128, 0..64]], invert(x, dtype = u8));
    let z = load(c[..]);
    let w = load(d[..]);
    let xor16 = bitwise_xor(z, w);
    store(o16[[0, 0..128, 0..64]], z & w);
    store(o16[[1, 0..128, 0..64]], bitwise_or(z, w));
    store(o16[[2, 0..128, 0..64]], xor16);
    store(o16[[3, 0..128, 0..64]], left_shift(z, 4, dtype = u16));
    store(o16[[4, 0..128, 0..64]], right_shift(z, 9, dtype = u16));
    store(o16[[5, 0..128, 0..64]], invert(z, dtype = u16));
    (o8, o16)
}

#[test]
fn bit_operations_on_u8_and_u16_tiles() {
    let a = Array2::from_shape_fn((P, F), |(p, f)| ((p * 37 + f * 11) % 256) as u8);
    let b = Array2::from_shape_fn((P, F), |(p, f)| ((p * 13 + f * 101 + 7) % 256) as u8);
    let c = Array2::from_shape_fn((P, F), |(p, f)| ((p * 4099 + f * 1031) % 65536) as u16);
    let d = Array2::from_shape_fn((P, F), |(p, f)| ((p * 257 + f * 65521 + 3) % 65536) as u16);
    let (o8, o16) = bits_narrow::host(
        &mut NeuronCore::default(),
        a.view(),
        b.view(),
        c.view(),
        d.view(),
    )
    .unwrap();
    type Op8 = fn(u8, u8) -> u8;
    let r8: [(&str, Op8); 6] = [
        ("&", |x, y| x & y),
        ("|", |x, y| x | y),
        ("^", |x, y| x ^ y),
        ("<< 1 (low bits kept)", |x, _| x.wrapping_shl(1)),
        (">> 3", |x, _| x >> 3),
        ("invert", |x, _| !x),
    ];
    for (k, (name, f)) in r8.iter().enumerate() {
        let want: Vec<u8> = a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect();
        assert_eq!(
            o8.slice(s![k, .., ..]).iter().copied().collect::<Vec<_>>(),
            want,
            "u8 {name}"
        );
    }
    type Op16 = fn(u16, u16) -> u16;
    let r16: [(&str, Op16); 6] = [
        ("&", |x, y| x & y),
        ("bitwise_or", |x, y| x | y),
        ("bitwise_xor", |x, y| x ^ y),
        ("<< 4 (low bits kept)", |x, _| x.wrapping_shl(4)),
        (">> 9", |x, _| x >> 9),
        ("invert", |x, _| !x),
    ];
    for (k, (name, f)) in r16.iter().enumerate() {
        let want: Vec<u16> = c.iter().zip(&d).map(|(&x, &y)| f(x, y)).collect();
        assert_eq!(
            o16.slice(s![k, .., ..]).iter().copied().collect::<Vec<_>>(),
            want,
            "u16 {name}"
        );
    }
    let prog = bits_narrow::KERNEL.program();
    assert_eq!(tile(prog, "and8").0, DType::U8, "u8 & u8");
    assert_eq!(tile(prog, "xor16").0, DType::U16, "u16 ^ u16");
}

#[kernel]
fn shift_signed_narrow(
    a: Hbm<i8, 128, 64>,
    b: Hbm<i16, 128, 64>,
) -> (Hbm<i8, 128, 64>, Hbm<i16, 128, 64>) {
    let o8 = ndarray([128, 64], i8, SharedHbm);
    let o16 = ndarray([128, 64], i16, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    store(o8[..], right_shift(x, 1, dtype = i8));
    store(o16[..], right_shift(y, 4, dtype = i16));
    (o8, o16)
}

#[test]
fn right_shift_of_signed_narrow_tiles_shifts_their_own_bits() {
    let a = Array2::from_shape_fn((P, F), |(p, f)| ((p * 64 + f) % 256) as u8 as i8);
    let b = Array2::from_shape_fn((P, F), |(p, f)| ((p * 64 + f) * 511 % 65536) as u16 as i16);
    let (o8, o16) =
        shift_signed_narrow::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    assert_eq!(
        o8,
        a.mapv(|v| ((v as u8) >> 1) as i8),
        "i8 >> 1: -1 gives 127"
    );
    assert_eq!(
        o16,
        b.mapv(|v| ((v as u16) >> 4) as i16),
        "i16 >> 4: -1 gives 4095"
    );
}

/// Bitwise reductions and the sum of an integer tile.
#[kernel]
fn int_reductions(a: Hbm<i32, 128, 64>) -> Hbm<i32, 4, 128, 1> {
    let out = ndarray([4, 128, 1], i32, SharedHbm);
    let x = load(a[..]);
    store(
        out[[0, 0..128, 0..1]],
        tensor_reduce(op = bitwise_or, data = x, axis = 1),
    );
    store(
        out[[1, 0..128, 0..1]],
        tensor_reduce(op = bitwise_xor, data = x, axis = 1),
    );
    store(
        out[[2, 0..128, 0..1]],
        tensor_reduce(op = bitwise_and, data = x, axis = 1),
    );
    store(out[[3, 0..128, 0..1]], sum(x, axis = 1));
    out
}

#[test]
fn bitwise_reductions_of_i32_tiles() {
    let a = Array2::from_shape_fn((P, F), |(p, f)| {
        let v = ((p * 2654435761 + f * 40503) as u32).rotate_left(f as u32) as i32;
        if f == 0 {
            v | (1 << (p % 31))
        } else {
            v | 0x1000
        }
    });
    let small = a.mapv(|v| v % 1000);
    let out = int_reductions::host(&mut NeuronCore::default(), a.view()).unwrap();
    for p in 0..P {
        let r = a.row(p);
        assert_eq!(
            out[[0, p, 0]],
            r.iter().fold(0, |x, &y| x | y),
            "or, row {p}"
        );
        assert_eq!(
            out[[1, p, 0]],
            r.iter().fold(0, |x, &y| x ^ y),
            "xor, row {p}"
        );
        assert_eq!(
            out[[2, p, 0]],
            r.iter().fold(-1, |x, &y| x & y),
            "and, row {p}"
        );
    }
    let out = int_reductions::host(&mut NeuronCore::default(), small.view()).unwrap();
    for p in 0..P {
        assert_eq!(out[[3, p, 0]], small.row(p).sum(), "sum, row {p}");
    }
}

// ---------------------------------------------------------------------------------------------
// GpSimd's int32 arithmetic; one-operand operations keep their operand's dtype.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn int32_arith(a: Hbm<i32, 128, 64>, b: Hbm<i32, 128, 64>) -> Hbm<i32, 3, 128, 64> {
    let out = ndarray([3, 128, 64], i32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    store(out[[0, 0..128, 0..64]], x + y);
    store(out[[1, 0..128, 0..64]], subtract(x, y));
    store(out[[2, 0..128, 0..64]], x * y);
    out
}

#[test]
fn int32_add_subtract_multiply_wrap_on_gpsimd() {
    let a = Array2::from_shape_fn((P, F), |(p, f)| {
        (p as i32)
            .wrapping_mul(33_554_467)
            .wrapping_add(f as i32 * 1_000_003)
    });
    let b = Array2::from_shape_fn((P, F), |(p, f)| {
        (f as i32)
            .wrapping_mul(67_108_879)
            .wrapping_sub(p as i32 * 7_777_777)
    });
    let out = int32_arith::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    let ab = || a.iter().zip(b.iter());
    assert_eq!(
        out.slice(s![0, .., ..]).iter().copied().collect::<Vec<_>>(),
        ab().map(|(&x, &y)| x.wrapping_add(y)).collect::<Vec<_>>()
    );
    assert_eq!(
        out.slice(s![1, .., ..]).iter().copied().collect::<Vec<_>>(),
        ab().map(|(&x, &y)| x.wrapping_sub(y)).collect::<Vec<_>>()
    );
    assert_eq!(
        out.slice(s![2, .., ..]).iter().copied().collect::<Vec<_>>(),
        ab().map(|(&x, &y)| x.wrapping_mul(y)).collect::<Vec<_>>()
    );
    assert!(has_instr(
        int32_arith::KERNEL.program(),
        "GpSimd",
        "tensor_tensor"
    ));
}

#[kernel]
fn unary_dtypes(
    a: Hbm<u8, 128, 64>,
    b: Hbm<i32, 128, 64>,
    c: Hbm<i8, 128, 64>,
) -> (
    Hbm<u8, 128, 64>,
    Hbm<i32, 128, 64>,
    Hbm<i8, 128, 64>,
    Hbm<i32, 128, 64>,
) {
    let o1 = ndarray([128, 64], u8, SharedHbm);
    let o2 = ndarray([128, 64], i32, SharedHbm);
    let o3 = ndarray([128, 64], i8, SharedHbm);
    let o4 = ndarray([128, 64], i32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let z = load(c[..]);
    let inv_u8 = !x;
    let neg_i32 = -y;
    let neg_i8 = negative(z);
    let inv_i32 = invert(y);
    store(o1[..], inv_u8);
    store(o2[..], neg_i32);
    store(o3[..], neg_i8);
    store(o4[..], inv_i32);
    (o1, o2, o3, o4)
}

#[test]
fn one_operand_operations_keep_the_dtype() {
    let a = Array2::from_shape_fn((P, F), |(p, f)| ((p * 64 + f) % 256) as u8);
    let b = Array2::from_shape_fn((P, F), |(p, f)| (p as i32 - 64) * 1000 + f as i32);
    let c = Array2::from_shape_fn((P, F), |(p, f)| ((p * 64 + f) % 255) as i32 as i8);
    let prog = unary_dtypes::KERNEL.program();
    let (o1, o2, o3, o4) =
        unary_dtypes::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    assert_eq!(o1, a.mapv(|v| !v), "!u8");
    assert_eq!(o2, b.mapv(|v| -v), "-i32");
    // The Vector engine negates in fp32; −(−128) = 128 saturates to 127 on the way back to
    // i8 (docs/dtypes.md, fp32 to integer).
    assert_eq!(
        o3,
        c.mapv(|v| (-i32::from(v)).clamp(-128, 127) as i8),
        "negative(i8)"
    );
    assert_eq!(o4, b.mapv(|v| !v), "invert(i32)");
    let got: Vec<_> = ["inv_u8", "neg_i32", "neg_i8", "inv_i32"]
        .iter()
        .map(|n| tile(prog, n).0)
        .collect();
    assert_eq!(got, [DType::U8, DType::I32, DType::I8, DType::I32]);
}

// ---------------------------------------------------------------------------------------------
// Bool tiles.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn bool_logic(
    a: Hbm<bool, 128, 64>,
    b: Hbm<bool, 128, 64>,
) -> (Hbm<bool, 5, 128, 64>, Hbm<f32, 128, 64>) {
    let out = ndarray([5, 128, 64], bool, SharedHbm);
    let o_f = ndarray([128, 64], f32, SharedHbm);
    let p = load(a[..]);
    let q = load(b[..]);
    store(out[[0, 0..128, 0..64]], p & q);
    store(out[[1, 0..128, 0..64]], p | q);
    store(out[[2, 0..128, 0..64]], p ^ q);
    store(out[[3, 0..128, 0..64]], !p);
    store(out[[4, 0..128, 0..64]], logical_and(p, !q));
    store(o_f[..], add(p, q, dtype = f32));
    (out, o_f)
}

#[test]
fn logical_operations_on_loaded_bool_tiles() {
    // Bytes 0, 1 and 2: any nonzero byte is true.
    let a = Array2::from_shape_fn((P, F), |(p, f)| Bool(((p + f) % 3) as u8));
    let b = Array2::from_shape_fn((P, F), |(p, f)| Bool(((p * 2 + f / 3) % 3) as u8));
    let (out, o_f) = bool_logic::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    let t = |v: Bool| v.0 != 0;
    type Ref = fn(bool, bool) -> bool;
    let refs: [(&str, Ref); 5] = [
        ("&", |p, q| p && q),
        ("|", |p, q| p || q),
        ("^", |p, q| p != q),
        ("!p", |p, _| !p),
        ("p & !q", |p, q| p && !q),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        let want: Vec<Bool> = a
            .iter()
            .zip(&b)
            .map(|(&p, &q)| Bool::from(f(t(p), t(q))))
            .collect();
        assert_eq!(
            out.slice(s![k, .., ..]).iter().copied().collect::<Vec<_>>(),
            want,
            "{name}"
        );
    }
    let want: Vec<f32> = a
        .iter()
        .zip(&b)
        .map(|(&p, &q)| t(p) as u8 as f32 + t(q) as u8 as f32)
        .collect();
    assert_eq!(
        o_f.iter().copied().collect::<Vec<_>>(),
        want,
        "bool + bool in f32"
    );
}

// ---------------------------------------------------------------------------------------------
// 1-byte dtypes through strided DMA: [P, 1] columns, strided HBM accesses.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn one_byte_strided(
    a: Hbm<u8, 128, 1>,
    b: Hbm<i8, 128, 64>,
    c: Hbm<float8_e4m3, 128, 1>,
) -> (
    Hbm<i32, 128, 1>,
    Hbm<i8, 128, 32>,
    Hbm<f32, 128, 1>,
    Hbm<bool, 128, 1>,
) {
    let o1 = ndarray([128, 1], i32, SharedHbm);
    let o2 = ndarray([128, 32], i8, SharedHbm);
    let o3 = ndarray([128, 1], f32, SharedHbm);
    let o4 = ndarray([128, 1], bool, SharedHbm);
    let u = load(a[..]);
    store(o1[..], u + 1);
    let (i_p, i_f) = mgrid![0..128, 0..32];
    let even = load(b[[i_p, 2 * i_f]]);
    store(o2[..], even);
    let e = load(c[..]);
    store(o3[..], e * 2.0);
    let col = load(a[..], dtype = f32);
    store(o4[..], col > 100.0);
    (o1, o2, o3, o4)
}

#[test]
fn one_byte_dtypes_through_strided_dma() {
    let a = Array2::from_shape_fn((P, 1), |(p, _)| (p * 2) as u8);
    let b = Array2::from_shape_fn((P, F), |(p, f)| ((p * 64 + f) % 256) as u8 as i8);
    let c = Array2::from_shape_fn((P, 1), |(p, _)| F8E4M3(Fp8::E4M3.encode((p % 16) as f32)));
    let (o1, o2, o3, o4) =
        one_byte_strided::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    assert_eq!(o1, a.mapv(|v| v as i32 + 1), "u8 column + 1");
    assert_eq!(
        o2,
        Array2::from_shape_fn((P, 32), |(p, f)| b[[p, 2 * f]]),
        "every other i8"
    );
    assert_eq!(
        o3,
        c.mapv(|v| Fp8::E4M3.decode(v.0) as f32 * 2.0),
        "fp8 column * 2"
    );
    assert_eq!(o4, a.mapv(|v| Bool::from(v > 100)), "bool column");
}
