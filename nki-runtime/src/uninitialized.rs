//! What a launch finds in memory it did not write: whatever the previous launch left (as on
//! the device, the default), or NaN, so that results depending on stale data show up as NaN
//! even without strict mode (Pallas' `uninitialized_memory='nan'`, NKI's simulator).

use nki_lang::{DType, DTypeClass, Memory, Program, SymbolValues};

use crate::bind::HbmOut;
use crate::cpu::convert::from_f32;
use crate::memory::{Psum, Sbuf};

/// What a plain launch finds in its tiles and outputs before it writes them
/// ([`crate::NeuronCore::with_uninitialized_memory`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UninitializedMemory {
    /// What the previous launch left in SBUF and PSUM, and what the output tensors hold: what a
    /// device does, and the fastest.
    #[default]
    Keep,
    /// Before every launch, each of the program's tiles and each output tensor is filled with
    /// its dtype's quiet NaN (integers and the NaN-less `float4_e2m1fn`: every byte `0xA5`;
    /// bool: 1), so an element computed
    /// from memory the launch did not write comes out NaN (or the pattern). Costs one pass
    /// over the tiles and outputs per launch.
    Nan,
}

impl UninitializedMemory {
    /// The default of new cores: `NKI_UNINITIALIZED_MEMORY=nan` makes it [`Self::Nan`],
    /// anything else or nothing [`Self::Keep`].
    pub fn from_env() -> UninitializedMemory {
        match std::env::var("NKI_UNINITIALIZED_MEMORY") {
            Ok(v) if v.eq_ignore_ascii_case("nan") => UninitializedMemory::Nan,
            Ok(_) | Err(_) => UninitializedMemory::Keep,
        }
    }
}

/// The bytes of one element of `dtype` that [`UninitializedMemory::Nan`] writes: a float's
/// quiet NaN; the integers' pattern for `float4_e2m1fn`, which has no NaN (its byte `0xA5` reads
/// as 3.0).
fn poison(dtype: DType) -> [u8; 4] {
    let bits = match dtype.class() {
        DTypeClass::Float if dtype.has_nan() => from_f32(dtype, f32::NAN),
        DTypeClass::Float | DTypeClass::Signed | DTypeClass::Unsigned => 0xA5A5_A5A5,
        DTypeClass::Bool => 1,
    };
    bits.to_le_bytes()
}

/// Fills `bytes` with copies of one element of `dtype`'s poison.
fn fill(bytes: &mut [u8], dtype: DType) {
    let size = dtype.size() as usize;
    let element = poison(dtype);
    for chunk in bytes.chunks_mut(size) {
        let n = chunk.len();
        chunk.copy_from_slice(&element[..n]);
    }
}

/// Fills every tile of `program` (each partition's bytes at the tile's address) and every
/// output with its dtype's poison.
pub(crate) fn poison_launch(
    program: &Program<'_>,
    syms: &SymbolValues,
    sbuf: &mut Sbuf,
    psum: &mut Psum,
    outputs: &mut [HbmOut<'_>],
) {
    let sbuf_stride = sbuf.partition_stride();
    for tile in program.tiles() {
        let (memory, stride) = match tile.memory {
            Memory::Sbuf => (sbuf.bytes_mut(), sbuf_stride),
            Memory::Psum => (psum.bytes_mut(), Psum::PARTITION_STRIDE),
            // Tiles live on chip (the checks refuse others).
            Memory::Hbm => continue,
        };
        // A tile of blocks counted at launch: the launch's blocks only.
        let bytes = usize::try_from(tile.bytes_in_use(syms)).unwrap_or(usize::MAX);
        let addr = tile.addr as usize;
        for part in 0..tile.shape.partitions() as usize {
            let at = part.saturating_mul(stride).saturating_add(addr);
            if let Some(run) = memory.get_mut(at..at.saturating_add(bytes)) {
                fill(run, tile.dtype);
            }
        }
    }
    // Outputs and scratch; a constant keeps its data.
    for (out, decl) in outputs.iter_mut().zip(program.owned()) {
        if decl.role != nki_lang::TensorRole::Constant {
            fill(out.data, out.dtype);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_dtype_gets_its_nan_or_the_pattern() {
        for d in DType::ALL {
            let p = poison(d);
            let bits = u32::from_le_bytes(p);
            match d.class() {
                DTypeClass::Float if d.has_nan() => {
                    assert!(crate::cpu::convert::to_f32(d, bits).is_nan(), "{d:?}")
                }
                DTypeClass::Float | DTypeClass::Signed | DTypeClass::Unsigned => {
                    assert_eq!(p[0], 0xA5, "{d:?}")
                }
                DTypeClass::Bool => assert_eq!(bits, 1),
            }
        }
    }
}
