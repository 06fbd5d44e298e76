//! Block axes: NKI's `nl.ndarray((K // 128, nl.par_dim(128), 512))`, a tile of `K // 128`
//! independent `[128, 512]` blocks, written `ndarray([K / 128, par_dim(128), 512], ...)`.
//!
//! A tile with block axes is stored as one tile whose block axes follow the partition axis
//! (`[128, B, 512]`), so that block `k` lies at `base + k × block bytes` of every partition it
//! uses. It is indexed block first, as in NKI (`t[k]`, `t[[k, i_p, i_f]]`): the block indices
//! are integer expressions (constants, loop variables), which become part of the view's
//! offset, so a loop over the blocks stays a loop.

use crate::span::Span;
use nki_lang::{Extent, TileShape, TileView};

use super::Lowerer;
use super::value::Value;
use crate::parse::model::Expr;

/// A tile shape as written: its internal shape (partition first, then the block axes, then
/// the free axes) and how many block axes it has.
pub(super) struct BlockShape {
    pub(super) shape: TileShape,
    pub(super) info: BlockInfo,
    /// The number of blocks of the symbolic block axis, if one is.
    pub(super) count: Option<Extent>,
}

/// The block axes of a tile: how many, and which one (as written) a symbolic dimension sizes.
/// The symbolic one is stored first (right after the partition axis), so that a block's
/// place does not depend on how many blocks there are; the others follow in their order.
#[derive(Copy, Clone, Debug)]
pub(super) struct BlockInfo {
    pub(super) axes: u8,
    pub(super) symbolic: Option<u8>,
}

impl BlockInfo {
    /// The stored position (0 = first after the partition axis) of written block axis `i`.
    pub(super) fn stored(self, i: usize) -> usize {
        match self.symbolic.map(usize::from) {
            Some(s) if i == s => 0,
            Some(s) if i < s => i.saturating_add(1),
            Some(_) | None => i,
        }
    }

    /// The written block axis stored at position `j`.
    pub(super) fn written(self, j: usize) -> usize {
        (0..usize::from(self.axes))
            .find(|&i| self.stored(i) == j)
            .unwrap_or(j)
    }
}

/// The argument of `par_dim(n)`, if `e` is that call.
pub(super) fn par_dim_arg(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Call { func, args, .. } if func == "par_dim" => {
            args.first().filter(|_| args.len() == 1).map(|a| &a.value)
        }
        _ => None,
    }
}

impl Lowerer<'_> {
    /// Whether `dims` marks its partition dimension with `par_dim(n)`.
    pub(super) fn has_par_dim(dims: &[Expr]) -> bool {
        dims.iter()
            .any(|d| matches!(d, Expr::Call { func, .. } if func == "par_dim"))
    }

    /// A shape with `par_dim(n)`: `[B0, ..., par_dim(P), F0, ...]` → `[P, B0, ..., F0, ...]`.
    /// Each block axis is a positive compile-time integer, or, for one of them, a symbolic
    /// dimension (`K / 128`): that one is stored first, with one block until
    /// [`nki_lang::ProgramBuf::finish`] reserves its capacity.
    pub(super) fn block_shape(&mut self, dims: &[Expr], span: Span) -> Option<BlockShape> {
        let marked: Vec<usize> = dims
            .iter()
            .enumerate()
            .filter(|(_, d)| matches!(d, Expr::Call { func, .. } if func == "par_dim"))
            .map(|(j, _)| j)
            .collect();
        let [at] = marked[..] else {
            self.error(
                span,
                "a shape has one partition dimension: `par_dim(n)` appears once",
            );
            return None;
        };
        let Some(p_e) = par_dim_arg(&dims[at]) else {
            self.error(dims[at].span(), "`par_dim(n)` takes the partition size");
            return None;
        };
        if at.saturating_add(1) >= dims.len() {
            self.error(
                span,
                "a tile has at least one free dimension after its partition dimension (`par_dim(128), 512`)",
            );
            return None;
        }
        // As written: the partition size, the block axes, the free axes.
        let mut sizes = Vec::with_capacity(dims.len());
        let mut symbolic: Option<(u8, Extent)> = None;
        for (j, d) in std::iter::once(p_e)
            .chain(&dims[..at])
            .chain(&dims[at.saturating_add(1)..])
            .enumerate()
        {
            let block = (1..=at).contains(&j);
            let what = if block {
                "a block axis"
            } else {
                "a tile dimension"
            };
            match self.eval(d) {
                Value::Int(n) if n > 0 => match u32::try_from(n) {
                    Ok(n) => sizes.push(n),
                    Err(_) => {
                        self.error(d.span(), format!("{what} is a positive 32-bit integer"));
                        return None;
                    }
                },
                Value::Sym { sym, add, div } if block => {
                    if symbolic.is_some() {
                        self.error(
                            d.span(),
                            "one block axis of a tile may be sized by a symbolic dimension; size the others with compile-time integers",
                        );
                        return None;
                    }
                    // j ≥ 1 and j ≤ at < MAX_TILE_RANK.
                    let written = u8::try_from(j.saturating_sub(1)).unwrap_or(u8::MAX);
                    symbolic = Some((written, Extent::Sym { sym, add, div }));
                    // The capacity the compiler reserves replaces it.
                    sizes.push(1);
                }
                Value::Poison => return None,
                other => {
                    let sym = if block {
                        ", or a symbolic dimension (`K / 128`)"
                    } else {
                        ""
                    };
                    self.error(
                        d.span(),
                        format!(
                            "{what} must be a positive compile-time integer{sym}, not {}",
                            other.describe()
                        ),
                    );
                    return None;
                }
            }
        }
        let info = BlockInfo {
            // at < dims.len(); a shape of more than 255 axes fails `TileShape::new` below.
            axes: u8::try_from(at).unwrap_or(u8::MAX),
            symbolic: symbolic.map(|(w, _)| w),
        };
        // Stored order: the partition, the block axes (the symbolic one first), the free axes.
        if let Some((w, _)) = symbolic {
            let w = usize::from(w).saturating_add(1);
            let n = sizes.remove(w);
            sizes.insert(1, n);
        }
        let Some(shape) = TileShape::new(&sizes) else {
            self.error(
                span,
                format!(
                    "a tile has a partition dimension and 1 to {} block and free dimensions together",
                    nki_lang::MAX_TILE_RANK - 1
                ),
            );
            return None;
        };
        Some(BlockShape {
            shape,
            info,
            count: symbolic.map(|(_, e)| e),
        })
    }

    /// The indices of a tile with `blocks` block axes, as written (`t[k]`, `t[[k, i_p, i_f]]`),
    /// in the order of its stored axes (partition, blocks, free): `None` where an axis is not
    /// indexed (the whole axis). Every block axis must be indexed.
    pub(super) fn block_order<'x>(
        &mut self,
        name: &str,
        info: BlockInfo,
        rank: usize,
        indices: &'x [Expr],
        span: Span,
    ) -> Option<Vec<Option<&'x Expr>>> {
        let blocks = usize::from(info.axes);
        let whole = indices.len() == 1
            && matches!(
                indices[0],
                Expr::Range {
                    start: None,
                    end: None,
                    ..
                }
            );
        if whole || indices.len() < blocks {
            self.error(
                span,
                format!(
                    "tile `{name}` has {blocks} block axis(es) before its partition dimension: select a block with one integer index per block axis (`{name}[k]`, `{name}[[k, i_p, i_f]]`)"
                ),
            );
            return None;
        }
        if indices.len() > rank {
            self.error(
                span,
                format!("{} indices for a tile of rank {rank}", indices.len()),
            );
            return None;
        }
        let mut order: Vec<Option<&Expr>> = Vec::with_capacity(rank);
        order.push(indices.get(blocks));
        order.extend((0..blocks).map(|j| indices.get(info.written(j))));
        for j in blocks.saturating_add(1)..rank {
            order.push(indices.get(j));
        }
        Some(order)
    }

    /// The error for a block index that is a slice or an index grid.
    pub(super) fn block_index_error(&mut self, e: Option<&Expr>, span: Span) {
        self.error(
            e.map_or(span, Expr::span),
            "a block index is an integer expression (a constant, a loop variable, `k + 1`): a block axis cannot be sliced or indexed by an index grid, as its blocks are separate tiles (`t[[k, i_p, i_f]]`)",
        );
    }
}

impl Lowerer<'_> {
    /// `memset` of every block of a tile whose blocks a symbolic dimension counts (`zeros`,
    /// `full` of such a tile): a loop over the launch's blocks, one block per iteration, as
    /// the count is known only at launch. False after an error.
    pub(super) fn fill_blocks(
        &mut self,
        whole: TileView,
        count: Extent,
        value: nki_lang::Scalar,
        span: Span,
        opts: super::call::OpOptions,
    ) -> bool {
        use nki_lang::{Affine, InstrData, LoopKind, Opcode};
        if self.loops.len() == nki_lang::MAX_LOOP_DEPTH {
            self.error(
                span,
                format!(
                    "filling a tile's blocks takes a loop, and loops nest at most {} deep",
                    nki_lang::MAX_LOOP_DEPTH
                ),
            );
            return false;
        }
        let dims = whole.shape.dims();
        let mut block_dims = vec![dims[0]];
        block_dims.extend_from_slice(&dims[2..]);
        let Some(shape) = TileShape::new(&block_dims) else {
            return false;
        };
        let elems = i64::try_from(shape.free_elems()).unwrap_or(i64::MAX);
        let depth = self.loops.len();
        self.buf.loop_vars.push("_block".to_string());
        let var = u16::try_from(self.buf.loop_vars.len().saturating_sub(1)).unwrap_or(u16::MAX);
        let begin = self.emit(
            Opcode::LoopBegin,
            InstrData::LoopBegin {
                kind: LoopKind::Affine,
                trip: count,
                var,
                end: 0,
            },
            super::InstrSpans::at(span),
        );
        let begin_at = u32::try_from(begin).unwrap_or(u32::MAX);
        self.loops.push(count);
        self.loop_begins.push(begin_at);
        let mut view = TileView::whole(whole.tile, &shape);
        view.offset = Affine::loop_var(depth, elems);
        let ok = self.fill(view, value, span, opts);
        self.loops.pop();
        self.loop_begins.pop();
        let end = self.emit(
            Opcode::LoopEnd,
            InstrData::LoopEnd { begin: begin_at },
            super::InstrSpans::at(span),
        );
        if let InstrData::LoopBegin { end: e, .. } = &mut self.buf.instrs[begin].data {
            *e = u32::try_from(end).unwrap_or(u32::MAX);
        }
        ok
    }
}
