//! The getting-started exp kernel, against f64, at ragged row counts.

use crate::examples::exp;

use exp::{common, exp_f32_512, reference};
use nki::ndarray::Ix2;
use nki::prelude::*;

#[test]
fn exp_of_any_number_of_rows() {
    let mut core = NeuronCore::default();
    for n in [1, 128, 300] {
        let x = common::uniform(Ix2(n, 512), 4, -20.0, 20.0);
        let got = exp_f32_512::host(&mut core, x.mapv(|v| v as f32).view()).unwrap();
        let (want, bound) = reference(&x.mapv(|v| f64::from(v as f32)), 2f64.powi(-24));
        let c = common::compare(
            got.iter().map(|&g| f64::from(g)),
            want.iter().copied(),
            bound.iter().copied(),
        );
        assert!(c.within, "N = {n}: {c}");
    }
}
