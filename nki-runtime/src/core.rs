//! The modeled NeuronCore: its memories, and launching kernels on it.

use core::fmt;

use nki_lang::Target;
use thiserror::Error;

use crate::bind::{Bound, HbmIn, HbmOut};
use crate::budget::{Budget, Meter, StopHandle};
use crate::cpu::Isa;
use crate::engines::EngineState;
use crate::exec::plan::Serial;
use crate::exec::{Observer, Unobserved, run};
use crate::host::HostState;
use crate::host_profile::HostProfile;
use crate::launch::{Kernel, LaunchError};
use crate::memory::{Psum, Sbuf};
use crate::strict::{ScheduleCheck, Strict};
use crate::uninitialized::{UninitializedMemory, poison_launch};

/// The host CPU cannot run the requested code path.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Error)]
#[error("the host CPU does not support the {isa:?} code path")]
pub struct UnsupportedIsa {
    /// The requested path.
    pub isa: Isa,
}

/// One modeled NeuronCore: SBUF, PSUM and the engines that execute kernel programs.
///
/// The memories are allocated when the core is created, and launches allocate nothing, with
/// three exceptions made once and kept: the second set of engines on the first launch that
/// splits between the host threads, the copies of output parts the second thread writes on the
/// first launch whose halves interleave in an output (`host::interleaved`), and a table of
/// each tile's reader that grows to the largest program's tile count. SBUF and PSUM
/// keep their contents between launches (a kernel must not rely on them, as on hardware).
pub struct NeuronCore {
    target: Target,
    pub(crate) engines: EngineState,
    /// What the host's shortcuts keep between plain launches.
    host: HostState,
    /// Host time per instruction of the launches since recording started, if it did.
    host_profile: Option<HostProfile>,
    /// Whether every launch runs strictly ([`NeuronCore::execute_strict`]).
    strict: bool,
    /// What bounds each launch's work.
    budget: Budget,
    /// The handle that stops launches, once one was asked for.
    stop: Option<StopHandle>,
    /// What launches find in memory they did not write.
    uninitialized: UninitializedMemory,
    /// Whether a strict launch may leave output elements unwritten.
    unwritten_outputs: bool,
    /// The schedule-independence check every launch runs first, if any.
    schedule_check: Option<ScheduleCheck>,
}

impl NeuronCore {
    /// A core of generation `target`, running its inner loops on the code path
    /// [`isa_by_default`] names (the best one of this CPU unless `NKI_ISA` says otherwise),
    /// strictly or not as [`strict_by_default`] says.
    pub fn new(target: Target) -> Self {
        NeuronCore {
            target,
            engines: EngineState::new(target, isa_by_default()),
            host: HostState::default(),
            host_profile: None,
            strict: strict_by_default(),
            budget: Budget::UNLIMITED,
            stop: None,
            uninitialized: UninitializedMemory::from_env(),
            unwritten_outputs: false,
            schedule_check: None,
        }
    }

    /// The same core running on code path `isa` (all paths compute identical bits; they
    /// differ in speed). Fails if this CPU lacks `isa`.
    pub fn with_isa(mut self, isa: Isa) -> Result<Self, UnsupportedIsa> {
        if !isa.is_supported() {
            return Err(UnsupportedIsa { isa });
        }
        self.engines.isa = isa;
        Ok(self)
    }

    /// The same core using at most `threads` host threads: 1 runs every instruction on the
    /// calling thread; 2 or more (the default, on a host with 2 or more cores) splits large
    /// instructions between the calling thread and one worker. Results are identical either
    /// way; only speed differs.
    pub fn with_host_threads(mut self, threads: usize) -> Self {
        match (threads >= 2, self.engines.worker.is_some()) {
            (false, true) => self.engines.worker = None,
            (true, false) => self.engines.worker = crate::worker::Worker::start(),
            _ => {}
        }
        self
    }

    /// The same core assuming `bytes` of the host's cache per block of partitions (default:
    /// the host's L2 per core as Linux reports it, else 1 MiB): plain runs run neighbouring
    /// instructions that compute each partition on its own (loads, stores, elementwise
    /// instructions, reductions and scans along the free axes) a block of partitions at a time
    /// when their tiles would not stay in that much cache between them. Results are identical
    /// for any value (0 counts as 1); only speed differs.
    pub fn with_host_cache_bytes(mut self, bytes: usize) -> Self {
        self.engines.block_bytes = bytes.max(1);
        self
    }

    /// Host threads this core uses (1 or 2).
    pub fn host_threads(&self) -> usize {
        1 + self.engines.worker.is_some() as usize
    }

    /// The mean round trip of a cache line between the calling thread and the core's second
    /// host thread, measured now (a few microseconds); `None` with one host thread, or when the
    /// second thread's core is busy.
    ///
    /// Single instructions are split between the two threads only while the round trip is at
    /// most [`NeuronCore::NEAR_ROUND_TRIP`] (the hypervisor moves the two vCPUs near and far
    /// from each other; halves of one instruction share their operands, so in the far
    /// placement splitting costs more than it saves). Benchmarks print it to tell the two
    /// placements apart.
    pub fn host_round_trip(&mut self) -> Option<std::time::Duration> {
        self.engines.worker.as_mut()?.round_trip()
    }

    /// The longest round trip ([`NeuronCore::host_round_trip`]) at which single instructions
    /// are split between the two host threads (250 ns).
    pub const NEAR_ROUND_TRIP: std::time::Duration = crate::worker::NEAR;

    /// The code path in use.
    pub fn isa(&self) -> Isa {
        self.engines.isa
    }

    /// The core's generation.
    pub fn target(&self) -> Target {
        self.target
    }

    /// Starts recording where the host's time goes in the launches that follow (`true`,
    /// keeping what was recorded so far), or stops and forgets (`false`). While recording,
    /// every launch runs under a [`HostProfile`] (serially: see [`crate::host_profile`]);
    /// when not, a launch pays one branch for this switch.
    pub fn record_host_profile(&mut self, on: bool) {
        match (on, self.host_profile.is_some()) {
            (true, false) => self.host_profile = Some(HostProfile::new()),
            (false, _) => self.host_profile = None,
            (true, true) => {}
        }
    }

    /// The same core running every launch strictly (`true`): as
    /// [`NeuronCore::execute_strict`], through every launch API (`kernel(&mut core, ...)`,
    /// `launch_into`, `host`, grids); or at full speed (`false`). The default is
    /// [`strict_by_default`]: on in tests and debug builds, off in release builds. Strict
    /// launches run on one thread and check every operand element, some 50–100× slower; they
    /// are not recorded in the host profile.
    pub fn with_strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Bounds the work of every launch that follows, plain, strict, observed or timing-only
    /// ([`Budget::UNLIMITED`] lifts the bounds): a launch over it ends with
    /// [`LaunchError::Stopped`], and the core stays usable.
    pub fn set_budget(&mut self, budget: Budget) {
        self.budget = budget;
    }

    /// What bounds each launch's work ([`NeuronCore::set_budget`]).
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// A handle another thread can use to stop this core's launch in progress
    /// ([`StopHandle::stop`]); every call returns the same handle. Once one exists, launches
    /// check it at every loop back-edge.
    pub fn stop_handle(&mut self) -> StopHandle {
        self.stop.get_or_insert_with(StopHandle::default).clone()
    }

    /// The same core with launches finding `memory` in what they did not write: what the
    /// previous launch left ([`UninitializedMemory::Keep`], the default unless
    /// `NKI_UNINITIALIZED_MEMORY=nan`), or NaN ([`UninitializedMemory::Nan`]: every tile of the
    /// program and every output is filled with its dtype's NaN before each launch, which then
    /// runs on one host thread), so that a result computed from stale data shows up without
    /// strict mode. Strict launches are unaffected: they refuse such reads.
    pub fn with_uninitialized_memory(mut self, memory: UninitializedMemory) -> Self {
        self.uninitialized = memory;
        self
    }

    /// The same core with strict launches allowed (`true`) to leave output elements unwritten:
    /// for a kernel that writes part of an output by design (NKI's `add_kernel_nx8x128x512`
    /// writes the first `n_elements` of a larger tensor); the elements it does not write keep
    /// what the tensor held. By default (`false`) such a launch is
    /// [`crate::StrictError::Unwritten`]. Plain launches never check it.
    pub fn with_unwritten_outputs(mut self, allow: bool) -> Self {
        self.unwritten_outputs = allow;
        self
    }

    /// The same core checking every launch ([`NeuronCore::execute`], strict or not, and
    /// [`NeuronCore::execute_strict`]) for schedule independence first, when `check` is
    /// `Some` ([`ScheduleCheck`]): the launch runs in program order and in other
    /// orders of its instructions that the device may run (tiles renamed, loop tiles rotating,
    /// `affine_range` iterations and SPMD instances independent), and outputs that differ are
    /// [`LaunchError::Schedule`], naming two instructions whose order changed them. Then the
    /// launch runs as it would without the check. Off by default: each order is a full run,
    /// one instruction at a time.
    pub fn with_schedule_check(mut self, check: Option<ScheduleCheck>) -> Self {
        self.schedule_check = check;
        self
    }

    /// The schedule-independence check launches run ([`NeuronCore::with_schedule_check`]).
    pub fn schedule_check(&self) -> Option<ScheduleCheck> {
        self.schedule_check
    }

    /// Runs the core's schedule-independence check on `bound`, if it has one.
    fn check_schedule(&mut self, bound: &mut Bound<'_, '_, '_>) -> Result<(), LaunchError> {
        if let Some(check) = self.schedule_check {
            crate::schedule::check(&mut self.engines, bound, check)?;
        }
        Ok(())
    }

    /// What launches find in memory they did not write
    /// ([`NeuronCore::with_uninitialized_memory`]).
    pub fn uninitialized_memory(&self) -> UninitializedMemory {
        self.uninitialized
    }

    /// Whether launches run strictly ([`NeuronCore::with_strict`]).
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// Host time per instruction and opcode of the launches since
    /// [`NeuronCore::record_host_profile`] started recording; `None` when not recording.
    pub fn host_profile(&self) -> Option<&HostProfile> {
        self.host_profile.as_ref()
    }

    /// The state buffer, for inspection. After a plain (not strict) launch, tiles whose data
    /// only passed through SBUF between neighbouring instructions may keep their old contents,
    /// whole or in some partitions (see the crate documentation); a strict core writes every
    /// tile.
    pub fn sbuf(&self) -> &Sbuf {
        &self.engines.sbuf
    }

    /// The partial-sum buffer, for inspection.
    pub fn psum(&self) -> &Psum {
        &self.engines.psum
    }

    /// Runs a bound kernel to completion.
    ///
    /// Everything about the launch was checked by [`Kernel::bind`]; the one thing that
    /// depends on the core is checked here: a program compiled for a larger SBUF (a Trn2
    /// program on a Trn1 core) is refused with [`LaunchError::SbufCapacity`] before anything
    /// runs.
    ///
    /// The instances of a grid launch run in row-major order, or in two halves on the core's
    /// two host threads when their outputs split between them (`host::spmd`). Within one
    /// instance, an outermost `affine_range` loop whose iterations share no written tile runs
    /// its iterations in two halves the same way ([`Bound::host_parallel_loops`] names them).
    /// Either way the results are those of a serial run, bit for bit.
    pub fn execute(&mut self, bound: Bound<'_, '_, '_>) -> Result<(), LaunchError> {
        if self.strict {
            return self.execute_strict(bound);
        }
        crate::scratch::with_allocated(bound, |bound| self.execute_plain(bound))
    }

    /// [`NeuronCore::execute`] of a plain launch whose allocated tensors are bound.
    fn execute_plain(&mut self, bound: Bound<'_, '_, '_>) -> Result<(), LaunchError> {
        self.check_capacity(&bound)?;
        let mut bound = bound;
        self.check_schedule(&mut bound)?;
        let meter = Meter::new(self.budget, self.stop.as_ref());
        let mut bound = Bound {
            meter: &meter,
            ..bound
        };
        self.poison(&mut bound);
        let ran = match (self.host_profile.as_mut(), self.uninitialized) {
            (Some(profile), _) => run(&mut self.engines, &mut bound, profile, &mut Serial),
            // Poisoned on-chip memories are this core's: the launch runs on one thread.
            (None, UninitializedMemory::Nan) => {
                run(&mut self.engines, &mut bound, &mut Unobserved, &mut Serial)
            }
            (None, UninitializedMemory::Keep) => {
                crate::host::execute(&mut self.engines, &mut self.host, self.target, &mut bound)
            }
        };
        Self::report(&meter, &bound, ran)
    }

    /// A run's result, its meter's reason instead of the error that unwound it when the meter
    /// stopped it.
    fn report(
        meter: &Meter,
        bound: &Bound<'_, '_, '_>,
        ran: Result<(), crate::exec::ExecError>,
    ) -> Result<(), LaunchError> {
        match meter.stopped(bound.program.name()) {
            Some(why) => Err(LaunchError::Stopped(why)),
            None => Ok(ran?),
        }
    }

    /// [`NeuronCore::execute`] with an [`Observer`] that sees every instruction with its
    /// resolved operands as it runs, and may stop the run ([`LaunchError::Exec`]).
    pub fn execute_observed<O: Observer>(
        &mut self,
        bound: Bound<'_, '_, '_>,
        observer: &mut O,
    ) -> Result<(), LaunchError> {
        crate::scratch::with_allocated(bound, |bound| self.execute_observed_bound(bound, observer))
    }

    /// [`NeuronCore::execute_observed`] of a launch whose allocated tensors are bound.
    fn execute_observed_bound<O: Observer>(
        &mut self,
        bound: Bound<'_, '_, '_>,
        observer: &mut O,
    ) -> Result<(), LaunchError> {
        self.check_capacity(&bound)?;
        let meter = Meter::new(self.budget, self.stop.as_ref());
        let mut bound = Bound {
            meter: &meter,
            ..bound
        };
        if observer.computes() {
            self.poison(&mut bound);
        }
        let ran = run(&mut self.engines, &mut bound, observer, &mut Serial);
        Self::report(&meter, &bound, ran)
    }

    /// Fills the launch's tiles and outputs with NaN if this core's launches find NaN in what
    /// they did not write ([`NeuronCore::with_uninitialized_memory`]).
    fn poison(&mut self, bound: &mut Bound<'_, '_, '_>) {
        if self.uninitialized == UninitializedMemory::Nan {
            let e = &mut self.engines;
            poison_launch(
                bound.program,
                &bound.syms,
                &mut e.sbuf,
                &mut e.psum,
                bound.outputs,
            );
        }
    }

    /// [`NeuronCore::execute`] in strict mode ([`crate::strict`]): a store of a value that
    /// depends on SBUF, PSUM or output bytes no instruction of this launch wrote (by each
    /// opcode's dependency rule, [`nki_lang::Deps`]) stops the launch with [`LaunchError::Exec`]
    /// (the instruction, its source line, the tile or tensor, the element and the loop values);
    /// an output left partly unwritten is [`LaunchError::Strict`]. The
    /// launch runs serially, several times slower than a plain one.
    pub fn execute_strict(&mut self, bound: Bound<'_, '_, '_>) -> Result<(), LaunchError> {
        crate::scratch::with_allocated(bound, |bound| self.execute_strict_bound(bound))
    }

    /// [`NeuronCore::execute_strict`] of a launch whose allocated tensors are bound.
    fn execute_strict_bound(&mut self, mut bound: Bound<'_, '_, '_>) -> Result<(), LaunchError> {
        if self.schedule_check.is_some() {
            self.check_capacity(&bound)?;
            self.check_schedule(&mut bound)?;
        }
        let program = bound.program;
        let outputs: Vec<usize> = bound.outputs.iter().map(|o| o.data.len()).collect();
        let mut strict = Strict::new(program, self.engines.sbuf.partition_stride(), &outputs);
        self.execute_observed_bound(bound, &mut strict)?;
        if !self.unwritten_outputs {
            strict.finish()?;
        }
        Ok(())
    }

    /// Refuses a program compiled for a larger SBUF than this core's, or for a later
    /// generation (whose instruction forms this core may lack).
    pub(crate) fn check_capacity(&self, bound: &Bound<'_, '_, '_>) -> Result<(), LaunchError> {
        let p = bound.program;
        let capacity = self.target.sbuf_partition_bytes();
        if p.sbuf_bytes() > capacity {
            return Err(LaunchError::SbufCapacity {
                kernel: p.name().to_string(),
                needed: p.sbuf_bytes(),
                compiled: p.target().name(),
                core: self.target.name(),
                capacity,
            });
        }
        if !p.target().runs_on(self.target) {
            return Err(LaunchError::Target {
                kernel: p.name().to_string(),
                compiled: p.target().name(),
                core: self.target.name(),
            });
        }
        Ok(())
    }

    /// Binds and executes: [`Kernel::bind`] then [`NeuronCore::execute`]. On error nothing
    /// was written.
    pub fn launch(
        &mut self,
        kernel: &Kernel<'_>,
        inputs: &[HbmIn<'_>],
        outputs: &mut [HbmOut<'_>],
    ) -> Result<(), LaunchError> {
        let bound = kernel.bind(inputs, outputs)?;
        self.execute(bound)
    }
}

/// Whether a new [`NeuronCore`] runs every launch strictly: the environment variable
/// `NKI_STRICT` if it is set (`0`, `false`, `off` or `no`: plain; any other value: strict),
/// else whether this build has debug assertions. So `cargo test` and `cargo run` check every
/// launch, and `--release` builds run at full speed; [`NeuronCore::with_strict`] overrides
/// both for one core.
pub fn strict_by_default() -> bool {
    match std::env::var_os("NKI_STRICT") {
        Some(v) => !matches!(
            v.to_str().map(str::to_ascii_lowercase).as_deref(),
            Some("0" | "false" | "off" | "no")
        ),
        None => cfg!(debug_assertions),
    }
}

/// The code path new cores run on: the one the environment variable `NKI_ISA` names
/// (`portable`, `avx2`, `avx512` or `avx512bf16`, any case), so that benchmarks and examples
/// can measure a path other than the best one without code changes, else the best path of this
/// CPU ([`Isa::detect`]). A name this CPU cannot run, or no path's name, is reported on stderr
/// once and ignored. Read once per process.
pub fn isa_by_default() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| {
        let Some(v) = std::env::var_os("NKI_ISA") else {
            return Isa::detect();
        };
        let name = v.to_string_lossy().to_ascii_lowercase();
        let isa = match name.as_str() {
            "portable" => Some(Isa::Portable),
            "avx2" | "avx2fma" => Some(Isa::Avx2Fma),
            "avx512" => Some(Isa::Avx512),
            "avx512bf16" => Some(Isa::Avx512Bf16),
            _ => None,
        };
        match isa {
            Some(isa) if isa.is_supported() => isa,
            Some(isa) => {
                eprintln!("NKI_ISA={name}: this CPU does not support {isa:?}; using the best path");
                Isa::detect()
            }
            None => {
                eprintln!(
                    "NKI_ISA={name}: not one of portable, avx2, avx512, avx512bf16; using the \
                     best path"
                );
                Isa::detect()
            }
        }
    })
}

impl Default for NeuronCore {
    /// A Trn1 core.
    fn default() -> Self {
        NeuronCore::new(Target::Trn1)
    }
}

impl fmt::Debug for NeuronCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NeuronCore")
            .field("target", &self.target)
            .field("isa", &self.engines.isa)
            .finish_non_exhaustive()
    }
}
