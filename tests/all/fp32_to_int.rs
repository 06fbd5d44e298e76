//! fp32 → integer conversions round to nearest, ties to even, and saturate to the destination's
//! range, as NKI 0.6 documents the hardware ("fp32-to-integer casts match hardware (round to
//! nearest, ties to even; saturate to the destination range)", SDK 2.32.0 release notes,
//! `release-notes/components/nki.rst`, `nki.simulate` fixes). NaN converts to 0: the project's
//! definition, as no source gives the hardware's (`docs/dtypes.md`). Every engine's path is
//! checked (Vector, Scalar and GpSimd `tensor_copy`, `copy`, a DMA cast on load and on store)
//! against a reference written here: `round_ties_even` in f64, then a clamp.

use nki::ndarray::Array2;
use nki::prelude::*;

const P: usize = 128;
const F: usize = 64;

/// The edge values: ties at ±0.5, 1.5, 2.5, −2.5 and near them, each type's limits and the
/// ties beside them, values past every range, ±0, ±inf and NaN.
fn edges() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        3.5,
        -3.5,
        0.499_999_97,
        0.500_000_06,
        -0.499_999_97,
        1.0,
        -1.0,
        126.5,
        127.5,
        128.5,
        -127.5,
        -128.5,
        -129.5,
        254.5,
        255.5,
        256.5,
        32_766.5,
        32_767.5,
        -32_768.5,
        -32_769.5,
        65_534.5,
        65_535.5,
        65_536.0,
        8_388_607.5,
        -8_388_607.5,
        16_777_216.0,
        // The largest f32 below 2^31, 2^31 (i32's max + 1), −2^31 (i32's min), below it.
        2_147_483_520.0,
        2_147_483_648.0,
        -2_147_483_648.0,
        -2_147_483_904.0,
        // The largest f32 below 2^32, and 2^32.
        4_294_967_040.0,
        4_294_967_296.0,
        1e10,
        -1e10,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
    ];
    // And the halves from −300.5 to 300.5, every tie on both sides of zero.
    v.extend((-301..=300).map(|k| k as f32 + 0.5));
    v
}

/// The input: the edge values, then repeated to fill the tile.
fn input() -> Array2<f32> {
    let e = edges();
    Array2::from_shape_fn((P, F), |(p, f)| e[(p * F + f) % e.len()])
}

/// The reference: nearest even, clamped to `[lo, hi]`, NaN → 0.
fn reference(x: f32, lo: f64, hi: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        f64::from(x).round_ties_even().clamp(lo, hi)
    }
}

#[kernel]
fn to_i32(
    x: Hbm<f32, 128, 64>,
) -> (
    Hbm<i32, 128, 64>,
    Hbm<i32, 128, 64>,
    Hbm<i32, 128, 64>,
    Hbm<i32, 128, 64>,
    Hbm<i32, 128, 64>,
    Hbm<i32, 128, 64>,
) {
    let o_vector = ndarray([128, 64], i32, SharedHbm);
    let o_scalar = ndarray([128, 64], i32, SharedHbm);
    let o_gpsimd = ndarray([128, 64], i32, SharedHbm);
    let nl_copy = ndarray([128, 64], i32, SharedHbm);
    let dma_load = ndarray([128, 64], i32, SharedHbm);
    let dma_store = ndarray([128, 64], i32, SharedHbm);
    let t = load(x[..]);
    store(
        o_vector[..],
        tensor_copy(src = t, dtype = i32, engine = vector),
    );
    store(
        o_scalar[..],
        tensor_copy(src = t, dtype = i32, engine = scalar),
    );
    store(
        o_gpsimd[..],
        tensor_copy(src = t, dtype = i32, engine = gpsimd),
    );
    store(nl_copy[..], copy(t, i32));
    store(dma_load[..], load(x[..], dtype = i32));
    store(dma_store[..], t);
    (o_vector, o_scalar, o_gpsimd, nl_copy, dma_load, dma_store)
}

/// One narrower integer type by Vector `tensor_copy`, a DMA cast on load and one on store.
macro_rules! narrow {
    ($m:ident, $d:ident) => {
        mod $m {
            #![allow(dead_code)]
            use nki::prelude::*;
            #[kernel]
            pub fn k(
                x: Hbm<f32, 128, 64>,
            ) -> (Hbm<$d, 128, 64>, Hbm<$d, 128, 64>, Hbm<$d, 128, 64>) {
                let copied = ndarray([128, 64], $d, SharedHbm);
                let loaded = ndarray([128, 64], $d, SharedHbm);
                let stored = ndarray([128, 64], $d, SharedHbm);
                let t = load(x[..]);
                store(copied[..], tensor_copy(src = t, dtype = $d));
                store(loaded[..], load(x[..], dtype = $d));
                store(stored[..], t);
                (copied, loaded, stored)
            }
        }
    };
}

narrow!(k_i16, i16);
narrow!(k_i8, i8);
narrow!(k_u32, u32);
narrow!(k_u16, u16);
narrow!(k_u8, u8);

/// Checks `got` (as f64) against the reference for the range `[lo, hi]`.
#[track_caller]
fn check<T: Copy + Into<f64>>(what: &str, got: &Array2<T>, x: &Array2<f32>, lo: f64, hi: f64) {
    for ((g, &v), i) in got.iter().zip(x).zip(0..) {
        let want = reference(v, lo, hi);
        let g: f64 = (*g).into();
        assert_eq!(
            g,
            want,
            "{what}: element {i}, f32 {v:e} ({:#010x})",
            v.to_bits()
        );
    }
}

#[test]
fn the_reference_says_what_the_release_note_says() {
    // Ties to even, not away from zero (NumPy's astype truncates; C's round goes away).
    assert_eq!(reference(0.5, -128.0, 127.0), 0.0);
    assert_eq!(reference(-0.5, -128.0, 127.0), 0.0);
    assert_eq!(reference(1.5, -128.0, 127.0), 2.0);
    assert_eq!(reference(2.5, -128.0, 127.0), 2.0);
    assert_eq!(reference(-2.5, -128.0, 127.0), -2.0);
    assert_eq!(reference(127.5, -128.0, 127.0), 127.0);
    assert_eq!(reference(-128.5, -128.0, 127.0), -128.0);
    assert_eq!(reference(f32::INFINITY, 0.0, 255.0), 255.0);
    assert_eq!(reference(-1.0, 0.0, 255.0), 0.0);
}

#[test]
fn fp32_to_i32_on_every_engine_path() {
    let x = input();
    let mut core = NeuronCore::default();
    let (vector, scalar, gpsimd, nl_copy, dma_load, dma_store) =
        to_i32::host(&mut core, x.view()).unwrap();
    let (lo, hi) = (f64::from(i32::MIN), f64::from(i32::MAX));
    check("Vector tensor_copy", &vector, &x, lo, hi);
    check("Scalar tensor_copy", &scalar, &x, lo, hi);
    check("GpSimd tensor_copy", &gpsimd, &x, lo, hi);
    check("copy", &nl_copy, &x, lo, hi);
    check("DMA cast on load", &dma_load, &x, lo, hi);
    check("DMA cast on store", &dma_store, &x, lo, hi);
    // The named edges, spelled out.
    let at = |v: f32| {
        let i = x.iter().position(|&e| e.to_bits() == v.to_bits()).unwrap();
        vector.iter().nth(i).copied().unwrap()
    };
    assert_eq!(
        [at(0.5), at(-0.5), at(1.5), at(2.5), at(-2.5)],
        [0, 0, 2, 2, -2]
    );
    assert_eq!(at(2_147_483_648.0), i32::MAX);
    assert_eq!(at(-2_147_483_648.0), i32::MIN);
    assert_eq!(at(-2_147_483_904.0), i32::MIN);
    assert_eq!(at(2_147_483_520.0), 2_147_483_520);
    assert_eq!(at(f32::INFINITY), i32::MAX);
    assert_eq!(at(f32::NEG_INFINITY), i32::MIN);
    assert_eq!(at(f32::NAN), 0);
}

#[test]
fn fp32_to_narrow_integers_saturate_at_their_limits() {
    let x = input();
    let mut core = NeuronCore::default();
    macro_rules! run {
        ($m:ident, $t:ty) => {{
            let (copied, loaded, stored) = $m::k::host(&mut core, x.view()).unwrap();
            let (lo, hi) = (f64::from(<$t>::MIN), f64::from(<$t>::MAX));
            let name = stringify!($t);
            check(&format!("{name} tensor_copy"), &copied, &x, lo, hi);
            check(&format!("{name} DMA cast on load"), &loaded, &x, lo, hi);
            check(&format!("{name} DMA cast on store"), &stored, &x, lo, hi);
            copied
        }};
    }
    let i8s = run!(k_i8, i8);
    run!(k_i16, i16);
    let u8s = run!(k_u8, u8);
    run!(k_u16, u16);
    run!(k_u32, u32);
    let pos = |v: f32| x.iter().position(|&e| e.to_bits() == v.to_bits()).unwrap();
    let i8_at = |v: f32| i8s.iter().nth(pos(v)).copied().unwrap();
    let u8_at = |v: f32| u8s.iter().nth(pos(v)).copied().unwrap();
    assert_eq!([i8_at(126.5), i8_at(127.5), i8_at(128.5)], [126, 127, 127]);
    assert_eq!(
        [i8_at(-127.5), i8_at(-128.5), i8_at(-129.5)],
        [-128, -128, -128]
    );
    assert_eq!([u8_at(254.5), u8_at(255.5), u8_at(-1.0)], [254, 255, 0]);
    assert_eq!([u8_at(f32::NEG_INFINITY), u8_at(f32::NAN)], [0, 0]);
}
