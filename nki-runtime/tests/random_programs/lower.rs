//! Lowering a [`Program`] to nki: one `ProgramBuilder` call per operation, through the
//! builder's named methods where they express it (whole-tile operands, default engines, unit
//! steps) and through `push` with explicit views, accesses and engines otherwise.

use nki_lang::builder::{BuildError, Grid, Operand, ProgramBuilder, TileId};
use nki_lang::{
    ActFn, Affine, Alu, AxisIndex, CompiledProgram, DType, Dim, Dst, Engine, Extent, HbmAccess,
    Instr, InstrData, LoopKind, MAX_MASK_TERMS, MAX_TENSOR_RANK, Mask, MaskId, MaskTerm, Memory,
    Opcode, Src, Target, TileShape, TileView,
};

use super::spec::{
    Act, Bin, Carry, Dt, Eng, Expr, Index, Kind, Layout, Mem, Op, Program, Red, Scalar, Split,
    Stage, Window,
};

/// nki's dtype for `dt`.
pub fn dtype(dt: Dt) -> DType {
    match dt {
        Dt::F32 => DType::F32,
        Dt::Bf16 => DType::Bf16,
    }
}

/// nki's ALU operation for `op`.
fn alu(op: Bin) -> Alu {
    match op {
        Bin::Add => Alu::Add,
        Bin::Subtract => Alu::Subtract,
        Bin::Multiply => Alu::Multiply,
        Bin::Max => Alu::Max,
        Bin::Min => Alu::Min,
    }
}

/// nki's memory for `m`.
fn memory(m: Mem) -> Memory {
    match m {
        Mem::Sbuf => Memory::Sbuf,
        Mem::Psum => Memory::Psum,
    }
}

/// The builder, the ids it returned, and a hook called after every operation.
struct Lowering<'h> {
    b: ProgramBuilder,
    inputs: Vec<nki_lang::builder::TensorId>,
    outputs: Vec<nki_lang::builder::TensorId>,
    hook: &'h mut dyn FnMut(&mut ProgramBuilder),
    /// The program's input and output tensors.
    program_inputs: Vec<super::spec::Tensor>,
    program_outputs: Vec<super::spec::Tensor>,
    /// The mask of the instruction(s) being lowered.
    mask: Option<Mask>,
}

/// Builds and checks the program (`finish`).
pub fn lower(p: &Program) -> Result<CompiledProgram, BuildError> {
    lower_with(p, &mut |_| {})
}

/// [`lower`], calling `hook` with the builder after every operation's calls (to slip extra,
/// possibly rule-breaking, calls into a valid program).
pub fn lower_with(
    p: &Program,
    hook: &mut dyn FnMut(&mut ProgramBuilder),
) -> Result<CompiledProgram, BuildError> {
    let mut l = Lowering {
        b: ProgramBuilder::new("random_program", Target::Trn1),
        inputs: Vec::new(),
        outputs: Vec::new(),
        hook,
        program_inputs: p.inputs.clone(),
        program_outputs: p.outputs.clone(),
        mask: None,
    };
    let shape = |t: &super::spec::Tensor| [Dim::Fixed(t.rows.into()), Dim::Fixed(t.cols.into())];
    for (i, t) in p.inputs.iter().enumerate() {
        let id = l.b.input(&format!("in{i}"), dtype(t.dt), &shape(t))?;
        l.inputs.push(id);
    }
    for (i, t) in p.outputs.iter().enumerate() {
        let id = l.b.output(&format!("out{i}"), dtype(t.dt), &shape(t))?;
        l.outputs.push(id);
    }
    for (s, stage) in p.stages.iter().enumerate() {
        l.stage(s, stage)?;
    }
    l.b.finish()
}

/// The affine expression of `index` over the open loops.
fn affine(b: &ProgramBuilder, index: &Index) -> Result<Affine, BuildError> {
    let mut a = Affine::constant(index.constant);
    for (d, &c) in index.coefs.iter().enumerate() {
        a = a
            .checked_add(&b.loop_var(d, c)?)
            .ok_or(BuildError::Usage("index overflow"))?;
    }
    Ok(a)
}

/// A 2-D HBM access of `shape` with per-axis starts and grid steps.
fn access(tensor: u8, shape: TileShape, starts: [Affine; 2], grid: [[i64; 2]; 2]) -> HbmAccess {
    let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
    for a in 0..2 {
        axes[a].start = starts[a];
        axes[a].grid[0] = grid[a][0];
        axes[a].grid[1] = grid[a][1];
    }
    HbmAccess {
        tensor,
        reshape: None,
        rank: 2,
        shape,
        axes,
    }
}

/// The mask `t_0 < keep[0] & t_1 < keep[1]` on a `[p, f]` grid (terms only for the axes it
/// cuts), or `None` for no mask.
fn mask_of(keep: Option<[u32; 2]>, (p, f): (u32, u32)) -> Option<Mask> {
    let keep = keep?;
    let term = MaskTerm {
        axis: 0,
        coef: 1,
        offset: Affine::ZERO,
        sym: None,
    };
    let mut m = Mask {
        terms: [term; MAX_MASK_TERMS],
        len: 0,
    };
    for (axis, (k, n)) in [(keep[0], p), (keep[1], f)].into_iter().enumerate() {
        if k < n {
            m.terms[m.len as usize] = MaskTerm {
                axis: axis as u8,
                // `t_axis − k < 0`
                offset: Affine::constant(-i64::from(k)),
                ..term
            };
            m.len += 1;
        }
    }
    (m.len > 0).then_some(m)
}

/// `[p, f]`.
fn shape2(p: u32, f: u32) -> TileShape {
    TileShape::new(&[p, f]).expect("a 2-D shape")
}

impl Lowering<'_> {
    /// Lowers stage `s`: its accumulator, loops, steps and stores.
    fn stage(&mut self, s: usize, stage: &Stage) -> Result<(), BuildError> {
        let result = stage.steps[stage.result].tile;
        let shape = [result.p, result.f];
        // The accumulator, declared before the loops.
        let acc = match stage.carry {
            Some(Carry::Tile { dt, init, .. } | Carry::Accumulate { dt, init, .. }) => {
                let t = self
                    .b
                    .tile(&format!("acc{s}"), Memory::Sbuf, dtype(dt), &shape)?;
                self.b.memset(t, nki_lang::Scalar::float(init))?;
                Some(t)
            }
            Some(Carry::Group { .. }) => {
                let t = self
                    .b
                    .tile(&format!("acc{s}"), Memory::Psum, DType::F32, &shape)?;
                self.b.memset(t, nki_lang::Scalar::float(0.0))?;
                Some(t)
            }
            None => None,
        };
        for (d, l) in stage.loops.iter().enumerate() {
            let kind = match l.kind {
                Kind::Affine => LoopKind::Affine,
                Kind::Sequential => LoopKind::Sequential,
            };
            self.b
                .begin_loop(kind, &format!("s{s}_l{d}"), Extent::Fixed(l.trip.into()))?;
        }
        let mut tiles: Vec<TileId> = Vec::with_capacity(stage.steps.len());
        for (i, step) in stage.steps.iter().enumerate() {
            if let (Some(acc), Some(Carry::Group { .. }), true) =
                (acc, stage.carry, i == stage.result)
            {
                // `acc += nc_matmul(...)`, grouped over every loop of the stage.
                let Op::Matmul { stationary, moving } = step.op else {
                    return Err(BuildError::Usage(
                        "generator bug: a group's result is a matmul",
                    ));
                };
                let write = nki_lang::Write::Group {
                    loops: ((1u16 << stage.loops.len()) - 1) as u8,
                    op: Alu::Add,
                };
                self.b
                    .nc_matmul(acc, tiles[stationary], tiles[moving], write)?;
                tiles.push(acc);
                (self.hook)(&mut self.b);
                continue;
            }
            let t = step.tile;
            let id = self.b.tile(
                &format!("s{s}_t{i}"),
                memory(t.mem),
                dtype(t.dt),
                &[t.p, t.f],
            )?;
            tiles.push(id);
            // A reduction's grid is its input's.
            let grid = match step.op {
                Op::Reduce { a, .. } => stage.steps[a].tile,
                _ => t,
            };
            self.mask = mask_of(step.mask, (grid.p, grid.f));
            self.op(&step.op, id, &tiles, stage)?;
            self.mask = None;
            (self.hook)(&mut self.b);
        }
        let res = tiles[stage.result];
        let out = self.outputs[stage.output];
        match (acc, stage.carry) {
            (Some(acc), Some(carry)) => {
                if let Carry::Tile { op, .. } = carry {
                    self.b.tensor_tensor(acc, acc, res, alu(op))?;
                }
                if let Carry::Accumulate { op, .. } = carry {
                    // `acc op= result`
                    let data = InstrData::Unary {
                        dst: Dst {
                            view: self.whole(acc, result.p, result.f)?,
                            write: nki_lang::Write::Accumulate(alu(op)),
                        },
                        src: self.whole(res, result.p, result.f)?,
                    };
                    self.push(Opcode::TensorCopy, Eng::Vector, data)?;
                }
                for _ in &stage.loops {
                    self.b.end_loop()?;
                }
                let stored = match carry {
                    Carry::Tile { .. } | Carry::Accumulate { .. } => acc,
                    Carry::Group { dt } => {
                        let t = self.b.tile(
                            &format!("acc{s}_copy"),
                            Memory::Sbuf,
                            dtype(dt),
                            &shape,
                        )?;
                        self.b.tensor_copy(t, acc)?;
                        t
                    }
                };
                return self.b.store(Grid::origin(out), stored);
            }
            _ => {
                self.mask = mask_of(Some(stage.stored), (result.p, result.f));
                if stage.ragged > 0 {
                    // NKI's ragged last tile: `it·rows_per_block + t_0 < rows`.
                    let rows = self.program_outputs[stage.output].rows;
                    let offset = affine(
                        &self.b,
                        &Index {
                            constant: -i64::from(rows),
                            coefs: stage
                                .strides()
                                .iter()
                                .map(|s| s * i64::from(stage.stored[0]))
                                .collect(),
                        },
                    )?;
                    let term = MaskTerm {
                        axis: 0,
                        coef: 1,
                        offset,
                        sym: None,
                    };
                    let mut m = self.mask.unwrap_or(Mask {
                        terms: [term; MAX_MASK_TERMS],
                        len: 0,
                    });
                    m.terms[m.len as usize] = term;
                    m.len += 1;
                    self.mask = Some(m);
                }
                self.store(stage, res, (result.p, result.f))?;
                self.mask = None;
            }
        }
        for _ in &stage.loops {
            self.b.end_loop()?;
        }
        Ok(())
    }

    /// Stores the result tile of every iteration at its block of the output.
    fn store(&mut self, stage: &Stage, res: TileId, (p, f): (u32, u32)) -> Result<(), BuildError> {
        let n = i64::from(stage.iterations());
        // The flattened iteration number times `scale`.
        let it = |b: &ProgramBuilder, scale: i64| {
            affine(
                b,
                &Index {
                    constant: 0,
                    coefs: stage.strides().iter().map(|s| s * scale).collect(),
                },
            )
        };
        // Blocks of the stored box's shape.
        let (p64, f64_) = (i64::from(stage.stored[0]), i64::from(stage.stored[1]));
        let out_id = self.outputs[stage.output];
        let z = Affine::ZERO;
        let masked = self.mask.is_some();
        let (starts, grid) = match stage.layout {
            Layout::RowBlocks if masked => ([it(&self.b, p64)?, z], [[1, 0], [0, 1]]),
            Layout::ColBlocks if masked => ([z, it(&self.b, f64_)?], [[1, 0], [0, 1]]),
            // Unit-step windows: the builder's own `store(Grid)`.
            Layout::RowBlocks => {
                let g = Grid::origin(out_id).at(0, it(&self.b, p64)?);
                return self.b.store(g, res);
            }
            Layout::ColBlocks => {
                let g = Grid::origin(out_id).at(1, it(&self.b, f64_)?);
                return self.b.store(g, res);
            }
            Layout::RowInterleave => ([it(&self.b, 1)?, z], [[n, 0], [0, 1]]),
            Layout::ColInterleave => ([z, it(&self.b, 1)?], [[1, 0], [0, n]]),
            Layout::Transposed => ([it(&self.b, f64_)?, z], [[0, 1], [1, 0]]),
        };
        let shape = shape2(p, f);
        let tile = self.b.view(TileView::whole(res.index(), &shape))?;
        let a = access(out_id.index(), shape, starts, grid);
        let hbm = self.b.access(a)?;
        let mut ins = Instr::new(Opcode::Store, InstrData::Dma { tile, hbm });
        let o = self.program_outputs[stage.output];
        ins.mask = self.dma_mask(&a, [o.rows, o.cols])?;
        self.b.push(ins)
    }

    /// The current mask for a DMA through `a` into a tensor of `dims`, with NKI's proof that
    /// the kept elements stay inside the tensor: for each tensor axis indexed `start + g·t_j`
    /// along a grid axis `j` the mask cuts, the term `g·t_j + start − dim < 0` (what a
    /// kernel writes as `k·128 + i_p < N`), without which the access's unmasked extent
    /// would have to fit.
    fn dma_mask(&mut self, a: &HbmAccess, dims: [u32; 2]) -> Result<Option<MaskId>, BuildError> {
        let Some(mut m) = self.mask else {
            return Ok(None);
        };
        let cut: Vec<u8> = m.terms().iter().map(|t| t.axis).collect();
        for (axis, ix) in a.axes().iter().enumerate() {
            let steps: Vec<(usize, i64)> = (0..2)
                .filter(|&j| ix.grid[j] != 0)
                .map(|j| (j, ix.grid[j]))
                .collect();
            let [(j, g)] = steps[..] else { continue };
            // A term of the proof's form on that axis already there (the ragged tile's).
            let proved = m
                .terms()
                .iter()
                .any(|t| usize::from(t.axis) == j && t.coef == g && t.offset.coef == ix.start.coef);
            if !cut.contains(&(j as u8)) || proved || m.len as usize >= MAX_MASK_TERMS {
                continue;
            }
            let offset = ix
                .start
                .checked_add(&Affine::constant(-i64::from(dims[axis])))
                .ok_or(BuildError::Usage("index overflow"))?;
            m.terms[m.len as usize] = MaskTerm {
                axis: j as u8,
                coef: g,
                offset,
                sym: None,
            };
            m.len += 1;
        }
        Ok(Some(self.b.mask(m)?))
    }

    /// Lowers one step's operation into its tile `dst` (`tiles`: the stage's tiles so far).
    fn op(
        &mut self,
        op: &Op,
        dst: TileId,
        tiles: &[TileId],
        stage: &Stage,
    ) -> Result<(), BuildError> {
        let step_tile = |i: usize| stage.steps[i].tile;
        let this = step_tile(tiles.len() - 1);
        // A masked instruction goes through `push` (the named methods take no mask).
        let named = |engine: Eng| engine == Eng::Default && self.mask.is_none();
        match *op {
            Op::Load {
                input,
                ref window,
                split,
            } => self.load(dst, input, window, split, (this.p, this.f)),
            Op::Memset { value, engine } => {
                let value = nki_lang::Scalar::float(value);
                if named(engine) {
                    return self.b.memset(dst, value);
                }
                let data = InstrData::Fill {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    value,
                };
                self.push(Opcode::Memset, engine, data)
            }
            Op::TensorTensor { a, b, op, engine } => {
                if named(engine) {
                    return self.b.tensor_tensor(dst, tiles[a], tiles[b], alu(op));
                }
                let (ta, tb) = (step_tile(a), step_tile(b));
                let data = InstrData::Alu {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    src: [
                        Src::Tile(self.whole(tiles[a], ta.p, ta.f)?),
                        Src::Tile(self.whole(tiles[b], tb.p, tb.f)?),
                        Src::None,
                    ],
                    op: [alu(op), Alu::Bypass],
                    rev: 0,
                    acc: None,
                };
                self.push(Opcode::TensorTensor, engine, data)
            }
            Op::TensorScalar {
                a,
                first,
                second,
                engine,
            } => {
                let operand = |s: Scalar| match s {
                    Scalar::Imm(x) => Operand::Imm(nki_lang::Scalar::float(x)),
                    Scalar::Column(c) => Operand::Column(tiles[c]),
                };
                let (op1, s1) = match second {
                    Some((op, s)) => (alu(op), operand(s)),
                    None => (Alu::Bypass, Operand::None),
                };
                if named(engine) {
                    return self.b.tensor_scalar(
                        dst,
                        tiles[a],
                        alu(first.0),
                        operand(first.1),
                        op1,
                        s1,
                    );
                }
                let ta = step_tile(a);
                let data = InstrData::Alu {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    src: [
                        Src::Tile(self.whole(tiles[a], ta.p, ta.f)?),
                        self.b.src(operand(first.1))?,
                        self.b.src(s1)?,
                    ],
                    op: [alu(first.0), op1],
                    rev: 0,
                    acc: None,
                };
                self.push(Opcode::TensorScalar, engine, data)
            }
            Op::Copy { a, engine } => {
                if named(engine) {
                    return self.b.tensor_copy(dst, tiles[a]);
                }
                let ta = step_tile(a);
                let data = InstrData::Unary {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    src: self.whole(tiles[a], ta.p, ta.f)?,
                };
                self.push(Opcode::TensorCopy, engine, data)
            }
            Op::Reduce { a, op, negate } => {
                let op = match op {
                    Red::Max => Alu::Max,
                    Red::Add => Alu::Add,
                };
                if named(Eng::Default) {
                    return self.b.tensor_reduce(dst, op, tiles[a], 1, negate);
                }
                let ta = step_tile(a);
                let data = InstrData::Reduce {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    src: self.whole(tiles[a], ta.p, ta.f)?,
                    op,
                    axes: 1,
                    negate,
                };
                self.push(Opcode::TensorReduce, Eng::Default, data)
            }
            Op::Activation {
                a,
                func,
                scale,
                bias,
            } => {
                let operand = |s: Scalar| match s {
                    Scalar::Imm(x) => Operand::Imm(nki_lang::Scalar::float(x)),
                    Scalar::Column(c) => Operand::Column(tiles[c]),
                };
                let func = match func {
                    Act::Identity => ActFn::Identity,
                    Act::Relu => ActFn::Relu,
                    Act::Abs => ActFn::Abs,
                    Act::Square => ActFn::Square,
                    Act::Exp => ActFn::Exp,
                    Act::Tanh => ActFn::Tanh,
                    Act::Sigmoid => ActFn::Sigmoid,
                    Act::Silu => ActFn::Silu,
                    Act::Softplus => ActFn::Softplus,
                };
                let bias = bias.map_or(Operand::None, |c| Operand::Column(tiles[c]));
                let scale = operand(scale);
                if named(Eng::Default) {
                    return self.b.activation(dst, func, tiles[a], scale, bias);
                }
                let ta = step_tile(a);
                let data = InstrData::Act {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    src: self.whole(tiles[a], ta.p, ta.f)?,
                    func,
                    scale: self.b.src(scale)?,
                    bias: self.b.src(bias)?,
                    acc: None,
                };
                self.push(Opcode::Activation, Eng::Default, data)
            }
            Op::Iota { ref expr } => {
                let e = self.axis_index(expr)?;
                if named(Eng::Default) {
                    return self.b.iota(dst, e);
                }
                let data = InstrData::Iota {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    expr: self.b.expr(e)?,
                };
                self.push(Opcode::Iota, Eng::Default, data)
            }
            Op::AffineSelect {
                a,
                ref expr,
                cmp,
                on_false,
            } => {
                let e = self.axis_index(expr)?;
                let cmp = match cmp {
                    super::spec::Cmp::Lt => nki_lang::Cmp::Lt,
                    super::spec::Cmp::Le => nki_lang::Cmp::Le,
                    super::spec::Cmp::Gt => nki_lang::Cmp::Gt,
                    super::spec::Cmp::Ge => nki_lang::Cmp::Ge,
                    super::spec::Cmp::Eq => nki_lang::Cmp::Eq,
                    super::spec::Cmp::Ne => nki_lang::Cmp::Ne,
                };
                let ta = step_tile(a);
                let data = InstrData::Select {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    pred: nki_lang::Pred::Affine {
                        expr: self.b.expr(e)?,
                        cmp,
                    },
                    on_true: Src::Tile(self.whole(tiles[a], ta.p, ta.f)?),
                    on_false: Src::Imm(nki_lang::Scalar::float(on_false)),
                };
                self.push(Opcode::AffineSelect, Eng::Default, data)
            }
            Op::Transpose { a } => {
                if named(Eng::Default) {
                    return self.b.nc_transpose(dst, tiles[a]);
                }
                // The mask is on the destination's grid.
                let ta = step_tile(a);
                let data = InstrData::Unary {
                    dst: Dst::overwrite(self.whole(dst, this.p, this.f)?),
                    src: self.whole(tiles[a], ta.p, ta.f)?,
                };
                self.push(Opcode::Transpose, Eng::Default, data)
            }
            Op::Matmul { stationary, moving } => self.b.nc_matmul(
                dst,
                tiles[stationary],
                tiles[moving],
                nki_lang::Write::Overwrite,
            ),
        }
    }

    /// nki's grid expression for `e`.
    fn axis_index(&self, e: &Expr) -> Result<AxisIndex, BuildError> {
        let mut grid = [0i64; nki_lang::MAX_TILE_RANK];
        grid[..2].copy_from_slice(&e.grid);
        Ok(AxisIndex {
            start: affine(&self.b, &e.start)?,
            grid,
        })
    }

    /// The whole of tile `t` (`[p, f]`) as a view.
    fn whole(&mut self, t: TileId, p: u32, f: u32) -> Result<nki_lang::ViewId, BuildError> {
        self.b.view(TileView::whole(t.index(), &shape2(p, f)))
    }

    /// Pushes an instruction on `engine`.
    fn push(&mut self, opcode: Opcode, engine: Eng, data: InstrData) -> Result<(), BuildError> {
        let mut ins = Instr::new(opcode, data);
        ins.engine = match engine {
            Eng::Default => ins.engine,
            Eng::Vector => Engine::Vector,
            Eng::GpSimd => Engine::GpSimd,
            Eng::Scalar => Engine::Scalar,
        };
        ins.mask = match self.mask {
            Some(m) => Some(self.b.mask(m)?),
            None => None,
        };
        self.b.push(ins)
    }

    /// A load of `window` into the `[p, f]` tile `dst`, in one DMA or two.
    fn load(
        &mut self,
        dst: TileId,
        input: usize,
        window: &Window,
        split: Split,
        (p, f): (u32, u32),
    ) -> Result<(), BuildError> {
        let (row, col) = (affine(&self.b, &window.row)?, affine(&self.b, &window.col)?);
        let identity = window.grid == [[1, 0], [0, 1]];
        let tensor = self.inputs[input].index();
        if identity && split == Split::Whole && self.mask.is_none() {
            let g = Grid::origin(self.inputs[input]).at(0, row).at(1, col);
            return self.b.load(dst, g);
        }
        // Sub-views: (partition start, free offset, partitions, free size).
        let parts: Vec<(u32, u32, u32, u32)> = match split {
            Split::Whole => vec![(0, 0, p, f)],
            Split::Cols(at) => vec![(0, 0, p, at), (0, at, p, f - at)],
            Split::Rows(at) => vec![(0, 0, at, f), (at, 0, p - at, f)],
        };
        for (p0, f0, pp, ff) in parts {
            let shape = shape2(pp, ff);
            let mut view = TileView::whole(dst.index(), &shape);
            view.part_start = p0;
            view.offset = Affine::constant(i64::from(f0));
            let g = window.grid;
            let shift = |start: Affine, axis: usize| {
                start
                    .checked_add(&Affine::constant(
                        g[axis][0] * i64::from(p0) + g[axis][1] * i64::from(f0),
                    ))
                    .ok_or(BuildError::Usage("index overflow"))
            };
            let starts = [shift(row, 0)?, shift(col, 1)?];
            let tile = self.b.view(view)?;
            let a = access(tensor, shape, starts, g);
            let hbm = self.b.access(a)?;
            let mut ins = Instr::new(Opcode::Load, InstrData::Dma { tile, hbm });
            let t = self.program_inputs[input];
            ins.mask = self.dma_mask(&a, [t.rows, t.cols])?;
            self.b.push(ins)?;
        }
        Ok(())
    }
}
