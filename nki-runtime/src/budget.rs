//! Bounds on a launch's work: an instruction budget, a wall-time budget and a handle another
//! thread can use to stop a launch in progress.
//!
//! Kernels can be long (a loop of 2⁶² trips, 2³² SPMD instances), and nothing in a program's
//! size bounds its work. A core's [`Budget`] ([`crate::NeuronCore::set_budget`]) and its
//! [`StopHandle`] ([`crate::NeuronCore::stop_handle`]) let a caller bound or stop any launch,
//! plain, strict, observed or timing-only: the launch ends with [`crate::LaunchError::Stopped`]
//! and the core stays usable (what the stopped launch left in SBUF, PSUM and its outputs is
//! unspecified, as after any failed launch).
//!
//! The interpreter charges its executed instructions at every loop back-edge and at the end of
//! each instance, so a launch stops within one loop iteration's instructions (or one
//! instance's, for a body without loops) of its budget. A timing-only run that skips the
//! iterations of a loop in a steady state (the timing model's fast-forward) charges the
//! skipped iterations' instructions when it skips them: it stops within one skip. A launch with no budget and no stop
//! request pays one untaken branch per back-edge.

use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

/// How much work a launch may do before it stops with [`crate::LaunchError::Stopped`]:
/// unlimited by default.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Executed instructions (loop control not counted), over all instances and threads.
    pub instructions: Option<u64>,
    /// Wall time from the start of the launch.
    pub wall_time: Option<Duration>,
}

impl Budget {
    /// No limit.
    pub const UNLIMITED: Budget = Budget {
        instructions: None,
        wall_time: None,
    };

    /// At most `n` executed instructions.
    pub const fn instructions(n: u64) -> Budget {
        Budget {
            instructions: Some(n),
            wall_time: None,
        }
    }

    /// At most `d` of wall time.
    pub const fn wall_time(d: Duration) -> Budget {
        Budget {
            instructions: None,
            wall_time: Some(d),
        }
    }

    /// This budget with a wall-time limit as well.
    pub const fn and_wall_time(self, d: Duration) -> Budget {
        Budget {
            wall_time: Some(d),
            ..self
        }
    }
}

/// Stops the launches of one core from another thread ([`crate::NeuronCore::stop_handle`]).
///
/// [`StopHandle::stop`] makes the launch in progress end with [`Stopped::Cancelled`] at its
/// next check; if no launch is in progress, the core's next launch stops at its first check.
/// The request is consumed by the launch it stops.
#[derive(Clone, Debug, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Requests that the core's launch in progress (or its next one) stop.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was requested and not yet consumed by a launch.
    pub fn is_stop_requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Why a launch stopped before its end.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Stopped {
    /// It executed more instructions than its budget allows.
    #[error(
        "kernel `{kernel}` stopped: it executed {executed} instructions, over its budget of {limit}"
    )]
    Instructions {
        /// The kernel's name.
        kernel: String,
        /// The budget.
        limit: u64,
        /// Instructions executed when it stopped.
        executed: u64,
    },
    /// It ran longer than its wall-time budget.
    #[error("kernel `{kernel}` stopped: it ran longer than its wall-time budget of {limit:?}")]
    WallTime {
        /// The kernel's name.
        kernel: String,
        /// The budget.
        limit: Duration,
    },
    /// Its core's [`StopHandle::stop`] was called.
    #[error("kernel `{kernel}` stopped: its core's stop handle was used")]
    Cancelled {
        /// The kernel's name.
        kernel: String,
    },
}

/// Why a [`Meter`] stopped: not yet, or the reason's code.
const RUNNING: u8 = 0;
const OVER_INSTRUCTIONS: u8 = 1;
const OVER_TIME: u8 = 2;
const CANCELLED: u8 = 3;

/// One launch's account of its work against the core's [`Budget`] and [`StopHandle`], shared
/// by the threads the launch runs on.
#[derive(Debug)]
pub(crate) struct Meter {
    /// Whether anything is checked at all.
    active: bool,
    budget: Budget,
    /// When the launch started (with a wall-time budget).
    started: Option<Instant>,
    executed: AtomicU64,
    stop: Option<Arc<AtomicBool>>,
    reason: AtomicU8,
}

/// The meter of launches that nothing bounds or stops (a [`crate::Bound`] before a core runs
/// it).
pub(crate) static UNBOUNDED: Meter = Meter {
    active: false,
    budget: Budget::UNLIMITED,
    started: None,
    executed: AtomicU64::new(0),
    stop: None,
    reason: AtomicU8::new(RUNNING),
};

impl Meter {
    /// The meter of a launch starting now under `budget`, stopped by `stop` if there is one.
    pub(crate) fn new(budget: Budget, stop: Option<&StopHandle>) -> Meter {
        Meter {
            active: budget != Budget::UNLIMITED || stop.is_some(),
            budget,
            started: budget.wall_time.map(|_| Instant::now()),
            executed: AtomicU64::new(0),
            stop: stop.map(|s| Arc::clone(&s.0)),
            reason: AtomicU8::new(RUNNING),
        }
    }

    /// Whether the launch runs without an instruction budget, a wall-time limit or a stop
    /// handle: whether [`Meter::charge`] never stops it, so that a step of many instructions
    /// may run whole.
    pub(crate) fn runs_unchecked(&self) -> bool {
        !self.active
    }

    /// Adds `n` executed instructions; `false` when the launch must stop (over a budget, a
    /// stop requested, or another thread of the launch stopped).
    #[inline]
    pub(crate) fn charge(&self, n: u64) -> bool {
        !self.active || self.check(n)
    }

    fn check(&self, n: u64) -> bool {
        let reason = if self.reason.load(Ordering::Relaxed) != RUNNING {
            return false;
        } else if self
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            CANCELLED
        } else if let Some(limit) = self.budget.instructions
            && self
                .executed
                .fetch_add(n, Ordering::Relaxed)
                .saturating_add(n)
                > limit
        {
            OVER_INSTRUCTIONS
        } else if let (Some(limit), Some(t0)) = (self.budget.wall_time, self.started)
            && t0.elapsed() > limit
        {
            OVER_TIME
        } else {
            return true;
        };
        self.reason.store(reason, Ordering::Relaxed);
        false
    }

    /// Why the launch stopped, if it did; consumes the stop request that stopped it.
    pub(crate) fn stopped(&self, kernel: &str) -> Option<Stopped> {
        let reason = self.reason.load(Ordering::Relaxed);
        if reason == RUNNING {
            return None;
        }
        let kernel = kernel.to_string();
        match reason {
            OVER_INSTRUCTIONS => Some(Stopped::Instructions {
                kernel,
                limit: self.budget.instructions.unwrap_or(0),
                executed: self.executed.load(Ordering::Relaxed),
            }),
            OVER_TIME => Some(Stopped::WallTime {
                kernel,
                limit: self.budget.wall_time.unwrap_or_default(),
            }),
            CANCELLED => {
                if let Some(s) = &self.stop {
                    s.store(false, Ordering::Relaxed);
                }
                Some(Stopped::Cancelled { kernel })
            }
            _ => None,
        }
    }
}
