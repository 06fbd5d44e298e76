//! `tensor_copy_dynamic_src` and `tensor_copy_dynamic_dst` ([`nki_lang::InstrData::DynCopy`]):
//! the source (slot 1) or the destination (slot 0) shifted within each partition by
//! `value · stride` elements, `value` the int32 or uint32 element of the `[1, 1]` offset tile
//! (slot 2). [`shifted`] gives the operands of the copy it then is, checking that the shifted
//! operand stays inside its tile's partition rows; the engines, the reference interpreter and
//! strict mode all copy through it.

// Offsets come from kernel data: arithmetic on them is checked or saturating.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{DType, Instr, InstrData, Opcode, Program, VarValues};

use crate::operand::Operands;

/// The offset's value from the bits of its element.
pub(crate) fn value(dtype: DType, bits: u32) -> i64 {
    if dtype == DType::U32 {
        i64::from(bits)
    } else {
        i64::from(bits.cast_signed())
    }
}

/// The copy's operands (slot 0 `dst`, slot 1 `src`, the dynamic one of them shifted by
/// `value · stride`), or what is wrong when the shifted operand leaves its tile's partition
/// rows (this model's run-time error for a dynamic offset out of range).
pub(crate) fn shifted(
    p: &Program<'_>,
    ins: &Instr,
    ops: &Operands,
    vars: &VarValues,
    value: i64,
) -> Result<Operands, String> {
    let InstrData::DynCopy {
        dst, src, stride, ..
    } = ins.data
    else {
        return Err(format!("{} is not a dynamic copy", ins.mnemonic()));
    };
    // The shifted operand: the destination for `tensor_copy_dynamic_dst`, else the source.
    let (slot, shifted) = if ins.opcode == Opcode::TensorCopyDynamicDst {
        (0, dst.view)
    } else {
        (1, src)
    };
    let view = p
        .views()
        .get(shifted.index())
        .ok_or("a view outside the program")?;
    let tile = p
        .tiles()
        .get(usize::from(view.tile))
        .ok_or("a tile outside the program")?;
    // Each partition's elements of the view's dtype (a `t.view(dtype)` reads the tile's bytes).
    let row = tile
        .shape
        .free_elems()
        .saturating_mul(u64::from(tile.dtype.size()))
        .checked_div(u64::from(view.dtype_of(tile.dtype).size()))
        .unwrap_or(0);
    let row = i64::try_from(row).unwrap_or(i64::MAX);
    // The view's free offsets at this offset's value, within one partition row.
    let shift = value.saturating_mul(i64::from(stride));
    let start = view.offset.eval(vars).saturating_add(shift);
    let (mut lo, mut hi) = (start, start);
    for (j, &n) in view.shape.dims().iter().enumerate().skip(1) {
        let s = view.strides.get(j.saturating_sub(1)).copied().unwrap_or(0);
        let span = s.saturating_mul(i64::from(n).saturating_sub(1));
        lo = lo.saturating_add(span.min(0));
        hi = hi.saturating_add(span.max(0));
    }
    if lo < 0 || hi >= row {
        return Err(format!(
            "{} offset {value} moves its {} to elements {lo}..={hi} of each partition of tile `{}`, which has {row}",
            ins.opcode.info().name,
            if slot == 0 { "destination" } else { "source" },
            tile.name
        ));
    }
    let (mut d, mut r) = (*ops.get(0), *ops.get(1));
    let moved = if slot == 0 { &mut d } else { &mut r };
    moved.pattern.base = moved
        .pattern
        .base
        .saturating_add(isize::try_from(shift).unwrap_or(isize::MAX));
    Ok(Operands::default().with(d).with(r))
}

/// [`shifted`] with the offset read from `sbuf`; an error when it lies outside SBUF.
pub(crate) fn operands(
    p: &Program<'_>,
    ins: &Instr,
    ops: &Operands,
    vars: &VarValues,
    sbuf: &[u8],
) -> Result<Operands, String> {
    let offset = ops.get(2);
    let bits =
        crate::gather::read(sbuf, 4, offset.pattern.base).ok_or("a dynamic offset outside SBUF")?;
    shifted(p, ins, ops, vars, value(offset.dtype, bits))
}
