//! Conformance table: one row per opcode of the op table, and per ALU operation, activation
//! function and dtype, in the style of CubeCL's runtime tests. Each row is a small program
//! (built with `nki_lang::builder`) with its inputs and an independent plain-f64 / `ndarray`
//! expectation. Every row runs on the reference interpreter (`nki_runtime::reference_launch`,
//! the element-by-element definition of `exec/reference.rs`) and on every host code path
//! (`Isa`) × host threads (1, 2) × plain / strict; every run's outputs must equal the reference
//! interpreter's bit for bit, and the outputs must agree with the expectation: exactly where the
//! expected value is exact in the output dtype, rounded to f32 for correctly rounded
//! operations, within a tolerance for approximations ([`Check`]).
//!
//! [`every_opcode_alu_act_and_dtype_has_a_row`] fails when an [`Opcode`], [`Alu`], [`ActFn`] or
//! [`DType`] has no row.

use half::{bf16, f16};
use ndarray::{Array2, Axis, Zip};
use nki_lang::builder::{Grid, Operand, ProgramBuilder, TensorId, TileId};
use nki_lang::{
    AccOut, AccessId, ActFn, Affine, Alu, AxisIndex, Cmp, CompiledProgram, DType, Dim, Dst, Engine,
    Extent, HbmAccess, IndirectMode, Instr, InstrData, LoopKind, MAX_TENSOR_RANK, MAX_TILE_RANK,
    Mask, MaskTerm, Memory, Opcode, Pred, RegId, RegSrc, Scalar, Src, Target, TileShape, TileView,
    ViewId, Write,
};
use nki_runtime::{
    Bool, F4E2M1Fn, F4E2M1FnX4, F8E4M3, F8E4M3Fn, F8E4M3FnX4, F8E5M2, F8E5M2X4, F8E8M0Fnu, HbmIn,
    HbmOut, Isa, Kernel, NeuronCore, Tf32,
};

// ---- Rows ----

/// What a row exercises.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Covers {
    Op(Opcode),
    Alu(Alu),
    Act(ActFn),
    Dt(DType),
}

/// How a row's outputs are compared with its expectation.
#[derive(Copy, Clone, Debug)]
enum Check {
    /// Every expected value is exact in the output dtype, and the output equals it.
    Exact,
    /// f32 outputs of correctly rounded operations: the output is the expected value rounded
    /// to f32 (`as f32`).
    Rounded,
    /// Approximations: the output is within `tol · |want| + 1e-7` of the expected value (equal
    /// where that is not finite).
    Within(f64),
    /// Corner cases without an independent expectation (flushed subnormals): only that every
    /// run gives the reference interpreter's bits.
    Runs,
}

/// One conformance case: a program, its inputs, its outputs' dtypes and shapes, and the
/// expected output values.
struct Row {
    name: String,
    covers: Vec<Covers>,
    program: CompiledProgram,
    inputs: Vec<(DType, Array2<f64>)>,
    outputs: Vec<(DType, [usize; 2])>,
    want: Vec<Array2<f64>>,
    check: Check,
    /// Whether strict cores refuse the program (a destination that partly overlaps a source:
    /// the hardware's result depends on its pipeline); plain cores still run it.
    strict_refuses: bool,
    /// The generation the program is built for and run on (Trn1 unless an opcode needs a
    /// later one).
    target: Target,
}

impl Row {
    /// The row, refused by strict cores: a destination partly overlaps a source.
    fn refused_strictly(mut self) -> Row {
        self.strict_refuses = true;
        self
    }
}

/// A row: the program is `body` run on a [`Kb`] with the inputs and outputs declared; the
/// expectation `want` is computed from the input values.
fn row(
    name: impl Into<String>,
    covers: &[Covers],
    inputs: Vec<(DType, Array2<f64>)>,
    outputs: &[(DType, [usize; 2])],
    body: impl FnOnce(&mut Kb),
    want: impl FnOnce(&[Array2<f64>]) -> Vec<Array2<f64>>,
    check: Check,
) -> Row {
    row_on(
        Target::Trn1,
        name,
        covers,
        inputs,
        outputs,
        body,
        want,
        check,
    )
}

/// A row built for and run on `target`'s cores ([`row`]).
#[allow(clippy::too_many_arguments)]
fn row_on(
    target: Target,
    name: impl Into<String>,
    covers: &[Covers],
    inputs: Vec<(DType, Array2<f64>)>,
    outputs: &[(DType, [usize; 2])],
    body: impl FnOnce(&mut Kb),
    want: impl FnOnce(&[Array2<f64>]) -> Vec<Array2<f64>>,
    check: Check,
) -> Row {
    let name = name.into();
    let shapes: Vec<(DType, [usize; 2])> = inputs.iter().map(|(d, a)| (*d, dims(a))).collect();
    let mut kb = Kb::new(&name, &shapes, outputs, target);
    body(&mut kb);
    let program =
        kb.b.finish()
            .unwrap_or_else(|e| panic!("row `{name}`: program rejected: {e:?}"));
    let values: Vec<Array2<f64>> = inputs.iter().map(|(_, a)| a.clone()).collect();
    let want = want(&values);
    assert_eq!(want.len(), outputs.len(), "row `{name}`");
    Row {
        name,
        covers: covers.to_vec(),
        program,
        inputs,
        outputs: outputs.to_vec(),
        want,
        check,
        strict_refuses: false,
        target,
    }
}

fn dims(a: &Array2<f64>) -> [usize; 2] {
    [a.nrows(), a.ncols()]
}

/// A program under construction: the row's inputs and outputs declared, tiles by shape.
struct Kb {
    b: ProgramBuilder,
    inputs: Vec<(TensorId, DType, [usize; 2])>,
    outputs: Vec<TensorId>,
    shapes: Vec<TileShape>,
}

fn fixed(d: [usize; 2]) -> Vec<Dim> {
    d.iter().map(|&n| Dim::Fixed(n as u64)).collect()
}

impl Kb {
    fn new(
        name: &str,
        inputs: &[(DType, [usize; 2])],
        outputs: &[(DType, [usize; 2])],
        target: Target,
    ) -> Kb {
        let mut b = ProgramBuilder::new(name, target);
        let inputs = inputs
            .iter()
            .enumerate()
            .map(|(i, &(d, s))| (b.input(&format!("x{i}"), d, &fixed(s)).unwrap(), d, s))
            .collect();
        let outputs = outputs
            .iter()
            .enumerate()
            .map(|(i, &(d, s))| b.output(&format!("out{i}"), d, &fixed(s)).unwrap())
            .collect();
        Kb {
            b,
            inputs,
            outputs,
            shapes: Vec::new(),
        }
    }

    fn tile(&mut self, memory: Memory, dtype: DType, dims: &[u32]) -> TileId {
        let n = self.shapes.len();
        let t = self.b.tile(&format!("t{n}"), memory, dtype, dims).unwrap();
        assert_eq!(t.index() as usize, n);
        self.shapes.push(TileShape::new(dims).unwrap());
        t
    }

    fn sbuf(&mut self, dtype: DType, dims: &[u32]) -> TileId {
        self.tile(Memory::Sbuf, dtype, dims)
    }

    /// An SBUF tile of input `i`'s dtype and shape, loaded with the whole input.
    fn load(&mut self, i: usize) -> TileId {
        let (x, d, s) = self.inputs[i];
        let t = self.sbuf(d, &[s[0] as u32, s[1] as u32]);
        self.b.load(t, Grid::origin(x)).unwrap();
        t
    }

    /// Stores the whole tile `t` into output `o`.
    fn store(&mut self, o: usize, t: TileId) {
        self.b.store(Grid::origin(self.outputs[o]), t).unwrap();
    }

    /// The whole of tile `t`.
    fn v(&mut self, t: TileId) -> ViewId {
        let shape = self.shapes[t.index() as usize];
        self.b.view(TileView::whole(t.index(), &shape)).unwrap()
    }

    /// A view of tile `t` with the given shape and free strides.
    fn view(&mut self, t: TileId, dims: &[u32], strides: &[i64]) -> ViewId {
        let mut v = TileView::whole(t.index(), &TileShape::new(dims).unwrap());
        v.strides = [0; MAX_TILE_RANK - 1];
        v.strides[..strides.len()].copy_from_slice(strides);
        self.b.view(v).unwrap()
    }

    /// A `[P, 1]` tile read along every free element.
    fn col(&mut self, t: TileId) -> Src {
        self.b.src(Operand::Column(t)).unwrap()
    }

    /// An access of `tensor` with the grid `shape`, tensor axis `k` at `Σ grid[k][j] · t_j`.
    fn access(
        &mut self,
        tensor: TensorId,
        shape: &[u32],
        grid: [[i64; MAX_TILE_RANK]; 2],
    ) -> AccessId {
        let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
        axes[0].grid = grid[0];
        axes[1].grid = grid[1];
        self.b
            .access(HbmAccess {
                tensor: tensor.index(),
                reshape: None,
                rank: 2,
                shape: TileShape::new(shape).unwrap(),
                axes,
            })
            .unwrap()
    }

    fn push(&mut self, opcode: Opcode, engine: Option<Engine>, data: InstrData) {
        let mut i = Instr::new(opcode, data);
        i.engine = engine.unwrap_or(i.engine);
        self.b.push(i).unwrap();
    }

    /// An ALU-format instruction `dst = (src0 op0 src1) op1 src2`.
    #[allow(clippy::too_many_arguments)]
    fn alu(
        &mut self,
        opcode: Opcode,
        engine: Option<Engine>,
        dst: Dst,
        src: [Src; 3],
        op: [Alu; 2],
        rev: u8,
        acc: Option<AccOut>,
    ) {
        let data = InstrData::Alu {
            dst,
            src,
            op,
            rev,
            acc,
        };
        self.push(opcode, engine, data);
    }

    /// A one-source instruction (`Unary` format).
    fn unary(&mut self, opcode: Opcode, engine: Option<Engine>, dst: Dst, src: ViewId) {
        self.push(opcode, engine, InstrData::Unary { dst, src });
    }

    fn dst(&mut self, t: TileId) -> Dst {
        Dst::overwrite(self.v(t))
    }
}

// ---- Values: independent encodings and decodings of every dtype ----

/// The value of an IEEE-style binary float of `e` exponent and `m` mantissa bits (the fp8
/// formats: bias `2^(e−1) − 1`, infinities and NaNs at the largest exponent).
fn minifloat(bits: u32, e: u32, m: u32) -> f64 {
    let sign = if bits >> (e + m) & 1 == 1 { -1.0 } else { 1.0 };
    let exp = (bits >> m) & ((1 << e) - 1);
    let man = f64::from(bits & ((1 << m) - 1));
    let bias = (1 << (e - 1)) - 1;
    let scale = |k: i32| 2f64.powi(k);
    if exp == (1 << e) - 1 {
        return if man == 0.0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if exp == 0 {
        sign * man / scale(m as i32) * scale(1 - bias)
    } else {
        sign * (1.0 + man / scale(m as i32)) * scale(exp as i32 - bias)
    }
}

/// The value of an OCP-format element from its fields (OFP8 E4M3 "FN": bias 7, `S.1111.111`
/// the NaN; MX E2M1 in the low nibble: bias 1, no NaN; MX E8M0: `2^(bits − 127)`, `0xff` NaN).
fn ocp_value(dtype: DType, bits: u32) -> f64 {
    let b = bits & 0xff;
    match dtype {
        DType::F8E4M3Fn if b & 0x7f == 0x7f => f64::NAN,
        DType::F8E4M3Fn => {
            // No infinities: the largest exponent holds normal values (256 … 448).
            let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
            let (e, m) = ((b >> 3) & 0xf, f64::from(b & 7) / 8.0);
            sign * if e == 0 {
                m * 2f64.powi(-6)
            } else {
                (1.0 + m) * 2f64.powi(e as i32 - 7)
            }
        }
        DType::F4E2M1Fn => {
            let sign = if b & 0x8 != 0 { -1.0 } else { 1.0 };
            let (e, m) = ((b >> 1) & 3, f64::from(b & 1));
            sign * if e == 0 {
                m / 2.0
            } else {
                (1.0 + m / 2.0) * 2f64.powi(e as i32 - 1)
            }
        }
        _ if b == 0xff => f64::NAN,
        _ => 2f64.powi(b as i32 - 127),
    }
}

/// `v` rounded into an OCP format, by a nearest search over its values: ties to the even code
/// (e8m0fnu: to the larger value); e4m3fn: past 448's rounding range, ±inf and NaN → NaN;
/// e2m1fn: saturating (a NaN gives a zero, ml_dtypes' result); e8m0fnu: zero, negative values,
/// NaN and overflow → NaN, below 2^-127 → 2^-127.
fn ocp_round(dtype: DType, v: f64) -> f64 {
    let codes: Vec<u32> = match dtype {
        DType::F8E4M3Fn => (0..0x7f).collect(),
        DType::F4E2M1Fn => (0..8).collect(),
        _ => (0..0xff).collect(),
    };
    let (sign, a) = (if v.is_sign_negative() { -1.0 } else { 1.0 }, v.abs());
    match dtype {
        DType::F8E4M3Fn if !v.is_finite() => return f64::NAN,
        DType::F4E2M1Fn if v.is_nan() => return 0.0,
        DType::F8E8M0Fnu if !v.is_finite() || v <= 0.0 => return f64::NAN,
        _ => {}
    }
    // The value one step past the largest, where overflow starts (as a rounding target).
    let past = match dtype {
        DType::F8E4M3Fn => 480.0,
        DType::F4E2M1Fn => 8.0,
        _ => 2f64.powi(128),
    };
    let mut best: Option<(f64, u32)> = None;
    for (val, code) in codes
        .iter()
        .map(|&c| (ocp_value(dtype, c), c))
        .chain([(past, u32::MAX)])
    {
        let better = match best {
            None => true,
            Some((bv, bc)) => {
                let (d, db) = ((val - a).abs(), (bv - a).abs());
                let tie_wins = if dtype == DType::F8E8M0Fnu {
                    val > bv
                } else {
                    code % 2 == 0 && bc % 2 == 1
                };
                d < db || (d == db && tie_wins)
            }
        };
        if better {
            best = Some((val, code));
        }
    }
    let (val, code) = best.unwrap();
    match dtype {
        _ if code != u32::MAX => sign * val,
        DType::F4E2M1Fn => sign * 6.0,
        _ => f64::NAN,
    }
}

/// An element's value (its bits zero-extended).
fn decode(dtype: DType, bits: u32) -> f64 {
    match dtype {
        DType::F32 | DType::Tf32 => f64::from(f32::from_bits(bits)),
        DType::Bf16 => bf16::from_bits(bits as u16).to_f64(),
        DType::F16 => f16::from_bits(bits as u16).to_f64(),
        DType::F8E4M3 => minifloat(bits, 4, 3),
        DType::F8E5M2 => minifloat(bits, 5, 2),
        DType::I8 => f64::from(bits as u8 as i8),
        DType::I16 => f64::from(bits as u16 as i16),
        DType::I32 => f64::from(bits as i32),
        DType::U8 => f64::from(bits as u8),
        DType::U16 => f64::from(bits as u16),
        DType::U32 => f64::from(bits),
        DType::Bool => f64::from(u8::from(bits != 0)),
        DType::F8E4M3Fn | DType::F4E2M1Fn | DType::F8E8M0Fnu => ocp_value(dtype, bits),
        // A packed MX element is four values: rows compare its word, as an integer.
        DType::F8E5M2X4 | DType::F8E4M3FnX4 => f64::from(bits),
        DType::F4E2M1FnX4 => f64::from(bits as u16),
    }
}

/// The bits of `v` in `dtype`, if `v` is exactly a value of it (a NaN: the f32 / 16-bit
/// formats' default NaN, an 8-bit format's first NaN code).
fn encode(dtype: DType, v: f64) -> Option<u32> {
    let same = |x: f64| x == v && x.is_sign_negative() == v.is_sign_negative();
    let int = |lo: f64, hi: f64| (v.fract() == 0.0 && (lo..=hi).contains(&v)).then_some(v as i64);
    match dtype {
        DType::F32 if v.is_nan() => Some(0x7fc0_0000),
        DType::F32 => same(f64::from(v as f32)).then_some((v as f32).to_bits()),
        DType::Tf32 => encode(DType::F32, v).filter(|b| b & 0x1fff == 0),
        DType::Bf16 => {
            let x = bf16::from_f64(v);
            (same(x.to_f64()) || v.is_nan()).then_some(u32::from(x.to_bits()))
        }
        DType::F16 => {
            let x = f16::from_f64(v);
            (same(x.to_f64()) || v.is_nan()).then_some(u32::from(x.to_bits()))
        }
        DType::F8E4M3 | DType::F8E5M2 | DType::F8E4M3Fn | DType::F4E2M1Fn | DType::F8E8M0Fnu => {
            // A NaN: the first NaN code.
            (0..=255).find(|&b| same(decode(dtype, b)) || (v.is_nan() && decode(dtype, b).is_nan()))
        }
        DType::I8 => int(-128.0, 127.0).map(|i| i as u8 as u32),
        DType::I16 => int(-32768.0, 32767.0).map(|i| i as u16 as u32),
        DType::I32 => int(-2147483648.0, 2147483647.0).map(|i| i as i32 as u32),
        DType::U8 => int(0.0, 255.0).map(|i| i as u32),
        DType::U16 => int(0.0, 65535.0).map(|i| i as u32),
        DType::U32 => int(0.0, 4294967295.0).map(|i| i as u32),
        DType::Bool => int(0.0, 1.0).map(|i| i as u32),
        DType::F8E5M2X4 | DType::F8E4M3FnX4 => int(0.0, 4294967295.0).map(|i| i as u32),
        DType::F4E2M1FnX4 => int(0.0, 65535.0).map(|i| i as u32),
    }
}

/// An f32 value rounded to bf16 (`half`'s conversion from f32: round to nearest even; its
/// conversion from f64 ignores the low 32 bits when it rounds).
fn bf16_of(v: f64) -> f64 {
    bf16::from_f32(v as f32).to_f64()
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// Whether an output element (`bits` of `dtype`) agrees with the expected value.
fn agrees(check: Check, dtype: DType, bits: u32, want: f64) -> bool {
    let got = decode(dtype, bits);
    match check {
        Check::Exact => same(got, want),
        Check::Rounded => {
            assert_eq!(dtype, DType::F32, "a rounded check on an f32 output");
            same(got, f64::from(want as f32))
        }
        Check::Within(_) if !want.is_finite() => same(got, want),
        Check::Within(tol) => (got - want).abs() <= tol * want.abs() + 1e-7,
        Check::Runs => true,
    }
}

/// Host buffers of every element type.
enum Store {
    F32(Vec<f32>),
    Tf32(Vec<Tf32>),
    Bf16(Vec<bf16>),
    F16(Vec<f16>),
    F8E4M3(Vec<F8E4M3>),
    F8E5M2(Vec<F8E5M2>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    Bool(Vec<Bool>),
    F8E4M3Fn(Vec<F8E4M3Fn>),
    F4E2M1Fn(Vec<F4E2M1Fn>),
    F8E8M0Fnu(Vec<F8E8M0Fnu>),
    F8E5M2X4(Vec<F8E5M2X4>),
    F8E4M3FnX4(Vec<F8E4M3FnX4>),
    F4E2M1FnX4(Vec<F4E2M1FnX4>),
}

macro_rules! each_store {
    ($s:expr, $v:ident => $e:expr) => {
        match $s {
            Store::F32($v) => $e,
            Store::Tf32($v) => $e,
            Store::Bf16($v) => $e,
            Store::F16($v) => $e,
            Store::F8E4M3($v) => $e,
            Store::F8E5M2($v) => $e,
            Store::I8($v) => $e,
            Store::I16($v) => $e,
            Store::I32($v) => $e,
            Store::U8($v) => $e,
            Store::U16($v) => $e,
            Store::U32($v) => $e,
            Store::Bool($v) => $e,
            Store::F8E4M3Fn($v) => $e,
            Store::F4E2M1Fn($v) => $e,
            Store::F8E8M0Fnu($v) => $e,
            Store::F8E5M2X4($v) => $e,
            Store::F8E4M3FnX4($v) => $e,
            Store::F4E2M1FnX4($v) => $e,
        }
    };
}

impl Store {
    /// Elements of `dtype` with the given bits.
    fn new(dtype: DType, bits: &[u32]) -> Store {
        fn pod<T: bytemuck::Pod>(bits: &[u32]) -> Vec<T> {
            let size = core::mem::size_of::<T>();
            let mut v = vec![T::zeroed(); bits.len()];
            for (c, b) in bytemuck::cast_slice_mut::<T, u8>(&mut v)
                .chunks_mut(size)
                .zip(bits)
            {
                c.copy_from_slice(&b.to_le_bytes()[..size]);
            }
            v
        }
        match dtype {
            DType::F32 => Store::F32(pod(bits)),
            DType::Tf32 => Store::Tf32(pod(bits)),
            DType::Bf16 => Store::Bf16(pod(bits)),
            DType::F16 => Store::F16(pod(bits)),
            DType::F8E4M3 => Store::F8E4M3(pod(bits)),
            DType::F8E5M2 => Store::F8E5M2(pod(bits)),
            DType::I8 => Store::I8(pod(bits)),
            DType::I16 => Store::I16(pod(bits)),
            DType::I32 => Store::I32(pod(bits)),
            DType::U8 => Store::U8(pod(bits)),
            DType::U16 => Store::U16(pod(bits)),
            DType::U32 => Store::U32(pod(bits)),
            DType::Bool => Store::Bool(pod(bits)),
            DType::F8E4M3Fn => Store::F8E4M3Fn(pod(bits)),
            DType::F4E2M1Fn => Store::F4E2M1Fn(pod(bits)),
            DType::F8E8M0Fnu => Store::F8E8M0Fnu(pod(bits)),
            DType::F8E5M2X4 => Store::F8E5M2X4(pod(bits)),
            DType::F8E4M3FnX4 => Store::F8E4M3FnX4(pod(bits)),
            DType::F4E2M1FnX4 => Store::F4E2M1FnX4(pod(bits)),
        }
    }

    /// The elements' bits, zero-extended.
    fn bits(&self) -> Vec<u32> {
        fn of<T: bytemuck::Pod>(v: &[T]) -> Vec<u32> {
            let size = core::mem::size_of::<T>();
            bytemuck::cast_slice::<T, u8>(v)
                .chunks(size)
                .map(|c| {
                    let mut w = [0u8; 4];
                    w[..size].copy_from_slice(c);
                    u32::from_le_bytes(w)
                })
                .collect()
        }
        each_store!(self, v => of(v))
    }

    fn arg(&self, shape: &[usize]) -> HbmIn<'_> {
        each_store!(self, v => HbmIn::new(v, shape).unwrap())
    }

    fn arg_mut(&mut self, shape: &[usize]) -> HbmOut<'_> {
        each_store!(self, v => HbmOut::new(v, shape).unwrap())
    }
}

// ---- Running ----

/// One way of running a kernel.
#[derive(Copy, Clone, Debug)]
enum Run {
    /// The reference interpreter.
    Reference,
    /// A core on a host code path, with 1 or 2 host threads, plain or strict.
    Core {
        isa: Isa,
        threads: usize,
        strict: bool,
    },
}

/// The reference interpreter first, then every supported `Isa` × host threads × plain/strict.
fn runs() -> Vec<Run> {
    let mut v = vec![Run::Reference];
    for isa in Isa::supported() {
        for threads in [1, 2] {
            for strict in [false, true] {
                v.push(Run::Core {
                    isa,
                    threads,
                    strict,
                });
            }
        }
    }
    v
}

impl Run {
    fn core(self, target: Target) -> NeuronCore {
        match self {
            Run::Reference => NeuronCore::new(target),
            Run::Core {
                isa,
                threads,
                strict,
            } => NeuronCore::new(target)
                .with_isa(isa)
                .unwrap()
                .with_host_threads(threads)
                .with_strict(strict),
        }
    }

    /// Runs `row` on `core`: every output's bits; `None` for a strict core that refuses the
    /// row as it must (`Row::strict_refuses`).
    fn launch(self, core: &mut NeuronCore, row: &Row) -> Option<Vec<Vec<u32>>> {
        let ins: Vec<Store> = row
            .inputs
            .iter()
            .map(|(d, a)| {
                let bits: Vec<u32> = a
                    .iter()
                    .map(|&v| {
                        encode(*d, v).unwrap_or_else(|| panic!("`{}`: {v} is not a {d}", row.name))
                    })
                    .collect();
                Store::new(*d, &bits)
            })
            .collect();
        // Outputs start as a byte pattern no row writes everywhere.
        let mut outs: Vec<Store> = row
            .outputs
            .iter()
            .map(|&(d, s)| Store::new(d, &vec![0x5a5a_5a5a; s[0] * s[1]]))
            .collect();
        let parts = row.program.parts();
        let kernel = Kernel::new(parts.program());
        let args: Vec<HbmIn<'_>> = ins
            .iter()
            .zip(&row.inputs)
            .map(|(s, (_, a))| s.arg(&dims(a)))
            .collect();
        let mut out_args: Vec<HbmOut<'_>> = outs
            .iter_mut()
            .zip(&row.outputs)
            .map(|(s, (_, d))| s.arg_mut(d))
            .collect();
        let r = match self {
            Run::Reference => {
                nki_runtime::reference_launch::launch(core, &kernel, &args, &mut out_args)
            }
            Run::Core { .. } => core.launch(&kernel, &args, &mut out_args),
        };
        let strict = matches!(self, Run::Core { strict: true, .. });
        match r {
            Err(e) if strict && row.strict_refuses => {
                let why = e.to_string();
                assert!(
                    why.contains("partly overlaps a source"),
                    "`{}` on {self:?}: refused for another reason: {why}",
                    row.name
                );
                return None;
            }
            Ok(()) if strict && row.strict_refuses => {
                panic!("`{}` on {self:?}: a strict core ran it", row.name)
            }
            r => r.unwrap_or_else(|e| panic!("`{}` on {self:?}: {e}", row.name)),
        }
        drop(out_args);
        Some(outs.iter().map(Store::bits).collect())
    }
}

/// Runs every row every way; every run must give the reference interpreter's bits, and those
/// must agree with the row's expectation. Panics naming the first row and element that fail.
fn check_rows(rows: &[Row]) {
    let runs = runs();
    let mut results: Vec<Vec<Option<Vec<Vec<u32>>>>> = vec![Vec::new(); rows.len()];
    for &run in &runs {
        let mut core = run.core(Target::Trn1);
        for (r, row) in rows.iter().enumerate() {
            let got = if row.target == Target::Trn1 {
                run.launch(&mut core, row)
            } else {
                run.launch(&mut run.core(row.target), row)
            };
            results[r].push(got);
        }
    }
    for (row, res) in rows.iter().zip(&results) {
        let reference = res[0]
            .as_ref()
            .expect("the reference interpreter runs every row");
        for (run, got) in runs.iter().zip(res).skip(1) {
            let Some(got) = got else { continue };
            for (o, (a, b)) in reference.iter().zip(got).enumerate() {
                if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
                    panic!(
                        "`{}`: output {o} element {i} is {:#x} on the reference interpreter, \
                         {:#x} on {run:?}",
                        row.name, a[i], b[i]
                    );
                }
            }
        }
        for (o, ((dtype, _), want)) in row.outputs.iter().zip(&row.want).enumerate() {
            for (i, (&bits, &w)) in reference[o].iter().zip(want.iter()).enumerate() {
                if matches!(row.check, Check::Exact) {
                    assert!(
                        encode(*dtype, w).is_some(),
                        "`{}`: the expected {w} of output {o} element {i} is not a {dtype}",
                        row.name
                    );
                }
                assert!(
                    agrees(row.check, *dtype, bits, w),
                    "`{}`: output {o} element {i} ({}, {}) is {:#x} = {}, expected {w} ({:?})",
                    row.name,
                    i / want.ncols(),
                    i % want.ncols(),
                    bits,
                    decode(*dtype, bits),
                    row.check
                );
            }
        }
    }
}

// ---- Inputs ----

/// A deterministic source of values.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An integer in `lo..=hi`.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    /// A multiple of `step` in `[lo, hi]`.
    fn step(&mut self, lo: f64, hi: f64, step: f64) -> f64 {
        self.int((lo / step) as i64, (hi / step) as i64) as f64 * step
    }
}

/// A `[p, f]` array of values drawn by `draw`.
fn values(p: usize, f: usize, seed: u64, mut draw: impl FnMut(&mut Rng) -> f64) -> Array2<f64> {
    let mut rng = Rng::new(seed);
    Array2::from_shape_simple_fn((p, f), || draw(&mut rng))
}

/// The elementwise rows' grid: large enough for plain cores to split it between two threads.
const P: usize = 128;
const F: usize = 160;

fn elementwise(a: &Array2<f64>, b: &Array2<f64>, f: impl Fn(f64, f64) -> f64) -> Array2<f64> {
    Zip::from(a).and(b).map_collect(|&x, &y| f(x, y))
}

/// Special and ordinary f32 values: NaN, ±∞, ±0, subnormals, the largest finite, small ones.
fn specials(seed: u64) -> Array2<f64> {
    let pick = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(0x0040_0000),
        f32::MIN_POSITIVE,
        f32::MAX,
        -f32::MAX,
        1.5,
        -2.25,
    ];
    values(P, F, seed, |r| {
        f64::from(pick[r.int(0, pick.len() as i64 - 1) as usize])
    })
}

fn truth(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

// ---- The table ----

/// Loop control: an `affine_range` loop over column blocks, each loaded, doubled and stored.
fn loop_rows() -> Vec<Row> {
    let x = values(P, 64, 1, |r| r.step(-8.0, 8.0, 0.125));
    vec![row(
        "loop over column blocks",
        &[Covers::Op(Opcode::LoopBegin), Covers::Op(Opcode::LoopEnd)],
        vec![(DType::F32, x)],
        &[(DType::F32, [P, 64])],
        |k| {
            let i =
                k.b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(4))
                    .unwrap();
            let at = i.checked_scale(16).unwrap();
            let t = k.sbuf(DType::F32, &[P as u32, 16]);
            let (x, o) = (k.inputs[0].0, k.outputs[0]);
            k.b.load(t, Grid::origin(x).at(1, at)).unwrap();
            let u = k.sbuf(DType::F32, &[P as u32, 16]);
            k.b.tensor_scalar(
                u,
                t,
                Alu::Multiply,
                Operand::Imm(Scalar::float(2.0)),
                Alu::Bypass,
                Operand::None,
            )
            .unwrap();
            k.b.store(Grid::origin(o).at(1, at), u).unwrap();
            k.b.end_loop().unwrap();
        },
        |x| vec![x[0].mapv(|v| 2.0 * v)],
        Check::Exact,
    )]
}

/// DMA: loads and stores with casts, a masked load, and `load_transpose2d`.
fn dma_rows() -> Vec<Row> {
    let x = values(P, F, 2, |r| r.int(-(1 << 23), 1 << 23) as f64 / 1024.0);
    let bf = bf16_of;
    let y = values(48, 40, 3, |r| r.step(-100.0, 100.0, 0.25));
    vec![
        row(
            "load f32 into a bf16 tile (rounds to nearest even), store to f32",
            &[Covers::Op(Opcode::Load), Covers::Op(Opcode::Store)],
            vec![(DType::F32, x.clone())],
            &[(DType::F32, [P, F])],
            |k| {
                let t = k.sbuf(DType::Bf16, &[P as u32, F as u32]);
                k.b.load(t, Grid::origin(k.inputs[0].0)).unwrap();
                k.store(0, t);
            },
            |x| vec![x[0].mapv(bf)],
            Check::Exact,
        ),
        row(
            "store an f32 tile into a bf16 output",
            &[Covers::Op(Opcode::Store)],
            vec![(DType::F32, x)],
            &[(DType::Bf16, [P, F])],
            |k| {
                let t = k.load(0);
                k.store(0, t);
            },
            |x| vec![x[0].mapv(bf)],
            Check::Exact,
        ),
        row(
            "load_transpose2d [48, 40] into [40, 48]",
            &[Covers::Op(Opcode::LoadTranspose2d)],
            vec![(DType::F32, y.clone())],
            &[(DType::Bf16, [40, 48])],
            |k| {
                let t = k.sbuf(DType::Bf16, &[40, 48]);
                let tile = k.v(t);
                let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
                axes[0].grid = [1, 0, 0, 0, 0];
                axes[1].grid = [0, 1, 0, 0, 0];
                let hbm =
                    k.b.access(HbmAccess {
                        tensor: k.inputs[0].0.index(),
                        reshape: None,
                        rank: 2,
                        shape: TileShape::new(&[48, 40]).unwrap(),
                        axes,
                    })
                    .unwrap();
                k.push(Opcode::LoadTranspose2d, None, InstrData::Dma { tile, hbm });
                k.store(0, t);
            },
            |x| vec![x[0].t().mapv(bf)],
            Check::Exact,
        ),
        row(
            "dma_transpose [48, 40] from HBM into [40, 48] bf16",
            &[Covers::Op(Opcode::DmaTranspose)],
            vec![(DType::F32, y.clone())],
            &[(DType::Bf16, [40, 48])],
            |k| {
                let t = k.sbuf(DType::Bf16, &[40, 48]);
                let tile = k.v(t);
                let x = k.inputs[0].0;
                let hbm = k.access(x, &[48, 40], [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0]]);
                k.push(Opcode::DmaTranspose, None, InstrData::Dma { tile, hbm });
                k.store(0, t);
            },
            |x| vec![x[0].t().mapv(bf)],
            Check::Exact,
        ),
        row(
            "dma_transpose of a 3-axis HBM access [6, 8, 40] into [40, 8, 6]",
            &[Covers::Op(Opcode::DmaTranspose)],
            vec![(DType::F32, y.clone())],
            &[(DType::F32, [40, 48])],
            |k| {
                // The access's element (a, b, c) is x[8a + b, c]; the tile's (c, b, a) goes
                // to out[c, 8a + b].
                let t = k.sbuf(DType::F32, &[40, 8, 6]);
                let tile = k.v(t);
                let (x, out) = (k.inputs[0].0, k.outputs[0]);
                let hbm = k.access(x, &[6, 8, 40], [[8, 1, 0, 0, 0], [0, 0, 1, 0, 0]]);
                k.push(Opcode::DmaTranspose, None, InstrData::Dma { tile, hbm });
                let to = k.access(out, &[40, 8, 6], [[1, 0, 0, 0, 0], [0, 1, 8, 0, 0]]);
                let tile = k.v(t);
                k.push(Opcode::Store, None, InstrData::Dma { tile, hbm: to });
            },
            |x| vec![x[0].t().to_owned()],
            Check::Exact,
        ),
        row(
            "dma_transpose_sbuf of a 4-axis tile [48, 2, 4, 5] into [5, 2, 4, 48] int32",
            &[Covers::Op(Opcode::DmaTransposeSbuf)],
            vec![(DType::F32, y.clone())],
            &[(DType::I32, [40, 48])],
            |k| {
                // The tile's element (p, j, l, m) is x[p, 20j + 5l + m]; the result's
                // (m, j, l, p) goes to out[20j + 5l + m, p].
                let s = k.sbuf(DType::F32, &[48, 2, 4, 5]);
                let sv = k.v(s);
                let (x, out) = (k.inputs[0].0, k.outputs[0]);
                let from = k.access(x, &[48, 2, 4, 5], [[1, 0, 0, 0, 0], [0, 20, 5, 1, 0]]);
                k.push(
                    Opcode::Load,
                    None,
                    InstrData::Dma {
                        tile: sv,
                        hbm: from,
                    },
                );
                let t = k.sbuf(DType::I32, &[5, 2, 4, 48]);
                let dst = k.dst(t);
                k.unary(Opcode::DmaTransposeSbuf, None, dst, sv);
                let to = k.access(out, &[5, 2, 4, 48], [[1, 20, 5, 0, 0], [0, 0, 0, 1, 0]]);
                let tile = k.v(t);
                k.push(Opcode::Store, None, InstrData::Dma { tile, hbm: to });
            },
            // f32 → int32 rounds to nearest even; the inputs are multiples of 0.25.
            |x| vec![x[0].t().mapv(|v| v.round_ties_even())],
            Check::Exact,
        ),
        row(
            "dma_transpose_sbuf [48, 40] into [40, 48] bf16, masked to partitions p < 30",
            &[Covers::Op(Opcode::DmaTransposeSbuf)],
            vec![(DType::F32, y)],
            &[(DType::Bf16, [40, 48])],
            |k| {
                let s = k.load(0);
                let sv = k.v(s);
                let t = k.sbuf(DType::Bf16, &[40, 48]);
                let dst = k.v(t);
                k.push(
                    Opcode::Memset,
                    None,
                    InstrData::Fill {
                        dst: Dst::overwrite(dst),
                        value: Scalar::float(0.0),
                    },
                );
                let mask = k.b.mask(partitions_below(30)).unwrap();
                let mut i = Instr::new(
                    Opcode::DmaTransposeSbuf,
                    InstrData::Unary {
                        dst: Dst::overwrite(dst),
                        src: sv,
                    },
                );
                i.mask = Some(mask);
                k.b.push(i).unwrap();
                k.store(0, t);
            },
            |x| {
                let t = x[0].t();
                vec![Array2::from_shape_fn((40, 48), |(p, f)| {
                    if p < 30 { bf(t[[p, f]]) } else { 0.0 }
                })]
            },
            Check::Exact,
        ),
    ]
}

/// TensorE: `nc_matmul` (overwrite, an accumulation group over a loop, f32 operands) and
/// `nc_transpose` on TensorE and VectorE.
fn tensor_engine_rows() -> Vec<Row> {
    let small = |seed, p, f| values(p, f, seed, |r| r.int(-8, 8) as f64);
    let matmul = |s: &Array2<f64>, m: &Array2<f64>| s.t().dot(m);
    // bf16 values from its subnormals (multiples of 2^-133) up to 2^-40: products and sums
    // below 2^-126 are flushed.
    let tiny = |seed, p, f| {
        values(p, f, seed, |r| {
            r.int(-7, 7) as f64 * 2f64.powi(r.int(-133, -40) as i32)
        })
    };
    vec![
        row(
            "nc_matmul bf16 x bf16 of subnormal and tiny values (DAZ, FTZ)",
            &[Covers::Op(Opcode::Matmul)],
            vec![
                (DType::Bf16, tiny(16, 128, 64)),
                (DType::Bf16, tiny(17, 128, 256)),
            ],
            &[(DType::F32, [64, 256])],
            |k| {
                let (s, m) = (k.load(0), k.load(1));
                let acc = k.tile(Memory::Psum, DType::F32, &[64, 256]);
                k.b.nc_matmul(acc, s, m, Write::Overwrite).unwrap();
                let r = k.sbuf(DType::F32, &[64, 256]);
                k.b.tensor_copy(r, acc).unwrap();
                k.store(0, r);
            },
            |x| vec![matmul(&x[0], &x[1])],
            Check::Runs,
        ),
        row(
            "nc_matmul bf16 x bf16 into PSUM, copied out",
            &[Covers::Op(Opcode::Matmul)],
            vec![
                (DType::Bf16, small(4, 128, 96)),
                (DType::Bf16, small(5, 128, 320)),
            ],
            &[(DType::F32, [96, 320])],
            |k| {
                let (s, m) = (k.load(0), k.load(1));
                let acc = k.tile(Memory::Psum, DType::F32, &[96, 320]);
                k.b.nc_matmul(acc, s, m, Write::Overwrite).unwrap();
                let r = k.sbuf(DType::F32, &[96, 320]);
                k.b.tensor_copy(r, acc).unwrap();
                k.store(0, r);
            },
            |x| vec![matmul(&x[0], &x[1])],
            Check::Exact,
        ),
        row(
            "nc_matmul f16 accumulation group over a loop of K blocks",
            &[
                Covers::Op(Opcode::Matmul),
                Covers::Op(Opcode::LoopBegin),
                Covers::Op(Opcode::LoopEnd),
            ],
            vec![
                (DType::F16, small(6, 384, 64)),
                (DType::F16, small(7, 384, 200)),
            ],
            &[(DType::F32, [64, 200])],
            |k| {
                let acc = k.tile(Memory::Psum, DType::F32, &[64, 200]);
                let i =
                    k.b.begin_loop(LoopKind::Sequential, "k", Extent::Fixed(3))
                        .unwrap();
                let at = i.checked_scale(128).unwrap();
                let (xs, xm) = (k.inputs[0].0, k.inputs[1].0);
                let s = k.sbuf(DType::F16, &[128, 64]);
                let m = k.sbuf(DType::F16, &[128, 200]);
                k.b.load(s, Grid::origin(xs).at(0, at)).unwrap();
                k.b.load(m, Grid::origin(xm).at(0, at)).unwrap();
                let group = Write::Group {
                    loops: 1,
                    op: Alu::Add,
                };
                k.b.nc_matmul(acc, s, m, group).unwrap();
                k.b.end_loop().unwrap();
                let r = k.sbuf(DType::F32, &[64, 200]);
                k.b.tensor_copy(r, acc).unwrap();
                k.store(0, r);
            },
            |x| vec![matmul(&x[0], &x[1])],
            Check::Exact,
        ),
        row(
            "nc_matmul f32 x f32 (fp32 accumulation)",
            &[Covers::Op(Opcode::Matmul)],
            vec![
                // Multiples of 1/64 up to 2: every partial sum is exact in fp32.
                (
                    DType::F32,
                    values(128, 128, 8, |r| r.step(-2.0, 2.0, 1.0 / 64.0)),
                ),
                (
                    DType::F32,
                    values(128, 256, 9, |r| r.step(-2.0, 2.0, 1.0 / 64.0)),
                ),
            ],
            &[(DType::F32, [128, 256])],
            |k| {
                let (s, m) = (k.load(0), k.load(1));
                let acc = k.tile(Memory::Psum, DType::F32, &[128, 256]);
                k.b.nc_matmul(acc, s, m, Write::Overwrite).unwrap();
                let r = k.sbuf(DType::F32, &[128, 256]);
                k.b.tensor_copy(r, acc).unwrap();
                k.store(0, r);
            },
            |x| vec![matmul(&x[0], &x[1])],
            Check::Exact,
        ),
        row(
            "nc_transpose on TensorE: bf16 [128, 96] into fp32 PSUM [96, 128]",
            &[Covers::Op(Opcode::Transpose)],
            vec![(
                DType::Bf16,
                values(128, 96, 10, |r| r.step(-64.0, 64.0, 0.5)),
            )],
            &[(DType::F32, [96, 128])],
            |k| {
                let x = k.load(0);
                let t = k.tile(Memory::Psum, DType::F32, &[96, 128]);
                k.b.nc_transpose(t, x).unwrap();
                let r = k.sbuf(DType::F32, &[96, 128]);
                k.b.tensor_copy(r, t).unwrap();
                k.store(0, r);
            },
            |x| vec![x[0].t().to_owned()],
            Check::Exact,
        ),
        row(
            "nc_transpose on VectorE: i16 [24, 32] into [32, 24]",
            &[Covers::Op(Opcode::Transpose)],
            vec![(
                DType::I16,
                values(24, 32, 11, |r| r.int(-30000, 30000) as f64),
            )],
            &[(DType::I16, [32, 24])],
            |k| {
                let x = k.load(0);
                let t = k.sbuf(DType::I16, &[32, 24]);
                let (dst, src) = (k.dst(t), k.v(x));
                k.unary(Opcode::Transpose, Some(Engine::Vector), dst, src);
                k.store(0, t);
            },
            |x| vec![x[0].t().to_owned()],
            Check::Exact,
        ),
    ]
}

/// `tensor_copy` on each engine, with casts and accumulation; `memset`.
fn copy_rows() -> Vec<Row> {
    let big = values(P, F, 12, |r| r.int(-(1 << 28), 1 << 28) as f64);
    let copy = |engine: Engine, dt: DType| {
        move |k: &mut Kb| {
            let x = k.load(0);
            let t = k.sbuf(dt, &[P as u32, F as u32]);
            let (dst, src) = (k.dst(t), k.v(x));
            k.unary(Opcode::TensorCopy, Some(engine), dst, src);
            k.store(0, t);
        }
    };
    let f32_round = |v: f64| f64::from(v as f32);
    let fill = |value: Scalar, dt: DType| {
        move |k: &mut Kb| {
            let t = k.sbuf(dt, &[P as u32, F as u32]);
            k.b.memset(t, value).unwrap();
            k.store(0, t);
        }
    };
    let none: Vec<(DType, Array2<f64>)> = Vec::new();
    let constant = |v: f64| move |_: &[Array2<f64>]| vec![Array2::from_elem((P, F), v)];
    // `t.view(dtype)`: a view of a tile's bytes as another dtype (`TileView::dtype`), its
    // offset and strides counting that dtype's elements.
    let reinterpreted = |k: &mut Kb, t: TileId, dtype: DType, dims: [u32; 2]| {
        let mut v = TileView::whole(t.index(), &TileShape::new(&dims).unwrap());
        v.dtype = Some(dtype);
        k.b.view(v).unwrap()
    };
    let halves_in = values(P, F, 13, |r| r.int(-(1 << 20), 1 << 20) as f64 / 64.0);
    let bytes_in = values(P, 4 * F, 14, |r| r.int(0, 255) as f64);
    vec![
        row(
            "tensor_copy of an f32 tile viewed as u16 reads the halves of its bits, low first",
            &[Covers::Op(Opcode::TensorCopy), Covers::Dt(DType::U16)],
            vec![(DType::F32, halves_in)],
            &[(DType::U16, [P, 2 * F])],
            move |k: &mut Kb| {
                let x = k.load(0);
                let t = k.sbuf(DType::U16, &[P as u32, 2 * F as u32]);
                let src = reinterpreted(k, x, DType::U16, [P as u32, 2 * F as u32]);
                let dst = k.dst(t);
                k.unary(Opcode::TensorCopy, Some(Engine::Vector), dst, src);
                k.store(0, t);
            },
            |x| {
                let bits = |p: usize, j: usize| (x[0][[p, j / 2]] as f32).to_bits();
                vec![Array2::from_shape_fn((P, 2 * F), |(p, j)| {
                    f64::from(if j % 2 == 0 {
                        bits(p, j) & 0xffff
                    } else {
                        bits(p, j) >> 16
                    })
                })]
            },
            Check::Exact,
        ),
        row(
            "tensor_copy of a u8 tile viewed as int32 joins four bytes little-endian",
            &[Covers::Op(Opcode::TensorCopy), Covers::Dt(DType::U8)],
            vec![(DType::U8, bytes_in)],
            &[(DType::I32, [P, F])],
            move |k: &mut Kb| {
                let x = k.load(0);
                let t = k.sbuf(DType::I32, &[P as u32, F as u32]);
                let src = reinterpreted(k, x, DType::I32, [P as u32, F as u32]);
                let dst = k.dst(t);
                k.unary(Opcode::TensorCopy, Some(Engine::Vector), dst, src);
                k.store(0, t);
            },
            |x| {
                vec![Array2::from_shape_fn((P, F), |(p, j)| {
                    let b = |k: usize| x[0][[p, 4 * j + k]] as u8;
                    f64::from(i32::from_le_bytes([b(0), b(1), b(2), b(3)]))
                })]
            },
            Check::Exact,
        ),
        row(
            "tensor_copy on Vector keeps an int32's bits",
            &[Covers::Op(Opcode::TensorCopy)],
            vec![(DType::I32, big.clone())],
            &[(DType::I32, [P, F])],
            copy(Engine::Vector, DType::I32),
            |x| vec![x[0].clone()],
            Check::Exact,
        ),
        row(
            "tensor_copy on GpSimd keeps an int32's bits",
            &[Covers::Op(Opcode::TensorCopy)],
            vec![(DType::I32, big.clone())],
            &[(DType::I32, [P, F])],
            copy(Engine::GpSimd, DType::I32),
            |x| vec![x[0].clone()],
            Check::Exact,
        ),
        row(
            "tensor_copy on Scalar goes through fp32 (an int32 above 2^24 rounds)",
            &[Covers::Op(Opcode::TensorCopy)],
            vec![(DType::I32, big)],
            &[(DType::I32, [P, F])],
            copy(Engine::Scalar, DType::I32),
            move |x| vec![x[0].mapv(f32_round)],
            Check::Exact,
        ),
        row(
            "tensor_copy f32 into bf16 (rounds to nearest even)",
            &[Covers::Op(Opcode::TensorCopy)],
            vec![(
                DType::F32,
                values(P, F, 13, |r| r.step(-3.0, 3.0, 1.0 / 4096.0)),
            )],
            &[(DType::Bf16, [P, F])],
            copy(Engine::Vector, DType::Bf16),
            |x| vec![x[0].mapv(bf16_of)],
            Check::Exact,
        ),
        row(
            "tensor_copy accumulating: dst += src",
            &[Covers::Op(Opcode::TensorCopy)],
            vec![
                (DType::F32, values(P, F, 14, |r| r.step(-8.0, 8.0, 0.25))),
                (DType::F32, values(P, F, 15, |r| r.step(-8.0, 8.0, 0.25))),
            ],
            &[(DType::F32, [P, F])],
            |k| {
                let (x, y) = (k.load(0), k.load(1));
                let dst = Dst {
                    view: k.v(y),
                    write: Write::Accumulate(Alu::Add),
                };
                let src = k.v(x);
                k.unary(Opcode::TensorCopy, None, dst, src);
                k.store(0, y);
            },
            |x| vec![&x[0] + &x[1]],
            Check::Exact,
        ),
        row(
            "tensor_copy f32 into float8_e4m3fn (nearest even; past 464 the NaN)",
            &[Covers::Op(Opcode::TensorCopy), Covers::Dt(DType::F8E4M3Fn)],
            vec![(DType::F32, ocp_inputs(16, 600.0))],
            &[(DType::F8E4M3Fn, [P, F])],
            copy(Engine::Vector, DType::F8E4M3Fn),
            |x| vec![x[0].mapv(|v| ocp_round(DType::F8E4M3Fn, v))],
            Check::Exact,
        ),
        row(
            "tensor_copy f32 into float4_e2m1fn (nearest even, saturating at 6)",
            &[Covers::Op(Opcode::TensorCopy), Covers::Dt(DType::F4E2M1Fn)],
            vec![(DType::F32, ocp_inputs(17, 10.0))],
            &[(DType::F4E2M1Fn, [P, F])],
            copy(Engine::Scalar, DType::F4E2M1Fn),
            |x| vec![x[0].mapv(|v| ocp_round(DType::F4E2M1Fn, v))],
            Check::Exact,
        ),
        row(
            "tensor_copy f32 into float8_e8m0fnu (powers of two, 1.5 up; no zero or sign)",
            &[Covers::Op(Opcode::TensorCopy), Covers::Dt(DType::F8E8M0Fnu)],
            vec![(DType::F32, ocp_inputs(18, 1e6))],
            &[(DType::F8E8M0Fnu, [P, F])],
            copy(Engine::GpSimd, DType::F8E8M0Fnu),
            |x| vec![x[0].mapv(|v| ocp_round(DType::F8E8M0Fnu, v))],
            Check::Exact,
        ),
        row(
            "tensor_copy float8_e4m3fn into float4_e2m1fn (through fp32)",
            &[
                Covers::Op(Opcode::TensorCopy),
                Covers::Dt(DType::F8E4M3Fn),
                Covers::Dt(DType::F4E2M1Fn),
            ],
            vec![(
                DType::F8E4M3Fn,
                values(P, F, 19, |r| {
                    ocp_value(DType::F8E4M3Fn, r.int(0, 0xfe) as u32)
                })
                .mapv(|v| if v.is_nan() { 1.0 } else { v }),
            )],
            &[(DType::F4E2M1Fn, [P, F])],
            copy(Engine::Vector, DType::F4E2M1Fn),
            |x| vec![x[0].mapv(|v| ocp_round(DType::F4E2M1Fn, v))],
            Check::Exact,
        ),
        row(
            "memset f32 2.5",
            &[Covers::Op(Opcode::Memset)],
            none.clone(),
            &[(DType::F32, [P, F])],
            fill(Scalar::float(2.5), DType::F32),
            constant(2.5),
            Check::Exact,
        ),
        row(
            "memset i8 300 (saturates)",
            &[Covers::Op(Opcode::Memset)],
            none.clone(),
            &[(DType::I8, [P, F])],
            fill(Scalar::Int(300), DType::I8),
            constant(127.0),
            Check::Exact,
        ),
        row(
            "memset bf16 1/3 (rounds)",
            &[Covers::Op(Opcode::Memset)],
            none,
            &[(DType::Bf16, [P, F])],
            fill(Scalar::float(1.0 / 3.0), DType::Bf16),
            constant(bf16::from_f32(1.0 / 3.0).to_f64()),
            Check::Exact,
        ),
    ]
}

/// f32 inputs for the OCP-format rows: values in `(−hi, hi)` on a grid of 1/64 (rounded to
/// f32), every seventh one (from the fourth) scaled down to the formats' subnormal and scale ranges, and a few exact ties and limits
/// (e4m3fn: 448, 464, 480; e2m1fn: 0.25, 5, 7; e8m0fnu: 1.5, 3 · 2^-128, 0).
fn ocp_inputs(seed: u64, hi: f64) -> Array2<f64> {
    let ties = [
        448.0,
        464.0,
        -464.0,
        480.0,
        0.25,
        -5.0,
        7.0,
        1.5,
        3.0 * 2f64.powi(-128),
        0.0,
        -0.0,
        2f64.powi(-10),
    ];
    let mut n = 0usize;
    values(P, F, seed, |r| {
        n += 1;
        let v = f64::from(r.step(-hi, hi, 1.0 / 64.0) as f32);
        match n % 7 {
            0 => ties[(n / 7) % ties.len()],
            3 => f64::from((v * 2f64.powi(-r.int(4, 130) as i32)) as f32),
            _ => v,
        }
    })
}

/// How an ALU operation is exercised: the operation, the dtype of its operands and result,
/// how its two operands are drawn, its f64 definition and the check.
type AluCase = (
    Alu,
    DType,
    fn(&mut Rng) -> f64,
    fn(&mut Rng) -> f64,
    fn(f64, f64) -> f64,
    Check,
);

/// Every ALU operation: binary ones as `tensor_tensor`, one-operand ones as `tensor_scalar`.
fn alu_rows() -> Vec<Row> {
    fn eighths(r: &mut Rng) -> f64 {
        r.step(-8.0, 8.0, 0.125)
    }
    fn nonzero(r: &mut Rng) -> f64 {
        let v = r.step(-8.0, 8.0, 0.125);
        if v == 0.0 { 0.5 } else { v }
    }
    fn few(r: &mut Rng) -> f64 {
        r.int(-3, 3) as f64
    }
    fn positive(r: &mut Rng) -> f64 {
        r.step(0.25, 4.0, 0.125)
    }
    fn powers_of_four(r: &mut Rng) -> f64 {
        4f64.powi(r.int(-4, 4) as i32)
    }
    fn ints(r: &mut Rng) -> f64 {
        r.int(i64::from(i32::MIN), i64::from(i32::MAX)) as f64
    }
    fn shifts(r: &mut Rng) -> f64 {
        r.int(0, 40) as f64
    }
    fn unused(_: &mut Rng) -> f64 {
        0.0
    }
    fn i(v: f64) -> i32 {
        v as i32
    }
    fn shift(a: f64, b: f64, f: fn(u32, u32) -> u32) -> f64 {
        if (0.0..32.0).contains(&b) {
            f64::from(f(a as i32 as u32, b as u32) as i32)
        } else {
            0.0
        }
    }
    use Check::{Exact, Rounded, Within};
    use DType::{F32, I32};
    #[rustfmt::skip]
    let cases: [AluCase; 29] = [
        (Alu::Bypass, F32, eighths, unused, |a, _| a, Exact),
        (Alu::Add, F32, eighths, eighths, |a, b| a + b, Rounded),
        (Alu::Subtract, F32, eighths, eighths, |a, b| a - b, Rounded),
        (Alu::Multiply, F32, eighths, eighths, |a, b| a * b, Rounded),
        (Alu::Divide, F32, eighths, nonzero, |a, b| a / b, Rounded),
        (Alu::Max, F32, few, few, f64::max, Exact),
        (Alu::Min, F32, few, few, f64::min, Exact),
        (Alu::Pow, F32, positive, eighths, f64::powf, Within(3e-7)),
        (Alu::Mod, F32, eighths, nonzero, |a, b| a - b * (a / b).floor(), Exact),
        (Alu::Fmod, F32, eighths, nonzero, |a, b| a % b, Exact),
        (Alu::Abs, F32, eighths, unused, |a, _| a.abs(), Exact),
        (Alu::Rsqrt, F32, powers_of_four, unused, |a, _| 1.0 / a.sqrt(), Exact),
        (Alu::Reciprocal, F32, nonzero, unused, |a, _| 1.0 / a, Rounded),
        (Alu::IsEqual, F32, few, few, |a, b| truth(a == b), Exact),
        (Alu::NotEqual, F32, few, few, |a, b| truth(a != b), Exact),
        (Alu::IsGt, F32, few, few, |a, b| truth(a > b), Exact),
        (Alu::IsGe, F32, few, few, |a, b| truth(a >= b), Exact),
        (Alu::IsLt, F32, few, few, |a, b| truth(a < b), Exact),
        (Alu::IsLe, F32, few, few, |a, b| truth(a <= b), Exact),
        (Alu::LogicalAnd, F32, few, few, |a, b| truth(a != 0.0 && b != 0.0), Exact),
        (Alu::LogicalOr, F32, few, few, |a, b| truth(a != 0.0 || b != 0.0), Exact),
        (Alu::LogicalXor, F32, few, few, |a, b| truth((a != 0.0) != (b != 0.0)), Exact),
        (Alu::LogicalNot, F32, few, unused, |a, _| truth(a == 0.0), Exact),
        (Alu::BitwiseAnd, I32, ints, ints, |a, b| f64::from(i(a) & i(b)), Exact),
        (Alu::BitwiseOr, I32, ints, ints, |a, b| f64::from(i(a) | i(b)), Exact),
        (Alu::BitwiseXor, I32, ints, ints, |a, b| f64::from(i(a) ^ i(b)), Exact),
        (Alu::Invert, I32, ints, unused, |a, _| f64::from(!i(a)), Exact),
        (Alu::LeftShift, I32, ints, shifts, |a, b| shift(a, b, |x, s| x << s), Exact),
        (Alu::RightShift, I32, ints, shifts, |a, b| shift(a, b, |x, s| x >> s), Exact),
    ];
    cases
        .iter()
        .enumerate()
        .map(|(n, &(op, dtype, draw_a, draw_b, want, check))| {
            let a = values(P, F, 100 + n as u64, draw_a);
            let b = values(P, F, 200 + n as u64, draw_b);
            let binary = op.arity() == 2;
            let (opcode, inputs) = if binary {
                (Opcode::TensorTensor, vec![(dtype, a), (dtype, b)])
            } else {
                (Opcode::TensorScalar, vec![(dtype, a)])
            };
            row(
                format!("{} {op}", opcode.info().name),
                &[Covers::Op(opcode), Covers::Alu(op)],
                inputs,
                &[(dtype, [P, F])],
                move |k| {
                    let x = k.load(0);
                    let r = k.sbuf(dtype, &[P as u32, F as u32]);
                    if binary {
                        let y = k.load(1);
                        k.b.tensor_tensor(r, x, y, op).unwrap();
                    } else {
                        k.b.tensor_scalar(r, x, op, Operand::None, Alu::Bypass, Operand::None)
                            .unwrap();
                    }
                    k.store(0, r);
                },
                move |x| {
                    let b = x.get(1).cloned().unwrap_or_else(|| x[0].mapv(|_| 0.0));
                    vec![elementwise(&x[0], &b, want)]
                },
                check,
            )
        })
        .collect()
}

/// The other ALU-format instructions, with immediates, columns, swapped operands, two
/// operations, reductions, accumulation, a mask and GpSimd's int32 arithmetic; `reciprocal`.
fn alu_format_rows() -> Vec<Row> {
    let eighths = |seed| values(P, F, seed, |r| r.step(-8.0, 8.0, 0.125));
    let column = |seed| values(P, 1, seed, |r| r.step(-4.0, 4.0, 0.25));
    let p = P as u32;
    let f = F as u32;
    vec![
        row(
            "tensor_scalar with no operand0: abs(data) + 1",
            &[Covers::Op(Opcode::TensorScalar)],
            vec![(DType::F32, eighths(90))],
            &[(DType::F32, [P, F])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, f]);
                k.b.tensor_scalar(
                    r,
                    x,
                    Alu::Abs,
                    Operand::None,
                    Alu::Add,
                    Operand::Imm(Scalar::float(1.0)),
                )
                .unwrap();
                k.store(0, r);
            },
            |x| vec![x[0].mapv(|v| v.abs() + 1.0)],
            Check::Exact,
        ),
        row(
            "tensor_scalar in place, one element to the right: a partition is read, then written",
            &[Covers::Op(Opcode::TensorScalar)],
            vec![(DType::F32, values(P, 101, 91, |r| r.step(-8.0, 8.0, 0.125)))],
            &[(DType::F32, [P, 100])],
            |k| {
                let x = k.load(0);
                let src = k.view(x, &[p, 100], &[1]);
                let mut v = TileView::whole(x.index(), &TileShape::new(&[p, 100]).unwrap());
                v.offset = Affine::constant(1);
                let dst = Dst::overwrite(k.b.view(v).unwrap());
                k.alu(
                    Opcode::TensorScalar,
                    None,
                    dst,
                    [Src::Tile(src), Src::Imm(Scalar::float(2.0)), Src::None],
                    [Alu::Multiply, Alu::Bypass],
                    0,
                    None,
                );
                let r = k.sbuf(DType::F32, &[p, 100]);
                let (d, s) = (k.dst(r), k.view(x, &[p, 100], &[1]));
                k.unary(Opcode::TensorCopy, None, d, s);
                k.store(0, r);
            },
            |x| {
                vec![Array2::from_shape_fn((P, 100), |(p, c)| {
                    if c == 0 {
                        x[0][[p, 0]]
                    } else {
                        2.0 * x[0][[p, c - 1]]
                    }
                })]
            },
            Check::Exact,
        )
        .refused_strictly(),
        row(
            "tensor_scalar in place, 1100 elements to the right of 3000: a partition is read, then \
             written, past the engines' 1024-element chunks",
            &[Covers::Op(Opcode::TensorScalar)],
            vec![(
                DType::F32,
                values(P, 3000, 92, |r| r.step(-8.0, 8.0, 0.125)),
            )],
            &[(DType::F32, [P, 3000])],
            |k| {
                let x = k.load(0);
                let src = k.view(x, &[p, 1900], &[1]);
                let mut v = TileView::whole(x.index(), &TileShape::new(&[p, 1900]).unwrap());
                v.offset = Affine::constant(1100);
                let dst = Dst::overwrite(k.b.view(v).unwrap());
                k.alu(
                    Opcode::TensorScalar,
                    None,
                    dst,
                    [Src::Tile(src), Src::Imm(Scalar::float(2.0)), Src::None],
                    [Alu::Multiply, Alu::Bypass],
                    0,
                    None,
                );
                k.store(0, x);
            },
            |x| {
                vec![Array2::from_shape_fn((P, 3000), |(p, c)| {
                    if c < 1100 {
                        x[0][[p, c]]
                    } else {
                        2.0 * x[0][[p, c - 1100]]
                    }
                })]
            },
            Check::Exact,
        )
        .refused_strictly(),
        row(
            "tensor_copy in place, 1100 elements to the left of 2600, a column broadcast onto its \
             own row: every source element is read before any is written",
            &[
                Covers::Op(Opcode::TensorCopy),
                Covers::Op(Opcode::TensorTensor),
            ],
            vec![(
                DType::F32,
                values(P, 2600, 93, |r| r.step(-8.0, 8.0, 0.125)),
            )],
            &[(DType::F32, [P, 2600])],
            |k| {
                let x = k.load(0);
                let mut v = TileView::whole(x.index(), &TileShape::new(&[p, 1500]).unwrap());
                v.offset = Affine::constant(1100);
                let src = k.b.view(v).unwrap();
                let dst = Dst::overwrite(k.view(x, &[p, 1500], &[1]));
                k.unary(Opcode::TensorCopy, None, dst, src);
                // x[:, c] *= x[:, 0] for every column, the column read from the row itself.
                let whole = k.view(x, &[p, 2600], &[1]);
                let first = k.view(x, &[p, 2600], &[0]);
                let dst = Dst::overwrite(k.view(x, &[p, 2600], &[1]));
                k.alu(
                    Opcode::TensorTensor,
                    None,
                    dst,
                    [Src::Tile(whole), Src::Tile(first), Src::None],
                    [Alu::Multiply, Alu::Bypass],
                    0,
                    None,
                );
                k.store(0, x);
            },
            |x| {
                let shifted = |p: usize, c: usize| {
                    if c < 1500 {
                        x[0][[p, c + 1100]]
                    } else {
                        x[0][[p, c]]
                    }
                };
                vec![Array2::from_shape_fn((P, 2600), |(p, c)| {
                    shifted(p, c) * shifted(p, 0)
                })]
            },
            Check::Exact,
        )
        .refused_strictly(),
        row(
            "a run of partition-local instructions over [128, 4096] (plain cores run it a few \
             partitions at a time): y = (2x + 1)·x, then y − max(y) + x per row",
            &[
                Covers::Op(Opcode::TensorScalar),
                Covers::Op(Opcode::TensorTensor),
                Covers::Op(Opcode::TensorReduce),
            ],
            vec![(
                DType::F32,
                values(P, 4096, 94, |r| r.step(-8.0, 8.0, 0.125)),
            )],
            &[(DType::F32, [P, 4096]), (DType::F32, [P, 1])],
            |k| {
                let x = k.load(0);
                let a = k.sbuf(DType::F32, &[p, 4096]);
                let (d, s) = (k.dst(a), k.v(x));
                let (two, one) = (Scalar::float(2.0), Scalar::float(1.0));
                k.alu(
                    Opcode::TensorScalar,
                    None,
                    d,
                    [Src::Tile(s), Src::Imm(two), Src::Imm(one)],
                    [Alu::Multiply, Alu::Add],
                    0,
                    None,
                );
                let y = k.sbuf(DType::F32, &[p, 4096]);
                let (d, s0, s1) = (k.dst(y), k.v(a), k.v(x));
                k.alu(
                    Opcode::TensorTensor,
                    None,
                    d,
                    [Src::Tile(s0), Src::Tile(s1), Src::None],
                    [Alu::Multiply, Alu::Bypass],
                    0,
                    None,
                );
                let m = k.sbuf(DType::F32, &[p, 1]);
                let (dst, src) = (k.dst(m), k.v(y));
                let data = InstrData::Reduce {
                    dst,
                    src,
                    op: Alu::Max,
                    axes: 1,
                    negate: false,
                };
                k.push(Opcode::TensorReduce, None, data);
                let r = k.sbuf(DType::F32, &[p, 4096]);
                let (d, s, col, s2) = (k.dst(r), k.v(y), k.col(m), k.v(x));
                k.alu(
                    Opcode::ScalarTensorTensor,
                    None,
                    d,
                    [Src::Tile(s), col, Src::Tile(s2)],
                    [Alu::Subtract, Alu::Add],
                    0,
                    None,
                );
                k.store(0, r);
                k.store(1, m);
            },
            |x| {
                let y = x[0].mapv(|v| (2.0 * v + 1.0) * v);
                let max = y.map_axis(Axis(1), |r| {
                    r.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                });
                let out =
                    Array2::from_shape_fn((P, 4096), |(p, c)| y[[p, c]] - max[p] + x[0][[p, c]]);
                vec![out, max.insert_axis(Axis(1))]
            },
            Check::Exact,
        ),
        row(
            "tensor_scalar: (column - data) * 0.5, the first operands swapped",
            &[Covers::Op(Opcode::TensorScalar)],
            vec![(DType::F32, eighths(20)), (DType::F32, column(21))],
            &[(DType::F32, [P, F])],
            |k| {
                let (x, c) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::F32, &[p, f]);
                let (dst, data, col) = (k.dst(r), k.v(x), k.col(c));
                let half = Src::Imm(Scalar::float(0.5));
                k.alu(
                    Opcode::TensorScalar,
                    None,
                    dst,
                    [Src::Tile(data), col, half],
                    [Alu::Subtract, Alu::Multiply],
                    0b01,
                    None,
                );
                k.store(0, r);
            },
            |x| {
                vec![elementwise(
                    &x[0],
                    &x[1].broadcast((P, F)).unwrap().to_owned(),
                    |a, c| (c - a) * 0.5,
                )]
            },
            Check::Rounded,
        ),
        row(
            "tensor_scalar masked to columns [16, 100): x * 3, the rest memset to -1",
            &[Covers::Op(Opcode::TensorScalar), Covers::Op(Opcode::Memset)],
            vec![(DType::F32, eighths(22))],
            &[(DType::F32, [P, F])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, f]);
                k.b.memset(r, Scalar::float(-1.0)).unwrap();
                // Keep 16 <= f < 100: -f + 16 - 1 < 0 and f - 100 < 0.
                let term = |coef, offset| MaskTerm {
                    axis: 1,
                    coef,
                    offset: Affine::constant(offset),
                    sym: None,
                };
                let mut terms = [term(1, -100); 4];
                terms[1] = term(-1, 15);
                let mask = k.b.mask(Mask { terms, len: 2 }).unwrap();
                let (dst, data) = (k.dst(r), k.v(x));
                let mut ins = Instr::new(
                    Opcode::TensorScalar,
                    InstrData::Alu {
                        dst,
                        src: [Src::Tile(data), Src::Imm(Scalar::float(3.0)), Src::None],
                        op: [Alu::Multiply, Alu::Bypass],
                        rev: 0,
                        acc: None,
                    },
                );
                ins.mask = Some(mask);
                k.b.push(ins).unwrap();
                k.store(0, r);
            },
            |x| {
                let mut out = x[0].mapv(|_| -1.0);
                for ((r, c), o) in out.indexed_iter_mut() {
                    if (16..100).contains(&c) {
                        *o = 3.0 * x[0][[r, c]];
                    }
                }
                vec![out]
            },
            Check::Exact,
        ),
        row(
            "scalar_tensor_tensor: (data * column) + data1",
            &[Covers::Op(Opcode::ScalarTensorTensor)],
            vec![
                (DType::F32, eighths(23)),
                (DType::F32, column(24)),
                (DType::F32, eighths(25)),
            ],
            &[(DType::F32, [P, F])],
            |k| {
                let (x, c, y) = (k.load(0), k.load(1), k.load(2));
                let r = k.sbuf(DType::F32, &[p, f]);
                let (dst, data, col, data1) = (k.dst(r), k.v(x), k.col(c), k.v(y));
                k.alu(
                    Opcode::ScalarTensorTensor,
                    None,
                    dst,
                    [Src::Tile(data), col, Src::Tile(data1)],
                    [Alu::Multiply, Alu::Add],
                    0,
                    None,
                );
                k.store(0, r);
            },
            |x| {
                let c = x[1].broadcast((P, F)).unwrap().to_owned();
                let prod = elementwise(&x[0], &c, |a, c| f64::from((a * c) as f32));
                vec![elementwise(&prod, &x[2], |a, b| a + b)]
            },
            Check::Rounded,
        ),
        row(
            "tensor_scalar_reduce: dst = data * 2, reduce_res = max per partition",
            &[Covers::Op(Opcode::TensorScalarReduce)],
            vec![(DType::F32, eighths(26))],
            &[(DType::F32, [P, F]), (DType::F32, [P, 1])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, f]);
                let red = k.sbuf(DType::F32, &[p, 1]);
                let (dst, data, view) = (k.dst(r), k.v(x), k.v(red));
                k.alu(
                    Opcode::TensorScalarReduce,
                    None,
                    dst,
                    [Src::Tile(data), Src::Imm(Scalar::float(2.0)), Src::None],
                    [Alu::Multiply, Alu::Bypass],
                    0,
                    Some(AccOut { op: Alu::Max, view }),
                );
                k.store(0, r);
                k.store(1, red);
            },
            |x| {
                let y = x[0].mapv(|v| 2.0 * v);
                let m = y.fold_axis(Axis(1), f64::NEG_INFINITY, |&a, &b| a.max(b));
                vec![y, m.insert_axis(Axis(1))]
            },
            Check::Exact,
        ),
        row(
            "tensor_tensor add of NaN, infinities, signed zeros, subnormals",
            &[Covers::Op(Opcode::TensorTensor), Covers::Alu(Alu::Add)],
            vec![(DType::F32, specials(35)), (DType::F32, specials(36))],
            &[(DType::F32, [P, F])],
            |k| {
                let (a, b) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::F32, &[p, f]);
                k.b.tensor_tensor(r, a, b, Alu::Add).unwrap();
                k.store(0, r);
            },
            |x| vec![&x[0] + &x[1]],
            Check::Rounded,
        ),
        row(
            "tensor_tensor maximum of NaN, infinities, signed zeros, subnormals",
            &[Covers::Op(Opcode::TensorTensor), Covers::Alu(Alu::Max)],
            vec![(DType::F32, specials(37)), (DType::F32, specials(38))],
            &[(DType::F32, [P, F])],
            |k| {
                let (a, b) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::F32, &[p, f]);
                k.b.tensor_tensor(r, a, b, Alu::Max).unwrap();
                k.store(0, r);
            },
            |x| {
                let max = |a: f64, b: f64| {
                    if a.is_nan() || b.is_nan() {
                        f64::NAN
                    } else {
                        a.max(b)
                    }
                };
                vec![elementwise(&x[0], &x[1], max)]
            },
            Check::Exact,
        ),
        row(
            "tensor_tensor accumulating with maximum: acc = max(acc, a + b)",
            &[Covers::Op(Opcode::TensorTensor)],
            vec![
                (DType::F32, eighths(27)),
                (DType::F32, eighths(28)),
                (DType::F32, eighths(29)),
            ],
            &[(DType::F32, [P, F])],
            |k| {
                let (a, b, acc) = (k.load(0), k.load(1), k.load(2));
                let dst = Dst {
                    view: k.v(acc),
                    write: Write::Accumulate(Alu::Max),
                };
                let (va, vb) = (k.v(a), k.v(b));
                k.alu(
                    Opcode::TensorTensor,
                    None,
                    dst,
                    [Src::Tile(va), Src::Tile(vb), Src::None],
                    [Alu::Add, Alu::Bypass],
                    0,
                    None,
                );
                k.store(0, acc);
            },
            |x| {
                let s = &x[0] + &x[1];
                vec![elementwise(&x[2], &s, f64::max)]
            },
            Check::Exact,
        ),
        row(
            "tensor_tensor add on GpSimd: exact int32, wrapping",
            &[Covers::Op(Opcode::TensorTensor), Covers::Alu(Alu::Add)],
            vec![
                (
                    DType::I32,
                    values(P, F, 30, |r| {
                        r.int(i64::from(i32::MAX) - 1000, i64::from(i32::MAX)) as f64
                    }),
                ),
                (DType::I32, values(P, F, 31, |r| r.int(0, 2000) as f64)),
            ],
            &[(DType::I32, [P, F])],
            |k| {
                let (a, b) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::I32, &[p, f]);
                let (dst, va, vb) = (k.dst(r), k.v(a), k.v(b));
                k.alu(
                    Opcode::TensorTensor,
                    Some(Engine::GpSimd),
                    dst,
                    [Src::Tile(va), Src::Tile(vb), Src::None],
                    [Alu::Add, Alu::Bypass],
                    0,
                    None,
                );
                k.store(0, r);
            },
            |x| {
                vec![elementwise(&x[0], &x[1], |a, b| {
                    f64::from((a as i32).wrapping_add(b as i32))
                })]
            },
            Check::Exact,
        ),
        row(
            "tensor_tensor right_shift of i8 shifts its own 8 bits",
            &[
                Covers::Op(Opcode::TensorTensor),
                Covers::Alu(Alu::RightShift),
            ],
            vec![
                (DType::I8, values(P, F, 32, |r| r.int(-128, 127) as f64)),
                (DType::I8, values(P, F, 33, |r| r.int(0, 9) as f64)),
            ],
            &[(DType::I8, [P, F])],
            |k| {
                let (a, b) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::I8, &[p, f]);
                k.b.tensor_tensor(r, a, b, Alu::RightShift).unwrap();
                k.store(0, r);
            },
            |x| {
                vec![elementwise(&x[0], &x[1], |a, b| {
                    let s = b as u32;
                    if s < 8 {
                        f64::from(((a as i8 as u8) >> s) as i8)
                    } else {
                        0.0
                    }
                })]
            },
            Check::Exact,
        ),
        row(
            "reciprocal",
            &[Covers::Op(Opcode::Reciprocal)],
            vec![(
                DType::F32,
                values(P, F, 34, |r| {
                    let v = r.step(-8.0, 8.0, 0.125);
                    if v == 0.0 { 3.0 } else { v }
                }),
            )],
            &[(DType::F32, [P, F])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, f]);
                let (dst, src) = (k.dst(r), k.v(x));
                k.unary(Opcode::Reciprocal, None, dst, src);
                k.store(0, r);
            },
            |x| vec![x[0].mapv(|v| 1.0 / v)],
            Check::Rounded,
        ),
    ]
}

/// Every activation function, and one activation with a scale column, a bias and a reduction.
fn activation_rows() -> Vec<Row> {
    let erf = libm::erf;
    let phi = move |x: f64| 0.5 * (1.0 + erf(x / 2f64.sqrt()));
    let density = |x: f64| (-x * x / 2.0).exp() / (2.0 * core::f64::consts::PI).sqrt();
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    let softplus = |x: f64| x.exp().ln_1p();
    let sign = |x: f64| if x == 0.0 { 0.0 } else { x.signum() };
    let approx = Check::Within(2e-5);
    type Def = Box<dyn Fn(f64) -> f64>;
    type Draw = fn(&mut Rng) -> f64;
    // Inputs on a grid of multiples of 2^-3 (2^-4, 2^-6 where the range is narrow), inside
    // each function's valid range.
    let wide: Draw = |r| r.step(-8.0, 8.0, 0.125);
    let narrow: Draw = |r| r.step(-4.0, 4.0, 0.0625);
    let angle: Draw = |r| r.step(-1.5, 1.5, 1.0 / 64.0);
    let positive: Draw = |r| r.step(0.125, 16.0, 0.125);
    let pi = core::f64::consts::PI;
    #[rustfmt::skip]
    let cases: Vec<(ActFn, Draw, Def, Check)> = vec![
        (ActFn::Identity, wide, Box::new(|x| x), Check::Exact),
        (ActFn::Exp, wide, Box::new(f64::exp), approx),
        (ActFn::Log, positive, Box::new(f64::ln), approx),
        (ActFn::Tanh, narrow, Box::new(f64::tanh), approx),
        (ActFn::Sqrt, positive, Box::new(f64::sqrt), Check::Rounded),
        (ActFn::Rsqrt, positive, Box::new(|x| 1.0 / x.sqrt()), approx),
        (ActFn::Reciprocal, positive, Box::new(|x| 1.0 / x), approx),
        (ActFn::Square, wide, Box::new(|x| x * x), Check::Exact),
        (ActFn::Relu, wide, Box::new(|x| x.max(0.0)), Check::Exact),
        (ActFn::Gelu, narrow, Box::new(move |x| x * phi(x)), approx),
        (ActFn::GeluDx, narrow, Box::new(move |x| phi(x) + x * density(x)), approx),
        (ActFn::GeluApproxTanh, narrow, Box::new(move |x| {
            0.5 * x * (1.0 + ((2.0 / pi).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        }), approx),
        (ActFn::GeluApproxSigmoid, narrow, Box::new(move |x| x * sigmoid(1.702 * x)), approx),
        (ActFn::Sigmoid, wide, Box::new(sigmoid), approx),
        (ActFn::Silu, wide, Box::new(move |x| x * sigmoid(x)), approx),
        (ActFn::SiluDx, wide, Box::new(move |x| sigmoid(x) * (1.0 + x * (1.0 - sigmoid(x)))), approx),
        (ActFn::Softplus, wide, Box::new(softplus), approx),
        (ActFn::Mish, wide, Box::new(move |x| x * softplus(x).tanh()), approx),
        (ActFn::Erf, narrow, Box::new(erf), approx),
        (ActFn::ErfDx, narrow, Box::new(move |x| 2.0 / pi.sqrt() * (-x * x).exp()), approx),
        (ActFn::Sin, |r| r.step(-3.0, 3.0, 1.0 / 64.0), Box::new(f64::sin), approx),
        (ActFn::Cos, |r| r.step(-3.0, 3.0, 1.0 / 64.0), Box::new(f64::cos), approx),
        (ActFn::Tan, angle, Box::new(f64::tan), approx),
        (ActFn::Arctan, angle, Box::new(f64::atan), approx),
        (ActFn::Abs, wide, Box::new(f64::abs), Check::Exact),
        (ActFn::Sign, wide, Box::new(sign), Check::Exact),
        (ActFn::Floor, wide, Box::new(f64::floor), Check::Exact),
        (ActFn::Ceil, wide, Box::new(f64::ceil), Check::Exact),
        (ActFn::Trunc, wide, Box::new(f64::trunc), Check::Exact),
    ];
    let mut rows: Vec<Row> = cases
        .into_iter()
        .enumerate()
        .map(|(n, (func, draw, def, check))| {
            row(
                format!("activation {func}"),
                &[Covers::Op(Opcode::Activation), Covers::Act(func)],
                vec![(DType::F32, values(P, F, 300 + n as u64, draw))],
                &[(DType::F32, [P, F])],
                move |k| {
                    let x = k.load(0);
                    let r = k.sbuf(DType::F32, &[P as u32, F as u32]);
                    let one = Operand::Imm(Scalar::float(1.0));
                    k.b.activation(r, func, x, one, Operand::None).unwrap();
                    k.store(0, r);
                },
                move |x| vec![x[0].mapv(&def)],
                check,
            )
        })
        .collect();
    rows.push(row(
        "activation exp(data * scale + bias), reduce_res = sum",
        &[Covers::Op(Opcode::Activation), Covers::Act(ActFn::Exp)],
        vec![
            (DType::F32, values(P, F, 40, |r| r.step(-2.0, 2.0, 0.125))),
            (DType::F32, values(P, 1, 41, |r| r.step(-1.0, 1.0, 0.25))),
            (DType::F32, values(P, 1, 42, |r| r.step(-1.0, 1.0, 0.25))),
        ],
        &[(DType::F32, [P, F]), (DType::F32, [P, 1])],
        |k| {
            let (x, s, b) = (k.load(0), k.load(1), k.load(2));
            let r = k.sbuf(DType::F32, &[P as u32, F as u32]);
            let red = k.sbuf(DType::F32, &[P as u32, 1]);
            let (dst, src, scale, bias, view) = (k.dst(r), k.v(x), k.col(s), k.col(b), k.v(red));
            let data = InstrData::Act {
                dst,
                src,
                func: ActFn::Exp,
                scale,
                bias,
                acc: Some(AccOut { op: Alu::Add, view }),
            };
            k.push(Opcode::Activation, None, data);
            k.store(0, r);
            k.store(1, red);
        },
        |x| {
            let y = Array2::from_shape_fn((P, F), |(p, f)| {
                (x[0][[p, f]] * x[1][[p, 0]] + x[2][[p, 0]]).exp()
            });
            let s = y.sum_axis(Axis(1)).insert_axis(Axis(1));
            vec![y, s]
        },
        Check::Within(2e-5),
    ));
    rows
}

/// `tensor_reduce` over one or two free axes, negated, of integers, accumulated;
/// `tensor_tensor_scan`; `bn_stats`, `bn_aggr`.
fn reduce_rows() -> Vec<Row> {
    let p = P as u32;
    // Eight `bn_stats` groups `[count, mean, m2]` per partition: whole counts from 2 to 9.
    let raw = values(P, 24, 62, |r| r.step(1.0, 8.0, 0.25));
    let groups = Array2::from_shape_fn((P, 24), |(p, j)| {
        let v = raw[[p, j]];
        if j % 3 == 0 { v.floor() + 1.0 } else { v }
    });
    let small = |seed, f| values(P, f, seed, |r| r.step(-8.0, 8.0, 0.25));
    let reduce = |dt: DType, op: Alu| {
        move |k: &mut Kb| {
            let x = k.load(0);
            let r = k.sbuf(dt, &[P as u32, 1]);
            let (dst, src) = (k.dst(r), k.v(x));
            let data = InstrData::Reduce {
                dst,
                src,
                op,
                axes: 1,
                negate: false,
            };
            k.push(Opcode::TensorReduce, None, data);
            k.store(0, r);
        }
    };
    vec![
        row(
            "tensor_reduce add of positive values of mixed magnitudes (the order shows in the bits)",
            &[Covers::Op(Opcode::TensorReduce)],
            vec![(
                DType::F32,
                values(P, 777, 49, |r| {
                    r.int(1, 1 << 23) as f64 * 2f64.powi(r.int(-40, 0) as i32)
                }),
            )],
            &[(DType::F32, [P, 1])],
            reduce(DType::F32, Alu::Add),
            |x| vec![x[0].sum_axis(Axis(1)).insert_axis(Axis(1))],
            Check::Within(1e-4),
        ),
        row(
            "tensor_reduce add along the free axis",
            &[Covers::Op(Opcode::TensorReduce)],
            vec![(DType::F32, small(50, 1000))],
            &[(DType::F32, [P, 1])],
            reduce(DType::F32, Alu::Add),
            |x| vec![x[0].sum_axis(Axis(1)).insert_axis(Axis(1))],
            Check::Exact,
        ),
        row(
            "tensor_reduce maximum, negated, of [P, 12, 10] along its last axis",
            &[Covers::Op(Opcode::TensorReduce)],
            vec![(DType::F32, small(51, 120))],
            &[(DType::F32, [P, 12])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, 12]);
                let dst = Dst::overwrite(k.view(r, &[p, 12, 1], &[1, 0]));
                let src = k.view(x, &[p, 12, 10], &[10, 1]);
                let data = InstrData::Reduce {
                    dst,
                    src,
                    op: Alu::Max,
                    axes: 0b10,
                    negate: true,
                };
                k.push(Opcode::TensorReduce, None, data);
                k.store(0, r);
            },
            |x| {
                let m = Array2::from_shape_fn((P, 12), |(p, i)| {
                    (0..10)
                        .map(|j| x[0][[p, i * 10 + j]])
                        .fold(f64::NEG_INFINITY, f64::max)
                });
                vec![m.mapv(|v| -v)]
            },
            Check::Exact,
        ),
        row(
            "tensor_reduce minimum of [P, 12, 10] along its first free axis",
            &[Covers::Op(Opcode::TensorReduce)],
            vec![(DType::F32, small(52, 120))],
            &[(DType::F32, [P, 10])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, 10]);
                let dst = Dst::overwrite(k.view(r, &[p, 1, 10], &[0, 1]));
                let src = k.view(x, &[p, 12, 10], &[10, 1]);
                let data = InstrData::Reduce {
                    dst,
                    src,
                    op: Alu::Min,
                    axes: 0b01,
                    negate: false,
                };
                k.push(Opcode::TensorReduce, None, data);
                k.store(0, r);
            },
            |x| {
                vec![Array2::from_shape_fn((P, 10), |(p, j)| {
                    (0..12)
                        .map(|i| x[0][[p, i * 10 + j]])
                        .fold(f64::INFINITY, f64::min)
                })]
            },
            Check::Exact,
        ),
        row(
            "tensor_reduce bitwise_xor of i32",
            &[Covers::Op(Opcode::TensorReduce)],
            vec![(
                DType::I32,
                values(P, 100, 53, |r| {
                    r.int(i64::from(i32::MIN), i64::from(i32::MAX)) as f64
                }),
            )],
            &[(DType::I32, [P, 1])],
            reduce(DType::I32, Alu::BitwiseXor),
            |x| {
                vec![
                    x[0].map_axis(Axis(1), |r| {
                        f64::from(r.iter().fold(0i32, |a, &v| a ^ v as i32))
                    })
                    .insert_axis(Axis(1)),
                ]
            },
            Check::Exact,
        ),
        row(
            "tensor_reduce add accumulated into a column: acc += sum",
            &[Covers::Op(Opcode::TensorReduce)],
            vec![(DType::F32, small(54, 64)), (DType::F32, small(55, 1))],
            &[(DType::F32, [P, 1])],
            |k| {
                let (x, acc) = (k.load(0), k.load(1));
                let dst = Dst {
                    view: k.v(acc),
                    write: Write::Accumulate(Alu::Add),
                };
                let src = k.v(x);
                let data = InstrData::Reduce {
                    dst,
                    src,
                    op: Alu::Add,
                    axes: 1,
                    negate: false,
                };
                k.push(Opcode::TensorReduce, None, data);
                k.store(0, acc);
            },
            |x| vec![&x[1] + &x[0].sum_axis(Axis(1)).insert_axis(Axis(1))],
            Check::Exact,
        ),
        row(
            "tensor_tensor_scan (add, add): prefix sums from a column",
            &[Covers::Op(Opcode::TensorTensorScan)],
            vec![
                (DType::F32, small(56, 200)),
                (DType::F32, small(57, 200)),
                (DType::F32, small(58, 1)),
            ],
            &[(DType::F32, [P, 200])],
            |k| {
                let (a, b, init) = (k.load(0), k.load(1), k.load(2));
                let r = k.sbuf(DType::F32, &[p, 200]);
                let (dst, va, vb, vi) = (k.dst(r), k.v(a), k.v(b), k.col(init));
                let data = InstrData::Scan {
                    dst,
                    src: [va, vb],
                    init: vi,
                    op: [Alu::Add, Alu::Add],
                    rev: 0,
                };
                k.push(Opcode::TensorTensorScan, None, data);
                k.store(0, r);
            },
            |x| {
                let mut out = Array2::zeros((P, 200));
                for p in 0..P {
                    let mut r = x[2][[p, 0]];
                    for i in 0..200 {
                        r = x[0][[p, i]] + r + x[1][[p, i]];
                        out[[p, i]] = r;
                    }
                }
                vec![out]
            },
            Check::Exact,
        ),
        row(
            "tensor_tensor_scan (multiply, add) from an immediate",
            &[Covers::Op(Opcode::TensorTensorScan)],
            vec![
                (DType::F32, values(P, 64, 59, |r| r.int(-1, 1) as f64)),
                (DType::F32, small(60, 64)),
            ],
            &[(DType::F32, [P, 64])],
            |k| {
                let (a, b) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::F32, &[p, 64]);
                let (dst, va, vb) = (k.dst(r), k.v(a), k.v(b));
                let data = InstrData::Scan {
                    dst,
                    src: [va, vb],
                    init: Src::Imm(Scalar::float(1.0)),
                    op: [Alu::Multiply, Alu::Add],
                    rev: 0,
                };
                k.push(Opcode::TensorTensorScan, None, data);
                k.store(0, r);
            },
            |x| {
                let mut out = Array2::zeros((P, 64));
                for p in 0..P {
                    let mut r = 1.0;
                    for i in 0..64 {
                        r = x[0][[p, i]] * r + x[1][[p, i]];
                        out[[p, i]] = r;
                    }
                }
                vec![out]
            },
            Check::Exact,
        ),
        row(
            "tensor_tensor_scan (subtract reversed, subtract reversed): r = b - (r - a)",
            &[Covers::Op(Opcode::TensorTensorScan)],
            vec![(DType::F32, small(62, 64)), (DType::F32, small(63, 64))],
            &[(DType::F32, [P, 64])],
            |k| {
                let (a, b) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::F32, &[p, 64]);
                let (dst, va, vb) = (k.dst(r), k.v(a), k.v(b));
                let data = InstrData::Scan {
                    dst,
                    src: [va, vb],
                    init: Src::Imm(Scalar::float(0.25)),
                    op: [Alu::Subtract, Alu::Subtract],
                    rev: 3,
                };
                k.push(Opcode::TensorTensorScan, None, data);
                k.store(0, r);
            },
            |x| {
                let mut out = Array2::zeros((P, 64));
                for p in 0..P {
                    let mut r: f64 = 0.25;
                    for i in 0..64 {
                        // Each step rounded to f32, as the engine computes in fp32.
                        let t = f64::from((r - x[0][[p, i]]) as f32);
                        r = f64::from((x[1][[p, i]] - t) as f32);
                        out[[p, i]] = r;
                    }
                }
                vec![out]
            },
            Check::Exact,
        ),
        row(
            "bn_stats of [P, 301]",
            &[Covers::Op(Opcode::BnStats)],
            vec![(DType::F32, small(61, 301))],
            &[(DType::F32, [P, 6])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, 6]);
                let (dst, src) = (k.dst(r), k.v(x));
                k.unary(Opcode::BnStats, None, dst, src);
                k.store(0, r);
            },
            |x| {
                let stats = |v: Vec<f64>| {
                    let n = v.len() as f64;
                    let mean = v.iter().sum::<f64>() / n;
                    let m2 = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>();
                    [n, mean, m2]
                };
                vec![Array2::from_shape_fn((P, 6), |(p, j)| {
                    let group: Vec<f64> = (j / 3..301).step_by(2).map(|i| x[0][[p, i]]).collect();
                    stats(group)[j % 3]
                })]
            },
            Check::Within(1e-5),
        ),
        row(
            "bn_aggr of four groups",
            &[Covers::Op(Opcode::BnAggr)],
            vec![(DType::F32, groups)],
            &[(DType::F32, [P, 2])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, 2]);
                let (dst, src) = (k.dst(r), k.v(x));
                k.unary(Opcode::BnAggr, None, dst, src);
                k.store(0, r);
            },
            |x| {
                vec![Array2::from_shape_fn((P, 2), |(p, j)| {
                    let (mut n, mut mean, mut m2) = (0.0, 0.0, 0.0);
                    for g in 0..8 {
                        let (nb, mb, m2b) =
                            (x[0][[p, 3 * g]], x[0][[p, 3 * g + 1]], x[0][[p, 3 * g + 2]]);
                        let total = n + nb;
                        let delta = mb - mean;
                        mean += delta * nb / total;
                        m2 += m2b + delta * delta * n * nb / total;
                        n = total;
                    }
                    if j == 0 { mean } else { m2 / n }
                })]
            },
            Check::Within(1e-5),
        ),
    ]
}

/// `iota`, `affine_select` and `select`.
fn select_rows() -> Vec<Row> {
    let p = P as u32;
    let f = F as u32;
    let expr = AxisIndex {
        start: Affine::constant(-70),
        grid: [3, -2, 0, 0, 0],
    };
    let iota = move |dt: DType| {
        move |k: &mut Kb| {
            let r = k.sbuf(dt, &[p, f]);
            k.b.iota(r, expr).unwrap();
            k.store(0, r);
        }
    };
    let value = |p: usize, c: usize| -70.0 + 3.0 * p as f64 - 2.0 * c as f64;
    let none: Vec<(DType, Array2<f64>)> = Vec::new();
    vec![
        row(
            "iota into int32",
            &[Covers::Op(Opcode::Iota)],
            none.clone(),
            &[(DType::I32, [P, F])],
            iota(DType::I32),
            move |_| vec![Array2::from_shape_fn((P, F), |(p, c)| value(p, c))],
            Check::Exact,
        ),
        row(
            "iota into u8 (the low bits)",
            &[Covers::Op(Opcode::Iota)],
            none.clone(),
            &[(DType::U8, [P, F])],
            iota(DType::U8),
            move |_| {
                vec![Array2::from_shape_fn((P, F), |(p, c)| {
                    value(p, c).rem_euclid(256.0)
                })]
            },
            Check::Exact,
        ),
        row(
            "iota into f32",
            &[Covers::Op(Opcode::Iota)],
            none,
            &[(DType::F32, [P, F])],
            iota(DType::F32),
            move |_| vec![Array2::from_shape_fn((P, F), |(p, c)| value(p, c))],
            Check::Exact,
        ),
        row(
            "affine_select: keep x where 2p - c >= 0, else -9984",
            &[Covers::Op(Opcode::AffineSelect)],
            vec![(DType::F32, values(P, F, 70, |r| r.step(-8.0, 8.0, 0.125)))],
            &[(DType::F32, [P, F])],
            move |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, f]);
                let e =
                    k.b.expr(AxisIndex {
                        start: Affine::ZERO,
                        grid: [2, -1, 0, 0, 0],
                    })
                    .unwrap();
                let (dst, src) = (k.dst(r), k.v(x));
                let data = InstrData::Select {
                    dst,
                    pred: Pred::Affine {
                        expr: e,
                        cmp: Cmp::Ge,
                    },
                    on_true: Src::Tile(src),
                    on_false: Src::Imm(Scalar::float(-9984.0)),
                };
                k.push(Opcode::AffineSelect, None, data);
                k.store(0, r);
            },
            |x| {
                vec![Array2::from_shape_fn((P, F), |(p, c)| {
                    if 2 * p as i64 - c as i64 >= 0 {
                        x[0][[p, c]]
                    } else {
                        -9984.0
                    }
                })]
            },
            Check::Exact,
        ),
        row(
            "select: predicate ? on_true : 7.5",
            &[Covers::Op(Opcode::Select)],
            vec![
                (DType::U8, values(P, F, 71, |r| r.int(0, 2) as f64)),
                (DType::F32, values(P, F, 72, |r| r.step(-8.0, 8.0, 0.125))),
            ],
            &[(DType::F32, [P, F])],
            move |k| {
                let (pr, x) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::F32, &[p, f]);
                let (dst, vp, vx) = (k.dst(r), k.v(pr), k.v(x));
                let data = InstrData::Select {
                    dst,
                    pred: Pred::Tile(vp),
                    on_true: Src::Tile(vx),
                    on_false: Src::Imm(Scalar::float(7.5)),
                };
                k.push(Opcode::Select, None, data);
                k.store(0, r);
            },
            |x| {
                vec![elementwise(
                    &x[0],
                    &x[1],
                    |p, v| if p != 0.0 { v } else { 7.5 },
                )]
            },
            Check::Exact,
        ),
    ]
}

/// Destinations that accumulate (`select`, `affine_select`, `activation`, `tensor_tensor_scan`,
/// `reciprocal`), a masked reduction, and GpSimd's and the bit operations' int32 lanes.
fn accumulate_rows() -> Vec<Row> {
    let p = P as u32;
    let f = F as u32;
    let eighths = |seed| values(P, F, seed, |r| r.step(-8.0, 8.0, 0.125));
    let acc = |k: &mut Kb, t: TileId, op: Alu| Dst {
        view: k.v(t),
        write: Write::Accumulate(op),
    };
    vec![
        row(
            "select accumulating with add: acc += predicate ? x : -1",
            &[Covers::Op(Opcode::Select)],
            vec![
                (DType::F32, values(P, F, 80, |r| r.int(0, 1) as f64)),
                (DType::F32, eighths(81)),
                (DType::F32, eighths(82)),
            ],
            &[(DType::F32, [P, F])],
            move |k| {
                let (pr, x, a) = (k.load(0), k.load(1), k.load(2));
                let dst = acc(k, a, Alu::Add);
                let (vp, vx) = (k.v(pr), k.v(x));
                let data = InstrData::Select {
                    dst,
                    pred: Pred::Tile(vp),
                    on_true: Src::Tile(vx),
                    on_false: Src::Imm(Scalar::float(-1.0)),
                };
                k.push(Opcode::Select, None, data);
                k.store(0, a);
            },
            |x| {
                let sel = elementwise(&x[0], &x[1], |p, v| if p != 0.0 { v } else { -1.0 });
                vec![&x[2] + &sel]
            },
            Check::Exact,
        ),
        row(
            "affine_select accumulating with maximum",
            &[Covers::Op(Opcode::AffineSelect)],
            vec![(DType::F32, eighths(83)), (DType::F32, eighths(84))],
            &[(DType::F32, [P, F])],
            move |k| {
                let (x, a) = (k.load(0), k.load(1));
                let e =
                    k.b.expr(AxisIndex {
                        start: Affine::constant(-5),
                        grid: [0, 1, 0, 0, 0],
                    })
                    .unwrap();
                let dst = acc(k, a, Alu::Max);
                let vx = k.v(x);
                let data = InstrData::Select {
                    dst,
                    pred: Pred::Affine {
                        expr: e,
                        cmp: Cmp::Lt,
                    },
                    on_true: Src::Tile(vx),
                    on_false: Src::Imm(Scalar::float(0.0)),
                };
                k.push(Opcode::AffineSelect, None, data);
                k.store(0, a);
            },
            |x| {
                vec![Array2::from_shape_fn((P, F), |(p, c)| {
                    let v = if (c as i64) < 5 { x[0][[p, c]] } else { 0.0 };
                    x[1][[p, c]].max(v)
                })]
            },
            Check::Exact,
        ),
        row(
            "activation relu accumulating with subtract: acc -= relu(x)",
            &[Covers::Op(Opcode::Activation), Covers::Act(ActFn::Relu)],
            vec![(DType::F32, eighths(85)), (DType::F32, eighths(86))],
            &[(DType::F32, [P, F])],
            move |k| {
                let (x, a) = (k.load(0), k.load(1));
                let dst = acc(k, a, Alu::Subtract);
                let src = k.v(x);
                let data = InstrData::Act {
                    dst,
                    src,
                    func: ActFn::Relu,
                    scale: Src::Imm(Scalar::float(1.0)),
                    bias: Src::None,
                    acc: None,
                };
                k.push(Opcode::Activation, None, data);
                k.store(0, a);
            },
            |x| vec![elementwise(&x[1], &x[0], |a, v| a - v.max(0.0))],
            Check::Exact,
        ),
        row(
            "tensor_tensor_scan (maximum, add) accumulating with multiply",
            &[Covers::Op(Opcode::TensorTensorScan)],
            vec![
                (DType::F32, values(P, 48, 87, |r| r.int(-4, 4) as f64)),
                (DType::F32, values(P, 48, 88, |r| r.int(-2, 2) as f64)),
                (DType::F32, values(P, 48, 89, |r| r.int(-2, 2) as f64)),
            ],
            &[(DType::F32, [P, 48])],
            move |k| {
                let (a, b, out) = (k.load(0), k.load(1), k.load(2));
                let dst = acc(k, out, Alu::Multiply);
                let (va, vb) = (k.v(a), k.v(b));
                let data = InstrData::Scan {
                    dst,
                    src: [va, vb],
                    init: Src::Imm(Scalar::float(0.0)),
                    op: [Alu::Max, Alu::Add],
                    rev: 0,
                };
                k.push(Opcode::TensorTensorScan, None, data);
                k.store(0, out);
            },
            |x| {
                let mut out = Array2::zeros((P, 48));
                for p in 0..P {
                    let mut r = 0.0f64;
                    for i in 0..48 {
                        r = x[0][[p, i]].max(r) + x[1][[p, i]];
                        out[[p, i]] = x[2][[p, i]] * r;
                    }
                }
                vec![out]
            },
            Check::Exact,
        ),
        row(
            "reciprocal accumulating with add",
            &[Covers::Op(Opcode::Reciprocal)],
            vec![
                (
                    DType::F32,
                    values(P, F, 90, |r| 2f64.powi(r.int(-6, 6) as i32)),
                ),
                (DType::F32, eighths(91)),
            ],
            &[(DType::F32, [P, F])],
            move |k| {
                let (x, a) = (k.load(0), k.load(1));
                let dst = acc(k, a, Alu::Add);
                let src = k.v(x);
                k.unary(Opcode::Reciprocal, None, dst, src);
                k.store(0, a);
            },
            |x| vec![elementwise(&x[1], &x[0], |a, v| a + 1.0 / v)],
            Check::Rounded,
        ),
        row(
            "tensor_reduce add masked to partitions [8, 100) and columns [0, 37)",
            &[Covers::Op(Opcode::TensorReduce), Covers::Op(Opcode::Memset)],
            vec![(DType::F32, eighths(92))],
            &[(DType::F32, [P, 1])],
            move |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, 1]);
                k.b.memset(r, Scalar::float(-3.0)).unwrap();
                let term = |axis, coef, offset| MaskTerm {
                    axis,
                    coef,
                    offset: Affine::constant(offset),
                    sym: None,
                };
                // p < 100, p >= 8, c < 37.
                let terms = [
                    term(0, 1, -100),
                    term(0, -1, 7),
                    term(1, 1, -37),
                    term(1, 1, -37),
                ];
                let mask = k.b.mask(Mask { terms, len: 3 }).unwrap();
                let (dst, src) = (k.dst(r), k.v(x));
                let mut ins = Instr::new(
                    Opcode::TensorReduce,
                    InstrData::Reduce {
                        dst,
                        src,
                        op: Alu::Add,
                        axes: 1,
                        negate: false,
                    },
                );
                ins.mask = Some(mask);
                k.b.push(ins).unwrap();
                k.store(0, r);
            },
            |x| {
                vec![Array2::from_shape_fn((P, 1), |(p, _)| {
                    if (8..100).contains(&p) {
                        (0..37).map(|c| x[0][[p, c]]).sum()
                    } else {
                        -3.0
                    }
                })]
            },
            Check::Exact,
        ),
        row(
            "tensor_scalar on GpSimd with integer immediates: (x * 3) - 7 in exact int32",
            &[Covers::Op(Opcode::TensorScalar)],
            vec![(
                DType::I32,
                values(P, F, 93, |r| r.int(-(1 << 29), 1 << 29) as f64),
            )],
            &[(DType::I32, [P, F])],
            move |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::I32, &[p, f]);
                let (dst, vx) = (k.dst(r), k.v(x));
                k.alu(
                    Opcode::TensorScalar,
                    Some(Engine::GpSimd),
                    dst,
                    [
                        Src::Tile(vx),
                        Src::Imm(Scalar::Int(3)),
                        Src::Imm(Scalar::Int(7)),
                    ],
                    [Alu::Multiply, Alu::Subtract],
                    0,
                    None,
                );
                k.store(0, r);
            },
            |x| vec![x[0].mapv(|v| f64::from((v as i32).wrapping_mul(3).wrapping_sub(7)))],
            Check::Exact,
        ),
        row(
            "tensor_scalar_reduce of u16: x ^ 0x0ff0, reduce_res = bitwise_or",
            &[Covers::Op(Opcode::TensorScalarReduce)],
            vec![(DType::U16, values(P, F, 94, |r| r.int(0, 65535) as f64))],
            &[(DType::U16, [P, F]), (DType::U16, [P, 1])],
            move |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::U16, &[p, f]);
                let red = k.sbuf(DType::U16, &[p, 1]);
                let (dst, vx, view) = (k.dst(r), k.v(x), k.v(red));
                k.alu(
                    Opcode::TensorScalarReduce,
                    None,
                    dst,
                    [Src::Tile(vx), Src::Imm(Scalar::Int(0x0ff0)), Src::None],
                    [Alu::BitwiseXor, Alu::Bypass],
                    0,
                    Some(AccOut {
                        op: Alu::BitwiseOr,
                        view,
                    }),
                );
                k.store(0, r);
                k.store(1, red);
            },
            |x| {
                let y = x[0].mapv(|v| f64::from(v as u32 ^ 0x0ff0));
                let or = y.map_axis(Axis(1), |r| {
                    f64::from(r.iter().fold(0u32, |a, &v| a | v as u32))
                });
                vec![y, or.insert_axis(Axis(1))]
            },
            Check::Exact,
        ),
    ]
}

/// Every dtype: loaded into a tile of its own, copied into an f32 tile (stored as output 0),
/// copied back into a tile of the dtype (stored as output 1): both give the input's values.
fn dtype_rows() -> Vec<Row> {
    DType::ALL
        .iter()
        .enumerate()
        .map(|(n, &dt)| {
            let draw = move |r: &mut Rng| -> f64 {
                match dt {
                    DType::Bool => r.int(0, 1) as f64,
                    DType::I8 => r.int(-128, 127) as f64,
                    DType::U8 => r.int(0, 255) as f64,
                    DType::I16 => r.int(-32768, 32767) as f64,
                    DType::U16 => r.int(0, 65535) as f64,
                    DType::I32 => r.int(-(1 << 24), 1 << 24) as f64,
                    DType::U32 => r.int(0, 1 << 24) as f64,
                    // fp4's values: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
                    DType::F4E2M1Fn => ocp_value(dt, r.int(0, 15) as u32),
                    // The scale type's: powers of two from 2^-127 to 2^127.
                    DType::F8E8M0Fnu => 2f64.powi(r.int(-127, 127) as i32),
                    // Three significant bits: exact in every other float format, fp8 included.
                    _ => r.int(-7, 7) as f64 * 2f64.powi(r.int(-3, 3) as i32),
                }
            };
            let x = values(P, F, 400 + n as u64, draw);
            row(
                format!("dtype {dt}: load, copy to f32 and back, store"),
                &[
                    Covers::Dt(dt),
                    Covers::Op(Opcode::Load),
                    Covers::Op(Opcode::TensorCopy),
                    Covers::Op(Opcode::Store),
                ],
                vec![(dt, x)],
                &[(DType::F32, [P, F]), (dt, [P, F])],
                move |k| {
                    let t = k.load(0);
                    let wide = k.sbuf(DType::F32, &[P as u32, F as u32]);
                    k.b.tensor_copy(wide, t).unwrap();
                    let back = k.sbuf(dt, &[P as u32, F as u32]);
                    k.b.tensor_copy(back, wide).unwrap();
                    k.store(0, wide);
                    k.store(1, back);
                },
                |x| vec![x[0].clone(), x[0].clone()],
                Check::Exact,
            )
        })
        .collect()
}

/// Stamps one test per table and [`every_row`], the union of the tables.
macro_rules! tables {
    ($($test:ident: $rows:ident,)*) => {
        $(
            #[test]
            fn $test() {
                check_rows(&$rows());
            }
        )*

        /// Every row of every table.
        fn every_row() -> Vec<Row> {
            [$($rows()),*].into_iter().flatten().collect()
        }
    };
}

/// The 8 largest of `row` in descending order: every NaN above everything, `+0` above `−0`
/// (a stable selection: among equal values the earlier first).
fn top8_of(row: &[f64]) -> Vec<f64> {
    let above = |a: f64, b: f64| {
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && !b.is_nan();
        }
        a > b || (a == b && a.is_sign_positive() && b.is_sign_negative())
    };
    let mut used = vec![false; row.len()];
    (0..8)
        .map(|_| {
            let mut best = None;
            for i in 0..row.len() {
                if !used[i] && best.is_none_or(|b: usize| above(row[i], row[b])) {
                    best = Some(i);
                }
            }
            let b = best.unwrap();
            used[b] = true;
            row[b]
        })
        .collect()
}

/// The position each of `vals` takes in `row`, visited in `order`: the first equal element
/// (same sign for zeros, NaN for NaN) no earlier value took; `u32::MAX` for none.
fn claimed(row: &[f64], vals: &[f64], order: impl Iterator<Item = usize>) -> Vec<f64> {
    let eq = |a: f64, b: f64| {
        (a.is_nan() && b.is_nan()) || (a == b && a.is_sign_negative() == b.is_sign_negative())
    };
    let mut taken = vec![false; row.len()];
    let mut out = vec![f64::from(u32::MAX); vals.len()];
    for j in order {
        if let Some(i) = (0..row.len()).find(|&i| !taken[i] && eq(row[i], vals[j])) {
            taken[i] = true;
            out[j] = i as f64;
        }
    }
    out
}

/// `max8`, `nc_find_index8`, `nc_match_replace8` and `select_reduce`.
fn top8_and_select_reduce_rows() -> Vec<Row> {
    let p = P as u32;
    let ints = values(P, 300, 91, |r| r.int(-8, 8) as f64);
    let rows_of =
        |x: &Array2<f64>| -> Vec<Vec<f64>> { x.rows().into_iter().map(|r| r.to_vec()).collect() };
    let max8 = |dt: DType| {
        move |k: &mut Kb| {
            let x = k.load(0);
            let r = k.sbuf(dt, &[p, 8]);
            k.b.max8(r, x).unwrap();
            k.store(0, r);
        }
    };
    vec![
        row(
            "max8 of [P, 300] with ties",
            &[Covers::Op(Opcode::Max8)],
            vec![(DType::F32, ints.clone())],
            &[(DType::F32, [P, 8])],
            max8(DType::F32),
            |x| {
                let r = rows_of(&x[0]);
                vec![Array2::from_shape_fn((P, 8), |(p, j)| top8_of(&r[p])[j])]
            },
            Check::Exact,
        ),
        row(
            // Rows long enough for the engines to skip the elements below a key 8 of them reach
            // (`cpu::search::eighth_key_floor`): many elements tie with that key.
            "max8 of [P, 2048] with ties at the 8th key",
            &[Covers::Op(Opcode::Max8)],
            vec![(DType::F32, values(P, 2048, 93, |r| r.int(-40, 40) as f64))],
            &[(DType::F32, [P, 8])],
            max8(DType::F32),
            |x| {
                let r = rows_of(&x[0]);
                vec![Array2::from_shape_fn((P, 8), |(p, j)| top8_of(&r[p])[j])]
            },
            Check::Exact,
        ),
        row(
            "max8 of specials, into bf16",
            &[Covers::Op(Opcode::Max8)],
            vec![(DType::F32, specials(92))],
            &[(DType::Bf16, [P, 8])],
            max8(DType::Bf16),
            |x| {
                let r = rows_of(&x[0]);
                vec![Array2::from_shape_fn((P, 8), |(p, j)| {
                    bf16_of(top8_of(&r[p])[j])
                })]
            },
            Check::Exact,
        ),
        row(
            "max8 of int32 and of bf16",
            &[Covers::Op(Opcode::Max8)],
            vec![
                (DType::I32, values(P, 40, 97, |r| r.int(-1000, 1000) as f64)),
                (DType::Bf16, values(P, 24, 98, |r| r.step(-8.0, 8.0, 0.125))),
            ],
            &[(DType::I32, [P, 8]), (DType::Bf16, [P, 8])],
            |k| {
                let (a, b) = (k.load(0), k.load(1));
                let (ra, rb) = (k.sbuf(DType::I32, &[p, 8]), k.sbuf(DType::Bf16, &[p, 8]));
                k.b.max8(ra, a).unwrap();
                k.b.max8(rb, b).unwrap();
                k.store(0, ra);
                k.store(1, rb);
            },
            |x| {
                let (a, b) = (rows_of(&x[0]), rows_of(&x[1]));
                vec![
                    Array2::from_shape_fn((P, 8), |(p, j)| top8_of(&a[p])[j]),
                    Array2::from_shape_fn((P, 8), |(p, j)| top8_of(&b[p])[j]),
                ]
            },
            Check::Exact,
        ),
        row(
            "nc_match_replace8 of bf16 data, the others copied",
            &[Covers::Op(Opcode::MatchReplace8)],
            vec![
                (DType::Bf16, values(P, 64, 99, |r| r.step(-4.0, 4.0, 0.25))),
                (DType::Bf16, values(P, 8, 100, |r| r.step(-4.0, 4.0, 0.25))),
            ],
            &[(DType::Bf16, [P, 64])],
            |k| {
                let (x, v) = (k.load(0), k.load(1));
                let r = k.sbuf(DType::Bf16, &[p, 64]);
                k.b.nc_match_replace8(r, x, v, Scalar::float(100.0), None)
                    .unwrap();
                k.store(0, r);
            },
            |x| {
                let (r, v) = (rows_of(&x[0]), rows_of(&x[1]));
                let mut out = x[0].clone();
                for p in 0..P {
                    for i in claimed(&r[p], &v[p], (0..8).rev()) {
                        if i != f64::from(u32::MAX) {
                            out[[p, i as usize]] = 100.0;
                        }
                    }
                }
                vec![out]
            },
            Check::Exact,
        ),
        row(
            "nc_find_index8 of max8's values, uint32 and uint16",
            &[Covers::Op(Opcode::FindIndex8)],
            vec![(DType::F32, ints.clone())],
            &[(DType::U32, [P, 8]), (DType::U16, [P, 8])],
            |k| {
                let x = k.load(0);
                let top = k.sbuf(DType::F32, &[p, 8]);
                k.b.max8(top, x).unwrap();
                let i32_ = k.sbuf(DType::U32, &[p, 8]);
                k.b.nc_find_index8(i32_, x, top).unwrap();
                let i16_ = k.sbuf(DType::U16, &[p, 8]);
                k.b.nc_find_index8(i16_, x, top).unwrap();
                k.store(0, i32_);
                k.store(1, i16_);
            },
            |x| {
                let r = rows_of(&x[0]);
                let idx = Array2::from_shape_fn((P, 8), |(p, j)| {
                    claimed(&r[p], &top8_of(&r[p]), 0..8)[j]
                });
                vec![idx.clone(), idx]
            },
            Check::Exact,
        ),
        row(
            "nc_match_replace8 of given values (duplicates, absent ones), dst_idx",
            &[Covers::Op(Opcode::MatchReplace8)],
            vec![
                (DType::F32, ints.clone()),
                (DType::F32, values(P, 8, 93, |r| r.int(-9, 9) as f64)),
            ],
            &[(DType::F32, [P, 300]), (DType::U32, [P, 8])],
            |k| {
                let x = k.load(0);
                let v = k.load(1);
                let r = k.sbuf(DType::F32, &[p, 300]);
                let idx = k.sbuf(DType::U32, &[p, 8]);
                k.b.nc_match_replace8(r, x, v, Scalar::float(-0.5), Some(idx))
                    .unwrap();
                k.store(0, r);
                k.store(1, idx);
            },
            |x| {
                let (r, v) = (rows_of(&x[0]), rows_of(&x[1]));
                let mut out = x[0].clone();
                let mut idx = Array2::zeros((P, 8));
                for p in 0..P {
                    let at = claimed(&r[p], &v[p], (0..8).rev());
                    for (j, &i) in at.iter().enumerate() {
                        idx[[p, j]] = i;
                        if i != f64::from(u32::MAX) {
                            out[[p, i as usize]] = -0.5;
                        }
                    }
                }
                vec![out, idx]
            },
            Check::Exact,
        ),
        row(
            "nc_match_replace8 in place of max8's values (the NKI Library's top-k fold)",
            &[Covers::Op(Opcode::MatchReplace8)],
            vec![(DType::F32, ints.clone())],
            &[(DType::F32, [P, 300]), (DType::F32, [P, 8])],
            |k| {
                let x = k.load(0);
                let top = k.sbuf(DType::F32, &[p, 8]);
                k.b.max8(top, x).unwrap();
                k.b.nc_match_replace8(x, x, top, Scalar::float(-1e30), None)
                    .unwrap();
                k.store(0, x);
                k.store(1, top);
            },
            |x| {
                let r = rows_of(&x[0]);
                let mut out = x[0].clone();
                let top = Array2::from_shape_fn((P, 8), |(p, j)| top8_of(&r[p])[j]);
                for p in 0..P {
                    for i in claimed(&r[p], &top8_of(&r[p]), (0..8).rev()) {
                        if i != f64::from(u32::MAX) {
                            out[[p, i as usize]] = f64::from(-1e30f32);
                        }
                    }
                }
                vec![out, top]
            },
            Check::Exact,
        ),
        row(
            "select_reduce, immediate and reversed column, maximum into reduce_res",
            &[Covers::Op(Opcode::SelectReduce)],
            vec![
                (DType::F32, values(P, 64, 94, |r| r.step(-8.0, 8.0, 0.25))),
                (DType::U8, values(P, 64, 95, |r| r.int(0, 2) as f64)),
                (DType::F32, values(P, 1, 96, |r| r.step(-4.0, 4.0, 0.5))),
            ],
            &[
                (DType::F32, [P, 64]),
                (DType::F32, [P, 1]),
                (DType::Bf16, [P, 64]),
                (DType::F32, [P, 1]),
            ],
            |k| {
                let (x, pr, c) = (k.load(0), k.load(1), k.load(2));
                let (d, m) = (k.sbuf(DType::F32, &[p, 64]), k.sbuf(DType::F32, &[p, 1]));
                let imm = Operand::Imm(Scalar::float(-100.0));
                k.b.select_reduce(d, pr, x, imm, false, Some(m)).unwrap();
                let (d2, m2) = (k.sbuf(DType::Bf16, &[p, 64]), k.sbuf(DType::F32, &[p, 1]));
                k.b.select_reduce(d2, pr, x, Operand::Column(c), true, Some(m2))
                    .unwrap();
                k.store(0, d);
                k.store(1, m);
                k.store(2, d2);
                k.store(3, m2);
            },
            |x| {
                let pick = |reverse: bool, other: &dyn Fn(usize) -> f64| {
                    Array2::from_shape_fn((P, 64), |(p, f)| {
                        if (x[1][[p, f]] != 0.0) != reverse {
                            x[0][[p, f]]
                        } else {
                            other(p)
                        }
                    })
                };
                let a = pick(false, &|_| -100.0);
                let b = pick(true, &|p| x[2][[p, 0]]);
                let max = |m: &Array2<f64>| {
                    Array2::from_shape_fn((P, 1), |(p, _)| {
                        m.row(p).iter().copied().fold(f64::NEG_INFINITY, f64::max)
                    })
                };
                let (ma, mb) = (max(&a), max(&b));
                vec![a, ma, b.mapv(bf16_of), mb]
            },
            Check::Exact,
        ),
    ]
}

tables! {
    loops: loop_rows,
    dma: dma_rows,
    tensor_engine: tensor_engine_rows,
    copies_and_memset: copy_rows,
    alu_operations: alu_rows,
    alu_formats: alu_format_rows,
    activations: activation_rows,
    reductions_and_scans: reduce_rows,
    iota_and_selects: select_rows,
    accumulation_masks_and_int_lanes: accumulate_rows,
    dtypes: dtype_rows,
    top8_searches_and_select_reduce: top8_and_select_reduce_rows,
    indirect_dma: indirect_rows,
    scalar_offset_dma: scalar_offset_rows,
    gather: gather_rows,
    dynamic_copy: dynamic_copy_rows,
    random_numbers: random_rows,
    range_select: range_select_rows,
    stream_shuffle: shuffle_rows,
    local_gather: local_gather_rows,
    sequence_bounds: sequence_bounds_rows,
    tensor_scalar_cumulative: cumulative_rows,
    nonzero_with_count: nonzero_rows,
    exponential: exponential_rows,
    quantize_mx: quantize_mx_rows,
    nc_matmul_mx: matmul_mx_rows,
    activate2: activate2_rows,
    xorwow_random_numbers: xorwow_rows,
    registers_and_device_loops: register_rows,
    dma_compute: dma_compute_rows,
    topk: topk_rows,
}

/// The virtual register instructions and device loops: `register_load` of one element of
/// each integer dtype (sign- or zero-extended to 32 bits), `register_store` into int32 and the
/// low bits into int16, `register_move` of an immediate and of a register, and a
/// `dynamic_range(1, n, 2)` device loop (`n` loaded) summing its iteration register, then a
/// `while_loop` counting a register down from the loaded `n`.
fn register_rows() -> Vec<Row> {
    let ins: Vec<(DType, f64)> = vec![
        (DType::I8, -5.0),
        (DType::U8, 250.0),
        (DType::I16, -30000.0),
        (DType::U16, 65535.0),
        (DType::I32, 7.0),
        (DType::U32, 4_000_000_000.0),
    ];
    let inputs: Vec<(DType, Array2<f64>)> = ins
        .iter()
        .map(|&(d, v)| (d, Array2::from_elem((1, 1), v)))
        .collect();
    let mut outputs: Vec<(DType, [usize; 2])> = vec![(DType::I32, [1, 1]); ins.len()];
    // The loop's sum, the while loop's count, a moved immediate and register, the low bits.
    outputs.extend([
        (DType::I32, [1, 1]),
        (DType::I32, [1, 1]),
        (DType::I32, [1, 1]),
        (DType::I16, [1, 1]),
    ]);
    let n = ins.len();
    let values: Vec<f64> = ins.iter().map(|&(_, v)| v).collect();
    vec![row(
        "register_load of every integer dtype, register_store, register_move, dynamic_range and while_loop",
        &[
            Covers::Op(Opcode::RegisterLoad),
            Covers::Op(Opcode::RegisterStore),
            Covers::Op(Opcode::RegisterMove),
            Covers::Op(Opcode::LoopBegin),
            Covers::Op(Opcode::LoopEnd),
        ],
        inputs,
        &outputs,
        move |k| {
            let reg = |i: usize| RegId(u16::try_from(i).unwrap());
            for i in 0..n {
                let t = k.load(i);
                k.b.register_load(reg(i), t).unwrap();
                let o = k.sbuf(DType::I32, &[1, 1]);
                k.b.register_store(o, reg(i)).unwrap();
                k.store(i, o);
            }
            // sum of i for i in range(1, r4, 2), r4 = 7.
            let acc = k.sbuf(DType::I32, &[1, 1]);
            k.b.memset(acc, Scalar::Int(0)).unwrap();
            let var = reg(n);
            k.b.register_move(var, RegSrc::Imm(1)).unwrap();
            let kind = LoopKind::Dynamic {
                var,
                upper: reg(4),
                step: 2,
            };
            k.b.begin_loop(kind, "i", Extent::Fixed(1)).unwrap();
            let v = k.sbuf(DType::I32, &[1, 1]);
            k.b.register_store(v, var).unwrap();
            k.b.tensor_tensor(acc, acc, v, Alu::Add).unwrap();
            k.b.end_loop().unwrap();
            k.store(n, acc);
            // while r4 != 0: count += 1; r4 = r4 - 1 (through SBUF).
            let (count, one, c) = (
                k.sbuf(DType::I32, &[1, 1]),
                k.sbuf(DType::I32, &[1, 1]),
                k.sbuf(DType::I32, &[1, 1]),
            );
            k.b.memset(count, Scalar::Int(0)).unwrap();
            k.b.memset(one, Scalar::Int(1)).unwrap();
            k.b.register_store(c, reg(4)).unwrap();
            k.b.begin_loop(LoopKind::While { cond: reg(4) }, "r", Extent::Fixed(1))
                .unwrap();
            k.b.tensor_tensor(count, count, one, Alu::Add).unwrap();
            k.b.tensor_tensor(c, c, one, Alu::Subtract).unwrap();
            k.b.register_load(reg(4), c).unwrap();
            k.b.end_loop().unwrap();
            k.store(n + 1, count);
            let m = k.sbuf(DType::I32, &[1, 1]);
            k.b.register_move(reg(n + 1), RegSrc::Imm(-123)).unwrap();
            k.b.register_move(reg(n + 2), RegSrc::Reg(reg(n + 1)))
                .unwrap();
            k.b.register_store(m, reg(n + 2)).unwrap();
            k.store(n + 2, m);
            let low = k.sbuf(DType::I16, &[1, 1]);
            k.b.register_store(low, reg(5)).unwrap();
            k.store(n + 3, low);
        },
        move |_| {
            let one = |v: f64| Array2::from_elem((1, 1), v);
            // Registers hold 32-bit two's complement: 4e9 as uint32 reads back as int32.
            let mut out: Vec<Array2<f64>> = values
                .iter()
                .map(|&v| {
                    one(if v >= 2_147_483_648.0 {
                        v - 4_294_967_296.0
                    } else {
                        v
                    })
                })
                .collect();
            let upper = values[4] as i64;
            let sum: i64 = (1..upper).step_by(2).sum();
            out.push(one(sum as f64));
            out.push(one(upper as f64));
            out.push(one(-123.0));
            // The low 16 bits of 4e9 (0xEE6B2800), as int16.
            let low = (4_000_000_000u32 & 0xffff) as u16 as i16;
            out.push(one(f64::from(low)));
            out
        },
        Check::Exact,
    )]
}

/// Philox4x32-10's first output word (Salmon et al., SC 2011), written from its definition.
fn philox_word(ctr: [u32; 4], key: [u32; 2]) -> u32 {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k = [
                k[0].wrapping_add(0x9E37_79B9),
                k[1].wrapping_add(0xBB67_AE85),
            ];
        }
        let p0 = u64::from(0xD251_1F53u32) * u64::from(c[0]);
        let p1 = u64::from(0xCD9E_8D57u32) * u64::from(c[2]);
        c = [
            ((p1 >> 32) as u32) ^ c[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c[0]
}

/// The generator's uniform value of element `(p, f)` of call `call` after seed `seed` in a
/// launch of one instance, with `m` significand bits (`docs/numerics.md`, "Random numbers").
fn uniform(seed: u32, call: u32, p: usize, f: usize, m: u32) -> f64 {
    let w = philox_word([f as u32, p as u32, call, 0], [seed, 0]);
    f64::from(w >> (32 - m)) / f64::from(1u32 << m)
}

/// `random_seed`, `rand` and `dropout`.
fn random_rows() -> Vec<Row> {
    let (p, f) = (P as u32, F as u32);
    let seed = || (DType::I32, Array2::from_elem((1, 1), -5.0));
    let seed_bits = (-5i32) as u32;
    let rand = move |dt: DType| {
        move |k: &mut Kb| {
            let s = k.load(0);
            k.b.random_seed(s).unwrap();
            let r = k.sbuf(dt, &[p, f]);
            k.b.rand(r).unwrap();
            k.store(0, r);
        }
    };
    let mut rows = Vec::new();
    for (dt, m) in [
        (DType::F32, 24),
        (DType::Bf16, 8),
        (DType::F16, 11),
        (DType::F8E4M3, 4),
    ] {
        rows.push(row(
            format!("random_seed, rand into {dt}"),
            &[Covers::Op(Opcode::RandomSeed), Covers::Op(Opcode::Rand)],
            vec![seed()],
            &[(dt, [P, F])],
            rand(dt),
            move |_| {
                vec![Array2::from_shape_fn((P, F), |(p, c)| {
                    uniform(seed_bits, 0, p, c, m)
                })]
            },
            Check::Exact,
        ));
    }
    let drop = |prob: f64, column: bool, dt: DType| {
        move |k: &mut Kb| {
            let s = k.load(0);
            k.b.random_seed(s).unwrap();
            let x = k.load(1);
            // A first draw, so that the dropout is the generator's second call.
            let r = k.sbuf(DType::F32, &[p, f]);
            k.b.rand(r).unwrap();
            let prob = if column {
                let c = k.load(2);
                Operand::Column(c)
            } else {
                Operand::Imm(Scalar::float(prob as f32))
            };
            let d = k.sbuf(dt, &[p, f]);
            k.b.dropout(d, x, prob).unwrap();
            k.store(0, d);
        }
    };
    let kept = move |x: &Array2<f64>, prob: &dyn Fn(usize) -> f64| {
        Array2::from_shape_fn((P, F), |(p, c)| {
            if (uniform(seed_bits, 1, p, c, 24) as f32) < prob(p) as f32 {
                0.0
            } else {
                x[[p, c]]
            }
        })
    };
    let x = values(P, F, 91, |r| r.step(-8.0, 8.0, 0.125));
    rows.push(row(
        "dropout of f32 with prob 0.3",
        &[Covers::Op(Opcode::Dropout)],
        vec![seed(), (DType::F32, x.clone())],
        &[(DType::F32, [P, F])],
        drop(0.3, false, DType::F32),
        move |v| vec![kept(&v[1], &|_| 0.3)],
        Check::Exact,
    ));
    let column = Array2::from_shape_fn((P, 1), |(p, _)| p as f64 / P as f64);
    rows.push(row(
        "dropout of bf16 with a [P, 1] column of probabilities",
        &[Covers::Op(Opcode::Dropout)],
        vec![seed(), (DType::Bf16, x.clone()), (DType::F32, column)],
        &[(DType::Bf16, [P, F])],
        drop(0.0, true, DType::Bf16),
        move |v| vec![kept(&v[1], &|p| v[2][[p, 0]])],
        Check::Exact,
    ));
    let ints = values(P, F, 92, |r| r.step(-1000.0, 1000.0, 1.0));
    rows.push(row(
        "dropout of int32 with prob 0.5",
        &[Covers::Op(Opcode::Dropout)],
        vec![seed(), (DType::I32, ints)],
        &[(DType::I32, [P, F])],
        drop(0.5, false, DType::I32),
        move |v| vec![kept(&v[1], &|_| 0.5)],
        Check::Exact,
    ));
    rows
}

/// Every opcode, ALU operation, activation function and dtype has a row.
#[test]
fn every_opcode_alu_act_and_dtype_has_a_row() {
    let covered: Vec<Covers> = every_row().iter().flat_map(|r| r.covers.clone()).collect();
    let has = |c: Covers| covered.contains(&c);
    let mut missing: Vec<String> = Vec::new();
    missing.extend(
        Opcode::ALL
            .iter()
            .filter(|&&o| !has(Covers::Op(o)))
            .map(|o| format!("opcode {}", o.info().name)),
    );
    missing.extend(
        Alu::ALL
            .iter()
            .filter(|&&a| !has(Covers::Alu(a)))
            .map(|a| format!("alu {a}")),
    );
    missing.extend(
        ActFn::ALL
            .iter()
            .filter(|&&f| !has(Covers::Act(f)))
            .map(|f| format!("activation {f}")),
    );
    missing.extend(
        DType::ALL
            .iter()
            .filter(|&&d| !has(Covers::Dt(d)))
            .map(|d| format!("dtype {d}")),
    );
    assert!(missing.is_empty(), "no conformance row for: {missing:?}");
}

// ---- Indirect DMA ----

impl Kb {
    /// An indirect DMA (`opcode`) between the whole of tile `t` (`[P, F]`) and the rows of
    /// input or output `tensor` (`[R, F]`) named by the `[P, 1]` index tile `idx`, under `mask`.
    fn indirect(
        &mut self,
        opcode: Opcode,
        t: TileId,
        tensor: TensorId,
        idx: TileId,
        mask: Option<Mask>,
    ) {
        let shape = self.shapes[t.index() as usize];
        let (tile, index) = (self.v(t), self.v(idx));
        let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
        axes[1].grid = [0, 1, 0, 0, 0];
        let hbm = self
            .b
            .access(HbmAccess {
                tensor: tensor.index(),
                reshape: None,
                rank: 2,
                shape,
                axes,
            })
            .unwrap();
        let data = InstrData::Indirect {
            tile,
            hbm,
            index,
            axis: 0,
            mode: IndirectMode::Rows,
        };
        let mut i = Instr::new(opcode, data);
        i.mask = mask.map(|m| self.b.mask(m).unwrap());
        self.b.push(i).unwrap();
    }

    /// A DMA (`opcode`) between the whole of tile `t` (`[P, F]`) and the first `P` rows of
    /// input or output `tensor` (`[R, F]`) moved by `v · F` elements, `v` the one element of
    /// tile `offset` (`.ap([[F, P], [1, F]], scalar_offset = offset, indirect_dim = 0)`), `R`
    /// given as `rows`.
    fn scalar_offset(
        &mut self,
        opcode: Opcode,
        (t, offset): (TileId, TileId),
        tensor: TensorId,
        rows: u32,
    ) {
        let shape = self.shapes[t.index() as usize];
        let (tile, index) = (self.v(t), self.v(offset));
        let mut axes = [AxisIndex::constant(0); MAX_TENSOR_RANK];
        axes[0].grid = [1, 0, 0, 0, 0];
        axes[1].grid = [0, 1, 0, 0, 0];
        let hbm = self
            .b
            .access(HbmAccess {
                tensor: tensor.index(),
                reshape: None,
                rank: 2,
                shape,
                axes,
            })
            .unwrap();
        let data = InstrData::Indirect {
            tile,
            hbm,
            index,
            axis: 0,
            mode: IndirectMode::Scalar {
                scale: shape.free_elems() as u32,
                bound: rows,
            },
        };
        self.b.push(Instr::new(opcode, data)).unwrap();
    }
}

/// `p < n` on the grid's partitions.
fn partitions_below(n: i64) -> Mask {
    let term = MaskTerm {
        axis: 0,
        coef: 1,
        offset: Affine::constant(-n),
        sym: None,
    };
    Mask {
        terms: [term; 4],
        len: 1,
    }
}

/// Indirect DMA: a gather with repeated rows (int32 and uint32 indices, a cast, a mask on the
/// partitions), a scatter of a permutation with a cast, and `atomic_rmw` with repeated rows in
/// f32 and bf16; expectations by plain loops over the indices, in partition order.
fn indirect_rows() -> Vec<Row> {
    const R: usize = 40;
    let data = values(R, F, 20, |r| r.int(-(1 << 23), 1 << 23) as f64 / 1024.0);
    let idx = values(P, 1, 21, |r| r.int(0, R as i64 - 1) as f64);
    let gather = |x: &[Array2<f64>], keep: usize, round: fn(f64) -> f64| {
        Array2::from_shape_fn((P, F), |(k, j)| {
            if k < keep {
                round(x[0][[x[1][[k, 0]] as usize, j]])
            } else {
                0.0
            }
        })
    };
    let mut rows = Vec::new();
    for (dt, name) in [(DType::I32, "int32"), (DType::U32, "uint32")] {
        rows.push(row(
            format!("indirect_load: {R} f32 rows gathered into a bf16 tile by {name} indices, masked to p < 100"),
            &[Covers::Op(Opcode::IndirectLoad)],
            vec![(DType::F32, data.clone()), (dt, idx.clone())],
            &[(DType::F32, [P, F])],
            |k| {
                let t = k.sbuf(DType::Bf16, &[P as u32, F as u32]);
                k.b.memset(t, Scalar::float(0.0)).unwrap();
                let ix = k.load(1);
                let x = k.inputs[0].0;
                k.indirect(Opcode::IndirectLoad, t, x, ix, Some(partitions_below(100)));
                k.store(0, t);
            },
            move |x| vec![gather(x, 100, bf16_of)],
            Check::Exact,
        ));
    }
    // A permutation of the rows of a [64, F] output.
    let perm = Array2::from_shape_fn((64, 1), |(k, _)| ((k * 23 + 5) % 64) as f64);
    let x = values(64, F, 22, |r| r.int(-(1 << 23), 1 << 23) as f64 / 1024.0);
    rows.push(row(
        "indirect_store: an f32 tile scattered to a bf16 output by a permutation",
        &[Covers::Op(Opcode::IndirectStore)],
        vec![(DType::F32, x), (DType::I32, perm)],
        &[(DType::Bf16, [64, F])],
        |k| {
            let t = k.load(0);
            let ix = k.load(1);
            let out = k.outputs[0];
            k.indirect(Opcode::IndirectStore, t, out, ix, None);
        },
        |x| {
            let mut out = Array2::<f64>::zeros((64, F));
            for k in 0..64 {
                let r = x[1][[k, 0]] as usize;
                for j in 0..F {
                    out[[r, j]] = bf16_of(x[0][[k, j]]);
                }
            }
            vec![out]
        },
        Check::Exact,
    ));
    // atomic_rmw: quarters, so that every partial sum is exact in f32 (and, below 2^7 in
    // magnitude with two fractional bits, in bf16).
    const N: usize = 16;
    let init = values(N, F, 23, |r| r.step(-4.0, 4.0, 0.25));
    let add = values(P, F, 24, |r| r.step(-1.0, 1.0, 0.25));
    let ridx = values(P, 1, 25, |r| r.int(0, N as i64 - 1) as f64);
    for dt in [DType::F32, DType::Bf16] {
        rows.push(row(
            format!("atomic_rmw: {P} rows of adds into {N} {dt} rows, repeated indices accumulate"),
            &[Covers::Op(Opcode::AtomicRmw)],
            vec![
                (DType::F32, init.clone()),
                (DType::F32, add.clone()),
                (DType::I32, ridx.clone()),
            ],
            &[(dt, [N, F])],
            |k| {
                let t0 = k.load(0);
                k.store(0, t0);
                let v = k.load(1);
                let ix = k.load(2);
                let out = k.outputs[0];
                k.indirect(Opcode::AtomicRmw, v, out, ix, None);
            },
            |x| {
                let mut out = x[0].clone();
                for k in 0..P {
                    let r = x[2][[k, 0]] as usize;
                    for j in 0..F {
                        out[[r, j]] += x[1][[k, j]];
                    }
                }
                vec![out]
            },
            Check::Exact,
        ));
    }
    rows
}

/// A DMA through `.ap(..., scalar_offset = v, indirect_dim = 0)`: 16 rows of a 40-row f32
/// tensor from row `v` into a bf16 tile (int32 and uint32 offsets), and a bf16 tile stored
/// into 16 rows of a zeroed 40-row output from row `v`; expectations by plain loops.
fn scalar_offset_rows() -> Vec<Row> {
    const R: usize = 40;
    const N: usize = 16;
    let data = values(R, F, 26, |r| r.int(-(1 << 23), 1 << 23) as f64 / 1024.0);
    let at = Array2::from_elem((1, 1), 19.0);
    let mut rows = Vec::new();
    for (dt, name) in [(DType::I32, "int32"), (DType::U32, "uint32")] {
        rows.push(row(
            format!("indirect_load with a scalar offset: {N} of {R} f32 rows from the {name} offset's row, into bf16"),
            &[Covers::Op(Opcode::IndirectLoad)],
            vec![(DType::F32, data.clone()), (dt, at.clone())],
            &[(DType::F32, [N, F])],
            |k| {
                let t = k.sbuf(DType::Bf16, &[N as u32, F as u32]);
                let off = k.load(1);
                let x = k.inputs[0].0;
                k.scalar_offset(Opcode::IndirectLoad, (t, off), x, R as u32);
                k.store(0, t);
            },
            |x| {
                let v = x[1][[0, 0]] as usize;
                vec![Array2::from_shape_fn((N, F), |(p, j)| bf16_of(x[0][[v + p, j]]))]
            },
            Check::Exact,
        ));
    }
    let x = values(N, F, 27, |r| r.int(-(1 << 23), 1 << 23) as f64 / 1024.0);
    rows.push(row(
        format!("indirect_store with a scalar offset: an f32 tile into {N} rows of a {R}-row bf16 output from the offset's row"),
        &[Covers::Op(Opcode::IndirectStore)],
        vec![(DType::F32, x), (DType::I32, at.clone())],
        &[(DType::Bf16, [R, F])],
        |k| {
            let z = k.sbuf(DType::F32, &[R as u32, F as u32]);
            k.b.memset(z, Scalar::float(0.0)).unwrap();
            k.store(0, z);
            let t = k.load(0);
            let off = k.load(1);
            let out = k.outputs[0];
            k.scalar_offset(Opcode::IndirectStore, (t, off), out, R as u32);
        },
        |x| {
            let v = x[1][[0, 0]] as usize;
            let mut out = Array2::<f64>::zeros((R, F));
            for p in 0..N {
                for j in 0..F {
                    out[[v + p, j]] = bf16_of(x[0][[p, j]]);
                }
            }
            vec![out]
        },
        Check::Exact,
    ));
    rows
}

/// `gather_flattened`: a `[P, 4, 40]` tile gathered by `[P, 2, 3]` uint32 positions into bf16,
/// masked to `p < 100` over a zeroed result; and int32 positions in one dtype (the bits kept).
fn gather_rows() -> Vec<Row> {
    let data = values(P, F, 30, |r| r.int(-(1 << 23), 1 << 23) as f64 / 1024.0);
    let pos = values(P, 6, 31, |r| r.int(0, F as i64 - 1) as f64);
    let take = |x: &[Array2<f64>], keep: usize, round: fn(f64) -> f64| {
        Array2::from_shape_fn((P, 6), |(p, j)| {
            if p < keep {
                round(x[0][[p, x[1][[p, j]] as usize]])
            } else {
                0.0
            }
        })
    };
    let mut rows = Vec::new();
    for (dt, out, keep) in [(DType::U32, DType::Bf16, 100), (DType::I32, DType::F32, P)] {
        let round: fn(f64) -> f64 = if out == DType::Bf16 { bf16_of } else { |v| v };
        rows.push(row(
            format!(
                "gather_flattened: [{P}, 4, 40] {out} by [{P}, 2, 3] {dt} positions, p < {keep}"
            ),
            &[Covers::Op(Opcode::GatherFlattened)],
            vec![(DType::F32, data.clone()), (dt, pos.clone())],
            &[(out, [P, 6])],
            move |k| {
                let x = k.load(0);
                let ix = k.load(1);
                let r = k.sbuf(out, &[P as u32, 6]);
                k.b.memset(r, Scalar::float(0.0)).unwrap();
                let data = k.view(x, &[P as u32, 4, 40], &[40, 1]);
                let indices = k.view(ix, &[P as u32, 2, 3], &[3, 1]);
                let dst = k.view(r, &[P as u32, 2, 3], &[3, 1]);
                let mut i = Instr::new(
                    Opcode::GatherFlattened,
                    InstrData::Gather {
                        dst: Dst::overwrite(dst),
                        data,
                        indices,
                    },
                );
                if keep < P {
                    i.mask = Some(k.b.mask(partitions_below(keep as i64)).unwrap());
                }
                k.b.push(i).unwrap();
                k.store(0, r);
            },
            move |x| vec![take(x, keep, round)],
            Check::Exact,
        ));
    }
    // `nc_n_gather`: the same gather as NKI 0.6's ISA call, uint32 positions, the data's dtype.
    for data_dt in [DType::F32, DType::Bf16] {
        let round: fn(f64) -> f64 = if data_dt == DType::Bf16 {
            bf16_of
        } else {
            |v| v
        };
        let data = data.mapv(round);
        rows.push(row(
            format!("nc_n_gather: [{P}, 4, 40] {data_dt} by [{P}, 2, 3] u32 positions"),
            &[Covers::Op(Opcode::NcNGather)],
            vec![(data_dt, data), (DType::U32, pos.clone())],
            &[(data_dt, [P, 6])],
            move |k| {
                let x = k.load(0);
                let ix = k.load(1);
                let r = k.sbuf(data_dt, &[P as u32, 6]);
                let data = k.view(x, &[P as u32, 4, 40], &[40, 1]);
                let indices = k.view(ix, &[P as u32, 2, 3], &[3, 1]);
                let dst = k.view(r, &[P as u32, 2, 3], &[3, 1]);
                let i = Instr::new(
                    Opcode::NcNGather,
                    InstrData::Gather {
                        dst: Dst::overwrite(dst),
                        data,
                        indices,
                    },
                );
                k.b.push(i).unwrap();
                k.store(0, r);
            },
            move |x| vec![take(x, P, |v| v)],
            Check::Exact,
        ));
    }
    rows
}

/// `tensor_copy_dynamic_src`: eight columns of a `[P, F]` tile at a run-time offset, on Vector
/// (the bits kept), and every other column counted in pairs on GpSimd into bf16;
/// `tensor_copy_dynamic_dst`: eight columns written at a run-time offset.
fn dynamic_copy_rows() -> Vec<Row> {
    let x = values(P, F, 40, |r| r.int(-(1 << 23), 1 << 23) as f64 / 1024.0);
    let mut rows = Vec::new();
    // (engine, dtype, offset, the source's column stride, columns per offset unit)
    for (engine, out, off, step) in [
        (Engine::Vector, DType::F32, 37usize, 1usize),
        (Engine::GpSimd, DType::Bf16, 10, 2),
    ] {
        let round: fn(f64) -> f64 = if out == DType::Bf16 { bf16_of } else { |v| v };
        let offset = Array2::from_elem((1, 1), off as f64);
        rows.push(row(
            format!("tensor_copy_dynamic_src on {engine:?}: 8 columns at offset {off} (stride {step}) into {out}"),
            &[Covers::Op(Opcode::TensorCopyDynamicSrc)],
            vec![(DType::F32, x.clone()), (DType::I32, offset)],
            &[(out, [P, 8])],
            move |k| {
                let t = k.load(0);
                let o = k.load(1);
                let r = k.sbuf(out, &[P as u32, 8]);
                let src = k.view(t, &[P as u32, 8], &[step as i64]);
                let offset = k.v(o);
                let dst = k.dst(r);
                k.push(
                    Opcode::TensorCopyDynamicSrc,
                    Some(engine),
                    InstrData::DynCopy {
                        dst,
                        src,
                        offset,
                        stride: step as i32,
                    },
                );
                k.store(0, r);
            },
            move |x| {
                vec![Array2::from_shape_fn((P, 8), |(p, j)| {
                    round(x[0][[p, step * (off + j)]])
                })]
            },
            Check::Exact,
        ));
    }
    // tensor_copy_dynamic_dst: a `[P, 8]` tile into eight columns of the loaded `[P, F]` tile
    // at a run-time offset, the others kept; on Scalar through fp32, on GpSimd the bits.
    let y = values(P, 8, 41, |r| r.int(-(1 << 23), 1 << 23) as f64 / 512.0);
    for (engine, off, step) in [(Engine::Scalar, 50usize, 1usize), (Engine::GpSimd, 7, 3)] {
        let offset = Array2::from_elem((1, 1), off as f64);
        rows.push(row(
            format!(
                "tensor_copy_dynamic_dst on {engine:?}: 8 columns to offset {off} (stride {step})"
            ),
            &[Covers::Op(Opcode::TensorCopyDynamicDst)],
            vec![
                (DType::F32, x.clone()),
                (DType::F32, y.clone()),
                (DType::I32, offset),
            ],
            &[(DType::F32, [P, F])],
            move |k| {
                let t = k.load(0);
                let s = k.load(1);
                let o = k.load(2);
                let dst = Dst::overwrite(k.view(t, &[P as u32, 8], &[step as i64]));
                let src = k.v(s);
                let offset = k.v(o);
                k.push(
                    Opcode::TensorCopyDynamicDst,
                    Some(engine),
                    InstrData::DynCopy {
                        dst,
                        src,
                        offset,
                        stride: step as i32,
                    },
                );
                k.store(0, t);
            },
            move |x| {
                let mut out = x[0].clone();
                for p in 0..P {
                    for j in 0..8 {
                        out[[p, step * (off + j)]] = x[1][[p, j]];
                    }
                }
                vec![out]
            },
            Check::Exact,
        ));
    }
    rows
}

// ---- range_select ----

/// `range_select` (Trn2): f32 data into f32 with the maximum, into bf16 (the fill becomes
/// −inf), bf16 data; f16 and float8_e4m3 data into their own dtype (the fill −inf) with a
/// maximum into a tile of that dtype; fractional and empty per-partition ranges, a negative
/// start.
fn range_select_rows() -> Vec<Row> {
    let p = P as u32;
    let lo = values(P, 1, 201, |r| r.step(-6.0, 60.0, 0.5));
    let hi = values(P, 1, 202, |r| r.step(-6.0, 70.0, 0.5));
    // `index cmp bound` for each comparison.
    let holds = |c: Cmp, i: f64, b: f64| match c {
        Cmp::Lt => i < b,
        Cmp::Le => i <= b,
        Cmp::Gt => i > b,
        Cmp::Ge => i >= b,
        Cmp::Eq => i == b,
        Cmp::Ne => i != b,
    };
    let select = move |x: &Array2<f64>, b: &[Array2<f64>], cmp: [Cmp; 2], start: i64| {
        Array2::from_shape_fn(x.dim(), |(p, i)| {
            let index = (start + i as i64) as f64;
            if holds(cmp[0], index, b[0][[p, 0]]) && holds(cmp[1], index, b[1][[p, 0]]) {
                x[[p, i]]
            } else {
                f32::MIN as f64
            }
        })
    };
    let max = |m: &Array2<f64>| {
        Array2::from_shape_fn((m.nrows(), 1), |(p, _)| {
            m.row(p).iter().copied().fold(f64::NEG_INFINITY, f64::max)
        })
    };
    vec![row_on(
        Target::Trn2,
        "range_select: f32 with the maximum, into bf16, of bf16, f16 and float8_e4m3 data",
        &[Covers::Op(Opcode::RangeSelect)],
        vec![
            (DType::F32, values(P, 64, 203, |r| r.step(-8.0, 8.0, 0.25))),
            (DType::F32, lo),
            (DType::F32, hi),
            (
                DType::Bf16,
                values(P, 64, 204, |r| r.step(-2.0, 2.0, 0.125)),
            ),
            (DType::F16, values(P, 64, 205, |r| r.step(-2.0, 2.0, 0.125))),
            (
                DType::F8E4M3,
                values(P, 64, 206, |r| r.step(-2.0, 2.0, 0.25)),
            ),
        ],
        &[
            (DType::F32, [P, 64]),
            (DType::F32, [P, 1]),
            (DType::Bf16, [P, 64]),
            (DType::F32, [P, 64]),
            (DType::F16, [P, 64]),
            (DType::F16, [P, 1]),
            (DType::F8E4M3, [P, 64]),
        ],
        |k| {
            let (x, l, h, y) = (k.load(0), k.load(1), k.load(2), k.load(3));
            let (d, m) = (k.sbuf(DType::F32, &[p, 64]), k.sbuf(DType::F32, &[p, 1]));
            k.b.range_select(d, x, [l, h], [Cmp::Ge, Cmp::Lt], 3, Some(m))
                .unwrap();
            let d2 = k.sbuf(DType::Bf16, &[p, 64]);
            k.b.range_select(d2, x, [l, h], [Cmp::Gt, Cmp::Le], -5, None)
                .unwrap();
            let d3 = k.sbuf(DType::F32, &[p, 64]);
            k.b.range_select(d3, y, [l, h], [Cmp::Eq, Cmp::Le], 0, None)
                .unwrap();
            k.store(0, d);
            k.store(1, m);
            k.store(2, d2);
            k.store(3, d3);
            let (z, w) = (k.load(4), k.load(5));
            let (d4, m4) = (k.sbuf(DType::F16, &[p, 64]), k.sbuf(DType::F16, &[p, 1]));
            k.b.range_select(d4, z, [l, h], [Cmp::Ge, Cmp::Le], 1, Some(m4))
                .unwrap();
            let d5 = k.sbuf(DType::F8E4M3, &[p, 64]);
            k.b.range_select(d5, w, [l, h], [Cmp::Gt, Cmp::Lt], 0, None)
                .unwrap();
            k.store(4, d4);
            k.store(5, m4);
            k.store(6, d5);
        },
        move |x| {
            let b = [x[1].clone(), x[2].clone()];
            let a = select(&x[0], &b, [Cmp::Ge, Cmp::Lt], 3);
            let ma = max(&a);
            let c = select(&x[0], &b, [Cmp::Gt, Cmp::Le], -5).mapv(bf16_of);
            let e = select(&x[3], &b, [Cmp::Eq, Cmp::Le], 0);
            // fp32's lowest value overflows to −inf in the 16- and 8-bit float dtypes.
            let narrow = |v: f64| {
                if v == f32::MIN as f64 {
                    f64::NEG_INFINITY
                } else {
                    v
                }
            };
            let g = select(&x[4], &b, [Cmp::Ge, Cmp::Le], 1);
            let mg = max(&g).mapv(narrow);
            let h8 = select(&x[5], &b, [Cmp::Gt, Cmp::Lt], 0).mapv(narrow);
            vec![a, ma, c, e, g.mapv(narrow), mg, h8]
        },
        Check::Exact,
    )]
}

// ---- nc_stream_shuffle ----

/// `nc_stream_shuffle`: f32 over four quadrants with a mask that repeats, skips and keeps
/// (255: the destination's memset value stays), and int32 bits (NaN patterns included) in
/// place; the bits move unchanged.
fn shuffle_rows() -> Vec<Row> {
    let p = P as u32;
    let mut mask = [0u8; 32];
    for (i, m) in mask.iter_mut().enumerate() {
        *m = match i {
            3 | 17 => nki_lang::SHUFFLE_KEEP,
            i => ((i * 7 + 3) % 32) as u8,
        };
    }
    let moved = move |x: &Array2<f64>, old: &dyn Fn(usize, usize) -> f64| {
        Array2::from_shape_fn(x.dim(), |(p, f)| match nki_lang::shuffle_source(&mask, p) {
            Some(from) => x[[from, f]],
            None => old(p, f),
        })
    };
    let rot: [u8; 32] = core::array::from_fn(|i| ((i + 31) % 32) as u8);
    let ints = values(P, 40, 302, |r| r.int(-2_000_000_000, 2_000_000_000) as f64);
    vec![row(
        "nc_stream_shuffle: f32 with kept partitions, int32 in place",
        &[Covers::Op(Opcode::NcStreamShuffle)],
        vec![
            (DType::F32, values(P, 24, 301, |r| r.step(-8.0, 8.0, 0.125))),
            (DType::I32, ints),
        ],
        &[(DType::F32, [P, 24]), (DType::I32, [P, 40])],
        |k| {
            let (x, y) = (k.load(0), k.load(1));
            let d = k.sbuf(DType::F32, &[p, 24]);
            k.b.memset(d, Scalar::float(-1.5)).unwrap();
            k.b.nc_stream_shuffle(d, x, mask).unwrap();
            k.b.nc_stream_shuffle(y, y, rot).unwrap();
            k.store(0, d);
            k.store(1, y);
        },
        move |x| {
            let rotated = Array2::from_shape_fn(x[1].dim(), |(p, f)| {
                x[1][[(p / 32) * 32 + (p % 32 + 31) % 32, f]]
            });
            vec![moved(&x[0], &|_, _| -1.5), rotated]
        },
        Check::Exact,
    )]
}

// ---- local_gather ----

/// `local_gather` (GpSimd): 8 groups with their own uint16 indices, f32 with 2 elements per
/// index and int8 bits with 1 (every index of a group), into their own dtypes.
fn local_gather_rows() -> Vec<Row> {
    let p = P as u32;
    let group_index = |ix: &Array2<f64>, p: usize, j: usize| ix[[(p / 16) * 16 + j % 16, j / 16]];
    vec![row(
        "local_gather: f32 runs of 2 at 40 indices, int8 at every index of a group",
        &[Covers::Op(Opcode::LocalGather)],
        vec![
            (DType::F32, values(P, 30, 401, |r| r.step(-8.0, 8.0, 0.125))),
            (DType::U16, values(P, 3, 402, |r| r.int(0, 28) as f64)),
            (DType::I8, values(P, 30, 403, |r| r.int(-128, 127) as f64)),
        ],
        &[(DType::F32, [P, 80]), (DType::I8, [P, 48])],
        |k| {
            let (x, ix, y) = (k.load(0), k.load(1), k.load(2));
            let d = k.sbuf(DType::F32, &[p, 80]);
            k.b.local_gather(d, x, ix, 2, 40).unwrap();
            let e = k.sbuf(DType::I8, &[p, 48]);
            k.b.local_gather(e, y, ix, 1, 48).unwrap();
            k.store(0, d);
            k.store(1, e);
        },
        move |x| {
            let a = Array2::from_shape_fn((P, 80), |(p, k)| {
                x[0][[p, group_index(&x[1], p, k / 2) as usize + k % 2]]
            });
            let b = Array2::from_shape_fn((P, 48), |(p, j)| {
                x[2][[p, group_index(&x[1], p, j) as usize]]
            });
            vec![a, b]
        },
        Check::Exact,
    )]
}

// ---- sequence_bounds ----

/// `sequence_bounds` (GpSimd): float32 ids into float32 and int32 ids (above 2^24, where fp32
/// would merge neighbours) into int32, with padding runs; NKI's NumPy definition as loops.
fn sequence_bounds_rows() -> Vec<Row> {
    let bounds = |ids: &[f64]| -> Vec<f64> {
        let n = ids.len();
        let mut start = vec![0.0; n];
        let mut end = vec![0.0; n];
        for i in 0..n {
            start[i] = if ids[i] == 0.0 {
                n as f64
            } else if i > 0 && ids[i] == ids[i - 1] {
                start[i - 1]
            } else {
                i as f64
            };
        }
        for i in (0..n).rev() {
            end[i] = if ids[i] == 0.0 {
                -1.0
            } else if i + 1 < n && ids[i] == ids[i + 1] {
                end[i + 1]
            } else {
                (i + 1) as f64
            };
        }
        start.into_iter().chain(end).collect()
    };
    // Runs of 1 to 4 equal ids, a quarter of them padding.
    let runs = |seed: u64, base: f64| {
        let mut rng = Rng::new(seed);
        let mut v = Vec::new();
        while v.len() < 40 {
            let id = if rng.int(0, 3) == 0 {
                0.0
            } else {
                base + rng.int(1, 3) as f64
            };
            for _ in 0..rng.int(1, 4) {
                v.push(id);
            }
        }
        v.truncate(40);
        Array2::from_shape_vec((1, 40), v).unwrap()
    };
    vec![row(
        "sequence_bounds: float32 ids, int32 ids above 2^24",
        &[Covers::Op(Opcode::SequenceBounds)],
        vec![
            (DType::F32, runs(501, 0.0)),
            (DType::I32, runs(502, 16_777_216.0)),
        ],
        &[(DType::F32, [1, 80]), (DType::I32, [1, 80])],
        |k| {
            let (x, y) = (k.load(0), k.load(1));
            let (d, e) = (k.sbuf(DType::F32, &[1, 80]), k.sbuf(DType::I32, &[1, 80]));
            let (dd, vx) = (k.dst(d), k.v(x));
            k.unary(Opcode::SequenceBounds, None, dd, vx);
            let (de, vy) = (k.dst(e), k.v(y));
            k.unary(Opcode::SequenceBounds, None, de, vy);
            k.store(0, d);
            k.store(1, e);
        },
        move |x| {
            let row_of = |a: &Array2<f64>| {
                Array2::from_shape_vec((1, 80), bounds(&a.row(0).to_vec())).unwrap()
            };
            vec![row_of(&x[0]), row_of(&x[1])]
        },
        Check::Exact,
    )]
}

/// `tensor_scalar_cumulative`: `reg = op1(op0(src, imm0), reg)` along each partition, from
/// `op1`'s identity or from `imm1`. Small integers and quarters keep every running value exact
/// in fp32 and in the 16-bit dtypes.
fn cumulative_rows() -> Vec<Row> {
    let p = P as u32;
    let small = |seed, f| values(P, f, seed, |r| r.step(-4.0, 4.0, 0.25));
    // The plain loop, in f64 (exact for these values).
    let scan = |x: &Array2<f64>,
                s: &dyn Fn(usize) -> f64,
                start: &dyn Fn(usize) -> f64,
                op0: &dyn Fn(f64, f64) -> f64,
                op1: &dyn Fn(f64, f64) -> f64| {
        let mut out = Array2::zeros(x.raw_dim());
        for q in 0..x.nrows() {
            let mut reg = start(q);
            for i in 0..x.ncols() {
                reg = op1(op0(x[[q, i]], s(q)), reg);
                out[[q, i]] = reg;
            }
        }
        out
    };
    let cumulative = |k: &mut Kb, dst: Dst, src: ViewId, op: [Alu; 2], imm: [Src; 2]| {
        let data = InstrData::Alu {
            dst,
            src: [Src::Tile(src), imm[0], imm[1]],
            op,
            rev: 0,
            acc: None,
        };
        k.push(Opcode::TensorScalarCumulative, None, data);
    };
    vec![
        row(
            "tensor_scalar_cumulative (add, add), reset_reduce: running sums from 0",
            &[Covers::Op(Opcode::TensorScalarCumulative)],
            vec![(DType::F32, small(601, 200))],
            &[(DType::F32, [P, 200])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::F32, &[p, 200]);
                let (dst, vx) = (k.dst(r), k.v(x));
                let imm = [Src::Imm(Scalar::float(0.5)), Src::None];
                cumulative(k, dst, vx, [Alu::Add, Alu::Add], imm);
                k.store(0, r);
            },
            move |x| {
                vec![scan(&x[0], &|_| 0.5, &|_| 0.0, &|a, b| a + b, &|a, b| {
                    a + b
                })]
            },
            Check::Exact,
        ),
        row(
            "tensor_scalar_cumulative (multiply by a column, maximum), load_reduce from a column",
            &[Covers::Op(Opcode::TensorScalarCumulative)],
            vec![
                (DType::F32, small(602, 64)),
                (DType::F32, small(603, 1)),
                (DType::F32, small(604, 1)),
            ],
            &[(DType::F32, [P, 64])],
            |k| {
                let (x, s, i) = (k.load(0), k.load(1), k.load(2));
                let r = k.sbuf(DType::F32, &[p, 64]);
                let (dst, vx, cs, ci) = (k.dst(r), k.v(x), k.col(s), k.col(i));
                cumulative(k, dst, vx, [Alu::Multiply, Alu::Max], [cs, ci]);
                k.store(0, r);
            },
            move |x| {
                let (s, i) = (x[1].clone(), x[2].clone());
                vec![scan(
                    &x[0],
                    &|q| s[[q, 0]],
                    &|q| i[[q, 0]],
                    &|a, b| a * b,
                    &f64::max,
                )]
            },
            Check::Exact,
        ),
        row(
            "tensor_scalar_cumulative bf16 (subtract, subtract), load_reduce from an immediate: value - reg",
            &[Covers::Op(Opcode::TensorScalarCumulative)],
            vec![(DType::Bf16, small(605, 48))],
            &[(DType::Bf16, [P, 48])],
            |k| {
                let x = k.load(0);
                let r = k.sbuf(DType::Bf16, &[p, 48]);
                let (dst, vx) = (k.dst(r), k.v(x));
                let imm = [Src::Imm(Scalar::float(0.25)), Src::Imm(Scalar::float(1.0))];
                cumulative(k, dst, vx, [Alu::Subtract, Alu::Subtract], imm);
                k.store(0, r);
            },
            move |x| {
                vec![scan(&x[0], &|_| 0.25, &|_| 1.0, &|a, b| a - b, &|a, b| {
                    a - b
                })]
            },
            Check::Exact,
        ),
        row(
            "tensor_scalar_cumulative int16 (add, minimum) and uint8 (maximum, multiply), reset_reduce",
            &[Covers::Op(Opcode::TensorScalarCumulative)],
            vec![
                (DType::I16, values(P, 40, 606, |r| r.int(-300, 300) as f64)),
                (DType::U8, values(P, 7, 607, |r| r.int(0, 2) as f64)),
            ],
            &[(DType::I16, [P, 40]), (DType::U8, [P, 7])],
            |k| {
                let (x, y) = (k.load(0), k.load(1));
                let (r, t) = (k.sbuf(DType::I16, &[p, 40]), k.sbuf(DType::U8, &[p, 7]));
                let (dr, vx) = (k.dst(r), k.v(x));
                let imm = [Src::Imm(Scalar::Int(7)), Src::None];
                cumulative(k, dr, vx, [Alu::Add, Alu::Min], imm);
                let (dt, vy) = (k.dst(t), k.v(y));
                let imm = [Src::Imm(Scalar::Int(1)), Src::None];
                cumulative(k, dt, vy, [Alu::Max, Alu::Multiply], imm);
                k.store(0, r);
                k.store(1, t);
            },
            move |x| {
                vec![
                    scan(
                        &x[0],
                        &|_| 7.0,
                        &|_| f64::INFINITY,
                        &|a, b| a + b,
                        &f64::min,
                    ),
                    scan(&x[1], &|_| 1.0, &|_| 1.0, &f64::max, &|a, b| a * b),
                ]
            },
            Check::Exact,
        ),
    ]
}

/// `nonzero_with_count` (Trn2): on partitions `0, 16, …` the positions of the nonzero elements
/// plus the offset, the padding, the count; the other partitions keep a memset's value.
fn nonzero_rows() -> Vec<Row> {
    let p = P as u32;
    let compact = |x: &Array2<f64>, offset: f64, padding: f64, keep: f64| {
        let t = x.ncols();
        let mut out = Array2::from_elem((x.nrows(), t + 1), keep);
        for q in (0..x.nrows()).step_by(16) {
            let found: Vec<f64> = (0..t)
                .filter(|&k| x[[q, k]] != 0.0 || x[[q, k]].is_nan())
                .map(|k| k as f64 + offset)
                .collect();
            for k in 0..t {
                out[[q, k]] = found.get(k).copied().unwrap_or(padding);
            }
            out[[q, t]] = found.len() as f64;
        }
        out
    };
    let nonzero = |k: &mut Kb, dst: TileId, src: TileId, offset: i32, padding: i32, keep: i32| {
        let d = k.dst(dst);
        let value = Scalar::Int(keep);
        k.push(Opcode::Memset, None, InstrData::Fill { dst: d, value });
        k.b.nonzero_with_count(dst, src, offset, padding).unwrap();
    };
    vec![row_on(
        Target::Trn2,
        "nonzero_with_count: float32 (-0.0 zero) with an offset, int32 above 2^24 with a padding",
        &[Covers::Op(Opcode::NonzeroWithCount)],
        vec![
            (
                DType::F32,
                values(P, 24, 701, |r| [0.0, -0.0, 1.5, -3.0][r.int(0, 3) as usize]),
            ),
            (
                DType::I32,
                values(P, 30, 702, |r| {
                    [0.0, 16_777_217.0, -2.0][r.int(0, 2) as usize]
                }),
            ),
        ],
        &[(DType::I32, [P, 25]), (DType::I32, [P, 31])],
        |k| {
            let (x, y) = (k.load(0), k.load(1));
            let (d, e) = (k.sbuf(DType::I32, &[p, 25]), k.sbuf(DType::I32, &[p, 31]));
            nonzero(k, d, x, 1000, -1, 7);
            nonzero(k, e, y, -3, 123_456, -9);
            k.store(0, d);
            k.store(1, e);
        },
        move |x| {
            vec![
                compact(&x[0], 1000.0, -1.0, 7.0),
                compact(&x[1], -3.0, 123_456.0, -9.0),
            ]
        },
        Check::Exact,
    )]
}

/// `exponential` (Trn3): `exp(x − max_value)` of the fp32 difference, `max_value` a column or a
/// number, into float32 (with each partition's sum) and bfloat16.
fn exponential_rows() -> Vec<Row> {
    let p = P as u32;
    // exp of the difference rounded to fp32, in f64.
    let exp_of = |x: &Array2<f64>, m: &dyn Fn(usize) -> f64| {
        Array2::from_shape_fn(x.dim(), |(q, i)| f64::from((x[[q, i]] - m(q)) as f32).exp())
    };
    let sums = |e: &Array2<f64>| Array2::from_shape_fn((e.nrows(), 1), |(q, _)| e.row(q).sum());
    let inputs = || {
        vec![
            (
                DType::F32,
                values(P, 24, 711, |r| r.step(-20.0, 20.0, 1.0 / 64.0)),
            ),
            (
                DType::F32,
                values(P, 1, 712, |r| r.step(-4.0, 12.0, 1.0 / 8.0)),
            ),
        ]
    };
    vec![
        row_on(
            Target::Trn3,
            "exponential: float32 minus a column, with the sum per partition",
            &[Covers::Op(Opcode::Exponential)],
            inputs(),
            &[(DType::F32, [P, 24]), (DType::F32, [P, 1])],
            |k| {
                let (x, m) = (k.load(0), k.load(1));
                let (d, r) = (k.sbuf(DType::F32, &[p, 24]), k.sbuf(DType::F32, &[p, 1]));
                k.b.exponential(d, x, Operand::Column(m), Some(r)).unwrap();
                k.store(0, d);
                k.store(1, r);
            },
            move |x| {
                let e = exp_of(&x[0], &|q| x[1][[q, 0]]);
                let s = sums(&e);
                vec![e, s]
            },
            // The model's exp is within about 1 ulp (docs/numerics.md); the sum adds 24 of them.
            Check::Within(1e-6),
        ),
        row_on(
            Target::Trn3,
            "exponential: minus a number, into bfloat16",
            &[Covers::Op(Opcode::Exponential)],
            inputs(),
            &[(DType::Bf16, [P, 24])],
            |k| {
                let x = k.load(0);
                let d = k.sbuf(DType::Bf16, &[p, 24]);
                let two = Operand::Imm(Scalar::float(2.0));
                k.b.exponential(d, x, two, None).unwrap();
                k.store(0, d);
            },
            move |x| vec![exp_of(&x[0], &|_| 2.0)],
            // bf16's half ulp.
            Check::Within(2f64.powi(-8)),
        ),
    ]
}

/// `activate2` (Trn3): the tensor-scalar stage rounded to fp32 after each operation, then the
/// function; `exp(x · s[p] − 0.25)` with the per-partition sum, and `relu(1.5 − x)` into bf16
/// with the per-partition maximum.
fn activate2_rows() -> Vec<Row> {
    let p = P as u32;
    let f32_of = |v: f64| f64::from(v as f32);
    let inputs = || {
        vec![
            (
                DType::F32,
                values(P, 24, 721, |r| r.step(-4.0, 4.0, 1.0 / 64.0)),
            ),
            (
                DType::F32,
                values(P, 1, 722, |r| r.step(-2.0, 2.0, 1.0 / 16.0)),
            ),
        ]
    };
    vec![
        row_on(
            Target::Trn3,
            "activate2: exp of multiply then subtract, with the sum per partition",
            &[Covers::Op(Opcode::Activate2)],
            inputs(),
            &[(DType::F32, [P, 24]), (DType::F32, [P, 1])],
            |k| {
                let (x, s) = (k.load(0), k.load(1));
                let (d, r) = (k.sbuf(DType::F32, &[p, 24]), k.sbuf(DType::F32, &[p, 1]));
                let stage = [
                    (Alu::Multiply, Operand::Column(s)),
                    (Alu::Subtract, Operand::Imm(Scalar::float(0.25))),
                ];
                k.b.activate2(d, ActFn::Exp, x, stage, 0, Some((Alu::Add, r)))
                    .unwrap();
                k.store(0, d);
                k.store(1, r);
            },
            move |x| {
                let e = Array2::from_shape_fn(x[0].dim(), |(q, i)| {
                    f32_of(f32_of(x[0][[q, i]] * x[1][[q, 0]]) - 0.25).exp()
                });
                let sums = Array2::from_shape_fn((e.nrows(), 1), |(q, _)| e.row(q).sum());
                vec![e, sums]
            },
            // The model's exp is within about 1 ulp (docs/numerics.md); the sum adds 24 of them.
            Check::Within(1e-6),
        ),
        row_on(
            Target::Trn3,
            "activate2: relu of a reversed subtract into bfloat16, with the maximum per partition",
            &[Covers::Op(Opcode::Activate2)],
            inputs(),
            &[(DType::Bf16, [P, 24]), (DType::F32, [P, 1])],
            |k| {
                let x = k.load(0);
                let (d, r) = (k.sbuf(DType::Bf16, &[p, 24]), k.sbuf(DType::F32, &[p, 1]));
                let stage = [
                    (Alu::Subtract, Operand::Imm(Scalar::float(1.5))),
                    (Alu::Bypass, Operand::None),
                ];
                k.b.activate2(d, ActFn::Relu, x, stage, 1, Some((Alu::Max, r)))
                    .unwrap();
                k.store(0, d);
                k.store(1, r);
            },
            move |x| {
                // 1.5 − x is exact in fp32 for these values (multiples of 1/64 in [−4, 4]), so
                // is bf16 of it only where it needs no more than 8 significant bits.
                let v = x[0].mapv(|v| (1.5 - v).max(0.0));
                let peaks = Array2::from_shape_fn((v.nrows(), 1), |(q, _)| {
                    v.row(q).iter().copied().fold(0.0, f64::max)
                });
                vec![v.mapv(bf16_of), peaks]
            },
            Check::Exact,
        ),
    ]
}

/// One XORWOW step on `[x, y, z, w, v, d]` (Marsaglia, "Xorshift RNGs", 2003): the output
/// `d + v` after the shift and the Weyl step.
fn xorwow_step(s: &mut [u32]) -> u32 {
    let t = s[0] ^ (s[0] >> 2);
    let v = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
    let d = s[5].wrapping_add(362437);
    s.copy_from_slice(&[s[1], s[2], s[3], s[4], v, d]);
    d.wrapping_add(v)
}

/// Draws `cols` values per partition from a state of `g` generators per partition (six words
/// each, as f64 values of uint32), element `j` from generator `j mod g`; the state advances.
fn xorwow_draws(state: &mut Array2<f64>, g: usize, cols: usize) -> Array2<u32> {
    Array2::from_shape_fn((state.nrows(), cols), |(p, j)| {
        let k = 6 * (j % g);
        let mut s: Vec<u32> = (0..6).map(|i| state[[p, k + i]] as u32).collect();
        let x = xorwow_step(&mut s);
        for (i, w) in s.into_iter().enumerate() {
            state[[p, k + i]] = f64::from(w);
        }
        x
    })
}

/// A state of `words` uint32 values per partition (as f64), none all zero.
fn xorwow_state(words: usize, seed: u64) -> Array2<f64> {
    values(P, words, seed, |r| r.int(1, u32::MAX as i64) as f64)
}

/// The low bits of draws as the value of an integer dtype.
fn low_bits(bits: &Array2<u32>, dtype: DType) -> Array2<f64> {
    bits.mapv(|x| match dtype {
        DType::I8 => f64::from(x as u8 as i8),
        DType::I16 => f64::from(x as u16 as i16),
        DType::I32 => f64::from(x as i32),
        DType::U8 => f64::from(x as u8),
        DType::U16 => f64::from(x as u16),
        _ => f64::from(x),
    })
}

/// splitmix64 (Steele, Lea and Flood, 2014).
fn splitmix64(z: &mut u64) -> u64 {
    *z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut x = *z;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The Vector lanes' state `set_rng_seed(seed)` sets (`docs/numerics.md`, "XORWOW
/// generators"), as f64 values of uint32.
fn seeded_vector_state(seed: u32) -> Array2<f64> {
    Array2::from_shape_fn((P, 24), |(k, i)| {
        let (g, word) = (i / 6, i % 6);
        let mut z = (u64::from(seed) << 32) + ((k as u64) << 8) + g as u64;
        let mut r = 0;
        for _ in 0..=word / 2 {
            r = splitmix64(&mut z);
        }
        f64::from(if word % 2 == 0 {
            r as u32
        } else {
            (r >> 32) as u32
        })
    })
}

/// `rand2`'s fp32 value of a draw, each fp32 operation exact in f64 and rounded by the cast.
fn rand2_of(x: u32, min: f32, max: f32) -> f32 {
    let u = (f64::from(x as f32) * 2f64.powi(-32) + 2f64.powi(-33)) as f32;
    let span = (f64::from(max) - f64::from(min)) as f32;
    (f64::from(min) + f64::from((f64::from(u) * f64::from(span)) as f32)) as f32
}

/// An fp32 value rounded to nearest even into `dtype` (integers saturate): the value stored.
fn rounded_into(dtype: DType, v: f32) -> f64 {
    let int = |lo: f64, hi: f64| f64::from(v).round_ties_even().clamp(lo, hi);
    match dtype {
        DType::F32 => f64::from(v),
        DType::Tf32 => {
            // Round away the low 13 mantissa bits, ties to even.
            let b = v.to_bits();
            let r = b.wrapping_add(0xfff + ((b >> 13) & 1)) & !0x1fff;
            f64::from(f32::from_bits(r))
        }
        DType::Bf16 => bf16::from_f32(v).to_f64(),
        DType::F16 => f16::from_f32(v).to_f64(),
        DType::F8E4M3 | DType::F8E5M2 => {
            // The nearest of the 256 codes' finite values, ties to the even code; a value a
            // code holds exactly is that code (a zero keeps its sign: +0 and −0 are both even
            // codes at distance 0).
            let x = f64::from(v);
            let mut best = (f64::INFINITY, 0u32);
            for c in 0..256u32 {
                let val = decode(dtype, c);
                if !val.is_finite() {
                    continue;
                }
                if val == x && val.is_sign_negative() == x.is_sign_negative() {
                    return val;
                }
                let d = (val - x).abs();
                if d < best.0 || (d == best.0 && c % 2 == 0) {
                    best = (d, c);
                }
            }
            decode(dtype, best.1)
        }
        DType::I8 => int(-128.0, 127.0),
        DType::I16 => int(-32768.0, 32767.0),
        DType::I32 => int(-2147483648.0, 2147483647.0),
        DType::U8 => int(0.0, 255.0),
        DType::U16 => int(0.0, 65535.0),
        DType::U32 => int(0.0, 4294967295.0),
        _ => unreachable!("not a rand2 dtype"),
    }
}

/// `rng` on each engine into every integer dtype after `rand_set_state`, the state read back
/// by `rand_get_state`; `set_rng_seed` then `rng`; `rand2` into every dtype it writes.
fn xorwow_rows() -> Vec<Row> {
    let p = P as u32;
    let ints = [
        DType::U32,
        DType::I32,
        DType::U16,
        DType::I16,
        DType::U8,
        DType::I8,
    ];
    let mut rows = Vec::new();
    for (target, engine, g) in [
        (Target::Trn2, Engine::GpSimd, 1usize),
        (Target::Trn3, Engine::Vector, 4),
        (Target::Trn3, Engine::GpSimd, 1),
    ] {
        let words = 6 * g;
        let mut outputs: Vec<(DType, [usize; 2])> = ints.iter().map(|&d| (d, [P, 7])).collect();
        outputs.push((DType::U32, [P, words]));
        rows.push(row_on(
            target,
            format!("rand_set_state, rng into every integer dtype, rand_get_state on {engine} ({target:?})"),
            &[
                Covers::Op(Opcode::RandSetState),
                Covers::Op(Opcode::Rng),
                Covers::Op(Opcode::RandGetState),
            ],
            vec![(DType::U32, xorwow_state(words, 301 + g as u64))],
            &outputs,
            move |k| {
                let s = k.load(0);
                k.b.rand_set_state(s, engine).unwrap();
                for (o, &dt) in ints.iter().enumerate() {
                    let d = k.sbuf(dt, &[p, 7]);
                    k.b.rng(d, engine).unwrap();
                    k.store(o, d);
                }
                let st = k.sbuf(DType::U32, &[p, words as u32]);
                k.b.rand_get_state(st, engine).unwrap();
                k.store(ints.len(), st);
            },
            move |v| {
                let mut state = v[0].clone();
                let mut out: Vec<Array2<f64>> = ints
                    .iter()
                    .map(|&dt| low_bits(&xorwow_draws(&mut state, g, 7), dt))
                    .collect();
                out.push(state);
                out
            },
            Check::Exact,
        ));
    }
    rows.push(row_on(
        Target::Trn3,
        "set_rng_seed of an int32, rng on the Vector engine, rand_get_state",
        &[Covers::Op(Opcode::SetRngSeed), Covers::Op(Opcode::Rng)],
        vec![(DType::I32, Array2::from_elem((1, 1), -123456.0))],
        &[(DType::U32, [P, 10]), (DType::U32, [P, 24])],
        move |k| {
            let s = k.load(0);
            k.b.set_rng_seed(s).unwrap();
            let d = k.sbuf(DType::U32, &[p, 10]);
            k.b.rng(d, Engine::Vector).unwrap();
            k.store(0, d);
            let st = k.sbuf(DType::U32, &[p, 24]);
            k.b.rand_get_state(st, Engine::Vector).unwrap();
            k.store(1, st);
        },
        |_| {
            let mut state = seeded_vector_state(-123456i32 as u32);
            let bits = xorwow_draws(&mut state, 4, 10).mapv(f64::from);
            vec![bits, state]
        },
        Check::Exact,
    ));
    // rand2: every destination dtype, bounds as numbers or [P, 1] columns.
    let cases: Vec<(DType, (f32, f32))> = vec![
        (DType::F32, (-2.5, 3.0)),
        (DType::Tf32, (-1.0, 1.0)),
        (DType::Bf16, (0.0, 0.0)),
        (DType::F16, (-4.0, 4.0)),
        (DType::F8E4M3, (-1.0, 1.0)),
        (DType::F8E5M2, (0.0, 8.0)),
        (DType::I8, (-100.0, 100.0)),
        (DType::I16, (-30000.0, 30000.0)),
        (DType::I32, (-1.0e6, 1.0e6)),
        (DType::U8, (0.0, 255.0)),
        (DType::U16, (0.0, 65535.0)),
        (DType::U32, (0.0, 1.0e9)),
    ];
    let lo = values(P, 1, 311, |r| r.step(-8.0, 0.0, 0.25));
    let hi = values(P, 1, 312, |r| r.step(0.5, 8.0, 0.25));
    let outputs: Vec<(DType, [usize; 2])> = cases.iter().map(|&(d, _)| (d, [P, 8])).collect();
    let body_cases = cases.clone();
    rows.push(row_on(
        Target::Trn3,
        "rand2 into every dtype it writes (number bounds; [P, 1] columns into bf16)",
        &[Covers::Op(Opcode::Rand2)],
        vec![
            (DType::U32, xorwow_state(24, 313)),
            (DType::F32, lo),
            (DType::F32, hi),
        ],
        &outputs,
        move |k| {
            let s = k.load(0);
            k.b.rand_set_state(s, Engine::Vector).unwrap();
            let (l, h) = (k.load(1), k.load(2));
            for (o, &(dt, (min, max))) in body_cases.iter().enumerate() {
                let d = k.sbuf(dt, &[p, 8]);
                let (a, b) = if dt == DType::Bf16 {
                    (Operand::Column(l), Operand::Column(h))
                } else {
                    (
                        Operand::Imm(Scalar::float(min)),
                        Operand::Imm(Scalar::float(max)),
                    )
                };
                k.b.rand2(d, a, b).unwrap();
                k.store(o, d);
            }
        },
        move |v| {
            let mut state = v[0].clone();
            cases
                .iter()
                .map(|&(dt, (min, max))| {
                    let x = xorwow_draws(&mut state, 4, 8);
                    Array2::from_shape_fn((P, 8), |(q, j)| {
                        let (a, b) = if dt == DType::Bf16 {
                            (v[1][[q, 0]] as f32, v[2][[q, 0]] as f32)
                        } else {
                            (min, max)
                        };
                        rounded_into(dt, rand2_of(x[[q, j]], a, b))
                    })
                })
                .collect()
        },
        Check::Exact,
    ));
    rows
}

/// `quantize_mx`'s outputs for `[P, F]` values quantized to the 8-bit `lane` type: the packed
/// words (`[P, F/4]`, lane `l` in bits `8l…`, as integers) and the scale codes by group
/// (`[P/8, F/4]`). Per NKI's API page: the scale 2^(floor(log2 amax) − (emax − 1)) (emax 8
/// for e4m3fn, 15 for e5m2), code 0 for a zero group; each value divided by it and rounded to
/// nearest even.
fn quantize_mx_ref(x: &Array2<f64>, lane: DType) -> (Array2<f64>, Array2<f64>) {
    let emax = if lane == DType::F8E4M3Fn { 8 } else { 15 };
    let (p, f) = x.dim();
    let mut words = Array2::zeros((p, f / 4));
    let mut scales = Array2::zeros((p / 8, f / 4));
    for i in 0..p / 8 {
        for g in 0..f / 4 {
            let cells: Vec<(usize, usize)> = (0..8)
                .flat_map(|r| (0..4).map(move |l| (8 * i + r, 4 * g + l)))
                .collect();
            let amax = cells.iter().map(|&c| x[c].abs()).fold(0f64, f64::max);
            let code = if amax == 0.0 {
                0
            } else {
                (amax.log2().floor() as i32 - (emax - 1) + 127).clamp(0, 254)
            };
            scales[[i, g]] = f64::from(code);
            for r in 0..8 {
                let mut w = 0u32;
                for l in 0..4 {
                    let q = x[[8 * i + r, 4 * g + l]] * 2f64.powi(127 - code);
                    let r = if lane == DType::F8E4M3Fn {
                        ocp_round(lane, q)
                    } else {
                        rounded_into(lane, q as f32)
                    };
                    let c = encode(lane, r).expect("a lane value");
                    w |= c << (8 * l);
                }
                words[[8 * i + r, g]] = f64::from(w);
            }
        }
    }
    (words, scales)
}

/// `quantize_mx` (Trn3): bfloat16 into `float8_e4m3fn_x4` over one quadrant (P / 8 uint8
/// scales), float16 into `float8_e5m2_x4` over four (scales at partitions 32q … 32q + 3 of a
/// memset tile, the rest kept).
fn quantize_mx_rows() -> Vec<Row> {
    // Magnitudes varying by group (2^-30 … 2^30), some groups all zero.
    let draw = |seed, p, f, top: i64| {
        let mut x = values(p, f, seed, |r| r.int(-64, 64) as f64 / 16.0);
        for ((q, c), v) in x.indexed_iter_mut() {
            let group = (q / 8) * (f / 4) + c / 4;
            *v = if group % 9 == 4 {
                0.0
            } else {
                *v * 2f64.powi((group as i64 * 7 % (2 * top + 1) - top) as i32)
            };
        }
        x
    };
    vec![
        row_on(
            Target::Trn3,
            "quantize_mx: bfloat16 into float8_e4m3fn_x4, one quadrant, P / 8 scales",
            &[Covers::Op(Opcode::QuantizeMx)],
            vec![(DType::Bf16, draw(901, 32, 32, 30))],
            &[(DType::F8E4M3FnX4, [32, 8]), (DType::U8, [4, 8])],
            |k| {
                let x = k.load(0);
                let d = k.sbuf(DType::F8E4M3FnX4, &[32, 8]);
                let s = k.sbuf(DType::U8, &[4, 8]);
                k.b.quantize_mx(d, x, s).unwrap();
                k.store(0, d);
                k.store(1, s);
            },
            |x| {
                let (w, s) = quantize_mx_ref(&x[0], DType::F8E4M3Fn);
                vec![w, s]
            },
            Check::Exact,
        ),
        row_on(
            Target::Trn3,
            "quantize_mx: float16 into float8_e5m2_x4, four quadrants, spread scales",
            &[Covers::Op(Opcode::QuantizeMx)],
            vec![(DType::F16, draw(902, P, 16, 10))],
            &[(DType::F8E5M2X4, [P, 4]), (DType::U8, [100, 4])],
            |k| {
                let x = k.load(0);
                let d = k.sbuf(DType::F8E5M2X4, &[P as u32, 4]);
                let s = k.sbuf(DType::U8, &[100, 4]);
                k.b.memset(s, Scalar::float(0.0)).unwrap();
                k.b.quantize_mx(d, x, s).unwrap();
                k.store(0, d);
                k.store(1, s);
            },
            |x| {
                let (w, s) = quantize_mx_ref(&x[0], DType::F8E5M2);
                let spread = Array2::from_shape_fn((100, 4), |(q, g)| {
                    if q % 32 < 4 {
                        s[[q / 32 * 4 + q % 32, g]]
                    } else {
                        0.0
                    }
                });
                vec![w, spread]
            },
            Check::Exact,
        ),
    ]
}

/// `nc_matmul_mx` (Trn3): integers in `[-8, 8]` quantized by `quantize_mx` (exact in
/// float8_e4m3fn and float8_e5m2 at any power-of-two scale), multiplied: the integer matmul
/// `Σ_k Σ_l s[k, 4m + l] · v[k, 4n + l]`, exact in fp32; overwritten, then accumulated again.
fn matmul_mx_rows() -> Vec<Row> {
    let ints = |seed, f| values(64, f, seed, |r| r.int(-8, 8) as f64);
    let mm = |s: &Array2<f64>, v: &Array2<f64>| {
        Array2::from_shape_fn((s.ncols() / 4, v.ncols() / 4), |(m, n)| {
            (0..s.nrows())
                .flat_map(|k| (0..4).map(move |l| (k, l)))
                .map(|(k, l)| s[[k, 4 * m + l]] * v[[k, 4 * n + l]])
                .sum::<f64>()
        })
    };
    vec![row_on(
        Target::Trn3,
        "nc_matmul_mx: e4m3fn x e5m2 of quantized integers over two quadrants, then accumulated",
        &[Covers::Op(Opcode::MatmulMx), Covers::Op(Opcode::QuantizeMx)],
        vec![(DType::Bf16, ints(903, 32)), (DType::Bf16, ints(904, 64))],
        &[(DType::F32, [8, 16])],
        |k| {
            let (s, v) = (k.load(0), k.load(1));
            let (sq, vq) = (
                k.sbuf(DType::F8E4M3FnX4, &[64, 8]),
                k.sbuf(DType::F8E5M2X4, &[64, 16]),
            );
            let (ss, vs) = (k.sbuf(DType::U8, &[36, 8]), k.sbuf(DType::U8, &[36, 16]));
            k.b.quantize_mx(sq, s, ss).unwrap();
            k.b.quantize_mx(vq, v, vs).unwrap();
            let acc = k.tile(Memory::Psum, DType::F32, &[8, 16]);
            k.b.nc_matmul_mx(acc, sq, vq, [ss, vs], false).unwrap();
            k.b.nc_matmul_mx(acc, sq, vq, [ss, vs], true).unwrap();
            let out = k.sbuf(DType::F32, &[8, 16]);
            k.b.tensor_copy(out, acc).unwrap();
            k.store(0, out);
        },
        move |x| vec![mm(&x[0], &x[1]).mapv(|v| 2.0 * v)],
        Check::Exact,
    )]
}

/// The DMA engines' fp32 sum, by hand: each term (already a value of its source dtype) added
/// left to right with one round to fp32 per addition (the f64 sum of two fp32 values is exact
/// for the magnitudes drawn here).
fn fp32_sum(terms: &[f64]) -> f64 {
    let mut acc = terms[0] as f32;
    for &t in &terms[1..] {
        acc = (f64::from(acc) + t) as f32;
    }
    f64::from(acc)
}

/// `dma_compute`: bf16, f32 and f16 sources summed in fp32 into bf16; four sources (the
/// destination among them: the accumulate idiom, and a fourth source in slot 4) into f32; two
/// f32 sources whose sums are halves into int32 (ties to even) and into f16.
fn dma_compute_rows() -> Vec<Row> {
    let (p, f) = (P as u32, 48u32);
    let f16_of = |v: f64| f64::from(f16::from_f64(v));
    let a = values(P, 48, 801, |r| {
        bf16_of(r.int(-(1 << 20), 1 << 20) as f64 / 1000.0)
    });
    let b = values(P, 48, 802, |r| (r.int(-(1 << 23), 1 << 23) as f64) / 4096.0);
    let c = values(P, 48, 803, |r| f16_of(r.int(-20000, 20000) as f64 / 64.0));
    let d = values(P, 48, 804, |r| (r.int(-(1 << 23), 1 << 23) as f64) * 1024.0);
    let h = values(P, 48, 805, |r| r.step(-5000.0, 5000.0, 0.5));
    let g = values(P, 48, 806, |r| r.step(-5000.0, 5000.0, 0.25));
    vec![
        row(
            "dma_compute: bf16 + f32 + f16 into bf16 (fp32 sum, one rounding to bf16)",
            &[Covers::Op(Opcode::DmaCompute)],
            vec![
                (DType::Bf16, a.clone()),
                (DType::F32, b.clone()),
                (DType::F16, c.clone()),
            ],
            &[(DType::Bf16, [P, 48])],
            |k| {
                let (x, y, z) = (k.load(0), k.load(1), k.load(2));
                let o = k.sbuf(DType::Bf16, &[p, f]);
                k.b.dma_compute(o, &[x, y, z]).unwrap();
                k.store(0, o);
            },
            |x| {
                vec![Array2::from_shape_fn((P, 48), |(i, j)| {
                    bf16_of(fp32_sum(&[x[0][[i, j]], x[1][[i, j]], x[2][[i, j]]]))
                })]
            },
            Check::Exact,
        ),
        row(
            "dma_compute: t = t + f32 + f16 + f32 in place (four sources), into f32",
            &[Covers::Op(Opcode::DmaCompute)],
            vec![
                (DType::F32, b.clone()),
                (DType::F32, d),
                (DType::F16, c),
                (DType::F32, b),
            ],
            &[(DType::F32, [P, 48])],
            |k| {
                let (t, y, z, w) = (k.load(0), k.load(1), k.load(2), k.load(3));
                k.b.dma_compute(t, &[t, y, z, w]).unwrap();
                k.store(0, t);
            },
            |x| {
                vec![Array2::from_shape_fn((P, 48), |(i, j)| {
                    fp32_sum(&[x[0][[i, j]], x[1][[i, j]], x[2][[i, j]], x[3][[i, j]]])
                })]
            },
            Check::Exact,
        ),
        row(
            "dma_compute: f32 halves into int32 (ties to even) and into f16",
            &[Covers::Op(Opcode::DmaCompute)],
            vec![(DType::F32, h), (DType::F32, g)],
            &[(DType::I32, [P, 48]), (DType::F16, [P, 48])],
            |k| {
                let (x, y) = (k.load(0), k.load(1));
                let (o, o2) = (k.sbuf(DType::I32, &[p, f]), k.sbuf(DType::F16, &[p, f]));
                k.b.dma_compute(o, &[x, y]).unwrap();
                k.b.dma_compute(o2, &[y, x]).unwrap();
                k.store(0, o);
                k.store(1, o2);
            },
            |x| {
                let sum = elementwise(&x[0], &x[1], |u, v| fp32_sum(&[u, v]));
                vec![sum.mapv(f64::round_ties_even), sum.mapv(f16_of)]
            },
            Check::Exact,
        ),
    ]
}

/// `topk` (Trn2): two groups of 16 partitions, each a snake of `n = 100` bf16 values (value `i`
/// at partition `i % 16`, column `i / 16`) with ties, NaN and signed zeros; the 12 largest
/// (NaN above everything, `+0` above `-0`, the lower index first among equal values),
/// ascending, in the same snake layout; the other elements keep a memset's values.
fn topk_rows() -> Vec<Row> {
    let (n, k) = (100usize, 12usize);
    let pick = [0.5, -0.0, 0.0, 2.0, f64::NAN, -4.0, f64::INFINITY, 2.0];
    let x = values(32, 7, 901, |r| {
        if r.int(0, 3) == 0 {
            pick[r.int(0, 7) as usize]
        } else {
            bf16_of(r.int(-500, 500) as f64 / 16.0)
        }
    });
    // Whether snake value `a` ranks above `b` (as `max8` ranks).
    let above = |a: f64, b: f64| {
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && !b.is_nan();
        }
        a > b || (a == 0.0 && b == 0.0 && a.is_sign_positive() && b.is_sign_negative())
    };
    vec![row_on(
        Target::Trn2,
        "topk: the 12 largest of two 100-value bf16 snakes, ascending, as a snake",
        &[Covers::Op(Opcode::TopK)],
        vec![(DType::Bf16, x)],
        &[(DType::Bf16, [32, 12]), (DType::U32, [32, 12])],
        |kb| {
            let s = kb.load(0);
            let (v, i) = (
                kb.sbuf(DType::Bf16, &[32, 12]),
                kb.sbuf(DType::U32, &[32, 12]),
            );
            for (t, value) in [(v, Scalar::float(-1.0)), (i, Scalar::Int(7))] {
                let dst = kb.dst(t);
                kb.push(Opcode::Memset, None, InstrData::Fill { dst, value });
            }
            kb.b.topk(v, i, s, n as u32).unwrap();
            kb.store(0, v);
            kb.store(1, i);
        },
        |x| {
            let (mut vals, mut idx) = (
                Array2::from_elem((32, k), -1.0),
                Array2::from_elem((32, k), 7.0),
            );
            for g in 0..2 {
                let snake: Vec<f64> = (0..n).map(|i| x[0][[16 * g + i % 16, i / 16]]).collect();
                let mut used = vec![false; n];
                let mut top = Vec::new();
                for _ in 0..k {
                    let mut best: Option<usize> = None;
                    for i in 0..n {
                        if !used[i] && best.is_none_or(|b| above(snake[i], snake[b])) {
                            best = Some(i);
                        }
                    }
                    let b = best.unwrap();
                    used[b] = true;
                    top.push(b);
                }
                for (j, &i) in top.iter().rev().enumerate() {
                    vals[[16 * g + j % 16, j / 16]] = snake[i];
                    idx[[16 * g + j % 16, j / 16]] = i as f64;
                }
            }
            vec![vals, idx]
        },
        Check::Exact,
    )]
}
