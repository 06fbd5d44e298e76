//! Live ranges of tiles and their SBUF/PSUM addresses.

use crate::buf::ProgramBuf;
use crate::ir::{Instr, LoopControl, TileView, Write};
use crate::rules::RuleViolation;
use crate::target::{Memory, PSUM_BANK_BYTES, PSUM_BANKS, SBUF_ALIGN};

/// The instruction interval `[first, last]` over which each tile must keep its value, or
/// `None` for a tile no instruction uses. `views` is the program's view pool.
///
/// A tile used inside a loop and also outside it (a value carried into, across or out of the
/// iterations) lives for the whole loop; so does the destination of an accumulating
/// instruction over the loops its sum spans (an accumulation group's loops; every enclosing
/// loop for a plain accumulation). A tile used only within one iteration lives only there.
pub fn live_ranges(
    instrs: &[Instr],
    views: &[TileView],
    tile_count: usize,
) -> Vec<Option<(usize, usize)>> {
    let mut ranges: Vec<Option<(usize, usize)>> = vec![None; tile_count];
    let tile_of = |v: crate::ir::ViewId| views.get(v.index()).map(|v| v.tile as usize);
    for (i, instr) in instrs.iter().enumerate() {
        for t in instr
            .operands()
            .filter_map(|o| o.view())
            .filter_map(tile_of)
        {
            if let Some(r) = ranges.get_mut(t) {
                *r = Some(match *r {
                    None => (i, i),
                    Some((a, b)) => (a.min(i), b.max(i)),
                });
            }
        }
    }
    // Accumulations carry their destination's value from one iteration to the next.
    let mut open: Vec<(usize, usize)> = Vec::new();
    for (i, instr) in instrs.iter().enumerate() {
        match instr.data.loop_control() {
            Some(LoopControl::Begin { end, .. }) => open.push((i, end as usize)),
            Some(LoopControl::End) => {
                open.pop();
            }
            None => {
                let Some(dst) = instr.data.dst() else {
                    continue;
                };
                let spans = |d: usize| match dst.write {
                    Write::Overwrite => false,
                    Write::Accumulate(_) => true,
                    Write::Group { loops, .. } => u32::try_from(d)
                        .ok()
                        .and_then(|d| loops.checked_shr(d))
                        .is_some_and(|l| l & 1 == 1),
                };
                let Some(t) = tile_of(dst.view) else { continue };
                for (d, &(b, e)) in open.iter().enumerate() {
                    if let (true, Some(Some(r))) = (spans(d), ranges.get_mut(t)) {
                        *r = (r.0.min(b), r.1.max(e));
                    }
                }
            }
        }
    }
    let mut loops: Vec<(usize, usize)> = instrs
        .iter()
        .enumerate()
        .filter_map(|(i, ins)| match ins.data.loop_control() {
            Some(LoopControl::Begin { end, .. }) => Some((i, end as usize)),
            Some(LoopControl::End) | None => None,
        })
        .collect();
    loops.sort_by_key(|&(b, e)| e.saturating_sub(b));
    for r in ranges.iter_mut().flatten() {
        for &(b, e) in &loops {
            let inside = r.0 > b && r.1 < e;
            let overlaps = r.0 < e && r.1 > b;
            if overlaps && !inside {
                *r = (r.0.min(b), r.1.max(e));
            }
        }
    }
    ranges
}

/// The outcome of allocation.
#[derive(Debug, Default)]
pub struct Allocation {
    /// Byte address of each tile within its partitions.
    pub addrs: Vec<u32>,
    /// Highest SBUF byte used per partition.
    pub sbuf_bytes: u32,
    /// PSUM banks used.
    pub psum_banks: u32,
}

/// Assigns each tile an address: SBUF tiles first-fit by live range (64-byte aligned), PSUM
/// tiles one bank each. A failure names the tile that did not fit.
pub fn allocate(
    p: &ProgramBuf,
    tiles: &[(Memory, u64)],
) -> Result<Allocation, (usize, RuleViolation)> {
    let target = p.target;
    let ranges = live_ranges(&p.instrs, &p.views, tiles.len());
    let mut order: Vec<usize> = (0..tiles.len()).filter(|&t| ranges[t].is_some()).collect();
    order.sort_by_key(|&t| (ranges[t].unwrap().0, t));
    let mut out = Allocation {
        addrs: vec![0; tiles.len()],
        ..Allocation::default()
    };
    // (tile, start, end) of placed tiles
    let mut placed: Vec<(usize, u64, u64)> = Vec::new();
    let capacity = target.sbuf_partition_bytes();
    let sbuf_capacity = |needed| sbuf_capacity_violation(needed, capacity, target.name());
    for &t in &order {
        let (first, _) = ranges[t].unwrap();
        placed.retain(|&(p, _, _)| ranges[p].unwrap().1 >= first);
        let (memory, bytes) = tiles[t];
        let live = placed.iter().filter(|&&(p, _, _)| tiles[p].0 == memory);
        match memory {
            Memory::Sbuf => {
                // Saturating: a size near u64::MAX is far over capacity and refused below.
                let align = u64::from(SBUF_ALIGN);
                let size = bytes.div_ceil(align).saturating_mul(align);
                let mut spans: Vec<(u64, u64)> = live.map(|&(_, a, b)| (a, b)).collect();
                spans.sort_unstable();
                let mut addr = 0u64;
                for (a, b) in spans.iter().copied() {
                    if addr.saturating_add(size) <= a {
                        break;
                    }
                    addr = addr.max(b);
                }
                // The extent the placement needs: first-fit may need more than the live
                // tiles' total when freed space is fragmented.
                let needed = addr.saturating_add(size);
                let (Ok(start), Ok(end)) = (u32::try_from(addr), u32::try_from(needed)) else {
                    return Err((t, sbuf_capacity(needed)));
                };
                if end > capacity {
                    return Err((t, sbuf_capacity(needed)));
                }
                out.addrs[t] = start;
                out.sbuf_bytes = out.sbuf_bytes.max(end);
                placed.push((t, addr, needed));
            }
            Memory::Psum => {
                let bank_bytes = u64::from(PSUM_BANK_BYTES);
                // The banks of each live tile: `[first, end)` (a tile with block axes may take
                // several, `rules::check_psum_block_tile`).
                let used: Vec<(u64, u64)> = live
                    .map(|&(_, a, e)| {
                        (
                            a.checked_div(bank_bytes).unwrap_or(0),
                            e.div_ceil(bank_bytes),
                        )
                    })
                    .collect();
                let n = bytes.div_ceil(bank_bytes).max(1);
                let free = |b: u64| {
                    used.iter()
                        .all(|&(s, e)| b.saturating_add(n) <= s || b >= e)
                };
                let Some(bank) = (0..u64::from(PSUM_BANKS))
                    .filter(|&b| b.saturating_add(n) <= u64::from(PSUM_BANKS))
                    .find(|&b| free(b))
                else {
                    let live = used.iter().map(|&(s, e)| e.saturating_sub(s)).sum::<u64>();
                    let needed = u32::try_from(live.saturating_add(n)).unwrap_or(u32::MAX);
                    return Err((t, RuleViolation::PsumBanks { needed }));
                };
                // bank + n ≤ 8: the products are at most 8 · 2 KiB.
                let (addr, end) = (
                    bank.saturating_mul(bank_bytes),
                    bank.saturating_add(n).saturating_mul(bank_bytes),
                );
                out.addrs[t] = u32::try_from(addr).unwrap_or(u32::MAX);
                let banks = u32::try_from(bank.saturating_add(n)).unwrap_or(u32::MAX);
                out.psum_banks = out.psum_banks.max(banks);
                placed.push((t, addr, end));
            }
            Memory::Hbm => {}
        }
    }
    Ok(out)
}

/// SBUF capacity exceeded: the placement needs `needed` bytes per partition.
fn sbuf_capacity_violation(needed: u64, capacity: u32, target: &'static str) -> RuleViolation {
    RuleViolation::SbufCapacity {
        needed,
        capacity,
        target,
    }
}
