//! The HBM tensors a launch allocates for its kernel: `shared_hbm` scratch the kernel does not
//! return, `private_hbm` scratch and `shared_constant` data ([`nki_lang::Program::allocated`]).
//!
//! Each launch allocates exactly these tensors, once, at the sizes its symbols give them (a
//! kernel without any allocates nothing), and binds them after the caller's outputs, so that
//! the interpreter, the strict checker and the timing model address them as they address
//! outputs (tensor index − input count). Scratch starts uninitialised: zero bytes here (NaN
//! under [`crate::UninitializedMemory::Nan`]), and strict mode refuses a read of what the
//! launch did not write. A constant holds its program's data. A `private_hbm` tensor is one
//! buffer that the instances of a grid (and the iterations of the loop that declares it) use
//! in turn; that is what makes it private in a serial run, so a launch with any allocated
//! tensor runs its instances on one host thread.

// Sizes come from the program's shapes and the launch's symbols: checked arithmetic.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{Program, SymbolValues, TensorDecl, TensorRole};

use crate::bind::{Bound, HbmOut};
use crate::launch::LaunchError;
use crate::shape::Shape;

/// The shape of allocated tensor `decl` for symbols `syms`, or `None` if it does not fit this
/// host.
fn shape_of(decl: &TensorDecl<'_>, syms: &SymbolValues) -> Option<Shape> {
    let mut dims = [0usize; nki_lang::MAX_TENSOR_RANK];
    for (d, dim) in dims.iter_mut().zip(decl.shape) {
        *d = usize::try_from(dim.eval(syms)).ok()?;
    }
    Shape::new(dims.get(..decl.shape.len())?).ok()
}

/// The bytes of each tensor `program` allocates, for symbols `syms`: each one's shape and
/// a buffer of its size (a constant's data copied in).
fn allocate(
    program: &Program<'_>,
    syms: &SymbolValues,
) -> Result<Vec<(Vec<u8>, Shape)>, LaunchError> {
    program
        .allocated()
        .iter()
        .map(|decl| {
            let too_large = LaunchError::Allocation { bytes: usize::MAX };
            let shape = shape_of(decl, syms).ok_or(too_large.clone())?;
            let bytes = shape
                .len()
                .checked_mul(decl.dtype.size() as usize)
                .ok_or(too_large)?;
            let mut buf = Vec::new();
            buf.try_reserve_exact(bytes)
                .map_err(|_| LaunchError::Allocation { bytes })?;
            match decl.role {
                TensorRole::Constant => {
                    // f32 values as written, converted as `tensor_copy` from f32 converts.
                    let size = decl.dtype.size() as usize;
                    for v in decl.data.chunks_exact(4) {
                        let x = f32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                        let bits = crate::cpu::convert::from_f32(decl.dtype, x).to_le_bytes();
                        buf.extend_from_slice(bits.get(..size).unwrap_or(&bits));
                    }
                    buf.resize(bytes, 0);
                }
                TensorRole::Input
                | TensorRole::Output
                | TensorRole::Scratch
                | TensorRole::Private => buf.resize(bytes, 0),
            }
            Ok((buf, shape))
        })
        .collect()
}

/// Runs `f` on `bound` with the tensors its program allocates bound after its outputs
/// (directly on `bound` when there are none).
pub(crate) fn with_allocated<R>(
    bound: Bound<'_, '_, '_>,
    f: impl FnOnce(Bound<'_, '_, '_>) -> Result<R, LaunchError>,
) -> Result<R, LaunchError> {
    let program = bound.program;
    if program.allocated().is_empty() || bound.outputs.len() != program.outputs().len() {
        // Nothing to allocate, or already allocated (the outputs include them).
        return f(bound);
    }
    let mut buffers = allocate(program, &bound.syms)?;
    let Bound {
        program,
        syms,
        grid,
        inputs,
        outputs,
        meter,
    } = bound;
    let mut all: Vec<HbmOut<'_>> = Vec::new();
    all.try_reserve_exact(outputs.len().saturating_add(buffers.len()))
        .map_err(|_| LaunchError::Allocation { bytes: usize::MAX })?;
    for o in outputs.iter_mut() {
        all.push(HbmOut {
            data: &mut *o.data,
            origin: o.origin,
            dtype: o.dtype,
            shape: o.shape,
        });
    }
    for ((data, shape), decl) in buffers.iter_mut().zip(program.allocated()) {
        all.push(HbmOut {
            data: data.as_mut_slice(),
            origin: 0,
            dtype: decl.dtype,
            shape: *shape,
        });
    }
    f(Bound {
        program,
        syms,
        grid,
        inputs,
        outputs: &mut all,
        meter,
    })
}

/// The element count of tensor `t` of `bound`'s program: its binding's, or for a tensor the
/// launch allocates and has not bound yet, its declared shape's at the launch's symbols.
pub(crate) fn elements(bound: &Bound<'_, '_, '_>, t: usize) -> usize {
    let bound_count = bound.inputs.len().saturating_add(bound.outputs.len());
    if t < bound_count {
        return bound.hbm(t).1.len();
    }
    bound
        .program
        .tensors()
        .get(t)
        .and_then(|decl| shape_of(decl, &bound.syms))
        .map_or(0, |s| s.len())
}
