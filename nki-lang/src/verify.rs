//! Owned programs and the one validator that turns them into [`Program`]s.
//!
//! `#[kernel]` lowers a kernel body into a [`ProgramBuf`] at compile time and a tool can build
//! one at run time ([`crate::builder::ProgramBuilder`]); both call [`ProgramBuf::finish`],
//! which checks the program's structure, applies every opcode's rules through the opcode table
//! ([`crate::ir::ops::infer`]), assigns tile addresses and derives the launch constraints.

use crate::affine::{MAX_LOOP_DEPTH, MAX_PIDS, MAX_VARS};
use crate::alloc::allocate;
use crate::constraint::{
    Bounded, Computed, Constraint, implied_by_divisibility, in_range, index_range,
};
use crate::dtype::DType;
use crate::ir::ops::{self, Axes, Blame, Format, InferIn, Part, Slot, ViewInfo};
use crate::ir::{
    AccessId, AxisIndex, Dir, ExprId, HbmAccess, Instr, InstrData, LoopControl, MAX_SLOTS, Mask,
    MaskId, OperandRef, TileView, ViewId, Write,
};
use crate::program::{Program, TensorDecl, TensorRole, TileDecl};
use crate::rules::{self, RuleViolation};
use crate::shape::{Dim, Extent, MAX_SYMBOLS, MAX_TENSOR_RANK, TileShape};
use crate::target::{Memory, Target};

/// An HBM tensor of a [`ProgramBuf`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorBuf {
    /// Its name in the kernel source.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dimensions, literal or symbolic.
    pub shape: Vec<Dim>,
    /// Input or output.
    pub role: TensorRole,
}

/// A tile of a [`ProgramBuf`], before allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileBuf {
    /// Its name in the kernel source (`_tN` for temporaries).
    pub name: String,
    /// SBUF or PSUM.
    pub memory: Memory,
    /// Element type.
    pub dtype: DType,
    /// Partition size, then free sizes.
    pub shape: TileShape,
    /// The `LoopBegin` of the innermost loop whose body declares it (`None`: the kernel's top
    /// level); see [`TileDecl::scope`].
    pub scope: Option<u32>,
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
    /// The tile views instructions use ([`ViewId`]).
    pub views: Vec<TileView>,
    /// The HBM accesses instructions use ([`AccessId`]).
    pub accesses: Vec<HbmAccess>,
    /// The masks instructions use ([`MaskId`]).
    pub masks: Vec<Mask>,
    /// The grid expressions instructions use ([`ExprId`]).
    pub exprs: Vec<AxisIndex>,
    /// Instructions.
    pub instrs: Vec<Instr>,
}

/// Adds `item` to `pool` unless an equal one is there; its index, or `None` past `u16::MAX`.
fn intern<T: PartialEq>(pool: &mut Vec<T>, item: T) -> Option<u16> {
    if let Some(i) = pool.iter().position(|x| *x == item) {
        return u16::try_from(i).ok();
    }
    let i = u16::try_from(pool.len()).ok()?;
    pool.push(item);
    Some(i)
}

impl ProgramBuf {
    /// The view's id in the pool (an equal view is stored once), or `None` when the pool is
    /// full.
    pub fn add_view(&mut self, v: TileView) -> Option<ViewId> {
        intern(&mut self.views, v).map(ViewId)
    }

    /// The access's id in the pool (an equal access is stored once), or `None` when full.
    pub fn add_access(&mut self, a: HbmAccess) -> Option<AccessId> {
        intern(&mut self.accesses, a).map(AccessId)
    }

    /// The mask's id in the pool (an equal mask is stored once), or `None` when full.
    pub fn add_mask(&mut self, m: Mask) -> Option<MaskId> {
        intern(&mut self.masks, m).map(MaskId)
    }

    /// The expression's id in the pool, or `None` when full.
    pub fn add_expr(&mut self, e: AxisIndex) -> Option<ExprId> {
        intern(&mut self.exprs, e).map(ExprId)
    }

    /// What the rules know of a view: its tile's memory and dtype, its shape.
    pub fn view_info(&self, v: ViewId) -> Option<ViewInfo> {
        let view = self.views.get(v.index())?;
        let tile = self.tiles.get(view.tile as usize)?;
        Some(ViewInfo {
            memory: tile.memory,
            dtype: tile.dtype,
            shape: view.shape,
            column: view.is_column(),
        })
    }

    /// What the rules know of an access: HBM, its tensor's dtype, its grid shape.
    pub fn access_info(&self, a: AccessId) -> Option<ViewInfo> {
        let access = self.accesses.get(a.index())?;
        let tensor = self.tensors.get(access.tensor as usize)?;
        Some(ViewInfo {
            memory: Memory::Hbm,
            dtype: tensor.dtype,
            shape: access.shape,
            column: false,
        })
    }

    /// What the rules know of each operand slot of `ins` (an operand whose index is out of
    /// range is [`Slot::Absent`]; [`ProgramBuf::finish`] reports it).
    pub fn slots(&self, ins: &Instr) -> [Slot; MAX_SLOTS] {
        let mut slots = [Slot::Absent; MAX_SLOTS];
        for o in ins.operands() {
            slots[o.slot as usize] = match o.operand {
                OperandRef::View(v) => self.view_info(v).map_or(Slot::Absent, Slot::View),
                OperandRef::Access(a) => self.access_info(a).map_or(Slot::Absent, Slot::Access),
                OperandRef::Expr(_) => Slot::Expr,
                OperandRef::Imm(x) => Slot::Imm(x),
            };
        }
        slots
    }

    /// Applies `ins`'s opcode rules ([`ops::infer`]) to its operands as this program has them.
    pub fn infer(&self, ins: &Instr) -> Result<Option<ops::Inferred>, Blame> {
        ops::infer(&InferIn {
            opcode: ins.opcode,
            engine: ins.engine,
            data: &ins.data,
            slots: self.slots(ins),
            masked: ins.mask.is_some(),
            target: self.target,
        })
    }
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
    /// An instruction as a whole.
    Instr(usize),
    /// An operand of an instruction, by slot ([`crate::ir::ops::OpInfo::operands`] names it).
    Operand {
        /// Instruction index.
        instr: usize,
        /// The operand's slot.
        slot: u8,
    },
}

/// A broken rule and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The part of the program the rule is about.
    pub site: Site,
    /// The rule and its limit.
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
                    scope: t.scope,
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
            &o.buf.views,
            &o.buf.accesses,
            &o.buf.masks,
            &o.buf.exprs,
            &o.buf.instrs,
            &o.constraints,
            o.sbuf_bytes,
            o.psum_banks,
        )
    }
}

impl ProgramBuf {
    /// Declares `num_programs(axis)` for every grid axis whose `program_id` an index uses: the
    /// bounds of such an index depend on the grid's size.
    fn declare_grid_symbols(&mut self) {
        let starts = self
            .accesses
            .iter()
            .flat_map(|a| a.axes().iter().map(|ix| &ix.start))
            .chain(self.views.iter().map(|v| &v.offset))
            .chain(self.exprs.iter().map(|e| &e.start))
            .chain(
                self.masks
                    .iter()
                    .flat_map(|m| m.terms().iter().map(|t| &t.offset)),
            );
        let mut used = [false; MAX_PIDS];
        for a in starts {
            for (u, &c) in used.iter_mut().zip(&a.coef) {
                *u |= c != 0;
            }
        }
        for (axis, _) in used.iter().enumerate().filter(|(_, u)| **u) {
            let name = crate::grid::GRID_SIZE_SYMBOLS[axis];
            if !self.symbols.iter().any(|s| s == name) {
                self.symbols.push(name.to_string());
            }
        }
    }

    /// Applies every rule, assigns SBUF and PSUM addresses and derives the launch constraints.
    /// Returns every violation found, each with its site.
    pub fn finish(mut self) -> Result<CompiledProgram, Vec<Diagnostic>> {
        self.declare_grid_symbols();
        let mut c = Checker {
            p: &self,
            diags: Vec::new(),
            constraints: Vec::new(),
        };
        c.check_structure();
        if !c.diags.is_empty() {
            return Err(c.diags);
        }
        for (i, tensor) in self.tensors.iter().enumerate() {
            for (axis, d) in tensor.shape.iter().enumerate() {
                if let Dim::Fixed(n) = *d {
                    c.report(
                        Site::Tensor(i),
                        rules::check_tensor_dim(&tensor.name, axis, n),
                    );
                }
            }
        }
        for (t, tile) in self.tiles.iter().enumerate() {
            c.report(Site::Tile(t), rules::check_tile_shape(&tile.shape));
            match tile.memory {
                Memory::Psum => {
                    c.report(
                        Site::Tile(t),
                        rules::check_psum_tile(&tile.shape, tile.dtype),
                    );
                }
                Memory::Sbuf => {
                    c.report(
                        Site::Tile(t),
                        rules::check_sbuf_tile(&tile.shape, tile.dtype, self.target),
                    );
                }
                Memory::Hbm => c.malformed(Site::Tile(t), "a tile must live in SBUF or PSUM"),
            }
        }
        let mut loops: Vec<Extent> = Vec::new();
        for (i, instr) in self.instrs.iter().enumerate() {
            match instr.data.loop_control() {
                Some(LoopControl::Begin { trip, .. }) => {
                    if let Extent::Sym { sym, add: 0, div } = trip
                        && div > 1
                    {
                        c.constrain(Constraint::Divisible { sym, by: div });
                    }
                    loops.push(trip);
                }
                Some(LoopControl::End) => {
                    loops.pop();
                }
                None => c.check_instr(i, instr, &loops),
            }
        }
        for (t, tensor) in self.tensors.iter().enumerate() {
            let written = self.instrs.iter().any(|ins| {
                ins.operands().any(|o| match o.operand {
                    OperandRef::Access(a) => {
                        o.dir.writes() && self.accesses[a.index()].tensor as usize == t
                    }
                    _ => false,
                })
            });
            if tensor.role == TensorRole::Output && !written {
                let name = tensor.name.clone();
                c.report(
                    Site::Tensor(t),
                    Err(RuleViolation::OutputNotWritten { name }),
                );
            }
        }
        if c.diags.is_empty() {
            c.diags.extend(crate::dataflow::reads_before_writes(&self));
            c.diags.extend(crate::dataflow::output_dependencies(&self));
        }
        if !c.diags.is_empty() {
            return Err(c.diags);
        }
        let sizes: Vec<(Memory, u64)> = self
            .tiles
            .iter()
            .map(|t| {
                let bytes = t
                    .shape
                    .free_elems()
                    .saturating_mul(u64::from(t.dtype.size()));
                (t.memory, bytes)
            })
            .collect();
        let alloc = allocate(&self, &sizes).map_err(|(t, violation)| {
            vec![Diagnostic {
                site: Site::Tile(t),
                violation,
            }]
        })?;
        Ok(CompiledProgram {
            addrs: alloc.addrs,
            constraints: c.constraints,
            sbuf_bytes: alloc.sbuf_bytes,
            psum_banks: alloc.psum_banks,
            buf: self,
        })
    }
}

struct Checker<'p> {
    p: &'p ProgramBuf,
    diags: Vec<Diagnostic>,
    constraints: Vec<Constraint>,
}

/// An index `start + Σ grid[j]·t_j` over a grid, with the mask's restriction when one applies.
struct Index<'a> {
    start: &'a crate::affine::Affine,
    grid: &'a [i64],
    shape: &'a TileShape,
}

impl Index<'_> {
    /// The range in `i128`, which no grid of `i64` coefficients and `u32` sizes overflows.
    fn range128(&self) -> (i128, i128) {
        let c = i128::from(self.start.constant);
        let (mut lo, mut hi) = (c, c);
        for (&g, &size) in self.grid.iter().zip(self.shape.dims()) {
            let span = i128::from(g).saturating_mul(i128::from(size.saturating_sub(1)));
            lo = lo.saturating_add(span.min(0));
            hi = hi.saturating_add(span.max(0));
        }
        (lo, hi)
    }

    /// The index's range `[lo, hi]` over the grid at iteration 0 of every loop (`None` when the
    /// arithmetic overflows).
    fn range(&self) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (self.start.constant, self.start.constant);
        for (&g, &size) in self.grid.iter().zip(self.shape.dims()) {
            let span = g.checked_mul(i64::from(size.saturating_sub(1)))?;
            lo = lo.checked_add(span.min(0))?;
            hi = hi.checked_add(span.max(0))?;
        }
        Some((lo, hi))
    }
}

impl Checker<'_> {
    /// The symbol of `num_programs(axis)`, which a program using `program_id(axis)` declares.
    fn grid_size_symbol(&self, axis: usize) -> Option<u8> {
        let name = crate::grid::GRID_SIZE_SYMBOLS.get(axis)?;
        let s = self.p.symbols.iter().position(|s| s == name)?;
        u8::try_from(s).ok()
    }

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

    fn constrain(&mut self, c: Constraint) {
        if !self.constraints.contains(&c) {
            self.constraints.push(c);
        }
    }

    fn check_instr(&mut self, i: usize, ins: &Instr, loops: &[Extent]) {
        let p = self.p;
        let mask = ins.mask.map(|m| &p.masks[m.index()]);
        let mut ok = true;
        for o in ins.operands() {
            let site = Site::Operand {
                instr: i,
                slot: o.slot,
            };
            match o.operand {
                OperandRef::View(v) => {
                    ok &= self.check_view(site, &p.views[v.index()], loops);
                }
                OperandRef::Access(a) => {
                    let access = &p.accesses[a.index()];
                    let tensor = &p.tensors[access.tensor as usize];
                    if o.dir.writes() && tensor.role == TensorRole::Input {
                        let name = tensor.name.clone();
                        ok &= self.report(site, Err(RuleViolation::ImmutableParameter { name }));
                    }
                    let axes = ins.opcode.info().operands[o.slot as usize].axes;
                    ok &= self.check_access(site, access, mask.map(|m| (m, axes)), loops);
                }
                OperandRef::Expr(e) => {
                    // The expression runs over the instruction's grid: its destination's.
                    let grid = ins
                        .data
                        .dst()
                        .and_then(|d| p.views.get(d.view.index()))
                        .map(|v| v.shape);
                    if let (Some(expr), Some(shape)) = (p.exprs.get(e.index()), grid) {
                        let index = Index {
                            start: &expr.start,
                            grid: &expr.grid,
                            shape: &shape,
                        };
                        let what = Computed::Expr { expr: e.0 };
                        ok &= self.fits(
                            site,
                            what,
                            "the values of an index expression",
                            &index,
                            loops,
                        );
                    }
                }
                OperandRef::Imm(_) => {}
            }
        }
        if let (Some(m), Some(id)) = (mask, ins.mask) {
            let site = Site::Instr(i);
            for t in m.terms() {
                let index = Index {
                    start: &t.offset,
                    grid: &[],
                    shape: &UNIT,
                };
                let what = Computed::MaskBound { mask: id.0 };
                ok &= self.fits(site, what, "a mask's bound", &index, loops);
            }
        }
        if !ok {
            return;
        }
        if let Err(Blame { part, violation }) = p.infer(ins) {
            let site = match part {
                Part::Slot(slot) => Site::Operand { instr: i, slot },
                Part::Whole | Part::Code(_) | Part::Engine => Site::Instr(i),
            };
            self.diags.push(Diagnostic { site, violation });
        }
    }

    /// A view lies inside its tile for every iteration of the enclosing loops.
    fn check_view(&mut self, site: Site, v: &TileView, loops: &[Extent]) -> bool {
        let tile = &self.p.tiles[v.tile as usize];
        if !self.report(site, rules::check_tile_shape(&v.shape)) {
            return false;
        }
        // u32 + u32 fits in i64.
        let part_end = i64::from(v.part_start).saturating_add(i64::from(v.shape.partitions()));
        if part_end > i64::from(tile.shape.partitions()) {
            let r = rules::check_bounds(
                &tile.name,
                0,
                i64::from(v.part_start),
                part_end.saturating_sub(1),
                u64::from(tile.shape.partitions()),
            );
            return self.report(site, r);
        }
        let mut free = [0i64; crate::shape::MAX_TILE_RANK];
        free[1..].copy_from_slice(&v.strides);
        let index = Index {
            start: &v.offset,
            grid: &free,
            shape: &v.shape,
        };
        let size = Dim::Fixed(tile.shape.free_elems());
        let target = Bounded::TileFree { tile: v.tile };
        self.bound(site, &tile.name, 1, target, size, &index, false, loops)
    }

    fn check_access(
        &mut self,
        site: Site,
        a: &HbmAccess,
        mask: Option<(&Mask, Axes)>,
        loops: &[Extent],
    ) -> bool {
        let t = &self.p.tensors[a.tensor as usize];
        for (axis, ix) in a.axes().iter().enumerate() {
            let index = Index {
                start: &ix.start,
                grid: &ix.grid,
                shape: &a.shape,
            };
            // axis < MAX_TENSOR_RANK
            let axis8 = u8::try_from(axis).unwrap_or(u8::MAX);
            let target = Bounded::Tensor {
                tensor: a.tensor,
                axis: axis8,
            };
            let size = t.shape[axis];
            let masked = mask.is_some_and(|(m, axes)| mask_bounds_above(m, axes, ix, size));
            if !self.bound(site, &t.name, axis, target, size, &index, masked, loops) {
                return false;
            }
            // What the mask cuts off is still computed: it must stay within range.
            if masked {
                let what = Computed::MaskedIndex {
                    tensor: a.tensor,
                    axis: axis8,
                };
                let label = format!(
                    "the index of tensor `{}` on dimension {axis}, where the mask cuts it off,",
                    t.name
                );
                if !self.fits(site, what, &label, &index, loops) {
                    return false;
                }
            }
        }
        true
    }

    /// An index range inside a dimension: decided now when static, else a launch constraint.
    /// With `masked`, the instruction's mask keeps the index below the size, and only the lower
    /// bound is checked.
    #[allow(clippy::too_many_arguments)]
    fn bound(
        &mut self,
        site: Site,
        name: &str,
        axis: usize,
        target: Bounded,
        size: Dim,
        index: &Index<'_>,
        masked: bool,
        loops: &[Extent],
    ) -> bool {
        let Some((lo, hi)) = index.range() else {
            let v = RuleViolation::IndexOverflow {
                tensor: name.to_string(),
                axis,
            };
            return self.report(site, Err(v));
        };
        let coef = index.start.coef;
        let Some((ls, nvars)) = self.extents(site, &coef, loops) else {
            return false;
        };
        let vars = &ls[..nvars];
        if let (Dim::Fixed(n), Some((lo, hi))) = (size, static_range(lo, hi, &coef, vars)) {
            let (lo, hi) = (clamp(lo), clamp(hi));
            let hi = if masked { lo.max(0) } else { hi };
            return self.report(site, rules::check_bounds(name, axis, lo, hi, n.max(1)));
        }
        if !masked && implied_by_divisibility(size, lo, hi, &coef, vars) {
            return true;
        }
        if masked && lo >= 0 && coef[..vars.len()].iter().all(|&c| c >= 0) {
            return true;
        }
        self.constrain(Constraint::InBounds {
            target,
            size,
            lo,
            hi,
            coef,
            loops: ls,
            depth: depth8(loops),
            upper: !masked,
        });
        true
    }

    /// How many values each index variable takes: the program ids that `coef` uses (the grid's
    /// size along their axis), then the enclosing loops; and how many variables are in use.
    /// `None` after reporting a program id whose grid symbol is missing.
    fn extents(
        &mut self,
        site: Site,
        coef: &[i64; MAX_VARS],
        loops: &[Extent],
    ) -> Option<([Extent; MAX_VARS], usize)> {
        let mut ls = [Extent::Fixed(1); MAX_VARS];
        for (a, l) in ls.iter_mut().enumerate().take(MAX_PIDS) {
            if coef[a] != 0 {
                *l = match self.grid_size_symbol(a) {
                    Some(sym) => Extent::Sym {
                        sym,
                        add: 0,
                        div: 1,
                    },
                    None => {
                        self.malformed(site, "a program id without its grid symbol");
                        return None;
                    }
                };
            }
        }
        // The structure check keeps loops at most MAX_LOOP_DEPTH deep.
        let n = MAX_PIDS.saturating_add(loops.len()).min(MAX_VARS);
        for (l, e) in ls[MAX_PIDS..n].iter_mut().zip(loops) {
            *l = *e;
        }
        Some((ls, n))
    }

    /// A value the executor computes from the index variables (`label` names it in an error)
    /// stays within ±[`crate::constraint::MAX_INDEX`]: decided now when its loops' trip counts are literals,
    /// else a launch constraint.
    fn fits(
        &mut self,
        site: Site,
        what: Computed,
        label: &str,
        index: &Index<'_>,
        loops: &[Extent],
    ) -> bool {
        let refuse = |this: &mut Self, lo: i128, hi: i128| {
            let v = RuleViolation::IndexRange {
                what: label.to_string(),
                lo: clamp(lo),
                hi: clamp(hi),
            };
            this.report(site, Err(v))
        };
        let (lo, hi) = index.range128();
        if !in_range(lo, hi) {
            return refuse(self, lo, hi);
        }
        // Within ±2^62.
        let (lo, hi) = (clamp(lo), clamp(hi));
        let coef = index.start.coef;
        let Some((ls, nvars)) = self.extents(site, &coef, loops) else {
            return false;
        };
        let vars = &ls[..nvars];
        if let Some((lo, hi)) = static_range(lo, hi, &coef, vars) {
            return in_range(lo, hi) || refuse(self, lo, hi);
        }
        self.constrain(Constraint::InRange {
            what,
            lo,
            hi,
            coef,
            loops: ls,
            depth: depth8(loops),
        });
        true
    }
}

/// A 1-partition shape: the grid of a value without grid terms.
const UNIT: TileShape = match TileShape::new(&[1]) {
    Some(s) => s,
    None => panic!("a rank-1 shape"),
};

/// The loop depth as the `u8` a constraint holds (the structure check keeps it at most 8).
fn depth8(loops: &[Extent]) -> u8 {
    u8::try_from(loops.len()).unwrap_or(u8::MAX)
}

/// The range `[lo, hi] + Σ coef·(n − 1)` over the index variables `vars` when every variable
/// in use takes a literal number of values (a loop of none counts as one: its body is still
/// checked), else `None`.
fn static_range(lo: i64, hi: i64, coef: &[i64; MAX_VARS], vars: &[Extent]) -> Option<(i128, i128)> {
    let fixed = vars
        .iter()
        .zip(coef)
        .map(|(e, &c)| match (c, e.fixed()) {
            (0, _) => Some(Extent::Fixed(1)),
            (_, Some(n)) => Some(Extent::Fixed(n.max(1))),
            (_, None) => None,
        })
        .collect::<Option<Vec<Extent>>>()?;
    index_range(lo, hi, coef, &fixed, &[0; MAX_SYMBOLS])
}

fn clamp(x: i128) -> i64 {
    i64::try_from(x.clamp(i128::from(i64::MIN), i128::from(i64::MAX))).unwrap_or(0)
}

/// Whether some term of `mask` keeps the access index `ix` below the dimension `size` for
/// every element it lets through: the term bounds the same grid expression as the index
/// (`k * 128 + i_p < n` for the index `k * 128 + i_p` of a dimension `n`). The access's axes
/// follow the instruction's grid as `axes` says.
fn mask_bounds_above(mask: &Mask, axes: Axes, ix: &AxisIndex, size: Dim) -> bool {
    let mut terms = ix.grid.iter().enumerate().filter(|(_, g)| **g != 0);
    let (Some((axis, &g)), None) = (terms.next(), terms.next()) else {
        return false;
    };
    mask.terms().iter().any(|t| {
        if axes.of_grid_axis(t.axis as usize) != Some(axis) || t.coef != g {
            return false;
        }
        // index − (term's left side) = start − offset must be a constant c; then
        // index < S + c, inside the dimension when S + c ≤ size.
        if t.offset.coef != ix.start.coef {
            return false;
        }
        let Some(c) = ix.start.constant.checked_sub(t.offset.constant) else {
            return false;
        };
        match (t.sym, size) {
            (Some(s), Dim::Sym(d)) => s == d && c <= 0,
            (None, Dim::Fixed(n)) => c <= 0 || u64::try_from(c).is_ok_and(|c| c <= n),
            (None, Dim::Sym(_)) => c <= 0,
            (Some(_), Dim::Fixed(_)) => false,
        }
    })
}

impl Checker<'_> {
    /// Indices in range, formats matching opcodes, loops balanced and not too deep, indices
    /// using only enclosing loops, symbols bindable from the inputs.
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
            if tensor.shape.is_empty() || tensor.shape.len() > MAX_TENSOR_RANK {
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
            // The launch grid binds its own symbols.
            let bound = crate::grid::SymbolSource::of(name) != crate::grid::SymbolSource::Input
                || p.tensors[..inputs]
                    .iter()
                    .any(|t| u8::try_from(s).is_ok_and(|s| t.shape.contains(&Dim::Sym(s))));
            if !bound {
                let name = name.clone();
                self.report(Site::Program, Err(RuleViolation::UnboundSymbol { name }));
            }
        }
        if p.tiles.len() > u16::MAX as usize {
            self.malformed(Site::Program, "too many tiles");
        }
        if u32::try_from(p.instrs.len()).is_err() {
            // Loop ends and begins refer to instructions by `u32` index.
            return self.malformed(Site::Program, "more than 2^32 - 1 instructions");
        }
        let mut stack: Vec<usize> = Vec::new();
        for (i, ins) in p.instrs.iter().enumerate() {
            let info = ins.opcode.info();
            if Format::of(&ins.data) != info.format {
                return self.malformed(
                    Site::Instr(i),
                    "operands in the wrong format for the opcode",
                );
            }
            match ins.data {
                InstrData::LoopBegin { end, var, trip, .. } => {
                    if stack.len() == MAX_LOOP_DEPTH {
                        return self.malformed(Site::Instr(i), "loops nested deeper than 8");
                    }
                    let matched = u32::try_from(i).is_ok_and(|begin| {
                        p.instrs.get(end as usize).map(|e| e.data)
                            == Some(InstrData::LoopEnd { begin })
                    });
                    if !matched || var as usize >= p.loop_vars.len() {
                        return self.malformed(Site::Instr(i), "unmatched loop");
                    }
                    if let Extent::Sym { sym, div, .. } = trip
                        && (sym as usize >= p.symbols.len() || div == 0)
                    {
                        self.malformed(Site::Instr(i), "bad trip count");
                    }
                    stack.push(i);
                }
                InstrData::LoopEnd { begin } => {
                    if stack.pop() != Some(begin as usize) {
                        return self.malformed(Site::Instr(i), "unmatched loop end");
                    }
                }
                InstrData::Dma { .. }
                | InstrData::Unary { .. }
                | InstrData::Fill { .. }
                | InstrData::Iota { .. }
                | InstrData::Alu { .. }
                | InstrData::Act { .. }
                | InstrData::Reduce { .. }
                | InstrData::Scan { .. }
                | InstrData::Select { .. }
                | InstrData::Matmul { .. } => {
                    if let Err((slot, what)) = self.check_operand_refs(ins, &stack) {
                        let site = match slot {
                            Some(slot) => Site::Operand { instr: i, slot },
                            None => Site::Instr(i),
                        };
                        self.malformed(site, what);
                    }
                }
            }
        }
        if !stack.is_empty() {
            self.malformed(Site::Program, "unterminated loop");
        }
        // Pool entries no instruction uses are emitted too: they must be well-formed as well.
        if !self.diags.is_empty() {
            return;
        }
        if p.views.iter().any(|v| v.tile as usize >= p.tiles.len()) {
            self.malformed(Site::Program, "tile index out of range");
        }
        let loop_begin = |s: u32| {
            p.instrs
                .get(s as usize)
                .is_some_and(|i| matches!(i.data, InstrData::LoopBegin { .. }))
        };
        if p.tiles
            .iter()
            .any(|t| t.scope.is_some_and(|s| !loop_begin(s)))
        {
            self.malformed(Site::Program, "a tile's scope is not a loop");
        }
        let bad_access = |a: &HbmAccess| {
            p.tensors
                .get(a.tensor as usize)
                .is_none_or(|t| t.shape.len() != a.rank as usize)
        };
        if p.accesses.iter().any(bad_access) {
            self.malformed(Site::Program, "tensor index out of range");
        }
    }

    /// Every operand index of a non-loop instruction is in range, its affine indices use only
    /// the enclosing loops (`open`: their `LoopBegin`s, outermost first), and every tile it
    /// uses is declared in one of them or at the top level. A failure names the operand's slot
    /// (`None`: the instruction as a whole).
    fn check_operand_refs(
        &self,
        ins: &Instr,
        open: &[usize],
    ) -> Result<(), (Option<u8>, &'static str)> {
        let p = self.p;
        let depth = open.len();
        const OUTSIDE: &str = "index uses a loop that does not enclose it";
        if let Some(m) = ins.mask {
            let mask = p
                .masks
                .get(m.index())
                .ok_or((None, "mask index out of range"))?;
            if mask.len as usize > crate::ir::MAX_MASK_TERMS {
                return Err((None, "a mask has too many terms"));
            }
            for t in mask.terms() {
                if t.offset.uses_loops_from(depth) {
                    return Err((None, OUTSIDE));
                }
                if t.sym.is_some_and(|s| s as usize >= p.symbols.len()) {
                    return Err((None, "symbol index out of range"));
                }
                if t.axis as usize >= crate::shape::MAX_TILE_RANK {
                    return Err((None, "a mask term's grid axis is out of range"));
                }
                // The executor negates a negative coefficient.
                if t.coef == i64::MIN {
                    return Err((None, "a mask term's coefficient is out of range"));
                }
            }
        }
        if let Some(dst) = ins.data.dst()
            && let Write::Group { loops, .. } = dst.write
            && u32::from(loops) >> depth != 0
        {
            return Err((
                Some(0),
                "accumulation group names a loop that does not enclose it",
            ));
        }
        for o in ins.operands() {
            let slot = Some(o.slot);
            match o.operand {
                OperandRef::View(v) => {
                    let view = p
                        .views
                        .get(v.index())
                        .ok_or((slot, "view index out of range"))?;
                    let tile = p
                        .tiles
                        .get(view.tile as usize)
                        .ok_or((slot, "tile index out of range"))?;
                    if tile.scope.is_some_and(|s| !open.contains(&(s as usize))) {
                        return Err((slot, "a tile is used outside the loop that declares it"));
                    }
                    if view.offset.uses_loops_from(depth) {
                        return Err((None, OUTSIDE));
                    }
                }
                OperandRef::Access(a) => {
                    let access = p
                        .accesses
                        .get(a.index())
                        .ok_or((slot, "access index out of range"))?;
                    let tensor = p
                        .tensors
                        .get(access.tensor as usize)
                        .ok_or((slot, "tensor index out of range"))?;
                    if tensor.shape.len() != access.rank as usize {
                        return Err((slot, "access rank differs from tensor rank"));
                    }
                    if access.axes().iter().any(|x| x.start.uses_loops_from(depth)) {
                        return Err((None, OUTSIDE));
                    }
                    if o.dir == Dir::ReadWrite {
                        return Err((slot, "an HBM access cannot accumulate"));
                    }
                }
                OperandRef::Expr(e) => {
                    let expr = p
                        .exprs
                        .get(e.index())
                        .ok_or((slot, "expression index out of range"))?;
                    if expr.start.uses_loops_from(depth) {
                        return Err((None, OUTSIDE));
                    }
                }
                OperandRef::Imm(_) => {}
            }
        }
        Ok(())
    }
}
