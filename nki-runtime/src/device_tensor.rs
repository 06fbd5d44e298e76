//! Tensors resident in the modeled HBM.

use ndarray::{Array, ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn, ShapeError};

use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

use crate::bind::{HbmIn, HbmOut};
use crate::element::Element;
use crate::shape::Shape;

/// Why a tensor could not be created.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum TensorError {
    /// The shape is not a tensor's: rank above [`nki_lang::MAX_TENSOR_RANK`], an axis above
    /// [`crate::MAX_DIM`], a size that overflows, or an element count that does not match.
    #[error("invalid tensor shape: {0}")]
    Shape(#[from] ShapeError),
    /// The host could not allocate the tensor's memory.
    #[error("cannot allocate {bytes} bytes for a tensor")]
    Allocation {
        /// Bytes asked for.
        bytes: usize,
    },
}

/// `n` default elements, or the bytes that could not be allocated.
pub(crate) fn try_filled<T: Clone>(n: usize, value: T) -> Result<Vec<T>, TensorError> {
    let mut v = Vec::new();
    let bytes = n.saturating_mul(core::mem::size_of::<T>());
    v.try_reserve_exact(n)
        .map_err(|_| TensorError::Allocation { bytes })?;
    v.resize(n, value);
    Ok(v)
}

/// A version no tensor state has had yet: every tensor gets one when it is created, cloned or
/// handed out for writing, so that two equal versions are one tensor whose elements have not
/// changed in between.
fn new_version() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A tensor in the modeled device memory (HBM): contiguous row-major elements and an inline
/// shape of rank ≤ [`nki_lang::MAX_TENSOR_RANK`].
///
/// A tensor also carries a version that changes whenever its elements may change (through
/// [`DeviceTensor::as_mut_slice`] or [`DeviceTensor::arg_mut`]). A core keeps what it derived
/// from an input tensor's elements (the packed layouts of matmul operands read straight from
/// it) for the next launch that gets the same tensor at the same version, as device memory
/// keeps data between kernel launches.
///
/// Uploading ([`DeviceTensor::from_array`]) copies any ndarray layout into row-major order;
/// downloading ([`DeviceTensor::to_array`], [`DeviceTensor::into_array`]) gives an ndarray
/// back. Kernels take tensors through [`DeviceTensor::arg`] and [`DeviceTensor::arg_mut`].
#[derive(Debug)]
pub struct DeviceTensor<T: Element> {
    data: Vec<T>,
    shape: Shape,
    version: u64,
}

impl<T: Element> Clone for DeviceTensor<T> {
    fn clone(&self) -> Self {
        DeviceTensor::new(self.data.clone(), self.shape)
    }
}

/// Equal elements and shapes (whatever the versions).
impl<T: Element + PartialEq> PartialEq for DeviceTensor<T> {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape && self.data == other.data
    }
}

impl<T: Element> DeviceTensor<T> {
    fn new(data: Vec<T>, shape: Shape) -> Self {
        DeviceTensor {
            data,
            shape,
            version: new_version(),
        }
    }

    /// Uploads an array of any layout (strided, transposed, negative strides): the tensor
    /// holds its elements in logical row-major order.
    ///
    /// Fails if the array's rank exceeds [`nki_lang::MAX_TENSOR_RANK`].
    pub fn from_array<S, D>(a: &ArrayBase<S, D>) -> Result<Self, ShapeError>
    where
        S: Data<Elem = T>,
        D: Dimension,
    {
        let shape = Shape::new(a.shape())?;
        let data = match a.as_slice() {
            Some(s) => s.to_vec(),
            None => a.iter().copied().collect(),
        };
        Ok(DeviceTensor::new(data, shape))
    }

    /// A tensor of zeros.
    ///
    /// Fails on a rank above [`nki_lang::MAX_TENSOR_RANK`] or a size that overflows
    /// ([`TensorError::Shape`]), and when the host cannot allocate it
    /// ([`TensorError::Allocation`]).
    pub fn zeros(shape: &[usize]) -> Result<Self, TensorError> {
        let shape = Shape::new(shape)?;
        Ok(DeviceTensor::new(
            try_filled(shape.len(), T::default())?,
            shape,
        ))
    }

    /// A tensor from row-major elements.
    ///
    /// Fails if `data.len()` is not the shape's element count, or as [`DeviceTensor::zeros`].
    pub fn from_vec(shape: &[usize], data: Vec<T>) -> Result<Self, ShapeError> {
        let shape = Shape::new(shape)?;
        if shape.len() != data.len() {
            return Err(ShapeError::from_kind(ndarray::ErrorKind::IncompatibleShape));
        }
        Ok(DeviceTensor::new(data, shape))
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        self.shape.as_slice()
    }

    /// The elements, row-major.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The elements, row-major, writable. The tensor gets a new version: a core packs the
    /// operands it reads from the tensor anew at its next launch.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.version = new_version();
        &mut self.data
    }

    /// A view of the tensor as an ndarray.
    pub fn view(&self) -> ArrayViewD<'_, T> {
        ArrayViewD::from_shape(IxDyn(self.shape()), &self.data)
            .expect("a tensor's shape matches its length")
    }

    /// Downloads the tensor into a new ndarray.
    pub fn to_array(&self) -> ArrayD<T> {
        self.view().to_owned()
    }

    /// Downloads the tensor into an ndarray of dimension `D` without copying.
    ///
    /// Fails if the tensor's rank is not `D`'s.
    pub fn into_array<D: Dimension>(self) -> Result<Array<T, D>, ShapeError> {
        Array::from_shape_vec(IxDyn(self.shape.as_slice()), self.data)?.into_dimensionality()
    }

    /// The tensor as a kernel input.
    pub fn arg(&self) -> HbmIn<'_> {
        HbmIn {
            data: bytemuck::cast_slice(&self.data),
            dtype: T::DTYPE,
            shape: self.shape,
            version: Some(self.version),
        }
    }

    /// The tensor as a kernel output (which gives it a new version, as
    /// [`DeviceTensor::as_mut_slice`] does).
    pub fn arg_mut(&mut self) -> HbmOut<'_> {
        self.version = new_version();
        HbmOut {
            origin: 0,
            data: bytemuck::cast_slice_mut(&mut self.data),
            dtype: T::DTYPE,
            shape: self.shape,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;
    use ndarray::{Array2, Ix2, Ix3, arr2, s};

    #[test]
    fn upload_any_layout() {
        let a = Array2::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f32);
        let t = DeviceTensor::from_array(&a.t()).unwrap();
        assert_eq!(t.shape(), &[4, 3]);
        assert_eq!(t.to_array(), a.t().into_dyn());
        let r = a.slice(s![..;-1, 1..;2]);
        let t = DeviceTensor::from_array(&r).unwrap();
        assert_eq!(t.as_slice(), &[21.0, 23.0, 11.0, 13.0, 1.0, 3.0]);
        assert_eq!(t.into_array::<Ix2>().unwrap(), r);
    }

    #[test]
    fn versions_change_with_every_chance_to_write() {
        let mut t = DeviceTensor::from_array(&arr2(&[[1.0f32, 2.0]])).unwrap();
        let v = t.arg().version;
        assert!(v.is_some());
        assert_eq!(t.arg().version, v, "reading keeps the version");
        let _ = t.as_slice();
        assert_eq!(t.arg().version, v);
        let c = t.clone();
        assert_ne!(c.arg().version, v, "a clone is another tensor");
        assert_eq!(c, t, "equal elements compare equal whatever the versions");
        t.as_mut_slice();
        let w = t.arg().version;
        assert_ne!(w, v);
        t.arg_mut();
        assert_ne!(t.arg().version, w);
        let u = DeviceTensor::<f32>::zeros(&[1, 2]).unwrap();
        assert_ne!(u.arg().version, t.arg().version);
    }

    #[test]
    fn zeros_and_errors() {
        let t = DeviceTensor::<bf16>::zeros(&[2, 3]).unwrap();
        assert!(t.as_slice().iter().all(|&x| x == bf16::ZERO));
        assert!(t.clone().into_array::<Ix3>().is_err());
        assert!(DeviceTensor::<f32>::zeros(&[1; 7]).is_err());
        assert!(DeviceTensor::<f32>::from_vec(&[2, 2], vec![0.0; 3]).is_err());
    }

    #[test]
    fn a_tensor_too_large_for_the_host_is_an_error() {
        // 2^40 f32s (4 TiB): a valid shape that no host here can allocate.
        let err = DeviceTensor::<f32>::zeros(&[1 << 40]).unwrap_err();
        assert_eq!(err, TensorError::Allocation { bytes: 1 << 42 });
        assert!(matches!(
            DeviceTensor::<f32>::zeros(&[1 << 62, 4]),
            Err(TensorError::Shape(_))
        ));
        let big = ndarray::ArrayD::<f32>::zeros(IxDyn(&[1; 7]));
        assert!(DeviceTensor::from_array(&big).is_err());
        let t = DeviceTensor::from_array(&arr2(&[[1.0f32, 2.0]])).unwrap();
        assert_eq!(t.arg().shape(), &[1, 2]);
        assert_eq!(t.arg().dtype(), nki_lang::DType::F32);
    }
}
