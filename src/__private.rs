//! Glue between `#[kernel]`'s expansion and the runtime; every path the expansion emits
//! resolves here.

use std::borrow::Cow;

pub use half::{bf16, f16};
pub use ndarray;
use ndarray::{Array, ArrayView, Dimension};
pub use nki_lang::constraint::Computed;
pub use nki_lang::schedule_control::{Edge, InstrName, Ordered, ScheduleControl};
pub use nki_lang::{
    AccOut, AccessId, ActFn, Affine, Alu, AxisIndex, Bounded, Cmp, Constraint, DType, Dim, Dst,
    Engine, ExprId, Extent, HbmAccess, IndirectMode, Instr, InstrData, LoopKind, Mask, MaskId,
    MaskTerm, Memory, Opcode, Pred, Program, RegId, RegSrc, ReshapeDecl, Scalar, Src, SymbolValues,
    Target, TensorDecl, TensorRole, TileDecl, TileShape, TileView, ViewId, Write,
};
pub use nki_runtime::{
    Bool, CheckedInputs, DeviceTensor, Element, F4E2M1Fn, F4E2M1FnX4, F8E4M3, F8E4M3Fn, F8E4M3FnX4,
    F8E5M2, F8E5M2X4, F8E8M0Fnu, HbmIn, HbmOut, Instance, Kernel, LaunchError, LaunchGrid,
    MetaValue, NeuronCore, Tf32,
};

/// Allocates output `i` in the modeled HBM for the bound symbols.
pub fn device_output<T: Element>(
    kernel: &Kernel<'_>,
    i: usize,
    syms: &SymbolValues,
) -> Result<DeviceTensor<T>, LaunchError> {
    let shape = kernel
        .output_shape(i, syms)
        .ok_or_else(|| no_output(kernel, i))?;
    Ok(DeviceTensor::zeros(shape.as_slice())?)
}

/// Why output `i` has no shape: the kernel has fewer outputs, or its shape for the bound
/// symbols is not a tensor's (its element count overflows).
fn no_output(kernel: &Kernel<'_>, i: usize) -> LaunchError {
    let expected = kernel.program().outputs().len();
    if i < expected {
        LaunchError::Shape(ndarray::ShapeError::from_kind(ndarray::ErrorKind::Overflow))
    } else {
        LaunchError::OutputCount {
            expected,
            found: i + 1,
        }
    }
}

/// Allocates output `i` as an `ndarray` array for the bound symbols.
pub fn host_output<T: Element, D: Dimension>(
    kernel: &Kernel<'_>,
    i: usize,
    syms: &SymbolValues,
) -> Result<Array<T, D>, LaunchError> {
    let dims = kernel
        .output_dims::<D>(i, syms)
        .ok_or_else(|| no_output(kernel, i))?;
    // Through a device tensor: its allocation is fallible (an output sized from a huge
    // symbolic dimension is an error, not an abort).
    Ok(DeviceTensor::<T>::zeros(dims.slice())?.into_array::<D>()?)
}

/// Binds an output array created by [`host_output`].
pub fn host_output_arg<T: Element, D: Dimension>(
    a: &mut Array<T, D>,
) -> Result<HbmOut<'_>, LaunchError> {
    let shape = nki_runtime::Shape::new(a.shape())?;
    let layout = || ndarray::ShapeError::from_kind(ndarray::ErrorKind::IncompatibleLayout);
    let data = a.as_slice_mut().ok_or_else(layout)?;
    Ok(HbmOut::new(data, shape.as_slice())?)
}

/// An `ndarray` view as a kernel input: borrowed when it is in standard layout, copied into a
/// standard-layout buffer otherwise.
pub struct HostInput<'a, T: Element> {
    data: Cow<'a, [T]>,
    shape: nki_runtime::Shape,
}

impl<'a, T: Element> HostInput<'a, T> {
    /// Wraps a view.
    pub fn new<D: Dimension>(view: &'a ArrayView<'_, T, D>) -> Result<Self, LaunchError> {
        let shape = nki_runtime::Shape::new(view.shape())?;
        let data = match view.as_slice() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(view.iter().copied().collect()),
        };
        Ok(HostInput { data, shape })
    }

    /// The binding.
    pub fn arg(&self) -> HbmIn<'_> {
        HbmIn::new(&self.data, self.shape.as_slice()).expect("shape and data agree by construction")
    }
}

/// Binds the arguments and executes the grid's instances: the whole launch.
pub fn run_on(
    core: &mut NeuronCore,
    kernel: &Kernel<'_>,
    grid: LaunchGrid,
    inputs: &[HbmIn<'_>],
    outputs: &mut [HbmOut<'_>],
) -> Result<(), LaunchError> {
    core.execute(kernel.bind_on(grid, inputs, outputs)?)
}

/// Binds the outputs of a launch whose inputs were checked, and executes.
pub fn run_checked(
    core: &mut NeuronCore,
    inputs: CheckedInputs<'_, '_>,
    outputs: &mut [HbmOut<'_>],
) -> Result<(), LaunchError> {
    core.execute(inputs.bind_outputs(outputs)?)
}
