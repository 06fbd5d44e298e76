//! `cumsum` of nki-samples' `contributed/neuron-team-kernels/cumsum.py`, ported with NKI's
//! names, loops, tile sizes and masks, against `np.cumsum` over the last axis written as plain
//! f64 loops.
//!
//! What differs: Rust's spelling; `y` is the kernel's result (NKI passes it in), allocated with
//! `x`'s shape and stored through the same 2-D reshape as `x` (NKI indexes `y` with two indices,
//! which holds for a 2-D `y` only); `axis`, `p_size`, `f_size` and `acc_dtype` take their
//! defaults (the last axis, 128, 2048, `x`'s dtype); `div_ceil` and `n_elts` of `common.py`
//! are written out.

use crate::common;

use nki::ndarray::{Array3, Ix3};
use nki::prelude::*;

#[kernel]
fn cumsum(x: Hbm<f32, A, B, N>) -> Hbm<f32, A, B, N> {
    let y = ndarray(x.shape, x.dtype, SharedHbm);

    let x_shape = x.shape;
    let shape_2d = (x_shape[0] * x_shape[1], x_shape[2]);
    let x = x.reshape(shape_2d);
    let y_2d = y.reshape(shape_2d);

    let pmax = tile_size.pmax;
    let f_tile_size = 2048;

    let (pi, fi) = mgrid![0..pmax, 0..f_tile_size];

    let acc_dtype = x.dtype;

    let ones = ones((pmax, f_tile_size), acc_dtype);

    for i in affine_range((shape_2d[0] + pmax - 1) / pmax) {
        let n_f_tiles = (shape_2d[1] + f_tile_size - 1) / f_tile_size;
        let init = zeros((pmax, 1), acc_dtype);

        for j in sequential_range(n_f_tiles) {
            let mask = (i * pmax + pi < shape_2d[0]) & (j * f_tile_size + fi < shape_2d[1]);
            let data = load(x[[i * pmax + pi, j * f_tile_size + fi]], mask = mask);

            let result = tensor_tensor_scan(
                data0 = ones,
                data1 = data,
                initial = init,
                op0 = multiply,
                op1 = add,
                dtype = acc_dtype,
                mask = mask,
            );

            store(
                y_2d[[i * pmax + pi, j * f_tile_size + fi]],
                result,
                mask = mask,
            );

            // update init for the next iteration
            init[[.., ..]] = copy(result[[.., f_tile_size - 1]], mask = j + 1 < n_f_tiles);
        }
    }
    y
}

#[test]
fn cumsum_is_np_cumsum_over_the_last_axis() {
    // 3 × 50 = 150 rows (a full tile of 128 and 22), 5000 columns (2048, 2048 and 904).
    for (a, b, n) in [(3, 50, 5000), (1, 128, 2048), (2, 3, 17)] {
        let x = common::rand_f32(Ix3(a, b, n), (a * b + n) as u64, -1.0, 1.0);
        let mut core = NeuronCore::default();
        let y = cumsum::host(&mut core, x.view()).unwrap();
        assert_eq!(y.shape(), &[a, b, n]);
        // np.cumsum in f64, and the sum of magnitudes that bounds an f32 running sum's error.
        let mut want = Array3::<f64>::zeros((a, b, n));
        let mut size = Array3::<f64>::zeros((a, b, n));
        for ((i, r), _) in x
            .indexed_iter()
            .filter(|((_, _, c), _)| *c == 0)
            .map(|((i, r, _), v)| ((i, r), v))
        {
            let (mut s, mut m) = (0.0, 0.0);
            for c in 0..n {
                s += f64::from(x[[i, r, c]]);
                m += f64::from(x[[i, r, c]]).abs();
                want[[i, r, c]] = s;
                size[[i, r, c]] = m;
            }
        }
        for ((i, r, c), &w) in want.indexed_iter() {
            let got = f64::from(y[[i, r, c]]);
            let bound = (c + 1) as f64 * f64::from(f32::EPSILON) * size[[i, r, c]];
            assert!(
                (got - w).abs() <= bound,
                "{a}x{b}x{n} [{i}, {r}, {c}]: {got} vs {w}"
            );
        }
    }
}
