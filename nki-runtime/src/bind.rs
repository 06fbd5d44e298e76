//! The tensors of one launch: the kernel's HBM inputs and outputs bound to host buffers
//! ([`HbmIn`], [`HbmOut`]) and a checked launch ([`Bound`]): what the interpreter and the
//! engines read and write.

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use core::fmt;

use ndarray::{ErrorKind, ShapeError};
use nki_lang::{DType, HbmAccess, MAX_TENSOR_RANK, Program, SymbolValues};

use crate::budget::Meter;
use crate::element::Element;
use crate::grid::LaunchGrid;
use crate::shape::Shape;

/// A kernel input: a read-only HBM tensor with its dtype and shape (row-major, contiguous).
#[derive(Copy, Clone)]
pub struct HbmIn<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    /// The [`crate::DeviceTensor`]'s version, if it is one: what a core derived from these
    /// elements in an earlier launch of the same version still holds. `None` for borrowed
    /// host memory, which may change between launches unseen.
    pub(crate) version: Option<u64>,
}

impl<'a> HbmIn<'a> {
    /// Binds `data`, a contiguous row-major tensor of shape `shape`.
    ///
    /// Fails if `shape` has more than [`nki_lang::MAX_TENSOR_RANK`] axes, an axis above
    /// [`crate::shape::MAX_DIM`], or an element count other than `data.len()`.
    pub fn new<T: Element>(data: &'a [T], shape: &[usize]) -> Result<Self, ShapeError> {
        let shape = checked_shape(data.len(), shape)?;
        Ok(HbmIn {
            data: bytemuck::cast_slice(data),
            dtype: T::DTYPE,
            shape,
            version: None,
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.shape.as_slice()
    }
}

/// A kernel output: a writable HBM tensor with its dtype and shape (row-major, contiguous).
pub struct HbmOut<'a> {
    /// The tensor's bytes, or (while instances of a grid run on two threads) the part of them
    /// one thread may touch.
    pub(crate) data: &'a mut [u8],
    /// The element offset in the tensor of `data`'s first element.
    pub(crate) origin: usize,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
}

impl<'a> HbmOut<'a> {
    /// Binds `data`, a contiguous row-major tensor of shape `shape`.
    ///
    /// Fails like [`HbmIn::new`].
    pub fn new<T: Element>(data: &'a mut [T], shape: &[usize]) -> Result<Self, ShapeError> {
        let shape = checked_shape(data.len(), shape)?;
        Ok(HbmOut {
            data: bytemuck::cast_slice_mut(data),
            origin: 0,
            dtype: T::DTYPE,
            shape,
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.shape.as_slice()
    }

    /// A binding of nothing (a placeholder in a fixed-size table of outputs).
    pub(crate) fn empty() -> HbmOut<'a> {
        HbmOut {
            data: &mut [],
            origin: 0,
            dtype: DType::U8,
            shape: Shape::default(),
        }
    }
}

impl fmt::Debug for HbmIn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HbmIn({}{})", self.dtype, self.shape)
    }
}

impl fmt::Debug for HbmOut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HbmOut({}{})", self.dtype, self.shape)
    }
}

fn checked_shape(len: usize, dims: &[usize]) -> Result<Shape, ShapeError> {
    let shape = Shape::new(dims)?;
    if shape.len() != len {
        return Err(ShapeError::from_kind(ErrorKind::IncompatibleShape));
    }
    Ok(shape)
}

/// A launch that passed every check: the program, the bound symbols and the tensors. Run it
/// with [`crate::NeuronCore::execute`].
pub struct Bound<'a, 'p, 'o> {
    pub(crate) program: &'a Program<'p>,
    pub(crate) syms: SymbolValues,
    pub(crate) grid: LaunchGrid,
    pub(crate) inputs: &'a [HbmIn<'a>],
    pub(crate) outputs: &'a mut [HbmOut<'o>],
    /// What bounds the launch's work (set by the core that runs it).
    pub(crate) meter: &'a Meter,
}

impl<'a, 'p> Bound<'a, 'p, '_> {
    /// The program.
    pub fn program(&self) -> &'a Program<'p> {
        self.program
    }

    /// The values of the program's symbolic dimensions (by symbol index).
    pub fn symbols(&self) -> &SymbolValues {
        &self.syms
    }

    /// The launch grid.
    pub fn grid(&self) -> &LaunchGrid {
        &self.grid
    }
}

impl fmt::Debug for Bound<'_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let syms = &self.syms[..self.program.symbols().len()];
        f.debug_struct("Bound")
            .field("kernel", &self.program.name())
            .field("symbols", &syms)
            .field("grid", &self.grid)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish()
    }
}

impl Bound<'_, '_, '_> {
    /// The bytes and shape of HBM tensor `t` (an input, or an output read back).
    pub(crate) fn hbm(&self, t: usize) -> (&[u8], &Shape) {
        let n = self.inputs.len();
        match self.inputs.get(t) {
            Some(i) => (i.data, &i.shape),
            None => {
                let o = &self.outputs[t.saturating_sub(n)];
                (&*o.data, &o.shape)
            }
        }
    }

    /// Row-major element strides of the axes `access` indexes: its tensor's, or those of the
    /// reshape it indexes through (whose dimensions hold the tensor's elements: a launch
    /// checks it).
    pub(crate) fn access_strides(&self, access: &HbmAccess) -> [usize; MAX_TENSOR_RANK] {
        let reshape = access
            .reshape
            .and_then(|r| self.program.reshapes().get(usize::from(r)));
        let Some(r) = reshape else {
            return self.hbm(usize::from(access.tensor)).1.strides();
        };
        let mut strides = [0usize; MAX_TENSOR_RANK];
        let mut acc = 1usize;
        for (s, d) in strides.iter_mut().zip(r.shape).rev() {
            *s = acc;
            let n = usize::try_from(d.eval(&self.syms)).unwrap_or(usize::MAX);
            acc = acc.saturating_mul(n);
        }
        strides
    }

    /// The element offset in tensor `t` of the first byte [`Bound::hbm`] gives (0 but for
    /// the part of an output one thread of a grid launch owns).
    pub(crate) fn origin(&self, t: usize) -> usize {
        t.checked_sub(self.inputs.len())
            .and_then(|o| self.outputs.get(o))
            .map_or(0, |o| o.origin)
    }

    /// The bytes and shape of output tensor `t` (index in the program's tensor table).
    pub(crate) fn hbm_mut(&mut self, t: usize) -> (&mut [u8], &Shape) {
        let o = &mut self.outputs[t.saturating_sub(self.inputs.len())];
        (&mut *o.data, &o.shape)
    }
}
