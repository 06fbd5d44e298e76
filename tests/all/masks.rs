//! Masks end to end: ragged last tiles (`(N + 127) / 128` loops masked on load, compute and
//! store) at several N, 2-D masks, masked-off destination elements left untouched (on chip and
//! in HBM), masked reductions; and accumulation into SBUF tiles (`+=`, `-=`, `*=`,
//! `t[..] = maximum(t, x)`) across a `sequential_range`.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2, s};
use nki::prelude::*;

// ---------------------------------------------------------------------------------------------
// Ragged last tiles.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn ragged(x: Hbm<f32, N, 256>) -> (Hbm<f32, N, 256>, Hbm<f32, N, 1>, Hbm<f32, N, 256>) {
    let out = ndarray([N, 256], f32, SharedHbm);
    let sums = ndarray([N, 1], f32, SharedHbm);
    let ex = ndarray([N, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    let i_c = arange(1).x();
    for k in affine_range((N + 127) / 128) {
        let t = load(x[[k * 128 + i_p, i_f]], mask = k * 128 + i_p < N);
        let y = tensor_scalar(
            data = t,
            op0 = multiply,
            operand0 = 2.0,
            op1 = add,
            operand1 = 1.0,
            mask = k * 128 + i_p < N,
        );
        let z = multiply(y, t, mask = k * 128 + i_p < N);
        store(out[[k * 128 + i_p, i_f]], z, mask = k * 128 + i_p < N);
        let r = sum(t, axis = 1, mask = k * 128 + i_p < N);
        store(sums[[k * 128 + i_p, i_c]], r, mask = k * 128 + i_p < N);
        let e = exp(t, mask = k * 128 + i_p < N);
        store(ex[[k * 128 + i_p, i_f]], e, mask = k * 128 + i_p < N);
    }
    (out, sums, ex)
}

#[test]
fn ragged_last_tiles_at_several_sizes() {
    let mut core = NeuronCore::default();
    for n in [1, 127, 128, 129, 300] {
        let x = rand_f32(Ix2(n, 256), n as u64, -3.0, 3.0);
        let (out, sums, ex) =
            ragged::host(&mut core, x.view()).unwrap_or_else(|e| panic!("N = {n}: {e}"));
        assert_eq!(out.dim(), (n, 256));
        let what = format!("(2x + 1) * x, N = {n}");
        assert_bits(&what, out.iter(), x.iter().map(|&v| (v * 2.0 + 1.0) * v));
        let what = format!("row sums, N = {n}");
        assert_bits(
            &what,
            sums.iter(),
            x.rows().into_iter().map(|r| sum16(r.iter().copied())),
        );
        let what = format!("exp, N = {n}");
        assert_close(
            &what,
            ex.iter(),
            x.iter().map(|&v| (v as f64).exp()),
            1e-6,
            0.0,
        );
    }
}

/// Ragged along the free dimension: `(M + 511) / 512` column tiles.
#[kernel]
fn ragged_columns(x: Hbm<f32, 128, M>) -> Hbm<f32, 128, M> {
    let out = ndarray([128, M], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    for j in affine_range((M + 511) / 512) {
        let cols = j * 512 + i_f < M;
        let t = load(x[[i_p, j * 512 + i_f]], mask = cols);
        let y = subtract(t, 0.5, mask = cols);
        store(out[[i_p, j * 512 + i_f]], y, mask = cols);
    }
    out
}

#[test]
fn ragged_last_column_tiles() {
    let mut core = NeuronCore::default();
    for m in [1, 511, 512, 513, 1300] {
        let x = rand_f32(Ix2(128, m), 100 + m as u64, -3.0, 3.0);
        let out =
            ragged_columns::host(&mut core, x.view()).unwrap_or_else(|e| panic!("M = {m}: {e}"));
        assert_bits(
            &format!("x - 0.5, M = {m}"),
            out.iter(),
            x.iter().map(|&v| v - 0.5),
        );
    }
}

/// The softmax of NKI's tutorial, ragged, written out with the ISA calls.
#[kernel]
fn ragged_softmax(x: Hbm<f32, N, 256>) -> Hbm<f32, N, 256> {
    let out = ndarray([N, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    for k in affine_range((N + 127) / 128) {
        let rows = k * 128 + i_p < N;
        let t = load(x[[k * 128 + i_p, i_f]], mask = rows);
        let neg_max = tensor_reduce(
            max,
            t,
            axis = 1,
            negate = true,
            keepdims = true,
            mask = rows,
        );
        let sum = ndarray([128, 1], f32, Sbuf);
        let e = activation(
            exp,
            t,
            bias = neg_max,
            reduce_op = add,
            reduce_res = sum,
            mask = rows,
        );
        let y = multiply(e, reciprocal(sum, mask = rows), mask = rows);
        store(out[[k * 128 + i_p, i_f]], y, mask = rows);
    }
    out
}

#[test]
fn ragged_softmax_written_with_isa_calls() {
    let mut core = NeuronCore::default();
    for n in [1, 129, 300] {
        let x = rand_f32(Ix2(n, 256), 7 + n as u64, -4.0, 4.0);
        let out = ragged_softmax::host(&mut core, x.view()).unwrap();
        for r in 0..n {
            let row = x.row(r);
            let m = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
            let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
            let want = row.iter().map(|&v| (v as f64 - m).exp() / s);
            assert_close(
                &format!("softmax row {r} of {n}"),
                out.row(r).iter(),
                want,
                1e-5,
                1e-9,
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2-D masks; masked-off destination elements are untouched.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn mask_2d(x: Hbm<f32, 128, 512>) -> Hbm<f32, 5, 128, 512> {
    let out = ndarray([5, 128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let t = load(x[[i_p, i_f]]);
    let d = full([128, 512], 42.0, f32);
    d[..] = multiply(t, 3.0, mask = (i_p < 64) & (i_f < 256));
    store(out[[0, 0..128, 0..512]], d);
    let e = full([128, 512], -1.0, f32);
    e[..] = exp(t, mask = (i_p >= 64) & (i_f >= 100) & (i_f < 300));
    store(out[[1, 0..128, 0..512]], e);
    let g = full([128, 512], 7.0, f32);
    g[..] = add(t, t, mask = (i_p == 5) & (i_f <= 10));
    store(out[[2, 0..128, 0..512]], g);
    let h = full([128, 512], 9.0, f32);
    h[..] = load(x[[i_p, i_f]], mask = (i_p > 100) & (i_f > 400));
    store(out[[3, 0..128, 0..512]], h);
    let u = full([128, 512], 11.0, f32);
    u[..] = tensor_tensor(
        data1 = t,
        data2 = t,
        op = maximum,
        mask = (i_p < 1) & (i_f < 1),
    );
    store(out[[4, 0..128, 0..512]], u);
    out
}

#[test]
fn two_dimensional_masks_leave_the_rest_untouched() {
    let x = rand_f32(Ix2(128, 512), 11, -3.0, 3.0);
    let out = mask_2d::host(&mut NeuronCore::default(), x.view()).unwrap();
    type In = fn(usize, usize) -> bool;
    type Want = fn(f32) -> f64;
    let cases: [(&str, In, Want, f64); 5] = [
        (
            "multiply",
            |p, f| p < 64 && f < 256,
            |v| (v * 3.0) as f64,
            42.0,
        ),
        (
            "exp",
            |p, f| p >= 64 && (100..300).contains(&f),
            |v| (v as f64).exp(),
            -1.0,
        ),
        ("add", |p, f| p == 5 && f <= 10, |v| (v + v) as f64, 7.0),
        ("load", |p, f| p > 100 && f > 400, |v| v as f64, 9.0),
        ("tensor_tensor", |p, f| p < 1 && f < 1, |v| v as f64, 11.0),
    ];
    for (k, (name, inside, f, fill)) in cases.iter().enumerate() {
        let want = x
            .indexed_iter()
            .map(|((p, j), &v)| if inside(p, j) { f(v) } else { *fill });
        assert_close(name, out.slice(s![k, .., ..]).iter(), want, 1e-6, 0.0);
    }
}

#[kernel]
fn masked_store(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let t = load(x[[i_p, i_f]]);
    store(out[[i_p, i_f]], t, mask = (i_p < 64) & (i_f < 256));
    out
}

#[test]
fn masked_store_leaves_hbm_untouched() {
    let x = rand_f32(Ix2(128, 512), 12, -3.0, 3.0);
    let input = DeviceTensor::from_array(&x).unwrap();
    let mut out = DeviceTensor::from_array(&Array2::from_elem((128, 512), -5.0f32)).unwrap();
    // The output's unmasked part stays unwritten on purpose, which a strict launch refuses.
    let mut core = NeuronCore::default().with_strict(false);
    masked_store::launch_into(&mut core, &input, &mut out).unwrap();
    let out = out.into_array::<Ix2>().unwrap();
    let want = Array2::from_shape_fn(
        (128, 512),
        |(p, f)| {
            if p < 64 && f < 256 { x[[p, f]] } else { -5.0 }
        },
    );
    assert_eq!(out, want);
}

#[kernel]
fn masked_reductions(x: Hbm<f32, 128, 512>) -> (Hbm<f32, 128, 1>, Hbm<f32, 128, 1>) {
    let o1 = ndarray([128, 1], f32, SharedHbm);
    let o2 = ndarray([128, 1], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let t = load(x[[i_p, i_f]]);
    let s = sum(t, axis = 1, mask = i_f < 100);
    store(o1[..], s);
    let r = full([128, 1], -5.0, f32);
    r[..] = tensor_reduce(
        op = maximum,
        data = t,
        axis = 1,
        mask = (i_p < 32) & (i_f < 50),
    );
    store(o2[..], r);
    (o1, o2)
}

#[test]
fn masked_reductions_read_only_the_kept_elements() {
    let x = rand_f32(Ix2(128, 512), 13, -3.0, 3.0);
    let (s1, m) = masked_reductions::host(&mut NeuronCore::default(), x.view()).unwrap();
    let want = x
        .rows()
        .into_iter()
        .map(|r| sum16(r.iter().take(100).copied()));
    assert_bits("sum of the first 100 columns", s1.iter(), want);
    let want = (0..128).map(|p| {
        if p < 32 {
            fold16(x.row(p).iter().take(50).copied(), f32::NEG_INFINITY, fmax)
        } else {
            -5.0
        }
    });
    assert_bits("max of a 32 x 50 box", m.iter(), want);
}

// ---------------------------------------------------------------------------------------------
// Accumulation into SBUF tiles across a loop.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn accumulate(
    x: Hbm<f32, 128, 2048>,
) -> (
    Hbm<f32, 128, 128>,
    Hbm<f32, 128, 128>,
    Hbm<f32, 128, 128>,
    Hbm<f32, 128, 128>,
    Hbm<f32, 128, 128>,
    Hbm<f32, 128, 128>,
) {
    let o_sum = ndarray([128, 128], f32, SharedHbm);
    let o_dif = ndarray([128, 128], f32, SharedHbm);
    let o_prod = ndarray([128, 128], f32, SharedHbm);
    let o_max = ndarray([128, 128], f32, SharedHbm);
    let o_sc = ndarray([128, 128], f32, SharedHbm);
    let o_half = ndarray([128, 128], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    let acc = zeros([128, 128], f32);
    let dif = full([128, 128], 100.0, f32);
    let pr = ones([128, 128], f32);
    let mx = full([128, 128], -1000.0, f32);
    let sc = zeros([128, 128], f32);
    let half = zeros([128, 128], f32);
    for k in sequential_range(16) {
        let t = load(x[[i_p, k * 128 + i_f]]);
        acc += t;
        dif -= t;
        pr *= t;
        mx[..] = maximum(mx, t);
        sc += t * 2.0;
        half[[0..128, 0..64]] += t[[0..128, 64..128]];
    }
    store(o_sum[..], acc);
    store(o_dif[..], dif);
    store(o_prod[..], pr);
    store(o_max[..], mx);
    store(o_sc[..], sc);
    store(o_half[..], half);
    (o_sum, o_dif, o_prod, o_max, o_sc, o_half)
}

#[test]
fn accumulation_into_sbuf_across_a_sequential_loop() {
    let x = rand_f32(Ix2(128, 2048), 14, 0.5, 1.5);
    let (sum, dif, prod, max, sc, half) =
        accumulate::host(&mut NeuronCore::default(), x.view()).unwrap();
    let fold = |init: f32, f: &dyn Fn(f32, f32) -> f32| {
        Array2::from_shape_fn((128, 128), |(p, j)| {
            (0..16).fold(init, |acc, k| f(acc, x[[p, k * 128 + j]]))
        })
    };
    let bits = |a: &Array2<f32>| a.iter().copied().collect::<Vec<_>>();
    assert_bits("+=", sum.iter(), bits(&fold(0.0, &|a, t| a + t)));
    assert_bits("-=", dif.iter(), bits(&fold(100.0, &|a, t| a - t)));
    assert_bits("*=", prod.iter(), bits(&fold(1.0, &|a, t| a * t)));
    assert_bits(
        "maximum",
        max.iter(),
        bits(&fold(-1000.0, &|a, t| fmax(a, t))),
    );
    assert_bits("+= t * 2", sc.iter(), bits(&fold(0.0, &|a, t| a + t * 2.0)));
    let want = Array2::from_shape_fn((128, 128), |(p, j)| {
        if j < 64 {
            (0..16).fold(0.0f32, |a, k| a + x[[p, k * 128 + 64 + j]])
        } else {
            0.0
        }
    });
    assert_bits("view += view", half.iter(), bits(&want));
}

// ---------------------------------------------------------------------------------------------
// Masks on the other families; the rest of every destination untouched.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn masked_families(
    x: Hbm<f32, 128, 128>,
    y: Hbm<f32, 128, 128>,
) -> (Hbm<f32, 6, 128, 128>, Hbm<f32, 2, 128, 1>) {
    let out = ndarray([6, 128, 128], f32, SharedHbm);
    let cols = ndarray([2, 128, 1], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    let a = load(x[..]);
    let b = load(y[..]);
    let box_ = (i_p >= 16) & (i_p < 80) & (i_f < 100);
    let t0 = full([128, 128], -7.0, f32);
    t0[..] = affine_select(
        pred = i_p >= i_f,
        on_true_tile = a,
        on_false_value = 0.0,
        mask = box_,
    );
    store(out[[0, 0..128, 0..128]], t0);
    let t1 = full([128, 128], -7.0, f32);
    t1[..] = iota(expr = i_f + 1000 * i_p, dtype = f32, mask = box_);
    store(out[[1, 0..128, 0..128]], t1);
    let t2 = full([128, 128], -7.0, f32);
    t2[..] = tensor_tensor_scan(
        data0 = a,
        data1 = b,
        initial = 1.0,
        op0 = multiply,
        op1 = add,
        mask = box_,
    );
    store(out[[2, 0..128, 0..128]], t2);
    let t3 = full([128, 128], -7.0, f32);
    let r3 = full([128, 1], -9.0, f32);
    t3[..] = tensor_scalar_reduce(
        data = a,
        op0 = add,
        operand0 = 1.0,
        reduce_op = add,
        reduce_res = r3,
        mask = box_,
    );
    store(out[[3, 0..128, 0..128]], t3);
    store(cols[[0, 0..128, 0..1]], r3);
    let t4 = full([128, 128], -7.0, f32);
    let r4 = full([128, 1], -9.0, f32);
    t4[..] = activation(
        op = exp,
        data = a,
        reduce_op = add,
        reduce_res = r4,
        mask = box_,
    );
    store(out[[4, 0..128, 0..128]], t4);
    store(cols[[1, 0..128, 0..1]], r4);
    let t5 = full([128, 128], -7.0, f32);
    t5[..] = tensor_copy(src = a, engine = gpsimd, mask = box_);
    store(out[[5, 0..128, 0..128]], t5);
    (out, cols)
}

#[test]
fn masks_on_select_iota_scan_reduce_activation_copy() {
    let x = rand_f32(Ix2(128, 128), 40, -2.0, 2.0);
    let y = rand_f32(Ix2(128, 128), 41, -1.0, 1.0);
    let (out, cols) =
        masked_families::host(&mut NeuronCore::default(), x.view(), y.view()).unwrap();
    let inside = |p: usize, f: usize| (16..80).contains(&p) && f < 100;
    let grid = || (0..128).flat_map(|p| (0..128).map(move |f| (p, f)));
    let keep = |f: &dyn Fn(usize, usize) -> f32| {
        grid()
            .map(|(p, j)| if inside(p, j) { f(p, j) } else { -7.0 })
            .collect::<Vec<_>>()
    };
    let sel = keep(&|p, j| if p >= j { x[[p, j]] } else { 0.0 });
    assert_bits("affine_select", out.slice(s![0, .., ..]).iter(), sel);
    assert_bits(
        "iota",
        out.slice(s![1, .., ..]).iter(),
        keep(&|p, j| (j + 1000 * p) as f32),
    );
    // The scan runs over the kept elements of each row only.
    let scan = keep(&|p, j| (0..=j).fold(1.0f32, |h, i| x[[p, i]] * h + y[[p, i]]));
    assert_bits("tensor_tensor_scan", out.slice(s![2, .., ..]).iter(), scan);
    assert_bits(
        "tensor_scalar_reduce",
        out.slice(s![3, .., ..]).iter(),
        keep(&|p, j| x[[p, j]] + 1.0),
    );
    let want = (0..128).map(|p| {
        if (16..80).contains(&p) {
            sum16(x.row(p).iter().take(100).map(|&v| v + 1.0))
        } else {
            -9.0
        }
    });
    assert_bits(
        "reduce_res of the kept box",
        cols.slice(s![0, .., 0]).iter(),
        want,
    );
    let e: Vec<f64> = grid()
        .map(|(p, j)| {
            if inside(p, j) {
                (x[[p, j]] as f64).exp()
            } else {
                -7.0
            }
        })
        .collect();
    assert_close("masked exp", out.slice(s![4, .., ..]).iter(), e, 1e-6, 0.0);
    let want = (0..128).map(|p| {
        if (16..80).contains(&p) {
            x.row(p).iter().take(100).map(|&v| (v as f64).exp()).sum()
        } else {
            -9.0
        }
    });
    assert_close(
        "masked activation reduce_res",
        cols.slice(s![1, .., 0]).iter(),
        want,
        1e-5,
        0.0,
    );
    assert_bits(
        "masked tensor_copy",
        out.slice(s![5, .., ..]).iter(),
        keep(&|p, j| x[[p, j]]),
    );
}

#[kernel]
fn masked_transpose(x: Hbm<f32, 32, 16>) -> (Hbm<f32, 16, 32>, Hbm<f32, 16, 32>) {
    let o_ve = ndarray([16, 32], f32, SharedHbm);
    let o_pe = ndarray([16, 32], f32, SharedHbm);
    let (k_p, k_f) = mgrid![0..16, 0..32];
    let a = load(x[..]);
    let ve = full([16, 32], -7.0, f32);
    ve[..] = nc_transpose(a, engine = vector, mask = (k_p < 8) & (k_f < 4));
    store(o_ve[..], ve);
    let pe = full([16, 32], -7.0, f32, Psum);
    pe[..] = nc_transpose(a, mask = (k_p < 8) & (k_f < 4));
    store(o_pe[..], pe);
    (o_ve, o_pe)
}

#[test]
fn masked_transpose_writes_only_the_masked_box_of_its_destination() {
    let x = Array2::from_shape_fn((32, 16), |(p, f)| (p * 100 + f) as f32);
    let (ve, pe) = masked_transpose::host(&mut NeuronCore::default(), x.view()).unwrap();
    let want = Array2::from_shape_fn(
        (16, 32),
        |(p, f)| if p < 8 && f < 4 { x[[f, p]] } else { -7.0 },
    );
    assert_eq!(ve, want, "Vector engine");
    assert_eq!(pe, want, "Tensor engine");
}

// A mask names axes of the instruction's grid, the destination's: the rows of a ragged
// `load_transpose2d` source are the destination's free axis.
#[kernel]
fn ragged_load_transpose(a: Hbm<f32, N, 64>) -> Hbm<f32, 64, N> {
    let out = ndarray([64, N], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..64];
    let (j_p, j_f) = mgrid![0..64, 0..128];
    for k in affine_range((N + 127) / 128) {
        let t = load_transpose2d(a[[k * 128 + i_p, i_f]], mask = k * 128 + j_f < N);
        store(out[[j_p, k * 128 + j_f]], t, mask = k * 128 + j_f < N);
    }
    out
}

#[test]
fn ragged_load_transpose2d_reads_and_writes_only_the_rows_that_exist() {
    for n in [1, 100, 128, 200, 256] {
        let a = Array2::from_shape_fn((n, 64), |(r, c)| (r * 1000 + c) as f32);
        let out = ragged_load_transpose::host(&mut NeuronCore::default(), a.view()).unwrap();
        assert_eq!(out, a.t(), "N = {n}");
    }
}

// NKI's `nisa.dma_transpose(src, axes=[1, 0])` of an HBM access: the same transpose, here
// ragged and cast to bf16 on the way.
#[kernel]
fn ragged_dma_transpose(a: Hbm<f32, N, 64>) -> Hbm<bf16, 64, N> {
    let out = ndarray([64, N], bf16, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..64];
    let (j_p, j_f) = mgrid![0..64, 0..128];
    for k in affine_range((N + 127) / 128) {
        let t = dma_transpose(
            a[[k * 128 + i_p, i_f]],
            axes = [1, 0],
            mask = k * 128 + j_f < N,
            dtype = bf16,
        );
        store(out[[j_p, k * 128 + j_f]], t, mask = k * 128 + j_f < N);
    }
    out
}

#[test]
fn ragged_dma_transpose_is_the_transpose_rounded_to_bf16() {
    for n in [1, 100, 200] {
        let a = Array2::from_shape_fn((n, 64), |(r, c)| (r * 1000 + c) as f32 + 0.3);
        let out = ragged_dma_transpose::host(&mut NeuronCore::default(), a.view()).unwrap();
        assert_eq!(out, a.t().mapv(bf16::from_f32), "N = {n}");
    }
}

#[kernel]
fn accumulate_ops(
    a: Hbm<f32, 128, 512>,
    b: Hbm<i32, 128, 512>,
    c: Hbm<bf16, 128, 512>,
) -> (
    Hbm<f32, 2, 128, 128>,
    Hbm<i32, 5, 128, 128>,
    Hbm<bf16, 128, 128>,
    Hbm<f32, 128, 128>,
) {
    let of = ndarray([2, 128, 128], f32, SharedHbm);
    let oi = ndarray([5, 128, 128], i32, SharedHbm);
    let ob = ndarray([128, 128], bf16, SharedHbm);
    let oa = ndarray([128, 128], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    let dv = full([128, 128], 1000.0, f32);
    let md = full([128, 128], 1000.0, f32);
    let an = full([128, 128], -1, i32);
    let orr = zeros([128, 128], i32);
    let xo = zeros([128, 128], i32);
    let sl = ones([128, 128], i32);
    let sr = full([128, 128], -1, i32);
    let bacc = zeros([128, 128], bf16);
    let one = full([128, 128], 1, i32);
    let two = full([128, 128], 2, i32);
    let par = zeros([128, 128], f32);
    for k in sequential_range(4) {
        let t = load(a[[i_p, k * 128 + i_f]]);
        let u = load(b[[i_p, k * 128 + i_f]]);
        let v = load(c[[i_p, k * 128 + i_f]]);
        dv /= t;
        md %= t;
        an &= u;
        orr |= u;
        xo ^= u;
        sl <<= one;
        sr >>= two;
        bacc += v;
    }
    for k in affine_range(4) {
        let t = load(a[[i_p, k * 128 + i_f]]);
        par += t;
    }
    store(of[[0, 0..128, 0..128]], dv);
    store(of[[1, 0..128, 0..128]], md);
    store(oi[[0, 0..128, 0..128]], an);
    store(oi[[1, 0..128, 0..128]], orr);
    store(oi[[2, 0..128, 0..128]], xo);
    store(oi[[3, 0..128, 0..128]], sl);
    store(oi[[4, 0..128, 0..128]], sr);
    store(ob[..], bacc);
    store(oa[..], par);
    (of, oi, ob, oa)
}

fn accumulate_inputs() -> (Array2<f32>, Array2<i32>, Array2<bf16>) {
    let a = rand_f32(Ix2(128, 512), 42, 0.5, 3.0);
    let b = Array2::from_shape_fn((128, 512), |(p, f)| {
        ((p * 2654435761 + f * 97) as u32) as i32
    });
    let c = rand_f32(Ix2(128, 512), 43, -10.0, 10.0).mapv(bf16::from_f32);
    (a, b, c)
}

fn cells() -> impl Iterator<Item = (usize, usize)> {
    (0..128).flat_map(|p| (0..128).map(move |j| (p, j)))
}

#[test]
fn compound_assignments_on_float_tiles() {
    let (a, b, c) = accumulate_inputs();
    let (of, _, ob, oa) =
        accumulate_ops::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    let fold_f = |init: f32, f: &dyn Fn(f32, f32) -> f32| -> Vec<f32> {
        cells()
            .map(|(p, j)| (0..4).fold(init, |acc, k| f(acc, a[[p, k * 128 + j]])))
            .collect()
    };
    assert_bits(
        "/=",
        of.slice(s![0, .., ..]).iter(),
        fold_f(1000.0, &|x, t| x / t),
    );
    assert_bits(
        "%=",
        of.slice(s![1, .., ..]).iter(),
        fold_f(1000.0, &|x, t| floored_mod(x, t)),
    );
    let want: Vec<u16> = cells()
        .map(|(p, j)| {
            let add =
                |acc: bf16, k: usize| bf16::from_f32(acc.to_f32() + c[[p, k * 128 + j]].to_f32());
            (0..4).fold(bf16::ZERO, add).to_bits()
        })
        .collect();
    assert_eq!(
        ob.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want,
        "bf16 += rounds every step"
    );
    assert_bits(
        "+= over affine_range",
        oa.iter(),
        fold_f(0.0, &|x, t| x + t),
    );
}

#[test]
fn compound_bit_assignments_on_i32_tiles() {
    let (a, b, c) = accumulate_inputs();
    let (_, oi, _, _) =
        accumulate_ops::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    let fold_i = |init: i32, f: &dyn Fn(i32, i32) -> i32| -> Vec<i32> {
        cells()
            .map(|(p, j)| (0..4).fold(init, |acc, k| f(acc, b[[p, k * 128 + j]])))
            .collect()
    };
    let col = |k: usize| oi.slice(s![k, .., ..]).iter().copied().collect::<Vec<_>>();
    let mut wrong = Vec::new();
    let cases = [
        ("&=", col(0), fold_i(-1, &|x, u| x & u)),
        ("|=", col(1), fold_i(0, &|x, u| x | u)),
        ("^=", col(2), fold_i(0, &|x, u| x ^ u)),
        ("<<= 1, four times", col(3), vec![16; 128 * 128]),
        (
            ">>= 2 (logical), four times",
            col(4),
            vec![(u32::MAX >> 8) as i32; 128 * 128],
        ),
    ];
    for (name, got, want) in cases {
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            wrong.push(format!(
                "{name}: element {i}: got {:#x}, want {:#x}",
                got[i], want[i]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A reduction masked along a kept free axis from a lower bound (`jb >= 32`): each kept
/// position is written where the unmasked reduction writes it, and the others keep what they
/// held (the result was once written from position 0).
#[kernel]
fn reduce_masked_on_a_kept_axis(
    x: Hbm<f32, 128, 4, 64>,
) -> (Hbm<f32, 128, 64>, Hbm<f32, 128, 1, 64>) {
    let out = ndarray([128, 64], f32, SharedHbm);
    let kept = ndarray([128, 1, 64], f32, SharedHbm);
    let t = load(x[..]);
    let m = ndarray([128, 64], f32, Sbuf);
    m[..] = -1.0;
    let k = ndarray([128, 1, 64], f32, Sbuf);
    k[..] = -1.0;
    let (ip, ja, jb) = mgrid![0..128, 0..4, 0..64];
    m[..] = max(t[[ip, ja, jb]], axis = 1, mask = (jb >= 32) & (ip >= 8));
    k[..] = max(
        t[[ip, ja, jb]],
        axis = 1,
        keepdims = true,
        mask = (jb >= 20) & (jb < 50),
    );
    store(out[..], m);
    store(kept[..], k);
    (out, kept)
}

#[test]
fn a_reduction_masked_on_a_kept_axis_writes_the_kept_positions() {
    let x = ndarray::Array3::from_shape_fn((128, 4, 64), |(p, a, b)| {
        ((p * 7 + a * 13 + b * 5) % 23) as f32 - 11.0
    });
    let max_over_a = |p: usize, b: usize| (0..4).map(|a| x[[p, a, b]]).fold(f32::MIN, f32::max);
    for strict in [false, true] {
        let mut core = NeuronCore::default().with_strict(strict);
        let (got, kept) = reduce_masked_on_a_kept_axis::host(&mut core, x.view()).unwrap();
        for p in 0..128 {
            for b in 0..64 {
                let want = if b >= 32 && p >= 8 {
                    max_over_a(p, b)
                } else {
                    -1.0
                };
                assert_eq!(got[[p, b]], want, "strict {strict}, [{p}, {b}]");
                let want = if (20..50).contains(&b) {
                    max_over_a(p, b)
                } else {
                    -1.0
                };
                assert_eq!(
                    kept[[p, 0, b]],
                    want,
                    "keepdims, strict {strict}, [{p}, 0, {b}]"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Masks that bound a composite index, and masks against launch-time values.
// ---------------------------------------------------------------------------------------------

/// NKI's contributed max-pool pattern: windows `x[p, i + kh]` of 3 columns loaded as a
/// `[128, 512, 3]` tile under `i < W - (3 - 1)` (a mask on `i` alone bounds `i + kh`), then the
/// maximum over each window. Column `c` of the output is `max(x[p, c..c + 3])` for
/// `c < W − 2`; the last two columns keep `x`'s, stored first.
#[kernel]
fn sliding_max3(x: Hbm<f32, 128, W>) -> Hbm<f32, 128, W> {
    let out = ndarray([128, W], f32, SharedHbm);
    let (ip, i, kh) = mgrid![0..128, 0..512, 0..3];
    let (op, oi) = mgrid![0..128, 0..512];
    for t in affine_range((W + 511) / 512) {
        let row = load(x[[op, t * 512 + oi]], mask = t * 512 + oi < W);
        store(out[[op, t * 512 + oi]], row, mask = t * 512 + oi < W);
        let windows = load(x[[ip, t * 512 + i + kh]], mask = t * 512 + i < W - (3 - 1));
        let m = max(windows, axis = [2], mask = t * 512 + oi < W - 2);
        store(out[[op, t * 512 + oi]], m, mask = t * 512 + oi < W - 2);
    }
    out
}

#[test]
fn a_mask_on_one_term_bounds_a_composite_index() {
    for w in [3usize, 200, 514, 515, 1030] {
        let x = rand_f32(Ix2(128, w), w as u64, -50.0, 50.0);
        let mut core = NeuronCore::default();
        let out = sliding_max3::host(&mut core, x.view()).unwrap();
        for ((p, c), &v) in out.indexed_iter() {
            let want = if c + 2 < w {
                (0..3)
                    .map(|k| x[[p, c + k]])
                    .fold(f32::NEG_INFINITY, f32::max)
            } else {
                x[[p, c]]
            };
            assert_eq!(v.to_bits(), want.to_bits(), "W={w} [{p}, {c}]");
        }
    }
}

/// NKI's cumsum pattern: a condition against a value derived from a dimension, `j + 1 <
/// n_tiles` with `n_tiles = (N + 511) / 512`: every column tile but the last is doubled.
#[kernel]
fn double_all_but_last_tile(x: Hbm<f32, 128, N>) -> Hbm<f32, 128, N> {
    let out = ndarray([128, N], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    let n_tiles = (N + 511) / 512;
    for j in affine_range(n_tiles) {
        let t = load(x[[ip, j * 512 + jf]], mask = j * 512 + jf < N);
        let d = multiply(t, 2.0, mask = (j + 1 < n_tiles) & (j * 512 + jf < N));
        t[..] = copy(d, mask = (j + 1 < n_tiles) & (j * 512 + jf < N));
        store(out[[ip, j * 512 + jf]], t, mask = j * 512 + jf < N);
    }
    out
}

#[test]
fn a_mask_against_a_tile_count_derived_from_a_dimension() {
    for n in [512usize, 513, 1024, 1500] {
        let x = rand_f32(Ix2(128, n), n as u64, -50.0, 50.0);
        let mut core = NeuronCore::default();
        let out = double_all_but_last_tile::host(&mut core, x.view()).unwrap();
        let last = n.div_ceil(512) - 1;
        for ((p, c), &v) in out.indexed_iter() {
            let want = if c / 512 < last {
                2.0 * x[[p, c]]
            } else {
                x[[p, c]]
            };
            assert_eq!(v.to_bits(), want.to_bits(), "N={n} [{p}, {c}]");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// bn_stats under a mask on its partitions (the layernorm tutorial's ragged rows).
// ---------------------------------------------------------------------------------------------

/// Each row's mean and variance by `bn_stats` over two 512-column chunks and `bn_aggr`, the
/// rows of the ragged last tile masked, as the layernorm tutorial writes it.
#[kernel]
fn row_moments(x: Hbm<f32, N, 1024>) -> Hbm<f32, N, 2> {
    let out = ndarray([N, 2], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..1024];
    let (j_p, j_f) = mgrid![0..128, 0..2];
    for i in affine_range((N + 127) / 128) {
        let t = load(x[[i * 128 + i_p, i_f]], mask = i * 128 + i_p < N);
        let stats = ndarray([128, 12], f32, Sbuf);
        for c in static_range(2) {
            stats[[0..128, c * 6..(c + 1) * 6]] = bn_stats(
                t[[0..128, c * 512..(c + 1) * 512]],
                mask = i * 128 + j_p < N,
            );
        }
        let moments = bn_aggr(stats, mask = i * 128 + j_p < N);
        store(out[[i * 128 + j_p, j_f]], moments, mask = i * 128 + j_p < N);
    }
    out
}

#[test]
fn bn_stats_under_a_mask_on_its_partitions() {
    for n in [128usize, 200] {
        let x = rand_f32(Ix2(n, 1024), n as u64, -3.0, 3.0);
        let mut core = NeuronCore::default();
        let out = row_moments::host(&mut core, x.view()).unwrap();
        for r in 0..n {
            let row: Vec<f64> = (0..1024).map(|c| f64::from(x[[r, c]])).collect();
            let mean = row.iter().sum::<f64>() / 1024.0;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 1024.0;
            assert!(
                (f64::from(out[[r, 0]]) - mean).abs() < 1e-5,
                "N={n} mean [{r}]"
            );
            assert!(
                (f64::from(out[[r, 1]]) - var).abs() < 1e-4 * var,
                "N={n} var [{r}]"
            );
        }
    }
}
