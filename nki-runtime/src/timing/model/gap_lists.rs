//! An engine's idle gaps over a loop's period, for the fast-forward: how the list at a back
//! edge follows from the list a period before, and what it is `k` periods later.
//!
//! Over a steady period whose times all moved by Δ, a gap list `old` becomes `now` as
//!
//! ```text
//! old = …, F, C            (F: gaps no instruction of the period took; C: the tail)
//! now = F', C + Δ          (F' = old[e .. e + |F'|]: F and the first g gaps of C, unchanged)
//! ```
//!
//! where `e` gaps left the front to keep the window's size. The unchanged gaps are frozen: no
//! instruction of the period took them, and each instruction of the next period is one of
//! this period's, ready Δ later, so none fits in them either. The moved tail then plays C's
//! part in the next period, which freezes its first `g` gaps and appends `C + 2Δ`: the list
//! grows by `g` gaps a period (a loop whose engine idles once more per iteration) less the
//! `e` the window drops. `k` periods on, the list is
//!
//! ```text
//! F', (C+Δ)[..g], (C+2Δ)[..g], …, (C+kΔ)[..g], C + (k+1)Δ
//! ```
//!
//! without its first gaps as the window drops them: as many as over the compared period per
//! period when the list kept its length (its length changes then follow the same steps), none
//! when it grew without dropping (the caller bounds `k` so that it stays within the window).

use std::collections::VecDeque;

/// How one gap list went from a snapshot's to now over a period.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct ListStep {
    /// Gaps at the front, unchanged (F').
    pub frozen: usize,
    /// Gaps the list gains a period (`g`).
    pub grows: usize,
    /// Gaps dropped from its front over the period (`e`).
    pub evicted: u64,
}

/// How `now` follows from `old` over a period in which times moved by `delta` and `evicted`
/// gaps left the front, and the earliest start of the tail's gaps in `old` (`u64::MAX` with
/// none): `None` when it does not. Of the alignments, the one with the longest moved tail;
/// `frozen_ok` says whether an unchanged gap may stay.
pub(super) fn step(
    old: &VecDeque<(u64, u64)>,
    now: &VecDeque<(u64, u64)>,
    evicted: u64,
    delta: u64,
    frozen_ok: impl Fn((u64, u64)) -> bool,
) -> Option<(ListStep, u64)> {
    let e = usize::try_from(evicted).ok()?;
    // g = |now| + e - |old|; a list that dropped gaps kept its length.
    let grows = (now.len() + e).checked_sub(old.len())?;
    if e > 0 && grows != e {
        return None;
    }
    let moved = |a: (u64, u64)| Some((a.0.checked_add(delta)?, a.1.checked_add(delta)?));
    // The tail holds the `g` gaps the next period freezes, or is the whole list when a
    // period turns the window over (drops all it held).
    let longest = old.len().min(now.len());
    // Every candidate tail ends both lists: one is moved exactly when it is no longer than
    // the longest moved common end, found once.
    let moved_end = (old.iter().rev().zip(now.iter().rev()))
        .take_while(|&(&a, &b)| moved(a) == Some(b))
        .count();
    (grows.min(longest)..=longest.min(moved_end))
        .rev()
        .find_map(|tail| {
            let frozen = now.len() - tail;
            if frozen > 0 && e + frozen > old.len() {
                return None;
            }
            let same = (0..frozen).all(|i| now[i] == old[e + i] && frozen_ok(now[i]));
            same.then(|| {
                let floor = old.range(old.len() - tail..).map(|g| g.0).min();
                (
                    ListStep {
                        frozen,
                        grows,
                        evicted,
                    },
                    floor.unwrap_or(u64::MAX),
                )
            })
        })
}

/// Moves `list` (the `now` of [`step`]) on by `k` periods of `delta` (the caller keeps the
/// times far from `u64`'s end: they saturate there).
pub(super) fn extrapolate(list: &mut VecDeque<(u64, u64)>, s: ListStep, k: u64, delta: u64) {
    let shift = |g: (u64, u64), j: u64| {
        let d = j.saturating_mul(delta);
        (g.0.saturating_add(d), g.1.saturating_add(d))
    };
    let tail: Vec<(u64, u64)> = list.range(s.frozen..).copied().collect();
    // The gaps frozen by the periods: the first `g` of the tail, moved by 0, Δ, …, (k-1)Δ.
    let g = s.grows as u64;
    let blocks = k.saturating_mul(g);
    // The gaps before the last tail the window keeps: as many as now in a list that dropped
    // gaps (its length does not change), all of them in one that did not.
    let room = if s.evicted > 0 {
        s.frozen as u64
    } else {
        (s.frozen as u64).saturating_add(blocks)
    };
    let from = blocks.saturating_sub(room);
    let front = (from..blocks).map(|i| shift(tail[(i % g) as usize], i / g));
    let kept = room.saturating_sub(blocks - from);
    list.truncate(s.frozen);
    while list.len() as u64 > kept {
        list.pop_front();
    }
    list.extend(front);
    list.extend(tail.iter().map(|&t| shift(t, k)));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Period `j` of a toy engine that idles `per` times an iteration, in a window of `max`:
    /// `per` gaps, those of period `j - 1` moved by `delta`.
    fn run(
        list: &mut VecDeque<(u64, u64)>,
        evicted: &mut u64,
        (per, delta, max): (u64, u64, usize),
        j: u64,
    ) {
        for i in 0..per {
            let a = j * delta + 1 + 3 * i;
            list.push_back((a, a + 2));
            if list.len() > max {
                list.pop_front();
                *evicted += 1;
            }
        }
    }

    /// Every step found over a period extrapolates to what running the periods gives,
    /// growing and at the window's size.
    #[test]
    fn extrapolation_is_running_the_periods() {
        for per in [1, 2, 3, 9] {
            for max in [8, 32] {
                let toy = (per, 100, max);
                for start in 0..12 {
                    let (mut old, mut ev) = (VecDeque::new(), 0);
                    for j in 0..start {
                        run(&mut old, &mut ev, toy, j);
                    }
                    let mut now = old.clone();
                    let mut ev_now = ev;
                    run(&mut now, &mut ev_now, toy, start);
                    let Some((s, _)) = step(&old, &now, ev_now - ev, 100, |_| true) else {
                        // Before the first full period there is no tail to move; a list that
                        // reaches the window's size within the period has no steady length.
                        let filling = ev_now > ev && now.len() != old.len();
                        assert!(
                            old.is_empty() || filling,
                            "per {per}, max {max}, start {start}"
                        );
                        continue;
                    };
                    for k in 0..6u64 {
                        let (mut real, mut e) = (now.clone(), 0);
                        for j in 0..k {
                            run(&mut real, &mut e, toy, start + 1 + j);
                        }
                        if s.evicted == 0 && now.len() + (k as usize) * s.grows > max {
                            // Beyond the window the caller does not extrapolate a growing list.
                            continue;
                        }
                        let mut fast = now.clone();
                        extrapolate(&mut fast, s, k, 100);
                        assert_eq!(fast, real, "per {per}, max {max}, start {start}, k {k}");
                    }
                }
            }
        }
    }

    /// A gap taken within the period, or moved by another Δ, is no step.
    #[test]
    fn a_changed_gap_is_no_step() {
        let old: VecDeque<(u64, u64)> = [(1, 3), (13, 15)].into();
        let taken: VecDeque<(u64, u64)> = [(1, 2), (13, 15), (25, 27)].into();
        assert_eq!(step(&old, &taken, 0, 12, |_| true), None);
        let other: VecDeque<(u64, u64)> = [(1, 3), (13, 15), (26, 28)].into();
        assert_eq!(step(&old, &other, 0, 12, |_| true), None);
        let grown: VecDeque<(u64, u64)> = [(1, 3), (13, 15), (25, 27)].into();
        assert!(step(&old, &grown, 0, 12, |_| true).is_some());
        // Frozen gaps refused: only a list moved whole is a step.
        assert_eq!(step(&old, &grown, 0, 12, |_| false), None);
        let whole: VecDeque<(u64, u64)> = [(13, 15), (25, 27)].into();
        assert!(step(&old, &whole, 0, 12, |_| false).is_some());
    }
}
