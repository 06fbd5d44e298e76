//! Strict mode's definedness against an independent reference (issue 21): random programs over
//! partially written tiles, with every family of operations (moves, elementwise ALU and
//! activation with per-partition reductions, selects (a tile predicate's defined elements
//! picking the side that counts by their value), reductions along any free axes, scans,
//! `bn_stats`/`bn_aggr`, transposes (TensorE and DMA), matmuls with accumulation), stored under
//! random masks.
//!
//! The reference keeps one "defined" flag per tile element and propagates it element by element
//! from each operation's definition in the reference interpreter (`src/exec/reference.rs`),
//! written here from the mathematics of the operation, not from the op table's rules. A strict
//! launch must fail exactly when a store stores an undefined element, at the first such store,
//! naming the first such element of its operand. A launch strict mode accepts must also give the
//! same bits on two plain cores whose SBUF and PSUM held different values before it: its
//! outputs do not depend on bytes it never wrote.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use nki_lang::builder::{ProgramBuilder, TensorId, TileId};
use nki_lang::{
    AccOut, ActFn, Affine, Alu, AxisIndex, Cmp, CompiledProgram, DType, Dim, Dst, Engine, Extent,
    HbmAccess, IndirectMode, Instr, InstrData, LoopKind, MAX_MASK_TERMS, MAX_TENSOR_RANK, Mask,
    MaskTerm, Memory, Opcode, Pred, RegId, RegSrc, Scalar, Src, Target, TileShape, TileView, Write,
};
use nki_runtime::{HbmIn, HbmOut, Kernel, LaunchError, NeuronCore};

/// Partitions of every tile, and free elements of a square tile.
const P: u32 = 8;
const F: u32 = 8;

/// Reads choices from a byte string (0 past its end).
struct Choices<'a>(&'a [u8], usize);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }
    /// A value in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n.max(1)
    }
    /// A mask bound in `1..=n`, mostly `n` (no cut).
    fn bound(&mut self, n: u32) -> u32 {
        if self.byte().is_multiple_of(2) {
            n
        } else {
            1 + (u32::from(self.byte()) % n)
        }
    }
}

/// What kind of tile a step made: its memory and its free shape.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// `[P, F]` in SBUF.
    Square,
    /// `[P, F]` fp32 in PSUM.
    PsumSquare,
    /// `[P, 1]` in SBUF.
    Column,
    /// `[P, 6]` (`bn_stats`).
    Stats,
    /// `[P, 2]` (`bn_aggr`).
    Aggr,
    /// `[P, 1, 4]` or `[P, 2, 1]` (a reduction of a `[P, 2, 4]` view).
    Reduced(u32, u32),
    /// `[P, 8]` uint32 (`nc_find_index8`).
    Indices,
    /// `[P, F]` uint8 (`select_reduce`'s predicate).
    Pred,
    /// `[P, 1]` int32 row indices in SBUF (an indirect DMA's).
    Index,
    /// `[P, F]` int32 (`nonzero_with_count`'s positions and count).
    Found,
}

impl Kind {
    fn free(self) -> Vec<u32> {
        match self {
            Kind::Square | Kind::PsumSquare => vec![F],
            Kind::Column | Kind::Index => vec![1],
            Kind::Stats => vec![6],
            Kind::Aggr => vec![2],
            Kind::Reduced(a, b) => vec![a, b],
            Kind::Indices => vec![8],
            Kind::Pred | Kind::Found => vec![F],
        }
    }
    fn elems(self) -> usize {
        self.free().iter().product::<u32>() as usize
    }
    fn memory(self) -> Memory {
        if self == Kind::PsumSquare {
            Memory::Psum
        } else {
            Memory::Sbuf
        }
    }
}

/// One tile of the program and, for the reference, which of its elements are defined
/// (partition-major), and, for a tile a load, a memset or an iota wrote, their values (a
/// `select`'s predicate: its defined elements pick a side by their value).
struct Tile {
    id: TileId,
    kind: Kind,
    defined: Vec<bool>,
    values: Option<Vec<f32>>,
}

/// The input's element `e` (row-major `[P, F]`).
fn input_value(e: usize) -> f32 {
    e as f32 * 0.25 - 3.0
}

/// A `[rows, cols]` box mask from the grid's origin on axes 0 and `free_axis`.
fn mask(rows: u32, cols: (usize, u32)) -> Mask {
    let term = MaskTerm {
        axis: 0,
        coef: 1,
        offset: Affine::ZERO,
        sym: None,
    };
    let mut m = Mask {
        terms: [term; MAX_MASK_TERMS],
        len: 2,
    };
    m.terms[0].offset = Affine::constant(-i64::from(rows));
    m.terms[1] = MaskTerm {
        axis: cols.0 as u8,
        offset: Affine::constant(-i64::from(cols.1)),
        ..term
    };
    m
}

/// A 2-D access of tensor `t` (`[rows, cols]`, transposed when `swap`).
fn access(t: TensorId, rows: u32, cols: u32, swap: bool) -> HbmAccess {
    let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
    axes[0].grid[usize::from(swap)] = 1;
    axes[1].grid[usize::from(!swap)] = 1;
    let shape = if swap {
        TileShape::new(&[cols, rows])
    } else {
        TileShape::new(&[rows, cols])
    };
    HbmAccess {
        tensor: t.index(),
        reshape: None,
        rank: 2,
        shape: shape.expect("a 2-D shape"),
        axes,
    }
}

/// The program under construction and the reference's state.
struct Gen {
    b: ProgramBuilder,
    input: TensorId,
    tiles: Vec<Tile>,
    /// Per store: its output, its instruction index, and the stored elements in the operand's
    /// order (whether each is defined).
    stores: Vec<(usize, usize, Vec<bool>)>,
    instrs: usize,
    outputs: Vec<TensorId>,
    /// Every instruction pushed: its opcode, and whether it was masked.
    seen: Vec<(Opcode, bool)>,
}

impl Gen {
    fn view(&mut self, t: usize) -> nki_lang::ViewId {
        let tile = &self.tiles[t];
        let mut dims = vec![P];
        dims.extend(tile.kind.free());
        let shape = TileShape::new(&dims).expect("shape");
        self.b
            .view(TileView::whole(tile.id.index(), &shape))
            .expect("view")
    }

    /// A view of tile `t` with the free shape `free` (row-major over its elements).
    fn view_as(&mut self, t: usize, free: &[u32]) -> nki_lang::ViewId {
        let mut dims = vec![P];
        dims.extend(free);
        self.corner(t, &dims)
    }

    /// A view of tile `t`'s elements from its first, in the shape `dims` (partitions first,
    /// row-major): its leading corner when `dims` is smaller than the tile.
    fn corner(&mut self, t: usize, dims: &[u32]) -> nki_lang::ViewId {
        let shape = TileShape::new(dims).expect("shape");
        let v = TileView::whole(self.tiles[t].id.index(), &shape);
        self.b.view(v).expect("view")
    }

    fn new_tile(&mut self, kind: Kind) -> usize {
        let mut dims = vec![P];
        dims.extend(kind.free());
        let dtype = match kind {
            Kind::Indices => DType::U32,
            Kind::Pred => DType::U8,
            Kind::Index | Kind::Found => DType::I32,
            Kind::Square | Kind::PsumSquare | Kind::Column | Kind::Stats | Kind::Aggr => DType::F32,
            Kind::Reduced(..) => DType::F32,
        };
        let id = self
            .b
            .tile(
                &format!("t{}", self.tiles.len()),
                kind.memory(),
                dtype,
                &dims,
            )
            .expect("tile");
        self.tiles.push(Tile {
            id,
            kind,
            defined: vec![false; P as usize * kind.elems()],
            values: None,
        });
        self.tiles.len() - 1
    }

    fn push(&mut self, opcode: Opcode, m: Option<Mask>, data: InstrData) {
        self.seen.push((opcode, m.is_some()));
        let mut i = Instr::new(opcode, data);
        if let Some(m) = m {
            i.mask = Some(self.b.mask(m).expect("mask"));
        }
        self.b.push(i).expect("push");
        self.instrs += 1;
    }

    /// Pushes an unmasked instruction on `engine`.
    fn push_on(&mut self, opcode: Opcode, engine: Engine, data: InstrData) {
        self.seen.push((opcode, false));
        let mut i = Instr::new(opcode, data);
        i.engine = engine;
        self.b.push(i).expect("push");
        self.instrs += 1;
    }

    /// Tiles of `kind` so far.
    fn of(&self, kinds: &[Kind]) -> Vec<usize> {
        (0..self.tiles.len())
            .filter(|&t| kinds.contains(&self.tiles[t].kind))
            .collect()
    }

    fn pick(&self, c: &mut Choices<'_>, kinds: &[Kind]) -> Option<usize> {
        let all = self.of(kinds);
        (!all.is_empty()).then(|| all[c.below(all.len())])
    }

    /// Stores tile `t` to a new output under a `[rows, cols]` mask (over its 2-D view).
    fn store(&mut self, t: usize, rows: u32, cols: u32) {
        let fe = self.tiles[t].kind.elems() as u32;
        let o = self.outputs[self.stores.len()];
        let v = self.view_as(t, &[fe]);
        let hbm = self.b.access(access(o, P, fe, false)).expect("access");
        let (rows, cols) = (rows.min(P), cols.min(fe));
        let m = (rows < P || cols < fe).then(|| mask(rows, (1, cols)));
        let pc = self.instrs;
        self.push(Opcode::Store, m, InstrData::Dma { tile: v, hbm });
        let d = &self.tiles[t].defined;
        let stored = (0..rows as usize)
            .flat_map(|r| (0..cols as usize).map(move |c| d[r * fe as usize + c]))
            .collect();
        self.stores.push((self.stores.len(), pc, stored));
    }
}

/// A step of the program, by its first choice byte.
const STEPS: usize = 42;

impl Gen {
    /// A dynamic copy (`opcode`, stride 1) from `src` into `dst` at the offset a new index
    /// tile's first element holds, under a mask of the first `rows` partitions; returns the
    /// offset (0 or P − 1).
    fn dynamic_copy(
        &mut self,
        c: &mut Choices<'_>,
        opcode: Opcode,
        dst: Dst,
        src: nki_lang::ViewId,
        rows: u32,
    ) -> usize {
        let (ix, positions) = self.index_tile(c);
        let shape = TileShape::new(&[1, 1]).expect("shape");
        let offset = (self.b)
            .view(TileView::whole(self.tiles[ix].id.index(), &shape))
            .expect("view");
        let cm = (rows < P).then(|| mask(rows, (1, 1)));
        let data = InstrData::DynCopy {
            dst,
            src,
            offset,
            stride: 1,
        };
        self.push(opcode, cm, data);
        positions[0]
    }

    /// A new one-element SBUF tile of `dtype` (named `name` and the instruction count) that an
    /// `iota` writes with `value`: a seed for `random_seed` or `set_rng_seed`.
    fn seed_tile(&mut self, name: &str, dtype: DType, value: i64) -> nki_lang::ViewId {
        let seed = self
            .b
            .tile(
                &format!("{name}{}", self.instrs),
                Memory::Sbuf,
                dtype,
                &[1, 1],
            )
            .expect("tile");
        let shape = TileShape::new(&[1, 1]).expect("shape");
        let v = self
            .b
            .view(TileView::whole(seed.index(), &shape))
            .expect("view");
        let expr = self.b.expr(AxisIndex::constant(value)).expect("expr");
        let dst = Dst::overwrite(v);
        self.push(Opcode::Iota, None, InstrData::Iota { dst, expr });
        v
    }

    /// A new `[P, 1]` int32 index tile, written whole by an `iota`: the rows `p` or `P − 1 − p`
    /// (a permutation, so a scatter names each row once), and the rows it names.
    fn index_tile(&mut self, c: &mut Choices<'_>) -> (usize, Vec<usize>) {
        let d = self.new_tile(Kind::Index);
        let dst = Dst::overwrite(self.view(d));
        let reversed = c.below(2) == 1;
        let mut e = AxisIndex::constant(if reversed { i64::from(P) - 1 } else { 0 });
        e.grid[0] = if reversed { -1 } else { 1 };
        let expr = self.b.expr(e).expect("expr");
        self.push(Opcode::Iota, None, InstrData::Iota { dst, expr });
        self.tiles[d].defined = vec![true; P as usize];
        let rows = (0..P as usize)
            .map(|k| if reversed { P as usize - 1 - k } else { k })
            .collect();
        (d, rows)
    }

    /// An indirect DMA (`opcode`) between the `[P, F]` tile `t` and the rows of `tensor` the
    /// index tile `ix` names, under mask `m`.
    fn indirect(&mut self, opcode: Opcode, m: Option<Mask>, t: usize, tensor: TensorId, ix: usize) {
        let (tile, index) = (self.view(t), self.view(ix));
        let mut a = access(tensor, P, F, false);
        a.axes[0] = AxisIndex::constant(0);
        let hbm = self.b.access(a).expect("access");
        let data = InstrData::Indirect {
            tile,
            hbm,
            index,
            axis: 0,
            mode: IndirectMode::Rows,
        };
        self.push(opcode, m, data);
    }

    /// An indirect store (`indirect_store` or `atomic_rmw`) of a `[P, F]` tile into the next
    /// output, under a `[rows, cols]` mask.
    fn scatter(&mut self, opcode: Opcode, c: &mut Choices<'_>) {
        let squares = self.of(&[Kind::Square]);
        if squares.is_empty() || self.stores.len() >= self.outputs.len() {
            return;
        }
        let t = squares[c.below(squares.len())];
        let (ix, _) = self.index_tile(c);
        let (rows, cols) = (c.bound(P), c.bound(F));
        let m = (rows < P || cols < F).then(|| mask(rows, (1, cols)));
        let o = self.outputs[self.stores.len()];
        let pc = self.instrs;
        self.indirect(opcode, m, t, o, ix);
        let d = &self.tiles[t].defined;
        let stored = (0..rows as usize)
            .flat_map(|r| (0..cols as usize).map(move |c| d[r * F as usize + c]))
            .collect();
        self.stores.push((self.stores.len(), pc, stored));
    }
}

/// Generates one step: a new tile (or an accumulation into an old one) and the reference's
/// definedness of it.
fn step(g: &mut Gen, c: &mut Choices<'_>) {
    let sq = [Kind::Square];
    let on_chip_sq = [Kind::Square, Kind::PsumSquare];
    let (mp, mf) = (c.bound(P), c.bound(F));
    let m = (mp < P || mf < F).then(|| mask(mp, (1, mf)));
    let inside = |r: usize, f: usize| r < mp as usize && f < mf as usize;
    let n = (P * F) as usize;
    let fu = F as usize;
    match c.below(STEPS) {
        // load under a mask
        0 => {
            let d = g.new_tile(Kind::Square);
            let tile = g.view(d);
            let hbm = g.b.access(access(g.input, P, F, false)).expect("access");
            g.push(Opcode::Load, m, InstrData::Dma { tile, hbm });
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu)).collect();
            g.tiles[d].values = Some((0..n).map(input_value).collect());
        }
        // memset of 1.5 or 0 under a mask
        1 => {
            let d = g.new_tile(Kind::Square);
            let dst = Dst::overwrite(g.view(d));
            let value = [1.5, 0.0][c.below(2)];
            g.push(
                Opcode::Memset,
                m,
                InstrData::Fill {
                    dst,
                    value: Scalar::float(value),
                },
            );
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu)).collect();
            g.tiles[d].values = Some(vec![value; n]);
        }
        // iota under a mask: `a·p + b·f + k`, zero on a line for some choices
        2 => {
            let d = g.new_tile(Kind::Square);
            let dst = Dst::overwrite(g.view(d));
            let (a, bf, k) = [(3, 1, 1), (1, -1, 0), (0, 1, -3), (2, -1, -2)][c.below(4)];
            let mut e = AxisIndex::constant(k);
            e.grid[0] = a;
            e.grid[1] = bf;
            let expr = g.b.expr(e).expect("expr");
            g.push(Opcode::Iota, m, InstrData::Iota { dst, expr });
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu)).collect();
            g.tiles[d].values = Some(
                (0..n)
                    .map(|e| (a * (e / fu) as i64 + bf * (e % fu) as i64 + k) as f32)
                    .collect(),
            );
        }
        // tensor_copy, reciprocal: one source
        3 | 4 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            let d = g.new_tile(Kind::Square);
            let (dst, src) = (Dst::overwrite(g.view(d)), g.view(a));
            let op = if c.byte().is_multiple_of(2) {
                Opcode::TensorCopy
            } else {
                Opcode::Reciprocal
            };
            g.push(op, m, InstrData::Unary { dst, src });
            let da = g.tiles[a].defined.clone();
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu) && da[e]).collect();
        }
        // tensor_tensor, optionally accumulating into an earlier square SBUF tile
        5 => {
            let (Some(a), Some(b2)) = (g.pick(c, &on_chip_sq), g.pick(c, &sq)) else {
                return;
            };
            let old = if c.byte().is_multiple_of(3) {
                g.pick(c, &sq).filter(|&t| t != a && t != b2)
            } else {
                None
            };
            let (d, write, fresh) = match old {
                Some(t) => (t, Write::Accumulate(Alu::Add), false),
                None => (g.new_tile(Kind::Square), Write::Overwrite, true),
            };
            let dst = Dst {
                view: g.view(d),
                write,
            };
            let (va, vb) = (g.view(a), g.view(b2));
            g.push(
                Opcode::TensorTensor,
                m,
                InstrData::Alu {
                    dst,
                    src: [Src::Tile(va), Src::Tile(vb), Src::None],
                    op: [Alu::Multiply, Alu::Bypass],
                    rev: 0,
                    acc: None,
                },
            );
            let (da, db) = (g.tiles[a].defined.clone(), g.tiles[b2].defined.clone());
            let old = g.tiles[d].defined.clone();
            let acc = !fresh;
            // Accumulated into: the reference no longer knows its values.
            g.tiles[d].values = None;
            g.tiles[d].defined = (0..n)
                .map(|e| {
                    if inside(e / fu, e % fu) {
                        da[e] && db[e] && (!acc || old[e])
                    } else {
                        old[e] && !fresh
                    }
                })
                .collect();
        }
        // tensor_scalar, scalar_tensor_tensor (a second tile) or tensor_scalar_reduce (a
        // per-partition sum) with a column operand
        6 => {
            let (Some(a), Some(col)) = (g.pick(c, &on_chip_sq), g.pick(c, &[Kind::Column])) else {
                return;
            };
            let variant = c.below(3);
            let other = if variant == 1 { g.pick(c, &sq) } else { None };
            if variant == 1 && other.is_none() {
                return;
            }
            let d = g.new_tile(Kind::Square);
            let r = (variant == 2).then(|| g.new_tile(Kind::Column));
            let (dst, va, vc) = (Dst::overwrite(g.view(d)), g.view(a), g.view(col));
            let third = other.map_or(Src::None, |t| Src::Tile(g.view(t)));
            let acc = r.map(|r| nki_lang::AccOut {
                op: Alu::Add,
                view: g.view(r),
            });
            let (opcode, op) = match variant {
                0 => (Opcode::TensorScalar, [Alu::Add, Alu::Bypass]),
                1 => (Opcode::ScalarTensorTensor, [Alu::Multiply, Alu::Add]),
                _ => (Opcode::TensorScalarReduce, [Alu::Add, Alu::Bypass]),
            };
            g.push(
                opcode,
                m,
                InstrData::Alu {
                    dst,
                    src: [Src::Tile(va), Src::Tile(vc), third],
                    op,
                    rev: 0,
                    acc,
                },
            );
            let (da, dc) = (g.tiles[a].defined.clone(), g.tiles[col].defined.clone());
            let db = other.map(|t| g.tiles[t].defined.clone());
            let value: Vec<bool> = (0..n)
                .map(|e| {
                    inside(e / fu, e % fu)
                        && da[e]
                        && dc[e / fu]
                        && db.as_ref().is_none_or(|b| b[e])
                })
                .collect();
            if let Some(r) = r {
                g.tiles[r].defined = (0..P as usize)
                    .map(|p| p < mp as usize && (0..mf as usize).all(|f| value[p * fu + f]))
                    .collect();
            }
            g.tiles[d].defined = value;
        }
        // activation with an optional bias column and a per-partition sum (or trn3's
        // exponential with that column as max_value, or activate2 with it as imm0)
        7 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            let bias = if c.byte().is_multiple_of(2) {
                g.pick(c, &[Kind::Column])
            } else {
                None
            };
            let d = g.new_tile(Kind::Square);
            let r = g.new_tile(Kind::Column);
            let (dst, src, vr) = (Dst::overwrite(g.view(d)), g.view(a), g.view(r));
            let bias_src = bias.map_or(Src::None, |b| Src::Tile(g.view(b)));
            let acc = Some(nki_lang::AccOut {
                op: Alu::Add,
                view: vr,
            });
            let (opcode, data) = match c.below(3) {
                0 => (
                    Opcode::Activation,
                    InstrData::Act {
                        dst,
                        src,
                        func: ActFn::Exp,
                        scale: Src::Imm(Scalar::float(0.5)),
                        bias: bias_src,
                        acc,
                    },
                ),
                1 => (
                    Opcode::Exponential,
                    InstrData::Act {
                        dst,
                        src,
                        func: ActFn::Exp,
                        scale: Src::None,
                        bias: bias_src,
                        acc,
                    },
                ),
                _ => {
                    let (imm0, op0) = match bias_src {
                        Src::None => (Src::None, Alu::Bypass),
                        b @ (Src::Tile(_) | Src::Imm(_)) => (b, Alu::Multiply),
                    };
                    let data = InstrData::Act2 {
                        dst,
                        src,
                        imm: [imm0, Src::None],
                        op: [op0, Alu::Bypass],
                        rev: 0,
                        func: ActFn::Exp,
                        acc,
                    };
                    (Opcode::Activate2, data)
                }
            };
            g.push(opcode, m, data);
            let da = g.tiles[a].defined.clone();
            let db = bias.map(|b| g.tiles[b].defined.clone());
            let value: Vec<bool> = (0..n)
                .map(|e| inside(e / fu, e % fu) && da[e] && db.as_ref().is_none_or(|b| b[e / fu]))
                .collect();
            g.tiles[r].defined = (0..P as usize)
                .map(|p| p < mp as usize && (0..mf as usize).all(|f| value[p * fu + f]))
                .collect();
            g.tiles[d].defined = value;
        }
        // tensor_reduce over a [P, 2, 4] view: the middle axis, the last, or both
        8 => {
            let Some(a) = g.pick(c, &sq) else { return };
            let axes = 1 + c.below(3) as u8;
            let kind = match axes {
                1 => Kind::Reduced(1, 4),
                2 => Kind::Reduced(2, 1),
                _ => Kind::Column,
            };
            // A mask on the partitions and on the view's last axis.
            let (rows, last) = (c.bound(P), c.bound(4));
            let rm = (rows < P || last < 4).then(|| mask(rows, (2, last)));
            let d = g.new_tile(kind);
            let dst = if kind == Kind::Column {
                Dst::overwrite(g.view_as(d, &[1, 1]))
            } else {
                Dst::overwrite(g.view(d))
            };
            let src = g.view_as(a, &[2, 4]);
            g.push(
                Opcode::TensorReduce,
                rm,
                InstrData::Reduce {
                    dst,
                    src,
                    op: Alu::Max,
                    axes,
                    negate: false,
                },
            );
            let da = g.tiles[a].defined.clone();
            let src_def = |p: usize, i: usize, j: usize| da[p * fu + i * 4 + j];
            let (rows, last) = (rows as usize, last as usize);
            g.tiles[d].defined = match axes {
                // [P, 1, 4]: element (p, j) over i, for j below the mask's bound
                1 => (0..P as usize * 4)
                    .map(|e| {
                        let (p, j) = (e / 4, e % 4);
                        p < rows && j < last && (0..2).all(|i| src_def(p, i, j))
                    })
                    .collect(),
                // [P, 2, 1]: element (p, i) over the kept positions j
                2 => (0..P as usize * 2)
                    .map(|e| {
                        let (p, i) = (e / 2, e % 2);
                        p < rows && (0..last).all(|j| src_def(p, i, j))
                    })
                    .collect(),
                _ => (0..P as usize)
                    .map(|p| p < rows && (0..2).all(|i| (0..last).all(|j| src_def(p, i, j))))
                    .collect(),
            };
        }
        // tensor_tensor_scan
        9 => {
            let (Some(a), Some(b2)) = (g.pick(c, &on_chip_sq), g.pick(c, &sq)) else {
                return;
            };
            let d = g.new_tile(Kind::Square);
            let (dst, va, vb) = (Dst::overwrite(g.view(d)), g.view(a), g.view(b2));
            g.push(
                Opcode::TensorTensorScan,
                m,
                InstrData::Scan {
                    dst,
                    src: [va, vb],
                    init: Src::Imm(Scalar::float(0.0)),
                    op: [Alu::Multiply, Alu::Add],
                    rev: 0,
                },
            );
            let (da, db) = (g.tiles[a].defined.clone(), g.tiles[b2].defined.clone());
            let mut out = vec![false; n];
            for p in 0..mp as usize {
                let mut ok = true;
                for f in 0..mf as usize {
                    ok = ok && da[p * fu + f] && db[p * fu + f];
                    out[p * fu + f] = ok;
                }
            }
            g.tiles[d].defined = out;
        }
        // affine_select: where 2·p − f + k ≥ 0, the tile; elsewhere an immediate
        10 => {
            let Some(a) = g.pick(c, &sq) else { return };
            let k = c.below(9) as i64 - 4;
            let d = g.new_tile(Kind::Square);
            let (dst, va) = (Dst::overwrite(g.view(d)), g.view(a));
            let mut e = AxisIndex::constant(k);
            e.grid[0] = 2;
            e.grid[1] = -1;
            let expr = g.b.expr(e).expect("expr");
            g.push(
                Opcode::AffineSelect,
                m,
                InstrData::Select {
                    dst,
                    pred: Pred::Affine { expr, cmp: Cmp::Ge },
                    on_true: Src::Tile(va),
                    on_false: Src::Imm(Scalar::float(-1.0)),
                },
            );
            let da = g.tiles[a].defined.clone();
            g.tiles[d].defined = (0..n)
                .map(|e| {
                    let (p, f) = ((e / fu) as i64, (e % fu) as i64);
                    inside(e / fu, e % fu) && (2 * p - f + k < 0 || da[e])
                })
                .collect();
        }
        // select with a tile predicate whose values the reference knows: each defined
        // predicate element picks a side, and only that side's element counts
        11 => {
            let predicates: Vec<usize> = (0..g.tiles.len())
                .filter(|&t| g.tiles[t].values.is_some())
                .collect();
            if predicates.is_empty() {
                return;
            }
            let pr = predicates[c.below(predicates.len())];
            let (Some(a), Some(b2)) = (g.pick(c, &sq), g.pick(c, &sq)) else {
                return;
            };
            let d = g.new_tile(Kind::Square);
            let (dst, vp, va, vb) = (Dst::overwrite(g.view(d)), g.view(pr), g.view(a), g.view(b2));
            g.push(
                Opcode::Select,
                m,
                InstrData::Select {
                    dst,
                    pred: Pred::Tile(vp),
                    on_true: Src::Tile(va),
                    on_false: Src::Tile(vb),
                },
            );
            let (dp, da, db) = (
                g.tiles[pr].defined.clone(),
                g.tiles[a].defined.clone(),
                g.tiles[b2].defined.clone(),
            );
            let vp = g.tiles[pr].values.clone().unwrap_or_default();
            g.tiles[d].defined = (0..n)
                .map(|e| {
                    let side = if vp[e] != 0.0 { da[e] } else { db[e] };
                    inside(e / fu, e % fu) && dp[e] && side
                })
                .collect();
        }
        // bn_stats (no mask), then maybe bn_aggr (masked on partitions)
        12 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            let d = g.new_tile(Kind::Stats);
            let (dst, src) = (Dst::overwrite(g.view(d)), g.view(a));
            g.push(Opcode::BnStats, None, InstrData::Unary { dst, src });
            let da = g.tiles[a].defined.clone();
            let rows: Vec<bool> = (0..P as usize)
                .map(|p| da[p * fu..(p + 1) * fu].iter().all(|&x| x))
                .collect();
            g.tiles[d].defined = (0..P as usize * 6).map(|e| rows[e / 6]).collect();
            let e = g.new_tile(Kind::Aggr);
            let (dst, src) = (Dst::overwrite(g.view(e)), g.view(d));
            let am = (mp < P).then(|| mask(mp, (1, 2)));
            g.push(Opcode::BnAggr, am, InstrData::Unary { dst, src });
            g.tiles[e].defined = (0..P as usize * 2)
                .map(|x| x / 2 < mp as usize && rows[x / 2])
                .collect();
        }
        // nc_transpose on TensorE into PSUM
        13 => {
            let Some(a) = g.pick(c, &sq) else { return };
            let d = g.new_tile(Kind::PsumSquare);
            let (dst, src) = (Dst::overwrite(g.view(d)), g.view(a));
            g.push(Opcode::Transpose, None, InstrData::Unary { dst, src });
            let da = g.tiles[a].defined.clone();
            g.tiles[d].defined = (0..n).map(|e| da[(e % fu) * fu + e / fu]).collect();
        }
        // nc_matmul into a new PSUM tile, or accumulating into an earlier one
        14 => {
            let (Some(s), Some(mv)) = (g.pick(c, &sq), g.pick(c, &sq)) else {
                return;
            };
            let old = if c.byte().is_multiple_of(3) {
                g.pick(c, &[Kind::PsumSquare])
            } else {
                None
            };
            let (d, write) = match old {
                Some(t) => (t, Write::Accumulate(Alu::Add)),
                None => (g.new_tile(Kind::PsumSquare), Write::Overwrite),
            };
            let (ts, tm, td) = (g.tiles[s].id, g.tiles[mv].id, g.tiles[d].id);
            g.b.nc_matmul(td, ts, tm, write).expect("matmul");
            g.seen.push((Opcode::Matmul, write != Write::Overwrite));
            g.instrs += 1;
            let (ds, dm) = (g.tiles[s].defined.clone(), g.tiles[mv].defined.clone());
            let prev = g.tiles[d].defined.clone();
            g.tiles[d].defined = (0..n)
                .map(|e| {
                    let (i, j) = (e / fu, e % fu);
                    (0..P as usize).all(|k| ds[k * fu + i] && dm[k * fu + j])
                        && (old.is_none() || prev[e])
                })
                .collect();
        }
        // load_transpose2d
        15 => {
            let d = g.new_tile(Kind::Square);
            let tile = g.view(d);
            let hbm = g.b.access(access(g.input, P, F, false)).expect("access");
            g.push(Opcode::LoadTranspose2d, None, InstrData::Dma { tile, hbm });
            g.tiles[d].defined = vec![true; n];
        }
        // max8 of a tile, then nc_find_index8 and nc_match_replace8 of the tile and the 8
        // values, each masked on partitions (or not): a result row is defined where its
        // partition is kept and every row it reads is wholly defined
        16 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            let pm = (mp < P).then(|| {
                let mut m = mask(mp, (1, F));
                m.len = 1;
                m
            });
            let whole = |d: &[bool], w: usize| -> Vec<bool> {
                (0..P as usize)
                    .map(|p| p < mp as usize && d[p * w..(p + 1) * w].iter().all(|&x| x))
                    .collect()
            };
            let top = g.new_tile(Kind::Square);
            let (dst, src) = (Dst::overwrite(g.view(top)), g.view(a));
            g.push(Opcode::Max8, pm, InstrData::Unary { dst, src });
            let ra = whole(&g.tiles[a].defined, fu);
            g.tiles[top].defined = (0..n).map(|e| ra[e / fu]).collect();
            let rt = whole(&g.tiles[top].defined, fu);
            let both: Vec<bool> = ra.iter().zip(&rt).map(|(&x, &y)| x && y).collect();
            let idx = g.new_tile(Kind::Indices);
            let (dst, data, vals) = (Dst::overwrite(g.view(idx)), g.view(a), g.view(top));
            let imm = None;
            g.push(
                Opcode::FindIndex8,
                pm,
                InstrData::Match8 {
                    dst,
                    data,
                    vals,
                    imm,
                    idx: None,
                },
            );
            g.tiles[idx].defined = (0..P as usize * 8).map(|e| both[e / 8]).collect();
            // The replacement, and (sometimes) the replaced elements' indices.
            let rep = g.new_tile(Kind::Square);
            let (dst, data, vals) = (Dst::overwrite(g.view(rep)), g.view(a), g.view(top));
            let imm = Some(Scalar::float(-1.0));
            let second = c
                .byte()
                .is_multiple_of(2)
                .then(|| g.new_tile(Kind::Indices));
            let idx = second.map(|t| g.view(t));
            g.push(
                Opcode::MatchReplace8,
                pm,
                InstrData::Match8 {
                    dst,
                    data,
                    vals,
                    imm,
                    idx,
                },
            );
            g.tiles[rep].defined = (0..n).map(|e| both[e / fu]).collect();
            if let Some(t) = second {
                g.tiles[t].defined = (0..P as usize * 8).map(|e| both[e / 8]).collect();
            }
        }
        // select_reduce: a uint8 predicate (a memset of 0 or 1 under a mask of its own), a tile
        // on the true side, an immediate on the false side, the predicate maybe reversed, the
        // maximum of each partition's results into a column; the instruction under a mask
        17 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            let (pp, pf) = (c.bound(P), c.bound(F));
            let pm = (pp < P || pf < F).then(|| mask(pp, (1, pf)));
            let pr = g.new_tile(Kind::Pred);
            let value = c.below(2) as i32;
            let dst = Dst::overwrite(g.view(pr));
            g.push(
                Opcode::Memset,
                pm,
                InstrData::Fill {
                    dst,
                    value: Scalar::Int(value),
                },
            );
            g.tiles[pr].defined = (0..n)
                .map(|e| e / fu < pp as usize && e % fu < pf as usize)
                .collect();
            let reverse = c.below(2) == 1;
            let taken = (value != 0) != reverse;
            let d = g.new_tile(Kind::Square);
            let r = g.new_tile(Kind::Column);
            let (dst, vp, vt, vr) = (Dst::overwrite(g.view(d)), g.view(pr), g.view(a), g.view(r));
            g.push(
                Opcode::SelectReduce,
                m,
                InstrData::SelectReduce {
                    dst,
                    pred: vp,
                    on_true: vt,
                    on_false: Src::Imm(Scalar::float(-2.0)),
                    reverse,
                    acc: Some(AccOut {
                        op: Alu::Max,
                        view: vr,
                    }),
                },
            );
            let (dp, da) = (g.tiles[pr].defined.clone(), g.tiles[a].defined.clone());
            let elem = |e: usize| dp[e] && (!taken || da[e]);
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu) && elem(e)).collect();
            g.tiles[r].defined = (0..P as usize)
                .map(|p| p < mp as usize && (0..mf as usize).all(|f| elem(p * fu + f)))
                .collect();
        }
        // indirect_load under a mask: the input's rows the index tile names
        18 => {
            let (ix, rows) = g.index_tile(c);
            let d = g.new_tile(Kind::Square);
            let input = g.input;
            g.indirect(Opcode::IndirectLoad, m, d, input, ix);
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu)).collect();
            g.tiles[d].values = Some(
                (0..n)
                    .map(|e| input_value(rows[e / fu] * fu + e % fu))
                    .collect(),
            );
        }
        // indirect_store, atomic_rmw of a tile into the next output, under a mask
        19 => g.scatter(Opcode::IndirectStore, c),
        20 => g.scatter(Opcode::AtomicRmw, c),
        // tensor_copy_dynamic_src of a column of a square tile at the offset an index tile's
        // first element holds (0 or P − 1), under a mask
        22 => {
            let Some(src) = g.pick(c, &sq) else { return };
            let d = g.new_tile(Kind::Column);
            let dst = Dst::overwrite(g.view(d));
            let col = g.view_as(src, &[1]);
            let f = g.dynamic_copy(c, Opcode::TensorCopyDynamicSrc, dst, col, mp);
            let ds = g.tiles[src].defined.clone();
            g.tiles[d].defined = (0..P as usize)
                .map(|r| r < mp as usize && ds[r * fu + f])
                .collect();
            g.tiles[d].values = None;
        }
        // gather_flattened of a square tile by an index tile under a mask: element (p, f) is
        // element idx[p] of partition p (a position in the row)
        // (or nc_n_gather, NKI 0.6's call of it: uint32 indices, no mask)
        21 => {
            let Some(src) = g.pick(c, &sq) else { return };
            let n_gather = c.below(2) == 1;
            let (ix, positions) = g.index_tile(c);
            let ix = if n_gather {
                // The same positions as uint32: an iota of them into the 8 columns of a uint32
                // tile, column 0 read.
                let u = g.new_tile(Kind::Indices);
                let dst = Dst::overwrite(g.view(u));
                let reversed = positions[0] != 0;
                let mut e = AxisIndex::constant(if reversed { i64::from(P) - 1 } else { 0 });
                e.grid[0] = if reversed { -1 } else { 1 };
                let expr = g.b.expr(e).expect("expr");
                g.push(Opcode::Iota, None, InstrData::Iota { dst, expr });
                g.tiles[u].defined = vec![true; (P * 8) as usize];
                u
            } else {
                ix
            };
            let d = g.new_tile(Kind::Square);
            let (dst, data) = (Dst::overwrite(g.view(d)), g.view(src));
            // The index column read along every free element: the result's shape.
            let shape = TileShape::new(&[P, F]).expect("shape");
            let mut v = TileView::whole(g.tiles[ix].id.index(), &shape);
            v.strides = [0; nki_lang::MAX_TILE_RANK - 1];
            let indices = g.b.view(v).expect("view");
            let (opcode, m) = match n_gather {
                true => (Opcode::NcNGather, None),
                false => (Opcode::GatherFlattened, m),
            };
            g.push(opcode, m, InstrData::Gather { dst, data, indices });
            let inside = |p: usize, f: usize| n_gather || inside(p, f);
            let ds = g.tiles[src].defined.clone();
            let vs = g.tiles[src].values.clone();
            g.tiles[d].defined = (0..n)
                .map(|e| inside(e / fu, e % fu) && ds[(e / fu) * fu + positions[e / fu] % fu])
                .collect();
            g.tiles[d].values = vs.map(|v| {
                (0..n)
                    .map(|e| v[(e / fu) * fu + positions[e / fu] % fu])
                    .collect()
            });
        }
        // a store of any tile under a mask
        // rand under a mask: defined where it writes
        23 => {
            let d = g.new_tile(Kind::Square);
            let dst = Dst::overwrite(g.view(d));
            let data = InstrData::Rng {
                dst,
                src: Src::None,
                prob: Src::None,
            };
            g.push(Opcode::Rand, m, data);
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu)).collect();
        }
        // dropout under a mask: each element depends on its data element (dropped or not)
        24 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            let d = g.new_tile(Kind::Square);
            let (dst, src) = (Dst::overwrite(g.view(d)), Src::Tile(g.view(a)));
            let prob = Src::Imm(Scalar::float(0.5));
            g.push(Opcode::Dropout, m, InstrData::Rng { dst, src, prob });
            let da = g.tiles[a].defined.clone();
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu) && da[e]).collect();
        }
        // random_seed of a one-element tile an iota wrote (writes no tile)
        25 => {
            let v = g.seed_tile("seed", DType::I32, 7);
            g.push(Opcode::RandomSeed, None, InstrData::Seed { seed: v });
        }
        // tensor_copy_dynamic_dst of a column tile into the column of an earlier square SBUF
        // tile at the offset an index tile's first element holds (0 or P − 1), under a mask
        26 => {
            let (Some(src), Some(d)) = (g.pick(c, &[Kind::Column]), g.pick(c, &sq)) else {
                return;
            };
            let dst = Dst::overwrite(g.view_as(d, &[1]));
            let col = g.view(src);
            let f = g.dynamic_copy(c, Opcode::TensorCopyDynamicDst, dst, col, mp);
            let dc = g.tiles[src].defined.clone();
            let old = g.tiles[d].defined.clone();
            g.tiles[d].defined = (0..n)
                .map(|e| {
                    let (r, col_f) = (e / fu, e % fu);
                    if col_f == f && r < mp as usize {
                        dc[r]
                    } else {
                        old[e]
                    }
                })
                .collect();
            g.tiles[d].values = None;
        }
        // dma_transpose_sbuf of a square SBUF tile under a mask: element (r, f) is element
        // (f, r) of the source
        27 => {
            let Some(a) = g.pick(c, &sq) else { return };
            let d = g.new_tile(Kind::Square);
            let (dst, src) = (Dst::overwrite(g.view(d)), g.view(a));
            g.push(Opcode::DmaTransposeSbuf, m, InstrData::Unary { dst, src });
            let da = g.tiles[a].defined.clone();
            g.tiles[d].defined = (0..n)
                .map(|e| inside(e / fu, e % fu) && da[(e % fu) * fu + e / fu])
                .collect();
        }
        // dma_transpose of the input under a mask: defined where it writes
        28 => {
            let d = g.new_tile(Kind::Square);
            let tile = g.view(d);
            let hbm = g.b.access(access(g.input, P, F, false)).expect("access");
            g.push(Opcode::DmaTranspose, m, InstrData::Dma { tile, hbm });
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu)).collect();
            g.tiles[d].values = Some(
                (0..n)
                    .map(|e| input_value((e % fu) * fu + e / fu))
                    .collect(),
            );
        }
        // range_select of a square tile between two bound columns (memsets under partition
        // masks of their own), the maximum of each partition into a column, the instruction
        // masked on partitions only: each element depends on its partition's bounds and, where
        // they select it (`lower <= f < upper`), on its data element
        29 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            let mut bounds = Vec::new();
            let range = [[0.0, 10.5, 3.0][c.below(3)], [100.0, 50.0, 5.0][c.below(3)]];
            for value in range {
                let bp = c.bound(P);
                let mut bm = mask(bp, (1, 1));
                bm.len = 1;
                let b = g.new_tile(Kind::Column);
                let dst = Dst::overwrite(g.view(b));
                let value = Scalar::float(value);
                g.push(
                    Opcode::Memset,
                    (bp < P).then_some(bm),
                    InstrData::Fill { dst, value },
                );
                g.tiles[b].defined = (0..P as usize).map(|p| p < bp as usize).collect();
                bounds.push(b);
            }
            let mut pm = mask(mp, (1, 1));
            pm.len = 1;
            let d = g.new_tile(Kind::Square);
            let r = g.new_tile(Kind::Column);
            let (dst, vt, vr) = (Dst::overwrite(g.view(d)), g.view(a), g.view(r));
            let vb = [g.view(bounds[0]), g.view(bounds[1])];
            g.push(
                Opcode::RangeSelect,
                (mp < P).then_some(pm),
                InstrData::RangeSelect {
                    dst,
                    on_true: vt,
                    bounds: vb,
                    cmp: [Cmp::Ge, Cmp::Lt],
                    start: 0,
                    acc: Some(AccOut {
                        op: Alu::Max,
                        view: vr,
                    }),
                },
            );
            let da = g.tiles[a].defined.clone();
            let (d0, d1) = (
                g.tiles[bounds[0]].defined.clone(),
                g.tiles[bounds[1]].defined.clone(),
            );
            let selected = |f: usize| range[0] <= f as f32 && (f as f32) < range[1];
            let elem = |e: usize| d0[e / fu] && d1[e / fu] && (!selected(e % fu) || da[e]);
            g.tiles[d].defined = (0..n).map(|e| e / fu < mp as usize && elem(e)).collect();
            g.tiles[r].defined = (0..P as usize)
                .map(|p| p < mp as usize && (0..fu).all(|f| elem(p * fu + f)))
                .collect();
        }
        // nc_stream_shuffle of a square tile into a new one or in place, by a mask that
        // repeats, skips and keeps partitions (255: a new tile's kept partition is unwritten,
        // an in-place one keeps its value)
        30 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            // Entries name partitions the P-partition source has.
            let shift = c.below(P as usize);
            let keep = c.below(P as usize);
            let mask: [u8; 32] = core::array::from_fn(|i| {
                if i == keep {
                    nki_lang::SHUFFLE_KEEP
                } else {
                    ((i * 5 + shift) % P as usize) as u8
                }
            });
            let d = if c.below(2) == 0 {
                a
            } else {
                g.new_tile(Kind::Square)
            };
            let (dst, src) = (Dst::overwrite(g.view(d)), g.view(a));
            g.push(
                Opcode::NcStreamShuffle,
                None,
                InstrData::Shuffle { dst, src, mask },
            );
            let (da, old) = (g.tiles[a].defined.clone(), g.tiles[d].defined.clone());
            g.tiles[d].defined = (0..n)
                .map(|e| match nki_lang::shuffle_source(&mask, e / fu) {
                    Some(p) => da[p * fu + e % fu],
                    None => old.get(e).copied().unwrap_or(false),
                })
                .collect();
            let va = g.tiles[a].values.clone();
            let vo = g.tiles[d].values.clone();
            g.tiles[d].values = match (va, vo) {
                (Some(va), Some(vo)) => Some(
                    (0..n)
                        .map(|e| match nki_lang::shuffle_source(&mask, e / fu) {
                            Some(p) => va[p * fu + e % fu],
                            None => vo[e],
                        })
                        .collect(),
                ),
                _ => None,
            };
        }
        // local_gather within one group of 16 partitions: a [16, F] source memset under a
        // partition mask, a [16, 1] uint16 index written whole (an iota of one position: an
        // unwritten index would hold any position, and the launch stops on one outside its
        // partition), partitions 0..P of the result copied into a square tile; each element
        // depends on the source element its index names
        31 => {
            let group = 16u32;
            let bp = 1 + c.below(group as usize) as u32;
            let k = c.below(F as usize) as i64;
            let tile = |g: &mut Gen, name: &str, dtype: DType, dims: &[u32]| {
                let t =
                    g.b.tile(&format!("{name}{}", g.instrs), Memory::Sbuf, dtype, dims)
                        .expect("tile");
                let shape = TileShape::new(dims).expect("shape");
                let v = g.b.view(TileView::whole(t.index(), &shape)).expect("view");
                (t, v)
            };
            let partitions = |rows: u32| {
                let mut m = mask(rows, (1, 1));
                m.len = 1;
                (rows < group).then_some(m)
            };
            let (_, big) = tile(g, "lg", DType::F32, &[group, F]);
            let value = Scalar::float(2.0);
            g.push(
                Opcode::Memset,
                partitions(bp),
                InstrData::Fill {
                    dst: Dst::overwrite(big),
                    value,
                },
            );
            let (_, idx) = tile(g, "li", DType::U16, &[group, 1]);
            let expr = g.b.expr(AxisIndex::constant(k)).expect("expr");
            g.push(
                Opcode::Iota,
                None,
                InstrData::Iota {
                    dst: Dst::overwrite(idx),
                    expr,
                },
            );
            let (rt, res) = tile(g, "lr", DType::F32, &[group, F]);
            g.push(
                Opcode::LocalGather,
                None,
                InstrData::LocalGather {
                    dst: Dst::overwrite(res),
                    src: big,
                    index: idx,
                    elems: 1,
                    valid: F as u16,
                },
            );
            // Partitions 0..P of the result.
            let shape = TileShape::new(&[P, F]).expect("shape");
            let top = g.b.view(TileView::whole(rt.index(), &shape)).expect("view");
            let d = g.new_tile(Kind::Square);
            let dst = Dst::overwrite(g.view(d));
            g.push(Opcode::TensorCopy, None, InstrData::Unary { dst, src: top });
            g.tiles[d].defined = (0..n).map(|e| (e / fu) < bp as usize).collect();
            g.tiles[d].values = Some(vec![2.0; n]);
        }
        // sequence_bounds of the first half of partition 0 of a square tile into partition 0
        // of a new one (viewed [1, 2, F/2]): every bound depends on every id of the row
        32 => {
            let Some(a) = g.pick(c, &sq) else { return };
            let half = F / 2;
            let ids = g.corner(a, &[1, half]);
            let d = g.new_tile(Kind::Square);
            let out = g.corner(d, &[1, 2, half]);
            g.push(
                Opcode::SequenceBounds,
                None,
                InstrData::Unary {
                    dst: Dst::overwrite(out),
                    src: ids,
                },
            );
            let da = g.tiles[a].defined.clone();
            let row = (0..half as usize).all(|f| da[f]);
            g.tiles[d].defined = (0..n).map(|e| e < fu && row).collect();
            g.tiles[d].values = None;
        }
        // tensor_scalar_cumulative of an on-chip square tile, masked on partitions, by a
        // column memset under a partition mask of its own, from op1's identity or from a
        // second such column (load_reduce): element f of partition p depends on the columns'
        // elements of p and on the source's elements 0..=f of p
        33 => {
            let Some(a) = g.pick(c, &on_chip_sq) else {
                return;
            };
            let load = c.below(2) == 1;
            let mut cols = Vec::new();
            for value in [1.5, -2.0].into_iter().take(1 + usize::from(load)) {
                let bp = c.bound(P);
                let mut bm = mask(bp, (1, 1));
                bm.len = 1;
                let b = g.new_tile(Kind::Column);
                let dst = Dst::overwrite(g.view(b));
                let value = Scalar::float(value);
                g.push(
                    Opcode::Memset,
                    (bp < P).then_some(bm),
                    InstrData::Fill { dst, value },
                );
                g.tiles[b].defined = (0..P as usize).map(|p| p < bp as usize).collect();
                cols.push(b);
            }
            let mut pm = mask(mp, (1, 1));
            pm.len = 1;
            let d = g.new_tile(Kind::Square);
            let (dst, va) = (Dst::overwrite(g.view(d)), g.view(a));
            let imm0 = Src::Tile(g.view(cols[0]));
            let imm1 = cols.get(1).map_or(Src::None, |&t| Src::Tile(g.view(t)));
            g.push(
                Opcode::TensorScalarCumulative,
                (mp < P).then_some(pm),
                InstrData::Alu {
                    dst,
                    src: [Src::Tile(va), imm0, imm1],
                    op: [Alu::Multiply, Alu::Add],
                    rev: 0,
                    acc: None,
                },
            );
            let da = g.tiles[a].defined.clone();
            let columns: Vec<Vec<bool>> =
                cols.iter().map(|&t| g.tiles[t].defined.clone()).collect();
            let mut out = vec![false; n];
            for p in 0..mp as usize {
                let mut ok = columns.iter().all(|d| d[p]);
                for f in 0..fu {
                    ok = ok && da[p * fu + f];
                    out[p * fu + f] = ok;
                }
            }
            g.tiles[d].defined = out;
            g.tiles[d].values = None;
        }
        // nonzero_with_count of the first T elements of each partition of a square SBUF tile
        // into the first T + 1 of a new int32 tile: only partition 0 of each 16 (here: 0) is
        // written, every element of it depending on the whole source row
        34 => {
            let Some(a) = g.pick(c, &sq) else { return };
            let t = [F - 1, F / 2][c.below(2)];
            let src = g.view_as(a, &[t]);
            let d = g.new_tile(Kind::Found);
            let dst = Dst::overwrite(g.view_as(d, &[t + 1]));
            let data = InstrData::Nonzero {
                dst,
                src,
                offset: [0, 5, -2][c.below(3)],
                padding: -1,
            };
            g.push(Opcode::NonzeroWithCount, None, data);
            let (t, da) = (t as usize, g.tiles[a].defined.clone());
            let row = |p: usize| (0..t).all(|f| da[p * fu + f]);
            g.tiles[d].defined = (0..n)
                .map(|e| nki_lang::nonzero_partition(e / fu) && e % fu <= t && row(e / fu))
                .collect();
            g.tiles[d].values = None;
        }
        // NKI 0.6's XORWOW instructions: the GpSimd state read into the first 6 columns of a
        // new uint32 tile (defined there only) and loaded back from them, the Vector engine
        // seeded from a one-element tile an iota wrote, then rng on either engine into a new
        // int32 tile under a mask (defined where it writes: the state is not memory)
        35 => {
            let st = g.new_tile(Kind::Indices);
            let sv = g.view_as(st, &[6]);
            let get = InstrData::Rng {
                dst: Dst::overwrite(sv),
                src: Src::None,
                prob: Src::None,
            };
            g.push_on(Opcode::RandGetState, Engine::GpSimd, get);
            g.tiles[st].defined = (0..P as usize * 8).map(|e| e % 8 < 6).collect();
            g.push_on(
                Opcode::RandSetState,
                Engine::GpSimd,
                InstrData::Seed { seed: sv },
            );
            let v = g.seed_tile("xseed", DType::U32, 11);
            g.push(Opcode::SetRngSeed, None, InstrData::Seed { seed: v });
            let d = g.new_tile(Kind::Found);
            let data = InstrData::Rng {
                dst: Dst::overwrite(g.view(d)),
                src: Src::None,
                prob: Src::None,
            };
            let engine = [Engine::Vector, Engine::GpSimd][c.below(2)];
            g.seen.push((Opcode::Rng, m.is_some()));
            let mut i = Instr::new(Opcode::Rng, data);
            i.engine = engine;
            if let Some(m) = m {
                i.mask = Some(g.b.mask(m).expect("mask"));
            }
            g.b.push(i).expect("push");
            g.instrs += 1;
            g.tiles[d].defined = (0..n).map(|e| inside(e / fu, e % fu)).collect();
            // rand2 (NeuronCore-v4) under the mask into a new fp32 tile, `max` a column when
            // there is one: defined where it writes and the column's element is
            let Some(col) = g.pick(c, &[Kind::Column]) else {
                return;
            };
            let d2 = g.new_tile(Kind::Square);
            let data = InstrData::Rng {
                dst: Dst::overwrite(g.view(d2)),
                src: Src::Imm(Scalar::float(-1.0)),
                prob: Src::Tile(g.view(col)),
            };
            g.push(Opcode::Rand2, m, data);
            let dc = g.tiles[col].defined.clone();
            g.tiles[d2].defined = (0..n)
                .map(|e| inside(e / fu, e % fu) && dc[e / fu])
                .collect();
            g.tiles[d2].values = None;
        }
        // Virtual registers and a device loop: a one-element tile an iota wrote loaded into a
        // register (3), and a `dynamic_range(0, r, 2)` (two iterations) storing its iteration
        // register into the first element of a new int32 tile: defined there only
        36 => {
            let v = g.seed_tile("reg", DType::I32, 3);
            let (r, i) = (RegId(0), RegId(1));
            let load = InstrData::Register {
                reg: r,
                src: RegSrc::None,
                tile: Some(v),
            };
            g.push(Opcode::RegisterLoad, None, load);
            let mv = InstrData::Register {
                reg: i,
                src: RegSrc::Imm(0),
                tile: None,
            };
            g.push(Opcode::RegisterMove, None, mv);
            let d = g.new_tile(Kind::Found);
            let first = g.corner(d, &[1, 1]);
            let kind = LoopKind::Dynamic {
                var: i,
                upper: r,
                step: 2,
            };
            g.b.begin_loop(kind, "d", Extent::Fixed(1)).expect("loop");
            g.instrs += 1;
            let store = InstrData::Register {
                reg: i,
                src: RegSrc::None,
                tile: Some(first),
            };
            g.push(Opcode::RegisterStore, None, store);
            g.b.end_loop().expect("loop");
            g.instrs += 1;
            g.tiles[d].defined = (0..n).map(|e| e == 0).collect();
            g.tiles[d].values = None;
        }
        // quantize_mx (NeuronCore-v4) of a [32, F] bf16 tile memset under a partition mask
        // into a [32, F/4] float8_e4m3fn_x4 tile and a new [4, F/4] uint8 scale tile, copied
        // into partitions 0..4, columns 0..F/4 of a new square tile: scale (i, f) is defined
        // where its whole group (partitions 8i..8i+7) is; then nc_matmul_mx of the result
        37 => {
            let rows = 32u32;
            let bp = 1 + c.below(rows as usize) as u32;
            let x4 = F / 4;
            let tile = |g: &mut Gen, name: &str, dtype: DType, dims: &[u32]| {
                let t =
                    g.b.tile(&format!("{name}{}", g.instrs), Memory::Sbuf, dtype, dims)
                        .expect("tile");
                let shape = TileShape::new(dims).expect("shape");
                g.b.view(TileView::whole(t.index(), &shape)).expect("view")
            };
            let src = tile(g, "qs", DType::Bf16, &[rows, F]);
            let mut pm = mask(bp, (1, 1));
            pm.len = 1;
            g.push(
                Opcode::Memset,
                (bp < rows).then_some(pm),
                InstrData::Fill {
                    dst: Dst::overwrite(src),
                    value: Scalar::float(3.0),
                },
            );
            let data = tile(g, "qd", DType::F8E4M3FnX4, &[rows, x4]);
            let scale = tile(g, "qc", DType::U8, &[rows / 8, x4]);
            g.push(
                Opcode::QuantizeMx,
                None,
                InstrData::QuantizeMx {
                    dst: Dst::overwrite(data),
                    src,
                    scale,
                },
            );
            let d = g.new_tile(Kind::Square);
            let top = g.corner(d, &[rows / 8, x4]);
            g.push(
                Opcode::TensorCopy,
                None,
                InstrData::Unary {
                    dst: Dst::overwrite(top),
                    src: scale,
                },
            );
            let group_defined = |i: usize| 8 * i + 8 <= bp as usize;
            g.tiles[d].defined = (0..n)
                .map(|e| {
                    e / fu < (rows / 8) as usize && e % fu < x4 as usize && group_defined(e / fu)
                })
                .collect();
            g.tiles[d].values = None;
            // nc_matmul_mx of the packed tile with itself, by the same scales, into the
            // [F/4, F/4] corner of a new PSUM tile: every element depends on every group
            let p = g.new_tile(Kind::PsumSquare);
            let out = g.corner(p, &[x4, x4]);
            g.push(
                Opcode::MatmulMx,
                None,
                InstrData::MatmulMx {
                    dst: Dst::overwrite(out),
                    stationary: data,
                    moving: data,
                    scales: [scale, scale],
                },
            );
            let all = bp == rows;
            g.tiles[p].defined = (0..n)
                .map(|e| e / fu < x4 as usize && e % fu < x4 as usize && all)
                .collect();
            g.tiles[p].values = None;
        }
        // dma_compute of one to four square SBUF tiles (repeats allowed), into a new tile or in
        // place into its first source (the accumulate idiom): every element depends on the
        // sources' elements at its position
        38 => {
            let count = 1 + c.below(nki_lang::DMA_COMPUTE_SOURCES);
            let mut srcs = Vec::with_capacity(count);
            for _ in 0..count {
                let Some(a) = g.pick(c, &sq) else { return };
                srcs.push(a);
            }
            let d = if c.below(2) == 0 {
                srcs[0]
            } else {
                g.new_tile(Kind::Square)
            };
            let mut views = [None; nki_lang::DMA_COMPUTE_SOURCES];
            for (slot, &a) in views.iter_mut().zip(&srcs) {
                *slot = Some(g.view(a));
            }
            let dst = Dst::overwrite(g.view(d));
            g.push(
                Opcode::DmaCompute,
                None,
                InstrData::DmaCompute { dst, srcs: views },
            );
            let defined: Vec<Vec<bool>> =
                srcs.iter().map(|&a| g.tiles[a].defined.clone()).collect();
            g.tiles[d].defined = (0..n).map(|e| defined.iter().all(|da| da[e])).collect();
            g.tiles[d].values = None;
        }
        // topk of a 16-partition bf16 snake tile (both halves copied from one square tile)
        // into new [16, K] value and index tiles, K <= 8 (the snake positions below K: column 0
        // of partitions 0..K), whose first 8 partitions are copied into a new square tile and a
        // new int32 tile: defined where topk wrote and the whole snake is defined
        39 => {
            let Some(a) = g.pick(c, &sq) else { return };
            let groups = 16u32;
            let snake =
                g.b.tile(
                    &format!("ks{}", g.instrs),
                    Memory::Sbuf,
                    DType::Bf16,
                    &[groups, F],
                )
                .expect("tile");
            let half = TileShape::new(&[P, F]).expect("shape");
            for start in [0, P] {
                let mut v = TileView::whole(snake.index(), &half);
                v.part_start = start;
                let dst = Dst::overwrite(g.b.view(v).expect("view"));
                let src = g.view(a);
                g.push(Opcode::TensorCopy, None, InstrData::Unary { dst, src });
            }
            let count = [8u16, 40, (16 * F - 3) as u16][c.below(3)];
            let k = [1u32, 5, 8][c.below(3)];
            let out = |g: &mut Gen, name: &str, dtype: DType| {
                let t =
                    g.b.tile(
                        &format!("{name}{}", g.instrs),
                        Memory::Sbuf,
                        dtype,
                        &[groups, k],
                    )
                    .expect("tile");
                let whole = TileShape::new(&[groups, k]).expect("shape");
                let first = TileShape::new(&[P, k]).expect("shape");
                (
                    g.b.view(TileView::whole(t.index(), &whole)).expect("view"),
                    g.b.view(TileView::whole(t.index(), &first)).expect("view"),
                )
            };
            let (val, val_top) = out(g, "kv", DType::Bf16);
            let (idx, idx_top) = out(g, "ki", DType::U32);
            let whole = TileShape::new(&[groups, F]).expect("shape");
            let src =
                g.b.view(TileView::whole(snake.index(), &whole))
                    .expect("view");
            let data = InstrData::TopK {
                val: Dst::overwrite(val),
                idx,
                src,
                n: count,
            };
            g.push(Opcode::TopK, None, data);
            let da = g.tiles[a].defined.clone();
            let snake_defined =
                (0..usize::from(count)).all(|i| da[(i % 16 % P as usize) * fu + i / 16]);
            let defined: Vec<bool> = (0..n)
                .map(|e| snake_defined && e % fu == 0 && e / fu < k as usize)
                .collect();
            for (kind, top) in [(Kind::Square, val_top), (Kind::Found, idx_top)] {
                let d = g.new_tile(kind);
                let dst = g.corner(d, &[P, k]);
                g.push(
                    Opcode::TensorCopy,
                    None,
                    InstrData::Unary {
                        dst: Dst::overwrite(dst),
                        src: top,
                    },
                );
                g.tiles[d].defined = defined.clone();
                g.tiles[d].values = None;
            }
        }
        // indirect_load with a scalar offset (`x.ap([[F, P], [0, 1]], scalar_offset = v,
        // indirect_dim = 1)`): column `v` of the input (0 or F − 1, an index tile's first
        // element) into a column tile, under a partition mask
        40 => {
            let (ix, positions) = g.index_tile(c);
            let index = g.corner(ix, &[1, 1]);
            let d = g.new_tile(Kind::Column);
            let tile = g.view(d);
            let hbm = g.b.access(access(g.input, P, 1, false)).expect("access");
            let mode = IndirectMode::Scalar { scale: 1, bound: F };
            let data = InstrData::Indirect {
                tile,
                hbm,
                index,
                axis: 0,
                mode,
            };
            let pm = (mp < P).then(|| mask(mp, (1, 1)));
            g.push(Opcode::IndirectLoad, pm, data);
            // Defined where the mask keeps the partition, whichever column the offset names
            // (both lie in the input, which is defined whole).
            debug_assert!(positions[0] < F as usize);
            g.tiles[d].defined = (0..P as usize).map(|r| r < mp as usize).collect();
            g.tiles[d].values = None;
        }
        // a store of any tile under a mask
        _ => {
            let all: Vec<usize> = (0..g.tiles.len())
                .filter(|&t| !matches!(g.tiles[t].kind, Kind::PsumSquare | Kind::Index))
                .collect();
            if all.is_empty() || g.stores.len() >= g.outputs.len() {
                return;
            }
            let t = all[c.below(all.len())];
            let fe = g.tiles[t].kind.elems() as u32;
            let (rows, cols) = (c.bound(P), c.bound(fe));
            store_any(g, t, rows, cols);
        }
    }
}

/// Stores tile `t` to the next output (into its first columns).
fn store_any(g: &mut Gen, t: usize, rows: u32, cols: u32) {
    g.store(t, rows, cols);
}

/// Most stores a program makes (one output each).
const STORES: usize = 4;

/// A random program, the reference's verdict (the first store of an undefined element: its
/// instruction and the element of its operand), and the output shapes' free sizes.
struct Case {
    program: CompiledProgram,
    verdict: Option<(usize, usize)>,
    outputs: Vec<u32>,
    seen: Vec<(Opcode, bool)>,
}

/// Builds a case from bytes, or `None` when the generator made nothing worth running.
fn case(bytes: &[u8]) -> Option<Case> {
    let mut c = Choices(bytes, 0);
    // The stores' tiles are chosen as the program grows; outputs are declared up front, each
    // shaped for a tile kind chosen now, and a store goes to the first output of its kind.
    // Trn2: range_select runs on NeuronCore-v3 and newer only.
    let mut b = ProgramBuilder::new("definedness", Target::Trn3);
    let input = b
        .input(
            "x",
            DType::F32,
            &[Dim::Fixed(P.into()), Dim::Fixed(F.into())],
        )
        .ok()?;
    let mut g = Gen {
        b,
        input,
        tiles: Vec::new(),
        stores: Vec::new(),
        instrs: 0,
        outputs: Vec::new(),
        seen: Vec::new(),
    };
    let steps = 3 + c.below(10);
    let scratch = &mut g;
    // Every output is `[P, F]`; a tile with fewer free elements is stored into its first
    // columns, the rest written by the initial zero store.
    for k in 0..STORES {
        let o = scratch
            .b
            .output(
                &format!("out{k}"),
                DType::F32,
                &[Dim::Fixed(P.into()), Dim::Fixed(F.into())],
            )
            .ok()?;
        scratch.outputs.push(o);
    }
    // Every output starts fully written (zeros), so that a masked store leaves no element of
    // an output unwritten.
    let z = scratch.new_tile(Kind::Square);
    let dst = Dst::overwrite(scratch.view(z));
    scratch.push(
        Opcode::Memset,
        None,
        InstrData::Fill {
            dst,
            value: Scalar::float(0.0),
        },
    );
    scratch.tiles[z].defined = vec![true; (P * F) as usize];
    for k in 0..STORES {
        let v = scratch.view(z);
        let o = scratch.outputs[k];
        let hbm = scratch.b.access(access(o, P, F, false)).ok()?;
        scratch.push(Opcode::Store, None, InstrData::Dma { tile: v, hbm });
    }
    for _ in 0..steps {
        step(scratch, &mut c);
    }
    // At least one store: the last tile not in PSUM, under a random mask.
    if scratch.stores.is_empty() {
        let t = (0..scratch.tiles.len())
            .rev()
            .find(|&t| !matches!(scratch.tiles[t].kind, Kind::PsumSquare | Kind::Index))?;
        let fe = scratch.tiles[t].kind.elems() as u32;
        let (rows, cols) = (c.bound(P), c.bound(fe));
        store_any(scratch, t, rows, cols);
    }
    let verdict = g
        .stores
        .iter()
        .find_map(|(_, pc, stored)| stored.iter().position(|&d| !d).map(|e| (*pc, e)));
    let outputs = vec![F; g.outputs.len()];
    let program = match g.b.finish() {
        Ok(p) => p,
        Err(e) => panic!("the builder refused a generated program: {e}"),
    };
    Some(Case {
        program,
        verdict,
        outputs,
        seen: g.seen,
    })
}

/// Launches the case on `core` (outputs start at `fill`), returning the outputs' bits.
fn launch(core: &mut NeuronCore, case: &Case) -> Result<Vec<Vec<u32>>, LaunchError> {
    let parts = case.program.parts();
    let kernel = Kernel::new(parts.program());
    let x: Vec<f32> = (0..P * F).map(|i| i as f32 * 0.25 - 3.0).collect();
    let mut outs: Vec<Vec<f32>> = case
        .outputs
        .iter()
        .map(|_| vec![7.0; (P * F) as usize])
        .collect();
    {
        let ins = [HbmIn::new(&x, &[P as usize, F as usize]).expect("input")];
        let mut hbm: Vec<HbmOut<'_>> = outs
            .iter_mut()
            .map(|o| HbmOut::new(o, &[P as usize, F as usize]).expect("output"))
            .collect();
        core.launch(&kernel, &ins, &mut hbm)?;
    }
    Ok(outs
        .iter()
        .map(|o| o.iter().map(|v| v.to_bits()).collect())
        .collect())
}

/// A kernel that fills the first `[128, 16384]` fp32 of SBUF and every PSUM bank with
/// `value`, as a previous kernel would leave them (each tile stays live to the end, so that
/// none shares addresses with another).
fn dirty(core: &mut NeuronCore, value: f32) {
    let mut b = ProgramBuilder::new("dirty", Target::Trn1);
    let o = b
        .output("o", DType::F32, &[Dim::Fixed(1), Dim::Fixed(1)])
        .expect("output");
    let s = b
        .tile("s", Memory::Sbuf, DType::F32, &[128, 16384])
        .expect("tile");
    b.memset(s, Scalar::float(value)).expect("memset");
    let banks: Vec<TileId> = (0..8)
        .map(|i| {
            let q = b
                .tile(&format!("q{i}"), Memory::Psum, DType::F32, &[128, 512])
                .expect("tile");
            b.memset(q, Scalar::float(value)).expect("memset");
            q
        })
        .collect();
    let column = TileShape::new(&[128, 1]).expect("shape");
    for (i, q) in banks.iter().enumerate() {
        let c = b
            .tile(&format!("c{i}"), Memory::Sbuf, DType::F32, &[128, 1])
            .expect("tile");
        let src = b.view(TileView::whole(q.index(), &column)).expect("view");
        let dst = Dst::overwrite(b.view(TileView::whole(c.index(), &column)).expect("view"));
        b.push(Instr::new(
            Opcode::TensorCopy,
            InstrData::Unary { dst, src },
        ))
        .expect("copy");
    }
    let v = b
        .view(TileView::whole(
            s.index(),
            &TileShape::new(&[1, 1]).expect("shape"),
        ))
        .expect("view");
    let hbm = b.access(access(o, 1, 1, false)).expect("access");
    b.push(Instr::new(Opcode::Store, InstrData::Dma { tile: v, hbm }))
        .expect("store");
    let p = b.finish().expect("the dirtying kernel builds");
    let parts = p.parts();
    let mut out = [0f32];
    let mut outs = [HbmOut::new(&mut out, &[1, 1]).expect("output")];
    core.launch(&Kernel::new(parts.program()), &[], &mut outs)
        .expect("dirty");
}

/// One case: strict mode's verdict equals the reference's; an accepted launch does not depend
/// on what SBUF and PSUM held before it.
fn check(bytes: &[u8]) -> Result<(), String> {
    let Some(case) = case(bytes) else {
        return Ok(());
    };
    let mut strict = NeuronCore::new(Target::Trn3).with_strict(true);
    let got = launch(&mut strict, &case);
    match (&got, case.verdict) {
        (Ok(_), None) => {}
        (Err(LaunchError::Exec(e)), Some((pc, n))) => {
            let element = format!("element {n} of the operand");
            let stores = ["store", "indirect_store", "atomic_rmw"];
            if e.instr != pc || !stores.contains(&e.mnemonic) || !e.what.contains(&element) {
                return Err(format!(
                    "strict mode named {e}; the reference: instruction {pc}, {element}\n{}",
                    case.program.parts().program()
                ));
            }
        }
        (got, want) => {
            return Err(format!(
                "strict mode: {:?}; the reference: {want:?} (instruction, element)\n{}",
                got.as_ref().map(|_| ()),
                case.program.parts().program()
            ));
        }
    }
    if got.is_ok() {
        let mut runs = Vec::new();
        for value in [1.0e6f32, -3.0] {
            let mut core = NeuronCore::new(Target::Trn3)
                .with_strict(false)
                .with_host_threads(1);
            dirty(&mut core, value);
            runs.push(launch(&mut core, &case).map_err(|e| e.to_string())?);
        }
        if runs[0] != runs[1] {
            return Err(format!(
                "strict mode accepted a launch whose outputs depend on stale SBUF or PSUM\n{}",
                case.program.parts().program()
            ));
        }
    }
    Ok(())
}

fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

#[test]
fn strict_definedness_matches_the_reference() {
    let mut runner = TestRunner::new(config(256));
    let strategy = proptest::collection::vec(any::<u8>(), 0..256);
    if let Err(e) = runner.run(&strategy, |b| check(&b).map_err(TestCaseError::fail)) {
        panic!("{e}");
    }
}

/// Every step kind is generated, and both verdicts occur.
#[test]
fn the_generator_reaches_every_step_and_both_verdicts() {
    let (mut errors, mut clean) = (0, 0);
    let mut seen = std::collections::HashSet::new();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..600 {
        let b: Vec<u8> = (0..200)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        if let Some(c) = case(&b) {
            seen.extend(c.seen.iter().copied());
            if c.verdict.is_some() {
                errors += 1;
            } else {
                clean += 1;
            }
        }
    }
    assert!(errors > 30 && clean > 30, "errors {errors}, clean {clean}");
    // Every opcode but loop control, masked where it takes a mask (a matmul: accumulating).
    for &op in Opcode::ALL {
        let info = op.info();
        if info.operands.is_empty() {
            continue;
        }
        assert!(
            seen.contains(&(op, false)) || seen.contains(&(op, true)),
            "never generated: {}",
            info.name
        );
        let masked = match op {
            Opcode::Matmul => true,
            Opcode::Transpose | Opcode::LoadTranspose2d => false,
            _ => info.maskable == nki_lang::ops::Maskable::Any,
        };
        if masked {
            assert!(
                seen.contains(&(op, true)),
                "never generated masked (accumulating): {}",
                info.name
            );
        }
    }
}

/// A program that stores zeros into rows `0..4` of output 0, loads the whole of output 0 back
/// (transposed when `transpose`), and stores the loaded tile's `[rows, cols]` box into output
/// 1; then fills what is left of both outputs with zeros.
fn reload(transpose: bool, rows: u32, cols: u32) -> CompiledProgram {
    let mut b = ProgramBuilder::new("reload", Target::Trn1);
    let shape = [Dim::Fixed(P.into()), Dim::Fixed(F.into())];
    let o0 = b.output("o0", DType::F32, &shape).expect("output");
    let o1 = b.output("o1", DType::F32, &shape).expect("output");
    let square = TileShape::new(&[P, F]).expect("shape");
    let z = b
        .tile("z", Memory::Sbuf, DType::F32, &[P, F])
        .expect("tile");
    let t = b
        .tile("t", Memory::Sbuf, DType::F32, &[P, F])
        .expect("tile");
    let (zv, tv) = (
        b.view(TileView::whole(z.index(), &square)).expect("view"),
        b.view(TileView::whole(t.index(), &square)).expect("view"),
    );
    b.memset(z, Scalar::float(2.0)).expect("memset");
    let push = |b: &mut ProgramBuilder, op: Opcode, m: Option<Mask>, tile, o| {
        let hbm = b.access(access(o, P, F, false)).expect("access");
        let mut i = Instr::new(op, InstrData::Dma { tile, hbm });
        i.mask = m.map(|m| b.mask(m).expect("mask"));
        b.push(i).expect("push");
    };
    push(&mut b, Opcode::Store, Some(mask(4, (1, F))), zv, o0);
    let load = if transpose {
        Opcode::LoadTranspose2d
    } else {
        Opcode::Load
    };
    push(&mut b, load, None, tv, o0);
    push(&mut b, Opcode::Store, Some(mask(rows, (1, cols))), tv, o1);
    // The rest of both outputs, from the defined tile (the box above is written twice).
    push(&mut b, Opcode::Store, None, zv, o0);
    push(&mut b, Opcode::Store, None, zv, o1);
    b.finish().expect("builds")
}

/// Strict launch of a `reload` program: `Ok` or the error's instruction and message.
fn reload_strict(p: &CompiledProgram) -> Result<(), (usize, String)> {
    let parts = p.parts();
    let kernel = Kernel::new(parts.program());
    let mut a = vec![0f32; (P * F) as usize];
    let mut c = vec![0f32; (P * F) as usize];
    let mut outs = [
        HbmOut::new(&mut a, &[P as usize, F as usize]).expect("output"),
        HbmOut::new(&mut c, &[P as usize, F as usize]).expect("output"),
    ];
    match NeuronCore::default()
        .with_strict(true)
        .launch(&kernel, &[], &mut outs)
    {
        Ok(()) => Ok(()),
        Err(LaunchError::Exec(e)) => Err((e.instr, e.what)),
        Err(e) => Err((usize::MAX, e.to_string())),
    }
}

#[test]
fn output_elements_read_before_they_are_written_are_undefined() {
    // Rows 0..4 of the reload are defined; storing them is correct.
    assert_eq!(reload_strict(&reload(false, 4, F)), Ok(()));
    // Row 4 is not: the store names its element 32 and the load.
    let (pc, what) = reload_strict(&reload(false, P, F)).unwrap_err();
    assert_eq!(pc, 3, "{what}");
    assert!(what.contains("element 32 of the operand"), "{what}");
    assert!(
        what.contains("which instruction 2 (load, line 0)"),
        "{what}"
    );
    // Transposed, the defined part is columns 0..4.
    assert_eq!(reload_strict(&reload(true, P, 4)), Ok(()));
    let (pc, what) = reload_strict(&reload(true, 1, 5)).unwrap_err();
    assert_eq!(pc, 3, "{what}");
    assert!(what.contains("element 4 of the operand"), "{what}");
    assert!(
        what.contains("which instruction 2 (load_transpose2d, line 0)"),
        "{what}"
    );
}
