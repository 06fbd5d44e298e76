//! NKI 0.6's XORWOW instructions (`rng`, `rand_get_state`, `rand_set_state`, `set_rng_seed`,
//! `rand2`) against an independent XORWOW written plainly here (Marsaglia's `xorwow`, as cuRAND
//! steps it): a state set from a known tile, the bits drawn, the state read back after the
//! draws, the Vector engine's four generators per lane, lanes past a smaller state tile, the
//! engines' separate states, and the same bits on every thread count and strictness.

use nki::ndarray::{Array2, Array3};
use nki::prelude::*;

/// One XORWOW step on `[x, y, z, w, v, d]`: Marsaglia (2003), "Xorshift RNGs", section 3.
fn xorwow(s: &mut [u32]) -> u32 {
    let t = s[0] ^ (s[0] >> 2);
    s[0] = s[1];
    s[1] = s[2];
    s[2] = s[3];
    s[3] = s[4];
    s[4] = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
    s[5] = s[5].wrapping_add(362437);
    s[5].wrapping_add(s[4])
}

/// A state tile of `words` words per partition with no structure a bug could hide behind:
/// a multiplicative hash of the position, never all zero.
fn state_tile(parts: usize, words: usize, salt: u32) -> Array2<u32> {
    Array2::from_shape_fn((parts, words), |(p, k)| {
        ((p * words + k) as u32 + 1)
            .wrapping_mul(0x9E37_79B9)
            .wrapping_add(salt)
            .rotate_left(7)
    })
}

/// The bits each element gets: lane `p` steps generator `j mod g` for element `j` of its
/// partition (row-major), `g` the engine's generators per lane; the state advances in place.
fn draw(state: &mut Array2<u32>, g: usize, cols: usize) -> Array2<u32> {
    let mut out = Array2::zeros((state.nrows(), cols));
    for p in 0..state.nrows() {
        for j in 0..cols {
            let k = j % g;
            let mut s: Vec<u32> = (0..6).map(|i| state[[p, 6 * k + i]]).collect();
            out[[p, j]] = xorwow(&mut s);
            for i in 0..6 {
                state[[p, 6 * k + i]] = s[i];
            }
        }
    }
    out
}

/// The same generator in the other common spelling (Wikipedia's "Xorshift" article, after
/// Marsaglia): five words newest first and a separate counter.
fn xorwow_newest_first(x: &mut [u32; 5], counter: &mut u32) -> u32 {
    let mut t = x[4];
    let s = x[0];
    x[4] = x[3];
    x[3] = x[2];
    x[2] = x[1];
    x[1] = s;
    t ^= t >> 2;
    t ^= t << 1;
    t ^= s ^ (s << 4);
    x[0] = t;
    *counter = counter.wrapping_add(362437);
    t.wrapping_add(*counter)
}

#[test]
fn the_test_xorwow_agrees_with_the_newest_first_spelling() {
    let states = state_tile(16, 6, 9);
    for row in states.rows() {
        let mut s: Vec<u32> = row.to_vec();
        let mut x = [s[4], s[3], s[2], s[1], s[0]];
        let mut d = s[5];
        for _ in 0..100 {
            assert_eq!(xorwow(&mut s), xorwow_newest_first(&mut x, &mut d));
        }
        assert_eq!(
            [s[4], s[3], s[2], s[1], s[0], s[5]],
            [x[0], x[1], x[2], x[3], x[4], d]
        );
    }
}

/// GpSimd (trn2): the state from a tile, 10 draws per lane as uint32 and 5 as int8, the state
/// after them.
#[kernel(target = trn2)]
fn gpsimd_state(st: Hbm<u32, 128, 6>) -> (Hbm<u32, 128, 10>, Hbm<i8, 128, 5>, Hbm<u32, 128, 6>) {
    let o1 = ndarray([128, 10], u32, SharedHbm);
    let o2 = ndarray([128, 5], i8, SharedHbm);
    let o3 = ndarray([128, 6], u32, SharedHbm);
    let s = load(st[..]);
    rand_set_state(src_seeds = s);
    let a = ndarray([128, 10], u32, Sbuf);
    rng(dst = a, engine = gpsimd);
    let b = ndarray([128, 5], i8, Sbuf);
    rng(b, gpsimd);
    let g = ndarray([128, 6], u32, Sbuf);
    rand_get_state(dst = g);
    store(o1[..], a);
    store(o2[..], b);
    store(o3[..], g);
    (o1, o2, o3)
}

#[test]
fn gpsimd_draws_follow_the_state_set_and_read_back() {
    let st = state_tile(128, 6, 1);
    let mut core = NeuronCore::new(Target::Trn2);
    let (a, b, g) = gpsimd_state::host(&mut core, st.view()).unwrap();
    let mut want = st.clone();
    assert_eq!(a, draw(&mut want, 1, 10));
    let bits = draw(&mut want, 1, 5);
    assert_eq!(b, bits.mapv(|x| x as u8 as i8), "int8: the low 8 bits");
    assert_eq!(g, want, "the state after 15 draws per lane");
}

/// Vector (trn3): four generators per lane; 9 draws as uint16 (generators 0, 1, 2, 3, 0, …),
/// then a [128, 2, 3] int32 destination (6 draws, row-major), then the state; the GpSimd
/// engine's state is its own.
#[kernel(target = trn3)]
fn vector_state(
    st: Hbm<u32, 128, 24>,
    gs: Hbm<u32, 128, 6>,
) -> (
    Hbm<u16, 128, 9>,
    Hbm<i32, 128, 2, 3>,
    Hbm<u32, 128, 24>,
    Hbm<u32, 128, 6>,
) {
    let o1 = ndarray([128, 9], u16, SharedHbm);
    let o2 = ndarray([128, 2, 3], i32, SharedHbm);
    let o3 = ndarray([128, 24], u32, SharedHbm);
    let o4 = ndarray([128, 6], u32, SharedHbm);
    let s = load(st[..]);
    rand_set_state(s, engine = vector);
    let t = load(gs[..]);
    rand_set_state(t, engine = gpsimd);
    let a = ndarray([128, 9], u16, Sbuf);
    rng(dst = a);
    let b = ndarray([128, 2, 3], i32, Sbuf);
    rng(dst = b, engine = vector);
    let g = ndarray([128, 24], u32, Psum);
    rand_get_state(dst = g, engine = vector);
    let h = ndarray([128, 6], u32, Sbuf);
    rand_get_state(h, gpsimd);
    store(o1[..], a);
    store(o2[..], b);
    store(o3[..], g);
    store(o4[..], h);
    (o1, o2, o3, o4)
}

#[test]
fn vector_draws_take_the_lanes_four_generators_in_turn() {
    let st = state_tile(128, 24, 2);
    let gs = state_tile(128, 6, 3);
    let mut core = NeuronCore::new(Target::Trn3);
    let (a, b, g, h) = vector_state::host(&mut core, st.view(), gs.view()).unwrap();
    let mut want = st.clone();
    assert_eq!(a, draw(&mut want, 4, 9).mapv(|x| x as u16));
    // The second instruction starts again at generator 0 of each lane.
    let bits = draw(&mut want, 4, 6);
    let b_want = Array3::from_shape_fn((128, 2, 3), |(p, i, j)| bits[[p, 3 * i + j]] as i32);
    assert_eq!(b, b_want);
    assert_eq!(g, want, "the Vector state after the draws");
    assert_eq!(h, gs, "the GpSimd state, untouched by Vector draws");
}

/// A state tile of 32 partitions sets lanes 0 to 31; the others keep what they held (read
/// back first).
#[kernel(target = trn2)]
fn partial_state(st: Hbm<u32, 32, 6>) -> (Hbm<u32, 128, 6>, Hbm<u32, 128, 6>, Hbm<u32, 128, 3>) {
    let o1 = ndarray([128, 6], u32, SharedHbm);
    let o2 = ndarray([128, 6], u32, SharedHbm);
    let o3 = ndarray([128, 3], u32, SharedHbm);
    let before = ndarray([128, 6], u32, Sbuf);
    rand_get_state(before);
    let s = load(st[..]);
    rand_set_state(s);
    let d = ndarray([128, 3], u32, Sbuf);
    rng(d, engine = gpsimd);
    let after = ndarray([128, 6], u32, Sbuf);
    rand_get_state(after);
    store(o1[..], before);
    store(o2[..], after);
    store(o3[..], d);
    (o1, o2, o3)
}

#[test]
fn a_smaller_state_tile_sets_its_lanes_only() {
    let st = state_tile(32, 6, 4);
    let mut core = NeuronCore::new(Target::Trn2);
    let (before, after, d) = partial_state::host(&mut core, st.view()).unwrap();
    let mut want = before.clone();
    want.slice_mut(nki::ndarray::s![0..32, ..]).assign(&st);
    assert_eq!(d, draw(&mut want, 1, 3));
    assert_eq!(after, want);
    // The start state is not all zeros in any lane (XORWOW would then draw only its counter).
    for p in 0..128 {
        assert!(before.row(p).iter().take(5).any(|&w| w != 0), "lane {p}");
    }
}

/// Each instance of a grid sets its lanes from its own rows of the state tensor, draws and
/// reads the state back: instances' generators are their own, whatever thread runs them.
#[kernel(target = trn2)]
fn per_instance(st: Hbm<u32, 4, 128, 6>) -> (Hbm<u32, 4, 128, 64>, Hbm<u32, 4, 128, 6>) {
    let o1 = ndarray([4, 128, 64], u32, SharedHbm);
    let o2 = ndarray([4, 128, 6], u32, SharedHbm);
    let i = program_id(0);
    let s = load(st[[i, 0..128, 0..6]]);
    rand_set_state(s);
    let d = ndarray([128, 64], u32, Sbuf);
    rng(d, engine = gpsimd);
    let g = ndarray([128, 6], u32, Sbuf);
    rand_get_state(g);
    store(o1[[i, 0..128, 0..64]], d);
    store(o2[[i, 0..128, 0..6]], g);
    (o1, o2)
}

#[test]
fn instances_draw_their_own_bits_on_every_thread_count_and_strictness() {
    let st = Array3::from_shape_fn((4, 128, 6), |(i, p, k)| {
        ((i * 1000 + p * 6 + k) as u32 + 7).wrapping_mul(0x85EB_CA6B)
    });
    let cores = [
        NeuronCore::new(Target::Trn2),
        NeuronCore::new(Target::Trn2)
            .with_strict(false)
            .with_host_threads(1),
        NeuronCore::new(Target::Trn2)
            .with_strict(false)
            .with_host_threads(2),
        NeuronCore::new(Target::Trn2).with_host_threads(2),
    ];
    for (k, mut core) in cores.into_iter().enumerate() {
        let (d, g) = per_instance::grid([4]).host(&mut core, st.view()).unwrap();
        for i in 0..4 {
            let mut want = st.index_axis(nki::ndarray::Axis(0), i).to_owned();
            let bits = draw(&mut want, 1, 64);
            assert_eq!(
                d.index_axis(nki::ndarray::Axis(0), i),
                bits,
                "core {k}, instance {i}"
            );
            assert_eq!(
                g.index_axis(nki::ndarray::Axis(0), i),
                want,
                "core {k}, instance {i}"
            );
        }
    }
}

/// splitmix64 (Steele, Lea and Flood, 2014), written from its definition.
fn splitmix64(z: &mut u64) -> u64 {
    *z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut x = *z;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The state `docs/numerics.md` derives from a seed: generator `g` of lane `k` of engine `e`
/// (0 Vector, 1 GpSimd) from splitmix64 started at `seed · 2^32 + e · 2^16 + k · 2^8 + g`.
fn seeded_state(seed: u32, engine: u64, generators: usize) -> Array2<u32> {
    let mut out = Array2::zeros((128, 6 * generators));
    for k in 0..128 {
        for g in 0..generators {
            let mut z = (u64::from(seed) << 32) + (engine << 16) + ((k as u64) << 8) + g as u64;
            for pair in 0..3 {
                let r = splitmix64(&mut z);
                out[[k, 6 * g + 2 * pair]] = r as u32;
                out[[k, 6 * g + 2 * pair + 1]] = (r >> 32) as u32;
            }
        }
    }
    out
}

/// `set_rng_seed` from an int32 and from a uint32 tile, draws after each, and the state read
/// back (trn3: the Vector engine's state is readable there).
#[kernel(target = trn3)]
fn seeded(
    a: Hbm<i32, 1, 1>,
    b: Hbm<u32, 1, 1>,
) -> (
    Hbm<u32, 128, 5>,
    Hbm<u32, 128, 24>,
    Hbm<u32, 128, 7>,
    Hbm<u32, 128, 7>,
) {
    let o1 = ndarray([128, 5], u32, SharedHbm);
    let o2 = ndarray([128, 24], u32, SharedHbm);
    let o3 = ndarray([128, 7], u32, SharedHbm);
    let o4 = ndarray([128, 7], u32, SharedHbm);
    let s = load(a[..]);
    set_rng_seed(src_seeds = s);
    let d = ndarray([128, 5], u32, Sbuf);
    rng(d);
    let g = ndarray([128, 24], u32, Sbuf);
    rand_get_state(g, engine = vector);
    let t = load(b[..]);
    set_rng_seed(t);
    let e = ndarray([128, 7], u32, Sbuf);
    rng(e);
    // The same seed again restarts the same sequence.
    set_rng_seed(t);
    let f = ndarray([128, 7], u32, Sbuf);
    rng(f);
    store(o1[..], d);
    store(o2[..], g);
    store(o3[..], e);
    store(o4[..], f);
    (o1, o2, o3, o4)
}

#[test]
fn set_rng_seed_derives_the_documented_state_and_repeats_its_sequence() {
    let a = Array2::from_elem((1, 1), -7i32);
    let b = Array2::from_elem((1, 1), 0xDEAD_BEEFu32);
    let mut core = NeuronCore::new(Target::Trn3);
    let (d, g, e, f) = seeded::host(&mut core, a.view(), b.view()).unwrap();
    let mut want = seeded_state(-7i32 as u32, 0, 4);
    assert_eq!(d, draw(&mut want, 4, 5));
    assert_eq!(g, want);
    let mut want = seeded_state(0xDEAD_BEEF, 0, 4);
    assert_eq!(e, draw(&mut want, 4, 7));
    assert_eq!(f, e, "the same seed, the same sequence");
}

/// Each instance starts with both engines' lanes seeded from its index (numerics.md); a
/// trn1 kernel draws on the Vector engine from it.
#[kernel(target = trn3)]
fn start_states() -> (Hbm<u32, 3, 128, 24>, Hbm<u32, 3, 128, 6>) {
    let o1 = ndarray([3, 128, 24], u32, SharedHbm);
    let o2 = ndarray([3, 128, 6], u32, SharedHbm);
    let i = program_id(0);
    let v = ndarray([128, 24], u32, Sbuf);
    rand_get_state(v, engine = vector);
    let g = ndarray([128, 6], u32, Sbuf);
    rand_get_state(g, engine = gpsimd);
    store(o1[[i, 0..128, 0..24]], v);
    store(o2[[i, 0..128, 0..6]], g);
    (o1, o2)
}

#[kernel]
fn trn1_draws() -> Hbm<i16, 2, 128, 6> {
    let out = ndarray([2, 128, 6], i16, SharedHbm);
    let d = ndarray([128, 6], i16, Sbuf);
    rng(d, engine = vector);
    store(out[[program_id(0), 0..128, 0..6]], d);
    out
}

#[test]
fn instances_start_from_their_index_and_trn1_draws_on_the_vector_engine() {
    for threads in [1, 2] {
        let mut core = NeuronCore::new(Target::Trn3).with_host_threads(threads);
        let (v, g) = start_states::grid([3]).host(&mut core).unwrap();
        for i in 0..3 {
            let ax = nki::ndarray::Axis(0);
            assert_eq!(v.index_axis(ax, i), seeded_state(i as u32, 0, 4));
            assert_eq!(g.index_axis(ax, i), seeded_state(i as u32, 1, 1));
        }
        let mut core = NeuronCore::new(Target::Trn1).with_host_threads(threads);
        let out = trn1_draws::grid([2]).host(&mut core).unwrap();
        for i in 0..2 {
            let mut want = seeded_state(i as u32, 0, 4);
            let bits = draw(&mut want, 4, 6).mapv(|x| x as u16 as i16);
            assert_eq!(
                out.index_axis(nki::ndarray::Axis(0), i),
                bits,
                "instance {i}"
            );
        }
    }
}

/// `rand2`'s value of a draw, as `docs/numerics.md` states it, each fp32 operation computed
/// exactly in f64 and rounded to fp32 (nearest even) by the cast.
fn rand2_value(x: u32, min: f32, max: f32) -> f32 {
    let xf = f64::from(x) as f32;
    let u = (f64::from(xf) * 2f64.powi(-32) + 2f64.powi(-33)) as f32;
    let span = (f64::from(max) - f64::from(min)) as f32;
    let scaled = (f64::from(u) * f64::from(span)) as f32;
    (f64::from(min) + f64::from(scaled)) as f32
}

/// `rand2` with number bounds into fp32, with `[P, 1]` column bounds into bf16, and into int32;
/// an `rng` between them continues the Vector engine's sequence.
#[kernel(target = trn3)]
fn uniform2(
    st: Hbm<u32, 128, 24>,
    lo: Hbm<f32, 128, 1>,
    hi: Hbm<f32, 128, 1>,
) -> (
    Hbm<f32, 128, 64>,
    Hbm<u32, 128, 3>,
    Hbm<bf16, 128, 10>,
    Hbm<i32, 128, 33>,
) {
    let o1 = ndarray([128, 64], f32, SharedHbm);
    let o2 = ndarray([128, 3], u32, SharedHbm);
    let o3 = ndarray([128, 10], bf16, SharedHbm);
    let o4 = ndarray([128, 33], i32, SharedHbm);
    let s = load(st[..]);
    rand_set_state(s, engine = vector);
    let a = ndarray([128, 64], f32, Sbuf);
    rand2(dst = a, min = -2.5, max = 3.0);
    let r = ndarray([128, 3], u32, Sbuf);
    rng(r);
    let l = load(lo[..]);
    let h = load(hi[..]);
    let b = ndarray([128, 10], bf16, Psum);
    rand2(b, l, h);
    let c = ndarray([128, 33], i32, Sbuf);
    rand2(c, -100.0, 100.0);
    store(o1[..], a);
    store(o2[..], r);
    store(o3[..], b);
    store(o4[..], c);
    (o1, o2, o3, o4)
}

#[test]
fn rand2_maps_each_draw_as_documented_within_its_bounds() {
    let st = state_tile(128, 24, 5);
    let lo = Array2::from_shape_fn((128, 1), |(p, _)| -(p as f32) / 4.0);
    let hi = Array2::from_shape_fn((128, 1), |(p, _)| 1.0 + (p as f32) * 3.0);
    let mut core = NeuronCore::new(Target::Trn3);
    let (a, r, b, c) = uniform2::host(&mut core, st.view(), lo.view(), hi.view()).unwrap();
    let mut want = st.clone();
    let x = draw(&mut want, 4, 64);
    for ((p, j), &v) in a.indexed_iter() {
        let w = rand2_value(x[[p, j]], -2.5, 3.0);
        assert_eq!(v.to_bits(), w.to_bits(), "fp32 ({p}, {j})");
        assert!((-2.5..=3.0).contains(&v), "({p}, {j}): {v}");
    }
    assert_eq!(r, draw(&mut want, 4, 3), "rng continues the sequence");
    let x = draw(&mut want, 4, 10);
    for ((p, j), &v) in b.indexed_iter() {
        let w = rand2_value(x[[p, j]], lo[[p, 0]], hi[[p, 0]]);
        assert_eq!(v, bf16::from_f32(w), "bf16 ({p}, {j})");
        let v = v.to_f32();
        // bf16 rounding may reach past a bound by half a bf16 ulp of it.
        let slack = 2f32.powi(-8) * lo[[p, 0]].abs().max(hi[[p, 0]].abs());
        assert!(
            v >= lo[[p, 0]] - slack && v <= hi[[p, 0]] + slack,
            "({p}, {j}): {v}"
        );
    }
    let x = draw(&mut want, 4, 33);
    for ((p, j), &v) in c.indexed_iter() {
        let w = f64::from(rand2_value(x[[p, j]], -100.0, 100.0)).round_ties_even() as i32;
        assert_eq!(v, w, "int32 ({p}, {j})");
        assert!((-100..=100).contains(&v));
    }
    // The uniform values' mean and spread over the 8192 fp32 draws: 0.25 and 5.5 / √12.
    let n = a.len() as f64;
    let mean = a.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = a
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    assert!((mean - 0.25).abs() < 0.05, "mean {mean}");
    assert!(
        (var.sqrt() - 5.5 / 12f64.sqrt()).abs() < 0.05,
        "sd {}",
        var.sqrt()
    );
}

/// One draw per partition into `[0, 1]` and one into `[-2.5, 3]`, from the same state each.
#[kernel(target = trn3)]
fn extremes(st: Hbm<u32, 128, 24>) -> (Hbm<f32, 128, 1>, Hbm<f32, 128, 1>) {
    let o1 = ndarray([128, 1], f32, SharedHbm);
    let o2 = ndarray([128, 1], f32, SharedHbm);
    let s = load(st[..]);
    rand_set_state(s, engine = vector);
    let a = ndarray([128, 1], f32, Sbuf);
    rand2(a, 0.0, 1.0);
    rand_set_state(s, engine = vector);
    let b = ndarray([128, 1], f32, Sbuf);
    rand2(b, -2.5, 3.0);
    store(o1[..], a);
    store(o2[..], b);
    (o1, o2)
}

#[test]
fn rand2_maps_the_extreme_draws_into_the_closed_range() {
    // With x = y = z = w = v = 0 a step leaves them 0 and returns d + 362437: even lanes
    // draw 0, odd lanes 2^32 − 1 (which rounds to 2^32 in fp32: u = 1).
    let st = Array2::from_shape_fn((128, 24), |(p, k)| match (k, p % 2) {
        (5, 0) => 0u32.wrapping_sub(362437),
        (5, _) => u32::MAX.wrapping_sub(362437),
        _ => 0,
    });
    let mut core = NeuronCore::new(Target::Trn3);
    let (a, b) = extremes::host(&mut core, st.view()).unwrap();
    for p in 0..128 {
        let (x, unit, wide) = if p % 2 == 0 {
            (0, 2f32.powi(-33), -2.5)
        } else {
            (u32::MAX, 1.0, 3.0)
        };
        assert_eq!(a[[p, 0]], unit, "partition {p}");
        assert_eq!(a[[p, 0]], rand2_value(x, 0.0, 1.0));
        assert_eq!(b[[p, 0]], wide, "partition {p}");
    }
}

/// `rand_set_state` from a tile no instruction wrote seeds the lanes from stale SBUF.
#[kernel(target = trn2)]
fn state_from_nothing(st: Hbm<u32, 128, 6>) -> Hbm<u32, 128, 4> {
    let out = ndarray([128, 4], u32, SharedHbm);
    let s = ndarray([128, 6], u32, Sbuf);
    // Half of the state tile written: the other half is what SBUF held.
    s[[0..64, 0..6]] = load(st[[0..64, 0..6]]);
    rand_set_state(s);
    let d = ndarray([128, 4], u32, Sbuf);
    rng(d, engine = gpsimd);
    store(out[..], d);
    out
}

#[test]
fn strict_launches_refuse_a_state_read_from_unwritten_bytes() {
    let st = state_tile(128, 6, 8);
    let mut strict = NeuronCore::new(Target::Trn2).with_strict(true);
    let why = state_from_nothing::host(&mut strict, st.view())
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("rand_set_state") && why.contains("where no instruction of this launch wrote"),
        "{why}"
    );
    // Partition 64's first word, the first element the load left unwritten.
    assert!(why.contains("element 384 of the operand"), "{why}");
    // A plain core runs it: the lanes the written half set draw the independent XORWOW's bits.
    let mut plain = NeuronCore::new(Target::Trn2).with_strict(false);
    let d = state_from_nothing::host(&mut plain, st.view()).unwrap();
    let mut half = st.slice(nki::ndarray::s![0..64, ..]).to_owned();
    let want = draw(&mut half, 1, 4);
    assert_eq!(d.slice(nki::ndarray::s![0..64, ..]), want);
}

/// Draws inside an `affine_range` loop among instructions that compute each partition on
/// their own (which plain runs run a block of partitions at a time, or split between host
/// threads): every host path, and the schedule check's orders, give the sequential bits.
#[kernel(target = trn3)]
fn draws_in_a_loop(st: Hbm<u32, 128, 24>, x: Hbm<f32, 128, 2048>) -> Hbm<f32, 4, 128, 2048> {
    let out = ndarray([4, 128, 2048], f32, SharedHbm);
    let s = load(st[..]);
    rand_set_state(s, engine = vector);
    for i in affine_range(4) {
        let t = load(x[..]);
        let y = multiply(t, 2.0);
        let r = ndarray([128, 2048], f32, Sbuf);
        rand2(r, 0.0, 1.0);
        let z = add(y, r);
        store(out[[i, 0..128, 0..2048]], z);
    }
    out
}

#[test]
fn every_host_path_and_schedule_draws_the_sequential_bits() {
    use nki::strict::ScheduleCheck;
    let st = state_tile(128, 24, 10);
    let x = Array2::from_shape_fn((128, 2048), |(p, f)| ((p * 2048 + f) % 97) as f32 * 0.5);
    let mut want = st.clone();
    let expected: Vec<Array2<f32>> = (0..4)
        .map(|_| {
            let bits = draw(&mut want, 4, 2048);
            Array2::from_shape_fn((128, 2048), |(p, f)| {
                let y = (f64::from(x[[p, f]]) * 2.0) as f32;
                (f64::from(y) + f64::from(rand2_value(bits[[p, f]], 0.0, 1.0))) as f32
            })
        })
        .collect();
    let cores = [
        NeuronCore::new(Target::Trn3),
        NeuronCore::new(Target::Trn3)
            .with_strict(false)
            .with_host_threads(1),
        NeuronCore::new(Target::Trn3)
            .with_strict(false)
            .with_host_threads(2),
        NeuronCore::new(Target::Trn3)
            .with_strict(false)
            .with_host_cache_bytes(1024),
        NeuronCore::new(Target::Trn3).with_schedule_check(Some(ScheduleCheck::DEFAULT)),
    ];
    for (k, mut core) in cores.into_iter().enumerate() {
        let out = draws_in_a_loop::host(&mut core, st.view(), x.view()).unwrap();
        for (i, e) in expected.iter().enumerate() {
            let got = out.index_axis(nki::ndarray::Axis(0), i);
            assert!(
                got.iter().zip(e).all(|(a, b)| a.to_bits() == b.to_bits()),
                "core {k}, iteration {i}"
            );
        }
    }
}

/// The listing names each instruction and its engine.
#[test]
fn the_listing_shows_each_instruction() {
    let listing = vector_state::KERNEL.program().to_string();
    for line in [
        "GpSimd  rand_set_state xorwow-state <-",
        "Vector  rng",
        "Vector  rand_get_state",
        "GpSimd  rand_get_state",
    ] {
        assert!(listing.contains(line), "{line:?} in\n{listing}");
    }
    let listing = uniform2::KERNEL.program().to_string();
    assert!(listing.contains("uniform[-2.5, 3.0]"), "{listing}");
}
