//! HBM tensors a kernel creates for itself: `shared_hbm` scratch it does not return,
//! `private_hbm` (`hbm`) scratch of each instance and iteration, against plain-loop
//! references, plainly, strictly and timed; strict mode refusing a read of scratch before it
//! is written and instances racing on shared scratch.

use crate::common;

use common::*;
use nki::LaunchError;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// Doubles `x` through a round trip in `shared_hbm` scratch, in two row halves.
#[kernel]
fn through_shared_scratch(x: Hbm<f32, 128, 256>) -> Hbm<f32, 128, 256> {
    let out = ndarray([128, 256], f32, SharedHbm);
    let spill = ndarray([2, 64, 256], f32, SharedHbm);
    for h in affine_range(2) {
        let t = load(x[[h * 64 + arange(64).p(), arange(256).x()]]);
        store(spill[h], t);
    }
    for h in affine_range(2) {
        let back = load(spill[h]);
        store(out[[h * 64 + arange(64).p(), arange(256).x()]], back + back);
    }
    out
}

fn plain(strict: bool) -> NeuronCore {
    NeuronCore::default().with_strict(strict)
}

#[test]
fn shared_scratch_round_trip_matches_plain_loops() {
    let x = rand_f32(Ix2(128, 256), 1, -4.0, 4.0);
    let want = x.mapv(|v| v + v);
    for strict in [false, true] {
        let got = through_shared_scratch::host(&mut plain(strict), x.view()).unwrap();
        assert_eq!(got, want, "strict {strict}");
    }
    let p = through_shared_scratch::KERNEL.program();
    assert_eq!(p.outputs().len(), 1);
    assert_eq!(p.allocated().len(), 1);
    assert_eq!(p.allocated()[0].role, nki::program::TensorRole::Scratch);
}

/// The round trip at 8 MiB a tensor: the stores into the scratch and the output are large
/// enough to go with non-temporal stores (`engines::access::Mem::Streamed`), and the loads
/// after them, on either host thread, read what they wrote.
#[kernel]
fn through_large_scratch(x: Hbm<f32, 128, 16384>) -> Hbm<f32, 128, 16384> {
    let out = ndarray([128, 16384], f32, SharedHbm);
    let spill = ndarray([2, 64, 16384], f32, SharedHbm);
    for h in affine_range(2) {
        let t = load(x[[h * 64 + arange(64).p(), arange(16384).x()]]);
        store(spill[h], t);
    }
    for h in affine_range(2) {
        let back = load(spill[1 - h]);
        store(
            out[[(1 - h) * 64 + arange(64).p(), arange(16384).x()]],
            back + back,
        );
    }
    out
}

#[test]
fn a_large_scratch_round_trip_matches_plain_loops() {
    let x = rand_f32(Ix2(128, 16384), 3, -4.0, 4.0);
    let want = x.mapv(|v| v + v);
    for (threads, strict) in [(1, false), (2, false), (2, true)] {
        let mut core = plain(strict).with_host_threads(threads);
        let got = through_large_scratch::host(&mut core, x.view()).unwrap();
        assert!(got == want, "{threads} threads, strict {strict}");
    }
}

/// Each instance keeps its row block of `x` in `private_hbm` (an instance's own), scaled by 3,
/// and reads it back; declared inside a loop, the tensor is also each iteration's own.
#[kernel]
fn through_private_scratch(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    let mine = ndarray([128, 64], f32, PrivateHbm);
    let rows = program_id(0) * 128 + arange(128).p();
    let t = load(x[[rows, arange(64).x()]]);
    store(mine, t * 3.0);
    let mut acc = zeros([128, 64], f32, Sbuf);
    for k in affine_range(4) {
        let per_iteration = ndarray([128, 64], f32, hbm);
        store(per_iteration, load(mine) + 1.0);
        acc += load(per_iteration);
    }
    store(out[[rows, arange(64).x()]], acc);
    out
}

#[test]
fn private_scratch_per_instance_and_iteration_matches_plain_loops() {
    let n = 512;
    let x = rand_int(Ix2(n, 64), 2, -8, 8);
    // acc = Σ_k (3x + 1), each partial sum exact in f32.
    let want = x.mapv(|v| {
        let mut acc = 0.0f32;
        for _ in 0..4 {
            acc += v * 3.0 + 1.0;
        }
        acc
    });
    for strict in [false, true] {
        for threads in [1, 2] {
            let mut core = plain(strict).with_host_threads(threads);
            let got = through_private_scratch::grid([n / 128])
                .host(&mut core, x.view())
                .unwrap();
            assert_eq!(got, want, "strict {strict}, {threads} host threads");
        }
    }
}

#[test]
fn a_timed_launch_counts_scratch_traffic() {
    let mut core = plain(false);
    let schedule = nki::timing::Timing::new()
        .run_shapes(&mut core, &through_shared_scratch::KERNEL, &[&[128, 256]])
        .unwrap();
    // x in, out back, and the round trip through scratch: 128 × 256 f32 each way, 4 times.
    let bytes = 4 * 128 * 256 * 4;
    let profile = schedule.profile();
    assert_eq!(profile.dma_bytes, bytes, "{profile:?}");
}

/// Loads scratch rows 64..128 that nothing wrote.
#[kernel]
fn reads_unwritten_scratch(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let spill = ndarray([128, 64], f32, SharedHbm);
    store(
        spill[[arange(64).p(), arange(64).x()]],
        load(x[[arange(64).p(), arange(64).x()]]),
    );
    store(out, load(spill));
    out
}

/// Every instance stores its block into the same `shared_hbm` scratch rows, then reads them.
#[kernel]
fn instances_share_scratch(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
    let out = ndarray([N, 64], f32, SharedHbm);
    let spill = ndarray([128, 64], f32, SharedHbm);
    let rows = program_id(0) * 128 + arange(128).p();
    store(spill, load(x[[rows, arange(64).x()]]));
    store(out[[rows, arange(64).x()]], load(spill));
    out
}

fn strict_exec_error(r: Result<Array2<f32>, LaunchError>) -> nki::ExecError {
    match r {
        Err(LaunchError::Exec(e)) => e,
        other => panic!("expected a strict refusal, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn strict_mode_refuses_a_read_of_scratch_before_it_is_written() {
    let x = rand_f32(Ix2(128, 64), 4, -1.0, 1.0);
    let e = strict_exec_error(reads_unwritten_scratch::host(&mut plain(true), x.view()));
    // The load of unwritten scratch rows makes the tile's rows undefined; their store is
    // refused, naming the load.
    assert_eq!(e.mnemonic, "store", "{e}");
    assert!(
        e.what.contains("(load, line") && e.what.contains("no instruction of this launch wrote"),
        "{e}"
    );
    // A plain launch runs it (the rows hold what the allocation held: zeros).
    let got = reads_unwritten_scratch::host(&mut plain(false), x.view()).unwrap();
    for ((p, f), &g) in got.indexed_iter() {
        let want = if p < 64 { x[[p, f]] } else { 0.0 };
        assert_eq!(g, want, "({p}, {f})");
    }
}

#[test]
fn strict_mode_flags_instances_racing_on_shared_scratch() {
    let x = rand_f32(Ix2(256, 64), 5, -1.0, 1.0);
    let e = strict_exec_error(instances_share_scratch::grid([2]).host(&mut plain(true), x.view()));
    assert!(
        e.what.contains("shared_hbm scratch `spill`") && e.what.contains("program ids"),
        "{e}"
    );
}

/// Adds a constant row table (written as a literal, converted to bf16) and a `const` array of
/// the kernel (f32) to `x`'s two rows.
#[kernel]
fn adds_constants(x: Hbm<f32, 2, 4>) -> Hbm<f32, 2, 4> {
    const OFFSETS: [[f32; 4]; 2] = [[0.5, -1.0, 2.0, 1e-3], [4.0, 3.0, -2.5, 1.0 / 3.0]];
    let out = ndarray([2, 4], f32, SharedHbm);
    let table = shared_constant([[1, 2, 3, 4], [5, 6, 7, 300]], dtype = bf16);
    let offsets = shared_constant(OFFSETS);
    let t = load(x) + load(table, dtype = f32) + load(offsets);
    store(out, t);
    out
}

/// `x` through TensorE against the shared identity: `identity.T @ x`, with the identity as
/// `shared_identity_matrix` and as the tutorials write it,
/// `nl.shared_constant(np.identity(128, dtype=np.int8), dtype=x.dtype)`.
#[kernel]
fn through_identity(x: Hbm<bf16, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let identity = shared_identity_matrix(128, dtype = bf16);
    let tutorials = shared_constant(np::identity(128, dtype = np::int8), dtype = x.dtype);
    let product = nc_matmul(stationary = load(identity), moving = load(x));
    let again = nc_matmul(stationary = load(tutorials), moving = copy(product, bf16));
    store(out, copy(again, f32));
    out
}

#[test]
fn constants_hold_their_values_converted_to_their_dtype() {
    let x = rand_f32(Ix2(2, 4), 6, -1.0, 1.0);
    let table = [[1.0f32, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 300.0]];
    let offsets = [[0.5f32, -1.0, 2.0, 1e-3], [4.0, 3.0, -2.5, 1.0 / 3.0]];
    for strict in [false, true] {
        let got = adds_constants::host(&mut plain(strict), x.view()).unwrap();
        for ((p, f), &g) in got.indexed_iter() {
            // 300 is exact in bf16 (8 significant bits: 300 = 1.00101100 × 2^8).
            let want = x[[p, f]] + table[p][f] + offsets[p][f];
            assert_eq!(g, want, "({p}, {f}) strict {strict}");
        }
    }
    let p = adds_constants::KERNEL.program();
    let roles: Vec<_> = p.allocated().iter().map(|t| (t.name, t.dtype)).collect();
    assert_eq!(
        roles,
        [
            ("table", nki::program::DType::Bf16),
            ("offsets", nki::program::DType::F32)
        ]
    );
}

#[test]
fn the_shared_identity_matrix_reproduces_its_operand() {
    let x = rand_f32(Ix2(128, 64), 7, -2.0, 2.0).mapv(bf16::from_f32);
    for strict in [false, true] {
        let got = through_identity::host(&mut plain(strict), x.view()).unwrap();
        for ((p, f), &g) in got.indexed_iter() {
            assert_eq!(g, x[[p, f]].to_f32(), "({p}, {f}) strict {strict}");
        }
    }
}
