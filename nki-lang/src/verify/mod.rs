//! The one validator: [`ProgramBuf::finish`] turns a [`ProgramBuf`] into a [`CompiledProgram`].
//!
//! `#[kernel]` calls it at compile time and [`crate::builder::ProgramBuilder`] at run time. As in
//! naga's `valid/`, the program's structure is checked first ([`structure`]: indices in range,
//! formats matching opcodes, loops balanced), so that the later checks may index its pools
//! freely; then every instruction's operands are kept inside their tiles and tensors
//! ([`bounds`]), its opcode's rules are applied through the opcode table
//! ([`crate::ir::ops::infer`]), reads before writes and output dependencies are found
//! ([`crate::dataflow`]), tile addresses are assigned ([`crate::alloc`]) and the launch
//! constraints derived.

mod bounds;
mod structure;

use bounds::{Index, UNIT};

use crate::affine::MAX_PIDS;
use crate::alloc::allocate;
use crate::buf::ProgramBuf;
use crate::compiled::CompiledProgram;
use crate::constraint::{Computed, Constraint};
use crate::diag::{Diagnostic, Site};
use crate::ir::ops::{Blame, Part};
use crate::ir::{Instr, LoopControl, OperandRef};
use crate::program::TensorRole;
use crate::rules::{self, RuleViolation};
use crate::shape::{Dim, Extent};
use crate::target::Memory;

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
        {
            let mut c = Checker {
                p: &self,
                diags: Vec::new(),
                constraints: Vec::new(),
            };
            c.check_structure();
            if self.control.check(self.instrs.len()).is_err() {
                c.malformed(
                    Site::Program,
                    "its scheduling control (instruction names, `with_schedule` edges, `no_reorder!` blocks) breaks crate::schedule_control's rules",
                );
            }
            if !c.diags.is_empty() {
                return Err(c.diags);
            }
        }
        // The capacity of the tiles whose blocks a symbolic dimension counts: their shapes
        // are final before any bound is checked.
        let block_capacity = crate::blocks::reserve(&mut self);
        let mut c = Checker {
            p: &self,
            diags: Vec::new(),
            constraints: Vec::new(),
        };
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
            if let Some(count) = tile.blocks {
                let bad_count = match count {
                    Extent::Sym { sym, div, .. } => {
                        usize::from(sym) >= self.symbols.len() || div == 0
                    }
                    Extent::Fixed(_) => false,
                };
                if bad_count {
                    c.malformed(
                        Site::Tile(t),
                        "a tile's block count names a missing symbol or divides by 0",
                    );
                }
                if tile.memory != Memory::Sbuf || tile.shape.rank() < 3 {
                    c.malformed(
                        Site::Tile(t),
                        "a tile with a symbolic number of blocks lives in SBUF and has a free axis after its block axis",
                    );
                }
                if let (Some(capacity), Ok(tile)) = (block_capacity, u16::try_from(t)) {
                    c.constrain(Constraint::Blocks {
                        tile,
                        count,
                        capacity,
                    });
                }
            }
            match tile.memory {
                Memory::Psum => {
                    c.report(
                        Site::Tile(t),
                        rules::check_psum_block_tile(&tile.shape, tile.dtype, tile.block_axes),
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
                    OperandRef::View(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => false,
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
        let sizes = crate::blocks::fixed_sizes(&self);
        let to_diag = |(t, violation)| {
            vec![Diagnostic {
                site: Site::Tile(t),
                violation,
            }]
        };
        let mut alloc = allocate(&self, &sizes).map_err(to_diag)?;
        crate::blocks::place(&self, &mut alloc).map_err(to_diag)?;
        Ok(CompiledProgram {
            addrs: alloc.addrs,
            constraints: c.constraints,
            sbuf_bytes: alloc.sbuf_bytes,
            psum_banks: alloc.psum_banks,
            buf: self,
        })
    }
}

/// One run of the checks over a program: the violations found and the launch constraints
/// derived so far.
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
                    if o.dir.writes() && tensor.role == TensorRole::Constant {
                        let name = tensor.name.clone();
                        ok &= self.report(site, Err(RuleViolation::ImmutableConstant { name }));
                    }
                    // Structure verification refused a slot the op table does not list.
                    let axes = (ins.opcode.info().operands)
                        .get(usize::from(o.slot))
                        .map_or(crate::ir::ops::Axes::Grid, |s| s.axes);
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
}
