//! `tensor_reduce` and `bn_stats` against an independent implementation of the documented
//! reduction order (docs/numerics.md, "Reductions"), bit for bit.
//!
//! The reference here is the definition written out straightforwardly: per partition, per
//! output element in row-major order of the kept axes, the values in row-major order of the
//! reduced axes go into 16 partials (value `i` into partial `i mod 16`, each starting from the
//! operation's identity, each step `alu::eval` / `alu::eval_bits`), the partials combine
//! pairwise (`l` absorbs `l + 8`, `l + 4`, `l + 2`, `l + 1`), the result is negated, combined
//! with the destination's old value when accumulating, converted and written before the next
//! output element is read. Conversions are the model's (`cpu::convert`).
//!
//! Random cases (a seeded generator, every case printed on failure): shapes of rank 1–4 with
//! reduced axes inner, outer or several, 1 to 40 values per output element, permuted, gapped,
//! broadcast (stride 0) and reversed source strides, permuted and gapped destinations (SBUF or
//! PSUM), destinations overlapping the source, every reduction operation on fp32, bf16 and
//! integer sources (integer lanes for the bit operations), NaN (with payloads), ±0, ±∞ and
//! subnormal inputs, `negate`, accumulation. Each runs on every supported host path with one and
//! two host threads; larger fixed cases make the two threads split the partitions.

use nki_lang::builder::{Grid, ProgramBuilder};
use nki_lang::{
    Affine, Alu, AluClass, DType, Dim, Dst, Instr, InstrData, MAX_TILE_RANK, Memory, Opcode,
    Target, TileShape, TileView, Write,
};
use nki_runtime::cpu::alu;
use nki_runtime::cpu::convert::{load_f32, load_i32, store_f32, store_i32};
use nki_runtime::{HbmIn, HbmOut, Isa, Kernel, NeuronCore};

/// xorshift64*: a deterministic source for the cases.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() >> 33) as usize % n
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

thread_local! {
    /// Each test thread's cores, made once: a core's memories are large, and the cases are
    /// many and small.
    static CORES: std::cell::RefCell<Vec<NeuronCore>> = std::cell::RefCell::new(cores());
}

/// Every core configuration: each host code path, one and two host threads (plain: a strict
/// launch runs on one thread).
fn cores() -> Vec<NeuronCore> {
    let mut v = Vec::new();
    for isa in Isa::supported() {
        for threads in [1, 2] {
            let core = NeuronCore::new(Target::Trn1).with_isa(isa).unwrap();
            v.push(core.with_strict(false).with_host_threads(threads));
        }
    }
    v
}

/// A view of a tile: free shape and strides (partition dimension implied), element offset.
#[derive(Clone, Debug)]
struct View {
    dims: Vec<usize>,
    strides: Vec<isize>,
    offset: isize,
}

/// One `tensor_reduce` case.
#[derive(Clone, Debug)]
struct Case {
    p: usize,
    op: Alu,
    axes: u8,
    negate: bool,
    accumulate: Option<Alu>,
    src_dtype: DType,
    dst_dtype: DType,
    /// Free elements per partition of the source tile and of the destination tile.
    src_free: usize,
    dst_free: usize,
    src: View,
    dst: View,
    /// The destination is a view of the source's tile.
    in_place: bool,
    dst_psum: bool,
    /// Bytes of the source tile and of the destination tile (its old value), row-major.
    src_bytes: Vec<u8>,
    dst_bytes: Vec<u8>,
}

fn size(d: DType) -> usize {
    d.size() as usize
}

fn lane_of(op: Alu) -> bool {
    // true: integer lanes.
    op.class() == AluClass::Bitvec
}

/// One fp32 value for the inputs: ordinary values of many magnitudes, and with probability
/// `special`% a special one.
fn value(rng: &mut Rng, special: usize, zeros: usize) -> f32 {
    if rng.chance(zeros) {
        return if rng.chance(50) { 0.0 } else { -0.0 };
    }
    if rng.chance(special) {
        return rng.pick(&[
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::from_bits(0x7fa0_1234),
            f32::from_bits(0xffc0_0001),
            f32::from_bits(0x0000_0001),
            -f32::from_bits(0x0040_0000),
            f32::MAX,
            f32::MIN,
            1.0,
        ]);
    }
    let m = 1.0 + rng.below(1 << 20) as f32 / (1 << 20) as f32;
    let e = rng.below(24) as i32 - 12;
    let s = if rng.chance(50) { 1.0 } else { -1.0 };
    s * m * 2f32.powi(e)
}

/// Bytes of `n` elements of `dtype`.
fn fill(rng: &mut Rng, dtype: DType, n: usize, special: usize, zeros: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * size(dtype));
    for _ in 0..n {
        match dtype {
            DType::F32 => out.extend(value(rng, special, zeros).to_le_bytes()),
            DType::Bf16 => {
                let bits = value(rng, special, zeros).to_bits() >> 16;
                out.extend((bits as u16).to_le_bytes());
            }
            _ => {
                let bits = if rng.chance(zeros) {
                    0
                } else if rng.chance(50) {
                    rng.next() as u32
                } else {
                    (rng.below(41) as i32 - 20) as u32
                };
                out.extend(&bits.to_le_bytes()[..size(dtype)]);
            }
        }
    }
    out
}

/// A layout of `dims` (free dims) in a row: the dims in a random order, row-major in that order
/// with random gaps; returns the strides and the elements the layout spans.
fn layout(rng: &mut Rng, dims: &[usize], gaps: bool) -> (Vec<isize>, usize) {
    let mut order: Vec<usize> = (0..dims.len()).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i + 1);
        order.swap(i, j);
    }
    let mut strides = vec![0isize; dims.len()];
    let mut s = 1isize;
    for &j in order.iter().rev() {
        if gaps && rng.chance(25) {
            s += rng.below(3) as isize;
        }
        strides[j] = s;
        s *= dims[j] as isize;
    }
    (strides, s as usize)
}

/// A random case, or `None` when its sizes fall outside the ranges tested.
fn case(rng: &mut Rng) -> Option<Case> {
    let rank = 1 + rng.below(4);
    let sizes = [1, 1, 2, 2, 2, 3, 4, 5, 7, 8, 16, 17, 33, 40];
    let dims: Vec<usize> = (0..rank).map(|_| rng.pick(&sizes)).collect();
    let axes = loop {
        let a = rng.below(1 << rank) as u8;
        if a != 0 {
            break a;
        }
    };
    let reduced = |j: usize| axes >> j & 1 == 1;
    let m: usize = (0..rank).filter(|&j| reduced(j)).map(|j| dims[j]).product();
    let kept: usize = (0..rank)
        .filter(|&j| !reduced(j))
        .map(|j| dims[j])
        .product();
    if m > 40 || kept > 700 {
        return None;
    }
    let int_lanes = rng.chance(25);
    let op = if int_lanes {
        rng.pick(&[Alu::BitwiseAnd, Alu::BitwiseOr, Alu::BitwiseXor])
    } else {
        rng.pick(&[
            Alu::Add,
            Alu::Add,
            Alu::Subtract,
            Alu::Multiply,
            Alu::Max,
            Alu::Max,
            Alu::Min,
            Alu::LogicalAnd,
            Alu::LogicalOr,
            Alu::LogicalXor,
        ])
    };
    let src_dtype = if int_lanes {
        rng.pick(&[DType::I32, DType::I16, DType::U8, DType::U32])
    } else {
        rng.pick(&[DType::F32, DType::F32, DType::Bf16, DType::I32])
    };
    let in_place = rng.chance(10);
    let dst_dtype = if in_place {
        src_dtype
    } else if int_lanes {
        rng.pick(&[DType::I32, DType::I16])
    } else {
        rng.pick(&[DType::F32, DType::F32, DType::Bf16])
    };
    let dst_psum = !in_place && dst_dtype == DType::F32 && rng.chance(15);
    let accumulate = if rng.chance(25) {
        Some(if int_lanes {
            rng.pick(&[Alu::BitwiseOr, Alu::BitwiseXor, Alu::Add])
        } else {
            rng.pick(&[Alu::Add, Alu::Max, Alu::Subtract, Alu::Multiply])
        })
    } else {
        None
    };
    // The source: a layout of its dims, possibly with one dim broadcast or reversed.
    let (mut strides, mut span) = layout(rng, &dims, true);
    let mut offset = rng.below(3) as isize;
    if rng.chance(10) {
        let j = rng.below(rank);
        strides[j] = 0;
    }
    if rng.chance(10) {
        let j = rng.below(rank);
        offset += strides[j] * (dims[j] as isize - 1);
        strides[j] = -strides[j];
    }
    span += offset as usize + 3;
    let src = View {
        dims: dims.clone(),
        strides,
        offset,
    };
    // The destination: the kept dims (1 along the reduced ones, or left out).
    let squeeze = rng.chance(50);
    let mut ddims = Vec::new();
    for (j, &d) in dims.iter().enumerate() {
        if !reduced(j) {
            ddims.push(d);
        } else if !squeeze {
            ddims.push(1);
        }
    }
    if ddims.is_empty() {
        ddims.push(1);
    }
    let (mut dstrides, dspan) = layout(rng, &ddims, true);
    let mut doffset = rng.below(3) as isize;
    if rng.chance(10) {
        // Repeated destination elements: a dim of stride 0 (the last write stays; with
        // accumulation each write reads the previous one).
        let j = rng.below(ddims.len());
        dstrides[j] = 0;
    }
    let (dst_free, src_free) = if in_place {
        let free = span.max(dspan + 3);
        doffset = rng.below(free - dspan + 1) as isize;
        (free, free)
    } else {
        (dspan + 3, span)
    };
    let dst = View {
        dims: ddims,
        strides: dstrides,
        offset: doffset,
    };
    let p = 1 + rng.below(5);
    let special = rng.pick(&[0, 5, 30]);
    let zeros = match op.class() {
        AluClass::Logical => 40,
        _ => rng.pick(&[0, 0, 10]),
    };
    let src_bytes = fill(rng, src_dtype, p * src_free, special, zeros);
    let dst_bytes = fill(rng, dst_dtype, p * dst_free, special, 0);
    Some(Case {
        p,
        op,
        axes,
        negate: rng.chance(30),
        accumulate,
        src_dtype,
        dst_dtype,
        src_free,
        dst_free,
        src,
        dst,
        in_place,
        dst_psum,
        src_bytes,
        dst_bytes,
    })
}

fn tile_view(tile: u16, p: usize, v: &View) -> TileView {
    let mut shape = vec![p as u32];
    shape.extend(v.dims.iter().map(|&d| d as u32));
    let mut strides = [0i64; MAX_TILE_RANK - 1];
    for (s, &x) in strides.iter_mut().zip(&v.strides) {
        *s = x as i64;
    }
    TileView {
        tile,
        part_start: 0,
        shape: TileShape::new(&shape).unwrap(),
        offset: Affine::constant(v.offset as i64),
        strides,
        part_var: Affine::ZERO,
        dtype: None,
    }
}

/// The program: load the source tile (and the destination's old value), reduce, store the
/// destination's tile. `None` when the rules reject the case.
fn program(c: &Case) -> Option<nki_lang::CompiledProgram> {
    let mut b = ProgramBuilder::new("reduce", Target::Trn1);
    let fixed = |d: &[usize]| d.iter().map(|&n| Dim::Fixed(n as u64)).collect::<Vec<_>>();
    let p = c.p as u32;
    let xi = b
        .input("x", c.src_dtype, &fixed(&[c.p, c.src_free]))
        .unwrap();
    let xt = b
        .tile("x", Memory::Sbuf, c.src_dtype, &[p, c.src_free as u32])
        .ok()?;
    b.load(xt, Grid::origin(xi)).ok()?;
    let dt = if c.in_place {
        xt
    } else {
        let di = b
            .input("d", c.dst_dtype, &fixed(&[c.p, c.dst_free]))
            .unwrap();
        let dt = b
            .tile("d", Memory::Sbuf, c.dst_dtype, &[p, c.dst_free as u32])
            .ok()?;
        b.load(dt, Grid::origin(di)).ok()?;
        if c.dst_psum {
            let pt = b
                .tile("dp", Memory::Psum, c.dst_dtype, &[p, c.dst_free as u32])
                .ok()?;
            b.tensor_copy(pt, dt).ok()?;
            pt
        } else {
            dt
        }
    };
    let o = b
        .output("o", c.dst_dtype, &fixed(&[c.p, c.dst_free]))
        .unwrap();
    let src = b.view(tile_view(xt.index(), c.p, &c.src)).ok()?;
    let dst = b.view(tile_view(dt.index(), c.p, &c.dst)).ok()?;
    let write = match c.accumulate {
        Some(op) => Write::Accumulate(op),
        None => Write::Overwrite,
    };
    b.push(Instr::new(
        Opcode::TensorReduce,
        InstrData::Reduce {
            dst: Dst { view: dst, write },
            src,
            op: c.op,
            axes: c.axes,
            negate: c.negate,
        },
    ))
    .ok()?;
    if c.dst_psum {
        // PSUM cannot be stored directly: through an SBUF copy.
        let st = b
            .tile("s", Memory::Sbuf, c.dst_dtype, &[p, c.dst_free as u32])
            .ok()?;
        b.tensor_copy(st, dt).ok()?;
        b.store(Grid::origin(o), st).ok()?;
    } else {
        b.store(Grid::origin(o), dt).ok()?;
    }
    b.finish().ok()
}

/// One element of `dtype` at `at` of `mem` as a lane.
fn load(mem: &[u8], dtype: DType, at: usize, int: bool) -> u32 {
    let bytes = &mem[at * size(dtype)..(at + 1) * size(dtype)];
    if int {
        let mut v = [0i32];
        load_i32(Isa::Portable, bytes, dtype, &mut v);
        v[0] as u32
    } else {
        let mut v = [0f32];
        load_f32(Isa::Portable, bytes, dtype, &mut v);
        v[0].to_bits()
    }
}

fn store(mem: &mut [u8], dtype: DType, at: usize, int: bool, lane: u32) {
    let bytes = &mut mem[at * size(dtype)..(at + 1) * size(dtype)];
    if int {
        store_i32(Isa::Portable, &[lane as i32], bytes, dtype);
    } else {
        store_f32(Isa::Portable, &[f32::from_bits(lane)], bytes, dtype);
    }
}

fn eval(op: Alu, int: bool, a: u32, b: u32) -> u32 {
    if int {
        alu::eval_bits(op, a as i32, b as i32) as u32
    } else {
        alu::eval(op, f32::from_bits(a), f32::from_bits(b)).to_bits()
    }
}

/// Row-major multi-indices of `dims`.
fn indices(dims: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &d in dims {
        out = out
            .into_iter()
            .flat_map(|ix| {
                (0..d).map(move |i| {
                    let mut v = ix.clone();
                    v.push(i);
                    v
                })
            })
            .collect();
    }
    out
}

/// The destination tile's bytes after the reduction, by the definition.
fn reference(c: &Case) -> Vec<u8> {
    let int = lane_of(c.op);
    let mut src = c.src_bytes.clone();
    let mut dst = if c.in_place {
        Vec::new()
    } else {
        c.dst_bytes.clone()
    };
    let rank = c.src.dims.len();
    let reduced = |j: usize| c.axes >> j & 1 == 1;
    let kept_dims: Vec<usize> = (0..rank).filter(|&j| !reduced(j)).collect();
    let red_dims: Vec<usize> = (0..rank).filter(|&j| reduced(j)).collect();
    let sizes = |ax: &[usize]| ax.iter().map(|&j| c.src.dims[j]).collect::<Vec<_>>();
    let id = {
        let x = c.op.identity().unwrap();
        if int { x as i32 as u32 } else { x.to_bits() }
    };
    // The destination's strides per kept axis: its dims of size above 1, in order.
    let d_sizes: Vec<(usize, isize)> = c
        .dst
        .dims
        .iter()
        .zip(&c.dst.strides)
        .filter(|(d, _)| **d > 1)
        .map(|(&d, &s)| (d, s))
        .collect();
    for r in 0..c.p {
        for k in indices(&sizes(&kept_dims)) {
            let mut s_off = c.src.offset;
            for (&j, &i) in kept_dims.iter().zip(&k) {
                s_off += c.src.strides[j] * i as isize;
            }
            let mut d_off = c.dst.offset;
            let mut big = d_sizes.iter();
            for (&j, &i) in kept_dims.iter().zip(&k) {
                if c.src.dims[j] > 1 {
                    let &(_, s) = big.next().unwrap();
                    d_off += s * i as isize;
                }
            }
            let mut partial = [id; 16];
            let mem: &[u8] = &src;
            for (n, ix) in indices(&sizes(&red_dims)).iter().enumerate() {
                let mut off = s_off;
                for (&j, &i) in red_dims.iter().zip(ix) {
                    off += c.src.strides[j] * i as isize;
                }
                let v = load(mem, c.src_dtype, r * c.src_free + off as usize, int);
                partial[n % 16] = eval(c.op, int, partial[n % 16], v);
            }
            for w in [8, 4, 2, 1] {
                for l in 0..w {
                    partial[l] = eval(c.op, int, partial[l], partial[l + w]);
                }
            }
            let mut v = partial[0];
            if c.negate {
                v = if int {
                    (v as i32).wrapping_neg() as u32
                } else {
                    alu::eval(Alu::Multiply, f32::from_bits(v), -1.0).to_bits()
                };
            }
            let out: &mut Vec<u8> = if c.in_place { &mut src } else { &mut dst };
            let at = r * c.dst_free + d_off as usize;
            if let Some(acc) = c.accumulate {
                let old = load(out, c.dst_dtype, at, int);
                v = eval(acc, int, old, v);
            }
            store(out, c.dst_dtype, at, int, v);
        }
    }
    if c.in_place { src } else { dst }
}

/// Runs the case's program on every core; returns the output bytes of each.
fn run(c: &Case, prog: &nki_lang::CompiledProgram) -> Vec<Vec<u8>> {
    let parts = prog.parts();
    let kernel = Kernel::new(parts.program());
    let words = |b: &[u8]| {
        let mut w = vec![0u32; b.len().div_ceil(4)];
        bytemuck::cast_slice_mut::<u32, u8>(&mut w)[..b.len()].copy_from_slice(b);
        w
    };
    let x = words(&c.src_bytes);
    let d = words(&c.dst_bytes);
    let n_dst = c.p * c.dst_free;
    CORES.with_borrow_mut(|cores| {
        cores
            .iter_mut()
            .map(|core| {
                let mut o = vec![0u32; (n_dst * size(c.dst_dtype)).div_ceil(4)];
                {
                    let xs = typed_in(&x, c.src_dtype, [c.p, c.src_free]);
                    let ds = typed_in(&d, c.dst_dtype, [c.p, c.dst_free]);
                    let mut ins = vec![xs];
                    if !c.in_place {
                        ins.push(ds);
                    }
                    let out = typed_out(&mut o, c.dst_dtype, [c.p, c.dst_free]);
                    core.launch(&kernel, &ins, &mut [out]).unwrap();
                }
                bytemuck::cast_slice::<u32, u8>(&o)[..n_dst * size(c.dst_dtype)].to_vec()
            })
            .collect()
    })
}

fn typed_in(w: &[u32], dtype: DType, shape: [usize; 2]) -> HbmIn<'_> {
    let n = shape[0] * shape[1];
    let b = &bytemuck::cast_slice::<u32, u8>(w)[..n * size(dtype)];
    match dtype {
        DType::F32 => HbmIn::new::<f32>(bytemuck::cast_slice(b), &shape),
        DType::Bf16 => HbmIn::new::<half::bf16>(bytemuck::cast_slice(b), &shape),
        DType::I32 => HbmIn::new::<i32>(bytemuck::cast_slice(b), &shape),
        DType::U32 => HbmIn::new::<u32>(bytemuck::cast_slice(b), &shape),
        DType::I16 => HbmIn::new::<i16>(bytemuck::cast_slice(b), &shape),
        DType::U8 => HbmIn::new::<u8>(b, &shape),
        d => panic!("dtype {d:?}"),
    }
    .unwrap()
}

fn typed_out(w: &mut [u32], dtype: DType, shape: [usize; 2]) -> HbmOut<'_> {
    let n = shape[0] * shape[1];
    let b = &mut bytemuck::cast_slice_mut::<u32, u8>(w)[..n * size(dtype)];
    match dtype {
        DType::F32 => HbmOut::new::<f32>(bytemuck::cast_slice_mut(b), &shape),
        DType::Bf16 => HbmOut::new::<half::bf16>(bytemuck::cast_slice_mut(b), &shape),
        DType::I32 => HbmOut::new::<i32>(bytemuck::cast_slice_mut(b), &shape),
        DType::U32 => HbmOut::new::<u32>(bytemuck::cast_slice_mut(b), &shape),
        DType::I16 => HbmOut::new::<i16>(bytemuck::cast_slice_mut(b), &shape),
        DType::U8 => HbmOut::new::<u8>(b, &shape),
        d => panic!("dtype {d:?}"),
    }
    .unwrap()
}

/// Compares every core's output with the reference, naming the first differing element.
fn check(c: &Case, label: &str) {
    let prog = program(c).unwrap_or_else(|| panic!("{label}: rejected: {c:?}"));
    let want = reference(c);
    let configs: Vec<String> = Isa::supported()
        .into_iter()
        .flat_map(|isa| [1, 2].map(|t| format!("{isa:?}, {t} thread(s)")))
        .collect();
    for (got, config) in run(c, &prog).iter().zip(&configs) {
        if *got != want {
            let sz = size(c.dst_dtype);
            let at = (0..want.len() / sz)
                .find(|&i| got[i * sz..(i + 1) * sz] != want[i * sz..(i + 1) * sz])
                .unwrap();
            panic!(
                "{label} on {config}: element {at} (partition {}, free {}) is {:02x?}, the \
                 definition gives {:02x?}\n{c:?}",
                at / c.dst_free,
                at % c.dst_free,
                &got[at * sz..(at + 1) * sz],
                &want[at * sz..(at + 1) * sz],
            );
        }
    }
}

#[test]
fn random_reductions_follow_the_documented_order() {
    let mut rng = Rng::new(0x5eed_0001);
    let (mut ran, mut rejected) = (0, 0);
    while ran < 400 {
        let Some(c) = case(&mut rng) else {
            continue;
        };
        if program(&c).is_none() {
            rejected += 1;
            assert!(rejected < 200, "too many cases rejected; last: {c:?}");
            continue;
        }
        check(&c, &format!("case {ran}"));
        ran += 1;
    }
}

/// Every reduction operation with every count of values from 1 to 40, the reduced axis inner
/// and outer, on rows of all `+0`, all `−0`, mixed zeros, dense specials and ordinary values.
#[test]
fn every_op_and_value_count() {
    let ops = [
        Alu::Add,
        Alu::Subtract,
        Alu::Multiply,
        Alu::Max,
        Alu::Min,
        Alu::LogicalAnd,
        Alu::LogicalOr,
        Alu::LogicalXor,
        Alu::BitwiseAnd,
        Alu::BitwiseOr,
        Alu::BitwiseXor,
    ];
    let mut rng = Rng::new(3);
    for op in ops {
        let int = lane_of(op);
        let dtype = if int { DType::I32 } else { DType::F32 };
        for m in 1..=40 {
            for inner in [false, true] {
                let k = 5;
                let (dims, axes) = if inner {
                    (vec![k, m], 0b10)
                } else {
                    (vec![m, k], 0b01)
                };
                let strides = if inner {
                    vec![m as isize, 1]
                } else {
                    vec![k as isize, 1]
                };
                let p = 6;
                let free = m * k;
                let mut src_bytes = Vec::new();
                for row in 0..p {
                    let bytes = match (int, row) {
                        (false, 0) => (0..free).flat_map(|_| 0f32.to_le_bytes()).collect(),
                        (false, 1) => (0..free).flat_map(|_| (-0f32).to_le_bytes()).collect(),
                        (false, 2) => fill(&mut rng, dtype, free, 0, 100),
                        (false, 3) => fill(&mut rng, dtype, free, 30, 20),
                        (true, 0) => vec![0; free * 4],
                        (true, 1) => vec![0xff; free * 4],
                        _ => fill(&mut rng, dtype, free, 5, 5),
                    };
                    src_bytes.extend(bytes);
                }
                let c = Case {
                    p,
                    op,
                    axes,
                    negate: m % 3 == 0,
                    accumulate: None,
                    src_dtype: dtype,
                    dst_dtype: dtype,
                    src_free: free,
                    dst_free: k,
                    src: View {
                        dims,
                        strides,
                        offset: 0,
                    },
                    dst: View {
                        dims: vec![k],
                        strides: vec![1],
                        offset: 0,
                    },
                    in_place: false,
                    dst_psum: false,
                    src_bytes,
                    dst_bytes: vec![0; p * k * 4],
                };
                check(&c, &format!("{op}, {m} values, inner {inner}"));
            }
        }
    }
}

/// Larger fixed cases: 128 partitions, enough elements for the two host threads to split the
/// partitions, and batches of output elements that end mid-run.
#[test]
fn large_reductions_split_between_threads() {
    let mut rng = Rng::new(7);
    /// dims, axes, op, source and destination dtypes, accumulation, destination in the source.
    struct Large(&'static [usize], u8, Alu, DType, DType, Option<Alu>, bool);
    const POOL: &[usize] = &[8, 2, 33, 2];
    let (f32_, bf16, i32_, i16_) = (DType::F32, DType::Bf16, DType::I32, DType::I16);
    let table = [
        // 2×2 pooling windows.
        Large(POOL, 0b1010, Alu::Add, f32_, f32_, None, false),
        Large(POOL, 0b1010, Alu::Max, bf16, bf16, None, false),
        Large(POOL, 0b1010, Alu::Min, f32_, f32_, Some(Alu::Add), false),
        // An outer axis, more than 16 values.
        Large(&[24, 300], 0b01, Alu::Add, f32_, f32_, None, false),
        Large(&[37, 150], 0b01, Alu::Multiply, f32_, f32_, None, false),
        // An inner axis of long runs (one element at a time), and several axes.
        Large(&[5, 700], 0b10, Alu::Add, f32_, f32_, None, false),
        Large(&[5, 700], 0b10, Alu::Max, bf16, f32_, None, false),
        Large(
            &[3, 40, 5, 8],
            0b1010,
            Alu::Subtract,
            f32_,
            f32_,
            None,
            false,
        ),
        // Integer lanes.
        Large(&[4, 64, 4], 0b101, Alu::BitwiseXor, i32_, i32_, None, false),
        Large(
            &[4, 64, 4],
            0b101,
            Alu::BitwiseOr,
            i16_,
            i32_,
            Some(Alu::BitwiseXor),
            false,
        ),
        // The destination inside the source: element by element.
        Large(&[40, 400], 0b01, Alu::Add, f32_, f32_, None, true),
    ];
    for (n, Large(dims, axes, op, sd, dd, accumulate, in_place)) in table.into_iter().enumerate() {
        let dims = dims.to_vec();
        let p = 128;
        let rank = dims.len();
        // A row-major source.
        let mut rm = vec![0isize; rank];
        let mut span = 1usize;
        for j in (0..rank).rev() {
            rm[j] = span as isize;
            span *= dims[j];
        }
        let reduced = |j: usize| axes >> j & 1 == 1;
        let kept: Vec<usize> = (0..rank)
            .filter(|&j| !reduced(j))
            .map(|j| dims[j])
            .collect();
        let (dstrides, dspan) = layout(&mut rng, &kept, false);
        let free = span.max(dspan);
        let c = Case {
            p,
            op,
            axes,
            negate: n % 3 == 1,
            accumulate,
            src_dtype: sd,
            dst_dtype: dd,
            src_free: free,
            dst_free: if in_place { free } else { dspan },
            src: View {
                dims: dims.clone(),
                strides: rm,
                offset: 0,
            },
            dst: View {
                dims: kept,
                strides: dstrides,
                offset: 0,
            },
            in_place,
            dst_psum: false,
            src_bytes: fill(&mut rng, sd, p * free, 5, 0),
            dst_bytes: fill(&mut rng, dd, p * if in_place { free } else { dspan }, 0, 0),
        };
        check(&c, &format!("large case {n}"));
    }
}

/// `bn_stats` of random rows (even and odd lengths, specials) against its definition: per
/// group (even-indexed, odd-indexed elements), the 16-partial sum, the mean `sum / count`, and
/// the 16-partial sum of the rounded squares of the rounded differences.
#[test]
fn bn_stats_follows_its_definition() {
    let mut rng = Rng::new(99);
    for (p, f, special) in [
        (128, 512, 0),
        (7, 1, 0),
        (3, 2, 0),
        (9, 37, 10),
        (128, 301, 1),
    ] {
        let x: Vec<f32> = (0..p * f).map(|_| value(&mut rng, special, 5)).collect();
        let mut b = ProgramBuilder::new("bn", Target::Trn1);
        let d = |d: &[usize]| d.iter().map(|&n| Dim::Fixed(n as u64)).collect::<Vec<_>>();
        let xi = b.input("x", DType::F32, &d(&[p, f])).unwrap();
        let o = b.output("o", DType::F32, &d(&[p, 6])).unwrap();
        let xt = b
            .tile("x", Memory::Sbuf, DType::F32, &[p as u32, f as u32])
            .unwrap();
        let st = b
            .tile("s", Memory::Sbuf, DType::F32, &[p as u32, 6])
            .unwrap();
        b.load(xt, Grid::origin(xi)).unwrap();
        let src = b
            .view(TileView::whole(
                xt.index(),
                &TileShape::new(&[p as u32, f as u32]).unwrap(),
            ))
            .unwrap();
        let dst = b
            .view(TileView::whole(
                st.index(),
                &TileShape::new(&[p as u32, 6]).unwrap(),
            ))
            .unwrap();
        b.push(Instr::new(
            Opcode::BnStats,
            InstrData::Unary {
                dst: Dst::overwrite(dst),
                src,
            },
        ))
        .unwrap();
        b.store(Grid::origin(o), st).unwrap();
        let prog = b.finish().unwrap();
        let parts = prog.parts();
        let kernel = Kernel::new(parts.program());
        let sum = |v: &[f32]| {
            let mut partial = [-0.0f32; 16];
            for (i, &x) in v.iter().enumerate() {
                partial[i % 16] = alu::eval(Alu::Add, partial[i % 16], x);
            }
            for w in [8, 4, 2, 1] {
                for l in 0..w {
                    partial[l] = alu::eval(Alu::Add, partial[l], partial[l + w]);
                }
            }
            partial[0]
        };
        let stats = |v: &[f32]| {
            if v.is_empty() {
                return [0.0; 3];
            }
            let n = v.len() as f32;
            let mean = sum(v) / n;
            let sq: Vec<f32> = v.iter().map(|&x| (x - mean) * (x - mean)).collect();
            [n, mean, sum(&sq)]
        };
        let mut want = Vec::new();
        for r in 0..p {
            let row = &x[r * f..(r + 1) * f];
            let even: Vec<f32> = row.iter().step_by(2).copied().collect();
            let odd: Vec<f32> = row.iter().skip(1).step_by(2).copied().collect();
            want.extend(stats(&even));
            want.extend(stats(&odd));
        }
        for mut core in cores() {
            let ins = [HbmIn::new(&x, &[p, f]).unwrap()];
            let mut out = vec![0f32; p * 6];
            core.launch(
                &kernel,
                &ins,
                &mut [HbmOut::new(&mut out, &[p, 6]).unwrap()],
            )
            .unwrap();
            for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "[{p}, {f}] row {} value {}: {g:e} vs {w:e}",
                    i / 6,
                    i % 6
                );
            }
        }
    }
}
