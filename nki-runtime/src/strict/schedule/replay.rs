//! Runs a recorded launch's steps in a given order, each tile instance in a buffer of its own:
//! before a step runs, the buffers of the tile instances it touches are copied into the tiles'
//! places in SBUF and PSUM, and after it, the ones it wrote are copied back. So two instances
//! of a tile (two iterations of the loop that declares it) do not share bytes unless they
//! rotate onto one buffer, as on a device that renames tiles and rotates loop tiles.

use std::collections::HashMap;

use nki_lang::{Memory, target::PARTITIONS};

use super::record::{Place, Recording};
use crate::bind::Bound;
use crate::engines::EngineState;
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

/// Runs the steps of `rec` in `order` from the memories of `start`, every tile instance in
/// its buffer (`buffers`, by instance; initially the tile's bytes at the launch's start), and
/// returns the outputs.
/// The engines' memories and the bound outputs are left as the run leaves them.
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
    let footprints: Vec<Footprint> = p
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
                bytes: usize::try_from(t.bytes_per_partition()).unwrap_or(0),
            }
        })
        .collect();
    let mut held: HashMap<(u16, u32), Vec<u8>> = HashMap::new();
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
                Some((
                    tile,
                    buffers.get(id as usize).copied().unwrap_or(0),
                    a.writes,
                ))
            }
            Place::Output(_) => None,
        });
        for (tile, buffer, _) in tiles.clone() {
            let f = footprints[usize::from(tile)];
            let (mem, init) = if f.psum {
                (e.psum.bytes_mut(), &start.psum)
            } else {
                (e.sbuf.bytes_mut(), &start.sbuf)
            };
            let buf = held.entry((tile, buffer)).or_insert_with(|| {
                let mut v = vec![0u8; PARTITIONS as usize * f.bytes];
                save(init, &mut v, f);
                v
            });
            place(mem, buf, f);
        }
        execute(e, b, ins, &ops, &step.vars);
        for (tile, buffer, writes) in tiles {
            if !writes {
                continue;
            }
            let f = footprints[usize::from(tile)];
            let mem = if f.psum {
                e.psum.bytes_mut()
            } else {
                e.sbuf.bytes_mut()
            };
            if let Some(buf) = held.get_mut(&(tile, buffer)) {
                save(mem, buf, f);
            }
        }
    }
    b.outputs.iter().map(|o| o.data.to_vec()).collect()
}
