//! The structural checks, which run before any other: indices in range, formats matching
//! opcodes, loops balanced and not too deep, indices using only the loops that enclose them,
//! tiles used only within the loops that declare them, symbols bindable from the inputs.

use super::{Checker, Site};
use crate::affine::MAX_LOOP_DEPTH;
use crate::diag::Diagnostic;
use crate::grid::SymbolSource;
use crate::ir::ops::{Format, Opcode};
use crate::ir::{
    Dir, HbmAccess, IndirectMode, Instr, InstrData, LoopKind, MAX_REGISTERS, OperandRef, RegId,
    RegSrc, Write,
};
use crate::program::TensorRole;
use crate::rules::RuleViolation;
use crate::shape::{Dim, Extent, MAX_SYMBOLS, MAX_TENSOR_RANK};

impl Checker<'_> {
    /// Each reshape views a tensor of the program, has 1 to 6 dimensions whose symbols exist,
    /// and keeps the tensor's element count ([`crate::rules::check_reshape`]).
    fn check_reshapes(&mut self) {
        let p = self.p;
        let describe = |dims: &[Dim]| {
            dims.iter()
                .map(|d| match *d {
                    Dim::Fixed(n) => n.to_string(),
                    Dim::Sym(s) => p.symbols.get(usize::from(s)).cloned().unwrap_or_default(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        for r in &p.reshapes {
            let Some(tensor) = p.tensors.get(usize::from(r.tensor)) else {
                self.malformed(Site::Program, "a reshape's tensor index is out of range");
                continue;
            };
            if r.shape.is_empty() || r.shape.len() > MAX_TENSOR_RANK {
                self.malformed(Site::Program, "a reshape has 1 to 6 dimensions");
                continue;
            }
            let unknown = |d: &Dim| matches!(*d, Dim::Sym(s) if usize::from(s) >= p.symbols.len());
            if r.shape.iter().any(unknown) {
                self.malformed(Site::Program, "symbol index out of range");
                continue;
            }
            let kept = crate::rules::check_reshape(
                &r.name,
                &tensor.name,
                &tensor.shape,
                &r.shape,
                &p.symbols,
                &describe,
            );
            if let Err(v) = kept {
                self.report(Site::Program, Err(v));
            }
        }
    }

    /// Indices in range, formats matching opcodes, loops balanced and not too deep, indices
    /// using only enclosing loops, symbols bindable from the inputs.
    pub(super) fn check_structure(&mut self) {
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
        let outputs = p.tensors[inputs..]
            .iter()
            .take_while(|t| t.role == TensorRole::Output)
            .count();
        // (A misplaced input is reported above.)
        if p.tensors[inputs.saturating_add(outputs)..]
            .iter()
            .any(|t| t.role == TensorRole::Output)
        {
            self.malformed(
                Site::Program,
                "outputs must precede scratch and constant tensors in the tensor table",
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
            if tensor.scope.is_some() && tensor.role != TensorRole::Private {
                self.malformed(Site::Tensor(t), "only a private_hbm tensor has a scope");
            }
            // A constant's data: an f32 per element.
            let bytes = tensor.shape.iter().try_fold(4u64, |n, d| match *d {
                Dim::Fixed(k) => n.checked_mul(k),
                Dim::Sym(_) => None,
            });
            match tensor.role {
                TensorRole::Constant => {
                    if bytes != u64::try_from(tensor.data.len()).ok() {
                        self.malformed(
                            Site::Tensor(t),
                            "a constant's data must hold its compile-time shape's elements",
                        );
                    }
                }
                TensorRole::Input
                | TensorRole::Output
                | TensorRole::Scratch
                | TensorRole::Private => {
                    if !tensor.data.is_empty() {
                        self.malformed(Site::Tensor(t), "only a constant tensor holds data");
                    }
                }
            }
        }
        self.check_reshapes();
        // An input's shape binds a symbol it names; the launch grid binds its own; a product
        // is bound when its factors are.
        let from_inputs = |s: usize| {
            p.tensors[..inputs]
                .iter()
                .any(|t| u8::try_from(s).is_ok_and(|s| t.shape.contains(&Dim::Sym(s))))
        };
        let plain = |name: &str| match SymbolSource::of(name) {
            SymbolSource::Input => p
                .symbols
                .iter()
                .position(|n| n == name)
                .is_some_and(from_inputs),
            SymbolSource::Product | SymbolSource::Quotient | SymbolSource::Sum => false,
            SymbolSource::GridSize(_) | SymbolSource::GridCount | SymbolSource::GridRank => true,
        };
        for (s, name) in p.symbols.iter().enumerate() {
            let bound = match SymbolSource::of(name) {
                SymbolSource::Input => from_inputs(s),
                SymbolSource::Product | SymbolSource::Quotient | SymbolSource::Sum => {
                    crate::derived::atoms(name).is_some_and(|a| a.into_iter().all(plain))
                }
                SymbolSource::GridSize(_) | SymbolSource::GridCount | SymbolSource::GridRank => {
                    true
                }
            };
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
                    if let InstrData::LoopBegin { kind, .. } = ins.data
                        && let Err(what) = device_loop(kind, trip)
                    {
                        self.malformed(Site::Instr(i), what);
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
                | InstrData::Act2 { .. }
                | InstrData::Reduce { .. }
                | InstrData::Scan { .. }
                | InstrData::Select { .. }
                | InstrData::Matmul { .. }
                | InstrData::Match8 { .. }
                | InstrData::SelectReduce { .. }
                | InstrData::Indirect { .. }
                | InstrData::Gather { .. }
                | InstrData::DynCopy { .. }
                | InstrData::Rng { .. }
                | InstrData::Seed { .. }
                | InstrData::RangeSelect { .. }
                | InstrData::Shuffle { .. }
                | InstrData::QuantizeMx { .. }
                | InstrData::MatmulMx { .. }
                | InstrData::LocalGather { .. }
                | InstrData::Nonzero { .. }
                | InstrData::DmaCompute { .. }
                | InstrData::TopK { .. }
                | InstrData::Register { .. } => {
                    if let InstrData::Register { reg, src, .. } = ins.data
                        && (reg.index() >= MAX_REGISTERS
                            || matches!(src, RegSrc::Reg(r) if r.index() >= MAX_REGISTERS))
                    {
                        self.malformed(Site::Instr(i), "register index out of range");
                    }
                    if let InstrData::Indirect {
                        hbm,
                        axis,
                        mode: IndirectMode::Scalar { scale, bound },
                        ..
                    } = ins.data
                    {
                        // One offset for the whole access, whose indices stay as they are; only
                        // loads and stores take one.
                        let ok = scale > 0
                            && bound > 0
                            && axis == 0
                            && matches!(ins.opcode, Opcode::IndirectLoad | Opcode::IndirectStore)
                            && p.accesses.get(hbm.index()).is_some();
                        if !ok {
                            self.malformed(
                                Site::Operand { instr: i, slot: 1 },
                                "a scalar offset with an axis other than 0, a zero scale or bound, an access outside the program, or on an atomic_rmw",
                            );
                        }
                    } else if let InstrData::Indirect { hbm, axis, .. } = ins.data {
                        // The index column alone runs along the grid's partitions.
                        let ok = p.accesses.get(hbm.index()).is_some_and(|a| {
                            a.axes()
                                .get(usize::from(axis))
                                .is_some_and(|ix| ix.grid.iter().all(|&g| g == 0))
                                && a.axes().iter().all(|ix| ix.grid[0] == 0)
                        });
                        if !ok {
                            self.malformed(
                                Site::Operand { instr: i, slot: 1 },
                                "an indirect axis outside the access, or grid terms on it or on the partitions",
                            );
                        }
                    }
                    if let Err((slot, what)) = self.check_operand_refs(ins, &stack) {
                        let site = match slot {
                            Some(slot) => Site::Operand { instr: i, slot },
                            None => Site::Instr(i),
                        };
                        self.malformed(site, what);
                    }
                    if ins.data.dst().is_some_and(|d| d.write != Write::Overwrite)
                        && !ins.opcode.accumulates()
                    {
                        self.diags.push(Diagnostic {
                            site: Site::Instr(i),
                            violation: RuleViolation::NoAccumulation {
                                op: ins.opcode.info().name,
                            },
                        });
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
        if p.tensors
            .iter()
            .any(|t| t.scope.is_some_and(|s| !loop_begin(s)))
        {
            self.malformed(Site::Program, "a private_hbm tensor's scope is not a loop");
        }
        let bad_access = |a: &HbmAccess| {
            let dims = match a.reshape {
                Some(r) => p
                    .reshapes
                    .get(usize::from(r))
                    .filter(|r| r.tensor == a.tensor)
                    .map(|r| &r.shape),
                None => p.tensors.get(a.tensor as usize).map(|t| &t.shape),
            };
            p.tensors.get(a.tensor as usize).is_none()
                || dims.is_none_or(|d| d.len() != a.rank as usize)
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
        const DEVICE: &str = "an index uses a device loop's variable (its value is a register)";
        // A device loop's static trip is 1: an index using its variable would not be checked.
        let device = |a: &crate::affine::Affine| {
            open.iter().enumerate().any(|(d, &b)| {
                a.loop_coef(d) != 0
                    && p.instrs.get(b).is_some_and(
                        |i| matches!(i.data, InstrData::LoopBegin { kind, .. } if kind.is_device()),
                    )
            })
        };
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
                if device(&t.offset) {
                    return Err((None, DEVICE));
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
        let listed = ins.opcode.info().operands.len();
        for o in ins.operands() {
            let slot = Some(o.slot);
            if usize::from(o.slot) >= listed {
                return Err((slot, "an operand in a slot the opcode does not have"));
            }
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
                    if device(&view.offset) {
                        return Err((slot, DEVICE));
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
                    let dims = match access.reshape {
                        Some(r) => {
                            &p.reshapes
                                .get(usize::from(r))
                                .filter(|r| r.tensor == access.tensor)
                                .ok_or((slot, "reshape index out of range"))?
                                .shape
                        }
                        None => &tensor.shape,
                    };
                    if dims.len() != access.rank as usize {
                        return Err((slot, "access rank differs from tensor rank"));
                    }
                    if access.axes().iter().any(|x| x.start.uses_loops_from(depth)) {
                        return Err((None, OUTSIDE));
                    }
                    if access.axes().iter().any(|x| device(&x.start)) {
                        return Err((slot, DEVICE));
                    }
                    // `atomic_rmw` alone updates HBM in place.
                    if o.dir == Dir::ReadWrite && ins.opcode != crate::ir::ops::Opcode::AtomicRmw {
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
                    if device(&expr.start) {
                        return Err((slot, DEVICE));
                    }
                }
                OperandRef::Imm(_) => {}
            }
        }
        Ok(())
    }
}

/// A device loop's kind names registers of the file and a positive step, and its static trip
/// is 1 (no index uses its variable); other loops name none.
fn device_loop(kind: LoopKind, trip: Extent) -> Result<(), &'static str> {
    let reg = |r: RegId| r.index() < MAX_REGISTERS;
    let ok = match kind {
        LoopKind::Affine | LoopKind::Sequential => return Ok(()),
        LoopKind::Dynamic { var, upper, step } => reg(var) && reg(upper) && step > 0,
        LoopKind::While { cond } => reg(cond),
    };
    if !ok {
        return Err("a device loop's register index is out of range or its step is not positive");
    }
    if trip != Extent::Fixed(1) {
        return Err("a device loop's static trip count is not 1");
    }
    Ok(())
}
