//! The lanes of elementwise instructions: what they hold and how they are filled and emptied.
//!
//! Streamed instructions and reductions compute on chunks of 32-bit lanes ([`Lane`]: fp32 or
//! int32 values). A [`Source`] says where an operand's lanes come from (a tile, an immediate, a
//! grid expression) and a [`Sink`] where results go; [`load_lanes`] and [`store_lanes`] fill and
//! empty a chunk along one strided run with the model's conversions, [`gather_lanes`],
//! [`contiguous_lanes`] and [`scatter_lanes`] along several [`Runs`]. The ALU adapters
//! ([`apply`], [`apply_rev`], [`apply_assign`], [`combine`]) run [`crate::cpu::alu`] on lanes of
//! either kind, and [`RowFold`] fixes the order of a reduction along a sequence of lanes.
//! [`Lanes`] are one thread's buffers of them.

use nki_lang::{Alu, DType, MAX_TILE_RANK};

use super::CHUNK;
use super::mems::{Mems, span};
use crate::cpu::Isa;
use crate::cpu::alu::{self, Rhs};
use crate::cpu::convert::{load_f32, load_i32, store_f32, store_i32};
use crate::operand::{Loc, Resolved};

/// Most sources a streamed instruction reads.
pub(crate) const MAX_SOURCES: usize = 4;

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
            loc @ (Loc::Sbuf | Loc::Psum | Loc::Hbm(_)) => Source::Mem {
                loc,
                dtype: r.dtype,
                base: r.pattern.base,
                strides: aligned,
            },
        }
    }

    /// The element strides per grid dimension (`None` for a splat).
    pub(super) fn strides(&self) -> Option<[isize; MAX_TILE_RANK]> {
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
    apply_rev(isa, lane, op, a, b, false, out);
}

/// `out = a op b`, or `b op a` with `rev`, on lanes of kind `lane`.
pub(super) fn apply_rev(
    isa: Isa,
    lane: Lane,
    op: Alu,
    a: &[u32],
    b: Rhs<'_, u32>,
    rev: bool,
    out: &mut [u32],
) {
    match lane {
        Lane::F32 => alu::apply(
            isa,
            op,
            bytemuck::cast_slice(a),
            f32_lanes(b),
            rev,
            bytemuck::cast_slice_mut(out),
        ),
        Lane::I32 => alu::apply_bits(
            isa,
            op,
            bytemuck::cast_slice(a),
            i32_lanes(b),
            rev,
            bytemuck::cast_slice_mut(out),
        ),
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
        Lane::F32 => alu::apply_assign(isa, op, bytemuck::cast_slice_mut(acc), f32_lanes(b), rev),
        Lane::I32 => {
            alu::apply_bits_assign(isa, op, bytemuck::cast_slice_mut(acc), i32_lanes(b), rev)
        }
    }
}

/// An operand of fp32 lanes as fp32 values.
fn f32_lanes(b: Rhs<'_, u32>) -> Rhs<'_, f32> {
    match b {
        Rhs::Run(b) => Rhs::Run(bytemuck::cast_slice::<u32, f32>(b)),
        Rhs::Splat(x) => Rhs::Splat(f32::from_bits(x)),
        Rhs::Repeat { runs, len, times } => Rhs::Repeat {
            runs: bytemuck::cast_slice::<u32, f32>(runs),
            len,
            times,
        },
    }
}

/// An operand of int32 lanes as int32 values.
fn i32_lanes(b: Rhs<'_, u32>) -> Rhs<'_, i32> {
    match b {
        Rhs::Run(b) => Rhs::Run(bytemuck::cast_slice::<u32, i32>(b)),
        Rhs::Splat(x) => Rhs::Splat(x as i32),
        Rhs::Repeat { runs, len, times } => Rhs::Repeat {
            runs: bytemuck::cast_slice::<u32, i32>(runs),
            len,
            times,
        },
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

/// Per-thread lane buffers of streamed instructions and the top-8 searches' rows, allocated once
/// per core.
pub(crate) struct Lanes {
    /// One chunk per source.
    pub(super) ins: [Vec<u32>; MAX_SOURCES],
    /// The result chunk.
    pub(super) out: Vec<u32>,
    /// The destination's old values, when accumulating.
    pub(super) old: Vec<u32>,
    /// Scratch chunk of the compute callback, and the accumulated results.
    pub(super) sum: Vec<u32>,
    /// A row's results held until its sources are read ([`super::stream::Stream::whole_rows`]).
    pub(super) row: Vec<u32>,
    /// Scratch chunks of the compute callback ([`super::stream::SCRATCH_CHUNKS`]).
    pub(super) scratch: Vec<u32>,
    /// Bytes of a chunk in memory (gathers and scatters).
    pub(super) bytes: Vec<u8>,
    /// The top-8 searches' rows and results.
    pub(super) top8: super::top8::Rows,
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
            scratch: vec![0; CHUNK * super::stream::SCRATCH_CHUNKS],
            row: vec![0; super::stream::ROW_LANES],
            bytes: vec![0; CHUNK * 4],
            top8: super::top8::Rows::default(),
        }
    }
}

/// The bits of a narrow signed integer in its sign-extended int32 lane: a logical right shift
/// shifts the dtype's own bits (docs/dtypes.md, integer lanes), so the lane is cut to them first.
pub(crate) fn width_mask(dtype: DType) -> u32 {
    match dtype {
        DType::I8 => 0xff,
        DType::I16 => 0xffff,
        DType::F32
        | DType::Tf32
        | DType::Bf16
        | DType::F16
        | DType::F8E4M3
        | DType::F8E5M2
        | DType::F8E4M3Fn
        | DType::F4E2M1Fn
        | DType::F8E8M0Fnu
        | DType::F8E5M2X4
        | DType::F8E4M3FnX4
        | DType::F4E2M1FnX4
        | DType::I32
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::Bool => u32::MAX,
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
pub(super) fn in_place(bytes: &[u8]) -> &[u32] {
    bytemuck::cast_slice(bytes)
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
}
