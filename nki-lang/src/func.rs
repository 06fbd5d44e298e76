//! Function codes carried by instructions: the ALU operations of the Vector, Scalar and GpSimd
//! engines ([`Alu`]) and the Scalar engine's activation functions ([`ActFn`]).
//!
//! An instruction format carries a function code instead of one opcode per NKI call:
//! `nl.maximum(a, b)` is `tensor_tensor` with [`Alu::Max`], `nl.exp(x)` is `activation` with
//! [`ActFn::Exp`], as NKI lowers them. Their numerics are defined once, in `nki-runtime`'s `cpu`
//! module.

use core::fmt;

/// What an ALU operation computes on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AluClass {
    /// Arithmetic in fp32 (integers are converted to fp32 first, as the engines do).
    Arithmetic,
    /// Comparisons: 1 when the relation holds, else 0.
    Compare,
    /// Logical operations on truth values (nonzero = true): 1 or 0.
    Logical,
    /// Bit operations on 32-bit integer values; the operands must have integer types.
    Bitvec,
}

macro_rules! alu_table {
    ($( $(#[$doc:meta])* $v:ident = $name:literal, $class:ident, $arity:literal, $reduce:literal; )*) => {
        /// An ALU operation (NKI's `op=` values: `nl.add`, `np.maximum`, ...).
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Alu {
            $( $(#[$doc])* $v, )*
        }

        impl Alu {
            /// Every operation, in declaration order.
            pub const ALL: &'static [Alu] = &[$(Alu::$v),*];

            /// NKI's name (`add`, `maximum`, `bitwise_and`, ...), also the listing's.
            pub const fn name(self) -> &'static str {
                match self { $(Alu::$v => $name,)* }
            }

            /// What the operation computes on.
            pub const fn class(self) -> AluClass {
                match self { $(Alu::$v => AluClass::$class,)* }
            }

            /// 1 for operations that ignore their second operand (`abs`, `invert`, ...), else 2.
            pub const fn arity(self) -> u8 {
                match self { $(Alu::$v => $arity,)* }
            }

            /// Whether NKI accepts the operation as a reduction (`tensor_reduce`,
            /// `reduce_op=`, accumulation).
            pub const fn is_reduction(self) -> bool {
                match self { $(Alu::$v => $reduce,)* }
            }
        }
    };
}

alu_table! {
    /// Passes the first operand through (`nl.bypass`): "no operation" in a two-op chain.
    Bypass = "bypass", Arithmetic, 1, false;
    /// `a + b`.
    Add = "add", Arithmetic, 2, true;
    /// `a - b`.
    Subtract = "subtract", Arithmetic, 2, true;
    /// `a * b`.
    Multiply = "multiply", Arithmetic, 2, true;
    /// `a / b` (IEEE division, correctly rounded).
    Divide = "divide", Arithmetic, 2, false;
    /// The larger of `a` and `b`.
    Max = "maximum", Arithmetic, 2, true;
    /// The smaller of `a` and `b`.
    Min = "minimum", Arithmetic, 2, true;
    /// `a` raised to the power `b`.
    Pow = "power", Arithmetic, 2, false;
    /// Floored remainder: the result has the sign of `b` (`np.mod`).
    Mod = "mod", Arithmetic, 2, false;
    /// Truncated remainder: the result has the sign of `a` (`np.fmod`).
    Fmod = "fmod", Arithmetic, 2, false;
    /// `|a|`.
    Abs = "abs", Arithmetic, 1, false;
    /// `1 / sqrt(a)`.
    Rsqrt = "rsqrt", Arithmetic, 1, false;
    /// `1 / a`.
    Reciprocal = "reciprocal", Arithmetic, 1, false;
    /// `a == b`.
    IsEqual = "equal", Compare, 2, false;
    /// `a != b`.
    NotEqual = "not_equal", Compare, 2, false;
    /// `a > b`.
    IsGt = "greater", Compare, 2, false;
    /// `a >= b`.
    IsGe = "greater_equal", Compare, 2, false;
    /// `a < b`.
    IsLt = "less", Compare, 2, false;
    /// `a <= b`.
    IsLe = "less_equal", Compare, 2, false;
    /// `a && b`.
    LogicalAnd = "logical_and", Logical, 2, true;
    /// `a || b`.
    LogicalOr = "logical_or", Logical, 2, true;
    /// `a != b` as truth values.
    LogicalXor = "logical_xor", Logical, 2, true;
    /// `!a`.
    LogicalNot = "logical_not", Logical, 1, false;
    /// `a & b`.
    BitwiseAnd = "bitwise_and", Bitvec, 2, true;
    /// `a | b`.
    BitwiseOr = "bitwise_or", Bitvec, 2, true;
    /// `a ^ b`.
    BitwiseXor = "bitwise_xor", Bitvec, 2, true;
    /// `!a` (every bit).
    Invert = "invert", Bitvec, 1, false;
    /// `a << b`.
    LeftShift = "left_shift", Bitvec, 2, false;
    /// `a >> b`, logical (NKI has no arithmetic right shift).
    RightShift = "right_shift", Bitvec, 2, false;
}

impl Alu {
    /// Parses an operation by NKI's name or an alias NKI accepts (`max` for `maximum`, `np.add`
    /// spelled `add`, `pow` for `power`, ...).
    pub fn from_name(name: &str) -> Option<Alu> {
        if let Some(&a) = Alu::ALL.iter().find(|a| a.name() == name) {
            return Some(a);
        }
        Some(match name {
            "sub" => Alu::Subtract,
            "mul" => Alu::Multiply,
            "div" | "true_divide" => Alu::Divide,
            "max" => Alu::Max,
            "min" => Alu::Min,
            "pow" => Alu::Pow,
            "remainder" => Alu::Mod,
            "eq" => Alu::IsEqual,
            "ne" => Alu::NotEqual,
            "gt" => Alu::IsGt,
            "ge" => Alu::IsGe,
            "lt" => Alu::IsLt,
            "le" => Alu::IsLe,
            "absolute" => Alu::Abs,
            _ => return None,
        })
    }

    /// The result of a reduction over no element, and the value that leaves any other
    /// unchanged: `-0.0` for `add` (so that a sum of `-0.0`s stays `-0.0`), 1 for `multiply`,
    /// -inf / +inf for `maximum` / `minimum`, 0 / 1 for the logical and bit operations.
    /// `None` for operations that are not reductions.
    pub const fn identity(self) -> Option<f32> {
        match self {
            Alu::Add | Alu::Subtract => Some(-0.0),
            Alu::Multiply | Alu::LogicalAnd => Some(1.0),
            Alu::Max => Some(f32::NEG_INFINITY),
            Alu::Min => Some(f32::INFINITY),
            Alu::LogicalOr | Alu::LogicalXor | Alu::BitwiseOr | Alu::BitwiseXor => Some(0.0),
            Alu::BitwiseAnd => Some(-1.0),
            Alu::Bypass
            | Alu::Divide
            | Alu::Pow
            | Alu::Mod
            | Alu::Fmod
            | Alu::Abs
            | Alu::Rsqrt
            | Alu::Reciprocal
            | Alu::IsEqual
            | Alu::NotEqual
            | Alu::IsGt
            | Alu::IsGe
            | Alu::IsLt
            | Alu::IsLe
            | Alu::LogicalNot
            | Alu::Invert
            | Alu::LeftShift
            | Alu::RightShift => None,
        }
    }
}

impl fmt::Display for Alu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The range of inputs over which NKI documents an activation function as valid; outside it the
/// hardware's piecewise polynomials give invalid results.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum ValidRange {
    /// Every input.
    All,
    /// `lo <= x <= hi`.
    Closed(f64, f64),
    /// `lo <= |x| <= hi`, either sign.
    Magnitude(f64, f64),
}

macro_rules! act_table {
    ($( $(#[$doc:meta])* $v:ident = $name:literal, $range:expr; )*) => {
        /// An activation function of the Scalar engine (`nisa.activation(op=...)`, and the
        /// `nl.*` math functions that lower to it).
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum ActFn {
            $( $(#[$doc])* $v, )*
        }

        impl ActFn {
            /// Every function, in declaration order.
            pub const ALL: &'static [ActFn] = &[$(ActFn::$v),*];

            /// NKI's name (`exp`, `gelu_apprx_tanh`, ...), also the listing's.
            pub const fn name(self) -> &'static str {
                match self { $(ActFn::$v => $name,)* }
            }

            /// The inputs NKI documents the function as valid for.
            pub const fn valid_range(self) -> ValidRange {
                match self { $(ActFn::$v => $range,)* }
            }
        }
    };
}

const PI: f64 = core::f64::consts::PI;

act_table! {
    /// `x` (`nl.copy` on the Scalar engine; NKI's `identity`).
    Identity = "identity", ValidRange::All;
    /// `e^x`.
    Exp = "exp", ValidRange::All;
    /// Natural logarithm.
    Log = "log", ValidRange::Closed(5.421010862427522e-20, 1.8446744073709552e19);
    /// Hyperbolic tangent.
    Tanh = "tanh", ValidRange::All;
    /// Square root.
    Sqrt = "sqrt", ValidRange::Closed(1.2037062152420224e-35, 3.3230699894622794e35);
    /// `1 / sqrt(x)`.
    Rsqrt = "rsqrt", ValidRange::Closed(6.462348535570529e-27, 1.5845632502852868e29);
    /// `1 / x`.
    Reciprocal = "reciprocal", ValidRange::Magnitude(2.2737367544323206e-13, 4398046511104.0);
    /// `x²`.
    Square = "square", ValidRange::All;
    /// `max(x, 0)`.
    Relu = "relu", ValidRange::All;
    /// `x · Φ(x)` with the exact normal CDF `Φ(x) = (1 + erf(x / √2)) / 2`.
    Gelu = "gelu", ValidRange::All;
    /// The derivative of [`ActFn::Gelu`]: `Φ(x) + x · φ(x)`.
    GeluDx = "gelu_dx", ValidRange::All;
    /// GELU's tanh approximation: `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
    GeluApproxTanh = "gelu_apprx_tanh", ValidRange::All;
    /// GELU's sigmoid approximation: `x · sigmoid(1.702 x)`.
    GeluApproxSigmoid = "gelu_apprx_sigmoid", ValidRange::All;
    /// `1 / (1 + e^-x)`.
    Sigmoid = "sigmoid", ValidRange::All;
    /// `x · sigmoid(x)`.
    Silu = "silu", ValidRange::All;
    /// The derivative of [`ActFn::Silu`]: `sigmoid(x) · (1 + x · (1 − sigmoid(x)))`.
    SiluDx = "silu_dx", ValidRange::All;
    /// `ln(1 + e^x)`.
    Softplus = "softplus", ValidRange::All;
    /// `x · tanh(softplus(x))`.
    Mish = "mish", ValidRange::All;
    /// The error function.
    Erf = "erf", ValidRange::All;
    /// The derivative of [`ActFn::Erf`]: `2/√π · e^(−x²)`.
    ErfDx = "erf_dx", ValidRange::All;
    /// Sine.
    Sin = "sin", ValidRange::Closed(-PI, PI);
    /// Cosine.
    Cos = "cos", ValidRange::Closed(-PI, PI);
    /// Tangent.
    Tan = "tan", ValidRange::Closed(-PI / 2.0, PI / 2.0);
    /// Arctangent.
    Arctan = "arctan", ValidRange::Closed(-PI / 2.0, PI / 2.0);
    /// `|x|`.
    Abs = "abs", ValidRange::All;
    /// −1, 0 or 1 by the sign of `x` (0 for ±0, NaN for NaN).
    Sign = "sign", ValidRange::All;
    /// Largest integer ≤ `x`.
    Floor = "floor", ValidRange::All;
    /// Smallest integer ≥ `x`.
    Ceil = "ceil", ValidRange::All;
    /// `x` rounded toward zero.
    Trunc = "trunc", ValidRange::All;
}

impl ActFn {
    /// Parses a function by NKI's name or an alias NKI accepts (`copy` for `identity`,
    /// `arctan` spelled `atan`, ...).
    pub fn from_name(name: &str) -> Option<ActFn> {
        if let Some(&f) = ActFn::ALL.iter().find(|f| f.name() == name) {
            return Some(f);
        }
        Some(match name {
            "copy" => ActFn::Identity,
            "atan" => ActFn::Arctan,
            "absolute" => ActFn::Abs,
            _ => return None,
        })
    }
}

impl fmt::Display for ActFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &a in Alu::ALL {
            assert_eq!(Alu::from_name(a.name()), Some(a));
            assert_eq!(a.identity().is_some(), a.is_reduction(), "{a}");
        }
        for &f in ActFn::ALL {
            assert_eq!(ActFn::from_name(f.name()), Some(f));
        }
        assert_eq!(Alu::from_name("max"), Some(Alu::Max));
        assert_eq!(ActFn::from_name("copy"), Some(ActFn::Identity));
    }
}
