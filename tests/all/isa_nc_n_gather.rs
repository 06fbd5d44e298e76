//! `nc_n_gather(dst, data, indices)` (NKI 0.6's ISA call): per partition, the elements of
//! `data` (its free elements flattened row-major) at the positions the uint32 `indices` hold,
//! written to `dst` in the data's dtype; against plain loops. Both spellings (keywords, and
//! `nisa::` positional with the destination first), data of three dimensions, bf16 data, and
//! the listing's name.

use nki::bf16;
use nki::ndarray::{Array2, Array3};
use nki::prelude::*;

/// Keywords; f32 data of two free axes gathered by `[P, 6]` indices.
#[kernel]
fn gather_rows(x: Hbm<f32, 96, 4, 10>, idx: Hbm<u32, 96, 6>) -> Hbm<f32, 96, 6> {
    let out = ndarray([96, 6], f32, SharedHbm);
    let data = load(x[..]);
    let ix = load(idx[..]);
    let g = ndarray([96, 6], f32, Sbuf);
    nc_n_gather(dst = g, data = data, indices = ix);
    store(out[..], g);
    out
}

/// Positional, destination first; bf16 data, a three-dimensional result.
#[kernel]
fn gather_bf16(x: Hbm<bf16, 16, 700>, idx: Hbm<u32, 16, 3, 200>) -> Hbm<bf16, 16, 3, 200> {
    let out = ndarray([16, 3, 200], bf16, SharedHbm);
    let data = load(x[..]);
    let ix = load(idx[..]);
    let g = ndarray([16, 3, 200], bf16, Sbuf);
    nisa::nc_n_gather(g, data, ix);
    store(out[..], g);
    out
}

/// A small deterministic generator (splitmix64) for indices and data.
fn draws(n: usize, seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed;
    (0..n).map(move |_| {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

#[test]
fn keywords_gather_each_partition_s_flattened_elements() {
    let x = Array3::from_shape_vec(
        (96, 4, 10),
        draws(96 * 40, 1)
            .map(|v| (v % 2001) as f32 / 8.0 - 125.0)
            .collect(),
    )
    .unwrap();
    let idx = Array2::from_shape_vec((96, 6), draws(96 * 6, 2).map(|v| (v % 40) as u32).collect())
        .unwrap();
    let out = gather_rows::host(&mut NeuronCore::default(), x.view(), idx.view()).unwrap();
    for ((p, j), &got) in out.indexed_iter() {
        let f = idx[[p, j]] as usize;
        assert_eq!(
            got.to_bits(),
            x[[p, f / 10, f % 10]].to_bits(),
            "[{p}, {j}]"
        );
    }
}

#[test]
fn positional_destination_first_keeps_bf16_bits() {
    let x = Array2::from_shape_vec(
        (16, 700),
        draws(16 * 700, 3)
            .map(|v| bf16::from_bits(v as u16 & 0x7f7f))
            .collect(),
    )
    .unwrap();
    let idx = Array3::from_shape_vec(
        (16, 3, 200),
        draws(16 * 600, 4).map(|v| (v % 700) as u32).collect(),
    )
    .unwrap();
    let out = gather_bf16::host(&mut NeuronCore::default(), x.view(), idx.view()).unwrap();
    for ((p, a, b), &got) in out.indexed_iter() {
        let want = x[[p, idx[[p, a, b]] as usize]];
        assert_eq!(got.to_bits(), want.to_bits(), "[{p}, {a}, {b}]");
    }
}

#[test]
fn an_index_outside_its_partition_stops_the_launch() {
    let x = Array2::from_elem((16, 700), bf16::from_f32(1.0));
    let mut idx = Array3::<u32>::zeros((16, 3, 200));
    idx[[5, 1, 7]] = 700;
    let err = gather_bf16::host(&mut NeuronCore::default(), x.view(), idx.view()).unwrap_err();
    assert!(err.to_string().contains("700"), "{err}");
}

#[test]
fn the_listing_names_nc_n_gather() {
    let listing = gather_rows::KERNEL.program().to_string();
    assert!(listing.contains("nc_n_gather"), "{listing}");
}
