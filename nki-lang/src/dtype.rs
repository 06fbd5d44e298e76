//! Element types of tensors and tiles.

use core::fmt;

/// An element type of an HBM tensor or an on-chip tile.
///
/// The names follow NKI (`nl.bfloat16`, `nl.float16`, `nl.float32`); in a kernel body they are
/// written the way Rust spells the matching host types: `bf16`, `f16`, `f32`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// bfloat16: 1 sign, 8 exponent, 7 mantissa bits.
    Bf16,
    /// IEEE binary16.
    F16,
}

impl DType {
    /// Every element type, in a fixed order.
    pub const ALL: [DType; 3] = [DType::F32, DType::Bf16, DType::F16];

    /// Size of one element in bytes, as stored in HBM, SBUF and PSUM.
    pub const fn size(self) -> u32 {
        match self {
            DType::F32 => 4,
            DType::Bf16 | DType::F16 => 2,
        }
    }

    /// The name used in kernel bodies and listings (`bf16`, `f16`, `f32`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Bf16 => "bf16",
            DType::F16 => "f16",
        }
    }

    /// NKI's name of the type (`nl.bfloat16`, ...), used in diagnostics.
    pub const fn nki_name(self) -> &'static str {
        match self {
            DType::F32 => "nl.float32",
            DType::Bf16 => "nl.bfloat16",
            DType::F16 => "nl.float16",
        }
    }

    /// Parses a kernel-body type name: the Rust spelling (`bf16`) or NKI's (`bfloat16`).
    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "f32" | "float32" | "fp32" => DType::F32,
            "bf16" | "bfloat16" => DType::Bf16,
            "f16" | "float16" | "fp16" => DType::F16,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
