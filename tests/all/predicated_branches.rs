//! `if` on loop indices (NKI's `if (i < n_tile_q) & causal_mask:` in flash attention): both
//! branches are lowered, each instruction predicated on the condition or its negation, so that
//! it runs or is skipped whole per iteration; against plain loops, with a matmul accumulation
//! group and a TensorE transpose inside the branches.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// Column block `i` of `xt` [128, N] is `a_i` [128, 128]. The first two row blocks of `prod`
/// are `a_iᵀ · w`, the others `a_iᵀ`; the row blocks of `scaled` in the first half of `N` are
/// `3·a_iᵀ`, the others `a_iᵀ`.
#[kernel]
fn branches_on_loop_indices(
    xt: Hbm<f32, 128, N>,
    w: Hbm<f32, 128, 128>,
) -> (Hbm<f32, N, 128>, Hbm<f32, N, 128>) {
    let prod = ndarray([N, 128], f32, SharedHbm);
    let scaled = ndarray([N, 128], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..128];
    let wt = load(w[..]);
    for i in affine_range(N / 128) {
        let a = load(xt[[ip, i * 128 + jf]]);
        let r = ndarray([128, 128], f32, Sbuf);
        if i < 2 {
            let acc = zeros([128, 128], f32, Psum);
            acc += nc_matmul(a, wt);
            r[..] = copy(acc);
        } else {
            r[..] = nc_transpose(a);
        }
        store(prod[[i * 128 + ip, jf]], r);
        let s = ndarray([128, 128], f32, Sbuf);
        s[..] = nc_transpose(a);
        if (2 * i < N / 128) & true {
            s[..] = multiply(s, 3.0);
        }
        store(scaled[[i * 128 + ip, jf]], s);
    }
    (prod, scaled)
}

#[test]
fn each_branch_runs_in_the_iterations_its_condition_picks() {
    for n in [256usize, 512, 768] {
        let xt = rand_int(Ix2(128, n), n as u64, -4, 4);
        let w = rand_int(Ix2(128, 128), 3, -4, 4);
        let mut core = NeuronCore::default();
        let (prod, scaled) =
            branches_on_loop_indices::host(&mut core, xt.view(), w.view()).unwrap();
        let blocks = n / 128;
        let mut want_prod = Array2::<f64>::zeros((n, 128));
        let mut want_scaled = Array2::<f64>::zeros((n, 128));
        for r in 0..n {
            let i = r / 128;
            for c in 0..128 {
                // a_iᵀ[r % 128, c] = xt[c, i·128 + r % 128].
                let at = f64::from(xt[[c, r]]);
                want_prod[[r, c]] = if i < 2 {
                    (0..128)
                        .map(|k| f64::from(xt[[k, r]]) * f64::from(w[[k, c]]))
                        .sum()
                } else {
                    at
                };
                want_scaled[[r, c]] = if 2 * i < blocks { 3.0 * at } else { at };
            }
        }
        for ((r, c), &v) in prod.indexed_iter() {
            assert_eq!(f64::from(v), want_prod[[r, c]], "N={n} prod [{r}, {c}]");
        }
        for ((r, c), &v) in scaled.indexed_iter() {
            assert_eq!(f64::from(v), want_scaled[[r, c]], "N={n} scaled [{r}, {c}]");
        }
    }
}

#[test]
fn a_strict_launch_and_the_timing_model_follow_the_predicates() {
    use nki::timing::{Mode, Timing};
    let n = 512;
    let xt = DeviceTensor::<f32>::zeros(&[128, n]).unwrap();
    let w = DeviceTensor::<f32>::zeros(&[128, 128]).unwrap();
    let mut prod = DeviceTensor::<f32>::zeros(&[n, 128]).unwrap();
    let mut scaled = DeviceTensor::<f32>::zeros(&[n, 128]).unwrap();
    let args = [xt.arg(), w.arg()];
    let mut outs = [prod.arg_mut(), scaled.arg_mut()];
    let bound = branches_on_loop_indices::KERNEL
        .bind(&args, &mut outs)
        .unwrap();
    NeuronCore::default().execute_strict(bound).unwrap();
    // Two of the four iterations run the matmul.
    let s = Timing::new()
        .mode(Mode::TimingOnly)
        .run(
            &mut NeuronCore::default(),
            &branches_on_loop_indices::KERNEL,
            &args,
            &mut outs,
        )
        .unwrap();
    let matmuls: u64 = s
        .profile()
        .opcodes
        .iter()
        .filter(|o| o.opcode == nki::program::Opcode::Matmul)
        .map(|o| o.count)
        .sum();
    assert_eq!(matmuls, 2);
}

/// NKI's `affine_range(start, stop)` to a symbolic end: the sum of column blocks `1, 2, …`
/// of `x` (`affine_range(1, N / 128)`), and the blocks `3, 4, …` scaled by 2
/// (`sequential_range(3, N / 128)`), each accumulated in an SBUF tile.
#[kernel]
fn blocks_from_a_start(x: Hbm<f32, 128, N>) -> (Hbm<f32, 128, 128>, Hbm<f32, 128, 128>) {
    let from_one = ndarray([128, 128], f32, SharedHbm);
    let odd = ndarray([128, 128], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..128];
    let acc = zeros([128, 128], f32, Sbuf);
    for k in affine_range(1, N / 128) {
        let t = load(x[[ip, k * 128 + jf]]);
        acc[..] = add(acc, t);
    }
    store(from_one[..], acc);
    let acc2 = zeros([128, 128], f32, Sbuf);
    for k in sequential_range(3, N / 128) {
        let t = load(x[[ip, k * 128 + jf]]);
        acc2[..] = add(acc2, multiply(t, 2.0));
    }
    store(odd[..], acc2);
    (from_one, odd)
}

#[test]
fn loops_from_a_start_to_a_symbolic_end_run_the_iterations_of_python_range() {
    for n in [128usize, 256, 384, 512, 1024, 1152] {
        let x = rand_int(Ix2(128, n), n as u64 + 7, -8, 8);
        let mut core = NeuronCore::default();
        let (from_one, odd) = blocks_from_a_start::host(&mut core, x.view()).unwrap();
        let blocks = n / 128;
        for p in 0..128 {
            for c in 0..128 {
                let sum = |ks: Vec<usize>, scale: f64| -> f64 {
                    ks.into_iter()
                        .map(|k| scale * f64::from(x[[p, k * 128 + c]]))
                        .sum()
                };
                let want_one = sum((1..blocks).collect(), 1.0);
                let want_odd = sum((3..blocks).collect(), 2.0);
                assert_eq!(f64::from(from_one[[p, c]]), want_one, "n {n} [{p}, {c}]");
                assert_eq!(f64::from(odd[[p, c]]), want_odd, "n {n} [{p}, {c}]");
            }
        }
    }
}
