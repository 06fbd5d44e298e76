//! The random number generator: `rand`, `random_seed` and `dropout` (`nl` and `nisa`
//! spellings), checked against an independent Philox4x32-10 written here (Random123's known
//! answers first), and statistically with fixed seeds and wide bounds.

mod common;

use nki::ndarray::{Array2, Array3, Ix2, Ix3};
use nki::prelude::*;

/// Philox4x32-10 (Salmon et al., SC 2011), written from the paper's definition.
fn philox(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(0x9E37_79B9);
            k[1] = k[1].wrapping_add(0xBB67_AE85);
        }
        let p0 = u64::from(0xD251_1F53u32) * u64::from(c[0]);
        let p1 = u64::from(0xCD9E_8D57u32) * u64::from(c[2]);
        c = [
            ((p1 >> 32) as u32) ^ c[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

#[test]
fn the_reference_generator_has_random123s_known_answers() {
    assert_eq!(
        philox([0; 4], [0; 2]),
        [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    );
    assert_eq!(
        philox([u32::MAX; 4], [u32::MAX; 2]),
        [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
    );
    assert_eq!(
        philox(
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0]
        ),
        [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
    );
}

/// The documented value of element `(p, f)` of call `call` after seed `seed` in instance
/// `instance`, with `bits` significand bits.
fn uniform(seed: u32, instance: u32, call: u32, p: usize, f: usize, bits: u32) -> f64 {
    let w = philox([f as u32, p as u32, call, 0], [seed, instance])[0];
    f64::from(w >> (32 - bits)) / f64::from(1u32 << bits).max(1.0) / if bits == 32 { 1.0 } else { 1.0 }
}

#[kernel]
fn two_draws(seed: Hbm<i32, 1, 1>) -> Hbm<f32, 2, 128, 512> {
    let out = ndarray([2, 128, 512], f32, SharedHbm);
    let s = load(seed[..]);
    random_seed(s);
    let a = rand([128, 512], f32);
    let b = rand(shape = [128, 512], dtype = f32);
    store(out[[0, 0..128, 0..512]], a);
    store(out[[1, 0..128, 0..512]], b);
    out
}

#[test]
fn rand_is_philox_of_each_elements_counter() {
    let seed = Array2::from_elem((1, 1), 1234i32);
    let out = two_draws::host(&mut NeuronCore::default(), seed.view()).unwrap();
    for ((c, p, f), &v) in out.indexed_iter() {
        let want = uniform(1234, 0, c as u32, p, f, 24);
        assert_eq!(f64::from(v), want, "call {c} ({p}, {f})");
    }
}
