//! `nc_stream_shuffle(src, dst, shuffle_mask)`: the Vector engine's data movement across the
//! partitions of each 32-partition quadrant.

use crate::span::Span;
use nki_lang::{Dst, InstrData, Opcode, SHUFFLE_QUADRANT, TileView};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

const NAME: &str = "nc_stream_shuffle";

impl Lowerer<'_> {
    /// `nc_stream_shuffle`: writes `dst` (returns nothing). `shuffle_mask` is an array literal
    /// of 32 integers, each a partition of the quadrant (0 to 31) or 255. The two accesses
    /// start where the engine can start them for the partitions it moves.
    pub(in super::super) fn nc_stream_shuffle(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let Some(a) =
            self.dst_call_args(NAME, dest, args, &["src", "dst", "shuffle_mask"], 3, span)
        else {
            return Value::Poison;
        };
        let (src_e, dst_e, mask_e) = (
            a[0].expect("required"),
            a[1].expect("required"),
            a[2].expect("required"),
        );
        let Some(mask) = self.shuffle_mask(mask_e) else {
            return Value::Poison;
        };
        let (Some(src), Some(dst)) = (
            self.tile_arg(src_e, Opcode::NcStreamShuffle, 1),
            self.tile_arg(dst_e, Opcode::NcStreamShuffle, 0),
        ) else {
            return Value::Poison;
        };
        let parts = src.shape.partitions().max(dst.shape.partitions());
        for (v, e) in [(&src, src_e), (&dst, dst_e)] {
            if !self.shuffle_start(v, parts, e.span()) {
                return Value::Poison;
            }
        }
        let Some(s) = self.view_id(src, src_e.span()) else {
            return Value::Poison;
        };
        let make = move |v| InstrData::Shuffle {
            dst: Dst::overwrite(v),
            src: s,
            mask,
        };
        let spans = InstrSpans::at(span)
            .with(0, dst_e.span())
            .with(1, src_e.span());
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        let opts = OpOptions::default();
        match self.emit_op(Opcode::NcStreamShuffle, &make, into, opts, spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }

    /// The 32 entries of a `shuffle_mask` array literal, each 0 to 255 (the rule checks the
    /// values an entry may take).
    fn shuffle_mask(&mut self, e: &Expr) -> Option<[u8; SHUFFLE_QUADRANT]> {
        let Expr::Array(items, _) = e else {
            self.error(
                e.span(),
                "`shuffle_mask` is an array of 32 integers: `[31, 0, 1, …, 30]`",
            );
            return None;
        };
        if items.len() != SHUFFLE_QUADRANT {
            self.error(
                e.span(),
                format!(
                    "`shuffle_mask` has 32 entries, one per partition of a quadrant, not {}",
                    items.len()
                ),
            );
            return None;
        }
        let mut mask = [0u8; SHUFFLE_QUADRANT];
        for (m, item) in mask.iter_mut().zip(items) {
            let n = self.int(item, "a `shuffle_mask` entry")?;
            let Ok(v) = u8::try_from(n) else {
                self.error(
                    item.span(),
                    "a `shuffle_mask` entry is a partition of the quadrant (0 to 31) or 255",
                );
                return None;
            };
            *m = v;
        }
        Some(mask)
    }

    /// Whether access `v` starts where the engine starts a shuffle of `parts` partitions: 0
    /// above 64, 0 or 64 above 32, a multiple of 32 otherwise (NKI's rule on
    /// `num_active_partitions`); an error at `span` if not.
    fn shuffle_start(&mut self, v: &TileView, parts: u32, span: Span) -> bool {
        let start = i64::from(v.part_start).saturating_add(v.part_var.constant);
        match nki_lang::rules::check_partition_start(parts, start, &v.part_var.coef) {
            Ok(()) => true,
            Err(_) => {
                let align = nki_lang::rules::partition_start_alignment(parts);
                self.error(
                    span,
                    format!(
                        "`{NAME}` of {parts} active partitions starts `src` and `dst` at a multiple of {align} (0 for more than 64, 0 or 64 for 33 to 64, a multiple of 32 otherwise)"
                    ),
                );
                false
            }
        }
    }
}
