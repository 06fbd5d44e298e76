//! NKI 0.6's destination-first ISA calls: `nisa::tensor_tensor(dst = t, data1 = a, data2 = b,
//! op = add)` (or `nisa::tensor_tensor(t, a, b, add)`) as a statement writes `t` and returns
//! nothing. It is the 2.26 form `t[...] = tensor_tensor(a, b, add)` with the destination moved
//! into the call: one rule over the function table, the destination taken out of the arguments
//! (the `dst` keyword, else the first positional argument) and the rest matched to the
//! function's own parameters, so both spellings lower to the same instructions.

use crate::span::Span;
use nki_lang::{Alu, Memory, Opcode, TileView, rules};

use super::Lowerer;
use super::builtins::{self, Kind, P, Special};
use super::call::{Dest, OpOptions};
use super::value::Value;
use crate::errors::message;
use crate::parse::model::{Arg, Expr};

/// Whether the function `kind` takes NKI 0.6's destination-first form: every ISA call of the
/// table except those whose 0.6 form takes an access pattern the language does not have
/// (`iota`, `affine_select`), and the hand-written ISA operations that produce a tile.
/// Functions with a `dst` of their own (`dma_copy`, `store`, `select_reduce`,
/// `tensor_copy_predicated`, `atomic_rmw`) already write it and are not listed.
pub(super) fn takes_dst(kind: Kind) -> bool {
    match kind {
        Kind::Isa(_, params) => !params.iter().any(|p| matches!(p.kind, P::Expr | P::Pred)),
        Kind::Special(s) => matches!(
            s,
            Special::NcMatmul
                | Special::NcMatmulMx
                | Special::NcTranspose
                | Special::Memset
                | Special::Dropout
                | Special::TensorPartitionReduce
                | Special::DmaTranspose
        ),
        Kind::Binary(_) | Kind::UnaryAlu(_) | Kind::Act(_) | Kind::Reduce(_) => false,
    }
}

/// The `dst = ...` keyword argument of a call, if it has one.
pub(super) fn dst_keyword(args: &[Arg]) -> Option<&Arg> {
    args.iter()
        .find(|a| a.name.as_ref().is_some_and(|n| n == "dst"))
}

impl Lowerer<'_> {
    /// Lowers the statement `e` if it is a destination-first call (a call of a function that
    /// [`takes_dst`], not a helper). False when it is not one, for the caller to lower it as any
    /// other expression statement.
    pub(super) fn dst_first_stmt(&mut self, e: &Expr) -> bool {
        let Expr::Call { func, args, span } = e else {
            return false;
        };
        let name = func.to_string();
        if self.helpers.iter().any(|h| h.name == name) {
            return false;
        }
        let Some(kind) = builtins::lookup(&name).filter(|k| takes_dst(*k)) else {
            return false;
        };
        let span = *span;
        // The destination: `dst = t`, else the first positional argument.
        let at = args
            .iter()
            .position(|a| a.name.as_ref().is_some_and(|n| n == "dst"))
            .or_else(|| args.iter().position(|a| a.name.is_none()));
        let Some(at) = at else {
            self.error(
                span,
                format!(
                    "`{name}` as a statement is NKI 0.6's destination-first call: give its destination, `{name}(dst = t, ...)` or `{name}(t, ...)`, or bind the result of the 2.26 form with `let`"
                ),
            );
            return true;
        };
        let dst_e = &args[at].value;
        let mut rest: Vec<Arg> = Vec::with_capacity(args.len());
        let mut accumulate: Option<&Expr> = None;
        for (i, a) in args.iter().enumerate() {
            if i == at {
                continue;
            }
            if matches!(kind, Kind::Special(Special::NcMatmul | Special::NcMatmulMx))
                && a.name.as_ref().is_some_and(|n| n == "accumulate")
            {
                accumulate = Some(&a.value);
                continue;
            }
            rest.push(a.clone());
        }
        let Some(view) = self.dst_tile(&name, kind, dst_e) else {
            return true;
        };
        // `nc_matmul`'s `accumulate`: `True` and `None` (the default, NKI's "the first write
        // to a PSUM location overwrites, later ones accumulate") are `+=`, whose accumulation
        // group makes the first matmul into a fresh tile overwrite; `False` overwrites.
        let acc = match accumulate {
            None => Some(Alu::Add),
            Some(e) => match self.accumulate_arg(e) {
                Some(true) => Some(Alu::Add),
                Some(false) => None,
                None => return true,
            },
        };
        let dest = Dest::Into {
            view,
            span: dst_e.span(),
            accumulate: if matches!(kind, Kind::Special(Special::NcMatmul | Special::NcMatmulMx)) {
                acc
            } else {
                None
            },
        };
        match kind {
            Kind::Isa(opcode, params) => {
                self.isa(opcode, params, &rest, span, dest);
            }
            Kind::Special(Special::Memset) => self.memset_into(&rest, span, view),
            Kind::Special(s) => {
                self.special(s, &name, &rest, span, dest);
            }
            Kind::Binary(_) | Kind::UnaryAlu(_) | Kind::Act(_) | Kind::Reduce(_) => {
                unreachable!("not a destination-first function")
            }
        }
        true
    }

    /// The destination of a destination-first call: an SBUF or PSUM tile or a view of one.
    fn dst_tile(&mut self, name: &str, kind: Kind, e: &Expr) -> Option<TileView> {
        match self.eval(e) {
            Value::Tile(v) => Some(v),
            Value::Poison => None,
            Value::Tensor(_) | Value::Access(_) => {
                let slot = match kind {
                    Kind::Isa(opcode, _) => Some(opcode),
                    Kind::Special(Special::NcMatmul) => Some(Opcode::Matmul),
                    Kind::Special(Special::NcMatmulMx) => Some(Opcode::MatmulMx),
                    Kind::Special(Special::NcTranspose) => Some(Opcode::Transpose),
                    Kind::Special(Special::Memset) => Some(Opcode::Memset),
                    _ => None,
                };
                match slot.map(|op| (op.info().name, op.info().operands[0])) {
                    Some((op, spec)) => {
                        if let Err(v) = rules::check_memory(op, spec.name, Memory::Hbm, spec.memory)
                        {
                            self.error(e.span(), message(&v));
                        }
                    }
                    None => {
                        self.error(
                            e.span(),
                            format!(
                                "the destination of `{name}` is an SBUF or PSUM tile, not an HBM tensor: write HBM with `dma_copy(dst = hbm[...], src = tile)`"
                            ),
                        );
                    }
                }
                None
            }
            other => {
                self.error(
                    e.span(),
                    format!(
                        "the destination of `{name}` is a tile or a view of one, not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// `accumulate = True | False | None`.
    fn accumulate_arg(&mut self, e: &Expr) -> Option<bool> {
        if let Expr::Name(id) = e
            && id == "None"
            && self.lookup("None").is_none()
        {
            return Some(true);
        }
        self.bool_arg(e, "accumulate")
    }

    /// NKI 0.6's `memset(dst, value, engine)`: the 2.26 `dst[...] = value`, one `memset` into
    /// the view. A zero written over a whole PSUM tile makes it a fresh accumulator, as
    /// `zeros(..., Psum)` does (the first matmul `+=` into it opens an accumulation group).
    fn memset_into(&mut self, args: &[Arg], span: Span, view: TileView) {
        let Some(a) = self.args("memset", args, &["value", "engine", "mask"], 1, span) else {
            return;
        };
        let value_e = a[0].expect("required");
        let mut opts = OpOptions::default();
        for (k, p) in [(1, P::Engine), (2, P::Mask)] {
            if let Some(e) = a[k]
                && !self.option_arg(p, e, &mut opts)
            {
                return;
            }
        }
        let value = match self.eval(value_e) {
            v @ (Value::Int(_) | Value::Float(_) | Value::Bool(_)) => {
                match self.operand_value(v, value_e.span(), "a fill value") {
                    Some(super::ops::isa::Operand::Imm(s)) => s,
                    _ => return,
                }
            }
            Value::Poison => return,
            other => {
                self.error(
                    value_e.span(),
                    format!("a fill value is a number, not {}", other.describe()),
                );
                return;
            }
        };
        if !self.fill(view, value, span, opts) {
            return;
        }
        let tile = &self.buf.tiles[usize::from(view.tile)];
        if value.as_f32() == 0.0
            && tile.memory == Memory::Psum
            && opts.mask.is_none()
            && view == TileView::whole(view.tile, &tile.shape)
        {
            self.fresh_zero.insert(view.tile, self.loops.len());
        }
    }
}
