//! The description of a random program: what the generator produces, what `lower` turns into
//! an nki program, and what the reference interpreter evaluates. Plain data, independent of
//! nki's own IR.

/// An element type of a tensor or tile.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Dt {
    /// IEEE binary32.
    F32,
    /// bfloat16.
    Bf16,
}

/// Where a tile lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mem {
    /// The state buffer.
    Sbuf,
    /// The partial-sum buffer (fp32 tiles only, in these programs).
    Psum,
}

/// The engine an instruction is sent to (numerically the same for every operation used here).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Eng {
    /// The opcode's default engine.
    Default,
    /// The Vector engine.
    Vector,
    /// The GpSimd engine (never with a PSUM operand).
    GpSimd,
    /// The Scalar engine (`tensor_copy` only, on Trn1).
    Scalar,
}

/// A loop's kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `affine_range`: independent iterations.
    Affine,
    /// `sequential_range`: ordered iterations.
    Sequential,
}

/// One loop of a stage's nest.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    /// Its kind.
    pub kind: Kind,
    /// Its fixed trip count (1 to 4).
    pub trip: u32,
}

/// An index affine in the stage's loop variables: `constant + Σ coefs[d] · var[d]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// The constant term.
    pub constant: i64,
    /// One coefficient per loop of the stage (outermost first), each ≥ 0.
    pub coefs: Vec<i64>,
}

impl Index {
    /// The index's value for the loop variables `vars`.
    pub fn at(&self, vars: &[i64]) -> i64 {
        self.constant + self.coefs.iter().zip(vars).map(|(c, v)| c * v).sum::<i64>()
    }
}

/// An affine expression of a tile's grid and the loop variables: element `(r, c)` has
/// `start.at(vars) + grid[0]·r + grid[1]·c` (`iota`'s values, `affine_select`'s predicate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    /// The value at the grid's first element.
    pub start: Index,
    /// The step per partition and per free element (any sign).
    pub grid: [i64; 2],
}

impl Expr {
    /// The value at element `(r, c)` for loop variables `vars`.
    pub fn at(&self, vars: &[i64], r: i64, c: i64) -> i64 {
        self.start.at(vars) + self.grid[0] * r + self.grid[1] * c
    }
}

/// A comparison of an expression with 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `e < 0`
    Lt,
    /// `e <= 0`
    Le,
    /// `e > 0`
    Gt,
    /// `e >= 0`
    Ge,
    /// `e == 0`
    Eq,
    /// `e != 0`
    Ne,
}

impl Cmp {
    /// Whether `v cmp 0` holds.
    pub fn holds(self, v: i64) -> bool {
        match self {
            Cmp::Lt => v < 0,
            Cmp::Le => v <= 0,
            Cmp::Gt => v > 0,
            Cmp::Ge => v >= 0,
            Cmp::Eq => v == 0,
            Cmp::Ne => v != 0,
        }
    }
}

/// A 2-D window of an HBM tensor seen as a `[p, f]` tile: tile element `(r, c)` is tensor
/// element `(row.at(vars) + grid[0][0]·r + grid[0][1]·c, col.at(vars) + grid[1][0]·r +
/// grid[1][1]·c)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Start row.
    pub row: Index,
    /// Start column.
    pub col: Index,
    /// `grid[axis][tile_dim]`: the tensor index's step per tile partition (`[.][0]`) and per
    /// free element (`[.][1]`).
    pub grid: [[i64; 2]; 2],
}

impl Window {
    /// The tensor element `(row, column)` of tile element `(r, c)` for loop variables `vars`.
    pub fn element(&self, vars: &[i64], r: i64, c: i64) -> (i64, i64) {
        (
            self.row.at(vars) + self.grid[0][0] * r + self.grid[0][1] * c,
            self.col.at(vars) + self.grid[1][0] * r + self.grid[1][1] * c,
        )
    }
}

/// How a load fills its tile: with one DMA, or with two into complementary sub-views.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Split {
    /// One DMA into the whole tile.
    Whole,
    /// Two DMAs: free elements `0..at`, then `at..f` (a view at a free offset).
    Cols(u32),
    /// Two DMAs: partitions `0..at`, then `at..p` (a view at a partition offset).
    Rows(u32),
}

/// A binary ALU operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Bin {
    /// `a + b`
    Add,
    /// `a - b`
    Subtract,
    /// `a · b`
    Multiply,
    /// IEEE 754-2019 `maximum`.
    Max,
    /// IEEE 754-2019 `minimum`.
    Min,
}

/// The second operand of a `tensor_scalar` operation.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Scalar {
    /// An fp32 immediate.
    Imm(f32),
    /// A `[p, 1]` tile (the step that made it), one value per partition.
    Column(usize),
}

/// An activation function (the Scalar engine's `activation`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Act {
    /// `x` (exact).
    Identity,
    /// `max(x, 0)` (exact).
    Relu,
    /// `|x|` (exact).
    Abs,
    /// `x²` (correctly rounded).
    Square,
    /// `eˣ` (within 1.013 ulp, `docs/numerics.md`).
    Exp,
    /// `tanh x` (within 0.879 ulp).
    Tanh,
    /// `1 / (1 + e⁻ˣ)` (within 1.005 ulp).
    Sigmoid,
    /// `x · sigmoid(x)` (within 1.171 ulp).
    Silu,
    /// `ln(1 + eˣ)` (within 1.728 ulp).
    Softplus,
}

/// A reduction along the free axis.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Red {
    /// `maximum`.
    Max,
    /// `add`.
    Add,
}

/// An operation; it writes the whole of a new tile (its step's), except where noted.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `load` from input `input` through `window`, cast to the tile's dtype.
    Load {
        /// The input tensor.
        input: usize,
        /// The window read.
        window: Window,
        /// One DMA or two.
        split: Split,
    },
    /// `memset` to `value` converted to the tile's dtype.
    Memset {
        /// The value.
        value: f32,
        /// The engine.
        engine: Eng,
    },
    /// `tensor_tensor`: `a op b` (steps of the same shape).
    TensorTensor {
        /// First operand.
        a: usize,
        /// Second operand.
        b: usize,
        /// The operation.
        op: Bin,
        /// The engine.
        engine: Eng,
    },
    /// `tensor_scalar`: `(a op0 s0) op1 s1`, each operation rounded to fp32.
    TensorScalar {
        /// The data.
        a: usize,
        /// The first operation and its operand.
        first: (Bin, Scalar),
        /// The optional second operation and its operand.
        second: Option<(Bin, Scalar)>,
        /// The engine.
        engine: Eng,
    },
    /// `tensor_copy` with a cast to the tile's dtype.
    Copy {
        /// The source.
        a: usize,
        /// The engine.
        engine: Eng,
    },
    /// `tensor_reduce` along the free axis into a `[p, 1]` tile, negated if `negate`.
    Reduce {
        /// The source.
        a: usize,
        /// The reduction.
        op: Red,
        /// Multiply the result by −1.
        negate: bool,
    },
    /// `activation`: `func(a · scale + bias)` (one fused multiply-add, then the function).
    Activation {
        /// The data (SBUF or PSUM).
        a: usize,
        /// The function.
        func: Act,
        /// The scale.
        scale: Scalar,
        /// The bias: a `[p, 1]` column (the step that made it), or none (Trn1 takes no
        /// immediate bias).
        bias: Option<usize>,
    },
    /// `iota`: the expression's values (int32, converted to the tile's dtype; the generator
    /// keeps them below 2²⁴ in magnitude, so every conversion path rounds once).
    Iota {
        /// The values.
        expr: Expr,
    },
    /// `affine_select`: `expr cmp 0 ? a : on_false` (GpSimd; `a` an SBUF step of the shape).
    AffineSelect {
        /// The value where the predicate holds.
        a: usize,
        /// The predicate's expression.
        expr: Expr,
        /// The predicate's comparison.
        cmp: Cmp,
        /// The fp32 value elsewhere.
        on_false: f32,
    },
    /// `nc_transpose` on TensorE: `[p, f]` → PSUM fp32 `[f, p]`.
    Transpose {
        /// The source (SBUF, `f ≤ 128`).
        a: usize,
    },
    /// `nc_matmul`: `stationaryᵀ · moving` into PSUM fp32.
    Matmul {
        /// `[k, m]` in SBUF.
        stationary: usize,
        /// `[k, n]` in SBUF.
        moving: usize,
    },
}

/// A tile: the destination of one step.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Tile {
    /// Its dtype.
    pub dt: Dt,
    /// Its memory.
    pub mem: Mem,
    /// Partitions.
    pub p: u32,
    /// Free elements.
    pub f: u32,
}

/// One step of a stage's body: an operation and the new tile it writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The operation.
    pub op: Op,
    /// Its destination, declared in the stage's innermost loop.
    pub tile: Tile,
    /// A mask `t_0 < mask[0] & t_1 < mask[1]` on the instruction's grid (the destination's;
    /// a reduction's input's), or `None`. Masked-off elements are neither read nor written:
    /// they stay undefined (the step's tile is new in every iteration).
    pub mask: Option<[u32; 2]>,
}

impl Step {
    /// The `[rows, cols]` box of the tile's elements the step writes (from its origin).
    pub fn written(&self) -> [u32; 2] {
        let t = self.tile;
        match (self.mask, &self.op) {
            (None, _) => [t.p, t.f],
            (Some([r, _]), Op::Reduce { .. }) => [r, 1],
            (Some([r, c]), _) => [r.min(t.p), c.min(t.f)],
        }
    }
}

/// Where each iteration's result tile goes in the stage's output. With `n` iterations of the
/// loop nest (flattened row-major: `it = Σ var[d] · Π trip[e > d]`) and a `[p, f]` tile,
/// element `(r, c)` of iteration `it` goes to:
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `(it · p + r, c)` of an `[n·p, f]` output.
    RowBlocks,
    /// `(r · n + it, c)` of a `[p·n, f]` output.
    RowInterleave,
    /// `(r, it · f + c)` of a `[p, n·f]` output.
    ColBlocks,
    /// `(r, c · n + it)` of a `[p, f·n]` output.
    ColInterleave,
    /// `(it · f + c, r)` of an `[n·f, p]` output (a transposing store).
    Transposed,
}

impl Layout {
    /// The output's `[rows, cols]` for `n` iterations of a `[p, f]` tile.
    pub fn shape(self, n: u32, p: u32, f: u32) -> [u32; 2] {
        match self {
            Layout::RowBlocks | Layout::RowInterleave => [n * p, f],
            Layout::ColBlocks | Layout::ColInterleave => [p, n * f],
            Layout::Transposed => [n * f, p],
        }
    }

    /// The output element of tile element `(r, c)` in iteration `it` of `n`.
    pub fn element(self, n: i64, it: i64, p: i64, f: i64, r: i64, c: i64) -> (i64, i64) {
        match self {
            Layout::RowBlocks => (it * p + r, c),
            Layout::RowInterleave => (r * n + it, c),
            Layout::ColBlocks => (r, it * f + c),
            Layout::ColInterleave => (r, c * n + it),
            Layout::Transposed => (it * f + c, r),
        }
    }
}

/// A loop-carried accumulation, stored once after the loops (in `RowBlocks` layout of a single
/// iteration).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Carry {
    /// In a stage whose loops are all `sequential_range`: an SBUF tile shaped like the result,
    /// declared before the loops and set to `init`, updated by every iteration with
    /// `acc = acc op result`.
    Tile {
        /// The accumulator's dtype.
        dt: Dt,
        /// Its initial value.
        init: f32,
        /// The update.
        op: Bin,
    },
    /// NKI's `acc += nc_matmul(...)` over every loop of the stage (affine or sequential): the
    /// result step (a matmul) accumulates into one zeroed PSUM tile declared before the loops,
    /// as an accumulation group; after the loops it is copied to an SBUF tile of `dt`.
    Group {
        /// The dtype of the SBUF copy that is stored.
        dt: Dt,
    },
    /// NKI's SBUF accumulation over loops of any kind (`affine_range` too): an SBUF tile
    /// shaped like the result, declared before the loops and set to `init`, into which every
    /// iteration's result is combined by one `tensor_copy` with `Write::Accumulate(op)`
    /// (`acc op= result`, a read-modify-write that affine iterations may share). `op` is
    /// `Add` (an f32 accumulator; the iterations' order is not promised, so a range),
    /// `Max` or `Min` (exact).
    Accumulate {
        /// The accumulator's dtype.
        dt: Dt,
        /// Its initial value.
        init: f32,
        /// The combination.
        op: Bin,
    },
}

impl Carry {
    /// The dtype of the tile that is stored.
    pub fn dt(self) -> Dt {
        match self {
            Carry::Tile { dt, .. } | Carry::Group { dt } | Carry::Accumulate { dt, .. } => dt,
        }
    }
}

/// A loop nest with a body of steps whose result is stored to one output.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    /// The nest, outermost first (0 to 2 loops).
    pub loops: Vec<Loop>,
    /// The body, run once per iteration; step `i` writes tile `i`.
    pub steps: Vec<Step>,
    /// The step whose tile is the result (an SBUF tile).
    pub result: usize,
    /// The output written.
    pub output: usize,
    /// Where the result goes (with `carry`, the accumulator is stored once, in `RowBlocks`
    /// layout of a single iteration).
    pub layout: Layout,
    /// A loop-carried accumulator, or `None`: each iteration stores its result.
    pub carry: Option<Carry>,
    /// The `[rows, cols]` box of the result that is stored (its written elements; the whole
    /// tile unless a mask cut it): the store is masked to it, and the layout places blocks of
    /// this shape.
    pub stored: [u32; 2],
    /// With `RowBlocks` (no carry): rows missing from the last block (`0..stored[0]`). The
    /// output has `n·stored[0] − ragged` rows, and the store's mask carries NKI's ragged-tile
    /// term `it·stored[0] + t_0 < rows`, a bound that depends on the loop variables.
    pub ragged: u32,
}

impl Stage {
    /// Iterations of the whole nest.
    pub fn iterations(&self) -> u32 {
        self.loops.iter().map(|l| l.trip).product()
    }

    /// The loop variables of flattened iteration `it` (row-major over the nest).
    pub fn vars(&self, mut it: u32) -> Vec<i64> {
        let mut v = vec![0i64; self.loops.len()];
        for (d, l) in self.loops.iter().enumerate().rev() {
            v[d] = i64::from(it % l.trip);
            it /= l.trip;
        }
        v
    }

    /// `Π trip[e > d]`: the flattened iteration's step per variable `d`.
    pub fn strides(&self) -> Vec<i64> {
        (0..self.loops.len())
            .map(|d| {
                self.loops[d + 1..]
                    .iter()
                    .map(|l| i64::from(l.trip))
                    .product()
            })
            .collect()
    }
}

/// A 2-D HBM tensor.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// Its dtype.
    pub dt: Dt,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
}

impl Tensor {
    /// Its element count.
    pub fn len(&self) -> usize {
        self.rows as usize * self.cols as usize
    }
}

/// A whole program: stages run one after the other, stage `s` writing output `s`.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The inputs.
    pub inputs: Vec<Tensor>,
    /// The outputs, one per stage.
    pub outputs: Vec<Tensor>,
    /// The stages.
    pub stages: Vec<Stage>,
}

/// A program and the values of its inputs (each exactly representable in its dtype, row-major).
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The program.
    pub program: Program,
    /// One vector per input.
    pub inputs: Vec<Vec<f32>>,
}
