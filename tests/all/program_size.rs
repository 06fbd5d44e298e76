//! Loops stay loops: a program's size does not grow with the tensor shapes.

use nki::prelude::*;

macro_rules! tiled_kernel {
    ($name:ident, $k:literal, $m:literal, $n:literal) => {
        #[kernel]
        fn $name(lhs_t: Hbm<bf16, $k, $m>, rhs: Hbm<bf16, $k, $n>) -> Hbm<bf16, $m, $n> {
            let result = ndarray([$m, $n], bf16, SharedHbm);
            for m in affine_range($m / 128) {
                for n in affine_range($n / 512) {
                    let acc = zeros([128, 512], f32, Psum);
                    for k in affine_range($k / 128) {
                        let a = load(lhs_t[[k * 128..(k + 1) * 128, m * 128..(m + 1) * 128]]);
                        let b = load(rhs[[k * 128..(k + 1) * 128, n * 512..(n + 1) * 512]]);
                        acc += nc_matmul(a, b);
                    }
                    store(
                        result[[m * 128..(m + 1) * 128, n * 512..(n + 1) * 512]],
                        copy(acc, bf16),
                    );
                }
            }
            result
        }
    };
}

tiled_kernel!(tiled_1024, 1024, 1024, 1024);
tiled_kernel!(tiled_8192, 8192, 8192, 8192);

#[test]
fn tiled_matmul_program_size_is_independent_of_shape() {
    let small = tiled_1024::KERNEL.program();
    let large = tiled_8192::KERNEL.program();
    assert_eq!(small.instrs().len(), large.instrs().len());
    // 3 loops (a begin and an end each), memset, 2 loads, matmul, copy, store.
    assert_eq!(small.instrs().len(), 12);
    // Same instructions apart from trip counts.
    let ops =
        |p: &nki::program::Program<'_>| p.instrs().iter().map(|i| i.mnemonic()).collect::<Vec<_>>();
    assert_eq!(ops(small), ops(large));
}

#[test]
fn static_range_unrolls() {
    #[kernel]
    fn unrolled(x: Hbm<f32, 128, 2048>) -> Hbm<f32, 128, 2048> {
        let out = ndarray([128, 2048], f32, SharedHbm);
        for j in static_range(4) {
            let t = load(x[[0..128, j * 512..(j + 1) * 512]]);
            store(out[[0..128, j * 512..(j + 1) * 512]], t);
        }
        out
    }
    // No loop instructions: four load/store pairs.
    let p = unrolled::KERNEL.program();
    assert_eq!(p.instrs().len(), 8);
    assert!(
        p.instrs()
            .iter()
            .all(|i| i.opcode != nki::program::Opcode::LoopBegin)
    );
}
