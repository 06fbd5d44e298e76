//! The NKI Library's `RoPE` (`examples/nkilib_rope.rs`) at shapes of
//! `test/integration/nkilib/core/embeddings/test_rope.py` (its fast list's `d_head`, `B`,
//! `n_heads` and `S` values and the manual list's shapes that fit in SBUF here), in f32 and bf16,
//! in the contiguous and the interleaved layouts (the latter by strided DMA and by the matmul in
//! SBUF, and `relayout_in_sbuf` past `gemm_moving_fmax` falling back to DMA), over one program
//! and over `grid(2)` (the test's `lnc_shard=True` on a Trn2), against a rotation in f64 written
//! here, with the library test's tolerance (`rtol` 2⁻⁷, `atol` 1e-3; `|got − want| <= atol +
//! rtol·|want|`).
//!
//! The library checks bf16 against its torch reference computed in bf16, which rounds the two
//! products and the difference as the kernel does. Against f64, the rounding of the two
//! products (the kernel's `even_cos`, `odd_sin`, ... tiles have the input's dtype, as in the
//! source) is added to the bound: half a bf16 ulp, 2⁻⁸ relative, of each (`mag` below); the
//! library's tolerance alone is exceeded (0.0156 against 0.0091 at `(128, 32, 4, 64)`: an
//! error of 0.0065 where it allows 0.0011). f32 results are also held to a bound of a few f32 roundings, which a wrong pairing
//! or sign cannot meet. The last test launches the `LNC = 2` kernel over other grids.

use crate::common;
use crate::examples::nkilib_rope::*;

use nki::ndarray::{Array3, Array4, ArrayView3, ArrayView4, Ix3, Ix4};
use nki::prelude::*;
use nki::program::Target;

/// `rope_torch_ref` in f64: for each batch, head and position, the pairs `(x[i], x[h + i])`
/// (contiguous) or `(x[2i], x[2i + 1])` (interleaved) rotated by `(cos[i], sin[i])`; and the
/// magnitude `|re·cos| + |im·sin|` of the two products each output sums.
fn rotation(
    x: &Array4<f64>,
    cos: &Array3<f64>,
    sin: &Array3<f64>,
    contiguous: bool,
) -> (Array4<f64>, Array4<f64>) {
    let (d, b, nh, s) = x.dim();
    let h = d / 2;
    let mut out = Array4::<f64>::zeros((d, b, nh, s));
    let mut mag = Array4::<f64>::zeros((d, b, nh, s));
    for bi in 0..b {
        for hi in 0..nh {
            for si in 0..s {
                for i in 0..h {
                    let (re, im) = if contiguous {
                        (i, h + i)
                    } else {
                        (2 * i, 2 * i + 1)
                    };
                    let xr = x[[re, bi, hi, si]];
                    let xi = x[[im, bi, hi, si]];
                    let c = cos[[i, bi, si]];
                    let sn = sin[[i, bi, si]];
                    out[[re, bi, hi, si]] = xr * c - xi * sn;
                    out[[im, bi, hi, si]] = xr * sn + xi * c;
                    mag[[re, bi, hi, si]] = (xr * c).abs() + (xi * sn).abs();
                    mag[[im, bi, hi, si]] = (xr * sn).abs() + (xi * c).abs();
                }
            }
        }
    }
    (out, mag)
}

/// A kernel instantiation run on a Trn2 core.
type Run<T> = fn(&mut NeuronCore, ArrayView4<T>, ArrayView3<T>, ArrayView3<T>) -> Array4<T>;

/// One case: `(d_head, B, n_heads, S)`, the layout, the instantiation.
struct Case<T> {
    shape: (usize, usize, usize, usize),
    contiguous: bool,
    run: Run<T>,
}

/// The library test's bound, `atol + rtol·|want|`.
fn library(want: f64, _mag: f64) -> f64 {
    ATOL + RTOL * want.abs()
}

/// Runs each case on inputs converted to `T` by `to`, and checks every output element against
/// the f64 rotation of the converted inputs within `bound(want, mag)`.
fn check<T: Copy + Into<f64>>(
    dtype: &str,
    cases: &[Case<T>],
    to: fn(f32) -> T,
    bound: fn(f64, f64) -> f64,
) {
    for (k, case) in cases.iter().enumerate() {
        let (d, b, nh, s) = case.shape;
        let seed = 100 * k as u64 + d as u64;
        // x uniform in [−2, 2]; cos and sin of angles uniform in [0, 2π) (the library test
        // draws Gaussian cos and sin; true ones keep the outputs at the inputs' scale).
        let x = common::rand_f32(Ix4(d, b, nh, s), seed, -2.0, 2.0).mapv(to);
        let angle = common::rand_f32(Ix3(d / 2, b, s), seed + 1, 0.0, std::f64::consts::TAU);
        let cos = angle.mapv(|a| to(f64::from(a).cos() as f32));
        let sin = angle.mapv(|a| to(f64::from(a).sin() as f32));
        let mut core = NeuronCore::new(Target::Trn2);
        let got = (case.run)(&mut core, x.view(), cos.view(), sin.view());
        assert_eq!(got.dim(), (d, b, nh, s));
        let (want, mag) = rotation(
            &x.mapv(Into::into),
            &cos.mapv(Into::into),
            &sin.mapv(Into::into),
            case.contiguous,
        );
        for (idx, &w) in want.indexed_iter() {
            let g: f64 = got[idx].into();
            let bound = bound(w, mag[idx]);
            assert!(
                (g - w).abs() <= bound,
                "{dtype} {:?} contiguous {} at {idx:?}: {g} vs {w} (bound {bound})",
                case.shape,
                case.contiguous
            );
        }
    }
}

#[test]
fn f32_matches_the_rotation_with_the_library_tolerance() {
    let cases: [Case<f32>; 6] = [
        Case {
            shape: (128, 32, 4, 64),
            contiguous: true,
            run: |c, x, co, si| rope_f32_128x32x4x64::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (128, 8, 1, 128),
            contiguous: true,
            run: |c, x, co, si| rope_f32_128x8x1x128::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (64, 1, 8, 16),
            contiguous: true,
            run: |c, x, co, si| rope_f32_64x1x8x16_lnc2::grid(2).host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (128, 64, 8, 2),
            contiguous: false,
            run: |c, x, co, si| rope_f32_128x64x8x2_dma::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (64, 1, 8, 16),
            contiguous: false,
            run: |c, x, co, si| rope_f32_64x1x8x16_sbuf::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (128, 8, 1, 16),
            contiguous: false,
            run: |c, x, co, si| {
                rope_f32_128x8x1x16_sbuf_lnc2::grid(2)
                    .host(c, x, co, si)
                    .unwrap()
            },
        },
    ];
    check("f32", &cases, |v| v, library);
}

#[test]
fn f32_is_within_a_few_f32_roundings() {
    // Each product rounded to f32 (2⁻²⁴ of it), the sum rounded once more (2⁻²⁴ of the
    // result), with a factor 2 of margin: far below the library's atol.
    let cases: [Case<f32>; 2] = [
        Case {
            shape: (128, 32, 4, 64),
            contiguous: true,
            run: |c, x, co, si| rope_f32_128x32x4x64::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (64, 1, 8, 16),
            contiguous: false,
            run: |c, x, co, si| rope_f32_64x1x8x16_sbuf::host(c, x, co, si).unwrap(),
        },
    ];
    check(
        "f32 (tight)",
        &cases,
        |v| v,
        |w, mag| 2f64.powi(-23) * (mag + w.abs()),
    );
}

#[test]
fn bf16_matches_the_rotation_with_the_library_tolerance_and_the_products_rounding() {
    let cases: [Case<bf16>; 9] = [
        Case {
            shape: (128, 1, 1, 8192),
            contiguous: true,
            run: |c, x, co, si| rope_bf16_128x1x1x8192::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (64, 1, 1, 8192),
            contiguous: true,
            run: |c, x, co, si| {
                rope_bf16_64x1x1x8192_lnc2::grid(2)
                    .host(c, x, co, si)
                    .unwrap()
            },
        },
        Case {
            shape: (128, 32, 4, 64),
            contiguous: true,
            run: |c, x, co, si| rope_bf16_128x32x4x64::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (64, 64, 8, 16),
            contiguous: true,
            run: |c, x, co, si| {
                rope_bf16_64x64x8x16_lnc2::grid(2)
                    .host(c, x, co, si)
                    .unwrap()
            },
        },
        Case {
            shape: (128, 32, 4, 64),
            contiguous: false,
            run: |c, x, co, si| rope_bf16_128x32x4x64_dma::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (64, 255, 8, 6),
            contiguous: false,
            run: |c, x, co, si| rope_bf16_64x255x8x6_dma::host(c, x, co, si).unwrap(),
        },
        Case {
            shape: (128, 128, 4, 4),
            contiguous: false,
            run: |c, x, co, si| {
                rope_bf16_128x128x4x4_dma_lnc2::grid(2)
                    .host(c, x, co, si)
                    .unwrap()
            },
        },
        Case {
            shape: (128, 1, 1, 16),
            contiguous: false,
            run: |c, x, co, si| rope_bf16_128x1x1x16_sbuf::host(c, x, co, si).unwrap(),
        },
        Case {
            // relayout_in_sbuf with B·n_heads·S = 8192 > gemm_moving_fmax: strided DMA.
            shape: (64, 8, 8, 128),
            contiguous: false,
            run: |c, x, co, si| rope_bf16_64x8x8x128_sbuf_fallback::host(c, x, co, si).unwrap(),
        },
    ];
    check("bf16", &cases, bf16::from_f32, |w, mag| {
        library(w, mag) + 2f64.powi(-8) * mag
    });
}

#[test]
fn a_grid_other_than_the_program_count_is_refused() {
    // LNC = 2 splits S = 16 into two programs of 8 positions: a third program's slice would
    // start at position 16, past the tensors, and the launch is refused before anything runs.
    let x = Array4::<f32>::zeros((64, 1, 8, 16));
    let cs = Array3::<f32>::zeros((32, 1, 16));
    let mut core = NeuronCore::new(Target::Trn2);
    let err = rope_f32_64x1x8x16_lnc2::grid(3)
        .host(&mut core, x.view(), cs.view(), cs.view())
        .unwrap_err();
    assert!(matches!(err, LaunchError::Constraint { .. }), "{err}");
    rope_f32_64x1x8x16_lnc2::grid(2)
        .host(&mut core, x.view(), cs.view(), cs.view())
        .unwrap();
    // One program covers the first 8 positions only: a strict launch refuses the output's
    // unwritten half.
    let mut strict = NeuronCore::new(Target::Trn2).with_strict(true);
    let err = rope_f32_64x1x8x16_lnc2::grid(1)
        .host(&mut strict, x.view(), cs.view(), cs.view())
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("4096 elements of output `x_out` unwritten"),
        "{msg}"
    );
}

#[test]
fn cos_of_another_shape_is_refused_at_launch() {
    // The source's `_validate_rope_inputs` checks cos.shape == (d_head // 2, B, S); here the
    // signature `Hbm<T, { D / 2 }, B, S>` does.
    let x = Array4::<f32>::zeros((64, 1, 8, 16));
    let cs = Array3::<f32>::zeros((32, 1, 16));
    let short = Array3::<f32>::zeros((32, 1, 8));
    let mut core = NeuronCore::new(Target::Trn2);
    let err = rope_f32_64x1x8x16_lnc2::grid(2)
        .host(&mut core, x.view(), short.view(), cs.view())
        .unwrap_err();
    assert!(
        matches!(&err, LaunchError::Dim { tensor, axis: 2, expected: 16, found: 8 } if *tensor == "cos"),
        "{err:?}"
    );
}

/// The kernel's own sequence in f32, element by element: the four products rounded to f32,
/// then their difference and sum (`out[:h] = x[:h]·cos − x[h:]·sin`, `out[h:] = x[h:]·cos +
/// x[:h]·sin`, contiguous halves).
fn rotation_in_f32(x: &Array4<f32>, cos: &Array3<f32>, sin: &Array3<f32>) -> Array4<f32> {
    let (d, b, nh, s) = x.dim();
    let h = d / 2;
    let mut out = Array4::<f32>::zeros((d, b, nh, s));
    for ((i, bi, hi, si), o) in out.indexed_iter_mut() {
        let (c, sn) = (cos[[i % h, bi, si]], sin[[i % h, bi, si]]);
        let (lo, hi_) = (x[[i % h, bi, hi, si]], x[[h + i % h, bi, hi, si]]);
        *o = if i < h {
            lo * c - hi_ * sn
        } else {
            hi_ * c + lo * sn
        };
    }
    out
}

/// At the tutorial's `(128, 32, 4, 64)` in f32 the copy and the four products only pass data
/// to the difference and the sum, which the host computes without their tiles (the allocator
/// puts the result over `cos` and `sin`, so each row is written once it is read, and the sum
/// runs before the difference that overwrites what it reads): the same bits as the kernel's
/// instructions one after the other, on cores that block a few partitions at a time or never,
/// on one and two host threads, and on a strict core that runs every instruction as written.
#[test]
fn f32_gives_the_kernels_own_roundings_on_every_host_plan() {
    let x = common::rand_f32(Ix4(128, 32, 4, 64), 61, -2.0, 2.0);
    let cos = common::rand_f32(Ix3(64, 32, 64), 62, -1.0, 1.0);
    let sin = common::rand_f32(Ix3(64, 32, 64), 63, -1.0, 1.0);
    let want = rotation_in_f32(&x, &cos, &sin);
    let cores = [
        ("strict", true, 1 << 30, 2),
        ("4 KiB blocks, 1 thread", false, 4 << 10, 1),
        ("64 KiB blocks, 2 threads", false, 64 << 10, 2),
        ("1 MiB blocks, 2 threads", false, 1 << 20, 2),
        ("no blocks, 2 threads", false, 1 << 30, 2),
    ];
    for (name, strict, cache, threads) in cores {
        let mut core = NeuronCore::default()
            .with_strict(strict)
            .with_host_threads(threads)
            .with_host_cache_bytes(cache);
        let got = rope_f32_128x32x4x64::host(&mut core, x.view(), cos.view(), sin.view()).unwrap();
        assert_eq!(got, want, "{name}");
    }
}
