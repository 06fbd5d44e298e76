//! Random builder calls, mostly breaking some rule: out-of-range shapes, partition counts,
//! trip counts and indices, ids of another builder's tiles and tensors, unbalanced loops,
//! arbitrary opcodes with operands of the wrong kind, on the wrong engine, under odd masks.
//! Every call and `finish` must return (`Ok` or `Err`), never panic; a program that `finish`
//! accepts must launch on a strict and a plain core, or be refused, without a panic.

use half::bf16;
use nki_lang::builder::{Grid, Operand, ProgramBuilder, TensorId, TileId};
use nki_lang::{
    ActFn, Affine, Alu, AxisIndex, CompiledProgram, DType, Dim, Dst, Engine, Extent, HbmAccess,
    IndirectMode, Instr, InstrData, LoopKind, MAX_MASK_TERMS, MAX_TENSOR_RANK, MAX_TILE_RANK,
    MAX_VARS, Mask, MaskTerm, Memory, Opcode, Scalar, Src, Target, TileShape, TileView, Write,
};
use nki_runtime::{HbmIn, HbmOut, Kernel, NeuronCore};

use super::generate::Choices;

/// Loop-iteration product above which an accepted program is not launched (it could run for
/// long, which is not what this property is about).
const MAX_WORK: u64 = 1 << 22;

/// Integers at and around the edges the rules care about.
const EDGES: [i64; 16] = [
    0,
    1,
    2,
    3,
    -1,
    16,
    127,
    128,
    129,
    512,
    513,
    4096,
    65536,
    1 << 32,
    i64::MAX,
    i64::MIN,
];

/// The builder under test and the ids it (or a foreign builder) handed out.
struct Calls<'c, 'a, 'b> {
    c: &'c mut Choices<'a>,
    b: &'b mut ProgramBuilder,
    tiles: Vec<TileId>,
    tensors: Vec<TensorId>,
    views: Vec<nki_lang::ViewId>,
    accesses: Vec<nki_lang::AccessId>,
}

/// Tiles and tensors of a builder of their own: their ids are out of range in another
/// builder, or name that builder's tiles and tensors of the same index, whatever they are.
fn foreign_ids(c: &mut Choices<'_>) -> (Vec<TileId>, Vec<TensorId>) {
    let mut foreign = ProgramBuilder::new("foreign", Target::Trn1);
    let mut tiles = Vec::new();
    let mut tensors = Vec::new();
    for i in 0..(1 + c.below(40)) {
        if let Ok(t) = foreign.tile("t", Memory::Sbuf, DType::F32, &[1, 1]) {
            tiles.push(t);
        }
        if i < 16
            && let Ok(t) = foreign.input("x", DType::F32, &[Dim::Fixed(1)])
        {
            tensors.push(t);
        }
    }
    (tiles, tensors)
}

/// Makes random builder calls from `data`; returns the program if `finish` accepted it.
pub fn builder_calls(data: &[u8]) -> Option<CompiledProgram> {
    let mut c = Choices::new(data);
    let (tiles, tensors) = foreign_ids(&mut c);
    let target = if c.chance(20) {
        Target::Trn2
    } else {
        Target::Trn1
    };
    let mut b = ProgramBuilder::new("invalid", target);
    let mut k = Calls {
        c: &mut c,
        b: &mut b,
        tiles: vec![*tiles.last().expect("one tile")],
        tensors: vec![*tensors.last().expect("one tensor")],
        views: Vec::new(),
        accesses: Vec::new(),
    };
    let n = k.c.below(48);
    for _ in 0..n {
        k.call();
    }
    if k.c.chance(70) {
        // Close what is open, as most programs would.
        while k.b.end_loop().is_ok() {}
    }
    b.finish().ok()
}

/// A valid generated program (from the first half of `data`) with a random builder call
/// slipped in now and then between its operations (from the second half); returns the program
/// if `finish` accepted it.
pub fn mutated_program(data: &[u8]) -> Option<CompiledProgram> {
    let (head, tail) = data.split_at(data.len() / 2);
    let case = super::generate::case(head);
    let mut c = Choices::new(tail);
    let (tiles, tensors) = foreign_ids(&mut c);
    let rate = 1 + c.below(30);
    let mut hook = |b: &mut ProgramBuilder| {
        if c.below(100) < rate {
            let mut k = Calls {
                c: &mut c,
                b,
                tiles: tiles.clone(),
                tensors: tensors.clone(),
                views: Vec::new(),
                accesses: Vec::new(),
            };
            k.call();
        }
    };
    super::lower::lower_with(&case.program, &mut hook).ok()
}

impl Calls<'_, '_, '_> {
    /// A small integer or an edge value.
    fn int(&mut self) -> i64 {
        if self.c.chance(50) {
            self.c.below(8) as i64
        } else {
            self.c.pick(&EDGES)
        }
    }

    /// A dtype: f32 or bf16 most often, any of nki's otherwise.
    fn dtype(&mut self) -> DType {
        if self.c.chance(60) {
            self.c.pick(&[DType::F32, DType::Bf16])
        } else {
            self.c.pick(&DType::ALL)
        }
    }

    /// A memory, HBM included.
    fn memory(&mut self) -> Memory {
        self.c.pick(&[Memory::Sbuf, Memory::Psum, Memory::Hbm])
    }

    /// A tensor dimension: fixed (0 and huge included) or symbolic.
    fn dim(&mut self) -> Dim {
        if self.c.chance(15) {
            let name = self.c.pick(&["N", "M", "K"]);
            self.b.symbol(name).unwrap_or(Dim::Fixed(1))
        } else {
            Dim::Fixed(
                self.c
                    .pick(&[1, 2, 3, 128, 129, 256, 0, 1 << 20, 1 << 40, u64::MAX]),
            )
        }
    }

    /// A tile shape of 0 to 5 dimensions, sizes 0 to `u32::MAX`.
    fn tile_dims(&mut self) -> Vec<u32> {
        let rank = self.c.pick(&[2, 2, 2, 1, 3, 0, 5]);
        (0..rank)
            .map(|_| {
                self.c
                    .pick(&[1, 2, 4, 32, 128, 3, 0, 129, 512, 513, 4096, 65537, u32::MAX])
            })
            .collect()
    }

    /// An affine expression with random coefficients on random variables.
    fn affine(&mut self) -> Affine {
        let mut a = Affine::constant(self.int());
        for _ in 0..self.c.below(3) {
            let v = self.c.below(MAX_VARS);
            a.coef[v] = self.int();
        }
        a
    }

    /// A tile id of this builder or the foreign one.
    fn tile(&mut self) -> TileId {
        self.c.pick(&self.tiles.clone())
    }

    /// A tensor id of this builder or the foreign one.
    fn tensor(&mut self) -> TensorId {
        self.c.pick(&self.tensors.clone())
    }

    /// An ALU operation: arithmetic most often, any otherwise.
    fn alu(&mut self) -> Alu {
        if self.c.chance(60) {
            self.c
                .pick(&[Alu::Add, Alu::Subtract, Alu::Multiply, Alu::Max, Alu::Min])
        } else {
            self.c.pick(Alu::ALL)
        }
    }

    /// An immediate: a float (inf, NaN and subnormal included) or an integer.
    fn scalar(&mut self) -> Scalar {
        if self.c.chance(70) {
            Scalar::float(
                self.c
                    .pick(&[0.0, 1.0, -2.5, f32::INFINITY, f32::NAN, 1.0e-45]),
            )
        } else {
            Scalar::Int(self.int() as i32)
        }
    }

    /// A builder operand of any kind.
    fn operand(&mut self) -> Operand {
        match self.c.below(4) {
            0 => Operand::Imm(self.scalar()),
            1 => Operand::Tile(self.tile()),
            2 => Operand::Column(self.tile()),
            _ => Operand::None,
        }
    }

    /// A grid of some tensor with random starts on random axes.
    fn grid(&mut self) -> Grid {
        let mut g = Grid::origin(self.tensor());
        for _ in 0..self.c.below(3) {
            let axis = self.c.below(MAX_TENSOR_RANK + 2);
            let start = self.affine();
            g = g.at(axis, start);
        }
        if self.c.chance(20) {
            g = g.from_axis(self.c.below(MAX_TENSOR_RANK + 2));
        }
        g
    }

    /// A destination write mode of any kind.
    fn write(&mut self) -> Write {
        match self.c.below(3) {
            0 => Write::Overwrite,
            1 => Write::Accumulate(self.alu()),
            _ => Write::Group {
                loops: self.c.below(256) as u8,
                op: self.alu(),
            },
        }
    }

    /// A tile shape `TileShape::new` accepts (`[1, 1]` when it refuses the random one).
    fn shape(&mut self) -> TileShape {
        TileShape::new(&self.tile_dims())
            .unwrap_or_else(|| TileShape::new(&[1, 1]).expect("[1, 1]"))
    }

    /// An axis index with random start and grid coefficients.
    fn axis_index(&mut self) -> AxisIndex {
        let mut grid = [0i64; MAX_TILE_RANK];
        for g in grid.iter_mut() {
            if self.c.chance(40) {
                *g = self.int();
            }
        }
        AxisIndex {
            start: self.affine(),
            grid,
        }
    }

    /// A view id: of a new random view, an earlier one, or a forged index past the pool.
    fn view_id(&mut self) -> nki_lang::ViewId {
        if self.c.chance(5) {
            return nki_lang::ViewId(self.c.below(1 << 16) as u16);
        }
        if self.views.is_empty() || self.c.chance(30) {
            let tile = if self.c.chance(80) {
                self.tile().index()
            } else {
                self.c.below(1 << 16) as u16
            };
            let mut v = TileView::whole(tile, &self.shape());
            v.part_start = self.c.pick(&[0, 0, 1, 64, 127, 128, u32::MAX]);
            if self.c.chance(30) {
                v.offset = self.affine();
            }
            for s in v.strides.iter_mut() {
                if self.c.chance(20) {
                    *s = self.int();
                }
            }
            if let Ok(id) = self.b.view(v) {
                self.views.push(id);
            }
        }
        match self.views.is_empty() {
            true => nki_lang::ViewId(0),
            false => self.c.pick(&self.views.clone()),
        }
    }

    /// An access id: of a new random access, an earlier one, or a forged index.
    fn access_id(&mut self) -> nki_lang::AccessId {
        if self.c.chance(5) {
            return nki_lang::AccessId(self.c.below(1 << 16) as u16);
        }
        if self.accesses.is_empty() || self.c.chance(30) {
            let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
            for a in axes.iter_mut() {
                *a = self.axis_index();
            }
            let access = HbmAccess {
                tensor: if self.c.chance(80) {
                    self.tensor().index()
                } else {
                    self.c.below(256) as u8
                },
                // The programs have no reshape: any index is out of range.
                reshape: if self.c.chance(10) {
                    Some(self.c.below(3) as u8)
                } else {
                    None
                },
                rank: self.c.below(MAX_TENSOR_RANK + 3) as u8,
                shape: self.shape(),
                axes,
            };
            if let Ok(id) = self.b.access(access) {
                self.accesses.push(id);
            }
        }
        match self.accesses.is_empty() {
            true => nki_lang::AccessId(0),
            false => self.c.pick(&self.accesses.clone()),
        }
    }

    /// Mostly no mask; sometimes a mask of random terms, or a forged id.
    fn mask_id(&mut self) -> Option<nki_lang::MaskId> {
        if !self.c.chance(15) {
            return None;
        }
        let mut terms = [MaskTerm {
            axis: 0,
            coef: 0,
            offset: Affine::ZERO,
            sym: None,
        }; MAX_MASK_TERMS];
        for t in terms.iter_mut() {
            *t = MaskTerm {
                axis: self.c.below(8) as u8,
                coef: self.int(),
                offset: self.affine(),
                sym: self.c.chance(30).then(|| self.c.below(10) as u8),
            };
        }
        let mask = Mask {
            terms,
            len: self.c.below(MAX_MASK_TERMS + 2) as u8,
        };
        if self.c.chance(5) {
            return Some(nki_lang::MaskId(self.c.below(1 << 16) as u16));
        }
        self.b.mask(mask).ok()
    }

    /// An expression id: of a new random expression, or a forged index.
    fn expr_id(&mut self) -> nki_lang::ExprId {
        if self.c.chance(5) {
            return nki_lang::ExprId(self.c.below(1 << 16) as u16);
        }
        let e = self.axis_index();
        self.b.expr(e).unwrap_or(nki_lang::ExprId(0))
    }

    /// A source operand of any kind.
    fn src(&mut self) -> Src {
        match self.c.below(3) {
            0 => Src::None,
            1 => Src::Imm(self.scalar()),
            _ => Src::Tile(self.view_id()),
        }
    }

    /// A destination with a random view and write mode.
    fn dst(&mut self) -> Dst {
        Dst {
            view: self.view_id(),
            write: self.write(),
        }
    }

    /// Any instruction data, of any format.
    fn data(&mut self) -> InstrData {
        match self.c.below(25) {
            0 => InstrData::Dma {
                tile: self.view_id(),
                hbm: self.access_id(),
            },
            1 => InstrData::Unary {
                dst: self.dst(),
                src: self.view_id(),
            },
            2 => InstrData::Fill {
                dst: self.dst(),
                value: self.scalar(),
            },
            3 => InstrData::Iota {
                dst: self.dst(),
                expr: self.expr_id(),
            },
            4 => InstrData::Alu {
                dst: self.dst(),
                src: [self.src(), self.src(), self.src()],
                op: [self.alu(), self.alu()],
                rev: self.c.below(4) as u8,
                acc: self.acc_out(),
            },
            5 => InstrData::Act {
                dst: self.dst(),
                src: self.view_id(),
                func: self.c.pick(ActFn::ALL),
                scale: self.src(),
                bias: self.src(),
                acc: None,
            },
            6 => InstrData::Reduce {
                dst: self.dst(),
                src: self.view_id(),
                op: self.alu(),
                axes: self.c.below(256) as u8,
                negate: self.c.chance(50),
            },
            7 => InstrData::Scan {
                dst: self.dst(),
                src: [self.view_id(), self.view_id()],
                init: self.src(),
                op: [self.alu(), self.alu()],
                rev: 0,
            },
            8 => InstrData::Select {
                dst: self.dst(),
                pred: if self.c.chance(50) {
                    nki_lang::Pred::Tile(self.view_id())
                } else {
                    nki_lang::Pred::Affine {
                        expr: self.expr_id(),
                        cmp: self.c.pick(&[
                            nki_lang::Cmp::Lt,
                            nki_lang::Cmp::Ge,
                            nki_lang::Cmp::Ne,
                        ]),
                    }
                },
                on_true: self.src(),
                on_false: self.src(),
            },
            9 => InstrData::Matmul {
                dst: self.dst(),
                stationary: self.view_id(),
                moving: self.view_id(),
            },
            10 => InstrData::Match8 {
                dst: self.dst(),
                data: self.view_id(),
                vals: self.view_id(),
                imm: self.c.chance(50).then(|| self.scalar()),
                idx: self.c.chance(50).then(|| self.view_id()),
            },
            11 => InstrData::SelectReduce {
                dst: self.dst(),
                pred: self.view_id(),
                on_true: self.view_id(),
                on_false: self.src(),
                reverse: self.c.chance(50),
                acc: self.acc_out(),
            },
            12 => InstrData::Indirect {
                tile: self.view_id(),
                hbm: self.access_id(),
                index: self.view_id(),
                axis: self.c.below(8) as u8,
                mode: if self.c.below(2) == 0 {
                    IndirectMode::Rows
                } else {
                    IndirectMode::Scalar {
                        scale: self.c.below(4) as u32,
                        bound: self.c.below(4) as u32,
                    }
                },
            },
            13 => InstrData::Gather {
                dst: self.dst(),
                data: self.view_id(),
                indices: self.view_id(),
            },
            14 => InstrData::DynCopy {
                dst: self.dst(),
                src: self.view_id(),
                offset: self.view_id(),
                stride: self.int() as i32,
            },
            15 => InstrData::Rng {
                dst: self.dst(),
                src: self.src(),
                prob: self.src(),
            },
            16 => InstrData::Seed {
                seed: self.view_id(),
            },
            17 => InstrData::RangeSelect {
                dst: self.dst(),
                on_true: self.view_id(),
                bounds: [self.view_id(), self.view_id()],
                cmp: [self.cmp(), self.cmp()],
                start: self.int() as i32,
                acc: self.acc_out(),
            },
            18 => InstrData::Shuffle {
                dst: self.dst(),
                src: self.view_id(),
                mask: std::array::from_fn(|_| {
                    self.c.pick(&[0, 1, 31, 32, 200, nki_lang::SHUFFLE_KEEP])
                }),
            },
            19 => InstrData::LocalGather {
                dst: self.dst(),
                src: self.view_id(),
                index: self.view_id(),
                elems: self.c.pick(&[0, 1, 2, 16, 255]),
                valid: self.c.pick(&[0, 1, 16, 17, u16::MAX]),
            },
            20 => InstrData::Nonzero {
                dst: self.dst(),
                src: self.view_id(),
                offset: self.int() as i32,
                padding: self.int() as i32,
            },
            21 => InstrData::Act2 {
                dst: self.dst(),
                src: self.view_id(),
                imm: [self.src(), self.src()],
                op: [self.alu(), self.alu()],
                rev: self.c.below(4) as u8,
                func: self.c.pick(ActFn::ALL),
                acc: self.acc_out(),
            },
            23 => InstrData::TopK {
                val: self.dst(),
                idx: self.view_id(),
                src: self.view_id(),
                n: self.c.pick(&[0, 7, 8, 42, 300, u16::MAX]),
            },
            22 => InstrData::DmaCompute {
                dst: self.dst(),
                srcs: std::array::from_fn(|_| self.c.chance(70).then(|| self.view_id())),
            },
            _ => InstrData::LoopEnd {
                begin: self.int() as u32,
            },
        }
    }

    /// An accumulation into a view, one time in five.
    fn acc_out(&mut self) -> Option<nki_lang::AccOut> {
        self.c.chance(20).then(|| nki_lang::AccOut {
            op: self.alu(),
            view: self.view_id(),
        })
    }

    /// Any comparison.
    fn cmp(&mut self) -> nki_lang::Cmp {
        self.c.pick(&[
            nki_lang::Cmp::Lt,
            nki_lang::Cmp::Le,
            nki_lang::Cmp::Gt,
            nki_lang::Cmp::Ge,
            nki_lang::Cmp::Eq,
            nki_lang::Cmp::Ne,
        ])
    }

    /// One builder call with random arguments; its result is dropped (an `Err` is fine).
    fn call(&mut self) {
        let name = self.c.pick(&["a", "b", "a", "_t", ""]);
        let r: Result<(), nki_lang::builder::BuildError> = match self.c.below(24) {
            0 | 1 => {
                let dims: Vec<Dim> = (0..self.c.pick(&[2, 2, 1, 3, 0, 7]))
                    .map(|_| self.dim())
                    .collect();
                let dt = self.dtype();
                self.b.input(name, dt, &dims).map(|t| self.tensors.push(t))
            }
            2 => {
                let dims: Vec<Dim> = (0..self.c.pick(&[2, 1, 3, 0, 7]))
                    .map(|_| self.dim())
                    .collect();
                let dt = self.dtype();
                self.b.output(name, dt, &dims).map(|t| self.tensors.push(t))
            }
            3 | 4 => {
                let (m, dt, dims) = (self.memory(), self.dtype(), self.tile_dims());
                self.b.tile(name, m, dt, &dims).map(|t| self.tiles.push(t))
            }
            5 => {
                let kind = self.c.pick(&[LoopKind::Affine, LoopKind::Sequential]);
                let trip = if self.c.chance(80) {
                    Extent::Fixed(self.c.pick(&[1, 2, 3, 0, 1 << 40, u64::MAX]))
                } else {
                    Extent::Sym {
                        sym: self.c.below(10) as u8,
                        add: self.c.pick(&[0, 127, u64::MAX]),
                        div: self.c.pick(&[1, 128, 0]),
                    }
                };
                self.b.begin_loop(kind, name, trip).map(|_| ())
            }
            6 => self.b.end_loop(),
            7 => {
                let (d, s) = (self.c.below(10), self.int());
                self.b.loop_var(d, s).map(|_| ())
            }
            8 => {
                let axis = self.c.below(5);
                self.b.num_programs(axis).map(|_| ())
            }
            9 => {
                let (t, g) = (self.tile(), self.grid());
                self.b.load(t, g)
            }
            10 => {
                let (g, t) = (self.grid(), self.tile());
                self.b.store(g, t)
            }
            11 => {
                let (d, s, m, w) = (self.tile(), self.tile(), self.tile(), self.write());
                self.b.nc_matmul(d, s, m, w)
            }
            12 => {
                let (d, s) = (self.tile(), self.tile());
                self.b.nc_transpose(d, s)
            }
            13 => {
                let (d, s) = (self.tile(), self.tile());
                self.b.tensor_copy(d, s)
            }
            14 => {
                let (d, v) = (self.tile(), self.scalar());
                self.b.memset(d, v)
            }
            15 => {
                let (d, a, b, op) = (self.tile(), self.tile(), self.tile(), self.alu());
                self.b.tensor_tensor(d, a, b, op)
            }
            16 => {
                let (d, a, op0, s0, op1, s1) = (
                    self.tile(),
                    self.tile(),
                    self.alu(),
                    self.operand(),
                    self.alu(),
                    self.operand(),
                );
                self.b.tensor_scalar(d, a, op0, s0, op1, s1)
            }
            17 => {
                let (d, f, a, s, bias) = (
                    self.tile(),
                    self.c.pick(ActFn::ALL),
                    self.tile(),
                    self.operand(),
                    self.operand(),
                );
                self.b.activation(d, f, a, s, bias)
            }
            18 => {
                let (d, op, a) = (self.tile(), self.alu(), self.tile());
                let (axes, negate) = (self.c.below(256) as u8, self.c.chance(50));
                self.b.tensor_reduce(d, op, a, axes, negate)
            }
            19 => {
                let (d, e) = (self.tile(), self.axis_index());
                self.b.iota(d, e)
            }
            21 => {
                let (v, i, s) = (self.tile(), self.tile(), self.tile());
                let n = self.c.pick(&[0, 8, 42, 65535, 65536, u32::MAX]);
                self.b.topk(v, i, s, n)
            }
            20 => {
                let d = self.tile();
                let srcs: Vec<_> = (0..self.c.pick(&[0, 1, 2, 4, 5]))
                    .map(|_| self.tile())
                    .collect();
                self.b.dma_compute(d, &srcs)
            }
            _ => {
                let opcode = self.c.pick(Opcode::ALL);
                let mut ins = Instr::new(opcode, self.data());
                if self.c.chance(30) {
                    ins.engine = self.c.pick(&[
                        Engine::Tensor,
                        Engine::Vector,
                        Engine::Scalar,
                        Engine::GpSimd,
                        Engine::Dma,
                        Engine::Sync,
                    ]);
                }
                ins.mask = self.mask_id();
                self.b.push(ins)
            }
        };
        drop(r);
    }
}

/// Launches an accepted program on `cores` with zeroed f32/bf16 arguments (symbols bound to
/// small sizes): it may succeed or return an error, never panic. Programs with other dtypes,
/// or too much work to run quickly, are skipped; returns whether the program was launched.
pub fn launch_accepted(
    cores: &mut [NeuronCore],
    compiled: &CompiledProgram,
    c: &mut Choices<'_>,
) -> bool {
    let parts = compiled.parts();
    let program = parts.program();
    let kernel = Kernel::new(program);
    let symbols: Vec<usize> = (0..program.symbols().len())
        .map(|_| c.pick(&[1, 2, 3, 128, 130, 256]))
        .collect();
    let mut inputs: Vec<(DType, Vec<usize>)> = Vec::new();
    for t in program.inputs() {
        let mut dims = Vec::new();
        for d in t.shape {
            dims.push(match *d {
                Dim::Fixed(n) if n <= 1 << 16 => n as usize,
                Dim::Fixed(_) => return false,
                Dim::Sym(s) => symbols.get(s as usize).copied().unwrap_or(1),
            });
        }
        if !matches!(t.dtype, DType::F32 | DType::Bf16) || dims.iter().product::<usize>() > 1 << 20
        {
            return false;
        }
        inputs.push((t.dtype, dims));
    }
    let f32s: Vec<Vec<f32>> = inputs
        .iter()
        .map(|(_, d)| vec![0.0; d.iter().product()])
        .collect();
    let bf16s: Vec<Vec<bf16>> = inputs
        .iter()
        .map(|(_, d)| vec![bf16::ZERO; d.iter().product()])
        .collect();
    let args: Vec<HbmIn<'_>> = inputs
        .iter()
        .enumerate()
        .map(|(i, (dt, d))| match dt {
            DType::F32 => HbmIn::new(&f32s[i], d),
            _ => HbmIn::new(&bf16s[i], d),
        })
        .collect::<Result<_, _>>()
        .expect("shapes match their buffers");
    let Ok(syms) = kernel.bind_inputs(&args) else {
        return false;
    };
    if work(&program, &syms) > MAX_WORK {
        return false;
    }
    let mut outs: Vec<(DType, Vec<usize>)> = Vec::new();
    for (i, t) in program.outputs().iter().enumerate() {
        let Some(shape) = kernel.output_shape(i, &syms) else {
            return false;
        };
        let dims = shape.as_slice().to_vec();
        if !matches!(t.dtype, DType::F32 | DType::Bf16) || dims.iter().product::<usize>() > 1 << 20
        {
            return false;
        }
        outs.push((t.dtype, dims));
    }
    for core in cores {
        let mut of32: Vec<Vec<f32>> = outs
            .iter()
            .map(|(_, d)| vec![0.0; d.iter().product()])
            .collect();
        let mut obf16: Vec<Vec<bf16>> = outs
            .iter()
            .map(|(_, d)| vec![bf16::ZERO; d.iter().product()])
            .collect();
        let mut out_args: Vec<HbmOut<'_>> = Vec::new();
        for (((dt, d), a), b) in outs.iter().zip(&mut of32).zip(&mut obf16) {
            out_args.push(
                match dt {
                    DType::F32 => HbmOut::new(a, d),
                    _ => HbmOut::new(b, d),
                }
                .expect("shapes match their buffers"),
            );
        }
        let _ = core.launch(&kernel, &args, &mut out_args);
    }
    true
}

/// A bound on a launch's work: every instruction (loop control included) weighted by the
/// product of its loops' trip counts and its largest operand's element count.
fn work(program: &nki_lang::Program<'_>, syms: &nki_lang::SymbolValues) -> u64 {
    let mut total: u64 = 0;
    let mut trips: Vec<u64> = Vec::new();
    for ins in program.instrs() {
        match ins.data {
            InstrData::LoopBegin { trip, .. } => {
                trips.push(trip.eval(syms).max(1));
                // The loop's own steps, even with nothing in its body.
                let n = trips.iter().fold(1u64, |a, &t| a.saturating_mul(t));
                total = total.saturating_add(n);
            }
            InstrData::LoopEnd { .. } => {
                trips.pop();
            }
            _ => {
                let elems = ins
                    .operands()
                    .filter_map(|o| o.view())
                    .filter_map(|v| program.views().get(v.index()))
                    .map(|v| v.shape.partitions() as u64 * v.shape.free_elems())
                    .max()
                    .unwrap_or(1)
                    .max(1);
                let n = trips.iter().fold(elems, |a, &t| a.saturating_mul(t));
                total = total.saturating_add(n);
            }
        }
    }
    total
}
