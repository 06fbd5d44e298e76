//! Packings of matmul operands kept for reuse, keyed by the host memory they were packed
//! from: host state, apart from the numerics of [`crate::cpu::matmul`], which are stateless.

use nki_lang::DType;

use crate::cpu::matmul::{MovingPacking, Operand, OwnedPacking, PackedMoving, PackedStationary};
use crate::cpu::{AlignedBuf, Isa};

/// Packings of operands that cannot change while they are reused: the operands a matmul reads
/// straight from an input tensor, which no instruction writes during a launch. The first
/// matmul to read an operand packs it into a slot; later ones of the same elements (the tiled
/// matmul's operands, each read by every block of the other side's tiles) find it there.
/// Every slot's memory is allocated with the cache, so filling one never allocates (a worker
/// thread's cache may first be filled at any launch: whenever that thread first gets its vCPU
/// in time to take its half of a matmul); once all are used, a new packing replaces the oldest
/// one. Each packing is of an operand of a given version of its memory,
/// or of no version. [`PackCache::forget_unversioned`] forgets the packings of no version: the
/// caller runs it whenever unversioned memory may have changed (at the start of each launch),
/// and gives a version only to memory whose every change gives it a new one (a
/// [`crate::DeviceTensor`]'s). [`PackCache::clear`] forgets every packing. Keep one cache for
/// moving operands and one for stationary ones.
pub(crate) struct PackCache {
    slots: Vec<Slot>,
    /// The memory of the slots not yet filled, one buffer each.
    spare: Vec<AlignedBuf>,
    /// Slots holding a packing (the first ones).
    used: usize,
    capacity: usize,
    /// The slot the next packing replaces once every slot is used (the oldest packing).
    oldest: usize,
    /// Operands last asked for by [`PackCache::moving_reused`] and not held, the latest at
    /// `seen_next - 1` (a ring).
    seen: [Option<OperandKey>; SEEN],
    seen_next: usize,
}

/// Operands [`PackCache::moving_reused`] remembers having been asked for: a few more than the
/// distinct moving operands a blocked matmul's inner loops cycle through before one comes back
/// (the matmul tutorial's eight `[128, 512]` tiles of a block of `K`).
const SEEN: usize = 12;

/// One cached packing: what it packs, and the packing.
struct Slot {
    key: OperandKey,
    packed: OwnedPacking,
}

/// The elements an operand reads: its memory (by address, length and version) and its place
/// and shape in it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct OperandKey {
    data: (usize, usize),
    version: Option<u64>,
    dtype: DType,
    offset: usize,
    row_stride: usize,
    rows: usize,
    cols: usize,
}

impl OperandKey {
    fn of(op: &Operand, version: Option<u64>) -> OperandKey {
        OperandKey {
            data: (op.data.as_ptr() as usize, op.data.len()),
            version,
            dtype: op.dtype,
            offset: op.offset,
            row_stride: op.row_stride,
            rows: op.rows,
            cols: op.cols,
        }
    }
}

impl PackCache {
    /// An empty cache of at most `capacity` packings of moving operands, their memory
    /// allocated now.
    pub(crate) fn moving_operands(capacity: usize) -> PackCache {
        PackCache::with_buffers(capacity, OwnedPacking::moving_buffer)
    }

    /// An empty cache of at most `capacity` packings of stationary operands, their memory
    /// allocated now.
    pub(crate) fn stationary_operands(capacity: usize) -> PackCache {
        PackCache::with_buffers(capacity, OwnedPacking::stationary_buffer)
    }

    fn with_buffers(capacity: usize, buffer: fn() -> AlignedBuf) -> PackCache {
        PackCache {
            slots: Vec::with_capacity(capacity),
            spare: (0..capacity).map(|_| buffer()).collect(),
            used: 0,
            capacity,
            oldest: 0,
            seen: [None; SEEN],
            seen_next: 0,
        }
    }

    /// Forgets every packing (and keeps the slots' memory).
    #[cfg(test)]
    pub(crate) fn clear(&mut self) {
        self.used = 0;
        self.oldest = 0;
    }

    /// Forgets the packings of operands of no version (and keeps the slots' memory).
    pub(crate) fn forget_unversioned(&mut self) {
        let mut kept = 0;
        for at in 0..self.used {
            if self.slots[at].key.version.is_some() {
                self.slots.swap(kept, at);
                kept += 1;
            }
        }
        if kept < self.used {
            self.used = kept;
            self.oldest = 0;
        }
    }

    /// The slot holding `op`'s packing in layout `packing`, or the slot that `fill` packs it
    /// into (or `new` packs it into, in a slot's buffer, for a slot never filled): that of a packing of the same
    /// elements at another version, else a free slot, else the oldest packing's; `None` for a
    /// cache without slots.
    fn get(
        &mut self,
        op: &Operand,
        version: Option<u64>,
        packing: MovingPacking,
        new: impl FnOnce(AlignedBuf) -> OwnedPacking,
        fill: impl FnOnce(&mut OwnedPacking),
    ) -> Option<&OwnedPacking> {
        let key = OperandKey::of(op, version);
        let found = self.slots[..self.used]
            .iter()
            .position(|s| s.key == key && s.packed.layout() == packing);
        // A packing of the same elements at another version is of what the memory held before:
        // the new one takes its slot.
        let stale = || {
            self.slots[..self.used]
                .iter()
                .position(|s| s.key.version != version && OperandKey { version, ..s.key } == key)
        };
        let at = match found {
            Some(at) => at,
            None if self.capacity == 0 => return None,
            None => {
                let at = if let Some(at) = stale() {
                    at
                } else if self.used < self.capacity {
                    self.used += 1;
                    self.used - 1
                } else {
                    let at = self.oldest;
                    self.oldest = (at + 1) % self.capacity;
                    at
                };
                if at == self.slots.len() {
                    // Within the capacity reserved by the constructor, which left a buffer for
                    // each slot.
                    let buf = self.spare.pop().expect("a buffer for each slot");
                    self.slots.push(Slot {
                        key,
                        packed: new(buf),
                    });
                } else {
                    let slot = &mut self.slots[at];
                    slot.key = key;
                    fill(&mut slot.packed);
                }
                at
            }
        };
        Some(&self.slots[at].packed)
    }

    /// `moving`'s packing in layout `packing` (from [`crate::cpu::matmul::shared_packing`] for `isa`), every column
    /// of it: from the cache, or packed into a slot now. `None` for a cache without slots. The
    /// caller guarantees that `moving`'s memory is at `version` (each of its changes gives it a
    /// new one), or, for `None`, that its elements have not changed since the last
    /// [`PackCache::forget_unversioned`].
    pub(crate) fn moving(
        &mut self,
        isa: Isa,
        packing: MovingPacking,
        moving: &Operand,
        version: Option<u64>,
    ) -> Option<PackedMoving<'_>> {
        let new = |buf| OwnedPacking::moving(buf, isa, packing, moving);
        let fill = |p: &mut OwnedPacking| p.pack_moving(isa, packing, moving);
        self.get(moving, version, packing, new, fill)?.as_moving()
    }

    /// `moving`'s packing in layout `packing`, as [`PackCache::moving`] at `version` (which
    /// the caller guarantees as there), but kept only for operands that are read again: held,
    /// or packed into a slot now when this was asked for it before at the same version (and
    /// it was not held); else `None`, the operand remembered, for the caller to pack it
    /// elsewhere. Operands read once (most of SBUF's) then neither pass through the cache's
    /// memory nor push out the packings of those read many times.
    pub(crate) fn moving_reused(
        &mut self,
        isa: Isa,
        packing: MovingPacking,
        moving: &Operand,
        version: u64,
    ) -> Option<PackedMoving<'_>> {
        let key = OperandKey::of(moving, Some(version));
        let held = self.slots[..self.used]
            .iter()
            .any(|s| s.key == key && s.packed.layout() == packing);
        if !held {
            match self.seen.iter().position(|k| *k == Some(key)) {
                Some(at) => self.seen[at] = None,
                None => {
                    self.seen[self.seen_next] = Some(key);
                    self.seen_next = (self.seen_next + 1) % SEEN;
                    return None;
                }
            }
        }
        self.moving(isa, packing, moving, Some(version))
    }

    /// The packing of `op` in layout `packing` at `version` that the cache holds, if it does
    /// (nothing is packed).
    fn held(
        &self,
        op: &Operand,
        version: Option<u64>,
        packing: MovingPacking,
    ) -> Option<&OwnedPacking> {
        let key = OperandKey::of(op, version);
        self.slots[..self.used]
            .iter()
            .find(|s| s.key == key && s.packed.layout() == packing)
            .map(|s| &s.packed)
    }

    /// `moving`'s packing in layout `packing` at `version`, if the cache holds it: what
    /// [`PackCache::moving`] or [`PackCache::moving_reused`] packed, found without a change to
    /// the cache, so that several can be read at once.
    pub(crate) fn held_moving(
        &self,
        packing: MovingPacking,
        moving: &Operand,
        version: Option<u64>,
    ) -> Option<PackedMoving<'_>> {
        self.held(moving, version, packing)?.as_moving()
    }

    /// `stationary`'s packing, as [`PackCache::held_moving`] for a stationary operand.
    pub(crate) fn held_stationary(
        &self,
        packing: MovingPacking,
        stationary: &Operand,
        version: Option<u64>,
    ) -> Option<PackedStationary<'_>> {
        self.held(stationary, version, packing)?.as_stationary()
    }

    /// `stationary`'s packing, as [`PackCache::moving`] for a stationary operand.
    pub(crate) fn stationary(
        &mut self,
        isa: Isa,
        packing: MovingPacking,
        stationary: &Operand,
        version: Option<u64>,
    ) -> Option<PackedStationary<'_>> {
        let new = |buf| OwnedPacking::stationary(buf, isa, packing, stationary);
        let fill = |p: &mut OwnedPacking| p.pack_stationary(isa, packing, stationary);
        self.get(stationary, version, packing, new, fill)?
            .as_stationary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::matmul::tests::{
        Case, Kind, PORTABLE, PSUM_OFFSET, PSUM_STRIDE, assert_same_bits,
    };
    use crate::cpu::matmul::{Output, matmul_prepacked, shared_packing};

    /// Packings from a [`PackCache`] compute [`matmul`]'s bits, whether packed now or found
    /// again; once every slot is used, the oldest packing gives way; after
    /// [`PackCache::clear`], an operand whose bytes changed in place is packed anew.
    #[test]
    fn cached_packings_give_the_bits_of_fresh_ones() {
        for isa in Isa::supported() {
            for dt in [(DType::Bf16, DType::Bf16), (DType::F32, DType::Bf16)] {
                let mut case = Case::new(77, dt, 64, 24, 100, Kind::Normal);
                let (st, mv) = case.operands();
                let Some(packing) = shared_packing(isa, &st, &mv) else {
                    continue;
                };
                let mut moving = PackCache::moving_operands(2);
                let mut stationary = PackCache::stationary_operands(2);
                let run = |case: &Case, moving: &mut PackCache, stationary: &mut PackCache| {
                    let (st, mv) = case.operands();
                    let mut psum = case.psum.clone();
                    let mut out = Output {
                        data: &mut psum,
                        offset: PSUM_OFFSET,
                        row_stride: PSUM_STRIDE,
                    };
                    let b = moving.moving(isa, packing, &mv, None).unwrap();
                    let a = stationary.stationary(isa, packing, &st, None).unwrap();
                    matmul_prepacked(isa, &a, &b, &mut out, None, false);
                    psum
                };
                let what = format!("{isa:?} {dt:?}");
                let want = case.run(PORTABLE, false, 0..100);
                assert_same_bits(&run(&case, &mut moving, &mut stationary), &want, &what);
                // Found again.
                assert_same_bits(&run(&case, &mut moving, &mut stationary), &want, &what);
                // Two other operands (views one row further in) take both slots...
                for shift in [1, 2] {
                    let mut other = Case::new(77, dt, 64, 24, 100, Kind::Normal);
                    other.st.1 += shift * other.st.2;
                    other.mv.1 += shift * other.mv.2;
                    other.k -= 2;
                    let want = other.run(PORTABLE, false, 0..100);
                    let got = run(&other, &mut moving, &mut stationary);
                    assert_same_bits(&got, &want, &what);
                }
                // ... so the first is packed again, and its bytes changed in place after a
                // clear are packed anew too.
                assert_same_bits(&run(&case, &mut moving, &mut stationary), &want, &what);
                let fresh = Case::new(78, dt, 64, 24, 100, Kind::Normal);
                moving.clear();
                stationary.clear();
                case.st.0.copy_from_slice(&fresh.st.0);
                case.mv.0.copy_from_slice(&fresh.mv.0);
                let new_want = case.run(PORTABLE, false, 0..100);
                assert_ne!(new_want, want, "the new bytes give new results");
                assert_same_bits(&run(&case, &mut moving, &mut stationary), &new_want, &what);
            }
        }
    }
}
