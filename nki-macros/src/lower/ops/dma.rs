//! `load` and `store`.

use crate::span::Span;
use nki_lang::{Dst, Instr, InstrData, Memory, Opcode, TileView};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use super::hbm_access;
use crate::parse::model::Arg;

impl Lowerer<'_> {
    /// `load(src, dtype)`: an HBM access into a new SBUF tile (or the destination view).
    pub(in super::super) fn load(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let Some(a) = self.args("load", args, &["src", "dtype"], 1, span) else {
            return Value::Poison;
        };
        let src_e = a[0].expect("required");
        let Some(access) = self.access_arg(src_e, Opcode::Load, 1) else {
            return Value::Poison;
        };
        let dtype = match a[1].map(|d| self.dtype_arg(d)) {
            Some(None) => return Value::Poison,
            Some(d) => d,
            None => None,
        };
        let Some(hbm) = self.buf.add_access(hbm_access(&access)) else {
            return self.error(span, "a kernel uses at most 65535 distinct HBM accesses");
        };
        let spans = InstrSpans::at(span).with(1, src_e.span());
        let options = OpOptions {
            dtype,
            ..OpOptions::default()
        };
        let make = |tile| InstrData::Dma { tile, hbm };
        match self.emit_op(Opcode::Load, &make, dest, options, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `store(dst, value)`: a tile into an HBM output; a PSUM value goes through an SBUF copy,
    /// as NKI does.
    pub(in super::super) fn store(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        if !matches!(dest, Dest::New(None)) {
            return self.error(span, "`store` returns nothing");
        }
        let Some(a) = self.args("store", args, &["dst", "value"], 2, span) else {
            return Value::Poison;
        };
        let (dst_e, val_e) = (a[0].expect("required"), a[1].expect("required"));
        let access = self.access_arg(dst_e, Opcode::Store, 1);
        let value = self.tile_arg(val_e, Opcode::Store, 0);
        let (Some(access), Some(mut value)) = (access, value) else {
            return Value::Poison;
        };
        if self.buf.tiles[value.tile as usize].memory == Memory::Psum {
            match self.to_sbuf(value, val_e.span()) {
                Some(v) => value = v,
                None => return Value::Poison,
            }
        }
        let Some(hbm) = self.buf.add_access(hbm_access(&access)) else {
            return self.error(span, "a kernel uses at most 65535 distinct HBM accesses");
        };
        let Some(tile) = self.view_id(value, val_e.span()) else {
            return Value::Poison;
        };
        let spans = InstrSpans::at(span)
            .with(0, val_e.span())
            .with(1, dst_e.span());
        self.emit_checked(
            Instr::new(Opcode::Store, InstrData::Dma { tile, hbm }),
            spans,
        );
        Value::Unit
    }

    /// A copy of a PSUM view into a new SBUF tile of the same dtype.
    fn to_sbuf(&mut self, value: TileView, span: Span) -> Option<TileView> {
        let tile = &self.buf.tiles[value.tile as usize];
        let (dtype, shape) = (tile.dtype, value.shape);
        let Value::Tile(tmp) = self.new_tile(None, Memory::Sbuf, dtype, shape, span) else {
            return None;
        };
        let (src, dst) = (self.view_id(value, span)?, self.view_id(tmp, span)?);
        let data = InstrData::Unary {
            dst: Dst::overwrite(dst),
            src,
        };
        self.emit_checked(Instr::new(Opcode::TensorCopy, data), InstrSpans::at(span))
            .then_some(tmp)
    }
}
