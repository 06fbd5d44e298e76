//! Definedness through an instruction: which elements of what it writes are *undefined*
//! (computed from bytes no instruction of this launch wrote), following its opcode's
//! dependency rule in the op table ([`Deps`]).
//!
//! Each rule is evaluated on the operands as the executor resolved them (after the mask), with
//! the element offsets the reference interpreter (`exec/reference.rs`) reads and writes: a
//! source element's offset is looked up in the shadow, a destination element's offset keys its
//! result. An element's origin is 1 + the instruction that first read unwritten bytes on its
//! way (this one when it reads them itself), 0 when it is defined.

use std::collections::HashMap;

use nki_lang::{Cmp, Deps, Instr, InstrData, MAX_TILE_RANK, Pred};

use super::{Access, Fault, Strict};
use crate::cpu::convert;
use crate::exec::OnChip;
use crate::operand::{Loc, Operands, Resolved};

/// Per written on-chip operand (by slot), the origin of each undefined element, keyed by the
/// element's byte offset in its memory. Elements not in the map are defined.
pub(super) type Undefined = Vec<(u8, HashMap<usize, u32>)>;

/// A grid index, partition first.
type Index = [usize; MAX_TILE_RANK];

/// The byte offset of element `elem` of an operand of `dtype` (saturating: an offset outside
/// every memory, which the launch's checks refuse, reads as unwritten).
fn byte_of(r: &Resolved, elem: isize) -> usize {
    let size = isize::try_from(r.dtype.size()).unwrap_or(isize::MAX);
    usize::try_from(elem.saturating_mul(size)).unwrap_or(usize::MAX)
}

/// The element offset of index `t` with strides `s` from `base`.
fn offset(base: isize, s: &[isize; MAX_TILE_RANK], t: &Index) -> isize {
    s.iter().zip(t).fold(base, |acc, (&st, &i)| {
        acc.saturating_add(st.saturating_mul(isize::try_from(i).unwrap_or(isize::MAX)))
    })
}

/// The number of free elements per partition of `dims`.
fn free_elems(dims: &Index) -> usize {
    dims[1..].iter().product()
}

/// The index of partition `p`'s free element `k` (row-major) of `dims`; with `p = 0` and `k`
/// up to the whole size, the row-major index `k` of the whole grid (as the reference's).
fn unravel(dims: &Index, p: usize, mut k: usize) -> Index {
    let mut t = [0; MAX_TILE_RANK];
    for j in (1..MAX_TILE_RANK).rev() {
        let d = dims[j].max(1);
        t[j] = k % d;
        k /= d;
    }
    t[0] = p.saturating_add(k);
    t
}

/// Every index of `dims`, row-major.
fn indices(dims: Index) -> impl Iterator<Item = Index> {
    let n: usize = dims.iter().product();
    (0..n).map(move |k| unravel(&dims, 0, k))
}

/// The first undefined origin of two.
fn first(a: u32, b: u32) -> u32 {
    if a != 0 { a } else { b }
}

/// One source operand the instruction reads from memory, and how.
#[derive(Copy, Clone, Debug)]
struct Source {
    r: Resolved,
    a: Access,
}

impl Strict<'_> {
    /// The origin of the element at element offset `elem` of source `s`: 1 + `this` when a
    /// byte of it is unwritten (an output element: never written), the stamp's origin when it
    /// is undefined, 0 when defined.
    fn origin(&self, s: &Source, elem: isize, this: u32) -> u32 {
        match s.r.loc {
            Loc::Sbuf | Loc::Psum => {
                let map = if s.r.loc == Loc::Psum {
                    &self.psum
                } else {
                    &self.sbuf
                };
                let at = byte_of(&s.r, elem);
                let size = s.r.dtype.size() as usize;
                (at..at.saturating_add(size))
                    .find_map(|b| match self.judge(map.get(b), s.a) {
                        Some(Fault::Unwritten) => Some(this),
                        Some(Fault::Undefined { origin }) => Some(origin),
                        Some(
                            Fault::Race { .. } | Fault::Instance(_) | Fault::PartialSum { .. },
                        )
                        | None => None,
                    })
                    .unwrap_or(0)
            }
            Loc::Hbm(t) => {
                let Some(out) = usize::from(t).checked_sub(self.program.input_count()) else {
                    return 0; // an input: the caller's data
                };
                let owners = self.outputs.get(out);
                let written = usize::try_from(elem)
                    .ok()
                    .and_then(|e| owners?.get(e))
                    .is_some_and(|&o| self.written_here(usize::from(t), o));
                if written { 0 } else { this }
            }
            Loc::Expr | Loc::Imm(_) => 0,
        }
    }

    /// For each on-chip operand `instr` writes, its undefined elements (see the module
    /// documentation). Called only when a source holds unwritten or undefined elements.
    pub(super) fn undefined_elements(
        &self,
        pc: usize,
        instr: &Instr,
        operands: &Operands,
        memory: Option<OnChip<'_>>,
        (group_overwrites, accumulating): (bool, bool),
    ) -> Undefined {
        let this = u32::try_from(pc.saturating_add(1)).unwrap_or(u32::MAX);
        let on_chip = |r: &Resolved| matches!(r.loc, Loc::Sbuf | Loc::Psum);
        // Every operand read from memory, by slot (slot 0: the destination's old value).
        let mut sources: [Option<Source>; nki_lang::MAX_SLOTS] = [None; nki_lang::MAX_SLOTS];
        for r in operands.iter() {
            let in_memory = on_chip(r) || matches!(r.loc, Loc::Hbm(_));
            if !(in_memory && r.dir.reads()) || (r.slot == 0 && group_overwrites) {
                continue;
            }
            let (tile, scope, on_dst) = self.tile_of(instr, r.slot);
            let a = Access {
                tile,
                scope,
                reads: true,
                accumulates: (r.slot == 0 || on_dst) && accumulating,
            };
            if let Some(s) = sources.get_mut(usize::from(r.slot)) {
                *s = Some(Source { r: *r, a });
            }
        }
        let src = |slot: usize| sources.get(slot).copied().flatten();
        let mut out = Undefined::new();
        let Some(dst) = operands.slot(0).copied().filter(|r| on_chip(r)) else {
            return out;
        };
        let mut found = HashMap::new();
        // The destination's element at offset `elem`, computed from sources of origin `o`: its
        // origin once its old value (when it accumulates) is counted.
        let old = src(0);
        let put = |found: &mut HashMap<usize, u32>, elem: isize, o: u32| {
            let o = first(o, old.map_or(0, |s| self.origin(&s, elem, this)));
            if o != 0 {
                found.insert(byte_of(&dst, elem), o);
            }
        };
        match instr.opcode.info().deps {
            // `random_seed` writes no memory (and strict launches refuse an undefined seed
            // before it runs).
            // `register_store`'s element is the register's value: defined.
            Deps::Control | Deps::Seed | Deps::Register => {}
            // An indirect DMA is checked one partition at a time (`super::indirect`), each a
            // move of one HBM row.
            Deps::Move | Deps::Indirect => {
                if let Some(s) = src(1) {
                    for (f, d) in indices(s.r.dims).zip(indices(dst.dims)) {
                        let o = self.origin(
                            &s,
                            offset(s.r.pattern.base, &s.r.pattern.strides, &f),
                            this,
                        );
                        put(
                            &mut found,
                            offset(dst.pattern.base, &dst.pattern.strides, &d),
                            o,
                        );
                    }
                }
            }
            // A DMA transpose: the destination's element at `t` is the source's at `s`,
            // `s[axes[i]] = t[i]`.
            Deps::Permute => {
                if let Some(s) = src(1) {
                    let rank = crate::operand::grid_rank(self.program, instr);
                    let axes = nki_lang::ops::dma_transpose_padded(rank);
                    for t in indices(dst.dims) {
                        let mut f = [0usize; MAX_TILE_RANK];
                        for (i, &a) in axes.iter().enumerate() {
                            f[a] = t[i];
                        }
                        let o = self.origin(
                            &s,
                            offset(s.r.pattern.base, &s.r.pattern.strides, &f),
                            this,
                        );
                        put(
                            &mut found,
                            offset(dst.pattern.base, &dst.pattern.strides, &t),
                            o,
                        );
                    }
                }
            }
            Deps::Elementwise | Deps::AffineSelect => {
                let grid = dst.dims;
                let over: Vec<(Source, [isize; MAX_TILE_RANK])> = (1..nki_lang::MAX_SLOTS)
                    .filter_map(src)
                    // Slot 4 is a reduction's output, except `dma_compute`'s fourth source.
                    .filter(|s| s.r.slot != 4 || !s.r.dir.writes())
                    .map(|s| (s, s.r.strides_on(&grid)))
                    .collect();
                // `affine_select`'s predicate: which side each point takes.
                let predicate = match instr.data {
                    InstrData::Select {
                        pred: Pred::Affine { cmp, .. },
                        ..
                    } => operands.slot(1).map(|r| (*r, r.strides_on(&grid), cmp)),
                    InstrData::Select {
                        pred: Pred::Tile(_),
                        ..
                    }
                    | InstrData::LoopBegin { .. }
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
                    | InstrData::Register { .. } => None,
                };
                let holds = |t: &Index| {
                    predicate.is_none_or(|(r, s, cmp): (Resolved, _, Cmp)| {
                        // The expression's value wrapped to int32, as the engines compute it.
                        let v = s.iter().zip(t).fold(r.pattern.base as i64, |v, (&st, &i)| {
                            v.wrapping_add((st as i64).wrapping_mul(i as i64))
                        });
                        cmp.holds(i64::from(v as i32))
                    })
                };
                let reduce_res = operands
                    .slot(4)
                    .copied()
                    .filter(|r| on_chip(r) && r.dir.writes());
                let mut rows = Vec::new();
                for p in 0..grid[0] {
                    let mut row = 0u32;
                    for k in 0..free_elems(&grid) {
                        let t = unravel(&grid, p, k);
                        let taken = holds(&t);
                        let o = over
                            .iter()
                            .filter(|(s, _)| deps_on_side(instr, s.r.slot, taken))
                            .map(|(s, st)| self.origin(s, offset(s.r.pattern.base, st, &t), this))
                            .fold(0, first);
                        let at = offset(dst.pattern.base, &dst.pattern.strides, &t);
                        let o = first(o, old.map_or(0, |s| self.origin(&s, at, this)));
                        row = first(row, o);
                        put(&mut found, at, o);
                    }
                    rows.push(row);
                }
                if let Some(res) = reduce_res {
                    out.push((res.slot, row_origins(&res, &grid, &rows)));
                }
            }
            // A partition left unmodified (mask entry 255) keeps its old value's origin; every
            // other destination element takes its source element's.
            Deps::Shuffle => {
                if let (Some(s), InstrData::Shuffle { mask, .. }) = (src(1), instr.data) {
                    for j in 0..dst.dims[0] {
                        let from = nki_lang::shuffle_source(&mask, j);
                        for k in 0..free_elems(&dst.dims) {
                            let d = unravel(&dst.dims, j, k);
                            let at = offset(dst.pattern.base, &dst.pattern.strides, &d);
                            let o = if let Some(p) = from {
                                let e = unravel(&s.r.dims, p, k);
                                let from = offset(s.r.pattern.base, &s.r.pattern.strides, &e);
                                self.origin(&s, from, this)
                            } else {
                                old.map_or(0, |o| self.origin(&o, at, this))
                            };
                            if o != 0 {
                                found.insert(byte_of(&dst, at), o);
                            }
                        }
                    }
                }
            }
            // On the partitions it processes, every element: the first undefined element of the
            // same partition of the source; the others are not written (`written`).
            // Each x4 element and each scale takes the first undefined origin among its
            // group's 32 source values; the scale tile's other elements keep their old
            // value's (unwritten in a new tile).
            Deps::Mx => {
                if let Some(s) = src(1) {
                    let scale = operands.slot(2).copied().filter(|r| on_chip(r));
                    let group_size = nki_lang::MX_GROUP_PARTITIONS;
                    let lanes = nki_lang::MX_GROUP_FREE;
                    let x4 = free_elems(&dst.dims);
                    let mut scales = HashMap::new();
                    for i in 0..dst.dims[0] / group_size {
                        for f in 0..x4 {
                            let o = (0..group_size)
                                .flat_map(|r| {
                                    (0..lanes).map(move |l| (i * group_size + r, f * lanes + l))
                                })
                                .map(|(p, k)| {
                                    let t = unravel(&s.r.dims, p, k);
                                    self.origin(
                                        &s,
                                        offset(s.r.pattern.base, &s.r.pattern.strides, &t),
                                        this,
                                    )
                                })
                                .find(|&o| o != 0)
                                .unwrap_or(0);
                            for r in 0..group_size {
                                let t = unravel(&dst.dims, i * group_size + r, f);
                                put(
                                    &mut found,
                                    offset(dst.pattern.base, &dst.pattern.strides, &t),
                                    o,
                                );
                            }
                            if let Some(sc) = scale {
                                let sp = nki_lang::mx_scale_partition(i);
                                if sp < sc.dims[0] && f < free_elems(&sc.dims) {
                                    let t = unravel(&sc.dims, sp, f);
                                    let at = offset(sc.pattern.base, &sc.pattern.strides, &t);
                                    scales.insert(byte_of(&sc, at), o);
                                }
                            }
                        }
                    }
                    if let Some(sc) = scale {
                        // The partitions it leaves: their old value's origin.
                        let old_scale = src(2);
                        let mut written = std::collections::HashSet::new();
                        for i in 0..dst.dims[0] / group_size {
                            written.insert(nki_lang::mx_scale_partition(i));
                        }
                        for p in (0..sc.dims[0]).filter(|p| !written.contains(p)) {
                            for k in 0..free_elems(&sc.dims) {
                                let t = unravel(&sc.dims, p, k);
                                let at = offset(sc.pattern.base, &sc.pattern.strides, &t);
                                let o = old_scale.map_or(0, |o| self.origin(&o, at, this));
                                scales.insert(byte_of(&sc, at), o);
                            }
                        }
                        scales.retain(|_, o| *o != 0);
                        out.push((sc.slot, scales));
                    }
                }
            }
            Deps::Nonzero => {
                if let Some(s) = src(1) {
                    for p in (0..dst.dims[0]).filter(|&p| nki_lang::nonzero_partition(p)) {
                        let o = (0..free_elems(&s.r.dims))
                            .map(|k| {
                                let t = unravel(&s.r.dims, p, k);
                                let at = offset(s.r.pattern.base, &s.r.pattern.strides, &t);
                                self.origin(&s, at, this)
                            })
                            .find(|&o| o != 0)
                            .unwrap_or(0);
                        for k in 0..free_elems(&dst.dims) {
                            let t = unravel(&dst.dims, p, k);
                            put(
                                &mut found,
                                offset(dst.pattern.base, &dst.pattern.strides, &t),
                                o,
                            );
                        }
                    }
                }
            }
            // Within each group of 16 partitions, the elements it writes (snake positions below
            // K of `val_dst` and `idx_dst`): the first undefined element of the group's snake.
            Deps::TopK => {
                let second = operands.slot(2).copied().filter(|r| on_chip(r));
                let (Some(s), InstrData::TopK { n, .. }) = (src(1), instr.data) else {
                    out.push((0, found));
                    return out;
                };
                let k = free_elems(&dst.dims);
                let mut partial = HashMap::new();
                for base in (0..s.r.dims[0]).step_by(nki_lang::GATHER_GROUP) {
                    let place = |dims: &Index, j: usize| {
                        let (r, c) = nki_lang::topk_place(j);
                        unravel(dims, base.saturating_add(r), c)
                    };
                    let o = (0..usize::from(n))
                        .map(|i| {
                            let t = place(&s.r.dims, i);
                            self.origin(
                                &s,
                                offset(s.r.pattern.base, &s.r.pattern.strides, &t),
                                this,
                            )
                        })
                        .find(|&o| o != 0)
                        .unwrap_or(0);
                    for j in 0..k {
                        let t = place(&dst.dims, j);
                        put(
                            &mut found,
                            offset(dst.pattern.base, &dst.pattern.strides, &t),
                            o,
                        );
                        if let (Some(r), true) = (second, o != 0) {
                            let t = place(&r.dims, j);
                            let at = offset(r.pattern.base, &r.pattern.strides, &t);
                            partial.insert(byte_of(&r, at), o);
                        }
                    }
                }
                if let Some(r) = second {
                    out.push((r.slot, partial));
                }
            }
            // Each element: its group's index (undefined: the element is), then the element of
            // its partition that index names.
            Deps::LocalGather => {
                if let (Some(data), Some(ix), InstrData::LocalGather { elems, valid, .. }) =
                    (src(1), src(2), instr.data)
                {
                    let n = free_elems(&data.r.dims);
                    let elems = usize::from(elems);
                    for p in 0..dst.dims[0] {
                        for j in 0..usize::from(valid) {
                            let at = crate::local_gather::index_offset(&ix.r, p, j);
                            let oi = self.origin(&ix, at, this);
                            let first = memory
                                .and_then(|m| m.bits(&ix.r, at))
                                .and_then(|b| usize::try_from(b).ok());
                            for e in 0..elems {
                                let element = |f: usize| {
                                    let s = unravel(&data.r.dims, p, f);
                                    let at =
                                        offset(data.r.pattern.base, &data.r.pattern.strides, &s);
                                    self.origin(&data, at, this)
                                };
                                // A defined index: the element it names; without the memories,
                                // any element of the partition.
                                let o = match (oi, first.map(|f| f.saturating_add(e))) {
                                    (0, Some(f)) if f < n => element(f),
                                    (0, _) => (0..n).map(element).find(|&o| o != 0).unwrap_or(0),
                                    (o, _) => o,
                                };
                                let k = j.saturating_mul(elems).saturating_add(e);
                                let d = unravel(&dst.dims, p, k);
                                let at = offset(dst.pattern.base, &dst.pattern.strides, &d);
                                if o != 0 {
                                    found.insert(byte_of(&dst, at), o);
                                }
                            }
                        }
                    }
                }
            }
            Deps::Gather => {
                if let (Some(data), Some(ix)) = (src(1), src(2)) {
                    let n = free_elems(&data.r.dims);
                    for t in indices(dst.dims) {
                        let at = offset(ix.r.pattern.base, &ix.r.pattern.strides, &t);
                        let o = self.origin(&ix, at, this);
                        let position = memory
                            .and_then(|m| m.bits(&ix.r, at))
                            .map(|b| crate::gather::position(ix.r.dtype, b));
                        let element = |f: usize| {
                            let e = unravel(&data.r.dims, t[0], f);
                            let at = offset(data.r.pattern.base, &data.r.pattern.strides, &e);
                            self.origin(&data, at, this)
                        };
                        // A defined index: the element it names; without the memories, any
                        // element of the partition.
                        let o = match (o, position.and_then(|f| usize::try_from(f).ok())) {
                            (0, Some(f)) if f < n => element(f),
                            (0, _) => (0..n).map(element).find(|&o| o != 0).unwrap_or(0),
                            (o, _) => o,
                        };
                        put(
                            &mut found,
                            offset(dst.pattern.base, &dst.pattern.strides, &t),
                            o,
                        );
                    }
                }
            }
            Deps::Select => {
                let grid = dst.dims;
                let side = |slot: usize| src(slot).map(|s| (s, s.r.strides_on(&grid)));
                let (predicate, on_true, on_false) = (side(1), side(2), side(3));
                // `select_reduce`'s `reverse_pred`, and its per-partition maximum.
                let reverse = matches!(instr.data, InstrData::SelectReduce { reverse: true, .. });
                let reduce_res = operands.slot(4).copied().filter(|r| on_chip(r));
                let mut rows = vec![0u32; grid[0]];
                let origin_at = |side: Option<(Source, [isize; MAX_TILE_RANK])>, t: &Index| {
                    side.map_or(0, |(s, st)| {
                        self.origin(&s, offset(s.r.pattern.base, &st, t), this)
                    })
                };
                for t in indices(grid) {
                    // The predicate's element: undefined, or the side its value picks (as
                    // the engine reads it: fp32, nonzero is true, NaN included).
                    let (o, taken) = match predicate {
                        Some((s, st)) => {
                            let at = offset(s.r.pattern.base, &st, &t);
                            let o = self.origin(&s, at, this);
                            let value = memory.and_then(|m| m.bits(&s.r, at));
                            let holds = |b| (convert::to_f32(s.r.dtype, b) != 0.0) != reverse;
                            (o, value.map(holds))
                        }
                        None => (0, None),
                    };
                    let o = match (o, taken) {
                        (0, Some(true)) => origin_at(on_true, &t),
                        (0, Some(false)) => origin_at(on_false, &t),
                        (0, None) => first(origin_at(on_true, &t), origin_at(on_false, &t)),
                        (o, _) => o,
                    };
                    rows[t[0]] = first(rows[t[0]], o);
                    put(
                        &mut found,
                        offset(dst.pattern.base, &dst.pattern.strides, &t),
                        o,
                    );
                }
                if let Some(res) = reduce_res {
                    out.push((res.slot, row_origins(&res, &grid, &rows)));
                }
            }
            Deps::RangeSelect => {
                if let InstrData::RangeSelect { cmp, start, .. } = instr.data {
                    let grid = dst.dims;
                    let side = |slot: usize| src(slot).map(|s| (s, s.r.strides_on(&grid)));
                    let (on_true, bounds) = (side(1), [side(2), side(3)]);
                    let mut rows = vec![0u32; grid[0]];
                    for t in indices(grid) {
                        // Each bound's element: its origin, and its value as the engine
                        // reads it (fp32), where memory shows it.
                        let bound = |b: Option<(Source, [isize; MAX_TILE_RANK])>| {
                            b.map_or((0, None), |(s, st)| {
                                let at = offset(s.r.pattern.base, &st, &t);
                                let value = memory
                                    .and_then(|m| m.bits(&s.r, at))
                                    .map(|bits| convert::to_f32(s.r.dtype, bits));
                                (self.origin(&s, at, this), value)
                            })
                        };
                        let ((o0, v0), (o1, v1)) = (bound(bounds[0]), bound(bounds[1]));
                        let data = |side: Option<(Source, [isize; MAX_TILE_RANK])>| {
                            side.map_or(0, |(s, st)| {
                                self.origin(&s, offset(s.r.pattern.base, &st, &t), this)
                            })
                        };
                        let o = match (first(o0, o1), v0, v1) {
                            (0, Some(b0), Some(b1)) => {
                                let taken =
                                    crate::range_select::selects(cmp, start, &grid, &t, [b0, b1]);
                                if taken { data(on_true) } else { 0 }
                            }
                            (0, _, _) => data(on_true),
                            (o, _, _) => o,
                        };
                        rows[t[0]] = first(rows[t[0]], o);
                        put(
                            &mut found,
                            offset(dst.pattern.base, &dst.pattern.strides, &t),
                            o,
                        );
                    }
                    if let Some(res) = operands.slot(4).copied().filter(|r| on_chip(r)) {
                        out.push((res.slot, row_origins(&res, &grid, &rows)));
                    }
                }
            }
            Deps::Reduce => {
                if let (Some(s), InstrData::Reduce { axes, .. }) = (src(1), instr.data) {
                    let grid = s.r.dims;
                    let reduced = |j: usize| j > 0 && axes >> (j - 1) & 1 == 1;
                    let (mut kept, mut red) = (grid, grid);
                    red[0] = 1;
                    for j in 1..MAX_TILE_RANK {
                        if reduced(j) {
                            kept[j] = 1;
                        } else {
                            red[j] = 1;
                        }
                    }
                    let to = dst.strides_on(&kept);
                    for k in indices(kept) {
                        let o = indices(red)
                            .map(|q| {
                                let t: Index =
                                    core::array::from_fn(|j| if reduced(j) { q[j] } else { k[j] });
                                self.origin(
                                    &s,
                                    offset(s.r.pattern.base, &s.r.pattern.strides, &t),
                                    this,
                                )
                            })
                            .find(|&o| o != 0)
                            .unwrap_or(0);
                        put(&mut found, offset(dst.pattern.base, &to, &k), o);
                    }
                }
            }
            Deps::Prefix => {
                let grid = dst.dims;
                let over: Vec<(Source, [isize; MAX_TILE_RANK])> = [1, 2]
                    .into_iter()
                    .filter_map(src)
                    .map(|s| (s, s.r.strides_on(&grid)))
                    .collect();
                let init = src(3).map(|s| (s, s.r.strides_on(&grid)));
                for p in 0..grid[0] {
                    let mut first_t = [0; MAX_TILE_RANK];
                    first_t[0] = p;
                    let mut carried = init.map_or(0, |(s, st)| {
                        self.origin(&s, offset(s.r.pattern.base, &st, &first_t), this)
                    });
                    for k in 0..free_elems(&grid) {
                        let t = unravel(&grid, p, k);
                        for (s, st) in &over {
                            carried = first(
                                carried,
                                self.origin(s, offset(s.r.pattern.base, st, &t), this),
                            );
                        }
                        put(
                            &mut found,
                            offset(dst.pattern.base, &dst.pattern.strides, &t),
                            carried,
                        );
                    }
                }
            }
            Deps::Row => {
                // Every source's partition `p` (`nc_find_index8` also reads its `vals`), for
                // the destination and a second per-row output (`nc_match_replace8`'s
                // `dst_idx`, slot 4).
                let rows: Vec<Source> = (1..nki_lang::MAX_SLOTS).filter_map(src).collect();
                let second = operands.slot(4).copied().filter(|r| on_chip(r));
                let mut partial = HashMap::new();
                if let Some(s) = rows.first() {
                    for p in 0..s.r.dims[0] {
                        let o = rows
                            .iter()
                            .flat_map(|s| {
                                (0..free_elems(&s.r.dims))
                                    .map(move |k| (s, unravel(&s.r.dims, p, k)))
                            })
                            .map(|(s, t)| {
                                self.origin(
                                    s,
                                    offset(s.r.pattern.base, &s.r.pattern.strides, &t),
                                    this,
                                )
                            })
                            .find(|&o| o != 0)
                            .unwrap_or(0);
                        for k in 0..free_elems(&dst.dims) {
                            let t = unravel(&dst.dims, p, k);
                            put(
                                &mut found,
                                offset(dst.pattern.base, &dst.pattern.strides, &t),
                                o,
                            );
                        }
                        if let (Some(r), true) = (second, o != 0) {
                            for k in 0..free_elems(&r.dims) {
                                let t = unravel(&r.dims, p, k);
                                let at = offset(r.pattern.base, &r.pattern.strides, &t);
                                partial.insert(byte_of(&r, at), o);
                            }
                        }
                    }
                }
                if let Some(r) = second {
                    out.push((r.slot, partial));
                }
            }
            Deps::Contraction => {
                // Each operand's columns: free element `i` over the contraction index `k`.
                let columns = |s: Option<Source>, dims: Index| -> Vec<u32> {
                    (0..free_elems(&dims))
                        .map(|i| {
                            s.map_or(0, |s| {
                                (0..dims[0])
                                    .map(|k| {
                                        let t = unravel(&dims, k, i);
                                        self.origin(
                                            &s,
                                            offset(s.r.pattern.base, &s.r.pattern.strides, &t),
                                            this,
                                        )
                                    })
                                    .find(|&o| o != 0)
                                    .unwrap_or(0)
                            })
                        })
                        .collect()
                };
                let dims = |slot: usize| operands.slot(slot).map_or([1; MAX_TILE_RANK], |r| r.dims);
                let (mut st, mut mv) = (columns(src(1), dims(1)), columns(src(2), dims(2)));
                // `nc_matmul_mx`: a column also depends on its scales (element `i` of the
                // scale tile, on the partition of each group of 8 data partitions).
                if instr.opcode == nki_lang::Opcode::MatmulMx {
                    for (cols, data, scale) in [(&mut st, 1, 3), (&mut mv, 2, 4)] {
                        let (Some(s), k) = (src(scale), dims(data)[0]) else {
                            continue;
                        };
                        let groups = k / nki_lang::MX_GROUP_PARTITIONS;
                        for (i, o) in cols.iter_mut().enumerate() {
                            let from_scale = (0..groups)
                                .map(|g| {
                                    let t = unravel(&s.r.dims, nki_lang::mx_scale_partition(g), i);
                                    self.origin(
                                        &s,
                                        offset(s.r.pattern.base, &s.r.pattern.strides, &t),
                                        this,
                                    )
                                })
                                .find(|&o| o != 0)
                                .unwrap_or(0);
                            *o = first(*o, from_scale);
                        }
                    }
                }
                for (m, &a) in st.iter().enumerate() {
                    for (n, &b) in mv.iter().enumerate() {
                        let t = unravel(&dst.dims, m, n);
                        put(
                            &mut found,
                            offset(dst.pattern.base, &dst.pattern.strides, &t),
                            first(a, b),
                        );
                    }
                }
            }
            Deps::Transpose => {
                if let Some(s) = src(1) {
                    // The destination's free stride that runs along the source's partitions
                    // (`nc_transpose`), or along the access's first axis (`load_transpose2d`).
                    let p_stride = (1..MAX_TILE_RANK)
                        .find(|&j| dst.dims[j] != 1)
                        .map_or(0, |j| dst.pattern.strides[j]);
                    let at = |row: usize, col: usize| {
                        let step = |i: usize, st: isize| {
                            isize::try_from(i).unwrap_or(isize::MAX).saturating_mul(st)
                        };
                        dst.pattern
                            .base
                            .saturating_add(step(row, dst.pattern.strides[0]))
                            .saturating_add(step(col, p_stride))
                    };
                    let g = s.r.dims;
                    let own = |t: &Index| offset(s.r.pattern.base, &s.r.pattern.strides, t);
                    if matches!(s.r.loc, Loc::Hbm(_)) {
                        // An access `[A, B]` (its first two axes of size above 1; one alone is
                        // `A` when it is the first axis, else `B`): `(a, b)` goes to `(b, a)`.
                        let mut axes = (0..MAX_TILE_RANK).filter(|&j| g[j] != 1);
                        let (ga, gb) = match (axes.next(), axes.next()) {
                            (Some(a), Some(b)) => (Some(a), Some(b)),
                            (Some(0), None) => (Some(0), None),
                            (Some(b), None) => (None, Some(b)),
                            (None, _) => (None, None),
                        };
                        for t in indices(g) {
                            let (a, b) = (ga.map_or(0, |j| t[j]), gb.map_or(0, |j| t[j]));
                            put(&mut found, at(b, a), self.origin(&s, own(&t), this));
                        }
                    } else {
                        for p in 0..g[0] {
                            for f in 0..free_elems(&g) {
                                let t = unravel(&g, p, f);
                                put(&mut found, at(f, p), self.origin(&s, own(&t), this));
                            }
                        }
                    }
                }
            }
        }
        out.push((0, found));
        out
    }
}

/// The elements of operand `r` that `instr` writes, as an operand to walk: `r` itself, except a
/// reduction's destination, which the executor writes over the source's kept axes (the
/// instruction's grid after the mask, the reduced axes of size 1), through the destination's
/// strides: a mask that cuts a kept free axis leaves the rest of the destination as it was;
/// and `nonzero_with_count`'s destination, of which it writes partitions `0, 16, …` only.
pub(super) fn written(instr: &Instr, operands: &Operands, r: &Resolved) -> Resolved {
    if instr.opcode.info().deps == Deps::TopK {
        return topk_written(r).0;
    }
    if instr.opcode.info().deps == Deps::Nonzero && r.slot == 0 {
        let mut w = *r;
        let group = nki_lang::GATHER_GROUP;
        w.dims[0] = r.dims[0].div_ceil(group);
        w.pattern.strides[0] = r.pattern.strides[0].saturating_mul(group as isize);
        return w;
    }
    let (Deps::Reduce, 0, InstrData::Reduce { axes, .. }, Some(src)) = (
        instr.opcode.info().deps,
        r.slot,
        instr.data,
        operands.slot(1),
    ) else {
        return *r;
    };
    let mut kept = src.dims;
    for (j, k) in kept.iter_mut().enumerate().skip(1) {
        if axes >> (j - 1) & 1 == 1 {
            *k = 1;
        }
    }
    let mut w = *r;
    w.pattern.strides = r.strides_on(&kept);
    w.dims = kept;
    w
}

/// The elements `topk` writes of its destination `r` (`val_dst` or `idx_dst`, `[P, K]`):
/// snake positions `j < K` of each group of 16 partitions (partition `j mod 16`, column
/// `j / 16`), as two operands to walk: every partition's first `K / 16` columns, and column
/// `K / 16` of the first `K mod 16` partitions of each group (`None` when `K` is a multiple of
/// 16). When `K < 16` the first is the partial column itself. The source is written whole.
pub(super) fn topk_written(r: &Resolved) -> (Resolved, Option<Resolved>) {
    if r.slot == 1 {
        return (*r, None);
    }
    let group = nki_lang::GATHER_GROUP;
    let k = free_elems(&r.dims);
    let (full, rem) = (k / group, k % group);
    let (sp, sf) = (r.pattern.strides[0], r.pattern.strides[1]);
    let mut partial = *r;
    partial.dims = [r.dims[0] / group, rem, 1, 1, 1];
    partial.pattern.strides = [sp.saturating_mul(group as isize), sp, 0, 0, 0];
    partial.pattern.base = r
        .pattern
        .base
        .saturating_add(sf.saturating_mul(full as isize));
    if full == 0 {
        return (partial, None);
    }
    let mut whole = *r;
    whole.dims = [r.dims[0], full, 1, 1, 1];
    (whole, (rem > 0).then_some(partial))
}

/// Whether, under [`Deps::AffineSelect`], the element at a point where the predicate holds
/// (`taken`) depends on source `slot` (2: `on_true_tile`, 3: `on_false_value`); under every
/// other elementwise rule, every source counts.
fn deps_on_side(instr: &Instr, slot: u8, taken: bool) -> bool {
    match instr.opcode.info().deps {
        Deps::AffineSelect => match slot {
            2 => taken,
            3 => !taken,
            _ => true,
        },
        Deps::Control
        | Deps::Move
        | Deps::Elementwise
        | Deps::Select
        | Deps::RangeSelect
        | Deps::Reduce
        | Deps::Prefix
        | Deps::Row
        | Deps::Contraction
        | Deps::Transpose
        | Deps::Indirect
        | Deps::Gather
        | Deps::Seed
        | Deps::Register
        | Deps::Permute
        | Deps::Shuffle
        | Deps::Mx
        | Deps::LocalGather
        | Deps::Nonzero
        | Deps::TopK => true,
    }
}

/// A per-partition reduction's elements (`reduce_res`, one per partition of `grid`): the
/// first origin of an undefined result in each partition's `rows` entry, by byte.
fn row_origins(res: &Resolved, grid: &Index, rows: &[u32]) -> HashMap<usize, u32> {
    let mut partial = HashMap::new();
    let s = res.strides_on(grid);
    for (p, &o) in rows.iter().enumerate() {
        let mut t = [0; MAX_TILE_RANK];
        t[0] = p;
        if o != 0 {
            partial.insert(byte_of(res, offset(res.pattern.base, &s, &t)), o);
        }
    }
    partial
}
