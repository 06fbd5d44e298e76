//! Block axes: NKI's `nl.ndarray((K // 128, nl.par_dim(128), 512))`, a tile of `K // 128`
//! independent `[128, 512]` blocks, written `ndarray([K / 128, par_dim(128), 512], ...)`.
//!
//! A tile with block axes is stored as one tile whose block axes follow the partition axis
//! (`[128, B, 512]`), so that block `k` lies at `base + k × block bytes` of every partition it
//! uses. It is indexed block first, as in NKI (`t[k]`, `t[[k, i_p, i_f]]`): the block indices
//! are integer expressions (constants, loop variables), which become part of the view's
//! offset, so a loop over the blocks stays a loop.

use crate::span::Span;
use nki_lang::TileShape;

use super::Lowerer;
use super::value::Value;
use crate::parse::model::Expr;

/// A tile shape as written: its internal shape (partition first, then the block axes, then
/// the free axes) and how many block axes it has.
pub(super) struct BlockShape {
    pub(super) shape: TileShape,
    pub(super) blocks: u8,
}

/// The argument of `par_dim(n)`, if `e` is that call.
fn par_dim_arg(e: &Expr) -> Option<&Expr> {
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
        dims.iter().any(|d| matches!(d, Expr::Call { func, .. } if func == "par_dim"))
    }

    /// A shape with `par_dim(n)`: `[B0, ..., par_dim(P), F0, ...]` → `[P, B0, ..., F0, ...]`.
    /// Each block axis is a positive compile-time integer.
    pub(super) fn block_shape(&mut self, dims: &[Expr], span: Span) -> Option<BlockShape> {
        let marked: Vec<usize> = dims
            .iter()
            .enumerate()
            .filter(|(_, d)| matches!(d, Expr::Call { func, .. } if func == "par_dim"))
            .map(|(j, _)| j)
            .collect();
        let [at] = marked[..] else {
            self.error(span, "a shape has one partition dimension: `par_dim(n)` appears once");
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
        let mut sizes = Vec::with_capacity(dims.len());
        for (j, d) in std::iter::once(p_e)
            .chain(&dims[..at])
            .chain(&dims[at.saturating_add(1)..])
            .enumerate()
        {
            let what = if (1..=at).contains(&j) {
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
                Value::Sym { .. } if (1..=at).contains(&j) => {
                    self.error(
                        d.span(),
                        "a block axis sized by a symbolic dimension (`K / 128`) is not supported yet: its size must be known at compile time; make the dimension a meta-parameter (`const K: usize`) or give the tile a fixed number of blocks and loop over `K / 128` of them",
                    );
                    return None;
                }
                Value::Poison => return None,
                other => {
                    self.error(
                        d.span(),
                        format!(
                            "{what} must be a positive compile-time integer, not {}",
                            other.describe()
                        ),
                    );
                    return None;
                }
            }
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
            // at < dims.len() ≤ MAX_TILE_RANK, checked by `TileShape::new`.
            blocks: u8::try_from(at).unwrap_or(u8::MAX),
        })
    }

    /// The indices of a tile with `blocks` block axes, as written (`t[k]`, `t[[k, i_p, i_f]]`),
    /// in the order of its stored axes (partition, blocks, free): `None` where an axis is not
    /// indexed (the whole axis). Every block axis must be indexed.
    pub(super) fn block_order<'x>(
        &mut self,
        name: &str,
        blocks: usize,
        rank: usize,
        indices: &'x [Expr],
        span: Span,
    ) -> Option<Vec<Option<&'x Expr>>> {
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
        order.extend(indices[..blocks].iter().map(Some));
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
