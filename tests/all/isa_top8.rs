//! The Vector engine's top-8 searches, `max8`, `nc_find_index8` and `nc_match_replace8`,
//! against plain loops written here from the definitions of `docs/numerics.md` ("Top-8
//! searches"): ties, negative values, NaN and signed zeros, each dtype, tiles with several free
//! axes, ragged tiles masked on their partitions, and NKI's top-k pattern (`max8`, then
//! `nc_match_replace8` to knock the 8 found out, then `max8` again).

use crate::common;

use common::*;
use nki::ndarray::{Array2, Array3, ArrayView2, Ix2, Ix3};
use nki::prelude::*;
use nki::program::DType;

// ---------------------------------------------------------------------------------------------
// Independent references.
// ---------------------------------------------------------------------------------------------

/// Whether `a` ranks above `b`: every NaN above everything else, then by value, `+0` above `−0`.
fn above(a: f32, b: f32) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && !b.is_nan();
    }
    a > b || (a == 0.0 && b == 0.0 && a.is_sign_positive() && b.is_sign_negative())
}

/// The 8 largest of `row`, largest first, by selection: each round takes the first element that
/// no other unused element ranks above.
fn top8(row: &[f32]) -> Vec<f32> {
    let mut used = vec![false; row.len()];
    let mut out = Vec::new();
    for _ in 0..8 {
        let mut best: Option<usize> = None;
        for i in 0..row.len() {
            if !used[i] && best.is_none_or(|b| above(row[i], row[b])) {
                best = Some(i);
            }
        }
        let b = best.unwrap();
        used[b] = true;
        out.push(row[b]);
    }
    out
}

/// Whether a value matches an element: equal bits, or both NaN.
fn matches(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// The position each value takes in `row`, values visited in `order`: the first matching
/// element no earlier value took (`u32::MAX` when none is left).
fn positions(row: &[f32], vals: &[f32], order: &[usize]) -> Vec<u32> {
    let mut taken = vec![false; row.len()];
    let mut out = vec![u32::MAX; vals.len()];
    for &j in order {
        for i in 0..row.len() {
            if !taken[i] && matches(row[i], vals[j]) {
                taken[i] = true;
                out[j] = i as u32;
                break;
            }
        }
    }
    out
}

const FORWARD: [usize; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
const BACKWARD: [usize; 8] = [7, 6, 5, 4, 3, 2, 1, 0];

fn rows(a: ArrayView2<'_, f32>) -> Vec<Vec<f32>> {
    a.rows().into_iter().map(|r| r.to_vec()).collect()
}

// ---------------------------------------------------------------------------------------------
// max8 of every dtype it is given, with ties, negatives and specials.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn max8_dtypes(
    a: Hbm<f32, 128, 300>,
    b: Hbm<bf16, 64, 40>,
    c: Hbm<i32, 32, 16>,
    d: Hbm<f32, 128, 4, 25>,
) -> (
    Hbm<f32, 128, 8>,
    Hbm<bf16, 64, 8>,
    Hbm<i32, 32, 8>,
    Hbm<f32, 128, 8>,
    Hbm<bf16, 128, 8>,
) {
    let oa = ndarray([128, 8], f32, SharedHbm);
    let ob = ndarray([64, 8], bf16, SharedHbm);
    let oc = ndarray([32, 8], i32, SharedHbm);
    let od = ndarray([128, 8], f32, SharedHbm);
    let oe = ndarray([128, 8], bf16, SharedHbm);
    let ta = load(a[..]);
    let m_a = max8(src = ta);
    store(oa[..], m_a);
    let m_b = max8(load(b[..]));
    store(ob[..], m_b);
    let m_c = max8(load(c[..]));
    store(oc[..], m_c);
    // Four free axes' worth of elements in one partition, read row-major.
    let m_d = max8(load(d[..]));
    store(od[..], m_d);
    let m_e = max8(ta, dtype = bf16);
    store(oe[..], m_e);
    (oa, ob, oc, od, oe)
}

#[test]
fn max8_gives_the_eight_largest_in_descending_order() {
    // Small integers: many ties.
    let mut a = rand_int(Ix2(128, 300), 1, -20, 20);
    // Negative values only.
    for v in a.row_mut(1).iter_mut() {
        *v = -1.0 - v.abs();
    }
    // NaN, infinities and both zeros.
    let special = [
        f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1.5,
    ];
    a.row_mut(2).fill(-100.0);
    for (v, s) in a.row_mut(2).iter_mut().zip(special) {
        *v = s;
    }
    a.row_mut(3).fill(-3.0);
    a.row_mut(3)[299] = -2.0;
    let b = rand_f32(Ix2(64, 40), 2, -100.0, 100.0).mapv(bf16::from_f32);
    let c = Array2::from_shape_fn((32, 16), |(p, f)| ((p * 7 + f * 13) % 11) as i32 - 5);
    let d = rand_f32(Ix3(128, 4, 25), 3, -1.0, 1.0);
    let (oa, ob, oc, od, oe) = max8_dtypes::host(
        &mut NeuronCore::default(),
        a.view(),
        b.view(),
        c.view(),
        d.view(),
    )
    .unwrap();
    for (p, row) in rows(a.view()).iter().enumerate() {
        let want = top8(row);
        assert_bits(&format!("f32 row {p}"), oa.row(p).iter(), want.clone());
        let e: Vec<bf16> = want.iter().map(|&v| bf16::from_f32(v)).collect();
        let got: Vec<bf16> = oe.row(p).to_vec();
        for (g, w) in got.iter().zip(&e) {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "bf16 result, row {p}: {got:?} != {e:?}"
            );
        }
    }
    let want = [f32::INFINITY, 1.5, 0.0, 0.0, -0.0, -0.0, -100.0];
    assert!(oa[[2, 0]].is_nan());
    assert_eq!(
        oa.row(2)
            .iter()
            .skip(1)
            .map(|v| v.to_bits())
            .collect::<Vec<_>>(),
        want.map(f32::to_bits)
    );
    assert_eq!(
        oa.row(3).to_vec(),
        vec![-2.0, -3.0, -3.0, -3.0, -3.0, -3.0, -3.0, -3.0]
    );
    for p in 0..64 {
        let row: Vec<f32> = b.row(p).iter().map(|v| v.to_f32()).collect();
        let want: Vec<bf16> = top8(&row).into_iter().map(bf16::from_f32).collect();
        assert_eq!(ob.row(p).to_vec(), want, "bf16 row {p}");
    }
    for p in 0..32 {
        let row: Vec<f32> = c.row(p).iter().map(|&v| v as f32).collect();
        let want: Vec<i32> = top8(&row).into_iter().map(|v| v as i32).collect();
        assert_eq!(oc.row(p).to_vec(), want, "int32 row {p}");
    }
    for p in 0..128 {
        let row: Vec<f32> = d
            .slice(nki::ndarray::s![p, .., ..])
            .iter()
            .copied()
            .collect();
        assert_bits(&format!("[P, 4, 25] row {p}"), od.row(p).iter(), top8(&row));
    }
    let prog = max8_dtypes::KERNEL.program();
    assert_eq!(tile(prog, "m_a"), (DType::F32, vec![128, 8]));
    assert_eq!(tile(prog, "m_b"), (DType::Bf16, vec![64, 8]));
    assert_eq!(tile(prog, "m_c"), (DType::I32, vec![32, 8]));
    assert_eq!(tile(prog, "m_e"), (DType::Bf16, vec![128, 8]));
    assert!(has_instr(prog, "Vector", "max8"), "{prog}");
}

// ---------------------------------------------------------------------------------------------
// nc_find_index8 and nc_match_replace8 after max8.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn find_and_replace(
    a: Hbm<f32, 128, 200>,
    v: Hbm<f32, 128, 8>,
) -> (
    Hbm<u32, 128, 8>,
    Hbm<u16, 128, 8>,
    Hbm<f32, 128, 200>,
    Hbm<u32, 128, 8>,
    Hbm<f32, 128, 200>,
) {
    let o_idx = ndarray([128, 8], u32, SharedHbm);
    let o_idx16 = ndarray([128, 8], u16, SharedHbm);
    let o_rep = ndarray([128, 200], f32, SharedHbm);
    let o_given = ndarray([128, 8], u32, SharedHbm);
    let o_rep_given = ndarray([128, 200], f32, SharedHbm);
    let x = load(a[..]);
    let top = max8(x);
    let idx = nc_find_index8(data = x, vals = top);
    store(o_idx[..], idx);
    let idx16 = nc_find_index8(x, top, dtype = u16);
    store(o_idx16[..], idx16);
    let rep = nc_match_replace8(data = x, vals = top, imm = -1e30);
    store(o_rep[..], rep);
    // Values given by the caller: duplicates, and values the row does not hold.
    let vals = load(v[..]);
    store(o_given[..], nc_find_index8(x, vals));
    store(o_rep_given[..], nc_match_replace8(x, vals, 7.5));
    (o_idx, o_idx16, o_rep, o_given, o_rep_given)
}

#[test]
fn find_index8_and_match_replace8_take_first_occurrences() {
    let mut a = rand_int(Ix2(128, 200), 4, -6, 6);
    a.row_mut(0).fill(1.0);
    for (v, s) in a.row_mut(1).iter_mut().zip([f32::NAN, -0.0, 0.0, f32::NAN]) {
        *v = s;
    }
    let mut v = rand_int(Ix2(128, 8), 5, -8, 8);
    v.row_mut(0).fill(1.0);
    for (x, s) in v
        .row_mut(1)
        .iter_mut()
        .zip([0.0, f32::NAN, -0.0, f32::NAN, 99.0])
    {
        *x = s;
    }
    let (idx, idx16, rep, given, rep_given) =
        find_and_replace::host(&mut NeuronCore::default(), a.view(), v.view()).unwrap();
    for (p, row) in rows(a.view()).iter().enumerate() {
        let top = top8(row);
        let want = positions(row, &top, &FORWARD);
        assert!(want.iter().all(|&i| i != u32::MAX));
        assert_eq!(idx.row(p).to_vec(), want, "indices of max8, row {p}");
        let want16: Vec<u16> = want.iter().map(|&i| i as u16).collect();
        assert_eq!(idx16.row(p).to_vec(), want16, "uint16 indices, row {p}");
        let mut replaced = row.clone();
        for i in positions(row, &top, &BACKWARD) {
            replaced[i as usize] = -1e30;
        }
        assert_bits(&format!("replaced, row {p}"), rep.row(p).iter(), replaced);

        let vals = v.row(p).to_vec();
        let want = positions(row, &vals, &FORWARD);
        assert_eq!(
            given.row(p).to_vec(),
            want,
            "indices of given values, row {p}"
        );
        let mut replaced = row.clone();
        for i in positions(row, &vals, &BACKWARD) {
            if i != u32::MAX {
                replaced[i as usize] = 7.5;
            }
        }
        assert_bits(
            &format!("given values replaced, row {p}"),
            rep_given.row(p).iter(),
            replaced,
        );
    }
    // Duplicated values take successive occurrences; a value not there gives all ones.
    assert_eq!(given.row(0).to_vec(), (0..8).collect::<Vec<u32>>());
    assert_eq!(&given.row(1).to_vec()[..5], &[2, 0, 1, 3, u32::MAX]);
    let prog = find_and_replace::KERNEL.program();
    assert_eq!(tile(prog, "idx"), (DType::U32, vec![128, 8]));
    assert_eq!(tile(prog, "idx16"), (DType::U16, vec![128, 8]));
    assert_eq!(tile(prog, "rep"), (DType::F32, vec![128, 200]));
    assert!(has_instr(prog, "Vector", "nc_find_index8"), "{prog}");
    assert!(has_instr(prog, "Vector", "nc_match_replace8"), "{prog}");
}

// ---------------------------------------------------------------------------------------------
// Ragged tiles: the last tile's partitions masked; top-16 as NKI's kernels compute a top-k.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn ragged_top16(x: Hbm<f32, N, 96>) -> (Hbm<f32, N, 16>, Hbm<u32, N, 16>) {
    let vals = ndarray([N, 16], f32, SharedHbm);
    let idxs = ndarray([N, 16], u32, SharedHbm);
    let (i_p, i_f) = mgrid![0..128, 0..96];
    let (j_p, j_f) = mgrid![0..128, 0..8];
    for k in affine_range((N + 127) / 128) {
        let t = load(x[[k * 128 + i_p, i_f]], mask = k * 128 + i_p < N);
        let m1 = max8(t, mask = k * 128 + i_p < N);
        let i1 = nc_find_index8(t, m1, mask = k * 128 + i_p < N);
        let rest = nc_match_replace8(t, m1, -3.0e38, mask = k * 128 + i_p < N);
        let m2 = max8(rest, mask = k * 128 + i_p < N);
        let i2 = nc_find_index8(rest, m2, mask = k * 128 + i_p < N);
        store(vals[[k * 128 + j_p, j_f]], m1, mask = k * 128 + j_p < N);
        store(vals[[k * 128 + j_p, 8 + j_f]], m2, mask = k * 128 + j_p < N);
        store(idxs[[k * 128 + j_p, j_f]], i1, mask = k * 128 + j_p < N);
        store(idxs[[k * 128 + j_p, 8 + j_f]], i2, mask = k * 128 + j_p < N);
    }
    (vals, idxs)
}

#[test]
fn top16_of_ragged_tiles_through_masks() {
    let mut core = NeuronCore::default();
    for n in [1, 100, 128, 200] {
        let x: Array2<f32> = rand_int(Ix2(n, 96), 6 + n as u64, -30, 30);
        let (vals, idxs) =
            ragged_top16::host(&mut core, x.view()).unwrap_or_else(|e| panic!("N = {n}: {e}"));
        for (p, row) in rows(x.view()).iter().enumerate() {
            // Top 16 by selection over the whole row; indices of successive occurrences.
            let mut used = vec![false; row.len()];
            let (mut want_v, mut want_i) = (Vec::new(), Vec::new());
            for _ in 0..16 {
                let mut best: Option<usize> = None;
                for i in 0..row.len() {
                    if !used[i] && best.is_none_or(|b| row[i] > row[b]) {
                        best = Some(i);
                    }
                }
                let b = best.unwrap();
                used[b] = true;
                want_v.push(row[b]);
                want_i.push(b as u32);
            }
            assert_bits(&format!("N = {n}, row {p}"), vals.row(p).iter(), want_v);
            assert_eq!(idxs.row(p).to_vec(), want_i, "N = {n}, row {p}");
        }
    }
}

/// A `[P, 3, 8]` tile of values is 8 elements per partition too; the search reads `data`'s
/// free axes row-major.
#[kernel]
fn three_axes(
    a: Hbm<f32, 16, 2, 10>,
    v: Hbm<f32, 16, 1, 8>,
) -> (Hbm<u32, 16, 8>, Hbm<f32, 16, 2, 10>) {
    let o = ndarray([16, 8], u32, SharedHbm);
    let r = ndarray([16, 2, 10], f32, SharedHbm);
    let x = load(a[..]);
    let vals = load(v[..]);
    store(o[..], nc_find_index8(x, vals));
    store(r[..], nc_match_replace8(x, vals, 0.5));
    (o, r)
}

#[test]
fn searches_read_several_free_axes_row_major() {
    let a: Array3<f32> = rand_int(Ix3(16, 2, 10), 7, 0, 5);
    let v: Array3<f32> = rand_int(Ix3(16, 1, 8), 8, 0, 6);
    let (o, r) = three_axes::host(&mut NeuronCore::default(), a.view(), v.view()).unwrap();
    for p in 0..16 {
        let row: Vec<f32> = a
            .slice(nki::ndarray::s![p, .., ..])
            .iter()
            .copied()
            .collect();
        let vals: Vec<f32> = v
            .slice(nki::ndarray::s![p, .., ..])
            .iter()
            .copied()
            .collect();
        assert_eq!(
            o.row(p).to_vec(),
            positions(&row, &vals, &FORWARD),
            "row {p}"
        );
        let mut replaced = row.clone();
        for i in positions(&row, &vals, &BACKWARD) {
            if i != u32::MAX {
                replaced[i as usize] = 0.5;
            }
        }
        let got: Vec<f32> = r
            .slice(nki::ndarray::s![p, .., ..])
            .iter()
            .copied()
            .collect();
        assert_bits(&format!("replaced, row {p}"), got.iter(), replaced);
    }
}

// ---------------------------------------------------------------------------------------------
// NKI's documented pairing of repeated values: nc_find_index8 takes their occurrences in
// ascending order, nc_match_replace8's dst_idx in descending order.
// ---------------------------------------------------------------------------------------------

#[kernel]
fn documented_pairing(
    a: Hbm<f32, 2, 11>,
    v: Hbm<f32, 2, 8>,
) -> (Hbm<u32, 2, 8>, Hbm<u32, 2, 8>, Hbm<f32, 2, 11>) {
    let o_find = ndarray([2, 8], u32, SharedHbm);
    let o_idx = ndarray([2, 8], u32, SharedHbm);
    let o_rep = ndarray([2, 11], f32, SharedHbm);
    let x = load(a[..]);
    let vals = load(v[..]);
    store(o_find[..], nc_find_index8(data = x, vals = vals));
    let idx = ndarray([2, 8], u32, Sbuf);
    let rep = nc_match_replace8(data = x, vals = vals, imm = 0.0, dst_idx = idx);
    store(o_idx[..], idx);
    store(o_rep[..], rep);
    (o_find, o_idx, o_rep)
}

#[test]
fn repeated_values_pair_with_occurrences_as_nki_documents() {
    // The example of NKI's nc_match_replace8 page, twice.
    let row = [1.0, 2.0, 3.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
    let vals = [3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
    let a = Array2::from_shape_fn((2, 11), |(_, f)| row[f]);
    let v = Array2::from_shape_fn((2, 8), |(_, f)| vals[f]);
    let (find, idx, rep) =
        documented_pairing::host(&mut NeuronCore::default(), a.view(), v.view()).unwrap();
    for p in 0..2 {
        assert_eq!(find.row(p).to_vec(), vec![2, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(idx.row(p).to_vec(), vec![2, 10, 9, 8, 7, 6, 5, 4]);
        assert_eq!(
            rep.row(p).to_vec(),
            vec![1.0, 2.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
    }
}
