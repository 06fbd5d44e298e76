//! The dependency graph of a recorded launch, as the device respects it, and orders of its
//! steps that the graph allows (see the module documentation of `schedule`).

use std::collections::{BinaryHeap, HashMap};

use core::cmp::Reverse;

use nki_lang::{LoopKind, MAX_PIDS};

use super::record::{Place, Recording, Step};

/// The graph: for each step, the steps that must run before it (each earlier in program
/// order).
#[derive(Clone, Debug, Default)]
pub(super) struct Graph {
    /// Predecessors of each step.
    pub preds: Vec<Vec<u32>>,
}

/// One earlier access to a place.
#[derive(Copy, Clone, Debug)]
struct Seen {
    step: u32,
    instance: u32,
    accumulates: bool,
}

/// Whether the device must keep steps `a` (earlier) and `b` in program order when they touch
/// one tile instance or output in a conflicting way (one writes): unless they run in different
/// iterations of an `affine_range` loop (or in different SPMD instances), where NKI promises
/// independence; accumulations into one place (`both_accumulate`) keep their order there too.
fn ordered(loops: &[Vec<(u32, LoopKind)>], a: &Step, b: &Step, both_accumulate: bool) -> bool {
    if a.vars[..MAX_PIDS] != b.vars[..MAX_PIDS] {
        return both_accumulate;
    }
    let (la, lb) = (
        loops.get(a.pc as usize).map_or(&[][..], Vec::as_slice),
        loops.get(b.pc as usize).map_or(&[][..], Vec::as_slice),
    );
    for (d, (x, y)) in la.iter().zip(lb).enumerate() {
        if x.0 != y.0 {
            break;
        }
        if a.vars[MAX_PIDS + d] != b.vars[MAX_PIDS + d] {
            return match x.1 {
                LoopKind::Sequential => true,
                LoopKind::Affine => both_accumulate,
            };
        }
    }
    true
}

/// Builds the graph of `rec`: a step waits for every earlier step that touches the same tile
/// buffer or output in a conflicting way, when [`ordered`] says the device keeps them in
/// order; two instances of a tile rotating onto one buffer are always ordered (the buffer's
/// reuse is the compiler's, which waits for it). Accesses are compared per tile buffer and per
/// output, not per byte: more edges than the device has, never fewer.
pub(super) fn build(rec: &Recording, loops: &[Vec<(u32, LoopKind)>]) -> Graph {
    let n = rec.steps.len();
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    // Per buffer (tile, buffer) or output: the writes and the reads so far.
    let mut history: HashMap<(u32, u32), [Vec<Seen>; 2]> = HashMap::new();
    let mut marked: Vec<u32> = vec![u32::MAX; n];
    for (j, step) in rec.steps.iter().enumerate() {
        let jj = u32::try_from(j).unwrap_or(u32::MAX);
        for a in &step.accesses {
            let (key, instance) = match a.place {
                Place::Tile(id) => {
                    let inst = rec.instances[id as usize];
                    ((u32::from(inst.tile), inst.buffer), id)
                }
                Place::Output(o) => ((u32::MAX, u32::from(o)), u32::MAX),
            };
            let [writes, reads] = history.entry(key).or_default();
            // A read conflicts with the writes; a write with both.
            let conflicting = writes
                .iter()
                .chain(if a.writes { &reads[..] } else { &[][..] });
            for s in conflicting {
                if s.step == jj || marked[s.step as usize] == jj {
                    continue;
                }
                let earlier = &rec.steps[s.step as usize];
                let keep = s.instance != instance
                    || ordered(loops, earlier, step, s.accumulates && a.accumulates);
                if keep {
                    marked[s.step as usize] = jj;
                    preds[j].push(s.step);
                }
            }
            let seen = Seen {
                step: jj,
                instance,
                accumulates: a.accumulates,
            };
            if a.writes {
                writes.push(seen);
            } else {
                reads.push(seen);
            }
        }
    }
    Graph { preds }
}

/// How to choose among the steps whose predecessors all ran.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Policy {
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
    pub fn name(self) -> String {
        match self {
            Policy::Reverse => "reverse".to_string(),
            Policy::Lockstep => "lockstep".to_string(),
            Policy::LockstepReversed => "lockstep, iterations reversed".to_string(),
            Policy::LazySharedWrites => "shared writes last".to_string(),
            Policy::Random(seed) => format!("random, seed {seed}"),
        }
    }
}

/// SplitMix64: the next value of the stream in `state`.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An order of every step of `rec` that `g` allows, chosen by `policy`.
pub(super) fn order(rec: &Recording, g: &Graph, policy: Policy) -> Vec<u32> {
    let n = g.preds.len();
    let mut waiting: Vec<usize> = g.preds.iter().map(Vec::len).collect();
    let mut succs: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (j, p) in g.preds.iter().enumerate() {
        for &i in p {
            succs[i as usize].push(u32::try_from(j).unwrap_or(u32::MAX));
        }
    }
    // Ready steps keyed so that the heap's greatest is the next to run.
    let key = |s: u32| -> (Reverse<u32>, i64) {
        let step = &rec.steps[s as usize];
        let pc = step.pc;
        match policy {
            Policy::LazySharedWrites if step.shared_write => (Reverse(1), i64::from(s)),
            Policy::LazySharedWrites => (Reverse(0), -i64::from(s)),
            Policy::Reverse => (Reverse(0), i64::from(s)),
            Policy::Lockstep => (Reverse(pc), -i64::from(s)),
            Policy::LockstepReversed => (Reverse(pc), i64::from(s)),
            Policy::Random(_) => (Reverse(0), 0),
        }
    };
    let mut out = Vec::with_capacity(n);
    let mut rng = match policy {
        Policy::Random(seed) => seed,
        Policy::Reverse
        | Policy::Lockstep
        | Policy::LockstepReversed
        | Policy::LazySharedWrites => 0,
    };
    let roots = (0..n).filter(|&j| waiting[j] == 0);
    let roots = roots.map(|j| u32::try_from(j).unwrap_or(u32::MAX));
    if let Policy::Random(_) = policy {
        let mut ready: Vec<u32> = roots.collect();
        while !ready.is_empty() {
            let pick = (splitmix(&mut rng) % ready.len() as u64) as usize;
            let s = ready.swap_remove(pick);
            out.push(s);
            for &t in &succs[s as usize] {
                waiting[t as usize] -= 1;
                if waiting[t as usize] == 0 {
                    ready.push(t);
                }
            }
        }
        return out;
    }
    let mut heap: BinaryHeap<((Reverse<u32>, i64), u32)> = roots.map(|s| (key(s), s)).collect();
    while let Some((_, s)) = heap.pop() {
        out.push(s);
        for &t in &succs[s as usize] {
            waiting[t as usize] -= 1;
            if waiting[t as usize] == 0 {
                heap.push((key(t), t));
            }
        }
    }
    out
}
