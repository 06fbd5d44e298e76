//! The indirect DMA opcodes on the DMA queues (`indirect_load`, `indirect_store`,
//! `atomic_rmw`): one partition at a time, in partition order, each an ordinary one-partition
//! `load` or `store` of the HBM row its index names (`crate::indirect`), or for `atomic_rmw`
//! a read-modify-write of that row. A scalar-offset DMA (`.ap(..., scalar_offset=)`) is one
//! `load` or `store` of its moved access (`crate::indirect::shifted`).

use nki_lang::{Alu, IndirectMode, Instr, InstrData, MAX_TILE_RANK, Opcode};

use super::EngineState;
use super::dma;
use crate::bind::Bound;
use crate::cpu::{alu, convert};
use crate::indirect::{row_operands, rows};
use crate::operand::{Loc, Operands, Resolved};

/// Runs an indirect DMA. The rows are read from the index column before any is moved, and
/// checked when the interpreter resolved the instruction: a row outside its axis moves nothing
/// here (the run has already stopped with the error).
pub(crate) fn run(e: &mut EngineState, b: &mut Bound<'_, '_, '_>, ins: &Instr, ops: &Operands) {
    if let InstrData::Indirect {
        mode: IndirectMode::Scalar { .. },
        ..
    } = ins.data
    {
        // One transfer, the access moved by its offset (checked by the interpreter too).
        let Ok(moved) = crate::indirect::shifted(b, ins, ops, e.sbuf.bytes()) else {
            return;
        };
        if ins.opcode == Opcode::IndirectLoad {
            dma::load(e, b, &moved);
        } else {
            dma::store(e, b, &moved);
        }
        return;
    }
    let Ok(rows) = rows(b, ins, ops, e.sbuf.bytes()) else {
        return;
    };
    for (k, &row) in rows.rows().iter().enumerate() {
        let one = row_operands(ops, k, row);
        // The op table's three indirect opcodes; the interpreter sends no other here.
        if ins.opcode == Opcode::IndirectLoad {
            dma::load(e, b, &one);
        } else if ins.opcode == Opcode::IndirectStore {
            dma::store(e, b, &one);
        } else {
            atomic_add(e, b, &one);
        }
    }
}

/// The element offsets of an operand's grid (one partition), in row-major order.
fn offsets(r: &Resolved) -> impl Iterator<Item = isize> + '_ {
    let n: usize = r.dims.iter().product();
    (0..n).map(move |mut k| {
        let mut at = r.pattern.base;
        for j in (0..MAX_TILE_RANK).rev() {
            let d = r.dims[j].max(1);
            at = at.saturating_add(r.pattern.strides[j].saturating_mul((k % d) as isize));
            k /= d;
        }
        at
    })
}

/// The bits of element `at` of a `size`-byte dtype in `mem` (little-endian, zero-extended).
fn read(mem: &[u8], size: usize, at: isize) -> u32 {
    let mut word = [0u8; 4];
    let start = usize::try_from(at)
        .unwrap_or(usize::MAX)
        .saturating_mul(size);
    if let Some(bytes) = mem.get(start..start.saturating_add(size)) {
        word[..size].copy_from_slice(bytes);
    }
    u32::from_le_bytes(word)
}

/// `atomic_rmw` with `add` on one row: each element of the HBM access (slot 1) becomes
/// `old + value` in fp32 (`cpu::alu`'s `add`), both sides loaded to fp32 and the sum stored in
/// the tensor's dtype (`cpu::convert`).
fn atomic_add(e: &mut EngineState, b: &mut Bound<'_, '_, '_>, ops: &Operands) {
    let (tile, hbm) = (ops.get(0), ops.get(1));
    let Loc::Hbm(t) = hbm.loc else {
        unreachable!("atomic_rmw updates HBM")
    };
    let values: Vec<f32> = offsets(tile)
        .map(|at| {
            let bits = read(e.sbuf.bytes(), tile.dtype.size() as usize, at);
            convert::to_f32(tile.dtype, bits)
        })
        .collect();
    let size = hbm.dtype.size() as usize;
    let (data, _) = b.hbm_mut(usize::from(t));
    for (at, v) in offsets(hbm).zip(values) {
        let old = convert::to_f32(hbm.dtype, read(data, size, at));
        let new = convert::from_f32(hbm.dtype, alu::eval(Alu::Add, old, v));
        let start = usize::try_from(at)
            .unwrap_or(usize::MAX)
            .saturating_mul(size);
        if let Some(bytes) = data.get_mut(start..start.saturating_add(size)) {
            bytes.copy_from_slice(&new.to_le_bytes()[..size]);
        }
    }
}
