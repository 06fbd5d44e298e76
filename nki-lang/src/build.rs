//! Owned programs and the checks that turn them into [`Program`]s.
//!
//! `#[kernel]` lowers a kernel body into a [`ProgramBuf`] at compile time and a tool can build
//! one at run time; both call [`ProgramBuf::finish`], which applies every rule, assigns tile
//! addresses and derives the launch constraints.

use crate::affine::{Affine, MAX_LOOP_DEPTH};
use crate::alloc::{allocate, views};
use crate::constraint::{Bounded, Constraint, index_range};
use crate::dtype::DType;
use crate::ir::{HbmAccess, Instr, Memory, Op, PsumWrite, TileView};
use crate::program::{Program, TensorDecl, TensorRole, TileDecl};
use crate::rules::{self, RuleViolation};
use crate::shape::{Dim, Extent, MAX_SYMBOLS, SymbolValues, TileShape};
use crate::target::Target;

/// An HBM tensor of a [`ProgramBuf`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorBuf {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: Vec<Dim>,
    /// Input or output.
    pub role: TensorRole,
}

/// A tile of a [`ProgramBuf`], before allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileBuf {
    /// Name.
    pub name: String,
    /// SBUF or PSUM.
    pub memory: Memory,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: TileShape,
}

/// A program under construction: owned, unchecked, without tile addresses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgramBuf {
    /// Kernel name.
    pub name: String,
    /// Target generation.
    pub target: Target,
    /// Symbolic dimension names.
    pub symbols: Vec<String>,
    /// HBM tensors: inputs first, then outputs.
    pub tensors: Vec<TensorBuf>,
    /// On-chip tiles.
    pub tiles: Vec<TileBuf>,
    /// Loop variable names.
    pub loop_vars: Vec<String>,
    /// Instructions.
    pub instrs: Vec<Instr>,
}

/// Which part of a program a diagnostic is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Site {
    /// The program as a whole.
    Program,
    /// A tile's declaration.
    Tile(usize),
    /// An HBM tensor's declaration.
    Tensor(usize),
    /// An operand of an instruction.
    Operand {
        /// Instruction index.
        instr: usize,
        /// The operand.
        role: Role,
    },
}

/// An instruction operand's role.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The instruction as a whole.
    Whole,
    /// Source.
    Src,
    /// Destination.
    Dst,
    /// `nc_matmul`'s stationary operand.
    Stationary,
    /// `nc_matmul`'s moving operand.
    Moving,
    /// A loop's trip count.
    Trip,
}

/// A broken rule and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where.
    pub site: Site,
    /// What.
    pub violation: RuleViolation,
}

/// A program that passed [`ProgramBuf::finish`]: owned storage behind a [`Program`].
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledProgram {
    buf: ProgramBuf,
    addrs: Vec<u32>,
    constraints: Vec<Constraint>,
    sbuf_bytes: u32,
    psum_banks: u32,
}

/// Borrowed views of a [`CompiledProgram`]'s names, for building a [`Program`].
pub struct ProgramParts<'a> {
    symbols: Vec<&'a str>,
    tensors: Vec<TensorDecl<'a>>,
    tiles: Vec<TileDecl<'a>>,
    loop_vars: Vec<&'a str>,
    owner: &'a CompiledProgram,
}

impl CompiledProgram {
    /// The unchecked source it was compiled from.
    pub fn source(&self) -> &ProgramBuf {
        &self.buf
    }
    /// Address of each tile.
    pub fn addrs(&self) -> &[u32] {
        &self.addrs
    }
    /// Launch constraints.
    pub fn constraints(&self) -> &[Constraint] {
        &self.constraints
    }
    /// SBUF bytes per partition used.
    pub fn sbuf_bytes(&self) -> u32 {
        self.sbuf_bytes
    }
    /// PSUM banks used.
    pub fn psum_banks(&self) -> u32 {
        self.psum_banks
    }
    /// The name tables a [`Program`] borrows; call [`ProgramParts::program`] on the result.
    pub fn parts(&self) -> ProgramParts<'_> {
        ProgramParts {
            symbols: self.buf.symbols.iter().map(String::as_str).collect(),
            tensors: self
                .buf
                .tensors
                .iter()
                .map(|t| TensorDecl {
                    name: &t.name,
                    dtype: t.dtype,
                    shape: &t.shape,
                    role: t.role,
                })
                .collect(),
            tiles: self
                .buf
                .tiles
                .iter()
                .zip(&self.addrs)
                .map(|(t, &addr)| TileDecl {
                    name: &t.name,
                    memory: t.memory,
                    dtype: t.dtype,
                    shape: t.shape,
                    addr,
                })
                .collect(),
            loop_vars: self.buf.loop_vars.iter().map(String::as_str).collect(),
            owner: self,
        }
    }
}

impl<'a> ProgramParts<'a> {
    /// The program.
    pub fn program(&self) -> Program<'_> {
        let o = self.owner;
        Program::from_checked_parts(
            &o.buf.name,
            o.buf.target,
            &self.symbols,
            &self.tensors,
            &self.tiles,
            &self.loop_vars,
            &o.buf.instrs,
            &o.constraints,
            o.sbuf_bytes,
            o.psum_banks,
        )
    }
}

struct Checker<'p> {
    p: &'p ProgramBuf,
    diags: Vec<Diagnostic>,
    constraints: Vec<Constraint>,
}

impl Checker<'_> {
    fn report(&mut self, site: Site, r: Result<(), RuleViolation>) -> bool {
        match r {
            Ok(()) => true,
            Err(violation) => {
                self.diags.push(Diagnostic { site, violation });
                false
            }
        }
    }

    fn malformed(&mut self, site: Site, what: &'static str) {
        self.diags.push(Diagnostic {
            site,
            violation: RuleViolation::Malformed { what },
        });
    }

    fn tile(&self, v: &TileView) -> Option<&TileBuf> {
        self.p.tiles.get(v.tile as usize)
    }

    /// A view lies inside its tile for every iteration of the enclosing loops.
    fn check_view(&mut self, instr: usize, role: Role, v: &TileView, loops: &[Extent]) -> bool {
        let Some(tile) = self.tile(v).cloned() else {
            self.malformed(Site::Operand { instr, role }, "tile index out of range");
            return false;
        };
        if !self.report(
            Site::Operand { instr, role },
            rules::check_tile_shape(&v.shape),
        ) {
            return false;
        }
        let part_end = v.part_start as u64 + v.shape.partitions() as u64;
        if part_end > tile.shape.partitions() as u64 {
            let r = rules::check_bounds(
                &tile.name,
                0,
                v.part_start as i64,
                part_end as i64 - 1,
                tile.shape.partitions() as u64,
            );
            return self.report(Site::Operand { instr, role }, r);
        }
        let (mut lo, mut hi) = (v.offset.constant, v.offset.constant);
        for (j, &size) in v.shape.free().iter().enumerate() {
            let span = v.strides[j] * (size as i64 - 1);
            lo += span.min(0);
            hi += span.max(0);
        }
        let size = Dim::Fixed(tile.shape.free_elems());
        let target = Bounded::TileFree { tile: v.tile };
        self.bound(
            Site::Operand { instr, role },
            &tile.name,
            1,
            target,
            size,
            lo,
            hi,
            &v.offset,
            loops,
        )
    }

    /// An index range inside a dimension: decided now when static, else a launch constraint.
    #[allow(clippy::too_many_arguments)]
    fn bound(
        &mut self,
        site: Site,
        name: &str,
        axis: usize,
        target: Bounded,
        size: Dim,
        lo: i64,
        hi: i64,
        index: &Affine,
        loops: &[Extent],
    ) -> bool {
        let is_static = matches!(size, Dim::Fixed(_))
            && loops
                .iter()
                .enumerate()
                .all(|(d, e)| index.coef[d] == 0 || e.fixed().is_some());
        if is_static {
            let syms: SymbolValues = [0; MAX_SYMBOLS];
            let fixed: Vec<Extent> = loops
                .iter()
                .map(|e| Extent::Fixed(e.fixed().unwrap_or(1).max(1)))
                .collect();
            let (lo, hi) = index_range(lo, hi, &index.coef, &fixed, &syms).expect("trips ≥ 1");
            let Dim::Fixed(n) = size else { unreachable!() };
            return self.report(site, rules::check_bounds(name, axis, lo, hi, n));
        }
        if implied_by_divisibility(size, lo, hi, index, loops) {
            return true;
        }
        let mut ls = [Extent::Fixed(1); MAX_LOOP_DEPTH];
        ls[..loops.len()].copy_from_slice(loops);
        let c = Constraint::InBounds {
            target,
            size,
            lo,
            hi,
            coef: index.coef,
            loops: ls,
            depth: loops.len() as u8,
        };
        if !self.constraints.contains(&c) {
            self.constraints.push(c);
        }
        true
    }

    fn check_access(
        &mut self,
        instr: usize,
        role: Role,
        a: &HbmAccess,
        grid: &TileShape,
        loops: &[Extent],
    ) {
        let Some(t) = self.p.tensors.get(a.tensor as usize).cloned() else {
            return self.malformed(Site::Operand { instr, role }, "tensor index out of range");
        };
        if a.rank as usize != t.shape.len() {
            return self.malformed(
                Site::Operand { instr, role },
                "access rank differs from tensor rank",
            );
        }
        for (axis, ix) in a.axes().iter().enumerate() {
            let (mut lo, mut hi) = (ix.start.constant, ix.start.constant);
            for (j, &size) in grid.dims().iter().enumerate() {
                let span = ix.grid[j] * (size as i64 - 1);
                lo += span.min(0);
                hi += span.max(0);
            }
            let target = Bounded::Tensor {
                tensor: a.tensor,
                axis: axis as u8,
            };
            let site = Site::Operand { instr, role };
            if !self.bound(
                site,
                &t.name,
                axis,
                target,
                t.shape[axis],
                lo,
                hi,
                &ix.start,
                loops,
            ) {
                return;
            }
        }
    }

    fn check_instr(&mut self, i: usize, instr: &Instr, loops: &[Extent]) {
        let site = |role| Site::Operand { instr: i, role };
        let mem = |c: &Self, v: &TileView| c.tile(v).map(|t| (t.memory, t.dtype));
        for (role, v) in roles(&instr.op) {
            if !self.check_view(i, role, v, loops) {
                return;
            }
        }
        match instr.op {
            Op::LoopBegin { .. } | Op::LoopEnd { .. } => {}
            Op::Load { src, dst } => {
                let (m, _) = mem(self, &dst).expect("checked");
                self.report(
                    site(Role::Dst),
                    rules::check_memory("load", "dst", m, &[Memory::Sbuf]),
                );
                self.check_access(i, Role::Src, &src, &dst.shape, loops);
            }
            Op::Store { dst, src } => {
                let (m, _) = mem(self, &src).expect("checked");
                self.report(
                    site(Role::Src),
                    rules::check_memory("store", "value", m, &[Memory::Sbuf]),
                );
                if let Some(t) = self.p.tensors.get(dst.tensor as usize)
                    && t.role == TensorRole::Input
                {
                    let name = t.name.clone();
                    self.report(
                        site(Role::Dst),
                        Err(RuleViolation::ImmutableParameter { name }),
                    );
                }
                self.check_access(i, Role::Dst, &dst, &src.shape, loops);
            }
            Op::Matmul {
                stationary,
                moving,
                dst,
                write,
            } => {
                let (sm, sd) = mem(self, &stationary).expect("checked");
                let (mm, md) = mem(self, &moving).expect("checked");
                let (dm, dd) = mem(self, &dst).expect("checked");
                let ok = self.report(
                    site(Role::Stationary),
                    rules::check_matmul_input_dtype("stationary", sd),
                ) & self.report(
                    site(Role::Moving),
                    rules::check_matmul_input_dtype("moving", md),
                );
                if !ok {
                    return;
                }
                match rules::check_matmul((&stationary.shape, sm), (&moving.shape, mm)) {
                    Ok(shape) => {
                        self.report(
                            site(Role::Dst),
                            rules::check_memory("nc_matmul", "dst", dm, &[Memory::Psum]),
                        );
                        self.report(
                            site(Role::Dst),
                            rules::check_psum_result_dtype("nc_matmul", dd),
                        );
                        self.report(
                            site(Role::Dst),
                            rules::check_same_shape("nc_matmul", "dst", &shape, &dst.shape),
                        );
                    }
                    Err(v) => {
                        let role = match v {
                            RuleViolation::MovingTooWide { .. } => Role::Moving,
                            RuleViolation::WrongMemory {
                                operand: "moving", ..
                            } => Role::Moving,
                            RuleViolation::ContractionMismatch { .. } => Role::Whole,
                            _ => Role::Stationary,
                        };
                        self.report(site(role), Err(v));
                    }
                }
                if let PsumWrite::Group { loops: mask } = write
                    && (mask as u32) >> loops.len() != 0
                {
                    self.malformed(
                        site(Role::Dst),
                        "accumulation group names a loop that does not enclose it",
                    );
                }
            }
            Op::Transpose { src, dst } => {
                let (sm, _) = mem(self, &src).expect("checked");
                let (dm, dd) = mem(self, &dst).expect("checked");
                match rules::check_transpose((&src.shape, sm)) {
                    Ok(shape) => {
                        self.report(
                            site(Role::Dst),
                            rules::check_memory("nc_transpose", "dst", dm, &[Memory::Psum]),
                        );
                        self.report(
                            site(Role::Dst),
                            rules::check_psum_result_dtype("nc_transpose", dd),
                        );
                        self.report(
                            site(Role::Dst),
                            rules::check_same_shape("nc_transpose", "dst", &shape, &dst.shape),
                        );
                    }
                    Err(v) => {
                        self.report(site(Role::Src), Err(v));
                    }
                }
            }
            Op::Copy { src, dst } => {
                let (sm, _) = mem(self, &src).expect("checked");
                let (dm, _) = mem(self, &dst).expect("checked");
                let both = [Memory::Sbuf, Memory::Psum];
                self.report(
                    site(Role::Src),
                    rules::check_memory("tensor_copy", "src", sm, &both),
                );
                self.report(
                    site(Role::Dst),
                    rules::check_memory("tensor_copy", "dst", dm, &both),
                );
                self.report(
                    site(Role::Dst),
                    rules::check_same_shape("tensor_copy", "dst", &src.shape, &dst.shape),
                );
            }
            Op::Memset { dst, .. } => {
                let (dm, _) = mem(self, &dst).expect("checked");
                self.report(
                    site(Role::Dst),
                    rules::check_memory("memset", "dst", dm, &[Memory::Sbuf, Memory::Psum]),
                );
            }
        }
    }
}

/// Whether an index range `[lo, hi] + coef·(S / div − 1)` inside a dimension `S` follows from
/// the loop's own launch constraint `S % div == 0`: with one loop term whose coefficient is
/// `div`, the largest index is `hi + S − div`, below `S` exactly when `hi < div`.
fn implied_by_divisibility(size: Dim, lo: i64, hi: i64, index: &Affine, loops: &[Extent]) -> bool {
    let Dim::Sym(s) = size else { return false };
    let mut terms = loops
        .iter()
        .enumerate()
        .filter(|&(d, _)| index.coef[d] != 0);
    let (Some((d, &trip)), None) = (terms.next(), terms.next()) else {
        return false;
    };
    match trip {
        Extent::Sym { sym, div } => {
            sym == s && index.coef[d] == div as i64 && lo >= 0 && hi < div as i64
        }
        Extent::Fixed(_) => false,
    }
}

/// The tile operands of an operation with their roles.
pub fn roles(op: &Op) -> Vec<(Role, &TileView)> {
    match op {
        Op::LoopBegin { .. } | Op::LoopEnd { .. } => vec![],
        Op::Load { dst, .. } => vec![(Role::Dst, dst)],
        Op::Store { src, .. } => vec![(Role::Src, src)],
        Op::Matmul {
            stationary,
            moving,
            dst,
            ..
        } => {
            vec![
                (Role::Stationary, stationary),
                (Role::Moving, moving),
                (Role::Dst, dst),
            ]
        }
        Op::Transpose { src, dst } | Op::Copy { src, dst } => {
            vec![(Role::Src, src), (Role::Dst, dst)]
        }
        Op::Memset { dst, .. } => vec![(Role::Dst, dst)],
    }
}

impl ProgramBuf {
    /// Applies every rule, assigns SBUF and PSUM addresses and derives the launch constraints.
    /// Returns every violation found, each with its site.
    pub fn finish(self) -> Result<CompiledProgram, Vec<Diagnostic>> {
        let mut c = Checker {
            p: &self,
            diags: Vec::new(),
            constraints: Vec::new(),
        };
        c.check_structure();
        if !c.diags.is_empty() {
            return Err(c.diags);
        }
        for (t, tile) in self.tiles.iter().enumerate() {
            c.report(Site::Tile(t), rules::check_tile_shape(&tile.shape));
            if tile.memory == Memory::Psum {
                c.report(
                    Site::Tile(t),
                    rules::check_psum_tile(&tile.shape, tile.dtype),
                );
            }
            if tile.memory == Memory::Hbm {
                c.malformed(Site::Tile(t), "a tile must live in SBUF or PSUM");
            }
        }
        let mut loops: Vec<Extent> = Vec::new();
        for (i, instr) in self.instrs.iter().enumerate() {
            match instr.op {
                Op::LoopBegin { trip, .. } => {
                    if let Extent::Sym { sym, div } = trip
                        && div > 1
                    {
                        let k = Constraint::Divisible { sym, by: div };
                        if !c.constraints.contains(&k) {
                            c.constraints.push(k);
                        }
                    }
                    loops.push(trip);
                }
                Op::LoopEnd { .. } => {
                    loops.pop();
                }
                _ => c.check_instr(i, instr, &loops),
            }
        }
        for (t, tensor) in self.tensors.iter().enumerate() {
            let stored = self
                .instrs
                .iter()
                .any(|i| matches!(i.op, Op::Store { dst, .. } if dst.tensor as usize == t));
            if tensor.role == TensorRole::Output && !stored {
                let name = tensor.name.clone();
                c.report(
                    Site::Tensor(t),
                    Err(RuleViolation::OutputNotWritten { name }),
                );
            }
        }
        if !c.diags.is_empty() {
            return Err(c.diags);
        }
        let sizes: Vec<(Memory, u64)> = self
            .tiles
            .iter()
            .map(|t| (t.memory, t.shape.free_elems() * t.dtype.size() as u64))
            .collect();
        let alloc = allocate(&self.instrs, &sizes, self.target).map_err(|(t, violation)| {
            vec![Diagnostic {
                site: Site::Tile(t),
                violation,
            }]
        })?;
        let constraints = c.constraints;
        Ok(CompiledProgram {
            addrs: alloc.addrs,
            constraints,
            sbuf_bytes: alloc.sbuf_bytes,
            psum_banks: alloc.psum_banks,
            buf: self,
        })
    }
}

impl Checker<'_> {
    /// Indices in range, loops balanced and not too deep, symbols bindable from the inputs.
    fn check_structure(&mut self) {
        let p = self.p;
        if p.symbols.len() > MAX_SYMBOLS {
            self.malformed(Site::Program, "more than 8 symbolic dimensions");
        }
        let inputs = p
            .tensors
            .iter()
            .take_while(|t| t.role == TensorRole::Input)
            .count();
        if p.tensors[inputs..]
            .iter()
            .any(|t| t.role == TensorRole::Input)
        {
            self.malformed(
                Site::Program,
                "inputs must precede outputs in the tensor table",
            );
        }
        if p.tensors.len() > crate::MAX_TENSORS {
            self.malformed(Site::Program, "more than 16 HBM tensors");
        }
        for (t, tensor) in p.tensors.iter().enumerate() {
            if tensor.shape.is_empty() || tensor.shape.len() > crate::shape::MAX_TENSOR_RANK {
                self.malformed(Site::Tensor(t), "tensor rank must be 1 to 6");
            }
            for d in &tensor.shape {
                if let Dim::Sym(s) = *d
                    && s as usize >= p.symbols.len()
                {
                    self.malformed(Site::Tensor(t), "symbol index out of range");
                }
            }
        }
        for (s, name) in p.symbols.iter().enumerate() {
            let bound = p.tensors[..inputs]
                .iter()
                .any(|t| t.shape.contains(&Dim::Sym(s as u8)));
            if !bound {
                let name = name.clone();
                self.report(Site::Program, Err(RuleViolation::UnboundSymbol { name }));
            }
        }
        if p.tiles.len() > u16::MAX as usize {
            self.malformed(Site::Program, "too many tiles");
        }
        let mut stack: Vec<usize> = Vec::new();
        for (i, instr) in p.instrs.iter().enumerate() {
            match instr.op {
                Op::LoopBegin { end, var, trip, .. } => {
                    if stack.len() == MAX_LOOP_DEPTH {
                        self.malformed(
                            Site::Operand {
                                instr: i,
                                role: Role::Whole,
                            },
                            "loops nested deeper than 8",
                        );
                        return;
                    }
                    let bad_end = p.instrs.get(end as usize).map(|e| e.op)
                        != Some(Op::LoopEnd { begin: i as u32 });
                    if bad_end || var as usize >= p.loop_vars.len() {
                        self.malformed(
                            Site::Operand {
                                instr: i,
                                role: Role::Whole,
                            },
                            "unmatched loop",
                        );
                        return;
                    }
                    if let Extent::Sym { sym, div } = trip
                        && (sym as usize >= p.symbols.len() || div == 0)
                    {
                        self.malformed(
                            Site::Operand {
                                instr: i,
                                role: Role::Trip,
                            },
                            "bad trip count",
                        );
                    }
                    stack.push(i);
                }
                Op::LoopEnd { begin } => {
                    if stack.pop() != Some(begin as usize) {
                        self.malformed(
                            Site::Operand {
                                instr: i,
                                role: Role::Whole,
                            },
                            "unmatched loop end",
                        );
                        return;
                    }
                }
                op => {
                    let depth = stack.len();
                    let outside = |a: &Affine| a.coef[depth..].iter().any(|&c| c != 0);
                    let access = match &op {
                        Op::Load { src: a, .. } | Op::Store { dst: a, .. } => Some(a),
                        _ => None,
                    };
                    let hbm_outside = access.is_some_and(|a| {
                        a.axes
                            .get(..a.rank as usize)
                            .is_some_and(|axes| axes.iter().any(|x| outside(&x.start)))
                    });
                    if hbm_outside || views(&op).any(|v| outside(&v.offset)) {
                        {
                            self.malformed(
                                Site::Operand {
                                    instr: i,
                                    role: Role::Whole,
                                },
                                "index uses a loop that does not enclose it",
                            );
                        }
                    }
                }
            }
        }
        if !stack.is_empty() {
            self.malformed(Site::Program, "unterminated loop");
        }
    }
}
