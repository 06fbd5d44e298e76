//! The shape/dtype rules of `gather_flattened` and `nc_n_gather`: `data` and `indices` are SBUF
//! tiles of two to four dimensions on the same partitions, the indices int32 or uint32
//! (`nc_n_gather`: uint32); the result has the indices' shape and the data's dtype
//! (`nc_n_gather`: exactly).

use super::infer::{Blame, InferIn, Inferred};
use crate::dtype::DType;
use crate::rules::RuleViolation;
use crate::target::Memory;

/// Most dimensions of `gather_flattened`'s operands (NKI: 2 to 4).
const MAX_RANK: usize = 4;

/// `gather_flattened`.
pub(super) fn gather_flattened(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    gather(x, &[DType::I32, DType::U32], "uint32 or int32", false)
}

/// `nc_n_gather` (NKI 0.6's ISA call): `gather_flattened` with uint32 indices only, and a
/// destination of the data's dtype (no conversion).
pub(super) fn nc_n_gather(x: &InferIn<'_>) -> Result<Option<Inferred>, Blame> {
    gather(x, &[DType::U32], "uint32", true)
}

/// The rule of a per-partition flattened gather whose indices have one of `index_dtypes`;
/// `same_dtype`: the destination must have the data's dtype.
fn gather(
    x: &InferIn<'_>,
    index_dtypes: &[DType],
    expected: &'static str,
    same_dtype: bool,
) -> Result<Option<Inferred>, Blame> {
    let (data, idx) = (x.view(1)?, x.view(2)?);
    if !index_dtypes.contains(&idx.dtype) {
        return Err(x.blame(
            2,
            RuleViolation::WrongDType {
                op: x.info().name,
                operand: "indices",
                expected,
                found: idx.dtype,
            },
        ));
    }
    for (slot, name, v) in [(1, "data", data), (2, "indices", idx)] {
        if v.shape.rank() > MAX_RANK {
            return Err(x.blame(
                slot,
                RuleViolation::RankLimit {
                    op: x.info().name,
                    operand: name,
                    rank: v.shape.rank(),
                    max: MAX_RANK,
                },
            ));
        }
    }
    if data.shape.partitions() != idx.shape.partitions() {
        return Err(x.blame(
            2,
            RuleViolation::PartitionMismatch {
                op: x.info().name,
                a: "data",
                a_shape: data.shape,
                b: "indices",
                b_shape: idx.shape,
            },
        ));
    }
    Ok(Some(Inferred {
        shape: idx.shape,
        dtype: data.dtype,
        fixed_dtype: same_dtype,
        memories: &[Memory::Sbuf],
    }))
}
