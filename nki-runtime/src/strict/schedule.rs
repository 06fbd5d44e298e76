//! The option of schedule-independence checking and its error: a launch must compute the same
//! bits in every order of its instructions that the device may run, not only in program order.
//! The check itself is the crate's `schedule` module (it runs the engines, which observers do
//! not see); what it does and proves is in `docs/strictness.md`, "Schedule independence".

use core::fmt;

use nki_lang::MAX_PIDS;
use thiserror::Error;

/// The policy of the `k`-th order a [`ScheduleCheck`] tries.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// The latest in program order first: independent iterations run last to first.
    Reverse,
    /// The lowest instruction index first, then the earliest step: the iterations of a loop
    /// advance together, one instruction at a time (as a pipelined device overlaps them).
    Lockstep,
    /// The lowest instruction index first, then the latest step.
    LockstepReversed,
    /// Steps that write nothing shared (an output, or a tile declared outside their
    /// innermost loop) first, in program order; then, when only such writers are ready, the
    /// latest first: reads as early and shared writes as late as the graph allows.
    LazySharedWrites,
    /// Uniformly at random (a SplitMix64 stream from the seed).
    Random(u64),
}

impl Policy {
    /// The policy's name in messages.
    pub(crate) fn name(self) -> String {
        match self {
            Policy::Reverse => "reverse".to_string(),
            Policy::Lockstep => "lockstep".to_string(),
            Policy::LockstepReversed => "lockstep, iterations reversed".to_string(),
            Policy::LazySharedWrites => "shared writes last".to_string(),
            Policy::Random(seed) => format!("random, seed {seed}"),
        }
    }
}

/// The option that runs every launch of a core in other legal orders too
/// ([`crate::NeuronCore::with_schedule_check`]): the launch recorded, its dependency graph
/// built as the device respects it, and run on renamed, rotating tile buffers in program order
/// and in other orders the graph allows; `docs/strictness.md`, "Schedule independence", says
/// how, and what a pass proves.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScheduleCheck {
    /// How many orders to try besides program order: the first four are `reverse`,
    /// `lockstep`, `lockstep` with the later iterations first and `shared writes last`; the
    /// rest are random.
    pub orders: u32,
    /// The seed of the random orders.
    pub seed: u64,
    /// Buffers each tile's instances rotate over (1 to [`ScheduleCheck::MAX_BUFFERS`]).
    pub buffers: u32,
}

impl ScheduleCheck {
    /// Most buffers per tile.
    pub const MAX_BUFFERS: u32 = 16;

    /// Six orders (the four named ones and two random), seed 0, four buffers per tile (the
    /// timing model's default rotation, `timing::Scheduling::DEFAULT_ROTATION`).
    pub const DEFAULT: ScheduleCheck = ScheduleCheck {
        orders: 6,
        seed: 0,
        buffers: 4,
    };

    /// The same check trying `orders` orders besides program order.
    pub const fn with_orders(mut self, orders: u32) -> Self {
        self.orders = orders;
        self
    }

    /// The same check with random orders drawn from `seed`.
    pub const fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The same check rotating each tile over `buffers` buffers (clamped to 1 to
    /// [`ScheduleCheck::MAX_BUFFERS`]).
    pub const fn with_buffers(mut self, buffers: u32) -> Self {
        self.buffers = if buffers < 1 {
            1
        } else if buffers > Self::MAX_BUFFERS {
            Self::MAX_BUFFERS
        } else {
            buffers
        };
        self
    }

    /// The policy of the `k`-th order tried.
    pub(crate) fn policy(&self, k: u32) -> Policy {
        match k {
            0 => Policy::Reverse,
            1 => Policy::Lockstep,
            2 => Policy::LockstepReversed,
            3 => Policy::LazySharedWrites,
            _ => Policy::Random(self.seed.wrapping_add(u64::from(k - 4))),
        }
    }
}

impl Default for ScheduleCheck {
    /// [`ScheduleCheck::DEFAULT`].
    fn default() -> Self {
        ScheduleCheck::DEFAULT
    }
}

/// One executed instruction, as a [`ScheduleError`] names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    /// Index of the instruction in the program.
    pub instr: usize,
    /// Its mnemonic.
    pub mnemonic: &'static str,
    /// The kernel source line it came from (0 when unknown).
    pub line: u32,
    /// The SPMD instance's program ids.
    pub program_ids: [i64; MAX_PIDS],
    /// The values of its enclosing loops, outermost first.
    pub loop_values: Vec<i64>,
}

impl fmt::Display for Executed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "instruction {} ({}, line {}) at program ids {:?}, loop values by depth {:?}",
            self.instr, self.mnemonic, self.line, self.program_ids, self.loop_values
        )
    }
}

/// How a [`ScheduleError`]'s difference was found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reordering {
    /// The two instructions ran the other way round, in the order of [`ScheduleCheck`] named
    /// `order` (the baseline: program order).
    Exchanged {
        /// The order's name.
        order: String,
    },
    /// The tile's instances rotated over `buffers` buffers instead of sharing one (both in
    /// program order): the second instruction read what the first left in the buffer the two
    /// instances share as allocated.
    Rotated {
        /// The buffers per tile.
        buffers: u32,
    },
}

impl Reordering {
    /// The end of a [`ScheduleError`]'s message: where the baseline's value comes from, the
    /// value `found` in the other run and how that run differs, and what to do.
    fn sentence(&self, found: &str) -> String {
        match self {
            Reordering::Exchanged { order } => format!(
                "in program order (first before second), and {found} with the second before the first (order `{order}`): order them through a dependency (a `sequential_range` loop, a tile declared inside the loop, `+=` into a tile read after the loop), or do not write what the other touches"
            ),
            Reordering::Rotated { buffers } => format!(
                "in program order with one buffer per tile, and {found} with each tile's instances (one per iteration of the loop that declares it) rotating over {buffers} buffers, as the device's may: the second reads what the first left in another iteration's tile; write what it reads in its own iteration, or declare the tile outside the loop"
            ),
        }
    }
}

/// A launch whose outputs depend on how the device schedules two instructions: their order,
/// or the rotation of a loop tile's buffers ([`ScheduleCheck`]).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error(
    "kernel `{kernel}`: the result depends on how the device schedules two instructions: {first} and {second}; element {element} of output `{output}` is {expected} {}",
    how.sentence(found)
)]
pub struct ScheduleError {
    /// The kernel's name.
    pub kernel: String,
    /// The instruction that runs first in program order.
    pub first: Executed,
    /// The instruction that runs second in program order.
    pub second: Executed,
    /// The output that differs.
    pub output: String,
    /// The first element that differs (row-major).
    pub element: usize,
    /// Its value in the baseline (as a number for floating-point outputs, else its bytes).
    pub expected: String,
    /// Its value in the run that differs.
    pub found: String,
    /// What differs between the two runs.
    pub how: Reordering,
}
