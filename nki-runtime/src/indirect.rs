//! NKI's indirect DMA ([`InstrData::Indirect`]: `load(src[idx, i_f])`, `store(dst[idx, i_f],
//! t)`, `atomic_rmw`): the HBM rows its index column names, read from SBUF when it runs.
//!
//! Its resolved HBM operand (slot 1) has the indirect axis at the axis' affine index (0 but
//! for hand-built programs) and, as partition stride, the axis' element stride
//! (`crate::operand::resolve`): partition `p`'s elements are at `base + row(p) · strides[0] +
//! Σ strides[j] · t_j`, `row(p)` the value of the index column (slot 2) at partition `p`. [`rows`] reads those values and checks them against the axis' size; [`row_operands`]
//! gives the operands of one partition's transfer, which is then an ordinary `load` or
//! `store` of one partition. The engines, the reference interpreter and strict mode all go
//! through these two functions, in partition order.
//!
//! A scalar-offset DMA ([`IndirectMode::Scalar`], `.ap(..., scalar_offset=)`) is one transfer:
//! [`shifted`] gives its operands, the access moved by the offset and checked.

// Row indices come from kernel data: arithmetic on them is checked or saturating.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{DType, IndirectMode, Instr, InstrData, MAX_TILE_RANK};

use crate::bind::Bound;
use crate::operand::{Operands, Resolved};

/// Most partitions an instruction's grid has.
const MAX_ROWS: usize = nki_lang::target::PARTITIONS as usize;

/// The rows one execution of an indirect DMA moves: for each partition of its (masked) grid, in
/// order, the HBM row its index names.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Rows {
    /// `rows[p]` for `p < len`.
    rows: [u64; MAX_ROWS],
    /// Number of partitions.
    len: usize,
}

impl Rows {
    /// The rows, by partition of the grid.
    pub(crate) fn rows(&self) -> &[u64] {
        &self.rows[..self.len.min(MAX_ROWS)]
    }
}

/// The value of the index column's element at partition `p` (slot 2 of an indirect DMA, an
/// int32 or uint32 SBUF view), as a signed integer; `None` past the end of SBUF.
pub(crate) fn index_value(sbuf: &[u8], index: &Resolved, p: usize) -> Option<i64> {
    let at = isize::try_from(p)
        .ok()
        .and_then(|p| p.checked_mul(index.pattern.strides[0]))
        .and_then(|o| o.checked_add(index.pattern.base))?;
    let byte = usize::try_from(at).ok()?.checked_mul(4)?;
    let bytes: [u8; 4] = sbuf.get(byte..byte.checked_add(4)?)?.try_into().ok()?;
    Some(if index.dtype == DType::U32 {
        i64::from(u32::from_le_bytes(bytes))
    } else {
        i64::from(i32::from_le_bytes(bytes))
    })
}

/// The rows of one execution of the indirect DMA `ins` with operands `ops`, read from `sbuf`;
/// `Err` with what is wrong when an index is outside the axis it indexes (NKI's run-time
/// error for an out-of-bound indirect index).
pub(crate) fn rows(
    b: &Bound<'_, '_, '_>,
    ins: &Instr,
    ops: &Operands,
    sbuf: &[u8],
) -> Result<Rows, String> {
    let InstrData::Indirect {
        hbm,
        axis,
        mode: IndirectMode::Rows,
        ..
    } = ins.data
    else {
        return Err(format!("{} has no rows of indices", ins.mnemonic()));
    };
    let p = b.program;
    let access = p
        .accesses()
        .get(hbm.index())
        .ok_or("an access outside the program")?;
    let axis = usize::from(axis);
    let reshape = access
        .reshape
        .and_then(|r| p.reshapes().get(usize::from(r)));
    let (name, size) = match reshape {
        Some(r) => (r.name, r.shape.get(axis).map_or(0, |d| d.eval(&b.syms))),
        None => {
            let t = usize::from(access.tensor);
            let name = p.tensors().get(t).map_or("?", |d| d.name);
            let shape = b.hbm(t).1;
            let n = shape.as_slice().get(axis).copied().unwrap_or(0);
            (name, u64::try_from(n).unwrap_or(u64::MAX))
        }
    };
    let index = ops.get(2);
    let n = index.dims[0].min(MAX_ROWS);
    let mut out = Rows {
        rows: [0; MAX_ROWS],
        len: n,
    };
    for (k, row) in out.rows[..n].iter_mut().enumerate() {
        let v = index_value(sbuf, index, k).ok_or("an index column outside SBUF")?;
        match u64::try_from(v) {
            Ok(r) if r < size => *row = r,
            _ => {
                return Err(format!(
                    "indirect index {v} (the index tile's element at partition {k} of the access) is out of bounds for dimension {axis} of tensor `{name}` (size {size})"
                ));
            }
        }
    }
    Ok(out)
}

/// The operands of a scalar-offset DMA ([`IndirectMode::Scalar`], NKI 0.6's
/// `.ap(..., scalar_offset=v, indirect_dim=d)`): the tile (slot 0) and the HBM access (slot 1),
/// that one starting `v · scale` elements of its tensor further, `v` the one element of the
/// offset tile (slot 2) read from `sbuf`. `Err` with what is wrong when `v` is outside
/// `0..bound` (NKI's run-time error for an out-of-bound index) or the shifted access leaves
/// its tensor (this model's check: no transfer reaches past a tensor). The engines, the
/// reference interpreter and strict mode all move through this function; the operands are
/// then an ordinary `load` or `store`.
pub(crate) fn shifted(
    b: &Bound<'_, '_, '_>,
    ins: &Instr,
    ops: &Operands,
    sbuf: &[u8],
) -> Result<Operands, String> {
    let InstrData::Indirect {
        hbm,
        mode: IndirectMode::Scalar { scale, bound },
        ..
    } = ins.data
    else {
        return Err(format!("{} has no scalar offset", ins.mnemonic()));
    };
    let p = b.program;
    let access = p
        .accesses()
        .get(hbm.index())
        .ok_or("an access outside the program")?;
    let t = usize::from(access.tensor);
    let name = p.tensors().get(t).map_or("?", |d| d.name);
    let v = index_value(sbuf, ops.get(2), 0).ok_or("a scalar offset outside SBUF")?;
    if v < 0 || v >= i64::from(bound) {
        return Err(format!(
            "scalar offset {v} is out of bounds for the indirect dimension of tensor `{name}` (size {bound})"
        ));
    }
    let out = moved(ops, scale, v);
    let hbm = out.get(1);
    let (mut lo, mut hi) = (hbm.pattern.base, hbm.pattern.base);
    for (&n, &s) in hbm.dims.iter().zip(&hbm.pattern.strides) {
        let n = isize::try_from(n).unwrap_or(isize::MAX).saturating_sub(1);
        let span = s.saturating_mul(n.max(0));
        lo = lo.saturating_add(span.min(0));
        hi = hi.saturating_add(span.max(0));
    }
    let elems = b.hbm(t).1.len();
    if lo < 0 || usize::try_from(hi).map_or(true, |h| h >= elems) {
        return Err(format!(
            "scalar offset {v} moves the access to elements {lo}..={hi} of tensor `{name}`, which has {elems}"
        ));
    }
    Ok(out)
}

/// The operands of a scalar-offset DMA whose offset holds `v`: the tile (slot 0) and the HBM
/// access (slot 1) `v · scale` elements further (saturating: [`shifted`] checks the range).
pub(crate) fn moved(ops: &Operands, scale: u32, v: i64) -> Operands {
    let shift = v.saturating_mul(i64::from(scale));
    let mut hbm = *ops.get(1);
    hbm.pattern.base = hbm
        .pattern
        .base
        .saturating_add(isize::try_from(shift).unwrap_or(isize::MAX));
    Operands::default().with(*ops.get(0)).with(hbm)
}

/// The operands of partition `k`'s transfer of an indirect DMA: the tile's partition `k`
/// (slot 0) and the access's elements on HBM row `row` (slot 1), one partition each.
pub(crate) fn row_operands(ops: &Operands, k: usize, row: u64) -> Operands {
    let one = |r: &Resolved, p: isize| {
        let mut r = *r;
        r.pattern.base = r
            .pattern
            .base
            .saturating_add(p.saturating_mul(r.pattern.strides[0]));
        r.dims[0] = 1;
        r
    };
    let k = isize::try_from(k).unwrap_or(isize::MAX);
    let row = isize::try_from(row).unwrap_or(isize::MAX);
    Operands::default()
        .with(one(ops.get(0), k))
        .with(one(ops.get(1), row))
}

/// The HBM operand of an indirect DMA as a range of its whole tensor: what it may touch,
/// whatever its indices (a timing model's dependence on the rows it cannot see).
pub(crate) fn whole_tensor(r: &Resolved) -> Resolved {
    let mut dims = [1usize; MAX_TILE_RANK];
    dims[1] = 1 << 40;
    let mut strides = [0isize; MAX_TILE_RANK];
    strides[1] = 1;
    Resolved {
        pattern: crate::operand::Pattern { base: 0, strides },
        dims,
        ..*r
    }
}
