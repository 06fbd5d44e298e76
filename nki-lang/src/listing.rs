//! The readable listing of a program: one instruction a line, loops indented.

use core::fmt;

use crate::ir::{HbmAccess, Op, PsumWrite, TileView};
use crate::program::{Program, TensorRole};
use crate::shape::Dim;

const TILE_AXES: [&str; 4] = ["p", "f0", "f1", "f2"];

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
        if !self.constraints().is_empty() {
            let tensors: Vec<&str> = self.tensors().iter().map(|t| t.name).collect();
            let tiles: Vec<&str> = self.tiles().iter().map(|t| t.name).collect();
            for c in self.constraints() {
                writeln!(
                    f,
                    "  require {}",
                    c.display(self.symbols(), &tensors, &tiles)
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
            writeln!(
                f,
                "  tile t{i} {:<12} {} {}{} @{:#07x}",
                t.name, t.memory, t.dtype, t.shape, t.addr
            )?;
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, ins) in self.instrs().iter().enumerate() {
            if let Op::LoopEnd { .. } = ins.op {
                names.pop();
                continue;
            }
            let indent = "  ".repeat(names.len() + 1);
            write!(f, "{i:04}{indent}")?;
            match ins.op {
                Op::LoopBegin {
                    kind, trip, var, ..
                } => {
                    let name = self.loop_vars().get(var as usize).copied().unwrap_or("?");
                    let trip = trip.display(self.symbols());
                    writeln!(f, "for {name} in {}({trip}):", kind.name())?;
                    names.push(name);
                    continue;
                }
                Op::LoopEnd { .. } => unreachable!(),
                _ => {}
            }
            write!(f, "{:<7} {:<12} ", ins.engine, ins.op.mnemonic())?;
            let p: &Program<'_> = self;
            let loops: &[&str] = &names;
            let v = |v| ViewFmt { p, v, loops };
            let a = |a| AccessFmt { p, a, loops };
            match ins.op {
                Op::Load { src, dst } => write!(f, "{} <- {}", v(&dst), a(&src))?,
                Op::Store { dst, src } => write!(f, "{} <- {}", a(&dst), v(&src))?,
                Op::Matmul {
                    stationary,
                    moving,
                    dst,
                    write,
                } => {
                    let op = match write {
                        PsumWrite::Overwrite => "=".to_string(),
                        PsumWrite::Accumulate => "+=".to_string(),
                        PsumWrite::Group { loops } => {
                            let ls: Vec<&str> = (0..8)
                                .filter(|d| loops >> d & 1 == 1)
                                .map(|d| names.get(d).copied().unwrap_or("?"))
                                .collect();
                            format!("+= (group over {})", ls.join(", "))
                        }
                    };
                    write!(f, "{} {op} {}ᵀ · {}", v(&dst), v(&stationary), v(&moving))?
                }
                Op::Transpose { src, dst } | Op::Copy { src, dst } => {
                    write!(f, "{} <- {}", v(&dst), v(&src))?
                }
                Op::Memset { dst, value } => write!(f, "{} <- {value:?}", v(&dst))?,
                Op::LoopBegin { .. } | Op::LoopEnd { .. } => unreachable!(),
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

struct ViewFmt<'a, 'p> {
    p: &'a Program<'p>,
    v: &'a TileView,
    loops: &'a [&'a str],
}

impl fmt::Display for ViewFmt<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.v;
        let Some(t) = self.p.tiles().get(v.tile as usize) else {
            return write!(f, "t{}?", v.tile);
        };
        write!(f, "t{} {}:{}{}", v.tile, t.memory, t.dtype, v.shape)?;
        let whole = v.part_start == 0
            && v.shape == t.shape
            && v.offset.constant == 0
            && v.offset.is_constant()
            && is_row_major(v);
        if !whole {
            write!(
                f,
                "{{p+{}, f: {}",
                v.part_start,
                v.offset.display(self.loops)
            )?;
            for (j, s) in v.strides[..v.shape.rank() - 1].iter().enumerate() {
                write!(f, " + {s}*{}", TILE_AXES[j + 1])?;
            }
            f.write_str("}")?;
        }
        let addr = t.addr as i64 + v.offset.constant * t.dtype.size() as i64;
        write!(f, " @{addr:#x}")
    }
}

fn is_row_major(v: &TileView) -> bool {
    let free = v.shape.free();
    let mut stride = 1i64;
    for j in (0..free.len()).rev() {
        if free[j] != 1 && v.strides[j] != stride {
            return false;
        }
        stride *= free[j] as i64;
    }
    true
}

struct AccessFmt<'a, 'p> {
    p: &'a Program<'p>,
    a: &'a HbmAccess,
    loops: &'a [&'a str],
}

impl fmt::Display for AccessFmt<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(t) = self.p.tensors().get(self.a.tensor as usize) else {
            return write!(f, "tensor{}?", self.a.tensor);
        };
        write!(f, "{}:{}[", t.name, t.dtype)?;
        for (axis, ix) in self.a.axes().iter().enumerate() {
            if axis > 0 {
                f.write_str(", ")?;
            }
            let mut terms: Vec<String> = Vec::new();
            for (j, &g) in ix.grid.iter().enumerate() {
                match g {
                    0 => {}
                    1 => terms.push(TILE_AXES[j].to_string()),
                    g => terms.push(format!("{g}*{}", TILE_AXES[j])),
                }
            }
            let start = ix.start.display(self.loops).to_string();
            if start != "0" || terms.is_empty() {
                terms.insert(0, start);
            }
            f.write_str(&terms.join(" + "))?;
        }
        f.write_str("]")
    }
}
