//! The NKI kernel language: element types, shapes, the instruction set and the hardware's rules.
pub mod dtype;
pub use dtype::DType;
