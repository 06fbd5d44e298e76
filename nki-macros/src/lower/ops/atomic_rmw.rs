//! `atomic_rmw(dst[idx, i_f], value, op = add)`: NKI's atomic read-modify-write of the HBM rows
//! a tile of indices names.

use crate::span::Span;
use nki_lang::{Alu, Instr, InstrData, Memory, Opcode, TileView};

use super::super::builtins::P;
use super::super::call::{Dest, OpOptions};
use super::super::value::{Access, Value};
use super::super::{InstrSpans, Lowerer};
use super::hbm_access;
use crate::parse::model::Arg;

impl Lowerer<'_> {
    /// `atomic_rmw(dst, value, op, mask)`: `dst` indexed by a tile of indices on its partition
    /// axis, `op` NKI's only one, `add`; a PSUM value goes through an SBUF copy, as `store`'s.
    pub(in super::super) fn atomic_rmw(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        if !matches!(dest, Dest::New(None)) {
            return self.error(span, "`atomic_rmw` returns nothing");
        }
        let Some(a) = self.args("atomic_rmw", args, &["dst", "value", "op", "mask"], 3, span)
        else {
            return Value::Poison;
        };
        let (dst_e, val_e, op_e) = (
            a[0].expect("required"),
            a[1].expect("required"),
            a[2].expect("required"),
        );
        let mut options = OpOptions::default();
        if let Some(e) = a[3]
            && !self.option_arg(P::Mask, e, &mut options)
        {
            return Value::Poison;
        }
        match self.alu_arg(op_e) {
            Some(Alu::Add) => {}
            Some(other) => {
                let msg = format!(
                    "`atomic_rmw` supports only `op = add` (NKI's `np.add`), not `{}`",
                    other.name()
                );
                return self.error(op_e.span(), msg);
            }
            None => return Value::Poison,
        }
        let access = self.access_arg(dst_e, Opcode::AtomicRmw, 1);
        let value = self.tile_arg(val_e, Opcode::AtomicRmw, 0);
        let (Some(access), Some(value)) = (access, value) else {
            return Value::Poison;
        };
        self.atomic_add_rows(&access, dst_e.span(), value, val_e.span(), span, options)
    }

    /// The `atomic_rmw` instruction adding `value` into the rows of `access` its index tile names
    /// (also `dma_compute`'s scatter read-modify-write); a PSUM value goes through an SBUF copy.
    pub(super) fn atomic_add_rows(
        &mut self,
        access: &Access,
        dst_span: Span,
        mut value: TileView,
        val_span: Span,
        span: Span,
        options: OpOptions,
    ) -> Value {
        let Some(ix) = access
            .indirect
            .filter(|ix| ix.2 == nki_lang::IndirectMode::Rows)
        else {
            return self.error(
                dst_span,
                "`atomic_rmw` updates rows named by a tile of indices: `atomic_rmw(dst[idx, i_f], value, op = add)`, `idx` a [P, 1] int32 tile in SBUF",
            );
        };
        if self.buf.tiles[value.tile as usize].memory == Memory::Psum {
            match self.sbuf_copy(value, val_span, options.mask) {
                Some(v) => value = v,
                None => return Value::Poison,
            }
        }
        let Some(hbm) = self.buf.add_access(hbm_access(access)) else {
            return self.error(span, "a kernel uses at most 65535 distinct HBM accesses");
        };
        let Some(tile) = self.view_id(value, val_span) else {
            return Value::Poison;
        };
        let Some((index, axis, mode)) = self.indirect_index(ix, dst_span) else {
            return Value::Poison;
        };
        let spans = InstrSpans::at(span)
            .with(0, val_span)
            .with(1, dst_span)
            .with(2, dst_span);
        let data = InstrData::Indirect {
            tile,
            hbm,
            index,
            axis,
            mode,
        };
        let instr = Instr {
            mask: options.mask,
            ..Instr::new(Opcode::AtomicRmw, data)
        };
        self.emit_checked(instr, spans);
        Value::Unit
    }
}
