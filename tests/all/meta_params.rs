//! Meta-parameters: a kernel with `const` parameters compiled once per instantiation listed in
//! its attribute, each a kernel of its own, all listed in the kernel's module.

use nki::MetaValue;
use nki::ndarray::Array2;
use nki::prelude::*;

/// `out = x · SCALE` (or `x · SCALE + 1` when `SHIFT`), in blocks of `BLOCK` 128-column tiles.
#[kernel(
    scale_by_2_in_1s(BLOCK = 1, SCALE = 2, SHIFT = false),
    scale_by_3_in_2s(BLOCK = 2, SCALE = 3, SHIFT = true),
    scale_by_5_in_4s(BLOCK = 4, SCALE = 5, SHIFT = false)
)]
pub fn blocked_scale<const BLOCK: usize, const SCALE: i32, const SHIFT: bool>(
    x: Hbm<f32, 128, N>,
) -> Hbm<f32, 128, N> {
    let out = ndarray([128, N], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..128];
    for b in affine_range(N / (BLOCK * 128)) {
        for t in static_range(BLOCK) {
            let col = (b * BLOCK + t) * 128;
            let tile = load(x[[i_p, col + i_f]]);
            let y = tile * SCALE;
            let y = if SHIFT { y + 1.0 } else { y };
            store(out[[i_p, col + i_f]], y);
        }
    }
    out
}

#[test]
fn each_instantiation_is_a_kernel() {
    let x = Array2::from_shape_fn((128, 1024), |(p, f)| (p as f32) - (f as f32) * 0.5);
    let mut core = NeuronCore::default();
    let a = scale_by_2_in_1s::host(&mut core, x.view()).unwrap();
    let b = scale_by_3_in_2s::host(&mut core, x.view()).unwrap();
    let c = scale_by_5_in_4s::host(&mut core, x.view()).unwrap();
    assert_eq!(a, x.mapv(|v| v * 2.0));
    assert_eq!(b, x.mapv(|v| v * 3.0 + 1.0));
    assert_eq!(c, x.mapv(|v| v * 5.0));
    // The divisibility each block size implies is a launch constraint of its instantiation.
    let ragged = Array2::<f32>::zeros((128, 256));
    assert!(scale_by_5_in_4s::host(&mut core, ragged.view()).is_err());
    assert!(scale_by_3_in_2s::host(&mut core, ragged.view()).is_ok());
}

#[test]
fn the_kernels_module_lists_its_instantiations() {
    let all = &blocked_scale::INSTANCES;
    let names: Vec<&str> = all.iter().map(|i| i.name).collect();
    assert_eq!(
        names,
        ["scale_by_2_in_1s", "scale_by_3_in_2s", "scale_by_5_in_4s"]
    );
    assert_eq!(all[1].value("BLOCK"), Some(MetaValue::Int(2)));
    assert_eq!(all[1].value("SHIFT"), Some(MetaValue::Bool(true)));
    assert_eq!(
        all[2].to_string(),
        "scale_by_5_in_4s(BLOCK = 4, SCALE = 5, SHIFT = false)"
    );
    assert!(std::ptr::eq(all[0].kernel, &scale_by_2_in_1s::KERNEL));
    // Each program is its own: the unrolled block is as long as BLOCK.
    let loads = |i: usize| {
        let p = all[i].kernel.program();
        p.instrs().iter().filter(|x| x.mnemonic() == "load").count()
    };
    assert_eq!((loads(0), loads(1), loads(2)), (1, 2, 4));
}

/// Row sums plus `EPS`, rows ragged: the row length `D` is a meta-parameter, so the tiles'
/// free size (and the input's second dimension) are fixed in each instantiation.
#[kernel(row_sums_256(D = 256, EPS = 0.5), row_sums_640(D = 640, EPS = -1.25))]
pub fn row_sums<const D: usize, const EPS: f32>(x: Hbm<f32, N, D>) -> Hbm<f32, N, 1> {
    let out = ndarray([N, 1], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..D];
    let i_c = arange(1).x();
    for k in affine_range((N + 127) / 128) {
        let rows = k * 128 + i_p < N;
        let t = load(x[[k * 128 + i_p, i_f]], mask = rows);
        let s = sum(t, axis = 1, keepdims = true, mask = rows);
        let s = add(s, EPS, mask = rows);
        store(out[[k * 128 + i_p, i_c]], s, mask = rows);
    }
    out
}

#[test]
fn meta_parameters_fix_signature_dimensions_and_give_floats() {
    let mut core = NeuronCore::default();
    for (d, eps) in [(256usize, 0.5f64), (640, -1.25)] {
        let x = Array2::from_shape_fn((200, d), |(r, c)| ((r * 7 + c) % 13) as f32 - 6.0);
        let out = match d {
            256 => row_sums_256::host(&mut core, x.view()),
            _ => row_sums_640::host(&mut core, x.view()),
        }
        .unwrap();
        for (r, row) in x.rows().into_iter().enumerate() {
            let want = row.iter().map(|&v| f64::from(v)).sum::<f64>() + eps;
            assert_eq!(f64::from(out[[r, 0]]), want, "D = {d}, row {r}");
        }
    }
    // The other instantiation's row length is refused at launch.
    let x = Array2::<f32>::zeros((10, 256));
    assert!(row_sums_640::host(&mut core, x.view()).is_err());
    assert_eq!(
        row_sums::INSTANCES[1]
            .value("EPS")
            .and_then(MetaValue::as_f64),
        Some(-1.25)
    );
}

/// Sums adjacent column pairs: the output's width is `{ W / 2 }`, computed from the
/// meta-parameter.
#[kernel(pairs_8(W = 8), pairs_512(W = 512))]
pub fn pair_sums<const W: usize>(x: Hbm<f32, 128, W>) -> Hbm<f32, 128, { W / 2 }> {
    let out = ndarray([128, W / 2], f32, SharedHbm);
    let (i_p, i_h, i_t) = mgrid![0..128, 0..W / 2, 0..2];
    let t = load(x[[i_p, 2 * i_h + i_t]]);
    let (o_p, o_h) = mgrid![0..128, 0..W / 2];
    store(out[[o_p, o_h]], sum(t, axis = 2));
    out
}

#[test]
fn output_dimensions_computed_from_meta_parameters() {
    let x = Array2::from_shape_fn((128, 8), |(p, f)| (p * 8 + f) as f32);
    let out = pairs_8::host(&mut NeuronCore::default(), x.view()).unwrap();
    assert_eq!(out.dim(), (128, 4));
    for ((p, h), &v) in out.indexed_iter() {
        assert_eq!(v, x[[p, 2 * h]] + x[[p, 2 * h + 1]]);
    }
    assert_eq!(pairs_512::KERNEL.program().outputs()[0].shape.len(), 2);
}
