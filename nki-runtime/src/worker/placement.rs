//! Where the worker runs: off its poster's CPU when the scheduler put it there and another
//! CPU is free.
//!
//! The scheduler of a virtual machine may wake the worker on the CPU of the thread that posted
//! its job although the host's other vCPU is idle: a halted vCPU reads as preempted, and the
//! wake-up then prefers the waker's CPU. A worker that parks there (it must not take turns with
//! its poster) is woken there again at the next post, and the caller runs every half itself:
//! on an AMD EPYC Zen 5 guest the seed kernel on two threads ran as slowly as on one in about a
//! third of the processes (`docs/performance.md`). The worker therefore first leaves that CPU
//! through its affinity mask; the mask it had is given back at once, and the scheduler leaves
//! a thread where it runs while its mask allows it.
//!
//! When another process keeps the other CPU busy, a worker that moves there takes turns with
//! that process, and a half it claimed waits for its next turn (streamed instructions on two
//! threads then took 1.4–1.7× as long as on one). The worker tells that case by its own run
//! delay, the time it was runnable and waited (Linux's `/proc/thread-self/schedstat`; a
//! hypervisor's steal does not count there): for [`WATCH`] after a move, while it stays awake
//! on the CPU it moved to, it reviews the delay every [`REVIEW_EVERY`]; a delay over a quarter
//! of the time it ran makes it stay where the scheduler puts it for [`STAY`], parking on its
//! poster's CPU as before. Where it cannot move (a mask of one CPU, an OS without affinity
//! masks) it parks there too.

use std::time::{Duration, Instant};

/// How often a worker that moved reviews its run delay.
pub(super) const REVIEW_EVERY: Duration = Duration::from_millis(1);

/// How long after a move the worker reviews its run delay.
const WATCH: Duration = Duration::from_millis(50);

/// How long a worker that found the CPU it moved to shared stays where the scheduler puts it.
const STAY: Duration = Duration::from_secs(1);

/// Run delay below which a review finds nothing, whatever the time run (a kernel thread's
/// moment on the CPU).
const DELAY_FLOOR_NS: u64 = 100_000;

/// The worker's moves and what it learnt of them.
#[derive(Default)]
pub(super) struct Placement {
    /// While the worker watches a move: when it moved, the CPU it moved to, and its time run
    /// and run delay at the move or at the last review.
    watched: Option<Watch>,
    /// Until when the worker does not move: the CPU it moved to was shared.
    stay_until: Option<Instant>,
}

#[derive(Copy, Clone)]
struct Watch {
    moved_at: Instant,
    cpu: u32,
    last: Schedstat,
    reviewed_at: Instant,
}

/// A thread's time run and time waited to run, in nanoseconds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Schedstat {
    ran: u64,
    waited: u64,
}

impl Placement {
    /// Moves the worker off its poster's CPU (the one it runs on) unless a move found the other
    /// CPU shared in the last [`STAY`]; whether it runs elsewhere now.
    pub(super) fn leave(&mut self) -> bool {
        let now = Instant::now();
        if self.stay_until.is_some_and(|t| now < t) || !move_off_current_cpu() {
            return false;
        }
        self.stay_until = None;
        // Without a run delay to watch (an OS that keeps none), moving is still right.
        self.watched = schedstat().map(|last| Watch {
            moved_at: now,
            cpu: super::current_cpu(),
            last,
            reviewed_at: now,
        });
        true
    }

    /// Reviews the run delay once [`REVIEW_EVERY`] has passed since the last review, while the
    /// worker watches a move and still runs on the CPU it moved to (module documentation).
    pub(super) fn review(&mut self) {
        let Some(w) = self.watched.as_mut() else {
            return;
        };
        if w.reviewed_at.elapsed() < REVIEW_EVERY {
            return;
        }
        self.review_reading(schedstat(), super::current_cpu());
    }

    /// [`Placement::review`] of a reading of the run delay taken on `cpu`.
    fn review_reading(&mut self, now: Option<Schedstat>, cpu: u32) {
        let Some(w) = self.watched.as_mut() else {
            return;
        };
        match now {
            Some(now) if cpu == w.cpu => {
                if shared(w.last, now) {
                    self.stay_until = Some(Instant::now() + STAY);
                    self.watched = None;
                } else if w.moved_at.elapsed() >= WATCH {
                    self.watched = None;
                } else {
                    w.last = now;
                    w.reviewed_at = Instant::now();
                }
            }
            _ => self.watched = None,
        }
    }

    /// The worker parks: the time it will wait to be woken is no neighbour's, so watching ends.
    pub(super) fn parked(&mut self) {
        self.watched = None;
    }
}

/// Whether the run delay between two readings says another thread had the CPU: the thread
/// waited more than a quarter of the time it ran, and more than [`DELAY_FLOOR_NS`].
fn shared(before: Schedstat, after: Schedstat) -> bool {
    let waited = after.waited.saturating_sub(before.waited);
    let ran = after.ran.saturating_sub(before.ran);
    waited > DELAY_FLOOR_NS && waited > ran / 4
}

/// The calling thread's time run and run delay, from Linux's `/proc/thread-self/schedstat`
/// (`ran waited timeslices`); read into a buffer on the stack, so nothing is allocated. `None`
/// where the OS does not keep them.
fn schedstat() -> Option<Schedstat> {
    #[cfg(target_os = "linux")]
    {
        use std::io::Read;
        let mut buf = [0u8; 96];
        let mut file = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
        let n = file.read(&mut buf).ok()?;
        parse_schedstat(buf.get(..n)?)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The first two fields of a `schedstat` line.
fn parse_schedstat(text: &[u8]) -> Option<Schedstat> {
    let mut fields = std::str::from_utf8(text).ok()?.split_ascii_whitespace();
    let ran = fields.next()?.parse().ok()?;
    let waited = fields.next()?.parse().ok()?;
    Some(Schedstat { ran, waited })
}

/// Moves the calling thread to another CPU of its affinity mask, then gives it back the mask
/// it had; whether it runs elsewhere now. `false` when the mask holds no other CPU, the OS
/// refuses, or (outside Linux) always.
fn move_off_current_cpu() -> bool {
    #[cfg(target_os = "linux")]
    {
        let Ok(here) = usize::try_from(super::current_cpu()) else {
            return false;
        };
        if here >= libc::CPU_SETSIZE as usize {
            return false;
        }
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: a zeroed `cpu_set_t` is a valid empty set; the calls read or fill sets of
        // `size` bytes on this stack and change only this thread's affinity.
        unsafe {
            let mut mask: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut mask) != 0 {
                return false;
            }
            let mut elsewhere = mask;
            libc::CPU_CLR(here, &mut elsewhere);
            if libc::CPU_COUNT(&elsewhere) == 0 || libc::sched_setaffinity(0, size, &elsewhere) != 0
            {
                return false;
            }
            // The narrowed mask excludes `here`: the thread runs elsewhere now.
            let moved = super::current_cpu() != here as u32;
            // Giving the mask back cannot fail where narrowing it did not.
            libc::sched_setaffinity(0, size, &mask);
            moved
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_are_read_and_bad_ones_refused() {
        let line = parse_schedstat(b"123456 7890 12\n");
        assert_eq!(
            line,
            Some(Schedstat {
                ran: 123456,
                waited: 7890
            })
        );
        assert_eq!(parse_schedstat(b"123456\n"), None);
        assert_eq!(parse_schedstat(b"x 1 2\n"), None);
        assert_eq!(parse_schedstat(b""), None);
    }

    #[test]
    fn a_delay_counts_when_it_is_a_quarter_of_the_time_run() {
        let at = |ran, waited| Schedstat { ran, waited };
        // Half the time waiting behind a spinning neighbour.
        assert!(shared(at(0, 0), at(2_000_000, 1_000_000)));
        // A kernel thread's moment.
        assert!(!shared(at(0, 0), at(2_000_000, 50_000)));
        // Over the floor but a small part of a long run.
        assert!(!shared(at(0, 0), at(10_000_000, 200_000)));
        // Counters that went backwards find nothing.
        assert!(!shared(at(5, 5), at(0, 0)));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_move_to_a_shared_cpu_is_not_tried_again_for_a_while() {
        std::thread::spawn(|| {
            // SAFETY: reads a valid set.
            if unsafe { libc::CPU_COUNT(&mask()) } < 2 {
                return;
            }
            let mut p = Placement::default();
            assert!(p.leave(), "a thread allowed on two CPUs did not move");
            let Some(w) = p.watched else { return };
            // Moved away from the CPU it moved to: nothing learnt.
            p.review_reading(
                Some(Schedstat {
                    ran: w.last.ran + 2_000_000,
                    waited: w.last.waited + 2_000_000,
                }),
                w.cpu + 1,
            );
            assert!(p.watched.is_none() && p.stay_until.is_none());
            assert!(p.leave());
            let Some(w) = p.watched else { return };
            // A few kernel threads' moments: still watching.
            p.review_reading(
                Some(Schedstat {
                    ran: w.last.ran + 2_000_000,
                    waited: w.last.waited + 20_000,
                }),
                w.cpu,
            );
            assert!(p.watched.is_some() && p.stay_until.is_none());
            // Half the time waiting: shared, so no move for a while.
            let w = p.watched.unwrap();
            p.review_reading(
                Some(Schedstat {
                    ran: w.last.ran + 2_000_000,
                    waited: w.last.waited + 1_000_000,
                }),
                w.cpu,
            );
            assert!(p.watched.is_none() && p.stay_until.is_some());
            assert!(!p.leave(), "moved again within the stay");
        })
        .join()
        .unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_threads_own_run_delay_is_read() {
        // Kernels built without scheduler statistics have no such file.
        if std::path::Path::new("/proc/thread-self/schedstat").exists() {
            // The time run is brought up to date at scheduler ticks and switches.
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
            std::thread::yield_now();
            assert!(schedstat().expect("a schedstat line").ran > 0);
        }
    }

    #[cfg(target_os = "linux")]
    fn mask() -> libc::cpu_set_t {
        // SAFETY: a zeroed set is valid; the call fills it.
        unsafe {
            let mut m: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            assert_eq!(libc::sched_getaffinity(0, size, &mut m), 0);
            m
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_moves_off_its_cpu_and_keeps_its_mask() {
        std::thread::spawn(|| {
            let before = mask();
            // SAFETY: reads a valid set.
            let cpus = unsafe { libc::CPU_COUNT(&before) };
            let here = super::super::current_cpu();
            let moved = move_off_current_cpu();
            // SAFETY: compares two valid sets.
            assert!(
                unsafe { libc::CPU_EQUAL(&before, &mask()) },
                "the mask changed"
            );
            assert_eq!(
                moved,
                cpus >= 2,
                "a thread allowed on {cpus} CPUs, on CPU {here}: moved {moved}"
            );
        })
        .join()
        .unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_pinned_to_one_cpu_stays() {
        std::thread::spawn(|| {
            let here = usize::try_from(super::super::current_cpu()).unwrap();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: a zeroed set is valid; the call pins only this test's thread.
            unsafe {
                let mut one: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(here, &mut one);
                assert_eq!(libc::sched_setaffinity(0, size, &one), 0);
            }
            assert!(!move_off_current_cpu());
            assert_eq!(super::super::current_cpu() as usize, here);
        })
        .join()
        .unwrap();
    }
}
