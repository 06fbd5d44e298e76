//! Helpers: functions of tiles written once, called from several kernels, inlined at compile
//! time (no HBM round trip between them), possibly calling each other, defined anywhere in
//! the crate.

use nki::ndarray::Array2;
use nki::prelude::*;

mod activations {
    use nki::prelude::*;

    /// `gelu(x + bias)`, `bias` a `[P, 1]` column.
    #[helper]
    pub fn bias_gelu(x: Tile, bias: Tile) -> Tile {
        let y = x + bias;
        gelu(y)
    }
}

use activations::bias_gelu;

/// Loads the `k`-th 128-row block of `x`.
#[helper]
fn load_block(x: Tensor, k: Index) -> Tile {
    let (i_p, i_f) = mgrid![0..128, 0..512];
    load(x[[k * 128 + i_p, i_f]])
}

/// A helper calling helpers, defined after the kernels that use it.
#[kernel]
fn gelu_rows(x: Hbm<f32, N, 512>, b: Hbm<f32, N, 1>) -> Hbm<f32, N, 512> {
    let out = ndarray([N, 512], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..512];
    let i_c = arange(1).x();
    for k in affine_range(N / 128) {
        let bias = load(b[[k * 128 + i_p, i_c]]);
        let y = block_gelu(x, k, bias);
        store(out[[k * 128 + i_p, i_f]], y);
    }
    out
}

/// The same helper in another kernel: a plain `[128, 512]` tile.
#[kernel]
fn gelu_tile(x: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 1>) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let t = load(x[..]);
    let bias = load(b[..]);
    store(out[..], bias_gelu(t, bias));
    out
}

#[helper]
fn block_gelu(x: Tensor, k: Index, bias: Tile) -> Tile {
    let t = load_block(x, k);
    bias_gelu(t, bias = bias)
}

fn gelu_ref(v: f64) -> f64 {
    // 0.5·v·(1 + erf(v/√2)), with erf from its Abramowitz–Stegun-free series: use the
    // relation to the normal CDF through libm-free `erf` below.
    0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2))
}

/// erf by its Taylor series (|x| < 3) or its asymptotic complement: ample for f32 tolerances.
fn erf(x: f64) -> f64 {
    if x.abs() > 3.0 {
        return x.signum() * (1.0 - (-x * x).exp() / (x.abs() * std::f64::consts::PI.sqrt()));
    }
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..200 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn helpers_are_inlined_into_every_kernel_that_calls_them() {
    let x = Array2::from_shape_fn((256, 512), |(r, c)| {
        ((r * 31 + c * 17) % 97) as f32 / 16.0 - 3.0
    });
    let b = Array2::from_shape_fn((256, 1), |(r, _)| (r % 7) as f32 * 0.25 - 0.75);
    let mut core = NeuronCore::default();
    let rows = gelu_rows::host(&mut core, x.view(), b.view()).unwrap();
    let tile = gelu_tile::host(
        &mut core,
        x.slice(nki::ndarray::s![..128, ..]),
        b.slice(nki::ndarray::s![..128, ..]),
    )
    .unwrap();
    for ((r, c), &v) in rows.indexed_iter() {
        let want = gelu_ref(f64::from(x[[r, c]] + b[[r, 0]]));
        assert!(
            (f64::from(v) - want).abs() <= 1e-6 * want.abs().max(1e-3),
            "({r}, {c}): {v} vs {want}"
        );
        if r < 128 {
            assert_eq!(tile[[r, c]].to_bits(), v.to_bits());
        }
    }
    // Inlined: the same instructions as written out by hand, no call in the program.
    let listing = gelu_rows::KERNEL.program().to_string();
    assert!(listing.contains("activation"), "{listing}");
    assert_eq!(
        gelu_tile::KERNEL.program().instrs().len(),
        5,
        "{}",
        gelu_tile::KERNEL.program()
    );
}
