//! The dynamic instruction stream of one launch: every executed instruction (loops expanded)
//! with its loop values, and what it touches — each on-chip operand's tile *instance* (a tile
//! declared in a loop is a new tile in each iteration of it), the buffer that instance rotates
//! onto, and each output it reads or writes.

use core::ops::ControlFlow;
use std::collections::HashMap;

use nki_lang::{Instr, InstrData, LoopKind, MAX_PIDS, OperandRef, Program, VarValues, Write};

use crate::exec::Observer;
use crate::operand::{Loc, Operands};

/// What an access touches.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Place {
    /// A tile instance (an index into [`Recording::instances`]).
    Tile(u32),
    /// An output (its index among the program's outputs).
    Output(u8),
    /// The random number generator of the step's instance (`rand`, `dropout`,
    /// `random_seed` read and advance it): its steps keep their program order.
    Generator,
}

/// One operand's access.
#[derive(Copy, Clone, Debug)]
pub(super) struct Access {
    /// What it touches.
    pub place: Place,
    /// Whether it reads.
    pub reads: bool,
    /// Whether it writes.
    pub writes: bool,
    /// Whether it is part of an accumulation into the place (`+=`, an accumulation group,
    /// including the group's first matmul): accumulations into one place keep their program
    /// order (see the module documentation of `schedule`).
    pub accumulates: bool,
}

/// One tile instance: the tile, and the buffer it rotates onto.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Instance {
    /// The tile (index in the program's tile table).
    pub tile: u16,
    /// The buffer: the instance's ordinal among the tile's instances, modulo the rotation.
    pub buffer: u32,
}

/// One executed instruction.
#[derive(Clone, Debug)]
pub(super) struct Step {
    /// The instruction.
    pub pc: u32,
    /// The index variables' values (program ids, then the open loops' values by depth).
    pub vars: VarValues,
    /// Its accesses (at most one per tile instance or output, reads and writes merged).
    pub accesses: Vec<Access>,
    /// Whether it writes an output or a tile declared outside its innermost loop.
    pub shared_write: bool,
}

/// A launch's dynamic instruction stream (see the module documentation).
#[derive(Clone, Debug, Default)]
pub(super) struct Recording {
    /// The executed instructions, in program order.
    pub steps: Vec<Step>,
    /// The tile instances, by first use.
    pub instances: Vec<Instance>,
}

/// Records a launch's [`Recording`]: an observer that computes nothing.
pub(super) struct Recorder<'p> {
    program: &'p Program<'p>,
    /// Buffers per tile.
    buffers: u32,
    /// The enclosing loops of each instruction, outermost first: `LoopBegin` and kind.
    pub loops: Vec<Vec<(u32, LoopKind)>>,
    /// Instance ids by tile and the variables that name the instance.
    ids: HashMap<(u16, Vec<i64>), u32>,
    /// Instances seen so far per tile.
    per_tile: Vec<u32>,
    /// What was recorded.
    pub recording: Recording,
}

impl<'p> Recorder<'p> {
    /// A recorder of nothing yet, rotating each tile over `buffers` buffers (at least 1).
    pub fn new(program: &'p Program<'p>, buffers: u32) -> Self {
        Recorder {
            program,
            buffers: buffers.max(1),
            loops: enclosing_loops(program),
            ids: HashMap::new(),
            per_tile: vec![0; program.tiles().len()],
            recording: Recording::default(),
        }
    }

    /// The tile operand `slot` of `instr` goes through, and whether it is the destination's
    /// view.
    fn tile_of(&self, instr: &Instr, slot: u8) -> Option<(u16, bool)> {
        let v = instr.operands().into_iter().find_map(|o| match o.operand {
            OperandRef::View(v) if o.slot == slot => Some(v),
            OperandRef::View(_)
            | OperandRef::Access(_)
            | OperandRef::Expr(_)
            | OperandRef::Imm(_) => None,
        })?;
        let on_dst = instr.data.dst().map(|d| d.view) == Some(v);
        let tile = self.program.views().get(v.index())?.tile;
        Some((tile, on_dst))
    }

    /// The instance of `tile` the instruction at `pc` touches with variables `vars`: the
    /// program ids and the values of the loops down to the one that declares the tile.
    fn instance(&mut self, pc: usize, tile: u16, vars: &VarValues) -> u32 {
        let scope = self
            .program
            .tiles()
            .get(usize::from(tile))
            .and_then(|t| t.scope);
        let depth = scope.map_or(0, |s| {
            self.loops
                .get(pc)
                .and_then(|l| l.iter().position(|&(b, _)| b == s))
                .map_or(0, |d| d + 1)
        });
        let key = (tile, vars[..MAX_PIDS + depth].to_vec());
        let instances = &mut self.recording.instances;
        let per_tile = &mut self.per_tile;
        let buffers = self.buffers;
        *self.ids.entry(key).or_insert_with(|| {
            let seen = per_tile.get_mut(usize::from(tile));
            let ordinal = seen.map_or(0, |n| {
                let o = *n;
                *n = n.saturating_add(1);
                o
            });
            instances.push(Instance {
                tile,
                buffer: ordinal % buffers,
            });
            u32::try_from(instances.len() - 1).unwrap_or(u32::MAX)
        })
    }
}

/// The enclosing loops of each instruction of `program` (a loop's `LoopBegin` and `LoopEnd`
/// are outside it).
pub(super) fn enclosing_loops(program: &Program<'_>) -> Vec<Vec<(u32, LoopKind)>> {
    let mut stack: Vec<(u32, LoopKind)> = Vec::new();
    let mut out = Vec::with_capacity(program.instrs().len());
    for (pc, ins) in program.instrs().iter().enumerate() {
        match ins.data {
            InstrData::LoopEnd { .. } => {
                stack.pop();
                out.push(stack.clone());
            }
            InstrData::LoopBegin { kind, .. } => {
                out.push(stack.clone());
                stack.push((u32::try_from(pc).unwrap_or(u32::MAX), kind));
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
            | InstrData::Register { .. } => out.push(stack.clone()),
        }
    }
    out
}

impl Observer for Recorder<'_> {
    fn before(
        &mut self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        vars: &VarValues,
    ) -> ControlFlow<String> {
        let accumulating = instr
            .data
            .accumulation()
            .is_some_and(|w| w != Write::Overwrite);
        let inputs = self.program.input_count();
        let innermost = self.loops.get(pc).and_then(|l| l.last()).map(|l| l.0);
        let mut shared_write = false;
        let mut accesses: Vec<Access> = Vec::new();
        for r in operands.iter() {
            if !r.dir.reads() && !r.dir.writes() {
                continue;
            }
            let (place, accumulates) = match r.loc {
                Loc::Sbuf | Loc::Psum => {
                    let Some((tile, on_dst)) = self.tile_of(instr, r.slot) else {
                        continue;
                    };
                    let id = self.instance(pc, tile, vars);
                    let scope = self
                        .program
                        .tiles()
                        .get(usize::from(tile))
                        .and_then(|t| t.scope);
                    shared_write |= r.dir.writes() && scope != innermost;
                    (Place::Tile(id), (r.slot == 0 || on_dst) && accumulating)
                }
                Loc::Hbm(t) => match usize::from(t).checked_sub(inputs) {
                    Some(o) => (
                        {
                            shared_write |= r.dir.writes();
                            Place::Output(u8::try_from(o).unwrap_or(u8::MAX))
                        },
                        r.slot == 0 && accumulating,
                    ),
                    // Inputs are read-only: nothing orders their reads.
                    None => continue,
                },
                Loc::Expr | Loc::Imm(_) => continue,
            };
            match accesses.iter_mut().find(|a| a.place == place) {
                Some(a) => {
                    a.reads |= r.dir.reads();
                    a.writes |= r.dir.writes();
                    a.accumulates |= accumulates;
                }
                None => accesses.push(Access {
                    place,
                    reads: r.dir.reads(),
                    writes: r.dir.writes(),
                    accumulates,
                }),
            }
        }
        if matches!(instr.data, InstrData::Rng { .. } | InstrData::Seed { .. }) {
            accesses.push(Access {
                place: Place::Generator,
                reads: true,
                writes: true,
                accumulates: false,
            });
        }
        self.recording.steps.push(Step {
            pc: u32::try_from(pc).unwrap_or(u32::MAX),
            vars: *vars,
            accesses,
            shared_write,
        });
        ControlFlow::Continue(())
    }

    fn computes(&self) -> bool {
        false
    }
}
