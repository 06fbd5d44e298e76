//! `dma_compute(dst, srcs, reduce_op, scales, unique_indices, oob_mode)`: the DMA engines' fp32
//! sum of up to 16 tensors of one shape, in HBM or SBUF.

use crate::span::Span;
use nki_lang::{DMA_COMPUTE_SOURCES, DType, Dst, InstrData, Memory, Opcode, TileView, ViewId};

use super::super::call::{Dest, OpOptions};
use super::super::value::Value;
use super::super::{InstrSpans, Lowerer};
use super::member_name;
use crate::parse::model::{Arg, Expr};

const NAME: &str = "dma_compute";

/// Sources NKI's `dma_compute` takes at most ("The max number of source tensors in `srcs` is
/// 16").
const MAX_SOURCES: usize = 16;

/// Where an operand of `dma_compute` lives: an SBUF tile view, or an HBM access (moved through
/// an SBUF tile of its own).
enum Side {
    Tile(TileView),
    Hbm(super::super::value::Access),
}

impl Lowerer<'_> {
    /// `dma_compute`: writes `dst` (returns nothing) with `srcs[0] + srcs[1] + …`, summed in fp32
    /// left to right. `reduce_op` must be `add` and `scales` `None` or all 1.0 (NKI's rule);
    /// `unique_indices` and `oob_mode` are accepted with any of NKI's values (they only concern
    /// the read-modify-write forms, whose `vector_offset` sources are refused). An HBM source is
    /// loaded into an SBUF tile of its dtype first, and an HBM destination is stored from an
    /// SBUF tile of its dtype (the device's one DMA becomes several here; the values are the
    /// same). More than four sources become a chain of instructions through fp32 tiles, each
    /// adding the running sum and the next three sources: the same fp32 additions in the same
    /// order.
    pub(in super::super) fn dma_compute(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let params = [
            "dst",
            "srcs",
            "reduce_op",
            "scales",
            "unique_indices",
            "oob_mode",
        ];
        let Some(a) = self.dst_call_args(NAME, dest, args, &params, 3, span) else {
            return Value::Poison;
        };
        let (dst_e, srcs_e, op_e) = (
            a[0].expect("required"),
            a[1].expect("required"),
            a[2].expect("required"),
        );
        if member_name(op_e).as_deref() != Some("add") {
            return self.error(
                op_e.span(),
                "`reduce_op` of `dma_compute` is `add` (NKI: \"only nl.add is supported\")",
            );
        }
        let (Expr::Array(items, _) | Expr::Tuple(items, _)) = srcs_e else {
            return self.error(
                srcs_e.span(),
                "`srcs` of `dma_compute` is a list of tensors: `srcs = [a, b]`",
            );
        };
        if items.is_empty() || items.len() > MAX_SOURCES {
            return self.error(
                srcs_e.span(),
                format!(
                    "`dma_compute` takes 1 to {MAX_SOURCES} sources (NKI's limit), not {}",
                    items.len()
                ),
            );
        }
        if let Some(e) = a[3]
            && !self.unit_scales(e, items.len())
        {
            return Value::Poison;
        }
        if let Some(e) = a[4]
            && !matches!(e, Expr::Bool(..))
        {
            return self.error(e.span(), "`unique_indices` is `true` or `false`");
        }
        if let Some(e) = a[5]
            && !matches!(member_name(e).as_deref(), Some("error" | "skip"))
        {
            return self.error(e.span(), "`oob_mode` is `error` or `skip`");
        }
        // Every operand's side first: an indirect HBM operand makes NKI's read-modify-write.
        let mut sides: Vec<(Side, Span)> = Vec::with_capacity(items.len());
        for e in items {
            let Some(side) = self.dma_compute_side(e, "a source") else {
                return Value::Poison;
            };
            sides.push((side, e.span()));
        }
        let Some(dst) = self.dma_compute_side(dst_e, "the destination") else {
            return Value::Poison;
        };
        let rmw = matches!(&dst, Side::Hbm(a) if a.indirect.is_some())
            || sides
                .iter()
                .any(|(s, _)| matches!(s, Side::Hbm(a) if a.indirect.is_some()));
        if rmw {
            let unique = a[4].is_none_or(|e| matches!(e, Expr::Bool(true, _)));
            let skip = a[5].is_some_and(|e| member_name(e).as_deref() == Some("skip"));
            return self.dma_compute_rmw(
                dst,
                dst_e.span(),
                sides,
                srcs_e.span(),
                unique,
                skip,
                span,
            );
        }
        // Every source as an SBUF view, an HBM source loaded first.
        let mut srcs: Vec<(ViewId, Span)> = Vec::with_capacity(items.len());
        for (side, at) in sides {
            let Some(id) = self.source_view(side, at, span) else {
                return Value::Poison;
            };
            srcs.push((id, at));
        }
        // Every source but the last instruction's into fp32 running sums.
        let mut rest: &[(ViewId, Span)] = &srcs;
        let mut sum: Option<(ViewId, Span)> = None;
        loop {
            let room = DMA_COMPUTE_SOURCES.saturating_sub(usize::from(sum.is_some()));
            let last = rest.len() <= room;
            let take = rest.len().min(room);
            let operands: Vec<(ViewId, Span)> = sum
                .into_iter()
                .chain(rest[..take].iter().copied())
                .collect();
            rest = &rest[take..];
            let mut views = [None; DMA_COMPUTE_SOURCES];
            for (slot, &(v, _)) in views.iter_mut().zip(&operands) {
                *slot = Some(v);
            }
            let make = move |v| InstrData::DmaCompute {
                dst: Dst::overwrite(v),
                srcs: views,
            };
            let mut spans = InstrSpans::at(span);
            for (slot, &(_, at)) in (1..).zip(&operands) {
                spans = spans.with(slot, at);
            }
            if !last {
                let options = OpOptions {
                    dtype: Some(DType::F32),
                    ..OpOptions::default()
                };
                let Some(v) =
                    self.emit_op(Opcode::DmaCompute, &make, Dest::New(None), options, spans)
                else {
                    return Value::Poison;
                };
                let Some(id) = self.view_id(v, span) else {
                    return Value::Poison;
                };
                sum = Some((id, span));
                continue;
            }
            return match dst {
                Side::Tile(view) => {
                    let into = Dest::Into {
                        view,
                        span: dst_e.span(),
                        accumulate: None,
                    };
                    match self.emit_op(Opcode::DmaCompute, &make, into, OpOptions::default(), spans)
                    {
                        Some(_) => Value::Unit,
                        None => Value::Poison,
                    }
                }
                Side::Hbm(access) => {
                    let dtype = access.dtype.unwrap_or(self.tensors[access.tensor].dtype);
                    let options = OpOptions {
                        dtype: Some(dtype),
                        ..OpOptions::default()
                    };
                    let Some(v) =
                        self.emit_op(Opcode::DmaCompute, &make, Dest::New(None), options, spans)
                    else {
                        return Value::Poison;
                    };
                    if v.shape.dims() != access.shape.dims() {
                        return self.error(
                            dst_e.span(),
                            format!(
                                "the destination of `dma_compute` has shape {:?}, its sources {:?}: every operand has one shape",
                                access.shape.dims(),
                                v.shape.dims()
                            ),
                        );
                    }
                    self.store_tile(&access, dst_e.span(), v, span, span, None)
                }
            };
        }
    }

    /// A source as an SBUF view: a tile as it is, an HBM access (or its `vector_offset` rows)
    /// loaded first into a tile of its own; `None` after an error (reported).
    fn source_view(&mut self, side: Side, at: Span, span: Span) -> Option<ViewId> {
        let view = match side {
            Side::Tile(v) => v,
            Side::Hbm(access) => {
                let loaded = self.load_access(
                    Opcode::Load,
                    &access,
                    at,
                    span,
                    Dest::New(None),
                    OpOptions::default(),
                );
                let Value::Tile(v) = loaded else {
                    return None;
                };
                v
            }
        };
        self.view_id(view, at)
    }

    /// An operand of `dma_compute`: an SBUF tile view or an HBM access, direct or with rows
    /// chosen by an index tile (`x.ap(..., vector_offset = idx)` or `x[[idx, iy]]`, NKI's
    /// read-modify-write forms). A PSUM tile and a `scalar_offset` access are refused with an
    /// error at `e`.
    fn dma_compute_side(&mut self, e: &Expr, what: &str) -> Option<Side> {
        match self.eval(e) {
            Value::Tile(v) => {
                if self.buf.tiles[v.tile as usize].memory == Memory::Psum {
                    self.error(
                        e.span(),
                        format!("{what} of `dma_compute` is in PSUM: the DMA engines read and write HBM and SBUF only (copy the tile to SBUF first)"),
                    );
                    return None;
                }
                Some(Side::Tile(v))
            }
            Value::Tensor(h) => match self.index(Value::Tensor(h), &[], e.span()) {
                Value::Access(acc) => self.hbm_side(acc, e),
                _ => None,
            },
            Value::Access(acc) => self.hbm_side(acc, e),
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "{what} of `dma_compute` is an HBM tensor or an SBUF tile, not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// An HBM access of `dma_compute`: direct, or rows named by an index tile; a `scalar_offset`
    /// access is an error at `e` (NKI: operands have compile-time addresses unless they use
    /// `vector_offset`).
    fn hbm_side(&mut self, acc: super::super::value::Access, e: &Expr) -> Option<Side> {
        if acc
            .indirect
            .as_ref()
            .is_some_and(|ix| ix.2 != nki_lang::IndirectMode::Rows)
        {
            self.error(
                e.span(),
                "an operand of `dma_compute` with `scalar_offset` is refused: NKI's `dma_compute` needs operands at compile-time addresses, except rows chosen by `vector_offset` (move the rows with `dma_copy` first)",
            );
            return None;
        }
        Some(Side::Hbm(acc))
    }

    /// NKI's read-modify-write forms of `dma_compute`, with exactly two sources:
    /// - scatter, `dst(HBM)[idx] = dst(HBM)[idx] + src(SBUF)`: `dst` has rows chosen by an index
    ///   tile, one source is the same rows of the same tensor, the other an SBUF tile; this is
    ///   `atomic_rmw(dst, value = src, op = add)`;
    /// - gather, `dst(SBUF) = dst(SBUF) + src(HBM)[idx]`: `dst` is an SBUF tile, one source is
    ///   `dst` itself, the other HBM rows chosen by an index tile; the rows are loaded
    ///   (`indirect_load`) and added in fp32 by `dma_compute` into `dst`.
    ///
    /// `unique_indices = False` and `oob_mode = skip` are refused, as NKI refuses or leaves them.
    #[allow(clippy::too_many_arguments)]
    fn dma_compute_rmw(
        &mut self,
        dst: Side,
        dst_span: Span,
        sides: Vec<(Side, Span)>,
        srcs_span: Span,
        unique: bool,
        skip: bool,
        span: Span,
    ) -> Value {
        if sides.len() != 2 {
            return self.error(
                srcs_span,
                format!("`dma_compute`'s read-modify-write (an operand with `vector_offset`) takes exactly 2 sources (NKI), not {}", sides.len()),
            );
        }
        if !unique {
            return self.error(
                srcs_span,
                "`dma_compute`'s read-modify-write needs `unique_indices = True` (NKI: non-unique indices are not supported yet); `atomic_rmw` adds into rows named more than once",
            );
        }
        if skip {
            return self.error(
                srcs_span,
                "`oob_mode = skip` (out-of-range rows left out) is not accepted: every indirect access here stops the launch on a row out of range (`oob_mode = error`)",
            );
        }
        let same_rows = |x: &super::super::value::Access, y: &super::super::value::Access| {
            x.tensor == y.tensor
                && x.indirect.as_ref().map(|i| (i.0, i.1, i.2))
                    == y.indirect.as_ref().map(|i| (i.0, i.1, i.2))
                && x.shape.dims() == y.shape.dims()
        };
        match dst {
            Side::Hbm(access) if access.indirect.is_some() => {
                // Scatter: one source is dst's rows, the other the SBUF data.
                let data = match (&sides[0], &sides[1]) {
                    ((Side::Hbm(a), _), (Side::Tile(v), at)) if same_rows(a, &access) => (*v, *at),
                    ((Side::Tile(v), at), (Side::Hbm(a), _)) if same_rows(a, &access) => (*v, *at),
                    _ => {
                        return self.error(
                            srcs_span,
                            "`dma_compute` into HBM rows chosen by `vector_offset` (NKI's scatter read-modify-write) takes `srcs = [dst, data]`: the destination's own rows and an SBUF tile",
                        );
                    }
                };
                if data.0.shape.dims() != access.shape.dims() {
                    return self.error(
                        data.1,
                        format!(
                            "the source of `dma_compute` has shape {:?}, its destination {:?}: every operand has one shape",
                            data.0.shape.dims(),
                            access.shape.dims()
                        ),
                    );
                }
                self.atomic_add_rows(&access, dst_span, data.0, data.1, span, OpOptions::default())
            }
            Side::Tile(view) => {
                // Gather: one source is dst itself, the other HBM rows.
                let is_dst = |s: &Side| matches!(s, Side::Tile(v) if *v == view);
                let rows = |s: &Side| matches!(s, Side::Hbm(a) if a.indirect.is_some());
                if !(is_dst(&sides[0].0) && rows(&sides[1].0) || rows(&sides[0].0) && is_dst(&sides[1].0)) {
                    return self.error(
                        srcs_span,
                        "`dma_compute` into an SBUF tile from HBM rows chosen by `vector_offset` (NKI's gather read-modify-write) takes `srcs = [dst, rows]`: the destination itself and the rows",
                    );
                }
                let mut ids: Vec<(ViewId, Span)> = Vec::with_capacity(2);
                for (side, at) in sides {
                    let Some(id) = self.source_view(side, at, span) else {
                        return Value::Poison;
                    };
                    ids.push((id, at));
                }
                let mut views = [None; DMA_COMPUTE_SOURCES];
                for (slot, &(v, _)) in views.iter_mut().zip(&ids) {
                    *slot = Some(v);
                }
                let make = move |v| InstrData::DmaCompute {
                    dst: Dst::overwrite(v),
                    srcs: views,
                };
                let spans = InstrSpans::at(span).with(1, ids[0].1).with(2, ids[1].1);
                let into = Dest::Into {
                    view,
                    span: dst_span,
                    accumulate: None,
                };
                match self.emit_op(Opcode::DmaCompute, &make, into, OpOptions::default(), spans) {
                    Some(_) => Value::Unit,
                    None => Value::Poison,
                }
            }
            Side::Hbm(_) => self.error(
                dst_span,
                "`dma_compute` with a `vector_offset` source writes an SBUF tile (gather) or the same HBM rows (scatter: `dst` with the same `vector_offset`)",
            ),
        }
    }

    /// Whether `scales` is `None` or a list of `n` numbers all equal to 1.0 (NKI: "all values in
    /// `scales` must be 1.0"); an error at `e` if not.
    fn unit_scales(&mut self, e: &Expr, n: usize) -> bool {
        if matches!(e, Expr::Name(id) if id == "None") {
            return true;
        }
        let ones = match e {
            Expr::Array(items, _) | Expr::Tuple(items, _) if items.len() == n => {
                items.iter().all(|x| match self.eval(x) {
                    Value::Float(v) => v == 1.0,
                    Value::Int(v) => v == 1,
                    _ => false,
                })
            }
            _ => false,
        };
        if !ones {
            self.error(
                e.span(),
                format!("`scales` of `dma_compute` is `None` or one 1.0 per source ({n} here): NKI accepts no other scale"),
            );
        }
        ones
    }
}
