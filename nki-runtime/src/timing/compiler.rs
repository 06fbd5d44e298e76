//! What NKI's compiler does to a program before the device runs it, as the timing model
//! needs it ([`Scheduling::Device`]): each tile in a space of its own, the buffers a loop's
//! tiles rotate over within SBUF's and PSUM's capacity, the PSUM zero fills an accumulation
//! group makes unnecessary, and the instructions a loop repeats with the same operands (hoisted
//! out of it). Each is a static pass over the program, computed once per timed launch.
//!
//! `docs/sources/calibration.md` lists what is documented of these passes; where NKI's
//! behaviour is not documented, `docs/timing.md` gives the choice made here and why.

use nki_lang::{
    Dir, Extent, InstrData, LoopControl, LoopKind, Memory, Opcode, OperandRef, Program,
    SymbolValues, TileDecl, ViewId, Write,
};

use super::params::Params;

/// Which program the model times: the one NKI's compiler would hand the device, or this
/// project's program as allocated and ordered.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scheduling {
    /// What NKI's compiler and the hardware run (the default): every tile has a space of its
    /// own (tiles with disjoint lifetimes that share an address do not wait for each other);
    /// a tile used only within one iteration of an `affine_range` loop rotates over up to
    /// `rotation` buffers, as many as SBUF and the PSUM banks hold beside the program's
    /// tiles; a zero `memset` of a PSUM tile that an accumulation group then writes costs
    /// nothing (the group's first matmul overwrites the bank); each DMA queue triggers its
    /// own transfers in order, in parallel with the other queues.
    Device {
        /// Most buffers per rotating tile (at least 1).
        rotation: u32,
    },
    /// The program as this project allocates and orders it: tiles at one address wait for
    /// each other, one buffer per tile (or `buffers` rotating ones, a what-if whose capacity
    /// is not checked), a memset costs its Vector time, every DMA is triggered from the Sync
    /// engine's one in-order queue.
    ProgramOrder {
        /// Buffers per rotating tile (1: the program as allocated; at most 16).
        buffers: u32,
    },
}

impl Scheduling {
    /// The default rotation degree of [`Scheduling::Device`].
    pub const DEFAULT_ROTATION: u32 = 4;

    /// Most buffers a rotating tile may have.
    pub const MAX_BUFFERS: u32 = 16;
}

impl Default for Scheduling {
    /// [`Scheduling::Device`] with [`Scheduling::DEFAULT_ROTATION`] buffers.
    fn default() -> Self {
        Scheduling::Device {
            rotation: Scheduling::DEFAULT_ROTATION,
        }
    }
}

/// Bytes per partition tile `t` takes in a launch: with the launch's symbols, a tile of blocks
/// counted at launch takes its launch's blocks; without them, every tile its whole size.
fn tile_bytes(t: &TileDecl<'_>, syms: Option<&SymbolValues>) -> u64 {
    match syms {
        Some(s) => t.bytes_in_use(s),
        None => t.bytes_per_partition(),
    }
}

/// Each tile's place in a space where every tile of one memory has bytes of its own, aligned to
/// the space's cells: the byte shift from its address to that place, and each memory's span
/// (SBUF, PSUM). A tile of blocks takes the launch's blocks when `syms` gives them: block `k`
/// keeps its offset `k × block bytes` from the tile's place.
pub(crate) fn renamed_layout(
    program: &Program<'_>,
    syms: Option<&SymbolValues>,
) -> (Vec<i64>, usize, usize) {
    const CELL: usize = 1 << super::regions::RENAMED_BLOCK_SHIFT;
    let (mut sbuf, mut psum) = (0usize, 0usize);
    let shifts = program
        .tiles()
        .iter()
        .map(|t| {
            // Tiles live in SBUF or PSUM (an HBM tile does not exist).
            let end = match t.memory {
                Memory::Psum => &mut psum,
                Memory::Sbuf | Memory::Hbm => &mut sbuf,
            };
            let at = *end;
            let bytes = usize::try_from(tile_bytes(t, syms)).unwrap_or(usize::MAX);
            *end = at.saturating_add(bytes.next_multiple_of(CELL).max(CELL));
            at as i64 - i64::from(t.addr)
        })
        .collect();
    (shifts, sbuf.max(CELL), psum.max(CELL))
}

/// The buffers of each tile under [`Scheduling::Device`]: one more at a time for every
/// rotating tile in turn (all double-buffered before any is triple-buffered), up to
/// `rotation`, while the capacity the program's tiles leave holds it (SBUF bytes per
/// partition, PSUM banks). Within a round, the tiles of the deepest loops come first (the
/// overlap of a loop's iterations matters most where they are shortest), smaller before
/// larger at one depth. With the launch's symbols, a tile of blocks counted at launch takes
/// its launch's blocks, packed after the other tiles (as NKI, tracing the launch's shapes,
/// allocates it), not the capacity the program reserves.
pub(crate) fn rotation_degrees(
    program: &Program<'_>,
    scopes: &[Option<usize>],
    rotation: u32,
    p: &Params,
    syms: Option<&SymbolValues>,
) -> Vec<u32> {
    let bank = u64::from(p.psum_bank_bytes.max(1));
    let tiles = program.tiles();
    // A tile's size and the end of its place, in bytes (SBUF) or banks (PSUM).
    let size = |t: &TileDecl<'_>| match t.memory {
        Memory::Sbuf | Memory::Hbm => tile_bytes(t, syms),
        Memory::Psum => t.bytes_per_partition().div_ceil(bank).max(1),
    };
    let end = |t: &TileDecl<'_>| match t.memory {
        Memory::Sbuf | Memory::Hbm => u64::from(t.addr).saturating_add(size(t)),
        Memory::Psum => (u64::from(t.addr) / bank).saturating_add(size(t)),
    };
    let counted = |t: &TileDecl<'_>| syms.is_some() && t.blocks.is_some();
    let mut free = [Memory::Sbuf, Memory::Psum].map(|memory| {
        let cap = match memory {
            Memory::Sbuf | Memory::Hbm => u64::from(p.sbuf_partition_bytes),
            Memory::Psum => u64::from(p.psum_banks),
        };
        let extent = tiles
            .iter()
            .filter(|t| t.memory == memory && !counted(t))
            .map(end)
            .max()
            .unwrap_or(0);
        // The launch's blocks, 64-byte aligned, after the other tiles.
        let blocks = tiles
            .iter()
            .filter(|t| t.memory == memory && counted(t))
            .fold(0u64, |n, t| n.saturating_add(size(t).next_multiple_of(64)));
        if blocks == 0 {
            return cap.saturating_sub(extent);
        }
        cap.saturating_sub(extent.next_multiple_of(64).saturating_add(blocks))
    });
    let mut order: Vec<usize> = (0..tiles.len())
        .filter(|&t| scopes[t].is_some() && tiles[t].memory != Memory::Hbm)
        .collect();
    order.sort_by_key(|&t| (core::cmp::Reverse(scopes[t]), size(&tiles[t]), t));
    let most = rotation.clamp(1, Scheduling::MAX_BUFFERS);
    let mut degree = vec![1u32; tiles.len()];
    // One more buffer for each tile in turn: every tile double-buffered before any is
    // triple-buffered.
    for d in 2..=most {
        for &t in &order {
            let n = size(&tiles[t]).max(1);
            let left = &mut free[usize::from(tiles[t].memory == Memory::Psum)];
            if degree[t] == d - 1 && *left >= n {
                *left -= n;
                degree[t] = d;
            }
        }
    }
    degree
}

/// The instructions (by pc) the device does not run: a zero `memset` of a PSUM tile whose next
/// use in program order is an accumulation into it by TensorE (the accumulation group's first
/// matmul overwrites instead).
pub(crate) fn folded_memsets(program: &Program<'_>) -> Vec<bool> {
    let instrs = program.instrs();
    let views = program.views();
    let tiles = program.tiles();
    let tile_of = |v: ViewId| views.get(v.index()).map(|v| v.tile as usize);
    instrs
        .iter()
        .enumerate()
        .map(|(pc, ins)| {
            let InstrData::Fill { dst, value, .. } = ins.data else {
                return false;
            };
            let Some(t) = tile_of(dst.view) else {
                return false;
            };
            if ins.opcode != Opcode::Memset
                || value.as_f32() != 0.0
                || tiles.get(t).is_none_or(|d| d.memory != Memory::Psum)
            {
                return false;
            }
            let next = instrs[pc + 1..].iter().find(|i| {
                i.operands()
                    .filter_map(|o| o.view())
                    .any(|v| tile_of(v) == Some(t))
            });
            next.is_some_and(|i| {
                i.opcode == Opcode::Matmul
                    && i.data.dst().is_some_and(|d| {
                        tile_of(d.view) == Some(t) && !matches!(d.write, Write::Overwrite)
                    })
            })
        })
        .collect()
}

/// Whether the tiles of a loop's body may rotate across its iterations: those of an
/// `affine_range` or `sequential_range` loop (a tile whose first use in an iteration is a
/// plain write carries nothing from the previous one, whatever the loop carries elsewhere).
const fn rotating_loop(kind: LoopKind) -> bool {
    match kind {
        LoopKind::Affine | LoopKind::Sequential => true,
        // A device loop's body is allocated once and reused by every iteration (NKI's
        // dynamic loops guide): its tiles do not rotate.
        LoopKind::Dynamic { .. } | LoopKind::While { .. } => false,
    }
}

/// For each tile of `program`, the variables that identify its iteration when its buffers
/// rotate: the innermost rotating loop ([`rotating_loop`]) among the loops common to all its
/// uses (or the launch grid's instance, outside every loop). A tile whose first use is not a
/// plain write (it may carry a value between iterations) never rotates.
pub(crate) fn rotation_scopes(program: &Program<'_>) -> Vec<Option<usize>> {
    let tiles = program.tiles().len();
    let views = program.views();
    // Per tile: the loop stack at its first use, how much of it every use shares, and
    // whether the first use is a plain write.
    type FirstUse = (Vec<(u32, LoopKind)>, usize, bool);
    let mut first: Vec<Option<FirstUse>> = vec![None; tiles];
    let mut stack: Vec<(u32, LoopKind)> = Vec::new();
    for (pc, ins) in program.instrs().iter().enumerate() {
        match ins.data {
            InstrData::LoopBegin { kind, .. } => stack.push((pc as u32, kind)),
            InstrData::LoopEnd { .. } => {
                stack.pop();
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
                for o in ins.operands() {
                    let v = match o.operand {
                        OperandRef::View(v) => v,
                        OperandRef::Access(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => {
                            continue;
                        }
                    };
                    let Some(t) = views.get(v.index()).map(|v| v.tile as usize) else {
                        continue;
                    };
                    let Some(entry) = first.get_mut(t) else {
                        continue;
                    };
                    match entry {
                        None => *entry = Some((stack.clone(), stack.len(), o.dir == Dir::Write)),
                        Some((s0, common, _)) => {
                            let shared = s0
                                .iter()
                                .zip(&stack)
                                .take(*common)
                                .take_while(|(a, b)| a.0 == b.0)
                                .count();
                            *common = shared;
                        }
                    }
                }
            }
        }
    }
    first
        .into_iter()
        .map(|f| {
            let (s0, common, plain) = f?;
            if !plain {
                return None;
            }
            // The innermost rotating loop among the common ones; the instance if none.
            let j = (0..common)
                .rev()
                .find(|&d| rotating_loop(s0[d].1))
                .map_or(0, |d| d + 1);
            Some(j)
        })
        .collect()
}

/// For each instruction (by pc), the depth of the outermost loop it is hoisted out of, if any:
/// a compute instruction (not a DMA, not `rand` or `dropout`) whose operands are the same in every iteration of its
/// innermost loop — no view offset or mask uses that loop's index, no operand is a grid
/// expression, it overwrites its destination, and no other instruction in the loop's body
/// writes a tile it reads or its destination — moves out of that loop, and out of each
/// enclosing loop where the same holds, as a compiler's loop-invariant code motion moves it.
/// It runs once per entry into the outermost loop it leaves (one of the loops it leaves must
/// repeat); the other iterations read its one result. A hoisted instruction's destination
/// does not rotate.
pub(crate) fn hoisted_instructions(program: &Program<'_>) -> Vec<Option<usize>> {
    let instrs = program.instrs();
    let views = program.views();
    let masks = program.masks();
    let tile_of = |v: ViewId| views.get(v.index()).map(|v| v.tile as usize);
    let mut out = vec![None; instrs.len()];
    // The tiles an instruction writes, each once.
    let written = |ins: &nki_lang::Instr| {
        let mut tiles: Vec<usize> = ins
            .operands()
            .filter(|o| o.dir.writes())
            .filter_map(|o| match o.operand {
                OperandRef::View(v) => tile_of(v),
                OperandRef::Access(_) | OperandRef::Expr(_) | OperandRef::Imm(_) => None,
            })
            .collect();
        tiles.sort_unstable();
        tiles.dedup();
        tiles
    };
    // The loop stack: depth, more than one iteration, and how many instructions of the body
    // write each tile (counted once per loop, not per instruction of it).
    let mut stack: Vec<(usize, bool, Vec<u32>)> = Vec::new();
    for (pc, ins) in instrs.iter().enumerate() {
        match ins.data.loop_control() {
            Some(LoopControl::Begin { trip, end }) => {
                // A device loop's static trip is 1, but it may run any number of times.
                let device =
                    matches!(ins.data, InstrData::LoopBegin { kind, .. } if kind.is_device());
                let many = device
                    || match trip {
                        Extent::Fixed(n) => n > 1,
                        Extent::Sym { .. } => true,
                    };
                let mut writers = vec![0u32; program.tiles().len()];
                for other in &instrs[pc + 1..end as usize] {
                    for t in written(other) {
                        if let Some(n) = writers.get_mut(t) {
                            *n += 1;
                        }
                    }
                }
                stack.push((stack.len(), many, writers));
                continue;
            }
            Some(LoopControl::End) => {
                stack.pop();
                continue;
            }
            None => {}
        }
        // A DMA stays; so does a draw from the generator (each call draws new numbers).
        if stack.is_empty() || matches!(ins.data, InstrData::Dma { .. } | InstrData::Rng { .. }) {
            continue;
        }
        let Some(dst) = ins.data.dst() else { continue };
        if !matches!(dst.write, Write::Overwrite) {
            continue;
        }
        let Some(own) = tile_of(dst.view) else {
            continue;
        };
        // Whether the instruction's operands are the same in every iteration of the loop at
        // `depth`, and no other instruction of that loop's body writes what it reads or its
        // destination.
        let invariant_in = |depth: usize, writers: &[u32]| {
            let mask = ins.mask.and_then(|m| masks.get(m.index())).is_none_or(|m| {
                m.terms[..usize::from(m.len)]
                    .iter()
                    .all(|t| t.offset.loop_coef(depth) == 0)
            });
            let count = |t: usize| writers.get(t).copied().unwrap_or(0);
            mask && count(own) <= 1
                && ins.operands().all(|o| match o.operand {
                    OperandRef::View(v) => views.get(v.index()).is_some_and(|view| {
                        view.offset.loop_coef(depth) == 0
                            && view.part_var.loop_coef(depth) == 0
                            && (o.dir == Dir::Write || count(view.tile as usize) == 0)
                    }),
                    OperandRef::Imm(_) => true,
                    OperandRef::Access(_) | OperandRef::Expr(_) => false,
                })
        };
        // Out of the innermost loop, then out of each enclosing one while it stays invariant
        // there, as loop-invariant code motion moves it: it runs once per entry into the
        // outermost of those loops. Only worth it when one of them repeats.
        let mut hoisted = None;
        let mut repeats = false;
        for (depth, many, writers) in stack.iter().rev() {
            if !invariant_in(*depth, writers) {
                break;
            }
            repeats |= *many;
            hoisted = Some(*depth);
        }
        if repeats {
            out[pc] = hoisted;
        }
    }
    out
}

/// Partition broadcasts whose readers the compiler lets read PSUM: for each tile, the PSUM
/// tile it stands for, and for each instruction (by pc) whether the device skips it (the copy
/// out of PSUM it no longer needs).
pub(crate) struct PsumReads {
    /// By tile: the PSUM tile an SBUF tile's readers read instead.
    pub alias: Vec<Option<u16>>,
    /// By pc: the copies out of PSUM the device does not run.
    pub folded: Vec<bool>,
    /// By pc: the instructions that read an SBUF tile of `alias` (they read PSUM instead).
    pub readers: Vec<bool>,
}

/// The partition broadcasts (`broadcast_to` of a `[1, F]` tile) that fit one PSUM bank: NKI's
/// compiler computes such a broadcast on TensorE (a matmul contracting one partition into
/// PSUM) and may leave its result in PSUM ("a new tile ... in SBUF, but can be also assigned
/// to a PSUM tensor", `nl.broadcast_to`), so its Vector and Scalar readers read the bank and
/// no copy to SBUF runs. This project's lowering writes the copy; the device's program has
/// none. The pattern, exactly: a PSUM tile of at most one bank per partition, written by one
/// matmul whose stationary operand has one partition and read whole by one `tensor_copy` into
/// an SBUF tile of the same shape that nothing else writes; every other use of that SBUF tile
/// is a read by a Vector or Scalar instruction after the copy in the same loop body, with no
/// other operand in PSUM (an engine reads at most one PSUM input). A broadcast wider than one
/// bank (several matmuls) stays in SBUF.
pub(crate) fn psum_broadcasts(program: &Program<'_>, p: &Params) -> PsumReads {
    let instrs = program.instrs();
    let views = program.views();
    let tiles = program.tiles();
    let view = |v: ViewId| views.get(v.index());
    let tile_of = |v: ViewId| view(v).map(|v| v.tile as usize);
    let mut out = PsumReads {
        alias: vec![None; tiles.len()],
        folded: vec![false; instrs.len()],
        readers: vec![false; instrs.len()],
    };
    // Per tile: the pcs that use it, and the innermost loop (its LoopBegin pc) of each use.
    let mut uses: Vec<Vec<(usize, Option<usize>)>> = vec![Vec::new(); tiles.len()];
    let mut stack: Vec<usize> = Vec::new();
    for (pc, ins) in instrs.iter().enumerate() {
        match ins.data.loop_control() {
            Some(LoopControl::Begin { .. }) => {
                stack.push(pc);
                continue;
            }
            Some(LoopControl::End) => {
                stack.pop();
                continue;
            }
            None => {}
        }
        for o in ins.operands() {
            if let Some(t) = o.view().and_then(tile_of)
                && let Some(u) = uses.get_mut(t)
                && u.last().is_none_or(|&(last, _)| last != pc)
            {
                u.push((pc, stack.last().copied()));
            }
        }
    }
    let whole = |v: ViewId| {
        view(v).is_some_and(|v| {
            tiles.get(v.tile as usize).is_some_and(|t| {
                v.part_start == 0
                    && v.part_var == nki_lang::Affine::ZERO
                    && v.shape == t.shape
                    && v.offset == nki_lang::Affine::ZERO
                    && v.is_row_major()
            })
        })
    };
    let bank = u64::from(p.psum_bank_bytes);
    for (pc, ins) in instrs.iter().enumerate() {
        let InstrData::Unary { dst, src } = ins.data else {
            continue;
        };
        let (Some(s), Some(ps)) = (tile_of(dst.view), tile_of(src)) else {
            continue;
        };
        let (Some(sd), Some(pd)) = (tiles.get(s), tiles.get(ps)) else {
            continue;
        };
        if ins.opcode != Opcode::TensorCopy
            || ins.mask.is_some()
            || !matches!(dst.write, Write::Overwrite)
            || sd.memory != Memory::Sbuf
            || pd.memory != Memory::Psum
            || pd.bytes_per_partition() > bank
            || sd.shape != pd.shape
            || !whole(dst.view)
            || !whole(src)
        {
            continue;
        }
        // The PSUM tile: one matmul of one partition (a broadcast), then this copy.
        let psum_uses = &uses[ps];
        let [(mm_pc, _), (copy_pc, _)] = psum_uses[..] else {
            continue;
        };
        let broadcast = instrs.get(mm_pc).is_some_and(|m| match m.data {
            InstrData::Matmul {
                dst, stationary, ..
            } => {
                m.mask.is_none()
                    && matches!(dst.write, Write::Overwrite)
                    && tile_of(dst.view) == Some(ps)
                    && view(stationary).is_some_and(|v| v.shape.partitions() == 1)
            }
            InstrData::LoopBegin { .. }
            | InstrData::LoopEnd { .. }
            | InstrData::Dma { .. }
            | InstrData::Unary { .. }
            | InstrData::Fill { .. }
            | InstrData::Iota { .. }
            | InstrData::Alu { .. }
            | InstrData::Act { .. }
            | InstrData::Act2 { .. }
            | InstrData::Reduce { .. }
            | InstrData::Scan { .. }
            | InstrData::Select { .. }
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
            | InstrData::Register { .. } => false,
        });
        if copy_pc != pc || !broadcast {
            continue;
        }
        // The SBUF tile: this copy, then reads by Vector or Scalar in the same loop body.
        let sbuf_uses = &uses[s];
        let Some(&(first, body)) = sbuf_uses.first() else {
            continue;
        };
        let readers_ok = first == pc
            && sbuf_uses[1..].iter().all(|&(r, loop_of)| {
                let Some(reader) = instrs.get(r) else {
                    return false;
                };
                let engine_reads_psum = match reader.engine {
                    nki_lang::Engine::Vector | nki_lang::Engine::Scalar => true,
                    nki_lang::Engine::Tensor
                    | nki_lang::Engine::GpSimd
                    | nki_lang::Engine::Dma
                    | nki_lang::Engine::Sync => false,
                };
                let mut reads_it = false;
                let mut other_psum = false;
                for o in reader.operands() {
                    let t = o.view().and_then(tile_of);
                    if t == Some(s) {
                        reads_it |= o.dir == Dir::Read;
                        if o.dir != Dir::Read {
                            return false;
                        }
                    } else if t
                        .and_then(|t| tiles.get(t))
                        .is_some_and(|d| d.memory == Memory::Psum)
                    {
                        other_psum = true;
                    }
                }
                engine_reads_psum
                    && reads_it
                    && !other_psum
                    && loop_of == body
                    && !matches!(reader.data, InstrData::Dma { .. })
            });
        if readers_ok
            && sbuf_uses.len() > 1
            && let Ok(psum) = u16::try_from(ps)
        {
            out.alias[s] = Some(psum);
            out.folded[pc] = true;
            for &(r, _) in &sbuf_uses[1..] {
                out.readers[r] = true;
            }
        }
    }
    out
}
