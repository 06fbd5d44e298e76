//! libFuzzer target over the properties of `nki-runtime/tests/random_programs.rs`, sharing its
//! modules (generator, lowering, reference interpreter, runner). The first byte picks the
//! property, the rest drives the generator:
//!
//! - `0`, `1`: a random valid program with random inputs builds, launches on a strict core,
//!   gives the same bits on plain cores with one and two host threads and on every host code
//!   path, and equals the reference;
//! - `2`: a launch with wrong arguments returns an error and changes no output;
//! - `3`: random builder calls (alone, or slipped into a valid program) never panic, and a
//!   program `finish` accepts launches or is refused without a panic.
//!
//! A failed property panics, which libFuzzer reports as a crash.

#![no_main]
// The modules are the test suite's; the test uses every item, this target only most of them.
#![allow(dead_code)]

#[path = "../../nki-runtime/tests/random_programs/generate.rs"]
mod generate;
#[path = "../../nki-runtime/tests/random_programs/invalid.rs"]
mod invalid;
#[path = "../../nki-runtime/tests/random_programs/lower.rs"]
mod lower;
#[path = "../../nki-runtime/tests/random_programs/numerics.rs"]
mod numerics;
#[path = "../../nki-runtime/tests/random_programs/reference.rs"]
mod reference;
#[path = "../../nki-runtime/tests/random_programs/run.rs"]
mod run;
#[path = "../../nki-runtime/tests/random_programs/spec.rs"]
mod spec;

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use nki_runtime::NeuronCore;

thread_local! {
    /// The cores of the valid-program properties, kept across inputs.
    static CORES: RefCell<run::Cores> = RefCell::new(run::Cores::new());
    /// A strict and a plain core for programs built from random calls.
    static PLAIN: RefCell<Vec<NeuronCore>> = RefCell::new(vec![
        NeuronCore::default().with_strict(true),
        NeuronCore::default().with_strict(false),
    ]);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 | 1 => {
            let case = generate::case(rest);
            if let Err(e) = CORES.with(|c| run::check(&mut c.borrow_mut(), &case)) {
                panic!("{e}");
            }
        }
        2 => {
            let case = generate::case(rest);
            let mut c = generate::Choices::new(&rest[rest.len() / 2..]);
            if let Err(e) =
                CORES.with(|k| run::check_bad_launch(&mut k.borrow_mut(), &case, &mut c))
            {
                panic!("{e}");
            }
        }
        _ => {
            let accepted = match rest.first() {
                Some(x) if x % 2 == 1 => invalid::mutated_program(&rest[1..]),
                _ => invalid::builder_calls(rest.get(1..).unwrap_or_default()),
            };
            if let Some(compiled) = accepted {
                let mut c = generate::Choices::new(&rest[rest.len() / 2..]);
                PLAIN.with(|k| invalid::launch_accepted(&mut k.borrow_mut(), &compiled, &mut c));
            }
        }
    }
});
