//! Runs a recorded launch's steps in a given order, each tile instance in a buffer of its own:
//! before a step runs, the buffers of the tile instances it touches are copied into the tiles'
//! places in SBUF and PSUM, and after it, the ones it wrote are copied back. So two instances
//! of a tile (two iterations of the loop that declares it) do not share bytes unless they
//! rotate onto one buffer, as on a device that renames tiles and rotates loop tiles.

use std::collections::HashMap;

use nki_lang::{MAX_PIDS, Memory, target::PARTITIONS};

use super::record::{Place, Recording};
use crate::bind::Bound;
use crate::engines::EngineState;
use crate::engines::rng::RngState;
use crate::exec::execute;
use crate::memory::Psum;

/// The memories at the launch's start: SBUF, PSUM and every output.
pub(super) struct Snapshot {
    pub sbuf: Vec<u8>,
    pub psum: Vec<u8>,
    pub outputs: Vec<Vec<u8>>,
}

impl Snapshot {
    /// The memories of `e` and the outputs of `b` now.
    pub fn take(e: &EngineState, b: &Bound<'_, '_, '_>) -> Snapshot {
        Snapshot {
            sbuf: e.sbuf.bytes().to_vec(),
            psum: e.psum.bytes().to_vec(),
            outputs: b.outputs.iter().map(|o| o.data.to_vec()).collect(),
        }
    }

    /// Puts the memories back.
    pub fn restore(&self, e: &mut EngineState, b: &mut Bound<'_, '_, '_>) {
        e.sbuf.bytes_mut().copy_from_slice(&self.sbuf);
        e.psum.bytes_mut().copy_from_slice(&self.psum);
        for (o, s) in b.outputs.iter_mut().zip(&self.outputs) {
            o.data.copy_from_slice(s);
        }
    }
}

/// Where a tile lives: its memory, partition stride, address within a partition and bytes
/// per partition.
#[derive(Copy, Clone, Debug)]
struct Footprint {
    psum: bool,
    stride: usize,
    addr: usize,
    bytes: usize,
}

/// The bytes of partition `p` of a tile in a memory, and in its buffer.
fn rows(f: Footprint, p: usize) -> (core::ops::Range<usize>, core::ops::Range<usize>) {
    let at = p * f.stride + f.addr;
    (at..at + f.bytes, p * f.bytes..(p + 1) * f.bytes)
}

/// Copies a tile's bytes from a memory into its buffer.
fn save(mem: &[u8], buf: &mut [u8], f: Footprint) {
    for p in 0..PARTITIONS as usize {
        let (m, b) = rows(f, p);
        if let (Some(m), Some(b)) = (mem.get(m), buf.get_mut(b)) {
            b.copy_from_slice(m);
        }
    }
}

/// Copies a tile's buffer into its place in a memory.
fn place(mem: &mut [u8], buf: &[u8], f: Footprint) {
    for p in 0..PARTITIONS as usize {
        let (m, b) = rows(f, p);
        if let (Some(m), Some(b)) = (mem.get_mut(m), buf.get(b)) {
            m.copy_from_slice(b);
        }
    }
}

/// The tiles' places and which buffer each holds now: a tile's buffer stays in its place
/// until another of its buffers, or a tile sharing its bytes, needs the place, and is saved
/// then if it was written (so that a run in program order copies almost nothing).
struct Places<'s> {
    footprints: Vec<Footprint>,
    /// For each tile, the other tiles whose bytes intersect its own.
    overlaps: Vec<Vec<u16>>,
    /// For each tile, the buffer in its place and whether it was written since it was placed.
    resident: Vec<Option<(u32, bool)>>,
    /// The buffers not in their places (and stale copies of those that are).
    held: HashMap<(u16, u32), Vec<u8>>,
    start: &'s Snapshot,
}

impl<'s> Places<'s> {
    fn new(b: &Bound<'_, '_, '_>, sbuf_stride: usize, start: &'s Snapshot) -> Self {
        let footprints: Vec<Footprint> = b
            .program
            .tiles()
            .iter()
            .map(|t| {
                let psum = t.memory == Memory::Psum;
                Footprint {
                    psum,
                    stride: if psum {
                        Psum::PARTITION_STRIDE
                    } else {
                        sbuf_stride
                    },
                    addr: t.addr as usize,
                    bytes: usize::try_from(t.bytes_in_use(&b.syms)).unwrap_or(0),
                }
            })
            .collect();
        let overlaps = footprints
            .iter()
            .enumerate()
            .map(|(i, f)| {
                footprints
                    .iter()
                    .enumerate()
                    .filter(|&(j, g)| {
                        j != i
                            && g.psum == f.psum
                            && g.addr < f.addr + f.bytes
                            && f.addr < g.addr + g.bytes
                    })
                    .map(|(j, _)| u16::try_from(j).unwrap_or(u16::MAX))
                    .collect()
            })
            .collect();
        Places {
            resident: vec![None; footprints.len()],
            footprints,
            overlaps,
            held: HashMap::new(),
            start,
        }
    }

    /// Saves tile `t`'s buffer from its place if it was written, and forgets that it is there.
    fn evict(&mut self, e: &mut EngineState, t: u16) {
        let Some(Some((buffer, dirty))) = self.resident.get(usize::from(t)).copied() else {
            return;
        };
        if dirty {
            let f = self.footprints[usize::from(t)];
            let mem = if f.psum {
                e.psum.bytes()
            } else {
                e.sbuf.bytes()
            };
            let buf = self
                .held
                .entry((t, buffer))
                .or_insert_with(|| vec![0u8; PARTITIONS as usize * f.bytes]);
            save(mem, buf, f);
        }
        self.resident[usize::from(t)] = None;
    }

    /// Puts buffer `buffer` of tile `t` in the tile's place (the tile's bytes at the launch's
    /// start if the buffer is new).
    fn bring(&mut self, e: &mut EngineState, t: u16, buffer: u32) {
        let ti = usize::from(t);
        if matches!(self.resident.get(ti), Some(Some((b, _))) if *b == buffer) {
            return;
        }
        self.evict(e, t);
        for u in self.overlaps[ti].clone() {
            self.evict(e, u);
        }
        let f = self.footprints[ti];
        let (mem, init) = if f.psum {
            (e.psum.bytes_mut(), &self.start.psum)
        } else {
            (e.sbuf.bytes_mut(), &self.start.sbuf)
        };
        let buf = self.held.entry((t, buffer)).or_insert_with(|| {
            let mut v = vec![0u8; PARTITIONS as usize * f.bytes];
            save(init, &mut v, f);
            v
        });
        place(mem, buf, f);
        self.resident[ti] = Some((buffer, false));
    }
}

/// Runs the steps of `rec` in `order` from the memories of `start`, every tile instance in
/// its buffer (`buffers`, by instance; initially the tile's bytes at the launch's start), and
/// returns the outputs. The engines' memories and the bound outputs are left as the run
/// leaves them.
pub(super) fn replay(
    e: &mut EngineState,
    b: &mut Bound<'_, '_, '_>,
    rec: &Recording,
    order: &[u32],
    buffers: &[u32],
    start: &Snapshot,
) -> Vec<Vec<u8>> {
    for (o, s) in b.outputs.iter_mut().zip(&start.outputs) {
        o.data.copy_from_slice(s);
    }
    let p = b.program;
    let sbuf_stride = e.sbuf.partition_stride();
    let mut places = Places::new(b, sbuf_stride, start);
    // Each instance's generator, as program order leaves it between its steps.
    let mut generators: HashMap<[i64; MAX_PIDS], RngState> = HashMap::new();
    for &s in order {
        let step = &rec.steps[s as usize];
        let Some(ins) = p.instrs().get(step.pc as usize) else {
            continue;
        };
        let Some(ops) = crate::operand::resolve(b, ins, &step.vars, sbuf_stride) else {
            continue;
        };
        let tiles = step.accesses.iter().filter_map(|a| match a.place {
            Place::Tile(id) => {
                let tile = rec.instances.get(id as usize).map_or(0, |i| i.tile);
                let buffer = buffers.get(id as usize).copied().unwrap_or(0);
                Some((tile, buffer, a.writes))
            }
            Place::Output(_) | Place::Generator => None,
        });
        for (tile, buffer, _) in tiles.clone() {
            places.bring(e, tile, buffer);
        }
        let mut pids = [0i64; MAX_PIDS];
        pids.copy_from_slice(&step.vars[..MAX_PIDS]);
        let draws = step.accesses.iter().any(|a| a.place == Place::Generator);
        if draws {
            match generators.remove(&pids) {
                Some(g) => e.rng = g,
                None => e.rng.start(instance_index(b, &pids)),
            }
        }
        execute(e, b, ins, &ops, &step.vars);
        if draws {
            generators.insert(pids, e.rng.clone());
        }
        for (tile, buffer, writes) in tiles {
            if writes {
                places.resident[usize::from(tile)] = Some((buffer, true));
            }
        }
    }
    b.outputs.iter().map(|o| o.data.to_vec()).collect()
}

/// The row-major index of the instance with program ids `pids` in the launch grid.
fn instance_index(b: &Bound<'_, '_, '_>, pids: &[i64; MAX_PIDS]) -> usize {
    (0..b.grid.rank()).fold(0usize, |i, a| {
        i.saturating_mul(b.grid.size(a))
            .saturating_add(usize::try_from(pids[a]).unwrap_or(0))
    })
}
