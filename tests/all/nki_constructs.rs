//! NKI constructs that kernels AWS published use, each run and compared with a reference
//! computed here with plain loops: `tile.broadcast_to(shape)`, dtype limits (`nl.fp32.min`,
//! `nl.finfo(dtype).min`), Python arithmetic at trace time (`min`, `max`, floats mixed with
//! integers, `x if c else y`), axes as tuples and negative axes, two- and three-argument loop
//! ranges, `nl.ds` bound to a name, Rust's `a.min(b)` / `a.max(b)` spelling of Python's `min` /
//! `max`, NKI's `x.shape` (indexed, destructured, and as a shape argument), keyword arguments of
//! the loop iterators, and NKI's Python `assert` as `assert!` / `assert_eq!` / `assert_ne!`.

use nki::ndarray::{Array2, Array3};
use nki::prelude::*;

fn ramp(rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, j)| ((i * 7 + j * 3) % 23) as f32 - 11.0)
}

/// NKI's `tile.broadcast_to(shape)`: a `[1, F]` row across partitions (TensorE), and a
/// `[P, 1]` column along the free dimension, the shape given as NKI's tuple.
#[kernel]
fn broadcast_method(
    x: Hbm<f32, 128, 512>,
    g: Hbm<f32, 1, 512>,
    c: Hbm<f32, 128, 1>,
) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(x[..]);
    let row = load(g[..]).broadcast_to([128, 512]);
    let col_tile = load(c[..]);
    let col = col_tile.broadcast_to((128, 512));
    store(out[..], t * row + col);
    out
}

#[test]
fn broadcast_to_as_a_method() {
    let x = ramp(128, 512);
    let g = Array2::from_shape_fn((1, 512), |(_, j)| (j % 5) as f32 - 2.0);
    let c = Array2::from_shape_fn((128, 1), |(i, _)| (i % 3) as f32);
    let mut core = NeuronCore::default();
    let out = broadcast_method::host(&mut core, x.view(), g.view(), c.view()).unwrap();
    for i in 0..128 {
        for j in 0..512 {
            // Small integers: every product and sum is exact in f32.
            assert_eq!(out[[i, j]], x[[i, j]] * g[[0, j]] + c[[i, 0]], "({i}, {j})");
        }
    }
}

/// Limits of dtypes as immediates: NKI's `nl.fp32.min` (here `f32.min`, or Rust's
/// `f32::MIN`), `nl.finfo(dtype).max` / `.eps` / `.tiny`, integer limits.
#[kernel]
fn limits(x: Hbm<f32, 128, 16>) -> Hbm<f32, 128, 16> {
    let out = ndarray([128, 16], f32, SharedHbm);
    let t = ndarray([128, 16], f32, Sbuf);
    t[[0..128, 0..1]] = f32.min;
    t[[0..128, 1..2]] = fp32.max;
    t[[0..128, 2..3]] = f32::MIN;
    t[[0..128, 3..4]] = bf16.max;
    t[[0..128, 4..5]] = finfo(bf16).min;
    t[[0..128, 5..6]] = finfo(f16).max;
    t[[0..128, 6..7]] = finfo(float8_e4m3).max;
    t[[0..128, 7..8]] = finfo(float8_e5m2).max;
    t[[0..128, 8..9]] = finfo(f32).eps;
    t[[0..128, 9..10]] = finfo(f16).tiny;
    t[[0..128, 10..11]] = i8.min;
    t[[0..128, 11..12]] = iinfo(u16).max;
    t[[0..128, 12..13]] = finfo(x.dtype).bits;
    t[[0..128, 13..14]] = finfo(tfloat32).max;
    t[[0..128, 14..15]] = i16::MIN;
    t[[0..128, 15..16]] = finfo(bf16).smallest_normal;
    store(out[..], t);
    out
}

#[test]
fn dtype_limits_are_immediates() {
    let x = Array2::<f32>::zeros((128, 16));
    let mut core = NeuronCore::default();
    let out = limits::host(&mut core, x.view()).unwrap();
    let expected: [f32; 16] = [
        f32::from_bits(0xff7f_ffff),
        f32::MAX,
        f32::MIN,
        bf16::MAX.to_f32(),
        -bf16::MAX.to_f32(),
        65504.0,
        240.0,
        57344.0,
        f32::EPSILON,
        6.103_515_6e-5, // 2^-14
        -128.0,
        65535.0,
        32.0,
        // tf32: (2 − 2^−10) · 2^127
        f32::from_bits(0x7f7f_e000),
        -32768.0,
        f32::MIN_POSITIVE,
    ];
    for i in 0..128 {
        for (j, e) in expected.iter().enumerate() {
            assert_eq!(
                out[[i, j]].to_bits(),
                e.to_bits(),
                "({i}, {j}): {}",
                out[[i, j]]
            );
        }
    }
}

/// Python's arithmetic at trace time: `1.0 / D` of a meta-parameter, `min` / `max` of
/// integers, a conditional expression, float `%`, and the results as shapes, slices and
/// immediates.
#[kernel(narrow(D = 64), wide(D = 256))]
fn trace_arithmetic<const D: usize>(x: Hbm<f32, 128, D>) -> Hbm<f32, 128, D> {
    let out = ndarray([128, D], f32, SharedHbm);
    let t = load(x[..]);
    let inv = 1.0 / D;
    let cols = min(D, 128);
    let k = max(1, 3, 2);
    let w = if D > 100 { 0.5 } else { 2.0 };
    let r = -7.0 % 2;
    // `r` is 1.0 (Python's floored remainder), `k` 3: the scale is 3 · w / D.
    let scale = inv * w * k * r;
    let head = t[[0..128, 0..cols]] * scale;
    store(out[[0..128, 0..cols]], head);
    if cols < D {
        store(out[[0..128, cols..D]], t[[0..128, cols..D]]);
    }
    out
}

#[test]
fn trace_time_arithmetic_follows_python() {
    let mut core = NeuronCore::default();
    for d in [64usize, 256] {
        let x = ramp(128, d);
        let out = match d {
            64 => narrow::host(&mut core, x.view()).unwrap(),
            _ => wide::host(&mut core, x.view()).unwrap(),
        };
        let cols = d.min(128);
        let w = if d > 100 { 0.5 } else { 2.0 };
        let scale = (3.0 * w / d as f64) as f32;
        for i in 0..128 {
            for j in 0..d {
                let e = if j < cols {
                    x[[i, j]] * scale
                } else {
                    x[[i, j]]
                };
                assert_eq!(out[[i, j]], e, "D = {d} ({i}, {j})");
            }
        }
    }
}

/// Python's `math` at trace time on numbers: NKI's `1.0 / (d ** 0.5)` is `1.0 / power(D, 0.5)`.
#[kernel]
fn trace_math(x: Hbm<f32, 128, 12>) -> Hbm<f32, 128, 12> {
    const D: usize = 64;
    let out = ndarray([128, 12], f32, SharedHbm);
    let t = ndarray([128, 12], f32, Sbuf);
    t[[0..128, 0..1]] = 1.0 / power(D, 0.5);
    t[[0..128, 1..2]] = 1.0 / sqrt(D);
    t[[0..128, 2..3]] = power(2, 10);
    t[[0..128, 3..4]] = exp(1.0);
    t[[0..128, 4..5]] = log(10.0);
    t[[0..128, 5..6]] = abs(-3);
    t[[0..128, 6..7]] = floor(-2.5);
    t[[0..128, 7..8]] = ceil(2.1);
    t[[0..128, 8..9]] = maximum(3, 4.5);
    t[[0..128, 9..10]] = minimum(3, 4.5);
    t[[0..128, 10..11]] = divide(1, 3);
    t[[0..128, 11..12]] = power(2.0, -2);
    store(out[..], t);
    out
}

#[test]
fn trace_time_math_follows_pythons_math() {
    let x = Array2::<f32>::zeros((128, 12));
    let mut core = NeuronCore::default();
    let out = trace_math::host(&mut core, x.view()).unwrap();
    let expected: [f64; 12] = [
        1.0 / 64f64.powf(0.5),
        1.0 / 64f64.sqrt(),
        1024.0,
        std::f64::consts::E,
        std::f64::consts::LN_10,
        3.0,
        -3.0,
        3.0,
        4.5,
        3.0,
        1.0 / 3.0,
        0.25,
    ];
    for i in 0..128 {
        for (j, e) in expected.iter().enumerate() {
            assert_eq!(out[[i, j]], *e as f32, "({i}, {j})");
        }
    }
}

/// Integer `/` and `%` at trace time are Python's `//` and `%`: the quotient rounded towards
/// −∞, the remainder with the divisor's sign.
#[kernel]
fn int_division(x: Hbm<f32, 128, 8>) -> Hbm<f32, 128, 8> {
    let out = ndarray([128, 8], f32, SharedHbm);
    let t = ndarray([128, 8], f32, Sbuf);
    t[[0..128, 0..1]] = -7 / 2;
    t[[0..128, 1..2]] = -7 % 2;
    t[[0..128, 2..3]] = 7 / -2;
    t[[0..128, 3..4]] = 7 % -2;
    t[[0..128, 4..5]] = -7 / -2;
    t[[0..128, 5..6]] = -7 % -2;
    t[[0..128, 6..7]] = 7 / 2;
    t[[0..128, 7..8]] = 7 % 2;
    store(out[..], t);
    out
}

#[test]
fn integer_division_is_pythons() {
    let x = Array2::<f32>::zeros((128, 8));
    let mut core = NeuronCore::default();
    let out = int_division::host(&mut core, x.view()).unwrap();
    let mut expected = Vec::new();
    for (a, b) in [(-7.0f64, 2.0f64), (7.0, -2.0), (-7.0, -2.0), (7.0, 2.0)] {
        let q = (a / b).floor();
        expected.push(q);
        expected.push(a - b * q);
    }
    for i in 0..128 {
        for (j, e) in expected.iter().enumerate() {
            assert_eq!(f64::from(out[[i, j]]), *e, "({i}, {j})");
        }
    }
}

/// Axes as tuples and negative axes, normalised against the tile's rank as NumPy does.
#[kernel]
fn axes(x: Hbm<f32, 128, 4, 32>) -> (Hbm<f32, 128, 1>, Hbm<f32, 128, 4>, Hbm<f32, 128, 4>) {
    let total = ndarray([128, 1], f32, SharedHbm);
    let rows_max = ndarray([128, 4], f32, SharedHbm);
    let rows_sum = ndarray([128, 4], f32, SharedHbm);
    let t = load(x[..]);
    store(total[..], sum(t, axis = [-2, -1]));
    store(rows_max[..], max(t, axis = (2,)));
    store(rows_sum[..], tensor_reduce(add, t, axis = (-1,)));
    (total, rows_max, rows_sum)
}

#[test]
fn tuple_and_negative_axes() {
    let x = Array3::from_shape_fn((128, 4, 32), |(i, a, b)| {
        ((i + 3 * a + 5 * b) % 17) as f32 - 8.0
    });
    let mut core = NeuronCore::default();
    let (total, rows_max, rows_sum) = axes::host(&mut core, x.view()).unwrap();
    for i in 0..128 {
        let mut all = 0.0f64;
        for a in 0..4 {
            let row: Vec<f32> = (0..32).map(|b| x[[i, a, b]]).collect();
            let s: f64 = row.iter().map(|&v| f64::from(v)).sum();
            all += s;
            // Integers: every partial sum is exact in f32.
            assert_eq!(f64::from(rows_sum[[i, a]]), s);
            assert_eq!(
                rows_max[[i, a]],
                row.iter().copied().fold(f32::MIN, f32::max)
            );
        }
        assert_eq!(f64::from(total[[i, 0]]), all);
    }
}

/// `affine_range(start, stop)`, `sequential_range(start, stop, step)`,
/// `static_range(start, stop, step)`, and `ds(start, size)` bound to a name.
#[kernel]
fn ranges(x: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 1024> {
    let out = ndarray([128, 1024], f32, SharedHbm);
    // Blocks 1 to 5 of 128 columns, doubled.
    for j in affine_range(1, 6) {
        let cols = ds(j * 128, 128);
        let t = load(x[[0..128, cols]]);
        store(out[[0..128, cols]], t * 2.0);
    }
    // Block 0 in two halves of 64 columns, plus one.
    for h in sequential_range(0, 128, 64) {
        let c = ds(h, 64);
        store(out[[0..128, c]], load(x[[0..128, c]]) + 1.0);
    }
    // Blocks 6 and 7, unrolled: `b` is 6, then 7 (the stop is not reached).
    for b in static_range(6, 9, 1) {
        if b < 8 {
            let c = ds(b * 128, 128);
            store(out[[0..128, c]], load(x[[0..128, c]]) - 1.0);
        }
    }
    out
}

#[test]
fn ranges_with_a_start_and_a_step() {
    let x = ramp(128, 1024);
    let mut core = NeuronCore::default();
    let out = ranges::host(&mut core, x.view()).unwrap();
    for i in 0..128 {
        for j in 0..1024 {
            let e = match j / 128 {
                0 => x[[i, j]] + 1.0,
                1..=5 => x[[i, j]] * 2.0,
                _ => x[[i, j]] - 1.0,
            };
            assert_eq!(out[[i, j]], e, "({i}, {j})");
        }
    }
    // The loops stay loops, with their starts and steps in the indices.
    let listing = ranges::KERNEL.program().to_string();
    assert!(listing.contains("for j in affine_range(5):"), "{listing}");
    assert!(
        listing.contains("for h in sequential_range(2):"),
        "{listing}"
    );
}

/// Rust's `a.min(b)` / `a.max(b)` on compile-time numbers, as Python's `min(a, b)` /
/// `max(a, b)`: integers stay integers (a slice bound), a float and an integer compare by value.
#[kernel(mm_narrow(D = 64), mm_wide(D = 256))]
fn min_max_methods<const D: usize>(x: Hbm<f32, 128, D>) -> Hbm<f32, 128, D> {
    let out = ndarray([128, D], f32, SharedHbm);
    let t = load(x[..]);
    let cols = D.min(128);
    let k = 2.max(D / 64);
    let s = 0.75.min(D);
    store(out[[0..128, 0..cols]], t[[0..128, 0..cols]] * k + s);
    if cols < D {
        store(out[[0..128, cols..D]], t[[0..128, cols..D]]);
    }
    out
}

#[test]
fn min_and_max_as_methods() {
    let mut core = NeuronCore::default();
    for d in [64usize, 256] {
        let x = ramp(128, d);
        let out = match d {
            64 => mm_narrow::host(&mut core, x.view()).unwrap(),
            _ => mm_wide::host(&mut core, x.view()).unwrap(),
        };
        let cols = if d < 128 { d } else { 128 };
        let k = if d / 64 > 2 { (d / 64) as f64 } else { 2.0 };
        for i in 0..128 {
            for j in 0..d {
                let v = f64::from(x[[i, j]]);
                // Small integers times k plus 0.75: exact in f32.
                let e = if j < cols { v * k + 0.75 } else { v };
                assert_eq!(f64::from(out[[i, j]]), e, "D = {d} ({i}, {j})");
            }
        }
    }
}

/// NKI's `x.shape`: the output created as `ndarray(x.shape, x.dtype, SharedHbm)`, the
/// dimensions destructured (`n, d = x.shape`, `n` symbolic) and indexed from the end
/// (`1 / x.shape[-1]`), a tile's shape as a creation and a broadcast shape.
#[kernel(shape_64(D = 64), shape_192(D = 192))]
fn shapes<const D: usize>(x: Hbm<f32, N, D>, g: Hbm<f32, 1, D>) -> Hbm<f32, N, D> {
    let out = ndarray(x.shape, x.dtype, SharedHbm);
    let (n, d) = x.shape;
    let inv = 1.0 / x.shape[-1];
    let (i_p, i_f) = mgrid![0..128, 0..D];
    for i in affine_range((n + 127) / 128) {
        let rows = i * 128 + i_p < n;
        let t = load(x[[i * 128 + i_p, i_f]], mask = rows);
        let w = load(g[..]).broadcast_to(t.shape);
        let acc = zeros(t.shape, f32, Sbuf);
        acc[[0..t.shape[0], 0..d]] += t * w * inv;
        store(out[[i * 128 + i_p, i_f]], acc, mask = rows);
    }
    out
}

#[test]
fn shapes_of_tensors_and_tiles() {
    let mut core = NeuronCore::default();
    for (n, d) in [(300usize, 64usize), (128, 192)] {
        let x = ramp(n, d);
        let g = Array2::from_shape_fn((1, d), |(_, j)| (j % 4) as f32 - 1.0);
        let out = match d {
            64 => shape_64::host(&mut core, x.view(), g.view()).unwrap(),
            _ => shape_192::host(&mut core, x.view(), g.view()).unwrap(),
        };
        assert_eq!(out.dim(), (n, d));
        // The immediate 1 / d, rounded to fp32 (a power of two for d = 64, not for d = 192).
        let inv = f64::from((1.0 / d as f64) as f32);
        for i in 0..n {
            for j in 0..d {
                // x · g is a small integer, exact; its product with 1 / d rounds once.
                let e = (f64::from(x[[i, j]]) * f64::from(g[[0, j]]) * inv) as f32;
                assert_eq!(out[[i, j]], e, "N = {n}, D = {d} ({i}, {j})");
            }
        }
    }
}

/// NKI's keyword arguments of the loop iterators, bound as `affine_range(start, stop=None,
/// step=1)` binds them: without a stop, `start` is the stop.
#[kernel]
fn keyword_ranges(x: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 1024> {
    let out = ndarray([128, 1024], f32, SharedHbm);
    // Blocks 1, 2, 3.
    for j in affine_range(start = 1, stop = 4) {
        let c = ds(j * 128, 128);
        store(out[[0..128, c]], load(x[[0..128, c]]) * 2.0);
    }
    // Blocks 0 and 4: `8` is the stop.
    for j in sequential_range(8, step = 4) {
        let c = ds(j * 128, 128);
        store(out[[0..128, c]], load(x[[0..128, c]]) + 1.0);
    }
    // Blocks 5 and 7.
    for j in static_range(5, stop = 8, step = 2) {
        let c = ds(j * 128, 128);
        store(out[[0..128, c]], load(x[[0..128, c]]) - 1.0);
    }
    // Block 6: one iteration, `start = 1` being the stop.
    for j in affine_range(start = 1) {
        let c = ds((6 + j) * 128, 128);
        store(out[[0..128, c]], load(x[[0..128, c]]) * 3.0);
    }
    out
}

#[test]
fn loop_ranges_with_keywords() {
    let x = ramp(128, 1024);
    let mut core = NeuronCore::default();
    let out = keyword_ranges::host(&mut core, x.view()).unwrap();
    for i in 0..128 {
        for j in 0..1024 {
            let v = x[[i, j]];
            let e = match j / 128 {
                0 | 4 => v + 1.0,
                1..=3 => v * 2.0,
                6 => v * 3.0,
                _ => v - 1.0,
            };
            assert_eq!(out[[i, j]], e, "({i}, {j})");
        }
    }
}

/// NKI's Python `assert` on compile-time values: shapes (a symbolic dimension equals itself),
/// dtypes, integers; checked when the kernel compiles, so a kernel whose assertions hold runs.
#[kernel(asserted_64(D = 64))]
fn asserted<const D: usize>(a: Hbm<f32, N, D>, b: Hbm<f32, N, D>) -> Hbm<f32, N, D> {
    assert!(a.shape == b.shape, "a and b have the same shape");
    assert_eq!(a.dtype, b.dtype);
    assert_eq!(a.shape[0], b.shape[0]);
    assert_ne!(a.shape[1], 128);
    assert!((D % 32 == 0) & (D <= 512));
    // A reshape's shape is its own dimensions.
    let a3 = a.reshape([N, D / 2, 2]);
    assert_eq!(a3.shape[0], a.shape[0]);
    assert_eq!(a3.shape[1], D / 2);
    assert_eq!(a3.shape[-1], 2);
    assert_eq!(len(a3.shape), 3);
    assert!(len(a.shape) == 2, "a is a matrix");
    let out = ndarray(a.shape, a.dtype, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..D];
    for i in affine_range((N + 127) / 128) {
        let rows = i * 128 + i_p < N;
        let x = load(a[[i * 128 + i_p, i_f]], mask = rows);
        let y = load(b[[i * 128 + i_p, i_f]], mask = rows);
        assert!(x.shape == y.shape);
        store(out[[i * 128 + i_p, i_f]], x - y, mask = rows);
    }
    out
}

#[test]
fn assertions_that_hold() {
    let a = ramp(200, 64);
    let b = Array2::from_shape_fn((200, 64), |(i, j)| ((i + 2 * j) % 9) as f32);
    let mut core = NeuronCore::default();
    let out = asserted_64::host(&mut core, a.view(), b.view()).unwrap();
    for i in 0..200 {
        for j in 0..64 {
            // Small integers: the difference is exact.
            assert_eq!(
                f64::from(out[[i, j]]),
                f64::from(a[[i, j]]) - f64::from(b[[i, j]])
            );
        }
    }
}

/// NKI's `nisa.get_nc_version() >= nisa.nc_version.gen3` (known when the kernel compiles, as
/// `allocated_fused_rms_norm_qkv` picks its PSUM transpose dtype with it) and direct allocation
/// (`ncc.sbuf.mod_alloc(base_addr=...)`, `ncc.psum.mod_alloc(base_bank=...)`): the placement is
/// checked and not followed; each tile has memory of its own; `ncc.sbuf.auto_alloc()` is the
/// automatic allocation every other tile has. The kernel writes the generation
/// into every element, through tiles placed by `mod_alloc`.
#[helper]
fn generation_through_placed_tiles(x: Tensor, out: Tensor) {
    let u = ndarray([128, 512], f32, sbuf.auto_alloc());
    u[..] = load(x[..]);
    let t = ndarray([128, 512], f32, sbuf.mod_alloc(base_addr = 0));
    t[..] = copy(u);
    let g = ndarray(
        (2, par_dim(128), 512),
        f32,
        sbuf.mod_alloc(base_addr = 2048, num_free_tiles = (2,)),
    );
    if get_nc_version() >= nc_version.gen3 {
        g[[0, .., ..]] = multiply(t, 0.0) + 3.0;
    } else {
        g[[0, .., ..]] = multiply(t, 0.0) + 2.0;
    }
    let acc = ndarray(
        [128, 512],
        f32,
        psum.mod_alloc(base_bank = 1, num_bank_tiles = (1,)),
    );
    acc[..] = copy(g[[0, .., ..]]);
    store(out[..], copy(acc));
}

#[kernel]
fn nc_version_trn1(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    generation_through_placed_tiles(x, out);
    out
}

#[kernel(target = trn2)]
fn nc_version_trn2(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    generation_through_placed_tiles(x, out);
    out
}

#[test]
fn the_nc_version_is_the_targets_and_placements_are_accepted() {
    let x = ramp(128, 512);
    let trn1 = nc_version_trn1::host(&mut NeuronCore::new(Target::Trn1), x.view()).unwrap();
    assert!(trn1.iter().all(|&v| v == 2.0), "Trn1 is gen2");
    let trn2 = nc_version_trn2::host(&mut NeuronCore::new(Target::Trn2), x.view()).unwrap();
    assert!(trn2.iter().all(|&v| v == 3.0), "Trn2 is gen3");
}
