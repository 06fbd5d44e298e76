//! `/` and `divide` of integer tiles are Python's true division (an f32 quotient), so NKI's
//! `resize_nearest` index `nl.floor(output_pos_iota / out_w, dtype=nl.int32)` floors the
//! quotient itself; against Rust's integer floor division, at several widths.

use nki::prelude::*;

/// `floor(i / W)` and `i / W` of the column index `i` of a `[128, 2048]` grid.
#[kernel(div_by_38(W = 38), div_by_7(W = 7), div_by_512(W = 512))]
fn rows_of_positions<const W: usize>(
    x: Hbm<f32, 128, 2048>,
) -> (Hbm<i32, 128, 2048>, Hbm<f32, 128, 2048>) {
    let rows = ndarray([128, 2048], i32, SharedHbm);
    let quotients = ndarray([128, 2048], f32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..2048];
    let pos = iota(i_f + 0 * i_p, dtype = i32);
    let q = pos / W;
    store(rows[..], floor(q, dtype = i32));
    store(quotients[..], q);
    let _ = x.dtype;
    (rows, quotients)
}

#[test]
fn an_integer_quotient_is_floored_not_rounded_first() {
    let x = nki::ndarray::Array2::<f32>::zeros((128, 2048));
    let mut core = NeuronCore::default();
    let runs = [
        (38usize, div_by_38::host(&mut core, x.view()).unwrap()),
        (7, div_by_7::host(&mut core, x.view()).unwrap()),
        (512, div_by_512::host(&mut core, x.view()).unwrap()),
    ];
    for (w, (rows, quotients)) in runs {
        for ((p, i), &r) in rows.indexed_iter() {
            assert_eq!(r as usize, i / w, "W={w} [{p}, {i}]");
            // The quotient is fp32's correctly rounded i / w.
            assert_eq!(
                quotients[[p, i]],
                (i as f32) / (w as f32),
                "W={w} [{p}, {i}]"
            );
        }
    }
}
