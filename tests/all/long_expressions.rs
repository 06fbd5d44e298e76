//! Long expressions compile: a sum of thousands of terms is a syntax tree thousands of levels
//! deep, which once overflowed the compiler's stack inside `#[kernel]`.

use nki::ndarray::Array2;
use nki::prelude::*;

/// Calls `$m! { tokens }` with the tokens in brackets repeated 2^(number of `_`) times.
macro_rules! doubled {
    ([] $m:ident [$($t:tt)*]) => { $m! { $($t)* } };
    ([_ $($n:tt)*] $m:ident [$($t:tt)*]) => { doubled! { [$($n)*] $m [$($t)* $($t)*] } };
}

/// `long_sum`: its load reads columns `0..(1 + 1 + ... + 1 - 5056)`, a sum of 5,120 terms.
macro_rules! long_sum_kernel {
    ($($ones:tt)*) => {
        #[kernel]
        fn long_sum(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[[0..128, 0..($($ones)* 0 - 5056)]]);
            store(out[[0..128, 0..64]], t + 1.0);
            out
        }
    };
}

// 5 × 2^10 = 5,120 terms `1 +`.
doubled! { [_ _ _ _ _ _ _ _ _ _] long_sum_kernel [1 + 1 + 1 + 1 + 1 +] }

#[test]
fn a_sum_of_5120_terms_compiles_and_runs() {
    let x = Array2::from_shape_fn((128, 64), |(p, f)| (p * 64 + f) as f32);
    let mut core = NeuronCore::default();
    let got = long_sum::host(&mut core, x.view()).unwrap();
    assert_eq!(got, x.mapv(|v| v + 1.0));
}
