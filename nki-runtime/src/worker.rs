//! The host thread that runs half of each large instruction.
//!
//! A NeuronCore's engines work on many partitions at once; the model splits its large
//! instructions (a matmul's output rows, a transfer's partitions) between the calling thread
//! and one persistent worker thread, so that a kernel uses both cores of a 2-core host. Each
//! half computes exactly what the serial code computes for those rows, so results do not
//! depend on the split.
//!
//! The worker spins after each job (so that the next instruction of the same launch finds it
//! awake: waking a parked thread costs tens of microseconds) and then parks; how long adapts
//! between [`SPIN_BEFORE_PARK`] and [`MAX_SPIN`] to how soon jobs came after its last parks.
//! Handing over a job allocates nothing: the job lives on the caller's stack, and the caller
//! does not return, not even by unwinding, before the worker has finished with it.
//!
//! Whether splitting one instruction pays depends on how far the worker's core is from the
//! caller's: the two halves of an instruction share its operands and its destination, which
//! then move between the cores' caches. On the project's 2-vCPU virtual machines the distance
//! changes with the hypervisor's placement, within one process: a cache line's round trip
//! between the two threads was measured at 44 ns in some minutes and 390–430 ns in others, and
//! in the far placement the seed kernel took 74 µs on two threads against 48 µs on one (30 µs
//! on two when near). [`Worker::near`] measures the round trip every [`PROBE_EVERY`] (a few
//! microseconds of ping-pong; a parked worker is woken first and measured once it spins) and
//! the engines split single instructions while it is at most [`NEAR`]. When it is farther
//! ([`Reach::Far`]), only instructions whose rows split apart (streamed instructions,
//! reductions, top-8 searches, transfers) of at least [`FAR_MIN_ELEMS`] elements are split
//! (the pieces of a blocked run that folds instructions into their readers from a quarter of
//! that: [`Worker::far_min_elems`]); matmuls, whose halves share their operands, are not,
//! unless they read them from input tensors, which nothing writes while a kernel runs (each
//! thread then packs its own copy). In the far placement of a Zen 5 guest the NKI Library
//! top-k took 0.63–0.69 ms split against 1.33–1.41 ms on one thread, its cumsum 10.4–12.9
//! against 16.2–16.5 ms, and its router, whose matmul chains read the inputs
//! (`host::input_tiles`) and split, 1.13–1.23 against 1.25–1.37 ms. Such rows are split by blocks of partitions
//! (`engines::split::BlockRuns`), so that each partition stays with one thread from instruction
//! to instruction. A worker that shares its CPU with a busy neighbour answers the probe as
//! quickly as a far one; the time it waited for its CPU since the last probe (Linux's
//! scheduling statistics) tells it apart, and it counts as away. Work split in larger halves with memories of their own (SPMD instances, loop
//! iterations) is split either way.
//!
//! The worker must claim a posted job before running it. When the caller has finished its own
//! half and the worker has not claimed the other (it is parked, or the host's other core is
//! busy), the caller takes the job back and runs it itself: it never waits for a thread that
//! has not started. [`Worker::join_or_leave`] tells the splits when that happened (the worker
//! had not started the job when the caller's half was done), and they run the other half as
//! the caller's own work: a loop's or a grid's second half on
//! the caller's engines right after the first (`host::loops`, `host::spmd`), the other rows of a
//! streamed instruction, reduction or top-8 search with the caller's lanes
//! (`engines::split::for_rows`; as input matmuls already did with the caller's packings). Run on the worker's engines instead,
//! the taken-back half of the LayerNorm tutorial's loop made two threads 15–26 % slower than
//! one with a busy neighbour.
//!
//! A worker that finds itself on the CPU its poster ran on when it posted (Linux's
//! `sched_getcpu`) does not claim the job there: it would only take turns with the poster. It
//! moves to another CPU that was mostly idle of late (`placement`: a virtual machine's
//! scheduler wakes it beside its waker when the other vCPU is halted); when another process
//! keeps the other CPUs busy it parks, and the poster leaves it parked (and [`Worker::near`]
//! answers far) until [`PROBE_EVERY`] has passed. On a 2-vCPU host with a
//! spinning neighbour this keeps two threads within a few per cent of one, where a worker
//! spinning for jobs beside the caller made top-k 40 % and cumsum 33 % slower than one thread
//! (`docs/performance.md`, "A busy neighbour: the worker leaves the caller's CPU").

mod placement;

use std::cell::UnsafeCell;
use std::hint::spin_loop;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// No job.
const IDLE: u32 = 0;
/// A job is posted and not yet claimed.
const POSTED: u32 = 1;
/// The worker claimed the job and is running it.
const RUNNING: u32 = 2;
/// The worker finished the job.
const DONE: u32 = 3;
/// The worker thread must exit.
const EXIT: u32 = 4;

/// How long the worker spins for the next job before it parks, at first and at least: short,
/// so that idle workers (one per core, and a process may hold several cores) leave the host's
/// CPUs to others soon.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(50);

/// The longest the worker spins: each time a job arrives less than this after the worker
/// parked, its spin doubles up to this; each time it arrives later, it halves down to
/// [`SPIN_BEFORE_PARK`]. A launch whose stretches on the calling thread alone outlast the
/// short spin (the NKI Library decode attention's hundreds of small matmuls between its large
/// loads: parking after 50 µs made its launch 10–18 % slower, `docs/performance.md`) keeps its
/// worker awake after a few parks; one that leaves the worker idle for long keeps the short
/// spin. A worker that finds itself on its last poster's CPU parks at once instead.
const MAX_SPIN: Duration = Duration::from_millis(1);

/// The worker's spin after the wait `waited` from its last park to the job that woke it:
/// doubled (up to [`MAX_SPIN`]) when the park was premature, halved (down to
/// [`SPIN_BEFORE_PARK`]) otherwise.
fn next_spin(spin: Duration, waited: Duration) -> Duration {
    if waited < MAX_SPIN {
        spin.saturating_mul(2).min(MAX_SPIN)
    } else {
        (spin / 2).max(SPIN_BEFORE_PARK)
    }
}

/// How often [`Worker::near`] measures the round trip again.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(20);

/// The largest round trip of a cache line between the two threads at which single
/// instructions are split (module documentation): between the two placements measured on the
/// project's machines, 43–191 ns near and 390–510 ns far. (At 150 ns, the Xeon model 167 guests'
/// near placement, 104–191 ns, read as far in some probes, and each such probe left 20 ms of a
/// launch on one thread: the NKI Library top-k's P99 went from about 1.1 to 2.3–2.9 ms.)
pub(crate) const NEAR: Duration = Duration::from_nanos(250);

/// Round trips per measurement.
const PROBE_ROUNDS: u32 = 32;

/// How long a measurement waits for the worker (to start, or to answer) before it counts the
/// worker as far.
const PROBE_PATIENCE: Duration = Duration::from_micros(500);

/// How long [`Worker::round_trip`] waits for a parked worker to wake before it measures.
const WAKE_PATIENCE: Duration = Duration::from_millis(10);

/// The probe's flag when the caller gave up.
const GAVE_UP: u32 = u32::MAX;

/// A type-erased pointer to a [`StackJob`] and the function that runs it.
#[derive(Copy, Clone)]
struct JobRef {
    data: *const (),
    run: unsafe fn(*const ()),
}

struct Shared {
    state: AtomicU32,
    parked: AtomicBool,
    /// Set by the worker thread once it runs: the standard library's start of a thread
    /// (which allocates, e.g. its name for the stack-overflow handler) is over.
    started: AtomicBool,
    /// The CPU the poster of the current job ran on when it posted it ([`NO_CPU`] where the OS
    /// does not say): a worker that finds itself on that CPU leaves the job to the poster.
    poster_cpu: AtomicU32,
    /// Set by the worker when it parked instead of running a job on its poster's CPU; cleared
    /// by the poster when it wakes the worker again.
    refused: AtomicBool,
    /// The worker thread's id (Linux's `gettid`; 0 elsewhere), for reading its scheduling
    /// statistics ([`placement::runqueue_wait`]).
    tid: AtomicI32,
    job: UnsafeCell<Option<JobRef>>,
}

/// [`Shared::poster_cpu`] when the CPU is not known.
const NO_CPU: u32 = u32::MAX;

/// The CPU the calling thread runs on now, where the OS says (Linux's `sched_getcpu`).
fn current_cpu() -> u32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sched_getcpu` takes no arguments and only reports the calling thread's CPU.
        let cpu = unsafe { libc::sched_getcpu() };
        u32::try_from(cpu).unwrap_or(NO_CPU)
    }
    #[cfg(not(target_os = "linux"))]
    {
        NO_CPU
    }
}

// SAFETY: `job` is set by the owner of the `Worker` (through `&mut Worker`) while the state is
// IDLE; it is taken (read and cleared) only by the worker thread after it has claimed the job
// (POSTED -> RUNNING, Acquire), or cleared by the owner after taking the job back (POSTED ->
// IDLE). The state machine gives each of these accesses exclusive use of the slot.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer in `job` is only dereferenced under that protocol.
unsafe impl Send for Shared {}

/// A closure and its result, on the stack of the thread that posted it.
struct StackJob<F, R> {
    f: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<thread::Result<R>>>,
}

impl<F: FnOnce() -> R, R> StackJob<F, R> {
    /// Runs the job behind `data` and stores its result (or its panic).
    ///
    /// # Safety
    /// `data` must point to a live `StackJob<F, R>` that no other thread touches until the
    /// worker publishes DONE.
    unsafe fn execute(data: *const ()) {
        // SAFETY: guaranteed by the caller (see `Worker::join`).
        let job = unsafe { &*(data as *const StackJob<F, R>) };
        // SAFETY: the posting thread does not touch `f` or `result` until DONE.
        let f = unsafe { (*job.f.get()).take() };
        let result = catch_unwind(AssertUnwindSafe(move || f.map(|f| f())));
        let result = match result {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(Box::new("a worker job ran twice") as Box<dyn std::any::Any + Send>),
            Err(panic) => Err(panic),
        };
        // SAFETY: as above.
        unsafe { *job.result.get() = Some(result) };
    }
}

/// One persistent helper thread.
pub(crate) struct Worker {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
    /// When the round trip was last measured, and where it put the worker.
    probed: Option<(Instant, Reach)>,
    /// Since when the worker is known to have refused a job on this thread's CPU
    /// ([`Shared::refused`]): it is left parked until [`PROBE_EVERY`] has passed.
    refused_since: Option<Instant>,
    /// When the worker's time waiting for its CPU was last read, and that time (ns).
    waited: Option<(Instant, u64)>,
    /// The fewest elements of an instruction whose rows split apart that is split with this
    /// worker when it is far: [`FAR_MIN_ELEMS`], or fewer while the engines run a blocked run
    /// whose rows stay with one thread from piece to piece ([`Worker::far_min_elems`]).
    far_min: usize,
}

impl Worker {
    /// Starts the thread, or returns `None` when the host has a single core or the thread
    /// cannot be created (then everything runs on the calling thread). Returns once the thread
    /// runs.
    pub(crate) fn start() -> Option<Worker> {
        if thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return None;
        }
        let shared = Arc::new(Shared {
            state: AtomicU32::new(IDLE),
            parked: AtomicBool::new(false),
            started: AtomicBool::new(false),
            poster_cpu: AtomicU32::new(NO_CPU),
            refused: AtomicBool::new(false),
            tid: AtomicI32::new(0),
            job: UnsafeCell::new(None),
        });
        let s = Arc::clone(&shared);
        let handle = thread::Builder::new()
            .name("nki-core-worker".into())
            .spawn(move || worker_loop(&s))
            .ok()?;
        // Wait until the thread runs, so that its start-up happens here and not during the
        // first launch (whose allocations would then depend on the scheduler).
        while !shared.started.load(Ordering::Acquire) {
            thread::yield_now();
        }
        Some(Worker {
            shared,
            handle: Some(handle),
            probed: None,
            refused_since: None,
            waited: None,
            far_min: FAR_MIN_ELEMS,
        })
    }

    /// Splits instructions of at least `elems` elements whose rows split apart with the worker
    /// when it is far, until this is called again ([`FAR_MIN_ELEMS`] restores the default).
    /// `host::rows` lowers it for the pieces of a blocked run that folds instructions into
    /// their readers: each partition stays with one thread from piece to piece, so only the
    /// hand-over is to pay for.
    pub(crate) fn far_min_elems(&mut self, elems: usize) {
        self.far_min = elems;
    }

    /// Whether the worker's core is near enough for single instructions to be split: the
    /// last measurement of the round trip, taken again when it is older than [`PROBE_EVERY`].
    ///
    /// A parked worker is not measured: its vCPU may take longer to wake than any round trip
    /// (on the project's virtual machines, from under 0.1 ms to more than 10 ms; anything over
    /// [`PROBE_PATIENCE`] used to count as far for the next [`PROBE_EVERY`]). It is woken
    /// instead, the last answer stands (near, before the first measurement), and a later call
    /// measures it once it spins. Splitting meanwhile costs little: a half the worker has not
    /// claimed by the time the caller's is done runs on the caller. A worker that refused a job
    /// on this thread's CPU (module documentation) is far, and left parked, until
    /// [`PROBE_EVERY`] has passed.
    pub(crate) fn near(&mut self) -> bool {
        self.reach() == Reach::Near
    }

    /// Where the worker is as [`Worker::near`] judges it: near, far (it answered, slowly), or
    /// away (parked beside a busy neighbour, sharing its CPU with one, or it did not answer).
    pub(crate) fn reach(&mut self) -> Reach {
        if !may_wake(&self.shared, &mut self.refused_since) {
            return Reach::Away;
        }
        match self.probed {
            Some((at, reach)) if at.elapsed() < PROBE_EVERY => reach,
            last => {
                if self.wake() {
                    return last.map_or(Reach::Near, |(_, reach)| reach);
                }
                let shares_its_cpu = self.shares_its_cpu();
                let reach = match self.measure() {
                    Some(t) if t <= NEAR => Reach::Near,
                    // A worker that shares its CPU with a busy neighbour answers as quickly
                    // as a far one (460–500 ns on a Zen 5 guest with a process spinning on
                    // the other vCPU, 296–434 ns far): its waits for the CPU tell them apart.
                    Some(_) if shares_its_cpu => Reach::Away,
                    Some(_) => Reach::Far,
                    None => Reach::Away,
                };
                self.probed = Some((Instant::now(), reach));
                reach
            }
        }
    }

    /// Whether the worker waited for its CPU more than [`SHARED_CPU_WAIT`] of the time since
    /// the last look (Linux's scheduling statistics; `false` at the first look or where they
    /// cannot be read).
    fn shares_its_cpu(&mut self) -> bool {
        let tid = self.shared.tid.load(Ordering::Acquire);
        let now = Instant::now();
        let waited = placement::runqueue_wait(tid);
        let last = core::mem::replace(&mut self.waited, waited.map(|w| (now, w)));
        match (last, waited) {
            (Some((then, before)), Some(after)) => {
                let elapsed = now.duration_since(then).as_nanos() as f64;
                after.saturating_sub(before) as f64 > SHARED_CPU_WAIT * elapsed
            }
            _ => false,
        }
    }

    /// Wakes the worker if it is parked; whether it was.
    fn wake(&self) -> bool {
        let parked = self.shared.parked.load(Ordering::SeqCst);
        if let (true, Some(h)) = (parked, &self.handle) {
            h.thread().unpark();
        }
        parked
    }

    /// The mean round trip of a cache line between this thread and the worker, over
    /// [`PROBE_ROUNDS`], after waking it if it is parked (waiting up to [`WAKE_PATIENCE`]);
    /// `None` when it did not start or answer within [`PROBE_PATIENCE`] (its core is busy).
    pub(crate) fn round_trip(&mut self) -> Option<Duration> {
        let woken = Instant::now();
        while self.wake() && woken.elapsed() < WAKE_PATIENCE {
            thread::yield_now();
        }
        self.measure()
    }

    /// One round-trip measurement, as the worker is now.
    fn measure(&mut self) -> Option<Duration> {
        let flag = AtomicU32::new(0);
        let (t, ()) = self.join(|| ping(&flag), || pong(&flag));
        t
    }

    /// Runs `a` on this thread and `b` on the worker if the worker starts it before `a` is done;
    /// `None` for `b` when it did not run (the worker had not started it: its vCPU was busy,
    /// or it left the job to this thread). The caller then runs that half as its own work,
    /// with its own engines and buffers, which its cache holds: a taken-back half run with
    /// the worker's made two threads slower than one (module documentation).
    pub(crate) fn join_or_leave<A, B, RA, RB>(&mut self, a: A, b: B) -> (RA, Option<RB>)
    where
        A: FnOnce() -> RA,
        B: FnOnce() -> RB + Send,
        RB: Send,
    {
        let done = AtomicBool::new(false);
        let done = &done;
        self.join(
            || {
                let ra = a();
                done.store(true, Ordering::Release);
                ra
            },
            move || (!done.load(Ordering::Acquire)).then(b),
        )
    }

    /// Runs `a` on this thread and `b` on the worker (or on this thread after `a`, when the
    /// worker has not claimed it by then), and returns both results. A panic in `b` is
    /// propagated to the caller; if `a` panics, `b` either finishes on the worker first or, if
    /// the worker never claimed it, does not run.
    pub(crate) fn join<A, B, RA, RB>(&mut self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA,
        B: FnOnce() -> RB + Send,
        RB: Send,
    {
        let job = StackJob {
            f: UnsafeCell::new(Some(b)),
            result: UnsafeCell::new(None),
        };
        let shared = &*self.shared;
        debug_assert_eq!(shared.state.load(Ordering::Acquire), IDLE);
        // SAFETY: the state is IDLE (the previous join waited for DONE and reset it), so the
        // worker thread does not read `job`; `&mut self` excludes other posters.
        unsafe {
            *shared.job.get() = Some(JobRef {
                data: &job as *const StackJob<B, RB> as *const (),
                run: StackJob::<B, RB>::execute,
            });
        }
        shared.poster_cpu.store(current_cpu(), Ordering::Relaxed);
        shared.state.store(POSTED, Ordering::SeqCst);
        if shared.parked.load(Ordering::SeqCst)
            && may_wake(shared, &mut self.refused_since)
            && let Some(h) = &self.handle
        {
            h.thread().unpark();
        }
        // Wait for (or take back) the worker's half even if `a` panics: `job` lives here.
        let settle = Settle(shared);
        let ra = a();
        let taken_back = settle.finish();
        if taken_back {
            // SAFETY: the worker never claimed the job, so this thread is its only user.
            unsafe { StackJob::<B, RB>::execute(&job as *const StackJob<B, RB> as *const ()) };
        }
        // SAFETY: the job has run (here, or on the worker, which published DONE).
        let rb = unsafe { (*job.result.get()).take() };
        match rb {
            Some(Ok(rb)) => (ra, rb),
            Some(Err(panic)) => resume_unwind(panic),
            None => unreachable!("the job finished without a result"),
        }
    }
}

/// Ends a hand-over: takes the job back if the worker has not claimed it, else waits for the
/// worker to finish it; either way the slot is IDLE afterwards. Runs on drop too, so that an
/// unwinding caller never leaves its stack job to the worker.
struct Settle<'a>(&'a Shared);

impl Settle<'_> {
    /// Settles and reports whether the job was taken back (the caller must then run it).
    fn finish(self) -> bool {
        let taken_back = settle(self.0);
        std::mem::forget(self);
        taken_back
    }
}

impl Drop for Settle<'_> {
    fn drop(&mut self) {
        settle(self.0);
    }
}

fn settle(shared: &Shared) -> bool {
    if shared
        .state
        .compare_exchange(POSTED, IDLE, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        // SAFETY: the worker never claimed the job and the state is IDLE again, so the worker
        // does not read the slot.
        unsafe { *shared.job.get() = None };
        return true;
    }
    let mut spins = 0u32;
    while shared.state.load(Ordering::Acquire) != DONE {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1024) {
            thread::yield_now();
        } else {
            spin_loop();
        }
    }
    shared.state.store(IDLE, Ordering::Release);
    false
}

/// A split that ran its second half on the calling thread because the worker had not started
/// it (tests check that each such path ran).
#[cfg(test)]
#[derive(Copy, Clone, Debug)]
pub(crate) enum Left {
    /// A loop's second half (`host::loops`).
    Loop,
    /// A grid's second half (`host::spmd`).
    Grid,
    /// An instruction's other rows (`engines::split::for_rows`).
    Rows,
}

#[cfg(test)]
thread_local! {
    static LEFT: std::cell::Cell<[u32; 3]> = const { std::cell::Cell::new([0; 3]) };
}

/// Counts, on this thread, a second half run here for `site`.
#[cfg(test)]
pub(crate) fn note_left(site: Left) {
    LEFT.with(|c| {
        let mut counts = c.get();
        counts[site as usize] += 1;
        c.set(counts);
    });
}

/// The second halves this thread ran for `site` so far.
#[cfg(test)]
pub(crate) fn left_count(site: Left) -> u32 {
    LEFT.with(|c| c.get()[site as usize])
}

#[cfg(all(test, target_os = "linux"))]
impl Worker {
    /// Lets the worker run on every CPU the calling thread was allowed before
    /// [`Worker::pin_with_caller`] (`mask`), leaving the caller pinned; whether the OS agreed.
    pub(crate) fn unpin_worker(&self, mask: &libc::cpu_set_t) -> bool {
        use std::os::unix::thread::JoinHandleExt;
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let worker = self.handle.as_ref().map(|h| h.as_pthread_t());
        // SAFETY: `mask` is a valid set the call only reads.
        worker.is_some_and(|t| unsafe { libc::pthread_setaffinity_np(t, size, mask) } == 0)
    }

    /// Pins the calling thread and the worker to the CPU the caller runs on now, so that the
    /// worker finds every job posted from its own CPU and leaves it to the caller (module
    /// documentation); `false` when the OS refuses (then nothing is pinned, or the caller
    /// alone).
    pub(crate) fn pin_with_caller(&self) -> bool {
        use std::os::unix::thread::JoinHandleExt;
        let Ok(cpu) = usize::try_from(current_cpu()) else {
            return false;
        };
        // SAFETY: a zeroed `cpu_set_t` is a valid empty set; the calls only read it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            let size = std::mem::size_of::<libc::cpu_set_t>();
            let worker = self.handle.as_ref().map(|h| h.as_pthread_t());
            libc::sched_setaffinity(0, size, &set) == 0
                && worker.is_some_and(|t| libc::pthread_setaffinity_np(t, size, &set) == 0)
        }
    }
}

/// `w` if single instructions are to be split with it ([`Worker::near`]).
pub(crate) fn near(w: &mut Worker) -> Option<&mut Worker> {
    w.near().then_some(w)
}

/// Where the worker is, from the round trip of a cache line between the two threads
/// ([`Worker::reach`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// At most [`NEAR`]: every instruction large enough to split is split.
    Near,
    /// Farther: only instructions of at least [`FAR_MIN_ELEMS`] elements whose rows split
    /// apart (streamed instructions, reductions, top-8 searches, transfers) are split.
    Far,
    /// Parked beside a busy neighbour, sharing its CPU with another busy thread (it waited
    /// for it more than [`SHARED_CPU_WAIT`] of the time since the last probe), or not
    /// answering: nothing is split.
    Away,
}

/// The fewest elements of an instruction that splits its rows with a far worker: enough that
/// each half's own work outweighs moving its operands between the cores (the NKI Library
/// top-k's `[80, 8192]` searches, cumsum's and the pooling's `[128, 8192]` tiles; the seed
/// matmul, whose two halves share their operands, took 74 µs on two far threads against 48 µs
/// on one, and matmuls split only when near).
pub(crate) const FAR_MIN_ELEMS: usize = 1 << 18;

/// The share of the time between two probes that a worker waiting that long for its CPU
/// shares it with another busy thread ([`Reach::Away`] then, not [`Reach::Far`]).
const SHARED_CPU_WAIT: f64 = 0.05;

/// `w` if an instruction of `elems` elements whose rows split apart is to be split with it:
/// near, or far and at least [`FAR_MIN_ELEMS`] (or what [`Worker::far_min_elems`] set).
pub(crate) fn near_or_large(w: &mut Worker, elems: usize) -> Option<&mut Worker> {
    match w.reach() {
        Reach::Near => Some(w),
        Reach::Far if elems >= w.far_min => Some(w),
        Reach::Far | Reach::Away => None,
    }
}

/// Waits until `flag` holds `want`; `false` if `deadline` passed first or the caller gave up.
fn wait_for(flag: &AtomicU32, want: u32, deadline: Instant) -> bool {
    let mut spins = 0u32;
    loop {
        match flag.load(Ordering::Acquire) {
            v if v == want => return true,
            GAVE_UP => return false,
            _ => {}
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(256) && Instant::now() > deadline {
            return false;
        }
        spin_loop();
    }
}

/// The caller's side of a round-trip measurement: waits for the worker to start (`flag` 1),
/// then sends `2 + 2i` and waits for `3 + 2i`, [`PROBE_ROUNDS`] times.
fn ping(flag: &AtomicU32) -> Option<Duration> {
    let give_up = || {
        flag.store(GAVE_UP, Ordering::Release);
        None
    };
    if !wait_for(flag, 1, Instant::now() + PROBE_PATIENCE) {
        return give_up();
    }
    let start = Instant::now();
    let deadline = start + PROBE_PATIENCE;
    for i in 0..PROBE_ROUNDS {
        flag.store(2 + 2 * i, Ordering::Release);
        if !wait_for(flag, 3 + 2 * i, deadline) {
            return give_up();
        }
    }
    Some(start.elapsed() / PROBE_ROUNDS)
}

/// The worker's side of [`ping`]: announces itself, then answers each value. Returns at once
/// when the caller gave up (also when the caller runs this itself after taking the job back).
fn pong(flag: &AtomicU32) {
    if flag
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    let deadline = Instant::now() + 2 * PROBE_PATIENCE;
    for i in 0..PROBE_ROUNDS {
        if !wait_for(flag, 2 + 2 * i, deadline) {
            return;
        }
        flag.store(3 + 2 * i, Ordering::Release);
    }
}

/// Whether the worker may be woken: not while it refused jobs on its poster's CPU
/// ([`Shared::refused`]), until [`PROBE_EVERY`] has passed since the poster saw it
/// (`refused_since`, the poster's).
fn may_wake(shared: &Shared, refused_since: &mut Option<Instant>) -> bool {
    if !shared.refused.load(Ordering::Relaxed) {
        return true;
    }
    let now = Instant::now();
    match *refused_since {
        Some(t) if now - t < PROBE_EVERY => false,
        Some(_) => {
            *refused_since = None;
            shared.refused.store(false, Ordering::Relaxed);
            true
        }
        None => {
            *refused_since = Some(now);
            false
        }
    }
}

/// Whether the worker runs on the CPU its last poster ran on (then it only takes the
/// poster's turns).
fn on_poster_cpu(shared: &Shared) -> bool {
    let cpu = shared.poster_cpu.load(Ordering::Relaxed);
    cpu != NO_CPU && cpu == current_cpu()
}

/// Parks the worker until the next post (or a spurious wake-up). With `posted`, also while a
/// job waits: its poster takes it back.
fn park(shared: &Shared, posted: bool) {
    shared.parked.store(true, Ordering::SeqCst);
    // Re-check after announcing the park, so that a job posted in between is seen (the poster
    // reads `parked` after publishing POSTED).
    if posted || shared.state.load(Ordering::SeqCst) == IDLE {
        thread::park();
    }
    shared.parked.store(false, Ordering::SeqCst);
}

fn worker_loop(shared: &Shared) {
    let mut placement = placement::Placement::new();
    shared.tid.store(placement::thread_id(), Ordering::Release);
    shared.started.store(true, Ordering::Release);
    let mut spin = SPIN_BEFORE_PARK;
    // When the worker last parked for want of a job (not refusing one).
    let mut parked_at: Option<Instant> = None;
    loop {
        let mut since = Instant::now();
        let mut spins = 0u32;
        loop {
            match shared.state.load(Ordering::Acquire) {
                POSTED => {
                    // On the poster's CPU the poster is not running: running the job here
                    // would only take turns with it. Leave it for a free CPU, or park; the
                    // poster then takes the job back.
                    if on_poster_cpu(shared) {
                        if placement.leave() {
                            continue;
                        }
                        shared.refused.store(true, Ordering::Relaxed);
                        parked_at = None;
                        park(shared, true);
                        since = Instant::now();
                        continue;
                    }
                    let claim = shared.state.compare_exchange(
                        POSTED,
                        RUNNING,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    if claim.is_ok() {
                        if let Some(at) = parked_at.take() {
                            spin = next_spin(spin, at.elapsed());
                        }
                        break;
                    }
                    // Taken back by the caller: wait for the next job.
                    continue;
                }
                EXIT => return,
                _ => {}
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) || (since.elapsed() < spin && !on_poster_cpu(shared)) {
                spin_loop();
                continue;
            }
            parked_at = Some(Instant::now());
            park(shared, false);
            since = Instant::now();
        }
        // SAFETY: the claim (POSTED -> RUNNING, Acquire) makes the poster's write of `job`
        // visible, and the poster does not touch the slot until DONE.
        let job = unsafe { (*shared.job.get()).take() };
        if let Some(job) = job {
            // SAFETY: the poster keeps the job alive and untouched until DONE.
            unsafe { (job.run)(job.data) };
        }
        shared.state.store(DONE, Ordering::Release);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.state.store(EXIT, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Worker;

    #[test]
    fn join_runs_both_halves_on_disjoint_data() {
        let Some(mut w) = Worker::start() else { return };
        let mut data = vec![0u64; 1000];
        for round in 0..200u64 {
            let (lo, hi) = data.split_at_mut(500);
            let (a, b) = w.join(
                || {
                    lo.iter_mut().for_each(|x| *x += round);
                    lo.len()
                },
                || {
                    hi.iter_mut().for_each(|x| *x += 2 * round);
                    hi.len()
                },
            );
            assert_eq!((a, b), (500, 500));
        }
        let total: u64 = (0..200).sum();
        assert!(data[..500].iter().all(|&x| x == total));
        assert!(data[500..].iter().all(|&x| x == 2 * total));
    }

    #[test]
    fn a_panic_on_the_worker_reaches_the_caller_and_the_worker_survives() {
        let Some(mut w) = Worker::start() else { return };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.join(|| 1, || -> u32 { panic!("boom") });
        }));
        assert!(r.is_err());
        assert_eq!(w.join(|| 1, || 2), (1, 2));
    }

    #[test]
    fn the_round_trip_is_measured_and_refreshed() {
        let Some(mut w) = Worker::start() else { return };
        // Some machines are busy: a measurement may fail, but one that succeeds is positive
        // and far below the patience.
        if let Some(t) = w.round_trip() {
            assert!(
                t > std::time::Duration::ZERO && t < super::PROBE_PATIENCE,
                "{t:?}"
            );
        }
        let first = w.near();
        assert_eq!(w.near(), first, "within PROBE_EVERY the answer is reused");
        // The worker still runs jobs after a measurement.
        assert_eq!(w.join(|| 5, || 6), (5, 6));
    }

    /// A worker pinned with this thread to one CPU, so that it leaves every job to this thread;
    /// `None` on a single-CPU host or in a sandbox that refuses affinity masks (nothing to
    /// check there).
    #[cfg(target_os = "linux")]
    fn pinned_worker() -> Option<Worker> {
        Worker::start().filter(Worker::pin_with_caller)
    }

    /// A worker on its poster's CPU leaves the job to the poster and is left parked: both
    /// threads pinned to one CPU, the job runs on the calling thread, and the worker is far.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_worker_on_the_posters_cpu_leaves_the_job_to_the_poster() {
        let Some(mut w) = pinned_worker() else { return };
        let caller = std::thread::current().id();
        let (_, ran_on) = w.join(
            // Leaves the CPU to the worker, which then finds the job posted from its CPU.
            || std::thread::sleep(std::time::Duration::from_millis(20)),
            || std::thread::current().id(),
        );
        assert_eq!(ran_on, caller, "the job ran on the worker");
        assert!(!w.near(), "a worker that refused a job counts as far");
        assert_eq!(w.join(|| 7, || 8), (7, 8));
    }

    /// A worker that finds itself on its poster's CPU while another CPU is idle moves there
    /// and runs the job.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_worker_on_the_posters_cpu_moves_to_a_free_one() {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: a zeroed set is valid; the call fills it.
        let allowed = unsafe {
            let mut m: libc::cpu_set_t = std::mem::zeroed();
            (libc::sched_getaffinity(0, size, &mut m) == 0).then_some(m)
        };
        // SAFETY: reads a valid set.
        let Some(allowed) = allowed.filter(|m| unsafe { libc::CPU_COUNT(m) } >= 2) else {
            return;
        };
        let Some(mut w) = pinned_worker() else { return };
        // The worker sits on the caller's CPU, free to leave it.
        assert!(w.unpin_worker(&allowed));
        let (caller, caller_cpu) = (std::thread::current().id(), super::current_cpu());
        // Its look at the CPUs' idle time, taken as it started, becomes old enough to decide.
        let looked = super::placement::Looks::now();
        std::thread::sleep(std::time::Duration::from_millis(25));
        // Another CPU must have been idle meanwhile (the tests beside this one may keep every
        // CPU busy; then the worker is right to stay, and there is nothing to check).
        let others_idle = looked.others_idle(caller_cpu);
        let (_, (ran_on, cpu)) = w.join(
            || std::thread::sleep(std::time::Duration::from_millis(20)),
            || (std::thread::current().id(), super::current_cpu()),
        );
        if !others_idle {
            return;
        }
        assert_ne!(ran_on, caller, "the worker left the job to the caller");
        assert_ne!(
            cpu, caller_cpu,
            "the worker ran the job on the caller's CPU"
        );
    }

    /// A half the worker leaves to the caller comes back unrun from `join_or_leave`.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_half_the_worker_leaves_comes_back_unrun() {
        let Some(mut w) = pinned_worker() else { return };
        let mut ran = false;
        let (a, b) = w.join_or_leave(
            || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                1
            },
            || {
                ran = true;
                2
            },
        );
        assert_eq!((a, b), (1, None));
        assert!(!ran, "the half ran although it was left");
    }

    /// A worker woken again and again soon after it parks spins up to the longest spin in
    /// doublings; woken late, it comes back to the shortest in halvings, and stays in between.
    #[test]
    fn the_spin_adapts_to_how_soon_jobs_come() {
        use super::{MAX_SPIN, SPIN_BEFORE_PARK, next_spin};
        let soon = Duration::from_micros(300);
        let late = MAX_SPIN * 5;
        let mut spin = SPIN_BEFORE_PARK;
        let mut steps = 0;
        while spin < MAX_SPIN {
            let next = next_spin(spin, soon);
            assert!(next == (spin * 2).min(MAX_SPIN), "{spin:?} -> {next:?}");
            spin = next;
            steps += 1;
        }
        assert_eq!(steps, 5, "50 µs doubles to 1 ms in five premature parks");
        assert_eq!(next_spin(MAX_SPIN, soon), MAX_SPIN);
        while spin > SPIN_BEFORE_PARK {
            let next = next_spin(spin, late);
            assert!(
                next == (spin / 2).max(SPIN_BEFORE_PARK),
                "{spin:?} -> {next:?}"
            );
            spin = next;
        }
        assert_eq!(next_spin(SPIN_BEFORE_PARK, late), SPIN_BEFORE_PARK);
        // A wait of exactly the longest spin is late.
        assert_eq!(next_spin(MAX_SPIN, MAX_SPIN), MAX_SPIN / 2);
    }

    #[test]
    fn the_worker_wakes_after_parking() {
        let Some(mut w) = Worker::start() else { return };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(w.join(|| 3, || 4), (3, 4));
    }
}
