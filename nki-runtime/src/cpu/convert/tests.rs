//! The conversion definitions against independent references, and every run path against the
//! definitions, bit for bit.

use super::*;

use DType::*;

/// A small deterministic generator (xorshift64*), so the tests need no dependencies.
pub(crate) struct Rng(u64);
impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

// ---- Inputs ----

/// Every bit pattern of an 8- or 16-bit dtype; for a 32-bit dtype, edge patterns and random
/// ones.
fn patterns(dtype: DType) -> Vec<u32> {
    match dtype.size() {
        1 => (0..=0xff).collect(),
        2 => (0..=0xffff).collect(),
        _ => {
            let mut v: Vec<u32> = f32_inputs().into_iter().take(60_000).collect();
            v.extend([
                0x7fff_ffff,
                0x8000_0000,
                0xffff_ffff,
                0x0100_0000,
                0x0100_0001,
                0x0100_0003,
                0x7fff_ff80,
                0x7fff_ffc0,
                0xffff_ff80,
                0x8000_0040,
                0x7f80_1000,
                0x7f80_0001,
                0xff80_1fff,
            ]);
            v
        }
    }
}

/// The little-endian bytes of elements given by their bits.
fn pack(dtype: DType, bits: &[u32]) -> Vec<u8> {
    let size = dtype.size() as usize;
    bits.iter()
        .flat_map(|b| b.to_le_bytes()[..size].to_vec())
        .collect()
}

/// The elements' bits in little-endian bytes.
fn unpack(dtype: DType, bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(dtype.size() as usize)
        .map(read_bits)
        .collect()
}

/// f32 inputs: edge cases (ties, subnormals, NaN, inf, max, rounding boundaries of every
/// format) plus random bits and random values near the 8- and 16-bit formats' ranges.
fn f32_inputs() -> Vec<u32> {
    #[rustfmt::skip]
    let edges = [
        0x0000_0000, 0x8000_0000, 0x0000_0001, 0x8000_0001, 0x007f_ffff, 0x807f_ffff,
        0x0040_0000, 0x0080_0000, 0x8080_0000, 0x0080_8000, 0x0080_ffff, 0x0081_8000,
        0x7f7f_ffff, 0xff7f_ffff, 0x7f7f_7fff, 0x7f7f_8000, 0x7f80_0000, 0xff80_0000,
        0x7f80_0001, 0xff80_0001, 0x7fa1_2345, 0x7fc0_0000, 0xffc0_0000, 0x7fff_ffff,
        0x3f80_8000, 0x3f81_8000, 0x3f80_8001, 0x3f80_7fff, 0x477f_e000, 0x477f_efff,
        0x477f_f000, 0x477f_f001, 0x4780_0000, 0x3880_0000, 0x387f_f000, 0x387f_efff,
        0x3800_0000, 0x3300_0000, 0x3300_0001, 0x32ff_ffff, 0x3380_0000, 0x33c0_0000,
        0x3400_0000, 0x3f80_1000, 0x3f80_3000, 0x3f80_2000, 0x3f80_1001, 0x3f80_0fff,
        0x7f7f_f000, 0x7f7f_efff, 0x7fb0_0000, 0x7f90_0000, 0xffa0_0000, 0x7f80_2000,
    ];
    let mut v: Vec<u32> = edges.to_vec();
    // Every sign/exponent with tie-ish and random mantissas.
    for e in 0..=255u32 {
        for man in [
            0, 1, 0x1000, 0x3000, 0x8000, 0x18000, 0x7fffff, 0x400000, 0x7fff, 0xfff, 0x80000,
            0x100000, 0x180000, 0x200000, 0x300000, 0x0fffff, 0x1fffff,
        ] {
            v.push((e << 23) | man);
            v.push(0x8000_0000 | (e << 23) | man);
        }
    }
    // Every value of the 8-bit floats, the midpoints between neighbours (ties), and one f32
    // ulp around both; the same for integers around the integer formats' limits.
    let mut around = |x: f32| {
        for y in [x, x.next_up(), x.next_down()] {
            v.push(y.to_bits());
            v.push((-y).to_bits());
        }
    };
    for f in [E4M3, E5M2] {
        let values: Vec<f32> = (0..=f.inf()).map(|c| f.decode(c)).collect();
        for w in values.windows(2) {
            around(w[0]);
            around(((w[0] as f64 + w[1] as f64) / 2.0) as f32);
        }
        // The overflow threshold: halfway from the largest finite value to 2^(emax + 1).
        let top = values[f.inf() as usize - 1] as f64;
        let next = 2f64.powi(top.log2().floor() as i32 + 1);
        around(((top + next) / 2.0) as f32);
    }
    // The same for the OCP formats, from their reference tables (the sentinel above the
    // largest finite value included: its midpoint is the overflow threshold).
    for f in OCP {
        for w in ref_ocp_table(f).windows(2) {
            around(w[0].0 as f32);
            around(((w[0].0 + w[1].0) / 2.0) as f32);
        }
    }
    for k in [
        0.5f32,
        1.5,
        2.5,
        3.5,
        126.5,
        127.5,
        128.5,
        254.5,
        255.5,
        256.5,
        32766.5,
        32767.5,
        32768.5,
        65534.5,
        65535.5,
        65536.0,
        8388607.5,
        16777215.0,
        16777217.0,
        2147483520.0,
        2147483648.0,
        4294967040.0,
        4294967296.0,
        1e20,
    ] {
        around(k);
        around(k - 1.0);
        around(k + 1.0);
    }
    let mut rng = Rng::new(7);
    for _ in 0..200_000 {
        v.push(rng.next_u32());
    }
    for _ in 0..100_000 {
        // Exponents around the f16 and fp8 ranges, to hit subnormal rounding.
        let e = 95 + rng.next_u32() % 50;
        v.push((rng.next_u32() & 0x807f_ffff) | (e << 23));
    }
    v
}

/// Every sign and exponent, with the top 11 mantissa bits all combinations and the low 12
/// from a few patterns: every rounding position of every format sees ties, values just above
/// and just below them.
fn dense_f32_inputs() -> Vec<u32> {
    let mut v = Vec::with_capacity(512 * 2048 * 5);
    for se in 0..512u32 {
        for top in 0..2048u32 {
            for low in [0, 1, 0x7ff, 0x800, 0xfff] {
                v.push((se << 23) | (top << 12) | low);
            }
        }
    }
    v
}

/// Runs [`load_f32`] on `bits` and returns the f32 bits.
fn load_run(isa: Isa, dtype: DType, bits: &[u32]) -> Vec<u32> {
    let mut out = vec![0f32; bits.len()];
    load_f32(isa, &pack(dtype, bits), dtype, &mut out);
    out.iter().map(|x| x.to_bits()).collect()
}

/// Runs [`store_f32`] on the f32s with bits `xs` and returns the elements' bits.
fn store_run(isa: Isa, dtype: DType, xs: &[u32]) -> Vec<u32> {
    let src: Vec<f32> = xs.iter().map(|&b| f32::from_bits(b)).collect();
    let mut out = vec![0u8; xs.len() * dtype.size() as usize];
    store_f32(isa, &src, &mut out, dtype);
    unpack(dtype, &out)
}

/// Panics at the first difference, naming the input.
fn assert_same(got: &[u32], want: &[u32], inputs: &[u32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: input {:#010x} gave {:#x}, want {:#x}",
            inputs[i], got[i], want[i]
        );
    }
}

// ---- Independent references (f64 arithmetic, `as` casts) ----

/// The value of an 8-bit float from its fields: None for NaN.
fn ref_mini_value(f: MiniFloat, bits: u32) -> Option<f64> {
    let (e, m) = (f.e as i32, f.m as i32);
    let bias = (1 << (e - 1)) - 1;
    let sign = if bits >> (e + m) & 1 == 1 { -1.0 } else { 1.0 };
    let exp = (bits >> m) as i32 & ((1 << e) - 1);
    let man = (bits & ((1 << m) - 1)) as f64;
    if exp == (1 << e) - 1 {
        return if man == 0.0 {
            Some(sign * f64::INFINITY)
        } else {
            None
        };
    }
    let frac = man / (1 << m) as f64;
    Some(if exp == 0 {
        sign * frac * 2f64.powi(1 - bias)
    } else {
        sign * (1.0 + frac) * 2f64.powi(exp - bias)
    })
}

/// Round to nearest, ties to the even code, among the 8-bit float's finite magnitudes plus
/// `2^(emax + 1)` standing for inf (overflow rounds there); NaN excluded.
fn ref_mini_encode(f: MiniFloat, x: f32) -> u32 {
    let sign = if x.is_sign_negative() { f.sign() } else { 0 };
    let a = (x as f64).abs();
    if a.is_infinite() {
        return sign | f.inf();
    }
    let bias = f.bias() as i32;
    let emax = (1 << f.e) - 2 - bias;
    let mut table: Vec<(f64, u32)> = (0..f.inf())
        .map(|c| (ref_mini_value(f, c).unwrap(), c))
        .collect();
    table.push((2f64.powi(emax + 1), f.inf()));
    let i = table.partition_point(|&(v, _)| v < a);
    let code = if i == table.len() {
        f.inf()
    } else if i == 0 || table[i].0 == a {
        table[i].1
    } else {
        let (lo, hi) = (table[i - 1], table[i]);
        let (dl, dh) = (a - lo.0, hi.0 - a);
        if dl < dh || (dl == dh && lo.1 & 1 == 0) {
            lo.1
        } else {
            hi.1
        }
    };
    sign | code
}

/// The OCP formats NKI 0.1–0.5 added, for the references below.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Ocp {
    /// `float8_e4m3fn`.
    E4M3Fn,
    /// `float4_e2m1fn`.
    E2M1Fn,
    /// `float8_e8m0fnu`.
    E8M0Fnu,
}

/// Every OCP format.
const OCP: [Ocp; 3] = [Ocp::E4M3Fn, Ocp::E2M1Fn, Ocp::E8M0Fnu];

/// The value of an OCP-format element from its fields, as the OFP8 and MX specifications define
/// them: None for NaN.
fn ref_ocp_value(f: Ocp, bits: u32) -> Option<f64> {
    let bits = bits & 0xff;
    let field = |shift: u32, width: u32| ((bits >> shift) & ((1 << width) - 1)) as i32;
    match f {
        Ocp::E4M3Fn => {
            // S.EEEE.MMM, bias 7, S.1111.111 the NaN, subnormals at E = 0.
            let sign = if field(7, 1) == 1 { -1.0 } else { 1.0 };
            let (e, m) = (field(3, 4), field(0, 3));
            if e == 15 && m == 7 {
                return None;
            }
            let m = m as f64 / 8.0;
            Some(
                sign * if e == 0 {
                    m * 2f64.powi(-6)
                } else {
                    (1.0 + m) * 2f64.powi(e - 7)
                },
            )
        }
        Ocp::E2M1Fn => {
            // S.EE.M in the low nibble, bias 1, subnormals at E = 0, no NaN.
            let sign = if field(3, 1) == 1 { -1.0 } else { 1.0 };
            let (e, m) = (field(1, 2), field(0, 1) as f64 / 2.0);
            Some(
                sign * if e == 0 {
                    m
                } else {
                    (1.0 + m) * 2f64.powi(e - 1)
                },
            )
        }
        Ocp::E8M0Fnu => (bits != 0xff).then(|| 2f64.powi(bits as i32 - 127)),
    }
}

/// An OCP format's finite nonnegative values with their codes, ascending, and one sentinel
/// above the largest: the next power of two's place, `(value, code)` with the code the overflow
/// lands on before the format's rule resolves it (e4m3fn: 480 at the NaN code `0x7f`; e2m1fn: 8
/// past the nibble; e8m0fnu: 2^128 at the NaN code `0xff`).
fn ref_ocp_table(f: Ocp) -> Vec<(f64, u32)> {
    let codes: Vec<u32> = match f {
        Ocp::E4M3Fn => (0..0x7f).collect(),
        Ocp::E2M1Fn => (0..0x8).collect(),
        Ocp::E8M0Fnu => (0..0xff).collect(),
    };
    let mut t: Vec<(f64, u32)> = codes
        .into_iter()
        .map(|c| (ref_ocp_value(f, c).unwrap(), c))
        .collect();
    t.push(match f {
        Ocp::E4M3Fn => (480.0, 0x7f),
        Ocp::E2M1Fn => (8.0, 0x8),
        Ocp::E8M0Fnu => (2f64.powi(128), 0xff),
    });
    t
}

/// f32 → OCP format by nearest search in [`ref_ocp_table`], from the formats' definitions and
/// ml_dtypes' documented conversion: ties go to the even code (e8m0fnu, whose codes are all
/// "odd" significands, takes the larger value, as ml_dtypes does); e4m3fn: overflow, ±inf and
/// NaN give `S.1111.111`; e2m1fn: overflow and ±inf saturate to ±6, NaN gives ml_dtypes'
/// negated quiet NaN (`0x8` for a positive NaN, `0x0` for a negative one); e8m0fnu: zero,
/// negative values, inf, NaN and overflow give `0xff`, and below 2^-127 gives `0x00`.
fn ref_ocp_encode(f: Ocp, x: f32) -> u32 {
    let neg = x.is_sign_negative();
    let special = match f {
        Ocp::E4M3Fn => (!x.is_finite()).then_some(if neg { 0xff } else { 0x7f }),
        Ocp::E2M1Fn if x.is_nan() => Some(if neg { 0x0 } else { 0x8 }),
        Ocp::E2M1Fn => x.is_infinite().then_some(if neg { 0xf } else { 0x7 }),
        Ocp::E8M0Fnu => (!x.is_finite() || neg || x == 0.0).then_some(0xff),
    };
    if let Some(code) = special {
        return code;
    }
    let a = (x as f64).abs();
    let table = ref_ocp_table(f);
    let i = table.partition_point(|&(v, _)| v < a);
    let code = if i == table.len() {
        table[i - 1].1 // past the sentinel
    } else if i == 0 || table[i].0 == a {
        table[i].1
    } else {
        let (lo, hi) = (table[i - 1], table[i]);
        let (dl, dh) = (a - lo.0, hi.0 - a);
        let tie_low = f != Ocp::E8M0Fnu && lo.1 & 1 == 0;
        if dl < dh || (dl == dh && tie_low) {
            lo.1
        } else {
            hi.1
        }
    };
    match f {
        Ocp::E4M3Fn => (if neg { 0x80 } else { 0 }) | code.min(0x7f),
        Ocp::E2M1Fn => (if neg { 0x8 } else { 0 }) | code.min(0x7),
        Ocp::E8M0Fnu => code,
    }
}

/// Round to nearest even in f64 (exact for f32 inputs), saturate, NaN → 0.
fn ref_int(x: f32, min: i64, max: i64) -> i64 {
    if x.is_nan() {
        return 0;
    }
    let x = x as f64;
    let fl = x.floor();
    let d = x - fl;
    let r = if d > 0.5 || (d == 0.5 && fl.rem_euclid(2.0) == 1.0) {
        fl + 1.0
    } else {
        fl
    };
    r.clamp(min as f64, max as f64) as i64
}

/// tf32 by f64 arithmetic: f32 subnormals to signed zero, else the value rounded to nearest
/// even at 11 significant bits (overflow to inf); NaN excluded.
fn ref_tf32(x: f32) -> u32 {
    if x.is_subnormal() || x == 0.0 {
        return x.to_bits() & 0x8000_0000;
    }
    if x.is_infinite() {
        return x.to_bits();
    }
    let a = (x as f64).abs();
    let ulp = 2f64.powi(a.log2().floor() as i32 - 10);
    let q = a / ulp;
    let fl = q.floor();
    let r = if q - fl > 0.5 || (q - fl == 0.5 && fl.rem_euclid(2.0) == 1.0) {
        fl + 1.0
    } else {
        fl
    };
    let v = (r * ulp) as f32; // exact, or inf past f32::MAX
    let v = if x < 0.0 { -v } else { v };
    v.to_bits()
}

/// The value of a tf32 container from its fields (its low 13 bits ignored); None for NaN.
fn ref_tf32_value(bits: u32) -> Option<f64> {
    let sign = if bits >> 31 == 1 { -1.0 } else { 1.0 };
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = ((bits >> 13) & 0x3ff) as f64 / 1024.0;
    match exp {
        255 if man == 0.0 => Some(sign * f64::INFINITY),
        255 => None,
        0 => Some(sign * man * 2f64.powi(-126)),
        _ => Some(sign * (1.0 + man) * 2f64.powi(exp - 127)),
    }
}

/// What a NaN becomes in an 8-bit float: `sign | inf | quiet | top payload bits`.
fn nan_code(f: MiniFloat, x: u32) -> u32 {
    let sign = if x >> 31 == 1 { f.sign() } else { 0 };
    sign | f.inf() | (1 << (f.m - 1)) | ((x >> (23 - f.m)) & ((1 << f.m) - 1))
}

// ---- The definitions ----

#[test]
fn dtype_tables_follow_all() {
    for (i, d) in DType::ALL.into_iter().enumerate() {
        assert_eq!(d as usize, i, "{d}");
    }
}

#[test]
fn scalar_f16_matches_half() {
    for x in 0..=u16::MAX {
        let want = half::f16::from_bits(x).to_f32().to_bits();
        assert_eq!(f16_to_f32(x).to_bits(), want, "f16 {x:04x}");
    }
    for x in f32_inputs() {
        let want = half::f16::from_f32(f32::from_bits(x)).to_bits();
        assert_eq!(f32_to_f16(f32::from_bits(x)), want, "f32 {x:08x}");
    }
}

#[test]
fn scalar_bf16_matches_half_except_subnormal_flush() {
    for x in 0..=u16::MAX {
        let h = half::bf16::from_bits(x);
        // half sets the quiet bit of a signaling NaN; the model keeps the payload as is.
        let want = if h.is_nan() {
            (x as u32) << 16
        } else {
            h.to_f32().to_bits()
        };
        assert_eq!(bf16_to_f32(x).to_bits(), want, "bf16 {x:04x}");
    }
    for x in f32_inputs() {
        let f = f32::from_bits(x);
        let got = f32_to_bf16(f);
        if f.is_subnormal() {
            // The intentional difference: vcvtneps2bf16 flushes subnormal inputs.
            assert_eq!(got, ((x >> 16) & 0x8000) as u16, "f32 {x:08x}");
        } else if f.is_nan() {
            assert_eq!(got, ((x >> 16) | 0x40) as u16, "f32 {x:08x}");
        } else {
            assert_eq!(got, half::bf16::from_f32(f).to_bits(), "f32 {x:08x}");
        }
    }
}

#[test]
fn loads_match_references() {
    for dtype in DType::ALL {
        for bits in patterns(dtype) {
            let got = to_f32(dtype, bits);
            let want: Option<f64> = match dtype {
                F32 | Bf16 | F16 => continue, // bit copies, and `half` above
                Tf32 => ref_tf32_value(bits),
                F8E4M3 => ref_mini_value(E4M3, bits),
                F8E5M2 => ref_mini_value(E5M2, bits),
                I8 => Some(bits as u8 as i8 as f64),
                I16 => Some(bits as u16 as i16 as f64),
                I32 => Some((bits as i32 as f32) as f64), // the one rounding: `as`
                U8 => Some(bits as u8 as f64),
                U16 => Some(bits as u16 as f64),
                U32 => Some((bits as f32) as f64),
                Bool => Some(if bits as u8 != 0 { 1.0 } else { 0.0 }),
                F8E4M3Fn => ref_ocp_value(Ocp::E4M3Fn, bits),
                F4E2M1Fn => ref_ocp_value(Ocp::E2M1Fn, bits),
                F8E8M0Fnu => ref_ocp_value(Ocp::E8M0Fnu, bits),
                F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => unreachable!("DType::ALL has no packed type"),
            };
            match want {
                Some(w) => assert!(
                    got as f64 == w && got.is_sign_negative() == w.is_sign_negative(),
                    "{dtype} {bits:#x}: {got} want {w}"
                ),
                None => {
                    // A NaN: tf32 keeps the container's 19 bits; an fp8 NaN keeps sign and
                    // payload and gets f32's quiet bit.
                    let want = match dtype {
                        Tf32 => bits & 0xffff_e000,
                        // e4m3fn's one NaN per sign keeps its sign; e8m0fnu's NaN reads as f32's
                        // default quiet NaN.
                        F8E4M3Fn => ((bits & 0x80) << 24) | 0x7fc0_0000,
                        F8E8M0Fnu => 0x7fc0_0000,
                        F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => {
                            unreachable!("DType::ALL has no packed type")
                        }
                        F32 | Bf16 | F16 | F8E4M3 | F8E5M2 | F4E2M1Fn | I8 | I16 | I32 | U8
                        | U16 | U32 | Bool => {
                            let f = if dtype == F8E4M3 { E4M3 } else { E5M2 };
                            let sign = if bits & f.sign() != 0 { 0x8000_0000 } else { 0 };
                            sign | 0x7fc0_0000 | ((bits & ((1 << f.m) - 1)) << (23 - f.m))
                        }
                    };
                    assert!(got.is_nan(), "{dtype} NaN {bits:#x}");
                    assert_eq!(got.to_bits(), want, "{dtype} NaN {bits:#x}");
                }
            }
        }
    }
    // i32/u32 above 2^24 round to nearest even: a few by hand.
    assert_eq!(to_f32(I32, 16_777_217), 16_777_216.0);
    assert_eq!(to_f32(I32, 16_777_219), 16_777_220.0);
    assert_eq!(to_f32(U32, u32::MAX), 4_294_967_296.0);
    assert_eq!(to_f32(I32, i32::MIN as u32), -2_147_483_648.0);
}

#[test]
fn stores_match_references() {
    let mut inputs = f32_inputs();
    inputs.extend(dense_f32_inputs().into_iter().step_by(7));
    for &b in &inputs {
        let x = f32::from_bits(b);
        for dtype in DType::ALL {
            let got = from_f32(dtype, x);
            let want = match dtype {
                F32 => b,
                Bf16 | F16 => continue, // against `half` above
                Tf32 if x.is_nan() => (b | 0x0040_0000) & 0xffff_e000,
                Tf32 => ref_tf32(x),
                F8E4M3 | F8E5M2 => {
                    let f = if dtype == F8E4M3 { E4M3 } else { E5M2 };
                    if x.is_nan() {
                        nan_code(f, b)
                    } else {
                        ref_mini_encode(f, x)
                    }
                }
                I8 => ref_int(x, -128, 127) as i8 as u8 as u32,
                I16 => ref_int(x, -32768, 32767) as i16 as u16 as u32,
                I32 => ref_int(x, i32::MIN as i64, i32::MAX as i64) as i32 as u32,
                U8 => ref_int(x, 0, 255) as u32,
                U16 => ref_int(x, 0, 65535) as u32,
                U32 => ref_int(x, 0, u32::MAX as i64) as u32,
                Bool => !(x == 0.0) as u32,
                F8E4M3Fn => ref_ocp_encode(Ocp::E4M3Fn, x),
                F4E2M1Fn => ref_ocp_encode(Ocp::E2M1Fn, x),
                F8E8M0Fnu => ref_ocp_encode(Ocp::E8M0Fnu, x),
                F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => unreachable!("DType::ALL has no packed type"),
            };
            assert_eq!(got, want, "{dtype} from f32 {b:#010x} ({x:e})");
        }
    }
}

#[test]
fn documented_values() {
    let e4 = |x: f32| f32_to_f8e4m3(x);
    let e5 = |x: f32| f32_to_f8e5m2(x);
    // e4m3: max 240, overflow from 248 (the tie goes to the even inf), subnormals, NaN.
    assert_eq!(e4(240.0), 0x77);
    assert_eq!(e4(247.99), 0x77);
    assert_eq!(e4(248.0), 0x78);
    assert_eq!(e4(-1e9), 0xf8);
    assert_eq!(e4(f32::NEG_INFINITY), 0xf8);
    assert_eq!(e4(f32::NAN), 0x7c);
    assert_eq!(e4(-f32::NAN), 0xfc);
    assert_eq!(e4(2f32.powi(-9)), 0x01);
    assert_eq!(e4(2f32.powi(-10)), 0x00); // tie to even zero
    assert_eq!(e4(-2f32.powi(-10)), 0x80);
    assert_eq!(e4(1.5 * 2f32.powi(-10)), 0x01);
    assert_eq!(e4(1.0), 0x38);
    assert_eq!(e4(1.0625), 0x38); // tie between 1 and 1.125: even
    assert_eq!(e4(1.1875), 0x3a); // tie between 1.125 and 1.25: even
    assert_eq!(f8e4m3_to_f32(0x78), f32::INFINITY);
    assert_eq!(f8e4m3_to_f32(0x7c).to_bits(), 0x7fc0_0000);
    assert_eq!(f8e4m3_to_f32(0xf9).to_bits(), 0xffd0_0000);
    assert_eq!(f8e4m3_to_f32(0x01), 2f32.powi(-9));
    assert_eq!(f8e4m3_to_f32(0x77), 240.0);
    // e5m2: max 57344, overflow from 61440, subnormals down to 2^-16.
    assert_eq!(e5(57344.0), 0x7b);
    assert_eq!(e5(61439.0), 0x7b);
    assert_eq!(e5(61440.0), 0x7c);
    assert_eq!(e5(f32::NAN), 0x7e);
    assert_eq!(e5(2f32.powi(-16)), 0x01);
    assert_eq!(e5(2f32.powi(-17)), 0x00);
    assert_eq!(f8e5m2_to_f32(0x7b), 57344.0);
    assert_eq!(f8e5m2_to_f32(0x7d).to_bits(), 0x7fe0_0000);
    // e4m3fn: max 448 (0x7e); 464 ties to the even 0x7e, past it the NaN; subnormals as e4m3.
    let fn8 = |x: f32| f32_to_f8e4m3fn(x);
    assert_eq!(fn8(448.0), 0x7e);
    assert_eq!(fn8(464.0), 0x7e);
    assert_eq!(fn8(464.01), 0x7f);
    assert_eq!(fn8(-1e9), 0xff);
    assert_eq!(fn8(f32::INFINITY), 0x7f);
    assert_eq!(fn8(-f32::NAN), 0xff);
    assert_eq!(fn8(240.0), 0x77);
    assert_eq!(fn8(256.0), 0x78); // e4m3's inf code is a finite value here
    assert_eq!(fn8(2f32.powi(-9)), 0x01);
    assert_eq!(fn8(2f32.powi(-10)), 0x00);
    assert_eq!(fn8(1.0), 0x38);
    assert_eq!(f8e4m3fn_to_f32(0x7e), 448.0);
    assert_eq!(f8e4m3fn_to_f32(0xf8), -256.0);
    assert_eq!(f8e4m3fn_to_f32(0x7f).to_bits(), 0x7fc0_0000);
    assert_eq!(f8e4m3fn_to_f32(0xff).to_bits(), 0xffc0_0000);
    // e2m1fn: 0, 0.5, 1, 1.5, 2, 3, 4, 6; ties to even codes; saturating; NaN → a zero.
    let fp4 = |x: f32| f32_to_f4e2m1fn(x);
    let values = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    for (code, v) in values.into_iter().enumerate() {
        assert_eq!(f4e2m1fn_to_f32(code as u8), v);
        assert_eq!(f4e2m1fn_to_f32(code as u8 | 0x8).to_bits(), (-v).to_bits());
        assert_eq!(f4e2m1fn_to_f32(code as u8 | 0xf0), v); // high nibble ignored
    }
    assert_eq!(fp4(0.25), 0x0); // tie: even 0
    assert_eq!(fp4(0.75), 0x2); // tie between 0.5 (1) and 1 (2)
    assert_eq!(fp4(1.25), 0x2);
    assert_eq!(fp4(2.5), 0x4);
    assert_eq!(fp4(3.5), 0x6);
    assert_eq!(fp4(5.0), 0x6); // tie between 4 (6) and 6 (7): even
    assert_eq!(fp4(5.01), 0x7);
    assert_eq!(fp4(7.0), 0x7);
    assert_eq!(fp4(-1e30), 0xf);
    assert_eq!(fp4(f32::NEG_INFINITY), 0xf);
    assert_eq!(fp4(-0.0), 0x8);
    assert_eq!(fp4(f32::NAN), 0x8);
    assert_eq!(fp4(-f32::NAN), 0x0);
    // e8m0fnu: powers of two, 1.5 rounds up, no zero, no sign.
    let e8 = |x: f32| f32_to_f8e8m0fnu(x);
    assert_eq!(e8(1.0), 127);
    assert_eq!(e8(1.49), 127);
    assert_eq!(e8(1.5), 128);
    assert_eq!(e8(0.75), 127);
    assert_eq!(e8(f32::MAX), 0xff);
    assert_eq!(e8(1.49 * 2f32.powi(127)), 0xfe);
    assert_eq!(e8(2f32.powi(-127)), 0x00);
    assert_eq!(e8(f32::from_bits(1)), 0x00);
    assert_eq!(e8(1.5 * 2f32.powi(-127)), 0x01);
    assert_eq!(e8(0.0), 0xff);
    assert_eq!(e8(-0.0), 0xff);
    assert_eq!(e8(-1.0), 0xff);
    assert_eq!(e8(f32::INFINITY), 0xff);
    assert_eq!(e8(f32::NAN), 0xff);
    assert_eq!(f8e8m0fnu_to_f32(0), 2f32.powi(-127));
    assert_eq!(f8e8m0fnu_to_f32(127), 1.0);
    assert_eq!(f8e8m0fnu_to_f32(0xfe), 2f32.powi(127));
    assert_eq!(f8e8m0fnu_to_f32(0xff).to_bits(), 0x7fc0_0000);
    // tf32: bit 13 rounding, subnormal flush, overflow, NaN.
    assert_eq!(f32_to_tf32(1.0 + 2f32.powi(-11)), 1f32.to_bits()); // tie: even
    assert_eq!(
        f32_to_tf32(1.0 + 3.0 * 2f32.powi(-11)),
        (1.0 + 2f32.powi(-9)).to_bits()
    );
    assert_eq!(f32_to_tf32(f32::from_bits(0x0000_0001)), 0);
    assert_eq!(f32_to_tf32(-f32::from_bits(0x007f_ffff)), 0x8000_0000);
    assert_eq!(f32_to_tf32(f32::MAX), 0x7f80_0000);
    assert_eq!(f32_to_tf32(f32::from_bits(0x7f80_0001)), 0x7fc0_0000);
    assert_eq!(tf32_to_f32(0x3f80_1fff), 1.0);
    assert_eq!(tf32_to_f32(0x7f80_1fff), f32::INFINITY);
    // Integers: ties to even, saturation, NaN → 0.
    let int = |d, x| from_f32(d, x);
    assert_eq!(int(I32, 2.5), 2);
    assert_eq!(int(I32, 3.5), 4);
    assert_eq!(int(I32, -2.5), (-2i32) as u32);
    assert_eq!(int(I8, 127.5), 127);
    assert_eq!(int(I8, -128.5), 0x80);
    assert_eq!(int(I8, -200.0), 0x80);
    assert_eq!(int(U8, -1.0), 0);
    assert_eq!(int(U8, 254.5), 254);
    assert_eq!(int(U8, 255.5), 255);
    assert_eq!(int(U16, f32::INFINITY), 0xffff);
    assert_eq!(int(I16, f32::NEG_INFINITY), 0x8000);
    assert_eq!(int(I32, 1e10), i32::MAX as u32);
    assert_eq!(int(I32, -1e10), i32::MIN as u32);
    assert_eq!(int(U32, 1e10), u32::MAX);
    assert_eq!(int(U32, 4_294_967_040.0), 4_294_967_040);
    assert_eq!(int(I32, f32::NAN), 0);
    assert_eq!(int(U8, -f32::NAN), 0);
    assert_eq!(int(I8, -0.0), 0);
    // bool.
    assert_eq!(from_f32(Bool, -0.0), 0);
    assert_eq!(from_f32(Bool, f32::NAN), 1);
    assert_eq!(from_f32(Bool, 1e-45), 1);
    assert_eq!(to_f32(Bool, 0x80), 1.0);
    assert_eq!(to_f32(Bool, 0x100), 0.0); // only the element's byte counts
}

#[test]
fn integer_lanes() {
    assert_eq!(to_i32(I8, 0xff), -1);
    assert_eq!(to_i32(U8, 0xff), 255);
    assert_eq!(to_i32(I16, 0x8000), -32768);
    assert_eq!(to_i32(U16, 0x8000), 32768);
    assert_eq!(to_i32(U32, 0xffff_fffe), -2);
    assert_eq!(to_i32(Bool, 0x02), 1);
    assert_eq!(to_i32(Bf16, 0xbf80), 0xbf80);
    assert_eq!(to_i32(F32, 0xbf80_0000), 0xbf80_0000u32 as i32);
    assert_eq!(from_i32(U8, 300), 44);
    assert_eq!(from_i32(I8, -1), 0xff);
    assert_eq!(from_i32(U16, -1), 0xffff);
    assert_eq!(from_i32(I32, -1), u32::MAX);
    assert_eq!(from_i32(Bool, !1), 0);
    assert_eq!(from_i32(Bool, !0), 1);
    assert_eq!(from_i32(Bool, 2), 0);
    assert_eq!(from_i32(F8E4M3, 0x1234), 0x34);
    for dtype in DType::ALL {
        for bits in patterns(dtype) {
            let lane = to_i32(dtype, bits);
            let back = from_i32(dtype, lane);
            match dtype {
                Bool => assert_eq!(back, (bits as u8 != 0) as u32),
                F32 | Tf32 | Bf16 | F16 | F8E4M3 | F8E5M2 | I8 | I16 | I32 | U8 | U16 | U32
                | F8E4M3Fn | F4E2M1Fn | F8E8M0Fnu | F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => {
                    assert_eq!(back, bits, "{dtype} {bits:#x}")
                }
            }
            // Sign- and zero-extension agree with `as` for the integer types.
            let want = match dtype {
                I8 => bits as u8 as i8 as i32,
                I16 => bits as u16 as i16 as i32,
                U8 => bits as u8 as i32,
                U16 => bits as u16 as i32,
                F32 | Tf32 | Bf16 | F16 | F8E4M3 | F8E5M2 | I32 | U32 | Bool | F8E4M3Fn
                | F4E2M1Fn | F8E8M0Fnu | F8E5M2X4 | F8E4M3FnX4 | F4E2M1FnX4 => continue,
            };
            assert_eq!(lane, want, "{dtype} {bits:#x}");
        }
    }
    // The runs, on every path, unaligned and with tails.
    let mut rng = Rng::new(11);
    let lanes: Vec<i32> = (0..1003).map(|_| rng.next_u32() as i32).collect();
    let bytes: Vec<u8> = (0..4 * 1003 + 3).map(|_| rng.next_u32() as u8).collect();
    for isa in Isa::supported() {
        for dtype in DType::ALL {
            let size = dtype.size() as usize;
            for (start, n) in [(0, 1003), (1, 17), (3, 1000), (2, 0)] {
                let mut got = vec![0i32; n];
                load_i32(isa, &bytes[start..], dtype, &mut got);
                for (i, &g) in got.iter().enumerate() {
                    let s = &bytes[start + i * size..start + (i + 1) * size];
                    assert_eq!(g, to_i32(dtype, read_bits(s)), "{isa:?} {dtype}");
                }
                let mut out = vec![0x5au8; start + n * size + 5];
                store_i32(isa, &lanes[..n], &mut out[start..], dtype);
                let mut want = vec![0x5au8; start + n * size + 5];
                for (i, &v) in lanes[..n].iter().enumerate() {
                    write_bits(
                        &mut want[start + i * size..start + (i + 1) * size],
                        from_i32(dtype, v),
                    );
                }
                assert_eq!(out, want, "{isa:?} {dtype} store_i32");
            }
        }
    }
}

// ---- Every path equals the definitions ----

#[test]
fn loads_every_pattern_every_path() {
    for dtype in DType::ALL {
        let bits = patterns(dtype);
        let want: Vec<u32> = bits.iter().map(|&b| to_f32(dtype, b).to_bits()).collect();
        for isa in Isa::supported() {
            let got = load_run(isa, dtype, &bits);
            assert_same(&got, &want, &bits, &format!("{isa:?} load {dtype}"));
        }
    }
}

#[test]
fn stores_every_path() {
    let mut inputs = f32_inputs();
    inputs.extend(dense_f32_inputs());
    for dtype in DType::ALL {
        let want: Vec<u32> = inputs
            .iter()
            .map(|&b| from_f32(dtype, f32::from_bits(b)))
            .collect();
        for isa in Isa::supported() {
            let got = store_run(isa, dtype, &inputs);
            assert_same(&got, &want, &inputs, &format!("{isa:?} store {dtype}"));
        }
    }
}

#[test]
fn convert_is_store_of_load_every_pair_every_path() {
    for s in DType::ALL {
        // Every pattern of an 8- or 16-bit source, edge and random ones of a 32-bit one.
        let bits = patterns(s);
        let n = bits.len();
        let src = pack(s, &bits);
        for d in DType::ALL {
            let want = if s == d {
                src.clone()
            } else {
                let mut f = vec![0f32; n];
                load_f32(Isa::Portable, &src, s, &mut f);
                let mut out = vec![0u8; n * d.size() as usize];
                store_f32(Isa::Portable, &f, &mut out, d);
                // …which is the scalar definitions.
                let defs: Vec<u32> = bits.iter().map(|&b| from_f32(d, to_f32(s, b))).collect();
                assert_same(&unpack(d, &out), &defs, &bits, &format!("{s} -> {d}"));
                out
            };
            for isa in Isa::supported() {
                let mut out = vec![0xa5u8; n * d.size() as usize + 3];
                convert(isa, &src, s, &mut out, d, n);
                let got = unpack(d, &out[..want.len()]);
                let what = format!("{isa:?} {s} -> {d}");
                assert_same(&got, &unpack(d, &want), &bits, &what);
                assert!(out[want.len()..].iter().all(|&b| b == 0xa5), "{what}");
            }
        }
    }
}

#[test]
fn unaligned_runs_and_tails_every_path() {
    let mut rng = Rng::new(3);
    let bytes: Vec<u8> = (0..4 * 1100 + 8).map(|_| rng.next_u32() as u8).collect();
    for isa in Isa::supported() {
        for s in DType::ALL {
            for d in DType::ALL {
                let (ss, ds) = (s.size() as usize, d.size() as usize);
                for start in [0usize, 1, 3] {
                    for count in [0usize, 1, 7, 8, 15, 16, 17, 31, 33, 100, 1000] {
                        let src = &bytes[start..];
                        // Bytes after the run must stay untouched.
                        let mut out = vec![0x5au8; start + count * ds + 9];
                        convert(isa, src, s, &mut out[start..], d, count);
                        let mut want = vec![0x5au8; start + count * ds + 9];
                        for i in 0..count {
                            let b = read_bits(&src[i * ss..(i + 1) * ss]);
                            let w = if s == d { b } else { from_f32(d, to_f32(s, b)) };
                            write_bits(&mut want[start + i * ds..start + (i + 1) * ds], w);
                        }
                        assert_eq!(out, want, "{isa:?} {s}->{d} start {start} count {count}");
                    }
                }
                // load_f32 / store_f32 from and to unaligned bytes.
                if d == F32 {
                    let mut f = vec![0f32; 37];
                    load_f32(isa, &bytes[1..], s, &mut f);
                    for (i, x) in f.iter().enumerate() {
                        let b = read_bits(&bytes[1 + i * ss..1 + (i + 1) * ss]);
                        assert_eq!(x.to_bits(), to_f32(s, b).to_bits(), "{isa:?} load {s}");
                    }
                    let mut out = vec![0x77u8; 3 + 37 * ss + 2];
                    store_f32(isa, &f, &mut out[3..], s);
                    for (i, x) in f.iter().enumerate() {
                        let got = read_bits(&out[3 + i * ss..3 + (i + 1) * ss]);
                        assert_eq!(got, from_f32(s, *x), "{isa:?} store {s}");
                    }
                    assert_eq!(&out[..3], &[0x77; 3]);
                    assert_eq!(&out[3 + 37 * ss..], &[0x77; 2]);
                }
            }
        }
    }
}

/// Every f32 bit pattern stored as every dtype, and every 32-bit pattern loaded, on every path
/// against the definitions (minutes; run with `--release -- --ignored`).
#[test]
#[ignore = "exhaustive over 2^32 inputs; minutes in release"]
fn exhaustive_32_bit_inputs_every_path() {
    const BLOCK: u64 = 1 << 20;
    let isas: Vec<Isa> = Isa::supported().into_iter().skip(1).collect();
    let mut f = vec![0f32; BLOCK as usize];
    let mut want = vec![0u8; 4 * BLOCK as usize];
    let mut got = vec![0u8; 4 * BLOCK as usize];
    let mut loaded = vec![0f32; BLOCK as usize];
    for start in (0..1u64 << 32).step_by(BLOCK as usize) {
        for (i, x) in f.iter_mut().enumerate() {
            *x = f32::from_bits((start + i as u64) as u32);
        }
        let bytes: &[u8] = bytemuck::cast_slice(&f);
        for dtype in DType::ALL {
            if dtype == F32 {
                continue;
            }
            let size = dtype.size() as usize;
            store_f32(Isa::Portable, &f, &mut want, dtype);
            for &isa in &isas {
                store_f32(isa, &f, &mut got, dtype);
                assert!(
                    got[..size * BLOCK as usize] == want[..size * BLOCK as usize],
                    "{isa:?} store {dtype} in block {start:#x}"
                );
            }
            if size == 4 {
                let mut w = vec![0f32; BLOCK as usize];
                load_f32(Isa::Portable, bytes, dtype, &mut w);
                for &isa in &isas {
                    load_f32(isa, bytes, dtype, &mut loaded);
                    let (a, b): (&[u32], &[u32]) =
                        (bytemuck::cast_slice(&loaded), bytemuck::cast_slice(&w));
                    assert!(a == b, "{isa:?} load {dtype} in block {start:#x}");
                }
            }
        }
    }
}
