//! NKI 0.6's view methods on tiles, HBM tensors and accesses: `t.slice(dim, start, end, step)`,
//! `t.select(dim, index)`, `t.permute(dims)`, `t.broadcast(dim, size)`, `t.expand_dim(dim)`,
//! `t.squeeze_dim(dim)`, `t.reshape_dim(dim, shape)`, `t.flatten_dims(start_dim, end_dim)` and
//! `t.reshape(shape)` of a tile or an access.
//!
//! Each is a new access of the same storage, no instruction: the rule and the new layout come
//! from [`nki_lang::view`]; a tile's view is built by the indexing machinery
//! ([`Lowerer::tile_view`], which checks partitions and bounds as for `t[[...]]`), an HBM
//! access's by composing its affine indices with the view's map.

use crate::span::Span;
use nki_lang::view::{self, Restrided, ViewError, ViewMap};
use nki_lang::{Affine, DType, Dim, MAX_TILE_RANK, TileShape, TileView};

use super::Lowerer;
use super::value::{Access, Hbm, Idx, Value};
use crate::parse::model::{Arg, Expr};

/// Whether `name` is a view method.
pub(super) fn is_view_method(name: &str) -> bool {
    PARAMS.iter().any(|(m, _)| *m == name)
}

/// The view methods and their parameters, NKI's names in NKI's order.
const PARAMS: &[(&str, &[&str])] = &[
    ("slice", &["dim", "start", "end", "step"]),
    ("select", &["dim", "index"]),
    ("permute", &["dims"]),
    ("broadcast", &["dim", "size"]),
    ("expand_dim", &["dim"]),
    ("squeeze_dim", &["dim"]),
    ("reshape_dim", &["dim", "shape"]),
    ("flatten_dims", &["start_dim", "end_dim"]),
    ("reshape", &["shape"]),
    ("rearrange", &["src_pattern", "dst_pattern", "fixed_sizes"]),
    ("view", &["dtype"]),
    (
        "ap",
        &[
            "pattern",
            "offset",
            "scalar_offset",
            "vector_offset",
            "indirect_dim",
            "dtype",
        ],
    ),
];

/// The parameters of view method `method`.
fn params_of(method: &str) -> &'static [&'static str] {
    PARAMS
        .iter()
        .find(|(m, _)| *m == method)
        .map_or(&[], |(_, p)| p)
}

/// A view method that maps axes, applied to the viewed dimensions (`None`: symbolic) and
/// whether the tensor is on chip.
type MapFn = Box<dyn Fn(&[Option<u32>], bool) -> Result<ViewMap, ViewError>>;

/// A method's arguments, read.
enum Call {
    /// A view that is an affine map of the viewed axes.
    Map(MapFn),
    /// `flatten_dims(start, end)`.
    Flatten(i64, i64),
    /// `reshape(shape)`.
    Reshape(Vec<i64>),
    /// `rearrange(src_pattern, dst_pattern, fixed_sizes)`.
    Rearrange(Rearrange),
    /// `view(dtype)`: the same bytes read as another dtype.
    Dtype(DType),
    /// `ap(pattern, offset, dtype)`: `[step, count]` pairs over the tensor flattened, a static
    /// offset, the dtype the storage is read as, and an offset read at run time.
    Ap(Vec<(i64, i64)>, i64, Option<DType>, Option<Box<ApDynamic>>),
}

/// `ap`'s offset read at run time, with its `indirect_dim`.
#[derive(Copy, Clone)]
struct ApDynamic {
    /// The offset's tile: one int32 or uint32 element (`scalar_offset`), or a `[P, 1]` column
    /// of one index per partition (`vector_offset`).
    index: TileView,
    /// `vector_offset` (one index per partition) rather than `scalar_offset`.
    vector: bool,
    /// The tensor's dimension the offset counts along (`indirect_dim`).
    dim: i64,
}

/// `rearrange`'s arguments, read.
struct Rearrange {
    src: Vec<Vec<String>>,
    dst: Vec<Vec<String>>,
    fixed: Vec<(String, i64)>,
}

impl Rearrange {
    /// The plan for a tensor of dimensions `dims`.
    fn plan(&self, dims: &[Option<u32>], on_chip: bool) -> Result<view::RearrangePlan, ViewError> {
        view::rearrange(dims, on_chip, &self.src, &self.dst, &self.fixed)
    }
}

/// Where a view's error is reported: the span of the argument it is about (else the call's),
/// and what the message starts with (a `rearrange` step names itself).
struct Blame<'a> {
    at: &'a dyn Fn(&ViewError) -> Span,
    prefix: &'a str,
}

/// A shape padded to the two axes an access or a tile has at least (a trailing size-1 axis, as
/// `t[[0, 0..128]]` gives).
fn padded(dims: &[u32]) -> Option<TileShape> {
    let mut d = dims.to_vec();
    while d.len() < 2 {
        d.push(1);
    }
    TileShape::new(&d)
}

/// A tile view's shape ([`padded`]) and free strides from a view's dimensions and the tile
/// component's stride per dimension (the first, the partition's, is the tile's own).
fn tile_layout(dims: &[u32], strides: &[i64]) -> Option<(TileShape, [i64; MAX_TILE_RANK - 1])> {
    let shape = padded(dims)?;
    let mut free = [0i64; MAX_TILE_RANK - 1];
    for (s, &x) in free.iter_mut().zip(strides.iter().skip(1)) {
        *s = x;
    }
    Some((shape, free))
}

impl Lowerer<'_> {
    /// `recv.method(args)` for a view method ([`is_view_method`]) on a tile, an HBM tensor or an
    /// access.
    pub(super) fn view_method(
        &mut self,
        recv: Value,
        method: &str,
        args: &[Arg],
        span: Span,
    ) -> Value {
        let Some(&(method, _)) = PARAMS.iter().find(|(m, _)| *m == method) else {
            unreachable!("a view method")
        };
        let call = match self.view_call(method, args, span) {
            Some(c) => c,
            None => return Value::Poison,
        };
        // The argument the error is about, else the call.
        let params = params_of(method);
        let at = |e: &ViewError| {
            e.param()
                .and_then(|p| {
                    let k = params.iter().position(|q| *q == p)?;
                    args.iter()
                        .find(|a| a.name.as_ref().is_some_and(|n| n == p))
                        .or_else(|| args.iter().filter(|a| a.name.is_none()).nth(k))
                })
                .map_or(span, |a| a.value.span())
        };
        self.apply_view(
            recv,
            method,
            call,
            span,
            &Blame {
                at: &at,
                prefix: "",
            },
        )
    }

    /// Applies a view method's call to `recv`.
    fn apply_view(
        &mut self,
        recv: Value,
        method: &'static str,
        call: Call,
        span: Span,
        blame: &Blame<'_>,
    ) -> Value {
        let fail = |this: &mut Self, e: ViewError| {
            this.error((blame.at)(&e), format!("{}{e}", blame.prefix))
        };
        match recv {
            Value::Poison => Value::Poison,
            Value::Blocks { .. } => self.error(
                span,
                format!("`{method}` views a tile: select a block of a tile with block axes first (`t[k]`)"),
            ),
            Value::Tile(v) => {
                let dims: Vec<Option<u32>> = v.shape.dims().iter().map(|&d| Some(d)).collect();
                match call {
                    Call::Map(f) => match f(&dims, true) {
                        Ok(m) => self.tile_map(v, &m, span),
                        Err(e) => fail(self, e),
                    },
                    Call::Flatten(s, e) => {
                        let st = tile_strides(&v);
                        match view::flatten_dims(v.shape.dims(), &st, true, s, e) {
                            Ok(r) => self.tile_restrided(v, &r, span),
                            Err(e) => fail(self, e),
                        }
                    }
                    Call::Reshape(shape) => {
                        let st = tile_strides(&v);
                        match view::reshape(v.shape.dims(), &st, true, &shape) {
                            Ok(r) => self.tile_restrided(v, &r, span),
                            Err(e) => fail(self, e),
                        }
                    }
                    Call::Rearrange(r) => match r.plan(&dims, true) {
                        Ok(plan) => self.rearranged(Value::Tile(v), plan, span),
                        Err(e) => fail(self, e),
                    },
                    Call::Ap(_, _, _, Some(_)) => self.error(span, "`ap` of an SBUF or PSUM tile with `scalar_offset` or `vector_offset` is not accepted yet: the offsets index HBM tensors here (`x.ap(..., scalar_offset = i)` in `dma_copy`); within SBUF, `tensor_copy_dynamic_src(t[[ix, i_sb[[0, 0]] + iy]])`"),
                    Call::Ap(pattern, offset, dtype, None) => self.tile_ap(v, &pattern, offset, dtype, blame, span),
                    Call::Dtype(to) => {
                        let own = self.buf.tiles[v.tile as usize].dtype;
                        let st = tile_strides(&v);
                        match view::view_dtype(v.shape.dims(), &st, &[v.offset], v.dtype_of(own), to) {
                            Ok(r) => self.tile_reinterpreted(v, &r, (own, to), span),
                            Err(e) => fail(self, e),
                        }
                    }
                }
            }
            Value::Access(a) => {
                if a.indirect.is_some() {
                    return self.error(
                        span,
                        format!("`{method}` of an access with indirect indices: view the tensor first, then index it with the indices (`t.slice(...)[[idx, i_f]]`)"),
                    );
                }
                let dims: Vec<Option<u32>> = a.shape.dims().iter().map(|&d| Some(d)).collect();
                match call {
                    Call::Map(f) => match f(&dims, false) {
                        Ok(m) => self.access_map(a, &m, method, span),
                        Err(e) => fail(self, e),
                    },
                    Call::Flatten(s, e) => {
                        let st = access_strides(&a);
                        match view::flatten_dims(a.shape.dims(), &st, false, s, e) {
                            Ok(r) => self.access_restrided(a, &r, span),
                            Err(e) => fail(self, e),
                        }
                    }
                    Call::Reshape(shape) => {
                        let st = access_strides(&a);
                        match view::reshape(a.shape.dims(), &st, false, &shape) {
                            Ok(r) => self.access_restrided(a, &r, span),
                            Err(e) => fail(self, e),
                        }
                    }
                    Call::Rearrange(r) => match r.plan(&dims, false) {
                        Ok(plan) => self.rearranged(Value::Access(a), plan, span),
                        Err(e) => fail(self, e),
                    },
                    Call::Ap(..) => self.error(span, "`ap` of an HBM access (a view of the tensor) is not accepted yet: `ap` the tensor itself, whose pattern counts its elements row-major"),
                    Call::Dtype(to) => {
                        let own = self.tensors[a.tensor].dtype;
                        match access_reinterpreted(&a, a.dtype.unwrap_or(own), to) {
                            Ok(mut a) => {
                                a.dtype = (to != own).then_some(to);
                                Value::Access(a)
                            }
                            Err(e) => fail(self, e),
                        }
                    }
                }
            }
            Value::Tensor(h) => {
                let dims = self.tensor_dims(&h);
                match call {
                    Call::Map(f) => {
                        let m = match f(&dims, false) {
                            Ok(m) => m,
                            Err(e) => return fail(self, e),
                        };
                        // `q.select(0, b)` is `q[[b]]`: the tensor of the remaining axes, whose
                        // dimensions may stay symbolic.
                        if method == "select" && dims.len() >= 2 && m.axes[0].coef == [0; MAX_TILE_RANK] {
                            let mut h = h;
                            h.prefix.push(m.axes[0].start);
                            return Value::Tensor(h);
                        }
                        let whole = match self.whole_access(&h, &dims, true, method, span) {
                            Some(a) => a,
                            None => return Value::Poison,
                        };
                        self.access_map(whole, &m, method, span)
                    }
                    Call::Ap(pattern, offset, dtype, dynamic) => {
                        if !h.prefix.is_empty() {
                            return self.error(span, "`ap` of a tensor indexed on its leading axes is not accepted yet: `ap` the whole tensor, with the offset of the part");
                        }
                        self.tensor_ap(&h, (&pattern, offset), dtype, dynamic.map(|d| *d), blame, span)
                    }
                    Call::Flatten(..) | Call::Reshape(_) | Call::Rearrange(_) | Call::Dtype(_) => {
                        let Some(a) = self.whole_access(&h, &dims, false, method, span) else {
                            return Value::Poison;
                        };
                        self.apply_view(Value::Access(a), method, call, span, blame)
                    }
                }
            }
            other => self.error(span, format!("no method `{method}` on {}", other.describe())),
        }
    }

    /// `rearrange`'s plan applied to `v`: its splits, permutation and merges in turn, each
    /// step's error reported on the whole call.
    fn rearranged(&mut self, mut v: Value, plan: view::RearrangePlan, span: Span) -> Value {
        let at = |_: &ViewError| span;
        let mut steps: Vec<(&'static str, Call)> = Vec::new();
        for (dim, sizes) in plan.splits {
            steps.push((
                "reshape_dim",
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::reshape_dim(d, c, dim, &sizes)
                })),
            ));
        }
        if plan
            .perm
            .iter()
            .enumerate()
            .any(|(k, &p)| i64::try_from(k) != Ok(p))
        {
            let perm = plan.perm;
            steps.push((
                "permute",
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::permute(d, c, &perm)
                })),
            ));
        }
        for (s, e) in plan.merges {
            steps.push(("flatten_dims", Call::Flatten(s, e)));
        }
        for (method, call) in steps {
            let prefix = format!("`rearrange` (its `{method}` step): ");
            v = self.apply_view(
                v,
                method,
                call,
                span,
                &Blame {
                    at: &at,
                    prefix: &prefix,
                },
            );
            if matches!(v, Value::Poison) {
                return v;
            }
        }
        v
    }

    /// Reads a view method's arguments (NKI's names, by position or keyword).
    fn view_call(&mut self, method: &str, args: &[Arg], span: Span) -> Option<Call> {
        Some(match method {
            "slice" => {
                let a = self.args(method, args, params_of(method), 3, span)?;
                let dim = self.int(a[0]?, "`slice`'s dim")?;
                let start = self.affine_arg(a[1]?)?;
                let end = self.affine_arg(a[2]?)?;
                let step = match a[3] {
                    Some(e) => self.int(e, "`slice`'s step")?,
                    None => 1,
                };
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::slice(d, c, dim, start, end, step)
                }))
            }
            "select" => {
                let a = self.args(method, args, params_of(method), 2, span)?;
                let dim = self.int(a[0]?, "`select`'s dim")?;
                let e = a[1]?;
                let index = match self.eval(e) {
                    Value::Tile(_) => {
                        self.error(e.span(), "`select` with an index read at run time (NKI 0.6's dynamic select of a tile's value) is not in the language: index an HBM tensor's partition axis with a `[P, 1]` tile of indices (`t[[idx, i_f]]`), or copy with `tensor_copy_dynamic_src`");
                        return None;
                    }
                    v => self.basic(v, e.span())?,
                };
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::select(d, c, dim, index)
                }))
            }
            "permute" => {
                let a = self.args(method, args, params_of(method), 1, span)?;
                let dims = self.int_list(a[0]?, "`permute`'s dims")?;
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::permute(d, c, &dims)
                }))
            }
            "broadcast" => {
                let a = self.args(method, args, params_of(method), 2, span)?;
                let dim = self.int(a[0]?, "`broadcast`'s dim")?;
                let size = self.int(a[1]?, "`broadcast`'s size")?;
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::broadcast(d, c, dim, size)
                }))
            }
            "expand_dim" => {
                let a = self.args(method, args, params_of(method), 1, span)?;
                let dim = self.int(a[0]?, "`expand_dim`'s dim")?;
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::expand_dim(d, c, dim)
                }))
            }
            "squeeze_dim" => {
                let a = self.args(method, args, params_of(method), 1, span)?;
                let dim = self.int(a[0]?, "`squeeze_dim`'s dim")?;
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::squeeze_dim(d, c, dim)
                }))
            }
            "reshape_dim" => {
                let a = self.args(method, args, params_of(method), 2, span)?;
                let dim = self.int(a[0]?, "`reshape_dim`'s dim")?;
                let shape = self.int_list(a[1]?, "`reshape_dim`'s shape")?;
                Call::Map(Box::new(move |d: &[Option<u32>], c: bool| {
                    view::reshape_dim(d, c, dim, &shape)
                }))
            }
            "flatten_dims" => {
                let a = self.args(method, args, params_of(method), 2, span)?;
                let s = self.int(a[0]?, "`flatten_dims`'s start_dim")?;
                let e = self.int(a[1]?, "`flatten_dims`'s end_dim")?;
                Call::Flatten(s, e)
            }
            "reshape" => {
                if let Some(a) = args
                    .iter()
                    .find(|a| a.name.as_ref().is_some_and(|n| n != "shape"))
                {
                    self.error(
                        a.value.span(),
                        "`reshape` takes the new shape only (`shape`)",
                    );
                    return None;
                }
                let shape = match args {
                    [a] => self.int_list(&a.value, "`reshape`'s shape")?,
                    _ => {
                        let mut out = Vec::with_capacity(args.len());
                        for a in args {
                            out.push(self.int(&a.value, "a dimension of `reshape`")?);
                        }
                        out
                    }
                };
                Call::Reshape(shape)
            }
            "view" => {
                let a = self.args(method, args, params_of(method), 1, span)?;
                Call::Dtype(self.dtype_arg(a[0]?)?)
            }
            "ap" => {
                let a = self.args(method, args, params_of(method), 1, span)?;
                let dynamic = self.ap_dynamic([a[2], a[3], a[4]])?;
                let pattern = self.ap_pattern(a[0]?)?;
                let offset = match a[1] {
                    Some(e) => self.int(e, "`ap`'s offset")?,
                    None => 0,
                };
                let dtype = match a[5] {
                    Some(e) => Some(self.dtype_arg(e)?),
                    None => None,
                };
                Call::Ap(pattern, offset, dtype, dynamic.map(Box::new))
            }
            "rearrange" => {
                let a = self.args(method, args, params_of(method), 2, span)?;
                let src = self.name_pattern(a[0]?, "src_pattern")?;
                let dst = self.name_pattern(a[1]?, "dst_pattern")?;
                let fixed = match a[2] {
                    Some(e) => self.fixed_sizes(e)?,
                    None => Vec::new(),
                };
                Call::Rearrange(Rearrange { src, dst, fixed })
            }
            _ => unreachable!("a view method"),
        })
    }

    /// A `rearrange` pattern: a tuple whose entries are names (`"b"`) or tuples of names
    /// (`("h", "w")`, a group).
    fn name_pattern(&mut self, e: &Expr, param: &str) -> Option<Vec<Vec<String>>> {
        let usage = "a tuple of dimension names and tuples of names (`(\"b\", (\"h\", \"w\"))`)";
        let items = match e {
            Expr::Tuple(items, _) | Expr::Array(items, _) => items.as_slice(),
            Expr::Str(..) => std::slice::from_ref(e),
            other => {
                self.error(other.span(), format!("`rearrange`'s {param} is {usage}"));
                return None;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Expr::Str(n, _) => out.push(vec![n.clone()]),
                Expr::Tuple(group, _) | Expr::Array(group, _) => {
                    let mut names = Vec::with_capacity(group.len());
                    for g in group {
                        let Expr::Str(n, _) = g else {
                            self.error(g.span(), format!("a group of `rearrange`'s {param} holds dimension names (string literals), as in {usage}"));
                            return None;
                        };
                        names.push(n.clone());
                    }
                    out.push(names);
                }
                other => {
                    self.error(other.span(), format!("an entry of `rearrange`'s {param} is a dimension name (a string literal) or a tuple of them, as in {usage}"));
                    return None;
                }
            }
        }
        Some(out)
    }

    /// `ap`'s `scalar_offset`, `vector_offset` and `indirect_dim` (NKI's defaults: none, none,
    /// 0). A register as `scalar_offset` is stored into a one-element int32 SBUF tile of its own
    /// (`register_store`), which the DMA reads: the model's way to a register's value. `None`
    /// after an error; `Some(None)` without a run-time offset.
    fn ap_dynamic(
        &mut self,
        [scalar, vector, dim]: [Option<&Expr>; 3],
    ) -> Option<Option<ApDynamic>> {
        let dim = match dim {
            Some(e) => self.int(e, "`ap`'s indirect_dim")?,
            None => 0,
        };
        let (e, vector) = match (scalar, vector) {
            (None, None) => return Some(None),
            (Some(_), Some(v)) => {
                self.error(v.span(), "`ap` takes `scalar_offset` or `vector_offset`, not both (NKI: they are mutually exclusive)");
                return None;
            }
            (Some(e), None) => (e, false),
            (None, Some(e)) => (e, true),
        };
        let index = match self.eval(e) {
            Value::Tile(v) => v,
            Value::Reg(r) if !vector => {
                let shape = TileShape::new(&[1, 1])?;
                let Value::Tile(v) =
                    self.new_tile(None, nki_lang::Memory::Sbuf, DType::I32, shape, e.span())
                else {
                    return None;
                };
                let tile = self.view_id(v, e.span())?;
                let data = nki_lang::InstrData::Register {
                    reg: r,
                    src: nki_lang::RegSrc::None,
                    tile: Some(tile),
                };
                let spans = super::InstrSpans::at(e.span()).with(0, e.span());
                if !self.emit_checked(
                    nki_lang::Instr::new(nki_lang::Opcode::RegisterStore, data),
                    spans,
                ) {
                    return None;
                }
                v
            }
            Value::Poison => return None,
            other => {
                let msg = if vector {
                    format!(
                        "`ap`'s vector_offset is a `[P, 1]` int32 or uint32 SBUF tile of one index per partition, not {}",
                        other.describe()
                    )
                } else {
                    format!(
                        "`ap`'s scalar_offset is a one-element int32 or uint32 SBUF tile or a virtual register, not {}",
                        other.describe()
                    )
                };
                self.error(e.span(), msg);
                return None;
            }
        };
        Some(Some(ApDynamic { index, vector, dim }))
    }

    /// `ap`'s pattern: a list of `[step, count]` pairs of compile-time integers.
    fn ap_pattern(&mut self, e: &Expr) -> Option<Vec<(i64, i64)>> {
        let usage =
            "`ap`'s pattern is a list of [step, count] pairs of integers (`[[64, 128], [1, 16]]`)";
        let (Expr::Array(items, _) | Expr::Tuple(items, _)) = e else {
            self.error(e.span(), usage);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let (Expr::Array(pair, _) | Expr::Tuple(pair, _)) = item else {
                self.error(item.span(), usage);
                return None;
            };
            let [step, count] = pair.as_slice() else {
                self.error(item.span(), usage);
                return None;
            };
            let step = self.int(step, "a step of `ap`'s pattern")?;
            let count = self.int(count, "a count of `ap`'s pattern")?;
            out.push((step, count));
        }
        Some(out)
    }

    /// `rearrange`'s `fixed_sizes`: NKI's dict `{"h": 4}` as pairs, `[("h", 4)]` (an empty
    /// `[]` for none).
    fn fixed_sizes(&mut self, e: &Expr) -> Option<Vec<(String, i64)>> {
        let usage = "`rearrange`'s fixed_sizes is a list of (name, size) pairs, `[(\"h\", 4)]` (NKI's dict `{\"h\": 4}`)";
        let items = match e {
            Expr::Array(items, _) | Expr::Tuple(items, _) => items,
            other => {
                self.error(other.span(), usage);
                return None;
            }
        };
        // One pair alone, `("h", 4)`, is a tuple of a name and a size.
        if let [Expr::Str(n, _), size] = items.as_slice()
            && matches!(e, Expr::Tuple(..))
        {
            let size = self.int(size, "a size of `rearrange`'s fixed_sizes")?;
            return Some(vec![(n.clone(), size)]);
        }
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let pair = match item {
                Expr::Tuple(pair, _) => pair.as_slice(),
                _ => &[],
            };
            let [Expr::Str(n, _), size] = pair else {
                self.error(item.span(), usage);
                return None;
            };
            let size = self.int(size, "a size of `rearrange`'s fixed_sizes")?;
            out.push((n.clone(), size));
        }
        Some(out)
    }

    /// A slice bound or index: a compile-time integer, or loop-affine (`k * 128`).
    fn affine_arg(&mut self, e: &Expr) -> Option<Affine> {
        let v = self.eval(e);
        self.basic(v, e.span())
    }

    /// A tuple or array of compile-time integers (`(0, 2, 1)`, `[4, -1]`), or a shape (`x.shape`).
    fn int_list(&mut self, e: &Expr, what: &str) -> Option<Vec<i64>> {
        if let Expr::Array(items, _) | Expr::Tuple(items, _) = e {
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                out.push(self.int(i, what)?);
            }
            return Some(out);
        }
        match self.eval(e) {
            Value::Int(n) => Some(vec![n]),
            Value::Shape(dims) => {
                let mut out = Vec::with_capacity(dims.len());
                for d in dims {
                    match d {
                        Dim::Fixed(n) => out.push(i64::try_from(n).unwrap_or(i64::MAX)),
                        Dim::Sym(_) => {
                            self.error(e.span(), format!("{what} must be compile-time integers: this shape has a symbolic dimension"));
                            return None;
                        }
                    }
                }
                Some(out)
            }
            Value::Poison => None,
            other => {
                self.error(
                    e.span(),
                    format!(
                        "{what} is a tuple of integers (`(0, 2, 1)`), not {}",
                        other.describe()
                    ),
                );
                None
            }
        }
    }

    /// The dimensions of an HBM tensor (after its fixed leading axes), `None` where symbolic.
    fn tensor_dims(&self, h: &Hbm) -> Vec<Option<u32>> {
        match h.reshape {
            Some(r) => &self.buf.reshapes[r].shape,
            None => &self.tensors[h.tensor].shape,
        }
        .iter()
        .skip(h.prefix.len())
        .map(|d| match d {
            Dim::Fixed(n) => u32::try_from(*n).ok(),
            Dim::Sym(_) => None,
        })
        .collect()
    }

    /// The whole of an HBM tensor as an access (`t[..]`); its dimensions must be known.
    ///
    /// With `mapped`, the access is only the start of a map that sets the view's shape: a
    /// symbolic dimension has a placeholder size (1) there, and the map's result must be known
    /// (a symbolic dimension sliced with explicit bounds, `x.slice(0, i * 128, (i + 1) * 128)`).
    fn whole_access(
        &mut self,
        h: &Hbm,
        dims: &[Option<u32>],
        mapped: bool,
        method: &'static str,
        span: Span,
    ) -> Option<Access> {
        let mut fixed = Vec::with_capacity(dims.len());
        for (k, d) in dims.iter().enumerate() {
            match d {
                Some(n) => fixed.push(*n),
                None if mapped => fixed.push(1),
                None => {
                    self.error(span, ViewError::Symbolic { method, dim: k }.to_string());
                    return None;
                }
            }
        }
        if fixed.len() > MAX_TILE_RANK {
            self.error(
                span,
                ViewError::Rank {
                    method,
                    rank: fixed.len(),
                }
                .to_string(),
            );
            return None;
        }
        let Some(shape) = padded(&fixed) else {
            self.error(
                span,
                ViewError::Rank {
                    method,
                    rank: fixed.len(),
                }
                .to_string(),
            );
            return None;
        };
        let axes = h
            .prefix
            .iter()
            .map(|&a| Idx::from_affine(a))
            .chain((0..fixed.len()).map(|k| {
                let mut i = Idx::from_affine(Affine::ZERO);
                i.grid[k] = 1;
                i
            }))
            .collect();
        Some(Access {
            tensor: h.tensor,
            reshape: h.reshape,
            axes,
            shape,
            indirect: None,
            dtype: None,
        })
    }

    /// A tile's view through a map: the view's index of each of the tile view's axes, built by
    /// the indexing machinery (partition starts and bounds checked as `t[[...]]` checks them).
    fn tile_map(&mut self, v: TileView, m: &ViewMap, span: Span) -> Value {
        let dims: Vec<u32> = m.shape.iter().map(|d| d.unwrap_or(1)).collect();
        let Some(shape) = padded(&dims) else {
            return self.error(span, "a view has at most 5 dimensions");
        };
        let axes: Vec<Idx> = m
            .axes
            .iter()
            .map(|a| {
                let mut i = Idx::from_affine(a.start);
                i.grid = a.coef;
                i
            })
            .collect();
        self.tile_view(v, &axes, shape, span)
    }

    /// A tile's view with merged axes: the same partitions and offset, new free strides.
    fn tile_restrided(&mut self, v: TileView, r: &Restrided, span: Span) -> Value {
        let Some((shape, strides)) = tile_layout(&r.shape, &r.strides[0]) else {
            return self.error(span, "a view has at most 5 dimensions");
        };
        Value::Tile(TileView {
            shape,
            strides,
            ..v
        })
    }

    /// A tile's view of its bytes as dtype `to` (`own`: the tile's dtype).
    fn tile_reinterpreted(
        &mut self,
        v: TileView,
        r: &view::Reinterpreted,
        (own, to): (DType, DType),
        span: Span,
    ) -> Value {
        let Some((shape, strides)) = tile_layout(&r.shape, &r.strides[0]) else {
            return self.error(span, "a view has at most 5 dimensions");
        };
        Value::Tile(TileView {
            shape,
            strides,
            offset: r.starts[0],
            dtype: (to != own).then_some(to),
            ..v
        })
    }

    /// `t.ap(pattern, offset, dtype)` of a tile (or a view of one): the pattern over the tile's
    /// storage flattened (each partition's elements, then the next partition's), from the view's
    /// start plus `offset`; `dtype` reads the storage as that dtype, counting its elements.
    fn tile_ap(
        &mut self,
        v: TileView,
        pattern: &[(i64, i64)],
        offset: i64,
        dtype: Option<DType>,
        blame: &Blame<'_>,
        span: Span,
    ) -> Value {
        let tile = &self.buf.tiles[v.tile as usize];
        let own = tile.dtype;
        let from = v.dtype_of(own);
        let to = dtype.unwrap_or(from);
        // The tile's elements per partition, in `to`; the view's start, in `to` (whole ones).
        let bytes = tile
            .shape
            .free_elems()
            .saturating_mul(u64::from(own.size()));
        let row = bytes.checked_div(u64::from(to.size())).unwrap_or(0);
        let (fs, ts) = (i64::from(from.size()), i64::from(to.size()));
        let start = v
            .offset
            .checked_scale(fs)
            .filter(|a| {
                a.constant.checked_rem(ts) == Some(0)
                    && a.coef.iter().all(|&c| c.checked_rem(ts) == Some(0))
            })
            .map(|mut a| {
                a.constant = a.constant.checked_div(ts).unwrap_or(0);
                for c in &mut a.coef {
                    *c = c.checked_div(ts).unwrap_or(0);
                }
                a
            });
        let Some(start) = start else {
            return self.error(
                span,
                format!("`ap`: the view's start is not a whole number of {to} elements"),
            );
        };
        let ap = match view::ap(pattern, offset, Some(row)) {
            Ok(ap) => ap,
            Err(e) => return self.error((blame.at)(&e), format!("{}{e}", blame.prefix)),
        };
        let row_i = i64::try_from(row).unwrap_or(i64::MAX);
        let (parts, free_shift) = (
            ap.offset.checked_div(row_i).unwrap_or(0),
            ap.offset.checked_rem(row_i).unwrap_or(0),
        );
        let part_start = u32::try_from(parts)
            .ok()
            .and_then(|p| v.part_start.checked_add(p));
        let offset = start.checked_add(&Affine::constant(free_shift));
        let (Some(part_start), Some(offset)) = (part_start, offset) else {
            return self.error(span, ViewError::Overflow { method: "ap" }.to_string());
        };
        let Some(shape) = padded(&ap.shape) else {
            return self.error(span, "a view has at most 5 dimensions");
        };
        let mut strides = [0i64; MAX_TILE_RANK - 1];
        for (s, &x) in strides.iter_mut().zip(ap.steps.iter().skip(1)) {
            *s = x;
        }
        Value::Tile(TileView {
            part_start,
            shape,
            offset,
            strides,
            dtype: (to != own).then_some(to),
            ..v
        })
    }

    /// `x.ap(pattern, offset)` of an HBM tensor: the pattern over the tensor flattened
    /// row-major, an access of a one-axis reshape of it (its dimensions must be known).
    fn tensor_ap(
        &mut self,
        h: &Hbm,
        (pattern, offset): (&[(i64, i64)], i64),
        dtype: Option<DType>,
        dynamic: Option<ApDynamic>,
        blame: &Blame<'_>,
        span: Span,
    ) -> Value {
        let own = self.tensors[h.tensor].dtype;
        if dtype.is_some_and(|d| d != own) {
            return self.error(span, "`ap` of an HBM tensor with another `dtype` is not accepted yet: `x.view(dtype)` reads its bytes as another dtype");
        }
        let ap = match view::ap(pattern, offset, None) {
            Ok(ap) => ap,
            Err(e) => return self.error((blame.at)(&e), format!("{}{e}", blame.prefix)),
        };
        let dims = self.tensor_dims(h);
        let mut known = Vec::with_capacity(dims.len());
        for (k, d) in dims.iter().enumerate() {
            let Some(n) = d else {
                return self.error(
                    span,
                    ViewError::Symbolic {
                        method: "ap",
                        dim: k,
                    }
                    .to_string(),
                );
            };
            known.push(*n);
        }
        let Some(shape) = padded(&ap.shape) else {
            return self.error(span, "a view has at most 5 dimensions");
        };
        let indirect = match dynamic {
            None => None,
            Some(d) => match view::ap_indirect(&known, &ap, d.dim, d.vector) {
                Ok(ix) => Some((d, ix)),
                Err(e) => return self.error(span, format!("{}{e}", blame.prefix)),
            },
        };
        // `vector_offset`: NKI's indirect DMA on the rows of dimension 0, the rest of the
        // pattern within a row (the tensor as `[rows, row]`: the tensor itself when it has
        // two dimensions, so that `x.ap(..., vector_offset = idx)` is `x[[idx, iy]]`).
        if let Some((d, view::ApIndirect::Rows { rows, row })) = indirect {
            let two = [Dim::Fixed(u64::from(rows)), Dim::Fixed(row)];
            let reshape = if known.len() == 2 && h.reshape.is_none() {
                None
            } else {
                match self.flat_reshape(h.tensor, &two, span) {
                    Some(r) => Some(r),
                    None => return Value::Poison,
                }
            };
            let mut ix = Idx::from_affine(Affine::constant(ap.offset));
            for (g, &s) in ix.grid.iter_mut().zip(&ap.steps).skip(1) {
                *g = s;
            }
            return Value::Access(Access {
                tensor: h.tensor,
                reshape,
                axes: vec![Idx::from_affine(Affine::ZERO), ix],
                shape,
                indirect: Some((0, d.index, nki_lang::IndirectMode::Rows)),
                dtype: None,
            });
        }
        let total = known
            .iter()
            .fold(1u64, |t, &n| t.saturating_mul(u64::from(n)));
        let Some(reshape) = self.flat_reshape(h.tensor, &[Dim::Fixed(total)], span) else {
            return Value::Poison;
        };
        let mut ix = Idx::from_affine(Affine::constant(ap.offset));
        for (g, &s) in ix.grid.iter_mut().zip(&ap.steps) {
            *g = s;
        }
        let indirect = match indirect {
            Some((d, view::ApIndirect::Scalar { scale, bound })) => {
                Some((0, d.index, nki_lang::IndirectMode::Scalar { scale, bound }))
            }
            _ => None,
        };
        Value::Access(Access {
            tensor: h.tensor,
            reshape: Some(reshape),
            axes: vec![ix],
            shape,
            indirect,
            dtype: None,
        })
    }

    /// The reshape of tensor `tensor` to `shape` (its elements row-major), added to the
    /// program once; `None` after an error.
    fn flat_reshape(&mut self, tensor: usize, shape: &[Dim], span: Span) -> Option<usize> {
        let t = u8::try_from(tensor).unwrap_or(u8::MAX);
        if let Some(r) = self
            .buf
            .reshapes
            .iter()
            .position(|r| r.tensor == t && r.shape == shape)
        {
            return Some(r);
        }
        let Ok(r) = u8::try_from(self.buf.reshapes.len()) else {
            self.error(span, "a kernel has at most 255 reshapes");
            return None;
        };
        let dims: Vec<String> = shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => n.to_string(),
                other => format!("{other:?}"),
            })
            .collect();
        let name = format!(
            "{}.reshape([{}])",
            self.tensors[tensor].name,
            dims.join(", ")
        );
        self.buf.reshapes.push(nki_lang::ReshapeBuf {
            name,
            tensor: t,
            shape: shape.to_vec(),
        });
        Some(usize::from(r))
    }

    /// A DMA between `access` and the tile view `tile`, where `access` may read its tensor's
    /// bytes as another dtype (`x.view(u8)`): the same transfer with the reinterpretation moved
    /// to the tile side (`t.view(f32)` against `x`), so that the instruction moves the tensor's
    /// own elements; the bytes moved are the same. The tile must have the access's dtype (the
    /// DMA converts nothing), and the access must cover whole elements of the tensor. `None`
    /// after an error.
    pub(super) fn unview(
        &mut self,
        access: &Access,
        tile: TileView,
        masked: bool,
        span: Span,
    ) -> Option<(Access, TileView)> {
        let Some(as_dtype) = access.dtype else {
            return Some((access.clone(), tile));
        };
        let own = self.tensors[access.tensor].dtype;
        let tile_own = self.buf.tiles[tile.tile as usize].dtype;
        let td = tile.dtype_of(tile_own);
        if td != as_dtype {
            self.error(
                span,
                format!("a DMA of an HBM tensor viewed as {as_dtype} moves its bytes unconverted, so its tile side is {as_dtype} too, not {td}: view the tile as well (`t.view({as_dtype})`)"),
            );
            return None;
        }
        if masked {
            self.error(
                span,
                format!("a masked DMA of an HBM tensor viewed as {as_dtype} is not accepted yet: slice the view to the elements instead of masking"),
            );
            return None;
        }
        let whole = |e: ViewError| {
            format!(
                "this DMA of an HBM tensor viewed as {as_dtype} does not move whole {own} elements of it, which is all this model moves through an HBM `view(dtype)` yet (load whole elements and view the tile): {e}"
            )
        };
        let a = match access_reinterpreted(access, as_dtype, own) {
            Ok(mut a) => {
                a.dtype = None;
                a
            }
            Err(e) => {
                self.error(span, whole(e));
                return None;
            }
        };
        let st = tile_strides(&tile);
        let r = match view::view_dtype(tile.shape.dims(), &st, &[tile.offset], as_dtype, own) {
            Ok(r) => r,
            Err(e) => {
                self.error(span, whole(e));
                return None;
            }
        };
        match self.tile_reinterpreted(tile, &r, (tile_own, own), span) {
            Value::Tile(t) => Some((a, t)),
            _ => None,
        }
    }

    /// An access's view through a map: each tensor axis' index with the view's map substituted
    /// for the access's grid axes.
    fn access_map(&mut self, a: Access, m: &ViewMap, method: &'static str, span: Span) -> Value {
        let mut dims = Vec::with_capacity(m.shape.len());
        for (k, d) in m.shape.iter().enumerate() {
            match d {
                Some(n) => dims.push(*n),
                None => {
                    return self.error(span, ViewError::Symbolic { method, dim: k }.to_string());
                }
            }
        }
        let Some(shape) = padded(&dims) else {
            return self.error(span, "a view has at most 5 dimensions");
        };
        let mut axes = Vec::with_capacity(a.axes.len());
        for old in &a.axes {
            let mut lin = old.lin;
            let mut grid = [0i64; MAX_TILE_RANK];
            for (j, map) in m.axes.iter().enumerate() {
                let g = old.grid[j];
                if g == 0 {
                    continue;
                }
                let next = map.start.checked_scale(g).and_then(|t| lin.checked_add(&t));
                let Some(next) = next else {
                    return self.error(span, ViewError::Overflow { method }.to_string());
                };
                lin = next;
                for (x, &c) in grid.iter_mut().zip(&map.coef) {
                    let Some(s) = g.checked_mul(c).and_then(|t| x.checked_add(t)) else {
                        return self.error(span, ViewError::Overflow { method }.to_string());
                    };
                    *x = s;
                }
            }
            let mut i = Idx::from_affine(lin);
            i.grid = grid;
            axes.push(i);
        }
        Value::Access(Access {
            axes,
            shape,
            indirect: None,
            ..a
        })
    }

    /// An access with merged axes: each tensor axis' grid coefficients replaced.
    fn access_restrided(&mut self, a: Access, r: &Restrided, span: Span) -> Value {
        let Some(shape) = padded(&r.shape) else {
            return self.error(span, "a view has at most 5 dimensions");
        };
        let axes = a
            .axes
            .iter()
            .zip(&r.strides)
            .map(|(old, st)| {
                let mut i = Idx::from_affine(old.lin);
                for (g, &s) in i.grid.iter_mut().zip(st) {
                    *g = s;
                }
                i
            })
            .collect();
        Value::Access(Access {
            axes,
            shape,
            indirect: None,
            ..a
        })
    }
}

/// A tile view's strides as one component: the free offset's stride per axis (0 for the
/// partition axis, which merging never touches on chip).
fn tile_strides(v: &TileView) -> Vec<Vec<i64>> {
    let mut st = vec![0i64];
    st.extend_from_slice(&v.strides[..v.shape.free().len()]);
    vec![st]
}

/// An access read as dtype `to` where its elements are `from`: the tensor's last axis is the
/// one whose index changes scale ([`view::view_dtype`] on that component); the access's last
/// axis must step it alone, with stride 1.
pub(super) fn access_reinterpreted(
    a: &Access,
    from: DType,
    to: DType,
) -> Result<Access, ViewError> {
    let rank = a.shape.rank();
    let dims = a.shape.dims();
    let Some(last) = a.axes.len().checked_sub(1) else {
        return Err(ViewError::Rank {
            method: "view",
            rank: 0,
        });
    };
    let inner = rank.saturating_sub(1);
    if from.size() != to.size() && dims[inner] != 1 {
        for (k, ix) in a.axes.iter().enumerate() {
            let c = ix.grid[inner];
            if k != last && c != 0 {
                return Err(ViewError::DtypeNotLastAxis { to, axis: k });
            }
        }
    }
    let st = vec![a.axes[last].grid[..rank].to_vec()];
    let r = view::view_dtype(dims, &st, &[a.axes[last].lin], from, to)?;
    let Some(shape) = padded(&r.shape) else {
        return Err(ViewError::Rank {
            method: "view",
            rank: r.shape.len(),
        });
    };
    let mut axes = a.axes.clone();
    let mut ix = Idx::from_affine(r.starts[0]);
    for (g, &s) in ix.grid.iter_mut().zip(&r.strides[0]) {
        *g = s;
    }
    axes[last] = ix;
    Ok(Access {
        axes,
        shape,
        ..a.clone()
    })
}

/// An access's grid coefficients, one component per tensor axis.
fn access_strides(a: &Access) -> Vec<Vec<i64>> {
    let rank = a.shape.rank();
    a.axes.iter().map(|i| i.grid[..rank].to_vec()).collect()
}
