//! The kernel as this crate models it: a signature of HBM tensors and a body of the
//! statements and expressions a kernel may contain, each with the span of its tokens.

use crate::span::Span;
use nki_lang::{DType, Target};
use syn::Ident;

/// One pair of `with_schedule = [...]`: `("a", "b")` or `("a", ["b", "c"])`.
#[derive(Clone)]
pub struct ScheduleEdge {
    /// The name that waits, with its span.
    pub after: (String, Span),
    /// The names it waits for, each with its span.
    pub before: Vec<(String, Span)>,
}

/// A parsed `#[kernel]` function.
#[derive(Clone)]
pub struct Kernel {
    /// Outer attributes to keep on the generated function (doc comments).
    pub attrs: Vec<syn::Attribute>,
    /// Visibility of the kernel.
    pub vis: syn::Visibility,
    /// The kernel's name.
    pub name: Ident,
    /// The target generation from `#[kernel(target = ...)]`.
    pub target: Target,
    /// NKI's `kernel.with_schedule([...])` from `#[kernel(with_schedule = [...])]`: each pair
    /// as written, the name that waits and the names it waits for, with their spans.
    pub schedule: Vec<ScheduleEdge>,
    /// `#[kernel(strict_hardware)]`: refuse what NKI 0.3+ simulates but the device cannot run.
    pub strict_hardware: bool,
    /// Compile-time parameters (`const TILES: usize`), in declaration order.
    pub meta: Vec<MetaParam>,
    /// The instantiations the attribute lists (`#[kernel(mm_16(TILES = 16))]`).
    pub instances: Vec<Instance>,
    /// The helpers the body may call, gathered from their `#[helper]` definitions.
    pub helpers: Vec<Helper>,
    /// Parameters: HBM input tensors.
    pub params: Vec<Param>,
    /// Declared return types, in order.
    pub returns: Vec<TensorType>,
    /// Span of the return type (or of the name when there is none).
    pub returns_span: Span,
    /// The body.
    pub body: Block,
}

/// A helper: a function of tiles, indices and numbers (`#[helper] fn f(x: Tile, k: usize) ->
/// Tile { .. }`) that kernels call and `#[kernel]` inlines.
#[derive(Clone)]
pub struct Helper {
    /// Its name.
    pub name: Ident,
    /// Its parameters' names.
    pub params: Vec<Ident>,
    /// Its body; the tail is its value.
    pub body: Block,
}

/// A meta-parameter: `const NAME: usize` (an integer type), `const NAME: f32` (a float type,
/// which Rust's own const generics lack but a kernel's compile-time values may be) or
/// `const NAME: bool`.
#[derive(Clone)]
pub struct MetaParam {
    /// Its name.
    pub name: Ident,
    /// What values it takes.
    pub kind: MetaKind,
}

/// The kind of value a meta-parameter takes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MetaKind {
    /// An integer.
    Int,
    /// A float.
    Float,
    /// A boolean.
    Bool,
    /// A dtype (a type parameter, `T` in `Hbm<T, N>`).
    DType,
}

/// A meta-parameter's value in an instantiation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MetaValue {
    /// An integer.
    Int(i64),
    /// A float (its bits: the value is compared and emitted exactly).
    Float(u64),
    /// A boolean.
    Bool(bool),
    /// A dtype.
    DType(DType),
}

impl MetaValue {
    /// The kind of meta-parameter that takes the value (an integer also sets a float).
    pub fn fits(self, kind: MetaKind) -> bool {
        matches!(
            (self, kind),
            (MetaValue::Int(_), MetaKind::Int | MetaKind::Float)
                | (MetaValue::Float(_), MetaKind::Float)
                | (MetaValue::Bool(_), MetaKind::Bool)
                | (MetaValue::DType(_), MetaKind::DType)
        )
    }
}

impl std::fmt::Display for MetaValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetaValue::Int(n) => write!(f, "{n}"),
            MetaValue::Float(b) => write!(f, "{:?}", f64::from_bits(*b)),
            MetaValue::Bool(b) => write!(f, "{b}"),
            MetaValue::DType(d) => write!(f, "{}", d.name()),
        }
    }
}

/// One instantiation: `name(P = value, ...)`, a kernel of its own.
#[derive(Clone)]
pub struct Instance {
    /// The instantiated kernel's name.
    pub name: Ident,
    /// Each meta-parameter's value, with the span of the value.
    pub values: Vec<(Ident, MetaValue, Span)>,
}

/// A kernel parameter.
#[derive(Clone)]
pub struct Param {
    /// Its name.
    pub name: Ident,
    /// The name the launch functions bind it to: its own, or, when its own cannot be bound
    /// there (reported), one of the expansion's own.
    pub binding: Ident,
    /// Its tensor type.
    pub ty: TensorType,
}

/// `Hbm<dtype, d0, d1, ...>`.
#[derive(Clone)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// The dtype meta-parameter that gives the element type (`T` in `Hbm<T, N>`), resolved
    /// per instantiation.
    pub dtype_param: Option<Ident>,
    /// Dimensions.
    pub dims: Vec<DimSpec>,
    /// Span of the whole type.
    pub span: Span,
}

/// A dimension in a signature.
#[derive(Clone)]
pub enum DimSpec {
    /// A literal size.
    Lit(u64),
    /// A symbolic size, bound at launch (or a meta-parameter's value).
    Sym(Ident),
    /// `{ expr }`: a size computed at compile time from meta-parameters.
    Expr(Expr),
}

/// A sequence of statements, optionally ending in a value.
#[derive(Clone)]
pub struct Block {
    /// Statements.
    pub stmts: Vec<Stmt>,
    /// The trailing expression (the kernel's return value).
    pub tail: Option<Expr>,
}

/// A statement of a kernel body.
#[derive(Clone)]
pub enum Stmt {
    /// `let x = e;`, `let (a, b) = e;` or `const X: T = e;`.
    Let {
        /// The bound names (`None` for `_`).
        names: Vec<Option<Ident>>,
        /// Whether the pattern was a tuple.
        tuple: bool,
        /// The value.
        value: Expr,
    },
    /// An expression evaluated for its effect (`store(...)`).
    Expr(Expr),
    /// `target = value;`
    Assign {
        /// The destination (a tile or an indexed tile).
        target: Expr,
        /// The value.
        value: Expr,
    },
    /// `target op= value;` (`+=`, `-=`, `*=`, `/=`, `&=`, `|=`, `^=`, `<<=`, `>>=`): an
    /// accumulation into a tile.
    OpAssign {
        /// The operator.
        op: BinOp,
        /// The accumulator.
        target: Expr,
        /// The value.
        value: Expr,
        /// Span of the whole statement.
        span: Span,
    },
    /// `assert!(cond)`, `assert!(cond, "message")`, `assert_eq!(a, b)`, `assert_ne!(a, b)`:
    /// NKI's Python `assert`, checked when the kernel compiles.
    Assert {
        /// The condition.
        cond: Expr,
        /// What a failure reports: the message, or the condition's source.
        message: String,
    },
    /// `no_reorder! { ... }`: NKI's `with nl.no_reorder():`, the block's instructions kept in
    /// program order.
    NoReorder {
        /// The statements.
        body: Block,
    },
    /// `for var in iter(trip) { body }`, `iter(start, stop)`, `iter(start, stop, step)`
    For {
        /// The induction variable (`None` for `_`).
        var: Option<Ident>,
        /// Which iterator.
        kind: IterKind,
        /// The first value, when the iterator is given one (`affine_range(start, stop)`).
        start: Option<Box<Expr>>,
        /// The end (exclusive): the trip count when there is no start and no step.
        trip: Expr,
        /// The step, when the iterator is given one (`affine_range(start, stop, step)`).
        step: Option<Box<Expr>>,
        /// Span of the iterator call.
        iter_span: Span,
        /// The body.
        body: Block,
    },
}

/// NKI's loop iterators.
#[derive(Copy, Clone, PartialEq, Eq)]
pub enum IterKind {
    /// `affine_range`
    Affine,
    /// `sequential_range` (and plain `range`, as NKI converts it)
    Sequential,
    /// `static_range`: unrolled at compile time
    Static,
    /// NKI's `dynamic_range` (bounds in registers read at run time): a device loop
    Dynamic,
}

/// A binary operator: index arithmetic on integers and indices, elementwise operations on
/// tiles, comparisons (masks, predicates), and `&` joining mask conditions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (integer division, NKI's `//`, on integers; division on tiles)
    Div,
    /// `%`
    Rem,
    /// `&`
    BitAnd,
    /// `|`
    BitOr,
    /// `^`
    BitXor,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl BinOp {
    /// The operator's token.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
        }
    }
}

/// An argument of a call: positional, or `name = value` (NKI's keyword arguments).
#[derive(Clone)]
pub struct Arg {
    /// The keyword, if any.
    pub name: Option<Ident>,
    /// The value.
    pub value: Expr,
}

/// An expression of a kernel body.
#[derive(Clone)]
pub enum Expr {
    /// An integer literal.
    Int(i64, Span),
    /// `true` / `false`.
    Bool(bool, Span),
    /// A float literal (for `full` / `memset` values).
    Float(f64, Span),
    /// A string literal: a dimension name of `rearrange`'s patterns.
    Str(String, Span),
    /// A name: a variable, a dtype (`bf16`), a buffer (`Psum`), a symbolic dim.
    Name(Ident),
    /// Arithmetic.
    Binary {
        /// Operator.
        op: BinOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
        /// Span of the whole expression.
        span: Span,
    },
    /// `-e`
    Neg(Box<Expr>, Span),
    /// `!e`: bitwise not of an integer tile, logical not of a bool tile.
    Not(Box<Expr>, Span),
    /// A call of a language function: `load(...)`, `nc_matmul(...)`, ...
    Call {
        /// The function.
        func: Ident,
        /// Arguments.
        args: Vec<Arg>,
        /// Span of the whole call.
        span: Span,
    },
    /// A call with NKI's `name = "..."`: the instructions it makes carry the name.
    Named {
        /// The call.
        call: Box<Expr>,
        /// The name.
        name: String,
        /// Span of the name's literal.
        name_span: Span,
    },
    /// A method call: `arange(128).p()`.
    Method {
        /// Receiver.
        recv: Box<Expr>,
        /// Method.
        method: Ident,
        /// Arguments.
        args: Vec<Arg>,
        /// Span of the whole call.
        span: Span,
    },
    /// A field: `grid.p`, `result.dtype`.
    Field {
        /// Base.
        base: Box<Expr>,
        /// Field name.
        field: Ident,
        /// Span.
        span: Span,
    },
    /// `base[[i, j]]` or `base[..]`.
    Index {
        /// The indexed tensor or tile.
        base: Box<Expr>,
        /// One index per axis (a single `..` covers every axis).
        indices: Vec<Expr>,
        /// Span of the whole expression.
        span: Span,
    },
    /// `a..b`, `a..`, `..b`, `..`.
    Range {
        /// Start.
        start: Option<Box<Expr>>,
        /// End (exclusive).
        end: Option<Box<Expr>>,
        /// Span.
        span: Span,
    },
    /// `[a, b, c]`: a shape.
    Array(Vec<Expr>, Span),
    /// `(a, b)`: several return values.
    Tuple(Vec<Expr>, Span),
    /// `mgrid![0..128, 0..512]`.
    Mgrid(Vec<Expr>, Span),
    /// An expression that failed to parse (already reported): its value is erroneous, so that
    /// names bound to it cause no further errors.
    Error(Span),
    /// `|i| { .. }`: a device loop's body (`fori_loop`, `while_loop`), the only place a closure
    /// may appear.
    Closure {
        /// The parameters (`None` for `_`).
        params: Vec<Option<Ident>>,
        /// The body; its tail is `while_loop`'s next condition register.
        body: Box<Block>,
        /// Span of the whole closure.
        span: Span,
    },
    /// `if cond { .. } else { .. }` on a condition known at compile time (a meta-parameter, a
    /// constant): only the branch taken is compiled; its value is its block's tail.
    If {
        /// The condition.
        cond: Box<Expr>,
        /// The branch taken when it holds.
        then: Box<Block>,
        /// The other branch (an `else if` is a block whose tail is the inner `if`).
        els: Option<Box<Block>>,
        /// Span of the whole expression.
        span: Span,
    },
}

impl Expr {
    /// The expression's span.
    pub fn span(&self) -> Span {
        match self {
            Expr::Int(_, s)
            | Expr::Bool(_, s)
            | Expr::Float(_, s)
            | Expr::Str(_, s)
            | Expr::Neg(_, s)
            | Expr::Not(_, s) => *s,
            Expr::Name(i) => i.span().into(),
            Expr::Named { call, .. } => call.span(),
            Expr::Binary { span, .. }
            | Expr::Call { span, .. }
            | Expr::Method { span, .. }
            | Expr::Field { span, .. }
            | Expr::Index { span, .. }
            | Expr::If { span, .. }
            | Expr::Closure { span, .. }
            | Expr::Range { span, .. } => *span,
            Expr::Array(_, s) | Expr::Tuple(_, s) | Expr::Mgrid(_, s) | Expr::Error(s) => *s,
        }
    }
}
