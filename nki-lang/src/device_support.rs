//! What NKI 0.3 and later simulate but the device cannot run: the `nki.language` constructs its
//! release notes list as known issues, refused by `#[kernel(strict_hardware)]`.
//!
//! NKI's `nki.language` functions are wrappers over `nki.isa` instructions, and since NKI
//! 0.3.0 (SDK 2.29) the release notes (aws-neuron-sdk, `release-notes/components/nki.rst`,
//! "Known Issues" of NKI 0.3.0, repeated for the later releases) list four of them that the
//! CPU simulator runs and the compiler for Trainium does not:
//!
//! - `nki.language.divide`: "Division is not available as a hardware instruction"; the
//!   workaround is `nl.multiply(x, nl.reciprocal(y))` ([`Unsupported::Divide`]).
//! - `nki.language.fmod` and `nki.language.mod`: "Modulo operations are not available as
//!   hardware instructions" ([`Unsupported::Modulo`]).
//! - binary operations with broadcasting: "Operations like `nl.add(a, b)` require both
//!   operands to have the same shape" ([`Unsupported::Broadcast`]).
//! - `nki.language.matmul` without `transpose_x=True` ([`Unsupported::MatmulTranspose`]).
//!
//! This project simulates all four (as NKI's simulator does). The rules below say which of a
//! kernel's operations they are; the lowering asks them at each such operation when the
//! kernel opts in. They concern the language's elementwise operations (`x / y`, `x % y`,
//! `divide`, `mod`, `fmod`, `x + column`, ...) and `matmul`, not the ISA calls (`nc_matmul`,
//! `tensor_tensor` with an explicit `op`), which the notes do not list. An operand that is a
//! number (`x / 2.0`) is an immediate of `tensor_scalar`, not a second tile: only two tiles
//! can be broadcast, and a division or modulo by a number is still a division or modulo.

use thiserror::Error;

use crate::func::Alu;
use crate::shape::TileShape;

/// Where NKI documents the known issues.
pub const SOURCE: &str =
    "NKI 0.3.0+ release notes, known issues (aws-neuron-sdk release-notes/components/nki.rst)";

/// A construct that NKI 0.3+ simulates but the device cannot run.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Unsupported {
    /// A division of tiles (`/`, `divide`).
    #[error(
        "`strict_hardware`: `nki.language.divide` is not supported on the device, \"Division is not available as a hardware instruction\" ({SOURCE}); multiply by the reciprocal instead: `x * reciprocal(y)`"
    )]
    Divide,
    /// A remainder of tiles (`%`, `mod`, `fmod`).
    #[error(
        "`strict_hardware`: `nki.language.{name}` is not supported on the device, \"Modulo operations are not available as hardware instructions. These APIs work in simulation but fail when compiled for Trainium hardware\" ({SOURCE})"
    )]
    Modulo {
        /// `mod` or `fmod`.
        name: &'static str,
    },
    /// A binary operation of two tiles of different shapes.
    #[error(
        "`strict_hardware`: binary operations do not support broadcasting on the device, \"Operations like `nl.add(a, b)` require both operands to have the same shape\" ({SOURCE}); this one combines {a} with {b}: broadcast explicitly first (`broadcast_to`, a copy), or use `tensor_scalar` for a column"
    )]
    Broadcast {
        /// The first operand's shape.
        a: TileShape,
        /// The second operand's shape.
        b: TileShape,
    },
    /// `matmul` without `transpose_x = true`.
    #[error(
        "`strict_hardware`: `nki.language.matmul` without `transpose_x=True` is not supported on the device ({SOURCE}); call `matmul(x, y, transpose_x = true)` with `x` arranged as [K, M]"
    )]
    MatmulTranspose,
}

/// Whether an elementwise operation `alu` of the language (an operator or `nl` function) on a
/// tile can run on the device.
pub fn check_alu(alu: Alu) -> Result<(), Unsupported> {
    if alu == Alu::Divide {
        Err(Unsupported::Divide)
    } else if alu == Alu::Mod {
        Err(Unsupported::Modulo { name: "mod" })
    } else if alu == Alu::Fmod {
        Err(Unsupported::Modulo { name: "fmod" })
    } else {
        Ok(())
    }
}

/// Whether a binary operation of the language on two tiles of shapes `a` and `b` can run on
/// the device: only when the shapes are equal.
pub fn check_binary_shapes(a: &TileShape, b: &TileShape) -> Result<(), Unsupported> {
    if a == b {
        Ok(())
    } else {
        Err(Unsupported::Broadcast { a: *a, b: *b })
    }
}

/// Whether the language's `matmul` with `transpose_x` as given can run on the device.
pub fn check_matmul(transpose_x: bool) -> Result<(), Unsupported> {
    if transpose_x {
        Ok(())
    } else {
        Err(Unsupported::MatmulTranspose)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_known_issues() {
        assert_eq!(check_alu(Alu::Divide), Err(Unsupported::Divide));
        assert!(matches!(
            check_alu(Alu::Fmod),
            Err(Unsupported::Modulo { name: "fmod" })
        ));
        assert!(matches!(
            check_alu(Alu::Mod),
            Err(Unsupported::Modulo { name: "mod" })
        ));
        assert_eq!(check_alu(Alu::Add), Ok(()));
        assert_eq!(check_alu(Alu::Multiply), Ok(()));
        let a = TileShape::new(&[128, 512]).unwrap();
        let b = TileShape::new(&[128, 1]).unwrap();
        assert_eq!(check_binary_shapes(&a, &a), Ok(()));
        assert!(check_binary_shapes(&a, &b).is_err());
        assert_eq!(check_matmul(true), Ok(()));
        assert_eq!(check_matmul(false), Err(Unsupported::MatmulTranspose));
    }
}
