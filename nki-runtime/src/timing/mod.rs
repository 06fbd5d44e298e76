//! A timing model of the NeuronCore: what a kernel would cost on Trn1 or Trn2, engine by
//! engine, on any machine.
//!
//! The model is an event-driven schedule over the instructions a launch executes
//! ([`Timeline`], an [`Observer`](crate::Observer) of the executor): each instruction runs on its
//! engine's queue (Sync, TensorE's LoadStationary and MultiplyMoving, Vector, Scalar, GpSimd;
//! DMA transfers on 16 engines and their queues), starts when its engine can take it and every
//! region it reads or overwrites is ready (read-after-write, write-after-read,
//! write-after-write), and costs what `neuroncore-model.md` says (the formulas in `cost.rs`,
//! the numbers with their sources in [`Params`]). By default it times the program NKI's
//! compiler would hand the device ([`Scheduling::Device`]: tiles renamed, loop tiles rotating,
//! accumulation groups without their fill, loop-invariant instructions hoisted, each engine's
//! stream ordered by readiness, DMA triggers per queue; the passes are in `compiler.rs`);
//! [`Scheduling::ProgramOrder`] times this project's program as allocated and ordered.
//! `docs/timing.md` describes the model, its parameters, its fidelity against published
//! measurements, what it leaves out, and how to read a profile.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use nki_runtime::nki_lang::builder::{Grid, ProgramBuilder};
//! use nki_runtime::nki_lang::{DType, Dim, Memory, Target, Write};
//! use nki_runtime::timing::{Detail, Timing};
//! use nki_runtime::{Kernel, NeuronCore};
//!
//! let mut b = ProgramBuilder::new("matmul_basic", Target::Trn1);
//! let lhs_t = b.input("lhs_t", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(128)])?;
//! let rhs = b.input("rhs", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)])?;
//! let out = b.output("result", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)])?;
//! let a = b.tile("lhs_tile", Memory::Sbuf, DType::Bf16, &[128, 128])?;
//! let x = b.tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512])?;
//! let acc = b.tile("acc", Memory::Psum, DType::F32, &[128, 512])?;
//! let res = b.tile("res", Memory::Sbuf, DType::Bf16, &[128, 512])?;
//! b.load(a, Grid::origin(lhs_t))?;
//! b.load(x, Grid::origin(rhs))?;
//! b.nc_matmul(acc, a, x, Write::Overwrite)?;
//! b.tensor_copy(res, acc)?;
//! b.store(Grid::origin(out), res)?;
//! let compiled = b.finish()?;
//! let parts = compiled.parts();
//! let kernel = Kernel::new(parts.program());
//!
//! // Timing only: no arithmetic runs; the inputs are placeholders of these shapes.
//! let mut core = NeuronCore::new(Target::Trn1);
//! let schedule = Timing::new()
//!     .detail(Detail::Profile)
//!     .run_shapes(&mut core, &kernel, &[&[128, 128], &[128, 512]])?;
//! assert!(schedule.latency_us() > 2.0);
//! println!("{}", schedule.profile());
//! # Ok(())
//! # }
//! ```
//!
//! The model is deterministic: the same program and shapes always give the same schedule, and
//! a run that executes the arithmetic ([`Mode::Compute`]) is timed exactly as one that does
//! not ([`Mode::TimingOnly`]). An instruction whose mask keeps no element is neither executed
//! nor shown to observers, so it costs nothing.

mod bench;
mod cli;
mod compiler;
mod cost;
mod model;
mod params;
mod profile;
mod regions;
mod schedule;
mod svg;
mod trace;

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};

use nki_lang::{DType, Program};
use thiserror::Error;

pub use bench::{Benchmark, BenchmarkResult, Latency};
pub use cli::{
    ProfileRequest, is_profile_arg, profile_from_args, profile_grid_from_args,
    profile_shapes_from_args,
};
pub use compiler::Scheduling;
pub use model::Timeline;
pub use params::{Generation, ParamEntry, Params};
pub use profile::{EngineRow, NamedRow, OpcodeCount, Profile};
pub use schedule::{
    CriticalPath, DmaPhase, Kind, OperandSummary, Record, Schedule, TileUse, Track, TrackStats,
};

use crate::bind::{Bound, HbmIn, HbmOut};
use crate::core::NeuronCore;
use crate::grid::LaunchGrid;
use crate::launch::{Kernel, LaunchError};
use crate::shape::Shape;

/// Why a timed run, a benchmark or a profile could not be made.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TimingError {
    /// The launch was refused (arguments, constraints, capacity) or stopped.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A placeholder input's shape is not a valid tensor shape.
    #[error("input {index}: {why}")]
    Shape {
        /// The input's position.
        index: usize,
        /// What is wrong with it.
        why: String,
    },
    /// A placeholder tensor would not fit in this host's memory.
    #[error("tensor {index} of {elems} elements is too large for this host")]
    TooLarge {
        /// The tensor's position (inputs, then outputs).
        index: usize,
        /// Its element count.
        elems: usize,
    },
    /// The schedule keeps no per-instruction records ([`Detail::Summary`]): a trace, a
    /// timeline or a critical path needs [`Detail::Profile`] or [`Detail::Trace`].
    #[error(
        "the schedule has no per-instruction records: time the run with Detail::Profile or Detail::Trace"
    )]
    NoRecords,
    /// A benchmark of zero iterations.
    #[error("a benchmark needs at least one iteration")]
    NoIterations,
    /// A benchmark asked for more runs than [`Benchmark::MAX_RUNS`].
    #[error("a benchmark of {count} {what} runs: at most {max}")]
    TooManyRuns {
        /// `warm-up` or `timed`.
        what: &'static str,
        /// The count asked for.
        count: usize,
        /// The most it takes.
        max: usize,
    },
    /// A malformed `--profile` argument.
    #[error("bad profile argument `{arg}`: {why}")]
    Args {
        /// The argument.
        arg: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Writing a trace or a timeline failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// How much a timed run records.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Detail {
    /// Totals only: busy time and counts per engine and opcode, FLOPs, bytes, peak memory.
    /// Allocates nothing per instruction: for ranking kernel variants.
    Summary,
    /// Also one [`Record`] per engine step (start, end, what it waited for): the critical
    /// path, the Chrome trace and the SVG timeline.
    #[default]
    Profile,
    /// Also every instruction's operands, for the trace's arguments (and, with
    /// [`Timing::dma_engine_rows`], each DMA engine's part of every transfer).
    Trace,
}

/// Whether a timed run executes the arithmetic.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Resolve and time every instruction without computing anything
    /// ([`Observer::computes`](crate::Observer::computes) is `false`); outputs keep what they held.
    #[default]
    TimingOnly,
    /// Execute the kernel as [`NeuronCore::execute`] does, and time it.
    Compute,
}

/// A timed launch: the model's parameters, what to record, and whether to compute.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    params: Option<Params>,
    detail: Detail,
    mode: Mode,
    grid: Option<LaunchGrid>,
    dma_rows: bool,
    scheduling: Scheduling,
    /// Times every iteration of every loop ([`Timing::fast_forward`] `false`).
    plain: bool,
}

impl Timing {
    /// Timing only, [`Detail::Profile`], the parameters of the core's generation, no launch
    /// grid.
    pub fn new() -> Timing {
        Timing::default()
    }

    /// Times with `params` (e.g. [`Params::TRN2`], or a table with changed fields) instead of
    /// the core's generation's.
    pub fn params(mut self, params: Params) -> Timing {
        self.params = Some(params);
        self
    }

    /// Records `detail`.
    pub fn detail(mut self, detail: Detail) -> Timing {
        self.detail = detail;
        self
    }

    /// Computes or not.
    pub fn mode(mut self, mode: Mode) -> Timing {
        self.mode = mode;
        self
    }

    /// Launches over an SPMD grid (all instances on this core, in row-major order; a
    /// timing-only [`Detail::Summary`] run skips instances in a steady state, see
    /// [`Timing::fast_forward`]).
    pub fn grid(mut self, grid: LaunchGrid) -> Timing {
        self.grid = Some(grid);
        self
    }

    /// With [`Detail::Trace`], also records each DMA engine's part of every transfer, drawn
    /// as the trace's and the timeline's `DMA-E0` … `DMA-E15` rows (16 events per
    /// 128-partition transfer: large traces).
    pub fn dma_engine_rows(mut self, on: bool) -> Timing {
        self.dma_rows = on;
        self
    }

    /// Which program to time: what NKI's compiler would hand the device
    /// ([`Scheduling::Device`], the default) or this project's program as allocated and
    /// ordered ([`Scheduling::ProgramOrder`]). See [`Timeline::with_scheduling`].
    pub fn scheduling(mut self, scheduling: Scheduling) -> Timing {
        self.scheduling = scheduling;
        self
    }

    /// Whether a timing-only [`Detail::Summary`] run may skip the iterations of a loop, and
    /// the instances of a launch grid, in a steady state (default `true`): the schedule is the
    /// same either way (its totals, counts and every figure of its profile), `false` times
    /// every iteration and instance. See [`Timeline::with_fast_forward`].
    pub fn fast_forward(mut self, on: bool) -> Timing {
        self.plain = !on;
        self
    }

    /// [`Scheduling::ProgramOrder`] with `buffers` buffers per tile used only inside an
    /// `affine_range` loop's body, rotating across iterations: a what-if on the program as
    /// allocated whose extra buffers' capacity is not checked (1: the program as allocated;
    /// at most 16).
    pub fn affine_buffers(self, buffers: usize) -> Timing {
        let buffers = u32::try_from(buffers).unwrap_or(u32::MAX);
        self.scheduling(Scheduling::ProgramOrder { buffers })
    }

    /// The launch grid.
    fn launch_grid(&self) -> LaunchGrid {
        self.grid.unwrap_or(LaunchGrid::SINGLE)
    }

    /// The parameters for `core`.
    fn params_for(&self, core: &NeuronCore) -> Params {
        self.params
            .clone()
            .unwrap_or_else(|| Params::for_target(core.target()))
    }

    /// Binds `kernel` to the tensors and times one launch.
    pub fn run(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        inputs: &[HbmIn<'_>],
        outputs: &mut [HbmOut<'_>],
    ) -> Result<Schedule, TimingError> {
        let bound = kernel.bind_on(self.launch_grid(), inputs, outputs)?;
        self.run_bound(core, bound)
    }

    /// Whether a timed run of `program` executes the arithmetic: in [`Mode::Compute`], and
    /// always for a program with device loops, whose trip counts are data.
    fn computes(&self, program: &Program<'_>) -> bool {
        self.mode == Mode::Compute || program.has_device_loops()
    }

    /// Times one launch of a bound kernel (its grid is the binding's).
    pub fn run_bound(
        &self,
        core: &mut NeuronCore,
        bound: Bound<'_, '_, '_>,
    ) -> Result<Schedule, TimingError> {
        let program = bound.program();
        let bytes: Vec<u64> = (0..program.tensors().len())
            .map(|t| {
                let elements = crate::scratch::elements(&bound, t);
                (elements as u64).saturating_mul(u64::from(program.tensors()[t].dtype.size()))
            })
            .collect();
        let mut timeline = Timeline::new(
            program,
            self.params_for(core),
            self.detail,
            self.computes(program),
            core.sbuf().partition_stride(),
            bytes,
        )
        .with_dma_engine_rows(self.dma_rows)
        .with_symbols(*bound.symbols())
        .with_scheduling(self.scheduling)
        .with_fast_forward(!self.plain);
        core.execute_observed(bound, &mut timeline)?;
        Ok(timeline.finish())
    }

    /// Times one launch of `kernel` on placeholder tensors of the given input shapes (zeros,
    /// allocated lazily by the host) and the output shapes they imply: what an autotuner needs
    /// when it has shapes but no data.
    pub fn run_shapes(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        input_shapes: &[&[usize]],
    ) -> Result<Schedule, TimingError> {
        self.on_placeholders(kernel, input_shapes, |inputs, outputs| {
            self.run(core, kernel, inputs, outputs)
        })
    }

    /// Runs `f` on placeholder tensors of the given input shapes and the output shapes they
    /// imply. After a timing-only run (nothing wrote them) they are kept, still zero, for the
    /// next placeholders on this thread: a search over many candidates at one shape clears
    /// its tensors once.
    fn on_placeholders<T>(
        &self,
        kernel: &Kernel<'_>,
        input_shapes: &[&[usize]],
        f: impl FnOnce(&[HbmIn<'_>], &mut [HbmOut<'_>]) -> Result<T, TimingError>,
    ) -> Result<T, TimingError> {
        let mut ph = Placeholders::new(kernel, self.launch_grid(), input_shapes)?;
        let (inputs, mut outputs) = ph.bind();
        let result = f(&inputs, &mut outputs);
        drop((inputs, outputs));
        if !self.computes(kernel.program()) {
            ph.recycle();
        }
        result
    }

    /// Times one launch of `kernel` on `inputs`, with placeholder outputs of the shapes the
    /// kernel produces for them.
    pub fn run_inputs(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        inputs: &[HbmIn<'_>],
    ) -> Result<Schedule, TimingError> {
        let mut outs = placeholder_outputs(kernel, self.launch_grid(), inputs)?;
        let mut outputs: Vec<HbmOut<'_>> = outs.iter_mut().map(Buffer::out).collect();
        self.run(core, kernel, inputs, &mut outputs)
    }
}

/// A zero-filled host buffer standing for an HBM tensor (8-byte aligned).
struct Buffer {
    words: Vec<u64>,
    bytes: usize,
    dtype: DType,
    shape: Shape,
}

impl Buffer {
    /// A buffer of `dims` elements of `dtype`; `index` names it in errors.
    fn new(index: usize, dtype: DType, dims: &[usize]) -> Result<Buffer, TimingError> {
        let shape = Shape::new(dims).map_err(|e| TimingError::Shape {
            index,
            why: e.to_string(),
        })?;
        let elems = shape.len();
        let bytes = elems
            .checked_mul(dtype.size() as usize)
            .filter(|&b| b <= isize::MAX as usize / 2)
            .ok_or(TimingError::TooLarge { index, elems })?;
        // A zeroed buffer of this length that an earlier timing-only run on this thread left,
        // or new zeroed memory, which the host maps lazily (a timing-only run never touches
        // it); refuse what the allocator cannot give rather than abort.
        let len = bytes.div_ceil(8);
        let words = match take_spare(len) {
            Some(words) => words,
            None => {
                Vec::<u64>::new()
                    .try_reserve_exact(len)
                    .map_err(|_| TimingError::TooLarge { index, elems })?;
                vec![0u64; len]
            }
        };
        Ok(Buffer {
            words,
            bytes,
            dtype,
            shape,
        })
    }

    fn input(&self) -> HbmIn<'_> {
        HbmIn {
            data: &bytemuck::cast_slice(&self.words)[..self.bytes],
            dtype: self.dtype,
            shape: self.shape,
            version: None,
        }
    }

    fn out(&mut self) -> HbmOut<'_> {
        let bytes = self.bytes;
        HbmOut {
            data: &mut bytemuck::cast_slice_mut(&mut self.words)[..bytes],
            origin: 0,
            dtype: self.dtype,
            shape: self.shape,
        }
    }
}

thread_local! {
    /// Zeroed placeholder buffers that earlier timing-only runs on this thread left (nothing
    /// wrote them): a search that times many candidates at one shape clears them once. At most
    /// [`SPARES`] are kept.
    static SPARE: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
}

/// Most spare placeholder buffers kept per thread.
const SPARES: usize = 8;

/// A spare zeroed buffer of `len` words, if this thread has one.
fn take_spare(len: usize) -> Option<Vec<u64>> {
    SPARE.with_borrow_mut(|spare| {
        let i = spare.iter().position(|w| w.len() == len)?;
        Some(spare.swap_remove(i))
    })
}

/// Placeholder tensors for a launch of a kernel at given input shapes.
struct Placeholders {
    inputs: Vec<Buffer>,
    outputs: Vec<Buffer>,
}

impl Placeholders {
    fn new(
        kernel: &Kernel<'_>,
        grid: LaunchGrid,
        shapes: &[&[usize]],
    ) -> Result<Placeholders, TimingError> {
        let decls = kernel.program().inputs();
        if shapes.len() != decls.len() {
            return Err(LaunchError::ArgumentCount {
                kernel: kernel.name().to_string(),
                what: "input",
                expected: decls.len(),
                found: shapes.len(),
            }
            .into());
        }
        let inputs = decls
            .iter()
            .zip(shapes)
            .enumerate()
            .map(|(i, (d, s))| Buffer::new(i, d.dtype, s))
            .collect::<Result<Vec<_>, _>>()?;
        let ins: Vec<HbmIn<'_>> = inputs.iter().map(Buffer::input).collect();
        let outputs = placeholder_outputs(kernel, grid, &ins)?;
        drop(ins);
        Ok(Placeholders { inputs, outputs })
    }

    /// Keeps the buffers for the next placeholders on this thread. Only for buffers nothing
    /// wrote (a timing-only run's): they must still be zero.
    fn recycle(self) {
        SPARE.with_borrow_mut(|spare| {
            for b in self.inputs.into_iter().chain(self.outputs) {
                if spare.len() == SPARES {
                    spare.remove(0);
                }
                spare.push(b.words);
            }
        });
    }

    fn bind(&mut self) -> (Vec<HbmIn<'_>>, Vec<HbmOut<'_>>) {
        (
            self.inputs.iter().map(Buffer::input).collect(),
            self.outputs.iter_mut().map(Buffer::out).collect(),
        )
    }
}

/// Zero buffers for the outputs `kernel` produces from `inputs`.
fn placeholder_outputs(
    kernel: &Kernel<'_>,
    grid: LaunchGrid,
    inputs: &[HbmIn<'_>],
) -> Result<Vec<Buffer>, TimingError> {
    let syms = kernel.bind_inputs_on(&grid, inputs)?;
    let n = inputs.len();
    kernel
        .program()
        .outputs()
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let shape = kernel.output_shape(i, &syms).ok_or(TimingError::TooLarge {
                index: n + i,
                elems: usize::MAX,
            })?;
            Buffer::new(n + i, d.dtype, shape.as_slice())
        })
        .collect()
}

impl Schedule {
    /// The profile: per-engine active time and utilisation, counts, MFU/HFU, bytes,
    /// arithmetic intensity, peak memory, critical path.
    pub fn profile(&self) -> Profile {
        Profile::of(self)
    }

    /// Writes the Chrome trace-event JSON (Perfetto, chrome://tracing): one track per engine
    /// and DMA queue (and DMA engine, for a traced run), SBUF/PSUM counters, each record's
    /// opcode, operands (traced runs) and kernel source line in its arguments.
    pub fn write_chrome_trace<W: io::Write>(&self, w: W) -> Result<(), TimingError> {
        trace::write(self, w).map_err(|e| match e {
            trace::Error::NoRecords => TimingError::NoRecords,
            trace::Error::Io(source) => TimingError::Io {
                path: PathBuf::from("<writer>"),
                source,
            },
        })
    }

    /// Writes a self-contained SVG timeline (one row per track, busy intervals merged at the
    /// drawing's resolution, SBUF/PSUM use below).
    pub fn write_svg<W: io::Write>(&self, w: W) -> Result<(), TimingError> {
        svg::write(self, w).map_err(|e| match e {
            trace::Error::NoRecords => TimingError::NoRecords,
            trace::Error::Io(source) => TimingError::Io {
                path: PathBuf::from("<writer>"),
                source,
            },
        })
    }

    /// Writes `<name>.trace.json` and `<name>.svg` into `dir` (created if missing); returns
    /// their paths.
    pub fn write_files(&self, dir: &Path, name: &str) -> Result<(PathBuf, PathBuf), TimingError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TimingError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let trace_path = dir.join(format!("{safe}.trace.json"));
        let svg_path = dir.join(format!("{safe}.svg"));
        for (path, svg) in [(&trace_path, false), (&svg_path, true)] {
            let file = std::fs::File::create(path).map_err(io_err(path))?;
            let mut w = io::BufWriter::new(file);
            let r = if svg {
                svg::write(self, &mut w)
            } else {
                trace::write(self, &mut w)
            };
            match r {
                Ok(()) => {}
                Err(trace::Error::NoRecords) => return Err(TimingError::NoRecords),
                Err(trace::Error::Io(e)) => return Err(io_err(path)(e)),
            }
            io::Write::flush(&mut w).map_err(io_err(path))?;
        }
        Ok((trace_path, svg_path))
    }
}

#[cfg(test)]
mod tests {
    use nki_lang::builder::{Grid, ProgramBuilder};
    use nki_lang::{Dim, Memory, Target};

    use super::*;

    #[test]
    fn timing_only_placeholders_are_kept_zero_for_the_next_run() {
        let mut b = ProgramBuilder::new("copy", Target::Trn1);
        let x = b
            .input("x", DType::F32, &[Dim::Fixed(128), Dim::Fixed(64)])
            .unwrap();
        let out = b
            .output("out", DType::F32, &[Dim::Fixed(128), Dim::Fixed(64)])
            .unwrap();
        let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 64]).unwrap();
        b.load(t, Grid::origin(x)).unwrap();
        b.store(Grid::origin(out), t).unwrap();
        let c = b.finish().unwrap();
        let parts = c.parts();
        let kernel = Kernel::new(parts.program());
        let mut core = NeuronCore::new(Target::Trn1);
        let words = 128 * 64 * 4 / 8;
        while take_spare(words).is_some() {}
        Timing::new()
            .run_shapes(&mut core, &kernel, &[&[128, 64]])
            .unwrap();
        // The input's and the output's buffers, both untouched.
        for _ in 0..2 {
            let spare = take_spare(words).expect("kept");
            assert!(spare.iter().all(|&w| w == 0));
        }
        // A run that computes writes its output: nothing is kept.
        Timing::new()
            .mode(Mode::Compute)
            .run_shapes(&mut core, &kernel, &[&[128, 64]])
            .unwrap();
        assert!(take_spare(words).is_none());
    }
}
