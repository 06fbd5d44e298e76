//! The launch path allocates nothing but the outputs: a counting global allocator proves it.
//! This file holds one test so that no other test allocates while it counts.

// The example kernels, compiled here as modules; each example brings its own copy of
// `examples/common`, which is why the same file is loaded twice.
#[path = "../examples/matmul_basic.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod basic;
#[allow(dead_code)]
mod doc_kernels;
#[path = "../examples/tensor_add.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod spmd;
#[path = "../examples/matmul_tiled.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod tiled;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use basic::{common, matmul_basic};
use nki::prelude::*;
use tiled::matmul_tiled;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers every operation to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn count<R>(f: impl FnOnce() -> R) -> (R, usize) {
    ALLOCATIONS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let r = f();
    COUNTING.store(false, Ordering::SeqCst);
    (r, ALLOCATIONS.load(Ordering::SeqCst))
}

#[test]
fn launches_allocate_only_their_outputs() {
    // The plain launch path (a strict launch keeps a shadow of the memories).
    let mut core = NeuronCore::default().with_strict(false);
    let mut a = DeviceTensor::from_array(&common::random_bf16(128, 128, 1)).unwrap();
    let mut b = DeviceTensor::from_array(&common::random_bf16(128, 512, 2)).unwrap();
    let mut out = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
    let mut big_out = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
    // Warm up: a first launch may create host state lazily (the thread pool's engines). The
    // memory of everything a later launch fills (the packings of input operands, the worker
    // thread's too, which it first fills whenever it first gets its vCPU in time to take its
    // half of a matmul) is allocated with the core, so one launch of each form is enough.
    matmul_basic::launch_into(&mut core, &a, &b, &mut out).unwrap();
    matmul_tiled::launch_into(&mut core, &a, &b, &mut big_out).unwrap();
    drop(matmul_basic(&mut core, &a, &b).unwrap());

    let (r, n) = count(|| matmul_basic::launch_into(&mut core, &a, &b, &mut out));
    r.unwrap();
    assert_eq!(
        n, 0,
        "destination-passing launch of the seed kernel allocated {n} times"
    );

    let (r, n) = count(|| matmul_tiled::launch_into(&mut core, &a, &b, &mut big_out));
    r.unwrap();
    assert_eq!(
        n, 0,
        "destination-passing launch of the tiled kernel allocated {n} times"
    );

    // Inputs marked written before each launch: their operands are packed anew, into the
    // slots of the packings of their earlier versions.
    for round in 0..3 {
        let (r, n) = count(|| {
            a.as_mut_slice();
            b.as_mut_slice();
            matmul_basic::launch_into(&mut core, &a, &b, &mut out)?;
            matmul_tiled::launch_into(&mut core, &a, &b, &mut big_out)
        });
        r.unwrap();
        assert_eq!(
            n, 0,
            "launches of inputs written in between allocated {n} times (round {round})"
        );
    }

    let (r, n) = count(|| matmul_basic(&mut core, &a, &b));
    let fresh = r.unwrap();
    assert_eq!(
        n, 1,
        "a launch that returns its output allocated {n} times (expected: the output)"
    );
    assert_eq!(fresh.as_slice(), out.as_slice());

    // The compute families (reductions, activations with their reduction, reciprocal,
    // tensor_scalar, masks) in the ragged softmax of the docs, and elementwise operators.
    let x = DeviceTensor::from_array(&nki::ndarray::Array2::<f32>::from_shape_fn(
        (300, 256),
        |(i, j)| (i * 7 + j * 3) as f32 * 0.01,
    ))
    .unwrap();
    let mut y = DeviceTensor::<f32>::zeros(&[300, 256]).unwrap();
    doc_kernels::softmax_rows::launch_into(&mut core, &x, &mut y).unwrap();
    let (r, n) = count(|| doc_kernels::softmax_rows::launch_into(&mut core, &x, &mut y));
    r.unwrap();
    assert_eq!(n, 0, "a launch of the ragged softmax allocated {n} times");
    let z = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
    let mut e = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
    doc_kernels::elementwise::launch_into(&mut core, &z, &z, &mut e).unwrap();
    let (r, n) = count(|| doc_kernels::elementwise::launch_into(&mut core, &z, &z, &mut e));
    r.unwrap();
    assert_eq!(
        n, 0,
        "a launch of the elementwise kernel allocated {n} times"
    );
    // A grid launch, its instances on two host threads (the worker's engines are created by
    // the first one).
    let h = DeviceTensor::from_array(&spmd::common::random_f16(
        nki::ndarray::Ix2(256, 1024),
        5,
        -2.0,
        2.0,
    ))
    .unwrap();
    let mut sum = DeviceTensor::<f16>::zeros(&[256, 1024]).unwrap();
    let grid = spmd::tensor_add_f16::grid([2, 2]);
    grid.launch_into(&mut core, &h, &h, &mut sum).unwrap();
    let (r, n) = count(|| grid.launch_into(&mut core, &h, &h, &mut sum));
    r.unwrap();
    assert_eq!(n, 0, "a grid launch allocated {n} times");
    // The XORWOW instructions keep their lanes' state in storage the core allocated once; a
    // grid's instances each start it anew on the host threads.
    let mut trn3 = NeuronCore::new(Target::Trn3).with_strict(false);
    let st = DeviceTensor::<u32>::zeros(&[128, 24]).unwrap();
    let seed = DeviceTensor::<i32>::zeros(&[1, 1]).unwrap();
    let mut draws = DeviceTensor::<f32>::zeros(&[2, 128, 512]).unwrap();
    let xorwow = xorwow_draws::grid([2]);
    for _ in 0..4 {
        xorwow
            .launch_into(&mut trn3, &st, &seed, &mut draws)
            .unwrap();
    }
    let (r, n) = count(|| xorwow.launch_into(&mut trn3, &st, &seed, &mut draws));
    r.unwrap();
    assert_eq!(
        n, 0,
        "a launch of the XORWOW instructions allocated {n} times"
    );
    // The top-8 searches keep their rows in the engine state between instructions.
    let xs = DeviceTensor::from_array(&nki::ndarray::Array2::<f32>::from_shape_fn(
        (128, 512),
        |(i, j)| ((i * 31 + j * 17) % 97) as f32,
    ))
    .unwrap();
    let mut top = DeviceTensor::<f32>::zeros(&[128, 8]).unwrap();
    let mut found = DeviceTensor::<u32>::zeros(&[128, 8]).unwrap();
    let mut rest = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
    top8_searches::launch_into(&mut core, &xs, &mut top, &mut found, &mut rest).unwrap();
    let (r, n) =
        count(|| top8_searches::launch_into(&mut core, &xs, &mut top, &mut found, &mut rest));
    r.unwrap();
    assert_eq!(n, 0, "a launch of the top-8 searches allocated {n} times");
    // Whichever thread searched which partitions before: a first launch on one thread, then
    // launches that may split (the worker's rows were made ready by the first).
    let mut one = NeuronCore::default()
        .with_strict(false)
        .with_host_threads(1);
    top8_searches::launch_into(&mut one, &xs, &mut top, &mut found, &mut rest).unwrap();
    let mut two = one.with_host_threads(2);
    for round in 0..3 {
        let (r, n) =
            count(|| top8_searches::launch_into(&mut two, &xs, &mut top, &mut found, &mut rest));
        r.unwrap();
        assert_eq!(
            n, 0,
            "a launch of the top-8 searches after one on a single thread allocated {n} times \
             (round {round})"
        );
    }
    // A failed launch allocates only its error message.
    let wrong = DeviceTensor::<bf16>::zeros(&[64, 512]).unwrap();
    let (r, _) = count(|| matmul_basic::launch_into(&mut core, &a, &wrong, &mut out));
    assert!(r.is_err());
}

/// Every XORWOW instruction: the state set and read, a seed, integer draws on both engines and
/// uniform values.
#[kernel(target = trn3)]
fn xorwow_draws(st: Hbm<u32, 128, 24>, seed: Hbm<i32, 1, 1>) -> Hbm<f32, 2, 128, 512> {
    let out = ndarray([2, 128, 512], f32, SharedHbm);
    let s = load(st[..]);
    rand_set_state(s, engine = vector);
    let k = load(seed[..]);
    set_rng_seed(k);
    let g = ndarray([128, 6], u32, Sbuf);
    rand_get_state(g);
    rand_set_state(g);
    let i = ndarray([128, 512], i32, Sbuf);
    rng(i, engine = gpsimd);
    rng(i);
    let r = ndarray([128, 512], f32, Sbuf);
    rand2(r, -1.0, 1.0);
    store(out[[program_id(0), 0..128, 0..512]], r);
    out
}

/// The top-8 searches: `max8`, `nc_find_index8`, and `nc_match_replace8` in place with its
/// indices (the NKI Library's top-k) and into another tile.
#[kernel]
fn top8_searches(
    x: Hbm<f32, 128, 512>,
) -> (Hbm<f32, 128, 8>, Hbm<u32, 128, 8>, Hbm<f32, 128, 512>) {
    let vals_out = ndarray([128, 8], f32, SharedHbm);
    let idx_out = ndarray([128, 8], u32, SharedHbm);
    let rest_out = ndarray([128, 512], f32, SharedHbm);
    let data = ndarray([128, 512], f32, Sbuf);
    nisa::dma_copy(dst = data, src = x[[0..128, 0..512]]);
    let top = ndarray([128, 8], f32, Sbuf);
    nisa::max8(dst = top, src = data);
    let found = ndarray([128, 8], u32, Sbuf);
    nisa::nc_find_index8(dst = found, data = data, vals = top);
    let rest = ndarray([128, 512], f32, Sbuf);
    nisa::nc_match_replace8(dst = rest, data = data, vals = top, imm = 0.0);
    nisa::nc_match_replace8(
        dst = data,
        dst_idx = found,
        data = data,
        vals = top,
        imm = 0.0,
    );
    nisa::dma_copy(dst = vals_out[[0..128, 0..8]], src = top);
    nisa::dma_copy(dst = idx_out[[0..128, 0..8]], src = found);
    nisa::dma_copy(dst = rest_out[[0..128, 0..512]], src = rest);
    (vals_out, idx_out, rest_out)
}
