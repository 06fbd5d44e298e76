//! `local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices, mask)`: the GpSimd
//! engine's gather within each group of 16 partitions.

use crate::span::Span;
use nki_lang::{Dst, GATHER_GROUP, InstrData, Opcode};

use super::super::builtins::P;
use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

const NAME: &str = "local_gather";

impl Lowerer<'_> {
    /// `local_gather`: a new tile (or the destination it is assigned to) of
    /// `num_valid_indices · num_elem_per_idx` elements per partition. `num_valid_indices`
    /// defaults to every index of a group (16 · the index tile's free size).
    pub(in super::super) fn local_gather(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = [
            "src_buffer",
            "index",
            "num_elem_per_idx",
            "num_valid_indices",
            "mask",
        ];
        let Some(a) = self.args(NAME, args, &params, 2, span) else {
            return Value::Poison;
        };
        let mut opts = OpOptions::default();
        if let Some(e) = a[4]
            && !self.option_arg(P::Mask, e, &mut opts)
        {
            return Value::Poison;
        }
        let (src_e, index_e) = (a[0].expect("required"), a[1].expect("required"));
        let (Some(src), Some(index)) = (
            self.tile_arg(src_e, Opcode::LocalGather, 1),
            self.tile_arg(index_e, Opcode::LocalGather, 2),
        ) else {
            return Value::Poison;
        };
        let elems = match a[2] {
            None => 1,
            Some(e) => match self.small_int(e, "`num_elem_per_idx`") {
                Some(n) => n,
                None => return Value::Poison,
            },
        };
        let all = index.shape.free_elems().saturating_mul(GATHER_GROUP as u64);
        let valid = match a[3] {
            None => u16::try_from(all).unwrap_or(u16::MAX),
            Some(e) => match self.small_int(e, "`num_valid_indices`") {
                Some(n) => n,
                None => return Value::Poison,
            },
        };
        let (Some(s), Some(i)) = (
            self.view_id(src, src_e.span()),
            self.view_id(index, index_e.span()),
        ) else {
            return Value::Poison;
        };
        let write = self.write_for(&dest);
        let make = move |v| InstrData::LocalGather {
            dst: Dst { view: v, write },
            src: s,
            index: i,
            elems,
            valid,
        };
        let mut spans = InstrSpans::at(span)
            .with(1, src_e.span())
            .with(2, index_e.span());
        // The counts' rule errors point at the whole call; name the argument when given.
        if let Some(e) = a[3].or(a[2]) {
            spans.whole = e.span();
        }
        match self.emit_op(Opcode::LocalGather, &make, dest, opts, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// A compile-time integer argument that fits its field (`T`): else an error naming it.
    fn small_int<T: TryFrom<i64>>(&mut self, e: &Expr, what: &str) -> Option<T> {
        let n = self.int(e, what)?;
        match T::try_from(n) {
            Ok(v) => Some(v),
            Err(_) => {
                self.error(e.span(), format!("{what} {n} is out of range"));
                None
            }
        }
    }
}
