//! Dependency tracking on memory regions: when each piece of SBUF, PSUM and HBM was last
//! written and read, so that an instruction starts only after the writes it reads
//! (read-after-write) and, if it writes, after the reads and writes of what it overwrites
//! (write-after-read, write-after-write), as the hardware's semaphores enforce.
//!
//! On chip, a cell is 32 partitions × 64 bytes: an access starting at a partition that is not
//! a multiple of 32 is only legal with at most 32 partitions inside one quadrant [ARCH1 §1.7],
//! and SBUF tiles are 64-byte aligned, so two hardware-legal accesses to different tiles
//! rarely share a cell. Two accesses that do share one are ordered (conservatively). An access
//! covers the bounding box of its elements within each partition. HBM is tracked only for the
//! tensors a kernel writes, in 512-byte blocks along each contiguous run of the access.

use std::cell::RefCell;

use crate::operand::{Loc, Resolved};

thread_local! {
    /// The cell arrays of finished timelines, for the next ones on this thread: a launch's
    /// HBM blocks take megabytes, which a fresh allocation would fault in page by page again
    /// at every run (an autotuner times one kernel after another).
    static SPARE: RefCell<Vec<Vec<Cell>>> = const { RefCell::new(Vec::new()) };
    /// Likewise the HBM blocks' time arrays ([`Blocks`]).
    static SPARE_TIMES: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
}

/// A thread's spare arrays of one element type.
type Spares<T> = std::thread::LocalKey<RefCell<Vec<Vec<T>>>>;

/// Most arrays kept for reuse per thread and element type.
const SPARE_KEPT: usize = 8;

/// Fewest elements in an array worth keeping for reuse.
const SPARE_MIN: usize = 1 << 12;

/// `n` cells never accessed: a spare array's when one is large enough.
fn fresh_cells(n: usize) -> Vec<Cell> {
    fresh(&SPARE, n, Cell::default())
}

/// `n` copies of `x` in a spare array of `spares` when one is large enough.
fn fresh<T: Clone + 'static>(spares: &'static Spares<T>, n: usize, x: T) -> Vec<T> {
    let spare = spares
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let i = (0..s.len())
                .filter(|&i| s[i].capacity() >= n)
                .min_by_key(|&i| s[i].capacity())?;
            Some(s.swap_remove(i))
        })
        .ok()
        .flatten();
    match spare {
        Some(mut v) => {
            v.clear();
            v.resize(n, x);
            v
        }
        None => vec![x; n],
    }
}

/// Keeps `v` for [`fresh`] (the largest [`SPARE_KEPT`] of those given back).
fn give_back<T: 'static>(spares: &'static Spares<T>, v: Vec<T>) {
    if v.capacity() < SPARE_MIN {
        return;
    }
    let _ = spares.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_KEPT {
            s.push(v);
        } else if let Some(i) = (0..s.len()).min_by_key(|&i| s[i].capacity())
            && s[i].capacity() < v.capacity()
        {
            s[i] = v;
        }
    });
}

/// Partitions per cell.
const QUAD: usize = 32;
/// Cells across the 128 partitions.
const QUADS: usize = 4;
/// Bytes per cell within a partition (log2) of the memory as allocated: SBUF tiles are 64-byte
/// aligned, so two tiles never share a cell.
pub(crate) const BLOCK_SHIFT: u32 = 6;
/// Bytes per cell within a partition (log2) of a renamed space, where every tile's place is
/// aligned to it: 512 bytes, 8 times fewer cells to track (parts of one tile closer than that
/// are ordered together).
pub(crate) const RENAMED_BLOCK_SHIFT: u32 = 9;
/// Bytes per HBM block.
const HBM_BLOCK_SHIFT: u32 = 9;
/// Most contiguous runs of an HBM access walked one by one; beyond, its bounding range.
const MAX_RUNS: usize = 4096;

/// When a cell's last access is visible, and which record made it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cell {
    /// Completion time (ps).
    pub t: u64,
    /// The record (schedule index) of the access, `u32::MAX` when records are not kept.
    pub who: u32,
    /// Whether TensorE made the access (a TensorE consumer waits for its interval only).
    pub pe: bool,
}

/// The latest constraint on an instruction's start, and where it came from.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ready {
    /// The time (ps).
    pub t: u64,
    /// The record that set it (`u32::MAX`: none).
    pub who: u32,
}

impl Ready {
    /// Nothing to wait for.
    pub const NONE: Ready = Ready {
        t: 0,
        who: u32::MAX,
    };

    /// Raises the constraint to `t` (set by `who`) if later.
    #[inline]
    pub fn merge(&mut self, t: u64, who: u32) {
        if t > self.t {
            self.t = t;
            self.who = who;
        }
    }

    /// The later of two constraints.
    #[inline]
    pub fn max(mut self, o: Ready) -> Ready {
        self.merge(o.t, o.who);
        self
    }
}

/// How a consumer sees a cell: a TensorE consumer of a TensorE result (PSUM accumulation)
/// waits only for the producer's interval, the PE array's pipeline keeping them in order.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Consumer {
    /// Whether the consumer runs on TensorE.
    pub pe: bool,
    /// TensorE's pipeline latency (ps), subtracted from a TensorE cell for a TensorE consumer.
    pub pe_latency: u64,
}

impl Consumer {
    #[inline]
    fn sees(&self, c: &Cell) -> u64 {
        if self.pe && c.pe {
            c.t.saturating_sub(self.pe_latency)
        } else {
            c.t
        }
    }
}

/// A rectangle of cells: quadrants `q0..q1`, blocks `b0..b1`, in the plane whose first cell
/// is `base`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Region {
    base: usize,
    q0: usize,
    q1: usize,
    b0: usize,
    b1: usize,
}

impl Region {
    fn is_empty(&self) -> bool {
        self.q0 >= self.q1 || self.b0 >= self.b1
    }

    /// Its cells as one range of indices, when it spans every quadrant (its blocks' cells
    /// are then adjacent).
    #[inline]
    fn whole_rows(&self) -> Option<core::ops::Range<usize>> {
        (self.q0 == 0 && self.q1 == QUADS)
            .then(|| self.base + self.b0 * QUADS..self.base + self.b1 * QUADS)
    }

    /// With its quadrants clamped to the memory's.
    fn clamped(mut self) -> Region {
        self.q1 = self.q1.min(QUADS);
        self
    }
}

/// Division of 32-bit numerators by a fixed divisor as a multiplication (Lemire, Kaser and
/// Kurz, "Faster remainder by direct computation", 2019: with `m = ⌊(2⁶⁴ − 1) / d⌋ + 1`,
/// `⌊n / d⌋ = ⌊m · n / 2⁶⁴⌋` for every `n < 2³²` and `1 < d < 2³²`); a shift for a power of two.
#[derive(Copy, Clone, Debug)]
struct Divisor {
    /// `m`, or 0 for a power of two (then `shift` divides).
    m: u64,
    shift: u32,
}

impl Divisor {
    /// Division by `d` (≥ 1; a larger one than 32 bits takes every quotient as 0).
    fn new(d: usize) -> Divisor {
        let d = d.max(1);
        match u32::try_from(d) {
            _ if d.is_power_of_two() => Divisor {
                m: 0,
                shift: d.trailing_zeros(),
            },
            Ok(d) => Divisor {
                m: u64::MAX / u64::from(d) + 1,
                shift: 0,
            },
            Err(_) => Divisor { m: 0, shift: 63 },
        }
    }

    /// `⌊n / d⌋`.
    #[inline]
    fn quotient(self, n: u32) -> u32 {
        if self.m == 0 {
            (u64::from(n) >> self.shift) as u32
        } else {
            ((u128::from(self.m) * u128::from(n)) >> 64) as u32
        }
    }
}

/// The cells of one on-chip memory (SBUF or PSUM), in one or more planes: plane 0 is the
/// memory as allocated; planes 1.. hold the extra buffers of rotated tiles (see
/// `Timing::affine_buffers`).
#[derive(Clone, Debug)]
pub(crate) struct OnChip {
    /// Bytes from one partition to the next in the memory as allocated.
    stride: usize,
    /// Division by `stride` ([`OnChip::region`] finds every operand's first partition).
    per_partition: Divisor,
    /// Cells along a partition in one plane (of the memory, or of the renamed space).
    blocks: usize,
    /// Bytes per cell within a partition (log2).
    shift: u32,
    planes: usize,
    /// Each cell's last write and last read: empty until the first access is recorded (a
    /// memory replaced before any is, as a new timeline's is by its scheduling, is never
    /// cleared).
    writes: Vec<Cell>,
    reads: Vec<Cell>,
}

impl OnChip {
    /// A memory of 128 partitions `stride` bytes apart in `planes` planes (at least 1), never
    /// accessed, each plane `span` bytes along a partition (the memory's `stride` as
    /// allocated; the sum of the tiles' sizes when each tile has a space of its own), in cells
    /// of `1 << shift` bytes per partition.
    pub fn new(stride: usize, span: usize, planes: usize, shift: u32) -> OnChip {
        let blocks = span.div_ceil(1 << shift).max(1);
        let planes = planes.max(1);
        OnChip {
            stride,
            per_partition: Divisor::new(stride),
            blocks,
            shift,
            planes,
            writes: Vec::new(),
            reads: Vec::new(),
        }
    }

    /// Allocates the cells at the first access recorded.
    #[inline]
    fn allocate(&mut self) {
        if self.writes.is_empty() {
            let n = self.planes * self.blocks * QUADS;
            self.writes = fresh_cells(n);
            self.reads = fresh_cells(n);
        }
    }

    /// The cells an operand covers in plane `plane` (clamped to the planes): its partitions'
    /// quadrants × the blocks of the bounding box of its elements within a partition, moved
    /// by `shift` bytes (a tile's place in a renamed space less its address; clamped to the
    /// plane; the whole plane when the pattern is not one partition apart).
    pub fn region(&self, r: &Resolved, plane: usize, shift: i64) -> Region {
        let size = i64::from(r.dtype.size().max(1));
        let part = r.pattern.strides[0] as i64;
        let plane_base = plane.min(self.planes - 1) * self.blocks * QUADS;
        let whole = Region {
            base: plane_base,
            q0: 0,
            q1: QUADS,
            b0: 0,
            b1: self.blocks,
        };
        if part <= 0 || part.saturating_mul(size) != self.stride as i64 {
            return whole;
        }
        let base = r.pattern.base as i64;
        // The first partition and the element within it: `base = p0 · part + off`, from the
        // bytes (`part · size` is the stride) without a division by a variable.
        let (p0, off) = match u32::try_from(base.saturating_mul(size)) {
            Ok(bytes) => {
                let p0 = self.per_partition.quotient(bytes);
                let rest = i64::from(bytes) - i64::from(p0) * self.stride as i64;
                (i64::from(p0), rest / size)
            }
            Err(_) => (base.div_euclid(part), base.rem_euclid(part)),
        };
        let (mut lo, mut hi) = (off, off);
        for j in 1..r.dims.len() {
            let n = r.dims[j] as i64;
            if n > 1 {
                let ext = (n - 1).saturating_mul(r.pattern.strides[j] as i64);
                if ext > 0 {
                    hi = hi.saturating_add(ext);
                } else {
                    lo = lo.saturating_add(ext);
                }
            }
        }
        let np = (r.dims[0] as i64).max(1);
        let last = p0.saturating_add(np - 1);
        let quad = |p: i64| (p.max(0) as usize / QUAD).min(QUADS);
        let lo_b = lo.saturating_mul(size).saturating_add(shift).max(0) as usize;
        let hi_b = hi
            .saturating_add(1)
            .saturating_mul(size)
            .saturating_add(shift)
            .max(0) as usize;
        Region {
            base: plane_base,
            q0: quad(p0),
            q1: (quad(last) + 1).min(QUADS),
            b0: (lo_b >> self.shift).min(self.blocks),
            b1: ((hi_b.saturating_sub(1) >> self.shift) + 1).min(self.blocks),
        }
    }

    /// Whether an operand's partitions are one partition apart (else [`OnChip::region`]
    /// gives it the whole plane).
    pub fn is_partitioned(&self, r: &Resolved) -> bool {
        let size = i64::from(r.dtype.size().max(1));
        let part = r.pattern.strides[0] as i64;
        part > 0 && part.saturating_mul(size) == self.stride as i64
    }

    /// The cells of bytes `lo..hi` (already moved into the plane's space) of partitions
    /// `0..partitions` in plane `plane` (clamped): a whole tile's.
    pub fn span(&self, lo: i64, hi: i64, partitions: usize, plane: usize) -> Region {
        let plane_base = plane.min(self.planes - 1) * self.blocks * QUADS;
        let (lo, hi) = (lo.max(0) as usize, hi.max(0) as usize);
        Region {
            base: plane_base,
            q0: 0,
            q1: (partitions.max(1) - 1) / QUAD + 1,
            b0: (lo >> self.shift).min(self.blocks),
            b1: ((hi.saturating_sub(1) >> self.shift) + 1).min(self.blocks),
        }
        .clamped()
    }

    /// How many cells it has (every index [`OnChip::cells`] gives is below).
    pub fn len(&self) -> usize {
        self.planes * self.blocks * QUADS
    }

    /// The indices of the cells of `reg` (for [`OnChip::cell_mut`]).
    pub fn cells(&self, reg: Region, out: &mut Vec<usize>) {
        if reg.is_empty() {
            return;
        }
        out.reserve((reg.b1 - reg.b0) * (reg.q1 - reg.q0));
        for b in reg.b0..reg.b1 {
            let row = reg.base + b * QUADS;
            out.extend(row + reg.q0..row + reg.q1);
        }
    }

    /// Cell `i`'s last write and last read.
    pub fn cell_mut(&mut self, i: usize) -> Option<(&mut Cell, &mut Cell)> {
        self.allocate();
        Some((self.writes.get_mut(i)?, self.reads.get_mut(i)?))
    }

    /// Raises `ready` to when a reader of `reg` may start (the writes it reads are done).
    #[inline]
    pub fn wait_read(&self, reg: Region, c: Consumer, ready: &mut Ready) {
        if reg.is_empty() || self.writes.is_empty() {
            return;
        }
        if !c.pe
            && let Some(cells) = reg.whole_rows()
        {
            merge_latest(&self.writes[cells.clone()], &self.writes[cells], ready);
            return;
        }
        for b in reg.b0..reg.b1 {
            let row = reg.base + b * QUADS;
            for cell in &self.writes[row + reg.q0..row + reg.q1] {
                ready.merge(c.sees(cell), cell.who);
            }
        }
    }

    /// Raises `ready` to when a writer of `reg` may start (the reads and writes of what it
    /// overwrites are done).
    #[inline]
    pub fn wait_write(&self, reg: Region, c: Consumer, ready: &mut Ready) {
        if reg.is_empty() || self.writes.is_empty() {
            return;
        }
        if !c.pe
            && let Some(cells) = reg.whole_rows()
        {
            merge_latest(&self.writes[cells.clone()], &self.reads[cells], ready);
            return;
        }
        for b in reg.b0..reg.b1 {
            let row = reg.base + b * QUADS;
            let (w, r) = (
                &self.writes[row + reg.q0..row + reg.q1],
                &self.reads[row + reg.q0..row + reg.q1],
            );
            for (cw, cr) in w.iter().zip(r) {
                ready.merge(c.sees(cw), cw.who);
                ready.merge(c.sees(cr), cr.who);
            }
        }
    }

    /// Records a read of `reg` completing at `cell.t`.
    #[inline]
    pub fn mark_read(&mut self, reg: Region, cell: Cell) {
        if reg.is_empty() {
            return;
        }
        self.allocate();
        if let Some(cells) = reg.whole_rows() {
            later_read(&mut self.reads[cells], cell);
            return;
        }
        for b in reg.b0..reg.b1 {
            let row = reg.base + b * QUADS;
            later_read(&mut self.reads[row + reg.q0..row + reg.q1], cell);
        }
    }

    /// Records a write of `reg` completing at `cell.t` (it supersedes the reads before it,
    /// which it waited for).
    #[inline]
    pub fn mark_write(&mut self, reg: Region, cell: Cell) {
        if reg.is_empty() {
            return;
        }
        self.allocate();
        if let Some(cells) = reg.whole_rows() {
            self.writes[cells.clone()].fill(cell);
            later_read(&mut self.reads[cells], cell);
            return;
        }
        for b in reg.b0..reg.b1 {
            let row = reg.base + b * QUADS;
            for c in &mut self.writes[row + reg.q0..row + reg.q1] {
                *c = cell;
            }
            later_read(&mut self.reads[row + reg.q0..row + reg.q1], cell);
        }
    }
}

/// Records an access completing at `cell.t` as the last read of each of `reads` it is not
/// earlier than.
#[inline]
fn later_read(reads: &mut [Cell], cell: Cell) {
    for c in reads {
        if cell.t >= c.t {
            *c = cell;
        }
    }
}

/// [`Ready::merge`] of `a[0]`, `b[0]`, `a[1]`, `b[1]`, ... in that order (a reader passes its
/// cells' writes twice): the latest time first, then the first cell that holds it.
#[inline]
fn merge_latest(a: &[Cell], b: &[Cell], ready: &mut Ready) {
    let latest = (a.iter().zip(b))
        .map(|(x, y)| x.t.max(y.t))
        .max()
        .unwrap_or(0);
    if latest > ready.t
        && let Some(who) = (a.iter().zip(b))
            .find_map(|(x, y)| [x, y].into_iter().find(|c| c.t == latest).map(|c| c.who))
    {
        ready.t = latest;
        ready.who = who;
    }
}

impl Drop for OnChip {
    fn drop(&mut self) {
        give_back(&SPARE, core::mem::take(&mut self.writes));
        give_back(&SPARE, core::mem::take(&mut self.reads));
    }
}

impl Drop for Blocks {
    fn drop(&mut self) {
        give_back(&SPARE_TIMES, core::mem::take(&mut self.t));
    }
}

/// The blocks of the HBM tensors a kernel writes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Hbm {
    /// Per tensor of the program's table: its size in bytes, and its blocks once written.
    tensors: Vec<HbmTensor>,
    /// Whether the blocks keep the records of their accesses (else only their times).
    records: bool,
    /// Whether marks are journaled.
    journaling: bool,
    /// While journaling: each run of blocks a mark changed (tensor, first block, blocks), to
    /// undo marks; their state before it is in `saved`. Capacities are kept from one use to
    /// the next.
    journal: Vec<(usize, usize, usize)>,
    /// The journaled runs' blocks before their marks, in order: each run's writes, then its
    /// reads.
    saved: Blocks,
}

#[derive(Clone, Debug, Default)]
struct HbmTensor {
    bytes: u64,
    writes: Blocks,
    reads: Blocks,
    /// Per page of `1 << HBM_PAGE_SHIFT` blocks: at least the latest time of any write of
    /// its blocks (a bound: a wait skips a page whose bound is not after its constraint).
    page_writes: Vec<u64>,
    /// Likewise of any read or write.
    page_accesses: Vec<u64>,
}

/// The last accesses of an HBM tensor's blocks, each a [`Cell`] without its TensorE flag
/// (only DMA reaches HBM): their completion times, and the records that made them when
/// records are kept. A timing-only run keeps the times alone, half the bytes to clear and to
/// mark (a launch's output blocks are cleared and marked in full).
#[derive(Clone, Debug, Default)]
struct Blocks {
    t: Vec<u64>,
    /// By block when records are kept, else empty (every access's record is `u32::MAX`).
    who: Vec<u32>,
}

impl Blocks {
    /// `n` blocks never accessed.
    fn new(n: usize, records: bool) -> Blocks {
        Blocks {
            t: fresh(&SPARE_TIMES, n, 0),
            who: if records {
                vec![u32::MAX; n]
            } else {
                Vec::new()
            },
        }
    }

    fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    fn len(&self) -> usize {
        self.t.len()
    }

    /// Raises `ready` to the latest access of blocks `b`, here and, given, in `also` (the
    /// same blocks' other array: a write waits for both).
    #[inline(always)]
    fn wait(&self, also: Option<&Blocks>, b: core::ops::Range<usize>, ready: &mut Ready) {
        match also {
            None if self.who.is_empty() => {
                let t = self.t[b].iter().fold(0, |m, &t| m.max(t));
                ready.merge(t, u32::MAX);
            }
            Some(o) if self.who.is_empty() => {
                let t = (self.t[b.clone()].iter())
                    .zip(&o.t[b])
                    .fold(0, |m, (&x, &y)| m.max(x).max(y));
                ready.merge(t, u32::MAX);
            }
            _ => {
                for i in b {
                    ready.merge(self.t[i], self.who[i]);
                    if let Some(o) = also {
                        ready.merge(o.t[i], o.who[i]);
                    }
                }
            }
        }
    }

    /// Blocks `b` were last accessed by `cell`.
    #[inline(always)]
    fn set(&mut self, b: core::ops::Range<usize>, cell: Cell) {
        self.t[b.clone()].fill(cell.t);
        if !self.who.is_empty() {
            self.who[b].fill(cell.who);
        }
    }

    /// Blocks `b` were accessed by `cell`, their last access where it is not earlier.
    #[inline(always)]
    fn later(&mut self, b: core::ops::Range<usize>, cell: Cell) {
        if self.who.is_empty() {
            for t in &mut self.t[b] {
                *t = (*t).max(cell.t);
            }
        } else {
            for (t, who) in self.t[b.clone()].iter_mut().zip(&mut self.who[b]) {
                if cell.t >= *t {
                    *t = cell.t;
                    *who = cell.who;
                }
            }
        }
    }

    /// Appends blocks `b` (to restore them with [`Blocks::restore`]): element by element, a
    /// run being a few blocks mostly (a call to `memcpy` each cost more).
    #[inline(always)]
    fn save(&self, b: core::ops::Range<usize>, to: &mut Blocks) {
        to.t.extend(self.t[b.clone()].iter().copied());
        if !self.who.is_empty() {
            to.who.extend(self.who[b].iter().copied());
        }
    }

    /// Sets blocks `b0..` to the `from` saved ones starting at `at`, of each kept array.
    fn restore(&mut self, b0: usize, from: &Blocks, at: usize, n: usize) {
        self.t[b0..b0 + n].copy_from_slice(&from.t[at..at + n]);
        if !self.who.is_empty() {
            self.who[b0..b0 + n].copy_from_slice(&from.who[at..at + n]);
        }
    }

    /// Keeps the first `n` saved blocks.
    fn truncate(&mut self, n: usize) {
        self.t.truncate(n);
        self.who.truncate(n);
    }

    fn clear(&mut self) {
        self.truncate(0);
    }
}

/// Blocks per page of an HBM tensor's bounds (log2).
const HBM_PAGE_SHIFT: u32 = 6;

impl Hbm {
    /// Tensors of `bytes` each (by index in the program's tensor table); nothing allocated
    /// until one is written. With `records`, each block keeps the record of its last access
    /// (else every [`Ready`] it sets has none).
    pub fn new(bytes: impl IntoIterator<Item = u64>, records: bool) -> Hbm {
        Hbm {
            tensors: bytes
                .into_iter()
                .map(|bytes| HbmTensor {
                    bytes,
                    writes: Blocks::default(),
                    reads: Blocks::default(),
                    page_writes: Vec::new(),
                    page_accesses: Vec::new(),
                })
                .collect(),
            records,
            journaling: false,
            journal: Vec::new(),
            saved: Blocks::default(),
        }
    }

    /// Whether tensor `t` is tracked (some instruction wrote it).
    pub fn tracked(&self, t: usize) -> bool {
        self.tensors.get(t).is_some_and(|ts| !ts.writes.is_empty())
    }

    /// When an access of `r` (tensor `t`) may start by its blocks alone (0: at once).
    pub fn wait_alone(&self, t: usize, r: &Resolved, write: bool) -> u64 {
        let mut ready = Ready::NONE;
        self.wait(t, r, write, &mut ready);
        ready.t
    }

    /// Starts (or stops) keeping what each mark changes, for [`Hbm::undo`]; starting again
    /// forgets what was kept. A tensor a mark starts tracking is not undone: only marks of
    /// tracked tensors may be journaled.
    pub fn journal(&mut self, on: bool) {
        self.journaling = on;
        self.journal.clear();
        self.saved.clear();
    }

    /// Stops journaling the next marks, keeping what was kept for [`Hbm::undo`].
    pub fn pause_journal(&mut self) {
        self.journaling = false;
    }

    /// Undoes the marks journaled since it started (the blocks' page bounds stay: they are
    /// bounds, not the blocks' times).
    pub fn undo(&mut self) {
        while let Some((t, b, n)) = self.journal.pop() {
            let at = self.saved.len() - 2 * n;
            if let Some(ts) = self.tensors.get_mut(t) {
                ts.writes.restore(b, &self.saved, at, n);
                ts.reads.restore(b, &self.saved, at + n, n);
            }
            self.saved.truncate(at);
        }
    }

    /// Raises `ready` for an access of `r` (HBM tensor `t`): a read waits for the writes of
    /// its blocks, a write also for their reads. Tensors never written cost nothing.
    pub fn wait(&self, t: usize, r: &Resolved, write: bool, ready: &mut Ready) {
        let Some(ts) = self.tensors.get(t) else {
            return;
        };
        if ts.writes.is_empty() {
            return;
        }
        let size = u64::from(r.dtype.size().max(1));
        let n = ts.writes.len();
        let pages = if write {
            &ts.page_accesses
        } else {
            &ts.page_writes
        };
        for_each_run(r, |start, len| {
            let (b0, b1) = blocks(start, len, size, n);
            let mut from = b0;
            while from < b1 {
                let page = from >> HBM_PAGE_SHIFT;
                let to = ((page + 1) << HBM_PAGE_SHIFT).min(b1);
                // No block of a page whose bound is not after `ready` can raise it.
                if pages.get(page).is_some_and(|&t| t > ready.t) {
                    ts.writes.wait(write.then_some(&ts.reads), from..to, ready);
                }
                from = to;
            }
        });
    }

    /// Records an access of `r` (tensor `t`) completing at `cell.t`. Reads of a tensor that
    /// was never written are not recorded: nothing can wait for them.
    pub fn mark(&mut self, t: usize, r: &Resolved, write: bool, cell: Cell) {
        let Some(ts) = self.tensors.get_mut(t) else {
            return;
        };
        if ts.writes.is_empty() {
            if !write {
                return;
            }
            let n = usize::try_from(ts.bytes.div_ceil(1 << HBM_BLOCK_SHIFT))
                .unwrap_or(0)
                .max(1);
            ts.writes = Blocks::new(n, self.records);
            ts.reads = Blocks::new(n, self.records);
            let pages = n.div_ceil(1 << HBM_PAGE_SHIFT);
            ts.page_writes = vec![0; pages];
            ts.page_accesses = vec![0; pages];
        }
        let size = u64::from(r.dtype.size().max(1));
        let n = ts.writes.len();
        let HbmTensor {
            writes,
            reads,
            page_writes,
            page_accesses,
            ..
        } = ts;
        let mut journal = self
            .journaling
            .then_some((&mut self.journal, &mut self.saved));
        for_each_run(r, |start, len| {
            let (b0, b1) = blocks(start, len, size, n);
            if b0 >= b1 {
                return;
            }
            if let Some((j, saved)) = journal.as_mut() {
                j.push((t, b0, b1 - b0));
                writes.save(b0..b1, saved);
                reads.save(b0..b1, saved);
            }
            if write {
                writes.set(b0..b1, cell);
            }
            reads.later(b0..b1, cell);
            for page in (b0 >> HBM_PAGE_SHIFT)..=((b1 - 1) >> HBM_PAGE_SHIFT) {
                if write && let Some(t) = page_writes.get_mut(page) {
                    *t = (*t).max(cell.t);
                }
                if let Some(t) = page_accesses.get_mut(page) {
                    *t = (*t).max(cell.t);
                }
            }
        });
    }
}

/// The blocks (clamped to `n`) of elements `start..start + len` of `size` bytes.
fn blocks(start: i64, len: u64, size: u64, n: usize) -> (usize, usize) {
    let lo = (start.max(0) as u64).saturating_mul(size);
    let hi = (start.max(0) as u64)
        .saturating_add(len)
        .saturating_mul(size);
    let b0 = usize::try_from(lo >> HBM_BLOCK_SHIFT).unwrap_or(usize::MAX);
    let b1 = usize::try_from((hi.saturating_sub(1) >> HBM_BLOCK_SHIFT) + 1).unwrap_or(usize::MAX);
    (b0.min(n), b1.min(n))
}

/// Calls `f(start, len)` for each contiguous run of elements of an operand (at most
/// [`MAX_RUNS`] calls; an access with more runs is given as its bounding range).
fn for_each_run(r: &Resolved, mut f: impl FnMut(i64, u64)) {
    if !matches!(r.loc, Loc::Hbm(_) | Loc::Sbuf | Loc::Psum) {
        return;
    }
    // The dimensions of size above 1, outermost first.
    let mut dims = [(0u64, 0i64); 5];
    let mut rank = 0;
    for (&n, &s) in r.dims.iter().zip(&r.pattern.strides) {
        if n > 1 {
            dims[rank] = (n as u64, s as i64);
            rank += 1;
        }
    }
    // Merge the innermost contiguous dimensions into the run.
    let mut run = 1u64;
    while rank > 0 && dims[rank - 1].1 == run as i64 {
        run = run.saturating_mul(dims[rank - 1].0);
        rank -= 1;
    }
    let base = r.pattern.base as i64;
    let outer: u64 = dims[..rank]
        .iter()
        .fold(1u64, |a, &(n, _)| a.saturating_mul(n));
    if outer as usize > MAX_RUNS || outer > MAX_RUNS as u64 {
        // The bounding range of every element.
        let (mut lo, mut hi) = (base, base.saturating_add(run as i64 - 1));
        for &(n, s) in &dims[..rank] {
            let ext = (n as i64 - 1).saturating_mul(s);
            if ext > 0 {
                hi = hi.saturating_add(ext);
            } else {
                lo = lo.saturating_add(ext);
            }
        }
        f(lo, (hi.saturating_sub(lo) as u64).saturating_add(1));
        return;
    }
    let mut idx = [0u64; 5];
    loop {
        let mut start = base;
        for (&i, &(_, s)) in idx[..rank].iter().zip(&dims[..rank]) {
            start = start.saturating_add((i as i64).saturating_mul(s));
        }
        f(start, run);
        // Advance the odometer.
        let mut d = rank;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < dims[d].0 {
                break;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operand::Pattern;
    use nki_lang::{DType, Dir};

    fn sbuf(base: isize, dims: [usize; 5], strides: [isize; 5]) -> Resolved {
        Resolved {
            slot: 0,
            dir: Dir::Read,
            loc: Loc::Sbuf,
            dtype: DType::Bf16,
            pattern: Pattern { base, strides },
            dims,
        }
    }

    /// The waits and marks of a region spanning every quadrant (one slice of cells) agree with
    /// those of the same cells visited one by one, block by block and quadrant by quadrant, in
    /// time and in which record set it (the first cell, in that order, with the latest time).
    #[test]
    fn whole_row_regions_wait_and_mark_as_cell_by_cell() {
        let mut m = OnChip::new(4096, 4096, 1, BLOCK_SHIFT);
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        let blocks = m.blocks;
        for round in 0..200u32 {
            // Partial regions mark random cells (few distinct times: ties between cells).
            let (q0, b0) = (next() as usize % QUADS, next() as usize % blocks);
            let part = Region {
                base: 0,
                q0,
                q1: q0 + 1 + next() as usize % (QUADS - q0),
                b0,
                b1: b0 + 1 + next() as usize % (blocks - b0).min(4),
            };
            let cell = Cell {
                t: next() % 8,
                who: round,
                pe: false,
            };
            if next() % 2 == 0 {
                m.mark_write(part, cell);
            } else {
                m.mark_read(part, cell);
            }
            let b0 = next() as usize % blocks;
            let whole = Region {
                base: 0,
                q0: 0,
                q1: QUADS,
                b0,
                b1: b0 + 1 + next() as usize % (blocks - b0).min(6),
            };
            let c = Consumer {
                pe: false,
                pe_latency: 0,
            };
            let start = Ready {
                t: next() % 6,
                who: 1_000_000,
            };
            for write in [false, true] {
                let mut want = start;
                for b in whole.b0..whole.b1 {
                    for q in 0..QUADS {
                        let i = b * QUADS + q;
                        want.merge(m.writes[i].t, m.writes[i].who);
                        if write {
                            want.merge(m.reads[i].t, m.reads[i].who);
                        }
                    }
                }
                let mut got = start;
                if write {
                    m.wait_write(whole, c, &mut got);
                } else {
                    m.wait_read(whole, c, &mut got);
                }
                assert_eq!(
                    (got.t, got.who),
                    (want.t, want.who),
                    "round {round}, write {write}"
                );
            }
            // A whole-row mark leaves every cell as marking them one by one does.
            let mut by_cell = m.clone();
            let cell = Cell {
                t: next() % 8,
                who: 500 + round,
                pe: false,
            };
            let write = next() % 2 == 0;
            for b in whole.b0..whole.b1 {
                let row = Region {
                    base: 0,
                    q0: 0,
                    q1: 1,
                    b0: b,
                    b1: b + 1,
                };
                for q in 0..QUADS {
                    let one = Region {
                        q0: q,
                        q1: q + 1,
                        ..row
                    };
                    if write {
                        by_cell.mark_write(one, cell);
                    } else {
                        by_cell.mark_read(one, cell);
                    }
                }
            }
            if write {
                m.mark_write(whole, cell);
            } else {
                m.mark_read(whole, cell);
            }
            assert_eq!((&m.writes, &m.reads), (&by_cell.writes, &by_cell.reads));
        }
    }

    #[test]
    fn regions_of_tiles() {
        let m = OnChip::new(196_608, 196_608, 1, BLOCK_SHIFT);
        let part = 196_608 / 2;
        // [128, 512] bf16 at byte 0: 1 KiB = 16 blocks, all quadrants.
        let r = m.region(&sbuf(0, [128, 512, 1, 1, 1], [part, 1, 0, 0, 0]), 0, 0);
        assert_eq!(
            r,
            Region {
                base: 0,
                q0: 0,
                q1: 4,
                b0: 0,
                b1: 16
            }
        );
        // Partitions 64..96, bytes 2048..2112.
        let r = m.region(
            &sbuf(64 * part + 1024, [32, 32, 1, 1, 1], [part, 1, 0, 0, 0]),
            0,
            0,
        );
        assert_eq!(
            r,
            Region {
                base: 0,
                q0: 2,
                q1: 3,
                b0: 32,
                b1: 33
            }
        );
        // A pattern that is not one partition apart: the whole memory.
        let r = m.region(&sbuf(0, [128, 512, 1, 1, 1], [7, 1, 0, 0, 0]), 0, 0);
        assert_eq!(r.b1, m.blocks);
    }

    #[test]
    fn renamed_tiles_have_places_of_their_own() {
        // Two tiles at one address, each given its own place in a renamed space of 4 KiB per
        // partition: the second's region starts where the first's ends.
        let m = OnChip::new(196_608, 4096, 2, BLOCK_SHIFT);
        let part = 196_608 / 2;
        let tile = sbuf(0, [128, 512, 1, 1, 1], [part, 1, 0, 0, 0]);
        let first = m.region(&tile, 0, 0);
        let second = m.region(&tile, 0, 1024);
        assert_eq!((first.b0, first.b1), (0, 16));
        assert_eq!((second.b0, second.b1), (16, 32));
        // The second plane (a rotated buffer) lies past the first plane's 64 blocks.
        let rotated = m.region(&tile, 1, 1024);
        assert_eq!((rotated.base, rotated.b0), (64 * QUADS, 16));
    }

    #[test]
    fn read_after_write_and_write_after_read() {
        let mut m = OnChip::new(196_608, 196_608, 1, BLOCK_SHIFT);
        let part = 196_608 / 2;
        let a = m.region(&sbuf(0, [128, 512, 1, 1, 1], [part, 1, 0, 0, 0]), 0, 0);
        let b = m.region(&sbuf(1024, [128, 512, 1, 1, 1], [part, 1, 0, 0, 0]), 0, 0);
        let c = Consumer {
            pe: false,
            pe_latency: 0,
        };
        m.mark_write(
            a,
            Cell {
                t: 100,
                who: 1,
                pe: false,
            },
        );
        let mut ready = Ready::NONE;
        m.wait_read(b, c, &mut ready);
        assert_eq!(ready, Ready::NONE, "disjoint tiles");
        m.wait_read(a, c, &mut ready);
        assert_eq!(ready, Ready { t: 100, who: 1 });
        m.mark_read(
            a,
            Cell {
                t: 300,
                who: 2,
                pe: false,
            },
        );
        let mut ready = Ready::NONE;
        m.wait_read(a, c, &mut ready);
        assert_eq!(ready.t, 100, "reads do not wait for reads");
        m.wait_write(a, c, &mut ready);
        assert_eq!(ready, Ready { t: 300, who: 2 });
    }

    #[test]
    fn runs_of_hbm_accesses() {
        let mut r = sbuf(10, [4, 8, 1, 1, 1], [100, 1, 0, 0, 0]);
        r.loc = Loc::Hbm(0);
        let mut runs = Vec::new();
        for_each_run(&r, |s, l| runs.push((s, l)));
        assert_eq!(runs, vec![(10, 8), (110, 8), (210, 8), (310, 8)]);
        // Contiguous rows merge.
        let r2 = Resolved {
            dims: [4, 100, 1, 1, 1],
            ..r
        };
        runs.clear();
        for_each_run(&r2, |s, l| runs.push((s, l)));
        assert_eq!(runs, vec![(10, 400)]);
        // Too many runs: one bounding range.
        let r3 = Resolved {
            dims: [128, 64, 1, 1, 1],
            pattern: Pattern {
                base: 0,
                strides: [1, 128, 0, 0, 0],
            },
            ..r
        };
        runs.clear();
        for_each_run(&r3, |s, l| runs.push((s, l)));
        assert_eq!(runs, vec![(0, 8192)]);
        let mut h = Hbm::new([1 << 20], true);
        let cell = Cell {
            t: 5,
            who: 0,
            pe: false,
        };
        h.mark(0, &r, true, cell);
        let mut ready = Ready::NONE;
        h.wait(0, &r, false, &mut ready);
        assert_eq!(ready.t, 5);
    }

    /// The divisor's quotients are integer division's, at the edges of every multiple and
    /// across the 32-bit range, for SBUF's and PSUM's strides and others.
    #[test]
    fn divisor_quotients_are_division() {
        for d in [
            1usize,
            2,
            3,
            7,
            2048,
            16 << 10,
            192 << 10,
            196_607,
            1 << 31,
            (1 << 32) - 1,
        ] {
            let div = Divisor::new(d);
            let mut x: u64 = 0x9E37_79B9;
            let check = |n: u32| {
                assert_eq!(
                    u64::from(div.quotient(n)),
                    u64::from(n) / d as u64,
                    "{n} / {d}"
                )
            };
            for k in 0..2000u64 {
                let m = k.saturating_mul(d as u64);
                for n in [m.wrapping_sub(1), m, m + 1] {
                    if let Ok(n) = u32::try_from(n) {
                        check(n);
                    }
                }
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                check((x >> 32) as u32);
            }
            check(u32::MAX);
            check(0);
        }
    }

    /// Undoing journaled marks restores every block's time and record as they were before
    /// the journal started, with and without records, however the marks overlap.
    #[test]
    fn hbm_undo_restores_the_blocks() {
        for records in [true, false] {
            let mut h = Hbm::new([1 << 20], records);
            let row = |base: isize, rows: usize, len: usize| Resolved {
                slot: 0,
                dir: Dir::Write,
                loc: Loc::Hbm(0),
                dtype: DType::F32,
                pattern: Pattern {
                    base,
                    strides: [1000, 1, 0, 0, 0],
                },
                dims: [rows, len, 1, 1, 1],
            };
            let cell = |t: u64, who: u32| Cell { t, who, pe: false };
            h.mark(0, &row(0, 8, 900), true, cell(10, 1));
            h.mark(0, &row(300, 4, 500), false, cell(20, 2));
            let state = |h: &Hbm| {
                let ts = &h.tensors[0];
                (
                    ts.writes.t.clone(),
                    ts.writes.who.clone(),
                    ts.reads.t.clone(),
                    ts.reads.who.clone(),
                )
            };
            let before = state(&h);
            h.journal(true);
            h.mark(0, &row(100, 6, 700), true, cell(30, 3));
            h.mark(0, &row(50, 3, 2000), false, cell(25, 4));
            h.pause_journal();
            assert_ne!(state(&h), before);
            h.undo();
            assert_eq!(state(&h), before, "records {records}");
            // A mark after the pause is not undone.
            h.journal(true);
            h.pause_journal();
            h.mark(0, &row(0, 1, 10), true, cell(40, 5));
            let marked = state(&h);
            h.undo();
            assert_eq!(state(&h), marked);
            h.journal(false);
        }
    }

    /// The page bounds skip only blocks that cannot raise a wait, and a timing-only run's
    /// blocks keep only times: every wait equals one over a plain array of cells, marked
    /// block by block (with the records, or with none when they are not kept).
    #[test]
    fn hbm_page_bounds_change_no_wait() {
        for records in [true, false] {
            page_bounds_change_no_wait(records);
        }
    }

    fn page_bounds_change_no_wait(records: bool) {
        let mut h = Hbm::new([1 << 20], records);
        let access = |base: isize, rows: usize, row: usize, stride: isize| Resolved {
            slot: 1,
            dir: Dir::Read,
            loc: Loc::Hbm(0),
            dtype: DType::Bf16,
            pattern: Pattern {
                base,
                strides: [stride, 1, 0, 0, 0],
            },
            dims: [rows, row, 1, 1, 1],
        };
        // The reference: every block's last write and last read as cells.
        let n = (1usize << 20) >> HBM_BLOCK_SHIFT;
        let (mut writes, mut reads) = (vec![Cell::default(); n], vec![Cell::default(); n]);
        let naive =
            |writes: &[Cell], reads: &[Cell], r: &Resolved, write: bool, mut ready: Ready| {
                let who = |c: &Cell| if records { c.who } else { u32::MAX };
                for_each_run(r, |start, len| {
                    let (b0, b1) = blocks(start, len, 2, n);
                    for b in b0..b1 {
                        ready.merge(writes[b].t, who(&writes[b]));
                        if write {
                            ready.merge(reads[b].t, who(&reads[b]));
                        }
                    }
                });
                ready
            };
        // A deterministic sequence of accesses at scattered places and times.
        let mut x: u64 = 12345;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for i in 0..400u32 {
            let r = access(
                next(400_000) as isize,
                1 + next(64) as usize,
                1 + next(700) as usize,
                1 + next(3000) as isize,
            );
            let write = next(3) == 0;
            let start = Ready {
                t: next(4000),
                who: 7,
            };
            let mut ready = start;
            h.wait(0, &r, write, &mut ready);
            if h.tracked(0) {
                let expected = naive(&writes, &reads, &r, write, start);
                assert_eq!(ready, expected, "access {i}");
            }
            let cell = Cell {
                t: next(5000),
                who: i,
                pe: false,
            };
            h.mark(0, &r, write, cell);
            if h.tracked(0) {
                for_each_run(&r, |start, len| {
                    let (b0, b1) = blocks(start, len, 2, n);
                    for b in b0..b1 {
                        if write {
                            writes[b] = cell;
                        }
                        if cell.t >= reads[b].t {
                            reads[b] = cell;
                        }
                    }
                });
            }
        }
    }
}
