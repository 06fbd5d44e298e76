//! Halves of a split that the worker leaves to the calling thread: with both threads pinned to
//! one CPU the worker finds every job posted from its own CPU and leaves it (`worker`), so the
//! second half of each split loop, grid and instruction runs on the calling thread, after the
//! first, on the calling thread's engines and lanes. The results must be the serial run's:
//! `2·x + 1` of small integers, exact in f32.

use nki_lang::builder::{Grid, Operand, ProgramBuilder};
use nki_lang::{Affine, Alu, DType, Dim, Extent, LoopKind, Memory, Scalar, Target};

use std::time::Duration;

use crate::bind::{HbmIn, HbmOut};
use crate::worker::{Left, PROBE_EVERY, left_count};
use crate::{Kernel, LaunchGrid, NeuronCore};

/// Launches of each walk at most, until its second half has run on the calling thread.
const MAX_LAUNCHES: usize = 12;

/// Blocks of `[128, 512]`.
const BLOCKS: u64 = 8;

/// The shape of the input and output: the blocks one under the other (row blocks, whose
/// halves are byte ranges of the output), or side by side for one instruction over all.
fn shape(walk: Walk) -> [usize; 2] {
    match walk {
        Walk::Loop | Walk::Grid => [128 * BLOCKS as usize, 512],
        Walk::Whole => [128, 512 * BLOCKS as usize],
    }
}

/// How the program walks the blocks.
#[derive(Copy, Clone, Debug)]
enum Walk {
    /// An `affine_range` loop over the blocks.
    Loop,
    /// One instance per block (`program_id(0)`).
    Grid,
    /// One instruction over all blocks at once.
    Whole,
}

/// `out = 2·x + 1` in f32 of [`shape`], block by block as `walk` says.
fn program(walk: Walk) -> nki_lang::CompiledProgram {
    let [rows, cols] = shape(walk).map(|n| Dim::Fixed(n as u64));
    let mut b = ProgramBuilder::new("twice_plus_one", Target::Trn1);
    let x = b.input("x", DType::F32, &[rows, cols]).unwrap();
    let out = b.output("out", DType::F32, &[rows, cols]).unwrap();
    let block = match walk {
        Walk::Loop => {
            b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(BLOCKS))
                .unwrap();
            b.loop_var(0, 128).unwrap()
        }
        Walk::Grid => Affine::program_id(0, 128),
        Walk::Whole => Affine::constant(0),
    };
    let width = shape(walk)[1] as u32;
    let t = b
        .tile("t", Memory::Sbuf, DType::F32, &[128, width])
        .unwrap();
    let u = b
        .tile("u", Memory::Sbuf, DType::F32, &[128, width])
        .unwrap();
    b.load(t, Grid::origin(x).at(0, block)).unwrap();
    let (two, one) = (Scalar::float(2.0), Scalar::float(1.0));
    b.tensor_scalar(
        u,
        t,
        Alu::Multiply,
        Operand::Imm(two),
        Alu::Add,
        Operand::Imm(one),
    )
    .unwrap();
    b.store(Grid::origin(out).at(0, block), u).unwrap();
    if let Walk::Loop = walk {
        b.end_loop().unwrap();
    }
    b.finish().unwrap()
}

#[test]
fn halves_left_to_the_caller_compute_the_serial_results() {
    let elems = 128 * 512 * BLOCKS as usize;
    // Small integers: `2·x + 1` is exact in f32, so the reference is plain arithmetic.
    let x: Vec<f32> = (0..elems).map(|i| (i % 1999) as f32 - 999.0).collect();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| (2.0 * f64::from(v) + 1.0) as f32)
        .collect();
    // Every core before any pinning: a thread pinned to one CPU starts no worker (the host
    // then looks like one CPU to it).
    let walks = [Walk::Loop, Walk::Grid, Walk::Whole].map(|walk| {
        let core = NeuronCore::new(Target::Trn1)
            .with_strict(false)
            .with_host_threads(2);
        (walk, core)
    });
    for (walk, mut core) in walks {
        let compiled = program(walk);
        let parts = compiled.parts();
        let kernel = Kernel::new(parts.program());
        let grid = match walk {
            Walk::Grid => LaunchGrid::from(BLOCKS as usize),
            Walk::Loop | Walk::Whole => LaunchGrid::SINGLE,
        };
        let Some(worker) = core.engines.worker.as_ref() else {
            // One host CPU: nothing is split.
            return;
        };
        if !worker.pin_with_caller() {
            // A sandbox that refuses affinity masks: nothing to check here.
            return;
        }
        let site = match walk {
            Walk::Loop => Left::Loop,
            Walk::Grid => Left::Grid,
            Walk::Whole => Left::Rows,
        };
        let before = left_count(site);
        // Loops and grids split at every launch; a single instruction splits only while the
        // worker counts as near, which a refusal ends for `PROBE_EVERY`: each launch after
        // the first waits that long first.
        for launch in 0..MAX_LAUNCHES {
            if launch > 0 {
                std::thread::sleep(PROBE_EVERY + Duration::from_millis(5));
            }
            let mut out = vec![f32::NAN; elems];
            let inputs = [HbmIn::new(&x, &shape(walk)).unwrap()];
            let mut outputs = [HbmOut::new(&mut out, &shape(walk)).unwrap()];
            let bound = kernel.bind_on(grid, &inputs, &mut outputs).unwrap();
            if let Walk::Loop = walk {
                assert!(!bound.host_parallel_loops().is_empty(), "the loop splits");
            }
            core.execute(bound).unwrap();
            let wrong = out
                .iter()
                .zip(&want)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            assert_eq!(wrong, None, "{walk:?}, launch {launch}");
            if launch >= 2 && left_count(site) > before {
                break;
            }
        }
        assert!(
            left_count(site) > before,
            "{walk:?}: no second half ran on the calling thread"
        );
    }
}
