//! Bounding and stopping launches: a core's `Budget` (executed instructions, wall time) and its
//! `StopHandle` stop plain, strict and timing-only launches of kernels that would run for
//! years, with `LaunchError::Stopped`, and leave the core usable.

use std::time::Duration;

use nki::program::builder::{Grid, ProgramBuilder};
use nki::program::{CompiledProgram, DType, Dim, Extent, LoopKind, Memory, Scalar, Target};
use nki::timing::{Detail, Timing, TimingError};
use nki::{Budget, DeviceTensor, Kernel, LaunchError, NeuronCore, Stopped};

/// `trips` iterations of: fill a `[128, 4]` tile with 1.0, store it to the output.
fn filling(trips: u64) -> CompiledProgram {
    let mut b = ProgramBuilder::new("filling", Target::Trn1);
    let out = b
        .output("out", DType::F32, &[Dim::Fixed(128), Dim::Fixed(4)])
        .unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 4]).unwrap();
    b.begin_loop(LoopKind::Sequential, "i", Extent::Fixed(trips))
        .unwrap();
    b.memset(t, Scalar::float(1.0)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    b.end_loop().unwrap();
    b.finish().unwrap()
}

fn launch(
    core: &mut NeuronCore,
    program: &CompiledProgram,
) -> Result<DeviceTensor<f32>, LaunchError> {
    let parts = program.parts();
    let kernel = Kernel::new(parts.program());
    let mut out = DeviceTensor::<f32>::zeros(&[128, 4]).unwrap();
    core.launch(&kernel, &[], &mut [out.arg_mut()])?;
    Ok(out)
}

/// After a stopped launch the core runs a short one correctly.
fn still_usable(core: &mut NeuronCore) {
    core.set_budget(Budget::UNLIMITED);
    let out = launch(core, &filling(3)).expect("a short launch after a stopped one");
    assert!(out.as_slice().iter().all(|&x| x == 1.0));
}

#[test]
fn an_instruction_budget_stops_a_launch_of_2_pow_62_iterations() {
    let endless = filling(1 << 62);
    for strict in [false, true] {
        for threads in [1, 2] {
            let mut core = NeuronCore::new(Target::Trn1)
                .with_strict(strict)
                .with_host_threads(threads);
            core.set_budget(Budget::instructions(10_000));
            match launch(&mut core, &endless) {
                Err(LaunchError::Stopped(Stopped::Instructions {
                    kernel,
                    limit,
                    executed,
                })) => {
                    assert_eq!((kernel.as_str(), limit), ("filling", 10_000));
                    // Charged at each back-edge: at most one iteration (2 instructions) over.
                    assert!((10_001..=10_002).contains(&executed), "{executed}");
                }
                other => panic!("strict {strict}, {threads} threads: {other:?}"),
            }
            still_usable(&mut core);
        }
    }
}

#[test]
fn a_budget_large_enough_changes_nothing() {
    let mut core = NeuronCore::new(Target::Trn1).with_strict(true);
    // 100 iterations of 2 instructions: exactly 200.
    core.set_budget(Budget::instructions(200));
    let out = launch(&mut core, &filling(100)).expect("within budget");
    assert!(out.as_slice().iter().all(|&x| x == 1.0));
    core.set_budget(Budget::instructions(199));
    assert!(matches!(
        launch(&mut core, &filling(100)),
        Err(LaunchError::Stopped(Stopped::Instructions { .. }))
    ));
}

#[test]
fn a_wall_time_budget_stops_a_launch() {
    let mut core = NeuronCore::new(Target::Trn1).with_strict(false);
    core.set_budget(Budget::wall_time(Duration::from_millis(50)));
    match launch(&mut core, &filling(1 << 62)) {
        Err(LaunchError::Stopped(Stopped::WallTime { limit, .. })) => {
            assert_eq!(limit, Duration::from_millis(50))
        }
        other => panic!("{other:?}"),
    }
    still_usable(&mut core);
}

#[test]
fn another_thread_stops_a_launch_through_the_stop_handle() {
    for strict in [false, true] {
        let mut core = NeuronCore::new(Target::Trn1).with_strict(strict);
        let handle = core.stop_handle();
        let stopper = {
            let handle = handle.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                handle.stop();
            })
        };
        let result = launch(&mut core, &filling(1 << 62));
        stopper.join().unwrap();
        assert!(
            matches!(result, Err(LaunchError::Stopped(Stopped::Cancelled { .. }))),
            "{result:?}"
        );
        // The request was consumed by the launch it stopped.
        assert!(!handle.is_stop_requested());
        still_usable(&mut core);
    }
}

#[test]
fn a_stop_requested_between_launches_stops_the_next_one() {
    let mut core = NeuronCore::new(Target::Trn1).with_strict(false);
    core.stop_handle().stop();
    assert!(matches!(
        launch(&mut core, &filling(3)),
        Err(LaunchError::Stopped(Stopped::Cancelled { .. }))
    ));
    still_usable(&mut core);
}

#[test]
fn timing_only_runs_are_bounded_too() {
    let endless = filling(1 << 62);
    let parts = endless.parts();
    let kernel = Kernel::new(parts.program());
    let mut core = NeuronCore::new(Target::Trn1);
    core.set_budget(Budget::instructions(5_000));
    let timed = Timing::new()
        .detail(Detail::Summary)
        .run_shapes(&mut core, &kernel, &[]);
    assert!(
        matches!(
            timed,
            Err(TimingError::Launch(LaunchError::Stopped(
                Stopped::Instructions { .. }
            )))
        ),
        "{timed:?}"
    );
}
