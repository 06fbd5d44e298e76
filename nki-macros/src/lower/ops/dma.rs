//! `load`, `store`, `dma_copy` and the DMA transposes (`load_transpose2d`, `dma_transpose`).

use crate::span::Span;
use nki_lang::{Dst, Instr, InstrData, Memory, Opcode, TileView};

use super::super::builtins::P;
use super::super::call::{Dest, OpOptions};
use super::super::value::{Access, Value};
use super::super::{InstrSpans, Lowerer};
use super::{hbm_access, member_name};
use crate::parse::model::{Arg, Expr};

impl Lowerer<'_> {
    /// `load(src, dtype, mask)`: an HBM access into a new SBUF tile (or the destination view).
    pub(in super::super) fn load(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        self.load_op(Opcode::Load, "load", args, span, dest)
    }

    /// `load_transpose2d(src, dtype, mask)`: a 2-D HBM access `[A, B]` into a tile `[B, A]`.
    pub(in super::super) fn load_transpose2d(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        self.load_op(
            Opcode::LoadTranspose2d,
            "load_transpose2d",
            args,
            span,
            dest,
        )
    }

    /// `dma_transpose(src, axes, mask, dtype)`: NKI's DMA-engine transpose of an HBM access or
    /// of an SBUF tile of 2, 3 or 4 axes into a new SBUF tile (`dma_transpose`,
    /// `dma_transpose_sbuf`), permuted as NKI permutes a source of its rank: `axes`, when
    /// given, must be that permutation (`[1, 0]`, `[2, 1, 0]`, `[3, 1, 2, 0]`).
    pub(in super::super) fn dma_transpose(
        &mut self,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let Some(a) = self.args(
            "dma_transpose",
            args,
            &["src", "axes", "mask", "dtype"],
            1,
            span,
        ) else {
            return Value::Poison;
        };
        let src_e = a[0].expect("required");
        let src = match self.eval(src_e) {
            Value::Tensor(h) => self.index(Value::Tensor(h), &[], src_e.span()),
            other => other,
        };
        let rank = match &src {
            Value::Access(acc) if acc.indirect.is_some() => {
                return self.error(
                    src_e.span(),
                    "`dma_transpose` does not take indirect indices: load the rows with `load(src[idx, i_f])`, then transpose the tile (err_indirect_indices_are_not_supported_with_nki_api)",
                );
            }
            Value::Access(acc) => acc.shape.rank(),
            Value::Tile(view) => view.shape.rank(),
            Value::Poison => return Value::Poison,
            other => {
                return self.error(
                    src_e.span(),
                    format!(
                        "operand 'src' of 'dma_transpose' is an HBM tensor or an SBUF tile, not {}",
                        other.describe()
                    ),
                );
            }
        };
        if let Some(axes) = a[1] {
            let perm: Option<Vec<i64>> = match axes {
                Expr::Array(items, _) | Expr::Tuple(items, _) => items
                    .iter()
                    .map(|e| match self.eval(e) {
                        Value::Int(n) => Some(n),
                        _ => None,
                    })
                    .collect(),
                _ => None,
            };
            let want = nki_lang::ops::dma_transpose_axes(rank);
            let given = perm
                .as_deref()
                .map(|p| p.iter().map(|&x| usize::try_from(x).ok()));
            let matches = match (want, given) {
                (Some(w), Some(g)) => g.eq(w.iter().map(|&x| Some(x))),
                _ => false,
            };
            if !matches {
                let msg = match want {
                    Some(w) => format!(
                        "`dma_transpose` permutes a source of {rank} axes by {w:?} only (NKI's permutations: [1, 0] for 2 axes, [2, 1, 0] for 3, [3, 1, 2, 0] for 4); write `axes = {w:?}` or leave it out"
                    ),
                    None => format!(
                        "`dma_transpose` takes a source of 2, 3 or 4 axes (NKI's permutations [1, 0], [2, 1, 0], [3, 1, 2, 0]), not {rank}"
                    ),
                };
                return self.error(axes.span(), msg);
            }
        }
        let mut options = OpOptions::default();
        for (k, p) in [(2, P::Mask), (3, P::DType)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut options)
            {
                return Value::Poison;
            }
        }
        match src {
            Value::Access(access) => self.load_access(
                Opcode::DmaTranspose,
                &access,
                src_e.span(),
                span,
                dest,
                options,
            ),
            Value::Tile(view) => {
                let Some(src) = self.view_id(view, src_e.span()) else {
                    return Value::Poison;
                };
                let make = |v| InstrData::Unary {
                    dst: Dst::overwrite(v),
                    src,
                };
                let spans = InstrSpans::at(span).with(1, src_e.span());
                match self.emit_op(Opcode::DmaTransposeSbuf, &make, dest, options, spans) {
                    Some(v) => Value::Tile(v),
                    None => Value::Poison,
                }
            }
            _ => Value::Poison,
        }
    }

    fn load_op(
        &mut self,
        opcode: Opcode,
        name: &str,
        args: &[Arg],
        span: Span,
        dest: Dest<'_>,
    ) -> Value {
        let Some(a) = self.args(name, args, &["src", "dtype", "mask"], 1, span) else {
            return Value::Poison;
        };
        let src_e = a[0].expect("required");
        let Some(access) = self.access_arg(src_e, opcode, 1) else {
            return Value::Poison;
        };
        let mut options = OpOptions::default();
        for (k, p) in [(1, P::DType), (2, P::Mask)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut options)
            {
                return Value::Poison;
            }
        }
        self.load_access(opcode, &access, src_e.span(), span, dest, options)
    }

    pub(super) fn load_access(
        &mut self,
        opcode: Opcode,
        access: &Access,
        src_span: Span,
        span: Span,
        dest: Dest<'_>,
        options: OpOptions,
    ) -> Value {
        if let Some(as_dtype) = access.dtype {
            return self.load_viewed(opcode, access, as_dtype, (src_span, span), dest, options);
        }
        let Some(hbm) = self.buf.add_access(hbm_access(access)) else {
            return self.error(span, "a kernel uses at most 65535 distinct HBM accesses");
        };
        let mut spans = InstrSpans::at(span).with(1, src_span);
        let (opcode, indirect) = match access.indirect {
            None => (opcode, None),
            Some(_) if opcode != Opcode::Load => {
                let msg = format!(
                    "`{}` does not take indirect indices: load the rows with `load(src[idx, i_f])`, then transpose the tile (err_indirect_indices_are_not_supported_with_nki_api)",
                    opcode.info().name
                );
                return self.error(src_span, msg);
            }
            Some(ix) => {
                let Some(ix) = self.indirect_index(ix, src_span) else {
                    return Value::Poison;
                };
                spans = spans.with(2, src_span);
                (Opcode::IndirectLoad, Some(ix))
            }
        };
        let make = |tile| match indirect {
            Some((index, axis, mode)) => InstrData::Indirect {
                tile,
                hbm,
                index,
                axis,
                mode,
            },
            None => InstrData::Dma { tile, hbm },
        };
        match self.emit_op(opcode, &make, dest, options, spans) {
            Some(v) => Value::Tile(v),
            None => Value::Poison,
        }
    }

    /// A load of an HBM `view(dtype)` access (its bytes read as `as_dtype`): into a new SBUF tile
    /// of that dtype, or the destination view, whose bytes take the tensor's elements
    /// ([`Lowerer::unview`]).
    fn load_viewed(
        &mut self,
        opcode: Opcode,
        access: &Access,
        as_dtype: nki_lang::DType,
        (src_span, span): (Span, Span),
        dest: Dest<'_>,
        options: OpOptions,
    ) -> Value {
        if opcode != Opcode::Load {
            let msg = format!(
                "`{}` of an HBM `view(dtype)` is not accepted yet: `load` it, or view the tile",
                opcode.info().name
            );
            return self.error(src_span, msg);
        }
        if options.dtype.is_some_and(|d| d != as_dtype) {
            return self.error(
                span,
                format!("a load of an HBM tensor viewed as {as_dtype} moves its bytes unconverted: no other `dtype`"),
            );
        }
        let (view, dst_span) = match dest {
            Dest::New(name) => {
                match self.new_tile(name, Memory::Sbuf, as_dtype, access.shape, span) {
                    Value::Tile(v) => (v, span),
                    _ => return Value::Poison,
                }
            }
            Dest::Into {
                view,
                span: at,
                accumulate: None,
            } => (view, at),
            Dest::Into { .. } => {
                return self.error(
                    span,
                    "a load of an HBM `view(dtype)` does not accumulate into its destination",
                );
            }
        };
        let Some((a, t)) = self.unview(access, view, options.mask.is_some(), src_span) else {
            return Value::Poison;
        };
        let into = Dest::Into {
            view: t,
            span: dst_span,
            accumulate: None,
        };
        let options = OpOptions {
            dtype: None,
            ..options
        };
        match self.load_access(opcode, &a, src_span, span, into, options) {
            Value::Tile(_) => Value::Tile(view),
            other => other,
        }
    }

    /// `dma_copy(dst, src, mask, dst_rmw_op, oob_mode, dge_mode)`: a `store` when `dst` is
    /// HBM, a `load` into `dst` when `src` is. `oob_mode` is `error` (an indirect row out of
    /// range stops the launch, as everywhere here) and `dge_mode` any of NKI's (how the
    /// descriptors are made: the same transfer); `dst_rmw_op` and `oob_mode = skip` are refused.
    pub(in super::super) fn dma_copy(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        if !matches!(dest, Dest::New(None)) {
            return self.error(span, "`dma_copy` returns nothing");
        }
        let params = ["dst", "src", "mask", "dst_rmw_op", "oob_mode", "dge_mode"];
        let Some(a) = self.args("dma_copy", args, &params, 2, span) else {
            return Value::Poison;
        };
        if let Some(e) = a[3] {
            return self.error(
                e.span(),
                "`dst_rmw_op` (a DMA that combines into its destination) is not in the language: `atomic_rmw` for rows named by indices, else `load` the destination, add, and `store`",
            );
        }
        if let Some(e) = a[4] {
            match member_name(e).as_deref() {
                Some("error") => {}
                Some("skip") => {
                    return self.error(
                        e.span(),
                        "`oob_mode = skip` (out-of-range indirect rows left out) is not in the language: a row out of range stops the launch with an error (`oob_mode.error`); clamp the indices or mask the rows",
                    );
                }
                _ => return self.error(e.span(), "`oob_mode` is `error` or `skip`"),
            }
        }
        if let Some(e) = a[5] {
            match member_name(e).as_deref() {
                Some("none" | "swdge" | "unknown") => {}
                Some("hwdge") if self.buf.target == nki_lang::Target::Trn1 => {
                    return self.error(
                        e.span(),
                        "`dge_mode = hwdge` (descriptors made by the DMA hardware) needs a NeuronCore-v3 or later: compile for trn2 or trn3, or leave the mode to the compiler",
                    );
                }
                Some("hwdge") => {}
                _ => {
                    return self.error(
                        e.span(),
                        "`dge_mode` is `none`, `swdge`, `hwdge` or `unknown`",
                    );
                }
            }
        }
        let (dst_e, src_e) = (a[0].expect("required"), a[1].expect("required"));
        let mut options = OpOptions::default();
        if let Some(e) = a[2]
            && !self.option_arg(P::Mask, e, &mut options)
        {
            return Value::Poison;
        }
        let dst_v = self.eval(dst_e);
        match dst_v {
            Value::Tile(view) => {
                let Some(access) = self.access_arg(src_e, Opcode::Load, 1) else {
                    return Value::Poison;
                };
                let into = Dest::Into {
                    view,
                    span: dst_e.span(),
                    accumulate: None,
                };
                self.load_access(Opcode::Load, &access, src_e.span(), span, into, options);
                Value::Unit
            }
            Value::Poison => Value::Poison,
            // HBM to HBM: through an SBUF tile of the access's shape (two transfers where the
            // device's DMA makes one).
            dst_v => {
                // Each operand evaluated once: a register `scalar_offset` emits its store.
                let src_v = self.eval(src_e);
                let hbm = |v: &Value| matches!(v, Value::Tensor(_) | Value::Access(_));
                if !(hbm(&dst_v) && hbm(&src_v)) {
                    let access = self.access_of(dst_v, dst_e, Opcode::Store, 1);
                    let value = self.tile_of(src_v, src_e, Opcode::Store, 0);
                    let (Some(access), Some(value)) = (access, value) else {
                        return Value::Poison;
                    };
                    return self.store_tile(
                        &access,
                        dst_e.span(),
                        value,
                        src_e.span(),
                        span,
                        options.mask,
                    );
                }
                let dst = self.access_of(dst_v, dst_e, Opcode::Store, 1);
                let src = self.access_of(src_v, src_e, Opcode::Load, 1);
                let (Some(dst), Some(src)) = (dst, src) else {
                    return Value::Poison;
                };
                let loaded = self.load_access(
                    Opcode::Load,
                    &src,
                    src_e.span(),
                    span,
                    Dest::New(None),
                    options,
                );
                let Value::Tile(tmp) = loaded else {
                    return Value::Poison;
                };
                self.store_tile(&dst, dst_e.span(), tmp, src_e.span(), span, options.mask)
            }
        }
    }

    /// `store(dst, value, mask)`: a tile into an HBM output; a PSUM value goes through an SBUF
    /// copy, as NKI does.
    pub(in super::super) fn store(&mut self, args: &[Arg], span: Span, dest: Dest<'_>) -> Value {
        if !matches!(dest, Dest::New(None)) {
            return self.error(span, "`store` returns nothing");
        }
        let Some(a) = self.args("store", args, &["dst", "value", "mask"], 2, span) else {
            return Value::Poison;
        };
        let mut options = OpOptions::default();
        if let Some(e) = a[2]
            && !self.option_arg(P::Mask, e, &mut options)
        {
            return Value::Poison;
        }
        let (dst_e, val_e) = (a[0].expect("required"), a[1].expect("required"));
        self.store_exprs(dst_e, val_e, span, options.mask)
    }

    /// `store(dst_e, val_e)` with a mask.
    fn store_exprs(
        &mut self,
        dst_e: &Expr,
        val_e: &Expr,
        span: Span,
        mask: Option<nki_lang::MaskId>,
    ) -> Value {
        let access = self.access_arg(dst_e, Opcode::Store, 1);
        let value = self.tile_arg(val_e, Opcode::Store, 0);
        let (Some(access), Some(value)) = (access, value) else {
            return Value::Poison;
        };
        self.store_tile(&access, dst_e.span(), value, val_e.span(), span, mask)
    }

    /// A one-element HBM `access` loaded into a new SBUF tile of its dtype, for a register
    /// instruction (`register_load` from HBM, NKI's "from memory (HBM or SBUF)"): `None` after
    /// an error.
    pub(in super::super) fn register_staged_load(
        &mut self,
        access: &Access,
        src_span: Span,
        span: Span,
    ) -> Option<TileView> {
        let loaded = self.load_access(
            Opcode::Load,
            access,
            src_span,
            span,
            Dest::New(None),
            OpOptions::default(),
        );
        match loaded {
            Value::Tile(v) => Some(v),
            _ => None,
        }
    }

    /// A store of the new SBUF tile `value` (written by `register_store`) into the
    /// one-element HBM `access` (`register_store` to HBM).
    pub(in super::super) fn register_staged_store(
        &mut self,
        access: &Access,
        dst_span: Span,
        value: TileView,
        span: Span,
    ) -> bool {
        !matches!(
            self.store_tile(access, dst_span, value, span, span, None),
            Value::Poison
        )
    }

    /// A store of the tile view `value` into `access` with a mask.
    pub(super) fn store_tile(
        &mut self,
        access: &Access,
        dst_span: Span,
        mut value: TileView,
        val_span: Span,
        span: Span,
        mask: Option<nki_lang::MaskId>,
    ) -> Value {
        let options = OpOptions {
            mask,
            ..OpOptions::default()
        };
        if self.buf.tiles[value.tile as usize].memory == Memory::Psum {
            match self.sbuf_copy(value, val_span, options.mask) {
                Some(v) => value = v,
                None => return Value::Poison,
            }
        }
        if access.dtype.is_some() {
            let Some((a, v)) = self.unview(access, value, mask.is_some(), dst_span) else {
                return Value::Poison;
            };
            return self.store_tile(&a, dst_span, v, val_span, span, mask);
        }
        let Some(hbm) = self.buf.add_access(hbm_access(access)) else {
            return self.error(span, "a kernel uses at most 65535 distinct HBM accesses");
        };
        let Some(tile) = self.view_id(value, val_span) else {
            return Value::Poison;
        };
        let mut spans = InstrSpans::at(span).with(0, val_span).with(1, dst_span);
        let (opcode, data) = match access.indirect {
            None => (Opcode::Store, InstrData::Dma { tile, hbm }),
            Some(ix) => {
                let Some((index, axis, mode)) = self.indirect_index(ix, dst_span) else {
                    return Value::Poison;
                };
                spans = spans.with(2, dst_span);
                let data = InstrData::Indirect {
                    tile,
                    hbm,
                    index,
                    axis,
                    mode,
                };
                (Opcode::IndirectStore, data)
            }
        };
        let instr = Instr {
            mask: options.mask,
            ..Instr::new(opcode, data)
        };
        self.emit_checked(instr, spans);
        Value::Unit
    }

    /// The index column and axis of an indirect access, as an instruction holds them.
    pub(in super::super) fn indirect_index(
        &mut self,
        (axis, view, mode): (usize, TileView, nki_lang::IndirectMode),
        span: Span,
    ) -> Option<(nki_lang::ViewId, u8, nki_lang::IndirectMode)> {
        let index = self.view_id(view, span)?;
        // An access has at most MAX_TENSOR_RANK axes.
        Some((index, u8::try_from(axis).unwrap_or(u8::MAX), mode))
    }

    /// A copy of a PSUM view into a new SBUF tile of the same dtype: what NKI inserts where a
    /// PSUM tile is an operand only SBUF can hold.
    pub(in super::super) fn sbuf_copy(
        &mut self,
        value: TileView,
        span: Span,
        mask: Option<nki_lang::MaskId>,
    ) -> Option<TileView> {
        let tile = &self.buf.tiles[value.tile as usize];
        let (dtype, shape) = (value.dtype_of(tile.dtype), value.shape);
        let Value::Tile(tmp) = self.new_tile(None, Memory::Sbuf, dtype, shape, span) else {
            return None;
        };
        let (src, dst) = (self.view_id(value, span)?, self.view_id(tmp, span)?);
        let data = InstrData::Unary {
            dst: Dst::overwrite(dst),
            src,
        };
        let instr = Instr {
            mask,
            ..Instr::new(Opcode::TensorCopy, data)
        };
        self.emit_checked(instr, InstrSpans::at(span))
            .then_some(tmp)
    }
}
