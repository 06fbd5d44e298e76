//! Elementwise instructions of a blocked run (`rows`) whose results only feed later ones of the
//! run, computed inside the instruction that reads them instead of through their tiles.
//!
//! RoPE computes `out[:h] = x[:h]·cos − x[h:]·sin` as a copy of `x[h:]` to partition 0, four
//! products into four tiles and a difference and a sum of them: seven passes over the data,
//! five tiles written and read back. Here the difference and the sum each become one
//! [`crate::engines::compute::Expression`]: chunk by chunk, the products are computed into lanes and combined
//! straight away, and the copy is read where it came from. Two passes instead of seven.
//!
//! An instruction is folded into the ones that read its results (an *intermediate*) when
//! - it is an ALU chain (`tensor_tensor`, `tensor_scalar`, `scalar_tensor_tensor`) that
//!   overwrites its destination, on fp32 lanes, with no reduction, into an fp32 tile (lanes
//!   and tile hold the same bits), a copy within one dtype and shape on the Vector or GpSimd
//!   engine (its readers read its source instead: the same lanes), or a `load` within one
//!   dtype and shape (its readers read the input tensor where it lies, as a matmul packs a
//!   forwarded load's: RoPE's `x`, 4 MiB a launch no longer copied into SBUF; the sources in
//!   HBM of one expression are of one input, the one the stream sees: `Mems::hbm`);
//! - its destination's tile is read by no instruction outside the run, and its sources share
//!   bytes with its destination only at its own elements (in place);
//! - after it, until another tile is written in those bytes (the allocator gives a tile's bytes
//!   to one born at its last reader), every read of them is of exactly its elements, by an
//!   instruction over the same grid that folds too or computes an expression (at least one).
//!
//! An ALU chain that reads an intermediate and is not one computes the expression of its own
//! operation over the intermediates' (an expression, at most `MAX_NODES` chains and
//! `MAX_SOURCES` distinct sources; immediates are constants), an intermediate read twice
//! computed in each. Its sources are read at its place in the run rather than at the
//! intermediates': it runs before the first instruction that writes a byte of one of them
//! after its read (RoPE's sum runs before the difference, which the allocator put over `cos`),
//! when no instruction it passes touches its destination; and when its destination shares
//! bytes with a source elsewhere in the same rows, each row is written once it is read
//! ([`crate::engines::stream::Stream::whole_rows`]). Each chain computes its lanes as its
//! instruction does, and an intermediate's lanes are the bits its fp32 tile would have held:
//! the results are those of the instructions one after the other, bit for bit. The
//! intermediates' tiles are not written: SBUF keeps its old contents there, as for the other
//! shortcuts of plain runs; a strict core runs every instruction as written.

use nki_lang::{Dir, Engine, InstrData, Opcode, Write};

use crate::engines::compute::{Arg, MAX_NODES, Node, alu_lane};
use crate::engines::lanes::{Lane, MAX_SOURCES, Source};
use crate::engines::stream::ROW_LANES;
use crate::exec::overlap::{rows, share_bytes};
use crate::host::readers::{Readers, tile_of};
use crate::operand::{Loc, Operands, Resolved};

/// Most pieces of a run (`rows`) a plan describes.
pub(super) const MAX_PIECES: usize = 16;

/// What an instruction of a run computes as an expression's node or alias.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Kind {
    /// An ALU chain on fp32 lanes.
    Alu { op: [nki_lang::Alu; 2], rev: u8 },
    /// A copy within one dtype: its source's lanes.
    Copy,
}

/// A source of an expression: the operand in `slot` of piece `piece`.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(super) struct Leaf {
    /// The piece.
    pub piece: u8,
    /// The operand's slot.
    pub slot: u8,
}

/// One expression: its nodes and its sources.
#[derive(Copy, Clone, Debug)]
pub(super) struct Expr {
    /// The nodes, the last one the expression's instruction.
    pub nodes: [Node; MAX_NODES],
    /// How many.
    pub n_nodes: usize,
    /// The sources.
    pub leaves: [Leaf; MAX_SOURCES],
    /// How many.
    pub n_leaves: usize,
    /// Whether the destination is in bytes a source reads elsewhere in the same row
    /// ([`crate::engines::compute::Expression::whole_rows`]).
    pub whole_rows: bool,
}

/// What each piece of a run does: folded (computed inside the expressions that read its
/// results, it does not run), its expression, or (neither) as written.
pub(super) struct Plan {
    /// Whether each piece is folded.
    pub folded: [bool; MAX_PIECES],
    /// Each piece's expression, if it runs as one.
    pub exprs: [Option<Expr>; MAX_PIECES],
    /// Where each piece runs: before piece `at[k]` (`k` itself: in its place).
    pub at: [u8; MAX_PIECES],
}

impl Plan {
    /// The pieces of a run of `n` in the order they run.
    pub fn order(&self, n: usize) -> impl Iterator<Item = usize> + '_ {
        (0..n).flat_map(move |k| {
            (k + 1..n)
                .filter(move |&o| usize::from(self.at[o]) == k)
                .chain((usize::from(self.at[k]) == k).then_some(k))
        })
    }
}

/// The pieces of a run: each its instruction's index and operands.
type Pieces<'a> = &'a [(usize, Operands)];

fn kind(p: &nki_lang::Program<'_>, at: usize, ops: &Operands) -> Option<Kind> {
    let ins = p.instrs().get(at)?;
    if let (Opcode::Load, InstrData::Dma { .. }) = (ins.opcode, ins.data) {
        // A load within one dtype and shape: its readers read the input where it lies.
        let (dst, src) = (ops.slot(0)?, ops.slot(1)?);
        let same = (src.dtype, src.dims) == (dst.dtype, dst.dims);
        return (dst.loc == Loc::Sbuf && matches!(src.loc, Loc::Hbm(_)) && same)
            .then_some(Kind::Copy);
    }
    let on_chip = ops
        .iter()
        .all(|r| matches!(r.loc, Loc::Sbuf | Loc::Psum | Loc::Imm(_)));
    if !on_chip {
        return None;
    }
    match (ins.opcode, ins.data) {
        (
            Opcode::TensorTensor | Opcode::TensorScalar | Opcode::ScalarTensorTensor,
            InstrData::Alu {
                dst,
                op,
                rev,
                acc: None,
                ..
            },
        ) if dst.write == Write::Overwrite
            && alu_lane(ins.engine, [op[0], op[1], nki_lang::Alu::Bypass], ops) == Lane::F32 =>
        {
            Some(Kind::Alu { op, rev })
        }
        (Opcode::TensorCopy, InstrData::Unary { dst, .. })
            if dst.write == Write::Overwrite
                && matches!(ins.engine, Engine::Vector | Engine::GpSimd)
                && ops.slot(1).map(|r| (r.dtype, r.dims))
                    == ops.slot(0).map(|r| (r.dtype, r.dims)) =>
        {
            Some(Kind::Copy)
        }
        _ => None,
    }
}

/// The plan of `run` (instructions `instrs`), or `None` when nothing folds. `kept(k, slot)`:
/// whether the operand in `slot` of piece `k` keeps its rows in the run's last ones
/// (two sources are one only when they are restricted alike).
pub(super) fn plan(
    p: &nki_lang::Program<'_>,
    readers: &Readers,
    run: Pieces<'_>,
    instrs: core::ops::Range<usize>,
    kept: impl Fn(usize, u8) -> bool,
    sbuf_stride: usize,
) -> Option<Plan> {
    let n = run.len().min(MAX_PIECES);
    let run = &run[..n];
    let mut kinds = [None; MAX_PIECES];
    for (k, (at, ops)) in run.iter().enumerate() {
        kinds[k] = kind(p, *at, ops);
    }
    // Loads fold from one input, the one they load most elements of (the first on ties): an
    // expression's stream reads one input ([`crate::engines::mems::Mems::hbm`]), and its
    // sources in HBM are only ever those of folded loads (its other instructions are on chip).
    let input = |kind: Option<Kind>, ops: &Operands| match (kind, ops.slot(1)) {
        (Some(Kind::Copy), Some(r)) => match r.loc {
            Loc::Hbm(t) => Some((t, r.elems())),
            Loc::Sbuf | Loc::Psum | Loc::Expr | Loc::Imm(_) => None,
        },
        _ => None,
    };
    let mut loaded = [(0u8, 0usize); MAX_PIECES];
    let mut n_inputs = 0;
    for (t, elems) in (0..n).filter_map(|k| input(kinds[k], &run[k].1)) {
        match loaded[..n_inputs].iter_mut().find(|(u, _)| *u == t) {
            Some((_, total)) => *total += elems,
            None => {
                loaded[n_inputs] = (t, elems);
                n_inputs += 1;
            }
        }
    }
    let most = loaded[..n_inputs]
        .iter()
        .rev()
        .max_by_key(|(_, total)| *total)
        .map(|&(t, _)| t);
    for (kind, (_, ops)) in kinds.iter_mut().zip(run) {
        if input(*kind, ops).is_some_and(|(t, _)| Some(t) != most) {
            *kind = None;
        }
    }
    // Candidates: each folds into readers that are all later, exact, of its grid, and
    // (after the fixpoint below) folded or expressions themselves.
    let mut folds = [false; MAX_PIECES];
    let mut consumers = [0u16; MAX_PIECES];
    for (k, (at, ops)) in run.iter().enumerate() {
        if kinds[k].is_some()
            && let Some(c) = folds_alone(p, readers, run, k, *at, ops, &instrs, sbuf_stride)
        {
            folds[k] = true;
            consumers[k] = c;
        }
    }
    let consumers_of = |k: usize| (0..n).filter(move |&j| consumers[k] & (1 << j) != 0);
    if !folds.contains(&true) {
        return None;
    }
    // A reader that neither folds nor computes an expression (a copy whose result stays)
    // needs the tile written: its producer does not fold. Until nothing changes.
    loop {
        let mut changed = false;
        for k in 0..n {
            if !folds[k] {
                continue;
            }
            let stuck =
                consumers_of(k).any(|j| !folds[j] && !matches!(kinds[j], Some(Kind::Alu { .. })));
            if stuck {
                folds[k] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut out = Plan {
        folded: [false; MAX_PIECES],
        exprs: [None; MAX_PIECES],
        at: core::array::from_fn(|k| k as u8),
    };
    let mut any = false;
    for o in 0..n {
        if folds[o] || !matches!(kinds[o], Some(Kind::Alu { .. })) {
            continue;
        }
        let reads_folded = (0..o).any(|k| folds[k] && consumers[k] & (1 << o) != 0);
        if !reads_folded {
            continue;
        }
        // An expression that cannot be built leaves every instruction as written.
        let mut b = Builder {
            run,
            kinds: &kinds,
            folds: &folds,
            kept: &kept,
            sbuf_stride,
            root: o,
            at: o,
            last_read: 0,
            expr: Expr {
                nodes: [Node {
                    op: [nki_lang::Alu::Bypass; 2],
                    rev: 0,
                    args: [Arg::Splat(0); 3],
                }; MAX_NODES],
                n_nodes: 0,
                leaves: [Leaf::default(); MAX_SOURCES],
                n_leaves: 0,
                whole_rows: false,
            },
        };
        b.node(o)?;
        // The expression's destination may share bytes with a source: at its own elements,
        // as an instruction's may; or elsewhere in the same rows (the allocator placed it over
        // a tile that the folded instructions read before it was written), when the row is
        // written after all of it is read.
        let dst = run[o].1.get(0);
        let row_elems: usize = dst.dims[1..].iter().product();
        // It runs before the first instruction that writes one of its sources after the
        // source's reader (RoPE's difference writes over `cos`, which the sum's products read
        // before it: the sum runs first), when nothing it passes reads or writes its
        // destination. (A folded instruction writes nothing.)
        let at = b.at;
        for leaf in &b.expr.leaves[..b.expr.n_leaves] {
            let src = run[usize::from(leaf.piece)]
                .1
                .slot(usize::from(leaf.slot))?;
            if share_bytes(dst, src, sbuf_stride) && !dst.same_elements(src) {
                let same_rows = rows(dst, sbuf_stride).is_some()
                    && rows(dst, sbuf_stride) == rows(src, sbuf_stride);
                if !same_rows || row_elems > ROW_LANES {
                    return None;
                }
                b.expr.whole_rows = true;
            }
        }
        if at < o {
            if b.last_read >= at {
                return None;
            }
            for m in (at..o).filter(|&m| !folds[m]) {
                let mut touches = run[m].1.iter().any(|r| share_bytes(r, dst, sbuf_stride));
                if let Some(x) = &out.exprs[m] {
                    touches |= x.leaves[..x.n_leaves].iter().any(|leaf| {
                        run[usize::from(leaf.piece)]
                            .1
                            .slot(usize::from(leaf.slot))
                            .is_some_and(|r| share_bytes(r, dst, sbuf_stride))
                    });
                }
                if touches {
                    return None;
                }
            }
        }
        out.at[o] = at as u8;
        out.exprs[o] = Some(b.expr);
        any = true;
    }
    if !any {
        return None;
    }
    out.folded = folds;
    // Every folded instruction's readers compute expressions or fold (so its results reach
    // an expression): otherwise nothing folds.
    let fed = |k: usize| consumers_of(k).all(|j| folds[j] || out.exprs[j].is_some());
    (0..n).filter(|&k| folds[k]).all(fed).then_some(out)
}

/// The tile of the operand in `slot` of piece `j`, when it is a view of one.
fn tile(p: &nki_lang::Program<'_>, run: Pieces<'_>, j: usize, slot: u8) -> Option<u16> {
    let at = run.get(j)?.0;
    p.instrs()
        .get(at)?
        .operands()
        .find(|o| o.slot == slot)
        .and_then(|o| o.view())
        .and_then(|v| tile_of(p, v))
}

/// Whether piece `k` (instruction `at`, operands `ops`) may fold, from its own operands and
/// the run's accesses of its destination's bytes.
///
/// Its sources may share bytes with the destination only at its own elements (in place). After
/// it, until another write of those bytes, every read of them is of exactly its elements by an
/// instruction over the same grid (at least one). A write of another tile there (the allocator
/// placing a tile in the bytes of one whose last reader it is, in RoPE a product in the bytes
/// of the copy it reads) ends its results: later reads of those bytes are of the tiles
/// written after it, and none of its own.
#[allow(clippy::too_many_arguments)]
fn folds_alone(
    p: &nki_lang::Program<'_>,
    readers: &Readers,
    run: Pieces<'_>,
    k: usize,
    at: usize,
    ops: &Operands,
    instrs: &core::ops::Range<usize>,
    sbuf_stride: usize,
) -> Option<u16> {
    let dst = ops.slot(0)?;
    let alu = p
        .instrs()
        .get(at)
        .is_some_and(|ins| matches!(ins.data, InstrData::Alu { .. }));
    let t = tile(p, run, k, 0)?;
    if dst.loc != Loc::Sbuf
        || (alu && dst.dtype != nki_lang::DType::F32)
        || !readers.all_among(t, instrs.clone())
    {
        return None;
    }
    let in_place = |r: &Resolved| !share_bytes(r, dst, sbuf_stride) || r.same_elements(dst);
    if !ops.iter().filter(|r| r.slot != 0).all(in_place) {
        return None;
    }
    // Tiles written in these bytes after `k`, and whether any was.
    let mut written = [u16::MAX; MAX_PIECES * nki_lang::MAX_SLOTS];
    let mut n_written = 0usize;
    let mut consumers = 0u16;
    for j in k + 1..run.len() {
        let other = &run[j].1;
        // An instruction reads its sources before it writes its destination.
        for r in other.iter().filter(|r| r.dir == Dir::Read) {
            if !share_bytes(r, dst, sbuf_stride) {
                continue;
            }
            let u = tile(p, run, j, r.slot);
            let after = u.is_some_and(|u| written[..n_written].contains(&u));
            if n_written == 0 && u == Some(t) {
                if !(r.same_elements(dst) && other.get(0).dims == dst.dims) {
                    return None;
                }
                consumers |= 1 << j;
            } else if !after {
                return None;
            }
        }
        for w in other.iter().filter(|w| w.dir.writes()) {
            if !share_bytes(w, dst, sbuf_stride) {
                continue;
            }
            match tile(p, run, j, w.slot) {
                Some(u) if n_written < written.len() => {
                    written[n_written] = u;
                    n_written += 1;
                }
                Some(_) | None => return None,
            }
        }
    }
    (consumers != 0).then_some(consumers)
}

/// Builds one expression's nodes and sources, from its instruction down.
struct Builder<'a, K: Fn(usize, u8) -> bool> {
    run: Pieces<'a>,
    kinds: &'a [Option<Kind>; MAX_PIECES],
    folds: &'a [bool; MAX_PIECES],
    kept: &'a K,
    sbuf_stride: usize,
    expr: Expr,
    /// The expression's own piece.
    root: usize,
    /// Where it runs: before the first instruction that writes a byte of a source after the
    /// source's read (its own piece when none does).
    at: usize,
    /// The last piece that reads one of its sources.
    last_read: usize,
}

impl<K: Fn(usize, u8) -> bool> Builder<'_, K> {
    /// The argument that piece `j`'s results are: its node (an ALU chain) or its source's
    /// (a copy); `None` past the limits.
    fn node(&mut self, j: usize) -> Option<Arg> {
        match self.kinds[j]? {
            Kind::Copy => self.arg(j, 1),
            Kind::Alu { op, rev } => {
                let args = [self.arg(j, 1)?, self.arg(j, 2)?, self.arg(j, 3)?];
                let at = self.expr.n_nodes;
                if at >= MAX_NODES {
                    return None;
                }
                self.expr.nodes[at] = Node { op, rev, args };
                self.expr.n_nodes += 1;
                Some(Arg::Node(at as u8))
            }
        }
    }

    /// The argument for the operand in `slot` of piece `j`.
    fn arg(&mut self, j: usize, slot: usize) -> Option<Arg> {
        let Some(r) = self.run[j].1.slot(slot) else {
            return Some(Arg::Splat(0));
        };
        // An immediate: its lanes, as its instruction's stream gives them.
        if let Source::Splat(bits) = Source::of(r, Lane::F32, &r.dims) {
            return Some(Arg::Splat(bits));
        }
        // The results of the last instruction before it that wrote its bytes, when that one
        // folds (then it wrote exactly these elements).
        let last_write = (0..j).rev().find(|&k| {
            self.run[k]
                .1
                .iter()
                .any(|w| w.dir.writes() && share_bytes(w, r, self.sbuf_stride))
        });
        if let Some(k) = last_write
            && self.folds[k]
        {
            if !r.same_elements(self.run[k].1.get(0)) {
                return None;
            }
            return self.node(k);
        }
        // A source, read here at piece `j`: the first instruction after `j` that writes a byte
        // of it, if any, bounds where the expression can run. (A folded one writes nothing.)
        let writer = (j + 1..self.root).find(|&m| {
            !self.folds[m]
                && self.run[m]
                    .1
                    .iter()
                    .any(|w| w.dir.writes() && share_bytes(w, r, self.sbuf_stride))
        });
        self.at = self.at.min(writer.unwrap_or(self.root));
        self.last_read = self.last_read.max(j);
        // One already taken, read alike, or a new one.
        let kept = (self.kept)(j, slot as u8);
        let same = |l: &Leaf| {
            let lr = self.run[usize::from(l.piece)].1.slot(usize::from(l.slot));
            lr.is_some_and(|lr| lr.same_elements(r))
                && (self.kept)(usize::from(l.piece), l.slot) == kept
        };
        if let Some(i) = self.expr.leaves[..self.expr.n_leaves].iter().position(same) {
            return Some(Arg::Src(i as u8));
        }
        let i = self.expr.n_leaves;
        if i >= MAX_SOURCES {
            return None;
        }
        self.expr.leaves[i] = Leaf {
            piece: j as u8,
            slot: slot as u8,
        };
        self.expr.n_leaves += 1;
        Some(Arg::Src(i as u8))
    }
}
