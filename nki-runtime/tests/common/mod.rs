//! Helpers shared by the integration tests: a program builder for hand-written operands, a deterministic random
//! source, and independent f64 references.
#![allow(dead_code)]

use nki_lang::builder::ProgramBuilder;
use nki_lang::{
    Affine, Alu, AxisIndex, CompiledProgram, DType, Dim, Dst, Extent, HbmAccess, Instr, InstrData,
    LoopKind, MAX_TENSOR_RANK, MAX_TILE_RANK, Memory, Opcode, Scalar, Target, TileShape, TileView,
    Write,
};

/// A [`ProgramBuilder`] with raw indices for hand-written operands; panics on misuse (tests
/// only).
pub struct Builder {
    b: ProgramBuilder,
    depth: usize,
}

impl Builder {
    pub fn new(name: &str) -> Self {
        Builder::with_target(name, Target::Trn1)
    }

    pub fn with_target(name: &str, target: Target) -> Self {
        Builder {
            b: ProgramBuilder::new(name, target),
            depth: 0,
        }
    }

    pub fn sym(&mut self, name: &str) -> u8 {
        match self.b.symbol(name).unwrap() {
            Dim::Sym(s) => s,
            Dim::Fixed(_) => unreachable!("a symbol"),
        }
    }

    pub fn input(&mut self, name: &str, dtype: DType, shape: &[Dim]) -> u8 {
        self.b.input(name, dtype, shape).unwrap().index()
    }

    pub fn output(&mut self, name: &str, dtype: DType, shape: &[Dim]) -> u8 {
        self.b.output(name, dtype, shape).unwrap().index()
    }

    pub fn tile(&mut self, name: &str, memory: Memory, dtype: DType, dims: &[u32]) -> u16 {
        self.b.tile(name, memory, dtype, dims).unwrap().index()
    }

    /// Opens an `affine_range` loop; returns its depth (the depth of its induction variable in
    /// affine expressions, `Affine::loop_var(depth, _)`).
    pub fn begin(&mut self, var: &str, trip: Extent) -> usize {
        self.b.begin_loop(LoopKind::Affine, var, trip).unwrap();
        self.depth += 1;
        self.depth - 1
    }

    pub fn end(&mut self) {
        self.b.end_loop().unwrap();
        self.depth -= 1;
    }

    /// An instruction with explicit operands, on the opcode's default engine.
    pub fn push(&mut self, opcode: Opcode, data: InstrData) {
        self.b.push(Instr::new(opcode, data)).unwrap();
    }

    fn dst(&mut self, view: TileView, write: Write) -> Dst {
        Dst {
            view: self.b.view(view).unwrap(),
            write,
        }
    }

    /// `load`: the HBM access `src` (over the destination view's shape) into view `dst`.
    pub fn load(&mut self, dst: TileView, src: Access) {
        let tile = self.b.view(dst).unwrap();
        let hbm = self.b.access(src.over(&dst.shape)).unwrap();
        self.push(Opcode::Load, InstrData::Dma { tile, hbm });
    }

    /// `store`: view `src` into the HBM access `dst` (over the source view's shape).
    pub fn store(&mut self, dst: Access, src: TileView) {
        let tile = self.b.view(src).unwrap();
        let hbm = self.b.access(dst.over(&src.shape)).unwrap();
        self.push(Opcode::Store, InstrData::Dma { tile, hbm });
    }

    /// `nc_matmul`: `dst = stationaryᵀ · moving`, written per `write`.
    pub fn matmul(&mut self, dst: TileView, stationary: TileView, moving: TileView, write: Write) {
        let dst = self.dst(dst, write);
        let stationary = self.b.view(stationary).unwrap();
        let moving = self.b.view(moving).unwrap();
        self.push(
            Opcode::Matmul,
            InstrData::Matmul {
                dst,
                stationary,
                moving,
            },
        );
    }

    /// `nc_transpose`: `dst[f, p] = src[p, f]`.
    pub fn transpose(&mut self, dst: TileView, src: TileView) {
        self.unary(Opcode::Transpose, dst, src);
    }

    /// `tensor_copy`: `dst = src`, cast to `dst`'s dtype.
    pub fn copy(&mut self, dst: TileView, src: TileView) {
        self.unary(Opcode::TensorCopy, dst, src);
    }

    fn unary(&mut self, opcode: Opcode, dst: TileView, src: TileView) {
        let dst = self.dst(dst, Write::Overwrite);
        let src = self.b.view(src).unwrap();
        self.push(opcode, InstrData::Unary { dst, src });
    }

    /// `memset`: every element of `dst` becomes `value`, rounded to its dtype.
    pub fn memset(&mut self, dst: TileView, value: f32) {
        let dst = self.dst(dst, Write::Overwrite);
        let value = Scalar::float(value);
        self.push(Opcode::Memset, InstrData::Fill { dst, value });
    }

    pub fn finish(self) -> CompiledProgram {
        match self.b.finish() {
            Ok(c) => c,
            Err(e) => panic!("program rejected: {e:#?}"),
        }
    }
}

/// The whole of a tile with shape `dims`, row-major.
pub fn whole(tile: u16, dims: &[u32]) -> TileView {
    TileView::whole(tile, &TileShape::new(dims).unwrap())
}

/// A view with explicit partition start, shape, free offset and free strides.
pub fn view(tile: u16, part_start: u32, dims: &[u32], offset: Affine, strides: &[i64]) -> TileView {
    let mut s = [0i64; MAX_TILE_RANK - 1];
    s[..strides.len()].copy_from_slice(strides);
    TileView {
        tile,
        part_start,
        shape: TileShape::new(dims).unwrap(),
        offset,
        strides: s,
        part_var: Affine::ZERO,
        dtype: None,
    }
}

/// The indices of an HBM access, before its grid is known: `load` and `store` take the grid
/// from their tile view's shape ([`Access::over`]).
#[derive(Copy, Clone, Debug)]
pub struct Access {
    tensor: u8,
    rank: u8,
    axes: [AxisIndex; MAX_TENSOR_RANK],
}

impl Access {
    /// The access over the grid `shape`.
    pub fn over(&self, shape: &TileShape) -> HbmAccess {
        HbmAccess {
            tensor: self.tensor,
            reshape: None,
            rank: self.rank,
            shape: *shape,
            axes: self.axes,
        }
    }
}

/// An HBM access: one `(start, grid)` per tensor axis.
pub fn access(tensor: u8, axes: &[(Affine, [i64; MAX_TILE_RANK])]) -> Access {
    let mut a = [AxisIndex {
        start: Affine::ZERO,
        grid: [0; MAX_TILE_RANK],
    }; MAX_TENSOR_RANK];
    for (slot, &(start, grid)) in a.iter_mut().zip(axes) {
        *slot = AxisIndex { start, grid };
    }
    Access {
        tensor,
        rank: axes.len() as u8,
        axes: a,
    }
}

/// `tensor[p, f]` of a rank-2 tensor for a rank-2 tile, starting at `(r0, c0)`.
pub fn access2(tensor: u8, r0: Affine, c0: Affine) -> Access {
    access(tensor, &[(r0, [1, 0, 0, 0, 0]), (c0, [0, 1, 0, 0, 0])])
}

/// An accumulation group of `nc_matmul` partial sums over the loops in `loops` (bit `d` = the
/// loop at depth `d`), adding.
pub fn accumulation_group(loops: u8) -> Write {
    Write::Group {
        loops,
        op: Alu::Add,
    }
}

/// Plain accumulation: `dst += result`.
pub const ACCUMULATE: Write = Write::Accumulate(Alu::Add);

/// Deterministic xorshift64* values.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// A plain (not strict) core for every host code path this machine supports, with one and with
/// two host threads, each with a label naming it.
pub fn plain_cores() -> impl Iterator<Item = (String, nki_runtime::NeuronCore)> {
    nki_runtime::Isa::supported().into_iter().flat_map(|isa| {
        [1, 2].into_iter().map(move |threads| {
            let core = nki_runtime::NeuronCore::default()
                .with_isa(isa)
                .expect("a supported path")
                .with_strict(false)
                .with_host_threads(threads);
            (format!("{isa:?}, {threads} host threads"), core)
        })
    })
}

/// `lhs_t[K, M]ᵀ · rhs[K, N]` in f64, and `Σ_k |lhs_t[k, m] · rhs[k, n]|` (for error bounds).
pub fn reference_matmul(
    lhs_t: &[f64],
    rhs: &[f64],
    k: usize,
    m: usize,
    n: usize,
) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; m * n];
    let mut abs = vec![0.0; m * n];
    for kk in 0..k {
        for mm in 0..m {
            let a = lhs_t[kk * m + mm];
            let row = &rhs[kk * n..kk * n + n];
            let o = &mut out[mm * n..mm * n + n];
            let s = &mut abs[mm * n..mm * n + n];
            for j in 0..n {
                o[j] += a * row[j];
                s[j] += (a * row[j]).abs();
            }
        }
    }
    (out, abs)
}

/// Asserts `|got - want| ≤ rel · |want| + k · 2⁻²⁴ · abs` element by element.
pub fn assert_close(got: &[f64], want: &[f64], abs: &[f64], k: usize, rel: f64) {
    assert_eq!(got.len(), want.len());
    let u = (2.0f64).powi(-24);
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(abs).enumerate() {
        let tol = rel * w.abs() + (k as f64 + 2.0) * u * s;
        assert!(
            (g - w).abs() <= tol,
            "element {i}: got {g}, want {w} (|err| {} > tol {tol})",
            (g - w).abs()
        );
    }
}

/// The NKI seed: `out[128, 512] = bf16(lhsT[128, 128]ᵀ · rhs[128, 512])`.
pub fn seed_program() -> CompiledProgram {
    let mut b = Builder::new("matmul_seed");
    let lhs = b.input("lhsT", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(128)]);
    let rhs = b.input("rhs", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)]);
    let out = b.output("out", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)]);
    let a = b.tile("lhsT_tile", Memory::Sbuf, DType::Bf16, &[128, 128]);
    let r = b.tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512]);
    let acc = b.tile("acc", Memory::Psum, DType::F32, &[128, 512]);
    let res = b.tile("res", Memory::Sbuf, DType::Bf16, &[128, 512]);
    let z = Affine::ZERO;
    b.load(whole(a, &[128, 128]), access2(lhs, z, z));
    b.load(whole(r, &[128, 512]), access2(rhs, z, z));
    b.matmul(
        whole(acc, &[128, 512]),
        whole(a, &[128, 128]),
        whole(r, &[128, 512]),
        Write::Overwrite,
    );
    b.copy(whole(res, &[128, 512]), whole(acc, &[128, 512]));
    b.store(access2(out, z, z), whole(res, &[128, 512]));
    b.finish()
}

/// `out[M, N] (f32) = lhsT[K, M]ᵀ · rhs[K, N]`, tiled 128 × 512 × 128 with an accumulation
/// group over `k` into a memset PSUM tile (a `Write::Group`'s loops are replaced by the `k`
/// loop's; any other `write` is used as given).
pub fn tiled_program(write: Write) -> CompiledProgram {
    let mut b = Builder::new("matmul_tiled");
    let k = b.sym("K");
    let m = b.sym("M");
    let n = b.sym("N");
    let lhs = b.input("lhsT", DType::Bf16, &[Dim::Sym(k), Dim::Sym(m)]);
    let rhs = b.input("rhs", DType::Bf16, &[Dim::Sym(k), Dim::Sym(n)]);
    let out = b.output("out", DType::F32, &[Dim::Sym(m), Dim::Sym(n)]);
    let sym = |sym, div| Extent::Sym { sym, add: 0, div };
    let dm = b.begin("m", sym(m, 128));
    let dn = b.begin("n", sym(n, 512));
    // Each tile is declared in the loop whose iterations use it: a tile per iteration.
    let acc = b.tile("acc", Memory::Psum, DType::F32, &[128, 512]);
    let res = b.tile("res", Memory::Sbuf, DType::F32, &[128, 512]);
    b.memset(whole(acc, &[128, 512]), 0.0);
    let dk = b.begin("k", sym(k, 128));
    let a = b.tile("lhsT_tile", Memory::Sbuf, DType::Bf16, &[128, 128]);
    let r = b.tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512]);
    b.load(
        whole(a, &[128, 128]),
        access2(lhs, Affine::loop_var(dk, 128), Affine::loop_var(dm, 128)),
    );
    b.load(
        whole(r, &[128, 512]),
        access2(rhs, Affine::loop_var(dk, 128), Affine::loop_var(dn, 512)),
    );
    let write = match write {
        Write::Group { op, .. } => Write::Group { loops: 1 << dk, op },
        w => w,
    };
    b.matmul(
        whole(acc, &[128, 512]),
        whole(a, &[128, 128]),
        whole(r, &[128, 512]),
        write,
    );
    b.end();
    b.copy(whole(res, &[128, 512]), whole(acc, &[128, 512]));
    b.store(
        access2(out, Affine::loop_var(dm, 128), Affine::loop_var(dn, 512)),
        whole(res, &[128, 512]),
    );
    b.end();
    b.end();
    b.finish()
}
