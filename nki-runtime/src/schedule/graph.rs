//! The dependency graph of a recorded launch, as the device respects it, and orders of its
//! steps that the graph allows (see the module documentation of `schedule`).

use std::collections::{BinaryHeap, HashMap};

use core::cmp::Reverse;

use nki_lang::schedule_control::ControlPlan;
use nki_lang::{LoopKind, MAX_PIDS};

use super::record::{Place, Recording, Step};
use crate::strict::schedule::Policy;

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
                LoopKind::Sequential | LoopKind::Dynamic { .. } | LoopKind::While { .. } => true,
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
///
/// The program's scheduling control adds its edges ([`ControlPlan`]): a step waits for the
/// latest step of each instruction a `with_schedule` edge makes it depend on, and for the
/// previous step of its `no_reorder!` block, within its SPMD instance.
pub(super) fn build(
    rec: &Recording,
    loops: &[Vec<(u32, LoopKind)>],
    control: &ControlPlan,
) -> Graph {
    let n = rec.steps.len();
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    // By pc, and by `no_reorder!` block: the latest step (when the control orders anything).
    let mut latest: Vec<u32> = Vec::new();
    let mut block_latest: Vec<u32> = vec![u32::MAX; control.blocks()];
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
                Place::Generator => ((u32::MAX - 1, 0), u32::MAX - 1),
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
                // Each instance's generator counts its calls in program order.
                let keep = match a.place {
                    Place::Generator => earlier.vars[..MAX_PIDS] == step.vars[..MAX_PIDS],
                    Place::Tile(_) | Place::Output(_) => {
                        s.instance != instance
                            || ordered(loops, earlier, step, s.accumulates && a.accumulates)
                    }
                };
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
        if control.orders() {
            let pc = step.pc as usize;
            if latest.len() <= pc {
                latest.resize(pc.saturating_add(1), u32::MAX);
            }
            let block = control.block(pc);
            let waited = control
                .waits(pc)
                .iter()
                .filter_map(|&q| latest.get(q as usize).copied())
                .chain(block.and_then(|b| block_latest.get(b).copied()));
            let mut extra = Vec::new();
            for i in waited {
                let same_instance = rec
                    .steps
                    .get(i as usize)
                    .is_some_and(|e| e.vars[..MAX_PIDS] == step.vars[..MAX_PIDS]);
                if i != u32::MAX && i != jj && same_instance && marked[i as usize] != jj {
                    marked[i as usize] = jj;
                    extra.push(i);
                }
            }
            preds[j].extend(extra);
            latest[pc] = jj;
            if let Some(b) = block.and_then(|b| block_latest.get_mut(b)) {
                *b = jj;
            }
        }
    }
    Graph { preds }
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

#[cfg(test)]
mod tests {
    use super::super::record::{Access, Instance, Place, Recording, Step};
    use super::*;
    use nki_lang::MAX_VARS;

    /// A step at `pc` with loop value `i` (depth 0) touching `accesses`.
    fn step(pc: u32, i: i64, accesses: &[(Place, bool, bool, bool)]) -> Step {
        let mut vars = [0i64; MAX_VARS];
        vars[MAX_PIDS] = i;
        Step {
            pc,
            vars,
            accesses: accesses
                .iter()
                .map(|&(place, reads, writes, accumulates)| Access {
                    place,
                    reads,
                    writes,
                    accumulates,
                })
                .collect(),
            shared_write: false,
        }
    }

    /// A tile `t` written before a two-iteration loop (`kind`, begin at pc 1), written and
    /// read in each iteration (pcs 2, 3; pc 3 also writes an output, and accumulates into
    /// tile `u` when `acc`), and the output read after the loop (pc 5).
    fn program(kind: LoopKind, acc: bool) -> (Recording, Vec<Vec<(u32, LoopKind)>>) {
        let lp = vec![(1, kind)];
        let loops = vec![vec![], vec![], lp.clone(), lp, vec![], vec![]];
        let (t, u, o) = (Place::Tile(0), Place::Tile(1), Place::Output(0));
        let body = |i| {
            vec![
                step(2, i, &[(t, false, true, false)]),
                step(
                    3,
                    i,
                    &[
                        (t, true, false, false),
                        (o, false, true, false),
                        (u, true, true, acc),
                    ],
                ),
            ]
        };
        let mut steps = vec![step(
            0,
            0,
            &[(t, false, true, false), (u, false, true, false)],
        )];
        steps.extend(body(0));
        steps.extend(body(1));
        steps.push(step(5, 0, &[(o, true, false, false)]));
        let instances = vec![
            Instance { tile: 0, buffer: 0 },
            Instance { tile: 1, buffer: 0 },
        ];
        (Recording { steps, instances }, loops)
    }

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v
    }

    #[test]
    fn affine_iterations_are_unordered_but_for_accumulations() {
        let (rec, loops) = program(LoopKind::Affine, false);
        let g = build(&rec, &loops, &ControlPlan::default());
        let preds: Vec<Vec<u32>> = g.preds.into_iter().map(sorted).collect();
        // Steps: 0 before the loop, 1-2 iteration 0, 3-4 iteration 1, 5 after.
        assert_eq!(
            preds,
            [vec![], vec![0], vec![0, 1], vec![0], vec![0, 3], vec![2, 4]]
        );
        // Accumulating into `u` in both iterations keeps them ordered.
        let (rec, loops) = program(LoopKind::Affine, true);
        let preds: Vec<Vec<u32>> = build(&rec, &loops, &ControlPlan::default())
            .preds
            .into_iter()
            .map(sorted)
            .collect();
        assert_eq!(preds[4], [0, 2, 3]);
    }

    #[test]
    fn sequential_iterations_are_ordered() {
        let (rec, loops) = program(LoopKind::Sequential, false);
        let preds: Vec<Vec<u32>> = build(&rec, &loops, &ControlPlan::default())
            .preds
            .into_iter()
            .map(sorted)
            .collect();
        assert_eq!(preds[3], [0, 1, 2]);
        // No transitive reduction: the first iteration's write of `t` is there too.
        assert_eq!(preds[4], [0, 1, 2, 3]);
    }

    #[test]
    fn instances_sharing_a_buffer_are_ordered() {
        // Tile 0 declared in the loop: one instance per iteration, both on buffer 0.
        let (mut rec, loops) = program(LoopKind::Affine, false);
        rec.instances.push(Instance { tile: 0, buffer: 0 });
        for s in &mut rec.steps[3..5] {
            for a in &mut s.accesses {
                if a.place == Place::Tile(0) {
                    a.place = Place::Tile(2);
                }
            }
        }
        let preds: Vec<Vec<u32>> = build(&rec, &loops, &ControlPlan::default())
            .preds
            .into_iter()
            .map(sorted)
            .collect();
        assert_eq!(preds[3], [0, 1, 2]);
        // On buffers of their own, the iterations are independent.
        rec.instances[2].buffer = 1;
        let preds: Vec<Vec<u32>> = build(&rec, &loops, &ControlPlan::default())
            .preds
            .into_iter()
            .map(sorted)
            .collect();
        assert_eq!(preds[3], Vec::<u32>::new());
    }

    #[test]
    fn every_policy_gives_an_order_the_graph_allows() {
        let (rec, loops) = program(LoopKind::Affine, false);
        let g = build(&rec, &loops, &ControlPlan::default());
        let policies = [
            Policy::Reverse,
            Policy::Lockstep,
            Policy::LockstepReversed,
            Policy::LazySharedWrites,
            Policy::Random(1),
            Policy::Random(2),
        ];
        let mut seen = Vec::new();
        for policy in policies {
            let o = order(&rec, &g, policy);
            assert_eq!(sorted(o.clone()), [0, 1, 2, 3, 4, 5], "{policy:?}");
            let at = |s: u32| o.iter().position(|&x| x == s).unwrap();
            for (j, p) in g.preds.iter().enumerate() {
                for &i in p {
                    assert!(at(i) < at(j as u32), "{policy:?}: {o:?}");
                }
            }
            seen.push(o);
        }
        // Reverse runs iteration 1 first; lockstep runs both writes of `t` before either read.
        assert_eq!(seen[0], [0, 3, 4, 1, 2, 5]);
        assert_eq!(seen[1], [0, 1, 3, 2, 4, 5]);
        assert_eq!(seen[2], [0, 3, 1, 4, 2, 5]);
    }
}
