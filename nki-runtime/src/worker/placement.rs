//! Where the worker runs: off its poster's CPU when the scheduler put it there although
//! another CPU was idle.
//!
//! The scheduler of a virtual machine may wake the worker on the CPU of the thread that posted
//! its job although the host's other vCPU is idle: a halted vCPU reads as preempted, and the
//! wake-up then prefers the waker's CPU. A worker that parks there (it must not take turns with
//! its poster) is woken there again at the next post, and the caller runs every half itself:
//! on an AMD EPYC Zen 5 guest the seed kernel on two threads ran as slowly as on one in about
//! half of the processes (`docs/performance.md`).
//!
//! So before it parks there, the worker looks at how much of the time since its last look
//! each other CPU was idle (Linux's `/proc/stat`, counted in ticks of 10 ms; looks at most
//! [`STALE`] apart, at least [`HISTORY`] apart so that a tick or two can tell). It moves,
//! through its affinity mask, to the CPUs that were idle at least a quarter of that time;
//! the mask it had is given back at once, and the scheduler leaves a thread where it runs
//! while its mask allows it. A CPU that another process keeps busy was never idle: the worker
//! does not move there, where it would take turns with that process and a half it claimed
//! would wait for its next turn, and parks as before.

use std::time::{Duration, Instant};

/// The shortest time between two looks at the CPUs' idle time that can decide a move.
const HISTORY: Duration = Duration::from_millis(20);

/// The longest: an older look says little of what the CPUs do now.
const STALE: Duration = Duration::from_secs(1);

/// The CPUs whose idle time is followed: those below this number.
const CPUS: usize = 64;

/// Nanoseconds per tick of `/proc/stat` (Linux's `USER_HZ`, 100 on every architecture it
/// reports to user space).
const TICK_NS: u128 = 10_000_000;

/// The worker's last look at the CPUs' idle time.
pub(super) struct Placement {
    last: Option<(Instant, IdleTicks)>,
}

/// Each CPU's idle time (idle and waiting for I/O) in ticks, for the CPUs `/proc/stat` listed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct IdleTicks {
    ticks: [u64; CPUS],
    /// Bit `i`: CPU `i` was listed.
    listed: u64,
}

impl Placement {
    /// Takes a first look.
    pub(super) fn new() -> Placement {
        Placement {
            last: idle_ticks().map(|t| (Instant::now(), t)),
        }
    }

    /// Moves the worker off the CPU it runs on (its poster's) to the CPUs that were idle at
    /// least a quarter of the time since the last look, if that look is between [`HISTORY`]
    /// and [`STALE`] old; whether it runs elsewhere now. Looks again unless the last look is
    /// too recent to decide.
    pub(super) fn leave(&mut self) -> bool {
        let now = Instant::now();
        if self.last.is_some_and(|(at, _)| now - at < HISTORY) {
            return false;
        }
        let Some(ticks) = idle_ticks() else {
            self.last = None;
            return false;
        };
        let last = self.last.replace((now, ticks));
        let Some((at, before)) = last.filter(|(at, _)| now - *at <= STALE) else {
            return false;
        };
        let idle = idle_cpus(&before, &ticks, now - at);
        idle != 0 && move_to(idle)
    }
}

/// The CPUs idle at least a quarter of `elapsed` between two looks (at least one tick).
fn idle_cpus(before: &IdleTicks, after: &IdleTicks, elapsed: Duration) -> u64 {
    let mut idle = 0u64;
    for cpu in 0..CPUS {
        let bit = 1u64 << cpu;
        if before.listed & after.listed & bit == 0 {
            continue;
        }
        let ticks = after.ticks[cpu].saturating_sub(before.ticks[cpu]);
        let idle_ns = u128::from(ticks) * TICK_NS;
        if ticks > 0 && idle_ns * 4 >= elapsed.as_nanos() {
            idle |= bit;
        }
    }
    idle
}

/// The calling thread's id (Linux's `gettid`); 0 elsewhere.
pub(super) fn thread_id() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid` has no preconditions.
        unsafe { libc::gettid() }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The time thread `tid` of this process has spent runnable but waiting for a CPU, in
/// nanoseconds (the second field of Linux's `/proc/self/task/<tid>/schedstat`), read into
/// buffers on the stack; `None` elsewhere or when it cannot be read.
pub(super) fn runqueue_wait(tid: i32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use std::io::{Read, Write};
        if tid <= 0 {
            return None;
        }
        let mut path = [0u8; 64];
        let len = {
            let mut w = &mut path[..];
            write!(w, "/proc/self/task/{tid}/schedstat").ok()?;
            64 - w.len()
        };
        let path = std::str::from_utf8(&path[..len]).ok()?;
        let mut buf = [0u8; 128];
        let n = std::fs::File::open(path).ok()?.read(&mut buf).ok()?;
        parse_schedstat(&buf[..n])
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        None
    }
}

/// The second of `schedstat`'s three numbers (`run_ns wait_ns timeslices`).
fn parse_schedstat(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    let mut fields = text.split_ascii_whitespace();
    fields.next()?;
    let wait = fields.next()?.parse().ok()?;
    fields.next()?;
    Some(wait)
}

/// The CPUs' idle time now, from Linux's `/proc/stat`, read into a buffer on the stack (nothing
/// is allocated); `None` elsewhere or when it cannot be read.
fn idle_ticks() -> Option<IdleTicks> {
    #[cfg(target_os = "linux")]
    {
        use std::io::Read;
        let mut buf = [0u8; 8192];
        let mut file = std::fs::File::open("/proc/stat").ok()?;
        let mut n = 0;
        while n < buf.len() {
            match file.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(_) => return None,
            }
        }
        parse_idle_ticks(&buf[..n])
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The `cpuN` lines of `/proc/stat` (`cpuN user nice system idle iowait …`): each CPU's idle
/// plus I/O-wait ticks. Lines cut off at the end of the text are left out.
fn parse_idle_ticks(text: &[u8]) -> Option<IdleTicks> {
    let text = std::str::from_utf8(text).ok()?;
    let mut out = IdleTicks {
        ticks: [0; CPUS],
        listed: 0,
    };
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    for line in complete.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let Some(Ok(cpu)) = fields.next().map(str::parse::<usize>) else {
            continue; // the `cpu` line of all CPUs together
        };
        let mut nth = |n| fields.nth(n).and_then(|f| f.parse::<u64>().ok());
        // user nice system [idle] [iowait]
        let (Some(idle), Some(iowait)) = (nth(3), nth(0)) else {
            continue;
        };
        if cpu < CPUS {
            out.ticks[cpu] = idle.saturating_add(iowait);
            out.listed |= 1 << cpu;
        }
    }
    Some(out)
}

/// Moves the calling thread to one of the CPUs in `cpus` (a bit per CPU) that its affinity
/// mask allows, then gives it back the mask it had; whether it left the CPU it ran on.
fn move_to(cpus: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        let Ok(here) = usize::try_from(super::current_cpu()) else {
            return false;
        };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: a zeroed `cpu_set_t` is a valid empty set; the calls read or fill sets of
        // `size` bytes on this stack and change only this thread's affinity.
        unsafe {
            let mut mask: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut mask) != 0 {
                return false;
            }
            let mut there: libc::cpu_set_t = std::mem::zeroed();
            for cpu in 0..CPUS {
                if cpus & (1 << cpu) != 0 && cpu != here && libc::CPU_ISSET(cpu, &mask) {
                    libc::CPU_SET(cpu, &mut there);
                }
            }
            if libc::CPU_COUNT(&there) == 0 || libc::sched_setaffinity(0, size, &there) != 0 {
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
        let _ = cpus;
        false
    }
}

/// A test's look at the CPUs' idle time, to tell afterwards whether the worker had an idle CPU
/// to move to.
#[cfg(test)]
pub(super) struct Looks(Option<(Instant, IdleTicks)>);

#[cfg(test)]
impl Looks {
    /// Looks now.
    pub(super) fn now() -> Looks {
        Looks(idle_ticks().map(|t| (Instant::now(), t)))
    }

    /// Whether a CPU other than `cpu` was idle at least two ticks since the look: taken
    /// 25 ms or so before, that CPU was idle most of the time, and so well over a quarter of
    /// the worker's slightly longer window (its first look came as it started).
    pub(super) fn others_idle(&self, cpu: u32) -> bool {
        let (Some((_, before)), Some(after)) = (self.0, idle_ticks()) else {
            return false;
        };
        (0..CPUS).any(|c| {
            let listed = before.listed & after.listed & (1 << c) != 0;
            listed && c != cpu as usize && after.ticks[c].saturating_sub(before.ticks[c]) >= 2
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"cpu  430899 0 25061 152138 497 0 150 371 0 0\n\
cpu0 199646 0 14726 89646 182 0 23 209 0 0\n\
cpu1 231252 0 10334 62491 314 0 126 161 0 0\n\
intr 1925021 0 0 0\n\
ctxt 1234\n";

    #[test]
    fn each_cpus_idle_ticks_are_read_from_proc_stat() {
        let t = parse_idle_ticks(STAT).unwrap();
        assert_eq!(t.listed, 0b11);
        assert_eq!(t.ticks[0], 89646 + 182);
        assert_eq!(t.ticks[1], 62491 + 314);
        // A line cut off by the end of the buffer is left out.
        let cut = &STAT[..STAT.len() - 40];
        let t = parse_idle_ticks(cut).unwrap();
        assert_eq!(t.listed, 0b01);
        assert_eq!(parse_idle_ticks(b"cpu0 1 2\n").unwrap().listed, 0);
    }

    #[test]
    fn a_cpu_idle_a_quarter_of_the_time_counts_as_idle() {
        let at = |t0: u64, t1: u64| {
            let mut ticks = [0; CPUS];
            ticks[0] = t0;
            ticks[1] = t1;
            IdleTicks {
                ticks,
                listed: 0b11,
            }
        };
        let before = at(100, 200);
        // Over 40 ms: CPU 0 busy throughout (another process), CPU 1 idle 30 ms.
        assert_eq!(
            idle_cpus(&before, &at(100, 203), Duration::from_millis(40)),
            0b10
        );
        // One tick (10 ms) is a quarter of 40 ms, and less than a quarter of 41.
        let one_tick = at(101, 201);
        assert_eq!(
            idle_cpus(&before, &one_tick, Duration::from_millis(40)),
            0b11
        );
        assert_eq!(idle_cpus(&before, &one_tick, Duration::from_millis(41)), 0);
        // A CPU listed only once is never idle.
        let mut only0 = at(100, 200);
        only0.listed = 0b01;
        assert_eq!(
            idle_cpus(&only0, &at(100, 210), Duration::from_millis(40)),
            0
        );
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
    fn a_thread_moves_to_the_cpus_it_is_given_and_keeps_its_mask() {
        std::thread::spawn(|| {
            let before = mask();
            let here = super::super::current_cpu() as usize;
            let others = (0..CPUS)
                // SAFETY: reads a valid set.
                .filter(|&c| c != here && unsafe { libc::CPU_ISSET(c, &before) })
                .fold(0u64, |m, c| m | 1 << c);
            assert_eq!(
                move_to(others),
                others != 0,
                "on CPU {here}, others {others:b}"
            );
            // SAFETY: compares two valid sets.
            assert!(
                unsafe { libc::CPU_EQUAL(&before, &mask()) },
                "the mask changed"
            );
            // Only the CPU it runs on: it stays.
            let now = super::super::current_cpu();
            assert!(!move_to(1 << now));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_threads_wait_for_its_cpu_is_read_from_schedstat() {
        assert_eq!(super::parse_schedstat(b"5214 1042 7\n"), Some(1042));
        assert_eq!(super::parse_schedstat(b"5214 1042"), None);
        assert_eq!(super::parse_schedstat(b""), None);
        #[cfg(target_os = "linux")]
        assert!(super::runqueue_wait(super::thread_id()).is_some());
    }

    #[test]
    fn a_look_too_recent_decides_nothing() {
        let mut p = Placement::new();
        if p.last.is_some() {
            assert!(!p.leave(), "moved on a look just taken");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_cpus_idle_time_is_read() {
        let t = idle_ticks().expect("/proc/stat");
        // SAFETY: reads a valid set.
        let allowed = unsafe { libc::CPU_COUNT(&mask()) } as u32;
        assert!(t.listed.count_ones() >= allowed.min(CPUS as u32));
    }
}
