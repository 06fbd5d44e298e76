//! The one enumerator of an instruction's operands.
//!
//! Every pass that needs to know what an instruction reads and writes goes through
//! [`crate::Instr::operands`]: allocation and live ranges, the structural and rule checks,
//! the macro's tensor-index remapping, the executor, and later the timing model and strict mode.
//! It is written once per format; a new format must be added here (the match is exhaustive).

use super::{AccOut, AccessId, Dst, ExprId, Instr, InstrData, Pred, Scalar, Src, ViewId, Write};

/// Most operand slots an instruction format has.
pub const MAX_SLOTS: usize = 5;

/// Whether an instruction reads an operand, writes it, or both.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Read only.
    Read,
    /// Written only (every element overwritten).
    Write,
    /// Read and written: an accumulating destination.
    ReadWrite,
}

impl Dir {
    /// Whether the operand is read.
    pub const fn reads(self) -> bool {
        matches!(self, Dir::Read | Dir::ReadWrite)
    }

    /// Whether the operand is written.
    pub const fn writes(self) -> bool {
        matches!(self, Dir::Write | Dir::ReadWrite)
    }
}

/// What an operand slot holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum OperandRef {
    /// A tile view.
    View(ViewId),
    /// An HBM access.
    Access(AccessId),
    /// A grid expression (computed, not read from memory).
    Expr(ExprId),
    /// An immediate.
    Imm(Scalar),
}

/// One operand of an instruction: its slot in the format, what it is, and its direction.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SlotOperand {
    /// The slot (see [`InstrData`]'s variants; names in [`crate::ir::ops::OpInfo::operands`]).
    pub slot: u8,
    /// The operand.
    pub operand: OperandRef,
    /// Read, written, or both.
    pub dir: Dir,
}

impl SlotOperand {
    /// The view, if the operand is one.
    pub const fn view(&self) -> Option<ViewId> {
        match self.operand {
            OperandRef::View(v) => Some(v),
            OperandRef::Access(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => None,
        }
    }
}

/// The operands of one instruction, in slot order (an iterator; allocates nothing).
#[derive(Clone, Debug)]
pub struct Operands {
    items: [Option<SlotOperand>; MAX_SLOTS],
    next: usize,
}

impl Operands {
    pub(super) fn of(ins: &Instr) -> Operands {
        let mut o = Operands {
            items: [None; MAX_SLOTS],
            next: 0,
        };
        match ins.data {
            InstrData::LoopBegin { .. } | InstrData::LoopEnd { .. } => {}
            InstrData::Dma { tile, hbm } => {
                let spec = ins.opcode.info().operands;
                let dir = |slot: usize| spec.get(slot).map_or(Dir::Read, |s| s.dir);
                o.put(0, OperandRef::View(tile), dir(0));
                o.put(1, OperandRef::Access(hbm), dir(1));
            }
            InstrData::Unary { dst, src } | InstrData::Reduce { dst, src, .. } => {
                o.dst(dst);
                o.put(1, OperandRef::View(src), Dir::Read);
            }
            InstrData::Fill { dst, .. } => o.dst(dst),
            InstrData::Iota { dst, expr } => {
                o.dst(dst);
                o.put(1, OperandRef::Expr(expr), Dir::Read);
            }
            InstrData::Alu { dst, src, acc, .. } => {
                o.dst(dst);
                for (slot, &x) in (1..).zip(&src) {
                    o.src(slot, x);
                }
                o.acc(acc);
            }
            InstrData::Act {
                dst,
                src,
                scale,
                bias,
                acc,
                ..
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(src), Dir::Read);
                o.src(2, scale);
                o.src(3, bias);
                o.acc(acc);
            }
            InstrData::Act2 {
                dst, src, imm, acc, ..
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(src), Dir::Read);
                o.src(2, imm[0]);
                o.src(3, imm[1]);
                o.acc(acc);
            }
            InstrData::Scan { dst, src, init, .. } => {
                o.dst(dst);
                o.put(1, OperandRef::View(src[0]), Dir::Read);
                o.put(2, OperandRef::View(src[1]), Dir::Read);
                o.src(3, init);
            }
            InstrData::Select {
                dst,
                pred,
                on_true,
                on_false,
            } => {
                o.dst(dst);
                match pred {
                    Pred::Tile(v) => o.put(1, OperandRef::View(v), Dir::Read),
                    Pred::Affine { expr, .. } => o.put(1, OperandRef::Expr(expr), Dir::Read),
                }
                o.src(2, on_true);
                o.src(3, on_false);
            }
            InstrData::Matmul {
                dst,
                stationary,
                moving,
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(stationary), Dir::Read);
                o.put(2, OperandRef::View(moving), Dir::Read);
            }
            InstrData::Match8 {
                dst,
                data,
                vals,
                imm,
                idx,
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(data), Dir::Read);
                o.put(2, OperandRef::View(vals), Dir::Read);
                if let Some(x) = imm {
                    o.put(3, OperandRef::Imm(x), Dir::Read);
                }
                if let Some(v) = idx {
                    o.put(4, OperandRef::View(v), Dir::Write);
                }
            }
            InstrData::SelectReduce {
                dst,
                pred,
                on_true,
                on_false,
                acc,
                ..
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(pred), Dir::Read);
                o.put(2, OperandRef::View(on_true), Dir::Read);
                o.src(3, on_false);
                o.acc(acc);
            }
            InstrData::Indirect {
                tile, hbm, index, ..
            } => {
                let spec = ins.opcode.info().operands;
                let dir = |slot: usize| spec.get(slot).map_or(Dir::Read, |s| s.dir);
                o.put(0, OperandRef::View(tile), dir(0));
                o.put(1, OperandRef::Access(hbm), dir(1));
                o.put(2, OperandRef::View(index), Dir::Read);
            }
            InstrData::Gather { dst, data, indices } => {
                o.dst(dst);
                o.put(1, OperandRef::View(data), Dir::Read);
                o.put(2, OperandRef::View(indices), Dir::Read);
            }
            InstrData::DynCopy {
                dst, src, offset, ..
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(src), Dir::Read);
                o.put(2, OperandRef::View(offset), Dir::Read);
            }
            InstrData::Rng { dst, src, prob } => {
                o.dst(dst);
                o.src(1, src);
                o.src(2, prob);
            }
            InstrData::Seed { seed } => o.put(1, OperandRef::View(seed), Dir::Read),
            InstrData::RangeSelect {
                dst,
                on_true,
                bounds,
                acc,
                ..
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(on_true), Dir::Read);
                o.put(2, OperandRef::View(bounds[0]), Dir::Read);
                o.put(3, OperandRef::View(bounds[1]), Dir::Read);
                o.acc(acc);
            }
            InstrData::MatmulMx {
                dst,
                stationary,
                moving,
                scales,
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(stationary), Dir::Read);
                o.put(2, OperandRef::View(moving), Dir::Read);
                o.put(3, OperandRef::View(scales[0]), Dir::Read);
                o.put(4, OperandRef::View(scales[1]), Dir::Read);
            }
            InstrData::QuantizeMx { dst, src, scale } => {
                o.dst(dst);
                o.put(1, OperandRef::View(src), Dir::Read);
                // Written on the partitions of its groups' scales only: the others keep their
                // old value.
                o.put(2, OperandRef::View(scale), Dir::ReadWrite);
            }
            InstrData::Shuffle { dst, src, mask } => {
                o.dst(dst);
                // A partition left unmodified keeps the destination's old value.
                if mask.contains(&super::SHUFFLE_KEEP) {
                    o.put(0, OperandRef::View(dst.view), Dir::ReadWrite);
                }
                o.put(1, OperandRef::View(src), Dir::Read);
            }
            InstrData::LocalGather {
                dst, src, index, ..
            } => {
                o.dst(dst);
                o.put(1, OperandRef::View(src), Dir::Read);
                o.put(2, OperandRef::View(index), Dir::Read);
            }
            InstrData::Nonzero { dst, src, .. } => {
                o.dst(dst);
                o.put(1, OperandRef::View(src), Dir::Read);
            }
            InstrData::TopK { val, idx, src, .. } => {
                o.dst(val);
                o.put(1, OperandRef::View(src), Dir::Read);
                o.put(2, OperandRef::View(idx), Dir::Write);
            }
            InstrData::DmaCompute { dst, srcs } => {
                o.dst(dst);
                for (slot, src) in (1..).zip(srcs) {
                    if let Some(v) = src {
                        o.put(slot, OperandRef::View(v), Dir::Read);
                    }
                }
            }
            // `register_store` writes its tile (slot 0), `register_load` reads it (slot 1).
            InstrData::Register { tile, .. } => {
                if let Some(v) = tile {
                    let spec = ins.opcode.info().operands;
                    match spec.first() {
                        Some(s) if !s.name.is_empty() => o.put(0, OperandRef::View(v), s.dir),
                        Some(_) | None => o.put(1, OperandRef::View(v), Dir::Read),
                    }
                }
            }
        }
        o
    }

    fn put(&mut self, slot: u8, operand: OperandRef, dir: Dir) {
        self.items[usize::from(slot)] = Some(SlotOperand { slot, operand, dir });
    }

    /// Slot 0: the destination, read too when it accumulates.
    fn dst(&mut self, d: Dst) {
        let dir = match d.write {
            Write::Overwrite => Dir::Write,
            Write::Accumulate(_) | Write::Group { .. } => Dir::ReadWrite,
        };
        self.put(0, OperandRef::View(d.view), dir);
    }

    fn src(&mut self, slot: u8, s: Src) {
        match s {
            Src::None => {}
            Src::Tile(v) => self.put(slot, OperandRef::View(v), Dir::Read),
            Src::Imm(x) => self.put(slot, OperandRef::Imm(x), Dir::Read),
        }
    }

    /// Slot 4: the per-partition reduction output.
    fn acc(&mut self, a: Option<AccOut>) {
        if let Some(a) = a {
            self.put(4, OperandRef::View(a.view), Dir::Write);
        }
    }

    /// The operand in `slot`, if the instruction has one there.
    pub fn get(&self, slot: usize) -> Option<SlotOperand> {
        self.items.get(slot).copied().flatten()
    }
}

impl Iterator for Operands {
    type Item = SlotOperand;

    fn next(&mut self) -> Option<SlotOperand> {
        while self.next < MAX_SLOTS {
            let i = self.next;
            // i < MAX_SLOTS
            #[allow(clippy::arithmetic_side_effects)]
            {
                self.next += 1;
            }
            if let Some(o) = self.items[i] {
                return Some(o);
            }
        }
        None
    }
}
