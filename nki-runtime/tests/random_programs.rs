//! Property tests over random programs (`docs/fuzzing.md`): random valid programs with random
//! inputs run on a strict core, on plain cores with one and two host threads and on every host
//! code path, and must build, launch, agree bit for bit with each other and with the runtime's
//! element-by-element reference interpreter (`nki_runtime::reference_launch`), and equal the
//! spec-level reference kept in `random_programs/reference.rs`; random builder calls and wrong
//! launch arguments must give errors, never panics.
//!
//! Each property draws a byte string; `random_programs/generate.rs` turns it into a program, so
//! proptest's shrinking of the bytes shrinks the program. The same modules drive the cargo-fuzz
//! target `fuzz/fuzz_targets/programs.rs`. `PROPTEST_CASES` raises (or lowers) every
//! property's case count.

#[path = "random_programs/api.rs"]
mod api;
#[path = "random_programs/generate.rs"]
mod generate;
#[path = "random_programs/invalid.rs"]
mod invalid;
#[path = "random_programs/lower.rs"]
mod lower;
#[path = "random_programs/numerics.rs"]
mod numerics;
#[path = "random_programs/reference.rs"]
mod reference;
#[path = "random_programs/run.rs"]
mod run;
#[path = "random_programs/spec.rs"]
mod spec;

use std::cell::RefCell;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use nki_runtime::NeuronCore;
use numerics::Val;
use run::{Cores, Summary};
use spec::{Dt, Op};

/// `default` cases, or `PROPTEST_CASES`; no regression files (a failure prints its bytes,
/// which reproduce it through `generate::case`).
fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        max_shrink_time: 120_000,
        ..Config::default()
    }
}

/// Byte strings up to `len` long.
fn bytes(len: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..len)
}

/// Runs `property` over random byte strings, panicking with proptest's minimal failing input.
fn run_property(cases: u32, len: usize, property: impl Fn(&[u8]) -> Result<(), String>) {
    let mut runner = TestRunner::new(config(cases));
    let result = runner.run(&bytes(len), |b| property(&b).map_err(TestCaseError::fail));
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, b)) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            panic!("{why}\nminimal failing bytes ({} long): {hex}", b.len());
        }
        Err(e) => panic!("{e}"),
    }
}

/// Property 1: random valid programs build, launch strictly, agree across every core
/// configuration and equal the reference.
#[test]
fn random_programs_match_the_reference() {
    let cores = RefCell::new(Cores::new());
    let total = RefCell::new(Summary::default());
    run_property(1024, 512, |b| {
        let case = generate::case(b);
        let s = run::check(&mut cores.borrow_mut(), &case)?;
        let mut t = total.borrow_mut();
        t.exact += s.exact;
        t.within += s.within;
        t.any += s.any;
        t.instructions += s.instructions;
        Ok(())
    });
    let t = total.into_inner();
    println!(
        "checked {} instructions; output elements: {} bit-exact, {} within a bound, {} unconstrained",
        t.instructions, t.exact, t.within, t.any
    );
    // Most elements must be pinned down: a reference that says `Any` everywhere checks nothing.
    assert!(t.any * 20 <= t.exact + t.within, "{t:?}");
}

/// Property 1b: the timing model times every random valid program, under the device's
/// schedule and the program order, with the invariants of `run::check_timing`.
#[test]
fn random_programs_are_timed_consistently() {
    run_property(256, 512, |b| run::check_timing(&generate::case(b)));
}

/// Property 1c: a `no_reorder!` block over a whole random program keeps its instructions
/// completing in program order in the timing model (`run::check_ordered_timing`).
#[test]
fn random_programs_in_a_no_reorder_block_are_timed_in_order() {
    run_property(64, 512, |b| run::check_ordered_timing(&generate::case(b)));
}

/// Inputs the properties once failed on, run on every test run (hex, as the failure prints
/// them).
const REGRESSIONS: &[(&str, &str)] = &[
    (
        // A load of a tile no instruction reads, then a load of another tile into the same bytes,
        // then the matmul of the second: the first load was handed to the matmul as if the matmul
        // read its tile (the same elements of SBUF), instead of the second load's values.
        "a dead load aliasing a matmul operand",
        "0403080c1c1a0003000000000000000000000000000000000f3c0100000000000000640000600014000000\
     320000000000006a55000000000000000000000000620000000000646e3c0032003c00003000000000005200\
     00004b0000000000000000000000000000000000000000000000000000",
    ),
    (
        // A product folded into the two instructions that read it (`host/exprs.rs`), one of
        // them after a write of the product's source's bytes.
        "an expression reading a source overwritten before it",
        "8608000000000c779e806403000000000000000000000000000000000000003c01005507003e000d0000003c\
     0000006d00000000000000000028000064000064003700000000006c0000000000000000556c7e0001640000\
     000000000000000000000000002f000000000055005500000000000000002f64000000c08f1ee70064000000\
     000000000000000000000000005500006400000b64090000bfff3ff13c320000000000000000000000000000\
     00000000000000000000000046003c008f0000073c00f6553c64000000000000000000000000000000000000\
     646a0000000000000018",
    ),
];

/// Property 1 on the inputs it once failed on.
#[test]
fn random_program_regressions_match_the_reference() {
    let mut cores = Cores::new();
    for (what, hex) in REGRESSIONS {
        let b: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        let case = generate::case(&b);
        if let Err(e) = run::check(&mut cores, &case) {
            panic!("{what}: {e}");
        }
    }
}

/// Property 2: a generated program launched with arguments that break its signature returns
/// an error on every core and changes no output.
#[test]
fn wrong_launch_arguments_are_errors_and_change_nothing() {
    let cores = RefCell::new(Cores::new());
    run_property(256, 256, |b| {
        let case = generate::case(b);
        let mut c = generate::Choices::new(b.get(b.len() / 2..).unwrap_or_default());
        run::check_bad_launch(&mut cores.borrow_mut(), &case, &mut c)
    });
}

/// Property 4: random valid programs timed with random options (parameters at and beyond
/// their edges, every detail level and mode, launch grids a launch takes or refuses, rotation
/// degrees and buffer counts from 0 to `u32::MAX`) give a schedule that holds what any
/// schedule must, or a typed launch error for a refused grid; never a panic.
#[test]
fn random_timing_options_are_results_or_errors() {
    run_property(256, 512, |b| {
        let case = generate::case(b);
        let mut c = generate::Choices::new(b.get(b.len() / 2..).unwrap_or_default());
        api::check_timing_options(&case, &mut c)
    });
}

/// Property 4 on the inputs it once failed on.
const TIMING_OPTION_REGRESSIONS: &[(&str, &str)] = &[
    (
        // DMA engines of one byte per microsecond: each engine's busy time saturates, and their
        // sum in the profile overflowed.
        "saturated DMA engine times summed",
        "004f0000646f1a46000000000021000000000000000000004b640000390000000003fc4af42e034064c78bf0\
     9c85d73e77d46ca97c641a555f4dd4d629f9a1818fe10ea85c869a1e6cbd3e6625cce86721ee1af674319cd2\
     e8c2f06eecf5730e19a11b528007e12a8808ea4ecffbae8fa0ac5175c214eafc47cc754eb97d7d49e1bd7f56\
     4c65fb06d0299b1e424bf899ebf949c929b18b80ab0cf6056ca773960e6b0d5bb9ebb3c041d15c1e4d66275a\
     2111aaed20edb4ed907dd85f39cb8ab3eba24a8875651525dc68b978f88f32def38aec5b7d8fe3ac312aaf43\
     70cd966ddbe9a5c9306a8096b7a14a2186d81f469bcb3fb961e0023986a0a1aecb35a78aa23fecb5f707d1bb\
     d2985fb026ce7a75e96740bb4418dc4fda9f57ee116851759d0186150fb15c1e382ae87fe0f474e2dafcbb5e\
     c6b4aced27e68335c32dba12c06fe3dac10a4245aa8fb12543a9b6e4ee77b18947fa4d814f11681eaf5bfe6e\
     43e905771831d1d7e8f1f05db265adc49cb78744a70d54f9a19a8159e3c19deb13da882d5760a40f",
    ),
    (
        // A DMA that fits a gap reaching the end of time: its end, the gap's start plus its
        // busy time, overflowed where the fit had saturated.
        "DMA placed in a gap that never closes",
        "80278402133400000000000000000000000000000000000b55000000000000000000003c00b8000000000000\
     000000120000000e99974fa7f66f5a4ea73f40f69d0977c0b17d466f7cb5a08f0e542aec49a74d018ced931a\
     627143da4737afb1bdde627d1a9a0c531433d0f8a5a52e4cdd027024e4b081cdf9e6e1d698e14904a222c7ed\
     cd020e300eb6fc046fe365e21bf302befaa4716c84d06eda32149a49374e42f7bcbfd3990afbfb2891f2f35a\
     3a3f0a7b4f291beb0f783b21d2ce1aef6d3e77baa1ef30f9f60b5c6c1532765208bcbb1b0d2721202e7c3816\
     02c454d9d6a6f674b0be3b4632b345f22160567f20304890befb92fb7ea39a53f67c6a68a4c076bb1f99b2a9\
     1a07c3051a26de806b2ca560b52f704901f3ae7aa7b1e28136e47e7f8139c185db8b2201ab530debea1f45c4\
     e9bdd2b90e0c4fc05ec064fe4d1335dbbd38c5ee9dc13134",
    ),
];

/// Property 4 on the inputs it once failed on.
#[test]
fn random_timing_option_regressions_are_results_or_errors() {
    for (what, hex) in TIMING_OPTION_REGRESSIONS {
        let b: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        let case = generate::case(&b);
        let mut c = generate::Choices::new(b.get(b.len() / 2..).unwrap_or_default());
        if let Err(why) = api::check_timing_options(&case, &mut c) {
            panic!("{what}: {why}");
        }
    }
}

/// Property 5: benchmarks with counts at and beyond their limits (0, `MAX_RUNS + 1`, 2^40,
/// `usize::MAX`) are typed errors at once; the others give one identical sample per timed
/// run.
#[test]
fn random_benchmark_counts_are_checked() {
    run_property(64, 512, |b| {
        let case = generate::case(b);
        let mut c = generate::Choices::new(b.get(b.len() / 2..).unwrap_or_default());
        api::check_benchmark_counts(&case, &mut c)
    });
}

/// Property 6: a host profile of a random valid program counts every executed instruction
/// once, by instruction and by opcode, and `clear` empties it.
#[test]
fn random_programs_are_host_profiled_completely() {
    run_property(64, 512, |b| api::check_host_profile(&generate::case(b)));
}

/// Property 7: device tensors of random shapes (ranks beyond the limit, axes of 0 and beyond
/// `MAX_DIM`, element counts that overflow or no host can hold) are created exactly when
/// they are valid and small, and refused with a typed error otherwise.
#[test]
fn random_device_tensor_shapes_are_checked() {
    run_property(1024, 16, |b| {
        api::check_device_tensors(&mut generate::Choices::new(b))
    });
}

/// Random builder calls (a sequence of them, or a few slipped into a valid program's) return
/// `Ok` or `Err`; `finish` returns; a program it accepts launches, or is refused, without a
/// panic.
#[test]
fn random_builder_calls_never_panic() {
    let cores = RefCell::new(vec![
        NeuronCore::default().with_strict(true),
        NeuronCore::default().with_strict(false),
    ]);
    // (accepted, accepted with an instruction other than loop control, launched)
    let counts = RefCell::new((0usize, 0usize, 0usize));
    run_property(4096, 1024, |b| {
        let accepted = match b.first() {
            Some(x) if x % 2 == 1 => invalid::mutated_program(&b[1..]),
            _ => invalid::builder_calls(b.get(1..).unwrap_or_default()),
        };
        if let Some(compiled) = accepted {
            let mut n = counts.borrow_mut();
            n.0 += 1;
            let parts = compiled.parts();
            let program = parts.program();
            if program
                .instrs()
                .iter()
                .any(|i| i.data.loop_control().is_none())
            {
                n.1 += 1;
            }
            let mut c = generate::Choices::new(b.get(b.len() / 2..).unwrap_or_default());
            if invalid::launch_accepted(&mut cores.borrow_mut(), &compiled, &mut c) {
                n.2 += 1;
            }
        }
        Ok(())
    });
    let (accepted, working, launched) = counts.into_inner();
    println!(
        "finish accepted {accepted} random programs ({working} with instructions); {launched} launched"
    );
}

/// The generator, over many byte strings (no launches): every program builds, and every
/// operation, layout, load split, loop kind, carry and dtype of the description appears.
#[test]
fn generator_reaches_every_feature() {
    let mut seen = std::collections::BTreeSet::new();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..400 {
        let len = 64 + (state % 448) as usize;
        let b: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        let case = generate::case(&b);
        if let Err(e) = run::build(&case) {
            panic!("{e}");
        }
        let expected = reference::evaluate(&case);
        for v in expected.iter().flatten().flatten() {
            let kind = match v {
                Val::Exact(_) => "exact",
                Val::Within(..) => "within",
                Val::Any => "any",
            };
            seen.insert(kind.to_string());
        }
        for stage in &case.program.stages {
            let store = match stage.carry {
                Some(spec::Carry::Tile { .. }) => "carry tile",
                Some(spec::Carry::Group { .. }) => "carry group",
                Some(spec::Carry::Accumulate { op, .. }) => {
                    if stage.loops.iter().any(|l| l.kind == spec::Kind::Affine) {
                        seen.insert("accumulate across affine".to_string());
                    }
                    if op == spec::Bin::Add {
                        "accumulate add"
                    } else {
                        "accumulate max/min"
                    }
                }
                None => "stores",
            };
            seen.insert(store.to_string());
            seen.insert(format!("layout {:?}", stage.layout));
            if stage.ragged > 0 {
                seen.insert("ragged store".to_string());
            }
            let r = stage.steps[stage.result].tile;
            if stage.stored != [r.p, r.f] {
                seen.insert(format!("masked store {:?}", stage.layout));
            }
            for l in &stage.loops {
                seen.insert(format!("loop {:?}", l.kind));
            }
            for s in &stage.steps {
                let name = match &s.op {
                    Op::Load { split, .. } => format!("load {split:?}"),
                    op => format!("{op:?}"),
                };
                let name = name.split(['(', ' ', '{']).take(2).collect::<Vec<_>>();
                let name = match name[0] {
                    "load" => name.join(" "),
                    other => other.to_string(),
                };
                if let Op::Activation { func, bias, .. } = &s.op {
                    seen.insert(format!("act {func:?}"));
                    if bias.is_some() {
                        seen.insert("act bias".to_string());
                    }
                }
                if s.mask.is_some() {
                    seen.insert(format!("masked {}", name.split(' ').next().unwrap_or("")));
                }
                seen.insert(name);
                let dt = if s.tile.dt == Dt::Bf16 {
                    "bf16 tile"
                } else {
                    "f32 tile"
                };
                seen.insert(dt.to_string());
            }
        }
    }
    let want = [
        "exact",
        "within",
        "carry tile",
        "carry group",
        "accumulate add",
        "accumulate max/min",
        "accumulate across affine",
        "stores",
        "layout RowBlocks",
        "layout RowInterleave",
        "layout ColBlocks",
        "layout ColInterleave",
        "layout Transposed",
        "loop Affine",
        "loop Sequential",
        "load Whole",
        "load Cols",
        "load Rows",
        "Memset",
        "TensorTensor",
        "TensorScalar",
        "Copy",
        "Reduce",
        "Transpose",
        "Matmul",
        "Activation",
        "act Exp",
        "act Tanh",
        "act Identity",
        "act Relu",
        "act Abs",
        "act Square",
        "act Sigmoid",
        "act Silu",
        "act Softplus",
        "act bias",
        "masked Activation",
        "Iota",
        "AffineSelect",
        "masked Transpose",
        "ragged store",
        "masked Iota",
        "masked AffineSelect",
        "masked load",
        "masked Memset",
        "masked TensorTensor",
        "masked TensorScalar",
        "masked Copy",
        "masked Reduce",
        "masked store RowBlocks",
        "masked store RowInterleave",
        "masked store ColBlocks",
        "masked store ColInterleave",
        "masked store Transposed",
        "bf16 tile",
        "f32 tile",
    ];
    let missing: Vec<_> = want.iter().filter(|w| !seen.contains(**w)).collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
}

/// Builder inputs property 3 once failed on (hex).
const BUILDER_REGRESSIONS: &[(&str, &str)] = &[(
    // `affine_select` with neither value (`select(0 < 0, -, -)`) passed the checks, and the
    // engines indexed the missing values.
    "an affine_select without values",
    "7d000f0000c500000000000000000000000000000000011b6400a06400983cef001400985b000000000000",
)];

/// Property 3 on the inputs it once failed on.
#[test]
fn random_builder_regressions_never_panic() {
    let mut cores = vec![
        NeuronCore::default().with_strict(true),
        NeuronCore::default().with_strict(false),
    ];
    for (what, hex) in BUILDER_REGRESSIONS {
        let b: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        let accepted = match b.first() {
            Some(x) if x % 2 == 1 => invalid::mutated_program(&b[1..]),
            _ => invalid::builder_calls(b.get(1..).unwrap_or_default()),
        };
        if let Some(compiled) = accepted {
            let mut c = generate::Choices::new(b.get(b.len() / 2..).unwrap_or_default());
            invalid::launch_accepted(&mut cores, &compiled, &mut c);
        }
        println!("{what}: no panic");
    }
}
