//! The readable listing of a program: one instruction a line, loops indented.

use core::fmt;

use crate::ir::ops::Opcode;
use crate::ir::{
    AccessId, AxisIndex, Dir, Dst, IndirectMode, InstrData, LoopKind, Mask, Pred, RegSrc, Scalar,
    Src, TileView, ViewId, Write,
};
use crate::program::{Program, TensorRole};
use crate::shape::{Dim, MAX_TILE_RANK};

const TILE_AXES: [&str; MAX_TILE_RANK] = ["p", "f0", "f1", "f2", "f3"];

impl fmt::Display for Program<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sym = |s: u8| self.symbols().get(s as usize).copied().unwrap_or("?");
        let dims = |shape: &[Dim]| {
            shape
                .iter()
                .map(|d| match *d {
                    Dim::Fixed(n) => n.to_string(),
                    Dim::Sym(s) => sym(s).to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let sig = |role| {
            self.tensors()
                .iter()
                .filter(|t| t.role == role)
                .map(|t| format!("{}: {}[{}]", t.name, t.dtype, dims(t.shape)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            f,
            "kernel {}({}) -> ({})  target {}",
            self.name(),
            sig(TensorRole::Input),
            sig(TensorRole::Output),
            self.target().name()
        )?;
        for t in self.allocated() {
            let scope = t.scope.map_or(String::new(), |s| {
                format!("  (per iteration of the loop at {s})")
            });
            writeln!(
                f,
                "  {} {}: {}[{}]{scope}",
                t.role.buffer_name(),
                t.name,
                t.dtype,
                dims(t.shape)
            )?;
        }
        for r in self.reshapes() {
            let of = self
                .tensors()
                .get(usize::from(r.tensor))
                .map_or("?", |t| t.name);
            writeln!(f, "  reshape {} = {of}[{}]", r.name, dims(r.shape))?;
        }
        if !self.constraints().is_empty() {
            let tensors: Vec<&str> = self.tensors().iter().map(|t| t.name).collect();
            let reshapes: Vec<&str> = self.reshapes().iter().map(|r| r.name).collect();
            let tiles: Vec<&str> = self.tiles().iter().map(|t| t.name).collect();
            for c in self.constraints() {
                writeln!(
                    f,
                    "  require {}",
                    c.display(self.symbols(), &tensors, &reshapes, &tiles)
                )?;
            }
        }
        writeln!(
            f,
            "  sbuf {} B/partition, psum {} bank(s)",
            self.sbuf_bytes(),
            self.psum_banks()
        )?;
        for (i, t) in self.tiles().iter().enumerate() {
            write!(
                f,
                "  tile t{i} {:<12} {} {}{} @{:#07x}",
                t.name, t.memory, t.dtype, t.shape, t.addr
            )?;
            if let Some(count) = t.blocks {
                write!(f, "  blocks {}", count.display(self.symbols()))?;
            }
            writeln!(f)?;
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, ins) in self.instrs().iter().enumerate() {
            if let InstrData::LoopEnd { .. } = ins.data {
                names.pop();
                continue;
            }
            let indent = "  ".repeat(names.len().saturating_add(1));
            write!(f, "{i:04}{indent}")?;
            if let InstrData::LoopBegin {
                kind, trip, var, ..
            } = ins.data
            {
                let name = self.loop_vars().get(var as usize).copied().unwrap_or("?");
                match kind {
                    LoopKind::Affine | LoopKind::Sequential => {
                        let trip = trip.display(self.symbols());
                        writeln!(f, "for {name} in {}({trip}):", kind.name())?;
                    }
                    // The lower bound is the iteration register's value when the loop starts.
                    LoopKind::Dynamic { var, upper, step } => writeln!(
                        f,
                        "for {name} = r{} in dynamic_range(r{}, r{}, {step}):",
                        var.0, var.0, upper.0
                    )?,
                    LoopKind::While { cond } => writeln!(f, "while r{} != 0:", cond.0)?,
                }
                names.push(name);
                continue;
            }
            write!(f, "{:<7} {:<12} ", ins.engine, ins.mnemonic())?;
            let l = Line {
                p: self,
                loops: &names,
            };
            l.operands(f, ins.opcode, &ins.data)?;
            if let Some(m) = ins.mask {
                match self.masks().get(m.index()) {
                    Some(mask) => write!(f, " if {}", l.mask(mask))?,
                    None => write!(f, " if mask{}?", m.0)?,
                }
            }
            let pc = u32::try_from(i).unwrap_or(u32::MAX);
            if let Some(n) = self.control().name_of(pc) {
                write!(f, "  name={n:?}")?;
            }
            writeln!(f)?;
        }
        let control = self.control();
        for e in control.edges {
            let name = |n: u16| control.names.get(usize::from(n)).map_or("?", |n| n.name);
            writeln!(
                f,
                "  schedule {:?} after {:?}",
                name(e.after),
                name(e.before)
            )?;
        }
        for o in control.ordered {
            writeln!(
                f,
                "  no_reorder {:04}..{:04}",
                o.first,
                o.end.saturating_sub(1)
            )?;
        }
        Ok(())
    }
}

/// Formats one instruction's operands with the program's names.
struct Line<'a, 'p> {
    p: &'a Program<'p>,
    loops: &'a [&'a str],
}

impl<'a> Line<'a, '_> {
    fn view(&self, v: ViewId) -> ViewFmt<'a, '_> {
        ViewFmt {
            p: self.p,
            v: self.p.views().get(v.index()),
            id: v,
            loops: self.loops,
        }
    }

    fn access(&self, a: AccessId) -> impl fmt::Display + '_ {
        AccessFmt { line: self, a }
    }

    fn src(&self, s: Src) -> String {
        match s {
            Src::None => "-".to_string(),
            Src::Tile(v) => self.view(v).to_string(),
            Src::Imm(x) => format!("{x:?}"),
        }
    }

    /// A per-partition reduction's suffix, `, r <- add-reduce`, if the instruction has one.
    fn reduce(&self, f: &mut fmt::Formatter<'_>, acc: Option<crate::ir::AccOut>) -> fmt::Result {
        match acc {
            Some(a) => write!(f, ", {} <- {}-reduce", self.view(a.view), a.op),
            None => Ok(()),
        }
    }

    fn expr(&self, e: &AxisIndex) -> String {
        index(e, self.loops)
    }

    fn mask(&self, m: &Mask) -> String {
        let sym = |s: u8| self.p.symbols().get(s as usize).copied().unwrap_or("?");
        m.terms()
            .iter()
            .map(|t| {
                let mut grid = [0i64; MAX_TILE_RANK];
                if let Some(g) = grid.get_mut(t.axis as usize) {
                    *g = t.coef;
                }
                let lhs = index(
                    &AxisIndex {
                        start: t.offset,
                        grid,
                    },
                    self.loops,
                );
                let rhs = t.sym.map_or("0", sym);
                format!("{lhs} < {rhs}")
            })
            .collect::<Vec<_>>()
            .join(" & ")
    }

    fn dst(&self, d: &Dst, assign: &str) -> String {
        let op = match d.write {
            Write::Overwrite => assign.to_string(),
            Write::Accumulate(crate::func::Alu::Add) => "+=".to_string(),
            Write::Accumulate(a) => format!("{a}="),
            Write::Group { loops, op } => {
                let ls: Vec<&str> = (0..8)
                    .filter(|d| loops >> d & 1 == 1)
                    .map(|d| self.loops.get(d).copied().unwrap_or("?"))
                    .collect();
                // Every operation shows as its name and `=`; `add` as `+=`.
                let op = if op == crate::func::Alu::Add {
                    "+=".to_string()
                } else {
                    format!("{op}=")
                };
                format!("{op} (group over {})", ls.join(", "))
            }
        };
        format!("{} {op}", self.view(d.view))
    }

    fn operands(
        &self,
        f: &mut fmt::Formatter<'_>,
        opcode: crate::ir::ops::Opcode,
        data: &InstrData,
    ) -> fmt::Result {
        let spec = opcode.info().operands;
        match *data {
            InstrData::LoopBegin { .. } | InstrData::LoopEnd { .. } => Ok(()),
            InstrData::Register { reg, src, tile } => match (src, tile) {
                (RegSrc::Imm(x), _) => write!(f, "r{} <- {x}", reg.0),
                (RegSrc::Reg(r), _) => write!(f, "r{} <- r{}", reg.0, r.0),
                (RegSrc::None, Some(t)) if spec.first().is_some_and(|s| !s.name.is_empty()) => {
                    write!(f, "{} <- r{}", self.view(t), reg.0)
                }
                (RegSrc::None, Some(t)) => write!(f, "r{} <- {}", reg.0, self.view(t)),
                (RegSrc::None, None) => write!(f, "r{}", reg.0),
            },
            InstrData::Dma { tile, hbm } => {
                if spec.first().is_some_and(|s| s.dir == Dir::Write) {
                    write!(f, "{} <- {}", self.view(tile), self.access(hbm))
                } else {
                    write!(f, "{} <- {}", self.access(hbm), self.view(tile))
                }
            }
            InstrData::Indirect {
                tile,
                hbm,
                index,
                axis,
                mode,
            } => {
                let rows = match mode {
                    IndirectMode::Rows => format!("rows {} on axis {axis}", self.view(index)),
                    IndirectMode::Scalar { scale, bound } => {
                        format!("offset {} * {scale} (index < {bound})", self.view(index))
                    }
                };
                if spec.first().is_some_and(|s| s.dir == Dir::Write) {
                    write!(f, "{} <- {} {rows}", self.view(tile), self.access(hbm))
                } else {
                    write!(f, "{} <- {} {rows}", self.access(hbm), self.view(tile))
                }
            }
            InstrData::DynCopy {
                dst,
                src,
                offset,
                stride,
            } => write!(
                f,
                "{} {} + {} * {stride}",
                self.dst(&dst, "<-"),
                self.view(src),
                self.view(offset)
            ),
            InstrData::Gather { dst, data, indices } => write!(
                f,
                "{} {} at {}",
                self.dst(&dst, "<-"),
                self.view(data),
                self.view(indices)
            ),
            InstrData::Unary { dst, src } => {
                write!(f, "{} {}", self.dst(&dst, "<-"), self.view(src))
            }
            InstrData::Fill { dst, value } => write!(f, "{} {value:?}", self.dst(&dst, "<-")),
            InstrData::Iota { dst, expr } => {
                let e = self.p.exprs().get(expr.index());
                let e = e.map_or_else(|| "?".to_string(), |e| self.expr(e));
                write!(f, "{} iota({e})", self.dst(&dst, "<-"))
            }
            InstrData::Alu { dst, src, op, .. }
                if opcode == crate::ir::ops::Opcode::TensorScalarCumulative =>
            {
                write!(
                    f,
                    "{} running {}({}({}, {}), reg), reg from {}",
                    self.dst(&dst, "<-"),
                    op[1],
                    op[0],
                    self.src(src[0]),
                    self.src(src[1]),
                    match src[2] {
                        crate::ir::Src::None => format!("{}'s identity", op[1]),
                        s @ (crate::ir::Src::Tile(_) | crate::ir::Src::Imm(_)) => self.src(s),
                    }
                )
            }
            InstrData::Alu {
                dst,
                src,
                op,
                rev,
                acc,
            } => {
                let mut value = self.src(src[0]);
                for (j, &o) in op.iter().enumerate() {
                    if o == crate::func::Alu::Bypass && j > 0 {
                        continue;
                    }
                    // j < 2: `src` has three slots.
                    #[allow(clippy::arithmetic_side_effects)]
                    let other = self.src(src[j + 1]);
                    value = match (o.arity(), rev >> j & 1 == 1) {
                        (1, _) => format!("{o}({value})"),
                        (_, false) => format!("{o}({value}, {other})"),
                        (_, true) => format!("{o}({other}, {value})"),
                    };
                }
                write!(f, "{} {value}", self.dst(&dst, "<-"))?;
                self.reduce(f, acc)
            }
            InstrData::Act2 {
                dst,
                src,
                imm,
                op,
                rev,
                func,
                acc,
            } => {
                let mut value = self.view(src).to_string();
                for (j, &o) in op.iter().enumerate() {
                    if o == crate::func::Alu::Bypass {
                        continue;
                    }
                    let other = self.src(imm[j]);
                    value = if rev >> j & 1 == 1 {
                        format!("{o}({other}, {value})")
                    } else {
                        format!("{o}({value}, {other})")
                    };
                }
                write!(f, "{} {func}({value})", self.dst(&dst, "<-"))?;
                self.reduce(f, acc)
            }
            InstrData::Act {
                dst,
                src,
                bias,
                acc,
                ..
            } if opcode == crate::ir::ops::Opcode::Exponential => {
                let max = match bias {
                    Src::None => String::new(),
                    b @ (Src::Tile(_) | Src::Imm(_)) => format!(" - {}", self.src(b)),
                };
                write!(f, "{} exp({}{max})", self.dst(&dst, "<-"), self.view(src))?;
                self.reduce(f, acc)
            }
            InstrData::Act {
                dst,
                src,
                func,
                scale,
                bias,
                acc,
            } => {
                let mut arg = self.view(src).to_string();
                if scale != Src::Imm(Scalar::float(1.0)) {
                    arg = format!("{arg} * {}", self.src(scale));
                }
                if bias != Src::None {
                    arg = format!("{arg} + {}", self.src(bias));
                }
                write!(f, "{} {func}({arg})", self.dst(&dst, "<-"))?;
                self.reduce(f, acc)
            }
            InstrData::Reduce {
                dst,
                src,
                op,
                axes,
                negate,
            } => {
                let axes: Vec<String> = (0..crate::shape::MAX_TILE_RANK - 1)
                    .filter(|j| axes >> j & 1 == 1)
                    .map(|j| j.saturating_add(1).to_string())
                    .collect();
                let neg = if negate { "-" } else { "" };
                write!(
                    f,
                    "{} {neg}{op}({}, axis [{}])",
                    self.dst(&dst, "<-"),
                    self.view(src),
                    axes.join(", ")
                )
            }
            InstrData::Scan {
                dst,
                src,
                init,
                op,
                rev,
            } => write!(
                f,
                "{} scan({}{}, {}{}, {}, {}, init {})",
                self.dst(&dst, "<-"),
                op[0],
                if rev & 1 == 1 { " reversed" } else { "" },
                op[1],
                if rev & 2 == 2 { " reversed" } else { "" },
                self.view(src[0]),
                self.view(src[1]),
                self.src(init)
            ),
            InstrData::Select {
                dst,
                pred,
                on_true,
                on_false,
            } => {
                let pred = match pred {
                    Pred::Tile(v) => self.view(v).to_string(),
                    Pred::Affine { expr, cmp } => {
                        let e = self.p.exprs().get(expr.index());
                        let e = e.map_or_else(|| "?".to_string(), |e| self.expr(e));
                        format!("{e} {} 0", cmp.symbol())
                    }
                };
                write!(
                    f,
                    "{} select({pred}, {}, {})",
                    self.dst(&dst, "<-"),
                    self.src(on_true),
                    self.src(on_false)
                )
            }
            InstrData::Matmul {
                dst,
                stationary,
                moving,
            } => write!(
                f,
                "{} {}ᵀ · {}",
                self.dst(&dst, "="),
                self.view(stationary),
                self.view(moving)
            ),
            InstrData::Match8 {
                dst,
                data,
                vals,
                imm,
                idx,
            } => {
                write!(
                    f,
                    "{} {}, vals {}",
                    self.dst(&dst, "<-"),
                    self.view(data),
                    self.view(vals)
                )?;
                if let Some(x) = imm {
                    write!(f, ", imm {x:?}")?;
                }
                match idx {
                    Some(v) => write!(f, ", {} <- indices", self.view(v)),
                    None => Ok(()),
                }
            }
            InstrData::SelectReduce {
                dst,
                pred,
                on_true,
                on_false,
                reverse,
                acc,
            } => {
                let not = if reverse { "!" } else { "" };
                write!(
                    f,
                    "{} select({not}{}, {}, {})",
                    self.dst(&dst, "<-"),
                    self.view(pred),
                    self.view(on_true),
                    self.src(on_false)
                )?;
                self.reduce(f, acc)
            }
            // NKI 0.6's XORWOW instructions: random bits, the generator's state, and uniform
            // values in [min, max]; else the model's `rand` and `dropout`.
            InstrData::Rng { dst, .. } if opcode == Opcode::Rng => {
                write!(f, "{} rng()", self.dst(&dst, "<-"))
            }
            InstrData::Rng { dst, .. } if opcode == Opcode::RandGetState => {
                write!(f, "{} xorwow-state", self.dst(&dst, "<-"))
            }
            InstrData::Rng { dst, src, prob } if opcode == Opcode::Rand2 => write!(
                f,
                "{} uniform[{}, {}]",
                self.dst(&dst, "<-"),
                self.src(src),
                self.src(prob)
            ),
            InstrData::Rng { dst, src, prob } => match src {
                Src::None => write!(f, "{} rand()", self.dst(&dst, "<-")),
                Src::Tile(_) | Src::Imm(_) => write!(
                    f,
                    "{} dropout({}, {})",
                    self.dst(&dst, "<-"),
                    self.src(src),
                    self.src(prob)
                ),
            },
            InstrData::Seed { seed } if opcode == Opcode::RandSetState => {
                write!(f, "xorwow-state <- {}", self.view(seed))
            }
            InstrData::Seed { seed } if opcode == Opcode::SetRngSeed => {
                write!(f, "xorwow-seed <- {}", self.view(seed))
            }
            InstrData::Seed { seed } => write!(f, "seed <- {}", self.view(seed)),
            InstrData::RangeSelect {
                dst,
                on_true,
                bounds,
                cmp,
                start,
                acc,
            } => {
                write!(
                    f,
                    "{} range_select({}, {start} + i {} {} and {} {})",
                    self.dst(&dst, "<-"),
                    self.view(on_true),
                    cmp[0].symbol(),
                    self.view(bounds[0]),
                    cmp[1].symbol(),
                    self.view(bounds[1])
                )?;
                self.reduce(f, acc)
            }
            InstrData::MatmulMx {
                dst,
                stationary,
                moving,
                scales,
            } => write!(
                f,
                "{} matmul_mx({} * {}, {} * {})",
                self.dst(&dst, "<-"),
                self.view(stationary),
                self.view(scales[0]),
                self.view(moving),
                self.view(scales[1])
            ),
            InstrData::QuantizeMx { dst, src, scale } => write!(
                f,
                "{} quantize_mx({}, scale -> {})",
                self.dst(&dst, "<-"),
                self.view(src),
                self.view(scale)
            ),
            InstrData::Shuffle { dst, src, mask } => {
                let entries: Vec<String> = mask
                    .iter()
                    .map(|&m| match m {
                        crate::ir::SHUFFLE_KEEP => "-".to_string(),
                        m => m.to_string(),
                    })
                    .collect();
                write!(
                    f,
                    "{} shuffle({}, [{}])",
                    self.dst(&dst, "<-"),
                    self.view(src),
                    entries.join(" ")
                )
            }
            InstrData::LocalGather {
                dst,
                src,
                index,
                elems,
                valid,
            } => write!(
                f,
                "{} local_gather({}, {}, {valid} indices × {elems})",
                self.dst(&dst, "<-"),
                self.view(src),
                self.view(index)
            ),
            InstrData::Nonzero {
                dst,
                src,
                offset,
                padding,
            } => write!(
                f,
                "{} nonzero_with_count({}, offset {offset}, padding {padding}) on partitions 0, 16, ...",
                self.dst(&dst, "<-"),
                self.view(src)
            ),
            InstrData::TopK { val, idx, src, n } => write!(
                f,
                "{}, {} <- topk({}, n {n}) per 16-partition snake, ascending",
                self.view(val.view),
                self.view(idx),
                self.view(src)
            ),
            InstrData::DmaCompute { dst, srcs } => {
                let terms: Vec<String> = srcs
                    .iter()
                    .flatten()
                    .map(|&v| self.view(v).to_string())
                    .collect();
                write!(
                    f,
                    "{} dma_compute({}) in fp32",
                    self.dst(&dst, "<-"),
                    terms.join(" + ")
                )
            }
        }
    }
}

/// `start + g·p + ...` with the grid axes' names.
fn index(ix: &AxisIndex, loops: &[&str]) -> String {
    let mut terms: Vec<String> = Vec::new();
    for (j, &g) in ix.grid.iter().enumerate() {
        match g {
            0 => {}
            1 => terms.push(TILE_AXES[j].to_string()),
            g => terms.push(format!("{g}*{}", TILE_AXES[j])),
        }
    }
    let start = ix.start.display(loops).to_string();
    if start != "0" || terms.is_empty() {
        terms.insert(0, start);
    }
    terms.join(" + ")
}

struct ViewFmt<'a, 'p> {
    p: &'a Program<'p>,
    v: Option<&'a TileView>,
    id: ViewId,
    loops: &'a [&'a str],
}

impl fmt::Display for ViewFmt<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(v) = self.v else {
            return write!(f, "view{}?", self.id.0);
        };
        let Some(t) = self.p.tiles().get(v.tile as usize) else {
            return write!(f, "t{}?", v.tile);
        };
        write!(f, "t{} {}:{}", v.tile, t.memory, t.dtype)?;
        if let Some(d) = v.dtype {
            write!(f, " as {d}")?;
        }
        write!(f, "{}", v.shape)?;
        let size = i64::from(v.dtype_of(t.dtype).size());
        let whole = v.dtype.is_none()
            && v.part_start == 0
            && v.part_var == crate::affine::Affine::ZERO
            && v.shape == t.shape
            && v.offset.constant == 0
            && v.offset.is_constant()
            && v.is_row_major();
        if !whole {
            write!(f, "{{p+{}", v.part_start)?;
            if v.part_var != crate::affine::Affine::ZERO {
                write!(f, "+({})", v.part_var.display(self.loops))?;
            }
            write!(f, ", f: {}", v.offset.display(self.loops))?;
            let free = v.shape.rank().saturating_sub(1);
            for (s, axis) in v.strides[..free].iter().zip(&TILE_AXES[1..]) {
                write!(f, " + {s}*{axis}")?;
            }
            f.write_str("}")?;
        }
        let addr = i64::from(t.addr).saturating_add(v.offset.constant.saturating_mul(size));
        write!(f, " @{addr:#x}")
    }
}

struct AccessFmt<'a, 'l, 'p> {
    line: &'a Line<'l, 'p>,
    a: AccessId,
}

impl fmt::Display for AccessFmt<'_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.line.p;
        let Some(a) = p.accesses().get(self.a.index()) else {
            return write!(f, "access{}?", self.a.0);
        };
        let Some(t) = p.tensors().get(a.tensor as usize) else {
            return write!(f, "tensor{}?", a.tensor);
        };
        let name = match a.reshape {
            Some(r) => p.reshapes().get(usize::from(r)).map_or("?", |r| r.name),
            None => t.name,
        };
        write!(f, "{name}:{}[", t.dtype)?;
        for (axis, ix) in a.axes().iter().enumerate() {
            if axis > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&index(ix, self.line.loops))?;
        }
        f.write_str("]")
    }
}
