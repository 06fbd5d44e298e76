//! `tensor_copy_dynamic_src(src)`: a copy whose source sits at a run-time offset along one free
//! axis, NKI's `in_tile[ix, idx[0, b] + iy]` (or `in_tile[ix, idx[0, b], iz]`).

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
        })
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
        let Expr::Index {
            base,
            indices,
            span: at,
        } = src_e
        else {
            return self.error(
                src_e.span(),
                "`tensor_copy_dynamic_src` copies a tile indexed by one element of a tile on a free axis: `tensor_copy_dynamic_src(t[[i_p, idx[[0, b]] + i_f]])`",
            );
        };
        let Value::Tile(tile) = self.eval(base) else {
            return self.error(
                base.span(),
                "the source of `tensor_copy_dynamic_src` is an SBUF or PSUM tile",
            );
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
                    return self.error(e.span(), "one dynamic offset per source");
                }
                let rest = rest.unwrap_or(Expr::Int(0, e.span()));
                found = Some((axis, v, rest));
            }
        }
        let Some((axis, offset, rest)) = found else {
            return self.error(*at, "`tensor_copy_dynamic_src` needs a dynamic offset: one index of the source is an element of a tile (`idx[[0, b]]`)");
        };
        if axis == 0 || self.tile_blocks.contains_key(&tile.tile) {
            return self.error(*at, "a dynamic offset runs along a free axis of a tile without block axes (err_copy_dynamic_indirect_indices_not_natively_supported)");
        }
        let mut statics = indices.clone();
        statics[axis] = rest;
        let Value::Tile(view) = self.index(Value::Tile(tile), &statics, *at) else {
            return Value::Poison;
        };
        // The element stride of the indexed axis of the source (a whole tile's row-major one).
        let stride = tile
            .strides
            .get(axis.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        let Ok(stride) = i32::try_from(stride) else {
            return self.error(*at, "a dynamic offset's stride exceeds 2^31 elements");
        };
        let (Some(src), Some(offset)) = (self.view_id(view, *at), self.view_id(offset, *at)) else {
            return Value::Poison;
        };
        let write = self.write_for(&dest);
        let make = move |v| InstrData::DynCopy {
            dst: Dst { view: v, write },
            src,
            offset,
            stride,
        };
        let spans = InstrSpans::at(span).with(1, *at).with(2, *at);
        match self.emit_op(Opcode::TensorCopyDynamicSrc, &make, dest, options, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }
}
