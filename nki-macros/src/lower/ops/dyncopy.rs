//! `tensor_copy_dynamic_src(src)` and `tensor_copy_dynamic_dst(dst, src)`: a copy whose source
//! or destination sits at a run-time offset along one free axis, NKI's
//! `in_tile[ix, idx[0, b] + iy]` (or `in_tile[ix, idx[0, b], iz]`).

use crate::span::Span;
use nki_lang::{Dst, InstrData, Opcode, TileView};

use super::super::builtins::P;
use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, BinOp, Expr};

impl Lowerer<'_> {
    /// NKI's scalar element of a tile, `idx[[0, b]]` (integers, or loop-affine values, on
    /// every axis, the partition's a constant): its `[1, 1]` view; `None` when `base` is no
    /// tile or an index is not of that form (the expression is then evaluated as written).
    fn scalar_element(&mut self, base: &Expr, indices: &[Expr]) -> Option<TileView> {
        let Value::Tile(v) = self.eval(base) else {
            return None;
        };
        if indices.len() != v.shape.rank() || self.tile_blocks.contains_key(&v.tile) {
            return None;
        }
        let mut affine = Vec::new();
        for e in indices {
            match self.eval(e) {
                Value::Int(n) => affine.push(nki_lang::Affine::constant(n)),
                Value::Index(i) if !i.is_advanced() => affine.push(i.lin),
                _ => return None,
            }
        }
        let p = affine.first()?;
        let part = u32::try_from(p.constant).ok().filter(|_| p.is_constant())?;
        let mut offset = v.offset;
        for (a, s) in affine[1..].iter().zip(&v.strides) {
            offset = offset.checked_add(&a.checked_scale(*s)?)?;
        }
        Some(TileView {
            tile: v.tile,
            part_start: v.part_start.checked_add(part)?,
            shape: nki_lang::TileShape::new(&[1, 1])?,
            offset,
            strides: [0; nki_lang::MAX_TILE_RANK - 1],
            part_var: v.part_var,
            dtype: v.dtype,
        })
    }

    /// A tile indexed with one element of a tile (plus an index expression) on a free axis, the
    /// dynamic operand of `name`: the view at offset 0, the `[1, 1]` view of the offset and the
    /// indexed axis' element stride; `None` after an error.
    fn dynamic_view(&mut self, name: &str, e: &Expr) -> Option<(TileView, TileView, i32)> {
        let Expr::Index {
            base,
            indices,
            span: at,
        } = e
        else {
            self.error(
                e.span(),
                format!("`{name}` takes a tile indexed by one element of a tile on a free axis: `t[[i_p, idx[[0, b]] + i_f]]`"),
            );
            return None;
        };
        let Value::Tile(tile) = self.eval(base) else {
            self.error(
                base.span(),
                format!("the dynamically indexed operand of `{name}` is an SBUF or PSUM tile"),
            );
            return None;
        };
        // The axis whose index holds a tile element, and the index without it.
        let mut found: Option<(usize, TileView, Expr)> = None;
        for (axis, e) in indices.iter().enumerate() {
            let (tile_part, rest) = match e {
                Expr::Binary {
                    op: BinOp::Add,
                    lhs,
                    rhs,
                    ..
                } => (lhs.as_ref(), Some(rhs.as_ref().clone())),
                other => (other, None),
            };
            if !matches!(tile_part, Expr::Index { .. } | Expr::Name(_)) {
                continue;
            }
            let element = match tile_part {
                Expr::Index { base, indices, .. } => self.scalar_element(base, indices),
                _ => None,
            };
            let value = match element {
                Some(v) => Value::Tile(v),
                None => self.eval(tile_part),
            };
            if let Value::Tile(v) = value {
                if found.is_some() {
                    self.error(e.span(), "one dynamic offset per operand");
                    return None;
                }
                let rest = rest.unwrap_or(Expr::Int(0, e.span()));
                found = Some((axis, v, rest));
            }
        }
        let Some((axis, offset, rest)) = found else {
            self.error(*at, format!("`{name}` needs a dynamic offset: one index of its operand is an element of a tile (`idx[[0, b]]`)"));
            return None;
        };
        if axis == 0 || self.tile_blocks.contains_key(&tile.tile) {
            self.error(*at, "a dynamic offset runs along a free axis of a tile without block axes (err_copy_dynamic_indirect_indices_not_natively_supported)");
            return None;
        }
        let mut statics = indices.clone();
        statics[axis] = rest;
        let Value::Tile(view) = self.index(Value::Tile(tile), &statics, *at) else {
            return None;
        };
        // The element stride of the indexed axis (a whole tile's row-major one).
        let stride = tile
            .strides
            .get(axis.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        let Ok(stride) = i32::try_from(stride) else {
            self.error(*at, "a dynamic offset's stride exceeds 2^31 elements");
            return None;
        };
        Some((view, offset, stride))
    }

    /// `tensor_copy_dynamic_src(src, dtype, engine, mask)`: `src` a tile indexed with one
    /// element of a tile (plus an index expression) on a free axis; the copy reads the view at
    /// that element's value times the axis' stride.
    pub(in super::super) fn tensor_copy_dynamic_src(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let name = "tensor_copy_dynamic_src";
        let Some(a) = self.args(name, args, &["src", "dtype", "engine", "mask"], 1, span) else {
            return Value::Poison;
        };
        let src_e = a[0].expect("required");
        let mut options = OpOptions::default();
        for (k, p) in [(1, P::DType), (2, P::Engine), (3, P::Mask)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut options)
            {
                return Value::Poison;
            }
        }
        let Some((view, offset, stride)) = self.dynamic_view(name, src_e) else {
            return Value::Poison;
        };
        let at = src_e.span();
        let (Some(src), Some(offset)) = (self.view_id(view, at), self.view_id(offset, at)) else {
            return Value::Poison;
        };
        let write = self.write_for(&dest);
        let make = move |v| InstrData::DynCopy {
            dst: Dst { view: v, write },
            src,
            offset,
            stride,
        };
        let spans = InstrSpans::at(span).with(1, at).with(2, at);
        match self.emit_op(Opcode::TensorCopyDynamicSrc, &make, dest, options, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// `tensor_copy_dynamic_dst(dst, src, mask, dtype, engine)`: `dst` a tile indexed with one
    /// element of a tile (plus an index expression) on a free axis; the copy writes `src` to
    /// the view at that element's value times the axis' stride. Returns nothing.
    pub(in super::super) fn tensor_copy_dynamic_dst(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let name = "tensor_copy_dynamic_dst";
        let params = ["dst", "src", "mask", "dtype", "engine"];
        let Some(a) = self.dst_call_args(name, dest, args, &params, 2, span) else {
            return Value::Poison;
        };
        let (dst_e, src_e) = (a[0].expect("required"), a[1].expect("required"));
        let mut options = OpOptions::default();
        for (k, p) in [(2, P::Mask), (3, P::DType), (4, P::Engine)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut options)
            {
                return Value::Poison;
            }
        }
        let Some((view, offset, stride)) = self.dynamic_view(name, dst_e) else {
            return Value::Poison;
        };
        if !self.dtype_is_dst(&options, &view, a[3].map_or(span, Expr::span)) {
            return Value::Poison;
        }
        let Some(src) = self.tile_arg(src_e, Opcode::TensorCopyDynamicDst, 1) else {
            return Value::Poison;
        };
        let at = dst_e.span();
        let (Some(src), Some(offset)) = (self.view_id(src, src_e.span()), self.view_id(offset, at))
        else {
            return Value::Poison;
        };
        let make = move |v| InstrData::DynCopy {
            dst: Dst::overwrite(v),
            src,
            offset,
            stride,
        };
        let spans = InstrSpans::at(span)
            .with(0, at)
            .with(1, src_e.span())
            .with(2, at);
        let into = Dest::Into {
            view,
            span: at,
            accumulate: None,
        };
        match self.emit_op(Opcode::TensorCopyDynamicDst, &make, into, options, spans) {
            Some(_) => Value::Unit,
            None => Value::Poison,
        }
    }
}
