use nki::prelude::*;

// A bound written as a sum of 65,536 terms: past what `#[kernel]` expands (a spanned error
// and the kernel's fallback item, not a crash of the compiler).
macro_rules! doubled {
    ([] $m:ident [$($t:tt)*]) => { $m! { $($t)* } };
    ([_ $($n:tt)*] $m:ident [$($t:tt)*]) => { doubled! { [$($n)*] $m [$($t)* $($t)*] } };
}

macro_rules! long_sum_kernel {
    ($($ones:tt)*) => {
        #[kernel]
        fn long_sum(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[[0..128, 0..($($ones)* 0)]]);
            store(out[[0..128, 0..64]], t);
            out
        }
    };
}

doubled! { [_ _ _ _ _ _ _ _ _ _ _ _ _ _ _] long_sum_kernel [1 + 1 +] }

fn main() {
    let _ = long_sum::KERNEL.program();
}
