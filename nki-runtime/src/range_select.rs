//! `range_select`'s selection ([`nki_lang::InstrData::RangeSelect`]): which grid points take
//! `on_true`, given the bounds' values. The reference interpreter (what the engines run) and
//! strict mode (which elements a result depends on) both decide through [`selects`].

use nki_lang::{Cmp, MAX_TILE_RANK};

/// `index cmp bound` on fp32 values (IEEE comparisons: false whenever `bound` is NaN).
fn compare(cmp: Cmp, index: f32, bound: f32) -> bool {
    match cmp {
        Cmp::Lt => index < bound,
        Cmp::Le => index <= bound,
        Cmp::Gt => index > bound,
        Cmp::Ge => index >= bound,
        Cmp::Eq => index == bound,
        Cmp::Ne => index != bound,
    }
}

/// The row-major index of grid point `t` among its partition's free elements.
fn free_index(grid: &[usize; MAX_TILE_RANK], t: &[usize; MAX_TILE_RANK]) -> i64 {
    grid.iter().zip(t).skip(1).fold(0i64, |k, (&d, &i)| {
        // Below the tile's free size (at most 2^24 plus the start: the rule's bound).
        let (d, i) = (
            i64::try_from(d).unwrap_or(i64::MAX),
            i64::try_from(i).unwrap_or(i64::MAX),
        );
        k.saturating_mul(d).saturating_add(i)
    })
}

/// Whether grid point `t` takes `on_true`: with `i` its free index (row-major) and
/// `x = start + i` as fp32 (exact: the rule keeps it within ±2^24), `x cmp[0] bounds[0]` and
/// `x cmp[1] bounds[1]` both hold (the bounds as fp32).
pub(crate) fn selects(
    cmp: [Cmp; 2],
    start: i32,
    grid: &[usize; MAX_TILE_RANK],
    t: &[usize; MAX_TILE_RANK],
    bounds: [f32; 2],
) -> bool {
    // Exact in fp32: |start + i| ≤ 2^24 (the rule).
    #[allow(clippy::cast_precision_loss)]
    let x = i64::from(start).saturating_add(free_index(grid, t)) as f32;
    compare(cmp[0], x, bounds[0]) && compare(cmp[1], x, bounds[1])
}
