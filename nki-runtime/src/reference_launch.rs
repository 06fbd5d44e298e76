//! Launches on the reference interpreter (`exec::reference`): every instruction computed element
//! by element from the definitions of the `cpu` numerics, with no host shortcut, for tests that
//! compare every other way of running a kernel against it. Not part of the stable API.
//!
//! A reference launch uses the core's SBUF and PSUM (which keep their contents between
//! launches, as with [`NeuronCore::execute`]) and nothing else of it: one host thread, no
//! observer, not strict, whatever the core's settings.

use crate::bind::{Bound, HbmIn, HbmOut};
use crate::core::NeuronCore;
use crate::exec::reference::run_reference;
use crate::launch::{Kernel, LaunchError};

/// Runs a bound kernel to completion on the reference interpreter, on `core`'s memories. The
/// program must fit the core ([`LaunchError::SbufCapacity`], [`LaunchError::Target`] as for
/// [`NeuronCore::execute`]).
pub fn execute(core: &mut NeuronCore, bound: Bound<'_, '_, '_>) -> Result<(), LaunchError> {
    core.check_capacity(&bound)?;
    // The launch's scratch and constants, bound after its outputs.
    crate::scratch::with_allocated(bound, |mut bound| {
        run_reference(&mut core.engines, &mut bound)?;
        Ok(())
    })
}

/// Binds and runs on the reference interpreter: [`Kernel::bind`], then [`execute`]. On error
/// nothing was written.
pub fn launch(
    core: &mut NeuronCore,
    kernel: &Kernel<'_>,
    inputs: &[HbmIn<'_>],
    outputs: &mut [HbmOut<'_>],
) -> Result<(), LaunchError> {
    let bound = kernel.bind(inputs, outputs)?;
    execute(core, bound)
}
