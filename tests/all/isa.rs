//! NKI's ISA calls with keyword arguments, the activation functions, reductions, data movement,
//! creation, and the composites (`softmax`, `rms_norm`, `mean`, `var`), each checked against an
//! independent reference written here.

use crate::common;

use common::*;
use nki::Bool;
use nki::ndarray::{Array2, Ix2, Ix3, s};
use nki::prelude::*;
use nki::program::DType;

const P: usize = 128;
const F: usize = 512;

// ---------------------------------------------------------------------------------------------
// tensor_tensor, tensor_scalar, scalar_tensor_tensor.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn alu_calls(
    a: Hbm<f32, 128, 512>,
    b: Hbm<f32, 128, 512>,
    c: Hbm<f32, 128, 1>,
) -> Hbm<f32, 10, 128, 512> {
    let out = ndarray([10, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let col = load(c[..]);
    store(
        out[[0, 0..128, 0..512]],
        tensor_tensor(data1 = x, data2 = y, op = maximum),
    );
    store(out[[1, 0..128, 0..512]], tensor_tensor(x, y, np::subtract));
    store(
        out[[2, 0..128, 0..512]],
        tensor_scalar(
            data = x,
            op0 = multiply,
            operand0 = 2.0,
            op1 = add,
            operand1 = 1.0,
        ),
    );
    store(
        out[[3, 0..128, 0..512]],
        tensor_scalar(data = x, op0 = subtract, operand0 = 10.0, reverse0 = true),
    );
    store(
        out[[4, 0..128, 0..512]],
        tensor_scalar(
            data = x,
            op0 = subtract,
            operand0 = col,
            op1 = divide,
            operand1 = 4.0,
            reverse1 = true,
        ),
    );
    store(
        out[[5, 0..128, 0..512]],
        tensor_scalar(
            data = x,
            op0 = nl::maximum,
            operand0 = 0.0,
            op1 = nl::minimum,
            operand1 = 6.0,
        ),
    );
    store(
        out[[6, 0..128, 0..512]],
        scalar_tensor_tensor(
            data = x,
            op0 = multiply,
            operand0 = col,
            op1 = add,
            operand1 = y,
        ),
    );
    store(
        out[[7, 0..128, 0..512]],
        scalar_tensor_tensor(
            data = x,
            op0 = subtract,
            operand0 = 1.0,
            op1 = subtract,
            operand1 = y,
            reverse1 = true,
        ),
    );
    store(
        out[[8, 0..128, 0..512]],
        tensor_tensor(data1 = x, data2 = y, op = divide, engine = gpsimd),
    );
    store(
        out[[9, 0..128, 0..512]],
        tensor_scalar(
            data = x,
            op0 = add,
            operand0 = col,
            op1 = multiply,
            operand1 = col,
        ),
    );
    out
}

#[test]
fn tensor_tensor_tensor_scalar_scalar_tensor_tensor() {
    let a = rand_f32(Ix2(P, F), 1, -20.0, 20.0);
    let b = rand_f32(Ix2(P, F), 2, -20.0, 20.0);
    let c = rand_f32(Ix2(P, 1), 3, -5.0, 5.0);
    let out = alu_calls::host(&mut NeuronCore::default(), a.view(), b.view(), c.view()).unwrap();
    type Ref = fn(f32, f32, f32) -> f32;
    let refs: [(&str, Ref); 10] = [
        ("tensor_tensor maximum", |x, y, _| fmax(x, y)),
        ("tensor_tensor subtract", |x, y, _| x - y),
        ("x * 2 + 1", |x, _, _| x * 2.0 + 1.0),
        ("10 - x", |x, _, _| 10.0 - x),
        ("4 / (x - col)", |x, _, c| 4.0 / (x - c)),
        ("min(max(x, 0), 6)", |x, _, _| fmin(fmax(x, 0.0), 6.0)),
        ("x * col + y", |x, y, c| x * c + y),
        ("y - (x - 1)", |x, y, _| y - (x - 1.0)),
        ("divide on gpsimd", |x, y, _| x / y),
        ("(x + col) * col", |x, _, c| (x + c) * c),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        let want = a
            .indexed_iter()
            .map(|((p, j), &x)| f(x, b[[p, j]], c[[p, 0]]));
        assert_bits(name, out.slice(s![k, .., ..]).iter(), want);
    }
    assert!(has_instr(
        alu_calls::KERNEL.program(),
        "GpSimd",
        "tensor_tensor"
    ));
}

// ---------------------------------------------------------------------------------------------
// Per-partition reductions of elementwise results: tensor_scalar_reduce, activation reduce.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn scalar_reduce(
    a: Hbm<f32, 128, 512>,
) -> (Hbm<f32, 2, 128, 512>, Hbm<f32, 128, 1>, Hbm<f32, 128, 1>) {
    let o = ndarray([2, 128, 512], f32, SharedHbm);
    let o_sum = ndarray([128, 1], f32, SharedHbm);
    let o_max = ndarray([128, 1], f32, SharedHbm);
    let x = load(a[..]);
    let r = ndarray([128, 1], f32, Sbuf);
    let y = tensor_scalar_reduce(
        data = x,
        op0 = multiply,
        operand0 = 2.0,
        reduce_op = add,
        reduce_res = r,
    );
    let m = ndarray([128, 1], f32, Sbuf);
    let z = tensor_scalar_reduce(
        data = x,
        op0 = subtract,
        operand0 = 1.0,
        reduce_op = maximum,
        reduce_res = m,
        reverse0 = true,
    );
    store(o[[0, 0..128, 0..512]], y);
    store(o[[1, 0..128, 0..512]], z);
    store(o_sum[..], r);
    store(o_max[..], m);
    (o, o_sum, o_max)
}

#[test]
fn tensor_scalar_reduce_into_reduce_res() {
    let a = rand_f32(Ix2(P, F), 4, -20.0, 20.0);
    let (o, sum, max) = scalar_reduce::host(&mut NeuronCore::default(), a.view()).unwrap();
    assert_bits(
        "x * 2",
        o.slice(s![0, .., ..]).iter(),
        a.iter().map(|&x| x * 2.0),
    );
    assert_bits(
        "1 - x",
        o.slice(s![1, .., ..]).iter(),
        a.iter().map(|&x| 1.0 - x),
    );
    let want = a
        .rows()
        .into_iter()
        .map(|r| sum16(r.iter().map(|&x| x * 2.0)));
    assert_bits("reduce_res add", sum.iter(), want);
    let want = a
        .rows()
        .into_iter()
        .map(|r| fold16(r.iter().map(|&x| 1.0 - x), f32::NEG_INFINITY, fmax));
    assert_bits("reduce_res maximum", max.iter(), want);
}

// ---------------------------------------------------------------------------------------------
// Activation: scale immediate and (P, 1) vector, bias, per-partition reduction.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn act_calls(
    a: Hbm<f32, 128, 512>,
    sc: Hbm<f32, 128, 1>,
    bi: Hbm<f32, 128, 1>,
) -> (Hbm<f32, 5, 128, 512>, Hbm<f32, 128, 1>, Hbm<f32, 128, 1>) {
    let out = ndarray([5, 128, 512], f32, SharedHbm);
    let o_r = ndarray([128, 1], f32, SharedHbm);
    let o_r2 = ndarray([128, 1], f32, SharedHbm);
    let x = load(a[..]);
    let scale = load(sc[..]);
    let bias = load(bi[..]);
    store(
        out[[0, 0..128, 0..512]],
        activation(op = exp, data = x, scale = 0.5),
    );
    store(
        out[[1, 0..128, 0..512]],
        activation(op = exp, data = x, scale = scale, bias = bias),
    );
    let r = ndarray([128, 1], f32, Sbuf);
    // NKI's `reduce_cmd = reset_reduce`: this instruction's results alone, as without it.
    let e = activation(
        op = exp,
        data = x,
        bias = bias,
        reduce_op = add,
        reduce_res = r,
        reduce_cmd = reset_reduce,
    );
    store(out[[2, 0..128, 0..512]], e);
    let r2 = ndarray([128, 1], f32, Sbuf);
    let e2 = activation_reduce(
        op = exp,
        data = x,
        reduce_op = add,
        reduce_res = r2,
        scale = -1.0,
    );
    store(out[[3, 0..128, 0..512]], e2);
    store(out[[4, 0..128, 0..512]], exp(x));
    store(o_r[..], r);
    store(o_r2[..], r2);
    (out, o_r, o_r2)
}

#[test]
fn activation_with_scale_bias_and_reduction() {
    let a = rand_f32(Ix2(P, F), 5, -4.0, 4.0);
    let sc = rand_f32(Ix2(P, 1), 6, -1.0, 1.0);
    let bi = rand_f32(Ix2(P, 1), 7, -1.0, 1.0);
    let (out, r, r2) =
        act_calls::host(&mut NeuronCore::default(), a.view(), sc.view(), bi.view()).unwrap();
    let x = |p: usize, j: usize| a[[p, j]] as f64;
    let grid = || (0..P).flat_map(|p| (0..F).map(move |j| (p, j)));
    type Ref<'a> = Box<dyn Fn(usize, usize) -> f64 + 'a>;
    let refs: [(&str, Ref<'_>); 5] = [
        ("exp(x * 0.5)", Box::new(|p, j| (x(p, j) * 0.5).exp())),
        (
            "exp(x * scale + bias)",
            Box::new(|p, j| (x(p, j) * sc[[p, 0]] as f64 + bi[[p, 0]] as f64).exp()),
        ),
        (
            "exp(x + bias)",
            Box::new(|p, j| (x(p, j) + bi[[p, 0]] as f64).exp()),
        ),
        ("exp(-x)", Box::new(|p, j| (-x(p, j)).exp())),
        ("exp(x)", Box::new(|p, j| x(p, j).exp())),
    ];
    for (k, (name, f)) in refs.iter().enumerate() {
        let want = grid().map(|(p, j)| f(p, j));
        assert_close(name, out.slice(s![k, .., ..]).iter(), want, 1e-6, 0.0);
    }
    let want = (0..P).map(|p| {
        (0..F)
            .map(|j| (x(p, j) + bi[[p, 0]] as f64).exp())
            .sum::<f64>()
    });
    assert_close("reduce_res of exp(x + bias)", r.iter(), want, 1e-5, 0.0);
    let want = (0..P).map(|p| (0..F).map(|j| (-x(p, j)).exp()).sum::<f64>());
    assert_close("activation_reduce", r2.iter(), want, 1e-5, 0.0);
    assert!(has_instr(
        act_calls::KERNEL.program(),
        "Scalar",
        "activation"
    ));
}

/// The error function, by its Maclaurin series (|x| ≤ 3: terms stay below 1e4, so f64 keeps
/// about 12 digits).
fn erf(x: f64) -> f64 {
    let mut term = x;
    let mut sum = x;
    let mut n = 0.0;
    loop {
        n += 1.0;
        term *= -x * x / n;
        let t = term / (2.0 * n + 1.0);
        sum += t;
        if t.abs() < 1e-17 {
            break;
        }
    }
    sum * 2.0 / core::f64::consts::PI.sqrt()
}

#[kernel]
fn act_functions(
    a: Hbm<f32, 128, 64>,
    pos: Hbm<f32, 128, 64>,
    t: Hbm<f32, 128, 64>,
) -> Hbm<f32, 28, 128, 64> {
    let out = ndarray([28, 128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let q = load(pos[..]);
    let u = load(t[..]);
    store(out[[0, 0..128, 0..64]], log(q));
    store(out[[1, 0..128, 0..64]], tanh(x));
    store(out[[2, 0..128, 0..64]], sqrt(q));
    store(out[[3, 0..128, 0..64]], rsqrt(q));
    store(
        out[[4, 0..128, 0..64]],
        activation(op = reciprocal, data = q),
    );
    store(out[[5, 0..128, 0..64]], square(x));
    store(out[[6, 0..128, 0..64]], relu(x));
    store(out[[7, 0..128, 0..64]], gelu(x));
    store(out[[8, 0..128, 0..64]], gelu_dx(x));
    store(out[[9, 0..128, 0..64]], gelu_apprx_tanh(x));
    store(out[[10, 0..128, 0..64]], gelu_apprx_sigmoid(x));
    store(out[[11, 0..128, 0..64]], sigmoid(x));
    store(out[[12, 0..128, 0..64]], silu(x));
    store(out[[13, 0..128, 0..64]], silu_dx(x));
    store(out[[14, 0..128, 0..64]], softplus(x));
    store(out[[15, 0..128, 0..64]], mish(x));
    store(out[[16, 0..128, 0..64]], erf(x));
    store(out[[17, 0..128, 0..64]], erf_dx(x));
    store(out[[18, 0..128, 0..64]], sin(u));
    store(out[[19, 0..128, 0..64]], cos(u));
    store(out[[20, 0..128, 0..64]], tan(u));
    store(out[[21, 0..128, 0..64]], arctan(u));
    store(out[[22, 0..128, 0..64]], abs(x));
    store(out[[23, 0..128, 0..64]], sign(x));
    store(out[[24, 0..128, 0..64]], floor(x));
    store(out[[25, 0..128, 0..64]], ceil(x));
    store(out[[26, 0..128, 0..64]], trunc(x));
    store(out[[27, 0..128, 0..64]], activation(op = copy, data = x));
    out
}

#[test]
fn activation_functions() {
    let a = rand_f32(Ix2(P, 64), 8, -3.0, 3.0);
    let pos = rand_f32(Ix2(P, 64), 9, 0.1, 5.0);
    let t = rand_f32(Ix2(P, 64), 10, -1.4, 1.4);
    let out =
        act_functions::host(&mut NeuronCore::default(), a.view(), pos.view(), t.view()).unwrap();
    let pdf = |x: f64| (-x * x / 2.0).exp() / (2.0 * core::f64::consts::PI).sqrt();
    let cdf = |x: f64| 0.5 * (1.0 + erf(x / 2f64.sqrt()));
    let sigm = |x: f64| 1.0 / (1.0 + (-x).exp());
    let softplus = |x: f64| x.exp().ln_1p();
    // (name, input, reference)
    type Ref = Box<dyn Fn(f64) -> f64>;
    let refs: Vec<(&str, u8, Ref)> = vec![
        ("log", 1, Box::new(|x: f64| x.ln())),
        ("tanh", 0, Box::new(|x: f64| x.tanh())),
        ("sqrt", 1, Box::new(|x: f64| x.sqrt())),
        ("rsqrt", 1, Box::new(|x: f64| 1.0 / x.sqrt())),
        ("activation reciprocal", 1, Box::new(|x: f64| 1.0 / x)),
        ("square", 0, Box::new(|x: f64| x * x)),
        ("relu", 0, Box::new(|x: f64| x.max(0.0))),
        ("gelu", 0, Box::new(move |x: f64| x * cdf(x))),
        ("gelu_dx", 0, Box::new(move |x: f64| cdf(x) + x * pdf(x))),
        (
            "gelu_apprx_tanh",
            0,
            Box::new(|x: f64| {
                let k = (2.0 / core::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
            }),
        ),
        (
            "gelu_apprx_sigmoid",
            0,
            Box::new(move |x: f64| x * sigm(1.702 * x)),
        ),
        ("sigmoid", 0, Box::new(sigm)),
        ("silu", 0, Box::new(move |x: f64| x * sigm(x))),
        (
            "silu_dx",
            0,
            Box::new(move |x: f64| sigm(x) * (1.0 + x * (1.0 - sigm(x)))),
        ),
        ("softplus", 0, Box::new(softplus)),
        ("mish", 0, Box::new(move |x: f64| x * softplus(x).tanh())),
        ("erf", 0, Box::new(erf)),
        (
            "erf_dx",
            0,
            Box::new(|x: f64| 2.0 / core::f64::consts::PI.sqrt() * (-x * x).exp()),
        ),
        ("sin", 2, Box::new(|x: f64| x.sin())),
        ("cos", 2, Box::new(|x: f64| x.cos())),
        ("tan", 2, Box::new(|x: f64| x.tan())),
        ("arctan", 2, Box::new(|x: f64| x.atan())),
        ("abs", 0, Box::new(|x: f64| x.abs())),
        ("sign", 0, Box::new(|x: f64| x.signum())),
        ("floor", 0, Box::new(|x: f64| x.floor())),
        ("ceil", 0, Box::new(|x: f64| x.ceil())),
        ("trunc", 0, Box::new(|x: f64| x.trunc())),
        ("activation copy", 0, Box::new(|x: f64| x)),
    ];
    let mut failed = Vec::new();
    for (k, (name, input, f)) in refs.iter().enumerate() {
        let src = [&a, &pos, &t][*input as usize];
        let bad = out
            .slice(s![k, .., ..])
            .iter()
            .zip(src.iter())
            .find(|(g, x)| {
                let w = f(**x as f64);
                (**g as f64 - w).abs() > 1e-6 * w.abs() + 1e-7
            })
            .map(|(g, x)| format!("{name}({x}) = {g}, want {}", f(*x as f64)));
        failed.extend(bad);
    }
    assert!(
        failed.is_empty(),
        "{} functions wrong:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// tensor_reduce over one and several axes, negate, keepdims.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn reduce_calls(
    a: Hbm<f32, 128, 512>,
    b: Hbm<f32, 128, 4, 64>,
) -> (
    Hbm<f32, 128, 1>,
    Hbm<f32, 128, 1>,
    Hbm<f32, 128, 1>,
    Hbm<f32, 128, 1, 1>,
    Hbm<f32, 128, 4>,
    Hbm<f32, 128, 4, 1>,
    Hbm<f32, 128, 64>,
) {
    let o_sum = ndarray([128, 1], f32, SharedHbm);
    let o_negmax = ndarray([128, 1], f32, SharedHbm);
    let o_12 = ndarray([128, 1], f32, SharedHbm);
    let o_12k = ndarray([128, 1, 1], f32, SharedHbm);
    let o_2 = ndarray([128, 4], f32, SharedHbm);
    let o_2k = ndarray([128, 4, 1], f32, SharedHbm);
    let o_1 = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let x3 = load(b[..]);
    let rs = tensor_reduce(op = add, data = x, axis = 1);
    let rm = tensor_reduce(op = maximum, data = x, axis = 1, negate = true);
    let r12 = tensor_reduce(op = add, data = x3, axis = [1, 2]);
    let r12k = tensor_reduce(op = add, data = x3, axis = [1, 2], keepdims = true);
    let r2 = tensor_reduce(op = minimum, data = x3, axis = 2);
    let r2k = tensor_reduce(
        op = minimum,
        data = x3,
        axis = 2,
        keepdims = true,
        negate = true,
    );
    let r1 = tensor_reduce(multiply, x3, 1);
    store(o_sum[..], rs);
    store(o_negmax[..], rm);
    store(o_12[..], r12);
    store(o_12k[..], r12k);
    store(o_2[..], r2);
    store(o_2k[..], r2k);
    store(o_1[..], r1);
    (o_sum, o_negmax, o_12, o_12k, o_2, o_2k, o_1)
}

#[test]
fn tensor_reduce_axes_negate_keepdims() {
    let a = rand_f32(Ix2(P, F), 11, -20.0, 20.0);
    let b = rand_f32(Ix3(P, 4, 64), 12, -2.0, 2.0);
    let (sum, negmax, r12, r12k, r2, r2k, r1) =
        reduce_calls::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    let prog = reduce_calls::KERNEL.program();
    assert_eq!(tile(prog, "rs").1, vec![128, 1]);
    assert_eq!(tile(prog, "r12").1, vec![128, 1]);
    assert_eq!(tile(prog, "r12k").1, vec![128, 1, 1]);
    assert_eq!(tile(prog, "r2").1, vec![128, 4]);
    assert_eq!(tile(prog, "r2k").1, vec![128, 4, 1]);
    assert_eq!(tile(prog, "r1").1, vec![128, 64]);
    let rows = || a.rows().into_iter();
    assert_bits("sum", sum.iter(), rows().map(|r| sum16(r.iter().copied())));
    let want = rows().map(|r| -fold16(r.iter().copied(), f32::NEG_INFINITY, fmax));
    assert_bits("-max", negmax.iter(), want);
    let want: Vec<f32> = (0..P)
        .map(|p| sum16(b.slice(s![p, .., ..]).iter().copied()))
        .collect();
    assert_bits("sum over [1, 2]", r12.iter(), want.iter().copied());
    assert_bits(
        "sum over [1, 2], keepdims",
        r12k.iter(),
        want.iter().copied(),
    );
    let want: Vec<f32> = (0..P)
        .flat_map(|p| (0..4).map(move |i| (p, i)))
        .map(|(p, i)| fold16(b.slice(s![p, i, ..]).iter().copied(), f32::INFINITY, fmin))
        .collect();
    assert_bits("min over 2", r2.iter(), want.iter().copied());
    assert_bits(
        "-min over 2, keepdims",
        r2k.iter(),
        want.iter().map(|&v| -v),
    );
    let want = (0..P)
        .flat_map(|p| (0..64).map(move |f| (p, f)))
        .map(|(p, f)| fold16(b.slice(s![p, .., f]).iter().copied(), 1.0, |x, y| x * y));
    assert_bits("prod over 1", r1.iter(), want);
}

// ---------------------------------------------------------------------------------------------
// tensor_tensor_scan: the Mamba recurrence.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn scan_calls(
    da: Hbm<f32, 128, 512>,
    dbx: Hbm<f32, 128, 512>,
    h0: Hbm<f32, 128, 1>,
) -> Hbm<f32, 5, 128, 512> {
    let out = ndarray([5, 128, 512], f32, SharedHbm);
    let a = load(da[..]);
    let b = load(dbx[..]);
    let h = load(h0[..]);
    store(
        out[[0, 0..128, 0..512]],
        tensor_tensor_scan(
            data0 = a,
            data1 = b,
            initial = 0.0,
            op0 = multiply,
            op1 = add,
        ),
    );
    store(
        out[[1, 0..128, 0..512]],
        tensor_tensor_scan(data0 = a, data1 = b, initial = h, op0 = multiply, op1 = add),
    );
    store(
        out[[2, 0..128, 0..512]],
        tensor_tensor_scan(a, b, 1.0, maximum, subtract),
    );
    // NKI's reverse0 / reverse1: the operands of op0 / op1 swapped.
    store(
        out[[3, 0..128, 0..512]],
        tensor_tensor_scan(a, b, h, subtract, divide, reverse0 = true),
    );
    store(
        out[[4, 0..128, 0..512]],
        tensor_tensor_scan(a, b, 0.5, subtract, subtract, true, true),
    );
    out
}

#[test]
fn tensor_tensor_scan_mamba_recurrence() {
    let da = rand_f32(Ix2(P, F), 13, 0.5, 1.0);
    let dbx = rand_f32(Ix2(P, F), 14, -1.0, 1.0);
    let h0 = rand_f32(Ix2(P, 1), 15, -3.0, 3.0);
    let out =
        scan_calls::host(&mut NeuronCore::default(), da.view(), dbx.view(), h0.view()).unwrap();
    let scan = |init: &dyn Fn(usize) -> f32, f: &dyn Fn(f32, f32, f32) -> f32| {
        let mut v = Vec::new();
        for p in 0..P {
            let mut h = init(p);
            for j in 0..F {
                h = f(da[[p, j]], h, dbx[[p, j]]);
                v.push(h);
            }
        }
        v
    };
    let mamba = |a: f32, h: f32, b: f32| a * h + b;
    assert_bits(
        "h = a*h + b from 0",
        out.slice(s![0, .., ..]).iter(),
        scan(&|_| 0.0, &mamba),
    );
    assert_bits(
        "h = a*h + b from h0",
        out.slice(s![1, .., ..]).iter(),
        scan(&|p| h0[[p, 0]], &mamba),
    );
    let other = |a: f32, h: f32, b: f32| fmax(a, h) - b;
    assert_bits(
        "h = max(a, h) - b",
        out.slice(s![2, .., ..]).iter(),
        scan(&|_| 1.0, &other),
    );
    // Plain f32 arithmetic: the engine computes each step in fp32.
    assert_bits(
        "h = (h - a) / b",
        out.slice(s![3, .., ..]).iter(),
        scan(&|p| h0[[p, 0]], &|a, h, b| (h - a) / b),
    );
    assert_bits(
        "h = b - (h - a)",
        out.slice(s![4, .., ..]).iter(),
        scan(&|_| 0.5, &|a, h, b| b - (h - a)),
    );
}

// ---------------------------------------------------------------------------------------------
// iota, affine_select, reciprocal (`where` is in tests/pending/where.rs).
// ---------------------------------------------------------------------------------------------

/// An `iota` of an `mgrid!` expression has the grid's whole shape (NKI's dense `nl.mgrid`:
/// `iota(5 + 2 * i_p)` is `[128, 64]`); one of an `arange` axis only that axis' (`[128, 1]`).
#[kernel]
fn iota_calls(
    x: Hbm<f32, 128, 64>,
) -> (
    Hbm<i32, 128, 64>,
    Hbm<f32, 128, 64>,
    Hbm<f32, 128, 64>,
    Hbm<f32, 128, 1>,
) {
    let o1 = ndarray([128, 64], i32, SharedHbm);
    let o2 = ndarray([128, 64], f32, SharedHbm);
    let o3 = ndarray([128, 64], f32, SharedHbm);
    let o4 = ndarray([128, 1], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..64];
    let v = iota(expr = i_f + 64 * i_p, dtype = i32);
    let w = iota(5 + 2 * i_p, f32);
    let z = iota(i_f - 3 * i_p, dtype = f32);
    let col = iota(5 + 2 * arange(128).p(), f32);
    let t = load(x[..]);
    store(o1[..], v);
    store(o2[..], w);
    store(o3[..], z + t);
    store(o4[..], col);
    (o1, o2, o3, o4)
}

#[test]
fn iota_values() {
    let x = Array2::<f32>::zeros((P, 64));
    let (v, w, z, col) = iota_calls::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(
        v,
        Array2::from_shape_fn((P, 64), |(p, f)| (f + 64 * p) as i32)
    );
    assert_eq!(
        w,
        Array2::from_shape_fn((P, 64), |(p, _)| (5 + 2 * p) as f32)
    );
    assert_eq!(
        col,
        Array2::from_shape_fn((P, 1), |(p, _)| (5 + 2 * p) as f32)
    );
    assert_eq!(
        z,
        Array2::from_shape_fn((P, 64), |(p, f)| f as f32 - 3.0 * p as f32)
    );
    assert!(has_instr(iota_calls::KERNEL.program(), "GpSimd", "iota"));
}

/// `t += op(...)` where `op` only overwrites its destination (an iota, batch-norm statistics):
/// the result goes to a tile of its own and one instruction adds it into `t`, as NKI's
/// `t = t + op(...)`; before, the `+=` was silently an overwrite.
#[kernel]
fn accumulate_overwriting_ops(x: Hbm<f32, 128, 64>) -> (Hbm<f32, 128, 64>, Hbm<f32, 128, 6>) {
    let o1 = ndarray([128, 64], f32, SharedHbm);
    let o2 = ndarray([128, 6], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..64];
    let t = load(x[..]);
    t[..] += iota(i_f + 64 * i_p, dtype = f32);
    let s = bn_stats(t);
    s[..] += bn_stats(t);
    store(o1[..], t);
    store(o2[..], s);
    (o1, o2)
}

#[test]
fn accumulating_into_instructions_that_only_overwrite_adds() {
    let x = Array2::from_shape_fn((P, 64), |(p, f)| ((p * 7 + f * 3) % 11) as f32 - 5.0);
    let (t, s) = accumulate_overwriting_ops::host(&mut NeuronCore::default(), x.view()).unwrap();
    let want_t = Array2::from_shape_fn((P, 64), |(p, f)| x[[p, f]] + (f + 64 * p) as f32);
    assert_eq!(t, want_t);
    // bn_stats of one row: count, mean and M2 of its even-indexed elements, then of its odd
    // ones (f64 reference), each doubled by the `+=`.
    for p in 0..P {
        for (half, first) in [(0, 0), (1, 1)] {
            let xs: Vec<f64> = (first..64)
                .step_by(2)
                .map(|f| f64::from(want_t[[p, f]]))
                .collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let m2: f64 = xs.iter().map(|v| (v - mean) * (v - mean)).sum();
            let got = |j: usize| f64::from(s[[p, 3 * half + j]]);
            assert_eq!(got(0), 2.0 * n, "row {p}");
            assert!(
                (got(1) - 2.0 * mean).abs() <= 1e-3 * mean.abs().max(1.0),
                "row {p}"
            );
            assert!((got(2) - 2.0 * m2).abs() <= 1e-4 * m2.max(1.0), "row {p}");
        }
    }
    let listing = accumulate_overwriting_ops::KERNEL.program().to_string();
    assert!(
        !listing.contains("+= iota") && !listing.contains("+= bn_stats"),
        "{listing}"
    );
}

#[kernel]
fn causal(x: Hbm<f32, 256, 256>) -> (Hbm<f32, 256, 256>, Hbm<f32, 128, 128>) {
    let out = ndarray([256, 256], f32, SharedHbm);
    let out2 = ndarray([128, 128], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    for k in affine_range(2) {
        for j in affine_range(2) {
            let t = load(x[[k * 128 + i_p, j * 128 + i_f]]);
            let m = affine_select(
                pred = k * 128 + i_p >= j * 128 + i_f,
                on_true_tile = t,
                on_false_value = -9984.0,
            );
            store(out[[k * 128 + i_p, j * 128 + i_f]], m);
        }
    }
    let u = load(x[[i_p, i_f]]);
    store(out2[..], affine_select(i_p < i_f, u, 0.0));
    (out, out2)
}

#[test]
fn affine_select_causal_mask() {
    let x = rand_f32(Ix2(256, 256), 16, -5.0, 5.0);
    let (out, out2) = causal::host(&mut NeuronCore::default(), x.view()).unwrap();
    let want = Array2::from_shape_fn(
        (256, 256),
        |(i, j)| if i >= j { x[[i, j]] } else { -9984.0 },
    );
    assert_eq!(out, want);
    let want = Array2::from_shape_fn((128, 128), |(i, j)| if i < j { x[[i, j]] } else { 0.0 });
    assert_eq!(out2, want);
}

/// Ordering predicates with every sign of slope along the free axis and the partition axis, and
/// a masked select: each row is a prefix and a suffix (the engine's row-copy path).
#[kernel]
fn slopes(x: Hbm<f32, 128, 256>) -> Hbm<f32, 5, 128, 256> {
    let out = ndarray([5, 128, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    let t = load(x[[i_p, i_f]]);
    let a = affine_select(
        pred = 3 * i_p - 2 * i_f + 5 > 0,
        on_true_tile = t,
        on_false_value = 1.5,
    );
    store(out[[0, i_p, i_f]], a);
    let b = affine_select(
        pred = i_f - i_p < 0,
        on_true_tile = t,
        on_false_value = -0.0,
    );
    store(out[[1, i_p, i_f]], b);
    let c = affine_select(pred = i_p - 64 >= 0, on_true_tile = t, on_false_value = 7.0);
    store(out[[2, i_p, i_f]], c);
    let d = affine_select(
        pred = 100 - i_f <= 0,
        on_true_tile = t,
        on_false_value = -1.0,
    );
    store(out[[3, i_p, i_f]], d);
    let e = zeros([128, 256], f32, Sbuf);
    e[[i_p, i_f]] = affine_select(
        pred = i_f - 2 * i_p >= 0,
        on_true_tile = t,
        on_false_value = 9.0,
        mask = i_f < 200,
    );
    store(out[[4, i_p, i_f]], e);
    out
}

#[test]
fn affine_select_predicates_of_every_slope() {
    let x = rand_f32(Ix2(128, 256), 21, -5.0, 5.0);
    let out = slopes::host(&mut NeuronCore::default(), x.view()).unwrap();
    let (p, f) = (|i: usize| i as i64, |j: usize| j as i64);
    type Pred = fn(i64, i64) -> bool;
    let cases: [(Pred, f32); 4] = [
        (|i, j| 3 * i - 2 * j + 5 > 0, 1.5),
        (|i, j| j - i < 0, -0.0),
        (|i, _| i - 64 >= 0, 7.0),
        (|_, j| 100 - j <= 0, -1.0),
    ];
    for (k, (holds, other)) in cases.iter().enumerate() {
        let w = Array2::from_shape_fn((128, 256), |(i, j)| {
            if holds(p(i), f(j)) { x[[i, j]] } else { *other }
        });
        assert_bits(
            &format!("select {k}"),
            out.slice(s![k, .., ..]).iter(),
            w.iter().copied(),
        );
    }
    let w = Array2::from_shape_fn((128, 256), |(i, j)| match j < 200 {
        true if f(j) - 2 * p(i) >= 0 => x[[i, j]],
        true => 9.0,
        false => 0.0,
    });
    assert_bits(
        "masked select",
        out.slice(s![4, .., ..]).iter(),
        w.iter().copied(),
    );
}

#[kernel]
fn recip(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 2, 128, 512> {
    let out = ndarray([2, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    store(out[[0, 0..128, 0..512]], reciprocal(x));
    store(out[[1, 0..128, 0..512]], reciprocal(data = y, dtype = f32));
    out
}

#[test]
fn reciprocal_is_ieee_division() {
    let a = rand_f32(Ix2(P, F), 17, -20.0, 20.0);
    let mut b = rand_f32(Ix2(P, F), 18, -20.0, 20.0);
    b[[0, 0]] = 0.0;
    b[[0, 1]] = -0.0;
    let out = recip::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    assert_bits(
        "reciprocal(x)",
        out.slice(s![0, .., ..]).iter(),
        a.iter().map(|&x| 1.0 / x),
    );
    assert_bits(
        "reciprocal(y)",
        out.slice(s![1, .., ..]).iter(),
        b.iter().map(|&x| 1.0 / x),
    );
    assert_eq!(out[[1, 0, 0]], f32::INFINITY);
    assert_eq!(out[[1, 0, 1]], f32::NEG_INFINITY);
    assert!(has_instr(recip::KERNEL.program(), "Vector", "reciprocal"));
}

// ---------------------------------------------------------------------------------------------
// bn_stats + bn_aggr.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn batchnorm_stats(
    a: Hbm<f32, 128, 1024>,
    b: Hbm<f32, 128, 300>,
) -> (Hbm<f32, 128, 2>, Hbm<f32, 128, 6>, Hbm<f32, 128, 2>) {
    let o_mv = ndarray([128, 2], f32, SharedHbm);
    let o_st = ndarray([128, 6], f32, SharedHbm);
    let o_mv2 = ndarray([128, 2], f32, SharedHbm);
    let x = load(a[..]);
    let st = ndarray([128, 12], f32, Sbuf);
    st[[0..128, 0..6]] = bn_stats(x[[0..128, 0..512]]);
    st[[0..128, 6..12]] = bn_stats(data = x[[0..128, 512..1024]]);
    let mv = bn_aggr(st);
    store(o_mv[..], mv);
    let y = load(b[..]);
    let st2 = bn_stats(y);
    store(o_st[..], st2);
    store(o_mv2[..], bn_aggr(data = st2));
    (o_mv, o_st, o_mv2)
}

fn mean_var(v: impl Iterator<Item = f32> + Clone) -> (f64, f64, f64) {
    let n = v.clone().count() as f64;
    let mean = v.clone().map(|x| x as f64).sum::<f64>() / n;
    let m2 = v.map(|x| (x as f64 - mean).powi(2)).sum::<f64>();
    (n, mean, m2)
}

#[test]
fn bn_stats_and_bn_aggr_give_mean_and_variance() {
    let a = rand_f32(Ix2(P, 1024), 19, 1.0, 3.0);
    let b = rand_f32(Ix2(P, 300), 20, -2.0, 6.0);
    let (mv, st, mv2) =
        batchnorm_stats::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    for p in 0..P {
        let (n, mean, m2) = mean_var(a.row(p).iter().copied());
        assert_close("bn_aggr mean", [mv[[p, 0]]].iter(), [mean], 1e-6, 0.0);
        assert_close("bn_aggr var", [mv[[p, 1]]].iter(), [m2 / n], 1e-5, 0.0);
        let row = b.row(p);
        let even = row.iter().step_by(2).copied();
        let odd = row.iter().skip(1).step_by(2).copied();
        let (ne, me, m2e) = mean_var(even);
        let (no, mo, m2o) = mean_var(odd);
        assert_eq!(st[[p, 0]] as f64, ne, "even count");
        assert_eq!(st[[p, 3]] as f64, no, "odd count");
        let got = [st[[p, 1]], st[[p, 2]], st[[p, 4]], st[[p, 5]]];
        assert_close("bn_stats", got.iter(), [me, m2e, mo, m2o], 1e-5, 1e-6);
        let (n, mean, m2) = mean_var(row.iter().copied());
        assert_close(
            "bn_aggr of one bn_stats",
            [mv2[[p, 0]], mv2[[p, 1]]].iter(),
            [mean, m2 / n],
            1e-5,
            1e-6,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Transposes.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn transposes(
    a: Hbm<f32, 128, 64>,
    b: Hbm<bf16, 32, 32>,
    c: Hbm<f32, 64, 128>,
    d: Hbm<bf16, 128, 64>,
) -> (
    Hbm<f32, 64, 128>,
    Hbm<bf16, 32, 32>,
    Hbm<f32, 128, 64>,
    Hbm<bf16, 128, 64>,
    Hbm<f32, 128, 64>,
    Hbm<bf16, 64, 128>,
) {
    let o1 = ndarray([64, 128], f32, SharedHbm);
    let o2 = ndarray([32, 32], bf16, SharedHbm);
    let o3 = ndarray([128, 64], f32, SharedHbm);
    let o4 = ndarray([128, 64], bf16, SharedHbm);
    let o5 = ndarray([128, 64], f32, SharedHbm);
    let o6 = ndarray([64, 128], bf16, SharedHbm);
    let x = load(a[..]);
    let t_pe = nc_transpose(x);
    store(o1[..], t_pe);
    let y = load(b[..]);
    let t_ve = nc_transpose(data = y, engine = vector);
    store(o2[..], t_ve);
    let z = load(c[..]);
    let t_nl = transpose(z);
    store(o3[..], t_nl);
    store(o4[..], transpose(z, dtype = bf16));
    store(o5[..], load_transpose2d(c[..]));
    let w = load(d[..]);
    let t_cast = nc_transpose(w, dtype = bf16);
    store(o6[..], t_cast);
    (o1, o2, o3, o4, o5, o6)
}

#[test]
fn transposes_on_tensor_and_vector_engines() {
    let a = rand_f32(Ix2(128, 64), 21, -10.0, 10.0);
    let b = rand_f32(Ix2(32, 32), 22, -10.0, 10.0).mapv(bf16::from_f32);
    let c = rand_f32(Ix2(64, 128), 23, -10.0, 10.0);
    let d = rand_f32(Ix2(128, 64), 24, -10.0, 10.0).mapv(bf16::from_f32);
    let (o1, o2, o3, o4, o5, o6) = transposes::host(
        &mut NeuronCore::default(),
        a.view(),
        b.view(),
        c.view(),
        d.view(),
    )
    .unwrap();
    assert_eq!(o1, a.t());
    assert_eq!(o2, b.t());
    assert_eq!(o3, c.t());
    assert_eq!(o4, c.t().mapv(bf16::from_f32));
    assert_eq!(o5, c.t());
    assert_eq!(o6, d.t());
    let prog = transposes::KERNEL.program();
    assert_eq!(tile(prog, "t_pe"), (DType::F32, vec![64, 128]));
    assert_eq!(tile(prog, "t_ve"), (DType::Bf16, vec![32, 32]));
    assert_eq!(tile(prog, "t_cast").0, DType::Bf16);
    assert!(has_instr(prog, "Tensor", "nc_transpose"), "{prog}");
    assert!(has_instr(prog, "Vector", "nc_transpose"), "{prog}");
    assert!(has_instr(prog, "DMA", "load_transpose2d"), "{prog}");
}

// ---------------------------------------------------------------------------------------------
// dma_copy, broadcast_to, creation, memset, tensor_copy.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn dma_and_broadcast(
    a: Hbm<f32, 128, 512>,
    c: Hbm<f32, 128, 1>,
    r: Hbm<f32, 1, 512>,
    b3: Hbm<f32, 128, 1, 64>,
) -> (
    Hbm<f32, 128, 512>,
    Hbm<f32, 128, 512>,
    Hbm<f32, 128, 512>,
    Hbm<f32, 128, 4, 64>,
) {
    let o1 = ndarray([128, 512], f32, SharedHbm);
    let o2 = ndarray([128, 512], f32, SharedHbm);
    let o3 = ndarray([128, 512], f32, SharedHbm);
    let o4 = ndarray([128, 4, 64], f32, SharedHbm);
    let t = ndarray([128, 512], f32, Sbuf);
    dma_copy(t, a[..]);
    let u = t * 2.0;
    dma_copy(dst = o1[..], src = u);
    let col = load(c[..]);
    store(o2[..], broadcast_to(col, [128, 512]));
    let row = load(r[..]);
    let rows = broadcast_to(src = row, shape = [128, 512]);
    store(o3[..], rows);
    let x3 = load(b3[..]);
    store(o4[..], broadcast_to(x3, [128, 4, 64]));
    (o1, o2, o3, o4)
}

#[test]
fn dma_copy_and_broadcast_to() {
    let a = rand_f32(Ix2(P, F), 25, -10.0, 10.0);
    let c = rand_f32(Ix2(P, 1), 26, -10.0, 10.0);
    let r = rand_f32(Ix2(1, F), 27, -10.0, 10.0);
    let b3 = rand_f32(Ix3(P, 1, 64), 28, -10.0, 10.0);
    let (o1, o2, o3, o4) = dma_and_broadcast::host(
        &mut NeuronCore::default(),
        a.view(),
        c.view(),
        r.view(),
        b3.view(),
    )
    .unwrap();
    assert_eq!(o1, a.mapv(|x| x * 2.0));
    assert_eq!(o2, Array2::from_shape_fn((P, F), |(p, _)| c[[p, 0]]));
    assert_eq!(o3, Array2::from_shape_fn((P, F), |(_, f)| r[[0, f]]));
    for ((p, _, f), &v) in o4.indexed_iter() {
        assert_eq!(v, b3[[p, 0, f]]);
    }
}

#[kernel]
fn creation(
    a: Hbm<f32, 128, 512>,
) -> (
    Hbm<f32, 3, 128, 512>,
    Hbm<bf16, 128, 512>,
    Hbm<f32, 128, 512>,
    Hbm<i32, 128, 64>,
    Hbm<i32, 128, 64>,
    Hbm<f32, 128, 64>,
    Hbm<u8, 128, 64>,
) {
    let o = ndarray([3, 128, 512], f32, SharedHbm);
    let o_ones = ndarray([128, 512], bf16, SharedHbm);
    let o_fl = ndarray([128, 512], f32, SharedHbm);
    let o_fi = ndarray([128, 64], i32, SharedHbm);
    let o_ms = ndarray([128, 64], i32, SharedHbm);
    let o_msg = ndarray([128, 64], f32, SharedHbm);
    let o_z8 = ndarray([128, 64], u8, SharedHbm);
    let x = load(a[..]);
    let z = zeros_like(x);
    let one = ones_like(x, dtype = bf16);
    let f = full([128, 512], 3.5, f32);
    let fl = full_like(x, -2.0);
    let fi = full([128, 64], 7, i32);
    let ms = memset([128, 64], -123456, i32);
    let msg = memset(shape = [128, 64], value = 1.5, dtype = f32, engine = gpsimd);
    let z8 = zeros([128, 64], u8);
    store(o[[0, 0..128, 0..512]], z);
    store(o[[1, 0..128, 0..512]], f);
    store(o[[2, 0..128, 0..512]], x + f);
    store(o_ones[..], one);
    store(o_fl[..], fl);
    store(o_fi[..], fi);
    store(o_ms[..], ms);
    store(o_msg[..], msg);
    store(o_z8[..], z8);
    (o, o_ones, o_fl, o_fi, o_ms, o_msg, o_z8)
}

#[test]
fn creation_and_memset() {
    let a = rand_f32(Ix2(P, F), 29, -10.0, 10.0);
    let (o, ones, fl, fi, ms, msg, z8) =
        creation::host(&mut NeuronCore::default(), a.view()).unwrap();
    assert!(
        o.slice(s![0, .., ..]).iter().all(|v| v.to_bits() == 0),
        "zeros_like"
    );
    assert!(o.slice(s![1, .., ..]).iter().all(|&v| v == 3.5), "full");
    assert_bits(
        "x + full",
        o.slice(s![2, .., ..]).iter(),
        a.iter().map(|&x| x + 3.5),
    );
    assert!(
        ones.iter().all(|&v| v == bf16::ONE),
        "ones_like(dtype = bf16)"
    );
    assert!(fl.iter().all(|&v| v == -2.0), "full_like");
    assert!(fi.iter().all(|&v| v == 7), "full i32");
    assert!(ms.iter().all(|&v| v == -123456), "memset i32");
    assert!(msg.iter().all(|&v| v == 1.5), "memset on gpsimd");
    assert!(z8.iter().all(|&v| v == 0), "zeros u8");
    let prog = creation::KERNEL.program();
    assert_eq!(tile(prog, "one"), (DType::Bf16, vec![128, 512]));
    assert_eq!(tile(prog, "z"), (DType::F32, vec![128, 512]));
    assert!(has_instr(prog, "GpSimd", "memset"), "{prog}");
}

#[kernel]
fn copies(
    a: Hbm<i32, 128, 64>,
    b: Hbm<f32, 128, 64>,
) -> (Hbm<i32, 4, 128, 64>, Hbm<bf16, 128, 64>, Hbm<f16, 128, 64>) {
    let o = ndarray([4, 128, 64], i32, SharedHbm);
    let o_bf = ndarray([128, 64], bf16, SharedHbm);
    let o_h = ndarray([128, 64], f16, SharedHbm);
    let iv = load(a[..]);
    store(
        o[[0, 0..128, 0..64]],
        tensor_copy(src = iv, engine = scalar),
    );
    store(
        o[[1, 0..128, 0..64]],
        tensor_copy(src = iv, engine = vector),
    );
    store(o[[2, 0..128, 0..64]], tensor_copy(iv, engine = gpsimd));
    store(o[[3, 0..128, 0..64]], copy(iv));
    let x = load(b[..]);
    store(o_bf[..], tensor_copy(src = x, dtype = bf16));
    store(o_h[..], copy(x, f16));
    (o, o_bf, o_h)
}

#[test]
fn tensor_copy_scalar_engine_goes_through_fp32() {
    let a = Array2::from_shape_fn((P, 64), |(p, f)| {
        let v = (1 << 24) + 1 + 2 * (p * 64 + f) as i32;
        if f % 2 == 0 { v } else { -v }
    });
    let b = rand_f32(Ix2(P, 64), 30, -1000.0, 1000.0);
    let (o, bf, h) = copies::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    // Odd integers above 2^24 are not f32 values: through fp32 they round to nearest even.
    let through_f32 = a.mapv(|v| v as f32 as i32);
    assert_ne!(through_f32, a);
    assert_eq!(o.slice(s![0, .., ..]), through_f32, "scalar engine");
    assert_eq!(o.slice(s![1, .., ..]), a, "vector engine keeps the bits");
    assert_eq!(o.slice(s![2, .., ..]), a, "gpsimd keeps the bits");
    assert_eq!(o.slice(s![3, .., ..]), a, "copy keeps the bits");
    assert_eq!(bf, b.mapv(bf16::from_f32));
    assert_eq!(h, b.mapv(f16::from_f32));
}

// ---------------------------------------------------------------------------------------------
// nl reductions and composites.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn nl_reductions(
    a: Hbm<f32, 128, 512>,
    q: Hbm<f32, 128, 16>,
    iv: Hbm<i32, 128, 64>,
) -> (
    Hbm<f32, 7, 128, 1>,
    Hbm<bool, 2, 128, 1>,
    Hbm<f32, 128, 1>,
    Hbm<bf16, 128, 1>,
) {
    let o = ndarray([7, 128, 1], f32, SharedHbm);
    let o_all = ndarray([2, 128, 1], bool, SharedHbm);
    let o_imean = ndarray([128, 1], f32, SharedHbm);
    let o_bf = ndarray([128, 1], bf16, SharedHbm);
    let x = load(a[..]);
    let y = load(q[..]);
    let i = load(iv[..]);
    let sm = sum(x, axis = 1);
    store(o[[0, 0..128, 0..1]], sm);
    store(o[[1, 0..128, 0..1]], max(x, axis = 1));
    store(o[[2, 0..128, 0..1]], min(x, 1));
    store(o[[3, 0..128, 0..1]], prod(y, axis = 1));
    store(o[[4, 0..128, 0..1]], mean(x, axis = 1));
    store(o[[5, 0..128, 0..1]], var(x, axis = 1));
    store(o[[6, 0..128, 0..1]], sum(x, axis = 1, keepdims = true));
    let every = all(x > -19.0, axis = 1);
    store(o_all[[0, 0..128, 0..1]], every);
    store(o_all[[1, 0..128, 0..1]], all(y != 0.0, axis = 1));
    let im = mean(i, axis = 1);
    store(o_imean[..], im);
    store(o_bf[..], sum(x, axis = 1, dtype = bf16));
    (o, o_all, o_imean, o_bf)
}

fn nl_reduction_inputs() -> (Array2<f32>, Array2<f32>, Array2<i32>) {
    let mut a = rand_f32(Ix2(P, F), 31, -20.0, 20.0);
    // Odd rows above -19 everywhere, even rows with one element below.
    for ((p, j), x) in a.indexed_iter_mut() {
        if p % 2 == 1 {
            *x = x.max(-18.5);
        } else if j == p {
            *x = -19.5;
        }
    }
    let q = rand_int(Ix2(P, 16), 32, -2, 2);
    let iv = Array2::from_shape_fn((P, 64), |(p, f)| (p as i32 - 64) * 1000 + f as i32);
    (a, q, iv)
}

#[test]
fn nl_sum_max_min_prod_mean_var() {
    let (a, q, iv) = nl_reduction_inputs();
    let (o, _, imean, sbf) =
        nl_reductions::host(&mut NeuronCore::default(), a.view(), q.view(), iv.view()).unwrap();
    let rows = || a.rows().into_iter();
    let sums: Vec<f32> = rows().map(|r| sum16(r.iter().copied())).collect();
    assert_bits("sum", o.slice(s![0, .., 0]).iter(), sums.iter().copied());
    let want = rows().map(|r| fold16(r.iter().copied(), f32::NEG_INFINITY, fmax));
    assert_bits("max", o.slice(s![1, .., 0]).iter(), want);
    let want = rows().map(|r| fold16(r.iter().copied(), f32::INFINITY, fmin));
    assert_bits("min", o.slice(s![2, .., 0]).iter(), want);
    let want = q.rows().into_iter().map(|r| r.iter().product::<f32>());
    assert_bits("prod", o.slice(s![3, .., 0]).iter(), want);
    assert_bits(
        "mean",
        o.slice(s![4, .., 0]).iter(),
        sums.iter().map(|&s| s / 512.0),
    );
    let want = rows().map(|r| {
        let (n, _, m2) = mean_var(r.iter().copied());
        m2 / n
    });
    assert_close("var", o.slice(s![5, .., 0]).iter(), want, 1e-5, 0.0);
    assert_bits(
        "sum keepdims",
        o.slice(s![6, .., 0]).iter(),
        sums.iter().copied(),
    );
    let want = iv
        .rows()
        .into_iter()
        .map(|r| r.iter().map(|&v| v as f64).sum::<f64>() / 64.0);
    assert_close("mean of i32", imean.iter(), want, 1e-7, 0.0);
    let want: Vec<bf16> = sums.iter().map(|&s| bf16::from_f32(s)).collect();
    assert_eq!(
        sbf.iter().copied().collect::<Vec<_>>(),
        want,
        "sum(dtype = bf16)"
    );
    let prog = nl_reductions::KERNEL.program();
    assert_eq!(tile(prog, "every").0, DType::Bool);
    assert_eq!(
        tile(prog, "im").0,
        DType::F32,
        "mean of an integer tile is fp32"
    );
    assert_eq!(tile(prog, "sm").1, vec![128, 1]);
}

#[test]
fn nl_all_gives_a_bool_column() {
    let (a, q, iv) = nl_reduction_inputs();
    let (_, every, _, _) =
        nl_reductions::host(&mut NeuronCore::default(), a.view(), q.view(), iv.view()).unwrap();
    let want = a
        .rows()
        .into_iter()
        .map(|r| Bool::from(r.iter().all(|&x| x > -19.0)));
    assert_eq!(
        every.slice(s![0, .., 0]).to_vec(),
        want.collect::<Vec<_>>(),
        "all(x > -19)"
    );
    let want = q
        .rows()
        .into_iter()
        .map(|r| Bool::from(r.iter().all(|&x| x != 0.0)));
    assert_eq!(
        every.slice(s![1, .., 0]).to_vec(),
        want.collect::<Vec<_>>(),
        "all(y != 0)"
    );
}

#[kernel]
fn composites(
    a: Hbm<f32, 128, 512>,
    w: Hbm<f32, 128, 512>,
    wr: Hbm<f32, 1, 512>,
) -> Hbm<f32, 3, 128, 512> {
    let out = ndarray([3, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let wt = load(w[..]);
    let wrow = load(wr[..]);
    store(out[[0, 0..128, 0..512]], softmax(x, axis = 1));
    store(out[[1, 0..128, 0..512]], rms_norm(x, wt, axis = 1, n = 512));
    store(
        out[[2, 0..128, 0..512]],
        rms_norm(x = x, w = wrow, axis = 1, n = 512, epsilon = 1e-3),
    );
    out
}

#[test]
fn softmax_and_rms_norm() {
    let a = rand_f32(Ix2(P, F), 33, -4.0, 4.0);
    let w = rand_f32(Ix2(P, F), 34, 0.5, 1.5);
    let wr = rand_f32(Ix2(1, F), 35, 0.5, 1.5);
    let out = composites::host(&mut NeuronCore::default(), a.view(), w.view(), wr.view()).unwrap();
    check_softmax(&a, &out);
    for p in 0..P {
        let ms = a.row(p).iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / 512.0;
        let wrows = wr.broadcast((P, F)).unwrap().to_owned();
        for (k, eps, wt) in [(1, 1e-6, &w), (2, 1e-3, &wrows)] {
            let (xr, wr) = (a.row(p), wt.row(p));
            let want = xr
                .iter()
                .zip(wr)
                .map(|(&x, &w)| x as f64 / (ms + eps).sqrt() * w as f64);
            assert_close("rms_norm", out.slice(s![k, p, ..]).iter(), want, 1e-5, 0.0);
        }
    }
}

fn check_softmax(a: &Array2<f32>, out: &nki::ndarray::Array3<f32>) {
    for p in 0..P {
        let row = a.row(p);
        let m = row.iter().fold(f64::MIN, |m, &x| m.max(x as f64));
        let s: f64 = row.iter().map(|&x| (x as f64 - m).exp()).sum();
        let want = row.iter().map(|&x| (x as f64 - m).exp() / s);
        assert_close("softmax", out.slice(s![0, p, ..]).iter(), want, 1e-5, 1e-9);
    }
}

#[kernel]
fn softmax_only(a: Hbm<f32, 128, 512>) -> Hbm<f32, 1, 128, 512> {
    let out = ndarray([1, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    store(out[[0, 0..128, 0..512]], softmax(x = x, axis = 1));
    out
}

#[test]
fn softmax_rows() {
    let a = rand_f32(Ix2(P, F), 33, -4.0, 4.0);
    let out = softmax_only::host(&mut NeuronCore::default(), a.view()).unwrap();
    check_softmax(&a, &out);
}

// ---------------------------------------------------------------------------------------------
// Trn2-only forms: tensor_scalar on the Scalar engine, non-add reductions of activation.
// ---------------------------------------------------------------------------------------------

#[kernel(target = trn2)]
fn trn2_forms(a: Hbm<f32, 128, 512>) -> (Hbm<f32, 2, 128, 512>, Hbm<f32, 128, 1>) {
    let out = ndarray([2, 128, 512], f32, SharedHbm);
    let o_m = ndarray([128, 1], f32, SharedHbm);
    let x = load(a[..]);
    let y = tensor_scalar(
        data = x,
        op0 = multiply,
        operand0 = 3.0,
        op1 = add,
        operand1 = -1.0,
        engine = scalar,
    );
    store(out[[0, 0..128, 0..512]], y);
    let m = ndarray([128, 1], f32, Sbuf);
    let e = activation(op = exp, data = x, reduce_op = maximum, reduce_res = m);
    store(out[[1, 0..128, 0..512]], e);
    store(o_m[..], m);
    (out, o_m)
}

#[test]
fn trn2_scalar_engine_tensor_scalar_and_activation_max_reduction() {
    let a = rand_f32(Ix2(P, F), 50, -3.0, 3.0);
    let mut core = NeuronCore::new(Target::Trn2);
    let (out, m) = trn2_forms::host(&mut core, a.view()).unwrap();
    let want = a.iter().map(|&x| x as f64 * 3.0 - 1.0);
    assert_close(
        "3x - 1 on the Scalar engine",
        out.slice(s![0, .., ..]).iter(),
        want,
        1e-6,
        1e-6,
    );
    let want = a.iter().map(|&x| (x as f64).exp());
    assert_close("exp", out.slice(s![1, .., ..]).iter(), want, 1e-6, 0.0);
    let want = a
        .rows()
        .into_iter()
        .map(|r| r.iter().fold(f64::MIN, |m, &x| m.max((x as f64).exp())));
    assert_close("max of exp", m.iter(), want, 1e-6, 0.0);
    let prog = trn2_forms::KERNEL.program();
    assert!(has_instr(prog, "Scalar", "tensor_scalar"), "{prog}");
}

/// NKI's select-and-scatter index: `iota(3 * w.y + w.z)` of a four-axis `mgrid` has the grid's
/// whole shape, each window numbering its 3 × 3 positions.
#[kernel]
fn dense_mgrid_iota(x: Hbm<f32, 128, 4>) -> Hbm<u32, 128, 4, 3, 3> {
    let out = ndarray([128, 4, 3, 3], u32, SharedHbm);
    let w = mgrid![0..128, 0..4, 0..3, 0..3];
    let linear = iota(3 * w.y + w.z, dtype = u32);
    store(out[..], linear);
    let _ = x.dtype;
    out
}

#[test]
fn an_iota_of_a_dense_mgrid_has_the_grids_shape() {
    let x = Array2::<f32>::zeros((P, 4));
    let out = dense_mgrid_iota::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(out.dim(), (P, 4, 3, 3));
    for ((_, _, a, b), &v) in out.indexed_iter() {
        assert_eq!(v as usize, 3 * a + b);
    }
}

/// `tensor_copy_predicated`: `src` into `dst` where the predicate is nonzero (zero with
/// `reverse_pred`), the rest of `dst` as it was.
#[kernel]
fn copies_predicated(
    a: Hbm<f32, 128, 64>,
    b: Hbm<f32, 128, 64>,
    m: Hbm<f32, 128, 64>,
) -> (Hbm<f32, 128, 64>, Hbm<f32, 128, 64>) {
    let o1 = ndarray([128, 64], f32, SharedHbm);
    let o2 = ndarray([128, 64], f32, SharedHbm);
    let src = load(a[..]);
    let pred = load(m[..]);
    let d1 = load(b[..]);
    tensor_copy_predicated(src = src, dst = d1, predicate = pred);
    let d2 = load(b[..]);
    // By position, NKI 0.6's order: the destination first.
    tensor_copy_predicated(d2, src, pred, reverse_pred = true);
    store(o1[..], d1);
    store(o2[..], d2);
    (o1, o2)
}

#[test]
fn tensor_copy_predicated_copies_where_the_predicate_picks() {
    let a = Array2::from_shape_fn((P, 64), |(p, f)| (p * 64 + f) as f32);
    let b = Array2::from_shape_fn((P, 64), |(p, f)| -((p * 64 + f) as f32) - 1.0);
    let m = Array2::from_shape_fn((P, 64), |(p, f)| ((p + 3 * f) % 5 == 0) as u8 as f32);
    let (o1, o2) =
        copies_predicated::host(&mut NeuronCore::default(), a.view(), b.view(), m.view()).unwrap();
    for ((p, f), &v) in o1.indexed_iter() {
        let want = if m[[p, f]] != 0.0 {
            a[[p, f]]
        } else {
            b[[p, f]]
        };
        assert_eq!(v, want, "[{p}, {f}]");
        let want = if m[[p, f]] == 0.0 {
            a[[p, f]]
        } else {
            b[[p, f]]
        };
        assert_eq!(o2[[p, f]], want, "reverse [{p}, {f}]");
    }
}

/// `tensor_partition_reduce`: `add`, `maximum` and `minimum` over the partitions of a
/// `[128, 300]` tile (three column blocks, the last ragged).
#[kernel]
fn partition_reductions(
    x: Hbm<f32, 128, 300>,
) -> (Hbm<f32, 1, 300>, Hbm<f32, 1, 300>, Hbm<f32, 1, 300>) {
    let s = ndarray([1, 300], f32, SharedHbm);
    let hi = ndarray([1, 300], f32, SharedHbm);
    let lo = ndarray([1, 300], f32, SharedHbm);
    let t = load(x[..]);
    store(s[..], tensor_partition_reduce(op = add, data = t));
    store(hi[..], tensor_partition_reduce(maximum, t));
    store(lo[..], tensor_partition_reduce(minimum, t, dtype = f32));
    (s, hi, lo)
}

#[test]
fn tensor_partition_reduce_combines_the_partitions() {
    // Small integers: every sum is exact in fp32, whatever the order.
    let x = Array2::from_shape_fn((P, 300), |(p, f)| ((p * 31 + f * 7) % 23) as f32 - 11.0);
    let (s, hi, lo) = partition_reductions::host(&mut NeuronCore::default(), x.view()).unwrap();
    for f in 0..300 {
        let col = x.column(f);
        assert_eq!(s[[0, f]], col.sum(), "sum [{f}]");
        assert_eq!(
            hi[[0, f]],
            col.fold(f32::MIN, |a, &b| a.max(b)),
            "max [{f}]"
        );
        assert_eq!(
            lo[[0, f]],
            col.fold(f32::MAX, |a, &b| a.min(b)),
            "min [{f}]"
        );
    }
}
