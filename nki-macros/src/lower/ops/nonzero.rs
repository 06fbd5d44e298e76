//! `nonzero_with_count(dst, src, index_offset, padding_val)`: the GpSimd engine's compaction of
//! the positions of nonzero elements (NeuronCore-v3 and newer), on partitions `0, 16, …, 112`.

use crate::span::Span;
use nki_lang::{Dst, GATHER_GROUP, InstrData, Opcode, TileView};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

const NAME: &str = "nonzero_with_count";

impl Lowerer<'_> {
    /// `nonzero_with_count`: writes `dst` (returns nothing). `index_offset` (default 0) and
    /// `padding_val` (default -1) are compile-time 32-bit integers. Both accesses start on a
    /// GpSimd core's first partition (a multiple of 16), where the engine reads and writes.
    pub(in super::super) fn nonzero_with_count(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = ["dst", "src", "index_offset", "padding_val"];
        let Some(a) = self.dst_call_args(NAME, dest, args, &params, 2, span) else {
            return Value::Poison;
        };
        let mut imm = [0i32, -1];
        for (j, k) in [(0usize, 2usize), (1, 3)] {
            let Some(e) = a[k] else { continue };
            let what = format!("`{}`", params[k]);
            let Some(n) = self.int(e, &what) else {
                return Value::Poison;
            };
            match i32::try_from(n) {
                Ok(n) => imm[j] = n,
                Err(_) => {
                    return self.error(
                        e.span(),
                        format!("{what} of `{NAME}` is a 32-bit integer (int32)"),
                    );
                }
            }
        }
        let (dst_e, src_e) = (a[0].expect("required"), a[1].expect("required"));
        let (Some(dst), Some(src)) = (
            self.tile_arg(dst_e, Opcode::NonzeroWithCount, 0),
            self.tile_arg(src_e, Opcode::NonzeroWithCount, 1),
        ) else {
            return Value::Poison;
        };
        for (v, e) in [(&src, src_e), (&dst, dst_e)] {
            if !self.core_aligned(v, e) {
                return Value::Poison;
            }
        }
        let Some(s) = self.view_id(src, src_e.span()) else {
            return Value::Poison;
        };
        let [offset, padding] = imm;
        let make = move |v| InstrData::Nonzero {
            dst: Dst::overwrite(v),
            src: s,
            offset,
            padding,
        };
        let spans = InstrSpans::at(span)
            .with(0, dst_e.span())
            .with(1, src_e.span());
        let into = Dest::Into {
            view: dst,
            span: dst_e.span(),
            accumulate: None,
        };
        match self.emit_op(
            Opcode::NonzeroWithCount,
            &make,
            into,
            OpOptions::default(),
            spans,
        ) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }

    /// Whether access `v` starts on a multiple of 16 partitions (each GpSimd core's partition
    /// 0) for every value of its loop variables; an error at `e` if not.
    fn core_aligned(&mut self, v: &TileView, e: &Expr) -> bool {
        let group = i64::try_from(GATHER_GROUP).unwrap_or(i64::MAX);
        let start = i64::from(v.part_start).saturating_add(v.part_var.constant);
        let on_core = |n: i64| n.checked_rem(group) == Some(0);
        let aligned = on_core(start) && v.part_var.coef.iter().all(|&c| on_core(c));
        if !aligned {
            self.error(
                e.span(),
                format!(
                    "`{NAME}` works on partition 0 of each GpSimd core's 16: `src` and `dst` start at a partition that is a multiple of 16"
                ),
            );
        }
        aligned
    }
}
