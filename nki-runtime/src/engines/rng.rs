//! The random number generators: the model's counter-based one (`rand`, `random_seed`,
//! `dropout`) and the engines' XORWOW generators (`rng`, `rand2`, `set_rng_seed`,
//! `rand_set_state`, `rand_get_state`; see [`Xorwow`]).
//!
//! NKI does not specify its generator; the model defines one that depends on nothing but the
//! program and its data (`docs/numerics.md`, "Random numbers"): the counter-based
//! Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
//! keyed by the seed and the instance's row-major index in the launch grid, with the counter
//! `(free index, partition, call, 0)` for each element: its row-major index among the grid's
//! free elements and its partition in the instruction's unmasked grid, and the number of
//! `rand` and `dropout` instructions the instance executed since its last `random_seed` (or
//! since it started, with seed 0). An element's value is therefore the same on every host
//! path, thread count and block size, and a mask only chooses which elements are written.
//!
//! The first word `w` of Philox's output makes the element's uniform value
//! `u = (w >> (32 − m)) · 2^−m` with `m` the significand bits of the destination's dtype (24
//! for fp32, 8 for bf16): exact in that dtype and below 1. `dropout` draws `u` with `m = 24`
//! and writes 0 where `u < prob`, the source element elsewhere.

// Indices here come from resolved operands the launch's checks keep in range.
#![warn(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use nki_lang::target::PARTITIONS;
use nki_lang::{Engine, MAX_TILE_RANK, XORWOW_WORDS, xorwow_generators};

use super::EngineState;
use crate::cpu::convert;
use crate::operand::{Loc, Operands, Resolved};

/// The generators' state in one instance: the counter-based generator's seed, the instance's
/// index (the key's second word) and the calls since the seed was set; and the engines' XORWOW
/// generators ([`Xorwow`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RngState {
    seed: u32,
    instance: u32,
    calls: u32,
    /// The Vector and GpSimd engines' XORWOW generators.
    xorwow: Xorwow,
}

impl RngState {
    /// The state at the start of instance `instance` (row-major in the launch grid): seed 0,
    /// no calls yet, the XORWOW generators in their start state (derived when first used).
    /// Allocates nothing: the XORWOW lanes' storage is kept.
    pub(crate) fn start(&mut self, instance: usize) {
        self.seed = 0;
        self.instance = u32::try_from(instance).unwrap_or(u32::MAX);
        self.calls = 0;
        self.xorwow.ready = [false; 2];
    }

    /// `random_seed`: a new seed, and the call count back to 0.
    pub(crate) fn reseed(&mut self, seed: u32) {
        self.seed = seed;
        self.calls = 0;
    }

    /// The key and call number of the next `rand` or `dropout`, counting it.
    fn next_call(&mut self) -> ([u32; 2], u32) {
        let call = self.calls;
        self.calls = self.calls.wrapping_add(1);
        ([self.seed, self.instance], call)
    }
}

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a).wrapping_mul(u64::from(b));
    #[allow(clippy::cast_possible_truncation)]
    ((p >> 32) as u32, p as u32)
}

/// Philox4x32 with 10 rounds: the output block of counter `ctr` under `key`.
pub(crate) fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The uniform value in `[0, 1)` a word stands for with `m` significand bits (1 ≤ m ≤ 24).
fn uniform(word: u32, m: u32) -> f32 {
    let m = m.clamp(1, 24);
    let shift = 32u32.saturating_sub(m);
    #[allow(clippy::cast_precision_loss)]
    let k = (word >> shift) as f32;
    // m ≤ 24: the scale is a power of two, exact.
    k * f32::from_bits((127u32.saturating_sub(m)) << 23)
}

/// The first word of the generator's block for the element at `t` (relative to `origin`) of a
/// grid of dimensions `grid`.
fn word(
    key: [u32; 2],
    call: u32,
    t: &[usize; MAX_TILE_RANK],
    (origin, grid): ([usize; MAX_TILE_RANK], [usize; MAX_TILE_RANK]),
) -> u32 {
    let at = |j: usize| t[j].saturating_add(origin[j]);
    let free = (1..MAX_TILE_RANK).fold(0usize, |f, j| {
        f.saturating_mul(grid[j]).saturating_add(at(j))
    });
    #[allow(clippy::cast_possible_truncation)]
    let ctr = [free as u32, at(0) as u32, call, 0];
    philox4x32_10(ctr, key)[0]
}

/// Every grid index of `dims`, row-major.
fn indices(dims: [usize; MAX_TILE_RANK]) -> impl Iterator<Item = [usize; MAX_TILE_RANK]> {
    let n: usize = dims.iter().product();
    (0..n).map(move |mut k| {
        let mut t = [0usize; MAX_TILE_RANK];
        for j in (0..MAX_TILE_RANK).rev() {
            let d = dims[j].max(1);
            t[j] = k.checked_rem(d).unwrap_or(0);
            k = k.checked_div(d).unwrap_or(0);
        }
        t
    })
}

/// Element offset of index `t` under `strides` from `base`.
fn offset(base: isize, strides: &[isize; MAX_TILE_RANK], t: &[usize; MAX_TILE_RANK]) -> isize {
    strides.iter().zip(t).fold(base, |o, (&s, &i)| {
        o.saturating_add(s.saturating_mul(isize::try_from(i).unwrap_or(isize::MAX)))
    })
}

/// SBUF and PSUM, to read and write single elements.
struct OnChip<'a> {
    sbuf: &'a mut [u8],
    psum: &'a mut [u8],
}

impl OnChip<'_> {
    fn mem(&self, loc: Loc) -> &[u8] {
        match loc {
            Loc::Psum => self.psum,
            Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => self.sbuf,
        }
    }

    fn read(&self, r: &Resolved, elem: isize) -> u32 {
        let size = r.dtype.size() as usize;
        let at = usize::try_from(elem)
            .unwrap_or(usize::MAX)
            .saturating_mul(size);
        let mut word = [0u8; 4];
        if let (Some(bytes), Some(w)) = (
            self.mem(r.loc).get(at..at.saturating_add(size)),
            word.get_mut(..size),
        ) {
            w.copy_from_slice(bytes);
        }
        u32::from_le_bytes(word)
    }

    fn write(&mut self, r: &Resolved, elem: isize, bits: u32) {
        let size = r.dtype.size() as usize;
        let at = usize::try_from(elem)
            .unwrap_or(usize::MAX)
            .saturating_mul(size);
        let mem = match r.loc {
            Loc::Psum => &mut *self.psum,
            Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => &mut *self.sbuf,
        };
        if let (Some(bytes), Some(w)) = (
            mem.get_mut(at..at.saturating_add(size)),
            bits.to_le_bytes().get(..size),
        ) {
            bytes.copy_from_slice(w);
        }
    }
}

/// `random_seed`: the seed is the one element of slot 1, as an int32 (its bits).
pub(crate) fn random_seed(e: &mut EngineState, ops: &Operands) {
    let seed = ops.get(1);
    let chip = OnChip {
        sbuf: e.sbuf.bytes_mut(),
        psum: e.psum.bytes_mut(),
    };
    #[allow(clippy::cast_sign_loss)]
    let value = convert::to_i32(seed.dtype, chip.read(seed, seed.pattern.base)) as u32;
    e.rng.reseed(value);
}

/// `rand`: each element of the destination (slot 0) becomes its uniform value. `at`: the
/// resolved elements' origin in the unmasked grid, and that grid ([`crate::operand::grid_origin`]).
pub(crate) fn rand(
    e: &mut EngineState,
    ops: &Operands,
    at: ([usize; MAX_TILE_RANK], [usize; MAX_TILE_RANK]),
) {
    let dst = ops.get(0);
    let (key, call) = e.rng.next_call();
    let mut chip = OnChip {
        sbuf: e.sbuf.bytes_mut(),
        psum: e.psum.bytes_mut(),
    };
    let m = dst.dtype.significand_bits();
    for t in indices(dst.dims) {
        let u = uniform(word(key, call, &t, at), m);
        let o = offset(dst.pattern.base, &dst.pattern.strides, &t);
        chip.write(dst, o, convert::from_f32(dst.dtype, u));
    }
}

/// `dropout`: `dst = u < prob ? 0 : data` for each element, `u` its uniform fp32 value and
/// `prob` an immediate or the element's partition's value of a `[P, 1]` column (slot 2); the
/// kept element is the source's bits when the dtypes agree, else converted through fp32.
pub(crate) fn dropout(
    e: &mut EngineState,
    ops: &Operands,
    at: ([usize; MAX_TILE_RANK], [usize; MAX_TILE_RANK]),
) {
    let (dst, src, prob) = (ops.get(0), ops.get(1), ops.get(2));
    let (key, call) = e.rng.next_call();
    let mut chip = OnChip {
        sbuf: e.sbuf.bytes_mut(),
        psum: e.psum.bytes_mut(),
    };
    let grid = dst.dims;
    let (src_strides, prob_strides) = (src.strides_on(&grid), prob.strides_on(&grid));
    for t in indices(grid) {
        let p = match prob.loc {
            Loc::Imm(x) => x.as_f32(),
            Loc::Sbuf | Loc::Psum | Loc::Hbm(_) | Loc::Expr => {
                let o = offset(prob.pattern.base, &prob_strides, &t);
                convert::to_f32(prob.dtype, chip.read(prob, o))
            }
        };
        let u = uniform(word(key, call, &t, at), 24);
        let bits = if u < p {
            convert::from_f32(dst.dtype, 0.0)
        } else {
            let x = chip.read(src, offset(src.pattern.base, &src_strides, &t));
            if src.dtype == dst.dtype {
                x
            } else if src.dtype.is_int() && dst.dtype.is_int() {
                convert::from_i32(dst.dtype, convert::to_i32(src.dtype, x))
            } else {
                convert::from_f32(dst.dtype, convert::to_f32(src.dtype, x))
            }
        };
        let o = offset(dst.pattern.base, &dst.pattern.strides, &t);
        chip.write(dst, o, bits);
    }
}

/// Compute lanes of an engine (one per partition).
const LANES: usize = PARTITIONS as usize;
/// [`XORWOW_WORDS`] as an index.
const WORDS: usize = XORWOW_WORDS as usize;

/// The Vector and GpSimd engines' XORWOW generators in one instance (`docs/numerics.md`,
/// "XORWOW generators"): per engine and compute lane, [`xorwow_generators`] generators of
/// [`XORWOW_WORDS`] words `[x, y, z, w, v, d]` each, lane-major. An engine's lanes hold its
/// start state (derived from the instance's index) until an instruction of the instance first
/// uses them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Xorwow {
    /// Per engine (0 Vector, 1 GpSimd): whether its lanes hold this instance's state.
    ready: [bool; 2],
    /// Per engine: the lanes' words.
    words: [Vec<u32>; 2],
}

impl Default for Xorwow {
    fn default() -> Self {
        let size = |e: Engine| LANES.saturating_mul(state_words(e));
        Xorwow {
            ready: [false; 2],
            words: [vec![0; size(Engine::Vector)], vec![0; size(Engine::GpSimd)]],
        }
    }
}

/// State words per lane of `engine` (24 Vector, 6 GpSimd).
fn state_words(engine: Engine) -> usize {
    (xorwow_generators(engine) as usize).saturating_mul(WORDS)
}

/// The slot of an engine's generators in [`Xorwow`]: the Vector engine's, else the GpSimd
/// engine's (the op table allows no other engine).
fn engine_slot(engine: Engine) -> usize {
    match engine {
        Engine::Vector => 0,
        Engine::GpSimd | Engine::Scalar | Engine::Tensor | Engine::Dma | Engine::Sync => 1,
    }
}

/// splitmix64's output function (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014) after advancing `z` by its increment.
fn splitmix64(z: &mut u64) -> u64 {
    *z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut x = *z;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The model's seeding of one generator: generator `g` of lane `lane` of `engine` (0 Vector,
/// 1 GpSimd) from the 32-bit `seed`: splitmix64 started at `seed · 2^32 + engine · 2^16 +
/// lane · 2^8 + g` gives three outputs, each two words, low word first: `x, y, z, w, v, d`.
fn seeded(seed: u32, engine: usize, lane: usize, g: usize) -> [u32; WORDS] {
    let at = (engine << 16) | (lane << 8) | g;
    let mut z = (u64::from(seed) << 32) | (at as u64 & 0xffff_ffff);
    let mut out = [0u32; WORDS];
    for pair in out.chunks_exact_mut(2) {
        let r = splitmix64(&mut z);
        #[allow(clippy::cast_possible_truncation)]
        {
            pair[0] = r as u32;
            pair[1] = (r >> 32) as u32;
        }
    }
    out
}

/// One step of a XORWOW generator (Marsaglia, "Xorshift RNGs", J. Stat. Softw. 8(14), 2003,
/// as cuRAND's `curand()` computes it): the state `[x, y, z, w, v, d]` shifts, `d` grows by
/// 362437, and the output is `d + v`, both new (wrapping).
fn xorwow_next(s: &mut [u32]) -> u32 {
    let [x, y, z, w, v, d] = [0, 1, 2, 3, 4, 5].map(|i| s.get(i).copied().unwrap_or(0));
    let t = x ^ (x >> 2);
    let v2 = (v ^ (v << 4)) ^ (t ^ (t << 1));
    let d2 = d.wrapping_add(362_437);
    for (slot, value) in s.iter_mut().zip([y, z, w, v, v2, d2]) {
        *slot = value;
    }
    d2.wrapping_add(v2)
}

impl Xorwow {
    /// Every lane of `engine`'s generators seeded from `seed` ([`seeded`]).
    fn seed_all(&mut self, engine: Engine, seed: u32) {
        let slot = engine_slot(engine);
        let per = state_words(engine);
        if let Some(words) = self.words.get_mut(slot) {
            for (lane, lw) in words.chunks_exact_mut(per.max(1)).enumerate() {
                for (g, gw) in lw.chunks_exact_mut(WORDS).enumerate() {
                    gw.copy_from_slice(&seeded(seed, slot, lane, g));
                }
            }
        }
        if let Some(r) = self.ready.get_mut(slot) {
            *r = true;
        }
    }

    /// `engine`'s lanes, after giving them the instance's start state (every lane seeded from
    /// the instance's index) if no instruction of the instance used them yet.
    fn lanes(&mut self, engine: Engine, instance: u32) -> &mut [u32] {
        let slot = engine_slot(engine);
        if !self.ready.get(slot).copied().unwrap_or(true) {
            self.seed_all(engine, instance);
        }
        self.words.get_mut(slot).map_or(&mut [], Vec::as_mut_slice)
    }
}

/// The words of lane `lane` (each lane `per` words), if the engine has that lane.
fn lane_words(lanes: &mut [u32], per: usize, lane: usize) -> Option<&mut [u32]> {
    let start = lane.checked_mul(per)?;
    lanes.get_mut(start..start.checked_add(per)?)
}

/// The 32-bit draws of one instruction, element by element in each partition's row-major
/// order over `dims`: for each partition `p`, `start(p)` first, then `each(c, t, x)` for every
/// grid index `t` of the partition with `c` what `start` returned and `x` the draw. Lane
/// `origin0 + p` steps its generators in turn (element `j` of the partition takes generator
/// `j mod G`, `G` the engine's generators per lane).
fn draws<C>(
    lanes: &mut [u32],
    engine: Engine,
    (dims, origin0): ([usize; MAX_TILE_RANK], usize),
    mut start: impl FnMut(usize) -> C,
    mut each: impl FnMut(&C, &[usize; MAX_TILE_RANK], u32),
) {
    let per = state_words(engine);
    let generators = xorwow_generators(engine) as usize;
    let mut free = dims;
    free[0] = 1;
    for p in 0..dims[0] {
        let Some(lw) = lane_words(lanes, per, origin0.saturating_add(p)) else {
            continue;
        };
        let c = start(p);
        for (j, mut t) in indices(free).enumerate() {
            t[0] = p;
            let g = j.checked_rem(generators).unwrap_or(0);
            let from = g.saturating_mul(WORDS);
            let Some(state) = lw.get_mut(from..from.saturating_add(WORDS)) else {
                continue;
            };
            each(&c, &t, xorwow_next(state));
        }
    }
}

/// `rng`: each element of the destination (slot 0) gets its lane's next 32-bit draw, its
/// least significant bits as the destination's integer dtype.
pub(crate) fn rng(
    e: &mut EngineState,
    engine: Engine,
    ops: &Operands,
    at: ([usize; MAX_TILE_RANK], [usize; MAX_TILE_RANK]),
) {
    let dst = ops.get(0);
    let instance = e.rng.instance;
    let lanes = e.rng.xorwow.lanes(engine, instance);
    let mut chip = OnChip {
        sbuf: e.sbuf.bytes_mut(),
        psum: e.psum.bytes_mut(),
    };
    draws(
        lanes,
        engine,
        (dst.dims, at.0[0]),
        |_| (),
        |(), t, x| {
            let o = offset(dst.pattern.base, &dst.pattern.strides, t);
            chip.write(dst, o, x);
        },
    );
}

/// `rand2`'s uniform value of a 32-bit draw `x` in fp32: `u = x·2^−32 + 2^−33` (`x` rounded
/// to fp32, nearest even; the product exact; the sum rounded), in `(0, 1]`, then
/// `min + u·(max − min)` with each operation rounded to fp32.
pub(crate) fn rand2_value(x: u32, min: f32, max: f32) -> f32 {
    #[allow(clippy::cast_precision_loss)]
    let xf = x as f32;
    // 2^-32 and 2^-33: exponents 95 and 94.
    let u = xf * f32::from_bits(95 << 23) + f32::from_bits(94 << 23);
    let span = max - min;
    min + u * span
}

/// `rand2`: each element of the destination (slot 0) is [`rand2_value`] of its lane's next
/// draw from the Vector engine's generators, `min` (slot 1) and `max` (slot 2) immediates or
/// the element's partition's values of `[P, 1]` columns, converted to the destination's dtype.
pub(crate) fn rand2(
    e: &mut EngineState,
    ops: &Operands,
    at: ([usize; MAX_TILE_RANK], [usize; MAX_TILE_RANK]),
) {
    let (dst, lo, hi) = (ops.get(0), ops.get(1), ops.get(2));
    let instance = e.rng.instance;
    let lanes = e.rng.xorwow.lanes(Engine::Vector, instance);
    let chip = OnChip {
        sbuf: e.sbuf.bytes_mut(),
        psum: e.psum.bytes_mut(),
    };
    let grid = dst.dims;
    let strides = [lo.strides_on(&grid), hi.strides_on(&grid)];
    let chip = core::cell::RefCell::new(chip);
    let value = |r: &Resolved, s: &[isize; MAX_TILE_RANK], p: usize| match r.loc {
        Loc::Imm(x) => x.as_f32(),
        Loc::Sbuf | Loc::Psum | Loc::Hbm(_) | Loc::Expr => {
            let mut t = [0usize; MAX_TILE_RANK];
            t[0] = p;
            let bits = chip.borrow().read(r, offset(r.pattern.base, s, &t));
            convert::to_f32(r.dtype, bits)
        }
    };
    // A partition's bounds are read before its elements are written.
    let start = |p| (value(lo, &strides[0], p), value(hi, &strides[1], p));
    draws(
        lanes,
        Engine::Vector,
        (grid, at.0[0]),
        start,
        |&(min, max), t, x| {
            let o = offset(dst.pattern.base, &dst.pattern.strides, t);
            let bits = convert::from_f32(dst.dtype, rand2_value(x, min, max));
            chip.borrow_mut().write(dst, o, bits);
        },
    );
}

/// `rand_get_state`: partition `k` of the destination (slot 0) gets lane `k`'s words, element
/// `i` of the partition (row-major) word `i`.
pub(crate) fn rand_get_state(e: &mut EngineState, engine: Engine, ops: &Operands) {
    let dst = ops.get(0);
    let instance = e.rng.instance;
    let per = state_words(engine);
    let lanes = e.rng.xorwow.lanes(engine, instance);
    let mut chip = OnChip {
        sbuf: e.sbuf.bytes_mut(),
        psum: e.psum.bytes_mut(),
    };
    let mut free = dst.dims;
    free[0] = 1;
    for p in 0..dst.dims[0] {
        let Some(lw) = lane_words(lanes, per, p) else {
            continue;
        };
        for (i, mut t) in indices(free).enumerate() {
            t[0] = p;
            let o = offset(dst.pattern.base, &dst.pattern.strides, &t);
            chip.write(dst, o, lw.get(i).copied().unwrap_or(0));
        }
    }
}

/// `rand_set_state`: lane `k`'s words become partition `k` of the source (slot 1), word `i`
/// its element `i` (row-major); lanes past the source's partitions keep their state.
pub(crate) fn rand_set_state(e: &mut EngineState, engine: Engine, ops: &Operands) {
    let src = ops.get(1);
    let instance = e.rng.instance;
    let per = state_words(engine);
    let lanes = e.rng.xorwow.lanes(engine, instance);
    let chip = OnChip {
        sbuf: e.sbuf.bytes_mut(),
        psum: e.psum.bytes_mut(),
    };
    let mut free = src.dims;
    free[0] = 1;
    for p in 0..src.dims[0] {
        let Some(lw) = lane_words(lanes, per, p) else {
            continue;
        };
        for (i, mut t) in indices(free).enumerate() {
            t[0] = p;
            let o = offset(src.pattern.base, &src.pattern.strides, &t);
            if let Some(w) = lw.get_mut(i) {
                *w = chip.read(src, o);
            }
        }
    }
}

/// `set_rng_seed`: every lane of the Vector engine's generators seeded ([`seeded`]) from the
/// 32 bits of the one element of slot 1.
pub(crate) fn set_rng_seed(e: &mut EngineState, ops: &Operands) {
    let seed = ops.get(1);
    let chip = OnChip {
        sbuf: e.sbuf.bytes_mut(),
        psum: e.psum.bytes_mut(),
    };
    let value = chip.read(seed, seed.pattern.base);
    e.rng.xorwow.seed_all(Engine::Vector, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_lang::DType;

    /// Random123's known-answer vectors for Philox4x32-10.
    #[test]
    fn philox_known_answers() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniform_values_are_exact_and_below_one() {
        assert_eq!(uniform(u32::MAX, 24), 1.0 - f32::EPSILON / 2.0);
        assert_eq!(uniform(0, 24), 0.0);
        assert_eq!(uniform(u32::MAX, 8), 255.0 / 256.0);
        assert_eq!(uniform(1 << 31, 8), 0.5);
        for m in [3, 4, 8, 11, 24] {
            let dtype = [
                DType::F8E5M2,
                DType::F8E4M3,
                DType::Bf16,
                DType::F16,
                DType::F32,
            ]
            .into_iter()
            .find(|d| d.significand_bits() == m)
            .unwrap_or(DType::F32);
            let u = uniform(u32::MAX, m);
            assert_eq!(
                convert::to_f32(dtype, convert::from_f32(dtype, u)),
                u,
                "{dtype:?}"
            );
        }
    }
}
