//! The creation functions `ndarray`, `zeros`, `ones`, `full`, and `arange`.

use crate::span::Span;
use nki_lang::{
    DType, Dim, Dst, Instr, InstrData, MAX_TENSOR_RANK, MAX_TILE_RANK, Memory, Opcode, Scalar,
    TileShape,
};

use super::super::value::{Buffer, Value};
use super::super::{InstrSpans, Lowerer};
use crate::parse::model::{Arg, Expr};

impl Lowerer<'_> {
    pub(in super::super) fn create(
        &mut self,
        func: &str,
        args: &[Arg],
        span: Span,
        name: Option<&str>,
    ) -> Value {
        let (params, required): (&[&str], usize) = match func {
            "full" => (&["shape", "fill_value", "dtype", "buffer"], 3),
            _ => (&["shape", "dtype", "buffer"], 2),
        };
        let Some(a) = self.args(func, args, params, required, span) else {
            return Value::Poison;
        };
        let (shape_e, fill_e, dtype_e, buffer_e) = match func {
            "full" => (a[0].expect("required"), a[1], a[2].expect("required"), a[3]),
            _ => (a[0].expect("required"), None, a[1].expect("required"), a[2]),
        };
        let Some(dtype) = self.dtype_arg(dtype_e) else {
            return Value::Poison;
        };
        let buffer = match buffer_e.map(|e| (e, self.eval(e))) {
            None => Buffer::Sbuf,
            Some((_, Value::Buffer(b))) => b,
            Some((_, Value::Poison)) => return Value::Poison,
            Some((e, other)) => {
                return self.error(
                    e.span(),
                    format!(
                        "expected a buffer (Sbuf, Psum or SharedHbm), found {}",
                        other.describe()
                    ),
                );
            }
        };
        let Expr::Array(dims, _) = shape_e else {
            return self.error(
                shape_e.span(),
                "a shape is an array of dimensions: `[128, 512]`",
            );
        };
        if buffer == Buffer::SharedHbm {
            return self.create_output(func, dims, dtype, span, name);
        }
        let mut sizes = Vec::new();
        for d in dims {
            match self.int(d, "a tile dimension").map(u32::try_from) {
                Some(Ok(n)) if n > 0 => sizes.push(n),
                Some(_) => {
                    return self.error(d.span(), "a tile dimension is a positive 32-bit integer");
                }
                None => return Value::Poison,
            }
        }
        let Some(shape) = TileShape::new(&sizes).filter(|s| s.rank() >= 2) else {
            return self.error(
                shape_e.span(),
                format!(
                    "a tile has a partition dimension and 1 to {} free dimensions",
                    MAX_TILE_RANK - 1
                ),
            );
        };
        let memory = if buffer == Buffer::Psum {
            Memory::Psum
        } else {
            Memory::Sbuf
        };
        let v = self.new_tile(name, memory, dtype, shape, span);
        let Value::Tile(view) = v else { return v };
        let fill = match func {
            "zeros" => Some(Scalar::float(0.0)),
            "ones" => Some(Scalar::float(1.0)),
            "full" => match fill_e.map(|e| (e, self.eval(e))) {
                Some((e, Value::Int(n))) => match i32::try_from(n) {
                    Ok(n) if dtype.is_float() => Some(Scalar::float(n as f32)),
                    Ok(n) => Some(Scalar::Int(n)),
                    Err(_) => {
                        return self.error(e.span(), "a fill value is a 32-bit integer or a float");
                    }
                },
                Some((_, Value::Float(f))) => Some(Scalar::float(f as f32)),
                Some((_, Value::Bool(b))) => Some(Scalar::Int(b as i32)),
                Some((_, Value::Poison)) => return Value::Poison,
                Some((e, other)) => {
                    return self.error(
                        e.span(),
                        format!("a fill value is a number, not {}", other.describe()),
                    );
                }
                None => unreachable!("required"),
            },
            _ => None,
        };
        if let Some(value) = fill {
            let Some(dst) = self.view_id(view, span) else {
                return Value::Poison;
            };
            let data = InstrData::Fill {
                dst: Dst::overwrite(dst),
                value,
            };
            if !self.emit_checked(Instr::new(Opcode::Memset, data), InstrSpans::at(span)) {
                return Value::Poison;
            }
            if value.as_f32() == 0.0 && memory == Memory::Psum {
                self.fresh_zero.insert(view.tile, self.loops.len());
            }
        }
        v
    }

    fn create_output(
        &mut self,
        func: &str,
        dims: &[Expr],
        dtype: DType,
        span: Span,
        name: Option<&str>,
    ) -> Value {
        if func != "ndarray" {
            return self.error(span, "an HBM tensor cannot be created with an initial value: create it with `ndarray` and `store` into it (err_hbm_tensor_with_init_value_not_supported)");
        }
        if !self.loops.is_empty() || self.scopes.len() > 1 {
            return self.error(span, "a shared_hbm tensor can only be created at the top level of the kernel (err_shared_hbm_must_in_kernel_level)");
        }
        let Some(name) = name else {
            return self.error(
                span,
                "bind the output tensor with `let` so that the kernel can return it",
            );
        };
        if dims.is_empty() || dims.len() > MAX_TENSOR_RANK {
            return self.error(
                span,
                format!("an HBM tensor has 1 to {MAX_TENSOR_RANK} dimensions"),
            );
        }
        let mut shape = Vec::new();
        for d in dims {
            match self.eval(d) {
                Value::Int(n) if n > 0 => shape.push(Dim::Fixed(n as u64)),
                Value::Sym { sym, add: 0, div: 1 } => shape.push(Dim::Sym(sym)),
                Value::Poison => return Value::Poison,
                _ => return self.error(d.span(), "an output dimension is a positive integer or a symbolic dimension of the inputs"),
            }
        }
        let t = self.add_tensor(super::super::Tensor {
            name: name.to_string(),
            dtype,
            shape,
            role: nki_lang::TensorRole::Output,
            span,
        });
        Value::Tensor(t)
    }

    pub(in super::super) fn arange(&mut self, args: &[Arg], span: Span) -> Value {
        let ints: Vec<Option<i64>> = args
            .iter()
            .map(|a| self.int(&a.value, "an arange bound"))
            .collect();
        let (start, stop) = match ints.as_slice() {
            [Some(stop)] => (0, *stop),
            [Some(start), Some(stop)] => (*start, *stop),
            [_] | [_, _] => return Value::Poison,
            _ => return self.error(span, "`arange(stop)` or `arange(start, stop)`"),
        };
        if stop <= start {
            return self.error(span, "an empty arange");
        }
        match stop.checked_sub(start).and_then(|n| u32::try_from(n).ok()) {
            Some(size) => Value::Range(start, size),
            None => self.error(span, "an arange has at most 4294967295 elements"),
        }
    }
}
