//! What a plain run does in one step where a program spells out several instructions: data
//! that would only pass through SBUF on its way between two neighbouring instructions goes
//! straight from one to the other.
//!
//! - **A load into a matmul.** A `load` whose tile no instruction but the matmul right after
//!   it (or after one more load) reads does not run: the matmul packs that operand straight
//!   from the input tensor ([`forward_load`]). The tiled matmul's two loads per step and the
//!   seed's two loads become reads of HBM by the matmul's packing, instead of a copy into
//!   SBUF and a second pass over it.
//! - **A matmul into a copy.** A `tensor_copy` of a matmul's whole PSUM result right after it
//!   runs as part of the matmul ([`fused_copy`]): each block of results is converted while it
//!   is still in the host's L1 cache, instead of in a second pass over PSUM.
//! - **A matmul's copy into a store.** When the `store` after such a copy is the only reader
//!   of the copy's tile, the matmul converts its results straight into the output tensor
//!   ([`forward_store`]), as the seed kernel's last three instructions do.
//! - **A load into a store.** A tile loaded from an input only for the `store` after it moves
//!   straight from the input tensor to the output, converted once as the load converts
//!   (`data_movement`'s copy kernels).
//! - **A copy into a store.** Likewise a `tensor_copy` whose tile only the next store reads,
//!   on any engine but ScalarE (whose copies go through f32 lanes, not one conversion): from
//!   the copy's source (the tiled matmul's PSUM result) straight to the output.
//!
//! All give the results of the instructions one after the other, bit for bit: the matmul packs
//! both operands before it computes, so neither its operands' source nor the copy's writes can
//! change what it reads. What differs is only what SBUF holds afterwards: the tile of a
//! forwarded load or copy keeps its old contents, which no instruction reads (a strict core, or
//! any observed run, runs every instruction as written).

use nki_lang::{Engine, Instr, InstrData, Opcode, VarValues, Write};

use crate::bind::Bound;
use crate::engines::access::may_share_bytes;
use crate::engines::tensor::{CopyTo, HbmOperand};
use crate::engines::{EngineState, dma, tensor};
use crate::host::input_tiles::InputTiles;
use crate::host::readers::{Readers, tile_of};
use crate::operand::{self, Loc, Operands, Resolved};

/// A load the matmul at `consumer` takes over: it reads its operand `slot` from the input
/// tensor instead of the tile the skipped load would have filled.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Forward<'i> {
    /// The matmul's instruction index.
    consumer: usize,
    /// The matmul's operand slot: 1 (stationary) or 2 (moving).
    slot: u8,
    /// The operand as the matmul reads it from the input tensor.
    operand: HbmOperand<'i>,
}

impl<'i> Forward<'i> {
    /// The operand slot (1 stationary, 2 moving) and the operand read from the input, when the
    /// load goes to the matmul at `pc`.
    pub(crate) fn to(self, pc: usize) -> Option<(u8, HbmOperand<'i>)> {
        (self.consumer == pc).then_some((self.slot, self.operand))
    }
}

/// The loads skipped for the matmul ahead (at most its two operands).
pub(crate) type Pending<'i> = [Option<Forward<'i>>; 2];

/// Runs `ins` (at `pc`, operands `ops`) in one step with what follows it, if it starts such a
/// step: a forwarded load is set aside in `pending`, a matmul takes the loads forwarded to it
/// and the copy after it. Returns how many instructions after `ins` the step also ran (so 0
/// for a load or a lone matmul); `None` when `ins` is to run on its own.
#[allow(clippy::too_many_arguments)]
pub(crate) fn step<'i>(
    e: &mut EngineState,
    b: &mut Bound<'i, '_, '_>,
    readers: &Readers,
    ins: &Instr,
    ops: &Operands,
    (pc, stop): (usize, usize),
    vars: &VarValues,
    pending: &mut Pending<'i>,
    inputs: &InputTiles,
) -> Option<usize> {
    match (ins.opcode, ins.data) {
        (Opcode::Load, _) => {
            if let Some(fw) = forward_load(e, b, readers, ins, ops, (pc, stop), vars) {
                let free = pending.iter_mut().find(|p| p.is_none())?;
                *free = Some(fw);
                return Some(0);
            }
            // A tile loaded only to be stored: straight from the input to the output.
            let from = ops.get(1);
            let Loc::Hbm(t_in) = from.loc else {
                return None;
            };
            let input = b.inputs.get(usize::from(t_in))?.data;
            let (t, to) = forward_store(e, b, readers, ops, (pc, stop), vars)?;
            dma::store_straight(e, from, Some(input), b.hbm_mut(usize::from(t)).0, &to);
            Some(1)
        }
        (Opcode::Matmul, InstrData::Matmul { dst, .. }) => {
            let taken = core::mem::take(pending);
            // Operands of tiles whose loads were skipped (`Plain` had the loads run for those
            // that do not map).
            let mut from_hbm = inputs.matmul_operands(b, ins, ops).unwrap_or([None; 2]);
            for fw in taken.into_iter().flatten().filter(|f| f.consumer == pc) {
                from_hbm[usize::from(fw.slot - 1)] = Some(fw.operand);
            }
            let copy = fused_copy(e, b, ins, ops, (pc, stop), vars);
            let store = copy
                .as_ref()
                .and_then(|c| forward_store(e, b, readers, c, (pc + 1, stop), vars));
            let accumulate = dst.write.accumulates_at(vars);
            let to = match (&copy, store) {
                (Some(_), Some((t, hbm))) => Some(CopyTo::Hbm(b.hbm_mut(usize::from(t)).0, hbm)),
                (Some(c), None) => Some(CopyTo::Sbuf(*c.get(0))),
                (None, _) => None,
            };
            tensor::matmul(e, ops, accumulate, to, from_hbm);
            Some(usize::from(copy.is_some()) + usize::from(store.is_some()))
        }
        (Opcode::TensorCopy, InstrData::Unary { dst, .. })
            if ins.engine != Engine::Scalar && dst.write == Write::Overwrite =>
        {
            // A copy only to be stored: straight from its source to the output.
            let (t, to) = forward_store(e, b, readers, ops, (pc, stop), vars)?;
            dma::store_straight(e, ops.get(1), None, b.hbm_mut(usize::from(t)).0, &to);
            Some(1)
        }
        _ => None,
    }
}

/// The operand a load (`ins` at `pc`, operands `ops`) hands straight to the matmul after it
/// (the next instruction, or the one after a load of another tile that writes none of this
/// one's bytes, before `stop`), when:
/// - the load reads an input tensor of the tile's dtype, with the same dimensions, its free
///   elements contiguous on both sides (each partition one run of the tensor);
/// - the matmul reads exactly the loaded elements, through a view of the same tile, as one of
///   its operands;
/// - no other instruction of the program reads the tile.
///
/// Then the tile's contents matter to that matmul alone, which finds them in the tensor.
pub(crate) fn forward_load<'i>(
    e: &EngineState,
    b: &Bound<'i, '_, '_>,
    readers: &Readers,
    ins: &Instr,
    ops: &Operands,
    (pc, stop): (usize, usize),
    vars: &VarValues,
) -> Option<Forward<'i>> {
    let p = b.program;
    let InstrData::Dma { tile: view, .. } = ins.data else {
        return None;
    };
    let tile = tile_of(p, view)?;
    let (dst, hbm) = (ops.get(0), ops.get(1));
    let Loc::Hbm(t) = hbm.loc else {
        return None;
    };
    let input = b.inputs.get(usize::from(t))?;
    let (data, version) = (input.data, input.version);
    let shaped = hbm.dtype == dst.dtype
        && hbm.dims == dst.dims
        && hbm.pattern.base >= 0
        && hbm.pattern.strides[0] > 0
        && tensor::free_contiguous(&hbm.dims, &hbm.pattern)
        && tensor::free_contiguous(&dst.dims, &dst.pattern);
    if !shaped {
        return None;
    }
    let instrs = p.instrs();
    let stride = e.sbuf.partition_stride();
    // The matmul: next, or after one load of another tile that leaves this one's bytes alone.
    let mut at = pc.checked_add(1)?;
    if let Some(load) = instrs.get(at).filter(|i| i.opcode == Opcode::Load) {
        let InstrData::Dma { tile: v, .. } = load.data else {
            return None;
        };
        let writes = operand::resolve(b, load, vars, stride).map(|o| *o.get(0));
        if tile_of(p, v) == Some(tile) || writes.is_some_and(|w| may_share_bytes(&w, dst, stride)) {
            return None;
        }
        at = at.checked_add(1)?;
    }
    let mm = instrs
        .get(at)
        .filter(|i| i.opcode == Opcode::Matmul && at < stop)?;
    let InstrData::Matmul {
        stationary, moving, ..
    } = mm.data
    else {
        return None;
    };
    if !readers.only(tile, at) {
        return None;
    }
    // The operand the matmul reads through a view of this tile, of exactly the loaded elements.
    let mops = operand::resolve(b, mm, vars, stride)?;
    let mut slots = [(1u8, stationary), (2, moving)]
        .into_iter()
        .filter(|&(s, v)| {
            tile_of(p, v) == Some(tile) && mops.get(usize::from(s)).same_elements(dst)
        })
        .map(|(s, _)| s);
    let slot = slots.next()?;
    if slots.next().is_some() {
        return None;
    }
    Some(Forward {
        consumer: at,
        slot,
        operand: HbmOperand {
            data,
            version,
            hbm: *hbm,
        },
    })
}

/// The output tensor and HBM side of the `store` right after a fused copy or a load (operands
/// `copy`, at `pc`, before `stop`) that it can write straight into, when:
/// - the store writes exactly the elements the copy or load wrote, through a view of the same
///   tile, into an output tensor of their dtype, with the same dimensions, each partition one
///   contiguous run of the tensor, rows in increasing order and apart;
/// - no other instruction of the program reads that tile.
fn forward_store(
    e: &EngineState,
    b: &Bound<'_, '_, '_>,
    readers: &Readers,
    copy: &Operands,
    (pc, stop): (usize, usize),
    vars: &VarValues,
) -> Option<(u8, Resolved)> {
    let p = b.program;
    let at = pc.checked_add(1).filter(|&at| at < stop)?;
    let store = p.instrs().get(at).filter(|i| i.opcode == Opcode::Store)?;
    let InstrData::Dma { tile: view, .. } = store.data else {
        return None;
    };
    let tile = tile_of(p, view)?;
    let written = match p.instrs().get(pc).map(|i| i.data) {
        Some(InstrData::Unary { dst, .. }) => dst.view,
        Some(InstrData::Dma { tile, .. }) => tile,
        _ => return None,
    };
    if tile_of(p, written)? != tile || !readers.only(tile, at) {
        return None;
    }
    let sops = operand::resolve(b, store, vars, e.sbuf.partition_stride())?;
    let (from, to) = (sops.get(0), sops.get(1));
    let Loc::Hbm(t) = to.loc else {
        return None;
    };
    let row: usize = to.dims[1..].iter().product();
    let fits = from.same_elements(copy.get(0))
        && usize::from(t) >= b.inputs.len()
        && to.dtype == from.dtype
        && to.dims == from.dims
        && to.pattern.base >= 0
        && usize::try_from(to.pattern.strides[0]).is_ok_and(|s| s >= row.max(1))
        && tensor::free_contiguous(&to.dims, &to.pattern);
    fits.then_some((t, *to))
}

/// The operands of the `tensor_copy` right after the matmul `ins` (at `pc`, before `stop`) when
/// it can run as part of the matmul: it overwrites its destination with the matmul's whole
/// result, converted to bf16 or f32 ([`tensor::copy_fuses`]). Both instructions run with the
/// same loop values, and the matmul packs both operands before it computes, so the copy's
/// writes cannot change what the matmul reads, even where the copy's tile takes the place of
/// an operand that dies with the matmul (as the allocator arranges in the seed kernel).
pub(crate) fn fused_copy(
    e: &EngineState,
    b: &Bound<'_, '_, '_>,
    ins: &Instr,
    ops: &Operands,
    (pc, stop): (usize, usize),
    vars: &VarValues,
) -> Option<Operands> {
    if ins.opcode != Opcode::Matmul || pc.checked_add(1)? >= stop {
        return None;
    }
    let next = b.program.instrs().get(pc + 1)?;
    let InstrData::Unary { dst, .. } = next.data else {
        return None;
    };
    if next.opcode != Opcode::TensorCopy || dst.write != Write::Overwrite {
        return None;
    }
    let copy = operand::resolve(b, next, vars, e.sbuf.partition_stride())?;
    tensor::copy_fuses(e, ops, &copy).then_some(copy)
}
