//! NKI 2.26's keyword arguments (the SDK 2.26.0 API signatures, `nki.language` and `nki.isa`):
//! each function called with every argument it takes, by name, compiles and launches strictly.
//! What each computes is tested with its operation; here the kernels store `x + x`, checked
//! against the input.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// Every `nki.language` function of SDK 2.26.0 that takes keyword arguments, called with all
/// of them by name.
#[kernel]
fn language_keywords(x_in: Hbm<f32, 128, 64>, i_in: Hbm<i32, 128, 1>) -> Hbm<f32, 128, 64> {
    let out = ndarray(
        shape = [128, 64],
        dtype = f32,
        buffer = SharedHbm,
        name = "out",
    );
    let (ip, jf) = mgrid![0..128, 0..64];
    let t = load(src = x_in[[ip, jf]], mask = ip < 128, dtype = f32);
    let u = copy(src = t, mask = ip < 128, dtype = f32);
    let a1 = abs(x = t, dtype = f32, mask = ip < 128);
    let a2 = add(x = t, y = u, dtype = f32, mask = ip < 128);
    let a3 = exp(x = t, dtype = f32, mask = ip < 128);
    let a4 = sum(
        x = t,
        axis = 1,
        dtype = f32,
        mask = ip < 128,
        keepdims = true,
    );
    let a5 = max(
        x = t,
        axis = [1],
        dtype = f32,
        mask = ip < 128,
        keepdims = false,
    );
    let a6 = mean(
        x = t,
        axis = 1,
        dtype = f32,
        mask = ip < 128,
        keepdims = true,
    );
    let a7 = var(x = t, axis = 1, dtype = f32, mask = ip < 128);
    let a8 = all(x = t, axis = 1, dtype = f32, mask = ip < 128);
    let a9 = prod(
        x = t,
        axis = 1,
        dtype = f32,
        mask = ip < 128,
        keepdims = true,
    );
    let b1 = r#where(condition = t, x = t, y = u, dtype = f32, mask = ip < 128);
    let b2 = softmax(
        x = t,
        axis = 1,
        dtype = f32,
        compute_dtype = f32,
        mask = ip < 128,
    );
    let w = load(x_in[[0..1, 0..64]]);
    let b3 = rms_norm(
        x = t,
        w = w,
        axis = 1,
        n = 64,
        epsilon = 1e-6,
        dtype = f32,
        compute_dtype = f32,
        mask = ip < 128,
    );
    let b4 = dropout(x = t, rate = 0.5, dtype = f32, mask = ip < 128);
    let b5 = negative(x = t, dtype = f32, mask = ip < 128);
    let b6 = reciprocal(x = t, dtype = f32, mask = ip < 128);
    let b7 = transpose(x = t[[0..64, 0..64]], dtype = f32, mask = ip < 64);
    let b8 = power(x = t, y = 2.0, dtype = f32, mask = ip < 128);
    let b9 = r#mod(x = t, y = 2.0, dtype = f32, mask = ip < 128);
    let c1 = fmod(x = t, y = 2.0, dtype = f32, mask = ip < 128);
    let c2 = full(
        shape = [128, 64],
        fill_value = 1.0,
        dtype = f32,
        buffer = Sbuf,
        name = "c2",
    );
    let c3 = ones(shape = [128, 64], dtype = f32, buffer = Sbuf, name = "c3");
    let c4 = zeros_like(a = t, dtype = f32, buffer = Sbuf, name = "c4");
    let c5 = empty_like(a = t, dtype = f32, buffer = Sbuf, name = "c5");
    let c6 = broadcast_to(src = w, shape = [128, 64]);
    let idx = load(i_in[..]);
    let c7 = gather_flattened(data = t, indices = idx, mask = ip < 128, dtype = f32);
    let c8 = rand(shape = [128, 64], dtype = f32);
    let c9 = load_transpose2d(src = x_in[[0..64, 0..64]], mask = ip < 64, dtype = f32);
    for k in affine_range(2) {
        let d1 = matmul(
            x = t[[0..128, 0..64]],
            y = u,
            transpose_x = true,
            mask = k < 1,
        );
    }
    let d2 = left_shift(x = idx, y = 1, dtype = i32, mask = ip < 128);
    let d3 = logical_not(x = t, dtype = f32, mask = ip < 128);
    let d4 = equal(x = t, y = u, dtype = f32, mask = ip < 128);
    store(dst = out[[ip, jf]], value = a2, mask = ip < 128);
    out
}

/// Every `nki.isa` function of SDK 2.26.0, called with all its keyword arguments by name
/// (compiled for Trn2, where each exists).
#[kernel(target = trn2)]
fn isa_keywords(x_in: Hbm<f32, 128, 64>, i_in: Hbm<i32, 128, 1>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..64];
    let t = load(x_in[..]);
    let u = copy(t);
    let col = load(x_in[[0..128, 0..1]]);
    let idx = load(i_in[..]);
    let s = ds(start = 0, size = 64);
    let pid = program_id(axis = 0);
    let seed = load(i_in[[0..1, 0..1]]);
    random_seed(seed = seed);
    let c = shared_constant(constant = [[1.0, 2.0]], dtype = f32);
    let e = shared_identity_matrix(n = 128, dtype = f32);
    let m = finfo(dtype = f32).min;
    let r1 = ndarray([128, 1], f32, Sbuf);
    let a1 = activation(
        op = exp,
        data = t,
        bias = col,
        scale = 1.0,
        reduce_op = add,
        reduce_res = r1,
        reduce_cmd = reduce_cmd.idle,
        mask = ip < 128,
        dtype = f32,
    );
    let r2 = ndarray([128, 1], f32, Sbuf);
    let a2 = activation_reduce(
        op = exp,
        data = t,
        reduce_op = add,
        reduce_res = r2,
        bias = col,
        scale = 1.0,
        mask = ip < 128,
        dtype = f32,
    );
    let a3 = affine_select(
        pred = ip > jf,
        on_true_tile = t,
        on_false_value = 0.0,
        mask = ip < 128,
        dtype = f32,
    );
    let a4 = bn_stats(data = t, mask = ip < 128, dtype = f32);
    let a5 = bn_aggr(data = a4, mask = ip < 128, dtype = f32);
    let a6 = dropout(data = t, prob = 0.5, mask = ip < 128, dtype = f32);
    let a7 = iota(expr = ip + jf, dtype = i32, mask = ip < 128);
    let a8 = max8(src = t, mask = ip < 128, dtype = f32);
    let a9 = memset(
        shape = [128, 64],
        value = 1.0,
        dtype = f32,
        mask = ip < 128,
        engine = vector,
    );
    let b1 = nc_find_index8(data = t, vals = a8, mask = ip < 128, dtype = u32);
    let b0 = ndarray([128, 8], u32, Sbuf);
    let b2 = nc_match_replace8(
        data = t,
        vals = a8,
        imm = 0.0,
        dst_idx = b0,
        mask = ip < 128,
        dtype = f32,
    );
    let b3 = nc_transpose(
        data = t[[0..64, 0..64]],
        mask = ip < 64,
        dtype = f32,
        engine = tensor,
    );
    let b4 = reciprocal(data = t, dtype = f32, mask = ip < 128);
    let b5 = scalar_tensor_tensor(
        data = t,
        op0 = add,
        operand0 = 1.0,
        op1 = multiply,
        operand1 = u,
        reverse0 = false,
        reverse1 = false,
        dtype = f32,
        mask = ip < 128,
    );
    let d = ndarray([128, 64], f32, Sbuf);
    let pr = ndarray([128, 64], u8, Sbuf);
    pr[..] = copy(memset([128, 64], 1, u8));
    let r3 = ndarray([128, 1], f32, Sbuf);
    select_reduce(
        dst = d,
        predicate = pr,
        on_true = t,
        on_false = 0.0,
        reduce_res = r3,
        reduce_cmd = reset_reduce,
        reduce_op = maximum,
        reverse_pred = false,
        mask = ip < 128,
        dtype = f32,
    );
    let b6 = tensor_copy(src = t, mask = ip < 128, dtype = f32, engine = scalar);
    tensor_copy_predicated(
        src = t,
        dst = d,
        predicate = pr,
        reverse_pred = true,
        mask = ip < 128,
        dtype = f32,
    );
    let b7 = tensor_partition_reduce(op = add, data = t, dtype = f32);
    let b8 = tensor_reduce(
        op = add,
        data = t,
        axis = 1,
        mask = ip < 128,
        dtype = f32,
        negate = true,
        keepdims = true,
    );
    let b9 = tensor_scalar(
        data = t,
        op0 = add,
        operand0 = 1.0,
        reverse0 = false,
        op1 = multiply,
        operand1 = col,
        reverse1 = true,
        dtype = f32,
        mask = ip < 128,
        engine = vector,
    );
    let r4 = ndarray([128, 1], f32, Sbuf);
    let c1 = tensor_scalar_reduce(
        data = t,
        op0 = add,
        operand0 = 1.0,
        reduce_op = add,
        reduce_res = r4,
        reverse0 = false,
        dtype = f32,
        mask = ip < 128,
    );
    let c2 = tensor_tensor(
        data1 = t,
        data2 = u,
        op = add,
        dtype = f32,
        mask = ip < 128,
        engine = vector,
    );
    let c3 = tensor_tensor_scan(
        data0 = t,
        data1 = u,
        initial = 0.0,
        op0 = multiply,
        op1 = add,
        reverse0 = false,
        reverse1 = false,
        dtype = f32,
        mask = ip < 128,
    );
    let c4 = dma_transpose(
        src = x_in[[0..64, 0..64]],
        axes = [1, 0],
        mask = ip < 64,
        dtype = f32,
    );
    let c5 = gather_flattened(data = t, indices = idx, mask = ip < 128, dtype = f32);
    let ver = get_nc_version();
    store(out[..], c2);
    out
}

#[test]
fn every_keyword_argument_of_nki_compiles_and_runs() {
    let x = rand_f32(Ix2(128, 64), 21, -1.0, 1.0);
    let idx = Array2::from_shape_fn((128, 1), |(p, _)| (p % 64) as i32);
    let want = x.mapv(|v| v + v);
    let mut core = NeuronCore::default().with_strict(true);
    let out = language_keywords::host(&mut core, x.view(), idx.view()).unwrap();
    assert_eq!(out, want);
    let mut core = NeuronCore::new(Target::Trn2).with_strict(true);
    let out = isa_keywords::host(&mut core, x.view(), idx.view()).unwrap();
    assert_eq!(out, want);
}
