//! `max8`, `nc_find_index8` and `nc_match_replace8` on the Vector engine: each partition's
//! operand rows are loaded to fp32 by runs (one [`convert::load_f32`] per contiguous run of
//! elements, [`convert::to_f32`] on each element otherwise), searched on integer keys that
//! order and match as the definitions' [`crate::top8::rank`] and [`crate::top8::same`] do
//! ([`key`]), and written back with the conversions the reference interpreter uses
//! (`exec::reference::top8`), partition by partition in the same order: the results are the
//! definition's, bit for bit (the conformance rows check it), in a fraction of its time.

use nki_lang::{DType, MAX_TILE_RANK, Scalar};

use super::EngineState;
use crate::cpu::convert::{self, cast};
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

/// `max8`; `false` (nothing done) when an operand is not on chip.
pub(crate) fn max8(e: &mut EngineState, ops: &Operands) -> bool {
    if !on_chip(ops) {
        return false;
    }
    let mut rows = core::mem::take(&mut e.top8);
    let (dst, src) = (ops.get(0), ops.get(1));
    for p in 0..src.dims[0] {
        rows.load(e, src, p, 0);
        max8_keys(&rows.vals[0], &mut rows.top);
        let top = rows
            .top
            .iter()
            .map(|&(_, v)| convert::from_f32(dst.dtype, v));
        write_row(e, dst, p, top);
    }
    e.top8 = rows;
    true
}

/// `nc_find_index8`; `false` (nothing done) when an operand is not on chip.
pub(crate) fn nc_find_index8(e: &mut EngineState, ops: &Operands) -> bool {
    if !on_chip(ops) {
        return false;
    }
    let mut rows = core::mem::take(&mut e.top8);
    let (dst, data, vals) = (ops.get(0), ops.get(1), ops.get(2));
    for p in 0..data.dims[0] {
        rows.load(e, vals, p, 0);
        rows.load(e, data, p, 1);
        rows.claim(false);
        write_row(e, dst, p, rows.at.iter().map(|&i| index_bits(dst.dtype, i)));
    }
    e.top8 = rows;
    true
}

/// `nc_match_replace8` with the replacement `imm`; `false` (nothing done) when an operand is
/// not on chip.
pub(crate) fn nc_match_replace8(e: &mut EngineState, ops: &Operands, imm: Scalar) -> bool {
    if !on_chip(ops) {
        return false;
    }
    let mut rows = core::mem::take(&mut e.top8);
    let (dst, data, vals) = (ops.get(0), ops.get(1), ops.get(2));
    let idx = ops.slot(4);
    let imm = convert::from_f32(dst.dtype, imm.as_f32());
    // In place (the NKI Library's top-k): every element but the claimed ones keeps its bits.
    let in_place = dst.loc == data.loc
        && dst.dtype == data.dtype
        && dst.pattern == data.pattern
        && dst.dims == data.dims;
    for p in 0..data.dims[0] {
        rows.load(e, vals, p, 0);
        rows.load(e, data, p, 1);
        rows.claim(true);
        if let Some(r) = idx {
            write_row(e, r, p, rows.at.iter().map(|&i| index_bits(r.dtype, i)));
        }
        if in_place {
            for &i in rows.at.iter().flatten() {
                write_at(e, dst, free_offset(dst, p, i), imm);
            }
            continue;
        }
        rows.bits.clear();
        let from = offsets(data, p).map(|o| cast(data.dtype, dst.dtype, read(e, data, o)));
        rows.bits.extend(from);
        for &i in rows.at.iter().flatten() {
            if let Some(b) = rows.bits.get_mut(i) {
                *b = imm;
            }
        }
        write_row(e, dst, p, rows.bits.iter().copied());
    }
    e.top8 = rows;
    true
}

/// The order key of a value: `rank(a, b) == key(a).cmp(&key(b))` and `same(a, b) == (key(a)
/// == key(b))` ([`crate::top8`]): every NaN the one key above +∞, the IEEE total order
/// (−0 below +0) otherwise, as a signed integer (a negative value's magnitude bits flipped).
fn key(x: f32) -> i32 {
    if x.is_nan() {
        i32::MAX
    } else {
        let b = x.to_bits() as i32;
        b ^ ((((b >> 31) as u32) >> 1) as i32)
    }
}

/// `crate::top8::max8_row` on keys: the 8 largest of `row` with their keys, in descending
/// order, the earlier element first among equal keys (a later one enters only above the last
/// kept, behind every kept one at least as high).
fn max8_keys(row: &[f32], top: &mut Vec<(i32, f32)>) {
    top.clear();
    for &x in row {
        let k = key(x);
        if top.len() == 8 && k <= top[7].0 {
            continue;
        }
        let at = top.partition_point(|t| t.0 >= k);
        top.insert(at, (k, x));
        top.truncate(8);
    }
}

/// The rows a search reads and its results, kept by the engine state between instructions so
/// that a search allocates only while its rows are longer than any before.
#[derive(Default)]
pub(crate) struct Rows {
    /// Two partitions' worth of fp32 values: the searched values (`vals[0]`) and the data.
    vals: [Vec<f32>; 2],
    /// `max8`'s top 8 with their keys.
    top: Vec<(i32, f32)>,
    /// `nc_match_replace8`'s output row.
    bits: Vec<u32>,
    /// The values in the order they claim, and the keys still looking.
    order: Vec<usize>,
    looking: Vec<i64>,
    /// The position each value claimed.
    at: Vec<Option<usize>>,
}

impl Rows {
    /// `crate::top8::claim` of the values `vals[0]` in the data `vals[1]`, visited first to
    /// last (or last to first with `reverse`), into `at`, in one pass over the data: each
    /// element is claimed by the first value, in visit order, that matches it and has claimed
    /// nothing yet. That is the definition's result: the elements matching one value form one
    /// class of the key, and within a class the definition gives the `m`-th value visited the
    /// `m`-th occurrence, as this pass does; values of other keys never compete for an element.
    fn claim(&mut self, reverse: bool) {
        let [vals, data] = &self.vals;
        let n = vals.len();
        self.order.clear();
        if reverse {
            self.order.extend((0..n).rev());
        } else {
            self.order.extend(0..n);
        }
        // The keys still looking, in visit order; one that has claimed is out of `key`'s range.
        self.looking.clear();
        self.looking
            .extend(self.order.iter().map(|&j| i64::from(key(vals[j]))));
        self.at.clear();
        self.at.resize(n, None);
        let mut left = n;
        for (i, &x) in data.iter().enumerate() {
            if left == 0 {
                break;
            }
            let k = i64::from(key(x));
            if let Some(q) = self.looking.iter().position(|&l| l == k) {
                self.at[self.order[q]] = Some(i);
                self.looking[q] = i64::MAX;
                left -= 1;
            }
        }
    }

    /// Loads partition `p` of `r` (its free elements, row-major) into `vals[k]` as fp32.
    fn load(&mut self, e: &EngineState, r: &Resolved, p: usize, k: usize) {
        let out = &mut self.vals[k];
        out.clear();
        let mem = memory(e, r.loc);
        let size = r.dtype.size() as usize;
        let (inner, stride) = innermost(r);
        for start in run_starts(r, p) {
            let from = out.len();
            out.resize(from + inner, 0.0);
            let bytes = usize::try_from(start)
                .ok()
                .and_then(|s| s.checked_mul(size))
                .and_then(|b| mem.get(b..b.checked_add(inner.checked_mul(size)?)?));
            match bytes {
                Some(b) if stride == 1 => convert::load_f32(e.isa, b, r.dtype, &mut out[from..]),
                _ => {
                    for (j, v) in out[from..].iter_mut().enumerate() {
                        let at = start.saturating_add(stride.saturating_mul(j as isize));
                        *v = convert::to_f32(r.dtype, read_at(mem, size, at));
                    }
                }
            }
        }
    }
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

/// The memory an operand is in (SBUF or PSUM: [`run`] checked).
fn memory(e: &EngineState, loc: Loc) -> &[u8] {
    match loc {
        Loc::Psum => e.psum.bytes(),
        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => e.sbuf.bytes(),
    }
}

/// The bits of the element at offset `at` of `size` bytes (zero-extended); 0 outside `mem`
/// (the interpreter's checks keep every element inside).
fn read_at(mem: &[u8], size: usize, at: isize) -> u32 {
    let mut word = [0u8; 4];
    let span = usize::try_from(at)
        .ok()
        .and_then(|a| a.checked_mul(size))
        .and_then(|b| mem.get(b..b.checked_add(size)?));
    if let Some(bytes) = span {
        word[..size].copy_from_slice(bytes);
    }
    u32::from_le_bytes(word)
}

/// [`read_at`] of an operand's element.
fn read(e: &EngineState, r: &Resolved, at: isize) -> u32 {
    read_at(memory(e, r.loc), r.dtype.size() as usize, at)
}

/// Writes `bits` to partition `p`'s free elements of `r` in row-major order (as many as both
/// have).
fn write_row(e: &mut EngineState, r: &Resolved, p: usize, bits: impl Iterator<Item = u32>) {
    for (at, b) in offsets(r, p).zip(bits) {
        write_at(e, r, at, b);
    }
}

/// Writes the low bytes of `bits` as the element at offset `at` of `r`'s memory (nothing
/// outside it: the interpreter's checks keep every element inside).
fn write_at(e: &mut EngineState, r: &Resolved, at: isize, bits: u32) {
    let size = r.dtype.size() as usize;
    let mem = match r.loc {
        Loc::Psum => e.psum.bytes_mut(),
        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => e.sbuf.bytes_mut(),
    };
    let span = usize::try_from(at)
        .ok()
        .and_then(|a| a.checked_mul(size))
        .and_then(|s| mem.get_mut(s..s.checked_add(size)?));
    if let Some(dst) = span {
        dst.copy_from_slice(&bits.to_le_bytes()[..size]);
    }
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
