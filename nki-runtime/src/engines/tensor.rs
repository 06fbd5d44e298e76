//! TensorE: `nc_matmul` (fp32 accumulation in PSUM) and `nc_transpose`.

use nki_lang::{DType, MAX_TILE_RANK};

use super::EngineState;
use super::access::{
    Block2d, ChunkBuf, End, Mem, Plan, T_COLS, squeeze, transfer, transpose_blocks,
};
use super::pack_cache::PackCache;
use super::phases::Region;
use super::split::split_rows;
use crate::cpu::Isa;
use crate::cpu::matmul::{
    CopyOut, MatmulScratch, MovingPacking, MovingScratch, NARROW_CHAIN, NARROW_CHAIN_RESULTS,
    NARROW_COLUMNS, NARROW_GROUP_COLUMNS, Operand, Output, PACKED_CHAIN, PackedMoving,
    PackedStationary, Rows, StationaryScratch, matmul as mm_kernel, matmul_chain_prepacked,
    matmul_narrow, matmul_prepacked, moving_split, narrow_chain_compute, narrow_chain_scratch,
    narrow_chain_store, narrow_group_compute, narrow_group_scratch, narrow_group_store,
    pack_moving, pack_stationary, packing_of, shared_packing,
};
use crate::memory::{Psum, Sbuf};
use crate::operand::{Loc, Operands, Pattern, Resolved};
use core::ops::Range;
use std::time::Instant;

use crate::worker::{Reach, Worker, near};

/// Largest contraction size (partitions).
const MAX_K: usize = 128;
/// Largest stationary free size (`gemm_stationary_fmax`).
const MAX_M: usize = 128;
/// Largest moving free size (`gemm_moving_fmax`).
const MAX_N: usize = 512;

/// Moving operands of input tensors whose packings a set of engines keeps for reuse within an
/// execution (`EngineState::packs`): the tiled 1024³ matmul's loop half reads 16 (8 × 2 tiles of
/// `[128, 512]`, about 140 KiB packed each), every one of them once per row block.
pub(crate) const CACHED_MOVING: usize = 16;
/// Stationary operands likewise: the 1024³ loop half reads 32 tiles of `[128, 128]`, each once
/// per column block.
pub(crate) const CACHED_STATIONARY: usize = 32;

/// A moving and a stationary [`PackCache`] of [`CACHED_MOVING`] and [`CACHED_STATIONARY`]
/// slots, their memory allocated now.
pub(crate) fn pack_caches() -> (PackCache, PackCache) {
    (
        PackCache::moving_operands(CACHED_MOVING),
        PackCache::stationary_operands(CACHED_STATIONARY),
    )
}

/// The scratch of a group of matmuls run in one pass by the narrow kernel ([`narrow_phases`]):
/// each stationary column's place in PSUM, and the transposed results. Grown to the largest
/// group once and kept.
#[derive(Default)]
pub(crate) struct GroupScratch {
    places: Vec<i32>,
    results: Vec<f32>,
    /// The widened moving operands of a chain ([`narrow_chain`]), the calling thread's then the
    /// worker's.
    widened: Vec<f32>,
}

/// Whether both parts of a narrow pass hold (each computes into its own results and says
/// whether its exponent proof holds): `lo` on this thread and `hi` on `worker` when there is
/// one, else `hi` here after `lo`, only if `lo` held; a part the worker has not started by the
/// time `lo` is done is computed here.
fn both_parts(
    worker: Option<&mut Worker>,
    lo: impl FnOnce() -> bool,
    mut hi: impl FnMut() -> bool + Send,
) -> bool {
    match worker {
        Some(w) => match w.join_or_leave(lo, &mut hi) {
            (lo_ok, Some(hi_ok)) => lo_ok && hi_ok,
            (lo_ok, None) => lo_ok && hi(),
        },
        None => lo() && hi(),
    }
}

/// The first matmul of a chain (`host::chains`) and the destination every one of them
/// writes, when a chain step may take them: at most [`NARROW_CHAIN`] matmuls, one PSUM
/// destination of whole partitions with contiguous columns, operands in SBUF.
fn chain_destination(chain: &[Operands]) -> Option<(&Operands, Resolved)> {
    let first = chain.first()?;
    let dst = *first.get(0);
    let ok = chain.len() <= NARROW_CHAIN
        && dst.loc == Loc::Psum
        && dst.pattern.base >= 0
        && free_contiguous(&dst.dims, &dst.pattern)
        && (dst.dims[0] <= 1 || usize::try_from(dst.pattern.strides[0]) == Ok(Psum::STRIDE_F32S))
        && chain.iter().all(|ops| {
            ops.get(0).same_elements(&dst)
                && ops.get(1).loc == Loc::Sbuf
                && ops.get(2).loc == Loc::Sbuf
        });
    ok.then_some((first, dst))
}

/// Fewest output rows of a chain ([`narrow_chain`]) that split between the host threads (at
/// a multiple of 16): each thread then reads its half of every matmul's stationary rows.
const NARROW_CHAIN_SPLIT_ROWS: usize = 64;

/// Matmuls `chain` (each one's resolved operands) that accumulate one after another into one
/// PSUM destination (the first with `accumulate`, the others accumulating), their moving
/// operands of at most [`NARROW_COLUMNS`] columns, run as one pass of the narrow kernel
/// (`cpu::matmul::narrow_chain_compute`), its rows split between the host threads when there
/// are enough: the results of the matmuls one after the other, bit for bit. `false`, with
/// nothing written, when the kernel does not take them: operands whose free elements are not
/// contiguous in SBUF, destinations that differ or are not whole partitions with contiguous
/// columns, or what [`matmul_narrow`] declines (for either half).
pub(crate) fn narrow_chain(e: &mut EngineState, chain: &[Operands], accumulate: bool) -> bool {
    let Some((first, dst)) = chain_destination(chain) else {
        return false;
    };
    let EngineState {
        isa,
        sbuf,
        psum,
        group,
        worker,
        ..
    } = e;
    let isa = *isa;
    let Some(first) = view_operands(sbuf, first) else {
        return false;
    };
    let (m, n) = (first.0.cols, first.1.cols);
    // Rows [0, h) here, [h, M) on the worker: each part its stationary operands' columns.
    let h = (m >= NARROW_CHAIN_SPLIT_ROWS)
        .then(|| (m / 2).next_multiple_of(16))
        .filter(|&h| h < m);
    let lo_rows = h.unwrap_or(m);
    let (mut lo, mut hi) = ([first; NARROW_CHAIN], [first; NARROW_CHAIN]);
    for (ops, (l, h)) in chain.iter().zip(lo.iter_mut().zip(hi.iter_mut())) {
        let Some((st, mv)) =
            view_operands(sbuf, ops).filter(|(st, mv)| st.cols == m && mv.cols == n)
        else {
            return false;
        };
        let size = st.dtype.size() as usize;
        *l = (
            Operand {
                cols: lo_rows,
                ..st
            },
            mv,
        );
        *h = (
            Operand {
                offset: st.offset + lo_rows * size,
                cols: m - lo_rows,
                ..st
            },
            mv,
        );
    }
    let (lo, hi) = (&lo[..chain.len()], &hi[..chain.len()]);
    let needed = narrow_chain_scratch(chain.len());
    if group.widened.len() < 2 * needed {
        group.widened.resize(2 * needed, 0.0);
    }
    let (w_lo, w_hi) = group.widened[..2 * needed].split_at_mut(needed);
    let base = dst.pattern.base as usize;
    let rows = |from: usize| Rows {
        offset: base + from * Psum::STRIDE_F32S,
        row_stride: Psum::STRIDE_F32S,
    };
    let mut r_lo = [0f32; NARROW_CHAIN_RESULTS];
    let mut r_hi = [0f32; NARROW_CHAIN_RESULTS];
    let out = psum.f32s();
    let part = |pairs: &[(Operand<'_>, Operand<'_>)], from: usize, w: &mut [f32], r: &mut [f32]| {
        narrow_chain_compute(isa, pairs, (out, rows(from)), accumulate, w, r)
    };
    let taken = both_parts(
        h.and(worker.as_mut()).and_then(near),
        || part(lo, 0, w_lo, &mut r_lo),
        || lo_rows == m || part(hi, lo_rows, w_hi, &mut r_hi),
    );
    if taken {
        let out = psum.f32s_mut();
        narrow_chain_store(isa, (lo_rows, n), (&mut *out, rows(0)), &r_lo);
        if lo_rows < m {
            narrow_chain_store(isa, (m - lo_rows, n), (out, rows(lo_rows)), &r_hi);
        }
    }
    taken
}

/// Matmuls `chain` (each one's resolved operands) that accumulate one after another into one
/// PSUM destination (the first with `accumulate`, the others accumulating), their operands in
/// layouts the packed kernels take (moving operands wider than the narrow kernel's), run with
/// the output's rows split once between the host threads for the whole chain: each thread
/// packs every matmul's moving operand and its columns of the stationary one and computes its
/// rows, matmul after matmul (the NKI Library's router accumulates 16 `[128, 128]` products
/// per token tile; one hand-over per matmul costs about a tenth of its time), as one pass of
/// the kernel whose accumulators stay in registers from the first matmul to the last where its
/// layout keeps chains so ([`matmul_chain_prepacked`]). Each row is computed exactly as the
/// matmuls one after the other compute it. `false`, with nothing written, when the chain does
/// not split: operands whose free elements are not contiguous in SBUF or that differ in shape
/// or packing, destinations that differ or are not whole partitions with contiguous columns,
/// too little work, or no worker nearby.
pub(crate) fn packed_chain(
    e: &mut EngineState,
    chain: &[Operands],
    accumulate: bool,
    inputs: &[[Option<HbmOperand<'_>>; 2]],
) -> bool {
    let Some((_, dst)) = chain_destination(chain) else {
        return false;
    };
    let EngineState {
        isa,
        sbuf,
        psum,
        mm,
        mm_worker,
        worker,
        chain: scratch,
        ..
    } = e;
    let isa = *isa;
    let operands_of = |i: usize| link_operands(sbuf, chain, inputs, i);
    let Some(first) = operands_of(0) else {
        return false;
    };
    let (rows, n) = (first.0.cols, first.1.cols);
    let Some(packing) = shared_packing(isa, &first.0, &first.1) else {
        return false;
    };
    let mut links = [first; NARROW_CHAIN];
    let mut k = 0usize;
    for (i, l) in links.iter_mut().enumerate().take(chain.len()) {
        let Some(link) = operands_of(i).filter(|(s, m)| {
            s.cols == rows
                && m.cols == n
                && s.rows == m.rows
                && shared_packing(isa, s, m) == Some(packing)
        }) else {
            return false;
        };
        k = k.saturating_add(link.0.rows);
        *l = link;
    }
    // Operands read from the inputs alone are never written while the kernel runs: the
    // threads share no line that either writes, so the chain splits even while the worker's
    // core is far (as a matmul of inputs does).
    let from_inputs =
        chain.len() == inputs.len() && inputs.iter().all(|[s, m]| s.is_some() && m.is_some());
    let split_with = |w: &mut Worker| -> Option<()> {
        match w.reach() {
            Reach::Near => Some(()),
            Reach::Far if from_inputs => Some(()),
            Reach::Far | Reach::Away => None,
        }
    };
    let Some((worker, h)) = split_rows(k, rows, n).and_then(|h| {
        let w = worker.as_mut()?;
        split_with(w)?;
        Some((w, h))
    }) else {
        return false;
    };
    let links = &links[..chain.len()];
    let (mut out_lo, mut out_hi) = split_output(psum, dst.pattern.base as usize, h);
    // The rows `cols` of every link: packed into one scratch per link and run as one pass of
    // the kernel, each block of results in registers from the first link to the last, when the
    // layout keeps chains so; else one link after the other, packed into `one`.
    let in_registers = packing.chains_in_registers() && links.len() <= PACKED_CHAIN;
    if in_registers {
        for s in [&mut scratch.links, &mut scratch.worker_links] {
            if s.len() < links.len() {
                s.resize_with(links.len(), MatmulScratch::new);
            }
        }
    }
    let part = |one: &mut MatmulScratch,
                each: &mut [MatmulScratch],
                cols: Range<usize>,
                out: &mut Output<'_>| {
        if in_registers {
            let mut packed = [None; PACKED_CHAIN];
            for ((s, m), (p, scratch)) in links.iter().zip(packed.iter_mut().zip(each)) {
                let (a, mut b) = scratch.parts();
                let (_, words) = b.split(packing, m.rows, 0);
                let key = pack_moving(isa, packing, words, m, 0..n);
                let moving = b.packed(packing, m.shape(), key);
                *p = Some((pack_stationary(isa, packing, a, &columns(s, &cols)), moving));
            }
            if run_packed(isa, &packed[..links.len()], out, accumulate) {
                return;
            }
        }
        for (i, (s, m)) in links.iter().enumerate() {
            let (a, mut b) = one.parts();
            let (_, words) = b.split(packing, m.rows, 0);
            let key = pack_moving(isa, packing, words, m, 0..n);
            let packed = b.packed(packing, m.shape(), key);
            let a = pack_stationary(isa, packing, a, &columns(s, &cols));
            matmul_prepacked(isa, &a, &packed, out, None, accumulate || i > 0);
        }
    };
    let ChainScratch {
        links: each_lo,
        worker_links: each_hi,
    } = scratch;
    // A worker half not started by the time this thread's rows are done (its vCPU busy) is
    // computed here.
    let mut hi = || part(mm_worker, each_hi, h..rows, &mut out_hi);
    if worker
        .join_or_leave(|| part(mm, each_lo, 0..h, &mut out_lo), &mut hi)
        .1
        .is_none()
    {
        hi();
    }
    true
}

/// Link `i`'s stationary and moving operands of a chain of matmuls (`chain`, each one's
/// resolved operands): read from the inputs where `inputs` has them, else views of SBUF (when
/// their free elements are contiguous).
fn link_operands<'a>(
    sbuf: &'a Sbuf,
    chain: &[Operands],
    inputs: &[[Option<HbmOperand<'a>>; 2]],
    i: usize,
) -> Option<(Operand<'a>, Operand<'a>)> {
    let ops = chain.get(i)?;
    let from = inputs.get(i).copied().unwrap_or([None; 2]);
    let s = from[0].map_or_else(|| view_operand(sbuf, ops.get(1)), |f| Some(hbm_operand(&f)));
    let m = from[1].map_or_else(|| view_operand(sbuf, ops.get(2)), |f| Some(hbm_operand(&f)));
    s.zip(m)
}

/// Columns `cols` of a matmul operand.
fn columns<'a>(s: &Operand<'a>, cols: &Range<usize>) -> Operand<'a> {
    Operand {
        offset: s.offset + cols.start * s.dtype.size() as usize,
        cols: cols.len(),
        ..*s
    }
}

/// The scratch of the matmul chains run as one pass of the kernel ([`register_chain`],
/// [`packed_chain`]): one packing of both operands per matmul, grown to the longest chain once
/// and kept.
#[derive(Default)]
pub(crate) struct ChainScratch {
    links: Vec<MatmulScratch>,
    /// The worker's, for its rows of a chain split between the threads.
    worker_links: Vec<MatmulScratch>,
}

/// Where a chain's link finds its packed operand.
#[derive(Copy, Clone)]
enum Held {
    /// In the pack cache, at that version.
    Cached(Option<u64>),
    /// Packed for this chain, in the link's scratch.
    Here,
}

/// Matmuls `chain` (each one's resolved operands; `inputs`: those read from the inputs, as in
/// [`packed_chain`]) that accumulate one after another into one PSUM destination (the first
/// with `accumulate`, the others accumulating), run on this thread as one pass of the kernel:
/// each block of results stays in registers from the first matmul to the last
/// ([`matmul_chain_prepacked`]), instead of a store and a load between two of them. Operands
/// read from the inputs, and moving operands in SBUF read again, come from the pack caches as
/// a lone matmul's do. The bits of the matmuls one after the other. `false`, with nothing
/// written, when the chain does not run so: operands whose free elements are not contiguous or
/// that differ in shape or packing, a layout whose kernel runs the matmuls one by one anyway,
/// more than [`PACKED_CHAIN`] matmuls, or destinations that differ or are not whole partitions
/// with contiguous columns.
pub(crate) fn register_chain(
    e: &mut EngineState,
    chain: &[Operands],
    accumulate: bool,
    inputs: &[[Option<HbmOperand<'_>>; 2]],
) -> bool {
    let Some((_, dst)) = chain_destination(chain) else {
        return false;
    };
    if chain.len() > PACKED_CHAIN || inputs.len() != chain.len() {
        return false;
    }
    let EngineState {
        isa,
        sbuf,
        psum,
        packs,
        chain: scratch,
        ..
    } = e;
    let isa = *isa;
    let operands_of = |i: usize| link_operands(sbuf, chain, inputs, i);
    let Some(first) = operands_of(0) else {
        return false;
    };
    let Some(packing) = shared_packing(isa, &first.0, &first.1) else {
        return false;
    };
    if !packing.chains_in_registers() {
        return false;
    }
    let empty = (first, Held::Here, Held::Here);
    let mut links = [empty; PACKED_CHAIN];
    for (i, l) in links.iter_mut().enumerate().take(chain.len()) {
        let Some((s, m)) = operands_of(i).filter(|(s, m)| {
            s.shape() == first.0.shape()
                && m.shape() == first.1.shape()
                && shared_packing(isa, s, m) == Some(packing)
        }) else {
            return false;
        };
        let from = inputs.get(i).copied().unwrap_or([None; 2]);
        *l = ((s, m), Held::Here, Held::Here);
        // The pack caches as a lone matmul uses them: whatever they pack now or find stays
        // theirs; the packings are read once all are in place.
        let (cached_m, cached_s) = &mut *packs;
        let kept = match from[1] {
            Some(f) => Kept::Input(f.version),
            None => sbuf_kept(sbuf, &m),
        };
        let found = match kept {
            Kept::No => None,
            Kept::Input(v) => cached_m.moving(isa, packing, &m, v).map(|_| v),
            Kept::Sbuf(v) => cached_m.moving_reused(isa, packing, &m, v).map(|_| Some(v)),
        };
        if let Some(v) = found {
            l.1 = Held::Cached(v);
        }
        if let Some(f) = from[0]
            && cached_s.stationary(isa, packing, &s, f.version).is_some()
        {
            l.2 = Held::Cached(f.version);
        }
    }
    let links = &mut links[..chain.len()];
    // A packing that a later link pushed out of a cache (more links than its slots) is packed
    // here.
    let (cached_m, cached_s) = &*packs;
    for ((s, m), hm, hs) in links.iter_mut() {
        if let Held::Cached(v) = *hm
            && cached_m.held_moving(packing, m, v).is_none()
        {
            *hm = Held::Here;
        }
        if let Held::Cached(v) = *hs
            && cached_s.held_stationary(packing, s, v).is_none()
        {
            *hs = Held::Here;
        }
    }
    if scratch.links.len() < links.len() {
        scratch.links.resize_with(links.len(), MatmulScratch::new);
    }
    let mut packed = [None; PACKED_CHAIN];
    for (((s, m), hm, hs), (p, mm)) in links
        .iter()
        .zip(packed.iter_mut().zip(scratch.links.iter_mut()))
    {
        let (a, mut b) = mm.parts();
        let moving = match *hm {
            Held::Cached(v) => cached_m.held_moving(packing, m, v),
            Held::Here => {
                let (_, words) = b.split(packing, m.rows, 0);
                let key = pack_moving(isa, packing, words, m, 0..m.cols);
                Some(b.packed(packing, m.shape(), key))
            }
        };
        let stationary = match *hs {
            Held::Cached(v) => cached_s.held_stationary(packing, s, v),
            Held::Here => Some(pack_stationary(isa, packing, a, s)),
        };
        *p = stationary.zip(moving);
    }
    let mut out = Output {
        data: psum.f32s_mut(),
        offset: dst.pattern.base as usize,
        row_stride: Psum::STRIDE_F32S,
    };
    run_packed(isa, &packed[..links.len()], &mut out, accumulate)
}

/// Runs the chain of matmuls whose packed operands are `packed`, in order, as one pass of the
/// kernel ([`matmul_chain_prepacked`]); `false`, with nothing written, when a link has none
/// or there are more than [`PACKED_CHAIN`].
fn run_packed(
    isa: Isa,
    packed: &[Option<(PackedStationary<'_>, PackedMoving<'_>)>],
    out: &mut Output<'_>,
    accumulate: bool,
) -> bool {
    let Some(&Some(first)) = packed.first().filter(|_| packed.len() <= PACKED_CHAIN) else {
        return false;
    };
    let mut pairs = [first; PACKED_CHAIN];
    for (pair, p) in pairs.iter_mut().zip(packed) {
        let Some(p) = *p else {
            return false;
        };
        *pair = p;
    }
    matmul_chain_prepacked(isa, &pairs[..packed.len()], out, None, accumulate);
    true
}

/// Matmuls that each read phase `o` of a column-strided SBUF `region` (its columns `o`,
/// `o + stride`, …: `host::strided`) as their stationary operand, all with the moving operand
/// `moving` and `accumulate` alike, each into its own PSUM rows (`group`: each one's phase and
/// destination), run in one pass over the region by the narrow kernel: the phases' columns in
/// the vector lanes (column `j` of phases `o0..o0 + R` is a run of `R` adjacent elements), each
/// result scattered to its matmul's row and column. The results of the matmuls one after the
/// other, bit for bit. `false`, with nothing written, when the kernel does not take them: a
/// moving operand of more than [`NARROW_COLUMNS`] columns, phases that are not one run of
/// distinct adjacent ones (of a multiple of 16, or all of them), destinations that are not whole
/// PSUM partitions or that share an element, or what [`matmul_narrow`] declines.
pub(crate) fn narrow_phases(
    e: &mut EngineState,
    region: &Region,
    moving: &Resolved,
    group: &[(usize, Resolved)],
    accumulate: bool,
) -> bool {
    let n: usize = moving.dims[1..].iter().product();
    let size = region.dtype.size() as usize;
    // The phases: one run `o0..o0 + R` of distinct ones, `R` a multiple of 16 or all of them.
    let (Some(o0), Some(o1)) = (
        group.iter().map(|g| g.0).min(),
        group.iter().map(|g| g.0).max(),
    ) else {
        return false;
    };
    let run = o1 - o0 + 1;
    let rows = group.iter().map(|g| g.1.dims[0]).max().unwrap_or(0);
    let all = run == region.stride;
    let shape_ok = (1..=NARROW_COLUMNS).contains(&n)
        && moving.loc == Loc::Sbuf
        && moving.dims[0] == region.rows
        && region.rows > 0
        && (1..=region.cols).contains(&rows)
        && run == group.len()
        && (all || run.is_multiple_of(16))
        && rows.saturating_mul(run) <= NARROW_GROUP_COLUMNS
        && region.base >= 0
        && (region.rows == 1 || region.partition_stride > 0);
    if !shape_ok {
        return false;
    }
    // Each destination: rows of whole PSUM partitions, its `n` columns contiguous within one;
    // no two destinations share an element (rectangles of partitions × columns).
    let part = Psum::STRIDE_F32S;
    let rect = |d: &Resolved| -> Option<(usize, usize, usize, usize)> {
        let base = usize::try_from(d.pattern.base).ok()?;
        let (p0, c0) = (base / part, base % part);
        let rows = d.dims[0];
        let ok = d.loc == Loc::Psum
            && d.dtype == DType::F32
            && free_contiguous(&d.dims, &d.pattern)
            && d.dims[1..].iter().product::<usize>() == n
            && (rows <= 1 || usize::try_from(d.pattern.strides[0]) == Ok(part))
            && c0 + n <= part
            && p0 + rows <= 128;
        ok.then_some((p0, p0 + rows, c0, c0 + n))
    };
    for (i, (_, d)) in group.iter().enumerate() {
        let Some((a0, a1, b0, b1)) = rect(d) else {
            return false;
        };
        let meets = group[..i].iter().any(|(_, o)| {
            rect(o).is_some_and(|(c0, c1, d0, d1)| a0 < c1 && c0 < a1 && b0 < d1 && d0 < b1)
        });
        if meets {
            return false;
        }
    }
    let EngineState {
        isa,
        sbuf,
        psum,
        chunks,
        packed,
        group: scratch,
        worker,
        ..
    } = e;
    let isa = *isa;
    // Column `q = j · R + (o − o0)` of the pass is row `j` of the matmul on phase `o`: region
    // element `j · stride + o`. With every phase in the run, the columns are adjacent.
    let cols = rows * run;
    let (runs, span) = if all {
        ((cols, 0), cols)
    } else {
        ((run, region.stride), (rows - 1) * region.stride + run)
    };
    let offset = (region.base as usize + o0) * size;
    let row_stride = region.partition_stride.max(0) as usize * size;
    let end = (region.rows - 1)
        .checked_mul(row_stride)
        .and_then(|x| x.checked_add(offset))
        .and_then(|x| x.checked_add(span.checked_mul(size)?));
    if end.is_none_or(|end| end > sbuf.bytes().len()) {
        return false;
    }
    scratch.places.clear();
    scratch.places.resize(cols, -1);
    for (phase, d) in group {
        let base = d.pattern.base as usize;
        for j in 0..d.dims[0] {
            // A column with a place already: two matmuls on one phase.
            let (Some(slot), Ok(at)) = (
                scratch.places.get_mut(j * run + (phase - o0)),
                i32::try_from(base + j * part),
            ) else {
                return false;
            };
            if *slot >= 0 {
                return false;
            }
            *slot = at;
        }
    }
    // The columns split between the threads at a multiple of the runs and of 128 (each part's
    // vectors adjacent, its scratch its own), when there are enough to pay for the hand-over.
    let unit = if all { 128 } else { lcm(run, 128) };
    let h = (cols / 2).next_multiple_of(unit);
    let split = (cols >= NARROW_GROUP_SPLIT && h < cols).then_some(h);
    let lo = split.unwrap_or(cols);
    let (need_lo, need_hi) = (
        narrow_group_scratch(lo, n),
        narrow_group_scratch(cols - lo, n),
    );
    if scratch.results.len() < need_lo + need_hi {
        scratch.results.resize(need_lo + need_hi, 0.0);
    }
    let st = Operand {
        data: sbuf.bytes(),
        dtype: region.dtype,
        offset,
        row_stride,
        rows: region.rows,
        cols: lo,
    };
    // Columns from `lo` on: `lo` is a multiple of the run, so they start a run.
    let st_hi = Operand {
        offset: offset + (lo / runs.0) * runs.1 * size + (lo % runs.0) * size,
        cols: cols - lo,
        ..st
    };
    let runs_hi = if all { (cols - lo, 0) } else { runs };
    let mv = operand(isa, chunks, sbuf, moving, &mut packed.moving);
    let (places_lo, places_hi) = scratch.places[..cols].split_at(lo);
    let (res_lo, rest) = scratch.results.split_at_mut(need_lo);
    let res_hi = &mut rest[..need_hi];
    let out = psum.f32s();
    let mv = &mv;
    let part = |st: &Operand, runs, places: &[i32], results: &mut [f32]| {
        narrow_group_compute(isa, (st, runs), mv, (out, places), accumulate, results)
    };
    let taken = both_parts(
        split.and(worker.as_mut()).and_then(near),
        || part(&st, runs, places_lo, res_lo),
        || lo == cols || part(&st_hi, runs_hi, places_hi, res_hi),
    );
    if taken {
        let out = psum.f32s_mut();
        narrow_group_store(isa, n, (&mut *out, places_lo), res_lo);
        if lo < cols {
            narrow_group_store(isa, n, (out, places_hi), res_hi);
        }
    }
    taken
}

/// Fewest columns of a narrow matmul group ([`narrow_phases`]) split between the host threads:
/// such a pass reads 256 bytes of each of 128 partitions per 128 bf16 columns, about a
/// microsecond, against about as much to hand half of it over.
const NARROW_GROUP_SPLIT: usize = 2048;

/// The least common multiple of two positive numbers.
fn lcm(a: usize, b: usize) -> usize {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x.max(1) * b
}

/// Contiguous copies of operands whose free elements are not contiguous in their tile.
pub(crate) struct Packed {
    stationary: Vec<u8>,
    moving: Vec<u8>,
    out: Vec<f32>,
}

impl Packed {
    pub(crate) fn new() -> Self {
        Packed {
            stationary: vec![0; MAX_K * MAX_M * 4],
            moving: vec![0; MAX_K * MAX_N * 4],
            out: vec![0.0; MAX_M * MAX_N],
        }
    }
}

/// Row-major element strides of a grid.
fn row_major(g: &[usize; MAX_TILE_RANK]) -> [isize; MAX_TILE_RANK] {
    let mut s = [0isize; MAX_TILE_RANK];
    let mut acc = 1isize;
    for j in (0..MAX_TILE_RANK).rev() {
        s[j] = acc;
        acc *= g[j] as isize;
    }
    s
}

/// The [`CopyOut`] of elements `to` of `mem` (a tile in SBUF, or an output tensor's bytes),
/// the slice holding its row 0 at byte `offset`.
fn copy_out<'a>(mem: &'a mut [u8], to: &Resolved, offset: usize) -> CopyOut<'a> {
    let size = to.dtype.size() as usize;
    CopyOut {
        data: mem,
        dtype: to.dtype,
        offset,
        row_stride: to.pattern.strides[0] as usize * size,
    }
}

/// A matmul operand read from an input tensor instead of the tile a skipped load would have
/// filled: the same elements, in the same order.
#[derive(Copy, Clone, Debug)]
pub(crate) struct HbmOperand<'i> {
    /// The input tensor's bytes.
    pub data: &'i [u8],
    /// The input tensor's version ([`crate::bind::HbmIn`]): packings of a versioned tensor
    /// outlive the launch.
    pub version: Option<u64>,
    /// The load's HBM side.
    pub hbm: Resolved,
}

/// Where a matmul's fused copy writes.
pub(crate) enum CopyTo<'h> {
    /// The copy's tile in SBUF (its destination operand).
    Sbuf(Resolved),
    /// An output tensor's bytes and the HBM side of the store that followed the copy, whose
    /// tile that store alone read.
    Hbm(&'h mut [u8], Resolved),
}

/// The memory and elements a fused copy writes.
fn copy_target<'a>(sbuf: &'a mut Sbuf, copy: CopyTo<'a>) -> (&'a mut [u8], Resolved) {
    match copy {
        CopyTo::Sbuf(to) => (sbuf.bytes_mut(), to),
        CopyTo::Hbm(mem, to) => (mem, to),
    }
}

/// The [`CopyOut`] of all of a fused copy's rows.
fn whole_copy<'a>(mem: &'a mut [u8], to: &Resolved) -> CopyOut<'a> {
    let start = to.pattern.base as usize * to.dtype.size() as usize;
    copy_out(mem, to, start)
}

/// The [`CopyOut`]s of a fused copy's rows `[0, h)` and from `h` on, in disjoint parts of its
/// memory.
fn split_copy<'a>(mem: &'a mut [u8], to: &Resolved, h: usize) -> (CopyOut<'a>, CopyOut<'a>) {
    let size = to.dtype.size() as usize;
    let start = to.pattern.base as usize * size;
    let at = (start + h * to.pattern.strides[0] as usize * size).min(mem.len());
    let (lo, hi) = mem.split_at_mut(at);
    (copy_out(lo, to, start), copy_out(hi, to, 0))
}

/// The stationary operand's columns (the output's rows) `[0, h)` and from `h` on.
fn split_stationary<'a>(s: &Operand<'a>, h: usize) -> (Operand<'a>, Operand<'a>) {
    let size = s.dtype.size() as usize;
    let hi = Operand {
        offset: s.offset + h * size,
        cols: s.cols - h,
        ..*s
    };
    (Operand { cols: h, ..*s }, hi)
}

/// The [`Output`]s of a PSUM result's rows `[0, h)` (its row 0 at element `offset`) and from
/// `h` on.
fn split_output(psum: &mut Psum, offset: usize, h: usize) -> (Output<'_>, Output<'_>) {
    let row_stride = Psum::STRIDE_F32S;
    let (lo, hi) = psum.f32s_mut().split_at_mut(offset + h * row_stride);
    let lo = Output {
        data: lo,
        offset,
        row_stride,
    };
    let hi = Output {
        data: hi,
        offset: 0,
        row_stride,
    };
    (lo, hi)
}

/// The [`CopyOut`]s of a fused copy's rows `[0, h)` and from `h` on, if there is a copy.
fn split_copies<'a>(
    sbuf: &'a mut Sbuf,
    copy: Option<CopyTo<'a>>,
    h: usize,
) -> (Option<CopyOut<'a>>, Option<CopyOut<'a>>) {
    match copy.map(|c| copy_target(sbuf, c)) {
        Some((mem, to)) => {
            let (lo, hi) = split_copy(mem, &to, h);
            (Some(lo), Some(hi))
        }
        None => (None, None),
    }
}

/// Whether a view's free elements are one contiguous run in each partition.
pub(crate) fn free_contiguous(g: &[usize; MAX_TILE_RANK], pat: &Pattern) -> bool {
    let mut free = *g;
    free[0] = 1;
    squeeze(&free, &pat.strides).is_contiguous()
}

/// A matmul operand `[K, cols]` read from an input tensor (each partition one contiguous run of
/// it, as [`HbmOperand`] guarantees).
fn hbm_operand<'a>(f: &HbmOperand<'a>) -> Operand<'a> {
    let r = &f.hbm;
    let size = r.dtype.size() as usize;
    Operand {
        data: f.data,
        dtype: r.dtype,
        offset: r.pattern.base as usize * size,
        row_stride: r.pattern.strides[0] as usize * size,
        rows: r.dims[0],
        cols: r.dims[1..].iter().product(),
    }
}

/// A matmul operand `[K, cols]` for a view in SBUF whose free elements are contiguous: the
/// view itself (`None` for another view).
fn view_operand<'a>(sbuf: &'a Sbuf, r: &Resolved) -> Option<Operand<'a>> {
    let size = r.dtype.size() as usize;
    free_contiguous(&r.dims, &r.pattern).then(|| Operand {
        data: sbuf.bytes(),
        dtype: r.dtype,
        offset: r.pattern.base as usize * size,
        row_stride: sbuf.partition_stride(),
        rows: r.dims[0],
        cols: r.dims[1..].iter().product(),
    })
}

/// A matmul's stationary and moving operands as views of SBUF itself ([`view_operand`]), when
/// the free elements of both are contiguous.
fn view_operands<'a>(sbuf: &'a Sbuf, ops: &Operands) -> Option<(Operand<'a>, Operand<'a>)> {
    view_operand(sbuf, ops.get(1)).zip(view_operand(sbuf, ops.get(2)))
}

/// A matmul operand `[K, cols]` for a view in SBUF: the view itself when its free elements are
/// contiguous, else a packed copy in `pack`.
fn operand<'a>(
    isa: Isa,
    chunks: &mut ChunkBuf,
    sbuf: &'a Sbuf,
    r: &Resolved,
    pack: &'a mut [u8],
) -> Operand<'a> {
    if let Some(op) = view_operand(sbuf, r) {
        return op;
    }
    let size = r.dtype.size() as usize;
    let (g, pat) = (r.dims, r.pattern);
    let rows = g[0];
    let cols = g[1..].iter().product();
    let packed = Pattern {
        base: 0,
        strides: row_major(&g),
    };
    let end = |base| End {
        dtype: r.dtype,
        base,
    };
    let plan = Plan::for_grid(&g, &pat, &packed);
    transfer(
        isa,
        chunks,
        Mem::Two(sbuf.bytes(), pack),
        end(pat.base),
        end(0),
        &plan,
    );
    Operand {
        data: pack,
        dtype: r.dtype,
        offset: 0,
        row_stride: cols * size,
        rows,
        cols,
    }
}

/// Whether the `tensor_copy` with operands `copy`, run right after the matmul with operands
/// `mm`, can run as part of it ([`matmul`] with `copy`): it converts exactly the matmul's PSUM
/// result to bf16 or f32, into SBUF partitions whose free elements are contiguous, and the
/// matmul takes a path that packs both operands before it computes (so that the copy's writes
/// cannot change what it reads, even when the copy's tile overlaps an operand's).
pub(crate) fn copy_fuses(e: &EngineState, mm: &Operands, copy: &Operands) -> bool {
    let (dst, stationary, moving) = (mm.get(0), mm.get(1), mm.get(2));
    let (to, from) = (copy.get(0), copy.get(1));
    let rows_apart = to.dims[0] == 1
        || usize::try_from(to.pattern.strides[0] * to.dtype.size() as isize)
            == Ok(e.sbuf.partition_stride());
    dst.loc == Loc::Psum
        && free_contiguous(&dst.dims, &dst.pattern)
        && from.loc == Loc::Psum
        && from.dtype == DType::F32
        && from.pattern == dst.pattern
        && from.dims == dst.dims
        && to.loc == Loc::Sbuf
        && matches!(to.dtype, DType::Bf16 | DType::F32)
        && to.dims == dst.dims
        && to.pattern.base >= 0
        && free_contiguous(&to.dims, &to.pattern)
        && rows_apart
        && packing_of(e.isa, stationary.dtype, moving.dtype).is_some()
}

/// Whether a matmul's moving operand has a packing worth keeping, and of which memory.
#[derive(Copy, Clone)]
enum Kept {
    /// Packed for this matmul alone (an operand copied out of a strided view, or a phase).
    No,
    /// Read straight from an input tensor (of that version, if it has one): kept.
    Input(Option<u64>),
    /// A view of SBUF whose bytes are at that version (`Sbuf::version`): kept once it is read
    /// again (`PackCache::moving_reused`).
    Sbuf(u64),
}

/// [`Kept`] for operand `op` from [`operand`]: a view of SBUF itself at its bytes' version, or
/// a copy.
fn sbuf_kept(sbuf: &Sbuf, op: &Operand) -> Kept {
    if !core::ptr::eq(op.data, sbuf.bytes()) {
        return Kept::No;
    }
    let start = op.offset % sbuf.partition_stride();
    let end = op
        .cols
        .saturating_mul(op.dtype.size() as usize)
        .saturating_add(start);
    sbuf.version(start..end).map_or(Kept::No, Kept::Sbuf)
}

/// The packing of a matmul's moving operand `m` in layout `packing`: from `cache` as `kept`
/// says, else packed now into `scratch`.
fn moving_packing<'c>(
    isa: Isa,
    packing: MovingPacking,
    cache: &'c mut PackCache,
    kept: Kept,
    mut scratch: MovingScratch<'c>,
    m: &Operand,
) -> PackedMoving<'c> {
    let cached = match kept {
        Kept::No => None,
        Kept::Input(version) => cache.moving(isa, packing, m, version),
        Kept::Sbuf(version) => cache.moving_reused(isa, packing, m, version),
    };
    if let Some(p) = cached {
        return p;
    }
    let (_, words) = scratch.split(packing, m.rows, 0);
    let key = pack_moving(isa, packing, words, m, 0..m.cols);
    scratch.packed(packing, m.shape(), key)
}

/// The packing of a matmul's stationary operand `s`, as [`moving_packing`].
fn stationary_packing<'c>(
    isa: Isa,
    packing: MovingPacking,
    cache: &'c mut PackCache,
    from: Option<HbmOperand<'_>>,
    scratch: StationaryScratch<'c>,
    s: &Operand,
) -> PackedStationary<'c> {
    match from.and_then(|f| cache.stationary(isa, packing, s, f.version)) {
        Some(p) => p,
        None => pack_stationary(isa, packing, scratch, s),
    }
}

/// `nc_matmul`: `dst[m, n] (=|+=) Σ_k stationary[k, m] · moving[k, n]` in fp32 with the
/// accumulation order of [`crate::cpu::matmul`]; with `copy` (a `tensor_copy` of `dst` for
/// which [`copy_fuses`] holds: its tile, or the output its store went to), each result is also
/// converted into it as it is computed. An operand in `from_hbm` (stationary, moving) is read
/// from the input tensor a skipped load would have copied it from.
pub(crate) fn matmul<'h>(
    e: &'h mut EngineState,
    ops: &Operands,
    accumulate: bool,
    copy: Option<CopyTo<'h>>,
    from_hbm: [Option<HbmOperand<'_>>; 2],
) {
    let (dst, stationary, moving) = (ops.get(0), ops.get(1), ops.get(2));
    let EngineState {
        isa,
        sbuf,
        psum,
        chunks,
        mm,
        mm_worker,
        worker,
        packed,
        phases,
        packs,
        packs_worker,
        row_share: share,
        ..
    } = e;
    let isa = *isa;
    let Packed {
        stationary: ps,
        moving: pm,
        out: po,
    } = packed;
    let [fs, fm] = from_hbm;
    // An operand of a de-interleaved column-strided region (`host::strided`) is read from its
    // phase: the same elements, contiguous.
    let s = match (fs, phases.operand(stationary)) {
        (Some(f), _) => hbm_operand(&f),
        (None, Some(op)) => op,
        (None, None) => operand(isa, chunks, sbuf, stationary, ps),
    };
    let (m, kept) = match (fm, phases.operand(moving)) {
        (Some(f), _) => (hbm_operand(&f), Kept::Input(f.version)),
        (None, Some(op)) => (op, Kept::No),
        (None, None) => {
            let op = operand(isa, chunks, sbuf, moving, pm);
            let kept = sbuf_kept(sbuf, &op);
            (op, kept)
        }
    };
    let n = m.cols;
    let (dp, g) = (dst.pattern, dst.dims);
    let row_stride = Psum::STRIDE_F32S;
    // A narrow moving operand (decode attention's few query columns): the output's rows in the
    // vector lanes and the stationary operand read where it lies, when the kernel takes these
    // operands; else the packed paths below.
    if copy.is_none() && n <= NARROW_COLUMNS && free_contiguous(&g, &dp) {
        let mut out = Output {
            data: psum.f32s_mut(),
            offset: dp.base as usize,
            row_stride,
        };
        if matmul_narrow(isa, &s, &m, &mut out, accumulate) {
            return;
        }
    }
    if free_contiguous(&g, &dp)
        && let Some(packing) = shared_packing(isa, &s, &m)
    {
        // Both operands packed first, then the rows computed (and copied): the moving
        // operand once, in halves of its panels when two threads split the rows.
        let offset = dp.base as usize;
        let (k, rows) = (s.rows, s.cols);
        let shape = m.shape();
        let (a, mut b) = mm.parts();
        let split = split_rows(k, rows, n);
        // Operands read straight from input tensors are never written while the kernel runs:
        // two threads that each pack their own copy of them share no line that either writes,
        // so the split pays even while the worker's core is far.
        let inputs = fs.zip(fm);
        let split_with = |w: &'h mut Worker| if inputs.is_some() { Some(w) } else { near(w) };
        let Some((worker, h)) = split.and(worker.as_mut()).and_then(split_with).zip(split) else {
            // An operand read from an input tensor is packed once per execution (or once for
            // every launch while a device tensor keeps its version), a moving operand of SBUF
            // once per version of its bytes when it is read again (`Kept`).
            let (cached_m, cached_s) = packs;
            let packed = moving_packing(isa, packing, cached_m, kept, b, &m);
            let a = stationary_packing(isa, packing, cached_s, fs, a, &s);
            let mut out = Output {
                data: psum.f32s_mut(),
                offset,
                row_stride,
            };
            let target = copy.map(|c| copy_target(sbuf, c));
            let mut c = target.map(|(mem, to)| whole_copy(mem, &to));
            return matmul_prepacked(isa, &a, &packed, &mut out, c.as_mut(), accumulate);
        };
        // Output rows [0, h) here, [h, M) on the worker: disjoint PSUM (and copy) partitions.
        if let Some((fs, fm)) = inputs {
            // Each thread packs both operands whole into its own caches and computes its rows
            // from them, as many as keep the two threads' times even (`RowShare`).
            let h = share.rows(rows).unwrap_or(h);
            // The operands again, as views of the inputs alone (not of SBUF, which the copy
            // writes).
            let (s, m) = (hbm_operand(&fs), hbm_operand(&fm));
            let (mut out_lo, mut out_hi) = split_output(psum, offset, h);
            let (mut c_lo, mut c_hi) = split_copies(sbuf, copy, h);
            let ((cm, cs), (wm, ws)) = (packs, packs_worker);
            let (a_hi, b_hi) = mm_worker.parts();
            let (s, m) = (&s, &m);
            // A worker half that has not started by the time this thread's rows are done (its
            // vCPU busy) is left to this thread, which computes it from its own packings.
            let (mine, theirs) = worker.join_or_leave(
                || {
                    let t = Instant::now();
                    let packed = moving_packing(isa, packing, cm, Kept::Input(fm.version), b, m);
                    let a = stationary_packing(isa, packing, cs, Some(fs), a, s);
                    let lo = a.columns(0..h);
                    matmul_prepacked(isa, &lo, &packed, &mut out_lo, c_lo.as_mut(), accumulate);
                    (packed, a, t.elapsed())
                },
                || {
                    let t = Instant::now();
                    let packed = moving_packing(isa, packing, wm, Kept::Input(fm.version), b_hi, m);
                    let a = stationary_packing(isa, packing, ws, Some(fs), a_hi, s);
                    let hi = a.columns(h..rows);
                    matmul_prepacked(isa, &hi, &packed, &mut out_hi, c_hi.as_mut(), accumulate);
                    t.elapsed()
                },
            );
            let (packed, a, here) = mine;
            match theirs {
                Some(there) => share.observe(h, rows, here, there),
                None => {
                    let hi = a.columns(h..rows);
                    matmul_prepacked(isa, &hi, &packed, &mut out_hi, c_hi.as_mut(), accumulate);
                }
            }
            return;
        }
        let (s_lo, s_hi) = split_stationary(&s, h);
        let (m, half) = (&m, moving_split(packing, n));
        let (b_lo, b_hi) = b.split(packing, k, half);
        let a_hi = mm_worker.stationary();
        let ((k_lo, a_lo), (k_hi, a_hi)) = worker.join(
            || {
                let key = pack_moving(isa, packing, b_lo, m, 0..half);
                (key, pack_stationary(isa, packing, a, &s_lo))
            },
            || {
                let key = pack_moving(isa, packing, b_hi, m, half..n);
                (key, pack_stationary(isa, packing, a_hi, &s_hi))
            },
        );
        let packed = b.packed(packing, shape, k_lo.and(k_hi));
        let (mut out_lo, mut out_hi) = split_output(psum, offset, h);
        let (mut c_lo, mut c_hi) = split_copies(sbuf, copy, h);
        let packed = &packed;
        worker.join(
            || matmul_prepacked(isa, &a_lo, packed, &mut out_lo, c_lo.as_mut(), accumulate),
            || matmul_prepacked(isa, &a_hi, packed, &mut out_hi, c_hi.as_mut(), accumulate),
        );
        return;
    }
    debug_assert!(
        copy.is_none(),
        "a copy fused into a matmul that does not pack first"
    );
    if free_contiguous(&g, &dp) {
        let offset = dp.base as usize;
        let split = split_rows(s.rows, s.cols, n);
        if let (Some(worker), Some(h)) = (split.and(worker.as_mut()).and_then(near), split) {
            // Output rows [0, h) here, [h, M) on the worker: disjoint PSUM partitions.
            let (s_lo, s_hi) = split_stationary(&s, h);
            let (mut out_lo, mut out_hi) = split_output(psum, offset, h);
            let m = &m;
            worker.join(
                || mm_kernel(isa, mm, &s_lo, m, &mut out_lo, accumulate, 0..n),
                || mm_kernel(isa, mm_worker, &s_hi, m, &mut out_hi, accumulate, 0..n),
            );
            return;
        }
        let mut out = Output {
            data: psum.f32s_mut(),
            offset,
            row_stride,
        };
        mm_kernel(isa, mm, &s, &m, &mut out, accumulate, 0..n);
        return;
    }
    // A strided PSUM destination: compute in a packed tile and move it in place.
    let packed = Pattern {
        base: 0,
        strides: row_major(&g),
    };
    let f32s = |base| End {
        dtype: DType::F32,
        base,
    };
    if accumulate {
        let plan = Plan::for_grid(&g, &dp, &packed);
        let to = bytemuck::cast_slice_mut(po.as_mut_slice());
        transfer(
            isa,
            chunks,
            Mem::Two(psum.bytes(), to),
            f32s(dp.base),
            f32s(0),
            &plan,
        );
    }
    let mut out = Output {
        data: po,
        offset: 0,
        row_stride: n,
    };
    mm_kernel(isa, mm, &s, &m, &mut out, accumulate, 0..n);
    let plan = Plan::for_grid(&g, &packed, &dp);
    let from = bytemuck::cast_slice(po.as_slice());
    transfer(
        isa,
        chunks,
        Mem::Two(from, psum.bytes_mut()),
        f32s(0),
        f32s(dp.base),
        &plan,
    );
}

/// `nc_transpose`: `dst[f, p] = src[p, f]` (`f` the row-major index of the source's free
/// elements), converted to the destination's dtype: TensorE widens exactly to fp32 in PSUM;
/// VectorE moves `[P ≤ 32, F ≤ 32]` tiles within or between SBUF and PSUM.
pub(crate) fn transpose(e: &mut EngineState, ops: &Operands) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let (sp, dp) = (src.pattern, dst.pattern);
    let g = src.dims;
    // The destination's free elements hold the source partitions: its one non-trivial free
    // dimension (none when the source has one partition) has the stride for `p`.
    let dg = dst.dims;
    let p_stride = (1..MAX_TILE_RANK)
        .find(|&j| dg[j] != 1)
        .map_or(0, |j| dp.strides[j]);
    // The source's free index `f` selects the destination partition.
    let mut strides = [0isize; MAX_TILE_RANK];
    strides[0] = p_stride;
    let mut acc = dp.strides[0];
    for j in (1..MAX_TILE_RANK).rev() {
        strides[j] = acc;
        acc *= g[j] as isize;
    }
    let tp = Pattern {
        base: dp.base,
        strides,
    };
    let plan = Plan::for_grid(&g, &sp, &tp);
    let from = End {
        dtype: src.dtype,
        base: sp.base,
    };
    let to = End {
        dtype: dst.dtype,
        base: dp.base,
    };
    let EngineState {
        isa,
        sbuf,
        psum,
        chunks,
        ..
    } = e;
    let mut mem = match (src.loc, dst.loc) {
        (Loc::Sbuf, Loc::Psum) => Mem::Two(sbuf.bytes(), psum.bytes_mut()),
        (Loc::Psum, Loc::Sbuf) => Mem::Two(psum.bytes(), sbuf.bytes_mut()),
        (Loc::Sbuf, Loc::Sbuf) => Mem::One(sbuf.bytes_mut()),
        (Loc::Psum, Loc::Psum) => Mem::One(psum.bytes_mut()),
        (s, d) => unreachable!("nc_transpose from {s:?} to {d:?}: the checks keep tiles on chip"),
    };
    // A `[P, F]` source with contiguous rows into contiguous destination rows: in blocks.
    let mut free = (1..MAX_TILE_RANK).filter(|&j| g[j] != 1);
    let (rows, cols, s_row, s_col) = match (free.next(), free.next()) {
        (None, _) => (g[0], 1, sp.strides[0], 1),
        (Some(j), None) => (g[0], g[j], sp.strides[0], sp.strides[j]),
        _ => (0, 0, 0, 0),
    };
    if rows > 0 && s_col == 1 && (p_stride == 1 || rows == 1) && cols <= T_COLS {
        let block = Block2d {
            rows,
            cols,
            src: (sp.base, s_row, src.dtype),
            dst: (dp.base, dp.strides[0], dst.dtype),
        };
        if matches!(mem, Mem::Two(..)) || !block.overlaps() {
            return transpose_blocks(*isa, &mut mem, &block);
        }
    }
    transfer(*isa, chunks, mem, from, to, &plan);
}
