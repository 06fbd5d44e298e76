//! Strict mode's view of an indirect DMA (`indirect_load`, `indirect_store`, `atomic_rmw`):
//! its row indices must be defined (a row named by bytes no instruction wrote is a transfer
//! hardware would aim anywhere), a scatter must not name one row from two partitions (the DMA
//! queues write a row's descriptors in no defined order), and each partition's transfer is
//! then checked as the one-partition `load` or `store` it is (`crate::indirect`): what it reads
//! must be written, what it writes must not race with another iteration or instance. A
//! `tensor_copy_dynamic_src`'s or `tensor_copy_dynamic_dst`'s offset must be defined likewise,
//! and the copy is then checked as the copy from its shifted source or into its shifted
//! destination. A scalar-offset DMA (`.ap(..., scalar_offset=)`) needs a defined offset and is
//! then checked as the `load` or `store` of its moved access.

use core::ops::ControlFlow;

use nki_lang::{DType, IndirectMode, Instr, InstrData, Opcode, VarValues};

use super::{Access, Fault, Strict};
use crate::exec::OnChip;
use crate::indirect::row_operands;
use crate::operand::{Operands, Resolved};

/// Whether a fault on an indirect DMA's HBM side is no fault: `atomic_rmw` updates of one
/// element from different iterations of an `affine_range` loop commute (they add), as NKI's
/// accumulation into a tile declared outside the loop does.
pub(super) fn commutes(instr: &Instr, f: &Fault) -> bool {
    instr.opcode == Opcode::AtomicRmw && matches!(f, Fault::Race { .. })
}

impl Strict<'_> {
    /// Refuses the launch unless `operand` (slot 2 of `instr`: a tile whose values the
    /// instruction reads as data, an offset or row indices, named by `what`) is defined.
    fn check_data_operand(
        &mut self,
        instr: &Instr,
        operand: &Resolved,
        vars: &VarValues,
        what: &str,
    ) -> ControlFlow<String> {
        let (tile, scope, _) = self.tile_of(instr, 2);
        let a = Access {
            tile,
            scope,
            reads: true,
            accumulates: false,
        };
        match self.check_on_chip(operand, a, None) {
            Some((n, b, f)) => {
                let place = format!("byte {b} of SBUF");
                let why = self.message(instr, operand, (n, place, String::new()), a, f, vars);
                ControlFlow::Break(format!("{what} must be defined: it {why}"))
            }
            None => ControlFlow::Continue(()),
        }
    }

    /// [`Strict::check`] of a `tensor_copy_dynamic_src` or `tensor_copy_dynamic_dst`: a defined
    /// offset, then the copy from the shifted source or into the shifted destination.
    pub(super) fn check_dynamic_copy(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
        memory: Option<OnChip<'_>>,
        me: u32,
    ) -> ControlFlow<String> {
        let Some(offset) = operands.slot(2).copied() else {
            return ControlFlow::Continue(());
        };
        let what = format!("the offset of {}", instr.opcode.info().name);
        self.check_data_operand(instr, &offset, vars, &what)?;
        // The interpreter shows it with the memories, after checking the offset's range.
        let Some(memory) = memory else {
            return ControlFlow::Continue(());
        };
        let bits = memory.bits(&offset, offset.pattern.base).unwrap_or(0);
        let value = crate::dyncopy::value(offset.dtype, bits);
        let Ok(shifted) = crate::dyncopy::shifted(self.program, instr, operands, vars, value)
        else {
            return ControlFlow::Continue(());
        };
        let dst_write = instr.data.accumulation();
        self.check_operands(pc, instr, &shifted, vars, Some(memory), me, dst_write)
    }

    /// [`Strict::check`] of an indirect DMA (see the module documentation).
    pub(super) fn check_indirect(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
        memory: Option<OnChip<'_>>,
        me: u32,
    ) -> ControlFlow<String> {
        let Some(index) = operands.slot(2).copied() else {
            return ControlFlow::Continue(());
        };
        if let InstrData::Indirect {
            mode: IndirectMode::Scalar { scale, .. },
            ..
        } = instr.data
        {
            let what = "the scalar offset of a DMA (`.ap(..., scalar_offset=)`)";
            self.check_data_operand(instr, &index, vars, what)?;
            // The interpreter shows it with the memories, after checking the offset's range.
            let Some(memory) = memory else {
                return ControlFlow::Continue(());
            };
            let bits = memory.bits(&index, index.pattern.base).unwrap_or(0);
            let v = crate::dyncopy::value(index.dtype, bits);
            let moved = crate::indirect::moved(operands, scale, v);
            let dst_write = instr.data.accumulation();
            return self.check_operands(pc, instr, &moved, vars, Some(memory), me, dst_write);
        }
        self.check_data_operand(instr, &index, vars, "the row indices of an indirect DMA")?;
        // The interpreter shows an indirect DMA with the memories, after checking its rows.
        let Some(memory) = memory else {
            return ControlFlow::Continue(());
        };
        let rows: Vec<u64> = (0..index.dims[0])
            .map(|k| {
                let at = isize::try_from(k)
                    .unwrap_or(isize::MAX)
                    .saturating_mul(index.pattern.strides[0])
                    .saturating_add(index.pattern.base);
                let bits = memory.bits(&index, at).unwrap_or(0);
                if index.dtype == DType::U32 {
                    u64::from(bits)
                } else {
                    u64::try_from(bits.cast_signed()).unwrap_or(u64::MAX)
                }
            })
            .collect();
        if instr.opcode == Opcode::IndirectStore {
            for (k, row) in rows.iter().enumerate() {
                if let Some(j) = rows[..k].iter().position(|r| r == row) {
                    let hbm = operands.get(1);
                    let what = self.describe(instr, hbm.slot, hbm);
                    return ControlFlow::Break(format!(
                        "scatters partitions {j} and {k} of its tile to row {row} of {what}: the DMA queues write one row's transfers in no defined order, so which value the row keeps is a race (make the indices distinct, or add with `atomic_rmw`); {}",
                        super::LoopValues(vars)
                    ));
                }
            }
        }
        let dst_write = instr.data.accumulation();
        let row_elems: usize = operands.get(0).dims[1..].iter().product();
        for (k, &row) in rows.iter().enumerate() {
            let one = row_operands(operands, k, row);
            self.row_offset = k.saturating_mul(row_elems);
            let checked = self.check_operands(pc, instr, &one, vars, Some(memory), me, dst_write);
            self.row_offset = 0;
            checked?;
        }
        ControlFlow::Continue(())
    }
}
