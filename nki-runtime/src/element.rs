//! Host element types that map to the kernel language's [`DType`]s.

use nki_lang::DType;

mod sealed {
    /// Keeps [`super::Element`] implemented only for the types below.
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
}

/// A host type whose values can live in the modeled HBM: `f32`, [`half::bf16`] or
/// [`half::f16`].
///
/// The trait is sealed: its bit layout must be exactly the [`DType`] it names.
pub trait Element: bytemuck::Pod + Copy + Default + Send + Sync + 'static + sealed::Sealed {
    /// The kernel language's name for this type.
    const DTYPE: DType;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}

impl Element for half::bf16 {
    const DTYPE: DType = DType::Bf16;
}

impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_dtypes() {
        fn check<T: Element>() {
            assert_eq!(core::mem::size_of::<T>(), T::DTYPE.size() as usize);
        }
        check::<f32>();
        check::<half::bf16>();
        check::<half::f16>();
    }
}
