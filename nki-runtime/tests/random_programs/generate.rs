//! The generator: a random valid [`Case`] from a string of bytes (a fuzzer's input, or bytes
//! proptest draws). Every choice reads a few bytes; once they run out each choice takes its
//! first, simplest option, so shorter strings give smaller programs and shrinking a failing
//! string shrinks its program.
//!
//! Programs are valid by construction: each stage's tiles are declared in its innermost loop
//! and written whole before they are read, every output element is stored exactly once (each
//! iteration stores its own block of the output, indexed by the loop variables), loads stay
//! inside their inputs (whose shapes are made to fit), and operands satisfy the engines'
//! shape, memory and dtype rules.

use arbitrary::Unstructured;

use super::numerics::to_bf16;
use super::spec::{
    Act, Bin, Carry, Case, Cmp, Dt, Eng, Expr, Index, Kind, Layout, Loop, Mem, Op, Program, Red,
    Scalar, Split, Stage, Step, Tensor, Tile, Window,
};

/// Choices drawn from bytes; each takes its first option once the bytes run out.
pub struct Choices<'a>(Unstructured<'a>);

impl<'a> Choices<'a> {
    /// Choices from `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Choices(Unstructured::new(data))
    }

    /// A number in `0..n` (0 when `n ≤ 1`).
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        self.0.int_in_range(0..=n - 1).unwrap_or(0)
    }

    /// One of `xs` (the first once the bytes run out).
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    /// True with probability `percent`% (false once the bytes run out).
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) >= 100 - percent
    }

    /// An index in `0..weights.len()`, drawn with the given weights.
    pub fn weighted(&mut self, weights: &[usize]) -> usize {
        let mut x = self.below(weights.iter().sum());
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return i;
            }
            x -= w;
        }
        0
    }

    /// A 64-bit number (0 once the bytes run out).
    pub fn u64(&mut self) -> u64 {
        self.0.arbitrary().unwrap_or(0)
    }
}

/// How an input's values are drawn.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Style {
    /// Uniform in `[-1, 1)`, full mantissas.
    Unit,
    /// Integers in `[-4, 4]` (exact sums, many ties in `maximum`).
    SmallInts,
    /// Magnitudes `2^-20` to `2^21`.
    WideExponents,
    /// Values on bf16 rounding ties (and their neighbours).
    BfTies,
    /// Mostly `Unit`, with ±0, ±inf, NaN, subnormals, `f32::MAX` and other edges.
    Specials,
}

impl Style {
    /// A bound on the magnitude of its ordinary values (specials aside).
    fn magnitude(self) -> f64 {
        match self {
            Style::Unit | Style::Specials => 1.0,
            Style::SmallInts => 4.0,
            Style::WideExponents => 2f64.powi(21),
            Style::BfTies => 32.0,
        }
    }

    /// One value, exactly representable in `dt`.
    fn value(self, dt: Dt, rng: &mut Rng) -> f32 {
        /// The edge values of [`Style::Specials`].
        const SPECIALS: [f32; 14] = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            super::numerics::CANONICAL_NAN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            1.0e-40,
            -3.0e-39,
            f32::MAX,
            -f32::MAX,
            65504.0,
            // 2^-130: a bf16 subnormal, kept as such in a bf16 input.
            f32::from_bits(0x0010_0000),
            1.0e30,
        ];
        let x = match self {
            Style::Unit => (rng.unit() * 2.0 - 1.0) as f32,
            Style::SmallInts => rng.below(9) as f32 - 4.0,
            Style::WideExponents => {
                let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                (sign * (1.0 + rng.unit()) * 2f64.powi(rng.below(41) as i32 - 20)) as f32
            }
            Style::BfTies => {
                let r = rng.next();
                let exponent = 123 + (r % 9) as u32;
                let mantissa = ((r >> 8) as u32 & 0x7f) << 16;
                let low = if r >> 20 & 1 == 0 {
                    0x8000
                } else {
                    (r >> 32) as u32 & 0xffff
                };
                f32::from_bits(((r >> 40) as u32 & 1) << 31 | exponent << 23 | mantissa | low)
            }
            Style::Specials => {
                if rng.below(100) < 15 {
                    SPECIALS[rng.below(SPECIALS.len())]
                } else {
                    (rng.unit() * 2.0 - 1.0) as f32
                }
            }
        };
        match dt {
            Dt::F32 => x,
            // Values bf16 holds exactly (subnormals included) are kept; others are rounded.
            Dt::Bf16 if x.to_bits() & 0xffff == 0 => x,
            Dt::Bf16 => to_bf16(x),
        }
    }
}

/// splitmix64: input values from a seed.
struct Rng(u64);

impl Rng {
    /// The next 64 random bits.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Partition counts to draw from (the first ones most often, once bytes are scarce).
const PARTITIONS: [u32; 12] = [1, 2, 4, 8, 16, 32, 64, 128, 3, 5, 17, 100];
/// Free sizes to draw from.
const FREE: [u32; 13] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 3, 7, 33, 200];
/// Immediates of `tensor_scalar`, memsets and accumulators.
const IMMEDIATES: [f32; 12] = [
    1.0, -1.0, 0.5, 2.0, 0.0, -0.0, 3.0, -2.5, 0.1, 1.0e-3, 7.75, 65504.0,
];
/// Largest magnitude the generator lets ordinary values reach (so that most programs compute
/// finite numbers; the reference handles infinities and NaNs regardless).
const LIMIT: f64 = 1.0e12;
/// Largest index reached in an input along either axis.
const MAX_EXTENT: i64 = 512;
/// PSUM tiles per stage (PSUM has 8 banks).
const MAX_PSUM: usize = 6;

/// An input under construction: its dtype, value style and the extents loads need.
struct InputDraft {
    dt: Dt,
    style: Style,
    rows: i64,
    cols: i64,
}

/// A stage under construction.
struct StageDraft {
    loops: Vec<Loop>,
    steps: Vec<Step>,
    /// A bound on each step's ordinary magnitudes.
    mags: Vec<f64>,
}

impl StageDraft {
    /// PSUM tiles the stage declares so far.
    fn psum_tiles(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.tile.mem == Mem::Psum)
            .count()
    }

    /// Steps matching `keep`.
    fn find(&self, keep: impl Fn(&Tile) -> bool) -> Vec<usize> {
        (0..self.steps.len())
            .filter(|&i| keep(&self.steps[i].tile))
            .collect()
    }

    /// Steps matching `keep` whose whole tile is written (no mask cut it).
    fn find_full(&self, keep: impl Fn(&Tile) -> bool) -> Vec<usize> {
        self.find(keep)
            .into_iter()
            .filter(|&i| self.full(i))
            .collect()
    }

    /// Whether step `i` writes its whole tile.
    fn full(&self, i: usize) -> bool {
        let t = self.steps[i].tile;
        self.steps[i].written() == [t.p, t.f]
    }

    /// The box of step `i`'s written elements.
    fn written(&self, i: usize) -> [u32; 2] {
        self.steps[i].written()
    }
}

/// The intersection of two boxes.
fn meet(a: [u32; 2], b: [u32; 2]) -> [u32; 2] {
    [a[0].min(b[0]), a[1].min(b[1])]
}

/// The generator's state across stages.
struct Gen<'c, 'a> {
    c: &'c mut Choices<'a>,
    inputs: Vec<InputDraft>,
    max_inputs: usize,
}

/// A random valid case from `data`.
pub fn case(data: &[u8]) -> Case {
    let mut c = Choices::new(data);
    let stages = 1 + c.below(3);
    let mut g = Gen {
        c: &mut c,
        inputs: Vec::new(),
        max_inputs: 8,
    };
    let mut program = Program {
        inputs: Vec::new(),
        outputs: Vec::new(),
        stages: Vec::new(),
    };
    for s in 0..stages {
        let (stage, output) = g.stage(s);
        program.stages.push(stage);
        program.outputs.push(output);
    }
    let seed = g.c.u64();
    let mut inputs = Vec::new();
    for (i, d) in g.inputs.iter().enumerate() {
        let t = Tensor {
            dt: d.dt,
            rows: (d.rows + g.c.below(3) as i64) as u32,
            cols: (d.cols + g.c.below(3) as i64) as u32,
        };
        let mut rng = Rng(seed ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
        inputs.push(
            (0..t.len())
                .map(|_| d.style.value(d.dt, &mut rng))
                .collect(),
        );
        program.inputs.push(t);
    }
    Case { program, inputs }
}

impl Gen<'_, '_> {
    /// A dtype (f32 once the bytes run out).
    fn dt(&mut self) -> Dt {
        if self.c.chance(40) { Dt::Bf16 } else { Dt::F32 }
    }

    /// A mask for an instruction over a `shape` grid whose operands are written only in the
    /// box `avail`: one (inside `avail`) when `avail` is not the whole grid, otherwise one
    /// cutting a ragged partition and/or free range with probability `percent`%.
    fn mask_for(&mut self, avail: [u32; 2], shape: [u32; 2], percent: usize) -> Option<[u32; 2]> {
        let avail = meet(avail, shape);
        let mut m = avail;
        if avail == shape {
            if !self.c.chance(percent) {
                return None;
            }
            match self.c.below(3) {
                0 => m[0] = self.cut(shape[0]),
                1 => m[1] = self.cut(shape[1]),
                _ => m = [self.cut(shape[0]), self.cut(shape[1])],
            }
        } else if self.c.chance(20) {
            m = [
                self.cut(avail[0] + 1).min(avail[0]),
                self.cut(avail[1] + 1).min(avail[1]),
            ];
        }
        (m != shape).then_some(m)
    }

    /// A ragged count in `1..n` (`n` itself when `n ≤ 1`).
    fn cut(&mut self, n: u32) -> u32 {
        if n <= 1 {
            return n;
        }
        1 + self.c.below(n as usize - 1) as u32
    }

    /// One of the binary operations.
    fn bin(&mut self) -> Bin {
        self.c
            .pick(&[Bin::Add, Bin::Subtract, Bin::Multiply, Bin::Max, Bin::Min])
    }

    /// An immediate: one of [`IMMEDIATES`], or a multiple of 2⁻¹² in `[−8, 8)`.
    fn imm(&mut self) -> f32 {
        if self.c.chance(30) {
            (self.c.below(1 << 16) as f32 / 4096.0) - 8.0
        } else {
            self.c.pick(&IMMEDIATES)
        }
    }

    /// An engine for a Vector-engine operation: GpSimd only without PSUM operands, Scalar
    /// only where `scalar` allows it.
    fn engine(&mut self, psum: bool, scalar: bool) -> Eng {
        match self
            .c
            .weighted(&[4, 1, usize::from(!psum), usize::from(scalar)])
        {
            1 => Eng::Vector,
            2 => Eng::GpSimd,
            3 => Eng::Scalar,
            _ => Eng::Default,
        }
    }

    /// Stage `s` and the output it writes.
    fn stage(&mut self, s: usize) -> (Stage, Tensor) {
        let depth = self.c.below(3);
        let loops: Vec<Loop> = (0..depth)
            .map(|_| Loop {
                kind: if self.c.chance(50) {
                    Kind::Sequential
                } else {
                    Kind::Affine
                },
                trip: 1 + self.c.below(4) as u32,
            })
            .collect();
        let mut sd = StageDraft {
            loops,
            steps: Vec::new(),
            mags: Vec::new(),
        };
        let (p, f) = (self.c.pick(&PARTITIONS), self.c.pick(&FREE));
        let target = 1 + self.c.below(10);
        while sd.steps.len() < target {
            self.op(&mut sd, p, f);
        }
        // Now and then, a matmul accumulated over the whole loop nest as the result.
        let before = sd.steps.len();
        let group = !sd.loops.is_empty() && self.c.chance(20) && {
            self.matmul(&mut sd, p, f);
            sd.steps.len() > before && matches!(sd.steps[sd.steps.len() - 1].op, Op::Matmul { .. })
        };
        let mut result = sd.steps.len() - 1;
        if !group && sd.steps[result].tile.mem == Mem::Psum {
            let t = sd.steps[result].tile;
            let engine = self.engine(true, true);
            let dt = self.dt();
            let mag = sd.mags[result];
            let mask = self.mask_for(sd.written(result), [t.p, t.f], 0);
            result = push_masked(
                &mut sd,
                Op::Copy { a: result, engine },
                Tile {
                    dt,
                    mem: Mem::Sbuf,
                    ..t
                },
                mag,
                mask,
            );
        }
        let sequential =
            !sd.loops.is_empty() && sd.loops.iter().all(|l| l.kind == Kind::Sequential);
        let carry = if group {
            Some(Carry::Group { dt: self.dt() })
        } else if !sd.loops.is_empty() && sd.full(result) && self.c.chance(15) {
            let op = self.c.pick(&[Bin::Add, Bin::Max, Bin::Min]);
            let n = f64::from(sd.loops.iter().map(|l| l.trip).product::<u32>());
            let op = if op == Bin::Add && sd.mags[result] * n > LIMIT {
                Bin::Max
            } else {
                op
            };
            Some(Carry::Accumulate {
                dt: if op == Bin::Add { Dt::F32 } else { self.dt() },
                init: self.c.pick(&IMMEDIATES[..7]),
                op,
            })
        } else if sequential && sd.full(result) && self.c.chance(30) {
            let op = self.bin();
            Some(Carry::Tile {
                dt: self.dt(),
                init: self.c.pick(&IMMEDIATES[..7]),
                op: if op == Bin::Multiply && sd.mags[result] > 4.0 {
                    Bin::Add
                } else {
                    op
                },
            })
        } else {
            None
        };
        let layout = self.c.pick(&[
            Layout::RowBlocks,
            Layout::ColBlocks,
            Layout::RowInterleave,
            Layout::ColInterleave,
            Layout::Transposed,
        ]);
        let n = if carry.is_some() {
            1
        } else {
            sd.loops.iter().map(|l| l.trip).product()
        };
        let layout = if carry.is_some() {
            Layout::RowBlocks
        } else {
            layout
        };
        let stored = sd.written(result);
        let [rows, cols] = layout.shape(n, stored[0], stored[1]);
        let ragged =
            if layout == Layout::RowBlocks && carry.is_none() && n >= 2 && self.c.chance(30) {
                self.cut(stored[0])
            } else {
                0
            };
        let ragged = if ragged == stored[0] { 0 } else { ragged };
        let rows = rows - ragged;
        let output = Tensor {
            dt: self.dt(),
            rows,
            cols,
        };
        let stage = Stage {
            loops: sd.loops,
            steps: sd.steps,
            result,
            output: s,
            layout,
            carry,
            stored,
            ragged,
        };
        (stage, output)
    }

    /// Appends one operation (and the loads it needs).
    fn op(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        match self.c.weighted(&[3, 1, 4, 3, 2, 2, 1, 2, 2, 1, 1]) {
            0 => {
                let dt = self.dt();
                let (p, f) = self.shape_near(p, f);
                self.load(sd, dt, p, f, true);
            }
            1 => self.memset(sd, p, f),
            2 => self.tensor_tensor(sd, p, f),
            3 => self.tensor_scalar(sd, p, f),
            4 => {
                let a = self.any(sd, p, f);
                let t = sd.steps[a].tile;
                let engine = self.engine(t.mem == Mem::Psum, true);
                let dt = self.dt();
                let mag = sd.mags[a] * 1.01;
                let mask = self.mask_for(sd.written(a), [t.p, t.f], 15);
                push_masked(
                    sd,
                    Op::Copy { a, engine },
                    Tile {
                        dt,
                        mem: Mem::Sbuf,
                        ..t
                    },
                    mag,
                    mask,
                );
            }
            5 => self.reduce(sd, p, f),
            6 => self.transpose(sd, p),
            8 => self.activation(sd, p, f),
            9 => self.iota(sd, p, f),
            10 => self.affine_select(sd, p, f),
            _ => self.matmul(sd, p, f),
        }
    }

    /// The stage's main shape, or now and then another one.
    fn shape_near(&mut self, p: u32, f: u32) -> (u32, u32) {
        if self.c.chance(20) {
            (self.c.pick(&PARTITIONS), self.c.pick(&FREE))
        } else {
            (p, f)
        }
    }

    /// Some existing step (or a new load when there is none).
    fn any(&mut self, sd: &mut StageDraft, p: u32, f: u32) -> usize {
        if sd.steps.is_empty() || self.c.chance(15) {
            let dt = self.dt();
            self.load(sd, dt, p, f, true)
        } else {
            self.c.below(sd.steps.len())
        }
    }

    /// One of `candidates`, or a new `[p, f]` load of `dt` when there is none (or by chance),
    /// masked only if `maskable`.
    fn one_of(
        &mut self,
        sd: &mut StageDraft,
        candidates: &[usize],
        (dt, p, f): (Dt, u32, u32),
        maskable: bool,
    ) -> usize {
        if candidates.is_empty() || self.c.chance(25) {
            self.load(sd, dt, p, f, maskable)
        } else {
            self.c.pick(candidates)
        }
    }

    /// A load of a new `[p, f]` tile of `dt` from some input; if `maskable`, sometimes
    /// masked to a ragged box (its access then only has to fit the kept elements: positive
    /// steps may run past the input's end).
    fn load(&mut self, sd: &mut StageDraft, dt: Dt, p: u32, f: u32, maskable: bool) -> usize {
        let input = if self.inputs.is_empty()
            || (self.inputs.len() < self.max_inputs && self.c.chance(50))
        {
            let style = self.c.pick(&[
                Style::Unit,
                Style::SmallInts,
                Style::WideExponents,
                Style::BfTies,
                Style::Specials,
            ]);
            let dt = self.dt();
            self.inputs.push(InputDraft {
                dt,
                style,
                rows: 1,
                cols: 1,
            });
            self.inputs.len() - 1
        } else {
            self.c.below(self.inputs.len())
        };
        let transposed = self.c.chance(15);
        let rs = self.c.pick(&[1i64, 1, 1, 2, 3, -1]);
        let cs = self.c.pick(&[1i64, 1, 1, 2, -1, 0]);
        // Tile dimensions along the tensor's rows and columns.
        let (nr, nc) = if transposed { (f, p) } else { (p, f) };
        let mask = if maskable {
            self.mask_for([p, f], [p, f], 20)
        } else {
            None
        };
        let [kp, kf] = mask.unwrap_or([p, f]);
        let (kr, kc) = if transposed { (kf, kp) } else { (kp, kf) };
        let (row, row_max) = self.index(&sd.loops, (nr, kr), rs);
        let (col, col_max) = self.index(&sd.loops, (nc, kc), cs);
        let grid = if transposed {
            [[0, rs], [cs, 0]]
        } else {
            [[rs, 0], [0, cs]]
        };
        let d = &mut self.inputs[input];
        d.rows = d.rows.max(row_max + 1);
        d.cols = d.cols.max(col_max + 1);
        let split = if mask.is_some() {
            Split::Whole
        } else if f >= 2 && self.c.chance(20) {
            Split::Cols(1 + self.c.below(f as usize - 1) as u32)
        } else if p >= 2 && self.c.chance(15) {
            Split::Rows(1 + self.c.below(p as usize - 1) as u32)
        } else {
            Split::Whole
        };
        let mag = self.inputs[input].style.magnitude();
        let window = Window { row, col, grid };
        push_masked(
            sd,
            Op::Load {
                input,
                window,
                split,
            },
            Tile {
                dt,
                mem: Mem::Sbuf,
                p,
                f,
            },
            mag,
            mask,
        )
    }

    /// A start index for `n` elements `step` apart along one tensor axis, and the largest
    /// index the access reaches over every iteration for its first `kept` elements (a mask
    /// keeps those).
    fn index(&mut self, loops: &[Loop], (n, kept): (u32, u32), step: i64) -> (Index, i64) {
        let span = (i64::from(n) - 1) * step.abs();
        let kept_span = (i64::from(kept) - 1) * step.abs();
        let base = if step < 0 { span } else { 0 };
        let constant = base + self.c.below(4) as i64;
        let block = (i64::from(n) * step.abs()).max(1);
        let mut coefs: Vec<i64> = loops
            .iter()
            .map(|_| {
                let small = 1 + self.c.below(3) as i64;
                self.c.pick(&[0, block, small])
            })
            .collect();
        let reach = |coefs: &[i64]| {
            constant
                + coefs
                    .iter()
                    .zip(loops)
                    .map(|(c, l)| c * (i64::from(l.trip) - 1))
                    .sum::<i64>()
                + if step > 0 { kept_span } else { 0 }
        };
        if reach(&coefs) >= MAX_EXTENT {
            coefs.iter_mut().for_each(|c| *c = 0);
        }
        let max = reach(&coefs);
        (Index { constant, coefs }, max)
    }

    /// Appends a `memset` (SBUF, or PSUM f32).
    fn memset(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        let (p, f) = self.shape_near(p, f);
        let f = if self.c.chance(20) { 1 } else { f };
        let value = if self.c.chance(5) {
            self.c.pick(&[f32::INFINITY, f32::NEG_INFINITY, f32::MAX])
        } else {
            self.imm()
        };
        let psum = sd.psum_tiles() < MAX_PSUM && self.c.chance(15);
        let dt = if psum { Dt::F32 } else { self.dt() };
        let engine = self.c.pick(&[Eng::Default, Eng::Vector, Eng::GpSimd]);
        let engine = if psum && engine == Eng::GpSimd {
            Eng::Vector
        } else {
            engine
        };
        let mem = if psum { Mem::Psum } else { Mem::Sbuf };
        let mask = self.mask_for([p, f], [p, f], 15);
        push_masked(
            sd,
            Op::Memset { value, engine },
            Tile { dt, mem, p, f },
            f64::from(value.abs()).min(LIMIT),
            mask,
        );
    }

    /// Appends a `tensor_tensor` of two steps of one shape, not both in PSUM.
    fn tensor_tensor(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        let a = self.any(sd, p, f);
        let ta = sd.steps[a].tile;
        let candidates =
            sd.find(|t| t.p == ta.p && t.f == ta.f && !(t.mem == Mem::Psum && ta.mem == Mem::Psum));
        let dt = self.dt();
        let b = self.one_of(sd, &candidates, (dt, ta.p, ta.f), true);
        let (ma, mb) = (sd.mags[a], sd.mags[b]);
        let mut op = self.bin();
        let mut mag = grow(op, ma, mb);
        if mag > LIMIT {
            op = Bin::Max;
            mag = ma.max(mb);
        }
        let dt = self.dt();
        let psum_dst = dt == Dt::F32 && sd.psum_tiles() < MAX_PSUM && self.c.chance(10);
        let psum = psum_dst || ta.mem == Mem::Psum || sd.steps[b].tile.mem == Mem::Psum;
        let engine = self.engine(psum, false);
        let mem = if psum_dst { Mem::Psum } else { Mem::Sbuf };
        let avail = meet(sd.written(a), sd.written(b));
        let mask = self.mask_for(avail, [ta.p, ta.f], 15);
        push_masked(
            sd,
            Op::TensorTensor { a, b, op, engine },
            Tile { dt, mem, ..ta },
            mag,
            mask,
        );
    }

    /// Appends a `tensor_scalar` with one or two operations (immediates or `[P, 1]` columns).
    fn tensor_scalar(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        let a = self.any(sd, p, f);
        let ta = sd.steps[a].tile;
        let mut psum = ta.mem == Mem::Psum;
        let mut mag = sd.mags[a];
        let operation = |g: &mut Self, sd: &StageDraft, mag: &mut f64, psum: &mut bool| {
            let columns = sd.find(|t| t.p == ta.p && t.f == 1);
            let (operand, m) = if !columns.is_empty() && g.c.chance(30) {
                let col = g.c.pick(&columns);
                *psum |= sd.steps[col].tile.mem == Mem::Psum;
                (Scalar::Column(col), sd.mags[col])
            } else {
                let x = g.imm();
                (Scalar::Imm(x), f64::from(x.abs()))
            };
            let mut op = g.bin();
            if grow(op, *mag, m) > LIMIT {
                op = Bin::Min;
            }
            *mag = grow(op, *mag, m);
            (op, operand)
        };
        let first = operation(self, sd, &mut mag, &mut psum);
        let second = if self.c.chance(50) {
            Some(operation(self, sd, &mut mag, &mut psum))
        } else {
            None
        };
        let engine = self.engine(psum, false);
        let dt = self.dt();
        let mut avail = sd.written(a);
        for (_, s) in std::iter::once(first).chain(second) {
            if let Scalar::Column(c) = s {
                avail[0] = avail[0].min(sd.written(c)[0]);
            }
        }
        let mask = self.mask_for(avail, [ta.p, ta.f], 15);
        push_masked(
            sd,
            Op::TensorScalar {
                a,
                first,
                second,
                engine,
            },
            Tile {
                dt,
                mem: Mem::Sbuf,
                ..ta
            },
            mag,
            mask,
        );
    }

    /// Appends an `activation` with an immediate or column scale and bias, from SBUF or PSUM
    /// into SBUF; `exp` only where its argument stays small, `square` where it stays bounded.
    fn activation(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        let a = self.any(sd, p, f);
        let ta = sd.steps[a].tile;
        let mut avail = sd.written(a);
        let mut operand = |g: &mut Self, sd: &StageDraft, one: f32| {
            // A scale column must be f32; a bias column f32, f16 or bf16.
            let columns = sd.find(|t| {
                t.p == ta.p && t.f == 1 && t.mem == Mem::Sbuf && (one == 0.0 || t.dt == Dt::F32)
            });
            let chance = if one == 0.0 { 50 } else { 30 };
            if !columns.is_empty() && g.c.chance(chance) {
                let col = g.c.pick(&columns);
                avail[0] = avail[0].min(sd.written(col)[0]);
                (Scalar::Column(col), sd.mags[col])
            } else if g.c.chance(40) {
                (Scalar::Imm(one), f64::from(one.abs()))
            } else {
                let x = g.imm();
                (Scalar::Imm(x), f64::from(x.abs()))
            }
        };
        let (scale, ms) = operand(self, sd, 1.0);
        let (bias, mb) = match operand(self, sd, 0.0) {
            (Scalar::Column(c), m) => (Some(c), m),
            _ => (None, 0.0),
        };
        let z = sd.mags[a] * ms + mb;
        let mut func = self.c.pick(&[
            Act::Exp,
            Act::Tanh,
            Act::Identity,
            Act::Relu,
            Act::Abs,
            Act::Square,
            Act::Sigmoid,
            Act::Silu,
            Act::Softplus,
        ]);
        if func == Act::Exp && z > 60.0 || func == Act::Square && z * z > LIMIT {
            func = Act::Tanh;
        }
        let mag = match func {
            Act::Exp => z.exp(),
            Act::Tanh | Act::Sigmoid => 1.0,
            Act::Softplus => z + 1.0,
            Act::Silu => z,
            Act::Square => z * z,
            Act::Identity | Act::Relu | Act::Abs => z,
        };
        if mag > LIMIT {
            return;
        }
        let dt = self.dt();
        let mask = self.mask_for(avail, [ta.p, ta.f], 15);
        push_masked(
            sd,
            Op::Activation {
                a,
                func,
                scale,
                bias,
            },
            Tile {
                dt,
                mem: Mem::Sbuf,
                ..ta
            },
            mag,
            mask,
        );
    }

    /// An expression of the grid and the loops with small coefficients (values stay below
    /// 2¹² in magnitude).
    fn expr(&mut self, loops: &[Loop]) -> Expr {
        let constant = self.c.below(301) as i64 - 150;
        let coefs = loops.iter().map(|_| self.c.below(4) as i64 - 1).collect();
        let grid = [
            self.c.pick(&[1, 0, -1, 2, -3]),
            self.c.pick(&[1, -1, 0, 2, 3, -2]),
        ];
        Expr {
            start: Index { constant, coefs },
            grid,
        }
    }

    /// Appends an `iota` into SBUF.
    fn iota(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        let (p, f) = self.shape_near(p, f);
        let expr = self.expr(&sd.loops);
        let dt = self.dt();
        let mask = self.mask_for([p, f], [p, f], 15);
        push_masked(
            sd,
            Op::Iota { expr },
            Tile {
                dt,
                mem: Mem::Sbuf,
                p,
                f,
            },
            2048.0,
            mask,
        );
    }

    /// Appends an `affine_select` of an SBUF step (a triangle, a band edge, a diagonal).
    fn affine_select(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        let candidates = sd.find(|t| t.mem == Mem::Sbuf);
        let dt = self.dt();
        let a = self.one_of(sd, &candidates, (dt, p, f), true);
        let ta = sd.steps[a].tile;
        let mut expr = self.expr(&sd.loops);
        // Mostly a triangle through the tile (`k + i_p − i_f cmp 0`).
        if self.c.chance(60) {
            expr.grid = [1, -1];
            expr.start.constant = self.c.below(9) as i64 - 4;
        }
        let cmp = self
            .c
            .pick(&[Cmp::Ge, Cmp::Lt, Cmp::Gt, Cmp::Le, Cmp::Eq, Cmp::Ne]);
        let on_false = if self.c.chance(30) {
            self.c.pick(&[f32::NEG_INFINITY, -1.0e30, f32::INFINITY])
        } else {
            self.imm()
        };
        let dt = self.dt();
        let mag = sd.mags[a].max(f64::from(on_false.abs()).min(LIMIT));
        let mask = self.mask_for(sd.written(a), [ta.p, ta.f], 15);
        push_masked(
            sd,
            Op::AffineSelect {
                a,
                expr,
                cmp,
                on_false,
            },
            Tile {
                dt,
                mem: Mem::Sbuf,
                ..ta
            },
            mag,
            mask,
        );
    }

    /// Appends a `tensor_reduce` along the free axis.
    fn reduce(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        let a = self.any(sd, p, f);
        let ta = sd.steps[a].tile;
        let mut op = self.c.pick(&[Red::Max, Red::Add]);
        let mut mag = sd.mags[a];
        if op == Red::Add {
            if mag * f64::from(ta.f) > LIMIT {
                op = Red::Max;
            } else {
                mag *= f64::from(ta.f);
            }
        }
        let negate = self.c.chance(30);
        let dt = self.dt();
        let mask = self.mask_for(sd.written(a), [ta.p, ta.f], 15);
        push_masked(
            sd,
            Op::Reduce { a, op, negate },
            Tile {
                dt,
                mem: Mem::Sbuf,
                p: ta.p,
                f: 1,
            },
            mag,
            mask,
        );
    }

    /// Appends an `nc_transpose` of an SBUF step with at most 128 free elements (if PSUM has
    /// room).
    fn transpose(&mut self, sd: &mut StageDraft, p: u32) {
        if sd.psum_tiles() >= MAX_PSUM {
            return;
        }
        let candidates = sd.find(|t| t.mem == Mem::Sbuf && t.f <= 128);
        let dt = self.dt();
        let f = self.c.pick(&FREE[..8]);
        let a = self.one_of(sd, &candidates, (dt, p, f), true);
        let ta = sd.steps[a].tile;
        let mag = sd.mags[a];
        // The mask is on the destination's grid `[f, p]`: inside the source's written box,
        // transposed (an undefined element fed to TensorE is an error in strict mode).
        let [wp, wf] = sd.written(a);
        let mask = self.mask_for([wf, wp], [ta.f, ta.p], 15);
        push_masked(
            sd,
            Op::Transpose { a },
            Tile {
                dt: Dt::F32,
                mem: Mem::Psum,
                p: ta.f,
                f: ta.p,
            },
            mag,
            mask,
        );
    }

    /// Appends an `nc_matmul` of SBUF steps of one dtype and contraction size (if PSUM has room
    /// and the magnitudes stay bounded; its operand loads are appended either way).
    fn matmul(&mut self, sd: &mut StageDraft, p: u32, f: u32) {
        if sd.psum_tiles() >= MAX_PSUM {
            return;
        }
        let dt = if self.c.chance(15) { Dt::F32 } else { Dt::Bf16 };
        let stationary = sd.find_full(|t| t.mem == Mem::Sbuf && t.dt == dt && t.f <= 128);
        let m = self.c.pick(&FREE[..8]);
        let s = self.one_of(sd, &stationary, (dt, p, m), false);
        let ts = sd.steps[s].tile;
        let moving = sd.find_full(|t| t.mem == Mem::Sbuf && t.dt == dt && t.p == ts.p);
        let mv = self.one_of(sd, &moving, (dt, ts.p, f), false);
        let tm = sd.steps[mv].tile;
        let mag = f64::from(ts.p) * sd.mags[s] * sd.mags[mv];
        if mag > LIMIT {
            return;
        }
        push(
            sd,
            Op::Matmul {
                stationary: s,
                moving: mv,
            },
            Tile {
                dt: Dt::F32,
                mem: Mem::Psum,
                p: ts.f,
                f: tm.f,
            },
            mag,
        );
    }
}

/// A bound on `|a op b|` from bounds on `|a|` and `|b|`.
fn grow(op: Bin, a: f64, b: f64) -> f64 {
    match op {
        Bin::Add | Bin::Subtract => a + b,
        Bin::Multiply => a * b,
        Bin::Max | Bin::Min => a.max(b),
    }
}

/// Appends a step; returns its index.
fn push(sd: &mut StageDraft, op: Op, tile: Tile, mag: f64) -> usize {
    push_masked(sd, op, tile, mag, None)
}

/// Appends a step under `mask`; returns its index.
fn push_masked(sd: &mut StageDraft, op: Op, tile: Tile, mag: f64, mask: Option<[u32; 2]>) -> usize {
    sd.steps.push(Step { op, tile, mask });
    sd.mags.push(mag);
    sd.steps.len() - 1
}
