//! The kernels `docs/language.md` shows, compiled and run as written, against f64 references.

use crate::doc_kernels;

use doc_kernels::{elementwise, softmax_nl, softmax_rows};
use nki::ndarray::Array2;
use nki::prelude::*;

#[test]
fn elementwise_operators_and_functions() {
    let a = Array2::from_shape_fn((128, 512), |(i, j)| (i as f32 - j as f32) * 0.01);
    let b = Array2::from_shape_fn((128, 512), |(i, j)| (i * j % 7) as f32 * 0.1);
    let out = elementwise::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    for ((o, x), y) in out.iter().zip(&a).zip(&b) {
        let want = ((x + y).max(x * 2.0) as f64 - 3.0).exp();
        assert!((*o as f64 - want).abs() <= want * 1e-6, "{o} vs {want}");
    }
}

#[test]
fn ragged_row_softmax_as_the_docs_write_it() {
    let mnemonics = |p: &nki::program::Program<'_>| -> Vec<&'static str> {
        p.instrs().iter().map(|i| i.mnemonic()).collect()
    };
    assert_eq!(
        mnemonics(softmax_rows::KERNEL.program()),
        mnemonics(softmax_nl::KERNEL.program()),
        "softmax() lowers to the ISA calls the docs show"
    );
    let mut core = NeuronCore::default();
    for n in [1, 127, 128, 300] {
        let x = Array2::from_shape_fn((n, 256), |(i, j)| ((i * 7 + j * 3) % 11) as f32 * 0.3 - 1.0);
        let out = softmax_rows::host(&mut core, x.view()).unwrap();
        assert_eq!(
            out,
            softmax_nl::host(&mut core, x.view()).unwrap(),
            "N = {n}"
        );
        for (r, row) in x.rows().into_iter().enumerate() {
            let m = row.iter().map(|&v| v as f64).fold(f64::MIN, f64::max);
            let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
            for (c, &v) in row.iter().enumerate() {
                let want = (v as f64 - m).exp() / s;
                let got = out[[r, c]] as f64;
                assert!(
                    (got - want).abs() <= 1e-6 * want.max(1e-3),
                    "N = {n} ({r}, {c}): {got} vs {want}"
                );
            }
        }
    }
}
