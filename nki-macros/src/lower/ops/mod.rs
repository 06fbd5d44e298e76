//! The language's functions that need more than the opcode table: `load`, `store`, `nc_matmul`,
//! `matmul`, `copy`, `nc_transpose`, the creation functions and `arange`.

mod atomic_rmw;
mod constant;
mod create;
mod cumulative;
mod device_loop;
mod dma;
mod dma_compute;
mod dyncopy;
mod elementwise;
mod exponential;
pub(super) mod isa;
mod local_gather;
mod mx;
mod nonzero;
mod random;
mod range_select;
mod reduction;
mod select_reduce;
mod shuffle;
mod tensor;
mod topk;
mod xorwow;

use nki_lang::{AxisIndex, HbmAccess, MAX_TENSOR_RANK};

use super::value::Access;
use crate::parse::model::Expr;

/// The member an enumeration argument names: `skip`, `oob_mode.skip`, `nisa::oob_mode::skip`.
fn member_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Name(id) => Some(id.to_string()),
        Expr::Field { field, .. } => Some(field.to_string()),
        _ => None,
    }
}

/// The IR access of an indexed tensor: one affine index per tensor axis over the access's grid.
fn hbm_access(a: &Access) -> HbmAccess {
    let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
    for (k, idx) in a.axes.iter().enumerate().take(MAX_TENSOR_RANK) {
        axes[k] = AxisIndex {
            start: idx.lin,
            grid: idx.grid,
        };
    }
    HbmAccess {
        // At most MAX_TENSORS tensors and MAX_TENSOR_RANK axes.
        tensor: u8::try_from(a.tensor).unwrap_or(u8::MAX),
        reshape: a.reshape.map(|r| u8::try_from(r).unwrap_or(u8::MAX)),
        rank: u8::try_from(a.axes.len()).unwrap_or(u8::MAX),
        shape: a.shape,
        axes,
    }
}
