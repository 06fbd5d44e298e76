//! The operand vocabulary every engine, the interpreter and every observer speak: where an
//! operand's elements are ([`Loc`], [`Pattern`]), one resolved operand ([`Resolved`]) and the
//! operands of one executed instruction ([`Operands`]).
//!
//! Resolution happens once per executed instruction: every operand becomes a [`Resolved`]
//! pattern (memory, dtype, base element, strides, dimensions) for the loop values of that
//! execution, clipped to the instruction's mask. The engine routine and the observer both get
//! these, so that neither re-derives addresses.

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::{
    Axes, AxisIndex, DType, Dir, HbmAccess, Instr, InstrData, MAX_SLOTS, MAX_TILE_RANK, Mask,
    Memory, OperandRef, Program, Scalar, TileDecl, TileView, VarValues,
};

use crate::bind::Bound;
use crate::memory::Psum;

/// Where an operand's elements are: element `(t0, t1, t2, t3)` of its grid is at element
/// `base + Σ strides[j] · tj` of its memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// Offset of element `(0, 0, 0, 0)`.
    pub base: isize,
    /// Stride of each grid dimension (partition first).
    pub strides: [isize; MAX_TILE_RANK],
}

/// Where a resolved operand's elements are.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Loc {
    /// The state buffer (element offsets from its byte 0, in the operand's dtype).
    Sbuf,
    /// The partial-sum buffer.
    Psum,
    /// HBM tensor `t` of the program's tensor table (element offsets into the tensor).
    Hbm(u8),
    /// Not in memory: a grid expression, computed (`iota`, `affine_select`).
    Expr,
    /// Not in memory: an immediate.
    Imm(Scalar),
}

/// One operand of one executed instruction: element `(t0, t1, t2, t3)` of its `dims` is at
/// element `pattern.base + Σ pattern.strides[j] · tj` of its memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The operand's slot in the instruction's format.
    pub slot: u8,
    /// Read, written, or both.
    pub dir: Dir,
    /// Where it is.
    pub loc: Loc,
    /// Element type (of the tile or tensor; `F32` for immediates and expressions).
    pub dtype: DType,
    /// Base element and element strides.
    pub pattern: Pattern,
    /// The elements it covers, per dimension (partition first), after masking.
    pub dims: [usize; MAX_TILE_RANK],
}

impl Resolved {
    /// Whether this operand covers the same elements of the same memory as `other`, read or
    /// written alike.
    pub(crate) fn same_elements(&self, other: &Resolved) -> bool {
        (self.loc, self.dtype, self.pattern, self.dims)
            == (other.loc, other.dtype, other.pattern, other.dims)
    }

    /// Number of elements.
    pub fn elems(&self) -> usize {
        self.dims.iter().product()
    }

    /// Bytes of its memory it reads or writes (its elements times the element size).
    pub fn bytes(&self) -> usize {
        self.elems()
            .saturating_mul(usize::try_from(self.dtype.size()).unwrap_or(usize::MAX))
    }

    /// Its strides over an instruction's grid whose dimensions equal its own up to size-1
    /// dimensions: the partition stride first, then each of the grid's free dimensions of size
    /// above 1 takes the stride of the operand's next free dimension of size above 1; the
    /// grid's size-1 dimensions get stride 0. An operand with fewer such dimensions (a `[P, 1]`
    /// result of a reduction) gets stride 0 along the rest.
    pub fn strides_on(&self, grid: &[usize; MAX_TILE_RANK]) -> [isize; MAX_TILE_RANK] {
        let mut out = [0isize; MAX_TILE_RANK];
        out[0] = self.pattern.strides[0];
        if self.dims == *grid {
            return self.pattern.strides;
        }
        let mut mine = (1..MAX_TILE_RANK).filter(|&j| self.dims[j] != 1);
        for j in (1..MAX_TILE_RANK).filter(|&j| grid[j] != 1) {
            match mine.next() {
                Some(k) => out[j] = self.pattern.strides[k],
                None => break,
            }
        }
        out
    }
}

/// The resolved operands of one executed instruction, by slot.
#[derive(Copy, Clone, Debug, Default)]
pub struct Operands {
    ops: [Option<Resolved>; MAX_SLOTS],
}

impl Operands {
    /// The operand in `slot`. Panics if the instruction has none there: the engines only ask
    /// for the slots their format fills, which the program's checks guarantee.
    #[inline]
    pub fn get(&self, slot: usize) -> &Resolved {
        self.ops[slot]
            .as_ref()
            .expect("a checked program fills every slot its format uses")
    }

    /// The operand in `slot`, if any.
    #[inline]
    pub fn slot(&self, slot: usize) -> Option<&Resolved> {
        self.ops[slot].as_ref()
    }

    /// The operand in `slot`, to change (a timing model's view of what the device reads).
    #[inline]
    pub(crate) fn slot_mut(&mut self, slot: usize) -> Option<&mut Resolved> {
        self.ops.get_mut(slot).and_then(Option::as_mut)
    }

    /// Every operand, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &Resolved> {
        self.ops.iter().flatten()
    }

    /// These operands with `r` in its slot (replacing what was there).
    pub(crate) fn with(mut self, r: Resolved) -> Operands {
        self.ops[usize::from(r.slot)] = Some(r);
        self
    }
}

/// An integer as an element offset or stride, saturating: a saturated offset is out of every
/// memory's range, which the launch's checks refuse.
fn signed<T: TryInto<isize>>(v: T) -> isize {
    v.try_into().unwrap_or(isize::MAX)
}

/// The pattern of a view of `tile` in a memory whose partitions are `stride` bytes apart, in
/// elements of the view's dtype (the tile's, or the one `t.view(dtype)` reads its bytes as).
pub(crate) fn view_pattern(
    view: &TileView,
    tile: &TileDecl<'_>,
    stride: usize,
    vars: &VarValues,
) -> Pattern {
    let size = usize::try_from(view.dtype_of(tile.dtype).size())
        .unwrap_or(1)
        .max(1);
    let part = signed(stride.checked_div(size).unwrap_or(0));
    let addr = signed(
        usize::try_from(tile.addr)
            .unwrap_or(usize::MAX)
            .checked_div(size)
            .unwrap_or(0),
    );
    let base = addr
        .saturating_add(signed(view.part_start).saturating_mul(part))
        .saturating_add(signed(view.part_var.eval(vars)).saturating_mul(part))
        .saturating_add(signed(view.offset.eval(vars)));
    let mut strides = [0isize; MAX_TILE_RANK];
    strides[0] = part;
    for (s, &v) in strides[1..].iter_mut().zip(&view.strides) {
        *s = signed(v);
    }
    Pattern { base, strides }
}

/// The pattern of an HBM access into a row-major tensor with element strides `tensor_strides`
/// (one per axis).
pub(crate) fn hbm_pattern(a: &HbmAccess, tensor_strides: &[usize], vars: &VarValues) -> Pattern {
    let mut base = 0isize;
    let mut strides = [0isize; MAX_TILE_RANK];
    for (ix, &st) in a.axes().iter().zip(tensor_strides) {
        let st = signed(st);
        base = base.saturating_add(signed(ix.start.eval(vars)).saturating_mul(st));
        for (s, &g) in strides.iter_mut().zip(&ix.grid) {
            *s = s.saturating_add(signed(g).saturating_mul(st));
        }
    }
    Pattern { base, strides }
}

fn padded(dims: &[u32]) -> [usize; MAX_TILE_RANK] {
    let mut g = [1usize; MAX_TILE_RANK];
    for (d, &n) in g.iter_mut().zip(dims) {
        *d = n as usize;
    }
    g
}

/// The slot whose dimensions are the instruction's grid: the one a mask's axes refer to (a
/// reduction's source, `random_seed`'s seed, else slot 0).
fn grid_slot(data: &InstrData) -> usize {
    // `random_seed`'s one operand is its seed, in slot 1.
    if reduced_axes(data).is_some() || matches!(data, InstrData::Seed { .. }) {
        1
    } else {
        0
    }
}

/// The grid axes a reduction folds (bit `j`: free axis `j`, grid axis `j + 1`); `None` for the
/// other formats.
fn reduced_axes(data: &InstrData) -> Option<u8> {
    match *data {
        InstrData::Reduce { axes, .. } => Some(axes),
        InstrData::LoopBegin { .. }
        | InstrData::LoopEnd { .. }
        | InstrData::Dma { .. }
        | InstrData::Unary { .. }
        | InstrData::Fill { .. }
        | InstrData::Iota { .. }
        | InstrData::Alu { .. }
        | InstrData::Act { .. }
        | InstrData::Act2 { .. }
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
        | InstrData::Register { .. } => None,
    }
}

/// `[lo, hi)` per grid dimension kept by `mask` at these variable values.
fn mask_box(
    mask: &Mask,
    grid: &[usize; MAX_TILE_RANK],
    vars: &VarValues,
    syms: &[u64],
) -> [(i64, i64); MAX_TILE_RANK] {
    let mut bx = [(0i64, 0i64); MAX_TILE_RANK];
    for (b, &n) in bx.iter_mut().zip(grid) {
        *b = (0, i64::try_from(n).unwrap_or(i64::MAX));
    }
    for t in mask.terms() {
        // coef·x + off < 0, with off = offset(vars) − S.
        let s = t.sym.map_or(0, |s| {
            i64::try_from(syms[usize::from(s)]).unwrap_or(i64::MAX)
        });
        let off = t.offset.eval(vars).saturating_sub(s);
        let (lo, hi) = &mut bx[t.axis as usize];
        match t.coef {
            0 if off >= 0 => *hi = *lo,
            0 => {}
            c if c > 0 => *hi = (*hi).min(div_ceil(off.saturating_neg(), c)),
            c => *lo = (*lo).max(off.div_euclid(c.saturating_neg()).saturating_add(1)),
        }
    }
    bx
}

/// `⌈a / b⌉` for `b > 0` (saturating at `a = i64::MIN`).
fn div_ceil(a: i64, b: i64) -> i64 {
    a.saturating_neg().div_euclid(b).saturating_neg()
}

/// Resolves every operand of `ins` for the variable values `vars`. `None` when the mask keeps
/// no element (the instruction does nothing in this execution).
///
/// An indirect DMA's HBM operand (slot 1, [`InstrData::Indirect`]) has as partition stride
/// the element stride of its indirect axis: partition `p`'s elements are at `base + row(p) ·
/// strides[0] + Σ strides[j] · t_j`, `row(p)` the index column's value at `p`
/// (`crate::indirect`); its other axes have no partition term (the program's checks). A
/// scalar-offset DMA's ([`nki_lang::IndirectMode::Scalar`]) is resolved as a `load`'s or
/// `store`'s, before its offset moves it (`crate::indirect::shifted`).
pub(crate) fn resolve(
    b: &Bound<'_, '_, '_>,
    ins: &Instr,
    vars: &VarValues,
    sbuf_stride: usize,
) -> Option<Operands> {
    let mut out = Operands::default();
    resolve_into(b, ins, vars, sbuf_stride, &mut out).then_some(out)
}

/// [`resolve`] into `out` (the interpreter's one buffer, which it does not copy per
/// instruction): `false` when the mask keeps no element.
pub(crate) fn resolve_into(
    b: &Bound<'_, '_, '_>,
    ins: &Instr,
    vars: &VarValues,
    sbuf_stride: usize,
    out: &mut Operands,
) -> bool {
    out.ops = [None; MAX_SLOTS];
    if !resolve_grid(b, ins, vars, sbuf_stride, out) {
        return false;
    }
    if let InstrData::Indirect {
        hbm,
        axis,
        mode: nki_lang::IndirectMode::Rows,
        ..
    } = ins.data
        && let Some(access) = b.program.accesses().get(hbm.index())
        && let Some(r) = out.slot_mut(1)
    {
        let stride = b.access_strides(access).get(usize::from(axis)).copied();
        r.pattern.strides[0] = signed(stride.unwrap_or(0));
    }
    true
}

/// [`resolve_into`] before an indirect DMA's row stride is set.
fn resolve_grid(
    b: &Bound<'_, '_, '_>,
    ins: &Instr,
    vars: &VarValues,
    sbuf_stride: usize,
    out: &mut Operands,
) -> bool {
    let p: &Program<'_> = b.program;
    for o in ins.operands() {
        let r = match o.operand {
            OperandRef::View(v) => {
                let view = &p.views()[v.index()];
                let tile = &p.tiles()[view.tile as usize];
                let stride = match tile.memory {
                    Memory::Psum => Psum::PARTITION_STRIDE,
                    Memory::Hbm | Memory::Sbuf => sbuf_stride,
                };
                let loc = match tile.memory {
                    Memory::Psum => Loc::Psum,
                    Memory::Hbm | Memory::Sbuf => Loc::Sbuf,
                };
                Resolved {
                    slot: o.slot,
                    dir: o.dir,
                    loc,
                    dtype: view.dtype_of(tile.dtype),
                    pattern: view_pattern(view, tile, stride, vars),
                    dims: padded(view.shape.dims()),
                }
            }
            OperandRef::Access(a) => {
                let access = &p.accesses()[a.index()];
                let strides = b.access_strides(access);
                Resolved {
                    slot: o.slot,
                    dir: o.dir,
                    loc: Loc::Hbm(access.tensor),
                    dtype: p.tensors()[access.tensor as usize].dtype,
                    pattern: {
                        let rank = access.axes().len();
                        let mut pt = hbm_pattern(access, &strides[..rank], vars);
                        let origin = b.origin(usize::from(access.tensor));
                        pt.base = pt.base.saturating_sub(signed(origin));
                        pt
                    },
                    dims: padded(access.shape.dims()),
                }
            }
            OperandRef::Expr(e) => {
                let ex: &AxisIndex = &p.exprs()[e.index()];
                let mut strides = [0isize; MAX_TILE_RANK];
                for (s, &g) in strides.iter_mut().zip(&ex.grid) {
                    *s = signed(g);
                }
                Resolved {
                    slot: o.slot,
                    dir: o.dir,
                    loc: Loc::Expr,
                    dtype: DType::I32,
                    pattern: Pattern {
                        base: signed(ex.start.eval(vars)),
                        strides,
                    },
                    dims: [1; MAX_TILE_RANK],
                }
            }
            OperandRef::Imm(x) => Resolved {
                slot: o.slot,
                dir: o.dir,
                loc: Loc::Imm(x),
                dtype: DType::F32,
                pattern: Pattern {
                    base: 0,
                    strides: [0; MAX_TILE_RANK],
                },
                dims: [1; MAX_TILE_RANK],
            },
        };
        out.ops[o.slot as usize] = Some(r);
    }
    let gs = grid_slot(&ins.data);
    let Some(grid) = out.ops[gs].map(|r| r.dims) else {
        return true;
    };
    for r in out.ops.iter_mut().flatten() {
        if r.loc == Loc::Expr {
            r.dims = grid;
        }
    }
    let Some(m) = ins.mask else {
        return true;
    };
    let bx = mask_box(&p.masks()[m.index()], &grid, vars, &b.syms[..]);
    if bx.iter().any(|&(lo, hi)| lo >= hi) {
        return false;
    }
    let specs = ins.opcode.info().operands;
    let reduced = reduced_axes(&ins.data);
    for r in out.ops.iter_mut().flatten() {
        let axes = specs.get(r.slot as usize).map_or(Axes::Grid, |s| s.axes);
        match (r.loc, axes) {
            // A reduction's result: its axes of size above 1 are the grid's kept axes of size
            // above 1, in order (`Resolved::strides_on`); the mask clips them as it clips the
            // grid, so each kept position is written where an unmasked reduction writes it.
            (Loc::Sbuf | Loc::Psum, Axes::Grid)
                if r.slot == 0
                    && let Some(axes) = reduced =>
            {
                clip_kept(r, &grid, axes, &bx)
            }
            (Loc::Imm(_), _) | (_, Axes::Own) => {}
            // Only its partitions are the grid's: its free elements are read by position.
            (_, Axes::Partitions) => clip(r, 1, &bx),
            (_, Axes::Swapped) => {
                let mut swapped = bx;
                swapped.swap(0, 1);
                clip(r, MAX_TILE_RANK, &swapped);
            }
            // A DMA transpose's source: its axis `axes[i]` runs along grid axis `i`.
            (_, Axes::Ends) => {
                let perm = nki_lang::ops::dma_transpose_padded(grid_rank(p, ins));
                let mut permuted = bx;
                for (i, &a) in perm.iter().enumerate() {
                    permuted[a] = bx[i];
                }
                clip(r, MAX_TILE_RANK, &permuted);
            }
            // An operand with other dimensions than the grid's (a reduction's result) shares
            // only the partition axis.
            (_, Axes::Grid) if r.dims != grid => clip(r, 1, &bx),
            (_, Axes::Grid) => clip(r, MAX_TILE_RANK, &bx),
        }
    }
    true
}

/// Where the elements `resolve` keeps start in the instruction's unmasked grid: the first kept
/// index along each grid dimension (0 without a mask), and the grid's dimensions (those of its
/// grid slot's view). For the instructions whose values depend on an element's position in the
/// grid (the random number generator's).
pub(crate) fn grid_origin(
    b: &Bound<'_, '_, '_>,
    ins: &Instr,
    vars: &VarValues,
) -> ([usize; MAX_TILE_RANK], [usize; MAX_TILE_RANK]) {
    let p: &Program<'_> = b.program;
    let slot = grid_slot(&ins.data);
    let grid = ins
        .operands()
        .find(|o| usize::from(o.slot) == slot)
        .and_then(|o| o.view())
        .and_then(|v| p.views().get(v.index()))
        .map_or([1; MAX_TILE_RANK], |view| padded(view.shape.dims()));
    let mut origin = [0usize; MAX_TILE_RANK];
    if let Some(m) = ins.mask.and_then(|m| p.masks().get(m.index())) {
        let bx = mask_box(m, &grid, vars, &b.syms[..]);
        for (o, &(lo, _)) in origin.iter_mut().zip(&bx) {
            *o = usize::try_from(lo).unwrap_or(0);
        }
    }
    (origin, grid)
}

/// The rank of an instruction's grid: that of its grid slot's view (its destination's), 2
/// when it has none. A DMA transpose permutes its source by it
/// ([`nki_lang::ops::dma_transpose_axes`]).
pub(crate) fn grid_rank(p: &Program<'_>, ins: &Instr) -> usize {
    let slot = grid_slot(&ins.data);
    ins.operands()
        .find(|o| usize::from(o.slot) == slot)
        .and_then(|o| o.view())
        .and_then(|v| p.views().get(v.index()))
        .map_or(2, |view| view.shape.rank())
}

/// Restricts a reduction's result to the mask's box: the partition axis, and each of its free
/// axes of size above 1 by the box of the grid axis it runs along (the grid's kept free axes of
/// size above 1, matched in order, as `Resolved::strides_on` matches them; the reduced axes,
/// bit `j` of `axes` for grid axis `j + 1`, have size 1 in the result or are squeezed away).
fn clip_kept(
    r: &mut Resolved,
    grid: &[usize; MAX_TILE_RANK],
    axes: u8,
    bx: &[(i64, i64); MAX_TILE_RANK],
) {
    let mut kept = [(0i64, 1i64); MAX_TILE_RANK];
    kept[0] = bx[0];
    let folded = |g: usize| {
        u32::try_from(g.saturating_sub(1)).is_ok_and(|j| axes.checked_shr(j).unwrap_or(0) & 1 == 1)
    };
    let mut along = (1..MAX_TILE_RANK).filter(|&g| grid[g] != 1 && !folded(g));
    for d in (1..MAX_TILE_RANK).filter(|&d| r.dims[d] != 1) {
        match along.next() {
            Some(g) if grid[g] == r.dims[d] => kept[d] = bx[g],
            // Not a result laid along the grid: only its partitions are the grid's.
            Some(_) | None => return clip(r, 1, bx),
        }
    }
    for (d, k) in kept.iter_mut().enumerate().skip(1) {
        if r.dims[d] == 1 {
            *k = (0, 1);
        }
    }
    clip(r, MAX_TILE_RANK, &kept)
}

/// Restricts an operand's first `axes` dimensions to the mask's box.
fn clip(r: &mut Resolved, axes: usize, bx: &[(i64, i64); MAX_TILE_RANK]) {
    for (j, &(lo, hi)) in bx.iter().enumerate().take(axes) {
        let lo_at = signed(lo);
        r.pattern.base = r
            .pattern
            .base
            .saturating_add(lo_at.saturating_mul(r.pattern.strides[j]));
        r.dims[j] = usize::try_from(hi.saturating_sub(lo)).unwrap_or(0);
    }
}
