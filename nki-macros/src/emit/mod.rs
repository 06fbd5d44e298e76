//! Code generation: the checked program as a `static` and the typed launch functions.

mod launch;
mod paths;
mod program;

use nki_lang::CompiledProgram;
use proc_macro2::TokenStream;

use crate::parse::model::Kernel;

/// The expansion of a kernel that compiled.
pub fn kernel(k: &Kernel, program: &CompiledProgram) -> TokenStream {
    launch::launch(k, true, program::program(program))
}

/// The items emitted after an error, so that uses of the kernel elsewhere do not cascade into
/// more errors.
pub fn fallback(k: &Kernel) -> TokenStream {
    launch::launch(k, false, launch::empty_program(k))
}
