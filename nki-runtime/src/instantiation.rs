//! The instantiations of a kernel with meta-parameters, as `#[kernel]` lists them.

use core::fmt;

use crate::launch::Kernel;

/// A meta-parameter's value in an instantiation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MetaValue {
    /// An integer.
    Int(i64),
    /// A float, by its `f64` bits (see [`MetaValue::as_f64`]).
    Float(u64),
    /// A boolean.
    Bool(bool),
    /// A dtype (a type parameter of the kernel).
    DType(nki_lang::DType),
}

impl MetaValue {
    /// The value of a float (or integer) meta-parameter.
    pub fn as_f64(self) -> Option<f64> {
        match self {
            MetaValue::Int(n) => Some(n as f64),
            MetaValue::Float(b) => Some(f64::from_bits(b)),
            MetaValue::Bool(_) | MetaValue::DType(_) => None,
        }
    }
}

impl fmt::Display for MetaValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaValue::Int(n) => write!(f, "{n}"),
            MetaValue::Float(b) => write!(f, "{:?}", f64::from_bits(*b)),
            MetaValue::Bool(b) => write!(f, "{b}"),
            MetaValue::DType(d) => write!(f, "{}", d.name()),
        }
    }
}

/// One instantiation of a kernel with meta-parameters: `#[kernel(mm_16_2_8(TILES_M = 16, ...))]`
/// compiles the kernel once per listed set into a kernel of its own, and lists them all in the
/// kernel's module (`INSTANCES`), for tools that try each one.
#[derive(Copy, Clone, Debug)]
pub struct Instance {
    /// The instantiated kernel's name (its function and module).
    pub name: &'static str,
    /// Each meta-parameter's name and value, in declaration order.
    pub values: &'static [(&'static str, MetaValue)],
    /// Its program.
    pub kernel: &'static Kernel<'static>,
}

impl Instance {
    /// The value of meta-parameter `name`.
    pub fn value(&self, name: &str) -> Option<MetaValue> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
    }
}

impl fmt::Display for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.name)?;
        for (k, (n, v)) in self.values.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n} = {v}")?;
        }
        f.write_str(")")
    }
}
