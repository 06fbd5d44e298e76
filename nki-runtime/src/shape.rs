//! The concrete shape of an HBM tensor, stored inline.

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use core::fmt;

use ndarray::{Dimension, ErrorKind, ShapeError};
use nki_lang::MAX_TENSOR_RANK;

/// Largest size of one tensor axis (2⁴⁰ elements). Far beyond any memory, it keeps every
/// index computation of a launch inside `i64`.
pub const MAX_DIM: usize = 1 << 40;

// The checker refuses larger fixed dimensions at compile time: the same limit.
const _: () = assert!(MAX_DIM as u64 == nki_lang::MAX_TENSOR_DIM);

/// The dimensions of an HBM tensor, row-major, up to [`MAX_TENSOR_RANK`] of them, stored
/// inline (no heap).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    dims: [usize; MAX_TENSOR_RANK],
    rank: u8,
}

impl Shape {
    /// A shape from its dimensions.
    ///
    /// Fails with [`ErrorKind::Unsupported`] above rank [`MAX_TENSOR_RANK`] and with
    /// [`ErrorKind::Overflow`] when an axis exceeds [`MAX_DIM`] or the tensor could not be
    /// allocated or viewed: the product of its non-zero axes, in elements of up to 4 bytes,
    /// must fit in `isize::MAX` bytes.
    pub fn new(dims: &[usize]) -> Result<Shape, ShapeError> {
        if dims.len() > MAX_TENSOR_RANK {
            return Err(ShapeError::from_kind(ErrorKind::Unsupported));
        }
        if dims.iter().any(|&d| d > MAX_DIM) {
            return Err(ShapeError::from_kind(ErrorKind::Overflow));
        }
        let mut out = Shape {
            dims: [0; MAX_TENSOR_RANK],
            // At most MAX_TENSOR_RANK, checked above.
            rank: u8::try_from(dims.len()).unwrap_or(u8::MAX),
        };
        out.dims[..dims.len()].copy_from_slice(dims);
        out.checked_len()
            .ok_or(ShapeError::from_kind(ErrorKind::Overflow))?;
        Ok(out)
    }

    /// The dimensions.
    pub fn as_slice(&self) -> &[usize] {
        &self.dims[..self.rank as usize]
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Number of elements (1 for rank 0).
    pub fn len(&self) -> usize {
        // `new` checked that the product fits.
        self.as_slice().iter().product()
    }

    /// Whether the shape holds no element.
    pub fn is_empty(&self) -> bool {
        self.as_slice().contains(&0)
    }

    /// The shape as an ndarray dimension of type `D`, or `None` if `D` has another rank.
    pub fn to_dim<D: Dimension>(&self) -> Option<D> {
        if D::NDIM.is_some_and(|n| n != self.rank()) {
            return None;
        }
        let mut d = D::zeros(self.rank());
        for (i, &n) in self.as_slice().iter().enumerate() {
            d[i] = n;
        }
        Some(d)
    }

    /// Row-major element strides.
    pub(crate) fn strides(&self) -> [usize; MAX_TENSOR_RANK] {
        let mut s = [0; MAX_TENSOR_RANK];
        let mut acc: usize = 1;
        for a in (0..self.rank()).rev() {
            s[a] = acc;
            // Fits usize: a shape's element count is checked when it is made.
            acc = acc.saturating_mul(self.dims[a]);
        }
        s
    }

    /// The element count if every view of the shape can exist: the product of the non-zero
    /// axes (ndarray's rule, which counts them even when another axis is 0) fits, and so many
    /// elements of the widest dtype (4 bytes) fit in `isize::MAX` bytes.
    fn checked_len(&self) -> Option<usize> {
        let nonzero = self
            .as_slice()
            .iter()
            .filter(|&&d| d != 0)
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
        if nonzero > isize::MAX as usize / 4 {
            return None;
        }
        Some(self.as_slice().iter().product())
    }
}

impl AsRef<[usize]> for Shape {
    fn as_ref(&self) -> &[usize] {
        self.as_slice()
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.as_slice().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Ix2, IxDyn};

    #[test]
    fn new_and_accessors() {
        let s = Shape::new(&[2, 3, 4]).unwrap();
        assert_eq!(s.as_slice(), &[2, 3, 4]);
        assert_eq!(s.rank(), 3);
        assert_eq!(s.len(), 24);
        assert_eq!(s.strides()[..3], [12, 4, 1]);
        assert_eq!(s.to_string(), "[2, 3, 4]");
        assert_eq!(format!("{s:?}"), "[2, 3, 4]");
        assert!(s.to_dim::<Ix2>().is_none());
        assert_eq!(s.to_dim::<IxDyn>().unwrap(), IxDyn(&[2, 3, 4]));
        assert_eq!(
            Shape::new(&[5, 6]).unwrap().to_dim::<Ix2>(),
            Some(Ix2(5, 6))
        );
    }

    #[test]
    fn limits() {
        assert!(Shape::new(&[1; 7]).is_err());
        assert!(Shape::new(&[MAX_DIM + 1]).is_err());
        assert!(Shape::new(&[MAX_DIM, MAX_DIM]).is_err());
        assert!(Shape::new(&[MAX_DIM, 0]).unwrap().is_empty());
        assert_eq!(Shape::new(&[]).unwrap().len(), 1);
    }
}
