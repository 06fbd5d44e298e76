//! Virtual registers and device loops at run time: the register instructions
//! (`register_move`, `register_load`, `register_store`) on an instance's register file, and the
//! trip count of a device loop (`fori_loop`, `dynamic_range`, `while_loop`) read from it.
//!
//! Registers hold 32-bit integers, 0 when an instance starts (`register_alloc()` without a
//! value is the model's 0). A `register_load` of a narrower integer sign- or zero-extends it as
//! its dtype says; a `register_store` writes the register's low bits.

// Register values come from kernel data: arithmetic on them is checked.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{DType, InstrData, MAX_DEVICE_TRIPS, MAX_REGISTERS, RegId, RegSrc};

use crate::operand::{Loc, Operands, Resolved};

/// One instance's register file.
pub(crate) type Registers = [i32; MAX_REGISTERS];

/// The value of register `r` (0 for one outside the file, which verification refuses).
pub(crate) fn get(regs: &Registers, r: RegId) -> i32 {
    regs.get(r.index()).copied().unwrap_or(0)
}

/// Register `r` becomes `v` (nothing for one outside the file).
pub(crate) fn set(regs: &mut Registers, r: RegId, v: i32) {
    if let Some(x) = regs.get_mut(r.index()) {
        *x = v;
    }
}

/// The value of a one-element integer operand's bits, extended to 32 bits by its dtype.
fn extend(dtype: DType, bits: u32) -> i32 {
    let [b0, b1, ..] = bits.to_le_bytes();
    match dtype {
        DType::I8 => i32::from(i8::from_le_bytes([b0])),
        DType::I16 => i32::from(i16::from_le_bytes([b0, b1])),
        DType::U8 => i32::from(b0),
        DType::U16 => i32::from(u16::from_le_bytes([b0, b1])),
        // 32 bits: the register's bits are the element's (the rules admit no other dtype).
        DType::I32
        | DType::U32
        | DType::F32
        | DType::Tf32
        | DType::Bf16
        | DType::F16
        | DType::F8E4M3
        | DType::F8E5M2
        | DType::Bool
        | DType::F8E4M3Fn
        | DType::F4E2M1Fn
        | DType::F8E8M0Fnu
        | DType::F8E5M2X4
        | DType::F8E4M3FnX4
        | DType::F4E2M1FnX4 => bits.cast_signed(),
    }
}

/// Byte range of the one element of `r` in SBUF.
fn span(r: &Resolved) -> Option<core::ops::Range<usize>> {
    if r.loc != Loc::Sbuf {
        return None;
    }
    let size = usize::try_from(r.dtype.size()).ok()?;
    let at = usize::try_from(r.pattern.base).ok()?.checked_mul(size)?;
    Some(at..at.checked_add(size)?)
}

/// Runs one register instruction (`ins.data` is [`InstrData::Register`]) on `regs` and SBUF.
pub(crate) fn step(
    regs: &mut Registers,
    data: InstrData,
    ops: &Operands,
    sbuf: &mut [u8],
) -> Result<(), String> {
    let InstrData::Register { reg, src, tile } = data else {
        return Err("not a register instruction".to_string());
    };
    match (src, tile) {
        (RegSrc::Imm(v), _) => set(regs, reg, v),
        (RegSrc::Reg(r), _) => {
            let v = get(regs, r);
            set(regs, reg, v);
        }
        (RegSrc::None, Some(_)) => {
            let r = ops
                .iter()
                .next()
                .ok_or("a register instruction without its tile")?;
            let at = span(r).ok_or("a register's element outside SBUF")?;
            let bytes = sbuf
                .get_mut(at)
                .ok_or("a register's element outside SBUF")?;
            if r.dir.writes() {
                let v = get(regs, reg).to_le_bytes();
                let n = bytes.len().min(4);
                bytes
                    .get_mut(..n)
                    .zip(v.get(..n))
                    .map(|(d, s)| d.copy_from_slice(s))
                    .ok_or("a register's element wider than 32 bits")?;
            } else {
                let mut word = [0u8; 4];
                let n = bytes.len().min(4);
                word.get_mut(..n)
                    .zip(bytes.get(..n))
                    .map(|(d, s)| d.copy_from_slice(s))
                    .ok_or("a register's element wider than 32 bits")?;
                set(regs, reg, extend(r.dtype, u32::from_le_bytes(word)));
            }
        }
        (RegSrc::None, None) => {}
    }
    Ok(())
}

/// The trip count of `fori_loop(lower, upper, step)` as Python's `range` counts it: 0 when
/// `upper ≤ lower`; else what the model's limit ([`MAX_DEVICE_TRIPS`]) refuses, as the launch's
/// error message.
pub(crate) fn fori_trips(lower: i32, upper: i32, step: i32) -> Result<i64, String> {
    let (lo, hi, s) = (i64::from(lower), i64::from(upper), i64::from(step));
    if s <= 0 {
        return Err(format!("a device loop's step {step} is not positive"));
    }
    let span = hi.checked_sub(lo).unwrap_or(0);
    if span <= 0 {
        return Ok(0);
    }
    let n = span
        .checked_add(s.checked_sub(1).unwrap_or(0))
        .and_then(|x| x.checked_div(s))
        .unwrap_or(i64::MAX);
    if n > MAX_DEVICE_TRIPS {
        return Err(format!(
            "dynamic_range({lower}, {upper}, {step}) from registers asks for {n} iterations, over the model's limit of {MAX_DEVICE_TRIPS} per run of a device loop"
        ));
    }
    Ok(n)
}

/// The error of a `while_loop` whose condition register is still nonzero after
/// [`MAX_DEVICE_TRIPS`] iterations.
pub(crate) fn while_runaway(cond: RegId, value: i32) -> String {
    format!(
        "while_loop: condition register r{} is still {value} after {MAX_DEVICE_TRIPS} iterations, the model's limit per run of a device loop",
        cond.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_count_as_pythons_range() {
        for (lo, hi, s) in [
            (0, 8, 1),
            (0, 8, 3),
            (3, 4, 2),
            (-5, 5, 4),
            (7, 7, 1),
            (9, 2, 1),
        ] {
            let expect = (i64::from(lo)..i64::from(hi))
                .step_by(usize::try_from(s).unwrap())
                .count();
            assert_eq!(fori_trips(lo, hi, s), Ok(i64::try_from(expect).unwrap()));
        }
        assert!(fori_trips(i32::MIN, i32::MAX, 1).is_err());
        assert_eq!(fori_trips(i32::MIN, i32::MAX, i32::MAX), Ok(3));
    }

    #[test]
    fn narrow_elements_extend_by_their_dtype() {
        assert_eq!(extend(DType::I8, 0xff), -1);
        assert_eq!(extend(DType::U8, 0xff), 255);
        assert_eq!(extend(DType::I16, 0x8000), -32768);
        assert_eq!(extend(DType::U32, 0xffff_ffff), -1);
    }
}
