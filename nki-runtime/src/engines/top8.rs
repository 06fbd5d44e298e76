//! `max8`, `nc_find_index8` and `nc_match_replace8` on the Vector engine: each partition's
//! operand rows are read as fp32 where they are (one contiguous run of fp32 elements) or
//! converted into a buffer by runs (one [`convert::load_f32`] per contiguous run of elements,
//! [`convert::to_f32`] on each element otherwise), searched on integer keys that order and
//! match as the definitions' [`crate::top8::rank`] and [`crate::top8::same`] do
//! ([`search::key`], the elements that cannot count skipped 16 at a time by
//! [`search::first_above`] and [`search::first_match`]), and written back with the conversions
//! the reference interpreter uses (`exec::reference::top8`). Partitions are independent: a
//! large search runs its partitions on two threads when [`split::for_rows`] allows. The results
//! are the definition's, bit for bit (the conformance rows check it), in a fraction of its time.

use core::ops::Range;

use nki_lang::{DType, MAX_TILE_RANK, Scalar};

use super::EngineState;
use super::lanes::{Sink, Source};
use super::mems::Mems;
use super::split::{self, RowSplit};
use crate::cpu::Isa;
use crate::cpu::convert::{self, cast};
use crate::cpu::search::{self, key};
use crate::operand::{Loc, Operands, Resolved};
use crate::top8::NOT_FOUND;

/// Whether no operand is in HBM (the routines below run only then, on SBUF and PSUM operands;
/// the caller runs the definition otherwise). `nc_match_replace8`'s replacement is an
/// immediate operand.
fn on_chip(ops: &Operands) -> bool {
    (0..5)
        .filter_map(|s| ops.slot(s))
        .all(|r| !matches!(r.loc, Loc::Hbm(_) | Loc::Expr))
}

/// Runs `body` on every partition of a search that writes `writes` and reads `reads` (its
/// `data` or `src` first), on two threads when [`split::for_rows`] allows.
fn for_partitions(
    e: &mut EngineState,
    writes: &[&Resolved],
    reads: &[&Resolved],
    body: &(dyn Fn(Isa, &mut Mems<'_>, usize, &mut Rows) + Sync),
) {
    let sink = |r: &Resolved| Sink {
        loc: r.loc,
        dtype: r.dtype,
        base: r.pattern.base,
        strides: r.pattern.strides,
    };
    let source = |r: &Resolved| Source::Mem {
        loc: r.loc,
        dtype: r.dtype,
        base: r.pattern.base,
        strides: r.pattern.strides,
    };
    let mut sinks = [sink(writes[0]); 2];
    for (k, r) in sinks.iter_mut().zip(writes) {
        *k = sink(r);
    }
    let mut sources = [source(reads[0]); 2];
    for (k, r) in sources.iter_mut().zip(reads) {
        *k = source(r);
    }
    let data = reads[0];
    // Both threads' rows are made long enough here, whichever thread then takes which
    // partitions: a launch allocates only while its rows are longer than any before.
    let elems = writes
        .iter()
        .chain(reads)
        .map(|r| free_elems(r))
        .max()
        .unwrap_or(0);
    e.lanes.top8.reserve(elems);
    e.lanes_worker.top8.reserve(elems);
    let plan = RowSplit {
        rows: data.dims[0],
        elems: data.dims.iter().product(),
        writes: &sinks[..writes.len()],
        reads: &sources[..reads.len()],
        sbuf_columns: None,
        hbm: &[],
    };
    split::for_rows(e, &plan, &|isa, mems, rows: Range<usize>, lanes| {
        for p in rows {
            body(isa, mems, p, &mut lanes.top8);
        }
    });
}

/// `max8`; `false` (nothing done) when an operand is not on chip.
pub(crate) fn max8(e: &mut EngineState, ops: &Operands) -> bool {
    if !on_chip(ops) {
        return false;
    }
    let (dst, src) = (ops.get(0), ops.get(1));
    for_partitions(e, &[dst], &[src], &|isa, mems, p, rows| {
        let row = rows.vals[0].row(isa, mems, src, p);
        max8_keys(isa, row, &mut rows.top);
        let top = rows
            .top
            .iter()
            .map(|&(_, v)| convert::from_f32(dst.dtype, v));
        write_row(mems, dst, p, top);
    });
    true
}

/// `nc_find_index8`; `false` (nothing done) when an operand is not on chip.
pub(crate) fn nc_find_index8(e: &mut EngineState, ops: &Operands) -> bool {
    if !on_chip(ops) {
        return false;
    }
    let (dst, data, vals) = (ops.get(0), ops.get(1), ops.get(2));
    if free_elems(vals) != 8 {
        return false;
    }
    for_partitions(e, &[dst], &[data, vals], &|isa, mems, p, rows| {
        let [v, d] = &mut rows.vals;
        claim(
            isa,
            v.row(isa, mems, vals, p),
            d.row(isa, mems, data, p),
            false,
            &mut rows.at,
        );
        write_row(
            mems,
            dst,
            p,
            rows.at.iter().map(|&i| index_bits(dst.dtype, i)),
        );
    });
    true
}

/// `nc_match_replace8` with the replacement `imm`; `false` (nothing done) when an operand is
/// not on chip.
pub(crate) fn nc_match_replace8(e: &mut EngineState, ops: &Operands, imm: Scalar) -> bool {
    if !on_chip(ops) {
        return false;
    }
    let (dst, data, vals) = (ops.get(0), ops.get(1), ops.get(2));
    if free_elems(vals) != 8 {
        return false;
    }
    let idx = ops.slot(4);
    let imm = convert::from_f32(dst.dtype, imm.as_f32());
    // In place (the NKI Library's top-k): every element but the claimed ones keeps its bits.
    let in_place = dst.loc == data.loc
        && dst.dtype == data.dtype
        && dst.pattern == data.pattern
        && dst.dims == data.dims;
    let writes: &[&Resolved] = match idx {
        Some(r) => &[dst, r],
        None => &[dst],
    };
    for_partitions(e, writes, &[data, vals], &|isa, mems, p, rows| {
        let [v, d] = &mut rows.vals;
        claim(
            isa,
            v.row(isa, mems, vals, p),
            d.row(isa, mems, data, p),
            true,
            &mut rows.at,
        );
        if let Some(r) = idx {
            write_row(mems, r, p, rows.at.iter().map(|&i| index_bits(r.dtype, i)));
        }
        if in_place {
            for &i in rows.at.iter().flatten() {
                write_at(mems, dst, free_offset(dst, p, i), imm);
            }
            return;
        }
        rows.bits.clear();
        let from = offsets(data, p).map(|o| cast(data.dtype, dst.dtype, read(mems, data, o)));
        rows.bits.extend(from);
        for &i in rows.at.iter().flatten() {
            if let Some(b) = rows.bits.get_mut(i) {
                *b = imm;
            }
        }
        write_row(mems, dst, p, rows.bits.iter().copied());
    });
    true
}

/// `crate::top8::max8_row` on keys: the 8 largest of `row` with their keys, in descending
/// order, the earlier element first among equal keys (a later one enters only above the last
/// kept, behind every kept one at least as high). The elements below a key that 8 elements
/// reach ([`search::eighth_key_floor`]) and, once 8 are kept, those that cannot enter are
/// skipped by [`search::first_above`]; a short row's by [`search::max8_short`].
fn max8_keys(isa: Isa, row: &[f32], top: &mut Vec<(i32, f32)>) {
    top.clear();
    if row.len() <= search::SHORT_ROW {
        top.resize(row.len().min(8), (0, 0.0));
        search::max8_short(isa, row, top);
        return;
    }
    // The 8 kept in the end are at or above a key 8 elements reach: the elements below it
    // are skipped from the start (no value's key is `i32::MIN`, so `floor - 1` skips none of
    // those at the floor).
    let floor = search::eighth_key_floor(isa, row).map(|k| k.saturating_sub(1));
    let mut i = 0;
    while i < row.len() {
        let below = match (top.get(7), floor) {
            (Some(&(last, _)), Some(f)) => Some(last.max(f)),
            (Some(&(last, _)), None) => Some(last),
            (None, f) => f,
        };
        if let Some(t) = below {
            i = search::first_above(isa, row, i, t);
        }
        let Some(&x) = row.get(i) else { break };
        let k = key(x);
        let at = top.partition_point(|t| t.0 >= k);
        top.insert(at, (k, x));
        top.truncate(8);
        i += 1;
    }
}

/// One thread's rows of a search and its results, kept with its lanes between instructions so
/// that a search allocates only while its rows are longer than any before.
#[derive(Default)]
pub(crate) struct Rows {
    /// Two partitions' worth of fp32 values: the searched values (`vals[0]`) and the data.
    vals: [Row; 2],
    /// `max8`'s top 8 with their keys.
    top: Vec<(i32, f32)>,
    /// `nc_match_replace8`'s output row.
    bits: Vec<u32>,
    /// The position each value claimed.
    at: Vec<Option<usize>>,
}

impl Rows {
    /// Makes room for partitions of `elems` free elements in every buffer.
    fn reserve(&mut self, elems: usize) {
        fn room<T>(v: &mut Vec<T>, n: usize) {
            v.reserve(n.saturating_sub(v.len()));
        }
        for Row(v) in &mut self.vals {
            room(v, elems);
        }
        room(&mut self.bits, elems);
        // `max8_keys` inserts a ninth before it truncates to 8.
        room(&mut self.top, 9);
        room(&mut self.at, 8);
    }
}

/// A buffer for one partition's values as fp32.
#[derive(Default)]
struct Row(Vec<f32>);

impl Row {
    /// Partition `p` of `r` (its free elements, row-major) as fp32: read where it is when it is
    /// one contiguous run of fp32 elements, else converted into this buffer by runs.
    fn row<'a>(&'a mut self, isa: Isa, mems: &'a Mems<'_>, r: &Resolved, p: usize) -> &'a [f32] {
        let size = r.dtype.size() as usize;
        let (inner, stride) = innermost(r);
        let run = |start: isize| {
            let b = usize::try_from(start).ok()?.checked_mul(size)?;
            Some(b..b.checked_add(inner.checked_mul(size)?)?)
        };
        if r.dtype == DType::F32 && (stride == 1 || inner == 1) && free_elems(r) == inner {
            let bytes = run_starts(r, p).next().and_then(run);
            if let Some(Ok(values)) = bytes.map(|b| bytemuck::try_cast_slice(mems.read(r.loc, b))) {
                return values;
            }
        }
        let out = &mut self.0;
        out.clear();
        for start in run_starts(r, p) {
            let from = out.len();
            out.resize(from + inner, 0.0);
            match run(start) {
                Some(b) if stride == 1 => {
                    convert::load_f32(isa, mems.read(r.loc, b), r.dtype, &mut out[from..]);
                }
                _ => {
                    for (j, v) in out[from..].iter_mut().enumerate() {
                        let at = start.saturating_add(stride.saturating_mul(j as isize));
                        *v = convert::to_f32(r.dtype, read(mems, r, at));
                    }
                }
            }
        }
        out
    }
}

/// `crate::top8::claim` of the 8 values `vals` in `data`, visited first to last (or last to
/// first with `reverse`), into `at`, in one pass over the data: each element is claimed by the
/// first value, in visit order, that matches it and has claimed nothing yet. That is the
/// definition's result: the elements matching one value form one class of the key, and within a
/// class the definition gives the `m`-th value visited the `m`-th occurrence, as this pass does;
/// values of other keys never compete for an element. The elements no value can claim are
/// skipped by [`search::first_match`]; a short row's positions are found by
/// [`search::claim_short`], the definition's search over its keys.
fn claim(isa: Isa, vals: &[f32], data: &[f32], reverse: bool, at: &mut Vec<Option<usize>>) {
    let n = vals.len().min(8);
    let order = |q: usize| if reverse { n - 1 - q } else { q };
    // The keys still looking, in visit order; one that has claimed is [`search::NO_KEY`].
    let mut looking = [search::NO_KEY; 8];
    for (q, l) in looking.iter_mut().enumerate().take(n) {
        *l = key(vals[order(q)]);
    }
    at.clear();
    at.resize(vals.len(), None);
    if data.len() <= search::SHORT_ROW {
        let found = search::claim_short(isa, data, &looking);
        for (q, &i) in found.iter().enumerate().take(n) {
            at[order(q)] = i;
        }
        return;
    }
    let mut left = n;
    let mut i = 0;
    while left > 0 {
        i = search::first_match(isa, data, i, &looking);
        let Some(&x) = data.get(i) else { break };
        let k = key(x);
        if let Some(q) = looking.iter().position(|&l| l == k) {
            at[order(q)] = Some(i);
            looking[q] = search::NO_KEY;
            left -= 1;
        }
        i += 1;
    }
}

/// The free elements of each partition of `r`.
fn free_elems(r: &Resolved) -> usize {
    r.dims[1..].iter().product()
}

/// The innermost free dimension of `r` longer than 1 (the last one if none is): its length and
/// stride.
fn innermost(r: &Resolved) -> (usize, isize) {
    let j = last_free(r);
    (r.dims[j], r.pattern.strides[j])
}

/// The index of [`innermost`]'s dimension.
fn last_free(r: &Resolved) -> usize {
    (1..MAX_TILE_RANK)
        .rev()
        .find(|&j| r.dims[j] > 1)
        .unwrap_or(MAX_TILE_RANK - 1)
}

/// The element offset of the first element of each [`innermost`] run of partition `p` of `r`,
/// in row-major order.
fn run_starts(r: &Resolved, p: usize) -> impl Iterator<Item = isize> + use<> {
    let (dims, strides) = (r.dims, r.pattern.strides);
    let last = last_free(r);
    let base = r
        .pattern
        .base
        .saturating_add(strides[0].saturating_mul(p as isize));
    let outer: usize = dims[1..last].iter().product();
    (0..outer).map(move |mut k| {
        let mut at = base;
        for j in (1..last).rev() {
            let i = k % dims[j].max(1);
            k /= dims[j].max(1);
            at = at.saturating_add(strides[j].saturating_mul(i as isize));
        }
        at
    })
}

/// The element offsets of partition `p`'s free elements of `r`, row-major.
fn offsets(r: &Resolved, p: usize) -> impl Iterator<Item = isize> + use<> {
    let (inner, stride) = innermost(r);
    run_starts(r, p).flat_map(move |s| {
        (0..inner).map(move |j| s.saturating_add(stride.saturating_mul(j as isize)))
    })
}

/// The bits of `r`'s element at offset `at` (zero-extended; the interpreter's checks keep every
/// element inside its memory).
fn read(mems: &Mems<'_>, r: &Resolved, at: isize) -> u32 {
    let size = r.dtype.size() as usize;
    let mut word = [0u8; 4];
    let b = usize::try_from(at).unwrap_or(0) * size;
    word[..size].copy_from_slice(mems.read(r.loc, b..b + size));
    u32::from_le_bytes(word)
}

/// Writes `bits` to partition `p`'s free elements of `r` in row-major order (as many as both
/// have).
fn write_row(mems: &mut Mems<'_>, r: &Resolved, p: usize, bits: impl Iterator<Item = u32>) {
    for (at, b) in offsets(r, p).zip(bits) {
        write_at(mems, r, at, b);
    }
}

/// Writes the low bytes of `bits` as the element at offset `at` of `r`'s memory.
fn write_at(mems: &mut Mems<'_>, r: &Resolved, at: isize, bits: u32) {
    let size = r.dtype.size() as usize;
    let b = usize::try_from(at).unwrap_or(0) * size;
    mems.region_mut(r.loc)
        .write(b..b + size)
        .copy_from_slice(&bits.to_le_bytes()[..size]);
}

/// The element offset of partition `p`'s free element `i` (row-major) of `r`.
fn free_offset(r: &Resolved, p: usize, mut i: usize) -> isize {
    let mut at = r
        .pattern
        .base
        .saturating_add(r.pattern.strides[0].saturating_mul(p as isize));
    for j in (1..MAX_TILE_RANK).rev() {
        let d = r.dims[j].max(1);
        at = at.saturating_add(r.pattern.strides[j].saturating_mul((i % d) as isize));
        i /= d;
    }
    at
}

/// The bits of a position as `nc_find_index8` writes it (an int32 lane stored in `dtype`),
/// [`NOT_FOUND`] for none.
fn index_bits(dtype: DType, i: Option<usize>) -> u32 {
    let i = i.map_or(NOT_FOUND, |i| i32::try_from(i).unwrap_or(NOT_FOUND));
    convert::from_i32(dtype, i)
}
