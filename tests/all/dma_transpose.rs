//! `dma_transpose` (NKI's `nisa.dma_transpose`): an HBM access or an SBUF tile of 2, 3 or 4
//! axes into a new SBUF tile, permuted as NKI permutes a source of its rank (`[1, 0]`,
//! `[2, 1, 0]`, `[3, 1, 2, 0]`), in f32, bf16 and int32, cast, masked and ragged; against the
//! permutations written as plain loops. Every launch runs strictly (`NeuronCore::default()`).

use crate::common;

use common::*;
use nki::ndarray::{Array, Array2, Array3, Array4, Dimension, Ix2, Ix3, Ix4};
use nki::prelude::*;

/// The six transposes (from HBM and from SBUF, of 2, 3 and 4 axes) of one dtype.
macro_rules! transposes {
    ($m:ident, $t:ident) => {
        #[allow(
            dead_code,
            reason = "each kernel is launched through its module's `host`"
        )]
        mod $m {
            use nki::prelude::*;

            #[kernel]
            pub fn hbm2(a: Hbm<$t, 96, 40>) -> Hbm<$t, 40, 96> {
                let out = ndarray([40, 96], $t, SharedHbm);
                let t = dma_transpose(a[..]);
                store(out[..], t);
                out
            }

            #[kernel]
            pub fn hbm3(a: Hbm<$t, 5, 6, 7>) -> Hbm<$t, 7, 6, 5> {
                let out = ndarray([7, 6, 5], $t, SharedHbm);
                let t = dma_transpose(a[..], axes = [2, 1, 0]);
                store(out[..], t);
                out
            }

            #[kernel]
            pub fn hbm4(a: Hbm<$t, 3, 4, 5, 6>) -> Hbm<$t, 6, 4, 5, 3> {
                let out = ndarray([6, 4, 5, 3], $t, SharedHbm);
                let t = dma_transpose(a[..], axes = (3, 1, 2, 0));
                store(out[..], t);
                out
            }

            #[kernel]
            pub fn sbuf2(a: Hbm<$t, 96, 40>) -> Hbm<$t, 40, 96> {
                let out = ndarray([40, 96], $t, SharedHbm);
                let s = load(a[..]);
                let t = dma_transpose(s, axes = [1, 0]);
                store(out[..], t);
                out
            }

            #[kernel]
            pub fn sbuf3(a: Hbm<$t, 8, 6, 20>) -> Hbm<$t, 20, 6, 8> {
                let out = ndarray([20, 6, 8], $t, SharedHbm);
                let s = load(a[..]);
                let t = dma_transpose(s);
                store(out[..], t);
                out
            }

            #[kernel]
            pub fn sbuf4(a: Hbm<$t, 8, 3, 4, 10>) -> Hbm<$t, 10, 3, 4, 8> {
                let out = ndarray([10, 3, 4, 8], $t, SharedHbm);
                let s = load(a[..]);
                let t = dma_transpose(s);
                store(out[..], t);
                out
            }
        }
    };
}

transposes!(of_f32, f32);
transposes!(of_bf16, bf16);
transposes!(of_i32, i32);

/// `out[j, i] = a[i, j]`.
fn t2<T: Copy>(a: &Array2<T>) -> Array2<T> {
    let (r, c) = a.dim();
    Array2::from_shape_fn((c, r), |(j, i)| a[[i, j]])
}

/// `out[k, j, i] = a[i, j, k]` (axes `[2, 1, 0]`).
fn t3<T: Copy>(a: &Array3<T>) -> Array3<T> {
    let (x, y, z) = a.dim();
    Array3::from_shape_fn((z, y, x), |(k, j, i)| a[[i, j, k]])
}

/// `out[l, j, k, i] = a[i, j, k, l]` (axes `[3, 1, 2, 0]`).
fn t4<T: Copy>(a: &Array4<T>) -> Array4<T> {
    let (w, x, y, z) = a.dim();
    Array4::from_shape_fn((z, x, y, w), |(l, j, k, i)| a[[i, j, k, l]])
}

/// Distinct values of every element (`base + 1000·i + 0.25`, i the row-major index).
fn distinct<D: Dimension>(shape: D, base: f32) -> Array<f32, D> {
    let mut k = 0.0f32;
    Array::from_shape_fn(shape, |_| {
        k += 1.0;
        base + k * 3.0 + 0.25
    })
}

macro_rules! check_dtype {
    ($name:ident, $m:ident, $conv:expr) => {
        #[test]
        fn $name() {
            let conv = $conv;
            let mut core = NeuronCore::default();
            let a = distinct(Ix2(96, 40), -5000.0).mapv(conv);
            assert_eq!(
                $m::hbm2::host(&mut core, a.view()).unwrap(),
                t2(&a),
                "hbm 2-D"
            );
            assert_eq!(
                $m::sbuf2::host(&mut core, a.view()).unwrap(),
                t2(&a),
                "sbuf 2-D"
            );
            let a = distinct(Ix3(5, 6, 7), -100.0).mapv(conv);
            assert_eq!(
                $m::hbm3::host(&mut core, a.view()).unwrap(),
                t3(&a),
                "hbm 3-D"
            );
            let a = distinct(Ix3(8, 6, 20), 7.0).mapv(conv);
            assert_eq!(
                $m::sbuf3::host(&mut core, a.view()).unwrap(),
                t3(&a),
                "sbuf 3-D"
            );
            let a = distinct(Ix4(3, 4, 5, 6), -300.0).mapv(conv);
            assert_eq!(
                $m::hbm4::host(&mut core, a.view()).unwrap(),
                t4(&a),
                "hbm 4-D"
            );
            let a = distinct(Ix4(8, 3, 4, 10), 11.0).mapv(conv);
            assert_eq!(
                $m::sbuf4::host(&mut core, a.view()).unwrap(),
                t4(&a),
                "sbuf 4-D"
            );
        }
    };
}

check_dtype!(every_permutation_in_f32, of_f32, |x: f32| x);
check_dtype!(every_permutation_in_bf16, of_bf16, bf16::from_f32);
check_dtype!(every_permutation_in_int32, of_i32, |x: f32| x as i32);

#[test]
fn the_listing_names_the_dma_transposes() {
    let p = of_f32::hbm3::KERNEL.program();
    assert!(has_instr(p, "DMA", "dma_transpose"), "{p}");
    let p = of_f32::sbuf4::KERNEL.program();
    assert!(has_instr(p, "DMA", "dma_transpose_sbuf"), "{p}");
}

/// A 3-D HBM access `[4, 6, N]` transposed 128 columns at a time into `[128, 6, 4]` tiles, the
/// last one partial (masked on the result's partitions), cast to bf16 on the way.
#[kernel]
fn ragged3(a: Hbm<f32, 4, 6, N>) -> Hbm<bf16, N, 6, 4> {
    let out = ndarray([N, 6, 4], bf16, SharedHbm);
    let (i_a, i_b, i_c) = mgrid![0..4, 0..6, 0..128];
    let (j_p, j_b, j_a) = mgrid![0..128, 0..6, 0..4];
    for k in affine_range((N + 127) / 128) {
        let t = dma_transpose(
            a[[i_a, i_b, k * 128 + i_c]],
            axes = [2, 1, 0],
            mask = k * 128 + j_p < N,
            dtype = bf16,
        );
        store(out[[k * 128 + j_p, j_b, j_a]], t, mask = k * 128 + j_p < N);
    }
    out
}

#[test]
fn a_ragged_three_axis_transpose_from_hbm_cast_to_bf16() {
    for n in [1, 100, 128, 300] {
        let a = distinct(Ix3(4, 6, n), 0.5);
        let out = ragged3::host(&mut NeuronCore::default(), a.view()).unwrap();
        assert_eq!(out, t3(&a).mapv(bf16::from_f32), "N = {n}");
    }
}

/// An SBUF tile `[64, 100]` transposed into `[100, 64]` with only the result's partitions
/// `p < 70` and columns `f < 50` moved (the rest of the result zeroed first), cast to int32.
#[kernel]
fn masked_sbuf(a: Hbm<f32, 64, 100>) -> Hbm<i32, 100, 64> {
    let out = ndarray([100, 64], i32, SharedHbm);
    let s = load(a[..]);
    let (j_p, j_f) = mgrid![0..100, 0..64];
    let r = zeros([100, 64], i32, Sbuf);
    r[[.., ..]] = dma_transpose(s, mask = (j_p < 70) & (j_f < 50), dtype = i32);
    store(out[..], r);
    out
}

#[test]
fn a_masked_sbuf_transpose_moves_only_the_masked_elements() {
    let a = distinct(Ix2(64, 100), -2000.0);
    let out = masked_sbuf::host(&mut NeuronCore::default(), a.view()).unwrap();
    let want = Array2::from_shape_fn((100, 64), |(p, f)| {
        // f32 → int32 rounds to nearest (`docs/numerics.md`); the values end in .25 or .75.
        if p < 70 && f < 50 {
            a[[f, p]].round() as i32
        } else {
            0
        }
    });
    assert_eq!(out, want);
}

/// A 4-D SBUF tile `[16, 2, 3, 128]` into `[128, 2, 3, 16]`, masked on the result's axes 2 and
/// 3 (`b < 2`, `a < 9`): the rest stays as the zeroed tile holds it.
#[kernel]
fn masked_sbuf4(a: Hbm<bf16, 16, 2, 3, 128>) -> Hbm<bf16, 128, 2, 3, 16> {
    let out = ndarray([128, 2, 3, 16], bf16, SharedHbm);
    let s = load(a[..]);
    let w = mgrid![0..128, 0..2, 0..3, 0..16];
    let r = zeros([128, 2, 3, 16], bf16, Sbuf);
    r[[.., .., .., ..]] = dma_transpose(s, mask = (w.y < 2) & (w.z < 9));
    store(out[..], r);
    out
}

#[test]
fn a_masked_four_axis_sbuf_transpose() {
    let a = distinct(Ix4(16, 2, 3, 128), 1.0).mapv(bf16::from_f32);
    let out = masked_sbuf4::host(&mut NeuronCore::default(), a.view()).unwrap();
    let want = Array4::from_shape_fn((128, 2, 3, 16), |(l, j, k, i)| {
        if k < 2 && i < 9 {
            a[[i, j, k, l]]
        } else {
            bf16::from_f32(0.0)
        }
    });
    assert_eq!(out, want);
}

/// The modeled cost (`docs/timing.md`): on Trn2 a transpose of a `[128, 128]` f32 tile within
/// SBUF moves its bytes at 50 % of the DMA engines' peak, from HBM at 90 %: the same bytes take
/// longer on the engines, and only the HBM transpose reads HBM.
#[test]
fn the_timing_model_charges_the_dma_transposes_at_their_rates() {
    use nki::program::{Engine, Opcode};
    use nki::timing::{Detail, Kind, Timing};
    let mut core = NeuronCore::new(Target::Trn2);
    let mut transfer = |kernel: &Kernel<'static>, opcode: Opcode| {
        let s = Timing::new()
            .detail(Detail::Trace)
            .run_shapes(&mut core, kernel, &[&[128, 128]])
            .unwrap();
        assert_eq!(s.opcode_count(Engine::Dma, opcode), 1);
        let busy: u64 = s
            .records()
            .iter()
            .filter(|r| r.opcode == opcode && r.kind == Kind::DmaTransfer)
            .map(|r| r.end - r.start)
            .max()
            .unwrap();
        (busy, s.hbm_read_bytes())
    };
    let (from_hbm, hbm_read) = transfer(&square_from_hbm::KERNEL, Opcode::DmaTranspose);
    let (in_sbuf, sbuf_read) = transfer(&square_in_sbuf::KERNEL, Opcode::DmaTransposeSbuf);
    // Each reads the input once from HBM: the transpose itself, or the load before it.
    assert_eq!((hbm_read, sbuf_read), (128 * 128 * 4, 128 * 128 * 4));
    assert!(
        in_sbuf > from_hbm,
        "{in_sbuf} ps within SBUF, {from_hbm} ps from HBM"
    );
}

#[kernel]
fn square_from_hbm(a: Hbm<f32, 128, 128>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    store(out[..], dma_transpose(a[..]));
    out
}

#[kernel]
fn square_in_sbuf(a: Hbm<f32, 128, 128>) -> Hbm<f32, 128, 128> {
    let out = ndarray([128, 128], f32, SharedHbm);
    let s = load(a[..]);
    store(out[..], dma_transpose(s));
    out
}
