//! Launching a kernel: type-erased tensor bindings and every check a launch makes.
//!
//! A launch binds the kernel's HBM tensors to host buffers ([`HbmIn`], [`HbmOut`]), binds the
//! program's symbolic dimensions from the inputs' shapes, and checks the program's launch
//! constraints. [`Kernel::bind`] does all of it without allocating; the result, a [`Bound`],
//! is what [`crate::NeuronCore::execute`] runs.

// Sizes, strides, offsets, indices and trip counts here come from the launch's tensors and
// grid: arithmetic on them is checked or saturating, conversions fallible (see `launch.rs`).
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use core::fmt::Write as _;

use ndarray::{Dimension, ShapeError};
use nki_lang::constraint::check_constraints;
use nki_lang::grid::SymbolSource;
use nki_lang::{Constraint, DType, Dim, Extent, MAX_SYMBOLS, Program, SymbolValues};

use crate::grid::LaunchGrid;
use thiserror::Error;

use crate::bind::{Bound, HbmIn, HbmOut};
use crate::shape::Shape;

/// Why a launch was refused. Nothing was written when a launch fails.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// A host buffer or array cannot be bound as a tensor: rank above
    /// [`nki_lang::MAX_TENSOR_RANK`], element count not matching the shape, or a size that
    /// overflows.
    #[error("cannot bind the buffer as a tensor: {0}")]
    Shape(#[from] ShapeError),
    /// A strict launch ([`crate::NeuronCore::execute_strict`]) left part of an output
    /// unwritten.
    #[error(transparent)]
    Strict(#[from] crate::strict::StrictError),
    /// A launch checked for schedule independence
    /// ([`crate::NeuronCore::with_schedule_check`]) computes other outputs in another order
    /// of its instructions that the device may run.
    #[error(transparent)]
    Schedule(Box<crate::strict::ScheduleError>),
    /// The host could not allocate an output the launch creates (its shape follows from the
    /// inputs' and may be large).
    #[error("cannot allocate {bytes} bytes for an output")]
    Allocation {
        /// Bytes asked for.
        bytes: usize,
    },
    /// The caller expects more outputs than the kernel declares (asking for output `found - 1`
    /// of a kernel with `expected` outputs).
    #[error(
        "the kernel declares {expected} output{}, but the caller uses {found}",
        if *expected == 1 { "" } else { "s" }
    )]
    OutputCount {
        /// Outputs the kernel declares.
        expected: usize,
        /// Outputs the caller uses.
        found: usize,
    },
    /// Too many or too few tensors.
    #[error(
        "kernel `{kernel}` takes {expected} {what}{}, but {found} {} given",
        if *expected == 1 { "" } else { "s" },
        if *found == 1 { "was" } else { "were" }
    )]
    ArgumentCount {
        /// The kernel's name.
        kernel: String,
        /// `input` or `output`.
        what: &'static str,
        /// How many the kernel declares.
        expected: usize,
        /// How many were given.
        found: usize,
    },
    /// A tensor has another element type than the kernel declares.
    #[error("tensor `{tensor}`: element type {found} where the kernel declares {expected}")]
    DType {
        /// The tensor's name in the kernel.
        tensor: String,
        /// The declared type.
        expected: DType,
        /// The given type.
        found: DType,
    },
    /// An input has another rank than the kernel declares.
    #[error("tensor `{tensor}`: rank {found} where the kernel declares {expected}")]
    Rank {
        /// The tensor's name in the kernel.
        tensor: String,
        /// The declared rank.
        expected: usize,
        /// The given rank.
        found: usize,
    },
    /// An input's axis differs from the literal size the kernel declares.
    #[error("tensor `{tensor}` axis {axis} is {found} where the kernel declares {expected}")]
    Dim {
        /// The tensor's name in the kernel.
        tensor: String,
        /// The axis.
        axis: usize,
        /// The declared size.
        expected: u64,
        /// The given size.
        found: u64,
    },
    /// Two inputs give a symbolic dimension different values.
    #[error(
        "symbolic dim `{symbol}` is {first} from `{first_tensor}` axis {first_axis} but {found} from `{tensor}` axis {axis}"
    )]
    InconsistentSymbol {
        /// The symbol's name.
        symbol: String,
        /// The value it was bound to first.
        first: u64,
        /// The input that bound it.
        first_tensor: String,
        /// That input's axis.
        first_axis: usize,
        /// The disagreeing value.
        found: u64,
        /// The input that disagrees.
        tensor: String,
        /// That input's axis.
        axis: usize,
    },
    /// A product or sum of symbolic dimensions (`N * C`, `H + W`) passes `u64::MAX` for the
    /// bound symbols.
    #[error("symbolic dim `{symbol}` passes 2^64 - 1 with {values}")]
    ProductOverflow {
        /// The product's name.
        symbol: String,
        /// Its factors' values (`N = 200`).
        values: String,
    },
    /// A reshape's dimensions do not hold its tensor's elements for the bound symbols.
    #[error(
        "`{reshape}` reshapes `{tensor}` ({elements} elements) to [{dims}] ({reshaped} elements) with {values}: a reshape views the same elements under other dimensions"
    )]
    Reshape {
        /// The reshape's name.
        reshape: String,
        /// The tensor reshaped.
        tensor: String,
        /// The tensor's element count.
        elements: u64,
        /// The reshape's dimensions for the bound symbols.
        dims: String,
        /// Their product (`u64::MAX` past it).
        reshaped: u64,
        /// The symbols and their values (`N = 200`).
        values: String,
    },
    /// A launch constraint of the program does not hold for the bound symbols.
    #[error("launch constraint `{constraint}` fails with {values}")]
    Constraint {
        /// The constraint, with the program's names.
        constraint: String,
        /// The symbols it involves and their values (`K = 200`).
        values: String,
    },
    /// An output buffer's shape differs from the shape the kernel produces.
    #[error("output `{tensor}`: shape {found:?} where the kernel produces {expected:?}")]
    OutputShape {
        /// The output's name in the kernel.
        tensor: String,
        /// The shape the kernel writes.
        expected: Vec<usize>,
        /// The given buffer's shape.
        found: Vec<usize>,
    },
    /// The launch grid cannot be launched: more than three axes, an empty axis, more instances
    /// than the host can count, or `nc` where the target has one physical core.
    #[error("kernel `{kernel}`: bad launch grid: {why}")]
    Grid {
        /// The kernel's name.
        kernel: String,
        /// What is wrong with the grid.
        why: String,
    },
    /// The execution stopped: an [`crate::Observer`] refused an instruction.
    #[error(transparent)]
    Exec(#[from] crate::exec::ExecError),
    /// The launch went over the core's budget or was stopped ([`crate::NeuronCore::set_budget`],
    /// [`crate::NeuronCore::stop_handle`]).
    #[error(transparent)]
    Stopped(#[from] crate::budget::Stopped),
    /// The program needs more SBUF per partition than the core has.
    #[error(
        "kernel `{kernel}` needs {needed} bytes of SBUF per partition (compiled for {compiled}), but this {core} core has {capacity}"
    )]
    SbufCapacity {
        /// The kernel's name.
        kernel: String,
        /// Bytes per partition the program uses.
        needed: u32,
        /// The program's target.
        compiled: &'static str,
        /// The core's target.
        core: &'static str,
        /// Bytes per partition the core has.
        capacity: u32,
    },
    /// The kernel was compiled for a later generation than the core's: it may use forms
    /// (`tensor_scalar` on ScalarE, non-add `activation` reductions, …) the core lacks.
    #[error(
        "kernel `{kernel}` is compiled for {compiled}; this {core} core runs programs compiled for {core} or earlier"
    )]
    Target {
        /// The kernel's name.
        kernel: String,
        /// The program's target.
        compiled: &'static str,
        /// The core's target.
        core: &'static str,
    },
    /// A quotient of symbolic dimensions (`h / k_h`) divides by a dimension that is 0 for the
    /// bound symbols.
    #[error(
        "symbolic dim `{symbol}` divides by `{divisor}`, which is 0 with {values}: a quotient of dimensions needs a nonzero divisor"
    )]
    ZeroDivisor {
        /// The quotient's name.
        symbol: String,
        /// The divisor's text.
        divisor: String,
        /// The values of the symbols it names (`h = 8, k_h = 0`).
        values: String,
    },
}

/// A kernel: its checked program, ready to launch.
///
/// `#[kernel]` emits `pub static KERNEL: Kernel<'static> =
/// Kernel::new(Program::from_checked_parts(...));`; a program built at run time with
/// [`nki_lang::ProgramBuf::finish`] is wrapped the same way.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Kernel<'p> {
    program: Program<'p>,
}

impl<'p> Kernel<'p> {
    /// Wraps a checked program.
    pub const fn new(program: Program<'p>) -> Self {
        Kernel { program }
    }

    /// The program.
    pub fn program(&self) -> &Program<'p> {
        &self.program
    }

    /// The kernel's name.
    pub fn name(&self) -> &'p str {
        self.program.name()
    }

    /// Checks the inputs (count, element type, rank, literal dims), binds each symbolic dim
    /// from the first input axis that names it (later uses must agree), and checks every
    /// launch constraint of the program. Allocates only to report an error.
    #[inline]
    pub fn bind_inputs(&self, inputs: &[HbmIn<'_>]) -> Result<SymbolValues, LaunchError> {
        self.bind_inputs_on(&LaunchGrid::SINGLE, inputs)
    }

    /// [`Kernel::bind_inputs`] for a launch over `grid`, which also binds the grid's symbols
    /// (`num_programs(axis)`, `num_programs()`, `program_ndim()`) before the constraints are
    /// checked.
    #[inline]
    pub fn bind_inputs_on(
        &self,
        grid: &LaunchGrid,
        inputs: &[HbmIn<'_>],
    ) -> Result<SymbolValues, LaunchError> {
        let p = &self.program;
        grid.validate(p.target()).map_err(|why| LaunchError::Grid {
            kernel: p.name().to_string(),
            why,
        })?;
        let decls = p.inputs();
        if inputs.len() != decls.len() {
            return Err(LaunchError::ArgumentCount {
                kernel: p.name().to_string(),
                what: "input",
                expected: decls.len(),
                found: inputs.len(),
            });
        }
        let mut syms: SymbolValues = [0; MAX_SYMBOLS];
        // Which (input, axis) bound each symbol.
        // Bit s: symbol s is bound (its first source is found again only to report an error).
        let mut bound = 0u32;
        for (decl, arg) in decls.iter().zip(inputs) {
            if arg.dtype != decl.dtype {
                return Err(LaunchError::DType {
                    tensor: decl.name.to_string(),
                    expected: decl.dtype,
                    found: arg.dtype,
                });
            }
            if arg.shape.rank() != decl.shape.len() {
                return Err(LaunchError::Rank {
                    tensor: decl.name.to_string(),
                    expected: decl.shape.len(),
                    found: arg.shape.rank(),
                });
            }
            for (axis, (&dim, &n)) in decl.shape.iter().zip(arg.shape()).enumerate() {
                let n = n as u64;
                match dim {
                    Dim::Fixed(expected) if expected != n => {
                        return Err(LaunchError::Dim {
                            tensor: decl.name.to_string(),
                            axis,
                            expected,
                            found: n,
                        });
                    }
                    Dim::Fixed(_) => {}
                    Dim::Sym(s) => {
                        let s = s as usize;
                        match bound >> s & 1 {
                            0 => {
                                syms[s] = n;
                                bound |= 1 << s;
                            }
                            _ if syms[s] == n => {}
                            _ => {
                                // s < MAX_SYMBOLS.
                                let sym = u8::try_from(s).unwrap_or(u8::MAX);
                                let (ti, ta) = first_source(decls, sym);
                                return Err(LaunchError::InconsistentSymbol {
                                    symbol: name(p.symbols(), s),
                                    first: syms[s],
                                    first_tensor: decls[ti].name.to_string(),
                                    first_axis: ta,
                                    found: n,
                                    tensor: decl.name.to_string(),
                                    axis,
                                });
                            }
                        }
                    }
                }
            }
        }
        grid.bind_symbols(p, &mut syms);
        bind_derived(p, &mut syms)?;
        check_reshapes(p, &syms)?;
        if let Err(c) = check_constraints(p.constraints(), &syms) {
            return Err(constraint_error(p, c, &syms));
        }
        Ok(syms)
    }

    /// The shape of output `i` for the bound symbols, or `None` if the kernel has no output
    /// `i` (or its shape does not fit this host).
    pub fn output_shape(&self, i: usize, syms: &SymbolValues) -> Option<Shape> {
        let decl = self.program.outputs().get(i)?;
        let mut dims = [0usize; nki_lang::MAX_TENSOR_RANK];
        for (d, dim) in dims.iter_mut().zip(decl.shape) {
            *d = usize::try_from(dim.eval(syms)).ok()?;
        }
        Shape::new(&dims[..decl.shape.len()]).ok()
    }

    /// [`Kernel::output_shape`] as an ndarray dimension (for allocating an output array), or
    /// `None` if there is no output `i` or its rank is not `D`'s.
    pub fn output_dims<D: Dimension>(&self, i: usize, syms: &SymbolValues) -> Option<D> {
        self.output_shape(i, syms)?.to_dim()
    }

    /// Every launch check, and nothing else: the inputs as in [`Kernel::bind_inputs`], then
    /// the outputs (count, element type, exact shape). Allocates only to report an error;
    /// writes nothing.
    #[inline]
    pub fn bind<'a, 'o>(
        &'a self,
        inputs: &'a [HbmIn<'a>],
        outputs: &'a mut [HbmOut<'o>],
    ) -> Result<Bound<'a, 'p, 'o>, LaunchError> {
        self.bind_on(LaunchGrid::SINGLE, inputs, outputs)
    }

    /// [`Kernel::bind`] for a launch over `grid`.
    #[inline]
    pub fn bind_on<'a, 'o>(
        &'a self,
        grid: LaunchGrid,
        inputs: &'a [HbmIn<'a>],
        outputs: &'a mut [HbmOut<'o>],
    ) -> Result<Bound<'a, 'p, 'o>, LaunchError> {
        let syms = self.bind_inputs_on(&grid, inputs)?;
        self.bind_outputs(syms, grid, inputs, outputs)
    }

    /// The input half of [`Kernel::bind`]: checks the inputs as [`Kernel::bind_inputs`] does and
    /// keeps them with the bound symbols, so that a launch can size its outputs from
    /// [`CheckedInputs::symbols`] and then bind them without checking the inputs again.
    #[inline]
    pub fn check_inputs<'a>(
        &'a self,
        inputs: &'a [HbmIn<'a>],
    ) -> Result<CheckedInputs<'a, 'p>, LaunchError> {
        self.check_inputs_on(LaunchGrid::SINGLE, inputs)
    }

    /// [`Kernel::check_inputs`] for a launch over `grid`.
    #[inline]
    pub fn check_inputs_on<'a>(
        &'a self,
        grid: LaunchGrid,
        inputs: &'a [HbmIn<'a>],
    ) -> Result<CheckedInputs<'a, 'p>, LaunchError> {
        let syms = self.bind_inputs_on(&grid, inputs)?;
        Ok(CheckedInputs {
            kernel: self,
            inputs,
            syms,
            grid,
        })
    }

    /// The output half of [`Kernel::bind`] for inputs that passed [`Kernel::bind_inputs`]
    /// with the symbols `syms` (private: only [`CheckedInputs`] carries such symbols).
    #[inline]
    fn bind_outputs<'a, 'o>(
        &'a self,
        syms: SymbolValues,
        grid: LaunchGrid,
        inputs: &'a [HbmIn<'a>],
        outputs: &'a mut [HbmOut<'o>],
    ) -> Result<Bound<'a, 'p, 'o>, LaunchError> {
        let p = &self.program;
        if inputs.len() != p.input_count() {
            return Err(LaunchError::ArgumentCount {
                kernel: p.name().to_string(),
                what: "input",
                expected: p.input_count(),
                found: inputs.len(),
            });
        }
        let decls = p.outputs();
        if outputs.len() != decls.len() {
            return Err(LaunchError::ArgumentCount {
                kernel: p.name().to_string(),
                what: "output",
                expected: decls.len(),
                found: outputs.len(),
            });
        }
        for (i, (decl, out)) in decls.iter().zip(outputs.iter()).enumerate() {
            if out.dtype != decl.dtype {
                return Err(LaunchError::DType {
                    tensor: decl.name.to_string(),
                    expected: decl.dtype,
                    found: out.dtype,
                });
            }
            let fits = out.shape.rank() == decl.shape.len()
                && decl
                    .shape
                    .iter()
                    .zip(out.shape())
                    .all(|(d, &n)| d.eval(&syms) == n as u64);
            if !fits {
                // The expected shape always fits: inputs of those sizes exist.
                let expected = self.output_shape(i, &syms).unwrap_or_default();
                return Err(LaunchError::OutputShape {
                    tensor: decl.name.to_string(),
                    expected: expected.as_slice().to_vec(),
                    found: out.shape().to_vec(),
                });
            }
        }
        Ok(Bound {
            program: p,
            syms,
            grid,
            inputs,
            outputs,
            meter: &crate::budget::UNBOUNDED,
        })
    }
}

/// The (input, axis) whose dimension first names symbol `s`.
fn first_source(decls: &[nki_lang::TensorDecl<'_>], s: u8) -> (usize, usize) {
    decls
        .iter()
        .enumerate()
        .find_map(|(i, d)| {
            d.shape
                .iter()
                .position(|&x| x == Dim::Sym(s))
                .map(|a| (i, a))
        })
        .unwrap_or((0, 0))
}

fn name(names: &[&str], i: usize) -> String {
    names.get(i).copied().unwrap_or("?").to_string()
}

/// The error for a failed constraint: its text and the values of the symbols it involves.
/// Binds the program's derived symbols (products `N * C`, quotients `h / k_h`, sums `H + 2`,
/// [`nki_lang::derived`]) from the values in `syms` of the symbols they name.
fn bind_derived(p: &Program<'_>, syms: &mut SymbolValues) -> Result<(), LaunchError> {
    let symbols = p.symbols();
    for (s, name) in symbols.iter().enumerate() {
        if !SymbolSource::of(name).is_derived() {
            continue;
        }
        let value = |f: &str| {
            let i = symbols.iter().position(|n| *n == f)?;
            syms.get(i).copied()
        };
        let result = nki_lang::derived::value(name, &mut |f: &str| value(f));
        let error = match result {
            Ok(v) => {
                syms[s] = v;
                continue;
            }
            Err(e) => e,
        };
        let mut values = String::new();
        for f in nki_lang::derived::atoms(name).unwrap_or_default() {
            if !values.is_empty() {
                values.push_str(", ");
            }
            let v = value(f).map_or_else(|| "?".to_string(), |v| v.to_string());
            let _ = write!(values, "{f} = {v}");
        }
        let symbol = name.to_string();
        return Err(match error {
            nki_lang::derived::EvalError::DivisionByZero { divisor } => LaunchError::ZeroDivisor {
                symbol,
                divisor,
                values,
            },
            // A checked program's names parse and name bound symbols: only an overflow is left.
            nki_lang::derived::EvalError::Overflow
            | nki_lang::derived::EvalError::Unknown(_)
            | nki_lang::derived::EvalError::Malformed(_) => {
                LaunchError::ProductOverflow { symbol, values }
            }
        });
    }
    Ok(())
}

/// Every reshape's dimensions hold its tensor's elements for the symbols `syms`.
fn check_reshapes(p: &Program<'_>, syms: &SymbolValues) -> Result<(), LaunchError> {
    for r in p.reshapes() {
        let Some(tensor) = p.tensors().get(usize::from(r.tensor)) else {
            continue;
        };
        let elements = tensor
            .shape
            .iter()
            .try_fold(1u64, |n, d| n.checked_mul(d.eval(syms)));
        let reshaped = r.elements(syms);
        if reshaped == elements {
            continue;
        }
        let dims: Vec<String> = r.shape.iter().map(|d| d.eval(syms).to_string()).collect();
        let mut values = String::new();
        for (s, sym) in p.symbols().iter().enumerate() {
            let used = |d: &Dim| matches!(*d, Dim::Sym(x) if usize::from(x) == s);
            if r.shape.iter().chain(tensor.shape).any(used) {
                if !values.is_empty() {
                    values.push_str(", ");
                }
                let _ = write!(values, "{sym} = {}", syms[s]);
            }
        }
        return Err(LaunchError::Reshape {
            reshape: r.name.to_string(),
            tensor: tensor.name.to_string(),
            elements: elements.unwrap_or(u64::MAX),
            dims: dims.join(", "),
            reshaped: reshaped.unwrap_or(u64::MAX),
            values,
        });
    }
    Ok(())
}

fn constraint_error(p: &Program<'_>, c: &Constraint, syms: &SymbolValues) -> LaunchError {
    let tensors: Vec<&str> = p.tensors().iter().map(|t| t.name).collect();
    let reshapes: Vec<&str> = p.reshapes().iter().map(|r| r.name).collect();
    let tiles: Vec<&str> = p.tiles().iter().map(|t| t.name).collect();
    let constraint = c
        .display(p.symbols(), &tensors, &reshapes, &tiles)
        .to_string();
    let mut used = [false; MAX_SYMBOLS];
    let mut use_sym = |s: u8| {
        if let Some(u) = used.get_mut(usize::from(s)) {
            *u = true;
        }
    };
    match *c {
        Constraint::Divisible { sym, .. } => use_sym(sym),
        Constraint::InBounds { size, .. } => {
            if let Dim::Sym(s) = size {
                use_sym(s);
            }
        }
        Constraint::InRange { .. } => {}
        Constraint::Blocks { count, .. } => {
            if let Extent::Sym { sym, .. } = count {
                use_sym(sym);
            }
        }
    }
    let (coef, loops) = c.variables();
    for (&k, n) in coef.iter().zip(loops) {
        if let (Extent::Sym { sym, .. }, true) = (n, k != 0) {
            use_sym(*sym);
        }
    }
    let mut values = String::new();
    for (s, _) in used.iter().enumerate().filter(|(_, u)| **u) {
        if !values.is_empty() {
            values.push_str(", ");
        }
        let _ = write!(values, "{} = {}", name(p.symbols(), s), syms[s]);
    }
    if values.is_empty() {
        values.push_str("no symbolic dimension");
    }
    LaunchError::Constraint { constraint, values }
}

/// A launch's inputs after [`Kernel::check_inputs`]: the kernel, the inputs and the symbol
/// values they bind. Only a check can make one, so the symbols always agree with the inputs.
#[derive(Copy, Clone, Debug)]
pub struct CheckedInputs<'a, 'p> {
    kernel: &'a Kernel<'p>,
    inputs: &'a [HbmIn<'a>],
    syms: SymbolValues,
    grid: LaunchGrid,
}

impl<'a, 'p> CheckedInputs<'a, 'p> {
    /// The values of the kernel's symbolic dimensions (by symbol index), e.g. to size outputs
    /// with [`Kernel::output_shape`].
    pub fn symbols(&self) -> &SymbolValues {
        &self.syms
    }

    /// Checks the outputs (count, element type, exact shape) and completes the binding.
    #[inline]
    pub fn bind_outputs<'o>(
        self,
        outputs: &'a mut [HbmOut<'o>],
    ) -> Result<Bound<'a, 'p, 'o>, LaunchError> {
        self.kernel
            .bind_outputs(self.syms, self.grid, self.inputs, outputs)
    }
}

impl From<crate::device_tensor::TensorError> for LaunchError {
    fn from(e: crate::device_tensor::TensorError) -> Self {
        match e {
            crate::device_tensor::TensorError::Shape(s) => LaunchError::Shape(s),
            crate::device_tensor::TensorError::Allocation { bytes } => {
                LaunchError::Allocation { bytes }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_lang::{Target, TensorDecl, TensorRole};

    static TENSORS: [TensorDecl<'static>; 1] = [TensorDecl {
        name: "x",
        dtype: DType::F32,
        shape: &[Dim::Sym(0), Dim::Fixed(4)],
        role: TensorRole::Input,
        scope: None,
        data: &[],
    }];

    /// What `#[kernel]` emits: a kernel in a `static`.
    static KERNEL: Kernel<'static> = Kernel::new(Program::from_checked_parts(
        "k",
        Target::Trn1,
        &["N"],
        &TENSORS,
        &[],
        &[],
        &[],
        &[],
        &[],
        &[],
        &[],
        &[],
        &[],
        0,
        0,
    ));

    #[test]
    fn static_kernel_binds() {
        let x = [0.0f32; 12];
        let arg = HbmIn::new(&x, &[3, 4]).unwrap();
        assert_eq!(format!("{arg:?}"), "HbmIn(f32[3, 4])");
        let syms = KERNEL.bind_inputs(&[arg]).unwrap();
        assert_eq!(syms[0], 3);
        let args = [arg];
        let bound = KERNEL.bind(&args, &mut []).unwrap();
        assert_eq!(format!("{bound:?}").lines().count(), 1);
        assert_eq!(KERNEL.name(), "k");
        let bad = HbmIn::new(&x, &[4, 3]).unwrap();
        assert_eq!(
            KERNEL.bind_inputs(&[bad]).unwrap_err(),
            LaunchError::Dim {
                tensor: "x".into(),
                axis: 1,
                expected: 4,
                found: 3
            }
        );
    }
}
