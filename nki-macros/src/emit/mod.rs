//! Code generation: the checked program as a `static` and the typed launch functions.

mod launch;
mod paths;
mod program;

use nki_lang::CompiledProgram;
use proc_macro2::TokenStream;

use crate::parse::model::{Instance, Kernel};

/// The expansion of a kernel (or of one of its instantiations) that compiled.
pub fn kernel(k: &Kernel, instance: Option<&Instance>, program: &CompiledProgram) -> TokenStream {
    launch::launch(k, instance, true, program::program(program))
}

/// The items emitted after an error, so that uses of the kernel elsewhere do not cascade into
/// more errors.
pub fn fallback(k: &Kernel, instance: Option<&Instance>) -> TokenStream {
    launch::launch(k, instance, false, launch::empty_program(k, instance))
}

pub use launch::settings;

/// The module of a kernel with meta-parameters: its instantiations, for tools that try each
/// (autotuning).
pub fn instances(k: &Kernel) -> TokenStream {
    launch::instances(k)
}
