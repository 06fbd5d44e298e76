//! Elementwise instructions streamed through 32-bit lanes.
//!
//! Every elementwise instruction (ALU chains, activations, selects, `iota`) runs the same way:
//! for each partition (row) of its grid, the free elements are visited in row-major order in
//! chunks of at most [`CHUNK`]; each source is converted into a chunk of fp32 (or int32) lanes
//! with the model's conversions, a compute callback turns the source chunks into a result chunk,
//! the result is combined into the destination's old value when the instruction accumulates,
//! converted to the destination's dtype and written; a per-partition reduction of the results
//! (`reduce_res`) folds the chunk in the order [`RowFold`] defines. Nothing is dispatched per
//! element, and free dimensions that are contiguous in every operand are merged into one run.
//!
//! Large instructions are split by partition halves between the calling thread and the core's
//! worker when no thread can read what the other writes (every destination, and every source in
//! the same memory, maps row `r` to the same partition, or sources lie outside the written
//! partitions); each half computes exactly what the serial loop computes for its rows.

use core::ops::Range;

use nki_lang::{Alu, DType, MAX_TILE_RANK};

use super::Engines;
use crate::cpu::Isa;
use crate::cpu::alu::{self, Rhs};
use crate::cpu::convert::{load_f32, load_i32, store_f32, store_i32};
use crate::memory::Psum;
use crate::operand::{Loc, Resolved};
use crate::worker::near;

/// Elements per chunk of lanes.
pub(crate) const CHUNK: usize = 1024;
/// Most sources a streamed instruction reads.
pub(crate) const MAX_SOURCES: usize = 4;
/// Instructions with fewer elements stay on one thread.
const MIN_SPLIT_ELEMS: usize = 1 << 14;

/// What the lanes hold.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// fp32 values (arithmetic).
    F32,
    /// int32 values (bit operations, `iota`).
    I32,
}

/// A source of lanes, defined for every element of the grid.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Source {
    /// Elements of a tile: element `base + Σ strides[j]·t_j` of `loc`'s memory, of `dtype`.
    Mem {
        /// SBUF or PSUM.
        loc: Loc,
        /// Element type.
        dtype: DType,
        /// Element offset of the grid's first element.
        base: isize,
        /// Element strides per grid dimension.
        strides: [isize; MAX_TILE_RANK],
    },
    /// The same lane bits for every element.
    Splat(u32),
    /// `base + Σ strides[j]·t_j`, computed in 64 bits and wrapped to int32.
    Expr {
        /// Value at the grid's first element.
        base: i64,
        /// Coefficient per grid dimension.
        strides: [i64; MAX_TILE_RANK],
    },
}

impl Source {
    /// The source for a resolved operand over the instruction's `grid`, in lanes of kind
    /// `lane`.
    pub(crate) fn of(r: &Resolved, lane: Lane, grid: &[usize; MAX_TILE_RANK]) -> Source {
        let aligned = r.strides_on(grid);
        match r.loc {
            Loc::Imm(x) => Source::Splat(match lane {
                Lane::F32 => x.as_f32().to_bits(),
                Lane::I32 => match x {
                    nki_lang::Scalar::Int(v) => v as u32,
                    nki_lang::Scalar::Float(bits) => f32::from_bits(bits) as i32 as u32,
                },
            }),
            Loc::Expr => {
                let mut strides = [0i64; MAX_TILE_RANK];
                for (s, &p) in strides.iter_mut().zip(&aligned) {
                    *s = p as i64;
                }
                Source::Expr {
                    base: r.pattern.base as i64,
                    strides,
                }
            }
            loc => Source::Mem {
                loc,
                dtype: r.dtype,
                base: r.pattern.base,
                strides: aligned,
            },
        }
    }

    fn strides(&self) -> Option<[isize; MAX_TILE_RANK]> {
        match *self {
            Source::Mem { strides, .. } => Some(strides),
            Source::Expr { strides, .. } => Some(strides.map(|s| s as isize)),
            Source::Splat(_) => None,
        }
    }
}

/// Where an operand's results go: element `base + Σ strides[j]·t_j` of `loc`'s memory.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Sink {
    /// SBUF or PSUM.
    pub loc: Loc,
    /// Element type.
    pub dtype: DType,
    /// Element offset of the grid's first element.
    pub base: isize,
    /// Element strides per grid dimension.
    pub strides: [isize; MAX_TILE_RANK],
}

impl Sink {
    /// The sink of a resolved destination over the instruction's `grid`.
    pub(crate) fn of(r: &Resolved, grid: &[usize; MAX_TILE_RANK]) -> Sink {
        Sink {
            loc: r.loc,
            dtype: r.dtype,
            base: r.pattern.base,
            strides: r.strides_on(grid),
        }
    }
}

/// The order of a reduction along a sequence of values: value `i` is folded into partial `i mod
/// 16`, each partial starting from the operation's identity; then partial `l` absorbs partial
/// `l + 8`, then `l + 4`, `l + 2`, `l + 1`, leaving the result in partial 0. The order is the
/// same on every host path and thread count.
#[derive(Copy, Clone, Debug)]
pub(crate) struct RowFold {
    op: Alu,
    lanes: [u32; 16],
    count: usize,
}

impl RowFold {
    /// An empty fold of `op` over lanes of kind `lane`.
    pub(crate) fn new(op: Alu, lane: Lane) -> RowFold {
        RowFold {
            op,
            lanes: [identity_bits(op, lane); 16],
            count: 0,
        }
    }

    /// Folds the next values of the sequence.
    pub(crate) fn fold(&mut self, isa: Isa, lane: Lane, values: &[u32]) {
        let mut v = values;
        // Up to the next multiple of 16, one value at a time.
        while !v.is_empty() && !self.count.is_multiple_of(16) {
            let l = self.count % 16;
            self.lanes[l] = combine(lane, self.op, self.lanes[l], v[0]);
            self.count += 1;
            v = &v[1..];
        }
        let whole = v.len() / 16 * 16;
        match lane {
            Lane::F32 => {
                let acc: &mut [f32; 16] = bytemuck::cast_mut(&mut self.lanes);
                alu::fold16(isa, self.op, acc, bytemuck::cast_slice(&v[..whole]));
            }
            Lane::I32 => {
                let acc: &mut [i32; 16] = bytemuck::cast_mut(&mut self.lanes);
                alu::fold16_bits(isa, self.op, acc, bytemuck::cast_slice(&v[..whole]));
            }
        }
        self.count += whole;
        for &x in &v[whole..] {
            let l = self.count % 16;
            self.lanes[l] = combine(lane, self.op, self.lanes[l], x);
            self.count += 1;
        }
    }

    /// The result (the identity for an empty sequence).
    pub(crate) fn finish(mut self, isa: Isa, lane: Lane) -> u32 {
        match lane {
            Lane::F32 => {
                alu::pairwise16(isa, self.op, bytemuck::cast_mut(&mut self.lanes)).to_bits()
            }
            Lane::I32 => alu::pairwise16_bits(self.op, bytemuck::cast_mut(&mut self.lanes)) as u32,
        }
    }
}

/// The lanes of `op`'s identity ([`Alu::identity`], 0 for an operation without one): the
/// fp32 bits, or the value converted to int32 (saturating) on integer lanes.
pub(crate) fn identity_bits(op: Alu, lane: Lane) -> u32 {
    let id = op.identity().unwrap_or(0.0);
    match lane {
        Lane::F32 => id.to_bits(),
        Lane::I32 => id as i32 as u32,
    }
}

/// `op(a, b)` on single lanes: the definitions ([`alu::eval`], [`alu::eval_bits`]) that every
/// path of [`apply`] computes.
#[inline]
pub(crate) fn combine(lane: Lane, op: Alu, a: u32, b: u32) -> u32 {
    match lane {
        Lane::F32 => alu::eval(op, f32::from_bits(a), f32::from_bits(b)).to_bits(),
        Lane::I32 => alu::eval_bits(op, a as i32, b as i32) as u32,
    }
}

/// `out = a op b` on lanes of kind `lane`.
pub(crate) fn apply(isa: Isa, lane: Lane, op: Alu, a: &[u32], b: Rhs<'_, u32>, out: &mut [u32]) {
    match lane {
        Lane::F32 => {
            let b = match b {
                Rhs::Run(b) => Rhs::Run(bytemuck::cast_slice::<u32, f32>(b)),
                Rhs::Splat(x) => Rhs::Splat(f32::from_bits(x)),
            };
            alu::apply(
                isa,
                op,
                bytemuck::cast_slice(a),
                b,
                false,
                bytemuck::cast_slice_mut(out),
            );
        }
        Lane::I32 => {
            let b = match b {
                Rhs::Run(b) => Rhs::Run(bytemuck::cast_slice::<u32, i32>(b)),
                Rhs::Splat(x) => Rhs::Splat(x as i32),
            };
            alu::apply_bits(
                isa,
                op,
                bytemuck::cast_slice(a),
                b,
                false,
                bytemuck::cast_slice_mut(out),
            );
        }
    }
}

/// `acc = acc op b` (`b op acc` when `rev`) on lanes of kind `lane`: [`apply`] in place.
pub(crate) fn apply_assign(
    isa: Isa,
    lane: Lane,
    op: Alu,
    acc: &mut [u32],
    b: Rhs<'_, u32>,
    rev: bool,
) {
    match lane {
        Lane::F32 => {
            let b = match b {
                Rhs::Run(b) => Rhs::Run(bytemuck::cast_slice::<u32, f32>(b)),
                Rhs::Splat(x) => Rhs::Splat(f32::from_bits(x)),
            };
            alu::apply_assign(isa, op, bytemuck::cast_slice_mut(acc), b, rev);
        }
        Lane::I32 => {
            let b = match b {
                Rhs::Run(b) => Rhs::Run(bytemuck::cast_slice::<u32, i32>(b)),
                Rhs::Splat(x) => Rhs::Splat(x as i32),
            };
            alu::apply_bits_assign(isa, op, bytemuck::cast_slice_mut(acc), b, rev);
        }
    }
}

/// A source's lanes as an ALU operand: a run, or one value for every lane when the source
/// gives a single lane.
pub(crate) fn lanes_of(x: &[u32]) -> Rhs<'_, u32> {
    match x {
        [one] => Rhs::Splat(*one),
        run => Rhs::Run(run),
    }
}

/// A per-partition reduction of the results into one element per row of `sink`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct RowReduce {
    /// The reduction.
    pub op: Alu,
    /// Row `r`'s result goes to element `sink.base + r · sink.strides[0]`.
    pub sink: Sink,
}

/// An elementwise instruction, ready to stream.
pub(crate) struct Stream<'a> {
    /// The grid (the destination's dimensions).
    pub dims: [usize; MAX_TILE_RANK],
    /// The sources, in the order the compute callback receives their lanes.
    pub srcs: &'a [Source],
    /// The destination.
    pub dst: Sink,
    /// What the lanes hold.
    pub lane: Lane,
    /// `Some(op)`: the destination becomes `dst op result`.
    pub accumulate: Option<Alu>,
    /// A per-partition reduction of the results.
    pub reduce: Option<RowReduce>,
}

/// Turns one chunk of source lanes into result lanes (`out`); called with the row
/// (partition) index and a scratch chunk as long as `out`. A source that has one value along the
/// chunk (an immediate, a `[P, 1]` column) is given as a single lane ([`lanes_of`]).
pub(crate) type Compute<'a> = dyn Fn(usize, &[&[u32]], &mut [u32], &mut [u32]) + Sync + 'a;

/// Per-thread lane buffers of streamed instructions, allocated once per core.
pub(crate) struct Lanes {
    ins: [Vec<u32>; MAX_SOURCES],
    out: Vec<u32>,
    old: Vec<u32>,
    sum: Vec<u32>,
    bytes: Vec<u8>,
}

impl Lanes {
    /// One chunk of lanes and the byte scratch of gathers.
    pub(crate) fn scratch(&mut self) -> (&mut [u32], &mut [u8]) {
        (&mut self.ins[0], &mut self.bytes)
    }

    /// Four chunks of lanes and the byte scratch.
    #[allow(clippy::type_complexity)]
    pub(crate) fn scan_scratch(
        &mut self,
    ) -> (&mut [u32], &mut [u32], &mut [u32], &mut [u32], &mut [u8]) {
        let [a, b, ..] = &mut self.ins;
        (a, b, &mut self.out, &mut self.old, &mut self.bytes)
    }

    pub(crate) fn new() -> Lanes {
        Lanes {
            ins: core::array::from_fn(|_| vec![0; CHUNK]),
            out: vec![0; CHUNK],
            old: vec![0; CHUNK],
            sum: vec![0; CHUNK],
            bytes: vec![0; CHUNK * 4],
        }
    }
}

/// One on-chip memory as one thread of an instruction sees it: writable in `own`, read-only
/// below and above it.
pub(crate) struct Region<'a> {
    below: &'a [u8],
    own: &'a mut [u8],
    own_start: usize,
    above: &'a [u8],
    above_start: usize,
}

impl<'a> Region<'a> {
    /// The whole memory, writable.
    pub(crate) fn whole(mem: &'a mut [u8]) -> Region<'a> {
        let len = mem.len();
        Region {
            below: &[],
            own: mem,
            own_start: 0,
            above: &[],
            above_start: len,
        }
    }

    /// The whole memory, read-only.
    pub(crate) fn shared(mem: &'a [u8]) -> Region<'a> {
        Region {
            below: mem,
            own: &mut [],
            own_start: mem.len(),
            above: &[],
            above_start: mem.len(),
        }
    }

    /// Bytes `r` (which lie in one of the three parts: a run never crosses a partition, and
    /// parts are whole partitions).
    fn read(&self, r: Range<usize>) -> &[u8] {
        let (part, start) = self.part_of(&r);
        &part[r.start - start..r.end - start]
    }

    /// The part (below, own or above) that holds bytes `r`, and the offset of its first byte.
    fn part_of(&self, r: &Range<usize>) -> (&[u8], usize) {
        if r.end <= self.own_start {
            (self.below, 0)
        } else if r.start >= self.above_start {
            (self.above, self.above_start)
        } else {
            (&self.own[..], self.own_start)
        }
    }

    /// Asks the host to bring bytes `r` (within one partition) into its caches: a hint, with
    /// no effect on any value; bytes outside the memory are skipped.
    fn prefetch(&self, r: Range<usize>) {
        let (part, start) = self.part_of(&r);
        let lo = r.start.saturating_sub(start).min(part.len());
        let hi = r.end.saturating_sub(start).min(part.len());
        crate::cpu::prefetch(&part[lo..hi]);
    }

    /// Bytes `r` of the writable part.
    fn write(&mut self, r: Range<usize>) -> &mut [u8] {
        &mut self.own[r.start - self.own_start..r.end - self.own_start]
    }
}

/// SBUF and PSUM as one thread of an instruction sees them.
pub(crate) struct Mems<'a> {
    /// The state buffer.
    pub sbuf: Region<'a>,
    /// The partial-sum buffer.
    pub psum: Region<'a>,
}

impl<'a> Mems<'a> {
    /// Bytes `r` of `loc`'s memory (within one partition).
    pub(crate) fn read(&self, loc: Loc, r: Range<usize>) -> &[u8] {
        self.region(loc).read(r)
    }

    fn region(&self, loc: Loc) -> &Region<'a> {
        match loc {
            Loc::Psum => &self.psum,
            _ => &self.sbuf,
        }
    }

    fn region_mut(&mut self, loc: Loc) -> &mut Region<'a> {
        match loc {
            Loc::Psum => &mut self.psum,
            _ => &mut self.sbuf,
        }
    }
}

/// The free dimensions after merging those contiguous in every operand: `outer` sizes (up to
/// three) and the innermost run's length, with each operand's strides.
pub(crate) struct FreePlan {
    dims: [usize; MAX_TILE_RANK - 1],
    rank: usize,
}

impl FreePlan {
    /// Merges free dimension `j` into the next one when every operand has
    /// `stride[j] == stride[j + 1] · dims[j + 1]`, and drops size-1 dimensions. Returns the
    /// merged dims and rewrites each operand's free strides to those of the merged dims (the
    /// rest zero). Works in place: a merged axis is never after the axis it is read from.
    pub(crate) fn new(
        dims: &[usize; MAX_TILE_RANK],
        strides: &mut [[isize; MAX_TILE_RANK]],
    ) -> FreePlan {
        let mut out = FreePlan {
            dims: [1; MAX_TILE_RANK - 1],
            rank: 0,
        };
        for (j, &n) in dims.iter().enumerate().skip(1) {
            if n == 1 {
                continue;
            }
            let r = out.rank;
            // The merged axis `k` of an operand is at `stride[1 + k]`; the last one is `r`.
            if r > 0 && strides.iter().all(|s| s[r] == s[j] * n as isize) {
                out.dims[r - 1] *= n;
                for s in strides.iter_mut() {
                    s[r] = s[j];
                }
            } else {
                out.dims[r] = n;
                for s in strides.iter_mut() {
                    s[r + 1] = s[j];
                }
                out.rank += 1;
            }
        }
        for s in strides.iter_mut() {
            s[1 + out.rank..].fill(0);
        }
        out
    }

    /// The index of the innermost run's stride in each operand's merged strides.
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    /// The length of every innermost run.
    pub(crate) fn inner(&self) -> usize {
        if self.rank == 0 {
            1
        } else {
            self.dims[self.rank - 1]
        }
    }

    /// Calls `f(offsets, n)` for every innermost run: `offsets[j]` is the free offset of the
    /// run's first element for operand `j`, `n` its length.
    pub(crate) fn runs(
        &self,
        strides: &[[isize; MAX_TILE_RANK]],
        mut f: impl FnMut(&[isize], usize),
    ) {
        let r = self.rank.max(1);
        let inner = if self.rank == 0 { 1 } else { self.dims[r - 1] };
        let outer = &self.dims[..r - 1];
        let mut idx = [0usize; MAX_TILE_RANK];
        let mut offs = [0isize; 8];
        let n_ops = strides.len();
        loop {
            for (o, s) in offs.iter_mut().zip(strides) {
                *o = outer
                    .iter()
                    .enumerate()
                    .map(|(k, _)| idx[k] as isize * s[1 + k])
                    .sum();
            }
            f(&offs[..n_ops], inner);
            let mut k = outer.len();
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < outer[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
    }
}

/// The byte range of `n` elements of `size` bytes from element `start` with element stride
/// `stride` (all in one partition).
fn span(start: isize, stride: isize, n: usize, size: usize) -> Range<usize> {
    let last = start + stride * (n as isize - 1);
    let (lo, hi) = (start.min(last), start.max(last));
    (lo as usize * size)..((hi as usize + 1) * size)
}

/// The bits of a narrow signed integer in its sign-extended int32 lane: a logical right shift
/// shifts the dtype's own bits (docs/dtypes.md, integer lanes), so the lane is cut to them first.
pub(crate) fn width_mask(dtype: DType) -> u32 {
    match dtype {
        DType::I8 => 0xff,
        DType::I16 => 0xffff,
        _ => u32::MAX,
    }
}

/// Fills `out` with the lanes of `n` elements of `src` starting at free offset `off` (plus
/// the row's offset `row`) with inner stride `s_in`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn load_lanes(
    isa: Isa,
    mems: &Mems<'_>,
    src: &Source,
    lane: Lane,
    row: isize,
    off: isize,
    s_in: isize,
    n: usize,
    bytes: &mut [u8],
    out: &mut [u32],
) {
    let out = &mut out[..n];
    match *src {
        Source::Splat(bits) => out.fill(bits),
        Source::Expr { base, .. } => {
            let start = base.wrapping_add(row as i64).wrapping_add(off as i64);
            let step = s_in as i64;
            match lane {
                Lane::I32 => {
                    for (k, o) in out.iter_mut().enumerate() {
                        *o = start.wrapping_add(step.wrapping_mul(k as i64)) as i32 as u32;
                    }
                }
                Lane::F32 => {
                    for (k, o) in out.iter_mut().enumerate() {
                        let v = start.wrapping_add(step.wrapping_mul(k as i64)) as i32;
                        *o = (v as f32).to_bits();
                    }
                }
            }
        }
        Source::Mem {
            loc, dtype, base, ..
        } => {
            let size = dtype.size() as usize;
            let start = base + row + off;
            let region = mems.region(loc);
            let convert = |src: &[u8], out: &mut [u32]| match lane {
                Lane::F32 => load_f32(isa, src, dtype, bytemuck::cast_slice_mut(out)),
                Lane::I32 => load_i32(isa, src, dtype, bytemuck::cast_slice_mut(out)),
            };
            match s_in {
                1 => convert(region.read(span(start, 1, n, size)), out),
                0 => {
                    convert(region.read(span(start, 1, 1, size)), &mut out[..1]);
                    let v = out[0];
                    out.fill(v);
                }
                s => {
                    let r = span(start, s, n, size);
                    let mem = region.read(r.clone());
                    let first = (start as usize * size) - r.start;
                    for k in 0..n {
                        let at = (first as isize + k as isize * s * size as isize) as usize;
                        bytes[k * size..(k + 1) * size].copy_from_slice(&mem[at..at + size]);
                    }
                    convert(&bytes[..n * size], out);
                }
            }
        }
    }
}

/// Writes `n` lanes to the sink at free offset `off` (plus the row's offset) with inner stride
/// `s_in`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store_lanes(
    isa: Isa,
    mems: &mut Mems<'_>,
    sink: &Sink,
    lane: Lane,
    row: isize,
    off: isize,
    s_in: isize,
    lanes: &[u32],
    bytes: &mut [u8],
) {
    let n = lanes.len();
    let size = sink.dtype.size() as usize;
    let start = sink.base + row + off;
    let convert = |lanes: &[u32], out: &mut [u8]| match lane {
        Lane::F32 => store_f32(isa, bytemuck::cast_slice(lanes), out, sink.dtype),
        Lane::I32 => store_i32(isa, bytemuck::cast_slice(lanes), out, sink.dtype),
    };
    let region = mems.region_mut(sink.loc);
    if s_in == 1 {
        convert(lanes, region.write(span(start, 1, n, size)));
        return;
    }
    convert(lanes, &mut bytes[..n * size]);
    let r = span(start, s_in, n, size);
    let first = (start as usize * size) - r.start;
    let mem = region.write(r);
    // A zero stride writes every lane to one element: the last one stays, as in a sequential
    // write.
    for k in 0..n {
        let at = (first as isize + k as isize * s_in * size as isize) as usize;
        mem[at..at + size].copy_from_slice(&bytes[k * size..(k + 1) * size]);
    }
}

/// Elements of one partition as runs: run `j` is `lens[j]` elements from free offset
/// `starts[j]`, `stride` apart; every element lies in `bounds` (`lo..=hi`).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Runs<'a> {
    /// First free offset of each run.
    pub starts: &'a [isize],
    /// Elements of each run.
    pub lens: &'a [usize],
    /// Offset between consecutive elements of a run.
    pub stride: isize,
    /// The least and the greatest offset of an element.
    pub bounds: (isize, isize),
}

impl Runs<'_> {
    /// Calls `f(k, offset)` for every element, `k` counting from 0 in order.
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(usize, isize)) {
        let mut k = 0;
        for (&start, &len) in self.starts.iter().zip(self.lens) {
            for j in 0..len {
                f(k + j, start + j as isize * self.stride);
            }
            k += len;
        }
    }
}

/// Fills `out` with the lanes of the elements `runs` (at free offsets shifted by `add`, plus the
/// row's offset `row`) of `src`, in order; `out` is as long as the runs. The elements are
/// converted as [`load_lanes`] converts them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_lanes(
    isa: Isa,
    mems: &Mems<'_>,
    src: &Source,
    lane: Lane,
    row: isize,
    runs: &Runs<'_>,
    add: isize,
    bytes: &mut [u8],
    out: &mut [u32],
) {
    let n = out.len();
    match *src {
        Source::Splat(bits) => out.fill(bits),
        Source::Expr { base, .. } => runs.each(|k, off| {
            let v = base
                .wrapping_add(row as i64)
                .wrapping_add((off + add) as i64) as i32;
            out[k] = match lane {
                Lane::I32 => v as u32,
                Lane::F32 => (v as f32).to_bits(),
            };
        }),
        Source::Mem {
            loc, dtype, base, ..
        } => {
            let size = dtype.size() as usize;
            let (lo, hi) = runs.bounds;
            let mem =
                mems.region(loc)
                    .read(span(base + row + add + lo, 1, (hi - lo + 1) as usize, size));
            if dtype == DType::F32 && lane == Lane::F32 {
                // fp32 lanes are the elements' bits (`load_f32` copies them). Small strides
                // (interleaved windows) as fixed strides, which the compiler turns into vector
                // loads and shuffles.
                let mem = in_place(mem);
                match runs.stride {
                    2 => pick_every::<2>(mem, runs, lo, out),
                    3 => pick_every::<3>(mem, runs, lo, out),
                    4 => pick_every::<4>(mem, runs, lo, out),
                    8 => pick_every::<8>(mem, runs, lo, out),
                    _ => pick_runs(mem, runs, lo, out),
                }
                return;
            }
            match size {
                1 => pick_runs(
                    bytemuck::cast_slice::<u8, [u8; 1]>(mem),
                    runs,
                    lo,
                    bytemuck::cast_slice_mut(&mut bytes[..n]),
                ),
                2 => pick_runs(
                    bytemuck::cast_slice::<u8, [u8; 2]>(mem),
                    runs,
                    lo,
                    bytemuck::cast_slice_mut(&mut bytes[..2 * n]),
                ),
                _ => pick_runs(
                    bytemuck::cast_slice::<u8, [u8; 4]>(mem),
                    runs,
                    lo,
                    bytemuck::cast_slice_mut(&mut bytes[..4 * n]),
                ),
            }
            match lane {
                Lane::F32 => load_f32(
                    isa,
                    &bytes[..n * size],
                    dtype,
                    bytemuck::cast_slice_mut(out),
                ),
                Lane::I32 => load_i32(
                    isa,
                    &bytes[..n * size],
                    dtype,
                    bytemuck::cast_slice_mut(out),
                ),
            }
        }
    }
}

/// Copies the elements of `runs` (offsets relative to `lo`) from `mem` to `out`, packed.
#[inline(always)]
fn pick_runs<T: Copy>(mem: &[T], runs: &Runs<'_>, lo: isize, out: &mut [T]) {
    let mut k = 0;
    for (&start, &len) in runs.starts.iter().zip(runs.lens) {
        let o = &mut out[k..k + len];
        let first = (start - lo) as usize;
        match runs.stride {
            1 => o.copy_from_slice(&mem[first..first + len]),
            s if s > 0 => {
                let from = mem[first..].iter().step_by(s as usize);
                for (o, &x) in o.iter_mut().zip(from) {
                    *o = x;
                }
            }
            s => {
                for (j, o) in o.iter_mut().enumerate() {
                    *o = mem[(first as isize + j as isize * s) as usize];
                }
            }
        }
        k += len;
    }
}

/// The lanes [`gather_lanes`] would give, read in place, when they are one contiguous run of
/// fp32 elements.
pub(crate) fn contiguous_lanes<'m>(
    mems: &'m Mems<'_>,
    src: &Source,
    lane: Lane,
    row: isize,
    runs: &Runs<'_>,
    add: isize,
) -> Option<&'m [u32]> {
    let Source::Mem {
        loc,
        dtype: DType::F32,
        base,
        ..
    } = *src
    else {
        return None;
    };
    if lane != Lane::F32 || runs.starts.len() != 1 || (runs.stride != 1 && runs.lens[0] > 1) {
        return None;
    }
    let (lo, hi) = runs.bounds;
    let bytes = mems.read(
        loc,
        span(base + row + add + lo, 1, (hi - lo + 1) as usize, 4),
    );
    Some(in_place(bytes))
}

/// [`pick_runs`] for runs of stride `S`.
#[inline(always)]
fn pick_every<const S: usize>(mem: &[u32], runs: &Runs<'_>, lo: isize, out: &mut [u32]) {
    let mut k = 0;
    for (&start, &len) in runs.starts.iter().zip(runs.lens) {
        let Some((last, body)) = out[k..k + len].split_last_mut() else {
            continue;
        };
        let first = (start - lo) as usize;
        let n = body.len();
        for (o, c) in body
            .iter_mut()
            .zip(mem[first..first + n * S].chunks_exact(S))
        {
            *o = c[0];
        }
        *last = mem[first + n * S];
        k += len;
    }
}

/// Copies packed `src` to the elements of `runs` (offsets relative to `lo`) of `mem`, in order
/// (a later element wins where offsets repeat).
#[inline(always)]
fn put_runs<T: Copy>(mem: &mut [T], runs: &Runs<'_>, lo: isize, src: &[T]) {
    let mut k = 0;
    for (&start, &len) in runs.starts.iter().zip(runs.lens) {
        let s_in = &src[k..k + len];
        let first = (start - lo) as usize;
        match runs.stride {
            1 => mem[first..first + len].copy_from_slice(s_in),
            s if s > 0 => {
                let to = mem[first..].iter_mut().step_by(s as usize);
                for (m, &x) in to.zip(s_in) {
                    *m = x;
                }
            }
            s => {
                for (j, &x) in s_in.iter().enumerate() {
                    mem[(first as isize + j as isize * s) as usize] = x;
                }
            }
        }
        k += len;
    }
}

/// Writes `lanes` to the elements `runs` of `sink` (plus the row's offset), in order, converted
/// as [`store_lanes`] converts them (a later lane wins where offsets repeat).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_lanes(
    isa: Isa,
    mems: &mut Mems<'_>,
    sink: &Sink,
    lane: Lane,
    row: isize,
    runs: &Runs<'_>,
    lanes: &[u32],
    bytes: &mut [u8],
) {
    let n = lanes.len();
    let size = sink.dtype.size() as usize;
    let (lo, hi) = runs.bounds;
    let start = sink.base + row + lo;
    if sink.dtype == DType::F32 && lane == Lane::F32 {
        // `store_f32` copies fp32 lanes.
        let mem = mems
            .region_mut(sink.loc)
            .write(span(start, 1, (hi - lo + 1) as usize, size));
        put_runs(bytemuck::cast_slice_mut::<u8, u32>(mem), runs, lo, lanes);
        return;
    }
    match lane {
        Lane::F32 => store_f32(isa, bytemuck::cast_slice(lanes), bytes, sink.dtype),
        Lane::I32 => store_i32(isa, bytemuck::cast_slice(lanes), bytes, sink.dtype),
    }
    let mem = mems
        .region_mut(sink.loc)
        .write(span(start, 1, (hi - lo + 1) as usize, size));
    match size {
        1 => put_runs(
            bytemuck::cast_slice_mut::<u8, [u8; 1]>(mem),
            runs,
            lo,
            bytemuck::cast_slice(&bytes[..n]),
        ),
        2 => put_runs(
            bytemuck::cast_slice_mut::<u8, [u8; 2]>(mem),
            runs,
            lo,
            bytemuck::cast_slice(&bytes[..2 * n]),
        ),
        _ => put_runs(
            bytemuck::cast_slice_mut::<u8, [u8; 4]>(mem),
            runs,
            lo,
            bytemuck::cast_slice(&bytes[..4 * n]),
        ),
    }
}

/// fp32 elements of a memory as lanes (SBUF and PSUM tiles are 4-byte aligned, and so is every
/// fp32 element of them).
fn in_place(bytes: &[u8]) -> &[u32] {
    bytemuck::cast_slice(bytes)
}

/// How many rows ahead of the one it computes a streamed instruction prefetches its operands.
///
/// An operand's rows are a partition apart, so each is a separate short run (a `[128, 512]`
/// bf16 tile is 128 runs of 16 cache lines) that the hardware prefetchers barely start on
/// before it ends: a tile that is not in cache, such as the matmul tutorial's 16 MiB
/// `result_tiles` accumulated into `[128, 512]` slice by slice, was read at the memory's
/// latency: 11–14 µs per slice on two host threads (36–40 µs on one), against 8–9 µs with three
/// rows prefetched.
const PREFETCH_ROWS: usize = 3;

/// Largest footprint in one partition that a streamed instruction prefetches per operand row
/// (wider rows are long runs that the hardware prefetchers follow).
const PREFETCH_MAX_BYTES: usize = 8 << 10;

/// The bytes each memory operand of a streamed instruction touches in a row, for prefetching
/// the rows ahead.
struct RowFootprints {
    /// Per operand (the sources, then the destination): its memory, its row-0 byte range, and
    /// its bytes from one row to the next; `None` for operands not in memory or too wide.
    spans: [Option<(Loc, isize, isize, isize)>; MAX_SOURCES + 1],
}

impl RowFootprints {
    /// The footprints of `s`'s operands, whose element strides (sources, then destination)
    /// are `strides`.
    fn new(s: &Stream<'_>, strides: &[[isize; MAX_TILE_RANK]; MAX_SOURCES + 1]) -> Self {
        let span = |loc: Loc, dtype: DType, base: isize, st: &[isize; MAX_TILE_RANK]| {
            let (mut lo, mut hi) = (base, base);
            for (&d, &x) in s.dims.iter().zip(st).skip(1) {
                let reach = (d.max(1) as isize - 1) * x;
                lo += reach.min(0);
                hi += reach.max(0);
            }
            let size = dtype.size() as isize;
            let bytes = (hi - lo + 1) * size;
            (matches!(loc, Loc::Sbuf | Loc::Psum) && bytes <= PREFETCH_MAX_BYTES as isize)
                .then_some((loc, lo * size, bytes, st[0] * size))
        };
        let mut spans = [None; MAX_SOURCES + 1];
        for (j, src) in s.srcs.iter().enumerate() {
            if let Source::Mem {
                loc, dtype, base, ..
            } = *src
            {
                spans[j] = span(loc, dtype, base, &strides[j]);
            }
        }
        spans[s.srcs.len()] = span(s.dst.loc, s.dst.dtype, s.dst.base, &strides[s.srcs.len()]);
        RowFootprints { spans }
    }

    /// Prefetches every operand's bytes of row `r`.
    fn prefetch(&self, mems: &Mems<'_>, r: usize) {
        for &(loc, start, bytes, row) in self.spans.iter().flatten() {
            let at = start + r as isize * row;
            if let Ok(at) = usize::try_from(at) {
                mems.region(loc).prefetch(at..at + bytes as usize);
            }
        }
    }
}

/// Streams rows `rows` of the instruction with one thread's memories and lanes.
fn stream_rows(
    isa: Isa,
    mems: &mut Mems<'_>,
    s: &Stream<'_>,
    rows: Range<usize>,
    lanes: &mut Lanes,
    compute: &Compute<'_>,
) {
    // Operand 0..n: the sources, then the destination.
    let n_src = s.srcs.len();
    let mut strides = [[0isize; MAX_TILE_RANK]; MAX_SOURCES + 1];
    for (st, src) in strides.iter_mut().zip(s.srcs) {
        *st = src.strides().unwrap_or([0; MAX_TILE_RANK]);
    }
    strides[n_src] = s.dst.strides;
    let row_strides: [isize; MAX_SOURCES + 1] = core::array::from_fn(|j| strides[j][0]);
    let ahead = RowFootprints::new(s, &strides);
    let plan = FreePlan::new(&s.dims, &mut strides[..=n_src]);
    let inner_strides: [isize; MAX_SOURCES + 1] = core::array::from_fn(|j| {
        if plan.rank == 0 {
            0
        } else {
            strides[j][plan.rank]
        }
    });
    let uniform: [bool; MAX_SOURCES] = core::array::from_fn(|j| {
        s.srcs
            .get(j)
            .is_some_and(|src| matches!(src, Source::Splat(_)) || inner_strides[j] == 0)
    });
    let Lanes {
        ins,
        out,
        old,
        sum,
        bytes,
    } = lanes;
    let end = rows.end;
    for r in rows.clone() {
        let first = if r == rows.start {
            r + 1
        } else {
            r + PREFETCH_ROWS
        };
        for later in first..=(r + PREFETCH_ROWS).min(end.saturating_sub(1)) {
            ahead.prefetch(mems, later);
        }
        let mut fold = s.reduce.map(|red| RowFold::new(red.op, s.lane));
        plan.runs(&strides[..=n_src], |offs, n| {
            let mut done = 0;
            while done < n {
                let c = CHUNK.min(n - done);
                // Sources that already are contiguous fp32 lanes in memory are read in place.
                let mut direct: [Option<Range<usize>>; MAX_SOURCES] = Default::default();
                for (j, src) in s.srcs.iter().enumerate() {
                    let off = offs[j] + done as isize * inner_strides[j];
                    let row = r as isize * row_strides[j];
                    if let Source::Mem {
                        dtype: DType::F32,
                        base,
                        ..
                    } = *src
                        && s.lane == Lane::F32
                        && inner_strides[j] == 1
                    {
                        direct[j] = Some(span(base + row + off, 1, c, 4));
                        continue;
                    }
                    // A source with one value along the run (an immediate, a column) is
                    // given as that one lane.
                    let n = if uniform[j] { 1 } else { c };
                    load_lanes(
                        isa,
                        mems,
                        src,
                        s.lane,
                        row,
                        off,
                        inner_strides[j],
                        n,
                        bytes,
                        &mut ins[j],
                    );
                }
                let inputs: [&[u32]; MAX_SOURCES] =
                    core::array::from_fn(|j| match (&direct[j], s.srcs.get(j)) {
                        (Some(range), Some(Source::Mem { loc, .. })) => {
                            in_place(mems.region(*loc).read(range.clone()))
                        }
                        _ if uniform[j] => &ins[j][..1],
                        _ => &ins[j][..c],
                    });
                compute(r, &inputs[..n_src], &mut out[..c], &mut sum[..c]);
                let d_off = offs[n_src] + done as isize * inner_strides[n_src];
                let d_row = r as isize * row_strides[n_src];
                if let Some(op) = s.accumulate {
                    let dst = Source::Mem {
                        loc: s.dst.loc,
                        dtype: s.dst.dtype,
                        base: s.dst.base,
                        strides: s.dst.strides,
                    };
                    let s_in = inner_strides[n_src];
                    load_lanes(isa, mems, &dst, s.lane, d_row, d_off, s_in, c, bytes, old);
                    if op == Alu::RightShift && s.lane == Lane::I32 {
                        let width = width_mask(s.dst.dtype);
                        old[..c].iter_mut().for_each(|x| *x &= width);
                    }
                    apply(
                        isa,
                        s.lane,
                        op,
                        &old[..c],
                        Rhs::Run(&out[..c]),
                        &mut sum[..c],
                    );
                    core::mem::swap(out, sum);
                }
                if let Some(f) = fold.as_mut() {
                    f.fold(isa, s.lane, &out[..c]);
                }
                let s_in = inner_strides[n_src];
                store_lanes(
                    isa,
                    mems,
                    &s.dst,
                    s.lane,
                    d_row,
                    d_off,
                    s_in,
                    &out[..c],
                    bytes,
                );
                done += c;
            }
        });
        if let (Some(f), Some(red)) = (fold, s.reduce) {
            let v = f.finish(isa, s.lane);
            let row = r as isize * red.sink.strides[0];
            store_lanes(isa, mems, &red.sink, s.lane, row, 0, 1, &[v], bytes);
        }
    }
}

/// The partition of element offset `elem` of a memory whose partitions hold `per` elements.
fn partition(elem: isize, per: isize) -> isize {
    elem.div_euclid(per)
}

/// What an instruction writes and reads, for deciding whether its rows can be split between
/// two threads.
pub(crate) struct RowSplit<'a> {
    /// Rows (partitions) of the grid.
    pub rows: usize,
    /// Elements of the grid.
    pub elems: usize,
    /// Every destination (all must map row `r` to the same partition of one memory).
    pub writes: &'a [Sink],
    /// Every source.
    pub reads: &'a [Source],
}

/// Where to split the rows between two threads, or `None` when the instruction must run on
/// one: small, or some thread could read what the other writes.
fn split_point(s: &RowSplit<'_>, sbuf_stride: usize) -> Option<(usize, Loc, isize)> {
    let rows = s.rows;
    if rows < 2 || s.elems < MIN_SPLIT_ELEMS {
        return None;
    }
    let per = |loc: Loc, dtype: DType| {
        let bytes = match loc {
            Loc::Psum => Psum::PARTITION_STRIDE,
            _ => sbuf_stride,
        };
        (bytes / dtype.size() as usize) as isize
    };
    let first = |loc, dtype, base| partition(base, per(loc, dtype));
    let (d, rest) = s.writes.split_first()?;
    if d.strides[0] != per(d.loc, d.dtype) {
        return None;
    }
    let dp = first(d.loc, d.dtype, d.base);
    for k in rest {
        if k.loc != d.loc
            || k.strides[0] != per(k.loc, k.dtype)
            || first(k.loc, k.dtype, k.base) != dp
        {
            return None;
        }
    }
    let written = dp..dp + rows as isize;
    for src in s.reads {
        if let Source::Mem {
            loc,
            dtype,
            base,
            strides,
        } = *src
            && loc == d.loc
        {
            let sp = first(loc, dtype, base);
            let same_rows = strides[0] == per(loc, dtype) && sp == dp;
            let reach = if strides[0] == 0 {
                sp..sp + 1
            } else {
                sp..sp + rows as isize
            };
            let disjoint = reach.end <= written.start || reach.start >= written.end;
            if !(same_rows || disjoint) {
                return None;
            }
        }
    }
    Some((rows / 2, d.loc, dp))
}

/// The memories one thread sees when it owns bytes `own_start..above_start` of the written
/// memory `loc`.
fn thread_mems<'m>(
    loc: Loc,
    below: &'m [u8],
    own: &'m mut [u8],
    own_start: usize,
    above: &'m [u8],
    above_start: usize,
    other: &'m [u8],
) -> Mems<'m> {
    let mine = Region {
        below,
        own,
        own_start,
        above,
        above_start,
    };
    match loc {
        Loc::Psum => Mems {
            sbuf: Region::shared(other),
            psum: mine,
        },
        _ => Mems {
            sbuf: mine,
            psum: Region::shared(other),
        },
    }
}

/// The work on a range of rows of an instruction, with one thread's memories and lanes.
pub(crate) type RowsBody<'a> = dyn Fn(Isa, &mut Mems<'_>, Range<usize>, &mut Lanes) + Sync + 'a;

/// Runs `body` over the rows of an instruction: on two threads (each with its own lanes and
/// its own writable partitions) when [`RowSplit`] allows, else on this one.
pub(crate) fn for_rows(e: &mut Engines, split: &RowSplit<'_>, body: &RowsBody<'_>) {
    let sbuf_stride = e.sbuf.partition_stride();
    let Engines {
        isa,
        sbuf,
        psum,
        lanes,
        lanes_worker,
        worker,
        ..
    } = e;
    let isa = *isa;
    let rows = split.rows;
    let plan = split_point(split, sbuf_stride).and_then(|p| near(worker.as_mut()?).map(|w| (w, p)));
    let Some((worker, (h, loc, p0))) = plan else {
        let mut mems = Mems {
            sbuf: Region::whole(sbuf.bytes_mut()),
            psum: Region::whole(psum.bytes_mut()),
        };
        return body(isa, &mut mems, 0..rows, lanes);
    };
    let (mem, other) = match loc {
        Loc::Psum => (psum.bytes_mut(), sbuf.bytes()),
        _ => (sbuf.bytes_mut(), psum.bytes()),
    };
    let part = match loc {
        Loc::Psum => Psum::PARTITION_STRIDE,
        _ => sbuf_stride,
    };
    let p0 = p0 as usize;
    let (a0, b0, b1) = (p0 * part, (p0 + h) * part, (p0 + rows) * part);
    let (below, rest) = mem.split_at_mut(a0);
    let (own_a, rest) = rest.split_at_mut(b0 - a0);
    let (own_b, above) = rest.split_at_mut(b1 - b0);
    let (below, above) = (&*below, &*above);
    let mut ma = thread_mems(loc, below, own_a, a0, above, b1, other);
    let mut mb = thread_mems(loc, below, own_b, b0, above, b1, other);
    worker.join(
        || body(isa, &mut ma, 0..h, lanes),
        || body(isa, &mut mb, h..rows, lanes_worker),
    );
}

/// Runs a streamed instruction, on two threads when it is large and safe to split.
pub(crate) fn stream(e: &mut Engines, s: &Stream<'_>, compute: &Compute<'_>) {
    let mut writes = [s.dst; 2];
    let n = match s.reduce {
        Some(r) => {
            writes[1] = r.sink;
            2
        }
        None => 1,
    };
    let split = RowSplit {
        rows: s.dims[0],
        elems: s.dims.iter().product(),
        writes: &writes[..n],
        reads: s.srcs,
    };
    for_rows(e, &split, &|isa, mems, rows, lanes| {
        stream_rows(isa, mems, s, rows, lanes, compute)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_in_the_documented_order() {
        // Non-associative sums: the documented order, computed by hand, on both entry paths
        // (one value at a time and whole blocks).
        let values: Vec<f32> = (0..37)
            .map(|i| 1.0 + (i as f32) * 1e-7 * (i as f32))
            .collect();
        let mut partial = [-0.0f32; 16];
        for (i, v) in values.iter().enumerate() {
            partial[i % 16] += v;
        }
        for w in [8, 4, 2, 1] {
            for l in 0..w {
                partial[l] += partial[l + w];
            }
        }
        let bits: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
        for isa in Isa::supported() {
            for cut in [0, 1, 5, 16, 17, 36, 37] {
                let mut f = RowFold::new(Alu::Add, Lane::F32);
                f.fold(isa, Lane::F32, &bits[..cut]);
                f.fold(isa, Lane::F32, &bits[cut..]);
                assert_eq!(
                    f32::from_bits(f.finish(isa, Lane::F32)),
                    partial[0],
                    "{isa:?} {cut}"
                );
            }
        }
        let empty = RowFold::new(Alu::Max, Lane::F32).finish(Isa::Portable, Lane::F32);
        assert_eq!(f32::from_bits(empty), f32::NEG_INFINITY);
        // A NaN with a payload, or one an operation makes (∞ − ∞, 0 · ∞), anywhere in the
        // sequence gives the canonical NaN.
        for (op, nan_at, poison) in [
            (Alu::Add, 3, f32::from_bits(0x7fa0_1234)),
            (Alu::Add, 30, f32::from_bits(0xffc0_0001)),
            (Alu::Multiply, 21, f32::from_bits(0x7f80_0001)),
        ] {
            let mut v = bits.clone();
            v[nan_at] = poison.to_bits();
            for isa in Isa::supported() {
                let mut f = RowFold::new(op, Lane::F32);
                f.fold(isa, Lane::F32, &v);
                assert_eq!(f.finish(isa, Lane::F32), 0x7fc0_0000, "{op:?} {isa:?}");
            }
        }
        let mut v = bits.clone();
        v[5] = f32::INFINITY.to_bits();
        v[37 - 16] = f32::NEG_INFINITY.to_bits();
        for isa in Isa::supported() {
            let mut f = RowFold::new(Alu::Add, Lane::F32);
            f.fold(isa, Lane::F32, &v);
            assert_eq!(f.finish(isa, Lane::F32), 0x7fc0_0000, "∞ − ∞ {isa:?}");
        }
    }

    #[test]
    fn free_plans_merge_contiguous_dims() {
        let dims = [4, 2, 3, 5, 1];
        let mut st = [[100, 15, 5, 1, 0], [0, 0, 0, 0, 0]];
        let p = FreePlan::new(&dims, &mut st);
        assert_eq!(&p.dims[..p.rank], &[30]);
        assert_eq!(st[0][1], 1);
        let mut st = [[100, 16, 5, 1, 0], [50, 15, 5, 1, 0]];
        let p = FreePlan::new(&dims, &mut st);
        assert_eq!(&p.dims[..p.rank], &[2, 15]);
        assert_eq!((st[0][1], st[0][2]), (16, 1));
        let mut runs = Vec::new();
        p.runs(&st, |o, n| runs.push((o.to_vec(), n)));
        assert_eq!(runs, [(vec![0, 0], 15), (vec![16, 15], 15)]);
    }
}
