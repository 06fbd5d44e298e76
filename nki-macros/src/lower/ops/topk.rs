//! `topk(val_dst, idx_dst, src, n)`: the GpSimd engine's K largest values of each 16-partition
//! snake (NeuronCore-v3 and newer).

use crate::span::Span;
use nki_lang::{Dst, GATHER_GROUP, InstrData, Opcode, TileView};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

const NAME: &str = "topk";

impl Lowerer<'_> {
    /// `topk`: writes `val_dst` and `idx_dst` (returns nothing; keywords or positional in
    /// NKI's order). `n` is a compile-time integer; the three accesses start on a multiple of
    /// 16 partitions (each snake is one group of 16).
    pub(in super::super) fn topk(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        let params = ["val_dst", "idx_dst", "src", "n"];
        if !matches!(dest, Dest::New(None)) {
            return self.error(
                span,
                format!("`{NAME}` writes its `val_dst` and `idx_dst` and returns nothing"),
            );
        }
        let Some(a) = self.args(NAME, args, &params, 4, span) else {
            return Value::Poison;
        };
        let (val_e, idx_e, src_e, n_e) = (
            a[0].expect("required"),
            a[1].expect("required"),
            a[2].expect("required"),
            a[3].expect("required"),
        );
        let Some(n) = self.int(n_e, "`n`") else {
            return Value::Poison;
        };
        let Ok(n) = u16::try_from(n) else {
            return self.error(
                n_e.span(),
                format!("`n` of `{NAME}` is a number of values 8 <= n < 65536, not {n}"),
            );
        };
        let (Some(val), Some(idx), Some(src)) = (
            self.tile_arg(val_e, Opcode::TopK, 0),
            self.tile_arg(idx_e, Opcode::TopK, 2),
            self.tile_arg(src_e, Opcode::TopK, 1),
        ) else {
            return Value::Poison;
        };
        for (v, e) in [(&src, src_e), (&val, val_e), (&idx, idx_e)] {
            if !self.group_aligned(v, e) {
                return Value::Poison;
            }
        }
        let (Some(s), Some(i)) = (
            self.view_id(src, src_e.span()),
            self.view_id(idx, idx_e.span()),
        ) else {
            return Value::Poison;
        };
        let make = move |v| InstrData::TopK {
            val: Dst::overwrite(v),
            idx: i,
            src: s,
            n,
        };
        let spans = InstrSpans::at(span)
            .with(0, val_e.span())
            .with(1, src_e.span())
            .with(2, idx_e.span());
        let into = Dest::Into {
            view: val,
            span: val_e.span(),
            accumulate: None,
        };
        match self.emit_op(Opcode::TopK, &make, into, OpOptions::default(), spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }

    /// Whether access `v` starts on a multiple of 16 partitions for every value of its loop
    /// variables (a snake is a group of 16 partitions); an error at `e` if not.
    fn group_aligned(&mut self, v: &TileView, e: &Expr) -> bool {
        let group = i64::try_from(GATHER_GROUP).unwrap_or(i64::MAX);
        let start = i64::from(v.part_start).saturating_add(v.part_var.constant);
        let on_group = |n: i64| n.checked_rem(group) == Some(0);
        let aligned = on_group(start) && v.part_var.coef.iter().all(|&c| on_group(c));
        if !aligned {
            self.error(
                e.span(),
                format!(
                    "`{NAME}` works on snakes of 16 partitions: `src`, `val_dst` and `idx_dst` start at a partition that is a multiple of 16"
                ),
            );
        }
        aligned
    }
}
