//! Quotients and sums of traced dimensions (NKI's `h // k_h`, `n // 128`, `h + 2`): a symbol of
//! their own, bound at launch after the dimensions they name, wherever a dimension goes — a trip
//! count (`affine_range(H / KH)`), a reshape's or an output's dimension — and the trip count of
//! a loop with a start and a step to a symbolic end (`affine_range(1, K / 128, 2)`). Each kernel
//! against a plain-loop reference at divisible, ragged and empty shapes, on the default (strict)
//! core; bad shapes are launch errors naming the dimensions; the timing model runs the bound
//! trip counts.

use crate::common;

use common::*;
use nki::LaunchError;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// NKI's `for i in affine_range(h // k_h)`: rows `0..H / KH` of `x` doubled, into an output of
/// `H / KH` rows (the quotient floors, as Python's `//`).
#[kernel]
fn quotient_rows(x: Hbm<f32, H, 64>, k: Hbm<f32, KH, 64>) -> Hbm<f32, { H / KH }, 64> {
    let out = ndarray([H / KH, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..1, 0..64];
    for i in affine_range(H / KH) {
        let t = load(x[[i + ip, jf]]);
        store(out[[i + ip, jf]], multiply(t, 2.0));
    }
    out
}

/// [`quotient_rows`] with the trip count a meta-parameter: the same instructions, `T` times.
#[kernel(fixed_rows_3(T = 3), fixed_rows_4(T = 4))]
fn fixed_rows<const T: usize>(x: Hbm<f32, H, 64>, k: Hbm<f32, KH, 64>) -> Hbm<f32, T, 64> {
    let out = ndarray([T, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..1, 0..64];
    for i in affine_range(T) {
        let t = load(x[[i + ip, jf]]);
        store(out[[i + ip, jf]], multiply(t, 2.0));
    }
    out
}

/// GQA's layout (flash attention's `q_h_per_k_h = h // k_h`): query heads viewed as
/// `[KH, H / KH]`, head `g · (H / KH) + i` in group `g`; a grid over the key/value heads, each
/// instance adding its key row to each of its group's `H / KH` query rows.
#[kernel]
fn gqa_rows(q: Hbm<f32, H, 64>, k: Hbm<f32, KH, 64>) -> Hbm<f32, H, 64> {
    let out = ndarray([H, 64], f32, SharedHbm);
    let qg = q.reshape([KH, H / KH, 64]);
    let og = out.reshape([KH, H / KH, 64]);
    let (ip, jf) = mgrid![0..1, 0..64];
    let g = program_id(0);
    let kt = load(k[[g + ip, jf]]);
    for i in affine_range(H / KH) {
        let t = load(qg[[g, i + ip, jf]]);
        store(og[[g, i + ip, jf]], add(t, kt));
    }
    out
}

/// NKI's `x.reshape((n // 128, 128, d))`: `x` [N, 64] as blocks of 128 rows, each tripled.
#[kernel]
fn row_blocks(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    let xb = x.reshape((N / 128, 128, 64));
    let ob = out.reshape((N / 128, 128, 64));
    let (ip, jf) = mgrid![0..128, 0..64];
    for b in affine_range(N / 128) {
        let t = load(xb[[b, ip, jf]]);
        store(ob[[b, ip, jf]], multiply(t, 3.0));
    }
    out
}

/// A halo: `img` [R, 64] viewed as `[H + 2, 64]` where `H` is the height of `like`, and the
/// three-row vertical sum `out[i] = img[i] + img[i + 1] + img[i + 2]` for `i < H`.
#[kernel]
fn halo_sum(img: Hbm<f32, R, 64>, like: Hbm<f32, H, 64>) -> Hbm<f32, H, 64> {
    let out = ndarray([H, 64], f32, SharedHbm);
    let padded = img.reshape([H + 2, 64]);
    let (ip, jf) = mgrid![0..1, 0..64];
    for i in affine_range(H) {
        let a = load(padded[[i + ip, jf]]);
        let b = load(padded[[i + 1 + ip, jf]]);
        let c = load(padded[[i + 2 + ip, jf]]);
        store(out[[i + ip, jf]], add(add(a, b), c));
    }
    out
}

/// NKI's `affine_range(1, K / 128, 2)`: the odd 128-row tiles doubled, the even ones
/// (`affine_range(0, K / 128, 2)`) copied.
#[kernel]
fn odd_tiles(x: Hbm<f32, K, 64>) -> Hbm<f32, K, 64> {
    let out = ndarray([K, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..64];
    for t in affine_range(1, K / 128, 2) {
        let v = load(x[[t * 128 + ip, jf]]);
        store(out[[t * 128 + ip, jf]], multiply(v, 2.0));
    }
    for t in affine_range(0, K / 128, 2) {
        let v = load(x[[t * 128 + ip, jf]]);
        store(out[[t * 128 + ip, jf]], multiply(v, 1.0));
    }
    out
}

/// [`odd_tiles`] over ragged tiles: `affine_range(1, (K + 127) / 128, 2)`, the last tile
/// masked.
#[kernel]
fn odd_tiles_ragged(x: Hbm<f32, K, 64>) -> Hbm<f32, K, 64> {
    let out = ndarray([K, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..64];
    for t in affine_range(1, (K + 127) / 128, 2) {
        let v = load(x[[t * 128 + ip, jf]], mask = t * 128 + ip < K);
        store(
            out[[t * 128 + ip, jf]],
            multiply(v, 2.0),
            mask = t * 128 + ip < K,
        );
    }
    for t in affine_range(0, (K + 127) / 128, 2) {
        let v = load(x[[t * 128 + ip, jf]], mask = t * 128 + ip < K);
        store(
            out[[t * 128 + ip, jf]],
            multiply(v, 1.0),
            mask = t * 128 + ip < K,
        );
    }
    out
}

/// Rows by a step of 2 from 3 to a symbolic end (`affine_range(3, K, 2)`, `len(range(3, K, 2))`
/// iterations): those rows doubled, row 1 tripled, the even rows copied.
#[kernel]
fn rows_from_3_by_2(x: Hbm<f32, K, 64>) -> Hbm<f32, K, 64> {
    let out = ndarray([K, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..1, 0..64];
    for i in affine_range(0, K, 2) {
        store(out[[i + ip, jf]], multiply(load(x[[i + ip, jf]]), 1.0));
    }
    for i in affine_range(1, 2) {
        let v = load(x[[i + ip, jf]], mask = i + ip < K);
        store(out[[i + ip, jf]], multiply(v, 3.0), mask = i + ip < K);
    }
    for i in affine_range(3, K, 2) {
        store(out[[i + ip, jf]], multiply(load(x[[i + ip, jf]]), 2.0));
    }
    out
}

/// `x` [R, 64] as the rows of `a` [H, 1] followed by those of `b` [W, 1]: `x.reshape([H + W,
/// 64])`, a sum of two traced dimensions, every row doubled over `H + W` iterations.
#[kernel]
fn concat_rows(x: Hbm<f32, R, 64>, a: Hbm<f32, H, 1>, b: Hbm<f32, W, 1>) -> Hbm<f32, R, 64> {
    let out = ndarray([R, 64], f32, SharedHbm);
    let xs = x.reshape([H + W, 64]);
    let os = out.reshape([H + W, 64]);
    let (ip, jf) = mgrid![0..1, 0..64];
    for i in affine_range(H + W) {
        store(os[[i + ip, jf]], multiply(load(xs[[i + ip, jf]]), 2.0));
    }
    out
}

/// Each instance of a `[G]` grid takes its share of `N / num_programs(0)` rows (a quotient of
/// a dimension by the grid's size), through `x.reshape([num_programs(0), N / num_programs(0),
/// 64])`, and adds 1.
#[kernel]
fn grid_shares(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    let xs = x.reshape([num_programs(0), N / num_programs(0), 64]);
    let os = out.reshape([num_programs(0), N / num_programs(0), 64]);
    let (ip, jf) = mgrid![0..1, 0..64];
    let g = program_id(0);
    for i in affine_range(N / num_programs(0)) {
        store(os[[g, i + ip, jf]], add(load(xs[[g, i + ip, jf]]), 1.0));
    }
    out
}

/// A product of a quotient and a literal: `x` [N, 64] as `(N / 128) * 2` blocks of 64 rows,
/// each halved.
#[kernel]
fn half_blocks(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    let xb = x.reshape([(N / 128) * 2, 64, 64]);
    let ob = out.reshape([(N / 128) * 2, 64, 64]);
    let (ip, jf) = mgrid![0..64, 0..64];
    for b in affine_range((N / 128) * 2) {
        store(ob[[b, ip, jf]], multiply(load(xb[[b, ip, jf]]), 0.5));
    }
    out
}

/// NKI's `affine_range(start, h // k_h, 3)` for `start` 0, 1 and 2: a start and a step to the
/// quotient of two traced dimensions; the three loops write rows `0..H / KH` once each, row `r`
/// scaled by `r % 3 + 1`.
#[kernel]
fn quotient_by_thirds(x: Hbm<f32, H, 64>, k: Hbm<f32, KH, 64>) -> Hbm<f32, { H / KH }, 64> {
    let out = ndarray([H / KH, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..1, 0..64];
    for i in affine_range(0, H / KH, 3) {
        store(out[[i + ip, jf]], multiply(load(x[[i + ip, jf]]), 1.0));
    }
    for i in affine_range(1, H / KH, 3) {
        store(out[[i + ip, jf]], multiply(load(x[[i + ip, jf]]), 2.0));
    }
    for i in affine_range(2, H / KH, 3) {
        store(out[[i + ip, jf]], multiply(load(x[[i + ip, jf]]), 3.0));
    }
    out
}

/// `x` scaled per row by `scale(row)`, as f32 (one multiplication by a small integer: exact
/// rounding of the product).
fn scaled_rows(x: &Array2<f32>, rows: usize, scale: impl Fn(usize) -> f32) -> Array2<f32> {
    Array2::from_shape_fn((rows, x.ncols()), |(r, c)| x[[r, c]] * scale(r))
}

fn assert_bits(got: &Array2<f32>, want: &Array2<f32>, what: &str) {
    assert_eq!(got.dim(), want.dim(), "{what}");
    for ((ix, g), w) in got.indexed_iter().zip(want.iter()) {
        assert_eq!(g.to_bits(), w.to_bits(), "{what} {ix:?}");
    }
}

#[test]
fn a_trip_count_of_two_traced_dimensions_floors() {
    // Divisible, not divisible (floor), a quotient of 0 (no iteration, an empty output).
    for (h, kh) in [(8, 2), (7, 2), (9, 9), (3, 4), (1, 1)] {
        let x = rand_f32(Ix2(h, 64), (h * 31 + kh) as u64, -9.0, 9.0);
        let k = Array2::<f32>::zeros((kh, 64));
        let mut core = NeuronCore::default();
        let out = quotient_rows::host(&mut core, x.view(), k.view()).unwrap();
        let want = scaled_rows(&x, h / kh, |_| 2.0);
        assert_bits(&out, &want, &format!("H={h} KH={kh}"));
    }
    let program = quotient_rows::KERNEL.program();
    assert!(
        program.symbols().contains(&"H / KH"),
        "{:?}",
        program.symbols()
    );
}

#[test]
fn a_quotient_by_a_zero_dimension_is_a_launch_error() {
    let x = Array2::<f32>::zeros((8, 64));
    let k = Array2::<f32>::zeros((0, 64));
    let mut core = NeuronCore::default();
    let err = quotient_rows::host(&mut core, x.view(), k.view()).unwrap_err();
    let LaunchError::ZeroDivisor {
        symbol,
        divisor,
        values,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((symbol.as_str(), divisor.as_str()), ("H / KH", "KH"));
    assert_eq!(values, "H = 8, KH = 0");
    assert!(
        err.to_string().contains("`H / KH` divides by `KH`"),
        "{err}"
    );
}

#[test]
fn the_timing_model_runs_the_bound_quotient_trip_count() {
    use nki::timing::{Detail, Timing};
    for (h, kh, fixed) in [
        (12, 4, &fixed_rows_3::KERNEL),
        (9, 2, &fixed_rows_4::KERNEL),
    ] {
        let mut core = NeuronCore::default();
        let shapes: [&[usize]; 2] = [&[h, 64], &[kh, 64]];
        let run = |core: &mut NeuronCore, kernel| {
            Timing::new()
                .detail(Detail::Summary)
                .run_shapes(core, kernel, &shapes)
                .unwrap()
        };
        let q = run(&mut core, &quotient_rows::KERNEL);
        let f = run(&mut core, fixed);
        let rows = (h / kh) as u64;
        assert_eq!(q.hbm_read_bytes(), rows * 64 * 4, "H={h} KH={kh}");
        assert_eq!(q.hbm_write_bytes(), rows * 64 * 4, "H={h} KH={kh}");
        assert_eq!(q.instructions(), f.instructions(), "H={h} KH={kh}");
        assert_eq!(q.total_ps(), f.total_ps(), "H={h} KH={kh}");
    }
}

#[test]
fn gqa_groups_over_a_grid_loop_over_the_quotient() {
    for (h, kh) in [(8, 2), (6, 3), (4, 4), (5, 1)] {
        let q = rand_f32(Ix2(h, 64), (h * 7 + kh) as u64, -9.0, 9.0);
        let k = rand_f32(Ix2(kh, 64), (h * 11 + kh) as u64, -9.0, 9.0);
        let mut core = NeuronCore::default();
        let out = gqa_rows::grid([kh])
            .host(&mut core, q.view(), k.view())
            .unwrap();
        let g = h / kh;
        let want = Array2::from_shape_fn((h, 64), |(r, c)| q[[r, c]] + k[[r / g, c]]);
        assert_bits(&out, &want, &format!("H={h} KH={kh}"));
    }
}

#[test]
fn a_quotient_reshape_that_drops_elements_is_a_launch_error() {
    // 7 heads in 2 groups: [2, 3, 64] holds 384 of the 448 elements.
    let q = Array2::<f32>::zeros((7, 64));
    let k = Array2::<f32>::zeros((2, 64));
    let mut core = NeuronCore::default();
    let err = gqa_rows::grid([2])
        .host(&mut core, q.view(), k.view())
        .unwrap_err();
    let LaunchError::Reshape {
        elements,
        reshaped,
        values,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((*elements, *reshaped), (448, 384), "{err}");
    assert!(values.contains("H / KH = 3"), "{values}");
    // A zero divisor is reported before the reshape is checked.
    let k0 = Array2::<f32>::zeros((0, 64));
    let err = gqa_rows::grid([1])
        .host(&mut core, q.view(), k0.view())
        .unwrap_err();
    assert!(matches!(err, LaunchError::ZeroDivisor { .. }), "{err:?}");
}

#[test]
fn a_reshape_into_blocks_of_a_quotient_runs_each_block() {
    for n in [128, 384, 0] {
        let x = rand_f32(Ix2(n, 64), n as u64 + 5, -9.0, 9.0);
        let mut core = NeuronCore::default();
        let out = row_blocks::host(&mut core, x.view()).unwrap();
        assert_bits(&out, &scaled_rows(&x, n, |_| 3.0), &format!("N={n}"));
    }
    // 300 rows are not blocks of 128: the launch says so.
    let x = Array2::<f32>::zeros((300, 64));
    let err = row_blocks::host(&mut NeuronCore::default(), x.view()).unwrap_err();
    let LaunchError::Reshape { reshape, dims, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(reshape.contains("N / 128"), "{reshape}");
    assert_eq!(dims, "2, 128, 64");
}

#[test]
fn a_sum_of_a_traced_dimension_and_a_literal_sizes_a_reshape() {
    for h in [1, 5, 130] {
        let img = rand_f32(Ix2(h + 2, 64), h as u64, -9.0, 9.0);
        let like = Array2::<f32>::zeros((h, 64));
        let mut core = NeuronCore::default();
        let out = halo_sum::host(&mut core, img.view(), like.view()).unwrap();
        let want = Array2::from_shape_fn((h, 64), |(r, c)| {
            img[[r, c]] + img[[r + 1, c]] + img[[r + 2, c]]
        });
        assert_bits(&out, &want, &format!("H={h}"));
    }
    let program = halo_sum::KERNEL.program();
    assert!(
        program.symbols().contains(&"H + 2"),
        "{:?}",
        program.symbols()
    );
    // An image without its two halo rows.
    let img = Array2::<f32>::zeros((5, 64));
    let like = Array2::<f32>::zeros((5, 64));
    let err = halo_sum::host(&mut NeuronCore::default(), img.view(), like.view()).unwrap_err();
    let LaunchError::Reshape { values, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(values.contains("H + 2 = 7"), "{values}");
}

#[test]
fn a_symbolic_stop_with_a_start_and_a_step_runs_len_range_iterations() {
    // Tiles 0..K/128 (an even count, an odd count, one tile, none).
    for tiles in [4, 3, 1, 0] {
        let k = tiles * 128;
        let x = rand_f32(Ix2(k, 64), k as u64 + 1, -9.0, 9.0);
        let mut core = NeuronCore::default();
        let out = odd_tiles::host(&mut core, x.view()).unwrap();
        let want = scaled_rows(&x, k, |r| if (r / 128) % 2 == 1 { 2.0 } else { 1.0 });
        assert_bits(&out, &want, &format!("K={k}"));
    }
    // Ragged: the last tile masked.
    for k in [1, 129, 300, 500, 640] {
        let x = rand_f32(Ix2(k, 64), k as u64 + 2, -9.0, 9.0);
        let mut core = NeuronCore::default();
        let out = odd_tiles_ragged::host(&mut core, x.view()).unwrap();
        let want = scaled_rows(&x, k, |r| if (r / 128) % 2 == 1 { 2.0 } else { 1.0 });
        assert_bits(&out, &want, &format!("K={k}"));
    }
    // Rows from 3 by 2: `len(range(3, K, 2))` is 0 up to K = 3.
    for k in [1, 2, 3, 4, 5, 8, 9] {
        let x = rand_f32(Ix2(k, 64), k as u64 + 3, -9.0, 9.0);
        let mut core = NeuronCore::default();
        let out = rows_from_3_by_2::host(&mut core, x.view()).unwrap();
        let want = scaled_rows(&x, k, |r| match r {
            1 => 3.0,
            r if r % 2 == 0 => 1.0,
            _ => 2.0,
        });
        assert_bits(&out, &want, &format!("K={k}"));
    }
}

#[test]
fn a_stepped_loop_to_a_quotient_of_two_traced_dimensions() {
    // `H / KH` of 0 to 7 rows, mostly with `H % KH != 0`: `len(range(start, q, 3))` is 0 for
    // the loops that start at or past `q`.
    for (h, kh) in [
        (3, 4),
        (1, 1),
        (5, 2),
        (7, 2),
        (9, 2),
        (11, 2),
        (22, 3),
        (15, 3),
    ] {
        let x = rand_f32(Ix2(h, 64), (h * 17 + kh) as u64, -9.0, 9.0);
        let k = Array2::<f32>::zeros((kh, 64));
        let mut core = NeuronCore::default();
        let out = quotient_by_thirds::host(&mut core, x.view(), k.view()).unwrap();
        let want = scaled_rows(&x, h / kh, |r| (r % 3 + 1) as f32);
        assert_bits(&out, &want, &format!("H={h} KH={kh}"));
    }
    // Three loops whatever the shapes: the program does not grow with them.
    let listing = quotient_by_thirds::KERNEL.program().to_string();
    assert_eq!(listing.matches("for i in").count(), 3, "{listing}");
    // A zero divisor is still a launch error.
    let x = Array2::<f32>::zeros((4, 64));
    let k = Array2::<f32>::zeros((0, 64));
    let err = quotient_by_thirds::host(&mut NeuronCore::default(), x.view(), k.view()).unwrap_err();
    assert!(matches!(err, LaunchError::ZeroDivisor { .. }), "{err:?}");
}

#[test]
fn a_stepped_loop_keeps_one_loop_with_its_trip_count_a_symbol() {
    let program = odd_tiles::KERNEL.program();
    let symbols = program.symbols();
    // `len(range(1, K / 128, 2))` and `len(range(0, K / 128, 2))`.
    assert!(symbols.contains(&"(K / 128) / 2"), "{symbols:?}");
    assert!(symbols.contains(&"(K / 128 + 1) / 2"), "{symbols:?}");
    // Two loops, their bodies unpredicated (no idle iterations).
    let listing = program.to_string();
    assert!(
        listing.contains("for t in affine_range((K / 128) / 2):"),
        "{listing}"
    );
    assert_eq!(listing.matches("for t in").count(), 2, "{listing}");
    assert!(!listing.contains(" if "), "{listing}");
    let symbols = rows_from_3_by_2::KERNEL.program().symbols();
    assert!(symbols.contains(&"(K - 2) / 2"), "{symbols:?}");
}

#[test]
fn a_strict_launch_checks_a_stepped_loops_writes() {
    // 300 rows: `K / 128` floors to 2 tiles, rows 256..300 are left unwritten, which a strict
    // launch refuses (the ragged kernel masks them instead).
    let x = Array2::<f32>::zeros((300, 64));
    let err = odd_tiles::host(&mut NeuronCore::default(), x.view()).unwrap_err();
    assert!(
        err.to_string()
            .contains("left 2816 elements of output `out` unwritten"),
        "{err}"
    );
    let out = odd_tiles::host(&mut NeuronCore::default().with_strict(false), x.view()).unwrap();
    assert_eq!(out.dim(), (300, 64));
}

#[test]
fn a_sum_of_two_traced_dimensions_is_a_trip_count_and_a_shape() {
    for (h, w) in [(3, 4), (0, 2), (5, 0)] {
        let x = rand_f32(Ix2(h + w, 64), (h * 10 + w) as u64, -9.0, 9.0);
        let (a, b) = (Array2::<f32>::zeros((h, 1)), Array2::<f32>::zeros((w, 1)));
        let mut core = NeuronCore::default();
        let out = concat_rows::host(&mut core, x.view(), a.view(), b.view()).unwrap();
        assert_bits(
            &out,
            &scaled_rows(&x, h + w, |_| 2.0),
            &format!("H={h} W={w}"),
        );
    }
    let x = Array2::<f32>::zeros((6, 64));
    let (a, b) = (Array2::<f32>::zeros((3, 1)), Array2::<f32>::zeros((4, 1)));
    let err =
        concat_rows::host(&mut NeuronCore::default(), x.view(), a.view(), b.view()).unwrap_err();
    let LaunchError::Reshape { values, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(values.contains("H + W = 7"), "{values}");
}

#[test]
fn a_quotient_by_the_grid_size_shares_rows_between_instances() {
    for (n, g) in [(8, 1), (8, 2), (8, 4), (3, 3)] {
        let x = rand_f32(Ix2(n, 64), (n * 5 + g) as u64, -9.0, 9.0);
        let mut core = NeuronCore::default();
        let out = grid_shares::grid([g]).host(&mut core, x.view()).unwrap();
        let want = x.mapv(|v| v + 1.0);
        assert_bits(&out, &want, &format!("N={n} G={g}"));
    }
    // 6 rows over 4 instances: [4, 1, 64] holds 4 of the 6 rows.
    let x = Array2::<f32>::zeros((6, 64));
    let err = grid_shares::grid([4])
        .host(&mut NeuronCore::default(), x.view())
        .unwrap_err();
    let LaunchError::Reshape { dims, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(dims, "4, 1, 64");
}

#[test]
fn a_product_of_a_quotient_and_a_literal_sizes_a_reshape() {
    for n in [128, 512] {
        let x = rand_f32(Ix2(n, 64), n as u64 + 9, -9.0, 9.0);
        let mut core = NeuronCore::default();
        let out = half_blocks::host(&mut core, x.view()).unwrap();
        assert_bits(&out, &scaled_rows(&x, n, |_| 0.5), &format!("N={n}"));
    }
    let symbols = half_blocks::KERNEL.program().symbols();
    assert!(symbols.contains(&"2 * (N / 128)"), "{symbols:?}");
}
