//! `shared_constant(constant, dtype)` and `shared_identity_matrix(n, dtype)`: constant HBM
//! tensors whose data the program holds.

use crate::span::Span;
use nki_lang::{DType, Dim, MAX_TENSOR_RANK, TensorRole};

use super::super::value::{Hbm, Value};
use super::super::{Lowerer, Tensor};
use crate::parse::model::{Arg, Expr};

/// Most elements a constant may hold (its data is emitted into the program).
const MAX_CONSTANT_ELEMENTS: usize = 1 << 20;

impl Lowerer<'_> {
    /// `shared_constant(constant, dtype)`: `constant` an array literal, the name of a `const`
    /// array of the kernel, or `identity(n, dtype)` (NumPy's `np.identity`); `dtype` by default
    /// the identity's, else f32 if any element is a float, else i32.
    /// `shared_identity_matrix(n, dtype)`: the `n × n` identity, `dtype` by default u8.
    pub(in super::super) fn shared_constant(
        &mut self,
        func: &str,
        args: &[Arg],
        span: Span,
        name: Option<&str>,
    ) -> Value {
        let identity = func == "shared_identity_matrix";
        let params: &[&str] = if identity {
            &["n", "dtype"]
        } else {
            &["constant", "dtype"]
        };
        let Some(a) = self.args(func, args, params, 1, span) else {
            return Value::Poison;
        };
        let mut first = a[0].expect("required");
        let mut inner_dtype = None;
        // NumPy's `np.identity(n, dtype)` (nki.tensor's `identity`) as the constant.
        let identity = match first {
            Expr::Call { func, args, span } if !identity && func == "identity" => {
                let Some(b) = self.args("identity", args, &["n", "dtype"], 1, *span) else {
                    return Value::Poison;
                };
                first = b[0].expect("required");
                inner_dtype = b[1];
                true
            }
            _ => identity,
        };
        let (shape, values, any_float) = if identity {
            let Some(n) = self.int(first, "the identity's size") else {
                return Value::Poison;
            };
            let n = match usize::try_from(n) {
                Ok(n) if n > 0 && n.checked_mul(n).is_some_and(|e| e <= MAX_CONSTANT_ELEMENTS) => n,
                _ => {
                    return self.error(
                        first.span(),
                        format!("the identity's size is 1 to {}", 1 << 10),
                    );
                }
            };
            let values = (0..n)
                .flat_map(|r| (0..n).map(move |c| if r == c { 1.0 } else { 0.0 }))
                .collect();
            (vec![n as u64; 2], values, false)
        } else {
            let array = match first {
                Expr::Array(..) => first.clone(),
                Expr::Name(id) => match self.arrays.get(&id.to_string()) {
                    Some(e) => e.clone(),
                    None => {
                        return self.error(
                            first.span(),
                            format!("`{func}` takes an array: a literal (`[[1.0, 0.0], [0.0, 1.0]]`) or the name of a `const` array declared in the kernel"),
                        );
                    }
                },
                other => {
                    return self.error(
                        other.span(),
                        format!("`{func}` takes an array: a literal (`[[1.0, 0.0], [0.0, 1.0]]`) or the name of a `const` array declared in the kernel"),
                    );
                }
            };
            let mut shape = Vec::new();
            let mut values = Vec::new();
            let mut any_float = false;
            if !self.flatten(&array, 0, &mut shape, &mut values, &mut any_float) {
                return Value::Poison;
            }
            (shape, values, any_float)
        };
        let dtype = match a[1].or(inner_dtype) {
            Some(e) => match self.dtype_arg(e) {
                Some(d) => d,
                None => return Value::Poison,
            },
            None if identity => DType::U8,
            None if any_float => DType::F32,
            None => DType::I32,
        };
        let Some(name) = name else {
            return self.error(
                span,
                format!(
                    "bind the constant with `let` (`let c = {func}(...);`) so that it can be loaded"
                ),
            );
        };
        let t = self.add_tensor(Tensor {
            name: name.to_string(),
            dtype,
            shape: shape.into_iter().map(Dim::Fixed).collect(),
            role: TensorRole::Constant,
            scope: None,
            data: values.iter().flat_map(|v: &f32| v.to_le_bytes()).collect(),
            span,
        });
        Value::Tensor(Hbm::whole(t))
    }

    /// Appends the numbers of array literal `e` (at nesting depth `depth`) to `values`, and
    /// its dimensions to `shape` (checking that every row agrees). False after an error.
    fn flatten(
        &mut self,
        e: &Expr,
        depth: usize,
        shape: &mut Vec<u64>,
        values: &mut Vec<f32>,
        any_float: &mut bool,
    ) -> bool {
        let Expr::Array(items, span) = e else {
            if depth < shape.len() {
                self.error(e.span(), "the array's rows must have the same shape");
                return false;
            }
            if depth == 0 {
                self.error(e.span(), "a constant is an array");
                return false;
            }
            let v = match self.eval(e) {
                Value::Int(n) => {
                    // Integers are exact in f32 up to 2^24.
                    if n.unsigned_abs() > 1 << 24 {
                        self.error(e.span(), "a constant's integers are at most 2^24 in magnitude (the program holds them as f32)");
                        return false;
                    }
                    n as f32
                }
                Value::Float(f) => {
                    *any_float = true;
                    super::super::fp32(f)
                }
                Value::Bool(b) => f32::from(u8::from(b)),
                Value::Poison => return false,
                other => {
                    self.error(
                        e.span(),
                        format!("a constant's element is a number, not {}", other.describe()),
                    );
                    return false;
                }
            };
            if values.len() >= MAX_CONSTANT_ELEMENTS {
                self.error(
                    e.span(),
                    format!("a constant holds at most {MAX_CONSTANT_ELEMENTS} elements"),
                );
                return false;
            }
            values.push(v);
            return true;
        };
        let n = items.len() as u64;
        match shape.get(depth) {
            _ if n == 0 => {
                self.error(*span, "a constant's dimensions are positive");
                return false;
            }
            Some(&d) if d != n => {
                self.error(*span, "the array's rows must have the same shape");
                return false;
            }
            Some(_) => {}
            None if depth == shape.len() && values.is_empty() => {
                if depth >= MAX_TENSOR_RANK {
                    self.error(
                        *span,
                        format!("an HBM tensor has 1 to {MAX_TENSOR_RANK} dimensions"),
                    );
                    return false;
                }
                shape.push(n);
            }
            None => {
                self.error(*span, "the array's rows must have the same shape");
                return false;
            }
        }
        items
            .iter()
            .all(|item| self.flatten(item, depth.saturating_add(1), shape, values, any_float))
    }
}
