use nki::ndarray::Array2;
use nki::prelude::*;

#[kernel]
fn elementwise(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let s = x + y;
    let m = maximum(s, x * 2.0);
    let e = exp(m - 3.0);
    store(out[..], e);
    out
}

#[kernel]
fn softmax_rows(x: Hbm<f32, N, 256>) -> Hbm<f32, N, 256> {
    let out = ndarray([N, 256], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..256];
    for k in affine_range((N + 127) / 128) {
        let t = load(x[[k * 128 + i_p, i_f]], mask = k * 128 + i_p < N);
        let s = softmax(t, axis = 1, mask = k * 128 + i_p < N);
        store(out[[k * 128 + i_p, i_f]], s, mask = k * 128 + i_p < N);
    }
    out
}

#[test]
fn smoke() {
    let mut core = NeuronCore::default();
    let a = Array2::from_shape_fn((128, 512), |(i, j)| (i as f32 - j as f32) * 0.01);
    let b = Array2::from_shape_fn((128, 512), |(i, j)| (i * j % 7) as f32 * 0.1);
    let out = elementwise::host(&mut core, a.view(), b.view()).unwrap();
    for ((o, x), y) in out.iter().zip(&a).zip(&b) {
        let want = ((x + y).max(x * 2.0) as f64 - 3.0).exp();
        assert!((*o as f64 - want).abs() <= want * 1e-6, "{o} vs {want}");
    }
    println!("{}", softmax_rows::KERNEL.program());
    let x = Array2::from_shape_fn((300, 256), |(i, j)| ((i * 7 + j * 3) % 11) as f32 * 0.3);
    let out = softmax_rows::host(&mut core, x.view()).unwrap();
    for r in 0..300 {
        let row = x.row(r);
        let m = row.iter().cloned().fold(f32::MIN, f32::max) as f64;
        let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
        for c in 0..256 {
            let want = (row[c] as f64 - m).exp() / s;
            assert!(
                (out[[r, c]] as f64 - want).abs() < 1e-6,
                "({r},{c}) {} vs {want}",
                out[[r, c]]
            );
        }
    }
}
