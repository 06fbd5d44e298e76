//! A tile loaded once from an input tensor and read only by matmuls: the load does not run,
//! and the matmuls read the input where it lies.
//!
//! The NKI Library's MoE router loads `x` (2 MiB) and `w` (512 KiB) whole into SBUF, through
//! views that permute their rows, and reads them as 64 matmuls' `[128, 128]` operands. Copying
//! them into SBUF costs a pass over both every launch, and while the host's two cores are far
//! apart a matmul split between them reads the other core's half of the tile from its cache;
//! read from the inputs (which nothing writes while the kernel runs), each thread packs its own
//! copy of every operand, as for the loads a matmul takes over (`fuse`), and the chains of
//! matmuls split even then.
//!
//! A load is skipped when ([`crate::host::readers::Readers::loaded_once`]) it is the only
//! instruction of the program that writes its tile, outside every loop (so it runs once per
//! instance, before its readers), and every instruction that reads the tile is a matmul outside
//! every loop after it, and when it copies an input within one dtype and shape. Between the load
//! and its last reader, no other tile lives in its bytes (the allocator's live ranges), so each
//! element of the tile holds what the load put there whenever a reader reads it: a matmul reads
//! the input's element instead, where its operand maps onto the load's elements
//! ([`in_input`]). One that does not map (nor any reader on a path that does not look) has the
//! load run first, with the operands it had, and reads the tile as written: the same values.
//! SBUF keeps its old contents in a skipped tile, as for the other shortcuts of plain runs; a
//! strict core runs every instruction as written.

use nki_lang::{Instr, InstrData, Opcode, VarValues};

use crate::bind::Bound;
use crate::engines::EngineState;
use crate::engines::tensor::{HbmOperand, free_contiguous};
use crate::host::readers::{Readers, tile_of};
use crate::operand::{Loc, Operands, Resolved};

/// Most loads skipped at once.
const MAX_SKIPPED: usize = 4;

/// A load that did not run.
#[derive(Copy, Clone, Debug)]
struct Skipped {
    /// Its instruction index.
    pc: usize,
    /// Its tile.
    tile: u16,
    /// Its resolved operands: the tile's elements and the input's.
    ops: Operands,
}

/// The loads a plain run skipped, whose tiles matmuls read in place.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct InputTiles {
    skipped: [Option<Skipped>; MAX_SKIPPED],
}

impl InputTiles {
    /// Whether the load `ins` (at `pc`, operands `ops`) is skipped: its tile is loaded once for
    /// matmuls alone, from an input within one dtype and shape.
    pub(crate) fn skip(
        &mut self,
        b: &Bound<'_, '_, '_>,
        readers: &Readers,
        ins: &Instr,
        ops: &Operands,
        pc: usize,
    ) -> bool {
        let (Opcode::Load, InstrData::Dma { tile: view, .. }) = (ins.opcode, ins.data) else {
            return false;
        };
        let Some(tile) = tile_of(b.program, view).filter(|&t| readers.loaded_once(t, pc)) else {
            return false;
        };
        let (dst, src) = (ops.get(0), ops.get(1));
        let from_input = matches!(src.loc, Loc::Hbm(t) if usize::from(t) < b.inputs.len());
        if !from_input || dst.loc != Loc::Sbuf || (src.dtype, src.dims) != (dst.dtype, dst.dims) {
            return false;
        }
        // This load's last execution (an earlier instance's) or a free entry.
        let entry = self
            .skipped
            .iter()
            .position(|s| s.is_some_and(|s| s.pc == pc))
            .or_else(|| self.skipped.iter().position(Option::is_none));
        let Some(entry) = entry else {
            return false;
        };
        self.skipped[entry] = Some(Skipped {
            pc,
            tile,
            ops: *ops,
        });
        true
    }

    /// The load at `pc` did not execute (its instance masked it out): its tile holds what SBUF
    /// holds.
    pub(crate) fn masked_out(&mut self, pc: usize) {
        self.ran(pc..=pc);
    }

    /// The instructions `pcs` ran (as written, or as one step): a load among them is not
    /// skipped.
    pub(crate) fn ran(&mut self, pcs: core::ops::RangeInclusive<usize>) {
        for s in &mut self.skipped {
            if s.is_some_and(|s| pcs.contains(&s.pc)) {
                *s = None;
            }
        }
    }

    /// The skipped load of the tile that the operand in `slot` of `ins` views.
    fn load_of(&self, p: &nki_lang::Program<'_>, ins: &Instr, slot: u8) -> Option<&Skipped> {
        let tile = ins
            .operands()
            .find(|o| o.slot == slot)
            .and_then(|o| o.view())
            .and_then(|v| tile_of(p, v))?;
        self.skipped.iter().flatten().find(|s| s.tile == tile)
    }

    /// The operand `r` in `slot` (1 or 2) of the matmul `ins` as the input's elements, when
    /// it views a skipped tile and maps onto the load's elements as a matmul reads an input
    /// (partitions in increasing order, each one contiguous run).
    pub(crate) fn operand<'i>(
        &self,
        b: &Bound<'i, '_, '_>,
        ins: &Instr,
        slot: u8,
        r: &Resolved,
    ) -> Option<HbmOperand<'i>> {
        let load = self.load_of(b.program, ins, slot)?;
        let hbm = in_input(&load.ops, r)?;
        let Loc::Hbm(t) = hbm.loc else {
            return None;
        };
        let input = b.inputs.get(usize::from(t))?;
        let readable = hbm.pattern.base >= 0
            && hbm.pattern.strides[0] > 0
            && free_contiguous(&hbm.dims, &hbm.pattern);
        readable.then_some(HbmOperand {
            data: input.data,
            version: input.version,
            hbm,
        })
    }

    /// The operands of the matmul `ins` (resolved `ops`) read from inputs in place of skipped
    /// tiles (stationary, moving), or `None` when one that views a skipped tile does not map.
    pub(crate) fn matmul_operands<'i>(
        &self,
        b: &Bound<'i, '_, '_>,
        ins: &Instr,
        ops: &Operands,
    ) -> Option<[Option<HbmOperand<'i>>; 2]> {
        let mut out = [None; 2];
        if self.skipped.iter().all(Option::is_none) {
            return Some(out);
        }
        for (slot, o) in [1u8, 2].into_iter().zip(&mut out) {
            if self.load_of(b.program, ins, slot).is_some() {
                *o = Some(self.operand(b, ins, slot, ops.slot(usize::from(slot))?)?);
            }
        }
        Some(out)
    }

    /// Whether `ins` reads a skipped tile.
    pub(crate) fn reads_skipped(&self, p: &nki_lang::Program<'_>, ins: &Instr) -> bool {
        self.skipped.iter().any(Option::is_some)
            && ins
                .operands()
                .filter(|o| o.dir.reads())
                .any(|o| self.load_of(p, ins, o.slot).is_some())
    }

    /// Before `ins` (operands `ops`) runs: when it reads a skipped tile other than as a matmul
    /// operand that maps onto the input, the skipped loads of the tiles it reads run now, so that
    /// it reads them as written. Returns whether it reads skipped tiles in place.
    pub(crate) fn before(
        &mut self,
        e: &mut EngineState,
        b: &mut Bound<'_, '_, '_>,
        ins: &Instr,
        ops: &Operands,
        vars: &VarValues,
    ) -> bool {
        if !self.reads_skipped(b.program, ins) {
            return false;
        }
        let matmul = matches!(
            (ins.opcode, ins.data),
            (Opcode::Matmul, InstrData::Matmul { .. })
        );
        if matmul && self.matmul_operands(b, ins, ops).is_some() {
            return true;
        }
        for o in ins.operands().filter(|o| o.dir.reads()) {
            let Some(load) = self.load_of(b.program, ins, o.slot).copied() else {
                continue;
            };
            self.ran(load.pc..=load.pc);
            if let Some(load_ins) = b.program.instrs().get(load.pc) {
                // Its tile's readers are matmuls: it stays on this thread when the worker is
                // far (`Readers::far_split`).
                let far_split = core::mem::replace(&mut e.far_split, false);
                crate::exec::execute(e, b, load_ins, &load.ops, vars);
                e.far_split = far_split;
            }
        }
        false
    }
}

/// `r`, a view of the tile that the load with operands `load` (tile, then input) wrote, as
/// the same elements of the input, when each of its elements is one the load wrote and each of
/// its axes steps along one axis of the load's: its element at `t` is the load's tile element
/// at coordinates `c + Σ tᵢ·mᵢ·e_{jᵢ}`, which the load copied from the input's element at the
/// same coordinates.
///
/// The load's tile axes (those of more than one element) must nest: sorted by stride, each
/// stride beyond the reach of the smaller ones, so that an offset from the load's first element
/// has one decomposition into coordinates.
pub(crate) fn in_input(load: &Operands, r: &Resolved) -> Option<Resolved> {
    let (tile, input) = (load.slot(0)?, load.slot(1)?);
    if (tile.dtype, tile.dims, tile.loc) != (input.dtype, input.dims, Loc::Sbuf)
        || (r.dtype, r.loc) != (tile.dtype, Loc::Sbuf)
    {
        return None;
    }
    // The load's axes of more than one element, by increasing tile stride.
    let mut axes = [0usize; nki_lang::MAX_TILE_RANK];
    let mut n = 0;
    for j in (0..nki_lang::MAX_TILE_RANK).filter(|&j| tile.dims[j] > 1) {
        axes[n] = j;
        n += 1;
    }
    let axes = &mut axes[..n];
    axes.sort_by_key(|&j| tile.pattern.strides[j]);
    let mut reach = 0isize;
    for &j in axes.iter() {
        let s = tile.pattern.strides[j];
        if s <= reach {
            return None;
        }
        let extent = isize::try_from(tile.dims[j] - 1).ok()?;
        reach = reach.checked_add(s.checked_mul(extent)?)?;
    }
    // The coordinates of `r`'s first element.
    let mut coords = [0usize; nki_lang::MAX_TILE_RANK];
    let mut off = r.pattern.base.checked_sub(tile.pattern.base)?;
    for &j in axes.iter().rev() {
        let s = tile.pattern.strides[j];
        let c = off.checked_div(s)?;
        let c = usize::try_from(c).ok().filter(|&c| c < tile.dims[j])?;
        coords[j] = c;
        off -= s * c as isize;
    }
    if off != 0 {
        return None;
    }
    // Each of `r`'s axes as a step of `m` along one of the load's; the furthest element of
    // `r` along each of the load's axes stays within it.
    let mut last = coords;
    let mut strides = [0isize; nki_lang::MAX_TILE_RANK];
    for i in (0..nki_lang::MAX_TILE_RANK).filter(|&i| r.dims[i] > 1) {
        let s = r.pattern.strides[i];
        let &j = axes
            .iter()
            .rev()
            .find(|&&j| s > 0 && s % tile.pattern.strides[j] == 0)?;
        let m = s / tile.pattern.strides[j];
        let steps = usize::try_from(m).ok()?.checked_mul(r.dims[i] - 1)?;
        last[j] = last[j].checked_add(steps)?;
        if last[j] >= tile.dims[j] {
            return None;
        }
        strides[i] = input.pattern.strides[j].checked_mul(m)?;
    }
    let mut base = input.pattern.base;
    for &j in axes.iter() {
        let c = isize::try_from(coords[j]).ok()?;
        base = base.checked_add(input.pattern.strides[j].checked_mul(c)?)?;
    }
    let mut out = *r;
    out.loc = input.loc;
    out.pattern.base = base;
    out.pattern.strides = strides;
    Some(out)
}

#[cfg(test)]
mod tests {
    use nki_lang::{DType, Dir, MAX_TILE_RANK};

    use super::*;
    use crate::operand::Pattern;

    fn operand(loc: Loc, base: isize, strides: &[isize], dims: &[usize]) -> Resolved {
        let mut s = [0isize; MAX_TILE_RANK];
        let mut d = [1usize; MAX_TILE_RANK];
        s[..strides.len()].copy_from_slice(strides);
        d[..dims.len()].copy_from_slice(dims);
        Resolved {
            slot: 1,
            dir: Dir::Read,
            loc,
            dtype: DType::Bf16,
            pattern: Pattern { base, strides: s },
            dims: d,
        }
    }

    /// The router's load of `x [H, T]` into `[128, H/128, T]`: partition `p`, tile `h`, token
    /// `t` from row `h·128 + p`.
    fn router_load(h_tiles: usize, tokens: usize, partition_stride: isize) -> Operands {
        let t = tokens as isize;
        let tile = operand(
            Loc::Sbuf,
            partition_stride * 3 + 64,
            &[partition_stride, t, 1],
            &[128, h_tiles, tokens],
        );
        let input = operand(Loc::Hbm(0), 0, &[t, 128 * t, 1], &[128, h_tiles, tokens]);
        Operands::default()
            .with(Resolved { slot: 0, ..tile })
            .with(input)
    }

    /// Every element of `r` and of its image, by the plain definition: the load's coordinates
    /// of `r`'s element found by search.
    fn check(load: &Operands, r: &Resolved, maps: bool) {
        let got = in_input(load, r);
        assert_eq!(got.is_some(), maps, "{r:?}");
        let Some(got) = got else { return };
        let (tile, input) = (load.get(0), load.get(1));
        let addr = |x: &Resolved, t: &[usize]| {
            x.pattern.base
                + (0..MAX_TILE_RANK)
                    .map(|j| x.pattern.strides[j] * t[j] as isize)
                    .sum::<isize>()
        };
        let each = |dims: &[usize; MAX_TILE_RANK], f: &mut dyn FnMut([usize; MAX_TILE_RANK])| {
            let total: usize = dims.iter().product();
            for mut k in 0..total {
                let mut t = [0usize; MAX_TILE_RANK];
                for j in (0..MAX_TILE_RANK).rev() {
                    t[j] = k % dims[j];
                    k /= dims[j];
                }
                f(t);
            }
        };
        each(&r.dims, &mut |t| {
            let a = addr(r, &t);
            let mut found = None;
            each(&tile.dims, &mut |c| {
                if addr(tile, &c) == a {
                    found = Some(addr(input, &c));
                }
            });
            assert_eq!(found, Some(addr(&got, &t)), "element {t:?} of {r:?}");
        });
    }

    #[test]
    fn the_routers_operands_map_onto_its_inputs() {
        let ps = 4096;
        let load = router_load(4, 16, ps);
        let base = load.get(0).pattern.base;
        // x_sb[0..128, h, a..a + 8]: rows h·128 + p, tokens a..a + 8.
        for (h, a) in [(0, 0), (1, 8), (3, 4)] {
            let r = operand(Loc::Sbuf, base + 16 * h + a, &[ps, 16, 1], &[128, 1, 8]);
            let want = operand(Loc::Hbm(0), 16 * 128 * h + a, &[16, 0, 1], &[128, 1, 8]);
            check(&load, &r, true);
            assert_eq!(in_input(&load, &r).map(|x| x.pattern), Some(want.pattern));
        }
        // Every other token, and partitions 64.. of tile 2.
        check(
            &load,
            &operand(Loc::Sbuf, base + 32, &[ps, 2], &[128, 8]),
            true,
        );
        check(
            &load,
            &operand(Loc::Sbuf, base + 64 * ps + 32, &[ps, 1], &[64, 16]),
            true,
        );
        // The whole tile, and tile 1's tokens as the partitions of a transposed view.
        check(&load, load.get(0), true);
        check(
            &load,
            &operand(Loc::Sbuf, base + 16, &[1, ps], &[16, 128]),
            true,
        );
    }

    #[test]
    fn views_beyond_the_loaded_elements_do_not_map() {
        let ps = 4096;
        let load = router_load(4, 16, ps);
        let base = load.get(0).pattern.base;
        // Before the load's first element, past its last token, across two tiles' tokens in
        // one run, in another partition layout, and in another dtype.
        for r in [
            operand(Loc::Sbuf, base - 1, &[ps, 1], &[128, 8]),
            operand(Loc::Sbuf, base + 12, &[ps, 1], &[128, 8]),
            operand(Loc::Sbuf, base + 8, &[ps, 1], &[128, 32]),
            operand(Loc::Sbuf, base + 1, &[ps + 1, 1], &[128, 8]),
            operand(Loc::Sbuf, base, &[ps, -1], &[128, 8]),
            operand(Loc::Psum, base, &[ps, 1], &[128, 8]),
            Resolved {
                dtype: DType::F32,
                ..operand(Loc::Sbuf, base, &[ps, 1], &[128, 8])
            },
        ] {
            check(&load, &r, false);
        }
    }
}
