//! Inputs that must give a clean result or a typed error, never a panic or an abort: kernel
//! sources with legal but unusual tokens, and launches whose outputs cannot exist on this host.

use nki::prelude::*;

/// Empty statements and parameters named like the expansion's own locals compile and run.
#[kernel]
fn unusual_names(
    core: Hbm<f32, 128, 64>,
    inputs: Hbm<f32, 128, 64>,
    checked: Hbm<f32, 128, 64>,
    grid: Hbm<f32, 128, 64>,
    out0: Hbm<f32, 128, 64>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..64];
    let a = load(core[[ip, jf]]) + load(inputs[[ip, jf]]);
    let b = load(checked[[ip, jf]]) + load(grid[[ip, jf]]);
    store(out[[ip, jf]], a + b + load(out0[[ip, jf]]));
    out
}

/// An output `[N, 512]` sized by an input that may hold no elements at all (`M = 0`).
#[kernel]
fn rows_of_ones(x: Hbm<f32, N, M>) -> Hbm<f32, N, 512> {
    let out = ndarray([N, 512], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    for i in affine_range(N / 128) {
        let t = full([128, 512], 1.0, f32, Sbuf);
        store(out[[i * 128 + ip, jf]], t);
    }
    out
}

/// An output `[N, N]`, whose element count overflows for a large `N`.
#[kernel]
fn square(x: Hbm<f32, N, M>) -> Hbm<f32, N, N> {
    let out = ndarray([N, N], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..128];
    let t = full([128, 128], 1.0, f32, Sbuf);
    store(out[[ip, jf]], t);
    out
}

#[test]
fn legal_but_unusual_kernel_sources_compile_and_run() {
    let xs: Vec<DeviceTensor<f32>> = (0..5)
        .map(|k| {
            let a = nki::ndarray::Array2::from_shape_fn((128, 64), |(p, f)| {
                (p * 64 + f) as f32 * 10f32.powi(k)
            });
            DeviceTensor::from_array(&a).unwrap()
        })
        .collect();
    let mut core = NeuronCore::default();
    let got = unusual_names(&mut core, &xs[0], &xs[1], &xs[2], &xs[3], &xs[4]).unwrap();
    for (i, &g) in got.as_slice().iter().enumerate() {
        let v = i as f32;
        let want = ((v + v * 10.0) + (v * 100.0 + v * 1000.0)) + v * 10000.0;
        assert_eq!(g, want, "element {i}");
    }
}

#[test]
fn an_output_the_host_cannot_allocate_is_an_error() {
    // N = 2^39 rows of 512 f32: 2^50 bytes. The input holds no elements.
    let x = DeviceTensor::<f32>::zeros(&[1 << 39, 0]).unwrap();
    let mut core = NeuronCore::default();
    let err = rows_of_ones(&mut core, &x).unwrap_err();
    assert_eq!(err, LaunchError::Allocation { bytes: 1 << 50 }, "{err}");
    let view = nki::ndarray::Array2::<f32>::zeros((1 << 39, 0));
    let err = rows_of_ones::host(&mut core, view.view()).unwrap_err();
    assert_eq!(err, LaunchError::Allocation { bytes: 1 << 50 }, "{err}");
}

#[test]
fn an_output_whose_size_overflows_is_a_shape_error() {
    let x = DeviceTensor::<f32>::zeros(&[1 << 39, 0]).unwrap();
    let mut core = NeuronCore::default();
    let err = square(&mut core, &x).unwrap_err();
    assert!(matches!(err, LaunchError::Shape(_)), "{err:?}");
}
